/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* The span parser's state (parse.c), shared with the traces waiting for
 * more spans (pending.c). */
#ifndef CRITPATH_SPAN_PARSER_INT_H
#define CRITPATH_SPAN_PARSER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "span_internal.h"

#define TAG_KEY_MAX 128
#define TAG_VAL_MAX 256

struct proc {
	const char *id;
	const char *service;
	const char *hostname;
	uint32_t ptag_first, nptags;
};

/* An OTLP request's spans, kept while a trace of it waits: the start of its
 * block (span/pending.c), or of its own arena's memory. */
struct batch {
	struct span_arena own; /* a large request's chunks, b in them; else empty */
	struct span_in *spans;
	const char **tags;
	uint32_t nspans, ntags;
	uint32_t refs; /* traces with spans here */
};

/* A run of a trace's spans in a batch. */
struct run {
	struct batch *b;
	uint32_t first, n;
};

/* A trace waiting for more spans. */
struct pending {
	char *id;	    /* NULL: spans without a trace id */
	const char *file;   /* where its first span was */
	struct span_vec runs; /* struct run */
	uint64_t last_off;  /* input offset of its last spans */
	int64_t last_ts;    /* its spans' latest end */
	uint32_t nspans, part;
	uint32_t prev, next; /* by last_off, oldest first */
	uint32_t hnext;	     /* in its hash chain */
	bool used;
};

#define NONE UINT32_MAX
#define EARLY_MAX (1u << 20) /* traces analysed by the window remembered */
#define BATCH_CHUNK 512u
#define BLOCK_CHUNK (64u << 10)
#define SLAB_BYTES (2u << 20) /* a huge page */

struct span_parser {
	struct span_file *f;
	struct span_json *json;
	bool otlp;	  /* the unit being read: OTLP, or Zipkin (otlp too: spans name their traces) */
	bool zipkin;
	bool request_bad; /* OTLP: a unit of this request was malformed */
	int err;
	struct span_arena arena;
	struct span_vec spans; /* struct span_in */
	struct span_vec tags;  /* const char * */
	struct span_vec procs; /* struct proc: Jaeger processes / OTLP resources */
	struct span_vec perm;  /* Jaeger: process id hash table */
	/* OTLP's waiting traces */
	uint64_t window_bytes;
	int64_t window_ns, max_ts;
	struct span_vec pend;	 /* struct pending */
	struct span_vec buckets; /* uint32_t: hash chains by trace id */
	uint32_t npend, free_pend, lru_head, lru_tail;
	/* the batches' blocks, cut from chunks of BLOCK_CHUNK bytes (span/pending.c) */
	struct block_chunk *chunk, *free_chunks;
	struct span_vec chunks; /* void *: the slabs of SLAB_BYTES they are cut from */
	char *slab_next;	/* the next chunk of the newest slab */
	uint32_t slab_left;	/* chunks left in it */
	struct span_vec gather;	 /* struct span_in: a trace's spans, together */
	struct span_vec gtags;	 /* const char *: their tags */
	/* traces analysed by the window: a ring of id hashes and their parts,
	 * with an open-addressing index into it */
	uint64_t *early;
	uint32_t *early_part, *early_ix;
	uint64_t nearly;    /* traces analysed by the window */
	uint32_t early_cap; /* slots, up to EARLY_MAX */
	const char *trace_id;
	/* where the unit being read began, for span_json__rollback */
	uint32_t mark_spans, mark_tags, mark_procs;
	uint64_t mark_nread;
	const char *mark_trace_id;
	/* the span being read */
	int64_t dur;
	bool has_dur;
	int ref_kind; /* 0 none, 1 FOLLOWS_FROM, 2 CHILD_OF */
};

/* pending.c */
/* by trace id, then input order (qsort) */
int span_pend__trace_cmp(const void *a, const void *b);
/* The request's spans (sorted by trace) become a batch, each trace's run
 * joining its waiting trace; traces out of the window are analysed. */
int span_pend__add_runs(struct span_parser *p, uint64_t off);
struct pending *span_pend__at(struct span_parser *p, uint32_t i);
/* one reference to b fewer: at none its block goes back to its chunk (or
 * its own arena is freed) */
void span_pend__batch_put(struct span_parser *p, struct batch *b);
/* Frees the batches' chunks. */
void span_pend__chunks_free(struct span_parser *p);

#endif /* CRITPATH_SPAN_PARSER_INT_H */
