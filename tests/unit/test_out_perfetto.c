// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Perfetto (Chrome trace-event JSON) output: parse it back with yajl's tree
 * API and check what ui.perfetto.dev relies on: valid JSON, named process
 * and thread tracks, X events that never overlap on one track, and flow
 * pairs that follow the path across threads and processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "out_fixture.h"

static yajl_val write_and_parse(const struct engine_result *r, const struct out_opts *o)
{
	char *buf = NULL, err[256];
	size_t len = 0;
	yajl_val root;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(out_perfetto(f, r, o), 0);
	fclose(f);
	root = yajl_tree_parse(buf, err, sizeof(err));
	if (!root)
		fail_msg("perfetto output is not JSON: %s\n%.2000s", err, buf);
	free(buf);
	return root;
}

static const char *str_of(yajl_val obj, const char *key)
{
	const char *path[] = {key, NULL};
	yajl_val v = yajl_tree_get(obj, path, yajl_t_string);

	return v ? YAJL_GET_STRING(v) : NULL;
}

static double num_of(yajl_val obj, const char *key)
{
	const char *path[] = {key, NULL};
	yajl_val v = yajl_tree_get(obj, path, yajl_t_number);

	if (!v)
		fail_msg("event has no number \"%s\"", key);
	return YAJL_GET_DOUBLE(v);
}

static yajl_val events_of(yajl_val root)
{
	const char *path[] = {"traceEvents", NULL};
	yajl_val ev = yajl_tree_get(root, path, yajl_t_array);

	assert_non_null(ev);
	return ev;
}

static size_t count_ph(yajl_val ev, const char *ph)
{
	size_t i, n = 0;

	for (i = 0; i < ev->u.array.len; i++)
		n += !strcmp(str_of(ev->u.array.values[i], "ph"), ph);
	return n;
}

/* the name of the M event of kind what for (pid, tid), or NULL */
static const char *meta_name(yajl_val ev, const char *what, double pid, double tid)
{
	const char *path[] = {"args", "name", NULL};
	size_t i;

	for (i = 0; i < ev->u.array.len; i++) {
		yajl_val e = ev->u.array.values[i];
		yajl_val n;

		if (strcmp(str_of(e, "ph"), "M") || strcmp(str_of(e, "name"), what))
			continue;
		if (num_of(e, "pid") != pid || (tid >= 0 && num_of(e, "tid") != tid))
			continue;
		n = yajl_tree_get(e, path, yajl_t_string);
		assert_non_null(n);
		return YAJL_GET_STRING(n);
	}
	return NULL;
}

struct xev {
	double pid, tid, ts, dur;
};

static int cmp_xev(const void *a, const void *b)
{
	const struct xev *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static void test_perfetto_structure(void **state)
{
	yajl_val root = write_and_parse(&fx_result, &(struct out_opts){.title = "fx"});
	yajl_val ev = events_of(root);
	struct xev x[64];
	size_t i, nx = 0;
	bool saw_lane = false, saw_lock_culprit = false;

	assert_string_equal(str_of(root, "displayTimeUnit"), "ms");
	/* one X per segment: 7 + 2 + 3 */
	assert_int_equal(count_ph(ev, "X"), 12);
	/* flows: req 1 changes track 4 times, req 2 once, the span trace twice */
	assert_int_equal(count_ph(ev, "s"), 7);
	assert_int_equal(count_ph(ev, "f"), 7);
	assert_int_equal(count_ph(ev, "b"), 3);
	assert_int_equal(count_ph(ev, "e"), 3);

	for (i = 0; i < ev->u.array.len; i++) {
		yajl_val e = ev->u.array.values[i];
		const char *tn;

		if (strcmp(str_of(e, "ph"), "X"))
			continue;
		assert_true(nx < 64);
		x[nx] = (struct xev){num_of(e, "pid"), num_of(e, "tid"), num_of(e, "ts"),
				     num_of(e, "dur")};
		assert_true(x[nx].dur >= 0);
		/* every track is named */
		assert_non_null(meta_name(ev, "process_name", x[nx].pid, -1));
		tn = meta_name(ev, "thread_name", x[nx].pid, x[nx].tid);
		assert_non_null(tn);
		saw_lane |= !strcmp(tn, "web-worker [2]");
		if (!strcmp(str_of(e, "name"), "lock")) {
			const char *p[] = {"args", "culprits", NULL};
			yajl_val c = yajl_tree_get(e, p, yajl_t_array);

			assert_non_null(c);
			assert_string_equal(str_of(c->u.array.values[0], "comm"), "cache-maint");
			assert_int_equal((int)num_of(e, "ts"), 4000);
			assert_int_equal((int)num_of(e, "dur"), 5000);
			saw_lock_culprit = true;
		}
		nx++;
	}
	assert_true(saw_lane);
	assert_true(saw_lock_culprit);
	/* the kernel and span sides are separate processes */
	assert_string_equal(meta_name(ev, "process_name", 1234, -1), "web-accept");
	assert_string_equal(meta_name(ev, "process_name", 2000, -1), "kvstore");
	assert_string_equal(meta_name(ev, "thread_name", 1234, 1236), "web-worker");

	/* per track, X events never overlap */
	qsort(x, nx, sizeof(*x), cmp_xev);
	for (i = 1; i < nx; i++)
		if (x[i].pid == x[i - 1].pid && x[i].tid == x[i - 1].tid &&
		    x[i].ts < x[i - 1].ts + x[i - 1].dur - 1e-6)
			fail_msg("overlap on %g/%g at %g", x[i].pid, x[i].tid, x[i].ts);
	yajl_tree_free(root);
}

static void test_perfetto_flows_pair_up(void **state)
{
	yajl_val root = write_and_parse(&fx_result, &(struct out_opts){0});
	yajl_val ev = events_of(root);
	int seen_s[16] = {0}, seen_f[16] = {0};
	size_t i;

	for (i = 0; i < ev->u.array.len; i++) {
		yajl_val e = ev->u.array.values[i];
		const char *ph = str_of(e, "ph");
		int id;

		if (strcmp(ph, "s") && strcmp(ph, "f"))
			continue;
		id = (int)num_of(e, "id");
		assert_true(id > 0 && id < 16);
		if (*ph == 's') {
			seen_s[id]++;
		} else {
			seen_f[id]++;
			assert_string_equal(str_of(e, "bp"), "e");
		}
	}
	for (i = 1; i < 16; i++)
		assert_int_equal(seen_s[i], seen_f[i]);
	assert_int_equal(seen_s[7], 1);
	yajl_tree_free(root);
}

static void test_perfetto_slowest_only(void **state)
{
	yajl_val root = write_and_parse(&fx_result, &(struct out_opts){.requests = 1});
	yajl_val ev = events_of(root);

	/* the slowest request is the 16 ms one: 7 segments */
	assert_int_equal(count_ph(ev, "X"), 7);
	assert_int_equal(count_ph(ev, "b"), 1);
	yajl_tree_free(root);
}

/* Thread names come from the kernel: not always UTF-8. */
static void test_perfetto_bad_utf8(void **state)
{
	static const char *const fr[] = {"svc\xff", "op"};
	struct cp_segment seg = {.start_ns = 10,
				 .end_ns = 20,
				 .category = CP_CAT_CPU,
				 .frames = fr,
				 .nframes = 2,
				 .pid = 7,
				 .tid = 7,
				 .comm = "bad\xc3\x28",
				 .cpu = 0};
	struct cp_request req = {"7:1:1", "svc", "op\xfe", NULL, 10, 20, false, &seg, 1};
	const struct cp_request *reqs[] = {&req};
	struct engine_result r = {.nrequests = 1, .requests = reqs, .nkept = 1};
	yajl_val root = write_and_parse(&r, &(struct out_opts){0});

	assert_string_equal(meta_name(events_of(root), "thread_name", 7, 7), "bad?(");
	yajl_tree_free(root);
}

/* A kernel segment without a thread still lands on a named track. */
static void test_perfetto_threadless_segment(void **state)
{
	static const char *const fr[] = {"svc", "op"};
	struct cp_segment segs[] = {
	    {.start_ns = 10,
	     .end_ns = 20,
	     .category = CP_CAT_CPU,
	     .frames = fr,
	     .nframes = 2,
	     .pid = 7,
	     .tid = 8,
	     .comm = "t8",
	     .cpu = 0},
	    {.start_ns = 20,
	     .end_ns = 50,
	     .category = CP_CAT_NETWORK,
	     .frames = fr,
	     .nframes = 2,
	     .pid = -1,
	     .tid = -1,
	     .cpu = -1,
	     .peer = "10.0.0.7:5432"},
	};
	struct cp_request req = {"7:1:1", "svc", "op", NULL, 10, 50, false, segs, 2};
	const struct cp_request *reqs[] = {&req};
	struct engine_result r = {.nrequests = 1, .requests = reqs, .nkept = 1};
	yajl_val root = write_and_parse(&r, &(struct out_opts){0});
	yajl_val ev = events_of(root);
	size_t i;

	for (i = 0; i < ev->u.array.len; i++) {
		yajl_val e = ev->u.array.values[i];

		if (!strcmp(str_of(e, "ph"), "X")) {
			assert_true(num_of(e, "pid") >= 0);
			assert_non_null(
			    meta_name(ev, "thread_name", num_of(e, "pid"), num_of(e, "tid")));
		}
	}
	assert_int_equal(count_ph(ev, "s"), 1);
	yajl_tree_free(root);
}

/* Several hosts: each host's processes are a group of their own, the same
 * pid on two hosts two processes, named with their host */
static void test_perfetto_hosts(void **state)
{
	static const char *const fr[] = {"svc", "op"};
	struct cp_segment segs[3];
	struct cp_request req = {"7:1:1", "svc", "op", "front", 10, 40, false, segs, 3};
	const struct cp_request *reqs[] = {&req};
	struct engine_result r = {.nrequests = 1, .requests = reqs, .nkept = 1};
	yajl_val root, ev;
	double pids[3];
	size_t n = 0;

	for (int i = 0; i < 3; i++)
		segs[i] = (struct cp_segment){.start_ns = 10 + 10 * (uint64_t)i,
					      .end_ns = 20 + 10 * (uint64_t)i,
					      .category = CP_CAT_CPU, .frames = fr, .nframes = 2,
					      .pid = 7, .tid = 7, .comm = i == 1 ? "db" : "web",
					      .cpu = 0, .host = i == 1 ? "store" : "front"};
	root = write_and_parse(&r, &(struct out_opts){0});
	ev = events_of(root);
	for (size_t i = 0; i < ev->u.array.len; i++) {
		yajl_val e = ev->u.array.values[i];

		if (!strcmp(str_of(e, "ph"), "X"))
			pids[n++] = num_of(e, "pid");
	}
	/* drawn by track: front's pid 7 twice, then the store's */
	assert_int_equal(n, 3);
	assert_true(pids[0] == pids[1] && pids[1] != pids[2]);
	assert_string_equal(meta_name(ev, "process_name", pids[0], -1), "front: web");
	assert_string_equal(meta_name(ev, "process_name", pids[2], -1), "store: db");
	assert_non_null(meta_name(ev, "thread_name", pids[2], -1));
	yajl_tree_free(root);
}

static void test_perfetto_empty(void **state)
{
	struct engine_result r = {0};
	yajl_val root = write_and_parse(&r, &(struct out_opts){0});

	assert_int_equal(events_of(root)->u.array.len, 0);
	yajl_tree_free(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_perfetto_structure),
	    cmocka_unit_test(test_perfetto_flows_pair_up),
	    cmocka_unit_test(test_perfetto_slowest_only),
	    cmocka_unit_test(test_perfetto_bad_utf8),
	    cmocka_unit_test(test_perfetto_threadless_segment),
	    cmocka_unit_test(test_perfetto_hosts),
	    cmocka_unit_test(test_perfetto_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
