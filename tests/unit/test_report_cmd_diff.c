// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* diff's core (diff.c): identical profiles give no differences, a
 * constructed slowdown comes first, a saved JSON report reads back equal to
 * the live result it was written from. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine_fixture.h"
#include "report_cmd.h"

static char *run_diff(const struct diff_side *a, const struct diff_side *b, bool json, int *n)
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
	assert_non_null(strstr(out,
			       "2.000      5.000      +3.000    2.50x  frontend:8080 ; GET /cart "
			       "; kvstore:7000 get ; cpu\n"));
	free(out);
	out = run_diff(&a, &b, true, &n);
	assert_non_null(strstr(out, "\"changes\":[{\"frames\":[\"frontend:8080\",\"GET /cart\","
				    "\"kvstore:7000 get\"],\"category\":\"cpu\","
				    "\"a_per_request_ns\":2000000,\"b_per_request_ns\":5000000,"
				    "\"change_ns\":3000000,\"ratio\":2.5}]"));
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_identical),
	    cmocka_unit_test(test_slowdown_first),
	    cmocka_unit_test(test_saved_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
