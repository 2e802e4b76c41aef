// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Requests on a TLS connection (record's TLS plaintext capture): the socket
 * calls carry ciphertext, the requests are named by the plaintext of the
 * TLS library's reads (CP_EV_TLS_READ) and the status by the plaintext of
 * its writes, while their times stay the socket calls' (DESIGN.md section
 * 5: start when the first bytes reach the process, end at the last byte
 * written). The handshake's exchanges are requests named "TLS handshake".
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

static const struct kb_tuple CL = {"10.0.0.1", 443, "10.0.0.2", 5000};
static const char CLIENT_HELLO[] = "\x16\x03\x01\x02\x10";
static const char CCS[] = "\x14\x03\x03\x01\x01";

/* The server thread 100 blocks at `from` and its bytes arrive at `at`
 * (sequence seq → seq + n), waking it: it runs from there. */
static void arrive(struct kb *b, uint64_t from, uint64_t at, uint32_t seq, uint32_t n)
{
	kb_switch(b, from, 0, 100, 100, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_dready(b, at, 0, 100, CL, seq + n);
	kb_wake(b, at, 0, 100, 100, 0, 0, CP_CTX_SOFTIRQ, CP_SOFTIRQ_NET_RX);
	kb_switch(b, at, 0, 0, 0, CP_PREV_PREEMPTED, 100, 100, "https");
}

/* The ClientHello arrives at B and the server answers at B + 1 unit with
 * its first flight of server_bytes, whose record header is flight. */
static void hello(struct kb *b, int64_t server_bytes, const char *flight)
{
	arrive(b, B - 50 * U, B, 1000, 5);
	kb_sock(b, B - 50 * U - 1, B + 1000, 100, 100, CP_SOCK_READ, 5, CL, 5, 1000, CLIENT_HELLO);
	kb_sock(b, B + U - 1000, B + U, 100, 100, CP_SOCK_WRITE, 5, CL, server_bytes, 7000, flight);
}

/* One request over TLS whose bytes arrive at B + at units and whose
 * response is written at B + end units: SSL_read's two socket reads (the
 * record's header, then its body: flagged, no payload), the plaintext at
 * its return (unless plain is NULL: not recorded), SSL_write's socket write
 * with the plaintext response. */
static void tls_request(struct kb *b, uint64_t from, uint64_t at, uint64_t end, uint32_t seq,
			const char *plain, const char *response)
{
	uint64_t a = B + at * U;

	arrive(b, B + from * U, a, seq, 51);
	kb_sock(b, B + from * U - 1000, a + 1000, 100, 100, CP_SOCK_READ, 5, CL, 5, seq, NULL);
	kb_last_tls(b);
	kb_sock(b, a + 1500, a + 2000, 100, 100, CP_SOCK_READ, 5, CL, 46, seq + 5, NULL);
	kb_last_tls(b);
	if (plain)
		kb_tls_read(b, B + from * U - 2000, a + 3000, 100, 100, 5, CL,
			    (int64_t)strlen(plain), seq, plain);
	kb_sock(b, B + end * U - 1000, B + end * U, 100, 100, CP_SOCK_WRITE, 5, CL,
		(int64_t)strlen(response) + 22, 9000, response);
	kb_last_tls(b);
}

/* A keep-alive HTTPS connection: the handshake (ClientHello → server
 * flight; change_cipher_spec and Finished → session tickets), then two
 * requests, each named by its plaintext with its status. */
static void build_connection(struct kb *b, bool plaintext)
{
	memset(b, 0, sizeof(*b));
	kb_proc(b, 100, "https");
	hello(b, 1300, "\x16\x03\x03\x00\x7a");
	arrive(b, B + U, B + 3 * U, 1517, 80);
	kb_sock(b, B + U + 100, B + 3 * U + 1000, 100, 100, CP_SOCK_READ, 5, CL, 6, 1517, CCS);
	kb_sock(b, B + 4 * U - 1000, B + 4 * U, 100, 100, CP_SOCK_WRITE, 5, CL, 510, 8300,
		"\x17\x03\x03\x00\xfa");
	tls_request(b, 4, 10, 12, 1597, plaintext ? "GET /x HTTP/1.1\r\nHost: a\r\n\r\n" : NULL,
		    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
	tls_request(b, 12, 20, 23, 1648, plaintext ? "GET /y/17 HTTP/1.1\r\nHost: a\r\n\r\n" : NULL,
		    "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno\n");
}

static void test_tls_named_by_plaintext(void **state)
{
	static struct kb b;

	build_connection(&b, true);
	assert_int_equal(kb_run(&b), 0);
	assert_int_equal(b.nreqs, 4);
	assert_string_equal(b.reqs[0].name, "TLS handshake");
	assert_string_equal(b.reqs[1].name, "TLS handshake");
	assert_string_equal(b.reqs[2].name, "GET /x");
	assert_string_equal(b.reqs[2].tag, "http.status=200");
	assert_string_equal(b.reqs[3].name, "GET /y/{n}");
	assert_string_equal(b.reqs[3].tag, "http.status=404");
	/* the socket calls' times: the ciphertext's arrival, the last write */
	assert_int_equal(b.reqs[2].start, B + 10 * U);
	assert_int_equal(b.reqs[2].end, B + 12 * U);
	assert_int_equal(b.reqs[3].start, B + 20 * U);
	assert_int_equal(b.reqs[3].end, B + 23 * U);
	for (uint32_t i = 0; i < b.nreqs; i++)
		kb_check_tiling(&b.reqs[i]);
	assert_string_equal(b.reqs[2].segs[0].stack, "https:443;GET /x");
}

/* Recorded without the plaintext (--no-tls, --payload-bytes 0, or a
 * library not probed): the same requests and times, unnamed. */
static void test_tls_without_plaintext(void **state)
{
	static struct kb b;

	build_connection(&b, false);
	assert_int_equal(kb_run(&b), 0);
	assert_int_equal(b.nreqs, 4);
	assert_string_equal(b.reqs[2].name, "request");
	assert_string_equal(b.reqs[3].name, "request");
	/* the plaintext of SSL_write still gives the status */
	assert_string_equal(b.reqs[3].tag, "http.status=404");
	assert_int_equal(b.reqs[3].start, B + 20 * U);
	assert_int_equal(b.reqs[3].end, B + 23 * U);
	for (uint32_t i = 0; i < b.nreqs; i++)
		kb_check_tiling(&b.reqs[i]);
}

/* Plaintext that is not the request being read: another thread's, or one
 * after the response began, leaves the name alone. */
static void test_tls_plaintext_elsewhere(void **state)
{
	static struct kb b;

	build_connection(&b, false);
	kb_tls_read(&b, B + 10 * U, B + 10 * U + 3000, 100, 101, 5, CL, 20, 1597,
		    "GET /other HTTP/1.1\r\n");
	kb_tls_read(&b, B + 12 * U, B + 12 * U + 10, 100, 100, 5, CL, 20, 1597,
		    "GET /late HTTP/1.1\r\n");
	assert_int_equal(kb_run(&b), 0);
	assert_int_equal(b.nreqs, 4);
	assert_string_equal(b.reqs[2].name, "request");
}

/* The "tls pid 100" hook record: process 100's TLS calls are captured. */
static void captured(struct kb *b)
{
	struct cp_md_hook *h = (void *)kb_new(b, CP_MD_HOOK, sizeof(*h), B - 100 * U, 0, 100, 100);

	h->status = CP_HOOK_ATTACHED;
	snprintf(h->name, sizeof(h->name), "tls pid 100");
}

/* TLS 1.3 after a HelloRetryRequest: a third flight, the client's Finished
 * (an application data record, read outside SSL_read) and the server's
 * session ticket. In a process whose TLS calls are captured (its "tls pid"
 * hook record) it is a handshake exchange; without that record (--no-tls)
 * nothing says so, and it stays unnamed. */
static void build_third_flight(struct kb *b, bool with_hook)
{
	memset(b, 0, sizeof(*b));
	kb_proc(b, 100, "https");
	if (with_hook)
		captured(b);
	hello(b, 99, "\x16\x03\x03\x00\x58");
	arrive(b, B + U, B + 2 * U, 1517, 80);
	kb_sock(b, B + U + 100, B + 2 * U + 1000, 100, 100, CP_SOCK_READ, 5, CL, 6, 1517, CCS);
	kb_sock(b, B + 3 * U - 1000, B + 3 * U, 100, 100, CP_SOCK_WRITE, 5, CL, 1300, 7099,
		"\x16\x03\x03\x00\x7a");
	arrive(b, B + 3 * U, B + 4 * U, 1597, 74);
	kb_sock_bytes(b, B + 3 * U + 100, B + 4 * U + 1000, 100, 100, CP_SOCK_READ, 5, CL, 74, 1597,
		      "\x17\x03\x03\x00\x45", 5);
	kb_sock(b, B + 5 * U - 1000, B + 5 * U, 100, 100, CP_SOCK_WRITE, 5, CL, 79, 8399,
		"\x17\x03\x03\x00\x4a");
	tls_request(b, 5, 10, 12, 1671, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n",
		    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
}

static void test_tls13_third_flight(void **state)
{
	static struct kb b;

	build_third_flight(&b, true);
	assert_int_equal(kb_run(&b), 0);
	assert_int_equal(b.nreqs, 4);
	assert_string_equal(b.reqs[0].name, "TLS handshake");
	assert_string_equal(b.reqs[1].name, "TLS handshake");
	assert_string_equal(b.reqs[2].name, "TLS handshake");
	assert_string_equal(b.reqs[3].name, "GET /x");
	build_third_flight(&b, false);
	assert_int_equal(kb_run(&b), 0);
	assert_int_equal(b.nreqs, 4);
	assert_string_equal(b.reqs[2].name, "request");
	assert_string_equal(b.reqs[3].name, "GET /x");
}

/* A library that reads ahead (nginx): the client's last TLS 1.3 flight
 * (change_cipher_spec, then Finished in an application data record) and
 * its first request come in one socket read at B + 3 units; the library
 * answers the Finished with session tickets at B + 4, then SSL_read
 * returns the request from its buffer with no socket read inside (the
 * recorder gives it the handshake's connection) and the response goes out
 * at B + 6. One request from that read to the response, named by the
 * plaintext; a second one on the same connection as usual. */
static void test_tls13_request_read_ahead(void **state)
{
	static struct kb b;
	static const char last[] = "\x14\x03\x03\x00\x01\x01\x17\x03\x03\x00\x45";

	memset(&b, 0, sizeof(b));
	kb_proc(&b, 100, "https");
	captured(&b);
	hello(&b, 1300, "\x16\x03\x03\x00\x7a");
	arrive(&b, B + U, B + 3 * U, 1517, 181);
	kb_sock_bytes(&b, B + U + 100, B + 3 * U + 1000, 100, 100, CP_SOCK_READ, 5, CL, 181, 1517,
		      last, sizeof(last) - 1);
	kb_sock(&b, B + 4 * U - 1000, B + 4 * U, 100, 100, CP_SOCK_WRITE, 5, CL, 287, 8300,
		"\x17\x03\x03\x01\x1a");
	kb_sock(&b, B + 4 * U + 500, B + 4 * U + 1000, 100, 100, CP_SOCK_WRITE, 5, CL, 287, 8587,
		"\x17\x03\x03\x01\x1a");
	kb_tls_read(&b, B + 4 * U + 2000, B + 4 * U + 3000, 100, 100, 5, CL, 28, 1517,
		    "GET /b HTTP/1.1\r\nHost: a\r\n\r\n");
	kb_sock(&b, B + 6 * U - 1000, B + 6 * U, 100, 100, CP_SOCK_WRITE, 5, CL, 60, 8874,
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
	kb_last_tls(&b);
	tls_request(&b, 6, 10, 12, 1698, "GET /a HTTP/1.1\r\nHost: a\r\n\r\n",
		    "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno\n");
	assert_int_equal(kb_run(&b), 0);
	assert_int_equal(b.nreqs, 3);
	assert_string_equal(b.reqs[0].name, "TLS handshake");
	assert_string_equal(b.reqs[1].name, "GET /b");
	assert_string_equal(b.reqs[1].tag, "http.status=200");
	assert_int_equal(b.reqs[1].start, B + 3 * U);
	assert_int_equal(b.reqs[1].end, B + 6 * U);
	assert_string_equal(b.reqs[2].name, "GET /a");
	assert_string_equal(b.reqs[2].tag, "http.status=404");
	for (uint32_t i = 0; i < b.nreqs; i++)
		kb_check_tiling(&b.reqs[i]);
}

/* Thread tid's SSL_read or SSL_write (call) on memory buffers returned at
 * `at`: its plaintext, recorded without a connection. */
static void bio_tls(struct kb *b, uint64_t at, uint32_t tid, uint8_t call, const char *plain)
{
	struct cp_ev_tls_read *e;

	kb_tls_read(b, at - 500, at, 100, tid, -1, CL, (int64_t)strlen(plain), 0, plain);
	e = &b->recs[b->n - 1].u.tr;
	e->call = call;
	e->family = e->lport = e->rport = 0;
	memset(e->laddr, 0, sizeof(e->laddr));
	memset(e->raddr, 0, sizeof(e->raddr));
}

/* Process 100, its TLS calls captured, has done the handshake on CL; the
 * client's last flight and its request come in one read by thread 100 at
 * B + 3 units, as curl sends them. */
static void opened(struct kb *b)
{
	memset(b, 0, sizeof(*b));
	kb_proc(b, 100, "https");
	captured(b);
	hello(b, 1300, "\x16\x03\x03\x00\x7a");
	arrive(b, B + U, B + 3 * U, 1517, 120);
	kb_sock(b, B + U + 100, B + 3 * U + 1000, 100, 100, CP_SOCK_READ, 5, CL, 120, 1517, CCS);
}

/* A library on memory buffers (Node.js): the thread reads the ciphertext
 * itself (no call inside the library), then SSL_read decrypts it, its
 * plaintext recorded without a connection (fd -1); thread 101 serves a
 * second connection, CL2, at the same time. Each plaintext names the
 * request of its thread's last socket read; each SSL_write's plaintext
 * gives the status of the response its thread's next socket write carries. */
static void test_tls_memory_buffers(void **state)
{
	static const struct kb_tuple CL2 = {"10.0.0.1", 443, "10.0.0.3", 6000};
	static struct kb b;
	const struct kb_req *x, *y;

	opened(&b);
	bio_tls(&b, B + 3 * U + 3000, 100, CP_TLS_SSL_READ, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
	/* thread 101 reads CL2's request; 100's next SSL_read is CL's still */
	kb_sock_bytes(&b, B + 4 * U, B + 4 * U + 1000, 100, 101, CP_SOCK_READ, 6, CL2, 74, 3000,
		      "\x17\x03\x03\x00\x45", 5);
	bio_tls(&b, B + 4 * U + 3000, 101, CP_TLS_SSL_READ, "GET /y HTTP/1.1\r\nHost: a\r\n\r\n");
	/* SSL_write's plaintext, recorded the same way, then the socket
	 * write of its ciphertext */
	bio_tls(&b, B + 6 * U - 3000, 100, CP_TLS_SSL_WRITE, "HTTP/1.1 200 OK\r\n\r\n");
	kb_sock(&b, B + 6 * U - 1000, B + 6 * U, 100, 100, CP_SOCK_WRITE, 5, CL, 60, 8300,
		"\x17\x03\x03\x00\x37");
	bio_tls(&b, B + 7 * U - 3000, 101, CP_TLS_SSL_WRITE, "HTTP/1.1 404 Not Found\r\n\r\n");
	kb_sock(&b, B + 7 * U - 1000, B + 7 * U, 100, 101, CP_SOCK_WRITE, 6, CL2, 60, 9300,
		"\x17\x03\x03\x00\x37");
	assert_int_equal(kb_run(&b), 0);
	x = kb_find_name(&b, "GET /x");
	y = kb_find_name(&b, "GET /y");
	assert_non_null(x);
	assert_non_null(y);
	assert_int_equal(x->start, B + 3 * U);
	assert_int_equal(x->end, B + 6 * U);
	assert_int_equal(y->end, B + 7 * U);
	assert_string_equal(x->tag, "http.status=200");
	assert_string_equal(y->tag, "http.status=404");
	for (uint32_t i = 0; i < b.nreqs; i++)
		kb_check_tiling(&b.reqs[i]);
}

/* Go's crypto/tls (call, on thread tid) with its library connection id. */
static void go_tls(struct kb *b, uint64_t at, uint32_t tid, uint8_t call, uint64_t id,
		   const char *plain)
{
	struct cp_ev_tls_read *e;

	bio_tls(b, at, tid, call, plain);
	e = &b->recs[b->n - 1].u.tr;
	for (int i = 0; i < 6; i++)
		e->tls_id[i] = (uint8_t)(id >> (8 * i));
	assert_int_equal(cp_tls_id(e), id);
}

/*
 * Go's crypto/tls: a goroutine resumes on any thread. Connection CL's
 * reads (library connection A) and CL2's (B) are made by threads 100 and
 * 101, then their writes by the other thread; CL's next read is decrypted
 * on thread 101, whose last socket read was CL2's, and its request's first
 * byte comes alone (Go's HTTP/1 server). Each plaintext still names its
 * own connection's request, each write gives its own connection's status;
 * the close_notify alerts the two ends trade at the end are no request.
 */
static void test_tls_go_library_connection(void **state)
{
	static const struct kb_tuple CL2 = {"10.0.0.1", 443, "10.0.0.3", 6000};
	static const char *ciph = "\x17\x03\x03\x00\x45";
	static struct kb b;
	const struct kb_req *x, *y, *z;

	opened(&b);
	go_tls(&b, B + 3 * U + 3000, 100, CP_TLS_GO_READ, 0xc000010000,
	       "GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
	kb_sock_bytes(&b, B + 4 * U, B + 4 * U + 1000, 100, 101, CP_SOCK_READ, 6, CL2, 74, 3000,
		      (const uint8_t *)ciph, 5);
	go_tls(&b, B + 4 * U + 3000, 101, CP_TLS_GO_READ, 0xc000020000,
	       "GET /y HTTP/1.1\r\nHost: a\r\n\r\n");
	/* the writes, each on the other thread */
	go_tls(&b, B + 6 * U - 3000, 101, CP_TLS_GO_WRITE, 0xc000010000, "HTTP/1.1 200 OK\r\n\r\n");
	kb_sock(&b, B + 6 * U - 1000, B + 6 * U, 100, 101, CP_SOCK_WRITE, 5, CL, 60, 8300, ciph);
	go_tls(&b, B + 7 * U - 3000, 100, CP_TLS_GO_WRITE, 0xc000020000,
	       "HTTP/1.1 404 Not Found\r\n\r\n");
	kb_sock(&b, B + 7 * U - 1000, B + 7 * U, 100, 100, CP_SOCK_WRITE, 6, CL2, 60, 9300, ciph);
	/* CL's next request: read by 100, decrypted on 101 (its last socket
	 * read CL2's), its first byte alone */
	kb_sock(&b, B + 8 * U, B + 8 * U + 1000, 100, 101, CP_SOCK_READ, 6, CL2, 74, 3074, ciph);
	kb_sock_bytes(&b, B + 9 * U, B + 9 * U + 1000, 100, 100, CP_SOCK_READ, 5, CL, 74, 1637,
		      (const uint8_t *)ciph, 5);
	go_tls(&b, B + 9 * U + 2000, 101, CP_TLS_GO_READ, 0xc000010000, "G");
	go_tls(&b, B + 9 * U + 3000, 101, CP_TLS_GO_READ, 0xc000010000,
	       "ET /z HTTP/1.1\r\nHost: a\r\n\r\n");
	go_tls(&b, B + 11 * U - 3000, 101, CP_TLS_GO_WRITE, 0xc000010000,
	       "HTTP/1.1 201 Created\r\n\r\n");
	kb_sock(&b, B + 11 * U - 1000, B + 11 * U, 100, 101, CP_SOCK_WRITE, 5, CL, 60, 8360, ciph);
	/* the client's close_notify, answered with the server's */
	kb_sock_bytes(&b, B + 12 * U, B + 12 * U + 1000, 100, 100, CP_SOCK_READ, 5, CL, 24, 1711,
		      (const uint8_t *)ciph, 5);
	kb_sock(&b, B + 13 * U - 1000, B + 13 * U, 100, 100, CP_SOCK_WRITE, 5, CL, 24, 8420, ciph);
	assert_int_equal(kb_run(&b), 0);
	x = kb_find_name(&b, "GET /x");
	y = kb_find_name(&b, "GET /y");
	z = kb_find_name(&b, "GET /z");
	assert_non_null(x);
	assert_non_null(y);
	assert_non_null(z);
	assert_int_equal(x->end, B + 6 * U);
	assert_int_equal(y->end, B + 7 * U);
	assert_int_equal(z->end, B + 11 * U);
	assert_string_equal(x->tag, "http.status=200");
	assert_string_equal(y->tag, "http.status=404");
	assert_string_equal(z->tag, "http.status=201");
	for (uint32_t i = 0; i < b.nreqs; i++) {
		assert_string_not_equal(b.reqs[i].name, "request");
		kb_check_tiling(&b.reqs[i]);
	}
	assert_int_equal(b.bio_wr_unsent, 0);
}

/*
 * A call to a downstream over TLS from a library on memory buffers (Go's
 * or Node's client): its request's plaintext waits on the thread, as no
 * read of the connection named it yet, and the socket write of its first
 * record takes it. The call is named by it, from the first call on, and
 * the later calls' writes wait on their connection.
 */
static void test_tls_downstream_call(void **state)
{
	static const struct kb_tuple DS = {"10.0.0.1", 41000, "10.0.0.7", 443};
	static const char *ciph = "\x17\x03\x03\x00\x45";
	static struct kb b;
	const struct kb_req *x;
	bool named = false;

	opened(&b);
	go_tls(&b, B + 3 * U + 3000, 100, CP_TLS_GO_READ, 0xc000010000,
	       "GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
	/* the call: its plaintext, then its record out; the reply */
	go_tls(&b, B + 4 * U, 100, CP_TLS_GO_WRITE, 0xc000090000,
	       "GET /api/thing HTTP/1.1\r\nHost: d\r\n\r\n");
	kb_sock_bytes(&b, B + 4 * U + 500, B + 4 * U + 1000, 100, 100, CP_SOCK_WRITE, 8, DS, 80, 1,
		      (const uint8_t *)ciph, 5);
	kb_switch(&b, B + 4 * U + 1000, 0, 100, 100, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_dready(&b, B + 9 * U, 0, 100, DS, 200);
	kb_wake(&b, B + 9 * U, 0, 100, 100, 0, 0, CP_CTX_SOFTIRQ, CP_SOFTIRQ_NET_RX);
	kb_switch(&b, B + 9 * U, 0, 0, 0, CP_PREV_PREEMPTED, 100, 100, "https");
	kb_sock_bytes(&b, B + 4 * U + 1100, B + 9 * U + 1000, 100, 100, CP_SOCK_READ, 8, DS, 100,
		      100, (const uint8_t *)ciph, 5);
	go_tls(&b, B + 9 * U + 2000, 100, CP_TLS_GO_READ, 0xc000090000, "HTTP/1.1 200 OK\r\n\r\n");
	go_tls(&b, B + 11 * U - 3000, 100, CP_TLS_GO_WRITE, 0xc000010000,
	       "HTTP/1.1 200 OK\r\n\r\n");
	kb_sock(&b, B + 11 * U - 1000, B + 11 * U, 100, 100, CP_SOCK_WRITE, 5, CL, 60, 8300, ciph);
	assert_int_equal(kb_run(&b), 0);
	x = kb_find_name(&b, "GET /x");
	assert_non_null(x);
	assert_string_equal(x->tag, "http.status=200");
	kb_check_tiling(x);
	for (uint32_t i = 0; i < x->nsegs; i++)
		named |= x->segs[i].cat == CP_CAT_NETWORK &&
			 strstr(x->segs[i].stack, "GET /api/thing") != NULL;
	assert_true(named);
	assert_int_equal(b.bio_wr_unsent, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tls_named_by_plaintext),
	    cmocka_unit_test(test_tls_without_plaintext),
	    cmocka_unit_test(test_tls_plaintext_elsewhere),
	    cmocka_unit_test(test_tls13_third_flight),
	    cmocka_unit_test(test_tls13_request_read_ahead),
	    cmocka_unit_test(test_tls_memory_buffers),
	    cmocka_unit_test(test_tls_go_library_connection),
	    cmocka_unit_test(test_tls_downstream_call),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
