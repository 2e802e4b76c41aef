// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * The span input alone (parse + repair + walk + request assembly, no engine):
 *   bench_span_parse FILE [TOLERANCE]
 * prints one line "traces T spans S seconds X spans_per_s Y maxrss_kb Z"
 * for tools/bench/bench_report_spans, which compares it with the budget and
 * with `critpath report` (the same plus the engine).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "span_internal.h"

struct count {
	uint64_t traces, spans, segs;
};

static int count_request(void *ctx, const struct cp_request *r)
{
	struct count *c = ctx;

	c->traces++;
	c->spans += r->nspans;
	c->segs += r->nsegs;
	return 0;
}

static void print_warn(void *ctx, const char *msg)
{
	fprintf(stderr, "warning: %s\n", msg);
}

int main(int argc, char **argv)
{
	struct count c = {0};
	struct cp_sink sink = {count_request, print_warn, &c};
	struct span_opts o = {.overlap_tolerance = argc > 2 ? atof(argv[2]) : 0.01};
	struct timespec a, b;
	struct rusage ru;
	double s;
	int ret;

	if (argc < 2) {
		fprintf(stderr, "usage: bench_span_parse FILE [TOLERANCE]\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	ret = span_input__analyze_file(argv[1], &sink, &o);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (ret < 0) {
		fprintf(stderr, "bench_span_parse: %s: no trace analysed (%d)\n", argv[1], ret);
		return 1;
	}
	s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	getrusage(RUSAGE_SELF, &ru);
	printf("traces %llu spans %llu seconds %.3f spans_per_s %.0f maxrss_kb %ld\n",
	       (unsigned long long)c.traces, (unsigned long long)c.spans, s, c.spans / s,
	       ru.ru_maxrss);
	return 0;
}
