/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Syscalls in flight: the enter tracepoint of a target's futex / socket /
 * poll call stores what the exit needs (time, arguments, socket state before
 * the call) in the thread's slot; the exit emits ONE record with enter_ts and
 * frees the slot. A thread is in one syscall at a time. What is left in
 * the map when recording stops are calls still blocked: the recorder writes
 * them as enter records.
 */
#ifndef CRITPATH_BPF_SYSCALLS_H
#define CRITPATH_BPF_SYSCALLS_H

#include "common.h"
#include "critpath_inflight.h"

/*
 * Task-local storage, not a hash keyed by tid: the enter's store and the
 * exit's lookup go straight to the thread's own slot, with no hashing, no
 * bucket lock and no delete (kind = 0 marks the slot free). The recorder
 * reads the slots left at stop through pidfds of the target threads.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cp_inflight);
} inflight SEC(".maps") __weak;

/* Enter: the call's state into the thread's slot. A slot that cannot be
 * allocated loses the call's record: counted as a drop. */
static __always_inline void inflight_put(const struct cp_inflight *in)
{
	struct cp_inflight *slot;

	slot = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (slot)
		*slot = *in;
	else
		count_drop();
}

/* Exit: the thread's call in flight, or NULL. */
static __always_inline struct cp_inflight *inflight_get(void)
{
	struct cp_inflight *in;

	in = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0, 0);
	return in && in->kind ? in : NULL;
}

static __always_inline void inflight_done(struct cp_inflight *in)
{
	in->kind = 0;
}

/* The traced syscalls, by number (critpath_inflight.h), set by the recorder
 * from the host's syscall numbers; syscalls.bpf.c reads it. */
extern const volatile __u16 cfg_sys_calls[CP_SYS_TABLE];

/* The families' entry points (global functions, futex.bpf.c and
 * sock.bpf.c): the caller has checked that the thread is a target; an exit
 * gets the thread's slot (the verifier makes the callee check for NULL). */
int cp_futex_enter(__u32 call, __u64 a0, __u64 a1, __u64 a2, __u64 a3);
int cp_futex_exit(struct cp_inflight *in, __s64 ret);
/* extra: recvfrom's flags, else the 5th argument (sendto's dest_addr) */
int cp_sock_enter(__u32 call, __u64 fd, __u64 buf, __u64 len, __u64 extra);
int cp_sock_exit(struct cp_inflight *in, __s64 ret);
int cp_poll_enter(__u32 call);
int cp_poll_exit(struct cp_inflight *in, __s64 ret);

#endif /* CRITPATH_BPF_SYSCALLS_H */
