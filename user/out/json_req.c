// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * --format json: the requests (out/json.c writes the rest of the report).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "out_json_int.h"
#include "proto.h"
#include "util.h"

/* Requests are written without yajl (most of the bytes; its per-token checks
 * cost more than the analysis), byte for byte as yajl_gen would. */
static inline void rq_room(struct out_json_stream *s, size_t n)
{
	if (s->n + n > sizeof(s->buf))
		out_json__flush(s);
}

static inline void rq_c(struct out_json_stream *s, char c)
{
	rq_room(s, 1);
	s->buf[s->n++] = c;
}

/* len bytes at most OUT_BUF (keys, literals, runs of a string) */
static inline void rq_put(struct out_json_stream *s, const void *p, size_t len)
{
	rq_room(s, len);
	memcpy(s->buf + s->n, p, len);
	s->n += len;
}

/* A ',' unless a map or array has just opened. */
static inline void rq_sep(struct out_json_stream *s)
{
	char c = s->n ? s->buf[s->n - 1] : s->last;

	if (c != '{' && c != '[')
		rq_c(s, ',');
}

/* "key": (keys are literals with nothing to escape) */
#define rq_key(s, k)                                                                               \
	do {                                                                                       \
		rq_sep(s);                                                                         \
		rq_put(s, "\"" k "\":", sizeof(k) + 2);                                            \
	} while (0)

/* Bytes written as they are: printable ASCII but '"' and '\\' (not NUL) */
static const uint8_t rq_plain[256] = {
    [0x20] = 1,
    [0x21] = 1,
    [0x23 ... 0x5b] = 1,
    [0x5d ... 0x7f] = 1,
};

/* The bytes of str up to its end or the next one to escape, in pieces
 * that fit the buffer; returns how many. */
static size_t rq_plain_run(struct out_json_stream *s, const unsigned char *u)
{
	size_t n = 0;

	while (rq_plain[u[n]])
		n++;
	for (size_t o = 0; o < n;) {
		size_t k = n - o < sizeof(s->buf) ? n - o : sizeof(s->buf);

		rq_put(s, u + o, k);
		o += k;
	}
	return n;
}

static void rq_str(struct out_json_stream *s, const char *str)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *u = (const unsigned char *)str;
	size_t i = 0;

	rq_c(s, '"');
	for (;;) {
		unsigned char c;
		const char *esc = NULL;
		size_t n;

		i += rq_plain_run(s, u + i);
		c = u[i];
		if (!c)
			break;
		rq_room(s, 8);
		if (c < 0x80) {
			switch (c) {
			case '\r': esc = "\\r"; break;
			case '\n': esc = "\\n"; break;
			case '\\': esc = "\\\\"; break;
			case '"': esc = "\\\""; break;
			case '\f': esc = "\\f"; break;
			case '\b': esc = "\\b"; break;
			case '\t': esc = "\\t"; break;
			default: break;
			}
			if (esc) {
				memcpy(s->buf + s->n, esc, 2);
				s->n += 2;
			} else {
				memcpy(s->buf + s->n, "\\u00", 4);
				s->buf[s->n + 4] = hex[c >> 4];
				s->buf[s->n + 5] = hex[c & 15];
				s->n += 6;
			}
			i++;
			continue;
		}
		/* a sequence is at most 4 bytes: what is left beyond does not matter */
		n = utf8__seq(u + i, strnlen((const char *)u + i, 4));
		if (n) {
			memcpy(s->buf + s->n, u + i, n);
			s->n += n;
			i += n;
		} else {
			memcpy(s->buf + s->n, "\xef\xbf\xbd", 3);
			s->n += 3;
			i++;
		}
	}
	rq_c(s, '"');
}

/* Two digits at a time, from the end, 32-bit below 10^8. */
static const char rq_d2[201] = "00010203040506070809101112131415161718192021222324252627282930"
			       "31323334353637383940414243444546474849505152535455565758596061"
			       "62636465666768697071727374757677787980818283848586878889909192"
			       "93949596979899";

/* v < 10^8 before p, its digits only (at least one); returns the start */
static char *rq_u32_digits(char *p, uint32_t v)
{
	while (v >= 100) {
		p -= 2;
		memcpy(p, rq_d2 + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, rq_d2 + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
	return p;
}

/* A cursor into s->buf: one room check covers a bounded run of writes. */
static inline char *rq_at(struct out_json_stream *s, char *o, size_t n)
{
	if ((size_t)(o - s->buf) + n > sizeof(s->buf)) {
		s->n = (size_t)(o - s->buf);
		out_json__flush(s);
		o = s->buf;
	}
	return o;
}

/* the byte before the cursor */
static inline char rq_last(const struct out_json_stream *s, const char *o)
{
	return o > s->buf ? o[-1] : s->last;
}

/* a literal (a key with its quotes and colon, separators) */
#define rq_lit(o, l) (memcpy((o), (l), sizeof(l) - 1), (o) + sizeof(l) - 1)

static const uint32_t rq_pow10[10] = {1,      10,      100,	 1000,	    10000,
				      100000, 1000000, 10000000, 100000000, 1000000000};

static inline char *rq_u32_at(char *o, uint32_t v)
{
	uint32_t t = ((32 - (uint32_t)__builtin_clz(v | 1)) * 1233) >> 12;
	char *p = o + t + (v >= rq_pow10[t]) + !v;

	rq_u32_digits(p, v);
	return p;
}

/* Exactly eight digits of v (< 10^8), zeros kept */
static inline char *rq_u32_8_at(char *o, uint32_t v)
{
	uint32_t a = v / 10000, b = v % 10000;

	memcpy(o, rq_d2 + 2 * (a / 100), 2);
	memcpy(o + 2, rq_d2 + 2 * (a % 100), 2);
	memcpy(o + 4, rq_d2 + 2 * (b / 100), 2);
	memcpy(o + 6, rq_d2 + 2 * (b % 100), 2);
	return o + 8;
}

/* At most 20 bytes */
static inline char *rq_u64_at(char *o, uint64_t v)
{
	if (v < 100000000)
		return rq_u32_at(o, (uint32_t)v);
	if (v < 10000000000000000ull) {
		o = rq_u32_at(o, (uint32_t)(v / 100000000));
	} else {
		uint64_t hi = v / 100000000;

		o = rq_u32_at(o, (uint32_t)(hi / 100000000));
		o = rq_u32_8_at(o, (uint32_t)(hi % 100000000));
	}
	return rq_u32_8_at(o, (uint32_t)(v % 100000000));
}

/* A time: a request's times share their upper digits, written once then copied.
 * At most 20 bytes. */
static inline char *rq_time_at(struct out_json_stream *s, char *o, uint64_t v)
{
	uint64_t hi = v / 100000000;
	char *e;

	/* segments tile the request: one's end is the next one's start */
	if (v == s->time_last && s->time_last_len) {
		memcpy(o, s->time_last_dig, sizeof(s->time_last_dig));
		return o + s->time_last_len;
	}
	if (hi != s->time_hi || !s->time_hi_len) {
		if (!hi || hi >= 100000000)
			return rq_u64_at(o, v);
		s->time_hi = hi;
		s->time_hi_len =
		    (uint32_t)(rq_u32_at(s->time_hi_dig, (uint32_t)hi) - s->time_hi_dig);
	}
	memcpy(o, s->time_hi_dig, 8);
	e = rq_u32_8_at(o + s->time_hi_len, (uint32_t)(v % 100000000));
	s->time_last = v;
	s->time_last_len = (uint32_t)(e - o); /* at most 16 */
	memcpy(s->time_last_dig, o, sizeof(s->time_last_dig));
	return e;
}

static void rq_u64(struct out_json_stream *s, uint64_t v)
{
	char *o = rq_at(s, s->buf + s->n, 20);

	s->n = (size_t)(rq_u64_at(o, v) - s->buf);
}

/* Strings that stay valid (interned) are kept as JSON by pointer and copied
 * when they come again; others only while their contents match. The caller made
 * room for RQ_KEPT_MAX + RQ_TAIL. */
static __attribute__((noinline)) char *rq_str_miss(struct out_json_stream *s, char *o,
						   const char *str, bool stable, uint32_t k)
{
	size_t len = strlen(str), from;

	if (s->kept[k].p == str && len == s->kept[k].rawlen && !memcmp(str, s->kept[k].raw, len)) {
		memcpy(o, s->kept[k].json, s->kept[k].len);
		return o + s->kept[k].len;
	}
	s->n = (size_t)(o - s->buf);
	if (len > RQ_RAW_MAX) {
		rq_str(s, str);
		return rq_at(s, s->buf + s->n, RQ_TAIL);
	}
	rq_room(s, 6 * len + 2); /* every byte escaped, and quotes: no flush while it is written */
	from = s->n;
	rq_str(s, str);
	if (s->n - from <= RQ_KEPT_MAX) {
		s->kept[k].p = str;
		s->kept[k].stable = stable;
		s->kept[k].len = (uint32_t)(s->n - from);
		memcpy(s->kept[k].json, s->buf + from, s->n - from);
		s->kept[k].rawlen = (uint32_t)len;
		memcpy(s->kept[k].raw, str, len);
	}
	return rq_at(s, s->buf + s->n, RQ_TAIL);
}

static inline char *rq_str_kept(struct out_json_stream *s, char *o, const char *str, bool stable)
{
	uintptr_t x = (uintptr_t)str;
	uint32_t k = (uint32_t)((x * 0x9e3779b97f4a7c15ull) >> 56) & (RQ_KEPT_SLOTS - 1);
	uint32_t len = s->kept[k].len;

	if (s->kept[k].p != str || !stable || !s->kept[k].stable)
		return rq_str_miss(s, o, str, stable, k);
	/* fixed sizes: no call */
	memcpy(o, s->kept[k].json, 32);
	if (len > 32)
		memcpy(o + 32, s->kept[k].json + 32, RQ_KEPT_MAX - 32);
	return o + len;
}

static void rq_kstr(struct out_json_stream *s, const char *kq, size_t klen, const char *v)
{
	if (!v)
		return;
	rq_sep(s);
	rq_put(s, kq, klen);
	rq_str(s, v);
}

/* kq: the key quoted with its colon, "\"key\":" */
#define RQ_K(k) "\"" k "\":", sizeof(k) + 2

static void rq_frames(struct out_json_stream *s, const char *const *frames, uint32_t n, bool stable)
{
	rq_key(s, "frames");
	rq_c(s, '[');
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			rq_c(s, ',');
		rq_str(s, frames[i] ? frames[i] : "?");
	}
	rq_c(s, ']');
}

/* ,"key":string (string not NULL), through the cache */
static inline char *rq_kstr_at(struct out_json_stream *s, char *o, const char *kq, size_t klen,
			       const char *v, bool stable)
{
	o = rq_at(s, o, klen + RQ_KEPT_MAX + RQ_TAIL);
	memcpy(o, kq, klen);
	return rq_str_kept(s, o + klen, v, stable);
}

/* ,"key":v for v >= 0 ("does not apply" otherwise); room made by the caller */
static inline char *rq_ki32_at(char *o, const char *kq, size_t klen, int32_t v)
{
	if (v < 0)
		return o;
	memcpy(o, kq, klen);
	return rq_u64_at(o + klen, (uint64_t)v);
}

#define RQ_CK(k) ",\"" k "\":", sizeof(k) + 3

/* Bytes of a segment (or culprit) but its strings, at most */
#define RQ_SEG_FIXED 256

/* Repeating fragments of a segment (category and frames, pid/tid/comm) are
 * keyed by their interned pointers, written once, then copied. */
static inline struct rq_frag *rq_frag_find(struct out_json_stream *s, const uint64_t *key)
{
	const uint64_t m = 0x9e3779b97f4a7c15ull;
	/* written out: gcc keeps these loops of five as loops */
	uint64_t h = ((((key[0] * m ^ key[1]) * m ^ key[2]) * m ^ key[3]) * m ^ key[4]) * m;

	_Static_assert(RQ_FRAG_KEY == 5, "rq_frag_find and rq_frag_is take five words");
	return &s->frag[(h >> 40) & (RQ_FRAG_SLOTS - 1)];
}

static inline bool rq_frag_is(const struct rq_frag *f, const uint64_t *key)
{
	return f->len && !((f->key[0] ^ key[0]) | (f->key[1] ^ key[1]) | (f->key[2] ^ key[2]) |
			   (f->key[3] ^ key[3]) | (f->key[4] ^ key[4]));
}

/* The fragment's bytes at o, with RQ_TAIL bytes of room after them */
static inline char *rq_frag_put(struct out_json_stream *s, char *o, const struct rq_frag *f)
{
	o = rq_at(s, o, RQ_FRAG_MAX + RQ_TAIL);
	memcpy(o, f->json, 64); /* fixed sizes: no call */
	if (f->len > 64)
		memcpy(o + 64, f->json + 64, RQ_FRAG_MAX - 64);
	return o + f->len;
}

/* Keeps the bytes [from, o) as f's, unless the buffer went out between
 * (flushes moved on) or they are too many. */
static void rq_frag_keep(struct out_json_stream *s, struct rq_frag *f, const uint64_t *key,
			 uint64_t flushes, const char *from, const char *o)
{
	if (s->flushes != flushes || (size_t)(o - from) > RQ_FRAG_MAX)
		return;
	memcpy(f->key, key, sizeof(f->key));
	f->len = (uint32_t)(o - from);
	memcpy(f->json, from, f->len);
}

/* ,"category":…,"frames":[…] */
static char *rq_seg_frames(struct out_json_stream *s, char *o, const struct cp_segment *g)
{
	bool keep = s->interned && g->nframes < RQ_FRAG_KEY;
	uint64_t key[RQ_FRAG_KEY] = {1 | (uint64_t)g->category << 8 | (uint64_t)g->nframes << 40};
	struct rq_frag *f = NULL;
	uint64_t flushes = s->flushes;
	char *from;

	if (keep) {
		for (uint32_t i = 0; i < g->nframes; i++)
			key[1 + i] = (uintptr_t)g->frames[i];
		f = rq_frag_find(s, key);
		if (rq_frag_is(f, key))
			return rq_frag_put(s, o, f);
	}
	o = rq_at(s, o, RQ_SEG_FIXED);
	from = o;
	o = rq_kstr_at(s, o, RQ_CK("category"), cp_category_name(g->category), true);
	o = rq_lit(o, ",\"frames\":[");
	for (uint32_t i = 0; i < g->nframes; i++) {
		o = rq_at(s, o, 1 + RQ_KEPT_MAX + RQ_TAIL);
		if (i)
			*o++ = ',';
		o = rq_str_kept(s, o, g->frames[i] ? g->frames[i] : "?", s->interned);
	}
	*o++ = ']';
	if (keep)
		rq_frag_keep(s, f, key, flushes, from, o);
	return o;
}

static char *rq_who(struct out_json_stream *s, char *o, int32_t pid, int32_t tid, const char *comm,
		    bool first)
{
	bool keep = s->interned || !comm;
	uint64_t key[RQ_FRAG_KEY] = {2 + first, (uint32_t)pid | (uint64_t)(uint32_t)tid << 32,
				     (uintptr_t)comm};
	struct rq_frag *f = NULL;
	uint64_t flushes = s->flushes;
	char *from;

	if (keep) {
		f = rq_frag_find(s, key);
		if (rq_frag_is(f, key))
			return rq_frag_put(s, o, f);
	}
	o = rq_at(s, o, RQ_SEG_FIXED);
	from = o;
	if (!first) {
		o = rq_ki32_at(o, RQ_CK("pid"), pid);
		o = rq_ki32_at(o, RQ_CK("tid"), tid);
		if (comm)
			o = rq_kstr_at(s, o, RQ_CK("comm"), comm, s->interned);
	} else {
		/* "pid" first: no comma before it (rq_sep's rule: none after '{') */
		if (pid >= 0) {
			o = rq_lit(o, "\"pid\":");
			o = rq_u64_at(o, (uint64_t)pid);
			o = rq_ki32_at(o, RQ_CK("tid"), tid);
		} else if (tid >= 0) {
			o = rq_lit(o, "\"tid\":");
			o = rq_u64_at(o, (uint64_t)tid);
		}
		if (comm) {
			bool sep = o != from; /* before rq_at: a flush moves o */

			o = rq_at(s, o, 1 + sizeof("\"comm\":") + RQ_KEPT_MAX + RQ_TAIL);
			if (sep)
				*o++ = ',';
			o = rq_lit(o, "\"comm\":");
			o = rq_str_kept(s, o, comm, s->interned);
		}
	}
	if (keep)
		rq_frag_keep(s, f, key, flushes, from, o);
	return o;
}

static char *rq_segment(struct out_json_stream *s, char *o, const struct cp_segment *g)
{
	o = rq_at(s, o, RQ_SEG_FIXED);
	o = rq_lit(o, "{\"start_ns\":");
	o = rq_time_at(s, o, g->start_ns);
	o = rq_lit(o, ",\"end_ns\":");
	o = rq_time_at(s, o, g->end_ns);
	o = rq_seg_frames(s, o, g);
	if (g->interference)
		o = rq_lit(o, ",\"interference\":true");
	else
		o = rq_lit(o, ",\"interference\":false");
	o = rq_who(s, o, g->pid, g->tid, g->comm, false);
	o = rq_at(s, o, RQ_SEG_FIXED);
	o = rq_ki32_at(o, RQ_CK("cpu"), g->cpu);
	if (g->cpu_model)
		o = rq_kstr_at(s, o, RQ_CK("cpu_model"), g->cpu_model, s->interned);
	if (g->sku)
		o = rq_kstr_at(s, o, RQ_CK("sku"), g->sku, s->interned);
	if (g->peer)
		o = rq_kstr_at(s, o, RQ_CK("peer"), g->peer, false);
	if (g->host)
		o = rq_kstr_at(s, o, RQ_CK("host"), g->host, s->interned);
	if (g->span_id || g->service || g->operation) {
		s->n = (size_t)(o - s->buf);
		rq_kstr(s, RQ_K("span_id"), g->span_id);
		rq_kstr(s, RQ_K("service"), g->service);
		rq_kstr(s, RQ_K("operation"), g->operation);
		o = s->buf + s->n;
	}
	o = rq_at(s, o, RQ_SEG_FIXED);
	if (g->nculprits)
		o = rq_lit(o, ",\"culprits\":[");
	for (uint32_t i = 0; i < g->nculprits; i++) {
		const struct cp_culprit *c = &g->culprits[i];

		o = rq_at(s, o, RQ_SEG_FIXED);
		if (i)
			*o++ = ',';
		*o++ = '{';
		o = rq_who(s, o, c->pid, c->tid, c->comm, true);
		o = rq_at(s, o, RQ_SEG_FIXED);
		if (rq_last(s, o) != '{')
			*o++ = ',';
		o = rq_lit(o, "\"ns\":");
		o = rq_u64_at(o, c->ns);
		*o++ = '}';
	}
	if (g->nculprits)
		*o++ = ']';
	*o++ = '}';
	return o;
}

static void rq_request(struct out_json_stream *s, const struct cp_request *q)
{
	char *o;

	rq_sep(s);
	rq_c(s, '{');
	rq_kstr(s, RQ_K("id"), q->id);
	s->interned = q->interned;
	o = s->buf + s->n;
	if (q->service) {
		o = rq_at(s, o, 1 + sizeof("\"service\":") + RQ_KEPT_MAX + RQ_TAIL);
		if (rq_last(s, o) != '{')
			*o++ = ',';
		o = rq_lit(o, "\"service\":");
		o = rq_str_kept(s, o, q->service, s->interned);
	}
	if (q->name) {
		o = rq_at(s, o, 1 + sizeof("\"name\":") + RQ_KEPT_MAX + RQ_TAIL);
		if (rq_last(s, o) != '{')
			*o++ = ',';
		o = rq_lit(o, "\"name\":");
		o = rq_str_kept(s, o, q->name, s->interned);
	}
	if (q->target) {
		char t[1024];

		proto__target_redacted(q->target, t, sizeof(t));
		s->n = (size_t)(o - s->buf);
		rq_kstr(s, RQ_K("target"), t);
		o = s->buf + s->n;
	}
	if (q->host) {
		o = rq_at(s, o, 1 + sizeof("\"host\":") + RQ_KEPT_MAX + RQ_TAIL);
		if (rq_last(s, o) != '{')
			*o++ = ',';
		o = rq_lit(o, "\"host\":");
		o = rq_str_kept(s, o, q->host, s->interned);
	}
	o = rq_at(s, o, RQ_SEG_FIXED);
	if (rq_last(s, o) != '{')
		*o++ = ',';
	o = rq_lit(o, "\"start_ns\":");
	o = rq_time_at(s, o, q->start_ns);
	o = rq_lit(o, ",\"end_ns\":");
	o = rq_time_at(s, o, q->end_ns);
	o = rq_lit(o, ",\"latency_ns\":");
	o = rq_u64_at(o, q->end_ns - q->start_ns);
	if (q->downstream) {
		o = rq_at(s, o, sizeof(",\"downstream\":true") + RQ_SEG_FIXED);
		o = rq_lit(o, ",\"downstream\":true");
	}
	if (q->partial)
		o = rq_lit(o, ",\"partial\":true,\"critical_path\":[");
	else
		o = rq_lit(o, ",\"partial\":false,\"critical_path\":[");
	for (uint32_t i = 0; i < q->nsegs; i++) {
		if (i) {
			o = rq_at(s, o, 1);
			*o++ = ',';
		}
		o = rq_segment(s, o, &q->segs[i]);
	}
	o = rq_at(s, o, 1);
	*o++ = ']';
	s->n = (size_t)(o - s->buf);
	if (q->nspans) {
		rq_key(s, "spans");
		rq_c(s, '[');
		for (uint32_t i = 0; i < q->nspans; i++) {
			const struct cp_span_stat *sp = &q->spans[i];

			if (i)
				rq_c(s, ',');
			rq_c(s, '{');
			rq_kstr(s, RQ_K("span_id"), sp->span_id);
			rq_kstr(s, RQ_K("service"), sp->service);
			rq_kstr(s, RQ_K("operation"), sp->operation);
			rq_frames(s, sp->frames, sp->nframes, false);
			rq_key(s, "inclusive_ns");
			rq_u64(s, sp->inclusive_ns);
			rq_key(s, "exclusive_ns");
			rq_u64(s, sp->exclusive_ns);
			rq_c(s, '}');
		}
		rq_c(s, ']');
	}
	rq_c(s, '}');
}

void out_json__request(void *s, const struct cp_request *req)
{
	rq_request(s, req);
}
