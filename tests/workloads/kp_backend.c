// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * kp_backend: service B of the kernel-path workloads. Speaks the memcached
 * text protocol's `get KEY\r\n`; the key says what the request costs:
 * "c20" = compute 20 ms of CPU, "s15" = sleep 15 ms. One thread ("B1") per
 * connection. Prints "READY pid=P port=N" on stdout once listening.
 *
 *   kp_backend [--port N]
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

int main(int argc, char **argv)
{
	int port = 0, lfd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else
			kp_die("usage: kp_backend [--port N]");
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
