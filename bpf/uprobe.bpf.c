// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* User-named functions (record --probe): one uprobe/uretprobe pair for all,
 * the probe's id in the BPF cookie. */
#include "common.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

static __always_inline int on_probe(void *ctx, __u8 phase)
{
	struct cp_ev_uprobe *e;

	/* a fork inherits the breakpoints before the recorder decides on it */
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
