/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Hand-built kernel record streams for the kpath tests (test_kpath*.c): a
 * few calls per event kind, records sorted by time before they are fed to
 * the core, and the requests it emits deep-copied for assertions.
 */
#ifndef TEST_KPATH_BUILDER_H
#define TEST_KPATH_BUILDER_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kpath_internal.h"

#define KB_MAX_RECS 512
#define KB_MAX_REQS 16
#define KB_MAX_SEGS 32

struct kb_rec {
	uint64_t ts;
	uint32_t order;
	uint32_t src; /* which recording (host) it comes from */
	union {
		struct cp_hdr h;
		struct cp_ev_sched_switch sw;
		struct cp_ev_sched_waking wk;
		struct cp_ev_wakeup_new wn;
		struct cp_ev_process_fork fk;
		struct cp_ev_process_exec ex;
		struct cp_ev_process_exit xt;
		struct cp_ev_futex fx;
		struct cp_ev_sock sk;
		struct cp_ev_tls_read tr;
		struct cp_ev_sk_data_ready dr;
		struct cp_ev_runq_culprit rq;
		struct cp_md_process mp;
		struct cp_md_socket ms;
		struct cp_md_loss ml;
		struct cp_ev_uprobe up;
		struct cp_md_probe mp2;
		/* a socket record with pieces past its prefix (kb_piece) */
		uint8_t raw[offsetof(struct cp_ev_sock, payload) + 2 * CP_PAYLOAD_MAX];
	} u;
};

struct kb_seg {
	uint64_t start, end;
	enum cp_category cat;
	int32_t pid, tid, cpu;
	bool interference;
	char comm[16]; /* the thread's name, "" for none */
	char peer[64];
	uint32_t nframes;
	char frame3[64];
	char stack[160]; /* every frame, joined by ";" */
	uint32_t ncul;
	int32_t cul_tid[4], cul_pid[4];
	uint64_t cul_ns[4];
};

/* a cp_call of a request's wire (kb.want) */
struct kb_call {
	char local[64], remote[64];
	uint32_t tx_seq, tx_len;
	uint64_t start, end;
	int32_t seg;
	enum cp_category cat;
	char stack[160];
	bool stitched, interference;
};

#define KB_MAX_CALLS 4

struct kb_req {
	char service[64], name[64], id[64];
	char tag[32]; /* the first tag ("http.status=200"), "" for none */
	uint64_t start, end;
	bool partial;
	uint32_t nsegs;
	struct kb_seg segs[KB_MAX_SEGS];
	/* its wire, when kb.want */
	bool wire;
	char server_addr[64], client_addr[64];
	uint32_t rx_seq, rx_len, tx_seq, tx_len;
	uint32_t ncalls;
	struct kb_call calls[KB_MAX_CALLS];
};

struct kb {
	struct kb_rec recs[KB_MAX_RECS];
	uint32_t n;
	struct kb_req reqs[KB_MAX_REQS];
	uint32_t nreqs;
	uint32_t cur_src;  /* source of the records built next */
	uint64_t inferred; /* kp's count of inferred switches, after kb_run */
	uint64_t unsent;   /* kp's requests whose last write left bytes unsent */
	uint64_t udp_unknown; /* kp's datagram reads whose sender was not known */
	uint64_t nagle;	   /* ... held whole and small (Nagle's algorithm) */
	/* kp's HTTP/2 counts: requests ended at a write that may have ended
	 * them, not named, never answered; reads with frames not seen */
	uint64_t h2_uncertain, h2_unnamed, h2_unanswered, h2_lost;
	uint64_t bio_wr_unsent;	       /* TLS writes on memory buffers no socket write carried */
	uint32_t piece_rec, piece_end; /* kb_piece's record, and its pieces' end */
	bool want;    /* kb_run: a sink that wants every request's wire (an agent's) */
	uint32_t only; /* kb_run: source only - 1 alone (its host's analysis), 0: all */
};

static inline struct cp_hdr *kb_new(struct kb *b, uint16_t type, uint16_t size, uint64_t ts,
				    uint32_t cpu, uint32_t pid, uint32_t tid)
{
	struct kb_rec *r = &b->recs[b->n];

	memset(r, 0, sizeof(*r));
	r->ts = ts;
	r->src = b->cur_src;
	r->order = b->n++;
	r->u.h.type = type;
	r->u.h.size = size;
	r->u.h.ts = ts;
	r->u.h.cpu = cpu;
	r->u.h.pid = pid;
	r->u.h.tid = tid;
	return &r->u.h;
}

/* A comm field (zeroed by kb_new) from a name, cut as the kernel cuts it:
 * built names too (strncpy would warn of the cut) */
static inline void kb_comm(char *dst, const char *name)
{
	memcpy(dst, name, strnlen(name, CP_COMM_LEN - 1));
}

/* process metadata as the recorder writes it when it learns of pid at ts */
static inline void kb_proc_at(struct kb *b, uint64_t ts, uint32_t pid, const char *comm)
{
	struct cp_md_process *m = (void *)kb_new(b, CP_MD_PROCESS, sizeof(*m), ts, 0, pid, pid);

	kb_comm(m->comm, comm);
}

static inline void kb_proc(struct kb *b, uint32_t pid, const char *comm)
{
	kb_proc_at(b, 0, pid, comm);
}

/* socket metadata as the recorder writes it for pid's socket on fd (family
 * AF_INET, 0.0.0.0): listening on lport, or connected to rport */
static inline void kb_md_socket(struct kb *b, uint64_t ts, uint32_t pid, int fd, uint16_t lport,
				uint16_t rport, bool listening)
{
	struct cp_md_socket *m = (void *)kb_new(b, CP_MD_SOCKET, sizeof(*m), ts, 0, pid, pid);

	m->fd = fd;
	m->family = AF_INET;
	m->sock_type = SOCK_STREAM;
	m->lport = lport;
	m->rport = rport;
	m->listening = listening;
}

/* prev (pid, tid) leaves cpu in state, next comes in (0 = idle) */
static inline struct cp_ev_sched_switch *kb_switch(struct kb *b, uint64_t ts, uint32_t cpu,
						   uint32_t ppid, uint32_t ptid, uint8_t state,
						   uint32_t npid, uint32_t ntid, const char *ncomm)
{
	struct cp_ev_sched_switch *e =
	    (void *)kb_new(b, CP_EV_SCHED_SWITCH, sizeof(*e), ts, cpu, ppid, ptid);

	e->prev_pid = ppid;
	e->prev_tid = ptid;
	e->next_pid = npid;
	e->next_tid = ntid;
	e->prev_state = state;
	e->prev_state_raw = state == CP_PREV_BLOCKED ? 1 : 0;
	kb_comm(e->next_comm, ncomm ? ncomm : "");
	return e;
}

static inline void kb_wake(struct kb *b, uint64_t ts, uint32_t cpu, uint32_t pid, uint32_t tid,
			   uint32_t waker_pid, uint32_t waker_tid, uint8_t ctx, uint8_t vec)
{
	struct cp_ev_sched_waking *e =
	    (void *)kb_new(b, CP_EV_SCHED_WAKING, sizeof(*e), ts, cpu, waker_pid, waker_tid);

	e->wakee_pid = pid;
	e->wakee_tid = tid;
	e->waker_pid = waker_pid;
	e->waker_tid = waker_tid;
	e->waker_ctx = ctx;
	e->softirq_vec = vec;
}

static inline void kb_fork(struct kb *b, uint64_t ts, uint32_t cpu, uint32_t ppid, uint32_t ptid,
			   uint32_t cpid, uint32_t ctid, const char *comm)
{
	struct cp_ev_process_fork *f =
	    (void *)kb_new(b, CP_EV_PROCESS_FORK, sizeof(*f), ts, cpu, ppid, ptid);
	struct cp_ev_wakeup_new *n;

	f->parent_pid = ppid;
	f->parent_tid = ptid;
	f->child_pid = cpid;
	f->child_tid = ctid;
	kb_comm(f->child_comm, comm);
	n = (void *)kb_new(b, CP_EV_WAKEUP_NEW, sizeof(*n), ts, cpu, ppid, ptid);
	n->pid = cpid;
	n->tid = ctid;
}

/* tid of pid exec'd filename (pid's main thread, as the kernel leaves it) */
static inline void kb_exec(struct kb *b, uint64_t ts, uint32_t cpu, uint32_t pid,
			   const char *filename)
{
	size_t len = strlen(filename);
	struct cp_ev_process_exec *e = (void *)kb_new(
	    b, CP_EV_PROCESS_EXEC,
	    (uint16_t)CP_ALIGN(offsetof(struct cp_ev_process_exec, filename) + len + 1), ts, cpu,
	    pid, pid);

	e->old_tid = pid;
	e->filename_len = (uint16_t)len;
	memcpy(e->filename, filename, len + 1);
}

/* tid exits; group_dead: it was the last thread of pid */
static inline void kb_exit(struct kb *b, uint64_t ts, uint32_t cpu, uint32_t pid, uint32_t tid,
			   bool group_dead)
{
	struct cp_ev_process_exit *e =
	    (void *)kb_new(b, CP_EV_PROCESS_EXIT, sizeof(*e), ts, cpu, pid, tid);

	e->group_dead = group_dead;
}

static inline void kb_futex(struct kb *b, uint64_t enter, uint64_t exit, uint32_t pid, uint32_t tid,
			    uint64_t uaddr)
{
	struct cp_ev_futex *e = (void *)kb_new(b, CP_EV_FUTEX, sizeof(*e), exit, 0, pid, tid);

	e->enter_ts = enter;
	e->uaddr = uaddr;
	e->op = 128;
	e->phase = CP_PHASE_EXIT;
}

struct kb_tuple {
	const char *laddr;
	uint16_t lport;
	const char *raddr;
	uint16_t rport;
};

/* A record's connection fields (family, ports, addresses) from t: the
 * same names in every record that has them. */
#define KB_TUPLE(e, t)                                                                             \
	do {                                                                                       \
		(e)->family = AF_INET;                                                             \
		(e)->lport = (t).lport;                                                            \
		(e)->rport = (t).rport;                                                            \
		inet_pton(AF_INET, (t).laddr, (e)->laddr);                                         \
		inet_pton(AF_INET, (t).raddr, (e)->raddr);                                         \
	} while (0)

/* kb_sock with a payload of plen bytes (NULs among them) */
static inline void kb_sock_bytes(struct kb *b, uint64_t enter, uint64_t exit, uint32_t pid,
				 uint32_t tid, uint8_t call, int fd, struct kb_tuple t,
				 int64_t bytes, uint32_t seq, const void *payload, size_t plen)
{
	struct cp_ev_sock *e = (void *)kb_new(
	    b, CP_EV_SOCK, (uint16_t)CP_ALIGN(offsetof(struct cp_ev_sock, payload) + plen), exit, 0,
	    pid, tid);

	e->enter_ts = enter;
	e->bytes = bytes;
	e->fd = fd;
	e->phase = CP_PHASE_EXIT;
	e->call = call;
	KB_TUPLE(e, t);
	e->tcp_seq = seq;
	e->sock_type = SOCK_STREAM;
	e->payload_len = (uint16_t)plen;
	if (plen)
		memcpy(e->payload, payload, plen);
}

/* Appends to the last record (a socket's or a TLS read's) a piece of its
 * transfer past the prefix (CP_SOCK_F_PIECES): the n bytes at p, at the
 * transfer's offset off; n = 0: the end piece (a TLS write's plaintext
 * length). */
static inline void kb_piece(struct kb *b, uint64_t off, const void *p, size_t n)
{
	struct kb_rec *r = &b->recs[b->n - 1];
	bool sock = r->u.h.type == CP_EV_SOCK;
	size_t at0 =
	    sock ? offsetof(struct cp_ev_sock, payload) : offsetof(struct cp_ev_tls_read, payload);
	uint32_t at = b->piece_rec == b->n && b->piece_end
			  ? b->piece_end
			  : (sock ? r->u.sk.payload_len : r->u.tr.payload_len);
	uint8_t *q = r->u.raw + at0 + at;

	if (sock)
		r->u.sk.flags |= CP_SOCK_F_PIECES;
	else
		r->u.tr.flags |= CP_SOCK_F_PIECES;
	q[0] = (uint8_t)off;
	q[1] = (uint8_t)(off >> 8);
	q[2] = (uint8_t)(off >> 16);
	q[3] = (uint8_t)(off >> 24);
	q[4] = (uint8_t)n;
	q[5] = (uint8_t)(n >> 8);
	if (n)
		memcpy(q + 6, p, n);
	at += (uint32_t)(6 + n);
	b->piece_rec = b->n;
	b->piece_end = at;
	r->u.h.size = (uint16_t)CP_ALIGN(at0 + at);
}

static inline void kb_sock(struct kb *b, uint64_t enter, uint64_t exit, uint32_t pid, uint32_t tid,
			   uint8_t call, int fd, struct kb_tuple t, int64_t bytes, uint32_t seq,
			   const char *payload)
{
	kb_sock_bytes(b, enter, exit, pid, tid, call, fd, t, bytes, seq, payload,
		      payload ? strlen(payload) : 0);
}

/* pid/tid's epoll_wait from enter returns ret at exit */
static inline void kb_epoll(struct kb *b, uint64_t enter, uint64_t exit, uint32_t pid, uint32_t tid,
			    int64_t ret)
{
	struct cp_ev_poll *p = (void *)kb_new(b, CP_EV_POLL, sizeof(*p), exit, 0, pid, tid);

	p->enter_ts = enter;
	p->ret = ret;
	p->phase = CP_PHASE_EXIT;
	p->call = CP_POLL_EPOLL_WAIT;
}

/* A request's segments follow one another from its start to its end. */
static inline void kb_check_tiling(const struct kb_req *q)
{
	uint64_t t = q->start;

	assert_true(q->nsegs > 0);
	for (uint32_t i = 0; i < q->nsegs; i++) {
		assert_int_equal(q->segs[i].start, t);
		assert_true(q->segs[i].end > q->segs[i].start);
		t = q->segs[i].end;
	}
	assert_int_equal(t, q->end);
}

/* The write built last left n bytes unsent (Nagle, a full window). */
static inline void kb_last_unsent(struct kb *b, uint32_t n)
{
	b->recs[b->n - 1].u.sk.unsent = n;
}

/* The Unix-domain socket of the call built last has an address of its own
 * (the accepted end of a listening socket). */
static inline void kb_last_bound(struct kb *b)
{
	b->recs[b->n - 1].u.sk.flags |= CP_SOCK_F_BOUND;
}

/* The Unix-domain socket call built last: its socket's inode and its
 * peer's (0: none yet), as recorders since ABI 5 give them */
static inline void kb_last_ino(struct kb *b, uint64_t ino, uint64_t peer)
{
	memcpy(b->recs[b->n - 1].u.sk.laddr, &ino, sizeof(ino));
	memcpy(b->recs[b->n - 1].u.sk.raddr, &peer, sizeof(peer));
}

/* The socket call built last ran inside a TLS library's read or write. */
static inline void kb_last_tls(struct kb *b)
{
	b->recs[b->n - 1].u.sk.flags |= CP_SOCK_F_TLS;
}

/* SSL_read returned bytes of plaintext, the first of them payload; its
 * socket read was on t with sequence seq. */
static inline void kb_tls_read(struct kb *b, uint64_t enter, uint64_t exit, uint32_t pid,
			       uint32_t tid, int fd, struct kb_tuple t, int64_t bytes, uint32_t seq,
			       const char *payload)
{
	size_t plen = strlen(payload);
	struct cp_ev_tls_read *e = (void *)kb_new(
	    b, CP_EV_TLS_READ, (uint16_t)CP_ALIGN(offsetof(struct cp_ev_tls_read, payload) + plen),
	    exit, 0, pid, tid);

	e->enter_ts = enter;
	e->bytes = bytes;
	e->fd = fd;
	e->call = CP_TLS_SSL_READ;
	KB_TUPLE(e, t);
	e->tcp_seq = seq;
	e->payload_len = (uint16_t)plen;
	memcpy(e->payload, payload, plen);
}

/* A Unix-domain stream socket call: no addresses, known by its fd. */
static inline void kb_sock_unix(struct kb *b, uint64_t enter, uint64_t exit, uint32_t pid,
				uint32_t tid, uint8_t call, int fd, int64_t bytes,
				const char *payload)
{
	size_t plen = payload ? strlen(payload) : 0;
	struct cp_ev_sock *e = (void *)kb_new(
	    b, CP_EV_SOCK, (uint16_t)CP_ALIGN(offsetof(struct cp_ev_sock, payload) + plen), exit, 0,
	    pid, tid);

	e->enter_ts = enter;
	e->bytes = bytes;
	e->fd = fd;
	e->phase = CP_PHASE_EXIT;
	e->call = call;
	e->family = AF_UNIX;
	e->sock_type = SOCK_STREAM;
	e->payload_len = (uint16_t)plen;
	if (plen)
		memcpy(e->payload, payload, plen);
}

/* A datagram call on a UDP socket: t as the record has it (an unconnected
 * socket's read: no remote end; its write: where it sends) */
static inline void kb_udp(struct kb *b, uint64_t enter, uint64_t exit, uint32_t pid, uint32_t tid,
			  uint8_t call, int fd, struct kb_tuple t, const void *payload, size_t plen)
{
	kb_sock_bytes(b, enter, exit, pid, tid, call, fd, t, (int64_t)plen, 0, payload, plen);
	b->recs[b->n - 1].u.sk.sock_type = SOCK_DGRAM;
}

/* a datagram arrived on a UDP socket: t is the datagram's (local = where
 * it went, remote = who sent it) */
static inline void kb_dready_udp(struct kb *b, uint64_t ts, uint32_t cpu, uint32_t pid,
				 struct kb_tuple t)
{
	struct cp_ev_sk_data_ready *e =
	    (void *)kb_new(b, CP_EV_SK_DATA_READY, sizeof(*e), ts, cpu, pid, pid);

	KB_TUPLE(e, t);
	e->protocol = IPPROTO_UDP;
}

/* data arrived on the receiver's socket t (its own view of the tuple) */
static inline void kb_dready(struct kb *b, uint64_t ts, uint32_t cpu, uint32_t pid,
			     struct kb_tuple t, uint32_t rcv_nxt)
{
	struct cp_ev_sk_data_ready *e =
	    (void *)kb_new(b, CP_EV_SK_DATA_READY, sizeof(*e), ts, cpu, pid, pid);

	KB_TUPLE(e, t);
	e->rcv_nxt = rcv_nxt;
}

static inline void kb_culprit(struct kb *b, uint64_t ts, uint32_t cpu, uint32_t pid, uint32_t tid,
			      uint32_t cpid, uint32_t ctid, const char *comm, uint64_t ns,
			      uint64_t since)
{
	struct cp_ev_runq_culprit *e =
	    (void *)kb_new(b, CP_EV_RUNQ_CULPRIT, sizeof(*e), ts, cpu, pid, tid);

	e->culprit_pid = cpid;
	e->culprit_tid = ctid;
	e->ns = ns;
	e->runnable_since = since;
	strncpy(e->culprit_comm, comm, CP_COMM_LEN - 1);
}

static inline void kb_loss(struct kb *b, uint64_t start, uint64_t end)
{
	struct cp_md_loss *m = (void *)kb_new(b, CP_MD_LOSS, sizeof(*m), 0, 0, 0, 0);

	m->start_ns = start;
	m->end_ns = end;
	m->events = 1;
}

/* A loss record as the recorder writes it: when it noticed the drops (ts),
 * after the window [start, end] it covers. */
static inline void kb_loss_at(struct kb *b, uint64_t ts, uint64_t start, uint64_t end)
{
	struct cp_md_loss *m = (void *)kb_new(b, CP_MD_LOSS, sizeof(*m), ts, 0, 0, 0);

	m->start_ns = start;
	m->end_ns = end;
	m->events = 1;
}

static inline void kb_probe_def(struct kb *b, uint32_t id, const char *symbol)
{
	struct cp_md_probe *m = (void *)kb_new(b, CP_MD_PROBE, sizeof(*m), 0, 0, 0, 0);

	m->probe_id = id;
	strncpy(m->binary, "/usr/bin/srv", sizeof(m->binary) - 1);
	strncpy(m->symbol, symbol, sizeof(m->symbol) - 1);
}

static inline void kb_uprobe(struct kb *b, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t id,
			     uint8_t phase)
{
	struct cp_ev_uprobe *e = (void *)kb_new(b, CP_EV_UPROBE, sizeof(*e), ts, 0, pid, tid);

	e->probe_id = id;
	e->phase = phase;
}

static inline void kb_emit_wire(struct kb_req *q, const struct cp_request_wire *w)
{
	q->wire = true;
	snprintf(q->server_addr, sizeof(q->server_addr), "%s", w->server_addr ?: "");
	snprintf(q->client_addr, sizeof(q->client_addr), "%s", w->client_addr ?: "");
	q->rx_seq = w->rx_seq;
	q->rx_len = w->rx_len;
	q->tx_seq = w->tx_seq;
	q->tx_len = w->tx_len;
	for (uint32_t i = 0; i < w->ncalls && i < KB_MAX_CALLS; i++) {
		const struct cp_call *c = &w->calls[i];
		struct kb_call *k = &q->calls[q->ncalls++];

		snprintf(k->local, sizeof(k->local), "%s", c->local_addr);
		snprintf(k->remote, sizeof(k->remote), "%s", c->remote_addr);
		k->tx_seq = c->tx_seq;
		k->tx_len = c->tx_len;
		k->start = c->start_ns;
		k->end = c->end_ns;
		k->seg = c->seg;
		k->cat = c->category;
		k->stitched = c->stitched;
		k->interference = c->interference;
		for (uint32_t f = 0; f < c->nframes; f++) {
			size_t o = strlen(k->stack);

			snprintf(k->stack + o, sizeof(k->stack) - o, "%s%s", f ? ";" : "",
				 c->frames[f]);
		}
	}
}

static inline bool kb_want(void *arg, const struct cp_request *head)
{
	return true;
}

static inline int kb_emit(void *arg, const struct cp_request *r)
{
	struct kb *b = arg;
	struct kb_req *q;

	if (b->nreqs >= KB_MAX_REQS)
		return -ENOSPC;
	q = &b->reqs[b->nreqs++];
	memset(q, 0, sizeof(*q));
	snprintf(q->service, sizeof(q->service), "%s", r->service ? r->service : "");
	snprintf(q->name, sizeof(q->name), "%s", r->name ? r->name : "");
	snprintf(q->id, sizeof(q->id), "%s", r->id ? r->id : "");
	snprintf(q->tag, sizeof(q->tag), "%s", r->tags && r->tags[0] ? r->tags[0] : "");
	q->start = r->start_ns;
	q->end = r->end_ns;
	q->partial = r->partial;
	for (uint32_t i = 0; i < r->nsegs && i < KB_MAX_SEGS; i++) {
		const struct cp_segment *s = &r->segs[i];
		struct kb_seg *g = &q->segs[q->nsegs++];

		g->start = s->start_ns;
		g->end = s->end_ns;
		g->cat = s->category;
		g->pid = s->pid;
		snprintf(g->comm, sizeof(g->comm), "%s", s->comm ? s->comm : "");
		g->tid = s->tid;
		g->cpu = s->cpu;
		g->interference = s->interference;
		snprintf(g->peer, sizeof(g->peer), "%s", s->peer ? s->peer : "");
		g->nframes = s->nframes;
		if (s->nframes > 2)
			snprintf(g->frame3, sizeof(g->frame3), "%s", s->frames[2]);
		for (uint32_t k = 0; k < s->nframes; k++) {
			size_t o = strlen(g->stack);

			snprintf(g->stack + o, sizeof(g->stack) - o, "%s%s", k ? ";" : "",
				 s->frames[k]);
		}
		for (uint32_t k = 0; k < s->nculprits && k < 4; k++) {
			g->cul_tid[k] = s->culprits[k].tid;
			g->cul_pid[k] = s->culprits[k].pid;
			g->cul_ns[k] = s->culprits[k].ns;
			g->ncul++;
		}
	}
	if (r->wire)
		kb_emit_wire(q, r->wire);
	return 0;
}

static inline int kb_cmp(const void *a, const void *b)
{
	const struct kb_rec *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* A stream built in pieces: what was built since the last piece, in time
 * order, into kp (source 0), and b emptied for the next. */
static inline void kb_feed(struct kp *kp, struct kb *b)
{
	qsort(b->recs, b->n, sizeof(b->recs[0]), kb_cmp);
	for (uint32_t i = 0; i < b->n; i++)
		assert_int_equal(kp__add_record(kp, 0, &b->recs[i].u.h), 0);
	b->n = 0;
}

/* Feeds the records in time order (ties: the order they were built); each
 * source is a recording of its own host ("boot-1", "boot-2", ...). */
static inline int kb_run(struct kb *b)
{
	static const char *const models[] = {"Model A", "Model B"};
	uint32_t nsrc = 1;
	struct kp kp;
	int err = 0;

	qsort(b->recs, b->n, sizeof(b->recs[0]), kb_cmp);
	for (uint32_t i = 0; i < b->n; i++)
		if (b->recs[i].src + 1 > nsrc)
			nsrc = b->recs[i].src + 1;
	kp__init(&kp, kb_emit, b);
	if (b->want)
		kp.want = kb_want;
	for (uint32_t s = 0; s < nsrc && !err; s++) {
		char key[16];
		int src;

		if (b->only && s != b->only - 1)
			continue;
		snprintf(key, sizeof(key), "boot-%u", s + 1);
		src = kp__add_source(&kp, key, 0, s ? "host-2" : "host-1", "sku-x", 2, models);
		err = src < 0 ? src : 0;
	}
	for (uint32_t i = 0; i < b->n && !err; i++)
		if (!b->only || b->recs[i].src == b->only - 1)
			err = kp__add_record(&kp, b->only ? 0 : b->recs[i].src, &b->recs[i].u.h);
	if (!err)
		err = kp__finish(&kp);
	b->inferred = kp.inferred_switches;
	b->unsent = kp.unsent_reqs;
	b->udp_unknown = kp.udp_unknown;
	b->nagle = kp.nagle_reqs;
	b->h2_uncertain = kp.h2_uncertain;
	b->h2_unnamed = kp.h2_unnamed;
	b->h2_unanswered = kp.h2_unanswered;
	b->h2_lost = kp.h2_lost;
	b->bio_wr_unsent = kp.bio_wr_unsent;
	kp__free(&kp);
	return err;
}

#ifdef KB_WITH_RECORDING
#include "recording.h"

/* Writes records [from, to) of b (every metadata record too, sorted by
 * time first) to path as a recording of host-1 with two CPU models, whose
 * monotonic 0 was 2023-11-14T22:13:20Z. */
static inline void kb_write_recording(struct kb *b, const char *path, uint32_t from, uint32_t to)
{
	static const struct recording_cpu cpus[2] = {
	    {0, "Test CPU A", 2000, 1024},
	    {1, "Test CPU B", 3000, 1024},
	};
	struct recording_info info = {
	    .agent_version = "test",
	    .cmdline = "test",
	    .host = "host-1",
	    .kernel = "6.18",
	    .boot_id = "boot-1",
	    .sku = "sku-x",
	    .start_ns = 1,
	    .realtime_offset_ns = 1700000000ll * 1000000000ll, /* 2023-11-14T22:13:20Z */
	    .payload_bytes = CP_PAYLOAD_DEFAULT,
	    .ncpus = 2,
	    .cpus = cpus,
	};
	struct recording_totals tot = {0};
	struct recording_writer *w = NULL;

	qsort(b->recs, b->n, sizeof(b->recs[0]), kb_cmp);
	assert_int_equal(recording_writer__open(&w, path, &info), 0);
	for (uint32_t i = 0; i < b->n; i++) {
		if ((i < from || i >= to) && b->recs[i].u.h.type < CP_MD_PROCESS)
			continue;
		assert_int_equal(recording_writer__append(w, &b->recs[i].u.h), 0);
		tot.events++;
		if (b->recs[i].ts > tot.end_ns)
			tot.end_ns = b->recs[i].ts;
	}
	assert_int_equal(recording_writer__close(w, &tot), 0);
}
#endif

static inline const struct kb_req *kb_find(const struct kb *b, const char *service)
{
	for (uint32_t i = 0; i < b->nreqs; i++)
		if (!strcmp(b->reqs[i].service, service))
			return &b->reqs[i];
	return NULL;
}

static inline const struct kb_req *kb_find_name(const struct kb *b, const char *name)
{
	for (uint32_t i = 0; i < b->nreqs; i++)
		if (!strcmp(b->reqs[i].name, name))
			return &b->reqs[i];
	return NULL;
}

#endif /* TEST_KPATH_BUILDER_H */
