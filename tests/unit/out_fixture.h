/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * A hand-built engine result for the output-writer tests (pprof, html,
 * perfetto): what the engine would hand over after aggregating ten kernel
 * requests of a "web" service, plus one span-level trace. Numbers are chosen
 * so totals are easy to check: 100 ms of critical path over 10 requests.
 */
#ifndef CRITPATH_TEST_OUT_FIXTURE_H
#define CRITPATH_TEST_OUT_FIXTURE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "model.h"

#define MS 1000000ull
#define FX_BASE 5000000000ull		    /* kernel requests: CLOCK_MONOTONIC ns */
#define FX_SPAN_BASE 1700000000000000000ull /* span requests: Unix-epoch ns */
/* A step name that must be escaped in HTML and JSON */
#define FX_NASTY "GET /q?a=\"1\"&b=</script><b>x"

static const char *const fx_fr_api[] = {"web", "GET /api"};
static const char *const fx_fr_kv[] = {"web", "GET /api", "kvstore", "get"};
static const char *const fx_fr_nasty[] = {"web", FX_NASTY};
static const char *const fx_fr_front[] = {
    "frontend GET /",
};
static const char *const fx_fr_back[] = {"frontend GET /", "backend query"};

static const struct engine_profile_entry fx_profile[] = {
    {fx_fr_kv,
     4,
     CP_CAT_NETWORK,
     40 * MS,
     10,
     {15 * MS, 30 * MS, 36 * MS},
     3 * MS,
     5 * MS,
     8 * MS,
     9 * MS},
    {fx_fr_api,
     2,
     CP_CAT_CPU,
     30 * MS,
     10,
     {12 * MS, 24 * MS, 27 * MS},
     3 * MS,
     4 * MS,
     5 * MS,
     5 * MS},
    {fx_fr_api,
     2,
     CP_CAT_LOCK,
     15 * MS,
     6,
     {2 * MS, 10 * MS, 13 * MS},
     2 * MS,
     5 * MS,
     6 * MS,
     6 * MS},
    {fx_fr_api,
     2,
     CP_CAT_RUNQUEUE,
     10 * MS,
     8,
     {4 * MS, 8 * MS, 9 * MS},
     1 * MS,
     2 * MS,
     3 * MS,
     3 * MS},
    {fx_fr_nasty, 2, CP_CAT_CPU, 5 * MS, 2, {0, 2 * MS, 4 * MS}, 2 * MS, 3 * MS, 3 * MS, 3 * MS},
};

static const struct engine_contention fx_contention[] = {
    {1234, 1240, "cache-maint", CP_CAT_LOCK, 15 * MS, 6},
    {999, 999, "hog", CP_CAT_RUNQUEUE, 10 * MS, 8},
};

static const struct cp_culprit fx_cul_hog[] = {{999, 999, "hog", 2 * MS}};
static const struct cp_culprit fx_cul_maint[] = {{1234, 1240, "cache-maint", 5 * MS}};

#define FX_KSEG(s, e, cat, fr, pid_, tid_, comm_, cpu_)                                            \
	.start_ns = FX_BASE + (s), .end_ns = FX_BASE + (e), .category = (cat), .frames = (fr),     \
	.nframes = sizeof(fr) / sizeof((fr)[0]), .pid = (pid_), .tid = (tid_), .comm = (comm_),    \
	.cpu = (cpu_)

/* The slowest request: acceptor → worker (run-queue wait, lock, downstream
 * call into the traced kvstore) → writer thread. */
static const struct cp_segment fx_segs1[] = {
    {FX_KSEG(0, 2 * MS, CP_CAT_CPU, fx_fr_api, 1234, 1235, "web-accept", 0)},
    {FX_KSEG(2 * MS, 4 * MS, CP_CAT_RUNQUEUE, fx_fr_api, 1234, 1236, "web-worker", 1),
     .culprits = fx_cul_hog, .nculprits = 1, .interference = true},
    {FX_KSEG(4 * MS, 9 * MS, CP_CAT_LOCK, fx_fr_api, 1234, 1236, "web-worker", -1),
     .culprits = fx_cul_maint, .nculprits = 1, .interference = true},
    {FX_KSEG(9 * MS, 10 * MS, CP_CAT_NETWORK, fx_fr_kv, 1234, 1236, "web-worker", -1),
     .peer = "127.0.0.1:7000"},
    {FX_KSEG(10 * MS, 13 * MS, CP_CAT_CPU, fx_fr_kv, 2000, 2000, "kvstore", 1)},
    {FX_KSEG(13 * MS, 14 * MS, CP_CAT_NETWORK, fx_fr_kv, 1234, 1236, "web-worker", -1),
     .peer = "127.0.0.1:7000"},
    {FX_KSEG(14 * MS, 16 * MS, CP_CAT_CPU, fx_fr_api, 1234, 1237, "web-writer", 0)},
};

/* Overlaps the first one in time on the same worker thread: the perfetto
 * writer must not stack them on one track. */
static const struct cp_segment fx_segs2[] = {
    {FX_KSEG(3 * MS, 5 * MS, CP_CAT_CPU, fx_fr_api, 1234, 1235, "web-accept", 1)},
    {FX_KSEG(5 * MS, 8 * MS, CP_CAT_CPU, fx_fr_nasty, 1234, 1236, "web-worker", 1)},
};

#define FX_SSEG(s, e, fr, sid, svc, op)                                                            \
	.start_ns = FX_SPAN_BASE + (s), .end_ns = FX_SPAN_BASE + (e), .category = CP_CAT_SPAN,     \
	.frames = (fr), .nframes = sizeof(fr) / sizeof((fr)[0]), .pid = -1, .tid = -1, .cpu = -1,  \
	.span_id = (sid), .service = (svc), .operation = (op)

static const struct cp_segment fx_segs3[] = {
    {FX_SSEG(0, 1 * MS, fx_fr_front, "00a1", "frontend", "GET /")},
    {FX_SSEG(1 * MS, 5 * MS, fx_fr_back, "00b2", "backend", "query")},
    {FX_SSEG(5 * MS, 6 * MS, fx_fr_front, "00a1", "frontend", "GET /")},
};

static const struct cp_request fx_req[] = {
    {"1234:5:1", "web", "GET /api", "host1", FX_BASE, FX_BASE + 16 * MS, false, fx_segs1, 7},
    {"1234:6:1", "web", FX_NASTY, "host1", FX_BASE + 3 * MS, FX_BASE + 8 * MS, true, fx_segs2, 2},
    {"4bf92f3577b34da6", "frontend", "GET /", "host2", FX_SPAN_BASE, FX_SPAN_BASE + 6 * MS, false,
     fx_segs3, 3},
};

static const struct cp_request *const fx_reqp[] = {&fx_req[0], &fx_req[1], &fx_req[2]};
static const char *const fx_warnings[] = {"traces/a.json: trace 00ff: span 0001: orphan"};

/* CPU time by SKU: web's cpu step, 1.5 times slower on c7 than on m5 */
static const struct engine_sku fx_skus[] = {{"m5", 6, 12 * MS}, {"c7", 4, 12 * MS}};
static const struct engine_sku_stat fx_sku_stats[] = {
    {"m5", 6, 12 * MS, 2 * MS, MS / 10, 2 * MS, 1, 1, 1, ENGINE_SKU_BASELINE},
    {"c7", 4, 12 * MS, 3 * MS, MS / 10, 3 * MS, 1.5, 1.42, 1.58, ENGINE_SKU_SLOWER},
};
static const struct engine_sku_step fx_sku_steps[] = {
    {fx_fr_api, 2, false, 24 * MS, fx_sku_stats, 2, true},
};

static const struct engine_result fx_result = {
    .nrequests = 10,
    .total_latency_ns = 100 * MS,
    .latency_pct_ns = {9 * MS, 15 * MS, 16 * MS},
    .pct_nrequests = {5, 9, 10},
    .max_latency_ns = 16 * MS,
    .profile = fx_profile,
    .nprofile = sizeof(fx_profile) / sizeof(fx_profile[0]),
    .contention = fx_contention,
    .ncontention = 2,
    .requests = fx_reqp,
    .nkept = 3,
    .warnings = fx_warnings,
    .nwarnings = 1,
    .skus = fx_skus,
    .nskus = 2,
    .sku_steps = fx_sku_steps,
    .nsku_steps = 1,
};

/* A private temporary directory (removed with fx_rmtree). */
static inline char *fx_tmpdir(void)
{
	char tmpl[] = "/tmp/critpath-out.XXXXXX";
	char *d = mkdtemp(tmpl);

	return d ? strdup(d) : NULL;
}

static inline void fx_rmtree(const char *dir)
{
	char cmd[512];

	if (!dir || strncmp(dir, "/tmp/critpath-out.", 18))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "# could not remove %s\n", dir);
}

/* Runs cmd through sh, returns its stdout (malloc'd, NUL-terminated) and
 * puts its exit status in *status. */
static inline char *fx_run(const char *cmd, int *status)
{
	size_t len = 0, cap = 65536, n;
	char *out = malloc(cap);
	FILE *p;
	int st;

	*status = -1;
	if (!out)
		return NULL;
	p = popen(cmd, "r");
	if (!p) {
		free(out);
		return NULL;
	}
	while ((n = fread(out + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 4096) {
			char *o = realloc(out, cap * 2);

			if (!o)
				break;
			out = o;
			cap *= 2;
		}
	}
	out[len] = 0;
	st = pclose(p);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

static inline int fx_have(const char *prog)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
	return system(cmd) == 0;
}

#endif /* CRITPATH_TEST_OUT_FIXTURE_H */
