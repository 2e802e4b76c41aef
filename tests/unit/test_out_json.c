// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* out_json: the DESIGN.md section 6 contract, checked field by field with
 * yajl's tree parser, plus golden files. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <yajl/yajl_tree.h>

#include "engine_fixture.h"

static yajl_val render(struct engine *e, const char *golden)
{
	char *buf = NULL, err[256];
	size_t len;
	FILE *f = open_memstream(&buf, &len);
	yajl_val v;

	assert_non_null(f);
	assert_int_equal(out_json(f, engine__result(e), NULL), 0);
	fclose(f);
	assert_int_equal(fx_golden_check(golden, buf, len), 0);
	v = yajl_tree_parse(buf, err, sizeof(err));
	if (!v)
		fprintf(stderr, "# %s\n", err);
	assert_non_null(v);
	free(buf);
	return v;
}

static yajl_val get(yajl_val v, const char *k1, const char *k2)
{
	const char *path[] = {k1, k2, NULL};

	return yajl_tree_get(v, path, yajl_t_any);
}

static yajl_val at(yajl_val arr, size_t i)
{
	assert_true(YAJL_IS_ARRAY(arr));
	assert_true(i < arr->u.array.len);
	return arr->u.array.values[i];
}

static long long num(yajl_val v, const char *k)
{
	yajl_val n = get(v, k, NULL);

	assert_non_null(n);
	assert_true(YAJL_IS_INTEGER(n));
	return YAJL_GET_INTEGER(n);
}

static const char *str(yajl_val v, const char *k)
{
	yajl_val s = get(v, k, NULL);

	assert_non_null(s);
	assert_true(YAJL_IS_STRING(s));
	return YAJL_GET_STRING(s);
}

static const char *str_at(yajl_val arr, size_t i)
{
	yajl_val s = at(arr, i);

	assert_true(YAJL_IS_STRING(s));
	return YAJL_GET_STRING(s) ? YAJL_GET_STRING(s) : "";
}

/* hosts: [{host, clock_offset_ns, uncertainty_ns, matched_messages,
 * clock}], and host on every critical-path section */
static void test_hosts(void **state)
{
	struct engine *e = fx_two_hosts();
	char *buf = NULL, err[256];
	size_t len;
	FILE *f = open_memstream(&buf, &len);
	yajl_val v, hosts, path;

	assert_non_null(f);
	assert_int_equal(out_json(f, engine__result(e), NULL), 0);
	fclose(f);
	v = yajl_tree_parse(buf, err, sizeof(err));
	assert_non_null(v);
	hosts = get(v, "hosts", NULL);
	assert_int_equal(hosts->u.array.len, 2);
	assert_string_equal(str(at(hosts, 0), "host"), "front");
	assert_string_equal(str(at(hosts, 0), "clock"), "reference");
	assert_string_equal(str(at(hosts, 1), "host"), "store");
	assert_int_equal(num(at(hosts, 1), "clock_offset_ns"), 3014397);
	assert_int_equal(num(at(hosts, 1), "uncertainty_ns"), 60783);
	assert_int_equal(num(at(hosts, 1), "matched_messages"), 418);
	assert_string_equal(str(at(hosts, 1), "clock"), "messages");
	path = get(at(get(v, "requests", NULL), 0), "critical_path", NULL);
	assert_string_equal(str(at(path, 0), "host"), "front");
	assert_string_equal(str(at(path, 1), "host"), "store");
	yajl_tree_free(v);
	free(buf);
	engine__free(e);
}

static void test_kernel_contract(void **state)
{
	struct engine *e = fx_engine(false, NULL);
	yajl_val v = render(e, "kernel.json"), q, seg, cul, p, c;

	assert_int_equal(num(v, "critpath_report"), 1);
	assert_int_equal(at(get(v, "requests", NULL), 0) != NULL, 1);
	assert_int_equal(get(v, "requests", NULL)->u.array.len, 4);
	q = at(get(v, "requests", NULL), 1);
	assert_string_equal(str(q, "id"), "100:3:1");
	assert_string_equal(str(q, "service"), "frontend:8080");
	assert_string_equal(str(q, "name"), "GET /cart");
	assert_string_equal(str(q, "host"), "h1");
	assert_int_equal(num(q, "latency_ns"), num(q, "end_ns") - num(q, "start_ns"));
	assert_true(YAJL_IS_FALSE(get(q, "partial", NULL)));
	assert_true(YAJL_IS_TRUE(get(at(get(v, "requests", NULL), 3), "partial", NULL)));
	assert_null(get(q, "spans", NULL));
	seg = at(get(q, "critical_path", NULL), 1);
	assert_string_equal(str(seg, "category"), "lock");
	assert_true(YAJL_IS_TRUE(get(seg, "interference", NULL)));
	assert_int_equal(num(seg, "pid"), 100);
	assert_int_equal(num(seg, "tid"), 105);
	assert_int_equal(num(seg, "cpu"), 0);
	assert_string_equal(str(seg, "comm"), "cache-maint");
	assert_string_equal(str(seg, "cpu_model"), "Test CPU @ 2.0GHz");
	assert_string_equal(YAJL_GET_STRING(at(get(seg, "frames", NULL), 1)), "GET /cart");
	assert_null(get(seg, "span_id", NULL));
	assert_null(get(seg, "sku", NULL));
	cul = at(get(seg, "culprits", NULL), 0);
	assert_int_equal(num(cul, "tid"), 105);
	assert_int_equal(num(cul, "ns"), 2 * MS);
	assert_string_equal(str(cul, "comm"), "cache-maint");
	seg = at(get(q, "critical_path", NULL), 3);
	assert_string_equal(str(seg, "category"), "network");
	assert_string_equal(str(seg, "peer"), "10.0.0.7:5432");
	assert_null(get(seg, "cpu", NULL));
	assert_null(get(seg, "culprits", NULL));

	p = at(get(v, "profile", NULL), 0);
	assert_string_equal(str(p, "category"), "lock");
	assert_int_equal(num(p, "total_ns"), 10 * MS);
	assert_int_equal(num(p, "per_request_ns"), 10 * MS / 4);
	assert_int_equal(num(p, "requests"), 4);
	assert_int_equal(num(at(get(p, "percentiles", NULL), 0), "percentile"), 50);

	c = at(get(v, "contention", NULL), 0);
	assert_string_equal(str(c, "comm"), "cache-maint");
	assert_string_equal(str(c, "category"), "lock");
	assert_int_equal(num(c, "ns"), 10 * MS);
	assert_int_equal(num(c, "requests"), 4);
	assert_string_equal(str(at(get(v, "contention", NULL), 1), "category"), "runqueue");

	assert_int_equal(num(get(v, "summary", NULL), "nrequests"), 4);
	assert_non_null(strstr(str_at(get(v, "warnings", NULL), 0), "negative"));
	yajl_tree_free(v);
	engine__free(e);
}

static void test_span_contract(void **state)
{
	struct engine *e = fx_engine(true, NULL);
	yajl_val v = render(e, "spans.json"), q, seg, sp;

	q = at(get(v, "requests", NULL), 0);
	assert_null(get(q, "host", NULL));
	seg = at(get(q, "critical_path", NULL), 1);
	assert_string_equal(str(seg, "category"), "span");
	assert_string_equal(str(seg, "span_id"), "53995c3f42cd8ad8");
	assert_string_equal(str(seg, "service"), "db");
	assert_string_equal(str(seg, "operation"), "query");
	assert_null(get(seg, "pid", NULL));
	assert_null(get(seg, "tid", NULL));
	assert_null(get(seg, "cpu", NULL));
	assert_null(get(seg, "comm", NULL));
	sp = at(get(q, "spans", NULL), 1);
	assert_int_equal(num(sp, "inclusive_ns"), 6 * MS);
	assert_int_equal(num(sp, "exclusive_ns"), 6 * MS);
	sp = at(get(v, "span_profile", NULL), 0);
	assert_int_equal(num(sp, "exclusive_ns"), 13 * MS);
	assert_int_equal(get(v, "contention", NULL)->u.array.len, 0);
	yajl_tree_free(v);
	engine__free(e);
}

/* bytes that are not UTF-8 (payload-derived names) must not break the JSON */
static void test_invalid_utf8(void **state)
{
	static const char *const frames[] = {"svc", "GET /\xff\xfe"};
	struct engine *e = engine__new(&(struct engine_opts){.keep_all_requests = true});
	struct cp_segment g = {
	    .end_ns = 7, .frames = frames, .nframes = 2, .pid = -1, .tid = -1, .cpu = -1};
	struct cp_request q = {.id = "q\x80", .end_ns = 7, .segs = &g, .nsegs = 1};
	char *buf = NULL, err[256];
	size_t len;
	FILE *f = open_memstream(&buf, &len);
	yajl_val v;

	engine__add_request(e, &q);
	assert_int_equal(out_json(f, engine__result(e), NULL), 0);
	fclose(f);
	v = yajl_tree_parse(buf, err, sizeof(err));
	assert_non_null(v);
	assert_string_equal(str(at(get(v, "requests", NULL), 0), "id"), "q\xef\xbf\xbd");
	yajl_tree_free(v);
	free(buf);
	engine__free(e);
}

/* streaming the requests gives the same document as keeping them */
static void test_stream_equals_kept(void **state)
{
	char *a = NULL, *b = NULL;
	size_t alen, blen;
	FILE *fa = open_memstream(&a, &alen), *fb = open_memstream(&b, &blen);
	struct out_json_stream *js = out_json__begin(fb);
	struct engine_opts o = {.on_request = out_json__request, .on_request_ctx = js};
	struct engine *kept = fx_engine(false, NULL), *streamed = fx_engine(false, &o);

	assert_int_equal(out_json(fa, engine__result(kept), NULL), 0);
	assert_int_equal(out_json__end(js, engine__result(streamed)), 0);
	fclose(fa);
	fclose(fb);
	assert_int_equal(alen, blen);
	assert_memory_equal(a, b, alen);
	free(a);
	free(b);
	engine__free(kept);
	engine__free(streamed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hosts),
	    cmocka_unit_test(test_kernel_contract),
	    cmocka_unit_test(test_span_contract),
	    cmocka_unit_test(test_invalid_utf8),
	    cmocka_unit_test(test_stream_equals_kept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
