// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Span input: content detection, OTLP, several traces per file, and every
 * kind of bad input (each warned with file, trace and span; the rest still
 * analysed). Fixtures in tests/unit/data/ (tests run from the repo top).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "span_internal.h"

struct req {
	char id[64], service[64], name[64], secs[1024], tags[512];
	uint64_t latency_ns, sum_ns;
	uint32_t nspans;
	bool partial;
};

struct capture {
	int nreq, nwarn;
	struct req r[8];
	char warns[16384];
};

static int capture_request(void *ctx, const struct cp_request *r)
{
	struct capture *c = ctx;
	struct req *q = &c->r[c->nreq < 8 ? c->nreq : 7];
	size_t o = 0;

	c->nreq++;
	memset(q, 0, sizeof(*q));
	snprintf(q->id, sizeof(q->id), "%s", r->id);
	snprintf(q->service, sizeof(q->service), "%s", r->service);
	snprintf(q->name, sizeof(q->name), "%s", r->name);
	q->latency_ns = r->end_ns - r->start_ns;
	q->partial = r->partial;
	q->nspans = r->nspans;
	for (uint32_t i = 0; i < r->nsegs; i++) {
		q->sum_ns += r->segs[i].end_ns - r->segs[i].start_ns;
		if (o < sizeof(q->secs) - 100)
			o += snprintf(
			    q->secs + o, sizeof(q->secs) - o, "%s%s:%s:%llu", i ? " " : "",
			    r->segs[i].service, r->segs[i].span_id,
			    (unsigned long long)(r->segs[i].end_ns - r->segs[i].start_ns) / 1000);
	}
	o = 0;
	for (const char *const *t = r->tags; t && *t && o < sizeof(q->tags) - 80; t++)
		o += snprintf(q->tags + o, sizeof(q->tags) - o, "%s%s", o ? " " : "", *t);
	return 0;
}

static void capture_warn(void *ctx, const char *msg)
{
	struct capture *c = ctx;
	size_t o = strlen(c->warns);

	c->nwarn++;
	snprintf(c->warns + o, sizeof(c->warns) - o, "%s\n", msg);
}

static const struct cp_sink *sink_of(struct capture *c)
{
	static struct cp_sink s;

	memset(c, 0, sizeof(*c));
	s = (struct cp_sink){capture_request, capture_warn, c};
	return &s;
}

static int buf(struct capture *c, const char *json)
{
	return span_input__analyze_buffer("in.json", json, strlen(json), sink_of(c), NULL);
}

/* A Jaeger span: id, parent (NULL: none), start and duration in µs from 1.7e15. */
static int jspan(char *b, size_t cap, const char *id, const char *parent, long start, long dur)
{
	char ref[128] = "";

	if (parent)
		snprintf(ref, sizeof(ref), "{\"refType\":\"CHILD_OF\",\"spanID\":\"%s\"}", parent);
	return snprintf(b, cap,
			"{%s%s%s\"operationName\":\"op%s\",\"references\":[%s],"
			"\"startTime\":%ld,\"duration\":%ld,\"processID\":\"p1\","
			"\"tags\":[{\"key\":\"k\",\"type\":\"string\",\"value\":\"v%s\"}]}",
			id ? "\"spanID\":\"" : "", id ? id : "", id ? "\"," : "", id ? id : "", ref,
			1700000000000000L + start, dur, id ? id : "");
}

static char *jtrace(const char *tid, const char *spans[][2], const long times[][2], int n)
{
	size_t cap = 1024 + 512 * (size_t)n, o = 0;
	char *b = malloc(cap);

	o += snprintf(b + o, cap - o, "{\"data\":[{\"traceID\":\"%s\",\"spans\":[", tid);
	for (int i = 0; i < n; i++) {
		if (i)
			b[o++] = ',';
		o += jspan(b + o, cap - o, spans[i][0], spans[i][1], times[i][0], times[i][1]);
	}
	snprintf(b + o, cap - o,
		 "],\"processes\":{\"p1\":{\"serviceName\":\"svc\",\"tags\":[]}}}]}");
	return b;
}

static void expect_one(struct capture *c, const char *warn_part)
{
	assert_int_equal(c->nreq, 1);
	assert_int_equal(c->r[0].sum_ns, c->r[0].latency_ns);
	if (warn_part) {
		if (!strstr(c->warns, warn_part))
			fail_msg("no warning with '%s' in:\n%s", warn_part, c->warns);
		assert_non_null(strstr(c->warns, "in.json: trace t1: span "));
		assert_true(c->r[0].partial);
	}
}

#define N(a) ((int)(sizeof(a) / sizeof(a[0])))

static void run(struct capture *c, const char *spans[][2], const long times[][2], int n, int ret)
{
	char *j = jtrace("t1", spans, times, n);

	assert_int_equal(buf(c, j), ret);
	free(j);
}

static void test_missing_id(void **state)
{
	const char *s[][2] = {{"a", NULL}, {NULL, "a"}, {"c", "a"}};
	const long t[][2] = {{0, 100}, {10, 20}, {40, 20}};
	struct capture c;

	run(&c, s, t, N(s), 1);
	expect_one(&c, "no span id, span dropped");
	assert_int_equal(c.r[0].nspans, 2);
}

static void test_negative_duration(void **state)
{
	const char *s[][2] = {{"a", NULL}, {"b", "a"}, {"c", "b"}};
	const long t[][2] = {{0, 100}, {10, -20}, {40, 20}};
	struct capture c;

	run(&c, s, t, N(s), 1);
	expect_one(&c, "span b: negative duration");
	/* b keeps its place as a placeholder (its parent known), spanning c */
	assert_non_null(strstr(c.warns, "trace t1: 1 spans whose parent is not in the trace, under 1 "
					"placeholder spans \"(missing) (missing span)\""));
	assert_string_equal(c.r[0].secs, "svc:a:40 svc:c:20 svc:a:40");
}

/* a time before 1970 (a fuzzer's: it wrapped as an unsigned time and put a
 * step outside its request) drops its span, said */
static void test_negative_start(void **state)
{
	static const char j[] =
	    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
	    "\"value\":{\"stringValue\":\"svc\"}}]},\"scopeSpans\":[{\"spans\":["
	    "{\"traceId\":\"t1\",\"spanId\":\"a\",\"name\":\"opa\",\"startTimeUnixNano\":"
	    "\"1000\",\"endTimeUnixNano\":\"101000\"},"
	    "{\"traceId\":\"t1\",\"spanId\":\"b\",\"parentSpanId\":\"a\",\"name\":\"opb\","
	    "\"startTimeUnixNano\":\"-10\",\"endTimeUnixNano\":\"2000\"}]}]}]}";
	struct capture c;

	assert_int_equal(buf(&c, j), 1);
	expect_one(&c, "span b: a time is not a number, span dropped");
}

static void test_duplicate_ids(void **state)
{
	const char *s[][2] = {{"a", NULL}, {"b", "a"}, {"b", "a"}};
	const long t[][2] = {{0, 100}, {10, 20}, {50, 20}};
	struct capture c;

	run(&c, s, t, N(s), 1);
	expect_one(&c, "span b: duplicate span id, later copy dropped");
	assert_string_equal(c.r[0].secs, "svc:a:10 svc:b:20 svc:a:70");
}

static void test_parent_cycle(void **state)
{
	const char *s[][2] = {{"a", NULL}, {"b", "c"}, {"c", "b"}};
	const long t[][2] = {{0, 100}, {10, 50}, {20, 10}};
	struct capture c;

	run(&c, s, t, N(s), 1);
	expect_one(&c, "parent cycle");
	assert_int_equal(c.r[0].nspans, 3);
}

/* Spans whose parent never came are under a placeholder for it, a root
 * of its own: one request per root (as Jaeger UI shows them), one warning
 * for the trace. */
static void test_orphan(void **state)
{
	const char *s[][2] = {{"a", NULL}, {"b", "zz"}, {"c", "zz"}};
	const long t[][2] = {{0, 100}, {10, 50}, {70, 40}};
	struct capture c;

	run(&c, s, t, N(s), 2);
	assert_int_equal(c.nreq, 2);
	assert_int_equal(c.nwarn, 1);
	assert_string_equal(c.warns,
			    "in.json: trace t1: 2 spans whose parent is not in the trace, under 1 "
			    "placeholder spans \"(missing) (missing span)\" (their own time is a "
			    "blind spot); its roots each analysed as a request\n");
	assert_string_equal(c.r[0].id, "t1");
	assert_string_equal(c.r[0].secs, "svc:a:100");
	assert_false(c.r[0].partial);
	/* the placeholder: from b's start to c's end, its gap a blind spot */
	assert_string_equal(c.r[1].id, "t1#zz");
	assert_string_equal(c.r[1].name, "(missing span)");
	assert_string_equal(c.r[1].secs, "svc:b:50 (missing):zz:10 svc:c:40");
	assert_true(c.r[1].partial);
}

static void test_several_roots(void **state)
{
	/* each root its own request, the best (longest) first */
	const char *s[][2] = {{"b", NULL}, {"a", NULL}};
	const long t[][2] = {{10, 50}, {0, 100}};
	struct capture c;

	run(&c, s, t, N(s), 2);
	assert_int_equal(c.nreq, 2);
	assert_string_equal(c.r[0].name, "opa");
	assert_string_equal(c.r[1].name, "opb");
	assert_string_equal(c.r[1].id, "t1#b");
	assert_false(c.r[0].partial || c.r[1].partial);
	assert_string_equal(c.warns, "in.json: trace t1: 2 roots, each analysed as a request\n");
}

/* The .NET exporter's shape: the root never exported, its children all
 * name it: one placeholder, one request with them all. */
static void test_no_root(void **state)
{
	const char *s[][2] = {{"b", "r"}, {"a", "r"}, {"c", "a"}};
	const long t[][2] = {{10, 50}, {0, 100}, {20, 30}};
	struct capture c;

	run(&c, s, t, N(s), 1);
	assert_int_equal(c.nreq, 1);
	assert_string_equal(c.r[0].name, "(missing span)");
	assert_true(c.r[0].partial);
	assert_int_equal(c.r[0].nspans, 4);
	assert_non_null(strstr(c.warns, "2 spans whose parent is not in the trace, under 1 "));
}

/* CRISP's exclusions: a span of SERVICE:OPERATION and its subtree are left
 * out of the walk; the parent's own time covers them. */
static void test_exclude_op(void **state)
{
	const char *s[][2] = {{"a", NULL}, {"b", "a"}, {"c", "b"}};
	const long t[][2] = {{0, 100}, {10, 50}, {20, 10}};
	const char *ex[] = {"svc:opb"};
	struct span_opts so = {.overlap_tolerance = 0.01, .exclude_ops = ex, .nexclude_ops = 1};
	char *j = jtrace("t1", s, t, N(s));
	struct capture c;

	assert_int_equal(span_input__analyze_buffer("in.json", j, strlen(j), sink_of(&c), &so), 1);
	assert_string_equal(c.r[0].secs, "svc:a:100");
	assert_int_equal(c.r[0].nspans, 1);
	/* a service alone: all its spans */
	ex[0] = "svc";
	assert_int_equal(span_input__analyze_buffer("in.json", j, strlen(j), sink_of(&c), &so), 0);
	free(j);
}

static void test_nothing_usable(void **state)
{
	const char *s[][2] = {{"a", NULL}};
	const long t[][2] = {{0, -5}};
	struct capture c;

	run(&c, s, t, N(s), 0);
	assert_int_equal(c.nreq, 0);
	assert_non_null(strstr(c.warns, "no usable span"));
}

static void test_warning_cap(void **state)
{
	size_t cap = 1 << 20, o = 0;
	char *b = malloc(cap);
	struct capture c;

	o += snprintf(b, cap, "{\"data\":[{\"traceID\":\"t1\",\"spans\":[");
	o += jspan(b + o, cap - o, "r", NULL, 0, 1000);
	for (int i = 0; i < 150; i++)
		o += snprintf(b + o, cap - o,
			      ",{\"spanID\":\"s%d\",\"startTime\":1,\"duration\":-1}", i);
	snprintf(b + o, cap - o, "]}]}");
	assert_int_equal(buf(&c, b), 1);
	free(b);
	assert_int_equal(c.nwarn, SPAN_MAX_WARNINGS_PER_FILE + 1);
	assert_non_null(strstr(c.warns, "50 more warnings not shown"));
}

static void test_malformed_file(void **state)
{
	struct capture c;
	int ret =
	    span_input__analyze_file("tests/unit/data/span_malformed.json", sink_of(&c), NULL);

	/* the first trace is complete before the damage */
	assert_int_equal(ret, 1);
	assert_int_equal(c.nreq, 1);
	assert_string_equal(c.r[0].service, "web");
	if (!strstr(c.warns, "span_malformed.json: malformed JSON at line 3"))
		fail_msg("warnings: %s", c.warns);
}

static void test_truncated_buffer(void **state)
{
	const char *j =
	    "{\"data\":[{\"traceID\":\"t1\",\"spans\":[{\"spanID\":\"a\",\"startTime\":1,";
	struct capture c;

	assert_int_equal(buf(&c, j), -EINVAL);
	assert_non_null(strstr(c.warns, "malformed JSON"));
}

/* Junk after a tag's value, where the tag's fields were looked up by name
 * and what followed them was not read: reported like junk anywhere else,
 * with its line and byte, and the trace skipped. */
static void test_junk_after_tag_value(void **state)
{
	static const char *const junk[] = {"-1e999", "garbage", ", "};

	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		char j[512];
		struct capture c;

		snprintf(j, sizeof(j),
			 "{\"data\":[{\"traceID\":\"t1\",\"spans\":[{\"traceID\":\"t1\","
			 "\"spanID\":\"a\",\"operationName\":\"op\",\"startTime\":1,\"duration\":10,"
			 "\"processID\":\"p1\",\"tags\":[{\"key\":\"k\",\"type\":\"string\","
			 "\"value\":\"v\" %s}]}],\"processes\":{\"p1\":{\"serviceName\":\"s\"}}}]}",
			 junk[i]);
		buf(&c, j);
		if (!strstr(c.warns, "malformed JSON at line 1, byte"))
			fail_msg("junk '%s': warnings: %s", junk[i], c.warns);
	}
}

static void test_not_a_trace_file(void **state)
{
	struct capture c;

	assert_int_equal(buf(&c, "{\"foo\":[1,2,3]}"), -EINVAL);
	assert_non_null(strstr(c.warns, "in.json: not a trace file: tried Jaeger JSON (a \"data\" "
					"array at the top level), OTLP JSON (\"resourceSpans\", one "
					"export request per line too) and Zipkin v2 JSON (an array of "
					"spans with \"traceId\"); the top level was an object beginning "
					"{\"foo\":[1,2,3]}"));
	assert_int_equal(
	    span_input__analyze_buffer("rec", "CPREC\x01\x02\x00", 8, sink_of(&c), NULL), -EINVAL);
	assert_non_null(strstr(c.warns, "rec: not a trace file"));
	assert_int_equal(
	    span_input__analyze_file("tests/unit/data/does-not-exist.json", sink_of(&c), NULL),
	    -ENOENT);
	assert_non_null(strstr(c.warns, "cannot open"));
}

static void test_jaeger_many_traces(void **state)
{
	const char *j =
	    "{\"data\":[{\"traceID\":\"t1\",\"spans\":[{\"spanID\":\"a\",\"operationName\":\"x\","
	    "\"startTime\":1700000000000000,\"duration\":10,\"processID\":\"p9\"}],"
	    "\"processes\":{\"p9\":{\"serviceName\":\"late\"}}},"
	    "{\"processes\":{\"p1\":{\"serviceName\":\"early\"}},\"spans\":[{\"spanID\":\"b\","
	    "\"traceID\":\"t2\",\"startTime\":1700000000000000,\"duration\":20,"
	    "\"processID\":\"p1\"}]}]}";
	struct capture c;

	assert_int_equal(buf(&c, j), 2);
	assert_string_equal(c.r[0].id, "t1");
	assert_string_equal(c.r[0].service, "late"); /* processes after spans */
	assert_string_equal(c.r[1].id, "t2");	     /* trace id from the span */
	assert_string_equal(c.r[1].service, "early");
	assert_string_equal(c.r[1].name, "(unnamed)");
	assert_int_equal(c.nwarn, 0);
}

static void test_otlp(void **state)
{
	struct capture c;
	int ret = span_input__analyze_file("tests/unit/data/span_otlp.json", sink_of(&c), NULL);

	if (c.nwarn)
		print_message("%s", c.warns);
	assert_int_equal(ret, 3);
	assert_int_equal(c.nwarn, 0);
	/* grouped by trace id within the first request: "…02" sorts first */
	assert_string_equal(c.r[0].id, "00000000000000000000000000000002");
	assert_int_equal(c.r[0].latency_ns, 500000);
	assert_string_equal(c.r[1].id, "5b8efff798038103d269b633813fc60c");
	assert_string_equal(c.r[1].service, "frontend");
	assert_string_equal(c.r[1].name, "GET /cart");
	assert_int_equal(c.r[1].latency_ns, 100000000);
	assert_string_equal(c.r[1].secs, "frontend:eee19b7ec3c1b174:10000 "
					 "frontend:eee19b7ec3c1b175:10000 "
					 "backend:aaa19b7ec3c1b176:50000 "
					 "frontend:eee19b7ec3c1b175:20000 "
					 "frontend:eee19b7ec3c1b174:10000");
	assert_non_null(strstr(c.r[1].tags, "db.rows=42"));
	assert_non_null(strstr(c.r[1].tags, "service.name=backend"));
	assert_non_null(strstr(c.r[1].tags, "http.method=GET"));
	assert_string_equal(c.r[2].id, "00000000000000000000000000000003");
}

static void test_tempo_batches(void **state)
{
	const char *j =
	    "{\"batches\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
	    "\"value\":{\"stringValue\":\"api\"}}]},\"instrumentationLibrarySpans\":[{"
	    "\"spans\":[{\"traceId\":\"AAAAAAAAAAAAAAAAAAAAAQ==\",\"spanId\":\"AAAAAAAAAAE=\","
	    "\"name\":\"GET\",\"kind\":\"SPAN_KIND_SERVER\",\"startTimeUnixNano\":\"1000\","
	    "\"endTimeUnixNano\":\"3000\"}]}]}]}";
	struct capture c;

	assert_int_equal(buf(&c, j), 1);
	assert_string_equal(c.r[0].service, "api");
	assert_int_equal(c.r[0].latency_ns, 2000);
}

/* s with every from replaced by to (one is at most 4 bytes longer) */
static char *replace(const char *s, const char *from, const char *to)
{
	size_t lf = strlen(from), lt = strlen(to), o = 0;
	char *d = malloc(strlen(s) * (lt > lf ? lt - lf + 1 : 1) + 1);

	while (*s) {
		if (!strncmp(s, from, lf)) {
			memcpy(d + o, to, lt);
			o += lt;
			s += lf;
		} else {
			d[o++] = *s++;
		}
	}
	d[o] = 0;
	return d;
}

/* The raw walk (span/raw.c) and simdjson's (escapes send a unit there)
 * read the same: compact, spaced out, and escaped. */
static void test_raw_walk_and_simdjson(void **state)
{
	const char *s[][2] = {{"a", NULL}, {"b", "a"}, {"c", "b"}, {"d", "a"}};
	const long t[][2] = {{0, 100}, {10, 50}, {20, 10}, {70, 20}};
	char *j = jtrace("t1", s, t, N(s));
	char *spaced0 = replace(j, ",", " ,\n\t");
	char *spaced = replace(spaced0, ":", "\r\n: ");
	char *escaped = replace(j, "\"value\":\"v", "\"value\":\"\\u0076");
	const char *in[] = {j, spaced, escaped};
	struct capture c;
	struct req first;

	for (int i = 0; i < N(in); i++) {
		assert_int_equal(buf(&c, in[i]), 1);
		assert_int_equal(c.nwarn, 0);
		assert_non_null(strstr(c.r[0].tags, "k=vb"));
		if (!i)
			first = c.r[0];
		else
			assert_memory_equal(&first, &c.r[0], sizeof(first));
	}
	free(j);
	free(spaced0);
	free(spaced);
	free(escaped);
}

/*
 * Tags in every form the compact reading (span/raw.c compact_tag) takes or
 * leaves to the general one: strings, numbers, booleans, null, a key after
 * its value, white space, escapes; with tags collected and ignored (then
 * only Jaeger's span.kind is read). A client span and its server span on
 * another host whose clock puts it past the client: only their kinds keep
 * it (moved, a skew warning) instead of dropping it.
 */
static void test_compact_tags(void **state)
{
	static const char *const more =
	    "{\"key\":\"n\",\"type\":\"int64\",\"value\":42},"
	    "{\"key\":\"d\",\"type\":\"float64\",\"value\":-1.5e3},"
	    "{\"key\":\"b\",\"type\":\"bool\",\"value\":true},"
	    "{\"key\":\"f\",\"type\":\"bool\",\"value\":false},"
	    "{\"key\":\"z\",\"type\":\"string\",\"value\":null},"
	    "{\"value\":\"x\",\"key\":\"late\"},{\"key\":\"nt\",\"value\":\"y\"}";
	char j[4096];
	const char *otlp =
	    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
	    "\"value\":{\"stringValue\":\"api\"}}]},\"scopeSpans\":[{\"spans\":[{"
	    "\"traceId\":\"0102\",\"spanId\":\"01\",\"name\":\"GET\",\"kind\":2,"
	    "\"startTimeUnixNano\":\"1000\",\"endTimeUnixNano\":\"3000\",\"attributes\":["
	    "{\"key\":\"i\",\"value\":{\"intValue\":\"7\"}},"
	    "{\"key\":\"bo\",\"value\":{\"boolValue\":true}},"
	    "{\"key\":\"dv\",\"value\":{\"doubleValue\":2.5}},"
	    "{\"key\":\"arr\",\"value\":{\"arrayValue\":{\"values\":[]}}},"
	    "{\"key\":\"nv\",\"value\":{\"stringValue\":null}},"
	    "{\"key\":\"Value\",\"value\":{\"Value\":\"no\"}},"
	    "{\"value\":{\"stringValue\":\"s\"},\"key\":\"late\"}]}]}]}]}";
	struct capture c;
	struct req first, first_o;

	snprintf(j, sizeof(j),
		 "{\"data\":[{\"traceID\":\"t1\",\"spans\":["
		 "{\"spanID\":\"a\",\"operationName\":\"call\",\"references\":[],"
		 "\"startTime\":1700000000000000,\"duration\":100,\"processID\":\"p1\","
		 "\"tags\":[%s,{\"key\":\"span.kind\",\"type\":\"string\",\"value\":\"client\"}]},"
		 "{\"spanID\":\"b\",\"operationName\":\"serve\",\"references\":["
		 "{\"refType\":\"CHILD_OF\",\"spanID\":\"a\"}],"
		 "\"startTime\":1700000000000500,\"duration\":50,\"processID\":\"p2\","
		 "\"tags\":[{\"key\":\"span.kind\",\"type\":\"string\",\"value\":\"server\"},%s]}],"
		 "\"processes\":{\"p1\":{\"serviceName\":\"front\",\"tags\":[{\"key\":"
		 "\"hostname\",\"type\":\"string\",\"value\":\"h1\"}]},\"p2\":{\"serviceName\":"
		 "\"back\",\"tags\":[{\"key\":\"hostname\",\"type\":\"string\",\"value\":\"h2\"}]}}}]}",
		 more, more);
	for (int ignore = 0; ignore < 2; ignore++) {
		char *spaced = replace(j, ",", " , ");
		char *escaped = replace(j, "\"value\":\"server", "\"value\":\"\\u0073erver");
		char *o_spaced = replace(otlp, ":", " : ");
		char *o_escaped = replace(otlp, "\"GET", "\"\\u0047ET");
		const char *in[] = {j, spaced, escaped}, *oin[] = {otlp, o_spaced, o_escaped};

		for (int i = 0; i < N(in); i++) {
			const struct cp_sink *s = sink_of(&c);

			((struct cp_sink *)s)->ignores_tags = ignore;
			assert_int_equal(span_input__analyze_buffer("in.json", in[i], strlen(in[i]), s,
								    NULL),
					 1);
			assert_int_equal(c.r[0].nspans, 2);
			assert_non_null(strstr(c.warns, "skew"));
			if (strstr(c.warns, "dropped"))
				fail_msg("%d %d: %s", ignore, i, c.warns);
			if (!ignore) {
				assert_non_null(strstr(c.r[0].tags, "n=42"));
				assert_non_null(strstr(c.r[0].tags, "d=-1.5e3"));
				assert_non_null(strstr(c.r[0].tags, "b=true"));
				assert_non_null(strstr(c.r[0].tags, "f=false"));
				assert_non_null(strstr(c.r[0].tags, "late=x"));
				assert_null(strstr(c.r[0].tags, "z="));
			} else {
				assert_string_equal(c.r[0].tags, "");
			}
			if (!i && !ignore)
				first = c.r[0];
			else if (!ignore)
				assert_memory_equal(&first, &c.r[0], sizeof(first));
			else
				assert_memory_equal(&first.secs, &c.r[0].secs, sizeof(first.secs));

			s = sink_of(&c);
			((struct cp_sink *)s)->ignores_tags = ignore;
			assert_int_equal(span_input__analyze_buffer("o.json", oin[i], strlen(oin[i]), s,
								    NULL),
					 1);
			if (!ignore) {
				assert_non_null(strstr(c.r[0].tags, "i=7"));
				assert_non_null(strstr(c.r[0].tags, "bo=true"));
				assert_non_null(strstr(c.r[0].tags, "dv=2.5"));
				assert_non_null(strstr(c.r[0].tags, "late=s"));
				assert_null(strstr(c.r[0].tags, "arr="));
				assert_null(strstr(c.r[0].tags, "nv="));
				assert_null(strstr(c.r[0].tags, "Value="));
			}
			assert_string_equal(c.r[0].service, "api");
			assert_int_equal(c.r[0].latency_ns, 2000);
			if (!i && !ignore)
				first_o = c.r[0];
			else if (!ignore)
				assert_memory_equal(&first_o, &c.r[0], sizeof(first_o));
		}
		free(spaced);
		free(escaped);
		free(o_spaced);
		free(o_escaped);
	}
}

/* Every prefix and single-byte corruption of a small file: a clear result
 * (traces or a warning), never a crash (run under ASan by make test). */
static void test_truncation_and_flips(void **state)
{
	const char *s[][2] = {{"a", NULL}, {"b", "a"}, {"c", "b"}, {"d", "a"}};
	const long t[][2] = {{0, 100}, {10, 50}, {20, 10}, {70, 20}};
	char *j = jtrace("t1", s, t, N(s));
	size_t len = strlen(j);
	char *copy = malloc(len + 1);
	struct capture c;

	for (size_t cut = 0; cut < len; cut++) {
		int ret = span_input__analyze_buffer("cut", j, cut, sink_of(&c), NULL);

		/* the trace is complete only without the final "]}": then it counts */
		assert_true(ret == -EINVAL || (ret == 1 && cut >= len - 2));
		assert_true(c.nwarn >= 1);
	}
	for (size_t i = 0; i < len; i++) {
		static const char bytes[] = {'"', '{', ']', '-', 'x', 0, '9'};

		for (size_t k = 0; k < sizeof(bytes); k++) {
			int ret;

			memcpy(copy, j, len + 1);
			copy[i] = bytes[k];
			ret = span_input__analyze_buffer("flip", copy, len, sink_of(&c), NULL);
			/* (a flip can make a second root: two requests) */
			assert_true(ret == 1 || ret == 2 || ret == -EINVAL || ret == 0);
			assert_true(ret == 1 || c.nwarn >= 1);
		}
	}
	free(copy);
	free(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_missing_id),
	    cmocka_unit_test(test_negative_duration), cmocka_unit_test(test_negative_start),
	    cmocka_unit_test(test_duplicate_ids),
	    cmocka_unit_test(test_parent_cycle),
	    cmocka_unit_test(test_orphan),
	    cmocka_unit_test(test_exclude_op),
	    cmocka_unit_test(test_several_roots),
	    cmocka_unit_test(test_no_root),
	    cmocka_unit_test(test_nothing_usable),
	    cmocka_unit_test(test_warning_cap),
	    cmocka_unit_test(test_malformed_file),
	    cmocka_unit_test(test_junk_after_tag_value),
	    cmocka_unit_test(test_truncated_buffer),
	    cmocka_unit_test(test_not_a_trace_file),
	    cmocka_unit_test(test_jaeger_many_traces),
	    cmocka_unit_test(test_otlp),
	    cmocka_unit_test(test_tempo_batches),
	    cmocka_unit_test(test_truncation_and_flips),
	    cmocka_unit_test(test_raw_walk_and_simdjson),
	    cmocka_unit_test(test_compact_tags),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
