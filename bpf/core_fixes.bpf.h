/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Where kernels differ in what the programs read: each workaround here
 * names the change it follows. Everything else reads the running kernel's
 * layout through CO-RE.
 */
#ifndef CRITPATH_BPF_CORE_FIXES_H
#define CRITPATH_BPF_CORE_FIXES_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>

/* io_uring requests name their task through their io_uring_task (tctx)
 * since 6.13, where io_kiocb's own task pointer was removed; older kernels
 * have io_kiocb.task: a CO-RE flavor matched to io_kiocb by name. */
struct io_kiocb___task {
	struct task_struct *task;
} __attribute__((preserve_access_index));

static __always_inline __u32 uring_req_tgid(struct io_kiocb *req)
{
	if (bpf_core_field_exists(req->tctx))
		return BPF_CORE_READ(req, tctx, task, tgid);
	return BPF_CORE_READ((struct io_kiocb___task *)req, task, tgid);
}

/* Registered (fixed) files are io_rsrc_node entries holding tagged file
 * pointers since io_uring's resource tables were unified (6.13); with the
 * older layout, a fixed file's socket is not found. */
static __always_inline bool uring_nodes_hold_files(void)
{
	return bpf_core_field_exists(struct io_rsrc_node, file_ptr);
}

/* A send or receive request's io_async_msghdr embeds its struct msghdr in
 * the kernels this reads it from; where it does not, a provided buffer and
 * an unconnected send's destination are not read. */
static __always_inline bool uring_msghdr_embedded(void)
{
	return bpf_core_field_exists(struct io_async_msghdr, msg);
}

/* A kernel address as a read-only BTF-typed pointer (bpf_rdonly_cast,
 * kernel 6.2+) that KREAD(true, ...) loads through. Call it from sock.bpf.c's
 * object only: libbpf's linker before 1.5 fails on a kfunc two objects declare. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
#define kernel_cast(ptr, type)                                                                     \
	((type *)bpf_rdonly_cast((void *)(ptr), bpf_core_type_id_kernel(type)))

#endif /* CRITPATH_BPF_CORE_FIXES_H */
