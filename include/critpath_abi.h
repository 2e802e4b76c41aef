/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* The records bpf/ and user space share, stored unchanged in recordings.
 * hdr.size is the whole record, a multiple of 8 (readers skip unknown types);
 * fields are only added at a struct's end (bump CP_ABI_VERSION). */
#ifndef CRITPATH_ABI_H
#define CRITPATH_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define CP_ABI_VERSION 5

#define CP_COMM_LEN 16
#define CP_ADDR_LEN 16		/* IPv4 in the first 4 bytes, or IPv6 */
#define CP_PAYLOAD_MAX 512	/* hard cap of --payload-bytes */
#define CP_PAYLOAD_DEFAULT 128
#define CP_FILENAME_MAX 256
#define CP_ALIGN(n) (((n) + 7u) & ~7u)

enum cp_rec_type {
	/* kernel events, emitted by bpf/ */
	CP_EV_SCHED_SWITCH = 1,
	CP_EV_SCHED_WAKING = 2,
	CP_EV_WAKEUP_NEW = 3,
	CP_EV_PROCESS_FORK = 4,
	CP_EV_PROCESS_EXEC = 5,
	CP_EV_PROCESS_EXIT = 6,
	CP_EV_FUTEX = 7,
	CP_EV_SOCK = 8,
	CP_EV_SK_DATA_READY = 9,
	CP_EV_POLL = 10,
	CP_EV_BLOCK = 11,
	CP_EV_RUNQ_CULPRIT = 12,
	CP_EV_UPROBE = 13,
	CP_EV_TLS_READ = 14,

	/* ring framing, never stored: records follow a BATCH to the sample's end */
	CP_RING_BATCH = 0xfe,
	CP_RING_PAD = 0xff,

	/* metadata, written by the recorder itself */
	CP_MD_PROCESS = 0x100,
	CP_MD_THREAD = 0x101,
	CP_MD_SOCKET = 0x102,
	CP_MD_LOSS = 0x103,
	CP_MD_HOOK = 0x104,
	CP_MD_PROBE = 0x105,
};

/* pid/tid: the current task (any in interrupt context); ts: CLOCK_MONOTONIC. */
struct cp_hdr {
	__u16 type;
	__u16 size;
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u64 ts;
};

enum cp_prev_state {
	CP_PREV_PREEMPTED = 0,	/* still runnable: involuntary switch */
	CP_PREV_BLOCKED = 1,	/* went to sleep (S or D, see prev_state_raw) */
	CP_PREV_DEAD = 2,
};

/* Emitted when prev or next belongs to a target. hdr.pid/tid = prev. */
struct cp_ev_sched_switch {
	struct cp_hdr h;
	__u32 prev_pid;
	__u32 prev_tid;
	__u32 next_pid;
	__u32 next_tid;
	__u8 prev_state;	/* enum cp_prev_state */
	__u8 flags;		/* CP_SW_* */
	__u8 __pad[2];
	__u32 prev_state_raw;	/* the kernel's task state bits */
	char next_comm[CP_COMM_LEN];
};

#define CP_SW_PREV_CULPRIT 0x01 /* prev was next's one run-queue culprit */
#define CP_SW_INFERRED 0x02	/* not reported: next was found running; ts the earliest */

enum cp_waker_ctx {
	CP_CTX_TASK = 0,	/* woken by the thread waker_pid/waker_tid */
	CP_CTX_HARDIRQ = 1,
	CP_CTX_SOFTIRQ = 2,	/* softirq_vec says which */
	CP_CTX_NMI = 3,
};

/* as include/linux/interrupt.h */
enum cp_softirq {
	CP_SOFTIRQ_HI = 0,
	CP_SOFTIRQ_TIMER = 1,
	CP_SOFTIRQ_NET_TX = 2,
	CP_SOFTIRQ_NET_RX = 3,
	CP_SOFTIRQ_BLOCK = 4,
	CP_SOFTIRQ_IRQ_POLL = 5,
	CP_SOFTIRQ_TASKLET = 6,
	CP_SOFTIRQ_SCHED = 7,
	CP_SOFTIRQ_HRTIMER = 8,
	CP_SOFTIRQ_RCU = 9,
	CP_SOFTIRQ_NONE = 0xff,
};

/* Emitted when the wakee belongs to a target. hdr.pid/tid = current. */
struct cp_ev_sched_waking {
	struct cp_hdr h;
	__u32 wakee_pid;
	__u32 wakee_tid;
	__u32 waker_pid;	/* 0 when waker_ctx != CP_CTX_TASK */
	__u32 waker_tid;
	__u8 waker_ctx;		/* enum cp_waker_ctx */
	__u8 softirq_vec;	/* enum cp_softirq, CP_SOFTIRQ_NONE unless softirq */
	__u16 target_cpu;
	__u32 __pad;
};

/* A new task's first wakeup. hdr.pid/tid = the parent (current). */
struct cp_ev_wakeup_new {
	struct cp_hdr h;
	__u32 pid;
	__u32 tid;
	__u16 target_cpu;
	__u8 __pad[6];
};

/* A new thread or process. hdr.pid/tid = parent. */
struct cp_ev_process_fork {
	struct cp_hdr h;
	__u32 parent_pid;
	__u32 parent_tid;
	__u32 child_pid;
	__u32 child_tid;
	char child_comm[CP_COMM_LEN];
};

/* in __pad: an untraced process exec'd (the agent's watch); never written by the recorder */
#define CP_EXEC_CANDIDATE 1
/* in __pad: its new comm is a watched name, and BPF traced it at once; the
 * recorder clears the flag when it writes the record */
#define CP_EXEC_WATCHED 2
#define CP_WATCH_COMMS 8 /* names BPF matches at exec (the agent's --comm) */
/* hdr.size = CP_ALIGN(offsetof(filename) + filename_len + 1) */
struct cp_ev_process_exec {
	struct cp_hdr h;
	__u32 old_tid;
	__u16 filename_len;
	__u16 __pad;
	char filename[CP_FILENAME_MAX];	/* filename_len + 1 bytes stored */
};

/* A task exited. group_dead: it was the last thread of its process. */
struct cp_ev_process_exit {
	struct cp_hdr h;
	__s32 exit_code;
	__u8 group_dead;
	__u8 __pad[3];
};

/* Syscall records are written once per call, at exit, with enter_ts; ENTER
 * only for a call still in progress at the end. */
enum cp_phase {
	CP_PHASE_ENTER = 0,
	CP_PHASE_EXIT = 1,
	CP_PHASE_BLOCKED = 2, /* blocked from enter_ts until h.ts; no result */
};

enum cp_futex_call {
	CP_FUTEX_CALL_FUTEX = 0,
	CP_FUTEX_CALL_WAIT = 1,		/* futex_wait(2), 6.7+ */
	CP_FUTEX_CALL_WAKE = 2,		/* futex_wake(2), 6.7+ */
	CP_FUTEX_CALL_WAITV = 3,	/* futex_waitv(2), 5.16+ */
};

/* op: the raw futex op; futex_waitv's uaddr is its first waiter's. */
struct cp_ev_futex {
	struct cp_hdr h;
	__u64 enter_ts;
	__u64 uaddr;
	__s64 ret;		/* exit only */
	__u32 op;
	__u32 val;
	__u8 phase;		/* enum cp_phase */
	__u8 call;		/* enum cp_futex_call */
	__u8 __pad[6];
};

enum cp_sock_call {
	CP_SOCK_ACCEPT = 0,
	CP_SOCK_ACCEPT4,
	CP_SOCK_CONNECT,
	CP_SOCK_READ,
	CP_SOCK_WRITE,
	CP_SOCK_READV,
	CP_SOCK_WRITEV,
	CP_SOCK_RECVFROM,
	CP_SOCK_SENDTO,
	CP_SOCK_RECVMSG,
	CP_SOCK_SENDMSG,
	CP_SOCK_RECVMMSG,
	CP_SOCK_SENDMMSG,
	CP_SOCK_CLOSE,
	CP_SOCK_SHUTDOWN,
	CP_SOCK__COUNT,
};

/* Addresses network order, ports host order (AF_UNIX: the two inodes);
 * tcp_seq: before the call; hdr.size = CP_ALIGN(offsetof(payload) + payload_len). */
struct cp_ev_sock {
	struct cp_hdr h;
	__u64 enter_ts;
	__s64 bytes;		/* exit: the result; enter: the length asked for */
	__s32 fd;
	__u8 phase;		/* enum cp_phase */
	__u8 call;		/* enum cp_sock_call */
	__u16 family;		/* AF_INET, AF_INET6, AF_UNIX, 0 = unknown */
	__u16 lport;
	__u16 rport;
	__u32 tcp_seq;
	__u8 laddr[CP_ADDR_LEN];
	__u8 raddr[CP_ADDR_LEN];
	__u16 payload_len;
	__u8 sock_type;		/* SOCK_STREAM, SOCK_DGRAM, … */
	__u8 flags;		/* CP_SOCK_F_* */
	__u32 unsent;		/* TCP write: bytes still unsent at return */
	__u8 payload[CP_PAYLOAD_MAX];
};

/* A transfer this short (a length prefix) leaves the payload to the next one too. */
#define CP_SHORT_READ 16

#define CP_SOCK_F_TLS 0x01   /* in a TLS call: a write's payload is plaintext */
#define CP_SOCK_F_BOUND 0x02 /* AF_UNIX with its own address: a server's side */
#define CP_SOCK_F_PEEK 0x04  /* MSG_PEEK */
#define CP_SOCK_F_URING 0x08 /* an io_uring request's (fd -1: a fixed file) */
#define CP_SOCK_F_CUT 0x10   /* the plaintext went on past payload_len */
/* HTTP/2: after the payload, cp_sock_piece headers each followed by its
 * bytes; a zero-length piece ends them. */
#define CP_SOCK_F_PIECES 0x20
/* A TCP write's enter_ts is when its bytes left (TCP's departure stamp of
 * the one packet they went in), not when the call was seen: a time before
 * they can have arrived, for the hosts' clocks. */
#define CP_SOCK_F_SENT_AT 0x40

struct cp_sock_piece {
	__u8 off[4]; /* little-endian offset of the bytes in the transfer */
	__u8 len[2]; /* little-endian length */
};

/* Data arrived on a target's socket. UDP: the datagram's addresses, rcv_nxt 0. */
struct cp_ev_sk_data_ready {
	struct cp_hdr h;
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u8 protocol;
	__u8 __pad;
	__u32 rcv_nxt;
	__u32 __pad2;
	__u8 laddr[CP_ADDR_LEN];
	__u8 raddr[CP_ADDR_LEN];
};

enum cp_poll_call {
	CP_POLL_EPOLL_WAIT = 0,
	CP_POLL_EPOLL_PWAIT,
	CP_POLL_EPOLL_PWAIT2,
	CP_POLL_POLL,
	CP_POLL_PPOLL,
	CP_POLL_SELECT,
	CP_POLL_PSELECT6,
	CP_POLL__COUNT,
};

struct cp_ev_poll {
	struct cp_hdr h;
	__u64 enter_ts;
	__s64 ret;		/* exit only: ready count or -errno */
	__u8 phase;
	__u8 call;		/* enum cp_poll_call */
	__u8 __pad[6];
};

enum cp_block_phase {
	CP_BLOCK_ISSUE = 0,
	CP_BLOCK_COMPLETE = 1,
};

/* pid/tid: the issuer's, also at completion */
struct cp_ev_block {
	struct cp_hdr h;
	__u64 sector;
	__u32 dev;
	__u32 bytes;
	__u8 phase;		/* enum cp_block_phase */
	__u8 __pad[7];
};

/* culprit held hdr.cpu for ns while the victim (hdr.pid/tid) waited for it */
struct cp_ev_runq_culprit {
	struct cp_hdr h;
	__u32 culprit_pid;
	__u32 culprit_tid;
	__u64 ns;
	__u64 runnable_since;
	char culprit_comm[CP_COMM_LEN];
};

/* A user-named function (--probe) entered or returned. */
struct cp_ev_uprobe {
	struct cp_hdr h;
	__u32 probe_id;		/* index into the recording's CP_MD_PROBE records */
	__u8 phase;
	__u8 __pad[3];
};

enum cp_tls_call {
	CP_TLS_SSL_READ = 0,
	CP_TLS_SSL_READ_EX = 1,
	CP_TLS_SSL_WRITE = 2,
	CP_TLS_SSL_WRITE_EX = 3,
	CP_TLS_GO_READ = 4, /* Go's crypto/tls */
	CP_TLS_GO_WRITE = 5,
	CP_TLS_GO_HANDSHAKE = 6, /* probe cookies only */
	CP_TLS_SSL_HANDSHAKE = 7,
	CP_TLS_SSL_READ_ANY = 8, /* SSL_read and _ex probed where both begin */
	CP_TLS_SSL_WRITE_ANY = 9,
};

/* cookie bit: probed at Read's copy of the plaintext, not a RET */
#define CP_TLS_GO_AT_COPY 0x100

static inline int cp_tls_call_writes(__u8 call)
{
	return call == CP_TLS_SSL_WRITE || call == CP_TLS_SSL_WRITE_EX ||
	       call == CP_TLS_SSL_WRITE_ANY || call == CP_TLS_GO_WRITE;
}

/* A TLS read's plaintext, when a socket read inside it turned the direction
 * (every read on HTTP/2), with that read's connection. On memory buffers: fd
 * -1, and writes too. */
struct cp_ev_tls_read {
	struct cp_hdr h;
	__u64 enter_ts;		/* when the library call began */
	__s64 bytes;		/* plaintext bytes it returned */
	__s32 fd;
	__u8 call;		/* enum cp_tls_call */
	__u8 flags;		/* CP_SOCK_F_PIECES */
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u32 tcp_seq;		/* the socket read's, as in its CP_EV_SOCK */
	__u8 laddr[CP_ADDR_LEN];
	__u8 raddr[CP_ADDR_LEN];
	__u16 payload_len;
	__u8 tls_id[6];		/* SSL * (Go: *tls.Conn), low 48 bits LE; 0: none */
	__u8 payload[CP_PAYLOAD_MAX];
};

static inline __u64 cp_tls_id(const struct cp_ev_tls_read *e)
{
	__u64 id = 0;

	for (int i = 5; i >= 0; i--)
		id = id << 8 | e->tls_id[i];
	return id;
}

/* Metadata, written by the recorder. data: exe, then cmdline (NUL-separated). */
struct cp_md_process {
	struct cp_hdr h;
	__u32 ppid;
	__u16 exe_len;
	__u16 cmdline_len;
	char comm[CP_COMM_LEN];
	char data[];
};

struct cp_md_thread {
	struct cp_hdr h;
	char comm[CP_COMM_LEN];
};

/* A socket open before the recording (or learned later). */
struct cp_md_socket {
	struct cp_hdr h;
	__s32 fd;
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u8 sock_type;
	__u8 listening;
	__u32 __pad;
	__u8 laddr[CP_ADDR_LEN];
	__u8 raddr[CP_ADDR_LEN];
};

/* Events lost on hdr.cpu between start_ns and end_ns. */
struct cp_md_loss {
	struct cp_hdr h;
	__u64 start_ns;
	__u64 end_ns;
	__u64 events;
};

enum cp_hook_status {
	CP_HOOK_ATTACHED = 0,
	CP_HOOK_FALLBACK = 1,	/* an alternative was used; detail says which */
	CP_HOOK_UNAVAILABLE = 2,
};

/* Which hooks the recorder used. */
struct cp_md_hook {
	struct cp_hdr h;
	__u8 status;		/* enum cp_hook_status */
	__u8 __pad[7];
	char name[64];
	char detail[128];
};

/* A --probe definition. */
struct cp_md_probe {
	struct cp_hdr h;
	__u32 probe_id;
	__u32 __pad;
	char binary[256];
	char symbol[128];
};

#define CP_ASSERT_SIZE(type, n) _Static_assert(sizeof(type) == (n), #type " size is part of the ABI")
CP_ASSERT_SIZE(struct cp_hdr, 24);
CP_ASSERT_SIZE(struct cp_ev_sched_switch, 64);
CP_ASSERT_SIZE(struct cp_ev_sched_waking, 48);
CP_ASSERT_SIZE(struct cp_ev_wakeup_new, 40);
CP_ASSERT_SIZE(struct cp_ev_process_fork, 56);
CP_ASSERT_SIZE(struct cp_ev_process_exec, 288);
CP_ASSERT_SIZE(struct cp_ev_process_exit, 32);
CP_ASSERT_SIZE(struct cp_ev_futex, 64);
CP_ASSERT_SIZE(struct cp_ev_sock, 96 + CP_PAYLOAD_MAX);
CP_ASSERT_SIZE(struct cp_ev_sk_data_ready, 72);
CP_ASSERT_SIZE(struct cp_ev_poll, 48);
CP_ASSERT_SIZE(struct cp_ev_block, 48);
CP_ASSERT_SIZE(struct cp_ev_runq_culprit, 64);
CP_ASSERT_SIZE(struct cp_ev_uprobe, 32);
CP_ASSERT_SIZE(struct cp_ev_tls_read, 96 + CP_PAYLOAD_MAX);
CP_ASSERT_SIZE(struct cp_md_process, 48);
CP_ASSERT_SIZE(struct cp_md_thread, 40);
CP_ASSERT_SIZE(struct cp_md_socket, 72);
CP_ASSERT_SIZE(struct cp_md_loss, 48);
CP_ASSERT_SIZE(struct cp_md_hook, 224);
CP_ASSERT_SIZE(struct cp_md_probe, 416);
CP_ASSERT_SIZE(struct cp_sock_piece, 6);

#endif /* CRITPATH_ABI_H */
