/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Span input, internal API shared by the parser (span/parse.c), the trace
 * builder (span/tree.c), the walk (span/walk.c) and the engine glue (span/span.c).
 *
 * Flow: the scanner (span/scan.c) reads the input in chunks and cuts it into
 * units (a Jaeger trace; OTLP: the resourceSpans of one top-level export
 * request), span/raw.c (or simdjson: span/json.cpp) walks each unit and the parser
 * (span/parse.c) collects the spans of one trace (Jaeger: one element of
 * "data"; OTLP: one top-level export request, grouped by traceId)
 * into a struct span_in array whose strings live in a per-trace arena, then
 * calls span_tree__analyze(), which resolves parents, repairs bad input
 * (warning about it), corrects clock skew, runs the critical-path walk and
 * hands one struct cp_request to the sink. Then the arena is reset: memory is
 * bounded by the largest trace (OTLP: the largest export request), never by
 * the file.
 *
 * The sink decouples this code from the engine so the unit tests and the
 * parse benchmark can drive it directly.
 */
#ifndef CRITPATH_SPAN_INTERNAL_H
#define CRITPATH_SPAN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "span.h"

/* A bump allocator reset per trace: no per-span malloc. */
struct span_arena_chunk;
struct span_arena {
	struct span_arena_chunk *head;
	char *cur, *end;
	size_t chunk; /* the first chunk's bytes, then doubling (0: 256 KiB each) */
};

void *span_arena__alloc(struct span_arena *a, size_t n);
/* Where the arena's bytes begin when they are all in one chunk (*used of
 * them), else NULL. */
char *span_arena__single(const struct span_arena *a, size_t *used);
/* The bytes of its newest chunk, 0 when it has none. */
size_t span_arena__head_size(const struct span_arena *a);
char *span_arena__strndup(struct span_arena *a, const char *s, size_t len);
/* Frees all chunks but the newest, which is reused. */
void span_arena__reset(struct span_arena *a);
void span_arena__free(struct span_arena *a);

/* Growable array of fixed-size elements, kept across traces. */
struct span_vec {
	void *v;
	uint32_t n, cap;
};
void *span_vec__push(struct span_vec *v, size_t elem);
int span_vec__reserve(struct span_vec *v, size_t elem, uint32_t n);

enum span_kind {
	SPAN_KIND_UNSET = 0,
	SPAN_KIND_INTERNAL,
	SPAN_KIND_SERVER,
	SPAN_KIND_CLIENT,
	SPAN_KIND_PRODUCER,
	SPAN_KIND_CONSUMER,
};

/* One span as parsed. Times in Unix-epoch ns. */
struct span_in {
	const char *id;	       /* NULL when missing */
	const char *parent_id; /* NULL for a root */
	const char *trace_id;  /* OTLP: per span; Jaeger: may be NULL */
	const char *service;
	const char *operation;
	/* Clock domain: spans with equal host keys share a clock. Jaeger: the
	 * process's hostname tag, else "process:<processID>"; OTLP: the
	 * resource's host.name, else "resource:<n>". */
	const char *host;
	const char *hostname; /* the host's name when the input gives one, else NULL */
	const char *proc;     /* Jaeger processID, resolved at the end of the trace */
	uint32_t seq;	      /* input order within the trace / request */
	uint32_t resource;    /* OTLP: index of its resourceSpans in the request */
	int64_t start_ns, end_ns;
	uint32_t tag_first, ntags;   /* into the tag array handed to span_tree__analyze */
	uint32_t ptag_first, nptags; /* process / resource tags */
	uint8_t kind;		     /* enum span_kind */
	bool follows;		     /* FOLLOWS_FROM the parent: does not block it */
	bool has_start, has_end;     /* end known (Jaeger: duration) */
	bool bad_number;	     /* a time that did not parse */
	bool shared;		     /* Zipkin: the server side of its client's id */
};

/* Per-file state shared by parser and tree builder. */
struct span_file {
	const char *name;
	const struct cp_sink *sink;
	double overlap_tolerance;
	const char *const *exclude; /* --exclude-op SERVICE[:OPERATION] */
	uint32_t nexclude;
	uint32_t nwarnings; /* warnings of this file so far (capped, see span__warnf) */
	uint64_t ntraces;   /* requests handed to the sink */
	uint64_t nread;	    /* spans read */
	uint64_t nspans;    /* spans seen, for benchmarks */
	void *tree;	    /* struct span_tree scratch, reused across traces */
};

#define SPAN_MAX_WARNINGS_PER_FILE 100

void span__warnf(struct span_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One line at the end when warnings were dropped by the cap. */
void span__warn_summary(struct span_file *f);

/* Analyse one trace: spans[0..n), tags are "key=value" strings indexed by
 * span_in.tag_first/ptag_first. 1 = handed to the sink, 0 = nothing to
 * analyse (warned), < 0 = the sink asked to stop. */
int span_tree__analyze(struct span_file *f, const char *trace_id, struct span_in *spans, uint32_t n,
		       const char *const *tags);
void span_tree__free(struct span_file *f);

/* The parser (span/parse.c): what Jaeger and OTLP values mean. span/scan.c
 * splits the input into units and hands each to span_parser__unit. */
enum span_unit {
	SPAN_UNIT_JAEGER, /* one trace object: an element of "data" */
	SPAN_UNIT_OTLP,	  /* the "resourceSpans" (Tempo: "batches") array of a request */
	SPAN_UNIT_ZIPKIN, /* a Zipkin v2 list of spans (a request of its own) */
};
struct span_parser;
struct span_parser *span_parser__new(struct span_file *f);
void span_parser__free(struct span_parser *p);
/* A top-level object begins / ends. OTLP: at its end its spans join the
 * traces they belong to, which wait for more (a trace's spans come over
 * many export requests, lines and files); off: the input's offset there
 * (all files so far). A trace is analysed once no span of it came for
 * the window (bytes of input, or time of its spans' ends) or at
 * span_parser__flush. 0, or < 0 when the sink asked to stop or memory
 * ran out. */
void span_parser__begin_request(struct span_parser *p);
int span_parser__end_request(struct span_parser *p, uint64_t off);
/* Every trace still waiting, analysed (the input ended). */
int span_parser__flush(struct span_parser *p);
/* The file now being read (warnings about a trace name the file where
 * its first span was). */
void span_parser__set_file(struct span_parser *p, struct span_file *f);
/* The window (0: keep the default: 64 MiB, 5 minutes). */
void span_parser__window(struct span_parser *p, uint64_t bytes, int64_t ns);
/* One unit, buf readable up to len + SPAN_JSON_PADDING. 0; 1 = malformed
 * (*msg, *at: see span_json__parse); 2 = not valid UTF-8, nothing read;
 * < 0 = the sink asked to stop or memory ran out. */
int span_parser__unit(struct span_parser *p, enum span_unit kind, const char *buf, size_t len,
		      const char **msg, size_t *at);
/* The same for a unit whose end is not known yet, at buf with avail bytes
 * read (the first utf8_ok of them known to be UTF-8): 0 with *len, its
 * length, when the raw walk (span/raw.c) took it whole; < 0 as above; 1
 * when it did not (nothing of it counts). */
int span_parser__unit_raw(struct span_parser *p, enum span_unit kind, const char *buf,
			  size_t avail, size_t utf8_ok, size_t *len);
/* The trace in progress, for warnings: its id (NULL before it is read) and
 * how many spans were read. */
const char *span_parser__trace_id(const struct span_parser *p);
uint32_t span_parser__nspans(const struct span_parser *p);

/* span/blocks.c: where the object or array starting at buf[*i] ends. Reads
 * 64 bytes a step while *i + 64 <= hi: true with *end (the index after its
 * closing bracket), or false with *i where it stopped; st (zeroed at the
 * start) carries over to the next call with more bytes. */
struct span_block_state {
	long long depth;
	uint64_t in_string; /* all ones when the last block ended inside a string */
	bool escape;	    /* the last block ended with an unescaped backslash */
};
bool span_blocks__scan(const char *buf, size_t *i, size_t hi, struct span_block_state *st,
		       size_t *end);
/* The same without AVX2 (what span_blocks__scan uses on CPUs without it). */
bool span_blocks__scan_portable(const char *buf, size_t *i, size_t hi, struct span_block_state *st,
				size_t *end);

#endif /* CRITPATH_SPAN_INTERNAL_H */
