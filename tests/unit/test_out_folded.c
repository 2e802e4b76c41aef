// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* out_folded: one "frame;frame;category ns" line per stack, golden file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine_fixture.h"

static void test_folded(void **state)
{
	struct engine *e = fx_engine(false, NULL);
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	assert_int_equal(out_folded(f, engine__result(e), NULL), 0);
	fclose(f);
	assert_int_equal(fx_golden_check("kernel.folded", buf, len), 0);
	assert_non_null(strstr(buf, "frontend:8080;GET /cart;lock 10000000\n"));
	assert_non_null(strstr(buf, "frontend:8080;GET /cart;kvstore:7000 get;cpu 8000000\n"));
	free(buf);
	engine__free(e);
}

/* ';' inside a frame would split it into two frames */
static void test_separator_in_frame(void **state)
{
	static const char *const frames[] = {"svc;x", "op\nline"};
	struct engine *e = engine__new(NULL);
	struct cp_segment g = {.end_ns = 7, .frames = frames, .nframes = 2};
	struct cp_request q = {.id = "q", .end_ns = 7, .segs = &g, .nsegs = 1};
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	engine__add_request(e, &q);
	assert_int_equal(out_folded(f, engine__result(e), NULL), 0);
	fclose(f);
	assert_string_equal(buf, "svc:x;op line;cpu 7\n");
	free(buf);
	engine__free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_folded),
	    cmocka_unit_test(test_separator_in_frame),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
