/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Helpers of the recorder's workloads (rec_*.c, driven by
 * tests/integration/test_record_*.py). A workload prints one line
 * "READY pid=P key=value ..." once its threads exist, then waits for a line
 * (or EOF) on stdin before doing anything the test looks for: a recorder
 * attached with -p after READY sees every call from its beginning. Threads
 * other than main wait on an internal pipe (not a socket, so not recorded)
 * until main lets them go.
 */
#ifndef REC_COMMON_H
#define REC_COMMON_H

#include "kp_common.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static __attribute__((unused)) long rec_arg(const char *s, long min, long max, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || !*s || v < min || v > max)
		kp_die("%s: '%s' is not a number between %ld and %ld", what, s, min, max);
	return v;
}

static __attribute__((unused)) void rec_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		kp_die("sched_setaffinity(cpu %d): %s", cpu, strerror(errno));
}

/* Burns ms of this thread's CPU time (time spent preempted does not count). */
static __attribute__((unused)) void rec_spin_ms(double ms)
{
	struct timespec ts;
	uint64_t end, now;
	static volatile uint64_t sink;
	uint64_t x = sink + 1;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	end = (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec + (uint64_t)(ms * 1e6);
	do {
		for (int i = 0; i < 4000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		sink = x;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
		now = (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
	} while (now < end);
}

static int rec_go_pipe[2] = {-1, -1};

/* Before starting threads that call rec_go_wait(). */
static __attribute__((unused)) void rec_go_init(void)
{
	if (pipe(rec_go_pipe))
		kp_die("pipe: %s", strerror(errno));
}

/* Main: waits for a line or EOF on stdin (read byte by byte, so a child
 * inheriting stdin sees what follows), then releases nthreads waiters. */
static __attribute__((unused)) void rec_go(int nthreads)
{
	char c;
	ssize_t n;

	fflush(stdout);
	while ((n = read(0, &c, 1)) == 1 && c != '\n')
		;
	if (n < 0)
		kp_die("read stdin: %s", strerror(errno));
	for (int i = 0; i < nthreads; i++)
		if (write(rec_go_pipe[1], "g", 1) != 1)
			kp_die("write go pipe: %s", strerror(errno));
}

static __attribute__((unused)) void rec_go_wait(void)
{
	char c;
	ssize_t n;

	while ((n = read(rec_go_pipe[0], &c, 1)) != 1)
		if (n == 0 || errno != EINTR)
			kp_die("read go pipe: %s", n ? strerror(errno) : "closed");
}

#endif /* REC_COMMON_H */
