// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * --format folded: one line per frame stack, "frame;frame;category value",
 * the input of flamegraph.pl and speedscope. The value is the stack's total
 * critical-path time in nanoseconds (integers, as both tools want; divide by
 * the request count for the average path). The category is the leaf frame.
 */
#include <errno.h>
#include <stdio.h>

#include "engine.h"

/* ';' separates frames and the last ' ' the value: a ';' or a line break
 * inside a name would split it, so they become ':' and ' '. */
static void put_frame(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		char c = *s;

		if (c == ';')
			c = ':';
		else if (c == '\n' || c == '\r' || c == '\t')
			c = ' ';
		fputc(c, f);
	}
}

int out_folded(FILE *f, const struct engine_result *r, const struct out_opts *o)
{
	for (uint32_t i = 0; i < r->nprofile; i++) {
		const struct engine_profile_entry *p = &r->profile[i];

		for (uint32_t k = 0; k < p->nframes; k++) {
			put_frame(f, p->frames[k]);
			fputc(';', f);
		}
		fprintf(f, "%s %llu\n", cp_category_name(p->category),
			(unsigned long long)p->total_ns);
	}
	if (fflush(f) || ferror(f))
		return -EIO;
	return 0;
}
