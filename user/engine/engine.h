/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* The engine (DESIGN.md 6): critical paths in from any producer, aggregates out
 * to the writers. Memory grows with distinct frame stacks, not requests; whole
 * requests are kept only as engine_opts asks. */
#ifndef CRITPATH_ENGINE_H
#define CRITPATH_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"

#define ENGINE_NPCT 3	/* P50, P95, P99 */
/* Below this many requests each step's per-request times are kept (diff's
 * bootstrap). */
#define ENGINE_FEW 30
/* Distinct steps (frame stacks) and span call paths kept, by default: past
 * it a new one's time is counted under its longest beginning already kept,
 * then ENGINE_OTHER (names with ids in them would grow memory with the
 * input). */
#define ENGINE_MAX_PATHS 100000
#define ENGINE_OTHER "(other paths)"
extern const double engine_pct[ENGINE_NPCT];	/* 0.50, 0.95, 0.99 */

struct engine_filter {
	const char *service;		/* root service / request service, NULL = any */
	const char *name;		/* root operation / request name */
	uint64_t min_latency_ns, max_latency_ns;	/* 0 = unbounded */
	uint64_t from_ns, to_ns;	/* request start within, 0 = unbounded */
	/* from_ns / to_ns are Unix-epoch times, else on the input's own clock */
	bool from_realtime, to_realtime;
	/* from_ns / to_ns are offsets from the input's start */
	bool from_rel, to_rel;
	const char *host;
	const char *tag;		/* "key=value" on any span of the trace */
};

struct engine_opts {
	struct engine_filter filter;
	bool keep_all_requests;		/* json: every request with its path */
	uint32_t keep_slowest;		/* keep the N slowest requests (0 = none) */
	double overlap_tolerance;	/* span level: fraction of parent, default 0.01 */
	/* > 0: only the first N rows are ordered (text shows no more) */
	uint32_t sorted_top;
	uint32_t max_paths; /* 0: ENGINE_MAX_PATHS */
	/* every request that passes the filters, valid during the call (json
	 * streams them) */
	void (*on_request)(void *ctx, const struct cp_request *req);
	void *on_request_ctx;
};

struct engine;

/* Where --from/--to "+DUR" count from: the first recording's start. */
void engine__set_time_base(struct engine *e, uint64_t ns);
struct engine *engine__new(const struct engine_opts *opts);
/* What the engine was made with (a source that filters and keeps for it) */
const struct engine_opts *engine__opts(const struct engine *e);
void engine__free(struct engine *e);
/* Filters, then aggregates; copies what it keeps. 1 = taken, 0 = filtered out. */
int engine__add_request(struct engine *e, const struct cp_request *req);
const char *engine__intern(struct engine *e, const char *s);
/* A warning for the report; printed to stderr too unless quiet. */
void engine__warn(struct engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void engine__set_quiet(struct engine *e, bool quiet);
/* The engine as a producer's sink: requests to engine__add_request,
 * warnings to engine__warn, strings to engine__intern. */
struct cp_sink engine__sink(struct engine *e);

struct engine_profile_entry {
	const char *const *frames;	/* the stack, without the category */
	uint32_t nframes;
	enum cp_category category;
	uint64_t total_ns;		/* over all requests */
	uint32_t requests;		/* requests whose path has this stack */
	uint64_t pct_total_ns[ENGINE_NPCT];	/* over the requests at or below P50/P95/P99 */
	/* the step's own latency distribution (its time per request) */
	uint64_t q50_ns, q90_ns, q99_ns, max_ns;
	/* power-of-two histogram: hist[k] counts [2^(hist_log2 + k),
	 * 2^(hist_log2 + k + 1)) ns */
	const uint32_t *hist;
	uint32_t nhist;
	uint32_t hist_log2;
	double sd_ns;
	/* with fewer than ENGINE_FEW requests in all, its time in
	 * each request that had it (requests values): diff's bootstrap */
	const uint64_t *samples_ns;
	/* a span step's call path totals (NULL: none, or a row past
	 * engine_opts.sorted_top) */
	const struct engine_span_entry *span;
};

struct engine_contention {
	int32_t pid, tid;
	const char *comm;
	enum cp_category category;	/* CP_CAT_LOCK or CP_CAT_RUNQUEUE */
	uint64_t ns;
	uint32_t requests;
};

/* Span level: per call path (root service/operation down to the span), over
 * all requests that have span stats. */
struct engine_span_entry {
	const char *const *frames;	/* call path: "svc op", … */
	uint32_t nframes;
	const char *service;
	const char *operation;
	uint64_t count;			/* spans with this call path */
	uint32_t requests;		/* requests having at least one */
	uint64_t inclusive_ns;		/* sum of durations */
	uint64_t exclusive_ns;		/* sum of time on the critical path */
};

/* CPU time by SKU (DESIGN.md 5): a SKU is compared with the baseline by the
 * ratio of means and its 95% interval; SKU-sensitive when the interval lies
 * beyond ENGINE_SKU_MARGIN. */
#define ENGINE_SKU_MIN_REQUESTS 10	/* on each side, or no verdict */
#define ENGINE_SKU_MARGIN 1.10

enum engine_sku_verdict {
	ENGINE_SKU_BASELINE = 0,
	ENGINE_SKU_FEW,		/* fewer than ENGINE_SKU_MIN_REQUESTS here or in the baseline */
	ENGINE_SKU_SAME,	/* the interval lies within [1 / margin, margin] */
	ENGINE_SKU_UNCLEAR,	/* neither: more requests would tell */
	ENGINE_SKU_SLOWER,	/* SKU-sensitive */
	ENGINE_SKU_FASTER,	/* SKU-sensitive */
};

/* "baseline", "too few requests", "same", "unclear", "slower", "faster" */
const char *engine_sku_verdict_name(enum engine_sku_verdict v);

struct engine_sku_stat {
	const char *sku;
	uint32_t requests;		/* requests with time there on this SKU */
	uint64_t total_ns;
	uint64_t mean_ns, stddev_ns, q50_ns;	/* of a request's time there */
	double ratio, ci_low, ci_high;	/* mean / the baseline's mean, 95% CI */
	enum engine_sku_verdict verdict;
};

struct engine_sku_step {
	/* a cpu step's stack (without the category), or for a request kind's
	 * whole cpu time (whole): its service and name */
	const char *const *frames;
	uint32_t nframes;
	bool whole;			/* all cpu steps of requests of this kind */
	uint64_t total_ns;		/* on all SKUs */
	const struct engine_sku_stat *by_sku;	/* the baseline first, then by requests */
	uint32_t nby_sku;
	bool sensitive;			/* some SKU is slower or faster */
};

struct engine_sku {
	const char *sku;
	uint64_t requests;		/* requests with cpu time on it */
	uint64_t cpu_ns;		/* their critical-path cpu time on it */
};

struct engine_result {
	uint64_t nrequests;		/* aggregated (after filters) */
	/* served to traced callers, not aggregated: in their callers' paths
	 * (counted unless a service filter picks their tier) */
	uint64_t ndownstream;
	uint64_t total_latency_ns;
	uint64_t latency_pct_ns[ENGINE_NPCT];	/* end-to-end latency at P50/P95/P99 */
	uint64_t pct_nrequests[ENGINE_NPCT];	/* requests at or below each */
	uint64_t max_latency_ns;
	const struct engine_profile_entry *profile;	/* sorted by total_ns, descending */
	uint32_t nprofile;
	const struct engine_contention *contention;	/* sorted by ns, descending */
	uint32_t ncontention;
	const struct cp_request *const *requests;	/* kept requests, by start time */
	uint32_t nkept;
	const char *const *warnings;
	uint32_t nwarnings;
	/* span call paths, sorted by exclusive_ns, descending: all, or the
	 * first engine_opts.sorted_top of the nspan_paths there are */
	const struct engine_span_entry *spans;
	uint32_t nspans, nspan_paths;
	uint64_t nfiltered;		/* requests the filters left out */
	/* the SKUs seen (baseline first) and the cpu steps that ran on two or
	 * more */
	const struct engine_sku *skus;
	uint32_t nskus;
	const struct engine_sku_step *sku_steps;
	uint32_t nsku_steps;
	/* the hosts of kernel input, the reference first (JSON lists them
	 * always, text when there are two or more) */
	const struct cp_host *hosts;
	uint32_t nhosts;
};

/* --- input aggregated elsewhere (a store that aggregated in its database:
 * docs/store.md). The same sums engine__add_request keeps, so the result is
 * the one the requests themselves would give. Filters do not apply: the
 * source applied them. 0 or -ENOMEM. */
struct engine_bucket {
	uint32_t b;	/* the engine's log-linear bucket (engine__bucket) */
	uint64_t v;
};
uint32_t engine__bucket(uint64_t v);

struct engine_step_sums {
	const char *const *frames;
	uint32_t nframes;
	enum cp_category category;
	uint64_t requests, total_ns, min_ns, max_ns;	/* of its time per request */
	double sumsq;
	const struct engine_bucket *dist;	/* requests by bucket of its time */
	uint32_t ndist;
	const struct engine_bucket *by_lat;	/* its time by bucket of the latency */
	uint32_t nby_lat;
	const uint64_t *few;	/* its time in each request (under ENGINE_FEW in all) */
	uint32_t nfew;
};
int engine__merge_step(struct engine *e, const struct engine_step_sums *s);

struct engine_latency_sums {
	uint64_t nrequests, ndownstream, nfiltered, total_ns, max_ns;
	const struct engine_bucket *counts;	/* requests by bucket of latency */
	uint32_t ncounts;
	const struct engine_bucket *max;	/* the largest latency in each */
	uint32_t nmax;
};
int engine__merge_latency(struct engine *e, const struct engine_latency_sums *l);
int engine__merge_culprit(struct engine *e, int32_t pid, int32_t tid, const char *comm,
			  enum cp_category category, uint64_t ns, uint32_t requests);

/* A request's time per request in one place: n requests */
struct engine_acc_sums {
	uint64_t n, total_ns, min_ns, max_ns;
	const struct engine_bucket *dist;
	uint32_t ndist;
};
/* A cpu step's time on one SKU; all cpu time of one kind of request on one
 * SKU; the requests with cpu time on a SKU and that time. */
int engine__merge_sku_step(struct engine *e, const char *const *frames, uint32_t nframes,
			   const char *sku, const struct engine_acc_sums *a);
int engine__merge_sku_kind(struct engine *e, const char *service, const char *name,
			   const char *sku, const struct engine_acc_sums *a);
int engine__merge_sku_seen(struct engine *e, const char *sku, uint64_t requests, uint64_t cpu_ns);
/* A request shown whole (the slowest, or every one for json), not added to
 * the sums; on_request sees it. */
int engine__keep_request(struct engine *e, const struct cp_request *req);

/* Finishes aggregation; valid until engine__free. */
const struct engine_result *engine__result(struct engine *e);

struct out_opts {
	uint32_t top;		/* rows in text tables (default 20) */
	uint32_t requests;	/* --requests N: show the N slowest with full paths */
	const char *title;
};

/* Output writers, one file each (user/out/<fmt>.c). 0 or -errno. */
int out_text(FILE *f, const struct engine_result *r, const struct out_opts *o);
int out_json(FILE *f, const struct engine_result *r, const struct out_opts *o);
/* out_json in two halves so requests stream as they arrive; out_json__end
 * writes the rest and frees s. */
struct out_json_stream;
struct out_json_stream *out_json__begin(FILE *f);
void out_json__request(void *s, const struct cp_request *req);
int out_json__end(struct out_json_stream *s, const struct engine_result *r);
int out_folded(FILE *f, const struct engine_result *r, const struct out_opts *o);
int out_pprof(FILE *f, const struct engine_result *r, const struct out_opts *o);
int out_html(FILE *f, const struct engine_result *r, const struct out_opts *o);
int out_perfetto(FILE *f, const struct engine_result *r, const struct out_opts *o);

#endif /* CRITPATH_ENGINE_H */
