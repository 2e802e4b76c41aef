// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath dump FILE [--json] [--file-order]: every record, one line each, as
 * text or JSON lines (DESIGN.md 4); --requests FILE..: the requests found in
 * them instead. Exit: 0 clean, 1 unreadable or stopped early (reason on
 * stderr), 2 usage. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "dump_fmt.h"
#include "msg.h"
#include "outfile.h"
#include "recording.h"
#include "util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: critpath dump FILE [--json] [--file-order]\n"
		   "       critpath dump --requests FILE..\n"
		   "  --json        one JSON object per line (DESIGN.md section 4)\n"
		   "  --file-order  records as stored, not sorted by time\n"
		   "  --requests    the requests the recordings hold together, one JSON\n"
		   "                object per line, with what an agent's store gets of\n"
		   "                each (byte ranges, downstream calls)\n");
}

static void text__header(FILE *out, const char *path, const struct recording_info *info)
{
	struct timespec ts;
	struct tm tm;
	char when[64] = "?";
	int64_t rt = i64__add_sat((int64_t)info->start_ns, info->realtime_offset_ns);

	ts.tv_sec = rt / 1000000000;
	ts.tv_nsec = rt % 1000000000;
	if (gmtime_r(&ts.tv_sec, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	fprintf(out, "# %s: critpath recording, format %u, %s frames, agent %s\n", path,
		info->format_version, recording_codec_name(info->codec),
		info->agent_version ?: "?");
	fprintf(out, "# host %s, kernel %s, boot id %s%s%s\n", info->host ?: "?",
		info->kernel ?: "?", info->boot_id ?: "?", info->sku ? ", sku " : "",
		info->sku ?: "");
	fprintf(out, "# command: %s\n", info->cmdline ?: "?");
	fprintf(out, "# started %s.%09ld UTC (monotonic %" PRIu64 " ns), payload bytes %u\n", when,
		(long)ts.tv_nsec, info->start_ns, info->payload_bytes);
	for (uint32_t i = 0; i < info->ncpus; i++)
		fprintf(out, "# cpu %d: %s, %u MHz, capacity %u\n", info->cpus[i].cpu,
			info->cpus[i].model[0] ? info->cpus[i].model : "?", info->cpus[i].mhz,
			info->cpus[i].capacity);
	fprintf(out, "%-16s %-18s %4s %15s %-16s %s\n", "# since start", "UTC", "cpu", "pid/tid",
		"type", "fields");
}

static void json__header(FILE *out, const struct recording_info *info)
{
	struct jline j;

	jline__begin(&j, out);
	jline__str(&j, "type", "header");
	jline__u64(&j, "format_version", info->format_version);
	jline__str(&j, "compression", recording_codec_name(info->codec));
	jline__str(&j, "agent_version", info->agent_version);
	jline__str(&j, "cmdline", info->cmdline);
	jline__str(&j, "host", info->host);
	jline__str(&j, "kernel", info->kernel);
	jline__str(&j, "boot_id", info->boot_id);
	if (info->sku)
		jline__str(&j, "sku", info->sku);
	jline__i64(&j, "realtime_offset_ns", info->realtime_offset_ns);
	jline__u64(&j, "start_ns", info->start_ns);
	jline__u64(&j, "payload_bytes", info->payload_bytes);
	jline__key(&j, "cpus");
	fputc('[', out);
	for (uint32_t i = 0; i < info->ncpus; i++) {
		struct jline c;

		if (i)
			fputc(',', out);
		jline__begin(&c, out);
		jline__i64(&c, "cpu", info->cpus[i].cpu);
		jline__str(&c, "model", info->cpus[i].model);
		jline__u64(&c, "mhz", info->cpus[i].mhz);
		jline__u64(&c, "capacity", info->cpus[i].capacity);
		fputc('}', out);
	}
	fputc(']', out);
	jline__end(&j);
}

static void dump__trailer(FILE *out, bool json, const struct recording_totals *t)
{
	if (!json) {
		fprintf(out,
			"# end: monotonic %" PRIu64 " ns, %" PRIu64 " events, %" PRIu64
			" metadata records, %" PRIu64 " events lost, %u frames\n",
			t->end_ns, t->events, t->metadata, t->lost, t->frames);
		return;
	}
	struct jline j;

	jline__begin(&j, out);
	jline__str(&j, "type", "trailer");
	jline__u64(&j, "end_ns", t->end_ns);
	jline__u64(&j, "events", t->events);
	jline__u64(&j, "metadata", t->metadata);
	jline__u64(&j, "lost", t->lost);
	jline__u64(&j, "frames", t->frames);
	jline__end(&j);
}

static int dump_requests(char **paths, int npaths)
{
	struct outfile of;
	FILE *out;
	int err, werr;

	if (npaths < 1) {
		cp_error("dump", "no recording given");
		usage(stderr);
		return 2;
	}
	outfile__stdout(&of);
	out = outfile__stream(&of);
	if (!out) {
		cp_error("dump", "out of memory");
		return 1;
	}
	setvbuf(out, NULL, _IOFBF, 1 << 20);
	err = dump__requests((const char *const *)paths, npaths, out);
	werr = outfile__close(&of, 0);
	if (werr)
		cp_error("dump", "writing to stdout failed: %s", strerror(-werr));
	else if (err)
		cp_error("dump", "%s", strerror(-err));
	return err || werr ? 1 : 0;
}

int cmd_dump(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"file-order", no_argument, NULL, 'f'},
	    {"requests", no_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	enum recording_order order = RECORDING_TIME_ORDER;
	struct recording_reader *r = NULL;
	const struct cp_hdr *rec;
	const char *stopped;
	bool json = false, requests = false;
	struct outfile of;
	FILE *out;
	int c, ret, werr;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jfrh", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			requests = true;
			break;
		case 'j':
			json = true;
			break;
		case 'f':
			order = RECORDING_FILE_ORDER;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (requests)
		return dump_requests(argv + optind, argc - optind);
	if (optind != argc - 1) {
		cp_error("dump", "%s",
			optind >= argc ? "no recording given" : "one recording at a time");
		usage(stderr);
		return 2;
	}
	if (recording_reader__open(&r, argv[optind], order) < 0) {
		cp_error("dump", "%s", recording_reader__open_error());
		return 1;
	}
	/* stdout's write errors as the system says them */
	outfile__stdout(&of);
	out = outfile__stream(&of);
	if (!out) {
		cp_error("dump", "out of memory");
		recording_reader__close(r);
		return 1;
	}
	setvbuf(out, NULL, _IOFBF, 1 << 20);

	const struct recording_info *info = recording_reader__info(r);
	if (json)
		json__header(out, info);
	else
		text__header(out, argv[optind], info);
	while ((ret = recording_reader__next(r, &rec)) == 1) {
		if (json)
			dump__json(out, rec);
		else
			dump__text(out, info, rec);
	}
	if (recording_reader__totals(r))
		dump__trailer(out, json, recording_reader__totals(r));
	werr = outfile__close(&of, 0);
	stopped = recording_reader__stopped(r);
	if (werr)
		cp_error("dump", "writing to stdout failed: %s", strerror(-werr));
	else if (stopped)
		cp_error("dump", "%s", stopped);
	else if (ret < 0)
		cp_error("dump", "%s: %s", argv[optind], strerror(-ret));
	ret = stopped || ret < 0 || werr ? 1 : 0;
	recording_reader__close(r);
	return ret;
}
