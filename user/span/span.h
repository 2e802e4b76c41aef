/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Span-level input (DESIGN.md section 5, "critical path of a trace"): Jaeger
 * query-API JSON and OTLP JSON, detected by content, read in chunks, cut
 * into traces and each parsed with simdjson, so memory is bounded by the
 * largest trace, not the file.
 * Every trace's critical path (CRISP's last-finishing-child walk, iterative)
 * goes to the engine as one struct cp_request.
 */
#ifndef CRITPATH_SPAN_H
#define CRITPATH_SPAN_H

#include <stddef.h>

#include "engine.h"

struct span_opts {
	double overlap_tolerance;	/* fraction of the parent's duration; default 0.01, 0 = strict */
	/* CRISP's exclusions: spans of SERVICE (and OPERATION, when given)
	 * are dropped from the walk with their subtrees */
	const char *const *exclude_ops; /* "SERVICE[:OPERATION]" */
	unsigned nexclude_ops;
	/* OTLP: a trace is analysed once no span of it came for this many
	 * bytes of input, or for this long of its spans' time (0: defaults) */
	unsigned long long window_bytes;
	long long window_ns;
};

/* Several files in one input: a trace's spans may be spread over them
 * (OTLP's JSON Lines as collectors write and rotate them). Each file
 * gives the spans read from it (>= 0) or -errno (not readable, not a trace
 * file: warned); span__input_end analyses the traces still waiting and
 * gives the requests handed to the engine in all. */
struct span_input;
struct span_input *span__input_new(struct engine *e, const struct span_opts *o);
int span__input_file(struct span_input *in, const char *path);
int span__input_end(struct span_input *in);
void span__input_free(struct span_input *in);

/* One file (a directory is the caller's job). Warnings (malformed JSON, bad
 * spans, …) go to engine__warn naming file, trace and span. Returns the
 * number of traces handed to the engine (>= 0), or -errno when the file
 * could not be read or is not a trace file at all (also warned). */
int span__analyze_file(const char *path, struct engine *e, const struct span_opts *o);
/* The same on a buffer; name is used in warnings. */
int span__analyze_buffer(const char *name, const char *buf, size_t len, struct engine *e,
			 const struct span_opts *o);

#endif /* CRITPATH_SPAN_H */
