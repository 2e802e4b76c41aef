// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The event ABI: sizes and the offsets that BPF, the recorder and the reader
 * all depend on. A change here breaks every recording already written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "recfile.h"
#include "recording.h"

#define OFF(type, field, n) assert_int_equal(offsetof(type, field), n)

static void test_header(void **state)
{
	assert_int_equal(sizeof(struct cp_hdr), 24);
	OFF(struct cp_hdr, type, 0);
	OFF(struct cp_hdr, size, 2);
	OFF(struct cp_hdr, cpu, 4);
	OFF(struct cp_hdr, pid, 8);
	OFF(struct cp_hdr, tid, 12);
	OFF(struct cp_hdr, ts, 16);
	assert_int_equal(CP_ALIGN(1), 8);
	assert_int_equal(CP_ALIGN(8), 8);
	assert_int_equal(CP_ALIGN(33), 40);
}

static void test_events(void **state)
{
	OFF(struct cp_ev_sched_switch, prev_pid, 24);
	OFF(struct cp_ev_sched_switch, prev_state, 40);
	OFF(struct cp_ev_sched_switch, prev_state_raw, 44);
	OFF(struct cp_ev_sched_switch, next_comm, 48);
	OFF(struct cp_ev_sched_waking, waker_ctx, 40);
	OFF(struct cp_ev_sched_waking, softirq_vec, 41);
	OFF(struct cp_ev_sched_waking, target_cpu, 42);
	OFF(struct cp_ev_process_fork, child_comm, 40);
	OFF(struct cp_ev_process_exec, filename_len, 28);
	OFF(struct cp_ev_process_exec, filename, 32);
	OFF(struct cp_ev_futex, enter_ts, 24);
	OFF(struct cp_ev_futex, uaddr, 32);
	OFF(struct cp_ev_futex, ret, 40);
	OFF(struct cp_ev_futex, op, 48);
	OFF(struct cp_ev_futex, phase, 56);
	OFF(struct cp_ev_futex, call, 57);
	OFF(struct cp_ev_sock, enter_ts, 24);
	OFF(struct cp_ev_sock, bytes, 32);
	OFF(struct cp_ev_sock, fd, 40);
	OFF(struct cp_ev_sock, phase, 44);
	OFF(struct cp_ev_sock, call, 45);
	OFF(struct cp_ev_sock, family, 46);
	OFF(struct cp_ev_sock, tcp_seq, 52);
	OFF(struct cp_ev_sock, laddr, 56);
	OFF(struct cp_ev_sock, raddr, 72);
	OFF(struct cp_ev_sock, payload_len, 88);
	OFF(struct cp_ev_sock, sock_type, 90);
	OFF(struct cp_ev_sock, flags, 91); /* was padding: 0 before ABI 2 */
	OFF(struct cp_ev_sock, unsent, 92); /* was padding: 0 before ABI 3 */
	OFF(struct cp_ev_sock, payload, 96);
	OFF(struct cp_ev_sk_data_ready, protocol, 30);
	OFF(struct cp_ev_sk_data_ready, rcv_nxt, 32);
	OFF(struct cp_ev_sk_data_ready, laddr, 40);
	OFF(struct cp_ev_poll, enter_ts, 24);
	OFF(struct cp_ev_poll, phase, 40);
	OFF(struct cp_ev_block, sector, 24);
	OFF(struct cp_ev_runq_culprit, ns, 32);
	OFF(struct cp_ev_runq_culprit, culprit_comm, 48);
	OFF(struct cp_ev_uprobe, probe_id, 24);
	OFF(struct cp_ev_tls_read, enter_ts, 24);
	OFF(struct cp_ev_tls_read, bytes, 32);
	OFF(struct cp_ev_tls_read, fd, 40);
	OFF(struct cp_ev_tls_read, call, 44);
	OFF(struct cp_ev_tls_read, family, 46);
	OFF(struct cp_ev_tls_read, tcp_seq, 52);
	OFF(struct cp_ev_tls_read, laddr, 56);
	OFF(struct cp_ev_tls_read, raddr, 72);
	OFF(struct cp_ev_tls_read, payload_len, 88);
	OFF(struct cp_ev_tls_read, payload, 96);
	/* Records stay 8-byte aligned inside a frame. */
	assert_int_equal(sizeof(struct cp_ev_sock) % 8, 0);
	assert_int_equal(sizeof(struct cp_ev_tls_read) % 8, 0);
	assert_int_equal(sizeof(struct cp_ev_process_exec) % 8, 0);
}

static void test_metadata(void **state)
{
	OFF(struct cp_md_process, ppid, 24);
	OFF(struct cp_md_process, exe_len, 28);
	OFF(struct cp_md_process, cmdline_len, 30);
	OFF(struct cp_md_process, comm, 32);
	OFF(struct cp_md_process, data, 48);
	OFF(struct cp_md_thread, comm, 24);
	OFF(struct cp_md_socket, laddr, 40);
	OFF(struct cp_md_loss, events, 40);
	OFF(struct cp_md_hook, name, 32);
	OFF(struct cp_md_hook, detail, 96);
	OFF(struct cp_md_probe, binary, 32);
	OFF(struct cp_md_probe, symbol, 288);
}

/* The reader's minimum sizes: the fixed structs whole, variable ones up to
 * their tail. */
static void test_min_sizes(void **state)
{
	assert_int_equal(recfile__min_size(CP_EV_SCHED_SWITCH), sizeof(struct cp_ev_sched_switch));
	assert_int_equal(recfile__min_size(CP_EV_FUTEX), sizeof(struct cp_ev_futex));
	assert_int_equal(recfile__min_size(CP_EV_SOCK), 96);
	assert_int_equal(recfile__min_size(CP_EV_TLS_READ), 96);
	assert_int_equal(recfile__min_size(CP_EV_PROCESS_EXEC), 40);
	assert_int_equal(recfile__min_size(CP_MD_PROCESS), 48);
	assert_int_equal(recfile__min_size(CP_MD_PROBE), sizeof(struct cp_md_probe));
	assert_int_equal(recfile__min_size(0x7777), 24);
	for (uint16_t t = 0; t < 0x200; t++)
		assert_true(recfile__min_size(t) % 8 == 0);
}

static void test_names(void **state)
{
	assert_string_equal(cp_rec_type_name(CP_EV_SCHED_SWITCH), "sched_switch");
	assert_string_equal(cp_rec_type_name(CP_MD_LOSS), "loss");
	assert_string_equal(cp_rec_type_name(999), "unknown(999)");
	assert_string_equal(cp_sock_call_name(CP_SOCK_RECVFROM), "recvfrom");
	assert_string_equal(cp_sock_call_name(200), "unknown(200)");
	assert_string_equal(cp_rec_type_name(CP_EV_TLS_READ), "tls_read");
	assert_string_equal(cp_tls_call_name(CP_TLS_SSL_READ_EX), "SSL_read_ex");
	assert_string_equal(cp_tls_call_name(CP_TLS_SSL_READ_ANY), "SSL_read(_ex)");
	assert_string_equal(cp_tls_call_name(CP_TLS_SSL_WRITE_ANY), "SSL_write(_ex)");
	assert_string_equal(cp_tls_call_name(10), "unknown(10)");
	assert_string_equal(cp_poll_call_name(CP_POLL_EPOLL_PWAIT2), "epoll_pwait2");
	assert_string_equal(cp_softirq_name(CP_SOFTIRQ_NET_RX), "NET_RX");
	assert_string_equal(cp_waker_ctx_name(CP_CTX_SOFTIRQ, CP_SOFTIRQ_TIMER), "softirq:TIMER");
	assert_string_equal(cp_waker_ctx_name(CP_CTX_HARDIRQ, CP_SOFTIRQ_NONE), "hardirq");
	assert_string_equal(cp_prev_state_name(CP_PREV_BLOCKED), "blocked");
	assert_string_equal(cp_futex_op_name(CP_FUTEX_CALL_FUTEX, 128), "FUTEX_WAIT_PRIVATE");
	assert_string_equal(cp_futex_op_name(CP_FUTEX_CALL_FUTEX, 1), "FUTEX_WAKE");
	assert_string_equal(cp_futex_op_name(CP_FUTEX_CALL_FUTEX, 9 | 128 | 256),
			    "FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME");
	assert_string_equal(cp_futex_op_name(CP_FUTEX_CALL_WAIT, 128 | 2), "FUTEX2_WAIT_PRIVATE");
	assert_string_equal(cp_futex_op_name(CP_FUTEX_CALL_FUTEX, 99), "FUTEX_OP(99)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_header),   cmocka_unit_test(test_events),
	    cmocka_unit_test(test_metadata), cmocka_unit_test(test_min_sizes),
	    cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
