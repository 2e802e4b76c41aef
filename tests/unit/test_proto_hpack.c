// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * HPACK header blocks (user/proto/hpack.c): RFC 7541 Appendix C's examples,
 * the Huffman code of every byte, entry sizes and evictions, and what a
 * table that missed part of the stream may and may not claim to know:
 * blocks cut at every offset, connections seen from mid-stream, and random
 * bytes, which must never crash or read past the block.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto_hpack.h"

/*
 * RFC 7541 Appendix C, checked against python3-hpack's Encoder (whose C.6
 * blocks open with the size update to 256 that the RFC leaves implicit).
 */
static const char c2_1[] =
    "\x40\x0a\x63\x75\x73\x74\x6f\x6d\x2d\x6b\x65\x79\x0d\x63\x75\x73\x74\x6f\x6d\x2d"
    "\x68\x65\x61\x64\x65\x72";
static const char c2_2[] = "\x04\x0c\x2f\x73\x61\x6d\x70\x6c\x65\x2f\x70\x61\x74\x68";
static const char c2_3[] = "\x10\x08\x70\x61\x73\x73\x77\x6f\x72\x64\x06\x73\x65\x63\x72\x65\x74";
static const char c3_1[] =
    "\x82\x86\x84\x41\x0f\x77\x77\x77\x2e\x65\x78\x61\x6d\x70\x6c\x65\x2e\x63\x6f\x6d";
static const char c3_2[] = "\x82\x86\x84\xbe\x58\x08\x6e\x6f\x2d\x63\x61\x63\x68\x65";
static const char c3_3[] =
    "\x82\x87\x85\xbf\x40\x0a\x63\x75\x73\x74\x6f\x6d\x2d\x6b\x65\x79\x0c\x63\x75\x73"
    "\x74\x6f\x6d\x2d\x76\x61\x6c\x75\x65";
static const char c4_1[] = "\x82\x86\x84\x41\x8c\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff";
static const char c4_2[] = "\x82\x86\x84\xbe\x58\x86\xa8\xeb\x10\x64\x9c\xbf";
static const char c4_3[] =
    "\x82\x87\x85\xbf\x40\x88\x25\xa8\x49\xe9\x5b\xa9\x7d\x7f\x89\x25\xa8\x49\xe9\x5b"
    "\xb8\xe8\xb4\xbf";
static const char c5_1[] =
    "\x48\x03\x33\x30\x32\x58\x07\x70\x72\x69\x76\x61\x74\x65\x61\x1d\x4d\x6f\x6e\x2c"
    "\x20\x32\x31\x20\x4f\x63\x74\x20\x32\x30\x31\x33\x20\x32\x30\x3a\x31\x33\x3a\x32"
    "\x31\x20\x47\x4d\x54\x6e\x17\x68\x74\x74\x70\x73\x3a\x2f\x2f\x77\x77\x77\x2e\x65"
    "\x78\x61\x6d\x70\x6c\x65\x2e\x63\x6f\x6d";
static const char c5_2[] = "\x48\x03\x33\x30\x37\xc1\xc0\xbf";
static const char c5_3[] =
    "\x88\xc1\x61\x1d\x4d\x6f\x6e\x2c\x20\x32\x31\x20\x4f\x63\x74\x20\x32\x30\x31\x33"
    "\x20\x32\x30\x3a\x31\x33\x3a\x32\x32\x20\x47\x4d\x54\xc0\x5a\x04\x67\x7a\x69\x70"
    "\x77\x38\x66\x6f\x6f\x3d\x41\x53\x44\x4a\x4b\x48\x51\x4b\x42\x5a\x58\x4f\x51\x57"
    "\x45\x4f\x50\x49\x55\x41\x58\x51\x57\x45\x4f\x49\x55\x3b\x20\x6d\x61\x78\x2d\x61"
    "\x67\x65\x3d\x33\x36\x30\x30\x3b\x20\x76\x65\x72\x73\x69\x6f\x6e\x3d\x31";
static const char c6_1[] =
    "\x3f\xe1\x01\x48\x82\x64\x02\x58\x85\xae\xc3\x77\x1a\x4b\x61\x96\xd0\x7a\xbe\x94"
    "\x10\x54\xd4\x44\xa8\x20\x05\x95\x04\x0b\x81\x66\xe0\x82\xa6\x2d\x1b\xff\x6e\x91"
    "\x9d\x29\xad\x17\x18\x63\xc7\x8f\x0b\x97\xc8\xe9\xae\x82\xae\x43\xd3";
static const char c6_2[] = "\x48\x83\x64\x0e\xff\xc1\xc0\xbf";
static const char c6_3[] =
    "\x88\xc1\x61\x96\xd0\x7a\xbe\x94\x10\x54\xd4\x44\xa8\x20\x05\x95\x04\x0b\x81\x66"
    "\xe0\x84\xa6\x2d\x1b\xff\xc0\x5a\x83\x9b\xd9\xab\x77\xad\x94\xe7\x82\x1d\xd7\xf2"
    "\xe6\xc7\xb3\x35\xdf\xdf\xcd\x5b\x39\x60\xd5\xaf\x27\x08\x7f\x36\x72\xc1\xab\x27"
    "\x0f\xb5\x29\x1f\x95\x87\x31\x60\x65\xc0\x03\xed\x4e\xe5\xb1\x06\x3d\x50\x07";

/* Each byte 0..255 Huffman-encoded alone by python3-hpack's HuffmanEncoder. */
static const char *const huff_byte[256] = {
    "\xff\xc7",
    "\xff\xff\xb1",
    "\xff\xff\xfe\x2f",
    "\xff\xff\xfe\x3f",
    "\xff\xff\xfe\x4f",
    "\xff\xff\xfe\x5f",
    "\xff\xff\xfe\x6f",
    "\xff\xff\xfe\x7f",
    "\xff\xff\xfe\x8f",
    "\xff\xff\xea",
    "\xff\xff\xff\xf3",
    "\xff\xff\xfe\x9f",
    "\xff\xff\xfe\xaf",
    "\xff\xff\xff\xf7",
    "\xff\xff\xfe\xbf",
    "\xff\xff\xfe\xcf",
    "\xff\xff\xfe\xdf",
    "\xff\xff\xfe\xef",
    "\xff\xff\xfe\xff",
    "\xff\xff\xff\x0f",
    "\xff\xff\xff\x1f",
    "\xff\xff\xff\x2f",
    "\xff\xff\xff\xfb",
    "\xff\xff\xff\x3f",
    "\xff\xff\xff\x4f",
    "\xff\xff\xff\x5f",
    "\xff\xff\xff\x6f",
    "\xff\xff\xff\x7f",
    "\xff\xff\xff\x8f",
    "\xff\xff\xff\x9f",
    "\xff\xff\xff\xaf",
    "\xff\xff\xff\xbf",
    "\x53",
    "\xfe\x3f",
    "\xfe\x7f",
    "\xff\xaf",
    "\xff\xcf",
    "\x57",
    "\xf8",
    "\xff\x5f",
    "\xfe\xbf",
    "\xfe\xff",
    "\xf9",
    "\xff\x7f",
    "\xfa",
    "\x5b",
    "\x5f",
    "\x63",
    "\x07",
    "\x0f",
    "\x17",
    "\x67",
    "\x6b",
    "\x6f",
    "\x73",
    "\x77",
    "\x7b",
    "\x7f",
    "\xb9",
    "\xfb",
    "\xff\xf9",
    "\x83",
    "\xff\xbf",
    "\xff\x3f",
    "\xff\xd7",
    "\x87",
    "\xbb",
    "\xbd",
    "\xbf",
    "\xc1",
    "\xc3",
    "\xc5",
    "\xc7",
    "\xc9",
    "\xcb",
    "\xcd",
    "\xcf",
    "\xd1",
    "\xd3",
    "\xd5",
    "\xd7",
    "\xd9",
    "\xdb",
    "\xdd",
    "\xdf",
    "\xe1",
    "\xe3",
    "\xe5",
    "\xfc",
    "\xe7",
    "\xfd",
    "\xff\xdf",
    "\xff\xfe\x1f",
    "\xff\xe7",
    "\xff\xf3",
    "\x8b",
    "\xff\xfb",
    "\x1f",
    "\x8f",
    "\x27",
    "\x93",
    "\x2f",
    "\x97",
    "\x9b",
    "\x9f",
    "\x37",
    "\xe9",
    "\xeb",
    "\xa3",
    "\xa7",
    "\xab",
    "\x3f",
    "\xaf",
    "\xed",
    "\xb3",
    "\x47",
    "\x4f",
    "\xb7",
    "\xef",
    "\xf1",
    "\xf3",
    "\xf5",
    "\xf7",
    "\xff\xfd",
    "\xff\x9f",
    "\xff\xf7",
    "\xff\xef",
    "\xff\xff\xff\xcf",
    "\xff\xfe\x6f",
    "\xff\xff\x4b",
    "\xff\xfe\x7f",
    "\xff\xfe\x8f",
    "\xff\xff\x4f",
    "\xff\xff\x53",
    "\xff\xff\x57",
    "\xff\xff\xb3",
    "\xff\xff\x5b",
    "\xff\xff\xb5",
    "\xff\xff\xb7",
    "\xff\xff\xb9",
    "\xff\xff\xbb",
    "\xff\xff\xbd",
    "\xff\xff\xeb",
    "\xff\xff\xbf",
    "\xff\xff\xec",
    "\xff\xff\xed",
    "\xff\xff\x5f",
    "\xff\xff\xc1",
    "\xff\xff\xee",
    "\xff\xff\xc3",
    "\xff\xff\xc5",
    "\xff\xff\xc7",
    "\xff\xff\xc9",
    "\xff\xfe\xe7",
    "\xff\xff\x63",
    "\xff\xff\xcb",
    "\xff\xff\x67",
    "\xff\xff\xcd",
    "\xff\xff\xcf",
    "\xff\xff\xef",
    "\xff\xff\x6b",
    "\xff\xfe\xef",
    "\xff\xfe\x9f",
    "\xff\xff\x6f",
    "\xff\xff\x73",
    "\xff\xff\xd1",
    "\xff\xff\xd3",
    "\xff\xfe\xf7",
    "\xff\xff\xd5",
    "\xff\xff\x77",
    "\xff\xff\x7b",
    "\xff\xff\xf0",
    "\xff\xfe\xff",
    "\xff\xff\x7f",
    "\xff\xff\xd7",
    "\xff\xff\xd9",
    "\xff\xff\x07",
    "\xff\xff\x0f",
    "\xff\xff\x83",
    "\xff\xff\x17",
    "\xff\xff\xdb",
    "\xff\xff\x87",
    "\xff\xff\xdd",
    "\xff\xff\xdf",
    "\xff\xfe\xaf",
    "\xff\xff\x8b",
    "\xff\xff\x8f",
    "\xff\xff\x93",
    "\xff\xff\xe1",
    "\xff\xff\x97",
    "\xff\xff\x9b",
    "\xff\xff\xe3",
    "\xff\xff\xf8\x3f",
    "\xff\xff\xf8\x7f",
    "\xff\xfe\xbf",
    "\xff\xfe\x3f",
    "\xff\xff\x9f",
    "\xff\xff\xe5",
    "\xff\xff\xa3",
    "\xff\xff\xf6\x7f",
    "\xff\xff\xf8\xbf",
    "\xff\xff\xf8\xff",
    "\xff\xff\xf9\x3f",
    "\xff\xff\xfb\xdf",
    "\xff\xff\xfb\xff",
    "\xff\xff\xf9\x7f",
    "\xff\xff\xf1",
    "\xff\xff\xf6\xff",
    "\xff\xfe\x5f",
    "\xff\xff\x1f",
    "\xff\xff\xf9\xbf",
    "\xff\xff\xfc\x1f",
    "\xff\xff\xfc\x3f",
    "\xff\xff\xf9\xff",
    "\xff\xff\xfc\x5f",
    "\xff\xff\xf2",
    "\xff\xff\x27",
    "\xff\xff\x2f",
    "\xff\xff\xfa\x3f",
    "\xff\xff\xfa\x7f",
    "\xff\xff\xff\xdf",
    "\xff\xff\xfc\x7f",
    "\xff\xff\xfc\x9f",
    "\xff\xff\xfc\xbf",
    "\xff\xfe\xcf",
    "\xff\xff\xf3",
    "\xff\xfe\xdf",
    "\xff\xff\x37",
    "\xff\xff\xa7",
    "\xff\xff\x3f",
    "\xff\xff\x47",
    "\xff\xff\xe7",
    "\xff\xff\xab",
    "\xff\xff\xaf",
    "\xff\xff\xf7\x7f",
    "\xff\xff\xf7\xff",
    "\xff\xff\xf4",
    "\xff\xff\xf5",
    "\xff\xff\xfa\xbf",
    "\xff\xff\xe9",
    "\xff\xff\xfa\xff",
    "\xff\xff\xfc\xdf",
    "\xff\xff\xfb\x3f",
    "\xff\xff\xfb\x7f",
    "\xff\xff\xfc\xff",
    "\xff\xff\xfd\x1f",
    "\xff\xff\xfd\x3f",
    "\xff\xff\xfd\x5f",
    "\xff\xff\xfd\x7f",
    "\xff\xff\xff\xef",
    "\xff\xff\xfd\x9f",
    "\xff\xff\xfd\xbf",
    "\xff\xff\xfd\xdf",
    "\xff\xff\xfd\xff",
    "\xff\xff\xfe\x1f",
    "\xff\xff\xfb\xbf",
};

/* bytes 0, 9, 18 .. 252, then "GET /api?q=%7B~}", encoded by python3-hpack */
static const char mixed_plain[] =
    "\x00\x09\x12\x1b\x24\x2d\x36\x3f\x48\x51\x5a\x63\x6c\x75\x7e\x87\x90\x99\xa2\xab\xb4\xbd"
    "\xc6\xcf\xd8\xe1\xea\xf3\xfc\x47\x45\x54\x20\x2f\x61\x70\x69\x3f\x71\x3d\x25\x37\x42\x7e"
    "\x7d";
static const char mixed_huff[] =
    "\xff\xc7\xff\xff\x57\xff\xff\xf7\xff\xff\xff\xbf\xfe\x56\x73\xfc\xc7\xb3\xf4\x94\x5b\xff"
    "\xdf\xff\xfb\x3f\xff\xfd\x9f\xff\xdc\xff\xfe\x9f\xff\xff\x0f\xff\xfd\xbf\xff\xf2\xff\xff"
    "\xd1\xff\xff\xed\xff\xff\x27\xff\xff\x9f\xff\xff\xbb\xff\xff\xed\xff\xff\xfd\xd8\xb0\x6f"
    "\x51\x81\xd6\x6f\xf3\xb4\x0a\xbb\x77\xff\xbf\xfe\xff";

/* A string literal's bytes, without its NUL. */
#define BLOCK(s) (const uint8_t *)(s), sizeof(s) - 1

static int huff(const char *s, size_t len, char *out, size_t outlen)
{
	return hpack__huffman((const uint8_t *)s, len, out, outlen);
}

/* The sum of the known entries' sizes, walked through the ring. */
static uint32_t table_sum(const struct hpack *t)
{
	uint32_t sum = 0;

	for (uint32_t i = 0; i < t->n; i++)
		sum += t->ent[(t->head + i) % t->cap].size;
	return sum;
}

/* the i-th newest known entry (index 62 + i) */
static const struct hp_entry *entry(const struct hpack *t, uint32_t i)
{
	return &t->ent[(t->head + i) % t->cap];
}

static void assert_table(const struct hpack *t, uint32_t n, uint32_t size, bool partial)
{
	assert_int_equal(t->n, n);
	assert_int_equal(t->size, size);
	assert_int_equal(table_sum(t), size);
	assert_int_equal(t->partial, partial);
}

static void test_huffman_rfc(void **state)
{
	char out[64];

	assert_int_equal(huff("\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff", 12, out, 64), 15);
	assert_string_equal(out, "www.example.com");
	assert_int_equal(huff("\xa8\xeb\x10\x64\x9c\xbf", 6, out, 64), 8);
	assert_string_equal(out, "no-cache");
	assert_int_equal(huff("\x25\xa8\x49\xe9\x5b\xa9\x7d\x7f", 8, out, 64), 10);
	assert_string_equal(out, "custom-key");
	assert_int_equal(huff("\x25\xa8\x49\xe9\x5b\xb8\xe8\xb4\xbf", 9, out, 64), 12);
	assert_string_equal(out, "custom-value");
	/* truncated output still counts the whole string */
	assert_int_equal(huff("\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff", 12, out, 5), 15);
	assert_string_equal(out, "www.");
	assert_int_equal(huff("\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff", 12, NULL, 0), 15);
	/* a length whose decoding could not be counted in an int: refused unread */
	assert_int_equal(huff("", (size_t)INT_MAX, out, 64), -EINVAL);
	assert_int_equal(huff("", 0, out, 64), 0);
	assert_string_equal(out, "");
}

static void test_huffman_bytes(void **state)
{
	char out[64];

	for (int b = 0; b < 256; b++) {
		size_t len = strlen(huff_byte[b]);

		assert_in_range(len, 1, 4);
		assert_int_equal(huff(huff_byte[b], len, out, sizeof(out)), 1);
		assert_int_equal((uint8_t)out[0], b);
		assert_int_equal(out[1], '\0');
	}
	assert_int_equal(hpack__huffman(BLOCK(mixed_huff), out, sizeof(out)),
			 sizeof(mixed_plain) - 1);
	assert_memory_equal(out, mixed_plain, sizeof(mixed_plain) - 1);
}

static void test_huffman_invalid(void **state)
{
	char out[16];

	/* EOS (30 ones) in the data */
	assert_int_equal(huff("\xff\xff\xff\xff", 4, out, sizeof(out)), -EINVAL);
	assert_int_equal(huff("\x1f\xff\xff\xff\xff", 5, out, sizeof(out)), -EINVAL);
	/* "a" (00011) then 8 bits of padding */
	assert_int_equal(huff("\x1f\xff", 2, out, sizeof(out)), -EINVAL);
	/* "a" then padding that is not all ones */
	assert_int_equal(huff("\x18", 1, out, sizeof(out)), -EINVAL);
	assert_int_equal(huff("\x1e", 1, out, sizeof(out)), -EINVAL);
	/* "a" with its 3 bits of padding is fine */
	assert_int_equal(huff("\x1f", 1, out, sizeof(out)), 1);
	assert_string_equal(out, "a");
	/* a 13-bit code cut after 8 bits: padding too long */
	assert_int_equal(huff("\xff", 1, out, sizeof(out)), -EINVAL);
}

static void test_c2(void **state)
{
	struct hpack t;
	struct hp_fields f;

	hpack__init(&t, true);
	assert_int_equal(hpack__decode(&t, BLOCK(c2_1), false, &f), 0);
	assert_table(&t, 1, 55, false);
	assert_int_equal(entry(&t, 0)->key, HP_K_OTHER);
	assert_string_equal(entry(&t, 0)->val, "");
	hpack__free(&t);

	hpack__init(&t, true);
	assert_int_equal(hpack__decode(&t, BLOCK(c2_2), false, &f), 0);
	assert_string_equal(f.path, "/sample/path");
	assert_table(&t, 0, 0, false);
	hpack__free(&t);

	hpack__init(&t, true);
	assert_int_equal(hpack__decode(&t, BLOCK(c2_3), false, &f), 0);
	assert_string_equal(f.path, "");
	assert_string_equal(f.method, "");
	assert_false(f.unknown);
	assert_table(&t, 0, 0, false);
	hpack__free(&t);

	hpack__init(&t, true);
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x82", 1, false, &f), 0);
	assert_string_equal(f.method, "GET");
	assert_table(&t, 0, 0, false);
	hpack__free(&t);
}

/* C.3 and C.4: the same three requests, raw and Huffman-coded */
static void check_requests(const char *const blocks[3], const size_t lens[3])
{
	static const char *const paths[3] = {"/", "/", "/index.html"};
	static const uint32_t sizes[3] = {57, 110, 164};
	struct hpack t;
	struct hp_fields f;

	hpack__init(&t, true);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(hpack__decode(&t, (const uint8_t *)blocks[i], lens[i], false, &f),
				 0);
		assert_string_equal(f.method, "GET");
		assert_string_equal(f.path, paths[i]);
		assert_string_equal(f.authority, "www.example.com");
		assert_int_equal(f.status, 0);
		assert_false(f.unknown);
		assert_table(&t, (uint32_t)i + 1, sizes[i], false);
	}
	/* newest first: custom-key, cache-control, :authority */
	assert_int_equal(entry(&t, 0)->key, HP_K_OTHER);
	assert_int_equal(entry(&t, 1)->key, HP_K_OTHER);
	assert_int_equal(entry(&t, 2)->key, HP_K_AUTHORITY);
	assert_string_equal(entry(&t, 2)->val, "www.example.com");
	hpack__free(&t);
}

static void test_c3(void **state)
{
	const char *const blocks[3] = {c3_1, c3_2, c3_3};
	const size_t lens[3] = {sizeof(c3_1) - 1, sizeof(c3_2) - 1, sizeof(c3_3) - 1};

	check_requests(blocks, lens);
}

static void test_c4(void **state)
{
	const char *const blocks[3] = {c4_1, c4_2, c4_3};
	const size_t lens[3] = {sizeof(c4_1) - 1, sizeof(c4_2) - 1, sizeof(c4_3) - 1};

	check_requests(blocks, lens);
}

/* C.5 and C.6: three responses through a 256-byte table, with evictions */
static void check_responses(struct hpack *t, const char *const blocks[3], const size_t lens[3])
{
	static const int status[3] = {302, 307, 200};
	static const uint32_t sizes[3] = {222, 222, 215}, ns[3] = {4, 4, 3};
	struct hp_fields f;

	for (int i = 0; i < 3; i++) {
		assert_int_equal(hpack__decode(t, (const uint8_t *)blocks[i], lens[i], false, &f),
				 0);
		assert_int_equal(f.status, status[i]);
		assert_string_equal(f.method, "");
		assert_false(f.unknown);
		assert_int_equal(t->max, 256);
		assert_table(t, ns[i], sizes[i], false);
		if (i == 1) {
			/* ":status 302" was evicted for ":status 307" */
			assert_int_equal(entry(t, 0)->key, HP_K_STATUS);
			assert_string_equal(entry(t, 0)->val, "307");
			assert_int_equal(entry(t, 0)->size, 42);
			assert_int_equal(entry(t, 1)->size, 63); /* location */
			assert_int_equal(entry(t, 3)->size, 52); /* cache-control: private */
		}
	}
	/* set-cookie (98), content-encoding (52), date (65) */
	assert_int_equal(entry(t, 0)->size, 98);
	assert_int_equal(entry(t, 1)->size, 52);
	assert_int_equal(entry(t, 2)->size, 65);
}

static void test_c5(void **state)
{
	const char *const blocks[3] = {c5_1, c5_2, c5_3};
	const size_t lens[3] = {sizeof(c5_1) - 1, sizeof(c5_2) - 1, sizeof(c5_3) - 1};
	struct hpack t;

	/* the RFC's decoder was set up with a 256-byte table */
	hpack__init(&t, true);
	t.max = 256;
	check_responses(&t, blocks, lens);
	hpack__free(&t);
}

static void test_c6(void **state)
{
	const char *const blocks[3] = {c6_1, c6_2, c6_3};
	const size_t lens[3] = {sizeof(c6_1) - 1, sizeof(c6_2) - 1, sizeof(c6_3) - 1};
	struct hpack t;

	hpack__init(&t, true);
	check_responses(&t, blocks, lens);
	hpack__free(&t);
}

/* Integers past 32 bits, index 0 and oversized table updates are malformed,
 * and a malformed block leaves nothing it might have got wrong. */
static void test_malformed(void **state)
{
	static const struct {
		const char *b;
		size_t len;
	} bad[] = {
	    {"\xff\xff\xff\xff\xff\x0f", 6},	 /* index 127 + 0xffffffff */
	    {"\xff\x80\x80\x80\x80\x80\x00", 7}, /* six continuation bytes */
	    {"\x80", 1},			 /* index 0 */
	    {"\x3f\xe2\xff\x03", 4},		 /* size update 65537 */
	    {"\x40\x81\xff\x00", 4},		 /* name of 1 Huffman byte: padding */
	    {"\x82\x41", 2},			 /* cut, but the block was said whole */
	    {"\xbf", 1},			 /* index 63 in a table known to hold one */
	};
	struct hpack t;
	struct hp_fields f;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		hpack__init(&t, true);
		assert_int_equal(hpack__decode(&t, BLOCK(c3_1), false, &f), 0);
		assert_table(&t, 1, 57, false);
		assert_int_equal(
		    hpack__decode(&t, (const uint8_t *)bad[i].b, bad[i].len, false, &f), -EINVAL);
		assert_string_equal(f.method, "");
		assert_table(&t, 0, 0, true);
		hpack__free(&t);
	}
	/* the largest integer that fits, and the largest size update allowed */
	hpack__init(&t, true);
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x3f\xe1\xff\x03", 4, false, &f), 0);
	assert_int_equal(t.max, 65536);
	t.partial = true;
	assert_int_equal(
	    hpack__decode(&t, (const uint8_t *)"\xff\x80\xff\xff\xff\x0f", 6, false, &f), 0);
	assert_true(f.unknown);
	hpack__free(&t);
}

/* RFC 7541 4.1 sizes: name length from the static table, from a dynamic
 * entry or literal; a value's full length even when it is kept truncated. */
static void test_sizes(void **state)
{
	uint8_t b[256];
	struct hpack t;
	struct hp_fields f;
	char want[128];

	hpack__init(&t, true);
	/* :path (static 4) = "/x": 5 + 2 + 32 */
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x44\x02/x", 4, false, &f), 0);
	assert_string_equal(f.path, "/x");
	assert_table(&t, 1, 39, false);
	/* "custom-key: a", then the same name by index 62 with "bc" */
	assert_int_equal(hpack__decode(&t,
				       (const uint8_t *)"\x40\x0a"
							"custom-key\x01"
							"a",
				       14, false, &f),
			 0);
	assert_table(&t, 2, 39 + 43, false);
	assert_int_equal(hpack__decode(&t,
				       (const uint8_t *)"\x7e\x02"
							"bc",
				       4, false, &f),
			 0);
	assert_table(&t, 3, 39 + 43 + 44, false);
	/* ":method" as a literal name, then :path by index 65 (the oldest entry) */
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x40\x07:method\x03PUT\x7f\x02\x02/y",
				       18, false, &f),
			 0);
	assert_string_equal(f.method, "PUT");
	assert_string_equal(f.path, "/y");
	assert_table(&t, 5, 39 + 43 + 44 + 42 + 39, false);
	assert_int_equal(entry(&t, 1)->key, HP_K_METHOD);
	hpack__free(&t);

	/* a 100-byte path: kept as 63, sized as 100, raw and Huffman ("0" = 5 bits) */
	memset(want, '0', 100);
	want[HP_VAL_LEN - 1] = '\0';
	hpack__init(&t, true);
	b[0] = 0x44, b[1] = 100;
	memset(b + 2, '0', 100);
	assert_int_equal(hpack__decode(&t, b, 102, false, &f), 0);
	assert_string_equal(f.path, want);
	assert_string_equal(entry(&t, 0)->val, want);
	assert_table(&t, 1, 137, false);
	/* 100 five-bit codes: 63 bytes (500 bits, then 4 bits of padding) */
	b[0] = 0x44, b[1] = 0x80 | 63;
	memset(b + 2, 0, 63);
	b[64] = 0x0f;
	assert_int_equal(hpack__decode(&t, b, 65, false, &f), 0);
	assert_string_equal(f.path, want);
	assert_table(&t, 2, 274, false);
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\xbe", 1, false, &f), 0);
	assert_string_equal(f.path, want);
	/* a :method longer than its field */
	assert_int_equal(
	    hpack__decode(&t, (const uint8_t *)"\x42\x12MMMMMMMMMMMMMMMMMM", 20, false, &f), 0);
	assert_string_equal(f.method, "MMMMMMMMMMMMMMM");
	assert_string_equal(entry(&t, 0)->val, "MMMMMMMMMMMMMMMMMM");
	assert_table(&t, 3, 274 + 57, false);

	/* a size update to 200 evicts the oldest entry */
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x3f\xa9\x01", 3, false, &f), 0);
	assert_int_equal(t.max, 200);
	assert_table(&t, 2, 57 + 137, false);
	assert_int_equal(entry(&t, 0)->key, HP_K_METHOD);
	assert_int_equal(entry(&t, 1)->size, 137);
	hpack__free(&t);

	/* an entry larger than the table empties it and is not added */
	hpack__init(&t, true);
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x3f\x45\x44\x02/x", 6, false, &f), 0);
	assert_table(&t, 1, 39, false);
	assert_int_equal(hpack__decode(&t, b, 65, false, &f), 0);
	assert_string_equal(f.path, want);
	assert_table(&t, 0, 0, false);
	hpack__free(&t);
}

/* The ring grows while its newest entry is mid-array, and every index still
 * resolves to the entry it named before. */
static void test_ring(void **state)
{
	static const uint8_t shrink[] = {0x3f, 0xa9, 0x01, 0x3f, 0xe1, 0x1f}; /* 200, 4096 */
	uint8_t b[5] = {0x44, 0x03, '/'};
	struct hpack t;
	struct hp_fields f;
	char want[8];

	hpack__init(&t, true);
	for (int i = 0; i < 40; i++) {
		b[3] = (uint8_t)('0' + i / 10), b[4] = (uint8_t)('0' + i % 10);
		assert_int_equal(hpack__decode(&t, b, sizeof(b), false, &f), 0);
		if (i == 9) {
			/* keep the newest 5 of 40 bytes each: head stays mid-array */
			assert_int_equal(hpack__decode(&t, shrink, sizeof(shrink), false, &f), 0);
			assert_table(&t, 5, 200, false);
		}
	}
	assert_table(&t, 35, 35 * 40, false);
	for (uint8_t i = 0; i < 35; i++) {
		uint8_t idx = 0x80 | (62 + i);

		snprintf(want, sizeof(want), "/%02d", 39 - i);
		assert_string_equal(entry(&t, i)->val, want);
		assert_int_equal(hpack__decode(&t, &idx, 1, false, &f), 0);
		assert_string_equal(f.path, want);
	}
	hpack__free(&t);
}

/* A block cut anywhere: the fields before the cut, then a table that knows
 * nothing, since what followed may have inserted entries. */
static void test_cut(void **state)
{
	static const char blk[] = "\x82"		 /* :method GET */
				  "\x04\x0c/sample/path" /* :path, not indexed */
				  "\x41\x8c\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff"
				  "\x5f\x10"
				  "application/json" /* content-type, indexed */
				  "\xbe";
	static const size_t ends[] = {0, 1, 15, 29, 47, 48};
	size_t len = sizeof(blk) - 1;
	struct hpack t;
	struct hp_fields f;

	assert_int_equal(len, 48);
	for (size_t k = 0; k <= len; k++) {
		uint8_t *p = malloc(k ? k : 1);
		bool boundary = false;

		assert_non_null(p);
		memcpy(p, blk, k);
		hpack__init(&t, true);
		assert_int_equal(hpack__decode(&t, p, k, true, &f), 0);
		assert_string_equal(f.method, k >= 1 ? "GET" : "");
		assert_string_equal(f.path, k >= 15 ? "/sample/path" : "");
		assert_string_equal(f.authority, k >= 29 ? "www.example.com" : "");
		assert_string_equal(f.content_type, k >= 47 ? "application/json" : "");
		assert_false(f.unknown);
		assert_table(&t, 0, 0, true);
		hpack__free(&t);

		/* said whole, only a cut between representations decodes */
		for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
			boundary |= ends[i] == k;
		hpack__init(&t, true);
		assert_int_equal(hpack__decode(&t, p, k, false, &f), boundary ? 0 : -EINVAL);
		assert_int_equal(t.partial, !boundary);
		hpack__free(&t);
		free(p);
	}

	/* after a cut: a new entry is known, what lies behind it is not */
	hpack__init(&t, true);
	assert_int_equal(hpack__decode(&t, BLOCK(blk), true, &f), 0);
	assert_int_equal(hpack__decode(&t, BLOCK(c4_1), false, &f), 0);
	assert_string_equal(f.authority, "www.example.com");
	assert_table(&t, 1, 57, true);
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x82\xbe", 2, false, &f), 0);
	assert_string_equal(f.authority, "www.example.com");
	assert_false(f.unknown);
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x82\xbf\x84", 3, false, &f), 0);
	assert_string_equal(f.method, "GET");
	assert_string_equal(f.path, "/");
	assert_true(f.unknown);
	assert_table(&t, 1, 57, true);
	hpack__free(&t);
}

/* A connection seen from mid-stream. */
static void test_partial_start(void **state)
{
	struct hpack t;
	struct hp_fields f;

	hpack__init(&t, false);
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\xbe", 1, false, &f), 0);
	assert_true(f.unknown);
	assert_table(&t, 0, 0, true);

	/* an unknown name leaves the value unattributed; not indexed, the table stands */
	assert_int_equal(hpack__decode(&t, BLOCK(c4_1), false, &f), 0);
	assert_false(f.unknown);
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x0f\x30\x01x\xbe", 5, false, &f), 0);
	assert_true(f.unknown);
	assert_string_equal(f.authority, "www.example.com");
	assert_table(&t, 1, 57, true);
	/* indexed, its size is unknown and so is every index after it */
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x7f\x01\x01x\xbe", 5, false, &f), 0);
	assert_true(f.unknown);
	assert_string_equal(f.authority, "");
	assert_table(&t, 0, 0, true);

	/* a size update to 0 evicts whatever was there: the table is known again */
	assert_int_equal(hpack__decode(&t, BLOCK(c4_1), false, &f), 0);
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\x20\x3f\xe1\x1f", 4, false, &f), 0);
	assert_table(&t, 0, 0, false);
	assert_int_equal(t.max, 4096);
	assert_int_equal(hpack__decode(&t, (const uint8_t *)"\xbe", 1, false, &f), -EINVAL);
	hpack__free(&t);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 32);
}

static void check_invariants(const struct hpack *t, const struct hp_fields *f)
{
	assert_true(t->n <= t->cap);
	assert_true(t->size <= t->max);
	assert_int_equal(table_sum(t), t->size);
	for (uint32_t i = 0; i < t->n; i++) {
		assert_true(entry(t, i)->size >= 32);
		assert_true(memchr(entry(t, i)->val, '\0', HP_VAL_LEN) != NULL);
	}
	assert_true(memchr(f->method, '\0', sizeof(f->method)) != NULL);
	assert_true(memchr(f->path, '\0', sizeof(f->path)) != NULL);
	assert_true(memchr(f->authority, '\0', sizeof(f->authority)) != NULL);
	assert_true(memchr(f->content_type, '\0', sizeof(f->content_type)) != NULL);
}

/* Random blocks, in their own exact-size allocations so that AddressSanitizer
 * sees any read past them: random bytes, small bytes (short strings and
 * indices into the table) and RFC blocks with bytes changed or cut. */
static void test_random(void **state)
{
	static const char *const seeds[] = {c3_1, c3_3, c4_1, c4_3, c5_1, c5_3, c6_1, c6_3};
	struct hpack t;
	struct hp_fields f;
	char out[8];

	hpack__init(&t, true);
	for (int i = 0; i < 30000; i++) {
		size_t len = rng() % 200;
		uint8_t *p = malloc(len ? len : 1);
		int mode = rng() % 3, rc;

		assert_non_null(p);
		if (mode == 2) {
			const char *s = seeds[rng() % 8];
			size_t slen = strlen(s);

			len = len < slen ? len : slen;
			memcpy(p, s, len);
			for (int k = rng() % 4; k > 0 && len; k--)
				p[rng() % len] = (uint8_t)rng();
		} else {
			for (size_t k = 0; k < len; k++)
				p[k] = (uint8_t)(mode ? rng() & 0xc7 : rng());
		}
		if (i % 500 == 0) {
			hpack__free(&t);
			hpack__init(&t, rng() & 1);
		}
		rc = hpack__decode(&t, p, len, rng() & 1, &f);
		assert_true(rc == 0 || rc == -EINVAL);
		check_invariants(&t, &f);

		size_t outlen = rng() % sizeof(out);

		rc = hpack__huffman(p, len, outlen ? out : NULL, outlen);
		assert_true(rc >= -EINVAL);
		if (rc >= 0 && outlen)
			assert_int_equal(out[(size_t)rc < outlen ? (size_t)rc : outlen - 1], '\0');
		free(p);
	}
	hpack__free(&t);
}

/* A Huffman string that fails after filling the output (64 '0's, each
 * five zero bits, then EOS) leaves it terminated, whatever was there. */
static void test_huffman_fails_full(void **state)
{
	uint8_t in[44];
	char out[64];

	memset(in, 0, 40);
	memset(in + 40, 0xff, 4);
	memset(out, 'Z', sizeof(out));
	assert_true(hpack__huffman(in, sizeof(in), out, sizeof(out)) < 0);
	assert_int_equal(strnlen(out, sizeof(out)), sizeof(out) - 1);
	assert_int_equal(out[0], '0');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_huffman_rfc),
	    cmocka_unit_test(test_huffman_bytes),
	    cmocka_unit_test(test_huffman_invalid),
	    cmocka_unit_test(test_c2),
	    cmocka_unit_test(test_c3),
	    cmocka_unit_test(test_c4),
	    cmocka_unit_test(test_c5),
	    cmocka_unit_test(test_c6),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_ring),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_cut),
	    cmocka_unit_test(test_partial_start),
	    cmocka_unit_test(test_random),
	    cmocka_unit_test(test_huffman_fails_full),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
