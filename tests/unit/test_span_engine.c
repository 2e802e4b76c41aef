// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * span.h on the real engine: traces become requests, warnings name file,
 * trace and span, and the average critical path merges sections by call
 * path ("service operation" per level from the root).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine.h"
#include "span.h"

/* Two traces of the same shape (root 0..100 µs calling "db" 10..50 µs) and
 * one orphan in the second: a request of its own, under a placeholder. */
static const char two_traces[] =
    "{\"data\":["
    "{\"traceID\":\"t1\",\"spans\":["
    "{\"spanID\":\"a\",\"operationName\":\"GET\",\"startTime\":1700000000000000,"
    "\"duration\":100,\"processID\":\"p1\"},"
    "{\"spanID\":\"b\",\"operationName\":\"query\",\"references\":[{\"refType\":\"CHILD_OF\","
    "\"spanID\":\"a\"}],\"startTime\":1700000000000010,\"duration\":40,\"processID\":\"p2\","
    "\"tags\":[{\"key\":\"db\",\"type\":\"string\",\"value\":\"users\"}]}],"
    "\"processes\":{\"p1\":{\"serviceName\":\"web\"},\"p2\":{\"serviceName\":\"db\"}}},"
    "{\"traceID\":\"t2\",\"spans\":["
    "{\"spanID\":\"a\",\"operationName\":\"GET\",\"startTime\":1700000001000000,"
    "\"duration\":100,\"processID\":\"p1\"},"
    "{\"spanID\":\"b\",\"operationName\":\"query\",\"references\":[{\"refType\":\"CHILD_OF\","
    "\"spanID\":\"a\"}],\"startTime\":1700000001000010,\"duration\":40,\"processID\":\"p2\"},"
    "{\"spanID\":\"c\",\"operationName\":\"lost\",\"references\":[{\"refType\":\"CHILD_OF\","
    "\"spanID\":\"zz\"}],\"startTime\":1700000001000060,\"duration\":10,\"processID\":\"p1\"}],"
    "\"processes\":{\"p1\":{\"serviceName\":\"web\"},\"p2\":{\"serviceName\":\"db\"}}}]}";

static const struct engine_profile_entry *find(const struct engine_result *r, const char *f0,
					       const char *f1)
{
	for (uint32_t i = 0; i < r->nprofile; i++) {
		const struct engine_profile_entry *p = &r->profile[i];

		if (p->nframes == (f1 ? 2u : 1u) && !strcmp(p->frames[0], f0) &&
		    (!f1 || !strcmp(p->frames[1], f1)))
			return p;
	}
	return NULL;
}

static void test_average_path_by_call_path(void **state)
{
	struct engine_opts eo = {.overlap_tolerance = 0.01, .keep_slowest = 2};
	struct span_opts so = {.overlap_tolerance = 0.01};
	struct engine *e = engine__new(&eo);
	const struct engine_result *r;
	const struct engine_profile_entry *root, *db;
	bool warned = false;

	assert_non_null(e);
	engine__set_quiet(e, true);
	assert_int_equal(span_input__analyze_buffer("x.json", two_traces, sizeof(two_traces) - 1,
						    (struct cp_sink[]){engine__sink(e)}, &so),
			 3);
	r = engine__result(e);
	assert_int_equal(r->nrequests, 3);
	root = find(r, "web GET", NULL);
	db = find(r, "web GET", "db query");
	assert_non_null(root);
	assert_non_null(db);
	/* both traces' db sections merged: 40 µs each */
	assert_int_equal(db->requests, 2);
	assert_int_equal(db->total_ns, 80000);
	/* root: 60 µs in each */
	assert_int_equal(root->total_ns, 120000);
	assert_non_null(find(r, "(missing) (missing span)", "web lost"));
	for (uint32_t i = 0; i < r->nwarnings; i++)
		if (strstr(r->warnings[i], "x.json: trace t2: 1 spans whose parent is not in the "
					   "trace, under 1 placeholder"))
			warned = true;
	assert_true(warned);
	engine__free(e);
}

static void test_tag_filter(void **state)
{
	struct engine_opts eo = {.filter.tag = "db=users", .keep_slowest = 1};
	struct engine *e = engine__new(&eo);

	assert_non_null(e);
	engine__set_quiet(e, true);
	/* both traces are analysed and handed over; the engine keeps the tagged one */
	assert_int_equal(span_input__analyze_buffer("x.json", two_traces, sizeof(two_traces) - 1,
						    (struct cp_sink[]){engine__sink(e)}, NULL),
			 3);
	assert_int_equal(engine__result(e)->nrequests, 1);
	engine__free(e);
}

/* n traces: "web GET" (0..100 µs) calling "db q<i>" (10..50 µs), an
 * operation name of its own each (an id in the name). */
static char *distinct_names(int n, size_t *len)
{
	size_t cap = 512 + (size_t)n * 512, o = 0;
	char *b = malloc(cap);

	assert_non_null(b);
	o += snprintf(b + o, cap - o, "{\"data\":[");
	for (int i = 0; i < n; i++)
		o += snprintf(b + o, cap - o,
			      "%s{\"traceID\":\"t%d\",\"spans\":["
			      "{\"spanID\":\"a\",\"operationName\":\"GET\",\"startTime\":%lld,"
			      "\"duration\":100,\"processID\":\"p1\"},"
			      "{\"spanID\":\"b\",\"operationName\":\"q%d\",\"references\":[{"
			      "\"refType\":\"CHILD_OF\",\"spanID\":\"a\"}],\"startTime\":%lld,"
			      "\"duration\":40,\"processID\":\"p2\"}],\"processes\":{\"p1\":{"
			      "\"serviceName\":\"web\"},\"p2\":{\"serviceName\":\"db\"}}}",
			      i ? "," : "", i, 1700000000000000LL + i * 1000LL, i,
			      1700000000000010LL + i * 1000LL);
	o += snprintf(b + o, cap - o, "]}");
	*len = o;
	return b;
}

/* The engine eo makes, after it read json (quiet; every trace a request). */
static struct engine *analysed(const struct engine_opts *eo, const char *json, size_t len,
			       int ntraces)
{
	struct engine *e = engine__new(eo);

	assert_non_null(e);
	engine__set_quiet(e, true);
	assert_int_equal(span_input__analyze_buffer("x.json", json, len,
						    (struct cp_sink[]){engine__sink(e)}, NULL),
			 ntraces);
	return e;
}

/* Past --max-paths distinct steps and span paths, a new one's time goes to
 * its longest beginning seen, then "(other paths)": bounded rows, no time
 * lost, one warning. */
static void test_max_paths(void **state)
{
	struct engine_opts eo = {.overlap_tolerance = 0.01, .max_paths = 5};
	size_t len;
	char *json = distinct_names(50, &len);
	struct engine *e = analysed(&eo, json, len, 50);
	const struct engine_result *r;
	const struct engine_profile_entry *other;
	const struct engine_span_entry *sp = NULL;
	uint64_t total = 0;
	bool warned = false;

	r = engine__result(e);
	assert_int_equal(r->nrequests, 50);
	/* the root's step and four others kept, then one fold below the root */
	assert_int_equal(r->nprofile, 6);
	other = find(r, "web GET", ENGINE_OTHER);
	assert_non_null(other);
	assert_int_equal(other->requests, 46);
	assert_int_equal(other->total_ns, 46 * 40000);
	for (uint32_t i = 0; i < r->nprofile; i++)
		total += r->profile[i].total_ns;
	assert_int_equal(total, 50 * 100000);
	assert_int_equal(r->nspan_paths, 6);
	for (uint32_t i = 0; i < r->nspans; i++)
		if (r->spans[i].nframes == 2 && !strcmp(r->spans[i].frames[1], ENGINE_OTHER))
			sp = &r->spans[i];
	assert_non_null(sp);
	assert_string_equal(sp->service, "web");
	assert_string_equal(sp->operation, ENGINE_OTHER);
	assert_int_equal(sp->count, 46);
	assert_int_equal(sp->exclusive_ns, 46 * 40000);
	for (uint32_t i = 0; i < r->nwarnings; i++)
		if (strstr(r->warnings[i], "more than 5 distinct call paths: from here on, the "
					   "time of a new one is counted under its longest "
					   "beginning already seen, then \"(other paths)\" "
					   "(--max-paths)"))
			warned = true;
	assert_true(warned);
	engine__free(e);

	/* the default keeps them all */
	eo.max_paths = 0;
	e = analysed(&eo, json, len, 50);
	r = engine__result(e);
	assert_int_equal(r->nprofile, 51);
	assert_int_equal(r->nspan_paths, 51);
	assert_null(find(r, "web GET", ENGINE_OTHER));
	engine__free(e);
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_average_path_by_call_path),
	    cmocka_unit_test(test_tag_filter),
	    cmocka_unit_test(test_max_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
