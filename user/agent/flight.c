// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * The agent's flight recorder: the last seconds of records in memory (in
 * chunks dropped whole from the front), every metadata record since the
 * start (bounded), written as a recording that `critpath report` reads when
 * a slow request is exported: at most one per min_gap, the oldest file of
 * its own removed past max_files.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "flight.h"
#include "outfile.h"
#include "recording.h"

#define CHUNK_BYTES (1u << 20)

struct chunk {
	uint8_t *p;
	size_t n;
	uint64_t min_ts, max_ts;
};

struct flight {
	struct flight_opts o;
	struct recording_info info;
	struct chunk *ch;
	uint32_t head, nch, capch;
	uint64_t bytes;
	uint8_t *md;
	size_t nmd, capmd;
	uint64_t last_dump;
	char **files;
	uint32_t nfiles;
	struct flight_stats st;
};

struct flight *flight__new(const struct flight_opts *o, const struct recording_info *info)
{
	struct flight *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->o = *o;
	f->info = *info;
	f->files = calloc(o->max_files ? o->max_files : 1, sizeof(*f->files));
	if (!f->files) {
		free(f);
		return NULL;
	}
	return f;
}

static void drop_head(struct flight *f)
{
	struct chunk *c = &f->ch[f->head];

	f->bytes -= c->n;
	free(c->p);
	memset(c, 0, sizeof(*c));
	f->head++;
	f->nch--;
	if (!f->nch)
		f->head = 0;
}

int flight__add(struct flight *f, const struct cp_hdr *rec)
{
	struct chunk *c;

	if (rec->type >= CP_MD_PROCESS) { /* names of what the events refer to: kept */
		if (f->nmd + rec->size > f->o.max_md_bytes) {
			f->st.md_dropped++;
			return 0;
		}
		if (f->nmd + rec->size > f->capmd) {
			size_t cap = f->capmd ? f->capmd * 2 : 65536;
			uint8_t *p;

			while (cap < f->nmd + rec->size)
				cap *= 2;
			if (!(p = realloc(f->md, cap)))
				return -ENOMEM;
			f->md = p;
			f->capmd = cap;
		}
		memcpy(f->md + f->nmd, rec, rec->size);
		f->nmd += rec->size;
		return 0;
	}
	c = f->nch ? &f->ch[f->head + f->nch - 1] : NULL;
	if (!c || c->n + rec->size > CHUNK_BYTES) {
		if (f->head && f->head + f->nch == f->capch) { /* slide to the front */
			memmove(f->ch, f->ch + f->head, f->nch * sizeof(*f->ch));
			f->head = 0;
		}
		if (f->head + f->nch == f->capch) {
			uint32_t cap = f->capch ? f->capch * 2 : 16;
			struct chunk *p = realloc(f->ch, cap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			f->ch = p;
			f->capch = cap;
		}
		c = &f->ch[f->head + f->nch];
		memset(c, 0, sizeof(*c));
		if (!(c->p = malloc(CHUNK_BYTES)))
			return -ENOMEM;
		c->min_ts = rec->ts;
		f->nch++;
	}
	memcpy(c->p + c->n, rec, rec->size);
	c->n += rec->size;
	if (rec->ts > c->max_ts)
		c->max_ts = rec->ts;
	f->bytes += rec->size;
	/* older than the window, or over the memory bound: the oldest chunk goes */
	while (f->nch > 1 && (f->ch[f->head].max_ts + f->o.keep_ns < c->max_ts ||
			      f->bytes > f->o.max_bytes))
		drop_head(f);
	return 0;
}

int flight__dump(struct flight *f, uint64_t now, uint64_t lost, char *path, size_t len)
{
	struct recording_writer *w = NULL;
	struct recording_totals t = {0};
	struct recording_info info = f->info;
	struct chunk *last;
	struct outfile of;
	char stamp[32], name[NAME_MAX];
	time_t wall = time(NULL);
	struct tm tm;
	int err;

	path[0] = '\0';
	if (!f->nch)
		return 0;
	if (f->last_dump && now < f->last_dump + f->o.min_gap_ns) {
		f->st.skipped++;
		return 0;
	}
	f->last_dump = now;
	gmtime_r(&wall, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(name, sizeof(name), "flight-%s-%llu.rec", stamp,
		 (unsigned long long)f->st.written);
	snprintf(path, len, "%s/%s", f->o.dir, name);
	info.start_ns = f->ch[f->head].min_ts;
	/* under a name of its own until complete: never a cut file */
	err = outfile__create(&of, f->o.dirfd, name);
	if (!err)
		err = recording_writer__open_fd(&w, outfile__take(&of), &info);
	for (size_t o = 0; !err && o < f->nmd; o += ((const struct cp_hdr *)(f->md + o))->size)
		err = recording_writer__append(w, (const struct cp_hdr *)(f->md + o));
	for (uint32_t i = 0; !err && i < f->nch; i++) {
		const struct chunk *c = &f->ch[f->head + i];

		for (size_t o = 0; !err && o < c->n; o += ((const struct cp_hdr *)(c->p + o))->size)
			err = recording_writer__append(w, (const struct cp_hdr *)(c->p + o));
	}
	last = &f->ch[f->head + f->nch - 1];
	t.end_ns = last->max_ts;
	t.lost = lost;
	if (w)
		err = recording_writer__close(w, &t) ?: err;
	err = outfile__close(&of, err);
	if (err) {
		f->st.failed++;
		return err;
	}
	/* the disk bound: the oldest file of ours goes */
	if (f->o.max_files) {
		if (f->nfiles == f->o.max_files) {
			unlinkat(f->o.dirfd, f->files[0], 0);
			free(f->files[0]);
			memmove(f->files, f->files + 1, (f->nfiles - 1) * sizeof(*f->files));
			f->nfiles--;
			f->st.removed++;
		}
		f->files[f->nfiles] = strdup(name);
		if (f->files[f->nfiles])
			f->nfiles++;
	}
	f->st.written++;
	return 0;
}

void flight__stats(const struct flight *f, struct flight_stats *s)
{
	*s = f->st;
}

void flight__free(struct flight *f)
{
	if (!f)
		return;
	while (f->nch)
		drop_head(f);
	for (uint32_t i = 0; i < f->nfiles; i++)
		free(f->files[i]);
	free(f->files);
	free(f->ch);
	free(f->md);
	free(f);
}
