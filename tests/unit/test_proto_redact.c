// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * What the recorder does not keep of HTTP/2 (user/proto/redact.c and
 * hpack__redact): header values other than the naming ones are gone, in
 * whole blocks and in blocks cut anywhere; the report's decoder still
 * reads the same names and keeps the same dynamic table from what is left;
 * DATA past the prefix is zeroed; bytes whose frames are not known are
 * blanked; a connection that is not HTTP/2 passes untouched.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto_hpack.h"
#include "proto_redact.h"
#include "recording.h"

#define BLOCK(s) (const uint8_t *)(s), sizeof(s) - 1

/*
 * python3-hpack's Encoder (Huffman on): a request with an authorization,
 * a cookie and a traceparent, then one naming the first two by their
 * dynamic table entries and adding x-new: another-secret-value.
 */
static const char req1[] =
    "\x82\x87\x44\x8b\x60\x75\x99\x83\x24\xb4\xa3\xfc\x34\x90\x3b\x41\x88\x2f\x91\xd3\x5d\x05"
    "\x5c\x87\xa7\x57\x9b\xba\x51\xd8\x5b\x14\x43\x24\xb1\x94\xad\xbc\x19\xb0\x69\x58\x71\x92"
    "\x42\xcb\x34\xe6\xe9\xd6\x8a\x6a\x3d\x7f\x60\x93\x41\x50\x83\x1e\xa8\x12\x7a\xd0\x52\x58"
    "\x54\x90\xe7\xea\x62\xf7\x1d\x16\x97\x40\x88\x4d\x83\x21\x6b\x1d\x85\xa9\x3f\xa7\x00\x16"
    "\x00\xe5\x75\xc6\xc2\xf8\x5c\x24\x8d\x33\x24\x8f\x34\xd3\xc5\x8c\x41\x09\x1e\x03\x21\x7c"
    "\x8b\x46\xe8\xe4\x72\x37\x42\xe3\xe2\x03\x2c\xb2\x15\x80\x1f";
static const char req2[] = "\x82\x87\x44\x8b\x60\x75\x99\x83\x24\xb4\xa3\xfc\x34\x90\x3d\xc2\xc1"
			   "\xc0\x40\x84\xf2\xb5\x45\xf1\x8e\x1d\x47\x4c\xe5\xb1\x64\x14\x96\x15"
			   "\x2b\x77\x1d\x16\x97";
/* Huffman codes of "Bearer s3cr3t-T0KEN-abcdefghijklmnop", of
 * "session=topsecretcookievalue" and of the traceparent's value */
static const char auth_huff[] = "\xba\x51\xd8\x5b\x14\x43\x24\xb1\x94\xad\xbc\x19\xb0\x69\x58"
				"\x71\x92\x42\xcb\x34\xe6\xe9\xd6\x8a\x6a\x3d\x7f";
static const char cookie_huff[] = "\x41\x50\x83\x1e\xa8\x12\x7a\xd0\x52\x58\x54\x90\xe7\xea"
				  "\x62\xf7\x1d\x16\x97";
static const char trace_huff[] = "\x00\x16\x00\xe5\x75\xc6\xc2\xf8\x5c\x24\x8d\x33\x24\x8f\x34"
				 "\xd3\xc5\x8c\x41\x09\x1e\x03\x21\x7c\x8b\x46\xe8\xe4\x72\x37"
				 "\x42\xe3\xe2\x03\x2c\xb2\x15\x80\x1f";

static bool has(const uint8_t *p, size_t n, const char *s, size_t k)
{
	return memmem(p, n, s, k) != NULL;
}

/* Any n bytes can hold m filler symbols when m symbols of some code fit
 * them (5 to 30 bits each, under 8 of padding): the report decodes m. */
static void test_fill(void **state)
{
	uint8_t p[300];
	char out[1];

	(void)state;
	for (uint32_t n = 0; n < sizeof(p); n++) {
		for (uint32_t m = 0; m <= n * 8 / 5 + 1; m++) {
			bool fits = m * 5 <= n * 8 && m * 30 + 7 >= n * 8;

			assert_int_equal(hpack__huffman_fill(p, n, m), fits ? 0 : -EINVAL);
			if (fits)
				assert_int_equal(hpack__huffman(p, n, out, 0), (int)m);
		}
	}
}

/* The blocks through hpack__redact, each whole (step 0) or step bytes at a
 * time; then both decoded: the same fields, the same table. */
static void redact_blocks(size_t step, uint8_t *r1, uint8_t *r2)
{
	struct hp_redact r;
	struct hpack a, b;
	struct hp_fields fa, fb;

	memcpy(r1, req1, sizeof(req1) - 1);
	memcpy(r2, req2, sizeof(req2) - 1);
	hpack__redact_init(&r, true);
	for (int k = 0; k < 2; k++) {
		uint8_t *p = k ? r2 : r1;
		size_t n = k ? sizeof(req2) - 1 : sizeof(req1) - 1;

		for (size_t i = 0; i < n; i += step ? step : n)
			hpack__redact(&r, p + i, step && step < n - i ? step : n - i);
		hpack__redact_end(&r);
	}
	assert_int_equal(r.redacted, 3); /* authorization, cookie, x-new */
	hpack__init(&a, true);
	hpack__init(&b, true);
	for (int k = 0; k < 2; k++) {
		const uint8_t *orig = (const uint8_t *)(k ? req2 : req1);
		size_t n = k ? sizeof(req2) - 1 : sizeof(req1) - 1;

		assert_int_equal(hpack__decode(&a, orig, n, false, &fa), 0);
		assert_int_equal(hpack__decode(&b, k ? r2 : r1, n, false, &fb), 0);
		assert_memory_equal(&fa, &fb, sizeof(fa));
		assert_int_equal(a.n, b.n);
		assert_int_equal(a.size, b.size);
		assert_false(b.partial);
	}
	assert_string_equal(fb.path, "/api/items?id=8");
	assert_string_equal(fb.authority, "example.com");
	assert_int_equal(a.size, r.t.size);
	assert_int_equal(a.n, r.t.n);
	hpack__free(&a);
	hpack__free(&b);
	hpack__redact_free(&r);
}

static void test_block(void **state)
{
	uint8_t r1[sizeof(req1)], r2[sizeof(req2)];
	size_t n1 = sizeof(req1) - 1, n2 = sizeof(req2) - 1;

	(void)state;
	for (size_t step = 0; step < 12; step++) {
		redact_blocks(step, r1, r2);
		assert_false(has(r1, n1, auth_huff, 6));
		assert_false(has(r1, n1, cookie_huff, 6));
		/* kept: the path, the authority and the trace context */
		assert_true(has(r1, n1, trace_huff, sizeof(trace_huff) - 1));
		assert_true(has(r1, n1, "\x60\x75\x99\x83\x24\xb4\xa3\xfc\x34\x90\x3b", 11));
		/* all but x-new's value ("another-secret-value", its last
		 * 14 bytes) as it was */
		assert_memory_equal(r2, req2, 25);
		assert_false(has(r2, n2, req2 + 25, 4));
	}
}

/* A block whose bytes were not all seen: the rest is blanked, the table
 * is known only from the next block on, and the report reads no more. */
static void test_gap(void **state)
{
	struct hp_redact r;
	uint8_t p[sizeof(req1)];
	size_t n = sizeof(req1) - 1;

	(void)state;
	for (size_t cut = 0; cut < n; cut++) {
		memcpy(p, req1, n);
		hpack__redact_init(&r, true);
		hpack__redact(&r, p, cut);
		hpack__redact_gap(&r);
		hpack__redact(&r, p + cut + 1, n - cut - 1); /* a later piece of it */
		hpack__redact_end(&r);
		assert_true(r.t.partial);
		assert_int_equal(r.t.n, 0);
		assert_false(has(p, n, auth_huff, 6));
		assert_false(has(p, n, cookie_huff, 6));
		hpack__redact_free(&r);
	}
}

/* A name from a table entry not known (a connection seen mid-stream):
 * its value is not kept, whatever the name. */
static void test_unknown_name(void **state)
{
	struct hp_redact r;
	/* literal without indexing, name index 62, raw value "secret" */
	uint8_t p[] = "\x0f\x2f\x06secret";

	(void)state;
	hpack__redact_init(&r, false);
	hpack__redact(&r, p, sizeof(p) - 1);
	hpack__redact_end(&r);
	assert_false(has(p, sizeof(p) - 1, "secret", 6));
	assert_memory_equal(p, "\x0f\x2f\x06******", 9);
	hpack__redact_free(&r);
}

/* --- whole records ------------------------------------------------------ */

static size_t frame(uint8_t *p, uint8_t type, uint8_t flags, uint32_t sid, const void *b,
		    size_t n)
{
	p[0] = (uint8_t)(n >> 16);
	p[1] = (uint8_t)(n >> 8);
	p[2] = (uint8_t)n;
	p[3] = type;
	p[4] = flags;
	p[5] = (uint8_t)(sid >> 24);
	p[6] = (uint8_t)(sid >> 16);
	p[7] = (uint8_t)(sid >> 8);
	p[8] = (uint8_t)sid;
	memcpy(p + 9, b, n);
	return 9 + n;
}

/* A socket record of a write (or read) of p[0..n) on a fixed connection,
 * all of it in the prefix. */
static struct cp_ev_sock *sock_rec(const uint8_t *p, size_t n, bool read, uint16_t lport)
{
	struct cp_ev_sock *e = calloc(1, sizeof(*e));

	assert_true(n <= CP_PAYLOAD_MAX);
	e->h.type = CP_EV_SOCK;
	e->h.size = (uint16_t)CP_ALIGN(offsetof(struct cp_ev_sock, payload) + n);
	e->h.ts = 1000;
	e->phase = CP_PHASE_EXIT;
	e->call = read ? CP_SOCK_READ : CP_SOCK_WRITE;
	e->family = 2;
	e->lport = lport;
	e->rport = 80;
	e->sock_type = 1;
	e->bytes = (int64_t)n;
	e->payload_len = (uint16_t)n;
	memcpy(e->payload, p, n);
	return e;
}

static void test_record(void **state)
{
	struct redact *rd = redact__new(128);
	uint8_t p[CP_PAYLOAD_MAX], body[300];
	const struct cp_ev_sock *out;
	struct cp_ev_sock *e;
	struct redact_stats st;
	size_t n = 0, data_at;

	(void)state;
	assert_non_null(rd);
	memset(body, 'B', sizeof(body));
	memcpy(p, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
	n = 24;
	n += frame(p + n, 4, 0, 0, "", 0);
	n += frame(p + n, 1, 0x4, 1, req1, sizeof(req1) - 1);
	data_at = n + 9;
	n += frame(p + n, 0, 0x1, 1, body, sizeof(body));
	e = sock_rec(p, n, false, 40000);
	out = (const struct cp_ev_sock *)redact__record(rd, &e->h);
	assert_ptr_not_equal(out, e);
	assert_int_equal(out->h.size, e->h.size);
	assert_memory_equal(out->payload, p, data_at - (sizeof(req1) - 1) - 9);
	assert_false(has(out->payload, n, auth_huff, 6));
	/* DATA: the first 128 bytes of the transfer only */
	for (size_t i = data_at; i < n; i++)
		assert_int_equal(out->payload[i], 0);
	free(e);

	/* the next request, its block cut between HEADERS and CONTINUATION */
	n = frame(p, 1, 0, 3, req2, 10);
	n += frame(p + n, 9, 0x4, 3, req2 + 10, sizeof(req2) - 1 - 10);
	e = sock_rec(p, n, false, 40000);
	out = (const struct cp_ev_sock *)redact__record(rd, &e->h);
	{
		uint8_t blk[sizeof(req2)];
		struct hpack t;
		struct hp_fields f;

		memcpy(blk, out->payload + 9, 10);
		memcpy(blk + 10, out->payload + 28, sizeof(req2) - 1 - 10);
		hpack__init(&t, true);
		assert_int_equal(hpack__decode(&t, BLOCK(req1), false, &f), 0);
		assert_int_equal(hpack__decode(&t, blk, sizeof(req2) - 1, false, &f), 0);
		assert_string_equal(f.path, "/api/items?id=8");
		assert_false(has(blk, sizeof(req2) - 1, "\x1d\x47\x4c\xe5\xb1\x64", 6));
		hpack__free(&t);
	}
	free(e);

	/* frames lost: bytes that are no frame header at a transfer's start */
	memset(p, 'z', 64);
	p[3] = 0x7f;
	e = sock_rec(p, 64, false, 40000);
	out = (const struct cp_ev_sock *)redact__record(rd, &e->h);
	for (size_t i = 0; i < 64; i++)
		assert_int_equal(out->payload[i], 0xff);
	free(e);

	/* another connection, not HTTP at all: as it was */
	e = sock_rec((const uint8_t *)"*1\r\n$4\r\nPING\r\n", 14, true, 40001);
	assert_ptr_equal(redact__record(rd, &e->h), e);
	free(e);

	/* the connection closes: what was redacted on it still counts */
	e = sock_rec((const uint8_t *)"", 0, false, 40000);
	e->call = CP_SOCK_CLOSE;
	assert_ptr_equal(redact__record(rd, &e->h), e);
	free(e);
	redact__stats(rd, &st);
	assert_int_equal(st.conns, 1);
	assert_int_equal(st.values, 3);
	assert_int_equal(st.data, sizeof(body)); /* all past the first 128 bytes */
	assert_int_equal(st.blind, 64);
	redact__free(rd);
}

/* Frames through pieces (CP_SOCK_F_PIECES): a header block past the
 * prefix is redacted there too. */
static void test_pieces(void **state)
{
	struct redact *rd = redact__new(128);
	uint8_t xfer[2048], big[1500];
	struct cp_ev_sock *e = calloc(1, sizeof(*e) + 4096);
	const struct cp_ev_sock *out;
	size_t n = 0, hb_at, plen = 64;
	uint8_t *pc;

	(void)state;
	memset(big, 'D', sizeof(big));
	n += frame(xfer + n, 0, 0, 1, big, sizeof(big)); /* DATA first */
	hb_at = n;
	n += frame(xfer + n, 1, 0x4, 3, req1, sizeof(req1) - 1);
	/* the record: 64 bytes of prefix, then one piece (the HEADERS frame) */
	e->h.type = CP_EV_SOCK;
	e->phase = CP_PHASE_EXIT;
	e->call = CP_SOCK_WRITE;
	e->family = 2;
	e->lport = 1;
	e->sock_type = 1;
	e->bytes = (int64_t)n;
	e->payload_len = (uint16_t)plen;
	e->flags = CP_SOCK_F_PIECES;
	memcpy(e->payload, xfer, plen);
	pc = e->payload + plen;
	pc[0] = (uint8_t)hb_at;
	pc[1] = (uint8_t)(hb_at >> 8);
	pc[2] = pc[3] = 0;
	pc[4] = (uint8_t)(n - hb_at);
	pc[5] = (uint8_t)((n - hb_at) >> 8);
	memcpy(pc + 6, xfer + hb_at, n - hb_at);
	e->h.size = (uint16_t)CP_ALIGN(offsetof(struct cp_ev_sock, payload) + plen + 6 + n - hb_at);
	/* mid-stream (no preface): the DATA frame header at 0 finds the frames */
	out = (const struct cp_ev_sock *)redact__record(rd, &e->h);
	assert_memory_equal(out->payload, xfer, plen); /* within the first 128 */
	assert_false(has(out->payload, out->h.size - offsetof(struct cp_ev_sock, payload), auth_huff,
			 6));
	assert_true(has(out->payload, out->h.size - offsetof(struct cp_ev_sock, payload),
			trace_huff, sizeof(trace_huff) - 1));
	free(e);
	redact__free(rd);
}

/* HTTP/1.x: header values other than the framing ones are '*', in each
 * message the prefix holds; lengths, names, first lines, bodies stay. */
static void test_http1(void **state)
{
	static const char req[] = "GET /a?q=1&api_key=k HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer abc\r\n"
				  "cookie:s=1\r\nContent-Length: 3\r\n\r\nxyz"
				  "POST /b HTTP/1.1\r\nX-Api-Key: k9\r\ntraceparent: 00-ab\r\n\r\n";
	static const char want[] = "GET /a?q=1&api_key=* HTTP/1.1\r\nHost: shop\r\nAuthorization: **********\r\n"
				   "cookie:***\r\nContent-Length: 3\r\n\r\nxyz"
				   "POST /b HTTP/1.1\r\nX-Api-Key: **\r\ntraceparent: 00-ab\r\n\r\n";
	static const char resp[] = "HTTP/1.1 200 OK\r\nSet-Cookie: id=42; HttpOnly\r\nContent-Typ";
	struct redact *rd = redact__new(128);
	const struct cp_ev_sock *out;
	struct cp_ev_sock *e;
	struct redact_stats st;

	(void)state;
	e = sock_rec((const uint8_t *)req, sizeof(req) - 1, true, 1);
	out = (const struct cp_ev_sock *)redact__record(rd, &e->h);
	assert_memory_equal(out->payload, want, sizeof(want) - 1);
	free(e);
	/* cut by the prefix: what it shows of a value is redacted */
	e = sock_rec((const uint8_t *)resp, sizeof(resp) - 1, false, 1);
	out = (const struct cp_ev_sock *)redact__record(rd, &e->h);
	assert_memory_equal(out->payload,
			    "HTTP/1.1 200 OK\r\nSet-Cookie: ***************\r\nContent-Typ",
			    sizeof(resp) - 1);
	free(e);
	redact__stats(rd, &st);
	assert_int_equal(st.h1_values, 5);
	assert_int_equal(st.conns, 0);
	redact__free(rd);
}

/* A :path's credential query values (python3-hpack's Encoder: Huffman with
 * incremental indexing, then the same request by index; and a literal):
 * masked with the string's encoded and decoded lengths kept, so the report
 * reads the same table and the request's name, without the secret. */
static void test_path_query(void **state)
{
	static const char b1[] = "\x82\x86\x44\x94\x60\x75\x9b\xfc\xde\x7e\xa5\xaa\x04\x32\x4b"
				 "\x19\x4f\xe7\x3f\xd7\xfe\x3c\xc0\x1f\x41\x88\x2f\x91\xd3\x5d"
				 "\x05\x5c\x87\xa7";
	static const char b2[] = "\x82\x86\xbf\xbe";
	static const char b3[] = "\x82\x44\x17/p?password=hunter2&q=1";
	uint8_t r1[sizeof(b1)], r2[sizeof(b2)], r3[sizeof(b3)];
	struct hp_redact r;
	struct hpack a, b;
	struct hp_fields fa, fb;

	(void)state;
	memcpy(r1, b1, sizeof(b1));
	memcpy(r2, b2, sizeof(b2));
	memcpy(r3, b3, sizeof(b3));
	hpack__redact_init(&r, true);
	hpack__redact(&r, r1, sizeof(b1) - 1);
	hpack__redact_end(&r);
	hpack__redact(&r, r2, sizeof(b2) - 1);
	hpack__redact_end(&r);
	hpack__redact(&r, r3, sizeof(b3) - 1);
	hpack__redact_end(&r);
	assert_int_equal(r.redacted, 2);
	hpack__redact_free(&r);
	hpack__init(&a, true);
	hpack__init(&b, true);
	assert_int_equal(hpack__decode(&a, (const uint8_t *)b1, sizeof(b1) - 1, false, &fa), 0);
	assert_int_equal(hpack__decode(&b, r1, sizeof(b1) - 1, false, &fb), 0);
	assert_string_equal(fa.path, "/api?Token=s3cr3tXYZ9&x=1");
	assert_int_equal(strlen(fb.path), strlen(fa.path));
	assert_memory_equal(fb.path, "/api?Token=", 11);
	assert_null(strstr(fb.path, "s3cr"));
	assert_string_equal(fb.path + 21, "&x=1");
	assert_int_equal(a.size, b.size);
	assert_int_equal(hpack__decode(&b, r2, sizeof(b2) - 1, false, &fb), 0);
	assert_memory_equal(fb.path, "/api?Token=", 11);
	assert_string_equal(fb.authority, "example.com");
	hpack__free(&a);
	hpack__free(&b);
	assert_memory_equal(r3, "\x82\x44\x17/p?password=*******&q=1", sizeof(b3) - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fill),	  cmocka_unit_test(test_block),
	    cmocka_unit_test(test_gap),		  cmocka_unit_test(test_unknown_name),
	    cmocka_unit_test(test_record),	  cmocka_unit_test(test_pieces),
	    cmocka_unit_test(test_http1),	  cmocka_unit_test(test_path_query),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
