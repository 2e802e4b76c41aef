// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* --all-syscalls: raw_syscalls hand a traced call to its family by
 * cfg_sys_calls (the per-syscall tracepoints cost more per event). */
#include "syscalls.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define TS_COMPAT 0x0002 /* arch/x86/include/asm/thread_info.h */

/* A 32-bit task on x86-64 numbers its syscalls differently: not ours. */
static __always_inline bool compat_task(void)
{
#if defined(__TARGET_ARCH_x86)
	struct task_struct *t = bpf_get_current_task_btf();

	return t->thread_info.status & TS_COMPAT;
#else
	return false;
#endif
}

#define SYS_ARG(btf, regs, n)                                                                      \
	((btf) ? PT_REGS_PARM##n##_SYSCALL(regs) : PT_REGS_PARM##n##_CORE_SYSCALL(regs))

static __always_inline int on_sys_enter(bool btf, struct pt_regs *regs, long id)
{
	__u16 c;

	if (!current_is_target() || (__u64)id >= CP_SYS_TABLE)
		return 0;
	c = cfg_sys_calls[id & (CP_SYS_TABLE - 1)];
	if (!c || compat_task())
		return 0;
	switch (c >> 8) {
	case INFLIGHT_FUTEX:
		return cp_futex_enter(c & 0xff, SYS_ARG(btf, regs, 1), SYS_ARG(btf, regs, 2),
				      SYS_ARG(btf, regs, 3), SYS_ARG(btf, regs, 4));
	case INFLIGHT_SOCK:
		/* recvfrom's flags, or sendto's dest_addr */
		return cp_sock_enter(
		    c & 0xff, SYS_ARG(btf, regs, 1), SYS_ARG(btf, regs, 2), SYS_ARG(btf, regs, 3),
		    (c & 0xff) == CP_SOCK_RECVFROM ? SYS_ARG(btf, regs, 4) : SYS_ARG(btf, regs, 5));
	case INFLIGHT_POLL:
		return cp_poll_enter(c & 0xff);
	}
	return 0;
}

static __always_inline int on_sys_exit(long ret)
{
	struct cp_inflight *in;

	if (!current_is_target())
		return 0;
	in = inflight_get();
	if (!in)
		return 0;
	switch (in->kind) {
	case INFLIGHT_FUTEX:
		return cp_futex_exit(in, ret);
	case INFLIGHT_SOCK:
		return cp_sock_exit(in, ret);
	case INFLIGHT_POLL:
		return cp_poll_exit(in, ret);
	}
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter_btf, struct pt_regs *regs, long id)
{
	EMPTY_GUARD();
	return on_sys_enter(true, regs, id);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(sys_enter_raw, struct pt_regs *regs, long id)
{
	EMPTY_GUARD();
	return on_sys_enter(false, regs, id);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_btf, struct pt_regs *regs, long ret)
{
	EMPTY_GUARD();
	return on_sys_exit(ret);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit_raw, struct pt_regs *regs, long ret)
{
	EMPTY_GUARD();
	return on_sys_exit(ret);
}
