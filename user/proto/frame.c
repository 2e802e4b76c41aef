// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Pipelining (DESIGN.md 5): several requests in one read, found by each
 * protocol's framing (RESP, memcached, HTTP/1.x with Content-Length). Only the
 * prefix is known: *beyond says the read went on past what could be framed. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto.h"

#define FR_CUT (-1)	/* the message goes on past the prefix */
#define FR_UNKNOWN (-2) /* not this protocol's framing: stop splitting */

/* The decimal number at p[*i] up to "\r\n"; FR_CUT / FR_UNKNOWN. */
static int64_t num_crlf(const uint8_t *p, size_t len, size_t *i)
{
	int64_t v = 0;
	size_t s = *i;

	if (*i < len && p[*i] == '-')
		return FR_UNKNOWN;
	while (*i < len && isdigit(p[*i])) {
		if (v > (1ll << 40))
			return FR_UNKNOWN;
		v = v * 10 + (p[*i] - '0');
		(*i)++;
	}
	if (*i == len)
		return FR_CUT;
	if (*i == s || p[*i] != '\r')
		return FR_UNKNOWN;
	if (*i + 1 == len)
		return FR_CUT;
	if (p[*i + 1] != '\n')
		return FR_UNKNOWN;
	*i += 2;
	return v;
}

/* One RESP multibulk command; *name_end: where its command name ends, 0 past
 * the prefix. */
static int64_t resp_len(const uint8_t *p, size_t len, size_t *name_end)
{
	size_t i = 1;
	int64_t n = num_crlf(p, len, &i);

	*name_end = 0;
	if (n < 0)
		return n;
	if (n == 0 || n > 1 << 20)
		return FR_UNKNOWN;
	for (int64_t k = 0; k < n; k++) {
		int64_t b;

		if (i >= len)
			return FR_CUT;
		if (p[i] != '$')
			return FR_UNKNOWN;
		i++;
		b = num_crlf(p, len, &i);
		if (b < 0)
			return b;
		if (!k && i + (uint64_t)b <= len)
			*name_end = i + (size_t)b;
		if (i + (uint64_t)b + 2 > len)
			return FR_CUT;
		i += (size_t)b;
		if (p[i] != '\r' || p[i + 1] != '\n')
			return FR_UNKNOWN;
		i += 2;
	}
	return (int64_t)i;
}

/* Up to and including the line's '\n'; FR_CUT without one. */
static int64_t line_end(const uint8_t *p, size_t len)
{
	const uint8_t *nl = memchr(p, '\n', len);

	return nl ? nl - p + 1 : FR_CUT;
}

/* The first word is whole: followed by a space or the line's end. */
static size_t word_end(const uint8_t *p, size_t len)
{
	size_t i = 0;

	while (i < len && p[i] != ' ' && p[i] != '\r' && p[i] != '\n')
		i++;
	return i < len ? i : 0;
}

/* The n-th space-separated token of the line p[0..ll) as a number, or -1. */
static int64_t token_num(const uint8_t *p, size_t ll, int n)
{
	size_t i = 0;
	int64_t v = 0;

	for (int k = 0; k < n; k++) {
		while (i < ll && p[i] != ' ')
			i++;
		while (i < ll && p[i] == ' ')
			i++;
	}
	if (i >= ll || !isdigit(p[i]))
		return -1;
	while (i < ll && isdigit(p[i]) && v < (1ll << 40))
		v = v * 10 + (p[i++] - '0');
	return v;
}

static bool is_word(const uint8_t *p, size_t n, const char *w)
{
	return strlen(w) == n && !memcmp(p, w, n);
}

/* memcached text: the command line, and the data block of storage commands. */
static int64_t mc_len(const uint8_t *p, size_t len, size_t *name_end)
{
	int64_t ll = line_end(p, len), data = -1;
	size_t w;

	*name_end = word_end(p, len);
	if (ll < 0)
		return ll;
	w = *name_end;
	if (is_word(p, w, "set") || is_word(p, w, "add") || is_word(p, w, "replace") ||
	    is_word(p, w, "append") || is_word(p, w, "prepend") || is_word(p, w, "cas"))
		data = token_num(p, (size_t)ll, 4); /* <cmd> <key> <flags> <exptime> <bytes> */
	else if (is_word(p, w, "ms"))
		data = token_num(p, (size_t)ll, 2); /* ms <key> <datalen> <flags>* */
	else
		return ll;
	if (data < 0)
		return FR_UNKNOWN;
	if ((uint64_t)ll + (uint64_t)data + 2 > len)
		return FR_CUT;
	if (p[ll + data] != '\r' || p[ll + data + 1] != '\n')
		return FR_UNKNOWN; /* the data block does not end where it says */
	return ll + data + 2;
}

/* A header's value as a number (name without the colon), or -1. */
static int64_t http_header_num(const uint8_t *p, size_t hl, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i + n + 1 < hl; i++) {
		if ((i == 0 || p[i - 1] != '\n') || strncasecmp((const char *)p + i, name, n) ||
		    p[i + n] != ':')
			continue;
		i += n + 1;
		while (i < hl && p[i] == ' ')
			i++;
		return token_num(p + i, hl - i, 0);
	}
	return -1;
}

static bool http_chunked(const uint8_t *p, size_t hl)
{
	static const char te[] = "transfer-encoding:";

	for (size_t i = 1; i + sizeof(te) < hl; i++)
		if (p[i - 1] == '\n' && !strncasecmp((const char *)p + i, te, sizeof(te) - 1))
			return true;
	return false;
}

/* Past the empty line that ends the headers ("\r\n\r\n" or "\n\n"), or 0. */
static size_t http_head_end(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (p[i] != '\n')
			continue;
		if (p[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && p[i + 1] == '\r' && p[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* HTTP/1.x: request line and headers, then a Content-Length body. */
static int64_t http_len(const uint8_t *p, size_t len, size_t *name_end)
{
	const uint8_t *sp1 = memchr(p, ' ', len), *sp2 = NULL;
	size_t hl = http_head_end(p, len);
	int64_t body;

	/* the name is METHOD and target: whole once the space after the target is in */
	if (sp1)
		sp2 = memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - p));
	*name_end = sp2 ? (size_t)(sp2 - p) : 0;
	if (!hl)
		return FR_CUT;
	if (http_chunked(p, hl))
		return FR_UNKNOWN;
	body = http_header_num(p, hl, "content-length");
	if (body < 0)
		return (int64_t)hl;
	if ((uint64_t)hl + (uint64_t)body > len)
		return FR_CUT;
	return (int64_t)hl + body;
}

/* The length of the message at p of protocol pr; *name_end as above. */
static int64_t msg_len(enum kp_proto pr, const uint8_t *p, size_t len, size_t *name_end)
{
	switch (pr) {
	case KP_PROTO_RESP:
		if (p[0] == '*')
			return resp_len(p, len, name_end);
		*name_end = word_end(p, len); /* inline command */
		return line_end(p, len);
	case KP_PROTO_MEMCACHED:
		return mc_len(p, len, name_end);
	case KP_PROTO_HTTP:
		return http_len(p, len, name_end);
	default:
		*name_end = 0;
		return FR_UNKNOWN;
	}
}

uint32_t proto__split(enum kp_proto pr, const uint8_t *p, size_t len, uint64_t total,
		      struct proto_msg *m, uint32_t max, bool *beyond)
{
	char name[KP_NAME_LEN];
	uint32_t n = 0;
	size_t o = 0;

	*beyond = false;
	if (!p || !len || !max)
		return 0;
	while (o < len && n < max) {
		size_t name_end;
		int64_t l = msg_len(pr, p + o, len - o, &name_end);

		if (!n && l < 0) {
			/* one request (or one we cannot frame): all of the read */
			m[0].off = 0;
			m[0].len = (uint32_t)len;
			return 1;
		}
		if (n && l == FR_CUT) {
			/* a request after the first, cut by the prefix: counted
			 * when it can be named; what follows it is not seen */
			if (name_end &&
			    proto__request_name(p + o, len - o, name, sizeof(name)) == pr) {
				m[n].off = (uint32_t)o;
				m[n++].len = (uint32_t)(len - o);
			}
			*beyond = total > len;
			return n;
		}
		if (n && (l == FR_UNKNOWN ||
			  proto__request_name(p + o, len - o, name, sizeof(name)) != pr))
			return n; /* not another request: the rest is the last one's */
		m[n].off = (uint32_t)o;
		m[n++].len = (uint32_t)l;
		o += (size_t)l;
	}
	/* bytes after the last whole request, past what the prefix shows */
	*beyond = o < total && (o == len || n == max);
	return n;
}
