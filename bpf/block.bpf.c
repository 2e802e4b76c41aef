// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Block requests of target threads: the completion (any current) is matched
 * by (dev, sector) and carries the issuer's pid/tid. */
#include "common.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct cp_blk_key {
	__u64 sector;
	__u32 dev;
	__u32 __pad;
};

struct cp_blk_val {
	__u32 pid;
	__u32 tid;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct cp_blk_key);
	__type(value, struct cp_blk_val);
} blk_inflight SEC(".maps");

static __always_inline __u32 rq_dev(struct request *rq)
{
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);

	if (!disk)
		return 0;
	/* MKDEV as the block tracepoints print it: major << 20 | minor */
	return ((__u32)BPF_CORE_READ(disk, major) << 20) | BPF_CORE_READ(disk, first_minor);
}

static __always_inline void blk_emit(struct request *rq, struct cp_blk_key *k, __u32 bytes,
				     __u8 phase, struct cp_blk_val *who)
{
	struct cp_ev_block *e = ev_reserve(CP_EV_BLOCK, sizeof(*e), bpf_ktime_get_ns());

	if (!e)
		return;
	if (who) {
		e->h.pid = who->pid;
		e->h.tid = who->tid;
	}
	e->sector = k->sector;
	e->dev = k->dev;
	e->bytes = bytes;
	e->phase = phase;
	__builtin_memset(e->__pad, 0, sizeof(e->__pad));
	ev_submit(e);
}

static __always_inline int on_issue(struct request *rq)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_blk_key k = {};
	struct cp_blk_val v;

	if (!tgid_is_target(id >> 32))
		return 0;
	k.sector = BPF_CORE_READ(rq, __sector);
	k.dev = rq_dev(rq);
	v.pid = id >> 32;
	v.tid = (__u32)id;
	bpf_map_update_elem(&blk_inflight, &k, &v, BPF_ANY);
	blk_emit(rq, &k, BPF_CORE_READ(rq, __data_len), CP_BLOCK_ISSUE, NULL);
	return 0;
}

static __always_inline int on_complete(struct request *rq, unsigned int nr_bytes)
{
	struct cp_blk_key k = {};
	struct cp_blk_val *v, who;

	k.sector = BPF_CORE_READ(rq, __sector);
	k.dev = rq_dev(rq);
	v = bpf_map_lookup_elem(&blk_inflight, &k);
	if (!v)
		return 0;
	who = *v;
	bpf_map_delete_elem(&blk_inflight, &k);
	blk_emit(rq, &k, nr_bytes, CP_BLOCK_COMPLETE, &who);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue_btf, struct request *rq)
{
	EMPTY_GUARD();
	return on_issue(rq);
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(block_rq_issue_raw, struct request *rq)
{
	EMPTY_GUARD();
	return on_issue(rq);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete_btf, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	EMPTY_GUARD();
	return on_complete(rq, nr_bytes);
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(block_rq_complete_raw, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	EMPTY_GUARD();
	return on_complete(rq, nr_bytes);
}
