// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The store's rows without ClickHouse: recordings walked twice, once into
 * a sink that only counts (the walk's cost), once into RowBinary batches
 * (ch_batch__add, as the writer does), so that the CPU time the rows add
 * per segment shows. bench_store runs it.
 *
 *   bench_store_rows REC..    prints "walk_s=… rows_s=… requests=… segments=… bytes=…" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ch_rows.h"
#include "kpath.h"

struct ctx {
	struct ch_batch b;
	bool encode;
	uint64_t requests, segments, bytes;
};

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool want(void *ctx, const struct cp_request *h)
{
	return true;
}

static void warn(void *ctx, const char *msg)
{
}

static int request(void *ctx, const struct cp_request *r)
{
	struct ctx *c = ctx;

	c->requests++;
	c->segments += r->nsegs;
	if (!c->encode)
		return 0;
	if (c->b.bytes >= (4u << 20) || c->b.day != ch_rows__day(r)) {
		c->bytes += c->b.bytes;
		ch_batch__reset(&c->b, c->b.id + 1, ch_rows__day(r));
	}
	return ch_batch__add(&c->b, r, NULL, "boot") ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct ctx c = {0};
	struct cp_sink sink = {
	    .request = request, .warn = warn, .want = want, .ctx = &c, .ignores_tags = true};
	struct kpath_opts ko = {.quiet = true};
	double t0, walk, rows;

	if (argc < 2) {
		fprintf(stderr, "usage: bench_store_rows REC..\n");
		return 2;
	}
	t0 = cpu_s();
	if (kpath__analyze((const char *const *)argv + 1, argc - 1, &sink, &ko))
		return 1;
	walk = cpu_s() - t0;
	c.encode = true;
	c.requests = c.segments = 0;
	t0 = cpu_s();
	if (kpath__analyze((const char *const *)argv + 1, argc - 1, &sink, &ko))
		return 1;
	rows = cpu_s() - t0;
	c.bytes += c.b.bytes;
	printf("walk_s=%.3f rows_s=%.3f requests=%llu segments=%llu bytes=%llu\n", walk, rows,
	       (unsigned long long)c.requests, (unsigned long long)c.segments,
	       (unsigned long long)c.bytes);
	ch_batch__free(&c.b);
	return 0;
}
