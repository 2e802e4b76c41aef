// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* A request and its critical path as OTLP spans (trace.proto by hand): a SERVER
 * span with per-category times, a CLIENT child per stretch in another process.
 * README "critpath agent" has the schema. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp.h"
#include "proto.h"
#include "commands.h"
#include "util.h"

#define TARGET_MAX 256

#define WT_VARINT 0
#define WT_I64 1
#define WT_LEN 2
#define WT_I32 5

#define KIND_INTERNAL 1
#define KIND_SERVER 2
#define KIND_CLIENT 3

bool traceparent__parse(const char *s, uint8_t trace_id[16], uint8_t span_id[8], bool *sampled)
{
	static const int8_t hex[256] = {
	    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8,
	    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15,
	    ['f'] = 16,
	};
	uint8_t v[26]; /* version, trace id, span id, flags */
	bool zero_t = true, zero_s = true;
	size_t n = 0;

	if (!s || strlen(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' ||
	    (s[55] && s[55] != '-'))
		return false;
	for (size_t i = 0; i < 55; i++) {
		if (i == 2 || i == 35 || i == 52)
			continue;
		if (!hex[(uint8_t)s[i]] || !hex[(uint8_t)s[i + 1]])
			return false;
		v[n++] = (uint8_t)((hex[(uint8_t)s[i]] - 1) << 4 | (hex[(uint8_t)s[i + 1]] - 1));
		i++;
	}
	if (v[0] == 0xff || (v[0] == 0 && s[55]))
		return false;
	for (int i = 0; i < 16; i++)
		zero_t &= !v[1 + i];
	for (int i = 0; i < 8; i++)
		zero_s &= !v[17 + i];
	if (zero_t || zero_s)
		return false;
	memcpy(trace_id, v + 1, 16);
	memcpy(span_id, v + 17, 8);
	*sampled = v[25] & 1;
	return true;
}

void pbuf__free(struct pbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static bool room(struct pbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 1024;
	uint8_t *p;

	if (b->err)
		return false;
	if (b->n + more <= b->cap)
		return true;
	while (cap < b->n + more)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->err = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

static void put_varint(struct pbuf *b, uint64_t v)
{
	if (!room(b, 10))
		return;
	while (v >= 0x80) {
		b->p[b->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->p[b->n++] = (uint8_t)v;
}

static void put_tag(struct pbuf *b, uint32_t field, uint32_t wt)
{
	put_varint(b, (uint64_t)field << 3 | wt);
}

static void put_bytes(struct pbuf *b, uint32_t field, const void *p, size_t n)
{
	put_tag(b, field, WT_LEN);
	put_varint(b, n);
	if (!room(b, n))
		return;
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

/* protobuf's strings are UTF-8, and a collector refuses the whole batch
 * over one that is not: names from the network or from other processes'
 * threads are repaired (bad bytes as U+FFFD) */
static void put_str(struct pbuf *b, uint32_t field, const char *s)
{
	size_t n;
	char *fix;

	if (!s)
		return;
	n = strlen(s);
	if (utf8__valid(s, n)) {
		put_bytes(b, field, s, n);
		return;
	}
	fix = malloc(3 * n);
	if (!fix) {
		b->err = true;
		return;
	}
	put_bytes(b, field, fix, utf8__repair(s, n, fix));
	free(fix);
}

static void put_fixed64(struct pbuf *b, uint32_t field, uint64_t v)
{
	put_tag(b, field, WT_I64);
	if (!room(b, 8))
		return;
	for (int i = 0; i < 8; i++)
		b->p[b->n++] = (uint8_t)(v >> (8 * i));
}

/* A nested message: begun with its tag, its length put in at its end */
static size_t msg_begin(struct pbuf *b, uint32_t field)
{
	put_tag(b, field, WT_LEN);
	return b->n;
}

static void msg_end(struct pbuf *b, size_t at)
{
	uint8_t len[10];
	size_t n = 0, body = b->n - at;
	uint64_t v = body;

	if (b->err)
		return;
	while (v >= 0x80) {
		len[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	len[n++] = (uint8_t)v;
	if (!room(b, n))
		return;
	memmove(b->p + at + n, b->p + at, body);
	memcpy(b->p + at, len, n);
	b->n += n;
}

/* KeyValue { key = 1; AnyValue value = 2 { string 1 | bool 2 | int 3 } } */
static void attr_str(struct pbuf *b, uint32_t field, const char *k, const char *v)
{
	size_t kv, av;

	if (!v)
		return;
	kv = msg_begin(b, field);
	put_str(b, 1, k);
	av = msg_begin(b, 2);
	put_str(b, 1, v);
	msg_end(b, av);
	msg_end(b, kv);
}

static void attr_int(struct pbuf *b, uint32_t field, const char *k, int64_t v)
{
	size_t kv = msg_begin(b, field), av;

	put_str(b, 1, k);
	av = msg_begin(b, 2);
	put_tag(b, 3, WT_VARINT);
	put_varint(b, (uint64_t)v);
	msg_end(b, av);
	msg_end(b, kv);
}

static void attr_bool(struct pbuf *b, uint32_t field, const char *k, bool v)
{
	size_t kv = msg_begin(b, field), av;

	put_str(b, 1, k);
	av = msg_begin(b, 2);
	put_tag(b, 2, WT_VARINT);
	put_varint(b, v);
	msg_end(b, av);
	msg_end(b, kv);
}

/* "1.2.3.4:80", "[::1]:80" → address and port */
static bool split_addr(const char *s, char *addr, size_t len, int *port)
{
	const char *c;
	size_t n;

	if (!s || !(c = strrchr(s, ':')) || c == s)
		return false;
	n = (size_t)(c - s);
	if (s[0] == '[' && n >= 2 && s[n - 1] == ']') {
		s++;
		n -= 2;
	}
	if (n >= len)
		return false;
	memcpy(addr, s, n);
	addr[n] = '\0';
	*port = atoi(c + 1);
	return true;
}

static void attr_addr(struct pbuf *b, const char *prefix, const char *s)
{
	char addr[64], key[32];
	int port;

	if (!split_addr(s, addr, sizeof(addr), &port))
		return;
	snprintf(key, sizeof(key), "%s.address", prefix);
	attr_str(b, 9, key, addr);
	snprintf(key, sizeof(key), "%s.port", prefix);
	attr_int(b, 9, key, port);
}

static const char *const cat_keys[CP_CAT__COUNT] = {
    [CP_CAT_CPU] = "critpath.cpu_ns",	  [CP_CAT_RUNQUEUE] = "critpath.runqueue_ns",
    [CP_CAT_LOCK] = "critpath.lock_ns",	  [CP_CAT_NETWORK] = "critpath.network_ns",
    [CP_CAT_DISK] = "critpath.disk_ns",	  [CP_CAT_SLEEP] = "critpath.sleep_ns",
    [CP_CAT_SPAN] = NULL,		  [CP_CAT_UNEXPLAINED] = "critpath.unexplained_ns",
};

/* The time of segs[a..z) per category (span time is unexplained here: the
 * kernel walk makes none), interference apart */
static void attr_path(struct pbuf *b, const struct cp_segment *segs, uint32_t a, uint32_t z)
{
	uint64_t cat[CP_CAT__COUNT] = {0}, inter = 0;

	for (uint32_t i = a; i < z; i++) {
		uint64_t d = segs[i].end_ns - segs[i].start_ns;
		enum cp_category c = segs[i].category;

		cat[c == CP_CAT_SPAN ? CP_CAT_UNEXPLAINED : c] += d;
		if (segs[i].interference)
			inter += d;
	}
	for (int c = 0; c < CP_CAT__COUNT; c++)
		if (cat_keys[c])
			attr_int(b, 9, cat_keys[c], (int64_t)cat[c]);
	attr_int(b, 9, "critpath.interference_ns", (int64_t)inter);
}

struct who {
	int32_t pid, tid;
	const char *comm;
	uint64_t ns;
};

static int who_cmp(const void *x, const void *y)
{
	const struct who *a = x, *b = y;

	return a->ns < b->ns ? 1 : a->ns > b->ns ? -1 : 0;
}

/* critpath.culprits: ["comm pid/tid 1234567ns", ...], the costliest five */
static void attr_culprits(struct pbuf *b, const struct cp_request *r)
{
	struct who w[32];
	uint32_t n = 0;
	size_t kv, av, arr;

	for (uint32_t i = 0; i < r->nsegs; i++)
		for (uint32_t k = 0; k < r->segs[i].nculprits; k++) {
			const struct cp_culprit *c = &r->segs[i].culprits[k];
			uint32_t j;

			for (j = 0; j < n && (w[j].pid != c->pid || w[j].tid != c->tid); j++)
				;
			if (j == n) {
				if (n == sizeof(w) / sizeof(w[0]))
					continue;
				w[n++] = (struct who){c->pid, c->tid, c->comm, 0};
			}
			w[j].ns += c->ns;
		}
	if (!n)
		return;
	qsort(w, n, sizeof(w[0]), who_cmp);
	kv = msg_begin(b, 9);
	put_str(b, 1, "critpath.culprits");
	av = msg_begin(b, 2);
	arr = msg_begin(b, 5); /* ArrayValue { repeated AnyValue values = 1 } */
	for (uint32_t i = 0; i < n && i < 5; i++) {
		char s[96];
		size_t v;

		snprintf(s, sizeof(s), "%s %d/%d %lluns", w[i].comm ? w[i].comm : "?", w[i].pid,
			 w[i].tid, (unsigned long long)w[i].ns);
		v = msg_begin(b, 1);
		put_str(b, 1, s);
		msg_end(b, v);
	}
	msg_end(b, arr);
	msg_end(b, av);
	msg_end(b, kv);
}

/* The request's own attributes by protocol (OpenTelemetry semantic
 * conventions) */
static void attr_wire(struct pbuf *b, const struct cp_request *r)
{
	const struct cp_request_wire *w = r->wire;
	const char *proto = w ? w->protocol : NULL, *sp;
	char word[32];
	size_t n;

	sp = r->name ? strchr(r->name, ' ') : NULL;
	n = sp ? (size_t)(sp - r->name) : (r->name ? strlen(r->name) : 0);
	if (n >= sizeof(word))
		n = sizeof(word) - 1;
	memcpy(word, r->name ? r->name : "", n);
	word[n] = '\0';
	if (proto && !strncmp(proto, "http", 4)) {
		char path[TARGET_MAX];
		const char *q;

		attr_str(b, 9, "http.request.method", word);
		if (r->target) {
			char safe[TARGET_MAX];

			/* credentials in the query never leave (semconv's
			 * url.query rule, and --redact-query's keys) */
			proto__target_redacted(r->target, safe, sizeof(safe));
			snprintf(path, sizeof(path), "%s", safe);
			q = strchr(safe, '?');
			if (q) {
				path[q - safe] = '\0';
				attr_str(b, 9, "url.query", q + 1);
			}
			attr_str(b, 9, "url.path", path);
		}
		if (sp)
			attr_str(b, 9, "http.route", sp + 1);
		if (w->status)
			attr_int(b, 9, "http.response.status_code", w->status);
		attr_str(b, 9, "network.protocol.name", "http");
		attr_str(b, 9, "network.protocol.version", strcmp(proto, "http") ? "2" : "1.1");
	} else if (proto && !strcmp(proto, "grpc")) {
		const char *m = r->target ? strrchr(r->target, '/') : NULL;

		attr_str(b, 9, "rpc.system", "grpc");
		if (m && m != r->target) {
			char svc[TARGET_MAX];

			snprintf(svc, sizeof(svc), "%.*s", (int)(m - r->target - 1), r->target + 1);
			attr_str(b, 9, "rpc.service", svc);
			attr_str(b, 9, "rpc.method", m + 1);
		}
	} else if (proto && strcmp(proto, "dns")) {
		attr_str(b, 9, "db.system", proto);
		attr_str(b, 9, "db.operation.name", word);
	} else if (proto) {
		attr_str(b, 9, "network.protocol.name", proto);
	}
	if (w) {
		attr_addr(b, "server", w->server_addr);
		attr_addr(b, "client", w->client_addr);
	}
}

static void span_ids(uint8_t out[8], const uint8_t rnd[24], uint32_t i)
{
	uint64_t x;

	memcpy(&x, rnd + 16, 8);
	x += 0x9e3779b97f4a7c15ull * (i + 1);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	memcpy(out, &x, 8);
	if (!x)
		out[0] = 1;
}

/* Where a step ran outside the serving process: what to call it (a wait
 * for the request's own client is not a call) */
static const char *elsewhere(const struct cp_segment *s, const struct cp_request_wire *w)
{
	int32_t pid = w ? w->pid : -1;

	if (s->pid >= 0 && s->pid != pid)
		return s->nframes >= 3 ? s->frames[2] : s->comm;
	if (s->category == CP_CAT_NETWORK && s->peer &&
	    !(w && w->client_addr && !strcmp(s->peer, w->client_addr)))
		return s->peer;
	return NULL;
}

/* The outermost --probe'd call a step of the serving process ran in */
static const char *probed(const struct cp_segment *s, const struct cp_request_wire *w)
{
	if (!s->probe_frames || s->probe_frames > s->nframes || elsewhere(s, w))
		return NULL;
	return s->frames[s->nframes - s->probe_frames];
}

/* The ids and clock a request's child spans share */
struct parent {
	const uint8_t *trace_id, *span_id, *rnd;
	uint64_t off;
	uint32_t nspan;
};

/* A child span of kind per maximal run of the request's segments that
 * of() names alike (NULL: none) */
static void child_spans(struct pbuf *b, const struct cp_request *r, struct parent *p,
			uint32_t kind,
			const char *(*of)(const struct cp_segment *, const struct cp_request_wire *))
{
	const struct cp_segment *g = r->segs;

	for (uint32_t i = 0; i < r->nsegs;) {
		const char *name = of(&g[i], r->wire);
		uint32_t j = i + 1;
		uint8_t cid[8];
		size_t c;

		if (!name) {
			i++;
			continue;
		}
		while (j < r->nsegs && of(&g[j], r->wire) == name)
			j++;
		span_ids(cid, p->rnd, p->nspan++);
		c = msg_begin(b, 2);
		put_bytes(b, 1, p->trace_id, 16);
		put_bytes(b, 2, cid, 8);
		put_bytes(b, 4, p->span_id, 8);
		put_str(b, 5, name);
		put_tag(b, 6, WT_VARINT);
		put_varint(b, kind);
		put_fixed64(b, 7, g[i].start_ns + p->off);
		put_fixed64(b, 8, g[j - 1].end_ns + p->off);
		if (kind == KIND_INTERNAL) {
			attr_str(b, 9, "code.function.name", name);
		} else {
			if (g[i].peer)
				attr_addr(b, "server", g[i].peer);
			if (g[i].pid >= 0) {
				attr_int(b, 9, "critpath.pid", g[i].pid);
				attr_str(b, 9, "critpath.comm", g[i].comm);
			}
			if (g[i].host)
				attr_str(b, 9, "critpath.host", g[i].host);
		}
		attr_path(b, g, i, j);
		msg_end(b, c);
		i = j;
	}
}

int otlp__encode_request(struct pbuf *b, const struct cp_request *r,
			 const struct otlp_resource *res, unsigned why, const uint8_t rnd[24])
{
	const struct cp_request_wire *w = r->wire;
	uint8_t trace_id[16], parent[8], sid[8];
	bool opted = false, sampled = false, partial = r->partial;
	size_t rs, rsrc, ss, scope, sp, st;
	uint64_t off = (uint64_t)r->realtime_offset_ns;
	int32_t pid = w ? w->pid : -1;
	char trig[40] = "";
	struct parent ids = {.trace_id = trace_id, .span_id = sid, .rnd = rnd, .off = off};

	if (w && w->traceparent && (why & OTLP_OPTIN))
		opted = traceparent__parse(w->traceparent, trace_id, parent, &sampled);
	if (!opted)
		memcpy(trace_id, rnd, 16);
	span_ids(sid, rnd, ids.nspan++);
	rs = msg_begin(b, 1); /* ResourceSpans */
	rsrc = msg_begin(b, 1); /* Resource */
	attr_str(b, 1, "service.name", res && res->service ? res->service : r->service);
	attr_str(b, 1, "host.name", r->host ? r->host : res ? res->host : NULL);
	if (pid >= 0)
		attr_int(b, 1, "process.pid", pid);
	if (res && res->exe)
		attr_str(b, 1, "process.executable.path", res->exe);
	attr_str(b, 1, "telemetry.sdk.name", "critpath");
	msg_end(b, rsrc);
	ss = msg_begin(b, 2); /* ScopeSpans */
	scope = msg_begin(b, 1);
	put_str(b, 1, "critpath");
	put_str(b, 2, CRITPATH_VERSION);
	msg_end(b, scope);

	sp = msg_begin(b, 2); /* the SERVER span */
	put_bytes(b, 1, trace_id, 16);
	put_bytes(b, 2, sid, 8);
	if (opted && w->tracestate)
		put_str(b, 3, w->tracestate);
	if (opted)
		put_bytes(b, 4, parent, 8);
	put_str(b, 5, r->name ? r->name : "request");
	put_tag(b, 6, WT_VARINT);
	put_varint(b, KIND_SERVER);
	put_fixed64(b, 7, r->start_ns + off);
	put_fixed64(b, 8, r->end_ns + off);
	attr_wire(b, r);
	attr_path(b, r->segs, 0, r->nsegs);
	attr_bool(b, 9, "critpath.partial", partial);
	snprintf(trig, sizeof(trig), "%s%s%s", why & OTLP_SLOW ? "slow " : "",
		 why & OTLP_SAMPLED ? "sampled " : "", why & OTLP_OPTIN ? "opt-in " : "");
	if (trig[0]) {
		trig[strlen(trig) - 1] = '\0';
		attr_str(b, 9, "critpath.trigger", trig);
	}
	attr_culprits(b, r);
	if (w && w->status >= 500) {
		st = msg_begin(b, 15); /* Status { code = 3: ERROR } */
		put_tag(b, 3, WT_VARINT);
		put_varint(b, 2);
		msg_end(b, st);
	}
	msg_end(b, sp);

	/* a CLIENT span per stretch of the path in another process, an
	 * INTERNAL one per stretch in a --probe'd call of the serving process */
	child_spans(b, r, &ids, KIND_CLIENT, elsewhere);
	child_spans(b, r, &ids, KIND_INTERNAL, probed);
	msg_end(b, ss);
	msg_end(b, rs);
	return b->err ? -ENOMEM : 0;
}
