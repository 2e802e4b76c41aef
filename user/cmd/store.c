// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath store: recordings and trace files walked as report walks them,
 * every request's critical path written to ClickHouse (docs/store.md).
 * Exit: 0 all stored, 1 something not stored or nothing read, 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ch_writer.h"
#include "clickhouse.h"
#include "commands.h"
#include "engine.h"
#include "kpath.h"
#include "msg.h"
#include "recording.h"
#include "report_cmd.h"
#include "span.h"
#include "util.h"

#define CMD "store"
#define SNIFF_BYTES 64

/* A host of the recordings: its name as the walk labels it, its boot id */
struct origin {
	char *label, *boot;
};

struct store {
	struct ch_writer *w;
	const char *host; /* --host */
	struct origin *o;
	uint32_t no;
	uint32_t last; /* the origin found last */
	uint64_t seen, refused;
	bool quiet, stopped;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: critpath store INPUT.. clickhouse://HOST[:PORT]/DB [options]\n"
		"       critpath store --distributed CLUSTER[:SHARD_DB] clickhouse://HOST[:PORT]/DB\n"
		"  INPUT: recordings, Jaeger / OTLP JSON trace files, directories of them\n"
		"  Every request's critical path into ClickHouse's tables (created when\n"
		"  missing); user and password from $CLICKHOUSE_USER, $CLICKHOUSE_PASSWORD\n"
		"  --host NAME   the requests' host is NAME (default: the recording's)\n"
		"  --distributed CLUSTER[:SHARD_DB]  no input: DB made a Distributed view of\n"
		"                the store SHARD_DB (default: DB) on every shard of CLUSTER\n"
		"                (the server's remote_servers), for report over the fleet\n"
		"  -q            no warnings or progress\n");
}

/* The boot id of a request's host: the origin its label names */
static const char *boot_of(struct store *s, const char *host)
{
	if (!host || !s->no)
		return "";
	if (s->last < s->no && !strcmp(s->o[s->last].label, host))
		return s->o[s->last].boot;
	for (uint32_t i = 0; i < s->no; i++)
		if (!strcmp(s->o[i].label, host)) {
			s->last = i;
			return s->o[i].boot;
		}
	return "";
}

static bool sink_want(void *ctx, const struct cp_request *head)
{
	return true; /* every request walked, its wire filled */
}

static int sink_request(void *ctx, const struct cp_request *r)
{
	struct store *s = ctx;
	int err;

	s->seen++;
	err = ch_writer__add(s->w, r, s->host ? s->host : r->host, boot_of(s, r->host));
	if (err == -EPIPE) {
		s->stopped = true;
		return -1;
	}
	return 0;
}

static void sink_warn(void *ctx, const char *msg)
{
	struct store *s = ctx;

	if (!s->quiet)
		cp_warn(CMD, "%s", msg);
}

/* The hosts of the recordings as kpath names them: a second boot (or
 * recording host) of one name is "name#2" */
static int origins(struct store *s, const char *const *recs, int n)
{
	for (int i = 0; i < n; i++) {
		struct recording_reader *r;
		const struct recording_info *info;
		const char *host, *boot;
		uint32_t same = 0;
		bool known = false;
		struct origin *o;

		if (recording_reader__open(&r, recs[i], RECORDING_FILE_ORDER))
			continue; /* said by the walk */
		info = recording_reader__info(r);
		host = info->host ? info->host : "";
		boot = info->boot_id ? info->boot_id : "";
		for (uint32_t j = 0; j < s->no; j++) {
			size_t hl = strcspn(s->o[j].label, "#");

			known |= !strcmp(s->o[j].boot, boot) && !strncmp(s->o[j].label, host, hl) &&
				 !host[hl];
			same += !strncmp(s->o[j].label, host, hl) && !host[hl];
		}
		if (!known && (o = realloc(s->o, (s->no + 1) * sizeof(*o)))) {
			s->o = o;
			o += s->no;
			o->boot = strdup(boot);
			if (same ? asprintf(&o->label, "%s#%u", host, same + 1) < 0
				 : !(o->label = strdup(host)))
				o->label = NULL;
			if (o->boot && o->label)
				s->no++;
			else
				free(o->boot);
		}
		recording_reader__close(r);
	}
	return 0;
}

static ssize_t read_head(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len);
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

/* Every input walked into s's writer: the inputs read, or -errno */
static int walk(struct store *s, char *const *paths, int npaths)
{
	struct cp_sink sink = {.request = sink_request,
			       .warn = sink_warn,
			       .ctx = s,
			       .want = sink_want,
			       .ignores_tags = true};
	struct engine_opts eo = {0};
	struct engine *e = engine__new(&eo); /* warnings about the inputs */
	struct kpath_opts ko = {.quiet = s->quiet};
	struct span_opts so = {.overlap_tolerance = 0.01};
	struct span_input *spans = NULL;
	const char **recs = NULL;
	char **files = NULL;
	int nfiles = 0, nrecs = 0, read = 0, err;

	if (!e)
		return -ENOMEM;
	engine__set_quiet(e, s->quiet);
	err = input_list__collect(paths, npaths, e, &files, &nfiles);
	if (!err && !(recs = calloc((size_t)nfiles + 1, sizeof(*recs))))
		err = -ENOMEM;
	for (int i = 0; !err && i < nfiles && !s->stopped; i++) {
		char head[SNIFF_BYTES];
		ssize_t n = read_head(files[i], head, sizeof(head));

		if (n < 0) {
			cp_error(CMD, "%s: cannot read: %s", files[i], strerror((int)-n));
			continue;
		}
		if (recording__sniff(head, (size_t)n)) {
			recs[nrecs++] = files[i];
			continue;
		}
		if (!spans && !(spans = span_input__new(&sink, &so))) {
			err = -ENOMEM;
			break;
		}
		if (span_input__file(spans, files[i]) >= 0)
			read++;
	}
	if (!err && spans && span_input__end(spans) < 0 && !s->stopped)
		err = -ENOMEM;
	if (!err && nrecs && !s->stopped) {
		origins(s, recs, nrecs);
		if (!kpath__analyze(recs, nrecs, &sink, &ko) || s->seen)
			read += nrecs;
	}
	span_input__free(spans);
	free(recs);
	input_list__free(files);
	engine__free(e);
	return err ? err : read;
}

/* db at url made the Distributed view of spec's ("CLUSTER[:SHARD_DB]") */
static int distributed(const char *url, const char *spec)
{
	char err[1024], cluster[256], *colon;
	const char *shard_db;
	struct ch_conn *c;
	int rc;

	snprintf(cluster, sizeof(cluster), "%s", spec);
	colon = strchr(cluster, ':');
	if (colon)
		*colon = '\0';
	c = ch__open(url, err, sizeof(err));
	if (!c) {
		cp_error(CMD, "%s", err);
		return 2;
	}
	shard_db = colon ? colon + 1 : ch__db(c);
	rc = ch__distributed(c, cluster, shard_db, err, sizeof(err));
	if (rc) {
		cp_error(CMD, "--distributed: %s", err);
		ch__close(c);
		return rc == -EINVAL ? 2 : 1;
	}
	cp_error(CMD, "%s: the store's tables over %s.* on every shard of cluster %s",
		 ch__shown(c), shard_db, cluster);
	/* the shards' tables are made by the first writer on each */
	if (ch__schema(c, false, err, sizeof(err)))
		cp_warn(CMD, "not readable yet: %s", err);
	ch__close(c);
	return 0;
}

static void say_total(struct store *s, const struct ch_writer_stats *st, const char *shown)
{
	cp_error(CMD, "%llu requests (%llu segments) stored into %s in %llu batch%s",
		 (unsigned long long)st->requests, (unsigned long long)st->segments, shown,
		 (unsigned long long)st->batches, st->batches == 1 ? "" : "es");
	if (st->failed || st->dropped)
		cp_error(CMD, "%llu requests (%llu segments) not stored: %s",
			 (unsigned long long)(st->failed + st->dropped),
			 (unsigned long long)(st->failed_segments + st->dropped_segments),
			 st->last_error[0] ? st->last_error : "out of memory");
	if (st->found_stored && !s->quiet)
		cp_error(CMD,
			 "%llu inserts whose answer was lost were found stored, not sent again",
			 (unsigned long long)st->found_stored);
}

int cmd_store(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"host", 1, 0, 'H'}, {"distributed", 1, 0, 'D'}, {"help", 0, 0, 'h'}, {0},
	};
	struct ch_writer_opts wo = {.wait_when_full = true, .give_up_ns = 60000000000ull};
	struct ch_writer_stats st = {0};
	struct store s = {0};
	char err[512], shown[512] = "";
	const char *dist = NULL;
	char **inputs = NULL;
	int ninputs = 0, c, ret = 0, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "qh", lo, NULL)) != -1) {
		switch (c) {
		case 'q':
			s.quiet = true;
			break;
		case 'H':
			if (!*optarg) {
				cp_error(CMD, "--host: an empty name");
				return 2;
			}
			s.host = optarg;
			break;
		case 'D':
			dist = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	inputs = calloc((size_t)argc + 1, sizeof(*inputs));
	if (!inputs) {
		cp_error(CMD, "out of memory");
		return 1;
	}
	for (int i = optind; i < argc; i++) {
		if (!ch_url__is(argv[i])) {
			inputs[ninputs++] = argv[i];
		} else if (wo.url) {
			cp_error(CMD, "two ClickHouse URLs: one store at a time");
			free(inputs);
			return 2;
		} else {
			wo.url = argv[i];
		}
	}
	if (dist) {
		free(inputs);
		if (wo.url && !ninputs)
			return distributed(wo.url, dist);
		cp_error(CMD, "--distributed: %s",
			 wo.url ? "it makes tables only: no INPUT with it" : "no clickhouse://HOST:PORT/DB");
		usage(stderr);
		return 2;
	}
	if (!wo.url || !ninputs) {
		cp_error(CMD, "%s",
			 !wo.url ? "no clickhouse://HOST:PORT/DB to store into"
				 : "no input: give recordings or trace files");
		usage(stderr);
		free(inputs);
		return 2;
	}
	{
		struct ch_url u;

		if (ch_url__parse(wo.url, &u, err, sizeof(err))) {
			cp_error(CMD, "%s", err);
			free(inputs);
			return 2;
		}
		snprintf(shown, sizeof(shown), "clickhouse://%s:%u/%s", u.host, u.port, u.db);
		explicit_bzero(u.password, sizeof(u.password));
	}
	s.w = ch_writer__new(&wo, err, sizeof(err));
	if (!s.w) {
		cp_error(CMD, "%s", err);
		free(inputs);
		return 1;
	}
	rc = ch_writer__setup(s.w, err, sizeof(err));
	if (rc) {
		cp_error(CMD, "%s", err);
		ch_writer__close(s.w, clock__mono_ns(), NULL);
		free(inputs);
		return 1;
	}
	rc = walk(&s, inputs, ninputs);
	if (rc < 0) {
		cp_error(CMD, "%s", strerror(-rc));
		ret = 1;
	} else if (!rc) {
		cp_error(CMD, "%s",
			 ninputs == 1 ? "the input could not be read as a recording or a "
					"trace file"
				      : "none of the inputs could be read as a recording "
					"or a trace file");
		ret = 1;
	}
	ch_writer__close(s.w, 0, &st);
	say_total(&s, &st, shown);
	if (st.failed || st.dropped)
		ret = 1;
	for (uint32_t i = 0; i < s.no; i++) {
		free(s.o[i].label);
		free(s.o[i].boot);
	}
	free(s.o);
	free(inputs);
	return ret;
}
