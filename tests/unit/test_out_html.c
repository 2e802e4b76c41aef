// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * html output: the page is self-contained (no URL, one data island that no
 * string can close early, JSON that parses back to the result), and Debian's
 * headless Chromium renders it without errors, showing the steps, culprits
 * and requests of the result.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "out_fixture.h"

static char *page_of(const struct engine_result *r, const struct out_opts *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(out_html(f, r, o), 0);
	fclose(f);
	return buf;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (; (hay = strstr(hay, needle)); hay++)
		n++;
	return n;
}

static void test_html_self_contained(void **state)
{
	char *page = page_of(&fx_result, &(struct out_opts){.title = "fixture <report>"});
	const char *path[] = {"profile", NULL};
	char *data, *end, err[256];
	yajl_val root, prof, name;

	assert_non_null(strstr(page, "<!DOCTYPE html>"));
	assert_non_null(strstr(page, "<title>fixture &lt;report&gt;</title>"));
	/* offline: nothing to fetch */
	assert_null(strstr(page, "http://"));
	assert_null(strstr(page, "https://"));
	assert_null(strstr(page, " src="));
	assert_null(strstr(page, "<link"));
	/* the nasty step name cannot end the data island: two scripts, two ends */
	assert_int_equal(count(page, "</script"), 2);
	assert_int_equal(count(page, "<script"), 2);

	data = strstr(page, "id=\"cp-data\">");
	assert_non_null(data);
	data += strlen("id=\"cp-data\">");
	end = strstr(data, "</script>");
	assert_non_null(end);
	*end = 0;
	root = yajl_tree_parse(data, err, sizeof(err));
	if (!root)
		fail_msg("data island is not JSON: %s", err);
	prof = yajl_tree_get(root, path, yajl_t_array);
	assert_non_null(prof);
	assert_int_equal(prof->u.array.len, fx_result.nprofile);
	{
		const char *fp[] = {"frames", NULL};
		yajl_val fr = yajl_tree_get(prof->u.array.values[4], fp, yajl_t_array);

		assert_non_null(fr);
		name = fr->u.array.values[1];
		assert_string_equal(YAJL_GET_STRING(name), FX_NASTY);
	}
	{
		const char *bp[] = {"sku", "baseline", NULL};
		const char *rp[] = {"sku", "steps", NULL};
		yajl_val steps = yajl_tree_get(root, rp, yajl_t_array);

		assert_string_equal(YAJL_GET_STRING(yajl_tree_get(root, bp, yajl_t_string)), "m5");
		assert_non_null(steps);
		assert_int_equal(steps->u.array.len, 1);
	}
	yajl_tree_free(root);
	free(page);
}

/* Runs chromium on the page; returns the dumped DOM, the browser's log in
 * *log (both malloc'd). */
static char *chromium_dom(const char *dir, const char *file, char **log)
{
	char cmd[2048], logpath[600];
	char *dom;
	int st;
	FILE *f;
	long n;

	snprintf(logpath, sizeof(logpath), "%s/chromium.log", dir);
	snprintf(cmd, sizeof(cmd),
		 "cd '%1$s' && HOME='%1$s' timeout -k 5 60 chromium --headless=new --no-sandbox "
		 "--disable-gpu --no-first-run --no-default-browser-check "
		 "--disable-background-networking --disable-extensions --disable-sync "
		 "--user-data-dir='%1$s/profile' --enable-logging=stderr --v=0 "
		 "--virtual-time-budget=5000 --dump-dom 'file://%2$s' 2>'%3$s'",
		 dir, file, logpath);
	dom = fx_run(cmd, &st);
	assert_non_null(dom);
	f = fopen(logpath, "r");
	*log = NULL;
	if (f) {
		fseek(f, 0, SEEK_END);
		n = ftell(f);
		rewind(f);
		*log = calloc(1, n + 1);
		if (*log && fread(*log, 1, n, f) != (size_t)n)
			(*log)[0] = 0;
		fclose(f);
	}
	if (st != 0)
		fail_msg("chromium exited %d; log:\n%.3000s", st, *log ? *log : "");
	return dom;
}

static void test_html_renders_in_chromium(void **state)
{
	char *page, *dom, *log = NULL, *dir, file[512];
	const char *browser_errors[] = {"Uncaught", ":CONSOLE", "CONSOLE("};
	FILE *f;
	size_t i;

	if (!fx_have("chromium")) {
		print_message("chromium not installed (Debian chromium): render check skipped\n");
		skip();
	}
	dir = fx_tmpdir();
	assert_non_null(dir);
	snprintf(file, sizeof(file), "%s/report.html", dir);
	page = page_of(&fx_result, &(struct out_opts){.title = "fixture"});
	f = fopen(file, "w");
	assert_non_null(f);
	assert_int_equal(fputs(page, f) >= 0, 1);
	fclose(f);
	free(page);

	dom = chromium_dom(dir, file, &log);
	if (!strstr(dom, "data-rendered=\"ok\"") || strstr(dom, "<div id=\"cp-error\""))
		fail_msg("page did not render:\n%.4000s\nlog:\n%.2000s", dom, log ? log : "");
	/* console messages show up in the log as "INFO:CONSOLE:<line>] …" */
	for (i = 0; log && i < sizeof(browser_errors) / sizeof(browser_errors[0]); i++)
		if (strstr(log, browser_errors[i]))
			fail_msg("browser console output:\n%.3000s", log);
	assert_non_null(strstr(dom, "<div id=\"cp-status\" class=\"sub\">rendered</div>"));
	/* the flame graph, heat map and tables show the steps */
	assert_non_null(strstr(dom, "id=\"flame\""));
	assert_non_null(strstr(dom, "class=\"fn\""));
	assert_non_null(strstr(dom, ">kvstore<"));
	assert_non_null(strstr(dom, ">[network]<"));
	assert_non_null(strstr(dom, "id=\"heatmap\""));
	assert_non_null(strstr(dom, "web › GET /api › kvstore › get › network"));
	assert_non_null(strstr(dom, "id=\"profile\""));
	/* the nasty name is text, not markup */
	assert_non_null(strstr(dom, "GET /q?a=\"1\"&amp;b=&lt;/script&gt;&lt;b&gt;x"));
	/* culprits and the slowest requests with their segments */
	assert_non_null(strstr(dom, "id=\"contention\""));
	assert_non_null(strstr(dom, ">cache-maint<"));
	assert_non_null(strstr(dom, "id=\"requests\""));
	assert_non_null(strstr(dom, "[1234:5:1]"));
	assert_non_null(strstr(dom, "[4bf92f3577b34da6]"));
	assert_non_null(strstr(dom, "interference cache-maint 5.000 ms"));
	/* CPU time by SKU: a row per SKU, the baseline first */
	assert_non_null(strstr(dom, "id=\"sku\""));
	assert_non_null(strstr(dom, "<td class=\"n\">1.42–1.58</td>"));
	assert_non_null(strstr(dom, "slower (SKU-sensitive)"));
	assert_true(strstr(dom, ">m5<") < strstr(dom, ">c7<"));
	assert_non_null(strstr(dom, "127.0.0.1:7000"));
	assert_non_null(strstr(dom, "traces/a.json: trace 00ff"));
	/* the slowest first: 16 ms before the 6 ms span trace */
	assert_true(strstr(dom, "[1234:5:1]") < strstr(dom, "[4bf92f3577b34da6]"));
	free(dom);
	free(log);
	fx_rmtree(dir);
	free(dir);
}

static void test_html_empty_result_renders(void **state)
{
	struct engine_result r = {0};
	char *page = page_of(&r, NULL);

	assert_non_null(strstr(page, "\"profile\":[]"));
	assert_non_null(strstr(page, "\"requests\":[]"));
	free(page);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_html_self_contained),
	    cmocka_unit_test(test_html_empty_result_renders),
	    cmocka_unit_test(test_html_renders_in_chromium),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
