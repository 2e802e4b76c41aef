// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "util.h"

#define SAFE_RING 8

static bool is_c1(const unsigned char *u, size_t k)
{
	return k == 2 && u[0] == 0xc2 && u[1] >= 0x80 && u[1] <= 0x9f;
}

/* The bytes s[0..n) need escaping */
static bool unsafe(const unsigned char *u, size_t n)
{
	for (size_t i = 0, k; i < n; i += k) {
		if (u[i] >= 0x20 && u[i] < 0x7f) {
			k = 1;
			continue;
		}
		k = u[i] < 0x80 ? 0 : utf8__seq(u + i, n - i);
		if (!k || is_c1(u + i, k))
			return true;
	}
	return false;
}

const char *text__safe(const char *s)
{
	static __thread struct {
		char *p;
		size_t cap;
	} ring[SAFE_RING];
	static __thread unsigned next;
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t n, o = 0;
	char *out;

	if (!s)
		return s;
	n = strlen(s);
	if (!unsafe(u, n))
		return s;
	next = (next + 1) % SAFE_RING;
	if (ring[next].cap < 6 * n + 1) {
		char *p = realloc(ring[next].p, 6 * n + 1);

		if (!p)
			return "?";
		ring[next].p = p;
		ring[next].cap = 6 * n + 1;
	}
	out = ring[next].p;
	for (size_t i = 0, k; i < n; i += k) {
		k = u[i] >= 0x20 && u[i] < 0x7f ? 1 : u[i] < 0x80 ? 0 : utf8__seq(u + i, n - i);
		if (k && !is_c1(u + i, k)) {
			memcpy(out + o, u + i, k);
			o += k;
		} else if (k) {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = hex[u[i + 1] >> 4];
			out[o + 5] = hex[u[i + 1] & 15];
			o += 6;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[u[i] >> 4];
			out[o++] = hex[u[i] & 15];
			k = 1;
		}
	}
	out[o] = '\0';
	return out;
}

static void vmsg(const char *cmd, const char *level, const char *fmt, va_list ap)
{
	char buf[1024], *line = buf;
	va_list aq;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(buf, sizeof(buf), fmt, aq);
	va_end(aq);
	if (n >= (int)sizeof(buf) && !(line = malloc((size_t)n + 1)))
		line = buf; /* cut */
	else if (line != buf)
		vsnprintf(line, (size_t)n + 1, fmt, ap);
	/* one buffered line: a message is not interleaved with another thread's */
	flockfile(stderr);
	fprintf(stderr, "critpath%s%s: %s%s\n", cmd ? " " : "", cmd ? cmd : "", level,
		text__safe(line));
	funlockfile(stderr);
	if (line != buf)
		free(line);
}

void cp_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(cmd, "", fmt, ap);
	va_end(ap);
}

void cp_warn(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(cmd, "warning: ", fmt, ap);
	va_end(ap);
}
