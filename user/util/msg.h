// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The one way a command tells the user something on stderr: one line,
 * "critpath CMD: ..." ("critpath: ..." when cmd is NULL). */
#ifndef CRITPATH_MSG_H
#define CRITPATH_MSG_H

#define CP_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* An error, or a note the user asked for ("recording 2 processes ..."). */
void cp_error(const char *cmd, const char *fmt, ...) CP_PRINTF(2, 3);
/* The same line with "warning: " after the prefix. */
void cp_warn(const char *cmd, const char *fmt, ...) CP_PRINTF(2, 3);

#endif
