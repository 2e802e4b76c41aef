// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * The block scan (span/blocks.c) against a byte-by-byte reference: where
 * an object or array ends, with strings holding brackets, quotes and runs
 * of backslashes placed across the 64-byte block edges, fed in pieces the
 * way span/scan.c feeds it. Both the AVX2 (when the CPU has it) and the
 * portable variant.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "span_internal.h"

typedef bool (*scan_fn)(const char *, size_t *, size_t, struct span_block_state *, size_t *);

/* The index after the bracket closing the container at b[0], or 0. */
static size_t reference_end(const char *b, size_t n)
{
	long depth = 0;
	bool in_str = false;

	for (size_t i = 0; i < n; i++) {
		char c = b[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[') {
			depth++;
		} else if ((c == '}' || c == ']') && --depth == 0) {
			return i + 1;
		}
	}
	return 0;
}

static uint64_t rng = 88172645463325252ull;

static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

/* A random nested value: strings full of what could confuse the scan. */
static void gen(char *b, size_t cap, size_t *o, int depth)
{
	bool obj = rnd(2);
	int n = rnd(6);

	b[(*o)++] = obj ? '{' : '[';
	for (int k = 0; k < n && *o + 200 < cap; k++) {
		if (k)
			b[(*o)++] = ',';
		if (obj)
			*o += sprintf(b + *o, "\"k%d\":", k);
		if (depth < 6 && rnd(3) == 0) {
			gen(b, cap, o, depth + 1);
		} else if (rnd(2)) {
			int len = rnd(90);

			b[(*o)++] = '"';
			for (int j = 0; j < len; j++) {
				static const char pick[] = "ab{}[]\",:\\ ";
				char c = pick[rnd(sizeof(pick) - 1)];

				if (c == '"' || c == '\\') { /* escaped; sometimes a run */
					int run = 1 + 2 * rnd(3);

					for (int r = 0; r < run; r++)
						b[(*o)++] = '\\';
				}
				b[(*o)++] = c;
			}
			b[(*o)++] = '"';
		} else {
			*o += sprintf(b + *o, "%u", rnd(100000));
		}
	}
	b[(*o)++] = obj ? '}' : ']';
}

static void check(scan_fn fn)
{
	enum { CAP = 1 << 16 };
	char *b = malloc(CAP + 64);

	for (int t = 0; t < 3000; t++) {
		size_t n = 0, want, end = 0, i = 0, step = 1 + rnd(300);
		struct span_block_state st = {0};
		bool found = false;

		gen(b, CAP, &n, 0);
		n += sprintf(b + n, " ,{\"after\":1}"); /* what follows must not matter */
		want = reference_end(b, n);
		assert_true(want > 0);
		/* in pieces, as more input arrives; the last piece padded with spaces */
		for (size_t hi = step; !found; hi += step) {
			if (hi >= n) {
				char tail[64];
				size_t t0 = 0;

				for (; !found && i + 64 <= n;)
					found = fn(b, &i, n, &st, &end);
				if (found)
					break;
				memset(tail, ' ', sizeof(tail));
				memcpy(tail, b + i, n - i);
				found = fn(tail, &t0, sizeof(tail), &st, &end);
				end += i;
				break;
			}
			found = fn(b, &i, hi, &st, &end);
		}
		if (!found || end != want)
			fail_msg("case %d: found %d end %zu, want %zu: %.*s", t, found, end, want,
				 (int)n, b);
	}
	free(b);
}

static void test_dispatched(void **state)
{
	check(span_blocks__scan);
}

static void test_portable(void **state)
{
	check(span_blocks__scan_portable);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dispatched),
	    cmocka_unit_test(test_portable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
