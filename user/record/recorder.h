/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
#ifndef CRITPATH_RECORDER_H
#define CRITPATH_RECORDER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto_redact.h"
#include "record_int.h"

#define TLS_AGAIN_NS 1000000000ull
#define TLS_AGAIN_MAX_NS 32000000000ull
#define MAX_TARGETS REC_MAX_TARGETS

struct target {
	pid_t pid;
	bool top;	/* named on the command line (or the launched command) */
	uint8_t dead;	/* 1: group exited, 2: removed from the target map */
	bool need_meta; /* named on the command line: metadata at the next tick */
	bool need_tls;	/* new, or exec'd: look for libssl at the next tick */
	uint64_t tls_again, tls_every;
	uint32_t ppid;	/* who forked it (0: not seen): its exec record does not say */
	bool tls_on; /* its TLS capture attached at its last look */
	bool tls_gap;
	uint64_t forked, exited;
};

struct recorder {
	struct recording_writer *w;
	/* a process not traced exec'd file (rec_bpf_opts.watch_execs) */
	void (*spawn)(void *ctx, pid_t pid, const char *file);
	void *spawn_ctx;
	struct rec_bpf *bpf;
	const char *out;
	struct target targets[MAX_TARGETS];
	int ntargets;
	uint64_t events, metadata, lost;
	uint64_t unwritten;
	uint64_t inferred; /* switch-ins the kernel did not report (CP_SW_INFERRED) */
	uint64_t *drops_seen;
	int ncpus;
	uint64_t last_check;
	int write_err; /* first writer error: recording stops */
	bool quiet;
	/* targets' exits said one by one, then only counted (a churn of
	 * short-lived matching processes made a line each) */
	uint32_t exits_said;
	uint64_t exits_unsaid;
	pid_t child;	  /* -- CMD: the launched process */
	int child_status; /* its wait status once reaped */
	bool child_exec;  /* it reached exec */
	struct rec_tls *tls;
	struct redact *redact; /* what records must not keep (proto_redact.h) */
	/* Records of a drain pass put in time order after it (per-CPU
	 * rings). */
	struct held {
		char *buf;
		size_t n, cap;
		/* each record's time and offset, in the order held; tmp: the
		 * merge's other half */
		struct held_ix {
			uint64_t ts;
			size_t off;
		} *ix, *tmp;
		size_t nix, capix;
	} life, socks;
};

struct target *rec__target_find(struct recorder *r, pid_t pid);
struct target *rec__target_add(struct recorder *r, pid_t pid, bool top);
int rec__live_targets(const struct recorder *r);
/* the first writer error stops the recording; it is said once */
void rec__write_error(struct recorder *r, int err);
/* TLS capture for t's process, if it maps a TLS library */
int rec__tls_look(struct recorder *r, struct target *t, uint64_t ts);
void rec__tls_gap_say(struct recorder *r, struct target *t, uint64_t ts);
/* a record from the rings (rec_bpf__ring's callback) */
int rec__on_event(void *ctx, const struct cp_hdr *h, size_t len);
int rec__drain(struct recorder *r, int timeout_ms, bool final);
void rec__held_free(struct held *q);
/* the BPF side's drop counters, as loss records */
void rec__check_drops(struct recorder *r, uint64_t now);
/* per tick: metadata, TLS capture, dead groups out of the map */
void rec__tick(struct recorder *r, uint64_t now);
/* the targets' children from before the recording: targets too */
int rec__add_children(struct recorder *r);
/* pid (a running process) traced from now on; 0 or -errno */
int rec__target_watch(struct recorder *r, pid_t pid);

#endif /* CRITPATH_RECORDER_H */
