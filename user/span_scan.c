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
 * found 64 bytes at a time (span_blocks.c). A skipped value is checked for
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

enum { MODE_UNKNOWN = 0, MODE_JAEGER, MODE_OTLP };

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

/* The outer levels are damaged, or the input ended inside a value: the file
 * ends here. at is an index in buf. */
static int fail_at(struct scan *s, size_t at, const char *what)
{
	const char *tid = span_parser__trace_id(s->p);

	if (s->mode == MODE_UNKNOWN)
		span__warnf(s->f, "not a Jaeger or OTLP JSON file (%s at byte %llu)", what,
			    s->base + (unsigned long long)at);
	else
		span__warnf(s->f,
			    "malformed JSON at line %llu, byte %llu: %s; %u traces before it "
			    "analysed, the one in progress (trace %s, %u spans read) skipped",
			    line_at(s, at), s->base + (unsigned long long)at, what, s->f->ntraces,
			    tid ? tid : "id not yet read", span_parser__nspans(s->p));
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

	s->pos++;
	for (;;) {
		while (s->pos < s->hi) {
			unsigned char c = s->buf[s->pos];

			if (esc) {
				esc = false;
			} else if (c == '\\') {
				esc = true;
			} else if (c == '"') {
				s->pos++;
				*len = n;
				return 0;
			} else if (c < 0x20) {
				return fail(s, "control character in a string");
			}
			if (n < cap)
				out[n] = c;
			n++;
			s->pos++;
		}
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

/* A unit at pos: cut it out, parse it, drop it. */
static int unit(struct scan *s, enum span_unit kind)
{
	const char *msg = NULL;
	size_t end, start, at = 0;
	int r;

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

static int top_object(struct scan *s)
{
	char key[16];
	size_t klen;
	int c, r;

	span_parser__begin_request(s->p); /* OTLP: one request per top-level object */
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
		if (r || (r = next_in(s, &c, '}')) < 0)
			return r;
		if (!r)
			break;
	}
end:
	if (s->mode == MODE_OTLP && (r = span_parser__end_request(s->p)) < 0)
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
			s->mode = MODE_JAEGER; /* a bare array of Jaeger traces */
			r = trace_array(s);
		} else {
			r = skip_value(s, c); /* any other value: allowed, not ours */
		}
		if (r)
			return r;
	}
}

static int run(const char *name, int fd, const char *buf, size_t len, const struct span_sink *sink,
	       const struct span_opts *o)
{
	struct span_file f = {
	    .name = name,
	    .sink = sink,
	    .overlap_tolerance = o ? o->overlap_tolerance : 0.01,
	};
	struct scan s = {.f = &f, .fd = fd, .src = buf, .src_len = len, .keep = NO_KEEP};
	size_t first = SCAN_MAX_FIRST;
	struct stat st;
	bool is_file = fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode);
	int err;

	/* a negative or NaN tolerance would make the walk skip children that end
	 * exactly at the cursor: the strict rule is 0 */
	if (!(f.overlap_tolerance >= 0))
		f.overlap_tolerance = 0;
	if (fd < 0 && len < first)
		first = len;
	else if (is_file && (size_t)st.st_size < first)
		first = st.st_size;
	/* what cannot be read again has its lines counted as it goes */
	s.count_as_dropped = fd >= 0 && !is_file;
	if (first < 2 * SCAN_MIN_READ)
		first = 2 * SCAN_MIN_READ;
	s.p = span_parser__new(&f);
	if (!s.p || grow(&s, first)) {
		span__warnf(&f, "out of memory");
		err = -ENOMEM;
		goto out;
	}
	err = read_all(&s);
	if (!err && s.mode == MODE_UNKNOWN) {
		span__warnf(&f, "not a Jaeger or OTLP JSON file (no \"data\" or "
				"\"resourceSpans\" at the top level)");
		err = -EINVAL;
	}
	if (!err && s.nbad && !f.ntraces)
		err = -EINVAL; /* warned: every trace was malformed */
out:
	span__warn_summary(&f);
	span_parser__free(s.p);
	free(s.buf);
	if (f.tree)
		span_tree__free(&f);
	/* a damaged file still counts for the traces read before the damage */
	if (f.ntraces)
		return (int)f.ntraces;
	return err;
}

int span_input__analyze_buffer(const char *name, const char *buf, size_t len,
			       const struct span_sink *sink, const struct span_opts *o)
{
	return run(name, -1, buf ? buf : "", buf ? len : 0, sink, o);
}

int span_input__analyze_file(const char *path, const struct span_sink *sink,
			     const struct span_opts *o)
{
	struct span_file f = {.name = path, .sink = sink};
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		span__warnf(&f, "cannot open: %s", strerror(errno));
		return err;
	}
	err = run(path, fd, NULL, 0, sink, o);
	close(fd);
	return err;
}
