/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* The store's writer: requests in (any one thread), batches out to
 * ClickHouse from a thread of its own, one INSERT per table per batch, a
 * batch in one day's partition. Batches wait in a bounded buffer; past it
 * the oldest waiting one is dropped (or the caller waits: wait_when_full).
 * A batch whose outcome is unknown (a timeout, a connection lost) is
 * resent only after SELECT count() ... WHERE batch = B found it missing,
 * so none is stored twice. */
#ifndef CRITPATH_CH_WRITER_H
#define CRITPATH_CH_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct ch_writer_opts {
	const char *url;     /* clickhouse://HOST:PORT/DB */
	size_t buffer_bytes; /* batches waiting, at most (default 64 MiB) */
	size_t batch_bytes;  /* a batch goes once this big (default 4 MiB) */
	uint64_t linger_ns;  /* or once its first request waited this long (1 s) */
	bool wait_when_full; /* the caller waits for room instead (critpath store) */
	uint64_t give_up_ns; /* a batch not stored after this long fails (0: never) */
	uint64_t timeout_ns; /* each request to ClickHouse (default 30 s) */
};

struct ch_writer_stats {
	uint64_t requests, segments, batches; /* stored */
	/* the buffer full (the newest requests, not walked: ch_writer__skip;
	 * or the oldest batch waiting), or left at the exit's deadline */
	uint64_t dropped, dropped_segments;
	uint64_t failed, failed_segments; /* refused by ClickHouse, or given up */
	uint64_t tries_failed;		  /* inserts and checks that failed */
	uint64_t found_stored;		  /* tables of a batch found there before a resend */
	uint64_t buffered;		  /* bytes waiting */
	uint64_t waiting;		  /* requests waiting */
	uint64_t fail_changes;		  /* failures unlike the one before (to say once) */
	bool failing;			  /* the last try failed */
	char last_error[512];
};

struct ch_writer;
/* The URL parsed, nothing sent yet. NULL with why in err. */
struct ch_writer *ch_writer__new(const struct ch_writer_opts *o, char *err, size_t errn);
/* Once after new: the first try at the schema (made where missing, its
 * version checked), then the thread starts and tries again as it sends.
 * 0; -EPROTONOSUPPORT: a schema of another version (the writer refuses
 * every request: ch_writer__add's -EPIPE); another -errno: not made yet
 * (ClickHouse down or refusing), err says why. */
int ch_writer__setup(struct ch_writer *w, char *err, size_t errn);
/* r's rows queued; host and boot name its host (host NULL: r->host).
 * 0; -ENOMEM (counted dropped); -EPIPE: the writer stopped for good (a
 * schema it refuses). */
int ch_writer__add(struct ch_writer *w, const struct cp_request *r, const char *host,
		   const char *boot);
/* The buffer is at its bound (not with wait_when_full): a request added
 * now would push a waiting batch out. The caller may then leave the
 * request out before it costs a walk, and say so with ch_writer__skip
 * (counted dropped, its segments unknown). Lock-free. */
bool ch_writer__full(struct ch_writer *w);
void ch_writer__skip(struct ch_writer *w);
void ch_writer__stats(struct ch_writer *w, struct ch_writer_stats *st);
/* "clickhouse://HOST:PORT/DB", no credentials */
const char *ch_writer__shown(const struct ch_writer *w);
/* Sends what is queued until deadline_ns (CLOCK_MONOTONIC; 0: no limit),
 * the rest counted dropped; frees w. Final counts in *st. */
void ch_writer__close(struct ch_writer *w, uint64_t deadline_ns, struct ch_writer_stats *st);

#endif
