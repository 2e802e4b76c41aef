/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* The one HTTP/2 detector: BPF, redaction and report cannot disagree. */
#ifndef CRITPATH_H2_H
#define CRITPATH_H2_H

#include "critpath_abi.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

#define CP_H2_PREFACE_LEN 24 /* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" */
#define CP_H2_HDR 9	     /* a frame header */
#define CP_H2_MAX_FRAME 16384 /* SETTINGS_MAX_FRAME_SIZE's default */

/* b (16 bytes at least) begins with the client's preface. */
static __always_inline int cp_h2_preface(const __u8 *b)
{
	return b[0] == 'P' && b[1] == 'R' && b[2] == 'I' && b[3] == ' ' && b[4] == '*' &&
	       b[5] == ' ' && b[6] == 'H' && b[7] == 'T' && b[8] == 'T' && b[9] == 'P' &&
	       b[10] == '/' && b[11] == '2' && b[12] == '.' && b[13] == '0' && b[14] == '\r' &&
	       b[15] == '\n';
}

/* 1 when a transfer's first bytes show HTTP/2; *from_start: they begin a
 * direction (preface, SETTINGS), not a connection joined midway. */
static __always_inline int cp_h2_detect(const __u8 *b, __u64 len, int *from_start)
{
	__u32 flen, sid;

	if (len >= 16 && cp_h2_preface(b)) {
		*from_start = 1;
		return 1;
	}
	if (len < CP_H2_HDR)
		return 0;
	flen = (__u32)b[0] << 16 | (__u32)b[1] << 8 | b[2];
	sid = (__u32)b[5] << 24 | (__u32)b[6] << 16 | (__u32)b[7] << 8 | b[8];
	if (flen > CP_H2_MAX_FRAME || (sid >> 31))
		return 0;
	if (b[3] == 4 && !sid) { /* SETTINGS */
		*from_start = !b[4];
		return (!b[4] && flen % 6 == 0) || (b[4] == 1 && !flen);
	}
	*from_start = 0;
	return b[3] == 1 && !(b[4] & ~0x2d) && (sid & 1);
}

#endif /* CRITPATH_H2_H */
