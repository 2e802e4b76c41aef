// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * bench_kpath: the kernel-path analysis core (user/kpath/) on a synthetic
 * record stream shaped like a thread-pool HTTP server: per request a data
 * arrival, the reader's wakeup, a read with payload, a hand-off to a worker
 * through a futex, a lock wait on a background holder every 8th request,
 * a preemption with a run-queue culprit every 4th, the response write and
 * the switch-out (~16 records). Records are generated in rounds outside the
 * timed section and fed to kp__add_record(); requests go to the engine as
 * `report` does (the engine keeps no whole requests, as for text output).
 *
 * Prints events/s against the 5M/s budget (DESIGN.md section 7) and the
 * peak RSS at 1x and 4x the stream length: the analysis keeps the open
 * window, not the stream, so the two should be close.
 *
 * Then the same stream written as a recording (user/recording.h) and read
 * back through kpath__analyze(), as `critpath report` does: events/s of the
 * whole path, reader (decompression, time-order merge) included, for
 * either codec (record --compress: lz4, the default, and zstd).
 *
 * Then the peak RSS at 1x and 4x again with a short-lived child process per
 * request (forked by the worker, exec'd, waking it and exiting): exited
 * threads and processes are state the analysis must recycle for memory to
 * follow the window.
 *
 *   bench_kpath [--requests N] [--no-engine]
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "kpath.h"
#include "kpath_internal.h"
#include "recording.h"

#define US 1000ull
#define ROUND 4096 /* requests per generated batch */
#define NCONN 64
#define PID 1000
#define HOLDER (PID + 100)
#define CHILD0 20000 /* pids of the children, one each (the kernel's pid_max is 4M) */

struct gen {
	uint8_t *buf;
	size_t len, cap;
	uint64_t nrec;
};

static void *rec_new(struct gen *g, uint16_t type, size_t size, uint64_t ts, uint32_t cpu,
		     uint32_t tid)
{
	struct cp_hdr *h;

	size = CP_ALIGN(size);
	if (g->len + size > g->cap) {
		g->cap = g->cap ? g->cap * 2 : 1 << 20;
		g->buf = realloc(g->buf, g->cap);
		if (!g->buf) {
			fprintf(stderr, "bench_kpath: out of memory\n");
			exit(1);
		}
	}
	h = (struct cp_hdr *)(g->buf + g->len);
	memset(h, 0, size);
	h->type = type;
	h->size = (uint16_t)size;
	h->ts = ts;
	h->cpu = cpu;
	h->pid = PID;
	h->tid = tid;
	g->len += size;
	g->nrec++;
	return h;
}

static void sw(struct gen *g, uint64_t ts, uint32_t cpu, uint32_t prev, uint8_t st, uint32_t next,
	       uint32_t npid)
{
	struct cp_ev_sched_switch *e = rec_new(g, CP_EV_SCHED_SWITCH, sizeof(*e), ts, cpu, prev);

	e->prev_pid = prev ? PID : 0;
	e->prev_tid = prev;
	e->prev_state = st;
	e->prev_state_raw = st == CP_PREV_BLOCKED;
	e->next_pid = npid;
	e->next_tid = next;
	memcpy(e->next_comm, "worker", 7);
}

static void wake(struct gen *g, uint64_t ts, uint32_t cpu, uint32_t wakee, uint32_t waker)
{
	struct cp_ev_sched_waking *e = rec_new(g, CP_EV_SCHED_WAKING, sizeof(*e), ts, cpu, waker);

	e->wakee_pid = PID;
	e->wakee_tid = wakee;
	e->waker_pid = waker ? PID : 0;
	e->waker_tid = waker;
	e->waker_ctx = waker ? CP_CTX_TASK : CP_CTX_SOFTIRQ;
	e->softirq_vec = waker ? CP_SOFTIRQ_NONE : CP_SOFTIRQ_NET_RX;
}

static void tuple(uint32_t c, uint16_t *lport, uint16_t *rport, uint8_t *laddr, uint8_t *raddr)
{
	*lport = 8080;
	*rport = (uint16_t)(40000 + c);
	inet_pton(AF_INET, "127.0.0.1", laddr);
	inet_pton(AF_INET, "127.0.0.1", raddr);
}

static void sock(struct gen *g, uint64_t enter, uint64_t ts, uint32_t tid, uint8_t call, uint32_t c,
		 uint32_t seq, const char *payload)
{
	size_t plen = strlen(payload);
	struct cp_ev_sock *e =
	    rec_new(g, CP_EV_SOCK, offsetof(struct cp_ev_sock, payload) + plen, ts, 0, tid);

	e->enter_ts = enter;
	e->bytes = (int64_t)plen;
	e->fd = (int32_t)(10 + c);
	e->phase = CP_PHASE_EXIT;
	e->call = call;
	e->family = AF_INET;
	e->sock_type = SOCK_STREAM;
	e->tcp_seq = seq;
	tuple(c, &e->lport, &e->rport, e->laddr, e->raddr);
	e->payload_len = (uint16_t)plen;
	memcpy(e->payload, payload, plen);
}

static void dready(struct gen *g, uint64_t ts, uint32_t c, uint32_t rcv)
{
	struct cp_ev_sk_data_ready *e = rec_new(g, CP_EV_SK_DATA_READY, sizeof(*e), ts, 0, 0);

	e->family = AF_INET;
	e->rcv_nxt = rcv;
	tuple(c, &e->lport, &e->rport, e->laddr, e->raddr);
}

static void futex(struct gen *g, uint64_t enter, uint64_t ts, uint32_t tid)
{
	struct cp_ev_futex *e = rec_new(g, CP_EV_FUTEX, sizeof(*e), ts, 0, tid);

	e->enter_ts = enter;
	e->uaddr = 0x7f0000001000ull;
	e->op = 128;
	e->phase = CP_PHASE_EXIT;
}

static bool forking; /* a child process per request */

/* Worker w forks child c, waits for it (c runs on w's CPU, is exec'd, wakes
 * w and exits): a CGI-style handler. */
static void child(struct gen *g, uint64_t t, uint32_t w, uint32_t c)
{
	static const char exe[] = "/usr/lib/cgi-bin/handler";
	struct cp_ev_process_fork *f = rec_new(g, CP_EV_PROCESS_FORK, sizeof(*f), t, 1, w);
	struct cp_ev_wakeup_new *n;
	struct cp_ev_sched_switch *s;
	struct cp_ev_process_exec *x;
	struct cp_ev_sched_waking *k;
	struct cp_ev_process_exit *e;

	f->parent_pid = PID;
	f->parent_tid = w;
	f->child_pid = f->child_tid = c;
	memcpy(f->child_comm, "worker", 7);
	n = rec_new(g, CP_EV_WAKEUP_NEW, sizeof(*n), t, 1, w);
	n->pid = n->tid = c;
	sw(g, t + 1 * US, 1, w, CP_PREV_BLOCKED, c, c);
	x = rec_new(g, CP_EV_PROCESS_EXEC,
		    offsetof(struct cp_ev_process_exec, filename) + sizeof(exe), t + 2 * US, 1, c);
	x->h.pid = c;
	x->old_tid = c;
	x->filename_len = sizeof(exe) - 1;
	memcpy(x->filename, exe, sizeof(exe));
	k = rec_new(g, CP_EV_SCHED_WAKING, sizeof(*k), t + 4 * US, 1, c);
	k->h.pid = k->waker_pid = k->waker_tid = c;
	k->wakee_pid = PID;
	k->wakee_tid = w;
	k->waker_ctx = CP_CTX_TASK;
	e = rec_new(g, CP_EV_PROCESS_EXIT, sizeof(*e), t + 5 * US, 1, c);
	e->h.pid = c;
	e->group_dead = 1;
	s = rec_new(g, CP_EV_SCHED_SWITCH, sizeof(*s), t + 6 * US, 1, c);
	s->h.pid = s->prev_pid = s->prev_tid = c;
	s->prev_state = CP_PREV_DEAD;
	s->next_pid = PID;
	s->next_tid = w;
	memcpy(s->next_comm, "worker", 7);
}

/* One request on conn c: reader r (cpu 0) hands off to worker w (cpu 1). */
static void request(struct gen *g, uint64_t t, uint64_t i, uint32_t *seq)
{
	uint32_t c = (uint32_t)(i % NCONN), r = PID + 1 + c % 4, w = PID + 10 + c % 4;
	char req[64];

	snprintf(req, sizeof(req), "GET /item/%llu HTTP/1.1\r\nHost: b\r\n\r\n",
		 (unsigned long long)(i % 1000));
	dready(g, t, c, seq[c] + (uint32_t)strlen(req));
	wake(g, t + 1 * US, 0, r, 0);
	sw(g, t + 2 * US, 0, 0, CP_PREV_PREEMPTED, r, PID);
	sock(g, t - 5 * US, t + 3 * US, r, CP_SOCK_READ, c, seq[c], req);
	seq[c] += (uint32_t)strlen(req);
	wake(g, t + 5 * US, 0, w, r);
	sw(g, t + 6 * US, 0, r, CP_PREV_BLOCKED, 0, 0);
	sw(g, t + 7 * US, 1, 0, CP_PREV_PREEMPTED, w, PID);
	futex(g, t - 20 * US, t + 8 * US, w);
	if (i % 8 == 0) {
		/* the worker waits for the lock the holder has held since before */
		sw(g, t + 10 * US, 1, w, CP_PREV_BLOCKED, 0, 0);
		wake(g, t + 30 * US, 1, HOLDER, 0);
		sw(g, t + 30 * US, 0, 0, CP_PREV_PREEMPTED, HOLDER, PID);
		wake(g, t + 40 * US, 0, w, HOLDER);
		sw(g, t + 41 * US, 0, HOLDER, CP_PREV_BLOCKED, 0, 0);
		sw(g, t + 41 * US, 1, 0, CP_PREV_PREEMPTED, w, PID);
		futex(g, t + 10 * US, t + 42 * US, w);
	}
	if (forking)
		child(g, t + 43 * US, w, CHILD0 + (uint32_t)i);
	if (i % 4 == 0) {
		struct cp_ev_runq_culprit *q;

		sw(g, t + 50 * US, 1, w, CP_PREV_PREEMPTED, 77, 77);
		sw(g, t + 60 * US, 1, 77, CP_PREV_PREEMPTED, w, PID);
		q = rec_new(g, CP_EV_RUNQ_CULPRIT, sizeof(*q), t + 60 * US, 1, w);
		q->culprit_pid = q->culprit_tid = 77;
		q->ns = 10 * US;
		q->runnable_since = t + 50 * US;
		memcpy(q->culprit_comm, "hog", 4);
	}
	sock(g, t + 70 * US, t + 72 * US, w, CP_SOCK_WRITE, c, 0,
	     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
	sw(g, t + 73 * US, 1, w, CP_PREV_BLOCKED, 0, 0);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of the whole process, every thread's (the reader's helper too) */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t nreq_seen;

static int count_only(void *arg, const struct cp_request *r)
{
	nreq_seen++;
	return 0;
}

static int to_engine(void *arg, const struct cp_request *r)
{
	nreq_seen++;
	engine__add_request(arg, r);
	return 0;
}

/* Runs the stream of n requests; prints one line; returns events/s. */
static double run(uint64_t n, bool with_engine, double *secs, uint64_t *events)
{
	static const char *const models[] = {"bench cpu", "bench cpu"};
	struct engine *e = with_engine ? engine__new(&(struct engine_opts){0}) : NULL;
	struct gen g = {0};
	uint32_t seq[NCONN] = {0};
	struct kp kp;
	double spent = 0;
	uint64_t t = 1000000000ull, recs = 0;
	int src;

	kp__init(&kp, with_engine ? to_engine : count_only, e);
	src = kp__add_source(&kp, "boot", 0, "bench", NULL, 2, models);
	{
		struct cp_md_process *m = rec_new(&g, CP_MD_PROCESS, sizeof(*m), 0, 0, PID);

		memcpy(m->comm, "benchsrv", 9);
		kp__add_record(&kp, (uint32_t)src, (struct cp_hdr *)g.buf);
		g.len = 0;
	}
	for (uint64_t done = 0; done < n;) {
		uint64_t k = n - done < ROUND ? n - done : ROUND;
		double t0;

		g.len = 0;
		g.nrec = 0;
		for (uint64_t i = 0; i < k; i++, t += 100 * US)
			request(&g, t, done + i, seq);
		t0 = now_s();
		for (size_t off = 0; off < g.len;) {
			const struct cp_hdr *h = (const struct cp_hdr *)(g.buf + off);

			if (kp__add_record(&kp, (uint32_t)src, h)) {
				fprintf(stderr, "bench_kpath: kp__add_record failed\n");
				exit(1);
			}
			off += h->size;
		}
		spent += now_s() - t0;
		recs += g.nrec;
		done += k;
	}
	{
		double t0 = now_s();

		kp__finish(&kp);
		spent += now_s() - t0;
	}
	kp__free(&kp);
	if (e)
		engine__free(e);
	free(g.buf);
	*secs = spent;
	*events = recs;
	return (double)recs / spent;
}

/* A child per size, so each peak RSS is its own. */
static void measure(uint64_t n, bool with_engine, double *rate, long *rss_kb)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds)) {
		perror("bench_kpath: pipe");
		exit(1);
	}
	pid = fork();
	if (pid == 0) {
		struct rusage ru;
		double secs, r;
		uint64_t ev;
		char line[128];

		close(fds[0]);
		nreq_seen = 0;
		r = run(n, with_engine, &secs, &ev);
		getrusage(RUSAGE_SELF, &ru);
		snprintf(line, sizeof(line), "%f %ld %llu %llu %f\n", r, ru.ru_maxrss,
			 (unsigned long long)ev, (unsigned long long)nreq_seen, secs);
		if (write(fds[1], line, strlen(line)) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	{
		char line[128] = "";
		unsigned long long ev = 0, nr = 0;
		double secs = 0;
		ssize_t got = read(fds[0], line, sizeof(line) - 1);

		close(fds[0]);
		waitpid(pid, NULL, 0);
		if (got <= 0 ||
		    sscanf(line, "%lf %ld %llu %llu %lf", rate, rss_kb, &ev, &nr, &secs) != 5) {
			fprintf(stderr, "bench_kpath: the measuring child failed\n");
			exit(1);
		}
		printf("  %8llu requests %10llu events  %6.3f s  %6.2f M events/s  %7.0f requests/s"
		       "  peak RSS %6ld KiB%s\n",
		       (unsigned long long)n, ev, secs, *rate / 1e6, (double)nr / secs, *rss_kb,
		       nr == n ? "" : "  (requests missing!)");
	}
}

/* The stream as a recording file; returns the events written. */
static uint64_t write_recording(const char *path, uint64_t n, uint32_t codec)
{
	static const struct recording_cpu cpus[2] = {{0, "bench cpu", 0, 1024},
						     {1, "bench cpu", 0, 1024}};
	struct recording_info info = {.codec = codec,
				      .agent_version = "bench",
				      .cmdline = "bench_kpath",
				      .host = "bench",
				      .kernel = "bench",
				      .boot_id = "bench",
				      .start_ns = 1,
				      .payload_bytes = 128,
				      .ncpus = 2,
				      .cpus = cpus};
	struct recording_totals tot = {0};
	struct recording_writer *w = NULL;
	uint32_t seq[NCONN] = {0};
	struct gen g = {0};
	uint64_t t = 1000000000ull;
	struct cp_md_process *m;

	if (recording_writer__open(&w, path, &info)) {
		fprintf(stderr, "bench_kpath: cannot write %s\n", path);
		exit(1);
	}
	m = rec_new(&g, CP_MD_PROCESS, sizeof(*m), 0, 0, PID);
	memcpy(m->comm, "benchsrv", 9);
	for (uint64_t done = 0; done < n;) {
		uint64_t k = n - done < ROUND ? n - done : ROUND;

		for (uint64_t i = 0; i < k; i++, t += 100 * US)
			request(&g, t, done + i, seq);
		for (size_t off = 0; off < g.len;) {
			const struct cp_hdr *h = (const struct cp_hdr *)(g.buf + off);

			if (recording_writer__append(w, h)) {
				fprintf(stderr, "bench_kpath: writing %s failed\n", path);
				exit(1);
			}
			off += h->size;
		}
		tot.events += g.nrec;
		g.len = 0;
		g.nrec = 0;
		done += k;
	}
	tot.end_ns = t;
	if (recording_writer__close(w, &tot)) {
		fprintf(stderr, "bench_kpath: closing %s failed\n", path);
		exit(1);
	}
	free(g.buf);
	return tot.events;
}

static void measure_file(uint64_t n, uint32_t codec)
{
	char path[] = "/tmp/bench_kpath-XXXXXX";
	int fd = mkstemp(path);
	const char *paths[] = {path};
	struct engine *e;
	uint64_t ev;
	double t0, c0, secs, cpu;

	if (fd < 0) {
		perror("bench_kpath: mkstemp");
		exit(1);
	}
	close(fd);
	ev = write_recording(path, n, codec);
	e = engine__new(&(struct engine_opts){0});
	engine__set_quiet(e, true);
	t0 = now_s();
	c0 = cpu_s();
	if (kpath__analyze(paths, 1, (struct cp_sink[]){engine__sink(e)},
			   &(struct kpath_opts){.quiet = true})) {
		fprintf(stderr, "bench_kpath: kpath__analyze failed\n");
		exit(1);
	}
	secs = now_s() - t0;
	cpu = cpu_s() - c0;
	printf("  recording file (%s): %8llu requests %10llu events  %6.3f s  %6.2f M events/s "
	       "(reader + analysis + engine), %llu requests aggregated\n",
	       recording_codec_name(codec), (unsigned long long)n, (unsigned long long)ev, secs,
	       (double)ev / secs / 1e6, (unsigned long long)engine__result(e)->nrequests);
	/* the budget is on one core: the CPU time of both threads counts */
	printf("  CPU time: %6.3f s (the reader's helper thread decompressing ahead included) = "
	       "%.2f M events/s of CPU\n",
	       cpu, (double)ev / cpu / 1e6);
	printf("  file events/s vs budget 5M/s: %.2fx wall-clock, %.2fx per CPU second\n",
	       (double)ev / secs / 5e6, (double)ev / cpu / 5e6);
	engine__free(e);
	unlink(path);
}

int main(int argc, char **argv)
{
	uint64_t n = 100000;
	bool with_engine = true;
	double r1, r4;
	long m1, m4;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--requests") && i + 1 < argc) {
			n = strtoull(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--no-engine")) {
			with_engine = false;
		} else {
			fprintf(stderr, "usage: bench_kpath [--requests N] [--no-engine]\n");
			return 2;
		}
	}
	printf("bench_kpath: kernel-path analysis of a synthetic thread-pool server stream%s\n",
	       with_engine ? " (with the engine)" : " (core only)");
	measure(n, with_engine, &r1, &m1);
	measure(4 * n, with_engine, &r4, &m4);
	printf("  events/s vs budget 5M/s: %.2fx   peak RSS 4x stream / 1x stream: %.2f\n",
	       r1 / 5e6, (double)m4 / (double)m1);
	/* before measure_file: a child's peak RSS starts at its parent's */
	printf("  with a short-lived child process per request:\n");
	forking = true;
	measure(n, with_engine, &r1, &m1);
	measure(4 * n, with_engine, &r4, &m4);
	printf("  peak RSS 4x stream / 1x stream: %.2f\n", (double)m4 / (double)m1);
	forking = false;
	measure_file(n, RECORDING_LZ4);
	measure_file(n, RECORDING_ZSTD);
	return 0;
}
