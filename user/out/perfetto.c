// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* --format perfetto: kept requests as Chrome trace-event JSON. Kernel requests:
 * a process per pid (per host), a track per tid, each segment an "X" event,
 * flows across hand-offs; span requests a process per service; an async slice
 * per request. Overlapping segments on one thread go to extra lanes ("comm
 * [2]"). Times are µs from the earliest request of the same clock. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "out_yajl.h"

/* Beyond any pid_max (4194304): ids for span services and extra lanes */
#define PF_SPAN_PID_BASE 5000000
#define PF_LANE_TID_BASE 6000000
#define PF_NOTHREAD_PID 4999999
#define PF_HOST_STRIDE 10000000
#define PF_MAX_HOSTS 64

struct pf_item {
	uint32_t req, seg;
	int64_t pid, tid;    /* the track before lane assignment */
	uint64_t start, end; /* ns relative to the clock's base */
	int64_t out_tid;     /* the track it is drawn on */
	uint32_t lane;
	uint32_t host;	  /* index into pf.hosts */
	bool span;
	const char *name; /* thread (kernel) or service (span) name */
};

struct pf {
	const struct cp_request **reqs;
	uint32_t nreqs;
	struct pf_item *items;
	uint32_t nitems;
	uint32_t *item_of;     /* reqs' segments back to back → item index */
	uint32_t *segoff;      /* first item_of slot of each request */
	const char **services; /* span services, index = pid - PF_SPAN_PID_BASE */
	uint32_t nservices;
	uint64_t base_kernel, base_span;
	int64_t next_lane_tid;
	const char *hosts[PF_MAX_HOSTS]; /* of kernel segments, in order seen */
	uint32_t nhosts;
};

static uint32_t pf__host(struct pf *p, const char *host)
{
	uint32_t k;

	if (!host)
		return 0;
	for (k = 0; k < p->nhosts; k++)
		if (p->hosts[k] == host || !strcmp(p->hosts[k], host))
			return k;
	if (p->nhosts == PF_MAX_HOSTS)
		return PF_MAX_HOSTS - 1; /* drawn with the last: named after it */
	p->hosts[p->nhosts] = host;
	return p->nhosts++;
}

static bool pf__is_span(const struct cp_request *q)
{
	return q->nsegs && q->segs[0].pid < 0;
}

static int pf__service_pid(struct pf *p, const char *svc)
{
	uint32_t i;

	if (!svc)
		svc = "?";
	for (i = 0; i < p->nservices; i++)
		if (!strcmp(p->services[i], svc))
			return PF_SPAN_PID_BASE + i;
	p->services[p->nservices] = svc;
	return PF_SPAN_PID_BASE + p->nservices++;
}

static int pf__cmp_latency_desc(const void *a, const void *b)
{
	const struct cp_request *x = *(const struct cp_request *const *)a;
	const struct cp_request *y = *(const struct cp_request *const *)b;
	uint64_t lx = x->end_ns - x->start_ns, ly = y->end_ns - y->start_ns;

	return lx < ly ? 1 : lx > ly ? -1 : 0;
}

static int pf__cmp_item(const void *a, const void *b)
{
	const struct pf_item *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	if (x->req != y->req)
		return x->req < y->req ? -1 : 1;
	return x->seg < y->seg ? -1 : x->seg > y->seg;
}

/* Picks the requests to draw: all kept ones, or the N slowest. */
static int pf__select(struct pf *p, const struct engine_result *r, const struct out_opts *o)
{
	uint32_t i, n = r->nkept;

	p->reqs = calloc(n + 1, sizeof(*p->reqs));
	if (!p->reqs)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		p->reqs[i] = r->requests[i];
	if (o && o->requests && o->requests < n) {
		qsort(p->reqs, n, sizeof(*p->reqs), pf__cmp_latency_desc);
		n = o->requests;
	}
	p->nreqs = n;
	return 0;
}

static int pf__collect(struct pf *p)
{
	uint32_t i, j, total = 0;
	bool have_k = false, have_s = false;

	p->segoff = calloc(p->nreqs + 1, sizeof(*p->segoff));
	if (!p->segoff)
		return -ENOMEM;
	for (i = 0; i < p->nreqs; i++) {
		const struct cp_request *q = p->reqs[i];

		p->segoff[i] = total;
		total += q->nsegs;
		if (pf__is_span(q)) {
			if (!have_s || q->start_ns < p->base_span)
				p->base_span = q->start_ns;
			have_s = true;
		} else {
			if (!have_k || q->start_ns < p->base_kernel)
				p->base_kernel = q->start_ns;
			have_k = true;
		}
	}
	p->segoff[p->nreqs] = total;
	p->items = calloc(total + 1, sizeof(*p->items));
	p->item_of = calloc(total + 1, sizeof(*p->item_of));
	p->services = calloc(total + 1, sizeof(*p->services));
	if (!p->items || !p->item_of || !p->services)
		return -ENOMEM;
	for (i = 0; i < p->nreqs; i++) {
		const struct cp_request *q = p->reqs[i];
		bool span = pf__is_span(q);
		uint64_t base = span ? p->base_span : p->base_kernel;

		for (j = 0; j < q->nsegs; j++) {
			const struct cp_segment *s = &q->segs[j];
			struct pf_item *it = &p->items[p->nitems++];

			it->req = i;
			it->seg = j;
			it->start = s->start_ns - base;
			it->end = s->end_ns > s->start_ns ? s->end_ns - base : it->start;
			it->span = span;
			if (span) {
				it->name = s->service ? s->service : q->service;
				it->pid = it->tid = pf__service_pid(p, it->name);
			} else if (s->pid < 0 || s->tid < 0) {
				/* a kernel segment not tied to a thread (a blind spot) */
				it->pid = it->tid = PF_NOTHREAD_PID;
				it->name = s->peer ? "network (untraced peers)" : "no thread";
			} else {
				it->host = pf__host(p, s->host);
				it->pid = s->pid + (int64_t)it->host * PF_HOST_STRIDE;
				it->tid = s->tid + (int64_t)it->host * PF_HOST_STRIDE;
				it->name = s->comm;
			}
		}
	}
	return 0;
}

/* Greedy interval colouring per track: an item goes to the first lane whose
 * last event ended at or before it starts. */
static int pf__lanes(struct pf *p)
{
	uint64_t *lane_end = NULL;
	int64_t *lane_tid = NULL;
	uint32_t i, g, nl, cap = 0, l;
	int err = 0;

	qsort(p->items, p->nitems, sizeof(*p->items), pf__cmp_item);
	for (i = 0; i < p->nitems; i = g) {
		nl = 0;
		for (g = i; g < p->nitems && p->items[g].pid == p->items[i].pid &&
			    p->items[g].tid == p->items[i].tid;
		     g++) {
			struct pf_item *it = &p->items[g];

			for (l = 0; l < nl && lane_end[l] > it->start; l++)
				;
			if (l == nl) {
				if (nl == cap) {
					uint32_t c = cap ? cap * 2 : 8;
					uint64_t *e = realloc(lane_end, c * sizeof(*e));
					int64_t *t;

					if (!e) {
						err = -ENOMEM;
						goto cleanup;
					}
					lane_end = e;
					t = realloc(lane_tid, c * sizeof(*t));
					if (!t) {
						err = -ENOMEM;
						goto cleanup;
					}
					lane_tid = t;
					cap = c;
				}
				lane_tid[nl] = nl ? p->next_lane_tid++ : it->tid;
				nl++;
			}
			lane_end[l] = it->end;
			it->lane = l;
			it->out_tid = lane_tid[l];
		}
	}
	for (i = 0; i < p->nitems; i++)
		p->item_of[p->segoff[p->items[i].req] + p->items[i].seg] = i;
cleanup:
	free(lane_end);
	free(lane_tid);
	return err;
}

static void pf__meta(struct jw *w, const char *what, int64_t pid, int64_t tid, const char *name)
{
	jw__map_open(w);
	jw__key(w, "ph");
	jw__str(w, "M");
	jw__key(w, "name");
	jw__str(w, what);
	jw__key(w, "pid");
	jw__int(w, pid);
	jw__key(w, "tid");
	jw__int(w, tid);
	jw__key(w, "args");
	jw__map_open(w);
	jw__key(w, "name");
	jw__str(w, name);
	jw__map_close(w);
	jw__map_close(w);
}

/* A host's processes side by side: ordered by host */
static void pf__sort_index(struct jw *w, int64_t pid, uint32_t host)
{
	jw__map_open(w);
	jw__key(w, "ph");
	jw__str(w, "M");
	jw__key(w, "name");
	jw__str(w, "process_sort_index");
	jw__key(w, "pid");
	jw__int(w, pid);
	jw__key(w, "args");
	jw__map_open(w);
	jw__key(w, "sort_index");
	jw__int(w, host);
	jw__map_close(w);
	jw__map_close(w);
}

/* process_name once per pid, thread_name once per track; lanes appear in order. */
static void pf__write_meta(struct pf *p, struct jw *w)
{
	uint32_t i, j, named = 0;
	char name[256];

	for (i = 0; i < p->nitems; i++) {
		const struct pf_item *it = &p->items[i];
		const char *tname = it->name ? it->name : "?";

		if (!i || it->pid != p->items[i - 1].pid) {
			const char *pname = tname;

			/* a process is named after its main thread when that is seen */
			for (j = i; j < p->nitems && p->items[j].pid == it->pid; j++)
				if (p->items[j].tid == it->pid && p->items[j].name) {
					pname = p->items[j].name;
					break;
				}
			if (it->span)
				snprintf(name, sizeof(name), "service %s", pname);
			else if (p->nhosts > 1 && it->pid != PF_NOTHREAD_PID)
				snprintf(name, sizeof(name), "%s: %s", p->hosts[it->host], pname);
			else
				snprintf(name, sizeof(name), "%s", pname);
			pf__meta(w, "process_name", it->pid, it->pid, name);
			if (p->nhosts > 1 && !it->span && it->pid != PF_NOTHREAD_PID)
				pf__sort_index(w, it->pid, it->host);
		}
		if (!i || it->pid != p->items[i - 1].pid || it->tid != p->items[i - 1].tid)
			named = 0;
		if (it->lane != named)
			continue;
		named++;
		if (it->lane)
			snprintf(name, sizeof(name), "%s [%u]", tname, it->lane + 1);
		else
			snprintf(name, sizeof(name), "%s", tname);
		pf__meta(w, "thread_name", it->pid, it->out_tid, name);
	}
}

static void pf__frames_arg(struct jw *w, const struct cp_segment *s)
{
	size_t len = 0, n;
	char buf[1024];
	uint32_t i;

	buf[0] = 0;
	for (i = 0; i < s->nframes && len < sizeof(buf) - 1; i++) {
		n = snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? "; " : "",
			     s->frames[i] ? s->frames[i] : "?");
		len += n < sizeof(buf) - len ? n : sizeof(buf) - len - 1;
	}
	jw__key(w, "frames");
	jw__str(w, buf);
}

static void pf__seg_args(struct jw *w, const struct cp_request *q, const struct cp_segment *s)
{
	jw__key(w, "args");
	jw__map_open(w);
	jw__key(w, "request");
	jw__str(w, q->id);
	jw__key(w, "request_name");
	jw__str(w, q->name);
	pf__frames_arg(w, s);
	jw__key(w, "duration_ns");
	jw__int(w, (int64_t)(s->end_ns - s->start_ns));
	jw__key(w, "interference");
	jw__bool(w, s->interference);
	jw__opt_int(w, "cpu", s->cpu);
	jw__opt_str(w, "cpu_model", s->cpu_model);
	jw__opt_str(w, "sku", s->sku);
	jw__opt_str(w, "peer", s->peer);
	jw__opt_str(w, "host", s->host);
	jw__opt_str(w, "span_id", s->span_id);
	jw__opt_str(w, "operation", s->operation);
	jw__culprits(w, s->culprits, s->nculprits);
	jw__map_close(w);
}

static void pf__write_slices(struct pf *p, struct jw *w)
{
	uint32_t i;

	for (i = 0; i < p->nitems; i++) {
		const struct pf_item *it = &p->items[i];
		const struct cp_request *q = p->reqs[it->req];
		const struct cp_segment *s = &q->segs[it->seg];

		jw__map_open(w);
		jw__key(w, "ph");
		jw__str(w, "X");
		jw__key(w, "name");
		jw__str(w, s->category == CP_CAT_SPAN && s->operation
			       ? s->operation
			       : cp_category_name(s->category));
		jw__key(w, "cat");
		jw__str(w, cp_category_name(s->category));
		jw__key(w, "pid");
		jw__int(w, it->pid);
		jw__key(w, "tid");
		jw__int(w, it->out_tid);
		jw__key(w, "ts");
		jw__us(w, it->start);
		jw__key(w, "dur");
		jw__us(w, it->end - it->start);
		pf__seg_args(w, q, s);
		jw__map_close(w);
	}
}

static void pf__flow(struct jw *w, const char *ph, uint64_t id, const struct pf_item *it,
		     uint64_t ts)
{
	jw__map_open(w);
	jw__key(w, "ph");
	jw__str(w, ph);
	jw__key(w, "name");
	jw__str(w, "critical path");
	jw__key(w, "cat");
	jw__str(w, "critpath");
	jw__key(w, "id");
	jw__int(w, (int64_t)id);
	jw__key(w, "pid");
	jw__int(w, it->pid);
	jw__key(w, "tid");
	jw__int(w, it->out_tid);
	jw__key(w, "ts");
	jw__us(w, ts);
	if (ph[0] == 'f') {
		/* bind to the slice that starts here, not the one that ends here */
		jw__key(w, "bp");
		jw__str(w, "e");
	}
	jw__map_close(w);
}

/* A flow from each segment to the next one when the track changes, and one
 * async slice per request over its whole latency. */
static void pf__write_flows(struct pf *p, struct jw *w)
{
	uint64_t flow_id = 1;
	uint32_t i, j;

	for (i = 0; i < p->nreqs; i++) {
		const struct cp_request *q = p->reqs[i];
		const struct pf_item *first, *prev, *cur;
		uint64_t base = pf__is_span(q) ? p->base_span : p->base_kernel;
		char name[256];

		if (!q->nsegs)
			continue;
		first = &p->items[p->item_of[p->segoff[i]]];
		for (j = 1; j < q->nsegs; j++) {
			prev = &p->items[p->item_of[p->segoff[i] + j - 1]];
			cur = &p->items[p->item_of[p->segoff[i] + j]];
			if (prev->pid == cur->pid && prev->out_tid == cur->out_tid)
				continue;
			/* the source binds to the slice enclosing ts: stay inside it */
			pf__flow(w, "s", flow_id, prev,
				 prev->end > prev->start ? prev->end - 1 : prev->start);
			pf__flow(w, "f", flow_id, cur, cur->start);
			flow_id++;
		}
		snprintf(name, sizeof(name), "%s %s%s", q->service ? q->service : "?",
			 q->name ? q->name : "?", q->partial ? " (partial)" : "");
		for (j = 0; j < 2; j++) {
			jw__map_open(w);
			jw__key(w, "ph");
			jw__str(w, j ? "e" : "b");
			jw__key(w, "name");
			jw__str(w, name);
			jw__key(w, "cat");
			jw__str(w, "request");
			jw__key(w, "id");
			jw__int(w, i + 1);
			jw__key(w, "pid");
			jw__int(w, first->pid);
			jw__key(w, "tid");
			jw__int(w, first->out_tid);
			jw__key(w, "ts");
			jw__us(w, (j ? q->end_ns : q->start_ns) - base);
			if (!j) {
				jw__key(w, "args");
				jw__map_open(w);
				jw__key(w, "id");
				jw__str(w, q->id);
				jw__key(w, "latency_ns");
				jw__int(w, (int64_t)(q->end_ns - q->start_ns));
				jw__key(w, "partial");
				jw__bool(w, q->partial);
				if (q->host) {
					jw__key(w, "host");
					jw__str(w, q->host);
				}
				jw__map_close(w);
			}
			jw__map_close(w);
		}
	}
}

int out_perfetto(FILE *f, const struct engine_result *r, const struct out_opts *o)
{
	struct pf p = {.next_lane_tid = PF_LANE_TID_BASE};
	struct jw w = {0};
	int err;

	err = pf__select(&p, r, o);
	if (err)
		goto cleanup;
	err = pf__collect(&p);
	if (err)
		goto cleanup;
	err = pf__lanes(&p);
	if (err)
		goto cleanup;
	err = jw__init(&w, f, 0);
	if (err)
		goto cleanup;
	jw__map_open(&w);
	jw__key(&w, "traceEvents");
	jw__arr_open(&w);
	pf__write_meta(&p, &w);
	pf__write_slices(&p, &w);
	pf__write_flows(&p, &w);
	jw__arr_close(&w);
	jw__key(&w, "displayTimeUnit");
	jw__str(&w, "ms");
	jw__key(&w, "otherData");
	jw__map_open(&w);
	jw__key(&w, "generator");
	jw__str(&w, "critpath");
	if (o && o->title) {
		jw__key(&w, "title");
		jw__str(&w, o->title);
	}
	jw__key(&w, "requests");
	jw__int(&w, p.nreqs);
	jw__key(&w, "kernel_base_ns");
	jw__int(&w, (int64_t)p.base_kernel);
	jw__key(&w, "span_base_ns");
	jw__int(&w, (int64_t)p.base_span);
	jw__map_close(&w);
	jw__map_close(&w);
	err = jw__finish(&w);
	if (!err && fputc('\n', f) == EOF)
		err = -EIO;
	if (!err && fflush(f))
		err = -errno ?: -EIO;
cleanup:
	jw__finish(&w);
	free(p.reqs);
	free(p.segoff);
	free(p.items);
	free(p.item_of);
	free(p.services);
	return err;
}
