// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * What Jaeger and OTLP values mean: span_json.h's handlers. span/scan.c
 * cuts the input into units (one Jaeger trace, or the resourceSpans of one
 * OTLP request), span/raw.c or span/json.cpp walks each to the values that matter and
 * hands them here; they become struct span_in records whose strings live in
 * a per-trace arena, and a trace is analysed (span_tree__analyze) as soon as
 * its last byte is read. Then the arena is reset.
 *
 * Memory bound: Jaeger, the largest trace (one element of "data"). OTLP has
 * no per-trace container: a trace's spans come in many export requests
 * (one per exporter batch, a line each in the collector's JSON Lines
 * files), from several processes, over several files, and its root may
 * never come at all. The spans of a request stay in a batch (its arena,
 * spans and tags), each trace remembers its runs of spans in batches, and
 * a trace is analysed once no span of it came for the window (bytes of
 * input, or time of its spans' ends: --trace-window) or at the end of the
 * input; a batch is freed when its last trace is. Memory: the window's
 * traces. A trace that gets spans after it was analysed is warned and
 * analysed again as its next part ("TRACE (part 2)"), never merged
 * silently.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "span_internal.h"
#include "span_json.h"

#include "parser_int.h"
#include "util.h"

static struct span_in *cur_span(struct span_parser *p)
{
	return &((struct span_in *)p->spans.v)[p->spans.n - 1];
}

static struct proc *cur_proc(struct span_parser *p)
{
	return &((struct proc *)p->procs.v)[p->procs.n - 1];
}

#define KEYIS(lit) (len == sizeof(lit) - 1 && !memcmp(s, lit, sizeof(lit) - 1))

/* s[0, 8) when they are all digits: their value, combined pairwise (a
 * timestamp has 16 to 19 of them). */
static inline bool eight_digits(const char *s, uint64_t *out)
{
	uint64_t x;

	memcpy(&x, s, 8);
	if ((x & 0xf0f0f0f0f0f0f0f0ull) != 0x3030303030303030ull ||
	    ((x + 0x0606060606060606ull) & 0xf0f0f0f0f0f0f0f0ull) != 0x3030303030303030ull)
		return false;
	if (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
		x = __builtin_bswap64(x);
	x = ((x & 0x0f0f0f0f0f0f0f0full) * 2561) >> 8;
	x = ((x & 0x00ff00ff00ff00ffull) * 6553601) >> 16;
	*out = ((x & 0x0000ffff0000ffffull) * 42949672960001ull) >> 32;
	return true;
}

/* Integers exactly (ns since 1970 do not fit a double's mantissa), anything
 * else through strtod. 0 or -EINVAL. */
static int parse_num(const char *s, size_t len, double scale, int64_t *out)
{
	char buf[64];
	char *end;
	bool neg = false;
	size_t i = 0;
	uint64_t v = 0;
	double d;

	if (len && s[0] == '-') {
		neg = true;
		i = 1;
	}
	/* up to 19 digits fit an int64 unless they pass INT64_MAX */
	if (i < len && len - i <= 19) {
		for (uint64_t d8; len - i >= 8 && eight_digits(s + i, &d8); i += 8)
			v = v * 100000000 + d8;
		for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
			v = v * 10 + (uint64_t)(s[i] - '0');
		if (i == len && v <= (uint64_t)INT64_MAX / (uint64_t)scale) {
			*out = (int64_t)(v * (uint64_t)scale) * (neg ? -1 : 1);
			return 0;
		}
	}
	if (!len || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = 0;
	d = strtod(buf, &end);
	if (*end)
		return -EINVAL;
	d *= scale;
	if (!(d > -9.2e18 && d < 9.2e18)) /* past int64 (or NaN): no conversion defined */
		return -EINVAL;
	*out = (int64_t)d;
	return 0;
}

static const char *pdup(struct span_parser *p, const char *s, size_t len)
{
	const char *d = span_arena__strndup(&p->arena, s, len);

	if (!d)
		p->err = -ENOMEM;
	return d;
}

static int kind_of(const char *s, size_t len)
{
	/* Jaeger's span.kind tag values, OTLP's enum names */
	/* and Zipkin's */
	if (KEYIS("server") || KEYIS("SPAN_KIND_SERVER") || KEYIS("SERVER"))
		return SPAN_KIND_SERVER;
	if (KEYIS("client") || KEYIS("SPAN_KIND_CLIENT") || KEYIS("CLIENT"))
		return SPAN_KIND_CLIENT;
	if (KEYIS("producer") || KEYIS("SPAN_KIND_PRODUCER") || KEYIS("PRODUCER"))
		return SPAN_KIND_PRODUCER;
	if (KEYIS("consumer") || KEYIS("SPAN_KIND_CONSUMER") || KEYIS("CONSUMER"))
		return SPAN_KIND_CONSUMER;
	if (KEYIS("internal") || KEYIS("SPAN_KIND_INTERNAL"))
		return SPAN_KIND_INTERNAL;
	return SPAN_KIND_UNSET;
}

/* ---- span_json.h's handlers -------------------------------------------------- */

int span_json__trace_id(void *ctx, const char *s, size_t len)
{
	struct span_parser *p = ctx;

	p->trace_id = pdup(p, s, len);
	return p->err;
}

int span_json__span_begin(void *ctx)
{
	struct span_parser *p = ctx;
	struct span_in *s = span_vec__push(&p->spans, sizeof(*s));

	if (!s)
		return p->err = -ENOMEM;
	*s = (struct span_in){.tag_first = p->tags.n, .seq = p->spans.n - 1};
	p->f->nread++;
	s->resource = p->procs.n ? p->procs.n - 1 : 0;
	p->has_dur = false;
	p->dur = 0;
	p->ref_kind = 0;
	return 0;
}

int span_json__field(void *ctx, enum span_json_field f, const char *s, size_t len, bool is_string)
{
	struct span_parser *p = ctx;
	struct span_in *sp = cur_span(p);
	int64_t v;

	switch (f) {
	case SPAN_JSON_TRACE_ID:
		if (p->otlp)
			sp->trace_id = pdup(p, s, len);
		else if (!p->trace_id) /* Jaeger: the trace's, when it has none of its own */
			p->trace_id = pdup(p, s, len);
		break;
	case SPAN_JSON_SPAN_ID:
		sp->id = pdup(p, s, len);
		break;
	case SPAN_JSON_PARENT_ID:
		if (!p->ref_kind) /* Jaeger: references win */
			sp->parent_id = pdup(p, s, len);
		break;
	case SPAN_JSON_OPERATION:
		sp->operation = pdup(p, s, len);
		break;
	case SPAN_JSON_PROCESS_ID:
		sp->proc = pdup(p, s, len);
		break;
	case SPAN_JSON_KIND:
		if (is_string)
			sp->kind = kind_of(s, len);
		else if (len == 1 && s[0] >= '0' && s[0] <= '5')
			sp->kind = s[0] - '0'; /* OTLP's enum numbers match ours */
		break;
	case SPAN_JSON_SERVICE:
		sp->service = pdup(p, s, len);
		break;
	case SPAN_JSON_HOST:
		sp->hostname = pdup(p, s, len);
		break;
	case SPAN_JSON_SHARED:
		sp->shared = len == 4 && !memcmp(s, "true", 4);
		break;
	case SPAN_JSON_START:
		/* a time before 1970 is none (and would wrap as an unsigned time) */
		if (parse_num(s, len, p->otlp && !p->zipkin ? 1 : 1000, &sp->start_ns) ||
		    sp->start_ns < 0)
			sp->bad_number = true;
		sp->has_start = true;
		break;
	case SPAN_JSON_END:
		if (parse_num(s, len, 1, &sp->end_ns) || sp->end_ns < 0)
			sp->bad_number = true;
		sp->has_end = true;
		break;
	case SPAN_JSON_DURATION:
		if (parse_num(s, len, 1000, &v))
			sp->bad_number = true;
		p->dur = v;
		p->has_dur = true;
		break;
	}
	return p->err;
}

int span_json__ref(void *ctx, const char *type, size_t tlen, const char *span_id, size_t ilen)
{
	struct span_parser *p = ctx;
	const char *s = type;
	size_t len = tlen;
	int kind = !s ? 0 : KEYIS("CHILD_OF") ? 2 : KEYIS("FOLLOWS_FROM") ? 1 : 0;

	/* CHILD_OF beats FOLLOWS_FROM; the first of a kind wins */
	if (kind > p->ref_kind && span_id) {
		struct span_in *sp = cur_span(p);

		sp->parent_id = pdup(p, span_id, ilen);
		sp->follows = kind == 1;
		p->ref_kind = kind;
	}
	return p->err;
}

int span_json__span_end(void *ctx)
{
	struct span_parser *p = ctx;
	struct span_in *s = cur_span(p);

	if (p->has_dur) {
		if (__builtin_add_overflow(s->start_ns, p->dur, &s->end_ns))
			s->bad_number = true;
		s->has_end = true;
	}
	s->ntags = p->tags.n - s->tag_first;
	if (p->zipkin) {
		/* its clock: its address, else its service's */
		s->host = s->hostname ? s->hostname : s->service;
		if (s->shared && s->kind == SPAN_KIND_SERVER && s->id) {
			/* B3's shared span: the server side has its client's id
			 * (and parent); it is the client's child */
			size_t n = strlen(s->id);
			char *id = span_arena__alloc(&p->arena, n + 8);

			if (!id)
				return p->err = -ENOMEM;
			memcpy(id, s->id, n);
			memcpy(id + n, ":server", 8);
			s->parent_id = s->id;
			s->id = id;
		}
	}
	return 0;
}

bool span_json__span_tags_ignored(void *ctx)
{
	return ((struct span_parser *)ctx)->f->sink->ignores_tags;
}

int span_json__tag(void *ctx, enum span_json_tags where, const char *k, size_t klen, const char *v,
		   size_t vlen)
{
	struct span_parser *p = ctx;
	const char **slot;
	const char *s = k;
	size_t len;
	char *kv;

	if (!klen)
		return 0;
	/* filters match on short values; keep them bounded */
	if (klen >= TAG_KEY_MAX)
		klen = TAG_KEY_MAX - 1;
	if (vlen >= TAG_VAL_MAX)
		vlen = TAG_VAL_MAX - 1;
	len = klen;
	/* tags nobody filters on: only what they say about the span or process */
	if (p->f->sink->ignores_tags) {
		if (where == SPAN_JSON_SPAN_TAG) {
			if (!p->otlp && KEYIS("span.kind"))
				cur_span(p)->kind = kind_of(v, vlen);
			return 0;
		}
		if (!KEYIS("hostname") && !KEYIS("host.name") &&
		    !(p->otlp && KEYIS("service.name")))
			return 0;
	}
	kv = span_arena__alloc(&p->arena, klen + vlen + 2);
	slot = span_vec__push(&p->tags, sizeof(*slot));
	if (!kv || !slot)
		return p->err = -ENOMEM;
	memcpy(kv, k, klen);
	kv[klen] = '=';
	memcpy(kv + klen + 1, v, vlen);
	kv[klen + 1 + vlen] = 0;
	*slot = kv;
	if (where == SPAN_JSON_SPAN_TAG) {
		if (!p->otlp && KEYIS("span.kind"))
			cur_span(p)->kind = kind_of(v, vlen);
	} else {
		struct proc *pr = cur_proc(p);

		if (!pr->nptags++)
			pr->ptag_first = p->tags.n - 1;
		if (KEYIS("hostname") || KEYIS("host.name"))
			pr->hostname = kv + klen + 1;
		else if (p->otlp && KEYIS("service.name"))
			pr->service = kv + klen + 1;
	}
	return 0;
}

void span_json__rollback(void *ctx)
{
	struct span_parser *p = ctx;

	/* what it wrote to the arena stays until the trace's reset */
	p->spans.n = p->mark_spans;
	p->tags.n = p->mark_tags;
	p->procs.n = p->mark_procs;
	p->f->nread = p->mark_nread;
	p->trace_id = p->mark_trace_id;
}

int span_json__proc_begin(void *ctx, const char *id, size_t len)
{
	struct span_parser *p = ctx;
	struct proc *pr = span_vec__push(&p->procs, sizeof(*pr));

	if (!pr)
		return p->err = -ENOMEM;
	*pr = (struct proc){.id = id ? pdup(p, id, len) : NULL};
	return p->err;
}

int span_json__proc_service(void *ctx, const char *s, size_t len)
{
	struct span_parser *p = ctx;

	cur_proc(p)->service = pdup(p, s, len);
	return p->err;
}

static void reset_trace(struct span_parser *p)
{
	span_arena__reset(&p->arena);
	p->spans.n = 0;
	p->tags.n = 0;
	p->procs.n = 0;
	p->trace_id = NULL;
}

static const char UNKNOWN_SERVICE[] = "(unknown service)";
static const char UNNAMED_OP[] = "(unnamed)";

static void fill_defaults(struct span_in *s)
{
	if (!s->service)
		s->service = UNKNOWN_SERVICE;
	if (!s->operation)
		s->operation = UNNAMED_OP;
}


/* Jaeger: a trace is complete; resolve processes (through a hash table: a
 * trace can have hundreds) and analyse it. */
static int end_jaeger_trace(struct span_parser *p)
{
	struct span_in *sp = p->spans.v;
	const struct proc *procs = p->procs.v, *last = NULL;
	uint32_t nslots = 16, mask, *slots;
	int err;

	while (nslots < 2 * p->procs.n)
		nslots *= 2;
	mask = nslots - 1;
	if (span_vec__reserve(&p->perm, sizeof(uint32_t), nslots))
		return -ENOMEM;
	slots = p->perm.v;
	memset(slots, 0xff, nslots * sizeof(uint32_t));
	for (uint32_t j = 0; j < p->procs.n; j++) {
		uint32_t h;

		if (!procs[j].id)
			continue;
		for (h = (uint32_t)hash__cstr(procs[j].id) & mask; slots[h] != UINT32_MAX; h = (h + 1) & mask)
			;
		slots[h] = j;
	}
	for (uint32_t i = 0; i < p->spans.n; i++) {
		struct span_in *s = &sp[i];
		uint32_t h;

		last = NULL;
		if (s->proc) {
			for (h = (uint32_t)hash__cstr(s->proc) & mask; slots[h] != UINT32_MAX;
			     h = (h + 1) & mask)
				if (!strcmp(procs[slots[h]].id, s->proc)) {
					last = &procs[slots[h]];
					break;
				}
		}
		if (last) {
			s->service = last->service;
			s->hostname = last->hostname;
			s->ptag_first = last->ptag_first;
			s->nptags = last->nptags;
		}
		/* clock domain: the host when named, else the process */
		s->host = s->hostname ? s->hostname : s->proc;
		fill_defaults(s);
	}
	err = span_tree__analyze(p->f, p->trace_id, sp, p->spans.n, p->tags.v);
	reset_trace(p);
	return err < 0 ? err : 0;
}

/* OTLP: a top-level request is complete: its spans join their traces. */
/* Already in span_pend__trace_cmp's order (a request of one trace's spans,
 * as many exporters send): no sort to make. */
static bool sorted_by_trace(const struct span_in *sp, uint32_t n)
{
	for (uint32_t k = 1; k < n; k++)
		if (sp[k].trace_id != sp[k - 1].trace_id &&
		    span_pend__trace_cmp(&sp[k - 1], &sp[k]) > 0)
			return false;
	return true;
}

static int end_otlp_request(struct span_parser *p, uint64_t off)
{
	struct span_in *sp = p->spans.v;
	struct proc *res = p->procs.v;
	uint32_t n = p->spans.n;
	char host[32];

	for (uint32_t k = 0; k < n; k++) {
		struct span_in *s = &sp[k];

		if (s->resource < p->procs.n) {
			struct proc *r = &res[s->resource];

			s->service = r->service;
			s->hostname = r->hostname;
			s->ptag_first = r->ptag_first;
			s->nptags = r->nptags;
			if (!r->hostname && !r->id) {
				snprintf(host, sizeof(host), "resource:%u", s->resource);
				r->id = pdup(p, host, strlen(host));
			}
			s->host = r->hostname ? r->hostname : r->id;
		}
		fill_defaults(s);
	}
	if (p->err)
		return p->err;
	/* by trace, then input order (the first of duplicate ids wins) */
	if (n && !sorted_by_trace(sp, n)) /* sp is NULL for a document without spans */
		qsort(sp, n, sizeof(*sp), span_pend__trace_cmp);
	if (!n) {
		reset_trace(p);
		return 0;
	}
	p->procs.n = 0;
	p->trace_id = NULL;
	return span_pend__add_runs(p, off);
}

int span_json__trace_end(void *ctx)
{
	struct span_parser *p = ctx;

	return p->err = end_jaeger_trace(p);
}

/* ---- span_internal.h's parser API (driven by span/scan.c) ------------------ */

struct span_parser *span_parser__new(struct span_file *f)
{
	struct span_parser *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->f = f;
	p->arena.chunk = BATCH_CHUNK;
	p->free_pend = p->lru_head = p->lru_tail = NONE;
	p->window_bytes = 64ull << 20;
	p->window_ns = 300ll * 1000000000;
	p->max_ts = INT64_MIN;
	p->json = span_json__new();
	if (!p->json) {
		free(p);
		return NULL;
	}
	return p;
}

void span_parser__free(struct span_parser *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->pend.n; i++) {
		struct pending *t = span_pend__at(p, i);

		if (t->used) /* a run stopped by an error */
			for (uint32_t r = 0; r < t->runs.n; r++)
				span_pend__batch_put(p, ((struct run *)t->runs.v)[r].b);
		free(t->id);
		free(t->runs.v);
	}
	span_pend__chunks_free(p);
	free(p->pend.v);
	free(p->buckets.v);
	free(p->gather.v);
	free(p->gtags.v);
	free(p->early);
	free(p->early_part);
	free(p->early_ix);
	span_json__free(p->json);
	span_arena__free(&p->arena);
	free(p->spans.v);
	free(p->tags.v);
	free(p->procs.v);
	free(p->perm.v);
	free(p);
}

void span_parser__begin_request(struct span_parser *p)
{
	reset_trace(p);
	p->request_bad = false;
}

int span_parser__end_request(struct span_parser *p, uint64_t off)
{
	if (p->request_bad) { /* warned when its unit was read */
		reset_trace(p);
		return 0;
	}
	return end_otlp_request(p, off);
}

void span_parser__set_file(struct span_parser *p, struct span_file *f)
{
	p->f = f;
}

void span_parser__window(struct span_parser *p, uint64_t bytes, int64_t ns)
{
	if (bytes)
		p->window_bytes = bytes;
	if (ns)
		p->window_ns = ns;
}

static void unit_begin(struct span_parser *p, enum span_unit kind)
{
	p->otlp = kind == SPAN_UNIT_OTLP || kind == SPAN_UNIT_ZIPKIN;
	p->zipkin = kind == SPAN_UNIT_ZIPKIN;
	p->err = 0;
	if (!p->otlp)
		reset_trace(p);
	p->mark_spans = p->spans.n;
	p->mark_tags = p->tags.n;
	p->mark_procs = p->procs.n;
	p->mark_nread = p->f->nread;
	p->mark_trace_id = p->trace_id;
}

int span_parser__unit_raw(struct span_parser *p, enum span_unit kind, const char *buf,
			  size_t avail, size_t utf8_ok, size_t *len)
{
	int r;

	/* Jaeger after a malformed trace: what it left is still "the trace in
	 * progress" of warnings, so the unit goes the way that clears it */
	if (kind == SPAN_UNIT_ZIPKIN ||
	    (kind == SPAN_UNIT_JAEGER && (p->trace_id || p->spans.n || p->tags.n || p->procs.n)))
		return 1;
	unit_begin(p, kind);
	r = span_json__raw_walk(kind == SPAN_UNIT_OTLP ? SPAN_JSON_OTLP_RESOURCES
						       : SPAN_JSON_JAEGER_TRACE,
				buf, avail, p, len, utf8_ok);
	if (r == 1)
		span_json__rollback(p);
	return r;
}

int span_parser__unit(struct span_parser *p, enum span_unit kind, const char *buf, size_t len,
		      const char **msg, size_t *at)
{
	int r;

	unit_begin(p, kind);
	r = span_json__parse(p->json,
			     p->zipkin ? SPAN_JSON_ZIPKIN_SPANS
			     : p->otlp ? SPAN_JSON_OTLP_RESOURCES
					 : SPAN_JSON_JAEGER_TRACE,
			     buf, len, p, msg, at);
	if ((r == 1 || r < 0) && p->otlp)
		p->request_bad = true;
	return r;
}

const char *span_parser__trace_id(const struct span_parser *p)
{
	return p->trace_id;
}

uint32_t span_parser__nspans(const struct span_parser *p)
{
	return p->spans.n;
}
