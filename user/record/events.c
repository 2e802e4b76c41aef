// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* What the rings deliver: records reordered, targets followed by fork, exec
 * and exit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"
#include "record_int.h"
#include "recorder.h"
#include "util.h"

struct target *rec__target_find(struct recorder *r, pid_t pid)
{
	for (int i = 0; i < r->ntargets; i++)
		if (r->targets[i].pid == pid)
			return &r->targets[i];
	return NULL;
}


struct target *rec__target_add(struct recorder *r, pid_t pid, bool top)
{
	struct target *t = rec__target_find(r, pid);

	if (t && !t->dead)
		return t;
	/* a reused pid takes its old slot */
	if (!t && r->ntargets < MAX_TARGETS)
		t = &r->targets[r->ntargets++];
	for (int i = 0; i < r->ntargets && !t; i++)
		if (r->targets[i].dead == 2)
			t = &r->targets[i];
	if (!t)
		return NULL;
	rec__tls_gap_say(r, t, clock__mono_ns()); /* what the slot's last process left unsaid */
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->top = top;
	t->need_meta = t->need_tls = true;
	return t;
}

int rec__target_watch(struct recorder *r, pid_t pid)
{
	struct target *t = rec__target_find(r, pid);

	if (t && !t->dead)
		return 0;
	t = rec__target_add(r, pid, true);
	if (!t)
		return -ENOSPC;
	return rec_bpf__add_target(r->bpf, pid);
}

int rec__live_targets(const struct recorder *r)
{
	int n = 0;

	for (int i = 0; i < r->ntargets; i++)
		n += !r->targets[i].dead;
	return n;
}

void rec__write_error(struct recorder *r, int err)
{
	if (r->write_err)
		return;
	r->write_err = err;
	if (err == -ENOSPC)
		cp_error(rec_cmd,
			"%s: %s (disk full); the recording is readable up to the last frame "
			"written",
			r->out, strerror(-err));
	else
		cp_error(rec_cmd, "%s: write failed: %s", r->out, strerror(-err));
}

static int append(struct recorder *r, const struct cp_hdr *h)
{
	int err;

	if (r->write_err)
		return r->write_err;
	err = recording_writer__append(r->w, h);
	if (err)
		rec__write_error(r, err);
	return err;
}

#define EXITS_SAID 5

/* exit_code is the kernel's wait status: a signal in the low 7 bits (-1:
 * not known). The first EXITS_SAID are said, the rest counted. */
static void say_exited(struct recorder *r, pid_t pid, int32_t exit_code)
{
	if (r->exits_said == EXITS_SAID) {
		r->exits_unsaid++;
		return;
	}
	if (++r->exits_said == EXITS_SAID)
		cp_error(rec_cmd, "target %d exited; more exits are counted, not said", pid);
	else if (exit_code < 0)
		cp_error(rec_cmd, "target %d exited", pid);
	else if (exit_code & 0x7f)
		cp_error(rec_cmd, "target %d killed by signal %d", pid,
			exit_code & 0x7f);
	else
		cp_error(rec_cmd, "target %d exited (exit code %d)", pid,
			(exit_code >> 8) & 0xff);
}

/* Metadata of a just forked or exec'd process, read now (a short-lived child
 * is gone by the tick). */
static void meta_now(struct recorder *r, pid_t pid, uint64_t ts, const struct rec_meta_seen *seen)
{
	int err;

	if (r->write_err)
		return;
	err = rec_meta__process(r->w, pid, ts, seen);
	if (err && err != -ESRCH)
		rec__write_error(r, err);
}

/* Looks for libssl in t, and when to look again (a later dlopen). -ESRCH:
 * gone. */
int rec__tls_look(struct recorder *r, struct target *t, uint64_t ts)
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
		rec__write_error(r, err);
	t->tls_on = rec_tls__on(r->tls, t->pid);
	return err;
}

/* A TLS process's fork exited before its uprobes were attached: said once
 * its records are read. */
void rec__tls_gap_say(struct recorder *r, struct target *t, uint64_t ts)
{
	int err;

	if (!t->tls_gap || r->write_err)
		return;
	t->tls_gap = false;
	err = rec_tls__missed(r->tls, r->w, t->pid, t->forked, t->exited, ts, &r->metadata);
	if (err)
		rec__write_error(r, err);
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
			parent = rec__target_find(r, f->parent_pid);
			parent_tls = parent && parent->tls_on;
			t = rec__target_add(r, f->child_pid, false);
			if (t) {
				t->need_meta = false;
				t->ppid = f->parent_pid;
			}
			meta_now(r, f->child_pid, h->ts, &seen);
			/* a fork maps its parent's libssl: attach now; an
			 * exec waits for the tick */
			if (t && ((pid_t)f->parent_pid != r->child || r->child_exec) && !r->write_err &&
			    rec__tls_look(r, t, h->ts) == -ESRCH && parent_tls) {
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
		t = rec__target_find(r, h->pid);
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

		t = rec__target_find(r, h->pid);
		if (x->group_dead && t)
			t->exited = h->ts; /* the tick may have seen it gone already */
		if (x->group_dead && t && !t->dead) {
			t->dead = 1;
			if (t->top && !r->quiet && t->pid != r->child)
				say_exited(r, t->pid, x->exit_code);
		}
		break;
	}
	}
}

/* A copy of record h (len bytes) kept until the end of the pass, and its
 * place in the index. */
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
	if (q->nix == q->capix) {
		size_t cap = q->capix ? q->capix * 2 : 256;
		struct held_ix *ix = realloc(q->ix, cap * sizeof(*ix));

		if (!ix)
			return -ENOMEM;
		q->ix = ix;
		q->capix = cap;
	}
	memcpy(q->buf + q->n, h, len);
	memset(q->buf + q->n + len, 0, size - len);
	((struct cp_hdr *)(q->buf + q->n))->size = (uint16_t)size;
	q->ix[q->nix++] = (struct held_ix){h->ts, q->n};
	q->n += size;
	return 0;
}

void rec__held_free(struct held *q)
{
	free(q->buf);
	free(q->ix);
	free(q->tmp);
	memset(q, 0, sizeof(*q));
}

/* The index in time order, ties as drained: a stable natural merge sort
 * (the records come in runs, one per CPU's ring and drain), cheaper than
 * qsort's comparisons through pointers. */
static int held_order(struct held *q)
{
	struct held_ix *src = q->ix, *dst;
	size_t n = q->nix;

	if (n < 2)
		return 0;
	dst = realloc(q->tmp, q->capix * sizeof(*dst));
	if (!dst)
		return -ENOMEM;
	q->tmp = dst;
	for (;;) {
		size_t runs = 0, i = 0, o = 0;

		while (i < n) {
			size_t m = i + 1, e;

			while (m < n && src[m - 1].ts <= src[m].ts)
				m++;
			e = m;
			if (m < n)
				for (e = m + 1; e < n && src[e - 1].ts <= src[e].ts;)
					e++;
			/* [i,m) and [m,e) merged; the left one first on ties */
			for (size_t x = i, y = m; x < m || y < e;)
				dst[o++] = y >= e || (x < m && src[x].ts <= src[y].ts) ? src[x++]
										: src[y++];
			runs++;
			i = e;
		}
		{
			struct held_ix *t = src;

			src = dst;
			dst = t;
		}
		if (runs <= 1)
			break;
	}
	if (src != q->ix) { /* the sorted one becomes the index */
		q->tmp = q->ix;
		q->ix = src;
	}
	return 0;
}

static void held_follow(struct recorder *r, struct held *q,
			void (*fn)(struct recorder *r, const struct cp_hdr *h), uint64_t before)
{
	size_t k = 0, kept = 0, nkept = 0;

	if (!q->nix)
		return;
	if (held_order(q)) {
		rec__write_error(r, -ENOMEM);
		r->unwritten += q->nix;
		q->n = q->nix = 0;
		return;
	}
	for (; k < q->nix && q->ix[k].ts < before; k++)
		fn(r, (const struct cp_hdr *)(q->buf + q->ix[k].off));
	if (k == q->nix) {
		q->n = q->nix = 0;
		return;
	}
	/* the rest to the front, in the order they came (each moves down) */
	for (size_t off = 0, size; off < q->n; off += size) {
		const struct cp_hdr *h = (const struct cp_hdr *)(q->buf + off);
		uint64_t ts = h->ts; /* the move may write over h */

		size = h->size;
		if (ts < before)
			continue;
		memmove(q->buf + kept, h, size);
		q->ix[nkept++] = (struct held_ix){ts, kept};
		kept += size;
	}
	q->n = kept;
	q->nix = nkept;
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
		rec__write_error(r, -ENOMEM);
	else if (!append(r, h))
		r->events++;
}

int rec__on_event(void *ctx, const struct cp_hdr *h, size_t len)
{
	struct recorder *r = ctx;
	struct cp_ev_process_exec watched;

	if (r->write_err) { /* the ring drained at the end, counted */
		r->unwritten++;
		return 0;
	}
	if (h->type == CP_EV_PROCESS_EXEC && len >= sizeof(struct cp_ev_process_exec) -
							 CP_FILENAME_MAX &&
	    (((const struct cp_ev_process_exec *)h)->__pad & (CP_EXEC_CANDIDATE | CP_EXEC_WATCHED))) {
		const struct cp_ev_process_exec *x = (const void *)h;
		size_t max = len - offsetof(struct cp_ev_process_exec, filename);
		char file[CP_FILENAME_MAX + 1];

		snprintf(file, sizeof(file), "%.*s", (int)strnlen(x->filename, max), x->filename);
		if (r->spawn)
			r->spawn(r->spawn_ctx, (pid_t)h->pid, file);
		if (!(x->__pad & CP_EXEC_WATCHED))
			return 0;
		/* BPF traces it since its exec: a target's exec, flag cleared */
		if (!rec__target_find(r, (pid_t)h->pid))
			rec__target_watch(r, (pid_t)h->pid);
		len = len < sizeof(watched) ? len : sizeof(watched);
		memcpy(&watched, h, len);
		watched.__pad = 0;
		h = &watched.h;
	}
	if (redact__looks_at(r->redact, h)) {
		if (hold(&r->socks, h, len)) {
			rec__write_error(r, -ENOMEM);
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
			rec__write_error(r, -ENOMEM);
			return -1;
		}
		break;
	}
	return 0;
}

/* A record is in its ring HOLD_NS after its time stamp at the latest. */
#define HOLD_NS (2 * 1000000ull)

/* One drain: lifecycle records in time order, HTTP/2 redaction up to where
 * every ring delivered. */
int rec__drain(struct recorder *r, int timeout_ms, bool final)
{
	uint64_t t0 = clock__mono_ns();
	int err = rec_bpf__poll(r->bpf, timeout_ms);

	held_follow(r, &r->socks, on_sock_rec, final ? UINT64_MAX : t0 - HOLD_NS);
	held_follow(r, &r->life, on_life_rec, UINT64_MAX);
	return err;
}

void rec__check_drops(struct recorder *r, uint64_t now)
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

void rec__tick(struct recorder *r, uint64_t now)
{
	rec__check_drops(r, now);
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
				rec__write_error(r, err);
		}
		if ((t->need_tls || now >= t->tls_again) && (t->pid != r->child || r->child_exec) &&
		    !r->write_err)
			rec__tls_look(r, t, now);
		/* an exit we did not see (lost, or exited between checks) */
		if (!rec_meta__alive(t->pid)) {
			t->dead = 1;
			if (t->top && !r->quiet && t->pid != r->child)
				say_exited(r, t->pid, -1);
		}
	}
}


/* Processes the targets started before the recording become targets too. */
int rec__add_children(struct recorder *r)
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
			    rec__target_find(r, pp[k].pid))
				continue;
			if (!rec__target_add(r, pp[k].pid, false)) {
				cp_error(rec_cmd,
					"more than %d processes under the targets: "
					"process %d and later ones left out",
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
		cp_error(rec_cmd,
			"with the %d process%s the target%s started before the "
			"recording: %s",
			added, added == 1 ? "" : "es", ntop == 1 ? "" : "s", list);
	return 0;
}


