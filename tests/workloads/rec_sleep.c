// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * rec_sleep: the main thread sleeps N times for MS milliseconds, taking
 * turns with nanosleep, a relative clock_nanosleep and an absolute one
 * (TIMER_ABSTIME), and nothing else wakes it: every wakeup in between is the
 * kernel's timer.
 *
 *   rec_sleep N MS
 *
 * Prints "READY pid=P tid=T", waits for go (see rec_common.h), sleeps, prints
 * "DONE t0=NS t1=NS" (CLOCK_MONOTONIC around the sleeps), exits 0.
 */
#include "rec_common.h"

static void sleep_once(long i, long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	int err = 0;

	switch (i % 3) {
	case 0:
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		break;
	case 1:
		while ((err = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts)) == EINTR)
			;
		break;
	default: {
		uint64_t end = kp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)ms * 1000000;

		ts.tv_sec = end / 1000000000;
		ts.tv_nsec = end % 1000000000;
		while ((err = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) == EINTR)
			;
	}
	}
	if (err)
		kp_die("clock_nanosleep: %s", strerror(err));
}

int main(int argc, char **argv)
{
	long n, ms;
	uint64_t t0, t1;

	if (argc != 3)
		kp_die("usage: rec_sleep N MS");
	n = rec_arg(argv[1], 1, 1000000, "N");
	ms = rec_arg(argv[2], 1, 60000, "MS");
	printf("READY pid=%d tid=%d\n", getpid(), kp_gettid());
	rec_go(0);
	t0 = kp_clock_ns(CLOCK_MONOTONIC);
	for (long i = 0; i < n; i++)
		sleep_once(i, ms);
	t1 = kp_clock_ns(CLOCK_MONOTONIC);
	printf("DONE t0=%llu t1=%llu\n", (unsigned long long)t0, (unsigned long long)t1);
	return 0;
}
