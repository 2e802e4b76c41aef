// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath dump --requests FILE..: the requests the kernel walk finds, each
 * with what it hands an agent's exporters and the store (cp_request_wire),
 * as JSON lines. A debugging aid: what one host's analysis alone gives a
 * store to stitch across hosts with. */
#include <errno.h>
#include <stdio.h>

#include "dump_fmt.h"
#include "kpath.h"
#include "model.h"

static bool want_all(void *ctx, const struct cp_request *head)
{
	return true;
}

static void say_warning(void *ctx, const char *msg)
{
	fprintf(stderr, "critpath: warning: %s\n", msg);
}

static void put_frames(FILE *out, const char *const *frames, uint32_t n)
{
	fputc('[', out);
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			fputc(',', out);
		jline__quoted(out, frames[i]);
	}
	fputc(']', out);
}

static void put_calls(FILE *out, const struct cp_request_wire *w)
{
	fputc('[', out);
	for (uint32_t i = 0; i < w->ncalls; i++) {
		const struct cp_call *k = &w->calls[i];
		struct jline c;

		if (i)
			fputc(',', out);
		jline__begin(&c, out);
		jline__str(&c, "local_addr", k->local_addr);
		jline__str(&c, "remote_addr", k->remote_addr);
		jline__u64(&c, "tx_seq", k->tx_seq);
		jline__u64(&c, "tx_len", k->tx_len);
		jline__u64(&c, "start_ns", k->start_ns);
		jline__u64(&c, "end_ns", k->end_ns);
		jline__i64(&c, "seg", k->seg);
		jline__str(&c, "category", cp_category_name(k->category));
		jline__key(&c, "frames");
		put_frames(out, k->frames, k->nframes);
		jline__bool(&c, "stitched", k->stitched);
		jline__bool(&c, "interference", k->interference);
		fputc('}', out);
	}
	fputc(']', out);
}

static int put_request(void *ctx, const struct cp_request *r)
{
	const struct cp_request_wire *w = r->wire;
	FILE *out = ctx;
	struct jline j;

	jline__begin(&j, out);
	jline__str(&j, "type", "request");
	jline__str(&j, "id", r->id);
	jline__str(&j, "host", r->host);
	jline__str(&j, "service", r->service);
	jline__str(&j, "name", r->name);
	jline__u64(&j, "start_ns", r->start_ns);
	jline__u64(&j, "end_ns", r->end_ns);
	jline__i64(&j, "realtime_offset_ns", r->realtime_offset_ns);
	jline__bool(&j, "partial", r->partial);
	jline__bool(&j, "downstream", r->downstream);
	jline__u64(&j, "nsegs", r->nsegs);
	if (w) {
		jline__str(&j, "protocol", w->protocol);
		jline__i64(&j, "status", w->status);
		jline__i64(&j, "pid", w->pid);
		jline__str(&j, "server_addr", w->server_addr);
		jline__str(&j, "client_addr", w->client_addr);
		jline__u64(&j, "rx_seq", w->rx_seq);
		jline__u64(&j, "rx_len", w->rx_len);
		jline__u64(&j, "tx_seq", w->tx_seq);
		jline__u64(&j, "tx_len", w->tx_len);
		jline__key(&j, "calls");
		put_calls(out, w);
	}
	jline__end(&j);
	return ferror(out) ? -EIO : 0;
}

int dump__requests(const char *const *paths, int npaths, FILE *out)
{
	struct cp_sink sink = {.request = put_request,
			       .warn = say_warning,
			       .ctx = out,
			       .want = want_all,
			       .ignores_tags = true};
	struct kpath_opts opts = {.quiet = true};

	return kpath__analyze(paths, npaths, &sink, &opts);
}
