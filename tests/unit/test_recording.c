// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The recording writer and reader: round trips, order, file mode. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "recording.h"
#include "recording_testlib.h"

static void test_round_trip_every_type(void **state)
{
	struct rt_file f;
	struct rt_recs recs = {};
	struct recording_reader *r;
	const struct cp_hdr *rec;
	size_t i = 0;
	int ret;

	rt_recs__every_type(&recs, 1000, 3);
	rt_file__write(&f, &recs, 0);

	assert_int_equal(recording_reader__open(&r, f.path, RECORDING_FILE_ORDER), 0);
	const struct recording_info *info = recording_reader__info(r);
	assert_string_equal(info->host, "testhost");
	assert_string_equal(info->cmdline, "critpath record -p 1");
	assert_null(info->sku);
	assert_int_equal(info->ncpus, 2);
	assert_string_equal(info->cpus[1].model, "Test CPU @ 2.00GHz");
	assert_int_equal(info->cpus[1].mhz, 2000);
	assert_int_equal(info->cpus[1].capacity, 1024);
	assert_int_equal(info->realtime_offset_ns, -12345);
	while ((ret = recording_reader__next(r, &rec)) == 1) {
		assert_true(i < recs.n);
		assert_int_equal(rec->size, recs.r[i]->size);
		assert_memory_equal(rec, recs.r[i], rec->size);
		i++;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(i, recs.n);
	assert_null(recording_reader__stopped(r));
	const struct recording_totals *t = recording_reader__totals(r);
	assert_non_null(t);
	/* Counted by the writer: 13 event types, 6 metadata and 1 unknown, 3 lost
	 * per round. */
	assert_int_equal(t->events, 13 * 1000);
	assert_int_equal(t->metadata, 7 * 1000);
	assert_int_equal(t->lost, 3 * 1000);
	assert_int_equal(t->end_ns, 5000000000ull);
	assert_true(t->frames > 1);
	recording_reader__close(r);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* Many frames, time order across frame boundaries, ties in file order. */
static void check_time_order(uint64_t jitter_ns, unsigned int seed)
{
	struct rt_file f;
	struct rt_recs recs = {};
	struct recording_reader *r;
	const struct cp_hdr *rec;
	uint64_t last_ts = 0, last_seq = 0, n = 0;
	int ret;

	rt_recs__jittered(&recs, 130000, jitter_ns, seed);
	rt_file__write(&f, &recs, 0);

	assert_int_equal(recording_reader__open(&r, f.path, RECORDING_TIME_ORDER), 0);
	while ((ret = recording_reader__next(r, &rec)) == 1) {
		const struct cp_ev_poll *p = (const void *)rec;
		uint64_t seq = (uint64_t)p->ret; /* file position, set by the generator */

		assert_true(rec->ts >= last_ts);
		if (n && rec->ts == last_ts)
			assert_true(seq > last_seq);
		last_ts = rec->ts;
		last_seq = seq;
		n++;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(n, recs.n);
	assert_null(recording_reader__stopped(r));
	assert_true(recording_reader__totals(r)->frames > 10);
	recording_reader__close(r);

	/* File order gives them back exactly as written. */
	assert_int_equal(recording_reader__open(&r, f.path, RECORDING_FILE_ORDER), 0);
	n = 0;
	while ((ret = recording_reader__next(r, &rec)) == 1) {
		assert_memory_equal(rec, recs.r[n], rec->size);
		n++;
	}
	assert_int_equal(n, recs.n);
	recording_reader__close(r);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* Out of order by up to 50 µs, with duplicates, over > 10 frames: many
 * short ascending runs for the reader to merge. */
/* record --clock-skew: every time a record carries moves, the header's
 * start and the trailer's end too; nothing else changes */
static void test_clock_shift(void **state)
{
	const int64_t d = -3000000;
	struct recording_info info = *rt_info();
	struct recording_totals t = {.end_ns = 5000000000ull};
	struct recording_writer *w;
	struct recording_reader *r;
	struct rt_recs recs = {};
	const struct cp_hdr *rec;
	struct rt_file f;
	size_t i = 0;

	rt_recs__every_type(&recs, 20, 5);
	rt_file__path(&f);
	info.clock_shift_ns = d;
	assert_int_equal(recording_writer__open(&w, f.path, &info), 0);
	for (size_t k = 0; k < recs.n; k++)
		assert_int_equal(recording_writer__append(w, recs.r[k]), 0);
	assert_int_equal(recording_writer__close(w, &t), 0);
	assert_int_equal(recording_reader__open(&r, f.path, RECORDING_FILE_ORDER), 0);
	assert_int_equal(recording_reader__info(r)->start_ns, 999999999 + d);
	assert_int_equal(recording_reader__info(r)->realtime_offset_ns, -12345);
	while (recording_reader__next(r, &rec) == 1) {
		const struct cp_hdr *o = recs.r[i++];
		uint8_t want[1024];

		memcpy(want, o, o->size);
		((struct cp_hdr *)want)->ts = o->ts + (uint64_t)d;
#define MOVED(T, f) ((T *)want)->f = ((const T *)o)->f + (uint64_t)d
		switch (o->type) {
		case CP_EV_FUTEX: MOVED(struct cp_ev_futex, enter_ts); break;
		case CP_EV_SOCK: MOVED(struct cp_ev_sock, enter_ts); break;
		case CP_EV_POLL: MOVED(struct cp_ev_poll, enter_ts); break;
		case CP_EV_RUNQ_CULPRIT: MOVED(struct cp_ev_runq_culprit, runnable_since); break;
		case CP_MD_LOSS:
			MOVED(struct cp_md_loss, start_ns);
			MOVED(struct cp_md_loss, end_ns);
			break;
		default: break;
		}
#undef MOVED
		assert_memory_equal(rec, want, o->size);
	}
	assert_int_equal(i, recs.n);
	assert_int_equal(recording_reader__totals(r)->end_ns, 5000000000ull + d);
	recording_reader__close(r);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

static void test_many_frames_time_order(void **state)
{
	check_time_order(50000, 7);
}

/* A few records apart: fewer, longer runs, ties still in file order. */
static void test_many_frames_nearly_in_order(void **state)
{
	check_time_order(4000, 11);
}

/* A record later than the reader's window (64 frames) still comes out, once,
 * and everything else stays in order. */
static void test_beyond_window(void **state)
{
	struct rt_file f;
	struct rt_recs recs = {};
	struct recording_reader *r;
	const struct cp_hdr *rec;
	uint64_t last = 0, n = 0, out_of_order = 0;

	rt_recs__jittered(&recs, 10000, 1, 3);
	recs.r[9000]->ts = 1; /* older than everything, 90 frames late */
	rt_file__write(&f, &recs, 100);
	assert_int_equal(recording_reader__open(&r, f.path, RECORDING_TIME_ORDER), 0);
	while (recording_reader__next(r, &rec) == 1) {
		if (rec->ts < last)
			out_of_order++;
		else
			last = rec->ts;
		n++;
	}
	assert_int_equal(n, recs.n);
	assert_int_equal(out_of_order, 1);
	assert_null(recording_reader__stopped(r));
	recording_reader__close(r);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

static void test_mode_0600(void **state)
{
	struct rt_file f;
	struct rt_recs recs = {};
	struct stat st;

	rt_recs__every_type(&recs, 1, 1);
	rt_file__path(&f);
	/* An existing file with a wide mode is truncated and narrowed. */
	FILE *fp = fopen(f.path, "w");
	assert_non_null(fp);
	fputs("old contents that must go away", fp);
	fclose(fp);
	assert_int_equal(chmod(f.path, 0666), 0);
	rt_file__write_to(&f, &recs, 0);
	assert_int_equal(stat(f.path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_true(recording__sniff(f.data, f.len));
	assert_false(recording__sniff("CRITPRE", 7));
	assert_false(recording__sniff("{\"data\":[]}", 11));
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

static void test_writer_rejects_bad_records(void **state)
{
	struct rt_file f;
	struct recording_writer *w;
	struct cp_hdr h = {.type = CP_EV_POLL, .size = 20};

	rt_file__path(&f);
	assert_int_equal(recording_writer__open(&w, f.path, rt_info()), 0);
	assert_int_equal(recording_writer__append(w, &h), -EINVAL);
	h.size = 28;
	assert_int_equal(recording_writer__append(w, &h), -EINVAL);
	/* Sizes the reader would refuse for the type. */
	struct cp_ev_sock sock = {.h = {.type = CP_EV_SOCK, .size = 48}};
	assert_int_equal(recording_writer__append(w, &sock.h), -EINVAL);
	sock.h.size = 96 + 16;
	sock.payload_len = 17;
	assert_int_equal(recording_writer__append(w, &sock.h), -EINVAL);
	sock.payload_len = 16;
	assert_int_equal(recording_writer__append(w, &sock.h), 0);
	assert_int_equal(recording_writer__close(w, NULL), 0);
	rt_file__remove(&f);
}

static void test_open_errors(void **state)
{
	struct rt_file f;
	struct recording_reader *r = NULL;

	assert_int_equal(recording_reader__open(&r, "/nonexistent/x.rec", RECORDING_FILE_ORDER),
			 -ENOENT);
	assert_null(r);
	assert_non_null(strstr(recording_reader__open_error(), "/nonexistent/x.rec"));

	rt_file__path(&f);
	FILE *fp = fopen(f.path, "w");
	fputs("{\"data\": []}\n", fp);
	fclose(fp);
	assert_true(recording_reader__open(&r, f.path, RECORDING_FILE_ORDER) < 0);
	assert_non_null(strstr(recording_reader__open_error(), "not a critpath recording"));
	rt_file__remove(&f);
}

/* The codec is in the header and in every frame: an lz4 file is format 2,
 * so a reader of format 1 refuses it by its version; a zstd file stays 1.
 * A version this reader does not know is refused, naming both. */
static void test_codec_and_version(void **state)
{
	static const struct {
		uint32_t codec, version;
	} cases[] = {{RECORDING_ZSTD, 1}, {RECORDING_LZ4, 2}};
	struct rt_recs recs = {};
	struct rt_file f;

	rt_recs__every_type(&recs, 50, 4);
	for (size_t c = 0; c < 2; c++) {
		struct recording_reader *r;
		const struct cp_hdr *rec;
		size_t n = 0, off;
		uint32_t v;

		rt_codec = cases[c].codec;
		rt_file__write(&f, &recs, 40);
		assert_int_equal(recording_reader__open(&r, f.path, RECORDING_FILE_ORDER), 0);
		assert_int_equal(recording_reader__info(r)->codec, cases[c].codec);
		assert_int_equal(recording_reader__info(r)->format_version, cases[c].version);
		while (recording_reader__next(r, &rec) == 1)
			assert_memory_equal(rec, recs.r[n++], rec->size);
		assert_int_equal(n, recs.n);
		assert_null(recording_reader__stopped(r));
		recording_reader__close(r);

		/* every frame says how it is compressed (flags at 20) */
		off = 16 + rt_u32(f.data + 12) + 4;
		while (off + 48 <= f.len && !memcmp(f.data + off, "CPFR", 4)) {
			assert_int_equal(rt_u32(f.data + off + 20), cases[c].codec);
			off += 48 + rt_u32(f.data + off + 8);
		}

		/* version 3: the header's CRC made good, the version refused */
		v = 3;
		memcpy(f.data + 8, &v, 4);
		rt_file__rewrite_header(&f);
		assert_true(recording_reader__open(&r, f.path, RECORDING_FILE_ORDER) < 0);
		assert_non_null(strstr(recording_reader__open_error(), "format version 3"));
		assert_non_null(strstr(recording_reader__open_error(), "versions 1 to 2"));
		rt_file__remove(&f);
	}
	rt_codec = RECORDING_ZSTD;
	rt_recs__free(&recs);
}

int main(void)
{
	/* what the writer and reader do the same whatever the codec */
	const struct CMUnitTest codecs[] = {
	    cmocka_unit_test(test_round_trip_every_type),
	    cmocka_unit_test(test_clock_shift),
	    cmocka_unit_test(test_many_frames_time_order),
	    cmocka_unit_test(test_many_frames_nearly_in_order),
	    cmocka_unit_test(test_beyond_window),
	};
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_codec_and_version),
	    cmocka_unit_test(test_mode_0600),
	    cmocka_unit_test(test_writer_rejects_bad_records),
	    cmocka_unit_test(test_open_errors),
	};
	return rt_run_codecs(codecs) | cmocka_run_group_tests(tests, rt_codec_zstd, NULL);
}
