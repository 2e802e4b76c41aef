/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * HPACK (RFC 7541) header-block decoding, to name HTTP/2 requests from the
 * payload prefixes the recorder keeps. A prefix is often cut short and a
 * connection is often seen mid-stream, so the decoder tracks which part of
 * the peer's dynamic table it really knows and reports a field it cannot
 * resolve as unknown instead of guessing.
 */
#ifndef CRITPATH_PROTO_HPACK_H
#define CRITPATH_PROTO_HPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HP_VAL_LEN 64 /* values kept (longer ones truncated, their size still counted) */

enum hp_key {
	HP_K_OTHER = 0,
	HP_K_METHOD,
	HP_K_PATH,
	HP_K_STATUS,
	HP_K_AUTHORITY,
	HP_K_CONTENT_TYPE
};

struct hp_entry {
	uint32_t size;	   /* RFC 7541 4.1: name length + value length + 32 */
	uint32_t name_len; /* for an insertion that names it by its index */
	uint8_t key;	   /* enum hp_key of its name */
	/* its value (NUL-terminated, truncated) when key != HP_K_OTHER, else "" */
	char val[HP_VAL_LEN];
};

/* One direction's dynamic table, as the decoder at that end holds it. */
struct hpack {
	struct hp_entry *ent;  /* a ring, grown on demand (malloc/realloc) */
	uint32_t cap, head, n; /* n known entries, newest first */
	/* sum of the known entries' sizes; the table's limit (4096 at start) */
	uint32_t size, max;
	bool partial; /* entries never seen may lie behind the known ones */
};

struct hp_fields {
	char method[16], path[HP_VAL_LEN], authority[HP_VAL_LEN], content_type[HP_VAL_LEN];
	int status;   /* :status, 0 = not found */
	bool unknown; /* a field referred to a table entry not known (partial table) */
};

/* from_start false: partial from the start (a connection seen mid-stream) */
void hpack__init(struct hpack *t, bool from_start);
void hpack__free(struct hpack *t);
/* Bytes of the direction were not seen: the blocks in them may have added
 * entries, so none is known any more (empty, partial). */
void hpack__forget(struct hpack *t);
/* Decodes one whole header block p[0..len) (HEADERS + CONTINUATION fragments joined). cut: the
 * block goes on past len (only its first len bytes were captured). Fills f (zeroed first). Returns
 * 0, or -EINVAL on a malformed block. */
int hpack__decode(struct hpack *t, const uint8_t *p, size_t len, bool cut, struct hp_fields *f);
/* Huffman-decodes p[0..len) (RFC 7541 5.2, Appendix B) into out, NUL-terminated, truncated to
 * outlen - 1; returns the full decoded length (even if truncated), or -EINVAL (EOS in the data,
 * padding longer than 7 bits or not all ones). */
int hpack__huffman(const uint8_t *p, size_t len, char *out, size_t outlen);

#endif /* CRITPATH_PROTO_HPACK_H */
