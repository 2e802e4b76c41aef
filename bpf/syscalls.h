/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Syscalls in flight: the enter tracepoint of a target's futex / socket /
 * poll call stores what the exit needs (time, arguments, socket state before
 * the call) under the thread id; the exit emits ONE record with enter_ts and
 * deletes the entry. A thread is in one syscall at a time. What is left in
 * the map when recording stops are calls still blocked: the recorder writes
 * them as enter records.
 */
#ifndef CRITPATH_BPF_SYSCALLS_H
#define CRITPATH_BPF_SYSCALLS_H

#include "common.h"

enum inflight_kind {
	INFLIGHT_FUTEX = 1,
	INFLIGHT_SOCK = 2,
	INFLIGHT_POLL = 3,
};

/* Keep in sync with user/record_hooks.c (it reads leftovers at stop). */
struct cp_inflight {
	__u64 ts;
	__u64 arg0; /* futex: uaddr; sock: buffer / iovec / msghdr pointer */
	__u64 arg1; /* futex: op; sock: requested length */
	__u64 arg2; /* futex: val */
	__u64 sk;   /* struct sock * */
	__u32 pid;
	__s32 fd;
	__u8 kind; /* enum inflight_kind */
	__u8 call;
	__u8 capture; /* sock: this call's payload is wanted (see sock.bpf.c) */
	__u8 sock_type;
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u16 __pad;
	__u32 tcp_seq;
	__u8 laddr[CP_ADDR_LEN];
	__u8 raddr[CP_ADDR_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct cp_inflight);
} inflight SEC(".maps") __weak;

static __always_inline __u32 current_tid(void)
{
	return (__u32)bpf_get_current_pid_tgid();
}

#endif /* CRITPATH_BPF_SYSCALLS_H */
