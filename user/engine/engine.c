// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The engine: filters requests and aggregates their critical paths as they
 * arrive. Per frame stack: total, count, a log-linear histogram and the time by
 * latency bucket, so percentile views (CRISP) cost stacks × buckets, never per
 * request; a view may include requests up to 1/64 slower than exact Pxx, and
 * says the largest latency included. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_int.h"
#include "msg.h"

const double engine_pct[ENGINE_NPCT] = {0.50, 0.95, 0.99};

static const char *const category_names[CP_CAT__COUNT] = {
    [CP_CAT_CPU] = "cpu",   [CP_CAT_RUNQUEUE] = "runqueue",
    [CP_CAT_LOCK] = "lock", [CP_CAT_NETWORK] = "network",
    [CP_CAT_DISK] = "disk", [CP_CAT_SLEEP] = "sleep",
    [CP_CAT_SPAN] = "span", [CP_CAT_UNEXPLAINED] = "unexplained",
};

const char *cp_category_name(enum cp_category c)
{
	if ((unsigned)c < CP_CAT__COUNT)
		return category_names[c];
	return "unexplained";
}

static int index__reserve(struct index *ix, uint32_t n, uint64_t (*hash_of)(const void *, uint32_t),
			  const void *ctx)
{
	return index__reserve_more(ix, n, 0, hash_of, ctx);
}

void engine__set_time_base(struct engine *e, uint64_t ns)
{
	e->time_base = ns;
}

struct engine *engine__new(const struct engine_opts *opts)
{
	struct engine *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	if (opts)
		e->opts = *opts;
	if (!e->opts.max_paths)
		e->opts.max_paths = ENGINE_MAX_PATHS;
	e->in = intern__new();
	if (!e->in || !(e->other = intern__get(e->in, ENGINE_OTHER))) {
		intern__free(e->in);
		free(e);
		return NULL;
	}
	return e;
}

const struct engine_opts *engine__opts(const struct engine *e)
{
	return &e->opts;
}

void engine__free(struct engine *e)
{
	if (!e)
		return;
	engine__free_result(e);
	engine__sku_free(e);
	for (uint32_t i = 0; i < e->nstacks; i++) {
		free((void *)e->stacks[i].frames);
		free(e->stacks[i].few);
		carr__free(&e->stacks[i].dist);
		barr__free(&e->stacks[i].by_lat);
	}
	free(e->stacks);
	free(e->fold);
	free(e->gkeys);
	free(e->ghash);
	free(e->stack_index.slots);
	free(e->culprits);
	free(e->culprit_index.slots);
	free(e->spans);
	free(e->snode);
	free(e->so);
	u64map__free(&e->label_so);
	free(e->span_index.slots);
	free(e->touched);
	free(e->seg_frames);
	carr__free(&e->lat_counts);
	barr__free(&e->lat_max);
	for (uint32_t i = 0; i < e->nkept; i++)
		free(e->kept[i]);
	free(e->kept);
	for (uint32_t i = 0; i < e->nwarnings; i++)
		free(e->warnings[i]);
	free(e->warnings);
	free(e->hosts);
	intern__free(e->in);
	free(e);
}

const char *engine__intern(struct engine *e, const char *s)
{
	return intern__get(e->in, s);
}

void engine__set_quiet(struct engine *e, bool quiet)
{
	e->quiet = quiet;
}

static int sink_request(void *ctx, const struct cp_request *r)
{
	engine__add_request(ctx, r); /* 0 = filtered out, which is not an error */
	return 0;
}

static void sink_warn(void *ctx, const char *msg)
{
	engine__warn(ctx, "%s", msg);
}

static const char *sink_intern(void *ctx, const char *s)
{
	return engine__intern(ctx, s);
}

/* a host again (several recordings of it) replaces what was said of it */
static void sink_host(void *ctx, const struct cp_host *h)
{
	struct engine *e = ctx;
	struct cp_host c = *h;
	uint32_t i;

	c.name = engine__intern(e, h->name);
	c.clock = engine__intern(e, h->clock);
	if ((h->name && !c.name) || (h->clock && !c.clock))
		return;
	for (i = 0; i < e->nhosts && e->hosts[i].name != c.name; i++)
		;
	if (i == e->nhosts && grow_array((void **)&e->hosts, &e->caphosts, e->nhosts + 1,
					 sizeof(*e->hosts), 4))
		return;
	e->hosts[i] = c;
	if (i == e->nhosts)
		e->nhosts++;
}

struct cp_sink engine__sink(struct engine *e)
{
	return (struct cp_sink){.request = sink_request,
				.warn = sink_warn,
				.ctx = e,
				.intern = sink_intern,
				.host = sink_host,
				.ignores_tags = !e->opts.filter.tag};
}

void engine__warn(struct engine *e, const char *fmt, ...)
{
	uint64_t n = e->nwarnings + e->warnings_dropped;
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!e->quiet && s) {
		if (n < WARN_PRINT)
			cp_warn(NULL, "%s", s);
		else if (n == WARN_PRINT)
			cp_warn(NULL,
				"more than %d warnings; the rest are "
				"in the report only",
				WARN_PRINT);
	}
	if (!s || e->nwarnings >= WARN_KEEP ||
	    engine__grow((void **)&e->warnings, &e->capwarnings, e->nwarnings + 1,
			 sizeof(char *))) {
		free(s);
		e->warnings_dropped++;
		return;
	}
	e->warnings[e->nwarnings++] = s;
}

/* --- filters ------------------------------------------------------------- */

static bool str_is(const char *want, const char *have)
{
	return !want || (have && !strcmp(want, have));
}

static bool engine__wants(struct engine *e, const struct cp_request *req)
{
	const struct engine_filter *f = &e->opts.filter;
	uint64_t lat = req->end_ns - req->start_ns;

	if (!str_is(f->service, req->service) || !str_is(f->name, req->name) ||
	    !str_is(f->host, req->host))
		return false;
	if ((f->min_latency_ns && lat < f->min_latency_ns) ||
	    (f->max_latency_ns && lat > f->max_latency_ns))
		return false;
	if (f->from_ns || f->to_ns || f->from_rel || f->to_rel) {
		uint64_t rt = req->start_ns + (uint64_t)req->realtime_offset_ns;
		uint64_t from = f->from_realtime ? rt : req->start_ns;
		uint64_t to = f->to_realtime ? rt : req->start_ns;

		if (!e->time_base && (f->from_rel || f->to_rel))
			e->time_base = req->start_ns ? req->start_ns : 1;
		if (f->from_rel)
			from = req->start_ns >= e->time_base ? req->start_ns - e->time_base : 0;
		if (f->to_rel)
			to = req->start_ns >= e->time_base ? req->start_ns - e->time_base : 0;
		if (((f->from_ns || f->from_rel) && from < f->from_ns) ||
		    ((f->to_ns || f->to_rel) && to > f->to_ns))
			return false;
	}
	if (f->tag) {
		bool found = false;

		for (uint32_t i = 0; req->tags && req->tags[i] && !found; i++)
			found = !strcmp(req->tags[i], f->tag);
		if (!found)
			return false;
	}
	return true;
}

/* --- frame stacks -------------------------------------------------------- */

struct stack_key {
	const struct engine *e;
	const char *const *frames;
	uint32_t nframes;
	enum cp_category category;
	uint64_t hash;
};

/* Stacks are keyed by interned frames: comparing pointers compares contents. */
static uint64_t frames_hash(const char *const *frames, uint32_t n, uint64_t seed)
{
	uint64_t h = hash__u64(seed, n);

	for (uint32_t i = 0; i < n; i++)
		h = hash__u64(h, (uintptr_t)frames[i]);
	/* the index takes the low bits: a product's are weak, and pointers'
	 * lowest are zero */
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

static bool frames_eq(const char *const *a, uint32_t na, const char *const *b, uint32_t nb)
{
	if (na != nb)
		return false;
	for (uint32_t i = 0; i < na; i++) /* a few: a call to memcmp cost more */
		if (a[i] != b[i])
			return false;
	return true;
}

static bool stack_eq(const void *ctx, uint32_t i)
{
	const struct stack_key *k = ctx;
	const struct stack *s = &k->e->stacks[i];

	return s->hash == k->hash && s->category == k->category &&
	       frames_eq(s->frames, s->nframes, k->frames, k->nframes);
}

static uint64_t stack_hash_of(const void *ctx, uint32_t i)
{
	return ((const struct engine *)ctx)->stacks[i].hash;
}

static const char *engine__frame_uninterned(struct engine *e, const char *f);

/* The interned copy of a frame (NULL: "?"); with an interned request it is f. */
static inline const char *engine__frame(struct engine *e, const char *f)
{
	if (f && e->interned)
		return f;
	return engine__frame_uninterned(e, f);
}

static __attribute__((noinline)) const char *engine__frame_uninterned(struct engine *e,
								      const char *f)
{
	uint32_t m;

	if (!f)
		f = "?";
	m = (uint32_t)(((uintptr_t)f * 0x9e3779b97f4a7c15ull) >> (64 - MEMO_BITS));
	if (e->memo[m].gen != e->gen || e->memo[m].from != f) {
		const char *to = intern__get(e->in, f);

		if (!to)
			return NULL;
		e->memo[m].from = f;
		e->memo[m].to = to;
		e->memo[m].gen = e->gen;
	}
	return e->memo[m].to;
}

static const char *const *frames_dup(const char *const *frames, uint32_t n)
{
	const char **d = malloc((n ? n : 1) * sizeof(*d));

	if (d)
		memcpy(d, frames, n * sizeof(*d));
	return d;
}

static uint32_t cache_slot(const struct cp_segment *g)
{
	return (uint32_t)(((uintptr_t)g->frames >> 3) ^ g->category) % CACHE_SLOTS;
}

/* Producers hand the same frames array to many segments of a request;
 * within one call the pointer identifies the contents. */
static bool cache_hit(const struct engine *e, const struct cp_segment *g, uint32_t c)
{
	return e->cache[c].gen == e->gen && e->cache[c].frames == g->frames &&
	       e->cache[c].nframes == g->nframes && e->cache[c].category == (uint32_t)g->category;
}

/* A stack's hash: its frames' (frames_hash), then its category */
static uint64_t stack_hash(uint64_t frames_h, enum cp_category cat)
{
	uint64_t h = hash__u64(frames_h, cat);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

/* Keys, hashes and prefetches of the segments before their lookups; a segment
 * sharing one of the last RECENT_FRAMES frames arrays reuses its keys. */
#define RECENT_FRAMES 4
static inline __attribute__((always_inline)) int engine__stacks_ahead(struct engine *e,
								      const struct cp_request *req)
{
	uint32_t n = req->nsegs, total = 0, mask;
	const struct cp_segment *g = req->segs;
	const char **kf, **prev = NULL;
	uint64_t fh = 0;
	struct {
		const char *const *frames;
		uint32_t nframes;
		const char **kf;
		uint64_t fh;
	} recent[RECENT_FRAMES];
	uint32_t nrecent = 0, next = 0;

	for (uint32_t i = 0; i < n; i++)
		total += g[i].nframes;
	if (engine__grow((void **)&e->gkeys, &e->capgkeys, total + 1, sizeof(*e->gkeys)) ||
	    engine__grow((void **)&e->ghash, &e->capghash, n + 1, sizeof(*e->ghash)) ||
	    index__reserve_more(&e->stack_index, e->nstacks, n, stack_hash_of, e))
		return -ENOMEM;
	mask = e->stack_index.cap - 1;
	kf = e->gkeys;
	for (uint32_t i = 0; i < n; kf += g[i++].nframes) {
		uint32_t r = 0;

		while (r < nrecent &&
		       (recent[r].frames != g[i].frames || recent[r].nframes != g[i].nframes))
			r++;
		if (r < nrecent) {
			prev = recent[r].kf;
			fh = recent[r].fh;
			for (uint32_t j = 0; j < g[i].nframes; j++)
				kf[j] = prev[j];
		} else {
			for (uint32_t j = 0; j < g[i].nframes; j++)
				if (!(kf[j] = engine__frame(e, g[i].frames[j])))
					return -ENOMEM;
			fh = frames_hash(kf, g[i].nframes, 0);
			r = nrecent < RECENT_FRAMES ? nrecent++ : next++ % RECENT_FRAMES;
			recent[r].frames = g[i].frames;
			recent[r].nframes = g[i].nframes;
			recent[r].kf = kf;
			recent[r].fh = fh;
		}
		e->ghash[i] = stack_hash(fh, g[i].category);
		__builtin_prefetch(&e->stack_index.slots[e->ghash[i] & mask]);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t slot = e->stack_index.slots[e->ghash[i] & mask];

		if (slot)
			__builtin_prefetch(&e->stacks[slot - 1].hash);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t slot = e->stack_index.slots[e->ghash[i] & mask];

		if (slot) {
			__builtin_prefetch(e->stacks[slot - 1].frames);
			__builtin_prefetch(&e->stacks[slot - 1].cur_ns);
		}
	}
	return 0;
}

/* A new stack for k at its empty index slot; 0 or -ENOMEM. */
static int engine__stack_new(struct engine *e, const struct stack_key *k, uint32_t *slot)
{
	struct stack *s;

	if (engine__grow((void **)&e->stacks, &e->capstacks, e->nstacks + 1, sizeof(*s)))
		return -ENOMEM;
	s = &e->stacks[e->nstacks];
	memset(s, 0, sizeof(*s));
	s->frames = frames_dup(k->frames, k->nframes);
	if (!s->frames)
		return -ENOMEM;
	s->nframes = k->nframes;
	s->category = k->category;
	s->hash = k->hash;
	*slot = ++e->nstacks;
	return 0;
}

static void engine__fold_warn(struct engine *e)
{
	if (e->folded)
		return;
	e->folded = true;
	engine__warn(e,
		     "more than %u distinct call paths: from here on, the time of a new one is "
		     "counted under its longest beginning already seen, then \"%s\" (--max-paths)",
		     e->opts.max_paths, ENGINE_OTHER);
}

/*
 * Past max_paths stacks, a new one's slot: its longest beginning that is a
 * stack (of its category) already, then ENGINE_OTHER, made on first sight.
 * Each kept stack has at most one such, so there are at most twice as many
 * stacks, whatever the input. *slot: the index's, 0 on -ENOMEM.
 */
static uint32_t *engine__stack_fold(struct engine *e, const struct stack_key *key)
{
	struct stack_key k = *key;
	uint32_t j = key->nframes, *slot;

	engine__fold_warn(e);
	if (engine__grow((void **)&e->fold, &e->capfold, j + 1, sizeof(*e->fold)))
		return NULL;
	while (j > 0) {
		k.nframes = --j;
		k.hash = stack_hash(frames_hash(key->frames, j, 0), key->category);
		if (!j || *index__find(&e->stack_index, k.hash, stack_eq, &k))
			break;
	}
	memcpy(e->fold, key->frames, j * sizeof(*e->fold));
	e->fold[j] = e->other;
	k.frames = e->fold;
	k.nframes = j + 1;
	k.hash = stack_hash(frames_hash(e->fold, j + 1, 0), key->category);
	slot = index__find(&e->stack_index, k.hash, stack_eq, &k);
	if (!*slot && engine__stack_new(e, &k, slot))
		return NULL;
	return slot;
}

/* The stack id of segment g, created on first sight; -ENOMEM. */
static inline __attribute__((always_inline)) int64_t
engine__stack(struct engine *e, const struct cp_segment *g, const char *const *kf, uint64_t h)
{
	uint32_t c = cache_slot(g);
	struct stack_key k = {e, kf, g->nframes, g->category, h};
	uint32_t *slot;

	if (cache_hit(e, g, c))
		return e->cache[c].stack;
	slot = index__find(&e->stack_index, k.hash, stack_eq, &k);
	if (!*slot) {
		if (e->nstacks >= e->opts.max_paths) {
			if (!(slot = engine__stack_fold(e, &k)))
				return -ENOMEM;
		} else if (engine__stack_new(e, &k, slot)) {
			return -ENOMEM;
		}
	}
	e->cache[c].gen = e->gen;
	e->cache[c].frames = g->frames;
	e->cache[c].nframes = g->nframes;
	e->cache[c].category = g->category;
	e->cache[c].stack = *slot - 1;
	return *slot - 1;
}

/* --- contention ---------------------------------------------------------- */

static bool culprit_eq(const void *ctx, uint32_t i)
{
	const struct culprit *k = ((const struct culprit *const *)ctx)[0];
	const struct culprit *c =
	    &((const struct engine *)((const void *const *)ctx)[1])->culprits[i];

	/* comms are interned (or NULL): equal strings are equal pointers */
	return c->hash == k->hash && c->pid == k->pid && c->tid == k->tid &&
	       c->category == k->category && c->comm == k->comm;
}

static uint64_t culprit_hash_of(const void *ctx, uint32_t i)
{
	return ((const struct engine *)ctx)->culprits[i].hash;
}

/* The culprit with k's pid, tid, comm (interned) and category, created on
 * first sight; NULL on ENOMEM. */
static struct culprit *engine__culprit(struct engine *e, struct culprit *k)
{
	const void *ctx[2] = {k, e};
	uint32_t *slot, bc = ((uint32_t)k->tid * 0x9e3779b1u) >> 26;

	_Static_assert(sizeof(e->blame_cache) / sizeof(e->blame_cache[0]) == 64, "bc: 6 bits");
	if (e->blame_cache[bc].culprit && e->blame_cache[bc].tid == k->tid &&
	    e->blame_cache[bc].pid == k->pid && e->blame_cache[bc].comm == k->comm &&
	    e->blame_cache[bc].category == (uint32_t)k->category)
		return &e->culprits[e->blame_cache[bc].culprit - 1];
	k->hash = hash__u64(
	    hash__u64(hash__u64(hash__u64(0, (uint32_t)k->pid), (uint32_t)k->tid), k->category),
	    (uintptr_t)k->comm);
	k->hash ^= k->hash >> 31; /* the index takes the low bits */
	k->hash *= 0xbf58476d1ce4e5b9ull;
	k->hash ^= k->hash >> 32;
	if (index__reserve(&e->culprit_index, e->nculprits, culprit_hash_of, e))
		return NULL;
	slot = index__find(&e->culprit_index, k->hash, culprit_eq, ctx);
	if (!*slot) {
		if (engine__grow((void **)&e->culprits, &e->capculprits, e->nculprits + 1,
				 sizeof(*e->culprits)))
			return NULL;
		e->culprits[e->nculprits] = *k;
		*slot = ++e->nculprits;
	}
	e->blame_cache[bc].pid = k->pid;
	e->blame_cache[bc].tid = k->tid;
	e->blame_cache[bc].comm = k->comm;
	e->blame_cache[bc].category = k->category;
	e->blame_cache[bc].culprit = *slot;
	return &e->culprits[*slot - 1];
}

static int engine__blame(struct engine *e, int32_t pid, int32_t tid, const char *comm,
			 enum cp_category cat, uint64_t ns)
{
	struct culprit k = {pid, tid, comm, cat, 0, 0, 0, 0};
	struct culprit *c;

	/* the request's comms are interned once each, like its frames, and
	 * then hashed and compared as pointers */
	if (comm && !(k.comm = engine__frame(e, comm)))
		return -ENOMEM;
	c = engine__culprit(e, &k);
	if (!c)
		return -ENOMEM;
	c->ns += ns;
	if (c->gen != e->gen) {
		c->gen = e->gen;
		c->requests++;
	}
	return 0;
}

static int engine__contention(struct engine *e, const struct cp_segment *g, uint64_t d)
{
	int err = 0;

	if (!g->interference || (g->category != CP_CAT_LOCK && g->category != CP_CAT_RUNQUEUE))
		return 0;
	if (!g->nculprits)
		return engine__blame(e, g->pid, g->tid, g->comm, g->category, d);
	for (uint32_t i = 0; i < g->nculprits && !err; i++) {
		const struct cp_culprit *c = &g->culprits[i];

		err = engine__blame(e, c->pid, c->tid, c->comm, g->category, c->ns);
	}
	return err;
}

/* --- span call paths ----------------------------------------------------- */

struct span_key {
	const struct engine *e;
	uint32_t parent;
	const char *label;
};

static uint64_t span_hash(uint32_t parent, const char *label)
{
	uint64_t h = hash__u64(hash__u64(0x5a5a, parent), (uintptr_t)label);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

static bool span_eq(const void *ctx, uint32_t i)
{
	const struct span_key *k = ctx;
	const struct span_node *s = &k->e->spans[i];

	return s->label == k->label && s->parent == k->parent;
}

static uint64_t span_hash_of(const void *ctx, uint32_t i)
{
	const struct span_node *s = &((const struct engine *)ctx)->spans[i];

	return span_hash(s->parent, s->label);
}

uint32_t engine__span_child(struct engine *e, uint32_t parent, const char *label)
{
	struct span_key k = {e, parent, label};

	if (!e->span_index.cap)
		return 0;
	return *index__find(&e->span_index, span_hash(parent, label), span_eq, &k);
}

/* The node below parent with label (index + 1), made on first sight; 0:
 * ENOMEM. The index has room for it. A NULL label is the empty path. */
static uint32_t engine__span_node(struct engine *e, uint32_t parent, const char *label)
{
	struct span_key k = {e, parent, label};
	uint32_t *slot = index__find(&e->span_index, span_hash(parent, label), span_eq, &k);

	if (*slot)
		return *slot;
	if (e->nspans >= e->opts.max_paths) {
		/* past the cap: below ENGINE_OTHER under the deepest node kept; it
		 * takes the rest of the path (one a node: twice the cap at most) */
		if (parent && e->spans[parent - 1].label == e->other)
			return parent;
		engine__fold_warn(e);
		k.label = label = e->other;
		slot = index__find(&e->span_index, span_hash(parent, label), span_eq, &k);
		if (*slot)
			return *slot;
	}
	if (engine__grow((void **)&e->spans, &e->capspans, e->nspans + 1, sizeof(*e->spans)))
		return 0;
	e->spans[e->nspans] = (struct span_node){
	    .label = label,
	    .parent = parent,
	    .depth = parent ? e->spans[parent - 1].depth + 1 : label != NULL,
	};
	*slot = ++e->nspans;
	return *slot;
}

/* A new path's service and operation: its label's (they make the label). */
static int engine__span_names(struct engine *e, struct span_node *s, const struct cp_span_stat *st)
{
	uint32_t v;

	if (s->label == e->other) { /* the paths folded below its parent */
		s->service = s->parent ? e->spans[s->parent - 1].service : NULL;
		if (!s->service)
			s->service = e->other;
		s->operation = e->other;
		return 0;
	}
	v = s->label ? u64map__get(&e->label_so, (uintptr_t)s->label) : U64MAP_NONE;

	if (v == U64MAP_NONE) {
		if (engine__grow((void **)&e->so, &e->capso, e->nso + 1, sizeof(*e->so)))
			return -ENOMEM;
		v = e->nso;
		e->so[v].service = intern__get(e->in, st->service);
		e->so[v].operation = intern__get(e->in, st->operation);
		if (s->label) {
			if (u64map__put(&e->label_so, (uintptr_t)s->label, v))
				return -ENOMEM;
			e->nso++;
		}
	}
	s->service = e->so[v].service;
	s->operation = e->so[v].operation;
	return 0;
}

/* Stat k's last lookup prefetched while stat i is added, when its prefix
 * is added already and one or two levels are below it (a cut path's "…"
 * is the previous lookup's): lookups of new paths miss the cache, and one
 * stat's does not wait for the one before. */
#define SPAN_AHEAD 4
static inline __attribute__((always_inline)) void
engine__span_ahead(struct engine *e, const struct cp_span_stat *sp, uint32_t i, uint32_t k)
{
	uint32_t p = sp[k].prefix, below, node;

	if (!p || p > i)
		return;
	below = sp[k].nframes - sp[p - 1].nframes;
	node = e->snode[p - 1];
	if (below == 2) {
		if (e->span_ahead_from != node ||
		    e->span_ahead_label != sp[k].frames[sp[k].nframes - 2])
			return;
		node = e->span_ahead_to;
	} else if (below != 1) {
		return;
	}
	__builtin_prefetch(&e->span_index.slots[span_hash(node, sp[k].frames[sp[k].nframes - 1]) &
						 (e->span_index.cap - 1)]);
}

/* A request's span stats into the tree of paths: a stat with a prefix
 * starts from that stat's node, so a path costs a lookup or two, not one
 * per level. */
static int engine__spans(struct engine *e, const struct cp_request *req)
{
	const struct cp_span_stat *sp = req->spans;
	uint32_t n = req->nspans, walk = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t p = sp[i].prefix;

		walk += 1 + sp[i].nframes;
		if (p && p <= i && sp[p - 1].nframes <= sp[i].nframes)
			walk -= sp[p - 1].nframes;
	}
	if (engine__grow((void **)&e->snode, &e->capsnode, n + 1, sizeof(*e->snode)) ||
	    index__reserve_more(&e->span_index, e->nspans, walk, span_hash_of, e))
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		const struct cp_span_stat *st = &sp[i];
		uint32_t node = 0, j = 0, p = st->prefix;
		struct span_node *s;

		if (e->interned && i + SPAN_AHEAD < n)
			engine__span_ahead(e, sp, i, i + SPAN_AHEAD);
		if (p && p <= i && sp[p - 1].nframes <= st->nframes) {
			node = e->snode[p - 1];
			j = sp[p - 1].nframes;
		} else if (!st->nframes && !(node = engine__span_node(e, 0, NULL))) {
			return -ENOMEM;
		}
		for (; j < st->nframes; j++) {
			const char *f = engine__frame(e, st->frames[j]);
			uint32_t from = node;

			if (!f || !(node = engine__span_node(e, node, f)))
				return -ENOMEM;
			if (j + 2 == st->nframes) { /* the step above the last: "…" */
				e->span_ahead_from = from;
				e->span_ahead_label = f;
				e->span_ahead_to = node;
			}
		}
		e->snode[i] = node;
		s = &e->spans[node - 1];
		if (!s->count && engine__span_names(e, s, st))
			return -ENOMEM;
		s->count++;
		s->inclusive_ns += st->inclusive_ns;
		s->exclusive_ns += st->exclusive_ns;
		if (s->gen != e->gen) {
			s->gen = e->gen;
			s->requests++;
		}
	}
	return 0;
}

/* --- kept requests ------------------------------------------------------- */

/* The order of "slower": latency, then later start, then id, so the set kept
 * does not depend on arrival order. */
static int slower(const struct cp_request *a, const struct cp_request *b)
{
	uint64_t la = a->end_ns - a->start_ns, lb = b->end_ns - b->start_ns;
	int c;

	if (la != lb)
		return la > lb ? 1 : -1;
	if (a->start_ns != b->start_ns)
		return a->start_ns > b->start_ns ? 1 : -1;
	c = strcmp(a->id ? a->id : "", b->id ? b->id : "");
	return c > 0 ? 1 : c < 0 ? -1 : 0;
}

static void heap_down(struct cp_request **h, uint32_t n, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		struct cp_request *t;

		if (l < n && slower(h[m], h[l]) > 0)
			m = l;
		if (r < n && slower(h[m], h[r]) > 0)
			m = r;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void heap_up(struct cp_request **h, uint32_t i)
{
	while (i) {
		uint32_t p = (i - 1) / 2;
		struct cp_request *t;

		if (slower(h[p], h[i]) <= 0)
			return;
		t = h[i];
		h[i] = h[p];
		h[p] = t;
		i = p;
	}
}

static int engine__keep(struct engine *e, const struct cp_request *req)
{
	uint32_t n = e->opts.keep_slowest;
	struct cp_request *c;

	if (!e->opts.keep_all_requests && !n)
		return 0;
	if (!e->opts.keep_all_requests && e->nkept == n && slower(req, e->kept[0]) <= 0)
		return 0;
	c = request__copy(req, e->in, e->seg_frames);
	if (!c)
		return -ENOMEM;
	if (e->opts.keep_all_requests || e->nkept < n) {
		if (engine__grow((void **)&e->kept, &e->capkept, e->nkept + 1, sizeof(*e->kept))) {
			free(c);
			return -ENOMEM;
		}
		e->kept[e->nkept++] = c;
		if (!e->opts.keep_all_requests)
			heap_up(e->kept, e->nkept - 1);
		return 0;
	}
	free(e->kept[0]);
	e->kept[0] = c;
	heap_down(e->kept, e->nkept, 0);
	return 0;
}

/* --- adding a request ---------------------------------------------------- */

/* Room for req's segments' stacks in e->seg_frames, and their keys and
 * hashes worked out (e->gkeys, e->ghash) */
static inline __attribute__((always_inline)) int engine__stacks_begin(struct engine *e,
								      const struct cp_request *req)
{
	if (engine__grow((void **)&e->seg_frames, &e->capseg_frames, req->nsegs + 1,
			 sizeof(*e->seg_frames)))
		return -ENOMEM;
	return engine__stacks_ahead(e, req);
}

/* The interned frame stacks of req's segments into e->seg_frames, for a
 * copy of it, without adding its time anywhere */
static int engine__frames(struct engine *e, const struct cp_request *req)
{
	const char **kf;
	int err = engine__stacks_begin(e, req);

	if (err)
		return err;
	kf = e->gkeys;
	for (uint32_t i = 0; i < req->nsegs; kf += req->segs[i++].nframes) {
		int64_t id = engine__stack(e, &req->segs[i], kf, e->ghash[i]);

		if (id < 0)
			return (int)id;
		e->seg_frames[i] = e->stacks[id].frames;
	}
	return 0;
}

static int engine__aggregate(struct engine *e, const struct cp_request *req, uint64_t lat)
{
	uint32_t lb = bucket__of(lat);
	const char **kf;
	int err;

	e->ntouched = 0;
	err = engine__stacks_begin(e, req);
	if (err)
		return err;
	kf = e->gkeys;
	for (uint32_t i = 0; i < req->nsegs; kf += req->segs[i++].nframes) {
		const struct cp_segment *g = &req->segs[i];
		uint64_t d = g->end_ns > g->start_ns ? g->end_ns - g->start_ns : 0;
		int64_t id = engine__stack(e, g, kf, e->ghash[i]);
		struct stack *s;

		if (id < 0)
			return (int)id;
		s = &e->stacks[id];
		e->seg_frames[i] = s->frames;
		if (s->gen != e->gen) {
			if (engine__grow((void **)&e->touched, &e->captouched, e->ntouched + 1,
					 sizeof(*e->touched)))
				return -ENOMEM;
			s->gen = e->gen;
			s->cur_ns = 0;
			e->touched[e->ntouched++] = (uint32_t)id;
		}
		s->cur_ns += d;
		err = engine__contention(e, g, d);
		if (!err && g->category == CP_CAT_CPU && sku__key(g)) {
			/* one SKU so far, this request's time on it counted: the
			 * usual, without the call */
			if (!e->sku_multi && e->sku_cur_gen == e->gen && req->interned &&
			    sku__key(g) == e->sku_only)
				e->sku_cur += d;
			else
				err = engine__sku_segment(e, req, i, (uint32_t)id, d);
		}
		if (err)
			return err;
	}
	err = engine__sku_flush(e, req);
	if (err)
		return err;
	for (uint32_t i = 0; i < e->ntouched; i++) { /* what the adds will touch */
		const struct stack *s = &e->stacks[e->touched[i]];
		uint32_t b = bucket__of(s->cur_ns);

		if (s->dist.n && b >= s->dist.lo && b - s->dist.lo < s->dist.n)
			__builtin_prefetch(&s->dist.v[b - s->dist.lo]);
		if (s->by_lat.n && lb >= s->by_lat.lo && lb - s->by_lat.lo < s->by_lat.n)
			__builtin_prefetch(&s->by_lat.v[lb - s->by_lat.lo]);
	}
	for (uint32_t i = 0; i < e->ntouched; i++) {
		struct stack *s = &e->stacks[e->touched[i]];

		s->total_ns += s->cur_ns;
		s->sumsq += (double)s->cur_ns * (double)s->cur_ns;
		if (e->nrequests < ENGINE_FEW) {
			if (!s->few && !(s->few = malloc(ENGINE_FEW * sizeof(*s->few))))
				return -ENOMEM;
			s->few[s->requests] = s->cur_ns;
		}
		s->requests++;
		if (s->cur_ns > s->max_ns)
			s->max_ns = s->cur_ns;
		if (s->requests == 1 || s->cur_ns < s->min_ns)
			s->min_ns = s->cur_ns;
		err = carr__inc(&s->dist, bucket__of(s->cur_ns));
		if (!err)
			err = barr__add(&s->by_lat, lb, s->cur_ns);
		if (err)
			return err;
	}
	err = engine__spans(e, req);
	if (err)
		return err;
	err = carr__inc(&e->lat_counts, lb);
	if (!err)
		err = barr__max(&e->lat_max, lb, lat);
	return err;
}

int engine__add_request(struct engine *e, const struct cp_request *req)
{
	uint64_t lat;
	int err;

	if (req->end_ns < req->start_ns) {
		engine__warn(e, "request %s: ends before it starts (%llu < %llu), skipped",
			     req->id ? req->id : "?", (unsigned long long)req->end_ns,
			     (unsigned long long)req->start_ns);
		return 0;
	}
	if (!engine__wants(e, req)) {
		e->nfiltered++;
		return 0;
	}
	lat = req->end_ns - req->start_ns;
	e->gen++;
	e->interned = req->interned;
	/* a request served to a traced caller is counted once, in the caller's
	 * path (CPT), unless its service is asked for */
	if (req->downstream && !e->opts.filter.service) {
		err = engine__frames(e, req);
		err = err ?: engine__keep(e, req);
		if (err) {
			engine__warn(e, "request %s: out of memory while keeping it",
				     req->id ? req->id : "?");
			return err;
		}
		e->ndownstream++;
		if (e->opts.on_request)
			e->opts.on_request(e->opts.on_request_ctx, req);
		return 1;
	}
	err = engine__aggregate(e, req, lat);
	if (!err)
		err = engine__keep(e, req);
	if (err) {
		engine__warn(e, "request %s: out of memory while aggregating",
			     req->id ? req->id : "?");
		return err;
	}
	e->nrequests++;
	e->total_latency += lat;
	if (lat > e->max_latency)
		e->max_latency = lat;
	if (e->opts.on_request)
		e->opts.on_request(e->opts.on_request_ctx, req);
	return 1;
}

/* --- input aggregated elsewhere ------------------------------------------ */

uint32_t engine__bucket(uint64_t v)
{
	return bucket__of(v);
}

/* The stack of frames and category, made on first sight; -ENOMEM. */
int64_t engine__stack_of(struct engine *e, const char *const *frames, uint32_t nframes,
				enum cp_category category)
{
	struct cp_segment g = {.category = category, .frames = frames, .nframes = nframes};
	struct cp_request req = {.segs = &g, .nsegs = 1};
	int err;

	e->gen++; /* the frame memo and stack cache are per request */
	e->interned = false;
	err = engine__stacks_begin(e, &req);
	if (err)
		return err;
	return engine__stack(e, &g, e->gkeys, e->ghash[0]);
}

int engine__merge_step(struct engine *e, const struct engine_step_sums *m)
{
	int64_t id = engine__stack_of(e, m->frames, m->nframes, m->category);
	struct stack *s;
	int err = 0;

	if (id < 0)
		return (int)id;
	s = &e->stacks[id];
	if (!s->requests || m->min_ns < s->min_ns)
		s->min_ns = m->min_ns;
	if (m->max_ns > s->max_ns)
		s->max_ns = m->max_ns;
	s->total_ns += m->total_ns;
	s->sumsq += m->sumsq;
	if (m->nfew) {
		uint32_t have = s->few ? s->requests : 0;

		if (!s->few && !(s->few = malloc(ENGINE_FEW * sizeof(*s->few))))
			return -ENOMEM;
		for (uint32_t i = 0; i < m->nfew && have + i < ENGINE_FEW; i++)
			s->few[have + i] = m->few[i];
	}
	s->requests += (uint32_t)m->requests;
	err = carr__add_counts(&s->dist, m->dist, m->ndist);
	for (uint32_t i = 0; i < m->nby_lat && !err; i++)
		err = barr__add(&s->by_lat, m->by_lat[i].b, m->by_lat[i].v);
	return err;
}

int engine__merge_latency(struct engine *e, const struct engine_latency_sums *l)
{
	int err = 0;

	e->nrequests += l->nrequests;
	e->ndownstream += l->ndownstream;
	e->nfiltered += l->nfiltered;
	e->total_latency += l->total_ns;
	if (l->max_ns > e->max_latency)
		e->max_latency = l->max_ns;
	err = carr__add_counts(&e->lat_counts, l->counts, l->ncounts);
	for (uint32_t i = 0; i < l->nmax && !err; i++)
		err = barr__max(&e->lat_max, l->max[i].b, l->max[i].v);
	return err;
}

int engine__merge_culprit(struct engine *e, int32_t pid, int32_t tid, const char *comm,
			  enum cp_category category, uint64_t ns, uint32_t requests)
{
	struct culprit k = {pid, tid, NULL, category, 0, 0, 0, 0};
	struct culprit *c;

	e->gen++;
	e->interned = false;
	if (comm && !(k.comm = engine__frame(e, comm)))
		return -ENOMEM;
	c = engine__culprit(e, &k);
	if (!c)
		return -ENOMEM;
	c->ns += ns;
	c->requests += requests;
	return 0;
}

int engine__keep_request(struct engine *e, const struct cp_request *req)
{
	int err;

	e->gen++;
	e->interned = req->interned;
	err = engine__frames(e, req);
	err = err ?: engine__keep(e, req);
	if (err) {
		engine__warn(e, "request %s: out of memory while keeping it",
			     req->id ? req->id : "?");
		return err;
	}
	if (e->opts.on_request)
		e->opts.on_request(e->opts.on_request_ctx, req);
	return 0;
}
