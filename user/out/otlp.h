/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* OTLP out: requests as spans (otlp.c) and the exporter (otlp_export.c: queue,
 * thread, gzip, retries). */
#ifndef CRITPATH_OTLP_H
#define CRITPATH_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "model.h"

/* Why a request is exported (critpath.trigger) */
enum otlp_why {
	OTLP_SLOW = 1,
	OTLP_SAMPLED = 2,
	OTLP_OPTIN = 4, /* a sampled W3C traceparent: a child of the caller's span */
};

/* W3C traceparent "00-<32 hex>-<16 hex>-<2 hex>": true when well formed
 * (flags' sampled bit in *sampled) */
bool traceparent__parse(const char *s, uint8_t trace_id[16], uint8_t span_id[8], bool *sampled);

/* One request as a ResourceSpans message; a batch is its items one after
 * another. */
struct otlp_resource {
	const char *service;	/* OTEL_SERVICE_NAME, or NULL: the request's service */
	const char *host;
	const char *exe;	/* the serving process's executable, NULL: unknown */
};
struct pbuf {
	uint8_t *p;
	size_t n, cap;
	bool err;
};
void pbuf__free(struct pbuf *b);
/* rnd: 24 random bytes (trace id when not opted in, span ids) */
int otlp__encode_request(struct pbuf *b, const struct cp_request *r,
			 const struct otlp_resource *res, unsigned why, const uint8_t rnd[24]);

/* OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS (otlp_headers.c) */
struct otlp_header {
	char *key, *value;
};
struct otlp_headers {
	struct otlp_header *h;
	size_t n;
};
/* Adds s's entries ("k=v,k2=v2": keys and values trimmed of spaces and tabs,
 * values percent-decoded, empty entries skipped), one whose key is there
 * already (in any case) replacing it. 0; -EINVAL for a malformed entry, why
 * in why (by its position and key, never its value); -ENOMEM. */
int otlp_headers__add(struct otlp_headers *h, const char *s, char *why, size_t whyn);
void otlp_headers__free(struct otlp_headers *h);

struct exporter_opts {
	const char *url;	/* http(s)://host:port/v1/traces */
	const struct otlp_headers *headers; /* sent with every export (copied) */
	uint32_t queue_max;	/* requests waiting, at most */
	uint32_t batch_max;	/* requests per export */
	uint64_t timeout_ns;	/* per export */
};
/* Why an export failed */
enum export_fail {
	EXPORT_FAIL_CONNECT,	/* refused, reset, closed without an answer */
	EXPORT_FAIL_DNS,
	EXPORT_FAIL_TIMEOUT,	/* the exit's deadline too */
	EXPORT_FAIL_TLS,
	EXPORT_FAIL_HTTP,	/* an answer other than 2xx */
	EXPORT_FAIL_OTHER,
	EXPORT_FAIL_KINDS
};
struct exporter_stats {
	uint64_t queued, sent, dropped, failed, retries, batches;
	uint64_t fails[EXPORT_FAIL_KINDS]; /* exports that failed (each try), by kind */
	uint64_t fail_changes;	/* failures of a kind (an HTTP status) other than the last one's */
	bool failing;		/* the last export failed */
	int last_status;	/* last HTTP status (0: no answer) */
	char last_error[320];	/* why the last failed export failed */
};
struct exporter;
/* The thread starts; NULL with errno on failure */
struct exporter *exporter__new(const struct exporter_opts *o);
/* Why libcurl cannot be loaded (exporter__new fails with ELIBACC), or NULL. */
const char *exporter__load_error(void);
/* Takes one encoded request (its bytes are copied); a full queue drops it,
 * counted. */
void exporter__push(struct exporter *e, const uint8_t *p, size_t n);
void exporter__stats(struct exporter *e, struct exporter_stats *s);
/* Sends the queue until deadline_ns, the rest counted dropped; final counts in
 * *s. */
void exporter__close(struct exporter *e, uint64_t deadline_ns, struct exporter_stats *s);
/* "http://h:p/v1/traces" checked: NULL when fine, else why not */
const char *exporter__check_url(const char *url);
/* url as it may be printed: a user and password replaced by "***" */
const char *exporter__url_shown(const char *url, char *buf, size_t n);
/* "connect", "dns", ... */
const char *exporter__fail_name(enum export_fail k);
/* A Retry-After value (seconds, or an HTTP-date compared with now), capped
 * at the longest backoff; 0 when it says nothing usable */
uint64_t exporter__retry_after_ns(const char *v, time_t now);

#endif
