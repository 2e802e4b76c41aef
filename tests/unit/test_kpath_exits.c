// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Memory follows the open window, not the stream (DESIGN.md section 7), for
 * threads and processes too: a server forks a short-lived child for every
 * request (40,000, one a millisecond), which runs, wakes the server and
 * exits. Half the children are processes, half threads of the server; the
 * kernel gives their tids (and pids) out again within half a second, while
 * the exited one is still known. Every request's path runs through its own
 * child, named as that child was named (by metadata or by its exec), and
 * exited threads and processes are recycled once the window has passed
 * them, so the tables stay a small fraction of all there were. An exited
 * thread a walk can still reach (through a connection's last write) is not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "test_kpath_builder.h"

#define US 1000ull
#define MS 1000000ull
#define NCHILD 40000u
#define REUSE 251u /* distinct tids per kind of child: each comes back after ~0.5 s */
#define SRV 100u

static const char req_bytes[] = "GET /k HTTP/1.1\r\n\r\n";
static uint64_t nreq, nbad, t0;

/* child k: a process (even k) with pid = tid, or a thread of the server */
static uint32_t child_pid(uint32_t k)
{
	return k % 2 ? SRV : 1000 + (k / 2) % REUSE;
}

static uint32_t child_tid(uint32_t k)
{
	return k % 2 ? 5000 + (k / 2) % REUSE : child_pid(k);
}

/* what names child k's process (frame 3 of its segments), "" for a thread
 * of the serving process (no frame), and its thread (the segment's comm) */
static void child_names(uint32_t k, char *proc, char *thread)
{
	proc[0] = '\0';
	sprintf(thread, "c%u", k);
	if (k % 2 == 0 && (k / 2) % 2 == 0) {
		sprintf(proc, "m%u", k); /* metadata */
	} else if (k % 2 == 0) {
		sprintf(proc, "x%u", k); /* exec */
		sprintf(thread, "x%u", k);
	}
}

static bool seg_is(const struct cp_segment *s, uint64_t a, uint64_t b, enum cp_category cat,
		   uint32_t pid, uint32_t tid, const char *comm, const char *frame3)
{
	return s->start_ns == a && s->end_ns == b && s->category == cat && !s->interference &&
	       s->pid == (int32_t)pid && s->tid == (int32_t)tid && s->comm &&
	       !strcmp(s->comm, comm) &&
	       (frame3[0] ? s->nframes == 3 && !strcmp(s->frames[2], frame3) : s->nframes == 2);
}

/* DESIGN: the server runs until the fork, the child waits for a CPU, runs
 * until it wakes the server, and the server responds. */
static int check(void *arg, const struct cp_request *r)
{
	uint64_t t = r->start_ns - 20 * US;
	uint32_t k = (uint32_t)((t - t0) / MS);
	char proc[32], thread[32];

	nreq++;
	child_names(k, proc, thread);
	if (r->nsegs != 4 ||
	    !seg_is(&r->segs[0], t + 20 * US, t + 25 * US, CP_CAT_CPU, SRV, SRV, "srv", "") ||
	    !seg_is(&r->segs[1], t + 25 * US, t + 27 * US, CP_CAT_RUNQUEUE, child_pid(k),
		    child_tid(k), thread, proc) ||
	    !seg_is(&r->segs[2], t + 27 * US, t + 33 * US, CP_CAT_CPU, child_pid(k), child_tid(k),
		    thread, proc) ||
	    !seg_is(&r->segs[3], t + 33 * US, t + 60 * US, CP_CAT_CPU, SRV, SRV, "srv", "")) {
		if (nbad++ < 3)
			print_message("# request %u (child %u/%u): %u segments, wrong\n", k,
				      child_pid(k), child_tid(k), r->nsegs);
	}
	return 0;
}

/* Request k at t on the server's keep-alive connection (server thread 100 on
 * CPU 0, running throughout but for its wait for the child; children on
 * CPU 1). */
static void one_request(struct kb *b, uint64_t t, uint32_t k)
{
	const struct kb_tuple c = {"10.0.0.1", 80, "10.0.0.2", 4000};
	uint32_t len = (uint32_t)strlen(req_bytes), pid = child_pid(k), tid = child_tid(k);
	char comm[32], proc[32], thread[32], exe[48];

	child_names(k, proc, thread);
	kb_dready(b, t + 20 * US, 0, SRV, c, 1000 + (k + 1) * len);
	kb_sock(b, t + 10 * US, t + 21 * US, SRV, SRV, CP_SOCK_READ, 7, c, len, 1000 + k * len,
		req_bytes);
	sprintf(comm, "c%u", k);
	kb_fork(b, t + 25 * US, 0, SRV, SRV, pid, tid, comm);
	if (proc[0] == 'm') {
		kb_proc_at(b, t + 26 * US, pid, proc);
	} else if (proc[0] == 'x') {
		sprintf(exe, "/usr/bin/%s", proc);
		kb_exec(b, t + 26 * US, 1, pid, exe);
	}
	/* switched in by the name it has by then (an exec's) */
	kb_switch(b, t + 27 * US, 1, 0, 0, CP_PREV_PREEMPTED, pid, tid, thread);
	kb_switch(b, t + 28 * US, 0, SRV, SRV, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_wake(b, t + 33 * US, 1, SRV, SRV, pid, tid, CP_CTX_TASK, CP_SOFTIRQ_NONE);
	kb_switch(b, t + 33 * US, 0, 0, 0, CP_PREV_PREEMPTED, SRV, SRV, "srv");
	kb_exit(b, t + 34 * US, 1, pid, tid, pid != SRV);
	kb_switch(b, t + 35 * US, 1, pid, tid, CP_PREV_DEAD, 0, 0, NULL);
	kb_sock(b, t + 50 * US, t + 60 * US, SRV, SRV, CP_SOCK_WRITE, 7, c, 17, 5000 + k * 17,
		"HTTP/1.1 200 OK\r\n");
}

static void test_short_lived_children(void **state)
{
	static struct kb b;
	static const char *const models[] = {"m", "m"};
	struct kp kp;

	memset(&b, 0, sizeof(b));
	nreq = nbad = 0;
	t0 = 1000 * MS;
	kp__init(&kp, check, NULL);
	assert_int_equal(kp__add_source(&kp, "boot-1", 0, "h", NULL, 2, models), 0);
	kb_proc(&b, SRV, "srv");
	kb_switch(&b, t0 - MS, 0, 0, 0, CP_PREV_PREEMPTED, SRV, SRV, "srv");
	kb_feed(&kp, &b);
	for (uint32_t k = 0; k < NCHILD; k++) {
		one_request(&b, t0 + k * MS, k);
		kb_feed(&kp, &b);
	}
	assert_int_equal(kp__finish(&kp), 0);
	assert_int_equal(nreq, NCHILD);
	assert_int_equal(nbad, 0);
	print_message("# %u children: %u threads and %u processes in the tables at the end, "
		      "%llu and %llu recycled\n",
		      NCHILD, kp.nth - kp.nfreeth, kp.npr - kp.nfreepr,
		      (unsigned long long)kp.threads_recycled,
		      (unsigned long long)kp.procs_recycled);
	assert_true(kp.nth < NCHILD / 4);
	assert_true(kp.npr < NCHILD / 8);
	assert_true(kp.threads_recycled > NCHILD / 2);
	assert_true(kp.procs_recycled > NCHILD / 4);
	kp__free(&kp);
}

/* A backend (300) whose thread 301 answered the server (100) once on a
 * connection never seen closed, and exited (the process lives on: its exit
 * would have closed the connection): five seconds later a data arrival on
 * that connection wakes the server during a request, and the walk takes the
 * backend's last write there (pruning keeps each connection's last) as the
 * source. The backend's thread and process must still be the ones it names,
 * not recycled slots. */
static void test_gone_peer(void **state)
{
	static struct kb b;
	const struct kb_tuple d = {"10.0.0.1", 40000, "10.0.0.9", 6379};  /* the server's side */
	const struct kb_tuple d2 = {"10.0.0.9", 6379, "10.0.0.1", 40000}; /* the backend's */
	const struct kb_tuple u = {"10.0.0.1", 80, "10.0.0.2", 5000};
	const char *get = "get k\r\n", *val = "END\r\n", *req = "GET /r HTTP/1.1\r\n\r\n";
	const uint64_t t0 = 1000 * MS, t1 = t0 + 5000 * MS;
	const struct kb_req *r;

	memset(&b, 0, sizeof(b));
	kb_proc(&b, SRV, "srv");
	kb_proc(&b, 300, "backend");
	kb_switch(&b, t0 - MS, 0, 0, 0, CP_PREV_PREEMPTED, SRV, SRV, "srv");
	kb_switch(&b, t0 - 2 * MS, 1, 300, 300, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_switch(&b, t0 - MS, 1, 0, 0, CP_PREV_PREEMPTED, 300, 301, "backend");
	kb_sock(&b, t0, t0 + 1 * US, SRV, SRV, CP_SOCK_CONNECT, 8, d, 0, 0, NULL);
	kb_sock(&b, t0 + 2 * US, t0 + 3 * US, 300, 301, CP_SOCK_ACCEPT, 5, d2, 5, 0, NULL);
	kb_sock(&b, t0 + 10 * US, t0 + 11 * US, SRV, SRV, CP_SOCK_WRITE, 8, d, 7, 500, get);
	kb_dready(&b, t0 + 15 * US, 1, 300, d2, 507);
	kb_sock(&b, t0 + 14 * US, t0 + 20 * US, 300, 301, CP_SOCK_READ, 5, d2, 7, 500, get);
	kb_sock(&b, t0 + 25 * US, t0 + 30 * US, 300, 301, CP_SOCK_WRITE, 5, d2, 5, 900, val);
	kb_dready(&b, t0 + 35 * US, 0, SRV, d, 905);
	kb_sock(&b, t0 + 34 * US, t0 + 40 * US, SRV, SRV, CP_SOCK_READ, 8, d, 5, 900, val);
	kb_exit(&b, t0 + MS, 1, 300, 301, false);
	kb_switch(&b, t0 + MS + 1 * US, 1, 300, 301, CP_PREV_DEAD, 0, 0, NULL);
	/* the server sleeps and wakes meanwhile: the stream goes on, pruning runs */
	for (uint64_t t = t0 + 500 * MS; t < t1; t += 500 * MS) {
		kb_switch(&b, t, 0, SRV, SRV, CP_PREV_BLOCKED, 0, 0, NULL);
		kb_wake(&b, t + MS, 0, SRV, SRV, 0, 0, CP_CTX_SOFTIRQ, CP_SOFTIRQ_TIMER);
		kb_switch(&b, t + MS, 0, 0, 0, CP_PREV_PREEMPTED, SRV, SRV, "srv");
	}
	/* request: the server asks the backend again and waits on d */
	kb_dready(&b, t1, 0, SRV, u, 1000 + (uint32_t)strlen(req));
	kb_sock(&b, t1 - 10 * US, t1 + 5 * US, SRV, SRV, CP_SOCK_READ, 7, u, (int64_t)strlen(req),
		1000, req);
	kb_sock(&b, t1 + 10 * US, t1 + 11 * US, SRV, SRV, CP_SOCK_WRITE, 8, d, 7, 507, get);
	kb_switch(&b, t1 + 12 * US, 0, SRV, SRV, CP_PREV_BLOCKED, 0, 0, NULL);
	kb_dready(&b, t1 + 50 * US, 0, SRV, d, 910);
	kb_wake(&b, t1 + 50 * US, 0, SRV, SRV, 0, 0, CP_CTX_SOFTIRQ, CP_SOFTIRQ_NET_RX);
	kb_switch(&b, t1 + 50 * US, 0, 0, 0, CP_PREV_PREEMPTED, SRV, SRV, "srv");
	kb_sock(&b, t1 + 11 * US, t1 + 52 * US, SRV, SRV, CP_SOCK_READ, 8, d, 5, 905, val);
	kb_sock(&b, t1 + 60 * US, t1 + 70 * US, SRV, SRV, CP_SOCK_WRITE, 7, u, 17, 5000,
		"HTTP/1.1 200 OK\r\n");
	assert_int_equal(kb_run(&b), 0);
	r = kb_find(&b, "srv:80");
	assert_non_null(r);
	assert_int_equal(r->nsegs, 2);
	assert_int_equal(r->segs[0].start, t1);
	assert_int_equal(r->segs[0].end, t1 + 50 * US);
	assert_int_equal(r->segs[0].cat, CP_CAT_NETWORK);
	assert_string_equal(r->segs[0].peer, "10.0.0.9:6379");
	assert_string_equal(r->segs[0].frame3, "backend:6379 get");
	assert_int_equal(r->segs[1].cat, CP_CAT_CPU);
	assert_int_equal(r->segs[1].tid, SRV);
}

/* A forking server: child k (a pid from a small pool, so pids come back)
 * serves one connection and exits without closing it (the kernel closes
 * it in do_exit: no close record). Even children serve TCP (accepted,
 * fd 7), odd ones a Unix-domain socket open before the recording (fd 5,
 * known by pid and fd only). Each request is named after its own child,
 * not after an earlier child on the same pid and fd, and the connections
 * of exited children are recycled. */
#define NFORKED 20000u

static uint64_t nnamed;

static int check_forked(void *arg, const struct cp_request *r)
{
	uint32_t k = (uint32_t)((r->start_ns - t0) / MS);
	char want[32];

	nreq++;
	snprintf(want, sizeof(want), "w%u:", k);
	if (r->service && !strncmp(r->service, want, strlen(want)))
		nnamed++;
	else if (nbad++ < 3)
		print_message("# request %u: service %s, wanted %s...\n", k,
			      r->service ? r->service : "(none)", want);
	return 0;
}

static void forked_conn(struct kb *b, uint64_t t, uint32_t k)
{
	const struct kb_tuple c = {"10.0.0.1", 80, "10.0.0.2", (uint16_t)(1024 + k % 50000)};
	uint32_t pid = 1000 + k % REUSE, len = (uint32_t)strlen(req_bytes);
	char comm[32];

	sprintf(comm, "w%u", k);
	kb_fork(b, t, 0, SRV, SRV, pid, pid, comm);
	kb_switch(b, t + 1 * US, 1, 0, 0, CP_PREV_PREEMPTED, pid, pid, comm);
	if (k % 2 == 0) {
		kb_sock(b, t + 2 * US, t + 3 * US, pid, pid, CP_SOCK_ACCEPT, 7, c, 7, 0, NULL);
		kb_dready(b, t + 5 * US, 1, pid, c, 1000 + len);
		kb_sock(b, t + 4 * US, t + 6 * US, pid, pid, CP_SOCK_READ, 7, c, len, 1000,
			req_bytes);
		kb_sock(b, t + 10 * US, t + 11 * US, pid, pid, CP_SOCK_WRITE, 7, c, 17, 5000,
			"HTTP/1.1 200 OK\r\n");
	} else {
		kb_sock_unix(b, t + 4 * US, t + 6 * US, pid, pid, CP_SOCK_READ, 5, len, req_bytes);
		kb_sock_unix(b, t + 10 * US, t + 11 * US, pid, pid, CP_SOCK_WRITE, 5, 17,
			     "HTTP/1.1 200 OK\r\n");
	}
	kb_exit(b, t + 12 * US, 1, pid, pid, true);
	kb_switch(b, t + 13 * US, 1, pid, pid, CP_PREV_DEAD, 0, 0, NULL);
}

static void test_forked_servers(void **state)
{
	static struct kb b;
	static const char *const models[] = {"m", "m"};
	struct kp kp;

	memset(&b, 0, sizeof(b));
	nreq = nbad = nnamed = 0;
	t0 = 1000 * MS;
	kp__init(&kp, check_forked, NULL);
	assert_int_equal(kp__add_source(&kp, "boot-1", 0, "h", NULL, 2, models), 0);
	kb_proc(&b, SRV, "srv");
	kb_feed(&kp, &b);
	for (uint32_t k = 0; k < NFORKED; k++) {
		forked_conn(&b, t0 + k * MS, k);
		kb_feed(&kp, &b);
	}
	assert_int_equal(kp__finish(&kp), 0);
	print_message("# %u forked servers: %llu requests named after their own child; %u "
		      "connections in the table at the end, %llu recycled\n",
		      NFORKED, (unsigned long long)nnamed, kp.ncn - kp.nfreecn,
		      (unsigned long long)kp.conns_recycled);
	assert_int_equal(nreq, NFORKED);
	assert_int_equal(nbad, 0);
	assert_true(kp.ncn < NFORKED / 4);
	assert_true(kp.conns_recycled > NFORKED / 2);
	kp__free(&kp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_short_lived_children),
	    cmocka_unit_test(test_gone_peer),
	    cmocka_unit_test(test_forked_servers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
