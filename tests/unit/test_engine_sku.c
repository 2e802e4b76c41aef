// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* CPU time by SKU (engine/sku.c) on hand-built requests: the comparison with
 * the baseline, its verdicts, the split when a second SKU appears (also in
 * the middle of a request), and the text and JSON sections. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine_fixture.h"

#define US 1000ull

static const char *const fr_front[] = {"frontend:8080", "GET /item"};
static const char *const fr_kv[] = {"frontend:8080", "GET /item", "kvstore:7000 get"};

/* A request: cpu a_ns in frontend on sku_a, 1 ms of network, cpu b_ns in
 * the kv call on sku_b. SKU strings are copied, as a producer's would be
 * (the engine interns them). */
static void add(struct engine *e, int i, const char *sku_a, const char *sku_b, const char *model,
		uint64_t a_ns, uint64_t b_ns)
{
	struct cp_segment g[3];
	struct cp_request q = {0};
	char id[32], *ska = sku_a ? strdup(sku_a) : NULL, *skb = sku_b ? strdup(sku_b) : NULL;
	uint64_t t = 1000 * MS + (uint64_t)i * 10 * MS;

	memset(g, 0, sizeof(g));
	snprintf(id, sizeof(id), "100:1:%d", i);
	q.id = id;
	q.service = "frontend:8080";
	q.name = "GET /item";
	q.start_ns = t;
	for (int k = 0; k < 3; k++) {
		g[k].pid = g[k].tid = 100;
		g[k].cpu = k;
		g[k].comm = "frontend";
		g[k].cpu_model = model;
		g[k].frames = fr_front;
		g[k].nframes = 2;
	}
	g[0].category = CP_CAT_CPU;
	g[0].sku = ska;
	g[0].start_ns = t;
	g[0].end_ns = t += a_ns;
	g[1].category = CP_CAT_NETWORK;
	g[1].cpu = -1;
	g[1].cpu_model = NULL;
	g[1].start_ns = t;
	g[1].end_ns = t += MS;
	g[2].category = CP_CAT_CPU;
	g[2].sku = skb;
	g[2].frames = fr_kv;
	g[2].nframes = 3;
	g[2].start_ns = t;
	g[2].end_ns = t += b_ns;
	q.end_ns = t;
	q.segs = g;
	q.nsegs = 3;
	assert_int_equal(engine__add_request(e, &q), 1);
	free(ska);
	free(skb);
}

static const struct engine_sku_step *step(const struct engine_result *r, uint32_t nframes,
					  bool whole)
{
	for (uint32_t i = 0; i < r->nsku_steps; i++)
		if (r->sku_steps[i].nframes == nframes && r->sku_steps[i].whole == whole)
			return &r->sku_steps[i];
	return NULL;
}

static const struct engine_sku_stat *on(const struct engine_sku_step *s, const char *sku)
{
	for (uint32_t i = 0; s && i < s->nby_sku; i++)
		if (!strcmp(s->by_sku[i].sku, sku))
			return &s->by_sku[i];
	return NULL;
}

static bool within(double v, double want, double rel)
{
	return v >= want * (1 - rel) && v <= want * (1 + rel);
}

/* The text and JSON reports of r (free() both). */
static void render(const struct engine_result *r, char **text, char **json)
{
	size_t len;
	FILE *f = open_memstream(text, &len);

	assert_int_equal(out_text(f, r, &(struct out_opts){0}), 0);
	fclose(f);
	f = open_memstream(json, &len);
	assert_int_equal(out_json(f, r, &(struct out_opts){0}), 0);
	fclose(f);
}

/* 30 requests on "m5" (the frontend's cpu 1 ms, the kv call's 2 ms, ±2%),
 * then 30 on "c7" where the frontend takes 1.5 ms and the kv call the same. */
static struct engine *two_skus(int n_c7)
{
	struct engine *e = engine__new(&(struct engine_opts){0});

	assert_non_null(e);
	for (int i = 0; i < 30; i++)
		add(e, i, "m5", "m5", "Model X", 1000 * US + (uint64_t)(i % 5) * 10 * US,
		    2000 * US + (uint64_t)(i % 3) * 20 * US);
	for (int i = 0; i < n_c7; i++)
		add(e, 100 + i, "c7", "c7", "Model X", 1500 * US + (uint64_t)(i % 5) * 15 * US,
		    2000 * US + (uint64_t)(i % 3) * 20 * US);
	return e;
}

static void test_slower_and_same(void **state)
{
	struct engine *e = two_skus(30);
	const struct engine_result *r = engine__result(e);
	const struct engine_sku_step *front, *kv, *whole;
	const struct engine_sku_stat *m5, *c7;

	assert_int_equal(r->nskus, 2);
	/* 30 requests each: the baseline is the first by name */
	assert_string_equal(r->skus[0].sku, "c7");
	assert_int_equal(r->skus[0].requests, 30);
	assert_int_equal(r->skus[1].requests, 30);
	assert_int_equal(r->nsku_steps, 3);
	front = step(r, 2, false);
	kv = step(r, 3, false);
	whole = step(r, 2, true);
	assert_non_null(front);
	assert_non_null(kv);
	assert_non_null(whole);
	/* the baseline comes first in each */
	assert_string_equal(front->by_sku[0].sku, "c7");
	assert_int_equal(front->by_sku[0].verdict, ENGINE_SKU_BASELINE);
	/* the frontend's step is 1/1.5 of the baseline's on m5: faster */
	m5 = on(front, "m5");
	c7 = on(front, "c7");
	assert_int_equal(m5->requests, 30);
	assert_int_equal(c7->requests, 30);
	assert_true(within((double)m5->mean_ns, 1020 * US, 0.01));
	assert_true(within((double)c7->mean_ns, 1530 * US, 0.01));
	assert_true(within(m5->ratio, 1020.0 / 1530, 0.01));
	assert_true(m5->ci_low < m5->ratio && m5->ratio < m5->ci_high);
	assert_int_equal(m5->verdict, ENGINE_SKU_FASTER);
	assert_true(front->sensitive);
	/* the kv call's cpu does not depend on the SKU */
	assert_int_equal(on(kv, "m5")->verdict, ENGINE_SKU_SAME);
	assert_false(kv->sensitive);
	/* the whole request: 3.02 vs 3.55 ms */
	assert_true(within(on(whole, "m5")->ratio, 3040.0 / 3550, 0.02));
	assert_int_equal(on(whole, "m5")->verdict, ENGINE_SKU_FASTER);
	assert_string_equal(whole->frames[0], "frontend:8080");
	assert_string_equal(whole->frames[1], "GET /item");
	for (uint32_t i = 1; i < r->nsku_steps; i++)
		assert_true(r->sku_steps[i - 1].total_ns >= r->sku_steps[i].total_ns);
	engine__free(e);
}

static void test_too_few(void **state)
{
	struct engine *e = two_skus(5);
	const struct engine_result *r = engine__result(e);

	assert_int_equal(r->nskus, 2);
	assert_string_equal(r->skus[0].sku, "m5");
	assert_int_equal(on(step(r, 2, false), "c7")->verdict, ENGINE_SKU_FEW);
	assert_false(step(r, 2, false)->sensitive);
	engine__free(e);
}

/* Equal means, much noise, few requests: neither the same nor different. */
static void test_unclear(void **state)
{
	struct engine *e = engine__new(&(struct engine_opts){0});
	const struct engine_result *r;

	for (int i = 0; i < 24; i++)
		add(e, i, i < 12 ? "a" : "b", i < 12 ? "a" : "b", NULL,
		    i % 2 ? 300 * US : 1700 * US, 1 * MS);
	r = engine__result(e);
	assert_int_equal(on(step(r, 2, false), "b")->verdict, ENGINE_SKU_UNCLEAR);
	assert_true(within(on(step(r, 2, false), "b")->ratio, 1.0, 0.001));
	engine__free(e);
}

/* The split when the second SKU comes in the middle of a request (a host
 * with two kinds of CPU): what the first SKU had stays its own, and the
 * request counts on both. */
static void test_split_mid_request(void **state)
{
	struct engine *e = engine__new(&(struct engine_opts){0});
	const struct engine_result *r;
	const struct engine_sku_step *kv, *front;

	for (int i = 0; i < 12; i++)
		add(e, i, "big", "big", NULL, 1 * MS, 2 * MS);
	for (int i = 0; i < 12; i++)
		add(e, 100 + i, "big", "little", NULL, 1 * MS, 4 * MS);
	r = engine__result(e);
	assert_int_equal(r->nskus, 2);
	assert_string_equal(r->skus[0].sku, "big");
	assert_int_equal(r->skus[0].requests, 24);
	assert_int_equal(r->skus[0].cpu_ns, 24 * MS + 12 * 2 * MS);
	assert_int_equal(r->skus[1].requests, 12);
	assert_int_equal(r->skus[1].cpu_ns, 12 * 4 * MS);
	/* the frontend's step ran on big only: not compared */
	front = step(r, 2, false);
	assert_null(front);
	kv = step(r, 3, false);
	assert_non_null(kv);
	assert_int_equal(on(kv, "big")->requests, 12);
	assert_int_equal(on(kv, "big")->mean_ns, 2 * MS);
	assert_int_equal(on(kv, "little")->requests, 12);
	assert_int_equal(on(kv, "little")->mean_ns, 4 * MS);
	assert_int_equal(on(kv, "little")->verdict, ENGINE_SKU_SLOWER);
	assert_true(within(on(kv, "little")->ratio, 2.0, 0.001));
	/* whole requests: big had 3 ms (12) and 1 ms (12), little 4 ms (12) */
	assert_int_equal(on(step(r, 2, true), "big")->requests, 24);
	assert_int_equal(on(step(r, 2, true), "big")->mean_ns, 2 * MS);
	engine__free(e);
}

/* No label: the CPU model is the SKU. One SKU: nothing to compare, and the
 * outputs say nothing of it. */
static void test_models_and_one_sku(void **state)
{
	struct engine *e = engine__new(&(struct engine_opts){0});
	const struct engine_result *r;
	char *text, *json;

	for (int i = 0; i < 12; i++)
		add(e, i, NULL, NULL, "Xeon 8375C", 1 * MS, 2 * MS);
	r = engine__result(e);
	assert_int_equal(r->nskus, 1);
	assert_string_equal(r->skus[0].sku, "Xeon 8375C");
	assert_int_equal(r->skus[0].requests, 12);
	assert_int_equal(r->skus[0].cpu_ns, 36 * MS);
	assert_int_equal(r->nsku_steps, 0);
	render(r, &text, &json);
	assert_null(strstr(text, "SKU"));
	assert_null(strstr(json, "sku_comparison"));
	free(text);
	free(json);
	for (int i = 0; i < 12; i++)
		add(e, 100 + i, NULL, NULL, "EPYC 7R13", 1 * MS, 3 * MS);
	r = engine__result(e);
	assert_int_equal(r->nskus, 2);
	/* 12 requests each: the baseline is the first by name */
	assert_string_equal(r->skus[0].sku, "EPYC 7R13");
	assert_int_equal(on(step(r, 3, false), "Xeon 8375C")->verdict, ENGINE_SKU_FASTER);
	assert_int_equal(on(step(r, 2, false), "Xeon 8375C")->verdict, ENGINE_SKU_SAME);
	engine__free(e);
}

static void test_outputs(void **state)
{
	struct engine *e = two_skus(30);
	const struct engine_result *r = engine__result(e);
	char *text, *json;

	render(r, &text, &json);
	assert_non_null(strstr(text, "CPU time by SKU"));
	assert_non_null(strstr(text, "SKUs: c7 (30 requests, the baseline), m5 (30 requests)"));
	assert_non_null(strstr(text, "frontend:8080 ; GET /item ; (all cpu)\n"));
	assert_non_null(strstr(text, "frontend:8080 ; GET /item ; kvstore:7000 get ; cpu\n"));
	assert_non_null(strstr(text, "faster (SKU-sensitive)"));
	assert_non_null(strstr(text, "2 of 3 compared are SKU-sensitive"));
	assert_non_null(strstr(json, "\"sku_comparison\":{\"baseline\":\"c7\",\"min_requests\":10,"
				     "\"margin\":0.1000,"));
	assert_non_null(strstr(json, "\"verdict\":\"faster\""));
	assert_non_null(strstr(json, "\"verdict\":\"same\""));
	assert_non_null(strstr(json, "\"whole_request\":true"));
	free(text);
	free(json);
	engine__free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_slower_and_same),
	    cmocka_unit_test(test_too_few),
	    cmocka_unit_test(test_unclear),
	    cmocka_unit_test(test_split_mid_request),
	    cmocka_unit_test(test_models_and_one_sku),
	    cmocka_unit_test(test_outputs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
