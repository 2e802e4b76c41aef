/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Shared by report and diff: arguments, inputs, analysis, comparison. */
#ifndef CRITPATH_REPORT_CMD_H
#define CRITPATH_REPORT_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "util.h"

/* --from/--to: RFC 3339 (no zone = UTC), Unix seconds, or a duration on the
 * input's clock (since boot for recordings). 0 or -EINVAL. */
int parse_time(const char *s, uint64_t *ns);
int parse_time_kind(const char *s, uint64_t *ns, bool *realtime);

/* The input files: regular files, directories walked in name order (symlinked
 * dirs not followed); problems warned through e or stderr. *files a
 * NULL-terminated list (input_list__free). -errno only for ENOMEM. */
int input_list__collect(char *const *paths, int npaths, struct engine *e, char ***files,
			int *nfiles);
void input_list__free(char **files);

struct analyze_opts {
	double overlap_tolerance;
	bool quiet; /* no progress */
	const char *const *exclude_ops; /* --exclude-op SERVICE[:OPERATION] */
	unsigned nexclude_ops;
	uint64_t window_bytes, window_ns; /* --trace-window-bytes, --trace-window (0: default) */
};

/* Analyses recordings together and other files as traces: how many inputs (0:
 * *why says why), or -errno. */
int report__analyze(char *const *paths, int npaths, struct engine *e, const struct analyze_opts *o,
		    const char **why);

/* --- diff --------------------------------------------------------------- */

struct diff_step {
	char **frames;
	uint32_t nframes;
	char *category;
	uint64_t per_request_ns;
	double sd_ns; /* of its time per request, over all requests */
	/* with fewer than ENGINE_FEW requests: its time in each that had it */
	uint64_t *samples;
	uint32_t nsamples;
};

struct diff_side {
	char *label;
	uint64_t nrequests;
	uint64_t mean_latency_ns;
	struct diff_step *steps;
	uint32_t nsteps;
	bool has_sd; /* every step has sd_ns (a saved report before it has none) */
	bool has_samples; /* every step has its samples (fewer than ENGINE_FEW requests) */
};

bool diff__is_saved_profile(const char *head, size_t len);
int diff_side__from_result(struct diff_side *s, const char *label, const struct engine_result *r);
/* Reads a saved report's "summary" and "profile"; on error err names what
 * was wrong. */
int diff_side__from_json(struct diff_side *s, const char *label, const char *buf, size_t len,
			 char *err, size_t errlen);
void diff_side__free(struct diff_side *s);

struct diff_opts {
	bool json;
	uint32_t top;		/* rows, default 20 */
	uint64_t min_change_ns; /* smaller changes are not differences */
};

int diff__write(FILE *f, const struct diff_side *a, const struct diff_side *b,
		const struct diff_opts *o);

#endif /* CRITPATH_REPORT_CMD_H */
