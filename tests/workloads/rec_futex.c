// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * rec_futex: two threads, A (main) and B, ping-pong N times through raw
 * futex calls. Each waits with FUTEX_WAIT_PRIVATE on its own word, which
 * stays 0, so every wait blocks until the other thread's FUTEX_WAKE_PRIVATE;
 * the waker repeats its wake until it has woken one waiter (the other may not
 * be asleep yet). So: exactly N waits per thread, each woken by the other.
 * A sequence number per thread tells a real hand-off from a spurious wakeup.
 *
 *   rec_futex N [LINGER_MS]
 *
 * Prints "READY pid=P a=TID b=TID wa=0xADDR wb=0xADDR n=N", waits for go
 * (see rec_common.h), ping-pongs, prints "DONE spurious=K", stays LINGER_MS
 * (so a recorder following an exec sees the process alive), exits 0.
 */
#include <linux/futex.h>
#include <pthread.h>

#include "rec_common.h"

static uint32_t word_a, word_b;	       /* futex words: always 0 */
static volatile uint32_t seq_a, seq_b; /* hand-offs to A and to B */
static long rounds;
static int tid_b;
static volatile int spurious;

static long futex(uint32_t *uaddr, int op, uint32_t val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

/* Sleeps at least once (the waker retries until it finds us asleep), then
 * until *seq has moved past seen. */
static void wait_turn(uint32_t *word, volatile uint32_t *seq, uint32_t seen)
{
	for (;;) {
		if (futex(word, FUTEX_WAIT_PRIVATE, 0) && errno != EINTR)
			kp_die("futex wait: %s", strerror(errno));
		if (__atomic_load_n(seq, __ATOMIC_ACQUIRE) != seen)
			return;
		spurious++;
	}
}

/* Hands the turn over: the other thread is (or will be) asleep on word. */
static void give_turn(uint32_t *word, volatile uint32_t *seq)
{
	__atomic_add_fetch(seq, 1, __ATOMIC_RELEASE);
	for (;;) {
		long n = futex(word, FUTEX_WAKE_PRIVATE, 1);

		if (n < 0)
			kp_die("futex wake: %s", strerror(errno));
		if (n == 1)
			return;
		sched_yield();
	}
}

static void *thread_b(void *arg)
{
	__atomic_store_n(&tid_b, kp_gettid(), __ATOMIC_RELEASE);
	rec_go_wait();
	for (long i = 0; i < rounds; i++) {
		wait_turn(&word_b, &seq_b, (uint32_t)i);
		give_turn(&word_a, &seq_a);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long linger_ms = 0;
	pthread_t b;

	if (argc < 2 || argc > 3)
		kp_die("usage: rec_futex N [LINGER_MS]");
	rounds = rec_arg(argv[1], 1, 1000000, "N");
	if (argc == 3)
		linger_ms = rec_arg(argv[2], 0, 600000, "LINGER_MS");
	rec_go_init();
	if (pthread_create(&b, NULL, thread_b, NULL))
		kp_die("pthread_create failed");
	while (!__atomic_load_n(&tid_b, __ATOMIC_ACQUIRE))
		sched_yield();
	printf("READY pid=%d a=%d b=%d wa=%p wb=%p n=%ld\n", getpid(), kp_gettid(), tid_b,
	       (void *)&word_a, (void *)&word_b, rounds);
	rec_go(1);
	for (long i = 0; i < rounds; i++) {
		give_turn(&word_b, &seq_b);
		wait_turn(&word_a, &seq_a, (uint32_t)i);
	}
	pthread_join(b, NULL);
	printf("DONE spurious=%d\n", spurious);
	fflush(stdout);
	if (linger_ms)
		usleep(linger_ms * 1000);
	return 0;
}
