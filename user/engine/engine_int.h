/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Engine internals. One log-linear bucketing everywhere: a bucket each below
 * 64, then 64 per power of two (midpoints within 0.8%); arrays dense over the
 * buckets seen. */
#ifndef CRITPATH_ENGINE_INT_H
#define CRITPATH_ENGINE_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine.h"
#include "util.h"

#define BUCKET_SUB_BITS 6
#define BUCKET_SUB (1u << BUCKET_SUB_BITS)

/* Inline, as the barr__add fast path below: several per segment. */
static inline uint32_t bucket__of(uint64_t v)
{
	uint32_t e;

	if (v < BUCKET_SUB)
		return (uint32_t)v;
	e = 63 - (uint32_t)__builtin_clzll(v);
	return (e - BUCKET_SUB_BITS + 1) * BUCKET_SUB +
	       (uint32_t)((v >> (e - BUCKET_SUB_BITS)) & (BUCKET_SUB - 1));
}
uint64_t bucket__lo(uint32_t b);
uint64_t bucket__width(uint32_t b);
/* A value that stands for the bucket: its midpoint (exact for narrow ones). */
uint64_t bucket__mid(uint32_t b);

/* uint64 values indexed by bucket, dense over [lo, lo + n). */
struct barr {
	uint64_t *v;
	uint32_t lo, n;
};

/* Counts by bucket, the same way: a count is 32 bits (saturating), half the
 * memory of a step's histogram, which spans many empty buckets. Past 4G in
 * one bucket the quantiles lean to the high end. */
struct carr {
	uint32_t *v;
	uint32_t lo, n;
};

/* Makes room for bucket b (growing the range); 0 or -ENOMEM. */
int barr__reserve(struct barr *a, uint32_t b);
int carr__reserve(struct carr *a, uint32_t b);
/* Adds val at bucket b (growing the range); 0 or -ENOMEM. */
static inline int barr__add(struct barr *a, uint32_t b, uint64_t val)
{
	if (!(a->n && b >= a->lo && b - a->lo < a->n)) {
		int err = barr__reserve(a, b);

		if (err)
			return err;
	}
	a->v[b - a->lo] += val;
	return 0;
}
/* Counts one at bucket b. */
static inline int carr__inc(struct carr *a, uint32_t b)
{
	if (!(a->n && b >= a->lo && b - a->lo < a->n)) {
		int err = carr__reserve(a, b);

		if (err)
			return err;
	}
	a->v[b - a->lo] += a->v[b - a->lo] != UINT32_MAX;
	return 0;
}
/* Adds each of a merged histogram's counts at its bucket (saturating);
 * 0 or -ENOMEM. */
int carr__add_counts(struct carr *a, const struct engine_bucket *c, uint32_t n);
/* Keeps the maximum at bucket b. */
int barr__max(struct barr *a, uint32_t b, uint64_t val);
static inline uint64_t barr__get(const struct barr *a, uint32_t b)
{
	return b >= a->lo && b - a->lo < a->n ? a->v[b - a->lo] : 0;
}
static inline uint32_t carr__get(const struct carr *a, uint32_t b)
{
	return b >= a->lo && b - a->lo < a->n ? a->v[b - a->lo] : 0;
}
void barr__free(struct barr *a);
void carr__free(struct carr *a);

/* The q-quantile (nearest rank) of a histogram: the bucket's midpoint clipped
 * to [min, max]. */
uint64_t carr__quantile(const struct carr *counts, uint64_t count, uint64_t min, uint64_t max,
			double q);
/* The bucket holding the nearest-rank q-quantile of count values. */
uint32_t carr__quantile_bucket(const struct carr *counts, uint64_t count, double q);


struct cp_request;
/* A deep copy of req in one allocation, repeated strings from in; seg_frames
 * (if not NULL) replaces each segment's frames. */
struct cp_request *request__copy(const struct cp_request *req, struct intern *in,
				 const char *const *const *seg_frames);

/* The engine's state (engine/engine.c aggregates, engine/result.c reports). */
struct stack {
	const char *const *frames; /* interned */
	uint32_t nframes;
	enum cp_category category;
	uint64_t hash;
	uint64_t total_ns;
	uint32_t requests;
	uint64_t gen, cur_ns; /* the request being added */
	uint64_t min_ns, max_ns;
	double sumsq;	    /* of the step's ns per request: its variance (diff) */
	struct carr dist;   /* counts by bucket of the step's ns per request */
	struct barr by_lat; /* ns by bucket of the request's latency */
	uint32_t sku_first; /* its first struct sku_step, index + 1 (0: none) */
	uint64_t *few;	    /* its time in each request, while fewer than ENGINE_FEW */
};

struct sku_acc {
	uint64_t n, total, min, max;
	struct carr dist;
};

/* A cpu step on one SKU: the step's chain of these, by next. */
struct sku_step {
	const char *sku; /* interned */
	uint32_t stack;
	uint32_t next; /* index + 1, 0: the last */
	uint64_t gen, cur_ns;
	struct sku_acc acc;
};

/* All cpu steps of one kind of request (service, name) on one SKU. */
struct sku_kind {
	const char *service, *name, *sku; /* interned */
	uint64_t gen, cur_ns;
	struct sku_acc acc;
};

/* A SKU seen: the requests with cpu time on it. */
struct sku_seen {
	const char *sku;
	uint64_t gen, requests, cpu_ns;
};

struct culprit {
	int32_t pid, tid;
	const char *comm; /* interned */
	enum cp_category category;
	uint64_t hash;
	uint64_t ns;
	uint32_t requests;
	uint64_t gen;
};

/* A span call path: a node of the tree of paths, one level below its parent
 * node; memory per path does not grow with its depth. */
struct span_node {
	const char *label;		  /* its last frame, interned */
	const char *service, *operation;  /* interned, once a span ended here */
	uint32_t parent;		  /* index + 1, 0: a root level */
	uint32_t depth;			  /* frames from the root */
	uint32_t requests;
	uint64_t count, inclusive_ns, exclusive_ns;
	uint64_t gen;
};


#define WARN_KEEP 10000
#define WARN_PRINT 100
#define CACHE_SLOTS 16
#define MEMO_BITS 10

struct engine {
	uint64_t time_base; /* --from/--to "+DUR": 0 until known */
	struct engine_opts opts;
	struct intern *in;
	bool quiet;
	/* past opts.max_paths steps or span paths: new ones fold (engine__stack,
	 * engine__span_node) into ENGINE_OTHER, interned here */
	const char *other;
	bool folded; /* warned */
	const char **fold; /* scratch: a folded step's frames */
	uint32_t capfold;

	struct stack *stacks;
	uint32_t nstacks, capstacks;
	struct index stack_index;
	struct culprit *culprits;
	uint32_t nculprits, capculprits;
	struct index culprit_index;
	/* culprits met lately, by tid (comms interned: no hash needed) */
	struct {
		int32_t pid, tid;
		const char *comm;
		uint32_t category;
		uint32_t culprit; /* index + 1, 0 = empty */
	} blame_cache[CACHE_SLOTS * 4];
	struct span_node *spans;
	uint32_t nspans, capspans;
	struct index span_index;
	uint32_t *snode; /* the request's span stats' nodes */
	uint32_t capsnode;
	/* the last lookup above a path's last level (engine__span_ahead) */
	uint32_t span_ahead_from, span_ahead_to;
	const char *span_ahead_label;
	/* a path's last frame to its service and operation, interned once a
	 * label, not once a path */
	struct u64map label_so;
	struct {
		const char *service, *operation;
	} *so;
	uint32_t nso, capso;

	uint64_t gen;
	bool interned; /* the request being added has cp_request.interned */
	uint32_t *touched;
	uint32_t ntouched, captouched;
	const char *const **seg_frames; /* the request's segments' interned stacks */
	uint32_t capseg_frames;
	struct {
		const void *frames;
		uint32_t nframes, category;
		uint64_t gen;
		uint32_t stack;
	} cache[CACHE_SLOTS];
	/* a request's frame strings interned once per request, not per use */
	struct {
		const char *from, *to;
		uint64_t gen;
	} memo[1u << MEMO_BITS];
	const char **gkeys; /* the same for its segments */
	uint64_t *ghash;
	uint32_t capgkeys, capghash;

	uint64_t nrequests, nfiltered, total_latency, max_latency;
	uint64_t ndownstream; /* of nrequests, served to traced callers */
	struct carr lat_counts;
	struct barr lat_max;

	struct cp_request **kept; /* keep_all: in arrival order; slowest: a min-heap */
	uint32_t nkept, capkept;

	char **warnings;
	uint32_t nwarnings, capwarnings;
	struct cp_host *hosts; /* what the sink was told of them */
	uint32_t nhosts, caphosts;
	uint64_t warnings_dropped;
	char *dropped_note;

	/* CPU time by SKU (engine/sku.c); sku_touched: the request's steps */
	struct sku_step *sku_steps;
	uint32_t nsku_steps, capsku_steps;
	struct sku_kind *sku_kinds;
	uint32_t nsku_kinds, capsku_kinds;
	struct index sku_kind_index;
	uint32_t sku_kind_last; /* the kind found last, index + 1 */
	struct sku_seen *sku_seen;
	uint32_t nsku_seen, capsku_seen, sku_seen_last;
	uint32_t *sku_touched;
	uint32_t nsku_touched, capsku_touched;
	uint32_t *sku_kinds_touched;
	uint32_t nsku_kinds_touched, capsku_kinds_touched;
	/* until a second SKU appears, a cpu step's own totals are the one
	 * SKU's; the second seeds sku_steps */
	const char *sku_only;
	uint64_t sku_cur, sku_cur_gen;
	bool sku_multi;

	struct engine_result res;
	struct engine_profile_entry *res_profile;
	struct engine_contention *res_contention;
	struct engine_span_entry *res_spans;
	const char **res_span_frames; /* the frames of the rows writers read */
	const char **res_warnings;
	const struct cp_request **res_requests;
	uint32_t *res_hist;
	struct engine_sku *res_skus;
	struct engine_sku_stat *res_sku_stats;
	struct engine_sku_step *res_sku_steps;
	const char **res_sku_frames; /* request kinds' service and name */
};

void engine__free_result(struct engine *e);

/* The span path node below parent (index + 1, 0: none) with label; the
 * node's index + 1, 0 if there is none. */
uint32_t engine__span_child(struct engine *e, uint32_t parent, const char *label);

/* The engine's arrays, from 64. */
int engine__grow(void **arr, uint32_t *cap, uint32_t need, size_t elem);

/* The SKU of a cpu segment: its recording's label, else its CPU's model */
static inline const char *sku__key(const struct cp_segment *g)
{
	return g->sku ? g->sku : g->cpu_model;
}

/* The stack of frames and category (input aggregated elsewhere), made on
 * first sight; its index or -ENOMEM. */
int64_t engine__stack_of(struct engine *e, const char *const *frames, uint32_t nframes,
			 enum cp_category category);

/* engine/sku.c: a cpu segment on its SKU, end-of-request sums, the result's
 * tables. 0 or -ENOMEM. */
int engine__sku_segment(struct engine *e, const struct cp_request *req, uint32_t seg,
			uint32_t stack, uint64_t d);
int engine__sku_flush(struct engine *e, const struct cp_request *req);
int engine__sku_result(struct engine *e);
void engine__sku_free_result(struct engine *e);
void engine__sku_free(struct engine *e);

#endif /* CRITPATH_ENGINE_INT_H */
