// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Recording writer and reader throughput on one core, against the budgets of
 * DESIGN.md section 7: the recorder must write >= 1M events/s, report must
 * read >= 5M events/s. Synthetic events in the mix a request/response server
 * produces (switches, wakeups, futex, socket calls with payload, polls),
 * slightly out of time order as the ring buffer delivers them. Both codecs
 * (record --compress): lz4, the default, then zstd.
 *
 *   bench_recording [EVENTS] [FILE]     default 2000000, /tmp/critpath-bench.rec
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "recording.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 88172645463325252ull;

static uint32_t xr(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

/* The i-th synthetic event into buf; returns its header. */
static struct cp_hdr *make_event(uint8_t *buf, uint64_t i)
{
	static const char req[] = "GET /cart/items?user=4711 HTTP/1.1\r\nHost: shop\r\n"
				  "User-Agent: loadgen/1.0\r\nAccept: */*\r\n\r\n";
	struct cp_hdr *h = (struct cp_hdr *)buf;
	uint32_t r = xr();
	uint32_t tid = 1000 + r % 8;

	memset(buf, 0, 128);
	h->cpu = r >> 8 & 1;
	h->pid = 1000;
	h->tid = tid;
	/* ~1 µs apart, up to 2 µs late */
	h->ts = 1000000000ull + i * 1000 + (r >> 12) % 2000;
	switch (i % 8) {
	case 0:
	case 1: {
		struct cp_ev_sched_switch *e = (void *)h;
		h->type = CP_EV_SCHED_SWITCH;
		h->size = sizeof(*e);
		e->prev_pid = 1000, e->prev_tid = tid, e->next_pid = 0, e->next_tid = 0;
		e->prev_state = CP_PREV_BLOCKED, e->prev_state_raw = 1;
		strcpy(e->next_comm, "swapper/1");
		break;
	}
	case 2:
	case 3: {
		struct cp_ev_sched_waking *e = (void *)h;
		h->type = CP_EV_SCHED_WAKING;
		h->size = sizeof(*e);
		e->wakee_pid = 1000, e->wakee_tid = 1000 + (r >> 4) % 8;
		e->waker_ctx = r % 3 ? CP_CTX_TASK : CP_CTX_SOFTIRQ;
		e->softirq_vec = e->waker_ctx ? CP_SOFTIRQ_NET_RX : CP_SOFTIRQ_NONE;
		e->waker_pid = e->waker_ctx ? 0 : 1000, e->waker_tid = e->waker_ctx ? 0 : tid;
		break;
	}
	case 4: {
		struct cp_ev_futex *e = (void *)h;
		h->type = CP_EV_FUTEX;
		h->size = sizeof(*e);
		e->enter_ts = h->ts - 5000 - r % 50000;
		e->uaddr = 0x55d0c0de1000ull + (r & 0x3f) * 8;
		e->op = 128 + (r & 1);
		e->phase = CP_PHASE_EXIT;
		break;
	}
	case 5:
	case 6: {
		struct cp_ev_sock *e = (void *)h;
		uint16_t pl = (i % 8 == 5) ? sizeof(req) - 1 : 0;
		h->type = CP_EV_SOCK;
		h->size = CP_ALIGN(offsetof(struct cp_ev_sock, payload) + pl);
		memset(buf + 96, 0, h->size - 96);
		e->enter_ts = h->ts - 3000;
		e->bytes = pl ? pl : 200;
		e->fd = 7 + tid % 8;
		e->phase = CP_PHASE_EXIT;
		e->call = pl ? CP_SOCK_READ : CP_SOCK_WRITE;
		e->family = 2, e->lport = 8080, e->rport = 40000 + tid % 8;
		e->laddr[0] = e->raddr[0] = 127, e->laddr[3] = e->raddr[3] = 1;
		e->tcp_seq = (uint32_t)(i * 131);
		e->sock_type = 1;
		e->payload_len = pl;
		memcpy(e->payload, req, pl);
		break;
	}
	default: {
		struct cp_ev_poll *e = (void *)h;
		h->type = CP_EV_POLL;
		h->size = sizeof(*e);
		e->enter_ts = h->ts - 20000;
		e->ret = 1;
		e->phase = CP_PHASE_EXIT;
		break;
	}
	}
	return h;
}

static double read_all(const char *path, enum recording_order order, uint64_t *n)
{
	struct recording_reader *r;
	const struct cp_hdr *rec;
	uint64_t sum = 0;
	double t0 = now();

	if (recording_reader__open(&r, path, order)) {
		fprintf(stderr, "bench_recording: %s\n", recording_reader__open_error());
		exit(1);
	}
	*n = 0;
	while (recording_reader__next(r, &rec) == 1) {
		sum += rec->ts; /* touch every record */
		(*n)++;
	}
	if (recording_reader__stopped(r)) {
		fprintf(stderr, "bench_recording: %s\n", recording_reader__stopped(r));
		exit(1);
	}
	recording_reader__close(r);
	if (sum == 42)
		printf("#");
	return now() - t0;
}

static int run(uint64_t n, const char *path, uint32_t codec)
{
	struct recording_info info = {.agent_version = "bench", .host = "bench", .codec = codec};
	struct recording_writer *w;
	uint8_t buf[1024] __attribute__((aligned(8)));
	uint64_t raw = 0, got;
	double t0, tgen, tw, tf, tt;
	int err;

	/* The cost of making events, to subtract from the write time. */
	t0 = now();
	for (uint64_t i = 0; i < n; i++)
		raw += make_event(buf, i)->size;
	tgen = now() - t0;

	rng = 88172645463325252ull;
	t0 = now();
	err = recording_writer__open(&w, path, &info);
	for (uint64_t i = 0; !err && i < n; i++)
		err = recording_writer__append(w, make_event(buf, i));
	if (!err)
		err = recording_writer__close(w, NULL);
	if (err) {
		fprintf(stderr, "bench_recording: writing %s: %s\n", path, strerror(-err));
		return 1;
	}
	tw = now() - t0 - tgen;

	struct stat st;
	stat(path, &st);
	tf = read_all(path, RECORDING_FILE_ORDER, &got);
	tt = read_all(path, RECORDING_TIME_ORDER, &got);
	if (got != n) {
		fprintf(stderr, "bench_recording: read %llu of %llu events\n",
			(unsigned long long)got, (unsigned long long)n);
		return 1;
	}
	printf("recording (%s): %llu events, %.1f raw bytes/event, %.1f bytes/event on disk "
	       "(compression %.1fx)\n",
	       recording_codec_name(codec), (unsigned long long)n, (double)raw / n,
	       (double)st.st_size / n, (double)raw / st.st_size);
	printf("write:              %6.2f M events/s  = %5.1fx the 1M/s budget\n", n / tw / 1e6,
	       n / tw / 1e6);
	printf("read (file order):  %6.2f M events/s  = %5.1fx the 5M/s budget\n", n / tf / 1e6,
	       n / tf / 5e6);
	printf("read (time order):  %6.2f M events/s  = %5.1fx the 5M/s budget\n", n / tt / 1e6,
	       n / tt / 5e6);
	unlink(path);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
	const char *path = argc > 2 ? argv[2] : "/tmp/critpath-bench.rec";

	return run(n, path, RECORDING_LZ4) || run(n, path, RECORDING_ZSTD);
}
