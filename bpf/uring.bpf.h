/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
#ifndef CRITPATH_BPF_URING_H
#define CRITPATH_BPF_URING_H

#include "sock.bpf.h"

/* io_uring moves data where no syscall registers say the fd or buffer:
 * uring_note keeps them per socket and direction at submission and poll
 * wakeup for the transfer that follows (uring_take). */
struct cp_uring_op {
	__u64 buf[2]; /* by direction: [SOCK_DIR_READ - 1], [SOCK_DIR_WRITE - 1] */
	__u64 req[2]; /* io_kiocb * of a provided-buffer recv or a send, else 0 */
	__s32 fd[2];
	__u8 call[2];  /* enum cp_sock_call; 0 (accept, never one): none pending */
	__u8 multi[2]; /* a multishot recv: pending until replaced */
	__u8 end_call; /* CP_SOCK_CLOSE or SHUTDOWN pending (on_set_state), else 0 */
	__u8 __pad[3];
	__s32 end_fd;
	__u32 __pad2;
	__u64 end_ts; /* when it was submitted */
};

/* A close's state change follows at once; older, it changed nothing. */
#define URING_END_NS 1000000000ull

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct sock * */
	__type(value, struct cp_uring_op);
} uring_ops SEC(".maps") __weak;


/* The socket behind a fixed file, or NULL on older table layouts. */
static __always_inline struct sock *fixed_sock(struct io_kiocb *req, int idx)
{
	struct io_ring_ctx *ctx = BPF_CORE_READ(req, ctx);
	struct io_rsrc_node **nodes, *node = NULL;
	unsigned long fp;

	if (!uring_nodes_hold_files() ||
	    (unsigned int)idx >= BPF_CORE_READ(ctx, file_table.data.nr))
		return NULL;
	nodes = BPF_CORE_READ(ctx, file_table.data.nodes);
	if (bpf_probe_read_kernel(&node, sizeof(node), &nodes[idx & 0xffff]) || !node)
		return NULL;
	fp = BPF_CORE_READ(node, file_ptr);
	if (!(fp & ~3ul)) /* FFS_NOWAIT, FFS_ISREG in the low bits */
		return NULL;
	return file_sock((struct file *)(fp & ~3ul));
}

/* sk's entry, made empty when it has none; NULL when the map is full. */
static __always_inline struct cp_uring_op *uring_op_of(struct sock *sk)
{
	struct cp_uring_op fresh = {.fd = {-1, -1}}, *op;
	__u64 key = (__u64)sk;

	op = bpf_map_lookup_elem(&uring_ops, &key);
	if (op)
		return op;
	bpf_map_update_elem(&uring_ops, &key, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&uring_ops, &key);
}

/* An io_uring close or shutdown of fd, for its state change (on_set_state). */
static __always_inline int uring_end(int fd, __u8 call)
{
	struct sock *sk = fd_sock(fd);
	struct cp_uring_op *op = sk ? uring_op_of(sk) : NULL;

	if (!op)
		return 0;
	op->end_call = call;
	op->end_fd = fd;
	op->end_ts = bpf_ktime_get_ns();
	return 0;
}

/* Keeps a request's coming transfer for its socket, at submission or a poll
 * wakeup's retry (whose fd is overwritten: the socket's last is kept). */
static __always_inline int uring_note(struct io_kiocb *req, bool submit)
{
	__u64 buf = 0, reqp = 0;
	void *data = (void *)req + bpf_core_field_offset(struct io_kiocb, cmd);
	__u8 multi = 0;
	struct cp_uring_op *op;
	struct sock *sk;
	__u64 flags;
	__u8 call;
	int fd, i;

	if (!tgid_is_target(submit ? bpf_get_current_pid_tgid() >> 32 : uring_req_tgid(req)))
		return 0;
	switch (BPF_CORE_READ(req, opcode)) {
	case IORING_OP_CLOSE:
		if (!submit)
			return 0;
		/* a descriptor's, not a fixed file's (file_slot) */
		if (BPF_CORE_READ((struct io_close *)data, file_slot))
			return 0;
		return uring_end(BPF_CORE_READ((struct io_close *)data, fd), CP_SOCK_CLOSE);
	case IORING_OP_SHUTDOWN:
		if (!submit || BPF_CORE_READ(req, flags) & REQ_F_FIXED_FILE)
			return 0;
		return uring_end(BPF_CORE_READ(req, cqe.fd), CP_SOCK_SHUTDOWN);
	case IORING_OP_RECV:
		call = CP_SOCK_RECVFROM;
		break;
	case IORING_OP_SEND:
	case IORING_OP_SEND_ZC:
		call = CP_SOCK_SENDTO;
		break;
	case IORING_OP_RECVMSG:
		call = CP_SOCK_RECVMSG;
		break;
	case IORING_OP_SENDMSG:
	case IORING_OP_SENDMSG_ZC:
		call = CP_SOCK_SENDMSG;
		break;
	case IORING_OP_READ:
		call = CP_SOCK_READ;
		break;
	case IORING_OP_WRITE:
		call = CP_SOCK_WRITE;
		break;
	case IORING_OP_READV:
		call = CP_SOCK_READV;
		break;
	case IORING_OP_WRITEV:
		call = CP_SOCK_WRITEV;
		break;
	default:
		return 0;
	}
	/* the low flag bits are the SQE's (IOSQE_FIXED_FILE_BIT, ...) */
	flags = BPF_CORE_READ(req, flags);
	if (flags & REQ_F_BUFFER_SELECT) {
		if (call != CP_SOCK_RECVFROM && call != CP_SOCK_RECVMSG)
			return 0;
		reqp = (__u64)req;
		/* the SQE's ioprio: IORING_RECV_MULTISHOT */
		multi = !!(BPF_CORE_READ((struct io_sr_msg *)data, flags) & 2);
	}
	fd = -1;
	if (!submit) {
		sk = file_sock(BPF_CORE_READ(req, file));
	} else if (flags & REQ_F_FIXED_FILE) {
		/* the SQE's fd, an index into the ring's table: no descriptor */
		sk = fixed_sock(req, BPF_CORE_READ(req, cqe.fd));
	} else {
		fd = BPF_CORE_READ(req, cqe.fd); /* the SQE's until completion */
		sk = fd_sock(fd);
	}
	op = sk ? uring_op_of(sk) : NULL;
	if (!op)
		return 0;
	if (!reqp && (call == CP_SOCK_READ || call == CP_SOCK_WRITE || call == CP_SOCK_READV ||
		      call == CP_SOCK_WRITEV))
		buf = BPF_CORE_READ((struct io_rw *)data, addr);
	else if (!reqp)
		buf = (__u64)BPF_CORE_READ((struct io_sr_msg *)data, buf);
	if (call == CP_SOCK_SENDTO || call == CP_SOCK_SENDMSG)
		reqp = (__u64)req; /* its destination: its message header's msg_name */
	i = (call_dir(call) - 1) & 1;
	op->buf[i] = buf;
	op->req[i] = reqp;
	if (submit)
		op->fd[i] = fd;
	else if (op->fd[i] < 0) /* the socket's last, either way; -1 in a fresh entry */
		op->fd[i] = op->fd[i ^ 1];
	op->call[i] = call;
	op->multi[i] = multi;
	return 0;
}

/* The provided buffer of sk's recv request, or 0 when req is no longer sk's. */
static __always_inline __u64 uring_selected(struct io_kiocb *req, struct sock *sk)
{
	struct io_async_msghdr *m;

	if (!uring_msghdr_embedded() ||
	    file_sock(BPF_CORE_READ(req, file)) != sk)
		return 0;
	m = BPF_CORE_READ(req, async_data);
	if (!m || BPF_CORE_READ(m, msg.msg_iter.iter_type) !=
		      bpf_core_enum_value(enum iter_type, ITER_UBUF))
		return 0;
	return (__u64)BPF_CORE_READ(m, msg.msg_iter.ubuf);
}

/* The pending request this transfer is: call, fd and buffer into in;
 * returns a send's request (uring_dest), else 0. */
static __always_inline __u64 uring_take(struct sock *sk, int dir, struct cp_inflight *in)
{
	__u64 key = (__u64)sk, req;
	struct cp_uring_op *op = bpf_map_lookup_elem(&uring_ops, &key);
	int i = (dir - 1) & 1;

	if (!op || !op->call[i])
		return 0;
	req = op->req[i];
	in->call = op->call[i];
	in->fd = op->fd[i];
	in->uring = URING_REQ;
	if (req && dir == SOCK_DIR_READ) {
		/* a multishot recvmsg's iterator is past its header: at the payload */
		in->arg0 = uring_selected((struct io_kiocb *)req, sk);
		in->uring |= URING_BUF;
	} else {
		in->arg0 = op->buf[i];
	}
	if (!op->multi[i])
		op->call[i] = 0;
	return dir == SOCK_DIR_WRITE ? req : 0;
}

/* An io_uring send's destination on an unconnected UDP socket. */
static __always_inline void uring_dest(struct cp_inflight *in, struct io_kiocb *req)
{
	struct io_async_msghdr *m;
	void *name;

	if (!uring_msghdr_embedded())
		return;
	m = BPF_CORE_READ(req, async_data);
	name = m ? BPF_CORE_READ(m, msg.msg_name) : NULL;
	if (name)
		sockaddr_put(in, name, false);
}

/* A pending io_uring close or shutdown of sk: call and fd into in. */
static __always_inline bool uring_end_take(struct sock *sk, struct cp_inflight *in)
{
	__u64 key = (__u64)sk;
	struct cp_uring_op *op = bpf_map_lookup_elem(&uring_ops, &key);

	if (!op || !op->end_call || bpf_ktime_get_ns() - op->end_ts > URING_END_NS)
		return false;
	in->call = op->end_call;
	in->fd = op->end_fd;
	in->uring = URING_REQ;
	op->end_call = 0;
	return true;
}

#endif /* CRITPATH_BPF_URING_H */
