// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Traces waiting for more spans: a request's spans (sorted by trace) become
 * a batch, each trace's run of them joins its waiting trace, and a trace is
 * analysed when the input ends or no span of it came for the window (then
 * remembered, so later spans are warned as its next part).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "span_internal.h"
#include "span_json.h"
#include "parser_int.h"
#include "util.h"

int span_pend__trace_cmp(const void *a, const void *b)
{
	const struct span_in *sa = a, *sb = b;
	int c;

	if (!sa->trace_id || !sb->trace_id)
		c = !sa->trace_id - !sb->trace_id;
	else
		c = strcmp(sa->trace_id, sb->trace_id);
	if (c)
		return c;
	return sa->seq < sb->seq ? -1 : sa->seq > sb->seq;
}

static bool same_trace(const struct span_in *a, const struct span_in *b)
{
	if (!a->trace_id || !b->trace_id)
		return !a->trace_id && !b->trace_id;
	return !strcmp(a->trace_id, b->trace_id);
}

/* ---- OTLP: traces over many requests ------------------------------------- */


struct pending *span_pend__at(struct span_parser *p, uint32_t i)
{
	return &((struct pending *)p->pend.v)[i];
}

static bool same_id(const char *a, const char *b)
{
	return a && b ? !strcmp(a, b) : a == b;
}

static uint32_t *bucket_of(struct span_parser *p, const char *id)
{
	return &((uint32_t *)p->buckets.v)[hash__cstr(id) & (p->buckets.n - 1)];
}

static uint32_t pend_find(struct span_parser *p, const char *id)
{
	if (!p->buckets.n)
		return NONE;
	for (uint32_t i = *bucket_of(p, id); i != NONE; i = span_pend__at(p, i)->hnext)
		if (same_id(span_pend__at(p, i)->id, id))
			return i;
	return NONE;
}

static void lru_unlink(struct span_parser *p, uint32_t i)
{
	struct pending *t = span_pend__at(p, i);

	if (t->prev != NONE)
		span_pend__at(p, t->prev)->next = t->next;
	else
		p->lru_head = t->next;
	if (t->next != NONE)
		span_pend__at(p, t->next)->prev = t->prev;
	else
		p->lru_tail = t->prev;
	t->prev = t->next = NONE;
}

static void lru_push(struct span_parser *p, uint32_t i)
{
	struct pending *t = span_pend__at(p, i);

	t->prev = p->lru_tail;
	t->next = NONE;
	if (p->lru_tail != NONE)
		span_pend__at(p, p->lru_tail)->next = i;
	else
		p->lru_head = i;
	p->lru_tail = i;
}

/* The hash chains, doubled when they get long. */
static int buckets_grow(struct span_parser *p)
{
	uint32_t n = p->buckets.n ? p->buckets.n * 2 : 256;

	if (span_vec__reserve(&p->buckets, sizeof(uint32_t), n))
		return -ENOMEM;
	p->buckets.n = n;
	memset(p->buckets.v, 0xff, n * sizeof(uint32_t));
	for (uint32_t i = 0; i < p->pend.n; i++) {
		struct pending *t = span_pend__at(p, i);
		uint32_t *b;

		if (!t->used)
			continue;
		b = bucket_of(p, t->id);
		t->hnext = *b;
		*b = i;
	}
	return 0;
}

static uint32_t pend_new(struct span_parser *p, const char *id, uint32_t part)
{
	struct pending *t;
	uint32_t i, *b;

	if (p->npend + 1 > p->buckets.n && buckets_grow(p))
		return NONE;
	if (p->free_pend != NONE) {
		i = p->free_pend;
		p->free_pend = span_pend__at(p, i)->hnext;
	} else {
		if (!span_vec__push(&p->pend, sizeof(struct pending)))
			return NONE;
		i = p->pend.n - 1;
		memset(span_pend__at(p, i), 0, sizeof(struct pending));
	}
	t = span_pend__at(p, i);
	t->id = id ? strdup(id) : NULL;
	if (id && !t->id)
		return NONE;
	t->used = true;
	t->file = p->f->name;
	t->part = part;
	t->nspans = 0;
	t->runs.n = 0;
	t->last_ts = INT64_MIN;
	b = bucket_of(p, id);
	t->hnext = *b;
	*b = i;
	t->prev = t->next = NONE;
	lru_push(p, i);
	p->npend++;
	return i;
}

/*
 * A batch's block: cut from the current chunk, whose count of live blocks
 * frees it for reuse when its last block goes. Requests wait and go about
 * in input order, so chunks empty in turn; malloc and free took 320
 * instructions a request of a span or two. Each block begins with its
 * chunk (NULL: a large block of its own).
 */
struct block_chunk {
	struct block_chunk *next; /* in free_chunks */
	uint32_t live, used;
	char data[];
};

#define CHUNK_DATA (BLOCK_CHUNK - sizeof(struct block_chunk))

/*
 * A new chunk, cut from a slab of 2 MiB aligned for a transparent huge
 * page: the window's blocks are tens of MiB, and their first touch was a
 * page fault each 4 KiB (a third of the system time on split OTLP). Where
 * huge pages are off or none is free, the slab is small pages as before.
 */
static struct block_chunk *chunk_new(struct span_parser *p)
{
	struct block_chunk *c;
	char *m, *al;
	void **at;

	if (!p->slab_left) {
		if (!(at = span_vec__push(&p->chunks, sizeof(*at))))
			return NULL;
		m = mmap(NULL, 2 * SLAB_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		if (m == MAP_FAILED) {
			p->chunks.n--;
			return NULL;
		}
		al = (char *)(((uintptr_t)m + SLAB_BYTES - 1) & ~(uintptr_t)(SLAB_BYTES - 1));
		if (al > m)
			munmap(m, al - m);
		munmap(al + SLAB_BYTES, m + SLAB_BYTES - al);
		(void)madvise(al, SLAB_BYTES, MADV_HUGEPAGE);
		*at = al;
		p->slab_next = al;
		p->slab_left = SLAB_BYTES / BLOCK_CHUNK;
	}
	c = (struct block_chunk *)p->slab_next;
	p->slab_next += BLOCK_CHUNK;
	p->slab_left--;
	return c;
}

static char *block_get(struct span_parser *p, size_t n)
{
	size_t need = 8 + ((n + 7) & ~(size_t)7);
	struct block_chunk *c = p->chunk;
	void **b;

	if (need > CHUNK_DATA / 4) {
		if (!(b = malloc(need)))
			return NULL;
		*b = NULL;
		return (char *)(b + 1);
	}
	if (c && !c->live)
		c->used = 0;
	if (!c || c->used + need > CHUNK_DATA) {
		if ((c = p->free_chunks)) {
			p->free_chunks = c->next;
		} else if (!(c = chunk_new(p))) {
			return NULL;
		}
		c->live = c->used = 0;
		if (p->chunk && !p->chunk->live) { /* the old one, empty */
			p->chunk->next = p->free_chunks;
			p->free_chunks = p->chunk;
		}
		p->chunk = c;
	}
	b = (void **)(c->data + c->used);
	c->used += need;
	c->live++;
	*b = c;
	return (char *)(b + 1);
}

static void block_put(struct span_parser *p, char *m)
{
	struct block_chunk *c;

	if (!m)
		return;
	c = ((struct block_chunk **)m)[-1];
	if (!c) {
		free((void **)m - 1);
		return;
	}
	if (!--c->live && c != p->chunk) {
		c->next = p->free_chunks;
		p->free_chunks = c;
	}
}

void span_pend__chunks_free(struct span_parser *p)
{
	for (uint32_t i = 0; i < p->chunks.n; i++)
		munmap(((void **)p->chunks.v)[i], SLAB_BYTES);
	free(p->chunks.v);
	p->chunks = (struct span_vec){0};
	p->chunk = p->free_chunks = NULL;
	p->slab_next = NULL;
	p->slab_left = 0;
}

void span_pend__batch_put(struct span_parser *p, struct batch *b)
{
	struct span_arena own;

	if (--b->refs)
		return;
	if (!b->own.head) {
		block_put(p, (char *)b);
		return;
	}
	own = b->own; /* b is in it */
	span_arena__free(&own);
}

/* Which part of a trace analysed by the window comes next (0: none). */
static uint32_t *early_part(struct span_parser *p, uint64_t h)
{
	uint32_t mask = 2 * p->early_cap - 1;

	if (!p->early_cap) /* none yet, or no memory for the first */
		return NULL;
	for (uint32_t k = (uint32_t)h & mask; p->early_ix[k] != NONE; k = (k + 1) & mask)
		if (p->early[p->early_ix[k]] == h)
			return &p->early_part[p->early_ix[k]];
	return NULL;
}

static void early_index(struct span_parser *p, uint32_t slot)
{
	uint32_t mask = 2 * p->early_cap - 1, k = (uint32_t)p->early[slot] & mask;

	while (p->early_ix[k] != NONE)
		k = (k + 1) & mask;
	p->early_ix[k] = slot;
}

/* Room for twice as many, up to EARLY_MAX: the ring has not wrapped yet, so
 * its slots stay where they are; the index is built again. Its memory is
 * touched as traces are analysed early, not all at the first one. */
static int early_grow(struct span_parser *p)
{
	uint32_t cap = p->early_cap ? p->early_cap * 2 : 1024;
	uint64_t *e = realloc(p->early, cap * sizeof(*e));
	uint32_t *part, *ix;

	if (e)
		p->early = e;
	part = e ? realloc(p->early_part, cap * sizeof(*part)) : NULL;
	if (part)
		p->early_part = part;
	ix = part ? malloc(2 * (size_t)cap * sizeof(*ix)) : NULL;
	if (!ix)
		return -ENOMEM;
	free(p->early_ix);
	p->early_ix = ix;
	p->early_cap = cap;
	memset(ix, 0xff, 2 * (size_t)cap * sizeof(*ix));
	for (uint32_t i = 0; i < p->nearly; i++)
		early_index(p, i);
	return 0;
}

/* Remembers a trace analysed by the window; the oldest goes when full (a
 * trace whose spans come back after a million others is a new one). */
static void early_add(struct span_parser *p, uint64_t h, uint32_t part)
{
	uint32_t slot, mask, *pp;

	if ((pp = early_part(p, h))) {
		*pp = part;
		return;
	}
	if (p->nearly == p->early_cap && p->early_cap < EARLY_MAX && early_grow(p))
		return; /* not remembered: later spans are a new trace */
	slot = (uint32_t)(p->nearly % EARLY_MAX);
	mask = 2 * p->early_cap - 1;
	if (p->nearly >= EARLY_MAX) { /* the oldest out: re-insert what follows its slot */
		uint64_t old = p->early[slot];
		uint32_t k = (uint32_t)old & mask;

		while (p->early_ix[k] != slot)
			k = (k + 1) & mask;
		p->early_ix[k] = NONE;
		for (uint32_t j = (k + 1) & mask; p->early_ix[j] != NONE; j = (j + 1) & mask) {
			uint32_t e = p->early_ix[j], home = (uint32_t)p->early[e] & mask;

			if ((j > k && (home <= k || home > j)) || (j < k && home <= k && home > j)) {
				p->early_ix[k] = e;
				p->early_ix[j] = NONE;
				k = j;
			}
		}
	}
	p->early[slot] = h;
	p->early_part[slot] = part;
	early_index(p, slot);
	p->nearly++;
}

/* Analyses waiting trace i and frees it. early: by the window, not at the
 * end of the input. */
static int pend_analyze(struct span_parser *p, uint32_t i, bool early)
{
	struct pending *t = span_pend__at(p, i);
	const struct run *runs = t->runs.v;
	struct span_in *out;
	const char **tags;
	const char *name = p->f->name, *id = t->id;
	char idbuf[512];
	uint32_t *b, n = 0;
	int err = 0;

	if (span_vec__reserve(&p->gather, sizeof(struct span_in), t->nspans))
		return -ENOMEM;
	out = p->gather.v;
	p->gtags.n = 0;
	for (uint32_t r = 0; r < t->runs.n; r++) {
		const struct batch *bt = runs[r].b;
		const struct span_in *in = bt->spans + runs[r].first;
		const char *const *bt_tags = bt->tags;
		uint32_t last_pfirst = NONE, last_pnew = 0;

		for (uint32_t k = 0; k < runs[r].n; k++) {
			struct span_in *sp = &out[n++];

			*sp = in[k];
			/* its tags, then its resource's (shared: once a run) */
			if (span_vec__reserve(&p->gtags, sizeof(char *), p->gtags.n + sp->ntags + sp->nptags))
				return -ENOMEM;
			tags = p->gtags.v;
			if (sp->ntags)
				memcpy(tags + p->gtags.n, bt_tags + sp->tag_first,
				       sp->ntags * sizeof(char *));
			sp->tag_first = p->gtags.n;
			p->gtags.n += sp->ntags;
			if (sp->nptags && sp->ptag_first != last_pfirst) {
				last_pfirst = sp->ptag_first;
				last_pnew = p->gtags.n;
				memcpy(tags + p->gtags.n, bt_tags + sp->ptag_first,
				       sp->nptags * sizeof(char *));
				p->gtags.n += sp->nptags;
			}
			sp->ptag_first = last_pnew;
		}
	}
	if (t->part > 1 && id) {
		snprintf(idbuf, sizeof(idbuf), "%s (part %u)", id, t->part);
		id = idbuf;
	}
	p->f->name = t->file;
	err = span_tree__analyze(p->f, id, out, n, p->gtags.v);
	p->f->name = name;
	if (early)
		early_add(p, hash__cstr(t->id), t->part + 1);
	for (uint32_t r = 0; r < t->runs.n; r++)
		span_pend__batch_put(p, runs[r].b);
	/* out of its chain and the LRU list, onto the free list */
	for (b = bucket_of(p, t->id); *b != i; b = &span_pend__at(p, *b)->hnext)
		;
	*b = t->hnext;
	lru_unlink(p, i);
	free(t->id);
	t->id = NULL;
	t->used = false;
	t->hnext = p->free_pend;
	p->free_pend = i;
	p->npend--;
	return err < 0 ? err : 0;
}

/* The traces no span of which came for the window. */
static int expire(struct span_parser *p, uint64_t off)
{
	while (p->lru_head != NONE) {
		struct pending *t = span_pend__at(p, p->lru_head);
		int err;

		if (t->last_off + p->window_bytes >= off &&
		    (t->last_ts == INT64_MIN || t->last_ts + p->window_ns >= p->max_ts))
			break;
		err = pend_analyze(p, p->lru_head, true);
		if (err)
			return err;
	}
	return 0;
}

int span_parser__flush(struct span_parser *p)
{
	while (p->lru_head != NONE) {
		int err = pend_analyze(p, p->lru_head, false);

		if (err)
			return err;
	}
	return 0;
}

/* A pointer f into the block of n bytes at from, moved to the copy at to */
static inline void move_ptr(const char **f, const char *from, size_t n, char *to)
{
	uintptr_t off = (uintptr_t)*f - (uintptr_t)from;

	if (*f && off < n)
		*f = to + off;
}

/*
 * The request's strings, spans and tags as a batch. Many batches wait at
 * once (a trace over many requests, a request a span or two): the usual
 * request, whose strings are in one chunk of the parser's arena, is copied
 * at its size into one block, the batch first, and its pointers moved
 * there; the parser keeps its arena. Otherwise the parser's arena becomes
 * the batch's (the batch in it too), and the parser starts a new one.
 */
static struct batch *batch_compact(struct span_parser *p, uint32_t n)
{
	size_t used = 0, so, spb = (size_t)n * sizeof(struct span_in),
	       tb = (size_t)p->tags.n * sizeof(char *), hb = (sizeof(struct batch) + 7) & ~(size_t)7;
	char *from = span_arena__single(&p->arena, &used), *mem = NULL;
	struct batch *b;

	if (from || !p->arena.head) {
		so = hb + ((used + 7) & ~(size_t)7);
		mem = block_get(p, so + spb + tb + 1);
		if (!mem)
			return NULL;
		b = (struct batch *)mem;
		b->own = (struct span_arena){0};
		if (used)
			memcpy(mem + hb, from, used);
		b->spans = (struct span_in *)(mem + so);
		b->tags = (const char **)(mem + so + spb);
	} else {
		/* the next request as large fits one chunk, and is copied */
		size_t head = span_arena__head_size(&p->arena);
		struct span_arena own = p->arena;

		p->arena = (struct span_arena){.chunk = head < 128 * 1024 ? 2 * head : 256 * 1024};
		b = span_arena__alloc(&own, sizeof(*b));
		if (b) {
			b->spans = span_arena__alloc(&own, spb ? spb : 1);
			b->tags = span_arena__alloc(&own, tb ? tb : 1);
		}
		if (!b || !b->spans || !b->tags) {
			span_arena__free(&own);
			return NULL;
		}
		b->own = own;
	}
	memcpy(b->spans, p->spans.v, spb);
	if (tb)
		memcpy(b->tags, p->tags.v, tb);
	b->nspans = n;
	b->ntags = p->tags.n;
	b->refs = 1;
	p->spans.n = 0;
	p->tags.n = 0;
	if (!mem || !used)
		return b;
	for (uint32_t i = 0; i < n; i++) {
		struct span_in *s = &b->spans[i];
		const char **f[] = {&s->id,	  &s->parent_id, &s->trace_id, &s->service,
				    &s->operation, &s->host,	  &s->hostname, &s->proc};

		for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
			move_ptr(f[k], from, used, mem + hb);
	}
	for (uint32_t i = 0; i < b->ntags; i++)
		move_ptr(&b->tags[i], from, used, mem + hb);
	span_arena__reset(&p->arena);
	return b;
}

/* The request's spans (sorted by trace) become a batch; each trace's run of
 * them joins its waiting trace. */
int span_pend__add_runs(struct span_parser *p, uint64_t off)
{
	uint32_t n = p->spans.n, i = 0;
	struct batch *b = batch_compact(p, n); /* one reference until every run is placed */
	struct span_in *sp;

	if (!b)
		return -ENOMEM;
	sp = b->spans;
	while (i < n) {
		uint32_t j = i + 1, ti, *part;
		struct pending *t;
		struct run *r;

		while (j < n && same_trace(&sp[i], &sp[j]))
			j++;
		ti = pend_find(p, sp[i].trace_id);
		if (ti == NONE) {
			part = p->nearly ? early_part(p, hash__cstr(sp[i].trace_id)) : NULL;
			if (part && *part)
				span__warnf(p->f,
					    "trace %s: %u more spans came after it was analysed (no "
					    "span of it for the window: --trace-window): analysed "
					    "again as part %u",
					    sp[i].trace_id ? sp[i].trace_id : "(no trace id)", j - i,
					    *part);
			ti = pend_new(p, sp[i].trace_id, part && *part ? *part : 1);
			if (ti == NONE) {
				span_pend__batch_put(p, b);
				return -ENOMEM;
			}
		} else {
			lru_unlink(p, ti);
			lru_push(p, ti);
		}
		t = span_pend__at(p, ti);
		r = span_vec__push(&t->runs, sizeof(*r));
		if (!r) {
			span_pend__batch_put(p, b);
			return -ENOMEM;
		}
		*r = (struct run){b, i, j - i};
		b->refs++;
		t->nspans += j - i;
		t->last_off = off;
		for (uint32_t k = i; k < j; k++)
			if (sp[k].has_end && !sp[k].bad_number && sp[k].end_ns > t->last_ts)
				t->last_ts = sp[k].end_ns;
		if (t->last_ts > p->max_ts)
			p->max_ts = t->last_ts;
		i = j;
	}
	span_pend__batch_put(p, b);
	return expire(p, off);
}

