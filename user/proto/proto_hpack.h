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
	HP_K_CONTENT_TYPE,
	HP_K_TRACEPARENT,
	HP_K_TRACESTATE,
	/* a field whose value the recorder keeps (hpack__redact) that
	 * naming does not use: :scheme, content-length, grpc-status, ... */
	HP_K_KEPT
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
	char traceparent[HP_VAL_LEN], tracestate[HP_VAL_LEN]; /* W3C trace context */
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

/*
 * One direction's header blocks rewritten in place as they pass, so that a
 * recording keeps the values of only the fields that name and frame a
 * request (HP_K_* other than HP_K_OTHER: the pseudo-headers, content-type,
 * content-length, grpc-status, traceparent, tracestate). Every other value
 * keeps its encoded length and its decoded length (the dynamic table's
 * accounting, so that the report's decoder stays in step) but not its
 * bytes: a raw one becomes '*'s, a Huffman one a Huffman string of as many
 * filler symbols; one cut between two calls (its decoded length not known
 * at its start) becomes 0xff bytes, which no valid Huffman string begins
 * with, ending in three of 7 bits: the symbols through the third last byte
 * (high 7 bits, low 7 bits), then how many the last two completed.
 * Literal names are kept. What cannot be parsed (bytes not seen, a
 * malformed block, a name from a table entry not known) is redacted:
 * 0xff to the block's end, values of unknown names as above.
 */
struct hp_redact {
	struct hpack t;
	uint8_t st;	    /* where in a representation (proto/hpack.c) */
	uint8_t prefix;	    /* bits of the integer's prefix */
	uint8_t shift;	    /* of its next byte */
	uint8_t code_bits;  /* Huffman: bits of the code being read */
	bool insert;	    /* the field goes into the dynamic table */
	bool name_next;	    /* the string to come is a literal name */
	bool huff;	    /* the string is Huffman-coded */
	bool known, keep;   /* the field's name is known; its value is kept */
	bool whole, bad;    /* the value is rewritten whole; its Huffman is invalid */
	uint8_t key;	    /* enum hp_key of the name */
	uint32_t ival;	    /* the integer read */
	uint32_t slen, sat; /* the string's length, and bytes of it passed */
	uint32_t name_len;  /* the name's decoded length */
	uint32_t syms;	    /* Huffman symbols decoded so far */
	uint32_t code;
	uint32_t mark;	    /* symbols through a split value's third last byte */
	uint8_t name[32];   /* a literal name's first bytes, as encoded */
	uint64_t redacted;  /* values redacted */
};

void hpack__redact_init(struct hp_redact *r, bool from_start);
void hpack__redact_free(struct hp_redact *r);
/* The next n bytes of the block, rewritten. */
void hpack__redact(struct hp_redact *r, uint8_t *p, size_t n);
/* The block's bytes from here to its end were not seen. */
void hpack__redact_gap(struct hp_redact *r);
/* The block ended (END_HEADERS). */
void hpack__redact_end(struct hp_redact *r);
/* Bytes of the direction were not seen (or a new connection may have
 * begun): the table is known only from here on. */
void hpack__redact_forget(struct hp_redact *r);
/* The n bytes at p a Huffman string of m symbols of the same length code,
 * padded as RFC 7541 5.2 says; 0, or -EINVAL when no such string exists
 * (all 0xff then). */
int hpack__huffman_fill(uint8_t *p, uint32_t n, uint32_t m);

#endif /* CRITPATH_PROTO_HPACK_H */
