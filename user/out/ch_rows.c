// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* RowBinary: integers little-endian at their width, a String its length as
 * a LEB128 varint then its bytes, an Array its count then its items, a Date
 * a UInt16 of days. Each table's encoder writes its columns in the order of
 * its columns string below: the two are kept side by side. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ch_rows.h"
#include "otlp.h"
#include "util.h"

#define NS_PER_DAY 86400000000000ll

const struct ch_table_def ch_tables[CH_TABLES] = {
    [CH_REQUESTS] = {"requests",
		     "day Date, batch UInt64, rid UInt64, host String, boot String, "
		     "service String, name String, target String, id String, "
		     "start_ns UInt64, end_ns UInt64, latency_ns UInt64, partial UInt8, "
		     "downstream UInt8, trace_id String, protocol String, status Int32, "
		     "server_addr String, client_addr String, rx_seq UInt32, rx_len UInt32, "
		     "tx_seq UInt32, tx_len UInt32, nsegs UInt32",
		     "service, name, start_ns"},
    [CH_SEGMENTS] = {"segments",
		     "day Date, batch UInt64, rid UInt64, host String, service String, "
		     "name String, latency_ns UInt64, seq UInt32, start_ns UInt64, "
		     "dur_ns UInt64, category UInt8, frames Array(String), probe_frames UInt8, "
		     "interference UInt8, seg_host String, pid Int32, tid Int32, comm String, "
		     "cpu Int16, cpu_model String, sku String, peer String, "
		     "culprit_pid Array(Int32), culprit_tid Array(Int32), "
		     "culprit_comm Array(String), culprit_ns Array(UInt64)",
		     "rid, seq"},
    [CH_STEPS] = {"steps",
		  "day Date, batch UInt64, rid UInt64, host String, service String, name String, "
		  "start_ns UInt64, latency_ns UInt64, partial UInt8, downstream UInt8, "
		  "frames Array(String), category UInt8, sku String, ns UInt64, "
		  "stack UInt64 MATERIALIZED cityHash64(arrayStringConcat(frames, '\\x1e'), "
		  "toString(category))",
		  "service, name, stack"},
    [CH_BLAME] = {"blame",
		  "day Date, batch UInt64, rid UInt64, host String, service String, name String, "
		  "start_ns UInt64, latency_ns UInt64, downstream UInt8, pid Int32, tid Int32, "
		  "comm String, category UInt8, ns UInt64",
		  "service, name, pid, tid"},
    [CH_CALLS] = {"calls",
		  "day Date, batch UInt64, rid UInt64, host String, service String, name String, "
		  "start_ns UInt64, latency_ns UInt64, partial UInt8, downstream UInt8, "
		  "local_addr String, remote_addr String, tx_seq UInt32, call_start_ns UInt64, "
		  "call_end_ns UInt64, frames Array(String), category UInt8, interference UInt8",
		  "local_addr, tx_seq"},
};

static char insert_cols[CH_TABLES][512];
static pthread_once_t cols_once = PTHREAD_ONCE_INIT;

/* Each column's first word, the MATERIALIZED ones left out */
static void cols_make(void)
{
	for (int t = 0; t < CH_TABLES; t++) {
		const char *p = ch_tables[t].columns;
		size_t o = 0;

		while (*p) {
			const char *name = p, *end;
			int depth = 0;
			size_t n = strcspn(p, " ");

			for (end = p; *end && (depth || *end != ','); end++)
				depth += *end == '(' ? 1 : *end == ')' ? -1 : 0;
			if (!memmem(name, (size_t)(end - name), " MATERIALIZED ", 14))
				o +=
				    (size_t)snprintf(insert_cols[t] + o, sizeof(insert_cols[t]) - o,
						     "%s%.*s", o ? ", " : "", (int)n, name);
			p = *end ? end + 2 : end;
		}
	}
}

const char *ch_table__insert_cols(enum ch_table t)
{
	pthread_once(&cols_once, cols_make);
	return insert_cols[t];
}

/* --- RowBinary ---------------------------------------------------------------- */

struct w {
	struct ch_bytes *b;
	bool err;
};

static inline bool room(struct w *w, size_t n)
{
	struct ch_bytes *b = w->b;

	if (b->n + n <= b->cap)
		return true;
	if (!w->err) {
		size_t cap = b->cap ? b->cap : 65536;
		uint8_t *p;

		while (cap < b->n + n)
			cap *= 2;
		if ((p = realloc(b->p, cap))) {
			b->p = p;
			b->cap = cap;
			return true;
		}
	}
	w->err = true;
	return false;
}

static inline void put(struct w *w, const void *p, size_t n)
{
	if (n && room(w, n)) { /* p may be NULL when n is 0 */
		memcpy(w->b->p + w->b->n, p, n);
		w->b->n += n;
	}
}

/* x86-64 and arm64 are little-endian, as RowBinary is */
static inline void u8(struct w *w, uint8_t v)
{
	put(w, &v, 1);
}
static inline void u16(struct w *w, uint16_t v)
{
	put(w, &v, 2);
}
static inline void u32(struct w *w, uint32_t v)
{
	put(w, &v, 4);
}
static inline void u64(struct w *w, uint64_t v)
{
	put(w, &v, 8);
}

static inline void varint(struct w *w, uint64_t v)
{
	uint8_t buf[10];
	size_t n = 0;

	do {
		buf[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	put(w, buf, n);
}

static inline void strn(struct w *w, const char *s, size_t n)
{
	if (n < 0x80 && room(w, n + 1)) { /* the usual: a one-byte length */
		w->b->p[w->b->n++] = (uint8_t)n;
		if (n)
			memcpy(w->b->p + w->b->n, s, n);
		w->b->n += n;
		return;
	}
	varint(w, n);
	put(w, s, n);
}

/* NULL as '' */
static inline void str(struct w *w, const char *s)
{
	strn(w, s, s ? strlen(s) : 0);
}

static void frames(struct w *w, const char *const *f, uint32_t n)
{
	varint(w, n);
	for (uint32_t i = 0; i < n; i++)
		str(w, f[i]);
}

/* --- a request's rows ------------------------------------------------------- */

uint16_t ch_rows__day(const struct cp_request *r)
{
	int64_t t = i64__add_sat((int64_t)(r->start_ns > INT64_MAX ? INT64_MAX : r->start_ns),
				 r->realtime_offset_ns);

	if (t < 0)
		return 0;
	t /= NS_PER_DAY;
	return t > UINT16_MAX ? UINT16_MAX : (uint16_t)t;
}

uint64_t ch_rows__rid(const char *host, const char *boot, const char *id)
{
	const char *parts[3] = {host, boot, id};
	uint64_t h = 0xcbf29ce484222325ull;

	for (int i = 0; i < 3; i++) {
		for (const char *p = parts[i] ? parts[i] : ""; *p; p++)
			h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
		h *= 0x100000001b3ull; /* the NUL after it */
	}
	return h;
}

/* A time of r as Unix-epoch ns (0 before 1970) */
static uint64_t epoch(const struct cp_request *r, uint64_t t)
{
	int64_t v = i64__add_sat((int64_t)(t > INT64_MAX ? INT64_MAX : t), r->realtime_offset_ns);

	return v < 0 ? 0 : (uint64_t)v;
}

/* What every row of a request begins with */
struct req_cols {
	uint16_t day;
	uint64_t batch, rid, start, latency;
	const char *host, *service, *name; /* and their lengths, taken once */
	size_t nhost, nservice, nname;
};

static void head(struct w *w, const struct req_cols *q)
{
	if (room(w, 18)) {
		uint8_t *p = w->b->p + w->b->n;

		memcpy(p, &q->day, 2);
		memcpy(p + 2, &q->batch, 8);
		memcpy(p + 10, &q->rid, 8);
		w->b->n += 18;
	}
	strn(w, q->host, q->nhost);
}

/* service and name, as most rows have them after their head */
static void svc_name(struct w *w, const struct req_cols *q)
{
	strn(w, q->service, q->nservice);
	strn(w, q->name, q->nname);
}

static void hexstr(struct w *w, const uint8_t *p, size_t n)
{
	static const char hx[] = "0123456789abcdef";
	char buf[64];

	for (size_t i = 0; i < n && i < 32; i++) {
		buf[2 * i] = hx[p[i] >> 4];
		buf[2 * i + 1] = hx[p[i] & 15];
	}
	varint(w, 2 * n);
	put(w, buf, 2 * n);
}

static void request_row(struct w *w, const struct req_cols *q, const struct cp_request *r,
			const char *boot)
{
	const struct cp_request_wire *wi = r->wire;
	uint8_t tid[16], sid[8];
	bool sampled = false;

	head(w, q);
	str(w, boot);
	svc_name(w, q);
	str(w, r->target);
	str(w, r->id);
	u64(w, q->start);
	u64(w, epoch(r, r->end_ns));
	u64(w, q->latency);
	u8(w, r->partial);
	u8(w, r->downstream);
	if (wi && wi->traceparent && traceparent__parse(wi->traceparent, tid, sid, &sampled) &&
	    sampled)
		hexstr(w, tid, sizeof(tid));
	else
		str(w, NULL);
	str(w, wi ? wi->protocol : NULL);
	u32(w, wi ? (uint32_t)wi->status : 0);
	str(w, wi ? wi->server_addr : NULL);
	str(w, wi ? wi->client_addr : NULL);
	u32(w, wi ? wi->rx_seq : 0);
	u32(w, wi ? wi->rx_len : 0);
	u32(w, wi ? wi->tx_seq : 0);
	u32(w, wi ? wi->tx_len : 0);
	u32(w, r->nsegs);
}

static void segment_row(struct w *w, const struct req_cols *q, const struct cp_request *r,
			uint32_t seq)
{
	const struct cp_segment *g = &r->segs[seq];

	head(w, q);
	svc_name(w, q);
	u64(w, q->latency);
	u32(w, seq);
	u64(w, epoch(r, g->start_ns));
	u64(w, g->end_ns > g->start_ns ? g->end_ns - g->start_ns : 0);
	u8(w, (uint8_t)g->category);
	frames(w, g->frames, g->nframes);
	u8(w, (uint8_t)(g->probe_frames > 255 ? 255 : g->probe_frames));
	u8(w, g->interference);
	str(w, g->host);
	u32(w, (uint32_t)g->pid);
	u32(w, (uint32_t)g->tid);
	str(w, g->comm);
	u16(w, (uint16_t)(int16_t)(g->cpu < INT16_MIN	? INT16_MIN
				   : g->cpu > INT16_MAX ? INT16_MAX
							: g->cpu));
	str(w, g->cpu_model);
	str(w, g->sku);
	str(w, g->peer);
	varint(w, g->nculprits);
	for (uint32_t i = 0; i < g->nculprits; i++)
		u32(w, (uint32_t)g->culprits[i].pid);
	varint(w, g->nculprits);
	for (uint32_t i = 0; i < g->nculprits; i++)
		u32(w, (uint32_t)g->culprits[i].tid);
	varint(w, g->nculprits);
	for (uint32_t i = 0; i < g->nculprits; i++)
		str(w, g->culprits[i].comm);
	varint(w, g->nculprits);
	for (uint32_t i = 0; i < g->nculprits; i++)
		u64(w, g->culprits[i].ns);
}

/* --- steps and culprits: a request's segments summed --------------------------- */

struct ch_group {
	uint64_t hash, ns;
	const struct cp_segment *g; /* a step: its frames and category */
	const char *s;		    /* the step's SKU, or the culprit's comm */
	int32_t pid, tid;	    /* a culprit */
	uint8_t category;
};

static bool streq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b)) || (!a && b && !*b) || (!b && a && !*a);
}

static bool frames_eq(const struct cp_segment *a, const struct cp_segment *b)
{
	if (a->nframes != b->nframes)
		return false;
	if (a->frames == b->frames)
		return true;
	for (uint32_t i = 0; i < a->nframes; i++)
		if (!streq(a->frames[i], b->frames[i]))
			return false;
	return true;
}

/* The SKU a step's time is on, as the engine keys it (engine_int.h's
 * sku__key): the label given, else the CPU's model */
static const char *sku_of(const struct cp_segment *g)
{
	return g->sku ? g->sku : g->cpu_model;
}

static int groups_begin(struct ch_batch *b, uint32_t most)
{
	uint32_t cap = 16;

	while (cap < most * 2)
		cap *= 2;
	if (cap > b->capslots) {
		uint32_t *s = realloc(b->slots, cap * sizeof(*s));

		if (!s)
			return -ENOMEM;
		b->slots = s;
		b->capslots = cap;
	}
	memset(b->slots, 0, cap * sizeof(*b->slots));
	b->mask = cap - 1;
	b->ng = 0;
	return grow_array((void **)&b->g, &b->capg, most ? most : 1, sizeof(*b->g), 16);
}

/* k's group (added when new) gets ns */
static void group_add(struct ch_batch *b, const struct ch_group *k, bool step)
{
	uint32_t mask = b->mask, j = (uint32_t)k->hash & mask;

	for (uint32_t *s; *(s = &b->slots[j]); j = (j + 1) & mask) {
		struct ch_group *o = &b->g[*s - 1];

		if (o->hash != k->hash || o->category != k->category || !streq(o->s, k->s))
			continue;
		if (step ? !frames_eq(o->g, k->g) : (o->pid != k->pid || o->tid != k->tid))
			continue;
		o->ns += k->ns;
		return;
	}
	b->g[b->ng] = *k;
	b->slots[j] = ++b->ng;
}

static uint64_t frames_hash(const struct cp_segment *g)
{
	uint64_t h = hash__u64(0, g->nframes);

	for (uint32_t i = 0; i < g->nframes; i++)
		h = hash__str(h, g->frames[i] ? g->frames[i] : "");
	return h;
}

static int steps(struct ch_batch *b, struct w *w, const struct req_cols *q,
		 const struct cp_request *r)
{
	uint64_t last_h = 0;
	const struct cp_segment *last = NULL;
	int err = groups_begin(b, r->nsegs);

	if (err)
		return err;
	for (uint32_t i = 0; i < r->nsegs; i++) {
		const struct cp_segment *g = &r->segs[i];
		const char *sku = sku_of(g);
		struct ch_group k = {.g = g, .s = sku, .category = (uint8_t)g->category};

		/* neighbours often share their frames */
		if (!last || !frames_eq(last, g))
			last_h = frames_hash(g);
		last = g;
		k.hash = hash__str(hash__u64(last_h, g->category), sku ? sku : "");
		k.ns = g->end_ns > g->start_ns ? g->end_ns - g->start_ns : 0;
		group_add(b, &k, true);
	}
	for (uint32_t i = 0; i < b->ng; i++) {
		const struct ch_group *s = &b->g[i];

		head(w, q);
		svc_name(w, q);
		u64(w, q->start);
		u64(w, q->latency);
		u8(w, r->partial);
		u8(w, r->downstream);
		frames(w, s->g->frames, s->g->nframes);
		u8(w, s->category);
		str(w, s->s);
		u64(w, s->ns);
	}
	b->rows[CH_STEPS] += b->ng;
	return 0;
}

/* The culprits of the interference segments, as engine.c's
 * engine__contention counts them: a lock or runqueue segment's culprits
 * with their time, or its own thread with the segment's when it names
 * none */
static int blame(struct ch_batch *b, struct w *w, const struct req_cols *q,
		 const struct cp_request *r)
{
	uint32_t most = 0;
	int err;

	for (uint32_t i = 0; i < r->nsegs; i++)
		most += r->segs[i].nculprits ? r->segs[i].nculprits : 1;
	if ((err = groups_begin(b, most)))
		return err;
	for (uint32_t i = 0; i < r->nsegs; i++) {
		const struct cp_segment *g = &r->segs[i];
		uint64_t d = g->end_ns > g->start_ns ? g->end_ns - g->start_ns : 0;

		if (!g->interference ||
		    (g->category != CP_CAT_LOCK && g->category != CP_CAT_RUNQUEUE))
			continue;
		for (uint32_t c = 0; c < (g->nculprits ? g->nculprits : 1); c++) {
			struct ch_group k = {.category = (uint8_t)g->category};

			if (g->nculprits) {
				k.pid = g->culprits[c].pid;
				k.tid = g->culprits[c].tid;
				k.s = g->culprits[c].comm;
				k.ns = g->culprits[c].ns;
			} else {
				k.pid = g->pid;
				k.tid = g->tid;
				k.s = g->comm;
				k.ns = d;
			}
			k.hash = hash__str(
			    hash__u64(hash__u64(hash__u64(0, (uint32_t)k.pid), (uint32_t)k.tid),
				      k.category),
			    k.s ? k.s : "");
			group_add(b, &k, false);
		}
	}
	for (uint32_t i = 0; i < b->ng; i++) {
		const struct ch_group *c = &b->g[i];

		head(w, q);
		svc_name(w, q);
		u64(w, q->start);
		u64(w, q->latency);
		u8(w, r->downstream);
		u32(w, (uint32_t)c->pid);
		u32(w, (uint32_t)c->tid);
		str(w, c->s);
		u8(w, c->category);
		u64(w, c->ns);
	}
	b->rows[CH_BLAME] += b->ng;
	return 0;
}

/* The TCP calls the request's walk waited on, but not those it followed
 * into a callee of the same analysis: that callee's steps are in the path
 * already (and its request is stored as downstream) */
static void calls(struct ch_batch *b, struct w *w, const struct req_cols *q,
		  const struct cp_request *r)
{
	const struct cp_request_wire *wi = r->wire;

	for (uint32_t i = 0; wi && i < wi->ncalls; i++) {
		const struct cp_call *c = &wi->calls[i];

		if (c->stitched)
			continue;
		head(w, q);
		str(w, r->service);
		str(w, r->name);
		u64(w, q->start);
		u64(w, q->latency);
		u8(w, r->partial);
		u8(w, r->downstream);
		str(w, c->local_addr);
		str(w, c->remote_addr);
		u32(w, c->tx_seq);
		u64(w, epoch(r, c->start_ns));
		u64(w, epoch(r, c->end_ns));
		frames(w, c->frames, c->nframes);
		u8(w, (uint8_t)c->category);
		u8(w, c->interference);
		b->rows[CH_CALLS]++;
	}
}

/* --- the batch -------------------------------------------------------------- */

void ch_batch__reset(struct ch_batch *b, uint64_t id, uint16_t day)
{
	b->id = id;
	b->day = day;
	for (int t = 0; t < CH_TABLES; t++) {
		b->t[t].n = 0;
		b->rows[t] = 0;
	}
	b->requests = 0;
	b->bytes = 0;
}

int ch_batch__add(struct ch_batch *b, const struct cp_request *r, const char *host,
		  const char *boot)
{
	struct req_cols q = {.day = b->day, .batch = b->id};
	size_t was[CH_TABLES];
	uint64_t rows_was[CH_TABLES];
	struct w w[CH_TABLES];
	int err = 0;

	if (!host)
		host = r->host;
	q.host = host;
	q.service = r->service;
	q.name = r->name;
	q.nhost = host ? strlen(host) : 0;
	q.nservice = r->service ? strlen(r->service) : 0;
	q.nname = r->name ? strlen(r->name) : 0;
	q.rid = ch_rows__rid(host, boot, r->id);
	q.start = epoch(r, r->start_ns);
	q.latency = r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0;
	for (int t = 0; t < CH_TABLES; t++) {
		was[t] = b->t[t].n;
		rows_was[t] = b->rows[t];
		w[t] = (struct w){&b->t[t], false};
	}
	request_row(&w[CH_REQUESTS], &q, r, boot);
	b->rows[CH_REQUESTS]++;
	for (uint32_t i = 0; i < r->nsegs; i++)
		segment_row(&w[CH_SEGMENTS], &q, r, i);
	b->rows[CH_SEGMENTS] += r->nsegs;
	err = steps(b, &w[CH_STEPS], &q, r);
	if (!err)
		err = blame(b, &w[CH_BLAME], &q, r);
	calls(b, &w[CH_CALLS], &q, r);
	for (int t = 0; t < CH_TABLES && !err; t++)
		if (w[t].err)
			err = -ENOMEM;
	if (err) {
		for (int t = 0; t < CH_TABLES; t++) {
			b->t[t].n = was[t];
			b->rows[t] = rows_was[t];
		}
		return err;
	}
	b->requests++;
	b->bytes = 0;
	for (int t = 0; t < CH_TABLES; t++)
		b->bytes += b->t[t].n;
	return 0;
}

void ch_batch__free(struct ch_batch *b)
{
	for (int t = 0; t < CH_TABLES; t++)
		free(b->t[t].p);
	free(b->g);
	free(b->slots);
	memset(b, 0, sizeof(*b));
}
