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

/*
 * Addresses are built field by field just before they are looked up: loads
 * that span several of those stores wait until they retire (no store
 * forwarding), which made hashing an address and comparing it with memcmp
 * the costliest lines of the per-event path. So the header word is made
 * from its fields (the value the struct's bytes have on a little-endian
 * machine, padding 0), and the addresses are compared and read as the
 * 16-byte arrays they were copied as.
 */
static uint64_t addr_hash(uint32_t host, const struct kp_addr *a)
{
	uint64_t w[1 + 2 * CP_ADDR_LEN / 8], h = 0x9e3779b97f4a7c15ull ^ host;

	_Static_assert(sizeof(*a) == sizeof(w), "kp_addr hashes as whole words");
	w[0] = (uint64_t)a->family | (uint64_t)a->lport << 16 | (uint64_t)a->rport << 32 |
	       (uint64_t)a->proto << 48;
	memcpy(&w[1], a->laddr, CP_ADDR_LEN);
	memcpy(&w[1 + CP_ADDR_LEN / 8], a->raddr, CP_ADDR_LEN);
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		/* a UDP flow's key is its ports and remote address: its own
		 * (struct kp_addr) an unconnected socket does not know */
		if (a->proto == IPPROTO_UDP && i && i <= CP_ADDR_LEN / 8)
			continue;
		h ^= w[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h;
}

static bool addr_eq(const struct kp_addr *x, const struct kp_addr *y)
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

/* An IPv6 address that is an IPv4 one (::ffff:a.b.c.d), or none (::). */
static bool v4_or_none(const uint8_t *a)
{
	return !memcmp(a, v4_prefix, sizeof(v4_prefix)) || addr_none(a);
}

/*
 * A record's 4-tuple as an address (padding 0, as addr_hash reads it). A
 * dual-stack socket (AF_INET6) talking IPv4 — Java's, for one — sees
 * IPv4-mapped addresses where its peer's AF_INET socket sees the IPv4
 * ones: such a tuple is the IPv4 one, so the two ends match.
 */
static void addr_of(struct kp_addr *a, uint16_t family, uint16_t lport, uint16_t rport,
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

/* The conn of a's host and address, or KP_NONE; then key is a's and other
 * the conn cnmap names for it (a hash collision), or KP_NONE. */
static inline uint32_t conn_find(struct kp *kp, uint32_t host, const struct kp_addr *a,
				 uint64_t *key, uint32_t *other)
{
	uint32_t *hint = conn_hint(kp, a), i = *hint;

	/* a conn with a's host and address, in use (a recycled slot's family
	 * is 0) and not displaced, is the one cnmap names for a */
	if (a->family && i < kp->ncn && kp->cn[i].host == host && !kp->cn[i].displaced &&
	    addr_eq(&kp->cn[i].a, a))
		return i;
	*key = addr_hash(host, a);
	i = kp_map__get(&kp->cnmap, *key);
	if (i != KP_NONE && kp->cn[i].host == host && addr_eq(&kp->cn[i].a, a)) {
		*hint = i;
		return i;
	}
	*other = i;
	return KP_NONE;
}

/* A new conn for a, after conn_find missed it (key, other: its answers). */
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
	if (kp_map__put(&kp->cnmap, key, i)) {
		c->a.family = 0; /* free, as kp__conn's hint check reads it */
		if (i < kp->ncn)
			kp->freecn[kp->nfreecn++] = i; /* still free */
		return KP_NONE;
	}
	if (i == kp->ncn)
		kp->ncn++;
	*conn_hint(kp, a) = i;
	return i;
}

uint32_t kp__conn(struct kp *kp, uint32_t host, const struct kp_addr *a)
{
	uint32_t other = KP_NONE, i;
	uint64_t key = 0;

	i = conn_find(kp, host, a, &key, &other);
	return i != KP_NONE ? i : conn_new(kp, host, a, key, other);
}

static uint64_t fd_key(uint32_t host, uint32_t pid, int32_t fd)
{
	return (uint64_t)host << 56 ^ (uint64_t)pid << 24 ^ ((uint32_t)fd & 0xffffff);
}

static int conn_closed(struct kp *kp, uint32_t ci, uint64_t ts);

/* A UDP flow's key in uportmap: host, family and ports. */
static uint64_t uport_key(uint32_t host, const struct kp_addr *a)
{
	return ((uint64_t)host << 48 | (uint64_t)a->family << 32 | (uint64_t)a->lport << 16 |
		a->rport) *
	       0x9e3779b97f4a7c15ull;
}

/* The flow uportmap names for a's host and ports, if it is still one. */
static uint32_t uport_get(struct kp *kp, uint32_t host, const struct kp_addr *a)
{
	uint32_t i = kp_map__get(&kp->uportmap, uport_key(host, a));
	const struct kp_conn *c = i < kp->ncn ? &kp->cn[i] : NULL;

	if (!c || c->host != host || c->a.proto != IPPROTO_UDP || c->a.family != a->family ||
	    c->a.lport != a->lport || c->a.rport != a->rport)
		return KP_NONE;
	return i;
}

/*
 * A UDP flow: found, or begun and listed for recycling once idle. inbound:
 * a datagram that came from raddr. Its key is its ports and the remote
 * address (two hosts' clients may pick the same port); a datagram from
 * another address than a client's flow sent to (a server that answers
 * from another of its addresses) is that flow's reply all the same. The
 * local address, which the socket's own says only when bound to one, is
 * the flow's once a datagram or a bound socket says it.
 */
static uint32_t udp_flow(struct kp *kp, uint32_t host, uint16_t family, uint16_t lport,
			 uint16_t rport, const uint8_t *laddr, const uint8_t *raddr, uint64_t ts,
			 bool inbound)
{
	uint32_t ci, other = KP_NONE;
	struct kp_addr a;
	struct kp_conn *c;
	uint64_t key = 0;

	addr_of(&a, family, lport, rport, laddr, raddr);
	a.proto = IPPROTO_UDP;
	ci = conn_find(kp, host, &a, &key, &other);
	if (ci == KP_NONE && inbound) {
		ci = uport_get(kp, host, &a);
		if (ci != KP_NONE && kp->cn[ci].role != KP_ROLE_CLIENT)
			ci = KP_NONE;
	}
	if (ci == KP_NONE) {
		ci = conn_new(kp, host, &a, key, other);
		if (ci == KP_NONE || kp_map__put(&kp->uportmap, uport_key(host, &a), ci))
			return KP_NONE;
	}
	c = &kp->cn[ci];
	if (addr_none(c->a.laddr) && !addr_none(a.laddr) && a.family == c->a.family) {
		memcpy(c->a.laddr, a.laddr, CP_ADDR_LEN);
		c->lstr[0] = '\0';
	}
	if (!c->closed_at && conn_closed(kp, ci, ts))
		return KP_NONE;
	return ci;
}

static struct kp_udpq *udpq(struct kp *kp, uint32_t host, uint16_t family, uint16_t port, bool make)
{
	uint64_t key = (uint64_t)host << 32 | (uint64_t)family << 16 | port;
	uint32_t i = kp_map__get(&kp->uqmap, key);

	if (i != KP_NONE)
		return &kp->uq[i];
	if (!make || kp__grow((void **)&kp->uq, &kp->capuq, kp->nuq + 1, sizeof(*kp->uq)) ||
	    kp_map__put(&kp->uqmap, key, kp->nuq))
		return NULL;
	memset(&kp->uq[kp->nuq], 0, sizeof(kp->uq[kp->nuq]));
	return &kp->uq[kp->nuq++];
}

/* A socket holds this many unread datagrams at most (more are ones it
 * read before the recording or outside the calls seen). */
#define KP_UDPQ_MAX 4096

static int udpq_push(struct kp *kp, uint32_t host, uint16_t family, uint16_t port, uint64_t ts,
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

/* The flow of the oldest datagram the socket had not read by ts, taken
 * (left in the queue by a peek). */
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

/* An arrival on conn ci at ts, in its time order (one learnt late, from
 * the read that took it, may be older than the last). */
static int conn_arrival(struct kp *kp, uint32_t ci, uint64_t ts, uint32_t rcv_nxt)
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

/* Looked at from the head by a read that knows its flow: past this many
 * other flows' datagrams, its own is not queued. */
#define KP_UDPQ_SCAN 16

/*
 * A read that knows its datagram's flow (its record says the sender) takes
 * that datagram from the socket's queue: the oldest of the flow's, or of
 * those whose sender sk_data_ready could not see (the reader had already
 * moved the queue), which becomes the flow's arrival. Datagrams left
 * behind for longer than KP_KEEP_NS were read unseen: dropped.
 */
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
		return got.conn == KP_NONE ? conn_arrival(kp, ci, got.ts, 0) : 0;
	}
	return 0;
}

/* The flow of a datagram call: a read's from its record's sender (a
 * connected socket's peer, or the datagram's as udp_recvmsg() told the
 * recorder), else from the datagram it took; a write's from where it sent. */
static uint32_t udp_conn(struct kp *kp, uint32_t host, const struct cp_ev_sock *e, uint64_t ts,
			 bool read)
{
	uint32_t ci;

	if (e->rport) {
		ci =
		    udp_flow(kp, host, e->family, e->lport, e->rport, e->laddr, e->raddr, ts, read);
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

/*
 * A Unix-domain socket has no 4-tuple. Recorders since ABI 5 give its
 * inode (and its peer's): the key, as the kernel socket is the
 * connection, whatever descriptor names it. Before, it is known by its
 * descriptor: accept and connect begin a connection of its own, with a
 * serial number for an address; other calls find the one on the fd (not
 * an Internet connection the fd named before), or begin one.
 */
static uint32_t unix_conn(struct kp *kp, uint32_t host, const struct cp_ev_sock *e)
{
	uint64_t fk = fd_key(host, e->h.pid, e->fd), ino = unix_ino(e->laddr);
	uint32_t i = kp_map__get(&kp->fdmap, fk);
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
			if (i != KP_NONE && e->fd >= 0 && !kp_map__put(&kp->fdmap, fk, i))
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
	if (i != KP_NONE && !kp_map__put(&kp->fdmap, fk, i))
		kp->cn[i].fdkey = fk;
	return i;
}

/* The traced peer of a Unix-domain connection: the socket its peer inode
 * names, on its host */
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
		return kp_map__get(&kp->fdmap, fd_key(host, e->h.pid, e->fd));
	/*
	 * Most calls are on a connection its fd already names: checked against
	 * the record's address, that conn is the one the address lookup below
	 * would find (each address has one conn in cnmap, unless a collision
	 * displaced it), without hashing and finding the address (2% of
	 * report, most of it cache misses in cnmap).
	 */
	if (e->fd >= 0) {
		uint64_t fk = fd_key(host, e->h.pid, e->fd);
		struct kp_conn *c;

		i = kp_map__get(&kp->fdmap, fk);
		c = i != KP_NONE ? &kp->cn[i] : NULL;
		if (c && c->host == host && !c->displaced && c->a.family == e->family &&
		    c->a.lport == e->lport && c->a.rport == e->rport &&
		    !memcmp(c->a.laddr, e->laddr, CP_ADDR_LEN) &&
		    !memcmp(c->a.raddr, e->raddr, CP_ADDR_LEN)) {
			c->fdkey = fk;
			return i;
		}
	}
	addr_of(&a, e->family, e->lport, e->rport, e->laddr, e->raddr);
	i = kp__conn(kp, host, &a);
	if (i != KP_NONE && e->fd >= 0 &&
	    !kp_map__put(&kp->fdmap, fd_key(host, e->h.pid, e->fd), i))
		kp->cn[i].fdkey = fd_key(host, e->h.pid, e->fd);
	return i;
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
	/* the same host first (loopback), then the others: addresses as seen
	 * from both ends agree when no NAT sits between the hosts */
	for (uint32_t k = 0; k <= kp->nsrc; k++) {
		uint32_t host = k == 0 ? c->host : kp->src[k - 1].host;
		uint32_t i;

		if (k && host == c->host)
			continue;
		i = kp_map__get(&kp->cnmap, addr_hash(host, &r));
		if ((i == KP_NONE || !addr_eq(&kp->cn[i].a, &r)) && r.proto == IPPROTO_UDP)
			/* a flow whose own address is not known (an
			 * unconnected socket that has only sent), or seen
			 * through NAT: the peer's flow on those ports */
			i = uport_get(kp, host, &r);
		if (i != KP_NONE && i != conn && kp->cn[i].host == host &&
		    (addr_eq(&kp->cn[i].a, &r) || r.proto == IPPROTO_UDP) &&
		    kp->cn[i].proc != KP_NONE) {
			c->peer = i;
			kp->cn[i].peer = conn;
			return i;
		}
	}
	return KP_NONE;
}

const char *kp__conn_addr(struct kp_conn *c, bool local)
{
	char ip[INET6_ADDRSTRLEN] = "?", *str = local ? c->lstr : c->rstr;
	const uint8_t *addr = local ? c->a.laddr : c->a.raddr;
	unsigned int port = local ? c->a.lport : c->a.rport;

	/* the walk asks for them on every request: formatted once per conn */
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
			snprintf(str, KP_ADDR_STR_LEN, "%s (listening)", kp__conn_addr(c, true));
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
static int listen_at(const struct kp_proc *p, uint16_t port)
{
	for (uint32_t i = 0; i < p->nlisten; i++)
		if (p->listen[i] == port)
			return (int)i;
	return -1;
}

static bool proc_listens_sure(const struct kp_proc *p, uint16_t port)
{
	int i = listen_at(p, port);

	return i >= 0 && (uint32_t)i < p->nsure;
}

/* A port p listens on, sure or guessed; a guess never displaces a sure one
 * from the front (the first is the service's port). */
static int listen_add(struct kp_proc *p, uint16_t port, bool sure)
{
	int i = listen_at(p, port);
	uint16_t t;

	if (!port) /* a Unix-domain socket's: no port to go by */
		return 0;
	if (i < 0) {
		if (kp__grow((void **)&p->listen, &p->caplisten, p->nlisten + 1,
			     sizeof(*p->listen)))
			return -ENOMEM;
		i = (int)p->nlisten++;
		p->listen[i] = port;
	}
	if (!sure || (uint32_t)i < p->nsure)
		return 0;
	t = p->listen[p->nsure]; /* the first guessed one, or port itself */
	p->listen[p->nsure++] = port;
	p->listen[i] = t;
	return 0;
}

/* Whether a process of host listens on port: 2 for sure, 1 by a guess
 * only, 0 not. */
static int host_listens(const struct kp *kp, uint32_t host, uint16_t port)
{
	int best = 0;

	if (!port)
		return 0;
	for (uint32_t i = 0; i < kp->npr && best < 2; i++) {
		const struct kp_proc *p = &kp->pr[i];
		int at;

		if (p->host != host || !p->nlisten)
			continue;
		at = listen_at(p, port);
		if (at >= 0)
			best = (uint32_t)at < p->nsure ? 2 : 1;
	}
	return best;
}

/* A guessed port that was not one: gone, sure ones keep their order. */
static void listen_unguess(struct kp_proc *p, uint16_t port)
{
	int i = listen_at(p, port);

	if (i >= 0 && (uint32_t)i >= p->nsure)
		p->listen[i] = p->listen[--p->nlisten];
}

/* A guessed connection takes its real role: what it was doing under the
 * wrong one is dropped (a client's call, or a request that was a reply). */
static void conn_correct(struct kp *kp, struct kp_conn *c, uint8_t role)
{
	if (role == KP_ROLE_CLIENT && c->role == KP_ROLE_SERVER && c->proc != KP_NONE)
		listen_unguess(&kp->pr[c->proc], c->a.lport);
	c->role = role;
	c->role_guessed = 0;
	c->phase = KP_PH_IDLE;
	c->req.reader = c->req.writer = KP_NONE;
	c->req.nruns = 0;
	c->req.tls_wait = c->req.tls_fin = false;
	c->service[0] = c->last_name[0] = '\0';
	c->iservice = c->iname = NULL;
}

/* The first n of the guessed list: the ones still guessed stay on it. */
static void guessed_compact(struct kp *kp, uint32_t n)
{
	uint32_t keep = 0;

	if (!kp->nguessed)
		return;
	for (uint32_t k = 0; k < n; k++)
		if (kp->cn[kp->guessed[k]].role_guessed)
			kp->guessed[keep++] = kp->guessed[k];
	memmove(kp->guessed + keep, kp->guessed + n, (kp->nguessed - n) * sizeof(*kp->guessed));
	kp->nguessed -= n - keep;
}

/*
 * proc listens on port, for sure: connections whose role was guessed from
 * who spoke first are checked again, by the rules conn_guess_role applies
 * first. At attach the recorder writes its metadata (listening sockets
 * among them) after the first events: a server's connection open before
 * the recording, whose first record is the write of a reply in flight,
 * was taken for a client's until this says otherwise.
 */
int kp__proc_listen(struct kp *kp, uint32_t proc, uint16_t port)
{
	struct kp_proc *p = &kp->pr[proc];
	uint32_t host = p->host, n = kp->nguessed;
	int err;

	if (!port || proc_listens_sure(p, port))
		return 0;
	err = listen_add(p, port, true);
	if (err)
		return err;
	for (uint32_t k = 0; k < kp->nguessed; k++) {
		struct kp_conn *c = &kp->cn[kp->guessed[k]];

		if (!c->role_guessed)
			continue;
		if (c->host != host)
			continue;
		if (c->a.lport == port) {
			if (c->role != KP_ROLE_SERVER)
				conn_correct(kp, c, KP_ROLE_SERVER);
			c->role_guessed = 0;
		} else if (c->a.rport == port && c->role == KP_ROLE_SERVER &&
			   host_listens(kp, host, c->a.lport) != 2) {
			conn_correct(kp, c, KP_ROLE_CLIENT);
		}
	}
	guessed_compact(kp, n);
	return 0;
}

/* c (index ci) has a guessed role: on the list kp__proc_listen checks
 * (without room, it keeps its guess) */
static void conn_guessed(struct kp *kp, uint32_t ci)
{
	kp->cn[ci].role_guessed = 1;
	if (!kp__grow((void **)&kp->guessed, &kp->capguessed, kp->nguessed + 1,
		      sizeof(*kp->guessed)))
		kp->guessed[kp->nguessed++] = ci;
}

/* A connection that was open before the recording started: decide its
 * side from listening ports, else from who spoke first (a guess, which
 * kp__proc_listen corrects when a listening port comes to be known). */
static void conn_guess_role(struct kp *kp, uint32_t ci, bool reading, uint8_t flags)
{
	struct kp_conn *c = &kp->cn[ci];
	int l;

	if (c->role != KP_ROLE_UNKNOWN)
		return;
	/* a Unix-domain socket with its listener's address: the accepted end */
	if (c->a.family == AF_UNIX && (flags & CP_SOCK_F_BOUND)) {
		c->role = KP_ROLE_SERVER;
		return;
	}
	/* its local port is one a process of its host listens on: not
	 * necessarily its own process (a forking server's child, like
	 * PostgreSQL's backends, has the connection its parent accepted) */
	l = host_listens(kp, c->host, c->a.lport);
	if (l) {
		c->role = KP_ROLE_SERVER;
		if (l == 1)
			conn_guessed(kp, ci);
		return;
	}
	l = host_listens(kp, c->host, c->a.rport);
	if (l) {
		c->role = KP_ROLE_CLIENT;
		if (l == 1)
			conn_guessed(kp, ci);
		return;
	}
	c->role = reading ? KP_ROLE_SERVER : KP_ROLE_CLIENT;
	conn_guessed(kp, ci);
	/* a server side seen first mid-stream: its port is one the process
	 * listens on, a guess too (ENOMEM: the next connection guesses again) */
	if (c->role == KP_ROLE_SERVER && c->proc != KP_NONE)
		(void)listen_add(&kp->pr[c->proc], c->a.lport, false);
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

static int conn_pipelined(struct kp *kp, struct kp_conn *c, const uint8_t *payload, size_t len,
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
static int h2_check(struct kp *kp, uint32_t ci, const uint8_t *p, size_t len)
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

	conn_guess_role(kp, ci, true, e->flags);
	c->seen_data = 1;
	err = h2_check(kp, ci, e->payload, e->payload_len);
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
	return conn_pipelined(kp, c, e->payload, e->payload_len, e->bytes, pr);
}

/* Whether a TLS library's call on memory buffers and its thread's socket
 * call at then and now go together: a socket read and the TLS read that
 * decrypts it, a TLS write and the socket write that carries it. */
static bool bio_near(uint64_t then, uint64_t now)
{
	return then <= now && now - then < KP_TLS_BIO_NS;
}

/* TLS writes waiting for a socket write, dropped (counted) when the first
 * is too old for the socket call at ts to be the one that carries them. */
static void bio_wr_expire(struct kp *kp, struct kp_bio_wr *q, uint64_t ts)
{
	if (q->n && !bio_near(q->ts, ts)) {
		kp->bio_wr_unsent += q->nsure;
		q->n = q->len = q->nsure = 0;
	}
}

/* A TLS write on memory buffers (Node.js, Go): its plaintext, kept in q
 * (its connection's, or its thread's while that is not known) for the
 * socket write that carries its ciphertext (conn_write). Writes left
 * waiting past KP_TLS_BIO_NS, or past KP_BIO_WR_MAX, had none: counted,
 * not used. */
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

/* The tlsmap key of a TLS record's library connection: its host, process
 * and id; 0 when the record has no id (an older recorder). */
static uint64_t tls_conn_key(uint32_t host, const struct cp_ev_tls_read *e)
{
	uint64_t id = cp_tls_id(e);

	return id ? (id << 16 | host) ^ (uint64_t)e->h.pid * 0x9e3779b97f4a7c15ull : 0;
}

/* The TLS writes a socket write at ts on ci by thread carries: its
 * connection's, else (the connection not known when they were made) its
 * thread's; NULL for none. */
struct kp_bio_wr *kp__bio_wr_for(struct kp *kp, uint32_t ci, uint32_t thread, uint64_t ts)
{
	struct kp_bio_wr *c = &kp->cn[ci].bw, *t = &kp->th[thread].bw;
	const struct cp_ev_tls_read *r = (const void *)t->buf;
	uint64_t key = kp->cn[ci].tls_key, theirs;

	bio_wr_expire(kp, c, ts);
	bio_wr_expire(kp, t, ts);
	if (c->n)
		return c;
	/* the thread's, unless they are another library connection's (Go's
	 * HTTP/2 server writes its SETTINGS before it reads) */
	if (!t->n)
		return NULL;
	theirs = tls_conn_key(kp->cn[ci].host, r);
	return key && theirs && theirs != key ? NULL : t;
}

/* The open connection a TLS library connection (a record's tls_id) was
 * seen reading on, or KP_NONE. */
static uint32_t bio_known(struct kp *kp, uint32_t host, const struct cp_ev_tls_read *e,
			  uint64_t *key)
{
	uint32_t ci;

	*key = tls_conn_key(host, e);
	ci = *key ? kp_map__get(&kp->tlsmap, *key) : KP_NONE;
	if (ci != KP_NONE && (kp->cn[ci].tls_key != *key || kp->cn[ci].closed_at))
		return KP_NONE;
	return ci;
}

/* ci is a connection of a library on memory buffers (or Go's), its
 * library connection's key (0: not recorded) is key: ci, or KP_NONE when
 * out of memory. */
static uint32_t bio_learn(struct kp *kp, uint32_t ci, uint64_t key)
{
	kp->cn[ci].tls_bio = 1;
	if (key && kp->cn[ci].tls_key != key) {
		if (kp_map__put(&kp->tlsmap, key, ci))
			return KP_NONE; /* out of memory: as if unknown */
		kp->cn[ci].tls_key = key;
	}
	return ci;
}

/*
 * The connection of a TLS read on memory buffers (Node.js, Go): the
 * thread's last socket read's (a moment before, in the same loop turn: its
 * ciphertext), unless the read's library connection (tls_id) was seen
 * reading on another that is still open and that one is not new. Go's
 * runtime may resume a goroutine whose read its library answers from
 * records an earlier socket read brought on another thread, whose last
 * socket read was another connection's; and it gives a closed
 * connection's memory to a new one, whose close the recording may not
 * show (the peer reset it first), so a connection none of whose reads
 * had an id before (a new one) takes the id over.
 */
static uint32_t bio_conn(struct kp *kp, uint32_t host, const struct cp_ev_tls_read *e,
			 uint32_t thread, uint64_t ts)
{
	const struct kp_thread *t = &kp->th[thread];
	uint64_t key;
	uint32_t known = bio_known(kp, host, e, &key), ci;

	ci = t->read_conn != KP_NONE && bio_near(t->read_ts, ts) ? t->read_conn : KP_NONE;
	if (known != KP_NONE && (ci == KP_NONE || kp->cn[ci].tls_key))
		return known;
	return ci == KP_NONE ? ci : bio_learn(kp, ci, key);
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
		addr_of(&a, e->family, e->lport, e->rport, e->laddr, e->raddr);
		ci = kp_map__get(&kp->cnmap, addr_hash(host, &a));
		if (ci != KP_NONE && (kp->cn[ci].host != host || !addr_eq(&kp->cn[ci].a, &a)))
			ci = KP_NONE;
		/* Go's: its writes and its reads answered from the library's
		 * buffer are this connection's too */
		if (ci != KP_NONE && e->call == CP_TLS_GO_READ)
			ci = bio_learn(kp, ci, tls_conn_key(host, e));
	} else if (e->fd < 0 && !e->family) {
		ci = bio_conn(kp, host, e, thread, ts);
		if (ci == KP_NONE)
			kp->bio_rd_lost++;
	} else {
		ci = kp_map__get(&kp->fdmap, fd_key(host, e->h.pid, e->fd));
	}
	if (ci == KP_NONE)
		return 0;
	c = &kp->cn[ci];
	/* HTTP/2 over TLS: the plaintext is the connection's stream of frames */
	err = h2_check(kp, ci, e->payload, e->payload_len);
	if (err)
		return err;
	c = &kp->cn[ci];
	if (c->h2)
		return kp__h2_tls_read(kp, ci, e, thread, ts);
	/* the client's last flight and its request came in one read (a
	 * library that reads ahead: nginx), and the library answered the
	 * flight (TLS 1.3's session tickets) before the server read the
	 * request from its buffer: one request, begun by that read, named
	 * now, its status and end the answer's still to come */
	if (c->role == KP_ROLE_SERVER && c->phase == KP_PH_WRITING && c->req.tls_fin &&
	    c->req.tls_wait && c->req.reader == thread && !c->tls_bio) {
		c->phase = KP_PH_READING;
		c->req.status = 0;
	}
	/* the request that read began, not named yet; a client reads responses */
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
	if (!c->req.name[0] && n <= CP_SHORT_READ && e->bytes <= CP_SHORT_READ) {
		/* its first bytes alone (Go's HTTP/1 server reads one, then
		 * the rest): named with the next read's */
		memcpy(c->req.head, p, n);
		c->req.nhead = (uint8_t)n;
		snprintf(c->req.name, sizeof(c->req.name), "request");
		return 0;
	}
	c->req.tls_wait = false;
	if (!c->req.name[0])
		snprintf(c->req.name, sizeof(c->req.name), "request");
	return conn_pipelined(kp, c, p, n, e->bytes, pr);
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
		(void)bio_learn(kp, ci,
				tls_conn_key(c->host, (const struct cp_ev_tls_read *)q->buf));
	conn_guess_role(kp, ci, false, e->flags);
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
		err = h2_check(kp, ci, r->payload, r->payload_len);
		c = &kp->cn[ci];
		if (!err && !c->h2)
			bio_status = (uint16_t)proto__http_status(r->payload, r->payload_len);
	} else {
		err = h2_check(kp, ci, e->payload, e->payload_len);
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

static bool is_read(uint8_t call)
{
	return call == CP_SOCK_READ || call == CP_SOCK_READV || call == CP_SOCK_RECVFROM ||
	       call == CP_SOCK_RECVMSG || call == CP_SOCK_RECVMMSG;
}

static bool is_write(uint8_t call)
{
	return call == CP_SOCK_WRITE || call == CP_SOCK_WRITEV || call == CP_SOCK_SENDTO ||
	       call == CP_SOCK_SENDMSG || call == CP_SOCK_SENDMMSG;
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
static int conn_closed(struct kp *kp, uint32_t ci, uint64_t ts)
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
		err = conn_closed(kp, ci, ts);
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
	guessed_compact(kp, kp->nguessed); /* recycled ones leave the list */
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
	if (udp && !(is_read(e->call) && e->bytes >= 0) && !(is_write(e->call) && e->bytes > 0))
		return 0; /* a flow has no accept, connect or close; a failed read took nothing */
	thread = kp__thread(kp, host, (int32_t)e->h.pid, (int32_t)e->h.tid);
	if (thread == KP_NONE)
		return -ENOMEM;
	proc = kp->th[thread].proc;
	if (kp__tl_seen_running(kp, thread, e->h.cpu))
		return -ENOMEM;
	ci = udp ? udp_conn(kp, host, e, ts, is_read(e->call)) : kp__conn_by_sock(kp, host, e);
	if (ci == KP_NONE)
		return 0;
	c = &kp->cn[ci];
	if (c->proc == KP_NONE)
		c->proc = proc;
	c->last_used = ts;
	c->last_proc = proc;
	c->tls_seen |= !!(e->flags & CP_SOCK_F_TLS);
	if (is_read(e->call) && e->bytes > 0) {
		kp->th[thread].read_conn = ci;
		kp->th[thread].read_ts = ts;
	}
	c->peer_eof |= is_read(e->call) && !e->bytes && !udp;
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
				return conn_closed(kp, ci, ts);
		}
		return 0;
	}
	default:
		break;
	}
	if (is_read(e->call)) {
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
	if (is_write(e->call) && e->bytes > 0) {
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
			err = udpq_push(kp, host, e->family, e->lport, ts, KP_NONE);
			return err ? err : dready_cpu(kp, host, e, ts, KP_NONE);
		}
		ci =
		    udp_flow(kp, host, e->family, e->lport, e->rport, e->laddr, e->raddr, ts, true);
		if (ci == KP_NONE)
			return -ENOMEM;
		err = udpq_push(kp, host, e->family, e->lport, ts, ci);
		if (err)
			return err;
	} else {
		addr_of(&a, e->family, e->lport, e->rport, e->laddr, e->raddr);
		ci = kp__conn(kp, host, &a);
		if (ci == KP_NONE)
			return -ENOMEM;
	}
	c = &kp->cn[ci];
	c->last_used = ts;
	return conn_arrival(kp, ci, ts, e->rcv_nxt) ?: dready_cpu(kp, host, e, ts, ci);
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
