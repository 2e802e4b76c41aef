// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * HTTP/2 requests (user/kpath/h2.c): a stream is a request, from the read
 * that brought its HEADERS to the write that carried its END_STREAM, while
 * other streams run on the same connection; frames followed across
 * transfers by their lengths, through what the payload prefix does not
 * show, and found again; HPACK names from a table seen from its start or
 * from mid-stream.
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

static const struct kb_tuple CL = {"10.0.0.1", 8080, "10.0.0.2", 5000};
static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

enum { DATA = 0, HEADERS = 1, RST = 3, SETTINGS = 4, PUSH = 5, CONT = 9 };

/* Appends a frame to p (at *n): its header and its payload. */
static void fr(uint8_t *p, size_t *n, uint8_t type, uint8_t flags, uint32_t sid, const void *pl,
	       uint32_t len)
{
	uint8_t *h = p + *n;

	h[0] = (uint8_t)(len >> 16);
	h[1] = (uint8_t)(len >> 8);
	h[2] = (uint8_t)len;
	h[3] = type;
	h[4] = flags;
	h[5] = (uint8_t)(sid >> 24);
	h[6] = (uint8_t)(sid >> 16);
	h[7] = (uint8_t)(sid >> 8);
	h[8] = (uint8_t)sid;
	if (len && pl)
		memcpy(h + 9, pl, len);
	*n += 9 + len;
}

/* A request's header block: :method GET (static 2), :path a literal with
 * incremental indexing (name: static 4), no Huffman. */
static uint32_t get_block(uint8_t *blk, const char *path)
{
	size_t l = strlen(path);

	blk[0] = 0x82;
	blk[1] = 0x44;
	blk[2] = (uint8_t)l;
	memcpy(blk + 3, path, l);
	return (uint32_t)(3 + l);
}

/* HEADERS of a GET on stream sid, whole (END_HEADERS, END_STREAM) */
static void get(uint8_t *p, size_t *n, uint32_t sid, const char *path)
{
	uint8_t blk[64];
	uint32_t l = get_block(blk, path);

	fr(p, n, HEADERS, 0x5, sid, blk, l);
}

/* the answer on stream sid: HEADERS (:status 200) and its DATA */
static void answer(uint8_t *p, size_t *n, uint32_t sid, bool end)
{
	static const uint8_t st200 = 0x88;

	fr(p, n, HEADERS, 0x4, sid, &st200, 1);
	fr(p, n, DATA, end ? 0x1 : 0, sid, "ok", 2);
}

/* the client's first bytes: preface, SETTINGS */
static void opening(uint8_t *p, size_t *n)
{
	memcpy(p, PREFACE, 24);
	*n = 24;
	fr(p, n, SETTINGS, 0, 0, NULL, 0);
}

/* Server thread 100 runs from B - 10 ms on; the client's bytes arrive. */
static void server_runs(struct kb *b)
{
	kb_proc(b, 100, "h2srv");
	kb_switch(b, B - 10 * U, 0, 0, 0, CP_PREV_PREEMPTED, 100, 100, "h2srv");
}

static void rd(struct kb *b, uint64_t at, uint32_t seq, const uint8_t *p, size_t n, int64_t bytes)
{
	kb_dready(b, at, 0, 100, CL, seq + (uint32_t)bytes);
	kb_sock_bytes(b, at + 1000, at + 2000, 100, 100, CP_SOCK_READ, 5, CL, bytes, seq, p, n);
}

static void wr(struct kb *b, uint64_t at, uint32_t seq, const uint8_t *p, size_t n, int64_t bytes)
{
	kb_sock_bytes(b, at - 1000, at, 100, 100, CP_SOCK_WRITE, 5, CL, bytes, seq, p, n);
}

/* Two streams overlap: /slow asked first and answered last, /fast asked
 * and answered while /slow was still open. */
static void test_overlap(void **state)
{
	struct kb *b = *state;
	uint8_t p[256];
	size_t n = 0, m = 0;
	const struct kb_req *slow, *fast;

	server_runs(b);
	opening(p, &n);
	get(p, &n, 1, "/slow");
	rd(b, B, 1000, p, n, (int64_t)n);
	m = 0;
	get(p, &m, 3, "/fast");
	rd(b, B + 2 * U, 1000 + (uint32_t)n, p, m, (int64_t)m);
	n = 0;
	answer(p, &n, 3, true);
	wr(b, B + 3 * U, 7000, p, n, (int64_t)n);
	m = 0;
	answer(p, &m, 1, true);
	wr(b, B + 6 * U, 7000 + (uint32_t)n, p, m, (int64_t)m);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 2);
	fast = kb_find_name(b, "GET /fast");
	slow = kb_find_name(b, "GET /slow");
	assert_non_null(fast);
	assert_non_null(slow);
	assert_int_equal(fast->start, B + 2 * U);
	assert_int_equal(fast->end, B + 3 * U);
	assert_int_equal(slow->start, B);
	assert_int_equal(slow->end, B + 6 * U);
	assert_string_equal(fast->tag, "http.status=200");
	assert_string_equal(slow->service, "h2srv:8080");
	kb_check_tiling(fast);
	kb_check_tiling(slow);
	assert_int_equal(b->h2_uncertain + b->h2_unnamed + b->h2_unanswered + b->h2_lost, 0);
}

/* A frame header cut by the end of a read: its rest begins the next. */
static void test_split_header(void **state)
{
	struct kb *b = *state;
	uint8_t p[256];
	size_t n = 0;

	server_runs(b);
	opening(p, &n);
	get(p, &n, 1, "/split");
	/* the first read ends 4 bytes into the HEADERS frame's header */
	rd(b, B, 1000, p, 24 + 9 + 4, 24 + 9 + 4);
	rd(b, B + U, 1000 + 37, p + 37, n - 37, (int64_t)(n - 37));
	n = 0;
	answer(p, &n, 1, true);
	wr(b, B + 2 * U, 7000, p, n, (int64_t)n);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 1);
	assert_string_equal(b->reqs[0].name, "GET /split");
	assert_int_equal(b->reqs[0].start, B);
	assert_int_equal(b->reqs[0].end, B + 2 * U);
}

/* The END_STREAM past the payload prefix: the stream ends at the first
 * write that can have carried it (uncertain), unless a later write shows
 * its frames, once a transfer begins with a frame again. */
static void test_past_prefix(void **state)
{
	struct kb *b = *state;
	uint8_t p[256], body[40] = {0};
	size_t n = 0, m = 0;
	static const uint8_t st200 = 0x88;

	server_runs(b);
	opening(p, &n);
	get(p, &n, 1, "/big");
	get(p, &n, 3, "/more");
	rd(b, B, 1000, p, n, (int64_t)n);
	/* HEADERS, then a DATA frame of 1000 bytes of which the prefix
	 * shows 40, then a frame not seen at all */
	fr(p, &m, HEADERS, 0x4, 1, &st200, 1);
	fr(p, &m, HEADERS, 0x4, 3, &st200, 1);
	fr(p, &m, DATA, 0, 1, body, 40);
	p[m - 40 - 9 + 2] = (uint8_t)(1000 & 0xff); /* its length says 1000 */
	p[m - 40 - 9 + 1] = (uint8_t)(1000 >> 8);
	wr(b, B + 2 * U, 7000, p, m, (int64_t)(m - 40 + 1000 + 9 + 2));
	/* stream 3's end, in a write that begins with a frame */
	n = 0;
	fr(p, &n, DATA, 0x1, 3, "ok", 2);
	wr(b, B + 5 * U, 9000, p, n, (int64_t)n);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 2);
	assert_int_equal(kb_find_name(b, "GET /big")->end, B + 2 * U);
	assert_int_equal(kb_find_name(b, "GET /more")->end, B + 5 * U);
	assert_int_equal(b->h2_uncertain, 1);
}

/* A connection seen mid-stream: an index into the table made before the
 * recording names nothing; one the recording saw made names. */
static void test_mid_stream(void **state)
{
	struct kb *b = *state;
	uint8_t p[256], blk[64];
	size_t n = 0;
	static const uint8_t old[] = {0x82, 0xbe}; /* GET, :path from entry 62 */
	uint32_t l;

	server_runs(b);
	fr(p, &n, HEADERS, 0x5, 7, old, sizeof(old));
	rd(b, B, 1000, p, n, (int64_t)n);
	n = 0;
	answer(p, &n, 7, true);
	wr(b, B + U, 7000, p, n, (int64_t)n);
	n = 0;
	l = get_block(blk, "/a");
	fr(p, &n, HEADERS, 0x5, 9, blk, l);
	fr(p, &n, HEADERS, 0x5, 11, old, sizeof(old)); /* entry 62 is "/a" now */
	rd(b, B + 2 * U, 2000, p, n, (int64_t)n);
	n = 0;
	answer(p, &n, 9, true);
	answer(p, &n, 11, true);
	wr(b, B + 3 * U, 8000, p, n, (int64_t)n);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 3);
	assert_string_equal(b->reqs[0].name, "request");
	assert_string_equal(b->reqs[1].name, "GET /a");
	assert_string_equal(b->reqs[2].name, "GET /a");
	assert_int_equal(b->h2_unnamed, 1);
}

/* A block in a padded, prioritised HEADERS and a CONTINUATION; a stream
 * the client resets before any answer is no request. */
static void test_continuation_and_reset(void **state)
{
	struct kb *b = *state;
	uint8_t p[256], pl[32];
	size_t n = 0;
	static const uint8_t rst[4] = {0, 0, 0, 8}; /* CANCEL */
	static const uint8_t rest[] = {0x44, 2, '/', 'c'};

	server_runs(b);
	opening(p, &n);
	/* pad length 2, priority (5 bytes), the fragment GET, padding */
	pl[0] = 2;
	memset(pl + 1, 0, 5);
	pl[6] = 0x82;
	pl[7] = pl[8] = 0;
	fr(p, &n, HEADERS, 0x1 | 0x8 | 0x20, 1, pl, 9);
	fr(p, &n, CONT, 0x4, 1, rest, sizeof(rest));
	get(p, &n, 3, "/gone");
	fr(p, &n, RST, 0, 3, rst, 4);
	rd(b, B, 1000, p, n, (int64_t)n);
	n = 0;
	answer(p, &n, 1, true);
	wr(b, B + U, 7000, p, n, (int64_t)n);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 1);
	assert_string_equal(b->reqs[0].name, "GET /c");
	assert_int_equal(b->h2_unanswered, 1);
}

/* A transfer with no prefix (recorded with --payload-bytes 0): frames are
 * lost until one begins a transfer, and requests asked for there are not
 * seen; the server's SETTINGS first makes it HTTP/2 all the same. */
static void test_no_prefix(void **state)
{
	struct kb *b = *state;
	uint8_t p[256];
	size_t n = 0;

	server_runs(b);
	kb_md_socket(b, B - 20 * U, 100, 4, 8080, 0, true); /* its listener */
	fr(p, &n, SETTINGS, 0, 0, NULL, 0);
	wr(b, B - U, 6000, p, n, (int64_t)n);
	n = 0;
	opening(p, &n);
	get(p, &n, 1, "/x");
	rd(b, B, 1000, NULL, 0, (int64_t)n);
	n = 0;
	get(p, &n, 3, "/y");
	rd(b, B + U, 2000, p, n, (int64_t)n);
	n = 0;
	answer(p, &n, 1, true);
	answer(p, &n, 3, true);
	wr(b, B + 2 * U, 7000, p, n, (int64_t)n);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 1);
	assert_string_equal(b->reqs[0].name, "GET /y");
}

/* A downstream gRPC call from an HTTP/1.x request's thread to a peer not
 * traced: the blind spot is named by the call's :method and :path. */
static void test_downstream_call(void **state)
{
	struct kb *b = *state;
	const struct kb_tuple up = {"10.0.0.1", 80, "10.0.0.2", 5000};
	const struct kb_tuple dn = {"10.0.0.1", 41000, "10.0.0.7", 50051};
	static const char req[] = "GET /cart HTTP/1.1\r\n\r\n";
	uint8_t p[256], blk[64];
	size_t n = 0;
	uint32_t l = get_block(blk, "/inv.Stock/Get");

	kb_proc(b, 100, "front");
	kb_switch(b, B - 50 * U, 0, 100, 100, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_dready(b, B, 0, 100, up, 1000 + (uint32_t)strlen(req));
	kb_wake(b, B, 0, 100, 100, 0, 0, CP_CTX_SOFTIRQ, CP_SOFTIRQ_NET_RX);
	kb_switch(b, B, 0, 0, 0, CP_PREV_PREEMPTED, 100, 100, "front");
	kb_sock(b, B + 100, B + 1000, 100, 100, CP_SOCK_READ, 5, up, (int64_t)strlen(req), 1000,
		req);
	kb_sock(b, B + U, B + U + 500, 100, 100, CP_SOCK_CONNECT, 8, dn, 0, 0, NULL);
	opening(p, &n);
	blk[0] = 0x83; /* POST */
	fr(p, &n, HEADERS, 0x4, 1, blk, l);
	kb_sock_bytes(b, B + 2 * U - 1000, B + 2 * U, 100, 100, CP_SOCK_WRITE, 8, dn, (int64_t)n, 1,
		      p, n);
	kb_switch(b, B + 2 * U, 0, 100, 100, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_dready(b, B + 30 * U, 0, 100, dn, 100);
	kb_wake(b, B + 30 * U, 0, 100, 100, 0, 0, CP_CTX_SOFTIRQ, CP_SOFTIRQ_NET_RX);
	kb_switch(b, B + 30 * U, 0, 0, 0, CP_PREV_PREEMPTED, 100, 100, "front");
	n = 0;
	answer(p, &n, 1, true);
	kb_sock_bytes(b, B + 30 * U + 100, B + 30 * U + 1000, 100, 100, CP_SOCK_READ, 8, dn,
		      (int64_t)n, 50, p, n);
	kb_sock(b, B + 32 * U - 1000, B + 32 * U, 100, 100, CP_SOCK_WRITE, 5, up, 40, 9000,
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 1);
	assert_string_equal(b->reqs[0].name, "GET /cart");
	for (uint32_t i = 0; i < b->reqs[0].nsegs; i++) {
		const struct kb_seg *g = &b->reqs[0].segs[i];

		if (g->cat != CP_CAT_NETWORK || g->start < B + U)
			continue;
		assert_int_equal(g->end - g->start, 28 * U);
		assert_string_equal(g->frame3, "10.0.0.7:50051 POST /inv.Stock/Get");
		return;
	}
	fail_msg("no network segment for the call");
}

/* A client that opens stream after stream and gets no answer: at most
 * H2_STREAMS_MAX (1024) are kept open, the oldest going unanswered. */
static void test_many_streams(void **state)
{
	struct kb *b = *state;
	uint8_t p[512];
	size_t n = 0;
	uint32_t sid = 1, seq = 1000;

	server_runs(b);
	opening(p, &n);
	for (int r = 0; r < 40; r++) {
		while (n + 12 <= 500)
			get(p, &n, (sid += 2) - 2, "/s");
		rd(b, B + (uint64_t)r * 10000, seq, p, n, (int64_t)n);
		seq += (uint32_t)n;
		n = 0;
	}
	answer(p, &n, sid - 2, true);
	wr(b, B + U, 7000, p, n, (int64_t)n);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 1);
	assert_int_equal(b->h2_unanswered, (sid - 1) / 2 - 1);
}

/* SSL_read returned n bytes of plaintext, p[0..n), at `at` + 3 µs, with no
 * socket read inside (what the library had read before) */
static void tls_plain(struct kb *b, uint64_t at, uint32_t seq, const uint8_t *p, size_t n)
{
	struct cp_ev_tls_read *e;

	e = (void *)kb_new(b, CP_EV_TLS_READ,
			   (uint16_t)CP_ALIGN(offsetof(struct cp_ev_tls_read, payload) + n),
			   at + 3000, 0, 100, 100);
	e->enter_ts = at + 500;
	e->bytes = (int64_t)n;
	e->fd = 5;
	e->call = CP_TLS_SSL_READ;
	KB_TUPLE(e, CL);
	e->tcp_seq = seq;
	e->payload_len = (uint16_t)n;
	memcpy(e->payload, p, n);
}

/* SSL_read returned n bytes of plaintext, p[0..n), its ciphertext read
 * inside it */
static void tls_rd(struct kb *b, uint64_t at, uint32_t seq, const uint8_t *p, size_t n)
{
	kb_dready(b, at, 0, 100, CL, seq + (uint32_t)n + 22);
	kb_sock(b, at + 1000, at + 2000, 100, 100, CP_SOCK_READ, 5, CL, (int64_t)n + 22, seq, NULL);
	kb_last_tls(b);
	tls_plain(b, at, seq, p, n);
}

/* The server runs (server_runs) on a TLS connection seen from its start:
 * its first write, SETTINGS, made inside the library. */
static void tls_server_runs(struct kb *b)
{
	uint8_t p[16];
	size_t n = 0;

	server_runs(b);
	kb_md_socket(b, B - 20 * U, 100, 4, 8080, 0, true);
	fr(p, &n, SETTINGS, 0, 0, NULL, 0);
	wr(b, B - U, 6000, p, n, 31);
	kb_last_tls(b);
}

/* HTTP/2 over TLS: the frames are the library's plaintext; a write's
 * socket writes after its first carry none; a plaintext cut by the prefix
 * (CP_SOCK_F_CUT) ends its streams at it, uncertain. */
static void test_tls(void **state)
{
	struct kb *b = *state;
	uint8_t p[256];
	size_t n = 0;

	tls_server_runs(b);
	opening(p, &n);
	get(p, &n, 1, "/t1");
	get(p, &n, 3, "/t2");
	tls_rd(b, B, 1000, p, n);
	n = 0;
	answer(p, &n, 1, true);
	answer(p, &n, 3, true);
	wr(b, B + U, 7000, p, n, (int64_t)n + 22);
	kb_last_tls(b);
	n = 0;
	get(p, &n, 5, "/t3");
	tls_rd(b, B + 2 * U, 2000, p, n);
	n = 0;
	answer(p, &n, 5, false);
	wr(b, B + 3 * U, 8000, p, n, 16384);
	kb_last_tls(b);
	b->recs[b->n - 1].u.sk.flags |= CP_SOCK_F_CUT;
	wr(b, B + 3 * U + 5000, 8000 + 16384, NULL, 0, 16384); /* the same SSL_write's */
	kb_last_tls(b);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 3);
	assert_int_equal(kb_find_name(b, "GET /t1")->end, B + U);
	assert_int_equal(kb_find_name(b, "GET /t2")->end, B + U);
	assert_int_equal(kb_find_name(b, "GET /t2")->start, B);
	assert_int_equal(kb_find_name(b, "GET /t3")->end, B + 3 * U);
	assert_int_equal(b->h2_uncertain, 1);
	assert_int_equal(b->h2_lost + b->h2_unnamed + b->h2_unanswered, 0);
}

/* The client's last TLS flight and its preface and first HEADERS come in
 * one read, the library answers the flight (session tickets), then returns
 * the plaintext it read ahead, with no socket read inside: the exchange is
 * a request of its own, the streams after it. */
static void test_tls_exchange_before_preface(void **state)
{
	static const uint8_t last[] = {0x14, 3, 3, 0, 1, 1, 0x17, 3, 3, 0, 0x45};
	static const uint8_t ticket[] = {0x17, 3, 3, 0, 0xfa};
	struct kb *b = *state;
	uint8_t p[256];
	size_t n = 0;

	server_runs(b);
	kb_md_socket(b, B - 20 * U, 100, 4, 8080, 0, true);
	rd(b, B - 5 * U, 900, last, sizeof(last), 100 + 60);
	wr(b, B - 4 * U, 5000, ticket, sizeof(ticket), 255);
	opening(p, &n);
	get(p, &n, 1, "/t1");
	tls_plain(b, B, 1000, p, n);
	n = 0;
	answer(p, &n, 1, true);
	wr(b, B + U, 7000, p, n, (int64_t)n + 22);
	kb_last_tls(b);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 2);
	assert_int_equal(b->reqs[0].start, B - 5 * U); /* the bytes arrived */
	assert_int_equal(b->reqs[0].end, B - 4 * U);
	assert_int_equal(kb_find_name(b, "GET /t1")->end, B + U);
	assert_int_equal(b->h2_lost + b->h2_unnamed + b->h2_unanswered, 0);
}

/* A read and a write past their prefixes, as the recorder keeps them: the
 * frame headers and header blocks as pieces, the DATA payloads as gaps. A
 * 3000-byte body before the next stream's HEADERS hides nothing. */
static void test_pieces(void **state)
{
	struct kb *b = *state;
	uint8_t p[4096], body[3000] = {0}, blk[64];
	static const uint8_t st200 = 0x88;
	size_t n = 0, h3;
	uint32_t l;

	server_runs(b);
	opening(p, &n);
	l = get_block(blk, "/up");
	fr(p, &n, HEADERS, 0x4, 1, blk, l);
	fr(p, &n, DATA, 0x1, 1, body, sizeof(body));
	h3 = n;
	get(p, &n, 3, "/after");
	rd(b, B, 1000, p, 100, (int64_t)n);
	kb_piece(b, h3, p + h3, n - h3);
	/* the answers: stream 1's HEADERS and 3000 bytes, then stream 3's */
	n = 0;
	fr(p, &n, HEADERS, 0x4, 1, &st200, 1);
	fr(p, &n, DATA, 0x1, 1, body, sizeof(body));
	h3 = n;
	answer(p, &n, 3, true);
	wr(b, B + 2 * U, 7000, p, 100, (int64_t)n);
	kb_piece(b, h3, p + h3, 10 + 9); /* HEADERS, and DATA's header */
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 2);
	assert_non_null(kb_find_name(b, "GET /up"));
	assert_int_equal(kb_find_name(b, "GET /after")->start, B);
	assert_int_equal(kb_find_name(b, "GET /after")->end, B + 2 * U);
	assert_string_equal(kb_find_name(b, "GET /after")->tag, "http.status=200");
	assert_int_equal(b->h2_uncertain + b->h2_unnamed + b->h2_unanswered + b->h2_lost, 0);
}

/* Over TLS: a read's plaintext with pieces, and a write's cut plaintext
 * whose pieces end with its length: every end is known. */
static void test_tls_pieces(void **state)
{
	struct kb *b = *state;
	uint8_t p[4096], body[2000] = {0};
	size_t n = 0, h3;

	tls_server_runs(b);
	opening(p, &n);
	get(p, &n, 1, "/a");
	fr(p, &n, DATA, 0x1, 1, body, sizeof(body));
	h3 = n;
	get(p, &n, 3, "/b");
	tls_rd(b, B, 1000, p, 200);
	b->recs[b->n - 1].u.tr.bytes = (int64_t)n;
	kb_piece(b, h3, p + h3, n - h3);
	n = 0;
	answer(p, &n, 1, false);
	fr(p, &n, DATA, 0x1, 1, body, sizeof(body));
	h3 = n;
	answer(p, &n, 3, true);
	wr(b, B + U, 7000, p, 100, 16384);
	kb_last_tls(b);
	b->recs[b->n - 1].u.sk.flags |= CP_SOCK_F_CUT;
	kb_piece(b, h3, p + h3, 10 + 9);
	kb_piece(b, n, NULL, 0); /* the plaintext's length */
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 2);
	assert_int_equal(kb_find_name(b, "GET /a")->end, B + U);
	assert_int_equal(kb_find_name(b, "GET /b")->end, B + U);
	assert_int_equal(b->h2_uncertain + b->h2_unnamed + b->h2_unanswered + b->h2_lost, 0);
}

/* Server push: a PUSH_PROMISE's header block (the pushed request's) goes
 * into the server's HPACK table like a response's, so a later response
 * that refers to an entry made before it finds it; the pushed stream's
 * answer is no request. */
static void test_push_promise(void **state)
{
	/* :status 201, a literal with incremental indexing (dynamic 62) */
	static const uint8_t st201[] = {0x48, 3, '2', '0', '1'};
	/* promised stream 2; :path /p.css indexed (dynamic 62 now, :status 201
	 * at 63), padded by 2 */
	static const uint8_t promise[] = {2,   0,   0,	 0,   2,   0x44, 6, '/',
					  'p', '.', 'c', 's', 's', 0,	 0};
	static const uint8_t ref63 = 0x80 | 63, st200 = 0x88;
	struct kb *b = *state;
	uint8_t p[256];
	size_t n = 0, m = 0;

	server_runs(b);
	opening(p, &n);
	get(p, &n, 1, "/page");
	rd(b, B, 1000, p, n, (int64_t)n);
	n = 0;
	fr(p, &n, HEADERS, 0x4, 1, st201, sizeof(st201));
	fr(p, &n, PUSH, 0x4 | 0x8, 1, promise, sizeof(promise));
	fr(p, &n, DATA, 0x1, 1, "ok", 2);
	fr(p, &n, HEADERS, 0x4, 2, &st200, 1);
	fr(p, &n, DATA, 0x1, 2, "css", 3);
	wr(b, B + U, 7000, p, n, (int64_t)n);
	get(p, &m, 3, "/next");
	rd(b, B + 2 * U, 1000 + 100, p, m, (int64_t)m);
	n = 0;
	fr(p, &n, HEADERS, 0x4, 3, &ref63, 1);
	fr(p, &n, DATA, 0x1, 3, "ok", 2);
	wr(b, B + 3 * U, 8000, p, n, (int64_t)n);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 2);
	assert_string_equal(kb_find_name(b, "GET /page")->tag, "http.status=201");
	assert_int_equal(kb_find_name(b, "GET /page")->end, B + U);
	assert_string_equal(kb_find_name(b, "GET /next")->tag, "http.status=201");
	assert_int_equal(b->h2_uncertain + b->h2_unnamed + b->h2_unanswered + b->h2_lost, 0);
}

/* A library on memory buffers (Node.js): the thread reads the ciphertext
 * itself, SSL_read and SSL_write move plaintext without a connection (fd
 * -1), each write's for the thread's next socket write. */
static void bio_tls(struct kb *b, uint64_t at, uint8_t call, const uint8_t *p, size_t n)
{
	struct cp_ev_tls_read *e = (void *)kb_new(
	    b, CP_EV_TLS_READ, (uint16_t)CP_ALIGN(offsetof(struct cp_ev_tls_read, payload) + n), at,
	    0, 100, 100);

	e->enter_ts = at - 500;
	e->bytes = (int64_t)n;
	e->fd = -1;
	e->call = call;
	e->payload_len = (uint16_t)n;
	memcpy(e->payload, p, n);
}

/* The exchange of test_memory_buffers: two streams asked for in one read;
 * the first answered whole by the socket write at B + 1 ms, the second's
 * HEADERS there and its last DATA in one of two TLS writes that the
 * socket write at B + 3 ms carries; at B + 4 ms a socket write of the
 * library's own (a session ticket). writes: whether the TLS writes' records
 * are there (an older recorder kept none). */
static void build_memory_buffers(struct kb *b, bool writes)
{
	static const uint8_t ciph[] = "\x17\x03\x03\x00\x45";
	static const uint8_t st200 = 0x88;
	uint8_t p[256];
	size_t n = 0;

	server_runs(b);
	opening(p, &n);
	get(p, &n, 1, "/m1");
	get(p, &n, 3, "/m2");
	rd(b, B, 1000, ciph, 5, (int64_t)n + 22);
	bio_tls(b, B + 3000, CP_TLS_SSL_READ, p, n);
	n = 0;
	fr(p, &n, SETTINGS, 0, 0, NULL, 0);
	answer(p, &n, 1, true);
	fr(p, &n, HEADERS, 0x4, 3, &st200, 1);
	if (writes)
		bio_tls(b, B + U - 3000, CP_TLS_SSL_WRITE, p, n);
	wr(b, B + U, 7000, ciph, 5, (int64_t)n + 22);
	n = 0;
	fr(p, &n, DATA, 0, 3, "ab", 2);
	if (writes)
		bio_tls(b, B + 3 * U - 3000, CP_TLS_SSL_WRITE, p, n);
	n = 0;
	fr(p, &n, DATA, 0x1, 3, "cd", 2);
	if (writes)
		bio_tls(b, B + 3 * U - 2000, CP_TLS_SSL_WRITE, p, n);
	wr(b, B + 3 * U, 8000, ciph, 5, 2 * (11 + 22));
	wr(b, B + 4 * U, 9000, ciph, 5, 200);
}

/* On memory buffers the streams end at the socket writes that carried
 * their END_STREAM, from the plaintext of the TLS writes before them;
 * without those records (an older recorder), each ends, uncertain, at the
 * first write after it. */
static void test_memory_buffers(void **state)
{
	struct kb *b = *state;

	build_memory_buffers(b, true);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 2);
	assert_int_equal(kb_find_name(b, "GET /m1")->start, B);
	assert_int_equal(kb_find_name(b, "GET /m1")->end, B + U);
	assert_int_equal(kb_find_name(b, "GET /m2")->end, B + 3 * U);
	assert_string_equal(kb_find_name(b, "GET /m2")->tag, "http.status=200");
	kb_check_tiling(kb_find_name(b, "GET /m2"));
	assert_int_equal(b->h2_uncertain + b->h2_unnamed + b->h2_unanswered + b->h2_lost, 0);
	assert_int_equal(b->bio_wr_unsent, 0);

	memset(b, 0, sizeof(*b));
	build_memory_buffers(b, false);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 2);
	assert_int_equal(kb_find_name(b, "GET /m1")->end, B + U);
	assert_int_equal(kb_find_name(b, "GET /m2")->end, B + U);
	assert_int_equal(b->h2_uncertain, 2);
}

/* A TLS write on memory buffers no socket write of its thread carries
 * within 100 ms is counted, not used: the next socket write is another's. */
static void test_memory_buffers_unsent(void **state)
{
	struct kb *b = *state;
	uint8_t p[64];
	size_t n = 0;

	build_memory_buffers(b, true);
	fr(p, &n, DATA, 0x1, 99, "zz", 2);
	bio_tls(b, B + 5 * U, CP_TLS_SSL_WRITE, p, n);
	n = 0;
	fr(p, &n, SETTINGS, 0x1, 0, NULL, 0);
	bio_tls(b, B + 200 * U, CP_TLS_SSL_WRITE, p, n);
	wr(b, B + 200 * U + 1000, 9500, (const uint8_t *)"\x17\x03\x03\x00\x45", 5, 40);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->nreqs, 2);
	assert_int_equal(b->bio_wr_unsent, 1);
	assert_int_equal(b->h2_uncertain + b->h2_lost, 0);
}

/* The same when the thread's next socket write comes only later: the
 * waiting write's frames are not that write's, whichever it is. */
static void test_memory_buffers_stale(void **state)
{
	static const uint8_t ciph[] = "\x17\x03\x03\x00\x45";
	struct kb *b = *state;
	uint8_t p[64];
	size_t n = 0;

	build_memory_buffers(b, true);
	get(p, &n, 5, "/m3");
	rd(b, B + 5 * U, 2000, ciph, 5, (int64_t)n + 22);
	bio_tls(b, B + 5 * U + 3000, CP_TLS_SSL_READ, p, n);
	n = 0;
	answer(p, &n, 5, true);
	bio_tls(b, B + 6 * U, CP_TLS_SSL_WRITE, p, n);
	wr(b, B + 300 * U, 9500, ciph, 5, 40);
	assert_int_equal(kb_run(b), 0);
	assert_int_equal(b->bio_wr_unsent, 1);
	assert_null(kb_find_name(b, "GET /m3"));
	assert_int_equal(b->h2_unanswered, 1);
}

/* Random frames, lengths and cuts on an HTTP/2 connection, reads and
 * writes, with payload prefixes that stop anywhere: every request still
 * tiles, and nothing reads past what it was given (run under ASan too). */
static void test_random(void **state)
{
	struct kb *b = *state;
	uint32_t seed = 7, seq_in = 1000, seq_out = 7000;
	uint64_t t = B;

	for (int round = 0; round < 40; round++) {
		uint8_t p[600];
		size_t n = 0, full;

		memset(b, 0, sizeof(*b));
		server_runs(b);
		opening(p, &n);
		rd(b, t, seq_in, p, n, (int64_t)n);
		seq_in += (uint32_t)n;
		for (int k = 0; k < 60 && b->n + 4 < KB_MAX_RECS; k++) {
			uint32_t nf = (seed = seed * 1103515245 + 12345) >> 16 & 3;
			bool read = seed >> 8 & 1;
			int64_t bytes;

			n = 0;
			for (uint32_t f = 0; f <= nf && n < 400; f++) {
				uint8_t pl[64];
				uint32_t len = (seed = seed * 1103515245 + 12345) >> 16 & 63;

				for (uint32_t i = 0; i < len; i++)
					pl[i] = (uint8_t)((seed = seed * 1103515245 + 12345) >> 16);
				if (seed & 1)
					len = get_block(pl, "/r");
				fr(p, &n, (uint8_t)(seed >> 20 & 0xf), (uint8_t)(seed >> 12),
				   1 + 2 * (seed >> 24 & 3), pl, len);
			}
			/* the prefix ends anywhere; the transfer may say more,
			 * and pieces of what is past the prefix may be kept */
			bytes = (int64_t)n + ((seed >> 4 & 7) == 0 ? (seed >> 9 & 255) : 0);
			full = n;
			n = (seed >> 7 & 3) == 0 ? n / 2 : n;
			t += U;
			if (read) {
				rd(b, t, seq_in, p, n, bytes);
				seq_in += (uint32_t)bytes;
			} else {
				wr(b, t, seq_out, p, n, bytes);
				seq_out += (uint32_t)bytes;
			}
			for (size_t at = n; at < full && (seed >> 3 & 1);) {
				size_t len =
				    1 + ((seed = seed * 1103515245 + 12345) >> 16) % (full - at);

				at += ((seed >> 8) & 1) * (len / 2);
				if (at >= full)
					break;
				len = len < full - at ? len : full - at;
				kb_piece(b, at, p + at, len);
				at += len + (seed >> 11 & 7);
			}
		}
		assert_int_equal(kb_run(b), 0);
		for (uint32_t i = 0; i < b->nreqs; i++)
			kb_check_tiling(&b->reqs[i]);
	}
}

static int setup(void **state)
{
	*state = calloc(1, sizeof(struct kb));
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_overlap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_split_header, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_past_prefix, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mid_stream, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_continuation_and_reset, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_prefix, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_downstream_call, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_many_streams, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tls, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tls_exchange_before_preface, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pieces, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tls_pieces, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_push_promise, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_memory_buffers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_memory_buffers_unsent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_memory_buffers_stale, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_random, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
