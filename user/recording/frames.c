// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* A frame made ready: read, checked, decompressed, sorted (on the read-ahead
 * thread). */
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

static int frame__reserve(struct rframe *f, size_t raw, size_t count)
{
	if (f->raw_cap < raw) {
		free(f->raw);
		f->raw = malloc(raw);
		f->raw_cap = f->raw ? raw : 0;
		if (!f->raw)
			return -ENOMEM;
	}
	if (f->keys_cap < count) {
		free(f->keys);
		f->keys = malloc(count * sizeof(*f->keys));
		f->keys_cap = f->keys ? count : 0;
		if (!f->keys)
			return -ENOMEM;
	}
	return 0;
}

static int reader__sort(struct loader *r, struct rkey *k, uint32_t n)
{
	struct rkey *a = k, *b;
	uint32_t nr = 0, *run;

	if (r->runs_cap < (size_t)n + 1) {
		free(r->runs);
		r->runs = malloc(((size_t)n + 1) * sizeof(*r->runs));
		r->runs_cap = r->runs ? (size_t)n + 1 : 0;
		if (!r->runs)
			return -ENOMEM;
	}
	run = r->runs; /* run[i]: where run i starts; run[nr] = n */
	run[nr++] = 0;
	for (uint32_t i = 1; i < n; i++)
		if (k[i].ts < k[i - 1].ts)
			run[nr++] = i;
	if (nr == 1)
		return 0;
	run[nr] = n;
	if (r->tmp_cap < n) {
		free(r->tmp);
		r->tmp = malloc(n * sizeof(*r->tmp));
		r->tmp_cap = r->tmp ? n : 0;
		if (!r->tmp)
			return -ENOMEM;
	}
	b = r->tmp;
	while (nr > 1) {
		uint32_t m = 0;

		/* runs 2q and 2q + 1 into one (an odd last one is copied) */
		for (uint32_t q = 0; q < nr; q += 2) {
			uint32_t lo = run[q], mid = run[q + 1], hi = q + 1 < nr ? run[q + 2] : mid;
			uint32_t i = lo, j = mid, o = lo;

			while (i < mid && j < hi)
				b[o++] = a[j].ts < a[i].ts ? a[j++] : a[i++];
			while (i < mid)
				b[o++] = a[i++];
			while (j < hi)
				b[o++] = a[j++];
			run[m++] = lo;
		}
		run[m] = n;
		nr = m;
		struct rkey *t = a;
		a = b;
		b = t;
	}
	if (a != k)
		memcpy(k, a, n * sizeof(*k));
	return 0;
}

static const uint16_t fixed_size[CP_EV_TLS_READ + 1] = {
#define FIXED(t, name, size) [t] = CP_FIXED_SIZE(t) ? (size) : 0,
    CP_EVENT_TYPES(FIXED)
#undef FIXED
};

static bool record_plainly_ok(const struct cp_hdr *rec, uint32_t avail)
{
	uint32_t need;

	if (avail < sizeof(*rec) || rec->size % 8 || rec->size > avail)
		return false;
	if (rec->type < sizeof(fixed_size) / sizeof(fixed_size[0]) && fixed_size[rec->type])
		return rec->size >= fixed_size[rec->type];
	if (rec->type != CP_EV_SOCK) /* the other common one */
		return false;
	if (rec->size < offsetof(struct cp_ev_sock, payload))
		return false;
	need = ((const struct cp_ev_sock *)rec)->payload_len;
	return need <= CP_PAYLOAD_MAX && offsetof(struct cp_ev_sock, payload) + need <= rec->size;
}

static bool lz4_frame(struct loader *ld, const struct fhdr *h, uint8_t *raw, struct fetch *x)
{
	LZ4F_decompressOptions_t o = {.stableDst = 1};
	LZ4F_frameInfo_t fi;
	size_t in = h->comp, out, r, used;

	if ((uint32_t)crc32(0, ld->cbuf, h->comp) != h->comp_crc) {
		snprintf(x->why, sizeof(x->why), "lz4 frame: checksum mismatch");
		return false;
	}
	LZ4F_resetDecompressionContext(ld->lctx);
	r = LZ4F_getFrameInfo(ld->lctx, &fi, ld->cbuf, &in);
	if (LZ4F_isError(r)) {
		snprintf(x->why, sizeof(x->why), "lz4: %s", LZ4F_getErrorName(r));
		return false;
	}
	if (fi.contentSize != h->raw) {
		snprintf(x->why, sizeof(x->why), "not one lz4 frame of %u bytes", h->raw);
		return false;
	}
	used = in;
	out = h->raw;
	in = h->comp - used;
	r = LZ4F_decompress(ld->lctx, raw, &out, ld->cbuf + used, &in, &o);
	if (LZ4F_isError(r)) {
		snprintf(x->why, sizeof(x->why), "lz4: %s", LZ4F_getErrorName(r));
		return false;
	}
	/* r == 0: the frame ended (a content checksum, if any, checked) */
	if (r || out != h->raw || used + in != h->comp) {
		snprintf(x->why, sizeof(x->why), "lz4: %s",
			 r ? "short content" : "bytes after the frame");
		return false;
	}
	return true;
}

/* The same for a zstd frame (its content checksum is zstd's). */
static bool zstd_frame(struct loader *ld, const struct fhdr *h, uint8_t *raw, struct fetch *x)
{
	size_t dn;

	if (ZSTD_findFrameCompressedSize(ld->cbuf, h->comp) != h->comp ||
	    ZSTD_getFrameContentSize(ld->cbuf, h->comp) != h->raw) {
		snprintf(x->why, sizeof(x->why), "not one zstd frame of %u bytes", h->raw);
		return false;
	}
	dn = ZSTD_decompressDCtx(ld->dctx, raw, h->raw, ld->cbuf, h->comp);
	if (ZSTD_isError(dn) || dn != h->raw) {
		snprintf(x->why, sizeof(x->why), "zstd: %s",
			 ZSTD_isError(dn) ? ZSTD_getErrorName(dn) : "short content");
		return false;
	}
	return true;
}

void frame__prepare(int fd, const struct fhdr *h, struct loader *ld, struct rframe *f,
			   bool sort, struct fetch *x)
{
	uint32_t off = 0, seen = 0;

	x->err = 0;
	x->zbad = false;
	x->why[0] = x->badwhy[0] = 0;
	x->nbad = x->k = 0;
	if (ld->ccap < h->comp) {
		free(ld->cbuf);
		ld->cbuf = malloc(h->comp);
		ld->ccap = ld->cbuf ? h->comp : 0;
		if (!ld->cbuf) {
			x->err = -ENOMEM;
			return;
		}
	}
	x->n = recfile__read_at(fd, ld->cbuf, h->comp, h->off + REC_FRAME_HDR_SIZE);
	if (x->n < (ssize_t)h->comp)
		return;
	x->err = frame__reserve(f, h->raw, h->count);
	if (x->err)
		return;
	x->zbad = true;
	if (!(h->flags & REC_FRAME_F_LZ4 ? lz4_frame(ld, h, f->raw, x)
					 : zstd_frame(ld, h, f->raw, x)))
		return;
	x->zbad = false;

	/* a bad size ends the frame, a bad type skips the record */
	while (off < h->raw && seen < h->count) {
		struct cp_hdr *rec = (struct cp_hdr *)(f->raw + off);
		const char *bad;

		if (record_plainly_ok(rec, h->raw - off) && rec->ts >= h->min_ts &&
		    rec->ts <= h->max_ts) {
			f->keys[x->k].ts = rec->ts;
			f->keys[x->k].off = off;
			x->k++;
			seen++;
			off += rec->size;
			continue;
		}
		bad = recfile__check_walk(rec, h->raw - off);
		if (bad) {
			snprintf(x->why, sizeof(x->why), "record %u at offset %u: %s", seen, off,
				 bad);
			break;
		}
		bad = recfile__check_type(rec, true);
		if (!bad && (rec->ts < h->min_ts || rec->ts > h->max_ts))
			bad = "timestamp outside the frame's range";
		if (bad) {
			if (!x->nbad++)
				snprintf(x->badwhy, sizeof(x->badwhy),
					 "record %u (%s) at offset %u: %s", seen,
					 cp_rec_type_name(rec->type), off, bad);
		} else {
			f->keys[x->k].ts = rec->ts;
			f->keys[x->k].off = off;
			x->k++;
		}
		seen++;
		off += rec->size;
	}
	if (!x->why[0] && (seen != h->count || off != h->raw))
		snprintf(x->why, sizeof(x->why), "%u records in %u bytes, the header says %u in %u",
			 seen, off, h->count, h->raw);
	if (sort && x->k)
		x->err = reader__sort(ld, f->keys, x->k);
}

static void *prefetch__run(void *arg)
{
	struct prefetch *pf = arg;

	pthread_mutex_lock(&pf->mu);
	for (;;) {
		struct fetch x;
		struct fhdr h;

		while (!pf->asked && !pf->quit)
			pthread_cond_wait(&pf->cv, &pf->mu);
		if (pf->quit)
			break;
		h = pf->h;
		pthread_mutex_unlock(&pf->mu);
		frame__prepare(pf->fd, &h, &pf->ld, pf->f, true, &x);
		pthread_mutex_lock(&pf->mu);
		pf->res = x;
		pf->asked = false;
		pf->done = true;
		pthread_cond_broadcast(&pf->cv);
	}
	pthread_mutex_unlock(&pf->mu);
	return NULL;
}

/* 0, or -ENOMEM */
int loader__init(struct loader *ld)
{
	ld->dctx = ZSTD_createDCtx();
	if (LZ4F_isError(LZ4F_createDecompressionContext(&ld->lctx, LZ4F_VERSION)))
		ld->lctx = NULL;
	return ld->dctx && ld->lctx ? 0 : -ENOMEM;
}

void loader__free(struct loader *ld)
{
	ZSTD_freeDCtx(ld->dctx);
	LZ4F_freeDecompressionContext(ld->lctx);
	free(ld->cbuf);
	free(ld->tmp);
	free(ld->runs);
}

static void prefetch__free(struct prefetch *pf)
{
	loader__free(&pf->ld);
	free(pf);
}

struct rframe *prefetch__take(struct prefetch *pf, struct fhdr *h, struct fetch *x)
{
	struct rframe *f;

	pthread_mutex_lock(&pf->mu);
	while (pf->asked)
		pthread_cond_wait(&pf->cv, &pf->mu);
	f = pf->done ? pf->f : NULL;
	*h = pf->h;
	*x = pf->res;
	pf->done = false;
	pf->f = NULL;
	pthread_mutex_unlock(&pf->mu);
	return f;
}

static struct prefetch *prefetch__start(int fd)
{
	struct prefetch *pf = calloc(1, sizeof(*pf));

	if (!pf)
		return NULL;
	pf->fd = fd;
	if (loader__init(&pf->ld) || pthread_mutex_init(&pf->mu, NULL))
		goto release;
	if (pthread_cond_init(&pf->cv, NULL))
		goto destroy_mutex;
	if (!pthread_create(&pf->th, NULL, prefetch__run, pf))
		return pf;
	pthread_cond_destroy(&pf->cv);
destroy_mutex:
	pthread_mutex_destroy(&pf->mu);
release:
	prefetch__free(pf);
	return NULL;
}

/* Stops the helper; returns the frame it holds, if any. */
struct rframe *prefetch__stop(struct prefetch *pf)
{
	struct rframe *f;

	pthread_mutex_lock(&pf->mu);
	pf->quit = true;
	pthread_cond_broadcast(&pf->cv);
	pthread_mutex_unlock(&pf->mu);
	pthread_join(pf->th, NULL);
	f = pf->f;
	pthread_cond_destroy(&pf->cv);
	pthread_mutex_destroy(&pf->mu);
	prefetch__free(pf);
	return f;
}

void prefetch__ask(struct recording_reader *r, const struct fhdr *h)
{
	struct prefetch *pf;
	struct rframe *f;

	if (!r->pf && !r->pf_failed) {
		r->pf = prefetch__start(r->fd);
		r->pf_failed = !r->pf;
	}
	pf = r->pf;
	if (!pf)
		return;
	f = r->nspare ? r->spare[--r->nspare] : calloc(1, sizeof(*f));
	if (!f)
		return;
	pthread_mutex_lock(&pf->mu);
	pf->h = *h;
	pf->f = f;
	pf->asked = true;
	pf->done = false;
	pthread_cond_signal(&pf->cv);
	pthread_mutex_unlock(&pf->mu);
}

