// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* record's command line without root or BPF: what each option sets, and
 * each bad value refused with exit code 2 and a line naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "record_int.h"

static int parse(struct rec_opts *o, char *err, size_t n, ...)
{
	char *argv[32] = {"record"};
	int argc = 1, rc, fd = dup(2);
	FILE *f = tmpfile();
	va_list ap;

	va_start(ap, n);
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	fflush(stderr);
	dup2(fileno(f), 2);
	rc = rec_opts__parse(o, argc, argv);
	fflush(stderr);
	dup2(fd, 2);
	close(fd);
	rewind(f);
	err[fread(err, 1, n - 1, f)] = 0;
	fclose(f);
	return rc;
}

static void test_options(void **state)
{
	static struct rec_opts o;
	char err[4096];

	assert_int_equal(parse(&o, err, sizeof(err), "-p", "12,34", "-p", "56", "-o", "x.rec",
			       "-d", "2.5", "--buffer-mb", "16", "--payload-bytes", "256", "--sku",
			       "m5", "--compress", "zstd", "--probe", "libc.so.6:malloc", "--no-tls",
			       "-q", "--host", "store-1", "--clock-skew", "-2.5ms", NULL),
			 0);
	assert_int_equal(o.npids, 3);
	assert_int_equal(o.pids[2], 56);
	assert_string_equal(o.out, "x.rec");
	assert_true(o.duration == 2.5);
	assert_int_equal(o.bo.buffer_mb, 16);
	assert_int_equal(o.bo.payload_bytes, 256);
	assert_int_equal(o.bo.h2_payload_bytes, 256);
	assert_string_equal(o.sku, "m5");
	assert_string_equal(o.host, "store-1");
	assert_int_equal(o.clock_skew_ns, -2500000);
	assert_int_equal(o.codec, RECORDING_ZSTD);
	assert_int_equal(o.nprobes, 1);
	assert_true(o.bo.probes && !o.bo.tls && o.quiet && o.bo.quiet);
	assert_null(o.cmd);

	assert_int_equal(parse(&o, err, sizeof(err), "--", "sleep", "1", NULL), 0);
	assert_string_equal(o.cmd[0], "sleep");
	assert_string_equal(o.out, "critpath.rec");
	assert_int_equal(o.codec, RECORDING_LZ4);
	assert_int_equal(o.bo.payload_bytes, CP_PAYLOAD_DEFAULT);
	assert_int_equal(o.bo.h2_payload_bytes, CP_PAYLOAD_MAX);
	assert_null(o.host);
	assert_int_equal(o.clock_skew_ns, 0);
}

static void test_refused(void **state)
{
	static const struct {
		const char *args[4], *says;
	} bad[] = {
	    {{"-p", "12x"}, "-p: '12x' is not a process id"},
	    {{"-p", "0"}, "-p: '0' is not a process id"},
	    {{"-p", "1", "-d", "0"}, "-d: '0' is not a positive number of seconds"},
	    {{"-p", "1", "--buffer-mb", "3"}, "--buffer-mb: '3' is not a power of 2"},
	    {{"-p", "1", "--payload-bytes", "513"}, "--payload-bytes: '513' is not a number"},
	    {{"-p", "1", "--compress", "gz"}, "--compress: 'gz' is not lz4 or zstd"},
	    {{"-p", "1", "--probe", "lib:"}, "--probe 'lib:': expected [BINARY:]FUNCTION"},
	    {{"-p", "1", "--", "true"}, "give -p PID or -- CMD, not both"},
	    {{"-p", "1", "--host", ""}, "--host: '' is not a name of 1 to 63"},
	    {{"-p", "1", "--host", "a b"}, "--host: 'a b' has a blank or control character at 2"},
	    {{"-p", "1", "--clock-skew", "3"}, "--clock-skew: '3' is not a duration"},
	    {{"-p", "1", "--clock-skew", "2h"}, "--clock-skew: '2h' is not a duration of at most"},
	    {{"-o", "x"}, "nothing to record"},
	};
	static struct rec_opts o;
	char err[4096];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(&o, err, sizeof(err), bad[i].args[0], bad[i].args[1],
			       bad[i].args[2], bad[i].args[3], NULL);

		if (rc != 2 || !strstr(err, bad[i].says))
			fail_msg("%s %s: exit %d, said: %s", bad[i].args[0], bad[i].args[1], rc, err);
	}
	assert_int_equal(parse(&o, err, sizeof(err), "--help", NULL), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_options),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
