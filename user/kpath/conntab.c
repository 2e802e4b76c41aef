// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Finding connections: by 4-tuple, UDP flow, Unix inode; peers. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kpath_internal.h"

/* bytes a stream moves between two looks at its ends (seq_agree) */
#define KP_SEQ_NEAR (1u << 24)


bool kp__addr_eq(const struct kp_addr *x, const struct kp_addr *y)
{
	return x->family == y->family && x->lport == y->lport && x->rport == y->rport &&
	       x->proto == y->proto && !memcmp(x->raddr, y->raddr, CP_ADDR_LEN) &&
	       (x->proto == IPPROTO_UDP || !memcmp(x->laddr, y->laddr, CP_ADDR_LEN));
}

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* No address (all zero: a wildcard, or not known). */
static bool addr_none(const uint8_t *a)
{
	return !memcmp(a, (uint8_t[CP_ADDR_LEN]){0}, CP_ADDR_LEN);
}

static bool v4_or_none(const uint8_t *a)
{
	return !memcmp(a, v4_prefix, sizeof(v4_prefix)) || addr_none(a);
}

/* A record's 4-tuple as an address; IPv4-mapped addresses as IPv4. */
void kp__addr_of(struct kp_addr *a, uint16_t family, uint16_t lport, uint16_t rport,
		    const uint8_t *laddr, const uint8_t *raddr)
{
	memset(a, 0, sizeof(*a));
	a->family = family;
	a->lport = lport;
	a->rport = rport;
	if (family == AF_INET6 && v4_or_none(laddr) && v4_or_none(raddr) &&
	    (laddr[10] || raddr[10])) {
		a->family = AF_INET;
		memcpy(a->laddr, laddr + 12, 4);
		memcpy(a->raddr, raddr + 12, 4);
		return;
	}
	memcpy(a->laddr, laddr, CP_ADDR_LEN);
	memcpy(a->raddr, raddr, CP_ADDR_LEN);
}

static uint32_t *conn_hint(struct kp *kp, const struct kp_addr *a)
{
	return &kp->cn_hint[(a->lport * 31u + a->rport) % KP_CN_HINTS];
}

static inline uint32_t conn_find(struct kp *kp, uint32_t host, const struct kp_addr *a,
				 uint64_t *key, uint32_t *other)
{
	uint32_t *hint = conn_hint(kp, a), i = *hint;

	/* in use (recycled slots have family 0) and not displaced */
	if (a->family && i < kp->ncn && kp->cn[i].host == host && !kp->cn[i].displaced &&
	    kp__addr_eq(&kp->cn[i].a, a))
		return i;
	*key = addr_hash(host, a);
	i = u64map__get(&kp->cnmap, *key);
	if (i != KP_NONE && kp->cn[i].host == host && kp__addr_eq(&kp->cn[i].a, a)) {
		*hint = i;
		return i;
	}
	*other = i;
	return KP_NONE;
}

static uint32_t conn_new(struct kp *kp, uint32_t host, const struct kp_addr *a, uint64_t key,
			 uint32_t other)
{
	struct kp_conn *c;
	uint32_t i;

	if (other != KP_NONE)
		kp->cn[other].displaced = 1; /* the put below takes its key */
	if (kp->nfreecn) {
		i = kp->freecn[--kp->nfreecn];
	} else {
		if (kp__grow((void **)&kp->cn, &kp->capcn, kp->ncn + 1, sizeof(*kp->cn)))
			return KP_NONE;
		i = kp->ncn;
	}
	c = &kp->cn[i];
	memset(c, 0, sizeof(*c));
	c->host = host;
	c->a = *a;
	c->proc = c->last_proc = KP_NONE;
	c->peer = KP_NONE;
	c->req.reader = c->req.writer = KP_NONE;
	if (u64map__put(&kp->cnmap, key, i)) {
		c->a.family = 0; /* free, as kp__conn's hint check reads it */
		if (i < kp->ncn)
			kp->freecn[kp->nfreecn++] = i; /* still free */
		return KP_NONE;
	}
	if (i == kp->ncn)
		kp->ncn++;
	*conn_hint(kp, a) = i;
	if (kp->multi_host && a->proto != IPPROTO_UDP && a->family != AF_UNIX) {
		/* hints for nat_peer: no loss if not taken */
		u64map__put(&kp->repmap, rep_key(host, a), i);
		u64map__put(&kp->lepmap, lep_key(host, a), i);
	}
	return i;
}

uint32_t kp__conn(struct kp *kp, uint32_t host, const struct kp_addr *a)
{
	uint32_t other = KP_NONE, i;
	uint64_t key = 0;

	i = conn_find(kp, host, a, &key, &other);
	return i != KP_NONE ? i : conn_new(kp, host, a, key, other);
}




static uint32_t uport_get(struct kp *kp, uint32_t host, const struct kp_addr *a)
{
	uint32_t i = u64map__get(&kp->uportmap, uport_key(host, a));
	const struct kp_conn *c = i < kp->ncn ? &kp->cn[i] : NULL;

	if (!c || c->host != host || c->a.proto != IPPROTO_UDP || c->a.family != a->family ||
	    c->a.lport != a->lport || c->a.rport != a->rport)
		return KP_NONE;
	return i;
}

/* A UDP flow, keyed by ports and remote address, found or begun. */
uint32_t kp__udp_flow(struct kp *kp, uint32_t host, uint16_t family, uint16_t lport,
			 uint16_t rport, const uint8_t *laddr, const uint8_t *raddr, uint64_t ts,
			 bool inbound)
{
	uint32_t ci, other = KP_NONE;
	struct kp_addr a;
	struct kp_conn *c;
	uint64_t key = 0;

	kp__addr_of(&a, family, lport, rport, laddr, raddr);
	a.proto = IPPROTO_UDP;
	ci = conn_find(kp, host, &a, &key, &other);
	if (ci == KP_NONE && inbound) {
		ci = uport_get(kp, host, &a);
		if (ci != KP_NONE && kp->cn[ci].role != KP_ROLE_CLIENT)
			ci = KP_NONE;
	}
	if (ci == KP_NONE) {
		ci = conn_new(kp, host, &a, key, other);
		if (ci == KP_NONE || u64map__put(&kp->uportmap, uport_key(host, &a), ci))
			return KP_NONE;
	}
	c = &kp->cn[ci];
	if (addr_none(c->a.laddr) && !addr_none(a.laddr) && a.family == c->a.family) {
		memcpy(c->a.laddr, a.laddr, CP_ADDR_LEN);
		c->lstr[0] = '\0';
	}
	if (!c->closed_at && kp__conn_closed(kp, ci, ts))
		return KP_NONE;
	return ci;
}

static struct kp_udpq *udpq(struct kp *kp, uint32_t host, uint16_t family, uint16_t port, bool make)
{
	uint64_t key = (uint64_t)host << 32 | (uint64_t)family << 16 | port;
	uint32_t i = u64map__get(&kp->uqmap, key);

	if (i != KP_NONE)
		return &kp->uq[i];
	if (!make || kp__grow((void **)&kp->uq, &kp->capuq, kp->nuq + 1, sizeof(*kp->uq)) ||
	    u64map__put(&kp->uqmap, key, kp->nuq))
		return NULL;
	memset(&kp->uq[kp->nuq], 0, sizeof(kp->uq[kp->nuq]));
	return &kp->uq[kp->nuq++];
}

#define KP_UDPQ_MAX 4096

int kp__udpq_push(struct kp *kp, uint32_t host, uint16_t family, uint16_t port, uint64_t ts,
		     uint32_t conn)
{
	struct kp_udpq *q = udpq(kp, host, family, port, true);

	if (!q)
		return -ENOMEM;
	if (q->n >= KP_UDPQ_MAX)
		kp__win_drop((void **)&q->e, &q->off, &q->n, 1, sizeof(*q->e));
	if (kp__win_more((void **)&q->e, &q->off, &q->cap, q->n, sizeof(*q->e)))
		return -ENOMEM;
	q->e[q->n].ts = ts;
	q->e[q->n].conn = conn;
	q->n++;
	return 0;
}

static uint32_t udpq_pop(struct kp *kp, uint32_t host, uint16_t family, uint16_t port, uint64_t ts,
			 bool take)
{
	struct kp_udpq *q = udpq(kp, host, family, port, false);
	uint32_t ci;

	if (!q || !q->n || q->e[0].ts > ts)
		return KP_NONE;
	ci = q->e[0].conn;
	if (take)
		kp__win_drop((void **)&q->e, &q->off, &q->n, 1, sizeof(*q->e));
	/* a flow recycled since (idle for KP_KEEP_NS) is not this one */
	if (ci >= kp->ncn || kp->cn[ci].host != host || kp->cn[ci].a.proto != IPPROTO_UDP ||
	    kp->cn[ci].a.lport != port)
		return KP_NONE;
	return ci;
}


#define KP_UDPQ_SCAN 16

/* A read that knows its sender takes the flow's oldest datagram from the
 * socket's queue. */
static int udpq_take(struct kp *kp, uint32_t host, const struct cp_ev_sock *e, uint64_t ts,
		     uint32_t ci)
{
	struct kp_udpq *q = udpq(kp, host, e->family, e->lport, false);
	uint32_t i, n;

	if (!q || (e->flags & CP_SOCK_F_PEEK))
		return 0; /* a peek leaves its datagram for the read */
	while (q->n && q->e[0].ts + KP_KEEP_NS < ts)
		kp__win_drop((void **)&q->e, &q->off, &q->n, 1, sizeof(*q->e));
	n = q->n < KP_UDPQ_SCAN ? q->n : KP_UDPQ_SCAN;
	for (i = 0; i < n && q->e[i].ts <= ts; i++) {
		struct kp_uqent got = q->e[i];

		if (got.conn != ci && got.conn != KP_NONE)
			continue;
		memmove(&q->e[1], &q->e[0], i * sizeof(*q->e));
		kp__win_drop((void **)&q->e, &q->off, &q->n, 1, sizeof(*q->e));
		return got.conn == KP_NONE ? kp__conn_arrival(kp, ci, got.ts, 0) : 0;
	}
	return 0;
}

/* The flow of a datagram call: by sender, datagram taken, or destination. */
uint32_t kp__udp_conn(struct kp *kp, uint32_t host, const struct cp_ev_sock *e, uint64_t ts,
			 bool read)
{
	uint32_t ci;

	if (e->rport) {
		ci =
		    kp__udp_flow(kp, host, e->family, e->lport, e->rport, e->laddr, e->raddr, ts, read);
		if (read && ci != KP_NONE && udpq_take(kp, host, e, ts, ci))
			return KP_NONE;
		return ci;
	}
	if (!read)
		return KP_NONE;
	/* an older recorder's read, or one that asked for no address */
	ci = udpq_pop(kp, host, e->family, e->lport, ts, !(e->flags & CP_SOCK_F_PEEK));
	if (ci == KP_NONE)
		kp->udp_unknown++;
	return ci;
}

static uint64_t unix_ino(const uint8_t *a)
{
	uint64_t v;

	memcpy(&v, a, sizeof(v));
	return v;
}

/* A Unix-domain socket: by inode since ABI 5, else by descriptor. */
static uint32_t unix_conn(struct kp *kp, uint32_t host, const struct cp_ev_sock *e)
{
	uint64_t fk = fd_key(host, e->h.pid, e->fd), ino = unix_ino(e->laddr);
	uint32_t i = u64map__get(&kp->fdmap, fk);
	bool begins =
	    e->call == CP_SOCK_ACCEPT || e->call == CP_SOCK_ACCEPT4 || e->call == CP_SOCK_CONNECT;
	struct kp_addr a;

	if (i != KP_NONE && (kp->cn[i].a.family != AF_UNIX || kp->cn[i].host != host))
		i = KP_NONE;
	memset(&a, 0, sizeof(a));
	a.family = AF_UNIX;
	if (ino) {
		if (i == KP_NONE || unix_ino(kp->cn[i].a.laddr) != ino) {
			memcpy(a.laddr, &ino, sizeof(ino));
			i = kp__conn(kp, host, &a);
			if (i != KP_NONE && e->fd >= 0 && !u64map__put(&kp->fdmap, fk, i))
				kp->cn[i].fdkey = fk;
		}
		if (i != KP_NONE && !kp->cn[i].unix_peer)
			kp->cn[i].unix_peer = unix_ino(e->raddr);
		return i;
	}
	if (e->fd < 0 || (i != KP_NONE && !begins) || (i == KP_NONE && e->call == CP_SOCK_CLOSE))
		return i;
	kp->unix_serial++;
	memcpy(a.laddr, &kp->unix_serial, sizeof(kp->unix_serial));
	a.laddr[CP_ADDR_LEN - 1] = 1; /* never an inode's key */
	i = kp__conn(kp, host, &a);
	if (i != KP_NONE && !u64map__put(&kp->fdmap, fk, i))
		kp->cn[i].fdkey = fk;
	return i;
}

static uint32_t unix_peer(struct kp *kp, uint32_t conn)
{
	struct kp_conn *c = &kp->cn[conn];
	uint32_t other = KP_NONE, i;
	struct kp_addr r;
	uint64_t key = 0;

	if (!c->unix_peer)
		return KP_NONE;
	memset(&r, 0, sizeof(r));
	r.family = AF_UNIX;
	memcpy(r.laddr, &c->unix_peer, sizeof(c->unix_peer));
	i = conn_find(kp, c->host, &r, &key, &other);
	if (i == KP_NONE || i == conn || kp->cn[i].proc == KP_NONE)
		return KP_NONE;
	c->peer = i;
	kp->cn[i].peer = conn;
	return i;
}

uint32_t kp__conn_by_sock(struct kp *kp, uint32_t host, const struct cp_ev_sock *e)
{
	struct kp_addr a;
	uint32_t i;

	if (e->family == AF_UNIX)
		return unix_conn(kp, host, e);
	if ((e->family != AF_INET && e->family != AF_INET6) || (!e->lport && !e->rport))
		return u64map__get(&kp->fdmap, fd_key(host, e->h.pid, e->fd));
	/* the fd usually names the conn: checked against the address, no
	 * hashing */
	if (e->fd >= 0) {
		uint64_t fk = fd_key(host, e->h.pid, e->fd);
		struct kp_conn *c;

		i = u64map__get(&kp->fdmap, fk);
		c = i != KP_NONE ? &kp->cn[i] : NULL;
		if (c && c->host == host && !c->displaced && c->a.family == e->family &&
		    c->a.lport == e->lport && c->a.rport == e->rport &&
		    !memcmp(c->a.laddr, e->laddr, CP_ADDR_LEN) &&
		    !memcmp(c->a.raddr, e->raddr, CP_ADDR_LEN)) {
			c->fdkey = fk;
			return i;
		}
	}
	kp__addr_of(&a, e->family, e->lport, e->rport, e->laddr, e->raddr);
	i = kp__conn(kp, host, &a);
	if (i != KP_NONE && e->fd >= 0 &&
	    !u64map__put(&kp->fdmap, fd_key(host, e->h.pid, e->fd), i))
		kp->cn[i].fdkey = fd_key(host, e->h.pid, e->fd);
	return i;
}

/* Whether a and b can be one TCP stream's ends: sequence numbers near. */
static bool seq_near(uint32_t x, uint32_t y)
{
	return (uint32_t)(x - y + KP_SEQ_NEAR) < 2 * KP_SEQ_NEAR;
}

static bool seq_agree(const struct kp_conn *a, const struct kp_conn *b)
{
	for (int dir = 0; dir < 2; dir++) {
		const struct kp_conn *w = dir ? b : a, *r = dir ? a : b;

		if (w->nwr && r->ndr && w->wr[w->nwr - 1].seq &&
		    !seq_near(w->wr[w->nwr - 1].seq, r->dr[r->ndr - 1].rcv_nxt))
			return false;
	}
	return true;
}

/* Behind destination NAT: the other host's conn whose local end is our
 * remote end, sequence numbers agreeing. */
static uint32_t nat_peer(struct kp *kp, uint32_t conn)
{
	struct kp_conn *c = &kp->cn[conn];
	struct kp_addr me;

	memset(&me, 0, sizeof(me));
	me.family = c->a.family;
	for (int side = 0; side < 2; side++) {
		const struct u64map *m = side ? &kp->lepmap : &kp->repmap;

		me.rport = side ? c->a.rport : c->a.lport;
		memcpy(me.raddr, side ? c->a.raddr : c->a.laddr, CP_ADDR_LEN);
		for (uint32_t k = 0; k < kp->nsrc; k++) {
			uint32_t host = kp->src[k].host, i;
			struct kp_conn *s;

			if (host == c->host)
				continue;
			i = u64map__get(m, rep_key(host, &me));
			if (i == KP_NONE || i == conn)
				continue;
			s = &kp->cn[i];
			if (s->host != host || s->a.family != me.family ||
			    (side ? s->a.lport : s->a.rport) != me.rport ||
			    memcmp(side ? s->a.laddr : s->a.raddr, me.raddr, CP_ADDR_LEN) ||
			    s->proc == KP_NONE || (s->peer != KP_NONE && s->peer != conn) ||
			    !seq_agree(c, s))
				continue;
			c->peer = i;
			s->peer = conn;
			return i;
		}
	}
	return KP_NONE;
}

uint32_t kp__conn_peer(struct kp *kp, uint32_t conn)
{
	struct kp_conn *c = &kp->cn[conn];
	struct kp_addr r;

	if (c->peer != KP_NONE)
		return c->peer;
	if (c->a.family == AF_UNIX)
		return unix_peer(kp, conn);
	memset(&r, 0, sizeof(r));
	r.family = c->a.family;
	r.lport = c->a.rport;
	r.rport = c->a.lport;
	r.proto = c->a.proto;
	memcpy(r.laddr, c->a.raddr, CP_ADDR_LEN);
	memcpy(r.raddr, c->a.laddr, CP_ADDR_LEN);
	/* the same host first (loopback), then the others */
	for (uint32_t k = 0; k <= kp->nsrc; k++) {
		uint32_t host = k == 0 ? c->host : kp->src[k - 1].host;
		uint32_t i;

		if (k && host == c->host)
			continue;
		i = u64map__get(&kp->cnmap, addr_hash(host, &r));
		if ((i == KP_NONE || !kp__addr_eq(&kp->cn[i].a, &r)) && r.proto == IPPROTO_UDP)
			i = uport_get(kp, host, &r);
		if (i != KP_NONE && i != conn && kp->cn[i].host == host &&
		    (kp__addr_eq(&kp->cn[i].a, &r) || r.proto == IPPROTO_UDP) &&
		    kp->cn[i].proc != KP_NONE) {
			c->peer = i;
			kp->cn[i].peer = conn;
			return i;
		}
	}
	if (kp->multi_host && r.proto != IPPROTO_UDP && r.family != AF_UNIX)
		return nat_peer(kp, conn);
	return KP_NONE;
}

bool kp__conn_listening(const struct kp_conn *c)
{
	return c->a.family != AF_UNIX && !c->a.rport && addr_none(c->a.raddr);
}

const char *kp__conn_addr(struct kp_conn *c, bool local)
{
	char ip[INET6_ADDRSTRLEN] = "?", *str = local ? c->lstr : c->rstr;
	const uint8_t *addr = local ? c->a.laddr : c->a.raddr;
	unsigned int port = local ? c->a.lport : c->a.rport;

	if (!str[0]) {
		if (c->a.family == AF_UNIX) {
			snprintf(str, KP_ADDR_STR_LEN, "unix socket"); /* no address recorded */
		} else if (c->a.family == AF_INET6) {
			inet_ntop(AF_INET6, addr, ip, sizeof(ip));
			snprintf(str, KP_ADDR_STR_LEN, "[%s]:%u", ip, port);
		} else {
			inet_ntop(AF_INET, addr, ip, sizeof(ip));
			snprintf(str, KP_ADDR_STR_LEN, "%s:%u", ip, port);
		}
		/* a listening socket has no peer: its data is a new connection */
		if (c->a.family != AF_UNIX && !local && !port && addr_none(addr))
			snprintf(str, KP_ADDR_STR_LEN, "new connection on %s",
				 kp__conn_addr(c, true));
	}
	return str;
}

void kp__conn_addr_str(struct kp_conn *c, bool local, char *buf, size_t len)
{
	snprintf(buf, len, "%s", kp__conn_addr(c, local));
}

void kp__conn_peer_str(struct kp_conn *c, char *buf, size_t len)
{
	kp__conn_addr_str(c, false, buf, len);
}

/* Where port is in p's listening ports (sure ones first), or -1. */
