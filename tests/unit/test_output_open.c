// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* output__open, where record and report create their files as root: no
 * symbolic link followed (its target untouched), no file of another user's
 * or with other hard links overwritten, an existing file of one's own
 * truncated and made 0600, a device written as it is. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "outfile.h"
#include "recording.h"

static char dir[] = "/tmp/critpath-output-XXXXXX";

static char *at(const char *name)
{
	static char p[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static void put(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static off_t size_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

static int setup(void **state)
{
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) ? -1 : 0;
}

static void test_symlink_not_followed(void **state)
{
	struct stat st;

	put(at("victim"), "precious\n", 0644);
	assert_int_equal(symlink(at("victim"), at("link")), 0);
	assert_int_equal(output__open(at("link"), &st), -ELOOP);
	assert_int_equal(size_of(at("victim")), 9);
	assert_int_equal(stat(at("victim"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_non_null(strstr(output__why(-ELOOP), "symbolic link"));
	/* a dangling one too: nothing is created where it points */
	assert_int_equal(symlink(at("nowhere"), at("dangling")), 0);
	assert_int_equal(output__open(at("dangling"), &st), -ELOOP);
	assert_int_equal(access(at("nowhere"), F_OK), -1);
}

static void test_hard_link_not_overwritten(void **state)
{
	struct stat st;

	put(at("shared"), "someone's\n", 0644);
	assert_int_equal(link(at("shared"), at("alias")), 0);
	assert_int_equal(output__open(at("alias"), &st), -EEXIST);
	assert_int_equal(size_of(at("shared")), 10);
	assert_non_null(strstr(output__why(-EEXIST), "another user"));
}

static void test_other_users_file(void **state)
{
	struct stat st;

	if (geteuid() != 0)
		skip(); /* chown to another user needs root */
	put(at("theirs"), "not root's\n", 0644);
	assert_int_equal(chown(at("theirs"), 65534, 65534), 0);
	assert_int_equal(output__open(at("theirs"), &st), -EEXIST);
	assert_int_equal(size_of(at("theirs")), 11);
}

static void test_own_file_truncated_0600(void **state)
{
	struct stat st;
	int fd;

	put(at("mine"), "an old report\n", 0644);
	fd = output__open(at("mine"), &st);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(size_of(at("mine")), 0);
	assert_int_equal(stat(at("mine"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	fd = output__open(at("new"), &st);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(stat(at("new"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
}

static void test_device_as_it_is(void **state)
{
	struct stat st;
	int fd = output__open("/dev/null", &st);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(stat("/dev/null", &st), 0);
	assert_int_equal(st.st_mode & 0777, 0666);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_symlink_not_followed),
	    cmocka_unit_test(test_hard_link_not_overwritten),
	    cmocka_unit_test(test_other_users_file),
	    cmocka_unit_test(test_own_file_truncated_0600),
	    cmocka_unit_test(test_device_as_it_is),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
