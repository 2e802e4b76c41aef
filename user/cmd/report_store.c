// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * report over a store (docs/store.md): the aggregation runs in ClickHouse and
 * only its sums come back, the ones engine__add_request would have kept, so
 * the report is the one the requests themselves give. Calls from one host
 * into another are stitched in the queries: the callee's steps join the
 * caller's request, the caller's wait loses the callee's time. Whole paths
 * are fetched only for the requests shown (the slowest, or json's).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clickhouse.h"
#include "engine.h"
#include "msg.h"
#include "report_cmd.h"
#include "report_store.h"
#include "util.h"

/* json lists every request up to this many; past it the slowest, said */
#define STORE_JSON_ALL 200000
#define STORE_JSON_SLOWEST 1000
/* the slowest's rids given as numbers up to this many (~90 KB of SQL,
 * within max_query_size's default 256 KiB) */
#define STORE_LITERAL_RIDS 4096

struct host_clock {
	char *name;
	int64_t offset;	/* ahead of the reference's */
	uint64_t unc, matched;
	bool placed;
};

struct fleet {
	struct ch_conn *c;
	struct engine *e;
	const char *src;  /* as the user may see it */
	const char *db;
	char *where;	  /* the filters on a request's own columns */
	char *own;	  /* the requests aggregated: where, not downstream, not a callee */
	char *edges;	  /* callee to caller across hosts (NULL: nothing to stitch) */
	char *match;	  /* the edges under roots the filters pick */
	bool by_service;  /* a service filter: downstream requests count as themselves */
	struct host_clock *hosts; /* the first is the reference */
	uint32_t nhosts;
	struct stack_name *stacks; /* by stack; their frames in stack_rows */
	uint32_t nstacks;
	struct ch_result stack_rows;
	char err[1024];
};

/* The bucket of x (engine__bucket), exact for any UInt64 */
static void put_bucket(FILE *f, const char *x)
{
	char e0[256], e[1024];

	snprintf(e0, sizeof(e0), "toUInt32(floor(log2(toFloat64(%s))))", x);
	snprintf(e, sizeof(e), "toUInt32(%s - (bitShiftRight(%s, %s) = 0))", e0, x, e0);
	fprintf(f, "if(%s < 64, toUInt32(%s), toUInt32((%s - 5) * 64 + bitAnd(bitShiftRight(%s, %s - 6), 63)))",
		x, x, e, x, e);
}

static void put_str(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\\' || *s == '\'')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('\'', f);
}

/* A statement built with fprintf: open, then done (NULL: no memory) */
struct sql {
	FILE *f;
	char *s;
	size_t n;
};

static FILE *sql__open(struct sql *q)
{
	q->s = NULL;
	q->f = open_memstream(&q->s, &q->n);
	return q->f;
}

static char *sql__done(struct sql *q)
{
	if (!q->f)
		return NULL;
	if (fclose(q->f)) {
		free(q->s);
		q->s = NULL;
	}
	q->f = NULL;
	return q->s;
}

static int fleet__query(struct fleet *fl, struct sql *q, struct ch_result *out)
{
	char *sql = sql__done(q);
	int err;

	if (!sql)
		return -ENOMEM;
	memset(out, 0, sizeof(*out));
	err = ch__query(fl->c, sql, out, fl->err, sizeof(fl->err));
	if (err) {
		if (getenv("CRITPATH_STORE_DEBUG"))
			fprintf(stderr, "critpath: query: %s\n", sql);
		engine__warn(fl->e, "%s", err == -ENOMEM ? "out of memory" : fl->err);
		ch_result__free(out);
	}
	free(sql);
	return err;
}

/* One number back */
static int fleet__count(struct fleet *fl, struct sql *q, uint64_t *v)
{
	struct ch_result r;
	int err = fleet__query(fl, q, &r);

	*v = 0;
	if (err)
		return err;
	if (ch_result__row(&r))
		ch_result__u64(&r, 0, v);
	ch_result__free(&r);
	return 0;
}

/* --- filters ------------------------------------------------------------- */

/* %XX in place (a URL's escapes) */
static void pct_decode(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '%' && isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2])) {
			char h[3] = {s[1], s[2], 0};

			*o++ = (char)strtol(h, NULL, 16);
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* key=value&… after the database: per-source filters (diff's two sides) */
struct url_filter {
	const char *host, *service, *name, *sku;
	uint64_t from_ns, to_ns, min_ns, max_ns;
	bool from_set, to_set;
};

static int url_filter__parse(char *q, struct url_filter *u, char *why, size_t whyn)
{
	for (char *kv = strtok(q, "&"); kv; kv = strtok(NULL, "&")) {
		char *v = strchr(kv, '=');
		bool rt;

		if (!v) {
			snprintf(why, whyn, "'%s' is not KEY=VALUE", kv);
			return -EINVAL;
		}
		*v++ = '\0';
		pct_decode(v);
		if (!strcmp(kv, "host")) {
			u->host = v;
		} else if (!strcmp(kv, "service")) {
			u->service = v;
		} else if (!strcmp(kv, "name")) {
			u->name = v;
		} else if (!strcmp(kv, "sku")) {
			u->sku = v;
		} else if (!strcmp(kv, "from") || !strcmp(kv, "to")) {
			uint64_t *t = kv[0] == 'f' ? &u->from_ns : &u->to_ns;

			if (parse_time_kind(v, t, &rt) || !rt) {
				snprintf(why, whyn, "%s=%s: not a time (RFC 3339 or Unix seconds)", kv,
					 v);
				return -EINVAL;
			}
			*(kv[0] == 'f' ? &u->from_set : &u->to_set) = true;
		} else if (!strcmp(kv, "min-latency") || !strcmp(kv, "max-latency")) {
			if (parse_duration(v, kv[1] == 'i' ? &u->min_ns : &u->max_ns)) {
				snprintf(why, whyn, "%s=%s: not a duration", kv, v);
				return -EINVAL;
			}
		} else {
			snprintf(why, whyn,
				 "unknown filter '%s' (host, service, name, sku, from, to, "
				 "min-latency, max-latency)",
				 kv);
			return -EINVAL;
		}
	}
	return 0;
}

static void put_eq(FILE *f, const char *col, const char *v)
{
	fprintf(f, " AND %s = ", col);
	put_str(f, v);
}

/* The filters of the report and of the URL on a request's columns */
static int fleet__where(struct fleet *fl, const struct url_filter *u)
{
	const struct engine_filter *ef = &engine__opts(fl->e)->filter;
	uint64_t base = 0;
	struct sql q;

	if (ef->tag)
		engine__warn(fl->e, "%s: --tag does not apply to a store (tags are not stored)",
			     fl->src);
	if ((ef->from_ns && !ef->from_realtime) || (ef->to_ns && !ef->to_realtime) ||
	    ef->from_rel || ef->to_rel) {
		/* "+DUR": from the store's first request */
		if ((ef->from_ns && !ef->from_realtime && !ef->from_rel) ||
		    (ef->to_ns && !ef->to_realtime && !ef->to_rel)) {
			snprintf(fl->err, sizeof(fl->err),
				 "--from/--to on a recording's clock do not apply to a store: give "
				 "a time (RFC 3339, Unix seconds) or +DURATION");
			return -EINVAL;
		}
		if (!sql__open(&q))
			return -ENOMEM;
		fprintf(q.f, "SELECT min(start_ns) FROM %s.requests", fl->db);
		if (fleet__count(fl, &q, &base))
			return -EIO;
	}
	if (!sql__open(&q))
		return -ENOMEM;
	fputs("1", q.f);
	if (ef->service || u->service)
		put_eq(q.f, "service", ef->service ? ef->service : u->service);
	if (ef->service && u->service)
		put_eq(q.f, "service", u->service);
	if (ef->name)
		put_eq(q.f, "name", ef->name);
	if (u->name)
		put_eq(q.f, "name", u->name);
	if (ef->host)
		put_eq(q.f, "host", ef->host);
	if (u->host)
		put_eq(q.f, "host", u->host);
	if (ef->min_latency_ns)
		fprintf(q.f, " AND latency_ns >= %" PRIu64, ef->min_latency_ns);
	if (ef->max_latency_ns)
		fprintf(q.f, " AND latency_ns <= %" PRIu64, ef->max_latency_ns);
	if (u->min_ns)
		fprintf(q.f, " AND latency_ns >= %" PRIu64, u->min_ns);
	if (u->max_ns)
		fprintf(q.f, " AND latency_ns <= %" PRIu64, u->max_ns);
	if (ef->from_ns || ef->from_rel)
		fprintf(q.f, " AND start_ns >= %" PRIu64,
			ef->from_rel ? base + ef->from_ns : ef->from_ns);
	if (ef->to_ns || ef->to_rel)
		fprintf(q.f, " AND start_ns <= %" PRIu64, ef->to_rel ? base + ef->to_ns : ef->to_ns);
	if (u->from_set)
		fprintf(q.f, " AND start_ns >= %" PRIu64, u->from_ns);
	if (u->to_set)
		fprintf(q.f, " AND start_ns <= %" PRIu64, u->to_ns);
	if (u->sku) {
		fprintf(q.f, " AND rid GLOBAL IN (SELECT rid FROM %s.steps WHERE category = 0 AND sku = ",
			fl->db);
		put_str(q.f, u->sku);
		fputc(')', q.f);
	}
	fl->by_service = ef->service || u->service;
	fl->where = sql__done(&q);
	return fl->where ? 0 : -ENOMEM;
}

/* --- stitching across hosts ---------------------------------------------- */

/* Callee to caller: a call of one host and a request of another with the
 * client's address and the sequence number of the call's first byte */
static char *edges_sql(const struct fleet *fl)
{
	struct sql q;

	if (!sql__open(&q))
		return NULL;
	fprintf(q.f,
		"SELECT callee, caller, caller_host, callee_host, call_frames, call_category, "
		"call_start, call_end, callee_service, callee_name, callee_start, callee_end, "
		"callee_lat FROM "
		"(SELECT rid AS callee, client_addr AS k_addr, rx_seq AS k_seq, host AS callee_host, "
		"service AS callee_service, name AS callee_name, start_ns AS callee_start, "
		"end_ns AS callee_end, latency_ns AS callee_lat FROM %s.requests "
		"WHERE rx_len > 0 AND downstream = 0) "
		"GLOBAL ANY INNER JOIN "
		"(SELECT rid AS caller, local_addr AS k_addr, tx_seq AS k_seq, host AS caller_host, "
		"frames AS call_frames, category AS call_category, call_start_ns AS call_start, "
		"call_end_ns AS call_end FROM %s.calls WHERE downstream = 0 AND interference = 0) "
		"USING (k_addr, k_seq) "
		"WHERE callee_host != caller_host",
		fl->db, fl->db);
	return sql__done(&q);
}

/* The edges with the request at the top of each (root: up to four tiers),
 * the roots' own columns, and only the roots the filters pick */
static char *match_sql(const struct fleet *fl)
{
	const char *e = fl->edges;
	struct sql q;

	if (!sql__open(&q))
		return NULL;
	fprintf(q.f,
		"SELECT * FROM (SELECT *, if(up2 != 0, up2, if(up1 != 0, up1, caller)) AS root, "
		"1 + (up1 != 0) + (up2 != 0) AS depth FROM (SELECT * FROM (SELECT * FROM (%s) "
		"GLOBAL ANY LEFT JOIN (SELECT callee AS caller, up1 FROM (SELECT callee, caller AS "
		"up1 FROM (%s))) USING caller) GLOBAL ANY LEFT JOIN (SELECT callee AS up1, caller AS "
		"up2 FROM (%s)) USING up1)) GLOBAL ANY INNER JOIN (SELECT rid AS root, service AS "
		"root_service, name AS root_name, latency_ns AS root_lat, host AS root_host FROM "
		"%s.requests WHERE %s AND downstream = 0) USING root",
		e, e, e, fl->db, fl->where);
	return sql__done(&q);
}

/* Whether any call crosses hosts: then fl->edges and fl->match */
static int fleet__stitch_begin(struct fleet *fl)
{
	struct sql q;
	uint64_t n = 0;
	int err;

	if (fl->by_service)
		return 0; /* a tier asked for: its requests as themselves */
	fl->edges = edges_sql(fl);
	if (!fl->edges || !sql__open(&q))
		return -ENOMEM;
	fprintf(q.f, "SELECT count() FROM (%s)", fl->edges);
	err = fleet__count(fl, &q, &n);
	if (err || !n) {
		free(fl->edges);
		fl->edges = NULL;
		return err;
	}
	fl->match = match_sql(fl);
	return fl->match ? 0 : -ENOMEM;
}

/* The requests aggregated: what where picks, not served to a caller whose
 * path holds them (downstream on their host, or a callee across hosts) */
static int fleet__own(struct fleet *fl)
{
	struct sql q;

	if (!sql__open(&q))
		return -ENOMEM;
	fprintf(q.f, "%s", fl->where);
	if (!fl->by_service)
		fputs(" AND downstream = 0", q.f);
	if (fl->edges)
		fprintf(q.f, " AND rid GLOBAL NOT IN (SELECT callee FROM (%s))", fl->edges);
	fl->own = sql__done(&q);
	return fl->own ? 0 : -ENOMEM;
}

/* A callee's frames under its root: the root's service and name, then the
 * callee's "service@host name" (as kpath names a step in a process of
 * another host), then its frames below its name */
#define UNDER_ROOT(fr, host)                                                                       \
	"arrayConcat([root_service, root_name, concat(" fr "[1], if(" host " != root_host, "      \
	"concat('@', " host "), ''), ' ', " fr "[2])], arraySlice(" fr ", 3))"

/* The steps of the requests aggregated, as (rid, stk: the stack, frames,
 * category, sku, sns Int64, lat, service, name) rows: their own, then their
 * callees' under them, then what the waits for the callees lose to them.
 * A stack is the store's steps.stack: a hash of its frames and category. */
#define STACK_OF(fr, cat) "cityHash64(arrayStringConcat(" fr ", '\\x1e'), toString(" cat "))"

static void put_steps(FILE *f, const struct fleet *fl)
{
	fprintf(f,
		"SELECT rid, stack AS stk, frames, category, sku, toInt64(ns) AS sns, latency_ns AS "
		"lat, service, name FROM %s.steps WHERE %s",
		fl->db, fl->own);
	if (!fl->match)
		return;
	fprintf(f,
		" UNION ALL SELECT root AS rid, " STACK_OF("frames", "category") " AS stk, "
		UNDER_ROOT("cfr", "callee_host") " AS frames, category, sku, toInt64(ns) AS sns, root_lat AS lat, "
		"root_service AS service, root_name AS name FROM (SELECT rid AS callee, frames AS cfr, "
		"category, sku, ns FROM %s.steps) GLOBAL ANY INNER JOIN (SELECT callee, root, "
		"root_service, root_name, root_lat, root_host, callee_host FROM (%s)) USING callee"
		" UNION ALL SELECT root AS rid, " STACK_OF("frames", "category") " AS stk, "
		"if(caller = root, call_frames, " UNDER_ROOT("call_frames", "caller_host") ") AS frames, "
		"call_category AS category, '' AS sku, -toInt64(least(callee_lat, if(call_end > "
		"call_start, call_end - call_start, 0))) AS sns, root_lat AS lat, root_service AS "
		"service, root_name AS name FROM (%s)",
		fl->db, fl->match, fl->match);
}

/* Per request and stack (and whatever more `by` names): (rid, stack, ns,
 * rlat: the latency, and by's columns) */
static void put_per_request(FILE *f, const struct fleet *fl, const char *by, const char *where)
{
	fprintf(f, "SELECT rid, stk AS stack, sum(sns) AS ns, any(lat) AS rlat%s%s FROM (",
		by ? ", " : "", by ? by : "");
	put_steps(f, fl);
	/* a step the waits lost all their time of is gone; one of 0 ns is not */
	fprintf(f, ") %s GROUP BY rid, stack%s%s HAVING ns > 0 OR (ns = 0 AND min(sns) >= 0)",
		where ? where : "", by ? ", " : "", by ? by : "");
}

/* --- sums ---------------------------------------------------------------- */

/* "[1,2,3]" at *p: numbers into a[0..n) */
static int parse_u64s(char **p, uint64_t **a, uint32_t *n, uint32_t *cap)
{
	char *s = *p;

	*n = 0;
	if (*s++ != '[')
		return -EINVAL;
	while (*s && *s != ']') {
		char *end;
		unsigned long long v = strtoull(s, &end, 10);

		if (end == s)
			return -EINVAL;
		if (grow_array((void **)a, cap, *n + 1, sizeof(**a), 64))
			return -ENOMEM;
		(*a)[(*n)++] = v;
		s = end;
		if (*s == ',')
			s++;
	}
	if (*s != ']')
		return -EINVAL;
	*p = s + 1;
	return 0;
}

/* sumMap's "([k..],[v..])" into buckets */
struct pairs {
	uint64_t *k, *v;
	uint32_t capk, capv, n;
	struct engine_bucket *b;
	uint32_t capb;
};

static int pairs__parse(struct pairs *p, char *s)
{
	uint32_t nk, nv;

	if (*s++ != '(' || parse_u64s(&s, &p->k, &nk, &p->capk) || *s++ != ',' ||
	    parse_u64s(&s, &p->v, &nv, &p->capv) || nk != nv)
		return -EINVAL;
	if (grow_array((void **)&p->b, &p->capb, nk + 1, sizeof(*p->b), 64))
		return -ENOMEM;
	for (uint32_t i = 0; i < nk; i++)
		p->b[i] = (struct engine_bucket){(uint32_t)p->k[i], p->v[i]};
	p->n = nk;
	return 0;
}

static void pairs__free(struct pairs *p)
{
	free(p->k);
	free(p->v);
	free(p->b);
}

/* An Array(String) field into frames (pointing into the row) */
static int frames__parse(char *s, const char ***fr, uint32_t *n, uint32_t *cap)
{
	char *item;

	*n = 0;
	while (ch_array__next(&s, &item, NULL)) {
		if (grow_array((void **)fr, cap, *n + 1, sizeof(**fr), 16))
			return -ENOMEM;
		(*fr)[(*n)++] = item;
	}
	return 0;
}

static int bad_row(struct fleet *fl, const char *what)
{
	engine__warn(fl->e, "%s: an answer to the %s query was not understood", fl->src, what);
	return -EPROTO;
}

/* Requests: how many, how many left out, and the latency histogram */
static int fleet__latency(struct fleet *fl, uint64_t *nown)
{
	struct engine_latency_sums l = {0};
	struct pairs cnt = {0}, mx = {0};
	struct ch_result r;
	uint64_t all = 0, picked = 0, down = 0;
	struct sql q;
	int err;

	if (!sql__open(&q))
		return -ENOMEM;
	fprintf(q.f, "SELECT count() FROM %s.requests", fl->db);
	err = fleet__count(fl, &q, &all);
	if (err)
		return err;
	if (!sql__open(&q))
		return -ENOMEM;
	fprintf(q.f, "SELECT count() FROM %s.requests WHERE %s", fl->db, fl->where);
	err = fleet__count(fl, &q, &picked);
	if (err)
		return err;
	if (!sql__open(&q))
		return -ENOMEM;
	fputs("SELECT b, count(), sum(latency_ns), max(latency_ns) FROM (SELECT latency_ns, ", q.f);
	put_bucket(q.f, "latency_ns");
	fprintf(q.f, " AS b FROM %s.requests WHERE %s) GROUP BY b", fl->db, fl->own);
	err = fleet__query(fl, &q, &r);
	if (err)
		return err;
	while (!err && ch_result__row(&r)) {
		uint64_t b, n, sum, max;

		if (r.nfields < 4 || ch_result__u64(&r, 0, &b) || ch_result__u64(&r, 1, &n) ||
		    ch_result__u64(&r, 2, &sum) || ch_result__u64(&r, 3, &max)) {
			err = bad_row(fl, "latency");
			break;
		}
		if (grow_array((void **)&cnt.b, &cnt.capb, cnt.n + 1, sizeof(*cnt.b), 64) ||
		    grow_array((void **)&mx.b, &mx.capb, mx.n + 1, sizeof(*mx.b), 64)) {
			err = -ENOMEM;
			break;
		}
		cnt.b[cnt.n++] = (struct engine_bucket){(uint32_t)b, n};
		mx.b[mx.n++] = (struct engine_bucket){(uint32_t)b, max};
		l.nrequests += n;
		l.total_ns += sum;
		if (max > l.max_ns)
			l.max_ns = max;
	}
	if (err) {
		ch_result__free(&r);
		pairs__free(&cnt);
		pairs__free(&mx);
		return err;
	}
	ch_result__free(&r);
	down = picked >= l.nrequests ? picked - l.nrequests : 0;
	l.ndownstream = down;
	l.nfiltered = all - picked;
	l.counts = cnt.b;
	l.ncounts = cnt.n;
	l.max = mx.b;
	l.nmax = mx.n;
	err = engine__merge_latency(fl->e, &l);
	pairs__free(&cnt);
	pairs__free(&mx);
	*nown = l.nrequests;
	return err;
}

/* Every step's frames and category by its stack, kept in fl */
struct stack_name {
	uint64_t stack;
	const char **frames;
	uint32_t nframes;
	enum cp_category category;
};

static int stack_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct stack_name *)a)->stack, y = ((const struct stack_name *)b)->stack;

	return x < y ? -1 : x > y;
}

static const struct stack_name *fleet__stack(const struct fleet *fl, uint64_t stack)
{
	struct stack_name k = {.stack = stack};

	return bsearch(&k, fl->stacks, fl->nstacks, sizeof(k), stack_cmp);
}

static int fleet__stack_names(struct fleet *fl)
{
	uint32_t cap = 0;
	struct sql q;
	int err;

	if (!sql__open(&q))
		return -ENOMEM;
	fputs("SELECT stk, any(frames), any(category) FROM (", q.f);
	put_steps(q.f, fl);
	fputs(") GROUP BY stk", q.f);
	err = fleet__query(fl, &q, &fl->stack_rows);
	while (!err && ch_result__row(&fl->stack_rows)) {
		struct ch_result *r = &fl->stack_rows;
		struct stack_name *n;
		uint32_t capfr = 0;
		uint64_t cat;

		if (grow_array((void **)&fl->stacks, &cap, fl->nstacks + 1, sizeof(*fl->stacks), 64)) {
			err = -ENOMEM;
			break;
		}
		n = &fl->stacks[fl->nstacks];
		memset(n, 0, sizeof(*n));
		if (r->nfields < 3 || ch_result__u64(r, 0, &n->stack) ||
		    ch_result__u64(r, 2, &cat)) {
			err = bad_row(fl, "steps");
			break;
		}
		/* the frames stay in the answer's body, which fl keeps */
		err = frames__parse(r->field[1], &n->frames, &n->nframes, &capfr);
		n->category = cat < CP_CAT__COUNT ? (enum cp_category)cat : CP_CAT_UNEXPLAINED;
		fl->nstacks++;
	}
	if (!err)
		qsort(fl->stacks, fl->nstacks, sizeof(*fl->stacks), stack_cmp);
	return err;
}

/* The profile: per step, the sums over its time per request */
/* Whether the steps aggregated are one row per request and stack already:
 * the writer makes one per request, stack and SKU, so they are when no
 * callee joins its root and no host has a category on two SKUs (a host of
 * one SKU: cpu on it, waits on none; hosts of different SKUs are fine, a
 * request's own steps are on its host). Then the profile reads the rows as they
 * are, without grouping them per request first (over a million requests
 * that grouping, millions of groups, was most of a report's time) */
static int fleet__steps_unique(struct fleet *fl, bool *unique)
{
	uint64_t n = 0;
	struct sql q;
	int err;

	*unique = false;
	if (fl->match)
		return 0;
	if (!sql__open(&q))
		return -ENOMEM;
	fprintf(q.f,
		"SELECT count() FROM (SELECT host, category FROM %s.steps WHERE %s GROUP BY host, "
		"category HAVING uniqExact(sku) > 1)",
		fl->db, fl->own);
	err = fleet__count(fl, &q, &n);
	*unique = !err && n == 0;
	return err;
}

static int fleet__steps(struct fleet *fl, uint64_t nreq)
{
	struct pairs dist = {0}, lat = {0};
	uint64_t *few = NULL;
	uint32_t capfew = 0;
	struct ch_result r;
	struct sql q;
	bool unique = false;
	int err;

	/* with fewer than ENGINE_FEW requests the few keep their order */
	if (nreq >= ENGINE_FEW) {
		err = fleet__steps_unique(fl, &unique);
		if (err)
			return err;
	}
	if (!sql__open(&q))
		return -ENOMEM;
	fputs("SELECT stack, count(), sum(ns), min(ns), max(ns), "
	      "sum(toFloat64(ns) * toFloat64(ns)), sumMap([b], [toUInt64(1)]), sumMap([lb], "
	      "[toUInt64(ns)]), ",
	      q.f);
	fprintf(q.f, nreq < ENGINE_FEW ? "groupArray(%d)(toUInt64(ns))" : "[]", ENGINE_FEW);
	fputs(" FROM (SELECT stack, ns, ", q.f);
	put_bucket(q.f, "toUInt64(ns)");
	fputs(" AS b, ", q.f);
	put_bucket(q.f, "rlat");
	fputs(" AS lb FROM (", q.f);
	if (unique)
		fprintf(q.f, "SELECT stack, toInt64(ns) AS ns, latency_ns AS rlat FROM %s.steps WHERE %s",
			fl->db, fl->own);
	else
		put_per_request(q.f, fl, NULL, NULL);
	fputs(")) GROUP BY stack", q.f);
	err = fleet__query(fl, &q, &r);
	if (err)
		return err;
	while (!err && ch_result__row(&r)) {
		struct engine_step_sums s = {0};
		const struct stack_name *n;
		uint64_t stack;
		uint32_t nfew32;
		char *fews;
		int64_t mn, mx, tot, req;

		if (r.nfields < 9 || ch_result__u64(&r, 0, &stack) || ch_result__i64(&r, 1, &req) ||
		    ch_result__i64(&r, 2, &tot) || ch_result__i64(&r, 3, &mn) ||
		    ch_result__i64(&r, 4, &mx) || pairs__parse(&dist, r.field[6]) ||
		    pairs__parse(&lat, r.field[7]) || !(n = fleet__stack(fl, stack))) {
			err = bad_row(fl, "profile");
			break;
		}
		fews = r.field[8];
		if (parse_u64s(&fews, &few, &nfew32, &capfew)) {
			err = bad_row(fl, "profile");
			break;
		}
		s.frames = n->frames;
		s.nframes = n->nframes;
		s.category = n->category;
		s.requests = (uint64_t)req;
		s.total_ns = (uint64_t)tot;
		s.min_ns = (uint64_t)mn;
		s.max_ns = (uint64_t)mx;
		s.sumsq = strtod(r.field[5], NULL);
		s.dist = dist.b;
		s.ndist = dist.n;
		s.by_lat = lat.b;
		s.nby_lat = lat.n;
		s.few = few;
		s.nfew = nfew32;
		err = engine__merge_step(fl->e, &s);
	}
	ch_result__free(&r);
	pairs__free(&dist);
	pairs__free(&lat);
	free(few);
	return err;
}

/* The contention table: culprits of the requests aggregated (their
 * callees' under them) */
static int fleet__blame(struct fleet *fl)
{
	struct ch_result r;
	struct sql q;
	int err;

	if (!sql__open(&q))
		return -ENOMEM;
	/* the writer makes a row per request and culprit: without callees
	 * joined, a culprit's requests are its rows */
	fprintf(q.f,
		"SELECT pid, tid, comm, category, sum(ns), %s FROM (SELECT rid, pid, "
		"tid, comm, category, ns FROM %s.blame WHERE %s",
		fl->match ? "uniqExact(rid)" : "count()", fl->db, fl->own);
	if (fl->match)
		fprintf(q.f,
			" UNION ALL SELECT root AS rid, pid, tid, comm, category, ns FROM (SELECT "
			"rid AS callee, pid, tid, comm, category, ns FROM %s.blame) GLOBAL ANY INNER "
			"JOIN (SELECT callee, root FROM (%s)) USING callee",
			fl->db, fl->match);
	fputs(") GROUP BY pid, tid, comm, category", q.f);
	err = fleet__query(fl, &q, &r);
	if (err)
		return err;
	while (!err && ch_result__row(&r)) {
		int64_t pid, tid;
		uint64_t cat, ns, req;
		const char *comm;

		if (r.nfields < 6 || ch_result__i64(&r, 0, &pid) || ch_result__i64(&r, 1, &tid) ||
		    !(comm = ch_result__str(&r, 2, NULL)) || ch_result__u64(&r, 3, &cat) ||
		    ch_result__u64(&r, 4, &ns) || ch_result__u64(&r, 5, &req)) {
			err = bad_row(fl, "contention");
			break;
		}
		err = engine__merge_culprit(fl->e, (int32_t)pid, (int32_t)tid, comm[0] ? comm : NULL,
					    cat == CP_CAT_LOCK ? CP_CAT_LOCK : CP_CAT_RUNQUEUE, ns,
					    (uint32_t)req);
	}
	ch_result__free(&r);
	return err;
}

/* One SKU's row of an acc query: (.., n, total, min, max, sumMap) from col */
static int acc__parse(struct ch_result *r, uint32_t col, struct pairs *p,
		      struct engine_acc_sums *a)
{
	if (r->nfields < col + 5 || ch_result__u64(r, col, &a->n) ||
	    ch_result__u64(r, col + 1, &a->total_ns) || ch_result__u64(r, col + 2, &a->min_ns) ||
	    ch_result__u64(r, col + 3, &a->max_ns) || pairs__parse(p, r->field[col + 4]))
		return -EINVAL;
	a->dist = p->b;
	a->ndist = p->n;
	return 0;
}

/* CPU time by SKU: the SKUs seen, and with two or more each cpu step's and
 * each kind of request's time on each */
static int fleet__skus(struct fleet *fl)
{
	uint32_t nskus = 0;
	struct pairs p = {0};
	struct ch_result r;
	struct sql q;
	int err;

	if (!sql__open(&q))
		return -ENOMEM;
	fputs("SELECT sku, uniqExact(rid), sum(sns) FROM (", q.f);
	put_steps(q.f, fl);
	fputs(") WHERE category = 0 AND sku != '' GROUP BY sku", q.f);
	err = fleet__query(fl, &q, &r);
	if (err)
		return err;
	while (!err && ch_result__row(&r)) {
		uint64_t n, ns;
		const char *sku;

		if (r.nfields < 3 || !(sku = ch_result__str(&r, 0, NULL)) ||
		    ch_result__u64(&r, 1, &n) || ch_result__u64(&r, 2, &ns)) {
			err = bad_row(fl, "SKU");
			break;
		}
		err = engine__merge_sku_seen(fl->e, sku, n, ns);
		nskus++;
	}
	ch_result__free(&r);
	if (err || nskus < 2)
		return err;
	/* each cpu step on each SKU, by its time per request there */
	if (!sql__open(&q))
		return -ENOMEM;
	fputs("SELECT stack, sku, count(), sum(ns), min(ns), max(ns), sumMap([b], [toUInt64(1)]) "
	      "FROM (SELECT stack, sku, toUInt64(ns) AS ns, ",
	      q.f);
	put_bucket(q.f, "toUInt64(ns)");
	fputs(" AS b FROM (", q.f);
	put_per_request(q.f, fl, "sku", "WHERE category = 0 AND sku != ''");
	fputs(")) GROUP BY stack, sku", q.f);
	err = fleet__query(fl, &q, &r);
	if (err)
		return err;
	while (!err && ch_result__row(&r)) {
		struct engine_acc_sums a = {0};
		const struct stack_name *n;
		const char *sku;
		uint64_t stack;

		if (r.nfields < 7 || ch_result__u64(&r, 0, &stack) ||
		    !(n = fleet__stack(fl, stack)) || !(sku = ch_result__str(&r, 1, NULL)) ||
		    acc__parse(&r, 2, &p, &a)) {
			err = bad_row(fl, "SKU");
			break;
		}
		err = engine__merge_sku_step(fl->e, n->frames, n->nframes, sku, &a);
	}
	ch_result__free(&r);
	/* each kind of request's cpu time on each SKU */
	if (!err && !sql__open(&q))
		err = -ENOMEM;
	if (!err) {
		fputs("SELECT rsvc, rname, sku, count(), sum(ns), min(ns), max(ns), sumMap([b], "
		      "[toUInt64(1)]) FROM (SELECT rid, sku, any(service) AS rsvc, any(name) AS "
		      "rname, toUInt64(sum(sns)) AS ns, ",
		      q.f);
		put_bucket(q.f, "toUInt64(sum(sns))");
		fputs(" AS b FROM (", q.f);
		put_steps(q.f, fl);
		fputs(") WHERE category = 0 AND sku != '' GROUP BY rid, sku HAVING sum(sns) > 0 OR "
		      "(sum(sns) = 0 AND min(sns) >= 0)) GROUP BY rsvc, rname, sku",
		      q.f);
		err = fleet__query(fl, &q, &r);
		while (!err && ch_result__row(&r)) {
			struct engine_acc_sums a = {0};
			const char *svc, *name, *sku;

			if (r.nfields < 8 || !(svc = ch_result__str(&r, 0, NULL)) ||
			    !(name = ch_result__str(&r, 1, NULL)) ||
			    !(sku = ch_result__str(&r, 2, NULL)) || acc__parse(&r, 3, &p, &a)) {
				err = bad_row(fl, "SKU");
				break;
			}
			err = engine__merge_sku_kind(fl->e, svc, name, sku, &a);
		}
		ch_result__free(&r);
	}
	pairs__free(&p);
	return err;
}

/* --- hosts and clocks ---------------------------------------------------- */

struct pair_bound {
	uint32_t a, b;	 /* caller's host, callee's host */
	int64_t lo, hi;	 /* the callee's clock minus the caller's within */
	uint64_t n;
};

static uint32_t host_find(struct host_clock *h, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(h[i].name, name))
			return i;
	return UINT32_MAX;
}

/* Every host of the requests picked, placed on the first's clock through the
 * calls between them (docs/store.md "Across hosts") */
static int fleet__hosts(struct fleet *fl)
{
	struct cp_sink sink = engine__sink(fl->e);
	struct host_clock *h = NULL;
	struct pair_bound *pb = NULL;
	uint32_t nh = 0, caph = 0, np = 0, capp = 0;
	struct ch_result r = {0};
	struct sql q;
	int err;

	if (!sql__open(&q))
		return -ENOMEM;
	fprintf(q.f, "SELECT DISTINCT host FROM %s.requests WHERE %s ORDER BY host", fl->db,
		fl->where);
	err = fleet__query(fl, &q, &r);
	if (err)
		return err;
	while (!err && ch_result__row(&r)) {
		const char *name = ch_result__str(&r, 0, NULL);

		if (!name || grow_array((void **)&h, &caph, nh + 1, sizeof(*h), 8) ||
		    !(h[nh].name = strdup(name))) {
			err = -ENOMEM;
			break;
		}
		h[nh].offset = 0;
		h[nh].unc = h[nh].matched = 0;
		h[nh].placed = nh == 0;
		nh++;
	}
	ch_result__free(&r);
	if (!err && fl->edges) {
		if (!sql__open(&q))
			err = -ENOMEM;
		if (!err) {
			fprintf(q.f,
				"SELECT caller_host, callee_host, max(toInt64(callee_end) - "
				"toInt64(call_end)), min(toInt64(callee_start) - toInt64(call_start)), "
				"count() FROM (%s) GROUP BY caller_host, callee_host",
				fl->edges);
			err = fleet__query(fl, &q, &r);
		}
		while (!err && ch_result__row(&r)) {
			const char *a = ch_result__str(&r, 0, NULL), *b = ch_result__str(&r, 1, NULL);
			struct pair_bound p;

			if (!a || !b || ch_result__i64(&r, 2, &p.lo) || ch_result__i64(&r, 3, &p.hi) ||
			    ch_result__u64(&r, 4, &p.n)) {
				err = bad_row(fl, "clock");
				break;
			}
			p.a = host_find(h, nh, a);
			p.b = host_find(h, nh, b);
			if (p.a == UINT32_MAX || p.b == UINT32_MAX)
				continue;
			if (grow_array((void **)&pb, &capp, np + 1, sizeof(*pb), 8)) {
				err = -ENOMEM;
				break;
			}
			pb[np++] = p;
		}
		ch_result__free(&r);
	}
	/* from the reference outwards, one pair at a time */
	for (bool more = true; !err && more;) {
		more = false;
		for (uint32_t i = 0; i < np; i++) {
			struct pair_bound *p = &pb[i];
			int64_t mid = p->lo / 2 + p->hi / 2 + (p->lo % 2 + p->hi % 2) / 2;
			uint64_t unc = p->hi > p->lo ? (uint64_t)(p->hi - p->lo) / 2 : 0;

			if (h[p->a].placed == h[p->b].placed)
				continue;
			if (h[p->a].placed) {
				h[p->b].offset = h[p->a].offset + mid;
				h[p->b].unc = h[p->a].unc + unc;
				h[p->b].matched = p->n;
				h[p->b].placed = true;
			} else {
				h[p->a].offset = h[p->b].offset - mid;
				h[p->a].unc = h[p->b].unc + unc;
				h[p->a].matched = p->n;
				h[p->a].placed = true;
			}
			more = true;
		}
	}
	for (uint32_t i = 0; !err && i < nh; i++) {
		struct cp_host c = {h[i].name, h[i].offset, h[i].unc, h[i].matched,
				    i == 0 ? "reference" : h[i].matched ? "messages" : "realtime"};

		sink.host(sink.ctx, &c);
	}
	fl->hosts = h;
	fl->nhosts = nh;
	free(pb);
	return err;
}

/* --- whole requests ------------------------------------------------------ */

/* A request being read back: its strings live in its result's body */
struct kept {
	uint64_t rid;
	struct cp_request req;
	struct cp_segment *segs;
	uint32_t nsegs, capsegs;
	char idbuf[32];
};

struct kept_set {
	struct kept *k;
	uint32_t n, cap;
	/* every segment's frames and culprits, in arrays per segment */
	const char ***frames;
	struct cp_culprit **culs;
	uint32_t nfr, capfr, capculs;
};

static struct kept *kept_find(struct kept_set *ks, uint64_t rid)
{
	for (uint32_t i = 0; i < ks->n; i++)
		if (ks->k[i].rid == rid)
			return &ks->k[i];
	return NULL;
}

static void kept_set__free(struct kept_set *ks)
{
	for (uint32_t i = 0; i < ks->n; i++)
		free(ks->k[i].segs);
	for (uint32_t i = 0; i < ks->nfr; i++) {
		free(ks->frames[i]);
		free(ks->culs[i]);
	}
	free(ks->frames);
	free(ks->culs);
	free(ks->k);
	memset(ks, 0, sizeof(*ks));
}

/* Frames and culprits of a segment kept until the set is freed */
static int kept_set__own(struct kept_set *ks, const char **fr, struct cp_culprit *cul)
{
	if (grow_array((void **)&ks->frames, &ks->capfr, ks->nfr + 1, sizeof(*ks->frames), 64) ||
	    grow_array((void **)&ks->culs, &ks->capculs, ks->nfr + 1, sizeof(*ks->culs), 64)) {
		free(fr);
		free(cul);
		return -ENOMEM;
	}
	ks->frames[ks->nfr] = fr;
	ks->culs[ks->nfr++] = cul;
	return 0;
}

static int parse_i32s(char *s, int32_t **a, uint32_t *n)
{
	uint64_t *v = NULL;
	uint32_t cap = 0;
	char *p = s;
	int err;

	/* Int32 arrays: may hold negatives */
	*n = 0;
	*a = NULL;
	if (*p++ != '[')
		return -EINVAL;
	while (*p && *p != ']') {
		char *end;
		long long x = strtoll(p, &end, 10);

		if (end == p)
			return -EINVAL;
		if (grow_array((void **)&v, &cap, *n + 1, sizeof(*v), 8)) {
			free(v);
			return -ENOMEM;
		}
		v[(*n)++] = (uint64_t)x;
		p = *end == ',' ? end + 1 : end;
	}
	err = 0;
	*a = malloc((*n + 1) * sizeof(**a));
	if (!*a)
		err = -ENOMEM;
	for (uint32_t i = 0; !err && i < *n; i++)
		(*a)[i] = (int32_t)v[i];
	free(v);
	return err;
}

/* The requests of rids (a subquery after GLOBAL IN, or a list of numbers
 * after IN: in, which) with their segments, in ks; their columns (host,
 * service, ...) point into *rq and *rs, kept by the caller */
static int fleet__read_requests(struct fleet *fl, const char *in, const char *rids,
				struct kept_set *ks, struct ch_result *rq, struct ch_result *rs)
{
	struct sql q;
	int err;

	if (!sql__open(&q))
		return -ENOMEM;
	fprintf(q.f,
		"SELECT rid, id, host, service, name, target, start_ns, end_ns, partial, downstream "
		"FROM %s.requests WHERE rid %s (%s)",
		fl->db, in, rids);
	err = fleet__query(fl, &q, rq);
	if (err)
		return err;
	while (!err && ch_result__row(rq)) {
		struct kept *k;
		uint64_t rid, part, down;
		const char *target;

		if (grow_array((void **)&ks->k, &ks->cap, ks->n + 1, sizeof(*ks->k), 64)) {
			err = -ENOMEM;
			break;
		}
		k = &ks->k[ks->n];
		memset(k, 0, sizeof(*k));
		if (rq->nfields < 10 || ch_result__u64(rq, 0, &rid) ||
		    ch_result__u64(rq, 6, &k->req.start_ns) ||
		    ch_result__u64(rq, 7, &k->req.end_ns) || ch_result__u64(rq, 8, &part) ||
		    ch_result__u64(rq, 9, &down)) {
			err = bad_row(fl, "requests");
			break;
		}
		k->rid = rid;
		k->req.id = ch_result__str(rq, 1, NULL);
		k->req.host = ch_result__str(rq, 2, NULL);
		k->req.service = ch_result__str(rq, 3, NULL);
		k->req.name = ch_result__str(rq, 4, NULL);
		target = ch_result__str(rq, 5, NULL);
		k->req.target = target && target[0] ? target : NULL;
		k->req.partial = part != 0;
		k->req.downstream = down != 0;
		ks->n++;
	}
	if (err)
		return err;
	if (!sql__open(&q))
		return -ENOMEM;
	fprintf(q.f,
		"SELECT rid, start_ns, dur_ns, category, frames, probe_frames, interference, "
		"seg_host, pid, tid, comm, cpu, cpu_model, sku, peer, culprit_pid, culprit_tid, "
		"culprit_comm, culprit_ns FROM %s.segments WHERE rid %s (%s) ORDER BY rid, seq",
		fl->db, in, rids);
	err = fleet__query(fl, &q, rs);
	if (err)
		return err;
	while (!err && ch_result__row(rs)) {
		uint64_t rid, start, dur, cat, probe, interf;
		int64_t pid, tid, cpu;
		const char **fr = NULL;
		uint32_t nfr = 0, capfr = 0, nc = 0, nt = 0, nn = 0, ncm = 0;
		struct cp_culprit *cul = NULL;
		int32_t *cpid = NULL, *ctid = NULL;
		uint64_t *cns = NULL;
		uint32_t capns = 0;
		const char **ccomm = NULL;
		uint32_t capcomm = 0;
		struct cp_segment *g;
		struct kept *k;
		char *p;

		if (rs->nfields < 19 || ch_result__u64(rs, 0, &rid) ||
		    ch_result__u64(rs, 1, &start) || ch_result__u64(rs, 2, &dur) ||
		    ch_result__u64(rs, 3, &cat) || ch_result__u64(rs, 5, &probe) ||
		    ch_result__u64(rs, 6, &interf) || ch_result__i64(rs, 8, &pid) ||
		    ch_result__i64(rs, 9, &tid) || ch_result__i64(rs, 11, &cpu)) {
			err = bad_row(fl, "segments");
			break;
		}
		k = kept_find(ks, rid);
		if (!k)
			continue;
		if (grow_array((void **)&k->segs, &k->capsegs, k->nsegs + 1, sizeof(*k->segs), 16)) {
			err = -ENOMEM;
			break;
		}
		/* arrays first: the strings are unescaped in place after */
		err = frames__parse(rs->field[4], &fr, &nfr, &capfr);
		err = err ?: parse_i32s(rs->field[15], &cpid, &nc);
		err = err ?: parse_i32s(rs->field[16], &ctid, &nt);
		if (!err) {
			p = rs->field[18];
			err = parse_u64s(&p, &cns, &nn, &capns);
		}
		if (!err) {
			p = rs->field[17];
			err = frames__parse(p, &ccomm, &ncm, &capcomm);
		}
		if (!err && (nc != nt || nc != nn || nc != ncm))
			err = bad_row(fl, "segments");
		if (!err && nc && !(cul = calloc(nc, sizeof(*cul))))
			err = -ENOMEM;
		for (uint32_t i = 0; !err && i < nc; i++)
			cul[i] = (struct cp_culprit){cpid[i], ctid[i], ccomm[i][0] ? ccomm[i] : NULL,
						     cns[i]};
		free(cpid);
		free(ctid);
		free(cns);
		free(ccomm);
		if (err) {
			free(fr);
			free(cul);
			break;
		}
		err = kept_set__own(ks, fr, cul);
		if (err)
			break;
		g = &k->segs[k->nsegs++];
		memset(g, 0, sizeof(*g));
		g->start_ns = start;
		g->end_ns = start + dur;
		g->category = cat < CP_CAT__COUNT ? (enum cp_category)cat : CP_CAT_UNEXPLAINED;
		g->frames = fr;
		g->nframes = nfr;
		g->probe_frames = (uint32_t)probe;
		g->interference = interf != 0;
		g->pid = (int32_t)pid;
		g->tid = (int32_t)tid;
		g->cpu = (int32_t)cpu;
		g->host = ch_result__str(rs, 7, NULL);
		g->comm = ch_result__str(rs, 10, NULL);
		g->cpu_model = ch_result__str(rs, 12, NULL);
		g->sku = ch_result__str(rs, 13, NULL);
		g->peer = ch_result__str(rs, 14, NULL);
		if (g->host && !g->host[0])
			g->host = NULL;
		if (g->comm && !g->comm[0])
			g->comm = NULL;
		if (g->cpu_model && !g->cpu_model[0])
			g->cpu_model = NULL;
		if (g->sku && !g->sku[0])
			g->sku = NULL;
		if (g->peer && !g->peer[0])
			g->peer = NULL;
		g->culprits = cul;
		g->nculprits = nc;
	}
	for (uint32_t i = 0; i < ks->n; i++) {
		ks->k[i].req.segs = ks->k[i].segs;
		ks->k[i].req.nsegs = ks->k[i].nsegs;
	}
	return err;
}

/* A callee's path in its root's, in place of the waits it covers: its
 * segments moved onto the root's clock (off: the callee's clock minus the
 * root's), framed under the root ("callee-service callee-name" third) */
struct splice {
	uint64_t root, callee;
	int64_t off;
	const char *label;
};

static int seg_push(struct cp_segment **out, uint32_t *n, uint32_t *cap,
		    const struct cp_segment *g)
{
	if (grow_array((void **)out, cap, *n + 1, sizeof(**out), 16))
		return -ENOMEM;
	(*out)[(*n)++] = *g;
	return 0;
}

static int splice_one(struct kept_set *ks, struct kept *a, const struct kept *b,
		      const struct splice *sp)
{
	uint64_t lo = b->req.start_ns - (uint64_t)sp->off, hi = b->req.end_ns - (uint64_t)sp->off;
	struct cp_segment *out = NULL;
	uint32_t n = 0, cap = 0;
	int err = 0;

	for (uint32_t i = 0; i < a->nsegs && !err; i++) {
		struct cp_segment g = a->segs[i], h;
		bool waits = g.category == CP_CAT_NETWORK || g.category == CP_CAT_UNEXPLAINED;
		uint64_t wlo, whi, at;

		if (!waits || g.end_ns <= lo || g.start_ns >= hi) {
			err = seg_push(&out, &n, &cap, &g);
			continue;
		}
		wlo = g.start_ns > lo ? g.start_ns : lo;
		whi = g.end_ns < hi ? g.end_ns : hi;
		if (g.start_ns < wlo) { /* before the callee began */
			h = g;
			h.end_ns = wlo;
			err = seg_push(&out, &n, &cap, &h);
		}
		/* the callee's segments within the wait; its gaps stay the wait */
		at = wlo;
		for (uint32_t j = 0; j < b->nsegs && !err; j++) {
			struct cp_segment c = b->segs[j];
			uint64_t s = c.start_ns - (uint64_t)sp->off, e = c.end_ns - (uint64_t)sp->off;
			const char **fr;
			uint32_t nfr;

			s = s < wlo ? wlo : s;
			e = e > whi ? whi : e;
			if (e <= s)
				continue;
			if (s > at) { /* a gap inside the callee's path */
				h = g;
				h.start_ns = at;
				h.end_ns = s;
				err = seg_push(&out, &n, &cap, &h);
			}
			nfr = 3 + (c.nframes > 2 ? c.nframes - 2 : 0);
			fr = malloc(nfr * sizeof(*fr));
			if (err || !fr || kept_set__own(ks, fr, NULL)) {
				err = -ENOMEM;
				break;
			}
			fr[0] = a->req.service;
			fr[1] = a->req.name;
			fr[2] = sp->label;
			for (uint32_t x = 2; x < c.nframes; x++)
				fr[x + 1] = c.frames[x];
			c.frames = fr;
			c.nframes = nfr;
			c.probe_frames = c.probe_frames < nfr - 3 ? c.probe_frames : nfr - 3;
			c.start_ns = s;
			c.end_ns = e;
			err = seg_push(&out, &n, &cap, &c);
			at = e > at ? e : at;
		}
		if (!err && whi > at) {
			h = g;
			h.start_ns = at;
			h.end_ns = whi;
			err = seg_push(&out, &n, &cap, &h);
		}
		if (!err && g.end_ns > whi) { /* after it ended */
			h = g;
			h.start_ns = whi;
			err = seg_push(&out, &n, &cap, &h);
		}
	}
	if (err) {
		free(out);
		return err;
	}
	free(a->segs);
	a->segs = out;
	a->nsegs = n;
	a->capsegs = cap;
	a->req.segs = out;
	a->req.nsegs = n;
	return 0;
}

static int64_t host_offset(const struct fleet *fl, const char *host)
{
	for (uint32_t h = 0; host && h < fl->nhosts; h++)
		if (!strcmp(fl->hosts[h].name, host))
			return fl->hosts[h].offset;
	return 0;
}

/* The requests picked (rids after in, as fleet__read_requests) shown whole,
 * the paths of their callees on other hosts spliced in, callers before their
 * callees */
static int fleet__keep(struct fleet *fl, const char *in, const char *rids)
{
	struct ch_result rq = {0}, rs = {0}, cq = {0}, cs = {0}, m = {0};
	struct kept_set ks = {0}, callees = {0};
	struct splice *sp = NULL;
	uint32_t nsp = 0, capsp = 0;
	struct sql q;
	int err;

	err = fleet__read_requests(fl, in, rids, &ks, &rq, &rs);
	if (!err && fl->edges) {
		/* a callee shown is served to a traced caller, as from recordings */
		struct ch_result d = {0};

		if (!sql__open(&q))
			err = -ENOMEM;
		if (!err) {
			fprintf(q.f, "SELECT DISTINCT callee FROM (%s) WHERE callee %s (%s)", fl->edges,
				in, rids);
			err = fleet__query(fl, &q, &d);
		}
		while (!err && ch_result__row(&d)) {
			uint64_t rid;
			struct kept *k;

			if (!ch_result__u64(&d, 0, &rid) && (k = kept_find(&ks, rid)))
				k->req.downstream = true;
		}
		ch_result__free(&d);
	}
	if (!err && fl->match) {
		char *sub;

		if (!sql__open(&q))
			err = -ENOMEM;
		if (!err) {
			fprintf(q.f,
				"SELECT root, callee, concat(callee_service, if(callee_host != root_host, "
				"concat('@', callee_host), ''), ' ', callee_name) FROM (%s) "
				"WHERE root %s (%s) ORDER BY depth, call_start",
				fl->match, in, rids);
			err = fleet__query(fl, &q, &m);
		}
		while (!err && ch_result__row(&m)) {
			struct splice s = {0};

			if (!(s.label = ch_result__str(&m, 2, NULL)) || ch_result__u64(&m, 0, &s.root) ||
			    ch_result__u64(&m, 1, &s.callee)) {
				err = bad_row(fl, "calls");
				break;
			}
			if (grow_array((void **)&sp, &capsp, nsp + 1, sizeof(*sp), 16))
				err = -ENOMEM;
			else
				sp[nsp++] = s;
		}
		if (!err && nsp) {
			if (!sql__open(&q))
				err = -ENOMEM;
			if (!err) {
				fprintf(q.f, "SELECT callee FROM (%s) WHERE root %s (%s)",
					fl->match, in, rids);
				sub = sql__done(&q);
				err = sub ? fleet__read_requests(fl, "GLOBAL IN", sub, &callees, &cq,
								 &cs)
					  : -ENOMEM;
				free(sub);
			}
		}
	}
	for (uint32_t i = 0; !err && i < nsp; i++) {
		struct kept *a = kept_find(&ks, sp[i].root), *b = kept_find(&callees, sp[i].callee);

		if (!a || !b)
			continue;
		sp[i].off = host_offset(fl, b->req.host) - host_offset(fl, a->req.host);
		err = splice_one(&ks, a, b, &sp[i]);
	}
	for (uint32_t i = 0; !err && i < ks.n; i++) {
		struct kept *k = &ks.k[i];

		if (!k->req.id) {
			snprintf(k->idbuf, sizeof(k->idbuf), "%016" PRIx64, k->rid);
			k->req.id = k->idbuf;
		}
		err = engine__keep_request(fl->e, &k->req);
	}
	kept_set__free(&ks);
	kept_set__free(&callees);
	ch_result__free(&rq);
	ch_result__free(&rs);
	ch_result__free(&cq);
	ch_result__free(&cs);
	ch_result__free(&m);
	free(sp);
	return err;
}

/* --- the source ---------------------------------------------------------- */

static void fleet__free(struct fleet *fl)
{
	for (uint32_t i = 0; i < fl->nhosts; i++)
		free(fl->hosts[i].name);
	free(fl->hosts);
	free(fl->where);
	free(fl->own);
	free(fl->match);
	free(fl->edges);
	for (uint32_t i = 0; i < fl->nstacks; i++)
		free(fl->stacks[i].frames);
	free(fl->stacks);
	ch_result__free(&fl->stack_rows);
	ch__close(fl->c);
}

/* Which requests are shown whole: json's every one (up to a bound), else the
 * slowest asked for */
static int fleet__shown(struct fleet *fl, uint64_t picked)
{
	const struct engine_opts *eo = engine__opts(fl->e);
	bool all = eo->keep_all_requests || eo->on_request; /* json streams every one */
	uint32_t n = eo->keep_slowest;
	struct sql q;
	char *rids;
	int err;

	if (all && picked > STORE_JSON_ALL) {
		engine__warn(fl->e,
			     "%s: %" PRIu64 " requests: the json lists the %u slowest with their "
			     "paths (the profile has them all)",
			     fl->src, picked, STORE_JSON_SLOWEST);
		n = STORE_JSON_SLOWEST;
	} else if (all) {
		n = 0;
	} else if (!n) {
		return 0;
	}
	if (!sql__open(&q))
		return -ENOMEM;
	/* json's every request; else the slowest of those asked for, one served
	 * to a caller on its host too, as a report of the recordings lists them
	 * (engine__keep takes those as well); a callee stitched across hosts is
	 * its caller's */
	fprintf(q.f, "SELECT rid FROM %s.requests WHERE %s", fl->db, fl->where);
	if (n && fl->edges)
		fprintf(q.f, " AND rid GLOBAL NOT IN (SELECT callee FROM (%s))", fl->edges);
	if (n)
		fprintf(q.f, " ORDER BY latency_ns DESC LIMIT %u", n);
	rids = sql__done(&q);
	if (!rids)
		return -ENOMEM;
	if (n && n <= STORE_LITERAL_RIDS) {
		/* the rids fetched, then given as numbers: ClickHouse (18.16 at
		 * least) reads only the granules of the segments' primary key
		 * that hold them for IN (1, 2, ..), and every segment for
		 * GLOBAL IN (a subquery or numbers) */
		struct ch_result r;
		struct sql l;
		char *list;
		bool any = false;

		if (!sql__open(&q)) {
			free(rids);
			return -ENOMEM;
		}
		fputs(rids, q.f);
		free(rids);
		err = fleet__query(fl, &q, &r);
		if (err)
			return err;
		if (!sql__open(&l)) {
			ch_result__free(&r);
			return -ENOMEM;
		}
		while (ch_result__row(&r)) {
			uint64_t rid;

			if (ch_result__u64(&r, 0, &rid)) {
				err = bad_row(fl, "slowest requests");
				break;
			}
			fprintf(l.f, "%s%" PRIu64, any ? "," : "", rid);
			any = true;
		}
		ch_result__free(&r);
		list = sql__done(&l);
		if (!err && !list)
			err = -ENOMEM;
		if (!err && any)
			err = fleet__keep(fl, "IN", list);
		free(list);
		return err;
	}
	err = fleet__keep(fl, "GLOBAL IN", rids);
	free(rids);
	return err;
}

bool report__is_store(const char *input)
{
	return ch_url__is(input);
}

int report__store(const char *src, struct engine *e, const char **why)
{
	static char whybuf[1400];
	struct fleet fl = {.e = e, .src = src};
	struct url_filter uf = {0};
	char *url = strdup(src), *qs, err[1024] = "";
	uint64_t nown = 0, picked = 0;
	struct sql q;
	int rc;

	*why = NULL;
	if (!url)
		return -ENOMEM;
	qs = strchr(url, '?');
	if (qs)
		*qs++ = '\0';
	if (qs && url_filter__parse(qs, &uf, err, sizeof(err))) {
		snprintf(whybuf, sizeof(whybuf), "%s: %s", src, err);
		*why = whybuf;
		free(url);
		return 0;
	}
	fl.c = ch__open(url, err, sizeof(err));
	if (!fl.c) {
		snprintf(whybuf, sizeof(whybuf), "%s: %s", src, err);
		*why = whybuf;
		free(url);
		return 0;
	}
	fl.src = ch__shown(fl.c);
	fl.db = ch__db(fl.c);
	rc = ch__schema(fl.c, false, err, sizeof(err));
	if (rc) {
		snprintf(whybuf, sizeof(whybuf), "%s", err);
		*why = whybuf;
		goto out;
	}
	rc = fleet__where(&fl, &uf);
	if (rc == -EINVAL) {
		snprintf(whybuf, sizeof(whybuf), "%s: %s", fl.src, fl.err);
		*why = whybuf;
		goto out;
	}
	rc = rc ?: fleet__stitch_begin(&fl);
	rc = rc ?: fleet__own(&fl);
	if (!rc && sql__open(&q)) {
		fprintf(q.f, "SELECT count() FROM %s.requests WHERE %s", fl.db, fl.where);
		rc = fleet__count(&fl, &q, &picked);
	} else if (!rc) {
		rc = -ENOMEM;
	}
	if (!rc && !picked) {
		snprintf(whybuf, sizeof(whybuf), "%s: %s", fl.src,
			 strcmp(fl.where, "1") ? "no request in the store matches the filters"
					       : "the store holds no requests yet");
		*why = whybuf;
		goto out;
	}
	rc = rc ?: fleet__hosts(&fl);
	rc = rc ?: fleet__latency(&fl, &nown);
	rc = rc ?: fleet__stack_names(&fl);
	rc = rc ?: fleet__steps(&fl, nown);
	rc = rc ?: fleet__blame(&fl);
	rc = rc ?: fleet__skus(&fl);
	rc = rc ?: fleet__shown(&fl, picked);
	if (rc && rc != -ENOMEM) {
		snprintf(whybuf, sizeof(whybuf), "%s",
			 fl.err[0] ? fl.err : "an answer was not understood (see the warnings)");
		*why = whybuf;
		rc = 0;
		goto out;
	}
	if (!rc)
		rc = 1;
out:
	fleet__free(&fl);
	free(url);
	if (*why)
		return 0;
	return rc < 0 ? rc : 1;
}
