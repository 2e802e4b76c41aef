/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* The store's tables (docs/store.md) and their rows: a request's critical
 * path as RowBinary, one buffer per table, a batch being one INSERT per
 * table into one day's partition. */
#ifndef CRITPATH_CH_ROWS_H
#define CRITPATH_CH_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

enum ch_table { CH_REQUESTS, CH_SEGMENTS, CH_STEPS, CH_BLAME, CH_CALLS, CH_TABLES };

struct ch_table_def {
	const char *name;
	const char *columns; /* "day Date, batch UInt64, ..." */
	const char *order_by;
};
extern const struct ch_table_def ch_tables[CH_TABLES];
/* The columns an insert gives ("day, batch, ..."; not the MATERIALIZED) */
const char *ch_table__insert_cols(enum ch_table t);

struct ch_bytes {
	uint8_t *p;
	size_t n, cap;
};

struct ch_group; /* a request's steps or culprits being summed */

struct ch_batch {
	uint64_t id;
	uint16_t day; /* days since 1970 (UTC) of its requests' start */
	struct ch_bytes t[CH_TABLES];
	uint64_t rows[CH_TABLES];
	uint64_t requests;
	uint64_t bytes; /* of every table */
	/* scratch of ch_batch__add */
	struct ch_group *g;
	uint32_t ng, capg;
	uint32_t *slots;
	uint32_t capslots, mask; /* mask: of the slots the request uses */
};

/* The request's day: days since 1970 of start_ns + realtime_offset_ns */
uint16_t ch_rows__day(const struct cp_request *r);
/* A request's id across the fleet: FNV-1a (64 bits) of host, boot and id,
 * each followed by a NUL byte */
uint64_t ch_rows__rid(const char *host, const char *boot, const char *id);

/* Empties b for a batch of id and day (its buffers kept) */
void ch_batch__reset(struct ch_batch *b, uint64_t id, uint16_t day);
/* r's rows in every table of b (whose day must be r's); host and boot
 * name its host (host NULL: r->host). 0 or -ENOMEM (b as it was). */
int ch_batch__add(struct ch_batch *b, const struct cp_request *r, const char *host,
		  const char *boot);
void ch_batch__free(struct ch_batch *b);

#endif
