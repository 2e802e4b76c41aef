// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * loadgen: a closed-loop HTTP/1.1 load generator for the demo. C keep-alive
 * connections, each sending its next request as soon as the previous response
 * is complete (plus --think-ms), for D seconds. Mixes GET /item/K and
 * GET /cart?id=K over --keys keys. Prints throughput and latency percentiles,
 * then one machine-readable line:
 *   RESULT requests=N errors=E seconds=S rps=X p50_us=X p99_us=X max_us=X
 *
 *   loadgen [--port 8080] [-c 8] [-d 5] [--think-ms 0] [--keys 1000]
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct client {
	pthread_t thread;
	unsigned id;
	uint64_t seed;
	uint32_t *lat_us;
	size_t n, cap;
	uint64_t errors;
};

static int port = 8080, keys = 1000;
static double think_ms;
static uint64_t deadline_ns;

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

/* Reads one whole response (headers + Content-Length body). 0 = 2xx. */
static int read_response(int fd)
{
	char buf[8192];
	size_t len = 0;
	char *end = NULL;
	long clen = -1;

	for (;;) {
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		len += (size_t)r;
		buf[len] = '\0';
		if (!end && (end = strstr(buf, "\r\n\r\n"))) {
			char *cl = strcasestr(buf, "\r\nContent-Length:");

			if (!cl || cl > end)
				return -1;
			clen = strtol(cl + 17, NULL, 10);
		}
		if (end && len >= (size_t)(end - buf) + 4 + (size_t)clen)
			return strncmp(buf, "HTTP/1.1 2", 10) ? -1 : 0;
		if (len >= sizeof(buf) - 1)
			return -1;
	}
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	int fd = dial();
	char req[256];

	while (now_ns() < deadline_ns) {
		unsigned key = (unsigned)(rnd(&c->seed) % (uint64_t)keys);
		int n = rnd(&c->seed) % 10 < 7
			    ? snprintf(req, sizeof(req),
				       "GET /item/%u HTTP/1.1\r\nHost: demo\r\n\r\n", key)
			    : snprintf(req, sizeof(req),
				       "GET /cart?id=%u HTTP/1.1\r\nHost: demo\r\n\r\n", key);
		uint64_t t0 = now_ns();

		if (fd < 0 && (fd = dial()) < 0) {
			c->errors++;
			usleep(10000);
			continue;
		}
		if (write(fd, req, (size_t)n) != n || read_response(fd)) {
			c->errors++;
			close(fd);
			fd = -1;
			continue;
		}
		if (c->n == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 4096;
			uint32_t *p = realloc(c->lat_us, cap * sizeof(*p));

			if (!p)
				break;
			c->lat_us = p;
			c->cap = cap;
		}
		c->lat_us[c->n++] = (uint32_t)((now_ns() - t0) / 1000);
		if (think_ms > 0)
			usleep((useconds_t)(think_ms * 1000));
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int conns = 8;
	double secs = 5;
	struct client *cl;
	uint32_t *all;
	size_t total = 0;
	uint64_t errors = 0, t0, elapsed;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc) {
			port = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "-c") && i + 1 < argc) {
			conns = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "-d") && i + 1 < argc) {
			secs = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--think-ms") && i + 1 < argc) {
			think_ms = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--keys") && i + 1 < argc) {
			keys = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: loadgen [--port 8080] [-c 8] [-d 5] [--think-ms 0] "
					"[--keys 1000]\n");
			return 2;
		}
	}
	if (conns < 1 || conns > 1024 || secs <= 0 || keys < 1) {
		fprintf(stderr, "loadgen: need 1 <= -c <= 1024, -d > 0, --keys >= 1\n");
		return 2;
	}
	cl = calloc((size_t)conns, sizeof(*cl));
	if (!cl) {
		fprintf(stderr, "loadgen: out of memory\n");
		return 1;
	}
	t0 = now_ns();
	deadline_ns = t0 + (uint64_t)(secs * 1e9);
	for (int i = 0; i < conns; i++) {
		cl[i].id = (unsigned)i;
		cl[i].seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		if (pthread_create(&cl[i].thread, NULL, client_main, &cl[i])) {
			fprintf(stderr, "loadgen: cannot start connection %d\n", i);
			return 1;
		}
	}
	for (int i = 0; i < conns; i++) {
		pthread_join(cl[i].thread, NULL);
		total += cl[i].n;
		errors += cl[i].errors;
	}
	elapsed = now_ns() - t0;
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all) {
		fprintf(stderr, "loadgen: out of memory\n");
		return 1;
	}
	total = 0;
	for (int i = 0; i < conns; i++) {
		memcpy(all + total, cl[i].lat_us, cl[i].n * sizeof(*all));
		total += cl[i].n;
		free(cl[i].lat_us);
	}
	qsort(all, total, sizeof(*all), cmp_u32);
	if (!total) {
		fprintf(stderr,
			"loadgen: no request completed (%lu errors) — is the server on "
			"127.0.0.1:%d?\n",
			(unsigned long)errors, port);
		printf(
		    "RESULT requests=0 errors=%lu seconds=%.3f rps=0 p50_us=0 p99_us=0 max_us=0\n",
		    (unsigned long)errors, (double)elapsed / 1e9);
		return 1;
	}
	{
		double rps = (double)total / ((double)elapsed / 1e9);
		uint32_t p50 = all[total / 2], p99 = all[(size_t)((double)total * 0.99)],
			 max = all[total - 1];

		printf("loadgen: %zu requests in %.1f s over %d connections: %.0f req/s, "
		       "p50 %.2f ms, p99 %.2f ms, max %.2f ms, %lu errors\n",
		       total, (double)elapsed / 1e9, conns, rps, p50 / 1e3, p99 / 1e3, max / 1e3,
		       (unsigned long)errors);
		printf("RESULT requests=%zu errors=%lu seconds=%.3f rps=%.1f p50_us=%u p99_us=%u "
		       "max_us=%u\n",
		       total, (unsigned long)errors, (double)elapsed / 1e9, rps, p50, p99, max);
	}
	free(all);
	free(cl);
	return errors ? 1 : 0;
}
