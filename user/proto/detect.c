// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Request names from the first bytes a server read (DESIGN.md 5): HTTP/1.x
 * "METHOD /path" (numbers folded to "{n}"), memcached, Redis, PostgreSQL,
 * MySQL, DNS. Only a payload prefix is kept, so parsers look at one line. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "proto.h"

static const char *const http_methods[] = {"GET",     "POST",  "PUT",	"DELETE", "HEAD",
					   "OPTIONS", "PATCH", "TRACE", "CONNECT"};

static const char *const mc_commands[] = {
    "get",
    "gets",
    "gat",
    "gats",
    "set",
    "add",
    "replace",
    "append",
    "prepend",
    "cas",
    "delete",
    "incr",
    "decr",
    "touch",
    "stats",
    "flush_all",
    "version",
    "verbosity",
    "quit",
    "mg",
    "ms",
    "md",
    "ma",
    "mn",
    "me",
    "lru_crawler",
    "slabs",
    "watch",
    "cache_memlimit",
    "shutdown",
};

/* snprintf("%.*s") for s without NUL in its first n, without snprintf's cost */
static size_t put_trunc(char *name, size_t namelen, const char *s, size_t n)
{
	size_t k = n < namelen ? n : namelen - 1;

	memcpy(name, s, k);
	name[k] = '\0';
	return n;
}

static size_t line_len(const uint8_t *p, size_t len)
{
	size_t i = 0;

	while (i < len && p[i] != '\r' && p[i] != '\n')
		i++;
	return i;
}

static bool is_digits(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

static enum kp_proto http_name(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	size_t ll, m = 0, i, o;
	const char *line = (const char *)p;

	if (p[0] < 'C' || p[0] > 'T') /* no method begins so: most requests of other protocols */
		return KP_PROTO_NONE;
	for (size_t k = 0; k < sizeof(http_methods) / sizeof(http_methods[0]); k++) {
		size_t n = strlen(http_methods[k]);

		/* the line is longer than "METHOD ": its next byte ends no line */
		if (len > n + 1 && line[0] == http_methods[k][0] &&
		    !memcmp(line, http_methods[k], n) && line[n] == ' ' && line[n + 1] != '\r' &&
		    line[n + 1] != '\n') {
			m = n;
			break;
		}
	}
	if (!m || line[m + 1] == ' ')
		return KP_PROTO_NONE;
	ll = line_len(p, len);
	/* "METHOD SP target SP HTTP/1.x" — the version may lie past the prefix */
	o = put_trunc(name, namelen, line, m + 1); /* line[m] is the space */
	i = m + 1;
	while (i < ll && line[i] != ' ' && line[i] != '?' && line[i] != '#' && o + 4 < namelen) {
		size_t seg = i;

		if (line[i] == '/') {
			name[o++] = '/';
			i++;
			continue;
		}
		while (seg < ll && line[seg] != '/' && line[seg] != ' ' && line[seg] != '?' &&
		       line[seg] != '#')
			seg++;
		if (is_digits(line + i, seg - i)) {
			o += put_trunc(name + o, namelen - o, "{n}", 3);
		} else {
			for (; i < seg && o + 1 < namelen; i++)
				name[o++] = isprint((unsigned char)line[i]) ? line[i] : '?';
		}
		i = seg;
	}
	if (o >= namelen)
		o = namelen - 1;
	name[o] = '\0';
	return KP_PROTO_HTTP;
}

static enum kp_proto resp_name(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	/* *<n>\r\n$<len>\r\n<command>\r\n */
	size_t i = 1, o = 0;

	while (i < len && isdigit(p[i]))
		i++;
	if (i == 1 || i + 2 > len || p[i] != '\r' || p[i + 1] != '\n')
		return KP_PROTO_NONE;
	i += 2;
	if (i >= len || p[i] != '$')
		return KP_PROTO_RESP;
	while (i < len && p[i] != '\n')
		i++;
	i++;
	while (i < len && p[i] != '\r' && o + 1 < namelen) {
		if (!isgraph(p[i]))
			break;
		name[o++] = (char)toupper(p[i]);
		i++;
	}
	name[o] = '\0';
	return KP_PROTO_RESP;
}

static enum kp_proto mc_name(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	size_t n = 0;

	while (n < len && n < 32 && (islower(p[n]) || p[n] == '_'))
		n++;
	if (!n || (n < len && p[n] != ' ' && p[n] != '\r' && p[n] != '\n'))
		return KP_PROTO_NONE;
	for (size_t k = 0; k < sizeof(mc_commands) / sizeof(mc_commands[0]); k++) {
		if (mc_commands[k][0] == p[0] && strlen(mc_commands[k]) == n &&
		    !memcmp(p, mc_commands[k], n)) {
			put_trunc(name, namelen, mc_commands[k], n);
			return KP_PROTO_MEMCACHED;
		}
	}
	return KP_PROTO_NONE;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The first word of SQL text, upper case, past blanks and parentheses; 0 when
 * none. */
static size_t sql_verb(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	size_t i = 0, o = 0;

	while (i < len && (isspace(p[i]) || p[i] == '('))
		i++;
	while (i < len && isalpha(p[i]) && o + 1 < namelen && o < 24)
		name[o++] = (char)toupper(p[i++]);
	if (o && i < len && (isalnum(p[i]) || p[i] == '_')) /* longer than a verb */
		o = 0;
	name[o] = '\0';
	return o;
}

/* PostgreSQL v3: 'Q' named by its SQL verb, an extended exchange by its Parse's
 * verb or Bind's "EXECUTE name". The length and a NUL-free verb keep other
 * protocols out. */
static enum kp_proto pg_name(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	uint32_t l;
	size_t i;

	if (len < 5)
		return KP_PROTO_NONE;
	l = be32(p);
	if (len >= 8 && p[0] == 0 && l >= 8 && l < 10000 &&
	    (be32(p + 4) == 196608 || be32(p + 4) == 80877103)) {
		put_trunc(name, namelen, be32(p + 4) == 196608 ? "startup" : "SSL request",
			  be32(p + 4) == 196608 ? 7 : 11);
		return KP_PROTO_PG;
	}
	l = be32(p + 1);
	if (l < 4 || l > (1u << 30))
		return KP_PROTO_NONE;
	switch (p[0]) {
	case 'Q': /* query text */
		if (!sql_verb(p + 5, len - 5, name, namelen))
			return KP_PROTO_NONE;
		return KP_PROTO_PG;
	case 'P': /* statement name \0 query text \0 ... */
		for (i = 5; i < len && p[i]; i++)
			;
		if (i >= len || !sql_verb(p + i + 1, len - i - 1, name, namelen))
			return KP_PROTO_NONE;
		return KP_PROTO_PG;
	case 'B': { /* portal \0 statement name \0 ... */
		size_t o;

		for (i = 5; i < len && p[i]; i++)
			;
		if (i >= len)
			return KP_PROTO_NONE;
		o = put_trunc(name, namelen, "EXECUTE", 7);
		if (++i < len && p[i] && o + 2 < namelen) {
			name[o++] = ' ';
			for (; i < len && isgraph(p[i]) && o + 1 < namelen; i++)
				name[o++] = (char)p[i];
			name[o] = '\0';
		}
		return KP_PROTO_PG;
	}
	case 'X':
		if (l != 4)
			return KP_PROTO_NONE;
		put_trunc(name, namelen, "terminate", 9);
		return KP_PROTO_PG;
	default:
		return KP_PROTO_NONE;
	}
}

/* MySQL/MariaDB: 3-byte length, sequence 0, command byte; COM_QUERY named by
 * its SQL verb. */
static enum kp_proto mysql_name(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	static const struct {
		uint8_t cmd;
		const char *name;
	} cmds[] = {{0x01, "QUIT"},
		    {0x02, "USE"},
		    {0x0e, "PING"},
		    {0x11, "CHANGE USER"},
		    {0x16, "PREPARE"},
		    {0x17, "EXECUTE"},
		    {0x18, "SEND LONG DATA"},
		    {0x19, "CLOSE STATEMENT"},
		    {0x1a, "RESET STATEMENT"},
		    {0x1f, "RESET CONNECTION"}};
	uint32_t l;

	if (len < 5 || p[3] != 0)
		return KP_PROTO_NONE;
	l = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
	if (!l || l > 0xffffff - 1)
		return KP_PROTO_NONE;
	if (p[4] == 0x03) /* COM_QUERY: the SQL */
		return sql_verb(p + 5, len - 5, name, namelen) ? KP_PROTO_MYSQL : KP_PROTO_NONE;
	for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
		if (cmds[k].cmd == p[4]) {
			/* the fixed-size ones are exactly their size */
			if ((p[4] == 0x01 || p[4] == 0x0e || p[4] == 0x1f) && l != 1)
				return KP_PROTO_NONE;
			put_trunc(name, namelen, cmds[k].name, strlen(cmds[k].name));
			return KP_PROTO_MYSQL;
		}
	}
	return KP_PROTO_NONE;
}

/* A TLS handshake or change_cipher_spec record header: a connection's opening,
 * not a request. */
static enum kp_proto tls_name(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	if (len < 5 || (p[0] != 22 && p[0] != 20) || p[1] != 3 || p[2] > 4)
		return KP_PROTO_NONE;
	put_trunc(name, namelen, "TLS handshake", 13);
	return KP_PROTO_TLS;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* A DNS query as a UDP datagram carries it: "A example.com"; digit labels fold
 * to "{n}" (reverse lookups). */
static enum kp_proto dns_name(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	static const struct {
		uint16_t type;
		const char *name;
	} types[] = {{1, "A"},	 {2, "NS"},	 {5, "CNAME"}, {6, "SOA"},    {12, "PTR"},
		     {15, "MX"}, {16, "TXT"},	 {28, "AAAA"}, {33, "SRV"},   {35, "NAPTR"},
		     {43, "DS"}, {48, "DNSKEY"}, {64, "SVCB"}, {65, "HTTPS"}, {255, "ANY"}};
	char qn[256], tn[16];
	const char *type = NULL;
	size_t i = 12, o = 0;
	uint16_t t;

	if (len < 17 || (p[2] & 0xf8) || be16(p + 4) != 1 || be16(p + 6) || be16(p + 8) ||
	    be16(p + 10) > 1)
		return KP_PROTO_NONE;
	for (;;) {
		size_t l;

		if (i >= len)
			return KP_PROTO_NONE;
		l = p[i++];
		if (!l)
			break;
		if (l > 63 || i + l > len || o + l + 2 > sizeof(qn))
			return KP_PROTO_NONE;
		if (o)
			qn[o++] = '.';
		if (is_digits((const char *)p + i, l)) {
			memcpy(qn + o, "{n}", 3);
			o += 3;
		} else {
			for (size_t k = 0; k < l; k++) {
				uint8_t ch = p[i + k];

				if (!isalnum(ch) && ch != '-' && ch != '_' && ch != '*')
					return KP_PROTO_NONE;
				qn[o++] = (char)ch;
			}
		}
		i += l;
	}
	/* the type, and class IN (mDNS sets the top bit: unicast response) */
	if (i + 4 > len || (be16(p + i + 2) & 0x7fff) != 1)
		return KP_PROTO_NONE;
	t = be16(p + i);
	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
		if (types[k].type == t)
			type = types[k].name;
	if (!type) {
		snprintf(tn, sizeof(tn), "TYPE%u", t);
		type = tn;
	}
	snprintf(name, namelen, "%s %.*s", type, (int)(o ? o : 1), o ? qn : ".");
	return KP_PROTO_DNS;
}

/* A FastCGI name-value pair's length: 1 byte, or 4 with the top bit set */
static bool fcgi_len(const uint8_t *p, size_t end, size_t *j, uint32_t *n)
{
	if (*j >= end)
		return false;
	if (!(p[*j] & 0x80)) {
		*n = p[(*j)++];
		return true;
	}
	if (*j + 4 > end)
		return false;
	*n = (uint32_t)(p[*j] & 0x7f) << 24 | (uint32_t)p[*j + 1] << 16 |
	     (uint32_t)p[*j + 2] << 8 | p[*j + 3];
	*j += 4;
	return true;
}

/* value of the param called key (its whole value in the prefix), into out */
static void fcgi_param(const uint8_t *k, uint32_t kn, const uint8_t *v, uint32_t vn,
		       const char *key, char *out, size_t outlen)
{
	if (kn == strlen(key) && !memcmp(k, key, kn) && vn < outlen) {
		memcpy(out, v, vn);
		out[vn] = '\0';
	}
}

/* FastCGI (nginx or Apache calling php-fpm): a BEGIN_REQUEST record, then
 * PARAMS, named by REQUEST_METHOD and REQUEST_URI (else SCRIPT_NAME, else
 * the last part of SCRIPT_FILENAME) as the web server's request would be
 * named. */
static enum kp_proto fcgi_name(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	char method[16] = "", uri[KP_TARGET_LEN] = "", script[KP_TARGET_LEN] = "";
	char file[KP_TARGET_LEN] = "";
	char line[sizeof(method) + sizeof(uri) + 16];
	size_t i;

	/* version 1, FCGI_BEGIN_REQUEST, an 8-byte body, a role of 1..3 */
	if (len < 16 || p[0] != 1 || p[1] != 1 || be16(p + 4) != 8 || !p[9] || p[9] > 3 || p[8])
		return KP_PROTO_NONE;
	for (i = 16 + p[6]; i + 8 <= len && p[i] == 1 && p[i + 1] == 4; i += 8 + be16(p + i + 4) + p[i + 6]) {
		size_t j = i + 8, end = j + be16(p + i + 4) < len ? j + be16(p + i + 4) : len;
		uint32_t kn, vn;

		while (fcgi_len(p, end, &j, &kn) && fcgi_len(p, end, &j, &vn) && j + kn + vn <= end) {
			fcgi_param(p + j, kn, p + j + kn, vn, "REQUEST_METHOD", method, sizeof(method));
			fcgi_param(p + j, kn, p + j + kn, vn, "REQUEST_URI", uri, sizeof(uri));
			fcgi_param(p + j, kn, p + j + kn, vn, "SCRIPT_NAME", script, sizeof(script));
			fcgi_param(p + j, kn, p + j + kn, vn, "SCRIPT_FILENAME", file, sizeof(file));
			j += kn + vn;
		}
	}
	if (!uri[0])
		memcpy(uri, script, sizeof(uri));
	/* nginx's fastcgi.conf sends SCRIPT_FILENAME first: where the prefix
	 * ends before the URI, the script's file name names it */
	if (!uri[0] && strrchr(file, '/'))
		snprintf(uri, sizeof(uri), "%s", strrchr(file, '/'));
	if (!method[0] || !uri[0] || uri[0] != '/') {
		snprintf(name, namelen, "FastCGI request");
		return KP_PROTO_FCGI;
	}
	snprintf(line, sizeof(line), "%s %s HTTP/1.1\r\n", method, uri);
	if (http_name((const uint8_t *)line, strlen(line), name, namelen) != KP_PROTO_HTTP)
		snprintf(name, namelen, "FastCGI request");
	return KP_PROTO_FCGI;
}

/* Tried in this order after RESP's arrays: the first that knows the bytes
 * names them. */
static enum kp_proto (*const parsers[])(const uint8_t *, size_t, char *, size_t) = {
    http_name, mc_name, tls_name, dns_name, pg_name, mysql_name, fcgi_name,
};

enum kp_proto proto__request_name(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	enum kp_proto pr;

	if (!namelen)
		return KP_PROTO_NONE;
	name[0] = '\0';
	if (!p || !len)
		return KP_PROTO_NONE;
	if (p[0] == '*') {
		pr = resp_name(p, len, name, namelen);
		if (pr != KP_PROTO_NONE)
			return pr;
	}
	for (size_t k = 0; k < sizeof(parsers) / sizeof(parsers[0]); k++) {
		pr = parsers[k](p, len, name, namelen);
		if (pr != KP_PROTO_NONE)
			return pr;
	}
	/* Redis inline commands ("PING\r\n") are a bare upper-case word */
	{
		size_t n = 0;

		while (n < len && n < 16 && isupper(p[n]))
			n++;
		if (n >= 3 && n < len && (p[n] == '\r' || p[n] == ' ' || p[n] == '\n')) {
			put_trunc(name, namelen, (const char *)p, n);
			return KP_PROTO_RESP;
		}
	}
	name[0] = '\0';
	return KP_PROTO_NONE;
}

int proto__http_status(const uint8_t *p, size_t len)
{
	int st = 0;

	if (len < 12 || memcmp(p, "HTTP/1.", 7) || p[8] != ' ')
		return 0;
	for (int i = 9; i < 12; i++) {
		if (!isdigit(p[i]))
			return 0;
		st = st * 10 + (p[i] - '0');
	}
	return st;
}

/* A header's value on the line at p[0..ll) when its name is hdr (any case) */
static bool header_value(const uint8_t *p, size_t ll, const char *hdr, char *out, size_t outlen)
{
	size_t n = strlen(hdr), i;

	if (ll <= n || p[n] != ':' || strncasecmp((const char *)p, hdr, n))
		return false;
	for (i = n + 1; i < ll && (p[i] == ' ' || p[i] == '\t'); i++)
		;
	while (ll > i && (p[ll - 1] == ' ' || p[ll - 1] == '\t'))
		ll--;
	for (n = 0; i < ll && n + 1 < outlen; i++)
		out[n++] = isprint(p[i]) ? (char)p[i] : '?';
	out[n] = '\0';
	return true;
}

void proto__tracestate_fit(char *dst, const char *v, size_t n)
{
	size_t cut = n;

	if (n >= KP_TRACESTATE_LEN) {
		/* list-members from the left, whole: a member cut would be a
		 * different vendor's value (W3C drops from the right) */
		for (cut = KP_TRACESTATE_LEN - 1; cut && v[cut] != ','; cut--)
			;
		while (cut && (v[cut - 1] == ' ' || v[cut - 1] == '\t'))
			cut--;
	}
	memcpy(dst, v, cut);
	dst[cut] = '\0';
}

void proto__http_meta(const uint8_t *p, size_t len, struct proto_meta *m, bool trace_ctx)
{
	char ts[512];

	const uint8_t *sp, *e, *nl;
	size_t o = 0;

	m->target[0] = m->traceparent[0] = m->tracestate[0] = '\0';
	/* "METHOD SP target SP ...": the caller knows it is HTTP's */
	if (!p || !len || !(sp = memchr(p, ' ', len < 16 ? len : 16)))
		return;
	for (sp++, e = p + len; sp < e && *sp != ' ' && *sp != '\r' && *sp != '\n' &&
				o + 1 < sizeof(m->target);
	     sp++)
		m->target[o++] = isprint(*sp) ? (char)*sp : '?';
	m->target[o] = '\0';
	if (!trace_ctx)
		return;
	/* the header lines the prefix holds whole, up to the blank line */
	for (nl = memchr(sp, '\n', (size_t)(e - sp)); nl && nl + 1 < e;
	     nl = memchr(nl + 1, '\n', (size_t)(e - nl - 1))) {
		const uint8_t *line = nl + 1, *end = memchr(line, '\n', (size_t)(e - line));
		size_t ll;

		if (!end || *line == '\r' || *line == '\n')
			return; /* cut by the prefix, or the headers' end */
		ll = (size_t)(end - line);
		if (ll && line[ll - 1] == '\r')
			ll--;
		if ((*line | 0x20) != 't')
			continue;
		if (!header_value(line, ll, "traceparent", m->traceparent, sizeof(m->traceparent)) &&
		    header_value(line, ll, "tracestate", ts, sizeof(ts)))
			proto__tracestate_fit(m->tracestate, ts, strlen(ts));
	}
}
