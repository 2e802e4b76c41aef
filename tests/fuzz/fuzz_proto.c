// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* libFuzzer harness: the protocol parsers that name requests from payload
 * prefixes (HTTP/1.x, Redis, memcached, SQL, DNS, …), the pipelining
 * splitter, and HPACK (a table carried across blocks, Huffman strings). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kpath_internal.h"
#include "proto_hpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[KP_NAME_LEN], out[64];
	struct hpack t;
	struct hp_fields f;
	size_t half = size / 2;

	(void)proto__request_name(data, size, name, sizeof(name));
	if (strnlen(name, sizeof(name)) == sizeof(name))
		__builtin_trap(); /* not terminated */
	(void)proto__http_status(data, size);
	(void)hpack__huffman(data, size, out, sizeof(out));
	if (strnlen(out, sizeof(out)) == sizeof(out))
		__builtin_trap();
	/* two header blocks on one table: the first's entries used by the second */
	hpack__init(&t, size && data[0] & 1);
	(void)hpack__decode(&t, data, half, false, &f);
	(void)hpack__decode(&t, data + half, size - half, size > 64, &f);
	hpack__free(&t);
	return 0;
}
