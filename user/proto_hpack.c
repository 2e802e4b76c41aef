// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * HPACK (RFC 7541) header blocks, decoded far enough to name an HTTP/2
 * request: :method, :path, :authority, content-type and :status.
 *
 * The recorder keeps payload prefixes, so a block may be cut and the
 * connection may have started before recording did. The dynamic table is
 * therefore tracked as "the newest n entries are known; older ones may
 * exist" (struct hpack.partial). That much stays exact: new entries go to
 * the front and eviction takes the oldest first, so unknown entries always
 * go before known ones. What breaks it is an insertion whose size is not
 * known (its name is an unknown entry) or not seen (after a cut): every
 * known index then shifts by an unknown amount, so the table is reset to
 * empty and partial.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "proto_hpack.h"

#define HP_ENTRY_OVERHEAD 32	 /* RFC 7541 4.1 */
#define HP_MAX_TABLE (4096 * 16) /* larger size updates are taken as garbage, not HPACK */
#define HP_STATIC_N 61
#define HP_SHORT 1 /* internal: the representation runs past the captured bytes */

/*
 * RFC 7541 Appendix B's code is canonical: codes are handed out in order of
 * length, then of symbol, each one the previous plus one (shifted left when
 * the length grows). So the bytes of each code length, in order, are the
 * whole table; EOS (256) is the last code of all, thirty 1 bits.
 */
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
    [6] = {":scheme", "http"},
    [7] = {":scheme", "https"},
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
    [28] = {"content-length"},
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

int hpack__huffman(const uint8_t *p, size_t len, char *out, size_t outlen)
{
	uint32_t first[HUFF_MAX_BITS + 1], count[HUFF_MAX_BITS + 1];
	uint32_t code = 0, nbits = 0, c = 0;
	size_t n = 0;

	/* the decoded length must fit the int returned: 5 bits per symbol at best */
	if (len > INT_MAX / 2)
		return -EINVAL;
	for (int l = 1; l <= HUFF_MAX_BITS; l++) {
		first[l] = c;
		count[l] = huff_len[l].n + (l == HUFF_MAX_BITS); /* EOS */
		c = (c + count[l]) << 1;
	}
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

			if (n + 1 < outlen)
				out[n] = (char)sym;
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

/* RFC 7541 5.2: a string, raw or Huffman, into buf (truncated); *full its whole length */
static int get_str(const uint8_t *p, size_t len, size_t *pos, char *buf, size_t buflen,
		   uint32_t *full)
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
	if (huff) {
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
};

static struct hp_entry *entry_at(struct hpack *t, uint32_t i)
{
	return &t->ent[(t->head + i) % t->cap];
}

/* index: 1..61 static, 62.. dynamic (62 newest); -EINVAL for 0 or an index a full table lacks */
static int lookup(struct hpack *t, uint32_t index, struct field *fl)
{
	memset(fl, 0, sizeof(*fl));
	if (index == 0)
		return -EINVAL;
	if (index <= HP_STATIC_N) {
		const struct static_entry *s = &static_table[index];

		fl->known = true;
		fl->key = s->key;
		fl->name_len = (uint32_t)strlen(s->name);
		fl->val = s->val ? s->val : "";
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
	t->head = (t->head + t->cap - 1) % t->cap;
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
	/*
	 * The limit was just stated, so it is exact even in a table seen from
	 * mid-stream (whose limit until now was a guess): if not even the
	 * smallest entry fits behind the known ones, nothing unknown is left.
	 */
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

static void put_field(struct hp_fields *f, uint8_t key, const char *val)
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
	for (uint8_t k = HP_K_METHOD; k <= HP_K_CONTENT_TYPE; k++)
		if (name_len == strlen(key_names[k]) && !memcmp(name, key_names[k], name_len))
			return k;
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
		err = get_str(p, len, pos, name, sizeof(name), &fl.name_len);
		if (err)
			return err;
		fl.known = true;
		fl.key = key_of(name, fl.name_len);
	}
	err = get_str(p, len, pos, val, sizeof(val), &val_len);
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
	put_field(f, fl.key, val);
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
			put_field(f, fl.key, fl.val);
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
