/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Span-level input (DESIGN.md section 5, "critical path of a trace"): Jaeger
 * query-API JSON and OTLP JSON, detected by content, read in chunks, cut
 * into traces and each parsed with simdjson, so memory is bounded by the
 * largest trace, not the file.
 * Every trace's critical path (CRISP's last-finishing-child walk, iterative)
 * goes to a sink (model.h) as one struct cp_request.
 */
#ifndef CRITPATH_SPAN_H
#define CRITPATH_SPAN_H

#include <stddef.h>

#include "model.h"

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

/* Span input over several files: one set of traces waiting for more
 * spans, whatever file they come from. */
struct span_input;
struct span_input *span_input__new(const struct cp_sink *sink, const struct span_opts *o);
/* One file or buffer: the spans read from it (>= 0), or -errno when it
 * could not be read or is not a trace file (warned). */
int span_input__file(struct span_input *in, const char *path);
int span_input__buffer(struct span_input *in, const char *name, const char *buf, size_t len);
/* The traces still waiting, analysed; the requests handed to the sink in
 * all (>= 0), or < 0 when the sink asked to stop or memory ran out. */
int span_input__end(struct span_input *in);
void span_input__free(struct span_input *in);

/* One input alone (new, file, end, free). Return the number of requests
 * handed to the sink, or -errno (warned). */
int span_input__analyze_buffer(const char *name, const char *buf, size_t len,
			       const struct cp_sink *sink, const struct span_opts *o);
int span_input__analyze_file(const char *path, const struct cp_sink *sink,
			 const struct span_opts *o);

#endif /* CRITPATH_SPAN_H */
