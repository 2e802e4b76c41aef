// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * The span-level critical path: every row of issue 3's table, the skew
 * rules (capping of remote server spans), and a 100,000-deep chain. Traces
 * are written as Jaeger JSON and go through the real parser and walk, with
 * a sink that records what the engine would get.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "span_internal.h"

#define BASE_US 1700000000000000LL /* times are written relative to this epoch µs */

struct tspan {
	const char *id, *parent;
	long long start, end; /* µs */
	const char *extra;    /* "follows", "client", "server", "p2" (process), … */
};

struct capture {
	int nreq;
	char secs[4096]; /* "A[0,10] B[10,30] …" of the last request, µs */
	char excl[4096]; /* "A40 B20 …": spans with exclusive time > 0, by id */
	uint64_t latency_ns, sum_ns;
	uint32_t nsegs;
	bool partial;
	char service[64], name[64];
	char frames[1024]; /* frames of the last segment, joined by ';' */
	uint32_t max_nframes;
	char deepest[64]; /* last two frames of the segment with the most */
	char deepest_id[32];
	char tags[1024];
	int nwarn;
	char warns[8192];
};

static int cmp_stat(const void *a, const void *b)
{
	const struct cp_span_stat *x = a, *y = b;
	return strcmp(x->span_id, y->span_id);
}

static int capture_request(void *ctx, const struct cp_request *r)
{
	struct capture *c = ctx;
	struct cp_span_stat *st = malloc(sizeof(*st) * (r->nspans + 1));
	size_t o = 0;

	c->nreq++;
	c->secs[0] = c->excl[0] = c->frames[0] = c->tags[0] = 0;
	c->latency_ns = r->end_ns - r->start_ns;
	c->nsegs = r->nsegs;
	c->partial = r->partial;
	c->sum_ns = 0;
	snprintf(c->service, sizeof(c->service), "%s", r->service);
	snprintf(c->name, sizeof(c->name), "%s", r->name);
	for (uint32_t i = 0; i < r->nsegs; i++) {
		const struct cp_segment *s = &r->segs[i];

		c->sum_ns += s->end_ns - s->start_ns;
		if (i && s->start_ns != r->segs[i - 1].end_ns)
			c->sum_ns = (uint64_t)-1; /* a gap or overlap: tiling broken */
		if (o < sizeof(c->secs) - 64)
			o += snprintf(c->secs + o, sizeof(c->secs) - o, "%s%s[%lld,%lld]",
				      i ? " " : "", s->span_id,
				      (long long)(s->start_ns / 1000 - BASE_US),
				      (long long)(s->end_ns / 1000 - BASE_US));
	}
	c->max_nframes = 0;
	c->deepest_id[0] = 0;
	for (uint32_t i = 0; i < r->nsegs; i++) {
		const struct cp_segment *s = &r->segs[i];

		/* the most frames; among equals, the largest span id (the chain's last) */
		if (s->nframes >= 2 &&
		    (s->nframes > c->max_nframes ||
		     (s->nframes == c->max_nframes && strcmp(s->span_id, c->deepest_id) > 0))) {
			snprintf(c->deepest_id, sizeof(c->deepest_id), "%s", s->span_id);
			c->max_nframes = s->nframes;
			snprintf(c->deepest, sizeof(c->deepest), "%s;%s", s->frames[s->nframes - 2],
				 s->frames[s->nframes - 1]);
		}
	}
	if (r->nsegs) {
		const struct cp_segment *s = &r->segs[r->nsegs - 1];

		o = 0;
		for (uint32_t k = 0; k < s->nframes && o < sizeof(c->frames) - 80; k++)
			o += snprintf(c->frames + o, sizeof(c->frames) - o, "%s%s", k ? ";" : "",
				      s->frames[k]);
	}
	memcpy(st, r->spans, sizeof(*st) * r->nspans);
	qsort(st, r->nspans, sizeof(*st), cmp_stat);
	o = 0;
	for (uint32_t i = 0; i < r->nspans; i++)
		if (st[i].exclusive_ns && o < sizeof(c->excl) - 64)
			o += snprintf(c->excl + o, sizeof(c->excl) - o, "%s%s%llu", o ? " " : "",
				      st[i].span_id, (unsigned long long)st[i].exclusive_ns / 1000);
	o = 0;
	for (const char *const *t = r->tags; t && *t && o < sizeof(c->tags) - 80; t++)
		o += snprintf(c->tags + o, sizeof(c->tags) - o, "%s%s", o ? " " : "", *t);
	free(st);
	return 0;
}

static void capture_warn(void *ctx, const char *msg)
{
	struct capture *c = ctx;
	size_t o = strlen(c->warns);

	c->nwarn++;
	snprintf(c->warns + o, sizeof(c->warns) - o, "%s\n", msg);
}

/* Writes one Jaeger trace; "server"/"client" set span.kind, "p2" puts the
 * span in a second process (another host), "follows" makes the reference
 * FOLLOWS_FROM. */
static char *jaeger(const struct tspan *sp, int n)
{
	size_t cap = 4096 + (size_t)n * 512, o = 0;
	char *b = malloc(cap);

	o += snprintf(b + o, cap - o, "{\"data\":[{\"traceID\":\"t1\",\"spans\":[");
	for (int i = 0; i < n; i++) {
		const char *x = sp[i].extra ? sp[i].extra : "";
		const char *kind = strstr(x, "server")	 ? "server"
				   : strstr(x, "client") ? "client"
							 : 0;

		o += snprintf(b + o, cap - o,
			      "%s{\"traceID\":\"t1\",\"spanID\":\"%s\",\"operationName\":\"op%s\","
			      "\"startTime\":%lld,\"duration\":%lld,\"processID\":\"%s\",",
			      i ? "," : "", sp[i].id, sp[i].id, BASE_US + sp[i].start,
			      sp[i].end - sp[i].start, strstr(x, "p2") ? "p2" : "p1");
		if (sp[i].parent)
			o += snprintf(b + o, cap - o,
				      "\"references\":[{\"refType\":\"%s\",\"traceID\":\"t1\","
				      "\"spanID\":\"%s\"}],",
				      strstr(x, "follows") ? "FOLLOWS_FROM" : "CHILD_OF",
				      sp[i].parent);
		else
			o += snprintf(b + o, cap - o, "\"references\":[],");
		o += snprintf(b + o, cap - o, "\"tags\":[");
		if (kind)
			o += snprintf(
			    b + o, cap - o,
			    "{\"key\":\"span.kind\",\"type\":\"string\",\"value\":\"%s\"}", kind);
		o += snprintf(b + o, cap - o, "],\"logs\":[],\"warnings\":null}");
	}
	o +=
	    snprintf(b + o, cap - o,
		     "],\"processes\":{\"p1\":{\"serviceName\":\"front\",\"tags\":[{\"key\":"
		     "\"hostname\",\"type\":\"string\",\"value\":\"h1\"}]},\"p2\":{\"serviceName\":"
		     "\"back\",\"tags\":[{\"key\":\"hostname\",\"type\":\"string\",\"value\":"
		     "\"h2\"}]}}}]}");
	return b;
}

static int analyze(struct capture *c, const char *json, double tol)
{
	struct cp_sink sink = {capture_request, capture_warn, c};
	struct span_opts o = {.overlap_tolerance = tol};

	memset(c, 0, sizeof(*c));
	return span_input__analyze_buffer("test.json", json, strlen(json), &sink, &o);
}

static void run_case(const struct tspan *sp, int n, double tol, const char *secs, const char *excl)
{
	struct capture c;
	char *json = jaeger(sp, n);
	int ret = analyze(&c, json, tol);

	free(json);
	assert_int_equal(ret, 1);
	assert_int_equal(c.nreq, 1);
	if (secs)
		assert_string_equal(c.secs, secs);
	if (excl)
		assert_string_equal(c.excl, excl);
	assert_int_equal(c.sum_ns, c.latency_ns); /* sections tile the root */
}

#define DEF 0.01
#define N(a) ((int)(sizeof(a) / sizeof(a[0])))

static void test_sequential(void **state)
{
	const struct tspan t[] = {
	    {"A", NULL, 0, 100}, {"B", "A", 10, 30}, {"C", "A", 40, 50}, {"D", "A", 60, 90}};
	run_case(t, N(t), DEF, "A[0,10] B[10,30] A[30,40] C[40,50] A[50,60] D[60,90] A[90,100]",
		 "A40 B20 C10 D30");
}

static void test_overlapping_siblings_strict(void **state)
{
	const struct tspan t[] = {{"X", NULL, 1, 101}, {"A", "X", 10, 50}, {"C", "X", 20, 60}};
	run_case(t, N(t), 0, "X[1,20] C[20,60] X[60,101]", "C40 X60");
}

static void test_nested_fork_join(void **state)
{
	const struct tspan t[] = {
	    {"A", NULL, 0, 100}, {"B", "A", 10, 70}, {"C", "B", 25, 45}, {"D", "B", 30, 50}};
	run_case(t, N(t), DEF, NULL, "A40 B40 D20");
}

static void test_child_overruns_parent(void **state)
{
	const struct tspan t[] = {{"A", NULL, 0, 100}, {"B", "A", 10, 70}, {"C", "B", 20, 120}};
	run_case(t, N(t), DEF, "A[0,10] B[10,20] C[20,70] A[70,100]", "A40 B10 C50");
}

static void test_child_starts_before_parent(void **state)
{
	const struct tspan t[] = {{"A", NULL, 1, 30}, {"B", "A", 15, 35}, {"C", "B", 10, 25}};
	run_case(t, N(t), 0, "A[1,15] C[15,25] B[25,30]", NULL);
	run_case(t, N(t), DEF, "A[1,15] C[15,25] B[25,30]", NULL);
}

static void test_child_wholly_outside(void **state)
{
	const struct tspan t[] = {
	    {"A", NULL, 0, 100}, {"B", "A", 110, 160}, {"C", "B", 120, 150}, {"D", "A", 60, 90}};
	struct capture c;
	char *json = jaeger(t, N(t));

	run_case(t, N(t), DEF, "A[0,60] D[60,90] A[90,100]", "A70 D30");
	assert_int_equal(analyze(&c, json, DEF), 1);
	free(json);
	assert_non_null(strstr(c.warns, "span B"));
	assert_non_null(strstr(c.warns, "outside its parent"));
	assert_true(c.partial);
}

static void test_near_serial_overlap(void **state)
{
	const struct tspan t[] = {
	    {"A", NULL, 0, 1000}, {"B", "A", 10, 210}, {"C", "A", 209, 309}, {"D", "A", 308, 608}};
	run_case(t, N(t), DEF, NULL, "A402 B199 C99 D300");
	run_case(t, N(t), 0, NULL, "A500 B200 D300");
}

static void test_async_child(void **state)
{
	const struct tspan t[] = {{"A", NULL, 1, 31}, {"B", "A", 10, 20, "follows"}};
	run_case(t, N(t), DEF, "A[1,31]", "A30");
}

static void test_zero_length_child(void **state)
{
	const struct tspan t[] = {{"P", NULL, 0, 200}, {"X", "P", 100, 150}, {"Z", "P", 100, 100}};
	run_case(t, N(t), DEF, "P[0,100] X[100,150] P[150,200]", "P150 X50");
}

static void test_tie_on_end(void **state)
{
	/* equal ends: the earlier start wins; equal starts too: the smaller id */
	const struct tspan t[] = {{"A", NULL, 0, 100}, {"B", "A", 20, 80}, {"C", "A", 10, 80}};
	const struct tspan u[] = {{"A", NULL, 0, 100}, {"C", "A", 10, 80}, {"B", "A", 10, 80}};
	run_case(t, N(t), DEF, "A[0,10] C[10,80] A[80,100]", NULL);
	run_case(u, N(u), DEF, "A[0,10] B[10,80] A[80,100]", NULL);
}

static void test_remote_server_capped(void **state)
{
	/* the server span (other host) is 100 µs late: moved to the middle of
	 * its client span, with its child, instead of being dropped */
	const struct tspan t[] = {{"R", NULL, 0, 200},
				  {"C", "R", 50, 150, "client"},
				  {"S", "C", 200, 260, "server p2"},
				  {"T", "S", 210, 220, "p2"}};
	/* the same on one host: wholly outside, dropped */
	const struct tspan u[] = {
	    {"R", NULL, 0, 200}, {"C", "R", 50, 150, "client"}, {"S", "C", 200, 260, "server"}};
	/* longer than its client: capped to the client's interval */
	const struct tspan v[] = {
	    {"R", NULL, 0, 200}, {"C", "R", 50, 150, "client"}, {"S", "C", 40, 190, "server p2"}};

	struct capture c;
	char *json;

	run_case(t, N(t), DEF, "R[0,50] C[50,70] S[70,80] T[80,90] S[90,130] C[130,150] R[150,200]",
		 NULL);
	run_case(u, N(u), DEF, "R[0,50] C[50,150] R[150,200]", NULL);
	run_case(v, N(v), DEF, "R[0,50] S[50,150] R[150,200]", NULL);
	/* never silently: one warning for the trace counts them */
	json = jaeger(t, N(t));
	assert_int_equal(analyze(&c, json, DEF), 1);
	free(json);
	assert_int_equal(c.nwarn, 1);
	assert_non_null(strstr(c.warns, "1 server spans lay outside their client span (clock skew "
					"between hosts): moved inside it"));
}

static void test_frames_and_service(void **state)
{
	const struct tspan t[] = {
	    {"R", NULL, 0, 200}, {"C", "R", 50, 150, "client"}, {"S", "C", 60, 140, "server p2"}};
	struct capture c;
	char *json = jaeger(t, N(t));

	assert_int_equal(analyze(&c, json, DEF), 1);
	free(json);
	assert_string_equal(c.service, "front");
	assert_string_equal(c.name, "opR");
	/* the last section is R's: its call path is the root alone */
	assert_string_equal(c.frames, "front opR");
	assert_non_null(strstr(c.tags, "span.kind=server"));
	assert_non_null(strstr(c.tags, "hostname=h2"));
	assert_false(c.partial);
}

/* Call paths deeper than 32 levels keep the first 30, "…" and the span's own
 * level, so frames stay linear in the number of spans. */
static void test_frames_capped(void **state)
{
	struct tspan t[40];
	char ids[40][8];
	struct capture c;
	char *json;

	for (int i = 0; i < 40; i++) {
		snprintf(ids[i], sizeof(ids[i]), "s%02d", i);
		t[i] = (struct tspan){ids[i], i ? ids[i - 1] : NULL, i, 100 - i};
	}
	json = jaeger(t, 40);
	assert_int_equal(analyze(&c, json, DEF), 1);
	free(json);
	assert_int_equal(c.max_nframes, 32);
	assert_string_equal(c.deepest, "…;front ops39");
}

static void test_deep_chain(void **state)
{
	const int n = 100000;
	struct tspan *t = malloc(sizeof(*t) * n);
	char(*ids)[16] = malloc(16 * (size_t)n);
	struct capture c;
	struct timespec a, b;
	char *json;
	double s;

	for (int i = 0; i < n; i++) {
		snprintf(ids[i], 16, "%x", i + 1);
		t[i] = (struct tspan){ids[i], i ? ids[i - 1] : NULL, i, 2LL * n - i};
	}
	json = jaeger(t, n);
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(analyze(&c, json, DEF), 1);
	clock_gettime(CLOCK_MONOTONIC, &b);
	s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	print_message("# 100000-deep chain: %.3f s\n", s);
	assert_true(s < 5.0);
	assert_int_equal(c.nsegs, 2 * n - 1);
	assert_int_equal(c.sum_ns, c.latency_ns);
	assert_int_equal(c.latency_ns, 2000ULL * n);
	free(json);
	free(t);
	free(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sequential),
	    cmocka_unit_test(test_overlapping_siblings_strict),
	    cmocka_unit_test(test_nested_fork_join),
	    cmocka_unit_test(test_child_overruns_parent),
	    cmocka_unit_test(test_child_starts_before_parent),
	    cmocka_unit_test(test_child_wholly_outside),
	    cmocka_unit_test(test_near_serial_overlap),
	    cmocka_unit_test(test_async_child),
	    cmocka_unit_test(test_zero_length_child),
	    cmocka_unit_test(test_tie_on_end),
	    cmocka_unit_test(test_remote_server_capped),
	    cmocka_unit_test(test_frames_and_service),
	    cmocka_unit_test(test_frames_capped),
	    cmocka_unit_test(test_deep_chain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
