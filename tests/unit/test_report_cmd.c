// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* report's argument values and input discovery (cmd/report_util.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "engine_fixture.h"
#include "report_cmd.h"

static void test_durations(void **state)
{
	static const struct {
		const char *s;
		uint64_t ns;
	} ok[] = {
	    {"5ms", 5000000},	      {"200us", 200000},  {"1.5s", 1500000000},
	    {"100ns", 100},	      {"0", 0},		  {"2m", 120000000000ull},
	    {"1h", 3600000000000ull}, {"0.25ms", 250000}, {"3\xc2\xb5s", 3000},
	};
	static const char *const bad[] = {"", "5", "ms", "-5ms", "5 ms", "5xs", "1e30s", "+1s"};
	uint64_t ns;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(parse_duration(ok[i].s, &ns), 0);
		assert_int_equal(ns, ok[i].ns);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse_duration(bad[i], &ns), -EINVAL);
}

static void test_times(void **state)
{
	uint64_t ns;

	assert_int_equal(parse_time("2024-05-01T12:00:00Z", &ns), 0);
	assert_int_equal(ns, 1714564800ull * 1000000000ull);
	assert_int_equal(parse_time("2024-05-01T12:00:00.25Z", &ns), 0);
	assert_int_equal(ns, 1714564800ull * 1000000000ull + 250000000);
	assert_int_equal(parse_time("2024-05-01T14:00:00+02:00", &ns), 0);
	assert_int_equal(ns, 1714564800ull * 1000000000ull);
	assert_int_equal(parse_time("2024-05-01 12:00:00", &ns), 0);
	assert_int_equal(ns, 1714564800ull * 1000000000ull);
	assert_int_equal(parse_time("1714564800.5", &ns), 0);
	assert_int_equal(ns, 1714564800500000000ull);
	assert_int_equal(parse_time("120s", &ns), 0);
	assert_int_equal(ns, 120000000000ull);
	{
		bool rt = false;

		assert_int_equal(parse_time_kind("2024-05-01T12:00:00Z", &ns, &rt), 0);
		assert_true(rt);
		assert_int_equal(parse_time_kind("1714564800", &ns, &rt), 0);
		assert_true(rt);
		assert_int_equal(parse_time_kind("90s", &ns, &rt), 0);
		assert_false(rt);
		assert_int_equal(ns, 90000000000ull);
	}
	assert_int_equal(parse_time("yesterday", &ns), -EINVAL);
	assert_int_equal(parse_time("2024-05-01T12:00", &ns), -EINVAL);
	assert_int_equal(parse_time("2024-05-01T12:00:00Zjunk", &ns), -EINVAL);
}

static void touch(const char *dir, const char *name)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
}

static void test_inputs(void **state)
{
	char dir[] = "/tmp/critpath-inputs.XXXXXX", sub[128], link[256], fifo[256];
	char *args[3], **files = NULL;
	struct engine *e = engine__new(NULL);
	int n = 0;

	engine__set_quiet(e, true);
	assert_non_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/b-dir", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	touch(dir, "c.json");
	touch(dir, "a.json");
	touch(sub, "z.rec");
	snprintf(link, sizeof(link), "%s/d-link", dir);
	assert_int_equal(symlink(sub, link), 0); /* a symlinked directory is not followed */
	snprintf(fifo, sizeof(fifo), "%s/e-fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0); /* not regular: skipped */
	args[0] = dir;
	args[1] = "/nonexistent/critpath-input";
	args[2] = NULL;
	assert_int_equal(input_list__collect(args, 2, e, &files, &n), 0);
	assert_int_equal(n, 3);
	assert_non_null(strstr(files[0], "/a.json"));
	assert_non_null(strstr(files[1], "/b-dir/z.rec"));
	assert_non_null(strstr(files[2], "/c.json"));
	assert_null(files[3]);
	/* the missing input was warned, naming it */
	assert_int_equal(engine__result(e)->nwarnings, 1);
	assert_non_null(strstr(engine__result(e)->warnings[0], "/nonexistent/critpath-input"));
	input_list__free(files);

	/* nothing found is an empty list, not an error */
	args[0] = sub;
	unlink(link);
	snprintf(link, sizeof(link), "%s/z.rec", sub);
	unlink(link);
	assert_int_equal(input_list__collect(args, 1, e, &files, &n), 0);
	assert_int_equal(n, 0);
	assert_null(files[0]);
	input_list__free(files);
	rmdir(sub);
	unlink(fifo);
	snprintf(link, sizeof(link), "%s/a.json", dir);
	unlink(link);
	snprintf(link, sizeof(link), "%s/c.json", dir);
	unlink(link);
	rmdir(dir);
	engine__free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_durations),
	    cmocka_unit_test(test_times),
	    cmocka_unit_test(test_inputs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
