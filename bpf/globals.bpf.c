// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The one definition of each variable the headers declare (common.h says why). */
#include "blocked.h"
#include "tls.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 cfg_payload_bytes = CP_PAYLOAD_DEFAULT;
const volatile __u32 cfg_h2_payload_bytes = CP_PAYLOAD_MAX;
const volatile __u8 cfg_empty_programs = 0;
const volatile __u8 cfg_watch_execs = 0;
const volatile __u64 cfg_watch_comm[CP_WATCH_COMMS][2];
const volatile __u32 cfg_nwatch_comm = 0;
const volatile __u64 cfg_wakeup_bytes = 1 << 20;
const volatile __u8 cfg_lean = 0;
const volatile __u16 cfg_sys_calls[CP_SYS_TABLE];
const volatile __u8 cfg_tls = 0;

__u64 target_bits[TARGET_WORDS];
__u64 fork_wake_bits[TARGET_WORDS];
__u64 tls_busy_bits[TARGET_WORDS];
__u64 go_tls_bits[TARGET_WORDS];

/* A level's records to this CPU's ring as one CP_RING_BATCH (the reader
 * takes the records after its header); the level begins again. */
__noinline int cp_stage_flush(struct cp_stage *s)
{
	struct cp_hdr *b;
	__u64 len; /* 64 bits: clang 14 bounds a 32-bit copy the verifier does not follow */
	void *rb;

	if (!s)
		return 0;
	b = (struct cp_hdr *)s->buf;
	len = s->len;
	if (len > sizeof(*b) && len <= sizeof(s->buf)) {
		b->type = CP_RING_BATCH;
		b->size = sizeof(*b);
		b->cpu = bpf_get_smp_processor_id();
		b->pid = b->tid = 0;
		b->ts = 0;
		rb = cpu_ring();
		barrier_var(len); /* checked again where the verifier sees it */
		if (len > sizeof(s->buf))
			len = sizeof(s->buf);
		if (!rb || bpf_ringbuf_output(rb, s->buf, len, wakeup_flag()))
			count_drops(s->n);
	}
	s->len = sizeof(*b);
	s->n = 0;
	return 0;
}

/* Run by the recorder on each CPU (BPF_PROG_TEST_RUN) before it reads the
 * rings: what is staged there goes out. Returns 1 when a level was busy (a
 * program midway on that CPU): try again. */
SEC("raw_tp")
int stage_flush_all(void *ctx)
{
	int busy = 0;

	for (__u32 i = 0; i < STAGE_LEVELS; i++) {
		__u32 k = i;
		struct cp_stage *s = bpf_map_lookup_elem(&stages, &k);

		if (!s)
			break;
		if (__sync_val_compare_and_swap(&s->busy, 0, 1)) {
			busy = 1;
			continue;
		}
		if (s->n)
			cp_stage_flush(s);
		barrier();
		s->busy = 0;
	}
	return busy;
}
