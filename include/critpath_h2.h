/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * HTTP/2 as the BPF programs (which then keep a payload on every transfer
 * of the connection), the recorder's redaction and the report all decide
 * it: one detector, compiled on both sides, so they cannot disagree.
 */
#ifndef CRITPATH_H2_H
#define CRITPATH_H2_H

#include "critpath_abi.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

#define CP_H2_PREFACE_LEN 24 /* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" */
#define CP_H2_HDR 9	     /* a frame header */
#define CP_H2_MAX_FRAME 16384 /* SETTINGS_MAX_FRAME_SIZE's default */

/* b (16 bytes at least) begins with the client's preface: its first 16
 * bytes tell it from any other protocol. */
static __always_inline int cp_h2_preface(const __u8 *b)
{
	return b[0] == 'P' && b[1] == 'R' && b[2] == 'I' && b[3] == ' ' && b[4] == '*' &&
	       b[5] == ' ' && b[6] == 'H' && b[7] == 'T' && b[8] == 'T' && b[9] == 'P' &&
	       b[10] == '/' && b[11] == '2' && b[12] == '.' && b[13] == '0' && b[14] == '\r' &&
	       b[15] == '\n';
}

/*
 * Whether a transfer's first len bytes at b show HTTP/2: 1 with *from_start
 * set when they begin a direction of a connection (the client's preface,
 * the server's SETTINGS), 1 with *from_start clear when they show one
 * joined midway (a SETTINGS ACK; a HEADERS frame, with only END_STREAM,
 * END_HEADERS, PADDED, PRIORITY set, on a client's odd stream), else 0.
 */
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
