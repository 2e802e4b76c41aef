// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * The span input's reader (span/scan.c, span/json.cpp): a malformed trace
 * is warned and the ones after it are still read; bytes that are not UTF-8;
 * escapes; Jaeger's other top-level keys; OTLP JSON lines with a damaged
 * request; a trace larger than the first buffer; line numbers far into a
 * file and through a pipe (where what was read is gone).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "span_internal.h"

struct capture {
	int nreq, nwarn;
	char ids[16][64];
	char tags[512];
	uint32_t nspans[16];
	char warns[16384];
};

static int capture_request(void *ctx, const struct cp_request *r)
{
	struct capture *c = ctx;
	size_t o = 0;

	if (c->nreq < 16) {
		snprintf(c->ids[c->nreq], sizeof(c->ids[0]), "%s", r->id);
		c->nspans[c->nreq] = r->nspans;
	}
	c->nreq++;
	c->tags[0] = 0;
	for (const char *const *t = r->tags; t && *t && o < sizeof(c->tags) - 80; t++)
		o += snprintf(c->tags + o, sizeof(c->tags) - o, "%s%s", o ? " " : "", *t);
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

static void want_warning(struct capture *c, const char *part)
{
	if (!strstr(c->warns, part))
		fail_msg("no warning with '%s' in:\n%s", part, c->warns);
}

#define SPAN(id, parent, start, dur)                                                               \
	"{\"spanID\":\"" id "\",\"operationName\":\"op\",\"references\":[" parent                  \
	"],\"startTime\":" #start ",\"duration\":" #dur ",\"processID\":\"p1\"}"
#define CHILD_OF(id) "{\"refType\":\"CHILD_OF\",\"spanID\":\"" id "\"}"
#define PROCS ",\"processes\":{\"p1\":{\"serviceName\":\"svc\"}}}"

static void test_malformed_trace_then_good(void **state)
{
	struct capture c;
	const char *j =
	    "{\"data\":[\n"
	    "{\"traceID\":\"t1\",\"spans\":[" SPAN(
		"a", "", 1000,
		10) "]" PROCS ",\n"
		    "{\"traceID\":\"t2\",\"spans\":[{\"spanID\":\"b\" \"startTime\":1}]" PROCS ",\n"
		    "{\"traceID\":\"t3\",\"spans\":[" SPAN("c", "", 1000, 10) "]" PROCS "\n"
									      "]}";

	assert_int_equal(buf(&c, j), 2);
	assert_int_equal(c.nreq, 2);
	assert_string_equal(c.ids[0], "t1");
	assert_string_equal(c.ids[1], "t3");
	want_warning(&c, "in.json: malformed JSON at line 3");
	want_warning(&c, "trace t2 (1 spans read) skipped, the traces after it are still read");
}

static void test_not_utf8(void **state)
{
	struct capture c;
	const char *j =
	    "{\"data\":[{\"traceID\":\"t1\",\"spans\":[{\"spanID\":\"a\","
	    "\"startTime\":1000,\"duration\":10,\"processID\":\"p1\",\"tags\":["
	    "{\"key\":\"k\",\"type\":\"string\",\"value\":\"x\xff\xfey\"}]}]" PROCS "]}";

	assert_int_equal(buf(&c, j), 1);
	want_warning(&c, "2 bytes that are not UTF-8 read as '?'");
	assert_non_null(strstr(c.tags, "k=x??y"));
}

static void test_escapes_and_other_keys(void **state)
{
	struct capture c;
	/* ids with escapes, Jaeger's "total"/"errors" around "data", a number
	 * tag, a key that is not read holding every kind of value */
	const char *j =
	    "{\"total\":1,\"limit\":0,\"errors\":[{\"code\":1,\"msg\":\"x]}\"}],"
	    "\"data\":[{\"traceID\":\"t\\u0031\",\"spans\":["
	    "{\"spanID\":\"r\\u0041\",\"startTime\":1000,\"duration\":100,"
	    "\"processID\":\"p1\",\"logs\":[{\"a\":[1,2.5e3,true,null,\"]\"]}],"
	    "\"tags\":[{\"key\":\"n\",\"type\":\"int64\",\"value\":-42}]},"
	    "{\"spanID\":\"b\",\"references\":[" CHILD_OF(
		"r\\u0041") "],"
			    "\"startTime\":1010,\"duration\":10,\"processID\":\"p1\"}]" PROCS
			    "],\"offset\":0}";

	assert_int_equal(buf(&c, j), 1);
	assert_int_equal(c.nwarn, 0);
	assert_string_equal(c.ids[0], "t1");
	assert_int_equal(c.nspans[0], 2); /* b found its parent rA */
	assert_non_null(strstr(c.tags, "n=-42"));
}

static void test_bad_number(void **state)
{
	struct capture c;
	const char *j = "{\"data\":[{\"traceID\":\"t1\",\"spans\":[{\"spanID\":\"a\","
			"\"startTime\":01,\"duration\":10}]}]}";

	assert_int_equal(buf(&c, j), -EINVAL);
	want_warning(&c, "malformed JSON at line 1");
}

static void test_otlp_lines_with_a_damaged_request(void **state)
{
	struct capture c;
#define OTLP(tid, extra)                                                                           \
	"{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","            \
	"\"value\":{\"stringValue\":\"s\"}}]},\"scopeSpans\":[{\"spans\":[{\"traceId\":\"" tid     \
	"\",\"spanId\":\"01\",\"name\":\"GET\",\"startTimeUnixNano\":\"1000\","                    \
	"\"endTimeUnixNano\":\"3000\"" extra "}]}]}]}\n"
	const char *j = OTLP("aa", "") OTLP("bb", ",\"kind\":tru") OTLP("cc", "");

	assert_int_equal(buf(&c, j), 2);
	assert_string_equal(c.ids[0], "aa");
	assert_string_equal(c.ids[1], "cc");
	want_warning(&c, "malformed JSON at line 2");
	want_warning(&c, "the export request it is in (");
}

/* One OTLP export request on a line: one span of service svc. */
static int oline(char *b, size_t cap, const char *svc, const char *tid, const char *id,
		 const char *parent, long start, long end)
{
	return snprintf(b, cap,
			"{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":"
			"\"service.name\",\"value\":{\"stringValue\":\"%s\"}}]},\"scopeSpans\":"
			"[{\"spans\":[{\"traceId\":\"%s\",\"spanId\":\"%s\",%s%s%s\"name\":"
			"\"op%s\",\"startTimeUnixNano\":\"%ld\",\"endTimeUnixNano\":\"%ld\"}]}]}]}\n",
			svc, tid, id, parent ? "\"parentSpanId\":\"" : "", parent ? parent : "",
			parent ? "\"," : "", id, 1700000000000000000L + start,
			1700000000000000000L + end);
}

/* What .NET's exporter writes: a byte order mark, one export request per
 * line, a trace's spans over several of them (other traces between), its
 * root never exported: one request for the trace, under a placeholder for
 * the root, one warning. */
static void test_otlp_trace_over_lines(void **state)
{
	char j[4096];
	size_t o = 0;
	struct capture c;

	o += snprintf(j, sizeof(j), "\xef\xbb\xbf");
	o += oline(j + o, sizeof(j) - o, "front", "T", "b", "r", 1000, 5000);
	o += oline(j + o, sizeof(j) - o, "other", "U", "x", NULL, 0, 100);
	o += oline(j + o, sizeof(j) - o, "back", "T", "c", "r", 6000, 9000);
	o += oline(j + o, sizeof(j) - o, "back", "T", "d", "c", 7000, 8000);
	assert_int_equal(buf(&c, j), 2);
	assert_string_equal(c.ids[0], "U"); /* in the order they complete */
	assert_string_equal(c.ids[1], "T");
	assert_int_equal(c.nspans[1], 4); /* b, c, d and the placeholder for r */
	assert_int_equal(c.nwarn, 1);
	want_warning(&c, "in.json: trace T: 2 spans whose parent is not in the trace, under 1 "
			 "placeholder spans");
}

/* Several files are one input: a trace's child in one, its root in the
 * next, is one request without a warning. */
static void test_otlp_trace_over_files(void **state)
{
	char a[1024], b[1024];
	struct capture c;
	struct span_input *in = span_input__new(sink_of(&c), NULL);

	oline(a, sizeof(a), "back", "T", "c", "r", 2000, 3000);
	oline(b, sizeof(b), "front", "T", "r", NULL, 1000, 5000);
	assert_int_equal(span_input__buffer(in, "1.json", a, strlen(a)), 1);
	assert_int_equal(span_input__buffer(in, "2.json", b, strlen(b)), 1);
	assert_int_equal(c.nreq, 0); /* waiting for more */
	assert_int_equal(span_input__end(in), 1);
	span_input__free(in);
	assert_int_equal(c.nspans[0], 2);
	assert_int_equal(c.nwarn, 0);
}

/* A trace no span of which came for the window is analysed; spans of it
 * after that are warned and analysed as its next part. */
static void test_otlp_window(void **state)
{
	char j[8192];
	size_t o = 0;
	struct capture c;
	struct span_opts so = {.overlap_tolerance = 0.01, .window_bytes = 1000};

	o += oline(j + o, sizeof(j) - o, "s", "T", "a", NULL, 0, 5000);
	for (int i = 0; i < 6; i++) { /* 6 lines of about 280 bytes: past the window */
		char tid[8];

		snprintf(tid, sizeof(tid), "F%d", i);
		o += oline(j + o, sizeof(j) - o, "s", tid, "x", NULL, 0, 10);
	}
	o += oline(j + o, sizeof(j) - o, "s", "T", "b", "a", 1000, 2000);
	assert_int_equal(span_input__analyze_buffer("in.json", j, o, sink_of(&c), &so), 8);
	assert_string_equal(c.ids[0], "T");
	assert_int_equal(c.nspans[0], 1);
	assert_string_equal(c.ids[7], "T (part 2)");
	want_warning(&c, "in.json: trace T: 1 more spans came after it was analysed (no span of it "
			 "for the window: --trace-window): analysed again as part 2");
	/* the part: b under a placeholder for a */
	assert_int_equal(c.nspans[7], 2);
}

/* Thousands of traces analysed by the window (the memory of them grows
 * as they come): a late span of the first, and of one in the middle, is
 * still known as a second part. */
static void test_otlp_window_many(void **state)
{
	enum { N = 3000 };
	size_t cap = (N + 4) * 300, o = 0;
	char *j = malloc(cap);
	struct capture c;
	struct span_opts so = {.overlap_tolerance = 0.01, .window_bytes = 1000};

	assert_non_null(j);
	for (int i = 0; i < N; i++) {
		char tid[16];

		snprintf(tid, sizeof(tid), "F%d", i);
		o += oline(j + o, cap - o, "s", tid, "x", NULL, 0, 10);
	}
	o += oline(j + o, cap - o, "s", "F0", "y", "x", 2, 8);
	o += oline(j + o, cap - o, "s", "F1500", "y", "x", 2, 8);
	assert_int_equal(span_input__analyze_buffer("in.json", j, o, sink_of(&c), &so), N + 2);
	want_warning(&c, "in.json: trace F0: 1 more spans came after it was analysed (no span of "
			 "it for the window: --trace-window): analysed again as part 2");
	want_warning(&c, "in.json: trace F1500: 1 more spans came after it was analysed (no span "
			 "of it for the window: --trace-window): analysed again as part 2");
	free(j);
}

/* Zipkin v2 (a list of spans, or the API's list of lists): spans of many
 * traces in any order, services from localEndpoint, times in µs, tags an
 * object, and B3's shared span (the server side of its client's id). */
static void test_zipkin(void **state)
{
	struct capture c;
#define ZSPAN(tid, id, parent, kind, shared, svc, ts, dur)                                         \
	"{\"traceId\":\"" tid "\",\"id\":\"" id "\"," parent "\"kind\":\"" kind "\"," shared           \
	"\"name\":\"op\",\"timestamp\":" ts ",\"duration\":" dur ",\"localEndpoint\":"               \
	"{\"serviceName\":\"" svc "\"},\"tags\":{\"http.path\":\"/x\",\"n\":3}}"
	const char *one = "[" ZSPAN("t1", "b", "\"parentId\":\"a\",", "CLIENT", "", "front",
				    "1700000000000100", "500") ","
			  ZSPAN("t2", "z", "", "SERVER", "", "other", "1700000000000000", "50") ","
			  ZSPAN("t1", "b", "\"parentId\":\"a\",", "SERVER", "\"shared\":true,", "back",
				"1700000000000200", "300") ","
			  ZSPAN("t1", "a", "", "SERVER", "", "front", "1700000000000000", "1000") "]";
	const char *lists = "[[" ZSPAN("t1", "a", "", "SERVER", "", "front", "1700000000000000",
				       "1000") "],[" ZSPAN("t2", "z", "", "SERVER", "", "other",
							  "1700000000000000", "50") "]]";

	assert_int_equal(buf(&c, one), 2);
	assert_int_equal(c.nwarn, 0);
	assert_string_equal(c.ids[0], "t1");
	assert_int_equal(c.nspans[0], 3); /* a, b, and b's server side under it */
	assert_non_null(strstr(c.tags, "http.path=/x"));
	assert_string_equal(c.ids[1], "t2");
	assert_int_equal(buf(&c, lists), 2);
	assert_int_equal(c.nwarn, 0);
}

/* An empty trace file says so. */
static void test_no_traces(void **state)
{
	struct capture c;

	assert_int_equal(buf(&c, "{\"data\":[]}"), 0);
	want_warning(&c, "in.json: no traces in it (its \"data\" is empty)");
	assert_int_equal(buf(&c, "{\"resourceSpans\":[]}\n{\"resourceSpans\":[]}"), 0);
	want_warning(&c, "in.json: no traces in it (no spans in its resourceSpans)");
}

/* n traces of k spans each, the one at index bad damaged; returns the text. */
static char *many(int n, int k, int bad, size_t *len)
{
	size_t cap = (size_t)n * (k * 200 + 200) + 64, o = 0;
	char *b = malloc(cap);

	o += snprintf(b, cap, "{\"data\":[\n");
	for (int t = 0; t < n; t++) {
		o += snprintf(b + o, cap - o, "%s{\"traceID\":\"t%d\",\"spans\":[", t ? ",\n" : "",
			      t);
		for (int s = 0; s < k; s++)
			o += snprintf(b + o, cap - o,
				      "%s{\"spanID\":\"s%d\",\"references\":[%s%s%s],"
				      "\"startTime\":%d,\"duration\":%d,\"processID\":\"p1\"}",
				      s ? "," : "", s,
				      s ? "{\"refType\":\"CHILD_OF\",\"spanID\":\"s" : "",
				      s ? "0" : "", s ? "\"}" : "", 1000 + s, s ? 5 : 100000);
		o += snprintf(b + o, cap - o, "]%s", t == bad ? ",\"x\":" : "");
		o += snprintf(b + o, cap - o, ",\"processes\":{\"p1\":{\"serviceName\":\"svc\"}}}");
	}
	o += snprintf(b + o, cap - o, "\n]}\n");
	*len = o;
	return b;
}

static char *write_tmp(const char *b, size_t len)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/critpath-test-scan.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, len), (ssize_t)len);
	close(fd);
	return path;
}

static void test_large_trace_and_far_line(void **state)
{
	struct capture c;
	size_t len, len2;
	/* a 30,000-span trace (~3 MB, more than the first buffer), then damage
	 * on line 6000, past what the buffer still holds */
	char *big = many(1, 30000, -1, &len), *b = many(6000, 3, 5997, &len2), *path;

	path = write_tmp(big, len);
	assert_int_equal(span_input__analyze_file(path, sink_of(&c), NULL), 1);
	assert_int_equal(c.nspans[0], 30000);
	unlink(path);
	path = write_tmp(b, len2);
	assert_int_equal(span_input__analyze_file(path, sink_of(&c), NULL), 5999);
	want_warning(&c, "malformed JSON at line 5999");
	want_warning(&c, "trace t5997");
	unlink(path);
	free(big);
	free(b);
}

static void test_pipe(void **state)
{
	struct capture c;
	size_t len;
	char *b = many(6000, 3, 5997, &len), path[64];
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		size_t o = 0;

		close(p[0]);
		while (o < len) {
			ssize_t w = write(p[1], b + o, len - o > 4096 ? 4096 : len - o);

			if (w <= 0)
				_exit(1);
			o += w;
		}
		_exit(0);
	}
	close(p[1]);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[0]);
	assert_int_equal(span_input__analyze_file(path, sink_of(&c), NULL), 5999);
	want_warning(&c, "malformed JSON at line 5999"); /* counted as it was read */
	close(p[0]);
	waitpid(pid, NULL, 0);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_malformed_trace_then_good),
	    cmocka_unit_test(test_not_utf8),
	    cmocka_unit_test(test_escapes_and_other_keys),
	    cmocka_unit_test(test_bad_number),
	    cmocka_unit_test(test_otlp_lines_with_a_damaged_request),
	    cmocka_unit_test(test_otlp_trace_over_lines),
	    cmocka_unit_test(test_otlp_trace_over_files),
	    cmocka_unit_test(test_otlp_window),
	    cmocka_unit_test(test_otlp_window_many),
	    cmocka_unit_test(test_no_traces),
	    cmocka_unit_test(test_zipkin),
	    cmocka_unit_test(test_large_trace_and_far_line),
	    cmocka_unit_test(test_pipe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
