// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Open → configure → load → attach of the BPF object; tp_btf or raw_tp per
 * hook. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "critpath.skel.h"
#include "critpath_inflight.h"
#include "msg.h"
#include "record_int.h"

#define MAX_HOOKS 64
#define CP_MAX_RINGS 1024
#define RING_MIN (1u << 20)


struct hook {
	char name[64];
	char detail[128];
	uint8_t status;
};

struct rec_bpf {
	struct critpath_bpf *skel;
	struct ring_buffer *rb;
	rec_event_fn fn;
	void *fn_ctx;
	struct hook hooks[MAX_HOOKS];
	int nhooks;
	bool quiet;
	bool lean;		    /* the default capture, not raw_syscalls for every call */
	bool probes;		    /* --probe given: bpf/uprobe.bpf.c loads */
	bool tls;		    /* TLS plaintext capture: bpf/tls.bpf.c loads */
	bool senders;		    /* the cgroup recvmsg programs load (udp_recvmsg4/6) */
	bool uring;		    /* the io_uring programs load (the kernel has io_uring) */
	char uring_off[96];	    /* why its programs are left out, "" when they are not */
	char tls_off[96];	    /* why TLS capture is off, "" when on */
	int ring_fds[CP_MAX_RINGS]; /* one ring buffer per possible CPU */
	int nrings;
	uint32_t ring_bytes; /* each */
};

static struct hook *hook__add(struct rec_bpf *b, const char *name, uint8_t status,
			      const char *detail)
{
	struct hook *h;

	if (b->nhooks >= MAX_HOOKS)
		return NULL;
	h = &b->hooks[b->nhooks++];
	snprintf(h->name, sizeof(h->name), "%s", name);
	snprintf(h->detail, sizeof(h->detail), "%s", detail);
	h->status = status;
	return h;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_WARN && getenv("CRITPATH_DEBUG_BPF"))
		return vfprintf(stderr, fmt, args);
	if (level == LIBBPF_DEBUG && getenv("CRITPATH_DEBUG_BPF"))
		return vfprintf(stderr, fmt, args);
	return 0;
}

/* Whether the kernel has tracepoint tp for tp_btf, asked of libbpf for p,
 * a program of the object: its lookup parses the kernel's BTF once for the
 * load too, where a btf__load_vmlinux_btf of ours took ~50 ms more. */
static bool prog_has_tp(struct bpf_program *p, const char *tp)
{
	return p && !bpf_program__set_attach_target(p, 0, tp);
}

/* tp by its program tp_btf */
#define HAS_TP(b, tp) prog_has_tp((b)->skel->progs.tp##_btf, #tp)

static bool prog_in_capture(const struct rec_bpf *b, const char *name)
{
	if (!strcmp(name, "probe_enter") || !strcmp(name, "probe_return"))
		return b->probes;
	if (!strcmp(name, "tls_enter") || !strcmp(name, "tls_return") ||
	    !strncmp(name, "go_tls_", 7))
		return b->tls;
	if (!strcmp(name, "udp_recvmsg4") || !strcmp(name, "udp_recvmsg6"))
		return b->senders;
	if (!strncmp(name, "io_uring_", 9))
		return b->uring;
	if (!strncmp(name, "sys_enter_btf", 13) || !strncmp(name, "sys_exit_btf", 12) ||
	    !strncmp(name, "sys_enter_raw", 13) || !strncmp(name, "sys_exit_raw", 12))
		return !b->lean;
	if (!strncmp(name, "sock_send_length", 16) || !strncmp(name, "sock_recv_length", 16) ||
	    !strncmp(name, "inet_sock_set_state", 19))
		return b->lean;
	return true;
}

static int hooks__choose(struct rec_bpf *b, bool force_raw, const char *why)
{
	const char *dbg = getenv("CRITPATH_DEBUG_BPF");
	/* =stats: the verifier's time, instructions and stack per program */
	bool stats = dbg && !strcmp(dbg, "stats");
	struct bpf_program *p;

	b->nhooks = 0;
	if (b->lean && (force_raw || !HAS_TP(b, sock_send_length) || !HAS_TP(b, sock_recv_length) ||
			!HAS_TP(b, inet_sock_set_state))) {
		cp_error(rec_cmd, "%s: recording every syscall from raw_syscalls",
			force_raw
			    ? "tp_btf did not load"
			    : "no sock_send_length/sock_recv_length tracepoints (kernel < 6.3)");
		b->lean = false;
	}
	b->skel->rodata->cfg_lean = b->lean;
	/* io_uring's transfers are seen by the socket-layer programs only */
	b->uring = b->lean && !b->uring_off[0] && HAS_TP(b, io_uring_submit_req) &&
		   HAS_TP(b, io_uring_task_add);
	b->skel->rodata->cfg_uring = b->uring;
	if (!b->uring) /* its 16384 preallocated entries, for nothing */
		bpf_map__set_max_entries(b->skel->maps.uring_ops, 1);
	if (b->lean && !b->uring) /* --all-syscalls: not a hook of that capture */
		hook__add(b, "io_uring_submit_req", CP_HOOK_UNAVAILABLE,
			  b->uring_off[0] ? b->uring_off
					  : "not in this kernel (no io_uring): its transfers are "
					    "plain reads and writes");
	bpf_object__for_each_program(p, b->skel->obj)
	{
		const char *name = bpf_program__name(p);
		const char *sec = bpf_program__section_name(p);
		size_t n = strlen(name);
		char base[64];

		if (stats)
			bpf_program__set_log_level(p, 4);
		if (!prog_in_capture(b, name)) {
			bpf_program__set_autoload(p, false);
			continue;
		}
		if (n > 4 && !strcmp(name + n - 4, "_btf")) {
			bool use = !force_raw && prog_has_tp(p, sec + strlen("tp_btf/"));

			bpf_program__set_autoload(p, use);
			snprintf(base, sizeof(base), "%.*s", (int)(n - 4), name);
			if (use) {
				hook__add(b, base, CP_HOOK_ATTACHED, "tp_btf");
			} else {
				char d[128];

				snprintf(d, sizeof(d), "raw_tp (tp_btf %s)",
					 force_raw ? why : "not in kernel BTF");
				hook__add(b, base, CP_HOOK_FALLBACK, d);
			}
		}
	}
	if (b->senders)
		hook__add(b, "udp_recvmsg", CP_HOOK_ATTACHED,
			  "cgroup/recvmsg4+6 on the cgroup v2 root");
	/* raw twins: on exactly where their tp_btf is off */
	bpf_object__for_each_program(p, b->skel->obj)
	{
		const char *name = bpf_program__name(p);
		size_t n = strlen(name);
		struct bpf_program *twin;
		char tn[64];

		if (n <= 4 || strcmp(name + n - 4, "_raw"))
			continue;
		if (!prog_in_capture(b, name)) {
			bpf_program__set_autoload(p, false);
			continue;
		}
		snprintf(tn, sizeof(tn), "%.*s_btf", (int)(n - 4), name);
		twin = bpf_object__find_program_by_name(b->skel->obj, tn);
		bpf_program__set_autoload(p, !twin || !bpf_program__autoload(twin));
	}
	return 0;
}

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef SYS_futex_wake
#define SYS_futex_wake 454
#endif
#ifndef SYS_futex_wait
#define SYS_futex_wait 455
#endif

/* The syscalls recorded, by this host's numbers (bpf/syscalls.bpf.c). */
static const struct {
	long nr;
	uint16_t code;
} sys_traced[] = {
    {SYS_futex, CP_SYSC(INFLIGHT_FUTEX, CP_FUTEX_CALL_FUTEX)},
    {SYS_futex_wait, CP_SYSC(INFLIGHT_FUTEX, CP_FUTEX_CALL_WAIT)},
    {SYS_futex_wake, CP_SYSC(INFLIGHT_FUTEX, CP_FUTEX_CALL_WAKE)},
    {SYS_futex_waitv, CP_SYSC(INFLIGHT_FUTEX, CP_FUTEX_CALL_WAITV)},
#ifdef SYS_accept
    {SYS_accept, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_ACCEPT)},
#endif
    {SYS_accept4, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_ACCEPT4)},
    {SYS_connect, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_CONNECT)},
    {SYS_read, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_READ)},
    {SYS_write, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_WRITE)},
    {SYS_readv, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_READV)},
    {SYS_writev, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_WRITEV)},
    {SYS_recvfrom, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_RECVFROM)},
    {SYS_sendto, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_SENDTO)},
    {SYS_recvmsg, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_RECVMSG)},
    {SYS_sendmsg, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_SENDMSG)},
    {SYS_recvmmsg, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_RECVMMSG)},
    {SYS_sendmmsg, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_SENDMMSG)},
    {SYS_close, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_CLOSE)},
    {SYS_shutdown, CP_SYSC(INFLIGHT_SOCK, CP_SOCK_SHUTDOWN)},
#ifdef SYS_epoll_wait
    {SYS_epoll_wait, CP_SYSC(INFLIGHT_POLL, CP_POLL_EPOLL_WAIT)},
#endif
    {SYS_epoll_pwait, CP_SYSC(INFLIGHT_POLL, CP_POLL_EPOLL_PWAIT)},
#ifdef SYS_epoll_pwait2
    {SYS_epoll_pwait2, CP_SYSC(INFLIGHT_POLL, CP_POLL_EPOLL_PWAIT2)},
#endif
#ifdef SYS_poll
    {SYS_poll, CP_SYSC(INFLIGHT_POLL, CP_POLL_POLL)},
#endif
    {SYS_ppoll, CP_SYSC(INFLIGHT_POLL, CP_POLL_PPOLL)},
#ifdef SYS_select
    {SYS_select, CP_SYSC(INFLIGHT_POLL, CP_POLL_SELECT)},
#endif
    {SYS_pselect6, CP_SYSC(INFLIGHT_POLL, CP_POLL_PSELECT6)},
};

static int skel__open_config(struct rec_bpf *b, const struct rec_bpf_opts *o)
{
	uint64_t ring = (uint64_t)o->buffer_mb << 20;

	b->skel = critpath_bpf__open();
	if (!b->skel)
		return -errno ? -errno : -ENOMEM;
	b->skel->rodata->cfg_payload_bytes = o->payload_bytes;
	b->skel->rodata->cfg_h2_payload_bytes = o->h2_payload_bytes;
	b->skel->rodata->cfg_empty_programs = o->empty_programs;
	b->skel->rodata->cfg_watch_execs = o->watch_execs;
	for (int i = 0; i < o->nwatch_comms && i < CP_WATCH_COMMS; i++) {
		char c[16] = {0};

		strncpy(c, o->watch_comms[i], sizeof(c) - 1); /* as the kernel keeps a comm */
		memcpy((void *)b->skel->rodata->cfg_watch_comm[i], c, sizeof(c));
		b->skel->rodata->cfg_nwatch_comm = (uint32_t)(i + 1);
	}
	b->skel->rodata->cfg_lean = b->lean;
	b->skel->rodata->cfg_tls = b->tls;
	/* --buffer-mb split between the CPUs' rings (powers of 2, 1 MiB at
	 * least) */
	b->nrings = libbpf_num_possible_cpus();
	if (b->nrings <= 0 || b->nrings > CP_MAX_RINGS)
		return b->nrings <= 0 ? b->nrings : -E2BIG;
	b->ring_bytes = RING_MIN;
	while ((uint64_t)b->ring_bytes * 2 * b->nrings <= ring)
		b->ring_bytes *= 2;
	b->skel->rodata->cfg_wakeup_bytes = b->ring_bytes / 8;
	for (size_t i = 0; i < sizeof(sys_traced) / sizeof(sys_traced[0]); i++) {
		long nr = sys_traced[i].nr;

		if (nr >= 0 && nr < (long)(sizeof(b->skel->rodata->cfg_sys_calls) /
					   sizeof(b->skel->rodata->cfg_sys_calls[0])))
			b->skel->rodata->cfg_sys_calls[nr] = sys_traced[i].code;
	}
	return bpf_map__set_max_entries(b->skel->maps.rings, b->nrings);
}

/* The CPUs' ring buffers (created beside the load: premade_main). */
static int rings__make(struct rec_bpf *b)
{
	for (int i = 0; i < b->nrings; i++) {
		int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "cp_ring", 0, 0, b->ring_bytes, NULL);

		if (fd < 0)
			return -errno;
		b->ring_fds[i] = fd;
	}
	return 0;
}

/* The rings into the loaded object's rings map. */
static int rings__insert(struct rec_bpf *b)
{
	int outer = bpf_map__fd(b->skel->maps.rings);

	for (int i = 0; i < b->nrings; i++) {
		uint32_t key = i;

		if (bpf_map_update_elem(outer, &key, &b->ring_fds[i], BPF_ANY))
			return -errno;
	}
	return 0;
}

/* Maps made in a thread while hooks__choose parses the kernel's BTF: the
 * preallocated hashes (an LRU fills its lists at creation: ~40 ms in all)
 * and the rings (~13 ms). libbpf then takes the hashes as made. */
#define MAX_PREMADE 32

struct premade {
	struct rec_bpf *b;
	pthread_t thread;
	int n;
	struct bpf_map *map[MAX_PREMADE];
	int fd[MAX_PREMADE];
	struct {
		enum bpf_map_type type;
		char name[16];
		uint32_t key, value, max, flags;
	} def[MAX_PREMADE];
	int ring_err;
};

static void *premade_main(void *arg)
{
	struct premade *pm = arg;

	for (int i = 0; i < pm->n; i++) {
		LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = pm->def[i].flags);

		/* on failure libbpf creates it, and says why */
		pm->fd[i] = bpf_map_create(pm->def[i].type, pm->def[i].name, pm->def[i].key,
					   pm->def[i].value, pm->def[i].max, &o);
	}
	pm->ring_err = rings__make(pm->b);
	return NULL;
}

/* Starts the thread on the open object's hash maps (their sizes final; not
 * uring_ops, which hooks__choose may shrink). 0: not started. */
static int premade__start(struct premade *pm, struct rec_bpf *b)
{
	struct bpf_map *m;

	pm->b = b;
	bpf_object__for_each_map(m, b->skel->obj)
	{
		enum bpf_map_type t = bpf_map__type(m);

		if ((t != BPF_MAP_TYPE_HASH && t != BPF_MAP_TYPE_LRU_HASH) ||
		    m == b->skel->maps.uring_ops || pm->n >= MAX_PREMADE)
			continue;
		pm->map[pm->n] = m;
		pm->def[pm->n].type = t;
		snprintf(pm->def[pm->n].name, sizeof(pm->def[pm->n].name), "%s", bpf_map__name(m));
		pm->def[pm->n].key = bpf_map__key_size(m);
		pm->def[pm->n].value = bpf_map__value_size(m);
		pm->def[pm->n].max = bpf_map__max_entries(m);
		pm->def[pm->n].flags = bpf_map__map_flags(m);
		pm->n++;
	}
	return !pthread_create(&pm->thread, NULL, premade_main, pm);
}

/* Joins the thread; the object reuses the maps it made. */
static int premade__finish(struct premade *pm)
{
	pthread_join(pm->thread, NULL);
	for (int i = 0; i < pm->n; i++) {
		if (pm->fd[i] < 0)
			continue;
		bpf_map__reuse_fd(pm->map[i], pm->fd[i]); /* a dup: ours is closed */
		close(pm->fd[i]);
	}
	return pm->ring_err;
}

static int skel__reload(struct rec_bpf *b, const struct rec_bpf_opts *o, bool force_raw,
			const char *why)
{
	int err;

	critpath_bpf__destroy(b->skel);
	b->skel = NULL;
	err = skel__open_config(b, o);
	if (err)
		return err;
	hooks__choose(b, force_raw, why);
	return critpath_bpf__load(b->skel);
}

/* Loads without the (optional) TLS programs when they failed. */
static int load_without_tls(struct rec_bpf *b, const struct rec_bpf_opts *o, int err)
{
	snprintf(b->tls_off, sizeof(b->tls_off), "its programs did not load: %s", strerror(-err));
	b->tls = false;
	err = skel__reload(b, o, false, NULL);
	if (err) {
		b->tls = true;
		b->tls_off[0] = '\0';
	}
	return err;
}

static int load_without_uring(struct rec_bpf *b, const struct rec_bpf_opts *o, int err)
{
	snprintf(b->uring_off, sizeof(b->uring_off),
		 "its program did not load (%s): io_uring's transfers are plain reads and writes",
		 strerror(-err));
	err = skel__reload(b, o, false, NULL);
	if (err)
		b->uring_off[0] = '\0';
	return err;
}

int rec_bpf__open_load(struct rec_bpf **out, const struct rec_bpf_opts *o)
{
	struct premade pm = {};
	struct rec_bpf *b;
	int err, ring_err, premade;

	libbpf_set_print(libbpf_quiet);
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (int i = 0; i < CP_MAX_RINGS; i++)
		b->ring_fds[i] = -1;
	b->quiet = o->quiet;
	b->lean = !o->all_syscalls;
	b->probes = o->probes;
	b->tls = o->tls;
	b->senders = true;
	if (!b->tls)
		snprintf(b->tls_off, sizeof(b->tls_off), "off (--no-tls)");
	err = skel__open_config(b, o);
	if (err)
		goto cleanup;
	premade = premade__start(&pm, b);
	hooks__choose(b, false, NULL);
	ring_err = premade ? premade__finish(&pm) : rings__make(b);
	err = critpath_bpf__load(b->skel);
	if (err && b->tls)
		err = load_without_tls(b, o, err);
	if (err && b->uring)
		err = load_without_uring(b, o, err);
	if (err) {
		char why[96];

		/* Some tp_btf program did not load: all hooks fall back to raw_tp. */
		snprintf(why, sizeof(why), "failed to load: %s", strerror(-err));
		err = skel__reload(b, o, true, why);
		if (err && b->senders) {
			b->senders = false;
			err = skel__reload(b, o, true, why);
		}
		if (err) {
			cp_error(rec_cmd,
				"cannot load the BPF programs: %s "
				"(CRITPATH_DEBUG_BPF=1 shows the verifier log)",
				strerror(-err));
			goto cleanup;
		}
	}
	err = ring_err ?: rings__insert(b);
	if (err) {
		cp_error(rec_cmd,
			"cannot create the ring buffers (%u MiB each): %s",
			b->ring_bytes >> 20, strerror(-err));
		goto cleanup;
	}
	for (int i = 0; i < b->nhooks; i++) {
		const struct hook *h = &b->hooks[i];

		if (h->status == CP_HOOK_FALLBACK)
			cp_error(rec_cmd, "hook %s: %s", h->name, h->detail);
		else if (h->status != CP_HOOK_ATTACHED)
			cp_error(rec_cmd, "hook %s: unavailable%s%s", h->name,
				h->detail[0] ? ": " : "", h->detail);
	}
	if (o->tls && !b->tls)
		cp_error(rec_cmd, "hook tls: %s: TLS connections carry ciphertext",
			b->tls_off);
	*out = b;
	return 0;
cleanup:
	rec_bpf__destroy(b);
	return err;
}

/* One bit per tgid in target_bits, changed atomically. */
#define TARGET_PID_LIMIT (1u << 22)

static uint64_t *target_word(struct rec_bpf *b, pid_t pid, uint64_t *bit)
{
	if (pid <= 0 || (uint32_t)pid >= TARGET_PID_LIMIT || !b->skel->bss)
		return NULL;
	*bit = 1ull << (pid & 63);
	return (uint64_t *)&b->skel->bss->target_bits[pid >> 6];
}

int rec_bpf__add_target(struct rec_bpf *b, pid_t pid)
{
	uint64_t bit, *w = target_word(b, pid, &bit);

	if (!w)
		return -EINVAL;
	__atomic_fetch_or(w, bit, __ATOMIC_SEQ_CST);
	return 0;
}

void rec_bpf__listen_port(void *bpf, uint16_t port, pid_t pid, bool udp)
{
	struct rec_bpf *b = bpf;
	uint32_t *slot;

	if (!b || !b->lean || !b->skel->bss)
		return;
	slot = udp ? &b->skel->bss->udp_tgid[port] : &b->skel->bss->listen_tgid[port];
	__atomic_store_n(slot, (uint32_t)pid, __ATOMIC_RELAXED);
}

int rec_bpf__forget_target(struct rec_bpf *b, pid_t pid)
{
	uint64_t bit, *w = target_word(b, pid, &bit);

	if (!w)
		return -EINVAL;
	__atomic_fetch_and(w, ~bit, __ATOMIC_SEQ_CST);
	__atomic_fetch_and((uint64_t *)&b->skel->bss->tls_fd_bits[pid >> 6], ~bit,
			   __ATOMIC_SEQ_CST);
	__atomic_fetch_and((uint64_t *)&b->skel->bss->go_tls_bits[pid >> 6], ~bit,
			   __ATOMIC_SEQ_CST);
	__atomic_fetch_and((uint64_t *)&b->skel->bss->fork_wake_bits[pid >> 6], ~bit,
			   __ATOMIC_SEQ_CST);
	return 0;
}

static int bit_set(struct rec_bpf *b, void *words, pid_t pid)
{
	uint64_t bit;

	if (!target_word(b, pid, &bit))
		return -EINVAL;
	__atomic_fetch_or((uint64_t *)words + (pid >> 6), bit, __ATOMIC_SEQ_CST);
	return 0;
}

int rec_bpf__fork_wakes(struct rec_bpf *b, pid_t pid)
{
	return bit_set(b, b->skel->bss ? b->skel->bss->fork_wake_bits : NULL, pid);
}

int rec_bpf__go_tls(struct rec_bpf *b, pid_t pid)
{
	return bit_set(b, b->skel->bss ? b->skel->bss->go_tls_bits : NULL, pid);
}

static int cgroup2_root(void)
{
	char line[1024], dir[] = "/tmp/critpath-cgroup2.XXXXXX";
	FILE *f = fopen("/proc/self/mounts", "r");
	int fd = -ENOENT;

	while (f && fgets(line, sizeof(line), f)) {
		char dev[256], mnt[512], type[64];

		if (sscanf(line, "%255s %511s %63s", dev, mnt, type) == 3 &&
		    !strcmp(type, "cgroup2")) {
			fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd >= 0)
				break;
			fd = -errno;
		}
	}
	if (f)
		fclose(f);
	if (fd >= 0 || !mkdtemp(dir))
		return fd;
	if (!mount("none", dir, "cgroup2", 0, NULL)) {
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
		umount2(dir, MNT_DETACH);
	} else {
		fd = -errno;
	}
	rmdir(dir);
	return fd;
}

/* The skeleton's links array holds p's link l for destroy(). */
static void skel__keep_link(struct rec_bpf *b, const struct bpf_program *p, struct bpf_link *l)
{
	for (int i = 0; i < b->skel->skeleton->prog_cnt; i++) {
		if (*b->skel->skeleton->progs[i].prog == p) {
			*b->skel->skeleton->progs[i].link = l;
			break;
		}
	}
}

static struct hook *hook__find(struct rec_bpf *b, const char *name)
{
	for (int i = 0; i < b->nhooks; i++)
		if (!strcmp(b->hooks[i].name, name))
			return &b->hooks[i];
	return NULL;
}

/* The cgroup recvmsg programs: every datagram read says its sender.
 * Optional. */
static void senders__attach(struct rec_bpf *b)
{
	struct bpf_program *progs[] = {b->skel->progs.udp_recvmsg4, b->skel->progs.udp_recvmsg6};
	static const char *const fam[] = {"IPv4 UDP", "IPv6 UDP"};
	struct hook *h = hook__find(b, "udp_recvmsg");
	int cg = cgroup2_root(), err[2] = {cg < 0 ? cg : 0, cg < 0 ? cg : 0};
	int failed = 0, which = 0;

	for (int i = 0; cg >= 0 && i < 2; i++) {
		struct bpf_link *l = bpf_program__attach_cgroup(progs[i], cg);

		if (l) {
			skel__keep_link(b, progs[i], l);
			continue;
		}
		err[i] = -errno;
		failed++;
		which = i;
	}
	if (cg >= 0)
		close(cg); /* the links hold the cgroup */
	else
		failed = 2;
	if (!failed || !h)
		return;
	if (failed == 2) {
		h->status = CP_HOOK_UNAVAILABLE;
		snprintf(h->detail, sizeof(h->detail), "%s: %s",
			 cg < 0 ? "no cgroup v2 hierarchy" : "cannot attach to the cgroup v2 root",
			 strerror(-err[0]));
	} else {
		/* one family's reads still say their senders */
		h->status = CP_HOOK_FALLBACK;
		snprintf(h->detail, sizeof(h->detail),
			 "cgroup/recvmsg%c on the cgroup v2 root only (recvmsg%c: %s)",
			 which ? '4' : '6', which ? '6' : '4', strerror(-err[which]));
	}
	cp_error(rec_cmd,
		"hook udp_recvmsg: %s: a read on an unconnected %s socket "
		"takes its sender from the arrivals seen",
		h->detail, failed == 2 ? "UDP" : fam[which]);
}

int rec_bpf__attach(struct rec_bpf *b)
{
	struct bpf_program *p;

	/* exits before entries: an irq context entered with only its entry
	 * hook would stick */
	for (int pass = 0; pass < 2; pass++)
		bpf_object__for_each_program(p, b->skel->obj)
		{
			struct bpf_link *l;

			if (!bpf_program__autoload(p) ||
			    (strstr(bpf_program__name(p), "_exit") != NULL) != (pass == 0))
				continue;
			if (bpf_program__type(p) == BPF_PROG_TYPE_KPROBE ||
			    bpf_program__type(p) == BPF_PROG_TYPE_CGROUP_SOCK_ADDR ||
			    p == b->skel->progs.stage_flush_all)
				continue;
			l = bpf_program__attach(p);
			if (!l) {
				int err = -errno;

				cp_error(rec_cmd, "cannot attach %s (%s): %s",
					bpf_program__name(p), bpf_program__section_name(p),
					strerror(-err));
				return err;
			}
			skel__keep_link(b, p, l);
		}
	if (b->senders)
		senders__attach(b);
	return 0;
}

int rec_bpf__write_hooks(struct rec_bpf *b, struct recording_writer *w, uint64_t ts)
{
	for (int i = 0; i < b->nhooks; i++) {
		struct cp_md_hook r = {};
		int err;

		r.h.type = CP_MD_HOOK;
		r.h.size = sizeof(r);
		r.h.ts = ts;
		r.status = b->hooks[i].status;
		memcpy(r.name, b->hooks[i].name, sizeof(r.name) - 1);
		memcpy(r.detail, b->hooks[i].detail, sizeof(r.detail) - 1);
		err = recording_writer__append(w, &r.h);
		if (err)
			return err;
	}
	return 0;
}

int rec_bpf__probe_progs(struct rec_bpf *b, struct bpf_program **enter,
			 struct bpf_program **ret)
{
	if (!b->probes)
		return -ENOENT;
	*enter = b->skel->progs.probe_enter;
	*ret = b->skel->progs.probe_return;
	return 0;
}

const char *rec_bpf__tls_off(const struct rec_bpf *b)
{
	return b->tls ? NULL : b->tls_off;
}

int rec_bpf__tls_progs(struct rec_bpf *b, bool go, struct bpf_program **enter,
		       struct bpf_program **ret)
{
	if (!b->tls)
		return -ENOENT;
	*enter = go ? b->skel->progs.go_tls_enter : b->skel->progs.tls_enter;
	*ret = go ? b->skel->progs.go_tls_return : b->skel->progs.tls_return;
	return 0;
}

int rec_bpf__nhooks(const struct rec_bpf *b)
{
	return b->nhooks;
}

static int ring__sample(void *ctx, void *data, size_t len)
{
	struct rec_bpf *b = ctx;
	const struct cp_hdr *h = data;
	size_t off;
	int err;

	if (len < sizeof(*h) || h->size > len || h->size < sizeof(*h))
		return 0; /* cannot happen with our programs; never crash on it */
	if (h->type != CP_RING_BATCH)
		return b->fn(b->fn_ctx, h, h->size);
	for (off = h->size; off + sizeof(*h) <= len; off += h->size) {
		h = (const struct cp_hdr *)((const char *)data + off);
		if (h->size < sizeof(*h) || h->size > len - off)
			return 0;
		if (h->type == CP_RING_PAD)
			continue;
		err = b->fn(b->fn_ctx, h, h->size);
		if (err)
			return err;
	}
	return 0;
}

int rec_bpf__ring(struct rec_bpf *b, rec_event_fn fn, void *ctx)
{
	b->fn = fn;
	b->fn_ctx = ctx;
	b->rb = ring_buffer__new(b->ring_fds[0], ring__sample, b, NULL);
	if (!b->rb)
		return -errno;
	for (int i = 1; i < b->nrings; i++)
		if (ring_buffer__add(b->rb, b->ring_fds[i], ring__sample, b))
			return -errno;
	return 0;
}

/* What the CPUs hold staged (bpf/common.h) goes to their rings:
 * the flush program runs on each CPU in turn; a CPU where a program is midway
 * is tried again, a few times (final: until it is done). */
static void stages__flush(struct rec_bpf *b, bool final)
{
	int fd = bpf_program__fd(b->skel->progs.stage_flush_all);

	if (fd < 0)
		return;
	for (int cpu = 0; cpu < b->nrings; cpu++) {
		for (int tries = 0; tries < (final ? 1000 : 3); tries++) {
			LIBBPF_OPTS(bpf_test_run_opts, o, .flags = BPF_F_TEST_RUN_ON_CPU, .cpu = cpu);

			/* an offline CPU (ENXIO) stages nothing */
			if (bpf_prog_test_run_opts(fd, &o) || !o.retval)
				break;
		}
	}
}

int rec_bpf__poll(struct rec_bpf *b, int timeout_ms)
{
	int n;

	stages__flush(b, timeout_ms == 0);
	n = ring_buffer__poll(b->rb, timeout_ms);

	/* records come without wakeups: take what is there */
	if (n < 0)
		return n;
	return ring_buffer__consume(b->rb);
}

int rec_bpf__drops(struct rec_bpf *b, uint64_t *per_cpu, int ncpus)
{
	int n = libbpf_num_possible_cpus();
	uint32_t zero = 0;
	uint64_t *v;

	if (n <= 0)
		return n;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (bpf_map__lookup_elem(b->skel->maps.drops, &zero, sizeof(zero), v, n * sizeof(*v), 0)) {
		int err = -errno;

		free(v);
		return err;
	}
	for (int i = 0; i < ncpus; i++)
		per_cpu[i] = i < n ? v[i] : 0;
	free(v);
	return 0;
}

static int inflight__write(struct recording_writer *w, uint32_t tid, const struct cp_inflight *in)
{
	union {
		struct cp_hdr h;
		struct cp_ev_futex f;
		struct cp_ev_sock s;
		struct cp_ev_poll p;
	} r;

	memset(&r, 0, sizeof(r));
	r.h.pid = in->pid;
	r.h.tid = tid;
	r.h.ts = in->ts;
	r.h.cpu = 0;
	if (in->kind == INFLIGHT_FUTEX) {
		r.h.type = CP_EV_FUTEX;
		r.h.size = sizeof(r.f);
		r.f.enter_ts = in->ts;
		r.f.uaddr = in->arg0;
		r.f.op = in->arg1;
		r.f.val = in->arg2;
		r.f.phase = CP_PHASE_ENTER;
		r.f.call = in->call;
	} else if (in->kind == INFLIGHT_SOCK) {
		r.h.type = CP_EV_SOCK;
		r.h.size = offsetof(struct cp_ev_sock, payload);
		r.s.enter_ts = in->ts;
		r.s.bytes = in->arg1;
		r.s.fd = in->fd;
		r.s.phase = CP_PHASE_ENTER;
		r.s.call = in->call;
		r.s.family = in->family;
		r.s.lport = in->lport;
		r.s.rport = in->rport;
		r.s.tcp_seq = in->tcp_seq;
		r.s.sock_type = in->sock_type;
		memcpy(r.s.laddr, in->laddr, CP_ADDR_LEN);
		memcpy(r.s.raddr, in->raddr, CP_ADDR_LEN);
	} else if (in->kind == INFLIGHT_POLL) {
		r.h.type = CP_EV_POLL;
		r.h.size = sizeof(r.p);
		r.p.enter_ts = in->ts;
		r.p.phase = CP_PHASE_ENTER;
		r.p.call = in->call;
	} else {
		return 0;
	}
	return recording_writer__append(w, &r.h);
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* linux/pidfd.h, 6.9+ */
#endif

static int inflight__lookup(int map_fd, pid_t pid, pid_t tid, struct cp_inflight *in)
{
	int pidfd = syscall(SYS_pidfd_open, tid, PIDFD_THREAD), err;

	if (pidfd < 0 && tid == pid)
		pidfd = syscall(SYS_pidfd_open, tid, 0); /* a kernel before PIDFD_THREAD */
	if (pidfd < 0)
		return -errno;
	err = bpf_map_lookup_elem(map_fd, &pidfd, in) ? -errno : 0;
	close(pidfd);
	return err;
}

int rec_bpf__write_inflight(struct rec_bpf *b, struct recording_writer *w, const pid_t *pids,
			    int npids, uint64_t *written)
{
	int fd = bpf_map__fd(b->skel->maps.inflight);

	for (int i = 0; i < npids; i++) {
		char path[64];
		struct dirent *d;
		DIR *dir;

		snprintf(path, sizeof(path), "/proc/%d/task", pids[i]);
		dir = opendir(path);
		if (!dir)
			continue; /* exited: no call of it is in flight */
		while ((d = readdir(dir))) {
			pid_t tid = atoi(d->d_name);
			struct cp_inflight in;
			int err;

			if (tid <= 0 || inflight__lookup(fd, pids[i], tid, &in) || !in.kind)
				continue;
			err = inflight__write(w, tid, &in);
			if (err) {
				closedir(dir);
				return err;
			}
			(*written)++;
		}
		closedir(dir);
	}
	return 0;
}

void rec_bpf__destroy(struct rec_bpf *b)
{
	if (!b)
		return;
	ring_buffer__free(b->rb);
	critpath_bpf__destroy(b->skel);
	for (int i = 0; i < b->nrings && i < CP_MAX_RINGS; i++)
		if (b->ring_fds[i] >= 0)
			close(b->ring_fds[i]);
	free(b);
}
