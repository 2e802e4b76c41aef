// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The recorder's HTTP/2 redaction: each direction followed as kpath/h2.c
 * follows it; header blocks through hpack__redact, DATA past `keep` zeroed,
 * bytes of unknown framing 0xff. Directions keyed by addresses, inodes, or for
 * TLS plaintext by process and tls_id. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "critpath_h2.h"
#include "proto.h"
#include "proto_hpack.h"
#include "proto_redact.h"
#include "recording.h"
#include "util.h"

#define H2_HDR 9
#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN 24
#define H2_FRAME_SANE (1u << 20)
#define RD_MAX_CONNS (1u << 16) /* past it, idle ones go */
#define RD_IDLE_NS (600ull * 1000000000)

enum { F_DATA = 0, F_HEADERS = 1, F_SETTINGS = 4, F_PUSH_PROMISE = 5, F_CONTINUATION = 9 };
enum { FL_END_HEADERS = 0x4, FL_PADDED = 0x8, FL_PRIORITY = 0x20 };

struct rd_key {
	uint64_t tls_id; /* 0: keyed by addresses */
	uint32_t pid;	 /* with tls_id */
	uint16_t family, lport, rport;
	uint8_t laddr[CP_ADDR_LEN], raddr[CP_ADDR_LEN];
};

struct rd_dir {
	bool used, sync; /* HTTP/2 bytes seen; where its frames are known */
	uint8_t pre;	 /* bytes of the client's preface still to pass */
	uint8_t nhdr, hdr[H2_HDR];
	uint8_t type, flags;
	uint32_t sid, len, pos; /* the frame's payload: length, bytes passed */
	uint32_t front, pad;	/* bytes before and after its header block */
	bool hb_open;		/* a block goes on in CONTINUATION frames */
	bool hb_gap;		/* bytes of the block were not seen */
	uint32_t next_seq;	/* TCP: where the next transfer begins (0: not known) */
	uint32_t hb_sid;
	struct hp_redact hp;
};

struct rd_conn {
	struct rd_key key;
	uint64_t last; /* the last record's time */
	bool tls;      /* its plaintext seen (addresses' key): its other records are ciphertext */
	struct rd_key addr; /* a tls_id key's socket, last named */
	struct rd_dir d[2]; /* read, write */
};

struct redact {
	uint32_t keep;
	bool keep_query;
	struct rd_conn *c; /* n of them, found through ix */
	uint32_t cap, n;
	struct index ix;
	struct redact_stats st;
	uint8_t *buf; /* the rewritten record */
};

struct redact *redact__new(uint32_t keep)
{
	struct redact *rd = calloc(1, sizeof(*rd));

	if (!rd)
		return NULL;
	rd->keep = keep;
	rd->buf = malloc(UINT16_MAX + 1);
	if (!rd->buf) {
		free(rd);
		return NULL;
	}
	return rd;
}

static void conn_free(struct rd_conn *c)
{
	for (int d = 0; d < 2; d++)
		if (c->d[d].used)
			hpack__redact_free(&c->d[d].hp);
	memset(c, 0, sizeof(*c));
}

void redact__keep_query(struct redact *rd)
{
	rd->keep_query = true;
}

void redact__free(struct redact *rd)
{
	if (!rd)
		return;
	for (uint32_t i = 0; i < rd->n; i++)
		conn_free(&rd->c[i]);
	free(rd->c);
	free(rd->ix.slots);
	free(rd->buf);
	free(rd);
}

void redact__stats(const struct redact *rd, struct redact_stats *s)
{
	*s = rd->st;
	for (uint32_t i = 0; i < rd->n; i++)
		for (int d = 0; d < 2; d++)
			if (rd->c[i].d[d].used)
				s->values += rd->c[i].d[d].hp.redacted;
}

static uint64_t key_hash(const struct rd_key *k)
{
	uint64_t w[sizeof(*k) / 8], h = 0x9e3779b97f4a7c15ull;

	_Static_assert(sizeof(*k) % 8 == 0, "whole words");
	memcpy(w, k, sizeof(w));
	for (size_t i = 0; i < sizeof(w) / 8; i++) {
		h = (h ^ w[i]) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h;
}

static uint64_t conn_hash_of(const void *ctx, uint32_t i)
{
	return key_hash(&((const struct redact *)ctx)->c[i].key);
}

struct conn_lookup {
	const struct redact *rd;
	const struct rd_key *k;
};

static bool conn_eq(const void *ctx, uint32_t i)
{
	const struct conn_lookup *l = ctx;

	return !memcmp(&l->rd->c[i].key, l->k, sizeof(*l->k));
}

/* k's slot in rd->ix: its connection's index + 1, or the empty slot for it */
static uint32_t *conn_slot(struct redact *rd, const struct rd_key *k)
{
	struct conn_lookup l = {rd, k};

	return index__find(&rd->ix, key_hash(k), conn_eq, &l);
}

static struct rd_conn *conn_find(struct redact *rd, const struct rd_key *k)
{
	uint32_t *slot;

	if (!rd->ix.cap)
		return NULL;
	slot = conn_slot(rd, k);
	return *slot ? &rd->c[*slot - 1] : NULL;
}

/* Takes connection c out; the last one moves into its place. */
static void conn_del(struct redact *rd, struct rd_conn *c)
{
	uint32_t i = (uint32_t)(c - rd->c), last = rd->n - 1;

	for (int d = 0; d < 2; d++) /* its count outlives it */
		rd->st.values += c->d[d].used ? c->d[d].hp.redacted : 0;
	index__del(&rd->ix, conn_slot(rd, &c->key), conn_hash_of, rd);
	conn_free(c);
	if (i != last) {
		*conn_slot(rd, &rd->c[last].key) = i + 1;
		rd->c[i] = rd->c[last];
	}
	rd->n--;
}

/* Past RD_MAX_CONNS, connections idle for RD_IDLE_NS go (one that was
 * open is found again at its next HEADERS). */
static void prune(struct redact *rd, uint64_t now)
{
	for (uint32_t i = 0; i < rd->n;) {
		struct rd_conn *c = &rd->c[i];

		if (c->last + RD_IDLE_NS < now)
			conn_del(rd, c); /* moves the last one into i */
		else
			i++;
	}
}

static struct rd_conn *conn_add(struct redact *rd, const struct rd_key *k, uint64_t now)
{
	struct rd_conn *c;

	if (rd->n >= RD_MAX_CONNS)
		prune(rd, now);
	if (index__reserve_more(&rd->ix, rd->n, 1, conn_hash_of, rd) ||
	    grow_array((void **)&rd->c, &rd->cap, rd->n + 1, sizeof(*rd->c), 64))
		return NULL;
	*conn_slot(rd, k) = rd->n + 1;
	c = &rd->c[rd->n++];
	memset(c, 0, sizeof(*c));
	c->key = *k;
	return c;
}

/* As the recorder's BPF side decides a connection is HTTP/2 (sock_h2). */
static bool looks_h2(const uint8_t *p, uint32_t len)
{
	int from_start;

	return cp_h2_detect(p, len, &from_start);
}

/* One transfer's bytes as the record holds them: the prefix, then pieces. */
struct xfer {
	uint8_t *p;	  /* the prefix */
	uint32_t plen;	  /* its bytes */
	uint8_t *pieces;  /* after it */
	uint32_t npieces; /* their bytes */
	uint32_t pc;	  /* the next piece to look at */
	uint64_t bytes;	  /* the transfer's length */
};

/* The transfer's bytes seen at off (writable: the record is a copy). */
static uint64_t known(struct xfer *x, uint64_t off, uint8_t **q)
{
	return cp_sock_bytes_at(x->p, x->plen, x->pieces, x->npieces, &x->pc, off,
				(const uint8_t **)q);
}

/* Every byte seen from off on: not known what they are. */
static void blind(struct redact *rd, struct xfer *x, uint64_t off)
{
	uint32_t pc = 0, len;
	const uint8_t *b;
	uint64_t at;

	if (off < x->plen) {
		memset(x->p + off, 0xff, x->plen - off);
		rd->st.blind += x->plen - off;
	}
	while (cp_sock_piece_next(x->pieces, x->npieces, &pc, &at, &b, &len)) {
		uint64_t from = off > at ? off - at : 0;

		if (from < len) {
			memset((uint8_t *)b + from, 0xff, len - from);
			rd->st.blind += len - from;
		}
	}
}

static void dir_lost(struct rd_dir *dr)
{
	dr->sync = false;
	dr->nhdr = 0;
	dr->hb_open = false;
	hpack__redact_forget(&dr->hp);
}

static bool is_block(uint8_t type)
{
	return type == F_HEADERS || type == F_PUSH_PROMISE || type == F_CONTINUATION;
}

static void frame_begin(struct rd_dir *dr)
{
	const uint8_t *h = dr->hdr;

	dr->len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
	dr->type = h[3];
	dr->flags = h[4];
	dr->sid = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) &
		  0x7fffffffu;
	dr->pos = 0;
	dr->front = dr->pad = 0;
	if (dr->type == F_HEADERS || dr->type == F_PUSH_PROMISE) {
		/* a new block: its pad length, priority or promised stream first */
		dr->front = (dr->flags & FL_PADDED ? 1 : 0) +
			    (dr->type == F_PUSH_PROMISE ? 4 : dr->flags & FL_PRIORITY ? 5 : 0);
		if (dr->hb_open) /* the last one never ended */
			hpack__redact_end(&dr->hp);
		dr->hb_open = true;
		dr->hb_gap = false;
		dr->hb_sid = dr->sid;
	} else if (dr->type == F_CONTINUATION && (!dr->hb_open || dr->hb_sid != dr->sid)) {
		dr->hb_open = false; /* a stray one: its bytes are not parsed */
	}
}

static void frame_end(struct rd_dir *dr)
{
	if (is_block(dr->type) && dr->hb_open && (dr->flags & FL_END_HEADERS)) {
		hpack__redact_end(&dr->hp);
		dr->hb_open = false;
	}
}

/* n bytes of the current frame's payload at transfer offset off, seen at
 * q (NULL: not seen). */
static void payload(struct redact *rd, struct rd_dir *dr, uint64_t off, uint8_t *q, uint32_t n)
{
	if (dr->type == F_DATA) {
		uint64_t from = off < rd->keep ? rd->keep - off : 0;

		if (q && from < n) {
			memset(q + from, 0, n - from);
			rd->st.data += n - from;
		}
		return;
	}
	if (!is_block(dr->type))
		return;
	if (!dr->hb_open) {
		if (q)
			memset(q, 0xff, n);
		return;
	}
	for (uint32_t i = 0; i < n;) {
		uint32_t pos = dr->pos + i, k;

		if (pos < dr->front) {
			/* the pad length sets where the block ends */
			if (pos == 0 && (dr->flags & FL_PADDED) && dr->type != F_CONTINUATION)
				dr->pad = q ? q[i] : 0;
			k = dr->front - pos < n - i ? dr->front - pos : n - i;
		} else if (pos + dr->pad < dr->len) {
			k = dr->len - dr->pad - pos < n - i ? dr->len - dr->pad - pos : n - i;
			if (!q) {
				if (!dr->hb_gap)
					hpack__redact_gap(&dr->hp);
				dr->hb_gap = true;
			} else {
				hpack__redact(&dr->hp, q + i, k);
			}
		} else {
			k = n - i; /* padding */
		}
		i += k;
	}
}

/* Follows the frames of a transfer in direction dr, rewriting as it goes
 * (kpath/h2.c's parse). */
static void walk(struct redact *rd, struct rd_dir *dr, struct xfer *x)
{
	uint64_t off = 0;
	uint8_t *q;

	if (x->plen >= H2_PREFACE_LEN && !memcmp(x->p, H2_PREFACE, H2_PREFACE_LEN)) {
		/* a connection begins: the table is empty */
		hpack__redact_free(&dr->hp);
		hpack__redact_init(&dr->hp, true);
		dr->hp.keep_query = rd->keep_query;
		dr->sync = true;
		dr->pre = H2_PREFACE_LEN;
		dr->nhdr = 0;
		dr->len = dr->pos = 0;
		dr->hb_open = false;
	} else if ((!dr->sync || (!dr->nhdr && !dr->len)) && x->plen >= H2_HDR &&
		   cp_h2_frame_plausible(x->p) && x->p[3] == F_SETTINGS && !x->p[4]) {
		/* a SETTINGS frame to begin with: perhaps another connection
		 * under the same key, whose table is not this one */
		hpack__redact_forget(&dr->hp);
	}
	if (!dr->sync) {
		if (x->plen < H2_HDR || !cp_h2_frame_plausible(x->p)) {
			blind(rd, x, 0);
			return;
		}
		dr->sync = true;
		dr->nhdr = 0;
		dr->len = dr->pos = 0;
		dr->hb_open = false;
	}
	if (dr->pre) {
		uint64_t n = dr->pre < x->bytes ? dr->pre : x->bytes;

		dr->pre -= (uint8_t)n;
		off = n;
	}
	while (off < x->bytes) {
		if (dr->pos < dr->len) {
			uint64_t n = dr->len - dr->pos < x->bytes - off ? dr->len - dr->pos
									: x->bytes - off;

			for (uint64_t at = off, k; at < off + n; at += k) {
				k = known(x, at, &q);
				if (k > off + n - at)
					k = off + n - at;
				if (!k) {
					/* not seen: nor is the rest of the
					 * frame */
					k = off + n - at;
					q = NULL;
				}
				payload(rd, dr, at, q, (uint32_t)k);
				dr->pos += (uint32_t)k;
			}
			off += n;
			if (dr->pos == dr->len) {
				frame_end(dr);
				dr->len = dr->pos = 0;
			}
			continue;
		}
		while (dr->nhdr < H2_HDR && off < x->bytes) {
			uint64_t k = known(x, off, &q);

			if (!k) {
				dir_lost(dr);
				blind(rd, x, off);
				return;
			}
			if (k > (uint64_t)(H2_HDR - dr->nhdr))
				k = H2_HDR - dr->nhdr;
			if (k > x->bytes - off)
				k = x->bytes - off;
			memcpy(dr->hdr + dr->nhdr, q, k);
			dr->nhdr += (uint8_t)k;
			off += k;
		}
		if (dr->nhdr < H2_HDR)
			break;
		dr->nhdr = 0;
		if (dr->hdr[3] > 0x10 || (dr->hdr[5] & 0x80) ||
		    ((uint32_t)dr->hdr[0] << 16 | (uint32_t)dr->hdr[1] << 8 | dr->hdr[2]) >
			H2_FRAME_SANE) {
			dir_lost(dr);
			blind(rd, x, off - H2_HDR);
			return;
		}
		frame_begin(dr);
		if (!dr->len)
			frame_end(dr);
	}
}

/* HTTP/1.x: header values other than those that name and frame a message become
 * '*' (lengths kept). */
static const char *const h1_kept[] = {
    "host",	  "content-length", "content-type", "transfer-encoding", "connection",
    "upgrade",	  "te",		    "traceparent",  "tracestate",	 "grpc-status",
};

static bool h1_line(const uint8_t *p, uint32_t n, bool whole)
{
	uint32_t i = 0;

	if (n >= 7 && !memcmp(p, "HTTP/1.", 7))
		return true;
	while (i < n && i < 16 && p[i] >= 'A' && p[i] <= 'Z')
		i++;
	if (!i || i >= n || p[i] != ' ')
		return false;
	/* the request line ends in its version, when the prefix shows it */
	for (; i + 1 < n && p[i] != '\n'; i++)
		;
	return (!whole && i + 1 >= n) || (i >= 9 && !memcmp(p + i - 9, "HTTP/1.", 7)) ||
	       (i >= 8 && !memcmp(p + i - 8, "HTTP/1.", 7));
}

/* An HTTP/1 message begins at p (its first line may be cut by the prefix). */
static bool h1_start(const uint8_t *p, uint32_t n)
{
	return h1_line(p, n, false);
}

static bool h1_keep(const uint8_t *name, uint32_t n)
{
	for (size_t k = 0; k < sizeof(h1_kept) / sizeof(h1_kept[0]); k++)
		if (strlen(h1_kept[k]) == n && !strncasecmp((const char *)name, h1_kept[k], n))
			return true;
	return false;
}

/* A request line's secret query values, '*' for each byte (a status line
 * has none); how many */
static uint32_t h1_query(uint8_t *p, uint32_t n)
{
	uint32_t sp[16][2], k, a, e;

	if (n >= 7 && !memcmp(p, "HTTP/1.", 7))
		return 0;
	for (a = 0; a < n && p[a] != ' ' && p[a] != '\n'; a++)
		;
	for (e = ++a; e < n && p[e] != ' ' && p[e] != '\r' && p[e] != '\n'; e++)
		;
	if (e > n)
		return 0;
	k = proto__query_secrets((const char *)p + a, e - a, sp, 16);
	for (uint32_t i = 0; i < k; i++)
		memset(p + a + sp[i][0], '*', sp[i][1] - sp[i][0]);
	return k;
}

/* Redacts the messages of p[0..n) in place; returns the values redacted. */
static uint64_t h1_redact(uint8_t *p, uint32_t n, bool keep_query)
{
	uint64_t redacted = 0;
	uint32_t i = 0;

	while (i < n && h1_start(p + i, n - i)) {
		int64_t body = 0;

		if (!keep_query)
			redacted += h1_query(p + i, n - i);
		while (i < n && p[i] != '\n') /* the first line */
			i++;
		for (i++; i < n;) {
			uint32_t name = i, colon, v;

			if (p[i] == '\r' || p[i] == '\n') { /* the empty line */
				i += p[i] == '\r' && i + 1 < n ? 2 : 1;
				break;
			}
			while (i < n && p[i] != ':' && p[i] != '\n')
				i++;
			if (i >= n)
				return redacted;
			colon = i;
			for (v = colon + 1; v < n && p[v] == ' '; v++)
				;
			for (i = v; i < n && p[i] != '\r' && p[i] != '\n'; i++)
				;
			if (p[colon] == ':' && !h1_keep(p + name, colon - name) && i > v) {
				memset(p + v, '*', i - v);
				redacted++;
			} else if (p[colon] == ':' && colon - name == 14 &&
				   !strncasecmp((const char *)p + name, "content-length", 14)) {
				body = strtoll((const char *)p + v, NULL, 10);
			}
			while (i < n && p[i] != '\n')
				i++;
			i++;
		}
		if (body < 0 || body >= (int64_t)n - i)
			break;
		i += (uint32_t)body;
	}
	return redacted;
}

static void key_addrs(struct rd_key *k, uint16_t family, uint16_t lport, uint16_t rport,
		      const uint8_t *laddr, const uint8_t *raddr)
{
	k->family = family;
	k->lport = lport;
	k->rport = rport;
	memcpy(k->laddr, laddr, CP_ADDR_LEN);
	memcpy(k->raddr, raddr, CP_ADDR_LEN);
}

static bool sock_read(uint8_t call)
{
	return call == CP_SOCK_READ || call == CP_SOCK_READV || call == CP_SOCK_RECVFROM ||
	       call == CP_SOCK_RECVMSG || call == CP_SOCK_RECVMMSG;
}

static bool sock_write(uint8_t call)
{
	return call == CP_SOCK_WRITE || call == CP_SOCK_WRITEV || call == CP_SOCK_SENDTO ||
	       call == CP_SOCK_SENDMSG || call == CP_SOCK_SENDMMSG;
}

/* A record's bytes as a transfer of one direction of a connection. */
struct xrec {
	struct rd_key k;
	struct rd_key addr; /* a TLS read's socket (family 0: none named) */
	bool read;
	bool plain;	/* TLS plaintext */
	bool peek;	/* its bytes come again in the next read */
	bool has_seq;	/* seq is where the read began in the TCP stream */
	size_t at;	/* the payload's offset in the record */
	uint16_t plen;
	uint8_t flags;
	uint32_t seq;
	uint64_t bytes;
};

/* Whether h carries a stream's bytes (a payload): classify's answer, read
 * from the record alone (the recorder asks it of every record). */
static bool carries_bytes(const struct cp_hdr *h)
{
	if (h->type == CP_EV_SOCK && h->size >= offsetof(struct cp_ev_sock, payload)) {
		const struct cp_ev_sock *e = (const struct cp_ev_sock *)h;
		bool read = sock_read(e->call);

		if (!e->payload_len || e->phase != CP_PHASE_EXIT || e->sock_type == SOCK_DGRAM ||
		    (!read && !sock_write(e->call)) || (read && (e->flags & CP_SOCK_F_TLS)))
			return false;
		return offsetof(struct cp_ev_sock, payload) + e->payload_len <= h->size;
	}
	if (h->type == CP_EV_TLS_READ && h->size >= offsetof(struct cp_ev_tls_read, payload)) {
		const struct cp_ev_tls_read *e = (const struct cp_ev_tls_read *)h;

		if (!e->payload_len || (!e->family && !cp_tls_id(e)))
			return false;
		return offsetof(struct cp_ev_tls_read, payload) + e->payload_len <= h->size;
	}
	return false;
}

/* Whether h carries a stream's bytes (a payload), and which. */
static bool classify(const struct cp_hdr *h, struct xrec *r)
{
	memset(r, 0, sizeof(*r));
	if (h->type == CP_EV_SOCK && h->size >= offsetof(struct cp_ev_sock, payload)) {
		const struct cp_ev_sock *e = (const struct cp_ev_sock *)h;

		r->read = sock_read(e->call);
		if (!e->payload_len || e->phase != CP_PHASE_EXIT || e->sock_type == SOCK_DGRAM ||
		    (!r->read && !sock_write(e->call)) || (r->read && (e->flags & CP_SOCK_F_TLS)))
			return false;
		key_addrs(&r->k, e->family, e->lport, e->rport, e->laddr, e->raddr);
		r->at = offsetof(struct cp_ev_sock, payload);
		r->plen = e->payload_len;
		r->flags = e->flags;
		r->peek = e->flags & CP_SOCK_F_PEEK;
		r->bytes = e->bytes > 0 ? (uint64_t)e->bytes : 0;
		r->plain = e->flags & CP_SOCK_F_TLS;
		/* a read's copied_seq is exact; a write's snd_nxt lags what
		 * was written by what was not sent yet */
		r->has_seq = r->read && !r->plain && (e->family == AF_INET || e->family == AF_INET6);
		r->seq = e->tcp_seq;
		if (r->plain) {
			/* a TLS write's plaintext: bytes counts ciphertext */
			uint32_t n;
			const uint8_t *pc = cp_pieces(e, &n);
			uint64_t end = cp_sock_pieces_end(pc, n);

			r->bytes = end > r->plen		     ? end
				   : (e->flags & CP_SOCK_F_CUT) ? r->plen + (1ull << 40)
								: r->plen;
		}
	} else if (h->type == CP_EV_TLS_READ && h->size >= offsetof(struct cp_ev_tls_read, payload)) {
		const struct cp_ev_tls_read *e = (const struct cp_ev_tls_read *)h;

		if (!e->payload_len)
			return false;
		r->read = !(e->call == CP_TLS_SSL_WRITE || e->call == CP_TLS_SSL_WRITE_EX ||
			    e->call == CP_TLS_GO_WRITE);
		/* by the library's connection (tls_id); addresses, when given,
		 * tell a reused tls_id */
		if (e->family)
			key_addrs(&r->addr, e->family, e->lport, e->rport, e->laddr, e->raddr);
		if ((r->k.tls_id = cp_tls_id(e)))
			r->k.pid = h->pid;
		else if (e->family)
			r->k = r->addr;
		else
			return false; /* not followed: an older recorder's */
		r->at = offsetof(struct cp_ev_tls_read, payload);
		r->plen = e->payload_len;
		r->flags = e->flags;
		r->plain = true;
		r->bytes = e->bytes > 0 ? (uint64_t)e->bytes : 0;
	} else {
		return false;
	}
	if (r->bytes < r->plen)
		r->bytes = r->plen;
	return r->at + r->plen <= h->size;
}

bool redact__looks_at(struct redact *rd, const struct cp_hdr *h)
{
	(void)rd;
	if (h->type == CP_EV_SOCK && h->size >= offsetof(struct cp_ev_sock, payload) &&
	    ((const struct cp_ev_sock *)h)->call == CP_SOCK_CLOSE)
		return true;
	return carries_bytes(h);
}

/* The record's HTTP/2 bytes, rewritten in out (h itself, or rd->buf). */
static const struct cp_hdr *redact(struct redact *rd, const struct cp_hdr *h, uint8_t *out)
{
	struct xfer x = {};
	struct rd_conn *c;
	struct rd_dir *dr;
	struct xrec r;

	if (h->type == CP_EV_SOCK && h->size >= offsetof(struct cp_ev_sock, payload)) {
		const struct cp_ev_sock *e = (const struct cp_ev_sock *)h;

		if (e->call == CP_SOCK_CLOSE && e->family) {
			/* the addresses may name another connection next */
			memset(&r, 0, sizeof(r));
			key_addrs(&r.k, e->family, e->lport, e->rport, e->laddr, e->raddr);
			c = conn_find(rd, &r.k);
			if (c)
				conn_del(rd, c);
			return h;
		}
	}
	if (!classify(h, &r))
		return h;
	c = conn_find(rd, &r.k);
	if (c && c->tls && !r.plain)
		return h; /* ciphertext of a connection whose plaintext is followed */
	if (c && r.k.tls_id && r.addr.family && c->addr.family &&
	    memcmp(&c->addr, &r.addr, sizeof(r.addr))) {
		conn_del(rd, c); /* a new connection with the tls_id of a closed one */
		c = NULL;
	}
	if (c && h1_line((const uint8_t *)h + r.at, r.plen, true) && c->d[!r.read].used &&
	    (!c->d[!r.read].sync || (!c->d[!r.read].nhdr && !c->d[!r.read].len))) {
		/* HTTP/1 where a frame would begin: a reused key */
		conn_del(rd, c);
		c = NULL;
	}
	if (!c) {
		if (!(r.flags & CP_SOCK_F_PIECES) && !looks_h2((const uint8_t *)h + r.at, r.plen)) {
			if (!h1_start((const uint8_t *)h + r.at, r.plen))
				return h;
			if (out != (const uint8_t *)h)
				memcpy(out, h, h->size);
			rd->st.h1_values += h1_redact(out + r.at, r.plen, rd->keep_query);
			return (const struct cp_hdr *)out;
		}
		c = conn_add(rd, &r.k, h->ts);
		if (!c)
			return NULL;
	}
	c->tls |= r.plain && !r.k.tls_id;
	if (r.addr.family)
		c->addr = r.addr;
	c->last = h->ts;
	dr = &c->d[!r.read];
	if (!dr->used) {
		dr->used = true;
		hpack__redact_init(&dr->hp, false);
		dr->hp.keep_query = rd->keep_query;
		rd->st.conns++;
	}
	if (out != (const uint8_t *)h)
		memcpy(out, h, h->size);
	x.p = out + r.at;
	x.plen = r.plen;
	x.pieces = x.p + r.plen;
	if (r.flags & CP_SOCK_F_PIECES)
		x.npieces = h->size - (uint32_t)(r.at + r.plen);
	x.bytes = r.bytes;
	if (r.peek) {
		/* read again by the next read: not passed twice */
		blind(rd, &x, 0);
		return (const struct cp_hdr *)out;
	}
	if (r.has_seq) {
		/* not where the last transfer ended: bytes between were not
		 * seen (or came in another order) */
		if (dr->next_seq && r.seq != dr->next_seq && dr->sync)
			dir_lost(dr);
		dr->next_seq = r.seq + (uint32_t)r.bytes;
		if (!dr->next_seq)
			dr->next_seq = 1;
	}
	walk(rd, dr, &x);
	return (const struct cp_hdr *)out;
}

const struct cp_hdr *redact__record(struct redact *rd, const struct cp_hdr *h)
{
	return redact(rd, h, rd->buf);
}

int redact__in_place(struct redact *rd, struct cp_hdr *h)
{
	return redact(rd, h, (uint8_t *)h) ? 0 : -ENOMEM;
}
