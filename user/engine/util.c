// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "model.h"


int engine__grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	return grow_array(arr, cap, need, elem, 64);
}

uint64_t bucket__lo(uint32_t b)
{
	uint32_t e, sub;

	if (b < BUCKET_SUB)
		return b;
	e = b / BUCKET_SUB + BUCKET_SUB_BITS - 1;
	sub = b % BUCKET_SUB;
	return (uint64_t)(BUCKET_SUB + sub) << (e - BUCKET_SUB_BITS);
}

uint64_t bucket__width(uint32_t b)
{
	if (b < BUCKET_SUB)
		return 1;
	return 1ull << (b / BUCKET_SUB - 1);
}

uint64_t bucket__mid(uint32_t b)
{
	return bucket__lo(b) + bucket__width(b) / 2;
}

/* Room for bucket b in a dense array of elem-byte values over [*lo, *lo + *n). */
static int arr_reserve(void **v, uint32_t *alo, uint32_t *an, uint32_t b, size_t elem)
{
	uint32_t lo, hi, n;
	char *nv;

	if (*an && b >= *alo && b - *alo < *an)
		return 0;
	if (!*an) {
		/* a little room around the first value: neighbours follow, and a
		 * step seen in few requests stays small */
		lo = b > 2 ? b - 2 : 0;
		hi = b + 6;
	} else {
		lo = b < *alo ? b : *alo;
		hi = b >= *alo + *an ? b + 1 : *alo + *an;
		/* grow by at least half again so repeated widening stays linear */
		n = hi - lo;
		if (b < *alo)
			lo = lo > n / 2 ? lo - n / 2 : 0;
		else
			hi += n / 2;
	}
	n = hi - lo;
	nv = calloc(n, elem);
	if (!nv)
		return -ENOMEM;
	if (*an)
		memcpy(nv + (size_t)(*alo - lo) * elem, *v, (size_t)*an * elem);
	free(*v);
	*v = nv;
	*alo = lo;
	*an = n;
	return 0;
}

int barr__reserve(struct barr *a, uint32_t b)
{
	return arr_reserve((void **)&a->v, &a->lo, &a->n, b, sizeof(*a->v));
}

int carr__reserve(struct carr *a, uint32_t b)
{
	return arr_reserve((void **)&a->v, &a->lo, &a->n, b, sizeof(*a->v));
}

int carr__add_counts(struct carr *a, const struct engine_bucket *c, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t t;

		if (carr__reserve(a, c[i].b))
			return -ENOMEM;
		t = a->v[c[i].b - a->lo] + c[i].v;
		a->v[c[i].b - a->lo] = t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
	}
	return 0;
}

int barr__max(struct barr *a, uint32_t b, uint64_t val)
{
	int err = barr__reserve(a, b);

	if (err)
		return err;
	if (a->v[b - a->lo] < val)
		a->v[b - a->lo] = val;
	return 0;
}

void barr__free(struct barr *a)
{
	free(a->v);
	a->v = NULL;
	a->lo = a->n = 0;
}

void carr__free(struct carr *a)
{
	free(a->v);
	a->v = NULL;
	a->lo = a->n = 0;
}

static uint64_t rank_of(uint64_t count, double q)
{
	uint64_t rank = (uint64_t)ceil(q * (double)count - 1e-9);

	if (rank < 1)
		rank = 1;
	if (rank > count)
		rank = count;
	return rank;
}

uint32_t carr__quantile_bucket(const struct carr *counts, uint64_t count, double q)
{
	uint64_t rank, cum = 0;

	if (!count || !counts->n)
		return 0;
	rank = rank_of(count, q);
	for (uint32_t i = 0; i < counts->n; i++) {
		cum += counts->v[i];
		if (cum >= rank)
			return counts->lo + i;
	}
	return counts->lo + counts->n - 1;
}

uint64_t carr__quantile(const struct carr *counts, uint64_t count, uint64_t min, uint64_t max,
			double q)
{
	uint64_t v;

	if (!count)
		return 0;
	v = bucket__mid(carr__quantile_bucket(counts, count, q));
	return v > max ? max : v < min ? min : v;
}



/* Deep copy in one block: request, arrays, then its unique strings. */
static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static size_t str_size(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

static char *copy_str(char **p, const char *s)
{
	char *d;
	size_t n;

	if (!s)
		return NULL;
	n = strlen(s) + 1;
	d = *p;
	memcpy(d, s, n);
	*p += n;
	return d;
}

static const char *const *copy_frames(char **p, const char *const *frames, uint32_t n,
				      struct intern *in, int *err)
{
	const char **d;

	if (!frames || !n)
		return NULL;
	d = (const char **)*p;
	*p += align8(n * sizeof(*d));
	for (uint32_t i = 0; i < n; i++) {
		d[i] = intern__get(in, frames[i]);
		if (frames[i] && !d[i])
			*err = -ENOMEM;
	}
	return d;
}

/* a pointer-keyed cache: a request repeats a handful of string pointers */
struct icache {
	struct intern *in;
	const char *src[8];
	const char *dst[8];
	int err;
};

static const char *icache__get(struct icache *c, const char *s)
{
	uint32_t j = (uint32_t)((uintptr_t)s >> 3) & 7;
	const char *d;

	if (!s)
		return NULL;
	if (c->src[j] == s)
		return c->dst[j];
	d = intern__get(c->in, s);
	if (!d) {
		c->err = -ENOMEM;
		return NULL;
	}
	c->src[j] = s;
	c->dst[j] = d;
	return d;
}

static size_t request__size(const struct cp_request *req, bool have_frames)
{
	size_t sz = align8(sizeof(*req));
	uint32_t ntags = 0;

	sz += align8(req->nsegs * sizeof(struct cp_segment));
	sz += align8(req->nspans * sizeof(struct cp_span_stat));
	for (uint32_t i = 0; i < req->nsegs; i++) {
		const struct cp_segment *g = &req->segs[i];

		sz += align8(g->nculprits * sizeof(struct cp_culprit));
		if (!have_frames)
			sz += align8(g->nframes * sizeof(char *));
		sz += str_size(g->span_id);
	}
	for (uint32_t i = 0; i < req->nspans; i++) {
		sz += align8(req->spans[i].nframes * sizeof(char *));
		sz += str_size(req->spans[i].span_id);
	}
	if (req->tags) {
		while (req->tags[ntags])
			ntags++;
		sz += align8((ntags + 1) * sizeof(char *));
	}
	sz += str_size(req->id);
	sz += str_size(req->target);
	return sz;
}

struct cp_request *request__copy(const struct cp_request *req, struct intern *in,
				 const char *const *const *seg_frames)
{
	size_t sz = request__size(req, seg_frames != NULL);
	struct icache ic = {.in = in};
	struct cp_request *d;
	struct cp_segment *segs = NULL;
	struct cp_span_stat *spans = NULL;
	char *p, *strs;
	int err = 0;

	d = malloc(sz);
	if (!d)
		return NULL;
	*d = *req;
	p = (char *)d + align8(sizeof(*d));
	if (req->nsegs) {
		segs = (struct cp_segment *)p;
		p += align8(req->nsegs * sizeof(*segs));
	}
	if (req->nspans) {
		spans = (struct cp_span_stat *)p;
		p += align8(req->nspans * sizeof(*spans));
	}
	for (uint32_t i = 0; i < req->nsegs; i++) {
		const struct cp_segment *g = &req->segs[i];
		struct cp_segment *s = &segs[i];

		*s = *g;
		s->culprits = NULL;
		if (g->nculprits) {
			struct cp_culprit *c = (struct cp_culprit *)p;

			p += align8(g->nculprits * sizeof(*c));
			for (uint32_t k = 0; k < g->nculprits; k++) {
				c[k] = g->culprits[k];
				c[k].comm = icache__get(&ic, g->culprits[k].comm);
			}
			s->culprits = c;
		}
		if (seg_frames)
			s->frames = seg_frames[i];
		else
			s->frames = copy_frames(&p, g->frames, g->nframes, in, &err);
		s->comm = icache__get(&ic, g->comm);
		s->cpu_model = icache__get(&ic, g->cpu_model);
		s->sku = icache__get(&ic, g->sku);
		s->peer = icache__get(&ic, g->peer);
		s->host = icache__get(&ic, g->host);
		s->service = icache__get(&ic, g->service);
		s->operation = icache__get(&ic, g->operation);
	}
	for (uint32_t i = 0; i < req->nspans; i++) {
		const struct cp_span_stat *g = &req->spans[i];

		spans[i] = *g;
		spans[i].frames = copy_frames(&p, g->frames, g->nframes, in, &err);
		spans[i].service = intern__get(in, g->service);
		spans[i].operation = intern__get(in, g->operation);
	}
	if (req->tags) {
		const char **t = (const char **)p;
		uint32_t n = 0;

		while (req->tags[n]) {
			t[n] = intern__get(in, req->tags[n]);
			if (!t[n])
				err = -ENOMEM;
			n++;
		}
		t[n] = NULL;
		p += align8((n + 1) * sizeof(char *));
		d->tags = t;
	}
	/* unique strings last: they need no alignment */
	strs = p;
	for (uint32_t i = 0; i < req->nsegs; i++)
		segs[i].span_id = copy_str(&strs, req->segs[i].span_id);
	for (uint32_t i = 0; i < req->nspans; i++)
		spans[i].span_id = copy_str(&strs, req->spans[i].span_id);
	d->id = copy_str(&strs, req->id);
	d->target = copy_str(&strs, req->target);
	d->wire = NULL;
	d->segs = segs;
	d->spans = spans;
	d->service = intern__get(in, req->service);
	d->name = intern__get(in, req->name);
	d->host = intern__get(in, req->host);
	if (err || ic.err || (req->service && !d->service) || (req->name && !d->name) ||
	    (req->host && !d->host)) {
		free(d);
		return NULL;
	}
	return d;
}
