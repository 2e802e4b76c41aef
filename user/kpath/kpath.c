// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * kpath__analyze: recordings in, requests to the engine. Each recording is
 * read in time order (RECORDING_TIME_ORDER, bounded reorder window); several
 * recordings are merged by time into one stream so connections between
 * their processes (and hosts) can be followed. Recordings of other hosts
 * (another boot id) are aligned on CLOCK_REALTIME through the offsets their
 * headers carry; request times stay in the first recording's
 * CLOCK_MONOTONIC.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kpath.h"
#include "kpath_internal.h"
#include "recording.h"

/* What the recorder keeps of an HTTP/2 transfer (bpf/sock.bpf.c cp_h2_walk),
 * for the warnings of what it did not: a printf argument, CP_PAYLOAD_MAX. */
#define H2_KEPT                                                                                    \
	"(the recorder keeps a transfer's first %d bytes, or --payload-bytes, then the headers "   \
	"and header blocks of up to 448 frames more, 4082 bytes of them; older recorders kept "    \
	"less)"

struct input {
	const char *path;
	struct recording_reader *r;
	const struct cp_hdr *cur; /* the next record, NULL at the end */
	int64_t delta;
	uint32_t src;
	const char **models;
};

static int to_engine(void *arg, const struct cp_request *req)
{
	engine__add_request(arg, req);
	return 0;
}

static const char *intern_in_engine(void *arg, const char *s)
{
	return engine__intern(arg, s);
}

static int input_next(struct input *in, struct engine *e)
{
	int rc = recording_reader__next(in->r, &in->cur);

	if (rc == 1)
		return 0;
	in->cur = NULL;
	/* the reader's line names the file already */
	if (recording_reader__stopped(in->r))
		engine__warn(e, "%s", recording_reader__stopped(in->r));
	return 0;
}

int kpath__analyze(const char *const *paths, int npaths, struct engine *e,
		   const struct kpath_opts *opts)
{
	struct input *ins = calloc((size_t)(npaths > 0 ? npaths : 1), sizeof(*ins));
	const struct recording_info *first = NULL;
	struct kp kp;
	int err = 0, opened = 0;
	bool progress = !(opts && opts->quiet) && isatty(STDERR_FILENO);

	if (!ins)
		return -ENOMEM;
	kp__init(&kp, to_engine, e);
	kp__set_intern(&kp, intern_in_engine, e);
	for (int i = 0; i < npaths; i++) {
		struct input *in = &ins[i];
		const struct recording_info *info;
		const char *host, *sku;
		int rc, src;

		in->path = paths[i];
		rc = recording_reader__open(&in->r, paths[i], RECORDING_TIME_ORDER);
		if (rc) {
			/* the reader's line names the file and what is wrong, as
			 * dump prints it ("cut short in the header: 100 of 255
			 * bytes present") */
			fprintf(stderr, "critpath report: %s\n", recording_reader__open_error());
			err = rc;
			in->r = NULL;
			continue;
		}
		info = recording_reader__info(in->r);
		if (!first) {
			first = info;
			kp.realtime_offset_ns = info->realtime_offset_ns;
		}
		/* another host's monotonic clock: align on the real-time clock */
		if (first != info &&
		    (!first->boot_id || !info->boot_id || strcmp(first->boot_id, info->boot_id)))
			in->delta = info->realtime_offset_ns - first->realtime_offset_ns;
		in->models = calloc(info->ncpus ? info->ncpus : 1, sizeof(*in->models));
		if (!in->models) {
			err = -ENOMEM;
			goto cleanup;
		}
		/* interned, as requests say (cp_request.interned) */
		for (uint32_t c = 0; c < info->ncpus; c++) {
			int cpu = info->cpus[c].cpu;

			if (cpu < 0 || (uint32_t)cpu >= info->ncpus)
				continue;
			in->models[cpu] = engine__intern(e, info->cpus[c].model);
			if (!in->models[cpu]) {
				err = -ENOMEM;
				goto cleanup;
			}
		}
		host = engine__intern(e, info->host);
		sku = engine__intern(e, info->sku);
		if ((info->host && !host) || (info->sku && !sku)) {
			err = -ENOMEM;
			goto cleanup;
		}
		src = kp__add_source(&kp,
				     info->boot_id && info->boot_id[0] ? info->boot_id : info->host,
				     in->delta, host, sku, info->ncpus, in->models);
		if (src < 0) {
			err = src;
			goto cleanup;
		}
		in->src = (uint32_t)src;
		input_next(in, e);
		opened++;
	}
	if (!opened)
		goto cleanup;
	err = 0;
	/* every file read, and each one's trailer counts no lost events */
	kp.no_loss_wait = opened == npaths;
	for (int i = 0; i < npaths && kp.no_loss_wait; i++) {
		struct recording_totals t;

		kp.no_loss_wait = !recording_reader__end_totals(ins[i].r, &t) && !t.lost;
	}
	for (;;) {
		struct input *best = NULL;
		uint64_t best_ts = 0;

		for (int i = 0; i < npaths; i++) {
			uint64_t ts;

			if (!ins[i].r || !ins[i].cur)
				continue;
			/* metadata may carry no time (0): it goes first, never
			 * wrapped around by another host's negative offset */
			ts = ins[i].cur->ts;
			if (ts && ins[i].delta)
				ts = ins[i].delta < 0 && ts < (uint64_t)-ins[i].delta
					 ? 0
					 : ts + (uint64_t)ins[i].delta;
			if (!best || ts < best_ts) {
				best = &ins[i];
				best_ts = ts;
			}
		}
		if (!best)
			break;
		err = kp__add_record(&kp, best->src, best->cur);
		if (err) {
			fprintf(stderr, "critpath report: %s: analysis failed: %s\n", best->path,
				strerror(-err));
			goto cleanup;
		}
		if (progress && !(kp.records & ((1u << 22) - 1)))
			fprintf(stderr, "\rcritpath report: %llu records, %llu requests",
				(unsigned long long)kp.records,
				(unsigned long long)kp.requests_out);
		input_next(best, e);
	}
	err = kp__finish(&kp);
	if (progress)
		fprintf(stderr, "\r\033[K");
	if (kp.pipe_beyond)
		engine__warn(e,
			     "%llu reads held more pipelined requests than their %u-byte payload "
			     "prefix shows: the requests past it were not seen and are not counted "
			     "(record with a larger --payload-bytes, up to %d, to see more)",
			     (unsigned long long)kp.pipe_beyond, first ? first->payload_bytes : 0,
			     CP_PAYLOAD_MAX);
	if (kp.h2_uncertain)
		engine__warn(e,
			     "%llu of %llu HTTP/2 requests may have ended after the end shown: the "
			     "frame that ended them was in bytes the recording did not keep, so "
			     "each ends at the first write that can have carried it " H2_KEPT,
			     (unsigned long long)kp.h2_uncertain,
			     (unsigned long long)kp.h2_requests, CP_PAYLOAD_MAX);
	if (kp.h2_unnamed)
		engine__warn(
		    e,
		    "%llu HTTP/2 requests are named 'request': their :method and :path "
		    "were in bytes the recording did not keep, or referred to header table "
		    "entries made before the recording",
		    (unsigned long long)kp.h2_unnamed);
	if (kp.h2_lost)
		engine__warn(e,
			     "%llu reads on HTTP/2 connections went on with frames the recording "
			     "did not keep: requests begun there were not seen " H2_KEPT,
			     (unsigned long long)kp.h2_lost, CP_PAYLOAD_MAX);
	if (kp.h2_unanswered)
		engine__warn(
		    e,
		    "%llu HTTP/2 streams were asked for and no answer to them was seen "
		    "(reset by the client, or answered in bytes the recording did not keep "
		    "before their connection closed)",
		    (unsigned long long)kp.h2_unanswered);
	if (kp.bio_wr_unsent)
		engine__warn(e,
			     "%llu TLS writes on memory buffers (Node.js, Go) were followed by no "
			     "socket write of their thread within %llu ms: their plaintext was not "
			     "used",
			     (unsigned long long)kp.bio_wr_unsent,
			     (unsigned long long)(KP_TLS_BIO_NS / 1000000));
	if (kp.bio_rd_lost)
		engine__warn(e,
			     "%llu TLS reads on memory buffers (Node.js, Go) came after no socket "
			     "read of their thread within %llu ms, on a connection not seen "
			     "before: their plaintext was not used",
			     (unsigned long long)kp.bio_rd_lost,
			     (unsigned long long)(KP_TLS_BIO_NS / 1000000));
	if (kp.udp_unknown)
		engine__warn(e,
			     "%llu datagrams read on unconnected UDP sockets came from senders not "
			     "known (they arrived before the socket was seen, or an older recorder "
			     "did not record senders): no request or call was framed on them",
			     (unsigned long long)kp.udp_unknown);
	if (kp.dq_dropped)
		engine__warn(e,
			     "%llu DNS queries were not framed: more than %u of one client's "
			     "queries waited for their answers at once on its flow",
			     (unsigned long long)kp.dq_dropped, KP_DQ_MAX);
	if (kp.loss_after_early)
		engine__warn(e,
			     "%llu requests went out before their wait for late loss windows was "
			     "over (more than %llu MiB of requests waiting): a loss window written "
			     "after them may overlap some without marking them partial",
			     (unsigned long long)kp.pend_early,
			     (unsigned long long)(KP_PEND_MAX_BYTES >> 20));
	if (kp.inferred_switches)
		engine__warn(e,
			     "%llu switches into target threads were missing from the kernel's "
			     "trace; the recorder inferred them, each at the earliest it can have "
			     "been (see dump: inferred)",
			     (unsigned long long)kp.inferred_switches);
	if (kp.tls_uncaptured)
		engine__warn(e,
			     "TLS plaintext was not captured in %llu process%s (%s%s): their TLS "
			     "connections are framed on ciphertext, their requests unnamed",
			     (unsigned long long)kp.tls_uncaptured,
			     kp.tls_uncaptured == 1 ? "" : "es", kp.tls_uncaptured_why,
			     kp.tls_uncaptured > 1 ? "; dump's tls pid hooks say why for the others"
						: "");
	if (kp.loss_unpromised)
		engine__warn(e,
			     "%s%s: loss windows in a recording whose trailer counts no lost events: "
			     "the requests before the first one went out without waiting for it, and "
			     "may overlap it without being marked partial",
			     paths[0], npaths > 1 ? " or another input" : "");
	if (kp.nagle_reqs) {
		char svcs[160] = "";
		size_t len = 0;

		for (uint32_t i = 0; i < kp.nunsent_svc && len < sizeof(svcs); i++)
			len += (size_t)snprintf(svcs + len, sizeof(svcs) - len, "%s%s %llu",
						i ? ", " : "", kp.unsent_svc[i].service,
						(unsigned long long)kp.unsent_svc[i].n);
		engine__warn(e,
			     "%llu of %llu requests (%s%s) ended with a small write that TCP "
			     "held back, unsent when it returned: Nagle's algorithm waits for "
			     "the ACK of the write before (up to 40 ms with delayed ACKs). Their "
			     "clients waited past the end of the path shown; TCP_NODELAY, or one "
			     "write per response, sends it at once",
			     (unsigned long long)kp.nagle_reqs, (unsigned long long)kp.requests_out,
			     svcs, kp.unsent_more ? ", …" : "");
	}
	if (kp.unsent_reqs > kp.nagle_reqs)
		engine__warn(e,
			     "%llu of %llu requests ended with part of their last write not yet "
			     "sent by TCP (a full congestion or receive window): their clients "
			     "got the rest later than the path's end",
			     (unsigned long long)(kp.unsent_reqs - kp.nagle_reqs),
			     (unsigned long long)kp.requests_out);
	if (kp.requests_partial)
		engine__warn(e, "%llu of %llu requests overlap a loss window and are partial",
			     (unsigned long long)kp.requests_partial,
			     (unsigned long long)kp.requests_out);
	if (!kp.records && opened) {
		/* a header and nothing after it: the recorder stopped while
		 * it started (killed, or its ring never delivered) */
		fprintf(stderr,
			"critpath report: %s%s: no events: the recording ends after its header "
			"(the recorder stopped before any event was written)\n",
			paths[0], npaths > 1 ? " and the others" : "");
		err = -ENODATA;
		goto cleanup;
	}
	if (!kp.requests_out)
		engine__warn(e,
			     "%s%s: no requests found (no server connection carried a request "
			     "and its response)",
			     paths[0], npaths > 1 ? " and others" : "");
cleanup:
	kp__free(&kp);
	for (int i = 0; i < npaths; i++) {
		if (ins[i].r)
			recording_reader__close(ins[i].r);
		free(ins[i].models);
	}
	free(ins);
	if (!err && !opened)
		err = -ENOENT;
	return err;
}
