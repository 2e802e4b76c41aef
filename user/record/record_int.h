/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* The recorder's parts (the only code that sees libbpf): record.c the CLI and
 * loop, hooks.c the BPF programs, meta.c /proc. */
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
	struct rec_bpf_opts bo;
	int argc; /* the whole command line, for the recording's header */
	char **argv;
};
/* 0: record; 1: --help printed; 2: a usage error, said on stderr. */
int rec_opts__parse(struct rec_opts *o, int argc, char **argv);
void rec_opts__usage(FILE *f);
/* 0 when spec is [BINARY:]FUNCTION of names that fit, else -EINVAL (said) */
int rec_probe_spec_check(const char *spec);

/* Mounts tracefs if needed, opens the object, picks tp_btf or raw_tp per hook,
 * loads; one line per hook that fell back. */
int rec_bpf__open_load(struct rec_bpf **b, const struct rec_bpf_opts *o);
int rec_bpf__add_target(struct rec_bpf *b, pid_t pid);
int rec_bpf__forget_target(struct rec_bpf *b, pid_t pid);
/* pid's Go crypto/tls Read and Write are probed: its socket reads tell the
 * Read they are made in their connection (bpf/tls.h go_read_conn). */
int rec_bpf__go_tls(struct rec_bpf *b, pid_t pid);
/* pid's forks wake the recorder at once (bpf/common.h fork_wake_bits): it
 * has TLS capture, which its children need from their first requests. */
int rec_bpf__fork_wakes(struct rec_bpf *b, pid_t pid);
void rec_bpf__listen_port(void *bpf, uint16_t port, pid_t pid, bool udp);
int rec_bpf__attach(struct rec_bpf *b);
/* One CP_MD_HOOK per hook. */
int rec_bpf__write_hooks(struct rec_bpf *b, struct recording_writer *w, uint64_t ts);
int rec_bpf__nhooks(const struct rec_bpf *b);
/* The event ring buffer: cb gets each record (already sized by hdr.size). */
typedef int (*rec_event_fn)(void *ctx, const struct cp_hdr *rec, size_t len);
int rec_bpf__ring(struct rec_bpf *b, rec_event_fn fn, void *ctx);
/* Consumes what is there, waiting at most timeout_ms; returns records or -errno. */
int rec_bpf__poll(struct rec_bpf *b, int timeout_ms);
/* Per-CPU drop counters (ncpus entries). */
int rec_bpf__drops(struct rec_bpf *b, uint64_t *per_cpu, int ncpus);
/* Calls of the threads of pids still blocked now: one enter record each
 * (futex, sock, poll). */
int rec_bpf__write_inflight(struct rec_bpf *b, struct recording_writer *w, const pid_t *pids,
			    int npids, uint64_t *written);
void rec_bpf__destroy(struct rec_bpf *b);
/* The --probe programs (entry, return), loaded when opts.probes was set. */
int rec_bpf__probe_progs(struct rec_bpf *b, struct bpf_program **enter, struct bpf_program **ret);
/* The TLS programs (entry, return), loaded when opts.tls was set and they
 * loaded; tls_off: why they were not (NULL: they were). */
/* OpenSSL's programs, or with go Go crypto/tls's (bpf/tls.bpf.c) */
int rec_bpf__tls_progs(struct rec_bpf *b, bool go, struct bpf_program **enter,
		       struct bpf_program **ret);
const char *rec_bpf__tls_off(const struct rec_bpf *b);

/* --probe [BINARY:]FUNCTION (record/probe.c). add: one message and -errno on
 * a malformed spec; *p is made on first use. */
struct rec_probes;
int rec_probes__add(struct rec_probes **p, const char *spec);
/* The file execvp() runs for cmd, resolved (the launched command's
 * executable before it is exec'd). */
int rec_probes__which(const char *cmd, char *out, size_t n);
/* Attaches every probe in each process (in the named binary, else its
 * executable). None found: -ENOENT; only in Go: -EPERM; one message either way. */
int rec_probes__attach(struct rec_probes *p, struct rec_bpf *b, const pid_t *pids,
		       const char *const *exes, int n, bool quiet);
/* A CP_MD_PROBE and a CP_MD_HOOK per probe attached; adds them to *records. */
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
	/* Read's one call of runtime.memmove (its plaintext copied into b),
	 * 0: none or several; probed instead of the RETs when there */
	uint64_t copy;
	char version[32]; /* its build info's, "go1.19.8" */
};
/* 0: found; -ENOENT: not a Go executable with crypto/tls in it; another
 * error: one that has it, not probed, *why saying why when known. */
int rec_gotls__find(const char *bin, struct go_tls_fns *f, const char **why);
/* Whether the ELF file bin was built by Go (a .go.buildinfo or .gopclntab
 * section): a uretprobe on one of its functions would crash it. */
bool rec_gotls__is_go(const char *bin);

/* Uprobe links destroyed off the loop (record/unlink.c): put queues one,
 * destroy waits for all. */
int rec_unlinker__new(struct rec_unlinker **u);
void rec_unlinker__put(struct rec_unlinker *u, struct bpf_link *link);
void rec_unlinker__destroy(struct rec_unlinker *u);

/* TLS plaintext capture (record/tls.c): OpenSSL's read and write functions
 * in each target process that maps libssl. */
struct rec_tls;
/* off: why TLS capture is off (rec_bpf__tls_off), NULL when it is on; u:
 * where its uprobe links go to be destroyed. */
int rec_tls__new(struct rec_tls **t, const char *off, bool quiet, struct rec_unlinker *u);
/* The recording's "tls" CP_MD_HOOK: on, or off and why. */
int rec_tls__write_hook(const struct rec_tls *t, struct recording_writer *w, uint64_t ts,
			uint64_t *records);
/* Attaches in pid when it maps libssl, writing a CP_MD_HOOK to w; 0 also when
 * it maps none, -ESRCH when gone. */
int rec_tls__scan(struct rec_tls *t, struct rec_bpf *b, pid_t pid, struct recording_writer *w,
		  uint64_t ts, uint64_t *records);
/* Whether pid's TLS capture is attached. */
bool rec_tls__on(const struct rec_tls *t, pid_t pid);
/* A TLS process's fork exited before its own uprobes were attached: a
 * CP_MD_HOOK at ts, counted for the summary. */
int rec_tls__missed(struct rec_tls *t, struct recording_writer *w, pid_t pid, uint64_t forked,
		    uint64_t exited, uint64_t ts, uint64_t *records);
void rec_tls__forget(struct rec_tls *t, pid_t pid);
/* The summary's lines: in which processes TLS capture was on (none: no
 * line), and which forks of them it missed. */
void rec_tls__summary(const struct rec_tls *t);
void rec_tls__destroy(struct rec_tls *t);

/* Header facts. Strings point into m (static storage of the caller). */
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
uint64_t rec_meta__now(void); /* CLOCK_MONOTONIC, ns */
int64_t rec_meta__realtime_offset(void);
/* What the fork or exec record of a process said of it, for what /proc no
 * longer says (it exited, or is a zombie: no exe). */
struct rec_meta_seen {
	pid_t tid;	  /* the thread of the record */
	uint32_t ppid;	  /* 0: unknown */
	const char *comm; /* NULL: unknown */
	const char *exe;  /* the file exec'd, NULL: unknown */
};

/* CP_MD_PROCESS, a CP_MD_THREAD per task, a CP_MD_SOCKET per socket fd; for a
 * gone process -ESRCH, or what seen says. */
int rec_meta__process(struct recording_writer *w, pid_t pid, uint64_t ts,
		      const struct rec_meta_seen *seen);
/* Called for each listening TCP socket rec_meta__process finds, and each
 * bound, unconnected UDP one (udp). */
void rec_meta__on_listen(void (*fn)(void *ctx, uint16_t port, pid_t pid, bool udp), void *ctx);
int rec_meta__thread(struct recording_writer *w, pid_t pid, pid_t tid, uint64_t ts);
bool rec_meta__alive(pid_t pid);
/* The first file pid maps named name (or starting with it, prefix), as a path
 * in its mount namespace: 0, -ENOENT, -ESRCH. */
int rec_meta__mapped(pid_t pid, const char *name, bool prefix, char *out, size_t n);
/* A process and its parent, as /proc says. */
struct rec_meta_pp {
	pid_t pid, ppid;
};
ssize_t rec_meta__processes(struct rec_meta_pp **out);
/* Metadata records rec_meta__* wrote so far. */
uint64_t rec_meta__records(void);
/* The first line naming a missing privilege, or NULL when we have them. */
const char *rec_meta__missing_privilege(void);

#endif /* CRITPATH_RECORD_INT_H */
