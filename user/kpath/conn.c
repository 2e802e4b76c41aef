// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Connections and the requests served on them (DESIGN.md section 5).
 *
 * A connection is one socket of a traced process, keyed by host and 4-tuple
 * (so both ends of a loopback connection are two entries, and the peer of
 * one is the other with the tuple swapped, on any host). Requests on a
 * server connection are framed by direction changes — reads, then writes,
 * then the next read begins the next request — and named by the protocol of
 * their first bytes; the payload prefix the recorder keeps (first read after
 * a write, first write after a read) is exactly what that needs. A read that
 * carries several requests (pipelining) gives one request each, framed by
 * the protocol in that prefix (proto/frame.c). On a TLS connection recorded
 * with its plaintext, the socket reads carry ciphertext and the request is
 * named a moment later, by the plaintext the TLS library's read returned
 * (CP_EV_TLS_READ); its times stay the socket calls'.
 *
 * Start of a request: the sk_data_ready that delivered its first byte (the
 * byte at the read's tcp_seq) after the previous response ended — that is
 * when its bytes reached the process, whether the reader was blocked in the
 * read, in epoll, or busy. Without such a record: the wakeup that ended a
 * block inside the first read, else the read's entry. Never before the
 * previous response's end. End: the exit of the last write before the next
 * read (or close, EOF, or KP_IDLE_FINISH_NS of silence).
 *
 * UDP: each remote address and pair of ports a socket exchanges datagrams
 * on is a connection (a flow), framed the same way: a datagram read on a
 * server's flow, then its replies. Its own address is not in the key: an
 * unconnected socket's is a wildcard. A read says its datagram's sender
 * (the recorder's cgroup recvmsg hook) and takes that flow's oldest
 * datagram from the socket's queue of arrivals; sk_data_ready says each
 * arrival's sender, unless the reader took it first. A read that does not
 * say (an older recorder's, or one that asked for no address) takes the
 * oldest datagram the socket has not read yet, and with it the flow. A
 * write says where it sends. Flows have no close: one idle for KP_KEEP_NS
 * is recycled.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kpath_internal.h"

/* An arrival on conn ci at ts, in its time order (one learnt late, from
 * the read that took it, may be older than the last). */
int kp__conn_arrival(struct kp *kp, uint32_t ci, uint64_t ts, uint32_t rcv_nxt)
{
	struct kp_conn *c = &kp->cn[ci];
	uint32_t i;

	if (kp__win_more((void **)&c->dr, &c->droff, &c->capdr, c->ndr, sizeof(*c->dr)))
		return -ENOMEM;
	for (i = c->ndr; i > 0 && c->dr[i - 1].ts > ts; i--)
		c->dr[i] = c->dr[i - 1];
	c->dr[i].ts = ts;
	c->dr[i].rcv_nxt = rcv_nxt;
	c->ndr++;
	return 0;
}

static void conn_reset(struct kp_conn *c)
{
	/* a new connection on a 4-tuple used before: the old one's data
	 * arrivals and writes are not its own (another sequence space) */
	c->ndr = c->nwr = 0;
	c->service[0] = '\0';
	c->phase = KP_PH_IDLE;
	c->prev_end = 0;
	c->peer = KP_NONE;
	c->peer_missed = 0;
	c->ndq = 0;
	c->ctx_owner1 = 0;
	c->req.reader = c->req.writer = KP_NONE;
	c->role_guessed = 0; /* its accept or connect says */
	c->tls_seen = 0;
	c->tls_bio = 0;
	c->bio_wr_seen = 0;
	c->tls_key = 0;
	c->bw.n = c->bw.len = c->bw.nsure = 0;
	c->peer_eof = 0;
	kp__h2_free(c);
}

uint64_t kp__req_start(struct kp *kp, struct kp_conn *c, uint32_t thread, uint64_t enter,
		       uint64_t exit, uint32_t seq, uint64_t lower)
{
	const struct kp_thread *t = &kp->th[thread];
	uint64_t s = enter;
	bool found = false;
	/* the first arrival after the previous response: near the end of the
	 * window (a second of arrivals), so galloping back from it touches a
	 * few cache lines where bisecting the whole window missed on each step */
	uint32_t lo = kp__lower_bound_from_end(c->dr, c->ndr, sizeof(*c->dr),
					       offsetof(struct kp_dready, ts), lower);

	for (uint32_t i = lo; i < c->ndr; i++) {
		const struct kp_dready *d = &c->dr[i];

		if (d->ts > exit)
			break;
		/* a flow's datagrams have no sequence: its first since then */
		if (d->ts < lower ||
		    (c->a.proto != IPPROTO_UDP && (int32_t)(d->rcv_nxt - seq) <= 0))
			continue;
		s = d->ts;
		found = true;
		break;
	}
	if (!found) {
		for (uint32_t k = t->niv; k > 0; k--) {
			const struct kp_iv *iv = &t->iv[k - 1];

			if (iv->end != KP_OPEN && iv->end <= enter)
				break;
			if (iv->state == KP_ST_BLOCKED && iv->end != KP_OPEN && iv->end <= exit) {
				s = iv->end;
				break;
			}
		}
	}
	if (s < lower)
		s = lower;
	if (s > exit)
		s = exit;
	return s;
}

/*
 * Pipelining: several requests in the read that began this one (their bytes
 * all came before any response). Each is a request of its own, named by its
 * own first bytes; all of them start when the read's first byte arrived and
 * end with the last byte written before the next read — which response
 * bytes belong to which request is not known from syscalls — so they share
 * this exchange's critical path. Only the payload prefix can be framed:
 * reads whose requests went on past it are counted (kp->pipe_beyond).
 */
#define KP_PIPE_MAX 256

int kp__conn_pipelined(struct kp *kp, struct kp_conn *c, const uint8_t *payload, size_t len,
			  int64_t bytes, enum kp_proto pr)
{
	struct proto_msg m[KP_PIPE_MAX];
	bool beyond = false;
	uint32_t n = proto__split(pr, payload, len, (uint64_t)bytes, m, KP_PIPE_MAX, &beyond);

	kp->pipe_beyond += beyond;
	if (n < 2)
		return 0;
	kp->pipe_reads++;
	kp->pipe_requests += n;
	c->req.nruns = 0;
	for (uint32_t i = 0; i < n; i++) {
		char name[KP_NAME_LEN];
		struct kp_name_run *r;

		proto__request_name(payload + m[i].off, m[i].len, name, sizeof(name));
		if (!name[0])
			snprintf(name, sizeof(name), "request");
		if (c->req.nruns && !strcmp(c->runs[c->req.nruns - 1].name, name)) {
			c->runs[c->req.nruns - 1].count++;
			continue;
		}
		if (kp__grow((void **)&c->runs, &c->capruns, c->req.nruns + 1u, sizeof(*c->runs)))
			return -ENOMEM;
		r = &c->runs[c->req.nruns++];
		memcpy(r->name, name, sizeof(r->name));
		r->count = 1;
	}
	return 0;
}

/* The request's first read was short and named nothing: named by its
 * bytes and this read's, once (a length prefix, then its message). */
static void name_after_head(struct kp_conn *c, const struct cp_ev_sock *e)
{
	uint8_t buf[CP_SHORT_READ + CP_PAYLOAD_MAX];
	char name[KP_NAME_LEN];
	size_t n = c->req.nhead;

	memcpy(buf, c->req.head, n);
	memcpy(buf + n, e->payload, e->payload_len);
	c->req.nhead = 0;
	if (proto__request_name(buf, n + e->payload_len, name, sizeof(name)) != KP_PROTO_NONE &&
	    name[0])
		memcpy(c->req.name, name, sizeof(c->req.name));
}

/* A payload p[0..len) that begins HTTP/2 on a connection not known to
 * speak it: from now on its streams are its requests (kpath/h2.c). On TLS,
 * a write's payload is its plaintext, a read's comes in kp__conn_tls_read. */
int kp__h2_check(struct kp *kp, uint32_t ci, const uint8_t *p, size_t len)
{
	struct kp_conn *c = &kp->cn[ci];
	bool from_start;

	if (c->h2 || len < 9 || (p[0] && p[0] != 'P') || c->a.proto == IPPROTO_UDP)
		return 0;
	if (!kp__h2_detect(p, len, &from_start))
		return 0;
	if (c->role == KP_ROLE_SERVER && c->phase == KP_PH_WRITING) {
		/* an exchange answered before it (TLS 1.3: the client's
		 * Finished, answered by session tickets) is a request of its
		 * own; the streams are from here on */
		int err = kp__conn_finish_req(kp, ci);

		if (err)
			return err;
		c = &kp->cn[ci];
	}
	return kp__h2_new(c, from_start, p[0] == 'P');
}

/* A socket read of TLS records (content type first: 20 change cipher spec
 * to 23 application data), outside the TLS library's read, in a process
 * whose TLS calls are captured: a flight of the handshake (below), or a
 * request's ciphertext read before the library decrypts it from memory
 * buffers (Node.js; the client's last handshake flight may come with it). */
static bool tls_record_outside(struct kp *kp, const struct kp_conn *c, const struct cp_ev_sock *e,
			       uint64_t ts, bool data)
{
	const struct kp_proc *p = c->proc != KP_NONE ? &kp->pr[c->proc] : NULL;

	return e->payload_len >= 5 && e->payload[0] >= (data ? 23 : 20) && e->payload[0] <= 23 &&
	       e->payload[1] == 3 && !(e->flags & CP_SOCK_F_TLS) && p && p->tls_since &&
	       p->tls_since <= ts;
}

/*
 * TLS 1.3 after a HelloRetryRequest takes a third flight: the client's
 * Finished, then the server's session ticket. It is encrypted, so it is an
 * application data record, read outside the TLS library's read. In a process
 * whose TLS calls are captured, such a read right after a handshake
 * exchange and before any call inside the library is that flight, not a
 * request (with --no-tls every request would look so: not named then).
 */
static bool tls13_flight(struct kp *kp, const struct kp_conn *c, const struct cp_ev_sock *e,
			 uint64_t ts)
{
	return tls_record_outside(kp, c, e, ts, true) && !c->tls_seen &&
	       !strcmp(c->last_name, "TLS handshake");
}

/* The datagram query being read waits for its answer in the flow's queue;
 * the oldest is dropped (counted) when KP_DQ_MAX wait. */
static int dq_push(struct kp *kp, struct kp_conn *c)
{
	if (!c->dq && !(c->dq = calloc(KP_DQ_MAX, sizeof(*c->dq))))
		return -ENOMEM;
	if (c->ndq == KP_DQ_MAX) {
		memmove(&c->dq[0], &c->dq[1], (KP_DQ_MAX - 1) * sizeof(*c->dq));
		c->ndq--;
		kp->dq_dropped++;
	}
	c->dq[c->ndq++] = c->req;
	return 0;
}

/* A datagram answer on a flow with queries waiting: the query its id names
 * becomes the request answered (the one it takes the place of waits, or is
 * finished when already answered). */
static int dq_answer(struct kp *kp, uint32_t ci, const struct cp_ev_sock *e)
{
	struct kp_conn *c = &kp->cn[ci];
	uint16_t x;
	uint8_t k;
	int err;

	if (!c->ndq || e->payload_len < 2)
		return 0;
	x = (uint16_t)(e->payload[0] << 8 | e->payload[1]);
	if (c->phase != KP_PH_IDLE && c->req.xid_ok && c->req.xid == x)
		return 0;
	for (k = 0; k < c->ndq && !(c->dq[k].xid_ok && c->dq[k].xid == x); k++)
		;
	if (k == c->ndq)
		return 0;
	if (c->phase == KP_PH_WRITING) {
		err = kp__conn_finish_req(kp, ci);
		if (err)
			return err;
		c = &kp->cn[ci];
	} else if (c->phase == KP_PH_READING) {
		struct kp_req waiting = c->req;

		c->req = c->dq[k];
		c->dq[k] = waiting;
		return 0;
	}
	c->req = c->dq[k];
	memmove(&c->dq[k], &c->dq[k + 1], (size_t)(c->ndq - k - 1) * sizeof(*c->dq));
	c->ndq--;
	c->phase = KP_PH_READING;
	return 0;
}

static int conn_read(struct kp *kp, uint32_t ci, const struct cp_ev_sock *e, uint32_t thread,
		     uint64_t ts, uint64_t enter)
{
	struct kp_conn *c = &kp->cn[ci];
	uint64_t lower;
	bool tls_fin;
	enum kp_proto pr;
	int err;

	kp__conn_guess_role(kp, ci, true, e->flags);
	c->seen_data = 1;
	err = kp__h2_check(kp, ci, e->payload, e->payload_len);
	if (err)
		return err;
	c = &kp->cn[ci];
	if (c->h2)
		return kp__h2_transfer(kp, ci, e, thread, ts, enter, true);
	if (c->role == KP_ROLE_CLIENT) {
		c->phase = KP_PH_READING;
		return 0;
	}
	if (c->phase == KP_PH_READING && c->a.proto == IPPROTO_UDP && c->req.xid_ok) {
		/* another datagram before the answer: another query; this
		 * one waits for its answer */
		err = dq_push(kp, c);
		if (err)
			return err;
		c->phase = KP_PH_IDLE;
	}
	if (c->phase == KP_PH_READING && !c->req.tls_fin) {
		if (c->req.nhead && e->payload_len)
			name_after_head(c, e);
		return 0;
	}
	/* the last flight's read had no answer: the request's bytes came
	 * after it */
	tls_fin = c->phase == KP_PH_READING;
	if (c->phase == KP_PH_WRITING) {
		err = kp__conn_finish_req(kp, ci);
		if (err)
			return err;
		c = &kp->cn[ci];
	}
	lower = tls_fin ? c->req.first_read_exit : c->prev_end; /* prev_end: as finished */
	/* after the arrival of the query that waits for its answer */
	if (c->ndq && c->dq[c->ndq - 1].start >= lower)
		lower = c->dq[c->ndq - 1].start + 1;
	memset(&c->req, 0, sizeof(c->req));
	c->req.reader = thread;
	c->req.writer = KP_NONE;
	c->req.first_read_enter = enter;
	c->req.first_read_exit = ts;
	c->req.start = kp__req_start(kp, c, thread, enter, ts, e->tcp_seq, lower);
	/* its plaintext comes in a CP_EV_TLS_READ: read inside the library,
	 * or on its memory buffers after this read (Node.js) */
	c->req.tls_wait = ((e->flags & CP_SOCK_F_TLS) && !e->payload_len) ||
			  tls_record_outside(kp, c, e, ts, false) || tls_fin;
	pr = proto__request_name(e->payload, e->payload_len, c->req.name, sizeof(c->req.name));
	c->req.proto = (uint8_t)pr;
	if (pr == KP_PROTO_HTTP)
		proto__http_meta(e->payload, e->payload_len, &c->req.meta, kp->want != NULL);
	if (pr == KP_PROTO_DNS && c->a.proto == IPPROTO_UDP && e->payload_len >= 2) {
		c->req.xid = (uint16_t)(e->payload[0] << 8 | e->payload[1]);
		c->req.xid_ok = true;
	}
	/* the whole change_cipher_spec record and the next record's header
	 * in one read: the client's last flight read at once (a library
	 * that reads record by record, OpenSSL's own, reads on inside its
	 * handshake) */
	c->req.tls_fin = c->req.tls_wait && e->payload_len >= 9 && e->payload[0] == 20 &&
			 e->payload[5] == 1 && e->payload[6] == 23;
	if (!c->req.name[0] && tls13_flight(kp, c, e, ts)) {
		snprintf(c->req.name, sizeof(c->req.name), "TLS handshake");
		c->req.tls_fin = e->bytes > 5; /* more than a record's header */
	}
	if (!c->req.name[0]) {
		snprintf(c->req.name, sizeof(c->req.name), "request");
		if (e->payload_len && e->bytes <= CP_SHORT_READ && !c->req.tls_wait &&
		    e->payload_len <= CP_SHORT_READ) { /* a record may say otherwise */
			c->req.nhead = (uint8_t)e->payload_len;
			memcpy(c->req.head, e->payload, e->payload_len);
		}
	}
	c->phase = KP_PH_READING;
	return kp__conn_pipelined(kp, c, e->payload, e->payload_len, e->bytes, pr);
}

static int conn_write(struct kp *kp, uint32_t ci, const struct cp_ev_sock *e, uint32_t thread,
		      uint64_t ts, uint64_t enter)
{
	struct kp_conn *c = &kp->cn[ci];
	struct kp_bio_wr *q = NULL;
	uint16_t bio_status = 0;
	struct kp_write *w;
	bool bio;
	int err;

	/* a client's first TLS record out, its plaintext waiting on the
	 * thread (no read of the connection named it yet; a recorder that
	 * names library connections leaves only such writes there): the
	 * library is on memory buffers there too */
	if (!c->tls_bio && kp->th[thread].bw.n &&
	    cp_tls_id((const struct cp_ev_tls_read *)kp->th[thread].bw.buf) &&
	    tls_record_outside(kp, c, e, ts, true))
		c->tls_bio = 1;
	if (c->tls_bio && !(e->flags & CP_SOCK_F_TLS))
		q = kp__bio_wr_for(kp, ci, thread, ts);
	bio = q != NULL;
	if (bio && q == &kp->th[thread].bw && !c->tls_key) /* its library connection from now on */
		(void)kp__bio_learn(kp, ci,
				kp__tls_conn_key(c->host, (const struct cp_ev_tls_read *)q->buf));
	kp__conn_guess_role(kp, ci, false, e->flags);
	c->seen_data = 1;
	if (kp__win_more((void **)&c->wr, &c->wroff, &c->capwr, c->nwr, sizeof(*c->wr)))
		return -ENOMEM;
	w = &c->wr[c->nwr++];
	w->enter = enter;
	w->exit = ts;
	w->thread = thread;
	w->seq = e->tcp_seq;
	w->bytes = e->bytes;
	w->name = NULL;
	if (c->role == KP_ROLE_SERVER && c->phase != KP_PH_IDLE && c->req.name[0] && !c->h2) {
		if (!c->iname || strcmp(c->iname, c->req.name))
			c->iname = kp__intern(kp, c->req.name);
		w->name = c->iname;
	}
	if (bio) {
		/* the plaintext of the thread's TLS writes before it (Node.js;
		 * an HTTP/2 client's preface shows what the connection speaks);
		 * an HTTP/1 response's status from the first, the writes after
		 * the handshake's coming first */
		const struct cp_ev_tls_read *r = (const void *)q->buf;

		c->bio_wr_seen = 1;
		err = kp__h2_check(kp, ci, r->payload, r->payload_len);
		c = &kp->cn[ci];
		if (!err && !c->h2)
			bio_status = (uint16_t)proto__http_status(r->payload, r->payload_len);
	} else {
		err = kp__h2_check(kp, ci, e->payload, e->payload_len);
		c = &kp->cn[ci];
	}
	if (err)
		return err;
	if (c->h2)
		return kp__h2_transfer(kp, ci, e, thread, ts, enter, false);
	if (bio)
		q->n = q->len = q->nsure = 0;
	if (c->role == KP_ROLE_CLIENT) {
		if (c->phase != KP_PH_WRITING) {
			/* a call over TLS on memory buffers: named by its
			 * plaintext (its first write's) */
			const struct cp_ev_tls_read *r = bio ? (const void *)q->buf : NULL;

			proto__request_name(r ? r->payload : e->payload,
					    r ? r->payload_len : e->payload_len, c->last_name,
					    sizeof(c->last_name));
			c->phase = KP_PH_WRITING;
		}
		return 0;
	}
	if (c->ndq) {
		err = dq_answer(kp, ci, e);
		if (err)
			return err;
		c = &kp->cn[ci];
	}
	if (c->phase == KP_PH_IDLE)
		return 0; /* nothing asked for it (server push, or its request came before us) */
	if (c->phase == KP_PH_READING && c->req.tls_wait && !bio &&
	    ((c->tls_bio && c->bio_wr_seen) || (c->tls_seen && !(e->flags & CP_SOCK_F_TLS))) &&
	    !strcmp(c->req.name, "request")) {
		/* TLS records that brought no plaintext answered by the
		 * library's own (a close_notify alert answered with one as
		 * the connection closes): no request */
		c->phase = KP_PH_IDLE;
		return 0;
	}
	if (c->phase == KP_PH_READING) {
		c->req.status = proto__http_status(e->payload, e->payload_len);
		c->phase = KP_PH_WRITING;
	}
	if (!c->req.status)
		c->req.status = bio_status;
	c->req.end = ts;
	c->req.writer = thread;
	c->req.unsent = e->unsent; /* the last write's is what the client waits for */
	c->req.nagle = kp__nagle_held(e->unsent, e->bytes > 0 ? (uint64_t)e->bytes : 0);
	return 0;
}

/* A server connection's requests still open end here (closed, exited,
 * end of input): the response being written, and HTTP/2's answered
 * streams. */
int kp__conn_finish_open(struct kp *kp, uint32_t ci)
{
	if (kp->cn[ci].role == KP_ROLE_SERVER && kp->cn[ci].phase == KP_PH_WRITING) {
		int err = kp__conn_finish_req(kp, ci);

		if (err)
			return err;
	}
	return kp__h2_close(kp, ci);
}

/* The fd no longer names the connection. */
static void conn_forget_fd(struct kp *kp, uint32_t ci, uint64_t fk)
{
	if (kp_map__get(&kp->fdmap, fk) == ci)
		kp_map__del(&kp->fdmap, fk);
	if (kp->cn[ci].fdkey == fk)
		kp->cn[ci].fdkey = 0;
}

/* Its process closed it: it waits in kp->closed to be recycled (another
 * process holding the same socket keeps using it: then it is not). */
int kp__conn_closed(struct kp *kp, uint32_t ci, uint64_t ts)
{
	if (kp->cn[ci].closed_at) {
		kp->cn[ci].closed_at = ts; /* already waiting: from now */
		return 0;
	}
	if (kp__grow((void **)&kp->closed, &kp->capclosed, kp->nclosed + 1, sizeof(*kp->closed)))
		return -ENOMEM;
	kp->cn[ci].closed_at = ts;
	kp->closed[kp->nclosed++] = ci;
	return 0;
}

/*
 * A process's exit closes its sockets without a close record (the kernel
 * closes them in do_exit): the connections it used last are closed then, a
 * response it was writing is finished, and its descriptors name nothing any
 * more, so a later process on the same pid and fd begins a connection of its
 * own. Without this a forked server's connections (one child per
 * connection, or workers that exit) would never be recycled.
 */
int kp__conn_proc_exit(struct kp *kp, uint32_t proc, uint64_t ts)
{
	for (uint32_t ci = 0; ci < kp->ncn; ci++) {
		struct kp_conn *c = &kp->cn[ci];
		int err;

		if (c->last_proc != proc || c->closed_at)
			continue;
		err = kp__conn_finish_open(kp, ci);
		if (err)
			return err;
		c = &kp->cn[ci];
		c->phase = KP_PH_IDLE;
		if (c->fdkey)
			conn_forget_fd(kp, ci, c->fdkey);
		err = kp__conn_closed(kp, ci, ts);
		if (err)
			return err;
	}
	return 0;
}

void kp__conn_recycle(struct kp *kp, uint64_t mark)
{
	uint32_t keep = 0;

	for (uint32_t k = 0; k < kp->nclosed; k++) {
		uint32_t ci = kp->closed[k], peer;
		struct kp_conn *c = &kp->cn[ci];

		if (c->a.proto == IPPROTO_UDP) {
			/* a flow: idle long enough, no request open on it */
			if (c->last_used + KP_KEEP_NS > mark ||
			    (c->role == KP_ROLE_SERVER && c->phase != KP_PH_IDLE)) {
				kp->closed[keep++] = ci;
				continue;
			}
		} else if (c->last_used > c->closed_at) {
			c->closed_at = 0; /* used after the close: someone else's too */
			continue;
		}
		if ((c->a.proto != IPPROTO_UDP && c->closed_at + KP_KEEP_NS > mark) ||
		    kp__grow((void **)&kp->freecn, &kp->capfreecn, kp->nfreecn + 1,
			     sizeof(*kp->freecn))) {
			kp->closed[keep++] = ci;
			continue;
		}
		if (kp_map__get(&kp->cnmap, addr_hash(c->host, &c->a)) == ci)
			kp_map__del(&kp->cnmap, addr_hash(c->host, &c->a));
		if (kp->multi_host && kp_map__get(&kp->repmap, rep_key(c->host, &c->a)) == ci)
			kp_map__del(&kp->repmap, rep_key(c->host, &c->a));
		if (kp->multi_host && kp_map__get(&kp->lepmap, lep_key(c->host, &c->a)) == ci)
			kp_map__del(&kp->lepmap, lep_key(c->host, &c->a));
		if (c->a.proto == IPPROTO_UDP &&
		    kp_map__get(&kp->uportmap, uport_key(c->host, &c->a)) == ci)
			kp_map__del(&kp->uportmap, uport_key(c->host, &c->a));
		if (c->fdkey)
			conn_forget_fd(kp, ci, c->fdkey);
		peer = c->peer;
		if (peer != KP_NONE && peer < kp->ncn && kp->cn[peer].peer == ci)
			kp->cn[peer].peer = KP_NONE;
		kp__win_free((void **)&c->wr, &c->wroff, sizeof(*c->wr));
		kp__win_free((void **)&c->dr, &c->droff, sizeof(*c->dr));
		free(c->runs);
		free(c->bw.buf);
		free(c->dq);
		kp__h2_free(c);
		memset(c, 0, sizeof(*c));
		c->proc = c->last_proc = c->peer = KP_NONE;
		c->req.reader = c->req.writer = KP_NONE;
		kp->freecn[kp->nfreecn++] = ci;
		kp->conns_recycled++;
	}
	kp->nclosed = keep;
	kp__guessed_compact(kp, kp->nguessed); /* recycled ones leave the list */
}

int kp__conn_sock(struct kp *kp, uint32_t src, const struct cp_ev_sock *e, uint64_t ts,
		  uint64_t enter)
{
	uint32_t host = kp->src[src].host;
	uint32_t thread, ci, proc;
	struct kp_conn *c;
	bool udp = e->sock_type == SOCK_DGRAM && (e->family == AF_INET || e->family == AF_INET6);

	if (e->phase != CP_PHASE_EXIT)
		return 0; /* still in progress when the recording ended */
	if (e->sock_type && e->sock_type != SOCK_STREAM && !udp)
		return 0; /* other datagrams have no requests to frame */
	if (udp && !(kp__sock_read(e->call) && e->bytes >= 0) &&
	    !(kp__sock_write(e->call) && e->bytes > 0))
		return 0; /* a flow has no accept, connect or close; a failed read took nothing */
	thread = kp__thread(kp, host, (int32_t)e->h.pid, (int32_t)e->h.tid);
	if (thread == KP_NONE)
		return -ENOMEM;
	proc = kp->th[thread].proc;
	if (kp__tl_seen_running(kp, thread, e->h.cpu))
		return -ENOMEM;
	ci = udp ? kp__udp_conn(kp, host, e, ts, kp__sock_read(e->call)) : kp__conn_by_sock(kp, host, e);
	if (ci == KP_NONE)
		return 0;
	c = &kp->cn[ci];
	if (c->proc == KP_NONE)
		c->proc = proc;
	c->last_used = ts;
	c->last_proc = proc;
	c->tls_seen |= !!(e->flags & CP_SOCK_F_TLS);
	if (kp__sock_read(e->call) && e->bytes > 0) {
		kp->th[thread].read_conn = ci;
		kp->th[thread].read_ts = ts;
	}
	c->peer_eof |= kp__sock_read(e->call) && !e->bytes && !udp;
	switch (e->call) {
	case CP_SOCK_ACCEPT:
	case CP_SOCK_ACCEPT4: {
		int err = 0;

		if (e->bytes < 0)
			return 0;
		/* a 4-tuple used before: the old connection's requests end */
		if (c->seen_data && c->phase == KP_PH_WRITING)
			err = kp__conn_finish_req(kp, ci);
		err = err ?: kp__h2_close(kp, ci);
		if (err)
			return err;
		c = &kp->cn[ci];
		conn_reset(c);
		c->proc = proc;
		c->role = KP_ROLE_SERVER;
		return kp__proc_listen(kp, proc, c->a.lport);
	}
	case CP_SOCK_CONNECT:
		if (e->bytes < 0 && e->bytes != -EINPROGRESS)
			return 0;
		conn_reset(c);
		c->proc = proc;
		c->role = KP_ROLE_CLIENT;
		return 0;
	case CP_SOCK_CLOSE:
	case CP_SOCK_SHUTDOWN: {
		int err = kp__conn_finish_open(kp, ci);

		if (err)
			return err;
		c = &kp->cn[ci];
		if (e->call == CP_SOCK_CLOSE) {
			c->phase = KP_PH_IDLE;
			if (e->fd >= 0)
				conn_forget_fd(kp, ci, fd_key(host, e->h.pid, e->fd));
			if (!e->bytes)
				return kp__conn_closed(kp, ci, ts);
		}
		return 0;
	}
	default:
		break;
	}
	if (kp__sock_read(e->call)) {
		if (e->bytes > 0 || e->bytes == 0)
			kp__tl_annotate(kp, thread, enter, ts, KP_BR_SOCK, 0, ci);
		if (e->bytes > 0 && (c->a.family == AF_UNIX || c->a.proto == IPPROTO_UDP))
			kp__tl_poll_source(kp, thread, enter, ci);
		if (e->flags & CP_SOCK_F_PEEK)
			return 0; /* its bytes are the next read's: that one frames them */
		if (e->bytes > 0) {
			int err = conn_read(kp, ci, e, thread, ts, enter);
			uint32_t works_for;

			/* request bytes in: the thread works on this request;
			 * a downstream reply: on the request it was asked for */
			c = &kp->cn[ci];
			if (c->role == KP_ROLE_SERVER && c->a.family == AF_UNIX && c->proc != KP_NONE)
				kp->pr[c->proc].serves_unix = true;
			if (c->role == KP_ROLE_SERVER)
				works_for = ci;
			else
				works_for = c->ctx_owner1 ? c->ctx_owner1 - 1 : KP_NONE;
			return err ?: kp__tl_call_read(kp, thread, enter, ts, works_for, ci);
		}
		if (e->bytes == 0 && !udp && c->h2)
			return kp__h2_close(kp, ci); /* EOF: no stream comes after it */
		if (e->bytes == 0 && !udp && c->role == KP_ROLE_SERVER && c->phase == KP_PH_WRITING)
			return kp__conn_finish_req(kp, ci); /* EOF (an empty datagram is none) */
		return 0;
	}
	if (kp__sock_write(e->call) && e->bytes > 0) {
		/* a response write is its request's since the call before it:
		 * its syscall (the default capture sees only its end) and what
		 * made the response; set before, as the write may end the
		 * request a walk then follows */
		int err;

		if (c->role == KP_ROLE_SERVER) {
			struct kp_thread *th = &kp->th[thread];
			uint32_t rc = th->read_conn;

			/* a call made from nobody's context (a loop writes it
			 * when the socket becomes writable) whose reply this
			 * response follows: made for this request */
			if (th->read_ts && th->read_ts == th->last_call && rc != ci && rc < kp->ncn &&
			    kp->cn[rc].role == KP_ROLE_CLIENT && !kp->cn[rc].ctx_owner1)
				kp->cn[rc].ctx_owner1 = ci + 1;
			/* on HTTP/2, by the streams it carries (kp__h2_transfer) */
			err = c->h2 ? 0 : kp__tl_call(kp, thread, ts, ci, KP_NONE);
		} else {
			/* a downstream call, made for the request at hand */
			uint32_t now = kp__tl_ctx_now(&kp->th[thread]);

			c->ctx_owner1 = now == KP_NONE ? 0 : now + 1;
			err = kp__tl_call(kp, thread, ts, KP_NONE, now);
		}
		return err ?: conn_write(kp, ci, e, thread, ts, enter);
	}
	return 0;
}

/* The last arrival on the event's CPU, for the NET_RX wakeup that follows
 * it (kp__tl_waking): on conn ci (KP_NONE: its sender not known). */
static int dready_cpu(struct kp *kp, uint32_t host, const struct cp_ev_sk_data_ready *e,
		      uint64_t ts, uint32_t ci)
{
	size_t k = (size_t)host * KP_MAX_CPUS + e->h.cpu;

	if (e->h.cpu >= KP_MAX_CPUS)
		return 0;
	if (k >= kp->nlastdr) {
		uint32_t cap = kp->nlastdr, need = (uint32_t)(host + 1) * KP_MAX_CPUS;

		if (kp__grow((void **)&kp->lastdr, &cap, need, sizeof(*kp->lastdr)))
			return -ENOMEM;
		for (uint32_t j = kp->nlastdr; j < cap; j++)
			kp->lastdr[j].conn = KP_NONE, kp->lastdr[j].ts = 0;
		kp->nlastdr = cap;
	}
	kp->lastdr[k].ts = ts;
	kp->lastdr[k].conn = ci;
	return 0;
}

int kp__conn_dready(struct kp *kp, uint32_t host, const struct cp_ev_sk_data_ready *e, uint64_t ts)
{
	struct kp_addr a;
	struct kp_conn *c;
	uint32_t ci;

	/* a Unix-domain peer wakes its reader from its own task: no 4-tuple
	 * and no sequence to match, and not a NET_RX wakeup to explain */
	if (e->family != AF_INET && e->family != AF_INET6)
		return 0;
	if (e->protocol == IPPROTO_UDP) {
		int err;

		if (!e->rport) {
			/* its sender not known yet: the read that takes it
			 * will say (udpq_take) */
			err = kp__udpq_push(kp, host, e->family, e->lport, ts, KP_NONE);
			return err ? err : dready_cpu(kp, host, e, ts, KP_NONE);
		}
		ci =
		    kp__udp_flow(kp, host, e->family, e->lport, e->rport, e->laddr, e->raddr, ts, true);
		if (ci == KP_NONE)
			return -ENOMEM;
		err = kp__udpq_push(kp, host, e->family, e->lport, ts, ci);
		if (err)
			return err;
	} else {
		kp__addr_of(&a, e->family, e->lport, e->rport, e->laddr, e->raddr);
		ci = kp__conn(kp, host, &a);
		if (ci == KP_NONE)
			return -ENOMEM;
	}
	c = &kp->cn[ci];
	c->last_used = ts;
	return kp__conn_arrival(kp, ci, ts, e->rcv_nxt) ?: dready_cpu(kp, host, e, ts, ci);
}

const struct kp_write *kp__conn_write_for(const struct kp_conn *c, uint64_t ts, uint32_t rcv_nxt,
					  bool have_seq)
{
	const struct kp_write *last = NULL;

	for (uint32_t i = c->nwr; i > 0; i--) {
		const struct kp_write *w = &c->wr[i - 1];
		int32_t d = (int32_t)(rcv_nxt - w->seq);

		/* The write that holds the arrived bytes. Its call may end
		 * after they arrived (loopback delivers inside the send), and
		 * the default capture, which sees a call that did not block at
		 * its end, records its start there too. */
		if (have_seq && d > 0 && d <= w->bytes && w->enter <= ts + KP_WRITE_SLACK_NS)
			return w;
		if (w->enter > ts)
			continue;
		if (!have_seq)
			return w;
		if (d > 0 && d <= w->bytes)
			return w;
		if (!last)
			last = w;
		if (ts - w->enter > KP_KEEP_NS)
			break;
	}
	return last;
}

const struct kp_write *kp__conn_dgram_for(const struct kp_conn *c, uint64_t ts, bool same_host)
{
	const struct kp_write *after = NULL;

	/* On one host the datagram is delivered inside the send (loopback):
	 * the first write to end at or after its arrival, as the default
	 * capture sees a send at its end. From another host: the last write
	 * to end before it. */
	for (uint32_t i = c->nwr; i > 0; i--) {
		const struct kp_write *w = &c->wr[i - 1];

		if (w->exit >= ts) {
			if (same_host && w->exit - ts <= KP_WRITE_SLACK_NS)
				after = w;
			continue;
		}
		return after ? after : w;
	}
	return after;
}

bool kp__conn_dready_at(const struct kp_conn *c, uint64_t ts, uint32_t *rcv_nxt)
{
	/* the walk asks about the last few: a scan from the end beats a search */
	for (uint32_t i = c->ndr; i > 0; i--) {
		if (c->dr[i - 1].ts <= ts) {
			*rcv_nxt = c->dr[i - 1].rcv_nxt;
			return true;
		}
	}
	return false;
}

void kp__conn_prune(struct kp_conn *c, uint64_t before)
{
	uint32_t n = 0;

	while (n + 1 < c->nwr && c->wr[n].exit < before)
		n++;
	kp__win_drop((void **)&c->wr, &c->wroff, &c->nwr, n, sizeof(*c->wr));
	n = 0;
	while (n + 1 < c->ndr && c->dr[n].ts < before)
		n++;
	kp__win_drop((void **)&c->dr, &c->droff, &c->ndr, n, sizeof(*c->dr));
}
