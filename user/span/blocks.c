// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Where a JSON object or array ends, found 64 bytes at a time without
 * looking at each byte (span/scan.c cuts its input into traces with it):
 * masks of quotes, backslashes and brackets; the quotes that are not
 * escaped, prefix-XORed, mask out the strings; the depth is counted with
 * popcounts, and bits are walked one by one only in a block where the depth
 * can reach zero. This is the idea of simdjson's first stage (Langdale and
 * Lemire), kept to what finding the end needs.
 *
 * The masks come from AVX2 where the CPU has it (chosen once, at run time),
 * else from SSE2 (every x86-64), else from a plain loop.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_VARIANT 1
#endif

#include "span_internal.h"

/* Without -mpopcnt, __builtin_popcount is a call into libgcc; GCC turns
 * this into POPCNT where the target has it. */
static inline int popcount64(uint64_t x)
{
	x -= (x >> 1) & 0x5555555555555555ull;
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (int)((x * 0x0101010101010101ull) >> 56);
}

/* The characters escaped by a backslash (rare: a loop is fine). */
static uint64_t escaped_chars(uint64_t bslash, bool *carry)
{
	uint64_t esc = 0;

	if (*carry) {
		esc = 1;
		bslash &= ~(uint64_t)1; /* an escaped backslash escapes nothing */
	}
	*carry = false;
	while (bslash) {
		int i = __builtin_ctzll(bslash);

		if (i == 63) {
			*carry = true;
			break;
		}
		esc |= (uint64_t)1 << (i + 1);
		bslash &= ~((uint64_t)3 << i);
	}
	return esc;
}

static inline uint64_t prefix_xor(uint64_t x)
{
	x ^= x << 1;
	x ^= x << 2;
	x ^= x << 4;
	x ^= x << 8;
	x ^= x << 16;
	x ^= x << 32;
	return x;
}

/* One block's masks: true when the value's closing bracket is in it, at
 * *off. */
static inline __attribute__((always_inline)) bool step(uint64_t quote, uint64_t bslash,
						       uint64_t open, uint64_t close,
						       struct span_block_state *st, unsigned *off)
{
	uint64_t in;
	int nclose;

	if (bslash || st->escape)
		quote &= ~escaped_chars(bslash, &st->escape);
	in = prefix_xor(quote) ^ st->in_string;
	st->in_string = (uint64_t)((int64_t)in >> 63);
	open &= ~in;
	close &= ~in;
	nclose = popcount64(close);
	if (st->depth > nclose) { /* cannot reach 0 in this block */
		st->depth += popcount64(open) - nclose;
		return false;
	}
	for (uint64_t all = open | close; all; all &= all - 1) {
		unsigned i = __builtin_ctzll(all);

		if (open >> i & 1) {
			st->depth++;
		} else if (--st->depth == 0) {
			*off = i;
			return true;
		}
	}
	return false;
}

/* '[' | 0x20 == '{' and ']' | 0x20 == '}'; no other byte maps there. */
bool span_blocks__scan_portable(const char *buf, size_t *pi, size_t hi, struct span_block_state *st,
				size_t *end)
{
	size_t i = *pi;
	unsigned off;

	for (; i + 64 <= hi; i += 64) {
		const char *b = buf + i;
		uint64_t q = 0, bs = 0, o = 0, c = 0;

#ifdef __SSE2__
		const __m128i kq = _mm_set1_epi8('"'), kb = _mm_set1_epi8('\\');
		const __m128i k20 = _mm_set1_epi8(0x20), ko = _mm_set1_epi8('{');
		const __m128i kc = _mm_set1_epi8('}');

		for (int k = 0; k < 4; k++) {
			__m128i v = _mm_loadu_si128((const __m128i *)(b + 16 * k));
			__m128i l = _mm_or_si128(v, k20);

			q |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, kq))
			     << (16 * k);
			bs |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, kb))
			      << (16 * k);
			o |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(l, ko))
			     << (16 * k);
			c |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(l, kc))
			     << (16 * k);
		}
#else
		for (int k = 0; k < 64; k++) {
			char ch = b[k];

			q |= (uint64_t)(ch == '"') << k;
			bs |= (uint64_t)(ch == '\\') << k;
			o |= (uint64_t)((ch | 0x20) == '{') << k;
			c |= (uint64_t)((ch | 0x20) == '}') << k;
		}
#endif
		if (step(q, bs, o, c, st, &off)) {
			*end = i + off + 1;
			return true;
		}
	}
	*pi = i;
	return false;
}

#ifdef HAVE_AVX2_VARIANT
__attribute__((target("avx2,popcnt"))) static bool
scan_avx2(const char *buf, size_t *pi, size_t hi, struct span_block_state *st, size_t *end)
{
	const __m256i kq = _mm256_set1_epi8('"'), kb = _mm256_set1_epi8('\\');
	const __m256i k20 = _mm256_set1_epi8(0x20), ko = _mm256_set1_epi8('{');
	const __m256i kc = _mm256_set1_epi8('}');
	size_t i = *pi;
	unsigned off;

	for (; i + 64 <= hi; i += 64) {
		__m256i v0 = _mm256_loadu_si256((const __m256i *)(buf + i));
		__m256i v1 = _mm256_loadu_si256((const __m256i *)(buf + i + 32));
		__m256i l0 = _mm256_or_si256(v0, k20), l1 = _mm256_or_si256(v1, k20);
#define MASK(a, b, k)                                                                              \
	((uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(a, k)) |                       \
	 (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, k)) << 32)

		if (step(MASK(v0, v1, kq), MASK(v0, v1, kb), MASK(l0, l1, ko), MASK(l0, l1, kc), st,
			 &off)) {
			*end = i + off + 1;
			return true;
		}
#undef MASK
	}
	*pi = i;
	return false;
}
#endif

bool span_blocks__scan(const char *buf, size_t *i, size_t hi, struct span_block_state *st,
		       size_t *end)
{
#ifdef HAVE_AVX2_VARIANT
	static int avx2 = -1;

	if (avx2 < 0)
		avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
	if (avx2)
		return scan_avx2(buf, i, hi, st, end);
#endif
	return span_blocks__scan_portable(buf, i, hi, st, end);
}
