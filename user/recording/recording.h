/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Recording files (DESIGN.md 4): header, independent zstd or lz4 frames,
 * trailer. Functions return 0 or -errno. */
#ifndef CRITPATH_RECORDING_H
#define CRITPATH_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "critpath_abi.h"

#define CP_EVENT_TYPES(X)                                                                          \
	X(CP_EV_SCHED_SWITCH, "sched_switch", sizeof(struct cp_ev_sched_switch))                   \
	X(CP_EV_SCHED_WAKING, "sched_waking", sizeof(struct cp_ev_sched_waking))                   \
	X(CP_EV_WAKEUP_NEW, "sched_wakeup_new", sizeof(struct cp_ev_wakeup_new))                   \
	X(CP_EV_PROCESS_FORK, "process_fork", sizeof(struct cp_ev_process_fork))                   \
	X(CP_EV_PROCESS_EXEC, "process_exec",                                                      \
	  CP_ALIGN(offsetof(struct cp_ev_process_exec, filename) + 1))                             \
	X(CP_EV_PROCESS_EXIT, "process_exit", sizeof(struct cp_ev_process_exit))                   \
	X(CP_EV_FUTEX, "futex", sizeof(struct cp_ev_futex))                                        \
	X(CP_EV_SOCK, "sock", offsetof(struct cp_ev_sock, payload))                                \
	X(CP_EV_SK_DATA_READY, "sk_data_ready", sizeof(struct cp_ev_sk_data_ready))                \
	X(CP_EV_POLL, "poll", sizeof(struct cp_ev_poll))                                           \
	X(CP_EV_BLOCK, "block", sizeof(struct cp_ev_block))                                        \
	X(CP_EV_RUNQ_CULPRIT, "runq_culprit", sizeof(struct cp_ev_runq_culprit))                   \
	X(CP_EV_UPROBE, "uprobe", sizeof(struct cp_ev_uprobe))                                     \
	X(CP_EV_TLS_READ, "tls_read", offsetof(struct cp_ev_tls_read, payload))
#define CP_META_TYPES(X)                                                                           \
	X(CP_MD_PROCESS, "process", sizeof(struct cp_md_process))                                  \
	X(CP_MD_THREAD, "thread", sizeof(struct cp_md_thread))                                     \
	X(CP_MD_SOCKET, "socket", sizeof(struct cp_md_socket))                                     \
	X(CP_MD_LOSS, "loss", sizeof(struct cp_md_loss))                                           \
	X(CP_MD_HOOK, "hook", sizeof(struct cp_md_hook))                                           \
	X(CP_MD_PROBE, "probe", sizeof(struct cp_md_probe))
#define CP_FIXED_SIZE(type) ((type) != CP_EV_PROCESS_EXEC && (type) != CP_EV_SOCK && \
			     (type) != CP_EV_TLS_READ)

/* Format 2: format 1 with lz4 frames allowed (written only for lz4). */
#define RECORDING_FORMAT_VERSION 2
#define RECORDING_FORMAT_VERSION_MIN 1

enum recording_codec {
	RECORDING_ZSTD = 0,
	RECORDING_LZ4 = 1,
};

struct recording_cpu {
	int cpu;
	char model[96];		/* "Intel(R) Xeon(R) …", from /proc/cpuinfo */
	uint32_t mhz;		/* nominal or current, 0 = unknown */
	uint32_t capacity;	/* /sys/devices/system/cpu/cpuN/cpu_capacity, 1024 if absent */
};

struct recording_info {
	uint32_t format_version; /* reader: the file's; the writer picks its own */
	uint32_t codec;		 /* enum recording_codec (header flags bit 0) */
	const char *agent_version;
	const char *cmdline;		/* the critpath command line that made it */
	const char *host;
	const char *kernel;		/* uname -r */
	const char *boot_id;
	const char *sku;		/* --sku label, or NULL */
	int64_t realtime_offset_ns;	/* CLOCK_REALTIME - CLOCK_MONOTONIC at start */
	uint64_t start_ns;		/* CLOCK_MONOTONIC at start */
	uint32_t payload_bytes;		/* --payload-bytes in force */
	uint32_t ncpus;
	const struct recording_cpu *cpus;
	int64_t clock_shift_ns;
};

struct recording_totals {
	uint64_t end_ns;
	uint64_t events;		/* kernel events written */
	uint64_t metadata;		/* metadata records written */
	uint64_t lost;			/* events lost (sum of CP_MD_LOSS) */
	uint32_t frames;
};

struct recording_writer;

/* path made or truncated by output__open (outfile.h), the header written;
 * when even that fails, no file is left. 0 or -errno. */
int recording_writer__open(struct recording_writer **w, const char *path,
			   const struct recording_info *info);
/* The same on an fd of the caller's, which w owns from now on (closed on
 * failure too). */
int recording_writer__open_fd(struct recording_writer **w, int fd,
			      const struct recording_info *info);
typedef int (*recording_tap_fn)(void *ctx, const struct cp_hdr *rec);
int recording_writer__open_tap(struct recording_writer **w, recording_tap_fn tap, void *ctx);
/* One record (rec->size a multiple of 8); a full batch is compressed and written. */
int recording_writer__append(struct recording_writer *w, const struct cp_hdr *rec);
/* Ends and writes the current frame; with a background thread, its first error. */
int recording_writer__flush(struct recording_writer *w);
/* Frames compressed and written by a thread of their own from now on. */
int recording_writer__background(struct recording_writer *w, unsigned frames);
/* Flushes, writes the trailer, fsyncs, closes, frees w. No trailer after a
 * failed flush. */
int recording_writer__close(struct recording_writer *w, const struct recording_totals *totals);
/* The same, and how many records never reached the file. */
int recording_writer__close_counted(struct recording_writer *w,
				    const struct recording_totals *totals, uint64_t *unwritten);
/* Bytes written so far (for the recorder's summary). */
uint64_t recording_writer__bytes(const struct recording_writer *w);

struct recording_reader;

enum recording_order {
	RECORDING_FILE_ORDER = 0,
	/* time order, merged within a bounded reorder window */
	RECORDING_TIME_ORDER = 1,
};

/* True when the first len (>= 8) bytes look like a recording. */
bool recording__sniff(const void *head, size_t len);

int recording_reader__open(struct recording_reader **r, const char *path, enum recording_order order);
/* Why the last open in this thread failed, naming the file. */
const char *recording_reader__open_error(void);
const struct recording_info *recording_reader__info(const struct recording_reader *r);
/* 1 and *rec set (valid until the next call), 0 at the end, <0 on an error. */
int recording_reader__next(struct recording_reader *r, const struct cp_hdr **rec);
/* NULL after a clean end, else one line saying where and why it stopped. */
const char *recording_reader__stopped(const struct recording_reader *r);
/* The trailer's totals, or NULL for a file cut short. */
const struct recording_totals *recording_reader__totals(const struct recording_reader *r);
int recording_reader__end_totals(const struct recording_reader *r, struct recording_totals *t);
void recording_reader__close(struct recording_reader *r);

const char *cp_rec_type_name(uint16_t type);
const char *cp_sock_call_name(uint8_t call);
const char *cp_tls_call_name(uint8_t call); /* "SSL_read", … */
const char *cp_poll_call_name(uint8_t call);
const char *cp_softirq_name(uint8_t vec);	/* "NET_RX" */
/* "task", "hardirq", "softirq:NET_RX", "nmi" */
const char *cp_waker_ctx_name(uint8_t ctx, uint8_t softirq_vec);
const char *cp_prev_state_name(uint8_t state);	/* "preempted", "blocked", "dead" */
const char *cp_futex_op_name(uint8_t call, uint32_t op);
const char *cp_futex_call_name(uint8_t call);	/* "futex", "futex_wait", … */
const char *recording_codec_name(uint32_t codec); /* "zstd", "lz4" (record --compress) */

/* A little-endian 32-bit field of a piece header. */
static inline uint64_t cp_piece_le32(const uint8_t *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

static inline bool cp_sock_piece_next(const uint8_t *p, uint32_t n, uint32_t *pc, uint64_t *off,
				      const uint8_t **bytes, uint32_t *len)
{
	const uint8_t *ph = p + *pc;

	if (*pc > n || n - *pc < sizeof(struct cp_sock_piece))
		return false;
	*off = cp_piece_le32(ph);
	*len = ph[4] | (uint32_t)ph[5] << 8;
	if (!*len || *len > n - *pc - sizeof(struct cp_sock_piece))
		return false;
	*bytes = ph + sizeof(struct cp_sock_piece);
	*pc += (uint32_t)sizeof(struct cp_sock_piece) + *len;
	return true;
}

static inline uint64_t cp_sock_bytes_at(const uint8_t *payload, uint32_t plen, const uint8_t *pieces,
					uint32_t npieces, uint32_t *pc, uint64_t off,
					const uint8_t **at)
{
	uint32_t c = *pc, len;
	const uint8_t *b;
	uint64_t o;

	if (off < plen) {
		*at = payload + off;
		return plen - off;
	}
	while (cp_sock_piece_next(pieces, npieces, &c, &o, &b, &len)) {
		if (off < o)
			return 0;
		if (off < o + len) {
			*at = b + (off - o);
			return o + len - off;
		}
		*pc = c;
	}
	return 0;
}

/* A plausible HTTP/2 frame header: where frames are found again. */
static inline bool cp_h2_frame_plausible(const uint8_t *h)
{
	uint32_t len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
	uint32_t sid = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) &
		       0x7fffffffu;

	if (len > 16384 || (h[5] & 0x80))
		return false;
	switch (h[3]) {
	case 0: /* DATA */
	case 1: /* HEADERS */
	case 2: /* PRIORITY */
	case 3: /* RST_STREAM */
	case 5: /* PUSH_PROMISE */
	case 9: /* CONTINUATION */
		return sid != 0;
	case 4: /* SETTINGS */
		return sid == 0 && len % 6 == 0;
	case 6: /* PING */
		return sid == 0 && len == 8;
	case 7: /* GOAWAY */
		return sid == 0 && len >= 8;
	case 8: /* WINDOW_UPDATE */
		return len == 4;
	default:
		return false;
	}
}

static inline uint64_t cp_sock_pieces_end(const uint8_t *p, uint32_t n)
{
	uint32_t pc = 0, len;
	const uint8_t *b;
	uint64_t off;

	while (cp_sock_piece_next(p, n, &pc, &off, &b, &len))
		;
	if (n - pc < sizeof(struct cp_sock_piece) || p[pc + 4] || p[pc + 5])
		return 0;
	return cp_piece_le32(p + pc);
}

static inline const uint8_t *cp_rec_pieces(const struct cp_hdr *h, const uint8_t *payload,
					   uint16_t payload_len, uint8_t flags, uint32_t *n)
{
	const uint8_t *at = payload + payload_len;
	size_t used = (size_t)(at - (const uint8_t *)h);

	*n = (flags & CP_SOCK_F_PIECES) && h->size > used ? (uint32_t)(h->size - used) : 0;
	return at;
}

#define cp_pieces(e, n) cp_rec_pieces(&(e)->h, (e)->payload, (e)->payload_len, (e)->flags, n)

#endif /* CRITPATH_RECORDING_H */
