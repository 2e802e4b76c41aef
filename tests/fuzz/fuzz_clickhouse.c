// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The ClickHouse client's readers on arbitrary bytes: a clickhouse:// URL
 * (the input's first line), then the rest as a TabSeparated answer, every
 * field read as a String, as numbers and as an Array. What is read must stay
 * inside the answer, and an unescaped field no longer than it was. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clickhouse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t ulen = nl ? (size_t)(nl - data) : size;
	struct ch_result r = {0};
	struct ch_url u;
	char url[512], err[256];

	if (ulen < sizeof(url)) {
		memcpy(url, data, ulen);
		url[ulen] = '\0';
		if (!ch_url__parse(url, &u, err, sizeof(err)) &&
		    (!u.host[0] || !u.db[0] || !u.port || u.port > 65535))
			abort(); /* accepted without a host, database or port */
	}
	if (!nl)
		return 0;
	r.len = size - ulen - 1;
	r.body = malloc(r.len + 1);
	if (!r.body)
		return 0;
	memcpy(r.body, nl + 1, r.len);
	r.body[r.len] = '\0';
	while (ch_result__row(&r)) {
		for (uint32_t i = 0; i < r.nfields; i++) {
			size_t was = r.field_len[i], n;
			char *copy = strdup(r.field[i]), *p = copy, *item;
			uint64_t v;
			int64_t s;
			const char *str;

			ch_result__u64(&r, i, &v);
			ch_result__i64(&r, i, &s);
			while (p && ch_array__next(&p, &item, &n))
				if (strlen(item) > n)
					abort(); /* an item's length says less than it holds */
			free(copy);
			str = ch_result__str(&r, i, &n);
			if (str && n > was)
				abort(); /* unescaping never lengthens */
		}
	}
	ch_result__free(&r);
	return 0;
}
