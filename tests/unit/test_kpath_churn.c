// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Memory follows the open window, not the stream (DESIGN.md section 7):
 * 100,000 short connections (accept, request, response, close; one a
 * millisecond) through the kernel-path core. Every request is found, and
 * closed connections are recycled once the window has passed them, so the
 * connection table stays a small fraction of all connections seen. A socket
 * closed by one process but still used by another is not recycled.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "test_kpath_builder.h"

#define US 1000ull
#define MS 1000000ull
#define NCONN 100000u

static uint64_t nreq, nbad;
static uint64_t worker_start[2];
static char worker_ids[2][64]; /* of the requests starting at worker_start */

static int count(void *arg, const struct cp_request *r)
{
	nreq++;
	if (strcmp(r->name, "GET /k") || r->end_ns - r->start_ns != 40 * US)
		nbad++;
	for (int i = 0; i < 2; i++)
		if (r->start_ns == worker_start[i])
			snprintf(worker_ids[i], sizeof(worker_ids[i]), "%s", r->id);
	return 0;
}

/* One connection from port: accepted at t, a request read at t + 20 us,
 * answered at t + 60 us, closed at t + 70 us, by thread 100. */
static void one_conn(struct kb *b, uint64_t t, uint16_t port, bool close_it)
{
	const struct kb_tuple c = {"10.0.0.1", 80, "10.0.0.2", port};
	const char *req = "GET /k HTTP/1.1\r\n\r\n";

	kb_sock(b, t - 5 * US, t, 100, 100, CP_SOCK_ACCEPT, 7, c, 7, 0, NULL);
	kb_dready(b, t + 20 * US, 0, 100, c, 1000 + (uint32_t)strlen(req));
	kb_sock(b, t + 10 * US, t + 21 * US, 100, 100, CP_SOCK_READ, 7, c, (int64_t)strlen(req),
		1000, req);
	kb_sock(b, t + 50 * US, t + 60 * US, 100, 100, CP_SOCK_WRITE, 7, c, 17, 5000,
		"HTTP/1.1 200 OK\r\n");
	if (close_it)
		kb_sock(b, t + 65 * US, t + 70 * US, 100, 100, CP_SOCK_CLOSE, 7, c, 0, 0, NULL);
}

static void test_churn(void **state)
{
	static struct kb b;
	static const char *const models[] = {"m", "m"};
	struct kp kp;
	uint64_t t = 1000 * MS;

	memset(&b, 0, sizeof(b));
	nreq = nbad = 0;
	kp__init(&kp, count, NULL);
	assert_int_equal(kp__add_source(&kp, "boot-1", 0, "h", NULL, 2, models), 0);
	kb_proc(&b, 100, "srv");
	kb_feed(&kp, &b);
	for (uint32_t k = 0; k < NCONN; k++, t += MS) {
		one_conn(&b, t, (uint16_t)(1024 + k % 60000), true);
		kb_feed(&kp, &b);
	}
	assert_int_equal(kp__finish(&kp), 0);
	assert_int_equal(nreq, NCONN);
	assert_int_equal(nbad, 0);
	print_message("# %u connections: %u in the table at the end, %llu recycled\n", NCONN,
		      kp.ncn, (unsigned long long)kp.conns_recycled);
	assert_true(kp.ncn < NCONN / 4);
	assert_true(kp.conns_recycled > NCONN / 2);
	kp__free(&kp);
}

static uint64_t nfolded;

static int count_folded(void *arg, const struct cp_request *r)
{
	nreq++;
	nfolded += !strcmp(r->name, CP_OTHER_NAMES);
	return 0;
}

/* A client choosing a new path for every request (no number in it to
 * template): past max_names distinct names, new ones are one name, so the
 * process does not grow with them; a name seen before the bound keeps its
 * own. */
static void test_names_bound(void **state)
{
	static struct kb b;
	static const char *const models[] = {"m", "m"};
	struct kp kp;
	uint64_t t = 1000 * MS;

	memset(&b, 0, sizeof(b));
	nreq = nfolded = 0;
	kp__init(&kp, count_folded, NULL);
	kp.max_names = 50;
	assert_int_equal(kp__add_source(&kp, "boot-1", 0, "h", NULL, 2, models), 0);
	kb_proc(&b, 100, "srv");
	kb_feed(&kp, &b);
	for (uint32_t k = 0; k < 2000; k++, t += MS) {
		const struct kb_tuple c = {"10.0.0.1", 80, "10.0.0.2", (uint16_t)(1024 + k)};
		char req[64];

		/* "GET /p/abc": letters, so a name of its own each; the first
		 * ten again at the end */
		snprintf(req, sizeof(req), "GET /p/%c%c%c HTTP/1.1\r\n\r\n",
			 'a' + (k < 1990 ? k : k - 1990) % 26, 'a' + (k < 1990 ? k : k - 1990) / 26 % 26,
			 'a' + (k < 1990 ? k : k - 1990) / 676 % 26);
		kb_sock(&b, t - 5 * US, t, 100, 100, CP_SOCK_ACCEPT, 7, c, 7, 0, NULL);
		kb_dready(&b, t + 20 * US, 0, 100, c, 1000 + (uint32_t)strlen(req));
		kb_sock(&b, t + 10 * US, t + 21 * US, 100, 100, CP_SOCK_READ, 7, c,
			(int64_t)strlen(req), 1000, req);
		kb_sock(&b, t + 50 * US, t + 60 * US, 100, 100, CP_SOCK_WRITE, 7, c, 17, 5000,
			"HTTP/1.1 200 OK\r\n");
		kb_sock(&b, t + 65 * US, t + 70 * US, 100, 100, CP_SOCK_CLOSE, 7, c, 0, 0, NULL);
		kb_feed(&kp, &b);
	}
	assert_int_equal(kp__finish(&kp), 0);
	assert_int_equal(nreq, 2000);
	/* 50 names: the service's and 49 requests' (the last ten among them) */
	assert_int_equal(nfolded, 2000 - 49 - 10);
	assert_int_equal(kp.names_folded, nfolded);
	assert_true(kp.names.n <= 50);
	kp__free(&kp);
}

/* Process 100 accepts and closes its copy of the socket; process 200 (a
 * forked worker holding the same socket) serves a request on it right
 * after, and another seven seconds later: the connection is the same one
 * all along (ids "<pid>:<conn>:0" and "<pid>:<conn>:1"), never recycled. */
static void worker_request(struct kb *b, uint64_t t, struct kb_tuple c, uint32_t seq)
{
	const char *req = "GET /k HTTP/1.1\r\n\r\n";

	kb_dready(b, t + 20 * US, 0, 200, c, seq + (uint32_t)strlen(req));
	kb_sock(b, t + 10 * US, t + 21 * US, 200, 200, CP_SOCK_READ, 7, c, (int64_t)strlen(req),
		seq, req);
	kb_sock(b, t + 50 * US, t + 60 * US, 200, 200, CP_SOCK_WRITE, 7, c, 17, 5000 + seq,
		"HTTP/1.1 200 OK\r\n");
}

static void test_shared_socket(void **state)
{
	static struct kb b;
	static const char *const models[] = {"m", "m"};
	const struct kb_tuple c = {"10.0.0.1", 80, "10.0.0.2", 4000};
	struct kp kp;
	uint64_t t = 1000 * MS;
	char *colon;

	memset(&b, 0, sizeof(b));
	memset(worker_ids, 0, sizeof(worker_ids));
	worker_start[0] = t + 23 * US;
	worker_start[1] = t + 7100 * MS + 20 * US;
	nreq = nbad = 0;
	kp__init(&kp, count, NULL);
	assert_int_equal(kp__add_source(&kp, "boot-1", 0, "h", NULL, 2, models), 0);
	kb_proc(&b, 100, "srv");
	kb_proc(&b, 200, "srv");
	kb_sock(&b, t - 5 * US, t, 100, 100, CP_SOCK_ACCEPT, 7, c, 7, 0, NULL);
	kb_sock(&b, t + 1 * US, t + 2 * US, 100, 100, CP_SOCK_CLOSE, 7, c, 0, 0, NULL);
	worker_request(&b, t + 3 * US, c, 1000);
	kb_feed(&kp, &b);
	/* seven seconds of other connections let pruning run */
	for (uint32_t k = 0; k < 70000; k++) {
		one_conn(&b, t + 100 * US + k * 100 * US, (uint16_t)(5000 + k % 50000), false);
		kb_feed(&kp, &b);
	}
	worker_request(&b, t + 7100 * MS, c, 1019);
	kb_feed(&kp, &b);
	assert_int_equal(kp__finish(&kp), 0);
	assert_int_equal(nreq, 70002);
	assert_int_equal(nbad, 0);
	colon = strrchr(worker_ids[0], ':');
	assert_non_null(colon);
	assert_string_equal(colon, ":0");
	*colon = '\0';
	assert_true(!strncmp(worker_ids[1], worker_ids[0], strlen(worker_ids[0])));
	assert_string_equal(worker_ids[1] + strlen(worker_ids[0]), ":1");
	kp__free(&kp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_churn),
	    cmocka_unit_test(test_names_bound),
	    cmocka_unit_test(test_shared_socket),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
