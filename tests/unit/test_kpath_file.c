// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * kpath__analyze end to end without root: a hand-built lock-holder scenario
 * (SCENARIOS.md kernel case 4) written as a real recording, read back in
 * time order, walked, and aggregated by the engine — the lock holder must
 * top the contention table and the CPU model must come from the header.
 * Also: the same records split over two recordings of one host give the
 * same request, and a missing file is an error naming it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "kpath.h"
#define KB_WITH_RECORDING
#include "test_kpath_builder.h"

#define U 1000000ull
#define B (1000 * U)

static const struct kb_tuple CL = {"10.0.0.1", 80, "10.0.0.2", 5000};

static void lock_scenario(struct kb *b)
{
	memset(b, 0, sizeof(*b));
	kb_proc(b, 100, "srv");
	kb_switch(b, B - 60 * U, 1, 100, 101, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_wake(b, B - 10 * U, 1, 100, 101, 0, 0, CP_CTX_HARDIRQ, CP_SOFTIRQ_NONE);
	kb_switch(b, B - 10 * U, 1, 0, 0, CP_PREV_PREEMPTED, 100, 101, "bg");
	kb_switch(b, B - 50 * U, 0, 100, 100, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_dready(b, B, 0, 100, CL, 1030);
	kb_wake(b, B, 0, 100, 100, 0, 0, CP_CTX_SOFTIRQ, CP_SOFTIRQ_NET_RX);
	kb_switch(b, B, 0, 0, 0, CP_PREV_PREEMPTED, 100, 100, "srv");
	kb_sock(b, B - 50 * U - 1, B + 1000, 100, 100, CP_SOCK_READ, 5, CL, 30, 1000,
		"GET /cart HTTP/1.1\r\n\r\n");
	kb_switch(b, B + 1 * U, 0, 100, 100, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_wake(b, B + 11 * U, 1, 100, 100, 100, 101, CP_CTX_TASK, CP_SOFTIRQ_NONE);
	kb_switch(b, B + 11 * U, 0, 0, 0, CP_PREV_PREEMPTED, 100, 100, "srv");
	kb_futex(b, B + 1 * U - 100, B + 11 * U + 500, 100, 100, 0x2000);
	kb_switch(b, B + 12 * U, 1, 100, 101, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_sock(b, B + 13 * U - 1000, B + 13 * U, 100, 100, CP_SOCK_WRITE, 5, CL, 40, 9000,
		"HTTP/1.1 200 OK\r\n");
	qsort(b->recs, b->n, sizeof(b->recs[0]), kb_cmp);
}

static const struct engine_result *analyze(struct engine *e, const char *const *paths, int n)
{
	engine__set_quiet(e, true);
	assert_int_equal(kpath__analyze(paths, n, (struct cp_sink[]){engine__sink(e)},
					&(struct kpath_opts){.quiet = true}),
			 0);
	return engine__result(e);
}

static void test_lock_recording(void **state)
{
	static struct kb b;
	char path[] = "/tmp/critpath-kpath-XXXXXX";
	int fd = mkstemp(path);
	const char *paths[] = {path};
	struct engine *e = engine__new(&(struct engine_opts){.keep_all_requests = true});
	const struct engine_result *r;
	const struct cp_request *q;

	assert_true(fd >= 0);
	close(fd);
	lock_scenario(&b);
	kb_write_recording(&b, path, 0, b.n);
	r = analyze(e, paths, 1);
	assert_int_equal(r->nrequests, 1);
	assert_int_equal(r->nkept, 1);
	q = r->requests[0];
	assert_string_equal(q->service, "srv:80");
	assert_string_equal(q->name, "GET /cart");
	assert_string_equal(q->host, "host-1");
	assert_int_equal(q->start_ns, B);
	assert_int_equal(q->end_ns, B + 13 * U);
	/* SCENARIOS.md case 4: R 0→1, the holder 1→11 (R's wait), R 11→13 */
	assert_int_equal(q->nsegs, 3);
	assert_int_equal(q->segs[0].category, CP_CAT_CPU);
	assert_int_equal(q->segs[0].tid, 100);
	assert_int_equal(q->segs[1].category, CP_CAT_LOCK);
	assert_int_equal(q->segs[1].tid, 101);
	assert_string_equal(q->segs[1].cpu_model, "Test CPU B");
	assert_string_equal(q->segs[1].sku, "sku-x");
	assert_int_equal(q->segs[2].category, CP_CAT_CPU);
	assert_string_equal(q->segs[2].cpu_model, "Test CPU A");
	assert_true(r->ncontention >= 1);
	assert_int_equal(r->contention[0].tid, 101);
	assert_int_equal(r->contention[0].category, CP_CAT_LOCK);
	assert_int_equal(r->contention[0].ns, 10 * U);
	engine__free(e);
	unlink(path);
}

/* One host, two recordings (say, two recorders): merged by time, they give
 * the same single request as one file. */
static void test_split_recordings(void **state)
{
	static struct kb b;
	char p1[] = "/tmp/critpath-kpath-XXXXXX", p2[] = "/tmp/critpath-kpath-XXXXXX";
	int f1 = mkstemp(p1), f2 = mkstemp(p2);
	const char *paths[] = {p1, p2};
	struct engine *e = engine__new(&(struct engine_opts){.keep_all_requests = true});
	const struct engine_result *r;

	assert_true(f1 >= 0 && f2 >= 0);
	close(f1);
	close(f2);
	lock_scenario(&b);
	kb_write_recording(&b, p1, 0, b.n / 2);
	kb_write_recording(&b, p2, b.n / 2, b.n);
	r = analyze(e, paths, 2);
	assert_int_equal(r->nrequests, 1);
	assert_int_equal(r->requests[0]->nsegs, 3);
	assert_int_equal(r->requests[0]->segs[1].category, CP_CAT_LOCK);
	engine__free(e);
	unlink(p1);
	unlink(p2);
}

static bool has_warning(const struct engine_result *r, const char *part)
{
	for (uint32_t i = 0; i < r->nwarnings; i++)
		if (strstr(r->warnings[i], part))
			return true;
	return false;
}

/* A loss window the recorder wrote after the request ended (it notices
 * drops late) still marks it partial: the trailer counts the lost events, so
 * the request waits for late loss windows. With events = 0 (a forged file:
 * the trailer then counts none), the request goes out as soon as it ends, is
 * not marked, and a warning says the trailer did not match. */
static void loss_case(bool counted)
{
	static struct kb b;
	char path[] = "/tmp/critpath-kpath-XXXXXX";
	int fd = mkstemp(path);
	const char *paths[] = {path};
	struct engine *e = engine__new(&(struct engine_opts){.keep_all_requests = true});
	const struct engine_result *r;

	assert_true(fd >= 0);
	close(fd);
	lock_scenario(&b);
	/* the next request on the connection ends the first one */
	kb_sock(&b, B + 50 * U - 1000, B + 50 * U, 100, 100, CP_SOCK_READ, 5, CL, 30, 1000,
		"GET /next HTTP/1.1\r\n\r\n");
	kb_loss_at(&b, B + 100 * U, B + 5 * U, B + 6 * U);
	((struct cp_md_loss *)&b.recs[b.n - 1].u.h)->events = counted;
	/* something after it, so the stream moves past the loss record */
	kb_switch(&b, B + 200 * U, 1, 0, 0, CP_PREV_PREEMPTED, 100, 101, "bg");
	kb_write_recording(&b, path, 0, b.n);
	r = analyze(e, paths, 1);
	assert_int_equal(r->nrequests, 1);
	assert_int_equal(r->requests[0]->partial, counted);
	assert_int_equal(has_warning(r, "are partial"), counted);
	assert_int_equal(has_warning(r, "trailer counts no lost events"), !counted);
	engine__free(e);
	unlink(path);
}

static void test_loss_late(void **state)
{
	loss_case(true);
}

static void test_loss_unpromised(void **state)
{
	loss_case(false);
}

struct seen {
	int requests, warnings;
	char service[64];
	bool interned;
};

static int seen_request(void *ctx, const struct cp_request *r)
{
	struct seen *s = ctx;

	s->requests++;
	s->interned = r->interned;
	snprintf(s->service, sizeof(s->service), "%s", r->service ? r->service : "");
	return 0;
}

static void seen_warn(void *ctx, const char *msg)
{
	((struct seen *)ctx)->warnings++;
}

/* The library without a file or an engine: records from memory, in time
 * order, to a sink that only counts (no intern: strings are kpath's own). */
static void test_streaming(void **state)
{
	static struct kb b;
	static const struct recording_cpu cpus[2] = {{0, "Test CPU A", 2000, 1024},
						     {1, "Test CPU B", 3000, 1024}};
	struct recording_info info = {.host = "host-1", .boot_id = "boot-1", .ncpus = 2,
				      .cpus = cpus, .payload_bytes = CP_PAYLOAD_DEFAULT};
	struct seen s = {0};
	struct kpath *kp = kpath__new(&(struct cp_sink){seen_request, seen_warn, &s, NULL});
	int src;

	assert_non_null(kp);
	lock_scenario(&b);
	src = kpath__add_source(kp, "live", &info, true);
	assert_int_equal(src, 0);
	for (uint32_t i = 0; i < b.n; i++)
		assert_int_equal(kpath__add(kp, (uint32_t)src, &b.recs[i].u.h), 0);
	assert_int_equal(kpath__flush(kp), 0);
	assert_int_equal(s.requests, 1);
	assert_string_equal(s.service, "srv:80");
	assert_false(s.interned);
	assert_int_equal(kpath__records(kp), b.n);
	kpath__free(kp);
}

static void test_missing_file(void **state)
{
	const char *paths[] = {"/nonexistent/critpath.rec"};
	struct engine *e = engine__new(&(struct engine_opts){0});

	engine__set_quiet(e, true);
	assert_true(kpath__analyze(paths, 1, (struct cp_sink[]){engine__sink(e)},
				   &(struct kpath_opts){.quiet = true}) < 0);
	engine__free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lock_recording), cmocka_unit_test(test_split_recordings),
	    cmocka_unit_test(test_loss_late),	   cmocka_unit_test(test_loss_unpromised),
	    cmocka_unit_test(test_missing_file),	   cmocka_unit_test(test_streaming),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
