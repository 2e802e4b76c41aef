/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* The default capture sees waits at sched_switch, not at syscall entry and
 * exit (a syscall hook slows every syscall of the host): the blocked call is
 * read from the user registers and becomes a CP_PHASE_BLOCKED record on
 * resume, or a socket record's enter_ts (blk_take, through a per-CPU stash). */
#ifndef CRITPATH_BPF_BLOCKED_H
#define CRITPATH_BPF_BLOCKED_H

#include "syscalls.h"

#define ENOSYS 38

/* 1: the default capture (above); 0: --all-syscalls (syscalls.bpf.c). */
extern const volatile __u8 cfg_lean;

struct cp_blocked {
	__u64 ts;
	__u64 arg0; /* futex: uaddr; sock: fd */
	__u64 arg1; /* futex: op */
	__u64 arg2; /* futex: val */
	__u16 code; /* cfg_sys_calls[nr]: kind << 8 | call; 0 = none */
	__u16 __pad[3];
};

/* A target thread's run-queue wait (since 0: none). */
struct cp_rq_wait {
	__u64 since;
	__u32 cpu;
	__u32 pid;
};

/* A target thread's slot: one lookup per side of a context switch. */
struct cp_task_slot {
	struct cp_rq_wait rq;
	struct cp_blocked blk;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cp_task_slot);
} task_slots SEC(".maps") __weak;

/* t's slot, made when create; a slot that cannot be made is a drop. */
static __always_inline struct cp_task_slot *task_slot(struct task_struct *t, bool create)
{
	struct cp_task_slot *s;

	s = bpf_task_storage_get(&task_slots, t, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!s && create)
		count_drop();
	return s;
}

/* The syscall the user registers say the task is in, or -1 (x86-64 keeps
 * -ENOSYS in ax until the call returns). */
static __always_inline long regs_syscall(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	if (!regs || (long)regs->ax != -ENOSYS)
		return -1;
	return (long)regs->orig_ax;
#else
	return -1;
#endif
}

static __always_inline __u16 syscall_code(long nr)
{
	if (nr < 0 || nr >= CP_SYS_TABLE)
		return 0;
	return cfg_sys_calls[nr & (CP_SYS_TABLE - 1)];
}

/* sched.bpf.c: note a block at sched_switch, record it at resume. */
int cp_blk_note(struct cp_task_slot *s, __u64 now);
int cp_blk_resume(struct cp_task_slot *s, __u32 pid, __u32 tid, __u64 now);

/* A socket block resumed on this CPU, kept per CPU by tid until its call's
 * transfer takes it (blk_take): a per-CPU load where the task's storage
 * would cost a helper call and its cold lines on every transfer. A thread
 * preempted and moved before its call returns loses its block's start (the
 * call's record then begins at its return), as does one whose slot another
 * thread with the same low bits took on this CPU meanwhile. */
struct cp_blk_stash {
	__u64 ts;
	__u32 tid; /* 0: free */
	__s32 fd;
	__u16 code;
	__u16 __pad[3];
};

#define BLK_STASHES 8

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, BLK_STASHES);
	__type(key, __u32);
	__type(value, struct cp_blk_stash);
} blk_stashes SEC(".maps") __weak;

static __always_inline struct cp_blk_stash *blk_stash(__u32 tid)
{
	__u32 k = tid & (BLK_STASHES - 1);

	return bpf_map_lookup_elem(&blk_stashes, &k);
}

/* When the completing socket call of thread tid blocked, else 0; the block
 * is used up. */
static __always_inline __u64 blk_take(__u32 tid, __u16 code, int fd)
{
	struct cp_blk_stash *e = blk_stash(tid);
	__u64 ts = 0;

	if (!e || e->tid != tid)
		return 0;
	if (e->code == code && e->fd == fd)
		ts = e->ts;
	e->tid = 0;
	return ts;
}

#endif /* CRITPATH_BPF_BLOCKED_H */
