// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* libFuzzer harness: the protocol parsers that name requests from payload
 * prefixes (HTTP/1.x, Redis, memcached, SQL, DNS, …), the pipelining
 * splitter, HPACK (a table carried across blocks, Huffman strings), and
 * the recorder's redaction of header blocks: what it leaves decodes to the
 * same names and the same table as what it was given. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kpath_internal.h"
#include "proto_hpack.h"
#include "proto_redact.h"

/* A redacted block decodes as the original: same fields, same table. */
static void redact_check(const uint8_t *data, size_t size)
{
	uint8_t copy[4096];
	struct hp_redact r;
	struct hpack a, b;
	struct hp_fields fa, fb;
	size_t half = size / 2;
	int ra, rb;

	if (size > sizeof(copy))
		return;
	memcpy(copy, data, size);
	hpack__redact_init(&r, true);
	hpack__init(&a, true);
	hpack__init(&b, true);
	for (int k = 0; k < 2; k++) {
		size_t at = k ? half : 0, n = k ? size - half : half;

		hpack__redact(&r, copy + at, n);
		hpack__redact_end(&r);
		ra = hpack__decode(&a, data + at, n, false, &fa);
		rb = hpack__decode(&b, copy + at, n, false, &fb);
		if (ra != rb || (!ra && (memcmp(&fa, &fb, sizeof(fa)) || a.size != b.size ||
					 a.n != b.n)))
			__builtin_trap();
	}
	hpack__free(&a);
	hpack__free(&b);
	hpack__redact_free(&r);
}

/* The input as the payloads and pieces of records of one connection's
 * writes, 200 bytes each: the recorder's redaction never reads or writes
 * outside a record, nor changes its size. */
static void redact_records(const uint8_t *data, size_t size)
{
	static struct redact *rd;
	struct cp_ev_sock *e;
	uint8_t buf[sizeof(*e) + 256];

	if (!rd)
		rd = redact__new(128);
	e = (struct cp_ev_sock *)buf;
	for (size_t at = 0; at < size; at += 200) {
		size_t n = size - at < 200 ? size - at : 200;
		const struct cp_hdr *out;

		memset(buf, 0, sizeof(buf));
		e->h.type = CP_EV_SOCK;
		e->phase = CP_PHASE_EXIT;
		e->call = CP_SOCK_WRITE;
		e->family = 2;
		e->bytes = (int64_t)n * (1 + (data[at] & 3));
		e->flags = data[at] & 1 ? CP_SOCK_F_PIECES : 0;
		e->payload_len = (uint16_t)(e->flags ? n / 2 : n);
		memcpy(e->payload, data + at, n);
		e->h.size = (uint16_t)(offsetof(struct cp_ev_sock, payload) + n);
		out = redact__record(rd, &e->h);
		if (!out || out->size != e->h.size)
			__builtin_trap();
	}
}

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
	redact_check(data, size);
	redact_records(data, size);
	return 0;
}
