// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Argument values and input discovery for report and diff (report_cmd.h).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "msg.h"
#include "report_cmd.h"

/* "2024-05-01T12:00:00[.frac](Z|±hh:mm)" or with a space, no zone = UTC */
static int parse_rfc3339(const char *s, uint64_t *ns)
{
	struct tm tm = {0};
	const char *p;
	uint64_t frac = 0, scale = 1000000000ull;
	long off = 0;
	time_t t;

	p = strptime(s, "%Y-%m-%d", &tm);
	if (!p || (*p != 'T' && *p != 't' && *p != ' '))
		return -EINVAL;
	p = strptime(p + 1, "%H:%M:%S", &tm);
	if (!p)
		return -EINVAL;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		while (isdigit((unsigned char)*p)) {
			if (scale > 1) {
				scale /= 10;
				frac += (uint64_t)(*p - '0') * scale;
			}
			p++;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm, n = 0;

		if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5)
			return -EINVAL;
		off = (hh * 3600L + mm * 60L) * (*p == '+' ? 1 : -1);
		p += 6;
	}
	if (*p)
		return -EINVAL;
	t = timegm(&tm);
	if (t == (time_t)-1 || t - off < 0)
		return -EINVAL;
	*ns = (uint64_t)(t - off) * 1000000000ull + frac;
	return 0;
}

int parse_time_kind(const char *s, uint64_t *ns, bool *realtime)
{
	char *end;
	double v;

	*realtime = true;
	if (!s || !*s)
		return -EINVAL;
	if (!parse_rfc3339(s, ns))
		return 0;
	if (!parse_duration(s, ns)) {
		*realtime = false;
		return 0;
	}
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0 || v > 1.8e10)
		return -EINVAL;
	*ns = (uint64_t)llround(v * 1e9);
	return 0;
}

int parse_time(const char *s, uint64_t *ns)
{
	bool realtime;

	return parse_time_kind(s, ns, &realtime);
}

struct list {
	char **v;
	int n, cap;
};

static int list__add(struct list *l, const char *path)
{
	char *s;

	if (l->n + 2 > l->cap) {
		int cap = l->cap ? l->cap * 2 : 16;
		char **v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	s = strdup(path);
	if (!s)
		return -ENOMEM;
	l->v[l->n++] = s;
	l->v[l->n] = NULL;
	return 0;
}

static void warn_input(struct engine *e, const char *path, const char *what)
{
	if (e)
		engine__warn(e, "%s: %s", path, what);
	else
		cp_error(NULL, "%s: %s", path, what);
}

static int skip_dot(const struct dirent *d)
{
	return strcmp(d->d_name, ".") && strcmp(d->d_name, "..");
}

/* Iterative would need a stack of its own; directory depth is bounded by
 * PATH_MAX, so plain recursion is fine here. */
static int walk(struct list *l, const char *dir, struct engine *e)
{
	struct dirent **names = NULL;
	int n, err = 0;

	n = scandir(dir, &names, skip_dot, alphasort);
	if (n < 0) {
		char msg[160];

		snprintf(msg, sizeof(msg), "cannot read directory: %s", strerror(errno));
		warn_input(e, dir, msg);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		char *path = NULL;
		struct stat st;

		if (!err && asprintf(&path, "%s/%s", dir, names[i]->d_name) < 0)
			err = -ENOMEM;
		if (!err && !lstat(path, &st)) {
			if (S_ISDIR(st.st_mode))
				err = walk(l, path, e);
			else if (S_ISREG(st.st_mode))
				err = list__add(l, path);
		}
		free(path);
		free(names[i]);
	}
	free(names);
	return err;
}

int input_list__collect(char *const *paths, int npaths, struct engine *e, char ***files,
			int *nfiles)
{
	struct list l = {0};
	int err = 0;

	for (int i = 0; i < npaths && !err; i++) {
		struct stat st;

		if (stat(paths[i], &st)) {
			char msg[160];

			snprintf(msg, sizeof(msg), "cannot open: %s", strerror(errno));
			warn_input(e, paths[i], msg);
		} else if (S_ISDIR(st.st_mode)) {
			err = walk(&l, paths[i], e);
		} else if (S_ISREG(st.st_mode)) {
			err = list__add(&l, paths[i]);
		} else {
			warn_input(e, paths[i], "not a regular file or directory, skipped");
		}
	}
	if (!err && !l.v) {
		l.v = calloc(1, sizeof(*l.v)); /* an empty list is still a list */
		if (!l.v)
			err = -ENOMEM;
	}
	if (err) {
		input_list__free(l.v);
		return err;
	}
	*files = l.v;
	*nfiles = l.n;
	return 0;
}

void input_list__free(char **files)
{
	for (int i = 0; files && files[i]; i++)
		free(files[i]);
	free(files);
}
