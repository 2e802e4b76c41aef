// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * `critpath report` and `critpath diff` on recordings, end to end without
 * root: a hand-built lock-holder recording (SCENARIOS.md kernel case 4)
 * through every --format, --requests N (the slowest requests with their
 * paths), the contention table, a diff of two recordings (the holder made
 * slower) and of identical ones, --from / --to in wall-clock and boot time,
 * and a recording cut short.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <fcntl.h>
#include <yajl/yajl_tree.h>

#include "commands.h"
#define KB_WITH_RECORDING
#include "test_kpath_builder.h"
#include "cmd_capture.h"

#define U 1000000ull
#define B (1000 * U)

static const struct kb_tuple CL = {"10.0.0.1", 80, "10.0.0.2", 5000};
static char dir[] = "/tmp/critpath-report-rec.XXXXXX";

static char *path(const char *name)
{
	static char p[16][256];
	static int i;

	i = (i + 1) % 16;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

/* Two requests on srv:80; in each, the request thread blocks on a futex
 * that bg (tid 101) holds for hold units from the request's start. */
static void lock_recording(const char *file, uint64_t hold)
{
	static struct kb b;

	memset(&b, 0, sizeof(b));
	kb_proc(&b, 100, "srv");
	kb_switch(&b, B - 60 * U, 1, 100, 101, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_switch(&b, B - 50 * U, 0, 100, 100, CP_PREV_BLOCKED, 0, 0, NULL);
	for (uint64_t k = 0; k < 2; k++) {
		uint64_t t = B + k * 100 * U;
		uint32_t seq = 1000 + (uint32_t)k * 22;

		kb_wake(&b, t - 10 * U, 1, 100, 101, 0, 0, CP_CTX_HARDIRQ, CP_SOFTIRQ_NONE);
		kb_switch(&b, t - 10 * U, 1, 0, 0, CP_PREV_PREEMPTED, 100, 101, "bg");
		kb_dready(&b, t, 0, 100, CL, seq + 22);
		kb_wake(&b, t, 0, 100, 100, 0, 0, CP_CTX_SOFTIRQ, CP_SOFTIRQ_NET_RX);
		kb_switch(&b, t, 0, 0, 0, CP_PREV_PREEMPTED, 100, 100, "srv");
		kb_sock(&b, t - 50 * U - 1, t + 1000, 100, 100, CP_SOCK_READ, 5, CL, 22, seq,
			"GET /cart HTTP/1.1\r\n\r\n");
		kb_switch(&b, t + 1 * U, 0, 100, 100, CP_PREV_BLOCKED, 0, 0, NULL);
		kb_wake(&b, t + hold * U, 1, 100, 100, 100, 101, CP_CTX_TASK, CP_SOFTIRQ_NONE);
		kb_switch(&b, t + hold * U, 0, 0, 0, CP_PREV_PREEMPTED, 100, 100, "srv");
		kb_futex(&b, t + 1 * U - 100, t + hold * U + 500, 100, 100, 0x2000);
		kb_switch(&b, t + (hold + 1) * U, 1, 100, 101, CP_PREV_BLOCKED, 0, 0, NULL);
		kb_sock(&b, t + (hold + 2) * U - 1000, t + (hold + 2) * U, 100, 100, CP_SOCK_WRITE,
			5, CL, 40, 9000 + (uint32_t)k * 40, "HTTP/1.1 200 OK\r\n");
		kb_switch(&b, t + (hold + 2) * U, 0, 100, 100, CP_PREV_BLOCKED, 0, 0, NULL);
	}
	kb_write_recording(&b, file, 0, b.n);
}

/* Runs a command with stdout and stderr into files; returns its status. */
static int run(int (*cmd)(int, char **), char **argv)
{
	return run_captured(dir, cmd, argv);
}

static char *slurp(const char *name, size_t *len)
{
	char p[300];
	FILE *f;
	char *buf = calloc(1, 1 << 20);
	size_t n;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "r");
	assert_non_null(f);
	n = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	if (len)
		*len = n;
	return buf;
}

static int setup(void **state)
{
	if (!mkdtemp(dir))
		return -1;
	lock_recording(path("a.rec"), 11);
	lock_recording(path("b.rec"), 21);
	return 0;
}

static int teardown(void **state)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return getenv("KEEP") ? 0 : system(cmd) ? -1 : 0;
}

static void test_text(void **state)
{
	char *argv[] = {"report", path("a.rec"), "--requests", "1", NULL};
	char *s;

	assert_int_equal(run(cmd_report, argv), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "2 requests; latency mean 13.000 ms"));
	assert_non_null(strstr(s, "srv:80 ; GET /cart ; lock"));
	/* the contention table names the holder, category lock */
	assert_non_null(strstr(s, "Contention"));
	assert_non_null(strstr(s, "lock      bg (pid 100, tid 101)"));
	/* --requests 1: the slowest request with its full path */
	assert_non_null(strstr(s, "The 1 slowest requests"));
	assert_non_null(strstr(s, "lock        held by bg/101"));
	assert_null(strstr(s, "Warnings"));
	free(s);
}

static yajl_val jget(yajl_val v, const char *k)
{
	const char *p[] = {k, NULL};

	return yajl_tree_get(v, p, yajl_t_any);
}

static void test_json(void **state)
{
	char *argv[] = {"report", path("a.rec"), "--format", "json", "-o", path("a.json"), NULL};
	char *s, err[128];
	yajl_val v, reqs, seg, cul, cont;

	assert_int_equal(run(cmd_report, argv), 0);
	{
		struct stat st; /* paths from TLS plaintext: as private as the recording */

		assert_int_equal(stat(path("a.json"), &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
	}
	s = slurp("a.json", NULL);
	v = yajl_tree_parse(s, err, sizeof(err));
	assert_non_null(v);
	reqs = jget(v, "requests");
	assert_true(YAJL_IS_ARRAY(reqs));
	assert_int_equal(reqs->u.array.len, 2);
	assert_string_equal(YAJL_GET_STRING(jget(reqs->u.array.values[0], "service")), "srv:80");
	assert_string_equal(YAJL_GET_STRING(jget(reqs->u.array.values[0], "host")), "host-1");
	assert_true(YAJL_IS_FALSE(jget(reqs->u.array.values[0], "partial")));
	/* SCENARIOS.md case 4: R's cpu, the holder for R's wait, R's cpu */
	seg = jget(reqs->u.array.values[0], "critical_path");
	assert_int_equal(seg->u.array.len, 3);
	seg = seg->u.array.values[1];
	assert_string_equal(YAJL_GET_STRING(jget(seg, "category")), "lock");
	assert_true(YAJL_IS_TRUE(jget(seg, "interference")));
	assert_int_equal(YAJL_GET_INTEGER(jget(seg, "pid")), 100);
	assert_int_equal(YAJL_GET_INTEGER(jget(seg, "tid")), 101);
	assert_int_equal(YAJL_GET_INTEGER(jget(seg, "cpu")), 1);
	assert_string_equal(YAJL_GET_STRING(jget(seg, "comm")), "bg");
	assert_string_equal(YAJL_GET_STRING(jget(seg, "cpu_model")), "Test CPU B");
	assert_string_equal(YAJL_GET_STRING(jget(seg, "sku")), "sku-x");
	cul = jget(seg, "culprits");
	assert_int_equal(cul->u.array.len, 1);
	assert_int_equal(YAJL_GET_INTEGER(jget(cul->u.array.values[0], "tid")), 101);
	assert_int_equal(YAJL_GET_INTEGER(jget(cul->u.array.values[0], "ns")), 10 * U);
	cont = jget(v, "contention");
	assert_true(cont->u.array.len >= 1);
	assert_string_equal(YAJL_GET_STRING(jget(cont->u.array.values[0], "category")), "lock");
	assert_int_equal(YAJL_GET_INTEGER(jget(cont->u.array.values[0], "ns")), 20 * U);
	assert_int_equal(YAJL_GET_INTEGER(jget(cont->u.array.values[0], "requests")), 2);
	yajl_tree_free(v);
	free(s);
}

static void test_other_formats(void **state)
{
	char *folded[] = {"report", path("a.rec"), "-f", "folded", NULL};
	char *pprof[] = {"report", path("a.rec"), "-f", "pprof", "-o", path("a.pb.gz"), NULL};
	char *html[] = {"report", path("a.rec"), "-f", "html", "-o", path("a.html"), NULL};
	char *perfetto[] = {"report", path("a.rec"), "-f", "perfetto", "-o", path("a.pf"), NULL};
	size_t len;
	char *s;

	assert_int_equal(run(cmd_report, folded), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "srv:80;GET /cart;lock 20000000\n"));
	assert_non_null(strstr(s, "srv:80;GET /cart;cpu 6000000\n"));
	free(s);
	assert_int_equal(run(cmd_report, pprof), 0);
	s = slurp("a.pb.gz", &len);
	assert_true(len > 20);
	assert_int_equal((unsigned char)s[0], 0x1f); /* gzip */
	assert_int_equal((unsigned char)s[1], 0x8b);
	free(s);
	assert_int_equal(run(cmd_report, html), 0);
	s = slurp("a.html", NULL);
	assert_non_null(strstr(s, "<html"));
	assert_non_null(strstr(s, "GET /cart"));
	free(s);
	assert_int_equal(run(cmd_report, perfetto), 0);
	s = slurp("a.pf", NULL);
	assert_non_null(strstr(s, "\"traceEvents\""));
	assert_non_null(strstr(s, "bg"));
	free(s);
}

static void test_diff(void **state)
{
	char *same[] = {"diff", path("a.rec"), path("a.rec"), NULL};
	char *slower[] = {"diff", path("a.rec"), path("b.rec"), NULL};
	char *save[] = {"report", path("a.rec"), "-f", "json", "-o", path("saved.json"), NULL};
	char *saved[] = {"diff", path("saved.json"), path("b.rec"), "-f", "json", NULL};
	char *s;

	assert_int_equal(run(cmd_diff, same), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "no differences"));
	free(s);
	/* the holder holds 10 ms longer: the lock step, +10 ms per request */
	assert_int_equal(run(cmd_diff, slower), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "10.000     20.000     +10.000"));
	assert_non_null(strstr(s, "srv:80 ; GET /cart ; lock"));
	free(s);
	assert_int_equal(run(cmd_report, save), 0);
	assert_int_equal(run(cmd_diff, saved), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "\"change_ns\":10000000"));
	free(s);
}

/* --from / --to on a recording: wall-clock times through the header's
 * clock offset, durations on the recording's own clock (since boot). The
 * requests start at 1.0 s and 1.1 s, i.e. 2023-11-14T22:13:21.0Z and .1Z. */
static void test_time_filters(void **state)
{
	char *from_rt[] = {"report", path("a.rec"), "--from", "2023-11-14T22:13:21.05Z", NULL};
	char *to_rt[] = {"report", path("a.rec"), "--to", "2023-11-14T23:13:21.05+01:00", NULL};
	char *unix_s[] = {"report", path("a.rec"),   "--from", "1700000000.5",
			  "--to",   "1700000001.05", NULL};
	char *boot[] = {"report", path("a.rec"), "--from", "1050ms", NULL};
	char *mixed[] = {"report", path("a.rec"), "--from", "1s", "--to", "1700000001.05", NULL};
	char *none[] = {"report", path("a.rec"), "--from", "2023-11-14T22:14:00Z", NULL};
	char *s;

	assert_int_equal(run(cmd_report, from_rt), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "1 requests (1 more left out by filters)"));
	free(s);
	assert_int_equal(run(cmd_report, to_rt), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "1 requests (1 more left out by filters)"));
	free(s);
	assert_int_equal(run(cmd_report, unix_s), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "1 requests (1 more left out by filters)"));
	free(s);
	assert_int_equal(run(cmd_report, boot), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "1 requests (1 more left out by filters)"));
	free(s);
	assert_int_equal(run(cmd_report, mixed), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "1 requests (1 more left out by filters)"));
	free(s);
	assert_int_equal(run(cmd_report, none), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "0 requests (2 more left out by filters)"));
	free(s);
}

/* A recording cut short: what is readable is reported, and the report
 * says where the file stopped. */
static void test_cut_recording(void **state)
{
	char *argv[] = {"report", path("cut.rec"), NULL};
	struct stat st;
	char *s;
	int in, out;
	char buf[65536];
	ssize_t n;

	assert_int_equal(stat(path("a.rec"), &st), 0);
	in = open(path("a.rec"), O_RDONLY);
	out = open(path("cut.rec"), O_CREAT | O_TRUNC | O_WRONLY, 0600);
	n = read(in, buf, sizeof(buf));
	assert_true(n == st.st_size);
	/* the trailer and part of the last frame gone */
	assert_int_equal(write(out, buf, (size_t)n - 40), n - 40);
	close(in);
	close(out);
	/* the trailer is cut off, the frame before is whole: both requests */
	assert_int_equal(run(cmd_report, argv), 0);
	s = slurp("stdout", NULL);
	assert_non_null(strstr(s, "2 requests"));
	free(s);
	s = slurp("stderr", NULL);
	assert_non_null(strstr(s, "cut.rec: cut short"));
	/* named once, not "cut.rec: …/cut.rec: cut short" */
	assert_null(strstr(s, "cut.rec: /"));
	free(s);
}

/* A recording with its header and no event (the recorder stopped while it
 * started), and one cut inside its header: nothing analysed, exit 1, and a
 * line that says which and where, as dump says it. */
static void test_empty_and_cut_header(void **state)
{
	static struct kb b;
	char *empty[] = {"report", path("empty.rec"), NULL};
	char *cut[] = {"report", path("cuthdr.rec"), NULL};
	char buf[100];
	char *s;
	int in, out;

	memset(&b, 0, sizeof(b));
	kb_write_recording(&b, path("empty.rec"), 0, 0);
	assert_int_equal(run(cmd_report, empty), 1);
	s = slurp("stderr", NULL);
	assert_non_null(strstr(s, "empty.rec: no events: the recording ends after its header"));
	free(s);
	in = open(path("a.rec"), O_RDONLY);
	out = open(path("cuthdr.rec"), O_CREAT | O_TRUNC | O_WRONLY, 0600);
	assert_int_equal(read(in, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	assert_int_equal(write(out, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(in);
	close(out);
	assert_int_equal(run(cmd_report, cut), 1);
	s = slurp("stderr", NULL);
	assert_non_null(strstr(s, "cuthdr.rec: cut short in the header: 100 of "));
	assert_null(strstr(s, "No data available"));
	free(s);
}

/* A "tls pid N" hook record: that process's TLS capture on, or not and
 * why (record/tls.c). */
static void tls_hook(struct kb *b, uint64_t ts, uint32_t pid, uint8_t status, const char *detail)
{
	struct cp_md_hook *h = (void *)kb_new(b, CP_MD_HOOK, sizeof(*h), ts, 0, pid, pid);

	h->status = status;
	snprintf(h->name, sizeof(h->name), "tls pid %u", pid);
	snprintf(h->detail, sizeof(h->detail), "%s", detail);
}

/* Processes whose TLS capture the recorder could not attach (forks of a
 * TLS server gone before their uprobes were): report warns, with the
 * first one's reason; the one attached is not counted. */
static void test_tls_uncaptured(void **state)
{
	static struct kb b;
	char *argv[] = {"report", path("tls.rec"),  "--format", "json",
			"-o",	  path("tls.json"), NULL};
	char *s, err[128];
	yajl_val v, w;
	int found = 0;

	memset(&b, 0, sizeof(b));
	kb_proc(&b, 100, "srv");
	tls_hook(&b, B - 100 * U, 100, CP_HOOK_ATTACHED, "uprobes on SSL_read(_ex) in libssl.so.3");
	tls_hook(
	    &b, B + 300 * U, 300, CP_HOOK_UNAVAILABLE,
	    "no TLS plaintext: exited 0.4 ms after its fork, before its uprobes were attached");
	tls_hook(
	    &b, B + 300 * U, 301, CP_HOOK_UNAVAILABLE,
	    "no TLS plaintext: exited 0.6 ms after its fork, before its uprobes were attached");
	kb_write_recording(&b, path("tls.rec"), 0, b.n);
	assert_int_equal(run(cmd_report, argv), 0);
	s = slurp("tls.json", NULL);
	v = yajl_tree_parse(s, err, sizeof(err));
	assert_non_null(v);
	w = jget(v, "warnings");
	assert_true(YAJL_IS_ARRAY(w));
	for (size_t i = 0; i < w->u.array.len; i++) {
		const char *text = YAJL_GET_STRING(w->u.array.values[i]);

		found +=
		    text &&
		    !strcmp(text,
			    "TLS plaintext was not captured in 2 processes (pid 300: exited "
			    "0.4 ms after its fork, before its uprobes were attached; dump's tls "
			    "pid hooks say why for the others): their TLS connections are framed "
			    "on ciphertext, their requests unnamed");
	}
	assert_int_equal(found, 1);
	yajl_tree_free(v);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_text),	   cmocka_unit_test(test_json),
	    cmocka_unit_test(test_other_formats),  cmocka_unit_test(test_diff),
	    cmocka_unit_test(test_time_filters),   cmocka_unit_test(test_cut_recording),
	    cmocka_unit_test(test_empty_and_cut_header),
	    cmocka_unit_test(test_tls_uncaptured),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
