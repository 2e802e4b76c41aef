// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* HPACK (RFC 7541) decoded far enough to name an HTTP/2 request. The dynamic
 * table is known as "the newest n entries; older may exist" (eviction keeps
 * that exact); an insertion of unknown size resets it to empty and partial. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "proto_hpack.h"

_Static_assert(HP_VAL_LEN >= KP_TRACESTATE_LEN, "a tracestate field holds what a request keeps");

#define HP_ENTRY_OVERHEAD 32	 /* RFC 7541 4.1 */
#define HP_MAX_TABLE (4096 * 16) /* larger size updates are taken as garbage, not HPACK */
#define HP_STATIC_N 61
#define HP_SHORT 1 /* internal: the representation runs past the captured bytes */

/* RFC 7541 Appendix B's code is canonical: the bytes of each code length, in
 * order, are the whole table. */
/* sizeof, not strlen: the 13-bit string holds byte 0 */
/* clang-format off */
#define SYMS(s) {(s), sizeof(s) - 1}
/* clang-format on */
static const struct {
	const char *sym;
	uint8_t n;
} huff_len[] = {
    [5] = SYMS("012aceiost"),
    [6] = SYMS(" %-./3456789=A_bdfghlmnpru"),
    [7] = SYMS(":BCDEFGHIJKLMNOPQRSTUVWYjkqvwxyz"),
    [8] = SYMS("&*,;XZ"),
    [10] = SYMS("!\"()?"),
    [11] = SYMS("'+|"),
    [12] = SYMS("#>"),
    [13] = SYMS("\x00$@[]~"),
    [14] = SYMS("^}"),
    [15] = SYMS("<`{"),
    [19] = SYMS("\\\xc3\xd0"),
    [20] = SYMS("\x80\x82\x83\xa2\xb8\xc2\xe0\xe2"),
    [21] = SYMS("\x99\xa1\xa7\xac\xb0\xb1\xb3\xd1\xd8\xd9\xe3\xe5\xe6"),
    [22] = SYMS("\x81\x84\x85\x86\x88\x92\x9a\x9c\xa0\xa3\xa4\xa9\xaa\xad\xb2\xb5\xb9\xba\xbb\xbd"
		"\xbe\xc4\xc6\xe4\xe8\xe9"),
    [23] = SYMS("\x01\x87\x89\x8a\x8b\x8c\x8d\x8f\x93\x95\x96\x97\x98\x9b\x9d\x9e\xa5\xa6\xa8\xae"
		"\xaf\xb4\xb6\xb7\xbc\xbf\xc5\xe7\xef"),
    [24] = SYMS("\x09\x8e\x90\x91\x94\x9f\xab\xce\xd7\xe1\xec\xed"),
    [25] = SYMS("\xc7\xcf\xea\xeb"),
    [26] = SYMS("\xc0\xc1\xc8\xc9\xca\xcd\xd2\xd5\xda\xdb\xee\xf0\xf2\xf3\xff"),
    [27] = SYMS("\xcb\xcc\xd3\xd4\xd6\xdd\xde\xdf\xf1\xf4\xf5\xf6\xf7\xf8\xfa\xfb\xfc\xfd\xfe"),
    [28] = SYMS("\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11\x12\x13\x14\x15\x17\x18\x19"
		"\x1a\x1b\x1c\x1d\x1e\x1f\x7f\xdc\xf9"),
    [30] = SYMS("\x0a\x0d\x16"), /* then EOS */
};

#define HUFF_MAX_BITS 30
_Static_assert(sizeof(huff_len) / sizeof(huff_len[0]) == HUFF_MAX_BITS + 1, "code lengths");

static const char *const key_names[] = {
    [HP_K_METHOD] = ":method",
    [HP_K_PATH] = ":path",
    [HP_K_STATUS] = ":status",
    [HP_K_AUTHORITY] = ":authority",
    [HP_K_CONTENT_TYPE] = "content-type",
    [HP_K_TRACEPARENT] = "traceparent",
    [HP_K_TRACESTATE] = "tracestate",
};

/* Fields whose values the recorder keeps: framing, status, trace context; no
 * credential, cookie or body. */
static const char *const kept_names[] = {
    ":scheme", ":protocol", "content-length", "grpc-status",
};

struct static_entry {
	const char *name, *val;
	uint8_t key;
};

/* RFC 7541 Appendix A; val NULL where the RFC gives none */
static const struct static_entry static_table[HP_STATIC_N + 1] = {
    [1] = {":authority", NULL, HP_K_AUTHORITY},
    [2] = {":method", "GET", HP_K_METHOD},
    [3] = {":method", "POST", HP_K_METHOD},
    [4] = {":path", "/", HP_K_PATH},
    [5] = {":path", "/index.html", HP_K_PATH},
    [6] = {":scheme", "http", HP_K_KEPT},
    [7] = {":scheme", "https", HP_K_KEPT},
    [8] = {":status", "200", HP_K_STATUS},
    [9] = {":status", "204", HP_K_STATUS},
    [10] = {":status", "206", HP_K_STATUS},
    [11] = {":status", "304", HP_K_STATUS},
    [12] = {":status", "400", HP_K_STATUS},
    [13] = {":status", "404", HP_K_STATUS},
    [14] = {":status", "500", HP_K_STATUS},
    [15] = {"accept-charset"},
    [16] = {"accept-encoding", "gzip, deflate"},
    [17] = {"accept-language"},
    [18] = {"accept-ranges"},
    [19] = {"accept"},
    [20] = {"access-control-allow-origin"},
    [21] = {"age"},
    [22] = {"allow"},
    [23] = {"authorization"},
    [24] = {"cache-control"},
    [25] = {"content-disposition"},
    [26] = {"content-encoding"},
    [27] = {"content-language"},
    [28] = {"content-length", NULL, HP_K_KEPT},
    [29] = {"content-location"},
    [30] = {"content-range"},
    [31] = {"content-type", NULL, HP_K_CONTENT_TYPE},
    [32] = {"cookie"},
    [33] = {"date"},
    [34] = {"etag"},
    [35] = {"expect"},
    [36] = {"expires"},
    [37] = {"from"},
    [38] = {"host"},
    [39] = {"if-match"},
    [40] = {"if-modified-since"},
    [41] = {"if-none-match"},
    [42] = {"if-range"},
    [43] = {"if-unmodified-since"},
    [44] = {"last-modified"},
    [45] = {"link"},
    [46] = {"location"},
    [47] = {"max-forwards"},
    [48] = {"proxy-authenticate"},
    [49] = {"proxy-authorization"},
    [50] = {"range"},
    [51] = {"referer"},
    [52] = {"refresh"},
    [53] = {"retry-after"},
    [54] = {"server"},
    [55] = {"set-cookie"},
    [56] = {"strict-transport-security"},
    [57] = {"transfer-encoding"},
    [58] = {"user-agent"},
    [59] = {"vary"},
    [60] = {"via"},
    [61] = {"www-authenticate"},
};

/* The first code of each length, and how many there are (EOS the last). */
static void huff_tables(uint32_t first[HUFF_MAX_BITS + 1], uint32_t count[HUFF_MAX_BITS + 1])
{
	uint32_t c = 0;

	for (int l = 1; l <= HUFF_MAX_BITS; l++) {
		first[l] = c;
		count[l] = huff_len[l].n + (l == HUFF_MAX_BITS); /* EOS */
		c = (c + count[l]) << 1;
	}
}

int hpack__huffman(const uint8_t *p, size_t len, char *out, size_t outlen)
{
	uint32_t first[HUFF_MAX_BITS + 1], count[HUFF_MAX_BITS + 1];
	uint32_t code = 0, nbits = 0;
	size_t n = 0;

	if (outlen)
		out[0] = '\0'; /* terminated whatever comes */
	/* the decoded length must fit the int returned: 5 bits per symbol at best */
	if (len > INT_MAX / 2)
		return -EINVAL;
	huff_tables(first, count);
	for (size_t i = 0; i < len; i++) {
		for (int bit = 7; bit >= 0; bit--) {
			code = code << 1 | ((p[i] >> bit) & 1);
			nbits++;
			/* past first + count, the code is a prefix of a longer one */
			if (code - first[nbits] >= count[nbits]) {
				/* cannot happen with the complete code of Appendix B */
				if (nbits == HUFF_MAX_BITS)
					return -EINVAL;
				continue;
			}
			uint32_t k = code - first[nbits];

			if (k == huff_len[nbits].n) /* EOS */
				return -EINVAL;
			uint8_t sym = (uint8_t)huff_len[nbits].sym[k];

			if (n + 1 < outlen) { /* terminated at every step: an error
					     * later returns what was decoded */
				out[n] = (char)sym;
				out[n + 1] = '\0';
			}
			n++;
			code = 0;
			nbits = 0;
		}
	}
	/* RFC 7541 5.2: padding is a prefix of EOS (all ones) shorter than 8 bits */
	if (nbits > 7 || code != (1u << nbits) - 1)
		return -EINVAL;
	if (outlen)
		out[n < outlen ? n : outlen - 1] = '\0';
	return (int)n;
}

/* A Huffman string the recorder redacted (hpack__redact): four 0xff
 * first, which no valid one has (they hold EOS). */
static bool marked(const uint8_t *p, size_t n)
{
	return n >= 7 && (p[0] & p[1] & p[2] & p[3]) == 0xff;
}

static int marked_len(const uint8_t *p, size_t n)
{
	const uint8_t *e = p + n - 3;

	if ((e[0] | e[1] | e[2]) & 0x80)
		return -EINVAL;
	return (int)(((uint32_t)e[0] << 7 | e[1]) + e[2]);
}

/* RFC 7541 5.1: an integer with an N-bit prefix; more than 32 bits is malformed */
static int get_int(const uint8_t *p, size_t len, size_t *pos, unsigned int prefix, uint32_t *out)
{
	uint32_t mask = (1u << prefix) - 1;
	uint64_t v;
	unsigned int shift = 0;

	if (*pos >= len)
		return HP_SHORT;
	v = p[(*pos)++] & mask;
	if (v < mask) {
		*out = (uint32_t)v;
		return 0;
	}
	for (;;) {
		if (*pos >= len)
			return HP_SHORT;
		uint8_t b = p[(*pos)++];

		if (shift > 28)
			return -EINVAL;
		v += (uint64_t)(b & 0x7f) << shift;
		if (v > UINT32_MAX)
			return -EINVAL;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	*out = (uint32_t)v;
	return 0;
}

/* RFC 7541 5.2: a raw or Huffman string into buf (truncated), *full its length;
 * a value may be redacted (marked). */
static int get_str(const uint8_t *p, size_t len, size_t *pos, char *buf, size_t buflen,
		   uint32_t *full, bool value)
{
	bool huff;
	uint32_t slen;
	int err;

	if (*pos >= len)
		return HP_SHORT;
	huff = p[*pos] & 0x80;
	err = get_int(p, len, pos, 7, &slen);
	if (err)
		return err;
	if (slen > len - *pos)
		return HP_SHORT;
	if (huff && value && marked(p + *pos, slen)) {
		/* a value the recorder redacted (hpack__redact) */
		int n = marked_len(p + *pos, slen);

		if (n < 0)
			return n;
		*full = (uint32_t)n;
		if (buflen)
			buf[0] = '\0';
	} else if (huff) {
		int n = hpack__huffman(p + *pos, slen, buf, buflen);

		if (n < 0)
			return n;
		*full = (uint32_t)n;
	} else {
		size_t k = slen < buflen - 1 ? slen : buflen - 1;

		memcpy(buf, p + *pos, k);
		buf[k] = '\0';
		*full = slen;
	}
	*pos += slen;
	return 0;
}

/* A field's name (and, for an indexed field, its value) as far as it is known. */
struct field {
	bool known;
	uint8_t key;
	uint32_t name_len;
	const char *val; /* NULL when not known */
	uint32_t val_len; /* as sent (val may be cut) */
};

static struct hp_entry *entry_at(struct hpack *t, uint32_t i)
{
	return &t->ent[(t->head + i) & (t->cap - 1)]; /* cap: a power of 2 */
}

/* index: 1..61 static, 62.. dynamic (62 newest); -EINVAL for 0 or an index a full table lacks */
static int lookup(struct hpack *t, uint32_t index, struct field *fl)
{
	memset(fl, 0, sizeof(*fl));
	if (index == 0)
		return -EINVAL;
	if (index <= HP_STATIC_N) {
		/* the names' lengths, measured once (the same values if two
		 * threads race to it) */
		static uint8_t name_len[HP_STATIC_N + 1];
		const struct static_entry *s = &static_table[index];

		if (!name_len[index])
			name_len[index] = (uint8_t)strlen(s->name);
		fl->known = true;
		fl->key = s->key;
		fl->name_len = name_len[index];
		fl->val = s->val ? s->val : "";
		fl->val_len = (uint32_t)strlen(fl->val);
		return 0;
	}
	index -= HP_STATIC_N + 1;
	if (index >= t->n)
		return t->partial ? 0 : -EINVAL;

	struct hp_entry *e = entry_at(t, index);

	fl->known = true;
	fl->key = e->key;
	fl->name_len = e->name_len;
	fl->val = e->val;
	fl->val_len = e->size - e->name_len - HP_ENTRY_OVERHEAD;
	return 0;
}

static void table_reset(struct hpack *t)
{
	t->head = 0;
	t->n = 0;
	t->size = 0;
	t->partial = true;
}

/* Drops the oldest known entries until the known ones fit in limit: any
 * unknown ones, being older, would have gone first. */
static void table_evict(struct hpack *t, uint64_t limit)
{
	while (t->n && t->size > limit) {
		t->size -= entry_at(t, t->n - 1)->size;
		t->n--;
	}
}

static int table_grow(struct hpack *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 16;
	struct hp_entry *ent = realloc(t->ent, (size_t)cap * sizeof(*ent));

	if (!ent)
		return -ENOMEM;
	/* unwrap the ring: the entries before head move behind the old end */
	if (t->head + t->n > t->cap)
		memcpy(ent + t->cap, ent, (size_t)(t->head + t->n - t->cap) * sizeof(*ent));
	t->ent = ent;
	t->cap = cap;
	return 0;
}

static void table_insert(struct hpack *t, uint8_t key, uint32_t name_len, uint32_t val_len,
			 const char *val)
{
	uint64_t size = (uint64_t)name_len + val_len + HP_ENTRY_OVERHEAD;
	struct hp_entry *e;

	/* RFC 7541 4.4: an entry larger than the table empties it and is not added */
	if (size > t->max) {
		table_evict(t, 0);
		return;
	}
	table_evict(t, t->max - size);
	if (t->n == t->cap && table_grow(t)) {
		/* not kept, so every index from here on is unknown */
		table_reset(t);
		return;
	}
	t->head = (t->head + t->cap - 1) & (t->cap - 1);
	t->n++;
	t->size += (uint32_t)size;
	e = entry_at(t, 0);
	memset(e, 0, sizeof(*e));
	e->size = (uint32_t)size;
	e->key = key;
	e->name_len = name_len;
	if (key != HP_K_OTHER)
		strcpy(e->val, val);
}

static void set_size(struct hpack *t, uint32_t max)
{
	t->max = max;
	table_evict(t, max);
	/* a limit just stated is exact: if not even the smallest entry fits
	 * behind the known ones, nothing unknown is left */
	if (t->partial && (uint64_t)t->size + HP_ENTRY_OVERHEAD > max)
		t->partial = false;
}

static int parse_status(const char *v)
{
	if (strlen(v) != 3)
		return 0;
	for (int i = 0; i < 3; i++)
		if (v[i] < '0' || v[i] > '9')
			return 0;
	return (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
}

static void put_field(struct hp_fields *f, uint8_t key, const char *val, uint32_t val_len)
{
	size_t sz;
	char *dst;

	switch (key) {
	case HP_K_METHOD:
		dst = f->method, sz = sizeof(f->method);
		break;
	case HP_K_PATH:
		dst = f->path, sz = sizeof(f->path);
		break;
	case HP_K_AUTHORITY:
		dst = f->authority, sz = sizeof(f->authority);
		break;
	case HP_K_CONTENT_TYPE:
		dst = f->content_type, sz = sizeof(f->content_type);
		break;
	case HP_K_TRACEPARENT:
		dst = f->traceparent, sz = sizeof(f->traceparent);
		break;
	case HP_K_TRACESTATE:
		proto__tracestate_fit(f->tracestate, val, val_len);
		return;
	case HP_K_STATUS:
		f->status = parse_status(val);
		return;
	default:
		return;
	}
	size_t k = strnlen(val, sz - 1);

	memcpy(dst, val, k);
	dst[k] = '\0';
}

static uint8_t key_of(const char *name, uint32_t name_len)
{
	for (uint8_t k = HP_K_METHOD; k <= HP_K_TRACESTATE; k++)
		if (name_len == strlen(key_names[k]) && !memcmp(name, key_names[k], name_len))
			return k;
	for (size_t i = 0; i < sizeof(kept_names) / sizeof(kept_names[0]); i++)
		if (name_len == strlen(kept_names[i]) && !memcmp(name, kept_names[i], name_len))
			return HP_K_KEPT;
	return HP_K_OTHER;
}

/* A literal field (RFC 7541 6.2): name by index or literal, then the value. */
static int literal(struct hpack *t, const uint8_t *p, size_t len, size_t *pos, unsigned int prefix,
		   bool insert, struct hp_fields *f)
{
	char name[16], val[HP_VAL_LEN];
	uint32_t index, val_len;
	struct field fl;
	int err;

	err = get_int(p, len, pos, prefix, &index);
	if (err)
		return err;
	if (index) {
		err = lookup(t, index, &fl);
		if (err)
			return err;
	} else {
		err = get_str(p, len, pos, name, sizeof(name), &fl.name_len, false);
		if (err)
			return err;
		fl.known = true;
		fl.key = key_of(name, fl.name_len);
	}
	err = get_str(p, len, pos, val, sizeof(val), &val_len, true);
	if (err)
		return err;
	/* the whole representation was captured: only now does it change anything */
	if (!fl.known) {
		f->unknown = true;
		/* the new entry's size is unknown, so is every index behind it */
		if (insert)
			table_reset(t);
		return 0;
	}
	put_field(f, fl.key, val, val_len);
	if (insert)
		table_insert(t, fl.key, fl.name_len, val_len, val);
	return 0;
}

static int representation(struct hpack *t, const uint8_t *p, size_t len, size_t *pos,
			  struct hp_fields *f)
{
	uint8_t b = p[*pos];
	struct field fl;
	uint32_t v;
	int err;

	if (b & 0x80) { /* 6.1 indexed */
		err = get_int(p, len, pos, 7, &v);
		if (!err)
			err = lookup(t, v, &fl);
		if (err)
			return err;
		if (fl.known)
			put_field(f, fl.key, fl.val, fl.val_len);
		else
			f->unknown = true;
		return 0;
	}
	if (b & 0x40) /* 6.2.1 with incremental indexing */
		return literal(t, p, len, pos, 6, true, f);
	if (b & 0x20) { /* 6.3 dynamic table size update */
		err = get_int(p, len, pos, 5, &v);
		if (err)
			return err;
		if (v > HP_MAX_TABLE)
			return -EINVAL;
		set_size(t, v);
		return 0;
	}
	/* 6.2.2 without indexing, 6.2.3 never indexed */
	return literal(t, p, len, pos, 4, false, f);
}

int hpack__decode(struct hpack *t, const uint8_t *p, size_t len, bool cut, struct hp_fields *f)
{
	size_t pos = 0;
	int err = 0;

	memset(f, 0, sizeof(*f));
	while (pos < len) {
		err = representation(t, p, len, &pos, f);
		if (err)
			break;
	}
	if (err < 0 || (err == HP_SHORT && !cut)) {
		table_reset(t);
		memset(f, 0, sizeof(*f));
		return -EINVAL;
	}
	/* what followed the cut may have inserted entries, shifting every known index */
	if (cut)
		table_reset(t);
	return 0;
}

void hpack__init(struct hpack *t, bool from_start)
{
	memset(t, 0, sizeof(*t));
	t->max = 4096;
	t->partial = !from_start;
}

void hpack__free(struct hpack *t)
{
	free(t->ent);
	memset(t, 0, sizeof(*t));
}

void hpack__forget(struct hpack *t)
{
	table_reset(t);
}

/* The recorder's side (hpack__redact): a block followed byte by byte across
 * pieces, its table kept as the decoder keeps it. */
enum {
	R_REP,	/* a representation's first byte */
	R_INT,	/* the rest of its integer */
	R_SLEN, /* a string's first byte */
	R_SINT, /* the rest of its length */
	R_NAME, /* a literal name's bytes */
	R_VAL,	/* a value's bytes */
	R_SKIP, /* not parsed to the block's end: redacted */
};

static uint32_t hf_first[HUFF_MAX_BITS + 1], hf_count[HUFF_MAX_BITS + 1];

int hpack__huffman_fill(uint8_t *p, uint32_t n, uint32_t m)
{
	/* the code lengths there are, and the symbol standing for each */
	static const uint8_t lens[] = {5,  6,  7,  8,  10, 11, 12, 13, 14, 15, 19,
				       20, 21, 22, 23, 24, 25, 26, 27, 28, 30};
	uint64_t bits = (uint64_t)n * 8, lo = bits > 7 ? bits - 7 : 0, extra, acc = 0;
	uint32_t nacc = 0, at = 0;

	if ((uint64_t)m * 5 > bits || (uint64_t)m * 30 < lo) {
		memset(p, 0xff, n);
		return -EINVAL;
	}
	huff_tables(hf_first, hf_count);
	/* 5 bits a symbol; longer codes fill the rest so padding stays within 7
	 * bits */
	extra = lo > (uint64_t)m * 5 ? lo - (uint64_t)m * 5 : 0;
	for (uint32_t i = 0; i < m; i++) {
		uint64_t want = 5 + (extra < 25 ? extra : 25);
		uint32_t l = 30;

		for (size_t k = 0; k < sizeof(lens); k++)
			if (lens[k] >= want) {
				l = lens[k];
				break;
			}
		extra -= extra < l - 5 ? extra : l - 5;
		acc = acc << l | (hf_first[l] + (l == 13)); /* 13 bits: '$', not NUL */
		nacc += l;
		while (nacc >= 8) {
			p[at++] = (uint8_t)(acc >> (nacc - 8));
			nacc -= 8;
		}
		acc &= (1ull << nacc) - 1;
	}
	if (nacc)
		p[at++] = (uint8_t)(acc << (8 - nacc) | ((1u << (8 - nacc)) - 1));
	return at == n ? 0 : -EINVAL;
}

void hpack__redact_init(struct hp_redact *r, bool from_start)
{
	memset(r, 0, sizeof(*r));
	hpack__init(&r->t, from_start);
	huff_tables(hf_first, hf_count);
}

void hpack__redact_free(struct hp_redact *r)
{
	hpack__free(&r->t);
}

void hpack__redact_forget(struct hp_redact *r)
{
	table_reset(&r->t);
	r->st = R_REP;
}

/* What is left of the block is not parsed: its insertions are not known. */
static void redact_skip(struct hp_redact *r)
{
	table_reset(&r->t);
	r->st = R_SKIP;
}

void hpack__redact_gap(struct hp_redact *r)
{
	redact_skip(r);
}

void hpack__redact_end(struct hp_redact *r)
{
	if (r->st != R_REP)
		table_reset(&r->t); /* cut short, or not parsed */
	r->st = R_REP;
}

static void huff_bits(struct hp_redact *r, uint8_t b)
{
	for (int bit = 7; bit >= 0; bit--) {
		r->code = r->code << 1 | ((b >> bit) & 1);
		r->code_bits++;
		if (r->code - hf_first[r->code_bits] < hf_count[r->code_bits]) {
			if (r->code_bits == HUFF_MAX_BITS &&
			    r->code - hf_first[HUFF_MAX_BITS] == huff_len[HUFF_MAX_BITS].n)
				r->bad = true; /* EOS */
			r->syms++;
			r->code = 0;
			r->code_bits = 0;
		} else if (r->code_bits == HUFF_MAX_BITS) {
			r->bad = true;
			r->code = 0;
			r->code_bits = 0;
		}
	}
}

/* The string's decoded length, or -1 when its Huffman is not valid. */
static int64_t str_len(const struct hp_redact *r)
{
	if (!r->huff)
		return r->slen;
	if (r->bad || r->code_bits > 7 || r->code != (1u << r->code_bits) - 1)
		return -1;
	return r->syms;
}

static void str_begin(struct hp_redact *r, uint8_t st)
{
	r->st = st;
	r->sat = 0;
	r->syms = 0;
	r->code = 0;
	r->code_bits = 0;
	r->bad = false;
	r->whole = false;
}

/* The name is known (literal, or from a table): its value follows. */
static void name_done(struct hp_redact *r)
{
	r->keep = r->known && r->key != HP_K_OTHER;
	r->redacted += !r->keep;
	r->st = R_SLEN;
}

static void literal_name(struct hp_redact *r)
{
	char name[64];
	int64_t n = str_len(r);

	if (n < 0) {
		redact_skip(r);
		return;
	}
	r->known = true;
	r->name_len = (uint32_t)n;
	r->key = HP_K_OTHER;
	if (r->slen <= sizeof(r->name)) {
		if (!r->huff)
			r->key = key_of((const char *)r->name, r->slen);
		else if (hpack__huffman(r->name, r->slen, name, sizeof(name)) == n)
			r->key = key_of(name, r->name_len);
	}
	name_done(r);
}

static void value_done(struct hp_redact *r)
{
	int64_t n = r->whole ? r->syms : r->bad ? -1 : str_len(r);

	if (n < 0) {
		redact_skip(r);
		return;
	}
	if (r->insert) {
		if (r->known)
			table_insert(&r->t, r->key, r->name_len, (uint32_t)n, "");
		else
			table_reset(&r->t);
	}
	r->st = R_REP;
}

/* A kept :path's secret query values, masked in place so that its encoded
 * and decoded lengths stay (HPACK's table counts them): a literal's bytes
 * as '*', a Huffman string's symbols as a symbol of the same code length
 * ('0' for the 5-bit ones letters and digits mostly have). Only a value
 * whole in one transfer is read; how many were masked. */
static uint8_t same_len_sym(int l)
{
	const char *sym = huff_len[l].sym;

	for (int i = 0; i < huff_len[l].n; i++)
		if ((sym[i] >= '0' && sym[i] <= '9') || (sym[i] >= 'A' && sym[i] <= 'Z') ||
		    (sym[i] >= 'a' && sym[i] <= 'z') || sym[i] == '*')
			return (uint8_t)sym[i];
	return (uint8_t)sym[huff_len[l].n - 1];
}

static int huff_code(uint8_t c, uint32_t *code)
{
	for (int l = 5; l <= HUFF_MAX_BITS; l++) {
		const char *at = huff_len[l].n ? memchr(huff_len[l].sym, c, huff_len[l].n) : NULL;

		if (at) {
			*code = hf_first[l] + (uint32_t)(at - huff_len[l].sym);
			return l;
		}
	}
	return -1;
}

static uint32_t mask_path(uint8_t *p, uint32_t k, bool huff)
{
	char t[1024];
	uint32_t sp[16][2], ns, at = 0, nacc = 0;
	uint64_t acc = 0;
	int n;

	if (!huff) {
		ns = proto__query_secrets((const char *)p, k, sp, 16);
		for (uint32_t i = 0; i < ns; i++)
			memset(p + sp[i][0], '*', sp[i][1] - sp[i][0]);
		return ns;
	}
	n = hpack__huffman(p, k, t, sizeof(t));
	if (n < 0 || n >= (int)sizeof(t))
		return 0;
	ns = proto__query_secrets(t, (size_t)n, sp, 16);
	if (!ns)
		return 0;
	for (uint32_t i = 0, j = 0; i < (uint32_t)n; i++) {
		uint32_t code;
		int l = huff_code((uint8_t)t[i], &code);

		while (j < ns && i >= sp[j][1])
			j++;
		if (l > 0 && j < ns && i >= sp[j][0])
			l = huff_code(same_len_sym(l), &code);
		if (l < 0)
			return 0; /* cannot be: every byte has a code */
		acc = acc << l | code;
		nacc += (uint32_t)l;
		while (nacc >= 8) {
			p[at++] = (uint8_t)(acc >> (nacc - 8));
			nacc -= 8;
		}
		acc &= (1ull << nacc) - 1;
	}
	if (nacc)
		p[at++] = (uint8_t)(acc << (8 - nacc) | ((1u << (8 - nacc)) - 1));
	return ns;
}

static size_t str_bytes(struct hp_redact *r, uint8_t *p, size_t n)
{
	uint32_t k = r->slen - r->sat;
	uint32_t from = r->sat;

	if (k > n)
		k = (uint32_t)n;
	if (r->st == R_NAME) {
		for (uint32_t i = 0; i < k; i++) {
			if (r->sat + i < sizeof(r->name))
				r->name[r->sat + i] = p[i];
			if (r->huff)
				huff_bits(r, p[i]);
		}
		r->sat += k;
		if (r->sat == r->slen)
			literal_name(r);
		return k;
	}
	if (r->keep && r->key == HP_K_PATH && !r->keep_query && !r->sat && k == r->slen)
		r->redacted += mask_path(p, k, r->huff);
	if (r->huff && !r->sat && k == r->slen) {
		bool mk = marked(p, k);
		int m = mk ? marked_len(p, k) : hpack__huffman(p, k, NULL, 0);

		r->whole = m >= 0;
		r->bad = m < 0;
		r->syms = m < 0 ? 0 : (uint32_t)m;
		if (!r->keep && m >= 0 && mk) {
			uint32_t a = (uint32_t)m < (1u << 14) - 1 ? (uint32_t)m : (1u << 14) - 1;

			memset(p, 0xff, k - 3);
			p[k - 3] = (uint8_t)(a >> 7);
			p[k - 2] = (uint8_t)(a & 0x7f);
			p[k - 1] = (uint8_t)(m - a);
		} else if (!r->keep && (m < 0 || hpack__huffman_fill(p, k, (uint32_t)m))) {
			memset(p, 0xff, k);
			r->whole = false;
			r->bad = true;
		}
	} else if (r->huff) {
		for (uint32_t i = 0; i < k; i++) {
			uint32_t pos = from + i;

			huff_bits(r, p[i]);
			if (r->keep)
				continue;
			p[i] = 0xff;
			/* the decoded length in the last three bytes, written
			 * as they pass */
			if (r->slen < 7 || pos < r->slen - 3)
				continue;
			if (pos == r->slen - 3)
				r->mark = r->syms < (1u << 14) ? r->syms : UINT32_MAX;
			if (r->mark == UINT32_MAX)
				continue;
			if (pos == r->slen - 3)
				p[i] = (uint8_t)(r->mark >> 7);
			else if (pos == r->slen - 2)
				p[i] = (uint8_t)(r->mark & 0x7f);
			else if (str_len(r) >= 0)
				p[i] = (uint8_t)(r->syms - r->mark);
		}
	} else if (!r->keep) {
		memset(p, '*', k);
	}
	r->sat += k;
	if (r->sat == r->slen)
		value_done(r);
	return k;
}

static bool int_first(struct hp_redact *r, uint8_t b)
{
	uint32_t mask = (1u << r->prefix) - 1;

	r->ival = b & mask;
	r->shift = 0;
	return r->ival < mask;
}

static int int_more(struct hp_redact *r, uint8_t b)
{
	uint64_t v = r->ival + ((uint64_t)(b & 0x7f) << r->shift);

	if (r->shift > 28 || v > UINT32_MAX)
		return -EINVAL;
	r->ival = (uint32_t)v;
	r->shift += 7;
	return !(b & 0x80);
}

/* The representation's integer: an index, or a table size. */
static void rep_int(struct hp_redact *r)
{
	struct field fl;

	if (r->prefix == 5) { /* 6.3 dynamic table size update */
		if (r->ival > HP_MAX_TABLE) {
			redact_skip(r);
			return;
		}
		set_size(&r->t, r->ival);
		r->st = R_REP;
		return;
	}
	if (r->prefix == 7 || r->ival) {
		if (lookup(&r->t, r->ival, &fl)) {
			redact_skip(r);
			return;
		}
		if (r->prefix == 7) { /* 6.1 indexed: no bytes of its own */
			r->st = R_REP;
			return;
		}
		r->known = fl.known;
		r->key = fl.key;
		r->name_len = fl.name_len;
		r->name_next = false;
		name_done(r);
		return;
	}
	r->name_next = true; /* a literal name */
	r->st = R_SLEN;
}

void hpack__redact(struct hp_redact *r, uint8_t *p, size_t n)
{
	size_t i = 0;
	int done;

	while (i < n) {
		switch (r->st) {
		case R_SKIP:
			memset(p + i, 0xff, n - i);
			return;
		case R_REP:
			r->prefix = p[i] & 0x80 ? 7 : p[i] & 0x40 ? 6 : p[i] & 0x20 ? 5 : 4;
			r->insert = r->prefix == 6;
			r->st = R_INT;
			if (int_first(r, p[i++]))
				rep_int(r);
			break;
		case R_INT:
			done = int_more(r, p[i++]);
			if (done < 0)
				redact_skip(r);
			else if (done)
				rep_int(r);
			break;
		case R_SLEN:
		case R_SINT:
			if (r->st == R_SLEN) {
				r->huff = p[i] & 0x80;
				r->prefix = 7;
				done = int_first(r, p[i++]);
				r->st = R_SINT;
			} else {
				done = int_more(r, p[i++]);
			}
			if (done < 0) {
				redact_skip(r);
			} else if (done) {
				r->slen = r->ival;
				str_begin(r, r->name_next ? R_NAME : R_VAL);
				r->name_next = false;
				if (!r->slen)
					str_bytes(r, p + i, 0);
			}
			break;
		default:
			i += str_bytes(r, p + i, n - i);
			break;
		}
	}
}
