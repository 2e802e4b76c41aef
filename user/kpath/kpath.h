/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Kernel-level critical paths (DESIGN.md section 5): reads a recording,
 * builds thread timelines, finds the requests the traced processes served,
 * walks each request's critical path backwards through wake edges, and hands
 * every request to the engine. Several recordings (several hosts) are
 * analysed together so connections between them can be followed.
 */
#ifndef CRITPATH_KPATH_H
#define CRITPATH_KPATH_H

#include "engine.h"

struct kpath_opts {
	bool quiet;	/* no progress on stderr */
};

/* 0 when something was analysed (warnings go to the engine), -errno with a
 * message on stderr naming the file otherwise. */
int kpath__analyze(const char *const *paths, int npaths, struct engine *e,
		   const struct kpath_opts *opts);

#endif /* CRITPATH_KPATH_H */
