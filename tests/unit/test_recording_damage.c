// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The reader on damaged files: cut at every byte, random byte flips, a
 * writer that runs out of space. Never a crash, never a record that was not
 * written, always a reason. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>
#include <zstd.h>

#include "engine.h"
#include "kpath.h"
#include "recording.h"
#include "recording_testlib.h"

static void write_bytes(const char *path, const uint8_t *data, size_t len)
{
	FILE *fp;

	/* A new file each time: ext4 flushes a file truncated and rewritten
	 * (auto_da_alloc), which made this test wait on the disk. */
	unlink(path);
	fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, len, fp), len);
	fclose(fp);
}

/* Reads path in file order; checks that what comes out is a subsequence of
 * recs (a prefix when prefix is set). Returns the number of records read,
 * or -1 when the file could not be opened. */
static long read_check(const char *path, const struct rt_recs *recs, bool prefix,
		       const char **stopped, bool *clean)
{
	struct recording_reader *r;
	const struct cp_hdr *rec;
	size_t j = 0;
	long n = 0;
	int ret;

	if (recording_reader__open(&r, path, RECORDING_FILE_ORDER) < 0) {
		assert_true(strlen(recording_reader__open_error()) > 0);
		return -1;
	}
	while ((ret = recording_reader__next(r, &rec)) == 1) {
		assert_true(rec->size >= sizeof(struct cp_hdr) && rec->size % 8 == 0);
		if (prefix) {
			assert_true(j < recs->n);
			assert_memory_equal(rec, recs->r[j], rec->size);
			j++;
		} else {
			while (j < recs->n && (recs->r[j]->size != rec->size ||
					       memcmp(rec, recs->r[j], rec->size)))
				j++;
			assert_true(j < recs->n); /* never a record that was not written */
			j++;
		}
		n++;
	}
	assert_true(ret <= 0);
	*clean = recording_reader__stopped(r) == NULL;
	if (stopped) {
		static char buf[1024];
		const char *s = recording_reader__stopped(r);
		snprintf(buf, sizeof(buf), "%s", s ? s : "");
		*stopped = buf;
	}
	recording_reader__close(r);
	return n;
}

/* Every record also comes out in time order, without a crash. */
static long read_time_order(const char *path)
{
	struct recording_reader *r;
	const struct cp_hdr *rec;
	uint64_t last = 0;
	long n = 0;

	if (recording_reader__open(&r, path, RECORDING_TIME_ORDER) < 0)
		return -1;
	while (recording_reader__next(r, &rec) == 1) {
		assert_true(rec->ts >= last);
		last = rec->ts;
		n++;
	}
	recording_reader__close(r);
	return n;
}

static void test_truncate_every_offset(void **state)
{
	struct rt_file f, cut;
	struct rt_recs recs = {};
	long prev = 0;

	rt_recs__every_type(&recs, 2, 1);
	rt_file__write(&f, &recs, 6); /* several small frames */
	rt_file__path(&cut);
	for (size_t len = 0; len <= f.len; len++) {
		const char *why = NULL;
		bool clean;
		long n;

		write_bytes(cut.path, f.data, len);
		n = read_check(cut.path, &recs, true, &why, &clean);
		if (n < 0) {
			/* Only a cut inside the file header makes it unreadable. */
			assert_true(len < 16 + rt_u32(f.data + 12) + 4);
			assert_int_equal(prev, 0);
			continue;
		}
		assert_true(n >= prev); /* more bytes never give fewer records */
		prev = n;
		if (len < f.len) {
			assert_false(clean);
			assert_non_null(strstr(why, cut.path));
			assert_non_null(strstr(why, "cut short"));
		} else {
			assert_true(clean);
			assert_int_equal(n, recs.n);
		}
		assert_int_equal(read_time_order(cut.path), n);
	}
	assert_int_equal(prev, recs.n);
	rt_file__remove(&cut);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

static void test_cut_message(void **state)
{
	struct rt_file f, cut;
	struct rt_recs recs = {};
	const char *why;
	bool clean;

	rt_recs__every_type(&recs, 2, 1);
	rt_file__write(&f, &recs, 6);
	rt_file__path(&cut);
	/* Cut 100 bytes before the trailer: inside the last frame. */
	write_bytes(cut.path, f.data, f.len - 64 - 100);
	read_check(cut.path, &recs, true, &why, &clean);
	assert_non_null(strstr(why, "cut short in frame "));
	assert_non_null(strstr(why, " bytes present"));
	rt_file__remove(&cut);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

static void test_random_flips(void **state)
{
	struct rt_file f, bad;
	struct rt_recs recs = {};
	uint8_t *copy;
	int clean_runs = 0, damaged_runs = 0;

	rt_recs__every_type(&recs, 3, 2);
	rt_file__write(&f, &recs, 9);
	rt_file__path(&bad);
	copy = malloc(f.len);
	assert_non_null(copy);
	srand(12345);
	for (int it = 0; it < 3000; it++) {
		int nflips = 1 + rand() % 3;
		bool clean;
		long n;

		memcpy(copy, f.data, f.len);
		for (int k = 0; k < nflips; k++) {
			size_t pos = (size_t)rand() % f.len;
			copy[pos] ^= (uint8_t)(1 + rand() % 255);
		}
		write_bytes(bad.path, copy, f.len);
		n = read_check(bad.path, &recs, false, NULL, &clean);
		read_time_order(bad.path);
		if (n < 0)
			continue;
		if (clean) {
			/* Checksums cover every byte: clean means untouched data. */
			assert_int_equal(n, recs.n);
			clean_runs++;
		} else {
			damaged_runs++;
		}
	}
	assert_true(damaged_runs > 1000);
	free(copy);
	rt_file__remove(&bad);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* Ranges deleted, duplicated, moved: what comes out is still a subsequence
 * of what was written (frames seen before are not delivered twice). */
static void test_random_splices(void **state)
{
	struct rt_file f, bad;
	struct rt_recs recs = {};
	uint8_t *copy;
	int damaged = 0;

	rt_recs__every_type(&recs, 3, 6);
	rt_file__write(&f, &recs, 7);
	rt_file__path(&bad);
	copy = malloc(2 * f.len);
	assert_non_null(copy);
	srand(777);
	for (int it = 0; it < 1500; it++) {
		size_t a = (size_t)rand() % f.len, b = (size_t)rand() % f.len, len;
		bool clean;

		if (a > b) {
			size_t t = a;
			a = b;
			b = t;
		}
		if (it % 2) {
			/* delete [a, b) */
			memcpy(copy, f.data, a);
			memcpy(copy + a, f.data + b, f.len - b);
			len = f.len - (b - a);
		} else {
			/* insert a copy of [a, b) at a random place */
			size_t at = (size_t)rand() % f.len;
			memcpy(copy, f.data, at);
			memcpy(copy + at, f.data + a, b - a);
			memcpy(copy + at + (b - a), f.data + at, f.len - at);
			len = f.len + (b - a);
		}
		write_bytes(bad.path, copy, len);
		if (read_check(bad.path, &recs, false, NULL, &clean) >= 0 && !clean)
			damaged++;
		read_time_order(bad.path);
	}
	assert_true(damaged > 500);
	free(copy);
	rt_file__remove(&bad);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* A whole frame repeated: reported, not delivered twice. */
static void test_repeated_frame(void **state)
{
	struct rt_file f, bad;
	struct rt_recs recs = {};
	const char *why;
	bool clean;

	rt_recs__every_type(&recs, 2, 1);
	rt_file__write(&f, &recs, 10);
	rt_file__path(&bad);
	size_t first = 16 + rt_u32(f.data + 12) + 4;
	size_t flen = 48 + rt_u32(f.data + first + 8);
	uint8_t *copy = malloc(f.len + flen);
	memcpy(copy, f.data, first + flen);
	memcpy(copy + first + flen, f.data + first, f.len - first);
	write_bytes(bad.path, copy, f.len + flen);
	assert_int_equal(read_check(bad.path, &recs, true, &why, &clean), recs.n);
	assert_false(clean);
	assert_non_null(strstr(why, "repeats sequence number 0"));
	free(copy);
	rt_file__remove(&bad);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* A corrupted frame in the middle costs that frame only. */
static void test_skip_bad_frame(void **state)
{
	struct rt_file f, bad;
	struct rt_recs recs = {};
	const char *why;
	bool clean;
	long n;

	rt_recs__every_type(&recs, 4, 3);
	rt_file__write(&f, &recs, 10);
	rt_file__path(&bad);
	/* Damage the contents of the middle frame, not its header. */
	size_t offs[64], nf = 0, off = 16 + rt_u32(f.data + 12) + 4;
	while (off + 48 <= f.len && !memcmp(f.data + off, "CPFR", 4) && nf < 64) {
		offs[nf++] = off;
		off += 48 + rt_u32(f.data + off + 8);
	}
	assert_true(nf >= 4);
	size_t mid = offs[nf / 2] + 48 + rt_u32(f.data + offs[nf / 2] + 8) / 2;
	f.data[mid] ^= 0x55;
	write_bytes(bad.path, f.data, f.len);
	n = read_check(bad.path, &recs, false, &why, &clean);
	assert_false(clean);
	assert_true(n >= (long)recs.n - 10 - 10);
	assert_true(n < (long)recs.n);
	assert_non_null(strstr(why, "skipped"));

	/* A broken frame header: the reader finds the next one. */
	f.data[mid] ^= 0x55;
	uint8_t *p = memmem(f.data + f.len / 3, f.len - f.len / 3, "CPFR", 4);
	assert_non_null(p);
	p[1] = 'X';
	write_bytes(bad.path, f.data, f.len);
	n = read_check(bad.path, &recs, false, &why, &clean);
	assert_false(clean);
	assert_true(n >= (long)recs.n - 10);
	assert_non_null(strstr(why, "next good frame header"));
	rt_file__remove(&bad);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* A writer that runs out of room returns the error and leaves a file that
 * reads as cut short, with every record before the failure intact. */
static void test_writer_out_of_space(void **state)
{
	struct rt_file f;
	struct rt_recs recs = {};
	pid_t pid;
	int status;

	rt_recs__jittered(&recs, 60000, 1, 1);
	rt_file__path(&f);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = {30000, 30000};
		struct recording_writer *w;
		int err = 0;
		size_t i;

		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		if (recording_writer__open(&w, f.path, rt_info()))
			_exit(10);
		for (i = 0; i < recs.n && !err; i++) {
			err = recording_writer__append(w, recs.r[i]);
			if (!err && i % 2000 == 1999)
				err = recording_writer__flush(w);
		}
		if (err != -EFBIG)
			_exit(11);
		/* Close retries the flush, fails again, and says so. */
		_exit(recording_writer__close(w, NULL) == -EFBIG ? 0 : 12);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	const char *why;
	bool clean;
	long n = read_check(f.path, &recs, true, &why, &clean);
	assert_true(n > 0);
	assert_false(clean);
	assert_non_null(strstr(why, "no trailer"));
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* A file whose checksums are all right but whose frame holds records no
 * writer would produce (a forged file, or a writer bug): the reader must
 * still check each record. raw holds the frame's records. */
static void forge(const char *path, const uint8_t *head, size_t head_len, const uint8_t *raw,
		  uint32_t raw_len, uint32_t count)
{
	uint8_t hdr[48] = {'C', 'P', 'F', 'R'};
	size_t cap = ZSTD_compressBound(raw_len), clen;
	uint8_t *c = malloc(cap);
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	uint64_t min = 0, max = UINT64_MAX;
	uint32_t crc;
	FILE *fp;

	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	clen = ZSTD_compress2(cctx, c, cap, raw, raw_len);
	assert_false(ZSTD_isError(clen));
	memcpy(hdr + 8, &(uint32_t){(uint32_t)clen}, 4);
	memcpy(hdr + 12, &raw_len, 4);
	memcpy(hdr + 16, &count, 4);
	memcpy(hdr + 24, &min, 8);
	memcpy(hdr + 32, &max, 8);
	crc = (uint32_t)crc32(0, hdr, 44);
	memcpy(hdr + 44, &crc, 4);
	unlink(path);
	fp = fopen(path, "wb");
	assert_non_null(fp);
	fwrite(head, 1, head_len, fp);
	fwrite(hdr, 1, sizeof(hdr), fp);
	fwrite(c, 1, clen, fp);
	fclose(fp);
	ZSTD_freeCCtx(cctx);
	free(c);
}

static long forged_read(const char *path, const char **why)
{
	struct recording_reader *r;
	const struct cp_hdr *rec;
	long n = 0;

	assert_int_equal(recording_reader__open(&r, path, RECORDING_TIME_ORDER), 0);
	while (recording_reader__next(r, &rec) == 1) {
		assert_int_equal(rec->type, CP_EV_POLL);
		n++;
	}
	static char buf[1024];
	snprintf(buf, sizeof(buf), "%s", recording_reader__stopped(r) ?: "");
	*why = buf;
	recording_reader__close(r);
	return n;
}

static void test_forged_records(void **state)
{
	struct rt_file f, bad;
	struct rt_recs recs = {};
	uint8_t raw[4096] = {};
	struct cp_ev_poll poll = {.h = {.type = CP_EV_POLL, .size = sizeof(poll), .ts = 5}};
	struct cp_ev_sock sock = {.h = {.type = CP_EV_SOCK, .size = 104, .ts = 6}};
	const char *why;
	size_t head_len;

	rt_recs__every_type(&recs, 1, 1);
	rt_file__write(&f, &recs, 0);
	rt_file__path(&bad);
	head_len = 16 + rt_u32(f.data + 12) + 4;

	/* poll, a sock whose payload_len overruns it, poll: the sock alone goes. */
	sock.payload_len = 200;
	memcpy(raw, &poll, 48);
	memcpy(raw + 48, &sock, 104);
	memcpy(raw + 152, &poll, 48);
	forge(bad.path, f.data, head_len, raw, 200, 3);
	assert_int_equal(forged_read(bad.path, &why), 2);
	assert_non_null(strstr(why, "record 1 (sock) at offset 48: payload_len overruns"));

	/* A record claiming 16 bytes: the walk cannot go on, the rest is dropped. */
	struct cp_hdr tiny = {.type = CP_EV_POLL, .size = 16};
	memcpy(raw + 48, &tiny, sizeof(tiny));
	forge(bad.path, f.data, head_len, raw, 200, 3);
	assert_int_equal(forged_read(bad.path, &why), 1);
	assert_non_null(strstr(why, "size below 24"));

	/* One overrunning the frame. */
	tiny.size = 4000;
	memcpy(raw + 48, &tiny, sizeof(tiny));
	forge(bad.path, f.data, head_len, raw, 200, 3);
	assert_int_equal(forged_read(bad.path, &why), 1);
	assert_non_null(strstr(why, "overruns the frame"));

	/* The header's count disagrees with the contents. */
	memcpy(raw + 48, &poll, 48);
	memcpy(raw + 96, &poll, 48);
	forge(bad.path, f.data, head_len, raw, 144, 4);
	assert_int_equal(forged_read(bad.path, &why), 3);
	assert_non_null(strstr(why, "the header says 4"));

	rt_file__remove(&bad);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* f's header forged: its realtime offset (at byte 24) and the first
 * occurrence of boot_id's bytes replaced by another host's. */
static void forge_realtime(struct rt_file *f, int64_t rt, const char *boot_id)
{
	const char *old = rt_info()->boot_id;
	uint8_t *p = memmem(f->data, 16 + rt_u32(f->data + 12), old, strlen(old));

	assert_non_null(p);
	assert_int_equal(strlen(boot_id), strlen(old));
	memcpy(p, boot_id, strlen(boot_id));
	memcpy(f->data + 24, &rt, sizeof(rt));
	rt_file__rewrite_header(f);
}

static bool warned(const struct engine_result *r, const char *part)
{
	for (uint32_t i = 0; i < r->nwarnings; i++)
		if (strstr(r->warnings[i], part))
			return true;
	return false;
}

/* Two hosts' recordings whose headers state realtime offsets at the ends
 * of int64 (forged: no clock reads 292 years from 1970): their difference,
 * which places one host's times on the other's, does not fit. Offsets more
 * than 2^62 ns from 0 are refused with a warning naming the field, and both
 * files are analysed; the largest accepted ones still fit. */
static void test_hostile_realtime(void **state)
{
	const int64_t lim = (INT64_C(1) << 62) - 1;
	/* a's, b's, refused */
	const int64_t offs[][3] = {
	    {INT64_MAX, INT64_MIN, 1},
	    {INT64_MIN, INT64_MAX, 1},
	    {INT64_MIN, 1, 1},
	    {0, INT64_MIN, 1},
	    {-12345, INT64_MAX, 1},
	    {lim + 1, 0, 1},
	    {lim, -lim, 0},
	    {-lim, lim, 0},
	};
	struct rt_recs recs = {};

	rt_recs__every_type(&recs, 3, 7);
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		struct rt_file a, b;
		const char *paths[] = {a.path, b.path};
		struct engine *e = engine__new(&(struct engine_opts){.keep_all_requests = true});
		const struct engine_result *r;

		rt_file__write(&a, &recs, 0);
		rt_file__write(&b, &recs, 0);
		forge_realtime(&a, offs[i][0], "host-a-boot-0001");
		forge_realtime(&b, offs[i][1], "host-b-boot-0002");
		engine__set_quiet(e, true);
		assert_int_equal(kpath__analyze(paths, 2, (struct cp_sink[]){engine__sink(e)},
						&(struct kpath_opts){.quiet = true}),
				 0);
		r = engine__result(e);
		assert_non_null(r);
		assert_int_equal(warned(r, "realtime_offset_ns"), offs[i][2]);
		engine__free(e);
		rt_file__remove(&a);
		rt_file__remove(&b);
	}
	rt_recs__free(&recs);
}

int main(void)
{
	/* clang-format off */
	/* the same damage to files of either codec */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_truncate_every_offset),
		cmocka_unit_test(test_cut_message),
		cmocka_unit_test(test_random_flips),
		cmocka_unit_test(test_random_splices),
		cmocka_unit_test(test_repeated_frame),
		cmocka_unit_test(test_skip_bad_frame),
		cmocka_unit_test(test_writer_out_of_space),
	};
	/* forged: frames with zstd's own API, headers (either codec would do) */
	const struct CMUnitTest zstd_tests[] = {
		cmocka_unit_test(test_forged_records),
		cmocka_unit_test(test_hostile_realtime),
	};
	/* clang-format on */
	return rt_run_codecs(tests) |
	       cmocka_run_group_tests_name("zstd frames", zstd_tests, rt_codec_zstd, NULL);
}
