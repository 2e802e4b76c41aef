// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* What the recorder learns from /proc and /sys. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "record_int.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

int64_t rec_meta__realtime_offset(void)
{
	struct timespec a, m, b;

	/* bracket the monotonic read to halve the error */
	clock_gettime(CLOCK_REALTIME, &a);
	clock_gettime(CLOCK_MONOTONIC, &m);
	clock_gettime(CLOCK_REALTIME, &b);
	int64_t rt = ((int64_t)a.tv_sec * 1000000000ll + a.tv_nsec +
		      (int64_t)b.tv_sec * 1000000000ll + b.tv_nsec) /
		     2;
	return rt - ((int64_t)m.tv_sec * 1000000000ll + m.tv_nsec);
}

ssize_t rec_meta__read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, total = 0;

	if (fd < 0)
		return -errno;
	while (total < (ssize_t)cap - 1 && (n = read(fd, buf + total, cap - 1 - total)) > 0)
		total += n;
	close(fd);
	buf[total] = 0;
	return total;
}

static int grow(void **v, size_t *cap, size_t elem)
{
	size_t ncap = *cap ? 2 * *cap : 64;
	void *nv = realloc(*v, ncap * elem);

	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

ssize_t rec_meta__processes(struct rec_meta_pp **out)
{
	struct rec_meta_pp *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir("/proc");

	*out = NULL;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[300], stat[512], *p;
		int ppid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		if (rec_meta__read_small(path, stat, sizeof(stat)) <= 0 || !(p = strrchr(stat, ')')) ||
		    sscanf(p + 1, " %*c %d", &ppid) != 1)
			continue; /* gone meanwhile */
		if (n == cap && grow((void **)&v, &cap, sizeof(*v))) {
			free(v);
			closedir(d);
			return -ENOMEM;
		}
		v[n].pid = atoi(de->d_name);
		v[n++].ppid = ppid;
	}
	closedir(d);
	*out = v;
	return (ssize_t)n;
}

static void chomp(char *s)
{
	size_t n = strlen(s);

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
}

static int cpus__read(struct rec_meta_host *m)
{
	int n = sysconf(_SC_NPROCESSORS_CONF);
	char line[512], model[96] = "", path[128], buf[64];
	int cur = -1;
	FILE *f;

	if (n <= 0)
		n = 1;
	m->cpus = calloc(n, sizeof(*m->cpus));
	if (!m->cpus)
		return -ENOMEM;
	m->ncpus = n;
	for (int i = 0; i < n; i++) {
		m->cpus[i].cpu = i;
		m->cpus[i].capacity = 1024;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cpu_capacity", i);
		if (rec_meta__read_small(path, buf, sizeof(buf)) > 0)
			m->cpus[i].capacity = strtoul(buf, NULL, 10);
		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu%d/cpufreq/cpuinfo_max_freq", i);
		if (rec_meta__read_small(path, buf, sizeof(buf)) > 0)
			m->cpus[i].mhz = strtoul(buf, NULL, 10) / 1000;
	}
	f = fopen("/proc/cpuinfo", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *v = strchr(line, ':');

		if (!v)
			continue;
		v++;
		while (*v == ' ' || *v == '\t')
			v++;
		chomp(v);
		if (!strncmp(line, "processor", 9))
			cur = atoi(v);
		else if (!strncmp(line, "model name", 10) && cur >= 0 && cur < n)
			snprintf(m->cpus[cur].model, sizeof(m->cpus[cur].model), "%s", v);
		else if (!strncmp(line, "cpu MHz", 7) && cur >= 0 && cur < n && !m->cpus[cur].mhz)
			m->cpus[cur].mhz = (uint32_t)(atof(v) + 0.5);
		else if (!strncmp(line, "model name", 10))
			snprintf(model, sizeof(model), "%s", v);
	}
	fclose(f);
	return 0;
}

int rec_meta__host(struct rec_meta_host *m, int argc, char **argv)
{
	struct utsname u;
	size_t len = 1;

	memset(m, 0, sizeof(*m));
	if (uname(&u) == 0) {
		snprintf(m->host, sizeof(m->host), "%s", u.nodename);
		snprintf(m->kernel, sizeof(m->kernel), "%s", u.release);
	}
	if (rec_meta__read_small("/proc/sys/kernel/random/boot_id", m->boot_id, sizeof(m->boot_id)) > 0)
		chomp(m->boot_id);
	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	m->cmdline = calloc(1, len + 16);
	if (!m->cmdline)
		return -ENOMEM;
	strcpy(m->cmdline, "critpath");
	for (int i = 0; i < argc; i++) {
		strcat(m->cmdline, " ");
		strcat(m->cmdline, argv[i]);
	}
	return cpus__read(m);
}

void rec_meta__host_free(struct rec_meta_host *m)
{
	free(m->cmdline);
	free(m->cpus);
	m->cmdline = NULL;
	m->cpus = NULL;
}

bool rec_meta__alive(pid_t pid)
{
	char path[64], buf[512], *p;

	if (kill(pid, 0) && errno == ESRCH)
		return false;
	/* a zombie is gone for our purposes */
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (rec_meta__read_small(path, buf, sizeof(buf)) <= 0)
		return false;
	p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

const char *rec_meta__missing_privilege(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {};
	uint64_t eff;

	if (geteuid() == 0)
		return NULL;
	if (syscall(SYS_capget, &h, d))
		return "needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN)";
	eff = (uint64_t)d[1].effective << 32 | d[0].effective;
	if (eff & (1ull << CAP_SYS_ADMIN))
		return NULL;
	if (!(eff & (1ull << CAP_BPF)) || !(eff & (1ull << CAP_PERFMON)))
		return "needs root, or CAP_BPF and CAP_PERFMON (missing)";
	return NULL;
}

static uint64_t records_written;

uint64_t rec_meta__records(void)
{
	return records_written;
}

static int md_append(struct recording_writer *w, const struct cp_hdr *h)
{
	int err = recording_writer__append(w, h);

	if (!err)
		records_written++;
	return err;
}

static void hdr_init(struct cp_hdr *h, uint16_t type, uint16_t size, pid_t pid, pid_t tid,
		     uint64_t ts)
{
	h->type = type;
	h->size = size;
	h->cpu = 0;
	h->pid = pid;
	h->tid = tid;
	h->ts = ts;
}

int rec_meta__mapped(pid_t pid, const char *name, bool prefix, char *out, size_t n)
{
	char maps[64], line[PATH_MAX + 128];
	size_t len = strlen(name);
	int err = -ENOENT;
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	f = fopen(maps, "re");
	if (!f)
		return -ESRCH;
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/'), *base;

		if (!path)
			continue;
		path[strcspn(path, "\n")] = 0;
		base = strrchr(path, '/') + 1;
		if (strncmp(base, name, len) || (!prefix && base[len]) || strlen(path) >= n)
			continue;
		memcpy(out, path, strlen(path) + 1);
		err = 0;
		break;
	}
	fclose(f);
	return err;
}

int rec_meta__thread(struct recording_writer *w, pid_t pid, pid_t tid, uint64_t ts)
{
	struct cp_md_thread r = {};
	char path[96], buf[CP_COMM_LEN + 2];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	if (rec_meta__read_small(path, buf, sizeof(buf)) < 0)
		return -ESRCH;
	chomp(buf);
	hdr_init(&r.h, CP_MD_THREAD, sizeof(r), pid, tid, ts);
	memcpy(r.comm, buf, strnlen(buf, CP_COMM_LEN - 1));
	return md_append(w, &r.h);
}

static int threads__write(struct recording_writer *w, pid_t pid, uint64_t ts)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -ESRCH;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		err = rec_meta__thread(w, pid, atoi(de->d_name), ts);
		if (err == -ESRCH)
			err = 0; /* exited meanwhile */
		if (err)
			break;
	}
	closedir(d);
	return err;
}

struct sock_row {
	unsigned long inode;
	int fd;
	bool found;
	uint16_t family, lport, rport;
	uint8_t type, listening;
	uint8_t laddr[CP_ADDR_LEN], raddr[CP_ADDR_LEN];
};

static void hex_addr(const char *s, uint8_t *out, int words)
{
	for (int i = 0; i < words; i++) {
		char w[9];
		uint32_t v;

		memcpy(w, s + 8 * i, 8);
		w[8] = 0;
		v = strtoul(w, NULL, 16);
		memcpy(out + 4 * i, &v, 4); /* the kernel prints the raw word */
	}
}

static int row_cmp(const void *a, const void *b)
{
	const struct sock_row *x = a, *y = b;

	return x->inode < y->inode ? -1 : x->inode > y->inode;
}

static int row_fd_cmp(const void *a, const void *b)
{
	const struct sock_row *x = a, *y = b;

	return (x->fd > y->fd) - (x->fd < y->fd);
}

/* A line's inode without parsing the rest (tables of tens of thousands of
 * lines). */
static unsigned long line_inode(const char *s)
{
	for (int f = 0; f < 9; f++) {
		while (*s == ' ')
			s++;
		while (*s && *s != ' ')
			s++;
	}
	return strtoul(s, NULL, 10);
}

static size_t net_table_scan(pid_t pid, const char *table, uint16_t family, uint8_t type,
			     struct sock_row *rows, size_t n)
{
	char path[96], line[512], la[40], ra[40];
	unsigned int lp, rp, st;
	unsigned long ino;
	size_t found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/net/%s", pid, table);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f)) { /* the header */
		fclose(f);
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		struct sock_row key = {.inode = line_inode(line)}, *row;

		if (!key.inode)
			continue;
		row = bsearch(&key, rows, n, sizeof(*rows), row_cmp);
		if (!row || row->found ||
		    sscanf(line,
			   " %*d: %39[0-9A-Fa-f]:%x %39[0-9A-Fa-f]:%x %x %*s %*s %*s %*u %*u %lu",
			   la, &lp, ra, &rp, &st, &ino) != 6 ||
		    ino != row->inode)
			continue;
		/* every descriptor of that socket (dup'd ones too) */
		while (row > rows && row[-1].inode == ino)
			row--;
		for (; row < rows + n && row->inode == ino; row++) {
			row->found = true;
			row->family = family;
			row->type = type;
			row->lport = lp;
			row->rport = rp;
			hex_addr(la, row->laddr, family == AF_INET6 ? 4 : 1);
			hex_addr(ra, row->raddr, family == AF_INET6 ? 4 : 1);
			row->listening = type == SOCK_STREAM && st == 0x0A; /* TCP_LISTEN */
			found++;
		}
	}
	fclose(f);
	return found;
}

static void (*listen_fn)(void *ctx, uint16_t port, pid_t pid, bool udp);
static void *listen_ctx;

void rec_meta__on_listen(void (*fn)(void *ctx, uint16_t port, pid_t pid, bool udp), void *ctx)
{
	listen_fn = fn;
	listen_ctx = ctx;
}

static ssize_t socket_fds(pid_t pid, struct sock_row **out)
{
	char path[64], fpath[352], link[64];
	struct sock_row *rows = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	*out = NULL;
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		unsigned long inode;
		ssize_t len;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		snprintf(fpath, sizeof(fpath), "%s/%s", path, de->d_name);
		len = readlink(fpath, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = 0;
		if (sscanf(link, "socket:[%lu]", &inode) != 1)
			continue;
		if (n == cap && grow((void **)&rows, &cap, sizeof(*rows))) {
			free(rows);
			closedir(d);
			return -ENOMEM;
		}
		memset(&rows[n], 0, sizeof(rows[n]));
		rows[n].inode = inode;
		rows[n++].fd = atoi(de->d_name);
	}
	closedir(d);
	if (n)
		qsort(rows, n, sizeof(*rows), row_cmp);
	*out = rows;
	return (ssize_t)n;
}

/* A socket record per socket fd of pid, each /proc/PID/net table read once. */
static int sockets__write(struct recording_writer *w, pid_t pid, uint64_t ts)
{
	static const struct {
		const char *name;
		uint16_t family;
		uint8_t type;
	} tables[] = {{"tcp", AF_INET, SOCK_STREAM},
		      {"tcp6", AF_INET6, SOCK_STREAM},
		      {"udp", AF_INET, SOCK_DGRAM},
		      {"udp6", AF_INET6, SOCK_DGRAM}};
	struct sock_row *rows;
	ssize_t n = socket_fds(pid, &rows);
	size_t left;
	int err = 0;

	if (n <= 0)
		return (int)n;
	left = (size_t)n;
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]) && left; t++)
		left -= net_table_scan(pid, tables[t].name, tables[t].family, tables[t].type, rows,
				       (size_t)n);
	qsort(rows, (size_t)n, sizeof(*rows), row_fd_cmp); /* written in fd order */
	for (ssize_t i = 0; i < n && !err; i++) {
		const struct sock_row *row = &rows[i];
		struct cp_md_socket r = {};

		hdr_init(&r.h, CP_MD_SOCKET, sizeof(r), pid, pid, ts);
		r.fd = row->fd;
		/* not in the inet tables: unix or other */
		r.family = row->found ? row->family : AF_UNIX;
		r.lport = row->lport;
		r.rport = row->rport;
		r.sock_type = row->type;
		r.listening = row->listening;
		if (row->listening && listen_fn)
			listen_fn(listen_ctx, row->lport, pid, false);
		/* a datagram server's socket */
		if (row->found && row->type == SOCK_DGRAM && row->lport && !row->rport && listen_fn)
			listen_fn(listen_ctx, row->lport, pid, true);
		memcpy(r.laddr, row->laddr, CP_ADDR_LEN);
		memcpy(r.raddr, row->raddr, CP_ADDR_LEN);
		err = md_append(w, &r.h);
	}
	free(rows);
	return err;
}

static int thread_seen(struct recording_writer *w, pid_t pid, const char *comm, uint64_t ts,
		       const struct rec_meta_seen *seen)
{
	struct cp_md_thread r = {};

	hdr_init(&r.h, CP_MD_THREAD, sizeof(r), pid, seen->tid, ts);
	memcpy(r.comm, comm, strnlen(comm, CP_COMM_LEN - 1));
	return md_append(w, &r.h);
}

int rec_meta__process(struct recording_writer *w, pid_t pid, uint64_t ts,
		      const struct rec_meta_seen *seen)
{
	char path[64], comm[CP_COMM_LEN + 2] = "", stat[512], exe[4096];
	static char cmdline[8192];
	struct cp_md_process *r;
	ssize_t exe_len, cmd_len;
	uint32_t ppid = seen ? seen->ppid : 0;
	bool gone;
	size_t size;
	char *p;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	gone = rec_meta__read_small(path, comm, sizeof(comm)) < 0;
	if (gone && !(seen && seen->comm))
		return -ESRCH;
	if (gone)
		snprintf(comm, sizeof(comm), "%.*s", CP_COMM_LEN - 1, seen->comm);
	chomp(comm);
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (rec_meta__read_small(path, stat, sizeof(stat)) > 0 && (p = strrchr(stat, ')')))
		sscanf(p + 1, " %*c %u", &ppid);
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	exe_len = readlink(path, exe, sizeof(exe) - 1);
	/* a zombie has no exe link: the file it exec'd, resolved from / */
	if (exe_len < 0 && seen && seen->exe) {
		if (seen->exe[0] == '/' && realpath(seen->exe, exe))
			exe_len = (ssize_t)strlen(exe);
		else
			exe_len = snprintf(exe, sizeof(exe), "%s", seen->exe);
	}
	if (exe_len < 0)
		exe_len = 0;
	if (exe_len >= (ssize_t)sizeof(exe))
		exe_len = sizeof(exe) - 1;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	cmd_len = rec_meta__read_small(path, cmdline, 4096);
	if (cmd_len < 0)
		cmd_len = 0;
	while (cmd_len > 0 && cmdline[cmd_len - 1] == 0)
		cmd_len--; /* no trailing NUL: arguments are separated, not ended */

	size = CP_ALIGN(sizeof(*r) + exe_len + cmd_len);
	r = calloc(1, size);
	if (!r)
		return -ENOMEM;
	hdr_init(&r->h, CP_MD_PROCESS, size, pid, pid, ts);
	r->ppid = ppid;
	r->exe_len = exe_len;
	r->cmdline_len = cmd_len;
	memcpy(r->comm, comm, strnlen(comm, CP_COMM_LEN - 1));
	memcpy(r->data, exe, exe_len);
	memcpy(r->data + exe_len, cmdline, cmd_len);
	err = md_append(w, &r->h);
	free(r);
	if (err)
		return err;
	err = threads__write(w, pid, ts);
	if (err == -ESRCH && seen)
		return thread_seen(w, pid, comm, ts, seen);
	if (err && err != -ESRCH)
		return err;
	return sockets__write(w, pid, ts);
}
