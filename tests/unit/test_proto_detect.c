// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Request names from payload prefixes (user/proto_detect.c): HTTP/1.x
 * method and path (query dropped, numbers folded), memcached text and Redis
 * RESP commands, prefixes cut anywhere, and bytes that are none of these.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kpath_internal.h"

static enum kp_proto name_of(const char *payload, char *name)
{
	return proto__request_name((const uint8_t *)payload, strlen(payload), name, KP_NAME_LEN);
}

static void test_http(void **state)
{
	char n[KP_NAME_LEN];

	assert_int_equal(name_of("GET /cart HTTP/1.1\r\nHost: x\r\n\r\n", n), KP_PROTO_HTTP);
	assert_string_equal(n, "GET /cart");
	assert_int_equal(name_of("GET /cart?id=17 HTTP/1.1\r\n", n), KP_PROTO_HTTP);
	assert_string_equal(n, "GET /cart");
	assert_int_equal(name_of("GET /item/17 HTTP/1.1\r\n", n), KP_PROTO_HTTP);
	assert_string_equal(n, "GET /item/{n}");
	assert_int_equal(name_of("POST /api/v2/users/42/orders HTTP/1.0\r\n", n), KP_PROTO_HTTP);
	assert_string_equal(n, "POST /api/v2/users/{n}/orders");
	assert_int_equal(name_of("GET /kp/3 HTTP/1.1\r\n", n), KP_PROTO_HTTP);
	assert_string_equal(n, "GET /kp/{n}");
	/* a prefix cut inside the path still names it */
	assert_int_equal(name_of("DELETE /very/long/pa", n), KP_PROTO_HTTP);
	assert_string_equal(n, "DELETE /very/long/pa");
	assert_int_equal(name_of("GET", n), KP_PROTO_NONE);
	assert_int_equal(name_of("GETX/1", n), KP_PROTO_NONE);
}

static void test_http_status(void **state)
{
	const char *ok = "HTTP/1.1 200 OK\r\n";
	const char *nf = "HTTP/1.0 404 Not Found\r\n";

	assert_int_equal(proto__http_status((const uint8_t *)ok, strlen(ok)), 200);
	assert_int_equal(proto__http_status((const uint8_t *)nf, strlen(nf)), 404);
	assert_int_equal(proto__http_status((const uint8_t *)"HTTP/1.1 2", 10), 0);
	assert_int_equal(proto__http_status((const uint8_t *)"STORED\r\n", 8), 0);
}

static void test_memcached(void **state)
{
	char n[KP_NAME_LEN];

	assert_int_equal(name_of("get k0:1\r\n", n), KP_PROTO_MEMCACHED);
	assert_string_equal(n, "get");
	assert_int_equal(name_of("set k0:1 0 0 9\r\nvalue-0-1\r\n", n), KP_PROTO_MEMCACHED);
	assert_string_equal(n, "set");
	assert_int_equal(name_of("delete k\r\n", n), KP_PROTO_MEMCACHED);
	assert_string_equal(n, "delete");
	assert_int_equal(name_of("version\r\n", n), KP_PROTO_MEMCACHED);
	assert_string_equal(n, "version");
	assert_int_equal(name_of("gets", n), KP_PROTO_MEMCACHED);
	assert_int_equal(name_of("getx k\r\n", n), KP_PROTO_NONE);
}

static void test_resp(void **state)
{
	char n[KP_NAME_LEN];

	assert_int_equal(name_of("*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000042\r\n", n),
			 KP_PROTO_RESP);
	assert_string_equal(n, "SET");
	assert_int_equal(name_of("*2\r\n$3\r\nget\r\n$3\r\nfoo\r\n", n), KP_PROTO_RESP);
	assert_string_equal(n, "GET");
	assert_int_equal(name_of("*1\r\n$4\r\nPING\r\n", n), KP_PROTO_RESP);
	assert_string_equal(n, "PING");
	/* inline command */
	assert_int_equal(name_of("PING\r\n", n), KP_PROTO_RESP);
	assert_string_equal(n, "PING");
	assert_int_equal(name_of("*x\r\n", n), KP_PROTO_NONE);
}

static void test_unknown(void **state)
{
	static const uint8_t bin[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
	char n[KP_NAME_LEN];

	assert_int_equal(proto__request_name(bin, sizeof(bin), n, sizeof(n)), KP_PROTO_NONE);
	assert_string_equal(n, "");
	assert_int_equal(proto__request_name(NULL, 0, n, sizeof(n)), KP_PROTO_NONE);
	assert_int_equal(name_of("hello world\r\n", n), KP_PROTO_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_http),      cmocka_unit_test(test_http_status),
	    cmocka_unit_test(test_memcached), cmocka_unit_test(test_resp),
	    cmocka_unit_test(test_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
