// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath agent: the recorder's capture analysed live, kept requests
 * exported as OTLP spans. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_int.h"
#include "clickhouse.h"
#include "commands.h"
#include "flight.h"
#include "msg.h"
#include "outfile.h"
#include "recording.h"
#include "session.h"
#include "util.h"

#define CMD AGENT_CMD
#define POLL_MS 10
#define TICK_MS 100
/* a record reaches its ring within HOLD_NS, a held one a drain later */
#define REORDER_NS 20000000ull
#define RESCAN_NS 5000000000ull
/* --max-names: about 1 MiB of names and their hashes */
#define AGENT_MAX_NAMES 10000
#define STR_(x) #x
#define STR(x) STR_(x)

/* --- what to follow -------------------------------------------------------- */

/* pid matches a --comm, --exe or --cgroup */
static bool matches(const struct agent *a, pid_t pid)
{
	char path[64], buf[4096], *nl;

	if (a->ncomm) {
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		if (rec_meta__read_small(path, buf, sizeof(buf)) >= 0) {
			if ((nl = strchr(buf, '\n')))
				*nl = '\0';
			for (int i = 0; i < a->ncomm; i++)
				if (!strncmp(buf, a->comm[i], 15))
					return true;
		}
	}
	if (a->nexe) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/exe", pid);
		n = readlink(path, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = '\0';
			for (int i = 0; i < a->nexe; i++)
				if (a->exe_real[i] && !strcmp(buf, a->exe_real[i]))
					return true;
		}
	}
	if (a->ncgroup) {
		snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
		if (rec_meta__read_small(path, buf, sizeof(buf)) >= 0) {
			/* cgroup v2: "0::/system.slice/x.service" */
			char *p = strstr(buf, "0::");

			if (p) {
				p += 3;
				if ((nl = strchr(p, '\n')))
					*nl = '\0';
				for (int i = 0; i < a->ncgroup; i++) {
					size_t n = strlen(a->cgroup[i]);

					if (!strncmp(p, a->cgroup[i], n) &&
					    (p[n] == '\0' || p[n] == '/' || a->cgroup[i][n - 1] == '/'))
						return true;
				}
			}
		}
	}
	return false;
}

static bool watching(const struct agent *a)
{
	return a->ncomm || a->nexe || a->ncgroup;
}

/* Every running process that matches: a target (before load) or captured
 * (after). */
static void scan(struct agent *a, bool running)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t self = getpid();

	if (!d)
		return;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == self || !matches(a, (pid_t)pid))
			continue;
		if (running) {
			struct target *t = rec__target_find(a->s->r, (pid_t)pid);

			if (t && !t->dead)
				continue;
			if (!rec__target_watch(a->s->r, (pid_t)pid))
				a->ntargets_added++;
		} else if (a->s->o.npids < REC_MAX_TARGETS) {
			bool dup = false;

			for (int i = 0; i < a->s->o.npids; i++)
				dup |= a->s->o.pids[i] == (pid_t)pid;
			if (!dup)
				a->s->o.pids[a->s->o.npids++] = (pid_t)pid;
		}
	}
	closedir(d);
}

/* A process not traced exec'd (BPF's watch): traced if it matches */
static void on_spawn(void *ctx, pid_t pid, const char *file)
{
	struct agent *a = ctx;
	const char *base = strrchr(file, '/');
	bool named = false;

	/* the exec's file name (the process may rename itself before we
	 * look) */
	base = base ? base + 1 : file;
	for (int i = 0; i < a->ncomm; i++)
		named |= !strncmp(base, a->comm[i], 15);
	if ((named || matches(a, pid)) && !rec__target_watch(a->s->r, pid))
		a->ntargets_added++;
}

/* --- status ---------------------------------------------------------------- */

static uint64_t self_cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + ru.ru_utime.tv_usec * 1000ull +
	       (uint64_t)ru.ru_stime.tv_sec * 1000000000ull + ru.ru_stime.tv_usec * 1000ull;
}

static void status(struct agent *a, const char *when)
{
	struct exporter_stats st = {0};
	uint64_t cpu, now = clock__mono_ns(), rss_kb = 0;
	double share;
	char buf[256], refused[64], unwritten[48] = "", stored[640] = "";

	if (a->ex)
		exporter__stats(a->ex, &st);
	if (cnt_get(a->unwritten))
		snprintf(unwritten, sizeof(unwritten), ", %llu files not written",
			 (unsigned long long)cnt_get(a->unwritten));
	cpu = self_cpu_ns();
	share = now > a->last_status ? (double)(cpu - a->last_cpu_ns) / (double)(now - a->last_status)
				     : 0;
	if (rec_meta__read_small("/proc/self/statm", buf, sizeof(buf)) >= 0) {
		unsigned long size, res;

		if (sscanf(buf, "%lu %lu", &size, &res) == 2)
			rss_kb = res * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
	}
	if (a->store) {
		struct ch_writer_stats cs;

		ch_writer__stats(a->store, &cs);
		snprintf(stored, sizeof(stored),
			 ", store: %llu requests stored (%llu segments), %llu waiting, %llu dropped, "
			 "%llu failed%s%s",
			 (unsigned long long)cs.requests, (unsigned long long)cs.segments,
			 (unsigned long long)cs.waiting,
			 (unsigned long long)cs.dropped, (unsigned long long)cs.failed,
			 cs.failing ? ", failing: " : "", cs.failing ? cs.last_error : "");
	}
	refused[0] = '\0';
	if (cnt_get(a->optin_refused))
		snprintf(refused, sizeof(refused), ", %llu opt-in refused (--opt-in-rate)",
			 (unsigned long long)cnt_get(a->optin_refused));
	cp_error(CMD,
		"%s: %llu requests (%llu slow, %llu sampled, %llu opt-in%s), %llu exported, "
		    "%llu sent, %llu dropped, %llu failed, %llu profiled, %llu lost events, "
		    "%d targets, cpu %.1f%%, rss %llu MiB%s%s%s%s",
		when, (unsigned long long)cnt_get(a->seen), (unsigned long long)cnt_get(a->slow),
		(unsigned long long)cnt_get(a->sampled), (unsigned long long)cnt_get(a->optin),
		refused, (unsigned long long)cnt_get(a->exported), (unsigned long long)st.sent,
		(unsigned long long)st.dropped, (unsigned long long)st.failed,
		(unsigned long long)cnt_get(a->profiled), (unsigned long long)a->s->r->lost,
		rec__live_targets(a->s->r), share * 100, (unsigned long long)(rss_kb / 1024),
		unwritten, st.failing ? ", export failing: " : "", st.failing ? st.last_error : "",
		stored);
	a->last_status = now;
	a->last_cpu_ns = cpu;
}

/* A line when exports begin to fail, fail otherwise, or work again: once
 * per change, not per try */
static void say_export(struct agent *a)
{
	struct exporter_stats st;

	if (!a->ex)
		return;
	exporter__stats(a->ex, &st);
	if (st.failing && st.fail_changes != a->export_changes_said)
		cp_error(CMD, "export failing: %s", st.last_error);
	else if (!st.failing && a->export_failing_said)
		cp_error(CMD, "export: sending again");
	a->export_changes_said = st.fail_changes;
	a->export_failing_said = st.failing;
}

/* The same for the store; and once, that it refuses every request */
static void say_store(struct agent *a)
{
	struct ch_writer_stats st;

	if (!a->store)
		return;
	ch_writer__stats(a->store, &st);
	if (st.failing && st.fail_changes != a->store_changes_said)
		cp_error(CMD, "store failing (retrying, %llu KiB waiting): %s",
			 (unsigned long long)(st.buffered >> 10), st.last_error);
	else if (!st.failing && a->store_failing_said)
		cp_error(CMD, "store: writing again");
	a->store_changes_said = st.fail_changes;
	a->store_failing_said = st.failing;
}

static void say_store_total(const struct ch_writer_stats *st)
{
	cp_error(CMD,
		"store: %llu requests (%llu segments) stored in %llu batches; not stored: %llu "
		    "requests (%llu segments) dropped (buffer full, or waiting at exit), %llu "
		    "(%llu segments) failed (refused)%s%s",
		(unsigned long long)st->requests, (unsigned long long)st->segments,
		(unsigned long long)st->batches, (unsigned long long)st->dropped,
		(unsigned long long)st->dropped_segments, (unsigned long long)st->failed,
		(unsigned long long)st->failed_segments, st->tries_failed ? "; the last failure: " : "",
		st->tries_failed ? st->last_error : "");
	if (st->found_stored)
		cp_error(CMD, "store: %llu inserts whose answer was lost were found stored, not "
			      "sent again", (unsigned long long)st->found_stored);
}

/* The exit's summary of the exporter */
static void say_export_total(const struct exporter_stats *st)
{
	char kinds[256] = "";
	size_t n = 0;

	for (int k = 0; k < EXPORT_FAIL_KINDS; k++)
		if (st->fails[k] && n < sizeof(kinds))
			n += (size_t)snprintf(kinds + n, sizeof(kinds) - n, "%s%llu %s", n ? ", " : "",
					      (unsigned long long)st->fails[k],
					      exporter__fail_name((enum export_fail)k));
	cp_error(CMD,
		"export: %llu sent in %llu batches, %llu dropped (queue full or backend down at "
		    "exit), %llu failed (refused), %llu retries%s%s%s%s",
		(unsigned long long)st->sent, (unsigned long long)st->batches,
		(unsigned long long)st->dropped, (unsigned long long)st->failed,
		(unsigned long long)st->retries, n ? "; tries failed: " : "", kinds,
		n ? "; the last: " : "", n ? st->last_error : "");
}

/* --- the command line ------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: critpath agent [targets] [options]\n"
		"Targets (repeatable; processes matching start being followed when they exec):\n"
		"  -p PID              a process and the ones under it\n"
		"  --comm NAME         processes named NAME (their comm, 15 characters)\n"
		"  --exe PATH          processes running the executable PATH\n"
		"  --cgroup PATH       processes in a cgroup v2 (\"/system.slice/x.service\", or\n"
		"                      under /sys/fs/cgroup) and the cgroups below it\n"
		"Which requests are walked and exported as OTLP spans:\n"
		"  --slow DUR|pNN      slower than DUR (\"50ms\"), or than the running NNth\n"
		"                      percentile of their service and name over the last minute\n"
		"                      (default p99)\n"
		"  --sample RATE       also a random fraction, 0-1 (default 0)\n"
		"  --opt-in-rate N     a request with a sampled W3C traceparent is exported as a\n"
		"                      child of the caller's span, N a second at most (default\n"
		"                      " STR(TRIGGER_OPTIN_RATE) "; the callers choose them, so they are capped)\n"
		"  --no-opt-in         the traceparent's sampled flag chooses nothing\n"
		"  --otlp URL          OTLP/HTTP traces endpoint (default:\n"
		"                      $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or\n"
		"                      $OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces; none: no export),\n"
		"                      headers from $OTEL_EXPORTER_OTLP_HEADERS and\n"
		"                      $OTEL_EXPORTER_OTLP_TRACES_HEADERS (k=v,k2=v2, URL-encoded)\n"
		"  --queue N           requests waiting for export at most (default 4096)\n"
		"  --redact-query KEY  a query key whose values are secret, beside the built-in\n"
		"                      ones (token, password, Signature...); repeatable\n"
		"  --max-names N       distinct request names at most; past them a new one is\n"
		"                      \"" CP_OTHER_NAMES "\" (default " STR(AGENT_MAX_NAMES) ")\n"
		"The store (docs/store.md):\n"
		"  --store clickhouse://HOST[:PORT]/DB  every request's critical path into\n"
		"                      ClickHouse (HTTP port, default 8123; tables made when\n"
		"                      missing; $CLICKHOUSE_USER, $CLICKHOUSE_PASSWORD)\n"
		"  --store-sample RATE a random fraction of the requests only, 0-1 (default 1)\n"
		"  --store-buffer-mb N batches waiting for ClickHouse at most (default 64); at\n"
		"                      it the newest requests are left out, counted\n"
		"Profiles:\n"
		"  --out DIR           every window's profile: DIR/profile-TIME-N.json (critpath\n"
		"                      diff reads it), .pb.gz (pprof), .counts.json (every request)\n"
		"  --profile-every DUR the window (default 60s)\n"
		"  --profile-sample R  requests walked at random for the profile (default 0.01)\n"
		"  --profile-opt-in    opted-in requests count in the profile too\n"
		"Flight recorder:\n"
		"  --flight DIR        keep the last seconds of events in memory; when a slow\n"
		"                      request is exported, write them to DIR/flight-TIME-N.rec\n"
		"                      (critpath report reads it; one per 10 s at most, the\n"
		"                      newest 20 kept)\n"
		"  --flight-seconds N  how many seconds (default 10)\n"
		"  --flight-mb N       memory for them at most (default 64)\n"
		"  (--out and --flight are made 0700 when missing; a link, another user's\n"
		"  directory or one others can write to is refused)\n"
		"Capture (as in critpath record): --probe [BIN:]FUNC, --payload-bytes N,\n"
		"  --buffer-mb N (default 8 here), --host NAME, --sku LABEL, --no-tls\n"
		"  -d SECONDS          stop after this long (default: SIGINT or SIGTERM)\n"
		"  --status-every DUR  a status line on stderr this often (default 60s)\n"
		"  -q                  no notes on stderr, only errors and status lines\n");
}

enum {
	O_COMM = 256,
	O_EXE,
	O_CGROUP,
	O_SLOW,
	O_SAMPLE,
	O_OTLP,
	O_QUEUE,
	O_OUT,
	O_EVERY,
	O_PSAMPLE,
	O_POPTIN,
	O_PROBE,
	O_PAYLOAD,
	O_BUFFER,
	O_HOST,
	O_SKU,
	O_NOTLS,
	O_STATUS,
	O_FLIGHT,
	O_FLIGHT_SECS,
	O_FLIGHT_MB,
	O_OPTIN_RATE,
	O_NO_OPTIN,
	O_MAX_NAMES,
	O_REDACT_QUERY,
	O_STORE,
	O_STORE_SAMPLE,
	O_STORE_BUFFER,
};

static bool rate(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || end == s || !(v >= 0 && v <= 1))
		return false;
	*out = v;
	return true;
}

static int bad(const char *opt, const char *val, const char *want)
{
	cp_error(CMD, "%s '%s': expected %s", opt, val, want);
	return 2;
}

/* Options for the requests seen: 0, 2 on a bad value, -ENOENT when not one. */
static int parse_trigger_opt(struct agent *a, struct trigger_opts *to, struct exporter_opts *eo,
			     const char **url, int c, const char *arg)
{
	unsigned long v;
	uint64_t ns;

	switch (c) {
	case O_SLOW:
		if (arg[0] == 'p' && arg[1]) {
			char *end;
			double p = strtod(arg + 1, &end);

			if (*end || !(p > 0 && p < 100))
				return bad("--slow", arg, "a duration or pNN (0 < NN < 100)");
			to->slow_pct = p / 100;
			to->slow_ns = 0;
		} else if (parse_duration(arg, &ns) || !ns) {
			return bad("--slow", arg, "a duration (\"50ms\") or pNN");
		} else {
			to->slow_ns = ns;
			to->slow_pct = 0;
		}
		return 0;
	case O_SAMPLE:
		if (!rate(arg, &to->sample))
			return bad("--sample", arg, "a rate from 0 to 1");
		return 0;
	case O_PSAMPLE:
		if (!rate(arg, &to->profile))
			return bad("--profile-sample", arg, "a rate from 0 to 1");
		return 0;
	case O_POPTIN:
		a->include_optin = true;
		return 0;
	case O_OPTIN_RATE: {
		char *end;
		double r = strtod(arg, &end);

		if (end != arg && !strcmp(end, "/s"))
			end += 2;
		if (*end || end == arg || !(r > 0 && r <= 1e6))
			return bad("--opt-in-rate", arg, "requests a second, above 0 (\"50\" or \"50/s\")");
		to->optin_rate = r;
		return 0;
	}
	case O_NO_OPTIN:
		to->no_optin = true;
		return 0;
	case O_REDACT_QUERY:
		return rec_redact_query_opt(CMD, arg) ? 2 : 0;
	case O_MAX_NAMES:
		if (!rec_parse_uint(arg, 1u << 24, &v) || v < 16)
			return bad("--max-names", arg, "16 to 16777216 names");
		a->max_names = (uint32_t)v;
		return 0;
	case O_OTLP:
		*url = arg;
		return 0;
	case O_STORE: {
		struct ch_url u;
		char why[256];

		if (ch_url__parse(arg, &u, why, sizeof(why))) {
			cp_error(CMD, "--store: %s (expected clickhouse://HOST[:PORT]/DB)", why);
			return 2;
		}
		explicit_bzero(u.password, sizeof(u.password));
		a->store_url = arg;
		return 0;
	}
	case O_STORE_SAMPLE:
		if (!rate(arg, &a->store_rate) || !a->store_rate)
			return bad("--store-sample", arg, "a rate above 0, up to 1");
		return 0;
	case O_STORE_BUFFER:
		if (!rec_parse_uint(arg, 65536, &v) || !v)
			return bad("--store-buffer-mb", arg, "1 to 65536 MiB");
		a->store_buffer = (uint64_t)v << 20;
		return 0;
	case O_QUEUE:
		if (!rec_parse_uint(arg, 1u << 20, &v) || !v)
			return bad("--queue", arg, "1 to 1048576 requests");
		eo->queue_max = (uint32_t)v;
		return 0;
	case O_OUT:
		a->out_dir = arg;
		return 0;
	case O_EVERY:
		if (parse_duration(arg, &ns) || ns < 1000000000ull)
			return bad("--profile-every", arg, "a duration of 1s or more");
		a->every_ns = ns;
		return 0;
	case O_STATUS:
		if (parse_duration(arg, &ns) || ns < 1000000000ull)
			return bad("--status-every", arg, "a duration of 1s or more");
		a->status_every = ns;
		return 0;
	case O_FLIGHT:
		a->flo.dir = arg;
		return 0;
	case O_FLIGHT_SECS:
		if (!rec_parse_uint(arg, 600, &v) || !v)
			return bad("--flight-seconds", arg, "1 to 600 seconds");
		a->flo.keep_ns = (uint64_t)v * 1000000000ull;
		return 0;
	case O_FLIGHT_MB:
		if (!rec_parse_uint(arg, 4096, &v) || !v)
			return bad("--flight-mb", arg, "1 to 4096 MiB");
		a->flo.max_bytes = (uint64_t)v << 20;
		return 0;
	default:
		return -ENOENT;
	}
}

static int parse(struct agent *a, struct trigger_opts *to, struct exporter_opts *eo,
		 const char **url, int argc, char **argv)
{
	static const struct option lo[] = {
	    {"comm", 1, 0, O_COMM},	      {"exe", 1, 0, O_EXE},
	    {"cgroup", 1, 0, O_CGROUP},	      {"slow", 1, 0, O_SLOW},
	    {"sample", 1, 0, O_SAMPLE},	      {"otlp", 1, 0, O_OTLP},
	    {"queue", 1, 0, O_QUEUE},	      {"out", 1, 0, O_OUT},
	    {"profile-every", 1, 0, O_EVERY}, {"profile-sample", 1, 0, O_PSAMPLE},
	    {"profile-opt-in", 0, 0, O_POPTIN}, {"probe", 1, 0, O_PROBE},
	    {"payload-bytes", 1, 0, O_PAYLOAD}, {"buffer-mb", 1, 0, O_BUFFER},
	    {"host", 1, 0, O_HOST},	      {"sku", 1, 0, O_SKU},
	    {"no-tls", 0, 0, O_NOTLS},	      {"status-every", 1, 0, O_STATUS},
	    {"flight", 1, 0, O_FLIGHT},	      {"flight-seconds", 1, 0, O_FLIGHT_SECS},
	    {"flight-mb", 1, 0, O_FLIGHT_MB},  {"opt-in-rate", 1, 0, O_OPTIN_RATE},
	    {"no-opt-in", 0, 0, O_NO_OPTIN},   {"max-names", 1, 0, O_MAX_NAMES},
	    {"redact-query", 1, 0, O_REDACT_QUERY},
	    {"store", 1, 0, O_STORE},	      {"store-sample", 1, 0, O_STORE_SAMPLE},
	    {"store-buffer-mb", 1, 0, O_STORE_BUFFER},
	    {"help", 0, 0, 'h'},
	    {0},
	};
	struct rec_opts *o = &a->s->o;
	unsigned long v;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "p:d:qh", lo, NULL)) != -1) {
		switch (c) {
		case 'p': {
			char *copy = strdup(optarg), *save = NULL, *tok;

			for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				if (!rec_parse_uint(tok, INT_MAX, &v) || !v) {
					free(copy);
					return bad("-p", optarg, "a process id");
				}
				if (o->npids < REC_MAX_TARGETS)
					o->pids[o->npids++] = (pid_t)v;
			}
			free(copy);
			break;
		}
		case 'd': {
			char *end;

			o->duration = strtod(optarg, &end);
			if (*end || !(o->duration > 0))
				return bad("-d", optarg, "seconds above 0");
			break;
		}
		case 'q':
			o->quiet = o->bo.quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case O_COMM:
		case O_EXE:
		case O_CGROUP: {
			const char **l = c == O_COMM ? a->comm : c == O_EXE ? a->exe : a->cgroup;
			int *n = c == O_COMM ? &a->ncomm : c == O_EXE ? &a->nexe : &a->ncgroup;

			if (*n == MAX_WATCH || !*optarg) {
				cp_error(CMD, "too many or empty --comm/--exe/--cgroup");
				return 2;
			}
			l[(*n)++] = optarg;
			break;
		}
		case O_PROBE:
			if (o->nprobes == REC_MAX_PROBES || rec_probe_spec_check(optarg))
				return 2;
			o->probes[o->nprobes++] = optarg;
			o->bo.probes = true;
			break;
		case O_PAYLOAD:
			if (!rec_parse_uint(optarg, CP_PAYLOAD_MAX, &v))
				return bad("--payload-bytes", optarg, "0 to 512");
			o->bo.payload_bytes = o->bo.h2_payload_bytes = (uint32_t)v;
			break;
		case O_BUFFER:
			if (!rec_parse_uint(optarg, 4096, &v) || !v || (v & (v - 1)))
				return bad("--buffer-mb", optarg, "a power of 2 up to 4096");
			o->bo.buffer_mb = (uint32_t)v;
			break;
		case O_HOST:
			o->host = optarg;
			break;
		case O_SKU:
			o->sku = optarg;
			break;
		case O_NOTLS:
			o->bo.tls = false;
			break;
		default: {
			int rc = parse_trigger_opt(a, to, eo, url, c, optarg);

			if (rc == -ENOENT) {
				cp_error(CMD, "'critpath " CMD " --help' lists the options");
				return 2;
			}
			if (rc)
				return rc;
		}
		}
	}
	if (optind < argc) {
		cp_error(CMD, "unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (!o->npids && !watching(a)) {
		cp_error(CMD, "no targets: give -p, --comm, --exe or --cgroup");
		return 2;
	}
	return 0;
}

/* The OTLP headers from the environment, the signal's own last (they
 * override the generic ones). 0 or 1. */
static int export_headers(struct otlp_headers *h)
{
	static const char *const vars[] = {"OTEL_EXPORTER_OTLP_HEADERS",
					   "OTEL_EXPORTER_OTLP_TRACES_HEADERS"};
	char why[256];

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		int err = v ? otlp_headers__add(h, v, why, sizeof(why)) : 0;

		if (err) {
			cp_error(CMD, "%s: %s", vars[i], err == -EINVAL ? why : strerror(-err));
			return 1;
		}
	}
	return 0;
}

/* --cgroup and --exe resolved; --out and --flight made or checked (2: a
 * directory refused); the OTLP URL and headers checked. 0, 1 or 2. */
static int check(struct agent *a, const char **url, struct otlp_headers *h)
{
	char why_dir[256], shown[2048];
	const char *why;

	for (int i = 0; i < a->ncgroup; i++) {
		static char paths[MAX_WATCH][PATH_MAX];
		const char *g = a->cgroup[i];
		char dir[PATH_MAX];
		struct stat st;

		if (!strncmp(g, "/sys/fs/cgroup", 14))
			g += 14;
		snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s%s", g[0] == '/' ? "" : "/", g);
		if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
			cp_error(CMD, "--cgroup %s: no cgroup v2 directory %s", a->cgroup[i],
				dir);
			return 1;
		}
		snprintf(paths[i], PATH_MAX, "%s%s", g[0] == '/' ? "" : "/", g);
		if (!strcmp(paths[i], ""))
			snprintf(paths[i], PATH_MAX, "/");
		a->cgroup[i] = paths[i];
	}
	for (int i = 0; i < a->nexe; i++) {
		a->exe_real[i] = realpath(a->exe[i], NULL);
		if (!a->exe_real[i]) {
			cp_error(CMD, "--exe %s: %s", a->exe[i], strerror(errno));
			return 1;
		}
	}
	if (a->flo.dir && (a->flo.dirfd = outdir__open(a->flo.dir, why_dir, sizeof(why_dir))) < 0) {
		cp_error(CMD, "--flight %s: %s", a->flo.dir, why_dir);
		return 2;
	}
	if (a->out_dir && (a->out_fd = outdir__open(a->out_dir, why_dir, sizeof(why_dir))) < 0) {
		cp_error(CMD, "--out %s: %s", a->out_dir, why_dir);
		return 2;
	}
	if (!*url) {
		const char *t = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
		const char *b = getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
		static char joined[2048];

		if (t && *t) {
			*url = t;
		} else if (b && *b) {
			size_t n = strlen(b);

			snprintf(joined, sizeof(joined), "%s%sv1/traces", b,
				 n && b[n - 1] == '/' ? "" : "/");
			*url = joined;
		}
	}
	if (*url && (why = exporter__check_url(*url))) {
		cp_error(CMD, "OTLP endpoint '%s': %s",
			 exporter__url_shown(*url, shown, sizeof(shown)), why);
		return 1;
	}
	return *url ? export_headers(h) : 0;
}

/* The store's writer, its schema tried once: a schema of another version
 * stops the agent here; ClickHouse not reached is retried as it runs. 0 or 1. */
static int store_start(struct agent *a)
{
	struct ch_writer_opts wo = {.url = a->store_url, .buffer_bytes = a->store_buffer};
	char err[512];
	int rc;

	a->store = ch_writer__new(&wo, err, sizeof(err));
	if (!a->store) {
		cp_error(CMD, "--store: %s", err);
		return 1;
	}
	rc = ch_writer__setup(a->store, err, sizeof(err));
	if (rc == -EPROTONOSUPPORT) {
		cp_error(CMD, "--store: %s", err);
		return 1;
	}
	if (rc) {
		cp_error(CMD, "--store: not reached yet, retrying as requests come: %s", err);
		a->store_changes_said = 1; /* said: the first failure */
		a->store_failing_said = true;
	}
	return 0;
}

/* --- the loop -------------------------------------------------------------- */

static void loop(struct agent *a)
{
	struct recorder *r = a->s->r;
	uint64_t last_tick = clock__mono_ns(), last_scan = last_tick, now;
	int err;

	while (!rec_stop_signal && !r->write_err && !__atomic_load_n(&a->err, __ATOMIC_ACQUIRE)) {
		uint64_t t0 = clock__mono_ns();

		err = rec__drain(r, POLL_MS, false);
		if (err < 0 && err != -EINTR) {
			cp_error(CMD, "reading the ring buffer: %s", strerror(-err));
			break;
		}
		live__post(a, t0 - REORDER_NS);
		now = clock__mono_ns();
		if (now - last_tick >= TICK_MS * 1000000ull) {
			rec__tick(r, now);
			say_export(a);
			say_store(a);
			last_tick = now;
		}
		if (watching(a) && now - last_scan >= RESCAN_NS) {
			scan(a, true); /* processes moved into a cgroup, renamed */
			last_scan = now;
		}
		if (now - a->last_status >= a->status_every)
			status(a, "status");
		if (a->s->deadline && now >= a->s->deadline)
			break;
	}
}

static void argv_free(int argc, char **v)
{
	for (int i = 0; v && i < argc; i++)
		free(v[i]);
	free(v);
}

/* The command line as the recordings keep it (flight recordings): a URL's
 * user and password replaced, as where it is printed. NULL: no memory. */
static char **argv_shown(int argc, char **argv)
{
	char **v = calloc((size_t)argc + 1, sizeof(*v));

	for (int i = 0; v && i < argc; i++) {
		const char *u = strstr(argv[i], "://"), *eq = strchr(argv[i], '=');
		size_t pre = u && eq && eq < u ? (size_t)(eq + 1 - argv[i]) : 0;
		size_t n = strlen(argv[i]) + 4; /* "http://@h" grows by 3 */

		if (!(v[i] = malloc(n))) {
			argv_free(i, v);
			return NULL;
		}
		memcpy(v[i], argv[i], pre);
		if (u)
			exporter__url_shown(argv[i] + pre, v[i] + pre, n - pre);
		else
			memcpy(v[i], argv[i], n - 3);
	}
	return v;
}

int cmd_agent(int argc, char **argv)
{
	struct rec_session *s = calloc(1, sizeof(*s));
	struct agent *a = calloc(1, sizeof(*a));
	struct trigger_opts to = {.slow_pct = 0.99, .profile = 0.01,
				  .optin_rate = TRIGGER_OPTIN_RATE};
	struct exporter_opts eo = {0};
	struct exporter_stats fin = {0};
	struct flight_stats fst;
	struct otlp_headers hdrs = {0};
	char shown[2048], **args = NULL;
	const char *url = NULL;
	uint64_t waits, raised, stop_ns;
	int ret, err;

	rec_session__catch_signals();
	if (!s || !a || !(s->r = calloc(1, sizeof(*s->r)))) {
		cp_error(CMD, "out of memory");
		free(s);
		free(a);
		return 1;
	}
	s->cmd = CMD;
	s->t0 = clock__mono_ns();
	s->go_fd = -1;
	a->s = s;
	a->every_ns = 60000000000ull;
	a->out_fd = -1;
	a->flo = (struct flight_opts){.keep_ns = 10000000000ull,
				      .max_bytes = 64ull << 20,
				      .max_md_bytes = 16ull << 20,
				      .min_gap_ns = 10000000000ull,
				      .max_files = 20,
				      .dirfd = -1};
	a->status_every = 60000000000ull;
	a->max_names = AGENT_MAX_NAMES;
	a->store_rate = 1;
	s->o.bo.payload_bytes = CP_PAYLOAD_MAX; /* traceparent sits past a short prefix */
	s->o.bo.h2_payload_bytes = CP_PAYLOAD_MAX;
	s->o.bo.buffer_mb = 8; /* mapped twice (wraparound): RSS counts it double */
	s->o.bo.tls = true;
	s->o.codec = RECORDING_LZ4;
	ret = parse(a, &to, &eo, &url, argc, argv);
	if (ret) {
		rec_session__free(s);
		free(a);
		return ret == 1 ? 0 : 2;
	}
	args = argv_shown(argc, argv);
	s->o.argc = argc;
	s->o.argv = args;
	s->o.bo.watch_execs = watching(a);
	s->o.bo.watch_comms = a->comm;
	s->o.bo.nwatch_comms = a->ncomm;
	s->r->quiet = s->o.quiet;
	s->r->spawn = on_spawn;
	s->r->spawn_ctx = a;
	s->tap = live__tap;
	s->tap_ctx = a;
	a->service_env = getenv("OTEL_SERVICE_NAME");
	a->res.service = a->service_env && *a->service_env ? a->service_env : NULL;
	to.seed = (uint64_t)clock__mono_ns() ^ (uint64_t)getpid() << 32;
	a->rng = to.seed * 0x9e3779b97f4a7c15ull;
	ret = args ? check(a, &url, &hdrs) : 1;
	if (!args)
		cp_error(CMD, "out of memory");
	if (!ret) /* the programs load while the targets are found, the exporter starts */
		rec_session__load_start(s);
	if (!ret && watching(a))
		scan(a, false);
	a->profile_rate = to.profile;
	a->tr = ret ? NULL : trigger__new(&to);
	if (!ret && !a->tr)
		ret = 1;
	if (!ret && url) {
		eo.url = url;
		eo.headers = &hdrs;
		a->ex = exporter__new(&eo);
		if (!a->ex) {
			cp_error(CMD, "cannot start the exporter: %s",
				 errno == ELIBACC ? exporter__load_error() : strerror(errno));
			ret = 1;
		}
	}
	if (!ret && a->store_url)
		ret = store_start(a);
	if (!ret && (rec_session__open(s) || rec_session__load(s)))
		ret = 1;
	if (!ret && live__start(a)) {
		cp_error(CMD, "out of memory");
		ret = 1;
	}
	if (!ret && rec_session__attach(s))
		ret = 1;
	if (!ret) {
		a->res.host = s->info.host;
		/* the status lines' CPU share is the running agent's, not
		 * its start's (loading the programs takes ~0.3 s of CPU) */
		a->last_status = clock__mono_ns();
		a->last_cpu_ns = self_cpu_ns();
		if (!s->o.quiet && !rec_stop_signal)
			cp_error(CMD,
				"following %d process%s%s (attached in %.2f s); exporting to %s%s%s; "
				"Ctrl-C to stop",
				rec__live_targets(s->r), rec__live_targets(s->r) == 1 ? "" : "es",
				watching(a) ? " and the ones that match as they start" : "",
				s->attach_ns / 1e9,
				url ? exporter__url_shown(url, shown, sizeof(shown))
				    : "(nowhere: no --otlp)",
				a->store ? "; storing into " : "",
				a->store ? ch_writer__shown(a->store) : "");
		loop(a);
		stop_ns = clock__mono_ns();
		rec__drain(s->r, 0, true);
		rec__check_drops(s->r, clock__mono_ns());
		err = live__finish(a);
		if (err)
			cp_error(CMD, "analysis stopped: %s", strerror(-err));
		status(a, "total");
		if (a->late)
			cp_error(CMD, "%llu records came later than the reorder window",
				(unsigned long long)a->late);
		if (s->r->exits_unsaid && !s->o.quiet)
			cp_error(CMD, "%llu more targets exited than were said",
				 (unsigned long long)s->r->exits_unsaid);
		if (live__flight_stats(a, &fst) && !s->o.quiet)
			cp_error(CMD,
				"flight recorder: %llu files written, %llu slow requests within "
				    "the gap after one (not written), %llu failed, %llu old files "
				    "removed, %llu metadata records dropped (over 16 MiB)",
				(unsigned long long)fst.written, (unsigned long long)fst.skipped,
				(unsigned long long)fst.failed, (unsigned long long)fst.removed,
				(unsigned long long)fst.md_dropped);
		live__queue_stats(a, &waits, &raised);
		if ((waits || raised) && !s->o.quiet)
			cp_error(CMD, "the analysis fell behind: raised from idle priority %llu "
				    "times, the rings waited for it %llu times",
				(unsigned long long)raised, (unsigned long long)waits);
		ret = err ? 1 : 0;
		if (a->store) {
			struct ch_writer_stats cst;

			ch_writer__close(a->store, stop_ns + 4500000000ull, &cst);
			a->store = NULL;
			say_store_total(&cst);
		}
		if (a->ex) {
			/* the probes detached (~0.5 s) while the last batches go, so
			 * the agent is out at the exporter's deadline, not after it */
			live__free(a);
			rec_session__free(s);
			s = a->s = NULL;
			exporter__close(a->ex, stop_ns + 4500000000ull, &fin);
			a->ex = NULL;
			say_export_total(&fin);
		}
	}
	exporter__close(a->ex, clock__mono_ns(), NULL);
	ch_writer__close(a->store, clock__mono_ns(), NULL);
	otlp_headers__free(&hdrs);
	live__free(a);
	trigger__free(a->tr);
	for (int i = 0; i < a->nexe; i++)
		free(a->exe_real[i]);
	if (a->out_fd >= 0)
		close(a->out_fd);
	if (a->flo.dirfd >= 0)
		close(a->flo.dirfd);
	free(a);
	if (s)
		rec_session__free(s);
	argv_free(argc, args);
	return ret;
}
