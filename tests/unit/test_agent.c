// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath agent's pieces without BPF: the traceparent parser, triggering
 * (slow by duration and by running percentile, sampling, opt-in), the
 * OTLP encoding (walked back with a protobuf reader of the wire format),
 * the HTTP request's target and trace context, and the exporter against a
 * refused URL (counted, never lost silently). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"
#include "flight.h"
#include "proto.h"
#include "recording.h"
#include "recording_testlib.h"
#include "util.h"

static void test_traceparent(void **state)
{
	uint8_t t[16], s[8];
	bool sampled;

	assert_true(traceparent__parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", t,
				       s, &sampled));
	assert_true(sampled);
	assert_int_equal(t[0], 0x4b);
	assert_int_equal(s[7], 0xb7);
	assert_true(traceparent__parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", t,
				       s, &sampled));
	assert_false(sampled);
	/* all-zero ids, upper case, a short one, version ff, junk after 00 */
	assert_false(traceparent__parse("00-00000000000000000000000000000000-00f067aa0ba902b7-01", t,
					s, &sampled));
	assert_false(traceparent__parse("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", t,
					s, &sampled));
	assert_false(traceparent__parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", t, s,
					&sampled));
	assert_false(traceparent__parse("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", t,
					s, &sampled));
	assert_false(traceparent__parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
					t, s, &sampled));
	assert_true(traceparent__parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", t,
				       s, &sampled));
	assert_false(traceparent__parse(NULL, t, s, &sampled));
}

static struct cp_request req(const char *svc, const char *name, uint64_t start, uint64_t lat)
{
	struct cp_request r = {.service = svc, .name = name, .start_ns = start,
			       .end_ns = start + lat};
	return r;
}

static void test_trigger_duration_and_optin(void **state)
{
	struct trigger_opts o = {.slow_ns = 50000000};
	struct trigger *t = trigger__new(&o);
	struct cp_request_wire w = {.traceparent =
					"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"};
	struct cp_request r = req("s", "GET /", 1000, 60000000);

	assert_int_equal(trigger__judge(t, &r, r.end_ns), AG_SLOW);
	r = req("s", "GET /", 1000, 1000000);
	assert_int_equal(trigger__judge(t, &r, r.end_ns), AG_SKIP);
	r.wire = &w;
	assert_int_equal(trigger__judge(t, &r, r.end_ns), AG_OPTIN);
	w.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
	assert_int_equal(trigger__judge(t, &r, r.end_ns), AG_SKIP);
	trigger__free(t);
}

/* A client setting the sampled flag on every request is followed up to the
 * rate (a second's worth at once), then refused, counted; --no-opt-in
 * follows none */
static void test_trigger_optin_rate(void **state)
{
	struct trigger_opts o = {.slow_ns = 50000000, .optin_rate = 10};
	struct trigger *t = trigger__new(&o);
	struct cp_request_wire w = {.traceparent =
					"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"};
	struct cp_request r = req("s", "GET /", 1000, 1000000);
	uint64_t now = 5000000000ull;
	int in = 0, out = 0;

	r.wire = &w;
	/* 1,000 a second for 3 s: 10 at once, then 10 a second */
	for (int i = 0; i < 3000; i++, now += 1000000) {
		unsigned v = trigger__judge(t, &r, now);

		in += !!(v & AG_OPTIN);
		out += !!(v & AG_OPTIN_REFUSED);
		assert_false((v & AG_OPTIN) && (v & AG_OPTIN_REFUSED));
	}
	assert_in_range(in, 38, 41);
	assert_int_equal(in + out, 3000);
	/* a slow one is still slow */
	r = req("s", "GET /", 1000, 60000000);
	r.wire = &w;
	assert_true(trigger__judge(t, &r, now) & AG_SLOW);
	trigger__free(t);
	o.no_optin = true;
	t = trigger__new(&o);
	r = req("s", "GET /", 1000, 1000000);
	r.wire = &w;
	assert_int_equal(trigger__judge(t, &r, now), AG_OPTIN_REFUSED);
	trigger__free(t);
}

struct counts {
	int n;
	uint64_t a, b;
};

static void count_one(void *ctx, const struct trigger_count *k)
{
	struct counts *c = ctx;

	c->n++;
	if (!strcmp(k->name, "GET /a"))
		c->a = k->requests;
	if (!strcmp(k->name, "GET /b"))
		c->b = k->requests;
	assert_true(k->p50_ns <= k->p90_ns && k->p90_ns <= k->p99_ns && k->p99_ns <= k->max_ns);
}

static void test_trigger_percentile(void **state)
{
	struct trigger_opts o = {.slow_pct = 0.99, .seed = 7};
	struct trigger *t = trigger__new(&o);
	static const char svc[] = "s", a[] = "GET /a", b[] = "GET /b";
	uint64_t now = 100000000000ull;
	unsigned slow = 0;

	/* too few to judge: none is slow */
	for (int i = 0; i < 100; i++) {
		struct cp_request r = req(svc, a, now, 1000000 + i * 1000);

		assert_int_equal(trigger__judge(t, &r, now), AG_SKIP);
	}
	/* 1000 requests of 1-2 ms in no order: few are slow; then one of 10 ms
	 * is, one of 1.5 ms not */
	for (int i = 0; i < 1000; i++) {
		struct cp_request r = req(svc, a, now, 1000000 + (uint64_t)((i * 7919) % 1000) * 1000);

		slow += trigger__judge(t, &r, now) == AG_SLOW;
	}
	assert_true(slow <= 20);
	{
		struct cp_request r = req(svc, a, now, 10000000), q = req(svc, a, now, 1500000);

		/* the percentile is worked out again once a second */
		assert_int_equal(trigger__judge(t, &r, now + 1000000000ull), AG_SLOW);
		assert_int_equal(trigger__judge(t, &q, now + 1000000000ull), AG_SKIP);
	}
	/* another name has its own percentile */
	{
		struct cp_request r = req(svc, b, now, 10000000);

		assert_int_equal(trigger__judge(t, &r, now), AG_SKIP);
	}
	/* a minute later the old slots are gone: too few again */
	{
		struct cp_request r = req(svc, a, now, 10000000);

		assert_int_equal(trigger__judge(t, &r, now + 70000000000ull), AG_SKIP);
	}
	{
		struct counts c = {0};

		trigger__window_each(t, count_one, &c);
		assert_int_equal(c.n, 2);
		assert_int_equal(c.a, 1103);
		assert_int_equal(c.b, 1);
		c = (struct counts){0};
		trigger__window_each(t, count_one, &c);
		assert_int_equal(c.n, 0); /* a window starts over */
	}
	trigger__free(t);
}

static void test_trigger_sample(void **state)
{
	struct trigger_opts o = {.sample = 0.1, .seed = 42};
	struct trigger *t = trigger__new(&o);
	int n = 0;

	for (int i = 0; i < 10000; i++) {
		struct cp_request r = req("s", "x", 0, 1000);

		n += !!(trigger__judge(t, &r, 0) & AG_SAMPLED);
	}
	assert_in_range(n, 850, 1150);
	trigger__free(t);
}

/* --- a protobuf reader of the wire format, for the encoding's tests --- */

struct pb {
	const uint8_t *p, *end;
};

static uint64_t varint(struct pb *b)
{
	uint64_t v = 0;
	int s = 0;

	while (b->p < b->end) {
		uint8_t c = *b->p++;

		v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return v;
		s += 7;
	}
	fail_msg("varint cut");
	return 0;
}

/* The next field: its number, wire type, and (length-delimited) body */
static bool field(struct pb *b, uint32_t *num, uint32_t *wt, struct pb *body, uint64_t *v)
{
	uint64_t tag;

	if (b->p >= b->end)
		return false;
	tag = varint(b);
	*num = (uint32_t)(tag >> 3);
	*wt = tag & 7;
	if (*wt == 0) {
		*v = varint(b);
	} else if (*wt == 1) {
		assert_true(b->end - b->p >= 8);
		memcpy(v, b->p, 8);
		b->p += 8;
	} else if (*wt == 2) {
		uint64_t n = varint(b);

		assert_true((uint64_t)(b->end - b->p) >= n);
		body->p = b->p;
		body->end = b->p + n;
		b->p += n;
	} else {
		fail_msg("wire type %u", *wt);
	}
	return true;
}

/* The spans of an ExportTraceServiceRequest body: their bodies */
static int spans_of(struct pb all, struct pb *out, int max, struct pb *resource)
{
	uint32_t num, wt;
	struct pb rs, x, y, z;
	uint64_t v;
	int n = 0;

	while (field(&all, &num, &wt, &rs, &v)) {
		assert_int_equal(num, 1);
		while (field(&rs, &num, &wt, &x, &v)) {
			if (num == 1)
				*resource = x;
			if (num != 2)
				continue;
			while (field(&x, &num, &wt, &y, &v))
				if (num == 2 && n < max)
					out[n++] = y;
		}
	}
	(void)z;
	return n;
}

/* An attribute of a span (field 9) or resource (field 1): string or int */
static bool attr(struct pb m, uint32_t fieldno, const char *key, char *s, size_t slen,
		 int64_t *iv)
{
	uint32_t num, wt;
	struct pb kv, x, av;
	uint64_t v;

	while (field(&m, &num, &wt, &kv, &v)) {
		char k[64] = "";
		bool match = false;

		if (num != fieldno || wt != 2)
			continue;
		while (field(&kv, &num, &wt, &x, &v)) {
			if (num == 1) {
				snprintf(k, sizeof(k), "%.*s", (int)(x.end - x.p), x.p);
				match = !strcmp(k, key);
			} else if (num == 2 && match) {
				while (field(&x, &num, &wt, &av, &v)) {
					if (num == 1 && s)
						snprintf(s, slen, "%.*s", (int)(av.end - av.p), av.p);
					if ((num == 3 || num == 2) && iv)
						*iv = (int64_t)v;
				}
				return true;
			}
		}
	}
	return false;
}

static uint64_t span_u64(struct pb m, uint32_t want)
{
	uint32_t num, wt;
	struct pb x;
	uint64_t v;

	while (field(&m, &num, &wt, &x, &v))
		if (num == want && wt != 2)
			return v;
	return 0;
}

static bool span_bytes(struct pb m, uint32_t want, uint8_t *out, size_t n)
{
	uint32_t num, wt;
	struct pb x;
	uint64_t v;

	while (field(&m, &num, &wt, &x, &v))
		if (num == want && wt == 2) {
			assert_int_equal(x.end - x.p, n);
			memcpy(out, x.p, n);
			return true;
		}
	return false;
}

static void test_otlp_encoding(void **state)
{
	static const char *const fr_srv[] = {"srv:80", "GET /item/{n}"};
	static const char *const fr_db[] = {"srv:80", "GET /item/{n}", "db:5432 SELECT"};
	static const char *const fr_probe[] = {"srv:80", "GET /item/{n}", "handle", "lookup"};
	struct cp_culprit cul = {.pid = 7, .tid = 8, .comm = "holder", .ns = 3000};
	struct cp_segment segs[] = {
	    {.start_ns = 1000, .end_ns = 2000, .category = CP_CAT_CPU, .frames = fr_srv,
	     .nframes = 2, .pid = 10, .tid = 10},
	    {.start_ns = 2000, .end_ns = 5000, .category = CP_CAT_LOCK, .frames = fr_probe,
	     .nframes = 4, .probe_frames = 2, .pid = 10, .tid = 10, .culprits = &cul,
	     .nculprits = 1},
	    {.start_ns = 5000, .end_ns = 9000, .category = CP_CAT_CPU, .frames = fr_db,
	     .nframes = 3, .pid = 20, .tid = 21, .comm = "postgres"},
	    /* a wait for the client itself: no CLIENT span */
	    {.start_ns = 9000, .end_ns = 10000, .category = CP_CAT_NETWORK, .frames = fr_srv,
	     .nframes = 2, .pid = 10, .tid = 10, .interference = true, .peer = "[::1]:5555"},
	};
	struct cp_request_wire w = {
	    .protocol = "http",
	    .status = 503,
	    .traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	    .tracestate = "vendor=1",
	    .server_addr = "10.0.0.1:80",
	    .client_addr = "[::1]:5555",
	    .pid = 10,
	};
	struct cp_request r = {.service = "srv:80", .name = "GET /item/{n}", .host = "h1",
			       .start_ns = 1000, .end_ns = 10000, .segs = segs, .nsegs = 4,
			       .target = "/item/42?x=1&Token=s3cret", .wire = &w,
			       .realtime_offset_ns = 1000000000};
	struct otlp_resource res = {.host = "h0", .exe = "/usr/bin/srv"};
	uint8_t rnd[24] = {1, 2, 3}, tid[16], sid[8], parent[8], ctid[16], cparent[8];
	struct pbuf b = {0};
	struct pb spans[4], resource = {0};
	char s[128];
	int64_t iv = 0, sum = 0;
	static const char *const cats[] = {"critpath.cpu_ns",	  "critpath.runqueue_ns",
					   "critpath.lock_ns",	  "critpath.network_ns",
					   "critpath.disk_ns",	  "critpath.sleep_ns",
					   "critpath.unexplained_ns"};

	assert_int_equal(otlp__encode_request(&b, &r, &res, AG_OPTIN | AG_SLOW, rnd), 0);
	assert_int_equal(spans_of((struct pb){b.p, b.p + b.n}, spans, 4, &resource), 3);
	assert_true(attr(resource, 1, "service.name", s, sizeof(s), NULL));
	assert_string_equal(s, "srv:80");
	assert_true(attr(resource, 1, "host.name", s, sizeof(s), NULL));
	assert_string_equal(s, "h1");
	assert_true(attr(resource, 1, "process.pid", NULL, 0, &iv));
	assert_int_equal(iv, 10);
	assert_true(attr(resource, 1, "process.executable.path", s, sizeof(s), NULL));
	/* the SERVER span: the caller's trace, a child of its span */
	assert_true(span_bytes(spans[0], 1, tid, 16));
	assert_int_equal(tid[0], 0x4b);
	assert_true(span_bytes(spans[0], 4, parent, 8));
	assert_int_equal(parent[7], 0xb7);
	assert_true(span_bytes(spans[0], 2, sid, 8));
	assert_int_equal(span_u64(spans[0], 6), 2);
	assert_int_equal(span_u64(spans[0], 7), 1000001000ull);
	assert_int_equal(span_u64(spans[0], 8), 1000010000ull);
	assert_true(attr(spans[0], 9, "http.request.method", s, sizeof(s), NULL));
	assert_string_equal(s, "GET");
	assert_true(attr(spans[0], 9, "url.path", s, sizeof(s), NULL));
	assert_string_equal(s, "/item/42");
	assert_true(attr(spans[0], 9, "url.query", s, sizeof(s), NULL));
	assert_string_equal(s, "x=1&Token=REDACTED");
	assert_null(memmem(b.p, b.n, "s3cret", 6));
	assert_true(attr(spans[0], 9, "http.route", s, sizeof(s), NULL));
	assert_string_equal(s, "/item/{n}");
	assert_true(attr(spans[0], 9, "http.response.status_code", NULL, 0, &iv));
	assert_int_equal(iv, 503);
	assert_true(attr(spans[0], 9, "client.address", s, sizeof(s), NULL));
	assert_string_equal(s, "::1");
	assert_true(attr(spans[0], 9, "server.port", NULL, 0, &iv));
	assert_int_equal(iv, 80);
	for (size_t i = 0; i < sizeof(cats) / sizeof(cats[0]); i++) {
		iv = -1;
		assert_true(attr(spans[0], 9, cats[i], NULL, 0, &iv));
		sum += iv;
	}
	assert_int_equal(sum, 9000); /* the categories tile the span */
	assert_true(attr(spans[0], 9, "critpath.lock_ns", NULL, 0, &iv));
	assert_int_equal(iv, 3000);
	assert_true(attr(spans[0], 9, "critpath.interference_ns", NULL, 0, &iv));
	assert_int_equal(iv, 1000);
	assert_true(attr(spans[0], 9, "critpath.trigger", s, sizeof(s), NULL));
	assert_string_equal(s, "slow opt-in");
	/* the CLIENT span: the stretch in the database, a child of the server span */
	assert_true(span_bytes(spans[1], 1, ctid, 16));
	assert_memory_equal(ctid, tid, 16);
	assert_true(span_bytes(spans[1], 4, cparent, 8));
	assert_memory_equal(cparent, sid, 8);
	assert_int_equal(span_u64(spans[1], 6), 3);
	assert_int_equal(span_u64(spans[1], 7), 1000005000ull);
	assert_int_equal(span_u64(spans[1], 8), 1000009000ull);
	assert_true(attr(spans[1], 9, "critpath.comm", s, sizeof(s), NULL));
	assert_string_equal(s, "postgres");
	/* the INTERNAL span: the stretch in the probed call, its outermost frame */
	assert_int_equal(span_u64(spans[2], 6), 1);
	assert_true(attr(spans[2], 9, "code.function.name", s, sizeof(s), NULL));
	assert_string_equal(s, "handle");
	assert_int_equal(span_u64(spans[2], 7), 1000002000ull);
	assert_true(attr(spans[2], 9, "critpath.lock_ns", NULL, 0, &iv));
	assert_int_equal(iv, 3000);
	/* not opted in: a trace of its own, no parent */
	b.n = 0;
	assert_int_equal(otlp__encode_request(&b, &r, &res, AG_SLOW, rnd), 0);
	assert_int_equal(spans_of((struct pb){b.p, b.p + b.n}, spans, 4, &resource), 3);
	assert_false(span_bytes(spans[0], 4, parent, 8));
	assert_true(span_bytes(spans[0], 1, tid, 16));
	assert_int_equal(tid[0], 1);
	pbuf__free(&b);
}

/* Names from the network and from other processes' threads are not UTF-8
 * for sure: each string field comes out repaired, or a collector refuses the
 * whole batch */
static void test_otlp_strings_utf8(void **state)
{
	static const char *const fr[] = {"srv\xff:80", "GET /\xc3(\xed\xa0\x80"};
	struct cp_culprit cul = {.pid = 7, .tid = 8, .comm = "hog\xe2\x82", .ns = 3000};
	struct cp_segment segs[] = {
	    {.start_ns = 1000, .end_ns = 2000, .category = CP_CAT_LOCK, .frames = fr,
	     .nframes = 2, .pid = 10, .tid = 10, .culprits = &cul, .nculprits = 1},
	    {.start_ns = 2000, .end_ns = 3000, .category = CP_CAT_CPU, .frames = fr,
	     .nframes = 2, .pid = 20, .tid = 21, .comm = "\x80\x81"},
	};
	struct cp_request_wire w = {.protocol = "http", .pid = 10, .tracestate = "k=\xfe"};
	struct cp_request r = {.service = "srv\xff:80", .name = "GET /\xc3(\xed\xa0\x80",
			       .host = "h\xc0\xaf", .start_ns = 1000, .end_ns = 3000,
			       .segs = segs, .nsegs = 2, .target = "/\xf8x?a=\xff", .wire = &w};
	struct otlp_resource res = {.exe = "/bin/\xff"};
	uint8_t rnd[24] = {1};
	struct pbuf b = {0};
	struct pb spans[4], resource = {0};
	char s[128];

	assert_int_equal(otlp__encode_request(&b, &r, &res, AG_SLOW, rnd), 0);
	assert_int_equal(spans_of((struct pb){b.p, b.p + b.n}, spans, 4, &resource), 2);
	assert_true(attr(resource, 1, "service.name", s, sizeof(s), NULL));
	assert_string_equal(s, "srv\xef\xbf\xbd:80");
	assert_true(attr(resource, 1, "host.name", s, sizeof(s), NULL));
	assert_string_equal(s, "h\xef\xbf\xbd\xef\xbf\xbd"); /* overlong '/' */
	assert_true(attr(spans[0], 9, "url.path", s, sizeof(s), NULL));
	assert_true(utf8__valid(s, strlen(s)));
	/* the culprits are an array of strings */
	assert_true(attr(spans[0], 9, "critpath.culprits", NULL, 0, NULL));
	assert_non_null(memmem(b.p, b.n, "hog\xef\xbf\xbd\xef\xbf\xbd", 9));
	assert_null(memmem(b.p, b.n, "hog\xe2", 4));
	assert_true(attr(spans[1], 9, "critpath.comm", s, sizeof(s), NULL));
	assert_string_equal(s, "\xef\xbf\xbd\xef\xbf\xbd");
	for (int i = 0; i < 2; i++) { /* the span's name, field 5 */
		uint32_t num, wt;
		struct pb m = spans[i], x;
		uint64_t v;
		bool named = false;

		while (field(&m, &num, &wt, &x, &v))
			if (num == 5) {
				named = true;
				assert_true(utf8__valid((const char *)x.p, (size_t)(x.end - x.p)));
			}
		assert_true(named);
	}
	pbuf__free(&b);
}

static void test_tracestate_fit(void **state)
{
	/* 70 characters: the third member would be cut, so it goes whole */
	static const char req[] = "GET / HTTP/1.1\r\ntracestate: congo=t61rcWkgMzE,rojo=00f067aa0ba902b7,"
				  "vendorthree=abcdefghijklmnop\r\n\r\n";
	struct proto_meta m;
	char out[KP_TRACESTATE_LEN];

	proto__http_meta((const uint8_t *)req, sizeof(req) - 1, &m, true);
	assert_string_equal(m.tracestate, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
	proto__tracestate_fit(out, "a=1, b=2", 8);
	assert_string_equal(out, "a=1, b=2");
	proto__tracestate_fit(out, "averyveryveryveryveryveryveryveryveryveryveryveryveryverylongkey=1", 66);
	assert_string_equal(out, "");
	proto__tracestate_fit(out, "a=1 ,bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb=2",
			      71);
	assert_string_equal(out, "a=1");
}

static void test_http_meta(void **state)
{
	static const char req[] = "GET /a/1?q=2 HTTP/1.1\r\nHost: x\r\nTraceParent:  "
				  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 \r\n"
				  "tracestate: k=v\r\n\r\nbody traceparent: no";
	struct proto_meta m;

	proto__http_meta((const uint8_t *)req, sizeof(req) - 1, &m, true);
	assert_string_equal(m.target, "/a/1?q=2");
	assert_string_equal(m.traceparent,
			    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
	assert_string_equal(m.tracestate, "k=v");
	/* a header line cut by the prefix is not read */
	proto__http_meta((const uint8_t *)req, 60, &m, true);
	assert_string_equal(m.traceparent, "");
	proto__http_meta((const uint8_t *)req, sizeof(req) - 1, &m, false);
	assert_string_equal(m.target, "/a/1?q=2");
	assert_string_equal(m.traceparent, "");
}

static void test_exporter_refused(void **state)
{
	/* nothing listens on port 1: every try fails, counted at the close */
	struct exporter_opts o = {.url = "http://127.0.0.1:1/v1/traces", .queue_max = 4,
				  .timeout_ns = 200000000};
	struct exporter *e = exporter__new(&o);
	struct exporter_stats st;
	struct timespec ts;
	uint8_t x[4] = {1, 2, 3, 4};

	assert_non_null(e);
	for (int i = 0; i < 10; i++)
		exporter__push(e, x, sizeof(x));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	exporter__close(e, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 300000000,
			&st);
	assert_int_equal(st.queued, 10);
	assert_int_equal(st.sent, 0);
	assert_int_equal(st.dropped + st.failed, 10); /* every one accounted for */
	assert_non_null(exporter__check_url("ftp://x"));
	assert_non_null(exporter__check_url("http://"));
	assert_null(exporter__check_url("https://collector:4318/v1/traces"));
}

static void test_exporter_bytes_bound(void **state)
{
	/* --queue 4 holds 4 KiB: a third request of 1.5 KiB does not fit while
	 * the first two wait for their batch, and is counted as dropped */
	struct exporter_opts o = {.url = "http://127.0.0.1:1/v1/traces", .queue_max = 4,
				  .timeout_ns = 100000000};
	struct exporter *e = exporter__new(&o);
	struct exporter_stats st;
	static uint8_t x[1536];

	assert_non_null(e);
	for (int i = 0; i < 3; i++)
		exporter__push(e, x, sizeof(x));
	exporter__stats(e, &st);
	assert_int_equal(st.queued, 3);
	assert_int_equal(st.dropped, 1);
	exporter__close(e, 0, &st);
	assert_int_equal(st.dropped + st.failed, 3);
}

static void exit_rec(struct cp_ev_process_exit *e, uint32_t pid, uint64_t ts)
{
	memset(e, 0, sizeof(*e));
	e->h.type = CP_EV_PROCESS_EXIT;
	e->h.size = sizeof(*e);
	e->h.pid = e->h.tid = pid;
	e->h.ts = ts;
}

/* The flight recorder keeps the last seconds (and every metadata record),
 * writes them as a recording the reader takes, and keeps its file count */
static void test_flight(void **state)
{
	char dir[] = "/tmp/critpath-flight-XXXXXX", path[512], first[512];
	struct flight_opts o = {.keep_ns = 2000000000ull, .max_bytes = 64 << 20,
				.max_md_bytes = 1 << 20, .min_gap_ns = 1000000000ull,
				.max_files = 2};
	struct flight *f;
	struct flight_stats st;
	struct cp_md_thread m = {0};
	struct cp_ev_process_exit e;
	struct recording_reader *r;
	const struct cp_hdr *h;
	uint64_t n = 0, md = 0, minev = UINT64_MAX;

	assert_non_null(mkdtemp(dir));
	o.dir = dir;
	o.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(o.dirfd >= 0);
	f = flight__new(&o, rt_info());
	assert_non_null(f);
	m.h.type = CP_MD_THREAD;
	m.h.size = sizeof(m);
	m.h.pid = m.h.tid = 5;
	memcpy(m.comm, "worker", 6);
	assert_int_equal(flight__add(f, &m.h), 0);
	/* 10 s of events, 100k of them: the recorder keeps what its window holds */
	for (uint64_t i = 0; i < 100000; i++) {
		exit_rec(&e, 5, 1000000000ull + i * 100000);
		assert_int_equal(flight__add(f, &e.h), 0);
	}
	assert_int_equal(flight__dump(f, 11000000000ull, 3, path, sizeof(path)), 0);
	assert_true(path[0]);
	snprintf(first, sizeof(first), "%s", path);
	/* within min_gap: nothing written */
	assert_int_equal(flight__dump(f, 11500000000ull, 3, path, sizeof(path)), 0);
	assert_string_equal(path, "");
	assert_int_equal(recording_reader__open(&r, first, RECORDING_FILE_ORDER), 0);
	while (recording_reader__next(r, &h) > 0) {
		if (h->type >= CP_MD_PROCESS) {
			md++;
			continue;
		}
		n++;
		if (h->ts < minev)
			minev = h->ts;
	}
	recording_reader__close(r);
	assert_int_equal(md, 1);
	/* the window (2 s) and at most one chunk more */
	assert_true(minev >= 10999900000ull - 2000000000ull - 1500000000ull);
	assert_true(n >= 20000 && n < 100000);
	/* the third file removes the first */
	assert_int_equal(flight__dump(f, 13000000000ull, 3, path, sizeof(path)), 0);
	assert_int_equal(flight__dump(f, 15000000000ull, 3, path, sizeof(path)), 0);
	assert_int_equal(access(first, F_OK), -1);
	assert_int_equal(access(path, F_OK), 0);
	flight__stats(f, &st);
	assert_int_equal(st.written, 3);
	assert_int_equal(st.skipped, 1);
	assert_int_equal(st.removed, 1);
	flight__free(f);
	close(o.dirfd);
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_traceparent),	     cmocka_unit_test(test_trigger_duration_and_optin),
	    cmocka_unit_test(test_trigger_optin_rate),
	    cmocka_unit_test(test_trigger_percentile), cmocka_unit_test(test_trigger_sample),
	    cmocka_unit_test(test_otlp_encoding),    cmocka_unit_test(test_http_meta),
	    cmocka_unit_test(test_otlp_strings_utf8), cmocka_unit_test(test_tracestate_fit),
	    cmocka_unit_test(test_exporter_refused),
	    cmocka_unit_test(test_exporter_bytes_bound), cmocka_unit_test(test_flight),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
