// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* TLS on memory buffers (Node.js, Go): the library's plaintext calls matched to
 * the socket calls of their thread that carry them. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kpath_internal.h"

/* A socket call and its TLS call on memory buffers are this close. */
static bool bio_near(uint64_t then, uint64_t now)
{
	return then <= now && now - then < KP_TLS_BIO_NS;
}

/* Drops (counted) TLS writes too old for the socket write at ts. */
static void bio_wr_expire(struct kp *kp, struct kp_bio_wr *q, uint64_t ts)
{
	if (q->n && !bio_near(q->ts, ts)) {
		kp->bio_wr_unsent += q->nsure;
		q->n = q->len = q->nsure = 0;
	}
}

/* Keeps a TLS write's plaintext in q for the socket write that carries it. */
static int bio_wr_keep(struct kp *kp, struct kp_bio_wr *q, const struct cp_ev_tls_read *e,
		       uint64_t ts)
{
	uint32_t size = e->h.size;

	bio_wr_expire(kp, q, ts);
	if (q->len + size > KP_BIO_WR_MAX) {
		kp->bio_wr_unsent++;
		return 0;
	}
	if (q->len + size > q->cap) {
		uint32_t cap = q->cap ? q->cap : 4096;
		uint8_t *b;

		while (cap < q->len + size)
			cap *= 2;
		b = realloc(q->buf, cap);
		if (!b)
			return -ENOMEM;
		q->buf = b;
		q->cap = cap;
	}
	memcpy(q->buf + q->len, e, size);
	if (!q->n)
		q->ts = ts;
	q->len += size;
	q->n++;
	q->nsure += e->call != CP_TLS_GO_WRITE;
	return 0;
}

uint64_t kp__tls_conn_key(uint32_t host, const struct cp_ev_tls_read *e)
{
	uint64_t id = cp_tls_id(e);

	return id ? (id << 16 | host) ^ (uint64_t)e->h.pid * 0x9e3779b97f4a7c15ull : 0;
}

/* The TLS writes a socket write carries: its connection's, else its
 * thread's. */
struct kp_bio_wr *kp__bio_wr_for(struct kp *kp, uint32_t ci, uint32_t thread, uint64_t ts)
{
	struct kp_bio_wr *c = &kp->cn[ci].bw, *t = &kp->th[thread].bw;
	const struct cp_ev_tls_read *r = (const void *)t->buf;
	uint64_t key = kp->cn[ci].tls_key, theirs;

	bio_wr_expire(kp, c, ts);
	bio_wr_expire(kp, t, ts);
	if (c->n)
		return c;
	/* the thread's, unless another library connection's (Go's HTTP/2
	 * server) */
	if (!t->n)
		return NULL;
	theirs = kp__tls_conn_key(kp->cn[ci].host, r);
	return key && theirs && theirs != key ? NULL : t;
}

static uint32_t bio_known(struct kp *kp, uint32_t host, const struct cp_ev_tls_read *e,
			  uint64_t *key)
{
	uint32_t ci;

	*key = kp__tls_conn_key(host, e);
	ci = *key ? u64map__get(&kp->tlsmap, *key) : KP_NONE;
	if (ci != KP_NONE && (kp->cn[ci].tls_key != *key || kp->cn[ci].closed_at))
		return KP_NONE;
	return ci;
}

uint32_t kp__bio_learn(struct kp *kp, uint32_t ci, uint64_t key)
{
	kp->cn[ci].tls_bio = 1;
	if (key && kp->cn[ci].tls_key != key) {
		if (u64map__put(&kp->tlsmap, key, ci))
			return KP_NONE; /* out of memory: as if unknown */
		kp->cn[ci].tls_key = key;
	}
	return ci;
}

/* The connection of a TLS read on memory buffers: the thread's last socket
 * read's, unless its tls_id names another open connection (Go moves
 * goroutines between threads). */
static uint32_t bio_conn(struct kp *kp, uint32_t host, const struct cp_ev_tls_read *e,
			 uint32_t thread, uint64_t ts)
{
	const struct kp_thread *t = &kp->th[thread];
	uint64_t key;
	uint32_t known = bio_known(kp, host, e, &key), ci;

	ci = t->read_conn != KP_NONE && bio_near(t->read_ts, ts) ? t->read_conn : KP_NONE;
	if (known != KP_NONE && (ci == KP_NONE || kp->cn[ci].tls_key))
		return known;
	return ci == KP_NONE ? ci : kp__bio_learn(kp, ci, key);
}

int kp__conn_tls_read(struct kp *kp, uint32_t host, const struct cp_ev_tls_read *e, uint64_t ts)
{
	uint8_t buf[CP_SHORT_READ + CP_PAYLOAD_MAX];
	const uint8_t *p;
	struct kp_addr a;
	size_t n;
	struct kp_conn *c;
	enum kp_proto pr;
	uint32_t ci, thread;
	int err;

	thread = kp__thread(kp, host, (int32_t)e->h.pid, (int32_t)e->h.tid);
	if (thread == KP_NONE)
		return -ENOMEM;
	if (cp_tls_call_writes(e->call)) {
		uint64_t key;

		ci = bio_known(kp, host, e, &key);
		if (ci != KP_NONE && kp->cn[ci].peer_eof)
			return 0; /* to a peer gone (Go records a write before it fails) */
		return bio_wr_keep(kp, ci != KP_NONE ? &kp->cn[ci].bw : &kp->th[thread].bw, e, ts);
	}
	/* the connection of the socket read inside it: known by then */
	if ((e->family == AF_INET || e->family == AF_INET6) && (e->lport || e->rport)) {
		kp__addr_of(&a, e->family, e->lport, e->rport, e->laddr, e->raddr);
		ci = u64map__get(&kp->cnmap, addr_hash(host, &a));
		if (ci != KP_NONE && (kp->cn[ci].host != host || !kp__addr_eq(&kp->cn[ci].a, &a)))
			ci = KP_NONE;
		/* Go's writes and buffered reads are this connection's too */
		if (ci != KP_NONE && e->call == CP_TLS_GO_READ)
			ci = kp__bio_learn(kp, ci, kp__tls_conn_key(host, e));
	} else if (e->fd < 0 && !e->family) {
		ci = bio_conn(kp, host, e, thread, ts);
		if (ci == KP_NONE)
			kp->bio_rd_lost++;
	} else {
		ci = u64map__get(&kp->fdmap, fd_key(host, e->h.pid, e->fd));
	}
	if (ci == KP_NONE)
		return 0;
	c = &kp->cn[ci];
	/* HTTP/2 over TLS: the plaintext is the connection's stream of frames */
	err = kp__h2_check(kp, ci, e->payload, e->payload_len);
	if (err)
		return err;
	c = &kp->cn[ci];
	if (c->h2)
		return kp__h2_tls_read(kp, ci, e, thread, ts);
	/* nginx reads ahead: the client's last flight and its request in one
	 * read */
	if (c->role == KP_ROLE_SERVER && c->phase == KP_PH_WRITING && c->req.tls_fin &&
	    c->req.tls_wait && c->req.reader == thread && !c->tls_bio) {
		c->phase = KP_PH_READING;
		c->req.status = 0;
	}
	if (c->role != KP_ROLE_SERVER || c->phase != KP_PH_READING || !c->req.tls_wait ||
	    (c->req.reader != thread && !c->tls_bio)) /* Go resumes a reader anywhere */
		return 0;
	c->req.tls_fin = false; /* plaintext: a request, whatever read began it */
	p = e->payload;
	n = e->payload_len;
	if (c->req.nhead) { /* a short plaintext before it named nothing */
		memcpy(buf, c->req.head, c->req.nhead);
		memcpy(buf + c->req.nhead, p, n);
		n += c->req.nhead;
		p = buf;
		c->req.nhead = 0;
	}
	pr = proto__request_name(p, n, c->req.name, sizeof(c->req.name));
	c->req.proto = (uint8_t)pr;
	if (pr == KP_PROTO_HTTP)
		proto__http_meta(p, n, &c->req.meta, kp->want != NULL);
	if (!c->req.name[0] && n <= CP_SHORT_READ && e->bytes <= CP_SHORT_READ) {
		/* a first byte alone (Go's HTTP/1 server): named with the
		 * next read's */
		memcpy(c->req.head, p, n);
		c->req.nhead = (uint8_t)n;
		snprintf(c->req.name, sizeof(c->req.name), "request");
		return 0;
	}
	c->req.tls_wait = false;
	if (!c->req.name[0])
		snprintf(c->req.name, sizeof(c->req.name), "request");
	return kp__conn_pipelined(kp, c, p, n, e->bytes, pr);
}

