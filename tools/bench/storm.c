// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * storm: an event storm for bench_record_throughput. Pairs of threads play
 * ping-pong as fast as they can (or at a paced rate): futex pairs hand a
 * turn back and forth with FUTEX_WAKE / FUTEX_WAIT, unix pairs send 64 bytes
 * over a socketpair and back, tcp pairs the same over a loopback connection.
 * Every round trip makes futex or socket syscalls, wakeups and context
 * switches: the events `critpath record` takes.
 *
 *   storm [--futex N] [--unix N] [--tcp N] [--rate RT_PER_S] [-d SECONDS]
 *
 * --rate paces the whole storm to that many round trips per second (0, the
 * default, is as fast as it goes): each pair's initiator does its share in
 * 1 ms slots and sleeps for the rest of a slot. Prints "READY pid=P" once
 * all pairs run; SIGUSR1 prints "MARK ops=N ns=T" (round trips so far, the
 * monotonic clock), so a caller can measure the rate over any window; at the
 * end (after -d, or on SIGINT/SIGTERM) "RESULT ops=N seconds=S rate=X".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MSG 64
#define SLOT_NS 1000000ull
#define MAX_PAIRS 64

enum pair_kind { PAIR_FUTEX, PAIR_UNIX, PAIR_TCP };

struct pair {
	enum pair_kind kind;
	pthread_t a, b;
	/* futex pairs: a's and b's turn words */
	_Atomic uint32_t turn_a, turn_b;
	/* socket pairs: a's and b's ends */
	int fd_a, fd_b;
	double rate; /* round trips per second, 0 = unpaced */
	_Atomic uint64_t ops;
	char __pad[64];
};

static struct pair pairs[MAX_PAIRS];
static int npairs;
static atomic_bool stopping;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "storm: %s: %s\n", what, strerror(errno));
	exit(1);
}

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

/* Waits until *w is set, then clears it. */
static void turn_take(_Atomic uint32_t *w)
{
	while (!atomic_load(w)) {
		if (atomic_load(&stopping))
			return;
		futex(w, FUTEX_WAIT_PRIVATE, 0);
	}
	atomic_store(w, 0);
}

static void turn_give(_Atomic uint32_t *w)
{
	atomic_store(w, 1);
	futex(w, FUTEX_WAKE_PRIVATE, 1);
}

static int xfer(int fd, bool send_first)
{
	char buf[MSG];
	ssize_t n;
	size_t got = 0;

	memset(buf, 'x', sizeof(buf));
	if (send_first && write(fd, buf, MSG) != MSG)
		return -1;
	while (got < MSG) {
		n = read(fd, buf, MSG - got);
		if (n <= 0)
			return -1;
		got += n;
	}
	if (!send_first && write(fd, buf, MSG) != MSG)
		return -1;
	return 0;
}

/* One round trip, from the initiator's side (a) or the responder's (b). */
static int round_trip(struct pair *p, bool initiator)
{
	if (p->kind == PAIR_FUTEX) {
		if (initiator) {
			turn_give(&p->turn_b);
			turn_take(&p->turn_a);
		} else {
			turn_take(&p->turn_b);
			turn_give(&p->turn_a);
		}
		return 0;
	}
	return xfer(initiator ? p->fd_a : p->fd_b, initiator);
}

/* Paced: ops due by now are done, then sleep to the next 1 ms slot. */
static void pace(struct pair *p, uint64_t start, uint64_t done)
{
	uint64_t now = now_ns();
	double due = p->rate * (now - start) / 1e9;
	struct timespec ts;
	uint64_t next;

	if ((double)done < due)
		return;
	next = (now / SLOT_NS + 1) * SLOT_NS;
	ts.tv_sec = next / 1000000000ull;
	ts.tv_nsec = next % 1000000000ull;
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static void *initiator(void *arg)
{
	struct pair *p = arg;
	uint64_t start = now_ns(), done = 0;

	while (!atomic_load(&stopping)) {
		if (p->rate > 0)
			pace(p, start, done);
		if (round_trip(p, true))
			break;
		done++;
		atomic_store_explicit(&p->ops, done, memory_order_relaxed);
	}
	/* release the responder */
	if (p->kind == PAIR_FUTEX)
		turn_give(&p->turn_b);
	else
		shutdown(p->fd_a, SHUT_RDWR);
	return NULL;
}

static void *responder(void *arg)
{
	struct pair *p = arg;

	while (!atomic_load(&stopping))
		if (round_trip(p, false))
			break;
	return NULL;
}

static void tcp_pair(int fds[2])
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		die("loopback listen");
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&a, sizeof(a)))
		die("loopback connect");
	fds[1] = accept(l, NULL, NULL);
	if (fds[1] < 0)
		die("loopback accept");
	close(l);
	setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void pair_add(enum pair_kind kind)
{
	struct pair *p;
	int fds[2];

	if (npairs >= MAX_PAIRS) {
		fprintf(stderr, "storm: more than %d pairs\n", MAX_PAIRS);
		exit(2);
	}
	p = &pairs[npairs++];
	p->kind = kind;
	if (kind == PAIR_UNIX) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
			die("socketpair");
	} else if (kind == PAIR_TCP) {
		tcp_pair(fds);
	}
	if (kind != PAIR_FUTEX) {
		p->fd_a = fds[0];
		p->fd_b = fds[1];
	}
}

static uint64_t total_ops(void)
{
	uint64_t n = 0;

	for (int i = 0; i < npairs; i++)
		n += atomic_load_explicit(&pairs[i].ops, memory_order_relaxed);
	return n;
}

static int parse_count(const char *opt, const char *s, int max)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || !*s || v < 0 || v > max) {
		fprintf(stderr, "storm: %s: '%s' is not a number between 0 and %d\n", opt, s, max);
		exit(2);
	}
	return v;
}

static double parse_num(const char *opt, const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || !*s || !(v >= 0)) {
		fprintf(stderr, "storm: %s: '%s' is not a non-negative number\n", opt, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	int nfutex = 2, nunix = 1, ntcp = 1, sig;
	double rate = 0, secs = 0;
	uint64_t start, end;
	struct timespec ts;
	sigset_t set;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v) {
			fprintf(stderr,
				"storm: %s: missing value\n"
				"usage: storm [--futex N] [--unix N] [--tcp N] "
				"[--rate RT_PER_S] [-d SECONDS]\n",
				a);
			return 2;
		}
		if (!strcmp(a, "--futex"))
			nfutex = parse_count(a, v, MAX_PAIRS);
		else if (!strcmp(a, "--unix"))
			nunix = parse_count(a, v, MAX_PAIRS);
		else if (!strcmp(a, "--tcp"))
			ntcp = parse_count(a, v, MAX_PAIRS);
		else if (!strcmp(a, "--rate"))
			rate = parse_num(a, v);
		else if (!strcmp(a, "-d"))
			secs = parse_num(a, v);
		else {
			fprintf(stderr, "storm: unknown option '%s'\n", a);
			return 2;
		}
		i++;
	}
	if (nfutex + nunix + ntcp == 0) {
		fprintf(stderr, "storm: no pairs: give --futex, --unix or --tcp a count above 0\n");
		return 2;
	}
	for (int i = 0; i < nfutex; i++)
		pair_add(PAIR_FUTEX);
	for (int i = 0; i < nunix; i++)
		pair_add(PAIR_UNIX);
	for (int i = 0; i < ntcp; i++)
		pair_add(PAIR_TCP);

	/* the signals go to this thread's sigtimedwait, not to the pairs */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	for (int i = 0; i < npairs; i++) {
		pairs[i].rate = rate / npairs;
		if (pthread_create(&pairs[i].b, NULL, responder, &pairs[i]) ||
		    pthread_create(&pairs[i].a, NULL, initiator, &pairs[i])) {
			fprintf(stderr, "storm: cannot start threads\n");
			return 1;
		}
	}
	start = now_ns();
	printf("READY pid=%d pairs=%d\n", getpid(), npairs);
	fflush(stdout);
	for (;;) {
		uint64_t now = now_ns(), left;

		if (secs > 0 && now - start >= secs * 1e9)
			break;
		left = secs > 0 ? (uint64_t)(secs * 1e9) - (now - start) : 1000000000ull;
		ts.tv_sec = left / 1000000000ull;
		ts.tv_nsec = left % 1000000000ull;
		sig = sigtimedwait(&set, NULL, &ts);
		if (sig == SIGUSR1) {
			printf("MARK ops=%llu ns=%llu\n", (unsigned long long)total_ops(),
			       (unsigned long long)now_ns());
			fflush(stdout);
		} else if (sig == SIGINT || sig == SIGTERM) {
			break;
		}
	}
	end = now_ns();
	printf("RESULT ops=%llu seconds=%.3f rate=%.0f\n", (unsigned long long)total_ops(),
	       (end - start) / 1e9, total_ops() / ((end - start) / 1e9));
	fflush(stdout);
	/* the pairs may sit in a blocked call: exit without joining them */
	atomic_store(&stopping, true);
	return 0;
}
