// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* `critpath report` and `critpath diff` end to end on small Jaeger files:
 * formats, -o, exit codes 0 / 1 / 2, directories with stray files, diff of
 * identical inputs and of an input against its saved JSON report. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <yajl/yajl_tree.h>

#include "commands.h"
#include "engine_fixture.h"
#include "cmd_capture.h"

static char dir[] = "/tmp/critpath-report.XXXXXX";
static char io[] = "/tmp/critpath-report-io.XXXXXX"; /* captured output, not an input */

/* CPT's sequential case: A[0,100]; B[10,30] C[40,50] D[60,90] (us) */
static const char jaeger[] =
    "{\"data\":[{\"traceID\":\"t1\",\"spans\":["
    "{\"traceID\":\"t1\",\"spanID\":\"a\",\"operationName\":\"A\",\"references\":[],"
    "\"startTime\":1000,\"duration\":100,\"processID\":\"p1\"},"
    "{\"traceID\":\"t1\",\"spanID\":\"b\",\"operationName\":\"B\",\"references\":[{\"refType\":"
    "\"CHILD_OF\",\"traceID\":\"t1\",\"spanID\":\"a\"}],\"startTime\":1010,\"duration\":20,"
    "\"processID\":\"p1\"},"
    "{\"traceID\":\"t1\",\"spanID\":\"c\",\"operationName\":\"C\",\"references\":[{\"refType\":"
    "\"CHILD_OF\",\"traceID\":\"t1\",\"spanID\":\"a\"}],\"startTime\":1040,\"duration\":10,"
    "\"processID\":\"p1\"},"
    "{\"traceID\":\"t1\",\"spanID\":\"d\",\"operationName\":\"D\",\"references\":[{\"refType\":"
    "\"CHILD_OF\",\"traceID\":\"t1\",\"spanID\":\"a\"}],\"startTime\":1060,\"duration\":30,"
    "\"processID\":\"p1\"}],"
    "\"processes\":{\"p1\":{\"serviceName\":\"svc\"}}}]}";

static void put(const char *name, const char *text)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *path(const char *name)
{
	static char p[16][256];
	static int i;

	i = (i + 1) % 16;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static char *io_path(const char *name)
{
	static char p[16][256];
	static int i;

	i = (i + 1) % 16;
	snprintf(p[i], sizeof(p[i]), "%s/%s", io, name);
	return p[i];
}

/* Runs a command with stdout and stderr into files; returns its status. */
static int run(int (*cmd)(int, char **), char **argv)
{
	return run_captured(io, cmd, argv);
}

static char *slurp(const char *name)
{
	FILE *f = fopen(io_path(name), "r");
	char *buf = calloc(1, 1 << 20);

	assert_non_null(f);
	fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	return buf;
}

static int setup(void **state)
{
	char sub[128];

	if (!mkdtemp(dir) || !mkdtemp(io))
		return -1;
	put("a.json", jaeger);
	snprintf(sub, sizeof(sub), "%s/more", dir);
	mkdir(sub, 0700);
	put("more/b.json", jaeger);
	put("more/README", "not a trace\n");
	put("bad.json", "{\"data\": [");
	return 0;
}

static void test_json_output(void **state)
{
	char *argv[] = {"report", path("a.json"),      "--format", "json",
			"-o",	  io_path("out.json"), NULL};
	char *s, err[128];
	yajl_val v, reqs, seg;
	const char *k1[] = {"requests", NULL}, *k2[] = {"critpath_report", NULL};
	uint64_t sum = 0;

	assert_int_equal(run(cmd_report, argv), 0);
	s = slurp("out.json");
	v = yajl_tree_parse(s, err, sizeof(err));
	assert_non_null(v);
	assert_int_equal(YAJL_GET_INTEGER(yajl_tree_get(v, k2, yajl_t_number)), 1);
	reqs = yajl_tree_get(v, k1, yajl_t_array);
	assert_int_equal(reqs->u.array.len, 1);
	seg = yajl_tree_get(reqs->u.array.values[0], (const char *[]){"critical_path", NULL},
			    yajl_t_array);
	for (size_t i = 0; i < seg->u.array.len; i++) {
		yajl_val g = seg->u.array.values[i];

		sum += YAJL_GET_INTEGER(
			   yajl_tree_get(g, (const char *[]){"end_ns", NULL}, yajl_t_number)) -
		       YAJL_GET_INTEGER(
			   yajl_tree_get(g, (const char *[]){"start_ns", NULL}, yajl_t_number));
	}
	assert_int_equal(sum, 100000); /* sections tile the root's 100 us */
	yajl_tree_free(v);
	free(s);
}

static void test_text_directory(void **state)
{
	char *argv[] = {"report", dir, "--top", "3", NULL};
	char *s;

	/* a.json, bad.json, more/README, more/b.json: two traces, two warnings */
	assert_int_equal(run(cmd_report, argv), 0);
	s = slurp("stdout");
	assert_non_null(strstr(s, "2 requests"));
	assert_non_null(strstr(s, "Warnings (2)"));
	assert_non_null(strstr(s, "bad.json"));
	assert_non_null(strstr(s, "README"));
	free(s);
}

static void test_exit_codes(void **state)
{
	char *bad[] = {"report", path("bad.json"), NULL};
	char *none[] = {"report", path("missing.json"), NULL};
	char *noinput[] = {"report", NULL};
	char *badfmt[] = {"report", path("a.json"), "--format", "xml", NULL};
	char *baddur[] = {"report", path("a.json"), "--min-latency", "5", NULL};
	char *filtered[] = {"report", path("a.json"), "--min-latency", "1s", NULL};
	/* written outside dir, so the directory tests do not see it */
	char neg[300];
	char *unusable[] = {"report", neg, NULL};
	char *unusable_and_good[] = {"report", neg, path("a.json"), NULL};
	char *s;
	FILE *f;

	snprintf(neg, sizeof(neg), "%s", io_path("neg.json"));
	f = fopen(neg, "w");
	assert_non_null(f);
	fputs("{\"data\":[{\"traceID\":\"t9\",\"spans\":[{\"traceID\":\"t9\",\"spanID\":\"a\","
	      "\"operationName\":\"A\",\"startTime\":1000,\"duration\":-5,\"processID\":\"p1\"}],"
	      "\"processes\":{\"p1\":{\"serviceName\":\"svc\"}}}]}",
	      f);
	fclose(f);

	assert_int_equal(run(cmd_report, bad), 1);
	s = slurp("stderr");
	assert_non_null(strstr(s, "nothing analysed"));
	free(s);
	assert_int_equal(run(cmd_report, none), 1);
	assert_int_equal(run(cmd_report, noinput), 2);
	assert_int_equal(run(cmd_report, badfmt), 2);
	assert_int_equal(run(cmd_report, baddur), 2);
	s = slurp("stderr");
	assert_non_null(strstr(s, "--min-latency '5'"));
	free(s);
	/* a trace file read fine whose only trace is unusable: nothing analysed */
	assert_int_equal(run(cmd_report, unusable), 1);
	s = slurp("stderr");
	assert_non_null(strstr(s, "span a: negative duration"));
	assert_non_null(strstr(s, "nothing analysed: no trace in the input could be analysed"));
	free(s);
	/* next to a usable one it is a warning, and the report goes on */
	assert_int_equal(run(cmd_report, unusable_and_good), 0);
	s = slurp("stdout");
	assert_non_null(strstr(s, "1 requests"));
	free(s);
	/* analysed, but the filter left nothing: still a report, exit 0 */
	assert_int_equal(run(cmd_report, filtered), 0);
	s = slurp("stdout");
	assert_non_null(strstr(s, "0 requests (1 more left out by filters)"));
	free(s);
}

static void test_diff(void **state)
{
	char *same[] = {"diff", path("a.json"), path("more/b.json"), NULL};
	char *save[] = {"report", path("a.json"),	 "--format", "json",
			"-o",	  io_path("saved.json"), NULL};
	char *saved[] = {"diff", io_path("saved.json"), path("a.json"), "--format", "json", NULL};
	char *one[] = {"diff", path("a.json"), NULL};
	char *s;

	assert_int_equal(run(cmd_diff, same), 0);
	s = slurp("stdout");
	assert_non_null(strstr(s, "no differences"));
	free(s);
	assert_int_equal(run(cmd_report, save), 0);
	assert_int_equal(run(cmd_diff, saved), 0);
	s = slurp("stdout");
	assert_non_null(strstr(s, "\"critpath_diff\":1"));
	assert_non_null(strstr(s, "\"changes\":[]"));
	free(s);
	assert_int_equal(run(cmd_diff, one), 2);
}

static int teardown(void **state)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, io);
	return system(cmd) ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json_output),
	    cmocka_unit_test(test_text_directory),
	    cmocka_unit_test(test_exit_codes),
	    cmocka_unit_test(test_diff),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
