/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * What every BPF file of critpath shares: the target filter, the ring buffer,
 * the per-CPU drop counters and the configuration. All the .bpf.c files are linked
 * into one object (bpftool gen object): the maps are __weak definitions (each
 * file carries one, the linker keeps one; libbpf 1.1's linker misplaces an
 * extern map declared before its definition), the variables are extern,
 * defined once in globals.bpf.c (a __weak array takes room in .bss per file).
 */
#ifndef CRITPATH_BPF_COMMON_H
#define CRITPATH_BPF_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "critpath_abi.h"
#include "critpath_h2.h"
#include "core_fixes.bpf.h"

/* Configuration, set by the recorder before load (rodata). */
extern const volatile __u32 cfg_payload_bytes;
/* The prefix on an HTTP/2 connection (struct cp_sock_state.every): its
 * frames are followed through each transfer, several requests' worth in one
 * read, so it takes more than a request line (--payload-bytes when given). */
extern const volatile __u32 cfg_h2_payload_bytes;
/* Every program returns at its first instruction: the overhead floor of the
 * hooks themselves (--empty-programs). */
extern const volatile __u8 cfg_empty_programs;
/* Wake the recorder only when this much is waiting in the ring buffer: a
 * wakeup per record would have the recorder preempt the target for every
 * event it caused (and cost a context switch each). The recorder polls on a
 * short timer otherwise. */
extern const volatile __u64 cfg_wakeup_bytes;

/*
 * Thread groups being recorded: one bit per tgid (tgids are below
 * PID_MAX_LIMIT, 1 << 22 on 64-bit), tested by every hook first thing — a
 * load from global data where a hash lookup cost ~30 ns per call. Set by the
 * recorder (user/record/hooks.c, atomically through the mmapped .bss) and
 * by sched_process_fork for children; cleared by the recorder only after a
 * group's exit is recorded, so its final context switch is still seen.
 */
#define TARGET_WORDS (1 << 16)
extern __u64 target_bits[TARGET_WORDS];

/* Targets whose forks the recorder acts on at once (ev_submit_now): those
 * with TLS capture, whose children need their own uprobes before their
 * first requests. Set and cleared by the recorder, as target_bits. */
extern __u64 fork_wake_bits[TARGET_WORDS];

/*
 * The event stream: one ring buffer per CPU, so a record is reserved and
 * committed without the spinlock and the cache lines every CPU would share
 * in one buffer. The recorder creates them (its --buffer-mb split between
 * the CPUs) and reads them all; records are in time order per CPU, and the
 * recording's reader merges. ring_proto is the inner maps' type.
 */
struct ring_proto {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); /* the number of possible CPUs, set by the recorder */
	__type(key, __u32);
	__array(values, struct ring_proto);
} rings SEC(".maps") __weak;

/* This CPU's ring buffer (programs do not migrate while they run). */
static __always_inline void *cpu_ring(void)
{
	__u32 cpu = bpf_get_smp_processor_id();

	return bpf_map_lookup_elem(&rings, &cpu);
}

/* bpf_ringbuf_reserve() on this CPU's ring (size: a constant). */
#define ring_reserve(size)                                                                         \
	({                                                                                         \
		void *__rb = cpu_ring();                                                           \
		__rb ? bpf_ringbuf_reserve(__rb, (size), 0) : NULL;                                \
	})

/* Failed ring-buffer reserves, per CPU: loss is never silent. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps") __weak;

/* Sockets a target touched: struct sock * → owner tgid and the direction of
 * the last captured payload (see sock.bpf.c). Lets sk_data_ready, which runs
 * in softirq context with an arbitrary current, know the socket is ours. */
struct cp_sock_state {
	__u32 tgid;
	__u8 last_dir;	 /* SOCK_DIR_* */
	__u8 last_short; /* that call moved at most CP_SHORT_READ bytes */
	__u8 every;	 /* a payload on every transfer: HTTP/2 (sock_h2) */
	/* HTTP/2 frames followed past the prefix (h2.bpf.c, cp_h2_walk),
	 * per direction (0 read, 1 write): bit d of h2_sync says where the
	 * frames are known; h2_next[d] is the offset of the first frame header
	 * in the next transfer, or h2_npart[d] bytes of a header cut by the
	 * last transfer's end are in h2_part[d] */
	__u8 h2_sync;
	__u32 h2_next[2];
	__u8 h2_npart[2];
	__u8 h2_part[2][8];
	__u8 __pad[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct cp_sock_state);
} sock_states SEC(".maps") __weak;

/* The same state in the socket itself, for the default capture's
 * socket-layer programs (bpf/blocked.h), which have the socket as a trusted
 * pointer: no hashing, and it goes away with the socket. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cp_sock_state);
} sock_slots SEC(".maps") __weak;

/* Room for the pieces after a walked record's prefix (a power of 2, and at
 * least CP_PAYLOAD_MAX: payload_gather's room past its last offset too). A
 * transfer carrying 32 streams' answers needs about 1 KiB of them. */
#define H2_ROOM 4096

/* The iovecs a vectored transfer's payload is gathered from (payload_gather,
 * cp_h2_walk). */
#define GATHER_IOVS 8

/* A record's payload with room for pieces after its prefix. */
struct h2_room {
	__u8 b[CP_PAYLOAD_MAX + H2_ROOM];
};

/* A transfer of ret bytes in direction d (0 read, 1 write) with a prefix of
 * flat bytes, as cp_h2_walk's one argument for the four (a subprogram has
 * five); end: the record's byte count is not ret (a TLS write's is
 * ciphertext), so the pieces end with ret. */
#define H2_XFER(ret, flat, d, end)                                                                 \
	((__u64)(ret) << 12 | (__u64)(end) << 11 | (__u64)(flat) << 1 | (d))

/*
 * HTTP/2 multiplexes requests on a connection: a server reads the next
 * stream's HEADERS while it still answers the last, so the frames of one
 * direction are not all at its changes of direction. A connection whose
 * payload shows HTTP/2 (critpath_h2.h) has a payload on every transfer from
 * then on, and its frames followed (cp_h2_walk); over a TLS library on
 * memory buffers, the same of its plaintext (tls.bpf.c).
 */
static __always_inline bool sock_h2(const __u8 *buf, __u64 len)
{
	int from_start;

	return cp_h2_detect(buf, len, &from_start);
}

/* HTTP/2 frames past a record's prefix (h2.bpf.c): the pieces' bytes
 * appended to p, 0 for none. */
int cp_h2_walk(struct cp_sock_state *st, struct h2_room *p, __u64 buf, __u64 uiov, __u64 xfer);

#define SOCK_DIR_NONE 0
#define SOCK_DIR_READ 1
#define SOCK_DIR_WRITE 2

/* id's bit in one of the per-pid bitsets (target_bits and its kin). */
static __always_inline bool pid_bit(const __u64 *words, __u32 id)
{
	return (words[(id >> 6) & (TARGET_WORDS - 1)] >> (id & 63)) & 1;
}

static __always_inline bool tgid_is_target(__u32 tgid)
{
	return pid_bit(target_bits, tgid);
}

static __always_inline void target_add(__u32 tgid)
{
	__sync_fetch_and_or(&target_bits[(tgid >> 6) & (TARGET_WORDS - 1)], 1ull << (tgid & 63));
}

static __always_inline bool current_is_target(void)
{
	return tgid_is_target(bpf_get_current_pid_tgid() >> 32);
}

static __always_inline void count_drop(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&drops, &zero);

	if (n)
		*n += 1; /* per CPU: no atomics needed */
}

/* Fills the common header with the current task, CPU and time. */
static __always_inline void hdr_fill(struct cp_hdr *h, __u16 type, __u16 size, __u64 ts)
{
	__u64 id = bpf_get_current_pid_tgid();

	h->type = type;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->pid = id >> 32;
	h->tid = (__u32)id;
	h->ts = ts;
}

/* Reserves a fixed-size record and fills its header; counts a drop when the
 * ring buffer is full. */
static __always_inline void *ev_reserve(__u16 type, __u16 size, __u64 ts)
{
	struct cp_hdr *h = ring_reserve(size);

	if (!h) {
		count_drop();
		return NULL;
	}
	hdr_fill(h, type, size, ts);
	return h;
}

static __always_inline __u64 wakeup_flag(void)
{
	void *rb = cpu_ring();

	return rb && bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA) >= cfg_wakeup_bytes
		   ? BPF_RB_FORCE_WAKEUP
		   : BPF_RB_NO_WAKEUP;
}

static __always_inline void ev_submit(void *rec)
{
	bpf_ringbuf_submit(rec, wakeup_flag());
}

/* Submits a record the recorder acts on at once, whatever the ring holds:
 * a fork of a process with TLS capture, whose child needs its uprobes
 * before its first requests (record/record.c's on_life). Not every fork or exec:
 * woken for each, the recorder reads /proc while the child runs, and a
 * shell loop of fork and exec ran 12% slower. */
static __always_inline void ev_submit_now(void *rec)
{
	bpf_ringbuf_submit(rec, BPF_RB_FORCE_WAKEUP);
}

/* Sends a variable-size record built in a scratch buffer (exact size). */
static __always_inline void ev_output(void *rec, __u64 size)
{
	void *rb = cpu_ring();

	if (!rb || bpf_ringbuf_output(rb, rec, size, wakeup_flag()))
		count_drop();
}

/* A socket call's connection, from one struct holding it to another (the
 * inflight entry, a TLS slot, a record: the same field names). */
#define CONN_COPY(dst, src)                                                                        \
	do {                                                                                       \
		(dst)->family = (src)->family;                                                     \
		(dst)->lport = (src)->lport;                                                       \
		(dst)->rport = (src)->rport;                                                       \
		(dst)->tcp_seq = (src)->tcp_seq;                                                   \
		__builtin_memcpy((dst)->laddr, (src)->laddr, CP_ADDR_LEN);                         \
		__builtin_memcpy((dst)->raddr, (src)->raddr, CP_ADDR_LEN);                         \
	} while (0)

/* The first statement of every program. */
#define EMPTY_GUARD()                                                                              \
	do {                                                                                       \
		if (cfg_empty_programs)                                                            \
			return 0;                                                                  \
	} while (0)

static __always_inline __u32 task_cpu_of(struct task_struct *p)
{
	return BPF_CORE_READ(p, thread_info.cpu);
}

/*
 * A field of a kernel object. btf (a constant after inlining): p is a
 * BTF-typed pointer (a tp_btf argument, bpf_get_current_task_btf(), or a
 * kernel_cast() result), read with a direct load, which the verifier turns
 * into a fault-safe load at a fraction of the cost of a bpf_probe_read_kernel()
 * call; otherwise (raw_tp arguments are plain numbers) through BPF_CORE_READ.
 * Both are CO-RE relocated.
 */
#define KREAD(btf, p, ...) ((btf) ? (p)->__VA_ARGS__ : BPF_CORE_READ(p, __VA_ARGS__))

static __always_inline void comm_copy(bool btf, char *dst, struct task_struct *p)
{
	if (btf)
		__builtin_memcpy(dst, p->comm, CP_COMM_LEN);
	else
		bpf_core_read(dst, CP_COMM_LEN, &p->comm);
}

#endif /* CRITPATH_BPF_COMMON_H */
