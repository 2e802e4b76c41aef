// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* CPU time by SKU (DESIGN.md 5): per cpu step and SKU, one request's time
 * there. Means from sums, variances from the distributions. A SKU is compared
 * with the baseline by r = m / m_base with a 95% delta-method interval on log
 * r: se² = s²/(n m²) + s_base²/(n_base m_base²). Slower/faster beyond
 * ENGINE_SKU_MARGIN, same within, else unclear. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_int.h"

#define SKU_Z95 1.959964

static const char *const verdict_names[] = {"baseline", "too few requests", "same",
					    "unclear",	"slower",	    "faster"};

const char *engine_sku_verdict_name(enum engine_sku_verdict v)
{
	return (unsigned)v < sizeof(verdict_names) / sizeof(verdict_names[0]) ? verdict_names[v]
									      : "?";
}

static int acc__add(struct sku_acc *a, uint64_t x)
{
	if (!a->n || x < a->min)
		a->min = x;
	if (x > a->max)
		a->max = x;
	a->n++;
	a->total += x;
	return carr__inc(&a->dist, bucket__of(x));
}

/* The SKU of a cpu segment (sku__key), interned. */
static const char *sku_of(struct engine *e, const struct cp_segment *g, bool interned)
{
	const char *k = sku__key(g);

	if (!k || interned)
		return k;
	return engine__intern(e, k);
}

/* The SKU seen, its entry (few: a search from the one used last). */
static struct sku_seen *seen_of(struct engine *e, const char *sku)
{
	struct sku_seen *t;
	uint32_t last = e->sku_seen_last;

	if (last < e->nsku_seen && e->sku_seen[last].sku == sku)
		return &e->sku_seen[last];
	for (uint32_t i = 0; i < e->nsku_seen; i++) {
		if (e->sku_seen[i].sku == sku) {
			e->sku_seen_last = i;
			return &e->sku_seen[i];
		}
	}
	if (engine__grow((void **)&e->sku_seen, &e->capsku_seen, e->nsku_seen + 1, sizeof(*t)))
		return NULL;
	t = &e->sku_seen[e->nsku_seen];
	memset(t, 0, sizeof(*t));
	t->sku = sku;
	e->sku_seen_last = e->nsku_seen++;
	return t;
}

struct kind_key {
	const struct engine *e;
	const char *service, *name, *sku;
};

static uint64_t kind_hash(const char *service, const char *name, const char *sku)
{
	return hash__u64(hash__u64(hash__u64(0x5c0, (uintptr_t)service), (uintptr_t)name),
			 (uintptr_t)sku);
}

static bool kind_eq(const void *ctx, uint32_t i)
{
	const struct kind_key *k = ctx;
	const struct sku_kind *t = &k->e->sku_kinds[i];

	return t->service == k->service && t->name == k->name && t->sku == k->sku;
}

static uint64_t kind_hash_of(const void *ctx, uint32_t i)
{
	const struct sku_kind *t = &((const struct engine *)ctx)->sku_kinds[i];

	return kind_hash(t->service, t->name, t->sku);
}

/* The request's kind on sku, marked as touched by this request. */
static struct sku_kind *kind_of(struct engine *e, const struct cp_request *req, const char *sku)
{
	struct kind_key k = {e, req->service, req->name, sku};
	struct sku_kind *t;
	uint32_t *slot;

	if (!req->interned) {
		k.service = engine__intern(e, req->service);
		k.name = engine__intern(e, req->name);
		if ((req->service && !k.service) || (req->name && !k.name))
			return NULL;
	}
	t = e->sku_kind_last ? &e->sku_kinds[e->sku_kind_last - 1] : NULL;
	if (t && t->service == k.service && t->name == k.name && t->sku == sku)
		goto found; /* requests of one kind come in runs */
	if (index__reserve_more(&e->sku_kind_index, e->nsku_kinds, 1, kind_hash_of, e))
		return NULL;
	slot = index__find(&e->sku_kind_index, kind_hash(k.service, k.name, sku), kind_eq, &k);
	if (!*slot) {
		if (engine__grow((void **)&e->sku_kinds, &e->capsku_kinds, e->nsku_kinds + 1,
				 sizeof(*t)))
			return NULL;
		t = &e->sku_kinds[e->nsku_kinds];
		memset(t, 0, sizeof(*t));
		t->service = k.service;
		t->name = k.name;
		t->sku = sku;
		*slot = ++e->nsku_kinds;
	}
	t = &e->sku_kinds[*slot - 1];
	e->sku_kind_last = *slot;
found:
	if (t->gen != e->gen) {
		if (engine__grow((void **)&e->sku_kinds_touched, &e->capsku_kinds_touched,
				 e->nsku_kinds_touched + 1, sizeof(*e->sku_kinds_touched)))
			return NULL;
		e->sku_kinds_touched[e->nsku_kinds_touched++] = (uint32_t)(t - e->sku_kinds);
		t->gen = e->gen;
		t->cur_ns = 0;
	}
	return t;
}

/* d more ns of the request's cpu time on sku (any step). */
static int seen_add(struct engine *e, const struct cp_request *req, const char *sku, uint64_t d)
{
	struct sku_seen *n = seen_of(e, sku);
	struct sku_kind *k = kind_of(e, req, sku);

	if (!n || !k)
		return -ENOMEM;
	if (n->gen != e->gen) {
		n->gen = e->gen;
		n->requests++;
	}
	n->cpu_ns += d;
	k->cur_ns += d;
	return 0;
}

static struct sku_step *step_of(struct engine *e, uint32_t stack, const char *sku)
{
	struct sku_step *s;

	for (uint32_t i = e->stacks[stack].sku_first; i; i = e->sku_steps[i - 1].next)
		if (e->sku_steps[i - 1].sku == sku)
			return &e->sku_steps[i - 1];
	if (engine__grow((void **)&e->sku_steps, &e->capsku_steps, e->nsku_steps + 1, sizeof(*s)))
		return NULL;
	s = &e->sku_steps[e->nsku_steps++];
	memset(s, 0, sizeof(*s));
	s->sku = sku;
	s->stack = stack;
	s->next = e->stacks[stack].sku_first;
	e->stacks[stack].sku_first = e->nsku_steps;
	return s;
}

/* d more ns of the request on sku in stack (after the split). */
static int sku_add(struct engine *e, const struct cp_request *req, uint32_t stack, const char *sku,
		   uint64_t d)
{
	struct sku_step *s;

	if (seen_add(e, req, sku, d))
		return -ENOMEM;
	s = step_of(e, stack, sku);
	if (!s)
		return -ENOMEM;
	if (s->gen != e->gen) {
		if (engine__grow((void **)&e->sku_touched, &e->capsku_touched, e->nsku_touched + 1,
				 sizeof(*e->sku_touched)))
			return -ENOMEM;
		e->sku_touched[e->nsku_touched++] = (uint32_t)(s - e->sku_steps);
		s->gen = e->gen;
		s->cur_ns = 0;
	}
	s->cur_ns += d;
	return 0;
}

static int acc__copy(struct sku_acc *a, const struct stack *s)
{
	a->n = s->requests;
	a->total = s->total_ns;
	a->min = s->min_ns;
	a->max = s->max_ns;
	if (!s->dist.n)
		return 0;
	a->dist.v = malloc(s->dist.n * sizeof(*a->dist.v));
	if (!a->dist.v)
		return -ENOMEM;
	memcpy(a->dist.v, s->dist.v, s->dist.n * sizeof(*a->dist.v));
	a->dist.lo = s->dist.lo;
	a->dist.n = s->dist.n;
	return 0;
}

/* A second SKU: the steps' totals become sku_only's, and the request being
 * added is redone SKU by SKU. */
static int engine__sku_split(struct engine *e, const struct cp_request *req, uint32_t seg)
{
	const char *only = e->sku_only;
	struct sku_seen *n = seen_of(e, only);

	e->sku_multi = true;
	for (uint32_t k = 0; k < e->nstacks; k++) {
		const struct stack *s = &e->stacks[k];
		struct sku_step *st;

		if (s->category != CP_CAT_CPU || !s->requests)
			continue;
		st = step_of(e, k, only);
		if (!st || acc__copy(&st->acc, s))
			return -ENOMEM;
	}
	/* the request so far: its time on the only SKU is redone by step */
	if (!n)
		return -ENOMEM;
	if (e->sku_cur_gen == e->gen) {
		n->requests--; /* its cpu_ns were not added yet */
		n->gen = 0;
	}
	for (uint32_t j = 0; j < seg; j++) {
		const struct cp_segment *g = &req->segs[j];
		uint32_t k = 0;

		if (g->category != CP_CAT_CPU || sku_of(e, g, req->interned) != only)
			continue;
		while (k < e->nstacks && !(e->stacks[k].category == CP_CAT_CPU &&
					   e->stacks[k].frames == e->seg_frames[j]))
			k++;
		if (k < e->nstacks &&
		    sku_add(e, req, k, only, g->end_ns > g->start_ns ? g->end_ns - g->start_ns : 0))
			return -ENOMEM;
	}
	return 0;
}

int engine__sku_segment(struct engine *e, const struct cp_request *req, uint32_t seg,
			uint32_t stack, uint64_t d)
{
	const struct cp_segment *g = &req->segs[seg];
	const char *sku = sku_of(e, g, req->interned);

	if (!sku) /* no CPU model known: nothing to compare */
		return sku__key(g) && !req->interned ? -ENOMEM : 0;
	if (!e->sku_multi) {
		if (!e->sku_only)
			e->sku_only = sku;
		if (sku == e->sku_only) {
			if (e->sku_cur_gen != e->gen) {
				struct sku_seen *n = seen_of(e, sku);

				if (!n)
					return -ENOMEM;
				n->requests++;
				e->sku_cur_gen = e->gen;
				e->sku_cur = 0;
			}
			e->sku_cur += d;
			return 0;
		}
		if (engine__sku_split(e, req, seg))
			return -ENOMEM;
	}
	return sku_add(e, req, stack, sku, d);
}

int engine__sku_flush(struct engine *e, const struct cp_request *req)
{
	int err = 0;

	if (!e->sku_multi && e->sku_cur_gen == e->gen) {
		struct sku_kind *k = kind_of(e, req, e->sku_only);

		if (!k)
			return -ENOMEM;
		e->sku_seen[0].cpu_ns += e->sku_cur;
		k->cur_ns = e->sku_cur;
	}
	for (uint32_t i = 0; i < e->nsku_touched && !err; i++) {
		struct sku_step *s = &e->sku_steps[e->sku_touched[i]];

		err = acc__add(&s->acc, s->cur_ns);
	}
	for (uint32_t i = 0; i < e->nsku_kinds_touched && !err; i++) {
		struct sku_kind *k = &e->sku_kinds[e->sku_kinds_touched[i]];

		err = acc__add(&k->acc, k->cur_ns);
	}
	e->nsku_touched = e->nsku_kinds_touched = 0;
	return err;
}

static double acc__mean(const struct sku_acc *a)
{
	return a->n ? (double)a->total / (double)a->n : 0;
}

/* The sample variance, from the distribution's bucket midpoints. */
static double acc__var(const struct sku_acc *a)
{
	double m = acc__mean(a), ss = 0;

	if (a->n < 2)
		return 0;
	for (uint32_t i = 0; i < a->dist.n; i++) {
		double x, dx;

		if (!a->dist.v[i])
			continue;
		x = (double)bucket__mid(a->dist.lo + i);
		x = x < (double)a->min ? (double)a->min : x > (double)a->max ? (double)a->max : x;
		dx = x - m;
		ss += (double)a->dist.v[i] * dx * dx;
	}
	return ss / (double)(a->n - 1);
}

/* Fills st from a, and its comparison with the baseline's b (NULL: st is
 * the baseline). */
static void stat__fill(struct engine_sku_stat *st, const char *sku, const struct sku_acc *a,
		       const struct sku_acc *b)
{
	double ma = acc__mean(a), mb = b ? acc__mean(b) : 0, va = acc__var(a);

	memset(st, 0, sizeof(*st));
	st->sku = sku;
	st->requests = (uint32_t)a->n;
	st->total_ns = a->total;
	st->mean_ns = (uint64_t)(ma + 0.5);
	st->stddev_ns = (uint64_t)(sqrt(va) + 0.5);
	st->q50_ns = carr__quantile(&a->dist, a->n, a->min, a->max, 0.50);
	st->ratio = st->ci_low = st->ci_high = 1;
	if (!b) {
		st->verdict = ENGINE_SKU_BASELINE;
		return;
	}
	st->ratio = mb > 0 ? ma / mb : 0;
	if (a->n < ENGINE_SKU_MIN_REQUESTS || b->n < ENGINE_SKU_MIN_REQUESTS || ma <= 0 ||
	    mb <= 0) {
		st->ci_low = st->ci_high = st->ratio;
		st->verdict = ENGINE_SKU_FEW;
		return;
	}
	{
		double se =
		    sqrt(va / ((double)a->n * ma * ma) + acc__var(b) / ((double)b->n * mb * mb));

		st->ci_low = st->ratio * exp(-SKU_Z95 * se);
		st->ci_high = st->ratio * exp(SKU_Z95 * se);
	}
	if (st->ci_low > ENGINE_SKU_MARGIN)
		st->verdict = ENGINE_SKU_SLOWER;
	else if (st->ci_high < 1 / ENGINE_SKU_MARGIN)
		st->verdict = ENGINE_SKU_FASTER;
	else if (st->ci_low >= 1 / ENGINE_SKU_MARGIN && st->ci_high <= ENGINE_SKU_MARGIN)
		st->verdict = ENGINE_SKU_SAME;
	else
		st->verdict = ENGINE_SKU_UNCLEAR;
}

static int stat_cmp(const void *pa, const void *pb)
{
	const struct engine_sku_stat *a = pa, *b = pb;

	if (a->verdict == ENGINE_SKU_BASELINE || b->verdict == ENGINE_SKU_BASELINE)
		return a->verdict == ENGINE_SKU_BASELINE ? -1 : 1;
	if (a->requests != b->requests)
		return a->requests > b->requests ? -1 : 1;
	return strcmp(a->sku, b->sku);
}

static int step_cmp(const void *pa, const void *pb)
{
	const struct engine_sku_step *a = pa, *b = pb;

	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	if (a->whole != b->whole)
		return a->whole ? -1 : 1;
	for (uint32_t i = 0; i < a->nframes && i < b->nframes; i++) {
		int c = strcmp(a->frames[i], b->frames[i]);

		if (c)
			return c;
	}
	return a->nframes < b->nframes ? -1 : a->nframes > b->nframes;
}

void engine__sku_free_result(struct engine *e)
{
	free(e->res_skus);
	free(e->res_sku_stats);
	free(e->res_sku_steps);
	free(e->res_sku_frames);
	e->res_sku_frames = NULL;
	e->res_skus = NULL;
	e->res_sku_stats = NULL;
	e->res_sku_steps = NULL;
}

void engine__sku_free(struct engine *e)
{
	for (uint32_t i = 0; i < e->nsku_steps; i++)
		carr__free(&e->sku_steps[i].acc.dist);
	for (uint32_t i = 0; i < e->nsku_kinds; i++)
		carr__free(&e->sku_kinds[i].acc.dist);
	free(e->sku_steps);
	free(e->sku_kinds);
	free(e->sku_kind_index.slots);
	free(e->sku_seen);
	free(e->sku_touched);
	free(e->sku_kinds_touched);
}

static int seen_cmp(const void *pa, const void *pb)
{
	const struct engine_sku *a = pa, *b = pb;

	if (a->requests != b->requests)
		return a->requests > b->requests ? -1 : 1;
	return strcmp(a->sku, b->sku);
}

/* One compared place from pool, the baseline first (its busiest SKU where the
 * global one never ran). */
static void place__fill(struct engine_sku_step *out, const struct sku_acc *const *accs,
			const char *const *skus, uint32_t n, const char *base,
			struct engine_sku_stat *pool)
{
	uint32_t b = 0;

	/* the baseline's, else the most requests' (ties by name: the same
	 * whatever order the input came in) */
	for (uint32_t i = 1; i < n; i++)
		if (skus[i] == base ||
		    (skus[b] != base && (accs[i]->n > accs[b]->n ||
					 (accs[i]->n == accs[b]->n && strcmp(skus[i], skus[b]) < 0))))
			b = i;
	out->by_sku = pool;
	out->nby_sku = n;
	for (uint32_t i = 0; i < n; i++) {
		stat__fill(&pool[i], skus[i], accs[i], i == b ? NULL : accs[b]);
		out->total_ns += accs[i]->total;
		if (pool[i].verdict == ENGINE_SKU_SLOWER || pool[i].verdict == ENGINE_SKU_FASTER)
			out->sensitive = true;
	}
	qsort(pool, n, sizeof(*pool), stat_cmp);
}

static int kind_cmp(const void *pa, const void *pb, void *ctx)
{
	const struct sku_kind *k = ctx;
	const struct sku_kind *a = &k[*(const uint32_t *)pa], *b = &k[*(const uint32_t *)pb];
	int c = strcmp(a->service ? a->service : "", b->service ? b->service : "");

	if (!c)
		c = strcmp(a->name ? a->name : "", b->name ? b->name : "");
	if (!c)
		c = strcmp(a->sku, b->sku);
	return c;
}

/* A kind whose cpu time is all in one step, its own (service; name; cpu),
 * has that step's numbers: not shown twice. */
static bool lone_step(const struct engine_sku_step *steps, uint32_t nsteps,
		      const struct sku_kind *k, const struct sku_acc *const *accs, uint32_t n)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < n; i++)
		total += accs[i]->total;
	for (uint32_t i = 0; i < nsteps; i++) {
		const struct engine_sku_step *s = &steps[i];

		if (s->nframes == 2 && s->frames[0] == k->service && s->frames[1] == k->name)
			return s->total_ns == total && s->nby_sku == n;
	}
	return false;
}

int engine__sku_result(struct engine *e)
{
	struct engine_result *r = &e->res;
	uint32_t nsteps = 0, nplaces = e->nstacks + e->nsku_kinds, *order;
	struct engine_sku_stat *pool;
	const struct sku_acc **accs;
	const char **skus, *base, **kf;
	int err = -ENOMEM;

	engine__sku_free_result(e);
	if (!e->nsku_seen)
		return 0;
	e->res_skus = calloc(e->nsku_seen, sizeof(*e->res_skus));
	if (!e->res_skus)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->nsku_seen; i++)
		e->res_skus[i] = (struct engine_sku){e->sku_seen[i].sku, e->sku_seen[i].requests,
						     e->sku_seen[i].cpu_ns};
	qsort(e->res_skus, e->nsku_seen, sizeof(*e->res_skus), seen_cmp);
	r->skus = e->res_skus;
	r->nskus = e->nsku_seen;
	if (e->nsku_seen < 2)
		return 0;
	base = e->res_skus[0].sku;
	e->res_sku_stats = calloc(e->nsku_steps + e->nsku_kinds + 1, sizeof(*e->res_sku_stats));
	e->res_sku_steps = calloc(nplaces + 1, sizeof(*e->res_sku_steps));
	/* a place has each SKU seen at most once */
	accs = calloc(e->nsku_seen, sizeof(*accs));
	skus = calloc(e->nsku_seen, sizeof(*skus));
	order = calloc(e->nsku_kinds + 1, sizeof(*order));
	kf = e->res_sku_frames = calloc(2 * (size_t)e->nsku_kinds + 1, sizeof(*kf));
	if (!e->res_sku_stats || !e->res_sku_steps || !accs || !skus || !order || !kf)
		goto out;
	pool = e->res_sku_stats;
	for (uint32_t k = 0; k < e->nstacks; k++) {
		const struct stack *s = &e->stacks[k];
		struct engine_sku_step *out = &e->res_sku_steps[nsteps];
		uint32_t n = 0;

		for (uint32_t i = s->sku_first; i; i = e->sku_steps[i - 1].next, n++) {
			accs[n] = &e->sku_steps[i - 1].acc;
			skus[n] = e->sku_steps[i - 1].sku;
		}
		if (n < 2)
			continue; /* on one SKU only */
		out->frames = s->frames;
		out->nframes = s->nframes;
		place__fill(out, accs, skus, n, base, pool);
		pool += n;
		nsteps++;
	}
	/* request kinds: their SKUs are neighbours once sorted */
	for (uint32_t i = 0; i < e->nsku_kinds; i++)
		order[i] = i;
	qsort_r(order, e->nsku_kinds, sizeof(*order), kind_cmp, e->sku_kinds);
	for (uint32_t i = 0, j; i < e->nsku_kinds; i = j) {
		const struct sku_kind *k = &e->sku_kinds[order[i]];
		struct engine_sku_step *out = &e->res_sku_steps[nsteps];
		uint32_t n = 0;

		for (j = i; j < e->nsku_kinds; j++) {
			const struct sku_kind *t = &e->sku_kinds[order[j]];

			if (t->service != k->service || t->name != k->name)
				break;
			accs[n] = &t->acc;
			skus[n++] = t->sku;
		}
		if (n < 2 || lone_step(e->res_sku_steps, nsteps, k, accs, n))
			continue;
		kf[0] = k->service ? k->service : "?";
		kf[1] = k->name ? k->name : "?";
		out->frames = kf;
		out->nframes = 2;
		kf += 2;
		out->whole = true;
		place__fill(out, accs, skus, n, base, pool);
		pool += n;
		nsteps++;
	}
	qsort(e->res_sku_steps, nsteps, sizeof(*e->res_sku_steps), step_cmp);
	r->sku_steps = e->res_sku_steps;
	r->nsku_steps = nsteps;
	err = 0;
out:
	free(accs);
	free(skus);
	free(order);
	return err;
}

/* --- input aggregated elsewhere ------------------------------------------ */

static int acc__merge(struct sku_acc *a, const struct engine_acc_sums *m)
{
	if (!a->n || m->min_ns < a->min)
		a->min = m->min_ns;
	if (m->max_ns > a->max)
		a->max = m->max_ns;
	a->n += m->n;
	a->total += m->total_ns;
	return carr__add_counts(&a->dist, m->dist, m->ndist);
}

int engine__merge_sku_step(struct engine *e, const char *const *frames, uint32_t nframes,
			   const char *sku, const struct engine_acc_sums *a)
{
	int64_t id = engine__stack_of(e, frames, nframes, CP_CAT_CPU);
	const char *k = engine__intern(e, sku);
	struct sku_step *s;

	if (id < 0 || !k)
		return -ENOMEM;
	e->sku_multi = true;
	s = step_of(e, (uint32_t)id, k);
	return s ? acc__merge(&s->acc, a) : -ENOMEM;
}

int engine__merge_sku_kind(struct engine *e, const char *service, const char *name,
			   const char *sku, const struct engine_acc_sums *a)
{
	struct cp_request req = {.service = service, .name = name};
	const char *k = engine__intern(e, sku);
	struct sku_kind *t;

	if (!k)
		return -ENOMEM;
	e->gen++;
	e->sku_multi = true;
	t = kind_of(e, &req, k);
	e->nsku_kinds_touched = 0;
	return t ? acc__merge(&t->acc, a) : -ENOMEM;
}

int engine__merge_sku_seen(struct engine *e, const char *sku, uint64_t requests, uint64_t cpu_ns)
{
	const char *k = engine__intern(e, sku);
	struct sku_seen *n = k ? seen_of(e, k) : NULL;

	if (!n)
		return -ENOMEM;
	e->sku_multi = true;
	n->requests += requests;
	n->cpu_ns += cpu_ns;
	return 0;
}
