// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * From the parsed spans of one trace to one struct cp_request: parent
 * resolution, repair of bad input, clock-skew correction, the walk
 * (span/walk.c), frames and per-span totals.
 *
 * Decisions (each bad case is warned, naming file, trace and span):
 * - A span without an id, without a start or an end, or whose end is before
 *   its start is dropped; its children become orphans.
 * - Duplicate span ids: the first wins, later ones are dropped.
 * - Several roots: the longest becomes the root (ties: earlier start, then
 *   smaller id); the others are re-attached under it like orphans. When
 *   there is no parentless span at all (the root was lost), the same rule
 *   picks the root among the orphans.
 * - Orphans (parent id not in the trace) and spans on a parent cycle (the
 *   cycle is cut at the first span found on it) are re-attached under the
 *   root, keeping their reference type: their parent was lost, and under the
 *   root their time still counts, clipped like any child.
 * - Clock skew: a child is clipped to its parent's (corrected) interval; a
 *   child wholly outside (sharing no time with a positive duration) is
 *   dropped with its subtree. A server span under a client span on another
 *   host (clock domain, see span_in.host) is CAPPED instead: its duration is
 *   kept, capped at the client's; if it does not fit inside the client it is
 *   moved, with its subtree, to the middle of the client span (the network
 *   is assumed to take equally long both ways, as Jaeger's skew adjuster
 *   does); when it is longer than the client it becomes the client's interval.
 *   FOLLOWS_FROM children are not clipped (async work may outlive its parent)
 *   and never block their parent.
 * - partial = true when input was dropped or the tree was repaired (orphans,
 *   cycles, several roots, bad spans, children outside their parents).
 *   Clipping and capping alone do not set it: a few µs of skew are in almost
 *   every real trace and are what the correction is for.
 *
 * Frames: one frame per level of the call path from the root, "service
 * operation" each, so the engine's merge by frame stack merges by call path
 * (same services and operations from the root down). Paths deeper than
 * SPAN_MAX_FRAMES keep the first SPAN_MAX_FRAMES - 2 levels, "…", and the
 * span's own level: the frame arrays (and the engine's merge) stay linear in
 * the number of spans even for a 100,000-deep chain.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "span_internal.h"
#include "util.h"
#include "span_walk.h"

#define SPAN_MAX_FRAMES 32
/* Times beyond these (ns; 2116 and 1896) are not taken: differences of
 * times, and skew shifts, must stay inside int64. */
#define SPAN_MAX_NS ((int64_t)1 << 62)
#define SPAN_MIN_NS (-((int64_t)1 << 61))
#define NONE UINT32_MAX

/* ---- arena and vectors --------------------------------------------------- */

struct span_arena_chunk {
	struct span_arena_chunk *next;
	size_t size;
	char data[];
};

void *span_arena__alloc(struct span_arena *a, size_t n)
{
	n = (n + 7) & ~(size_t)7;
	if ((size_t)(a->end - a->cur) < n) {
		/* a small first chunk when asked for, each next one twice the
		 * last, up to 256 KiB */
		size_t size = !a->chunk		    ? 256 * 1024
			      : !a->head		    ? a->chunk
			      : a->head->size < 128 * 1024 ? a->head->size * 2
							    : 256 * 1024;
		struct span_arena_chunk *c;

		if (n > size / 4)
			size = n + 1024;
		c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->size = size;
		c->next = a->head;
		a->head = c;
		a->cur = c->data;
		a->end = c->data + size;
	}
	a->cur += n;
	return a->cur - n;
}

char *span_arena__single(const struct span_arena *a, size_t *used)
{
	if (!a->head || a->head->next)
		return NULL;
	*used = (size_t)(a->cur - a->head->data);
	return a->head->data;
}

size_t span_arena__head_size(const struct span_arena *a)
{
	return a->head ? a->head->size : 0;
}

char *span_arena__strndup(struct span_arena *a, const char *s, size_t len)
{
	char *p = span_arena__alloc(a, len + 1);

	if (!p)
		return NULL;
	memcpy(p, s, len);
	p[len] = 0;
	return p;
}

void span_arena__reset(struct span_arena *a)
{
	struct span_arena_chunk *c = a->head;

	if (!c)
		return;
	while (c->next) {
		struct span_arena_chunk *next = c->next->next;

		free(c->next);
		c->next = next;
	}
	a->cur = c->data;
	a->end = c->data + c->size;
}

void span_arena__free(struct span_arena *a)
{
	while (a->head) {
		struct span_arena_chunk *next = a->head->next;

		free(a->head);
		a->head = next;
	}
	a->cur = a->end = NULL;
}

int span_vec__reserve(struct span_vec *v, size_t elem, uint32_t n)
{
	void *p;
	uint32_t cap;

	if (n <= v->cap)
		return 0;
	cap = v->cap ? v->cap : 64;
	while (cap < n)
		cap *= 2;
	p = realloc(v->v, (size_t)cap * elem);
	if (!p)
		return -ENOMEM;
	v->v = p;
	v->cap = cap;
	return 0;
}

void *span_vec__push(struct span_vec *v, size_t elem)
{
	if (v->n == v->cap && span_vec__reserve(v, elem, v->n + 1))
		return NULL;
	return (char *)v->v + (size_t)v->n++ * elem;
}

/* ---- warnings ------------------------------------------------------------ */

void span__warnf(struct span_file *f, const char *fmt, ...)
{
	char msg[1024];
	int len;
	va_list ap;

	if (f->nwarnings++ >= SPAN_MAX_WARNINGS_PER_FILE)
		return;
	len = snprintf(msg, sizeof(msg), "%s: ", f->name);
	va_start(ap, fmt);
	vsnprintf(msg + len, sizeof(msg) - len, fmt, ap);
	va_end(ap);
	if (f->sink->warn)
		f->sink->warn(f->sink->ctx, msg);
}

void span__warn_summary(struct span_file *f)
{
	char msg[512];

	if (f->nwarnings <= SPAN_MAX_WARNINGS_PER_FILE || !f->sink->warn)
		return;
	snprintf(msg, sizeof(msg), "%s: %u more warnings not shown", f->name,
		 f->nwarnings - SPAN_MAX_WARNINGS_PER_FILE);
	f->sink->warn(f->sink->ctx, msg);
}

/* ---- per-trace scratch, reused across traces ------------------------------ */

enum {
	ST_BAD = 1,
	ST_ROOT = 2,
	ST_ORPHAN = 4,
	ST_DONE = 8,
	ST_VISIT = 16,
	ST_KEPT = 32,
	ST_CYCLE = 64, /* an orphan because its parent cycle was cut there */
};

struct span_tree {
	struct span_arena out;	      /* frames, labels: valid until the next trace */
	struct span_vec slots;	      /* uint32_t: id hash table */
	struct span_vec parent;	      /* uint32_t */
	struct span_vec state;	      /* uint8_t */
	struct span_vec order;	      /* uint32_t: top-down order of kept spans */
	struct span_vec shift;	      /* int64_t: skew correction inherited by a subtree */
	struct span_vec nodes;	      /* struct sw_node */
	struct span_vec children;     /* uint32_t */
	struct span_vec all_children; /* uint32_t: every child, for the top-down pass */
	struct span_vec all_first;    /* uint32_t */
	struct span_vec stack;	      /* struct sw_frame, also the cycle walk */
	struct span_vec secs;	      /* struct sw_section */
	struct span_vec segs;	      /* struct cp_segment */
	struct span_vec stats;	      /* struct cp_span_stat */
	struct span_vec frames;	      /* const char **: per span */
	struct span_vec nframes;      /* uint32_t */
	struct span_vec prefix;	      /* uint32_t: per span, its stat's prefix */
	struct span_vec cut;	      /* uint32_t: per span, its stat's SPAN_MAX_FRAMES - 2 level */
	struct span_vec kof;	      /* uint32_t: per span, its stat's index */
	struct span_vec tagset;	      /* const char *: hash set */
	struct span_vec tagseen;      /* uint8_t per tag index: looked at already */
	struct span_vec tags;	      /* const char *: the request's, NULL-terminated */
	struct span_vec ext;	      /* struct span_in: the trace with placeholders */
	struct span_vec roots;	      /* uint32_t */
	struct span_vec label;	      /* char: a frame's label before it is interned */
};


static const char *tid_of(const char *trace_id)
{
	return trace_id ? trace_id : "(no trace id)";
}

/* Longest first, then earliest start, then smaller id: the root among candidates. */
static bool better_root(const struct span_in *a, const struct span_in *b)
{
	int64_t da = a->end_ns - a->start_ns, db = b->end_ns - b->start_ns;
	size_t la = strlen(a->id), lb = strlen(b->id);

	if (da != db)
		return da > db;
	if (a->start_ns != b->start_ns)
		return a->start_ns < b->start_ns;
	if (la != lb)
		return la < lb;
	return strcmp(a->id, b->id) < 0;
}

#define RESERVE(vec, type, count)                                                                  \
	do {                                                                                       \
		if (span_vec__reserve(&t->vec, sizeof(type), (count)))                             \
			return -ENOMEM;                                                            \
	} while (0)

/* Validity, duplicate ids and parent indices. */
static int resolve_parents(struct span_file *f, struct span_tree *t, const char *trace_id,
			   struct span_in *sp, uint32_t n)
{
	uint32_t nslots = 16, mask, *slots, *parent;
	uint8_t *st;

	while (nslots < 2 * n)
		nslots *= 2;
	mask = nslots - 1;
	RESERVE(slots, uint32_t, nslots);
	RESERVE(parent, uint32_t, n);
	RESERVE(state, uint8_t, n);
	slots = t->slots.v;
	parent = t->parent.v;
	st = t->state.v;
	memset(slots, 0xff, nslots * sizeof(uint32_t));
	memset(st, 0, n);

	for (uint32_t i = 0; i < n; i++) {
		struct span_in *s = &sp[i];
		uint32_t h;

		if (!s->id || !*s->id) {
			span__warnf(f, "trace %s: span #%u (%s): no span id, span dropped",
				    tid_of(trace_id), i, s->operation ? s->operation : "?");
			st[i] = ST_BAD;
			continue;
		}
		if (!s->has_start || !s->has_end || s->bad_number) {
			span__warnf(f, "trace %s: span %s: %s, span dropped", tid_of(trace_id),
				    s->id,
				    s->bad_number ? "a time is not a number"
						  : "no start time or no duration/end time");
			st[i] = ST_BAD;
			continue;
		}
		if (s->start_ns < SPAN_MIN_NS || s->start_ns >= SPAN_MAX_NS ||
		    s->end_ns < SPAN_MIN_NS || s->end_ns >= SPAN_MAX_NS) {
			span__warnf(f,
				    "trace %s: span %s: time out of range ([%lld, %lld] ns), span "
				    "dropped",
				    tid_of(trace_id), s->id, (long long)s->start_ns,
				    (long long)s->end_ns);
			st[i] = ST_BAD;
			continue;
		}
		if (s->end_ns < s->start_ns) {
			span__warnf(f,
				    "trace %s: span %s: negative duration (%lld ns), span dropped",
				    tid_of(trace_id), s->id, (long long)(s->end_ns - s->start_ns));
			st[i] = ST_BAD;
			continue;
		}
		for (h = hash__cstr(s->id) & mask; slots[h] != NONE; h = (h + 1) & mask)
			if (!strcmp(sp[slots[h]].id, s->id))
				break;
		if (slots[h] != NONE) {
			span__warnf(f, "trace %s: span %s: duplicate span id, later copy dropped",
				    tid_of(trace_id), s->id);
			st[i] = ST_BAD;
			continue;
		}
		slots[h] = i;
	}
	for (uint32_t i = 0; i < n; i++) {
		const char *pid = sp[i].parent_id;
		uint32_t h;

		parent[i] = NONE;
		if (st[i] & ST_BAD)
			continue;
		if (!pid || !*pid) {
			st[i] |= ST_ROOT;
			continue;
		}
		for (h = hash__cstr(pid) & mask; slots[h] != NONE; h = (h + 1) & mask)
			if (!strcmp(sp[slots[h]].id, pid))
				break;
		if (slots[h] == NONE) {
			st[i] |= ST_ORPHAN;
			continue;
		}
		parent[i] = slots[h];
	}
	return 0;
}

/* Cuts every parent cycle (once, at the span where the climb meets itself):
 * climbs each span's parent chain, marking it, until a root, an orphan or an
 * already finished span; meeting a span of the current climb is a cycle.
 * Every span is climbed over once: linear. */
static int break_cycles(struct span_file *f, struct span_tree *t, const char *trace_id,
			struct span_in *sp, uint32_t n)
{
	uint32_t *parent = t->parent.v, *stack;
	uint8_t *st = t->state.v;

	RESERVE(order, uint32_t, n + 1); /* free until correct_skew */
	stack = t->order.v;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t sp_n = 0, j = i;

		if (st[i] & (ST_BAD | ST_DONE))
			continue;
		while (!(st[j] & (ST_DONE | ST_ROOT | ST_ORPHAN))) {
			if (st[j] & ST_VISIT) {
				span__warnf(f,
					    "trace %s: span %s: parent cycle (through parent %s), "
					    "span re-attached under the root",
					    tid_of(trace_id), sp[j].id, sp[parent[j]].id);
				parent[j] = NONE;
				st[j] |= ST_ORPHAN | ST_CYCLE;
				break;
			}
			st[j] |= ST_VISIT;
			stack[sp_n++] = j;
			j = parent[j];
		}
		while (sp_n)
			st[stack[--sp_n]] |= ST_DONE;
		st[j] |= ST_DONE;
	}
	return 0;
}

/* Children lists (all references) in CSR form, then the top-down pass that
 * corrects skew and fills the walk's nodes. Returns the number of kept spans. */
/* What one request's pass found, for its trace's warnings. */
struct tree_counts {
	bool partial;
	uint32_t skewed;   /* server spans moved or capped into their client */
	uint32_t excluded; /* spans dropped by --exclude-op, with their subtrees */
};

/* s matches one of --exclude-op's SERVICE:OPERATION. */
static bool excluded(const struct span_file *f, const struct span_in *s)
{
	for (uint32_t i = 0; i < f->nexclude; i++) {
		const char *x = f->exclude[i], *colon = strchr(x, ':');
		size_t ls = colon ? (size_t)(colon - x) : strlen(x);

		if (strlen(s->service) == ls && !memcmp(s->service, x, ls) &&
		    (!colon || !strcmp(colon + 1, s->operation)))
			return true;
	}
	return false;
}

static int correct_skew(struct span_file *f, struct span_tree *t, const char *trace_id,
			struct span_in *sp, uint32_t n, uint32_t root, struct tree_counts *tc)
{
	uint32_t *parent = t->parent.v, *first, *kids, *order, *bk, nk = 0, head = 0, tail = 0;
	uint8_t *st = t->state.v;
	int64_t *shift;
	struct sw_node *nodes;

	RESERVE(all_first, uint32_t, n + 1);
	RESERVE(all_children, uint32_t, n);
	RESERVE(order, uint32_t, n);
	RESERVE(shift, int64_t, n);
	RESERVE(nodes, struct sw_node, n);
	RESERVE(children, uint32_t, n);
	first = t->all_first.v;
	kids = t->all_children.v;
	order = t->order.v;
	shift = t->shift.v;
	nodes = t->nodes.v;
	bk = t->children.v;

	/* counting sort by parent: children of p are kids[first[p] .. first[p+1]) */
	memset(first, 0, (n + 1) * sizeof(uint32_t));
	for (uint32_t i = 0; i < n; i++)
		nodes[i] = (struct sw_node){0};
	for (uint32_t i = 0; i < n; i++)
		if (parent[i] != NONE)
			first[parent[i] + 1]++;
	for (uint32_t i = 0; i < n; i++)
		first[i + 1] += first[i];
	for (uint32_t i = 0; i < n; i++)
		if (parent[i] != NONE)
			kids[first[parent[i]]++] = i;
	for (uint32_t i = n; i > 0; i--)
		first[i] = first[i - 1];
	first[0] = 0;

	shift[root] = 0;
	nodes[root].start = sp[root].start_ns;
	nodes[root].end = sp[root].end_ns;
	order[tail++] = root;
	st[root] |= ST_KEPT;
	while (head < tail) {
		uint32_t p = order[head++];
		struct sw_node *pn = &nodes[p];

		pn->id = sp[p].id;
		pn->id_len = strlen(sp[p].id);
		pn->child_first = nk;
		pn->nchild = 0;
		for (uint32_t k = first[p]; k < first[p + 1]; k++) {
			uint32_t c = kids[k];
			struct span_in *cs = &sp[c];
			int64_t s = cs->start_ns + shift[p], e = cs->end_ns + shift[p];

			shift[c] = shift[p];
			if (f->nexclude && excluded(f, cs)) {
				tc->excluded++;
				continue; /* not walked, nor its subtree */
			}
			if (cs->follows) {
				/* async: neither clipped nor blocking */
			} else if (cs->kind == SPAN_KIND_SERVER && sp[p].kind == SPAN_KIND_CLIENT &&
				   cs->host && sp[p].host && strcmp(cs->host, sp[p].host)) {
				int64_t d = e - s, pd = pn->end - pn->start, ns = s;

				if (d >= pd) {
					tc->skewed += d > pd || s != pn->start;
					ns = pn->start;
					d = pd;
				} else if (s < pn->start || e > pn->end) {
					tc->skewed++;
					ns = pn->start + (pd - d) / 2;
				}
				shift[c] += ns - s;
				s = ns;
				e = ns + d;
			} else {
				if (e < pn->start || s > pn->end ||
				    (e > s && (e == pn->start || s == pn->end))) {
					span__warnf(
					    f,
					    "trace %s: span %s: [%lld, %lld] ns lies outside "
					    "its parent %s, dropped with its subtree",
					    tid_of(trace_id), cs->id, (long long)s, (long long)e,
					    sp[p].id);
					tc->partial = true;
					continue;
				}
				if (s < pn->start)
					s = pn->start;
				if (e > pn->end)
					e = pn->end;
			}
			nodes[c].start = s;
			nodes[c].end = e;
			st[c] |= ST_KEPT;
			order[tail++] = c;
			if (!cs->follows) {
				bk[nk++] = c;
				pn->nchild++;
			}
		}
	}
	return (int)tail;
}

/* "service operation": the sink's copy when it interns (into lbuf), else
 * the trace's */
static const char *frame_label(const struct span_file *f, struct span_tree *t,
			       const struct span_in *s)
{
	size_t ls = strlen(s->service), lo = strlen(s->operation);
	char *label;

	if (span_vec__reserve(&t->label, 1, ls + lo + 2))
		return NULL;
	label = f->sink->intern ? t->label.v : span_arena__alloc(&t->out, ls + lo + 2);
	if (!label)
		return NULL;
	memcpy(label, s->service, ls);
	label[ls] = ' ';
	memcpy(label + ls + 1, s->operation, lo + 1);
	return f->sink->intern ? f->sink->intern(f->sink->ctx, label) : label;
}

/* Frames for every kept span, parents first (top-down order). */
static int build_frames(const struct span_file *f, struct span_tree *t, struct span_in *sp,
			uint32_t n, uint32_t nkept)
{
	const char *more = f->sink->intern ? f->sink->intern(f->sink->ctx, "…") : "…";

	const uint32_t *order = t->order.v, *parent = t->parent.v;
	uint32_t *nfr, *prefix, *cut, *kof;
	const char ***frames;

	RESERVE(frames, const char **, n);
	RESERVE(nframes, uint32_t, n);
	RESERVE(prefix, uint32_t, n);
	RESERVE(cut, uint32_t, n);
	RESERVE(kof, uint32_t, n);
	frames = t->frames.v;
	nfr = t->nframes.v;
	prefix = t->prefix.v;
	cut = t->cut.v;
	kof = t->kof.v;
	for (uint32_t k = 0; k < nkept; k++) {
		uint32_t i = order[k], p = k ? parent[i] : NONE, pn = p == NONE ? 0 : nfr[p];
		const char *label = frame_label(f, t, &sp[i]);
		const char **fr;
		uint32_t m;

		if (!label || !more)
			return -ENOMEM;
		m = pn < SPAN_MAX_FRAMES ? pn + 1 : SPAN_MAX_FRAMES;
		fr = span_arena__alloc(&t->out, m * sizeof(*fr));
		if (!fr)
			return -ENOMEM;
		/* prefix: the parent's stat, or below a cut path the stat of
		 * its last level kept (the engine walks "…" and the label) */
		if (!pn) {
			prefix[i] = 0; /* the root */
		} else if (pn < SPAN_MAX_FRAMES) {
			memcpy(fr, frames[p], pn * sizeof(*fr));
			prefix[i] = kof[p] + 1;
		} else {
			memcpy(fr, frames[p], (SPAN_MAX_FRAMES - 2) * sizeof(*fr));
			fr[SPAN_MAX_FRAMES - 2] = more;
			prefix[i] = cut[p];
		}
		fr[m - 1] = label;
		frames[i] = fr;
		nfr[i] = m;
		kof[i] = k;
		cut[i] = m == SPAN_MAX_FRAMES - 2 ? k + 1 : m > SPAN_MAX_FRAMES - 2 ? cut[p] : 0;
	}
	return 0;
}

/* Every distinct "key=value" of the kept spans and their processes. */
static int collect_tags(struct span_tree *t, struct span_in *sp, uint32_t nkept,
			const char *const *tags)
{
	const uint32_t *order = t->order.v;
	uint32_t total = 0, nslots = 16, mask, ntags = 0;
	const char **set, **out;
	uint8_t *seen;

	t->tags.n = 0;
	for (uint32_t k = 0; k < nkept; k++) {
		const struct span_in *s = &sp[order[k]];

		total += s->ntags + s->nptags;
		if (s->ntags && s->tag_first + s->ntags > ntags)
			ntags = s->tag_first + s->ntags;
		if (s->nptags && s->ptag_first + s->nptags > ntags)
			ntags = s->ptag_first + s->nptags;
	}
	if (!total || !tags)
		return 0;
	/* the spans of a process share its tags: each index is hashed once */
	RESERVE(tagseen, uint8_t, ntags);
	seen = t->tagseen.v;
	memset(seen, 0, ntags);
	while (nslots < 2 * total)
		nslots *= 2;
	mask = nslots - 1;
	RESERVE(tagset, const char *, nslots);
	RESERVE(tags, const char *, total + 1);
	set = t->tagset.v;
	out = t->tags.v;
	memset(set, 0, nslots * sizeof(*set));
	for (uint32_t k = 0; k < nkept; k++) {
		const struct span_in *s = &sp[order[k]];

		for (int pass = 0; pass < 2; pass++) {
			uint32_t a = pass ? s->ptag_first : s->tag_first;
			uint32_t b = a + (pass ? s->nptags : s->ntags);

			for (uint32_t j = a; j < b; j++) {
				const char *tag = tags[j];
				uint32_t h;

				if (seen[j])
					continue;
				seen[j] = 1;
				for (h = hash__cstr(tag) & mask; set[h]; h = (h + 1) & mask)
					if (set[h] == tag || !strcmp(set[h], tag))
						break;
				if (set[h])
					continue;
				set[h] = tag;
				out[t->tags.n++] = tag;
			}
		}
	}
	out[t->tags.n] = NULL;
	return 0;
}

static struct span_tree *tree_of(struct span_file *f)
{
	if (!f->tree)
		f->tree = calloc(1, sizeof(struct span_tree));
	return f->tree;
}

void span_tree__free(struct span_file *f)
{
	struct span_tree *t = f->tree;
	struct span_vec *vecs[] = {
	    &t->slots,	  &t->parent,	    &t->state,	   &t->order,  &t->shift, &t->nodes,
	    &t->children, &t->all_children, &t->all_first, &t->stack,  &t->secs,  &t->segs,
	    &t->stats,	  &t->frames,	    &t->nframes,   &t->tagset, &t->tags,  &t->tagseen,
	    &t->ext,	  &t->roots,	    &t->label,	   &t->prefix, &t->cut,	  &t->kof};

	if (!t)
		return;
	for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++)
		free(vecs[i]->v);
	span_arena__free(&t->out);
	free(t);
	f->tree = NULL;
}

static const char MISSING_SERVICE[] = "(missing)";
static const char MISSING_OP[] = "(missing span)";

/*
 * Spans whose parent never appears become children of one placeholder per
 * missing parent id, spanning them: the trace with the placeholders after
 * its spans, in t->ext. Returns how many were added.
 */
static int add_placeholders(struct span_tree *t, struct span_in *sp, uint32_t n, uint32_t *norph)
{
	const uint8_t *st = t->state.v;
	uint32_t nslots = 16, mask, *slots, m = 0;
	struct span_in *ext;

	*norph = 0;
	for (uint32_t i = 0; i < n; i++)
		*norph += (st[i] & (ST_ORPHAN | ST_CYCLE | ST_BAD)) == ST_ORPHAN;
	if (!*norph)
		return 0;
	while (nslots < 2 * *norph)
		nslots *= 2;
	mask = nslots - 1;
	RESERVE(ext, struct span_in, n + *norph);
	RESERVE(roots, uint32_t, nslots); /* the placeholders' id table, for now */
	ext = t->ext.v;
	slots = t->roots.v;
	memcpy(ext, sp, n * sizeof(*ext));
	memset(slots, 0xff, nslots * sizeof(*slots));
	for (uint32_t i = 0; i < n; i++) {
		const struct span_in *c = &sp[i];
		struct span_in *ph;
		uint32_t h;

		if ((st[i] & (ST_ORPHAN | ST_CYCLE | ST_BAD)) != ST_ORPHAN)
			continue;
		for (h = hash__cstr(c->parent_id) & mask; slots[h] != NONE; h = (h + 1) & mask)
			if (!strcmp(ext[slots[h]].id, c->parent_id))
				break;
		if (slots[h] == NONE) {
			const char *grand = NULL;

			/* a span that is there but was dropped (bad times) keeps
			 * its place in the tree: its placeholder has its parent */
			for (uint32_t j = 0; j < n && !grand; j++)
				if ((st[j] & ST_BAD) && sp[j].id && !strcmp(sp[j].id, c->parent_id) &&
				    sp[j].parent_id && strcmp(sp[j].parent_id, c->parent_id))
					grand = sp[j].parent_id;
			slots[h] = n + m++;
			ext[slots[h]] = (struct span_in){
			    .id = c->parent_id,
			    .parent_id = grand,
			    .trace_id = c->trace_id,
			    .service = MISSING_SERVICE,
			    .operation = MISSING_OP,
			    .host = c->host,
			    .seq = n + m - 1,
			    .start_ns = c->start_ns,
			    .end_ns = c->end_ns,
			    .has_start = true,
			    .has_end = true,
			};
		}
		ph = &ext[slots[h]];
		if (c->start_ns < ph->start_ns)
			ph->start_ns = c->start_ns;
		if (c->end_ns > ph->end_ns)
			ph->end_ns = c->end_ns;
	}
	return (int)m;
}

/* One root's request: skew, the walk, frames, tags, to the sink. */
static int analyze_root(struct span_file *f, struct span_tree *t, const char *trace_id,
			const char *req_id, struct span_in *sp, uint32_t n, uint32_t root,
			const char *const *tags, struct tree_counts *tc)
{
	uint32_t nsecs = 0;
	struct sw_tree wt;
	struct cp_request req = {0};
	struct cp_segment *segs;
	struct cp_span_stat *stats;
	struct sw_section *secs;
	int err, nkept;

	((uint32_t *)t->parent.v)[root] = NONE;
	nkept = correct_skew(f, t, trace_id, sp, n, root, tc);
	if (nkept < 0)
		return nkept;

	/* the walk */
	wt = (struct sw_tree){t->nodes.v, t->children.v, n, root};
	RESERVE(stack, struct sw_frame, n + 1);
	RESERVE(secs, struct sw_section, 2 * n + 1);
	span_walk__sort_children(&wt);
	err = span_walk__run(&wt, f->overlap_tolerance, t->stack.v, t->secs.v, &nsecs);
	if (err)
		return err;
	err = build_frames(f, t, sp, n, nkept);
	t->tags.n = 0;
	if (!err && !f->sink->ignores_tags)
		err = collect_tags(t, sp, nkept, tags);
	if (err)
		return err;

	/* the request */
	RESERVE(segs, struct cp_segment, nsecs + 1);
	RESERVE(stats, struct cp_span_stat, nkept);
	segs = t->segs.v;
	stats = t->stats.v;
	secs = t->secs.v;
	for (uint32_t k = 0; k < nsecs; k++) {
		const struct span_in *s = &sp[secs[k].node];

		segs[k] = (struct cp_segment){
		    .start_ns = secs[k].start,
		    .end_ns = secs[k].end,
		    .category = CP_CAT_SPAN,
		    .frames = ((const char *const **)t->frames.v)[secs[k].node],
		    .nframes = ((uint32_t *)t->nframes.v)[secs[k].node],
		    .pid = -1,
		    .tid = -1,
		    .cpu = -1,
		    .span_id = s->id,
		    .service = s->service,
		    .operation = s->operation,
		};
	}
	for (int k = 0; k < nkept; k++) {
		uint32_t i = ((uint32_t *)t->order.v)[k];
		const struct sw_node *nd = &((struct sw_node *)t->nodes.v)[i];

		stats[k] = (struct cp_span_stat){
		    .span_id = sp[i].id,
		    .service = sp[i].service,
		    .operation = sp[i].operation,
		    .frames = ((const char *const **)t->frames.v)[i],
		    .nframes = ((uint32_t *)t->nframes.v)[i],
		    .prefix = ((uint32_t *)t->prefix.v)[i],
		    .inclusive_ns = (uint64_t)(nd->end - nd->start),
		    .exclusive_ns = (uint64_t)nd->excl, /* 0 where the walk never went */
		};
	}
	req.id = req_id;
	req.service = sp[root].service;
	req.name = sp[root].operation;
	req.host = sp[root].hostname;
	if (f->sink->intern) {
		req.interned = true;
		if (!(req.service = f->sink->intern(f->sink->ctx, req.service)) ||
		    !(req.name = f->sink->intern(f->sink->ctx, req.name)) ||
		    (req.host && !(req.host = f->sink->intern(f->sink->ctx, req.host))))
			return -ENOMEM;
	}
	req.start_ns = (uint64_t)sp[root].start_ns;
	req.end_ns = (uint64_t)sp[root].end_ns;
	req.partial = tc->partial || tc->excluded;
	req.segs = segs;
	req.nsegs = nsecs;
	req.spans = stats;
	req.nspans = nkept;
	req.tags = t->tags.n ? (const char *const *)t->tags.v : NULL;
	err = f->sink->request(f->sink->ctx, &req);
	if (err < 0)
		return err;
	f->ntraces++;
	return 1;
}

static int root_cmp(const void *a, const void *b, void *ctx)
{
	const struct span_in *sp = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return better_root(&sp[x], &sp[y]) ? -1 : better_root(&sp[y], &sp[x]) ? 1 : 0;
}

/*
 * The roots of a trace: its parentless spans and the placeholders of
 * missing parents (the .NET exporter, for one, never exports a root
 * whose children it did) each get a request, as Jaeger UI shows each
 * root; the best first, named by the trace id, the others "TRACE#SPAN".
 * A span whose parent cycle was cut goes under the first root.
 */
int span_tree__analyze(struct span_file *f, const char *trace_id, struct span_in *sp, uint32_t n,
		       const char *const *tags)
{
	struct span_tree *t = tree_of(f);
	uint32_t *parent, *roots, nroots = 0, norph = 0, nbad = 0, nph = 0;
	struct tree_counts total = {0};
	uint8_t *st;
	int err, made = 0;

	if (!t)
		return -ENOMEM;
	f->nspans += n;
	span_arena__reset(&t->out);
	if (!n) {
		span__warnf(f, "trace %s: no spans, trace skipped", tid_of(trace_id));
		return 0;
	}
	err = resolve_parents(f, t, trace_id, sp, n);
	if (!err)
		err = break_cycles(f, t, trace_id, sp, n);
	if (err)
		return err;
	err = add_placeholders(t, sp, n, &norph);
	if (err < 0)
		return err;
	if (err > 0) {
		nph = (uint32_t)err;
		sp = t->ext.v;
		n += nph;
		err = resolve_parents(f, t, trace_id, sp, n);
		if (!err)
			err = break_cycles(f, t, trace_id, sp, n);
		if (err)
			return err;
	}
	parent = t->parent.v;
	st = t->state.v;
	RESERVE(roots, uint32_t, n);
	roots = t->roots.v;
	for (uint32_t i = 0; i < n; i++) {
		/* bad spans dropped, cycles cut: every request of the trace
		 * was repaired */
		nbad += !!(st[i] & (ST_BAD | ST_CYCLE));
		/* (an orphan still: a placeholder whose parent is missing too) */
		if ((st[i] & (ST_ROOT | ST_BAD)) == ST_ROOT ||
		    (st[i] & (ST_ORPHAN | ST_CYCLE | ST_BAD)) == ST_ORPHAN)
			roots[nroots++] = i;
	}
	if (!nroots) { /* every span on a cycle: its cut becomes the root */
		for (uint32_t i = 0; i < n && !nroots; i++)
			if ((st[i] & (ST_CYCLE | ST_BAD)) == ST_CYCLE)
				roots[nroots++] = i;
	}
	if (!nroots) {
		span__warnf(f, "trace %s: no usable span, trace skipped", tid_of(trace_id));
		return 0;
	}
	qsort_r(roots, nroots, sizeof(*roots), root_cmp, sp);
	for (uint32_t i = 0; i < n; i++)
		if ((st[i] & (ST_CYCLE | ST_BAD)) == ST_CYCLE && i != roots[0])
			parent[i] = roots[0]; /* warned where the cycle was cut */
	if (nph)
		span__warnf(f,
			    "trace %s: %u spans whose parent is not in the trace, under %u "
			    "placeholder spans \"%s %s\" (their own time is a blind spot)%s",
			    tid_of(trace_id), norph, nph, MISSING_SERVICE, MISSING_OP,
			    nroots > 1 ? "; its roots each analysed as a request" : "");
	else if (nroots > 1)
		span__warnf(f, "trace %s: %u roots, each analysed as a request", tid_of(trace_id),
			    nroots);
	for (uint32_t r = 0; r < nroots; r++) {
		struct tree_counts tc = {.partial = nbad || sp[roots[r]].operation == MISSING_OP};
		const char *id = tid_of(trace_id);

		if (f->nexclude && excluded(f, &sp[roots[r]])) {
			total.excluded++;
			continue;
		}
		if (r) {
			size_t lt = strlen(id), ls = strlen(sp[roots[r]].id);
			char *rid = span_arena__alloc(&t->out, lt + ls + 2);

			if (!rid)
				return -ENOMEM;
			memcpy(rid, id, lt);
			rid[lt] = '#';
			memcpy(rid + lt + 1, sp[roots[r]].id, ls + 1);
			id = rid;
		}
		err = analyze_root(f, t, trace_id, id, sp, n, roots[r], tags, &tc);
		if (err < 0)
			return err;
		made += err;
		total.skewed += tc.skewed;
		total.excluded += tc.excluded;
	}
	if (total.skewed)
		span__warnf(f,
			    "trace %s: %u server spans lay outside their client span (clock skew "
			    "between hosts): moved inside it, their durations kept (capped at the "
			    "client's)",
			    tid_of(trace_id), total.skewed);
	return made ? 1 : 0;
}
