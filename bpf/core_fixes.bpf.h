/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Where kernels differ in what the programs read, each workaround naming the
 * change it follows. */
#ifndef CRITPATH_BPF_CORE_FIXES_H
#define CRITPATH_BPF_CORE_FIXES_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>

/* 6.13 removed io_kiocb.task for tctx->task: older kernels read it through a flavor. */
struct io_kiocb___task {
	struct task_struct *task;
} __attribute__((preserve_access_index));

static __always_inline __u32 uring_req_tgid(struct io_kiocb *req)
{
	if (bpf_core_field_exists(req->tctx))
		return BPF_CORE_READ(req, tctx, task, tgid);
	return BPF_CORE_READ((struct io_kiocb___task *)req, task, tgid);
}

/* 6.13 unified io_uring's resource tables (io_rsrc_node.file_ptr); before,
 * a fixed file's socket is not found. */
static __always_inline bool uring_nodes_hold_files(void)
{
	return bpf_core_field_exists(struct io_rsrc_node, file_ptr);
}

/* io_async_msghdr embeds its msghdr on newer kernels; elsewhere a provided
 * buffer and an unconnected send's destination are not read. */
static __always_inline bool uring_msghdr_embedded(void)
{
	return bpf_core_field_exists(struct io_async_msghdr, msg);
}

/* A kernel address as a BTF-typed pointer (bpf_rdonly_cast, 6.2+). Only from
 * sock.bpf.c: libbpf's linker before 1.5 fails on a kfunc two objects declare. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
#define kernel_cast(ptr, type)                                                                     \
	((type *)bpf_rdonly_cast((void *)(ptr), bpf_core_type_id_kernel(type)))

/* 4.20 (ab408b6dc744, "tcp: switch tcp and sch_fq to new earliest
 * departure time model") added tcp_wstamp_ns; before, no departure stamp. */
static __always_inline __u64 tcp_departure_ns(const struct tcp_sock *tp)
{
	if (!bpf_core_field_exists(tp->tcp_wstamp_ns))
		return 0;
	return BPF_CORE_READ(tp, tcp_wstamp_ns);
}

#endif /* CRITPATH_BPF_CORE_FIXES_H */
