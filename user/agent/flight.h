/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* critpath agent --flight: the last seconds of records, written as a
 * recording when a slow request is exported (flight.c). */
#ifndef CRITPATH_FLIGHT_H
#define CRITPATH_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "critpath_abi.h"

struct recording_info;

struct flight_opts {
	const char *dir;	/* as the user named it, for messages */
	int dirfd;		/* dir, opened once (outdir__open): files go there */
	uint64_t keep_ns;	/* --flight-seconds */
	uint64_t max_bytes;	/* events kept in memory at most */
	uint64_t max_md_bytes;	/* metadata records kept at most */
	uint64_t min_gap_ns;	/* one file per this long at most */
	uint32_t max_files;	/* files kept on disk; the oldest goes */
};
struct flight_stats {
	uint64_t written, skipped, failed, removed, md_dropped;
};

struct flight;
/* info: the capture's header, copied (its strings must outlive f) */
struct flight *flight__new(const struct flight_opts *o, const struct recording_info *info);
/* One record, in time order. 0 or -ENOMEM. */
int flight__add(struct flight *f, const struct cp_hdr *rec);
/* What is kept, as DIR/flight-TIME-N.rec, complete or not there (its path
 * in path, "" when none was due: nothing kept, or within min_gap of the
 * last). now: the stream's time; lost: events lost so far. 0, or -errno
 * with path the file not written. */
int flight__dump(struct flight *f, uint64_t now, uint64_t lost, char *path, size_t len);
void flight__stats(const struct flight *f, struct flight_stats *s);
void flight__free(struct flight *f);

#endif
