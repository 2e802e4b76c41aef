/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* HPACK header-block decoding to name HTTP/2 requests from cut prefixes of
 * connections seen mid-stream: fields it cannot resolve are unknown, never
 * guessed. */
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
	/* a field the recorder keeps that naming does not use */
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
void hpack__forget(struct hpack *t);
/* Decodes one whole header block (cut: it goes on past len) into f. 0 or
 * -EINVAL. */
int hpack__decode(struct hpack *t, const uint8_t *p, size_t len, bool cut, struct hp_fields *f);
/* Huffman-decodes p into out (NUL-terminated, truncated); the full length or
 * -EINVAL. */
int hpack__huffman(const uint8_t *p, size_t len, char *out, size_t outlen);

/* One direction's header blocks rewritten in place: only the fields that name
 * and frame a request keep their values. Others keep their encoded and decoded
 * lengths (so the report's decoder stays in step) but not their bytes; what
 * cannot be parsed is redacted to the block's end. */
struct hp_redact {
	struct hpack t;
	uint8_t st;	    /* where in a representation (proto/hpack.c) */
	uint8_t prefix;	    /* bits of the integer's prefix */
	uint8_t shift;	    /* of its next byte */
	uint8_t code_bits;  /* Huffman: bits of the code being read */
	bool insert;	    /* the field goes into the dynamic table */
	bool keep_query;    /* :path's credential query values kept */
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
/* n bytes of a padded Huffman string of m same-length symbols; -EINVAL (all
 * 0xff) when none exists. */
int hpack__huffman_fill(uint8_t *p, uint32_t n, uint32_t m);

#endif /* CRITPATH_PROTO_HPACK_H */
