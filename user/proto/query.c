// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Query values that carry credentials, redacted before a target is shown:
 * OpenTelemetry's url.query rule (AWSAccessKeyId, Signature, sig,
 * X-Goog-Signature) and the usual token and password keys. */
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

static bool secret_key(const char *k, size_t n)
{
	for (size_t i = 0; i < sizeof(secret_keys) / sizeof(secret_keys[0]); i++)
		if (strlen(secret_keys[i]) == n && !strncasecmp(secret_keys[i], k, n))
			return true;
	return false;
}

size_t proto__target_redacted(const char *target, char *buf, size_t len)
{
	const char *q = strchr(target, '?'), *p;
	size_t n = 0;

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
	PUT(target, q ? (size_t)(q - target) + 1 : strlen(target));
	for (p = q ? q + 1 : NULL; p && *p;) {
		const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));

		if (eq && secret_key(p, (size_t)(eq - p))) {
			PUT(p, (size_t)(eq - p) + 1);
			PUT("REDACTED", 8);
		} else {
			PUT(p, (size_t)(end - p));
		}
		if (amp)
			PUT("&", 1);
		p = amp ? amp + 1 : NULL;
	}
#undef PUT
	buf[n] = '\0';
	return n;
}
