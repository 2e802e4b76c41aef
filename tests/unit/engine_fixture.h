/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Hand-built requests for the engine and output tests (test_engine*.c,
 * test_out_*.c, test_report_cmd*.c): kernel-level requests with a lock
 * holder, a run-queue hog and a network blind spot, and span-level requests
 * with per-span stats, all with times chosen so every number is known.
 * Plus golden-file helpers: CRITPATH_UPDATE_GOLDEN=1 rewrites the files.
 */
#ifndef CRITPATH_ENGINE_FIXTURE_H
#define CRITPATH_ENGINE_FIXTURE_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

#define MS 1000000ull

static const char *const fx_frames_cart[] = {"frontend:8080", "GET /cart"};
static const char *const fx_frames_kv[] = {"frontend:8080", "GET /cart", "kvstore:7000 get"};
static const char *const fx_frames_root[] = {"api /checkout"};
static const char *const fx_frames_db[] = {"api /checkout", "db query"};

static const struct cp_culprit fx_maint[] = {{100, 105, "cache-maint", 0}};
static const struct cp_culprit fx_hog[] = {{300, 300, "kp_hog", MS / 2}};

/* Kernel request i (0..3): cpu 1 ms; lock (i+1) ms held by cache-maint;
 * a downstream kv call of 2 ms; an untraced peer 1 ms; run queue 0.5 ms
 * behind kp_hog on odd i; cpu 0.5 ms. Latency 5.5 + i (+0.5 on odd i) ms;
 * request 3 is partial. g has room for 6 segments. */
static inline void fx_kernel_request(int i, struct cp_request *q, struct cp_segment *g,
				     struct cp_culprit *cul, char *id, size_t idlen)
{
	uint64_t t = 1000 * MS + (uint64_t)i * 100 * MS, s0 = t;
	uint32_t n = 0;

	snprintf(id, idlen, "100:3:%d", i);
	memset(g, 0, 6 * sizeof(*g));
	for (int k = 0; k < 6; k++) {
		g[k].pid = 100;
		g[k].tid = 101;
		g[k].cpu = 0;
		g[k].comm = "frontend";
		g[k].cpu_model = "Test CPU @ 2.0GHz";
		g[k].frames = fx_frames_cart;
		g[k].nframes = 2;
	}
	g[n].start_ns = t;
	g[n].end_ns = t += 1 * MS;
	g[n++].category = CP_CAT_CPU;
	cul[0] = fx_maint[0];
	cul[0].ns = (uint64_t)(i + 1) * MS;
	g[n].start_ns = t;
	g[n].end_ns = t += (uint64_t)(i + 1) * MS;
	g[n].category = CP_CAT_LOCK;
	g[n].interference = true;
	g[n].tid = 105;
	g[n].comm = "cache-maint";
	g[n].culprits = cul;
	g[n++].nculprits = 1;
	g[n].start_ns = t;
	g[n].end_ns = t += 2 * MS;
	g[n].category = CP_CAT_CPU;
	g[n].pid = g[n].tid = 200;
	g[n].comm = "kvstore";
	g[n].cpu = 1;
	g[n].frames = fx_frames_kv;
	g[n++].nframes = 3;
	g[n].start_ns = t;
	g[n].end_ns = t += 1 * MS;
	g[n].category = CP_CAT_NETWORK;
	g[n].cpu = -1;
	g[n++].peer = "10.0.0.7:5432";
	if (i % 2) {
		g[n].start_ns = t;
		g[n].end_ns = t += MS / 2;
		g[n].category = CP_CAT_RUNQUEUE;
		g[n].interference = true;
		g[n].culprits = fx_hog;
		g[n++].nculprits = 1;
	}
	g[n].start_ns = t;
	g[n].end_ns = t += MS / 2;
	g[n++].category = CP_CAT_CPU;
	memset(q, 0, sizeof(*q));
	q->id = id;
	q->service = "frontend:8080";
	q->name = "GET /cart";
	q->host = "h1";
	q->start_ns = s0;
	q->end_ns = t;
	q->partial = i == 3;
	q->segs = g;
	q->nsegs = n;
}

/* Span request j (0..1): root "api /checkout" [0, 10 ms] with child "db
 * query" [2, 8 + j ms]: sections root 2, db 6 + j, root 2 - j. */
static inline void fx_span_request(int j, struct cp_request *q, struct cp_segment *g,
				   struct cp_span_stat *st, char *id, size_t idlen)
{
	static const char *const tags[] = {"env=prod", NULL};
	uint64_t t0 = 1700000000000ull * MS + (uint64_t)j * 1000 * MS;

	snprintf(id, idlen, "4bf92f3577b34da6a3ce929d0e0e473%d", j);
	memset(g, 0, 3 * sizeof(*g));
	for (int k = 0; k < 3; k++) {
		g[k].pid = g[k].tid = g[k].cpu = -1;
		g[k].category = CP_CAT_SPAN;
		g[k].service = "api";
		g[k].operation = "/checkout";
		g[k].span_id = "00f067aa0ba902b7";
		g[k].frames = fx_frames_root;
		g[k].nframes = 1;
	}
	g[0].start_ns = t0;
	g[0].end_ns = t0 + 2 * MS;
	g[1].start_ns = t0 + 2 * MS;
	g[1].end_ns = t0 + (8 + j) * MS;
	g[1].service = "db";
	g[1].operation = "query";
	g[1].span_id = "53995c3f42cd8ad8";
	g[1].frames = fx_frames_db;
	g[1].nframes = 2;
	g[2].start_ns = t0 + (8 + j) * MS;
	g[2].end_ns = t0 + 10 * MS;
	memset(st, 0, 2 * sizeof(*st));
	st[0] = (struct cp_span_stat){
	    "00f067aa0ba902b7", "api", "/checkout", fx_frames_root, 1, 10 * MS, (4 - j) * MS};
	st[1] = (struct cp_span_stat){"53995c3f42cd8ad8", "db",	       "query", fx_frames_db, 2,
				      (6 + j) * MS,	  (6 + j) * MS};
	memset(q, 0, sizeof(*q));
	q->id = id;
	q->service = "api";
	q->name = "/checkout";
	q->start_ns = t0;
	q->end_ns = t0 + 10 * MS;
	q->segs = g;
	q->nsegs = 3;
	q->spans = st;
	q->nspans = 2;
	q->tags = tags;
}

/* An engine holding the four kernel requests (spans false) or the two span
 * requests (spans true), and a warning. */
static inline struct engine *fx_engine(bool spans, const struct engine_opts *opts)
{
	struct engine_opts def = {.keep_all_requests = true};
	struct engine *e = engine__new(opts ? opts : &def);
	struct cp_segment g[6];
	struct cp_span_stat st[2];
	struct cp_culprit cul[1];
	struct cp_request q;
	char id[64];

	if (!e)
		return NULL;
	engine__set_quiet(e, true);
	for (int i = 0; i < (spans ? 2 : 4); i++) {
		if (spans)
			fx_span_request(i, &q, g, st, id, sizeof(id));
		else
			fx_kernel_request(i, &q, g, cul, id, sizeof(id));
		engine__add_request(e, &q);
	}
	engine__warn(e, "traces/a.json: trace 4bf9: span 00f0: negative duration, span dropped");
	return e;
}

/* --- golden files -------------------------------------------------------- */

/* tests/unit/golden/NAME, found from the test binary's location upwards. */
/* Two hosts (DESIGN.md "Several hosts"): a request of front whose path goes
 * into the store on host "store", the hosts' clocks told through the sink */
static inline struct engine *fx_two_hosts(void)
{
	static const char *const fr[] = {"nginx:80", "GET /x"};
	static const char *const frs[] = {"nginx:80", "GET /x", "store:9000@store get"};
	static struct cp_segment g[3];
	struct cp_request q = {.id = "1:2:3", .service = "nginx:80", .name = "GET /x",
			       .host = "front", .start_ns = 1000000, .segs = g, .nsegs = 3};
	struct engine *e = engine__new(&(struct engine_opts){.keep_slowest = 1});
	struct cp_sink sink = engine__sink(e);
	struct cp_host front = {.name = "front", .clock = "reference"};
	struct cp_host store = {.name = "store", .clock_offset_ns = 3014397,
				.uncertainty_ns = 60783, .matched_messages = 418,
				.clock = "messages"};

	sink.host(sink.ctx, &front);
	sink.host(sink.ctx, &store);
	for (int i = 0; i < 3; i++)
		g[i] = (struct cp_segment){.start_ns = 1000000 + i * 1000000ull,
					   .end_ns = 1000000 + (i + 1) * 1000000ull,
					   .category = CP_CAT_CPU, .frames = i == 1 ? frs : fr,
					   .nframes = i == 1 ? 3 : 2, .pid = i == 1 ? 50 : 5,
					   .tid = i == 1 ? 51 : 5, .cpu = 0,
					   .comm = i == 1 ? "python3" : "nginx",
					   .host = i == 1 ? "store" : "front"};
	q.end_ns = g[2].end_ns;
	assert_int_equal(engine__add_request(e, &q), 1);
	return e;
}

static inline int fx_golden_path(const char *name, char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -1;
	exe[n] = 0;
	for (char *slash = strrchr(exe, '/'); slash; slash = strrchr(exe, '/')) {
		*slash = 0;
		if ((size_t)snprintf(out, len, "%s/tests/unit/golden", exe) >= len)
			return -1;
		if (!access(out, F_OK))
			return (size_t)snprintf(out, len, "%s/tests/unit/golden/%s", exe, name) >=
				       len
				   ? -1
				   : 0;
	}
	return -1;
}

/* 0 when text equals the golden file (or it was rewritten on request). */
static inline int fx_golden_check(const char *name, const char *text, size_t len)
{
	char path[PATH_MAX], *want = NULL;
	size_t wlen = 0;
	FILE *f;
	int rc;

	if (fx_golden_path(name, path, sizeof(path))) {
		fprintf(stderr, "# golden dir tests/unit/golden not found above the binary\n");
		return -1;
	}
	if (getenv("CRITPATH_UPDATE_GOLDEN")) {
		f = fopen(path, "w");
		if (!f)
			return -1;
		fwrite(text, 1, len, f);
		return fclose(f) ? -1 : 0;
	}
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "# %s: missing (CRITPATH_UPDATE_GOLDEN=1 writes it)\n", path);
		return -1;
	}
	want = malloc(len + 2);
	if (want)
		wlen = fread(want, 1, len + 1, f);
	fclose(f);
	rc = want && wlen == len && !memcmp(want, text, len) ? 0 : -1;
	if (rc)
		fprintf(stderr, "# %s differs from the output:\n%.*s\n", path, (int)len, text);
	free(want);
	return rc;
}

#endif /* CRITPATH_ENGINE_FIXTURE_H */
