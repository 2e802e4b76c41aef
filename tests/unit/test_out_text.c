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
	/* the holder running: said once, not as its own culprit */
	assert_non_null(strstr(s, "lock        held by cache-maint/105 cpu0 interference\n"));
	assert_null(strstr(s, "culprits: cache-maint"));
	assert_non_null(strstr(s, "reqs    ms/had  step\n"));
	assert_non_null(strstr(s, "         2     0.500  frontend:8080 ; GET /cart ; runqueue\n"));
	assert_non_null(strstr(s, "Warnings (1)"));
	free(s);
	engine__free(e);
}

/* An event loop's request: many consecutive segments of one thread and
 * category, as a loop busy with other clients leaves them, print as one
 * line with their culprits summed; the request still says its segments. */
static void test_fold(void **state)
{
	static const char *const fr[] = {"nginx:80", "GET /x", "(other requests)"};
	static const struct cp_culprit c1[] = {{7, 7, "hog", 1000}};
	static const struct cp_culprit c2[] = {{7, 7, "hog", 2000}, {8, 8, "ksoftirqd", 500}};
	struct cp_segment g[6];
	struct cp_request q = {.id = "1:2:3", .service = "nginx:80", .name = "GET /x",
			       .start_ns = 1000000, .segs = g, .nsegs = 6};
	struct engine *e = engine__new(&(struct engine_opts){.keep_slowest = 1});
	struct out_opts o = {.top = 20, .requests = 1};
	size_t len;
	char *s;

	for (int i = 0; i < 6; i++) {
		g[i] = (struct cp_segment){.start_ns = 1000000 + i * 100000ull,
					   .end_ns = 1000000 + (i + 1) * 100000ull,
					   .category = i < 4 ? CP_CAT_RUNQUEUE : CP_CAT_CPU,
					   .frames = fr, .nframes = i < 4 ? 3 : 2,
					   .interference = i < 4, .pid = 5, .tid = 6, .cpu = 1,
					   .comm = "nginx"};
	}
	g[1].culprits = c1, g[1].nculprits = 1;
	g[3].culprits = c2, g[3].nculprits = 2;
	q.end_ns = g[5].end_ns;
	assert_int_equal(engine__add_request(e, &q), 1);
	s = render(e, &o, &len);
	assert_non_null(strstr(s, "6 segments\n"));
	assert_non_null(strstr(s, "+0.000     0.400  runqueue    nginx/6 cpu1 in (other requests) "
				  "interference culprits: hog/7 0.003 ms, ksoftirqd/8 0.001 ms "
				  "(4 segments)\n"));
	assert_non_null(strstr(s, "+0.400     0.200  cpu         nginx/6 cpu1 (2 segments)\n"));
	free(s);
	engine__free(e);
}

/* A request's header names its target as sent, with secret query values
 * redacted; a thread waiting on a lock names its holder; a network step
 * whose frame is its peer says the peer once. */
static void test_plain(void **state)
{
	static const char *const fr[] = {"py:80", "GET /login", "new connection on 10.0.0.1:80"};
	static const struct cp_culprit held[] = {{7, 8, "bg", 2000000}};
	struct cp_segment g[3] = {
	    {.start_ns = 1000000, .end_ns = 2000000, .category = CP_CAT_NETWORK, .frames = fr,
	     .nframes = 3, .pid = -1, .tid = -1, .cpu = -1, .peer = fr[2]},
	    {.start_ns = 2000000, .end_ns = 4000000, .category = CP_CAT_LOCK, .frames = fr,
	     .nframes = 2, .interference = true, .pid = 7, .tid = 9, .cpu = -1, .comm = "py",
	     .culprits = held, .nculprits = 1},
	    {.start_ns = 4000000, .end_ns = 5000000, .category = CP_CAT_CPU, .frames = fr,
	     .nframes = 2, .pid = 7, .tid = 9, .cpu = 0, .comm = "py"},
	};
	struct cp_request q = {.id = "1:2:3", .service = "py:80", .name = "GET /login",
			       .target = "/login?user=al&token=s3cret&X-Goog-Signature=ab%2F&x=1",
			       .start_ns = 1000000, .end_ns = 5000000, .segs = g, .nsegs = 3};
	struct engine *e = engine__new(&(struct engine_opts){.keep_slowest = 1});
	struct out_opts o = {.top = 20, .requests = 1};
	size_t len;
	char *s;

	assert_int_equal(engine__add_request(e, &q), 1);
	s = render(e, &o, &len);
	assert_non_null(strstr(s, "request 1:2:3: py:80 GET /login (/login?user=al&token=REDACTED&"
				  "X-Goog-Signature=REDACTED&x=1), latency"));
	assert_null(strstr(s, "s3cret"));
	assert_non_null(strstr(s, "+0.000     1.000  network     peer new connection on "
				  "10.0.0.1:80\n"));
	assert_non_null(strstr(s, "lock        py/9 interference held by: bg/8 2.000 ms\n"));
	free(s);
	engine__free(e);
}

/* Thread and request names come from other processes and the network: a
 * terminal escape, a newline or a byte that is not UTF-8 is shown escaped,
 * never written to the reader's terminal */
static void test_hostile_names(void **state)
{
	static const char *const fr[] = {"sv\x1b[2J:80", "GET /a\nb\xff", "f\xc2\x9b" "1m"};
	static const struct cp_culprit c[] = {{7, 8, "\x1b]0;owned\x07", 2000000}};
	struct cp_segment g[1] = {
	    {.start_ns = 1000000, .end_ns = 3000000, .category = CP_CAT_RUNQUEUE, .frames = fr,
	     .nframes = 3, .pid = 7, .tid = 9, .cpu = 0, .comm = "w\rx\x7f",
	     .culprits = c, .nculprits = 1},
	};
	struct cp_request q = {.id = "1:2:3", .service = fr[0], .name = fr[1],
			       .start_ns = 1000000, .end_ns = 3000000, .segs = g, .nsegs = 1};
	struct engine *e = engine__new(&(struct engine_opts){.keep_slowest = 1});
	struct out_opts o = {.top = 20, .requests = 1};
	size_t len;
	char *s;

	assert_int_equal(engine__add_request(e, &q), 1);
	s = render(e, &o, &len);
	for (size_t i = 0; i < len; i++)
		assert_true(s[i] == '\n' || ((unsigned char)s[i] >= 0x20 && s[i] != 0x7f));
	assert_null(strstr(s, "\xc2\x9b"));
	assert_non_null(strstr(s, "request 1:2:3: sv\\x1b[2J:80 GET /a\\x0ab\\xff, latency"));
	assert_non_null(strstr(s, "runqueue    w\\x0dx\\x7f/9 cpu0 in f\\u009b1m culprits: "
				  "\\x1b]0;owned\\x07/8 2.000 ms\n"));
	free(s);
	engine__free(e);
}

/* Several hosts: where each clock was put, and the steps on another host */
static void test_hosts(void **state)
{
	struct engine *e = fx_two_hosts();
	struct out_opts o = {.top = 20, .requests = 1};
	size_t len;
	char *s = render(e, &o, &len);

	assert_non_null(strstr(s, "\nHosts (clocks on front's time base)\n"
				  "  front                the time base\n"
				  "  store                +3.014 ms ± 0.061 ms, from 418 messages\n"));
	assert_non_null(strstr(s, "request 1:2:3: nginx:80 GET /x on front"));
	assert_non_null(strstr(s, "python3/51 cpu0 on store in store:9000@store get\n"));
	assert_null(strstr(s, "nginx/5 cpu0 on"));
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
	    cmocka_unit_test(test_fold),
	    cmocka_unit_test(test_hosts),
	    cmocka_unit_test(test_plain),
	    cmocka_unit_test(test_hostile_names),
	    cmocka_unit_test(test_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
