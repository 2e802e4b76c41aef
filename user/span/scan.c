// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * The span input's reader: the file (or buffer) is read in chunks and cut
 * into units, each a JSON value that simdjson parses on its own
 * (span_parser__unit) while its bytes are in the buffer; then they are
 * dropped. Memory: the largest unit (a Jaeger trace, or the resourceSpans of
 * one OTLP export request) plus a chunk, never the file.
 *
 * Only the outer levels are read here, byte by byte: top-level values
 * (several are allowed: JSON lines, as the OpenTelemetry collector's file
 * exporter writes), the keys of a top-level object and the elements of
 * Jaeger's "data" array. Content decides the format, the first hit wins: a
 * top-level object with a "data" array (or a bare top-level array of trace
 * objects) is Jaeger, one with a "resourceSpans" array (Grafana Tempo:
 * "batches") is OTLP.
 *
 * Where a unit (or a value skipped whole, like Jaeger's "errors") ends is
 * found 64 bytes at a time (span/blocks.c). A skipped value is checked for
 * strings and brackets only.
 *
 * A malformed unit is warned (line, byte, simdjson's message, the trace) and
 * the units after it are still read; damage to the outer levels, or an end
 * of input inside a value, ends the file with a warning.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "span_internal.h"
#include "span_json.h"

#define SCAN_MIN_READ (64u << 10)
#define SCAN_MAX_FIRST (1u << 20) /* the first buffer, grown when a unit needs it */
#define NO_KEEP SIZE_MAX

enum { MODE_UNKNOWN = 0, MODE_JAEGER, MODE_OTLP, MODE_ZIPKIN };

struct scan {
	struct span_file *f;
	struct span_parser *p;
	int fd; /* < 0: reading src */
	const char *src;
	size_t src_len, src_off;
	char *buf;		 /* cap + SPAN_JSON_PADDING bytes */
	size_t cap, pos, hi;	 /* buf[0, hi) holds input; pos: the next byte to read */
	size_t keep;		 /* bytes from here on stay: the unit being cut */
	unsigned long long base; /* input offset of buf[0] */
	unsigned long long off0; /* bytes of the inputs read before this one */
	/* Line numbers are only for warnings: newlines are counted when one
	 * needs them, from where the last count stopped, reading dropped bytes
	 * again from the file; or, when the input cannot be read again (a
	 * pipe), as bytes are dropped. */
	unsigned long long nl_off, nl_count; /* nl_count newlines before nl_off */
	bool count_as_dropped;
	int mode;
	int err;	  /* the first error that ended the input */
	uint32_t nbad;	  /* malformed units, skipped */
	bool utf8_warned; /* once per file */
	/* input offsets: bytes before utf8_to are known to be UTF-8 (checked
	 * ahead of the units, a buffer at a time); the next check ahead is not
	 * before utf8_retry when one failed */
	unsigned long long utf8_to, utf8_retry;
	bool eof;
};

/* ---- input --------------------------------------------------------------- */

/* Without -mpopcnt, __builtin_popcount is a call into libgcc. */
static inline int popcount64(uint64_t x)
{
	x -= (x >> 1) & 0x5555555555555555ull;
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (int)((x * 0x0101010101010101ull) >> 56);
}

static unsigned long long count_lines(const char *b, size_t n)
{
	unsigned long long c = 0;
	size_t i = 0;

#ifdef __SSE2__
	const __m128i nl = _mm_set1_epi8('\n');

	for (; i + 16 <= n; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(b + i));

		c += popcount64((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl)));
	}
#endif
	for (; i < n; i++)
		c += b[i] == '\n';
	return c;
}

static int grow(struct scan *s, size_t cap)
{
	char *b = realloc(s->buf, cap + SPAN_JSON_PADDING);

	if (!b)
		return -ENOMEM;
	/* simdjson may read the padding; keep it defined */
	memset(b + cap, ' ', SPAN_JSON_PADDING);
	s->buf = b;
	s->cap = cap;
	return 0;
}

/* More input after buf[hi]: 1 when bytes came, 0 at the end, < 0 on an
 * error (warned, s->err set). Drops the bytes before pos (or keep) only
 * when the buffer is full, and then doubles it if it is still half full, so
 * a large unit is moved O(1) times per byte. */
static int fill(struct scan *s)
{
	size_t drop = s->keep < s->pos ? s->keep : s->pos;
	ssize_t r;

	if (s->eof)
		return 0;
	if (s->cap - s->hi < SCAN_MIN_READ) {
		if (drop) {
			if (s->count_as_dropped) {
				s->nl_count += count_lines(s->buf, drop);
				s->nl_off = s->base + drop;
			}
			memmove(s->buf, s->buf + drop, s->hi - drop);
			s->base += drop;
			s->pos -= drop;
			s->hi -= drop;
			if (s->keep != NO_KEEP)
				s->keep -= drop;
		}
		if (s->cap - s->hi < s->cap / 2 && grow(s, s->cap * 2)) {
			span__warnf(s->f, "out of memory reading byte %llu on",
				    s->base + (unsigned long long)s->hi);
			return s->err = -ENOMEM;
		}
	}
	if (s->fd < 0) {
		r = s->src_len - s->src_off;
		if ((size_t)r > s->cap - s->hi)
			r = s->cap - s->hi;
		memcpy(s->buf + s->hi, s->src + s->src_off, r);
		s->src_off += r;
	} else {
		do
			r = read(s->fd, s->buf + s->hi, s->cap - s->hi);
		while (r < 0 && errno == EINTR);
		if (r < 0) {
			s->err = -errno;
			span__warnf(s->f, "read failed after byte %llu: %s",
				    s->base + (unsigned long long)s->hi, strerror(errno));
			return s->err;
		}
	}
	if (!r) {
		s->eof = true;
		return 0;
	}
	s->hi += r;
	return 1;
}

/* ---- errors -------------------------------------------------------------- */

/* The line of buf[at]. */
static unsigned long long line_at(struct scan *s, size_t at)
{
	unsigned long long off = s->base + at;
	char tmp[64 << 10];

	if (off < s->nl_off) { /* before the last count: count again */
		s->nl_off = 0;
		s->nl_count = 0;
	}
	while (s->nl_off < s->base && s->nl_off < off) { /* dropped bytes */
		size_t n = (off < s->base ? off : s->base) - s->nl_off;
		ssize_t r;

		if (s->fd < 0) {
			s->nl_count += count_lines(s->src + s->nl_off, n);
			s->nl_off += n;
			continue;
		}
		r = pread(s->fd, tmp, n < sizeof(tmp) ? n : sizeof(tmp), s->nl_off);
		if (r <= 0)
			return 0; /* unknown */
		s->nl_count += count_lines(tmp, r);
		s->nl_off += r;
	}
	if (s->nl_off < off) {
		s->nl_count += count_lines(s->buf + (s->nl_off - s->base), off - s->nl_off);
		s->nl_off = off;
	}
	return s->nl_count + 1;
}

#define NOT_TRACES                                                                                 \
	"not a trace file: tried Jaeger JSON (a \"data\" array at the top level), OTLP JSON "     \
	"(\"resourceSpans\", one export request per line too) and Zipkin v2 JSON (an array of "  \
	"spans with \"traceId\")"

/* What the top level held, for a file that is none of the formats. */
static void describe_top(struct scan *s, char *out, size_t cap)
{
	size_t i = 0;

	while (i < s->hi && strchr(" \t\r\n", s->buf[i]))
		i++;
	if (i >= s->hi) {
		snprintf(out, cap, "nothing but white space");
		return;
	}
	if (s->buf[i] == '{')
		snprintf(out, cap, "an object beginning %.40s", s->buf + i);
	else if (s->buf[i] == '[')
		snprintf(out, cap, "an array beginning %.40s", s->buf + i);
	else
		snprintf(out, cap, "not JSON (%.20s)", s->buf + i);
	for (char *c = out; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = ' ';
}

/* The outer levels are damaged, or the input ended inside a value: the file
 * ends here. at is an index in buf. */
static int fail_at(struct scan *s, size_t at, const char *what)
{
	const char *tid = span_parser__trace_id(s->p);

	if (s->mode == MODE_UNKNOWN) {
		char top[96];

		describe_top(s, top, sizeof(top));
		span__warnf(s->f, "%s; the top level was %s (%s at byte %llu)", NOT_TRACES, top,
			    what, s->base + (unsigned long long)at);
	} else {
		span__warnf(s->f,
			    "malformed JSON at line %llu, byte %llu: %s; the spans before it "
			    "read, the trace in progress (trace %s, %u spans read) skipped",
			    line_at(s, at), s->base + (unsigned long long)at, what,
			    tid ? tid : "id not yet read", span_parser__nspans(s->p));
	}
	s->err = -EINVAL;
	return -EINVAL;
}

static int fail(struct scan *s, const char *what)
{
	return fail_at(s, s->pos < s->hi ? s->pos : s->hi, what);
}

/* ---- cutting ------------------------------------------------------------- */

/* The object or array at pos: *end is the index after its closing bracket
 * (pos is left there). Bytes from s->keep on stay in the buffer. */
static int scan_container(struct scan *s, size_t *end, const char *what)
{
	struct span_block_state st = {0};
	size_t i = s->pos;
	int r;

	for (;;) {
		if (span_blocks__scan(s->buf, &i, s->hi, &st, end)) {
			s->pos = *end;
			return 0;
		}
		s->pos = i;
		r = fill(s);
		i = s->pos;
		if (r < 0)
			return r;
		if (!r)
			break;
	}
	if (i < s->hi) { /* the last bytes, padded with spaces */
		char tail[64];
		size_t t = 0;

		memset(tail, ' ', sizeof(tail));
		memcpy(tail, s->buf + i, s->hi - i);
		if (span_blocks__scan(tail, &t, sizeof(tail), &st, end)) {
			*end += i;
			s->pos = *end;
			return 0;
		}
	}
	s->pos = s->hi;
	return fail(s, what);
}

/* ---- the outer levels ------------------------------------------------------ */

/* The next byte that is not white space (pos is left on it), -1 at the end,
 * < -1 after a read error. */
static int peek(struct scan *s)
{
	for (;;) {
		for (; s->pos < s->hi; s->pos++) {
			unsigned char c = s->buf[s->pos];

			if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
				return c;
		}
		if (fill(s) <= 0)
			return s->err ? -2 : -1;
	}
}

/* The string at pos (its opening quote); its first cap bytes, raw, into out
 * (out may be NULL), its length in *len. */
static int scan_string(struct scan *s, char *out, size_t cap, size_t *len)
{
	size_t n = 0;
	bool esc = false;

	const char *e;

	s->pos++;
	/* the usual: closed in the buffer, no escape */
	if (span_json__raw_string(s->buf + s->pos, s->buf + s->hi, &e)) {
		n = (size_t)(e - (s->buf + s->pos));
		if (cap)
			memcpy(out, s->buf + s->pos, n < cap ? n : cap);
		s->pos += n + 1;
		*len = n;
		return 0;
	}
	for (;;) {
		/* in locals: out may alias s as far as the compiler knows */
		const unsigned char *b = (const unsigned char *)s->buf;
		size_t pos = s->pos, hi = s->hi;

		while (pos < hi) {
			unsigned char c = b[pos];

			if (esc) {
				esc = false;
			} else if (c == '\\') {
				esc = true;
			} else if (c == '"') {
				s->pos = pos + 1;
				*len = n;
				return 0;
			} else if (c < 0x20) {
				s->pos = pos;
				return fail(s, "control character in a string");
			}
			if (n < cap)
				out[n] = c;
			n++;
			pos++;
		}
		s->pos = pos;
		if (fill(s) <= 0)
			return s->err ? s->err : fail(s, "end of input inside a string");
	}
}

/* true, false, null or a number at pos. */
static int scan_scalar(struct scan *s)
{
	size_t n = 0;
	char tok[64];

	for (;;) {
		for (; s->pos < s->hi; s->pos++) {
			char c = s->buf[s->pos];

			if (strchr(" \t\r\n,:[]{}\"", c) || !c)
				goto done;
			if (n < sizeof(tok))
				tok[n] = c;
			n++;
		}
		if (fill(s) <= 0) {
			if (s->err)
				return s->err;
			break;
		}
	}
done:
	if (n && n <= sizeof(tok) &&
	    ((n == 4 && !memcmp(tok, "true", 4)) || (n == 5 && !memcmp(tok, "false", 5)) ||
	     (n == 4 && !memcmp(tok, "null", 4)) || span_json__number_ok(tok, n)))
		return 0;
	return fail(s, n ? "invalid value" : "expected a value");
}

/* Any value at pos (its first byte c), not kept. */
static int skip_value(struct scan *s, int c)
{
	size_t end, len;

	if (c == '{' || c == '[')
		return scan_container(s, &end, "end of input inside a value");
	if (c == '"')
		return scan_string(s, NULL, 0, &len);
	if (c < 0)
		return s->err ? s->err : fail(s, "end of input where a value was expected");
	return scan_scalar(s);
}

static void warn_bad_unit(struct scan *s, enum span_unit kind, size_t start, const char *msg,
			  size_t at)
{
	const char *tid = span_parser__trace_id(s->p);
	unsigned long long line = line_at(s, start + at);
	unsigned long long byte = s->base + start + at;

	s->nbad++;
	if (kind == SPAN_UNIT_JAEGER)
		span__warnf(s->f,
			    "malformed JSON at line %llu, byte %llu: %s; trace %s (%u spans read) "
			    "skipped, the traces after it are still read",
			    line, byte, msg, tid ? tid : "(id not read)",
			    span_parser__nspans(s->p));
	else
		span__warnf(s->f,
			    "malformed JSON at line %llu, byte %llu: %s; the export request it is "
			    "in (%u spans read) skipped, the requests after it are still read",
			    line, byte, msg, span_parser__nspans(s->p));
}

/* Bytes that are not UTF-8 become '?' (yajl took any bytes; simdjson wants
 * UTF-8). Returns how many were replaced. */
static size_t fix_utf8(char *b, size_t n)
{
	const unsigned char *u = (const unsigned char *)b;
	size_t i = 0, bad = 0;

	while (i < n) {
		unsigned c = u[i], len = 0, k;
		bool ok;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			len = 2;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4;
		ok = len && i + len <= n;
		for (k = 1; ok && k < len; k++)
			ok = (u[i + k] & 0xc0) == 0x80;
		if (ok && ((c == 0xe0 && u[i + 1] < 0xa0) || (c == 0xed && u[i + 1] >= 0xa0) ||
			   (c == 0xf0 && u[i + 1] < 0x90) || (c == 0xf4 && u[i + 1] >= 0x90)))
			ok = false; /* overlong, surrogate, past U+10FFFF */
		if (ok) {
			i += len;
			continue;
		}
		b[i++] = '?';
		bad++;
	}
	return bad;
}

/* How many bytes from pos on are known to be UTF-8. What the buffer holds
 * past the last check is checked in one call (a call a unit cost more than
 * the check of a small one), up to the start of its last character: that
 * one may be cut at hi. Where that fails, the units are checked one by one
 * until pos passes what was read. */
static size_t utf8_ahead(struct scan *s)
{
	unsigned long long at = s->base + s->pos;
	size_t e = s->hi;

	if (s->utf8_to <= at && s->utf8_retry <= at) {
		while (e > s->pos && s->hi - e < 3 && ((unsigned char)s->buf[e - 1] & 0xc0) == 0x80)
			e--;
		if (e > s->pos && (unsigned char)s->buf[e - 1] >= 0xc0)
			e--;
		if (span_json__utf8_ok(s->buf + s->pos, e - s->pos))
			s->utf8_to = s->base + e;
		else
			s->utf8_retry = s->base + s->hi;
	}
	return s->utf8_to > at ? (size_t)(s->utf8_to - at) : 0;
}

/* A unit at pos: cut it out, parse it, drop it. */
static int unit(struct scan *s, enum span_unit kind)
{
	const char *msg = NULL;
	size_t end, start, at = 0;
	int r;

	uint64_t nread = s->f->nread;

	/* whole in the buffer as exporters write it: the raw walk finds its
	 * end, and its bytes are read once */
	r = span_parser__unit_raw(s->p, kind, s->buf + s->pos, s->hi - s->pos,
				  kind == SPAN_UNIT_ZIPKIN ? 0 : utf8_ahead(s), &end);
	if (r <= 0) {
		if (r < 0)
			s->err = r;
		else
			s->pos += end;
		return r;
	}
	s->keep = s->pos;
	r = scan_container(s, &end,
			   kind == SPAN_UNIT_JAEGER ? "end of input inside a trace"
						    : "end of input inside resourceSpans");
	start = s->keep;
	s->keep = NO_KEEP;
	if (r)
		return r;
	r = span_parser__unit(s->p, kind, s->buf + start, end - start, &msg, &at);
	if (r == 2) {
		size_t n = fix_utf8(s->buf + start, end - start);

		if (!s->utf8_warned)
			span__warnf(s->f,
				    "line %llu: %zu bytes that are not UTF-8 read as '?' (warned "
				    "once per file)",
				    line_at(s, start), n);
		s->utf8_warned = true;
		r = span_parser__unit(s->p, kind, s->buf + start, end - start, &msg, &at);
	}
	if (r == 1 || r == 2) {
		warn_bad_unit(s, kind, start, msg ? msg : "not UTF-8", at);
		s->f->nread = nread; /* its spans are dropped */
		r = 0;
	}
	if (r < 0)
		s->err = r;
	return r;
}

static int next_in(struct scan *s, int *c, char close)
{
	*c = peek(s);
	if (*c == ',') {
		s->pos++;
		*c = peek(s);
		return 1;
	}
	if (*c == close) {
		s->pos++;
		return 0;
	}
	if (*c < -1)
		return s->err;
	return fail(s, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
}

/* Jaeger's "data" array, or a bare top-level array of traces. */
static int trace_array(struct scan *s)
{
	int c, r;

	s->pos++;
	c = peek(s);
	if (c == ']') {
		s->pos++;
		return 0;
	}
	for (;;) {
		if (c == '{') {
			r = unit(s, SPAN_UNIT_JAEGER);
		} else {
			if (c >= 0)
				span__warnf(s->f,
					    "line %llu: an element of \"data\" that is not a "
					    "trace object, skipped",
					    line_at(s, s->pos));
			r = skip_value(s, c);
		}
		if (r || (r = next_in(s, &c, ']')) <= 0)
			return r;
	}
}

/* Zipkin: a list of spans (a request of its own, its spans grouped by
 * trace with the other requests'). */
static int zipkin_list(struct scan *s)
{
	int r;

	span_parser__begin_request(s->p);
	r = unit(s, SPAN_UNIT_ZIPKIN);
	if (!r && (r = span_parser__end_request(s->p, s->off0 + s->base + s->pos)) < 0)
		s->err = r;
	return r;
}

/* A top-level array: Jaeger's traces ({"traceID", "spans"}), Zipkin v2's
 * spans ({"traceId", "id"}: /api/v2/trace/ID), or Zipkin's list of such
 * lists (/api/v2/traces). The first element's keys tell; a Zipkin list is
 * read whole. */
static int top_array(struct scan *s)
{
	size_t start = s->pos, end;
	int c, r;

	s->keep = start;
	s->pos++;
	c = peek(s);
	if (c == '[' && s->mode != MODE_JAEGER) { /* lists of spans */
		s->keep = NO_KEEP;
		s->mode = MODE_ZIPKIN;
		for (;;) {
			if (c == '[') {
				r = zipkin_list(s);
			} else {
				if (c >= 0)
					span__warnf(s->f,
						    "line %llu: an element that is not a list of "
						    "spans, skipped",
						    line_at(s, s->pos));
				r = skip_value(s, c);
			}
			if (r || (r = next_in(s, &c, ']')) <= 0)
				return r;
		}
	}
	if (c == '{' && s->mode != MODE_JAEGER) {
		size_t at = s->pos;
		bool zipkin;

		r = scan_container(s, &end, "end of input inside a value");
		if (r) {
			s->keep = NO_KEEP;
			return r;
		}
		at -= start - s->keep; /* the buffer may have moved: offsets from keep */
		start = s->keep;
		zipkin = memmem(s->buf + at, end - at, "\"traceId\"", 9) &&
			 !memmem(s->buf + at, end - at, "\"spans\"", 7);
		s->pos = start;
		if (zipkin) {
			s->mode = MODE_ZIPKIN;
			s->keep = NO_KEEP;
			return zipkin_list(s);
		}
	}
	s->keep = NO_KEEP;
	s->pos = start;
	s->mode = MODE_JAEGER; /* a bare array of Jaeger traces */
	return trace_array(s);
}

enum { KEY_OTHER, KEY_DATA, KEY_RESOURCE_SPANS };

static int key_kind(const char *k, size_t n)
{
	if (n == 4 && !memcmp(k, "data", 4))
		return KEY_DATA;
	/* Grafana Tempo writes OTLP's resourceSpans as "batches" */
	if ((n == 13 && !memcmp(k, "resourceSpans", 13)) || (n == 7 && !memcmp(k, "batches", 7)))
		return KEY_RESOURCE_SPANS;
	return KEY_OTHER;
}

/* The request as exporters write it, {"resourceSpans":[ without white
 * space, at pos. */
static bool compact_request(const struct scan *s)
{
	static const char k[] = "{\"resourceSpans\":[";

	return s->hi - s->pos >= sizeof(k) - 1 && s->mode != MODE_JAEGER &&
	       bytes_eq(s->buf + s->pos, k, sizeof(k) - 1);
}

static int top_object(struct scan *s)
{
	char key[16];
	size_t klen;
	int c, r;

	span_parser__begin_request(s->p); /* OTLP: one request per top-level object */
	if (compact_request(s)) {
		s->pos += 17; /* at the '[' */
		s->mode = MODE_OTLP;
		r = unit(s, SPAN_UNIT_OTLP);
		goto next;
	}
	s->pos++;
	c = peek(s);
	if (c == '}') {
		s->pos++;
		goto end;
	}
	for (;;) {
		int kind;

		if (c != '"')
			return c < -1 ? s->err : fail(s, "expected a key");
		if ((r = scan_string(s, key, sizeof(key), &klen)))
			return r;
		kind = klen <= sizeof(key) ? key_kind(key, klen) : KEY_OTHER;
		if (peek(s) != ':')
			return s->err ? s->err : fail(s, "expected ':' after a key");
		s->pos++;
		c = peek(s);
		if (kind == KEY_DATA && c == '[' && s->mode != MODE_OTLP) {
			s->mode = MODE_JAEGER;
			r = trace_array(s);
		} else if (kind == KEY_RESOURCE_SPANS && c == '[' && s->mode != MODE_JAEGER) {
			s->mode = MODE_OTLP;
			r = unit(s, SPAN_UNIT_OTLP);
		} else {
			r = skip_value(s, c);
		}
next:
		if (r || (r = next_in(s, &c, '}')) < 0)
			return r;
		if (!r)
			break;
	}
end:
	if (s->mode == MODE_OTLP &&
	    (r = span_parser__end_request(s->p, s->off0 + s->base + s->pos)) < 0)
		return s->err = r;
	return 0;
}

static int read_all(struct scan *s)
{
	for (;;) {
		int c = peek(s), r;

		if (c == -1)
			return 0;
		if (c < -1)
			return s->err;
		if (c == '{') {
			r = top_object(s);
		} else if (c == '[' && s->mode != MODE_OTLP) {
			r = top_array(s);
		} else {
			r = skip_value(s, c); /* any other value: allowed, not ours */
		}
		if (r)
			return r;
	}
}

struct span_input {
	struct span_file f;
	struct cp_sink sink;
	struct span_parser *p;
	uint64_t off; /* bytes of the inputs before the one being read */
	int err;      /* the sink asked to stop, or memory ran out */
};

struct span_input *span_input__new(const struct cp_sink *sink, const struct span_opts *o)
{
	struct span_input *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->sink = *sink;
	in->f = (struct span_file){
	    .name = "(input)",
	    .sink = &in->sink,
	    .overlap_tolerance = o ? o->overlap_tolerance : 0.01,
	    .exclude = o ? o->exclude_ops : NULL,
	    .nexclude = o ? o->nexclude_ops : 0,
	};
	/* a negative or NaN tolerance would make the walk skip children that end
	 * exactly at the cursor: the strict rule is 0 */
	if (!(in->f.overlap_tolerance >= 0))
		in->f.overlap_tolerance = 0;
	in->p = span_parser__new(&in->f);
	if (!in->p) {
		free(in);
		return NULL;
	}
	if (o)
		span_parser__window(in->p, o->window_bytes, o->window_ns);
	return in;
}

void span_input__free(struct span_input *in)
{
	if (!in)
		return;
	span_parser__free(in->p);
	if (in->f.tree)
		span_tree__free(&in->f);
	free(in);
}

int span_input__end(struct span_input *in)
{
	int err = in->err ? in->err : span_parser__flush(in->p);

	if (err < 0 && !in->f.ntraces)
		return err;
	return (int)(in->f.ntraces > INT32_MAX ? INT32_MAX : in->f.ntraces);
}

static int run(struct span_input *in, const char *name, int fd, const char *buf, size_t len)
{
	struct span_file *f = &in->f;
	struct scan s = {.f = f, .p = in->p, .fd = fd, .src = buf, .src_len = len, .keep = NO_KEEP};
	size_t first = SCAN_MAX_FIRST;
	struct stat st;
	bool is_file = fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode);
	uint64_t read0 = f->nread;
	int err;

	f->name = name;
	f->nwarnings = 0;
	span_parser__set_file(in->p, f);
	if (fd < 0 && len < first)
		first = len;
	else if (is_file && (size_t)st.st_size < first)
		first = st.st_size;
	/* what cannot be read again has its lines counted as it goes */
	s.count_as_dropped = fd >= 0 && !is_file;
	if (first < 2 * SCAN_MIN_READ)
		first = 2 * SCAN_MIN_READ;
	s.off0 = in->off;
	if (grow(&s, first)) {
		span__warnf(f, "out of memory");
		err = -ENOMEM;
		goto out;
	}
	/* a UTF-8 byte order mark (Windows tools, .NET's exporters) */
	while (s.hi < 3 && fill(&s) > 0)
		;
	if (s.hi >= 3 && !memcmp(s.buf, "\xef\xbb\xbf", 3))
		s.pos = 3;
	err = read_all(&s);
	if (!err && s.mode == MODE_UNKNOWN) {
		char top[96];

		describe_top(&s, top, sizeof(top));
		span__warnf(f, "%s; the top level was %s", NOT_TRACES, top);
		err = -EINVAL;
	}
	if (!err && s.nbad && f->nread == read0)
		err = -EINVAL; /* warned: every trace was malformed */
	if (!err && f->nread == read0 && !f->nwarnings)
		span__warnf(f, "no traces in it (%s)",
			    s.mode == MODE_JAEGER ? "its \"data\" is empty"
			    : s.mode == MODE_ZIPKIN ? "an empty list of spans"
						   : "no spans in its resourceSpans");
	if (s.err < 0 && s.err != -EINVAL && s.err != -EIO)
		in->err = s.err;
out:
	in->off += s.base + s.hi;
	span__warn_summary(f);
	free(s.buf);
	if (f->nread > read0)
		return (int)(f->nread - read0 > INT32_MAX ? INT32_MAX : f->nread - read0);
	return err;
}

int span_input__buffer(struct span_input *in, const char *name, const char *buf, size_t len)
{
	return run(in, name, -1, buf ? buf : "", buf ? len : 0);
}

int span_input__file(struct span_input *in, const char *path)
{
	int fd, err;

	in->f.name = path;
	in->f.nwarnings = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		span__warnf(&in->f, "cannot open: %s", strerror(errno));
		return err;
	}
	err = run(in, path, fd, NULL, 0);
	close(fd);
	return err;
}

/* One input alone: its requests, or why none. */
static int alone(const char *name, const char *buf, size_t len, const struct cp_sink *sink,
		 const struct span_opts *o)
{
	struct span_input *in = span_input__new(sink, o);
	int r, n;

	if (!in) {
		if (sink->warn)
			sink->warn(sink->ctx, "out of memory");
		return -ENOMEM;
	}
	r = buf ? span_input__buffer(in, name, buf, len) : span_input__file(in, name);
	n = span_input__end(in);
	span_input__free(in);
	if (n > 0 || r >= 0)
		return n;
	return r;
}

int span_input__analyze_buffer(const char *name, const char *buf, size_t len,
			       const struct cp_sink *sink, const struct span_opts *o)
{
	return alone(name, buf ? buf : "", buf ? len : 0, sink, o);
}

int span_input__analyze_file(const char *path, const struct cp_sink *sink,
			     const struct span_opts *o)
{
	return alone(path, NULL, 0, sink, o);
}
