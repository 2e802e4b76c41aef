/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Helpers shared by the kernel-path workloads (kp_*.c): a busy loop that
 * burns a known amount of CPU, loopback TCP, and the one-line text protocols
 * the workloads speak. Expected critical paths come from how these programs
 * are built, so "compute N ms" must mean N ms of this thread's CPU time,
 * never a sleep.
 */
#ifndef KP_COMMON_H
#define KP_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void kp_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void kp_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static inline int kp_gettid(void)
{
	return (int)syscall(SYS_gettid);
}

static inline uint64_t kp_clock_ns(clockid_t clk)
{
	struct timespec ts;

	if (clock_gettime(clk, &ts))
		kp_die("clock_gettime(%d): %s", (int)clk, strerror(errno));
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t kp_now_ns(void)
{
	return kp_clock_ns(CLOCK_MONOTONIC);
}

/* Burns ms of this thread's CPU time. Checking CLOCK_THREAD_CPUTIME_ID (a
 * syscall) only every few microseconds of arithmetic keeps the loop on the CPU
 * rather than in the kernel; time spent preempted does not count, so the work
 * is the same whatever else the machine is doing. */
static uint64_t kp_sink;
/* Every kp_spin_ms burns this many times its ms: a slower CPU's stand-in
 * (kp_server --cpu-scale, for the comparison by SKU). */
static double kp_cpu_scale = 1.0;
static __attribute__((unused)) void kp_spin_ms(double ms)
{
	uint64_t end = kp_clock_ns(CLOCK_THREAD_CPUTIME_ID) + (uint64_t)(ms * kp_cpu_scale * 1e6);
	uint64_t x = kp_sink + 1;

	while (kp_clock_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
		for (int i = 0; i < 4000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		__atomic_store_n(&kp_sink, x, __ATOMIC_RELAXED);
	}
}

static __attribute__((unused)) void kp_sleep_ms(double ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static __attribute__((unused)) void kp_sleep_until(uint64_t mono_ns)
{
	struct timespec ts = {.tv_sec = (time_t)(mono_ns / 1000000000ull),
			      .tv_nsec = (long)(mono_ns % 1000000000ull)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static __attribute__((unused)) void kp_set_name(const char *name)
{
	if (prctl(PR_SET_NAME, name, 0, 0, 0))
		fprintf(stderr, "prctl(PR_SET_NAME, %s): %s\n", name, strerror(errno));
}

/* Listens on 127.0.0.1:port (0 = any free port); *bound gets the port. */
static __attribute__((unused)) int kp_listen(int port, int *bound)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		kp_die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)))
		kp_die("bind 127.0.0.1:%d: %s", port, strerror(errno));
	if (listen(fd, 64))
		kp_die("listen: %s", strerror(errno));
	if (getsockname(fd, (struct sockaddr *)&a, &len))
		kp_die("getsockname: %s", strerror(errno));
	*bound = ntohs(a.sin_port);
	return fd;
}

/* A dual-stack socket (AF_INET6) connected to 127.0.0.1 as ::ffff:127.0.0.1,
 * as Java's sockets are. */
static __attribute__((unused)) int kp_connect_v6(int port)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
	int one = 1;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	if (fd < 0)
		kp_die("socket: %s", strerror(errno));
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &a.sin6_addr);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
		kp_die("connect [::ffff:127.0.0.1]:%d: %s", port, strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static __attribute__((unused)) int kp_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		kp_die("socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
		kp_die("connect 127.0.0.1:%d: %s", port, strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static __attribute__((unused)) void kp_write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			kp_die("write fd %d: %s", fd, n < 0 ? strerror(errno) : "short write");
		buf += n;
		len -= (size_t)n;
	}
}

/* Reads until buf holds `end` (e.g. "\r\n\r\n"). Returns the bytes up to and
 * including it, 0 on a clean EOF before any byte. Requests here come one at a
 * time (the client waits for each reply), so nothing follows the terminator. */
static __attribute__((unused)) size_t kp_read_until(int fd, char *buf, size_t cap, const char *end)
{
	size_t len = 0;

	for (;;) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			kp_die("read fd %d: %s", fd, strerror(errno));
		if (n == 0) {
			if (len)
				kp_die("read fd %d: EOF inside a message", fd);
			return 0;
		}
		len += (size_t)n;
		buf[len] = '\0';
		char *p = strstr(buf, end);

		if (p)
			return (size_t)(p - buf) + strlen(end);
		if (len >= cap - 1)
			kp_die("read fd %d: message longer than %zu bytes", fd, cap);
	}
}

#define KP_HTTP_REPLY "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"

#endif /* KP_COMMON_H */
