// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Protocols named from the bytes of a read (detect.c) and split into the
 * messages a read holds (frame.c). */
#ifndef CRITPATH_PROTO_H
#define CRITPATH_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KP_NAME_LEN 64 /* a request's name from its bytes, with its NUL */

/* proto/detect.c */
enum kp_proto {
	KP_PROTO_NONE = 0,
	KP_PROTO_HTTP,
	KP_PROTO_MEMCACHED,
	KP_PROTO_RESP,
	KP_PROTO_TLS,	/* a TLS handshake's records (its data is ciphertext) */
	KP_PROTO_PG,	/* PostgreSQL's frontend protocol */
	KP_PROTO_MYSQL, /* MySQL's and MariaDB's client protocol */
	KP_PROTO_DNS,	/* a DNS query (over UDP) */
	KP_PROTO_FCGI,	/* FastCGI: a web server's call (php-fpm) */
};
/* Names a request from its first bytes; returns the protocol, name "" when
 * unknown. */
enum kp_proto proto__request_name(const uint8_t *p, size_t len, char *name, size_t namelen);

#define KP_TARGET_LEN 128
#define KP_TRACEPARENT_LEN 64
#define KP_TRACESTATE_LEN 64
/* What a request says beside its name: its target (path and query) and W3C
 * trace context; "" when absent. */
struct proto_meta {
	char target[KP_TARGET_LEN];
	char traceparent[KP_TRACEPARENT_LEN];
	char tracestate[KP_TRACESTATE_LEN];
};
/* W3C tracestate value v (n bytes) into dst (KP_TRACESTATE_LEN): whole
 * list-members from the left, "" when even the first does not fit. */
void proto__tracestate_fit(char *dst, const char *v, size_t n);
/* An HTTP/1.x request's (p: bytes proto__request_name found HTTP's): the
 * target, and with trace_ctx the trace context headers (header lines cut
 * by the prefix are not read). */
void proto__http_meta(const uint8_t *p, size_t len, struct proto_meta *m, bool trace_ctx);
/* HTTP status of a response's first bytes, 0 when not HTTP. */
int proto__http_status(const uint8_t *p, size_t len);

/* proto/frame.c: the requests in p[0..len) of a read of total bytes whose first
 * is protocol pr. Fills up to max messages, returns how many (1 when none can
 * be framed, 0 only for len 0); *beyond: requests past what p shows. */
struct proto_msg {
	uint32_t off, len;
};
uint32_t proto__split(enum kp_proto pr, const uint8_t *p, size_t len, uint64_t total,
		      struct proto_msg *m, uint32_t max, bool *beyond);

/* proto/query.c: target (an HTTP path with its query) into buf with the
 * values of secret-bearing query keys replaced by "REDACTED" (docs: the
 * keys OpenTelemetry's semantic conventions name, and tokens and
 * passwords); the length written. */
size_t proto__target_redacted(const char *target, char *buf, size_t len);
/* The secret values in target t[0..n): [start, end) offsets, at most max */
uint32_t proto__query_secrets(const char *t, size_t n, uint32_t (*spans)[2], uint32_t max);
/* One more key whose values are secret (--redact-query; kept, not copied);
 * -EINVAL for an empty key or one with &=?#, -E2BIG past the maximum */
#define PROTO_MAX_QUERY_KEYS 32
int proto__redact_query_add(const char *key);

#endif /* CRITPATH_PROTO_H */
