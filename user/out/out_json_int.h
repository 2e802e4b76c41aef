/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* --format json internals shared by json.c and json_req.c. */
#ifndef CRITPATH_OUT_JSON_INT_H
#define CRITPATH_OUT_JSON_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <yajl/yajl_gen.h>

/* our own buffer: a locked fwrite per yajl token was half a large report's time */
#define OUT_BUF 65536

#define RQ_KEPT_SLOTS 256
#define RQ_KEPT_MAX 128
#define RQ_RAW_MAX 96
#define RQ_TAIL 64
/* rq_frag: slots, the words of a key, the bytes of a fragment at most */
#define RQ_FRAG_SLOTS 512
#define RQ_FRAG_KEY 5
#define RQ_FRAG_MAX 192

struct out_json_stream {
	yajl_gen g;
	FILE *f;
	size_t n;
	char last;     /* the last byte written before buf[0] */
	bool interned; /* the request being written has cp_request.interned */
	/* rq_time_at: the digits above the last eight of the time written last */
	uint64_t time_hi;
	uint32_t time_hi_len;
	char time_hi_dig[8];
	/* and the last such time, written whole */
	uint64_t time_last;
	uint32_t time_last_len;
	char time_last_dig[16];
	struct {
		const char *p;
		uint32_t len, rawlen;
		bool stable;
		char json[RQ_KEPT_MAX];
		char raw[RQ_RAW_MAX];
	} kept[RQ_KEPT_SLOTS];
	/* fragments of a segment that repeat (rq_frag): its category and
	 * frames, a thread's pid, tid and comm */
	struct rq_frag {
		uint64_t key[RQ_FRAG_KEY];
		uint32_t len; /* 0: empty */
		char json[RQ_FRAG_MAX];
	} frag[RQ_FRAG_SLOTS];
	uint64_t flushes; /* writes of buf so far: rq_frag keeps bytes no write split */
	char buf[OUT_BUF];
};

/* Writes out what the buffer holds. */
void out_json__flush(struct out_json_stream *s);

#endif /* CRITPATH_OUT_JSON_INT_H */
