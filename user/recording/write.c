// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Recording files: the layout, and the writer (read.c is the reader).
 *
 * All integers little-endian. CRCs are zlib's crc32.
 *
 *   file    := header frame* trailer
 *   header  := "CRITPREC"            8 bytes, magic (recording__sniff)
 *              u32 format_version    1, or 2 when frames are lz4
 *              u32 body_len          ≤ 1 MiB
 *              body                  body_len bytes, below
 *              u32 crc32             of everything before it
 *   body    := u32 abi_version       CP_ABI_VERSION of the records
 *              u32 flags             bit 0: frames are lz4 (REC_HDR_F_LZ4)
 *              i64 realtime_offset_ns, u64 start_ns, u32 payload_bytes, u32 ncpus
 *              6 × string            agent_version, cmdline, host, kernel, boot_id, sku
 *              ncpus × cpu
 *   string  := u32 len (0xffffffff = NULL), len bytes (no NUL)
 *   cpu     := i32 cpu, u32 mhz, u32 capacity, string model
 *
 *   frame   := 48-byte frame header, then comp_size bytes: ONE zstd frame, or
 *              with flags bit 0 (REC_FRAME_F_LZ4) ONE lz4 frame, with its
 *              content size and a checksum (zstd's content checksum; for
 *              lz4, the crc32 of its compressed bytes at 40), decompressing to
 *              raw_size bytes = count records (struct cp_hdr + body, each
 *              hdr.size bytes, a multiple of 8), exactly as the kernel or the
 *              recorder produced them. Every frame decompresses on its own.
 *     0 u32 "CPFR"   4 u32 seq (0, 1, …)   8 u32 comp_size   12 u32 raw_size
 *    16 u32 count   20 u32 flags          24 u64 min_ts     32 u64 max_ts
 *    40 u32 0 (lz4: crc32 of the comp_size bytes)   44 u32 crc32 of bytes 0..43
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
 * only. Frames are ~512 KiB raw, lz4 (the default: cheaper on both ends) or
 * zstd level 1 (smaller); the README says what each costs.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <lz4frame.h>
#include <zlib.h>
#include <zstd.h>

#include "outfile.h"
#include "recfile.h"
#include "recfile_format.h"
#include "recording.h"
#include "util.h"

#define BG_BLOCK (128u * 1024)

static LZ4F_preferences_t lz4_prefs(size_t content)
{
	LZ4F_preferences_t p = {
	    .frameInfo = {.blockSizeID = LZ4F_max256KB,
			  .blockMode = LZ4F_blockLinked,
			  .contentChecksumFlag = LZ4F_noContentChecksum,
			  .contentSize = content},
	    .compressionLevel = 0,
	    .autoFlush = 1,
	};
	return p;
}

/* A batch of records: one frame once compressed. */
struct batch {
	uint8_t *buf;
	size_t len;
	uint32_t count;
	uint64_t min_ts, max_ts;
	uint64_t queued_ns; /* when it was handed to the compression thread */
};

struct bg;

struct recording_writer {
	int fd;
	struct batch cur; /* the batch being filled */
	size_t cap;	  /* of every batch buffer */
	uint8_t *cbuf;
	size_t ccap;
	uint32_t codec; /* enum recording_codec */
	ZSTD_CCtx *cctx;
	LZ4F_cctx *lctx;
	uint64_t off;	 /* bytes written and complete */
	uint64_t max_ts; /* of every record appended */
	uint32_t frames;
	uint64_t events, metadata, lost, records;
	uint64_t records_written; /* of records, in frames the file has */
	struct bg *bg; /* NULL: frames are compressed in append/flush */
	int64_t shift; /* recording_info.clock_shift_ns */
	recording_tap_fn tap; /* no file: each record goes to tap */
	void *tap_ctx;
};

static inline uint64_t shifted(uint64_t ts, int64_t d)
{
	/* 0 is "no time" (metadata), and stays so */
	if (!ts)
		return 0;
	if (d < 0 && ts <= (uint64_t)-d)
		return 1;
	return ts + (uint64_t)d;
}

/* Every time a record carries, moved by d (record --clock-skew) */
static void shift_record(struct cp_hdr *h, int64_t d)
{
	h->ts = shifted(h->ts, d);
	switch (h->type) {
	case CP_EV_FUTEX:
		((struct cp_ev_futex *)h)->enter_ts = shifted(((struct cp_ev_futex *)h)->enter_ts, d);
		break;
	case CP_EV_SOCK:
		((struct cp_ev_sock *)h)->enter_ts = shifted(((struct cp_ev_sock *)h)->enter_ts, d);
		break;
	case CP_EV_POLL:
		((struct cp_ev_poll *)h)->enter_ts = shifted(((struct cp_ev_poll *)h)->enter_ts, d);
		break;
	case CP_EV_TLS_READ: {
		struct cp_ev_tls_read *e = (struct cp_ev_tls_read *)h;

		e->enter_ts = shifted(e->enter_ts, d);
		break;
	}
	case CP_EV_RUNQ_CULPRIT: {
		struct cp_ev_runq_culprit *e = (struct cp_ev_runq_culprit *)h;

		e->runnable_since = shifted(e->runnable_since, d);
		break;
	}
	case CP_MD_LOSS: {
		struct cp_md_loss *m = (struct cp_md_loss *)h;

		m->start_ns = shifted(m->start_ns, d);
		m->end_ns = shifted(m->end_ns, d);
		break;
	}
	default:
		break;
	}
}

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

/* On failure the file is cut back: no half frame. */
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
	__atomic_store_n(&w->off, w->off + total, __ATOMIC_RELAXED); /* see __bytes */
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
	/* 1 unless the frames are lz4: RECORDING_FORMAT_VERSION's comment */
	rec_put32(b.p + 8, w->codec == RECORDING_LZ4 ? RECORDING_FORMAT_VERSION
						     : RECORDING_FORMAT_VERSION_MIN);
	b.len = REC_FILE_PREFIX; /* body_len filled in below */
	err = err ?: wbuf__u32(&b, CP_ABI_VERSION);
	err = err ?: wbuf__u32(&b, w->codec == RECORDING_LZ4 ? REC_HDR_F_LZ4 : 0);
	err = err ?: wbuf__u64(&b, (uint64_t)info->realtime_offset_ns);
	err = err ?: wbuf__u64(&b, shifted(info->start_ns, info->clock_shift_ns));
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

static int bg__finish(struct recording_writer *w);

static void writer__free(struct recording_writer *w)
{
	if (!w)
		return;
	bg__finish(w);
	if (w->fd >= 0)
		close(w->fd);
	ZSTD_freeCCtx(w->cctx);
	LZ4F_freeCompressionContext(w->lctx);
	free(w->cur.buf);
	free(w->cbuf);
	free(w);
}

/* Writes b as one frame; on failure nothing of it is in the file. */
static int writer__frame(struct recording_writer *w, const struct batch *b, int64_t clen)
{
	uint8_t hdr[REC_FRAME_HDR_SIZE] = {};

	if (clen < 0)
		return (int)clen;
	rec_put32(hdr + RF_MAGIC, REC_FRAME_MAGIC);
	rec_put32(hdr + RF_SEQ, w->frames);
	rec_put32(hdr + RF_COMP, (uint32_t)clen);
	rec_put32(hdr + RF_RAW, (uint32_t)b->len);
	rec_put32(hdr + RF_COUNT, b->count);
	if (w->codec == RECORDING_LZ4) {
		rec_put32(hdr + RF_FLAGS, REC_FRAME_F_LZ4);
		rec_put32(hdr + RF_COMP_CRC, (uint32_t)crc32(0, w->cbuf, (uInt)clen));
	}
	rec_put64(hdr + RF_MIN_TS, b->min_ts);
	rec_put64(hdr + RF_MAX_TS, b->max_ts);
	rec_put32(hdr + RF_CRC, (uint32_t)crc32(0, hdr, RF_CRC));
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {w->cbuf, clen}};
	int err = writer__commit(w, iov, 2);
	if (err)
		return err;
	w->frames++;
	w->records_written += b->count;
	return 0;
}

int recording_writer__open_tap(struct recording_writer **wp, recording_tap_fn tap, void *ctx)
{
	struct recording_writer *w = calloc(1, sizeof(*w));

	*wp = w;
	if (!w)
		return -ENOMEM;
	w->fd = -1;
	w->tap = tap;
	w->tap_ctx = ctx;
	return 0;
}

int recording_writer__open_fd(struct recording_writer **wp, int fd,
			      const struct recording_info *info)
{
	struct recording_writer *w;
	int err = 0;

	*wp = NULL;
	if (fd < 0 || !info) {
		if (fd >= 0)
			close(fd);
		return -EINVAL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		close(fd);
		return -ENOMEM;
	}
	w->fd = fd;
	w->cap = REC_FRAME_RAW_TARGET + 65536;
	w->cur.buf = malloc(w->cap);
	w->codec = info->codec;
	w->shift = info->clock_shift_ns;
	if (w->codec == RECORDING_LZ4) {
		LZ4F_preferences_t p = lz4_prefs(0);

		/* one bound per block the frame is cut into, and the header */
		w->ccap = (w->cap / BG_BLOCK + 1) * LZ4F_compressBound(BG_BLOCK, &p) +
			  LZ4F_HEADER_SIZE_MAX;
		if (LZ4F_isError(LZ4F_createCompressionContext(&w->lctx, LZ4F_VERSION)))
			w->lctx = NULL;
	} else if (w->codec == RECORDING_ZSTD) {
		w->ccap = ZSTD_compressBound(w->cap);
		w->cctx = ZSTD_createCCtx();
	} else {
		err = -EINVAL;
		goto cleanup;
	}
	w->cbuf = malloc(w->ccap);
	if (!w->cur.buf || !w->cbuf || (!w->cctx && !w->lctx)) {
		err = -ENOMEM;
		goto cleanup;
	}
	if (w->cctx && (ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel,
							    REC_ZSTD_LEVEL)) ||
			ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1)) ||
			ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1)))) {
		err = -EINVAL;
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

int recording_writer__open(struct recording_writer **wp, const char *path,
			   const struct recording_info *info)
{
	struct stat st, now;
	int fd, err;

	*wp = NULL;
	if (!path || !info)
		return -EINVAL;
	fd = output__open(path, &st);
	if (fd < 0)
		return fd;
	err = recording_writer__open_fd(wp, fd, info);
	/* not even the header fit (a full disk): no empty file left, if the
	 * name is still the file made */
	if (err && S_ISREG(st.st_mode) && !lstat(path, &now) && now.st_dev == st.st_dev &&
	    now.st_ino == st.st_ino)
		unlink(path);
	return err;
}

/* The compression thread: SCHED_IDLE while it keeps up, raised when behind;
 * a lock-free ring, so a starved SCHED_IDLE thread never holds what the
 * caller waits for. */
#define BG_WAIT_NS 1000000000ull
struct bg {
	pthread_t thread;
	sem_t full;	 /* batches queued, then one more post: stop */
	sem_t empty;	 /* slots free besides the caller's */
	struct batch *q; /* n slots, each with its own buffer */
	unsigned n;	 /* frames queued at most + the caller's slot */
	unsigned tail;	 /* the caller's slot: w->cur.buf == q[tail].buf */
	uint64_t posted; /* batches queued (written by the caller) */
	uint64_t done;	 /* batches finished (written by the thread) */
	int err;	 /* the thread's first write error: later batches are not written */
	bool use_idle;	 /* SCHED_IDLE while it keeps up */
	bool urgent;	 /* SCHED_OTHER, no yields (set by the caller only) */
};

static bool can_leave_idle(void)
{
	struct rlimit rl;
	char line[256];
	bool cap = false;
	FILE *f = fopen("/proc/thread-self/status", "re");

	if (f) {
		while (fgets(line, sizeof(line), f)) {
			unsigned long long eff;

			if (sscanf(line, "CapEff: %llx", &eff) == 1) {
				cap = eff & (1ull << 23); /* CAP_SYS_NICE */
				break;
			}
		}
		fclose(f);
	}
	if (cap)
		return true;
	return getrlimit(RLIMIT_NICE, &rl) == 0 &&
	       (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 20);
}

/* The caller's thread only. */
static void bg__urgent(struct bg *bg, bool on)
{
	struct sched_param sp = {};

	if (bg->urgent == on)
		return;
	__atomic_store_n(&bg->urgent, on, __ATOMIC_RELAXED); /* read by bg__compress */
	if (bg->use_idle && pthread_setschedparam(bg->thread, on ? SCHED_OTHER : SCHED_IDLE, &sp))
		bg->use_idle = false; /* keep whatever it has: never stuck idle when raised */
}

/* Between blocks: the background thread yields while it keeps up. */
static void bg__between(struct recording_writer *w)
{
	if (w->bg && !__atomic_load_n(&w->bg->urgent, __ATOMIC_RELAXED))
		sched_yield();
}

/* One zstd frame (content size pledged, checksum) made block by block; the
 * compressed size or -EIO. */
static int64_t compress_zstd(struct recording_writer *w, const struct batch *b)
{
	ZSTD_outBuffer out = {w->cbuf, w->ccap, 0};
	ZSTD_inBuffer in = {b->buf, 0, 0};
	size_t left;

	ZSTD_CCtx_reset(w->cctx, ZSTD_reset_session_only);
	left = ZSTD_CCtx_setPledgedSrcSize(w->cctx, b->len);
	if (ZSTD_isError(left))
		return -EIO;
	do {
		ZSTD_EndDirective end;

		in.size = b->len - in.pos > BG_BLOCK ? in.pos + BG_BLOCK : b->len;
		end = in.size == b->len ? ZSTD_e_end : ZSTD_e_continue;
		do {
			left = ZSTD_compressStream2(w->cctx, &out, &in, end);
			if (ZSTD_isError(left))
				return -EIO;
		} while (end == ZSTD_e_end ? left : in.pos < in.size);
		if (end != ZSTD_e_end)
			bg__between(w);
	} while (in.pos < b->len);
	return (int64_t)out.pos;
}

/* One lz4 frame, one linked block per BG_BLOCK; the compressed size or -EIO. */
static int64_t compress_lz4(struct recording_writer *w, const struct batch *b)
{
	LZ4F_preferences_t p = lz4_prefs(b->len);
	size_t pos = 0, n;

	n = LZ4F_compressBegin(w->lctx, w->cbuf, w->ccap, &p);
	if (LZ4F_isError(n))
		return -EIO;
	while (pos < b->len) {
		size_t len = b->len - pos > BG_BLOCK ? BG_BLOCK : b->len - pos;
		size_t k =
		    LZ4F_compressUpdate(w->lctx, w->cbuf + n, w->ccap - n, b->buf + pos, len, NULL);

		if (LZ4F_isError(k))
			return -EIO;
		n += k;
		pos += len;
		if (pos < b->len)
			bg__between(w);
	}
	pos = LZ4F_compressEnd(w->lctx, w->cbuf + n, w->ccap - n, NULL);
	if (LZ4F_isError(pos))
		return -EIO;
	return (int64_t)(n + pos);
}

static int64_t writer__compress(struct recording_writer *w, const struct batch *b)
{
	return w->codec == RECORDING_LZ4 ? compress_lz4(w, b) : compress_zstd(w, b);
}

static void sem_wait_all(sem_t *s)
{
	while (sem_wait(s) && errno == EINTR)
		;
}

static void *bg__main(void *arg)
{
	struct recording_writer *w = arg;
	struct bg *bg = w->bg;
	unsigned head = 0;

	for (;;) {
		sem_wait_all(&bg->full);
		if (bg->done == __atomic_load_n(&bg->posted, __ATOMIC_ACQUIRE))
			break; /* the stop post: every batch before it is done */
		if (!bg->err) {
			struct batch *b = &bg->q[head];
			int err = writer__frame(w, b, writer__compress(w, b));

			if (err)
				__atomic_store_n(&bg->err, err, __ATOMIC_RELEASE);
		}
		head = (head + 1) % bg->n;
		__atomic_store_n(&bg->done, bg->done + 1, __ATOMIC_RELEASE);
		sem_post(&bg->empty);
	}
	return NULL;
}

/* Frees bg and the slots' buffers but keep (the writer's own). */
static void bg__free(struct bg *bg, const uint8_t *keep)
{
	for (unsigned i = 0; bg->q && i < bg->n; i++)
		if (bg->q[i].buf != keep)
			free(bg->q[i].buf);
	free(bg->q);
	sem_destroy(&bg->full);
	sem_destroy(&bg->empty);
	free(bg);
}

/* Lets the thread write what is queued, waits for it; the first write
 * error it met, or 0. */
static int bg__finish(struct recording_writer *w)
{
	struct bg *bg = w->bg;
	int err;

	if (!bg)
		return 0;
	bg__urgent(bg, true); /* do not leave the end to idle time */
	sem_post(&bg->full);
	pthread_join(bg->thread, NULL);
	err = bg->err;
	bg__free(bg, w->cur.buf);
	w->bg = NULL;
	return err;
}

int recording_writer__background(struct recording_writer *w, unsigned frames)
{
	struct sched_param sp = {};
	sigset_t all, old;
	struct bg *bg;
	int err;

	if (!w || w->bg || frames < 2 || frames > 1024)
		return -EINVAL;
	if (w->tap)
		return 0; /* nothing to compress */
	bg = calloc(1, sizeof(*bg));
	if (!bg)
		return -ENOMEM;
	sem_init(&bg->full, 0, 0);
	sem_init(&bg->empty, 0, frames);
	bg->n = frames + 1;
	bg->q = calloc(bg->n, sizeof(*bg->q));
	if (!bg->q) {
		bg__free(bg, w->cur.buf);
		return -ENOMEM;
	}
	bg->q[0].buf = w->cur.buf; /* the caller's slot to start with */
	for (unsigned i = 1; i < bg->n; i++) {
		bg->q[i].buf = malloc(w->cap);
		if (!bg->q[i].buf) {
			bg__free(bg, w->cur.buf);
			return -ENOMEM;
		}
	}
	w->bg = bg;
	/* signals stay with the caller's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&bg->thread, NULL, bg__main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		w->bg = NULL;
		bg__free(bg, w->cur.buf);
		return err;
	}
	bg->use_idle = can_leave_idle() && !pthread_setschedparam(bg->thread, SCHED_IDLE, &sp);
	return 0;
}

/* Hands the current batch to the thread (waiting for a free slot when none
 * is left) and takes the next slot. On error the batch stays. */
static int bg__queue(struct recording_writer *w)
{
	struct bg *bg = w->bg;
	uint64_t now = clock__mono_ns(), pending;
	int err = __atomic_load_n(&bg->err, __ATOMIC_ACQUIRE);

	if (!err && w->cur.len) {
		w->cur.queued_ns = now;
		bg->q[bg->tail] = w->cur;
		__atomic_store_n(&bg->posted, bg->posted + 1, __ATOMIC_RELEASE);
		sem_post(&bg->full);
		bg->tail = (bg->tail + 1) % bg->n;
		if (sem_trywait(&bg->empty)) {
			bg__urgent(bg, true); /* full: it must run now */
			sem_wait_all(&bg->empty);
		}
		memset(&w->cur, 0, sizeof(w->cur));
		w->cur.buf = bg->q[bg->tail].buf;
	}
	/* batch k sits in slot k % n: the oldest pending is batch done */
	pending = bg->posted - __atomic_load_n(&bg->done, __ATOMIC_ACQUIRE);
	if (pending >= (bg->n + 1) / 2 ||
	    (pending && now - bg->q[(bg->posted - pending) % bg->n].queued_ns >= BG_WAIT_NS))
		bg__urgent(bg, true);
	else if (!pending)
		bg__urgent(bg, false);
	return err;
}

int recording_writer__flush(struct recording_writer *w)
{
	int err;

	if (!w)
		return -EINVAL;
	if (w->tap)
		return 0;
	if (w->bg)
		return bg__queue(w);
	if (!w->cur.len)
		return 0;
	/* On failure the batch stays: nothing buffered is dropped silently. */
	err = writer__frame(w, &w->cur, writer__compress(w, &w->cur));
	if (err)
		return err;
	w->cur.len = 0;
	w->cur.count = 0;
	return 0;
}

int recording_writer__append(struct recording_writer *w, const struct cp_hdr *rec)
{
	struct batch *b;
	int err;

	if (!w || !rec || rec->size < sizeof(struct cp_hdr) || rec->size % 8)
		return -EINVAL;
	/* What the reader would refuse is refused here, where the caller can
	 * still tell which record it was (fix = false: rec is not written). */
	if (recfile__check_type((struct cp_hdr *)rec, false))
		return -EINVAL;
	if (w->tap) {
		int err = w->tap(w->tap_ctx, rec);

		if (!err) {
			w->records++;
			w->records_written++;
		}
		return err;
	}
	/* Flush before, not after, so a failed write leaves this record with
	 * the caller (the error says it was not taken). */
	if (w->cur.len && w->cur.len + rec->size > REC_FRAME_RAW_TARGET) {
		err = recording_writer__flush(w);
		if (err)
			return err;
	}
	b = &w->cur;
	memcpy(b->buf + b->len, rec, rec->size);
	if (w->shift) {
		shift_record((struct cp_hdr *)(b->buf + b->len), w->shift);
		rec = (const struct cp_hdr *)(b->buf + b->len);
	}
	b->len += rec->size;
	if (!b->count || rec->ts < b->min_ts)
		b->min_ts = rec->ts;
	if (!b->count || rec->ts > b->max_ts)
		b->max_ts = rec->ts;
	b->count++;
	if (rec->ts > w->max_ts)
		w->max_ts = rec->ts;
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
	return recording_writer__close_counted(w, totals, NULL);
}

int recording_writer__close_counted(struct recording_writer *w,
				    const struct recording_totals *totals, uint64_t *unwritten)
{
	uint8_t t[REC_TRAILER_SIZE] = {};
	int err;

	if (!w)
		return -EINVAL;
	if (w->tap) {
		if (unwritten)
			*unwritten = 0;
		writer__free(w);
		return 0;
	}
	/* No trailer after a failed flush: the file must read as cut short. */
	err = recording_writer__flush(w);
	err = bg__finish(w) ?: err;
	if (unwritten) /* the compression thread is done: its count is final */
		*unwritten = w->records - w->records_written;
	if (err)
		goto cleanup;
	rec_put32(t + RT_MAGIC, REC_TRAILER_MAGIC);
	rec_put32(t + RT_FRAMES, w->frames);
	/* counts from the writer, which saw every record; end time and losses
	 * from the caller */
	rec_put64(t + RT_END_NS,
		  totals && totals->end_ns ? shifted(totals->end_ns, w->shift) : w->max_ts);
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
	/* the compression thread may be adding to it */
	return w ? __atomic_load_n(&w->off, __ATOMIC_RELAXED) : 0;
}
