// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The building blocks every module uses: growing arrays, hashing, an open
 * addressing index over the caller's entries, a map from 64-bit keys,
 * interned strings, UTF-8 checks. */
#ifndef CRITPATH_UTIL_H
#define CRITPATH_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* *arr grown to hold need elements, its capacity doubled from *cap (from
 * first when 0); -ENOMEM leaves it as it was. */
int grow_array(void **arr, uint32_t *cap, uint32_t need, size_t elem, uint32_t first);

/* Interned strings: equal contents give one pointer, valid until
 * intern__free. NULL stays NULL. */
struct intern;
struct intern *intern__new(void);
void intern__free(struct intern *in);
const char *intern__get(struct intern *in, const char *s);

/* A string's hash, eight bytes a step (hashed for every span). NULL as "". */
/* CLOCK_MONOTONIC now, in ns */
uint64_t clock__mono_ns(void);
uint64_t hash__cstr(const char *s);
/* s's hash mixed into h (NULL has its own) */
uint64_t hash__str(uint64_t h, const char *s);
static inline uint64_t hash__u64(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

/* a + b, a - b held at INT64_MIN or INT64_MAX where they do not fit (times
 * and offsets a forged recording states) */
static inline int64_t i64__add_sat(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b < 0 ? INT64_MIN : INT64_MAX;
	return r;
}

static inline int64_t i64__sub_sat(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* open addressing: slot = index + 1, 0 = empty */
struct index {
	uint32_t *slots;
	uint32_t cap;
};

/* Finds the slot for hash whose entry eq() accepts, or the empty slot
 * where it goes. */
static inline uint32_t *index__find(struct index *ix, uint64_t hash,
				    bool (*eq)(const void *ctx, uint32_t i), const void *ctx)
{
	uint32_t j = (uint32_t)hash & (ix->cap - 1);

	while (ix->slots[j]) {
		if (eq(ctx, ix->slots[j] - 1))
			return &ix->slots[j];
		j = (j + 1) & (ix->cap - 1);
	}
	return &ix->slots[j];
}

/* Empties *slot (from index__find), moving back the entries after it that
 * probed past it; hashes come from hash_of(i). */
static inline void index__del(struct index *ix, uint32_t *slot,
			      uint64_t (*hash_of)(const void *, uint32_t), const void *ctx)
{
	uint32_t mask = ix->cap - 1, i = (uint32_t)(slot - ix->slots), j = i, home;

	ix->slots[i] = 0;
	for (;;) {
		j = (j + 1) & mask;
		if (!ix->slots[j])
			return;
		home = (uint32_t)hash_of(ctx, ix->slots[j] - 1) & mask;
		/* stays when its home lies cyclically in (i, j] */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		ix->slots[i] = ix->slots[j];
		ix->slots[j] = 0;
		i = j;
	}
}

/* Keeps the load under 1/2 with room for `more` entries after the n there
 * are; hashes come from hash_of(i). */
static inline int index__reserve_more(struct index *ix, uint32_t n, uint32_t more,
				      uint64_t (*hash_of)(const void *, uint32_t), const void *ctx)
{
	uint32_t cap = ix->cap ? ix->cap : 256, *slots;

	if (ix->cap && (n + more + 1) * 2 <= ix->cap)
		return 0;
	while ((n + more + 1) * 2 > cap)
		cap *= 2;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t j = (uint32_t)hash_of(ctx, i) & (cap - 1);

		while (slots[j])
			j = (j + 1) & (cap - 1);
		slots[j] = i + 1;
	}
	free(ix->slots);
	ix->slots = slots;
	ix->cap = cap;
	return 0;
}

/* 64-bit keys to 32-bit values (U64MAP_NONE: absent), linear probing with
 * the keys in the table (a probe touches no entry) and backward-shift delete.
 * Zeroed is empty. */
#define U64MAP_NONE UINT32_MAX
struct u64map {
	uint64_t *keys;
	uint32_t *vals;
	uint32_t cap, n; /* cap is a power of two */
};
int u64map__put(struct u64map *m, uint64_t key, uint32_t val);
uint32_t u64map__get(const struct u64map *m, uint64_t key);
void u64map__del(struct u64map *m, uint64_t key);
void u64map__free(struct u64map *m);

/* "20ms", "1.5s", "250us" (ns, us, µs, ms, s, m, min, h; a bare number
 * only when 0) → *ns; -EINVAL otherwise. */
int parse_duration(const char *s, uint64_t *ns);

/* The length of the UTF-8 sequence at s (left bytes), or 0 when it is not
 * one: a stray or cut continuation, an overlong form, a surrogate, past
 * U+10FFFF. Every output that must be UTF-8 (JSON, OTLP strings, text)
 * replaces such a byte by U+FFFD or escapes it. */
size_t utf8__seq(const unsigned char *s, size_t left);
/* s[0..n) is UTF-8 as a whole */
bool utf8__valid(const char *s, size_t n);
/* s[0..n) with every invalid byte as U+FFFD, into out (3n bytes at most);
 * its length */
size_t utf8__repair(const char *s, size_t n, char *out);

#endif /* CRITPATH_UTIL_H */
