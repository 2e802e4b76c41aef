// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * kvstore: the demo's downstream key-value service. One thread, one epoll
 * loop, the memcached text protocol's `get KEY..` and `set KEY FLAGS EXP LEN`
 * on 127.0.0.1. A get of a key nobody set "loads" it: the value is derived
 * from the key by a few thousand rounds of hashing, the little bit of real
 * work every request does.
 *
 *   kvstore [--port 11311] [--work-rounds N]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define TABLE_SLOTS 4096
#define KEY_MAX 64
#define VAL_MAX 256
#define BUF_CAP 16384

struct entry {
	char key[KEY_MAX];
	char val[VAL_MAX];
	size_t len;
	uint32_t flags;
};

struct conn {
	int fd;
	size_t in_len;
	char in[BUF_CAP];
};

static struct entry table[TABLE_SLOTS];
static unsigned work_rounds = 20000;

static uint64_t hash_str(const char *s, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static struct entry *slot_for(const char *key)
{
	return &table[hash_str(key, strlen(key), 14695981039346656037ull) % TABLE_SLOTS];
}

/* "Loading" a value: the work a real store would spend decoding or reading. */
static void load_value(struct entry *e, const char *key)
{
	uint64_t h = hash_str(key, strlen(key), 14695981039346656037ull);

	for (unsigned i = 0; i < work_rounds; i++)
		h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull + i;
	snprintf(e->key, sizeof(e->key), "%s", key);
	e->len =
	    (size_t)snprintf(e->val, sizeof(e->val), "{\"key\":\"%s\",\"price\":%u,\"stock\":%u}",
			     key, (unsigned)(h % 10000), (unsigned)((h >> 20) % 100));
	e->flags = 0;
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

/* Handles the complete commands in c->in; returns -1 to drop the connection. */
static int handle_input(struct conn *c)
{
	static char out[BUF_CAP * 2];
	size_t off = 0, olen = 0;

	for (;;) {
		char *line = c->in + off, *eol = memmem(line, c->in_len - off, "\r\n", 2);
		char key[KEY_MAX];
		unsigned flags, exptime, bytes;

		if (!eol)
			break;
		*eol = '\0';
		if (!strncmp(line, "get ", 4)) {
			char *save = NULL;

			for (char *k = strtok_r(line + 4, " ", &save); k;
			     k = strtok_r(NULL, " ", &save)) {
				struct entry *e = slot_for(k);

				if (strlen(k) >= KEY_MAX)
					continue;
				if (strcmp(e->key, k))
					load_value(e, k);
				if (olen + VAL_MAX + 2 * KEY_MAX > sizeof(out))
					break;
				olen += (size_t)snprintf(out + olen, sizeof(out) - olen,
							 "VALUE %s %u %zu\r\n%.*s\r\n", k, e->flags,
							 e->len, (int)e->len, e->val);
			}
			olen += (size_t)snprintf(out + olen, sizeof(out) - olen, "END\r\n");
			off = (size_t)(eol - c->in) + 2;
		} else if (sscanf(line, "set %63s %u %u %u", key, &flags, &exptime, &bytes) == 4) {
			size_t need = (size_t)(eol - c->in) + 2 + bytes + 2;
			struct entry *e;

			if (bytes >= VAL_MAX) {
				olen += (size_t)snprintf(out + olen, sizeof(out) - olen,
							 "SERVER_ERROR object too large\r\n");
				return send_all(c->fd, out, olen), -1;
			}
			if (need > c->in_len) {
				*eol = '\r';
				break;
			}
			e = slot_for(key);
			snprintf(e->key, sizeof(e->key), "%s", key);
			memcpy(e->val, eol + 2, bytes);
			e->len = bytes;
			e->flags = flags;
			olen += (size_t)snprintf(out + olen, sizeof(out) - olen, "STORED\r\n");
			off = need;
		} else {
			olen += (size_t)snprintf(out + olen, sizeof(out) - olen, "ERROR\r\n");
			off = (size_t)(eol - c->in) + 2;
		}
		if (olen > sizeof(out) - 2 * VAL_MAX) {
			if (send_all(c->fd, out, olen))
				return -1;
			olen = 0;
		}
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	if (c->in_len >= sizeof(c->in) - 1)
		return -1; /* a line longer than the buffer: not a client of ours */
	return olen ? send_all(c->fd, out, olen) : 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int port = 11311, one = 1, lfd, ep;
	struct epoll_event ev = {.events = EPOLLIN};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc) {
			port = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--work-rounds") && i + 1 < argc) {
			work_rounds = (unsigned)atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: kvstore [--port 11311] [--work-rounds N]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	a.sin_port = htons((uint16_t)port);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0) {
		perror("kvstore: socket");
		return 1;
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 128)) {
		fprintf(stderr, "kvstore: listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
		return 1;
	}
	ep = epoll_create1(0);
	ev.data.ptr = NULL;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev)) {
		perror("kvstore: epoll");
		return 1;
	}
	fprintf(stderr, "kvstore: pid %d listening on 127.0.0.1:%d\n", getpid(), port);
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("kvstore: epoll_wait");
			return 1;
		}
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;

			if (!c) {
				int fd;

				while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					struct epoll_event cev = {.events = EPOLLIN};

					c = calloc(1, sizeof(*c));
					if (!c) {
						close(fd);
						continue;
					}
					c->fd = fd;
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					cev.data.ptr = c;
					if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev)) {
						close(fd);
						free(c);
					}
				}
				continue;
			}
			for (;;) {
				ssize_t r =
				    read(c->fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len);

				if (r < 0 && errno == EINTR)
					continue;
				if (r < 0 && errno == EAGAIN)
					break;
				if (r <= 0 || (c->in_len += (size_t)r, handle_input(c))) {
					close(c->fd);
					free(c);
					break;
				}
			}
		}
	}
}
