/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * The JSON side of span input: simdjson's On-Demand API (Debian's
 * libsimdjson-dev; README says why) behind a C interface. The one C++ file,
 * span/json.cpp, knows where things are in Jaeger and OTLP JSON and walks one
 * unit (span/scan.c cuts the input into units: a Jaeger trace object, the
 * "resourceSpans" array of one OTLP request, or a Zipkin v2 list of spans) straight to the values that
 * matter, handing each to span/parse.c, which knows what they mean. Values
 * under other keys are skipped by simdjson without being looked at.
 *
 * (A generic SAX-like walk with every key and container going through C
 * handlers cost as much again as simdjson itself: measured, README.)
 */
#ifndef CRITPATH_SPAN_JSON_H
#define CRITPATH_SPAN_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* a[0, n) == b[0, n) for a constant n: a word or two compared, not a call
 * to memcmp (which gcc makes past 8 bytes). Reading up to 8 bytes before
 * a + n is fine: n bytes are there. */
static inline __attribute__((always_inline)) bool bytes_eq(const char *a, const char *b, size_t n)
{
	uint64_t x[3], y[3];

	if (n >= 8 && n <= 24) {
		memcpy(&x[0], a, 8);
		memcpy(&y[0], b, 8);
		memcpy(&x[1], a + n - 8, 8);
		memcpy(&y[1], b + n - 8, 8);
		if (n <= 16)
			return x[0] == y[0] && x[1] == y[1];
		memcpy(&x[2], a + 8, 8);
		memcpy(&y[2], b + 8, 8);
		return x[0] == y[0] && x[1] == y[1] && x[2] == y[2];
	}
	if (n >= 4 && n < 8) {
		uint32_t u[2], v[2];

		memcpy(&u[0], a, 4);
		memcpy(&v[0], b, 4);
		memcpy(&u[1], a + n - 4, 4);
		memcpy(&v[1], b + n - 4, 4);
		return u[0] == v[0] && u[1] == v[1];
	}
	if (n >= 2 && n < 4) {
		uint16_t u[2], v[2];

		memcpy(&u[0], a, 2);
		memcpy(&v[0], b, 2);
		memcpy(&u[1], a + n - 2, 2);
		memcpy(&v[1], b + n - 2, 2);
		return u[0] == v[0] && u[1] == v[1];
	}
	return !memcmp(a, b, n);
}

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes after the end of the input that simdjson may read (not use). */
#define SPAN_JSON_PADDING 64

/* The walks' handlers: a non-zero return stops the walk with it */
#define CALL(x)                                                                                    \
	do {                                                                                       \
		int rc_ = (x);                                                                     \
		if (rc_)                                                                           \
			return rc_;                                                                \
	} while (0)

/* A span's scalar fields. Values come as text: a string's (unescaped)
 * bytes, a number's text as written (checked against JSON's grammar), or
 * "true" / "false"; null is not handed on. */
enum span_json_field {
	SPAN_JSON_TRACE_ID,   /* Jaeger "traceID", OTLP "traceId" */
	SPAN_JSON_SPAN_ID,    /* "spanID" / "spanId" */
	SPAN_JSON_PARENT_ID,  /* "parentSpanID" / "parentSpanId" */
	SPAN_JSON_OPERATION,  /* "operationName" / "name" */
	SPAN_JSON_PROCESS_ID, /* Jaeger "processID" */
	SPAN_JSON_KIND,	      /* OTLP "kind" */
	SPAN_JSON_START,      /* Jaeger "startTime" (µs), OTLP "startTimeUnixNano",
			       * Zipkin "timestamp" (µs) */
	SPAN_JSON_END,	      /* OTLP "endTimeUnixNano" */
	SPAN_JSON_DURATION,   /* Jaeger "duration" (µs), Zipkin "duration" (µs) */
	SPAN_JSON_SERVICE,    /* Zipkin "localEndpoint": {"serviceName"} */
	SPAN_JSON_HOST,	      /* Zipkin "localEndpoint": {"ipv4"} or {"ipv6"} */
	SPAN_JSON_SHARED,     /* Zipkin "shared": true */
};

enum span_json_tags {
	SPAN_JSON_SPAN_TAG, /* Jaeger span "tags", OTLP span "attributes" */
	SPAN_JSON_PROC_TAG, /* Jaeger process "tags", OTLP resource "attributes" */
};

/* Handlers (span/parse.c); ctx is span_json__parse's. Each returns 0, or
 * < 0 to stop (the sink asked to, or memory ran out). */
/* Jaeger: the trace object's own "traceID" (a string). */
int span_json__trace_id(void *ctx, const char *s, size_t len);
/* A span object begins, has a field, ends. */
int span_json__span_begin(void *ctx);
int span_json__field(void *ctx, enum span_json_field f, const char *s, size_t len, bool is_string);
/* Jaeger: one of the span's "references" (either part may be NULL). */
int span_json__ref(void *ctx, const char *type, size_t tlen, const char *span_id, size_t ilen);
int span_json__span_end(void *ctx);
/* A key=value tag (OTLP: an attribute with a scalar "…Value"). */
/* True when span tags matter only for Jaeger's "span.kind" (no --tag): the
 * others may be skipped unread. */
bool span_json__span_tags_ignored(void *ctx);
int span_json__tag(void *ctx, enum span_json_tags where, const char *k, size_t klen, const char *v,
		   size_t vlen);
/* Jaeger: an entry of "processes" (id: its key), OTLP: a resourceSpans
 * element (id NULL); its tags follow. */
int span_json__proc_begin(void *ctx, const char *id, size_t len);
int span_json__proc_service(void *ctx, const char *s, size_t len); /* Jaeger serviceName */
/* Jaeger: the trace object ends. */
int span_json__trace_end(void *ctx);

/* s[0, n) is a number in JSON's grammar. */
bool span_json__number_ok(const char *s, size_t n);
/* Where the string whose bytes start at s ends (*e: its closing quote, or
 * its first backslash or control character: then false); end: it may not
 * close before it (false then), NULL: it is known to close. */
bool span_json__raw_string(const char *s, const char *end, const char **e);

struct span_json; /* a parser, reused across units (its buffers grow to the largest) */

struct span_json *span_json__new(void);
void span_json__free(struct span_json *j);

enum span_json_unit {
	SPAN_JSON_JAEGER_TRACE,	  /* an element of Jaeger's "data" */
	SPAN_JSON_OTLP_RESOURCES, /* OTLP's "resourceSpans" (Tempo: "batches") */
	SPAN_JSON_ZIPKIN_SPANS,	  /* Zipkin v2: a list of spans */
};

/* Walks the unit in buf[0, len), which must be readable up to
 * len + SPAN_JSON_PADDING. Returns 0; a handler's value < 0; 1 for
 * malformed JSON, with *msg (a static string) and *at (the offset of the
 * last key read before the damage, 0 when none was); or 2 when the input is
 * not valid UTF-8, found before any handler was called. */
int span_json__parse(struct span_json *j, enum span_json_unit unit, const char *buf, size_t len,
		     void *ctx, const char **msg, size_t *at);

/* span/raw.c: span/json.cpp's walk of a Jaeger or OTLP unit over its bytes
 * (checked as UTF-8 first). 0, a handler's < 0, or 1 when the unit is not
 * as exporters write it (an escape, damage, …): then what the handlers were
 * given is to be undone (span_json__rollback) and simdjson walks it. used
 * NULL: the unit is buf[0, len); else it starts at buf, ends where its
 * bracket closes (*used: its length) and len is what the buffer holds;
 * buf[0, utf8_ok) is already known to be UTF-8. */
int span_json__raw_walk(enum span_json_unit unit, const char *buf, size_t len, void *ctx,
			size_t *used, size_t utf8_ok);
/* buf[0, len) is UTF-8 (simdjson's check). */
bool span_json__utf8_ok(const char *buf, size_t len);
/* Undoes the handlers' work since span_json__parse was called. */
void span_json__rollback(void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* CRITPATH_SPAN_JSON_H */
