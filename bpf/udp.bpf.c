// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* A datagram's sender, as the cgroup recvmsg hooks see it (udp_senders). */
#include "sock.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

static __always_inline int on_udp_recvmsg(struct bpf_sock_addr *ctx, __u8 ver)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_udp_from f = {};
	struct task_struct *task;
	__u16 code;

	if (cfg_empty_programs || !tgid_is_target(id >> 32))
		return 1; /* 1: the call goes on, its address untouched */
	/* the default capture's record at sock_recv_length takes the sender */
	if (!cfg_lean) {
		/* --all-syscalls: kept in the call's slot for its exit (recvmmsg:
		 * the first message's sender) */
		struct cp_inflight *in = inflight_get();
		struct cp_udp_from *kept;

		task = bpf_get_current_task_btf();
		code = syscall_code(regs_syscall((struct pt_regs *)bpf_task_pt_regs(task)));
		if (code >> 8 != INFLIGHT_SOCK || call_dir(code & 0xff) != SOCK_DIR_READ)
			return 1;
		if (!in || in->kind != INFLIGHT_SOCK)
			return 1;
		kept = bpf_map_lookup_elem(&udp_senders, &id);
		if (kept && kept->ts >= in->ts)
			return 1;
	}
	f.ts = bpf_ktime_get_ns();
	f.ver = ver;
	f.sport = bpf_ntohs((__u16)ctx->user_port);
	if (ver == 4) {
		__u32 a = ctx->user_ip4;

		__builtin_memcpy(f.saddr, &a, 4);
	} else {
		__u32 a[4] = {ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
			      ctx->user_ip6[3]};

		__builtin_memcpy(f.saddr, a, 16);
	}
	bpf_map_update_elem(&udp_senders, &id, &f, BPF_ANY);
	return 1;
}

SEC("cgroup/recvmsg4")
int udp_recvmsg4(struct bpf_sock_addr *ctx)
{
	return on_udp_recvmsg(ctx, 4);
}

SEC("cgroup/recvmsg6")
int udp_recvmsg6(struct bpf_sock_addr *ctx)
{
	return on_udp_recvmsg(ctx, 6);
}
