// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * rr_client: the closed-loop load generator of bench_record_overhead. C
 * connections to rr_server (spread over T threads, each an epoll loop) each
 * send "get KEY\r\n", wait for the whole response ("...END\r\n") and send
 * the next at once, for D seconds (after --warmup seconds not counted).
 * Prints one machine-readable line:
 *   RESULT requests=N errors=E seconds=S rps=X p50_us=X p99_us=X max_us=X total=N
 * (requests: those sent in the measured window; total: every response
 * received, warm-up included).
 *
 *   rr_client --port P [-c 16] [-t 1] [-d 5] [--warmup 0.5] [--keys 1000]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RESP_MAX 512

struct conn {
	int fd;
	uint64_t sent_ns;
	size_t len;
	char buf[RESP_MAX];
};

struct loop {
	pthread_t thread;
	int nconns;
	struct conn *conns;
	uint64_t seed;
	uint32_t *lat_ns;
	size_t n, cap;
	uint64_t errors, total;
};

static int port, keys = 1000;
static uint64_t measure_from_ns, deadline_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int dial(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int send_request(struct loop *l, struct conn *c)
{
	char req[64];
	int n = snprintf(req, sizeof(req), "get k%06u\r\n", (unsigned)(rnd(&l->seed) % keys));

	c->len = 0;
	c->sent_ns = now_ns();
	return write(c->fd, req, n) == n ? 0 : -1;
}

static void record(struct loop *l, uint64_t ns)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 65536;
		uint32_t *p = realloc(l->lat_ns, cap * sizeof(*p));

		if (!p) {
			l->errors++;
			return;
		}
		l->lat_ns = p;
		l->cap = cap;
	}
	l->lat_ns[l->n++] = ns > UINT32_MAX ? UINT32_MAX : ns;
}

/* Reads what arrived; a whole response is timed and followed by the next
 * request. -1: the connection failed. */
static int on_readable(struct loop *l, struct conn *c)
{
	ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
	uint64_t now;

	if (r <= 0)
		return -1;
	c->len += r;
	c->buf[c->len] = 0;
	if (!strstr(c->buf, "END\r\n"))
		return c->len < sizeof(c->buf) - 1 ? 0 : -1;
	now = now_ns();
	l->total++;
	if (strncmp(c->buf, "VALUE ", 6))
		l->errors++;
	else if (c->sent_ns >= measure_from_ns)
		record(l, now - c->sent_ns);
	if (now >= deadline_ns)
		return 1;
	return send_request(l, c);
}

static void *run(void *arg)
{
	struct loop *l = arg;
	struct epoll_event ev = {.events = EPOLLIN}, evs[64];
	int ep = epoll_create1(0), live = 0;

	if (ep < 0) {
		l->errors++;
		return NULL;
	}
	for (int i = 0; i < l->nconns; i++) {
		struct conn *c = &l->conns[i];

		c->fd = dial();
		ev.data.ptr = c;
		if (c->fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) || send_request(l, c)) {
			l->errors++;
			continue;
		}
		live++;
	}
	while (live > 0) {
		int n = epoll_wait(ep, evs, 64, 1000);

		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0 && now_ns() > deadline_ns + 5000000000ull)
			break; /* a server that stopped answering */
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			int rc = on_readable(l, c);

			if (rc) {
				if (rc < 0)
					l->errors++;
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				close(c->fd);
				live--;
			}
		}
	}
	close(ep);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double number(const char *opt, const char *s, double min, double max)
{
	char *end;
	double v = s ? strtod(s, &end) : 0;

	if (!s || *end || !*s || !(v >= min && v <= max)) {
		fprintf(stderr,
			"rr_client: %s: needs a number between %g and %g\n"
			"usage: rr_client --port P [-c CONNS] [-t THREADS] [-d SECONDS] "
			"[--warmup SECONDS] [--keys N]\n",
			opt, min, max);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	int conns = 16, threads = 1;
	double secs = 5, warmup = 0.5;
	struct loop *loops;
	uint32_t *all;
	size_t n = 0;
	uint64_t errors = 0, total = 0, start;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--port"))
			port = number(a, v, 1, 65535);
		else if (!strcmp(a, "-c"))
			conns = number(a, v, 1, 4000);
		else if (!strcmp(a, "-t"))
			threads = number(a, v, 1, 64);
		else if (!strcmp(a, "-d"))
			secs = number(a, v, 0.1, 3600);
		else if (!strcmp(a, "--warmup"))
			warmup = number(a, v, 0, 3600);
		else if (!strcmp(a, "--keys"))
			keys = number(a, v, 1, 1000000);
		else {
			fprintf(stderr, "rr_client: unknown option '%s'\n", a);
			return 2;
		}
		i++;
	}
	if (!port) {
		fprintf(stderr, "rr_client: --port is required\n");
		return 2;
	}
	if (threads > conns)
		threads = conns;
	loops = calloc(threads, sizeof(*loops));
	if (!loops)
		return 1;
	start = now_ns();
	measure_from_ns = start + (uint64_t)(warmup * 1e9);
	deadline_ns = measure_from_ns + (uint64_t)(secs * 1e9);
	for (int i = 0; i < threads; i++) {
		struct loop *l = &loops[i];

		l->nconns = conns / threads + (i < conns % threads);
		l->conns = calloc(l->nconns, sizeof(*l->conns));
		l->seed = 0x9e3779b97f4a7c15ull * (i + 1);
		if (!l->conns || pthread_create(&l->thread, NULL, run, l)) {
			fprintf(stderr, "rr_client: cannot start thread %d\n", i);
			return 1;
		}
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(loops[i].thread, NULL);
		n += loops[i].n;
		errors += loops[i].errors;
		total += loops[i].total;
	}
	all = malloc((n ? n : 1) * sizeof(*all));
	if (!all)
		return 1;
	n = 0;
	for (int i = 0; i < threads; i++) {
		memcpy(all + n, loops[i].lat_ns, loops[i].n * sizeof(*all));
		n += loops[i].n;
	}
	qsort(all, n, sizeof(*all), cmp_u32);
	printf("RESULT requests=%zu errors=%llu seconds=%.3f rps=%.1f p50_us=%.1f p99_us=%.1f "
	       "max_us=%.1f total=%llu\n",
	       n, (unsigned long long)errors, secs, n / secs, n ? all[n / 2] / 1e3 : 0.0,
	       n ? all[(size_t)(n * 0.99)] / 1e3 : 0.0, n ? all[n - 1] / 1e3 : 0.0,
	       (unsigned long long)total);
	return n && !errors ? 0 : 1;
}
