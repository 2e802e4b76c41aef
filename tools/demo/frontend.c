// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * frontend: the demo's HTTP/1.1 service (keep-alive). An acceptor thread owns
 * the epoll set and queues readable connections to a pool of workers (a queue
 * under a mutex and condition variable). Workers serve
 *
 *   GET /item/K      one item: cache, else the kvstore downstream
 *   GET /cart?id=K   a cart of three items, priced
 *
 * from an in-process cache under one mutex. On a miss a worker asks kvstore
 * (another process, memcached text protocol over TCP) on its own connection.
 * A maintenance thread ("cache-maint") wakes every --maint-period-ms and,
 * holding the cache lock, spends --maint-hold-ms of CPU re-checksumming the
 * cache: the off-path culprit the demo is about.
 *
 *   frontend [--port 8080] [--kv-port 11311] [--workers 4]
 *            [--maint-period-ms 200] [--maint-hold-ms 15]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CACHE_SLOTS 512
#define CACHE_TTL_NS 2000000000ull
#define VAL_MAX 256
#define REQ_CAP 8192
#define QUEUE_CAP 4096

struct conn {
	int fd;
	size_t in_len;
	char in[REQ_CAP];
};

struct cache_entry {
	unsigned key;
	int valid;
	uint64_t expires;
	uint64_t checksum;
	char val[VAL_MAX];
};

static struct {
	pthread_mutex_t mu;
	struct cache_entry slot[CACHE_SLOTS];
	uint64_t hits, misses;
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct conn *q[QUEUE_CAP];
	unsigned head, len;
} work = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static int epfd, kv_port = 11311;
static double maint_period_ms = 200, maint_hold_ms = 15;

static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mix(uint64_t h)
{
	h ^= h >> 31;
	h *= 0x7fb5d329728ea185ull;
	h ^= h >> 27;
	return h * 0x81dadef4bc2dd44dull;
}

static uint64_t checksum(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static int send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};

			poll(&p, 1, 1000);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static void queue_push(struct conn *c)
{
	pthread_mutex_lock(&work.mu);
	if (work.len == QUEUE_CAP) { /* cannot happen: one entry per connection */
		pthread_mutex_unlock(&work.mu);
		fprintf(stderr, "frontend: work queue full, dropping fd %d\n", c->fd);
		close(c->fd);
		free(c);
		return;
	}
	work.q[(work.head + work.len++) % QUEUE_CAP] = c;
	pthread_cond_signal(&work.cv);
	pthread_mutex_unlock(&work.mu);
}

static struct conn *queue_pop(void)
{
	struct conn *c;

	pthread_mutex_lock(&work.mu);
	while (!work.len)
		pthread_cond_wait(&work.cv, &work.mu);
	c = work.q[work.head];
	work.head = (work.head + 1) % QUEUE_CAP;
	work.len--;
	pthread_mutex_unlock(&work.mu);
	return c;
}

/* The downstream call: one blocking connection per worker, opened lazily.
 * kv_get, lookup and price_cart are never inlined: `make demo` records them
 * with --probe, so the report shows time in them as subcomponents. */
__attribute__((noinline, noclone)) static int kv_get(int *kfd, unsigned key, char *val, size_t cap)
{
	char buf[1024];
	size_t len = 0;
	int n;

	if (*kfd < 0) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons((uint16_t)kv_port),
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		int one = 1;

		*kfd = socket(AF_INET, SOCK_STREAM, 0);
		if (*kfd < 0 || connect(*kfd, (struct sockaddr *)&a, sizeof(a))) {
			fprintf(stderr, "frontend: connect to kvstore 127.0.0.1:%d: %s\n", kv_port,
				strerror(errno));
			if (*kfd >= 0)
				close(*kfd);
			*kfd = -1;
			return -1;
		}
		setsockopt(*kfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	n = snprintf(buf, sizeof(buf), "get item:%u\r\n", key);
	if (send_all(*kfd, buf, (size_t)n))
		goto broken;
	for (;;) {
		ssize_t r = read(*kfd, buf + len, sizeof(buf) - 1 - len);
		char *p, *eol;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			goto broken;
		len += (size_t)r;
		buf[len] = '\0';
		if (len < 5 || strcmp(buf + len - 5, "END\r\n"))
			continue;
		p = strstr(buf, "\r\n");
		eol = p ? strstr(p + 2, "\r\n") : NULL;
		if (strncmp(buf, "VALUE ", 6) || !eol)
			return -1;
		snprintf(val, cap, "%.*s", (int)(eol - (p + 2)), p + 2);
		return 0;
	}
broken:
	fprintf(stderr, "frontend: kvstore connection lost\n");
	close(*kfd);
	*kfd = -1;
	return -1;
}

__attribute__((noinline, noclone)) static int lookup(int *kfd, unsigned key, char *val, size_t cap)
{
	struct cache_entry *e = &cache.slot[mix(key) % CACHE_SLOTS];
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	int hit;

	pthread_mutex_lock(&cache.mu);
	hit = e->valid && e->key == key && e->expires > now;
	if (hit)
		snprintf(val, cap, "%s", e->val);
	cache.hits += hit;
	cache.misses += !hit;
	pthread_mutex_unlock(&cache.mu);
	if (hit)
		return 0;
	if (kv_get(kfd, key, val, cap))
		return -1;
	pthread_mutex_lock(&cache.mu);
	e->key = key;
	e->valid = 1;
	e->expires = now + CACHE_TTL_NS;
	e->checksum = checksum(val);
	snprintf(e->val, sizeof(e->val), "%s", val);
	pthread_mutex_unlock(&cache.mu);
	return 0;
}

/* Pricing: a little CPU per cart. */
__attribute__((noinline, noclone)) static unsigned price_cart(unsigned key)
{
	uint64_t h = key;

	for (int i = 0; i < 20000; i++)
		h = mix(h + (uint64_t)i);
	return (unsigned)(h % 100000);
}

/* Renders one response body into out; returns the HTTP status. */
static int handle(int *kfd, const char *method, const char *path, char *out, size_t cap)
{
	char val[VAL_MAX];
	unsigned key;

	if (strcmp(method, "GET"))
		return snprintf(out, cap, "method not allowed\n"), 405;
	if (sscanf(path, "/item/%u", &key) == 1) {
		if (lookup(kfd, key, val, sizeof(val)))
			return snprintf(out, cap, "kvstore unavailable\n"), 502;
		snprintf(out, cap, "%s\n", val);
		return 200;
	}
	if (sscanf(path, "/cart?id=%u", &key) == 1) {
		static const unsigned offs[] = {0, 7, 13};
		size_t len = (size_t)snprintf(out, cap, "{\"cart\":%u,\"items\":[", key);

		for (unsigned i = 0; i < 3; i++) {
			if (lookup(kfd, key + offs[i], val, sizeof(val)))
				return snprintf(out, cap, "kvstore unavailable\n"), 502;
			len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", val);
		}
		snprintf(out + len, cap - len, "],\"total\":%u}\n", price_cart(key));
		return 200;
	}
	return snprintf(out, cap, "not found\n"), 404;
}

/* Serves every complete request in c->in. -1: drop the connection. */
static int serve(struct conn *c, int *kfd)
{
	char body[2048], head[256], method[16], path[512];

	for (;;) {
		char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
		size_t used;
		int status, blen, hlen;

		if (!end)
			break;
		used = (size_t)(end - c->in) + 4;
		*end = '\0';
		if (sscanf(c->in, "%15s %511s", method, path) != 2)
			return -1;
		status = handle(kfd, method, path, body, sizeof(body));
		blen = (int)strlen(body);
		hlen = snprintf(
		    head, sizeof(head),
		    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n",
		    status, status == 200 ? "OK" : "Error", blen);
		/* one write per response, as real servers try to do */
		if ((size_t)hlen + (size_t)blen < sizeof(body) + sizeof(head)) {
			char resp[sizeof(body) + sizeof(head)];

			memcpy(resp, head, (size_t)hlen);
			memcpy(resp + hlen, body, (size_t)blen);
			if (send_all(c->fd, resp, (size_t)(hlen + blen)))
				return -1;
		}
		memmove(c->in, c->in + used, c->in_len - used);
		c->in_len -= used;
	}
	return c->in_len >= sizeof(c->in) - 1 ? -1 : 0;
}

static void *worker_main(void *arg)
{
	char name[16];
	int kfd = -1;

	snprintf(name, sizeof(name), "worker-%d", (int)(intptr_t)arg);
	prctl(PR_SET_NAME, name, 0, 0, 0);
	for (;;) {
		struct conn *c = queue_pop();
		struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
		int drop = 0;

		for (;;) {
			ssize_t r = read(c->fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno == EAGAIN)
				break;
			if (r <= 0) {
				drop = 1;
				break;
			}
			c->in_len += (size_t)r;
			if (serve(c, &kfd)) {
				drop = 1;
				break;
			}
		}
		if (drop || epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev)) {
			close(c->fd);
			free(c);
		}
	}
	return NULL;
}

/* Holds the cache lock for maint_hold_ms of CPU time: real work, not a sleep. */
static void *maint_main(void *arg)
{
	uint64_t period_ns = (uint64_t)(maint_period_ms * 1e6);
	struct timespec period = {.tv_sec = (time_t)(period_ns / 1000000000ull),
				  .tv_nsec = (long)(period_ns % 1000000000ull)};
	uint64_t hold = (uint64_t)(maint_hold_ms * 1e6);

	prctl(PR_SET_NAME, "cache-maint", 0, 0, 0);
	for (;;) {
		uint64_t until;
		unsigned bad = 0;

		nanosleep(&period, NULL);
		pthread_mutex_lock(&cache.mu);
		until = clock_ns(CLOCK_THREAD_CPUTIME_ID) + hold;
		do {
			for (unsigned i = 0; i < CACHE_SLOTS; i++) {
				struct cache_entry *e = &cache.slot[i];

				if (e->valid && checksum(e->val) != e->checksum)
					bad++;
			}
		} while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < until);
		pthread_mutex_unlock(&cache.mu);
		if (bad)
			fprintf(stderr, "frontend: cache-maint found %u corrupt entries\n", bad);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	int port = 8080, workers = 4, one = 1, lfd;
	pthread_t t;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc) {
			port = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--kv-port") && i + 1 < argc) {
			kv_port = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--workers") && i + 1 < argc) {
			workers = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--maint-period-ms") && i + 1 < argc) {
			maint_period_ms = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--maint-hold-ms") && i + 1 < argc) {
			maint_hold_ms = atof(argv[++i]);
		} else {
			fprintf(stderr,
				"usage: frontend [--port 8080] [--kv-port 11311] [--workers 4] "
				"[--maint-period-ms 200] [--maint-hold-ms 15]\n");
			return 2;
		}
	}
	if (workers < 1 || workers > 64) {
		fprintf(stderr, "frontend: --workers must be 1..64\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	a.sin_port = htons((uint16_t)port);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0) {
		perror("frontend: socket");
		return 1;
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 256)) {
		fprintf(stderr, "frontend: listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
		return 1;
	}
	epfd = epoll_create1(0);
	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev)) {
		perror("frontend: epoll");
		return 1;
	}
	for (int i = 0; i < workers; i++) {
		if (pthread_create(&t, NULL, worker_main, (void *)(intptr_t)i)) {
			fprintf(stderr, "frontend: cannot start worker %d\n", i);
			return 1;
		}
	}
	if (maint_hold_ms > 0 && pthread_create(&t, NULL, maint_main, NULL)) {
		fprintf(stderr, "frontend: cannot start cache-maint\n");
		return 1;
	}
	prctl(PR_SET_NAME, "frontend", 0, 0, 0);
	fprintf(stderr,
		"frontend: pid %d listening on 127.0.0.1:%d, kvstore at 127.0.0.1:%d, "
		"%d workers\n",
		getpid(), port, kv_port, workers);
	/* the acceptor: owns the epoll set, hands readable connections to workers */
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(epfd, evs, 64, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("frontend: epoll_wait");
			return 1;
		}
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			int fd;

			if (c) {
				queue_push(c);
				continue;
			}
			while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
				struct epoll_event cev = {.events = EPOLLIN | EPOLLONESHOT};

				c = calloc(1, sizeof(*c));
				if (!c) {
					close(fd);
					continue;
				}
				c->fd = fd;
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				cev.data.ptr = c;
				if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &cev)) {
					close(fd);
					free(c);
				}
			}
		}
	}
}
