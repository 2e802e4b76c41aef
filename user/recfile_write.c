// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Recording files: the layout, and the writer (recfile_read.c is the reader).
 * (Not named recording_*.c: the Makefile sends user/record*.c to the recorder,
 * which the tests do not link.)
 *
 * All integers little-endian. CRCs are zlib's crc32.
 *
 *   file    := header frame* trailer
 *   header  := "CRITPREC"            8 bytes, magic (recording__sniff)
 *              u32 format_version    RECORDING_FORMAT_VERSION
 *              u32 body_len          ≤ 1 MiB
 *              body                  body_len bytes, below
 *              u32 crc32             of everything before it
 *   body    := u32 abi_version       CP_ABI_VERSION of the records
 *              u32 flags             0
 *              i64 realtime_offset_ns, u64 start_ns, u32 payload_bytes, u32 ncpus
 *              6 × string            agent_version, cmdline, host, kernel, boot_id, sku
 *              ncpus × cpu
 *   string  := u32 len (0xffffffff = NULL), len bytes (no NUL)
 *   cpu     := i32 cpu, u32 mhz, u32 capacity, string model
 *
 *   frame   := 48-byte frame header, then comp_size bytes: ONE zstd frame with
 *              its content checksum and content size, decompressing to
 *              raw_size bytes = count records (struct cp_hdr + body, each
 *              hdr.size bytes, a multiple of 8), exactly as the kernel or the
 *              recorder produced them. Every frame decompresses on its own.
 *     0 u32 "CPFR"   4 u32 seq (0, 1, …)   8 u32 comp_size   12 u32 raw_size
 *    16 u32 count   20 u32 flags (0)      24 u64 min_ts     32 u64 max_ts
 *    40 u32 0       44 u32 crc32 of bytes 0..43
 *   min_ts/max_ts bound the records' hdr.ts, so a time-ordered reader knows,
 *   before decompressing a frame, whether it can hold records older than the
 *   ones it is about to deliver.
 *
 *   trailer := 64 bytes
 *     0 u32 "CPTR"   4 u32 frames   8 u64 end_ns   16 u64 events
 *    24 u64 metadata 32 u64 lost   40 u64 records 48 12 bytes 0
 *    60 u32 crc32 of bytes 0..59
 *
 * A file cut short has no trailer; one cut inside a frame loses that frame
 * only. Frames are ~512 KiB raw, zstd level 1: compression runs at several
 * hundred MB/s, far above the 1M events/s (~100 MB/s) budget.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "recfile.h"
#include "recfile_format.h"
#include "recording.h"

struct recording_writer {
	int fd;
	uint8_t *buf; /* the batch being filled */
	size_t len, cap;
	uint32_t count;
	uint64_t min_ts, max_ts;
	uint8_t *cbuf;
	size_t ccap;
	ZSTD_CCtx *cctx;
	uint64_t off; /* bytes written and complete */
	uint32_t frames;
	uint64_t events, metadata, lost, records;
};

struct wbuf {
	uint8_t *p;
	size_t len, cap;
};

static int wbuf__reserve(struct wbuf *b, size_t n)
{
	if (b->len + n <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 1024;
	while (cap < b->len + n)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int wbuf__u32(struct wbuf *b, uint32_t v)
{
	int err = wbuf__reserve(b, 4);
	if (!err) {
		rec_put32(b->p + b->len, v);
		b->len += 4;
	}
	return err;
}

static int wbuf__u64(struct wbuf *b, uint64_t v)
{
	int err = wbuf__reserve(b, 8);
	if (!err) {
		rec_put64(b->p + b->len, v);
		b->len += 8;
	}
	return err;
}

static int wbuf__str(struct wbuf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	int err;

	if (n >= REC_HEADER_BODY_MAX)
		return -E2BIG;
	err = wbuf__u32(b, s ? (uint32_t)n : REC_STR_NULL);
	if (err || !n)
		return err;
	err = wbuf__reserve(b, n);
	if (!err) {
		memcpy(b->p + b->len, s, n);
		b->len += n;
	}
	return err;
}

/* Writes all of iov or fails; a short write is a failure (-ENOSPC), never
 * half a success. */
static int write_all(int fd, struct iovec *iov, int iovcnt)
{
	while (iovcnt > 0) {
		ssize_t n = writev(fd, iov, iovcnt);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENOSPC;
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= n;
		}
	}
	return 0;
}

/* Writes at the end of what is complete; on failure cuts the file back so a
 * later retry (or the reader) does not meet half a frame. */
static int writer__commit(struct recording_writer *w, struct iovec *iov, int iovcnt)
{
	size_t total = 0;
	int err;

	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	err = write_all(w->fd, iov, iovcnt);
	if (err) {
		if (ftruncate(w->fd, w->off) == 0)
			lseek(w->fd, w->off, SEEK_SET);
		return err;
	}
	w->off += total;
	return 0;
}

static int writer__header(struct recording_writer *w, const struct recording_info *info)
{
	struct wbuf b = {};
	int err = 0;

	if (info->ncpus && !info->cpus)
		return -EINVAL;
	err = wbuf__reserve(&b, REC_FILE_PREFIX);
	if (err)
		goto cleanup;
	memcpy(b.p, REC_MAGIC, REC_MAGIC_LEN);
	rec_put32(b.p + 8, RECORDING_FORMAT_VERSION);
	b.len = REC_FILE_PREFIX; /* body_len filled in below */
	err = err ?: wbuf__u32(&b, CP_ABI_VERSION);
	err = err ?: wbuf__u32(&b, 0);
	err = err ?: wbuf__u64(&b, (uint64_t)info->realtime_offset_ns);
	err = err ?: wbuf__u64(&b, info->start_ns);
	err = err ?: wbuf__u32(&b, info->payload_bytes);
	err = err ?: wbuf__u32(&b, info->ncpus);
	err = err ?: wbuf__str(&b, info->agent_version);
	err = err ?: wbuf__str(&b, info->cmdline);
	err = err ?: wbuf__str(&b, info->host);
	err = err ?: wbuf__str(&b, info->kernel);
	err = err ?: wbuf__str(&b, info->boot_id);
	err = err ?: wbuf__str(&b, info->sku);
	for (uint32_t i = 0; !err && i < info->ncpus; i++) {
		const struct recording_cpu *c = &info->cpus[i];
		char model[sizeof(c->model) + 1];

		memcpy(model, c->model, sizeof(c->model));
		model[sizeof(c->model)] = 0;
		err = err ?: wbuf__u32(&b, (uint32_t)c->cpu);
		err = err ?: wbuf__u32(&b, c->mhz);
		err = err ?: wbuf__u32(&b, c->capacity);
		err = err ?: wbuf__str(&b, model);
	}
	if (err)
		goto cleanup;
	if (b.len - REC_FILE_PREFIX > REC_HEADER_BODY_MAX || info->ncpus > REC_MAX_CPUS) {
		err = -E2BIG;
		goto cleanup;
	}
	rec_put32(b.p + 12, (uint32_t)(b.len - REC_FILE_PREFIX));
	err = wbuf__u32(&b, (uint32_t)crc32(0, b.p, b.len));
	if (err)
		goto cleanup;
	struct iovec iov = {b.p, b.len};
	err = writer__commit(w, &iov, 1);
cleanup:
	free(b.p);
	return err;
}

static void writer__free(struct recording_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	ZSTD_freeCCtx(w->cctx);
	free(w->buf);
	free(w->cbuf);
	free(w);
}

int recording_writer__open(struct recording_writer **wp, const char *path,
			   const struct recording_info *info)
{
	struct recording_writer *w;
	struct stat st;
	int err = 0;

	*wp = NULL;
	if (!path || !info)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = -1;
	/* A batch never exceeds the target by more than one record (≤ 64 KiB). */
	w->cap = REC_FRAME_RAW_TARGET + 65536;
	w->buf = malloc(w->cap);
	w->ccap = ZSTD_compressBound(w->cap);
	w->cbuf = malloc(w->ccap);
	w->cctx = ZSTD_createCCtx();
	if (!w->buf || !w->cbuf || !w->cctx) {
		err = -ENOMEM;
		goto cleanup;
	}
	if (ZSTD_isError(
		ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, REC_ZSTD_LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1))) {
		err = -EINVAL;
		goto cleanup;
	}
	w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		err = -errno;
		goto cleanup;
	}
	/* open() keeps the mode of an existing file: force it, on regular
	 * files only (-o /dev/null must not make /dev/null root-only). */
	if (fstat(w->fd, &st) < 0 || (S_ISREG(st.st_mode) && fchmod(w->fd, 0600) < 0)) {
		err = -errno;
		goto cleanup;
	}
	err = writer__header(w, info);
	if (err)
		goto cleanup;
	*wp = w;
	return 0;
cleanup:
	writer__free(w);
	return err;
}

int recording_writer__flush(struct recording_writer *w)
{
	uint8_t hdr[REC_FRAME_HDR_SIZE] = {};
	size_t clen;
	int err;

	if (!w)
		return -EINVAL;
	if (!w->len)
		return 0;
	clen = ZSTD_compress2(w->cctx, w->cbuf, w->ccap, w->buf, w->len);
	if (ZSTD_isError(clen))
		return -EIO;
	rec_put32(hdr + RF_MAGIC, REC_FRAME_MAGIC);
	rec_put32(hdr + RF_SEQ, w->frames);
	rec_put32(hdr + RF_COMP, (uint32_t)clen);
	rec_put32(hdr + RF_RAW, (uint32_t)w->len);
	rec_put32(hdr + RF_COUNT, w->count);
	rec_put64(hdr + RF_MIN_TS, w->min_ts);
	rec_put64(hdr + RF_MAX_TS, w->max_ts);
	rec_put32(hdr + RF_CRC, (uint32_t)crc32(0, hdr, RF_CRC));
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {w->cbuf, clen}};
	/* On failure the batch stays: nothing buffered is dropped silently. */
	err = writer__commit(w, iov, 2);
	if (err)
		return err;
	w->frames++;
	w->len = 0;
	w->count = 0;
	return 0;
}

int recording_writer__append(struct recording_writer *w, const struct cp_hdr *rec)
{
	int err;

	if (!w || !rec || rec->size < sizeof(struct cp_hdr) || rec->size % 8)
		return -EINVAL;
	/* What the reader would refuse is refused here, where the caller can
	 * still tell which record it was (fix = false: rec is not written). */
	if (recfile__check_type((struct cp_hdr *)rec, false))
		return -EINVAL;
	/* Flush before, not after, so a failed write leaves this record with
	 * the caller (the error says it was not taken). */
	if (w->len && w->len + rec->size > REC_FRAME_RAW_TARGET) {
		err = recording_writer__flush(w);
		if (err)
			return err;
	}
	memcpy(w->buf + w->len, rec, rec->size);
	w->len += rec->size;
	if (!w->count || rec->ts < w->min_ts)
		w->min_ts = rec->ts;
	if (!w->count || rec->ts > w->max_ts)
		w->max_ts = rec->ts;
	w->count++;
	w->records++;
	if (rec->type >= CP_MD_PROCESS)
		w->metadata++;
	else
		w->events++;
	if (rec->type == CP_MD_LOSS && rec->size >= sizeof(struct cp_md_loss))
		w->lost += ((const struct cp_md_loss *)rec)->events;
	return 0;
}

int recording_writer__close(struct recording_writer *w, const struct recording_totals *totals)
{
	uint8_t t[REC_TRAILER_SIZE] = {};
	int err;

	if (!w)
		return -EINVAL;
	/* No trailer after a failed flush: the file must read as cut short. */
	err = recording_writer__flush(w);
	if (err)
		goto cleanup;
	rec_put32(t + RT_MAGIC, REC_TRAILER_MAGIC);
	rec_put32(t + RT_FRAMES, w->frames);
	/* Counts of what is in the file come from the writer, which saw every
	 * record; the end time and the losses (drops may not all have become
	 * loss records) from the caller when it has them. */
	rec_put64(t + RT_END_NS, totals && totals->end_ns ? totals->end_ns : w->max_ts);
	rec_put64(t + RT_EVENTS, w->events);
	rec_put64(t + RT_METADATA, w->metadata);
	rec_put64(t + RT_LOST, totals && totals->lost > w->lost ? totals->lost : w->lost);
	rec_put64(t + RT_RECORDS, w->records);
	rec_put32(t + RT_CRC, (uint32_t)crc32(0, t, RT_CRC));
	struct iovec iov = {t, sizeof(t)};
	err = writer__commit(w, &iov, 1);
	if (err)
		goto cleanup;
	if (fsync(w->fd) < 0 && errno != EINVAL && errno != EROFS) {
		err = -errno;
		goto cleanup;
	}
	err = close(w->fd) < 0 ? -errno : 0;
	w->fd = -1;
cleanup:
	writer__free(w);
	return err;
}

uint64_t recording_writer__bytes(const struct recording_writer *w)
{
	return w ? w->off : 0;
}
