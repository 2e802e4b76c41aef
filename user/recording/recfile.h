/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Internal to the recording reader and dump: record validation. */
#ifndef CRITPATH_RECFILE_H
#define CRITPATH_RECFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "critpath_abi.h"
#include "recording.h"

/* The smallest valid hdr.size of a record type (24 for types not known). */
size_t recfile__min_size(uint16_t type);
/* NULL when rec's size lets a reader step over it, else why not. */
const char *recfile__check_walk(const struct cp_hdr *rec, size_t avail);
/* NULL when rec fits its type, else why not; fix NUL-terminates its strings. */
const char *recfile__check_type(struct cp_hdr *rec, bool fix);

ssize_t recfile__read_at(int fd, void *buf, size_t len, uint64_t off);

#define RECFILE_OPEN_ERROR_LEN 512
extern __thread char recfile_open_error[RECFILE_OPEN_ERROR_LEN];
int recfile__read_header(int fd, const char *path, struct recording_info *info, char **strings,
			 struct recording_cpu **cpus, uint64_t *data_off);

#endif /* CRITPATH_RECFILE_H */
