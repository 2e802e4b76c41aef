/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * critpath agent inside: agent.c has the command line, the targets and the
 * loop that drains the rings; agent_live.c the analysis, in a thread of its
 * own that the loop hands batches of records to.
 */
#ifndef CRITPATH_AGENT_INT_H
#define CRITPATH_AGENT_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h"
#include "ch_writer.h"
#include "flight.h"
#include "otlp.h"
#include "session.h"

#define AGENT_CMD "agent"
#define MAX_WATCH 32

struct live;

/* what a file not written was (said once per kind and error) */
enum agent_file { AG_FILE_PROFILE, AG_FILE_FLIGHT };
#define AGENT_SAID_MAX 32
struct agent_said {
	enum agent_file what;
	int err;
};

struct agent {
	struct rec_session *s;
	struct live *live;
	struct trigger *tr;
	struct exporter *ex;
	struct ch_writer *store; /* --store */
	double store_rate;	 /* --store-sample */
	const char *store_url;	 /* --store */
	uint64_t store_buffer;	 /* --store-buffer-mb, bytes */
	struct otlp_resource res;
	struct flight_opts flo;
	uint64_t rng;
	/* the profile window */
	uint64_t every_ns;
	double profile_rate; /* --profile-sample */
	const char *out_dir;
	int out_fd; /* out_dir's, opened once */
	bool include_optin;
	uint32_t max_names; /* --max-names */
	/* what to follow */
	const char *comm[MAX_WATCH], *exe[MAX_WATCH], *cgroup[MAX_WATCH];
	int ncomm, nexe, ncgroup;
	char *exe_real[MAX_WATCH];
	/* written by the analysis thread only; read with cnt_get() */
	uint64_t seen, walked, exported, slow, sampled, optin, optin_refused, profiled, late;
	uint64_t status_every, last_status, last_cpu_ns, ntargets_added;
	uint64_t export_changes_said; /* the exporter's fail_changes last said */
	bool export_failing_said;
	uint64_t store_changes_said; /* the same of the store */
	bool store_failing_said, store_refused_said;
	const char *service_env;
	int err; /* the analysis's first error (atomic) */
	uint64_t unwritten; /* files not written (cnt_get) */
	struct agent_said said[AGENT_SAID_MAX];
	unsigned nsaid;
};

/* The one writer adds; any thread reads. */
#define cnt_add(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define cnt_get(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* After the session is loaded: the analysis and its thread. 0 or -errno. */
int live__start(struct agent *a);
/* The recorder's tap: a record into the batch being filled. */
int live__tap(void *ctx, const struct cp_hdr *rec);
/* The batch filled goes to the analysis, which passes on every record up to
 * cut in time order; waits while the queue is full. */
void live__post(struct agent *a, uint64_t cut);
/* The last batch, every record and open request analysed, the last profile
 * window written; the analysis's error or 0. */
int live__finish(struct agent *a);
void live__free(struct agent *a);
/* Times the loop waited for the analysis (its queue full), bytes queued */
/* The flight recorder's counts after live__finish; false: none */
bool live__flight_stats(struct agent *a, struct flight_stats *st);
void live__queue_stats(struct agent *a, uint64_t *waits, uint64_t *urgent);

#endif
