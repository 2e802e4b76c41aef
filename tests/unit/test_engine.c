// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The engine on hand-built requests: filters, profile totals and order,
 * percentile views, per-step distributions, contention, kept requests. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine_fixture.h"
#include "engine_int.h"

static const struct engine_profile_entry *find(const struct engine_result *r, enum cp_category cat,
					       uint32_t nframes)
{
	for (uint32_t i = 0; i < r->nprofile; i++)
		if (r->profile[i].category == cat && r->profile[i].nframes == nframes)
			return &r->profile[i];
	return NULL;
}

static void test_buckets(void **state)
{
	for (uint64_t v = 0; v < 5000000; v = v < 1000 ? v + 1 : v + v / 97 + 1) {
		uint32_t b = bucket__of(v);

		assert_true(bucket__lo(b) <= v);
		assert_true(v < bucket__lo(b) + bucket__width(b));
		assert_true(bucket__width(b) * 64 <= (bucket__lo(b) > 64 ? bucket__lo(b) : 64));
	}
	assert_int_equal(bucket__of(UINT64_MAX), bucket__of(UINT64_MAX - 1));
	assert_true(bucket__lo(bucket__of(UINT64_MAX)) <= UINT64_MAX);
}

static void test_profile(void **state)
{
	struct engine *e = fx_engine(false, NULL);
	const struct engine_result *r = engine__result(e);
	const struct engine_profile_entry *lock, *cpu, *kv, *net, *rq;

	assert_int_equal(r->nrequests, 4);
	/* latencies 5.5, 7, 7.5, 9 ms */
	assert_int_equal(r->total_latency_ns, 29 * MS);
	assert_int_equal(r->max_latency_ns, 9 * MS);
	assert_int_equal(r->nprofile, 5);
	for (uint32_t i = 1; i < r->nprofile; i++)
		assert_true(r->profile[i - 1].total_ns >= r->profile[i].total_ns);
	lock = find(r, CP_CAT_LOCK, 2);
	cpu = find(r, CP_CAT_CPU, 2);
	kv = find(r, CP_CAT_CPU, 3);
	net = find(r, CP_CAT_NETWORK, 2);
	rq = find(r, CP_CAT_RUNQUEUE, 2);
	assert_non_null(lock);
	assert_ptr_equal(lock, &r->profile[0]);
	assert_int_equal(lock->total_ns, 10 * MS);
	assert_int_equal(lock->requests, 4);
	assert_int_equal(lock->max_ns, 4 * MS);
	assert_string_equal(lock->frames[0], "frontend:8080");
	assert_string_equal(lock->frames[1], "GET /cart");
	/* two cpu segments of one request are one step: 1.5 ms per request */
	assert_int_equal(cpu->total_ns, 6 * MS);
	assert_int_equal(cpu->requests, 4);
	assert_int_equal(cpu->q50_ns, 1500 * 1000);
	assert_int_equal(kv->total_ns, 8 * MS);
	assert_string_equal(kv->frames[2], "kvstore:7000 get");
	assert_int_equal(net->total_ns, 4 * MS);
	assert_int_equal(rq->total_ns, 1 * MS);
	assert_int_equal(rq->requests, 2);
	/* distribution of lock time per request: 1, 2, 3, 4 ms, within 0.8% */
	assert_true(lock->q50_ns >= 2 * MS * 0.992 && lock->q50_ns <= 2 * MS * 1.008);
	assert_true(lock->q99_ns >= 4 * MS * 0.992 && lock->q99_ns <= 4 * MS);
	/* the result can be asked for again */
	r = engine__result(e);
	assert_int_equal(r->nprofile, 5);
	assert_int_equal(r->nwarnings, 1);
	engine__free(e);
}

/* A request served to a traced caller (kvstore's, under a front end's call)
 * is in the caller's path: kept and counted apart, not in the profile, the
 * latency or the contention again; a --service filter on its tier counts
 * it as that report's own. */
static void test_downstream(void **state)
{
	static const char *const fr[] = {"kvstore:7000", "get"};
	const struct cp_segment seg = {.start_ns = MS, .end_ns = 3 * MS, .category = CP_CAT_CPU,
				       .frames = fr, .nframes = 2, .pid = 7, .tid = 7, .cpu = -1};
	struct cp_request q = {.id = "7:1:0", .service = "kvstore:7000", .name = "get",
			       .start_ns = MS, .end_ns = 3 * MS, .segs = &seg, .nsegs = 1,
			       .downstream = true};
	struct engine_opts eo = {.keep_all_requests = true};
	struct engine *e = fx_engine(false, &eo);
	const struct engine_result *r;

	assert_int_equal(engine__add_request(e, &q), 1);
	r = engine__result(e);
	assert_int_equal(r->nrequests, 4);
	assert_int_equal(r->ndownstream, 1);
	assert_int_equal(r->total_latency_ns, 29 * MS);
	assert_int_equal(r->nprofile, 5);
	for (uint32_t i = 0; i < r->nprofile; i++)
		assert_string_not_equal(r->profile[i].frames[0], "kvstore:7000");
	/* kept with its path all the same */
	assert_int_equal(r->nkept, 5);
	engine__free(e);

	eo.filter.service = "kvstore:7000";
	e = engine__new(&eo);
	assert_int_equal(engine__add_request(e, &q), 1);
	r = engine__result(e);
	assert_int_equal(r->nrequests, 1);
	assert_int_equal(r->ndownstream, 0);
	assert_int_equal(r->nprofile, 1);
	assert_int_equal(r->profile[0].total_ns, 2 * MS);
	engine__free(e);
}

static void test_percentile_views(void **state)
{
	struct engine *e = engine__new(&(struct engine_opts){0});
	const struct engine_result *r;
	const struct engine_profile_entry *work, *lock;

	/* request i (1..100) is i ms: "work" cpu (i ms, or i-1 ms plus 1 ms
	 * "lock" for the slowest five) */
	for (int i = 1; i <= 100; i++) {
		struct cp_segment g[2] = {0};
		struct cp_request q = {0};
		uint64_t t0 = (uint64_t)i * 1000 * MS;

		g[0].start_ns = t0;
		g[0].end_ns = t0 + (uint64_t)(i > 95 ? i - 1 : i) * MS;
		g[0].category = CP_CAT_CPU;
		g[0].frames = fx_frames_cart;
		g[0].nframes = 2;
		g[0].pid = g[0].tid = g[0].cpu = -1;
		g[1] = g[0];
		g[1].start_ns = g[0].end_ns;
		g[1].end_ns = t0 + (uint64_t)i * MS;
		g[1].category = CP_CAT_LOCK;
		q.id = "x";
		q.start_ns = t0;
		q.end_ns = t0 + (uint64_t)i * MS;
		q.segs = g;
		q.nsegs = i > 95 ? 2 : 1;
		assert_int_equal(engine__add_request(e, &q), 1);
	}
	r = engine__result(e);
	assert_int_equal(r->nrequests, 100);
	assert_int_equal(r->latency_pct_ns[0], 50 * MS);
	assert_int_equal(r->latency_pct_ns[1], 95 * MS);
	assert_int_equal(r->latency_pct_ns[2], 99 * MS);
	assert_int_equal(r->pct_nrequests[0], 50);
	assert_int_equal(r->pct_nrequests[1], 95);
	assert_int_equal(r->pct_nrequests[2], 99);
	work = find(r, CP_CAT_CPU, 2);
	lock = find(r, CP_CAT_LOCK, 2);
	assert_int_equal(work->pct_total_ns[0], 50 * 51 / 2 * MS);
	assert_int_equal(work->pct_total_ns[1], 95 * 96 / 2 * MS);
	assert_int_equal(lock->pct_total_ns[1], 0);
	assert_int_equal(lock->pct_total_ns[2], 4 * MS);
	assert_int_equal(lock->total_ns, 5 * MS);
	assert_int_equal(lock->requests, 5);
	engine__free(e);
}

static void test_distribution_error(void **state)
{
	struct engine *e = engine__new(&(struct engine_opts){0});
	const struct engine_profile_entry *p;

	/* 10,000 requests whose step takes 1..10,000 us */
	for (int i = 1; i <= 10000; i++) {
		struct cp_segment g = {.start_ns = 0,
				       .end_ns = (uint64_t)i * 1000,
				       .frames = fx_frames_root,
				       .nframes = 1};
		struct cp_request q = {
		    .id = "d", .start_ns = 0, .end_ns = g.end_ns, .segs = &g, .nsegs = 1};

		engine__add_request(e, &q);
	}
	p = &engine__result(e)->profile[0];
	assert_true(p->q50_ns >= 5000000 * 0.992 && p->q50_ns <= 5000000 * 1.008);
	assert_true(p->q90_ns >= 9000000 * 0.992 && p->q90_ns <= 9000000 * 1.008);
	assert_true(p->q99_ns >= 9900000 * 0.992 && p->q99_ns <= 9900000 * 1.008);
	assert_int_equal(p->max_ns, 10000000);
	/* the power-of-two histogram is exact: [2^20, 2^21) ns holds 1049..2097 us */
	{
		uint64_t sum = 0;

		assert_true(p->hist_log2 <= 20 && p->hist_log2 + p->nhist > 20);
		for (uint32_t k = 0; k < p->nhist; k++)
			sum += p->hist[k];
		assert_int_equal(sum, 10000);
		assert_int_equal(p->hist[20 - p->hist_log2], 2097 - 1049 + 1);
		assert_int_equal(p->hist_log2, 9); /* 1000 ns is in [512, 1024) */
	}
	engine__free(e);
}

static void test_filters(void **state)
{
	struct cp_segment g[6];
	struct cp_span_stat st[2];
	struct cp_culprit cul[1];
	struct cp_request k, s;
	char id1[64], id2[64];
	static const struct {
		struct engine_filter f;
		int kernel, span;
	} cases[] = {
	    {{0}, 1, 1},
	    {{.service = "api"}, 0, 1},
	    {{.name = "GET /cart"}, 1, 0},
	    {{.host = "h1"}, 1, 0},
	    {{.tag = "env=prod"}, 0, 1},
	    {{.tag = "env=dev"}, 0, 0},
	    {{.min_latency_ns = 6 * MS}, 0, 1},
	    {{.max_latency_ns = 6 * MS}, 1, 0},
	    {{.from_ns = 2000 * MS}, 0, 1},
	    {{.to_ns = 2000 * MS}, 1, 0},
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct engine_opts o = {.filter = cases[c].f};
		struct engine *e = engine__new(&o);

		fx_kernel_request(0, &k, g, cul, id1, sizeof(id1));
		assert_int_equal(engine__add_request(e, &k), cases[c].kernel);
		fx_span_request(0, &s, g, st, id2, sizeof(id2));
		assert_int_equal(engine__add_request(e, &s), cases[c].span);
		assert_int_equal(engine__result(e)->nrequests, cases[c].kernel + cases[c].span);
		assert_int_equal(engine__result(e)->nfiltered, 2 - cases[c].kernel - cases[c].span);
		engine__free(e);
	}
}

static void test_contention(void **state)
{
	struct engine *e = fx_engine(false, NULL);
	const struct engine_result *r;
	struct cp_segment g = {0};
	struct cp_request q = {0};

	/* a lock wait with no culprit list blames the segment's own thread */
	g.start_ns = 0;
	g.end_ns = 20 * MS;
	g.category = CP_CAT_LOCK;
	g.interference = true;
	g.pid = 400;
	g.tid = 401;
	g.comm = "flusher";
	q.id = "z";
	q.end_ns = 20 * MS;
	q.segs = &g;
	q.nsegs = 1;
	engine__add_request(e, &q);
	/* not interference: not contention */
	g.interference = false;
	g.tid = 402;
	engine__add_request(e, &q);
	r = engine__result(e);
	assert_int_equal(r->ncontention, 3);
	assert_string_equal(r->contention[0].comm, "flusher");
	assert_int_equal(r->contention[0].tid, 401);
	assert_int_equal(r->contention[0].ns, 20 * MS);
	assert_int_equal(r->contention[0].requests, 1);
	assert_string_equal(r->contention[1].comm, "cache-maint");
	assert_int_equal(r->contention[1].category, CP_CAT_LOCK);
	assert_int_equal(r->contention[1].ns, 10 * MS);
	assert_int_equal(r->contention[1].requests, 4);
	assert_int_equal(r->contention[1].pid, 100);
	assert_int_equal(r->contention[1].tid, 105);
	assert_string_equal(r->contention[2].comm, "kp_hog");
	assert_int_equal(r->contention[2].category, CP_CAT_RUNQUEUE);
	assert_int_equal(r->contention[2].ns, 1 * MS);
	assert_int_equal(r->contention[2].requests, 2);
	engine__free(e);
}

/* The engine copies what it keeps: the producer's memory is scribbled over
 * and freed right after each call. */
static void test_keep_slowest(void **state)
{
	struct engine_opts o = {.keep_slowest = 2};
	struct engine *e = engine__new(&o);
	const struct engine_result *r;

	for (int i = 0; i < 4; i++) {
		struct cp_segment *g = calloc(6, sizeof(*g));
		struct cp_culprit *cul = calloc(1, sizeof(*cul));
		struct cp_request *q = calloc(1, sizeof(*q));
		char *id = calloc(1, 64);
		char **frames = calloc(2, sizeof(char *));

		frames[0] = strdup("frontend:8080");
		frames[1] = strdup("GET /cart");
		fx_kernel_request(i, q, g, cul, id, 64);
		for (int k = 0; k < 6; k++)
			if (g[k].nframes == 2)
				g[k].frames = (const char *const *)frames;
		assert_int_equal(engine__add_request(e, q), 1);
		memset(frames[0], 'X', strlen(frames[0]));
		free(frames[0]);
		free(frames[1]);
		free(frames);
		memset(id, 'Y', 63);
		memset(g, 0xff, 6 * sizeof(*g));
		free(g);
		free(cul);
		free(q);
		free(id);
	}
	r = engine__result(e);
	assert_int_equal(r->nkept, 2);
	/* the two slowest (9 and 7.5 ms), by start time */
	assert_string_equal(r->requests[0]->id, "100:3:2");
	assert_string_equal(r->requests[1]->id, "100:3:3");
	assert_true(r->requests[1]->partial);
	assert_int_equal(r->requests[1]->nsegs, 6);
	assert_string_equal(r->requests[1]->segs[0].frames[0], "frontend:8080");
	assert_string_equal(r->requests[1]->segs[1].culprits[0].comm, "cache-maint");
	assert_int_equal(r->requests[1]->segs[1].culprits[0].ns, 4 * MS);
	assert_string_equal(r->requests[1]->segs[3].peer, "10.0.0.7:5432");
	assert_string_equal(r->requests[1]->service, "frontend:8080");
	engine__free(e);
}

static void test_keep_all_spans(void **state)
{
	struct engine *e = fx_engine(true, NULL);
	const struct engine_result *r = engine__result(e);

	assert_int_equal(r->nkept, 2);
	assert_int_equal(r->requests[0]->nspans, 2);
	assert_string_equal(r->requests[0]->spans[1].span_id, "53995c3f42cd8ad8");
	assert_string_equal(r->requests[0]->tags[0], "env=prod");
	assert_null(r->requests[0]->tags[1]);
	assert_int_equal(r->nspans, 2);
	/* db query: exclusive 6 + 7 ms, root 4 + 3 ms */
	assert_string_equal(r->spans[0].operation, "query");
	assert_int_equal(r->spans[0].exclusive_ns, 13 * MS);
	assert_int_equal(r->spans[0].count, 2);
	assert_int_equal(r->spans[1].inclusive_ns, 20 * MS);
	assert_int_equal(r->spans[1].exclusive_ns, 7 * MS);
	engine__free(e);
}

/* sorted_top: the first N rows are those a full sort puts first, in its
 * order (span paths here, 200 of them with tied times, and profile rows) */
static void test_sorted_top(void **state)
{
	struct engine *full = engine__new(&(struct engine_opts){0});
	struct engine *top = engine__new(&(struct engine_opts){.sorted_top = 5});
	const struct engine_result *a, *b;
	char names[200][16];

	for (int i = 0; i < 200; i++) {
		const char *fr[2] = {"svc root", names[i]};
		struct cp_span_stat st = {.span_id = "s", .service = "svc", .operation = names[i],
					  .frames = fr, .nframes = 2,
					  .inclusive_ns = (uint64_t)(i % 7) * MS,
					  .exclusive_ns = (uint64_t)(i % 5) * MS};
		struct cp_segment g = {.start_ns = 0, .end_ns = (uint64_t)(i % 11 + 1) * MS,
				       .category = CP_CAT_SPAN, .frames = fr, .nframes = 2};
		struct cp_request q = {.id = "t", .service = "svc", .name = "root",
				       .start_ns = 0, .end_ns = g.end_ns, .segs = &g, .nsegs = 1,
				       .spans = &st, .nspans = 1};

		snprintf(names[i], sizeof(names[i]), "svc op%03d", (i * 37) % 200);
		assert_int_equal(engine__add_request(full, &q), 1);
		assert_int_equal(engine__add_request(top, &q), 1);
	}
	a = engine__result(full);
	b = engine__result(top);
	assert_int_equal(a->nspans, 200);
	assert_int_equal(b->nspans, 5);
	assert_int_equal(a->nspan_paths, 200);
	assert_int_equal(b->nspan_paths, 200);
	assert_int_equal(a->nprofile, b->nprofile);
	for (int i = 0; i < 5; i++) {
		assert_string_equal(a->spans[i].frames[1], b->spans[i].frames[1]);
		assert_int_equal(a->spans[i].exclusive_ns, b->spans[i].exclusive_ns);
		assert_string_equal(a->profile[i].frames[1], b->profile[i].frames[1]);
	}
	engine__free(full);
	engine__free(top);
}

/* A stat's prefix (an earlier stat whose frames begin its own) changes
 * nothing but the work: the same rows as full paths give, and each span
 * step of the profile points to its path's row, in the first rows or not. */
static void test_span_prefix(void **state)
{
	static const char *const lv[] = {"a x", "b y", "…", "c z", "d w"};
	static const char *const p0[] = {"a x"}, *const p1[] = {"a x", "b y"},
				 *const p2[] = {"a x", "b y", "…", "c z"},
				 *const p3[] = {"a x", "b y", "…", "d w"};
	const char *const *paths[] = {p0, p1, p2, p3};
	const uint32_t depth[] = {1, 2, 4, 4}, prefix[] = {0, 1, 2, 2};
	struct engine *e[2];
	const struct engine_result *r[2];

	for (int v = 0; v < 2; v++) {
		e[v] = engine__new(&(struct engine_opts){.sorted_top = v ? 1 : 0});
		for (int j = 0; j < 3; j++) {
			struct cp_span_stat st[4];
			struct cp_segment g[4];
			struct cp_request q = {.id = "t", .service = "a", .name = "x",
					       .start_ns = 0, .end_ns = 40 * MS, .segs = g,
					       .nsegs = 4, .spans = st, .nspans = 4};

			for (int i = 0; i < 4; i++) {
				st[i] = (struct cp_span_stat){
				    .span_id = "s", .service = lv[i + (i > 1)], .operation = "op",
				    .frames = paths[i], .nframes = depth[i],
				    .inclusive_ns = (uint64_t)(4 - i) * 10 * MS,
				    .exclusive_ns = (uint64_t)(i + 1) * MS,
				    .prefix = v ? prefix[i] : 0};
				g[i] = (struct cp_segment){
				    .start_ns = (uint64_t)i * 10 * MS,
				    .end_ns = (uint64_t)(i + 1) * 10 * MS, .category = CP_CAT_SPAN,
				    .frames = paths[i], .nframes = depth[i]};
			}
			assert_int_equal(engine__add_request(e[v], &q), 1);
		}
		r[v] = engine__result(e[v]);
		assert_int_equal(r[v]->nspan_paths, 4);
	}
	assert_int_equal(r[0]->nspans, 4);
	assert_int_equal(r[1]->nspans, 1);
	for (uint32_t i = 0; i < r[1]->nspans; i++) {
		assert_int_equal(r[0]->spans[i].nframes, r[1]->spans[i].nframes);
		for (uint32_t k = 0; k < r[0]->spans[i].nframes; k++)
			assert_string_equal(r[0]->spans[i].frames[k], r[1]->spans[i].frames[k]);
		assert_int_equal(r[0]->spans[i].count, 3);
		assert_int_equal(r[0]->spans[i].exclusive_ns, r[1]->spans[i].exclusive_ns);
	}
	/* by exclusive time: d w, c z, b y, a x */
	assert_string_equal(r[0]->spans[0].frames[3], "d w");
	assert_string_equal(r[0]->spans[1].frames[3], "c z");
	assert_string_equal(r[0]->spans[3].frames[0], "a x");
	assert_int_equal(r[0]->spans[3].requests, 3);
	/* profile: every step 30 ms; each points to its own path */
	for (int v = 0; v < 2; v++)
		for (uint32_t i = 0; i < (v ? 1 : r[v]->nprofile); i++) {
			const struct engine_profile_entry *p = &r[v]->profile[i];

			assert_non_null(p->span);
			assert_int_equal(p->span->nframes, p->nframes);
			assert_string_equal(p->span->frames[p->nframes - 1],
					    p->frames[p->nframes - 1]);
		}
	engine__free(e[0]);
	engine__free(e[1]);
}

static void test_bad_request(void **state)
{
	struct engine *e = engine__new(NULL);
	struct cp_request q = {.id = "back", .start_ns = 10, .end_ns = 5};

	engine__set_quiet(e, true);
	assert_int_equal(engine__add_request(e, &q), 0);
	assert_int_equal(engine__result(e)->nrequests, 0);
	assert_int_equal(engine__result(e)->nwarnings, 1);
	assert_non_null(strstr(engine__result(e)->warnings[0], "back"));
	engine__free(e);
}

/* A request whose strings come from engine__intern (cp_request.interned)
 * aggregates as one whose strings the engine interns itself. */
static void test_interned(void **state)
{
	struct engine *e1 = engine__new(NULL), *e2 = engine__new(NULL);
	const struct engine_result *r1, *r2;

	for (int i = 0; i < 4; i++) {
		struct cp_segment g[6];
		struct cp_culprit cul[1], icul[6];
		const char *fr[6][3];
		struct cp_request q;
		char id[32];

		fx_kernel_request(i, &q, g, cul, id, sizeof(id));
		assert_int_equal(engine__add_request(e1, &q), 1);
		q.service = engine__intern(e2, q.service);
		q.name = engine__intern(e2, q.name);
		for (uint32_t k = 0; k < q.nsegs; k++) {
			for (uint32_t f = 0; f < g[k].nframes; f++)
				fr[k][f] = engine__intern(e2, g[k].frames[f]);
			g[k].frames = fr[k];
			g[k].comm = engine__intern(e2, g[k].comm);
			if (g[k].nculprits) {
				icul[k] = g[k].culprits[0];
				icul[k].comm = engine__intern(e2, icul[k].comm);
				g[k].culprits = &icul[k];
			}
		}
		q.interned = true;
		assert_int_equal(engine__add_request(e2, &q), 1);
	}
	r1 = engine__result(e1);
	r2 = engine__result(e2);
	assert_int_equal(r1->nprofile, r2->nprofile);
	for (uint32_t i = 0; i < r1->nprofile; i++) {
		assert_int_equal(r1->profile[i].nframes, r2->profile[i].nframes);
		for (uint32_t f = 0; f < r1->profile[i].nframes; f++)
			assert_string_equal(r1->profile[i].frames[f], r2->profile[i].frames[f]);
		assert_int_equal(r1->profile[i].category, r2->profile[i].category);
		assert_int_equal(r1->profile[i].total_ns, r2->profile[i].total_ns);
		assert_int_equal(r1->profile[i].requests, r2->profile[i].requests);
	}
	assert_int_equal(r1->ncontention, r2->ncontention);
	for (uint32_t i = 0; i < r1->ncontention; i++) {
		assert_string_equal(r1->contention[i].comm, r2->contention[i].comm);
		assert_int_equal(r1->contention[i].ns, r2->contention[i].ns);
		assert_int_equal(r1->contention[i].requests, r2->contention[i].requests);
	}
	engine__free(e1);
	engine__free(e2);
}

/* Past max_paths steps, a new step is counted under its longest beginning
 * that is a step, then ENGINE_OTHER; with none, ENGINE_OTHER alone. */
static void test_max_paths_fold(void **state)
{
	static const char *const abc[] = {"a", "b", "c"}, *const a[] = {"a"},
				 *const abx[] = {"a", "b", "x"}, *const zy[] = {"z", "y"},
				 *const aq[] = {"a", "q"};
	static const struct {
		const char *const *frames;
		uint32_t n;
	} reqs[] = {{abc, 3}, {a, 1}, {abx, 3}, {abc, 3}, {zy, 2}, {aq, 2}};
	struct engine_opts o = {.max_paths = 2};
	struct engine *e = engine__new(&o);
	const struct engine_result *r;
	uint64_t total = 0;

	assert_non_null(e);
	engine__set_quiet(e, true);
	for (uint32_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		char id[16];
		struct cp_segment g = {.start_ns = 1000 * MS * (i + 1),
				       .end_ns = 1000 * MS * (i + 1) + MS,
				       .category = CP_CAT_CPU,
				       .frames = reqs[i].frames,
				       .nframes = reqs[i].n,
				       .pid = 1,
				       .tid = 1};
		struct cp_request q = {.id = id, .service = "s", .name = "n",
				       .start_ns = g.start_ns, .end_ns = g.end_ns,
				       .segs = &g, .nsegs = 1};

		snprintf(id, sizeof(id), "r%u", i);
		assert_int_equal(engine__add_request(e, &q), 1);
	}
	r = engine__result(e);
	assert_int_equal(r->nprofile, 4);
	for (uint32_t i = 0; i < r->nprofile; i++) {
		const struct engine_profile_entry *p = &r->profile[i];
		const char *last = p->frames[p->nframes - 1];

		total += p->total_ns;
		if (p->nframes == 3)
			assert_int_equal(p->requests, 2); /* a b c, twice */
		else if (p->nframes == 2)
			assert_true(!strcmp(p->frames[0], "a") && !strcmp(last, ENGINE_OTHER) &&
				    p->requests == 2); /* a b x, a q */
		else if (!strcmp(last, ENGINE_OTHER))
			assert_int_equal(p->requests, 1); /* z y: no beginning kept */
		else
			assert_string_equal(last, "a");
	}
	assert_int_equal(total, 6 * MS);
	assert_int_equal(r->nwarnings, 1);
	engine__free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buckets),	     cmocka_unit_test(test_profile),
	    cmocka_unit_test(test_downstream),
	    cmocka_unit_test(test_percentile_views), cmocka_unit_test(test_distribution_error),
	    cmocka_unit_test(test_filters),	     cmocka_unit_test(test_contention),
	    cmocka_unit_test(test_keep_slowest),     cmocka_unit_test(test_keep_all_spans),
	    cmocka_unit_test(test_sorted_top),
	    cmocka_unit_test(test_span_prefix),       cmocka_unit_test(test_bad_request),	     cmocka_unit_test(test_interned),
	    cmocka_unit_test(test_max_paths_fold),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
