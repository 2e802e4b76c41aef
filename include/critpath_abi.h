/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * The event ABI: the one contract shared by the BPF programs (bpf/) and user
 * space (user/). Records of this shape travel through the ring buffer and are
 * stored, unchanged, in recordings; metadata records written by the recorder
 * use the same header. Fixed little-endian layout, explicit padding, and a
 * size assertion per struct so the two sides cannot drift apart.
 *
 * Rules: every record starts with struct cp_hdr; hdr.size is the whole record
 * in bytes, a multiple of 8 (variable tails are padded); a reader skips types
 * it does not know by hdr.size. Types and fields may be added at the end of a
 * struct (bump CP_ABI_VERSION); none may change meaning.
 */
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

	/* ring-buffer framing between bpf/ and the recorder, never stored: a
	 * CP_RING_BATCH header (a bare struct cp_hdr) says that records follow
	 * back to back in the same ring sample up to its end; CP_RING_PAD fills
	 * slots of a batch that were not needed (skipped by hdr.size). */
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

/* Common header. pid is the thread group id, tid the thread id, of the task
 * current when the event fired (for interrupt-context events: whatever was
 * current). ts is bpf_ktime_get_ns() (CLOCK_MONOTONIC). */
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
	__u32 prev_state_raw;	/* the kernel's task state bits (TASK_UNINTERRUPTIBLE = 2 → D) */
	char next_comm[CP_COMM_LEN];
};

/* next waited for its CPU and only prev (a target thread) ran there
 * meanwhile: prev is the wait's one culprit, for all of it, and no
 * CP_EV_RUNQ_CULPRIT records follow (the common case, written in 64 bytes
 * instead of 128). */
#define CP_SW_PREV_CULPRIT 0x01
/* Inferred, not reported: next (a target thread) was found running on this
 * CPU by the next switch seen there, though no switch to it was reported (a
 * kernel that leaves some tasks' switches out of the tracepoint). hdr.ts is
 * the earliest the switch can have been: the last switch seen on the CPU,
 * or next's wakeup if later. prev is the task that last switch gave the CPU
 * to; next_comm is next's. */
#define CP_SW_INFERRED 0x02

enum cp_waker_ctx {
	CP_CTX_TASK = 0,	/* woken by the thread waker_pid/waker_tid */
	CP_CTX_HARDIRQ = 1,
	CP_CTX_SOFTIRQ = 2,	/* softirq_vec says which */
	CP_CTX_NMI = 3,
};

/* The kernel's softirq vectors (include/linux/interrupt.h), stable since 2.6. */
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

/* hdr.size = CP_ALIGN(offsetof(filename) + filename_len + 1). */
/* cp_ev_process_exec.__pad: a process not traced exec'd (critpath agent's
 * watch); the recorder reads it and never writes it */
#define CP_EXEC_CANDIDATE 1
struct cp_ev_process_exec {
	struct cp_hdr h;
	__u32 old_tid;
	__u16 filename_len;
	__u16 __pad;
	char filename[CP_FILENAME_MAX];	/* NUL-terminated, only filename_len + 1 bytes stored */
};

/* A task exited. group_dead: it was the last thread of its process. */
struct cp_ev_process_exit {
	struct cp_hdr h;
	__s32 exit_code;
	__u8 group_dead;
	__u8 __pad[3];
};

/* Syscall records (futex, sock, poll) are emitted once per call, at exit,
 * with enter_ts saying when the call began: half the events of an enter/exit
 * pair, and the analysis needs the interval, not the two edges. An enter
 * record (enter_ts == h.ts) is only written for a call still in progress when
 * the recording ends. */
enum cp_phase {
	CP_PHASE_ENTER = 0,
	CP_PHASE_EXIT = 1,
	/* The call blocked from enter_ts until h.ts, when the thread ran again
	 * (the default capture sees calls where the scheduler does: at the
	 * switch that blocked the thread); its result was not recorded. */
	CP_PHASE_BLOCKED = 2,
};

enum cp_futex_call {
	CP_FUTEX_CALL_FUTEX = 0,
	CP_FUTEX_CALL_WAIT = 1,		/* futex_wait(2), 6.7+ */
	CP_FUTEX_CALL_WAKE = 2,		/* futex_wake(2), 6.7+ */
	CP_FUTEX_CALL_WAITV = 3,	/* futex_waitv(2), 5.16+ */
};

/* futex syscalls of target threads. op is the raw futex op (FUTEX_WAIT_PRIVATE
 * = 128, …); for futex_waitv uaddr is the first waiter's address. */
struct cp_ev_futex {
	struct cp_hdr h;
	__u64 enter_ts;		/* when the call began (= h.ts for enter records) */
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

/* Socket syscalls of target threads, for socket fds only. Addresses in
 * network byte order, ports in host order. For accept the fd and addresses
 * are the new connection's (exit). A send on an unconnected UDP socket has
 * the remote end it sends to (the call's address; ABI 4, none before); a
 * read there has none (its sk_data_ready says who sent the datagram).
 * tcp_seq: for sends the sender's snd_nxt
 * before the call, for receives copied_seq before the call, so both ends of a
 * connection can be matched byte for byte. payload: first bytes the call
 * carried (exit of reads, enter of writes), hdr.size =
 * CP_ALIGN(offsetof(payload) + payload_len). */
struct cp_ev_sock {
	struct cp_hdr h;
	__u64 enter_ts;		/* when the call began (= h.ts for enter records) */
	__s64 bytes;		/* exit: the return value; enter: the requested length */
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
	__u8 flags;		/* CP_SOCK_F_* (ABI 2; 0 in older recordings) */
	/* A TCP write: bytes of the stream written but not yet sent when the
	 * call returned, held back by Nagle's algorithm (waiting for the ACK
	 * of data in flight) or by the congestion or receive window. The peer
	 * gets them later than the call's end says. (ABI 3; 0 before.) */
	__u32 unsent;
	__u8 payload[CP_PAYLOAD_MAX];
};

/* The call ran inside a TLS library's write or read (SSL_write, SSL_read,
 * their _ex forms) of a process with TLS capture on: its bytes are
 * ciphertext. A write's payload is the plaintext it was encrypting instead
 * (the first bytes of SSL_write's buffer); a read carries no payload, and
 * the plaintext the library returned follows in a CP_EV_TLS_READ record. */
/* A read or write of at most this many bytes (a length prefix read
 * before its message, as MySQL's clients and servers do) keeps the
 * payload for the next call in the same direction too. */
#define CP_SHORT_READ 16

/* An AF_UNIX socket's laddr holds its inode number (8 bytes, host order)
 * and raddr its peer's (0: none or closed): the two ends of a connection
 * name each other. (ABI 5; 0 before.) */
#define CP_SOCK_F_TLS 0x01
/* A Unix-domain socket with an address of its own: the accepted end of a
 * listening socket has its listener's, a connecting client none, or an
 * autobind's (not counted: SO_PASSCRED gives D-Bus's clients one).
 * It tells a server's side of a connection open before the recording.
 * (ABI 3; 0 before.) */
#define CP_SOCK_F_BOUND 0x02
/* A read with MSG_PEEK: its bytes stay queued for the next read (systemd-
 * resolved peeks at each datagram's size before reading it). Not known for
 * recvmmsg under --all-syscalls. (ABI 4; 0 before.) */
#define CP_SOCK_F_PEEK 0x04
/* The transfer of an io_uring request (IORING_OP_RECV, SEND, RECVMSG,
 * SENDMSG, READ, WRITE and their vector and zero-copy forms; a CLOSE or
 * SHUTDOWN's state change for CP_SOCK_CLOSE/SHUTDOWN), made in the
 * submitter's io_uring_enter, its task work or an io-wq worker rather than
 * in a socket syscall: call, fd and payload are the request's as
 * submitted (a recv or recvmsg with a provided buffer: the data in the
 * buffer the kernel picked); on a fixed file (a registered descriptor), or
 * for a request seen only at its poll wakeup, fd is -1. A read with a
 * provided buffer is not resolved (a plain read, fd -1, no payload, no
 * flag). (ABI 4; 0 before.) */
#define CP_SOCK_F_URING 0x08
/* A write inside a TLS library's write (CP_SOCK_F_TLS) whose plaintext,
 * the payload, went on past what was kept: the call passed more bytes than
 * payload_len (bytes counts ciphertext, so it cannot say). Without it, the
 * payload is the whole plaintext. (ABI 4; 0 before.) */
#define CP_SOCK_F_CUT 0x10
/*
 * HTTP/2 frames past the prefix (ABI 4; not set before), on a socket
 * record or the plaintext of a TLS read (struct cp_ev_tls_read): after the
 * payload_len bytes of the prefix, the record (h.size) holds pieces of the
 * transfer's bytes beyond it, in order of offset, each a struct
 * cp_sock_piece and then its len bytes. The recorder follows the frames
 * through the transfer and keeps each frame header, and the header blocks
 * of HEADERS, PUSH_PROMISE and CONTINUATION frames: a DATA frame's payload
 * is the gap between two pieces. A piece of zero length, or fewer bytes
 * left than a piece header, ends them (the record's alignment padding). A
 * TLS write's pieces (bytes counts ciphertext) end with a piece of zero
 * length whose offset is the length of its plaintext.
 */
#define CP_SOCK_F_PIECES 0x20

struct cp_sock_piece {
	__u8 off[4]; /* little-endian offset of the bytes in the transfer */
	__u8 len[2]; /* little-endian length */
};

/* sock:sk_data_ready for a target's socket: data arrived, in softirq context
 * usually. rcv_nxt is the receiver's sequence after the data (TCP). For a
 * UDP socket the addresses are the datagram's (source = remote, destination
 * = local), whether or not the socket is connected, and rcv_nxt is 0.
 * protocol: IPPROTO_TCP, IPPROTO_UDP, … (ABI 4; 0 before, and UDP addresses
 * were the socket's own). */
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
	__u64 enter_ts;		/* when the call began (= h.ts for enter records) */
	__s64 ret;		/* exit only: ready count or -errno */
	__u8 phase;
	__u8 call;		/* enum cp_poll_call */
	__u8 __pad[6];
};

enum cp_block_phase {
	CP_BLOCK_ISSUE = 0,
	CP_BLOCK_COMPLETE = 1,
};

/* Block requests issued on behalf of a target; the completion (interrupt
 * context) is matched in the kernel by (dev, sector). hdr.pid/tid of the
 * complete record = the issuing task, not current. */
struct cp_ev_block {
	struct cp_hdr h;
	__u64 sector;
	__u32 dev;
	__u32 bytes;
	__u8 phase;		/* enum cp_block_phase */
	__u8 __pad[7];
};

/* While victim (a target thread) was runnable on hdr.cpu, culprit held the
 * CPU for ns nanoseconds. Emitted when the victim gets the CPU back, one
 * record per culprit, hdr.ts = that moment. hdr.pid/tid = the victim. */
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
	/* Go's crypto/tls: (*Conn).Read and (*Conn).Write, in the executable
	 * (ABI 4 readers older than these read a 5 as a read) */
	CP_TLS_GO_READ = 4,
	CP_TLS_GO_WRITE = 5,
	/* a Go connection's handshake begins: a probe's cookie (the
	 * recorder's), never in a record */
	CP_TLS_GO_HANDSHAKE = 6,
	/* OpenSSL's SSL_do_handshake (SSL_accept and SSL_connect call it):
	 * a probe's cookie, never in a record */
	CP_TLS_SSL_HANDSHAKE = 7,
	/* SSL_read or SSL_read_ex (SSL_write or SSL_write_ex), probed at the
	 * function both begin by calling (user/record/tls_at.c): the _ex
	 * forms' arguments and return. (Readers older than these read a 9 as
	 * a read.) */
	CP_TLS_SSL_READ_ANY = 8,
	CP_TLS_SSL_WRITE_ANY = 9,
};

/* Beside CP_TLS_GO_READ in the cookie of go_tls_return (the recorder's,
 * never in a record): the probe is on Read's call of runtime.memmove that
 * copies the plaintext into b, not on a RET (user/record/gotls.c). */
#define CP_TLS_GO_AT_COPY 0x100

/* Whether a TLS call code is a write (its plaintext goes out). */
static inline int cp_tls_call_writes(__u8 call)
{
	return call == CP_TLS_SSL_WRITE || call == CP_TLS_SSL_WRITE_EX ||
	       call == CP_TLS_SSL_WRITE_ANY || call == CP_TLS_GO_WRITE;
}

/* A TLS library's read returned plaintext (OpenSSL SSL_read / SSL_read_ex,
 * bytes > 0), emitted at its return under the same economy as socket
 * payloads: only when a socket read inside it (or inside an earlier read on
 * the same connection that returned no data yet) was the first after a
 * change of direction (a CP_EV_SOCK with CP_SOCK_F_TLS and no payload,
 * before this record, on the same thread), or when it is the first read to
 * return data since the connection's handshake (SSL_do_handshake) and has
 * no socket read inside: the handshake's last socket read brought it
 * (read-ahead, TLS 1.3's first request with the client's Finished).
 * fd, family, ports and addresses are that socket read's: the connection
 * the plaintext came from. payload: the first
 * bytes of the plaintext, hdr.size = CP_ALIGN(offsetof(payload) +
 * payload_len), or more with CP_SOCK_F_PIECES.
 * On HTTP/2, every read that returns plaintext, with the connection of the
 * last socket read inside one. In a process whose library runs on memory
 * buffers (Node.js: no read has a socket read inside), the first read
 * after a write on its SSL *, with fd -1 and no family, ports or
 * addresses: its connection is its thread's last socket read's; and the
 * first write after a read, the same way (call SSL_write or SSL_write_ex,
 * bytes the plaintext written): the socket write the thread makes next
 * carries its ciphertext. On HTTP/2 there, every read and every write.
 * Go's crypto/tls is recorded the same way (call CP_TLS_GO_READ at the
 * read's return, or where it copies the plaintext into its buffer just
 * before, on the thread that made the socket read; CP_TLS_GO_WRITE
 * at the write's entry, before the socket writes it makes).
 * (ABI 4.) */
struct cp_ev_tls_read {
	struct cp_hdr h;
	__u64 enter_ts;		/* when the library call began */
	__s64 bytes;		/* plaintext bytes it returned */
	__s32 fd;
	__u8 call;		/* enum cp_tls_call */
	__u8 flags;		/* CP_SOCK_F_PIECES (ABI 4; 0 before) */
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u32 tcp_seq;		/* the socket read's, as in its CP_EV_SOCK */
	__u8 laddr[CP_ADDR_LEN];
	__u8 raddr[CP_ADDR_LEN];
	__u16 payload_len;
	/* the call's connection in the library, its SSL * (Go: *tls.Conn),
	 * low 48 bits little-endian: on memory buffers, which connection
	 * when the thread's last socket read was another's (ABI 4; 0: not
	 * recorded) */
	__u8 tls_id[6];
	__u8 payload[CP_PAYLOAD_MAX];
};

/* A CP_EV_TLS_READ's tls_id as a number, 0 when not recorded. */
static inline __u64 cp_tls_id(const struct cp_ev_tls_read *e)
{
	__u64 id = 0;

	for (int i = 5; i >= 0; i--)
		id = id << 8 | e->tls_id[i];
	return id;
}

/*
 * Metadata records, written by the recorder (never by BPF).
 */

/* hdr.pid = the process. data = exe (exe_len bytes, no NUL) then cmdline
 * (cmdline_len bytes, arguments separated by NUL). */
struct cp_md_process {
	struct cp_hdr h;
	__u32 ppid;
	__u16 exe_len;
	__u16 cmdline_len;
	char comm[CP_COMM_LEN];
	char data[];
};

/* hdr.pid/tid = the thread. */
struct cp_md_thread {
	struct cp_hdr h;
	char comm[CP_COMM_LEN];
};

/* A socket a target had open when recording started (or learned later). */
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

/* Which hooks the recorder used. name/detail NUL-terminated. */
struct cp_md_hook {
	struct cp_hdr h;
	__u8 status;		/* enum cp_hook_status */
	__u8 __pad[7];
	char name[64];
	char detail[128];
};

/* A --probe definition: probe_id, binary path, symbol. */
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
