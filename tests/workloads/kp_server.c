// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * kp_server: service A of the kernel-path workloads, built so each request's
 * critical path is known in advance (Google CPT, figure 2, and the scenarios
 * in SCENARIOS.md). The main thread ("A1", comm kp_server) accepts one
 * connection at a time and serves its HTTP/1.1 requests in order; what a
 * request does depends on --mode:
 *
 *   seq        A1 5 ms, B "get c20" (20 ms), A1 8 ms, hand-off to A2 2 ms     path ≈ 35 ms
 *   par        A1 5 ms, send to B (20 ms) and wake A2 (2 ms), wait for both,
 *              A1 8 ms                              A2 off the path, path ≈ 33 ms
 *   overlap_b  A1 5 ms, send to B (20 ms), A1 10 ms, wait, A1 8 ms  B on the path, ≈ 33 ms
 *   overlap_a  A1 5 ms, send to B (5 ms), A1 20 ms, wait, A1 8 ms   B off the path, ≈ 33 ms
 *   lock       thread "bg" takes the lock at every multiple of --period-ms of
 *              CLOCK_MONOTONIC and holds it for --hold-ms of CPU; the request
 *              takes the lock and computes 1 ms (send at phase 2 ms → ≈ 10 ms lock)
 *   starve     A1 and a CPU hog process ("kp_hog") pinned to the same CPU; A1 10 ms
 *   handoff    A1 reads and queues to "worker" (10 ms), which queues to "writer",
 *              which sends the reply
 *   untraced   A1 2 ms, B "get s15" (B sleeps 15 ms; B is not traced), A1 2 ms
 *   udp        A1 2 ms, a DNS query "s15.kp.test" to kp_backend --udp (B sleeps
 *              15 ms), from a UDP socket of its own (connected every other
 *              time), A1 2 ms                                          path ≈ 19 ms
 *   probe      A1 in functions for record --probe: probe_parse 3 ms, then
 *              probe_render 2 ms of its own around probe_format 4 ms   path ≈ 9 ms
 *
 * Prints one line once ready: "READY pid=P port=N A1=T A2=T bg=T worker=T
 * writer=T hog_pid=P hog_cpu=C" (fields that apply).
 *
 * --cpu-scale F makes every computation of the server (not of B) take F
 * times the CPU: a slower CPU model's stand-in for the comparison by SKU.
 * --backend-v6 connects to B through a dual-stack (AF_INET6) socket, as
 * Java does: it sees ::ffff:127.0.0.1 where B sees 127.0.0.1.
 *
 *   kp_server --mode MODE [--port N] [--backend PORT] [--backend-v6] [--period-ms N]
 *             [--hold-ms N] [--cpu-scale F]
 */
#include <sched.h>
#include <signal.h>

#include "kp_common.h"

struct handoff {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int pending; /* work queued, not yet taken */
	int done;    /* work finished, not yet collected */
	double ms;
	int fd; /* handoff mode: the connection to reply on */
};

#define HANDOFF_INIT                                                                               \
	{                                                                                          \
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, -1                   \
	}

static struct handoff to_a2 = HANDOFF_INIT;
static struct handoff to_worker = HANDOFF_INIT;
static struct handoff to_writer = HANDOFF_INIT;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static double period_ms = 100, hold_ms = 12;
static int tid_a2, tid_bg, tid_worker, tid_writer;

static void handoff_post(struct handoff *h, double ms, int fd)
{
	pthread_mutex_lock(&h->mu);
	h->ms = ms;
	h->fd = fd;
	h->pending = 1;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

/* Takes posted work; returns its fd. */
static int handoff_take(struct handoff *h, double *ms)
{
	int fd;

	pthread_mutex_lock(&h->mu);
	while (!h->pending)
		pthread_cond_wait(&h->cv, &h->mu);
	h->pending = 0;
	*ms = h->ms;
	fd = h->fd;
	pthread_mutex_unlock(&h->mu);
	return fd;
}

static void handoff_finish(struct handoff *h)
{
	pthread_mutex_lock(&h->mu);
	h->done = 1;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

static void handoff_wait(struct handoff *h)
{
	pthread_mutex_lock(&h->mu);
	while (!h->done)
		pthread_cond_wait(&h->cv, &h->mu);
	h->done = 0;
	pthread_mutex_unlock(&h->mu);
}

static void *a2_main(void *arg)
{
	double ms;

	kp_set_name("A2");
	__atomic_store_n(&tid_a2, kp_gettid(), __ATOMIC_RELEASE);
	for (;;) {
		handoff_take(&to_a2, &ms);
		kp_spin_ms(ms);
		handoff_finish(&to_a2);
	}
	return NULL;
}

static void *bg_main(void *arg)
{
	uint64_t period = (uint64_t)(period_ms * 1e6);

	kp_set_name("bg");
	__atomic_store_n(&tid_bg, kp_gettid(), __ATOMIC_RELEASE);
	for (;;) {
		/* wake on the period grid, so clients can aim at a phase of it */
		kp_sleep_until((kp_now_ns() / period + 1) * period);
		pthread_mutex_lock(&cache_lock);
		kp_spin_ms(hold_ms);
		pthread_mutex_unlock(&cache_lock);
	}
	return NULL;
}

static void *worker_main(void *arg)
{
	double ms;

	kp_set_name("worker");
	__atomic_store_n(&tid_worker, kp_gettid(), __ATOMIC_RELEASE);
	for (;;) {
		int fd = handoff_take(&to_worker, &ms);

		kp_spin_ms(ms);
		handoff_post(&to_writer, 0, fd);
	}
	return NULL;
}

static void *writer_main(void *arg)
{
	double ms;

	kp_set_name("writer");
	__atomic_store_n(&tid_writer, kp_gettid(), __ATOMIC_RELEASE);
	for (;;) {
		int fd = handoff_take(&to_writer, &ms);

		kp_write_all(fd, KP_HTTP_REPLY, strlen(KP_HTTP_REPLY));
		/* the acceptor reads the next request only after the client saw
		 * this reply, so no acknowledgement back is needed */
	}
	return NULL;
}

static void start_thread(void *(*fn)(void *), int *tid)
{
	pthread_t t;

	if (pthread_create(&t, NULL, fn, NULL))
		kp_die("pthread_create failed");
	while (!__atomic_load_n(tid, __ATOMIC_ACQUIRE))
		usleep(1000);
}

static void pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		kp_die("sched_setaffinity(cpu %d): %s", cpu, strerror(errno));
}

/* The hog is its own process (not traced): a noisy neighbour on A1's CPU. */
static pid_t start_hog(int cpu)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	if (pid < 0)
		kp_die("fork: %s", strerror(errno));
	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	kp_set_name("kp_hog");
	pin_to(cpu);
	for (;;)
		kp_spin_ms(1000);
}

static void call_backend_send(int bfd, const char *key)
{
	char req[64];

	snprintf(req, sizeof(req), "get %s\r\n", key);
	kp_write_all(bfd, req, strlen(req));
}

/* A DNS query for KEY.kp.test, type A, from a UDP socket of its own (as a
 * stub resolver does), and its answer: every other call connects the
 * socket first and uses send/recv, as glibc's resolver does, the others
 * use sendto/recvfrom on an unconnected one. */
static void dns_call(int port, const char *key)
{
	static unsigned int calls;
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct timeval tv = {.tv_sec = 10};
	uint8_t q[128] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
	size_t o = 12, kl = strlen(key);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	char reply[512];

	if (fd < 0 || kl > 60)
		kp_die("dns_call: %s", fd < 0 ? strerror(errno) : "key too long");
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	q[o++] = (uint8_t)kl;
	memcpy(q + o, key, kl);
	o += kl;
	memcpy(q + o, "\2kp\4test\0\0\1\0\1", 13); /* kp.test, type A, class IN */
	o += 13;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (calls++ & 1) {
		if (connect(fd, (struct sockaddr *)&to, sizeof(to)) ||
		    send(fd, q, o, 0) != (ssize_t)o)
			kp_die("dns_call: connect/send: %s", strerror(errno));
		if (recv(fd, reply, sizeof(reply), 0) < 12)
			kp_die("dns_call: no answer: %s", strerror(errno));
	} else {
		if (sendto(fd, q, o, 0, (struct sockaddr *)&to, sizeof(to)) != (ssize_t)o)
			kp_die("dns_call: sendto: %s", strerror(errno));
		if (recvfrom(fd, reply, sizeof(reply), 0, NULL, NULL) < 12)
			kp_die("dns_call: no answer: %s", strerror(errno));
	}
	close(fd);
}

static void call_backend_wait(int bfd)
{
	char buf[256];

	if (!kp_read_until(bfd, buf, sizeof(buf), "END\r\n"))
		kp_die("backend closed the connection");
}

/* The probe mode's functions: external and never inlined, so each is a
 * symbol a uprobe can name. */
__attribute__((noinline)) void probe_parse(void)
{
	kp_spin_ms(3);
}

__attribute__((noinline)) void probe_format(void)
{
	kp_spin_ms(4);
}

__attribute__((noinline)) void probe_render(void)
{
	kp_spin_ms(1);
	probe_format();
	kp_spin_ms(1);
}

static void serve_request(const char *mode, int fd, int bfd, int backend)
{
	if (!strcmp(mode, "seq")) {
		kp_spin_ms(5);
		call_backend_send(bfd, "c20");
		call_backend_wait(bfd);
		kp_spin_ms(8);
		handoff_post(&to_a2, 2, -1);
		handoff_wait(&to_a2);
	} else if (!strcmp(mode, "par")) {
		kp_spin_ms(5);
		call_backend_send(bfd, "c20");
		handoff_post(&to_a2, 2, -1);
		handoff_wait(&to_a2);
		call_backend_wait(bfd);
		kp_spin_ms(8);
	} else if (!strcmp(mode, "overlap_b")) {
		kp_spin_ms(5);
		call_backend_send(bfd, "c20");
		kp_spin_ms(10);
		call_backend_wait(bfd);
		kp_spin_ms(8);
	} else if (!strcmp(mode, "overlap_a")) {
		kp_spin_ms(5);
		call_backend_send(bfd, "c5");
		kp_spin_ms(20);
		call_backend_wait(bfd);
		kp_spin_ms(8);
	} else if (!strcmp(mode, "lock")) {
		pthread_mutex_lock(&cache_lock);
		kp_spin_ms(1);
		pthread_mutex_unlock(&cache_lock);
	} else if (!strcmp(mode, "starve")) {
		kp_spin_ms(10);
	} else if (!strcmp(mode, "handoff")) {
		handoff_post(&to_worker, 10, fd);
		return; /* the writer replies */
	} else if (!strcmp(mode, "probe")) {
		probe_parse();
		probe_render();
	} else if (!strcmp(mode, "untraced")) {
		kp_spin_ms(2);
		call_backend_send(bfd, "s15");
		call_backend_wait(bfd);
		kp_spin_ms(2);
	} else if (!strcmp(mode, "udp")) {
		kp_spin_ms(2);
		dns_call(backend, "s15");
		kp_spin_ms(2);
	}
	kp_write_all(fd, KP_HTTP_REPLY, strlen(KP_HTTP_REPLY));
}

int main(int argc, char **argv)
{
	static const char *const modes[] = {"seq",    "par",	 "overlap_b", "overlap_a", "lock",
					    "starve", "handoff", "untraced",  "probe",	   "udp"};
	const char *mode = NULL;
	int port = 0, backend = 0, lfd, bfd = -1, hog_cpu = -1, known = 0;
	bool v6 = false;
	pid_t hog = 0;
	char buf[4096];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mode") && i + 1 < argc)
			mode = argv[++i];
		else if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
			backend = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--period-ms") && i + 1 < argc)
			period_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--hold-ms") && i + 1 < argc)
			hold_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--backend-v6"))
			v6 = true;
		else if (!strcmp(argv[i], "--cpu-scale") && i + 1 < argc)
			kp_cpu_scale = atof(argv[++i]);
		else
			mode = NULL, i = argc;
	}
	for (size_t i = 0; mode && i < sizeof(modes) / sizeof(modes[0]); i++)
		known |= !strcmp(mode, modes[i]);
	if (!known || !(kp_cpu_scale > 0))
		kp_die("usage: kp_server --mode seq|par|overlap_b|overlap_a|lock|starve|handoff|"
		       "untraced|probe|udp [--port N] [--backend PORT] [--backend-v6] "
		       "[--period-ms N] [--hold-ms N] [--cpu-scale F]");
	if (strstr("seq par overlap_b overlap_a untraced udp", mode) && !backend)
		kp_die("kp_server: --mode %s needs --backend PORT", mode);

	lfd = kp_listen(port, &port);
	if (backend && strcmp(mode, "udp"))
		bfd = v6 ? kp_connect_v6(backend) : kp_connect(backend);
	if (!strcmp(mode, "seq") || !strcmp(mode, "par"))
		start_thread(a2_main, &tid_a2);
	if (!strcmp(mode, "lock"))
		start_thread(bg_main, &tid_bg);
	if (!strcmp(mode, "handoff")) {
		start_thread(worker_main, &tid_worker);
		start_thread(writer_main, &tid_writer);
	}
	if (!strcmp(mode, "starve")) {
		hog_cpu = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0;
		pin_to(hog_cpu);
		hog = start_hog(hog_cpu);
	}
	printf("READY pid=%d port=%d A1=%d A2=%d bg=%d worker=%d writer=%d hog_pid=%d hog_cpu=%d\n",
	       getpid(), port, kp_gettid(), tid_a2, tid_bg, tid_worker, tid_writer, (int)hog,
	       hog_cpu);
	fflush(stdout);

	for (;;) {
		int one = 1, fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			kp_die("accept: %s", strerror(errno));
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		while (kp_read_until(fd, buf, sizeof(buf), "\r\n\r\n"))
			serve_request(mode, fd, bfd, backend);
		close(fd);
	}
}
