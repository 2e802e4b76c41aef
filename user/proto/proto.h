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
};
/* Names a request from the first bytes the server read ("GET /cart",
 * "get", "SET", "TLS handshake", "UPDATE"); returns the protocol, name "" when
 * unknown. */
enum kp_proto proto__request_name(const uint8_t *p, size_t len, char *name, size_t namelen);

#define KP_TARGET_LEN 128
#define KP_TRACEPARENT_LEN 64
#define KP_TRACESTATE_LEN 64
/* What a request says beside its name: its target as sent (an HTTP path
 * with its query), and its W3C trace context headers; "" where absent. */
struct proto_meta {
	char target[KP_TARGET_LEN];
	char traceparent[KP_TRACEPARENT_LEN];
	char tracestate[KP_TRACESTATE_LEN];
};
/* An HTTP/1.x request's (p: bytes proto__request_name found HTTP's): the
 * target, and with trace_ctx the trace context headers (header lines cut
 * by the prefix are not read). */
void proto__http_meta(const uint8_t *p, size_t len, struct proto_meta *m, bool trace_ctx);
/* HTTP status of a response's first bytes, 0 when not HTTP. */
int proto__http_status(const uint8_t *p, size_t len);

/* proto/frame.c: pipelining. The requests in the first bytes p[0..len) of
 * a read that returned total bytes, whose first request is of protocol pr
 * (what proto__request_name said of p; KP_PROTO_NONE: one request). Fills up to max messages
 * (offset and length within p; a message cut by the end of p runs to len) and returns how many: 1
 * for a read holding one request (or none that can be framed), 0 only when len is 0. A message
 * after the first counts only when its name is whole in p. *beyond: the read carried more requests
 * than p shows (bytes past p after a message boundary, or a cut message after the first), so some
 * were not seen. */
struct proto_msg {
	uint32_t off, len;
};
uint32_t proto__split(enum kp_proto pr, const uint8_t *p, size_t len, uint64_t total,
		      struct proto_msg *m, uint32_t max, bool *beyond);

#endif /* CRITPATH_PROTO_H */
