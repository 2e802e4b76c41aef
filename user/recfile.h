/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Internal to the recording reader and dump: record validation. */
#ifndef CRITPATH_RECFILE_H
#define CRITPATH_RECFILE_H

#include <stddef.h>
#include <stdint.h>

#include "../include/critpath_abi.h"

/* The smallest valid hdr.size of a record type (24 for types not known). */
size_t recfile__min_size(uint16_t type);
/* NULL when rec (avail bytes left in its frame) is whole and its variable
 * parts stay inside it, else why not. Also NUL-terminates its fixed-size
 * strings in place, so readers can print them as C strings. */
const char *recfile__check(struct cp_hdr *rec, size_t avail);

#endif /* CRITPATH_RECFILE_H */
