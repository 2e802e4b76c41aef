// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Connections open before the recording started. `critpath record -p` on a
 * busy server attaches in the middle of exchanges, and its metadata (the
 * processes and their listening sockets) can come after a connection's first
 * records: a server's connection whose first record is the reply to a
 * request that came before the recording, or a client's whose first record
 * is a downstream reply. Which side of the connection the process is on is
 * guessed from who spoke first, and corrected when a listening port comes to
 * be known. `make demo` starts its load a second before it records, and
 * found no front-end request at all before this was so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "test_kpath_builder.h"

#define U 1000000ull
#define B (1000 * U)

static const struct kb_tuple CL = {"10.0.0.1", 80, "10.0.0.2", 5000};
static const char REPLY[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";

/* srv's thread 101, blocked in a read on CL since tick 1, gets "GET /a" at
 * 10 and answers at 12 (after calling out, when call is set). */
static void request_at_10(struct kb *b, void (*call)(struct kb *b))
{
	kb_switch(b, B + 1 * U, 0, 100, 101, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_dready(b, B + 10 * U, 0, 100, CL, 2000);
	kb_wake(b, B + 10 * U, 0, 100, 101, 0, 0, CP_CTX_SOFTIRQ, CP_SOFTIRQ_NET_RX);
	kb_switch(b, B + 10 * U, 0, 0, 0, CP_PREV_PREEMPTED, 100, 101, "srv");
	kb_sock(b, B + 1 * U + 500, B + 10 * U + 1000, 100, 101, CP_SOCK_READ, 5, CL, 20, 1980,
		"GET /a HTTP/1.1\r\n\r\n");
	if (call)
		call(b);
	kb_sock(b, B + 30 * U - 1000, B + 30 * U, 100, 101, CP_SOCK_WRITE, 5, CL,
		(int64_t)strlen(REPLY), 9040, REPLY);
}

/* srv's thread 101 writes the reply to a request from before the recording */
static void reply_in_flight(struct kb *b)
{
	kb_sock(b, B + 1 * U - 1000, B + 1 * U, 100, 101, CP_SOCK_WRITE, 5, CL,
		(int64_t)strlen(REPLY), 9000, REPLY);
}

/* b's one request is request_at_10's: GET /a on srv:80, from 10 to 30 */
static void check_get_a(const struct kb *b)
{
	assert_int_equal(b->nreqs, 1);
	assert_string_equal(b->reqs[0].service, "srv:80");
	assert_string_equal(b->reqs[0].name, "GET /a");
	assert_int_equal(b->reqs[0].start, B + 10 * U);
	assert_int_equal(b->reqs[0].end, B + 30 * U);
	kb_check_tiling(&b->reqs[0]);
}

/* The first record on CL is the reply to a request from before the
 * recording, and srv's listening socket is known only after it: CL is
 * still a server's connection, and the next request on it is found. */
static void test_reply_in_flight(void **state)
{
	static struct kb b;

	memset(&b, 0, sizeof(b));
	reply_in_flight(&b);
	kb_proc_at(&b, B + 3 * U, 100, "srv");
	kb_md_socket(&b, B + 3 * U, 100, 3, 80, 0, true);
	kb_md_socket(&b, B + 3 * U, 100, 5, 80, 5000, false);
	request_at_10(&b, NULL);
	assert_int_equal(kb_run(&b), 0);
	check_get_a(&b);
}

static const struct kb_tuple D = {"10.0.0.1", 41000, "10.0.0.1", 6379};

/* a call to kv on D at 12, its reply at 20 */
static void call_kv(struct kb *b)
{
	kb_sock(b, B + 12 * U - 1000, B + 12 * U, 100, 101, CP_SOCK_WRITE, 7, D, 7, 300,
		"get k\r\n");
	kb_switch(b, B + 12 * U, 0, 100, 101, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_dready(b, B + 20 * U, 0, 100, D, 520);
	kb_wake(b, B + 20 * U, 0, 100, 101, 0, 0, CP_CTX_SOFTIRQ, CP_SOFTIRQ_NET_RX);
	kb_switch(b, B + 20 * U, 0, 0, 0, CP_PREV_PREEMPTED, 100, 101, "srv");
	kb_sock(b, B + 12 * U + 500, B + 20 * U + 1000, 100, 101, CP_SOCK_READ, 7, D, 20, 500,
		"VALUE k 0 3\r\nabc\r\n");
}

/* The first record on D, srv's connection to kv (also traced, on this
 * host), is the read of a reply to a call made before the recording: it
 * looks like a server's connection until kv's listening port is known. D
 * is then srv's call out, not a service of srv's (no request on it), and
 * srv's service port stays 80, not D's ephemeral port. */
static void test_downstream_reply_in_flight(void **state)
{
	static struct kb b;
	const struct kb_req *q;
	bool network = false;

	memset(&b, 0, sizeof(b));
	kb_switch(&b, B + 1 * U - 2000, 0, 100, 101, CP_PREV_PREEMPTED, 0, 0, NULL);
	kb_sock(&b, B + 1 * U - 3000, B + 1 * U - 1500, 100, 101, CP_SOCK_READ, 7, D, 20, 480,
		"VALUE j 0 3\r\nxyz\r\n");
	kb_proc_at(&b, B + 3 * U, 100, "srv");
	kb_md_socket(&b, B + 3 * U, 100, 3, 80, 0, true);
	kb_proc_at(&b, B + 3 * U, 200, "kv");
	kb_md_socket(&b, B + 3 * U, 200, 3, 6379, 0, true);
	request_at_10(&b, call_kv);
	assert_int_equal(kb_run(&b), 0);
	for (uint32_t i = 0; i < b.nreqs; i++)
		print_message("  request %s %s\n", b.reqs[i].service, b.reqs[i].name);
	check_get_a(&b);
	q = &b.reqs[0];
	for (uint32_t i = 0; i < q->nsegs; i++)
		if (q->segs[i].cat == CP_CAT_NETWORK && q->segs[i].start == B + 12 * U &&
		    q->segs[i].end == B + 20 * U)
			network = true;
	assert_true(network); /* the call's 8 ticks, on kv's side of D */
}

/* The same with the listening ports known first: decided at once, as
 * before (and no different from the corrected guesses above). */
static void test_listen_known_first(void **state)
{
	static struct kb b;

	memset(&b, 0, sizeof(b));
	kb_proc(&b, 100, "srv");
	kb_md_socket(&b, 0, 100, 3, 80, 0, true);
	kb_proc(&b, 200, "kv");
	kb_md_socket(&b, 0, 200, 3, 6379, 0, true);
	reply_in_flight(&b);
	request_at_10(&b, call_kv);
	assert_int_equal(kb_run(&b), 0);
	check_get_a(&b);
}

/* A forking server (PostgreSQL: the postmaster listens, a backend it forked
 * has the connection): the backend's first record is a reply in flight, and
 * the listening socket is its parent's. The connection is still a server's,
 * whether the parent's listening socket is known before it or after. */
static void test_forked_server(void **state)
{
	static struct kb b;

	for (int late = 0; late <= 1; late++) {
		uint64_t md = late ? B + 3 * U : 0;

		memset(&b, 0, sizeof(b));
		kb_proc_at(&b, md, 90, "srv");
		kb_md_socket(&b, md, 90, 3, 80, 0, true);
		kb_proc_at(&b, md, 100, "srv");
		kb_md_socket(&b, md, 100, 5, 80, 5000, false);
		reply_in_flight(&b);
		request_at_10(&b, NULL);
		assert_int_equal(kb_run(&b), 0);
		check_get_a(&b);
	}
}

/* A Unix-domain server's connection (PostgreSQL's local socket, Docker's
 * API), open before the recording, whose first record is a reply: with no
 * ports to go by, the accepted end's own address (CP_SOCK_F_BOUND) says it
 * is the server's. A socketpair's end has none: who spoke first decides, a
 * client's here. */
static void test_unix_reply_in_flight(void **state)
{
	static struct kb b;

	for (int bound = 1; bound >= 0; bound--) {
		memset(&b, 0, sizeof(b));
		kb_proc(&b, 100, "srv");
		kb_sock_unix(&b, B + 1 * U - 1000, B + 1 * U, 100, 100, CP_SOCK_WRITE, 7,
			     (int64_t)strlen(REPLY), REPLY);
		if (bound)
			kb_last_bound(&b);
		kb_switch(&b, B + 1 * U, 0, 100, 100, CP_PREV_BLOCKED, 0, 0, NULL);
		kb_wake(&b, B + 10 * U, 0, 100, 100, 555, 555, CP_CTX_TASK, CP_SOFTIRQ_NONE);
		kb_switch(&b, B + 10 * U, 0, 0, 0, CP_PREV_PREEMPTED, 100, 100, "srv");
		kb_sock_unix(&b, B + 1 * U + 500, B + 10 * U + 1000, 100, 100, CP_SOCK_READ, 7, 20,
			     "GET /a HTTP/1.1\r\n\r\n");
		if (bound)
			kb_last_bound(&b);
		kb_sock_unix(&b, B + 12 * U - 1000, B + 12 * U, 100, 100, CP_SOCK_WRITE, 7,
			     (int64_t)strlen(REPLY), REPLY);
		if (bound)
			kb_last_bound(&b);
		assert_int_equal(kb_run(&b), 0);
		assert_int_equal(b.nreqs, (uint32_t)bound);
		if (bound) {
			assert_string_equal(b.reqs[0].service, "srv:unix");
			assert_string_equal(b.reqs[0].name, "GET /a");
			kb_check_tiling(&b.reqs[0]);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reply_in_flight),
	    cmocka_unit_test(test_downstream_reply_in_flight),
	    cmocka_unit_test(test_listen_known_first),
	    cmocka_unit_test(test_forked_server),
	    cmocka_unit_test(test_unix_reply_in_flight),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
