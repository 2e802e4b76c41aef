// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* diff's core (cmd/diff.c): identical profiles give no differences, a
 * constructed slowdown comes first, a saved JSON report reads back equal to
 * the live result it was written from. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine_fixture.h"
#include "report_cmd.h"

__attribute__((noinline)) static char *run_diff(const struct diff_side *a, const struct diff_side *b,
						bool json, int *n)
{
	struct diff_opts o = {.json = json, .top = 20};
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	*n = diff__write(f, a, b, &o);
	fclose(f);
	return buf;
}

static void test_identical(void **state)
{
	struct engine *e1 = fx_engine(false, NULL), *e2 = fx_engine(false, NULL);
	struct diff_side a, b;
	char *out;
	int n;

	assert_int_equal(diff_side__from_result(&a, "A", engine__result(e1)), 0);
	assert_int_equal(diff_side__from_result(&b, "B", engine__result(e2)), 0);
	out = run_diff(&a, &b, false, &n);
	assert_int_equal(n, 0);
	assert_non_null(strstr(out, "no differences\n"));
	free(out);
	diff_side__free(&a);
	diff_side__free(&b);
	engine__free(e1);
	engine__free(e2);
}

/* A side past --max-paths is said to be, in both formats: its "(other
 * paths)" steps hold whatever came after its cap. */
static void test_folded_side(void **state)
{
	struct engine_opts eo = {.max_paths = 1};
	struct engine *e1 = fx_engine(false, NULL), *e2 = fx_engine(false, &eo);
	struct diff_side a, b;
	char *out;
	int n;

	assert_int_equal(diff_side__from_result(&a, "A", engine__result(e1)), 0);
	assert_int_equal(diff_side__from_result(&b, "B", engine__result(e2)), 0);
	out = run_diff(&a, &b, false, &n);
	if (!strstr(out, "note: B had more distinct call paths than --max-paths: a step ending "
			 "in \"(other paths)\" holds different paths on each side\n"))
		fail_msg("%s", out);
	free(out);
	out = run_diff(&a, &b, true, &n);
	assert_non_null(strstr(out, "\"a\":{\"source\":\"A\",\"nrequests\":"));
	assert_non_null(strstr(out, "\"folded_paths\":false},\"b\":"));
	assert_non_null(strstr(out, "\"folded_paths\":true},\"changes\""));
	free(out);
	diff_side__free(&a);
	diff_side__free(&b);
	engine__free(e1);
	engine__free(e2);
}

/* B: the same requests, but the kv call takes 3 ms longer in each */
static void test_slowdown_first(void **state)
{
	struct engine *e1 = fx_engine(false, NULL), *e2 = engine__new(NULL);
	struct diff_side a, b;
	struct cp_segment g[6];
	struct cp_culprit cul[1];
	struct cp_request q;
	char id[64], *out;
	int n;

	for (int i = 0; i < 4; i++) {
		bool after = false;

		fx_kernel_request(i, &q, g, cul, id, sizeof(id));
		for (uint32_t k = 0; k < q.nsegs; k++) {
			if (after) {
				g[k].start_ns += 3 * MS;
				g[k].end_ns += 3 * MS;
			}
			if (g[k].nframes == 3) {
				g[k].end_ns += 3 * MS;
				after = true;
			}
		}
		q.end_ns += 3 * MS;
		engine__add_request(e2, &q);
	}
	assert_int_equal(diff_side__from_result(&a, "A", engine__result(e1)), 0);
	assert_int_equal(diff_side__from_result(&b, "B", engine__result(e2)), 0);
	out = run_diff(&a, &b, false, &n);
	assert_int_equal(n, 1);
	if (!strstr(out, "2.000      5.000      +3.000      [+3.000, +3.000] *    2.50x  "
			 "frontend:8080 ; GET /cart ; kvstore:7000 get ; cpu\n"))
		fail_msg("%s", out);
	free(out);
	out = run_diff(&a, &b, true, &n);
	assert_non_null(strstr(out, "\"changes\":[{\"frames\":[\"frontend:8080\",\"GET /cart\","
				    "\"kvstore:7000 get\"],\"category\":\"cpu\","
				    "\"a_per_request_ns\":2000000,\"b_per_request_ns\":5000000,"
				    "\"change_ns\":3000000,\"ratio\":2.5,\"ci_low_ns\":3000000,"
				    "\"ci_high_ns\":3000000,\"significant\":true,"
				    "\"interval\":\"bootstrap\"}]"));
	free(out);
	/* and in the other direction, negative */
	out = run_diff(&b, &a, false, &n);
	assert_non_null(strstr(out, "-3.000"));
	free(out);
	diff_side__free(&a);
	diff_side__free(&b);
	engine__free(e1);
	engine__free(e2);
}

static void test_saved_report(void **state)
{
	struct engine *e = fx_engine(false, NULL);
	struct diff_side a, b;
	char *buf = NULL, err[256] = "", *out;
	size_t len;
	FILE *f = open_memstream(&buf, &len);
	int n;

	assert_int_equal(out_json(f, engine__result(e), NULL), 0);
	fclose(f);
	assert_true(diff__is_saved_profile(buf, 64));
	assert_false(diff__is_saved_profile("{\"data\":[]}", 11));
	assert_true(diff__is_saved_profile(" {\n  \"critpath_report\": 1", 25));
	assert_int_equal(diff_side__from_json(&a, "saved", buf, len, err, sizeof(err)), 0);
	assert_int_equal(a.nrequests, 4);
	assert_int_equal(a.nsteps, 5);
	assert_int_equal(diff_side__from_result(&b, "live", engine__result(e)), 0);
	out = run_diff(&a, &b, false, &n);
	assert_int_equal(n, 0);
	free(out);
	diff_side__free(&a);
	diff_side__free(&b);
	assert_int_equal(
	    diff_side__from_json(&a, "bad", "{\"critpath_report\":1,", 21, err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "not valid JSON"));
	assert_int_equal(
	    diff_side__from_json(&a, "bad", "{\"critpath_report\":1}", 21, err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "profile"));
	free(buf);
	engine__free(e);
}

/* A side of n requests, each through 20 steps "svc ; wK" of about mean_ms
 * (uniform within +-50%), step slow's times factor times longer. */
static struct engine *noisy(int n, double mean_ms, unsigned seed, int slow, double factor)
{
	static const char *names[20] = {"w0",  "w1",  "w2",  "w3",  "w4",  "w5",  "w6",
					"w7",  "w8",  "w9",  "w10", "w11", "w12", "w13",
					"w14", "w15", "w16", "w17", "w18", "w19"};
	static const char *frames[20][2];
	struct engine *e = engine__new(NULL);

	srand(seed);
	for (int k = 0; k < 20; k++) {
		frames[k][0] = "svc";
		frames[k][1] = names[k];
	}
	for (int i = 0; i < n; i++) {
		uint64_t t0 = 1000 * MS + (uint64_t)i * 1000 * MS, t = t0;
		struct cp_segment g[20];
		char id[16];
		struct cp_request q = {.id = id, .service = "svc", .name = "GET", .segs = g, .nsegs = 20};

		for (int k = 0; k < 20; k++) {
			double f = k == slow ? factor : 1;
			uint64_t w = (uint64_t)(f * mean_ms * MS * (0.5 + (double)rand() / RAND_MAX));

			g[k] = (struct cp_segment){.start_ns = t, .end_ns = t + w,
						   .category = CP_CAT_CPU, .frames = frames[k],
						   .nframes = 2, .pid = 1, .tid = 1};
			t += w;
		}
		snprintf(id, sizeof(id), "r%d", i);
		q.start_ns = t0;
		q.end_ns = t;
		engine__add_request(e, &q);
	}
	return e;
}

/* Two samples of one system: no step of 20 is significant (their
 * intervals hold together); one step made 30% slower is, alone. */
static void test_confidence(void **state)
{
	struct engine *a1 = noisy(200, 1, 1, -1, 1), *a2 = noisy(200, 1, 2, -1, 1),
		      *b = noisy(200, 1, 3, 7, 1.3);
	struct diff_side sa, sa2, sb;
	char *out;
	int n;

	assert_int_equal(diff_side__from_result(&sa, "A", engine__result(a1)), 0);
	assert_int_equal(diff_side__from_result(&sa2, "A'", engine__result(a2)), 0);
	assert_int_equal(diff_side__from_result(&sb, "B", engine__result(b)), 0);
	out = run_diff(&sa, &sa2, true, &n);
	if (strstr(out, "\"significant\":true"))
		fail_msg("A/A: %s", out);
	free(out);
	out = run_diff(&sa, &sb, false, &n);
	{
		/* the slow step first, the only one marked */
		char *w7 = strstr(out, "x  svc ; w7 ; cpu\n");

		if (!strstr(out, "] *    1.") || !w7 || strstr(w7, " *"))
			fail_msg("%s", out);
	}
	free(out);
	diff_side__free(&sa);
	diff_side__free(&sa2);
	diff_side__free(&sb);
	engine__free(a1);
	engine__free(a2);
	engine__free(b);
}

/* Fewer than ENGINE_FEW requests a side: bootstrap intervals, the same
 * from a saved report (its "samples_ns") as from the live analysis; an A/A
 * pair flags nothing, a step made 3x slower is flagged alone. */
static void test_bootstrap(void **state)
{
	struct engine *a1 = noisy(20, 1, 1, -1, 1), *a2 = noisy(20, 1, 2, -1, 1),
		      *b = noisy(20, 1, 3, 7, 3);
	struct diff_side sa, sa2, sb, saved;
	char *out, *live, *buf = NULL, err[256];
	size_t len;
	FILE *f;
	int n;

	assert_int_equal(diff_side__from_result(&sa, "A", engine__result(a1)), 0);
	assert_int_equal(diff_side__from_result(&sa2, "A'", engine__result(a2)), 0);
	assert_int_equal(diff_side__from_result(&sb, "B", engine__result(b)), 0);
	assert_true(sa.has_samples && sb.has_samples);
	out = run_diff(&sa, &sa2, true, &n);
	if (strstr(out, "\"significant\":true") || !strstr(out, "\"interval\":\"bootstrap\""))
		fail_msg("A/A: %s", out);
	free(out);
	live = run_diff(&sa, &sb, false, &n);
	{
		char *w7 = strstr(live, "x  svc ; w7 ; cpu\n");

		if (!strstr(live, "a bootstrap's, fewer than 30 requests a side") ||
		    !strstr(live, "] *    3.") || !w7 || strstr(w7, " *"))
			fail_msg("%s", live);
	}
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(out_json(f, engine__result(a1), NULL), 0);
	fclose(f);
	assert_int_equal(diff_side__from_json(&saved, "A", buf, len, err, sizeof(err)), 0);
	assert_true(saved.has_samples);
	out = run_diff(&saved, &sb, false, &n);
	assert_string_equal(out, live);
	free(out);
	free(live);
	free(buf);
	diff_side__free(&saved);
	assert_int_equal(diff_side__from_json(&saved, "bad",
					      "{\"profile\":[{\"frames\":[],\"category\":\"cpu\","
					      "\"per_request_ns\":1,\"samples_ns\":[1,-2]}]}",
					      83, err, sizeof(err)),
			 -EINVAL);
	if (!strstr(err, "samples_ns[1] is not a non-negative integer"))
		fail_msg("%s", err);
	diff_side__free(&sa);
	diff_side__free(&sa2);
	diff_side__free(&sb);
	engine__free(a1);
	engine__free(a2);
	engine__free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_identical),
	    cmocka_unit_test(test_folded_side),
	    cmocka_unit_test(test_slowdown_first),
	    cmocka_unit_test(test_saved_report),
	    cmocka_unit_test(test_confidence),
	    cmocka_unit_test(test_bootstrap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
