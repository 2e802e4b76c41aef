/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * What the recorder removes from records before they are written: the
 * values of HTTP header fields other than those that name and frame a
 * request (HTTP/1.x in a payload prefix; HTTP/2 through hpack__redact),
 * and on HTTP/2 DATA frames' bytes past the first --payload-bytes of a
 * transfer. Each direction of an HTTP/2 connection is followed frame by
 * frame as the report follows it, so that what the report reads is
 * unchanged.
 */
#ifndef CRITPATH_PROTO_REDACT_H
#define CRITPATH_PROTO_REDACT_H

#include <stdbool.h>
#include <stdint.h>

#include "critpath_abi.h"

struct redact;

struct redact_stats {
	uint64_t conns;	 /* HTTP/2 connection directions followed */
	uint64_t values; /* HTTP/2 header values redacted */
	uint64_t h1_values; /* HTTP/1.x header values redacted */
	uint64_t data;	 /* DATA bytes blanked */
	uint64_t blind;	 /* bytes blanked where the frames were not known */
};

/* keep: DATA bytes kept at the start of a transfer (--payload-bytes). */
struct redact *redact__new(uint32_t keep);
void redact__free(struct redact *rd);
/* Whether h is a record redact__record looks at (a stream's bytes, a
 * close): those must come to it in time order, each direction's
 * transfers one after the other, since a connection is followed from the
 * one that shows it is HTTP/2 on. */
bool redact__looks_at(struct redact *rd, const struct cp_hdr *h);
/* The record h as it is to be written: h itself, or a rewritten copy that
 * lasts until the next call. NULL only when out of memory. */
const struct cp_hdr *redact__record(struct redact *rd, const struct cp_hdr *h);
/* The same, rewriting h itself (a copy of the record the caller owns). */
int redact__in_place(struct redact *rd, struct cp_hdr *h);
void redact__stats(const struct redact *rd, struct redact_stats *s);

#endif /* CRITPATH_PROTO_REDACT_H */
