// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The OTLP exporter's configuration and its promises: the headers from the
 * environment (trimmed, percent-decoded, any length, a malformed entry
 * refused by position without its value), the URL as printed, Retry-After
 * capped, and exporter__close's deadline against an endpoint that never
 * answers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "otlp.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *value_of(const struct otlp_headers *h, const char *key)
{
	for (size_t i = 0; i < h->n; i++)
		if (!strcmp(h->h[i].key, key))
			return h->h[i].value;
	return NULL;
}

static void test_headers_decoded(void **state)
{
	struct otlp_headers h = {0};
	char why[256] = "";

	assert_int_equal(otlp_headers__add(&h, " Authorization = Basic%20xyz ,x-a=1,,\tx-b=%3d%2C ",
					   why, sizeof(why)),
			 0);
	assert_int_equal(h.n, 3);
	assert_string_equal(value_of(&h, "Authorization"), "Basic xyz");
	assert_string_equal(value_of(&h, "x-a"), "1");
	assert_string_equal(value_of(&h, "x-b"), "=,");
	/* the signal's own variable: added, and a key there already (any case) replaced */
	assert_int_equal(otlp_headers__add(&h, "X-A=2,x-c=,x-d=a=b", why, sizeof(why)), 0);
	assert_int_equal(h.n, 5);
	assert_null(value_of(&h, "x-a"));
	assert_string_equal(value_of(&h, "X-A"), "2");
	assert_string_equal(value_of(&h, "x-c"), "");
	assert_string_equal(value_of(&h, "x-d"), "a=b");
	/* UTF-8 passes; '+' is not a space */
	assert_int_equal(otlp_headers__add(&h, "x-e=%C3%A9+", why, sizeof(why)), 0);
	assert_string_equal(value_of(&h, "x-e"), "\xc3\xa9+");
	otlp_headers__free(&h);
	assert_int_equal(h.n, 0);
	assert_int_equal(otlp_headers__add(&h, "", why, sizeof(why)), 0);
	assert_int_equal(otlp_headers__add(&h, NULL, why, sizeof(why)), 0);
	assert_int_equal(h.n, 0);
}

static void test_headers_long(void **state)
{
	/* a JWT of 8 KiB, percent-encoded dots included */
	size_t n = 8192;
	char *s = malloc(3 * n + 64), *want = malloc(n + 1);
	struct otlp_headers h = {0};
	char why[256];
	size_t k = (size_t)sprintf(s, "authorization=Bearer%%20");

	for (size_t i = 0; i < n; i++)
		want[i] = i % 100 == 99 ? '.' : (char)('a' + i % 26);
	want[n] = '\0';
	for (size_t i = 0; i < n; i++)
		k += (size_t)(want[i] == '.' ? sprintf(s + k, "%%2E")
					     : sprintf(s + k, "%c", want[i]));
	assert_int_equal(otlp_headers__add(&h, s, why, sizeof(why)), 0);
	assert_int_equal(h.n, 1);
	assert_int_equal(strlen(value_of(&h, "authorization")), n + 7);
	assert_memory_equal(value_of(&h, "authorization"), "Bearer ", 7);
	assert_string_equal(value_of(&h, "authorization") + 7, want);
	otlp_headers__free(&h);
	free(s);
	free(want);
}

/* s is refused; why names entry idx and none of the secret */
static void refused(const char *s, int idx, const char *secret)
{
	struct otlp_headers h = {0};
	char why[256] = "", want[32];

	assert_int_equal(otlp_headers__add(&h, s, why, sizeof(why)), -EINVAL);
	snprintf(want, sizeof(want), "entry %d", idx);
	if (!strstr(why, want) || strstr(why, secret))
		fail_msg("'%s': '%s'", s, why);
	otlp_headers__free(&h);
}

static void test_headers_refused(void **state)
{
	refused("a=1,Bearer s3cret", 2, "s3cret");
	refused("=s3cret", 1, "s3cret");
	refused(" =s3cret", 1, "s3cret");
	refused("a=1, ,b=2,bad key=s3cret", 4, "s3cret");
	refused("x:y=s3cret", 1, "s3cret");
	refused("k=s3cret%0D%0AX-Evil: 1", 1, "s3cret");
	refused("k=s3cret%0a", 1, "s3cret");
	refused("k=s3cret%00", 1, "s3cret");
	refused("k=s3cret\x01", 1, "s3cret");
	refused("k=s3cret%", 1, "s3cret");
	refused("k=s3cret%4", 1, "s3cret");
	refused("k=s3cret%zz", 1, "s3cret");
	refused("k\xc3\xa9=s3cret", 1, "s3cret");
}

static void test_url_shown(void **state)
{
	char b[256];

	assert_string_equal(exporter__url_shown("http://u:p@h:4318/v1/traces", b, sizeof(b)),
			    "http://***@h:4318/v1/traces");
	assert_string_equal(exporter__url_shown("https://u:p@ss@h/v1/traces?x=@y", b, sizeof(b)),
			    "https://***@h/v1/traces?x=@y");
	assert_string_equal(exporter__url_shown("https://tok@h", b, sizeof(b)), "https://***@h");
	assert_string_equal(exporter__url_shown("http://h:4318/v1/traces?a=b@c", b, sizeof(b)),
			    "http://h:4318/v1/traces?a=b@c");
	assert_string_equal(exporter__url_shown("http://h/p/a@b", b, sizeof(b)), "http://h/p/a@b");
}

static void test_retry_after(void **state)
{
	time_t now = 1700000000; /* 2023-11-14 22:13:20 UTC */

	assert_int_equal(exporter__retry_after_ns(" 2", now), 2000000000ull);
	assert_int_equal(exporter__retry_after_ns("3599", now), 30000000000ull);
	assert_int_equal(exporter__retry_after_ns("0", now), 0);
	assert_int_equal(exporter__retry_after_ns("-5", now), 0);
	assert_int_equal(exporter__retry_after_ns("soon", now), 0);
	/* the HTTP-date form, 10 s and an hour ahead, and past */
	assert_int_equal(exporter__retry_after_ns("Tue, 14 Nov 2023 22:13:30 GMT", now),
			 10000000000ull);
	assert_int_equal(exporter__retry_after_ns("Tue, 14 Nov 2023 23:13:20 GMT", now),
			 30000000000ull);
	assert_int_equal(exporter__retry_after_ns("Tue, 14 Nov 2023 22:13:00 GMT", now), 0);
}

static void test_close_deadline(void **state)
{
	/* a listener that never accepts: the connection is made (the backlog)
	 * and the POST never answered; its 10 s timeout must not hold up a
	 * close with 0.3 s left */
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct exporter_opts o = {.queue_max = 4, .batch_max = 1, .timeout_ns = 10000000000ull};
	struct exporter_stats st;
	struct exporter *e;
	char url[64];
	uint8_t x[4] = {1, 2, 3, 4};
	uint64_t t;

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", ntohs(sa.sin_port));
	o.url = url;
	e = exporter__new(&o);
	assert_non_null(e);
	exporter__push(e, x, sizeof(x));
	usleep(300000); /* the POST in flight */
	t = now_ns();
	exporter__close(e, t + 300000000ull, &st);
	t = now_ns() - t;
	if (t > 1500000000ull)
		fail_msg("closed after %.2f s", (double)t / 1e9);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.sent, 0);
	assert_true(st.fails[EXPORT_FAIL_TIMEOUT] >= 1);
	assert_true(st.failing);
	assert_non_null(strstr(st.last_error, "timeout"));
	close(fd);
}

static void test_failure_said(void **state)
{
	/* nothing listens on port 1: refused, said as a connect failure */
	struct exporter_opts o = {
	    .url = "http://127.0.0.1:1/v1/traces", .batch_max = 1, .timeout_ns = 200000000};
	struct exporter *e = exporter__new(&o);
	struct exporter_stats st;
	uint8_t x[4] = {1, 2, 3, 4};

	assert_non_null(e);
	exporter__push(e, x, sizeof(x));
	for (int i = 0; i < 200; i++) {
		exporter__stats(e, &st);
		if (st.fails[EXPORT_FAIL_CONNECT] >= 2)
			break;
		usleep(10000);
	}
	exporter__close(e, now_ns(), &st);
	assert_true(st.fails[EXPORT_FAIL_CONNECT] >= 2);
	assert_int_equal(st.fail_changes, 1); /* the same failure again is no change */
	assert_true(st.failing);
	if (strncmp(st.last_error, "connect: ", 9))
		fail_msg("last error '%s'", st.last_error);
	assert_string_equal(exporter__fail_name(EXPORT_FAIL_CONNECT), "connect");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_headers_decoded), cmocka_unit_test(test_headers_long),
	    cmocka_unit_test(test_headers_refused), cmocka_unit_test(test_url_shown),
	    cmocka_unit_test(test_retry_after),	    cmocka_unit_test(test_close_deadline),
	    cmocka_unit_test(test_failure_said),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
