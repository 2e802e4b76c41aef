// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* ClickHouse's HTTP interface through libcurl: a statement is the POST's
 * body, an insert's statement is the URL's query and its rows the body. A
 * SELECT runs with wait_end_of_query=1, so an error met after the first
 * rows is an HTTP error too, not text appended to the rows. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ch_rows.h"
#include "clickhouse.h"
#include "commands.h"
#include "curl_dl.h"

#define TIMEOUT_NS 30000000000ull
#define CONNECT_TIMEOUT_MS 5000L

struct ch_conn {
	struct ch_url u;
	CURL *curl;
	struct curl_slist *hdrs;
	char base[512]; /* http://host:port/ */
	char shown[512];
	uint64_t timeout_ns;
	bool (*abort)(void *ctx);
	void *abort_ctx;
	char curl_err[CURL_ERROR_SIZE];
	/* the answer's body */
	char *buf;
	size_t n, cap;
	bool oom;
};

/* --- the URL ------------------------------------------------------------------ */

bool ch_url__is(const char *s)
{
	return s && !strncmp(s, "clickhouse://", 13);
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

/* s[0..n) percent-decoded into out; false: it does not fit or is malformed */
static bool pct_decode(const char *s, size_t n, char *out, size_t outn)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			int h, l;

			if (i + 2 >= n || (h = hexval((unsigned char)s[i + 1])) < 0 ||
			    (l = hexval((unsigned char)s[i + 2])) < 0)
				return false;
			c = h * 16 + l;
			i += 2;
		}
		if (o + 1 >= outn)
			return false;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return true;
}

static int url_bad(char *err, size_t errn, const char *why)
{
	snprintf(err, errn, "%s", why);
	return -EINVAL;
}

int ch_url__parse(const char *url, struct ch_url *u, char *err, size_t errn)
{
	const char *p, *auth_end, *at = NULL, *host, *host_end, *port = NULL, *path, *env;
	unsigned long v;
	char *end;
	size_t n;

	memset(u, 0, sizeof(*u));
	u->port = CH_DEFAULT_PORT;
	if (!ch_url__is(url))
		return url_bad(err, errn, "not a clickhouse:// URL");
	p = url + 13;
	auth_end = p + strcspn(p, "/?#");
	for (const char *q = p; q < auth_end; q++)
		if (*q == '@')
			at = q; /* the last one: a password may hold an '@' */
	host = at ? at + 1 : p;
	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		const char *uend = colon ? colon : at;

		if (!pct_decode(p, (size_t)(uend - p), u->user, sizeof(u->user)))
			return url_bad(err, errn, "a malformed or too long user in the URL");
		if (colon && !pct_decode(colon + 1, (size_t)(at - colon - 1), u->password,
					 sizeof(u->password)))
			return url_bad(err, errn, "a malformed or too long password in the URL");
	}
	if (*host == '[') {
		host_end = memchr(host, ']', (size_t)(auth_end - host));
		if (!host_end)
			return url_bad(err, errn, "no ']' after the IPv6 address in the URL");
		if (host_end + 1 < auth_end && host_end[1] != ':')
			return url_bad(err, errn,
				       "something other than :PORT after ']' in the URL");
		port = host_end + 1 < auth_end ? host_end + 2 : NULL;
		host++;
	} else {
		host_end = memchr(host, ':', (size_t)(auth_end - host));
		if (host_end)
			port = host_end + 1;
		else
			host_end = auth_end;
	}
	n = (size_t)(host_end - host);
	if (!n)
		return url_bad(err, errn, "no host in the URL");
	if (n >= sizeof(u->host))
		return url_bad(err, errn, "the URL's host is too long");
	memcpy(u->host, host, n);
	if (port) {
		if (port == auth_end)
			return url_bad(err, errn, "no port after ':' in the URL");
		errno = 0;
		v = strtoul(port, &end, 10);
		if (end != auth_end || !isdigit((unsigned char)*port) || !v || v > 65535)
			return url_bad(err, errn, "the URL's port is not a number from 1 to 65535");
		u->port = (unsigned)v;
	}
	if (*auth_end != '/')
		return url_bad(err, errn, "no /DATABASE in the URL");
	path = auth_end + 1;
	n = strcspn(path, "?#");
	if (path[n])
		return url_bad(err, errn, "a query or fragment after the URL's database");
	if (!n)
		return url_bad(err, errn, "no database after the URL's '/'");
	if (n >= sizeof(u->db))
		return url_bad(err, errn, "the URL's database name is too long");
	if (isdigit((unsigned char)path[0]))
		return url_bad(err, errn, "the URL's database name starts with a digit");
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)path[i]) && path[i] != '_')
			return url_bad(err, errn,
				       "the URL's database name has a character other "
				       "than letters, digits and '_'");
	memcpy(u->db, path, n);
	if ((env = getenv("CLICKHOUSE_USER")) && *env)
		snprintf(u->user, sizeof(u->user), "%s", env);
	if ((env = getenv("CLICKHOUSE_PASSWORD")))
		snprintf(u->password, sizeof(u->password), "%s", env);
	return 0;
}

/* --- the connection --------------------------------------------------------- */

static size_t on_body(char *p, size_t size, size_t nm, void *ctx)
{
	struct ch_conn *c = ctx;
	size_t n = size * nm;

	if (c->n + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 4096;
		char *b;

		while (cap < c->n + n + 1)
			cap *= 2;
		if (!(b = realloc(c->buf, cap))) {
			c->oom = true;
			return 0; /* curl stops: CURLE_WRITE_ERROR */
		}
		c->buf = b;
		c->cap = cap;
	}
	memcpy(c->buf + c->n, p, n);
	c->n += n;
	c->buf[c->n] = '\0';
	return n;
}

static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct ch_conn *c = ctx;

	return c->abort && c->abort(c->abort_ctx);
}

struct ch_conn *ch__open(const char *url, char *err, size_t errn)
{
	struct ch_conn *c = calloc(1, sizeof(*c));
	const char *why;
	char ua[64];
	bool v6;

	if (!c) {
		snprintf(err, errn, "out of memory");
		return NULL;
	}
	if (ch_url__parse(url, &c->u, err, errn))
		goto fail;
	if ((why = curl_dl__load())) {
		snprintf(err, errn, "%s", why);
		goto fail;
	}
	if (!(c->curl = cu.easy_init())) {
		snprintf(err, errn, "out of memory");
		goto fail;
	}
	/* curl's own 100-continue would wait a second for each big insert */
	if (!(c->hdrs = cu.slist_append(NULL, "Expect:"))) {
		snprintf(err, errn, "out of memory");
		goto fail;
	}
	v6 = strchr(c->u.host, ':');
	snprintf(c->base, sizeof(c->base), "http://%s%s%s:%u/", v6 ? "[" : "", c->u.host,
		 v6 ? "]" : "", c->u.port);
	snprintf(c->shown, sizeof(c->shown), "clickhouse://%s%s%s:%u/%s", v6 ? "[" : "", c->u.host,
		 v6 ? "]" : "", c->u.port, c->u.db);
	c->timeout_ns = TIMEOUT_NS;
	snprintf(ua, sizeof(ua), "critpath/%s", CRITPATH_VERSION);
	cu.easy_setopt(c->curl, CURLOPT_USERAGENT, ua);
	cu.easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->hdrs);
	cu.easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	cu.easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->curl_err);
	cu.easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
	cu.easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
	cu.easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	cu.easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
	cu.easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	cu.easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	cu.easy_setopt(c->curl, CURLOPT_PROXY, ""); /* ClickHouse is near: no $http_proxy */
	if (c->u.user[0]) {
		cu.easy_setopt(c->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		cu.easy_setopt(c->curl, CURLOPT_USERNAME, c->u.user);
		cu.easy_setopt(c->curl, CURLOPT_PASSWORD, c->u.password);
	}
	return c;
fail:
	ch__close(c);
	return NULL;
}

void ch__close(struct ch_conn *c)
{
	if (!c)
		return;
	if (c->curl)
		cu.easy_cleanup(c->curl);
	if (c->hdrs)
		cu.slist_free_all(c->hdrs);
	explicit_bzero(c->u.password, sizeof(c->u.password));
	free(c->buf);
	free(c);
}

const char *ch__db(const struct ch_conn *c)
{
	return c->u.db;
}

const char *ch__shown(const struct ch_conn *c)
{
	return c->shown;
}

void ch__set_timeout(struct ch_conn *c, uint64_t ns)
{
	c->timeout_ns = ns;
}

void ch__set_abort(struct ch_conn *c, bool (*abort)(void *ctx), void *ctx)
{
	c->abort = abort;
	c->abort_ctx = ctx;
}

static int errno_of(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_ABORTED_BY_CALLBACK:
		return -ECANCELED;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

/* The server's message: its first line, the stack trace newer servers add
 * left out */
static void server_error(struct ch_conn *c, long code, char *err, size_t errn)
{
	size_t n = c->buf ? strcspn(c->buf, "\n") : 0;

	while (n && isspace((unsigned char)c->buf[n - 1]))
		n--;
	if (n > 400)
		n = 400;
	if (n)
		snprintf(err, errn, "%s: HTTP %ld: %.*s", c->shown, code, (int)n, c->buf);
	else
		snprintf(err, errn, "%s: HTTP %ld with no message", c->shown, code);
}

/* One POST to url; the answer in c->buf[0..c->n). fresh: on a connection
 * of its own, as an insert must be: on a reused one that dies before an
 * answer, curl sends the request again by itself, and an insert that had
 * landed would be stored twice. */
static int post(struct ch_conn *c, const char *url, const void *body, size_t n, bool fresh,
		char *err, size_t errn)
{
	long code = 0;
	CURLcode rc;

	c->n = 0;
	c->oom = false;
	c->curl_err[0] = '\0';
	if (c->buf)
		c->buf[0] = '\0';
	cu.easy_setopt(c->curl, CURLOPT_URL, url);
	cu.easy_setopt(c->curl, CURLOPT_FRESH_CONNECT, fresh ? 1L : 0L);
	cu.easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
	cu.easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
	cu.easy_setopt(c->curl, CURLOPT_TIMEOUT_MS,
		       c->timeout_ns ? (long)(c->timeout_ns / 1000000 + 1) : 0L);
	rc = cu.easy_perform(c->curl);
	if (c->oom) {
		snprintf(err, errn, "%s: out of memory for the answer", c->shown);
		return -ENOMEM;
	}
	if (rc != CURLE_OK) {
		snprintf(err, errn, "%s: %s", c->shown,
			 rc == CURLE_ABORTED_BY_CALLBACK ? "given up (stopping)"
			 : c->curl_err[0]		 ? c->curl_err
							 : cu.easy_strerror(rc));
		return errno_of(rc);
	}
	cu.easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200) {
		server_error(c, code, err, errn);
		return -EPROTO;
	}
	return 0;
}

/* The answer moves to out (or is dropped) */
static void take(struct ch_conn *c, struct ch_result *out)
{
	if (!out)
		return;
	out->body = c->buf;
	out->len = c->n;
	c->buf = NULL;
	c->n = c->cap = 0;
}

int ch__query(struct ch_conn *c, const char *sql, struct ch_result *out, char *err, size_t errn)
{
	char url[600];
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	/* the server gives up when we do: a query left running would slow
	 * the next ones */
	if (c->timeout_ns)
		snprintf(url, sizeof(url), "%s?wait_end_of_query=1&max_execution_time=%llu", c->base,
			 (unsigned long long)(c->timeout_ns / 1000000000 ? c->timeout_ns / 1000000000
									 : 1));
	else
		snprintf(url, sizeof(url), "%s?wait_end_of_query=1", c->base);
	rc = post(c, url, sql, strlen(sql), false, err, errn);
	if (!rc)
		take(c, out);
	return rc;
}

int ch__insert(struct ch_conn *c, const char *table, const char *cols, const void *rows, size_t n,
	       char *err, size_t errn)
{
	char *q, *url, *p;
	int len, rc;

	len = asprintf(&q, "INSERT INTO %s.%s (%s) FORMAT RowBinary", c->u.db, table, cols);
	if (len < 0) {
		snprintf(err, errn, "out of memory");
		return -ENOMEM;
	}
	url = malloc(strlen(c->base) + 7 + (size_t)len * 3 + 1);
	if (!url) {
		free(q);
		snprintf(err, errn, "out of memory");
		return -ENOMEM;
	}
	p = url + sprintf(url, "%s?query=", c->base);
	for (const char *s = q; *s; s++) {
		if (isalnum((unsigned char)*s) || *s == '_' || *s == '.')
			*p++ = *s;
		else
			p += sprintf(p, "%%%02X", (unsigned char)*s);
	}
	*p = '\0';
	rc = post(c, url, rows, n, true, err, errn);
	free(url);
	free(q);
	return rc;
}

/* --- TabSeparated -------------------------------------------------------------- */

bool ch_result__row(struct ch_result *r)
{
	char *p, *end;

	r->nfields = 0;
	if (!r->body || r->pos >= r->len)
		return false;
	p = r->body + r->pos;
	end = memchr(p, '\n', r->len - r->pos);
	if (!end)
		end = r->body + r->len; /* the last row without its newline */
	r->pos = (size_t)(end - r->body) + 1;
	*end = '\0';
	for (;;) {
		char *tab = memchr(p, '\t', (size_t)(end - p));
		char *fe = tab ? tab : end;

		if (r->nfields == r->cap) {
			uint32_t cap = r->cap ? r->cap * 2 : 16;
			char **f = realloc(r->field, cap * sizeof(*f));
			size_t *l = f ? realloc(r->field_len, cap * sizeof(*l)) : NULL;
			uint8_t *u = l ? realloc(r->unescaped, cap) : NULL;

			if (f)
				r->field = f;
			if (l)
				r->field_len = l;
			if (!u)
				return false;
			r->unescaped = u;
			r->cap = cap;
		}
		*fe = '\0';
		r->field[r->nfields] = p;
		r->field_len[r->nfields] = (size_t)(fe - p);
		r->unescaped[r->nfields++] = 0;
		if (!tab)
			break;
		p = tab + 1;
	}
	return true;
}

static char unescape_char(char c)
{
	switch (c) {
	case 'b':
		return '\b';
	case 'f':
		return '\f';
	case 'r':
		return '\r';
	case 'n':
		return '\n';
	case 't':
		return '\t';
	case '0':
		return '\0';
	case 'a':
		return '\a';
	case 'v':
		return '\v';
	default:
		return c; /* \\ \' \" and the rest: the character */
	}
}

/* s[0..n) unescaped in place; the new length */
static size_t unescape(char *s, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 1 < n) {
			i++;
			if (s[i] == 'x' && i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 &&
			    hexval((unsigned char)s[i + 2]) >= 0) {
				s[o++] = (char)(hexval((unsigned char)s[i + 1]) * 16 +
						hexval((unsigned char)s[i + 2]));
				i += 2;
				continue;
			}
			s[o++] = unescape_char(s[i]);
		} else {
			s[o++] = s[i];
		}
	}
	s[o] = '\0';
	return o;
}

const char *ch_result__str(struct ch_result *r, uint32_t i, size_t *len)
{
	if (i >= r->nfields || !strcmp(r->field[i], "\\N"))
		return NULL;
	if (!r->unescaped[i]) {
		r->field_len[i] = unescape(r->field[i], r->field_len[i]);
		r->unescaped[i] = 1;
	}
	if (len)
		*len = r->field_len[i];
	return r->field[i];
}

int ch_result__u64(struct ch_result *r, uint32_t i, uint64_t *v)
{
	char *end;

	if (i >= r->nfields || !isdigit((unsigned char)r->field[i][0]))
		return -EINVAL;
	errno = 0;
	*v = strtoull(r->field[i], &end, 10);
	return *end || errno ? -EINVAL : 0;
}

int ch_result__i64(struct ch_result *r, uint32_t i, int64_t *v)
{
	const char *s = i < r->nfields ? r->field[i] : NULL;
	char *end;

	if (!s || !(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))))
		return -EINVAL;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return *end || errno ? -EINVAL : 0;
}

void ch_result__free(struct ch_result *r)
{
	if (!r)
		return;
	free(r->body);
	free(r->field);
	free(r->field_len);
	free(r->unescaped);
	memset(r, 0, sizeof(*r));
}

bool ch_array__next(char **pp, char **item, size_t *len)
{
	char *p = *pp, *o, *start;

	if (!p)
		return false;
	*pp = NULL;
	if (*p == '[' && p[1] == ']')
		return false;
	if (*p != '[' && *p != ',')
		return false; /* "]": the end, or malformed */
	start = ++p;
	if (*p == '\'') { /* quoted: unescaped where it is, ended at its quote */
		*item = o = ++p;
		while (*p && *p != '\'') {
			if (*p == '\\' && p[1] == 'x' && hexval((unsigned char)p[2]) >= 0 &&
			    hexval((unsigned char)p[3]) >= 0) {
				*o++ = (char)(hexval((unsigned char)p[2]) * 16 +
					      hexval((unsigned char)p[3]));
				p += 4;
			} else if (*p == '\\' && p[1]) {
				*o++ = unescape_char(p[1]);
				p += 2;
			} else {
				*o++ = *p++;
			}
		}
		if (*p != '\'' || (p[1] != ',' && p[1] != ']'))
			return false;
		*o = '\0';
		p++;
	} else { /* a number: moved back over the separator before it, which
		  * is read, so that its end can be a NUL and the next one stays */
		while (*p && *p != ',' && *p != ']')
			p++;
		if (!*p || p == start)
			return false;
		memmove(start - 1, start, (size_t)(p - start));
		*item = start - 1;
		o = p - 1;
		*o = '\0';
	}
	if (len)
		*len = (size_t)(o - *item);
	*pp = p;
	return true;
}

/* --- the schema --------------------------------------------------------------- */

int ch__schema(struct ch_conn *c, bool create, char *err, size_t errn)
{
	const char *db = c->u.db;
	struct ch_result r;
	char sql[4096];
	uint64_t v, found = 0;
	bool ours = false;
	int rc;

	if (create) {
		snprintf(sql, sizeof(sql), "CREATE DATABASE IF NOT EXISTS %s", db);
		if ((rc = ch__query(c, sql, NULL, err, errn)))
			return rc;
		snprintf(sql, sizeof(sql),
			 "CREATE TABLE IF NOT EXISTS %s.critpath_schema (version UInt32) "
			 "ENGINE = MergeTree ORDER BY version",
			 db);
		if ((rc = ch__query(c, sql, NULL, err, errn)))
			return rc;
	} else {
		snprintf(sql, sizeof(sql),
			 "SELECT count() FROM system.tables WHERE database = '%s' AND name = "
			 "'critpath_schema'",
			 db);
		rc = ch__query(c, sql, &r, err, errn);
		if (!rc && (!ch_result__row(&r) || ch_result__u64(&r, 0, &v) || !v)) {
			snprintf(err, errn,
				 "%s: no critpath store there (no table %s.critpath_schema)",
				 c->shown, db);
			rc = -ENOENT;
		}
		ch_result__free(&r);
		if (rc)
			return rc;
	}
	snprintf(sql, sizeof(sql), "SELECT DISTINCT version FROM %s.critpath_schema", db);
	if ((rc = ch__query(c, sql, &r, err, errn)))
		return rc;
	while (ch_result__row(&r)) {
		if (ch_result__u64(&r, 0, &v))
			continue;
		if (v == CH_SCHEMA_VERSION)
			ours = true;
		else
			found = v;
	}
	ch_result__free(&r);
	if (found) {
		snprintf(err, errn,
			 "%s: the store's schema is version %llu, this critpath knows version %u "
			 "only",
			 c->shown, (unsigned long long)found, CH_SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (!ours && !create) {
		snprintf(err, errn, "%s: no schema version in %s.critpath_schema", c->shown, db);
		return -ENOENT;
	}
	for (int t = 0; create && t < CH_TABLES; t++) {
		snprintf(sql, sizeof(sql),
			 "CREATE TABLE IF NOT EXISTS %s.%s (%s) ENGINE = MergeTree "
			 "PARTITION BY day ORDER BY (%s)",
			 db, ch_tables[t].name, ch_tables[t].columns, ch_tables[t].order_by);
		if ((rc = ch__query(c, sql, NULL, err, errn)))
			return rc;
	}
	if (!ours && create) {
		/* last: a version row says its tables are there */
		snprintf(sql, sizeof(sql), "INSERT INTO %s.critpath_schema VALUES (%u)", db,
			 CH_SCHEMA_VERSION);
		if ((rc = ch__query(c, sql, NULL, err, errn)))
			return rc;
	}
	if (!create) {
		snprintf(sql, sizeof(sql),
			 "SELECT count() FROM system.tables WHERE database = '%s' AND name IN "
			 "('requests', 'segments', 'steps', 'blame', 'calls')",
			 db);
		rc = ch__query(c, sql, &r, err, errn);
		if (!rc && (!ch_result__row(&r) || ch_result__u64(&r, 0, &v) || v != CH_TABLES)) {
			snprintf(err, errn, "%s: the store's tables are not all there", c->shown);
			rc = -ENOENT;
		}
		ch_result__free(&r);
	}
	return rc;
}

/* --- a Distributed store -------------------------------------------------------- */

/* A cluster's name as remote_servers spells it, a database's as the URL's */
static bool name_ok(const char *s, bool cluster)
{
	if (!*s || strlen(s) > 100 || (!cluster && isdigit((unsigned char)*s)))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' &&
		    !(cluster && (*s == '-' || *s == '.')))
			return false;
	return true;
}

/* cols with its MATERIALIZED columns declared plainly: a Distributed table
 * reads them from the shards, where they were made at insert (computing
 * them again on the initiator would cost the reader what they save) */
static void plain_cols(const char *cols, char *out, size_t outn)
{
	size_t o = 0;

	out[0] = '\0';
	while (*cols) {
		const char *end = cols;
		int depth = 0;

		for (; *end && (depth || *end != ','); end++)
			depth += *end == '(' ? 1 : *end == ')' ? -1 : 0;
		const char *m = memmem(cols, (size_t)(end - cols), " MATERIALIZED ", 14);

		if (m)
			end = m;
		if (o < outn)
			o += (size_t)snprintf(out + o, outn - o, "%s%.*s", o ? ", " : "",
					      (int)(end - cols), cols);
		if (m) /* past the expression, to the next column */
			for (depth = 0, end = m; *end && (depth || *end != ','); end++)
				depth += *end == '(' ? 1 : *end == ')' ? -1 : 0;
		cols = *end ? end + 2 : end;
	}
}

int ch__distributed(struct ch_conn *c, const char *cluster, const char *shard_db, char *err,
		    size_t errn)
{
	const char *db = c->u.db;
	char sql[4096], cols[2048];
	int rc;

	if (!name_ok(cluster, true)) {
		snprintf(err, errn, "'%s': a cluster's name is letters, digits, '_', '-', '.'",
			 cluster);
		return -EINVAL;
	}
	if (!name_ok(shard_db, false)) {
		snprintf(err, errn,
			 "'%s': a database's name is letters, digits and '_', not a digit first",
			 shard_db);
		return -EINVAL;
	}
	snprintf(sql, sizeof(sql), "CREATE DATABASE IF NOT EXISTS %s", db);
	if ((rc = ch__query(c, sql, NULL, err, errn)))
		return rc;
	for (int t = -1; t < CH_TABLES; t++) {
		const char *name = t < 0 ? "critpath_schema" : ch_tables[t].name;

		if (t < 0)
			snprintf(cols, sizeof(cols), "version UInt32");
		else
			plain_cols(ch_tables[t].columns, cols, sizeof(cols));
		snprintf(sql, sizeof(sql),
			 "CREATE TABLE IF NOT EXISTS %s.%s (%s) ENGINE = Distributed('%s', '%s', "
			 "'%s')",
			 db, name, cols, cluster, shard_db, name);
		if ((rc = ch__query(c, sql, NULL, err, errn)))
			return rc;
	}
	return 0;
}
