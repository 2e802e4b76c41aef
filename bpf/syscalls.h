/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Syscalls in flight (--all-syscalls): the enter keeps what the exit needs in
 * the thread's slot, the exit emits one record. Slots left at stop are calls
 * still blocked: the recorder writes them as enter records. */
#ifndef CRITPATH_BPF_SYSCALLS_H
#define CRITPATH_BPF_SYSCALLS_H

#include "common.h"
#include "critpath_inflight.h"

/* Task storage, not a hash by tid: no hashing, bucket lock or delete
 * (kind 0: free). The recorder reads it at stop through pidfds. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cp_inflight);
} inflight SEC(".maps") __weak;

/* Enter: the call's state into the slot (none: a drop). */
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

/* The traced syscalls by number, from the host's numbering. */
extern const volatile __u16 cfg_sys_calls[CP_SYS_TABLE];

/* Global entry points (futex.bpf.c, sock.bpf.c) for target threads; the
 * verifier makes callees NULL-check the slot. */
int cp_futex_enter(__u32 call, __u64 a0, __u64 a1, __u64 a2, __u64 a3);
int cp_futex_exit(struct cp_inflight *in, __s64 ret);
/* extra: recvfrom's flags, else the 5th argument (sendto's dest_addr) */
int cp_sock_enter(__u32 call, __u64 fd, __u64 buf, __u64 len, __u64 extra);
int cp_sock_exit(struct cp_inflight *in, __s64 ret);
int cp_poll_enter(__u32 call);
int cp_poll_exit(struct cp_inflight *in, __s64 ret);

#endif /* CRITPATH_BPF_SYSCALLS_H */
