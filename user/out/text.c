// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* --format text: the header, the average critical path with CRISP's percentile
 * columns, spans, contention, CPU by SKU, the slowest requests and the
 * warnings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "msg.h"
#include "proto.h"

/* every name is from a process or the network: safe for a terminal */
#define T(s) text__safe(s)

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static double per_req_ms(uint64_t total, uint64_t n)
{
	return n ? ms(total) / (double)n : 0;
}

static void put_stack(FILE *f, const char *const *frames, uint32_t n, const char *leaf)
{
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%s ; ", frames[i] ? T(frames[i]) : "?");
	fputs(leaf, f);
}

static void put_header(FILE *f, const struct engine_result *r, const struct out_opts *o)
{
	if (o && o->title)
		fprintf(f, "%s\n", T(o->title));
	fprintf(f, "%llu requests", (unsigned long long)r->nrequests);
	/* a tier behind a traced one: its requests are in their callers'
	 * paths, and counted there */
	if (r->ndownstream)
		fprintf(f, " (and %llu served to traced callers, in their paths)",
			(unsigned long long)r->ndownstream);
	if (r->nfiltered)
		fprintf(f, " (%llu more left out by filters)", (unsigned long long)r->nfiltered);
	if (!r->nrequests) {
		fputs("\n", f);
		return;
	}
	fprintf(f, "; latency mean %.3f ms", per_req_ms(r->total_latency_ns, r->nrequests));
	for (int p = 0; p < ENGINE_NPCT; p++)
		fprintf(f, ", P%d %.3f ms", (int)(engine_pct[p] * 100 + 0.5),
			ms(r->latency_pct_ns[p]));
	fprintf(f, ", max %.3f ms\n", ms(r->max_latency_ns));
}

/* Where the path's time goes by category, over all steps (not just the top
 * rows), largest first. */
static void put_categories(FILE *f, const struct engine_result *r)
{
	uint64_t tot[CP_CAT__COUNT] = {0}, all = 0;
	bool done[CP_CAT__COUNT] = {false};

	for (uint32_t i = 0; i < r->nprofile; i++) {
		if ((unsigned)r->profile[i].category < CP_CAT__COUNT)
			tot[r->profile[i].category] += r->profile[i].total_ns;
		all += r->profile[i].total_ns;
	}
	if (!all)
		return;
	fputs("By category:", f);
	for (int n = 0; n < CP_CAT__COUNT; n++) {
		int best = -1;

		for (int c = 0; c < CP_CAT__COUNT; c++)
			if (!done[c] && tot[c] && (best < 0 || tot[c] > tot[best]))
				best = c;
		if (best < 0)
			break;
		done[best] = true;
		fprintf(f, "%s %s %.1f%% (%.3f ms/req)", n ? "," : "", cp_category_name(best),
			100.0 * (double)tot[best] / (double)all,
			per_req_ms(tot[best], r->nrequests));
	}
	fputc('\n', f);
}

static void put_profile(FILE *f, const struct engine_result *r, uint32_t top)
{
	uint32_t n = r->nprofile < top ? r->nprofile : top;
	double mean = per_req_ms(r->total_latency_ns, r->nrequests);
	bool spans = r->nspans > 0;

	fprintf(f,
		"\nAverage critical path: top %u of %u steps, time per request and share of the "
		"mean latency;\nP50/P95/P99: per request over the requests at or below that "
		"latency (%llu/%llu/%llu requests);\nreqs: the requests whose path has the step, "
		"ms/had: its time per one of them\n",
		n, r->nprofile, (unsigned long long)r->pct_nrequests[0],
		(unsigned long long)r->pct_nrequests[1], (unsigned long long)r->pct_nrequests[2]);
	fprintf(f, "%10s %6s %9s %9s %9s %9s %9s", "ms/req", "share", "P50 ms", "P95 ms", "P99 ms",
		"reqs", "ms/had");
	if (spans)
		fprintf(f, " %9s %9s", "incl ms", "excl ms");
	fputs("  step\n", f);
	for (uint32_t i = 0; i < n; i++) {
		const struct engine_profile_entry *p = &r->profile[i];
		double v = per_req_ms(p->total_ns, r->nrequests);

		fprintf(f, "%10.3f %5.1f%%", v, mean > 0 ? 100.0 * v / mean : 0.0);
		for (int k = 0; k < ENGINE_NPCT; k++)
			fprintf(f, " %9.3f", per_req_ms(p->pct_total_ns[k], r->pct_nrequests[k]));
		fprintf(f, " %9u %9.3f", p->requests, per_req_ms(p->total_ns, p->requests));
		if (spans) {
			const struct engine_span_entry *s = p->span;

			if (s)
				fprintf(f, " %9.3f %9.3f",
					per_req_ms(s->inclusive_ns, r->nrequests),
					per_req_ms(s->exclusive_ns, r->nrequests));
			else
				fprintf(f, " %9s %9s", "-", "-");
		}
		fputs("  ", f);
		put_stack(f, p->frames, p->nframes, cp_category_name(p->category));
		fputc('\n', f);
	}
}

static void put_spans(FILE *f, const struct engine_result *r, uint32_t top)
{
	uint32_t n = r->nspans < top ? r->nspans : top;

	if (!r->nspans)
		return;
	fprintf(f,
		"\nSpans: top %u of %u call paths by exclusive time on the critical path, "
		"per request\n",
		n, r->nspan_paths);
	fprintf(f, "%10s %10s %9s  %s\n", "excl ms", "incl ms", "spans", "call path");
	for (uint32_t i = 0; i < n; i++) {
		const struct engine_span_entry *s = &r->spans[i];

		fprintf(f, "%10.3f %10.3f %9llu  ", per_req_ms(s->exclusive_ns, r->nrequests),
			per_req_ms(s->inclusive_ns, r->nrequests), (unsigned long long)s->count);
		for (uint32_t k = 0; k < s->nframes; k++)
			fprintf(f, "%s%s", k ? " ; " : "", s->frames[k] ? T(s->frames[k]) : "?");
		fputc('\n', f);
	}
}

static void put_who(FILE *f, int32_t pid, int32_t tid, const char *comm)
{
	fprintf(f, "%s", comm ? T(comm) : "?");
	if (pid >= 0 && tid >= 0 && pid != tid)
		fprintf(f, " (pid %d, tid %d)", pid, tid);
	else if (tid >= 0)
		fprintf(f, " (pid %d)", tid);
	else if (pid >= 0)
		fprintf(f, " (pid %d)", pid);
}

static void put_contention(FILE *f, const struct engine_result *r, uint32_t top)
{
	uint32_t n = r->ncontention < top ? r->ncontention : top;

	if (!r->ncontention)
		return;
	fprintf(f,
		"\nContention: off-path culprits by the critical-path time they cost "
		"(top %u of %u)\n",
		n, r->ncontention);
	fprintf(f, "%10s %9s  %-9s %s\n", "ms total", "reqs", "category", "culprit");
	for (uint32_t i = 0; i < n; i++) {
		const struct engine_contention *c = &r->contention[i];

		fprintf(f, "%10.3f %9u  %-9s ", ms(c->ns), c->requests,
			cp_category_name(c->category));
		put_who(f, c->pid, c->tid, c->comm);
		fputc('\n', f);
	}
}

static void put_sku_row(FILE *f, const struct engine_sku_stat *st)
{
	fprintf(f, "    %-28s %9u %9.3f %9.3f %7.2f", st->sku ? T(st->sku) : "?", st->requests,
		ms(st->mean_ns), ms(st->q50_ns), st->ratio);
	if (st->verdict == ENGINE_SKU_BASELINE || st->verdict == ENGINE_SKU_FEW)
		fprintf(f, "  %-13s", "");
	else
		fprintf(f, "  %5.2f-%-7.2f", st->ci_low, st->ci_high);
	fprintf(f, " %s%s\n", engine_sku_verdict_name(st->verdict),
		st->verdict == ENGINE_SKU_SLOWER || st->verdict == ENGINE_SKU_FASTER
		    ? " (SKU-sensitive)"
		    : "");
}

static void put_skus(FILE *f, const struct engine_result *r, uint32_t top)
{
	uint32_t n = r->nsku_steps < top ? r->nsku_steps : top, sensitive = 0;

	if (r->nskus < 2)
		return;
	for (uint32_t i = 0; i < r->nsku_steps; i++)
		sensitive += r->sku_steps[i].sensitive;
	fprintf(f,
		"\nCPU time by SKU (--sku label, or CPU model): a request's time in each cpu "
		"step, and in all of\nits kind's, per SKU it ran on; the ratio of the means to "
		"the baseline's with its 95%% CI;\nSKU-sensitive when the CI lies beyond "
		"+-%.0f%%\n",
		(ENGINE_SKU_MARGIN - 1) * 100);
	fputs("SKUs:", f);
	for (uint32_t i = 0; i < r->nskus; i++)
		fprintf(f, "%s %s (%llu requests%s)", i ? "," : "",
			r->skus[i].sku ? T(r->skus[i].sku) : "?",
			(unsigned long long)r->skus[i].requests, i ? "" : ", the baseline");
	fputc('\n', f);
	if (!r->nsku_steps)
		fputs("  no step ran on two of them\n", f);
	else
		fprintf(f, "    %-28s %9s %9s %9s %7s  %-13s %s\n", "SKU", "reqs", "mean ms",
			"P50 ms", "ratio", "95% CI", "verdict");
	for (uint32_t i = 0; i < n; i++) {
		const struct engine_sku_step *st = &r->sku_steps[i];

		fputs("  ", f);
		put_stack(f, st->frames, st->nframes,
			  st->whole ? "(all cpu)" : cp_category_name(CP_CAT_CPU));
		fputc('\n', f);
		for (uint32_t k = 0; k < st->nby_sku; k++)
			put_sku_row(f, &st->by_sku[k]);
	}
	if (r->nsku_steps)
		fprintf(f, "  %u of %u compared are SKU-sensitive%s\n", sensitive, r->nsku_steps,
			n < r->nsku_steps ? " (the top ones shown)" : "");
}

static void put_segment(FILE *f, const struct cp_request *q, const struct cp_segment *g,
			uint32_t folded)
{
	char off[32];
	bool holder;

	snprintf(off, sizeof(off), "+%.3f", ms(g->start_ns - q->start_ns));
	fprintf(f, "%11s %9.3f  %-11s", off, ms(g->end_ns - g->start_ns),
		cp_category_name(g->category));
	/* a lock holder's own time: the holder is its one culprit, said once */
	holder = g->category == CP_CAT_LOCK && g->nculprits == 1 && g->tid >= 0 &&
		 g->culprits[0].tid == g->tid && g->culprits[0].pid == g->pid;
	if (holder)
		fputs(" held by", f);
	if (g->tid >= 0 || g->comm) {
		fputs(" ", f);
		fprintf(f, "%s/%d", g->comm ? T(g->comm) : "?", g->tid);
	}
	if (g->cpu >= 0)
		fprintf(f, " cpu%d", g->cpu);
	if (g->host && (!q->host || strcmp(g->host, q->host)))
		fprintf(f, " on %s", T(g->host));
	/* frames past service and name tell apart consecutive segments of one
	 * thread */
	for (uint32_t i = 2; i < g->nframes; i++) {
		/* a network step's frame is its peer: said once, below */
		if (i == 2 && g->nframes == 3 && g->peer && g->frames[i] &&
		    !strcmp(g->frames[i], g->peer))
			break;
		fprintf(f, "%s%s", i == 2 ? " in " : " ; ", g->frames[i] ? T(g->frames[i]) : "?");
	}
	if (g->interference)
		fputs(" interference", f);
	if (g->peer)
		fprintf(f, " peer %s", T(g->peer));
	if (g->service || g->operation)
		fprintf(f, " span %s %s", g->service ? T(g->service) : "?",
			g->operation ? T(g->operation) : "?");
	if (g->span_id)
		fprintf(f, " [%s]", T(g->span_id));
	for (uint32_t i = 0; i < g->nculprits && !holder; i++) {
		const struct cp_culprit *c = &g->culprits[i];

		fprintf(f, "%s%s/%d %.3f ms", i ? ", " : g->category == CP_CAT_LOCK ? " held by: " : " culprits: ",
			c->comm ? T(c->comm) : "?", c->tid >= 0 ? c->tid : c->pid, ms(c->ns));
	}
	if (folded > 1)
		fprintf(f, " (%u segments)", folded);
	fputc('\n', f);
}

/* Consecutive segments of one thread, category and frames: one line (a busy
 * loop makes thousands). */
static bool same_line(const struct cp_segment *a, const struct cp_segment *b)
{
	if (a->tid != b->tid || a->pid != b->pid || a->host != b->host ||
	    a->category != b->category ||
	    a->interference != b->interference || a->nframes != b->nframes || a->span_id ||
	    b->span_id || a->end_ns != b->start_ns || !a->peer != !b->peer ||
	    (a->peer && strcmp(a->peer, b->peer)))
		return false;
	for (uint32_t i = 0; i < a->nframes; i++)
		if (a->frames[i] != b->frames[i] &&
		    (!a->frames[i] || !b->frames[i] || strcmp(a->frames[i], b->frames[i])))
			return false;
	return true;
}

#define TEXT_FOLD_CULPRITS 8

/* segs[k..*next) folded into one line, their culprits summed (the first
 * TEXT_FOLD_CULPRITS tasks named) */
static void put_run(FILE *f, const struct cp_request *q, uint32_t k, uint32_t *next)
{
	struct cp_culprit cul[TEXT_FOLD_CULPRITS];
	struct cp_segment g = q->segs[k];
	uint32_t j = k + 1, ncul = 0;

	while (j < q->nsegs && same_line(&q->segs[j - 1], &q->segs[j]))
		j++;
	*next = j;
	if (j == k + 1) {
		put_segment(f, q, &g, 1);
		return;
	}
	for (uint32_t i = k; i < j; i++) {
		for (uint32_t c = 0; c < q->segs[i].nculprits; c++) {
			const struct cp_culprit *x = &q->segs[i].culprits[c];
			uint32_t m;

			for (m = 0; m < ncul && (cul[m].tid != x->tid || cul[m].pid != x->pid); m++)
				;
			if (m < ncul)
				cul[m].ns += x->ns;
			else if (ncul < TEXT_FOLD_CULPRITS)
				cul[ncul++] = *x;
		}
	}
	g.end_ns = q->segs[j - 1].end_ns;
	g.culprits = cul;
	g.nculprits = ncul;
	g.cpu = q->segs[k].cpu;
	for (uint32_t i = k + 1; i < j && g.cpu >= 0; i++)
		if (q->segs[i].cpu != g.cpu)
			g.cpu = -1; /* it moved between CPUs */
	put_segment(f, q, &g, j - k);
}

/* Several hosts: where each one's clock was put (DESIGN.md "Several hosts") */
static void put_hosts(FILE *f, const struct engine_result *r)
{
	if (r->nhosts < 2)
		return;
	fprintf(f, "\nHosts (clocks on %s's time base)\n", r->hosts[0].name ? T(r->hosts[0].name) : "?");
	for (uint32_t i = 0; i < r->nhosts; i++) {
		const struct cp_host *h = &r->hosts[i];
		const char *how = h->clock ? h->clock : "";

		fprintf(f, "  %-20s ", h->name ? T(h->name) : "?");
		if (!strcmp(how, "reference"))
			fprintf(f, "the time base\n");
		else if (!strcmp(how, "messages"))
			fprintf(f, "%+.3f ms ± %.3f ms, from %llu messages\n",
				(double)h->clock_offset_ns / 1e6, (double)h->uncertainty_ns / 1e6,
				(unsigned long long)h->matched_messages);
		else if (!strcmp(how, "one-way"))
			fprintf(f, "%+.3f ms, from %llu messages one way (uncertainty not known)\n",
				(double)h->clock_offset_ns / 1e6,
				(unsigned long long)h->matched_messages);
		else
			fprintf(f, "realtime offset only (no message matched)\n");
	}
}

static int slowest_first(const void *pa, const void *pb)
{
	const struct cp_request *a = *(const struct cp_request *const *)pa;
	const struct cp_request *b = *(const struct cp_request *const *)pb;
	uint64_t la = a->end_ns - a->start_ns, lb = b->end_ns - b->start_ns;

	if (la != lb)
		return la > lb ? -1 : 1;
	if (a->start_ns != b->start_ns)
		return a->start_ns < b->start_ns ? -1 : 1;
	return strcmp(a->id ? a->id : "", b->id ? b->id : "");
}

/* "GET /x" names target "/x" already */
static bool name_has_target(const char *name, const char *target)
{
	const char *sp = name ? strchr(name, ' ') : NULL;

	return sp && !strcmp(sp + 1, target);
}

static int put_requests(FILE *f, const struct engine_result *r, uint32_t want)
{
	const struct cp_request **v;
	uint32_t n;

	if (!want || !r->nkept)
		return 0;
	v = malloc(r->nkept * sizeof(*v));
	if (!v)
		return -ENOMEM;
	memcpy(v, r->requests, r->nkept * sizeof(*v));
	qsort(v, r->nkept, sizeof(*v), slowest_first);
	n = r->nkept < want ? r->nkept : want;
	fprintf(f, "\nThe %u slowest requests (offset and duration in ms)\n", n);
	for (uint32_t i = 0; i < n; i++) {
		const struct cp_request *q = v[i];

		fprintf(f, "\nrequest %s: %s %s", q->id ? T(q->id) : "?",
			q->service ? T(q->service) : "?", q->name ? T(q->name) : "?");
		if (q->target && !name_has_target(q->name, q->target)) {
			char t[512];

			proto__target_redacted(q->target, t, sizeof(t));
			fprintf(f, " (%s)", T(t));
		}
		if (q->host)
			fprintf(f, " on %s", T(q->host));
		fprintf(f, ", latency %.3f ms%s, %u segments\n", ms(q->end_ns - q->start_ns),
			q->partial ? " (partial: overlaps lost events or clipped input)" : "",
			q->nsegs);
		for (uint32_t k = 0, next; k < q->nsegs; k = next)
			put_run(f, q, k, &next);
	}
	free(v);
	return 0;
}

int out_text(FILE *f, const struct engine_result *r, const struct out_opts *o)
{
	uint32_t top = o && o->top ? o->top : 20;
	int err;

	put_header(f, r, o);
	if (r->nrequests) {
		put_categories(f, r);
		put_profile(f, r, top);
		put_spans(f, r, top);
		put_contention(f, r, top);
		put_skus(f, r, top);
	}
	put_hosts(f, r);
	err = put_requests(f, r, o ? o->requests : 0);
	if (r->nwarnings) {
		fprintf(f, "\nWarnings (%u)\n", r->nwarnings);
		for (uint32_t i = 0; i < r->nwarnings; i++)
			fprintf(f, "  %s\n", T(r->warnings[i]));
	}
	if (fflush(f) || ferror(f))
		return -EIO;
	return err;
}
