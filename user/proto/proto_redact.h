/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* What the recorder removes before writing: header values other than those that
 * name and frame a request (HTTP/1.x and HTTP/2), and DATA past
 * --payload-bytes. HTTP/2 is followed as the report follows it, so what the
 * report reads is unchanged. */
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
/* Credential query values kept (record --keep-query); by default they are
 * '*' as other secrets (proto/query.c's keys) */
void redact__keep_query(struct redact *rd);
/* Whether redact__record looks at h; those records must come in time order. */
bool redact__looks_at(struct redact *rd, const struct cp_hdr *h);
const struct cp_hdr *redact__record(struct redact *rd, const struct cp_hdr *h);
/* The same, rewriting h itself (a copy of the record the caller owns). */
int redact__in_place(struct redact *rd, struct cp_hdr *h);
void redact__stats(const struct redact *rd, struct redact_stats *s);

#endif /* CRITPATH_PROTO_REDACT_H */
