/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * The span-level critical-path walk (DESIGN.md section 5, CRISP's rule) on a
 * tree whose parents are resolved and whose intervals are already corrected
 * for clock skew (clipped / capped, see span/tree.c).
 *
 * Rule: in span S with cursor t (initially S's end), take the child that
 * finished last among those ending no later than t + tol(S), where tol(S) =
 * overlap_tolerance × S's duration; the time between that child's end and t
 * is S's own; walk the child over [its start, min(its end, t)] (a child that
 * overlaps the cursor by at most the tolerance is truncated so sections still
 * tile); continue in S with t = the child's start. When no child fits, S's
 * remaining [S.start, t] is its own. Equal ends: earlier start first, then
 * the smaller span id. Children with an empty truncated interval are skipped.
 * Sections therefore tile the root exactly, and a span's exclusive time is
 * the sum of its sections.
 *
 * Iterative with an explicit stack; O(n log n) for the child sort, linear
 * for the walk itself (a cursor per span only moves backwards).
 */
#ifndef CRITPATH_SPAN_WALK_H
#define CRITPATH_SPAN_WALK_H

#include <stdint.h>

struct sw_node {
	int64_t start, end; /* corrected interval */
	const char *id;	    /* for ties; compared by length, then bytes */
	uint32_t id_len;
	uint32_t child_first; /* blocking children: children[child_first ..+ nchild) */
	uint32_t nchild;
	int64_t excl; /* out: time on the critical path */
};

struct sw_section {
	uint32_t node;
	int64_t start, end;
};

struct sw_tree {
	struct sw_node *nodes;
	uint32_t *children; /* node indices, grouped per parent; sorted by the walk */
	uint32_t nnodes;
	uint32_t root;
};

/* Sections in time order into out (room for 2 * nnodes + 1), their count in
 * *nout; nodes[].excl filled. stack: room for nnodes entries of
 * struct sw_frame (scratch, see span/walk.c: 24 bytes each). 0 or -errno. */
struct sw_frame {
	uint32_t node;
	uint32_t next; /* next child to consider, index into children */
	int64_t hi;    /* cursor */
};

void span_walk__sort_children(struct sw_tree *t);
int span_walk__run(struct sw_tree *t, double overlap_tolerance, struct sw_frame *stack,
		   struct sw_section *out, uint32_t *nout);

#endif /* CRITPATH_SPAN_WALK_H */
