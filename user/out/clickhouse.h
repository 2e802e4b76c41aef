/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* ClickHouse over its HTTP interface (docs/store.md): a connection to
 * clickhouse://HOST:PORT/DB, queries answered in TabSeparated, RowBinary
 * inserts, the store's schema. Only what ClickHouse 18.16 (Debian 12) and
 * current releases both accept. The rows the store writes: ch_rows.h; the
 * writer with its queue and retries: ch_writer.h. */
#ifndef CRITPATH_CLICKHOUSE_H
#define CRITPATH_CLICKHOUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CH_SCHEMA_VERSION 1
#define CH_DEFAULT_PORT 8123

/* clickhouse://[USER[:PASSWORD]@]HOST[:PORT]/DB; USER and PASSWORD are
 * percent-decoded, CLICKHOUSE_USER and CLICKHOUSE_PASSWORD take their place
 * when set. HOST may be [v6]. DB: letters, digits, '_', not a digit first. */
struct ch_url {
	char host[256];
	unsigned port;
	char db[128];
	char user[128];
	char password[256];
};
/* 0, or -EINVAL with why in err (never the password) */
int ch_url__parse(const char *url, struct ch_url *u, char *err, size_t errn);
/* s starts with "clickhouse://" */
bool ch_url__is(const char *s);

struct ch_conn;
/* The URL parsed, the user from the environment; nothing sent yet. NULL
 * with why in err (no memory, a bad URL, libcurl missing). */
struct ch_conn *ch__open(const char *url, char *err, size_t errn);
void ch__close(struct ch_conn *c);
/* The database's name (unquoted: it needs no quotes) */
const char *ch__db(const struct ch_conn *c);
/* "clickhouse://HOST:PORT/DB": the URL as it may be printed */
const char *ch__shown(const struct ch_conn *c);
/* Each request's timeout (default 30 s; 0: none) */
void ch__set_timeout(struct ch_conn *c, uint64_t ns);
/* A request in flight is given up (-ECANCELED) once abort(ctx) is true,
 * asked at least once a second */
void ch__set_abort(struct ch_conn *c, bool (*abort)(void *ctx), void *ctx);

/* A query's answer: TabSeparated rows, read one at a time. */
struct ch_result {
	char *body; /* the answer; rows are cut (and unescaped) in place */
	size_t len, pos;
	/* the current row's fields as sent (escaped), NUL-terminated, valid
	 * until the next row: ch_result__str unescapes one, ch_array__next
	 * reads an Array */
	char **field;
	size_t *field_len;
	uint8_t *unescaped;
	uint32_t nfields, cap;
};

/* Runs sql (any statement; a SELECT's answer is its TabSeparated rows).
 * 0; -EPROTO: the server refused it, err its message ("Code: 60, ... Table
 * x.y doesn't exist"); -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -EIO: no
 * answer, err why ("connect: Connection refused"); -ENOMEM. out may be NULL
 * (the answer is dropped); else ch_result__free it, whatever came back. */
int ch__query(struct ch_conn *c, const char *sql, struct ch_result *out, char *err, size_t errn);
/* The next row's fields into r->field[0..r->nfields); false at the end */
bool ch_result__row(struct ch_result *r);
/* Field i of the row as a String: unescaped in place (\t \n \\ \' \0 ...),
 * its length in *len (it may hold NUL bytes; len may be NULL); NULL for \N
 * or past the row */
const char *ch_result__str(struct ch_result *r, uint32_t i, size_t *len);
/* Field i as a number: 0, or -EINVAL (not a number, \N, past the row) */
int ch_result__u64(struct ch_result *r, uint32_t i, uint64_t *v);
int ch_result__i64(struct ch_result *r, uint32_t i, int64_t *v);
void ch_result__free(struct ch_result *r);
/* The items of an Array field as sent ("['a','b\\'c']", "[1,2]", "[]"),
 * unquoted and unescaped in place: start with *p = r->field[i]; each call
 * gives one item (NUL-terminated, its length in *len, which may be NULL);
 * false at the end or on a malformed array */
bool ch_array__next(char **p, char **item, size_t *len);

/* rows (RowBinary, columns in the order of cols: "a, b, c") into db.table.
 * 0 or as ch__query. */
int ch__insert(struct ch_conn *c, const char *table, const char *cols, const void *rows, size_t n,
	       char *err, size_t errn);

/* The store's tables (docs/store.md) created when missing (create), the
 * schema's version checked. 0; -ENOENT: !create and the database or its
 * tables are missing (err says which); -EPROTONOSUPPORT: another version
 * of the schema (err names it); else as ch__query. */
int ch__schema(struct ch_conn *c, bool create, char *err, size_t errn);

/* The database made a view of the store's tables on every shard of a
 * cluster: each table with its columns, ENGINE = Distributed(cluster,
 * shard_db, table); steps' MATERIALIZED stack left out (a reader computes
 * its own). 0; -EINVAL: a name that is not one (err says which); else as
 * ch__query. */
int ch__distributed(struct ch_conn *c, const char *cluster, const char *shard_db, char *err,
		    size_t errn);

#endif
