/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Puts every host on the first input's time base: realtime offsets, refined
 * by a pass over socket records. */
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
int kpath__add_source(struct kpath *kp, const char *name, const struct recording_info *info,
		      bool lossless);
/* Kernel-level critical paths (DESIGN.md 5) as a streaming library: records
 * in, requests to a sink. */
int kpath__add(struct kpath *kp, uint32_t src, const struct cp_hdr *rec);
/* A source of records; lossless: no late loss windows can come. Its id or
 * -errno. */
int kpath__advance(struct kpath *kp, uint32_t src, uint64_t ts);
/* Requests the sink's want turned down, so never walked */
uint64_t kpath__unwalked(const struct kpath *kp);
/* The stream ended: open requests go out, then one warning per kind of thing
 * not seen. */
int kpath__flush(struct kpath *kp);
uint64_t kpath__records(const struct kpath *kp);
void kpath__free(struct kpath *kp);

/* Time on src reached ts with no record. */
int kpath__analyze(const char *const *paths, int npaths, const struct cp_sink *sink,
		   const struct kpath_opts *opts);

#endif /* CRITPATH_KPATH_H */
