// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * rec_hog: a CPU hog pinned to one CPU, never sleeping, until killed. Not
 * traced itself: the run-queue culprit of a traced thread on that CPU.
 *
 *   rec_hog CPU
 *
 * Prints "READY pid=P cpu=C", then spins.
 */
#include "rec_common.h"

int main(int argc, char **argv)
{
	long cpu;

	if (argc != 2)
		kp_die("usage: rec_hog CPU");
	cpu = rec_arg(argv[1], 0, 4095, "CPU");
	rec_pin(cpu);
	printf("READY pid=%d cpu=%ld\n", getpid(), cpu);
	fflush(stdout);
	for (;;)
		rec_spin_ms(1000);
}
