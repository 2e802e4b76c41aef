// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath report and diff (DESIGN.md 1, 6): recordings (by content) go
 * together to kpath__analyze, other files are trace files. Exit: 0 something
 * analysed, 1 nothing, 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "engine.h"
#include "kpath.h"
#include "msg.h"
#include "outfile.h"
#include "recording.h"
#include "proto.h"
#include "report_cmd.h"
#include "report_store.h"
#include "span.h"

#define SNIFF_BYTES 64

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads up to len bytes from the start of path; -errno on failure. */
static ssize_t read_head(const char *path, char *buf, size_t len)
{
	ssize_t n, got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((size_t)got < len) {
		n = read(fd, buf + got, len - got);
		if (n < 0) {
			n = -errno;
			close(fd);
			return n;
		}
		if (!n)
			break;
		got += n;
	}
	close(fd);
	return got;
}

/* --from/--to +DUR count from the first recording's start. */
static void time_base_of(const char *path, struct engine *e)
{
	struct recording_reader *r;

	if (recording_reader__open(&r, path, RECORDING_FILE_ORDER))
		return;
	engine__set_time_base(e, recording_reader__info(r)->start_ns);
	recording_reader__close(r);
}

int report__analyze(char *const *paths, int npaths, struct engine *e, const struct analyze_opts *o,
		    const char **why)
{
	struct span_opts so = {.overlap_tolerance = o->overlap_tolerance,
			       .exclude_ops = o->exclude_ops,
			       .nexclude_ops = o->nexclude_ops,
			       .window_bytes = o->window_bytes,
			       .window_ns = (long long)o->window_ns};
	struct kpath_opts ko = {.quiet = o->quiet};
	struct cp_sink sink = engine__sink(e);
	bool progress = !o->quiet && isatty(STDERR_FILENO), shown = false;
	const char **recs = NULL;
	char **files = NULL;
	int nfiles = 0, nrecs = 0, analysed = 0, unusable = 0, nspanfiles = 0, err, traces;
	int nstores = 0;
	char *paths_left[npaths + 1];
	struct span_input *spans = NULL;
	double t0 = now_s(), last = 0;

	*why = NULL;
	/* stores first: their sums go in as they come */
	for (int i = 0; i < npaths; i++) {
		if (!report__is_store(paths[i]))
			continue;
		err = report__store(paths[i], e, why);
		if (err < 0)
			return err;
		if (!err) {
			if (npaths > 1)
				engine__warn(e, "%s", *why);
		}
		nstores++;
		analysed += err;
	}
	if (nstores == npaths) {
		if (!analysed && npaths > 1)
			*why = "none of the stores could be read (see the warnings)";
		return analysed;
	}
	for (int i = 0, j = 0; i < npaths; i++)
		if (!report__is_store(paths[i]))
			paths_left[j++] = paths[i];
	err = input_list__collect(paths_left, npaths - nstores, e, &files, &nfiles);
	if (err)
		return err;
	if (!nfiles && analysed)
		goto cleanup;
	if (!nfiles) {
		*why = "no input files found";
		goto cleanup;
	}
	recs = calloc(nfiles + 1, sizeof(*recs));
	if (!recs) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (int i = 0; i < nfiles; i++) {
		char head[SNIFF_BYTES];
		ssize_t n = read_head(files[i], head, sizeof(head));

		if (n < 0) {
			engine__warn(e, "%s: cannot read: %s", files[i], strerror((int)-n));
			continue;
		}
		if (recording__sniff(head, (size_t)n)) {
			if (!nrecs)
				time_base_of(files[i], e);
			recs[nrecs++] = files[i];
			continue;
		}
		if (diff__is_saved_profile(head, (size_t)n)) {
			engine__warn(e,
				     "%s: a saved critpath report, not a trace or recording "
				     "(critpath diff compares these), skipped",
				     files[i]);
			continue;
		}
		/* the spans of a trace may be in several files: its requests
		 * come when it is complete (span_input__end at the latest) */
		if (!spans && !(spans = span_input__new(&sink, &so))) {
			err = -ENOMEM;
			goto cleanup;
		}
		if (span_input__file(spans, files[i]) >= 0)
			nspanfiles++;
		/* after the first second, at most five updates a second */
		if (progress && now_s() - t0 > 1.0 && now_s() - last > 0.2) {
			fprintf(stderr, "\rcritpath: %d/%d files", i + 1, nfiles);
			shown = true;
			last = now_s();
		}
	}
	if (shown)
		fputc('\n', stderr);
	if (spans) {
		/* a file whose every trace was unusable (warned) is read but
		 * not analysed: nothing of it reaches the report */
		traces = span_input__end(spans);
		if (traces < 0) {
			err = traces;
			goto cleanup;
		}
		if (traces > 0)
			analysed += nspanfiles;
		else
			unusable += nspanfiles;
	}
	if (nrecs) {
		/* kpath prints its own progress; several recordings go in together */
		if (!kpath__analyze(recs, nrecs, &sink, &ko))
			analysed += nrecs;
	}
	if (!analysed && unusable)
		*why = "no trace in the input could be analysed (see the warnings)";
	else if (!analysed)
		*why = nfiles == 1 ? "the input could not be read as a recording or a trace file"
				   : "none of the inputs could be read as a recording or a trace "
				     "file";
cleanup:
	span_input__free(spans);
	free(recs);
	input_list__free(files);
	return err ? err : analysed;
}

/* --- report -------------------------------------------------------------- */

enum fmt { FMT_TEXT, FMT_JSON, FMT_FOLDED, FMT_PPROF, FMT_HTML, FMT_PERFETTO };

static const struct {
	const char *name;
	int (*write)(FILE *f, const struct engine_result *r, const struct out_opts *o);
} formats[] = {
    [FMT_TEXT] = {"text", out_text},	   [FMT_JSON] = {"json", out_json},
    [FMT_FOLDED] = {"folded", out_folded}, [FMT_PPROF] = {"pprof", out_pprof},
    [FMT_HTML] = {"html", out_html},	   [FMT_PERFETTO] = {"perfetto", out_perfetto},
};

enum {
	OPT_OVERLAP = 256,
	OPT_SERVICE,
	OPT_NAME,
	OPT_MIN_LAT,
	OPT_MAX_LAT,
	OPT_FROM,
	OPT_TO,
	OPT_HOST,
	OPT_TAG,
	OPT_REQUESTS,
	OPT_TOP,
	OPT_MIN_CHANGE,
	OPT_EXCLUDE_OP,
	OPT_WINDOW,
	OPT_WINDOW_BYTES,
	OPT_MAX_PATHS,
	OPT_REDACT_QUERY,
};

static void report_usage(FILE *f)
{
	fprintf(f,
		"usage: critpath report INPUT.. [options]\n"
		"  INPUT: recordings and Jaeger / OTLP JSON trace files, or directories of them\n"
		"  -f, --format F            text (default), json, folded, pprof, html, perfetto\n"
		"  -o, --output FILE         write there instead of stdout\n"
		"      --requests N          show (keep) the N slowest requests with full paths\n"
		"      --top N               rows in tables (default 20)\n"
		"      --overlap-tolerance F span level: sibling overlap allowed, fraction of the\n"
		"                            parent's duration (default 0.01, 0 = strict)\n"
		"      --service S           only requests of service S\n"
		"      --name N              only requests named N (operation, e.g. 'GET /cart')\n"
		"      --min-latency DUR     only requests at least this slow (5ms, 200us, 1.5s)\n"
		"      --max-latency DUR     only requests at most this slow\n"
		"      --from T, --to T      only requests starting in [T, T]: RFC 3339, Unix\n"
		"                            seconds, a DUR on the input's clock (since boot\n"
		"                            for recordings), or +DUR from the input's start\n"
		"                            (the first recording's, else the first request's)\n"
		"      --host H              only requests served on host H\n"
		"      --tag K=V             only traces with a span tagged K=V\n"
		"      --exclude-op SVC[:OP] spans of service SVC (and operation OP) left out of\n"
		"                            the walk with their subtrees, as CRISP's exclusions\n"
		"                            (repeat for more)\n"
		"      --trace-window DUR    OTLP: a trace is complete once no span of it came for\n"
		"                            this long of its spans' time (default 5m), or for\n"
		"      --trace-window-bytes N  this many bytes of input (default 64M)\n"
		"      --max-paths N         distinct steps and span call paths kept (default\n"
		"                            100000): past them, a new one's time is counted\n"
		"                            under its longest beginning seen, then \"" ENGINE_OTHER "\"\n"
		"      --redact-query KEY    a query key whose values are secret in targets shown,\n"
		"                            beside token, password, Signature...; repeatable\n"
		"  -q, --quiet               no warnings or progress on stderr\n");
}

static int parse_u32(const char *s, uint32_t *v)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || n > UINT32_MAX)
		return -EINVAL;
	*v = (uint32_t)n;
	return 0;
}

/* A positive byte count, with K, M or G (powers of 1024). */
static int parse_size(const char *s, uint64_t *v)
{
	unsigned long long n;
	unsigned shift = 0;
	char *end;

	errno = 0;
	n = strtoull(s, &end, 10);
	if (*end == 'K' || *end == 'k')
		shift = 10, end++;
	else if (*end == 'M')
		shift = 20, end++;
	else if (*end == 'G')
		shift = 30, end++;
	if (errno || end == s || *end || !n || *s == '-' || n > (UINT64_MAX >> shift))
		return -EINVAL;
	*v = (uint64_t)n << shift;
	return 0;
}

static int bad_value(const char *cmd, const char *opt, const char *val, const char *want)
{
	cp_error(cmd, "%s '%s': expected %s", opt, val, want);
	return 2;
}

struct report_args {
	enum fmt fmt;
	const char *out;
	struct engine_opts eo;
	struct out_opts oo;
	bool quiet, requests_set;
	uint64_t min_change_ns; /* diff only */
	bool diff;
	struct analyze_opts ao; /* what the inputs' analysis takes */
	const char *exclude[64];
};

/* --from / --to: a time, or +DUR from the input's start (*rel). */
#define BOUND_WANTED "RFC 3339 time, Unix seconds, a duration, or +DUR from the input's start"
static int parse_bound(const char *arg, uint64_t *ns, bool *realtime, bool *rel)
{
	*rel = arg[0] == '+';
	return *rel ? parse_duration(arg + 1, ns) : parse_time_kind(arg, ns, realtime);
}

/* Options common to report and diff; returns 0, or the exit status. */
static int parse_args(const char *cmd, int argc, char **argv, struct report_args *a)
{
	static const struct option opts[] = {
	    {"format", required_argument, NULL, 'f'},
	    {"output", required_argument, NULL, 'o'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {"requests", required_argument, NULL, OPT_REQUESTS},
	    {"top", required_argument, NULL, OPT_TOP},
	    {"overlap-tolerance", required_argument, NULL, OPT_OVERLAP},
	    {"service", required_argument, NULL, OPT_SERVICE},
	    {"name", required_argument, NULL, OPT_NAME},
	    {"min-latency", required_argument, NULL, OPT_MIN_LAT},
	    {"max-latency", required_argument, NULL, OPT_MAX_LAT},
	    {"from", required_argument, NULL, OPT_FROM},
	    {"to", required_argument, NULL, OPT_TO},
	    {"host", required_argument, NULL, OPT_HOST},
	    {"tag", required_argument, NULL, OPT_TAG},
	    {"min-change", required_argument, NULL, OPT_MIN_CHANGE},
	    {"exclude-op", required_argument, NULL, OPT_EXCLUDE_OP},
	    {"trace-window", required_argument, NULL, OPT_WINDOW},
	    {"trace-window-bytes", required_argument, NULL, OPT_WINDOW_BYTES},
	    {"max-paths", required_argument, NULL, OPT_MAX_PATHS},
	    {"redact-query", required_argument, NULL, OPT_REDACT_QUERY},
	    {NULL, 0, NULL, 0},
	};
	struct engine_filter *fl = &a->eo.filter;
	char *end;
	int c;

	a->eo.overlap_tolerance = 0.01;
	a->oo.top = 20;
	optind = 0; /* 0: GNU getopt starts afresh, so commands can run twice (tests) */
	while ((c = getopt_long(argc, argv, "f:o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'f': {
			size_t i, n = a->diff ? 2 : sizeof(formats) / sizeof(formats[0]);

			for (i = 0; i < n && strcmp(optarg, formats[i].name); i++)
				;
			if (i == n)
				return bad_value(cmd, "--format", optarg,
						 a->diff ? "text or json"
							 : "text, json, folded, pprof, html or "
							   "perfetto");
			a->fmt = (enum fmt)i;
			break;
		}
		case 'o':
			a->out = optarg;
			break;
		case 'q':
			a->quiet = true;
			break;
		case 'h':
			if (a->diff)
				printf("usage: critpath diff A B [--format text|json] [--top N] "
				       "[--min-change DUR]\n  A, B: inputs as for report, or "
				       "saved 'report --format json' files\n");
			else
				report_usage(stdout);
			exit(0);
		case OPT_REQUESTS:
			if (parse_u32(optarg, &a->oo.requests))
				return bad_value(cmd, "--requests", optarg, "a count");
			a->requests_set = true;
			break;
		case OPT_TOP:
			if (parse_u32(optarg, &a->oo.top) || !a->oo.top)
				return bad_value(cmd, "--top", optarg, "a positive count");
			break;
		case OPT_OVERLAP:
			errno = 0;
			a->eo.overlap_tolerance = strtod(optarg, &end);
			if (errno || end == optarg || *end || a->eo.overlap_tolerance < 0 ||
			    a->eo.overlap_tolerance > 1)
				return bad_value(cmd, "--overlap-tolerance", optarg,
						 "a fraction between 0 and 1");
			break;
		case OPT_SERVICE:
			fl->service = optarg;
			break;
		case OPT_NAME:
			fl->name = optarg;
			break;
		case OPT_HOST:
			fl->host = optarg;
			break;
		case OPT_TAG:
			if (!strchr(optarg, '=') || optarg[0] == '=')
				return bad_value(cmd, "--tag", optarg, "KEY=VALUE");
			fl->tag = optarg;
			break;
		case OPT_MIN_LAT:
			if (parse_duration(optarg, &fl->min_latency_ns))
				return bad_value(cmd, "--min-latency", optarg,
						 "a duration like 5ms, 200us, 1.5s");
			break;
		case OPT_MAX_LAT:
			if (parse_duration(optarg, &fl->max_latency_ns))
				return bad_value(cmd, "--max-latency", optarg,
						 "a duration like 5ms, 200us, 1.5s");
			break;
		case OPT_EXCLUDE_OP:
			if (!optarg[0] || optarg[0] == ':' || a->ao.nexclude_ops >= 64)
				return bad_value(cmd, "--exclude-op", optarg,
						 "SERVICE or SERVICE:OPERATION (at most 64 of them)");
			a->exclude[a->ao.nexclude_ops++] = optarg;
			a->ao.exclude_ops = a->exclude;
			break;
		case OPT_WINDOW:
			if (parse_duration(optarg, &a->ao.window_ns) || !a->ao.window_ns)
				return bad_value(cmd, "--trace-window", optarg,
						 "a positive duration like 30s, 5m");
			break;
		case OPT_WINDOW_BYTES:
			if (parse_size(optarg, &a->ao.window_bytes))
				return bad_value(cmd, "--trace-window-bytes", optarg,
						 "a positive size like 64M, 1G, 500000");
			break;
		case OPT_REDACT_QUERY:
			if (proto__redact_query_add(optarg))
				return bad_value(cmd, "--redact-query", optarg,
						 "a query key, without &, =, ? or # (at most "
						 "32 keys)");
			break;
		case OPT_MAX_PATHS:
			if (parse_u32(optarg, &a->eo.max_paths) || !a->eo.max_paths)
				return bad_value(cmd, "--max-paths", optarg,
						 "a positive number of paths like 100000");
			break;
		case OPT_MIN_CHANGE:
			if (parse_duration(optarg, &a->min_change_ns))
				return bad_value(cmd, "--min-change", optarg,
						 "a duration like 100us, 1ms");
			break;
		case OPT_FROM:
			if (parse_bound(optarg, &fl->from_ns, &fl->from_realtime, &fl->from_rel))
				return bad_value(cmd, "--from", optarg, BOUND_WANTED);
			break;
		case OPT_TO:
			if (parse_bound(optarg, &fl->to_ns, &fl->to_realtime, &fl->to_rel))
				return bad_value(cmd, "--to", optarg, BOUND_WANTED);
			break;
		default:
			cp_error(cmd, "'%s --help' lists the options", cmd);
			return 2;
		}
	}
	if (fl->min_latency_ns && fl->max_latency_ns && fl->min_latency_ns > fl->max_latency_ns) {
		cp_error(cmd, "--min-latency is above --max-latency");
		return 2;
	}
	if ((fl->from_ns || fl->from_rel) && (fl->to_ns || fl->to_rel) &&
	    fl->from_realtime == fl->to_realtime && fl->from_rel == fl->to_rel &&
	    fl->from_ns > fl->to_ns) {
		cp_error(cmd, "--from is after --to");
		return 2;
	}
	return 0;
}

/* -o: as private as the recording (0600, no link followed), and there only
 * once complete; stdout's errors as the system says them too */
static FILE *open_output(const char *cmd, const char *path, struct outfile *o)
{
	FILE *f;
	int err = 0;

	if (path)
		err = outfile__open(o, path);
	else
		outfile__stdout(o);
	if (err) {
		cp_error(cmd, "cannot write %s: %s", path, output__why(err));
		return NULL;
	}
	f = outfile__stream(o);
	if (!f) {
		cp_error(cmd, "out of memory");
		outfile__close(o, -ENOMEM);
	}
	return f;
}

/* err: the writer's; a file that failed is not left */
static int close_output(const char *cmd, const struct report_args *a, struct outfile *o, int err)
{
	err = outfile__close(o, err);
	if (err) {
		cp_error(cmd, "writing the %s output to %s failed: %s", formats[a->fmt].name,
			a->out ? a->out : "stdout", strerror(-err));
		return 1;
	}
	return 0;
}

int cmd_report(int argc, char **argv)
{
	struct report_args a = {0};
	struct out_json_stream *js = NULL;
	struct analyze_opts ao;
	struct engine *e = NULL;
	struct outfile of;
	const char *why = NULL;
	FILE *out = NULL;
	int rc, n, err = 0;

	rc = parse_args("report", argc, argv, &a);
	if (rc)
		return rc;
	if (optind >= argc) {
		cp_error("report", "no input (recordings, trace files or "
				"directories)");
		report_usage(stderr);
		return 2;
	}
	/* what the format shows decides what is kept; json streams requests */
	a.eo.keep_slowest = a.fmt == FMT_JSON ? 0 : a.oo.requests;
	a.eo.sorted_top = a.fmt == FMT_TEXT ? a.oo.top : 0;
	if (a.fmt == FMT_HTML && !a.requests_set)
		a.eo.keep_slowest = a.oo.requests = 50;
	if (a.fmt == FMT_PERFETTO && !a.requests_set)
		a.eo.keep_slowest = a.oo.requests = 1;
	if (a.fmt == FMT_JSON) {
		out = open_output("report", a.out, &of);
		if (!out)
			return 1;
		js = out_json__begin(out);
		if (!js) {
			cp_error("report", "out of memory");
			outfile__close(&of, -ENOMEM);
			return 1;
		}
		a.eo.on_request = out_json__request;
		a.eo.on_request_ctx = js;
	}
	e = engine__new(&a.eo);
	if (!e) {
		cp_error("report", "out of memory");
		rc = 1;
		goto cleanup;
	}
	engine__set_quiet(e, a.quiet);
	ao = a.ao;
	ao.overlap_tolerance = a.eo.overlap_tolerance;
	ao.quiet = a.quiet;
	n = report__analyze(argv + optind, argc - optind, e, &ao, &why);
	if (n <= 0) {
		cp_error("report", "nothing analysed: %s",
			n < 0 ? strerror(-n) : why);
		rc = 1;
	}
	if (js) {
		/* the document is closed even when nothing was analysed */
		err = out_json__end(js, engine__result(e));
		js = NULL;
	} else if (!rc) {
		out = open_output("report", a.out, &of);
		if (!out) {
			rc = 1;
			goto cleanup;
		}
		err = formats[a.fmt].write(out, engine__result(e), &a.oo);
	}
	if (out && close_output("report", &a, &of, err))
		rc = 1;
	out = NULL;
cleanup:
	if (js) {
		/* only when the engine could not be made: no document is left */
		struct engine_result empty = {0};

		out_json__end(js, &empty);
	}
	if (out)
		outfile__close(&of, -ENOMEM);
	engine__free(e);
	return rc;
}

/* --- diff ---------------------------------------------------------------- */

static int read_file(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "r");
	size_t cap = 0, n = 0, r;
	char *b = NULL, *nb;

	if (!f)
		return -errno;
	do {
		if (n + 65536 > cap) {
			cap = cap ? cap * 2 : 1 << 20;
			nb = realloc(b, cap);
			if (!nb) {
				free(b);
				fclose(f);
				return -ENOMEM;
			}
			b = nb;
		}
		r = fread(b + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	if (ferror(f)) {
		free(b);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	*buf = b;
	*len = n;
	return 0;
}

/* One side of a diff: a saved report, or inputs analysed as report does. */
static int diff_load(const char *path, const struct report_args *a, struct diff_side *s)
{
	struct analyze_opts ao = a->ao;
	struct engine_opts eo = a->eo;
	char head[SNIFF_BYTES], err[512] = "";
	struct stat st;
	struct engine *e;
	const char *why = NULL;
	int rc, n;

	ao.overlap_tolerance = a->eo.overlap_tolerance;
	ao.quiet = a->quiet;
	if (!stat(path, &st) && S_ISREG(st.st_mode)) {
		ssize_t hn = read_head(path, head, sizeof(head));

		if (hn > 0 && diff__is_saved_profile(head, (size_t)hn)) {
			char *buf = NULL;
			size_t len = 0;

			rc = read_file(path, &buf, &len);
			if (rc) {
				cp_error("diff", "%s: cannot read: %s", path,
					strerror(-rc));
				return 1;
			}
			rc = diff_side__from_json(s, path, buf, len, err, sizeof(err));
			free(buf);
			if (rc) {
				cp_error("diff", "%s: %s", path,
					rc == -ENOMEM ? "out of memory" : err);
				return 1;
			}
			return 0;
		}
	}
	eo.keep_all_requests = false;
	eo.keep_slowest = 0;
	eo.sorted_top = 0;
	e = engine__new(&eo);
	if (!e) {
		cp_error("diff", "out of memory");
		return 1;
	}
	engine__set_quiet(e, a->quiet);
	n = report__analyze((char *const *)&path, 1, e, &ao, &why);
	if (n <= 0) {
		cp_error("diff", "%s: nothing analysed: %s", path,
			n < 0 ? strerror(-n) : why);
		engine__free(e);
		return 1;
	}
	rc = diff_side__from_result(s, path, engine__result(e));
	engine__free(e);
	if (rc) {
		cp_error("diff", "out of memory");
		return 1;
	}
	return 0;
}

int cmd_diff(int argc, char **argv)
{
	struct report_args a = {.diff = true};
	struct diff_side sa = {0}, sb = {0};
	struct diff_opts o;
	int rc;

	rc = parse_args("diff", argc, argv, &a);
	if (rc)
		return rc;
	if (argc - optind != 2) {
		cp_error("diff", "expected two inputs, A and B (got %d)",
			argc - optind);
		return 2;
	}
	if (a.out || a.requests_set) {
		cp_error("diff", "-o and --requests are report options");
		return 2;
	}
	rc = diff_load(argv[optind], &a, &sa);
	if (!rc)
		rc = diff_load(argv[optind + 1], &a, &sb);
	if (!rc) {
		struct outfile of;
		FILE *f;

		o.json = a.fmt == FMT_JSON;
		o.top = a.oo.top;
		o.min_change_ns = a.min_change_ns;
		outfile__stdout(&of);
		f = outfile__stream(&of);
		rc = f ? diff__write(f, &sa, &sb, &o) : -ENOMEM;
		rc = outfile__close(&of, rc < 0 ? rc : 0);
		if (rc < 0)
			cp_error("diff", "writing the result failed: %s",
				strerror(-rc));
		rc = rc < 0 ? 1 : 0;
	}
	diff_side__free(&sa);
	diff_side__free(&sb);
	return rc;
}
