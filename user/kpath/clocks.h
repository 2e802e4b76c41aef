/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Hosts' clocks from the messages between them (DESIGN.md "Several hosts").
 * Every TCP byte that one host sent and another received bounds the
 * difference of their clocks: it arrived after its send began. Bytes one
 * way bound it from below, bytes the other way from above; the middle of
 * the tightest interval is the estimate, half its width the uncertainty
 * (The Mystery Machine, Canopy; NTP's RTT/2).
 *
 * A send and an arrival are one message when the byte the arrival ends
 * with lies in the bytes the send wrote: same TCP sequence space, seen
 * from both ends. The ends are matched by the sender's address (as both
 * see it: true behind a destination NAT, which changes only the server's)
 * or, failing that, the receiver's (a source NAT). Memory is fixed: a
 * table of recent sends and arrivals by address, overwritten as it fills.
 */
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
	/* how far the host's clock was ahead of the reference's, after the
	 * realtime offsets aligned them: subtract it from the host's times */
	int64_t offset_ns;
	uint64_t uncertainty_ns; /* half the interval's width; 0 for one-way, realtime */
	uint64_t messages;	 /* matched, with the hosts it was estimated through */
	enum kp_clock_basis basis;
	/* the bounds contradict each other (clocks drifted during the
	 * recording, or matches were wrong): by how much */
	uint64_t conflict_ns;
};

struct kp_clocks *kp_clocks__new(uint32_t nhosts);
void kp_clocks__free(struct kp_clocks *cl);
/* One record of host (its times plus delta: on the common base). */
void kp_clocks__add(struct kp_clocks *cl, uint32_t host, const struct cp_hdr *rec, int64_t delta);
/* Every pair of hosts with messages has at least n of them each way (the
 * estimate will not get much better), and there is such a pair. */
bool kp_clocks__enough(const struct kp_clocks *cl, uint64_t n);
/* Messages matched between hosts a and b, either way. */
uint64_t kp_clocks__pair_messages(const struct kp_clocks *cl, uint32_t a, uint32_t b);
/* est[h] for every host, relative to host ref. */
void kp_clocks__solve(const struct kp_clocks *cl, uint32_t ref, struct kp_clock_est *est);

#endif /* CRITPATH_KPATH_CLOCKS_H */
