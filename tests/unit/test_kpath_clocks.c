// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* kpath/clocks.h: hosts' clock offsets from hand-built message streams. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "clocks.h"

#define US 1000ull
#define MS 1000000ull
#define T0 (1000 * MS)

struct end {
	const char *addr;
	uint16_t port;
};

static void put_addr(uint8_t *dst, const char *a)
{
	memset(dst, 0, CP_ADDR_LEN);
	assert_int_equal(inet_pton(AF_INET, a, dst), 1);
}

/* host's thread tid woke at ts (its next send began after) */
static void wake(struct kp_clocks *cl, uint32_t host, uint32_t tid, uint64_t ts)
{
	struct cp_ev_sched_waking e = {.h = {.ts = ts, .type = CP_EV_SCHED_WAKING,
					     .size = sizeof(e), .tid = 1}};

	e.wakee_tid = e.wakee_pid = tid;
	kp_clocks__add(cl, host, &e.h, 0);
}

/* a write of n bytes from seq, done at ts (the record's enter_ts as the
 * default capture has it: after the bytes left) */
static void sock(struct kp_clocks *cl, uint32_t host, uint32_t tid, uint8_t call, struct end l,
		 struct end r, uint32_t seq, uint32_t n, uint64_t ts)
{
	struct cp_ev_sock e = {.h = {.ts = ts, .type = CP_EV_SOCK,
				     .size = offsetof(struct cp_ev_sock, payload), .tid = tid}};

	e.enter_ts = ts - US;
	e.bytes = n;
	e.phase = CP_PHASE_EXIT;
	e.call = call;
	e.family = AF_INET;
	e.sock_type = SOCK_STREAM;
	e.lport = l.port;
	e.rport = r.port;
	e.tcp_seq = seq;
	put_addr(e.laddr, l.addr);
	put_addr(e.raddr, r.addr);
	kp_clocks__add(cl, host, &e.h, 0);
}

static void arrive(struct kp_clocks *cl, uint32_t host, struct end l, struct end r,
		   uint32_t rcv_nxt, uint64_t ts)
{
	struct cp_ev_sk_data_ready e = {
	    .h = {.ts = ts, .type = CP_EV_SK_DATA_READY, .size = sizeof(e), .tid = 0}};

	e.family = AF_INET;
	e.protocol = IPPROTO_TCP;
	e.lport = l.port;
	e.rport = r.port;
	e.rcv_nxt = rcv_nxt;
	put_addr(e.laddr, l.addr);
	put_addr(e.raddr, r.addr);
	kp_clocks__add(cl, host, &e.h, 0);
}

/*
 * n round trips between client host a and server host b, as each host's
 * clock says: b's clock is off (ahead) by skew. The client's view of the
 * server's end is cs (the server's own, or a virtual address behind DNAT).
 * One way takes lat; each side's thread wakes 20 µs before it sends.
 */
static void round_trips(struct kp_clocks *cl, uint32_t a, uint32_t b, int64_t skew, int n,
			struct end c, struct end cs, struct end s, uint64_t start, uint64_t lat)
{
	uint32_t cseq = 1000, sseq = 3000000000u;

	for (int i = 0; i < n; i++) {
		uint64_t t = start + (uint64_t)i * MS, tb = t + (uint64_t)skew;

		wake(cl, a, 10, t - 20 * US);
		sock(cl, a, 10, CP_SOCK_WRITE, c, cs, cseq, 100, t + 5 * US);
		arrive(cl, b, s, c, cseq + 100, tb + lat);
		sock(cl, b, 20, CP_SOCK_READ, s, c, cseq, 100, tb + lat + 10 * US);
		cseq += 100;
		wake(cl, b, 20, tb + 200 * US);
		sock(cl, b, 20, CP_SOCK_WRITE, s, c, sseq, 500, tb + 220 * US + 5 * US);
		arrive(cl, a, c, cs, sseq + 500, t + 220 * US + lat);
		sseq += 500;
	}
}

static const struct end C = {"10.0.0.1", 40000}, S = {"10.0.0.2", 8000};

static void test_pair_skewed(void **state)
{
	struct kp_clocks *cl = kp_clocks__new(2);
	struct kp_clock_est est[2];

	round_trips(cl, 0, 1, 3 * (int64_t)MS, 50, C, S, S, T0, 30 * US);
	/* each round trip: the request's arrival and its read, the reply's
	 * arrival */
	assert_int_equal(kp_clocks__pair_messages(cl, 0, 1), 3 * 50);
	kp_clocks__solve(cl, 0, est);
	assert_int_equal(est[0].basis, KP_CLOCK_REFERENCE);
	assert_int_equal(est[0].offset_ns, 0);
	assert_int_equal(est[1].basis, KP_CLOCK_MESSAGES);
	/* the truth is within the stated uncertainty, which is the one-way
	 * time and the sender's 20 µs before its send */
	assert_true(llabs(est[1].offset_ns - 3 * (int64_t)MS) <= (int64_t)est[1].uncertainty_ns);
	assert_true(est[1].uncertainty_ns <= 60 * US);
	assert_int_equal(est[1].conflict_ns, 0);
	assert_int_equal(est[1].messages, 150);
	kp_clocks__free(cl);
}

/* The client sees a virtual address: matched by its own end, which the
 * server sees too */
static void test_dnat(void **state)
{
	struct kp_clocks *cl = kp_clocks__new(2);
	struct end vip = {"10.96.0.10", 80};
	struct kp_clock_est est[2];

	round_trips(cl, 0, 1, -(int64_t)(2 * MS), 20, C, vip, S, T0, 40 * US);
	kp_clocks__solve(cl, 0, est);
	assert_int_equal(est[1].basis, KP_CLOCK_MESSAGES);
	assert_true(llabs(est[1].offset_ns + 2 * (int64_t)MS) <= (int64_t)est[1].uncertainty_ns);
	kp_clocks__free(cl);
}

/* a (0) talks to b (1), b to c (2); d (3) to nobody: c is placed through
 * b, d keeps its realtime offset */
static void test_chain_and_silent(void **state)
{
	struct kp_clocks *cl = kp_clocks__new(4);
	struct kp_clock_est est[4];
	struct end b_out = {"10.0.0.2", 41000}, c_srv = {"10.0.0.3", 9000};

	round_trips(cl, 0, 1, 1 * (int64_t)MS, 30, C, S, S, T0, 30 * US);
	/* b's clock: +1 ms; c's: +1 ms + 4 ms */
	round_trips(cl, 1, 2, 4 * (int64_t)MS, 30, b_out, c_srv, c_srv, T0 + 1 * MS + 300 * US,
		    30 * US);
	assert_true(kp_clocks__enough(cl, 30));
	assert_false(kp_clocks__enough(cl, 200));
	assert_int_equal(kp_clocks__pair_messages(cl, 0, 2), 0);
	assert_int_equal(kp_clocks__pair_messages(cl, 0, 3), 0);
	kp_clocks__solve(cl, 0, est);
	assert_true(llabs(est[1].offset_ns - 1 * (int64_t)MS) <= (int64_t)est[1].uncertainty_ns);
	assert_int_equal(est[2].basis, KP_CLOCK_MESSAGES);
	assert_true(llabs(est[2].offset_ns - 5 * (int64_t)MS) <= (int64_t)est[2].uncertainty_ns);
	/* through b: the uncertainties add up */
	assert_true(est[2].uncertainty_ns > est[1].uncertainty_ns);
	assert_int_equal(est[3].basis, KP_CLOCK_REALTIME);
	assert_int_equal(est[3].offset_ns, 0);
	assert_int_equal(est[3].messages, 0);
	kp_clocks__free(cl);
}

/* Bytes one way only, received "before" they were sent by b's clock:
 * b is moved just enough; bytes that arrive after they were sent leave
 * the realtime offset as it was */
static void test_one_way(void **state)
{
	struct kp_clocks *cl = kp_clocks__new(3);
	struct kp_clock_est est[3];
	struct end b = {"10.0.0.5", 5000}, c = {"10.0.0.6", 5000};

	for (int i = 0; i < 10; i++) {
		uint64_t t = T0 + (uint64_t)i * MS;

		wake(cl, 0, 10, t - 20 * US);
		sock(cl, 0, 10, CP_SOCK_WRITE, C, b, 500 + 100 * (uint32_t)i, 100, t);
		/* b's clock 2 ms behind */
		arrive(cl, 1, b, C, 500 + 100 * ((uint32_t)i + 1), t + 30 * US - 2 * MS);
		sock(cl, 0, 11, CP_SOCK_WRITE, C, c, 9000 + 10 * (uint32_t)i, 10, t);
		arrive(cl, 2, c, C, 9000 + 10 * ((uint32_t)i + 1), t + 30 * US);
	}
	assert_false(kp_clocks__enough(cl, 1)); /* no pair both ways */
	kp_clocks__solve(cl, 0, est);
	assert_int_equal(est[1].basis, KP_CLOCK_ONE_WAY);
	/* moved so that the arrival is not before the wakeup before the send */
	assert_int_equal(est[1].offset_ns, -(int64_t)(2 * MS) + 30 * US + 20 * US);
	assert_int_equal(est[2].basis, KP_CLOCK_ONE_WAY);
	assert_int_equal(est[2].offset_ns, 0);
	kp_clocks__free(cl);
}

/* Bounds that contradict each other (an arrival before its send began:
 * drift, or a wrong match) leave the middle, as uncertain as they are
 * apart, and say by how much they clash */
static void test_conflict(void **state)
{
	struct kp_clocks *cl = kp_clocks__new(2);
	struct kp_clock_est est[2];

	/* a's send began at T0 + 100 µs, b had its bytes at T0: c_b - c_a >=
	 * 100 µs; b's reply began at T0 + 200, a had it at T0 + 240: c_b -
	 * c_a <= 40 µs */
	wake(cl, 0, 10, T0 + 100 * US);
	sock(cl, 0, 10, CP_SOCK_WRITE, C, S, 1000, 100, T0 + 110 * US);
	arrive(cl, 1, S, C, 1100, T0);
	wake(cl, 1, 20, T0 + 200 * US);
	sock(cl, 1, 20, CP_SOCK_WRITE, S, C, 5000, 10, T0 + 210 * US);
	arrive(cl, 0, C, S, 5010, T0 + 240 * US);
	kp_clocks__solve(cl, 0, est);
	assert_int_equal(est[1].basis, KP_CLOCK_MESSAGES);
	assert_int_equal(est[1].conflict_ns, 60 * US);
	assert_int_equal(est[1].uncertainty_ns, 30 * US);
	assert_int_equal(est[1].offset_ns, -(int64_t)(70 * US));
	kp_clocks__free(cl);
}

/* Bytes of another stream with the same ends (a port used again) do not
 * match: the sequence numbers differ; and a host's own loopback traffic
 * says nothing of clocks */
static void test_no_false_match(void **state)
{
	struct kp_clocks *cl = kp_clocks__new(2);
	struct kp_clock_est est[2];

	wake(cl, 0, 10, T0);
	sock(cl, 0, 10, CP_SOCK_WRITE, C, S, 1000, 100, T0 + 10 * US);
	arrive(cl, 1, S, C, 777777, T0 + 50 * US);
	arrive(cl, 0, S, C, 1100, T0 + 50 * US); /* the same host */
	assert_int_equal(kp_clocks__pair_messages(cl, 0, 1), 0);
	kp_clocks__solve(cl, 0, est);
	assert_int_equal(est[1].basis, KP_CLOCK_REALTIME);
	kp_clocks__free(cl);
}

/* Times at the ends of the clock (a forged recording, or realtime offsets
 * 292 years apart): bounds as far apart as int64 goes still solve, in
 * both ways and one way, without an overflow */
static void test_extreme_times(void **state)
{
	static const uint64_t ends[][2] = {
	    {T0, T0 + (1ull << 63)}, {T0 + (1ull << 63), T0},	  {T0, UINT64_MAX - T0},
	    {UINT64_MAX - T0, T0},   {T0, T0 + (1ull << 63) - 1}, {T0 + (1ull << 63) + 1, T0},
	};
	const struct end b2 = {"10.0.0.2", 41000}, c3 = {"10.0.0.3", 9000};

	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
		for (int way = 0; way < 2; way++) {
			struct kp_clocks *cl = kp_clocks__new(3);
			struct kp_clock_est est[3];
			uint64_t a = ends[i][0], b = ends[i][1];

			wake(cl, 0, 10, a);
			sock(cl, 0, 10, CP_SOCK_WRITE, C, S, 1000, 100, a + 10 * US);
			arrive(cl, 1, S, C, 1100, b);
			if (way) {
				wake(cl, 1, 20, b);
				sock(cl, 1, 20, CP_SOCK_WRITE, S, C, 5000, 10, b + 10 * US);
				arrive(cl, 0, C, S, 5010, a);
			}
			/* and a third host, one way from b */
			wake(cl, 1, 21, b);
			sock(cl, 1, 21, CP_SOCK_WRITE, b2, c3, 77, 10, b + 10 * US);
			arrive(cl, 2, c3, b2, 87, a);
			kp_clocks__solve(cl, 0, est);
			assert_int_equal(est[1].basis, way ? KP_CLOCK_MESSAGES : KP_CLOCK_ONE_WAY);
			kp_clocks__free(cl);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pair_skewed),	     cmocka_unit_test(test_dnat),
	    cmocka_unit_test(test_chain_and_silent), cmocka_unit_test(test_one_way),
	    cmocka_unit_test(test_no_false_match),   cmocka_unit_test(test_conflict),
	    cmocka_unit_test(test_extreme_times),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
