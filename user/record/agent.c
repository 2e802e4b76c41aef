// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath agent: the recorder's capture analysed live, kept requests
 * exported as OTLP spans. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "commands.h"
#include "engine.h"
#include "flight.h"
#include "kpath.h"
#include "msg.h"
#include "recording.h"
#include "session.h"
#include "util.h"

#define CMD "agent"
#define POLL_MS 10
#define TICK_MS 100
/* a record reaches its ring within HOLD_NS, a held one a drain later */
#define REORDER_NS 20000000ull
#define RESCAN_NS 5000000000ull
#define MAX_WATCH 32

struct held_rec {
	uint64_t ts;
	uint64_t off;
};

struct agent {
	struct rec_session *s;
	struct kpath *kp;
	int src;
	struct intern *in;
	struct trigger *tr;
	struct exporter *ex;
	struct otlp_resource res;
	struct pbuf pb;
	uint64_t rng;
	/* the reorder buffer: records held, and their order */
	uint8_t *buf, *buf2; /* buf2: the spare release() copies into */
	size_t nbuf, capbuf, capbuf2;
	struct held_rec *ix, *tmp;
	uint32_t nix, capix;
	uint64_t released, late;
	/* verdicts of requests wanted, waiting for their request */
	struct verdict {
		uint64_t start, end;
		unsigned v;
	} *vq;
	uint32_t vhead, nvq, capvq;
	struct flight *fl;
	struct flight_opts flo;
	/* the profile window */
	struct engine *win;
	uint64_t win_start, every_ns;
	const char *out_dir;
	bool include_optin;
	uint32_t windows;
	/* what to follow */
	const char *comm[MAX_WATCH], *exe[MAX_WATCH], *cgroup[MAX_WATCH];
	int ncomm, nexe, ncgroup;
	char *exe_real[MAX_WATCH];
	/* counts */
	uint64_t seen, walked, exported, slow, sampled, optin, profiled;
	uint64_t status_every, last_status, last_cpu_ns, ntargets_added;
	const char *service_env;
	int err;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- what to follow -------------------------------------------------------- */

static bool read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* pid matches a --comm, --exe or --cgroup */
static bool matches(const struct agent *a, pid_t pid)
{
	char path[64], buf[4096], *nl;

	if (a->ncomm) {
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		if (read_small(path, buf, sizeof(buf))) {
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
		if (read_small(path, buf, sizeof(buf))) {
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

/* --- records in time order ------------------------------------------------- */

static int tap(void *ctx, const struct cp_hdr *rec)
{
	struct agent *a = ctx;

	if (a->nbuf + rec->size > a->capbuf) {
		size_t cap = a->capbuf ? a->capbuf : 1 << 20;
		uint8_t *p;

		while (cap < a->nbuf + rec->size)
			cap *= 2;
		p = realloc(a->buf, cap);
		if (!p)
			return -ENOMEM;
		a->buf = p;
		a->capbuf = cap;
	}
	if (grow_array((void **)&a->ix, &a->capix, a->nix + 1, sizeof(*a->ix), 4096))
		return -ENOMEM;
	memcpy(a->buf + a->nbuf, rec, rec->size);
	a->ix[a->nix++] = (struct held_rec){rec->ts, a->nbuf};
	a->nbuf += rec->size;
	return 0;
}

static int order(struct agent *a)
{
	uint32_t n = a->nix;
	struct held_rec *src = a->ix, *dst;
	uint32_t captmp = a->capix;

	if (n < 2)
		return 0;
	dst = realloc(a->tmp, captmp * sizeof(*dst));
	if (!dst)
		return -ENOMEM;
	a->tmp = dst;
	for (;;) {
		uint32_t runs = 0, i = 0, o = 0;

		while (i < n) {
			uint32_t m = i + 1, e;

			while (m < n && src[m - 1].ts <= src[m].ts)
				m++;
			e = m;
			if (m < n) {
				e = m + 1;
				while (e < n && src[e - 1].ts <= src[e].ts)
					e++;
			}
			/* merge [i,m) and [m,e) */
			for (uint32_t x = i, y = m; x < m || y < e;)
				dst[o++] = y >= e || (x < m && src[x].ts <= src[y].ts) ? src[x++] : src[y++];
			runs++;
			i = e;
		}
		{
			struct held_rec *t = src;

			src = dst;
			dst = t;
		}
		if (runs <= 1)
			break;
	}
	if (src != a->ix) {
		a->tmp = a->ix;
		a->ix = src;
	}
	return 0;
}

/* Records up to cut go to the analysis, in time order */
static int release(struct agent *a, uint64_t cut)
{
	uint32_t k = 0;
	int err = order(a);

	if (err)
		return err;
	while (k < a->nix && a->ix[k].ts <= cut) {
		const struct cp_hdr *h = (const void *)(a->buf + a->ix[k].off);

		if (h->type < CP_MD_PROCESS && h->ts < a->released)
			a->late++;
		if (a->fl && (err = flight__add(a->fl, h)))
			return err;
		err = kpath__add(a->kp, (uint32_t)a->src, h);
		if (err)
			return err;
		if (h->type < CP_MD_PROCESS && h->ts > a->released)
			a->released = h->ts;
		k++;
	}
	if (!k)
		return 0;
	/* what is held moves to the front (offsets rebased) */
	if (k == a->nix) {
		a->nix = 0;
		a->nbuf = 0;
		return 0;
	}
	/* the records still held move to the spare buffer, which becomes the
	 * buffer */
	if (a->capbuf2 < a->capbuf) {
		uint8_t *nb = realloc(a->buf2, a->capbuf);

		if (!nb)
			return -ENOMEM;
		a->buf2 = nb;
		a->capbuf2 = a->capbuf;
	}
	{
		size_t o = 0;
		uint8_t *t;

		for (uint32_t i = k; i < a->nix; i++) {
			const struct cp_hdr *h = (const void *)(a->buf + a->ix[i].off);

			memcpy(a->buf2 + o, h, h->size);
			a->ix[i - k] = (struct held_rec){h->ts, o};
			o += h->size;
		}
		t = a->buf;
		a->buf = a->buf2;
		a->buf2 = t;
		{
			size_t c = a->capbuf;

			a->capbuf = a->capbuf2;
			a->capbuf2 = c;
		}
		a->nbuf = o;
		a->nix -= k;
	}
	return 0;
}

/* --- requests -------------------------------------------------------------- */

static const char *sink_intern(void *ctx, const char *s)
{
	struct agent *a = ctx;

	return intern__get(a->in, s);
}

static void sink_warn(void *ctx, const char *msg)
{
	cp_warn(CMD, "%s", msg);
}

static bool sink_want(void *ctx, const struct cp_request *h)
{
	struct agent *a = ctx;
	unsigned v;

	a->seen++;
	v = trigger__judge(a->tr, h, h->end_ns);
	if (!a->include_optin && (v & AG_OPTIN))
		v &= ~(unsigned)AG_PROFILE;
	a->slow += !!(v & AG_SLOW);
	a->sampled += !!(v & AG_SAMPLED);
	a->optin += !!(v & AG_OPTIN);
	if ((v & AG_SLOW) && a->fl) {
		char path[PATH_MAX];
		int err = flight__dump(a->fl, h->end_ns, a->s->r->lost, path, sizeof(path));

		if (err)
			cp_error(CMD, "flight recording not written: %s", strerror(-err));
		else if (path[0] && !a->s->o.quiet)
			cp_error(CMD, "slow %s %s: the last seconds in %s", h->service,
				h->name, path);
	}
	if (!a->ex)
		v &= AG_PROFILE; /* nowhere to export to */
	if (!a->out_dir)
		v &= ~(unsigned)AG_PROFILE;
	if (!v)
		return false;
	if (grow_array((void **)&a->vq, &a->capvq, a->nvq + 1, sizeof(*a->vq), 64))
		return false;
	/* verdicts handed out leave the queue */
	if (a->vhead && a->vhead >= a->nvq / 2) {
		memmove(a->vq, a->vq + a->vhead, (a->nvq - a->vhead) * sizeof(*a->vq));
		a->nvq -= a->vhead;
		a->vhead = 0;
	}
	a->vq[a->nvq++] = (struct verdict){h->start_ns, h->end_ns, v};
	a->walked++;
	return true;
}

static unsigned verdict_of(struct agent *a, const struct cp_request *r)
{
	while (a->vhead < a->nvq) {
		struct verdict *q = &a->vq[a->vhead];

		if (q->start == r->start_ns && q->end == r->end_ns)
			return q->v; /* pipelined requests share one */
		a->vhead++;
	}
	return AG_PROFILE;
}

static void rnd_bytes(struct agent *a, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t x = (a->rng += 0x9e3779b97f4a7c15ull);

		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
		x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
		x ^= x >> 31;
		memcpy(p + i, &x, n - i < 8 ? n - i : 8);
	}
}

static int sink_request(void *ctx, const struct cp_request *r)
{
	struct agent *a = ctx;
	unsigned v = verdict_of(a, r);

	if (v & (AG_SLOW | AG_SAMPLED | AG_OPTIN)) {
		uint8_t rnd[24];
		char exe[PATH_MAX] = "", path[64];
		ssize_t n = -1;

		if (r->wire && r->wire->pid > 0) {
			snprintf(path, sizeof(path), "/proc/%d/exe", r->wire->pid);
			n = readlink(path, exe, sizeof(exe) - 1);
		}
		exe[n > 0 ? n : 0] = '\0';
		a->res.exe = exe[0] ? exe : NULL;
		rnd_bytes(a, rnd, sizeof(rnd));
		a->pb.n = 0;
		a->pb.err = false;
		if (!otlp__encode_request(&a->pb, r, &a->res, v, rnd)) {
			exporter__push(a->ex, a->pb.p, a->pb.n);
			a->exported++;
		}
	}
	if ((v & AG_PROFILE) && a->win) {
		struct cp_request c = *r;

		c.interned = false; /* the window's engine keeps its own copies */
		engine__add_request(a->win, &c);
		a->profiled++;
	}
	return 0;
}

/* --- profile windows ------------------------------------------------------- */

static FILE *out_file(struct agent *a, const char *stamp, const char *ext)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/profile-%s%s", a->out_dir, stamp, ext);
	fd = output__open(path, &st);
	if (fd < 0) {
		cp_error(CMD, "cannot write %s: %s", path, output__why(fd));
		return NULL;
	}
	return fdopen(fd, "w");
}

static void window_close(struct agent *a, bool last)
{
	char stamp[32], *counts = NULL;
	size_t ncounts = 0;
	struct tm tm;
	time_t now = time(NULL);
	struct out_opts oo = {.top = 20};
	FILE *f;

	if (!a->out_dir)
		return;
	if (a->win) {
		const struct engine_result *res = engine__result(a->win);

		gmtime_r(&now, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
		/* two windows can end in one second (the last one at exit) */
		snprintf(stamp + strlen(stamp), sizeof(stamp) - strlen(stamp), "-%04u", a->windows);
		if (res && (f = out_file(a, stamp, ".json"))) {
			out_json(f, res, &oo);
			fclose(f);
		}
		if (res && (f = out_file(a, stamp, ".pb.gz"))) {
			out_pprof(f, res, &oo);
			fclose(f);
		}
		if (trigger__window_json(a->tr, &counts, &ncounts) >= 0 &&
		    (f = out_file(a, stamp, ".counts.json"))) {
			fwrite(counts, 1, ncounts, f);
			fclose(f);
		}
		free(counts);
		engine__free(a->win);
		a->win = NULL;
		a->windows++;
	}
	if (!last) {
		struct engine_opts eo = {0};

		a->win = engine__new(&eo);
		if (a->win)
			engine__set_quiet(a->win, true);
		a->win_start = mono_ns();
	}
}

/* --- status ---------------------------------------------------------------- */

static void status(struct agent *a, const char *when)
{
	struct exporter_stats st = {0};
	struct rusage ru;
	uint64_t cpu, now = mono_ns(), rss_kb = 0;
	double share;
	char buf[256];

	if (a->ex)
		exporter__stats(a->ex, &st);
	getrusage(RUSAGE_SELF, &ru);
	cpu = (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + ru.ru_utime.tv_usec * 1000ull +
	      (uint64_t)ru.ru_stime.tv_sec * 1000000000ull + ru.ru_stime.tv_usec * 1000ull;
	share = now > a->last_status ? (double)(cpu - a->last_cpu_ns) / (double)(now - a->last_status)
				     : 0;
	if (read_small("/proc/self/statm", buf, sizeof(buf))) {
		unsigned long size, res;

		if (sscanf(buf, "%lu %lu", &size, &res) == 2)
			rss_kb = res * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
	}
	cp_error(CMD,
		"%s: %llu requests (%llu slow, %llu sampled, %llu opt-in), %llu exported, "
		    "%llu sent, %llu dropped, %llu failed, %llu profiled, %llu lost events, "
		    "%d targets, cpu %.1f%%, rss %llu MiB",
		when, (unsigned long long)a->seen, (unsigned long long)a->slow,
		(unsigned long long)a->sampled, (unsigned long long)a->optin,
		(unsigned long long)a->exported, (unsigned long long)st.sent,
		(unsigned long long)st.dropped, (unsigned long long)st.failed,
		(unsigned long long)a->profiled, (unsigned long long)a->s->r->lost,
		rec__live_targets(a->s->r), share * 100, (unsigned long long)(rss_kb / 1024));
	a->last_status = now;
	a->last_cpu_ns = cpu;
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
		"                      (a request with a sampled W3C traceparent is always\n"
		"                      exported, as a child of the caller's span)\n"
		"  --otlp URL          OTLP/HTTP traces endpoint (default:\n"
		"                      $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or\n"
		"                      $OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces; none: no export)\n"
		"  --queue N           requests waiting for export at most (default 4096)\n"
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
	case O_OTLP:
		*url = arg;
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
	    {"flight-mb", 1, 0, O_FLIGHT_MB},  {"help", 0, 0, 'h'},
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

/* --cgroup and --exe resolved; --out made; the OTLP URL checked. 0 or 1. */
static int check(struct agent *a, const char **url)
{
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
	if (a->flo.dir && mkdir(a->flo.dir, 0700) && errno != EEXIST) {
		cp_error(CMD, "--flight %s: %s", a->flo.dir, strerror(errno));
		return 1;
	}
	if (a->out_dir && mkdir(a->out_dir, 0700) && errno != EEXIST) {
		cp_error(CMD, "--out %s: %s", a->out_dir, strerror(errno));
		return 1;
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
		cp_error(CMD, "OTLP endpoint '%s': %s", *url, why);
		return 1;
	}
	return 0;
}

/* --- the loop -------------------------------------------------------------- */

static int start_analysis(struct agent *a)
{
	struct cp_sink sink = {
	    .request = sink_request,
	    .warn = sink_warn,
	    .ctx = a,
	    .intern = sink_intern,
	    .want = sink_want,
	};

	a->in = intern__new();
	a->kp = a->in ? kpath__new(&sink) : NULL;
	if (!a->kp)
		return -ENOMEM;
	a->src = kpath__add_source(a->kp, a->s->info.host, &a->s->info, false);
	if (a->src >= 0 && a->flo.dir && !(a->fl = flight__new(&a->flo, &a->s->info)))
		return -ENOMEM;
	return a->src < 0 ? a->src : 0;
}

static void loop(struct agent *a)
{
	struct recorder *r = a->s->r;
	uint64_t last_tick = mono_ns(), last_scan = last_tick, now;
	int err;

	while (!rec_stop_signal && !r->write_err && !a->err) {
		uint64_t t0 = mono_ns();

		err = rec__drain(r, POLL_MS, false);
		if (err < 0 && err != -EINTR) {
			cp_error(CMD, "reading the ring buffer: %s", strerror(-err));
			break;
		}
		a->err = release(a, t0 - REORDER_NS);
		if (!a->err)
			a->err = kpath__advance(a->kp, (uint32_t)a->src, t0 - REORDER_NS);
		now = mono_ns();
		if (now - last_tick >= TICK_MS * 1000000ull) {
			rec__tick(r, now);
			last_tick = now;
		}
		if (watching(a) && now - last_scan >= RESCAN_NS) {
			scan(a, true); /* processes moved into a cgroup, renamed */
			last_scan = now;
		}
		if (a->out_dir && now - a->win_start >= a->every_ns)
			window_close(a, false);
		if (now - a->last_status >= a->status_every)
			status(a, "status");
		if (a->s->deadline && now >= a->s->deadline)
			break;
	}
	if (a->err)
		cp_error(CMD, "analysis stopped: %s", strerror(-a->err));
}

int cmd_agent(int argc, char **argv)
{
	struct rec_session *s = calloc(1, sizeof(*s));
	struct agent *a = calloc(1, sizeof(*a));
	struct trigger_opts to = {.slow_pct = 0.99, .profile = 0.01};
	struct exporter_opts eo = {0};
	struct exporter_stats fin = {0};
	const char *url = NULL;
	int ret;

	if (!s || !a || !(s->r = calloc(1, sizeof(*s->r)))) {
		cp_error(CMD, "out of memory");
		free(s);
		free(a);
		return 1;
	}
	s->cmd = CMD;
	s->go_fd = -1;
	a->s = s;
	a->every_ns = 60000000000ull;
	a->flo = (struct flight_opts){.keep_ns = 10000000000ull,
				      .max_bytes = 64ull << 20,
				      .max_md_bytes = 16ull << 20,
				      .min_gap_ns = 10000000000ull,
				      .max_files = 20};
	a->status_every = 60000000000ull;
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
	s->o.argc = argc;
	s->o.argv = argv;
	s->o.bo.watch_execs = watching(a);
	s->r->quiet = s->o.quiet;
	s->r->spawn = on_spawn;
	s->r->spawn_ctx = a;
	s->tap = tap;
	s->tap_ctx = a;
	a->service_env = getenv("OTEL_SERVICE_NAME");
	a->res.service = a->service_env && *a->service_env ? a->service_env : NULL;
	to.seed = (uint64_t)mono_ns() ^ (uint64_t)getpid() << 32;
	a->rng = to.seed * 0x9e3779b97f4a7c15ull;
	ret = check(a, &url);
	if (!ret && watching(a))
		scan(a, false);
	a->tr = ret ? NULL : trigger__new(&to);
	if (!ret && !a->tr)
		ret = 1;
	if (!ret && url) {
		eo.url = url;
		eo.headers = getenv("OTEL_EXPORTER_OTLP_HEADERS");
		a->ex = exporter__new(&eo);
		if (!a->ex) {
			cp_error(CMD, "cannot start the exporter: %s", strerror(errno));
			ret = 1;
		}
	}
	ret = ret || rec_session__open(s) || rec_session__load(s);
	if (!ret && start_analysis(a)) {
		cp_error(CMD, "out of memory");
		ret = 1;
	}
	ret = ret || rec_session__attach(s);
	if (!ret) {
		a->res.host = s->info.host;
		a->last_status = mono_ns();
		if (a->out_dir)
			window_close(a, false);
		if (!s->o.quiet)
			cp_error(CMD,
				"following %d process%s%s; exporting to %s; Ctrl-C to stop",
				rec__live_targets(s->r), rec__live_targets(s->r) == 1 ? "" : "es",
				watching(a) ? " and the ones that match as they start" : "",
				url ? url : "(nowhere: no --otlp)");
		loop(a);
		rec__drain(s->r, 0, true);
		rec__check_drops(s->r, mono_ns());
		if (!a->err)
			a->err = release(a, UINT64_MAX);
		if (!a->err)
			a->err = kpath__flush(a->kp);
		window_close(a, true);
		status(a, "total");
		if (a->ex) {
			exporter__close(a->ex, mono_ns() + 4000000000ull, &fin);
			a->ex = NULL;
			cp_error(CMD,
				"export: %llu sent in %llu batches, %llu dropped (queue full or "
				    "backend down at exit), %llu failed (refused), %llu retries",
				(unsigned long long)fin.sent, (unsigned long long)fin.batches,
				(unsigned long long)fin.dropped, (unsigned long long)fin.failed,
				(unsigned long long)fin.retries);
		}
		if (a->late)
			cp_error(CMD, "%llu records came later than the reorder window",
				(unsigned long long)a->late);
		ret = a->err ? 1 : 0;
	}
	exporter__close(a->ex, mono_ns(), NULL);
	if (a->kp)
		kpath__free(a->kp);
	engine__free(a->win);
	flight__free(a->fl);
	trigger__free(a->tr);
	intern__free(a->in);
	for (int i = 0; i < a->nexe; i++)
		free(a->exe_real[i]);
	free(a->buf);
	free(a->buf2);
	free(a->ix);
	free(a->tmp);
	free(a->vq);
	pbuf__free(&a->pb);
	free(a);
	rec_session__free(s);
	return ret;
}
