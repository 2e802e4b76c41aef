// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* --format folded: "frame;frame;category value" per stack for flamegraph.pl and
 * speedscope; the value is total ns. */
#include <errno.h>
#include <stdio.h>

#include "engine.h"

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
