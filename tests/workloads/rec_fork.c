// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * rec_fork: forks a child that execs PROG ARGS (a traced process's child is
 * followed by the recorder), waits for it, exits with 0 if the child did.
 *
 *   rec_fork PROG [ARGS..]
 *
 * Prints "READY pid=P", waits for go (see rec_common.h; the child inherits
 * stdin and may wait for its own), forks, prints "CHILD pid=C" then
 * "DONE status=S".
 */
#include <sys/wait.h>

#include "rec_common.h"

int main(int argc, char **argv)
{
	pid_t child;
	int status;

	if (argc < 2)
		kp_die("usage: rec_fork PROG [ARGS..]");
	printf("READY pid=%d\n", getpid());
	rec_go(0);
	child = fork();
	if (child < 0)
		kp_die("fork: %s", strerror(errno));
	if (child == 0) {
		execv(argv[1], argv + 1);
		kp_die("exec %s: %s", argv[1], strerror(errno));
	}
	printf("CHILD pid=%d\n", child);
	fflush(stdout);
	if (waitpid(child, &status, 0) != child)
		kp_die("waitpid: %s", strerror(errno));
	printf("DONE status=%d\n", status);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
