// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* libFuzzer harness: trace input (Jaeger, OTLP, JSON Lines, Zipkin as they
 * come) through parsing, repair and the span walk. Input the reader refuses
 * must have said why: a failure without a warning is a finding too. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "span_internal.h"

struct seen {
	unsigned long warnings, requests;
};

static int on_request(void *ctx, const struct cp_request *r)
{
	struct seen *s = ctx;

	/* a request tiles its interval: the segments must fit inside it */
	for (uint32_t i = 0; i < r->nsegs; i++)
		if (r->segs[i].start_ns < r->start_ns || r->segs[i].end_ns > r->end_ns)
			abort();
	s->requests++;
	return 0;
}

static void on_warn(void *ctx, const char *msg)
{
	struct seen *s = ctx;

	s->warnings += msg && msg[0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen s = {0};
	struct cp_sink sink = {.request = on_request, .warn = on_warn, .ctx = &s};
	int n = span_input__analyze_buffer("fuzz", (const char *)data, size, &sink, NULL);

	if (n < 0 && !s.warnings)
		abort(); /* refused without saying why */
	return 0;
}
