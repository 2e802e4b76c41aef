// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* libFuzzer harness: the OTLP encoder (out/otlp.c) on requests whose strings
 * are arbitrary bytes, as traced processes send or name them: span name, url
 * path and query, thread names, tracestate, service names, probed functions,
 * peers, the executable's path. What it writes must be an
 * ExportTraceServiceRequest a collector decodes: every field one of the OTLP
 * schema's (opentelemetry-proto trace/v1, common/v1, resource/v1) with its
 * wire type, every length inside its message, ids of their size, and every
 * string valid UTF-8 (proto3 parsers refuse the whole message otherwise). A
 * finding names the field, its path and the byte, and aborts. */
#include <sanitizer/common_interface_defs.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "otlp.h"

/* --- the input: 4 control bytes, then strings, NUL-separated --------------- */

/* Control bytes: 0 the protocol; 1 why (bits 0-2: slow, sampled, opt-in),
 * partial (0x08), a well-formed traceparent (0x10), the other process
 * named by its thread (0x20); 2-3 the status. Then the slots' strings in
 * this order; a slot past the input's end is NULL. */

enum slot {
	S_NAME,	       /* the span name: "GET /item/{n}", the method its first word */
	S_TARGET,      /* url path and query as sent, or a gRPC /service/method */
	S_SERVICE,     /* the request's service */
	S_RES_SERVICE, /* OTEL_SERVICE_NAME */
	S_HOST,
	S_RES_HOST,
	S_EXE,
	S_TRACEPARENT, /* unless control byte 1 asks for a well-formed one */
	S_TRACESTATE,
	S_COMM,	      /* the serving thread's name */
	S_OTHER_COMM, /* a thread of another process on the path */
	S_DOWNSTREAM, /* that process's service frame */
	S_PROBE,      /* a --probe'd function */
	S_PEER,	      /* a network wait's address */
	S_CULPRIT,    /* a thread that held the request up */
	S_SERVER_ADDR,
	S_CLIENT_ADDR,
	S_SEG_HOST,
	S__COUNT,
};

static const char *const protocols[] = {NULL,	     "http",	   "http/2", "grpc", "redis",
					"memcached", "postgresql", "mysql",  "dns"};

/* --- the schema ---------------------------------------------------------- */

enum kind { F_STR, F_BYTES, F_MSG, F_VARINT, F_I64, F_I32 };

enum msg {
	M_REQUEST,
	M_RESOURCE_SPANS,
	M_RESOURCE,
	M_SCOPE_SPANS,
	M_SCOPE,
	M_SPAN,
	M_EVENT,
	M_LINK,
	M_STATUS,
	M_KEY_VALUE,
	M_ANY,
	M_ARRAY,
	M_KVLIST,
};

struct field {
	uint32_t num;
	enum kind kind;
	enum msg msg; /* F_MSG: its type */
	uint32_t len; /* F_BYTES: its size, 0: any */
	const char *name;
};

struct msgdef {
	const char *name;
	struct field f[17]; /* ended by one without a name */
};

/* clang-format off */
#define STR(n, s) {n, F_STR, 0, 0, s}
#define BYTES(n, l, s) {n, F_BYTES, 0, l, s}
#define MSG(n, m, s) {n, F_MSG, m, 0, s}
#define VARINT(n, s) {n, F_VARINT, 0, 0, s}
#define I64(n, s) {n, F_I64, 0, 0, s}
#define I32(n, s) {n, F_I32, 0, 0, s}
/* clang-format on */

static const struct msgdef schema[] = {
    [M_REQUEST] = {"ExportTraceServiceRequest", {MSG(1, M_RESOURCE_SPANS, "resource_spans")}},
    [M_RESOURCE_SPANS] = {"ResourceSpans",
			  {MSG(1, M_RESOURCE, "resource"), MSG(2, M_SCOPE_SPANS, "scope_spans"),
			   STR(3, "schema_url")}},
    [M_RESOURCE] = {"Resource",
		    {MSG(1, M_KEY_VALUE, "attributes"), VARINT(2, "dropped_attributes_count")}},
    [M_SCOPE_SPANS] = {"ScopeSpans",
		       {MSG(1, M_SCOPE, "scope"), MSG(2, M_SPAN, "spans"), STR(3, "schema_url")}},
    [M_SCOPE] = {"InstrumentationScope",
		 {STR(1, "name"), STR(2, "version"), MSG(3, M_KEY_VALUE, "attributes"),
		  VARINT(4, "dropped_attributes_count")}},
    [M_SPAN] = {"Span",
		{BYTES(1, 16, "trace_id"), BYTES(2, 8, "span_id"), STR(3, "trace_state"),
		 BYTES(4, 8, "parent_span_id"), STR(5, "name"), VARINT(6, "kind"),
		 I64(7, "start_time_unix_nano"), I64(8, "end_time_unix_nano"),
		 MSG(9, M_KEY_VALUE, "attributes"), VARINT(10, "dropped_attributes_count"),
		 MSG(11, M_EVENT, "events"), VARINT(12, "dropped_events_count"),
		 MSG(13, M_LINK, "links"), VARINT(14, "dropped_links_count"),
		 MSG(15, M_STATUS, "status"), I32(16, "flags")}},
    [M_EVENT] = {"Span.Event",
		 {I64(1, "time_unix_nano"), STR(2, "name"), MSG(3, M_KEY_VALUE, "attributes"),
		  VARINT(4, "dropped_attributes_count")}},
    [M_LINK] = {"Span.Link",
		{BYTES(1, 16, "trace_id"), BYTES(2, 8, "span_id"), STR(3, "trace_state"),
		 MSG(4, M_KEY_VALUE, "attributes"), VARINT(5, "dropped_attributes_count"),
		 I32(6, "flags")}},
    [M_STATUS] = {"Status", {STR(2, "message"), VARINT(3, "code")}},
    [M_KEY_VALUE] = {"KeyValue", {STR(1, "key"), MSG(2, M_ANY, "value")}},
    [M_ANY] = {"AnyValue",
	       {STR(1, "string_value"), VARINT(2, "bool_value"), VARINT(3, "int_value"),
		I64(4, "double_value"), MSG(5, M_ARRAY, "array_value"),
		MSG(6, M_KVLIST, "kvlist_value"), BYTES(7, 0, "bytes_value")}},
    [M_ARRAY] = {"ArrayValue", {MSG(1, M_ANY, "values")}},
    [M_KVLIST] = {"KeyValueList", {MSG(1, M_KEY_VALUE, "values")}},
};

/* --- the walk ------------------------------------------------------------ */

struct walk {
	const uint8_t *base;
	size_t size;
	char path[1024];   /* Msg.field/Msg.field/… to where the walk is */
	char last_key[64]; /* the attribute the walk is in, for the report */
};

static void found(const struct walk *w, const uint8_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static void found(const struct walk *w, const uint8_t *at, const char *fmt, ...)
{
	char what[512], line[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(
	    line, sizeof(line),
	    "SUMMARY: fuzz_otlp: the encoder's output is not a valid OTLP message: %s, at byte "
	    "%zu of %zu, in %s%s%s%s",
	    what, (size_t)(at - w->base), w->size, w->path, w->last_key[0] ? " (attribute \"" : "",
	    w->last_key, w->last_key[0] ? "\")" : "");
	/* where the sanitizers' reports go: libFuzzer's -close_fd_mask closes
	 * stderr */
	__sanitizer_report_error_summary(line);
	abort();
}

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t c = *(*p)++;

		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return shift < 63 || c <= 1;
	}
	return false;
}

/* The offset of the first byte that is not valid UTF-8 (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF), or n */
static size_t utf8_bad(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = s[i];
		uint32_t cp, min;
		size_t len;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0)
			len = 2, cp = c & 0x1f, min = 0x80;
		else if ((c & 0xf0) == 0xe0)
			len = 3, cp = c & 0x0f, min = 0x800;
		else if ((c & 0xf8) == 0xf0)
			len = 4, cp = c & 0x07, min = 0x10000;
		else
			return i;
		if (n - i < len)
			return i;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += len;
	}
	return n;
}

static const struct field *field_of(enum msg m, uint32_t num)
{
	for (const struct field *f = schema[m].f; f->name; f++)
		if (f->num == num)
			return f;
	return NULL;
}

static void walk_msg(struct walk *w, enum msg m, const uint8_t *p, const uint8_t *end, int depth)
{
	static const int wire[] = {
	    [F_STR] = 2, [F_BYTES] = 2, [F_MSG] = 2, [F_VARINT] = 0, [F_I64] = 1, [F_I32] = 5};
	size_t plen = strlen(w->path);

	if (depth > 32)
		found(w, p, "messages nested %d deep", depth);
	while (p < end) {
		const uint8_t *at = p;
		const struct field *f;
		uint64_t tag, v, len;

		if (!varint(&p, end, &tag))
			found(w, at, "a tag cut short or too long");
		w->path[plen] = '\0';
		if (tag >> 3 > UINT32_MAX || !(f = field_of(m, (uint32_t)(tag >> 3))))
			found(w, at, "field %llu (wire type %u) is not one of %s's",
			      (unsigned long long)(tag >> 3), (unsigned)(tag & 7), schema[m].name);
		snprintf(w->path + plen, sizeof(w->path) - plen, "%s%s.%s", plen ? "/" : "",
			 schema[m].name, f->name);
		if ((int)(tag & 7) != wire[f->kind])
			found(w, at, "wire type %u, the schema's is %d", (unsigned)(tag & 7),
			      wire[f->kind]);
		switch (f->kind) {
		case F_VARINT:
			if (!varint(&p, end, &v))
				found(w, at, "a varint cut short or too long");
			continue;
		case F_I64:
		case F_I32:
			if ((size_t)(end - p) < (f->kind == F_I64 ? 8u : 4u))
				found(w, at, "a fixed-size value cut short");
			p += f->kind == F_I64 ? 8 : 4;
			continue;
		default:
			break;
		}
		if (!varint(&p, end, &len) || len > (uint64_t)(end - p))
			found(w, at, "a length past the end of its message");
		if (f->kind == F_BYTES && f->len && len != f->len)
			found(w, at, "%llu bytes, the schema's id has %u", (unsigned long long)len,
			      f->len);
		if (f->kind == F_STR) {
			size_t bad = utf8_bad(p, len);

			if (bad < len)
				found(w, p + bad,
				      "a string that is not valid UTF-8 (byte 0x%02x at %zu of its "
				      "%llu)",
				      p[bad], bad, (unsigned long long)len);
			if (m == M_KEY_VALUE && f->num == 1)
				snprintf(w->last_key, sizeof(w->last_key), "%.*s", (int)len, p);
		}
		if (f->kind == F_MSG)
			walk_msg(w, f->msg, p, p + len, depth + 1);
		p += len;
	}
	w->path[plen] = '\0';
	if (m == M_KEY_VALUE)
		w->last_key[0] = '\0';
}

/* --- the request ----------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char tp[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	const char *s[S__COUNT] = {0};
	uint8_t c[4] = {0}, rnd[24] = {7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	char *buf = malloc(size + 1);
	struct pbuf b = {0};
	struct walk w = {0};
	size_t at;

	if (!buf)
		return 0;
	memcpy(c, data, size < 4 ? size : 4);
	at = size < 4 ? size : 4;
	memcpy(buf, data, size);
	buf[size] = '\0';
	for (int i = 0; i < S__COUNT && at < size; i++) {
		s[i] = buf + at;
		at += strlen(buf + at) + 1;
	}

	const char *const frames_self[] = {s[S_SERVICE], s[S_NAME], s[S_PROBE]};
	const char *const frames_other[] = {s[S_SERVICE], s[S_NAME], s[S_DOWNSTREAM]};
	const struct cp_culprit culprits[] = {{7, 8, s[S_CULPRIT], 50},
					      {9, 9, s[S_OTHER_COMM], 20}};
	/* the serving process (pid 100) in a probed call, waiting on a peer,
	 * in another process, on a lock */
	const struct cp_segment segs[] = {
	    {.start_ns = 1000,
	     .end_ns = 1100,
	     .category = CP_CAT_CPU,
	     .frames = frames_self,
	     .nframes = 3,
	     .probe_frames = 1,
	     .pid = 100,
	     .tid = 101,
	     .comm = s[S_COMM],
	     .host = s[S_SEG_HOST],
	     .culprits = culprits,
	     .nculprits = 1},
	    {.start_ns = 1100,
	     .end_ns = 1200,
	     .category = CP_CAT_NETWORK,
	     .frames = frames_self,
	     .nframes = 2,
	     .pid = 100,
	     .tid = 101,
	     .comm = s[S_COMM],
	     .peer = s[S_PEER],
	     .host = s[S_SEG_HOST]},
	    /* named by its service frame, or (control bit 0x20) its thread */
	    {.start_ns = 1200,
	     .end_ns = 1300,
	     .category = CP_CAT_CPU,
	     .frames = frames_other,
	     .nframes = c[1] & 0x20 ? 2 : 3,
	     .interference = true,
	     .pid = 200,
	     .tid = 201,
	     .comm = s[S_OTHER_COMM],
	     .host = s[S_SEG_HOST]},
	    {.start_ns = 1300,
	     .end_ns = 1400,
	     .category = CP_CAT_LOCK,
	     .frames = frames_self,
	     .nframes = 3,
	     .probe_frames = 1,
	     .pid = 100,
	     .tid = 101,
	     .comm = s[S_COMM],
	     .culprits = culprits,
	     .nculprits = 2},
	};
	const struct cp_request_wire wire = {
	    .protocol = protocols[c[0] % (sizeof(protocols) / sizeof(protocols[0]))],
	    .status = (c[2] | c[3] << 8) % 1000,
	    .traceparent = c[1] & 0x10 ? tp : s[S_TRACEPARENT],
	    .tracestate = s[S_TRACESTATE],
	    .server_addr = s[S_SERVER_ADDR],
	    .client_addr = s[S_CLIENT_ADDR],
	    .pid = 100,
	};
	const struct cp_request r = {
	    .service = s[S_SERVICE],
	    .name = s[S_NAME],
	    .host = s[S_HOST],
	    .start_ns = 1000,
	    .end_ns = 1400,
	    .partial = c[1] & 0x08,
	    .segs = segs,
	    .nsegs = 4,
	    .realtime_offset_ns = 1700000000000000000ll,
	    .target = s[S_TARGET],
	    .wire = &wire,
	};
	const struct otlp_resource res = {s[S_RES_SERVICE], s[S_RES_HOST], s[S_EXE]};

	if (otlp__encode_request(&b, &r, &res, c[1] & 7, rnd)) {
		pbuf__free(&b);
		free(buf);
		return 0; /* out of memory */
	}
	w.base = b.p;
	w.size = b.n;
	walk_msg(&w, M_REQUEST, b.p, b.p + b.n, 0);
	pbuf__free(&b);
	free(buf);
	return 0;
}
