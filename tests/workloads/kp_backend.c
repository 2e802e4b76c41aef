// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * kp_backend: service B of the kernel-path workloads. Speaks the memcached
 * text protocol's `get KEY\r\n`; the key says what the request costs:
 * "c20" = compute 20 ms of CPU, "s15" = sleep 15 ms. One thread ("B1") per
 * connection. Prints "READY pid=P port=N" on stdout once listening.
 *
 * --udp: one thread ("B1", its tid printed as B1=T) answers datagrams on an
 * unconnected UDP socket instead: DNS queries, whose name's first label is
 * the key ("s15.kp.test"; answered NXDOMAIN), or the text requests above.
 * It peeks at each datagram's size before reading it (MSG_PEEK | MSG_TRUNC,
 * as systemd-resolved does).
 *
 *   kp_backend [--port N] [--udp]
 */
#include "kp_common.h"

static void *serve_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[512], key[64], reply[160];

	kp_set_name("B1");
	for (;;) {
		size_t len = kp_read_until(fd, buf, sizeof(buf), "\r\n");
		double ms;

		if (!len)
			break;
		if (sscanf(buf, "get %63s", key) != 1 || (key[0] != 'c' && key[0] != 's'))
			kp_die("kp_backend: bad request '%.*s'", (int)len, buf);
		ms = atof(key + 1);
		if (key[0] == 'c')
			kp_spin_ms(ms);
		else
			kp_sleep_ms(ms);
		snprintf(reply, sizeof(reply), "VALUE %s 0 2\r\nok\r\nEND\r\n", key);
		kp_write_all(fd, reply, strlen(reply));
	}
	close(fd);
	return NULL;
}

static void do_key(const char *key)
{
	double ms = atof(key + 1);

	if (key[0] == 'c')
		kp_spin_ms(ms);
	else
		kp_sleep_ms(ms);
}

static int tid_b1;
static pthread_mutex_t b1_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t b1_cv = PTHREAD_COND_INITIALIZER;

static void *serve_udp(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[512], key[64];

	kp_set_name("B1");
	pthread_mutex_lock(&b1_mu);
	tid_b1 = kp_gettid();
	pthread_cond_signal(&b1_cv);
	pthread_mutex_unlock(&b1_mu);
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recv(fd, NULL, 0, MSG_PEEK | MSG_TRUNC);
		uint8_t *q = (uint8_t *)buf;

		if (n >= (ssize_t)sizeof(buf))
			kp_die("kp_backend: a datagram of %zd bytes", n);
		if (n >= 0)
			n = recvfrom(fd, buf, sizeof(buf) - 1, 0, (struct sockaddr *)&from, &fl);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			kp_die("recvfrom: %s", strerror(errno));
		}
		buf[n] = '\0';
		if (n >= 17 && !(q[2] & 0x80) && q[12] && q[12] < sizeof(key) && 13 + q[12] <= n) {
			/* a DNS query: the first label is the key */
			memcpy(key, buf + 13, q[12]);
			key[q[12]] = '\0';
			if (key[0] != 'c' && key[0] != 's')
				kp_die("kp_backend: bad query key '%s'", key);
			do_key(key);
			q[2] |= 0x80; /* a response, */
			q[3] = 0x83;  /* recursion available, NXDOMAIN */
		} else if (sscanf(buf, "get %63s", key) == 1 && (key[0] == 'c' || key[0] == 's')) {
			do_key(key);
			n = snprintf(buf, sizeof(buf), "VALUE %s 0 2\r\nok\r\nEND\r\n", key);
		} else {
			kp_die("kp_backend: bad datagram of %zd bytes", n);
		}
		if (sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl) != n)
			kp_die("sendto: %s", strerror(errno));
	}
	return NULL;
}

static void udp_main(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	pthread_t t;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &al))
		kp_die("udp socket: %s", strerror(errno));
	if (pthread_create(&t, NULL, serve_udp, (void *)(intptr_t)fd))
		kp_die("pthread_create failed");
	pthread_mutex_lock(&b1_mu);
	while (!tid_b1)
		pthread_cond_wait(&b1_cv, &b1_mu);
	pthread_mutex_unlock(&b1_mu);
	printf("READY pid=%d port=%d B1=%d\n", getpid(), ntohs(a.sin_port), tid_b1);
	fflush(stdout);
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	int port = 0, lfd;
	bool udp = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--udp"))
			udp = true;
		else
			kp_die("usage: kp_backend [--port N] [--udp]");
	}
	if (udp) {
		udp_main(port);
		return 0;
	}
	lfd = kp_listen(port, &port);
	printf("READY pid=%d port=%d\n", getpid(), port);
	fflush(stdout);
	for (;;) {
		int one = 1, fd = accept(lfd, NULL, NULL);
		pthread_t t;

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			kp_die("accept: %s", strerror(errno));
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)fd))
			kp_die("pthread_create failed");
		pthread_detach(t);
	}
}
