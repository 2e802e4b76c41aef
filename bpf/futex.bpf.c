// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * futex(2), futex_wait(2), futex_wake(2), futex_waitv(2) of target threads:
 * one CP_EV_FUTEX per call, at exit, with the enter time. Reached from the
 * raw_syscalls programs (syscalls.bpf.c) through cp_futex_enter/exit.
 */
#include "syscalls.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

static __always_inline int futex_enter(__u8 call, __u64 uaddr, __u64 op, __u64 val)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_inflight in = {};

	in.ts = bpf_ktime_get_ns();
	in.pid = id >> 32;
	in.kind = INFLIGHT_FUTEX;
	in.call = call;
	in.arg0 = uaddr;
	in.arg1 = op;
	in.arg2 = val;
	inflight_put(&in);
	return 0;
}

static __always_inline int futex_exit(struct cp_inflight *in, long ret)
{
	struct cp_ev_futex *e;
	__u8 call;

	if (!in)
		return 0;
	if (in->kind != INFLIGHT_FUTEX)
		goto out;
	call = in->call;
	e = ev_reserve(CP_EV_FUTEX, sizeof(*e), bpf_ktime_get_ns());
	if (!e)
		goto out;
	e->enter_ts = in->ts;
	e->uaddr = in->arg0;
	e->ret = ret;
	e->op = in->arg1;
	e->val = in->arg2;
	e->phase = CP_PHASE_EXIT;
	e->call = call;
	__builtin_memset(e->__pad, 0, sizeof(e->__pad));
	ev_submit(e);
out:
	inflight_done(in);
	return 0;
}

/*
 * The arguments by call:
 *   futex(uaddr, op, val, utime, uaddr2, val3)
 *   futex_wait(uaddr, val, mask, flags, timeout, clockid): op = flags
 *   futex_wake(uaddr, mask, nr, flags): op = flags, val = nr
 *   futex_waitv(waiters, nr, flags, timeout, clockid): uaddr and val of the
 *     first waiter, op = flags
 */
__noinline int cp_futex_enter(__u32 call, __u64 a0, __u64 a1, __u64 a2, __u64 a3)
{
	struct futex_waitv w = {};

	switch (call) {
	case CP_FUTEX_CALL_FUTEX:
		return futex_enter(call, a0, a1, a2);
	case CP_FUTEX_CALL_WAIT:
		return futex_enter(call, a0, a3, a1);
	case CP_FUTEX_CALL_WAKE:
		return futex_enter(call, a0, a3, a2);
	case CP_FUTEX_CALL_WAITV:
		bpf_probe_read_user(&w, sizeof(w), (void *)a0);
		return futex_enter(call, w.uaddr, a2, w.val);
	}
	return 0;
}

__noinline int cp_futex_exit(struct cp_inflight *in, __s64 ret)
{
	return futex_exit(in, ret);
}
