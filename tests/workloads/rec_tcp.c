// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * rec_tcp: a TCP client and server over loopback, one thread each, in one
 * process. The client connects, then ROUNDS times: sleeps 20 ms (so the
 * server is asleep in read when the request arrives), sends a request of
 * REQ_BYTES with one send(), receives RESP_BYTES with recv(). The server
 * accepts, reads each request with read() and answers with one write().
 *
 * Message i of kind K ("REQ" or "RSP") is "K %04d " followed by bytes
 * (j * 31 + i * 7) & 0xff at offset j: every byte value appears, so the
 * recorder's payload capture and dump's escaping are both exercised. The
 * test computes the same bytes.
 *
 *   rec_tcp ROUNDS REQ_BYTES RESP_BYTES
 *
 * Prints "READY pid=P port=N server=TID client=TID", waits for go (see
 * rec_common.h), runs, prints "DONE", exits 0.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include "rec_common.h"

static long rounds, req_bytes, resp_bytes;
static int lfd, port, tid_server, tid_client;

static void message(char *buf, const char *kind, long i, long size)
{
	char prefix[32];
	int n = snprintf(prefix, sizeof(prefix), "%s %04ld ", kind, i);

	for (long j = 0; j < size; j++)
		buf[j] = j < n ? prefix[j] : (char)((j * 31 + i * 7) & 0xff);
}

/* Receives exactly len bytes with read() or recv(). */
static void recv_all(int fd, char *buf, long len, int use_recv)
{
	while (len > 0) {
		ssize_t n = use_recv ? recv(fd, buf, len, 0) : read(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			kp_die("%s fd %d: %s", use_recv ? "recv" : "read", fd,
			       n ? strerror(errno) : "EOF inside a message");
		buf += n;
		len -= n;
	}
}

static void check(const char *got, const char *kind, long i, long size)
{
	char *want = malloc(size);

	message(want, kind, i, size);
	if (memcmp(got, want, size))
		kp_die("%s %ld: not the bytes sent", kind, i);
	free(want);
}

static void *server(void *arg)
{
	char *req = malloc(req_bytes), *resp = malloc(resp_bytes), c;
	int fd;

	__atomic_store_n(&tid_server, kp_gettid(), __ATOMIC_RELEASE);
	rec_go_wait();
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		kp_die("accept: %s", strerror(errno));
	for (long i = 0; i < rounds; i++) {
		recv_all(fd, req, req_bytes, 0);
		check(req, "REQ", i, req_bytes);
		message(resp, "RSP", i, resp_bytes);
		if (write(fd, resp, resp_bytes) != resp_bytes)
			kp_die("write response %ld: %s", i, strerror(errno));
	}
	if (read(fd, &c, 1) != 0)
		kp_die("server: expected EOF after %ld rounds", rounds);
	close(fd);
	free(req);
	free(resp);
	return NULL;
}

static void *client(void *arg)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char *req = malloc(req_bytes), *resp = malloc(resp_bytes);
	int fd;

	__atomic_store_n(&tid_client, kp_gettid(), __ATOMIC_RELEASE);
	rec_go_wait();
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		kp_die("connect 127.0.0.1:%d: %s", port, strerror(errno));
	for (long i = 0; i < rounds; i++) {
		usleep(20000);
		message(req, "REQ", i, req_bytes);
		if (send(fd, req, req_bytes, 0) != req_bytes)
			kp_die("send request %ld: %s", i, strerror(errno));
		recv_all(fd, resp, resp_bytes, 1);
		check(resp, "RSP", i, resp_bytes);
	}
	close(fd);
	free(req);
	free(resp);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	pthread_t ts, tc;

	if (argc != 4)
		kp_die("usage: rec_tcp ROUNDS REQ_BYTES RESP_BYTES");
	rounds = rec_arg(argv[1], 1, 100000, "ROUNDS");
	req_bytes = rec_arg(argv[2], 16, 65536, "REQ_BYTES");
	resp_bytes = rec_arg(argv[3], 16, 65536, "RESP_BYTES");
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 8) ||
	    getsockname(lfd, (struct sockaddr *)&a, &len))
		kp_die("listen on 127.0.0.1: %s", strerror(errno));
	port = ntohs(a.sin_port);
	rec_go_init();
	if (pthread_create(&ts, NULL, server, NULL) || pthread_create(&tc, NULL, client, NULL))
		kp_die("pthread_create failed");
	while (!__atomic_load_n(&tid_server, __ATOMIC_ACQUIRE) ||
	       !__atomic_load_n(&tid_client, __ATOMIC_ACQUIRE))
		sched_yield();
	printf("READY pid=%d port=%d server=%d client=%d\n", getpid(), port, tid_server,
	       tid_client);
	rec_go(2);
	pthread_join(tc, NULL);
	pthread_join(ts, NULL);
	printf("DONE\n");
	return 0;
}
