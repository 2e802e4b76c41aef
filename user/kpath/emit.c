// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kpath_internal.h"

/* Requests out: each waits KP_LOSS_LAG_NS so a late loss window still marks
 * it partial (DESIGN.md 6, 8). */
static const struct kp_source *host_source(const struct kp *kp, uint32_t host, uint64_t ts)
{
	const struct kp_source *any = NULL, *begun = NULL;

	if (host < kp->caphosts && kp->host_nsrc[host] == 1)
		return &kp->src[kp->host_src[host]];
	for (uint32_t i = 0; i < kp->nsrc; i++) {
		const struct kp_source *s = &kp->src[i];

		if (s->host != host)
			continue;
		if (!any)
			any = s;
		if (s->first_ts && s->first_ts <= ts && (!begun || s->first_ts > begun->first_ts))
			begun = s;
	}
	return begun ? begun : any;
}

/* The recording of host running at ts. */
int kp__loss_add(struct kp *kp, uint32_t host, uint64_t start, uint64_t end)
{
	uint32_t i;

	if (end < start)
		end = start;
	if (kp__grow((void **)&kp->loss, &kp->caploss, kp->nloss + 1, sizeof(*kp->loss)))
		return -ENOMEM;
	for (i = kp->nloss; i > 0 && kp->loss[i - 1].end > end; i--)
		;
	memmove(&kp->loss[i + 1], &kp->loss[i], (kp->nloss - i) * sizeof(*kp->loss));
	kp->loss[i].host = host;
	kp->loss[i].start = start;
	kp->loss[i].end = end;
	kp->nloss++;
	if (end - start > kp->loss_maxlen)
		kp->loss_maxlen = end - start;
	if (kp->pend_early)
		kp->loss_after_early = true;
	if (kp->no_loss_wait) {
		kp->no_loss_wait = false;
		kp->loss_unpromised = kp->requests_out > 0;
	}
	return 0;
}

static bool overlaps_loss(const struct kp *kp, uint32_t host, uint64_t a, uint64_t b)
{
	uint32_t lo = 0, hi = kp->nloss;

	/* the first window ending at or after a */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (kp->loss[mid].end < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t i = lo; i < kp->nloss; i++) {
		const struct kp_loss *l = &kp->loss[i];

		/* sorted by end: past b + the longest window, none can start <= b */
		if (l->end > b && l->end - b > kp->loss_maxlen)
			break;
		if (l->host == host && l->start <= b)
			return true;
	}
	return false;
}

static const char d2[201] = "00010203040506070809101112131415161718192021222324252627282930"
			    "31323334353637383940414243444546474849505152535455565758596061"
			    "62636465666768697071727374757677787980818283848586878889909192"
			    "93949596979899";

static void put_u(char **o, uint64_t v)
{
	static const uint64_t p10[20] = {1ull,
					 10ull,
					 100ull,
					 1000ull,
					 10000ull,
					 100000ull,
					 1000000ull,
					 10000000ull,
					 100000000ull,
					 1000000000ull,
					 10000000000ull,
					 100000000000ull,
					 1000000000000ull,
					 10000000000000ull,
					 100000000000000ull,
					 1000000000000000ull,
					 10000000000000000ull,
					 100000000000000000ull,
					 1000000000000000000ull,
					 10000000000000000000ull};
	/* "pid:conn:n" without printf. */
	uint32_t t = ((64 - (uint32_t)__builtin_clzll(v | 1)) * 1233) >> 12;
	uint32_t n = t + (v >= p10[t]) + !v;
	char *p;

	p = *o + n;
	*o = p;
	while (v >= 100) {
		p -= 2;
		memcpy(p, d2 + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, d2 + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
}

static void req_id(char *buf, int32_t pid, uint32_t conn, uint32_t n)
{
	char *o = buf;

	if (pid < 0) {
		*o++ = '-';
		put_u(&o, (uint64_t) - (int64_t)pid);
	} else {
		put_u(&o, (uint64_t)pid);
	}
	*o++ = ':';
	put_u(&o, conn);
	*o++ = ':';
	put_u(&o, n);
	*o = '\0';
}

#define KP_CHUNK_BYTES (1u << 20)

struct kp_chunk {
	struct kp_chunk *next; /* spare list */
	size_t size, used;
	uint32_t live; /* requests in it still waiting */
	uint32_t __pad;
	uint64_t data[]; /* 8-aligned */
};

static size_t al8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Room for up to bound bytes at the tail, or NULL. */
static char *chunk_reserve(struct kp *kp, size_t bound)
{
	struct kp_chunk *c = kp->chunk_tail;

	if (c && !c->live)
		c->used = 0;
	if (c && c->size - c->used >= bound)
		return (char *)c->data + c->used;
	if (c && !c->live) { /* too small for this one: let it go */
		free(c);
		c = kp->chunk_tail = NULL;
	}
	if (kp->chunk_spare && kp->chunk_spare->size >= bound) {
		c = kp->chunk_spare;
		kp->chunk_spare = c->next;
	} else {
		size_t size = bound > KP_CHUNK_BYTES ? bound : KP_CHUNK_BYTES;

		c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->size = size;
	}
	c->next = NULL;
	c->used = 0;
	c->live = 0;
	kp->chunk_tail = c;
	return (char *)c->data;
}

/* The request built at the tail took n bytes. */
static struct kp_chunk *chunk_commit(struct kp *kp, size_t n)
{
	struct kp_chunk *c = kp->chunk_tail;

	c->used += al8(n);
	c->live++;
	return c;
}

static void chunk_release(struct kp *kp, struct kp_chunk *c)
{
	if (--c->live || c == kp->chunk_tail)
		return;
	/* one spare is enough to turn over the FIFO */
	if (!kp->chunk_spare && c->size == KP_CHUNK_BYTES) {
		c->next = NULL;
		kp->chunk_spare = c;
		return;
	}
	free(c);
}

static void pend_free(struct kp *kp, struct kp_pend *p)
{
	chunk_release(kp, p->chunk);
	memset(p, 0, sizeof(*p));
}

static int pend_send(struct kp *kp, struct kp_pend *p)
{
	struct cp_request *r = p->req;
	const char *tags0 = NULL;
	const char *const *tags = r->tags;
	uint32_t nreq = p->nreq, runs = p->runs ? p->nruns : 1;
	char id[64];
	int err = 0;

	r->partial = overlaps_loss(kp, p->host, r->start_ns, r->end_ns);
	r->id = id;
	for (uint32_t k = 0; k < runs && !err; k++) {
		const char *name = p->runs ? kp__intern_name(kp, p->runs[k].name) : r->name;
		uint32_t n = p->runs ? p->runs[k].count : 1;

		if (!name) {
			err = -ENOMEM;
			break;
		}
		/* every segment's second frame is the request's name */
		for (uint32_t i = 0; p->runs && i < r->nsegs; i++)
			if (r->segs[i].nframes > 1)
				((const char **)r->segs[i].frames)[1] = name;
		r->name = name;
		for (uint32_t j = 0; j < n && !err; j++) {
			req_id(id, p->pid, p->conn, nreq++);
			kp->requests_out++;
			kp->requests_partial += r->partial;
			err = kp->emit ? kp->emit(kp->emit_arg, r) : 0;
			/* the response's status is the first request's */
			r->tags = &tags0;
		}
	}
	r->tags = tags;
	return err;
}

int kp__pend_flush(struct kp *kp, bool all)
{
	int err = 0;

	while (kp->pend_head < kp->npend) {
		struct kp_pend *p = &kp->pend[kp->pend_head];
		bool due = p->req->end_ns + KP_LOSS_LAG_NS <= kp->now;

		if (!all && !due && kp->pend_bytes <= KP_PEND_MAX_BYTES)
			break;
		if (!all && !due)
			kp->pend_early++;
		if (!err)
			err = pend_send(kp, p);
		kp->pend_bytes -= p->bytes;
		pend_free(kp, p);
		kp->pend_head++;
	}
	if (kp->pend_head == kp->npend) {
		kp->pend_head = kp->npend = 0;
	} else if (kp->pend_head >= 1024 && kp->pend_head * 2 >= kp->npend) {
		memmove(kp->pend, kp->pend + kp->pend_head,
			(kp->npend - kp->pend_head) * sizeof(*kp->pend));
		kp->npend -= kp->pend_head;
		kp->pend_head = 0;
	}
	if (err && !kp->err)
		kp->err = err;
	return err;
}

void kp__pend_free(struct kp *kp)
{
	for (uint32_t i = kp->pend_head; i < kp->npend; i++)
		pend_free(kp, &kp->pend[i]);
	free(kp->pend);
	free(kp->chunk_tail);
	free(kp->chunk_spare);
	kp->chunk_tail = kp->chunk_spare = NULL;
	kp->pend = NULL;
	kp->pend_head = kp->npend = kp->cappend = 0;
	kp->pend_bytes = 0;
}

/* Sends the requests whose wait is over (all with all), oldest first. */
#define PC_SLOTS 16

struct pcache {
	const char *src[PC_SLOTS];
	char *dst[PC_SLOTS];
	char *p; /* where the next copy goes */
};

static const char *pc_copy(struct pcache *c, const char *s)
{
	uintptr_t x = (uintptr_t)s;
	uint32_t j = (uint32_t)((x >> 3) ^ (x >> 9)) & (PC_SLOTS - 1);
	size_t n;

	if (!s)
		return NULL;
	if (c->src[j] == s)
		return c->dst[j];
	n = strlen(s) + 1;
	memcpy(c->p, s, n);
	c->src[j] = s;
	c->dst[j] = c->p;
	c->p += n;
	return c->dst[j];
}

/* Bytes a request's block needs at most. */
static size_t req_bound(const struct kp *kp, const struct kp_conn *c, uint32_t nfr)
{
	size_t strs = 32 + (size_t)kp->nws * KP_NAME_LEN;

	return al8(sizeof(struct cp_request)) + al8(kp->nws * sizeof(struct cp_segment)) +
	       al8(nfr * sizeof(char *)) + al8(kp->nculs * sizeof(struct cp_culprit)) +
	       al8(2 * sizeof(char *)) + al8(c->req.nruns * sizeof(struct kp_name_run)) +
	       al8(sizeof(struct cp_request_wire)) + sizeof(struct proto_meta) +
	       2 * KP_ADDR_STR_LEN + strs +
	       (kp->want ? al8(kp->nwcalls * sizeof(struct cp_call)) +
			       (size_t)kp->nwcalls * 2 * KP_ADDR_STR_LEN
			 : 0);
}

/* Repeated strings are interned; peers' addresses are copied (their
 * connection may be recycled). */
static uint32_t count_frames(const struct kp *kp)
{
	uint32_t nfr = 0;

	for (uint32_t i = 0; i < kp->nws; i++) {
		const struct kp_wseg *w = &kp->ws[i];

		nfr += 3 + w->queued;
		if (w->pev >= 0 && w->thread != KP_NONE) {
			const struct kp_thread *t = &kp->th[w->thread];

			nfr += t->pev[w->pev - (int64_t)t->pev_base].depth;
		}
	}
	return nfr;
}

#define KP_RECENT_FRAMES 4
static uint32_t fill_segment(struct kp *kp, const struct kp_source *src, uint32_t i,
			     struct cp_segment *s, const struct cp_segment *const *recent,
			     uint32_t nrecent, const char **fr, const char *svc, const char *name,
			     struct cp_culprit *culs, struct pcache *pc)
{
	const struct kp_wseg *w = &kp->ws[i];
	uint32_t taken;

	/* every field set once: cheaper than a memset here */
	s->start_ns = w->start;
	s->end_ns = w->end;
	s->category = (enum cp_category)w->cat;
	s->interference = w->interference;
	s->comm = s->cpu_model = s->sku = NULL;
	s->culprits = NULL;
	s->span_id = s->service = s->operation = NULL;
	fr[0] = svc;
	fr[1] = name;
	s->nframes = 2;
	s->probe_frames = 0;
	if (w->frame3 >= 0)
		fr[s->nframes++] = kp__str(kp, w->frame3);
	if (w->queued) {
		if (!kp->queued_frame)
			kp->queued_frame = kp__intern(kp, KP_QUEUED_FRAME);
		if (kp->queued_frame)
			fr[s->nframes++] = kp->queued_frame;
	}
	if (w->pev >= 0 && w->thread != KP_NONE) {
		const struct kp_thread *t = &kp->th[w->thread];
		const struct kp_probe_ev *pe = &t->pev[w->pev - (int64_t)t->pev_base];

		for (uint32_t k = 0; k < pe->depth; k++)
			fr[s->nframes++] = kp->probes[pe->stack[k]].iname;
		s->probe_frames = pe->depth;
	}
	s->frames = fr;
	taken = s->nframes;
	for (uint32_t r = 0; r < nrecent && taken; r++) {
		const struct cp_segment *p = recent[r];
		uint32_t k = 0;

		if (p->nframes != s->nframes)
			continue;
		while (k < s->nframes && p->frames[k] == fr[k]) /* a few: no memcmp */
			k++;
		if (k == s->nframes) {
			s->frames = p->frames;
			taken = 0;
		}
	}
	s->pid = s->tid = s->cpu = -1;
	if (w->thread != KP_NONE) {
		const struct kp_thread *t = &kp->th[w->thread];

		s->pid = t->pid;
		s->tid = t->tid;
		s->comm = kp__thread_comm(kp, w->thread);
		/* a step on another host: its CPU models and name */
		if (src && t->host != src->host)
			src = host_source(kp, t->host, w->start);
	}
	s->host = src ? src->host_name : NULL;
	if (w->cpu >= 0) {
		s->cpu = w->cpu;
		if (src && src->cpu_model && (uint32_t)w->cpu < src->ncpus)
			s->cpu_model = src->cpu_model[w->cpu];
		s->sku = src ? src->sku : NULL;
	}
	s->peer = w->peer >= 0 ? pc_copy(pc, kp__str(kp, w->peer)) : NULL;
	if (w->ncul) {
		memcpy(culs, &kp->culs[w->cul_first], w->ncul * sizeof(*culs));
		s->culprits = culs;
	}
	s->nculprits = w->ncul;
	return taken;
}

static const char *proto_name(const struct kp_req *q)
{
	switch (q->proto) {
	case KP_PROTO_HTTP:
		return q->grpc ? "grpc" : q->sid ? "http/2" : "http";
	case KP_PROTO_MEMCACHED:
		return "memcached";
	case KP_PROTO_RESP:
		return "redis";
	case KP_PROTO_PG:
		return "postgresql";
	case KP_PROTO_MYSQL:
		return "mysql";
	case KP_PROTO_DNS:
		return "dns";
	case KP_PROTO_FCGI:
		return "fastcgi";
	default:
		return NULL;
	}
}

/* Segment i of the walk into s; the frames taken at fr, none when shared
 * with a recent segment. */
static void wire_fill(struct kp *kp, struct kp_conn *c, struct cp_request_wire *w,
		      struct pcache *copy)
{
	const struct proto_meta *m = &c->req.meta;

	w->protocol = proto_name(&c->req);
	w->status = c->req.status > 0 ? c->req.status : 0;
	w->traceparent = m->traceparent[0] ? m->traceparent : NULL;
	w->tracestate = m->tracestate[0] ? m->tracestate : NULL;
	w->server_addr = w->client_addr = NULL;
	if (c->a.family != AF_UNIX) {
		w->server_addr = kp__conn_addr(c, true);
		w->client_addr = kp__conn_addr(c, false);
	}
	w->pid = c->proc != KP_NONE ? kp->pr[c->proc].pid : -1;
	w->rx_seq = w->rx_len = w->tx_seq = w->tx_len = 0;
	/* an HTTP/2 stream's bytes are frames among others' */
	if ((c->a.family == AF_INET || c->a.family == AF_INET6) && c->a.proto != IPPROTO_UDP &&
	    !c->h2) {
		if (c->req.rx_seq) {
			w->rx_seq = c->req.rx_seq;
			w->rx_len = c->req.rx_len;
		}
		if (c->req.tx_seq) {
			w->tx_seq = c->req.tx_seq;
			w->tx_len = c->req.tx_len;
		}
	}
	w->calls = NULL;
	w->ncalls = 0;
	if (copy) {
		w->traceparent = pc_copy(copy, w->traceparent);
		w->tracestate = pc_copy(copy, w->tracestate);
		w->server_addr = pc_copy(copy, w->server_addr);
		w->client_addr = pc_copy(copy, w->client_addr);
	}
}

/* The earliest a write's bytes can have left: their departure stamp, else
 * (the default capture sees a call at its end, after a veth delivered its
 * bytes) the end of its thread's last wait before it. */
static uint64_t write_began(struct kp *kp, const struct kp_write *w)
{
	struct kp_thread *t;
	int64_t i;

	if (w->sent_at || w->thread == KP_NONE)
		return w->enter;
	t = &kp->th[w->thread];
	/* no further back than the state kept behind the stream: a wait not
	 * found leaves enter */
	for (i = kp__tl_find(t, w->enter); i >= 0 && w->enter - t->iv[i].start < KP_KEEP_NS; i--) {
		const struct kp_iv *iv = &t->iv[i];

		if (iv->state == KP_ST_BLOCKED && iv->end != KP_OPEN && iv->end <= w->enter)
			return iv->end;
	}
	return w->enter;
}

/* The calls the walk waited on (kp->wcalls), one each, into calls by start;
 * segs are the walk's in time order. Returns how many. */
static uint32_t calls_fill(struct kp *kp, const struct cp_segment *segs, struct cp_call *calls,
			   struct pcache *copy)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < kp->nwcalls; i++) {
		struct kp_wcall *x = &kp->wcalls[i];
		struct kp_conn *c = &kp->cn[x->conn];
		/* the walk went back in time: its segments were reversed since */
		int32_t seg = x->seg >= 0 ? (int32_t)kp->nws - 1 - x->seg : -1;
		struct cp_call *k;
		uint32_t j = n;

		for (uint32_t e = 0; e < i && j == n; e++)
			if (kp->wcalls[e].conn == x->conn && kp->wcalls[e].first == x->first)
				j = kp->wcalls[e].call;
		x->call = j;
		k = &calls[j];
		if (j == n) {
			const struct kp_write *l = &c->wr[x->last];

			n++;
			memset(k, 0, sizeof(*k));
			k->local_addr = pc_copy(copy, kp__conn_addr(c, true));
			k->remote_addr = pc_copy(copy, kp__conn_addr(c, false));
			/* an HTTP/2 call's bytes are frames among other streams' */
			for (uint32_t w = x->first; w <= x->last && !c->h2; w++)
				k->tx_len += (uint32_t)c->wr[w].bytes;
			k->tx_seq = c->h2 ? 0 : c->wr[x->first].seq;
			k->start_ns = write_began(kp, &c->wr[x->first]);
			k->end_ns = l->read_after > x->t ? l->read_after : x->t;
			k->seg = -1;
			k->category = CP_CAT_NETWORK;
		}
		k->stitched |= x->stitched;
		if (seg >= 0 && (k->seg < 0 || segs[seg].end_ns - segs[seg].start_ns >
						   segs[k->seg].end_ns - segs[k->seg].start_ns)) {
			k->seg = seg;
			k->category = segs[seg].category;
			k->frames = segs[seg].frames;
			k->nframes = segs[seg].nframes;
			k->interference = segs[seg].interference;
		}
	}
	/* a few, found last first */
	for (uint32_t i = 1; i < n; i++) {
		struct cp_call t = calls[i];
		uint32_t j = i;

		for (; j > 0 && calls[j - 1].start_ns > t.start_ns; j--)
			calls[j] = calls[j - 1];
		calls[j] = t;
	}
	return n;
}

/* The request's service and name interned (c->iservice, c->iname) */
static int req_names(struct kp *kp, struct kp_conn *c)
{
	if (!c->service[0]) {
		kp__proc_service(kp, c->proc, c->a.family == AF_UNIX ? KP_PORT_UNIX : c->a.lport,
				 c->service, KP_NAME_LEN);
		c->iservice = NULL;
	}
	if (!c->iservice)
		c->iservice = kp__intern_name(kp, c->service);
	/* a connection's requests mostly repeat their name */
	if (!c->iname || strcmp(c->iname, c->req.name))
		c->iname = kp__intern_name(kp, c->req.name);
	return c->iservice && c->iname ? 0 : -ENOMEM;
}

/* A request about to be judged (want) or walked: counted when its name
 * was past the bound */
static void count_folded(struct kp *kp, const struct kp_conn *c)
{
	if (kp->other_names && (c->iname == kp->other_names || c->iservice == kp->other_names))
		kp->names_folded++;
}

static bool wanted(struct kp *kp, uint32_t ci)
{
	struct kp_conn *c = &kp->cn[ci];
	const struct kp_source *src;
	struct cp_request_wire w;
	struct cp_request h = {0};

	if (!kp->want || req_names(kp, c))
		return true;
	count_folded(kp, c);
	src = host_source(kp, c->host, c->req.start);
	h.service = c->iservice;
	h.name = c->iname;
	h.host = src ? src->host_name : NULL;
	h.start_ns = c->req.start;
	h.end_ns = c->req.end;
	h.realtime_offset_ns = kp->realtime_offset_ns;
	h.interned = kp->intern != NULL;
	h.target = c->req.meta.target[0] ? c->req.meta.target : NULL;
	if (!c->peer_missed) {
		uint32_t peer = kp__conn_peer(kp, ci);

		c = &kp->cn[ci];
		c->peer_missed = peer == KP_NONE;
		h.downstream = peer != KP_NONE && kp->cn[peer].role == KP_ROLE_CLIENT;
	}
	wire_fill(kp, c, &w, NULL);
	h.wire = &w;
	return kp->want(kp->emit_arg, &h);
}

/* The walk's segments as a cp_request built in place in the FIFO. */
int kp__emit_request(struct kp *kp, uint32_t ci)
{
	struct kp_conn *c = &kp->cn[ci];
	const struct kp_source *src = host_source(kp, c->host, c->req.start);
	uint32_t n = kp->nws, nfr = count_frames(kp), fi = 0, cj = 0;
	struct pcache pc = {0};
	const struct cp_segment *recent[KP_RECENT_FRAMES];
	uint32_t nrecent = 0, next = 0;
	struct cp_request *r;
	struct cp_segment *segs;
	struct cp_culprit *culs;
	struct cp_request_wire *wire;
	struct cp_call *calls;
	const char **frames, **tags, *svc, *name;
	struct kp_pend *p;
	char *base, *o;

	if (kp__grow((void **)&kp->pend, &kp->cappend, kp->npend + 1, sizeof(*kp->pend)))
		return -ENOMEM;
	if (req_names(kp, c))
		return -ENOMEM;
	if (!kp->want)
		count_folded(kp, c);
	svc = c->iservice;
	name = c->iname;
	base = chunk_reserve(kp, req_bound(kp, c, nfr));
	if (!base)
		return -ENOMEM;
	o = base;
	r = (struct cp_request *)o;
	o += al8(sizeof(*r));
	segs = (struct cp_segment *)o;
	o += al8(n * sizeof(*segs));
	frames = (const char **)o;
	o += al8(nfr * sizeof(*frames));
	culs = (struct cp_culprit *)o;
	o += al8(kp->nculs * sizeof(*culs));
	tags = (const char **)o;
	o += al8(2 * sizeof(*tags));
	wire = (struct cp_request_wire *)o;
	o += al8(sizeof(*wire));
	calls = (struct cp_call *)o;
	if (kp->want)
		o += al8(kp->nwcalls * sizeof(*calls));
	p = &kp->pend[kp->npend];
	memset(p, 0, sizeof(*p));
	if (c->req.nruns) {
		p->runs = (struct kp_name_run *)o;
		p->nruns = c->req.nruns;
		memcpy(p->runs, c->runs, c->req.nruns * sizeof(*p->runs));
		o += al8(c->req.nruns * sizeof(*p->runs));
	}
	pc.p = o;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t taken = fill_segment(kp, src, i, &segs[i], recent, nrecent, &frames[fi],
					      svc, name, &culs[cj], &pc);

		if (taken) { /* a frames array not seen lately */
			recent[nrecent < KP_RECENT_FRAMES ? nrecent++ : next++ % KP_RECENT_FRAMES] =
			    &segs[i];
			fi += taken;
		}
		cj += kp->ws[i].ncul;
	}
	memset(r, 0, sizeof(*r));
	r->service = svc;
	r->name = name;
	r->host = src ? src->host_name : NULL;
	r->start_ns = c->req.start;
	r->end_ns = c->req.end;
	r->segs = segs;
	r->nsegs = n;
	r->realtime_offset_ns = kp->realtime_offset_ns;
	r->interned = kp->intern != NULL;
	r->target = c->req.meta.target[0] ? pc_copy(&pc, c->req.meta.target) : NULL;
	if (kp->want) { /* only an agent asks */
		wire_fill(kp, c, wire, &pc);
		if (kp->nwcalls) {
			wire->ncalls = calls_fill(kp, segs, calls, &pc);
			wire->calls = calls;
		}
		r->wire = wire;
	}
	if (!c->peer_missed) {
		uint32_t peer = kp__conn_peer(kp, ci);

		c = &kp->cn[ci];
		c->peer_missed = peer == KP_NONE;
		r->downstream = peer != KP_NONE && kp->cn[peer].role == KP_ROLE_CLIENT;
	}
	if (c->req.status) {
		char *t = pc.p;

		/* "http.status=%d" */
		memcpy(pc.p, "http.status=", 12);
		pc.p += 12;
		if (c->req.status < 0)
			*pc.p++ = '-';
		put_u(&pc.p, c->req.status < 0 ? -(uint64_t)c->req.status : (uint64_t)c->req.status);
		*pc.p++ = '\0';
		tags[0] = t;
		tags[1] = NULL;
		r->tags = tags;
	}
	p->req = r;
	p->bytes = (uint64_t)(pc.p - base);
	p->chunk = chunk_commit(kp, p->bytes);
	p->host = c->host;
	p->pid = c->proc != KP_NONE ? kp->pr[c->proc].pid : -1;
	p->conn = ci;
	p->nreq = c->nreq;
	kp->pend_bytes += p->bytes;
	kp->npend++;
	return 0;
}

static void note_unsent(struct kp *kp, const struct kp_conn *c)
{
	uint32_t i;

	kp->unsent_reqs++;
	if (!c->req.nagle)
		return; /* a full window: counted, no service named */
	kp->nagle_reqs++;
	for (i = 0; i < kp->nunsent_svc; i++)
		if (!strcmp(kp->unsent_svc[i].service, c->service))
			break;
	if (i == kp->nunsent_svc) {
		if (i == sizeof(kp->unsent_svc) / sizeof(kp->unsent_svc[0])) {
			kp->unsent_more = true;
			return;
		}
		memcpy(kp->unsent_svc[i].service, c->service, KP_NAME_LEN);
		kp->nunsent_svc++;
	}
	kp->unsent_svc[i].n++;
}

int kp__conn_finish_req(struct kp *kp, uint32_t ci)
{
	struct kp_conn *c = &kp->cn[ci];
	int err = 0;

	if (c->phase == KP_PH_WRITING && c->req.reader != KP_NONE && c->req.writer != KP_NONE &&
	    c->proc != KP_NONE && c->req.end >= c->req.start) {
		if (wanted(kp, ci)) {
			err = kp__walk(kp, ci);
			if (!err)
				err = kp__emit_request(kp, ci);
		} else {
			kp->unwalked++;
		}
		c = &kp->cn[ci];
		if (!err && c->req.unsent)
			note_unsent(kp, c);
		c->prev_end = c->req.end;
		if (c->req.nruns) {
			for (uint32_t k = 0; k < c->req.nruns; k++)
				c->nreq += c->runs[k].count;
		} else {
			c->nreq++;
		}
		memcpy(c->last_name, c->req.name, sizeof(c->last_name));
		if (err && !kp->err)
			kp->err = err;
	}
	c->phase = KP_PH_IDLE;
	return err;
}
