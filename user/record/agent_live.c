// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath agent's analysis: batches of records from the loop that drains
 * the rings, put in time order, walked when triggered, exported, profiled.
 * It runs in a thread of its own at SCHED_IDLE while it keeps up, so the
 * traced servers' threads take the CPU first (the p99 budget), and at
 * SCHED_OTHER when it falls behind. The queue is a single-producer ring
 * without a lock: a starved SCHED_IDLE thread never holds what the loop
 * waits for, and while the loop waits for a slot the rings fill, counted. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent_int.h"
#include "engine.h"
#include "kpath.h"
#include "msg.h"
#include "out_yajl.h"
#include "outfile.h"
#include "recording.h"
#include "util.h"

#define CMD AGENT_CMD
#define SLOTS 16		   /* batches queued at most, the loop's included */
#define BATCH_BYTES (256u << 10)   /* a batch is posted once this full, */
#define BATCH_NS 10000000ull	   /* or this old */
#define URGENT_SLOTS (SLOTS / 2)   /* behind: this many batches queued, */
#define URGENT_NS 250000000ull	   /* or the oldest batch waited this long */
#define KEEP_CAP (1u << 20)	   /* a batch buffer grown past this shrinks */

struct batch {
	uint8_t *buf;
	size_t len, cap;
	uint64_t cut, posted_ns;
	bool last;
};

/* A record held: in the buffer (kept from earlier batches) or in the batch
 * being analysed, which keep_from() copies what stays of before it goes. */
struct held_rec {
	uint64_t ts;
	const struct cp_hdr *h;
};

struct live {
	/* the queue: slots [head, tail) are the analysis's, the loop fills
	 * tail; head is written by the analysis, tail by the loop */
	pthread_t th;
	sem_t more, room; /* batches queued; slots free besides the loop's */
	struct batch q[SLOTS];
	uint64_t head, tail;
	uint64_t filling_ns; /* when the loop's batch got its first record */
	/* the loop's own */
	bool started, use_idle, urgent;
	int off_targets; /* the analysis's CPUs, none of the targets' (0: any) */
	uint64_t waits, raised;
	/* the analysis thread's own */
	struct kpath *kp;
	int src;
	struct intern *in;
	bool names_said; /* the names' bound was reached */
	struct pbuf pb;
	struct flight *fl;
	/* the reorder buffer: records held, and their order */
	uint8_t *buf, *buf2; /* buf2: the spare release() copies into */
	size_t nbuf, capbuf, capbuf2;
	size_t nheld; /* bytes of the records held, in buf and the batch */
	struct held_rec *ix, *tmp;
	uint32_t nix, capix;
	uint64_t released;
	/* verdicts of requests wanted, waiting for their request */
	struct verdict {
		uint64_t start, end;
		unsigned v;
	} *vq;
	uint32_t vhead, nvq, capvq;
	struct engine *win;
	uint64_t win_start;
	time_t win_wall;
	uint64_t win_seen, win_profiled; /* the counts when it began */
	uint32_t windows;
};

/* --- records in time order ------------------------------------------------- */

static int grow_buf(uint8_t **p, size_t *cap, size_t need)
{
	size_t c = *cap ? *cap : BATCH_BYTES + (64 << 10);
	uint8_t *n;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	n = realloc(*p, c);
	if (!n)
		return -ENOMEM;
	*p = n;
	*cap = c;
	return 0;
}

/* A batch's records join the ones held, where they are (only those not
 * released are copied, by keep_from) */
static int hold(struct live *l, const struct batch *b)
{
	if (!b->len) /* a quiet 10 ms: its buffer may never have been made */
		return 0;
	for (size_t o = 0; o < b->len;) {
		const struct cp_hdr *h = (const void *)(b->buf + o);

		if (grow_array((void **)&l->ix, &l->capix, l->nix + 1, sizeof(*l->ix), 4096))
			return -ENOMEM;
		l->ix[l->nix++] = (struct held_rec){h->ts, h};
		o += h->size;
	}
	l->nheld += b->len;
	return 0;
}

/* The held records sorted by time: a natural merge of the runs (one per
 * CPU's ring and drain). */
static int order(struct live *l)
{
	uint32_t n = l->nix;
	struct held_rec *src = l->ix, *dst;

	if (n < 2)
		return 0;
	dst = realloc(l->tmp, l->capix * sizeof(*dst));
	if (!dst)
		return -ENOMEM;
	l->tmp = dst;
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
	if (src != l->ix) {
		l->tmp = l->ix;
		l->ix = src;
	}
	return 0;
}

/* The records still held from k on move to the spare buffer, which becomes
 * the buffer. */
static int keep_from(struct live *l, uint32_t k)
{
	size_t o = 0, c;
	uint8_t *t;

	if (k == l->nix) {
		l->nix = 0;
		l->nbuf = l->nheld = 0;
		return 0;
	}
	if (grow_buf(&l->buf2, &l->capbuf2, l->nheld))
		return -ENOMEM;
	for (uint32_t i = k; i < l->nix; i++) {
		const struct cp_hdr *h = l->ix[i].h;

		memcpy(l->buf2 + o, h, h->size);
		l->ix[i - k] = (struct held_rec){h->ts, (const struct cp_hdr *)(l->buf2 + o)};
		o += h->size;
	}
	t = l->buf;
	l->buf = l->buf2;
	l->buf2 = t;
	c = l->capbuf;
	l->capbuf = l->capbuf2;
	l->capbuf2 = c;
	l->nbuf = l->nheld = o;
	l->nix -= k;
	return 0;
}

/* Records up to cut go to the analysis, in time order */
static int release(struct agent *a, uint64_t cut)
{
	struct live *l = a->live;
	uint32_t k = 0;
	int err = order(l);

	if (err)
		return err;
	while (k < l->nix && l->ix[k].ts <= cut) {
		const struct cp_hdr *h = l->ix[k].h;

		if (h->type < CP_MD_PROCESS && h->ts < l->released)
			cnt_add(a->late, 1);
		if (l->fl && (err = flight__add(l->fl, h)))
			return err;
		err = kpath__add(l->kp, (uint32_t)l->src, h);
		if (err)
			return err;
		if (h->type < CP_MD_PROCESS && h->ts > l->released)
			l->released = h->ts;
		k++;
	}
	return keep_from(l, k); /* the batch's records kept go to the buffer */
}

/* --- requests -------------------------------------------------------------- */

static const char *sink_intern(void *ctx, const char *s)
{
	struct agent *a = ctx;

	return intern__get(a->live->in, s);
}

static void sink_warn(void *ctx, const char *msg)
{
	cp_warn(CMD, "%s", msg);
}

/* A file not written: said once for each kind of failure (what it was, the
 * error), every one counted (the status lines) */
static void unwritten(struct agent *a, enum agent_file what, const char *path, int err)
{
	cnt_add(a->unwritten, 1);
	for (unsigned i = 0; i < a->nsaid; i++)
		if (a->said[i].what == what && a->said[i].err == err)
			return;
	if (a->nsaid < AGENT_SAID_MAX)
		a->said[a->nsaid++] = (struct agent_said){what, err};
	cp_error(CMD, "%s not written: %s (the next %s failing so are only counted)", path,
		 strerror(-err), what == AG_FILE_FLIGHT ? "flight recordings" : "profile files");
}

static void flight_dump(struct agent *a, const struct cp_request *h)
{
	char path[PATH_MAX];
	uint64_t lost = __atomic_load_n(&a->s->r->lost, __ATOMIC_RELAXED);
	int err = flight__dump(a->live->fl, h->end_ns, lost, path, sizeof(path));

	if (err)
		unwritten(a, AG_FILE_FLIGHT, path, err);
	else if (path[0] && !a->s->o.quiet)
		cp_error(CMD, "slow %s %s: the last seconds in %s", h->service, h->name, path);
}

/* A random number in [0, 1) */
static double rnd_unit(struct agent *a)
{
	uint64_t x = (a->rng += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return (double)((x ^ (x >> 31)) >> 11) / 9007199254740992.0;
}

static bool sink_want(void *ctx, const struct cp_request *h)
{
	struct agent *a = ctx;
	struct live *l = a->live;
	unsigned v;

	cnt_add(a->seen, 1);
	if (!l->names_said && h->name && h->name[0] == '(' && !strcmp(h->name, CP_OTHER_NAMES)) {
		l->names_said = true;
		cp_warn(CMD, "more than %u distinct request names: new ones are counted as "
			CP_OTHER_NAMES " (--max-names)", a->max_names);
	}
	v = trigger__judge(a->tr, h, h->end_ns);
	if (!a->include_optin && (v & AG_OPTIN))
		v &= ~(unsigned)AG_PROFILE;
	cnt_add(a->slow, !!(v & AG_SLOW));
	cnt_add(a->sampled, !!(v & AG_SAMPLED));
	cnt_add(a->optin, !!(v & AG_OPTIN));
	cnt_add(a->optin_refused, !!(v & AG_OPTIN_REFUSED));
	v &= ~(unsigned)AG_OPTIN_REFUSED;
	if ((v & AG_SLOW) && l->fl)
		flight_dump(a, h);
	if (!a->ex)
		v &= AG_PROFILE; /* nowhere to export to */
	if (!a->out_dir)
		v &= ~(unsigned)AG_PROFILE;
	/* ClickHouse behind: the newest requests left out before their walk,
	 * so a store that cannot keep up costs no more than what it takes */
	if (a->store && (a->store_rate >= 1 || rnd_unit(a) < a->store_rate)) {
		if (ch_writer__full(a->store))
			ch_writer__skip(a->store);
		else
			v |= AG_STORE;
	}
	if (!v)
		return false;
	if (grow_array((void **)&l->vq, &l->capvq, l->nvq + 1, sizeof(*l->vq), 64))
		return false;
	/* verdicts handed out leave the queue */
	if (l->vhead && l->vhead >= l->nvq / 2) {
		memmove(l->vq, l->vq + l->vhead, (l->nvq - l->vhead) * sizeof(*l->vq));
		l->nvq -= l->vhead;
		l->vhead = 0;
	}
	l->vq[l->nvq++] = (struct verdict){h->start_ns, h->end_ns, v};
	cnt_add(a->walked, 1);
	return true;
}

static unsigned verdict_of(struct live *l, const struct cp_request *r)
{
	while (l->vhead < l->nvq) {
		struct verdict *q = &l->vq[l->vhead];

		if (q->start == r->start_ns && q->end == r->end_ns)
			return q->v; /* pipelined requests share one */
		l->vhead++;
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

static void export(struct agent *a, const struct cp_request *r, unsigned v)
{
	struct live *l = a->live;
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
	l->pb.n = 0;
	l->pb.err = false;
	if (!otlp__encode_request(&l->pb, r, &a->res, v, rnd)) {
		exporter__push(a->ex, l->pb.p, l->pb.n);
		cnt_add(a->exported, 1);
	}
}

static int sink_request(void *ctx, const struct cp_request *r)
{
	struct agent *a = ctx;
	struct live *l = a->live;
	unsigned v = verdict_of(l, r);

	if (v & (AG_SLOW | AG_SAMPLED | AG_OPTIN))
		export(a, r, v);
	if (v & AG_STORE) /* a failure is counted by the writer */
		ch_writer__add(a->store, r, NULL, a->s->info.boot_id);
	if ((v & AG_PROFILE) && l->win) {
		struct cp_request c = *r;

		c.interned = false; /* the window's engine keeps its own copies */
		/* a downstream request is in its caller's path, not a sample */
		if (engine__add_request(l->win, &c) > 0 && !r->downstream)
			cnt_add(a->profiled, 1);
	}
	return 0;
}

/* --- profile windows ------------------------------------------------------- */

static void count_row(void *ctx, const struct trigger_count *c)
{
	struct jw *w = ctx;

	jw__map_open(w);
	jw__key(w, "service");
	jw__str(w, c->service);
	jw__key(w, "name");
	jw__str(w, c->name);
	jw__key(w, "requests");
	jw__int(w, (int64_t)c->requests);
	jw__key(w, "p50_ns");
	jw__int(w, (int64_t)c->p50_ns);
	jw__key(w, "p90_ns");
	jw__int(w, (int64_t)c->p90_ns);
	jw__key(w, "p99_ns");
	jw__int(w, (int64_t)c->p99_ns);
	jw__key(w, "max_ns");
	jw__int(w, (int64_t)c->max_ns);
	jw__map_close(w);
}

static void jw__time(struct jw *w, const char *key, time_t t)
{
	char buf[32];
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	jw__key(w, key);
	jw__str(w, buf);
}

/* The window's counts: every request seen, per service and name, and what
 * the profile is a sample of */
static int counts_write(struct agent *a, FILE *f, time_t now)
{
	struct live *l = a->live;
	struct jw w;

	if (jw__init(&w, f, 0))
		return -ENOMEM;
	yajl_gen_config(w.g, yajl_gen_beautify, 1);
	jw__map_open(&w);
	jw__time(&w, "start", l->win_wall);
	jw__time(&w, "end", now);
	jw__key(&w, "requests");
	jw__int(&w, (int64_t)(cnt_get(a->seen) - l->win_seen));
	jw__key(&w, "profile_sample_rate");
	yajl_gen_double(w.g, a->profile_rate);
	jw__key(&w, "profiled");
	jw__int(&w, (int64_t)(cnt_get(a->profiled) - l->win_profiled));
	jw__key(&w, "profile_has_opt_in");
	jw__bool(&w, a->include_optin);
	jw__key(&w, "names");
	jw__arr_open(&w);
	trigger__window_each(a->tr, count_row, &w);
	jw__arr_close(&w);
	jw__map_close(&w);
	return jw__finish(&w);
}

enum window_part { WIN_JSON, WIN_PPROF, WIN_COUNTS };

/* One file of the window, whole under its name or not there at all */
static void window_part(struct agent *a, const char *stamp, enum window_part p, time_t now)
{
	static const char *const ext[] = {".json", ".pb.gz", ".counts.json"};
	const struct engine_result *res = engine__result(a->live->win);
	struct out_opts oo = {.top = 20};
	char name[NAME_MAX], path[PATH_MAX];
	struct outfile o;
	FILE *f;
	int err;

	snprintf(name, sizeof(name), "profile-%s%s", stamp, ext[p]);
	err = outfile__create(&o, a->out_fd, name);
	if (!err) {
		f = outfile__stream(&o);
		if (!f)
			err = -ENOMEM;
		else if (p == WIN_JSON)
			err = out_json(f, res, &oo);
		else if (p == WIN_PPROF)
			err = out_pprof(f, res, &oo);
		else
			err = counts_write(a, f, now);
		err = outfile__close(&o, err);
	}
	if (err) {
		snprintf(path, sizeof(path), "%s/%s", a->out_dir, name);
		unwritten(a, AG_FILE_PROFILE, path, err);
	}
}

static void window_write(struct agent *a)
{
	struct live *l = a->live;
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	/* two windows can end in one second (the last one at exit) */
	snprintf(stamp + strlen(stamp), sizeof(stamp) - strlen(stamp), "-%04u", l->windows);
	if (engine__result(l->win)) {
		window_part(a, stamp, WIN_JSON, now);
		window_part(a, stamp, WIN_PPROF, now);
	}
	window_part(a, stamp, WIN_COUNTS, now);
}

/* The window's profile written (if any), the next one begun unless last */
static void window_close(struct agent *a, bool last)
{
	struct live *l = a->live;
	struct engine_opts eo = {0};

	if (!a->out_dir)
		return;
	if (l->win) {
		window_write(a);
		engine__free(l->win);
		l->win = NULL;
		l->windows++;
	}
	if (last)
		return;
	malloc_trim(0); /* what the last minute freed goes back to the system */
	l->win = engine__new(&eo);
	if (l->win)
		engine__set_quiet(l->win, true);
	l->win_start = clock__mono_ns();
	l->win_wall = time(NULL);
	l->win_seen = cnt_get(a->seen);
	l->win_profiled = cnt_get(a->profiled);
}

/* --- the thread ------------------------------------------------------------ */

/* One batch analysed; the analysis's first error stops it (later batches
 * are only counted off). */
static int analyse(struct agent *a, const struct batch *b)
{
	struct live *l = a->live;
	int err = hold(l, b);

	if (!err)
		err = release(a, b->cut);
	if (!err && !b->last)
		err = kpath__advance(l->kp, (uint32_t)l->src, b->cut);
	if (!err && b->last)
		err = kpath__flush(l->kp);
	if (a->out_dir && (b->last || clock__mono_ns() - l->win_start >= a->every_ns))
		window_close(a, b->last);
	return err;
}

static void *run(void *arg)
{
	struct agent *a = arg;
	struct live *l = a->live;
	int err = 0;

	for (;;) {
		uint64_t h = __atomic_load_n(&l->head, __ATOMIC_RELAXED);
		struct batch *b = &l->q[h % SLOTS];
		bool last;

		while (sem_wait(&l->more) && errno == EINTR)
			;
		if (!err && (err = analyse(a, b)))
			__atomic_store_n(&a->err, err, __ATOMIC_RELEASE);
		last = b->last;
		__atomic_store_n(&l->head, h + 1, __ATOMIC_RELEASE);
		sem_post(&l->room);
		if (last)
			return NULL;
	}
}

/* SCHED_IDLE while the analysis keeps up (the loop's thread only) */
static void set_urgent(struct live *l, bool on, bool count)
{
	struct sched_param sp = {0};

	if (l->urgent == on)
		return;
	l->urgent = on;
	l->raised += on && count;
	if (l->use_idle && pthread_setschedparam(l->th, on ? SCHED_OTHER : SCHED_IDLE, &sp))
		l->use_idle = false;
}

int live__tap(void *ctx, const struct cp_hdr *rec)
{
	struct live *l = ((struct agent *)ctx)->live;
	struct batch *b = &l->q[l->tail % SLOTS];

	if (grow_buf(&b->buf, &b->cap, b->len + rec->size))
		return -ENOMEM;
	memcpy(b->buf + b->len, rec, rec->size);
	b->len += rec->size;
	return 0;
}

/* The loop's batch goes to the analysis; the next slot is taken, waited
 * for when every one is queued. */
static void post(struct live *l, uint64_t cut, bool last)
{
	struct batch *b = &l->q[l->tail % SLOTS];
	uint64_t now = clock__mono_ns(), head, queued;

	b->cut = cut;
	b->last = last;
	b->posted_ns = now;
	__atomic_store_n(&l->tail, l->tail + 1, __ATOMIC_RELEASE);
	sem_post(&l->more);
	head = __atomic_load_n(&l->head, __ATOMIC_ACQUIRE);
	queued = l->tail - head;
	if (last || queued >= URGENT_SLOTS ||
	    (queued && now - l->q[head % SLOTS].posted_ns > URGENT_NS))
		set_urgent(l, true, !last); /* the end is not falling behind */
	else if (queued <= 1)
		set_urgent(l, false, false);
	if (last)
		return;
	if (sem_trywait(&l->room)) {
		set_urgent(l, true, true);
		l->waits++;
		while (sem_wait(&l->room) && errno == EINTR)
			;
	}
	b = &l->q[l->tail % SLOTS]; /* free: the analysis is done with it */
	b->len = 0;
	if (b->cap > KEEP_CAP) {
		free(b->buf);
		b->buf = NULL;
		b->cap = 0;
	}
}

void live__post(struct agent *a, uint64_t cut)
{
	struct live *l = a->live;
	const struct batch *b = &l->q[l->tail % SLOTS];
	uint64_t now = clock__mono_ns();

	if (!l->filling_ns)
		l->filling_ns = now;
	if (b->len < BATCH_BYTES && now - l->filling_ns < BATCH_NS)
		return;
	post(l, cut, false);
	l->filling_ns = 0;
}

/* The CPUs this process may use that none of the targets' threads may: the
 * analysis runs there when there are any (servers pinned to some CPUs), off
 * the servers' CPUs entirely, besides at SCHED_IDLE. */
static bool cpus_off_targets(struct agent *a, cpu_set_t *off)
{
	const struct recorder *r = a->s->r;
	cpu_set_t on, t;
	char path[64];
	int n = 0;

	CPU_ZERO(&on);
	for (int i = 0; i < r->ntargets; i++) {
		struct dirent *d;
		DIR *dir;

		if (r->targets[i].dead)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task", r->targets[i].pid);
		if (!(dir = opendir(path)))
			continue; /* gone */
		while ((d = readdir(dir)))
			if (d->d_name[0] != '.' && !sched_getaffinity(atoi(d->d_name), sizeof(t), &t)) {
				CPU_OR(&on, &on, &t);
				n++;
			}
		closedir(dir);
	}
	if (!n || sched_getaffinity(0, sizeof(*off), off))
		return false;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &on))
			CPU_CLR(c, off);
	return CPU_COUNT(off) > 0;
}

int live__start(struct agent *a)
{
	struct cp_sink sink = {
	    .request = sink_request,
	    .warn = sink_warn,
	    .ctx = a,
	    .intern = sink_intern,
	    .want = sink_want,
	    .max_names = a->max_names,
	};
	struct sched_param sp = {0};
	struct live *l = calloc(1, sizeof(*l));
	cpu_set_t cpus;
	sigset_t all, old;
	int err;

	if (!l)
		return -ENOMEM;
	a->live = l;
	sem_init(&l->more, 0, 0);
	sem_init(&l->room, 0, SLOTS - 1);
	/* a fixed threshold (glibc raises it as big blocks are freed): batches
	 * and grown buffers are mapped, and unmapped when freed, whichever
	 * thread frees them */
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	l->in = intern__new();
	l->kp = l->in ? kpath__new(&sink) : NULL;
	if (!l->kp)
		return -ENOMEM;
	l->src = kpath__add_source(l->kp, a->s->info.host, &a->s->info, false);
	if (l->src < 0)
		return l->src;
	if (a->flo.dir && !(l->fl = flight__new(&a->flo, &a->s->info)))
		return -ENOMEM;
	if (a->out_dir)
		window_close(a, false);
	/* signals stay with the loop's thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&l->th, NULL, run, a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return err;
	l->started = true;
	if (cpus_off_targets(a, &cpus) && !pthread_setaffinity_np(l->th, sizeof(cpus), &cpus))
		l->off_targets = CPU_COUNT(&cpus);
	/* the agent runs as root: it can leave SCHED_IDLE again */
	l->use_idle = !pthread_setschedparam(l->th, SCHED_IDLE, &sp);
	return 0;
}

int live__finish(struct agent *a)
{
	struct live *l = a->live;

	if (!l || !l->started)
		return 0;
	post(l, UINT64_MAX, true);
	pthread_join(l->th, NULL);
	l->started = false;
	return __atomic_load_n(&a->err, __ATOMIC_ACQUIRE);
}

bool live__flight_stats(struct agent *a, struct flight_stats *st)
{
	if (!a->live || !a->live->fl)
		return false;
	flight__stats(a->live->fl, st);
	return true;
}

void live__queue_stats(struct agent *a, uint64_t *waits, uint64_t *raised)
{
	struct live *l = a->live;

	*waits = l->waits;
	*raised = l->raised;
}

void live__free(struct agent *a)
{
	struct live *l = a->live;

	if (!l)
		return;
	live__finish(a); /* a thread started and never finished */
	if (l->kp)
		kpath__free(l->kp);
	engine__free(l->win);
	flight__free(l->fl);
	intern__free(l->in);
	for (unsigned i = 0; i < SLOTS; i++)
		free(l->q[i].buf);
	free(l->buf);
	free(l->buf2);
	free(l->ix);
	free(l->tmp);
	free(l->vq);
	pbuf__free(&l->pb);
	sem_destroy(&l->more);
	sem_destroy(&l->room);
	free(l);
	a->live = NULL;
}
