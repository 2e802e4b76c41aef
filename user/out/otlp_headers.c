// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* OTEL_EXPORTER_OTLP_HEADERS and its _TRACES_ form: the OpenTelemetry
 * specification's W3C Baggage-like list "k1=v1,k2=v2", keys and values
 * trimmed, values percent-decoded. An entry that cannot be a header is an
 * error, not skipped: a header left out is most often the one that
 * authenticates, and every export would then fail. The messages never show a
 * value (it may be a secret), nor a key that is not a valid one (it may be a
 * secret given without its key). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "otlp.h"

/* RFC 9110's tchar */
static bool tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void trim(const char **s, const char **end)
{
	while (*s < *end && (**s == ' ' || **s == '\t'))
		(*s)++;
	while (*end > *s && ((*end)[-1] == ' ' || (*end)[-1] == '\t'))
		(*end)--;
}

/* [s, end) percent-decoded into a new string; NULL with *why on a bad escape
 * or a byte a header value cannot carry (CR and LF would start a header of
 * the value's choosing) */
static char *decode(const char *s, const char *end, const char **why)
{
	char *out = malloc((size_t)(end - s) + 1), *o = out;

	if (!out) {
		*why = NULL;
		return NULL;
	}
	while (s < end) {
		unsigned char c = (unsigned char)*s++;

		if (c == '%') {
			int hi = s < end ? hexval((unsigned char)s[0]) : -1;
			int lo = s + 1 < end ? hexval((unsigned char)s[1]) : -1;

			if (hi < 0 || lo < 0) {
				*why = "a '%' not followed by two hex digits";
				free(out);
				return NULL;
			}
			c = (unsigned char)(hi << 4 | lo);
			s += 2;
		}
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			*why = "a control character (CR, LF, NUL, ...) once percent-decoded";
			free(out);
			return NULL;
		}
		*o++ = (char)c;
	}
	*o = '\0';
	return out;
}

/* key replaces a header of the same name (any case), or is added; takes key
 * and value */
static int put(struct otlp_headers *h, char *key, char *value)
{
	struct otlp_header *nh;

	for (size_t i = 0; i < h->n; i++)
		if (!strcasecmp(h->h[i].key, key)) {
			free(h->h[i].key);
			free(h->h[i].value);
			h->h[i] = (struct otlp_header){key, value};
			return 0;
		}
	nh = realloc(h->h, (h->n + 1) * sizeof(*nh));
	if (!nh) {
		free(key);
		free(value);
		return -ENOMEM;
	}
	h->h = nh;
	h->h[h->n++] = (struct otlp_header){key, value};
	return 0;
}

/* One entry [s, end), the idx-th: 0, -EINVAL with why, or -ENOMEM */
static int entry(struct otlp_headers *h, const char *s, const char *end, int idx, char *why,
		 size_t whyn)
{
	const char *eq = memchr(s, '=', (size_t)(end - s)), *ks = s, *ke = eq, *bad = NULL;
	char *key, *value;

	if (!eq) {
		snprintf(why, whyn, "entry %d has no '=' (the form is key=value,key2=value2)", idx);
		return -EINVAL;
	}
	trim(&ks, &ke);
	if (ks == ke) {
		snprintf(why, whyn, "entry %d has an empty key", idx);
		return -EINVAL;
	}
	for (const char *k = ks; k < ke; k++)
		if (!tchar((unsigned char)*k)) {
			snprintf(why, whyn,
				 "entry %d: its key has a character not allowed in an HTTP header "
				 "name (character %d of the key)",
				 idx, (int)(k - ks) + 1);
			return -EINVAL;
		}
	s = eq + 1;
	trim(&s, &end);
	key = strndup(ks, (size_t)(ke - ks));
	value = key ? decode(s, end, &bad) : NULL;
	if (!value) {
		if (key && bad)
			snprintf(why, whyn, "entry %d (%s): its value has %s", idx, key, bad);
		free(key);
		return key && bad ? -EINVAL : -ENOMEM;
	}
	return put(h, key, value);
}

int otlp_headers__add(struct otlp_headers *h, const char *s, char *why, size_t whyn)
{
	int idx = 0, err;

	for (const char *p = s; p && *p;) {
		const char *c = strchr(p, ','), *end = c ? c : p + strlen(p), *b = p, *e = end;

		idx++;
		trim(&b, &e);
		if (b < e && (err = entry(h, b, e, idx, why, whyn)))
			return err;
		p = c ? c + 1 : end;
	}
	return 0;
}

void otlp_headers__free(struct otlp_headers *h)
{
	for (size_t i = 0; i < h->n; i++) {
		free(h->h[i].key);
		free(h->h[i].value);
	}
	free(h->h);
	h->h = NULL;
	h->n = 0;
}
