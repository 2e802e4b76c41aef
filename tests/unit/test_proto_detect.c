// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Request names from payload prefixes (user/proto/detect.c): HTTP/1.x
 * method and path (query dropped, numbers folded), memcached text and Redis
 * RESP commands, prefixes cut anywhere, and bytes that are none of these;
 * pipelined requests split by each protocol's framing (user/proto/frame.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "critpath_h2.h"
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

/* The records that open a TLS connection; application data (a request, in
 * ciphertext) stays unnamed. */
static void test_tls(void **state)
{
	static const uint8_t hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
	static const uint8_t ccs[] = {0x14, 0x03, 0x03, 0x00, 0x01, 0x01};
	static const uint8_t data[] = {0x17, 0x03, 0x03, 0x00, 0x2e, 0x9a};
	static const uint8_t not_tls[] = {0x16, 0x02, 0x01, 0x02, 0x00, 0x01};
	char n[KP_NAME_LEN];

	assert_int_equal(proto__request_name(hello, sizeof(hello), n, sizeof(n)), KP_PROTO_TLS);
	assert_string_equal(n, "TLS handshake");
	assert_int_equal(proto__request_name(ccs, sizeof(ccs), n, sizeof(n)), KP_PROTO_TLS);
	assert_string_equal(n, "TLS handshake");
	assert_int_equal(proto__request_name(data, sizeof(data), n, sizeof(n)), KP_PROTO_NONE);
	assert_string_equal(n, "");
	assert_int_equal(proto__request_name(not_tls, sizeof(not_tls), n, sizeof(n)),
			 KP_PROTO_NONE);
	assert_int_equal(proto__request_name(hello, 4, n, sizeof(n)), KP_PROTO_NONE);
}

/* A PostgreSQL message: type, big-endian length (counting itself), body. */
static size_t pg_msg(uint8_t *out, char type, const char *body, size_t blen)
{
	uint32_t l = (uint32_t)blen + 4;

	out[0] = (uint8_t)type;
	out[1] = (uint8_t)(l >> 24), out[2] = (uint8_t)(l >> 16);
	out[3] = (uint8_t)(l >> 8), out[4] = (uint8_t)l;
	memcpy(out + 5, body, blen);
	return 5 + blen;
}

/* body: a string literal, its NUL included (a query ends with one) */
#define PG(m, type, body) pg_msg(m, type, body, sizeof(body))

/* m[0..len) is PostgreSQL, named want */
static void pg_is(const uint8_t *m, size_t len, const char *want)
{
	char n[KP_NAME_LEN];

	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_PG);
	assert_string_equal(n, want);
}

static void test_postgres(void **state)
{
	static const uint8_t startup[] = {0, 0, 0, 40, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0};
	static const uint8_t ssl[] = {0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f};
	uint8_t m[256];
	char n[KP_NAME_LEN];
	size_t len;

	len = PG(m, 'Q', "BEGIN;");
	pg_is(m, len, "BEGIN");
	len = PG(m, 'Q', "  update pgbench_accounts set abalance = 1 where aid = 7;");
	pg_is(m, len, "UPDATE");
	/* cut by the payload prefix: the verb is enough */
	pg_is(m, 14, "UPDATE");
	len = PG(m, 'Q', "(SELECT 1) UNION (SELECT 2)");
	pg_is(m, len, "SELECT");
	/* extended protocol: Parse names the statement's verb, Bind the
	 * prepared statement it runs */
	len = PG(m, 'P', "P_1\0SELECT abalance FROM pgbench_accounts\0\0\0");
	pg_is(m, len, "SELECT");
	len = PG(m, 'B', "\0P_1\0\0\0");
	pg_is(m, len, "EXECUTE P_1");
	len = PG(m, 'B', "\0\0\0\0");
	pg_is(m, len, "EXECUTE");
	len = pg_msg(m, 'X', "", 0);
	pg_is(m, len, "terminate");
	pg_is(startup, sizeof(startup), "startup");
	pg_is(ssl, sizeof(ssl), "SSL request");
	/* not PostgreSQL: no verb, a length that cannot be, text protocols */
	len = PG(m, 'Q', "\x01\x02\x03\x04");
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_NONE);
	len = PG(m, 'Q', "SELECT 1");
	m[1] = 0xff;
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_NONE);
	assert_int_equal(name_of("Quit now please\r\n", n), KP_PROTO_NONE);
}

/* A MySQL packet: 3-byte little-endian length, sequence 0, command, body. */
static size_t my_msg(uint8_t *out, uint8_t cmd, const char *body, size_t blen)
{
	uint32_t l = (uint32_t)blen + 1;

	out[0] = (uint8_t)l, out[1] = (uint8_t)(l >> 8), out[2] = (uint8_t)(l >> 16);
	out[3] = 0;
	out[4] = cmd;
	memcpy(out + 5, body, blen);
	return 5 + blen;
}

static void my_is(const uint8_t *m, size_t len, const char *want)
{
	char n[KP_NAME_LEN];

	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_MYSQL);
	assert_string_equal(n, want);
}

static void test_mysql(void **state)
{
	uint8_t m[256];
	char n[KP_NAME_LEN];
	size_t len;

	len = my_msg(m, 0x03, "select v from t where id=2", 26);
	my_is(m, len, "SELECT");
	len = my_msg(m, 0x03, "UPDATE t SET v=v+1", 18);
	my_is(m, len, "UPDATE");
	len = my_msg(m, 0x0e, "", 0);
	my_is(m, len, "PING");
	len = my_msg(m, 0x17, "\1\0\0\0\0\1\0\0\0", 9);
	my_is(m, len, "EXECUTE");
	len = my_msg(m, 0x01, "", 0);
	my_is(m, len, "QUIT");
	/* not MySQL: a later packet of a command, a PING with a body, no verb */
	len = my_msg(m, 0x03, "SELECT 1", 8);
	m[3] = 1;
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_NONE);
	len = my_msg(m, 0x0e, "xx", 2);
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_NONE);
	len = my_msg(m, 0x03, "\x01\x02", 2);
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_NONE);
}

/* A DNS query for name ("a.b.c"), type qtype: the datagram's bytes. */
static size_t dns_query(uint8_t *m, const char *name, uint16_t qtype, uint16_t arcount)
{
	static const uint8_t hdr[12] = {0x51, 0x2a, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
	size_t o = sizeof(hdr);

	memcpy(m, hdr, sizeof(hdr));
	m[11] = (uint8_t)arcount;
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		m[o++] = (uint8_t)l;
		memcpy(m + o, name, l);
		o += l;
		name += l + (dot != NULL);
	}
	m[o++] = 0;
	m[o++] = (uint8_t)(qtype >> 8);
	m[o++] = (uint8_t)qtype;
	m[o++] = 0;
	m[o++] = 1; /* IN */
	return o;
}

static void test_dns(void **state)
{
	uint8_t m[300];
	char n[KP_NAME_LEN];
	size_t len;

	len = dns_query(m, "www.example.com", 1, 0);
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_DNS);
	assert_string_equal(n, "A www.example.com");
	len = dns_query(m, "db-1.svc.cluster.local", 28, 1); /* with an EDNS record */
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_DNS);
	assert_string_equal(n, "AAAA db-1.svc.cluster.local");
	len = dns_query(m, "4.3.2.1.in-addr.arpa", 12, 0);
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_DNS);
	assert_string_equal(n, "PTR {n}.{n}.{n}.{n}.in-addr.arpa");
	len = dns_query(m, "", 2, 0);
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_DNS);
	assert_string_equal(n, "NS .");
	len = dns_query(m, "x.org", 99, 0);
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_DNS);
	assert_string_equal(n, "TYPE99 x.org");
	/* not queries: a response (QR set), two questions, a cut name, a bad
	 * class, a label with a space */
	len = dns_query(m, "www.example.com", 1, 0);
	m[2] |= 0x80;
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_NONE);
	m[2] &= 0x7f;
	m[5] = 2;
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_NONE);
	m[5] = 1;
	assert_int_equal(proto__request_name(m, 20, n, sizeof(n)), KP_PROTO_NONE);
	m[len - 1] = 3;
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_NONE);
	len = dns_query(m, "a b.com", 1, 0);
	assert_int_equal(proto__request_name(m, len, n, sizeof(n)), KP_PROTO_NONE);
}

/* a FastCGI param into b at *n */
static void fcgi_pair(uint8_t *b, size_t *n, const char *k, const char *v)
{
	b[(*n)++] = (uint8_t)strlen(k);
	b[(*n)++] = (uint8_t)strlen(v);
	memcpy(b + *n, k, strlen(k));
	*n += strlen(k);
	memcpy(b + *n, v, strlen(v));
	*n += strlen(v);
}

/* nginx's call to php-fpm: BEGIN_REQUEST (responder), then PARAMS; named as
 * the web request, templated alike; cut before its method, still FastCGI */
static void test_fastcgi(void **state)
{
	uint8_t b[256] = {1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 4, 0, 1, 0, 0, 0, 0};
	size_t n = 24;
	char name[KP_NAME_LEN];

	fcgi_pair(b, &n, "QUERY_STRING", "id=42&token=x");
	fcgi_pair(b, &n, "REQUEST_METHOD", "GET");
	fcgi_pair(b, &n, "SCRIPT_NAME", "/index.php");
	fcgi_pair(b, &n, "REQUEST_URI", "/users/42?id=42&token=x");
	b[20] = (uint8_t)((n - 24) >> 8);
	b[21] = (uint8_t)(n - 24);
	assert_int_equal(proto__request_name(b, n, name, sizeof(name)), KP_PROTO_FCGI);
	assert_string_equal(name, "GET /users/{n}");
	/* the prefix cut inside REQUEST_URI: SCRIPT_NAME names it */
	assert_int_equal(proto__request_name(b, n - 6, name, sizeof(name)), KP_PROTO_FCGI);
	assert_string_equal(name, "GET /index.php");
	/* SCRIPT_FILENAME first, as nginx's fastcgi.conf sends it, the prefix
	 * ending before SCRIPT_NAME: the file's last part names it */
	n = 24;
	fcgi_pair(b, &n, "SCRIPT_FILENAME", "/srv/www/app/index.php");
	fcgi_pair(b, &n, "REQUEST_METHOD", "POST");
	b[20] = 0;
	b[21] = (uint8_t)(n - 24 + 40);
	assert_int_equal(proto__request_name(b, n, name, sizeof(name)), KP_PROTO_FCGI);
	assert_string_equal(name, "POST /index.php");
	/* cut before REQUEST_METHOD */
	assert_int_equal(proto__request_name(b, 30, name, sizeof(name)), KP_PROTO_FCGI);
	assert_string_equal(name, "FastCGI request");
	/* not a BEGIN_REQUEST of version 1 */
	b[0] = 2;
	assert_int_not_equal(proto__request_name(b, n, name, sizeof(name)), KP_PROTO_FCGI);
}

static void test_unknown(void **state)
{
	static const uint8_t bin[] = {0x00, 0xff, 0x01, 0x02, 0x00, 0x01};
	char n[KP_NAME_LEN];

	assert_int_equal(proto__request_name(bin, sizeof(bin), n, sizeof(n)), KP_PROTO_NONE);
	assert_string_equal(n, "");
	assert_int_equal(proto__request_name(NULL, 0, n, sizeof(n)), KP_PROTO_NONE);
	assert_int_equal(name_of("hello world\r\n", n), KP_PROTO_NONE);
}

/* --- pipelining (user/proto/frame.c) ----------------------------------- */

/* Splits payload (the prefix of a read of total bytes; 0 = all of it) and
 * writes the names found, joined by ',', into names. */
static uint32_t split(const char *payload, size_t plen, uint64_t total, bool *beyond, char *names)
{
	struct proto_msg m[64];
	uint32_t n;
	size_t o = 0;

	if (!plen)
		plen = strlen(payload);
	n = proto__split(proto__request_name((const uint8_t *)payload, plen, names, KP_NAME_LEN),
			 (const uint8_t *)payload, plen, total ? total : plen, m, 64, beyond);
	names[0] = '\0';
	for (uint32_t i = 0; i < n; i++) {
		char nm[KP_NAME_LEN];

		assert_true(m[i].off + m[i].len <= plen);
		proto__request_name((const uint8_t *)payload + m[i].off, m[i].len, nm, sizeof(nm));
		o += (size_t)snprintf(names + o, 1024 - o, "%s%s", i ? "," : "", nm);
	}
	return n;
}

static void test_split_resp(void **state)
{
	const char *p = "*3\r\n$3\r\nSET\r\n$3\r\nk:1\r\n$3\r\nabc\r\n"
			"*3\r\n$3\r\nSET\r\n$3\r\nk:2\r\n$3\r\nabc\r\n"
			"*2\r\n$3\r\nGET\r\n$3\r\nk:1\r\n";
	size_t len = strlen(p);
	char names[1024];
	bool beyond;

	/* redis-benchmark -P 3: three requests, the whole read seen */
	assert_int_equal(split(p, 0, 0, &beyond, names), 3);
	assert_string_equal(names, "SET,SET,GET");
	assert_false(beyond);
	/* the prefix ends on a request boundary, the read went on: not all seen */
	assert_int_equal(split(p, 62, len + 50, &beyond, names), 2);
	assert_string_equal(names, "SET,SET");
	assert_true(beyond);
	/* cut inside the third request after its name: counted; before it: not */
	assert_int_equal(split(p, 62 + 13, len, &beyond, names), 3);
	assert_true(beyond);
	assert_int_equal(split(p, 62 + 10, len, &beyond, names), 2);
	assert_true(beyond);
	/* one request longer than the prefix: one request, nothing unseen */
	assert_int_equal(split(p, 20, 35, &beyond, names), 1);
	assert_string_equal(names, "SET");
	assert_false(beyond);
	/* inline commands, one a line */
	assert_int_equal(split("PING\r\nPING\r\nINFO\r\n", 0, 0, &beyond, names), 3);
	assert_string_equal(names, "PING,PING,INFO");
	/* a binary value that looks like a command is data, not a request */
	assert_int_equal(split("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$14\r\n*1\r\n$4\r\nPING\r\n\r\n", 0,
			       0, &beyond, names),
			 1);
}

static void test_split_memcached(void **state)
{
	const char *p = "set k1 0 0 11\r\nget k2 k3\r\n\r\nget k1\r\n"
			"get k2\r\ndelete k1 noreply\r\n";
	char names[1024];
	bool beyond;

	/* the data block (which holds a command line) is skipped by its length */
	assert_int_equal(split(p, 0, 0, &beyond, names), 4);
	assert_string_equal(names, "set,get,get,delete");
	assert_false(beyond);
	assert_int_equal(split("ms k 2 T0\r\nhi\r\nmg k v\r\n", 0, 0, &beyond, names), 2);
	assert_string_equal(names, "ms,mg");
	/* a data length that is not a number, or one the data does not end
	 * at: not framed further */
	assert_int_equal(split("set k 0 0 x\r\nget k\r\n", 0, 0, &beyond, names), 1);
	assert_int_equal(split("set k 0 0 3\r\nab\r\nget k\r\n", 0, 0, &beyond, names), 1);
}

static void test_split_http(void **state)
{
	const char *p = "POST /item/7 HTTP/1.1\r\nHost: a\r\ncontent-length: 17\r\n\r\n"
			"GET /x HTTP/1.1\r\n"
			"GET /cart HTTP/1.1\r\nHost: a\r\n\r\n"
			"GET /item/8 HTTP/1.1\r\n\r\n";
	const char *chunked = "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
			      "3\r\nabc\r\n0\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
	char names[1024];
	bool beyond;

	/* the POST's 17-byte body looks like a request line but is its body */
	assert_int_equal(split(p, 0, 0, &beyond, names), 3);
	assert_string_equal(names, "POST /item/{n},GET /cart,GET /item/{n}");
	assert_false(beyond);
	/* a chunked body ends the framing: one request */
	assert_int_equal(split(chunked, 0, 0, &beyond, names), 1);
	/* the third request's target is cut: not counted, but some unseen */
	assert_int_equal(split(p, strlen(p) - 15, strlen(p), &beyond, names), 2);
	assert_true(beyond);
	/* cut after its target: counted */
	assert_int_equal(split(p, strlen(p) - 12, strlen(p), &beyond, names), 3);
	assert_string_equal(names, "POST /item/{n},GET /cart,GET /item/{n}");
}

static void test_split_other(void **state)
{
	char names[1024];
	bool beyond;

	assert_int_equal(split("\x01\x02binary\r\n\r\nmore", 0, 100, &beyond, names), 1);
	assert_false(beyond);
	assert_int_equal(proto__split(KP_PROTO_HTTP, (const uint8_t *)"x", 0, 0, NULL, 4, &beyond),
			 0);
	/* a memcached request then bytes of another protocol: one request */
	assert_int_equal(split("get k\r\nGET / HTTP/1.1\r\n\r\n", 0, 0, &beyond, names), 1);
}

/* The one HTTP/2 detector of the BPF side, the redaction and the report
 * (critpath_h2.h): where a connection begins, where it is joined midway. */
static void test_h2_detect(void **state)
{
	static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	static const uint8_t settings[9] = {0, 0, 12, 4, 0, 0, 0, 0, 0};
	static const uint8_t ack[9] = {0, 0, 0, 4, 1, 0, 0, 0, 0};
	static const uint8_t bad_ack[9] = {0, 0, 6, 4, 1, 0, 0, 0, 0};
	static const uint8_t headers[9] = {0, 0, 30, 1, 0x05, 0, 0, 0, 3};
	static const uint8_t pushed[9] = {0, 0, 30, 1, 0x04, 0, 0, 0, 2};
	static const uint8_t ping[9] = {0, 0, 8, 6, 0, 0, 0, 0, 0};
	bool from_start = false;
	int fs = -1;

	assert_int_equal(cp_h2_detect(preface, 24, &fs), 1);
	assert_int_equal(fs, 1);
	assert_int_equal(cp_h2_detect(settings, 9, &fs), 1);
	assert_int_equal(fs, 1);
	assert_int_equal(cp_h2_detect(ack, 9, &fs), 1); /* joined after the prefaces */
	assert_int_equal(fs, 0);
	assert_int_equal(cp_h2_detect(headers, 9, &fs), 1);
	assert_int_equal(fs, 0);
	assert_int_equal(cp_h2_detect(bad_ack, 9, &fs), 0);
	assert_int_equal(cp_h2_detect(pushed, 9, &fs), 0);
	assert_int_equal(cp_h2_detect(ping, 9, &fs), 0);
	assert_int_equal(cp_h2_detect((const uint8_t *)"GET / HTTP/1.1\r\n", 16, &fs), 0);
	assert_int_equal(cp_h2_detect(preface, 8, &fs), 0);
	/* the report's view is the same */
	assert_int_equal(kp__h2_detect(ack, 9, &from_start), 1);
	assert_false(from_start);
	assert_int_equal(kp__h2_detect(settings, 9, &from_start), 1);
	assert_true(from_start);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_http),
	    cmocka_unit_test(test_http_status),
	    cmocka_unit_test(test_dns),
	    cmocka_unit_test(test_memcached),
	    cmocka_unit_test(test_resp),
	    cmocka_unit_test(test_tls),
	    cmocka_unit_test(test_postgres),
	    cmocka_unit_test(test_mysql),
	    cmocka_unit_test(test_fastcgi),
	    cmocka_unit_test(test_unknown),
	    cmocka_unit_test(test_h2_detect),
	    cmocka_unit_test(test_split_resp),
	    cmocka_unit_test(test_split_memcached),
	    cmocka_unit_test(test_split_http),
	    cmocka_unit_test(test_split_other),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
