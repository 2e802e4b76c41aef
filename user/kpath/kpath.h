/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Kernel-level critical paths (DESIGN.md 5) as a streaming library: records in
 * time order from any source, requests and warnings out to a sink (model.h). */
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
/* A source of records (a recording's header); lossless: it lost no event, so
 * requests need not wait for late loss windows (all sources must say so). Its
 * id or -errno. */
int kpath__add_source(struct kpath *kp, const char *name, const struct recording_info *info,
		      bool lossless);
/* One record of source src, all sources in time order. 0 or -errno. */
int kpath__add(struct kpath *kp, uint32_t src, const struct cp_hdr *rec);
/* Time on src reached ts with no record: idle requests finish, queued ones go
 * out. */
int kpath__advance(struct kpath *kp, uint32_t src, uint64_t ts);
/* Requests the sink's want turned down, so never walked */
uint64_t kpath__unwalked(const struct kpath *kp);
/* The stream ended: open requests go out, then one warning per kind of thing
 * not seen. */
int kpath__flush(struct kpath *kp);
uint64_t kpath__records(const struct kpath *kp);
void kpath__free(struct kpath *kp);

/* Recordings (merged by time) to sink: 0, or -errno after a message naming the
 * file. */
int kpath__analyze(const char *const *paths, int npaths, const struct cp_sink *sink,
		   const struct kpath_opts *opts);

#endif /* CRITPATH_KPATH_H */
