// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The files a root tool writes (record's recording, report -o, the agent's
 * profile windows and flight recordings) and the directories it writes them
 * into: no symbolic link followed, no other user's file overwritten, 0600;
 * a file is complete or not there (written under a temporary name, renamed
 * into place), and a write error is the system's, not stdio's EIO. */
#ifndef CRITPATH_OUTFILE_H
#define CRITPATH_OUTFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct stat;

/* path opened to be written in place (a recording, which keeps what was
 * written when the disk fills): no symbolic link, no other user's file or
 * one with other hard links; a file of one's own truncated and made 0600,
 * a device written as it is. The fd, or -errno (output__why says it). */
int output__open(const char *path, struct stat *st);
const char *output__why(int err);

struct outfile {
	int dirfd;
	int fd;	 /* -1 once handed over (outfile__take) */
	FILE *f; /* outfile__stream's */
	int err; /* the first write error, -errno */
	bool own_dir, replace, keep_fd;
	char tmp[NAME_MAX + 1];	 /* written under this name; "" when in place */
	char name[NAME_MAX + 1]; /* renamed to this one when complete */
};

/* name in the directory dirfd, created as a temporary file of its own
 * there (O_EXCL, O_NOFOLLOW, 0600); renamed to name by outfile__close,
 * which never replaces a file already there. 0 or -errno. */
int outfile__create(struct outfile *o, int dirfd, const char *name);
/* path as report -o takes it: output__open's refusals; a file there is
 * replaced only once the new one is complete; a device is written as it
 * is. 0 or -errno (output__why says it). */
int outfile__open(struct outfile *o, const char *path);
/* Standard output, for its write errors as the system says them. */
void outfile__stdout(struct outfile *o);
/* A stdio stream over the file; its write errors are kept in o->err. NULL
 * when out of memory. */
FILE *outfile__stream(struct outfile *o);
/* The fd, now the caller's to write and close (a recording writer's);
 * outfile__close still renames or removes the file. */
int outfile__take(struct outfile *o);
/* Flushed, synced, closed and renamed into place when nothing failed (err:
 * the writer's own verdict), else removed. The first error, the system's
 * write error before the writer's: 0 or -errno. */
int outfile__close(struct outfile *o, int err);

/* A directory the agent writes into as root, made 0700 when missing;
 * refused when it is a symbolic link, not a directory, another user's,
 * writable by group or others, or not writable. Its fd (O_DIRECTORY,
 * O_NOFOLLOW: a link put there later is not followed), or -errno with why
 * saying what is wrong. */
int outdir__open(const char *path, char *why, size_t len);

#endif
