/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* How dump prints one record: one field list as JSON or as key=value text. */
#ifndef CRITPATH_DUMP_FMT_H
#define CRITPATH_DUMP_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "recording.h"

struct jline {
	FILE *f;
	bool json;
	bool first;
};

void jline__begin(struct jline *j, FILE *f);
void jline__end(struct jline *j);
void jline__key(struct jline *j, const char *key);
void jline__str(struct jline *j, const char *key, const char *s); /* NULL → null */
void jline__strn(struct jline *j, const char *key, const char *s, size_t max);
/* Bytes as a string: printable ASCII as is, every other byte \u00XX (so
 * each code point is one byte value). */
void jline__bytes(struct jline *j, const char *key, const uint8_t *p, size_t n);
/* A JSON string value with no key (an array's element); NULL → null */
void jline__quoted(FILE *f, const char *s);
void jline__u64(struct jline *j, const char *key, uint64_t v);
void jline__i64(struct jline *j, const char *key, int64_t v);
void jline__bool(struct jline *j, const char *key, bool v);

/* dump --requests: the requests of paths analysed together, with their
 * wire, as JSON lines (dump_req.c); 0 or -errno */
int dump__requests(const char *const *paths, int npaths, FILE *out);

/* One line for rec: JSON, or text with times relative to info->start_ns. */
void dump__json(FILE *out, const struct cp_hdr *rec);
void dump__text(FILE *out, const struct recording_info *info, const struct cp_hdr *rec);

#endif /* CRITPATH_DUMP_FMT_H */
