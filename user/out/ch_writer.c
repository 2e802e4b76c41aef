// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The writer's queue: the batch being filled (by the caller, under the
 * lock: encoding a request is microseconds, and the sender holds the lock
 * only to take or return a batch), then a ring of batches waiting, the
 * head one being sent. The sender retries with backoff until its batch is
 * stored, refused five times, given up (give_up_ns) or the exit's deadline
 * passes; each table of a batch is retried alone, and one whose insert may
 * have landed is counted for first. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ch_rows.h"
#include "ch_writer.h"
#include "clickhouse.h"
#include "util.h"

#define BACKOFF_MIN_NS 250000000ull
#define BACKOFF_MAX_NS 5000000000ull /* a try is one connect: a restarted server is found soon */
#define REFUSALS_MAX 5
/* Batches are kept for reuse with their buffers, as many as the buffer
 * holds: a buffer grown anew for every batch is megabytes of fresh pages
 * faulted in and unmapped again (TLB shootdowns on every CPU the agent's
 * threads ran on), which was most of what a store that fell behind cost
 * the agent. */

struct qb {
	struct ch_batch b;
	uint64_t first_ns; /* its first request came */
	bool done[CH_TABLES], unknown[CH_TABLES];
};

enum outcome { STORED, FAILED, DROPPED };

struct ch_writer {
	struct ch_writer_opts o;
	struct ch_conn *c;
	pthread_t th;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv, room;
	struct qb *fill;
	struct qb **q; /* ring of qcap */
	uint32_t qhead, qlen, qcap;
	bool inflight; /* q[qhead] is being sent */
	struct qb **spare;
	uint32_t nspare, maxspare;
	size_t bytes; /* of the batches waiting and the one filling */
	uint64_t base, next;
	bool stop, fatal, ready;
	uint64_t deadline;
	int last_rc;
	struct ch_writer_stats st;
};

/* Under the lock; ch_writer__full reads it without */
static void bytes_add(struct ch_writer *w, int64_t d)
{
	__atomic_store_n(&w->bytes, w->bytes + (size_t)d, __ATOMIC_RELAXED);
}

static void cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t until)
{
	struct timespec ts;

	if (!until) {
		pthread_cond_wait(cv, mu);
		return;
	}
	ts.tv_sec = (time_t)(until / 1000000000ull);
	ts.tv_nsec = (long)(until % 1000000000ull);
	pthread_cond_timedwait(cv, mu, &ts);
}

static bool past_deadline(struct ch_writer *w)
{
	return w->stop && w->deadline && clock__mono_ns() >= w->deadline;
}

/* ch_conn's abort: a request in flight ends at the exit's deadline */
static bool conn_abort(void *ctx)
{
	struct ch_writer *w = ctx;
	bool r;

	pthread_mutex_lock(&w->mu);
	r = past_deadline(w);
	pthread_mutex_unlock(&w->mu);
	return r;
}

/* --- the sender's side --------------------------------------------------------- */

static void note(struct ch_writer *w, int rc, const char *err)
{
	pthread_mutex_lock(&w->mu);
	if (!rc) {
		w->st.failing = false;
	} else {
		w->st.tries_failed++;
		if (!w->st.failing || rc != w->last_rc)
			w->st.fail_changes++;
		w->st.failing = true;
		w->last_rc = rc;
		snprintf(w->st.last_error, sizeof(w->st.last_error), "%s", err);
	}
	pthread_mutex_unlock(&w->mu);
}

/* Rows of batch b in table t: -errno, or their count in *n */
static int count_rows(struct ch_writer *w, enum ch_table t, const struct ch_batch *b, uint64_t *n,
		      char *err, size_t errn)
{
	time_t day = (time_t)b->day * 86400;
	struct ch_result r;
	char sql[256], date[16];
	struct tm tm;
	int rc;

	/* the day as a string: toDate of a number changed meaning across
	 * ClickHouse's releases, of 'YYYY-MM-DD' never */
	gmtime_r(&day, &tm);
	strftime(date, sizeof(date), "%Y-%m-%d", &tm);
	snprintf(sql, sizeof(sql),
		 "SELECT count() FROM %s.%s WHERE day = toDate('%s') AND batch = %llu",
		 ch__db(w->c), ch_tables[t].name, date, (unsigned long long)b->id);
	rc = ch__query(w->c, sql, &r, err, errn);
	if (!rc && (!ch_result__row(&r) || ch_result__u64(&r, 0, n))) {
		snprintf(err, errn, "%s: %s", ch__shown(w->c), "count() answered with no number");
		rc = -EPROTO;
	}
	ch_result__free(&r);
	return rc;
}

/* Each table of the batch not stored yet; 0 once all are */
static int send_tables(struct ch_writer *w, struct qb *qb, char *err, size_t errn)
{
	struct ch_batch *b = &qb->b;

	for (int t = 0; t < CH_TABLES; t++) {
		uint64_t n;
		int rc;

		if (!b->rows[t] || qb->done[t])
			continue;
		if (qb->unknown[t]) {
			if ((rc = count_rows(w, (enum ch_table)t, b, &n, err, errn)))
				return rc;
			qb->unknown[t] = false;
			if (n) {
				pthread_mutex_lock(&w->mu);
				w->st.found_stored++;
				pthread_mutex_unlock(&w->mu);
				qb->done[t] = true;
				continue;
			}
		}
		rc = ch__insert(w->c, ch_tables[t].name, ch_table__insert_cols((enum ch_table)t),
				b->t[t].p, b->t[t].n, err, errn);
		if (!rc) {
			qb->done[t] = true;
			continue;
		}
		/* nothing was sent when nothing was reached */
		qb->unknown[t] = rc != -ECONNREFUSED && rc != -EHOSTUNREACH;
		if (rc == -EPROTO)
			w->ready = false; /* the tables may be gone: made again */
		return rc;
	}
	return 0;
}

static int setup(struct ch_writer *w, char *err, size_t errn)
{
	int rc = ch__schema(w->c, true, err, errn);

	if (!rc)
		w->ready = true;
	if (rc == -EPROTONOSUPPORT) {
		pthread_mutex_lock(&w->mu);
		__atomic_store_n(&w->fatal, true, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&w->room);
		pthread_mutex_unlock(&w->mu);
	}
	return rc;
}

/* Sleeps ns, or until the exit's deadline; false: past it */
static bool wait_retry(struct ch_writer *w, uint64_t ns)
{
	uint64_t until = clock__mono_ns() + ns;
	bool go_on;

	pthread_mutex_lock(&w->mu);
	while (clock__mono_ns() < until && !past_deadline(w))
		cond_wait_until(&w->cv, &w->mu, until);
	go_on = !past_deadline(w);
	pthread_mutex_unlock(&w->mu);
	return go_on;
}

static enum outcome send_batch(struct ch_writer *w, struct qb *qb)
{
	uint64_t backoff = BACKOFF_MIN_NS, t0 = clock__mono_ns();
	char err[512];
	int refused = 0, rc;

	for (;;) {
		if (__atomic_load_n(&w->fatal, __ATOMIC_ACQUIRE))
			return FAILED;
		rc = w->ready ? 0 : setup(w, err, sizeof(err));
		if (!rc)
			rc = send_tables(w, qb, err, sizeof(err));
		note(w, rc, err);
		if (!rc)
			return STORED;
		if (__atomic_load_n(&w->fatal, __ATOMIC_ACQUIRE) ||
		    (rc == -EPROTO && ++refused >= REFUSALS_MAX) ||
		    (w->o.give_up_ns && clock__mono_ns() - t0 >= w->o.give_up_ns))
			return FAILED;
		if (!wait_retry(w, backoff))
			return DROPPED;
		backoff = backoff * 2 < BACKOFF_MAX_NS ? backoff * 2 : BACKOFF_MAX_NS;
	}
}

static void enqueue(struct ch_writer *w, struct qb *qb);

/* The next batch to send, under the lock: the head of the queue, or the
 * one filling once it lingered (or at the stop); NULL: stop */
static struct qb *next_batch(struct ch_writer *w)
{
	for (;;) {
		struct qb *f = w->fill;
		uint64_t now = clock__mono_ns();

		if (f && f->b.requests && (w->stop || now - f->first_ns >= w->o.linger_ns))
			enqueue(w, f);
		if (w->qlen)
			return past_deadline(w) ? NULL : w->q[w->qhead];
		if (w->stop)
			return NULL;
		cond_wait_until(&w->cv, &w->mu,
				f && f->b.requests ? f->first_ns + w->o.linger_ns : 0);
	}
}

static void recycle(struct ch_writer *w, struct qb *qb)
{
	if (w->nspare < w->maxspare) {
		w->spare[w->nspare++] = qb;
		return;
	}
	ch_batch__free(&qb->b);
	free(qb);
}

static void *run(void *arg)
{
	struct ch_writer *w = arg;

	/* below the traced servers: sending is never urgent, the buffer's
	 * bound is what protects the agent */
	setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct qb *qb = next_batch(w);
		enum outcome out;

		if (!qb)
			break;
		w->inflight = true;
		pthread_mutex_unlock(&w->mu);
		out = send_batch(w, qb);
		pthread_mutex_lock(&w->mu);
		w->inflight = false;
		w->qhead = (w->qhead + 1) % w->qcap;
		w->qlen--;
		bytes_add(w, -(int64_t)qb->b.bytes);
		if (out == STORED) {
			w->st.requests += qb->b.requests;
			w->st.segments += qb->b.rows[CH_SEGMENTS];
			w->st.batches++;
		} else if (out == FAILED) {
			w->st.failed += qb->b.requests;
			w->st.failed_segments += qb->b.rows[CH_SEGMENTS];
		} else {
			w->st.dropped += qb->b.requests;
			w->st.dropped_segments += qb->b.rows[CH_SEGMENTS];
		}
		recycle(w, qb);
		pthread_cond_broadcast(&w->room);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* --- the caller's side --------------------------------------------------------- */

static void enqueue(struct ch_writer *w, struct qb *qb)
{
	if (w->qlen == w->qcap) {
		uint32_t cap = w->qcap ? w->qcap * 2 : 16;
		struct qb **q = malloc(cap * sizeof(*q));

		if (!q) { /* the batch goes: nowhere to keep it */
			w->st.dropped += qb->b.requests;
			w->st.dropped_segments += qb->b.rows[CH_SEGMENTS];
			bytes_add(w, -(int64_t)qb->b.bytes);
			if (w->fill == qb)
				w->fill = NULL;
			recycle(w, qb);
			return;
		}
		for (uint32_t i = 0; i < w->qlen; i++)
			q[i] = w->q[(w->qhead + i) % w->qcap];
		free(w->q);
		w->q = q;
		w->qhead = 0;
		w->qcap = cap;
	}
	w->q[(w->qhead + w->qlen++) % w->qcap] = qb;
	if (w->fill == qb)
		w->fill = NULL;
	pthread_cond_signal(&w->cv);
}

/* The oldest batch waiting (not the one being sent) dropped; false: none */
static bool drop_oldest(struct ch_writer *w)
{
	uint32_t k = w->inflight ? 1 : 0;
	struct qb *qb;

	if (w->qlen <= k)
		return false;
	qb = w->q[(w->qhead + k) % w->qcap];
	for (uint32_t i = k; i + 1 < w->qlen; i++)
		w->q[(w->qhead + i) % w->qcap] = w->q[(w->qhead + i + 1) % w->qcap];
	w->qlen--;
	bytes_add(w, -(int64_t)qb->b.bytes);
	w->st.dropped += qb->b.requests;
	w->st.dropped_segments += qb->b.rows[CH_SEGMENTS];
	recycle(w, qb);
	return true;
}

static struct qb *new_batch(struct ch_writer *w, uint16_t day)
{
	struct qb *qb = w->nspare ? w->spare[--w->nspare] : calloc(1, sizeof(*qb));

	if (!qb)
		return NULL;
	memset(qb->done, 0, sizeof(qb->done));
	memset(qb->unknown, 0, sizeof(qb->unknown));
	ch_batch__reset(&qb->b, w->base + w->next++, day);
	qb->first_ns = clock__mono_ns();
	return qb;
}

int ch_writer__add(struct ch_writer *w, const struct cp_request *r, const char *host,
		   const char *boot)
{
	uint16_t day = ch_rows__day(r);
	uint64_t was;
	int err;

	pthread_mutex_lock(&w->mu);
	if (w->fatal) {
		w->st.failed++;
		w->st.failed_segments += r->nsegs;
		pthread_mutex_unlock(&w->mu);
		return -EPIPE;
	}
	if (w->fill && w->fill->b.day != day) /* a batch is one partition's */
		enqueue(w, w->fill);
	if (!w->fill && !(w->fill = new_batch(w, day))) {
		err = -ENOMEM;
		goto dropped;
	}
	was = w->fill->b.bytes;
	err = ch_batch__add(&w->fill->b, r, host, boot);
	if (err)
		goto dropped;
	bytes_add(w, (int64_t)(w->fill->b.bytes - was));
	if (w->fill->b.bytes >= w->o.batch_bytes)
		enqueue(w, w->fill);
	while (w->bytes > w->o.buffer_bytes && !w->fatal) {
		if (w->o.wait_when_full && w->qlen)
			pthread_cond_wait(&w->room, &w->mu);
		else if (!drop_oldest(w))
			break;
	}
	pthread_mutex_unlock(&w->mu);
	return 0;
dropped:
	w->st.dropped++;
	w->st.dropped_segments += r->nsegs;
	pthread_mutex_unlock(&w->mu);
	return err;
}

bool ch_writer__full(struct ch_writer *w)
{
	size_t b = __atomic_load_n(&w->bytes, __ATOMIC_RELAXED);

	return !w->o.wait_when_full && b + w->o.batch_bytes / 2 >= w->o.buffer_bytes;
}

void ch_writer__skip(struct ch_writer *w)
{
	pthread_mutex_lock(&w->mu);
	w->st.dropped++;
	pthread_mutex_unlock(&w->mu);
}

void ch_writer__stats(struct ch_writer *w, struct ch_writer_stats *st)
{
	pthread_mutex_lock(&w->mu);
	*st = w->st;
	st->buffered = w->bytes;
	st->waiting = w->fill ? w->fill->b.requests : 0;
	for (uint32_t i = 0; i < w->qlen; i++)
		st->waiting += w->q[(w->qhead + i) % w->qcap]->b.requests;
	pthread_mutex_unlock(&w->mu);
}

const char *ch_writer__shown(const struct ch_writer *w)
{
	return ch__shown(w->c);
}

struct ch_writer *ch_writer__new(const struct ch_writer_opts *o, char *err, size_t errn)
{
	struct ch_writer *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;

	if (!w) {
		snprintf(err, errn, "out of memory");
		return NULL;
	}
	w->o = *o;
	if (!w->o.buffer_bytes)
		w->o.buffer_bytes = 64u << 20;
	if (!w->o.batch_bytes)
		w->o.batch_bytes = 4u << 20;
	if (w->o.batch_bytes > w->o.buffer_bytes / 2)
		w->o.batch_bytes = w->o.buffer_bytes / 2;
	if (!w->o.linger_ns)
		w->o.linger_ns = 1000000000ull;
	w->maxspare = (uint32_t)(w->o.buffer_bytes / w->o.batch_bytes) + 2;
	if (!(w->spare = calloc(w->maxspare, sizeof(*w->spare)))) {
		snprintf(err, errn, "out of memory");
		free(w);
		return NULL;
	}
	if (!(w->c = ch__open(o->url, err, errn))) {
		free(w->spare);
		free(w);
		return NULL;
	}
	ch__set_timeout(w->c, o->timeout_ns ? o->timeout_ns : 30000000000ull);
	ch__set_abort(w->c, conn_abort, w);
	/* batch ids: a random start per writer, then one after another */
	if (getrandom(&w->base, sizeof(w->base), 0) != sizeof(w->base))
		w->base = clock__mono_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_cond_init(&w->room, &ca);
	pthread_condattr_destroy(&ca);
	return w;
}

static int start(struct ch_writer *w, char *err, size_t errn)
{
	sigset_t all, old;
	int rc;

	if (w->started)
		return 0;
	sigfillset(&all); /* signals stay with the caller's threads */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&w->th, NULL, run, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		snprintf(err, errn, "cannot start the store's thread: %s", strerror(rc));
		return -rc;
	}
	w->started = true;
	return 0;
}

int ch_writer__setup(struct ch_writer *w, char *err, size_t errn)
{
	int rc = setup(w, err, errn), srt;

	note(w, rc, err);
	srt = start(w, err, errn);
	return rc ? rc : srt;
}

void ch_writer__close(struct ch_writer *w, uint64_t deadline_ns, struct ch_writer_stats *st)
{
	char err[256];

	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	w->deadline = deadline_ns;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (!w->started && !w->fatal) /* nothing was set up: the queue goes now */
		start(w, err, sizeof(err));
	if (w->started)
		pthread_join(w->th, NULL);
	if (w->fill && w->fill->b.requests)
		enqueue(w, w->fill);
	while (w->qlen) {
		struct qb *qb = w->q[w->qhead];

		(w->fatal ? &w->st.failed : &w->st.dropped)[0] += qb->b.requests;
		(w->fatal ? &w->st.failed_segments : &w->st.dropped_segments)[0] +=
		    qb->b.rows[CH_SEGMENTS];
		w->qhead = (w->qhead + 1) % w->qcap;
		w->qlen--;
		ch_batch__free(&qb->b);
		free(qb);
	}
	if (w->fill) {
		ch_batch__free(&w->fill->b);
		free(w->fill);
	}
	while (w->nspare) {
		struct qb *qb = w->spare[--w->nspare];

		ch_batch__free(&qb->b);
		free(qb);
	}
	free(w->spare);
	if (st) {
		*st = w->st;
		st->buffered = st->waiting = 0;
	}
	free(w->q);
	ch__close(w->c);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	pthread_cond_destroy(&w->room);
	free(w);
}
