/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Shared by the recording tests: records of every type, and files of them.
 * Include after <cmocka.h>. */
#ifndef CRITPATH_RECORDING_TESTLIB_H
#define CRITPATH_RECORDING_TESTLIB_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "recording.h"

struct rt_recs {
	struct cp_hdr **r;
	size_t n, cap;
};

struct rt_file {
	char path[64];
	uint8_t *data; /* the file's bytes after rt_file__write */
	size_t len;
};

static inline void rt_recs__add(struct rt_recs *rs, struct cp_hdr *h)
{
	if (rs->n == rs->cap) {
		rs->cap = rs->cap ? rs->cap * 2 : 64;
		rs->r = realloc(rs->r, rs->cap * sizeof(*rs->r));
		assert_non_null(rs->r);
	}
	rs->r[rs->n++] = h;
}

/* A record of size bytes in an allocation of full bytes (the whole struct,
 * so a short variable tail still leaves every field addressable). */
static inline void *rt_rec_var(struct rt_recs *rs, uint16_t type, size_t size, size_t full,
			       uint64_t ts)
{
	struct cp_hdr *h = calloc(1, full > CP_ALIGN(size) ? full : CP_ALIGN(size));

	assert_non_null(h);
	h->type = type;
	h->size = (uint16_t)CP_ALIGN(size);
	h->cpu = (uint32_t)(ts % 2);
	h->pid = 100;
	h->tid = 100 + (uint32_t)(ts % 3);
	h->ts = ts;
	rt_recs__add(rs, h);
	return h;
}

static inline void *rt_rec(struct rt_recs *rs, uint16_t type, size_t size, uint64_t ts)
{
	return rt_rec_var(rs, type, size, size, ts);
}

static inline void rt_recs__free(struct rt_recs *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		free(rs->r[i]);
	free(rs->r);
	memset(rs, 0, sizeof(*rs));
}

/* nrep rounds of one record of every type (and one of an unknown type),
 * times rising from 1e9. */
static inline void rt_recs__every_type(struct rt_recs *rs, int nrep, unsigned int seed)
{
	uint64_t ts = 1000000000ull;

	srand(seed);
	for (int k = 0; k < nrep; k++) {
		struct cp_ev_sched_switch *sw = rt_rec(rs, CP_EV_SCHED_SWITCH, sizeof(*sw), ts++);
		sw->prev_pid = 100, sw->prev_tid = 101, sw->next_pid = 7, sw->next_tid = 8;
		sw->prev_state = k % 3;
		sw->prev_state_raw = 2;
		memcpy(sw->next_comm, "kworker/0:1-events", CP_COMM_LEN); /* no NUL */

		struct cp_ev_sched_waking *wk = rt_rec(rs, CP_EV_SCHED_WAKING, sizeof(*wk), ts++);
		wk->wakee_pid = 100, wk->wakee_tid = 102;
		wk->waker_ctx = k % 4;
		wk->softirq_vec = wk->waker_ctx == CP_CTX_SOFTIRQ ? CP_SOFTIRQ_NET_RX : 0xff;
		if (wk->waker_ctx == CP_CTX_TASK)
			wk->waker_pid = 100, wk->waker_tid = 101;
		wk->target_cpu = 1;

		struct cp_ev_wakeup_new *wn = rt_rec(rs, CP_EV_WAKEUP_NEW, sizeof(*wn), ts++);
		wn->pid = 100, wn->tid = 105, wn->target_cpu = 0;

		struct cp_ev_process_fork *fk = rt_rec(rs, CP_EV_PROCESS_FORK, sizeof(*fk), ts++);
		fk->parent_pid = 100, fk->parent_tid = 100, fk->child_pid = 200,
		fk->child_tid = 200;
		strcpy(fk->child_comm, "child");

		const char *fn = k % 2 ? "/usr/bin/true" : "/bin/sh \"quoted\"\n";
		size_t fl = strlen(fn);
		struct cp_ev_process_exec *ex = rt_rec_var(
		    rs, CP_EV_PROCESS_EXEC, offsetof(struct cp_ev_process_exec, filename) + fl + 1,
		    sizeof(*ex), ts++);
		ex->old_tid = 200;
		ex->filename_len = (uint16_t)fl;
		memcpy(ex->filename, fn, fl + 1);

		struct cp_ev_process_exit *xt = rt_rec(rs, CP_EV_PROCESS_EXIT, sizeof(*xt), ts++);
		xt->exit_code = k % 2 ? 0 : 256;
		xt->group_dead = 1;

		struct cp_ev_futex *fx = rt_rec(rs, CP_EV_FUTEX, sizeof(*fx), ts + 5);
		fx->enter_ts = ts;
		ts += 6;
		fx->uaddr = 0x7ffd12345678ull;
		fx->ret = k % 2 ? 0 : -11;
		fx->op = 128;
		fx->val = 1;
		fx->phase = CP_PHASE_EXIT;
		fx->call = CP_FUTEX_CALL_FUTEX;

		size_t pl = (size_t)(k % 5) * 13;
		struct cp_ev_sock *sk = rt_rec_var(
		    rs, CP_EV_SOCK, offsetof(struct cp_ev_sock, payload) + pl, sizeof(*sk), ts + 3);
		sk->enter_ts = ts;
		ts += 4;
		sk->bytes = (int64_t)pl;
		sk->fd = 5;
		sk->phase = CP_PHASE_EXIT;
		sk->call = CP_SOCK_RECVFROM;
		sk->family = 2;
		sk->lport = 8080, sk->rport = 40000;
		sk->tcp_seq = 123456789;
		sk->laddr[0] = 127, sk->laddr[3] = 1;
		sk->raddr[0] = 10, sk->raddr[3] = 2;
		sk->sock_type = 1;
		sk->payload_len = (uint16_t)pl;
		for (size_t i = 0; i < pl; i++)
			sk->payload[i] = (uint8_t)("GET / HTTP/1.1\r\n\x01\x7f\xff"[i % 19]);

		struct cp_ev_sk_data_ready *dr = rt_rec(rs, CP_EV_SK_DATA_READY, sizeof(*dr), ts++);
		dr->family = 10, dr->lport = 11211, dr->rport = 5555;
		dr->laddr[15] = 1, dr->raddr[15] = 1;
		dr->rcv_nxt = 42;

		struct cp_ev_poll *po = rt_rec(rs, CP_EV_POLL, sizeof(*po), ts + 2);
		po->enter_ts = ts;
		ts += 3;
		po->ret = 1;
		po->phase = CP_PHASE_EXIT;
		po->call = CP_POLL_EPOLL_WAIT;

		struct cp_ev_block *bl = rt_rec(rs, CP_EV_BLOCK, sizeof(*bl), ts++);
		bl->sector = 4096, bl->dev = 0x800010, bl->bytes = 4096;
		bl->phase = k % 2;

		struct cp_ev_runq_culprit *rq = rt_rec(rs, CP_EV_RUNQ_CULPRIT, sizeof(*rq), ts++);
		rq->culprit_pid = 300, rq->culprit_tid = 301, rq->ns = 12345;
		rq->runnable_since = ts - 20000;
		strcpy(rq->culprit_comm, "hog");

		struct cp_ev_uprobe *up = rt_rec(rs, CP_EV_UPROBE, sizeof(*up), ts++);
		up->probe_id = 0, up->phase = k % 2;

		const char exe[] = "/usr/sbin/server";
		const char cmd[] = "server\0--port\0008080";
		struct cp_md_process *pr =
		    rt_rec(rs, CP_MD_PROCESS, sizeof(*pr) + sizeof(exe) - 1 + sizeof(cmd), ts++);
		pr->ppid = 1;
		pr->exe_len = sizeof(exe) - 1;
		pr->cmdline_len = sizeof(cmd);
		strcpy(pr->comm, "server");
		memcpy(pr->data, exe, sizeof(exe) - 1);
		memcpy(pr->data + sizeof(exe) - 1, cmd, sizeof(cmd));

		struct cp_md_thread *th = rt_rec(rs, CP_MD_THREAD, sizeof(*th), ts++);
		strcpy(th->comm, "worker-1");

		struct cp_md_socket *so = rt_rec(rs, CP_MD_SOCKET, sizeof(*so), ts++);
		so->fd = 3, so->family = 2, so->lport = 8080, so->sock_type = 1, so->listening = 1;

		struct cp_md_loss *lo = rt_rec(rs, CP_MD_LOSS, sizeof(*lo), ts++);
		lo->start_ns = ts - 100, lo->end_ns = ts - 50, lo->events = 3;

		struct cp_md_hook *hk = rt_rec(rs, CP_MD_HOOK, sizeof(*hk), ts++);
		hk->status = CP_HOOK_FALLBACK;
		strcpy(hk->name, "sched_switch");
		strcpy(hk->detail, "tp_btf failed, classic tracepoint used");

		struct cp_md_probe *pb = rt_rec(rs, CP_MD_PROBE, sizeof(*pb), ts++);
		strcpy(pb->binary, "/usr/sbin/server");
		strcpy(pb->symbol, "handle_request");

		struct cp_hdr *un = rt_rec(rs, 0x777, 40, ts++);
		memset(un + 1, 0xab, 16);
	}
}

/* n poll records, file position in ret, times rising 1 µs per record with
 * up to jitter_ns of noise, rounded to 5 µs so many tie, and now and then one
 * that is 20 ms late (older than records two frames back). */
static inline void rt_recs__jittered(struct rt_recs *rs, size_t n, uint64_t jitter_ns,
				     unsigned int seed)
{
	srand(seed);
	for (size_t i = 0; i < n; i++) {
		uint64_t ts = 1000000000ull + i * 1000 + (uint64_t)rand() % jitter_ns;

		ts -= ts % 5000;
		if (i % 25000 == 24999)
			ts -= 20000000;
		struct cp_ev_poll *p = rt_rec(rs, CP_EV_POLL, sizeof(*p), ts);
		p->ret = (int64_t)i;
		p->enter_ts = ts - 10;
		p->phase = CP_PHASE_EXIT;
	}
}

/* How rt_info's files are compressed: a test group sets it to run its tests
 * on both codecs. */
static uint32_t rt_codec = RECORDING_ZSTD;

static inline int rt_codec_zstd(void **state)
{
	rt_codec = RECORDING_ZSTD;
	return 0;
}

static inline int rt_codec_lz4(void **state)
{
	rt_codec = RECORDING_LZ4;
	return 0;
}

/* Runs the group of tests (an array) once on files of each codec; nonzero
 * when a test failed. */
#define rt_run_codecs(tests)                                                                       \
	(cmocka_run_group_tests_name("zstd", tests, rt_codec_zstd, NULL) |                         \
	 cmocka_run_group_tests_name("lz4", tests, rt_codec_lz4, NULL))

static inline const struct recording_info *rt_info(void)
{
	static const struct recording_cpu cpus[2] = {
	    {.cpu = 0, .model = "Test CPU @ 2.00GHz", .mhz = 2000, .capacity = 1024},
	    {.cpu = 1, .model = "Test CPU @ 2.00GHz", .mhz = 2000, .capacity = 1024},
	};
	static struct recording_info info = {
	    .agent_version = "0.1.0-test",
	    .cmdline = "critpath record -p 1",
	    .host = "testhost",
	    .kernel = "6.18.0-test",
	    .boot_id = "0123456789abcdef",
	    .sku = NULL,
	    .realtime_offset_ns = -12345,
	    .start_ns = 999999999,
	    .payload_bytes = 128,
	    .ncpus = 2,
	    .cpus = cpus,
	};
	info.codec = rt_codec;
	return &info;
}

static inline void rt_file__path(struct rt_file *f)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "/tmp/critpath-test-XXXXXX");
	int fd = mkstemp(f->path);
	assert_true(fd >= 0);
	close(fd);
}

static inline void rt_file__load(struct rt_file *f)
{
	FILE *fp = fopen(f->path, "rb");
	struct stat st;

	assert_non_null(fp);
	assert_int_equal(fstat(fileno(fp), &st), 0);
	free(f->data);
	f->len = (size_t)st.st_size;
	f->data = malloc(f->len + 1);
	assert_non_null(f->data);
	assert_int_equal(fread(f->data, 1, f->len, fp), f->len);
	fclose(fp);
}

/* Writes recs to f->path; flush_every > 0 cuts a frame every that many records. */
static inline void rt_file__write_to(struct rt_file *f, const struct rt_recs *rs,
				     size_t flush_every)
{
	struct recording_writer *w;
	struct recording_totals t = {.end_ns = 5000000000ull, .events = 77, .metadata = 6};

	assert_int_equal(recording_writer__open(&w, f->path, rt_info()), 0);
	for (size_t i = 0; i < rs->n; i++) {
		assert_int_equal(recording_writer__append(w, rs->r[i]), 0);
		if (flush_every && (i + 1) % flush_every == 0)
			assert_int_equal(recording_writer__flush(w), 0);
	}
	assert_int_equal(recording_writer__close(w, &t), 0);
	rt_file__load(f);
}

static inline void rt_file__write(struct rt_file *f, const struct rt_recs *rs, size_t flush_every)
{
	rt_file__path(f);
	rt_file__write_to(f, rs, flush_every);
}

static inline uint32_t rt_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* Writes f->data back to f->path, the file header's CRC made good (after
 * an edit of the header). */
static inline void rt_file__rewrite_header(struct rt_file *f)
{
	size_t end = 16 + rt_u32(f->data + 12);
	uint32_t crc = (uint32_t)crc32(0, f->data, (uInt)end);
	FILE *fp;

	memcpy(f->data + end, &crc, 4);
	fp = fopen(f->path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(f->data, 1, f->len, fp), f->len);
	fclose(fp);
}

static inline void rt_file__remove(struct rt_file *f)
{
	unlink(f->path);
	free(f->data);
	f->data = NULL;
}

#endif /* CRITPATH_RECORDING_TESTLIB_H */
