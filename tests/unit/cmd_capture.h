/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Runs a CLI command function in-process with its stdout and stderr captured
 * into DIR/stdout and DIR/stderr (shared by the report/diff command tests). */
#ifndef CRITPATH_TEST_CMD_CAPTURE_H
#define CRITPATH_TEST_CMD_CAPTURE_H

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

/* Returns the command's status. The output paths are built here, not by
 * the caller's path helpers: their buffers may hold argv's strings. */
static inline int run_captured(const char *dir, int (*cmd)(int, char **), char **argv)
{
	int argc = 0, out, err, so = dup(1), se = dup(2), rc;
	char po[300], pe[300];

	while (argv[argc])
		argc++;
	fflush(stdout);
	fflush(stderr);
	snprintf(po, sizeof(po), "%s/stdout", dir);
	snprintf(pe, sizeof(pe), "%s/stderr", dir);
	out = open(po, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	err = open(pe, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	dup2(out, 1);
	dup2(err, 2);
	rc = cmd(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(out);
	close(err);
	close(so);
	close(se);
	return rc;
}

#endif
