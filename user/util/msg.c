// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include <stdarg.h>
#include <stdio.h>

#include "msg.h"

static void vmsg(const char *cmd, const char *level, const char *fmt, va_list ap)
{
	/* one buffered line: a message is not interleaved with another thread's */
	flockfile(stderr);
	fprintf(stderr, "critpath%s%s: %s", cmd ? " " : "", cmd ? cmd : "", level);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	funlockfile(stderr);
}

void cp_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(cmd, "", fmt, ap);
	va_end(ap);
}

void cp_warn(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(cmd, "warning: ", fmt, ap);
	va_end(ap);
}
