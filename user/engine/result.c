// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The engine's result, computed once at the end: sorted tables of struct
 * engine_result. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_int.h"

void engine__free_result(struct engine *e)
{
	free(e->res_profile);
	free(e->res_contention);
	free(e->res_spans);
	free(e->res_span_frames);
	free(e->res_warnings);
	free(e->res_requests);
	free(e->res_hist);
	free(e->dropped_note);
	engine__sku_free_result(e);
	e->res_hist = NULL;
	e->res_profile = NULL;
	e->res_contention = NULL;
	e->res_spans = NULL;
	e->res_span_frames = NULL;
	e->res_warnings = NULL;
	e->res_requests = NULL;
	e->dropped_note = NULL;
}

static int frames_cmp(const char *const *a, uint32_t na, const char *const *b, uint32_t nb)
{
	for (uint32_t i = 0; i < na && i < nb; i++) {
		/* frames are interned: the same string is the same pointer
		 * (paths share their upper levels) */
		int c = a[i] == b[i] ? 0 : strcmp(a[i], b[i]);

		if (c)
			return c;
	}
	return na < nb ? -1 : na > nb ? 1 : 0;
}

static int profile_cmp(const void *pa, const void *pb)
{
	const struct engine_profile_entry *a = pa, *b = pb;

	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	if (a->category != b->category)
		return a->category < b->category ? -1 : 1;
	return frames_cmp(a->frames, a->nframes, b->frames, b->nframes);
}

static int contention_cmp(const void *pa, const void *pb)
{
	const struct engine_contention *a = pa, *b = pb;

	if (a->ns != b->ns)
		return a->ns > b->ns ? -1 : 1;
	if (a->category != b->category)
		return a->category < b->category ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return strcmp(a->comm ? a->comm : "", b->comm ? b->comm : "");
}

/* Span paths are sorted as node ids (index + 1): the paths live in the
 * tree, and sort_first's comparisons take no context but this. */
static __thread const struct span_node *span_cmp_nodes;

/* Nodes a and b's paths compared frame by frame, as frames_cmp. */
static int path_cmp(const struct span_node *nodes, uint32_t a, uint32_t b)
{
	uint32_t da = nodes[a - 1].depth, db = nodes[b - 1].depth, x = a, y = b, d;

	for (d = da; d > db; d--)
		x = nodes[x - 1].parent;
	for (d = db; d > da; d--)
		y = nodes[y - 1].parent;
	if (x == y || !d)
		return da < db ? -1 : da > db ? 1 : 0;
	while (nodes[x - 1].parent != nodes[y - 1].parent) {
		x = nodes[x - 1].parent;
		y = nodes[y - 1].parent;
	}
	/* siblings: their labels differ */
	return strcmp(nodes[x - 1].label, nodes[y - 1].label);
}

static int span_cmp(const void *pa, const void *pb)
{
	uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;
	const struct span_node *a = &span_cmp_nodes[x - 1], *b = &span_cmp_nodes[y - 1];

	if (a->exclusive_ns != b->exclusive_ns)
		return a->exclusive_ns > b->exclusive_ns ? -1 : 1;
	if (a->inclusive_ns != b->inclusive_ns)
		return a->inclusive_ns > b->inclusive_ns ? -1 : 1;
	return path_cmp(span_cmp_nodes, x, y);
}

static int start_cmp(const void *pa, const void *pb)
{
	const struct cp_request *a = *(const struct cp_request *const *)pa;
	const struct cp_request *b = *(const struct cp_request *const *)pb;

	if (a->start_ns != b->start_ns)
		return a->start_ns < b->start_ns ? -1 : 1;
	return strcmp(a->id ? a->id : "", b->id ? b->id : "");
}

static void swap_elems(char *a, char *b, size_t size, char *t)
{
	memcpy(t, a, size);
	memcpy(a, b, size);
	memcpy(b, t, size);
}

/* Sifts base[i] down a heap whose root is the element that sorts last. */
static void sift_down(char *base, size_t n, size_t size, size_t i, char *tmp,
		      int (*cmp)(const void *, const void *))
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < n && cmp(base + l * size, base + m * size) > 0)
			m = l;
		if (l + 1 < n && cmp(base + (l + 1) * size, base + m * size) > 0)
			m = l + 1;
		if (m == i)
			return;
		swap_elems(base + i * size, base + m * size, size, tmp);
		i = m;
	}
}

/* qsort, or with 0 < k < n the first k in order and the rest unordered (a heap
 * of the best k). */
static void sort_first(void *base, size_t n, size_t size, size_t k,
		       int (*cmp)(const void *, const void *))
{
	char *b = base, *tmp = k && k < n / 4 ? malloc(size) : NULL;

	if (!tmp) {
		qsort(base, n, size, cmp);
		return;
	}
	for (size_t i = k / 2; i-- > 0;)
		sift_down(b, k, size, i, tmp, cmp);
	for (size_t i = k; i < n; i++)
		if (cmp(b + i * size, b) < 0) {
			swap_elems(b + i * size, b, size, tmp);
			sift_down(b, k, size, 0, tmp, cmp);
		}
	free(tmp);
	qsort(base, k, size, cmp);
}

static void engine__percentiles(struct engine *e, uint32_t pb[ENGINE_NPCT])
{
	struct engine_result *r = &e->res;

	for (int p = 0; p < ENGINE_NPCT; p++) {
		uint64_t cum = 0;

		pb[p] = carr__quantile_bucket(&e->lat_counts, e->nrequests, engine_pct[p]);
		for (uint32_t b = e->lat_counts.lo; e->nrequests && b <= pb[p]; b++)
			cum += carr__get(&e->lat_counts, b);
		r->pct_nrequests[p] = cum;
		r->latency_pct_ns[p] = e->nrequests ? barr__get(&e->lat_max, pb[p]) : 0;
	}
}

/* log2 of the values in fine bucket b (fine buckets never straddle a power
 * of two); 0 and 1 share the first */
static uint32_t bucket_log2(uint32_t b)
{
	uint64_t lo = bucket__lo(b);

	return lo < 2 ? 0 : 63 - __builtin_clzll(lo);
}

/* The step's fine histogram folded into power-of-two buckets, in *pool. */
static void stack__hist(const struct stack *s, uint32_t **pool, struct engine_profile_entry *p)
{
	uint32_t first = UINT32_MAX, last = 0;

	for (uint32_t i = 0; i < s->dist.n; i++) {
		if (!s->dist.v[i])
			continue;
		if (first == UINT32_MAX)
			first = bucket_log2(s->dist.lo + i);
		last = bucket_log2(s->dist.lo + i);
	}
	if (first == UINT32_MAX)
		return;
	p->hist = *pool;
	p->nhist = last - first + 1;
	p->hist_log2 = first;
	for (uint32_t i = 0; i < s->dist.n; i++)
		if (s->dist.v[i])
			(*pool)[bucket_log2(s->dist.lo + i) - first] += (uint32_t)s->dist.v[i];
	*pool += p->nhist;
}

static void stack__fill(const struct stack *s, const uint32_t pb[ENGINE_NPCT], bool any,
			uint64_t nreq, struct engine_profile_entry *p)
{
	p->frames = s->frames;
	p->nframes = s->nframes;
	p->category = s->category;
	p->total_ns = s->total_ns;
	p->requests = s->requests;
	p->samples_ns = nreq < ENGINE_FEW ? s->few : NULL;
	if (nreq > 1) {
		double mean = (double)s->total_ns / (double)nreq;
		double var = (s->sumsq - (double)nreq * mean * mean) / (double)(nreq - 1);

		p->sd_ns = var > 0 ? sqrt(var) : 0;
	}
	for (int k = 0; k < ENGINE_NPCT; k++) {
		uint64_t t = 0;

		for (uint32_t b = s->by_lat.lo; any && b < s->by_lat.lo + s->by_lat.n && b <= pb[k];
		     b++)
			t += s->by_lat.v[b - s->by_lat.lo];
		p->pct_total_ns[k] = t;
	}
	p->q50_ns = carr__quantile(&s->dist, s->requests, s->min_ns, s->max_ns, 0.50);
	p->q90_ns = carr__quantile(&s->dist, s->requests, s->min_ns, s->max_ns, 0.90);
	p->q99_ns = carr__quantile(&s->dist, s->requests, s->min_ns, s->max_ns, 0.99);
	p->max_ns = s->max_ns;
}

/* The node of a span step's stack (index + 1, 0: none). */
static uint32_t span__of_stack(struct engine *e, const struct engine_profile_entry *p)
{
	uint32_t node = p->nframes ? 0 : engine__span_child(e, 0, NULL);

	for (uint32_t i = 0; i < p->nframes && (node || !i); i++)
		node = engine__span_child(e, node, p->frames[i]);
	return node;
}

/* The span rows writers read into e->res_spans, sorted: all, or the first
 * sorted_top; after them the rows the profile's first rows point to. Their
 * frames from the tree. The rows sorted, 0 without memory; *npaths: all. */
static uint32_t span__result(struct engine *e, uint32_t np, uint32_t *npaths)
{
	uint32_t m = 0, k, kp, nrows, *ids = malloc((e->nspans + 1) * sizeof(*ids)), *pos = NULL;
	size_t nfr = 0;
	const char **fr;

	*npaths = 0;
	if (!ids)
		return 0;
	for (uint32_t i = 0; i < e->nspans; i++)
		if (e->spans[i].count) /* else a level only longer paths have */
			ids[m++] = i + 1;
	*npaths = m;
	span_cmp_nodes = e->spans;
	sort_first(ids, m, sizeof(*ids), e->opts.sorted_top, span_cmp);
	k = e->opts.sorted_top && e->opts.sorted_top < m ? e->opts.sorted_top : m;
	kp = e->opts.sorted_top && e->opts.sorted_top < np ? e->opts.sorted_top : np;
	pos = malloc((e->nspans + 1) * sizeof(*pos));
	e->res_spans = calloc(k + kp + 1, sizeof(*e->res_spans));
	if (!pos || !e->res_spans)
		goto fail;
	memset(pos, 0xff, (e->nspans + 1) * sizeof(*pos));
	for (uint32_t i = 0; i < k; i++)
		pos[ids[i] - 1] = i;
	nrows = k;
	for (uint32_t i = 0; i < kp; i++) {
		struct engine_profile_entry *p = &e->res_profile[i];
		uint32_t node = p->category == CP_CAT_SPAN ? span__of_stack(e, p) : 0;

		if (!node || !e->spans[node - 1].count)
			continue;
		if (pos[node - 1] == UINT32_MAX) {
			pos[node - 1] = nrows;
			ids[nrows++] = node; /* ids past k are no longer needed */
		}
		p->span = &e->res_spans[pos[node - 1]];
	}
	for (uint32_t i = 0; i < nrows; i++)
		nfr += e->spans[ids[i] - 1].depth;
	e->res_span_frames = fr = malloc((nfr + 1) * sizeof(*fr));
	if (!fr)
		goto fail;
	for (uint32_t i = 0; i < nrows; i++) {
		const struct span_node *s = &e->spans[ids[i] - 1];
		uint32_t d = s->depth;

		for (uint32_t x = ids[i]; d; x = e->spans[x - 1].parent)
			fr[--d] = e->spans[x - 1].label;
		e->res_spans[i] = (struct engine_span_entry){
		    fr, s->depth, s->service, s->operation,
		    s->count, s->requests, s->inclusive_ns, s->exclusive_ns,
		};
		fr += s->depth;
	}
	free(pos);
	free(ids);
	return k;
fail:
	for (uint32_t i = 0; i < kp; i++)
		e->res_profile[i].span = NULL;
	free(pos);
	free(ids);
	*npaths = 0;
	return 0;
}

const struct engine_result *engine__result(struct engine *e)
{
	struct engine_result *r = &e->res;
	uint32_t pb[ENGINE_NPCT], nw, np = 0, nspans;

	engine__free_result(e);
	memset(r, 0, sizeof(*r));
	r->nrequests = e->nrequests;
	r->ndownstream = e->ndownstream;
	r->nfiltered = e->nfiltered;
	r->total_latency_ns = e->total_latency;
	r->max_latency_ns = e->max_latency;
	engine__percentiles(e, pb);

	e->res_profile = calloc(e->nstacks + 1, sizeof(*e->res_profile));
	e->res_contention = calloc(e->nculprits + 1, sizeof(*e->res_contention));
	e->res_requests = calloc(e->nkept + 1, sizeof(*e->res_requests));
	e->res_warnings = calloc(e->nwarnings + 2, sizeof(*e->res_warnings));
	if (!e->res_profile || !e->res_contention || !e->res_requests ||
	    !e->res_warnings) {
		engine__free_result(e);
		return r; /* the totals at least */
	}
	/* 64 power-of-two buckets cover any uint64 */
	e->res_hist = calloc((size_t)e->nstacks * 64 + 1, sizeof(*e->res_hist));
	if (!e->res_hist) {
		engine__free_result(e);
		return r;
	}
	/* stacks only requests served to traced callers had are not the
	 * profile's (engine__frames) */
	for (uint32_t i = 0, *pool = e->res_hist; i < e->nstacks; i++) {
		if (!e->stacks[i].requests)
			continue;
		stack__fill(&e->stacks[i], pb, e->nrequests > 0, e->nrequests, &e->res_profile[np]);
		stack__hist(&e->stacks[i], &pool, &e->res_profile[np]);
		np++;
	}
	sort_first(e->res_profile, np, sizeof(*e->res_profile), e->opts.sorted_top, profile_cmp);
	for (uint32_t i = 0; i < e->nculprits; i++) {
		const struct culprit *c = &e->culprits[i];

		e->res_contention[i] = (struct engine_contention){c->pid,      c->tid, c->comm,
								  c->category, c->ns,  c->requests};
	}
	sort_first(e->res_contention, e->nculprits, sizeof(*e->res_contention), e->opts.sorted_top,
		   contention_cmp);
	nspans = span__result(e, np, &r->nspan_paths);
	if (e->nkept) {
		memcpy(e->res_requests, e->kept, e->nkept * sizeof(*e->kept));
		qsort(e->res_requests, e->nkept, sizeof(*e->res_requests), start_cmp);
	}
	nw = e->nwarnings;
	if (nw)
		memcpy(e->res_warnings, e->warnings, nw * sizeof(char *));
	if (e->warnings_dropped && asprintf(&e->dropped_note, "%llu more warnings not kept",
					    (unsigned long long)e->warnings_dropped) >= 0)
		e->res_warnings[nw++] = e->dropped_note;

	r->profile = e->res_profile;
	r->nprofile = np;
	r->contention = e->res_contention;
	r->ncontention = e->nculprits;
	r->spans = e->res_spans;
	r->nspans = nspans;
	r->requests = e->res_requests;
	r->nkept = e->nkept;
	r->warnings = e->res_warnings;
	r->nwarnings = nw;
	r->hosts = e->hosts;
	r->nhosts = e->nhosts;
	(void)engine__sku_result(e); /* on ENOMEM, no comparison by SKU */
	return r;
}
