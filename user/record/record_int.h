/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* The recorder's parts (the only code that sees libbpf). */
#ifndef CRITPATH_RECORD_INT_H
#define CRITPATH_RECORD_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "recording.h"

struct rec_bpf;
struct bpf_link;
struct bpf_program;
struct rec_unlinker;

/* The command the recorder's messages name: "record", or "agent" (the
 * session sets it) */
extern const char *rec_cmd;

#define REC_MAX_TARGETS 4096 /* processes: named, their children, theirs */
#define REC_MAX_PROBES 64
#define REC_MAX_HOST 63			    /* --host NAME's length */
#define REC_MAX_SKEW_NS 3600000000000ll /* --clock-skew, either way */
#define REC_PROBE_BINARY 256
#define REC_PROBE_SYMBOL 128

struct rec_bpf_opts {
	uint32_t payload_bytes;
	uint32_t h2_payload_bytes; /* on HTTP/2 connections: --payload-bytes if given */
	uint32_t buffer_mb;
	bool empty_programs;
	bool all_syscalls; /* raw_syscalls for every call, not the lean capture */
	bool probes;	   /* load the --probe programs (bpf/uprobe.bpf.c) */
	bool tls;	   /* load the TLS plaintext programs (bpf/tls.bpf.c) */
	bool watch_execs;  /* report every exec (critpath agent's --comm, --exe, --cgroup) */
	const char *const *watch_comms; /* traced from their exec on by BPF (--comm) */
	int nwatch_comms;
	bool quiet;
};

/* The command line (options.c). */
struct rec_opts {
	pid_t pids[REC_MAX_TARGETS]; /* -p */
	int npids;
	char **cmd; /* -- CMD ARGS: NULL-terminated, or NULL */
	const char *out;
	double duration; /* seconds; 0: until stopped or the targets exit */
	const char *sku;
	const char *host;	 /* --host, or NULL: the hostname */
	int64_t clock_skew_ns;	 /* --clock-skew: added to every time written */
	enum recording_codec codec;
	const char *probes[REC_MAX_PROBES]; /* --probe [BIN:]FUNC, checked */
	int nprobes;
	bool quiet;
	bool keep_query; /* --keep-query: credential query values recorded */
	struct rec_bpf_opts bo;
	int argc; /* the whole command line, for the recording's header */
	char **argv;
};
/* 0: record; 1: --help printed; 2: a usage error, said on stderr. */
int rec_opts__parse(struct rec_opts *o, int argc, char **argv);
/* s a decimal of at most max, nothing after it: into *out */
/* --redact-query KEY: added to proto/query.c's keys; 0, or said */
int rec_redact_query_opt(const char *cmd, const char *key);
bool rec_parse_uint(const char *s, unsigned long max, unsigned long *out);
void rec_opts__usage(FILE *f);
int rec_probe_spec_check(const char *spec);

/* Opens, picks tp_btf or raw_tp per hook, loads; one line per fallback. */
int rec_bpf__open_load(struct rec_bpf **b, const struct rec_bpf_opts *o);
int rec_bpf__add_target(struct rec_bpf *b, pid_t pid);
int rec_bpf__forget_target(struct rec_bpf *b, pid_t pid);
int rec_bpf__go_tls(struct rec_bpf *b, pid_t pid);
int rec_bpf__fork_wakes(struct rec_bpf *b, pid_t pid);
void rec_bpf__listen_port(void *bpf, uint16_t port, pid_t pid, bool udp);
int rec_bpf__attach(struct rec_bpf *b);
/* One CP_MD_HOOK per hook. */
int rec_bpf__write_hooks(struct rec_bpf *b, struct recording_writer *w, uint64_t ts);
int rec_bpf__nhooks(const struct rec_bpf *b);
typedef int (*rec_event_fn)(void *ctx, const struct cp_hdr *rec, size_t len);
int rec_bpf__ring(struct rec_bpf *b, rec_event_fn fn, void *ctx);
int rec_bpf__poll(struct rec_bpf *b, int timeout_ms);
/* Per-CPU drop counters (ncpus entries). */
int rec_bpf__drops(struct rec_bpf *b, uint64_t *per_cpu, int ncpus);
int rec_bpf__write_inflight(struct rec_bpf *b, struct recording_writer *w, const pid_t *pids,
			    int npids, uint64_t *written);
void rec_bpf__destroy(struct rec_bpf *b);
int rec_bpf__probe_progs(struct rec_bpf *b, struct bpf_program **enter, struct bpf_program **ret);
/* OpenSSL's programs, or with go Go crypto/tls's (bpf/tls.bpf.c) */
int rec_bpf__tls_progs(struct rec_bpf *b, bool go, struct bpf_program **enter,
		       struct bpf_program **ret);
const char *rec_bpf__tls_off(const struct rec_bpf *b);

struct rec_probes;
int rec_probes__add(struct rec_probes **p, const char *spec);
int rec_probes__which(const char *cmd, char *out, size_t n);
/* Attaches every probe in each process; -ENOENT none found, -EPERM only in
 * Go. */
int rec_probes__attach(struct rec_probes *p, struct rec_bpf *b, const pid_t *pids,
		       const char *const *exes, int n, bool quiet);
int rec_probes__write(const struct rec_probes *p, struct recording_writer *w, uint64_t ts,
		      uint64_t *records);
/* Its uprobe links go to u to be destroyed. */
void rec_probes__destroy(struct rec_probes *p, struct rec_unlinker *u);

/* Go's crypto/tls offsets in an executable (record/gotls.c). */
#define GO_TLS_MAX_RETS 32
struct go_tls_fns {
	uint64_t read, write;
	uint64_t server_hs, client_hs; /* handshakes' entries, 0: absent */
	uint64_t rets[GO_TLS_MAX_RETS];
	int nrets;
	uint64_t copy;
	char version[32]; /* its build info's, "go1.19.8" */
};
/* 0, -ENOENT when bin has no crypto/tls, else why it is not probed. */
int rec_gotls__find(const char *bin, struct go_tls_fns *f, const char **why);
/* A Go executable: a uretprobe would crash it. */
bool rec_gotls__is_go(const char *bin);

int rec_unlinker__new(struct rec_unlinker **u);
void rec_unlinker__put(struct rec_unlinker *u, struct bpf_link *link);
void rec_unlinker__destroy(struct rec_unlinker *u);

struct rec_tls;
int rec_tls__new(struct rec_tls **t, const char *off, bool quiet, struct rec_unlinker *u);
/* The recording's "tls" CP_MD_HOOK: on, or off and why. */
int rec_tls__write_hook(const struct rec_tls *t, struct recording_writer *w, uint64_t ts,
			uint64_t *records);
/* Attaches in pid when it maps libssl, writing a CP_MD_HOOK; -ESRCH when gone. */
int rec_tls__scan(struct rec_tls *t, struct rec_bpf *b, pid_t pid, struct recording_writer *w,
		  uint64_t ts, uint64_t *records);
/* Whether pid's TLS capture is attached. */
bool rec_tls__on(const struct rec_tls *t, pid_t pid);
int rec_tls__missed(struct rec_tls *t, struct recording_writer *w, pid_t pid, uint64_t forked,
		    uint64_t exited, uint64_t ts, uint64_t *records);
void rec_tls__forget(struct rec_tls *t, pid_t pid);
void rec_tls__summary(const struct rec_tls *t);
void rec_tls__destroy(struct rec_tls *t);

struct rec_meta_host {
	char host[256];
	char kernel[256];
	char boot_id[64];
	char *cmdline;
	int ncpus;
	struct recording_cpu *cpus;
};

int rec_meta__host(struct rec_meta_host *m, int argc, char **argv);
void rec_meta__host_free(struct rec_meta_host *m);
/* A small file (/proc): its bytes, NUL-terminated, or -errno */
ssize_t rec_meta__read_small(const char *path, char *buf, size_t cap);
int64_t rec_meta__realtime_offset(void);
struct rec_meta_seen {
	pid_t tid;	  /* the thread of the record */
	uint32_t ppid;	  /* 0: unknown */
	const char *comm; /* NULL: unknown */
	const char *exe;  /* the file exec'd, NULL: unknown */
};

int rec_meta__process(struct recording_writer *w, pid_t pid, uint64_t ts,
		      const struct rec_meta_seen *seen);
void rec_meta__on_listen(void (*fn)(void *ctx, uint16_t port, pid_t pid, bool udp), void *ctx);
int rec_meta__thread(struct recording_writer *w, pid_t pid, pid_t tid, uint64_t ts);
bool rec_meta__alive(pid_t pid);
/* The first file pid maps named name (prefix: starting so): 0, -ENOENT, -ESRCH. */
int rec_meta__mapped(pid_t pid, const char *name, bool prefix, char *out, size_t n);
/* A process and its parent, as /proc says. */
struct rec_meta_pp {
	pid_t pid, ppid;
};
ssize_t rec_meta__processes(struct rec_meta_pp **out);
/* Metadata records rec_meta__* wrote so far. */
uint64_t rec_meta__records(void);
const char *rec_meta__missing_privilege(void);

#endif /* CRITPATH_RECORD_INT_H */
