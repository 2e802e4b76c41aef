/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Hosts' clocks from the messages between them (DESIGN.md "Several hosts"):
 * each TCP byte arrived after its send began; the tightest interval's middle
 * is the estimate. */
#ifndef CRITPATH_KPATH_CLOCKS_H
#define CRITPATH_KPATH_CLOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include "critpath_abi.h"

#define KP_CLOCK_HOSTS 64 /* hosts estimated; more keep their realtime offsets */

struct kp_clocks;

/* How a host's offset was found */
enum kp_clock_basis {
	KP_CLOCK_REFERENCE = 0, /* the time base: the first input's host */
	KP_CLOCK_MESSAGES,	/* bounded both ways by messages (through other hosts maybe) */
	KP_CLOCK_ONE_WAY,	/* messages one way only: moved just enough to respect them */
	KP_CLOCK_REALTIME,	/* no message: the recorded realtime offset stands */
};

struct kp_clock_est {
	/* the host's clock ahead of the reference's: subtract it from its times */
	int64_t offset_ns;
	uint64_t uncertainty_ns; /* half the interval's width; 0 for one-way, realtime */
	uint64_t messages;	 /* matched, with the hosts it was estimated through */
	enum kp_clock_basis basis;
	/* by how much the bounds contradict each other */
	uint64_t conflict_ns;
};

struct kp_clocks *kp_clocks__new(uint32_t nhosts);
void kp_clocks__free(struct kp_clocks *cl);
/* One record of host (its times plus delta: on the common base). */
void kp_clocks__add(struct kp_clocks *cl, uint32_t host, const struct cp_hdr *rec, int64_t delta);
bool kp_clocks__enough(const struct kp_clocks *cl, uint64_t n);
/* Messages matched between hosts a and b, either way. */
uint64_t kp_clocks__pair_messages(const struct kp_clocks *cl, uint32_t a, uint32_t b);
/* est[h] for every host, relative to host ref. */
void kp_clocks__solve(const struct kp_clocks *cl, uint32_t ref, struct kp_clock_est *est);

#endif /* CRITPATH_KPATH_CLOCKS_H */
