// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath record: its phases and the main loop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "msg.h"
#include "outfile.h"
#include "proto_redact.h"
#include "record_int.h"
#include "recorder.h"
#include "session.h"
#include "util.h"

#define TICK_MS 100
#define POLL_MS 10 /* the ring buffer wakes us only when filling up */
#define FLUSH_NS 1000000000ull
#define WRITER_QUEUE_FRAMES 16

volatile sig_atomic_t rec_stop_signal;

static void on_signal(int sig)
{
	rec_stop_signal = sig;
}

void rec_session__catch_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	/* a closed terminal (SIGHUP) ends it like Ctrl-C: flushed, whole */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}



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
		cp_error(rec_cmd, "cannot run %s: %s", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[0]);
	*go_fd = p[1];
	return pid;
}

/* --probe in the targets named at start, or in the launched command's
 * executable. */
static int attach_probes(struct recorder *r, struct rec_probes *probes, const char *cmd)
{
	char(*exes)[PATH_MAX] = calloc(r->ntargets, sizeof(*exes));
	const char **exe = calloc(r->ntargets, sizeof(*exe));
	pid_t *pids = calloc(r->ntargets, sizeof(*pids));
	int n = 0, err = -ENOMEM;

	if (!exes || !exe || !pids) {
		cp_error(rec_cmd, "--probe: out of memory");
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

	cp_error(rec_cmd,
		"%.2f s, %llu events, %llu metadata records, %llu bytes written "
		"(%.1f bytes/event), %llu lost events, file %s",
		secs, (unsigned long long)r->events, (unsigned long long)md,
		(unsigned long long)bytes, total ? (double)bytes / total : 0.0,
		(unsigned long long)(r->lost + r->unwritten), r->out);
	if (r->unwritten)
		cp_error(rec_cmd,
			"%llu records were not written to %s after its write "
			"failed (counted among the lost events); the file ends at its last whole "
			"frame",
			(unsigned long long)r->unwritten, r->out);
	if (r->inferred)
		cp_error(rec_cmd,
			"%llu switches into target threads were missing from the "
			"kernel's trace and were inferred (dump shows them as inferred)",
			(unsigned long long)r->inferred);
	if (r->redact) {
		struct redact_stats rs;

		redact__stats(r->redact, &rs);
		if (rs.values + rs.h1_values + rs.data)
			cp_error(rec_cmd,
				"not kept: %llu HTTP/1.x and %llu HTTP/2 header "
				"values, %llu bytes of HTTP/2 DATA (--payload-bytes says what is)",
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

static void *load_main(void *arg)
{
	struct rec_session *s = arg;
	sigset_t stop;

	/* the stop signals go to the main thread: one here would abort the
	 * verifier (EAGAIN) and libbpf would load again */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	s->load_err = rec_bpf__open_load(&s->r->bpf, &s->o.bo);
	return NULL;
}

void rec_session__load_start(struct rec_session *s)
{
	if (s->loading || s->r->bpf || rec_meta__missing_privilege())
		return;
	rec_cmd = s->cmd;
	/* no thread: rec_session__load loads in line */
	s->loading = !pthread_create(&s->loader, NULL, load_main, s);
}

/* The loader's result, or the load itself when no thread ran it. */
static int load_wait(struct rec_session *s)
{
	if (!s->loading)
		return s->r->bpf ? 0 : rec_bpf__open_load(&s->r->bpf, &s->o.bo);
	pthread_join(s->loader, NULL);
	s->loading = false;
	return s->load_err;
}

/* Checks that need no BPF, the host's facts, the output. 0 or 1. */
int rec_session__open(struct rec_session *s)
{
	struct recorder *r = s->r;
	const char *why = rec_meta__missing_privilege();
	int err;

	rec_cmd = s->cmd;
	if (why) {
		cp_error(s->cmd, "%s", why);
		return 1;
	}
	for (int i = 0; i < s->o.npids; i++) {
		if (!rec_meta__alive(s->o.pids[i])) {
			cp_error(s->cmd, "no process with PID %d", s->o.pids[i]);
			return 1;
		}
		rec__target_add(r, s->o.pids[i], true);
	}
	rec_session__load_start(s); /* the /proc walk and the rest meanwhile */
	err = rec__add_children(r);
	if (err) {
		cp_error(s->cmd, "cannot list the targets' child processes: %s",
			strerror(-err));
		return 1;
	}
	for (int i = 0; i < s->o.nprobes; i++)
		if (rec_probes__add(&s->probes, s->o.probes[i]))
			return 1;
	err = rec_meta__host(&s->host, s->o.argc, s->o.argv);
	if (err) {
		cp_error(s->cmd, "cannot read host facts: %s", strerror(-err));
		return 1;
	}
	r->ncpus = s->host.ncpus;
	r->drops_seen = calloc(r->ncpus, sizeof(*r->drops_seen));
	r->redact = redact__new(s->o.bo.payload_bytes);
	if (!r->drops_seen || !r->redact) {
		cp_error(s->cmd, "out of memory");
		return 1;
	}
	if (s->o.keep_query)
		redact__keep_query(r->redact);
	s->start = clock__mono_ns();
	s->info = (struct recording_info){
	    .codec = s->o.codec,
	    .agent_version = CRITPATH_VERSION,
	    .cmdline = s->host.cmdline,
	    .host = s->o.host ? s->o.host : s->host.host,
	    .kernel = s->host.kernel,
	    .boot_id = s->host.boot_id,
	    .sku = s->o.sku,
	    .realtime_offset_ns = rec_meta__realtime_offset(),
	    .start_ns = s->start,
	    .payload_bytes = s->o.bo.payload_bytes,
	    .ncpus = s->host.ncpus,
	    .cpus = s->host.cpus,
	    .clock_shift_ns = s->o.clock_skew_ns,
	};
	if (s->tap) { /* critpath agent: records analysed as they come */
		err = recording_writer__open_tap(&r->w, s->tap, s->tap_ctx);
		if (err) {
			cp_error(s->cmd, "out of memory");
			return 1;
		}
		return 0;
	}
	err = recording_writer__open(&r->w, r->out, &s->info);
	if (err) {
		cp_error(s->cmd, "cannot create %s: %s", r->out, output__why(err));
		return 1;
	}
	/* compression off the loop that drains the ring buffer */
	err = recording_writer__background(r->w, WRITER_QUEUE_FRAMES);
	if (err)
		cp_error(s->cmd,
			"no compression thread (%s): compressing in the "
			"main loop",
			strerror(-err));
	return 0;
}

int rec_session__load(struct rec_session *s)
{
	struct recorder *r = s->r;
	int err = load_wait(s);

	if (err)
		return 1;
	err = rec_unlinker__new(&s->unlink);
	if (!err)
		err = rec_tls__new(&r->tls, rec_bpf__tls_off(r->bpf), r->quiet, s->unlink);
	if (err) {
		cp_error(s->cmd, "out of memory");
		return 1;
	}
	rec_meta__on_listen(rec_bpf__listen_port, r->bpf);
	if (s->o.cmd) {
		r->child = launch(s->o.cmd, &s->go_fd);
		if (r->child < 0) {
			cp_error(s->cmd, "cannot start %s: %s", s->o.cmd[0],
				strerror(-r->child));
			return 1;
		}
		rec__target_add(r, r->child, true);
	}
	for (int i = 0; i < r->ntargets; i++) {
		err = rec_bpf__add_target(r->bpf, r->targets[i].pid);
		if (err) {
			cp_error(s->cmd, "cannot add target %d: %s",
				r->targets[i].pid, strerror(-err));
			return 1;
		}
	}
	err = rec_bpf__ring(r->bpf, rec__on_event, r);
	if (err) {
		cp_error(s->cmd, "cannot set up the ring buffer: %s",
			strerror(-err));
		return 1;
	}
	return 0;
}

int rec_session__attach(struct rec_session *s)
{
	struct recorder *r = s->r;
	int err;

	/* the start's metadata precedes every event (connections known as
	 * servers' first) */
	s->attached = clock__mono_ns();
	if (rec_stop_signal) {
		s->start = r->last_check = s->attached;
		cp_error(s->cmd, "%s before the probes were attached: no events recorded",
			 strsignal(rec_stop_signal));
		return 0;
	}
	/* TLS uprobes first, so the first socket records are known to be
	 * inside SSL calls */
	for (int i = 0; i < r->ntargets && !r->write_err; i++)
		if (r->targets[i].need_tls && r->targets[i].pid != r->child)
			rec__tls_look(r, &r->targets[i], s->attached);
	if (rec_bpf__attach(r->bpf))
		return 1;
	if (s->probes && attach_probes(r, s->probes, s->o.cmd ? s->o.cmd[0] : NULL))
		return 1;
	s->start = clock__mono_ns();
	s->attach_ns = s->start - s->t0;
	r->last_check = s->attached;
	if (s->o.duration > 0)
		s->deadline = s->start + (uint64_t)(s->o.duration * 1e9);
	err = rec_bpf__write_hooks(r->bpf, r->w, s->attached);
	if (!err)
		r->metadata += rec_bpf__nhooks(r->bpf);
	err = err ?: rec_probes__write(s->probes, r->w, s->attached, &r->metadata);
	err = err ?: rec_tls__write_hook(r->tls, r->w, s->attached, &r->metadata);
	if (err)
		rec__write_error(r, err);
	rec__tick(r, s->attached); /* process, thread and socket metadata of the targets */
	if (s->go_fd >= 0) {
		if (write(s->go_fd, "g", 1) != 1)
			cp_error(s->cmd, "cannot start the command");
		close(s->go_fd);
		s->go_fd = -1;
	}
	if (!r->quiet && !s->tap)
		cp_error(s->cmd, "recording %d process%s to %s (attached in %.2f s%s)",
			r->ntargets, r->ntargets == 1 ? "" : "es", r->out, s->attach_ns / 1e9,
			s->deadline ? "" : "; Ctrl-C to stop");
	return 0;
}

/* The child, reaped once it exits. */
void rec_session__reap_child(struct recorder *r)
{
	int status;
	struct target *t;

	if (r->child <= 0 || waitpid(r->child, &status, WNOHANG) != r->child)
		return;
	r->child_status = status;
	t = rec__target_find(r, r->child);
	if (t && !t->dead)
		t->dead = 1;
	r->child = -r->child; /* reaped */
}

static void rec_loop(struct rec_session *s)
{
	struct recorder *r = s->r;
	uint64_t now, last_flush = s->start;
	int err;

	while (!rec_stop_signal && !r->write_err) {
		err = rec__drain(r, POLL_MS, false);
		if (err < 0 && err != -EINTR && !r->write_err) {
			cp_error(rec_cmd, "reading the ring buffer: %s",
				strerror(-err));
			break;
		}
		now = clock__mono_ns();
		if (now - r->last_check >= TICK_MS * 1000000ull) {
			rec_session__reap_child(r);
			rec__tick(r, now);
			if (!rec__live_targets(r)) {
				s->all_exited = true;
				break;
			}
		}
		if (now - last_flush >= FLUSH_NS && !r->write_err) {
			err = recording_writer__flush(r->w);
			if (err)
				rec__write_error(r, err);
			last_flush = now;
		}
		if (s->deadline && now >= s->deadline)
			break;
	}
}

static int rec_close(struct rec_session *s)
{
	struct recorder *r = s->r;
	struct recording_totals totals = {};
	uint64_t now, bytes, inflight = 0, unwritten = 0;
	int err;

	rec__drain(r, 0, true);
	now = clock__mono_ns();
	for (int i = 0; i < r->ntargets; i++)
		rec__tls_gap_say(r, &r->targets[i], now);
	if (!r->write_err)
		rec__check_drops(r, now);
	if (!r->write_err) {
		pid_t pids[MAX_TARGETS];
		int n = 0;

		for (int i = 0; i < r->ntargets; i++)
			if (!r->targets[i].dead)
				pids[n++] = r->targets[i].pid;
		err = rec_bpf__write_inflight(r->bpf, r->w, pids, n, &inflight);
		if (err)
			rec__write_error(r, err);
		r->events += inflight;
	}
	if (s->all_exited && !r->quiet)
		cp_error(rec_cmd, "all targets exited");
	if (r->exits_unsaid && !r->quiet)
		cp_error(rec_cmd, "%llu more targets exited than were said",
			 (unsigned long long)r->exits_unsaid);
	totals.end_ns = now;
	totals.lost = r->lost;
	bytes = recording_writer__bytes(r->w);
	err = recording_writer__close_counted(r->w, &totals, &unwritten);
	r->unwritten += unwritten;
	r->w = NULL;
	if (err)
		rec__write_error(r, err);
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

void rec_session__free(struct rec_session *s)
{
	struct recorder *r = s->r;

	if (s->loading) /* stopped before the load's end: its object is freed below */
		load_wait(s);
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
		rec__held_free(&r->life);
		rec__held_free(&r->socks);
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
	struct rec_session *s = calloc(1, sizeof(*s));
	int ret;

	rec_session__catch_signals();
	if (s) {
		s->cmd = "record";
		s->t0 = clock__mono_ns();
	}
	if (!s || !(s->r = calloc(1, sizeof(*s->r)))) {
		cp_error(rec_cmd, "out of memory");
		free(s);
		return 1;
	}
	s->go_fd = -1;
	ret = rec_opts__parse(&s->o, argc, argv);
	if (ret) {
		rec_session__free(s);
		return ret == 1 ? 0 : 2;
	}
	s->o.argc = argc;
	s->o.argv = argv;
	s->r->out = s->o.out;
	s->r->quiet = s->o.quiet;
	ret = rec_session__open(s) || rec_session__load(s) || rec_session__attach(s);
	if (!ret) {
		rec_loop(s);
		ret = rec_close(s);
	}
	rec_session__free(s);
	return ret;
}
