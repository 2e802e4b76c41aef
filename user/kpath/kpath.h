/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Kernel-level critical paths (DESIGN.md section 5) as a streaming library:
 * records in time order from any source (a recording, a live ring buffer,
 * several hosts' streams merged by time), finished requests and warnings
 * out to a sink (model.h). kpath__analyze is the driver for recording
 * files.
 */
#ifndef CRITPATH_KPATH_H
#define CRITPATH_KPATH_H

#include <stdbool.h>
#include <stdint.h>

#include "critpath_abi.h"
#include "model.h"

struct recording_info;

struct kpath_opts {
	bool quiet; /* no progress on stderr */
};

struct kpath;

struct kpath *kpath__new(const struct cp_sink *sink);
/* A source of records (a recording's header): its host, clock offset, CPUs.
 * lossless: its stream is known to have lost no event (a recording whose
 * trailer says so), so requests need not wait for late loss windows; every
 * source must say so for it to count. Before its first record. Returns the
 * source's id (>= 0) or -errno. */
int kpath__add_source(struct kpath *kp, const char *name, const struct recording_info *info,
		      bool lossless);
/* One record of source src; records of all sources in time order, each
 * source's times on its own clock (kpath aligns hosts). 0 or -errno. */
int kpath__add(struct kpath *kp, uint32_t src, const struct cp_hdr *rec);
/* Time on src's clock reached ts with no record (a live stream gone
 * quiet): requests idle long enough finish, queued ones go out. */
int kpath__advance(struct kpath *kp, uint32_t src, uint64_t ts);
/* Requests the sink's want turned down, so never walked */
uint64_t kpath__unwalked(const struct kpath *kp);
/* The stream ended: every request still open goes out, then one warning per
 * kind of thing the analysis could not see. 0 or -errno. */
int kpath__flush(struct kpath *kp);
uint64_t kpath__records(const struct kpath *kp);
void kpath__free(struct kpath *kp);

/* Recordings (several: merged by time) to sink. 0 when something was
 * analysed, -errno with a message on stderr naming the file otherwise. */
int kpath__analyze(const char *const *paths, int npaths, const struct cp_sink *sink,
		   const struct kpath_opts *opts);

#endif /* CRITPATH_KPATH_H */
