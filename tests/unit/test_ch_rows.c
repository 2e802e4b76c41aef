// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The store's rows read back from their RowBinary: a request's row (times
 * on the Unix epoch, its wire), one segment row per segment with its
 * culprits, steps summed per (frames, category, SKU), blame as the engine's
 * contention table counts it, calls not followed into their callee; the
 * rid's hash and the day; a batch's rows in order, appended. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ch_rows.h"

#define DAY_NS 86400000000000ull
#define OFF 1796601600000000000ll /* 2026-12-07T00:00:00Z - the monotonic clock */

/* --- a reader of RowBinary ----------------------------------------------------- */

struct rd {
	const uint8_t *p, *end;
};

static void need(struct rd *r, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		fail_msg("row cut: %zu bytes wanted, %zu left", n, (size_t)(r->end - r->p));
}

static uint64_t rd_uint(struct rd *r, size_t n)
{
	uint64_t v = 0;

	assert_true(n <= sizeof(v));
	need(r, n);
	memcpy(&v, r->p, n);
	r->p += n;
	return v;
}

static uint64_t rd_var(struct rd *r)
{
	uint64_t v = 0;

	for (int shift = 0;; shift += 7) {
		uint8_t b = (uint8_t)rd_uint(r, 1);

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
}

/* a String, copied to a static buffer of 8 (valid for 8 calls) */
static const char *rd_str(struct rd *r)
{
	static char bufs[8][256];
	static int k;
	uint64_t n = rd_var(r);
	char *b = bufs[k++ % 8];

	need(r, n);
	assert_true(n < 256);
	memcpy(b, r->p, n);
	b[n] = '\0';
	r->p += n;
	return b;
}

/* --- a request --------------------------------------------------------------- */

static const char *f_get[] = {"frontend", "GET /x"};
static const char *f_get2[] = {"frontend", "GET /x"}; /* equal, not the same pointers */
static const char *f_kv[] = {"frontend", "GET /x", "kv_get"};
static const struct cp_culprit lock_culprits[] = {
    {.pid = 10, .tid = 11, .comm = "maint", .ns = 300},
    {.pid = 10, .tid = 12, .comm = "w1", .ns = 200},
};
static const struct cp_culprit rq_culprits[] = {
    {.pid = 10, .tid = 11, .comm = "maint", .ns = 50}, /* a lock culprit again, another category */
};

static const struct cp_segment segs[] = {
    {.start_ns = 1000,
     .end_ns = 1100,
     .category = CP_CAT_CPU,
     .frames = f_get,
     .nframes = 2,
     .pid = 10,
     .tid = 13,
     .cpu = 1,
     .comm = "worker",
     .cpu_model = "EPYC",
     .host = "h1"},
    {.start_ns = 1100,
     .end_ns = 1600,
     .category = CP_CAT_LOCK,
     .frames = f_get,
     .nframes = 2,
     .interference = true,
     .pid = 10,
     .tid = 13,
     .cpu = -1,
     .comm = "worker",
     .culprits = lock_culprits,
     .nculprits = 2,
     .host = "h1"},
    {.start_ns = 1600,
     .end_ns = 1650,
     .category = CP_CAT_RUNQUEUE,
     .frames = f_get,
     .nframes = 2,
     .interference = true,
     .pid = 10,
     .tid = 13,
     .cpu = 2,
     .comm = "worker",
     .culprits = rq_culprits,
     .nculprits = 1,
     .host = "h1"},
    {.start_ns = 1650,
     .end_ns = 1700,
     .category = CP_CAT_RUNQUEUE,
     .frames = f_get,
     .nframes = 2,
     .interference = true,
     .pid = 10,
     .tid = 13,
     .cpu = 2,
     .comm = "worker",
     .host = "h1"},
    {.start_ns = 1700,
     .end_ns = 1900,
     .category = CP_CAT_CPU,
     .frames = f_get2,
     .nframes = 2,
     .pid = 10,
     .tid = 13,
     .cpu = 3,
     .comm = "worker",
     .cpu_model = "EPYC",
     .host = "h1"},
    {.start_ns = 1900,
     .end_ns = 2000,
     .category = CP_CAT_CPU,
     .frames = f_kv,
     .nframes = 3,
     .probe_frames = 1,
     .pid = 10,
     .tid = 13,
     .cpu = 3,
     .comm = "worker",
     .sku = "m6a",
     .host = "h1"},
    {.start_ns = 2000,
     .end_ns = 2400,
     .category = CP_CAT_NETWORK,
     .frames = f_kv,
     .nframes = 3,
     .pid = 10,
     .tid = 13,
     .cpu = -1,
     .comm = "worker",
     .peer = "10.0.0.2:6379",
     .host = "h1"},
};

static const struct cp_call calls[] = {
    {.local_addr = "10.0.0.1:4000",
     .remote_addr = "10.0.0.2:6379",
     .tx_seq = 77,
     .tx_len = 10,
     .start_ns = 2000,
     .end_ns = 2400,
     .seg = 6,
     .category = CP_CAT_NETWORK,
     .frames = f_kv,
     .nframes = 3},
    {.local_addr = "10.0.0.1:4001",
     .remote_addr = "10.0.0.3:80",
     .tx_seq = 5,
     .seg = -1,
     .stitched = true},
};

static const struct cp_request_wire wire = {
    .protocol = "http",
    .status = 503,
    .traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    .server_addr = "10.0.0.1:80",
    .client_addr = "10.0.0.9:5555",
    .rx_seq = 1000,
    .rx_len = 40,
    .tx_seq = 2000,
    .tx_len = 300,
    .calls = calls,
    .ncalls = 2,
};

static struct cp_request request(void)
{
	return (struct cp_request){.id = "10:3:7",
				   .service = "frontend",
				   .name = "GET /x",
				   .host = "h1",
				   .start_ns = 1000,
				   .end_ns = 2400,
				   .segs = segs,
				   .nsegs = sizeof(segs) / sizeof(segs[0]),
				   .realtime_offset_ns = OFF,
				   .target = "/x?id=1",
				   .downstream = false,
				   .wire = &wire};
}

/* The columns every row begins with */
static void rd_head(struct rd *r, uint16_t day, uint64_t batch, uint64_t rid, const char *host)
{
	assert_int_equal(rd_uint(r, 2), day);
	assert_true(rd_uint(r, 8) == batch);
	assert_true(rd_uint(r, 8) == rid);
	assert_string_equal(rd_str(r), host);
}

static uint64_t fnv(const char *a, const char *b, const char *c)
{
	const char *p[3] = {a, b, c};
	uint64_t h = 0xcbf29ce484222325ull;

	for (int i = 0; i < 3; i++) {
		for (const char *s = p[i]; *s; s++)
			h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
		h *= 0x100000001b3ull;
	}
	return h;
}

static void test_request_rows(void **state)
{
	struct cp_request req = request();
	struct ch_batch b = {0};
	uint16_t day = (uint16_t)(OFF / DAY_NS);
	uint64_t rid = fnv("h1", "boot-1", "10:3:7");
	struct rd r;

	assert_int_equal(ch_rows__day(&req), day);
	assert_true(ch_rows__rid("h1", "boot-1", "10:3:7") == rid);
	ch_batch__reset(&b, 42, day);
	assert_int_equal(ch_batch__add(&b, &req, NULL, "boot-1"), 0);
	assert_int_equal(b.requests, 1);
	assert_int_equal(b.rows[CH_REQUESTS], 1);
	assert_int_equal(b.rows[CH_SEGMENTS], 7);

	r = (struct rd){b.t[CH_REQUESTS].p, b.t[CH_REQUESTS].p + b.t[CH_REQUESTS].n};
	rd_head(&r, day, 42, rid, "h1");
	assert_string_equal(rd_str(&r), "boot-1");
	assert_string_equal(rd_str(&r), "frontend");
	assert_string_equal(rd_str(&r), "GET /x");
	assert_string_equal(rd_str(&r), "/x?id=1");
	assert_string_equal(rd_str(&r), "10:3:7");
	assert_true(rd_uint(&r, 8) == (uint64_t)OFF + 1000);
	assert_true(rd_uint(&r, 8) == (uint64_t)OFF + 2400);
	assert_int_equal(rd_uint(&r, 8), 1400);
	assert_int_equal(rd_uint(&r, 1), 0);				     /* partial */
	assert_int_equal(rd_uint(&r, 1), 0);				     /* downstream */
	assert_string_equal(rd_str(&r), "0af7651916cd43dd8448eb211c80319c"); /* sampled */
	assert_string_equal(rd_str(&r), "http");
	assert_int_equal((int32_t)rd_uint(&r, 4), 503);
	assert_string_equal(rd_str(&r), "10.0.0.1:80");
	assert_string_equal(rd_str(&r), "10.0.0.9:5555");
	assert_int_equal(rd_uint(&r, 4), 1000);
	assert_int_equal(rd_uint(&r, 4), 40);
	assert_int_equal(rd_uint(&r, 4), 2000);
	assert_int_equal(rd_uint(&r, 4), 300);
	assert_int_equal(rd_uint(&r, 4), 7);
	assert_ptr_equal(r.p, r.end);

	/* segments: the second (the lock's) in full */
	r = (struct rd){b.t[CH_SEGMENTS].p, b.t[CH_SEGMENTS].p + b.t[CH_SEGMENTS].n};
	for (uint32_t i = 0; i < 7; i++) {
		const struct cp_segment *g = &segs[i];

		rd_head(&r, day, 42, rid, "h1");
		assert_string_equal(rd_str(&r), "frontend");
		assert_string_equal(rd_str(&r), "GET /x");
		assert_int_equal(rd_uint(&r, 8), 1400);
		assert_int_equal(rd_uint(&r, 4), i);
		assert_true(rd_uint(&r, 8) == (uint64_t)OFF + g->start_ns);
		assert_int_equal(rd_uint(&r, 8), g->end_ns - g->start_ns);
		assert_int_equal(rd_uint(&r, 1), g->category);
		assert_int_equal(rd_var(&r), g->nframes);
		for (uint32_t f = 0; f < g->nframes; f++)
			assert_string_equal(rd_str(&r), g->frames[f]);
		assert_int_equal(rd_uint(&r, 1), g->probe_frames);
		assert_int_equal(rd_uint(&r, 1), g->interference);
		assert_string_equal(rd_str(&r), "h1");
		assert_int_equal((int32_t)rd_uint(&r, 4), g->pid);
		assert_int_equal((int32_t)rd_uint(&r, 4), g->tid);
		assert_string_equal(rd_str(&r), g->comm);
		assert_int_equal((int16_t)rd_uint(&r, 2), g->cpu);
		assert_string_equal(rd_str(&r), g->cpu_model ? g->cpu_model : "");
		assert_string_equal(rd_str(&r), g->sku ? g->sku : "");
		assert_string_equal(rd_str(&r), g->peer ? g->peer : "");
		assert_int_equal(rd_var(&r), g->nculprits);
		for (uint32_t c = 0; c < g->nculprits; c++)
			assert_int_equal((int32_t)rd_uint(&r, 4), g->culprits[c].pid);
		assert_int_equal(rd_var(&r), g->nculprits);
		for (uint32_t c = 0; c < g->nculprits; c++)
			assert_int_equal((int32_t)rd_uint(&r, 4), g->culprits[c].tid);
		assert_int_equal(rd_var(&r), g->nculprits);
		for (uint32_t c = 0; c < g->nculprits; c++)
			assert_string_equal(rd_str(&r), g->culprits[c].comm);
		assert_int_equal(rd_var(&r), g->nculprits);
		for (uint32_t c = 0; c < g->nculprits; c++)
			assert_int_equal(rd_uint(&r, 8), g->culprits[c].ns);
	}
	assert_ptr_equal(r.p, r.end);
	ch_batch__free(&b);
}

struct step {
	uint32_t nframes;
	const char *last;
	uint8_t cat;
	const char *sku;
	uint64_t ns;
};

static void test_steps_and_blame(void **state)
{
	/* cpu "GET /x" on EPYC twice (equal frames, other pointers) summed;
	 * the runqueue's two segments summed; kv_get's cpu on its SKU label */
	static const struct step want[] = {
	    {2, "GET /x", CP_CAT_CPU, "EPYC", 300},  {2, "GET /x", CP_CAT_LOCK, "", 500},
	    {2, "GET /x", CP_CAT_RUNQUEUE, "", 100}, {3, "kv_get", CP_CAT_CPU, "m6a", 100},
	    {3, "kv_get", CP_CAT_NETWORK, "", 400},
	};
	/* the lock's culprits with their time; the first runqueue segment's
	 * culprit; the second's own thread with the segment's time */
	static const struct {
		int32_t pid, tid;
		const char *comm;
		uint8_t cat;
		uint64_t ns;
	} culprits[] = {
	    {10, 11, "maint", CP_CAT_LOCK, 300},
	    {10, 12, "w1", CP_CAT_LOCK, 200},
	    {10, 11, "maint", CP_CAT_RUNQUEUE, 50},
	    {10, 13, "worker", CP_CAT_RUNQUEUE, 50},
	};
	struct cp_request req = request();
	struct ch_batch b = {0};
	uint16_t day = (uint16_t)(OFF / DAY_NS);
	uint64_t rid = fnv("h9", "", "10:3:7");
	struct rd r;

	ch_batch__reset(&b, 7, day);
	assert_int_equal(ch_batch__add(&b, &req, "h9", ""), 0);
	assert_int_equal(b.rows[CH_STEPS], 5);
	assert_int_equal(b.rows[CH_BLAME], 4);
	assert_int_equal(b.rows[CH_CALLS], 1); /* not the stitched one */
	r = (struct rd){b.t[CH_STEPS].p, b.t[CH_STEPS].p + b.t[CH_STEPS].n};
	for (size_t i = 0; i < 5; i++) {
		uint64_t n;
		const char *f = NULL;

		assert_int_equal(rd_uint(&r, 2), day);
		assert_int_equal(rd_uint(&r, 8), 7);
		assert_true(rd_uint(&r, 8) == rid);
		assert_string_equal(rd_str(&r), "h9");
		assert_string_equal(rd_str(&r), "frontend");
		assert_string_equal(rd_str(&r), "GET /x");
		assert_true(rd_uint(&r, 8) == (uint64_t)OFF + 1000);
		assert_int_equal(rd_uint(&r, 8), 1400);
		assert_int_equal(rd_uint(&r, 1), 0);
		assert_int_equal(rd_uint(&r, 1), 0);
		n = rd_var(&r);
		assert_int_equal(n, want[i].nframes);
		for (uint64_t k = 0; k < n; k++)
			f = rd_str(&r);
		assert_string_equal(f, want[i].last);
		assert_int_equal(rd_uint(&r, 1), want[i].cat);
		assert_string_equal(rd_str(&r), want[i].sku);
		assert_int_equal(rd_uint(&r, 8), want[i].ns);
	}
	assert_ptr_equal(r.p, r.end);
	r = (struct rd){b.t[CH_BLAME].p, b.t[CH_BLAME].p + b.t[CH_BLAME].n};
	for (size_t i = 0; i < 4; i++) {
		rd_head(&r, day, 7, rid, "h9");
		assert_string_equal(rd_str(&r), "frontend");
		assert_string_equal(rd_str(&r), "GET /x");
		assert_true(rd_uint(&r, 8) == (uint64_t)OFF + 1000);
		assert_int_equal(rd_uint(&r, 8), 1400);
		assert_int_equal(rd_uint(&r, 1), 0);
		assert_int_equal((int32_t)rd_uint(&r, 4), culprits[i].pid);
		assert_int_equal((int32_t)rd_uint(&r, 4), culprits[i].tid);
		assert_string_equal(rd_str(&r), culprits[i].comm);
		assert_int_equal(rd_uint(&r, 1), culprits[i].cat);
		assert_int_equal(rd_uint(&r, 8), culprits[i].ns);
	}
	assert_ptr_equal(r.p, r.end);
	r = (struct rd){b.t[CH_CALLS].p, b.t[CH_CALLS].p + b.t[CH_CALLS].n};
	rd_head(&r, day, 7, rid, "h9");
	/* the request's columns, as steps have them */
	assert_string_equal(rd_str(&r), "frontend");
	assert_string_equal(rd_str(&r), "GET /x");
	assert_true(rd_uint(&r, 8) == (uint64_t)OFF + 1000);
	assert_int_equal(rd_uint(&r, 8), 1400);
	assert_int_equal(rd_uint(&r, 1), 0);
	assert_int_equal(rd_uint(&r, 1), 0);
	assert_string_equal(rd_str(&r), "10.0.0.1:4000");
	assert_string_equal(rd_str(&r), "10.0.0.2:6379");
	assert_int_equal(rd_uint(&r, 4), 77);
	assert_true(rd_uint(&r, 8) == (uint64_t)OFF + 2000);
	assert_true(rd_uint(&r, 8) == (uint64_t)OFF + 2400);
	assert_int_equal(rd_var(&r), 3);
	rd_str(&r);
	rd_str(&r);
	assert_string_equal(rd_str(&r), "kv_get");
	assert_int_equal(rd_uint(&r, 1), CP_CAT_NETWORK);
	assert_int_equal(rd_uint(&r, 1), 0); /* interference */
	assert_ptr_equal(r.p, r.end);
	ch_batch__free(&b);
}

static void test_batch(void **state)
{
	struct cp_request req = request();
	struct cp_request_wire w = wire;
	struct ch_batch b = {0};
	size_t one[CH_TABLES];

	/* an unsampled traceparent is no opt-in: no trace id */
	w.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
	req.wire = &w;
	ch_batch__reset(&b, 1, ch_rows__day(&req));
	assert_int_equal(ch_batch__add(&b, &req, NULL, "b"), 0);
	for (int t = 0; t < CH_TABLES; t++)
		one[t] = b.t[t].n;
	/* the second request's rows after the first's; the batch's bytes all */
	assert_int_equal(ch_batch__add(&b, &req, NULL, "b"), 0);
	for (int t = 0; t < CH_TABLES; t++) {
		assert_int_equal(b.t[t].n, 2 * one[t]);
		assert_memory_equal(b.t[t].p, b.t[t].p + one[t], one[t]);
	}
	assert_int_equal(b.requests, 2);
	assert_int_equal(b.bytes, 2 * (one[0] + one[1] + one[2] + one[3] + one[4]));
	/* trace_id: after day, batch, rid, host, boot, service, name, target,
	 * id, three times and two flags: empty */
	{
		struct rd r = {b.t[CH_REQUESTS].p, b.t[CH_REQUESTS].p + one[CH_REQUESTS]};

		r.p += 18;
		for (int i = 0; i < 6; i++)
			rd_str(&r);
		r.p += 26;
		assert_string_equal(rd_str(&r), "");
	}
	/* reset keeps nothing of the rows */
	ch_batch__reset(&b, 2, 5);
	for (int t = 0; t < CH_TABLES; t++)
		assert_int_equal(b.t[t].n, 0);
	/* no wire, no segments (a span-level request has a wire of NULL) */
	req.wire = NULL;
	req.nsegs = 0;
	req.realtime_offset_ns = -5000; /* before 1970: day 0, times 0 */
	assert_int_equal(ch_rows__day(&req), 0);
	assert_int_equal(ch_batch__add(&b, &req, NULL, NULL), 0);
	assert_int_equal(b.rows[CH_SEGMENTS], 0);
	assert_int_equal(b.rows[CH_STEPS], 0);
	assert_int_equal(b.rows[CH_CALLS], 0);
	ch_batch__free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request_rows),
	    cmocka_unit_test(test_steps_and_blame),
	    cmocka_unit_test(test_batch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
