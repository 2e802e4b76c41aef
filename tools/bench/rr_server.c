// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * rr_server: a futex- and socket-heavy request/response server for
 * bench_record_overhead. One I/O thread accepts TCP connections and waits
 * for requests with epoll; each whole request line ("get KEY\r\n", the
 * memcached text protocol) goes through a mutex/condvar queue to a pool of
 * worker threads, which look the key up in a small table behind a second
 * mutex, spend --work iterations of hashing on it and write the response
 * ("VALUE KEY 0 32\r\n<32 bytes>\r\nEND\r\n") themselves. A connection has
 * one request in flight (closed-loop clients): requests of one connection
 * are never served by two workers at once.
 *
 *   rr_server [--port P] [--workers N] [--work ITER]
 *
 * --port 0 (the default) picks a free port; "PORT p" is printed on stdout
 * once the server listens. Runs until SIGINT/SIGTERM.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define QUEUE_LEN 4096
#define KEY_MAX 64
#define REQ_MAX 256
#define TABLE_SIZE 1024
#define VALUE_LEN 32

struct conn {
	int fd;
	size_t len;
	char buf[REQ_MAX];
};

struct job {
	struct conn *c;
	char key[KEY_MAX];
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t nonempty;
	struct job jobs[QUEUE_LEN];
	unsigned head, tail;
} queue = {.lock = PTHREAD_MUTEX_INITIALIZER, .nonempty = PTHREAD_COND_INITIALIZER};

static struct {
	pthread_mutex_t lock;
	uint64_t hits[TABLE_SIZE];
	char values[TABLE_SIZE][VALUE_LEN];
} table = {.lock = PTHREAD_MUTEX_INITIALIZER};

static unsigned work_iters = 2000;

static void die(const char *what)
{
	fprintf(stderr, "rr_server: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void queue_push(struct conn *c, const char *key, size_t klen)
{
	struct job *j;

	pthread_mutex_lock(&queue.lock);
	/* at most one job per connection is queued: the queue cannot overflow
	 * while connections < QUEUE_LEN, which main() enforces */
	j = &queue.jobs[queue.tail++ % QUEUE_LEN];
	j->c = c;
	memcpy(j->key, key, klen);
	j->key[klen] = 0;
	pthread_cond_signal(&queue.nonempty);
	pthread_mutex_unlock(&queue.lock);
}

static struct job queue_pop(void)
{
	struct job j;

	pthread_mutex_lock(&queue.lock);
	while (queue.head == queue.tail)
		pthread_cond_wait(&queue.nonempty, &queue.lock);
	j = queue.jobs[queue.head++ % QUEUE_LEN];
	pthread_mutex_unlock(&queue.lock);
	return j;
}

static uint64_t fnv(const char *s, uint64_t h)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static void serve(struct job *j)
{
	char resp[KEY_MAX + VALUE_LEN + 64];
	uint64_t h = 14695981039346656037ull;
	unsigned slot;
	int n;

	for (unsigned i = 0; i < work_iters; i++)
		h = fnv(j->key, h + i);
	slot = h % TABLE_SIZE;
	pthread_mutex_lock(&table.lock);
	table.hits[slot]++;
	for (int i = 0; i < VALUE_LEN; i++)
		table.values[slot][i] = 'a' + (h >> (i % 60)) % 26;
	n = snprintf(resp, sizeof(resp), "VALUE %s 0 %d\r\n%.*s\r\nEND\r\n", j->key, VALUE_LEN,
		     VALUE_LEN, table.values[slot]);
	pthread_mutex_unlock(&table.lock);
	if (write(j->c->fd, resp, n) != n) {
		/* the client went away: the I/O thread sees the close */
	}
}

static void *worker(void *arg)
{
	for (;;) {
		struct job j = queue_pop();

		serve(&j);
	}
	return NULL;
}

/* Reads what arrived; queues a whole request line. -1: connection over. */
static int conn_read(struct conn *c)
{
	ssize_t n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
	char *nl, *key;

	if (n <= 0)
		return -1;
	c->len += n;
	nl = memchr(c->buf, '\n', c->len);
	if (!nl)
		return c->len == sizeof(c->buf) ? -1 : 0;
	if (strncmp(c->buf, "get ", 4) || nl - c->buf - 4 > KEY_MAX)
		return -1;
	key = c->buf + 4;
	queue_push(c, key, nl - key - (nl[-1] == '\r'));
	c->len = 0; /* one request in flight per connection */
	return 0;
}

static int listen_on(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)))
		die("bind");
	if (listen(fd, 512))
		die("listen");
	if (getsockname(fd, (struct sockaddr *)&a, &len))
		die("getsockname");
	printf("PORT %d\n", ntohs(a.sin_port));
	fflush(stdout);
	return fd;
}

static void io_loop(int lfd)
{
	struct epoll_event ev = {.events = EPOLLIN}, evs[64];
	int ep = epoll_create1(0), nconns = 0;

	if (ep < 0)
		die("epoll_create1");
	ev.data.ptr = NULL; /* the listening socket */
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev))
		die("epoll_ctl");
	for (;;) {
		int n = epoll_wait(ep, evs, 64, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;

			if (!c) {
				int one = 1, fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

				if (fd < 0)
					continue;
				if (nconns >= QUEUE_LEN - 1) {
					close(fd);
					continue;
				}
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				c = calloc(1, sizeof(*c));
				if (!c)
					die("calloc");
				c->fd = fd;
				ev.data.ptr = c;
				if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
					die("epoll_ctl");
				nconns++;
			} else if (conn_read(c)) {
				/* a worker may still hold c: leak it rather than race
				 * (connections are few and long-lived here) */
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				shutdown(c->fd, SHUT_RDWR);
				nconns--;
			}
		}
	}
}

int main(int argc, char **argv)
{
	int port = 0, workers = 4;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;
		long n = v ? strtol(v, &end, 10) : -1;

		if (!v || *end || !*v || n < 0) {
			fprintf(stderr,
				"rr_server: %s: needs a non-negative number\n"
				"usage: rr_server [--port P] [--workers N] [--work ITER]\n",
				a);
			return 2;
		}
		if (!strcmp(a, "--port") && n <= 65535)
			port = n;
		else if (!strcmp(a, "--workers") && n >= 1 && n <= 256)
			workers = n;
		else if (!strcmp(a, "--work") && n <= 100000000)
			work_iters = n;
		else {
			fprintf(stderr, "rr_server: unknown option or value out of range: %s %s\n",
				a, v);
			return 2;
		}
		i++;
	}
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < workers; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, worker, NULL)) {
			fprintf(stderr, "rr_server: cannot start worker threads\n");
			return 1;
		}
	}
	io_loop(listen_on(port));
	return 0;
}
