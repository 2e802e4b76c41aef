// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The recording writer with its compression thread
 * (recording_writer__background): the same records and counts as without,
 * a small queue that makes the caller wait, and write errors that come back
 * to the caller. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "recording.h"
#include "recording_testlib.h"

/* Writes recs through a writer with a compression thread of queue frames,
 * flushing every flush_every records (0: never). */
static void write_bg(struct rt_file *f, const struct rt_recs *rs, unsigned queue,
		     size_t flush_every)
{
	struct recording_writer *w;
	struct recording_totals t = {.end_ns = 5000000000ull};

	rt_file__path(f);
	assert_int_equal(recording_writer__open(&w, f->path, rt_info()), 0);
	assert_int_equal(recording_writer__background(w, queue), 0);
	for (size_t i = 0; i < rs->n; i++) {
		assert_int_equal(recording_writer__append(w, rs->r[i]), 0);
		if (flush_every && (i + 1) % flush_every == 0)
			assert_int_equal(recording_writer__flush(w), 0);
	}
	assert_int_equal(recording_writer__close(w, &t), 0);
	rt_file__load(f);
}

/* Reads f in file order: every record equal to recs, then the trailer. */
static const struct recording_totals *
check_records(struct recording_reader **r, const struct rt_file *f, const struct rt_recs *recs)
{
	const struct cp_hdr *rec;
	size_t n = 0;
	int ret;

	assert_int_equal(recording_reader__open(r, f->path, RECORDING_FILE_ORDER), 0);
	while ((ret = recording_reader__next(*r, &rec)) == 1) {
		assert_true(n < recs->n);
		assert_int_equal(rec->size, recs->r[n]->size);
		assert_memory_equal(rec, recs->r[n], rec->size);
		n++;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(n, recs->n);
	assert_null(recording_reader__stopped(*r));
	return recording_reader__totals(*r);
}

/* Same records, frames and counts as the writer without a thread. */
static void test_background_round_trip(void **state)
{
	struct rt_file sync, bg;
	struct rt_recs recs = {};
	struct recording_reader *r;
	const struct recording_totals *t;
	uint32_t frames;

	rt_recs__every_type(&recs, 3000, 5);
	rt_file__write(&sync, &recs, 0);
	t = check_records(&r, &sync, &recs);
	assert_non_null(t);
	frames = t->frames;
	assert_true(frames > 2);
	recording_reader__close(r);

	write_bg(&bg, &recs, 16, 0);
	t = check_records(&r, &bg, &recs);
	assert_non_null(t);
	assert_int_equal(t->frames, frames);
	assert_int_equal(t->events, 13 * 3000);
	assert_int_equal(t->metadata, 7 * 3000);
	assert_int_equal(t->lost, 3 * 3000);
	recording_reader__close(r);
	rt_file__remove(&sync);
	rt_file__remove(&bg);
	rt_recs__free(&recs);
}

/* A queue of two frames, many frames and flushes: the caller waits for
 * slots, nothing is dropped, time order still holds across frames. */
static void test_background_small_queue(void **state)
{
	struct rt_file f;
	struct rt_recs recs = {};
	struct recording_reader *r;
	const struct recording_totals *t;
	const struct cp_hdr *rec;
	uint64_t last = 0, n = 0;

	rt_recs__jittered(&recs, 130000, 50000, 11);
	write_bg(&f, &recs, 2, 5000);
	t = check_records(&r, &f, &recs);
	assert_non_null(t);
	assert_true(t->frames >= 130000 / 5000);
	assert_int_equal(t->events, 130000);
	recording_reader__close(r);

	assert_int_equal(recording_reader__open(&r, f.path, RECORDING_TIME_ORDER), 0);
	while (recording_reader__next(r, &rec) == 1) {
		assert_true(rec->ts >= last);
		last = rec->ts;
		n++;
	}
	assert_int_equal(n, recs.n);
	recording_reader__close(r);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* A write the thread cannot finish (the file size limit): a later append,
 * flush or close says so, no trailer is written, and the file reads as cut
 * short after whole frames only. */
static void test_background_write_error(void **state)
{
	struct rt_file f;
	struct rt_recs recs = {};
	struct recording_writer *w;
	struct recording_reader *r;
	struct rlimit old, small;
	const struct cp_hdr *rec;
	int err = 0, ret;
	size_t i, n = 0;

	rt_recs__jittered(&recs, 130000, 50000, 13);
	rt_file__path(&f);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small = old;
	small.rlim_cur = 256 * 1024; /* the header and a few frames */
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(recording_writer__open(&w, f.path, rt_info()), 0);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	assert_int_equal(recording_writer__background(w, 4), 0);
	for (i = 0; i < recs.n && !err; i++)
		err = recording_writer__append(w, recs.r[i]);
	if (!err)
		err = recording_writer__flush(w);
	ret = recording_writer__close(w, NULL);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	/* the error came back from an append, or at the latest from close */
	assert_int_equal(err ? err : ret, -EFBIG);
	assert_int_equal(ret, -EFBIG);

	assert_int_equal(recording_reader__open(&r, f.path, RECORDING_FILE_ORDER), 0);
	while ((ret = recording_reader__next(r, &rec)) == 1) {
		assert_memory_equal(rec, recs.r[n], rec->size);
		n++;
	}
	assert_true(n > 0 && n < recs.n);
	assert_null(recording_reader__totals(r));
	assert_non_null(recording_reader__stopped(r));
	recording_reader__close(r);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

static void test_background_bad_args(void **state)
{
	struct rt_file f;
	struct recording_writer *w;

	assert_int_equal(recording_writer__background(NULL, 16), -EINVAL);
	rt_file__path(&f);
	assert_int_equal(recording_writer__open(&w, f.path, rt_info()), 0);
	assert_int_equal(recording_writer__background(w, 1), -EINVAL);
	assert_int_equal(recording_writer__background(w, 2), 0);
	assert_int_equal(recording_writer__background(w, 2), -EINVAL); /* already */
	/* nothing appended: a file with no frames and a trailer */
	assert_int_equal(recording_writer__close(w, NULL), 0);
	rt_file__remove(&f);
}

int main(void)
{
	const struct CMUnitTest codecs[] = {
	    cmocka_unit_test(test_background_round_trip),
	    cmocka_unit_test(test_background_small_queue),
	};
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_background_write_error),
	    cmocka_unit_test(test_background_bad_args),
	};
	return rt_run_codecs(codecs) | cmocka_run_group_tests(tests, rt_codec_zstd, NULL);
}
