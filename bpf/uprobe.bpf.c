// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * User-named functions (record --probe): one uprobe at the entry and one
 * uretprobe at the return of each, attached by the recorder with the
 * probe's id as the BPF cookie (user/record/probe.c), so one pair of
 * programs serves every probe and the record needs no lookup to say which
 * function it was. The analysis nests the calls into frames of the path
 * (DESIGN.md section 5, subcomponents).
 */
#include "common.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

static __always_inline int on_probe(void *ctx, __u8 phase)
{
	struct cp_ev_uprobe *e;

	/* attached per target process, but a target's fork inherits the
	 * breakpoints before the recorder knows whether to follow it */
	if (!current_is_target())
		return 0;
	e = ev_reserve(CP_EV_UPROBE, sizeof(*e), bpf_ktime_get_ns());
	if (!e)
		return 0;
	e->probe_id = (__u32)bpf_get_attach_cookie(ctx);
	e->phase = phase;
	e->__pad[0] = e->__pad[1] = e->__pad[2] = 0;
	ev_submit(e);
	return 0;
}

SEC("uprobe")
int probe_enter(struct pt_regs *ctx)
{
	EMPTY_GUARD();
	return on_probe(ctx, CP_PHASE_ENTER);
}

SEC("uretprobe")
int probe_return(struct pt_regs *ctx)
{
	EMPTY_GUARD();
	return on_probe(ctx, CP_PHASE_EXIT);
}
