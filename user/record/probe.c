// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* record --probe [BINARY:]SYMBOL: user functions on the critical path
 * (DESIGN.md 3, 5), probed per target process; Go executables refused. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "msg.h"
#include "record_int.h"
#include "record_tls_at.h"

#define HOW_UNKNOWN 0xff /* the function's code was not read: at its entry */
#define MAX_LINKS 1024

struct probe {
	char binary[REC_PROBE_BINARY]; /* as given; empty: each target's executable */
	char symbol[REC_PROBE_SYMBOL];
};

struct probe_site {
	char binary[256];
	char symbol[128];
	uint32_t nprocs; /* processes it is attached in */
	bool planned;
	bool go; /* in a Go executable: not probed (plan_site) */
	uint8_t how; /* enum tls_at_how, or HOW_UNKNOWN (not planned) */
	uint64_t skip;
	char path[256];
};

struct rec_probes {
	struct probe probes[REC_MAX_PROBES];
	int nprobes;
	struct probe_site sites[REC_MAX_PROBES * 8];
	int nsites;
	struct bpf_link *links[MAX_LINKS];
	int nlinks;
};

int rec_probes__add(struct rec_probes **pp, const char *spec)
{
	struct rec_probes *p = *pp;
	const char *colon = strrchr(spec, ':');
	const char *sym = colon ? colon + 1 : spec;
	size_t blen = colon ? (size_t)(colon - spec) : 0;
	struct probe *pr;

	if (rec_probe_spec_check(spec))
		return -EINVAL;
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		*pp = p;
	}
	if (p->nprobes >= REC_MAX_PROBES) {
		cp_error(rec_cmd, "--probe: at most %d probes", REC_MAX_PROBES);
		return -E2BIG;
	}
	pr = &p->probes[p->nprobes++];
	memcpy(pr->binary, spec, blen);
	pr->binary[blen] = 0;
	strcpy(pr->symbol, sym);
	return 0;
}

/* The executable of a command as execvp() will find it. */
int rec_probes__which(const char *cmd, char *out, size_t n)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(cmd, '/'))
		return realpath(cmd, out) && strlen(out) < n ? 0 : -ENOENT;
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *end = strchrnul(path, ':');
		int len = (int)(end - path);

		snprintf(buf, sizeof(buf), "%.*s/%s", len ? len : 1, len ? path : ".", cmd);
		if (!access(buf, X_OK) && realpath(buf, out))
			return 0;
		path = *end ? end + 1 : end;
	}
	return -ENOENT;
}

static int site_of(struct rec_probes *p, const char *binary, const char *symbol)
{
	struct probe_site *s;

	for (int i = 0; i < p->nsites; i++)
		if (!strcmp(p->sites[i].binary, binary) && !strcmp(p->sites[i].symbol, symbol))
			return i;
	if (p->nsites >= (int)(sizeof(p->sites) / sizeof(p->sites[0])))
		return -E2BIG;
	s = &p->sites[p->nsites];
	snprintf(s->binary, sizeof(s->binary), "%s", binary);
	snprintf(s->symbol, sizeof(s->symbol), "%s", symbol);
	s->nprocs = 0;
	s->planned = false;
	s->go = false;
	s->path[0] = 0;
	return p->nsites++;
}

/* Where site s is attached, planned once on the file attached to. */
static void plan_site(struct probe_site *s, pid_t pid)
{
	char lib[PATH_MAX];

	if (s->planned)
		return;
	s->planned = true;
	s->how = HOW_UNKNOWN;
	s->skip = 0;
	s->path[0] = 0;
	_Static_assert(sizeof(s->path) == sizeof(s->binary), "a binary's path fits");
	if (strchr(s->binary, '/'))
		memcpy(s->path, s->binary, sizeof(s->path));
	else if (!rec_meta__mapped(pid, s->binary, false, lib, sizeof(lib)) &&
		 (size_t)snprintf(s->path, sizeof(s->path), "/proc/%d/root%s", (int)pid, lib) >=
		     sizeof(s->path))
		s->path[0] = 0;
	s->go = rec_gotls__is_go(s->path[0] ? s->path : s->binary);
	if (!s->go && s->path[0] && tls_at__fn_entry_elf(s->path, s->symbol, &s->skip, &s->how)) {
		s->skip = 0;
		s->how = HOW_UNKNOWN;
	}
}

static int attach_one(struct rec_probes *p, struct rec_bpf *b, int id, pid_t pid)
{
	struct probe_site *s = &p->sites[id];
	struct bpf_program *progs[2];

	if (rec_bpf__probe_progs(b, &progs[0], &progs[1]))
		return -ENOENT;
	plan_site(s, pid);
	if (s->go)
		return -EPERM;
	for (int ret = 0; ret < 2; ret++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .func_name = s->symbol, .retprobe = ret,
			    .bpf_cookie = (uint64_t)id);
		struct bpf_link *l;

		if (p->nlinks >= MAX_LINKS)
			return -E2BIG;
		/* libbpf adds the function's offset to the one given */
		l = bpf_program__attach_uprobe_opts(progs[ret], pid,
						    s->path[0] ? s->path : s->binary,
						    (size_t)s->skip, &o);
		if (!l)
			return -errno;
		p->links[p->nlinks++] = l;
	}
	return 0;
}

int rec_probes__attach(struct rec_probes *p, struct rec_bpf *b, const pid_t *pids,
		       const char *const *exes, int n, bool quiet)
{
	if (!p)
		return 0;
	for (int k = 0; k < p->nprobes; k++) {
		const struct probe *pr = &p->probes[k];
		char tried[512] = "";
		const char *go = NULL; /* a Go executable it is in, not probed */
		int found = 0, err = 0;

		for (int i = 0; i < n; i++) {
			const char *bin = pr->binary[0] ? pr->binary : exes[i];
			int id, e;

			if (!bin || !*bin)
				continue;
			id = site_of(p, bin, pr->symbol);
			if (id < 0)
				return id;
			e = attach_one(p, b, id, pids[i]);
			if (!e) {
				/* said once a site, at its first process */
				if (!p->sites[id].nprocs++ && !quiet &&
				    p->sites[id].how == TLS_AT_ENTRY)
					cp_error(rec_cmd,
						"--probe %s: single-stepped in "
						"%s (no instruction the kernel emulates where "
						"its entry can be probed): about 11 us a call, "
						"against 1 us",
						pr->symbol, bin);
				found++;
				continue;
			}
			if (e == -EPERM) {
				go = p->sites[id].binary;
				continue;
			}
			if (e != -ENOENT && e != -ESRCH) {
				cp_error(rec_cmd, "--probe %s: cannot attach in %s (pid %d): %s",
					 pr->symbol, bin, pids[i], strerror(-e));
				return e;
			}
			err = e;
			if (!strstr(tried, bin) && strlen(tried) + strlen(bin) + 3 < sizeof(tried))
				snprintf(tried + strlen(tried), sizeof(tried) - strlen(tried),
					 "%s%s", *tried ? ", " : "", bin);
		}
		if (go)
			cp_error(rec_cmd,
				"--probe %s: %s is a Go executable: its "
				"functions are not probed (Go's runtime reads the return "
				"addresses a uretprobe replaces, and kills the process)%s",
				pr->symbol, go, found ? "; probed in the other targets" : "");
		if (!found && go)
			return -EPERM;
		if (!found) {
			const char *bin = pr->binary[0] ? pr->binary : NULL;

			if (bin && strchr(bin, '/') && access(bin, R_OK))
				cp_error(rec_cmd, "--probe %s:%s: %s: %s", bin,
					pr->symbol, bin, strerror(errno));
			else
				cp_error(rec_cmd,
					"--probe %s%s%s: no function '%s' in %s%s "
					"(a symbol of the binary's symbol table is needed: not "
					"stripped, not inlined)",
					pr->binary, bin ? ":" : "", pr->symbol, pr->symbol,
					*tried ? tried : "the targets' executables",
					bin && !strchr(bin, '/') ? ", or no such library where the "
								   "loader looks"
								 : "");
			return err ? err : -ENOENT;
		}
	}
	return 0;
}

int rec_probes__write(const struct rec_probes *p, struct recording_writer *w, uint64_t ts,
		      uint64_t *records)
{
	for (int i = 0; p && i < p->nsites; i++) {
		const struct probe_site *s = &p->sites[i];
		struct cp_md_probe m = {};
		struct cp_md_hook h = {};
		int err;

		if (!s->nprocs)
			continue;
		m.h.type = CP_MD_PROBE;
		m.h.size = sizeof(m);
		m.h.ts = ts;
		m.probe_id = (uint32_t)i;
		snprintf(m.binary, sizeof(m.binary), "%s", s->binary);
		snprintf(m.symbol, sizeof(m.symbol), "%s", s->symbol);
		h.h.type = CP_MD_HOOK;
		h.h.size = sizeof(h);
		h.h.ts = ts;
		h.status = CP_HOOK_ATTACHED;
		snprintf(h.name, sizeof(h.name), "probe %.57s", s->symbol);
		snprintf(h.detail, sizeof(h.detail), "uprobe+uretprobe%s, %u process%s: %.80s",
			 s->how == TLS_AT_ENTRY ? " (stepped)" : "", s->nprocs,
			 s->nprocs == 1 ? "" : "es", s->binary);
		err = recording_writer__append(w, &m.h);
		if (!err)
			err = recording_writer__append(w, &h.h);
		if (err)
			return err;
		*records += 2;
	}
	return 0;
}

void rec_probes__destroy(struct rec_probes *p, struct rec_unlinker *u)
{
	if (!p)
		return;
	for (int i = 0; i < p->nlinks; i++)
		rec_unlinker__put(u, p->links[i]);
	free(p);
}
