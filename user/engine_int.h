/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Engine internals shared by user/engine*.c (not part of the engine API).
 *
 * Distributions use one log-linear bucketing everywhere (HDR-histogram
 * style): values below 64 have a bucket each; above, every power of two is
 * split into 64 equal buckets, so a bucket is at most 1/64 of its lower
 * bound wide. Reporting a bucket's midpoint is within 0.8% of any value in
 * it. Bucket arrays are dense over the range of buckets actually seen and
 * grow on demand, so a distribution costs a few KiB whatever the number of
 * values put into it.
 */
#ifndef CRITPATH_ENGINE_INT_H
#define CRITPATH_ENGINE_INT_H

#include <stddef.h>
#include <stdint.h>

#define BUCKET_SUB_BITS 6
#define BUCKET_SUB (1u << BUCKET_SUB_BITS)

uint32_t bucket__of(uint64_t v);
uint64_t bucket__lo(uint32_t b);
uint64_t bucket__width(uint32_t b);
/* A value that stands for the bucket: its midpoint (exact for narrow ones). */
uint64_t bucket__mid(uint32_t b);

/* uint64 values indexed by bucket, dense over [lo, lo + n). */
struct barr {
	uint64_t *v;
	uint32_t lo, n;
};

/* Adds val at bucket b (growing the range); 0 or -ENOMEM. */
int barr__add(struct barr *a, uint32_t b, uint64_t val);
/* Keeps the maximum at bucket b. */
int barr__max(struct barr *a, uint32_t b, uint64_t val);
static inline uint64_t barr__get(const struct barr *a, uint32_t b)
{
	return b >= a->lo && b - a->lo < a->n ? a->v[b - a->lo] : 0;
}
void barr__free(struct barr *a);

/* The q-quantile (nearest rank) of a histogram of count values within
 * [min, max]: the bucket's midpoint, clipped to [min, max]. */
uint64_t barr__quantile(const struct barr *counts, uint64_t count, uint64_t min, uint64_t max,
			double q);
/* The bucket holding the nearest-rank q-quantile of count values. */
uint32_t barr__quantile_bucket(const struct barr *counts, uint64_t count, double q);

/* Interned strings: equal contents give one pointer, valid until
 * intern__free. NULL stays NULL. */
struct intern;
struct intern *intern__new(void);
void intern__free(struct intern *in);
const char *intern__get(struct intern *in, const char *s);

uint64_t hash__str(uint64_t h, const char *s);
static inline uint64_t hash__u64(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

struct cp_request;
/* A deep copy of req in one allocation (free() releases it); strings that
 * repeat across requests (frames, comm, service, …) come from in. When
 * seg_frames is not NULL, segment i's frames become seg_frames[i] (arrays
 * that outlive the copy: the engine's interned stacks). */
struct cp_request *request__copy(const struct cp_request *req, struct intern *in,
				 const char *const *const *seg_frames);

#endif /* CRITPATH_ENGINE_INT_H */
