// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * rec_spin: pinned to one CPU, computes SPIN_MS of CPU time, sleeps SLEEP_MS,
 * and again, for SECONDS. With a hog (rec_hog) pinned to the same CPU it
 * waits in the run queue behind it, after each wakeup and when preempted.
 *
 *   rec_spin CPU SECONDS SPIN_MS SLEEP_MS
 *
 * Prints "READY pid=P tid=T cpu=C", waits for go (see rec_common.h), runs,
 * prints "DONE rounds=N", exits 0.
 */
#include "rec_common.h"

int main(int argc, char **argv)
{
	long cpu, secs, spin, nap, n = 0;
	uint64_t end;

	if (argc != 5)
		kp_die("usage: rec_spin CPU SECONDS SPIN_MS SLEEP_MS");
	cpu = rec_arg(argv[1], 0, 4095, "CPU");
	secs = rec_arg(argv[2], 1, 3600, "SECONDS");
	spin = rec_arg(argv[3], 1, 10000, "SPIN_MS");
	nap = rec_arg(argv[4], 0, 10000, "SLEEP_MS");
	rec_pin(cpu);
	printf("READY pid=%d tid=%d cpu=%ld\n", getpid(), kp_gettid(), cpu);
	rec_go(0);
	end = kp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)secs * 1000000000ull;
	while (kp_clock_ns(CLOCK_MONOTONIC) < end) {
		rec_spin_ms(spin);
		if (nap)
			usleep(nap * 1000);
		n++;
	}
	printf("DONE rounds=%ld\n", n);
	return 0;
}
