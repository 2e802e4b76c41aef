// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Streaming parse of Jaeger query-API JSON and OTLP JSON with yajl's
 * callback parser: the file is read in chunks and never held whole; a trace
 * is analysed (span_tree__analyze) as soon as its last byte is parsed, and
 * its arena is reset.
 *
 * Detected by content: a top-level object with "data" is Jaeger (a bare
 * top-level array of trace objects is accepted as Jaeger too), one with
 * "resourceSpans" (Tempo: "batches") is OTLP. Several top-level values (JSON lines, as the
 * OpenTelemetry collector's file exporter writes) are allowed.
 *
 * Memory bound: Jaeger, the largest trace (one element of "data"). OTLP has
 * no per-trace container: spans of one trace may be spread over several
 * resourceSpans (one per service), so spans are grouped by traceId per
 * top-level object (one ExportTraceServiceRequest, i.e. one exporter batch
 * or one line of a JSON-lines file): memory is bounded by the largest such
 * request, not by the file. A trace whose spans are split over several
 * requests is analysed once per request (its pieces get orphan warnings).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>

#include "span_internal.h"

enum ctx {
	C_SKIP = 0,
	C_TOP,	  /* the top-level object */
	C_J_DATA, /* "data": [ trace, … ] */
	C_J_TRACE,
	C_J_SPANS,
	C_J_SPAN,
	C_J_REFS,
	C_J_REF,
	C_J_STAGS,
	C_J_STAG,
	C_J_PROCS,
	C_J_PROC,
	C_J_PTAGS,
	C_J_PTAG,
	C_O_RSS, /* "resourceSpans": [ … ] */
	C_O_RS,
	C_O_RES,
	C_O_RATTRS,
	C_O_RATTR,
	C_O_RVAL,
	C_O_SCOPES,
	C_O_SCOPE,
	C_O_SPANS,
	C_O_SPAN,
	C_O_SATTRS,
	C_O_SATTR,
	C_O_SVAL,
};

enum key {
	K_NONE = 0,
	K_DATA,
	K_RESOURCE_SPANS,
	K_TRACE_ID,
	K_SPANS,
	K_PROCESSES,
	K_SPAN_ID,
	K_PARENT_ID,
	K_OPERATION,
	K_REFERENCES,
	K_START,
	K_DURATION,
	K_END,
	K_TAGS,
	K_PROCESS_ID,
	K_REF_TYPE,
	K_KEY,
	K_VALUE,
	K_SERVICE_NAME,
	K_RESOURCE,
	K_SCOPE_SPANS,
	K_KIND,
	K_PROCESS_KEY, /* any key of "processes" */
};

enum { MODE_UNKNOWN = 0, MODE_JAEGER, MODE_OTLP };

#define MAX_DEPTH 32
#define TAG_KEY_MAX 128
#define TAG_VAL_MAX 256

struct proc {
	const char *id;
	const char *service;
	const char *hostname;
	uint32_t ptag_first, nptags;
};

struct parser {
	struct span_file *f;
	int mode;
	uint8_t ctx[MAX_DEPTH];
	int depth;
	uint32_t skip; /* depth inside a container we do not read */
	int key;
	int err;
	struct span_arena arena;
	struct span_vec spans; /* struct span_in */
	struct span_vec tags;  /* const char * */
	struct span_vec procs; /* struct proc: Jaeger processes / OTLP resources */
	struct span_vec perm;  /* Jaeger: process id hash table */
	const char *trace_id;
	const char *proc_id; /* Jaeger: key of the process being read */
	/* the span being read */
	int64_t dur;
	bool has_dur;
	int ref_kind; /* 0 none, 1 FOLLOWS_FROM, 2 CHILD_OF */
	/* the reference being read */
	int cur_ref_type;
	const char *cur_ref_span;
	/* the tag / attribute being read */
	char tkey[TAG_KEY_MAX], tval[TAG_VAL_MAX];
	size_t tkey_len, tval_len;
	bool has_tval;
};

static struct span_in *cur_span(struct parser *p)
{
	return &((struct span_in *)p->spans.v)[p->spans.n - 1];
}

static struct proc *cur_proc(struct parser *p)
{
	return &((struct proc *)p->procs.v)[p->procs.n - 1];
}

#define KEYIS(lit) (len == sizeof(lit) - 1 && !memcmp(s, lit, sizeof(lit) - 1))

static int key_id(int ctx, const char *s, size_t len)
{
	switch (ctx) {
	case C_TOP:
		if (KEYIS("data"))
			return K_DATA;
		/* Grafana Tempo writes OTLP's resourceSpans as "batches" */
		if (KEYIS("resourceSpans") || KEYIS("batches"))
			return K_RESOURCE_SPANS;
		break;
	case C_J_TRACE:
		if (KEYIS("traceID"))
			return K_TRACE_ID;
		if (KEYIS("spans"))
			return K_SPANS;
		if (KEYIS("processes"))
			return K_PROCESSES;
		break;
	case C_J_SPAN:
		switch (len) {
		case 6:
			if (KEYIS("spanID"))
				return K_SPAN_ID;
			break;
		case 4:
			if (KEYIS("tags"))
				return K_TAGS;
			break;
		case 7:
			if (KEYIS("traceID"))
				return K_TRACE_ID;
			break;
		case 8:
			if (KEYIS("duration"))
				return K_DURATION;
			break;
		case 9:
			if (KEYIS("startTime"))
				return K_START;
			if (KEYIS("processID"))
				return K_PROCESS_ID;
			break;
		case 10:
			if (KEYIS("references"))
				return K_REFERENCES;
			break;
		case 12:
			if (KEYIS("parentSpanID"))
				return K_PARENT_ID;
			break;
		case 13:
			if (KEYIS("operationName"))
				return K_OPERATION;
			break;
		}
		break;
	case C_J_REF:
		if (KEYIS("refType"))
			return K_REF_TYPE;
		if (KEYIS("spanID"))
			return K_SPAN_ID;
		break;
	case C_J_STAG:
	case C_J_PTAG:
	case C_O_RATTR:
	case C_O_SATTR:
		if (KEYIS("key"))
			return K_KEY;
		if (KEYIS("value"))
			return K_VALUE;
		break;
	case C_J_PROCS:
		return K_PROCESS_KEY;
	case C_J_PROC:
		if (KEYIS("serviceName"))
			return K_SERVICE_NAME;
		if (KEYIS("tags"))
			return K_TAGS;
		break;
	case C_O_RVAL:
	case C_O_SVAL:
		/* stringValue, intValue, boolValue, doubleValue: scalars only */
		if (len > 5 && !memcmp(s + len - 5, "Value", 5))
			return K_VALUE;
		break;
	case C_O_RS:
		if (KEYIS("resource"))
			return K_RESOURCE;
		if (KEYIS("scopeSpans") || KEYIS("instrumentationLibrarySpans"))
			return K_SCOPE_SPANS;
		break;
	case C_O_RES:
		if (KEYIS("attributes"))
			return K_TAGS;
		break;
	case C_O_SCOPE:
		if (KEYIS("spans"))
			return K_SPANS;
		break;
	case C_O_SPAN:
		switch (len) {
		case 4:
			if (KEYIS("name"))
				return K_OPERATION;
			if (KEYIS("kind"))
				return K_KIND;
			break;
		case 6:
			if (KEYIS("spanId"))
				return K_SPAN_ID;
			break;
		case 7:
			if (KEYIS("traceId"))
				return K_TRACE_ID;
			break;
		case 10:
			if (KEYIS("attributes"))
				return K_TAGS;
			break;
		case 12:
			if (KEYIS("parentSpanId"))
				return K_PARENT_ID;
			break;
		case 15:
			if (KEYIS("endTimeUnixNano"))
				return K_END;
			break;
		case 17:
			if (KEYIS("startTimeUnixNano"))
				return K_START;
			break;
		}
		break;
	}
	return K_NONE;
}

/* The context a container opens in, given where it is and under which key. */
static int child_ctx(struct parser *p, int ctx, int key, bool is_map)
{
	switch (ctx) {
	case C_TOP:
		if (!is_map && key == K_DATA && p->mode != MODE_OTLP) {
			p->mode = MODE_JAEGER;
			return C_J_DATA;
		}
		if (!is_map && key == K_RESOURCE_SPANS && p->mode != MODE_JAEGER) {
			p->mode = MODE_OTLP;
			return C_O_RSS;
		}
		return C_SKIP;
	case C_J_DATA:
		return is_map ? C_J_TRACE : C_SKIP;
	case C_J_TRACE:
		if (!is_map && key == K_SPANS)
			return C_J_SPANS;
		if (is_map && key == K_PROCESSES)
			return C_J_PROCS;
		return C_SKIP;
	case C_J_SPANS:
		return is_map ? C_J_SPAN : C_SKIP;
	case C_J_SPAN:
		if (!is_map && key == K_REFERENCES)
			return C_J_REFS;
		if (!is_map && key == K_TAGS)
			return C_J_STAGS;
		return C_SKIP;
	case C_J_REFS:
		return is_map ? C_J_REF : C_SKIP;
	case C_J_STAGS:
		return is_map ? C_J_STAG : C_SKIP;
	case C_J_PROCS:
		return is_map ? C_J_PROC : C_SKIP;
	case C_J_PROC:
		return !is_map && key == K_TAGS ? C_J_PTAGS : C_SKIP;
	case C_J_PTAGS:
		return is_map ? C_J_PTAG : C_SKIP;
	case C_O_RSS:
		return is_map ? C_O_RS : C_SKIP;
	case C_O_RS:
		if (is_map && key == K_RESOURCE)
			return C_O_RES;
		if (!is_map && key == K_SCOPE_SPANS)
			return C_O_SCOPES;
		return C_SKIP;
	case C_O_RES:
		return !is_map && key == K_TAGS ? C_O_RATTRS : C_SKIP;
	case C_O_RATTRS:
		return is_map ? C_O_RATTR : C_SKIP;
	case C_O_RATTR:
		return is_map && key == K_VALUE ? C_O_RVAL : C_SKIP;
	case C_O_SCOPES:
		return is_map ? C_O_SCOPE : C_SKIP;
	case C_O_SCOPE:
		return !is_map && key == K_SPANS ? C_O_SPANS : C_SKIP;
	case C_O_SPANS:
		return is_map ? C_O_SPAN : C_SKIP;
	case C_O_SPAN:
		return !is_map && key == K_TAGS ? C_O_SATTRS : C_SKIP;
	case C_O_SATTRS:
		return is_map ? C_O_SATTR : C_SKIP;
	case C_O_SATTR:
		return is_map && key == K_VALUE ? C_O_SVAL : C_SKIP;
	}
	return C_SKIP;
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
	*out = (int64_t)(d * scale);
	return 0;
}

static const char *pdup(struct parser *p, const char *s, size_t len)
{
	const char *d = span_arena__strndup(&p->arena, s, len);

	if (!d)
		p->err = -ENOMEM;
	return d;
}

static void set_tval(struct parser *p, const char *s, size_t len)
{
	if (len >= TAG_VAL_MAX)
		len = TAG_VAL_MAX - 1; /* filters match on short values; keep it bounded */
	memcpy(p->tval, s, len);
	p->tval_len = len;
	p->has_tval = true;
}

static int kind_of(const char *s, size_t len)
{
	/* Jaeger's span.kind tag values, OTLP's enum names */
	if (KEYIS("server") || KEYIS("SPAN_KIND_SERVER"))
		return SPAN_KIND_SERVER;
	if (KEYIS("client") || KEYIS("SPAN_KIND_CLIENT"))
		return SPAN_KIND_CLIENT;
	if (KEYIS("producer") || KEYIS("SPAN_KIND_PRODUCER"))
		return SPAN_KIND_PRODUCER;
	if (KEYIS("consumer") || KEYIS("SPAN_KIND_CONSUMER"))
		return SPAN_KIND_CONSUMER;
	if (KEYIS("internal") || KEYIS("SPAN_KIND_INTERNAL"))
		return SPAN_KIND_INTERNAL;
	return SPAN_KIND_UNSET;
}

/* A scalar value (string or number text) under the current key. */
static int on_scalar(struct parser *p, const char *s, size_t len, bool is_string)
{
	int ctx = p->depth ? p->ctx[p->depth - 1] : C_SKIP;
	struct span_in *sp;
	int64_t v;

	if (p->skip)
		return 1;
	switch (ctx) {
	case C_J_TRACE:
		if (p->key == K_TRACE_ID && is_string)
			p->trace_id = pdup(p, s, len);
		break;
	case C_J_SPAN:
	case C_O_SPAN:
		sp = cur_span(p);
		switch (p->key) {
		case K_TRACE_ID:
			if (ctx == C_O_SPAN)
				sp->trace_id = pdup(p, s, len);
			else if (!p->trace_id)
				p->trace_id = pdup(p, s, len);
			break;
		case K_SPAN_ID:
			sp->id = pdup(p, s, len);
			break;
		case K_PARENT_ID:
			if (!p->ref_kind) /* Jaeger: references win */
				sp->parent_id = pdup(p, s, len);
			break;
		case K_OPERATION:
			sp->operation = pdup(p, s, len);
			break;
		case K_PROCESS_ID:
			sp->proc = pdup(p, s, len);
			break;
		case K_KIND:
			if (is_string)
				sp->kind = kind_of(s, len);
			else if (len == 1 && s[0] >= '0' && s[0] <= '5')
				sp->kind = s[0] - '0'; /* OTLP's enum numbers match ours */
			break;
		case K_START:
			if (parse_num(s, len, ctx == C_J_SPAN ? 1000 : 1, &sp->start_ns))
				sp->bad_number = true;
			sp->has_start = true;
			break;
		case K_END:
			if (parse_num(s, len, 1, &sp->end_ns))
				sp->bad_number = true;
			sp->has_end = true;
			break;
		case K_DURATION:
			if (parse_num(s, len, 1000, &v))
				sp->bad_number = true;
			p->dur = v;
			p->has_dur = true;
			break;
		}
		break;
	case C_J_REF:
		if (p->key == K_REF_TYPE)
			p->cur_ref_type = KEYIS("CHILD_OF") ? 2 : KEYIS("FOLLOWS_FROM") ? 1 : 0;
		else if (p->key == K_SPAN_ID)
			p->cur_ref_span = pdup(p, s, len);
		break;
	case C_J_STAG:
	case C_J_PTAG:
	case C_O_RATTR:
	case C_O_SATTR:
		if (p->key == K_KEY) {
			if (len >= TAG_KEY_MAX)
				len = TAG_KEY_MAX - 1;
			memcpy(p->tkey, s, len);
			p->tkey_len = len;
		} else if (p->key == K_VALUE && (ctx == C_J_STAG || ctx == C_J_PTAG)) {
			set_tval(p, s, len);
		}
		break;
	case C_O_RVAL:
	case C_O_SVAL:
		if (p->key == K_VALUE)
			set_tval(p, s, len);
		break;
	case C_J_PROC:
		if (p->key == K_SERVICE_NAME)
			cur_proc(p)->service = pdup(p, s, len);
		break;
	}
	return p->err ? 0 : 1;
}

static int cb_string(void *ctx, const unsigned char *s, size_t len)
{
	return on_scalar(ctx, (const char *)s, len, true);
}

static int cb_number(void *ctx, const char *s, size_t len)
{
	return on_scalar(ctx, s, len, false);
}

static int cb_bool(void *ctx, int b)
{
	return on_scalar(ctx, b ? "true" : "false", b ? 4 : 5, false);
}

static int cb_null(void *ctx)
{
	return 1;
}

static int cb_key(void *ctx, const unsigned char *s, size_t len)
{
	struct parser *p = ctx;

	if (p->skip)
		return 1;
	p->key = key_id(p->depth ? p->ctx[p->depth - 1] : C_SKIP, (const char *)s, len);
	if (p->key == K_PROCESS_KEY)
		p->proc_id = pdup(p, (const char *)s, len);
	return p->err ? 0 : 1;
}

static void reset_trace(struct parser *p)
{
	span_arena__reset(&p->arena);
	p->spans.n = 0;
	p->tags.n = 0;
	p->procs.n = 0;
	p->trace_id = NULL;
}

static int open_container(struct parser *p, bool is_map)
{
	int ctx, parent = p->depth ? p->ctx[p->depth - 1] : -1;

	if (p->skip) {
		p->skip++;
		return 1;
	}
	if (parent < 0) { /* a top-level value */
		if (is_map) {
			ctx = C_TOP;
		} else if (p->mode != MODE_OTLP) {
			p->mode = MODE_JAEGER; /* a bare array of Jaeger traces */
			ctx = C_J_DATA;
		} else {
			ctx = C_SKIP;
		}
		if (p->mode == MODE_OTLP || ctx == C_TOP)
			reset_trace(p); /* OTLP: one request per top-level object */
	} else {
		ctx = child_ctx(p, parent, p->key, is_map);
	}
	if (ctx == C_SKIP || p->depth >= MAX_DEPTH) {
		p->skip = 1;
		return 1;
	}
	p->ctx[p->depth++] = ctx;
	p->key = K_NONE;
	switch (ctx) {
	case C_J_TRACE:
		reset_trace(p);
		break;
	case C_J_SPAN:
	case C_O_SPAN: {
		struct span_in *s = span_vec__push(&p->spans, sizeof(*s));

		if (!s) {
			p->err = -ENOMEM;
			return 0;
		}
		*s = (struct span_in){.tag_first = p->tags.n, .seq = p->spans.n - 1};
		s->resource = p->procs.n ? p->procs.n - 1 : 0;
		p->has_dur = false;
		p->dur = 0;
		p->ref_kind = 0;
		break;
	}
	case C_J_REF:
		p->cur_ref_type = 0;
		p->cur_ref_span = NULL;
		break;
	case C_J_STAG:
	case C_J_PTAG:
	case C_O_RATTR:
	case C_O_SATTR:
		p->tkey_len = 0;
		p->has_tval = false;
		break;
	case C_J_PROC:
	case C_O_RS: {
		struct proc *pr = span_vec__push(&p->procs, sizeof(*pr));

		if (!pr) {
			p->err = -ENOMEM;
			return 0;
		}
		*pr = (struct proc){.id = ctx == C_J_PROC ? p->proc_id : NULL};
		break;
	}
	case C_J_PTAGS:
	case C_O_RATTRS:
		cur_proc(p)->ptag_first = p->tags.n;
		break;
	}
	return 1;
}

static int cb_start_map(void *ctx)
{
	return open_container(ctx, true);
}

static int cb_start_array(void *ctx)
{
	return open_container(ctx, false);
}

static int end_tag(struct parser *p, int ctx)
{
	const char **slot;
	char *kv;

	if (!p->tkey_len || !p->has_tval)
		return 0;
	kv = span_arena__alloc(&p->arena, p->tkey_len + p->tval_len + 2);
	slot = span_vec__push(&p->tags, sizeof(*slot));
	if (!kv || !slot)
		return -ENOMEM;
	memcpy(kv, p->tkey, p->tkey_len);
	kv[p->tkey_len] = '=';
	memcpy(kv + p->tkey_len + 1, p->tval, p->tval_len);
	kv[p->tkey_len + 1 + p->tval_len] = 0;
	*slot = kv;
	if (ctx == C_J_STAG && p->tkey_len == 9 && !memcmp(p->tkey, "span.kind", 9)) {
		cur_span(p)->kind = kind_of(p->tval, p->tval_len);
	} else if (ctx == C_J_PTAG || ctx == C_O_RATTR) {
		const char *s = p->tkey;
		size_t len = p->tkey_len;
		struct proc *pr = cur_proc(p);

		if (KEYIS("hostname") || KEYIS("host.name"))
			pr->hostname = kv + p->tkey_len + 1;
		else if (ctx == C_O_RATTR && KEYIS("service.name"))
			pr->service = kv + p->tkey_len + 1;
	}
	return 0;
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

static uint32_t hash_id(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* Jaeger: a trace is complete; resolve processes (through a hash table: a
 * trace can have hundreds) and analyse it. */
static int end_jaeger_trace(struct parser *p)
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
		for (h = hash_id(procs[j].id) & mask; slots[h] != UINT32_MAX; h = (h + 1) & mask)
			;
		slots[h] = j;
	}
	for (uint32_t i = 0; i < p->spans.n; i++) {
		struct span_in *s = &sp[i];
		uint32_t h;

		last = NULL;
		if (s->proc) {
			for (h = hash_id(s->proc) & mask; slots[h] != UINT32_MAX;
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

static int trace_cmp(const void *a, const void *b)
{
	const struct span_in *sa = a, *sb = b;
	int c;

	if (!sa->trace_id || !sb->trace_id)
		c = !sa->trace_id - !sb->trace_id;
	else
		c = strcmp(sa->trace_id, sb->trace_id);
	if (c)
		return c;
	return sa->seq < sb->seq ? -1 : sa->seq > sb->seq;
}

static bool same_trace(const struct span_in *a, const struct span_in *b)
{
	if (!a->trace_id || !b->trace_id)
		return !a->trace_id && !b->trace_id;
	return !strcmp(a->trace_id, b->trace_id);
}

/* OTLP: a top-level request is complete; group its spans by trace. */
static int end_otlp_request(struct parser *p)
{
	struct span_in *sp = p->spans.v;
	struct proc *res = p->procs.v;
	uint32_t n = p->spans.n, i = 0;
	char host[32];
	int err = 0;

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
	qsort(sp, n, sizeof(*sp), trace_cmp);
	while (i < n && !err) {
		uint32_t j = i + 1;

		while (j < n && same_trace(&sp[i], &sp[j]))
			j++;
		err = span_tree__analyze(p->f, sp[i].trace_id, &sp[i], j - i, p->tags.v);
		if (err > 0)
			err = 0;
		i = j;
	}
	reset_trace(p);
	return err < 0 ? err : 0;
}

static int close_container(struct parser *p)
{
	int ctx, err = 0;

	if (p->skip) {
		p->skip--;
		return 1;
	}
	if (!p->depth)
		return 1;
	ctx = p->ctx[--p->depth];
	switch (ctx) {
	case C_J_SPAN: {
		struct span_in *s = cur_span(p);

		if (p->has_dur) {
			s->end_ns = s->start_ns + p->dur;
			s->has_end = true;
		}
		s->ntags = p->tags.n - s->tag_first;
		break;
	}
	case C_O_SPAN:
		cur_span(p)->ntags = p->tags.n - cur_span(p)->tag_first;
		break;
	case C_J_REF: {
		struct span_in *s = cur_span(p);

		/* CHILD_OF beats FOLLOWS_FROM; the first of a kind wins */
		if (p->cur_ref_type > p->ref_kind && p->cur_ref_span) {
			s->parent_id = p->cur_ref_span;
			s->follows = p->cur_ref_type == 1;
			p->ref_kind = p->cur_ref_type;
		}
		break;
	}
	case C_J_STAG:
	case C_J_PTAG:
	case C_O_RATTR:
	case C_O_SATTR:
		err = end_tag(p, ctx);
		break;
	case C_J_PTAGS:
	case C_O_RATTRS:
		cur_proc(p)->nptags = p->tags.n - cur_proc(p)->ptag_first;
		break;
	case C_J_TRACE:
		err = end_jaeger_trace(p);
		break;
	case C_TOP:
		if (p->mode == MODE_OTLP)
			err = end_otlp_request(p);
		break;
	}
	if (err)
		p->err = err;
	return p->err ? 0 : 1;
}

static int cb_end(void *ctx)
{
	return close_container(ctx);
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_bool,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_key,
    .yajl_end_map = cb_end,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end,
};

struct input {
	struct parser p;
	yajl_handle h;
	uint64_t base;	/* bytes before the current chunk */
	uint64_t lines; /* newlines before the current chunk */
	bool failed;
};

static int input__init(struct input *in, struct span_file *f)
{
	memset(in, 0, sizeof(*in));
	in->p.f = f;
	in->h = yajl_alloc(&callbacks, NULL, &in->p);
	if (!in->h)
		return -ENOMEM;
	yajl_config(in->h, yajl_allow_multiple_values, 1);
	/* UTF-8 checks cost a third of the parse; ids and names are compared as bytes */
	yajl_config(in->h, yajl_dont_validate_strings, 1);
	return 0;
}

static void input__free(struct input *in)
{
	if (in->h)
		yajl_free(in->h);
	span_arena__free(&in->p.arena);
	free(in->p.spans.v);
	free(in->p.tags.v);
	free(in->p.procs.v);
	free(in->p.perm.v);
}

static int count_lines(const char *buf, size_t len)
{
	int n = 0;
	const char *q = buf, *end = buf + len;

	while ((q = memchr(q, '\n', end - q))) {
		n++;
		q++;
	}
	return n;
}

/* Feeds one chunk (or the end, buf == NULL). 0, or -errno after a warning. */
static int input__feed(struct input *in, const char *buf, size_t len)
{
	struct span_file *f = in->p.f;
	yajl_status st;

	if (in->failed)
		return -EINVAL;
	st = buf ? yajl_parse(in->h, (const unsigned char *)buf, len) : yajl_complete_parse(in->h);
	if (st == yajl_status_ok) {
		if (buf) {
			in->base += len;
			in->lines += count_lines(buf, len);
		}
		return 0;
	}
	in->failed = true;
	if (st == yajl_status_client_canceled)
		return in->p.err ? in->p.err : -ECANCELED;
	{
		unsigned char *msg = yajl_get_error(in->h, 0, NULL, 0);
		size_t used = buf ? yajl_get_bytes_consumed(in->h) : 0;
		uint64_t line = in->lines + 1 + (buf ? count_lines(buf, used) : 0);
		char *nl;

		for (nl = (char *)msg; nl && *nl; nl++)
			if (*nl == '\n')
				*nl = ' ';
		/* yajl ends its message with ".\n" */
		while (msg && nl > (char *)msg && (nl[-1] == ' ' || nl[-1] == '.'))
			*--nl = 0;
		if (in->p.mode == MODE_UNKNOWN)
			span__warnf(f, "not a Jaeger or OTLP JSON file (%s at byte %llu)",
				    msg ? (char *)msg : "parse error",
				    (unsigned long long)(in->base + used));
		else
			span__warnf(
			    f,
			    "malformed JSON at line %llu, byte %llu: %s; %u traces before it "
			    "analysed, the one in progress (trace %s, %u spans read) skipped",
			    (unsigned long long)line, (unsigned long long)(in->base + used),
			    msg ? (char *)msg : "parse error", f->ntraces,
			    in->p.trace_id ? in->p.trace_id : "id not yet read", in->p.spans.n);
		if (msg)
			yajl_free_error(in->h, msg);
	}
	return -EINVAL;
}

/* After the whole input: a file that parsed but held no traces at all. */
static int input__finish(struct input *in)
{
	int err = input__feed(in, NULL, 0);

	if (err)
		return err;
	if (in->p.mode == MODE_UNKNOWN) {
		span__warnf(in->p.f, "not a Jaeger or OTLP JSON file (no \"data\" or "
				     "\"resourceSpans\" at the top level)");
		return -EINVAL;
	}
	return 0;
}

static int run(const char *name, int fd, const char *buf, size_t len, const struct span_sink *sink,
	       const struct span_opts *o)
{
	struct span_file f = {
	    .name = name,
	    .sink = sink,
	    .overlap_tolerance = o ? o->overlap_tolerance : 0.01,
	};
	struct input in;
	char *chunk = NULL;
	int err;

	/* a negative or NaN tolerance would make the walk skip children that end
	 * exactly at the cursor: the strict rule is 0 */
	if (!(f.overlap_tolerance >= 0))
		f.overlap_tolerance = 0;
	err = input__init(&in, &f);
	if (err)
		goto cleanup;
	if (buf) {
		err = input__feed(&in, buf, len);
	} else {
		const size_t csize = 256 * 1024;

		chunk = malloc(csize);
		if (!chunk) {
			err = -ENOMEM;
			goto cleanup;
		}
		for (;;) {
			ssize_t r = read(fd, chunk, csize);

			if (r < 0) {
				err = -errno;
				span__warnf(&f, "read failed after byte %llu: %s",
					    (unsigned long long)in.base, strerror(errno));
				break;
			}
			if (!r)
				break;
			err = input__feed(&in, chunk, r);
			if (err)
				break;
		}
	}
	if (!err)
		err = input__finish(&in);
cleanup:
	span__warn_summary(&f);
	free(chunk);
	input__free(&in);
	if (f.tree)
		span_tree__free(&f);
	/* a damaged file still counts for the traces read before the damage */
	if (f.ntraces)
		return (int)f.ntraces;
	return err;
}

int span_input__analyze_buffer(const char *name, const char *buf, size_t len,
			       const struct span_sink *sink, const struct span_opts *o)
{
	return run(name, -1, buf ? buf : "", len, sink, o);
}

int span_input__analyze_file(const char *path, const struct span_sink *sink,
			     const struct span_opts *o)
{
	struct span_file f = {.name = path, .sink = sink};
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		span__warnf(&f, "cannot open: %s", strerror(errno));
		return err;
	}
	err = run(path, fd, NULL, 0, sink, o);
	close(fd);
	return err;
}
