// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* --format json: DESIGN.md 6's contract, with yajl_gen except for the requests
 * (out/json_req.c). Inapplicable fields are omitted; times are integer ns.
 * README describes the additive fields. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "engine.h"
#include "out_json_int.h"
#include "util.h"

/* bytes that are not UTF-8 become U+FFFD (yajl writes strings as given) */
static void gen_str(yajl_gen g, const char *s)
{
	size_t len = strlen(s);
	char *buf;

	if (utf8__valid(s, len)) {
		yajl_gen_string(g, (const unsigned char *)s, len);
		return;
	}
	buf = malloc(len * 3 + 1);
	if (!buf) {
		yajl_gen_string(g, (const unsigned char *)"?", 1);
		return;
	}
	yajl_gen_string(g, (unsigned char *)buf, utf8__repair(s, len, buf));
	free(buf);
}

static void gen_key(yajl_gen g, const char *k)
{
	yajl_gen_string(g, (const unsigned char *)k, strlen(k));
}

static void gen_kstr(yajl_gen g, const char *k, const char *v)
{
	if (!v)
		return;
	gen_key(g, k);
	gen_str(g, v);
}

static void gen_u64(yajl_gen g, uint64_t v)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);

	yajl_gen_number(g, buf, n);
}

static void gen_ku64(yajl_gen g, const char *k, uint64_t v)
{
	gen_key(g, k);
	gen_u64(g, v);
}

/* -1 means "does not apply" in the model */
static void gen_ki32(yajl_gen g, const char *k, int32_t v)
{
	if (v < 0)
		return;
	gen_key(g, k);
	yajl_gen_integer(g, v);
}

static void gen_frames(yajl_gen g, const char *const *frames, uint32_t n)
{
	gen_key(g, "frames");
	yajl_gen_array_open(g);
	for (uint32_t i = 0; i < n; i++)
		gen_str(g, frames[i] ? frames[i] : "?");
	yajl_gen_array_close(g);
}

static uint64_t per_request(uint64_t total, uint64_t n)
{
	return n ? (total + n / 2) / n : 0;
}

static int pct_int(int p)
{
	return (int)(engine_pct[p] * 100 + 0.5);
}

static void gen_summary(yajl_gen g, const struct engine_result *r)
{
	gen_key(g, "summary");
	yajl_gen_map_open(g);
	gen_ku64(g, "nrequests", r->nrequests);
	if (r->ndownstream) /* served to traced callers, not in the aggregates */
		gen_ku64(g, "downstream_requests", r->ndownstream);
	gen_ku64(g, "filtered_out", r->nfiltered);
	gen_ku64(g, "total_latency_ns", r->total_latency_ns);
	gen_ku64(g, "mean_latency_ns", per_request(r->total_latency_ns, r->nrequests));
	gen_ku64(g, "max_latency_ns", r->max_latency_ns);
	gen_key(g, "percentiles");
	yajl_gen_array_open(g);
	for (int p = 0; p < ENGINE_NPCT && r->nrequests; p++) {
		yajl_gen_map_open(g);
		gen_key(g, "percentile");
		yajl_gen_integer(g, pct_int(p));
		gen_ku64(g, "latency_ns", r->latency_pct_ns[p]);
		gen_ku64(g, "nrequests", r->pct_nrequests[p]);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
}

static void gen_profile(yajl_gen g, const struct engine_result *r)
{
	gen_key(g, "profile");
	yajl_gen_array_open(g);
	for (uint32_t i = 0; i < r->nprofile; i++) {
		const struct engine_profile_entry *p = &r->profile[i];

		yajl_gen_map_open(g);
		gen_frames(g, p->frames, p->nframes);
		gen_kstr(g, "category", cp_category_name(p->category));
		gen_ku64(g, "total_ns", p->total_ns);
		gen_ku64(g, "per_request_ns", per_request(p->total_ns, r->nrequests));
		gen_ku64(g, "requests", p->requests);
		gen_ku64(g, "per_request_had_ns", per_request(p->total_ns, p->requests));
		gen_ku64(g, "q50_ns", p->q50_ns);
		gen_ku64(g, "q90_ns", p->q90_ns);
		gen_ku64(g, "q99_ns", p->q99_ns);
		gen_ku64(g, "max_ns", p->max_ns);
		/* over all requests (0 where the step is not): diff's confidence */
		gen_ku64(g, "sd_ns", (uint64_t)(p->sd_ns + 0.5));
		if (r->nrequests < ENGINE_FEW) { /* diff's bootstrap */
			gen_key(g, "samples_ns");
			yajl_gen_array_open(g);
			for (uint32_t k = 0; k < p->requests && p->samples_ns; k++)
				yajl_gen_integer(g, (long long)p->samples_ns[k]);
			yajl_gen_array_close(g);
		}
		gen_key(g, "histogram");
		yajl_gen_array_open(g);
		for (uint32_t k = 0; k < p->nhist; k++) {
			uint32_t l2 = p->hist_log2 + k;

			if (!p->hist[k])
				continue;
			yajl_gen_map_open(g);
			gen_ku64(g, "lo_ns", l2 ? 1ull << l2 : 0);
			gen_ku64(g, "hi_ns", l2 < 63 ? 1ull << (l2 + 1) : UINT64_MAX);
			gen_ku64(g, "count", p->hist[k]);
			yajl_gen_map_close(g);
		}
		yajl_gen_array_close(g);
		gen_key(g, "percentiles");
		yajl_gen_array_open(g);
		for (int k = 0; k < ENGINE_NPCT; k++) {
			yajl_gen_map_open(g);
			gen_key(g, "percentile");
			yajl_gen_integer(g, pct_int(k));
			gen_ku64(g, "total_ns", p->pct_total_ns[k]);
			gen_ku64(g, "per_request_ns",
				 per_request(p->pct_total_ns[k], r->pct_nrequests[k]));
			yajl_gen_map_close(g);
		}
		yajl_gen_array_close(g);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
}

static void gen_span_profile(yajl_gen g, const struct engine_result *r)
{
	if (!r->nspans)
		return;
	gen_key(g, "span_profile");
	yajl_gen_array_open(g);
	for (uint32_t i = 0; i < r->nspans; i++) {
		const struct engine_span_entry *s = &r->spans[i];

		yajl_gen_map_open(g);
		gen_frames(g, s->frames, s->nframes);
		gen_kstr(g, "service", s->service);
		gen_kstr(g, "operation", s->operation);
		gen_ku64(g, "count", s->count);
		gen_ku64(g, "requests", s->requests);
		gen_ku64(g, "inclusive_ns", s->inclusive_ns);
		gen_ku64(g, "exclusive_ns", s->exclusive_ns);
		gen_ku64(g, "inclusive_per_request_ns", per_request(s->inclusive_ns, r->nrequests));
		gen_ku64(g, "exclusive_per_request_ns", per_request(s->exclusive_ns, r->nrequests));
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
}

static void gen_contention(yajl_gen g, const struct engine_result *r)
{
	gen_key(g, "contention");
	yajl_gen_array_open(g);
	for (uint32_t i = 0; i < r->ncontention; i++) {
		const struct engine_contention *c = &r->contention[i];

		yajl_gen_map_open(g);
		gen_ki32(g, "pid", c->pid);
		gen_ki32(g, "tid", c->tid);
		gen_kstr(g, "comm", c->comm);
		gen_kstr(g, "category", cp_category_name(c->category));
		gen_ku64(g, "ns", c->ns);
		gen_ku64(g, "requests", c->requests);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
}

/* A ratio, to 4 decimals (yajl's doubles print 17 digits). */
static void gen_kratio(yajl_gen g, const char *k, double v)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "%.4f", v);

	gen_key(g, k);
	yajl_gen_number(g, b, (size_t)n);
}

static void gen_sku_stat(yajl_gen g, const struct engine_sku_stat *st)
{
	yajl_gen_map_open(g);
	gen_kstr(g, "sku", st->sku);
	gen_ku64(g, "requests", st->requests);
	gen_ku64(g, "total_ns", st->total_ns);
	gen_ku64(g, "mean_ns", st->mean_ns);
	gen_ku64(g, "stddev_ns", st->stddev_ns);
	gen_ku64(g, "p50_ns", st->q50_ns);
	gen_kratio(g, "ratio", st->ratio);
	gen_kratio(g, "ci_low", st->ci_low);
	gen_kratio(g, "ci_high", st->ci_high);
	gen_kstr(g, "verdict", engine_sku_verdict_name(st->verdict));
	yajl_gen_map_close(g);
}

/* CPU time by SKU, when the input ran on two SKUs or more (engine.h). */
/* hosts: [{host, clock_offset_ns, uncertainty_ns, matched_messages,
 * clock}] of kernel input (DESIGN.md "Several hosts") */
static void gen_hosts(yajl_gen g, const struct engine_result *r)
{
	if (!r->nhosts)
		return;
	gen_key(g, "hosts");
	yajl_gen_array_open(g);
	for (uint32_t i = 0; i < r->nhosts; i++) {
		const struct cp_host *h = &r->hosts[i];

		yajl_gen_map_open(g);
		gen_kstr(g, "host", h->name);
		gen_key(g, "clock_offset_ns");
		yajl_gen_integer(g, h->clock_offset_ns);
		gen_ku64(g, "uncertainty_ns", h->uncertainty_ns);
		gen_ku64(g, "matched_messages", h->matched_messages);
		gen_kstr(g, "clock", h->clock);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
}

static void gen_skus(yajl_gen g, const struct engine_result *r)
{
	if (r->nskus < 2)
		return;
	gen_key(g, "sku_comparison");
	yajl_gen_map_open(g);
	gen_kstr(g, "baseline", r->skus[0].sku);
	gen_ku64(g, "min_requests", ENGINE_SKU_MIN_REQUESTS);
	gen_kratio(g, "margin", ENGINE_SKU_MARGIN - 1);
	gen_key(g, "skus");
	yajl_gen_array_open(g);
	for (uint32_t i = 0; i < r->nskus; i++) {
		yajl_gen_map_open(g);
		gen_kstr(g, "sku", r->skus[i].sku);
		gen_ku64(g, "requests", r->skus[i].requests);
		gen_ku64(g, "cpu_ns", r->skus[i].cpu_ns);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
	gen_key(g, "steps");
	yajl_gen_array_open(g);
	for (uint32_t i = 0; i < r->nsku_steps; i++) {
		const struct engine_sku_step *st = &r->sku_steps[i];

		yajl_gen_map_open(g);
		gen_frames(g, st->frames, st->nframes);
		gen_kstr(g, "category", cp_category_name(CP_CAT_CPU));
		gen_key(g, "whole_request");
		yajl_gen_bool(g, st->whole);
		gen_ku64(g, "total_ns", st->total_ns);
		gen_key(g, "sensitive");
		yajl_gen_bool(g, st->sensitive);
		gen_key(g, "by_sku");
		yajl_gen_array_open(g);
		for (uint32_t k = 0; k < st->nby_sku; k++)
			gen_sku_stat(g, &st->by_sku[k]);
		yajl_gen_array_close(g);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
}

void out_json__flush(struct out_json_stream *s)
{
	if (s->n) {
		fwrite(s->buf, 1, s->n, s->f);
		s->last = s->buf[s->n - 1];
		s->flushes++;
	}
	s->n = 0;
}

static void write_out(void *ctx, const char *p, size_t len)
{
	struct out_json_stream *s = ctx;

	if (s->n + len > sizeof(s->buf))
		out_json__flush(s);
	if (len > sizeof(s->buf)) {
		fwrite(p, 1, len, s->f);
		s->last = p[len - 1];
		return;
	}
	memcpy(s->buf + s->n, p, len);
	s->n += len;
}

struct out_json_stream *out_json__begin(FILE *f)
{
	struct out_json_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->g = yajl_gen_alloc(NULL);
	if (!s->g) {
		free(s);
		return NULL;
	}
	s->f = f;
	yajl_gen_config(s->g, yajl_gen_print_callback, write_out, s);
	yajl_gen_map_open(s->g);
	gen_key(s->g, "critpath_report");
	yajl_gen_integer(s->g, 1);
	gen_key(s->g, "requests");
	yajl_gen_array_open(s->g);
	return s;
}

int out_json__end(struct out_json_stream *s, const struct engine_result *r)
{
	yajl_gen g = s->g;
	FILE *f = s->f;

	yajl_gen_array_close(g);
	gen_summary(g, r);
	gen_profile(g, r);
	gen_span_profile(g, r);
	gen_contention(g, r);
	gen_skus(g, r);
	gen_hosts(g, r);
	gen_key(g, "warnings");
	yajl_gen_array_open(g);
	for (uint32_t i = 0; i < r->nwarnings; i++)
		gen_str(g, r->warnings[i]);
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
	yajl_gen_free(g);
	write_out(s, "\n", 1);
	out_json__flush(s);
	free(s);
	if (fflush(f) || ferror(f))
		return -EIO;
	return 0;
}

int out_json(FILE *f, const struct engine_result *r, const struct out_opts *o)
{
	struct out_json_stream *s = out_json__begin(f);

	if (!s)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->nkept; i++)
		out_json__request(s, r->requests[i]);
	return out_json__end(s, r);
}
