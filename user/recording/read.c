// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The recording reader (layout: top of write.c), a fuzzing target: lengths
 * checked before use, damage skipped. Frames are merged in time order within
 * a window of headers read ahead; a helper thread prepares the next frame. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lz4frame.h>
#include <zlib.h>
#include <zstd.h>

#include "recfile.h"
#include "recfile_format.h"
#include "recording.h"

#include "read_int.h"

bool recording__sniff(const void *head, size_t len)
{
	return head && len >= REC_MAGIC_LEN && !memcmp(head, REC_MAGIC, REC_MAGIC_LEN);
}

__attribute__((format(printf, 2, 3))) static void reader__problem(struct recording_reader *r,
								  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->nproblems ? r->last : r->first, MSG_LEN, fmt, ap);
	va_end(ap);
	r->nproblems++;
}


static bool fhdr__parse(const uint8_t *b, uint64_t off, struct fhdr *h)
{
	if (rec_get32(b + RF_MAGIC) != REC_FRAME_MAGIC ||
	    crc32(0, b, RF_CRC) != rec_get32(b + RF_CRC))
		return false;
	h->off = off;
	h->seq = rec_get32(b + RF_SEQ);
	h->comp = rec_get32(b + RF_COMP);
	h->raw = rec_get32(b + RF_RAW);
	h->count = rec_get32(b + RF_COUNT);
	h->flags = rec_get32(b + RF_FLAGS);
	h->comp_crc = rec_get32(b + RF_COMP_CRC);
	h->min_ts = rec_get64(b + RF_MIN_TS);
	h->max_ts = rec_get64(b + RF_MAX_TS);
	return true;
}

static const char *fhdr__insane(const struct fhdr *h)
{
	if (!h->count || h->raw < h->count * (uint64_t)sizeof(struct cp_hdr))
		return "record count does not fit its size";
	if (h->raw > REC_FRAME_RAW_MAX || h->raw % 8)
		return "raw size out of range";
	if (h->flags & ~REC_FRAME_F_LZ4)
		return "unknown frame flags";
	if (!h->comp || h->comp > (h->flags & REC_FRAME_F_LZ4 ? rec_lz4_bound(h->raw)
							      : ZSTD_compressBound(h->raw)))
		return "compressed size out of range";
	if (h->min_ts > h->max_ts)
		return "time range inverted";
	return NULL;
}

static bool trailer__parse(const uint8_t *b, struct recording_totals *t, uint64_t *records)
{
	if (rec_get32(b + RT_MAGIC) != REC_TRAILER_MAGIC ||
	    crc32(0, b, RT_CRC) != rec_get32(b + RT_CRC))
		return false;
	t->frames = rec_get32(b + RT_FRAMES);
	t->end_ns = rec_get64(b + RT_END_NS);
	t->events = rec_get64(b + RT_EVENTS);
	t->metadata = rec_get64(b + RT_METADATA);
	t->lost = rec_get64(b + RT_LOST);
	if (records)
		*records = rec_get64(b + RT_RECORDS);
	return true;
}

static bool reader__resync(struct recording_reader *r)
{
	uint8_t *buf = malloc(RESYNC_CHUNK + REC_TRAILER_SIZE);
	uint64_t pos = r->off + 1;
	bool found = false;

	if (!buf)
		return false;
	for (;;) {
		ssize_t n = recfile__read_at(r->fd, buf, RESYNC_CHUNK + REC_TRAILER_SIZE, pos);
		if (n < 4)
			break;
		for (ssize_t i = 0; i + 4 <= n && i < RESYNC_CHUNK; i++) {
			uint32_t m;
			uint8_t cand[REC_TRAILER_SIZE];
			struct fhdr h;
			ssize_t got;

			if (buf[i] != 'C' || buf[i + 1] != 'P')
				continue;
			m = rec_get32(buf + i);
			if (m != REC_FRAME_MAGIC && m != REC_TRAILER_MAGIC)
				continue;
			got = recfile__read_at(r->fd, cand, sizeof(cand), pos + i);
			if (m == REC_FRAME_MAGIC && got >= REC_FRAME_HDR_SIZE &&
			    fhdr__parse(cand, pos + i, &h) && !fhdr__insane(&h))
				found = true;
			if (m == REC_TRAILER_MAGIC && got == REC_TRAILER_SIZE &&
			    trailer__parse(cand, &(struct recording_totals){}, NULL))
				found = true;
			if (found) {
				r->bytes_skipped += pos + i - r->off;
				r->off = pos + i;
				goto out;
			}
		}
		if (n < RESYNC_CHUNK + REC_TRAILER_SIZE)
			break;
		pos += RESYNC_CHUNK;
	}
out:
	free(buf);
	return found;
}

static void ahead__update_min(struct recording_reader *r)
{
	r->ahead_min_ts = UINT64_MAX;
	for (int i = 0; i < r->nahead; i++) {
		const struct fhdr *h = &r->ahead[(r->ahead_first + i) % WINDOW_FRAMES];
		if (h->min_ts < r->ahead_min_ts)
			r->ahead_min_ts = h->min_ts;
	}
}

static bool reader__accept(struct recording_reader *r, const struct fhdr *h)
{
	bool resynced = r->resynced;

	r->resynced = false;
	r->off = h->off + REC_FRAME_HDR_SIZE + h->comp;
	if (h->seq < r->next_seq) {
		reader__problem(r,
				"frame at byte %llu repeats sequence number %u (expected %u); "
				"skipped it",
				(unsigned long long)h->off, h->seq, r->next_seq);
		return false;
	}
	if (h->seq > r->next_seq && !resynced)
		reader__problem(r, "frames %u to %u missing before byte %llu", r->next_seq,
				h->seq - 1, (unsigned long long)h->off);
	r->next_seq = h->seq + 1;
	r->ahead[(r->ahead_first + r->nahead++) % WINDOW_FRAMES] = *h;
	if (h->min_ts < r->ahead_min_ts)
		r->ahead_min_ts = h->min_ts;
	return true;
}

static void reader__peek(struct recording_reader *r)
{
	uint8_t b[REC_TRAILER_SIZE];
	const char *insane = NULL;
	struct fhdr h;
	struct stat st;
	ssize_t n;

	while (!r->reading_done) {
		n = recfile__read_at(r->fd, b, sizeof(b), r->off);
		if (n < 0) {
			reader__problem(r, "read error at byte %llu: %s",
					(unsigned long long)r->off, strerror((int)-n));
			r->status = (int)n;
			r->reading_done = true;
			return;
		}
		if (n == 0 && r->nahead && fstat(r->fd, &st) == 0 &&
		    (uint64_t)st.st_size < r->off) {
			r->reading_done = true;
			return;
		}
		if (n == 0) {
			reader__problem(r,
					"cut short after %u frames at byte %llu: no trailer "
					"(the recorder did not finish)",
					r->next_seq, (unsigned long long)r->off);
			r->reading_done = true;
			return;
		}
		uint32_t magic = n >= 4 ? rec_get32(b) : 0;
		if (magic == REC_TRAILER_MAGIC) {
			uint64_t records;

			if (n < REC_TRAILER_SIZE) {
				reader__problem(r,
						"cut short in the trailer at byte %llu: %zd of %d "
						"bytes present",
						(unsigned long long)r->off, n, REC_TRAILER_SIZE);
				r->reading_done = true;
				return;
			}
			if (trailer__parse(b, &r->totals, &records)) {
				r->has_totals = true;
				r->reading_done = true;
				if (r->totals.frames != r->next_seq)
					reader__problem(r,
							"the trailer counts %u frames, the file "
							"holds %u",
							r->totals.frames, r->next_seq);
				n = recfile__read_at(r->fd, b, 1, r->off + REC_TRAILER_SIZE);
				if (n > 0)
					reader__problem(
					    r,
					    "unexpected data after the trailer at "
					    "byte %llu",
					    (unsigned long long)(r->off + REC_TRAILER_SIZE));
				return;
			}
			insane = "trailer checksum mismatch";
		} else if (magic == REC_FRAME_MAGIC) {
			if (n < REC_FRAME_HDR_SIZE) {
				reader__problem(r,
						"cut short in frame %u at byte %llu: %zd of %d "
						"header bytes present",
						r->next_seq, (unsigned long long)r->off, n,
						REC_FRAME_HDR_SIZE);
				r->reading_done = true;
				return;
			}
			if (fhdr__parse(b, r->off, &h)) {
				insane = fhdr__insane(&h);
				if (!insane) {
					if (reader__accept(r, &h))
						return;
					continue;
				}
			} else {
				insane = "header checksum mismatch";
			}
		} else if (n < 4) {
			reader__problem(r,
					"cut short after %u frames at byte %llu: %zd stray bytes, "
					"no trailer",
					r->next_seq, (unsigned long long)r->off, n);
			r->reading_done = true;
			return;
		} else {
			insane = "no frame header there";
		}

		uint64_t bad = r->off;
		if (reader__resync(r)) {
			reader__problem(r,
					"frame %u at byte %llu: %s; skipped %llu bytes to the "
					"next good frame header",
					r->next_seq, (unsigned long long)bad, insane,
					(unsigned long long)(r->off - bad));
			r->resynced = true;
			continue;
		}
		reader__problem(r, "frame %u at byte %llu: %s; no good frame after it", r->next_seq,
				(unsigned long long)bad, insane);
		r->status = -EBADMSG;
		r->reading_done = true;
	}
}

static int reader__load(struct recording_reader *r)
{
	struct fhdr h = r->ahead[r->ahead_first], ph;
	uint64_t total = REC_FRAME_HDR_SIZE + (uint64_t)h.comp;
	struct rframe *f = NULL;
	struct fetch x;

	r->ahead_first = (r->ahead_first + 1) % WINDOW_FRAMES;
	r->nahead--;
	ahead__update_min(r);
	if (r->pf) {
		f = prefetch__take(r->pf, &ph, &x);
		if (f && (ph.off != h.off || ph.seq != h.seq)) { /* asked before reading stopped */
			r->spare[r->nspare++] = f;
			f = NULL;
		}
	}
	if (!f) {
		f = r->nspare ? r->spare[--r->nspare] : calloc(1, sizeof(*f));
		if (!f)
			return -ENOMEM;
		frame__prepare(r->fd, &h, &r->ld, f, r->order == RECORDING_TIME_ORDER, &x);
	}
	/* the next frame in the file, while this one is read */
	if (r->nahead && r->order == RECORDING_TIME_ORDER && !x.err)
		prefetch__ask(r, &r->ahead[r->ahead_first]);
	if (x.err) {
		free(f->raw);
		free(f->keys);
		free(f);
		return x.err;
	}
	if (x.n < 0) {
		reader__problem(r, "read error in frame %u at byte %llu: %s", h.seq,
				(unsigned long long)h.off, strerror((int)-x.n));
		r->spare[r->nspare++] = f;
		return (int)x.n;
	}
	if (x.n < h.comp) {
		reader__problem(r,
				"cut short in frame %u at byte %llu: %llu of %llu bytes "
				"present",
				h.seq, (unsigned long long)h.off,
				(unsigned long long)(REC_FRAME_HDR_SIZE + x.n),
				(unsigned long long)total);
		/* Nothing can follow a frame cut short. */
		r->reading_done = true;
		r->nahead = 0;
		r->spare[r->nspare++] = f;
		return 0;
	}
	if (x.zbad) {
		reader__problem(r, "frame %u at byte %llu: %s; skipped its %u records", h.seq,
				(unsigned long long)h.off, x.why, h.count);
		r->frames_skipped++;
		r->records_skipped += h.count;
		r->spare[r->nspare++] = f;
		return 0;
	}
	if (x.nbad)
		reader__problem(r, "frame %u at byte %llu: %s; skipped %u such records", h.seq,
				(unsigned long long)h.off, x.badwhy, x.nbad);
	if (x.why[0])
		reader__problem(r,
				"frame %u at byte %llu: %s; kept the %u records before it, "
				"dropped the rest",
				h.seq, (unsigned long long)h.off, x.why, x.k);
	if (h.count > x.k)
		r->records_skipped += h.count - x.k;
	if (!x.k) {
		r->frames_skipped++;
		r->spare[r->nspare++] = f;
		return 0;
	}
	f->n = x.k;
	f->pos = 0;
	f->raw_size = h.raw;
	r->loaded[r->nloaded++] = f;
	r->loaded_bytes += h.raw;
	return 0;
}


int recording_reader__open(struct recording_reader **rp, const char *path,
			   enum recording_order order)
{
	struct recording_reader *r;
	int err;

	*rp = NULL;
	recfile_open_error[0] = 0;
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(recfile_open_error, sizeof(recfile_open_error), "%s: out of memory", path);
		return -ENOMEM;
	}
	r->fd = -1;
	r->order = order;
	r->lookahead = order == RECORDING_TIME_ORDER ? WINDOW_FRAMES : 1;
	r->ahead_min_ts = UINT64_MAX;
	r->path = strdup(path);
	if (!r->path || loader__init(&r->ld)) {
		snprintf(recfile_open_error, sizeof(recfile_open_error), "%s: out of memory", path);
		err = -ENOMEM;
		goto cleanup;
	}
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		err = -errno;
		snprintf(recfile_open_error, sizeof(recfile_open_error), "%s: %s", path,
			 strerror(errno));
		goto cleanup;
	}
	err = recfile__read_header(r->fd, path, &r->info, &r->strings, &r->cpus, &r->off);
	if (err)
		goto cleanup;
	*rp = r;
	return 0;
cleanup:
	recording_reader__close(r);
	return err;
}

const struct recording_info *recording_reader__info(const struct recording_reader *r)
{
	return &r->info;
}

static void reader__release(struct recording_reader *r)
{
	int j = 0;

	for (int i = 0; i < r->nloaded; i++) {
		struct rframe *f = r->loaded[i];

		if (f->pos < f->n) {
			r->loaded[j++] = f;
			continue;
		}
		r->loaded_bytes -= f->raw_size;
		r->spare[r->nspare++] = f;
	}
	r->nloaded = j;
}

int recording_reader__next(struct recording_reader *r, const struct cp_hdr **rec)
{
	int err;

	*rec = NULL;
	if (r->fast) {
		struct rframe *f = r->fast;

		if (f->pos < f->n && f->keys[f->pos].ts < r->fast_limit &&
		    (!r->nahead || f->keys[f->pos].ts <= r->ahead_min_ts)) {
			*rec = (const struct cp_hdr *)(f->raw + f->keys[f->pos++].off);
			return 1;
		}
		r->fast = NULL;
	}
	for (;;) {
		struct rframe *best = NULL;

		reader__release(r);
		while (r->nahead < r->lookahead && !r->reading_done)
			reader__peek(r);
		if (r->order == RECORDING_FILE_ORDER) {
			best = r->nloaded ? r->loaded[0] : NULL;
		} else {
			for (int i = 0; i < r->nloaded; i++) {
				struct rframe *f = r->loaded[i];
				if (!best || f->keys[f->pos].ts < best->keys[best->pos].ts)
					best = f;
			}
			if (best && r->nahead && best->keys[best->pos].ts > r->ahead_min_ts) {
				if (r->nloaded < WINDOW_FRAMES && r->loaded_bytes < WINDOW_BYTES)
					best = NULL; /* the next frame may hold older records */
				else
					r->reorder_forced++;
			}
		}
		if (best) {
			*rec = (const struct cp_hdr *)(best->raw + best->keys[best->pos++].off);
			if (r->order == RECORDING_TIME_ORDER) {
				r->fast = best;
				r->fast_limit = UINT64_MAX;
				for (int i = 0; i < r->nloaded; i++) {
					struct rframe *f = r->loaded[i];

					if (f != best && f->pos < f->n &&
					    f->keys[f->pos].ts < r->fast_limit)
						r->fast_limit = f->keys[f->pos].ts;
				}
			}
			return 1;
		}
		if (!r->nahead)
			return r->status;
		err = reader__load(r);
		if (err) {
			r->status = err;
			r->reading_done = true;
			r->nahead = 0;
		}
	}
}

const char *recording_reader__stopped(const struct recording_reader *cr)
{
	struct recording_reader *r = (struct recording_reader *)cr;
	char extra[160] = "";
	size_t len;

	if (!r->nproblems)
		return NULL;
	if (r->frames_skipped || r->records_skipped)
		snprintf(extra, sizeof(extra), " (%u frames and %llu records skipped in all)",
			 r->frames_skipped, (unsigned long long)r->records_skipped);
	free(r->stopped);
	len = strlen(r->path) + 2 * MSG_LEN + sizeof(extra) + 64;
	r->stopped = malloc(len);
	if (!r->stopped)
		return "out of memory";
	if (r->nproblems == 1)
		snprintf(r->stopped, len, "%s: %s%s", r->path, r->first, extra);
	else if (r->nproblems == 2)
		snprintf(r->stopped, len, "%s: %s; then %s%s", r->path, r->first, r->last, extra);
	else
		snprintf(r->stopped, len, "%s: %s; %d more problems, the last: %s%s", r->path,
			 r->first, r->nproblems - 2, r->last, extra);
	return r->stopped;
}

const struct recording_totals *recording_reader__totals(const struct recording_reader *r)
{
	return r->has_totals ? &r->totals : NULL;
}

int recording_reader__end_totals(const struct recording_reader *r, struct recording_totals *t)
{
	uint8_t b[REC_TRAILER_SIZE];
	struct stat st;

	if (fstat(r->fd, &st) || (uint64_t)st.st_size < r->off + REC_TRAILER_SIZE ||
	    recfile__read_at(r->fd, b, sizeof(b), (uint64_t)st.st_size - REC_TRAILER_SIZE) !=
		REC_TRAILER_SIZE ||
	    !trailer__parse(b, t, NULL))
		return -ENOENT;
	return 0;
}

void recording_reader__close(struct recording_reader *r)
{
	if (!r)
		return;
	if (r->pf) {
		struct rframe *f = prefetch__stop(r->pf);

		if (f)
			r->spare[r->nspare++] = f;
	}
	for (int i = 0; i < r->nloaded; i++)
		r->spare[r->nspare++] = r->loaded[i];
	for (int i = 0; i < r->nspare; i++) {
		free(r->spare[i]->raw);
		free(r->spare[i]->keys);
		free(r->spare[i]);
	}
	if (r->fd >= 0)
		close(r->fd);
	loader__free(&r->ld);
	free(r->strings);
	free(r->cpus);
	free(r->path);
	free(r->stopped);
	free(r);
}
