/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* A thin layer over yajl_gen: straight to a FILE, the first error sticks,
 * invalid UTF-8 replaced. */
#ifndef CRITPATH_OUT_YAJL_H
#define CRITPATH_OUT_YAJL_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>

#include "model.h"

struct jw {
	yajl_gen g;
	FILE *f;
	int err; /* first error, -errno */
	int html_safe;
};

static inline void jw__write(struct jw *w, const char *s, size_t len)
{
	if (!w->err && len && fwrite(s, 1, len, w->f) != len)
		w->err = -errno ?: -EIO;
}

/* html_safe: "<" written as \u003c, so no "</script>" can end the data island. */
static inline void jw__print(void *ctx, const char *s, size_t len)
{
	struct jw *w = ctx;
	const char *lt;

	if (!w->html_safe) {
		jw__write(w, s, len);
		return;
	}
	while (len && (lt = memchr(s, '<', len))) {
		jw__write(w, s, lt - s);
		jw__write(w, "\\u003c", 6);
		len -= lt - s + 1;
		s = lt + 1;
	}
	jw__write(w, s, len);
}

static inline int jw__init(struct jw *w, FILE *f, int html_safe)
{
	w->f = f;
	w->err = 0;
	w->html_safe = html_safe;
	w->g = yajl_gen_alloc(NULL);
	if (!w->g)
		return -ENOMEM;
	yajl_gen_config(w->g, yajl_gen_print_callback, jw__print, w);
	yajl_gen_config(w->g, yajl_gen_validate_utf8, 1);
	return 0;
}

static inline int jw__finish(struct jw *w)
{
	if (w->g)
		yajl_gen_free(w->g);
	w->g = NULL;
	return w->err;
}

static inline void jw__check(struct jw *w, yajl_gen_status st)
{
	if (st != yajl_gen_status_ok && !w->err)
		w->err = st == yajl_gen_in_error_state ? -EIO : -EINVAL;
}

static inline void jw__str(struct jw *w, const char *s)
{
	yajl_gen_status st;
	size_t len, i;
	char *copy;

	if (w->err)
		return;
	if (!s) {
		jw__check(w, yajl_gen_null(w->g));
		return;
	}
	len = strlen(s);
	st = yajl_gen_string(w->g, (const unsigned char *)s, len);
	if (st != yajl_gen_invalid_string) {
		jw__check(w, st);
		return;
	}
	copy = strdup(s);
	if (!copy) {
		w->err = -ENOMEM;
		return;
	}
	for (i = 0; i < len; i++)
		if ((unsigned char)copy[i] >= 0x80)
			copy[i] = '?';
	jw__check(w, yajl_gen_string(w->g, (const unsigned char *)copy, len));
	free(copy);
}

static inline void jw__key(struct jw *w, const char *k)
{
	jw__str(w, k);
}

static inline void jw__int(struct jw *w, int64_t v)
{
	if (!w->err)
		jw__check(w, yajl_gen_integer(w->g, v));
}

static inline void jw__bool(struct jw *w, int v)
{
	if (!w->err)
		jw__check(w, yajl_gen_bool(w->g, v));
}

/* A number given as text (fixed-point microseconds, unsigned 64-bit) */
static inline void jw__raw_num(struct jw *w, const char *num)
{
	if (!w->err)
		jw__check(w, yajl_gen_number(w->g, num, strlen(num)));
}

/* ns as microseconds with three decimals, exact (no double rounding) */
static inline void jw__us(struct jw *w, uint64_t ns)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
	jw__raw_num(w, buf);
}

static inline void jw__map_open(struct jw *w)
{
	if (!w->err)
		jw__check(w, yajl_gen_map_open(w->g));
}

static inline void jw__map_close(struct jw *w)
{
	if (!w->err)
		jw__check(w, yajl_gen_map_close(w->g));
}

static inline void jw__arr_open(struct jw *w)
{
	if (!w->err)
		jw__check(w, yajl_gen_array_open(w->g));
}

static inline void jw__arr_close(struct jw *w)
{
	if (!w->err)
		jw__check(w, yajl_gen_array_close(w->g));
}

/* "k": s, when there is an s */
static inline void jw__opt_str(struct jw *w, const char *k, const char *s)
{
	if (s) {
		jw__key(w, k);
		jw__str(w, s);
	}
}

/* "k": v, when v is one (not negative) */
static inline void jw__opt_int(struct jw *w, const char *k, int64_t v)
{
	if (v >= 0) {
		jw__key(w, k);
		jw__int(w, v);
	}
}

/* A segment's culprits, "culprits": [{comm, pid, tid, ns}, ...], when it
 * has any */
static inline void jw__culprits(struct jw *w, const struct cp_culprit *c, uint32_t n)
{
	if (!n)
		return;
	jw__key(w, "culprits");
	jw__arr_open(w);
	for (uint32_t i = 0; i < n; i++) {
		jw__map_open(w);
		jw__key(w, "comm");
		jw__str(w, c[i].comm);
		jw__key(w, "pid");
		jw__int(w, c[i].pid);
		jw__key(w, "tid");
		jw__int(w, c[i].tid);
		jw__key(w, "ns");
		jw__int(w, (int64_t)c[i].ns);
		jw__map_close(w);
	}
	jw__arr_close(w);
}

#endif /* CRITPATH_OUT_YAJL_H */
