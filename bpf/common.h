/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* What every BPF file shares. Maps are __weak (libbpf 1.1's linker misplaces
 * an extern map declared before its definition); variables are defined in
 * globals.bpf.c. */
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

/* Set by the recorder before load. */
extern const volatile __u32 cfg_payload_bytes;
extern const volatile __u32 cfg_h2_payload_bytes; /* longer: several frames a transfer */
extern const volatile __u8 cfg_empty_programs;	  /* return at once: the hooks' floor */
extern const volatile __u8 cfg_watch_execs;	  /* agent: report every exec */
/* agent --comm names, zero-padded to 16 bytes: traced from their exec on */
extern const volatile __u64 cfg_watch_comm[CP_WATCH_COMMS][2];
extern const volatile __u32 cfg_nwatch_comm;
/* Wake the recorder only past this: a wakeup per record preempts the target. */
extern const volatile __u64 cfg_wakeup_bytes;

/* Thread groups recorded, a bit per tgid, tested first by every hook;
 * cleared only after the group's exit is recorded. */
#define TARGET_WORDS (1 << 16)
extern __u64 target_bits[TARGET_WORDS];

/* Targets whose forks wake the recorder at once (TLS: the child needs uprobes). */
extern __u64 fork_wake_bits[TARGET_WORDS];

/* A ring buffer per CPU: no shared lock or cache lines. */
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

/* This CPU's ring buffer (programs do not migrate). */
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

/* Failed reserves, per CPU: loss is never silent. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps") __weak;

/* Sockets a target touched, for sk_data_ready (softirq, any current). */
struct cp_sock_state {
	__u32 tgid;
	__u8 last_dir;	 /* SOCK_DIR_* */
	__u8 last_short; /* that call moved at most CP_SHORT_READ bytes */
	__u8 every;	 /* a payload on every transfer: HTTP/2 (sock_h2) */
	/* cp_h2_walk's per direction: frames known, next header, a cut header */
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

/* The same state in the socket, for trusted-pointer programs: no hashing. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cp_sock_state);
} sock_slots SEC(".maps") __weak;

/* Room for pieces after a prefix: a power of 2, at least CP_PAYLOAD_MAX. */
#define H2_ROOM 4096

/* iovecs a payload is gathered from */
#define GATHER_IOVS 8

/* A record's payload with room for pieces after its prefix. */
struct h2_room {
	__u8 b[CP_PAYLOAD_MAX + H2_ROOM];
};

/* Four values in one argument: a subprogram has five. */
#define H2_XFER(ret, flat, d, end)                                                                 \
	((__u64)(ret) << 12 | (__u64)(end) << 11 | (__u64)(flat) << 1 | (d))

/* HTTP/2 multiplexes streams: its connections keep a payload on every transfer. */
static __always_inline bool sock_h2(const __u8 *buf, __u64 len)
{
	int from_start;

	return cp_h2_detect(buf, len, &from_start);
}

/* h2.bpf.c: frames past the prefix as pieces; returns their bytes. */
int cp_h2_walk(struct cp_sock_state *st, struct h2_room *p, __u64 buf, __u64 uiov, __u64 xfer);

#define SOCK_DIR_NONE 0
#define SOCK_DIR_READ 1
#define SOCK_DIR_WRITE 2

/* id's bit in a per-pid bitset */
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

static __always_inline void count_drops(__u64 k)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&drops, &zero);

	if (n)
		__sync_fetch_and_add(n, k); /* per CPU, but an interrupt may add too */
}

static __always_inline void count_drop(void)
{
	count_drops(1);
}

/* The common header, for the current task and CPU. */
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

/* A fixed-size record with its header, or NULL (a drop). */
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

/* For records the recorder acts on at once; not every fork: its /proc reads
 * slow the child. */
static __always_inline void ev_submit_now(void *rec)
{
	bpf_ringbuf_submit(rec, BPF_RB_FORCE_WAKEUP);
}

/* Records staged per CPU and sent to the ring in batches (CP_RING_BATCH): a
 * reservation in the ring costs its lock and the lines its consumer shares,
 * a staged record a few stores. A program staging while another on this CPU
 * is midway (an interrupt, a preempted one) takes the next free level; each
 * level is owned by compare-and-swap. What stays staged when the CPU goes
 * quiet the recorder flushes (stage_flush_all) before it reads the rings. */
#define STAGE_BYTES 8192 /* a level's buffer */
#define STAGE_FLUSH 4096 /* sent from this many bytes on */
#define STAGE_REC_MAX 640 /* the largest record staged; larger ones take the ring */
#define STAGE_LEVELS 4

struct cp_stage {
	__u64 busy; /* 64 bits: the width of the BPF ISA's compare-and-swap */
	__u32 len;  /* bytes staged, the batch header's included */
	__u32 n;    /* records staged */
	__u8 buf[STAGE_BYTES + STAGE_REC_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAGE_LEVELS);
	__type(key, __u32);
	__type(value, struct cp_stage);
} stages SEC(".maps") __weak;

/* globals.bpf.c: a level's records to the ring, as one batch */
int cp_stage_flush(struct cp_stage *s);

/* Room for size bytes (a constant <= STAGE_REC_MAX) in a free level of this
 * CPU's stage, its level in *sp; NULL when none is free (a drop). */
static __always_inline void *stage_reserve(struct cp_stage **sp, __u32 size)
{
	for (__u32 i = 0; i < STAGE_LEVELS; i++) {
		__u32 k = i;
		struct cp_stage *s = bpf_map_lookup_elem(&stages, &k);

		if (!s)
			break;
		if (__sync_val_compare_and_swap(&s->busy, 0, 1))
			continue;
		if (s->len < sizeof(struct cp_hdr) || s->len + size > STAGE_BYTES)
			cp_stage_flush(s);
		*sp = s;
		return s->buf + (s->len & (STAGE_BYTES - 1));
	}
	count_drop();
	return NULL;
}

/* nrec records (size bytes, at most the size reserved) at the level's end
 * are staged; the level is free again. */
static __always_inline void stage_commit_n(struct cp_stage *s, __u32 size, __u32 nrec)
{
	s->len += size;
	s->n += nrec;
	if (s->len >= STAGE_FLUSH)
		cp_stage_flush(s);
	barrier();
	s->busy = 0;
}

/* The record at the level's end is staged, at its header's size (at most
 * max, the size reserved). */
static __always_inline void stage_commit(struct cp_stage *s, const struct cp_hdr *h, __u32 max)
{
	__u32 size = h->size;

	stage_commit_n(s, size < max ? size : max, 1);
}

/* The level is free again, nothing staged. */
static __always_inline void stage_cancel(struct cp_stage *s)
{
	barrier();
	s->busy = 0;
}

/* A fixed-size record with its header, staged, or NULL (a drop). */
static __always_inline void *ev_stage(struct cp_stage **sp, __u16 type, __u16 size, __u64 ts)
{
	struct cp_hdr *h = stage_reserve(sp, size);

	if (h)
		hdr_fill(h, type, size, ts);
	return h;
}

/* A variable-size record built in scratch, sent at its size. */
static __always_inline void ev_output(void *rec, __u64 size)
{
	void *rb = cpu_ring();

	if (!rb || bpf_ringbuf_output(rb, rec, size, wakeup_flag()))
		count_drop();
}

/* A connection between structs with the same field names. */
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

/* A direct load through a BTF-typed pointer (far cheaper than a probe read),
 * else BPF_CORE_READ (raw_tp arguments are plain numbers). */
#define KREAD(btf, p, ...) ((btf) ? (p)->__VA_ARGS__ : BPF_CORE_READ(p, __VA_ARGS__))

static __always_inline void comm_copy(bool btf, char *dst, struct task_struct *p)
{
	if (btf)
		__builtin_memcpy(dst, p->comm, CP_COMM_LEN);
	else
		bpf_core_read(dst, CP_COMM_LEN, &p->comm);
}

#endif /* CRITPATH_BPF_COMMON_H */
