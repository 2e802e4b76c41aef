// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clocks.h"
#include "kpath.h"
#include "kpath_internal.h"
#include "msg.h"
#include "recording.h"

#define KP_CLOCK_RECORDS (8u << 20)
#define KP_CLOCK_ENOUGH 256
#define KP_CLOCK_UNKNOWN_NS 1000000000ull

#define H2_KEPT                                                                                    \
	"(the recorder keeps a transfer's first %d bytes, or --payload-bytes, then the headers "   \
	"and header blocks of up to 448 frames more, 4082 bytes of them; older recorders kept "    \
	"less)"

/* A header's CLOCK_REALTIME - CLOCK_MONOTONIC: a clock set within 146
 * years of 1970. Past that it is forged or damaged, and two of them do not
 * fit a difference. */
#define KP_REALTIME_MAX (INT64_C(1) << 62)

struct kpath {
	struct kp kp;
	struct cp_sink sink;
	char *first_name;
	int64_t first_realtime;
	bool first_realtime_bad;
	uint32_t nhosts;
	uint32_t payload_bytes;
	int nsources;
	const char ***models; /* per source, by CPU: interned model names */
};

static void say(struct kpath *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct kpath *k, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!k->sink.warn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	k->sink.warn(k->sink.ctx, msg);
}

static const char *keep(struct kpath *k, const char *s)
{
	return k->sink.intern && s ? k->sink.intern(k->sink.ctx, s) : s;
}

struct kpath *kpath__new(const struct cp_sink *sink)
{
	struct kpath *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->sink = *sink;
	kp__init(&k->kp, sink->request, sink->ctx);
	if (sink->intern)
		kp__set_intern(&k->kp, sink->intern, sink->ctx);
	k->kp.want = sink->want;
	k->kp.max_names = sink->max_names;
	return k;
}

static const char *host_label(struct kpath *k, const char *key, const char *name)
{
	static char buf[128];
	uint32_t same = 0;

	if (!name)
		return NULL;
	for (uint32_t i = 0; i < k->kp.nsrc; i++) {
		const struct kp_source *s = &k->kp.src[i];
		bool first = true;

		if (!strcmp(s->key, key))
			return s->host_name; /* this host again */
		for (uint32_t j = 0; j < i; j++)
			first &= k->kp.src[j].host != s->host;
		if (first && s->key[strcspn(s->key, "/")] == '/' &&
		    !strcmp(s->key + strcspn(s->key, "/") + 1, name))
			same++;
	}
	if (!same)
		return name;
	snprintf(buf, sizeof(buf), "%s#%u", name, same + 1);
	return buf;
}

/* The source's realtime offset, or false after saying why it is refused */
static bool realtime_ok(struct kpath *k, const char *name, const struct recording_info *info)
{
	int64_t rt = info->realtime_offset_ns;

	if (rt > -KP_REALTIME_MAX && rt < KP_REALTIME_MAX)
		return true;
	say(k,
	    "%s: its header's realtime_offset_ns (%lld) is more than 146 years from 1970, "
	    "no clock's: refused, its times are %s",
	    name ? name : "?", (long long)rt,
	    k->nsources ? "placed on the first recording's clock as they are"
			: "shown as if its clock had started in 1970, and other hosts' recordings "
			  "are placed on its clock as they are");
	return false;
}

int kpath__add_source(struct kpath *k, const char *name, const struct recording_info *info,
		      bool lossless)
{
	const char **models, ***all, *host, *sku;
	char key[sizeof(k->kp.src[0].key)];
	int64_t delta = 0;
	int src;

	snprintf(key, sizeof(key), "%s/%s", info->boot_id ? info->boot_id : "",
		 info->host ? info->host : "");
	if (!k->nsources) {
		k->first_name = strdup(name ? name : "?");
		if (!k->first_name)
			return -ENOMEM;
		k->first_realtime_bad = !realtime_ok(k, name, info);
		k->first_realtime = k->first_realtime_bad ? 0 : info->realtime_offset_ns;
		k->kp.realtime_offset_ns = k->first_realtime;
		k->payload_bytes = info->payload_bytes;
		k->kp.no_loss_wait = lossless;
	} else {
		bool known = false;

		k->kp.no_loss_wait &= lossless;
		for (uint32_t i = 0; i < k->kp.nsrc && !known; i++)
			if (!strcmp(k->kp.src[i].key, key)) {
				delta = k->kp.src[i].delta;
				known = true;
			}
		/* both within KP_REALTIME_MAX of 0: the difference fits */
		if (!known && realtime_ok(k, name, info) && !k->first_realtime_bad)
			delta = info->realtime_offset_ns - k->first_realtime;
	}
	all = realloc(k->models, (size_t)(k->nsources + 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	k->models = all;
	models = calloc(info->ncpus ? info->ncpus : 1, sizeof(*models));
	if (!models)
		return -ENOMEM;
	k->models[k->nsources++] = models;
	/* interned, as requests say (cp_request.interned) */
	for (uint32_t c = 0; c < info->ncpus; c++) {
		int cpu = info->cpus[c].cpu;

		if (cpu < 0 || (uint32_t)cpu >= info->ncpus)
			continue;
		if (!(models[cpu] = keep(k, info->cpus[c].model)))
			return -ENOMEM;
	}
	host = keep(k, host_label(k, key, info->host));
	sku = keep(k, info->sku);
	if ((info->host && !host) || (info->sku && !sku))
		return -ENOMEM;
	src = kp__add_source(&k->kp, key, delta, host, sku, info->ncpus, models);
	if (src >= 0 && k->kp.src[src].host + 1 > k->nhosts)
		k->nhosts = k->kp.src[src].host + 1;
	return src;
}

int kpath__add(struct kpath *k, uint32_t src, const struct cp_hdr *rec)
{
	return kp__add_record(&k->kp, src, rec);
}

int kpath__advance(struct kpath *k, uint32_t src, uint64_t ts)
{
	return kp__advance(&k->kp, src, ts);
}

uint64_t kpath__unwalked(const struct kpath *k)
{
	return k->kp.unwalked;
}

uint64_t kpath__records(const struct kpath *k)
{
	return k->kp.records;
}

void kpath__free(struct kpath *k)
{
	if (!k)
		return;
	kp__free(&k->kp);
	for (int i = 0; i < k->nsources; i++)
		free(k->models[i]);
	free(k->models);
	free(k->first_name);
	free(k);
}

int kpath__flush(struct kpath *k)
{
	int err = kp__finish(&k->kp);

	if (k->kp.pipe_beyond)
		say(k,
		    "%llu reads held more pipelined requests than their %u-byte payload "
		    "prefix shows: the requests past it were not seen and are not counted "
		    "(record with a larger --payload-bytes, up to %d, to see more)",
		    (unsigned long long)k->kp.pipe_beyond, k->payload_bytes, CP_PAYLOAD_MAX);
	if (k->kp.h2_uncertain)
		say(k,
		    "%llu of %llu HTTP/2 requests may have ended after the end shown: the "
		    "frame that ended them was in bytes the recording did not keep, so "
		    "each ends at the first write that can have carried it " H2_KEPT,
		    (unsigned long long)k->kp.h2_uncertain, (unsigned long long)k->kp.h2_requests,
		    CP_PAYLOAD_MAX);
	if (k->kp.h2_unnamed)
		say(k,
		    "%llu HTTP/2 requests are named 'request': their :method and :path "
		    "were in bytes the recording did not keep, or referred to header table "
		    "entries made before the recording",
		    (unsigned long long)k->kp.h2_unnamed);
	if (k->kp.h2_lost)
		say(k,
		    "%llu reads on HTTP/2 connections went on with frames the recording "
		    "did not keep: requests begun there were not seen " H2_KEPT,
		    (unsigned long long)k->kp.h2_lost, CP_PAYLOAD_MAX);
	if (k->kp.h2_unanswered)
		say(k,
		    "%llu HTTP/2 streams were asked for and no answer to them was seen "
		    "(reset by the client, or answered in bytes the recording did not keep "
		    "before their connection closed)",
		    (unsigned long long)k->kp.h2_unanswered);
	if (k->kp.bio_wr_unsent)
		say(k,
		    "%llu TLS writes on memory buffers (Node.js, Go) were followed by no "
		    "socket write of their thread within %llu ms: their plaintext was not "
		    "used",
		    (unsigned long long)k->kp.bio_wr_unsent,
		    (unsigned long long)(KP_TLS_BIO_NS / 1000000));
	if (k->kp.bio_rd_lost)
		say(k,
		    "%llu TLS reads on memory buffers (Node.js, Go) came after no socket "
		    "read of their thread within %llu ms, on a connection not seen "
		    "before: their plaintext was not used",
		    (unsigned long long)k->kp.bio_rd_lost,
		    (unsigned long long)(KP_TLS_BIO_NS / 1000000));
	if (k->kp.udp_unknown)
		say(k,
		    "%llu datagrams read on unconnected UDP sockets came from senders not "
		    "known (they arrived before the socket was seen, or an older recorder "
		    "did not record senders): no request or call was framed on them",
		    (unsigned long long)k->kp.udp_unknown);
	if (k->kp.dq_dropped)
		say(k,
		    "%llu DNS queries were not framed: more than %u of one client's "
		    "queries waited for their answers at once on its flow",
		    (unsigned long long)k->kp.dq_dropped, KP_DQ_MAX);
	if (k->kp.loss_after_early)
		say(k,
		    "%llu requests went out before their wait for late loss windows was "
		    "over (more than %llu MiB of requests waiting): a loss window written "
		    "after them may overlap some without marking them partial",
		    (unsigned long long)k->kp.pend_early,
		    (unsigned long long)(KP_PEND_MAX_BYTES >> 20));
	if (k->kp.inferred_switches)
		say(k,
		    "%llu switches into target threads were missing from the kernel's "
		    "trace; the recorder inferred them, each at the earliest it can have "
		    "been (see dump: inferred)",
		    (unsigned long long)k->kp.inferred_switches);
	if (k->kp.tls_uncaptured)
		say(k,
		    "TLS plaintext was not captured in %llu process%s (%s%s): their TLS "
		    "connections are framed on ciphertext, their requests unnamed",
		    (unsigned long long)k->kp.tls_uncaptured, k->kp.tls_uncaptured == 1 ? "" : "es",
		    k->kp.tls_uncaptured_why,
		    k->kp.tls_uncaptured > 1 ? "; dump's tls pid hooks say why for the others"
					     : "");
	if (k->kp.loss_unpromised)
		say(k,
		    "%s%s: loss windows in a recording whose trailer counts no lost events: "
		    "the requests before the first one went out without waiting for it, and "
		    "may overlap it without being marked partial",
		    k->first_name, k->nsources > 1 ? " or another input" : "");
	if (k->kp.nagle_reqs) {
		char svcs[160] = "";
		size_t len = 0;

		for (uint32_t i = 0; i < k->kp.nunsent_svc && len < sizeof(svcs); i++)
			len += (size_t)snprintf(svcs + len, sizeof(svcs) - len, "%s%s %llu",
						i ? ", " : "", k->kp.unsent_svc[i].service,
						(unsigned long long)k->kp.unsent_svc[i].n);
		say(k,
		    "%llu of %llu requests (%s%s) ended with a small write that TCP "
		    "held back, unsent when it returned: Nagle's algorithm waits for "
		    "the ACK of the write before (up to 40 ms with delayed ACKs). Their "
		    "clients waited past the end of the path shown; TCP_NODELAY, or one "
		    "write per response, sends it at once",
		    (unsigned long long)k->kp.nagle_reqs, (unsigned long long)k->kp.requests_out,
		    svcs, k->kp.unsent_more ? ", …" : "");
	}
	if (k->kp.unsent_reqs > k->kp.nagle_reqs)
		say(k,
		    "%llu of %llu requests ended with part of their last write not yet "
		    "sent by TCP (a full congestion or receive window): their clients "
		    "got the rest later than the path's end",
		    (unsigned long long)(k->kp.unsent_reqs - k->kp.nagle_reqs),
		    (unsigned long long)k->kp.requests_out);
	if (k->kp.skew_clipped)
		say(k,
		    "%llu steps of critical paths went into another host's write that began "
		    "after its bytes arrived (by up to %.3f ms): the hosts' clocks differ "
		    "by more than their estimate; each such step is clipped to the wait it "
		    "ended",
		    (unsigned long long)k->kp.skew_clipped,
		    (double)k->kp.skew_clipped_max / 1e6);
	if (k->kp.names_folded)
		say(k,
		    "more than %u distinct request names: %llu requests with a new one "
		    "were counted as " CP_OTHER_NAMES,
		    k->kp.max_names, (unsigned long long)k->kp.names_folded);
	if (k->kp.requests_partial)
		say(k, "%llu of %llu requests overlap a loss window and are partial",
		    (unsigned long long)k->kp.requests_partial,
		    (unsigned long long)k->kp.requests_out);
	if (k->kp.records && !k->kp.requests_out && !k->kp.unwalked)
		say(k,
		    "%s%s: no requests found (no server connection carried a request and its "
		    "response)",
		    k->first_name, k->nsources > 1 ? " and others" : "");
	return err;
}

struct input {
	const char *path;
	struct recording_reader *r;
	const struct cp_hdr *cur; /* the next record, NULL at the end */
	uint64_t ts;		  /* its time on the common base (input_at) */
	int64_t delta;
	uint32_t src;
};

static void input_at(struct input *in)
{
	uint64_t ts = in->cur->ts;

	if (ts && in->delta)
		ts = in->delta < 0 && ts < 0 - (uint64_t)in->delta ? 0 : ts + (uint64_t)in->delta;
	in->ts = ts;
}

static void input_next(struct input *in, const struct cp_sink *sink)
{
	if (recording_reader__next(in->r, &in->cur) == 1) {
		input_at(in);
		return;
	}
	in->cur = NULL;
	/* the reader's line names the file already */
	if (recording_reader__stopped(in->r) && sink->warn)
		sink->warn(sink->ctx, recording_reader__stopped(in->r));
}

/* kpath.h's API over the core; kpath__analyze merges recordings by time,
 * hosts aligned on CLOCK_REALTIME. */
static struct input *input_first(struct input *ins, int n)
{
	struct input *best = NULL;

	for (int i = 0; i < n; i++)
		if (ins[i].r && ins[i].cur && (!best || ins[i].ts < best->ts))
			best = &ins[i];
	return best;
}

static const char *const clock_basis[] = {
    [KP_CLOCK_REFERENCE] = "reference",
    [KP_CLOCK_MESSAGES] = "messages",
    [KP_CLOCK_ONE_WAY] = "one-way",
    [KP_CLOCK_REALTIME] = "realtime",
};

static void say_hosts(struct kpath *k, const struct kp_clock_est *est, uint32_t nest)
{
	uint32_t ref = k->kp.src[0].host;

	for (uint32_t h = 0; h < k->nhosts; h++) {
		struct cp_host ch = {.name = kp__host_name(&k->kp, h),
				     .clock = clock_basis[KP_CLOCK_REALTIME]};

		if (!ch.name)
			ch.name = "?";

		if (h < nest) {
			ch.clock_offset_ns = est[h].offset_ns;
			ch.uncertainty_ns = est[h].uncertainty_ns;
			ch.matched_messages = est[h].messages;
			ch.clock = clock_basis[est[h].basis];
		} else if (h == ref) {
			ch.clock = clock_basis[KP_CLOCK_REFERENCE];
		}
		if (k->sink.host)
			k->sink.host(k->sink.ctx, &ch);
		if (h == ref || k->nhosts < 2)
			continue;
		if (h >= nest || est[h].basis == KP_CLOCK_REALTIME)
			say(k,
			    "host %s: no message between its traced processes and another "
			    "recorded host's was matched: its clock is placed by the realtime "
			    "offset its recording states, which is only as good as NTP",
			    ch.name);
		else if (est[h].basis == KP_CLOCK_ONE_WAY)
			say(k,
			    "host %s: bytes to or from it went one way only: its clock is moved "
			    "just enough for them to arrive after they were sent (%+.3f ms), its "
			    "uncertainty not known",
			    ch.name, (double)est[h].offset_ns / 1e6);
		if (h < nest && est[h].conflict_ns)
			say(k,
			    "host %s: the messages that place its clock contradict each other by "
			    "%.3f ms (a clock that drifted during the recording, or a TCP stream "
			    "matched wrongly): its offset is the middle of them",
			    ch.name, (double)est[h].conflict_ns / 1e6);
	}
}

static int place_hosts(struct kpath *k, struct input *ins, int n)
{
	struct kp_clock_est est[KP_CLOCK_HOSTS];
	struct input *pass;
	struct kp_clocks *cl;
	uint64_t records = 0;
	uint32_t nest = k->nhosts < KP_CLOCK_HOSTS ? k->nhosts : KP_CLOCK_HOSTS;
	int err = 0;

	if (k->nhosts < 2) {
		say_hosts(k, NULL, 0);
		return 0;
	}
	cl = kp_clocks__new(k->nhosts);
	pass = calloc((size_t)n, sizeof(*pass));
	if (!cl || !pass) {
		err = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		if (!ins[i].r)
			continue;
		pass[i] = ins[i];
		if (recording_reader__open(&pass[i].r, ins[i].path, RECORDING_FILE_ORDER)) {
			pass[i].r = NULL;
			continue;
		}
		if (recording_reader__next(pass[i].r, &pass[i].cur) != 1)
			pass[i].cur = NULL;
		else
			input_at(&pass[i]);
	}
	for (struct input *in; (in = input_first(pass, n));) {
		kp_clocks__add(cl, k->kp.src[in->src].host, in->cur, in->delta);
		if (recording_reader__next(in->r, &in->cur) != 1)
			in->cur = NULL;
		else
			input_at(in);
		if (!(++records & 0x3fff) &&
		    (records >= KP_CLOCK_RECORDS || kp_clocks__enough(cl, KP_CLOCK_ENOUGH)))
			break;
	}
	kp_clocks__solve(cl, k->kp.src[0].host, est);
	for (uint32_t s = 0; s < k->kp.nsrc; s++)
		if (k->kp.src[s].host < nest) {
			const struct kp_clock_est *e = &est[k->kp.src[s].host];

			k->kp.src[s].delta = i64__sub_sat(k->kp.src[s].delta, e->offset_ns);
			k->kp.src[s].clock_unc = e->basis == KP_CLOCK_MESSAGES ||
							 e->basis == KP_CLOCK_REFERENCE
						     ? e->uncertainty_ns
						     : KP_CLOCK_UNKNOWN_NS;
		}
	for (int i = 0; i < n; i++)
		if (ins[i].r) {
			ins[i].delta = k->kp.src[ins[i].src].delta;
			if (ins[i].cur)
				input_at(&ins[i]);
		}
	say_hosts(k, est, nest);
out:
	for (int i = 0; pass && i < n; i++)
		if (pass[i].r)
			recording_reader__close(pass[i].r);
	free(pass);
	kp_clocks__free(cl);
	return err;
}

int kpath__analyze(const char *const *paths, int npaths, const struct cp_sink *sink,
		   const struct kpath_opts *opts)
{
	struct input *ins = calloc((size_t)(npaths > 0 ? npaths : 1), sizeof(*ins));
	struct kpath *k = kpath__new(sink);
	int err = 0, opened = 0;
	bool progress = !(opts && opts->quiet) && isatty(STDERR_FILENO);

	if (!ins || !k) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (int i = 0; i < npaths; i++) {
		struct input *in = &ins[i];
		const struct recording_info *info;
		struct recording_totals t;
		int rc, src;

		in->path = paths[i];
		rc = recording_reader__open(&in->r, paths[i], RECORDING_TIME_ORDER);
		if (rc) {
			cp_error("report", "%s", recording_reader__open_error());
			err = rc;
			in->r = NULL;
			continue;
		}
		info = recording_reader__info(in->r);
		/* every file read, and its trailer counts no lost events */
		src = kpath__add_source(k, paths[i], info,
					opened == i && !recording_reader__end_totals(in->r, &t) &&
					    !t.lost);
		if (src < 0) {
			err = src;
			goto cleanup;
		}
		in->src = (uint32_t)src;
		in->delta = k->kp.src[src].delta; /* the merge's order: its clock aligned */
		input_next(in, sink);
		opened++;
	}
	if (!opened)
		goto cleanup;
	err = place_hosts(k, ins, npaths);
	if (err)
		goto cleanup;
	if (opened < npaths) /* a file not read may have lost events */
		k->kp.no_loss_wait = false;
	for (;;) {
		struct input *best = input_first(ins, npaths);

		if (!best)
			break;
		err = kpath__add(k, best->src, best->cur);
		if (err) {
			cp_error("report", "%s: analysis failed: %s", best->path,
				strerror(-err));
			goto cleanup;
		}
		if (progress && !(k->kp.records & ((1u << 22) - 1)))
			fprintf(stderr, "\rcritpath report: %llu records, %llu requests",
				(unsigned long long)k->kp.records,
				(unsigned long long)k->kp.requests_out);
		input_next(best, sink);
	}
	if (!k->kp.records) {
		cp_error("report",
			"%s%s: no events: the recording ends after its header "
			"(the recorder stopped before any event was written)",
			paths[0], npaths > 1 ? " and the others" : "");
		err = -ENODATA;
		goto cleanup;
	}
	err = kpath__flush(k);
	if (progress)
		fprintf(stderr, "\r\033[K");
cleanup:
	kpath__free(k);
	for (int i = 0; ins && i < npaths; i++)
		if (ins[i].r)
			recording_reader__close(ins[i].r);
	free(ins);
	if (!err && !opened)
		err = -ENOENT;
	return err;
}
