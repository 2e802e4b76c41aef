// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * critpath record: the CLI and the main loop. Open → configure → load →
 * attach (record/hooks.c), then the ring buffer is drained into the
 * recording writer; every ~100 ms the drop counters become loss records,
 * dead groups leave the target map and new processes get their metadata;
 * every second the writer flushes, so a killed recorder leaves a readable
 * file. Frames are compressed and written by the writer's own thread, in
 * idle time while it keeps up (recording_writer__background): this loop only
 * copies records, so it never holds a CPU for the milliseconds a frame takes.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "proto_redact.h"
#include "record_int.h"

#define TICK_MS 100
#define POLL_MS 10 /* the ring buffer wakes us only when filling up */
/* a target without libssl is looked at again after 1 s, then 2, 4, … 32 */
#define TLS_AGAIN_NS 1000000000ull
#define TLS_AGAIN_MAX_NS 32000000000ull
#define FLUSH_NS 1000000000ull
#define MAX_TARGETS REC_MAX_TARGETS
/* Full frames waiting for the compression thread: 16 × ~576 KiB of memory,
 * ~0.3 s of a 30 MB/s event stream before the queue holds the loop up. */
#define WRITER_QUEUE_FRAMES 16

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

struct target {
	pid_t pid;
	bool top;	/* named on the command line (or the launched command) */
	uint8_t dead;	/* 1: group exited, 2: removed from the target map */
	bool need_meta; /* named on the command line: metadata at the next tick */
	bool need_tls;	/* new, or exec'd: look for libssl at the next tick */
	/* libssl can come later (dlopen: Python's ssl module): looked for
	 * again at tls_again, each time twice as long after */
	uint64_t tls_again, tls_every;
	uint32_t ppid;	/* who forked it (0: not seen): its exec record does not say */
	bool tls_on; /* its TLS capture attached at its last look */
	/* a fork of a process with TLS capture, gone before its own attach
	 * (and not exec'd since): said once every record up to its exit has
	 * been read (tls_gap_say), with its fork's and exit's times */
	bool tls_gap;
	uint64_t forked, exited;
};

struct recorder {
	struct recording_writer *w;
	struct rec_bpf *bpf;
	const char *out;
	struct target targets[MAX_TARGETS];
	int ntargets;
	uint64_t events, metadata, lost;
	/* records read after a write failed, and records the writer had that
	 * never reached the file: lost too */
	uint64_t unwritten;
	uint64_t inferred; /* switch-ins the kernel did not report (CP_SW_INFERRED) */
	uint64_t *drops_seen;
	int ncpus;
	uint64_t last_check;
	int write_err; /* first writer error: recording stops */
	bool quiet;
	pid_t child;	  /* -- CMD: the launched process */
	int child_status; /* its wait status once reaped */
	bool child_exec;  /* it reached exec */
	struct rec_tls *tls;
	struct redact *redact; /* what records must not keep (proto_redact.h) */
	/* Records of a drain pass taken in time order after it: the rings are
	 * per CPU and drained one after the other, so a child's exec on one
	 * CPU can come before its fork on another, and a connection's transfer
	 * before the one it follows. fork, exec and exit records (on_life),
	 * and the sockets' transfers and closes, which the redaction follows
	 * (an HTTP/2 connection frame by frame: proto_redact.h). */
	struct held {
		char *buf;
		size_t n, cap;
	} life, socks;
};


static struct target *target__find(struct recorder *r, pid_t pid)
{
	for (int i = 0; i < r->ntargets; i++)
		if (r->targets[i].pid == pid)
			return &r->targets[i];
	return NULL;
}

static void tls_gap_say(struct recorder *r, struct target *t, uint64_t ts);

static struct target *target__add(struct recorder *r, pid_t pid, bool top)
{
	struct target *t = target__find(r, pid);

	if (t && !t->dead)
		return t;
	/* a pid given out again takes its old slot: a new process (and, if
	 * the tick has not taken the old one out of the map yet, it won't) */
	if (!t && r->ntargets < MAX_TARGETS)
		t = &r->targets[r->ntargets++];
	/* a fork-heavy target: the slot of a group already out of the map,
	 * else its children's pids would stay in the map after they exit,
	 * for whatever process gets them next */
	for (int i = 0; i < r->ntargets && !t; i++)
		if (r->targets[i].dead == 2)
			t = &r->targets[i];
	if (!t)
		return NULL;
	tls_gap_say(r, t, rec_meta__now()); /* what the slot's last process left unsaid */
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->top = top;
	t->need_meta = t->need_tls = true;
	return t;
}

static int live_targets(const struct recorder *r)
{
	int n = 0;

	for (int i = 0; i < r->ntargets; i++)
		n += !r->targets[i].dead;
	return n;
}

static void write_error(struct recorder *r, int err)
{
	if (r->write_err)
		return;
	r->write_err = err;
	if (err == -ENOSPC)
		fprintf(stderr,
			"critpath record: %s: disk full (ENOSPC); the recording is readable up "
			"to the last frame written\n",
			r->out);
	else
		fprintf(stderr, "critpath record: %s: write failed: %s\n", r->out, strerror(-err));
}

static int append(struct recorder *r, const struct cp_hdr *h)
{
	int err;

	if (r->write_err)
		return r->write_err;
	err = recording_writer__append(r->w, h);
	if (err)
		write_error(r, err);
	return err;
}

/* exit_code is the kernel's wait status: a signal in the low 7 bits. */
static void say_exited(pid_t pid, int32_t exit_code)
{
	if (exit_code & 0x7f)
		fprintf(stderr, "critpath record: target %d killed by signal %d\n", pid,
			exit_code & 0x7f);
	else
		fprintf(stderr, "critpath record: target %d exited (exit code %d)\n", pid,
			(exit_code >> 8) & 0xff);
}

/*
 * Metadata of a process that just forked or exec'd, read from /proc now
 * rather than at the next tick: a child that runs for a few milliseconds is
 * gone by then, and the recording would not name it. Stamped with the
 * event's time, so it comes right after it in time order. What /proc no
 * longer has (exited, or a zombie without exe) comes from the event.
 */
static void meta_now(struct recorder *r, pid_t pid, uint64_t ts, const struct rec_meta_seen *seen)
{
	int err;

	if (r->write_err)
		return;
	err = rec_meta__process(r->w, pid, ts, seen);
	if (err && err != -ESRCH)
		write_error(r, err);
}

/* Looks for libssl in t at ts (both CLOCK_MONOTONIC), and when to look
 * again: 1 s after a new process or an exec, twice as long after each look
 * since, up to TLS_AGAIN_MAX_NS (a library dlopen'd later). -ESRCH: t is
 * gone. */
static int tls_look(struct recorder *r, struct target *t, uint64_t ts)
{
	int err;

	if (t->need_tls || !t->tls_every)
		t->tls_every = TLS_AGAIN_NS;
	else if (t->tls_every < TLS_AGAIN_MAX_NS)
		t->tls_every *= 2;
	t->tls_again = ts + t->tls_every;
	t->need_tls = false;
	err = rec_tls__scan(r->tls, r->bpf, t->pid, r->w, ts, &r->metadata);
	if (err && err != -ESRCH)
		write_error(r, err);
	t->tls_on = rec_tls__on(r->tls, t->pid);
	return err;
}

/* A fork of a TLS process that exited before its own uprobes were attached
 * (tls_gap): a hook record saying so, at ts. Its exec clears tls_gap, and
 * the records of a child are read in time order but can come after the
 * tick has seen it gone, so this waits for the end of the recording, or
 * for its target slot to be taken by another process. */
static void tls_gap_say(struct recorder *r, struct target *t, uint64_t ts)
{
	int err;

	if (!t->tls_gap || r->write_err)
		return;
	t->tls_gap = false;
	err = rec_tls__missed(r->tls, r->w, t->pid, t->forked, t->exited, ts, &r->metadata);
	if (err)
		write_error(r, err);
}

/* Follows one fork, exec or exit record (len: its size). */
static void on_life(struct recorder *r, const struct cp_hdr *h, size_t len)
{
	struct target *t;

	switch (h->type) {
	case CP_EV_PROCESS_FORK: {
		const struct cp_ev_process_fork *f = (const void *)h;

		if (f->child_pid != f->parent_pid) {
			struct target *parent;
			bool parent_tls;
			char comm[CP_COMM_LEN + 1] = "";
			struct rec_meta_seen seen = {f->child_tid, f->parent_pid, comm, NULL};

			memcpy(comm, f->child_comm, CP_COMM_LEN);
			/* the parent's state as it was: it may have exited since
			 * (and been forgotten by the tick), its slot taken next */
			parent = target__find(r, f->parent_pid);
			parent_tls = parent && parent->tls_on;
			t = target__add(r, f->child_pid, false);
			if (t) {
				t->need_meta = false;
				t->ppid = f->parent_pid;
			}
			meta_now(r, f->child_pid, h->ts, &seen);
			/* a fork maps what its parent maps: TLS capture from its
			 * first requests (a pre-fork server's workers), not from
			 * the next tick; an exec is left to the tick, whose
			 * loader has mapped libssl by then */
			if (t && ((pid_t)f->parent_pid != r->child || r->child_exec) && !r->write_err &&
			    tls_look(r, t, h->ts) == -ESRCH && parent_tls) {
				t->tls_gap = true;
				t->forked = h->ts;
			}
		} else {
			struct cp_md_thread m = {};

			/* a new thread: its name now (it may rename itself later) */
			m.h.type = CP_MD_THREAD;
			m.h.size = sizeof(m);
			m.h.pid = f->child_pid;
			m.h.tid = f->child_tid;
			m.h.ts = h->ts;
			memcpy(m.comm, f->child_comm, CP_COMM_LEN);
			if (!append(r, &m.h))
				r->metadata++;
		}
		break;
	}
	case CP_EV_PROCESS_EXEC: {
		const struct cp_ev_process_exec *x = (const void *)h;
		size_t max = len > offsetof(struct cp_ev_process_exec, filename)
				 ? len - offsetof(struct cp_ev_process_exec, filename)
				 : 0;
		char exe[CP_FILENAME_MAX + 1], *base;
		struct rec_meta_seen seen = {(pid_t)h->tid, 0, NULL, exe};

		if (h->pid == (uint32_t)r->child)
			r->child_exec = true;
		snprintf(exe, sizeof(exe), "%.*s", (int)strnlen(x->filename, max), x->filename);
		/* the kernel names the task after the file it exec'd */
		base = strrchr(exe, '/');
		seen.comm = base ? base + 1 : exe;
		t = target__find(r, h->pid);
		if (t) {
			t->need_meta = false;
			t->need_tls = true;
			t->tls_gap = false; /* another program: its own libraries */
			seen.ppid = t->ppid;
		}
		meta_now(r, h->pid, h->ts, &seen);
		break;
	}
	case CP_EV_PROCESS_EXIT: {
		const struct cp_ev_process_exit *x = (const void *)h;

		t = target__find(r, h->pid);
		if (x->group_dead && t)
			t->exited = h->ts; /* the tick may have seen it gone already */
		if (x->group_dead && t && !t->dead) {
			t->dead = 1;
			if (t->top && !r->quiet && t->pid != r->child)
				say_exited(t->pid, x->exit_code);
		}
		break;
	}
	}
}

static int held_cmp(const void *a, const void *b)
{
	const struct cp_hdr *x = *(const struct cp_hdr *const *)a;
	const struct cp_hdr *y = *(const struct cp_hdr *const *)b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x < y ? -1 : x > y; /* as drained */
}

/* A copy of record h (len bytes) kept until the end of the pass. */
static int hold(struct held *q, const struct cp_hdr *h, size_t len)
{
	size_t size = CP_ALIGN(len);

	if (q->n + size > q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 4096;
		char *p;

		while (cap < q->n + size)
			cap *= 2;
		p = realloc(q->buf, cap);
		if (!p)
			return -ENOMEM;
		q->buf = p;
		q->cap = cap;
	}
	memcpy(q->buf + q->n, h, len);
	memset(q->buf + q->n + len, 0, size - len);
	((struct cp_hdr *)(q->buf + q->n))->size = (uint16_t)size;
	q->n += size;
	return 0;
}

/* The records held that are older than before (all of them: UINT64_MAX), to
 * fn in time order; the others stay for the next pass. */
static void held_follow(struct recorder *r, struct held *q,
			void (*fn)(struct recorder *r, const struct cp_hdr *h), uint64_t before)
{
	const struct cp_hdr **order;
	size_t n = 0, k = 0, kept = 0;


	if (!q->n)
		return;
	for (size_t off = 0; off < q->n; off += ((const struct cp_hdr *)(q->buf + off))->size)
		n++;
	order = malloc(n * sizeof(*order));
	if (!order) {
		write_error(r, -ENOMEM);
		r->unwritten += n;
		q->n = 0;
		return;
	}
	n = 0;
	for (size_t off = 0; off < q->n; off += ((const struct cp_hdr *)(q->buf + off))->size)
		order[n++] = (const struct cp_hdr *)(q->buf + off);
	qsort(order, n, sizeof(*order), held_cmp);
	for (; k < n && order[k]->ts < before; k++)
		fn(r, order[k]);
	free(order);
	/* the rest to the front, in the order they came (each moves down) */
	for (size_t off = 0, size; off < q->n; off += size) {
		const struct cp_hdr *h = (const struct cp_hdr *)(q->buf + off);

		size = h->size;
		if (h->ts < before)
			continue;
		memmove(q->buf + kept, h, size);
		kept += size;
	}
	q->n = kept;
}

static void on_life_rec(struct recorder *r, const struct cp_hdr *h)
{
	on_life(r, h, h->size);
}

/* A socket's transfer or close, redacted and written. */
static void on_sock_rec(struct recorder *r, const struct cp_hdr *h)
{
	if (r->write_err) {
		r->unwritten++;
		return;
	}
	/* the held copy is the recorder's own: rewritten where it is */
	if (redact__in_place(r->redact, (struct cp_hdr *)h))
		write_error(r, -ENOMEM);
	else if (!append(r, h))
		r->events++;
}

/* Ring buffer callback: store the record; lifecycle records are followed
 * after the pass (held_follow), and HTTP/2 records are redacted and stored
 * after it. */
static int on_event(void *ctx, const struct cp_hdr *h, size_t len)
{
	struct recorder *r = ctx;

	if (r->write_err) { /* the ring drained at the end, counted */
		r->unwritten++;
		return 0;
	}
	if (redact__looks_at(r->redact, h)) {
		if (hold(&r->socks, h, len)) {
			write_error(r, -ENOMEM);
			return -1;
		}
		return 0;
	}
	if (append(r, h))
		return -1; /* stops the poll: the loop sees write_err */
	r->events++;
	switch (h->type) {
	case CP_EV_SCHED_SWITCH:
		r->inferred += !!(((const struct cp_ev_sched_switch *)h)->flags & CP_SW_INFERRED);
		break;
	case CP_EV_PROCESS_FORK:
	case CP_EV_PROCESS_EXEC:
	case CP_EV_PROCESS_EXIT:
		if (hold(&r->life, h, len)) {
			write_error(r, -ENOMEM);
			return -1;
		}
		break;
	}
	return 0;
}

/* One drain of the rings, its lifecycle records followed in time order. */
/* A record is in the ring it was written to HOLD_NS after its time stamp
 * at the latest (the BPF program's last steps after it took the time). */
#define HOLD_NS (2 * 1000000ull)

/* One drain of the rings. Its lifecycle records are followed in time order;
 * HTTP/2 records are redacted in time order up to where every ring has
 * given all its records (what began before this drain did), the rest in
 * the next (final: all of them). */
static int drain(struct recorder *r, int timeout_ms, bool final)
{
	uint64_t t0 = rec_meta__now();
	int err = rec_bpf__poll(r->bpf, timeout_ms);

	held_follow(r, &r->socks, on_sock_rec, final ? UINT64_MAX : t0 - HOLD_NS);
	held_follow(r, &r->life, on_life_rec, UINT64_MAX);
	return err;
}

static void check_drops(struct recorder *r, uint64_t now)
{
	uint64_t cur[r->ncpus];

	if (rec_bpf__drops(r->bpf, cur, r->ncpus))
		return;
	for (int c = 0; c < r->ncpus; c++) {
		struct cp_md_loss l = {};

		if (cur[c] <= r->drops_seen[c])
			continue;
		l.h.type = CP_MD_LOSS;
		l.h.size = sizeof(l);
		l.h.cpu = c;
		l.h.ts = now;
		l.start_ns = r->last_check;
		l.end_ns = now;
		l.events = cur[c] - r->drops_seen[c];
		r->lost += l.events;
		r->drops_seen[c] = cur[c];
		if (!append(r, &l.h))
			r->metadata++;
	}
	r->last_check = now;
}

/* Per tick: metadata for the processes named on the command line, TLS
 * capture for new and exec'd ones, dead groups out of the map. */
static void tick(struct recorder *r, uint64_t now)
{
	check_drops(r, now);
	for (int i = 0; i < r->ntargets && !r->write_err; i++) {
		struct target *t = &r->targets[i];
		int err;

		if (t->dead) {
			if (t->dead == 1) {
				rec_bpf__forget_target(r->bpf, t->pid);
				rec_tls__forget(r->tls, t->pid);
				t->dead = 2;
			}
			continue;
		}
		if (t->need_meta) {
			t->need_meta = false;
			err = rec_meta__process(r->w, t->pid, now, NULL);
			if (err && err != -ESRCH)
				write_error(r, err);
		}
		/* the launched command maps the recorder's libraries until it
		 * has exec'd */
		if ((t->need_tls || now >= t->tls_again) && (t->pid != r->child || r->child_exec) &&
		    !r->write_err)
			tls_look(r, t, now);
		/* an exit we did not see (lost, or exited between checks) */
		if (!rec_meta__alive(t->pid)) {
			t->dead = 1;
			if (t->top && !r->quiet && t->pid != r->child)
				fprintf(stderr, "critpath record: target %d exited\n", t->pid);
		}
	}
}


/*
 * The processes the targets started before the recording, and theirs:
 * targets too, as the ones they start during it are (sched_process_fork).
 * A server's workers are children of the pid a user has at hand (nginx's
 * pid file names its master); they were left out, and the recording of
 * `-p MASTER` had nothing to report.
 */
static int add_children(struct recorder *r)
{
	struct rec_meta_pp *pp;
	ssize_t n = rec_meta__processes(&pp);
	int added = 0, ntop = r->ntargets;
	char list[96] = "";
	size_t len = 0;

	if (n < 0)
		return (int)n;
	for (int i = 0; i < r->ntargets; i++) { /* grows: children's children too */
		for (ssize_t k = 0; k < n; k++) {
			/* not the recorder itself (critpath record -p $$) */
			if (pp[k].ppid != r->targets[i].pid || pp[k].pid == getpid() ||
			    target__find(r, pp[k].pid))
				continue;
			if (!target__add(r, pp[k].pid, false)) {
				fprintf(stderr,
					"critpath record: more than %d processes under the targets: "
					"process %d and later ones left out\n",
					MAX_TARGETS, pp[k].pid);
				i = r->ntargets;
				break;
			}
			if (len < sizeof(list) - 16)
				len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d",
							added ? ", " : "", pp[k].pid);
			else if (len < sizeof(list) - 1)
				len += (size_t)snprintf(list + len, sizeof(list) - len, ", …");
			added++;
		}
	}
	free(pp);
	if (added && !r->quiet)
		fprintf(stderr,
			"critpath record: with the %d process%s the target%s started before the "
			"recording: %s\n",
			added, added == 1 ? "" : "es", ntop == 1 ? "" : "s", list);
	return 0;
}


/* -- CMD: the child waits on a pipe until the probes are attached. */
static pid_t launch(char **argv, int *go_fd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char c;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(127); /* the recorder gave up */
		execvp(argv[0], argv);
		fprintf(stderr, "critpath record: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[0]);
	*go_fd = p[1];
	return pid;
}

/* --probe in the targets named at the start: their executables, or the
 * launched command's (cmd), which has not been exec'd yet. */
static int attach_probes(struct recorder *r, struct rec_probes *probes, const char *cmd)
{
	char(*exes)[PATH_MAX] = calloc(r->ntargets, sizeof(*exes));
	const char **exe = calloc(r->ntargets, sizeof(*exe));
	pid_t *pids = calloc(r->ntargets, sizeof(*pids));
	int n = 0, err = -ENOMEM;

	if (!exes || !exe || !pids) {
		fprintf(stderr, "critpath record: --probe: out of memory\n");
		goto out;
	}
	for (int i = 0; i < r->ntargets; i++) {
		char link[64];
		ssize_t len;

		if (!r->targets[i].top)
			continue;
		exe[n] = exes[n];
		pids[n] = r->targets[i].pid;
		if (cmd && pids[n] == r->child) {
			if (rec_probes__which(cmd, exes[n], sizeof(exes[n])))
				exes[n][0] = 0; /* execvp will say */
		} else {
			snprintf(link, sizeof(link), "/proc/%d/exe", pids[n]);
			len = readlink(link, exes[n], sizeof(exes[n]) - 1);
			exes[n][len > 0 ? len : 0] = 0;
			/* a replaced executable: the process still maps the old one */
			if (len > 0 && strstr(exes[n], " (deleted)"))
				snprintf(exes[n], sizeof(exes[n]), "%s", link);
		}
		n++;
	}
	err = rec_probes__attach(probes, r->bpf, pids, exe, n, r->quiet);
out:
	free(exes);
	free(exe);
	free(pids);
	return err;
}

static void summary(const struct recorder *r, uint64_t start, uint64_t end, uint64_t bytes)
{
	double secs = (end - start) / 1e9;
	uint64_t md = r->metadata + rec_meta__records();
	uint64_t total = r->events + md;

	fprintf(stderr,
		"critpath record: %.2f s, %llu events, %llu metadata records, %llu bytes written "
		"(%.1f bytes/event), %llu lost events, file %s\n",
		secs, (unsigned long long)r->events, (unsigned long long)md,
		(unsigned long long)bytes, total ? (double)bytes / total : 0.0,
		(unsigned long long)(r->lost + r->unwritten), r->out);
	if (r->unwritten)
		fprintf(stderr,
			"critpath record: %llu records were not written to %s after its write "
			"failed (counted among the lost events); the file ends at its last whole "
			"frame\n",
			(unsigned long long)r->unwritten, r->out);
	if (r->inferred)
		fprintf(stderr,
			"critpath record: %llu switches into target threads were missing from the "
			"kernel's trace and were inferred (dump shows them as inferred)\n",
			(unsigned long long)r->inferred);
	if (r->redact) {
		struct redact_stats rs;

		redact__stats(r->redact, &rs);
		if (rs.values + rs.h1_values + rs.data)
			fprintf(stderr,
				"critpath record: not kept: %llu HTTP/1.x and %llu HTTP/2 header "
				"values, %llu bytes of HTTP/2 DATA (--payload-bytes says what is)\n",
				(unsigned long long)rs.h1_values, (unsigned long long)rs.values,
				(unsigned long long)rs.data);
	}
}

/* The size of the file at path, 0 when it cannot be read. */
static uint64_t file_size(const char *path)
{
	FILE *f = fopen(path, "re");
	long n = 0;

	if (f) {
		fseek(f, 0, SEEK_END);
		n = ftell(f);
		fclose(f);
	}
	return n > 0 ? (uint64_t)n : 0;
}

/* A recording's life, phase by phase (cmd_record): what each made, for
 * the next and for rec_close. */
struct session {
	struct rec_opts o;
	struct recorder *r;
	struct rec_probes *probes;
	struct rec_unlinker *unlink;
	struct rec_meta_host host;
	struct recording_info info;
	uint64_t start, attached, deadline;
	int go_fd; /* -- CMD: written once the probes are in, the child runs */
	bool all_exited;
};

/* Checks that need no BPF (root, the targets alive), the host's facts, and
 * the output: a bad path fails before anything is loaded. 0 or 1. */
static int rec_open(struct session *s)
{
	struct recorder *r = s->r;
	const char *why = rec_meta__missing_privilege();
	int err;

	if (why) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	for (int i = 0; i < s->o.npids; i++) {
		if (!rec_meta__alive(s->o.pids[i])) {
			fprintf(stderr, "critpath record: no process with PID %d\n", s->o.pids[i]);
			return 1;
		}
		target__add(r, s->o.pids[i], true);
	}
	err = add_children(r);
	if (err) {
		fprintf(stderr, "critpath record: cannot list the targets' child processes: %s\n",
			strerror(-err));
		return 1;
	}
	for (int i = 0; i < s->o.nprobes; i++)
		if (rec_probes__add(&s->probes, s->o.probes[i]))
			return 1;
	err = rec_meta__host(&s->host, s->o.argc, s->o.argv);
	if (err) {
		fprintf(stderr, "critpath record: cannot read host facts: %s\n", strerror(-err));
		return 1;
	}
	r->ncpus = s->host.ncpus;
	r->drops_seen = calloc(r->ncpus, sizeof(*r->drops_seen));
	r->redact = redact__new(s->o.bo.payload_bytes);
	if (!r->drops_seen || !r->redact) {
		fprintf(stderr, "critpath record: out of memory\n");
		return 1;
	}
	s->start = rec_meta__now();
	s->info = (struct recording_info){
	    .codec = s->o.codec,
	    .agent_version = CRITPATH_VERSION,
	    .cmdline = s->host.cmdline,
	    .host = s->host.host,
	    .kernel = s->host.kernel,
	    .boot_id = s->host.boot_id,
	    .sku = s->o.sku,
	    .realtime_offset_ns = rec_meta__realtime_offset(),
	    .start_ns = s->start,
	    .payload_bytes = s->o.bo.payload_bytes,
	    .ncpus = s->host.ncpus,
	    .cpus = s->host.cpus,
	};
	err = recording_writer__open(&r->w, r->out, &s->info);
	if (err) {
		fprintf(stderr, "critpath record: cannot create %s: %s\n", r->out, output__why(err));
		return 1;
	}
	/* compression off the loop that drains the ring buffer */
	err = recording_writer__background(r->w, WRITER_QUEUE_FRAMES);
	if (err)
		fprintf(stderr,
			"critpath record: no compression thread (%s): compressing in the "
			"main loop\n",
			strerror(-err));
	return 0;
}

/* The programs loaded, the command started (held until rec_attach), the
 * targets in the map, the ring buffers open. 0 or 1. */
static int rec_load(struct session *s)
{
	struct recorder *r = s->r;
	int err = rec_bpf__open_load(&r->bpf, &s->o.bo);

	if (err)
		return 1;
	err = rec_unlinker__new(&s->unlink);
	if (!err)
		err = rec_tls__new(&r->tls, rec_bpf__tls_off(r->bpf), r->quiet, s->unlink);
	if (err) {
		fprintf(stderr, "critpath record: out of memory\n");
		return 1;
	}
	rec_meta__on_listen(rec_bpf__listen_port, r->bpf);
	if (s->o.cmd) {
		r->child = launch(s->o.cmd, &s->go_fd);
		if (r->child < 0) {
			fprintf(stderr, "critpath record: cannot start %s: %s\n", s->o.cmd[0],
				strerror(-r->child));
			return 1;
		}
		target__add(r, r->child, true);
	}
	for (int i = 0; i < r->ntargets; i++) {
		err = rec_bpf__add_target(r->bpf, r->targets[i].pid);
		if (err) {
			fprintf(stderr, "critpath record: cannot add target %d: %s\n",
				r->targets[i].pid, strerror(-err));
			return 1;
		}
	}
	err = rec_bpf__ring(r->bpf, on_event, r);
	if (err) {
		fprintf(stderr, "critpath record: cannot set up the ring buffer: %s\n",
			strerror(-err));
		return 1;
	}
	return 0;
}

/* TLS uprobes, the programs and --probe attached; the start's metadata
 * written; the command let go. 0 or 1. */
static int rec_attach(struct session *s)
{
	struct recorder *r = s->r;
	struct sigaction sa = {.sa_handler = on_signal};
	int err;

	/* The metadata of the start (hooks, probes, the targets' processes,
	 * threads and sockets) is stamped with the time before the programs
	 * are attached, so it comes before every event in time order: read
	 * after the first events, it would name a server's connection whose
	 * first record is a reply in flight too late to say it is a server's. */
	s->attached = rec_meta__now();
	/* TLS uprobes on the targets first: their first socket records are
	 * then known to be inside SSL_read/SSL_write, where they came ~40 ms
	 * late and a busy HTTPS server's first requests went unnamed */
	for (int i = 0; i < r->ntargets && !r->write_err; i++)
		if (r->targets[i].need_tls && r->targets[i].pid != r->child)
			tls_look(r, &r->targets[i], s->attached);
	if (rec_bpf__attach(r->bpf))
		return 1;
	if (s->probes && attach_probes(r, s->probes, s->o.cmd ? s->o.cmd[0] : NULL))
		return 1;
	/* a closed terminal (SIGHUP) ends it like Ctrl-C: flushed, whole */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	s->start = rec_meta__now();
	r->last_check = s->attached;
	if (s->o.duration > 0)
		s->deadline = s->start + (uint64_t)(s->o.duration * 1e9);
	err = rec_bpf__write_hooks(r->bpf, r->w, s->attached);
	if (!err)
		r->metadata += rec_bpf__nhooks(r->bpf);
	err = err ?: rec_probes__write(s->probes, r->w, s->attached, &r->metadata);
	err = err ?: rec_tls__write_hook(r->tls, r->w, s->attached, &r->metadata);
	if (err)
		write_error(r, err);
	tick(r, s->attached); /* process, thread and socket metadata of the targets */
	if (s->go_fd >= 0) {
		if (write(s->go_fd, "g", 1) != 1)
			fprintf(stderr, "critpath record: cannot start the command\n");
		close(s->go_fd);
		s->go_fd = -1;
	}
	if (!r->quiet)
		fprintf(stderr, "critpath record: recording %d process%s to %s%s\n", r->ntargets,
			r->ntargets == 1 ? "" : "es", r->out,
			s->deadline ? "" : " (Ctrl-C to stop)");
	return 0;
}

/* The child, reaped once it exits. */
static void reap_child(struct recorder *r)
{
	int status;
	struct target *t;

	if (r->child <= 0 || waitpid(r->child, &status, WNOHANG) != r->child)
		return;
	r->child_status = status;
	t = target__find(r, r->child);
	if (t && !t->dead)
		t->dead = 1;
	r->child = -r->child; /* reaped */
}

/* Drains the rings until a signal, the deadline, a write error or every
 * target's exit. */
static void rec_loop(struct session *s)
{
	struct recorder *r = s->r;
	uint64_t now, last_flush = s->start;
	int err;

	while (!stop_signal && !r->write_err) {
		err = drain(r, POLL_MS, false);
		if (err < 0 && err != -EINTR && !r->write_err) {
			fprintf(stderr, "critpath record: reading the ring buffer: %s\n",
				strerror(-err));
			break;
		}
		now = rec_meta__now();
		if (now - r->last_check >= TICK_MS * 1000000ull) {
			reap_child(r);
			tick(r, now);
			if (!live_targets(r)) {
				s->all_exited = true;
				break;
			}
		}
		if (now - last_flush >= FLUSH_NS && !r->write_err) {
			err = recording_writer__flush(r->w);
			if (err)
				write_error(r, err);
			last_flush = now;
		}
		if (s->deadline && now >= s->deadline)
			break;
	}
}

/* What the rings still hold, the drops and the calls still blocked, the
 * trailer, the summary. The exit code. */
static int rec_close(struct session *s)
{
	struct recorder *r = s->r;
	struct recording_totals totals = {};
	uint64_t now, bytes, inflight = 0, unwritten = 0;
	int err;

	/* what is still in the ring buffer (counted as lost after a write
	 * error), then the drops and blocked calls */
	drain(r, 0, true);
	now = rec_meta__now();
	for (int i = 0; i < r->ntargets; i++)
		tls_gap_say(r, &r->targets[i], now);
	if (!r->write_err)
		check_drops(r, now);
	if (!r->write_err) {
		pid_t pids[MAX_TARGETS];
		int n = 0;

		for (int i = 0; i < r->ntargets; i++)
			if (!r->targets[i].dead)
				pids[n++] = r->targets[i].pid;
		err = rec_bpf__write_inflight(r->bpf, r->w, pids, n, &inflight);
		if (err)
			write_error(r, err);
		r->events += inflight;
	}
	if (s->all_exited && !r->quiet)
		fprintf(stderr, "critpath record: all targets exited\n");
	totals.end_ns = now;
	totals.lost = r->lost;
	bytes = recording_writer__bytes(r->w);
	err = recording_writer__close_counted(r->w, &totals, &unwritten);
	r->unwritten += unwritten;
	r->w = NULL;
	if (err)
		write_error(r, err);
	else
		bytes = file_size(r->out); /* the trailer counts too */
	summary(r, s->start, now, bytes);
	rec_tls__summary(r->tls);
	/* the command never ran (it said why): that is a failed recording */
	if (r->child < 0 && !r->child_exec && WIFEXITED(r->child_status) &&
	    WEXITSTATUS(r->child_status) == 127)
		return 1;
	return r->write_err ? 1 : 0;
}

static void session_free(struct session *s)
{
	struct recorder *r = s->r;

	if (s->go_fd >= 0)
		close(s->go_fd); /* the child sees EOF and exits */
	if (r && r->child > 0) {
		kill(r->child, SIGTERM);
		waitpid(r->child, NULL, 0);
	}
	rec_probes__destroy(s->probes, s->unlink);
	if (r) {
		rec_tls__destroy(r->tls);
		rec_unlinker__destroy(s->unlink); /* waits for the last of them, ~0.1 s each */
		rec_bpf__destroy(r->bpf);
		if (r->w)
			recording_writer__close(r->w, NULL);
		free(r->drops_seen);
		free(r->life.buf);
		free(r->socks.buf);
		redact__free(r->redact);
		free(r);
	} else {
		rec_unlinker__destroy(s->unlink);
	}
	rec_meta__host_free(&s->host);
	free(s);
}

/* open -> load -> attach -> loop -> close, as the phases above. */
int cmd_record(int argc, char **argv)
{
	struct session *s = calloc(1, sizeof(*s));
	int ret;

	if (!s || !(s->r = calloc(1, sizeof(*s->r)))) {
		fprintf(stderr, "critpath record: out of memory\n");
		free(s);
		return 1;
	}
	s->go_fd = -1;
	ret = rec_opts__parse(&s->o, argc, argv);
	if (ret) {
		session_free(s);
		return ret == 1 ? 0 : 2;
	}
	s->o.argc = argc;
	s->o.argv = argv;
	s->r->out = s->o.out;
	s->r->quiet = s->o.quiet;
	ret = rec_open(s) || rec_load(s) || rec_attach(s);
	if (!ret) {
		rec_loop(s);
		ret = rec_close(s);
	}
	session_free(s);
	return ret;
}
