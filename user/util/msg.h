// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The one way a command tells the user something on stderr: one line,
 * "critpath CMD: ..." ("critpath: ..." when cmd is NULL), made safe for a
 * terminal; and the same safety for the text outputs' names. */
#ifndef CRITPATH_MSG_H
#define CRITPATH_MSG_H

#define CP_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* An error, or a note the user asked for ("recording 2 processes ..."). */
void cp_error(const char *cmd, const char *fmt, ...) CP_PRINTF(2, 3);
/* The same line with "warning: " after the prefix. */
void cp_warn(const char *cmd, const char *fmt, ...) CP_PRINTF(2, 3);

/* s as a terminal may show it: control characters (C0, DEL, C1) and bytes
 * that are not UTF-8 as \xNN (\u0080-\u009f for C1), so a thread or
 * request name cannot move the cursor or rewrite the screen. s itself when
 * it needs nothing (the usual case), else a copy valid until the 8th call
 * after on the same thread. */
const char *text__safe(const char *s);

#endif
