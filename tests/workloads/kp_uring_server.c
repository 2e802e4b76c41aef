// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * kp_uring_server: an HTTP server whose socket I/O is all io_uring requests
 * (liburing): accept, recv and send on one ring, driven by one thread
 * ("U1"), which makes no socket syscall of its own after listen. Per
 * request (kp_client's "GET /kp/N") it computes --work-ms of CPU and
 * answers "ok\n".
 *
 * --backend PORT: before computing, it asks kp_backend for "get KEY"
 * (--key, default c5: 5 ms of the backend's CPU) over a connection of the
 * client's own, with io_uring send and recv too (connected by a connect()
 * syscall when the client's connection is accepted).
 * --async: every recv and send with IOSQE_ASYNC: the kernel's io-wq
 * workers (threads "iou-wrk-PID" of this process) move the data.
 * --fixed: connections are accepted into the ring's table of registered
 * files (no descriptor), and recv and send name them by index
 * (IOSQE_FIXED_FILE).
 * --bufsel: the client's requests are read by one multishot recv per
 * connection into buffers the kernel picks from a ring of provided buffers
 * (IOSQE_BUFFER_SELECT), as high-rate io_uring servers read.
 *
 * --zc: responses by zero-copy sends (IORING_OP_SEND_ZC).
 * --udp: a datagram server instead, on an unconnected UDP socket: each
 * datagram ("get KEY\r\n", memcached's text) is read by an io_uring recvmsg
 * that asks for its sender, costs --work-ms, and is answered to that sender
 * by a sendmsg (even requests) or a send with a destination (odd ones).
 * With --bufsel, a multishot recvmsg reads them into the provided buffers.
 *
 * A connection the client closed is closed by an io_uring close.
 *
 * Prints "READY pid=P port=N U1=T" once listening.
 *
 *   kp_uring_server [--port N] [--work-ms 3] [--backend PORT --key c5] [--async]
 *                   [--fixed] [--bufsel] [--udp] [--zc]
 */
#include <liburing.h>

#include "kp_common.h"

enum state { ACCEPT, RECV_REQ, SEND_BACKEND, RECV_BACKEND, SEND_RESP };

struct conn {
	enum state st;
	int fd, bfd;	  /* the client's (with --fixed, its index); the backend's, -1 */
	char buf[1024];	  /* the request, then the backend's answer */
	size_t len, sent; /* bytes in buf; of out, sent */
	char out[128];
	size_t outlen;
	bool armed; /* --bufsel: its multishot recv is armed */
};

/* --bufsel: the ring of provided buffers (group BGID) */
enum { NBUF = 16, BUFSZ = 1024, BGID = 7 };
static struct io_uring_buf_ring *br;
static char *bufs;

static struct io_uring ring;
static bool async_io, fixed, bufsel, zerocopy;
static int lfd, backend_port = -1;
static double work_ms = 3;
static const char *key = "c5";

static struct io_uring_sqe *sqe_for(struct conn *c)
{
	struct io_uring_sqe *s = io_uring_get_sqe(&ring);

	if (!s)
		kp_die("kp_uring_server: submission queue full");
	io_uring_sqe_set_data(s, c);
	return s;
}

/* Whether c's state moves data on its backend connection, not the
 * client's. */
static bool on_backend(const struct conn *c)
{
	return c->st == SEND_BACKEND || c->st == RECV_BACKEND;
}

/* c's transfer in its state: on the client's connection (a registered
 * file with --fixed) or the backend's */
static void submit(struct io_uring_sqe *s, const struct conn *c)
{
	bool client = !on_backend(c);
	int err;

	io_uring_sqe_set_flags(s, (async_io ? IOSQE_ASYNC : 0) |
				      (fixed && client ? IOSQE_FIXED_FILE : 0) |
				      (bufsel && c->st == RECV_REQ ? IOSQE_BUFFER_SELECT : 0));
	err = io_uring_submit(&ring);
	if (err < 0)
		kp_die("kp_uring_server: io_uring_submit: %s", strerror(-err));
}

static void bufs_init(void)
{
	struct io_uring_buf_reg reg = {0};
	int err;

	if (posix_memalign((void **)&br, 4096, NBUF * sizeof(struct io_uring_buf)) ||
	    !(bufs = malloc(NBUF * BUFSZ)))
		kp_die("out of memory");
	reg.ring_addr = (unsigned long)br;
	reg.ring_entries = NBUF;
	reg.bgid = BGID;
	err = io_uring_register_buf_ring(&ring, &reg, 0);
	if (err)
		kp_die("kp_uring_server: io_uring_register_buf_ring: %s", strerror(-err));
	io_uring_buf_ring_init(br);
	for (int i = 0; i < NBUF; i++)
		io_uring_buf_ring_add(br, bufs + i * BUFSZ, BUFSZ, (unsigned short)i,
				      io_uring_buf_ring_mask(NBUF), i);
	io_uring_buf_ring_advance(br, NBUF);
}

/* A provided buffer (--bufsel) back in the ring, its bytes taken. */
static void buf_return(unsigned bid)
{
	io_uring_buf_ring_add(br, bufs + bid * BUFSZ, BUFSZ, (unsigned short)bid,
			      io_uring_buf_ring_mask(NBUF), 0);
	io_uring_buf_ring_advance(br, 1);
}

/* The next bytes of c's state's connection into c->buf. */
static void recv_into(struct conn *c)
{
	int fd = on_backend(c) ? c->bfd : c->fd;
	struct io_uring_sqe *s;

	if (bufsel && c->st == RECV_REQ) {
		if (c->armed)
			return; /* its next completion brings the bytes */
		s = sqe_for(c);
		io_uring_prep_recv_multishot(s, fd, NULL, 0, 0);
		s->buf_group = BGID;
		c->armed = true;
		submit(s, c);
		return;
	}
	s = sqe_for(c);
	io_uring_prep_recv(s, fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, 0);
	submit(s, c);
}

/* The rest of c->out to c's state's connection. */
static void send_out(struct conn *c)
{
	int fd = on_backend(c) ? c->bfd : c->fd;
	struct io_uring_sqe *s = sqe_for(c);

	if (zerocopy) /* c->out stays as it is until the notification */
		io_uring_prep_send_zc(s, fd, c->out + c->sent, c->outlen - c->sent, 0, 0);
	else
		io_uring_prep_send(s, fd, c->out + c->sent, c->outlen - c->sent, 0);
	submit(s, c);
}

static void start(struct conn *c, enum state st, const char *out)
{
	c->st = st;
	c->len = c->sent = 0;
	if (out) {
		c->outlen = strlen(out);
		memcpy(c->out, out, c->outlen + 1);
		send_out(c);
	} else {
		recv_into(c);
	}
}

/* The request (or answer) in c->buf is whole: the next step. */
static void step(struct conn *c)
{
	char q[96];

	switch (c->st) {
	case RECV_REQ:
		if (c->bfd >= 0) {
			snprintf(q, sizeof(q), "get %s\r\n", key);
			start(c, SEND_BACKEND, q);
			return;
		}
		__attribute__((fallthrough)); /* no backend */
	case RECV_BACKEND:
		kp_spin_ms(work_ms);
		start(c, SEND_RESP, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
		return;
	case SEND_BACKEND:
		start(c, RECV_BACKEND, NULL);
		return;
	case SEND_RESP:
		start(c, RECV_REQ, NULL);
		return;
	case ACCEPT:
		break;
	}
}

static void accepted(int fd)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		kp_die("out of memory");
	c->fd = fd;
	c->bfd = backend_port >= 0 ? kp_connect(backend_port) : -1;
	start(c, RECV_REQ, NULL);
}

static void finish(struct conn *c)
{
	struct io_uring_sqe *s = sqe_for(NULL);

	if (fixed)
		io_uring_prep_close_direct(s, (unsigned)c->fd);
	else
		io_uring_prep_close(s, c->fd);
	io_uring_submit(&ring);
	if (c->bfd >= 0)
		close(c->bfd);
	free(c);
}

static void completed(struct conn *c, int res, unsigned flags)
{
	const char *end = c->st == RECV_BACKEND ? "END\r\n" : "\r\n\r\n";

	if (res < 0 && res != -ECONNRESET && res != -EPIPE)
		kp_die("kp_uring_server: request in state %d: %s", (int)c->st, strerror(-res));
	if (res < 0 || (res == 0 && c->st != SEND_BACKEND && c->st != SEND_RESP)) {
		finish(c); /* the client is gone */
		return;
	}
	if (c->st == SEND_BACKEND || c->st == SEND_RESP) {
		c->sent += (size_t)res;
		if (c->sent < c->outlen)
			send_out(c);
		else
			step(c);
		return;
	}
	if (flags & IORING_CQE_F_BUFFER) { /* --bufsel: the buffer the kernel picked */
		unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;

		if (bid >= NBUF || c->len + (size_t)res >= sizeof(c->buf))
			kp_die("kp_uring_server: buffer %u, %d bytes", bid, res);
		memcpy(c->buf + c->len, bufs + bid * BUFSZ, (size_t)res);
		buf_return(bid);
	}
	if (bufsel && c->st == RECV_REQ && !(flags & IORING_CQE_F_MORE))
		c->armed = false; /* ended: armed again at the next read */
	c->len += (size_t)res;
	c->buf[c->len] = '\0';
	if (strstr(c->buf, end))
		step(c);
	else if (c->len + 1 < sizeof(c->buf))
		recv_into(c);
	else
		kp_die("kp_uring_server: request too long");
}

/* With --fixed, into a free slot of the registered files: res is its index. */
static void accept_next(struct conn *acceptor)
{
	struct io_uring_sqe *s = sqe_for(acceptor);

	if (fixed)
		/* liburing adds 1: ALLOC - 1 asks for a free slot */
		io_uring_prep_accept_direct(s, lfd, NULL, NULL, 0, IORING_FILE_INDEX_ALLOC - 1);
	else
		io_uring_prep_accept(s, lfd, NULL, NULL, 0);
	io_uring_submit(&ring);
}

/* One completion of the ring, waited for: its result (and flags). */
static int wait_one(unsigned *flags)
{
	struct io_uring_cqe *cqe;
	int err = io_uring_wait_cqe(&ring, &cqe), res;

	if (err < 0)
		kp_die("kp_uring_server: io_uring_wait_cqe: %s", strerror(-err));
	res = cqe->res;
	if (flags)
		*flags = cqe->flags;
	io_uring_cqe_seen(&ring, cqe);
	return res;
}

/* --udp: the next datagram into buf (its length) and its sender into from:
 * by a recvmsg, or with --bufsel by a multishot recvmsg into the provided
 * buffers (its header, the sender's name, then the payload). */
static int udp_read(int fd, char *buf, size_t cap, struct sockaddr_in *from)
{
	static struct msghdr mh;
	static bool armed;
	struct iovec iov = {buf, cap - 1};
	struct io_uring_recvmsg_out *o;
	unsigned flags = 0, bid;
	int res;

	mh.msg_name = from;
	mh.msg_namelen = sizeof(*from);
	if (!bufsel) {
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		io_uring_prep_recvmsg(sqe_for(NULL), fd, &mh, 0);
		io_uring_submit(&ring);
		res = wait_one(NULL);
		if (res < 0)
			kp_die("kp_uring_server: recvmsg: %s", strerror(-res));
		buf[res] = '\0';
		return res;
	}
	if (!armed) {
		struct io_uring_sqe *s = sqe_for(NULL);

		io_uring_prep_recvmsg_multishot(s, fd, &mh, 0);
		s->flags |= IOSQE_BUFFER_SELECT;
		s->buf_group = BGID;
		io_uring_submit(&ring);
		armed = true;
	}
	res = wait_one(&flags);
	if (res < 0 || !(flags & IORING_CQE_F_BUFFER))
		kp_die("kp_uring_server: multishot recvmsg: %s", strerror(res < 0 ? -res : EINVAL));
	armed = flags & IORING_CQE_F_MORE;
	bid = flags >> IORING_CQE_BUFFER_SHIFT;
	o = io_uring_recvmsg_validate(bufs + bid * BUFSZ, res, &mh);
	if (!o || o->namelen < sizeof(*from))
		kp_die("kp_uring_server: multishot recvmsg: no sender");
	memcpy(from, io_uring_recvmsg_name(o), sizeof(*from));
	res = (int)io_uring_recvmsg_payload_length(o, res, &mh);
	if (res < 0 || (size_t)res >= cap)
		kp_die("kp_uring_server: multishot recvmsg: %d bytes", res);
	memcpy(buf, io_uring_recvmsg_payload(o, &mh), (size_t)res);
	buf[res] = '\0';
	buf_return(bid);
	return res;
}

/* --udp: one datagram at a time, from its read to its answer. */
static void udp_serve(int fd)
{
	struct sockaddr_in from;
	struct msghdr oh = {.msg_name = &from, .msg_namelen = sizeof(from), .msg_iovlen = 1};
	char buf[512], out[160], key_[64];
	struct iovec oiov;

	for (unsigned long n = 0;; n++) {
		struct io_uring_sqe *s;
		int res;

		udp_read(fd, buf, sizeof(buf), &from);
		if (sscanf(buf, "get %63s", key_) != 1)
			kp_die("kp_uring_server: bad datagram '%s'", buf);
		kp_spin_ms(work_ms);
		snprintf(out, sizeof(out), "VALUE %s 0 2\r\nok\r\nEND\r\n", key_);
		s = sqe_for(NULL);
		if (n % 2 == 0) {
			oiov.iov_base = out;
			oiov.iov_len = strlen(out);
			oh.msg_iov = &oiov;
			io_uring_prep_sendmsg(s, fd, &oh, 0);
		} else {
			io_uring_prep_send(s, fd, out, strlen(out), 0);
			io_uring_prep_send_set_addr(s, (struct sockaddr *)&from, sizeof(from));
		}
		io_uring_submit(&ring);
		res = wait_one(NULL);
		if (res < 0)
			kp_die("kp_uring_server: answer: %s", strerror(-res));
	}
}

int main(int argc, char **argv)
{
	struct conn acceptor = {.st = ACCEPT, .fd = -1, .bfd = -1};
	bool udp = false;
	int port = 0, err;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--work-ms") && i + 1 < argc)
			work_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
			backend_port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--key") && i + 1 < argc)
			key = argv[++i];
		else if (!strcmp(argv[i], "--async"))
			async_io = true;
		else if (!strcmp(argv[i], "--fixed"))
			fixed = true;
		else if (!strcmp(argv[i], "--bufsel"))
			bufsel = true;
		else if (!strcmp(argv[i], "--udp"))
			udp = true;
		else if (!strcmp(argv[i], "--zc"))
			zerocopy = true;
		else
			kp_die("usage: kp_uring_server [--port N] [--work-ms 3] "
			       "[--backend PORT --key c5] [--async] [--fixed] [--bufsel] [--udp] "
			       "[--zc]");
	}
	err = io_uring_queue_init(64, &ring, 0);
	if (err < 0)
		kp_die("kp_uring_server: io_uring_queue_init: %s", strerror(-err));
	if (fixed && (err = io_uring_register_files_sparse(&ring, 64)) < 0)
		kp_die("kp_uring_server: io_uring_register_files_sparse: %s", strerror(-err));
	if (bufsel)
		bufs_init();
	kp_set_name("U1");
	if (udp) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
		socklen_t al = sizeof(a);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		lfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) ||
		    getsockname(lfd, (struct sockaddr *)&a, &al))
			kp_die("kp_uring_server: udp socket: %s", strerror(errno));
		printf("READY pid=%d port=%d U1=%d\n", (int)getpid(), ntohs(a.sin_port),
		       kp_gettid());
		fflush(stdout);
		udp_serve(lfd);
	}
	lfd = kp_listen(port, &port);
	printf("READY pid=%d port=%d U1=%d\n", (int)getpid(), port, kp_gettid());
	fflush(stdout);
	accept_next(&acceptor);
	for (;;) {
		struct io_uring_cqe *cqe;
		struct conn *c;
		unsigned flags;
		int res;

		err = io_uring_wait_cqe(&ring, &cqe);
		if (err == -EINTR)
			continue;
		if (err < 0)
			kp_die("kp_uring_server: io_uring_wait_cqe: %s", strerror(-err));
		c = io_uring_cqe_get_data(cqe);
		res = cqe->res;
		flags = cqe->flags;
		io_uring_cqe_seen(&ring, cqe);
		if (!c || (flags & IORING_CQE_F_NOTIF)) /* a close's; a zero-copy send's done */
			continue;
		if (c != &acceptor) {
			completed(c, res, flags);
			continue;
		}
		if (res < 0)
			kp_die("kp_uring_server: accept: %s", strerror(-res));
		accepted(res);
		accept_next(&acceptor);
	}
}
