// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The ClickHouse client without a server: clickhouse:// URLs (default port,
 * IPv6, credentials from the URL and the environment, what is refused and
 * why), TabSeparated answers read row by row (escapes, \N, Arrays), and the
 * schema's statements as ClickHouse 18.16 takes them. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ch_rows.h"
#include "clickhouse.h"

static void test_url(void **state)
{
	struct ch_url u;
	char err[256];

	unsetenv("CLICKHOUSE_USER");
	unsetenv("CLICKHOUSE_PASSWORD");
	assert_int_equal(ch_url__parse("clickhouse://ch.example:9123/fleet", &u, err, sizeof(err)),
			 0);
	assert_string_equal(u.host, "ch.example");
	assert_int_equal(u.port, 9123);
	assert_string_equal(u.db, "fleet");
	assert_string_equal(u.user, "");
	assert_int_equal(ch_url__parse("clickhouse://10.0.0.1/db_2", &u, err, sizeof(err)), 0);
	assert_int_equal(u.port, CH_DEFAULT_PORT);
	assert_string_equal(u.db, "db_2");
	assert_int_equal(ch_url__parse("clickhouse://[::1]:8124/x", &u, err, sizeof(err)), 0);
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 8124);
	assert_int_equal(ch_url__parse("clickhouse://[fe80::1]/x", &u, err, sizeof(err)), 0);
	assert_int_equal(u.port, CH_DEFAULT_PORT);
	/* userinfo: percent-decoded, the last '@' ends it */
	assert_int_equal(ch_url__parse("clickhouse://w%40x:p%3As@ss@h:1/d", &u, err, sizeof(err)),
			 0);
	assert_string_equal(u.user, "w@x");
	assert_string_equal(u.password, "p:s@ss");
	assert_string_equal(u.host, "h");
	/* the environment's take their place */
	setenv("CLICKHOUSE_USER", "envuser", 1);
	setenv("CLICKHOUSE_PASSWORD", "envpass", 1);
	assert_int_equal(ch_url__parse("clickhouse://a:b@h/d", &u, err, sizeof(err)), 0);
	assert_string_equal(u.user, "envuser");
	assert_string_equal(u.password, "envpass");
	unsetenv("CLICKHOUSE_USER");
	unsetenv("CLICKHOUSE_PASSWORD");
	assert_true(ch_url__is("clickhouse://x/y"));
	assert_false(ch_url__is("http://x/y"));
}

static void test_url_refused(void **state)
{
	static const struct {
		const char *url, *why;
	} bad[] = {
	    {"http://h:8123/d", "not a clickhouse:// URL"},
	    {"clickhouse:///d", "no host"},
	    {"clickhouse://h:/d", "no port"},
	    {"clickhouse://h:0/d", "port"},
	    {"clickhouse://h:70000/d", "port"},
	    {"clickhouse://h:12x/d", "port"},
	    {"clickhouse://h:8123", "no /DATABASE"},
	    {"clickhouse://h:8123/", "no database"},
	    {"clickhouse://h/d-b", "database name"},
	    {"clickhouse://h/d;DROP", "database name"},
	    {"clickhouse://h/1d", "starts with a digit"},
	    {"clickhouse://h/d?x=1", "query"},
	    {"clickhouse://[::1/d", "']'"},
	    {"clickhouse://u:%zz@h/d", "password"},
	};
	struct ch_url u;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(ch_url__parse(bad[i].url, &u, err, sizeof(err)), -EINVAL);
		if (!strstr(err, bad[i].why))
			fail_msg("%s: said '%s', not '%s'", bad[i].url, err, bad[i].why);
	}
	/* never the password */
	assert_int_equal(ch_url__parse("clickhouse://u:hunter2@h:99999/d", &u, err, sizeof(err)),
			 -EINVAL);
	assert_null(strstr(err, "hunter2"));
}

static void result_of(struct ch_result *r, const char *body)
{
	memset(r, 0, sizeof(*r));
	r->body = strdup(body);
	r->len = strlen(body);
}

static void test_tabseparated(void **state)
{
	struct ch_result r;
	uint64_t u;
	int64_t i;
	size_t n;
	const char *s;

	result_of(&r, "1\ta\\tb\\nc\\\\d\\'e\t\\N\t-5\n"
		      "18446744073709551615\t\t\\x41\\0z\tx\n"
		      "last");
	assert_true(ch_result__row(&r));
	assert_int_equal(r.nfields, 4);
	assert_int_equal(ch_result__u64(&r, 0, &u), 0);
	assert_int_equal(u, 1);
	assert_string_equal(ch_result__str(&r, 1, &n), "a\tb\nc\\d'e");
	assert_int_equal(n, 9);
	/* unescaped once: a second look gives the same */
	assert_string_equal(ch_result__str(&r, 1, NULL), "a\tb\nc\\d'e");
	assert_null(ch_result__str(&r, 2, NULL));
	assert_int_equal(ch_result__u64(&r, 2, &u), -EINVAL);
	assert_int_equal(ch_result__i64(&r, 3, &i), 0);
	assert_int_equal(i, -5);
	assert_int_equal(ch_result__u64(&r, 3, &u), -EINVAL);
	assert_null(ch_result__str(&r, 4, NULL));
	assert_true(ch_result__row(&r));
	assert_int_equal(ch_result__u64(&r, 0, &u), 0);
	assert_true(u == UINT64_MAX);
	assert_string_equal(ch_result__str(&r, 1, &n), "");
	s = ch_result__str(&r, 2, &n);
	assert_int_equal(n, 3); /* a NUL inside */
	assert_memory_equal(s, "A\0z", 3);
	assert_true(ch_result__row(&r)); /* no newline after the last row */
	assert_int_equal(r.nfields, 1);
	assert_string_equal(ch_result__str(&r, 0, NULL), "last");
	assert_false(ch_result__row(&r));
	ch_result__free(&r);
	result_of(&r, "");
	assert_false(ch_result__row(&r));
	ch_result__free(&r);
	result_of(&r, "99999999999999999999\tx1\n");
	assert_true(ch_result__row(&r));
	assert_int_equal(ch_result__u64(&r, 0, &u), -EINVAL); /* past 64 bits */
	assert_int_equal(ch_result__u64(&r, 1, &u), -EINVAL);
	ch_result__free(&r);
}

static void test_arrays(void **state)
{
	struct ch_result r;
	char *p, *item;
	size_t n;

	/* as ClickHouse writes Array(String) and Array(Int32) in TabSeparated */
	result_of(&r, "['a\\'b','c\\\\d','e\\tf','']\t[1,-22,333]\t[]\t['x',\t['x'x]\n");
	assert_true(ch_result__row(&r));
	assert_int_equal(r.nfields, 5);
	p = r.field[0];
	assert_true(ch_array__next(&p, &item, &n));
	assert_string_equal(item, "a'b");
	assert_true(ch_array__next(&p, &item, &n));
	assert_string_equal(item, "c\\d");
	assert_true(ch_array__next(&p, &item, &n));
	assert_string_equal(item, "e\tf");
	assert_true(ch_array__next(&p, &item, &n));
	assert_string_equal(item, "");
	assert_int_equal(n, 0);
	assert_false(ch_array__next(&p, &item, &n));
	assert_false(ch_array__next(&p, &item, &n)); /* and stays at its end */
	p = r.field[1];
	assert_true(ch_array__next(&p, &item, &n));
	assert_string_equal(item, "1");
	assert_true(ch_array__next(&p, &item, &n));
	assert_string_equal(item, "-22");
	assert_int_equal(n, 3);
	assert_true(ch_array__next(&p, &item, NULL));
	assert_string_equal(item, "333");
	assert_false(ch_array__next(&p, &item, NULL));
	p = r.field[2];
	assert_false(ch_array__next(&p, &item, NULL));
	p = r.field[3]; /* cut */
	assert_true(ch_array__next(&p, &item, NULL));
	assert_false(ch_array__next(&p, &item, NULL));
	p = r.field[4]; /* a quote inside */
	assert_false(ch_array__next(&p, &item, NULL));
	ch_result__free(&r);
}

static void test_schema_text(void **state)
{
	/* an insert's columns leave the MATERIALIZED one out, keep the
	 * rest in order */
	assert_string_equal(ch_table__insert_cols(CH_STEPS),
			    "day, batch, rid, host, service, name, start_ns, latency_ns, partial, "
			    "downstream, frames, category, sku, ns");
	assert_string_equal(ch_table__insert_cols(CH_CALLS),
			    "day, batch, rid, host, service, name, start_ns, latency_ns, partial, "
			    "downstream, local_addr, remote_addr, tx_seq, call_start_ns, "
			    "call_end_ns, frames, category, interference");
	assert_non_null(strstr(ch_table__insert_cols(CH_SEGMENTS), "culprit_ns"));
	assert_null(strstr(ch_table__insert_cols(CH_STEPS), "stack"));
	assert_string_equal(ch_tables[CH_SEGMENTS].order_by, "rid, seq");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_url),		 cmocka_unit_test(test_url_refused),
	    cmocka_unit_test(test_tabseparated), cmocka_unit_test(test_arrays),
	    cmocka_unit_test(test_schema_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
