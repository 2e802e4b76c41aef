// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* outfile and outdir (util/outfile.h): a file is complete under its name or
 * not there, a write error is the system's own, an existing file is
 * replaced only by a complete one, a directory the agent writes into is
 * made 0700 or refused with a reason. Write errors come from RLIMIT_FSIZE
 * (EFBIG) and /dev/full (ENOSPC), so no root is needed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "outfile.h"
#include "recording.h"
#include "recording_testlib.h"

static char dir[] = "/tmp/critpath-outfile-XXXXXX";
static int dfd = -1;

static char *at(const char *name)
{
	static char p[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static char *slurp(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* Entries of path besides . and .. */
static int entries_of(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

static int entries(void)
{
	return entries_of(dir);
}

static void empty_dir(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s/* %s/.[!.]*", dir, dir);
	assert_int_equal(system(cmd), 0);
}

/* Writes past this many bytes of a file fail with EFBIG (SIGXFSZ ignored) */
static void limit_file_size(rlim_t n)
{
	struct rlimit rl;

	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = n;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

static int setup(void **state)
{
	if (!mkdtemp(dir))
		return -1;
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	return dfd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	char cmd[300];

	close(dfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) ? -1 : 0;
}

static void test_complete_file_0600(void **state)
{
	struct outfile o;
	struct stat st;
	FILE *f;

	empty_dir();
	umask(0);
	assert_int_equal(outfile__create(&o, dfd, "a.json"), 0);
	f = outfile__stream(&o);
	assert_non_null(f);
	fprintf(f, "{\"complete\": true}\n");
	/* nothing under the name until it is complete */
	assert_int_equal(access(at("a.json"), F_OK), -1);
	assert_int_equal(outfile__close(&o, 0), 0);
	umask(022);
	assert_string_equal(slurp(at("a.json")), "{\"complete\": true}\n");
	assert_int_equal(stat(at("a.json"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(entries(), 1);
}

static void test_write_error_leaves_nothing(void **state)
{
	struct outfile o;
	FILE *f;

	empty_dir();
	assert_int_equal(outfile__create(&o, dfd, "big.json"), 0);
	f = outfile__stream(&o);
	limit_file_size(1000);
	for (int i = 0; i < 1000; i++)
		fprintf(f, "line %d of a file the disk has no room for\n", i);
	/* the system's error, not stdio's EIO, whatever the writer said */
	assert_int_equal(outfile__close(&o, -EIO), -EFBIG);
	limit_file_size(RLIM_INFINITY);
	assert_int_equal(entries(), 0);
}

static void test_writer_error_leaves_nothing(void **state)
{
	struct outfile o;

	empty_dir();
	assert_int_equal(outfile__create(&o, dfd, "half.json"), 0);
	fputs("{\"half\": ", outfile__stream(&o));
	assert_int_equal(outfile__close(&o, -ENOMEM), -ENOMEM);
	assert_int_equal(entries(), 0);
}

static void test_create_never_replaces(void **state)
{
	struct outfile o;
	int fd;

	empty_dir();
	fd = open(at("taken"), O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "first\n", 6), 6);
	close(fd);
	assert_int_equal(outfile__create(&o, dfd, "taken"), 0);
	fputs("second\n", outfile__stream(&o));
	assert_int_equal(outfile__close(&o, 0), -EEXIST);
	assert_string_equal(slurp(at("taken")), "first\n");
	assert_int_equal(entries(), 1);
	assert_int_equal(outfile__create(&o, dfd, "a/b"), -EINVAL);
}

static void test_open_replaces_when_complete(void **state)
{
	struct outfile o;
	struct stat st;
	int fd;

	empty_dir();
	fd = open(at("report.txt"), O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "old\n", 4), 4);
	fchmod(fd, 0644);
	close(fd);
	/* a failed write keeps the old one whole */
	assert_int_equal(outfile__open(&o, at("report.txt")), 0);
	fputs("new\n", outfile__stream(&o));
	assert_int_equal(outfile__close(&o, -EIO), -EIO);
	assert_string_equal(slurp(at("report.txt")), "old\n");
	/* a complete one replaces it, 0600 */
	assert_int_equal(outfile__open(&o, at("report.txt")), 0);
	fputs("new\n", outfile__stream(&o));
	assert_string_equal(slurp(at("report.txt")), "old\n");
	assert_int_equal(outfile__close(&o, 0), 0);
	assert_string_equal(slurp(at("report.txt")), "new\n");
	assert_int_equal(stat(at("report.txt"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(entries(), 1);
}

static void test_open_refusals(void **state)
{
	struct outfile o;

	empty_dir();
	assert_int_equal(symlink("/etc/passwd", at("link")), 0);
	assert_int_equal(outfile__open(&o, at("link")), -ELOOP);
	assert_int_equal(mkdir(at("sub"), 0700), 0);
	assert_int_equal(outfile__open(&o, at("sub")), -EISDIR);
	assert_int_equal(outfile__open(&o, at("sub/")), -EISDIR);
	assert_int_equal(outfile__open(&o, at("missing/x.json")), -ENOENT);
	assert_int_equal(close(open(at("shared"), O_WRONLY | O_CREAT, 0600)), 0);
	assert_int_equal(link(at("shared"), at("alias")), 0);
	assert_int_equal(outfile__open(&o, at("alias")), -EEXIST);
}

static void test_device_in_place(void **state)
{
	struct outfile o;

	assert_int_equal(outfile__open(&o, "/dev/null"), 0);
	fputs("nothing\n", outfile__stream(&o));
	assert_int_equal(outfile__close(&o, 0), 0);
	assert_int_equal(outfile__open(&o, "/dev/full"), 0);
	fputs("no room\n", outfile__stream(&o));
	assert_int_equal(outfile__close(&o, 0), -ENOSPC);
}

static void test_outdir(void **state)
{
	char why[256];
	struct stat st;
	int fd;

	empty_dir();
	umask(0277);
	fd = outdir__open(at("made"), why, sizeof(why));
	umask(022);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(stat(at("made"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	/* an existing one of one's own, not writable by others: taken, unchanged */
	assert_int_equal(chmod(at("made"), 0755), 0);
	fd = outdir__open(at("made"), why, sizeof(why));
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(symlink(at("made"), at("link")), 0);
	assert_true(outdir__open(at("link"), why, sizeof(why)) < 0);
	assert_non_null(strstr(why, "symbolic link"));
	assert_int_equal(mkdir(at("open"), 0700), 0);
	assert_int_equal(chmod(at("open"), 01777), 0);
	assert_true(outdir__open(at("open"), why, sizeof(why)) < 0);
	assert_non_null(strstr(why, "writable by group or others (mode 1777)"));
	assert_int_equal(chmod(at("open"), 0500), 0);
	assert_true(outdir__open(at("open"), why, sizeof(why)) < 0);
	assert_non_null(strstr(why, "not writable (mode 0500)"));
	assert_int_equal(close(open(at("file"), O_WRONLY | O_CREAT, 0600)), 0);
	assert_true(outdir__open(at("file"), why, sizeof(why)) < 0);
	assert_string_equal(why, "not a directory");
	assert_int_equal(outdir__open(at("no/such"), why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "cannot create it"));
	if (geteuid() == 0) { /* chown to another user needs root */
		assert_int_equal(chmod(at("open"), 0700), 0);
		assert_int_equal(chown(at("open"), 65534, 65534), 0);
		assert_true(outdir__open(at("open"), why, sizeof(why)) < 0);
		assert_non_null(strstr(why, "owned by uid 65534"));
	}
	/* the probe file it made to see the directory writable is gone */
	assert_int_equal(entries_of(at("made")), 0);
}

/* A recording whose header does not fit leaves no empty file */
static void test_recording_without_room(void **state)
{
	struct recording_writer *w;

	empty_dir();
	limit_file_size(16);
	assert_int_equal(recording_writer__open(&w, at("x.rec"), rt_info()), -EFBIG);
	limit_file_size(RLIM_INFINITY);
	assert_null(w);
	assert_int_equal(entries(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_complete_file_0600),
	    cmocka_unit_test(test_write_error_leaves_nothing),
	    cmocka_unit_test(test_writer_error_leaves_nothing),
	    cmocka_unit_test(test_create_never_replaces),
	    cmocka_unit_test(test_open_replaces_when_complete),
	    cmocka_unit_test(test_open_refusals),
	    cmocka_unit_test(test_device_in_place),
	    cmocka_unit_test(test_outdir),
	    cmocka_unit_test(test_recording_without_room),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
