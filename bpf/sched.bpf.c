// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Scheduler hooks: switches, wakeups, fork/exec/exit, run-queue culprits.
 * Each has a tp_btf program and a raw_tp twin (loaded when tp_btf does not);
 * the constant `btf` picks direct loads or BPF_CORE_READ (KREAD). */
#include "blocked.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define TASK_DEAD_BIT 0x80

/* The wakeup's context, tracked per CPU from the irq, hrtimer and softirq
 * tracepoints: preempt_count has no kallsyms address to read it by. */
struct irq_ctx {
	__u32 hardirq; /* nesting depth of irq handlers */
	__u32 hrtimer; /* nesting depth of hrtimer callbacks */
	__u32 softirq; /* serving a softirq */
	__u32 vec;     /* its vector */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_ctx);
} irq_ctxs SEC(".maps");

static __always_inline struct irq_ctx *irq_ctx_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&irq_ctxs, &zero);
}

/* Run-queue culprits: each CPU keeps a ring of its last RQ_SLICES slices; a
 * target's wait is summed over them per task at its switch-in, into at most
 * RQ_TOP records and one "[other]". No record per foreign switch. */
#define RQ_SLICES 16
#define RQ_TOP 4

struct cp_rq_slice {
	__u32 pid;
	__u32 tid;
	__u64 start;
	__u64 end;
	char comm[CP_COMM_LEN];
};

struct cp_cpu_rq {
	__u64 last_ts; /* when the task now running got this CPU */
	__u32 head;
	__u32 last_tid; /* that task, as the switch said (see on_switch) */
	__u32 last_pid;
	__u32 __pad;
	struct cp_rq_slice s[RQ_SLICES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cp_cpu_rq);
} cpu_rqs SEC(".maps");

/* Waits of the raw_tp twins, by tid (tp_btf keeps them in the task's slot). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct cp_rq_wait);
} rq_waits SEC(".maps");

/* The wait begins in a slot; one already begun is kept. */
static __always_inline void rq_slot_begin(struct cp_task_slot *s, __u32 pid, __u32 cpu, __u64 now)
{
	if (!s->rq.since) {
		s->rq.since = now;
		s->rq.cpu = cpu;
		s->rq.pid = pid;
	}
}

/* Takes a slot's wait, if it has one, and clears it. */
static __always_inline bool rq_slot_take(struct cp_task_slot *s, struct cp_rq_wait *out)
{
	if (!s || !s->rq.since)
		return false;
	*out = s->rq;
	s->rq.since = 0;
	return true;
}

/* t became runnable without running. */
static __always_inline void rq_wait_begin(bool btf, struct task_struct *t, __u32 pid, __u32 tid,
					  __u32 cpu, __u64 now)
{
	struct cp_rq_wait w = {.since = now, .cpu = cpu, .pid = pid};
	struct cp_task_slot *s;

	if (!btf) {
		bpf_map_update_elem(&rq_waits, &tid, &w, BPF_NOEXIST);
		return;
	}
	s = task_slot(t, true);
	if (s)
		rq_slot_begin(s, pid, cpu, now);
}

/* Takes t's wait, if it has one, and clears it. */
static __always_inline bool rq_wait_take(bool btf, struct task_struct *t, __u32 tid,
					 struct cp_rq_wait *out)
{
	struct cp_rq_wait *w;

	if (btf)
		return rq_slot_take(task_slot(t, false), out);
	w = bpf_map_lookup_elem(&rq_waits, &tid);
	if (!w)
		return false;
	*out = *w;
	bpf_map_delete_elem(&rq_waits, &tid);
	return true;
}

/* The current task (sched_switch's prev), slot s, blocks. Global: verified
 * once, not on every path of the switch hook; the NULL check is the verifier's. */
__noinline int cp_blk_note(struct cp_task_slot *s, __u64 now)
{
	struct pt_regs *regs;
	struct cp_blocked *b;
	__u64 a0, a1, a2, a3;
	__u16 code;

	if (!s)
		return 0;
	b = &s->blk;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	code = syscall_code(regs_syscall(regs));
	if (!code) {
		b->code = 0; /* blocked in a call not traced: no stale socket block */
		return 0;
	}
	a0 = PT_REGS_PARM1_SYSCALL(regs);
	a1 = PT_REGS_PARM2_SYSCALL(regs);
	a2 = PT_REGS_PARM3_SYSCALL(regs);
	a3 = PT_REGS_PARM4_SYSCALL(regs);
	if (b->code == code && b->arg0 == a0 && b->ts)
		return 0; /* blocked again in the same call: it began at the first */
	if (code >> 8 == INFLIGHT_SOCK) {
		/* a socket call resumed here and blocking again keeps its start */
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct cp_blk_stash *e = blk_stash(tid);

		if (e && e->tid == tid && e->code == code && e->fd == (int)a0) {
			now = e->ts;
			e->tid = 0;
		}
	}
	b->ts = now;
	b->code = code;
	b->arg0 = a0;
	b->arg1 = a1;
	b->arg2 = a2;
	if (code >> 8 == INFLIGHT_FUTEX) {
		/* the arguments as cp_futex_enter (futex.bpf.c) records them */
		switch (code & 0xff) {
		case CP_FUTEX_CALL_WAIT: /* futex_wait(uaddr, val, mask, flags, …) */
			b->arg1 = a3;
			b->arg2 = a1;
			break;
		case CP_FUTEX_CALL_WAITV: { /* futex_waitv(waiters, nr, flags, …) */
			struct futex_waitv w = {};

			bpf_probe_read_user(&w, sizeof(w), (void *)a0);
			b->arg0 = w.uaddr;
			b->arg1 = a2;
			b->arg2 = w.val;
			break;
		}
		}
	}
	return 0;
}

/* next runs again at now: its futex or poll block as a record. */
__noinline int cp_blk_resume(struct cp_task_slot *s, __u32 pid, __u32 tid, __u64 now)
{
	struct cp_stage *stg;
	struct cp_blocked *b;
	__u8 kind;

	if (!s || !s->blk.code)
		return 0;
	b = &s->blk;
	kind = b->code >> 8;
	if (kind == INFLIGHT_FUTEX) {
		struct cp_ev_futex *e = stage_reserve(&stg, sizeof(*e));

		if (!e)
			goto lost;
		hdr_fill(&e->h, CP_EV_FUTEX, sizeof(*e), now);
		e->h.pid = pid;
		e->h.tid = tid;
		e->enter_ts = b->ts;
		e->uaddr = b->arg0;
		e->ret = 0;
		e->op = b->arg1;
		e->val = b->arg2;
		e->phase = CP_PHASE_BLOCKED;
		e->call = b->code & 0xff;
		__builtin_memset(e->__pad, 0, sizeof(e->__pad));
		stage_commit(stg, &e->h, sizeof(*e));
	} else if (kind == INFLIGHT_POLL) {
		struct cp_ev_poll *e = stage_reserve(&stg, sizeof(*e));

		if (!e)
			goto lost;
		hdr_fill(&e->h, CP_EV_POLL, sizeof(*e), now);
		e->h.pid = pid;
		e->h.tid = tid;
		e->enter_ts = b->ts;
		e->ret = 0;
		e->phase = CP_PHASE_BLOCKED;
		e->call = b->code & 0xff;
		__builtin_memset(e->__pad, 0, sizeof(e->__pad));
		stage_commit(stg, &e->h, sizeof(*e));
	} else if (kind == INFLIGHT_SOCK) {
		/* its transfer's record takes it, on this CPU (blk_take) */
		struct cp_blk_stash *e = blk_stash(tid);

		if (e) {
			e->ts = b->ts;
			e->code = b->code;
			e->fd = (int)b->arg0;
			e->tid = tid;
		}
	} else {
		return 0;
	}
	b->code = 0;
	return 0;
lost:
	b->code = 0; /* stage_reserve counted it */
	return 0;
}

struct cp_culprit {
	__u32 pid;
	__u32 tid;
	__u64 ns;
	__u32 slice;
	__u32 used;
};

/* A switch with its wait's culprits, built in the stage: the records, then
 * the working set (staged past them but never sent). */
struct cp_switch_batch {
	struct cp_ev_sched_switch sw;
	struct cp_ev_runq_culprit c[RQ_TOP + 1];
	/* cp_rq_culprits' working set: on the stack the verifier would follow
	 * every combination of its flags, near its instruction limit */
	struct cp_culprit top[RQ_TOP];
};
_Static_assert(sizeof(struct cp_switch_batch) <= STAGE_REC_MAX, "a switch batch is staged");

static __always_inline void culprit_fill(struct cp_ev_runq_culprit *e, struct cp_rq_wait *wait,
					 __u32 tid, __u64 now, __u32 cpid, __u32 ctid, __u64 ns)
{
	e->h.type = CP_EV_RUNQ_CULPRIT;
	e->h.size = sizeof(*e);
	e->h.cpu = wait->cpu;
	e->h.pid = wait->pid;
	e->h.tid = tid;
	e->h.ts = now;
	e->culprit_pid = cpid;
	e->culprit_tid = ctid;
	e->ns = ns;
	e->runnable_since = wait->since;
}

/* Who held the CPU while tid waited, into b->c; returns the record count.
 * Global: verified once, not per call site. */
__noinline int cp_rq_culprits(struct cp_switch_batch *b, struct cp_rq_wait *wait, __u32 tid,
			      __u64 now)
{
	struct cp_culprit *top;
	struct cp_cpu_rq *rq;
	__u64 covered = 0, other = 0, total;
	__u32 zero = 0, n = 0;

	if (!b || !wait) /* never, but the verifier takes a global's pointers as nullable */
		return 0;
	top = b->top;
	total = now - wait->since;
	__builtin_memset(b->top, 0, sizeof(b->top));
	rq = bpf_map_lookup_percpu_elem(&cpu_rqs, &zero, wait->cpu);
	if (!rq) {
		culprit_fill(&b->c[0], wait, tid, now, 0, 0, total);
		__builtin_memset(b->c[0].culprit_comm, 0, CP_COMM_LEN);
		__builtin_memcpy(b->c[0].culprit_comm, "[other]", 8);
		n = 1;
		goto pad;
	}
	for (int i = 0; i < RQ_SLICES; i++) {
		struct cp_rq_slice *s = &rq->s[(rq->head - 1 - i) & (RQ_SLICES - 1)];
		__u64 a = s->start > wait->since ? s->start : wait->since;
		__u64 e = s->end < now ? s->end : now;
		__u64 o;
		int k, min_k = 0;

		if (s->end <= wait->since)
			break; /* older than the wait: the rest are older still */
		if (e <= a || s->tid == tid)
			continue;
		o = e - a;
		covered += o;
		for (k = 0; k < RQ_TOP; k++) {
			if (top[k].used && top[k].tid == s->tid && top[k].pid == s->pid) {
				top[k].ns += o;
				break;
			}
		}
		if (k < RQ_TOP)
			continue;
		for (k = 0; k < RQ_TOP; k++) {
			if (!top[k].used)
				break;
			if (top[k].ns < top[min_k].ns)
				min_k = k;
		}
		if (k < RQ_TOP) {
			top[k].used = 1;
			top[k].pid = s->pid;
			top[k].tid = s->tid;
			top[k].ns = o;
			top[k].slice = (rq->head - 1 - i) & (RQ_SLICES - 1);
		} else if (top[min_k & (RQ_TOP - 1)].ns < o) {
			min_k &= RQ_TOP - 1;
			other += top[min_k].ns;
			top[min_k].pid = s->pid;
			top[min_k].tid = s->tid;
			top[min_k].ns = o;
			top[min_k].slice = (rq->head - 1 - i) & (RQ_SLICES - 1);
		} else {
			other += o;
		}
	}
	if (total > covered)
		other += total - covered; /* slices older than the ring */

	/* n < RQ_TOP here: the top ones, then [other] in the last slot at most */
	for (int k = 0; k < RQ_TOP; k++) {
		struct cp_ev_runq_culprit *e;

		if (!top[k].used || !top[k].ns || n >= RQ_TOP)
			continue;
		e = &b->c[n++];
		culprit_fill(e, wait, tid, now, top[k].pid, top[k].tid, top[k].ns);
		__builtin_memcpy(e->culprit_comm, rq->s[top[k].slice & (RQ_SLICES - 1)].comm,
				 CP_COMM_LEN);
	}
	if (other && n <= RQ_TOP) {
		struct cp_ev_runq_culprit *e = &b->c[n++];

		culprit_fill(e, wait, tid, now, 0, 0, other);
		__builtin_memset(e->culprit_comm, 0, CP_COMM_LEN);
		__builtin_memcpy(e->culprit_comm, "[other]", 8);
	}
pad:
	return n;
}

static __always_inline void switch_fill(bool btf, struct cp_ev_sched_switch *e, __u64 now,
					__u32 prev_pid, __u32 prev_tid, __u32 next_pid,
					__u32 next_tid, __u8 state, unsigned int prev_state,
					struct task_struct *next)
{
	e->h.type = CP_EV_SCHED_SWITCH;
	e->h.size = sizeof(*e);
	e->h.cpu = bpf_get_smp_processor_id();
	e->h.pid = prev_pid;
	e->h.tid = prev_tid;
	e->h.ts = now;
	e->prev_pid = prev_pid;
	e->prev_tid = prev_tid;
	e->next_pid = next_pid;
	e->next_tid = next_tid;
	e->prev_state = state;
	e->flags = 0;
	e->__pad[0] = e->__pad[1] = 0;
	e->prev_state_raw = prev_state;
	comm_copy(btf, e->next_comm, next);
}

/* The switch record, with next's run-queue culprits when wait is not NULL. */
static __always_inline void switch_emit(bool btf, __u64 now, __u32 prev_pid, __u32 prev_tid,
					__u32 next_pid, __u32 next_tid, __u8 state,
					unsigned int prev_state, struct task_struct *comm_of,
					struct cp_rq_wait *wait, __u8 flags)
{
	if (wait && now > wait->since) {
		struct cp_stage *stg;
		/* staged at its full size, committed at the size it takes */
		struct cp_switch_batch *b = stage_reserve(&stg, sizeof(*b));
		__u64 n;

		if (!b)
			return;
		/* culprits from the CPU it waited on last: this one */
		wait->cpu = bpf_get_smp_processor_id();
		switch_fill(btf, &b->sw, now, prev_pid, prev_tid, next_pid, next_tid, state,
			    prev_state, comm_of);
		b->sw.flags = flags;
		/* a global's result is any int to the verifier: bound it */
		n = (__u32)cp_rq_culprits(b, wait, next_tid, now);
		if (n > RQ_TOP + 1)
			n = RQ_TOP + 1;
		if (!flags && n == 1 && b->c[0].culprit_tid == prev_tid &&
		    b->c[0].culprit_pid == prev_pid && b->c[0].ns == now - wait->since &&
		    tgid_is_target(prev_pid)) {
			/* the switch says it all (CP_SW_PREV_CULPRIT) */
			b->sw.flags = CP_SW_PREV_CULPRIT;
			n = 0;
		}
		stage_commit_n(stg, sizeof(b->sw) + n * sizeof(struct cp_ev_runq_culprit), 1 + n);
	} else {
		struct cp_stage *stg;
		struct cp_ev_sched_switch *e = stage_reserve(&stg, sizeof(*e));

		if (!e)
			return;
		switch_fill(btf, e, now, prev_pid, prev_tid, next_pid, next_tid, state, prev_state,
			    comm_of);
		e->flags = flags;
		stage_commit(stg, &e->h, sizeof(*e));
	}
}

static __always_inline int on_switch(bool btf, bool preempt, struct task_struct *prev,
				     struct task_struct *next, unsigned int prev_state)
{
	__u32 prev_pid = KREAD(btf, prev, tgid), prev_tid = KREAD(btf, prev, pid);
	__u32 next_pid = KREAD(btf, next, tgid), next_tid = KREAD(btf, next, pid);
	__u64 now = bpf_ktime_get_ns();
	struct cp_task_slot *ps = NULL, *ns = NULL;
	struct cp_rq_wait wait;
	__u32 hid_pid = 0, hid_tid = 0;
	struct cp_cpu_rq *rq;
	bool unseen = false;
	__u64 last_ts = 0;
	bool waited;
	__u32 zero = 0;
	bool pt, nt;
	__u8 state;

	/* every switch logs its slice: cheaper than a shared "someone waits" */
	rq = bpf_map_lookup_elem(&cpu_rqs, &zero);
	if (rq) {
		struct cp_rq_slice *s = &rq->s[rq->head & (RQ_SLICES - 1)];

		/* prev is not who the last switch here ran: a switch went
		 * unreported (some kernels skip switches out of pid 1's threads) */
		last_ts = rq->last_ts;
		hid_pid = rq->last_pid;
		hid_tid = rq->last_tid;
		unseen = last_ts && hid_tid != prev_tid;
		rq->last_pid = next_pid;
		rq->last_tid = next_tid;
		s->pid = prev_pid;
		s->tid = prev_tid;
		s->start = rq->last_ts;
		s->end = now;
		comm_copy(btf, s->comm, prev);
		rq->head++;
		rq->last_ts = now;
	}

	pt = tgid_is_target(prev_pid);
	nt = tgid_is_target(next_pid);
	if (!pt && !nt)
		return 0;

	if (preempt || prev_state == 0)
		state = CP_PREV_PREEMPTED;
	else if (prev_state & TASK_DEAD_BIT)
		state = CP_PREV_DEAD;
	else
		state = CP_PREV_BLOCKED;

	/* each side's slot looked up once (tp_btf) */
	if (btf && nt)
		ns = task_slot(next, false);
	if (btf && pt)
		ps = task_slot(prev, true);
	if (btf)
		waited = rq_slot_take(ns, &wait);
	else
		waited = nt && rq_wait_take(false, next, next_tid, &wait);

	if (unseen && pt) {
		/* prev's switch-in at the earliest: the last switch here, or
		 * its wakeup if later */
		struct cp_rq_wait pw;
		bool pwaited =
		    btf ? rq_slot_take(ps, &pw) : rq_wait_take(false, prev, prev_tid, &pw);
		__u64 at = pwaited && pw.since > last_ts ? pw.since : last_ts;

		if (at > now)
			at = now;
		switch_emit(btf, at, hid_pid, hid_tid, prev_pid, prev_tid, CP_PREV_PREEMPTED, 0,
			    prev, pwaited ? &pw : NULL, CP_SW_INFERRED);
		if (btf && cfg_lean && ps)
			cp_blk_resume(ps, prev_pid, prev_tid, at);
	}
	switch_emit(btf, now, prev_pid, prev_tid, next_pid, next_tid, state, prev_state, next,
		    waited ? &wait : NULL, 0);

	/* after the switch record: a block it ends is read in that order */
	if (btf && cfg_lean) {
		if (ps && state == CP_PREV_BLOCKED)
			cp_blk_note(ps, now);
		if (ns)
			cp_blk_resume(ns, next_pid, next_tid, now);
	}

	if (pt && btf) {
		if (ps && state == CP_PREV_PREEMPTED)
			rq_slot_begin(ps, prev_pid, bpf_get_smp_processor_id(), now);
		else if (ps)
			ps->rq.since = 0; /* blocked: no wait */
	} else if (pt) {
		if (state == CP_PREV_PREEMPTED)
			rq_wait_begin(false, prev, prev_pid, prev_tid, bpf_get_smp_processor_id(),
				      now);
		else
			rq_wait_take(false, prev, prev_tid, &wait); /* blocked: no wait */
	}
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	EMPTY_GUARD();
	return on_switch(true, preempt, prev, next, prev_state);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	EMPTY_GUARD();
	return on_switch(false, preempt, prev, next, prev_state);
}

/* A target is woken: the record, and its run-queue wait begins unless it is
 * still on its CPU. One hook: sched_wakeup would cost a program per wakeup. */
static __always_inline int on_waking(bool btf, struct task_struct *p)
{
	__u32 pid = KREAD(btf, p, tgid), tid;
	struct cp_ev_sched_waking *e;
	struct cp_stage *stg;
	struct irq_ctx *ic;
	__u64 now;

	if (!tgid_is_target(pid))
		return 0;
	now = bpf_ktime_get_ns();
	tid = KREAD(btf, p, pid);
	if (!KREAD(btf, p, on_cpu))
		rq_wait_begin(btf, p, pid, tid, KREAD(btf, p, thread_info.cpu), now);
	e = ev_stage(&stg, CP_EV_SCHED_WAKING, sizeof(*e), now);
	if (!e)
		return 0;
	e->wakee_pid = pid;
	e->wakee_tid = tid;
	e->waker_pid = 0;
	e->waker_tid = 0;
	e->softirq_vec = CP_SOFTIRQ_NONE;
	e->target_cpu = KREAD(btf, p, thread_info.cpu);
	e->__pad = 0;
	ic = irq_ctx_get();
	/* An hrtimer callback inside a softirq is soft only in the HRTIMER
	 * softirq: any other softirq was interrupted by a hard timer. */
	if (ic &&
	    (ic->hardirq || (ic->hrtimer && !(ic->softirq && ic->vec == CP_SOFTIRQ_HRTIMER)))) {
		e->waker_ctx = CP_CTX_HARDIRQ;
	} else if (ic && ic->softirq) {
		e->waker_ctx = CP_CTX_SOFTIRQ;
		e->softirq_vec = ic->vec;
	} else {
		e->waker_ctx = CP_CTX_TASK;
		e->waker_pid = e->h.pid;
		e->waker_tid = e->h.tid;
	}
	stage_commit(stg, &e->h, sizeof(*e));
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking_btf, struct task_struct *p)
{
	EMPTY_GUARD();
	return on_waking(true, p);
}

SEC("raw_tp/sched_waking")
int BPF_PROG(sched_waking_raw, struct task_struct *p)
{
	EMPTY_GUARD();
	return on_waking(false, p);
}

static __always_inline int on_wakeup_new(bool btf, struct task_struct *p)
{
	__u32 pid = KREAD(btf, p, tgid), tid = KREAD(btf, p, pid);
	struct cp_ev_wakeup_new *e;
	__u64 now = bpf_ktime_get_ns();

	if (!tgid_is_target(pid))
		return 0;
	e = ev_reserve(CP_EV_WAKEUP_NEW, sizeof(*e), now);
	if (e) {
		e->pid = pid;
		e->tid = tid;
		e->target_cpu = task_cpu_of(p);
		__builtin_memset(e->__pad, 0, sizeof(e->__pad));
		ev_submit(e);
	}
	rq_wait_begin(btf, p, pid, tid, task_cpu_of(p), now);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new_btf, struct task_struct *p)
{
	EMPTY_GUARD();
	return on_wakeup_new(true, p);
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new_raw, struct task_struct *p)
{
	EMPTY_GUARD();
	return on_wakeup_new(false, p);
}

static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ppid = BPF_CORE_READ(parent, tgid), cpid = BPF_CORE_READ(child, tgid);
	struct cp_ev_process_fork *e;

	if (!tgid_is_target(ppid))
		return 0;
	if (cpid != ppid)
		target_add(cpid); /* follow the child */
	e = ev_reserve(CP_EV_PROCESS_FORK, sizeof(*e), bpf_ktime_get_ns());
	if (!e)
		return 0;
	e->parent_pid = ppid;
	e->parent_tid = BPF_CORE_READ(parent, pid);
	e->child_pid = cpid;
	e->child_tid = BPF_CORE_READ(child, pid);
	bpf_core_read(e->child_comm, CP_COMM_LEN, &child->comm);
	if (cpid != ppid && pid_bit(fork_wake_bits, ppid))
		ev_submit_now(e);
	else
		ev_submit(e);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork_btf, struct task_struct *parent, struct task_struct *child)
{
	EMPTY_GUARD();
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(sched_process_fork_raw, struct task_struct *parent, struct task_struct *child)
{
	EMPTY_GUARD();
	return on_fork(parent, child);
}

/* The exec's new comm is an agent --comm name */
static __always_inline bool comm_watched(struct task_struct *p)
{
	__u64 c[2] = {};

	bpf_core_read(c, sizeof(c), &p->comm);
	for (__u32 i = 0; i < CP_WATCH_COMMS && i < cfg_nwatch_comm; i++)
		if (c[0] == cfg_watch_comm[i][0] && c[1] == cfg_watch_comm[i][1])
			return true;
	return false;
}

static __always_inline int on_exec(struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct cp_ev_process_exec *e;
	__u32 tgid = BPF_CORE_READ(p, tgid);
	const char *fn;
	__u16 flag = 0;
	long n;

	if (!tgid_is_target(tgid)) {
		if (!cfg_watch_execs)
			return 0;
		flag = CP_EXEC_CANDIDATE;
		if (comm_watched(p)) { /* no request missed while user space looks */
			target_add(tgid);
			flag = CP_EXEC_WATCHED;
		}
	}
	/* reserved at full size; the file keeps hdr.size */
	e = ev_reserve(CP_EV_PROCESS_EXEC, sizeof(*e), bpf_ktime_get_ns());
	if (!e)
		return 0;
	e->old_tid = old_pid;
	e->__pad = flag;
	fn = BPF_CORE_READ(bprm, filename);
	/* zeroed first: no stale ring bytes in the padding */
	__builtin_memset(e->filename, 0, CP_FILENAME_MAX);
	n = bpf_probe_read_kernel_str(e->filename, CP_FILENAME_MAX, fn);
	if (n < 1) {
		e->filename[0] = 0;
		n = 1;
	}
	if (n > CP_FILENAME_MAX)
		n = CP_FILENAME_MAX;
	e->filename_len = n - 1;
	e->h.size = CP_ALIGN(offsetof(struct cp_ev_process_exec, filename) + n);
	ev_submit(e);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec_btf, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	EMPTY_GUARD();
	return on_exec(p, old_pid, bprm);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(sched_process_exec_raw, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	EMPTY_GUARD();
	return on_exec(p, old_pid, bprm);
}

static __always_inline int on_exit(bool btf, struct task_struct *p, bool group_dead)
{
	__u32 pid = KREAD(btf, p, tgid);
	struct cp_ev_process_exit *e;
	struct cp_rq_wait w;

	if (!tgid_is_target(pid))
		return 0;
	rq_wait_take(btf, p, KREAD(btf, p, pid), &w); /* a tid's hash entry outlives it */
	e = ev_reserve(CP_EV_PROCESS_EXIT, sizeof(*e), bpf_ktime_get_ns());
	if (!e)
		return 0;
	e->exit_code = BPF_CORE_READ(p, exit_code);
	e->group_dead = group_dead;
	e->__pad[0] = e->__pad[1] = e->__pad[2] = 0;
	ev_submit(e);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit_btf, struct task_struct *p, bool group_dead)
{
	EMPTY_GUARD();
	return on_exit(true, p, group_dead);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(sched_process_exit_raw, struct task_struct *p, bool group_dead)
{
	EMPTY_GUARD();
	return on_exit(false, p, group_dead);
}

/* Per-CPU context tracking: one tp_btf and one raw_tp program per edge. */
#define IRQ_EDGE(tp, proto, stmt)                                                                  \
	SEC("tp_btf/" #tp)                                                                         \
	int BPF_PROG(tp##_btf, proto)                                                              \
	{                                                                                          \
		struct irq_ctx *ic;                                                                \
                                                                                                   \
		EMPTY_GUARD();                                                                     \
		ic = irq_ctx_get();                                                                \
		if (ic)                                                                            \
			stmt;                                                                      \
		return 0;                                                                          \
	}                                                                                          \
	SEC("raw_tp/" #tp)                                                                         \
	int BPF_PROG(tp##_raw, proto)                                                              \
	{                                                                                          \
		struct irq_ctx *ic;                                                                \
                                                                                                   \
		EMPTY_GUARD();                                                                     \
		ic = irq_ctx_get();                                                                \
		if (ic)                                                                            \
			stmt;                                                                      \
		return 0;                                                                          \
	}

#define DEPTH_DOWN(f) ((f) = (f) ? (f)-1 : 0)

/* An interrupt may land between the two stores: the vector is valid
 * whenever softirq is set. */
IRQ_EDGE(softirq_entry, unsigned int vec, {
	ic->vec = vec;
	barrier();
	ic->softirq = 1;
})
IRQ_EDGE(softirq_exit, unsigned int vec, {
	ic->softirq = 0;
	barrier();
	ic->vec = CP_SOFTIRQ_NONE;
})
IRQ_EDGE(irq_handler_entry, int irq, ic->hardirq++)
IRQ_EDGE(irq_handler_exit, int irq, DEPTH_DOWN(ic->hardirq))
IRQ_EDGE(hrtimer_expire_entry, struct hrtimer *t, ic->hrtimer++)
IRQ_EDGE(hrtimer_expire_exit, struct hrtimer *t, DEPTH_DOWN(ic->hrtimer))
