// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* futex, futex_wait, futex_wake, futex_waitv (--all-syscalls): one record
 * per call, at exit. */
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

/* Arguments mapped to futex's (uaddr, op, val): the newer calls' op is their
 * flags; futex_waitv's uaddr and val are its first waiter's. */
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
