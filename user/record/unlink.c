// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Uprobe links destroyed off the loop: each close waits for an RCU grace
 * period. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

#include "record_int.h"

struct rec_unlinker {
	pthread_mutex_t lock;
	pthread_cond_t more;
	pthread_t thread;
	bool started, stop;
	struct bpf_link **q; /* links waiting, destroyed from the end */
	size_t n, cap;
};

int rec_unlinker__new(struct rec_unlinker **u)
{
	*u = calloc(1, sizeof(**u));
	if (!*u)
		return -ENOMEM;
	pthread_mutex_init(&(*u)->lock, NULL);
	pthread_cond_init(&(*u)->more, NULL);
	return 0;
}

static void *run(void *arg)
{
	struct rec_unlinker *u = arg;
	struct bpf_link *link;

	pthread_mutex_lock(&u->lock);
	for (;;) {
		while (!u->n && !u->stop)
			pthread_cond_wait(&u->more, &u->lock);
		if (!u->n)
			break;
		link = u->q[--u->n];
		pthread_mutex_unlock(&u->lock);
		bpf_link__destroy(link);
		pthread_mutex_lock(&u->lock);
	}
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

/* The thread, with every signal blocked. */
static bool start(struct rec_unlinker *u)
{
	sigset_t all, old;

	sigfillset(&all);
	if (pthread_sigmask(SIG_BLOCK, &all, &old))
		return false;
	u->started = !pthread_create(&u->thread, NULL, run, u);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return u->started;
}

void rec_unlinker__put(struct rec_unlinker *u, struct bpf_link *link)
{
	bool queued = false;

	if (!link)
		return;
	if (u) {
		pthread_mutex_lock(&u->lock);
		if (!u->stop && (u->started || start(u))) {
			if (u->n == u->cap) {
				size_t cap = u->cap ? u->cap * 2 : 64;
				struct bpf_link **q = realloc(u->q, cap * sizeof(*q));

				if (q) {
					u->q = q;
					u->cap = cap;
				}
			}
			if (u->n < u->cap) {
				u->q[u->n++] = link;
				queued = true;
				pthread_cond_signal(&u->more);
			}
		}
		pthread_mutex_unlock(&u->lock);
	}
	if (!queued)
		bpf_link__destroy(link); /* here and now, then */
}

void rec_unlinker__destroy(struct rec_unlinker *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	u->stop = true;
	pthread_cond_signal(&u->more);
	pthread_mutex_unlock(&u->lock);
	if (u->started)
		pthread_join(u->thread, NULL);
	/* a link queued after the thread stopped is destroyed by put */
	pthread_cond_destroy(&u->more);
	pthread_mutex_destroy(&u->lock);
	free(u->q);
	free(u);
}
