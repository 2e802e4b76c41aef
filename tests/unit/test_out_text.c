// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* out_text on the fixture: golden files for kernel and span input, and the
 * parts a reader relies on (header, tables, slowest requests, warnings). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine_fixture.h"

static char *render(struct engine *e, const struct out_opts *o, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	assert_non_null(f);
	assert_int_equal(out_text(f, engine__result(e), o), 0);
	fclose(f);
	return buf;
}

static void test_kernel(void **state)
{
	struct engine_opts eo = {.keep_slowest = 2};
	struct engine *e = fx_engine(false, &eo);
	struct out_opts o = {.top = 20, .requests = 2};
	size_t len;
	char *s = render(e, &o, &len);

	assert_int_equal(fx_golden_check("kernel.txt", s, len), 0);
	assert_non_null(strstr(s, "4 requests; latency mean 7.250 ms"));
	assert_non_null(strstr(s, "frontend:8080 ; GET /cart ; lock"));
	assert_non_null(strstr(s, "cache-maint (pid 100, tid 105)"));
	assert_non_null(strstr(s, "The 2 slowest requests"));
	assert_non_null(strstr(s, "peer 10.0.0.7:5432"));
	assert_non_null(strstr(s, "culprits: cache-maint/105 4.000 ms"));
	assert_non_null(strstr(s, "Warnings (1)"));
	free(s);
	engine__free(e);
}

static void test_spans(void **state)
{
	struct engine *e = fx_engine(true, NULL);
	struct out_opts o = {.top = 20};
	size_t len;
	char *s = render(e, &o, &len);

	assert_int_equal(fx_golden_check("spans.txt", s, len), 0);
	assert_non_null(strstr(s, "incl ms"));
	assert_non_null(strstr(s, "api /checkout ; db query ; span"));
	assert_null(strstr(s, "Contention"));
	free(s);
	engine__free(e);
}

static void test_empty(void **state)
{
	struct engine *e = engine__new(NULL);
	struct out_opts o = {0};
	size_t len;
	char *s = render(e, &o, &len);

	assert_string_equal(s, "0 requests\n");
	free(s);
	engine__free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kernel),
	    cmocka_unit_test(test_spans),
	    cmocka_unit_test(test_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
