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
};

/* One file (a directory is the caller's job). Warnings (malformed JSON, bad
 * spans, …) go to engine__warn naming file, trace and span. Returns the
 * number of traces handed to the engine (>= 0), or -errno when the file
 * could not be read or is not a trace file at all (also warned). */
int span__analyze_file(const char *path, struct engine *e, const struct span_opts *o);
/* The same on a buffer; name is used in warnings. */
int span__analyze_buffer(const char *name, const char *buf, size_t len, struct engine *e,
			 const struct span_opts *o);

#endif /* CRITPATH_SPAN_H */
