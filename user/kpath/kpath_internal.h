/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* The stream ended: open requests go out, then the warnings. */
#ifndef CRITPATH_KPATH_INTERNAL_H
#define CRITPATH_KPATH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <netinet/in.h>

#include "critpath_abi.h"
#include "model.h"
#include "proto.h"
#include "util.h"

#define KP_NONE U64MAP_NONE /* no index; also what the maps answer for absent */
#define KP_OPEN UINT64_MAX		/* end of an interval still open */
#define KP_KEEP_NS 1000000000ull	/* state kept behind the stream at least */
#define KP_WRITE_SLACK_NS 5000000ull	/* Recordings (merged by time) to sink: 0, or -errno after a message. */
#define KP_IDLE_FINISH_NS 1000000000ull	/* a response idle this long is complete */
#define KP_ADVANCE_PRUNE_NS 100000000ull /* kp__advance prunes this often at most */
#define KP_HOLD_MAX_NS 30000000000ull	/* an open request holds state back this long at most */
#define KP_DR_WINDOW_NS 2000000ull	/* sk_data_ready → the wakeup it caused */
#define KP_TLS_BIO_NS 100000000ull	/* a socket call and its TLS call on memory buffers */
#define KP_BIO_WR_MAX (256u << 10)	/* bytes of a thread's TLS writes waiting */
/* The kernel-level analysis behind kpath__analyze() (DESIGN.md 5). State is
 * pruned behind the oldest open request, so memory follows the open window. */
#define KP_LOSS_LAG_NS 1000000000ull
#define KP_PEND_MAX_BYTES (64ull << 20) /* waiting requests beyond this go out early */
/* a write under one Ethernet segment: Nagle's algorithm holds it whole */
#define KP_SMALL_SEGMENT 1448
#define KP_TH_HINTS 256 /* kp->th_hint slots */
#define KP_CN_HINTS 64	/* kp->cn_hint slots */
#define KP_PR_HINTS 256 /* kp->pr_hint slots */
#define KP_ADDR_STR_LEN 72 /* "new connection on [ipv6]:port" */

enum kp_state {
	KP_ST_UNKNOWN = 0, /* before the first event of the thread */
	KP_ST_RUNNING,
	KP_ST_RUNNABLE,
	KP_ST_BLOCKED,
	KP_ST_DEAD,
};

enum kp_reason {
	KP_BR_NONE = 0,
	KP_BR_FUTEX,
	KP_BR_SOCK, /* recv on a connection (conn) */
	KP_BR_POLL,
	KP_BR_DISK, /* uninterruptible (D state) */
	KP_BR_NEW,  /* not yet born: ends with the parent's wakeup_new */
};

enum kp_wake {
	KP_WK_NONE = 0, /* unknown: no wakeup seen */
	KP_WK_TASK,	/* waker = a thread */
	KP_WK_NEW,	/* wakeup_new by the parent (waker) */
	KP_WK_NET,	/* NET_RX; conn = the socket (sk_data_ready just before) */
	KP_WK_TIMER,
	KP_WK_DISK,
	KP_WK_OTHER, /* another interrupt */
};

struct kp_iv {
	uint64_t start, end; /* end = KP_OPEN while current */
	uint64_t uaddr;	     /* futex */
	uint32_t waker;	     /* thread index (TASK / NEW), or KP_NONE */
	uint32_t conn;	     /* NET wakeup's or SOCK block's connection, or KP_NONE */
	uint32_t cul_first;  /* absolute index into the thread's culprits */
	uint16_t ncul;
	int16_t cpu;
	uint8_t state;	/* enum kp_state */
	uint8_t reason; /* enum kp_reason (blocked) */
	uint8_t wake;	/* enum kp_wake (blocked: what ended it) */
	uint8_t __pad;
};

struct kp_culprit {
	uint64_t ts;
	uint64_t ns;
	int32_t pid, tid;
	char comm[CP_COMM_LEN];
	const char *icomm; /* comm interned (kp__intern), once a walk names it */
};

#define KP_PROBE_DEPTH 6

struct kp_probe_ev {
	uint64_t ts;
	uint32_t stack[KP_PROBE_DEPTH]; /* into kp->probes */
	uint8_t depth;
};

/* loss windows are written ~100 ms after the drops */
struct kp_ctx {
	uint64_t ts;
	uint32_t conn;
	uint32_t sid_lo, sid_hi;
	uint32_t via;
};

/* A run-queue culprit for the tasks the recorder does not name one by one. */
#define KP_OTHER_TASKS "[other tasks]"

#define KP_QUEUED_FRAME "(other requests)"

/* TLS writes on memory buffers not yet carried by a socket write. */
struct kp_bio_wr {
	uint8_t *buf;
	uint32_t n, len, cap;
	uint64_t ts;
	/* writes known to have succeeded (OpenSSL's, recorded at return) */
	uint32_t nsure;
};

struct kp_thread {
	uint64_t key; /* host << 32 | tid */
	int32_t pid, tid;
	uint32_t host;
	uint32_t proc; /* process index; KP_NONE: a recycled slot, in kp->freeth */
	char comm[CP_COMM_LEN];
	const char *icomm;
	char icomm_of[CP_COMM_LEN];
	/* iv, cul and pev are windows (kp__win_more): pruning moves their start */
	struct kp_iv *iv;
	uint32_t niv, capiv, ivoff;
	uint32_t ivpeak; /* kp__win_fit's */
	uint32_t find_hint; /* kp__tl_find: the interval it found last */
	struct kp_culprit *cul;
	uint32_t ncul, capcul, culoff;
	uint64_t cul_base; /* absolute index of cul[0] */
	/* a wakeup seen while it still seemed running (two CPUs raced) */
	uint64_t pend_wake_ts;
	uint32_t pend_waker, pend_conn;
	uint8_t pend_wake;
	struct kp_ctx *ctx; /* a window too, like pev */
	uint32_t nctx, capctx, ctxoff;
	uint64_t last_call; /* the end of its last socket call or poll wait */
	/* its last data read's connection and end */
	uint32_t read_conn;
	uint64_t read_ts;
	struct kp_bio_wr bw;
	uint32_t ctx_hint;  /* kpath/walk.c: the context it looked at last */
	struct kp_probe_ev *pev;
	uint32_t npev, cappev, pevoff;
	uint64_t pev_base;		 /* absolute index of pev[0] */
	uint32_t pstack[KP_PROBE_DEPTH]; /* probed calls active now */
	uint8_t pdepth;
	uint32_t pinned; /* kp__tl_recycle: still referred to (its pass's stamp) */
	/* its exit came while it ran: the final switch-out ends the timeline */
	uint64_t exit_ts;
};

struct kp_proc {
	uint32_t host;
	int32_t pid;
	char comm[CP_COMM_LEN];
	bool comm_from_md; /* CP_MD_PROCESS named it: keep that name */
	bool serves_unix;  /* it read requests on a Unix-domain socket: "comm:unix" */
	uint64_t tls_since;
	/* listening ports: the first nsure known, the rest guessed */
	uint16_t *listen;
	uint32_t nlisten, caplisten, nsure;
	char svc[KP_NAME_LEN];
	const char *isvc; /* svc interned */
	char svc_comm[CP_COMM_LEN];
	int32_t svc_port;
	bool svc_ok;
	const char *call_frame, *call_svc;
	char call_of[KP_NAME_LEN];
	bool exited;	 /* its last thread exited (group_dead): recycled once unreferenced */
	uint32_t pinned; /* kp__tl_recycle: still referred to (its pass's stamp) */
	/* its exit came while it ran: the final switch-out ends the timeline */
	uint64_t exit_ts;
};

/* A connection's key; a UDP flow's leaves the addresses out. */
struct kp_addr {
	uint16_t family, lport, rport, proto;
	uint8_t laddr[CP_ADDR_LEN];
	uint8_t raddr[CP_ADDR_LEN];
};

enum kp_role { KP_ROLE_UNKNOWN = 0, KP_ROLE_SERVER, KP_ROLE_CLIENT };

struct kp_write {
	uint64_t enter, exit;
	uint32_t thread;
	uint32_t seq;
	int32_t bytes; /* a call moves less than 2 GiB (MAX_RW_COUNT) */
	bool sent_at;  /* enter is its bytes' departure (CP_SOCK_F_SENT_AT) */
	const char *name;
	/* the end of the last read of the connection after it and before the
	 * next write, 0: none yet (a client's: the reply read, and the next
	 * write begins another call) */
	uint64_t read_after;
};

struct kp_dready {
	uint64_t ts;
	uint32_t rcv_nxt;
};

struct kp_uqent {
	uint64_t ts;
	uint32_t conn; /* the flow it came on */
};

struct kp_udpq {
	struct kp_uqent *e; /* a window (kp__win_more) */
	uint32_t n, cap, off;
};

enum kp_phase { KP_PH_IDLE = 0, KP_PH_READING, KP_PH_WRITING };

struct kp_name_run {
	char name[KP_NAME_LEN];
	uint32_t count;
};

/* The request being served on a server connection. */
struct kp_req {
	uint64_t start; /* DESIGN: when its first bytes reached the process */
	uint64_t first_read_enter, first_read_exit;
	uint64_t end;	 /* exit of the last write so far */
	uint32_t reader; /* the serving thread (first read) */
	uint32_t writer; /* the thread of the last write */
	int status;	 /* HTTP status, 0 = none */
	uint32_t sid;	 /* its HTTP/2 stream, 0 for none */
	char name[KP_NAME_LEN];
	struct proto_meta meta; /* its target and trace context, as sent */
	uint8_t proto;		/* enum kp_proto of its first bytes */
	bool grpc;		/* HTTP/2 with a gRPC content-type */
	/* pipelined: the runs of names in kp_conn.runs; 0 = one request */
	uint16_t nruns;
	/* named by the plaintext of its TLS read, when it comes */
	bool tls_wait;
	/* its first read was a TLS client's last flight */
	bool tls_fin;
	/* bytes its last write left unsent, and whether Nagle held it */
	uint32_t unsent;
	bool nagle;
	/* a short first read (a length prefix: MySQL), named with the next */
	uint8_t nhead;
	uint8_t head[CP_SHORT_READ];
	/* a DNS message's id (xid_ok): the answer that is this query's */
	uint16_t xid;
	bool xid_ok;
	/* TCP sequence numbers of its first byte read and of its response's
	 * first byte written, and the bytes of each (cp_request_wire) */
	uint32_t rx_seq, rx_len, tx_seq, tx_len;
};

#define KP_DQ_MAX 8

struct kp_conn {
	uint32_t host;
	uint32_t proc; /* first process seen using it, or KP_NONE */
	struct kp_addr a;
	uint8_t role;  /* enum kp_role */
	uint8_t phase; /* enum kp_phase */
	uint8_t seen_data;
	uint8_t displaced; /* another conn took its cnmap key (a hash collision) */
	uint8_t role_guessed; /* role from who spoke first: kp__proc_listen may correct it */
	uint8_t tls_seen;     /* a call of it ran inside a TLS library's (CP_SOCK_F_TLS) */
	/* its TLS library runs on memory buffers (Node.js) */
	uint8_t tls_bio;
	uint8_t bio_wr_seen;
	uint64_t tls_key;
	struct kp_bio_wr bw;
	uint8_t peer_eof;  /* a read of it returned 0: the peer closed */
	uint8_t peer_missed;
	uint32_t peer;	   /* the other end, traced, or KP_NONE (cached) */
	uint64_t unix_peer; /* AF_UNIX: the peer socket's inode (its key), 0: not known */
	uint32_t ctx_owner1;
	uint64_t prev_end; /* end of the last request served */
	uint32_t nreq;	   /* requests finished on it */
	struct kp_req req;
	char last_name[KP_NAME_LEN]; /* client: the call being made; server: last request */
	char service[KP_NAME_LEN];   /* "comm:port", set at its first request */
	const char *iservice;	     /* service interned */
	const char *iname;	     /* the last request's name, interned */
	char lstr[KP_ADDR_STR_LEN], rstr[KP_ADDR_STR_LEN]; /* "ip:port" of each end, once known */
	struct kp_write *wr; /* wr and dr are windows (kp__win_more) */
	uint32_t nwr, capwr, wroff, wrpeak;
	struct kp_dready *dr;
	uint32_t ndr, capdr, droff, drpeak;
	struct kp_name_run *runs; /* req.nruns of them (pipelining), allocated when first needed */
	uint32_t capruns;
	uint64_t last_used; /* the latest record on it */
	uint32_t last_proc; /* the process of that record */
	uint64_t closed_at; /* closed by its process, 0 = open */
	uint64_t fdkey;	    /* the fdmap key that last named it, 0 for none */
	struct kp_h2 *h2;   /* HTTP/2: its streams are its requests (kpath/h2.c) */
	struct kp_req *dq;  /* a datagram flow's queries not answered, oldest first */
	uint8_t ndq;
};

struct kp_source {
	char key[128]; /* boot id and host name: same key, same host */
	uint32_t host; /* hosts are told apart by their keys */
	int64_t delta; /* added to this source's times (aligns hosts) */
	const char *host_name;
	const char *sku;
	uint32_t ncpus;
	const char *const *cpu_model; /* by cpu number, may be NULL */
	uint64_t first_ts; /* its first event (aligned), 0: none yet */
	uint64_t clock_unc; /* the uncertainty of delta (kpath.c place_hosts) */
};

struct kp_loss {
	uint32_t host;
	uint64_t start, end;
};

struct kp_chunk;

struct kp_pend {
	struct cp_request *req;
	struct kp_chunk *chunk; /* holds req (and runs) */
	uint32_t host;
	int32_t pid;
	uint32_t conn, nreq;	  /* ids: "pid:conn:nreq", nreq counting up per request */
	struct kp_name_run *runs; /* NULL: one request named req->name (in chunk) */
	uint32_t nruns;
	uint64_t bytes;
};

struct kp_lastdr {
	uint64_t ts;
	uint32_t conn;
};

struct kp_wseg {
	uint64_t start, end;
	uint32_t thread;	  /* KP_NONE: no thread (network, unexplained) */
	uint32_t cul_first, ncul; /* into kp->culs */
	int32_t peer;		  /* into kp->strs, or -1 */
	int32_t frame3;		  /* into kp->strs, or -1 (ids differ per use) */
	int64_t pev;		  /* the thread's probe event whose stack applies, -1 = none */
	int16_t cpu;
	uint8_t cat; /* enum cp_category */
	bool interference;
	bool queued; /* cpu for another connection's request: KP_QUEUED_FRAME */
};

/* A wait of the walk for the reply to a TCP call (kpath/steps.c), kept
 * only when the sink wants wire */
struct kp_wcall {
	uint64_t t;	      /* the reply came (the wait's end) */
	uint32_t conn;	      /* the caller's connection */
	uint32_t first, last; /* its writes, in the connection's window */
	int32_t seg;	      /* the segment that waited, in walk order; -1: none */
	uint32_t call;	      /* kpath/emit.c: its cp_call */
	bool stitched;	      /* the callee's end is known to this analysis */
};

/* An ownership answer the walk already has (kpath/walk.c) */
struct kp_own {
	uint64_t key; /* thread << 32 | blocked interval */
	uint32_t gen; /* the walk it belongs to */
	uint16_t steps;
	bool owned;
};

typedef int (*kp_emit_fn)(void *arg, const struct cp_request *req);
typedef const char *(*kp_intern_fn)(void *arg, const char *s);

/* A --probe symbol, and the same interned */
struct kp_probe_name {
	char name[KP_NAME_LEN];
	const char *iname;
};

struct intern;

struct kp {
	kp_emit_fn emit;
	void *emit_arg;
	/* cp_sink.want: asked before a request is walked (NULL: all are) */
	bool (*want)(void *arg, const struct cp_request *head);
	uint64_t unwalked; /* requests want turned down */
	struct kp_source *src;
	uint32_t nsrc;
	/* by host: its first source, and how many it has (host_source) */
	uint32_t *host_src, *host_nsrc;
	uint32_t caphosts;
	const char *queued_frame; /* KP_QUEUED_FRAME, interned */

	struct kp_thread *th;
	uint32_t nth, capth;
	struct u64map thmap; /* host << 32 | tid → thread index */
	uint32_t th_hint[KP_TH_HINTS];
	struct kp_proc *pr;
	uint32_t npr, cappr;
	struct u64map prmap; /* host << 32 | pid → process index */
	uint32_t pr_hint[KP_PR_HINTS];
	uint32_t *freeth, nfreeth, capfreeth;
	uint32_t *freepr, nfreepr, capfreepr;
	uint32_t npr_exited; /* processes exited, not recycled yet */
	uint32_t pin_stamp;  /* kp__tl_recycle's passes */
	uint64_t threads_recycled, procs_recycled;
	struct kp_conn *cn;
	uint32_t ncn, capcn;
	struct u64map cnmap; /* hash of (host, tuple) → conn index (chained by probing) */
	/* (host, remote/local end) → the last TCP conn, for peers behind
	 * DNAT */
	struct u64map repmap, lepmap;
	bool multi_host;
	uint64_t skew_clipped, skew_clipped_max;
	struct u64map fdmap; /* host, pid, fd → conn index (records without addresses) */
	struct u64map tlsmap;
	uint32_t cn_hint[KP_CN_HINTS];
	uint32_t *closed, nclosed, capclosed;
	uint32_t *freecn, nfreecn, capfreecn;
	uint32_t *guessed, nguessed, capguessed;
	uint64_t conns_recycled;
	uint64_t unix_serial; /* Unix-domain connections: their "address" */
	struct kp_udpq *uq;
	uint32_t nuq, capuq;
	struct u64map uqmap;
	struct u64map uportmap;
	uint64_t udp_unknown; /* datagram reads whose sender was not known */
	uint64_t dq_dropped;  /* datagram queries past KP_DQ_MAX waiting on a flow */
	struct kp_loss *loss;
	uint32_t nloss, caploss;
	struct kp_lastdr *lastdr;     /* [host * KP_MAX_CPUS + cpu] */
	struct kp_probe_name *probes; /* --probe symbols */
	uint32_t nprobes, capprobes;
	struct u64map probemap; /* host << 32 | probe_id → probes index */
	uint32_t nlastdr;

	uint64_t now;		    /* the stream's time (latest hdr.ts) */
	int64_t realtime_offset_ns; /* of the first source: request times + this = Unix epoch */
	uint64_t records, since_prune;
	uint64_t pruned_at; /* the stream's time at the last prune */
	uint64_t requests_out, requests_partial, walk_unexplained_ns;
	uint64_t loss_maxlen; /* the longest loss window (kp->loss is sorted by end) */

	/* finished requests waiting for late loss windows (FIFO) */
	struct kp_pend *pend;
	uint32_t pend_head, npend, cappend; /* waiting: pend[pend_head .. npend) */
	uint64_t pend_bytes;
	struct kp_chunk *chunk_tail, *chunk_spare; /* kpath/emit.c */
	uint64_t pend_early;   /* sent before their wait was over (too many waiting) */
	bool loss_after_early; /* and a loss window came after one of them */
	/* no input lost events: requests go out at once */
	bool no_loss_wait;
	bool loss_unpromised;

	uint64_t pipe_reads, pipe_requests, pipe_beyond;
	uint64_t inferred_switches;
	uint64_t tls_uncaptured;
	char tls_uncaptured_why[200];
	uint64_t unsent_reqs, nagle_reqs;
	uint64_t h2_requests, h2_uncertain, h2_unnamed, h2_unanswered, h2_lost;
	uint64_t bio_wr_unsent;
	uint64_t bio_rd_lost;
	struct {
		char service[KP_NAME_LEN];
		uint64_t n;
	} unsent_svc[4];
	uint32_t nunsent_svc;
	bool unsent_more; /* of more services than unsent_svc holds */
	int err; /* first error of the emit callback */

	kp_intern_fn intern;
	void *intern_arg;
	struct intern *own_intern;
	/* the names and thread names seen (hashes), at most max_names each;
	 * past it new ones fold */
	struct u64map names, comms;
	uint32_t max_names;
	const char *other_names; /* CP_OTHER_NAMES interned, once used */
	uint64_t names_folded;	 /* requests named so */
	/* culprit records' comms interned, by tid: records repeat a few */
	struct {
		char comm[CP_COMM_LEN];
		const char *icomm;
	} culprit_comms[64];

	/* scratch of the walk, reused between requests */
	struct kp_wseg *ws;
	uint32_t nws, capws;
	struct cp_culprit *culs; /* comms interned */
	uint32_t nculs, capculs;
	/* strings naming segments; seg_add merges equal ids only */
	const char **strs;
	uint32_t nstrs, capstrs;
	struct kp_own *own; /* KP_OWN_SLOTS, open addressing, kept by walk */
	uint32_t nown, own_gen;
	struct kp_wcall *wcalls; /* with want: the walk's waits for replies */
	uint32_t nwcalls, capwcalls;
};

#define KP_MAX_CPUS 1024

static inline uint64_t kp__key_at(const char *a, size_t elem, uint32_t i)
{
	return *(const uint64_t *)(a + (size_t)i * elem);
}

/* The first index whose key at off is >= ts: gallops back from the end, then
 * bisects. */
static inline __attribute__((always_inline)) uint32_t
kp__lower_bound_from_end(const void *arr, uint32_t n, size_t elem, size_t off, uint64_t ts)
{
	const char *a;
	uint32_t lo = 0, hi = n, step = 1;

	if (!n) /* arr may be NULL: no arithmetic on it */
		return 0;
	a = (const char *)arr + off;
	while (hi > step && kp__key_at(a, elem, hi - step) >= ts) {
		hi -= step;
		step *= 2;
	}
	if (hi > step)
		lo = hi - step + 1; /* key hi - step < ts */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (kp__key_at(a, elem, mid) < ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* kpath/core.c */
int kp__init(struct kp *kp, kp_emit_fn emit, void *arg);
void kp__set_intern(struct kp *kp, kp_intern_fn fn, void *arg);
/* s interned (kp->intern or kp's own table); NULL on ENOMEM */
const char *kp__intern(struct kp *kp, const char *s);
/* A request's or service's name interned, or CP_OTHER_NAMES past
 * max_names distinct ones (a client choosing paths must not grow the
 * process for good) */
const char *kp__intern_name(struct kp *kp, const char *s);
/* The same for thread names, with a bound of their own: any process on the
 * host can name its threads, and culprits are any process */
const char *kp__intern_comm(struct kp *kp, const char *s);
void kp__free(struct kp *kp);
/* The name of host (its first source's), or NULL */
const char *kp__host_name(const struct kp *kp, uint32_t host);
/* How well host's clock is placed (kp_source.clock_unc) */
uint64_t kp__host_uncertainty(const struct kp *kp, uint32_t host);
/* Slack between a write's recorded start and its bytes' arrival. */
#define KP_SEND_SLACK_NS 200000ull
/* A source (one recording): its index; same host_key, same host. */
int kp__add_source(struct kp *kp, const char *host_key, int64_t delta, const char *host_name,
		   const char *sku, uint32_t ncpus, const char *const *cpu_model);
int kp__add_record(struct kp *kp, uint32_t src, const struct cp_hdr *rec);
/* Time passed on src with no record: idle requests finish, queued ones go out. */
int kp__advance(struct kp *kp, uint32_t src, uint64_t ts);
/* Ends the stream: finishes requests, sends every one still waiting. */
int kp__finish(struct kp *kp);

int kp__grow_to(void **arr, uint32_t *cap, uint32_t need, size_t elem);
static inline int kp__grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	return need <= *cap ? 0 : kp__grow_to(arr, cap, need, elem);
}
/* Arrays pruned at the front: the window starts *off elements in, moved back
 * only when the gap is as long as it. */
int kp__win_more(void **arr, uint32_t *off, uint32_t *cap, uint32_t n, size_t elem);
void kp__win_drop(void **arr, uint32_t *off, uint32_t *n, uint32_t drop, size_t elem);
void kp__win_fit(void **arr, uint32_t *off, uint32_t *cap, uint32_t n, uint32_t used,
		 uint32_t *peak, size_t elem);
void kp__win_free(void **arr, uint32_t *off, size_t elem);

/* kpath/timeline.c */
uint32_t kp__thread(struct kp *kp, uint32_t host, int32_t pid, int32_t tid);
/* A thread just created: fresh state when its tid belonged to one that exited. */
uint32_t kp__thread_born(struct kp *kp, uint32_t host, int32_t pid, int32_t tid);
uint32_t kp__thread_find(const struct kp *kp, uint32_t host, int32_t tid);
uint32_t kp__proc(struct kp *kp, uint32_t host, int32_t pid);
uint32_t kp__proc_find(struct kp *kp, uint32_t host, int32_t pid);
int kp__tl_switch(struct kp *kp, uint32_t host, const struct cp_ev_sched_switch *e, uint64_t ts);
int kp__tl_waking(struct kp *kp, uint32_t host, const struct cp_ev_sched_waking *e, uint64_t ts);
int kp__tl_new(struct kp *kp, uint32_t host, const struct cp_ev_wakeup_new *e, uint64_t ts);
int kp__tl_culprit(struct kp *kp, uint32_t host, const struct cp_ev_runq_culprit *e, uint64_t ts);
int kp__tl_seen_running(struct kp *kp, uint32_t thread, uint32_t cpu);
/* uprobes (kpath/timeline.c): --probe definitions and calls */
int kp__tl_probe_def(struct kp *kp, uint32_t host, const struct cp_md_probe *m);
int kp__tl_probe(struct kp *kp, uint32_t host, const struct cp_ev_uprobe *e, uint64_t ts);
/* The probe event whose stack holds just before ts, or -1. */
int64_t kp__tl_probe_at_any(const struct kp_thread *t, uint64_t ts);
/* A data call of thread ended: it worked for `before`, works for `after`
 * from now. */
int kp__tl_call(struct kp *kp, uint32_t thread, uint64_t end, uint32_t before, uint32_t after);
/* A poll wait began at enter: the thread works for nobody's request. */
int kp__tl_idle(struct kp *kp, uint32_t thread, uint64_t enter);
int kp__tl_call_read(struct kp *kp, uint32_t thread, uint64_t enter, uint64_t end, uint32_t after,
		     uint32_t via);
int kp__tl_call_streams(struct kp *kp, uint32_t thread, uint64_t end, uint32_t before,
			uint32_t sid_lo, uint32_t sid_hi);
/* the index in t->ctx of the last context begun before ts, or -1 */
int64_t kp__tl_ctx_before(const struct kp_thread *t, uint64_t ts);
/* the connection thread works for now (KP_NONE: nobody's) */
static inline uint32_t kp__tl_ctx_now(const struct kp_thread *t)
{
	return t->nctx ? t->ctx[t->nctx - 1].conn : KP_NONE;
}
static inline int64_t kp__tl_probe_at(const struct kp_thread *t, uint64_t ts)
{
	return t->npev ? kp__tl_probe_at_any(t, ts) : -1;
}
int kp__tl_exit(struct kp *kp, uint32_t host, const struct cp_hdr *h, uint64_t ts);
void kp__tl_annotate(struct kp *kp, uint32_t thread, uint64_t enter, uint64_t exit, uint8_t reason,
		     uint64_t uaddr, uint32_t conn);
void kp__tl_poll_source(struct kp *kp, uint32_t thread, uint64_t enter, uint32_t conn);
int64_t kp__tl_find(struct kp_thread *t, uint64_t ts);
void kp__tl_prune(struct kp_thread *t, uint64_t before);
void kp__tl_recycle(struct kp *kp, uint64_t mark);

/* Addresses are compared and hashed as the words they were stored as (no
 * store-forwarding stalls). */
static inline uint64_t addr_hash(uint32_t host, const struct kp_addr *a)
{
	uint64_t w[1 + 2 * CP_ADDR_LEN / 8], h = 0x9e3779b97f4a7c15ull ^ host;

	_Static_assert(sizeof(*a) == sizeof(w), "kp_addr hashes as whole words");
	w[0] = (uint64_t)a->family | (uint64_t)a->lport << 16 | (uint64_t)a->rport << 32 |
	       (uint64_t)a->proto << 48;
	memcpy(&w[1], a->laddr, CP_ADDR_LEN);
	memcpy(&w[1 + CP_ADDR_LEN / 8], a->raddr, CP_ADDR_LEN);
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		if (a->proto == IPPROTO_UDP && i && i <= CP_ADDR_LEN / 8)
			continue;
		h ^= w[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h;
}

/* A TCP connection's key in repmap: host and remote end. */
static inline uint64_t rep_key(uint32_t host, const struct kp_addr *a)
{
	uint64_t w[2], h = 0xc2b2ae3d27d4eb4full ^ host ^ (uint64_t)a->family << 32 ^
			   (uint64_t)a->rport << 48;

	memcpy(w, a->raddr, CP_ADDR_LEN);
	h = (h ^ w[0]) * 0xff51afd7ed558ccdull;
	h = (h ^ w[1]) * 0xc4ceb9fe1a85ec53ull;
	return h ^ h >> 29;
}

/* ... and in lepmap, by its local end */
static inline uint64_t lep_key(uint32_t host, const struct kp_addr *a)
{
	struct kp_addr l = {.family = a->family, .rport = a->lport};

	memcpy(l.raddr, a->laddr, CP_ADDR_LEN);
	return rep_key(host, &l);
}

/* A socket call that reads (writes) data */
static inline bool kp__sock_read(uint8_t call)
{
	return call == CP_SOCK_READ || call == CP_SOCK_READV || call == CP_SOCK_RECVFROM ||
	       call == CP_SOCK_RECVMSG || call == CP_SOCK_RECVMMSG;
}

static inline bool kp__sock_write(uint8_t call)
{
	return call == CP_SOCK_WRITE || call == CP_SOCK_WRITEV || call == CP_SOCK_SENDTO ||
	       call == CP_SOCK_SENDMSG || call == CP_SOCK_SENDMMSG;
}

/* A descriptor's key in fdmap. */
static inline uint64_t fd_key(uint32_t host, uint32_t pid, int32_t fd)
{
	return (uint64_t)host << 56 ^ (uint64_t)pid << 24 ^ ((uint32_t)fd & 0xffffff);
}

/* A UDP flow's key in uportmap: host, family and ports. */
static inline uint64_t uport_key(uint32_t host, const struct kp_addr *a)
{
	return ((uint64_t)host << 48 | (uint64_t)a->family << 32 | (uint64_t)a->lport << 16 |
		a->rport) *
	       0x9e3779b97f4a7c15ull;
}

/* kpath/conntab.c: finding connections */
uint32_t kp__udp_flow(struct kp *kp, uint32_t host, uint16_t family, uint16_t lport,
		      uint16_t rport, const uint8_t *laddr, const uint8_t *raddr, uint64_t ts,
		      bool inbound);
uint32_t kp__udp_conn(struct kp *kp, uint32_t host, const struct cp_ev_sock *e, uint64_t ts,
		      bool read);
uint32_t kp__conn(struct kp *kp, uint32_t host, const struct kp_addr *a);
uint32_t kp__conn_by_sock(struct kp *kp, uint32_t host, const struct cp_ev_sock *e);
uint32_t kp__conn_peer(struct kp *kp, uint32_t conn);
/* A record's 4-tuple as an address (an IPv4-mapped pair as IPv4). */
void kp__addr_of(struct kp_addr *a, uint16_t family, uint16_t lport, uint16_t rport,
		 const uint8_t *laddr, const uint8_t *raddr);
bool kp__addr_eq(const struct kp_addr *x, const struct kp_addr *y);
/* A datagram arrival on a UDP socket's queue, for the flow conn. */
int kp__udpq_push(struct kp *kp, uint32_t host, uint16_t family, uint16_t port, uint64_t ts,
		  uint32_t conn);
/* An arrival on conn ci at ts, in its time order. */
int kp__conn_arrival(struct kp *kp, uint32_t ci, uint64_t ts, uint32_t rcv_nxt);

/* kpath/roles.c: which end serves */
void kp__conn_guess_role_slow(struct kp *kp, uint32_t ci, bool reading, uint8_t flags);
static inline void kp__conn_guess_role(struct kp *kp, uint32_t ci, bool reading, uint8_t flags)
{
	if (kp->cn[ci].role == KP_ROLE_UNKNOWN) /* most calls: known */
		kp__conn_guess_role_slow(kp, ci, reading, flags);
}
void kp__guessed_compact(struct kp *kp, uint32_t n);

/* kpath/conn.c: requests framed on connections */
int kp__conn_closed(struct kp *kp, uint32_t ci, uint64_t ts);
int kp__conn_pipelined(struct kp *kp, struct kp_conn *c, const uint8_t *payload, size_t len,
		       int64_t bytes, enum kp_proto pr);
int kp__h2_check(struct kp *kp, uint32_t ci, const uint8_t *p, size_t len);

/* kpath/bio.c: TLS libraries on memory buffers */
uint64_t kp__tls_conn_key(uint32_t host, const struct cp_ev_tls_read *e);
uint32_t kp__bio_learn(struct kp *kp, uint32_t ci, uint64_t key);
int kp__conn_sock(struct kp *kp, uint32_t src, const struct cp_ev_sock *e, uint64_t ts,
		  uint64_t enter);
int kp__conn_dready(struct kp *kp, uint32_t host, const struct cp_ev_sk_data_ready *e, uint64_t ts);
struct kp_bio_wr *kp__bio_wr_for(struct kp *kp, uint32_t ci, uint32_t thread, uint64_t ts);
int kp__conn_tls_read(struct kp *kp, uint32_t host, const struct cp_ev_tls_read *e, uint64_t ts);
/* The peer's write that carried the byte before rcv_nxt, or NULL. */
const struct kp_write *kp__conn_write_for(const struct kp_conn *c, uint64_t ts, uint32_t rcv_nxt,
					  bool have_seq);
/* The peer's datagram (a write on the flow c) that arrived at ts. */
const struct kp_write *kp__conn_dgram_for(const struct kp_conn *c, uint64_t ts, bool same_host);
bool kp__conn_dready_at(const struct kp_conn *c, uint64_t ts, uint32_t *rcv_nxt);
void kp__conn_prune(struct kp_conn *c, uint64_t before);
void kp__conn_recycle(struct kp *kp, uint64_t mark);
int kp__conn_proc_exit(struct kp *kp, uint32_t proc, uint64_t ts);
int kp__proc_listen(struct kp *kp, uint32_t proc, uint16_t port);
/* A listening socket: its data is a new connection. */
bool kp__conn_listening(const struct kp_conn *c);
void kp__conn_addr_str(struct kp_conn *c, bool local, char *buf, size_t len);
const char *kp__conn_addr(struct kp_conn *c, bool local);
void kp__conn_peer_str(struct kp_conn *c, char *buf, size_t len);
/* Requests: finish the one open on conn (walk + emit). */
int kp__conn_finish_req(struct kp *kp, uint32_t conn);
/* ... and on a server connection every request still open. */
int kp__conn_finish_open(struct kp *kp, uint32_t conn);
/* When a request began: its bytes' arrival, not before lower. */
uint64_t kp__req_start(struct kp *kp, struct kp_conn *c, uint32_t thread, uint64_t enter,
		       uint64_t exit, uint32_t seq, uint64_t lower);
/* A write held whole under a segment: Nagle, not a full window. */
static inline bool kp__nagle_held(uint64_t unsent, uint64_t bytes)
{
	return unsent && bytes && unsent >= bytes && bytes < KP_SMALL_SEGMENT;
}

/* kpath/h2.c: detection, per-connection state, transfers, close and prune. */
int kp__h2_detect(const uint8_t *p, size_t len, bool *from_start);
int kp__h2_new(struct kp_conn *c, bool from_start, bool preface);
void kp__h2_free(struct kp_conn *c);
int kp__h2_transfer(struct kp *kp, uint32_t ci, const struct cp_ev_sock *e, uint32_t thread,
		    uint64_t ts, uint64_t enter, bool read);
int kp__h2_tls_read(struct kp *kp, uint32_t ci, const struct cp_ev_tls_read *e, uint32_t thread,
		    uint64_t ts);
int kp__h2_close(struct kp *kp, uint32_t ci);
int kp__h2_prune(struct kp *kp, uint32_t ci, uint64_t *mark);

int kp__emit_request(struct kp *kp, uint32_t conn);
int kp__loss_add(struct kp *kp, uint32_t host, uint64_t start, uint64_t end);
/* Sends the requests whose wait is over (every one with all). */
int kp__pend_flush(struct kp *kp, bool all);
void kp__pend_free(struct kp *kp);

int kp__walk(struct kp *kp, uint32_t conn);
/* "comm:port", "comm:unix", else the comm */
#define KP_PORT_UNIX (-1) /* kp__proc_service: a Unix-domain socket's service */
void kp__proc_service(const struct kp *kp, uint32_t proc, int32_t port, char *buf, size_t len);
const char *kp__proc_frame_service(struct kp *kp, uint32_t proc);
/* The string behind an id of kp->strs */
static inline const char *kp__str(const struct kp *kp, int32_t id)
{
	return kp->strs[id];
}
const char *kp__thread_comm(struct kp *kp, uint32_t thread);

#endif /* CRITPATH_KPATH_INTERNAL_H */
