// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Synthetic distributed traces for the span-level benchmark and tests.
 *
 *   gen_traces [--traces N] [--fanout F] [--depth D] [--skew-us S]
 *              [--random-spans LO-HI] [--skewed-pct P] [--outside-pct P]
 *              [--format jaeger|otlp|otlp-split] [--seed X] [-o FILE]
 *
 * Every trace is a full tree: each span above depth D has F children, so a
 * trace has (F^D - 1) / (F - 1) spans. Children are placed inside their
 * parent, a mix of sequential and overlapping ones, so the walk has real
 * choices to make. Spans alternate between server spans (a new process:
 * "svc-<level>") and client spans (the same process as their parent), and
 * each process of a trace gets a random clock offset in [-S, S] µs, so
 * clipping, dropping and capping of remote server spans all happen.
 * Jaeger: one {"data":[…]} document with every trace. OTLP: JSON lines, one
 * export request per trace, one resourceSpans per process; otlp-split: one
 * export request per process, half of a trace's written after the next
 * trace's first half (a trace over several lines, others between).
 * Other shapes: --random-spans LO-HI makes random trees of LO to HI spans
 * (a random parent each, children inside it); --skewed-pct gives only that
 * share of processes a clock offset; --outside-pct moves that share of
 * spans past their parent's end.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gspan {
	uint64_t id;
	int parent; /* index, -1 root */
	int depth;
	int proc;
	long long start, end; /* µs, true clock */
	int status;
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic for a seed, no libc state */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static long long rnd_range(long long lo, long long hi)
{
	if (hi <= lo)
		return lo;
	return lo + (long long)(rnd() % (uint64_t)(hi - lo + 1));
}

static void usage(void)
{
	fprintf(stderr, "usage: gen_traces [--traces N] [--fanout F] [--depth D] [--skew-us S] "
			"[--random-spans LO-HI] [--skewed-pct P] [--outside-pct P]\n"
			"       [--format jaeger|otlp|otlp-split] [--seed X] [-o FILE]\n");
}

/* Builds one trace's spans, parents first. Returns the count. */
static int build(struct gspan *sp, int fanout, int depth, long long t0, int *nproc)
{
	int n = 1, procs = 1;

	sp[0] = (struct gspan){rnd() | 1, -1, 0, 0, t0, t0 + rnd_range(5000, 50000), 200};
	for (int i = 0; i < n; i++) {
		long long ps = sp[i].start, pe = sp[i].end, dur = pe - ps, cursor = ps;

		if (sp[i].depth + 1 >= depth)
			continue;
		for (int k = 0; k < fanout; k++) {
			struct gspan *c = &sp[n];
			long long slot = dur / fanout, s, e;

			if (rnd() % 3) { /* sequential: after the previous one */
				s = cursor + rnd_range(0, slot / 8);
				e = s + rnd_range(slot / 4, slot * 3 / 4);
			} else { /* overlapping: anywhere */
				s = ps + rnd_range(0, dur / 2);
				e = s + rnd_range(dur / 8, dur / 2);
			}
			if (e > pe)
				e = pe;
			if (s > e)
				s = e;
			cursor = e;
			*c = (struct gspan){rnd() | 1, i, sp[i].depth + 1,	 sp[i].proc,
					    s,	       e, rnd() % 50 ? 200 : 500};
			/* server spans (odd depth) run in a process of their own */
			if (c->depth % 2)
				c->proc = procs++;
			n++;
		}
	}
	*nproc = procs;
	return n;
}

/* A random tree of n spans: each span's parent one of those before it
 * (the later ones likelier, so trees get deep), inside it. */
static int build_random(struct gspan *sp, int n, long long t0, int *nproc)
{
	int procs = 1;

	sp[0] = (struct gspan){rnd() | 1, -1, 0, 0, t0, t0 + rnd_range(5000, 50000), 200};
	for (int i = 1; i < n; i++) {
		int p = (int)rnd_range(i / 2, i - 1);
		long long ps = sp[p].start, dur = sp[p].end - ps;
		long long s = ps + rnd_range(0, dur / 2), e = s + rnd_range(dur / 8, dur / 2);

		if (e > sp[p].end)
			e = sp[p].end;
		sp[i] = (struct gspan){rnd() | 1, p, sp[p].depth + 1, sp[p].proc, s, e,
				       rnd() % 50 ? 200 : 500};
		if (sp[i].depth % 2)
			sp[i].proc = procs++;
	}
	*nproc = procs;
	return n;
}

static void span_tags(FILE *f, const struct gspan *s, bool otlp)
{
	const char *kind = s->depth == 0 || s->depth % 2 ? "server" : "client";

	if (!otlp) {
		fprintf(f,
			"\"tags\":[{\"key\":\"span.kind\",\"type\":\"string\",\"value\":\"%s\"},"
			"{\"key\":\"http.status_code\",\"type\":\"int64\",\"value\":%d},"
			"{\"key\":\"component\",\"type\":\"string\",\"value\":\"net/http\"}]",
			kind, s->status);
	} else {
		fprintf(f,
			"\"kind\":%d,\"attributes\":[{\"key\":\"http.status_code\",\"value\":"
			"{\"intValue\":\"%d\"}},{\"key\":\"component\",\"value\":{\"stringValue\":"
			"\"net/http\"}}]",
			kind[0] == 's' ? 2 : 3, s->status);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"traces", required_argument, NULL, 't'},
	    {"fanout", required_argument, NULL, 'f'},
	    {"depth", required_argument, NULL, 'd'},
	    {"skew-us", required_argument, NULL, 's'},
	    {"format", required_argument, NULL, 'F'},
	    {"seed", required_argument, NULL, 'S'},
	    {"random-spans", required_argument, NULL, 'R'},
	    {"skewed-pct", required_argument, NULL, 'K'},
	    {"outside-pct", required_argument, NULL, 'O'},
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	long traces = 1000, fanout = 4, depth = 4, skew = 0, rlo = 0, rhi = 0, skewed = 100,
	     outside = 0;
	unsigned long long seed = 1;
	bool otlp = false, split = false;
	char *held = NULL, *cur = NULL; /* otlp-split: the last trace's second half */
	size_t heldlen = 0, curlen = 0;
	FILE *real = NULL;
	const char *out = NULL;
	struct gspan *sp = NULL;
	long long *offset = NULL;
	long max_spans = 1, level = 1;
	FILE *f = stdout;
	int c, err = 0;

	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			traces = atol(optarg);
			break;
		case 'f':
			fanout = atol(optarg);
			break;
		case 'd':
			depth = atol(optarg);
			break;
		case 's':
			skew = atol(optarg);
			break;
		case 'S':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'R':
			if (sscanf(optarg, "%ld-%ld", &rlo, &rhi) != 2 || rlo < 1 || rhi < rlo ||
			    rhi > 10000000) {
				fprintf(stderr, "gen_traces: --random-spans: '%s' is not LO-HI\n",
					optarg);
				return 2;
			}
			break;
		case 'K':
			skewed = atol(optarg);
			break;
		case 'O':
			outside = atol(optarg);
			break;
		case 'F':
			if (!strcmp(optarg, "otlp") || !strcmp(optarg, "otlp-split")) {
				otlp = true;
				split = optarg[4] == '-';
			} else if (strcmp(optarg, "jaeger")) {
				fprintf(stderr,
					"gen_traces: --format: '%s' is not jaeger or otlp\n",
					optarg);
				return 2;
			}
			break;
		case 'o':
			out = optarg;
			break;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (traces < 1 || fanout < 1 || depth < 1 || skew < 0) {
		fprintf(stderr,
			"gen_traces: --traces, --fanout, --depth must be >= 1, --skew-us >= 0\n");
		return 2;
	}
	for (long d = 1; d < depth && !rhi; d++) {
		level *= fanout;
		max_spans += level;
		if (max_spans > 10000000) {
			fprintf(stderr,
				"gen_traces: fanout^depth too large (over 10M spans per trace)\n");
			return 2;
		}
	}
	if (rhi)
		max_spans = rhi;
	rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
	sp = malloc(sizeof(*sp) * max_spans);
	offset = malloc(sizeof(*offset) * max_spans);
	if (!sp || !offset) {
		fprintf(stderr, "gen_traces: out of memory for %ld spans\n", max_spans);
		err = 1;
		goto cleanup;
	}
	if (out) {
		f = fopen(out, "w");
		if (!f) {
			fprintf(stderr, "gen_traces: cannot create %s: %s\n", out, strerror(errno));
			err = 1;
			goto cleanup;
		}
	}
	if (!otlp)
		fputs("{\"data\":[", f);
	for (long t = 0; t < traces; t++) {
		long long t0 = 1700000000000000LL + t * 1000;
		uint64_t tid_hi = rnd(), tid_lo = rnd();
		int nproc, n = rhi ? build_random(sp, (int)rnd_range(rlo, rhi), t0, &nproc)
				   : build(sp, (int)fanout, (int)depth, t0, &nproc);

		for (int p = 0; p < nproc; p++)
			offset[p] = p && rnd_range(0, 99) < skewed ? rnd_range(-skew, skew) : 0;
		for (int i = 1; i < n && outside; i++)
			if (rnd_range(0, 99) < outside) {
				long long d = sp[i].end - sp[i].start;

				sp[i].start = sp[sp[i].parent].end + 10;
				sp[i].end = sp[i].start + d;
			}
		if (split) { /* this trace's lines into cur, then half out */
			real = f;
			f = open_memstream(&cur, &curlen);
			if (!f) {
				err = 1;
				goto cleanup;
			}
		}
		if (!otlp) {
			fprintf(f, "%s\n{\"traceID\":\"%016llx%016llx\",\"spans\":[", t ? "," : "",
				(unsigned long long)tid_hi, (unsigned long long)tid_lo);
			for (int i = 0; i < n; i++) {
				const struct gspan *s = &sp[i];

				fprintf(f,
					"%s{\"traceID\":\"%016llx%016llx\",\"spanID\":\"%016llx\","
					"\"operationName\":\"op-%d-%d\",\"references\":[",
					i ? "," : "", (unsigned long long)tid_hi,
					(unsigned long long)tid_lo, (unsigned long long)s->id,
					s->depth, (int)(s->id % 3));
				if (s->parent >= 0)
					fprintf(f,
						"{\"refType\":\"CHILD_OF\",\"traceID\":\"%016llx%"
						"016llx\","
						"\"spanID\":\"%016llx\"}",
						(unsigned long long)tid_hi,
						(unsigned long long)tid_lo,
						(unsigned long long)sp[s->parent].id);
				fprintf(f, "],\"startTime\":%lld,\"duration\":%lld,",
					s->start + offset[s->proc], s->end - s->start);
				span_tags(f, s, false);
				fprintf(f, ",\"logs\":[],\"processID\":\"p%d\",\"warnings\":null}",
					s->proc + 1);
			}
			fputs("],\"processes\":{", f);
			for (int p = 0; p < nproc; p++)
				fprintf(f,
					"%s\"p%d\":{\"serviceName\":\"svc-%d\",\"tags\":[{\"key\":"
					"\"hostname\",\"type\":\"string\",\"value\":\"host-%d\"}]}",
					p ? "," : "", p + 1, p % 7, p);
			fputs("},\"warnings\":null}", f);
		} else {
			fputs("{\"resourceSpans\":[", f);
			for (int p = 0; p < nproc; p++) {
				bool first = true;

				if (split && p)
					fputs("]}\n{\"resourceSpans\":[", f);
				fprintf(
				    f,
				    "%s{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
				    "\"value\":{\"stringValue\":\"svc-%d\"}},{\"key\":\"host."
				    "name\","
				    "\"value\":{\"stringValue\":\"host-%d\"}}]},\"scopeSpans\":[{"
				    "\"scope\":{\"name\":\"gen\"},\"spans\":[",
				    p && !split ? "," : "", p % 7, p);
				for (int i = 0; i < n; i++) {
					const struct gspan *s = &sp[i];

					if (s->proc != p)
						continue;
					fprintf(f,
						"%s{\"traceId\":\"%016llx%016llx\",\"spanId\":\"%"
						"016llx\","
						"\"parentSpanId\":\"",
						first ? "" : ",", (unsigned long long)tid_hi,
						(unsigned long long)tid_lo,
						(unsigned long long)s->id);
					if (s->parent >= 0)
						fprintf(f, "%016llx",
							(unsigned long long)sp[s->parent].id);
					fprintf(f,
						"\",\"name\":\"op-%d-%d\",\"startTimeUnixNano\":\"%"
						"lld000\","
						"\"endTimeUnixNano\":\"%lld000\",",
						s->depth, (int)(s->id % 3), s->start + offset[p],
						s->end + offset[p]);
					span_tags(f, s, true);
					fputc('}', f);
					first = false;
				}
				fputs("]}]}", f);
			}
			fputs("]}\n", f);
		}
		if (split) {
			/* one request per process: its lines, the first half now,
			 * the last trace's second half, this one's kept for later */
			size_t half = 0, lines = 0;

			fclose(f);
			f = real;
			for (size_t k = 0; k < curlen; k++)
				lines += cur[k] == '\n';
			for (size_t k = 0, seen = 0; k < curlen; k++)
				if (cur[k] == '\n' && ++seen == (lines + 1) / 2) {
					half = k + 1;
					break;
				}
			fwrite(cur, 1, half, f);
			if (held)
				fwrite(held, 1, heldlen, f);
			free(held);
			held = malloc(curlen - half + 1);
			if (!held) {
				err = 1;
				goto cleanup;
			}
			memcpy(held, cur + half, curlen - half);
			heldlen = curlen - half;
			free(cur);
			cur = NULL;
		}
	}
	if (held)
		fwrite(held, 1, heldlen, f);
	if (!otlp)
		fputs("\n]}\n", f);
	if (fflush(f) || ferror(f)) {
		fprintf(stderr, "gen_traces: write failed: %s\n", strerror(errno));
		err = 1;
	}
cleanup:
	free(held);
	free(cur);
	if (f && f != stdout)
		fclose(f);
	free(sp);
	free(offset);
	return err;
}
