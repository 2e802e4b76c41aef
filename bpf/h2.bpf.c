// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include "common.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* HTTP/2 frames past the prefix (a large DATA frame pushes the next HEADERS
 * past any prefix): followed by their lengths, headers and header blocks
 * appended as pieces. Past H2_WALK_FRAMES, a bpf_loop with its state in a map:
 * a plain loop is verified again every turn in every caller. */
#define H2_HDR 9
#define H2_WALK_FRAMES 16  /* whole in the prefix, read there (more: h2_frame's) */
#define H2_LOOP_FRAMES 448 /* past it, at most */
/* H2_ROOM less the padding word and an end piece */
#define H2_PIECES (H2_ROOM - 8 - sizeof(struct cp_sock_piece))
#define H2_FRAME_SANE (1u << 20)

struct h2_walk {
	__u64 buf;		      /* the transfer's buffer, or 0: iovecs */
	__u64 base[GATHER_IOVS];      /* the iovecs' bases */
	__u64 start[GATHER_IOVS + 1]; /* their offsets in the transfer; start[niov]: the end */
	__u64 ret;		      /* bytes moved */
	__s64 off;		      /* the next frame header (< 0: begun in the last transfer) */
	__u32 flat;		      /* bytes of the prefix */
	__u32 pos;		      /* bytes of pieces built */
	__u32 last;		      /* the last piece's header, in pieces */
	__u64 last_end;		      /* its end, in the transfer (0: none) */
	__u8 npart, lost, done;
	__u8 part[8]; /* the start of a header cut by the transfer's end */
};

/* Reads land below H2_ROOM, at most H2_ROOM - 1 bytes: bounds for the verifier. */
struct h2_scratch {
	/* in the map, not on the stack: bpf_loop's callback is verified once */
	struct h2_walk w;
	__u8 pieces[2 * H2_ROOM]; /* the pieces built */
	__u8 hdr[2 * H2_ROOM];	  /* a frame header read from user memory */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct h2_scratch);
} h2_scratch SEC(".maps");

/* The frame's length, or -1 when h is no frame header (the frames were lost). */
static __always_inline __s64 h2_frame_len(const __u8 *h)
{
	__u32 flen = (__u32)h[0] << 16 | (__u32)h[1] << 8 | h[2];

	return h[3] > 0x10 || (h[5] & 0x80) || flen > H2_FRAME_SANE ? -1 : flen;
}

/* Where cp_h2_read puts the bytes: the pieces, or the frame header. */
#define H2_TO_HDR 0x80000000u

/* n bytes at transfer offset off into the pieces at at (or hdr); -1: not read. */
__noinline int cp_h2_read(__u64 off, __u32 at, __u32 n)
{
	__u32 zero = 0, got = 0;
	struct h2_scratch *s = bpf_map_lookup_elem(&h2_scratch, &zero);
	struct h2_walk *w;
	__u8 *region;

	if (!s)
		return -1;
	w = &s->w;
	region = at & H2_TO_HDR ? s->hdr : s->pieces;
	at &= H2_ROOM - 1;
	n &= H2_ROOM - 1;
	if (w->buf)
		return n && !bpf_probe_read_user(region + at, n, (void *)(w->buf + off)) ? 0 : -1;
	for (int j = 0; j < GATHER_IOVS; j++) {
		__u64 a = w->start[j], b = w->start[j + 1];
		__u64 lo = off > a ? off : a, hi = off + n < b ? off + n : b;
		__u32 m = (hi - lo) & (H2_ROOM - 1);

		if (lo >= hi)
			continue;
		if (bpf_probe_read_user(region + ((at + lo - off) & (H2_ROOM - 1)), m,
					(void *)(w->base[j] + (lo - a))))
			return -1;
		got += m;
	}
	return got == n ? 0 : -1;
}

/* Bytes [from, to) as a piece, as many as there is room for. */
static __always_inline void h2_piece(struct h2_walk *w, struct h2_scratch *s, __u64 from, __u64 to)
{
	struct cp_sock_piece *ph;
	__u32 n, room;

	if (to <= from)
		return;
	if (w->last_end != from || !w->last_end) {
		if (w->pos + sizeof(*ph) > H2_PIECES)
			return;
		ph = (void *)&s->pieces[w->pos & (H2_ROOM - 1)];
		__builtin_memcpy(ph->off, &from, 4); /* little-endian */
		__builtin_memset(ph->len, 0, 2);
		w->last = w->pos;
		w->pos += sizeof(*ph);
	}
	room = H2_PIECES - w->pos;
	n = to - from < room ? to - from : room;
	if (!n || cp_h2_read(from, w->pos, n))
		return;
	ph = (void *)&s->pieces[w->last & (H2_ROOM - 1)];
	{
		__u16 len;

		__builtin_memcpy(&len, ph->len, 2);
		len += n;
		__builtin_memcpy(ph->len, &len, 2);
	}
	w->pos += n;
	w->last_end = from + n == to ? to : 0; /* a cut piece is not extended */
}

/* HEADERS, PUSH_PROMISE, CONTINUATION: blocks the report must decode (HPACK). */
static __always_inline bool h2_has_block(__u8 type)
{
	return type == 1 || type == 5 || type == 9;
}

/* bpf_loop's step: the frame at w->off and its piece; 1 stops. */
static long h2_frame(__u32 i, void *ctx)
{
	__u32 zero = 0;
	struct h2_scratch *s = bpf_map_lookup_elem(&h2_scratch, &zero);
	struct h2_walk *w;
	__u64 body, from, to;
	__u8 h[H2_HDR];
	__s64 off, flen;

	if (!s)
		return 1;
	w = &s->w;
	off = w->off;
	if (off >= (__s64)w->ret) {
		w->done = 1;
		return 1;
	}
	if (off < 0) {
		/* the header began in the last transfer: its rest begins this one */
		__u32 np = w->npart;

		if (np > 8 || w->ret < H2_HDR - np || cp_h2_read(0, H2_TO_HDR, H2_HDR - np)) {
			w->lost = 1;
			return 1;
		}
#pragma unroll
		for (int k = 0; k < H2_HDR; k++)
			h[k] = k < np ? w->part[k & 7] : s->hdr[(k - np) & (CP_PAYLOAD_MAX - 1)];
	} else if ((__u64)off + H2_HDR > w->ret) {
		/* the header goes on in the next transfer */
		__u32 np = w->ret - off;

		if (np > 8)
			np = 8;
		if (!cp_h2_read(off, H2_TO_HDR, np)) {
			__builtin_memcpy(w->part, s->hdr, 8);
		} else {
			w->lost = 1;
			return 1;
		}
		w->npart = np;
		h2_piece(w, s, off > w->flat ? off : w->flat, w->ret);
		w->done = 1;
		return 1;
	} else if (!cp_h2_read(off, H2_TO_HDR, H2_HDR)) {
		__builtin_memcpy(h, s->hdr, H2_HDR);
	} else {
		w->lost = 1;
		return 1;
	}
	flen = h2_frame_len(h);
	if (flen < 0) {
		w->lost = 1;
		return 1;
	}
	/* the block, or the header alone */
	body = h2_has_block(h[3]) ? flen : 0;
	from = off > (__s64)w->flat ? off : w->flat;
	to = off + H2_HDR + body;
	if (to > w->ret)
		to = w->ret;
	h2_piece(w, s, from, to);
	w->off = off + H2_HDR + flen;
	w->npart = 0;
	return 0;
}

/* Follows the frames whole in prefix p (flat bytes of a transfer of ret)
 * from the scratch walk's w->off. Global: verified once; inlined, each of its
 * exits was verified again through the rest of cp_h2_walk (~0.3 s a program). */
__noinline int cp_h2_prefix(struct h2_room *p, __u32 flat, __u64 ret)
{
	__u32 zero = 0;
	struct h2_scratch *s = bpf_map_lookup_elem(&h2_scratch, &zero);
	struct h2_walk *w;
	__s64 off;

	if (!p || !s)
		return 0;
	w = &s->w;
	off = w->off;
	for (int i = 0; i < H2_WALK_FRAMES; i++) {
		const __u8 *h = &p->b[off & (CP_PAYLOAD_MAX - 1)];
		__s64 flen;

		if (off + H2_HDR > flat || off > CP_PAYLOAD_MAX - H2_HDR)
			break;
		flen = h2_frame_len(h);
		if (flen < 0) {
			w->lost = 1;
			break;
		}
		if (h2_has_block(h[3]) && off + H2_HDR + flen > flat)
			break; /* a header block that goes on past the prefix */
		off += H2_HDR + flen;
	}
	w->off = off;
	w->done = off >= (__s64)ret;
	return 0;
}

/* The iovecs' offsets in the transfer into the scratch walk; past the last
 * one read, empty ones. Global for cp_h2_walk's stack (a socket program's
 * chain of calls has 512 bytes) and verified once. */
__noinline int cp_h2_iovs(__u64 uiov, __u64 ret)
{
	__u32 zero = 0;
	struct h2_scratch *s = bpf_map_lookup_elem(&h2_scratch, &zero);
	bool stop = !uiov;
	__u64 at = 0;

	if (!s)
		return 0;
	for (int i = 0; i < GATHER_IOVS; i++) {
		struct iovec v;

		s->w.start[i] = at;
		if (stop || at >= ret ||
		    bpf_probe_read_user(&v, sizeof(v), (void *)uiov + i * sizeof(v))) {
			stop = true;
			continue;
		}
		s->w.base[i] = (__u64)v.iov_base;
		at += v.iov_len;
	}
	s->w.start[GATHER_IOVS] = at;
	return 0;
}

/* Follows a transfer's frames past prefix p (from buf or iovecs uiov),
 * appends the pieces; returns their bytes. */
__noinline int cp_h2_walk(struct cp_sock_state *st, struct h2_room *p, __u64 buf, __u64 uiov,
			  __u64 xfer)
{
	__u32 zero = 0, flat = (xfer >> 1) & 0x3ff, d = xfer & 1;
	__u64 ret = xfer >> 12, n;
	bool end = xfer & (1 << 11);
	struct h2_scratch *s = bpf_map_lookup_elem(&h2_scratch, &zero);
	struct h2_walk *w;
	__u8 bit;

	if (!st || !p || !s || !flat || flat > CP_PAYLOAD_MAX)
		return 0;
	w = &s->w;
	__builtin_memset(w, 0, sizeof(*w));
	w->buf = buf;
	w->ret = ret;
	w->flat = flat;
	bit = 1 << d;
	if (st->h2_sync & bit) {
		w->npart = st->h2_npart[d] & 7;
		w->off = w->npart ? -(__s64)w->npart : st->h2_next[d];
		__builtin_memcpy(w->part, st->h2_part[d], 8);
	} else if (flat >= 24 && cp_h2_preface(p->b)) {
		w->off = 24; /* the client's preface */
	} else if (flat >= H2_HDR && !p->b[0] && p->b[3] <= 9 && !(p->b[5] & 0x80)) {
		w->off = 0; /* begins with a frame header (below 64 KiB), as the report assumes */
	} else {
		return 0;
	}
	/* frames whole in the prefix are read there; the rest are bpf_loop's */
	if (!w->npart)
		cp_h2_prefix(p, flat, ret);
	if (!buf && !w->done && !w->lost)
		cp_h2_iovs(uiov, ret);
	if (!w->done && !w->lost)
		bpf_loop(H2_LOOP_FRAMES, h2_frame, NULL, 0);
	if (w->done && !w->lost) {
		st->h2_sync |= bit;
		st->h2_npart[d] = w->npart;
		st->h2_next[d] = w->npart ? 0 : w->off - ret;
		__builtin_memcpy(st->h2_part[d], w->part, 8);
	} else {
		st->h2_sync &= ~bit;
	}
	if (end && ret > flat) {
		/* a piece of no bytes at the transfer's end */
		struct cp_sock_piece *ph = (void *)&s->pieces[w->pos & (H2_ROOM - 1)];

		__builtin_memcpy(ph->off, &ret, 4);
		__builtin_memset(ph->len, 0, 2);
		w->pos += sizeof(*ph);
	}
	if (!w->pos)
		return 0;
	__builtin_memset(&s->pieces[w->pos & (H2_ROOM - 1)], 0, 8);
	n = ((flat + w->pos + 7) & ~7u) - flat;
	barrier_var(n);
	if (n >= H2_ROOM || bpf_probe_read_kernel(p->b + flat, n & (H2_ROOM - 1), s->pieces))
		return 0;
	return w->pos;
}
