// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * futex(2), futex_wait(2), futex_wake(2), futex_waitv(2) of target threads:
 * one CP_EV_FUTEX per call, at exit, with the enter time. Syscall tracepoints
 * (classic: tracefs must be mounted); a call the kernel lacks is left out by
 * the recorder (autoload off).
 */
#include "syscalls.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

static __always_inline int futex_enter(__u8 call, __u64 uaddr, __u64 op, __u64 val)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_inflight in = {};

	if (!tgid_is_target(id >> 32))
		return 0;
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

static __always_inline int futex_exit(__u8 call, long ret)
{
	struct cp_inflight *in;
	struct cp_ev_futex *e;

	in = inflight_get();
	if (!in)
		return 0;
	if (in->kind != INFLIGHT_FUTEX || in->call != call)
		goto out;
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

/* futex(uaddr, op, val, utime, uaddr2, val3) */
SEC("tracepoint/syscalls/sys_enter_futex")
int sys_enter_futex(struct trace_event_raw_sys_enter *ctx)
{
	EMPTY_GUARD();
	return futex_enter(CP_FUTEX_CALL_FUTEX, ctx->args[0], ctx->args[1], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_exit_futex")
int sys_exit_futex(struct trace_event_raw_sys_exit *ctx)
{
	EMPTY_GUARD();
	return futex_exit(CP_FUTEX_CALL_FUTEX, ctx->ret);
}

/* futex_wait(uaddr, val, mask, flags, timeout, clockid): op = flags */
SEC("tracepoint/syscalls/sys_enter_futex_wait")
int sys_enter_futex_wait(struct trace_event_raw_sys_enter *ctx)
{
	EMPTY_GUARD();
	return futex_enter(CP_FUTEX_CALL_WAIT, ctx->args[0], ctx->args[3], ctx->args[1]);
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int sys_exit_futex_wait(struct trace_event_raw_sys_exit *ctx)
{
	EMPTY_GUARD();
	return futex_exit(CP_FUTEX_CALL_WAIT, ctx->ret);
}

/* futex_wake(uaddr, mask, nr, flags): op = flags, val = nr */
SEC("tracepoint/syscalls/sys_enter_futex_wake")
int sys_enter_futex_wake(struct trace_event_raw_sys_enter *ctx)
{
	EMPTY_GUARD();
	return futex_enter(CP_FUTEX_CALL_WAKE, ctx->args[0], ctx->args[3], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_exit_futex_wake")
int sys_exit_futex_wake(struct trace_event_raw_sys_exit *ctx)
{
	EMPTY_GUARD();
	return futex_exit(CP_FUTEX_CALL_WAKE, ctx->ret);
}

/* futex_waitv(waiters, nr, flags, timeout, clockid): uaddr and val of the
 * first waiter, op = flags */
SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int sys_enter_futex_waitv(struct trace_event_raw_sys_enter *ctx)
{
	struct futex_waitv w = {};

	EMPTY_GUARD();
	if (!current_is_target())
		return 0;
	bpf_probe_read_user(&w, sizeof(w), (void *)ctx->args[0]);
	return futex_enter(CP_FUTEX_CALL_WAITV, w.uaddr, ctx->args[2], w.val);
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int sys_exit_futex_waitv(struct trace_event_raw_sys_exit *ctx)
{
	EMPTY_GUARD();
	return futex_exit(CP_FUTEX_CALL_WAITV, ctx->ret);
}
