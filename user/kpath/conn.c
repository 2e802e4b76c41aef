// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Connections and the requests on them (DESIGN.md 5): framed by direction
 * changes, named by their first bytes. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kpath_internal.h"

/* An arrival on ci at ts (one learnt late may be older than the last). */
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
	/* a new connection on a reused 4-tuple: another sequence space */
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
	/* gallop back from the end: the arrival wanted is near it */
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

/* Pipelining: the requests in one read share its exchange's times and path. */
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

/* A short first read that named nothing: named with this read's bytes
 * (MySQL). */
static void name_after_head(struct kp_conn *c, const struct cp_ev_sock *e)
{
	uint8_t buf[CP_SHORT_READ + CP_PAYLOAD_MAX];
	char name[KP_NAME_LEN];
	size_t n = c->req.nhead;

	enum kp_proto pr;

	memcpy(buf, c->req.head, n);
	memcpy(buf + n, e->payload, e->payload_len);
	c->req.nhead = 0;
	pr = proto__request_name(buf, n + e->payload_len, name, sizeof(name));
	if (pr != KP_PROTO_NONE && name[0]) {
		memcpy(c->req.name, name, sizeof(c->req.name));
		c->req.proto = (uint8_t)pr;
	}
}

/* A FastCGI server that reads a record's header and its body apart
 * (php-fpm): a PARAMS header is kept, and the body after it names the
 * request, as the record whole after a BEGIN_REQUEST would. */
static void fcgi_name_later(struct kp_conn *c, const struct cp_ev_sock *e)
{
	static const uint8_t begin[16] = {1, 1, 0, 1, 0, 8, 0, 0, 0, 1};
	uint8_t buf[sizeof(begin) + CP_SHORT_READ + CP_PAYLOAD_MAX];
	char name[KP_NAME_LEN];
	size_t n = sizeof(begin);

	if (strcmp(c->req.name, "FastCGI request"))
		return; /* named already */
	if (e->payload_len == 8 && e->payload[0] == 1 && e->payload[1] == 4) {
		memcpy(c->req.head, e->payload, 8);
		c->req.nhead = 8;
		return;
	}
	memcpy(buf, begin, sizeof(begin));
	if (c->req.nhead == 8 && c->req.head[1] == 4) {
		memcpy(buf + n, c->req.head, 8);
		n += 8;
	}
	c->req.nhead = 0;
	memcpy(buf + n, e->payload, e->payload_len);
	n += e->payload_len;
	if (proto__request_name(buf, n, name, sizeof(name)) == KP_PROTO_FCGI &&
	    strcmp(name, "FastCGI request"))
		memcpy(c->req.name, name, sizeof(c->req.name));
}

int kp__h2_check(struct kp *kp, uint32_t ci, const uint8_t *p, size_t len)
{
	struct kp_conn *c = &kp->cn[ci];
	bool from_start;

	if (c->h2 || len < 9 || (p[0] && p[0] != 'P') || c->a.proto == IPPROTO_UDP)
		return 0;
	if (!kp__h2_detect(p, len, &from_start))
		return 0;
	if (c->role == KP_ROLE_SERVER && c->phase == KP_PH_WRITING) {
		/* an exchange answered before it (TLS 1.3 tickets): a
		 * request of its own */
		int err = kp__conn_finish_req(kp, ci);

		if (err)
			return err;
		c = &kp->cn[ci];
	}
	return kp__h2_new(c, from_start, p[0] == 'P');
}

/* TLS records read outside the library: a handshake flight, or ciphertext
 * for memory buffers (Node.js). */
static bool tls_record_outside(struct kp *kp, const struct kp_conn *c, const struct cp_ev_sock *e,
			       uint64_t ts, bool data)
{
	const struct kp_proc *p = c->proc != KP_NONE ? &kp->pr[c->proc] : NULL;

	return e->payload_len >= 5 && e->payload[0] >= (data ? 23 : 20) && e->payload[0] <= 23 &&
	       e->payload[1] == 3 && !(e->flags & CP_SOCK_F_TLS) && p && p->tls_since &&
	       p->tls_since <= ts;
}

/* TLS 1.3 after a HelloRetryRequest: a third, encrypted flight, not a
 * request. */
static bool tls13_flight(struct kp *kp, const struct kp_conn *c, const struct cp_ev_sock *e,
			 uint64_t ts)
{
	return tls_record_outside(kp, c, e, ts, true) && !c->tls_seen &&
	       !strcmp(c->last_name, "TLS handshake");
}

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
		err = dq_push(kp, c);
		if (err)
			return err;
		c->phase = KP_PH_IDLE;
	}
	if (c->phase == KP_PH_READING && !c->req.tls_fin) {
		c->req.rx_len += (uint32_t)e->bytes;
		if (c->req.proto == KP_PROTO_FCGI && e->payload_len)
			fcgi_name_later(c, e);
		else if (c->req.nhead && e->payload_len)
			name_after_head(c, e);
		return 0;
	}
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
	c->req.rx_seq = e->tcp_seq;
	c->req.rx_len = (uint32_t)e->bytes;
	/* its plaintext comes in a CP_EV_TLS_READ */
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

	/* a client's first TLS record with plaintext waiting on the thread:
	 * memory buffers */
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
	w->bytes = e->bytes > INT32_MAX ? INT32_MAX : (int32_t)e->bytes;
	w->sent_at = e->flags & CP_SOCK_F_SENT_AT;
	w->name = NULL;
	w->read_after = 0;
	if (c->role == KP_ROLE_SERVER && c->phase != KP_PH_IDLE && c->req.name[0] && !c->h2) {
		if (!c->iname || strcmp(c->iname, c->req.name))
			c->iname = kp__intern_name(kp, c->req.name);
		w->name = c->iname;
	}
	if (bio) {
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
		c->phase = KP_PH_IDLE;
		return 0;
	}
	if (c->phase == KP_PH_READING) {
		c->req.status = proto__http_status(e->payload, e->payload_len);
		c->phase = KP_PH_WRITING;
		c->req.tx_seq = e->tcp_seq;
		c->req.tx_len = 0;
	}
	c->req.tx_len += (uint32_t)e->bytes;
	if (!c->req.status)
		c->req.status = bio_status;
	c->req.end = ts;
	c->req.writer = thread;
	c->req.unsent = e->unsent; /* the last write's is what the client waits for */
	c->req.nagle = kp__nagle_held(e->unsent, e->bytes > 0 ? (uint64_t)e->bytes : 0);
	return 0;
}

/* Ends the requests still open on a server connection. */
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
	if (u64map__get(&kp->fdmap, fk) == ci)
		u64map__del(&kp->fdmap, fk);
	if (kp->cn[ci].fdkey == fk)
		kp->cn[ci].fdkey = 0;
}

/* Its process closed it: recycled unless another process still holds it. */
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

/* A process's exit closes its sockets without a record: connections close
 * and fds name nothing. */
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
		if (u64map__get(&kp->cnmap, addr_hash(c->host, &c->a)) == ci)
			u64map__del(&kp->cnmap, addr_hash(c->host, &c->a));
		if (kp->multi_host && u64map__get(&kp->repmap, rep_key(c->host, &c->a)) == ci)
			u64map__del(&kp->repmap, rep_key(c->host, &c->a));
		if (kp->multi_host && u64map__get(&kp->lepmap, lep_key(c->host, &c->a)) == ci)
			u64map__del(&kp->lepmap, lep_key(c->host, &c->a));
		if (c->a.proto == IPPROTO_UDP &&
		    u64map__get(&kp->uportmap, uport_key(c->host, &c->a)) == ci)
			u64map__del(&kp->uportmap, uport_key(c->host, &c->a));
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
		return 0;
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
		if (c->nwr && !(e->flags & CP_SOCK_F_PEEK))
			c->wr[c->nwr - 1].read_after = ts;
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
		/* a response write is its request's since the call before it */
		int err;

		if (c->role == KP_ROLE_SERVER) {
			struct kp_thread *th = &kp->th[thread];
			uint32_t rc = th->read_conn;

			/* a call from nobody's context whose reply this
			 * response follows is this request's */
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

	/* a Unix-domain peer wakes its reader itself */
	if (e->family != AF_INET && e->family != AF_INET6)
		return 0;
	if (e->protocol == IPPROTO_UDP) {
		int err;

		if (!e->rport) {
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

		/* the write holding the arrived bytes (loopback delivers
		 * inside the send) */
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
	kp__win_fit((void **)&c->wr, &c->wroff, &c->capwr, c->nwr, c->nwr + n, &c->wrpeak,
		    sizeof(*c->wr));
	n = 0;
	while (n + 1 < c->ndr && c->dr[n].ts < before)
		n++;
	kp__win_drop((void **)&c->dr, &c->droff, &c->ndr, n, sizeof(*c->dr));
	kp__win_fit((void **)&c->dr, &c->droff, &c->capdr, c->ndr, c->ndr + n, &c->drpeak,
		    sizeof(*c->dr));
}
