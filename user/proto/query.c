// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Query values that carry credentials, redacted wherever a target leaves
 * the process (text, JSON, OTLP's url.query) and, in place, in recordings:
 * OpenTelemetry's url.query rule (AWSAccessKeyId, Signature, sig,
 * X-Goog-Signature), the usual token and password keys, and the keys of
 * --redact-query. A key matches whole, case-insensitively. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "proto.h"

static const char *const secret_keys[] = {
    "AWSAccessKeyId", "Signature",    "sig",	  "X-Goog-Signature", "X-Amz-Signature",
    "X-Amz-Credential", "X-Amz-Security-Token", "token", "access_token",	"refresh_token",
    "id_token",	      "api_key",      "apikey",	  "password",	      "passwd",
    "secret",	      "client_secret", "auth",	  "key",
};
static const char *user_keys[PROTO_MAX_QUERY_KEYS];
static int nuser_keys;

int proto__redact_query_add(const char *key)
{
	if (!key || !*key || strpbrk(key, "&=?#"))
		return -EINVAL;
	if (nuser_keys == PROTO_MAX_QUERY_KEYS)
		return -E2BIG;
	user_keys[nuser_keys++] = key;
	return 0;
}

static bool secret_key(const char *k, size_t n)
{
	for (size_t i = 0; i < sizeof(secret_keys) / sizeof(secret_keys[0]); i++)
		if (strlen(secret_keys[i]) == n && !strncasecmp(secret_keys[i], k, n))
			return true;
	for (int i = 0; i < nuser_keys; i++)
		if (strlen(user_keys[i]) == n && !strncasecmp(user_keys[i], k, n))
			return true;
	return false;
}

uint32_t proto__query_secrets(const char *t, size_t n, uint32_t (*spans)[2], uint32_t max)
{
	const char *q = memchr(t, '?', n), *e = t + n, *p;
	uint32_t k = 0;

	for (p = q ? q + 1 : NULL; p && p < e;) {
		const char *amp = memchr(p, '&', (size_t)(e - p)), *end = amp ? amp : e;
		const char *eq = memchr(p, '=', (size_t)(end - p));

		if (eq && eq + 1 < end && secret_key(p, (size_t)(eq - p)) && k < max) {
			spans[k][0] = (uint32_t)(eq + 1 - t);
			spans[k][1] = (uint32_t)(end - t);
			k++;
		}
		p = amp ? amp + 1 : NULL;
	}
	return k;
}

size_t proto__target_redacted(const char *target, char *buf, size_t len)
{
	uint32_t sp[32][2], ns, at = 0;
	size_t n = 0, tl = strlen(target);

	if (!len)
		return 0;
#define PUT(s, l)                                                                                  \
	do {                                                                                       \
		size_t l_ = (l);                                                                   \
		if (n + l_ >= len)                                                                 \
			l_ = len - 1 - n;                                                          \
		memcpy(buf + n, (s), l_);                                                          \
		n += l_;                                                                           \
	} while (0)
	ns = proto__query_secrets(target, tl, sp, 32);
	for (uint32_t i = 0; i < ns; i++) {
		PUT(target + at, sp[i][0] - at);
		PUT("REDACTED", 8);
		at = sp[i][1];
	}
	PUT(target + at, tl - at);
#undef PUT
	buf[n] = '\0';
	return n;
}
