/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * critpath agent's triggering without BPF: which finished requests to walk
 * (CPT's: slow, sampled, opted in by the caller's traceparent). The OTLP
 * export is out/otlp.h, the flight recorder flight.h, the live loop
 * user/record/agent.c.
 */
#ifndef CRITPATH_AGENT_H
#define CRITPATH_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "otlp.h"

/* Why a request is walked (AG_SKIP: counted only) */
enum ag_verdict {
	AG_SKIP = 0,
	AG_SLOW = OTLP_SLOW,
	AG_SAMPLED = OTLP_SAMPLED,
	AG_OPTIN = OTLP_OPTIN,
	AG_PROFILE = 8, /* --profile-sample: the windows' random sample */
	/* not a reason to walk: a sampled traceparent not followed (over
	 * --opt-in-rate, or --no-opt-in) */
	AG_OPTIN_REFUSED = 16,
	AG_STORE = 32, /* --store (and --store-sample): written to ClickHouse */
};

struct trigger_opts {
	uint64_t slow_ns;   /* --slow DUR; 0: by percentile */
	double slow_pct;    /* --slow pNN as 0.NN; 0: by duration */
	double sample;	    /* exported at random */
	double profile;	    /* walked at random for the profiles */
	/* opted in by a sampled traceparent at most this many a second (a
	 * token bucket of one second's worth; 0: no limit), or never */
	double optin_rate;
	bool no_optin;
	uint64_t seed;
};
#define TRIGGER_OPTIN_RATE 100 /* --opt-in-rate's default */

struct trigger;
struct trigger *trigger__new(const struct trigger_opts *o);
void trigger__free(struct trigger *t);
/* A finished request's verdict (AG_* bits); now: the stream's time. Every
 * request counts towards its service and name's running percentiles. */
unsigned trigger__judge(struct trigger *t, const struct cp_request *head, uint64_t now);

/* Every request seen since the last call, per service and name (latency
 * percentiles from a log histogram, ~3% wide buckets); then starts over. */
struct trigger_count {
	const char *service, *name;
	uint64_t requests, p50_ns, p90_ns, p99_ns, max_ns;
};
typedef void (*trigger_count_fn)(void *ctx, const struct trigger_count *c);
void trigger__window_each(struct trigger *t, trigger_count_fn fn, void *ctx);

#endif
