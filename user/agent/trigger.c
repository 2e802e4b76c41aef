// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Which finished requests the agent walks and exports (CPT's triggering):
 * slower than a duration or than the running NNth percentile of their
 * service and name over the last minute, a random sample, or opted in by
 * the caller's sampled traceparent. Percentiles come from log histograms
 * (16 buckets per power of two) in six 10-second slots.
 */
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "util.h"

#define SLOTS 6
#define SLOT_NS 10000000000ull
#define NB (41 * 16) /* up to 2^41 ns, about 36 minutes */
/* services and names judged apart at most (16 KiB each); past it, new
 * ones share one key, "(others)" */
#define MAX_KEYS 2048
#define THR_EVERY_NS 1000000000ull

struct key {
	const char *service, *name; /* interned: compared by pointer */
	uint32_t hist[SLOTS][NB];
	uint64_t epoch[SLOTS];	/* which 10 s the slot holds */
	uint32_t win[NB];	/* since the last window */
	uint64_t thr, thr_at;	/* the running percentile, and when worked out */
	uint64_t win_n, win_max;
};

struct trigger {
	struct trigger_opts o;
	uint64_t rng;
	struct key **keys;
	uint32_t nkeys, capkeys;
	struct index ix;
	uint32_t min_n; /* samples a percentile needs */
	const char *others;
	double tokens;	    /* opt-ins allowed now */
	uint64_t tokens_at; /* stream time they were counted at */
};

static uint32_t bucket(uint64_t ns)
{
	uint32_t msb, frac;

	if (ns < 16)
		return (uint32_t)ns;
	msb = 63 - (uint32_t)__builtin_clzll(ns);
	frac = (uint32_t)(ns >> (msb - 4)) & 15;
	return msb * 16 + frac < NB ? msb * 16 + frac : NB - 1;
}

/* The largest value bucket b holds */
static uint64_t bucket_top(uint32_t b)
{
	uint32_t msb = b / 16, frac = b % 16;

	if (b < 16)
		return b;
	return ((16ull + frac + 1) << (msb - 4)) - 1;
}

static uint64_t rnd(struct trigger *t)
{
	uint64_t x = t->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

static double rnd01(struct trigger *t)
{
	return (double)(rnd(t) >> 11) / (double)(1ull << 53);
}

struct trigger *trigger__new(const struct trigger_opts *o)
{
	struct trigger *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->o = *o;
	t->others = "(others)";
	t->rng = o->seed ? o->seed : 0x9e3779b97f4a7c15ull;
	t->tokens = o->optin_rate > 1 ? o->optin_rate : 1;
	/* twice the requests in which one is above the percentile */
	t->min_n = o->slow_pct > 0 && o->slow_pct < 1 ? (uint32_t)(2.0 / (1.0 - o->slow_pct)) : 0;
	return t;
}

void trigger__free(struct trigger *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < t->nkeys; i++)
		free(t->keys[i]);
	free(t->keys);
	free(t->ix.slots);
	free(t);
}

struct lookup {
	const struct trigger *t;
	const char *service, *name;
};

static bool key_eq(const void *ctx, uint32_t i)
{
	const struct lookup *l = ctx;

	return l->t->keys[i]->service == l->service && l->t->keys[i]->name == l->name;
}

static uint64_t key_hash(const char *service, const char *name)
{
	return hash__u64(hash__u64(0, (uintptr_t)service), (uintptr_t)name);
}

static uint64_t key_hash_of(const void *ctx, uint32_t i)
{
	const struct trigger *t = ctx;

	return key_hash(t->keys[i]->service, t->keys[i]->name);
}

static struct key *key_of(struct trigger *t, const char *service, const char *name)
{
	struct lookup l = {t, service, name};
	uint32_t *slot;
	struct key *k;

	if (index__reserve_more(&t->ix, t->nkeys, 1, key_hash_of, t))
		return NULL;
	slot = index__find(&t->ix, key_hash(service, name), key_eq, &l);
	if (*slot)
		return t->keys[*slot - 1];
	if (t->nkeys >= MAX_KEYS && name != t->others)
		return key_of(t, NULL, t->others);
	if (grow_array((void **)&t->keys, &t->capkeys, t->nkeys + 1, sizeof(*t->keys), 64))
		return NULL;
	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->service = service;
	k->name = name;
	t->keys[t->nkeys++] = k;
	*slot = t->nkeys;
	return k;
}

/* The running percentile's bucket top over the live slots; 0: too few */
static uint64_t running_pct(const struct trigger *t, struct key *k, uint64_t now)
{
	uint64_t n = 0, want, acc = 0, cur = now / SLOT_NS;

	for (int s = 0; s < SLOTS; s++)
		if (k->epoch[s] + SLOTS > cur)
			for (uint32_t b = 0; b < NB; b++)
				n += k->hist[s][b];
	if (n < t->min_n || !n)
		return 0;
	want = (uint64_t)(t->o.slow_pct * (double)n);
	if (want >= n)
		want = n - 1;
	for (uint32_t b = 0; b < NB; b++) {
		for (int s = 0; s < SLOTS; s++)
			if (k->epoch[s] + SLOTS > cur)
				acc += k->hist[s][b];
		if (acc > want)
			return bucket_top(b);
	}
	return 0;
}

/* Any client can set the sampled flag on every request: the callers'
 * choice is followed up to the rate, so they cannot decide how much the
 * agent walks and exports */
static bool optin_allowed(struct trigger *t, uint64_t now)
{
	double burst = t->o.optin_rate > 1 ? t->o.optin_rate : 1;

	if (t->o.no_optin)
		return false;
	if (t->o.optin_rate <= 0)
		return true;
	if (now > t->tokens_at) {
		t->tokens += (double)(now - t->tokens_at) * 1e-9 * t->o.optin_rate;
		if (t->tokens > burst)
			t->tokens = burst;
	}
	t->tokens_at = now;
	if (t->tokens < 1)
		return false;
	t->tokens -= 1;
	return true;
}

unsigned trigger__judge(struct trigger *t, const struct cp_request *h, uint64_t now)
{
	uint64_t lat = h->end_ns > h->start_ns ? h->end_ns - h->start_ns : 0;
	uint32_t b = bucket(lat), s = (uint32_t)((now / SLOT_NS) % SLOTS);
	struct key *k = key_of(t, h->service, h->name);
	unsigned v = AG_SKIP;

	if (t->o.slow_ns && lat >= t->o.slow_ns)
		v |= AG_SLOW;
	if (k && t->o.slow_pct > 0) {
		/* a minute's percentile moves slowly: worked out once a second */
		if (!k->thr_at || now >= k->thr_at + THR_EVERY_NS || now < k->thr_at) {
			k->thr = running_pct(t, k, now);
			k->thr_at = now;
		}
		if (k->thr && lat > k->thr)
			v |= AG_SLOW;
	}
	if (t->o.sample > 0 && rnd01(t) < t->o.sample)
		v |= AG_SAMPLED;
	if (t->o.profile > 0 && rnd01(t) < t->o.profile)
		v |= AG_PROFILE;
	if (h->wire && h->wire->traceparent) {
		uint8_t tid[16], sid[8];
		bool sampled;

		if (traceparent__parse(h->wire->traceparent, tid, sid, &sampled) && sampled) {
			if (optin_allowed(t, now))
				v |= AG_OPTIN;
			else
				v |= AG_OPTIN_REFUSED;
		}
	}
	if (k) {
		if (k->epoch[s] != now / SLOT_NS) {
			memset(k->hist[s], 0, sizeof(k->hist[s]));
			k->epoch[s] = now / SLOT_NS;
		}
		k->hist[s][b]++;
		k->win[b]++;
		k->win_n++;
		if (lat > k->win_max)
			k->win_max = lat;
	}
	return v;
}

static uint64_t win_pct(const struct key *k, double q)
{
	uint64_t want = (uint64_t)(q * (double)k->win_n), acc = 0;

	if (want >= k->win_n)
		want = k->win_n - 1;
	for (uint32_t b = 0; b < NB; b++) {
		acc += k->win[b];
		if (acc > want)
			return bucket_top(b) < k->win_max ? bucket_top(b) : k->win_max;
	}
	return k->win_max;
}

void trigger__window_each(struct trigger *t, trigger_count_fn fn, void *ctx)
{
	for (uint32_t i = 0; i < t->nkeys; i++) {
		struct key *k = t->keys[i];
		struct trigger_count c;

		if (!k->win_n)
			continue;
		c = (struct trigger_count){k->service, k->name, k->win_n, win_pct(k, 0.5),
					   win_pct(k, 0.9), win_pct(k, 0.99), k->win_max};
		fn(ctx, &c);
		memset(k->win, 0, sizeof(k->win));
		k->win_n = k->win_max = 0;
	}
}
