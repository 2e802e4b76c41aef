/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* A syscall's state in flight (the recorder reads it at stop) and the syscall table. */
#ifndef CRITPATH_INFLIGHT_H
#define CRITPATH_INFLIGHT_H

#include "critpath_abi.h"

enum cp_inflight_kind {
	INFLIGHT_FUTEX = 1,
	INFLIGHT_SOCK = 2,
	INFLIGHT_POLL = 3,
};

#define URING_REQ 1 /* cp_inflight.uring: an io_uring request's transfer */
#define URING_BUF 2 /* arg0 is the data's buffer, whatever the call */

struct cp_inflight {
	__u64 ts;
	__u64 arg0; /* futex: uaddr; sock: buffer / iovec / msghdr pointer */
	__u64 arg1; /* futex: op; sock: requested length */
	__u64 arg2; /* futex: val; sock: sendto's dest_addr */
	__u64 sk;   /* struct sock * */
	__u32 pid;
	__s32 fd;
	__u8 kind; /* enum cp_inflight_kind; 0: free */
	__u8 call;
	__u8 peek; /* MSG_PEEK */
	__u8 sock_type;
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u8 uring; /* URING_REQ | URING_BUF */
	__u8 sent_at; /* a TCP write: ts is when its bytes left (CP_SOCK_F_SENT_AT) */
	__u32 tcp_seq;
	__u8 laddr[CP_ADDR_LEN];
	__u8 raddr[CP_ADDR_LEN];
	__u64 rec_ts; /* sock: the record's time when its program read the clock already */
};
CP_ASSERT_SIZE(struct cp_inflight, 104);

/* cfg_sys_calls[nr] = kind << 8 | call; 0: not traced */
#define CP_SYS_TABLE 1024
#define CP_SYSC(kind, call) ((kind) << 8 | (call))

#endif /* CRITPATH_INFLIGHT_H */
