// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "critpath_h2.h"
#include "kpath_internal.h"
#include "proto_hpack.h"
#include "recording.h"

#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN 24
#define H2_HDR 9
#define H2_FRAME_SANE (1u << 20) /* no frame a peer sends is longer, in practice */
#define H2_BLOCK_MAX 4096	 /* header block bytes kept for decoding */
/* HTTP/2 on a connection (DESIGN.md 5): a request is a stream, from its
 * HEADERS' read to its END_STREAM's write; frames followed through prefixes
 * and pieces, boundaries found again after a gap. */
#define H2_STREAMS_MAX 1024

enum {
	H2_DATA = 0,
	H2_HEADERS = 1,
	H2_RST_STREAM = 3,
	H2_SETTINGS = 4,
	H2_PUSH_PROMISE = 5,
	H2_CONTINUATION = 9
};
enum { H2_END_STREAM = 0x1, H2_END_HEADERS = 0x4, H2_PADDED = 0x8, H2_PRIORITY = 0x20 };

/* Directions: toward the server (the client's frames) and back. */
enum { H2_UP = 0, H2_DOWN = 1 };

struct h2_stream {
	struct kp_req req;
	bool ended;	/* END_STREAM (or RST_STREAM) seen */
	bool tentative; /* end: a write whose unseen bytes may have ended it */
};

struct h2_at {
	uint32_t thread;
	uint64_t seq, enter, exit, prev_exit;
};

/* Where one direction's frames are. */
struct h2_dir {
	uint64_t left;		   /* bytes of the current frame not yet passed */
	uint32_t pre;		   /* bytes of the client preface still to pass */
	uint8_t hdr[H2_HDR], nhdr; /* a frame header cut by a transfer's end */
	uint8_t type, flags;	   /* the current frame's */
	uint32_t sid;
	struct h2_at at; /* the current frame's first byte */
	bool lost;	 /* frame boundaries not known */
	bool hb_open, hb_cut;
	uint8_t hb_type, hb_flags; /* HEADERS or PUSH_PROMISE */
	uint32_t hb_sid;
	struct h2_at hb_at;
	uint32_t nhb;
	uint8_t hb[H2_BLOCK_MAX];
};

struct kp_h2 {
	struct h2_dir dir[2];
	struct hpack tab[2];
	struct h2_stream *st;
	uint32_t nst, capst;
	uint32_t max_sid;      /* highest client stream seen opened */
	uint64_t up_prev_exit; /* exit of the previous transfer toward the server */
};

static uint32_t be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static uint32_t be31(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]) &
	       0x7fffffffu;
}

int kp__h2_detect(const uint8_t *p, size_t len, bool *from_start)
{
	int fs = 0, h2 = cp_h2_detect(p, len, &fs);

	*from_start = fs;
	return h2;
}

int kp__h2_new(struct kp_conn *c, bool from_start, bool preface)
{
	struct kp_h2 *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	for (int d = 0; d < 2; d++) {
		hpack__init(&h->tab[d], from_start);
		/* mid-stream, frames are found where a transfer begins with one */
		h->dir[d].lost = !from_start;
	}
	if (preface)
		h->dir[H2_UP].pre = H2_PREFACE_LEN;
	c->h2 = h;
	c->phase = KP_PH_IDLE;
	return 0;
}

void kp__h2_free(struct kp_conn *c)
{
	if (!c->h2)
		return;
	for (int d = 0; d < 2; d++)
		hpack__free(&c->h2->tab[d]);
	free(c->h2->st);
	free(c->h2);
	c->h2 = NULL;
}

static struct h2_stream *stream_of(struct kp_h2 *h, uint32_t sid)
{
	for (uint32_t i = 0; i < h->nst; i++)
		if (h->st[i].req.sid == sid)
			return &h->st[i];
	return NULL;
}

static int stream_finish(struct kp *kp, uint32_t ci, uint32_t i)
{
	struct kp_conn *c = &kp->cn[ci];
	struct kp_h2 *h = c->h2;
	struct h2_stream s = h->st[i];
	struct kp_req save = c->req;
	uint8_t phase = c->phase;
	uint64_t prev_end = c->prev_end;
	int err = 0;

	h->st[i] = h->st[--h->nst];
	if (!s.req.end || s.req.writer == KP_NONE) {
		kp->h2_unanswered++;
		return 0;
	}
	c->req = s.req;
	c->phase = KP_PH_WRITING;
	kp->h2_requests++;
	kp->h2_uncertain += !s.ended;
	err = kp__conn_finish_req(kp, ci);
	c = &kp->cn[ci];
	c->req = save;
	c->phase = phase;
	c->prev_end = prev_end;
	return err;
}

static int finish_ended(struct kp *kp, uint32_t ci)
{
	for (uint32_t i = 0; i < kp->cn[ci].h2->nst;) {
		int err;

		if (!kp->cn[ci].h2->st[i].ended) {
			i++;
			continue;
		}
		err = stream_finish(kp, ci, i);
		if (err)
			return err;
	}
	return 0;
}

/* A stream: the connection's request, walked as the connection's own. */
struct h2_xfer {
	const uint8_t *payload;
	uint32_t plen;
	const uint8_t *pieces;
	uint32_t npieces, pc;
	uint64_t bytes;
	uint32_t seq, unsent;
	bool more, tls;
	uint32_t thread;
	uint64_t ts, enter;
	int d;
	uint32_t sid_lo, sid_hi; /* the streams a server's write carried frames of */
};

/* One transfer as the parser sees it: plen bytes seen, `more` past them. */
static void name_of(const struct hp_fields *f, char *name)
{
	char line[2 * HP_VAL_LEN + 32];

	name[0] = '\0';
	if (!f || !f->method[0] || !f->path[0])
		return;
	snprintf(line, sizeof(line), "%s %s HTTP/2", f->method, f->path);
	proto__request_name((const uint8_t *)line, strlen(line), name, KP_NAME_LEN);
}

static int stream_open(struct kp *kp, uint32_t ci, struct h2_dir *dr, const struct hp_fields *f)
{
	struct kp_conn *c = &kp->cn[ci];
	struct kp_h2 *h = c->h2;
	struct h2_stream *s;

	if (!(dr->hb_sid & 1) || dr->hb_sid <= h->max_sid || stream_of(h, dr->hb_sid))
		return 0; /* trailers, a stream seen before, or not a client's */
	h->max_sid = dr->hb_sid;
	if (h->nst >= H2_STREAMS_MAX) {
		uint32_t old = 0;
		int err;

		for (uint32_t i = 1; i < h->nst; i++)
			if (h->st[i].req.sid < h->st[old].req.sid)
				old = i;
		err = stream_finish(kp, ci, old);
		if (err)
			return err;
		c = &kp->cn[ci];
		h = c->h2;
	}
	if (kp__grow((void **)&h->st, &h->capst, h->nst + 1, sizeof(*h->st)))
		return -ENOMEM;
	s = &h->st[h->nst++];
	memset(s, 0, sizeof(*s));
	s->req.sid = dr->hb_sid;
	s->req.reader = dr->hb_at.thread;
	s->req.writer = KP_NONE;
	s->req.first_read_enter = dr->hb_at.enter;
	s->req.first_read_exit = dr->hb_at.exit;
	s->req.start = kp__req_start(kp, c, dr->hb_at.thread, dr->hb_at.enter, dr->hb_at.exit,
				     (uint32_t)dr->hb_at.seq, dr->hb_at.prev_exit);
	name_of(f, s->req.name);
	s->req.proto = KP_PROTO_HTTP;
	if (f) {
		snprintf(s->req.meta.target, sizeof(s->req.meta.target), "%s", f->path);
		snprintf(s->req.meta.traceparent, sizeof(s->req.meta.traceparent), "%s",
			 f->traceparent);
		snprintf(s->req.meta.tracestate, sizeof(s->req.meta.tracestate), "%s",
			 f->tracestate); /* already cut at a list-member */
		s->req.grpc = !strncmp(f->content_type, "application/grpc", 16);
	}
	if (!s->req.name[0]) {
		snprintf(s->req.name, sizeof(s->req.name), "request");
		kp->h2_unnamed++;
	}
	return 0;
}

/* A frame of the server's on stream sid went out in this write. */
static void stream_wrote(struct kp_h2 *h, struct h2_xfer *x, uint32_t sid, bool end)
{
	struct h2_stream *s = stream_of(h, sid);

	if (!x->sid_hi || sid < x->sid_lo)
		x->sid_lo = sid;
	if (sid > x->sid_hi)
		x->sid_hi = sid;

	if (!s || s->ended)
		return;
	s->req.end = x->ts;
	s->req.writer = x->thread;
	s->req.unsent = x->unsent;
	s->req.nagle = kp__nagle_held(x->unsent, x->bytes);
	s->tentative = false;
	s->ended = end;
}

static void write_lost(struct kp_h2 *h, const struct h2_xfer *x)
{
	for (uint32_t i = 0; i < h->nst; i++) {
		struct h2_stream *s = &h->st[i];

		if (s->ended || s->tentative || s->req.first_read_exit > x->ts)
			continue;
		s->req.end = x->ts;
		s->req.writer = x->thread;
		s->req.unsent = x->unsent;
		s->req.nagle = false;
		s->tentative = true;
	}
}

/* A whole header block (or as much of it as was seen). */
static int block_done(struct kp *kp, uint32_t ci, struct h2_dir *dr, int d)
{
	struct kp_conn *c = &kp->cn[ci];
	struct kp_h2 *h = c->h2;
	struct hp_fields f;
	bool ok;

	dr->hb_open = false;
	ok = !hpack__decode(&h->tab[d], dr->hb, dr->nhb, dr->hb_cut, &f);
	if (dr->hb_type == H2_PUSH_PROMISE)
		return 0; /* decoded for the table only */
	if (d == H2_UP) {
		if (c->role == KP_ROLE_CLIENT) {
			/* a call this client makes: named by its method and path */
			char name[KP_NAME_LEN];

			name_of(ok ? &f : NULL, name);
			if (name[0])
				memcpy(c->last_name, name, sizeof(c->last_name));
			return 0;
		}
		return stream_open(kp, ci, dr, ok ? &f : NULL);
	}
	if (ok && f.status >= 200) {
		struct h2_stream *s = stream_of(h, dr->hb_sid);

		if (s && !s->req.status)
			s->req.status = f.status;
	}
	return 0;
}

/* Named like its HTTP/1.x twin ("GET /item/{n}"). */
static void block_bytes(struct h2_dir *dr, const uint8_t *p, uint64_t n, uint64_t seen)
{
	uint64_t k = seen < n ? seen : n;

	if (dr->hb_cut)
		return;
	if (k > H2_BLOCK_MAX - dr->nhb)
		k = H2_BLOCK_MAX - dr->nhb;
	if (k)
		memcpy(dr->hb + dr->nhb, p, k);
	dr->nhb += (uint32_t)k;
	if (k < n)
		dr->hb_cut = true;
}

static int frame_begin(struct kp *kp, uint32_t ci, struct h2_dir *dr, struct h2_xfer *x)
{
	struct kp_conn *c = &kp->cn[ci];
	struct kp_h2 *h = c->h2;
	bool server = c->role == KP_ROLE_SERVER;

	dr->left = be24(dr->hdr);
	dr->type = dr->hdr[3];
	dr->flags = dr->hdr[4];
	dr->sid = be31(dr->hdr + 5);
	switch (dr->type) {
	case H2_HEADERS:
	case H2_PUSH_PROMISE:
		dr->hb_open = true;
		dr->hb_cut = false;
		dr->hb_type = dr->type;
		dr->hb_flags = dr->flags;
		dr->hb_sid = dr->sid;
		dr->nhb = 0;
		dr->hb_at = dr->at;
		if (server && x->d == H2_DOWN && dr->type == H2_HEADERS)
			stream_wrote(h, x, dr->sid, dr->flags & H2_END_STREAM);
		break;
	case H2_CONTINUATION:
		if (!dr->hb_open || dr->hb_sid != dr->sid)
			dr->hb_open = false;
		break;
	case H2_DATA:
		if (server && x->d == H2_DOWN)
			stream_wrote(h, x, dr->sid, dr->flags & H2_END_STREAM);
		break;
	case H2_RST_STREAM: {
		struct h2_stream *s = stream_of(h, dr->sid);

		if (server && s) {
			s->ended = true; /* answered so far, or dropped unanswered */
			s->tentative = false;
		}
		break;
	}
	default:
		break;
	}
	return 0;
}

/* The current frame's payload is all passed. */
static int frame_end(struct kp *kp, uint32_t ci, struct h2_dir *dr, int d)
{
	if (!dr->hb_open ||
	    (dr->type != H2_HEADERS && dr->type != H2_PUSH_PROMISE && dr->type != H2_CONTINUATION))
		return 0;
	if (dr->type != H2_CONTINUATION) {
		uint32_t skip = 0, pad = 0;

		if (dr->hb_flags & H2_PADDED) {
			pad = dr->nhb ? dr->hb[0] : 0;
			skip = 1;
		}
		if (dr->type == H2_PUSH_PROMISE)
			skip += 4;
		else if (dr->hb_flags & H2_PRIORITY)
			skip += 5;
		if (skip > dr->nhb)
			skip = dr->nhb;
		memmove(dr->hb, dr->hb + skip, dr->nhb - skip);
		dr->nhb -= skip;
		if (!dr->hb_cut)
			dr->nhb = pad <= dr->nhb ? dr->nhb - pad : 0;
	}
	if (!(dr->flags & H2_END_HEADERS))
		return 0;
	return block_done(kp, ci, dr, d);
}

static void dir_lost(struct kp_h2 *h, int d)
{
	struct h2_dir *dr = &h->dir[d];

	if (!dr->lost)
		hpack__forget(&h->tab[d]);
	dr->lost = true;
	dr->nhdr = 0;
	dr->hb_open = false;
}

static uint64_t known(struct h2_xfer *x, uint64_t off, const uint8_t **p)
{
	return cp_sock_bytes_at(x->payload, x->plen, x->pieces, x->npieces, &x->pc, off, p);
}

/* Passes the transfer's bytes frame by frame. */
static int parse(struct kp *kp, uint32_t ci, struct h2_xfer *x)
{
	struct kp_h2 *h = kp->cn[ci].h2;
	struct h2_dir *dr = &h->dir[x->d];
	const uint8_t *p = x->payload;
	uint64_t seen = x->plen, bytes = x->more ? x->plen + (1ull << 40) : x->bytes, off = 0;
	const uint8_t *q;
	int err;

	if (x->d == H2_UP && seen >= H2_PREFACE_LEN && !memcmp(p, H2_PREFACE, H2_PREFACE_LEN)) {
		dr->lost = false;
		dr->left = 0;
		dr->nhdr = 0;
		dr->pre = H2_PREFACE_LEN;
	}
	if (dr->lost) {
		/* frames found again when a transfer begins with one */
		if (seen < H2_HDR || !cp_h2_frame_plausible(p))
			return 0;
		dr->lost = false;
		dr->left = 0;
		dr->nhdr = 0;
		dr->hb_open = false;
	}
	if (dr->pre) {
		uint64_t n = dr->pre < bytes ? dr->pre : bytes;

		dr->pre -= (uint32_t)n;
		off = n;
	}
	while (off < bytes) {
		if (dr->left) {
			uint64_t n = dr->left < bytes - off ? dr->left : bytes - off, k;

			/* the block's bytes, run by run of those seen */
			for (uint64_t at = off; dr->hb_open && at < off + n; at += k) {
				k = known(x, at, &q);
				if (!k) {
					block_bytes(dr, NULL, off + n - at, 0);
					break;
				}
				if (k > off + n - at)
					k = off + n - at;
				block_bytes(dr, q, k, k);
			}
			off += n;
			dr->left -= n;
			if (!dr->left) {
				err = frame_end(kp, ci, dr, x->d);
				if (err)
					return err;
			}
			continue;
		}
		/* a frame header, perhaps begun in the transfer before */
		if (!dr->nhdr) {
			dr->at = (struct h2_at){.thread = x->thread,
						.seq = x->tls ? x->seq : x->seq + off,
						.enter = x->enter,
						.exit = x->ts,
						.prev_exit = h->up_prev_exit};
		}
		while (dr->nhdr < H2_HDR && off < bytes) {
			if (!known(x, off, &q))
				goto lost;
			dr->hdr[dr->nhdr++] = *q;
			off++;
		}
		if (dr->nhdr < H2_HDR)
			break; /* the rest comes in the next transfer */
		dr->nhdr = 0;
		if (dr->hdr[3] > 0x10 || (dr->hdr[5] & 0x80) || be24(dr->hdr) > H2_FRAME_SANE)
			goto lost;
		err = frame_begin(kp, ci, dr, x);
		if (err)
			return err;
		if (!dr->left) {
			err = frame_end(kp, ci, dr, x->d);
			if (err)
				return err;
		}
	}
	return 0;
lost:
	kp->h2_lost += x->d == H2_UP;
	dir_lost(h, x->d);
	if (x->d == H2_DOWN && kp->cn[ci].role == KP_ROLE_SERVER)
		write_lost(h, x);
	return 0;
}

/* The direction of a read or write of connection c. */
static int xfer_dir(const struct kp_conn *c, bool read)
{
	return read == (c->role != KP_ROLE_CLIENT) ? H2_UP : H2_DOWN;
}

static int transfer_end(struct kp *kp, uint32_t ci, const struct h2_xfer *x)
{
	struct kp_conn *c = &kp->cn[ci];
	int err;

	if (x->d == H2_UP)
		c->h2->up_prev_exit = x->ts;
	if (c->role != KP_ROLE_SERVER)
		return 0;
	if (x->d == H2_DOWN) {
		err = kp__tl_call_streams(kp, x->thread, x->ts, ci, x->sid_lo, x->sid_hi);
		if (err)
			return err;
	}
	return finish_ended(kp, ci);
}

static int transfer(struct kp *kp, uint32_t ci, struct h2_xfer x, bool read)
{
	struct kp_conn *c = &kp->cn[ci];
	int err;

	x.d = xfer_dir(c, read);
	if (c->role == KP_ROLE_CLIENT && x.d == H2_DOWN)
		return 0; /* a client's calls are named by what it sends */
	if (!x.plen && x.bytes) {
		/* no prefix (an older recorder, or --payload-bytes 0) */
		dir_lost(c->h2, x.d);
		if (x.d == H2_DOWN)
			write_lost(c->h2, &x);
	} else {
		err = parse(kp, ci, &x);
		if (err)
			return err;
	}
	return transfer_end(kp, ci, &x);
}

/* extension frames too; past the largest size the boundaries were lost */
static int bio_writes(struct kp *kp, uint32_t ci, struct h2_xfer x)
{
	struct kp_bio_wr *q = kp__bio_wr_for(kp, ci, x.thread, x.ts), keep;
	bool conns = q == &kp->cn[ci].bw;
	int err = 0;

	if (!q)
		return 0;
	x.d = xfer_dir(&kp->cn[ci], false);
	keep = *q;
	memset(q, 0, sizeof(*q));
	for (uint32_t off = 0; off < keep.len && !err;) {
		const struct cp_ev_tls_read *r = (const void *)(keep.buf + off);
		struct h2_xfer y = x;

		y.payload = r->payload;
		y.plen = r->payload_len;
		y.bytes = r->bytes > 0 ? (uint64_t)r->bytes : 0;
		y.tls = true;
		y.pieces = cp_pieces(r, &y.npieces);
		err = parse(kp, ci, &y);
		if (y.sid_hi) { /* the streams of all of them */
			x.sid_lo = !x.sid_hi || y.sid_lo < x.sid_lo ? y.sid_lo : x.sid_lo;
			x.sid_hi = y.sid_hi > x.sid_hi ? y.sid_hi : x.sid_hi;
		}
		off += r->h.size; /* whole records, copied (bio_wr_keep) */
	}
	q = conns ? &kp->cn[ci].bw : &kp->th[x.thread].bw;
	if (!q->buf) { /* its buffer back, for the next ones */
		q->buf = keep.buf;
		q->cap = keep.cap;
	} else {
		free(keep.buf);
	}
	return err ? err : transfer_end(kp, ci, &x);
}

int kp__h2_transfer(struct kp *kp, uint32_t ci, const struct cp_ev_sock *e, uint32_t thread,
		    uint64_t ts, uint64_t enter, bool read)
{
	struct h2_xfer x = {.payload = e->payload,
			    .plen = e->payload_len,
			    .bytes = e->bytes > 0 ? (uint64_t)e->bytes : 0,
			    .seq = e->tcp_seq,
			    .unsent = e->unsent,
			    .thread = thread,
			    .ts = ts,
			    .enter = enter};

	x.pieces = cp_pieces(e, &x.npieces);
	if (!(e->flags & CP_SOCK_F_TLS) && kp->cn[ci].tls_bio) {
		/* A socket write on memory buffers: its frames are its TLS
		 * writes' plaintext. */
		if (read)
			return 0;
		if (kp->cn[ci].bio_wr_seen)
			return bio_writes(kp, ci, x);
		x.plen = 0;
		x.pieces = NULL;
		x.npieces = 0;
	} else if (e->flags & CP_SOCK_F_TLS) {
		uint64_t end;

		if (read || !e->payload_len)
			return 0;
		x.bytes = e->payload_len;
		x.more = e->flags & CP_SOCK_F_CUT;
		x.tls = true;
		end = cp_sock_pieces_end(x.pieces, x.npieces);
		if (end > x.bytes) { /* the plaintext's length: its frames all followed */
			x.bytes = end;
			x.more = false;
		}
	}
	return transfer(kp, ci, x, read);
}

int kp__h2_tls_read(struct kp *kp, uint32_t ci, const struct cp_ev_tls_read *e, uint32_t thread,
		    uint64_t ts)
{
	struct h2_xfer x = {.payload = e->payload,
			    .plen = e->payload_len,
			    .bytes = e->bytes > 0 ? (uint64_t)e->bytes : 0,
			    .seq = e->tcp_seq,
			    .tls = true,
			    .thread = thread,
			    .ts = ts,
			    /* on ts's clock: the source's alignment, as ts has it */
			    .enter = e->enter_ts <= e->h.ts ? ts - (e->h.ts - e->enter_ts) : ts};

	x.pieces = cp_pieces(e, &x.npieces);
	return transfer(kp, ci, x, true);
}

int kp__h2_close(struct kp *kp, uint32_t ci)
{
	while (kp->cn[ci].h2 && kp->cn[ci].h2->nst) {
		int err = stream_finish(kp, ci, kp->cn[ci].h2->nst - 1);

		if (err)
			return err;
	}
	return 0;
}

int kp__h2_prune(struct kp *kp, uint32_t ci, uint64_t *mark)
{
	for (uint32_t i = 0; kp->cn[ci].h2 && i < kp->cn[ci].h2->nst;) {
		const struct h2_stream *s = &kp->cn[ci].h2->st[i];

		if (s->req.end && s->req.end + KP_IDLE_FINISH_NS < kp->now) {
			int err = stream_finish(kp, ci, i);

			if (err)
				return err;
			continue;
		}
		/* an open stream holds state back, as an open request does */
		if (s->req.start < *mark && s->req.start + KP_HOLD_MAX_NS > kp->now)
			*mark = s->req.start;
		i++;
	}
	return 0;
}
