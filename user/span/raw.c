// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * span/json.cpp's walk of Jaeger and OTLP units again, over the unit's bytes
 * after simdjson's stage 1 has checked them (UTF-8, strings closed): the
 * same handlers in the same order with the same values, for input as
 * exporters write it. On-Demand spent more on each field than the field
 * is long. Anything this walk is not sure of (an escape, a nesting past
 * RAW_MAX_DEPTH, a value its grammar does not take) gives up; what it
 * handed on is undone and simdjson walks the unit, with its messages.
 * So it takes less than simdjson does, never more: containers are skipped
 * with their brackets matched, scalars skipped are checked as if read.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "span_json.h"

#define RAW_NO 1	 /* not this walk's input: simdjson's */
#define RAW_MORE 2	 /* next_in / next_key: one follows */
#define RAW_MAX_DEPTH 64 /* containers skipped inside a skipped value */

struct raw {
	const char *buf, *p, *end;
	void *ctx;
	size_t *used;	    /* not NULL: the unit ends where its bracket closes */
	size_t utf8_ok;	    /* buf[0, utf8_ok) is known to be UTF-8 */
	bool skim_tags; /* span tags matter only for "span.kind" */
};

static inline bool is_ws(char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* Reading r->end[0] is fine: the input is padded. */
static inline __attribute__((always_inline)) void ws(struct raw *r)
{
	while (__builtin_expect((unsigned char)*r->p <= ' ', 0) && r->p < r->end && is_ws(*r->p))
		r->p++;
}

static inline bool at(const struct raw *r, char c)
{
	return r->p < r->end && *r->p == c;
}

/* Where the string whose bytes start at s ends: its closing quote (true),
 * or its first backslash or control character (false); end: stop there
 * (false), NULL: stage 1 has checked that it closes. */
static inline __attribute__((always_inline)) bool raw_string(const char *s, const char *end,
							     const char **e_out)
{
	const char *e = s;

#ifdef __SSE2__
	/* 16 bytes a step: reading past the string is fine, the input is padded */
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
	const __m128i ctl = _mm_set1_epi8(0x1f);
	unsigned m;

	for (;; e += 16) {
		__m128i v;

		if (end && e >= end)
			return false;
		v = _mm_loadu_si128((const __m128i *)e);
		m = _mm_movemask_epi8(
		    _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
				 _mm_cmpeq_epi8(_mm_max_epu8(v, ctl), ctl)));
		if (m)
			break;
	}
	e += __builtin_ctz(m);
#else
	while (*e != '"' && *e != '\\' && (unsigned char)*e > 0x1f && (!end || e < end))
		e++;
#endif
	*e_out = e;
	return *e == '"' && (!end || e < end);
}

bool span_json__raw_string(const char *s, const char *end, const char **e)
{
	return raw_string(s, end, e);
}

/* A string without escapes (cursor at its quote, then after it). */
static inline __attribute__((always_inline)) int str(struct raw *r, const char **s, size_t *n)
{
	const char *b = r->p + 1, *e;

	if (r->p >= r->end || *r->p != '"' || !raw_string(b, r->end, &e))
		return RAW_NO;
	*s = b;
	*n = e - b;
	r->p = e + 1;
	return 0;
}

/* After a scalar: what the grammar lets follow it. */
static inline bool scalar_ends(const struct raw *r)
{
	return r->p < r->end &&
	       (is_ws(*r->p) || *r->p == ',' || *r->p == '}' || *r->p == ']');
}

static inline __attribute__((always_inline)) bool atom(struct raw *r, const char *word, size_t n)
{
	if ((size_t)(r->end - r->p) < n || !bytes_eq(r->p, word, n))
		return false;
	r->p += n;
	return scalar_ends(r);
}

static int skip_container(struct raw *r)
{
	char close[RAW_MAX_DEPTH];
	int depth = 0;

	for (; r->p < r->end; r->p++) {
		switch (*r->p) {
		case '"':
			for (r->p++; r->p < r->end && *r->p != '"'; r->p++) {
				if ((unsigned char)*r->p < 0x20)
					return RAW_NO; /* stage 1 would not take it */
				if (*r->p == '\\')
					r->p++;
			}
			break;
		case '\\':
			/* outside a string: stage 1 would take it as escaping
			 * what follows, and see other strings */
			return RAW_NO;
		case '{':
		case '[':
			if (depth == RAW_MAX_DEPTH)
				return RAW_NO;
			close[depth++] = *r->p == '{' ? '}' : ']';
			break;
		case '}':
		case ']':
			if (!depth || close[--depth] != *r->p)
				return RAW_NO;
			if (!depth) {
				r->p++;
				return 0;
			}
			break;
		}
	}
	return RAW_NO;
}

static inline bool digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The end of the number at s in JSON's grammar (what span_json__number_ok
 * takes), NULL when there is none. */
static const char *number_end(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (digit(*s))
		while (digit(*++s))
			;
	else
		return NULL;
	if (*s == '.') {
		if (!digit(*++s))
			return NULL;
		while (digit(*++s))
			;
	}
	if (*s == 'e' || *s == 'E') {
		if (*++s == '+' || *s == '-')
			s++;
		if (!digit(*s))
			return NULL;
		while (digit(*++s))
			;
	}
	return s;
}

/* json.cpp's text_of: a string's bytes, a number's text, "true" / "false";
 * have = false for null or a container (skipped). */
static int text_of(struct raw *r, const char **s, size_t *n, bool *have, bool *is_string)
{
	const char *b = r->p;

	*have = false;
	if (__builtin_expect(*b == '"', 1)) {
		CALL(str(r, s, n));
		*is_string = true;
		*have = true;
		return 0;
	}
	switch (*b) {
	case '-':
	case '0' ... '9':
		if (!(r->p = number_end(b)) || !scalar_ends(r))
			return RAW_NO;
		*s = b;
		*n = r->p - b;
		break;
	case 't':
		if (!atom(r, "true", 4))
			return RAW_NO;
		*s = "true";
		*n = 4;
		break;
	case 'f':
		if (!atom(r, "false", 5))
			return RAW_NO;
		*s = "false";
		*n = 5;
		break;
	case 'n':
		return atom(r, "null", 4) ? 0 : RAW_NO;
	case '{':
	case '[':
		return skip_container(r);
	default:
		return RAW_NO;
	}
	*is_string = false;
	*have = true;
	return 0;
}

/* text_of with strings, most values, read inline */
static inline __attribute__((always_inline)) int value(struct raw *r, const char **s, size_t *n,
						       bool *have, bool *is_string)
{
	if (__builtin_expect(*r->p != '"', 0))
		return text_of(r, s, n, have, is_string);
	*have = false;
	CALL(str(r, s, n));
	*is_string = true;
	*have = true;
	return 0;
}

static int skip(struct raw *r)
{
	const char *s;
	size_t n;
	bool have, is_string;

	return value(r, &s, &n, &have, &is_string);
}

/* Into a container (first: the cursor is at its opening bracket) or past
 * the comma to its next member: RAW_MORE with the cursor at the member, 0
 * after its close, or RAW_NO. White space is looked for where the expected
 * byte is not. */
static inline __attribute__((always_inline)) int next_in(struct raw *r, bool first, char close)
{
	if (first) {
		r->p++;
		ws(r);
		if (*r->p == close) {
			r->p++;
			return r->p <= r->end ? 0 : RAW_NO;
		}
	} else {
		if (*r->p != ',') {
			ws(r);
			if (r->p >= r->end)
				return RAW_NO;
			if (*r->p == close) {
				r->p++;
				return 0;
			}
			if (*r->p != ',')
				return RAW_NO;
		}
		r->p++;
		ws(r);
	}
	return r->p < r->end ? RAW_MORE : RAW_NO;
}

/* An object's next field: next_in, then the key and its ':' (the cursor at
 * the value). */
static inline __attribute__((always_inline)) int next_key(struct raw *r, bool first,
							  const char **k, size_t *n)
{
	int rc = next_in(r, first, '}');

	if (rc != RAW_MORE)
		return rc;
	CALL(str(r, k, n));
	if (*r->p != ':') {
		ws(r);
		if (*r->p != ':')
			return RAW_NO;
	}
	r->p++;
	ws(r);
	return r->p < r->end ? RAW_MORE : RAW_NO;
}

#define KEY(lit) (n == sizeof(lit) - 1 && bytes_eq(k, lit, sizeof(lit) - 1))

/* for (each field k[0, n) of the object at the cursor) body; then rc is 0
 * at its end or RAW_NO */
#define EACH_FIELD(r, k, n, rc)                                                                    \
	for (bool first_ = true; ((rc) = next_key(r, first_, &k, &n)) == RAW_MORE; first_ = false)

/* the same for the objects of an array, anything else skipped */
#define EACH_OBJECT(r, rc)                                                                         \
	for (bool first_ = true; ((rc) = next_in(r, first_, ']')) == RAW_MORE; first_ = false)     \
		if (*(r)->p != '{') {                                                              \
			if (((rc) = skip(r)))                                                      \
				return rc;                                                         \
		} else

static int field(struct raw *r, enum span_json_field f)
{
	const char *s;
	size_t n;
	bool have, is_string;

	CALL(value(r, &s, &n, &have, &is_string));
	return have ? span_json__field(r->ctx, f, s, n, is_string) : 0;
}

/* OTLP's {"stringValue": v} (any scalar "…Value", the last one counts) */
static int any_value(struct raw *r, const char **val, size_t *vn, bool *has_v)
{
	const char *k;
	size_t n;
	bool is_string;
	int rc;

	if (*r->p != '{')
		return skip(r);
	EACH_FIELD(r, k, n, rc)
	{
		if (n > 5 && bytes_eq(k + n - 5, "Value", 5))
			CALL(value(r, val, vn, has_v, &is_string));
		else
			CALL(skip(r));
	}
	return rc;
}

static int tag(struct raw *r, bool otlp, enum span_json_tags where)
{
	const char *k, *key = NULL, *val = NULL;
	size_t n, kn = 0, vn = 0;
	bool has_k = false, has_v = false, is_string;
	int rc;

	EACH_FIELD(r, k, n, rc)
	{
		if (KEY("key"))
			CALL(value(r, &key, &kn, &has_k, &is_string));
		else if (!KEY("value"))
			CALL(skip(r));
		else if (!otlp)
			CALL(value(r, &val, &vn, &has_v, &is_string));
		else
			CALL(any_value(r, &val, &vn, &has_v));
	}
	if (rc || !has_k || !has_v)
		return rc;
	return span_json__tag(r->ctx, where, key, kn, val, vn);
}

/* The bytes at p are lit's (a literal: its length is known). */
#define LIT(p, lit) bytes_eq((p), lit, sizeof(lit) - 1)

/* A scalar value at p read by value(), ending at e: a string without
 * escapes, a number, true or false (null and containers: not here). */
static inline __attribute__((always_inline)) bool compact_scalar(struct raw *r, const char *p,
								 const char **v, size_t *vn,
								 const char **e)
{
	const char *at = r->p;
	bool have = false, is_string;
	int rc;

	if (*p == '{' || *p == '[')
		return false;
	r->p = p;
	rc = value(r, v, vn, &have, &is_string);
	*e = r->p;
	r->p = at;
	return !rc && have;
}

/*
 * A tag as exporters write it, with no white space: Jaeger's
 * {"key":"K","type":"T","value":V}, OTLP's {"key":"K","value":{"xValue":V}}
 * with a scalar V. The same checks and values as tag() in one pass: 0 with
 * the cursor past it, 1 (unmoved) for anything else, which tag() reads.
 */
static int compact_tag(struct raw *r, bool otlp, const char **k, size_t *kn, const char **v,
		       size_t *vn)
{
	const char *p = r->p, *e, *x;

	if ((size_t)(r->end - p) < 64 || !LIT(p, "{\"key\":\"") || !raw_string(p + 8, r->end, &e))
		return 1;
	*k = p + 8;
	*kn = e - p - 8;
	p = e;
	if (!otlp) {
		if (r->end - p < 10 || !LIT(p, "\",\"type\":\"") || !raw_string(p + 10, r->end, &e))
			return 1;
		p = e;
	}
	if (r->end - p < 12 || !LIT(p, "\",\"value\":"))
		return 1;
	p += 10;
	if (otlp) {
		/* {"…Value": */
		if (!LIT(p, "{\"") || !raw_string(p + 2, r->end, &e) || e - p - 2 <= 5 ||
		    !LIT(e - 5, "Value\":"))
			return 1;
		x = e + 2;
		if (!compact_scalar(r, x, v, vn, &e) || *e != '}')
			return 1;
		p = e + 1;
	} else if (!compact_scalar(r, p, v, vn, &e)) {
		return 1;
	} else {
		p = e;
	}
	if (p >= r->end || *p != '}')
		return 1;
	r->p = p + 1;
	return 0;
}

static int tags(struct raw *r, bool otlp, enum span_json_tags where)
{
	bool skim = r->skim_tags && where == SPAN_JSON_SPAN_TAG;
	const char *k, *v;
	size_t kn, vn;
	int rc;

	if (*r->p != '[')
		return skip(r);
	EACH_OBJECT(r, rc)
	{
		if (compact_tag(r, otlp, &k, &kn, &v, &vn)) {
			CALL(tag(r, otlp, where));
			continue;
		}
		/* only Jaeger's "span.kind" of a span's tags is read then */
		if (!skim || (!otlp && kn == 9 && LIT(k, "span.kind")))
			CALL(span_json__tag(r->ctx, where, k, kn, v, vn));
	}
	return rc;
}

static int jaeger_ref(struct raw *r)
{
	const char *k, *type = NULL, *id = NULL;
	size_t n, tn = 0, in = 0;
	bool has_type = false, has_id = false, is_string;
	int rc;

	EACH_FIELD(r, k, n, rc)
	{
		if (KEY("refType"))
			CALL(value(r, &type, &tn, &has_type, &is_string));
		else if (KEY("spanID"))
			CALL(value(r, &id, &in, &has_id, &is_string));
		else
			CALL(skip(r));
	}
	if (rc)
		return rc;
	return span_json__ref(r->ctx, has_type ? type : NULL, tn, has_id ? id : NULL, in);
}

static int jaeger_refs(struct raw *r)
{
	int rc;

	if (*r->p != '[')
		return skip(r);
	EACH_OBJECT(r, rc)
		CALL(jaeger_ref(r));
	return rc;
}

static int jaeger_span_field(struct raw *r, const char *k, size_t n)
{
	switch (n) {
	case 4:
		if (KEY("tags"))
			return tags(r, false, SPAN_JSON_SPAN_TAG);
		break;
	case 6:
		if (KEY("spanID"))
			return field(r, SPAN_JSON_SPAN_ID);
		break;
	case 7:
		if (KEY("traceID"))
			return field(r, SPAN_JSON_TRACE_ID);
		break;
	case 8:
		if (KEY("duration"))
			return field(r, SPAN_JSON_DURATION);
		break;
	case 9:
		if (KEY("startTime"))
			return field(r, SPAN_JSON_START);
		if (KEY("processID"))
			return field(r, SPAN_JSON_PROCESS_ID);
		break;
	case 10:
		if (KEY("references"))
			return jaeger_refs(r);
		break;
	case 12:
		if (KEY("parentSpanID"))
			return field(r, SPAN_JSON_PARENT_ID);
		break;
	case 13:
		if (KEY("operationName"))
			return field(r, SPAN_JSON_OPERATION);
		break;
	}
	return skip(r);
}

/* A span object, its fields read by the format's field(): inlined with
 * it, so the call stays direct. */
static inline __attribute__((always_inline)) int
span_obj(struct raw *r, int (*field)(struct raw *r, const char *k, size_t n))
{
	const char *k;
	size_t n;
	int rc;

	CALL(span_json__span_begin(r->ctx));
	EACH_FIELD(r, k, n, rc)
		CALL(field(r, k, n));
	return rc ? rc : span_json__span_end(r->ctx);
}

static int jaeger_span(struct raw *r)
{
	return span_obj(r, jaeger_span_field);
}

static int jaeger_process(struct raw *r, const char *id, size_t idn)
{
	const char *k, *s;
	size_t n, sn;
	bool have, is_string;
	int rc;

	CALL(span_json__proc_begin(r->ctx, id, idn));
	EACH_FIELD(r, k, n, rc)
	{
		if (KEY("tags")) {
			CALL(tags(r, false, SPAN_JSON_PROC_TAG));
		} else if (!KEY("serviceName")) {
			CALL(skip(r));
		} else {
			CALL(value(r, &s, &sn, &have, &is_string));
			if (have)
				CALL(span_json__proc_service(r->ctx, s, sn));
		}
	}
	return rc;
}

static int jaeger_processes(struct raw *r)
{
	const char *k;
	size_t n;
	int rc;

	if (*r->p != '{')
		return skip(r);
	EACH_FIELD(r, k, n, rc)
		CALL(*r->p == '{' ? jaeger_process(r, k, n) : skip(r));
	return rc;
}

static int jaeger_spans(struct raw *r)
{
	int rc;

	if (*r->p != '[')
		return skip(r);
	EACH_OBJECT(r, rc)
		CALL(jaeger_span(r));
	return rc;
}

/* The unit's end: white space only; or, when it was not known, here
 * (then its bytes are checked as UTF-8: they had not been). */
static int unit_end(struct raw *r)
{
	if (r->used) {
		*r->used = r->p - r->buf;
		return *r->used <= r->utf8_ok || span_json__utf8_ok(r->buf, *r->used) ? 0 : RAW_NO;
	}
	ws(r);
	return r->p == r->end ? 0 : RAW_NO;
}

static int jaeger_trace(struct raw *r)
{
	const char *k, *s;
	size_t n, sn;
	bool have, is_string;
	int rc;

	ws(r);
	if (!at(r, '{'))
		return RAW_NO;
	EACH_FIELD(r, k, n, rc)
	{
		if (KEY("spans")) {
			CALL(jaeger_spans(r));
		} else if (KEY("processes")) {
			CALL(jaeger_processes(r));
		} else if (!KEY("traceID")) {
			CALL(skip(r));
		} else {
			CALL(value(r, &s, &sn, &have, &is_string));
			if (have && is_string)
				CALL(span_json__trace_id(r->ctx, s, sn));
		}
	}
	/* the trace goes to the sink at its end: nothing may give up after it */
	CALL(rc);
	CALL(unit_end(r));
	return span_json__trace_end(r->ctx);
}

static int otlp_span_field(struct raw *r, const char *k, size_t n)
{
	switch (n) {
	case 4:
		if (KEY("name"))
			return field(r, SPAN_JSON_OPERATION);
		if (KEY("kind"))
			return field(r, SPAN_JSON_KIND);
		break;
	case 6:
		if (KEY("spanId"))
			return field(r, SPAN_JSON_SPAN_ID);
		break;
	case 7:
		if (KEY("traceId"))
			return field(r, SPAN_JSON_TRACE_ID);
		break;
	case 10:
		if (KEY("attributes"))
			return tags(r, true, SPAN_JSON_SPAN_TAG);
		break;
	case 12:
		if (KEY("parentSpanId"))
			return field(r, SPAN_JSON_PARENT_ID);
		break;
	case 15:
		if (KEY("endTimeUnixNano"))
			return field(r, SPAN_JSON_END);
		break;
	case 17:
		if (KEY("startTimeUnixNano"))
			return field(r, SPAN_JSON_START);
		break;
	}
	return skip(r);
}

static int otlp_span(struct raw *r)
{
	return span_obj(r, otlp_span_field);
}

static int otlp_scope(struct raw *r)
{
	const char *k;
	size_t n;
	int rc, rc2;

	EACH_FIELD(r, k, n, rc)
	{
		if (!KEY("spans") || *r->p != '[') {
			CALL(skip(r));
			continue;
		}
		EACH_OBJECT(r, rc2)
			CALL(otlp_span(r));
		CALL(rc2);
	}
	return rc;
}

static int otlp_resource(struct raw *r)
{
	const char *k, *rk;
	size_t n, rn;
	int rc, rc2;

	CALL(span_json__proc_begin(r->ctx, NULL, 0));
	EACH_FIELD(r, k, n, rc)
	{
		if (KEY("resource") && *r->p == '{') {
			EACH_FIELD(r, rk, rn, rc2)
				CALL(rn == 10 && bytes_eq(rk, "attributes", 10)
					 ? tags(r, true, SPAN_JSON_PROC_TAG)
					 : skip(r));
			CALL(rc2);
		} else if ((KEY("scopeSpans") || KEY("instrumentationLibrarySpans")) &&
			   *r->p == '[') {
			EACH_OBJECT(r, rc2)
				CALL(otlp_scope(r));
			CALL(rc2);
		} else {
			CALL(skip(r));
		}
	}
	return rc;
}

static int otlp_resources(struct raw *r)
{
	int rc;

	ws(r);
	if (!at(r, '['))
		return RAW_NO;
	EACH_OBJECT(r, rc)
		CALL(otlp_resource(r));
	CALL(rc);
	return unit_end(r);
}

int span_json__raw_walk(enum span_json_unit unit, const char *buf, size_t len, void *ctx,
			size_t *used, size_t utf8_ok)
{
	struct raw r = {buf, buf, buf + len, ctx, used, utf8_ok, span_json__span_tags_ignored(ctx)};

	if (unit == SPAN_JSON_JAEGER_TRACE)
		return jaeger_trace(&r);
	if (unit == SPAN_JSON_OTLP_RESOURCES)
		return otlp_resources(&r);
	return RAW_NO;
}
