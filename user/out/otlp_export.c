// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* OTLP/HTTP protobuf export off the agent's loop: a bounded queue (full:
 * dropped), one thread sending gzipped batches, retrying 429/502/503/504 and
 * connection errors with backoff and Retry-After (both capped at
 * BACKOFF_MAX_NS). The queue's bytes are one ring allocated once, so a
 * backend that is down never grows memory; a batch goes when full or when its
 * oldest request waited LINGER_NS (as the OpenTelemetry SDKs' batch
 * processors do). Once stopped, no send outlives the deadline, whatever the
 * backend does: each try's timeout is what is left, and a try in flight is
 * aborted from curl's progress callback. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <zlib.h>

#include "curl_dl.h"
#include "otlp.h"
#include "commands.h"
#include "util.h"

#define BACKOFF_MIN_NS 250000000ull
#define BACKOFF_MAX_NS 30000000000ull
#define LINGER_NS 1000000000ull
#define ITEM_BYTES 1024 /* the ring's bytes per request queued, on average */

struct item {
	size_t off, n;
	uint64_t at;
};

struct exporter {
	struct exporter_opts o;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item *q; /* ring of queue_max */
	uint32_t head, len;
	uint8_t *ring; /* the items' bytes, in queue order */
	size_t rcap, wpos;
	bool stop;	   /* atomic: curl's progress callback reads it unlocked */
	uint64_t deadline; /* set before stop */
	struct exporter_stats st;
	CURL *curl;
	struct curl_slist *hdrs;
	uint64_t retry_after_ns; /* from the last answer */
	char retry_after[32];	 /* its header's value, for the failure's reason */
	char curl_err[CURL_ERROR_SIZE];
	enum export_fail last_kind;
	int last_kind_status;
	z_stream zs;
	bool zinit;
	uint8_t *gz;
	size_t gzcap;
};

const char *exporter__load_error(void)
{
	return curl_dl__load();
}

/* Waits for cv until the CLOCK_MONOTONIC time until (0: no limit) */
static void cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t until)
{
	struct timespec ts;

	if (!until) {
		pthread_cond_wait(cv, mu);
		return;
	}
	ts.tv_sec = (time_t)(until / 1000000000ull);
	ts.tv_nsec = (long)(until % 1000000000ull);
	pthread_cond_timedwait(cv, mu, &ts);
}

const char *exporter__check_url(const char *url)
{
	const char *host;

	if (!url || !*url)
		return "no URL";
	if (!strncmp(url, "http://", 7))
		host = url + 7;
	else if (!strncmp(url, "https://", 8))
		host = url + 8;
	else
		return "not an http:// or https:// URL";
	if (!*host || *host == '/' || *host == ':')
		return "no host in the URL";
	return NULL;
}

const char *exporter__url_shown(const char *url, char *buf, size_t n)
{
	const char *auth = strstr(url, "://"), *end, *at = NULL;

	if (!auth) {
		snprintf(buf, n, "%s", url);
		return buf;
	}
	auth += 3;
	end = auth + strcspn(auth, "/?#");
	for (const char *p = auth; p < end; p++)
		if (*p == '@')
			at = p; /* the last one: a password may hold an '@' */
	if (at)
		snprintf(buf, n, "%.*s***%s", (int)(auth - url), url, at);
	else
		snprintf(buf, n, "%s", url);
	return buf;
}

const char *exporter__fail_name(enum export_fail k)
{
	static const char *const names[EXPORT_FAIL_KINDS] = {"connect", "dns",	"timeout",
							     "tls",	"HTTP", "other"};

	return k < EXPORT_FAIL_KINDS ? names[k] : "?";
}

uint64_t exporter__retry_after_ns(const char *v, time_t now)
{
	char *end;
	long long s;

	while (*v == ' ' || *v == '\t')
		v++;
	s = strtoll(v, &end, 10);
	if (end == v) { /* an HTTP-date */
		s = !curl_dl__load() ? (long long)cu.getdate(v, NULL) : -1;
		s = s < 0 ? 0 : s - (long long)now;
	}
	if (s <= 0)
		return 0;
	return (uint64_t)s >= BACKOFF_MAX_NS / 1000000000ull ? BACKOFF_MAX_NS
							     : (uint64_t)s * 1000000000ull;
}

/* buf is not a string: the header's line, CR LF included */
static size_t on_header(char *buf, size_t size, size_t n, void *ctx)
{
	struct exporter *e = ctx;
	size_t len = size * n, i = 12, end = len;

	if (len > 12 && !strncasecmp(buf, "Retry-After:", 12)) {
		while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
			i++;
		while (end > i && isspace((unsigned char)buf[end - 1]))
			end--;
		snprintf(e->retry_after, sizeof(e->retry_after), "%.*s", (int)(end - i), buf + i);
		e->retry_after_ns = exporter__retry_after_ns(e->retry_after, time(NULL));
	}
	return len;
}

/* ns left before the stop's deadline; UINT64_MAX before the stop */
static uint64_t left_ns(struct exporter *e)
{
	uint64_t now;

	if (!__atomic_load_n(&e->stop, __ATOMIC_ACQUIRE))
		return UINT64_MAX;
	now = clock__mono_ns();
	return e->deadline > now ? e->deadline - now : 0;
}

/* curl calls it at least once a second during a transfer; non-zero aborts */
static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	return left_ns(ctx) == 0;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ctx)
{
	return size * n; /* the response's body says nothing we use */
}

/* One deflate state and one output buffer for every export: a stream
 * begun and ended per export churned the thread's heap until it grew */
static int gzip(struct exporter *e, const uint8_t *p, size_t n, size_t *outn)
{
	uLong bound;
	int rc;

	if (!e->zinit) {
		if (deflateInit2(&e->zs, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			return -ENOMEM;
		e->zinit = true;
	} else if (deflateReset(&e->zs) != Z_OK) {
		return -EIO;
	}
	bound = deflateBound(&e->zs, n) + 32;
	if (bound > e->gzcap) {
		uint8_t *g = realloc(e->gz, bound);

		if (!g)
			return -ENOMEM;
		e->gz = g;
		e->gzcap = bound;
	}
	e->zs.next_in = (Bytef *)p;
	e->zs.avail_in = (uInt)n;
	e->zs.next_out = e->gz;
	e->zs.avail_out = (uInt)e->gzcap;
	rc = deflate(&e->zs, Z_FINISH);
	*outn = e->zs.total_out;
	return rc == Z_STREAM_END ? 0 : -EIO;
}

static enum export_fail fail_kind(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return EXPORT_FAIL_DNS;
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
		return EXPORT_FAIL_CONNECT;
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_ABORTED_BY_CALLBACK:
		return EXPORT_FAIL_TIMEOUT;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_SHUTDOWN_FAILED:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CLIENTCERT:
		return EXPORT_FAIL_TLS;
	default:
		return EXPORT_FAIL_OTHER;
	}
}

/* A try's outcome in the stats: an HTTP status (2xx: success), or 0 and
 * curl's rc; a failure of another kind than the last one is a change */
static void note(struct exporter *e, long code, CURLcode rc)
{
	struct exporter_stats *st = &e->st;
	enum export_fail k = code ? EXPORT_FAIL_HTTP : fail_kind(rc);

	pthread_mutex_lock(&e->mu);
	st->last_status = (int)(code > 0 ? code : 0);
	if (code >= 200 && code < 300) {
		st->failing = false;
		pthread_mutex_unlock(&e->mu);
		return;
	}
	if (!st->failing || k != e->last_kind || (int)code != e->last_kind_status)
		st->fail_changes++;
	st->failing = true;
	st->fails[k]++;
	e->last_kind = k;
	e->last_kind_status = (int)code;
	if (code > 0 && e->retry_after[0] && e->retry_after_ns)
		snprintf(st->last_error, sizeof(st->last_error),
			 "HTTP %ld, Retry-After: %s (waiting %.3g s)", code, e->retry_after,
			 (double)e->retry_after_ns / 1e9);
	else if (code > 0 && e->retry_after[0])
		snprintf(st->last_error, sizeof(st->last_error),
			 "HTTP %ld, Retry-After: %s (not used)", code, e->retry_after);
	else if (code > 0)
		snprintf(st->last_error, sizeof(st->last_error), "HTTP %ld", code);
	else if (rc == CURLE_ABORTED_BY_CALLBACK)
		snprintf(st->last_error, sizeof(st->last_error),
			 "timeout: given up at the exit's deadline");
	else
		snprintf(st->last_error, sizeof(st->last_error), "%s: %s", exporter__fail_name(k),
			 e->curl_err[0] ? e->curl_err : cu.easy_strerror(rc));
	pthread_mutex_unlock(&e->mu);
}

/* One POST: the HTTP status, 0 when there was no answer, -1 when the batch
 * could not be compressed */
static long post(struct exporter *e, const uint8_t *body, size_t n)
{
	uint64_t timeout = e->o.timeout_ns, left = left_ns(e);
	size_t gzn;
	long code = 0;
	CURLcode rc;

	if (gzip(e, body, n, &gzn)) {
		pthread_mutex_lock(&e->mu);
		e->st.fails[EXPORT_FAIL_OTHER]++;
		snprintf(e->st.last_error, sizeof(e->st.last_error), "gzip failed");
		pthread_mutex_unlock(&e->mu);
		return -1;
	}
	if (left < timeout)
		timeout = left;
	e->retry_after_ns = 0;
	e->retry_after[0] = '\0';
	e->curl_err[0] = '\0';
	/* at least 1 ms: 0 is no timeout at all */
	cu.easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)(timeout / 1000000 + 1));
	cu.easy_setopt(e->curl, CURLOPT_POSTFIELDS, e->gz);
	cu.easy_setopt(e->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)gzn);
	rc = cu.easy_perform(e->curl);
	if (rc == CURLE_OK)
		cu.easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &code);
	note(e, code, rc);
	return code;
}

static bool retryable(long code)
{
	return code == 0 || code == 429 || code == 502 || code == 503 || code == 504;
}

/* Sleeps up to ns, or until stop's deadline has passed; false: give up */
static bool wait_retry(struct exporter *e, uint64_t ns)
{
	uint64_t until = clock__mono_ns() + ns;
	bool go_on;

	pthread_mutex_lock(&e->mu);
	while (clock__mono_ns() < until && !(e->stop && clock__mono_ns() >= e->deadline))
		cond_wait_until(&e->cv, &e->mu, clock__mono_ns() + 50000000ull);
	go_on = !(e->stop && clock__mono_ns() >= e->deadline);
	pthread_mutex_unlock(&e->mu);
	return go_on;
}

static void *run(void *arg)
{
	struct exporter *e = arg;
	struct pbuf b = {0};

	/* below the traced servers: sends are never urgent, the queue's
	 * bound is what protects the agent */
	setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
	for (;;) {
		uint32_t k = 0;
		uint64_t backoff = BACKOFF_MIN_NS;
		long code;

		pthread_mutex_lock(&e->mu);
		while (!e->stop && (!e->len || (e->len < e->o.batch_max &&
						clock__mono_ns() - e->q[e->head].at < LINGER_NS)))
			cond_wait_until(&e->cv, &e->mu, e->len ? e->q[e->head].at + LINGER_NS : 0);
		if (!e->len || (e->stop && clock__mono_ns() >= e->deadline)) {
			pthread_mutex_unlock(&e->mu);
			break;
		}
		/* a batch: the requests at the head, concatenated */
		b.n = 0;
		b.err = false;
		while (k < e->len && k < e->o.batch_max) {
			struct item *it = &e->q[(e->head + k) % e->o.queue_max];

			if (b.n + it->n > b.cap) {
				size_t cap = b.cap ? b.cap : 65536;
				uint8_t *p;

				while (cap < b.n + it->n)
					cap *= 2;
				p = realloc(b.p, cap);
				if (!p)
					break;
				b.p = p;
				b.cap = cap;
			}
			memcpy(b.p + b.n, e->ring + it->off, it->n);
			b.n += it->n;
			k++;
		}
		pthread_mutex_unlock(&e->mu);
		for (;;) {
			code = k ? post(e, b.p, b.n) : -1;
			if (!retryable(code) ||
			    !wait_retry(e, e->retry_after_ns ? e->retry_after_ns : backoff))
				break;
			pthread_mutex_lock(&e->mu);
			e->st.retries++;
			pthread_mutex_unlock(&e->mu);
			backoff = backoff * 2 < BACKOFF_MAX_NS ? backoff * 2 : BACKOFF_MAX_NS;
		}
		pthread_mutex_lock(&e->mu);
		e->head = (e->head + k) % e->o.queue_max;
		e->len -= k;
		if (code >= 200 && code < 300) {
			e->st.sent += k;
			e->st.batches++;
		} else if (retryable(code)) {
			e->st.dropped += k; /* given up at the stop's deadline */
		} else {
			e->st.failed += k;
		}
		pthread_mutex_unlock(&e->mu);
	}
	pbuf__free(&b);
	return NULL;
}

/* The protocol's headers, then the user's: "Key: value", or curl's "Key;"
 * for an empty value ("Key:" would remove the header). 0 or -ENOMEM. */
static int add_headers(struct exporter *e, const struct otlp_headers *h)
{
	struct curl_slist *l;

	e->hdrs = cu.slist_append(NULL, "Content-Type: application/x-protobuf");
	if (!e->hdrs || !(l = cu.slist_append(e->hdrs, "Content-Encoding: gzip")))
		return -ENOMEM;
	for (size_t i = 0; h && i < h->n; i++) {
		char *line;

		if (asprintf(&line, "%s%s%s", h->h[i].key, h->h[i].value[0] ? ": " : ";",
			     h->h[i].value) < 0)
			return -ENOMEM;
		l = cu.slist_append(e->hdrs, line);
		free(line);
		if (!l)
			return -ENOMEM;
	}
	return 0;
}

struct exporter *exporter__new(const struct exporter_opts *o)
{
	struct exporter *e = calloc(1, sizeof(*e));
	char ua[64];
	int err;

	if (!e)
		return NULL;
	e->o = *o;
	e->o.headers = NULL; /* in e->hdrs */
	if (!e->o.timeout_ns)
		e->o.timeout_ns = 3000000000ull;
	if (!e->o.queue_max)
		e->o.queue_max = 4096;
	if (!e->o.batch_max)
		e->o.batch_max = 256;
	e->q = calloc(e->o.queue_max, sizeof(*e->q));
	e->rcap = (size_t)e->o.queue_max * ITEM_BYTES;
	e->ring = malloc(e->rcap);
	if (exporter__load_error()) {
		free(e->q);
		free(e->ring);
		free(e);
		errno = ELIBACC;
		return NULL;
	}
	e->curl = cu.easy_init();
	if (!e->q || !e->ring || !e->curl)
		goto fail;
	if (add_headers(e, o->headers)) {
		errno = ENOMEM;
		goto fail;
	}
	snprintf(ua, sizeof(ua), "critpath/%s", CRITPATH_VERSION);
	cu.easy_setopt(e->curl, CURLOPT_URL, o->url);
	cu.easy_setopt(e->curl, CURLOPT_HTTPHEADER, e->hdrs);
	cu.easy_setopt(e->curl, CURLOPT_USERAGENT, ua);
	cu.easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
	cu.easy_setopt(e->curl, CURLOPT_ERRORBUFFER, e->curl_err);
	cu.easy_setopt(e->curl, CURLOPT_HEADERFUNCTION, on_header);
	cu.easy_setopt(e->curl, CURLOPT_HEADERDATA, e);
	cu.easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, on_body);
	cu.easy_setopt(e->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	cu.easy_setopt(e->curl, CURLOPT_XFERINFODATA, e);
	cu.easy_setopt(e->curl, CURLOPT_NOPROGRESS, 0L);
	pthread_mutex_init(&e->mu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&e->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	{
		sigset_t all, old;

		sigfillset(&all); /* signals stay with the caller's threads */
		pthread_sigmask(SIG_SETMASK, &all, &old);
		err = pthread_create(&e->th, NULL, run, e);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (err) {
		errno = err;
		goto fail;
	}
	return e;
fail:
	cu.slist_free_all(e->hdrs);
	if (e->curl)
		cu.easy_cleanup(e->curl);
	free(e->q);
	free(e->ring);
	free(e);
	return NULL;
}

/* Where n bytes go in the ring after the queued items, or -1: no room */
static ssize_t ring_room(const struct exporter *e, size_t n)
{
	size_t head;

	if (!e->len)
		return n <= e->rcap ? 0 : -1;
	head = e->q[e->head].off;
	if (e->wpos >= head) { /* free: [wpos, rcap) and [0, head) */
		if (e->wpos + n <= e->rcap)
			return (ssize_t)e->wpos;
		return n < head ? 0 : -1;
	}
	return e->wpos + n < head ? (ssize_t)e->wpos : -1;
}

void exporter__push(struct exporter *e, const uint8_t *p, size_t n)
{
	ssize_t off;

	pthread_mutex_lock(&e->mu);
	e->st.queued++;
	if (e->len == e->o.queue_max || (off = ring_room(e, n)) < 0) {
		e->st.dropped++;
		pthread_mutex_unlock(&e->mu);
		return;
	}
	memcpy(e->ring + off, p, n);
	e->q[(e->head + e->len) % e->o.queue_max] = (struct item){(size_t)off, n, clock__mono_ns()};
	e->wpos = (size_t)off + n;
	e->len++;
	if (e->len == 1 || e->len == e->o.batch_max) /* a linger to begin, or a batch */
		pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

void exporter__stats(struct exporter *e, struct exporter_stats *s)
{
	pthread_mutex_lock(&e->mu);
	*s = e->st;
	pthread_mutex_unlock(&e->mu);
}

void exporter__close(struct exporter *e, uint64_t deadline_ns, struct exporter_stats *s)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	e->deadline = deadline_ns;
	__atomic_store_n(&e->stop, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->th, NULL); /* a send in flight ends by the deadline */
	e->st.dropped += e->len;
	if (s)
		*s = e->st;
	cu.slist_free_all(e->hdrs);
	cu.easy_cleanup(e->curl);
	if (e->zinit)
		deflateEnd(&e->zs);
	free(e->gz);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
	free(e->q);
	free(e->ring);
	free(e);
}
