// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath dump: the JSON lines contract (DESIGN.md section 4), text mode,
 * exit codes. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include <cmocka.h>

#include "commands.h"
#include "recording.h"
#include "recording_testlib.h"

struct run {
	int rc;
	char *out, *err;
	size_t out_len;
};

static char *slurp(FILE *fp, size_t *len)
{
	size_t cap = 4096, n = 0, got;
	char *buf = malloc(cap);

	rewind(fp);
	while ((got = fread(buf + n, 1, cap - n - 1, fp)) > 0) {
		n += got;
		if (n + 1 == cap)
			buf = realloc(buf, cap *= 2);
	}
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

/* Runs cmd_dump with stdout and stderr captured. */
static struct run run_dump(int argc, char **argv)
{
	struct run r;
	FILE *o = tmpfile(), *e = tmpfile();
	int so = dup(1), se = dup(2);

	fflush(stdout);
	fflush(stderr);
	dup2(fileno(o), 1);
	dup2(fileno(e), 2);
	r.rc = cmd_dump(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	/* cmd_dump gave stdout a buffer of its own; give it back a default one. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	r.out = slurp(o, &r.out_len);
	r.err = slurp(e, NULL);
	fclose(o);
	fclose(e);
	return r;
}

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

static const char *jstr(yajl_val v, const char *key)
{
	const char *path[] = {key, NULL};
	yajl_val s = yajl_tree_get(v, path, yajl_t_string);

	return s ? YAJL_GET_STRING(s) : NULL;
}

static long long jint(yajl_val v, const char *key)
{
	const char *path[] = {key, NULL};
	yajl_val s = yajl_tree_get(v, path, yajl_t_number);

	assert_non_null(s);
	return YAJL_GET_INTEGER(s);
}

static bool jhas(yajl_val v, const char *key)
{
	const char *path[] = {key, NULL};

	return yajl_tree_get(v, path, yajl_t_any) != NULL;
}

/* Decodes a JSON-decoded payload (each code point one byte, U+0000..U+00FF,
 * as UTF-8) back to bytes. */
static size_t latin1(const char *s, uint8_t *out)
{
	size_t n = 0;

	for (const uint8_t *p = (const uint8_t *)s; *p; n++) {
		if (*p < 0x80) {
			out[n] = *p++;
		} else {
			out[n] = (uint8_t)((p[0] & 0x1f) << 6 | (p[1] & 0x3f));
			p += 2;
		}
	}
	return n;
}

static void test_json_lines(void **state)
{
	struct rt_file f;
	struct rt_recs recs = {};
	char err[256];
	size_t line_no = 0;
	bool seen_softirq = false, seen_payload = false;

	rt_recs__every_type(&recs, 5, 4);
	rt_file__write(&f, &recs, 16);
	char *argv[] = {"dump", "--json", f.path, NULL};
	struct run r = run_dump(3, argv);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.err, "");

	for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n"), line_no++) {
		yajl_val v = yajl_tree_parse(line, err, sizeof(err));
		const char *type;

		if (!v)
			fail_msg("line %zu is not JSON (%s): %s", line_no, err, line);
		type = jstr(v, "type");
		assert_non_null(type);
		if (line_no == 0) {
			assert_string_equal(type, "header");
			assert_string_equal(jstr(v, "host"), "testhost");
			assert_int_equal(jint(v, "start_ns"), 999999999);
			assert_true(jhas(v, "cpus"));
			yajl_tree_free(v);
			continue;
		}
		if (line_no == recs.n + 1) {
			assert_string_equal(type, "trailer");
			assert_int_equal(jint(v, "events"), 13 * 5);
			yajl_tree_free(v);
			continue;
		}
		assert_true(line_no <= recs.n);
		/* every line: type, ts_ns, pid, tid, cpu; the file is in time order */
		const struct cp_hdr *h = recs.r[line_no - 1];
		assert_int_equal(jint(v, "ts_ns"), h->ts);
		assert_int_equal(jint(v, "pid"), h->pid);
		assert_int_equal(jint(v, "tid"), h->tid);
		assert_int_equal(jint(v, "cpu"), h->cpu);
		if (!strcmp(type, "sched_switch")) {
			const char *ps = jstr(v, "prev_state");
			assert_true(!strcmp(ps, "preempted") || !strcmp(ps, "blocked") ||
				    !strcmp(ps, "dead"));
			assert_string_equal(jstr(v, "next_comm"), "kworker/0:1-even");
			assert_true(jhas(v, "prev_tid") && jhas(v, "next_tid"));
		} else if (!strcmp(type, "sched_waking")) {
			const struct cp_ev_sched_waking *e = (const void *)h;
			if (e->waker_ctx == CP_CTX_TASK) {
				assert_int_equal(jint(v, "waker_tid"), 101);
			} else if (e->waker_ctx == CP_CTX_SOFTIRQ) {
				assert_string_equal(jstr(v, "waker_ctx"), "softirq:NET_RX");
				seen_softirq = true;
			}
			assert_int_equal(jint(v, "wakee_tid"), 102);
		} else if (!strcmp(type, "futex")) {
			assert_string_equal(jstr(v, "phase"), "exit");
			assert_string_equal(jstr(v, "op"), "FUTEX_WAIT_PRIVATE");
			assert_string_equal(jstr(v, "uaddr"), "0x7ffd12345678");
			assert_int_equal(jint(v, "enter_ns"),
					 ((const struct cp_ev_futex *)h)->enter_ts);
			assert_true(jhas(v, "ret"));
		} else if (!strcmp(type, "sock")) {
			const struct cp_ev_sock *e = (const void *)h;
			assert_string_equal(jstr(v, "call"), "recvfrom");
			assert_string_equal(jstr(v, "laddr"), "127.0.0.1");
			assert_int_equal(jint(v, "lport"), 8080);
			assert_string_equal(jstr(v, "raddr"), "10.0.0.2");
			assert_int_equal(jint(v, "rport"), 40000);
			assert_int_equal(jint(v, "tcp_seq"), 123456789);
			assert_int_equal(jint(v, "fd"), 5);
			if (e->payload_len) {
				uint8_t bytes[CP_PAYLOAD_MAX];
				assert_int_equal(latin1(jstr(v, "payload"), bytes), e->payload_len);
				assert_memory_equal(bytes, e->payload, e->payload_len);
				seen_payload = true;
			} else {
				assert_false(jhas(v, "payload"));
			}
		} else if (!strcmp(type, "process_exec")) {
			assert_string_equal(jstr(v, "filename"),
					    ((const struct cp_ev_process_exec *)h)->filename);
		} else if (!strcmp(type, "block")) {
			const char *ph = jstr(v, "phase");
			assert_true(!strcmp(ph, "issue") || !strcmp(ph, "complete"));
		} else if (!strcmp(type, "runq_culprit")) {
			assert_string_equal(jstr(v, "culprit_comm"), "hog");
			assert_int_equal(jint(v, "ns"), 12345);
			assert_int_equal(jint(v, "victim_tid"), h->tid);
		} else if (!strcmp(type, "loss")) {
			assert_int_equal(jint(v, "events"), 3);
		} else if (!strcmp(type, "process")) {
			assert_string_equal(jstr(v, "exe"), "/usr/sbin/server");
			assert_string_equal(jstr(v, "cmdline"), "server --port 8080");
			assert_string_equal(jstr(v, "comm"), "server");
		}
		yajl_tree_free(v);
	}
	assert_int_equal(line_no, recs.n + 2);
	assert_true(seen_softirq && seen_payload);
	run_free(&r);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* TLS plaintext capture: a socket write made inside SSL_write says so
 * (tls: true, its payload the plaintext), a socket read without the flag
 * has no "tls" field (older recordings dump as before), and a tls_read
 * record shows the call, the connection and the plaintext. */
static void test_json_tls(void **state)
{
	static const char get[] = "GET /x HTTP/1.1\r\n";
	struct rt_file f;
	struct rt_recs recs = {};
	char err[256];
	struct cp_ev_sock *plain =
	    rt_rec_var(&recs, CP_EV_SOCK, offsetof(struct cp_ev_sock, payload), sizeof(*plain), 10);
	struct cp_ev_tls_read *tr =
	    rt_rec_var(&recs, CP_EV_TLS_READ,
		       offsetof(struct cp_ev_tls_read, payload) + sizeof(get) - 1, sizeof(*tr), 11);
	struct cp_ev_sock *wr = rt_rec_var(
	    &recs, CP_EV_SOCK, offsetof(struct cp_ev_sock, payload) + 8, sizeof(*wr), 12);
	char *argv[] = {"dump", "--json", NULL, NULL};
	yajl_val v[3];
	struct run r;

	plain->call = CP_SOCK_READ;
	plain->phase = CP_PHASE_EXIT;
	plain->bytes = 51;
	tr->enter_ts = 9;
	tr->bytes = 29;
	tr->fd = 7;
	tr->call = CP_TLS_SSL_READ_EX;
	tr->family = 2;
	tr->lport = 443, tr->rport = 40000;
	tr->laddr[0] = 127, tr->laddr[3] = 1;
	tr->raddr[0] = 127, tr->raddr[3] = 1;
	tr->tcp_seq = 77;
	tr->payload_len = sizeof(get) - 1;
	memcpy(tr->payload, get, sizeof(get) - 1);
	wr->call = CP_SOCK_WRITE;
	wr->phase = CP_PHASE_EXIT;
	wr->bytes = 30;
	wr->flags = CP_SOCK_F_TLS;
	wr->payload_len = 8;
	memcpy(wr->payload, "HTTP/1.1", 8);
	rt_file__write(&f, &recs, 16);
	argv[2] = f.path;
	r = run_dump(3, argv);
	assert_int_equal(r.rc, 0);
	strtok(r.out, "\n"); /* the header */
	for (int i = 0; i < 3; i++) {
		char *line = strtok(NULL, "\n");

		assert_non_null(line);
		v[i] = yajl_tree_parse(line, err, sizeof(err));
		assert_non_null(v[i]);
	}
	assert_string_equal(jstr(v[0], "type"), "sock");
	assert_false(jhas(v[0], "tls"));
	assert_string_equal(jstr(v[1], "type"), "tls_read");
	assert_string_equal(jstr(v[1], "call"), "SSL_read_ex");
	assert_int_equal(jint(v[1], "enter_ns"), 9);
	assert_int_equal(jint(v[1], "bytes"), 29);
	assert_int_equal(jint(v[1], "fd"), 7);
	assert_int_equal(jint(v[1], "lport"), 443);
	assert_string_equal(jstr(v[1], "raddr"), "127.0.0.1");
	assert_int_equal(jint(v[1], "tcp_seq"), 77);
	assert_string_equal(jstr(v[1], "payload"), get);
	assert_string_equal(jstr(v[2], "type"), "sock");
	assert_true(YAJL_IS_TRUE(yajl_tree_get(v[2], (const char *[]){"tls", NULL}, yajl_t_true)));
	assert_string_equal(jstr(v[2], "payload"), "HTTP/1.1");
	for (int i = 0; i < 3; i++)
		yajl_tree_free(v[i]);
	run_free(&r);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

/* HTTP/2 pieces past a prefix (CP_SOCK_F_PIECES) go through the file with
 * their record and dump as "pieces": [{"off", "bytes"}], in order; the end
 * piece of a TLS write (no bytes) is not one of them. */
static void test_json_pieces(void **state)
{
	/* prefix "PRI", a piece at 3000, one at 5000, the end piece (9000) */
	static const uint8_t pieces[] = {0xb8, 0x0b, 0, 0, 3,	0,    'a',  'b', 'c', 0x88, 0x13,
					 0,    0,    1, 0, 'z', 0x28, 0x23, 0,	 0,   0,    0};
	struct rt_file f;
	struct rt_recs recs = {};
	char err[256];
	struct cp_ev_sock *e =
	    rt_rec_var(&recs, CP_EV_SOCK, offsetof(struct cp_ev_sock, payload) + 3 + sizeof(pieces),
		       sizeof(*e) + CP_PAYLOAD_MAX, 10);
	char *argv[] = {"dump", "--json", NULL, NULL};
	yajl_val v, a;
	struct run r;
	char *line;

	e->call = CP_SOCK_WRITE;
	e->phase = CP_PHASE_EXIT;
	e->bytes = 9100;
	e->flags = CP_SOCK_F_TLS | CP_SOCK_F_CUT | CP_SOCK_F_PIECES;
	e->payload_len = 3;
	memcpy(e->payload, "PRI", 3);
	memcpy(e->payload + 3, pieces, sizeof(pieces));
	assert_int_equal(cp_sock_pieces_end(e->payload + 3, sizeof(pieces)), 9000);
	rt_file__write(&f, &recs, 16);
	argv[2] = f.path;
	r = run_dump(3, argv);
	assert_int_equal(r.rc, 0);
	strtok(r.out, "\n"); /* the header */
	line = strtok(NULL, "\n");
	assert_non_null(line);
	v = yajl_tree_parse(line, err, sizeof(err));
	assert_non_null(v);
	assert_string_equal(jstr(v, "payload"), "PRI");
	a = yajl_tree_get(v, (const char *[]){"pieces", NULL}, yajl_t_array);
	assert_non_null(a);
	assert_int_equal(YAJL_GET_ARRAY(a)->len, 2);
	assert_int_equal(jint(YAJL_GET_ARRAY(a)->values[0], "off"), 3000);
	assert_string_equal(jstr(YAJL_GET_ARRAY(a)->values[0], "bytes"), "abc");
	assert_int_equal(jint(YAJL_GET_ARRAY(a)->values[1], "off"), 5000);
	assert_string_equal(jstr(YAJL_GET_ARRAY(a)->values[1], "bytes"), "z");
	yajl_tree_free(v);
	run_free(&r);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void test_text_and_exit_codes(void **state)
{
	struct rt_file f, cut;
	struct rt_recs recs = {};

	rt_recs__every_type(&recs, 3, 5);
	rt_file__write(&f, &recs, 10);

	char *argv[] = {"dump", f.path, NULL};
	struct run r = run_dump(2, argv);
	assert_int_equal(r.rc, 0);
	/* 4 header lines + 2 CPUs + column line, the records, the trailer */
	assert_int_equal(count_lines(r.out), 7 + recs.n + 1);
	assert_non_null(strstr(r.out, "softirq:NET_RX"));
	assert_non_null(strstr(r.out, "op=FUTEX_WAIT_PRIVATE"));
	run_free(&r);

	/* Cut short: everything readable printed, the reason on stderr, exit 1. */
	rt_file__path(&cut);
	FILE *fp = fopen(cut.path, "wb");
	fwrite(f.data, 1, f.len - 100, fp);
	fclose(fp);
	char *argv2[] = {"dump", "--json", "--file-order", cut.path, NULL};
	r = run_dump(4, argv2);
	assert_int_equal(r.rc, 1);
	assert_non_null(strstr(r.err, "cut short in frame"));
	assert_true(count_lines(r.out) > 1 && count_lines(r.out) < recs.n);
	assert_int_equal(count_lines(r.err), 1);
	run_free(&r);

	/* Not a recording: one line naming the file, exit 1. */
	fp = fopen(cut.path, "wb");
	fputs("hello\n", fp);
	fclose(fp);
	char *argv3[] = {"dump", cut.path, NULL};
	r = run_dump(2, argv3);
	assert_int_equal(r.rc, 1);
	assert_int_equal(count_lines(r.err), 1);
	assert_non_null(strstr(r.err, cut.path));
	assert_string_equal(r.out, "");
	run_free(&r);

	/* A forged header's realtime offset at the end of int64: the times
	 * printed saturate, no overflow (under UBSan). */
	for (int i = 0; i < 2; i++) {
		int64_t rt = i ? INT64_MIN : INT64_MAX;
		struct rt_file h;
		char *argv_h[] = {"dump", h.path, NULL};

		rt_file__write(&h, &recs, 0);
		memcpy(h.data + 24, &rt, sizeof(rt)); /* after magic, version, size, abi, flags */
		rt_file__rewrite_header(&h);
		r = run_dump(2, argv_h);
		assert_int_equal(r.rc, 0);
		assert_int_equal(count_lines(r.out), 7 + recs.n + 1);
		run_free(&r);
		rt_file__remove(&h);
	}

	/* Usage errors: exit 2. */
	char *argv4[] = {"dump", NULL};
	r = run_dump(1, argv4);
	assert_int_equal(r.rc, 2);
	run_free(&r);
	char *argv5[] = {"dump", "--bogus", f.path, NULL};
	r = run_dump(3, argv5);
	assert_int_equal(r.rc, 2);
	run_free(&r);

	rt_file__remove(&cut);
	rt_file__remove(&f);
	rt_recs__free(&recs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json_lines),
	    cmocka_unit_test(test_text_and_exit_codes),
	    cmocka_unit_test(test_json_tls),
	    cmocka_unit_test(test_json_pieces),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
