// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* TLS plaintext capture (DESIGN.md 3): uprobes on OpenSSL's read, write and
 * handshake, per target process. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "msg.h"
#include "record_int.h"
#include "record_tls_at.h"

struct tls_proc {
	pid_t pid;
	bool on; /* attached (else it failed, and said why) */
	/* entry and return of each; Go's: four entries and Read's returns */
	struct bpf_link *links[4 + GO_TLS_MAX_RETS];
	int nlinks;
};

/* An executable looked at for OpenSSL's functions, by its file. */
struct tls_exe {
	dev_t dev;
	ino_t ino;
};

struct rec_tls {
	bool quiet;
	struct rec_unlinker *unlink; /* where uprobe links go to be destroyed */
	const char *off;	/* why capture is off (static), NULL: on */
	struct tls_proc *procs; /* live processes that map libssl */
	int nprocs, capprocs;
	/* for the summary: how many were attached, the first of them */
	int attached;
	char list[256];
	/* forks of attached processes gone before their own attach */
	int missed;
	char missed_list[128];
	struct tls_exe *plain;
	int nplain, capplain;
};

int rec_tls__new(struct rec_tls **t, const char *off, bool quiet, struct rec_unlinker *u)
{
	*t = calloc(1, sizeof(**t));
	if (!*t)
		return -ENOMEM;
	(*t)->unlink = u;
	(*t)->off = off;
	(*t)->quiet = quiet;
	return 0;
}

static int exe_of(struct rec_tls *t, pid_t pid, char *bin, size_t nbin, char *out, size_t n,
		  struct tls_exe *id)
{
	struct stat st;
	ssize_t len;

	snprintf(bin, nbin, "/proc/%d/exe", pid);
	if (stat(bin, &st))
		return -ESRCH;
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	for (int i = 0; i < t->nplain; i++)
		if (t->plain[i].dev == id->dev && t->plain[i].ino == id->ino)
			return 1;
	len = readlink(bin, out, n - 1);
	if (len < 0)
		return -ESRCH;
	out[len] = 0;
	return 0;
}

static void list_pid(char *list, size_t n, int count, int max, pid_t pid)
{
	if (count <= max)
		snprintf(list + strlen(list), n - strlen(list), "%s%d", count > 1 ? ", " : "", pid);
}

static int plain_add(struct rec_tls *t, struct tls_exe id)
{
	if (t->nplain == t->capplain) {
		int cap = t->capplain ? t->capplain * 2 : 16;
		struct tls_exe *np = realloc(t->plain, cap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		t->plain = np;
		t->capplain = cap;
	}
	t->plain[t->nplain++] = id;
	return 0;
}

static void proc_detach(struct rec_unlinker *u, struct tls_proc *p)
{
	while (p->nlinks)
		rec_unlinker__put(u, p->links[--p->nlinks]);
}

static int attach_lib(struct rec_unlinker *u, struct tls_proc *p, struct rec_bpf *b, pid_t pid,
		      const char *bin, char *fns, size_t n)
{
	struct tls_point pts[TLS_AT_MAX];
	struct bpf_program *progs[2];
	int npts, stepped = 0, err = 0;

	if (rec_bpf__tls_progs(b, false, &progs[0], &progs[1]))
		return -ENOENT;
	npts = tls_at__plan_elf(bin, pts);
	if (npts < 0)
		return npts;
	fns[0] = 0;
	for (int i = 0; i < npts && !err; i++) {
		stepped += pts[i].how == TLS_AT_ENTRY;
		for (int ret = 0; ret < 2 && !err; ret++) {
			LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret, .bpf_cookie = pts[i].call);
			struct bpf_link *l;

			l = bpf_program__attach_uprobe_opts(progs[ret], pid, bin, pts[i].addr, &o);
			if (!l)
				err = -errno;
			else
				p->links[p->nlinks++] = l;
		}
		snprintf(fns + strlen(fns), n - strlen(fns), "%s%s", *fns ? ", " : "",
			 tls_at__name(&pts[i]));
	}
	if (stepped)
		snprintf(fns + strlen(fns), n - strlen(fns), ", %d stepped", stepped);
	if (err)
		proc_detach(u, p);
	return err;
}

static int attach_go(struct rec_unlinker *u, struct tls_proc *p, struct rec_bpf *b, pid_t pid,
		     const char *bin, const struct go_tls_fns *f)
{
	const struct {
		uint64_t off;
		uint8_t cookie;
	} entries[] = {
	    {f->read, CP_TLS_GO_READ},
	    {f->write, CP_TLS_GO_WRITE},
	    {f->server_hs, CP_TLS_GO_HANDSHAKE},
	    {f->client_hs, CP_TLS_GO_HANDSHAKE},
	};
	struct bpf_program *enter, *ret;
	int n = sizeof(entries) / sizeof(entries[0]), err = 0;

	if (rec_bpf__tls_progs(b, true, &enter, &ret))
		return -ENOENT;
	/* Read's return: its copy of the plaintext, else each RET */
	for (int i = 0; i < n + (f->copy ? 1 : f->nrets) && !err; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o,
			    .bpf_cookie = i < n	   ? entries[i].cookie
					  : f->copy ? CP_TLS_GO_READ | CP_TLS_GO_AT_COPY
						    : CP_TLS_GO_READ);
		uint64_t off = i < n ? entries[i].off : f->copy ? f->copy : f->rets[i - n];
		struct bpf_link *l;

		if (!off)
			continue;
		l = bpf_program__attach_uprobe_opts(i < n ? enter : ret, pid, bin, off, &o);
		if (!l)
			err = -errno;
		else
			p->links[p->nlinks++] = l;
	}
	if (err)
		proc_detach(u, p);
	return err;
}

/* pid 0: the recording's "tls" hook, else the process's. */
static int hook_write(struct recording_writer *w, uint64_t ts, pid_t pid, uint8_t status,
		      const char *detail, uint64_t *records)
{
	struct cp_md_hook h = {};
	int err;

	h.h.type = CP_MD_HOOK;
	h.h.size = sizeof(h);
	h.h.pid = pid;
	h.h.ts = ts;
	h.status = status;
	if (pid)
		snprintf(h.name, sizeof(h.name), "tls pid %d", pid);
	else
		snprintf(h.name, sizeof(h.name), "tls");
	snprintf(h.detail, sizeof(h.detail), "%s", detail);
	err = recording_writer__append(w, &h.h);
	if (!err)
		++*records;
	return err;
}

int rec_tls__write_hook(const struct rec_tls *t, struct recording_writer *w, uint64_t ts,
			uint64_t *records)
{
	char detail[sizeof(((struct cp_md_hook *)0)->detail)];

	if (t->off) {
		snprintf(detail, sizeof(detail), "%s: TLS connections carry ciphertext", t->off);
		return hook_write(w, ts, 0, CP_HOOK_UNAVAILABLE, detail, records);
	}
	return hook_write(w, ts, 0, CP_HOOK_ATTACHED,
			  "uprobe+uretprobe on OpenSSL's SSL_read/SSL_write(_ex) (or the "
			  "function they share) and SSL_do_handshake in each process "
			  "that maps libssl or has them in its executable, uprobes on Go's "
			  "crypto/tls (a \"tls pid N\" hook each)",
			  records);
}

int rec_tls__scan(struct rec_tls *t, struct rec_bpf *b, pid_t pid, struct recording_writer *w,
		  uint64_t ts, uint64_t *records)
{
	char lib[PATH_MAX], bin[PATH_MAX + 32], fns[96],
	    detail[sizeof(((struct cp_md_hook *)0)->detail)];
	const char *why = NULL;
	struct tls_exe exe = {};
	struct go_tls_fns go;
	struct tls_proc *p;
	bool in_exe = false;
	int err;

	if (t->off)
		return 0;
	for (int i = 0; i < t->nprocs; i++)
		if (t->procs[i].pid == pid)
			return 0; /* an exec keeps the process's uprobes (same library) */
	if (!rec_meta__mapped(pid, "libssl.so", true, lib, sizeof(lib))) {
		snprintf(bin, sizeof(bin), "/proc/%d/root%s", pid, lib);
	} else if (!(err = exe_of(t, pid, bin, sizeof(bin), lib, sizeof(lib), &exe))) {
		in_exe = true;
	} else {
		return err < 0 ? err : 0; /* gone (or a zombie), or a plain executable */
	}
	if (t->nprocs == t->capprocs) {
		int cap = t->capprocs ? t->capprocs * 2 : 16;
		struct tls_proc *np = realloc(t->procs, cap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		t->procs = np;
		t->capprocs = cap;
	}
	p = &t->procs[t->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	err = attach_lib(t->unlink, p, b, pid, bin, fns, sizeof(fns));
	if (err && err != -ENOMEM && !rec_meta__alive(pid))
		err = -ESRCH; /* its /proc files went with it: not a missing symbol */
	if (in_exe && err == -ENOENT) {
		/* no OpenSSL in it: Go's crypto/tls, when it is Go */
		err = rec_gotls__find(bin, &go, &why);
		if (!err) {
			err = attach_go(t->unlink, p, b, pid, bin, &go);
			if (!err)
				err = rec_bpf__go_tls(b, pid);
			/* the RETs single-stepped: ~11 us a Read */
			snprintf(fns, sizeof(fns), "Go's crypto/tls.(*Conn).Read/Write (%s%s)",
				 go.version, go.copy ? "" : ", Read's RETs stepped");
		} else if (err == -ENOENT && rec_meta__alive(pid)) {
			/* most executables have neither: nothing to say */
			t->nprocs--;
			return plain_add(t, exe);
		} else if (err == -ENOENT) {
			err = -ESRCH; /* not read: its executable is not known plain */
		}
	}
	p->on = !err;
	if (p->on)
		rec_bpf__fork_wakes(b, pid);
	if (p->on)
		list_pid(t->list, sizeof(t->list), ++t->attached, 16, pid);
	if (err == -ENOMEM || err == -ESRCH)
		return err; /* gone: nothing to say */
	if (err) {
		if (!why)
			why = err == -ENOENT ? "no SSL_read/SSL_write symbols" : strerror(-err);

		snprintf(detail, sizeof(detail), "no TLS plaintext: %.64s: %.40s", lib, why);
		cp_error(rec_cmd, "process %d: no TLS plaintext: %s: %s", pid, lib,
			why);
		return hook_write(w, ts, pid, CP_HOOK_UNAVAILABLE, detail, records);
	}
	snprintf(detail, sizeof(detail), "uprobes on %.74s in %.38s", fns, lib);
	if (!t->quiet)
		cp_error(rec_cmd, "process %d: TLS plaintext from %s", pid, lib);
	return hook_write(w, ts, pid, CP_HOOK_ATTACHED, detail, records);
}

bool rec_tls__on(const struct rec_tls *t, pid_t pid)
{
	for (int i = 0; t && i < t->nprocs; i++)
		if (t->procs[i].pid == pid)
			return t->procs[i].on;
	return false;
}

int rec_tls__missed(struct rec_tls *t, struct recording_writer *w, pid_t pid, uint64_t forked,
		    uint64_t exited, uint64_t ts, uint64_t *records)
{
	char detail[sizeof(((struct cp_md_hook *)0)->detail)];

	list_pid(t->missed_list, sizeof(t->missed_list), ++t->missed, 8, pid);
	if (exited >= forked)
		snprintf(detail, sizeof(detail),
			 "no TLS plaintext: exited %.1f ms after its fork, before its uprobes were "
			 "attached",
			 (exited - forked) / 1e6);
	else /* its exit record lost */
		snprintf(
		    detail, sizeof(detail),
		    "no TLS plaintext: exited after its fork, before its uprobes were attached");
	return hook_write(w, ts, pid, CP_HOOK_UNAVAILABLE, detail, records);
}

void rec_tls__forget(struct rec_tls *t, pid_t pid)
{
	for (int i = 0; t && i < t->nprocs; i++) {
		if (t->procs[i].pid != pid)
			continue;
		proc_detach(t->unlink, &t->procs[i]);
		t->procs[i] = t->procs[--t->nprocs];
		return;
	}
}

void rec_tls__summary(const struct rec_tls *t)
{
	if (t && t->attached)
		cp_error(rec_cmd, "TLS plaintext captured in %d process%s (%s%s)",
			t->attached, t->attached == 1 ? "" : "es", t->list,
			t->attached > 16 ? ", …" : "");
	if (t && t->missed)
		cp_error(rec_cmd,
			"%d fork%s of them exited before %s uprobes were "
			"attached (%s%s): TLS calls made there are not in the recording",
			t->missed, t->missed == 1 ? "" : "s", t->missed == 1 ? "its" : "their",
			t->missed_list, t->missed > 8 ? ", …" : "");
}

void rec_tls__destroy(struct rec_tls *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->nprocs; i++)
		proc_detach(t->unlink, &t->procs[i]);
	free(t->procs);
	free(t->plain);
	free(t);
}
