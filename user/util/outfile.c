// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Output files and directories (outfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "util.h"

int output__open(const char *path, struct stat *st)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600), err;

	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	if (S_ISREG(st->st_mode) && (st->st_uid != geteuid() || st->st_nlink > 1)) {
		close(fd);
		return -EEXIST;
	}
	if (S_ISREG(st->st_mode) && (ftruncate(fd, 0) < 0 || fchmod(fd, 0600) < 0)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

const char *output__why(int err)
{
	if (err == -ELOOP)
		return "it is a symbolic link (not followed)";
	if (err == -EEXIST)
		return "an existing file another user owns, or with other hard links (not "
		       "overwritten)";
	return strerror(-err);
}

/* A temporary name beside name: hidden, and unlikely to be taken (O_EXCL
 * decides). */
static void tmp_name(char *buf, size_t len, const char *name, unsigned try)
{
	uint64_t r = hash__u64(clock__mono_ns(), (uint64_t)getpid() << 16 | try);

	snprintf(buf, len, ".%.*s.%08x.tmp", NAME_MAX - 15, name, (unsigned)r);
}

int outfile__create(struct outfile *o, int dirfd, const char *name)
{
	memset(o, 0, sizeof(*o));
	o->dirfd = dirfd;
	o->fd = -1;
	if (!*name || strlen(name) > NAME_MAX || strchr(name, '/'))
		return -EINVAL;
	snprintf(o->name, sizeof(o->name), "%s", name);
	for (unsigned try = 0; o->fd < 0 && try < 64; try++) {
		tmp_name(o->tmp, sizeof(o->tmp), name, try);
		o->fd = openat(dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			       0600);
		if (o->fd < 0 && errno != EEXIST)
			break;
	}
	if (o->fd < 0) {
		o->tmp[0] = '\0';
		return -errno;
	}
	/* 0600 whatever the umask took away */
	if (fchmod(o->fd, 0600) < 0) {
		int err = -errno;

		outfile__close(o, err);
		return err;
	}
	return 0;
}

/* A device, a FIFO or a socket that path names, written as it is. */
static int open_in_place(struct outfile *o, const char *base)
{
	struct stat st;

	o->fd = openat(o->dirfd, base, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	if (o->fd < 0)
		return -errno;
	if (fstat(o->fd, &st) < 0 || S_ISREG(st.st_mode)) { /* changed under us */
		close(o->fd);
		o->fd = -1;
		return -EEXIST;
	}
	return 0;
}

int outfile__open(struct outfile *o, const char *path)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	char dir[PATH_MAX];
	struct stat st;
	int dirfd, err;

	memset(o, 0, sizeof(*o));
	o->dirfd = o->fd = -1;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return -EISDIR;
	if (strlen(base) > NAME_MAX)
		return -ENAMETOOLONG;
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	if (!fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW)) {
		if (S_ISLNK(st.st_mode))
			err = -ELOOP;
		else if (S_ISDIR(st.st_mode))
			err = -EISDIR;
		else if (S_ISREG(st.st_mode) && (st.st_uid != geteuid() || st.st_nlink > 1))
			err = -EEXIST;
		else if (!S_ISREG(st.st_mode))
			err = 1;
		else
			err = 0;
	} else {
		err = errno == ENOENT ? 0 : -errno;
	}
	if (err == 1) {
		o->dirfd = dirfd;
		err = open_in_place(o, base);
		o->dirfd = -1;
	} else if (!err) {
		err = outfile__create(o, dirfd, base);
		o->replace = true;
	}
	if (err || !o->tmp[0]) {
		close(dirfd);
		o->dirfd = -1;
	} else {
		o->own_dir = true;
	}
	return err;
}

void outfile__stdout(struct outfile *o)
{
	memset(o, 0, sizeof(*o));
	o->dirfd = -1;
	o->fd = STDOUT_FILENO;
	o->keep_fd = true;
}

static ssize_t stream_write(void *cookie, const char *buf, size_t len)
{
	struct outfile *o = cookie;
	size_t done = 0;

	while (!o->err && done < len) {
		ssize_t n = write(o->fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			o->err = n < 0 ? -errno : -ENOSPC;
		else
			done += (size_t)n;
	}
	return o->err ? 0 : (ssize_t)len; /* 0: stdio marks the stream failed */
}

static int stream_close(void *cookie)
{
	return 0; /* the fd is outfile__close's */
}

FILE *outfile__stream(struct outfile *o)
{
	cookie_io_functions_t io = {.write = stream_write, .close = stream_close};

	if (o->f)
		return o->f;
	o->f = fopencookie(o, "w", io);
	/* a terminal sees report's lines as they come, as stdio's stdout would */
	if (o->f)
		setvbuf(o->f, NULL, o->keep_fd && isatty(o->fd) ? _IOLBF : _IOFBF, 1 << 16);
	return o->f;
}

int outfile__take(struct outfile *o)
{
	int fd = o->fd;

	o->fd = -1;
	return fd;
}

static int place(struct outfile *o)
{
	if (o->replace)
		return renameat(o->dirfd, o->tmp, o->dirfd, o->name) < 0 ? -errno : 0;
	if (!renameat2(o->dirfd, o->tmp, o->dirfd, o->name, RENAME_NOREPLACE))
		return 0;
	if (errno != EINVAL)
		return -errno;
	/* a file system without RENAME_NOREPLACE: a link never replaces either */
	if (linkat(o->dirfd, o->tmp, o->dirfd, o->name, 0) < 0)
		return -errno;
	unlinkat(o->dirfd, o->tmp, 0);
	return 0;
}

int outfile__close(struct outfile *o, int err)
{
	if (o->f) {
		if (fflush(o->f) && !o->err)
			o->err = -errno ?: -EIO;
		fclose(o->f);
		o->f = NULL;
	}
	if (o->fd >= 0 && !o->keep_fd) {
		/* a write the file system took late (NFS, a quota) fails here */
		if (!o->err && !err && fsync(o->fd) < 0 && errno != EINVAL && errno != EROFS)
			o->err = -errno;
		if (close(o->fd) < 0 && !o->err)
			o->err = -errno;
	}
	o->fd = -1;
	err = o->err ?: err;
	if (o->tmp[0]) {
		if (!err)
			err = place(o);
		if (err)
			unlinkat(o->dirfd, o->tmp, 0);
		o->tmp[0] = '\0';
	}
	if (o->own_dir)
		close(o->dirfd);
	o->own_dir = false;
	o->dirfd = -1;
	return err;
}

int outdir__open(const char *path, char *why, size_t len)
{
	bool made = !mkdir(path, 0700);
	struct outfile probe;
	struct stat st;
	int fd, err;

	why[0] = '\0';
	if (!made && errno != EEXIST) {
		err = -errno;
		snprintf(why, len, "cannot create it: %s", strerror(-err));
		return err;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		if (!lstat(path, &st) && S_ISLNK(st.st_mode))
			snprintf(why, len, "it is a symbolic link (not followed)");
		else if (err == -ENOTDIR)
			snprintf(why, len, "not a directory");
		else
			snprintf(why, len, "%s", strerror(-err));
		return err;
	}
	if (made && fchmod(fd, 0700) < 0) /* the umask's part undone */
		goto fail;
	if (fstat(fd, &st) < 0)
		goto fail;
	if (st.st_uid != geteuid()) {
		snprintf(why, len, "owned by uid %u, not by this user (uid %u)",
			 (unsigned)st.st_uid, (unsigned)geteuid());
		err = -EPERM;
	} else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, len, "writable by group or others (mode %04o)",
			 (unsigned)(st.st_mode & 07777));
		err = -EPERM;
	} else if (!(st.st_mode & S_IWUSR)) {
		snprintf(why, len, "not writable (mode %04o)", (unsigned)(st.st_mode & 07777));
		err = -EACCES;
	} else {
		/* a read-only mount: a file made and removed says so; a full
		 * disk is not a refusal (it may have room later) */
		err = outfile__create(&probe, fd, "probe");
		if (!err)
			outfile__close(&probe, -ECANCELED);
		if (err == -ENOSPC || err == -EDQUOT)
			err = 0;
		if (err)
			snprintf(why, len, "not writable: %s", strerror(-err));
	}
	if (!err)
		return fd;
	close(fd);
	return err;
fail:
	err = -errno;
	snprintf(why, len, "%s", strerror(-err));
	close(fd);
	return err;
}
