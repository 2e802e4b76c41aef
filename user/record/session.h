/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
#ifndef CRITPATH_REC_SESSION_H
#define CRITPATH_REC_SESSION_H

#include <pthread.h>
#include <signal.h>

#include "record_int.h"
#include "recorder.h"
#include "recording.h"

struct rec_session {
	const char *cmd; /* "record": cp_error's command */
	struct rec_opts o;
	struct recorder *r;
	struct rec_probes *probes;
	struct rec_unlinker *unlink;
	struct rec_meta_host host;
	struct recording_info info;
	uint64_t start, attached, deadline;
	uint64_t t0;	     /* the command's start */
	uint64_t attach_ns;  /* from t0 to every hook attached: said in the start line */
	pthread_t loader;    /* loading the BPF programs (rec_session__load_start) */
	bool loading;	     /* loader runs or is to be joined */
	int load_err;	     /* its rec_bpf__open_load's */
	int go_fd; /* -- CMD: written once the probes are in, the child runs */
	bool all_exited;
	/* set: no file, every record goes to tap (critpath agent) */
	recording_tap_fn tap;
	void *tap_ctx;
};

/* Set by SIGINT, SIGTERM and SIGHUP, caught from the command's start */
extern volatile sig_atomic_t rec_stop_signal;
/* SIGINT, SIGTERM and SIGHUP end the command cleanly from now on: one that
 * comes while the programs load (~0.3 s) is kept, and attach then attaches
 * nothing */
void rec_session__catch_signals(void);

/* Starts loading the BPF programs (the verifier's share of the start) in a
 * thread, to overlap the target scan; rec_session__load takes the result.
 * Nothing without the privilege (open says why). Options final by now. */
void rec_session__load_start(struct rec_session *s);
int rec_session__open(struct rec_session *s);
int rec_session__load(struct rec_session *s);
/* Probes attached, the start's metadata written (none of it when stopped
 * already). 0 or 1. */
int rec_session__attach(struct rec_session *s);
/* The launched command, reaped once it exits. */
void rec_session__reap_child(struct recorder *r);
void rec_session__free(struct rec_session *s);

#endif
