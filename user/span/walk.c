// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The span-level critical-path walk; the rule is stated in span_walk.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "span_walk.h"

static int id_cmp(const struct sw_node *a, const struct sw_node *b)
{
	/* hex ids: the shorter is the smaller number; equal lengths compare as bytes */
	if (a->id_len != b->id_len)
		return a->id_len < b->id_len ? -1 : 1;
	if (!a->id_len)
		return 0;
	return memcmp(a->id, b->id, a->id_len);
}

/* Last-finishing first; equal ends: earlier start first, then smaller id. */
static int child_cmp(const void *pa, const void *pb, void *ctx)
{
	const struct sw_node *nodes = ctx;
	const struct sw_node *a = &nodes[*(const uint32_t *)pa];
	const struct sw_node *b = &nodes[*(const uint32_t *)pb];

	if (a->end != b->end)
		return a->end > b->end ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return id_cmp(a, b);
}

void span_walk__sort_children(struct sw_tree *t)
{
	for (uint32_t i = 0; i < t->nnodes; i++) {
		const struct sw_node *s = &t->nodes[i];

		if (s->nchild > 1)
			qsort_r(&t->children[s->child_first], s->nchild, sizeof(uint32_t),
				child_cmp, t->nodes);
	}
}

int span_walk__run(struct sw_tree *t, double overlap_tolerance, struct sw_frame *stack,
		   struct sw_section *out, uint32_t *nout)
{
	struct sw_node *nodes = t->nodes;
	uint32_t sp = 0, n = 0;

	*nout = 0;
	if (t->root >= t->nnodes)
		return -EINVAL;
	for (uint32_t i = 0; i < t->nnodes; i++)
		nodes[i].excl = 0;

	/* Sections come out backwards in time (the walk goes from the end);
	 * they are reversed at the end. */
	stack[sp++] = (struct sw_frame){t->root, nodes[t->root].child_first, nodes[t->root].end};
	while (sp) {
		struct sw_frame *f = &stack[sp - 1];
		struct sw_node *s = &nodes[f->node];
		int64_t tol = (int64_t)(overlap_tolerance * (double)(s->end - s->start));
		uint32_t last = s->child_first + s->nchild;
		uint32_t pick = UINT32_MAX;
		int64_t ce = 0;

		while (f->next < last) {
			const struct sw_node *c = &nodes[t->children[f->next]];

			/* the cursor only moves back: a child skipped now stays off */
			if (c->end > f->hi + tol) {
				f->next++;
				continue;
			}
			ce = c->end < f->hi ? c->end : f->hi;
			if (ce <= c->start) { /* nothing left of it before the cursor */
				f->next++;
				continue;
			}
			pick = t->children[f->next++];
			break;
		}
		if (pick != UINT32_MAX) {
			if (ce < f->hi) {
				out[n++] = (struct sw_section){f->node, ce, f->hi};
				s->excl += f->hi - ce;
			}
			f->hi = nodes[pick].start;
			if (sp >=
			    t->nnodes) /* only a cycle could do this; the builder breaks them */
				return -ELOOP;
			stack[sp++] = (struct sw_frame){pick, nodes[pick].child_first, ce};
		} else {
			if (f->hi > s->start) {
				out[n++] = (struct sw_section){f->node, s->start, f->hi};
				s->excl += f->hi - s->start;
			}
			sp--;
		}
	}
	for (uint32_t i = 0; i < n / 2; i++) {
		struct sw_section tmp = out[i];

		out[i] = out[n - 1 - i];
		out[n - 1 - i] = tmp;
	}
	*nout = n;
	return 0;
}
