// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The store's writer against a fake ClickHouse (HTTP on a thread): an
 * insert whose answer never came is counted for before it is resent, and
 * not resent when it landed; a batch per day; a server that is not there
 * fills the bounded buffer, the oldest batches dropped and counted; a
 * schema of another version refused, named, and every request after it
 * counted failed. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "ch_rows.h"
#include "ch_writer.h"

#define DAY_NS 86400000000000ll

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- a fake ClickHouse ---------------------------------------------------------- */

struct fake {
	int fd, port;
	pthread_t th;
	pthread_mutex_t mu;
	const char *version;	/* SELECT DISTINCT version's answer */
	const char *lose_first; /* the first insert into this table: kept, unanswered */
	const char *slow_first; /* kept, answered after 1.5 s */
	const char *refuse;	/* every insert into this table: HTTP 500 */
	bool lost, slowed;
	unsigned inserts[CH_TABLES], counts[CH_TABLES];
	bool stored[CH_TABLES];
	unsigned schema_inserts;
	/* a thread per connection: curl keeps one open while it opens another */
	struct conn {
		struct fake *f;
		int fd;
		pthread_t th;
	} conns[64];
	int nconns;
};

static int table_of(const char *s)
{
	for (int t = 0; t < CH_TABLES; t++) {
		char k[64];

		snprintf(k, sizeof(k), ".%s", ch_tables[t].name);
		if (strstr(s, k) && !strstr(s, ".critpath_schema"))
			return t;
	}
	return -1;
}

/* One request's answer: 0 answered, -1 the connection closed */
static int serve_one(struct fake *f, int c)
{
	char head[8192], *body, ans[256];
	const char *reply = "";
	size_t n = 0, clen = 0, got;
	char *end, *cl;
	bool lose = false, slow = false, refused = false;

	while (!(end = memmem(head, n, "\r\n\r\n", 4))) {
		ssize_t r = n < sizeof(head) - 1 ? read(c, head + n, sizeof(head) - 1 - n) : -1;

		if (r <= 0)
			return -1;
		n += (size_t)r;
	}
	head[n] = '\0';
	if ((cl = strcasestr(head, "Content-Length:")))
		clen = strtoul(cl + 15, NULL, 10);
	body = malloc(clen + 1);
	got = n - (size_t)(end + 4 - head);
	memcpy(body, end + 4, got);
	while (got < clen) {
		ssize_t r = read(c, body + got, clen - got);

		if (r <= 0) {
			free(body);
			return -1;
		}
		got += (size_t)r;
	}
	body[clen] = '\0';
	pthread_mutex_lock(&f->mu);
	if (!strncmp(head, "POST /?query=INSERT", 19)) {
		int t = table_of(head);

		if (t >= 0) {
			f->inserts[t]++;
			refused = f->refuse && !strcmp(f->refuse, ch_tables[t].name);
			f->stored[t] |= !refused;
			if (f->lose_first && !strcmp(f->lose_first, ch_tables[t].name) && !f->lost)
				lose = f->lost = true;
			if (f->slow_first && !strcmp(f->slow_first, ch_tables[t].name) &&
			    !f->slowed)
				slow = f->slowed = true;
		}
	} else if (!strncmp(body, "SELECT DISTINCT version", 23)) {
		reply = f->version ? f->version : f->schema_inserts ? "1\n" : "";
	} else if (!strncmp(body, "INSERT INTO", 11)) {
		f->schema_inserts++;
	} else if (!strncmp(body, "SELECT count() FROM", 19)) {
		int t = table_of(body);

		if (t >= 0) {
			f->counts[t]++;
			reply = f->stored[t] ? "3\n" : "0\n";
		}
	}
	pthread_mutex_unlock(&f->mu);
	free(body);
	if (lose)
		return -1;
	if (slow)
		usleep(1500000);
	if (refused)
		reply = "Code: 252, e.displayText() = DB::Exception: Too many parts (300)\n";
	n = (size_t)snprintf(
	    ans, sizeof(ans),
	    "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: keep-alive\r\n\r\n%s",
	    refused ? "500 Internal Server Error" : "200 OK", strlen(reply), reply);
	return write(c, ans, n) == (ssize_t)n ? 0 : -1;
}

static void *serve_conn(void *arg)
{
	struct conn *c = arg;

	while (!serve_one(c->f, c->fd))
		;
	close(c->fd);
	return NULL;
}

static void *serve(void *arg)
{
	struct fake *f = arg;
	int c;

	while ((c = accept(f->fd, NULL, NULL)) >= 0) {
		struct conn *k = &f->conns[f->nconns];

		if (f->nconns == 64) {
			close(c);
			continue;
		}
		*k = (struct conn){f, c};
		if (!pthread_create(&k->th, NULL, serve_conn, k))
			f->nconns++;
	}
	return NULL;
}

static void fake_start(struct fake *f)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	pthread_mutex_init(&f->mu, NULL);
	f->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->fd >= 0);
	assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->fd, 8), 0);
	getsockname(f->fd, (struct sockaddr *)&a, &al);
	f->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&f->th, NULL, serve, f), 0);
}

static void fake_stop(struct fake *f)
{
	shutdown(f->fd, SHUT_RDWR);
	close(f->fd);
	pthread_join(f->th, NULL);
	for (int i = 0; i < f->nconns; i++) /* the writer closed them */
		pthread_join(f->conns[i].th, NULL);
	pthread_mutex_destroy(&f->mu);
}

/* --- requests -------------------------------------------------------------------- */

static const char *frames[] = {"svc", "GET /"};
static const struct cp_segment segs[] = {
    {.start_ns = 10,
     .end_ns = 20,
     .category = CP_CAT_CPU,
     .frames = frames,
     .nframes = 2,
     .cpu = 0,
     .pid = 1,
     .tid = 1},
    {.start_ns = 20,
     .end_ns = 30,
     .category = CP_CAT_LOCK,
     .frames = frames,
     .nframes = 2,
     .interference = true,
     .cpu = -1,
     .pid = 1,
     .tid = 1},
};
static const struct cp_call calls[] = {
    {.local_addr = "a:1",
     .remote_addr = "b:2",
     .tx_seq = 9,
     .frames = frames,
     .nframes = 2,
     .category = CP_CAT_NETWORK,
     .seg = 0},
};
static const struct cp_request_wire wire = {.calls = calls, .ncalls = 1};

static struct cp_request request(int64_t day)
{
	return (struct cp_request){.id = "1:1:1",
				   .service = "svc",
				   .name = "GET /",
				   .host = "h",
				   .start_ns = 10,
				   .end_ns = 30,
				   .segs = segs,
				   .nsegs = 2,
				   .realtime_offset_ns = day * DAY_NS + 1000,
				   .wire = &wire};
}

static void test_lost_answer_not_resent(void **state)
{
	struct fake f = {.lose_first = "segments"};
	struct ch_writer_stats st;
	struct ch_writer *w;
	char url[64], err[512] = "";

	fake_start(&f);
	snprintf(url, sizeof(url), "clickhouse://127.0.0.1:%d/db", f.port);
	w = ch_writer__new(&(struct ch_writer_opts){.url = url, .timeout_ns = 2000000000ull}, err,
			   sizeof(err));
	assert_non_null(w);
	assert_int_equal(ch_writer__setup(w, err, sizeof(err)), 0);
	assert_int_equal(f.schema_inserts, 1); /* the version row, once */
	for (int i = 0; i < 3; i++) {
		struct cp_request r = request(20000);

		assert_int_equal(ch_writer__add(w, &r, NULL, "boot"), 0);
	}
	ch_writer__close(w, now_ns() + 20000000000ull, &st);
	assert_int_equal(st.requests, 3);
	assert_int_equal(st.segments, 6);
	assert_int_equal(st.batches, 1);
	assert_int_equal(st.dropped + st.failed, 0);
	assert_int_equal(st.found_stored, 1);
	/* segments: sent once, its answer lost, then counted (found) and not
	 * sent again; no other table asked about */
	for (int t = 0; t < CH_TABLES; t++) {
		assert_int_equal(f.inserts[t], 1);
		assert_int_equal(f.counts[t], t == CH_SEGMENTS ? 1 : 0);
	}
	fake_stop(&f);
}

/* An answer slower than the timeout: the insert's outcome is unknown, and
 * it had landed */
static void test_slow_answer_not_resent(void **state)
{
	struct fake f = {.slow_first = "requests"};
	struct ch_writer_stats st;
	struct ch_writer *w;
	char url[64], err[512] = "";
	struct cp_request r = request(20000);

	fake_start(&f);
	snprintf(url, sizeof(url), "clickhouse://127.0.0.1:%d/db", f.port);
	w = ch_writer__new(&(struct ch_writer_opts){.url = url, .timeout_ns = 500000000ull}, err,
			   sizeof(err));
	assert_int_equal(ch_writer__setup(w, err, sizeof(err)), 0);
	assert_int_equal(ch_writer__add(w, &r, NULL, ""), 0);
	ch_writer__close(w, now_ns() + 20000000000ull, &st);
	assert_int_equal(st.requests, 1);
	assert_int_equal(st.found_stored, 1);
	assert_int_equal(f.inserts[CH_REQUESTS], 1);
	assert_int_equal(f.counts[CH_REQUESTS], 1);
	assert_true(st.tries_failed >= 1);
	assert_non_null(strstr(st.last_error, "timed out")); /* curl: "Operation timed out ..." */
	fake_stop(&f);
}

/* Refused five times: given up, counted failed, the server's reason kept;
 * the other tables of the batch are stored once each */
static void test_refused(void **state)
{
	struct fake f = {.refuse = "blame"};
	struct ch_writer_stats st;
	struct ch_writer *w;
	char url[64], err[512] = "";
	struct cp_request r = request(20000);

	fake_start(&f);
	snprintf(url, sizeof(url), "clickhouse://127.0.0.1:%d/db", f.port);
	w = ch_writer__new(&(struct ch_writer_opts){.url = url}, err, sizeof(err));
	assert_int_equal(ch_writer__setup(w, err, sizeof(err)), 0);
	assert_int_equal(ch_writer__add(w, &r, NULL, ""), 0);
	ch_writer__close(w, now_ns() + 30000000000ull, &st);
	assert_int_equal(st.requests, 0);
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.failed_segments, 2);
	assert_non_null(strstr(st.last_error, "HTTP 500: Code: 252"));
	assert_int_equal(f.inserts[CH_BLAME], 5);
	assert_int_equal(f.inserts[CH_REQUESTS], 1);
	assert_int_equal(f.inserts[CH_SEGMENTS], 1);
	fake_stop(&f);
}

static void test_batch_per_day(void **state)
{
	struct fake f = {0};
	struct ch_writer_stats st;
	struct ch_writer *w;
	char url[64], err[512] = "";
	struct cp_request a = request(20000), b = request(20001);

	fake_start(&f);
	snprintf(url, sizeof(url), "clickhouse://127.0.0.1:%d/db", f.port);
	w = ch_writer__new(&(struct ch_writer_opts){.url = url}, err, sizeof(err));
	assert_int_equal(ch_writer__setup(w, err, sizeof(err)), 0);
	assert_int_equal(ch_writer__add(w, &a, NULL, ""), 0);
	assert_int_equal(ch_writer__add(w, &b, NULL, ""), 0);
	assert_int_equal(ch_writer__add(w, &b, NULL, ""), 0);
	ch_writer__close(w, now_ns() + 20000000000ull, &st);
	assert_int_equal(st.requests, 3);
	assert_int_equal(st.batches, 2);
	assert_int_equal(f.inserts[CH_REQUESTS], 2);
	fake_stop(&f);
}

static void test_down_bounded(void **state)
{
	struct ch_writer_stats st, mid;
	struct ch_writer *w;
	char url[64], err[512] = "";
	uint64_t added = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	/* a port nothing listens on */
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	getsockname(fd, (struct sockaddr *)&a, &al);
	port = ntohs(a.sin_port);
	close(fd);
	snprintf(url, sizeof(url), "clickhouse://127.0.0.1:%d/db", port);
	w = ch_writer__new(
	    &(struct ch_writer_opts){.url = url, .buffer_bytes = 64 << 10, .batch_bytes = 8 << 10},
	    err, sizeof(err));
	assert_non_null(w);
	assert_int_equal(ch_writer__setup(w, err, sizeof(err)), -ECONNREFUSED);
	assert_non_null(strstr(err, url + 13));
	for (int i = 0; i < 2000; i++) {
		struct cp_request r = request(20000);

		assert_int_equal(ch_writer__add(w, &r, NULL, ""), 0);
		added++;
	}
	ch_writer__stats(w, &mid);
	assert_true(mid.buffered <= 64 << 10);
	assert_true(mid.dropped > 0);
	assert_true(mid.failing);
	assert_non_null(strstr(mid.last_error, "127.0.0.1"));
	ch_writer__close(w, now_ns() + 300000000ull, &st);
	assert_int_equal(st.requests, 0);
	assert_int_equal(st.dropped + st.failed, added);
	assert_int_equal(st.dropped_segments + st.failed_segments, 2 * added);
}

static void test_other_version(void **state)
{
	struct fake f = {.version = "1\n7\n"};
	struct ch_writer_stats st;
	struct ch_writer *w;
	char url[64], err[512] = "";
	struct cp_request r = request(20000);

	fake_start(&f);
	snprintf(url, sizeof(url), "clickhouse://127.0.0.1:%d/db", f.port);
	w = ch_writer__new(&(struct ch_writer_opts){.url = url}, err, sizeof(err));
	assert_int_equal(ch_writer__setup(w, err, sizeof(err)), -EPROTONOSUPPORT);
	assert_non_null(strstr(err, "version 7"));
	assert_int_equal(ch_writer__add(w, &r, NULL, ""), -EPIPE);
	assert_int_equal(ch_writer__add(w, &r, NULL, ""), -EPIPE);
	ch_writer__close(w, now_ns() + 1000000000ull, &st);
	assert_int_equal(st.failed, 2);
	assert_int_equal(st.requests, 0);
	for (int t = 0; t < CH_TABLES; t++)
		assert_int_equal(f.inserts[t], 0);
	fake_stop(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lost_answer_not_resent),
	    cmocka_unit_test(test_slow_answer_not_resent),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_batch_per_day),
	    cmocka_unit_test(test_down_bounded),
	    cmocka_unit_test(test_other_version),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
