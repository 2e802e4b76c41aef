/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * The report model: what a critical-path producer hands to the engine. Two
 * producers exist: the span-level walk (Jaeger / OTLP input, user/span/)
 * and the kernel-level walk (recordings, user/kpath/). The engine
 * (aggregation, percentiles, contention, output formats) consumes only this.
 * DESIGN.md sections 5 and 6 define the semantics; the JSON contract in
 * section 6 is these structs printed.
 *
 * Ownership: a producer fills a struct cp_request whose strings and arrays
 * it owns; engine__add_request() copies whatever it keeps, so the producer
 * may reuse or free the request right after the call. Strings may be NULL
 * where a field does not apply; numbers use -1 for "not applicable".
 */
#ifndef CRITPATH_MODEL_H
#define CRITPATH_MODEL_H

#include <stdbool.h>
#include <stdint.h>

enum cp_category {
	CP_CAT_CPU = 0,
	CP_CAT_RUNQUEUE,
	CP_CAT_LOCK,
	CP_CAT_NETWORK,
	CP_CAT_DISK,
	CP_CAT_SLEEP,
	CP_CAT_SPAN,
	CP_CAT_UNEXPLAINED,
	CP_CAT__COUNT,
};

/* "cpu", "runqueue", "lock", "network", "disk", "sleep", "span", "unexplained" */
const char *cp_category_name(enum cp_category c);

struct cp_culprit {
	int32_t pid;
	int32_t tid;
	const char *comm;
	uint64_t ns;		/* time this culprit cost this segment */
};

struct cp_segment {
	uint64_t start_ns;
	uint64_t end_ns;
	enum cp_category category;
	/* service; request name; subcomponents…; the category is NOT repeated
	 * here: outputs append it as the leaf frame where they show stacks. */
	const char *const *frames;
	uint32_t nframes;
	uint32_t probe_frames;	/* the last ones are --probe'd calls, outermost first */
	bool interference;
	/* kernel level (-1 / NULL when not applicable) */
	int32_t pid;
	int32_t tid;
	int32_t cpu;
	const char *comm;
	const char *cpu_model;
	const char *sku;
	const char *peer;	/* network blind spot: "10.0.0.7:5432" */
	const char *host;	/* the host the segment's thread ran on (kernel input) */
	const struct cp_culprit *culprits;
	uint32_t nculprits;
	/* span level (NULL when not applicable) */
	const char *span_id;
	const char *service;
	const char *operation;
};

/* Per-span totals of a span-level request (inclusive = the span's duration
 * after clipping, exclusive = its time on the critical path). */
struct cp_span_stat {
	const char *span_id;
	const char *service;
	const char *operation;
	const char *const *frames;	/* call path from the root: "svc op", … */
	uint32_t nframes;
	uint64_t inclusive_ns;
	uint64_t exclusive_ns;
	/* index + 1 of an earlier stat of the request whose frames begin these
	 * (0: none): the engine then looks up only the levels below it */
	uint32_t prefix;
};

struct cp_request {
	const char *id;		/* trace id, or "<pid>:<conn>:<n>" for kernel requests */
	const char *service;
	const char *name;
	const char *host;
	uint64_t start_ns;	/* absolute: span input in Unix-epoch ns, kernel input CLOCK_MONOTONIC */
	uint64_t end_ns;
	bool partial;		/* overlaps a loss window, or clipped input */
	const struct cp_segment *segs;	/* in time order, tiling [start_ns, end_ns] exactly */
	uint32_t nsegs;
	const struct cp_span_stat *spans;	/* span level only */
	uint32_t nspans;
	/* span tags usable by --tag filters: key=value pairs (NULL-terminated
	 * array of "key=value" strings), NULL when none */
	const char *const *tags;
	/* start_ns + realtime_offset_ns is Unix-epoch ns (kernel input:
	 * the recording's CLOCK_REALTIME - CLOCK_MONOTONIC; span input: 0, its
	 * times are Unix epoch already). Lets wall-clock filters apply to both. */
	int64_t realtime_offset_ns;
	/* service, name, host, every segment's frames, comm,
	 * cpu_model and sku and every culprit's comm are NULL or strings from
	 * engine__intern() of the engine the request is handed to, so it takes
	 * them as they are instead of interning each again (the kernel walk's
	 * requests) */
	bool interned;
	/* served to a traced caller (the other end of its connection
	 * was recorded too), so its time is in that caller's path as well */
	bool downstream;
	/* kernel input: the request's target as sent (an HTTP path with its
	 * query; name may be templated), NULL when it is the name */
	const char *target;
	/* kernel input, valid during the sink's call only (a copy drops
	 * them): what an exporter needs to describe the request */
	const struct cp_request_wire *wire;
};

/* A downstream call a kernel request's walk waited on, made over TCP: the
 * callee's request, recorded on another host, is the one whose
 * client_addr is local_addr and whose rx_seq is tx_seq (docs/store.md
 * "Across hosts"; destination NAT changes neither). Mostly the request's
 * own; one with an interference segment, or sent before the request
 * began, is another's whose reply it waited behind: the callee's path is
 * this request's from its start only, and interference, as the walk over
 * both hosts has it. */
struct cp_call {
	const char *local_addr;	 /* "ip:port" of the caller's end */
	const char *remote_addr; /* the callee's end as the caller addressed it */
	uint32_t tx_seq;	 /* TCP sequence number of the call's first byte as sent */
	uint32_t tx_len;	 /* its bytes (the writes before the reply); 0/0: not
				    known (an HTTP/2 stream's) */
	uint64_t start_ns;	 /* its first write began (the request's clock) */
	uint64_t end_ns;	 /* the last read of its reply ended */
	/* the request's segment that waited for the reply (the longest when
	 * several did), whose time the callee's path replaces: its index in
	 * cp_request.segs, frames and category; seg -1, no frames: none (a
	 * stitched call the walk followed into the callee by a wakeup) */
	int32_t seg;
	enum cp_category category;
	const char *const *frames;
	uint32_t nframes;
	/* the callee is in this analysis too: its steps are in the path already */
	bool stitched;
	/* the segment is interference: another request's call the path waited
	 * behind (a lock holder's, a pool thread's) */
	bool interference;
};

/* A kernel request as it went over the wire (critpath agent's spans) */
struct cp_request_wire {
	const char *protocol;	 /* "http", "http/2", "grpc", "redis", "memcached",
				    "postgresql", "mysql", "dns"; NULL: unknown */
	int status;		 /* HTTP status, 0: none */
	const char *traceparent; /* W3C trace context headers, NULL: none */
	const char *tracestate;
	const char *server_addr; /* "ip:port" of the serving end, NULL: unknown */
	const char *client_addr;
	int32_t pid;		 /* the serving process */
	/* TCP sequence numbers of the request's first byte as the server read
	 * it and of the response's first byte as sent, and their lengths; 0/0
	 * unknown (not TCP, HTTP/2 streams, not seen) */
	uint32_t rx_seq, rx_len;
	uint32_t tx_seq, tx_len;
	/* the TCP calls its walk waited on, by start_ns (none yet in the head
	 * cp_sink.want is asked with) */
	const struct cp_call *calls;
	uint32_t ncalls;
};

/* A host of kernel input: its name and where its clock was put on the
 * report's time base (DESIGN.md "Several hosts") */
struct cp_host {
	const char *name;
	/* how far its clock was ahead of the reference host's (the first
	 * input's) after the recorded realtime offsets aligned them */
	int64_t clock_offset_ns;
	uint64_t uncertainty_ns;
	uint64_t matched_messages;
	/* "reference", "messages", "one-way", "realtime" (no message) */
	const char *clock;
};

/* Where a producer (the kernel walk, the span input) hands what it finds,
 * so neither knows who consumes it (the engine, a test, an exporter). */
struct cp_sink {
	/* a finished request, valid during the call; 0 = taken or filtered,
	 * < 0 stops the producer */
	int (*request)(void *ctx, const struct cp_request *r);
	void (*warn)(void *ctx, const char *msg);
	void *ctx;
	/* optional: the sink's lasting copy of s (NULL: no memory). With it
	 * the requests' strings are the sink's (cp_request.interned). */
	const char *(*intern)(void *ctx, const char *s);
	/* optional: a host of the input, once it is placed (before its
	 * requests); h valid during the call */
	void (*host)(void *ctx, const struct cp_host *h);
	/* optional: asked before a kernel request is walked, with its head
	 * (no segments, wire valid during the call); false: neither walked
	 * nor handed to request (an agent walks only what it keeps) */
	bool (*want)(void *ctx, const struct cp_request *head);
	/* optional: the sink never reads cp_request.tags (span input then
	 * does not collect them) */
	bool ignores_tags;
	/* optional: distinct request names (services and the names of their
	 * requests) at most; past it a new one is CP_OTHER_NAMES, counted and
	 * said once (0: no bound) */
	uint32_t max_names;
};
#define CP_OTHER_NAMES "(other names)"

#endif /* CRITPATH_MODEL_H */
