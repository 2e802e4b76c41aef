/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* A socket call's record (sock_emit) and the payload prefix it carries. */
#ifndef CRITPATH_BPF_SOCK_RECORD_H
#define CRITPATH_BPF_SOCK_RECORD_H

#include "sock.bpf.h"

/* The iovec array of a msghdr in user memory. */
static __always_inline const struct iovec *msghdr_iov(const void *msg)
{
	void *p = NULL;

	bpf_probe_read_user(&p, sizeof(p), msg + offsetof(struct user_msghdr, msg_iov));
	return p;
}

/* A vectored call's user iovec array, or NULL. */
static __always_inline const struct iovec *payload_iov(struct cp_inflight *in)
{
	const void *msg = (const void *)in->arg0;

	if (in->uring & URING_BUF)
		return NULL;
	switch (in->call) {
	case CP_SOCK_READV:
	case CP_SOCK_WRITEV:
		return msg;
	case CP_SOCK_RECVMSG:
	case CP_SOCK_SENDMSG:
		return msghdr_iov(msg);
	default:
		return NULL;
	}
}

/* The one user buffer of a call that moves bytes through one, or 0. */
static __always_inline __u64 payload_buf(struct cp_inflight *in)
{
	if (in->uring & URING_BUF)
		return in->arg0;
	switch (in->call) {
	case CP_SOCK_READ:
	case CP_SOCK_WRITE:
	case CP_SOCK_RECVFROM:
	case CP_SOCK_SENDTO:
		return in->arg0;
	default:
		return 0;
	}
}

/* Where the call's first bytes are in user memory, and at most how many. */
static __always_inline const void *payload_src(struct cp_inflight *in, __u64 *max)
{
	struct iovec iov = {};
	const void *msg = (const void *)in->arg0;
	const struct iovec *uiov;

	/* one buffer (a provided buffer, even for a recvmsg) */
	if (payload_buf(in))
		return msg;
	switch (in->call) {
	case CP_SOCK_RECVMMSG:
	case CP_SOCK_SENDMMSG: {
		unsigned int len = 0;

		bpf_probe_read_user(&len, sizeof(len), msg + offsetof(struct mmsghdr, msg_len));
		if (len < *max)
			*max = len;
		uiov = msghdr_iov(msg); /* the first message's */
		break;
	}
	default:
		uiov = payload_iov(in);
		break;
	}
	if (!uiov || bpf_probe_read_user(&iov, sizeof(iov), uiov))
		return NULL;
	if (iov.iov_len < *max)
		*max = iov.iov_len;
	return iov.iov_base;
}

/* The payload prefix into buf; its length, 0 for none. Inside an SSL_write
 * (tls) the plaintext is the payload. */
static __always_inline __u64 sock_payload(struct cp_inflight *in, __u8 call, long ret, __u8 *buf,
					  __u64 cap, struct cp_tls_slot *tls, __u32 limit)
{
	__u64 max = call == CP_SOCK_RECVMMSG || call == CP_SOCK_SENDMMSG ? CP_PAYLOAD_MAX : ret;
	const void *src;
	__u64 len;

	if (tls)
		max = tls->num;
	if (max > limit)
		max = limit;
	src = tls ? (const void *)tls->buf : payload_src(in, &max);
	len = max;
	if (len > cap)
		len = cap;
	barrier_var(len);
	if (!src || !len || len > cap)
		return 0;
	/* zero the word the data ends in: no stale ring bytes in the padding */
	*(__u64 *)(buf + (len & 0x1f8)) = 0;
	if (bpf_probe_read_user(buf, len, src))
		return 0;
	return len;
}

/* TLS application data (type 23, version 3.x) is cut to its 5-byte header:
 * all the report reads of it, and the rest would not compress. */
static __always_inline __u64 tls_ciphertext_cut(__u8 *p, __u64 len)
{
	if (len > 5 && p[0] == 23 && p[1] == 3 && p[2] >= 1 && p[2] <= 4) {
		*(__u64 *)p &= 0xffffffffffull;
		return 5;
	}
	return len;
}

/* The prefix gathered from up to GATHER_IOVS iovecs: HTTP/2 writers (Node.js)
 * put a frame's header and payload in separate ones. buf has CP_PAYLOAD_MAX
 * of room past any offset below it, so bounds are masks the verifier follows. */
static __always_inline __u64 payload_gather(const struct iovec *uiov, long ret, __u8 *buf)
{
	__u64 max = ret, off = 0;

	if (max > cfg_h2_payload_bytes)
		max = cfg_h2_payload_bytes;
	if (max > CP_PAYLOAD_MAX)
		max = CP_PAYLOAD_MAX;
	for (int i = 0; i < GATHER_IOVS; i++) {
		struct iovec iov;
		__u64 n;

		if (off >= max || bpf_probe_read_user(&iov, sizeof(iov), &uiov[i]))
			break;
		n = iov.iov_len;
		if (n > max - off)
			n = max - off;
		if (n > CP_PAYLOAD_MAX)
			n = CP_PAYLOAD_MAX;
		barrier_var(n);
		if (!n || n > CP_PAYLOAD_MAX)
			continue;
		if (bpf_probe_read_user(buf + (off & (CP_PAYLOAD_MAX - 1)), n, iov.iov_base))
			break;
		off += n;
	}
	if (off > CP_PAYLOAD_MAX)
		off = CP_PAYLOAD_MAX;
	/* no stale ring bytes in the padding */
	for (int k = 0; k < 7 && ((off + k) & 7); k++)
		buf[(off + k) & (2 * CP_PAYLOAD_MAX - 1)] = 0;
	return off;
}

/* The default payload, with the word sock_payload() zeroes past the data. */
#define PAYLOAD_SMALL CP_PAYLOAD_DEFAULT
#define SOCK_SMALL (offsetof(struct cp_ev_sock, payload) + PAYLOAD_SMALL + 8)

/* A socket read inside a TLS read: no payload; when it would have had one,
 * the TLS call's return records the plaintext (tls.bpf.c). */
static __always_inline void tls_read_note(struct cp_tls_slot *tls, struct cp_inflight *in,
					  struct cp_sock_state *st)
{
	st->last_dir = SOCK_DIR_READ;
	st->last_short = 0;
	tls->want_ssl = tls->ssl;
	tls->want_ts = in->ts;
	tls->h2 = st->every;
	tls->fd = in->fd;
	CONN_COPY(tls, in);
}

/* The call's record, at in->rec_ts (0: the clock's now); st: the socket's
 * state (NULL: no payload); tls: the TLS call moving data the same way
 * (NULL: none). */
static __always_inline int sock_emit(struct cp_inflight *in, long ret, struct cp_sock_state *st,
				     struct cp_tls_slot *tls, __u32 unsent)
{
	const struct iovec *iov = NULL;
	struct cp_stage *stg = NULL; /* staged, not reserved in the ring */
	struct cp_ev_sock *e;
	__u8 call = in->call;
	int dir = call_dir(call);
	__u64 len = 0, pieces = 0;
	__u32 limit;
	bool walk;

	/* a peek's bytes are the next read's; every datagram is a message of its own */
	if (st && (ret <= 0 || dir == SOCK_DIR_NONE || !cfg_payload_bytes || in->peek ||
		   (st->last_dir == dir && !st->last_short && !st->every &&
		    in->sock_type != SOCK_DGRAM && !(tls && tls->turn_ssl == tls->ssl))))
		st = NULL;
	if (tls) {
		tls->nested = 1;
		if (st && tls->turn_ssl == tls->ssl)
			tls->turn_ssl = 0;
	}
	if (tls && dir == SOCK_DIR_READ) {
		if (st)
			tls_read_note(tls, in, st);
		st = NULL;
	}
	/* HTTP/2 takes a write's plaintext once: later writes repeat its bytes */
	if (tls && st && st->every && tls->wrote)
		st = NULL;
	limit = st && st->every ? cfg_h2_payload_bytes : cfg_payload_bytes;
	/* HTTP/2: room for the pieces after the prefix */
	walk = st && st->every && (!tls || dir == SOCK_DIR_WRITE);
	/* reserved in place, at full size when a payload is taken */
	if (walk && !tls && (iov = payload_iov(in))) {
		e = ring_reserve(sizeof(*e) + H2_ROOM);
		if (!e) {
			st->h2_sync = 0;
			count_drop();
			goto out;
		}
		len = payload_gather(iov, ret, e->payload);
		st->last_dir = dir;
		st->last_short = 0;
	} else if (st && !walk && limit <= PAYLOAD_SMALL) {
		/* the default prefix: staged at its size */
		e = stage_reserve(&stg, SOCK_SMALL);
		if (!e)
			goto out;
		len = sock_payload(in, call, ret, e->payload, PAYLOAD_SMALL, tls, limit);
		if (len && !tls)
			len = tls_ciphertext_cut(e->payload, len);
		if (len) {
			st->last_dir = dir;
			st->last_short = ret <= CP_SHORT_READ;
			if (!st->every && sock_h2(e->payload, len)) {
				st->every = 1;
				/* the first HTTP/2 bytes, at the length of the transfers to come */
				if (len < (__u64)ret && cfg_h2_payload_bytes > len) {
					stage_cancel(stg);
					stg = NULL;
					e = ring_reserve(sizeof(*e) + H2_ROOM);
					if (!e) {
						count_drop();
						goto out;
					}
					len =
					    sock_payload(in, call, ret, e->payload, CP_PAYLOAD_MAX,
							 tls, cfg_h2_payload_bytes);
					walk = true;
				}
			}
		}
	} else if (st) {
		/* on HTTP/2, with room for the pieces (in the ring: too big to stage) */
		if (walk) {
			e = ring_reserve(sizeof(*e) + H2_ROOM);
			if (!e)
				count_drop();
		} else {
			e = stage_reserve(&stg, sizeof(*e));
		}
		if (!e) {
			st->h2_sync = 0;
			goto out;
		}
		len = sock_payload(in, call, ret, e->payload, CP_PAYLOAD_MAX, tls, limit);
		if (len && !tls && !walk)
			len = tls_ciphertext_cut(e->payload, len);
		if (len) {
			st->last_dir = dir;
			st->last_short = ret <= CP_SHORT_READ;
			if (!st->every && sock_h2(e->payload, len))
				st->every = 1;
		}
	} else {
		e = stage_reserve(&stg, offsetof(struct cp_ev_sock, payload));
		if (!e)
			goto out;
	}
	/* walk: the record has H2_ROOM bytes of room past its payload */
	if (walk && len && tls) /* an SSL_write's plaintext, all of it */
		pieces = cp_h2_walk(st, (struct h2_room *)e->payload, tls->buf, 0,
				    H2_XFER(tls->num, len, 1, 1));
	else if (walk && len)
		pieces = cp_h2_walk(st, (struct h2_room *)e->payload, iov ? 0 : payload_buf(in),
				    (__u64)iov, H2_XFER(ret, len, dir == SOCK_DIR_WRITE, 0));
	hdr_fill(&e->h, CP_EV_SOCK, CP_ALIGN(offsetof(struct cp_ev_sock, payload) + len + pieces),
		 in->rec_ts ?: bpf_ktime_get_ns());
	e->enter_ts = in->ts;
	e->bytes = ret;
	e->fd = in->fd;
	e->phase = CP_PHASE_EXIT;
	e->call = call;
	CONN_COPY(e, in);
	e->sock_type = in->sock_type;
	e->flags = (tls ? CP_SOCK_F_TLS : 0) | (in->peek ? CP_SOCK_F_PEEK : 0) |
		   (in->uring ? CP_SOCK_F_URING : 0) | (pieces ? CP_SOCK_F_PIECES : 0) |
		   (in->sent_at ? CP_SOCK_F_SENT_AT : 0);
	if (tls && len) {
		tls->wrote = 1;
		if (tls->num > len)
			e->flags |= CP_SOCK_F_CUT;
	}
	if (in->family == AF_UNIX && in->sk) {
		struct unix_sock *u = kernel_cast(in->sk, struct unix_sock);
		struct unix_address *ua = u->addr;
		__u64 ino = sk_ino(&u->sk), peer = sk_ino(u->peer);

		/* both ends' sockets name the connection (a descriptor is reused) */
		__builtin_memcpy(e->laddr, &ino, sizeof(ino));
		__builtin_memcpy(e->raddr, &peer, sizeof(peer));

		/* not an autobind's name ("\0" and 5 hex digits) */
		if (ua && ua->len != UNIX_AUTOBIND_LEN)
			e->flags |= CP_SOCK_F_BOUND;
	}
	e->unsent = unsent;
	e->payload_len = len;
	if (stg)
		stage_commit(stg, &e->h, sizeof(*e));
	else
		ev_submit(e);
out:
	inflight_done(in);
	return 0;
}

#endif /* CRITPATH_BPF_SOCK_RECORD_H */
