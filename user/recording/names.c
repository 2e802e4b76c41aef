// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include <stdio.h>

#include "recording.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static __thread char unknown_buf[4][48];
static __thread unsigned int unknown_next;

static const char *unknown(const char *what, unsigned long v)
{
	char *b = unknown_buf[unknown_next++ % N_ELEMS(unknown_buf)];

	snprintf(b, sizeof(unknown_buf[0]), "%s(%lu)", what, v);
	return b;
}

const char *cp_rec_type_name(uint16_t type)
{
	switch (type) {
#define NAME(t, name, size)                                                                        \
	case t:                                                                                    \
		return name;
		CP_EVENT_TYPES(NAME)
		CP_META_TYPES(NAME)
#undef NAME
	default:
		return unknown("unknown", type);
	}
}

const char *cp_tls_call_name(uint8_t call)
{
	static const char *const names[] = {
	    [CP_TLS_SSL_READ] = "SSL_read",
	    [CP_TLS_SSL_READ_EX] = "SSL_read_ex",
	    [CP_TLS_SSL_WRITE] = "SSL_write",
	    [CP_TLS_SSL_WRITE_EX] = "SSL_write_ex",
	    [CP_TLS_GO_READ] = "crypto/tls.(*Conn).Read",
	    [CP_TLS_GO_WRITE] = "crypto/tls.(*Conn).Write",
	    [CP_TLS_SSL_READ_ANY] = "SSL_read(_ex)",
	    [CP_TLS_SSL_WRITE_ANY] = "SSL_write(_ex)",
	};
	return call < N_ELEMS(names) && names[call] ? names[call] : unknown("unknown", call);
}

const char *cp_sock_call_name(uint8_t call)
{
	static const char *const names[] = {
	    [CP_SOCK_ACCEPT] = "accept",     [CP_SOCK_ACCEPT4] = "accept4",
	    [CP_SOCK_CONNECT] = "connect",   [CP_SOCK_READ] = "read",
	    [CP_SOCK_WRITE] = "write",	     [CP_SOCK_READV] = "readv",
	    [CP_SOCK_WRITEV] = "writev",     [CP_SOCK_RECVFROM] = "recvfrom",
	    [CP_SOCK_SENDTO] = "sendto",     [CP_SOCK_RECVMSG] = "recvmsg",
	    [CP_SOCK_SENDMSG] = "sendmsg",   [CP_SOCK_RECVMMSG] = "recvmmsg",
	    [CP_SOCK_SENDMMSG] = "sendmmsg", [CP_SOCK_CLOSE] = "close",
	    [CP_SOCK_SHUTDOWN] = "shutdown",
	};
	return call < N_ELEMS(names) && names[call] ? names[call] : unknown("unknown", call);
}

const char *cp_poll_call_name(uint8_t call)
{
	static const char *const names[] = {
	    [CP_POLL_EPOLL_WAIT] = "epoll_wait",
	    [CP_POLL_EPOLL_PWAIT] = "epoll_pwait",
	    [CP_POLL_EPOLL_PWAIT2] = "epoll_pwait2",
	    [CP_POLL_POLL] = "poll",
	    [CP_POLL_PPOLL] = "ppoll",
	    [CP_POLL_SELECT] = "select",
	    [CP_POLL_PSELECT6] = "pselect6",
	};
	return call < N_ELEMS(names) && names[call] ? names[call] : unknown("unknown", call);
}

const char *cp_softirq_name(uint8_t vec)
{
	/* The kernel's softirq_to_name[] spelling, upper case. */
	static const char *const names[] = {
	    [CP_SOFTIRQ_HI] = "HI",	      [CP_SOFTIRQ_TIMER] = "TIMER",
	    [CP_SOFTIRQ_NET_TX] = "NET_TX",   [CP_SOFTIRQ_NET_RX] = "NET_RX",
	    [CP_SOFTIRQ_BLOCK] = "BLOCK",     [CP_SOFTIRQ_IRQ_POLL] = "IRQ_POLL",
	    [CP_SOFTIRQ_TASKLET] = "TASKLET", [CP_SOFTIRQ_SCHED] = "SCHED",
	    [CP_SOFTIRQ_HRTIMER] = "HRTIMER", [CP_SOFTIRQ_RCU] = "RCU",
	};
	if (vec == CP_SOFTIRQ_NONE)
		return "NONE";
	return vec < N_ELEMS(names) && names[vec] ? names[vec] : unknown("unknown", vec);
}

const char *cp_waker_ctx_name(uint8_t ctx, uint8_t softirq_vec)
{
	static __thread char buf[48];

	switch (ctx) {
	case CP_CTX_TASK:
		return "task";
	case CP_CTX_HARDIRQ:
		return "hardirq";
	case CP_CTX_NMI:
		return "nmi";
	case CP_CTX_SOFTIRQ:
		snprintf(buf, sizeof(buf), "softirq:%s", cp_softirq_name(softirq_vec));
		return buf;
	default:
		return unknown("unknown", ctx);
	}
}

const char *cp_prev_state_name(uint8_t state)
{
	switch (state) {
	case CP_PREV_PREEMPTED:
		return "preempted";
	case CP_PREV_BLOCKED:
		return "blocked";
	case CP_PREV_DEAD:
		return "dead";
	default:
		return unknown("unknown", state);
	}
}

const char *cp_futex_call_name(uint8_t call)
{
	switch (call) {
	case CP_FUTEX_CALL_FUTEX:
		return "futex";
	case CP_FUTEX_CALL_WAIT:
		return "futex_wait";
	case CP_FUTEX_CALL_WAKE:
		return "futex_wake";
	case CP_FUTEX_CALL_WAITV:
		return "futex_waitv";
	default:
		return unknown("unknown", call);
	}
}

const char *recording_codec_name(uint32_t codec)
{
	switch (codec) {
	case RECORDING_ZSTD:
		return "zstd";
	case RECORDING_LZ4:
		return "lz4";
	default:
		return unknown("unknown", codec);
	}
}

#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_CLOCK_REALTIME 256
#define FUTEX2_PRIVATE 128

const char *cp_futex_op_name(uint8_t call, uint32_t op)
{
	static const char *const cmds[] = {
	    "FUTEX_WAIT",	    "FUTEX_WAKE",	 "FUTEX_FD",
	    "FUTEX_REQUEUE",	    "FUTEX_CMP_REQUEUE", "FUTEX_WAKE_OP",
	    "FUTEX_LOCK_PI",	    "FUTEX_UNLOCK_PI",	 "FUTEX_TRYLOCK_PI",
	    "FUTEX_WAIT_BITSET",    "FUTEX_WAKE_BITSET", "FUTEX_WAIT_REQUEUE_PI",
	    "FUTEX_CMP_REQUEUE_PI", "FUTEX_LOCK_PI2",
	};
	static __thread char buf[80];
	const char *base, *priv = "", *rt = "";
	uint32_t cmd = op & 127;

	switch (call) {
	case CP_FUTEX_CALL_FUTEX:
		if (op & ~(127u | FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME) ||
		    cmd >= N_ELEMS(cmds))
			return unknown("FUTEX_OP", op);
		base = cmds[cmd];
		priv = op & FUTEX_PRIVATE_FLAG ? "_PRIVATE" : "";
		rt = op & FUTEX_CLOCK_REALTIME ? "|FUTEX_CLOCK_REALTIME" : "";
		break;
	case CP_FUTEX_CALL_WAIT:
		base = "FUTEX2_WAIT";
		break;
	case CP_FUTEX_CALL_WAKE:
		base = "FUTEX2_WAKE";
		break;
	case CP_FUTEX_CALL_WAITV:
		base = "FUTEX2_WAITV";
		break;
	default:
		return unknown("FUTEX_OP", op);
	}
	/* futex2 calls: op holds the FUTEX2_* flags (size, private). */
	if (call != CP_FUTEX_CALL_FUTEX && (op & FUTEX2_PRIVATE))
		priv = "_PRIVATE";
	snprintf(buf, sizeof(buf), "%s%s%s", base, priv, rt);
	return buf;
}
