/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
#ifndef CRITPATH_READ_INT_H
#define CRITPATH_READ_INT_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>

#include "recfile.h"
#include "recording.h"

#define WINDOW_FRAMES 64
#define WINDOW_BYTES (64u << 20)
#define RESYNC_CHUNK 65536
#define MSG_LEN 320

struct rkey {
	uint64_t ts;
	uint32_t off;
	uint32_t __pad;
};

struct rframe {
	uint8_t *raw;
	size_t raw_cap;
	struct rkey *keys;
	size_t keys_cap;
	uint32_t n, pos;
	uint32_t raw_size;
};

struct fhdr {
	uint64_t off; /* where the frame header starts */
	uint32_t seq, comp, raw, count, flags, comp_crc;
	uint64_t min_ts, max_ts;
};

struct loader {
	uint8_t *cbuf;
	size_t ccap;
	ZSTD_DCtx *dctx;
	LZ4F_dctx *lctx;
	struct rkey *tmp; /* merge sort scratch */
	size_t tmp_cap;
	uint32_t *runs; /* and its runs */
	size_t runs_cap;
};

struct fetch {
	ssize_t n;	  /* compressed bytes read (< h.comp: cut short), or -errno */
	int err;	  /* -ENOMEM: nothing else is known */
	bool zbad;	  /* not a good zstd or lz4 frame: why, and all its records skipped */
	char why[160];	  /* else, where its records stopped making sense */
	char badwhy[160]; /* the first of nbad records skipped alone */
	uint32_t nbad, k; /* k records kept (f->keys, sorted in time order) */
};

struct prefetch {
	int fd; /* the reader's */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool asked, done, quit;
	struct fhdr h;
	struct rframe *f;
	struct fetch res;
	struct loader ld;
};

struct recording_reader {
	int fd;
	char *path;
	enum recording_order order;
	struct recording_info info;
	char *strings;
	struct recording_cpu *cpus;
	struct loader ld;

	uint64_t off;	   /* next byte to read */
	uint32_t next_seq; /* the sequence number expected next */
	bool resynced;	   /* the last header was found by scanning */
	/* Frame headers read ahead of the loaded frames, a ring. */
	struct fhdr ahead[WINDOW_FRAMES];
	int ahead_first, nahead, lookahead;
	uint64_t ahead_min_ts; /* smallest min_ts in ahead[] */
	bool reading_done;
	int status; /* what next() returns once everything is out */

	struct rframe *loaded[WINDOW_FRAMES];
	int nloaded;
	size_t loaded_bytes;
	struct rframe *spare[WINDOW_FRAMES + 3];
	int nspare;
	struct prefetch *pf; /* NULL: not started (or not startable) */
	bool pf_failed;
	struct rframe *fast;
	uint64_t fast_limit;

	bool has_totals;
	struct recording_totals totals;

	int nproblems;
	char first[MSG_LEN], last[MSG_LEN];
	uint32_t frames_skipped;
	uint64_t records_skipped;
	uint64_t bytes_skipped;
	uint64_t reorder_forced;
	char *stopped;
};

/* frames.c */
void frame__prepare(int fd, const struct fhdr *h, struct loader *ld, struct rframe *f,
		    bool sort, struct fetch *x);
int loader__init(struct loader *ld);
void loader__free(struct loader *ld);
void prefetch__ask(struct recording_reader *r, const struct fhdr *h);
struct rframe *prefetch__take(struct prefetch *pf, struct fhdr *h, struct fetch *x);
struct rframe *prefetch__stop(struct prefetch *pf);

#endif /* CRITPATH_READ_INT_H */
