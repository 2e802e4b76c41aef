// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* --format html: one offline page; the result as a JSON data island (every "<"
 * escaped), style and script from out_html_assets.h. Timelines use offsets from
 * the request's start (epoch ns exceed 2^53). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "out_html_assets.h"
#include "out_yajl.h"

/* Requests shown when --requests does not say: a page, not a dump. */
#define HTML_DEFAULT_REQUESTS 50

static void html__escape(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			fputc(*s, f);
		}
	}
}

static void html__strings(struct jw *w, const char *const *v, uint32_t n)
{
	uint32_t i;

	jw__arr_open(w);
	for (i = 0; i < n; i++)
		jw__str(w, v[i] ? v[i] : "?");
	jw__arr_close(w);
}

static void html__u64s(struct jw *w, const uint64_t *v, uint32_t n)
{
	uint32_t i;

	jw__arr_open(w);
	for (i = 0; i < n; i++)
		jw__int(w, (int64_t)v[i]);
	jw__arr_close(w);
}

static void html__profile(struct jw *w, const struct engine_result *r)
{
	uint32_t i;

	jw__key(w, "profile");
	jw__arr_open(w);
	for (i = 0; i < r->nprofile; i++) {
		const struct engine_profile_entry *p = &r->profile[i];
		uint64_t q[4] = {p->q50_ns, p->q90_ns, p->q99_ns, p->max_ns};

		jw__map_open(w);
		jw__key(w, "frames");
		html__strings(w, p->frames, p->nframes);
		jw__key(w, "category");
		jw__str(w, cp_category_name(p->category));
		jw__key(w, "total_ns");
		jw__int(w, (int64_t)p->total_ns);
		jw__key(w, "requests");
		jw__int(w, p->requests);
		jw__key(w, "pct_total_ns");
		html__u64s(w, p->pct_total_ns, ENGINE_NPCT);
		jw__key(w, "q");
		html__u64s(w, q, 4);
		jw__map_close(w);
	}
	jw__arr_close(w);
}

static void html__contention(struct jw *w, const struct engine_result *r)
{
	uint32_t i;

	jw__key(w, "contention");
	jw__arr_open(w);
	for (i = 0; i < r->ncontention; i++) {
		const struct engine_contention *c = &r->contention[i];

		jw__map_open(w);
		jw__key(w, "pid");
		jw__int(w, c->pid);
		jw__key(w, "tid");
		jw__int(w, c->tid);
		jw__key(w, "comm");
		jw__str(w, c->comm);
		jw__key(w, "category");
		jw__str(w, cp_category_name(c->category));
		jw__key(w, "ns");
		jw__int(w, (int64_t)c->ns);
		jw__key(w, "requests");
		jw__int(w, c->requests);
		jw__map_close(w);
	}
	jw__arr_close(w);
}

/* A ratio, to 4 decimals, as --format json writes it */
static void html__ratio(struct jw *w, const char *key, double v)
{
	char b[32];

	snprintf(b, sizeof(b), "%.4f", v);
	jw__key(w, key);
	jw__raw_num(w, b);
}

/* CPU time by SKU, when the input ran on two SKUs or more (engine.h). */
static void html__skus(struct jw *w, const struct engine_result *r)
{
	if (r->nskus < 2)
		return;
	jw__key(w, "sku");
	jw__map_open(w);
	jw__key(w, "baseline");
	jw__str(w, r->skus[0].sku);
	jw__key(w, "steps");
	jw__arr_open(w);
	for (uint32_t i = 0; i < r->nsku_steps; i++) {
		const struct engine_sku_step *st = &r->sku_steps[i];

		jw__map_open(w);
		jw__key(w, "frames");
		html__strings(w, st->frames, st->nframes);
		jw__key(w, "whole");
		jw__bool(w, st->whole);
		jw__key(w, "by_sku");
		jw__arr_open(w);
		for (uint32_t k = 0; k < st->nby_sku; k++) {
			const struct engine_sku_stat *b = &st->by_sku[k];

			jw__map_open(w);
			jw__key(w, "sku");
			jw__str(w, b->sku);
			jw__key(w, "requests");
			jw__int(w, b->requests);
			jw__key(w, "mean_ns");
			jw__int(w, (int64_t)b->mean_ns);
			jw__key(w, "p50_ns");
			jw__int(w, (int64_t)b->q50_ns);
			html__ratio(w, "ratio", b->ratio);
			html__ratio(w, "ci_low", b->ci_low);
			html__ratio(w, "ci_high", b->ci_high);
			jw__key(w, "verdict");
			jw__str(w, engine_sku_verdict_name(b->verdict));
			jw__map_close(w);
		}
		jw__arr_close(w);
		jw__map_close(w);
	}
	jw__arr_close(w);
	jw__map_close(w);
}

static void html__segment(struct jw *w, const struct cp_request *q, const struct cp_segment *s)
{
	jw__map_open(w);
	jw__key(w, "o");
	jw__int(w, (int64_t)(s->start_ns - q->start_ns));
	jw__key(w, "d");
	jw__int(w, (int64_t)(s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0));
	jw__key(w, "category");
	jw__str(w, cp_category_name(s->category));
	jw__key(w, "frames");
	html__strings(w, s->frames, s->nframes);
	jw__key(w, "interference");
	jw__bool(w, s->interference);
	if (s->pid >= 0) {
		jw__key(w, "pid");
		jw__int(w, s->pid);
		jw__key(w, "tid");
		jw__int(w, s->tid);
		jw__key(w, "comm");
		jw__str(w, s->comm);
	}
	jw__opt_int(w, "cpu", s->cpu);
	jw__opt_str(w, "peer", s->peer);
	jw__opt_str(w, "host", s->host);
	jw__opt_str(w, "span_id", s->span_id);
	jw__opt_str(w, "service", s->service);
	jw__opt_str(w, "operation", s->operation);
	jw__culprits(w, s->culprits, s->nculprits);
	jw__map_close(w);
}

static int html__cmp_latency_desc(const void *a, const void *b)
{
	const struct cp_request *x = *(const struct cp_request *const *)a;
	const struct cp_request *y = *(const struct cp_request *const *)b;
	uint64_t lx = x->end_ns - x->start_ns, ly = y->end_ns - y->start_ns;

	return lx < ly ? 1 : lx > ly ? -1 : 0;
}

/* The slowest kept requests, slowest first. */
static int html__requests(struct jw *w, const struct engine_result *r, const struct out_opts *o)
{
	uint32_t i, j, n = r->nkept, show;
	const struct cp_request **v;

	show = o && o->requests ? o->requests : HTML_DEFAULT_REQUESTS;
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (n)
		memcpy(v, r->requests, n * sizeof(*v));
	qsort(v, n, sizeof(*v), html__cmp_latency_desc);
	if (show < n)
		n = show;
	jw__key(w, "requests");
	jw__arr_open(w);
	for (i = 0; i < n; i++) {
		const struct cp_request *q = v[i];

		jw__map_open(w);
		jw__key(w, "id");
		jw__str(w, q->id);
		jw__key(w, "service");
		jw__str(w, q->service);
		jw__key(w, "name");
		jw__str(w, q->name);
		if (q->host) {
			jw__key(w, "host");
			jw__str(w, q->host);
		}
		jw__key(w, "latency_ns");
		jw__int(w, (int64_t)(q->end_ns - q->start_ns));
		jw__key(w, "partial");
		jw__bool(w, q->partial);
		jw__key(w, "segs");
		jw__arr_open(w);
		for (j = 0; j < q->nsegs; j++)
			html__segment(w, q, &q->segs[j]);
		jw__arr_close(w);
		jw__map_close(w);
	}
	jw__arr_close(w);
	free(v);
	return 0;
}

static int html__data(FILE *f, const struct engine_result *r, const struct out_opts *o)
{
	struct jw w = {0};
	int err;

	err = jw__init(&w, f, 1);
	if (err)
		return err;
	jw__map_open(&w);
	jw__key(&w, "title");
	jw__str(&w, o && o->title ? o->title : "critpath report");
	jw__key(&w, "nrequests");
	jw__int(&w, (int64_t)r->nrequests);
	jw__key(&w, "total_latency_ns");
	jw__int(&w, (int64_t)r->total_latency_ns);
	jw__key(&w, "latency_pct_ns");
	html__u64s(&w, r->latency_pct_ns, ENGINE_NPCT);
	jw__key(&w, "pct_nrequests");
	html__u64s(&w, r->pct_nrequests, ENGINE_NPCT);
	jw__key(&w, "max_latency_ns");
	jw__int(&w, (int64_t)r->max_latency_ns);
	html__profile(&w, r);
	html__contention(&w, r);
	html__skus(&w, r);
	err = html__requests(&w, r, o);
	jw__key(&w, "warnings");
	html__strings(&w, r->warnings, r->nwarnings);
	jw__map_close(&w);
	if (!err)
		err = jw__finish(&w);
	jw__finish(&w);
	return err;
}

int out_html(FILE *f, const struct engine_result *r, const struct out_opts *o)
{
	const char *title = o && o->title ? o->title : "critpath report";
	int err;

	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width\">\n<title>",
	      f);
	html__escape(f, title);
	fputs("</title>\n<style>\n", f);
	fputs(html_css, f);
	fputs("</style>\n</head>\n<body>\n<div id=\"cp-root\"></div>\n"
	      "<div id=\"cp-status\" class=\"sub\">loading</div>\n"
	      "<noscript>This report is drawn by JavaScript; the data is in the "
	      "cp-data element of this file.</noscript>\n"
	      "<script type=\"application/json\" id=\"cp-data\">",
	      f);
	err = html__data(f, r, o);
	if (err)
		return err;
	fputs("</script>\n<script>\n", f);
	fputs(html_js, f);
	fputs("</script>\n</body>\n</html>\n", f);
	if (fflush(f) || ferror(f))
		return -errno ?: -EIO;
	return 0;
}
