// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <inttypes.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "dump_fmt.h"
#include "util.h"

/* --- the line printer ---------------------------------------------------- */

void jline__begin(struct jline *j, FILE *f)
{
	j->f = f;
	j->json = true;
	j->first = true;
	fputc('{', f);
}

static void text__begin(struct jline *j, FILE *f)
{
	j->f = f;
	j->json = false;
	j->first = true;
}

void jline__end(struct jline *j)
{
	if (j->json)
		fputc('}', j->f);
	fputc('\n', j->f);
}

void jline__key(struct jline *j, const char *key)
{
	if (j->json)
		fprintf(j->f, "%s\"%s\":", j->first ? "" : ",", key);
	else
		fprintf(j->f, " %s=", key);
	j->first = false;
}

/* A quoted, escaped string; utf8 keeps valid multi-byte sequences. */
static void put_quoted(FILE *f, const uint8_t *p, size_t n, bool utf8)
{
	fputc('"', f);
	for (size_t i = 0; i < n;) {
		uint8_t c = p[i];
		size_t len;

		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc(c, f);
			i++;
		} else if (c == '\n') {
			fputs("\\n", f);
			i++;
		} else if (c == '\t') {
			fputs("\\t", f);
			i++;
		} else if (c == '\r') {
			fputs("\\r", f);
			i++;
		} else if (c >= 0x20 && c < 0x7f) {
			fputc(c, f);
			i++;
		} else if (utf8 && c >= 0x80 && (len = utf8__seq(p + i, n - i))) {
			fwrite(p + i, 1, len, f);
			i += len;
		} else {
			fprintf(f, "\\u%04x", c);
			i++;
		}
	}
	fputc('"', f);
}

/* Text mode prints a string bare when it is one plain word. */
static bool plain_word(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f || s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

void jline__strn(struct jline *j, const char *key, const char *s, size_t max)
{
	jline__key(j, key);
	if (!s) {
		fputs("null", j->f);
		return;
	}
	size_t n = strnlen(s, max);
	if (!j->json && plain_word(s, n))
		fwrite(s, 1, n, j->f);
	else
		put_quoted(j->f, (const uint8_t *)s, n, true);
}

void jline__quoted(FILE *f, const char *s)
{
	if (s)
		put_quoted(f, (const uint8_t *)s, strlen(s), true);
	else
		fputs("null", f);
}

void jline__str(struct jline *j, const char *key, const char *s)
{
	jline__strn(j, key, s, SIZE_MAX);
}

void jline__bytes(struct jline *j, const char *key, const uint8_t *p, size_t n)
{
	jline__key(j, key);
	put_quoted(j->f, p, n, false);
}

void jline__u64(struct jline *j, const char *key, uint64_t v)
{
	jline__key(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void jline__i64(struct jline *j, const char *key, int64_t v)
{
	jline__key(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void jline__bool(struct jline *j, const char *key, bool v)
{
	jline__key(j, key);
	fputs(v ? "true" : "false", j->f);
}

/* --- fields of each record type ---------------------------------------- */

/* An HTTP/2 transfer's pieces past its prefix (the n bytes at p): JSON
 * [{"off":N,"bytes":"…"}, …], text OFF:"…",OFF:"…". */
static void pieces_field(struct jline *j, const uint8_t *p, uint32_t n)
{
	uint32_t pc = 0, len;
	const uint8_t *b;
	bool first = true;
	uint64_t off;

	if (!n)
		return;
	jline__key(j, "pieces");
	if (j->json)
		fputc('[', j->f);
	while (cp_sock_piece_next(p, n, &pc, &off, &b, &len)) {
		if (j->json)
			fprintf(j->f, "%s{\"off\":%" PRIu64 ",\"bytes\":", first ? "" : ",", off);
		else
			fprintf(j->f, "%s%" PRIu64 ":", first ? "" : ",", off);
		put_quoted(j->f, b, len, false);
		if (j->json)
			fputc('}', j->f);
		first = false;
	}
	if (j->json)
		fputc(']', j->f);
}

static const char *phase_name(uint8_t phase)
{
	switch (phase) {
	case CP_PHASE_ENTER:
		return "enter";
	case CP_PHASE_EXIT:
		return "exit";
	case CP_PHASE_BLOCKED:
		return "blocked";
	}
	return "unknown";
}

static const char *family_name(uint16_t family)
{
	static __thread char buf[16];

	switch (family) {
	case AF_INET:
		return "AF_INET";
	case AF_INET6:
		return "AF_INET6";
	case AF_UNIX:
		return "AF_UNIX";
	default:
		snprintf(buf, sizeof(buf), "AF_%u", family);
		return buf;
	}
}

static const char *sock_type_name(uint8_t type)
{
	static __thread char buf[16];

	switch (type) {
	case SOCK_STREAM:
		return "stream";
	case SOCK_DGRAM:
		return "dgram";
	case SOCK_SEQPACKET:
		return "seqpacket";
	case SOCK_RAW:
		return "raw";
	default:
		snprintf(buf, sizeof(buf), "%u", type);
		return buf;
	}
}

static void addr_fields(struct jline *j, uint16_t family, const uint8_t *laddr, uint16_t lport,
			const uint8_t *raddr, uint16_t rport)
{
	char a[INET6_ADDRSTRLEN];

	if (!family)
		return;
	jline__str(j, "family", family_name(family));
	if (family == AF_UNIX) {
		uint64_t ino, peer;

		/* the sockets' inodes (ABI 5): the connection, both ends */
		memcpy(&ino, laddr, sizeof(ino));
		memcpy(&peer, raddr, sizeof(peer));
		if (ino)
			jline__u64(j, "ino", ino);
		if (peer)
			jline__u64(j, "peer_ino", peer);
		return;
	}
	if (family != AF_INET && family != AF_INET6)
		return;
	inet_ntop(family, laddr, a, sizeof(a));
	jline__str(j, "laddr", a);
	jline__u64(j, "lport", lport);
	inet_ntop(family, raddr, a, sizeof(a));
	jline__str(j, "raddr", a);
	jline__u64(j, "rport", rport);
}

static void fields_sched(struct jline *j, const struct cp_hdr *rec)
{
	switch (rec->type) {
	case CP_EV_SCHED_SWITCH: {
		const struct cp_ev_sched_switch *e = (const void *)rec;

		jline__u64(j, "prev_pid", e->prev_pid);
		jline__u64(j, "prev_tid", e->prev_tid);
		jline__str(j, "prev_state", cp_prev_state_name(e->prev_state));
		jline__u64(j, "prev_state_raw", e->prev_state_raw);
		jline__u64(j, "next_pid", e->next_pid);
		jline__u64(j, "next_tid", e->next_tid);
		jline__strn(j, "next_comm", e->next_comm, CP_COMM_LEN);
		if (e->flags & CP_SW_PREV_CULPRIT)
			jline__bool(j, "prev_culprit", true);
		if (e->flags & CP_SW_INFERRED)
			jline__bool(j, "inferred", true);
		break;
	}
	case CP_EV_SCHED_WAKING: {
		const struct cp_ev_sched_waking *e = (const void *)rec;

		jline__u64(j, "wakee_pid", e->wakee_pid);
		jline__u64(j, "wakee_tid", e->wakee_tid);
		if (e->waker_ctx == CP_CTX_TASK) {
			jline__u64(j, "waker_pid", e->waker_pid);
			jline__u64(j, "waker_tid", e->waker_tid);
		} else {
			jline__str(j, "waker_ctx", cp_waker_ctx_name(e->waker_ctx, e->softirq_vec));
		}
		jline__u64(j, "target_cpu", e->target_cpu);
		break;
	}
	case CP_EV_WAKEUP_NEW: {
		const struct cp_ev_wakeup_new *e = (const void *)rec;

		jline__u64(j, "wakee_pid", e->pid);
		jline__u64(j, "wakee_tid", e->tid);
		jline__u64(j, "target_cpu", e->target_cpu);
		break;
	}
	case CP_EV_PROCESS_FORK: {
		const struct cp_ev_process_fork *e = (const void *)rec;

		jline__u64(j, "parent_pid", e->parent_pid);
		jline__u64(j, "parent_tid", e->parent_tid);
		jline__u64(j, "child_pid", e->child_pid);
		jline__u64(j, "child_tid", e->child_tid);
		jline__strn(j, "child_comm", e->child_comm, CP_COMM_LEN);
		break;
	}
	case CP_EV_PROCESS_EXEC: {
		const struct cp_ev_process_exec *e = (const void *)rec;

		jline__strn(j, "filename", e->filename, e->filename_len);
		jline__u64(j, "old_tid", e->old_tid);
		break;
	}
	case CP_EV_PROCESS_EXIT: {
		const struct cp_ev_process_exit *e = (const void *)rec;

		jline__i64(j, "exit_code", e->exit_code);
		jline__bool(j, "group_dead", e->group_dead);
		break;
	}
	case CP_EV_RUNQ_CULPRIT: {
		const struct cp_ev_runq_culprit *e = (const void *)rec;

		jline__u64(j, "victim_tid", rec->tid);
		jline__u64(j, "culprit_pid", e->culprit_pid);
		jline__u64(j, "culprit_tid", e->culprit_tid);
		jline__strn(j, "culprit_comm", e->culprit_comm, CP_COMM_LEN);
		jline__u64(j, "ns", e->ns);
		jline__u64(j, "runnable_since", e->runnable_since);
		break;
	}
	}
}

static void fields_syscall(struct jline *j, const struct cp_hdr *rec)
{
	const uint8_t *p;
	char hex[24];
	uint32_t n;

	switch (rec->type) {
	case CP_EV_FUTEX: {
		const struct cp_ev_futex *e = (const void *)rec;

		jline__str(j, "phase", phase_name(e->phase));
		jline__u64(j, "enter_ns", e->enter_ts);
		jline__str(j, "call", cp_futex_call_name(e->call));
		jline__str(j, "op", cp_futex_op_name(e->call, e->op));
		snprintf(hex, sizeof(hex), "0x%" PRIx64, (uint64_t)e->uaddr);
		jline__str(j, "uaddr", hex);
		jline__u64(j, "val", e->val);
		if (e->phase == CP_PHASE_EXIT)
			jline__i64(j, "ret", e->ret);
		break;
	}
	case CP_EV_SOCK: {
		const struct cp_ev_sock *e = (const void *)rec;

		jline__str(j, "phase", phase_name(e->phase));
		jline__u64(j, "enter_ns", e->enter_ts);
		jline__str(j, "call", cp_sock_call_name(e->call));
		jline__i64(j, "fd", e->fd);
		if (e->sock_type)
			jline__str(j, "sock_type", sock_type_name(e->sock_type));
		addr_fields(j, e->family, e->laddr, e->lport, e->raddr, e->rport);
		jline__i64(j, "bytes", e->bytes);
		if ((e->family == AF_INET || e->family == AF_INET6) && e->sock_type == SOCK_STREAM)
			jline__u64(j, "tcp_seq", e->tcp_seq);
		/* only where set: older recordings' lines stay as they were */
		if (e->flags & CP_SOCK_F_TLS)
			jline__bool(j, "tls", true);
		if (e->flags & CP_SOCK_F_BOUND)
			jline__bool(j, "bound", true);
		if (e->flags & CP_SOCK_F_PEEK)
			jline__bool(j, "peek", true);
		if (e->flags & CP_SOCK_F_URING)
			jline__bool(j, "uring", true);
		if (e->flags & CP_SOCK_F_CUT)
			jline__bool(j, "cut", true);
		if (e->flags & CP_SOCK_F_SENT_AT)
			jline__bool(j, "sent_at", true);
		if (e->unsent)
			jline__u64(j, "unsent", e->unsent);
		if (e->payload_len)
			jline__bytes(j, "payload", e->payload, e->payload_len);
		p = cp_pieces(e, &n);
		pieces_field(j, p, n);
		break;
	}
	case CP_EV_TLS_READ: {
		const struct cp_ev_tls_read *e = (const void *)rec;

		jline__u64(j, "enter_ns", e->enter_ts);
		jline__str(j, "call", cp_tls_call_name(e->call));
		jline__i64(j, "fd", e->fd);
		addr_fields(j, e->family, e->laddr, e->lport, e->raddr, e->rport);
		jline__i64(j, "bytes", e->bytes);
		if (e->family == AF_INET || e->family == AF_INET6)
			jline__u64(j, "tcp_seq", e->tcp_seq);
		if (cp_tls_id(e)) {
			char id[24];

			snprintf(id, sizeof(id), "0x%llx", (unsigned long long)cp_tls_id(e));
			jline__str(j, "tls_id", id);
		}
		if (e->payload_len)
			jline__bytes(j, "payload", e->payload, e->payload_len);
		p = cp_pieces(e, &n);
		pieces_field(j, p, n);
		break;
	}
	case CP_EV_POLL: {
		const struct cp_ev_poll *e = (const void *)rec;

		jline__str(j, "phase", phase_name(e->phase));
		jline__u64(j, "enter_ns", e->enter_ts);
		jline__str(j, "call", cp_poll_call_name(e->call));
		if (e->phase == CP_PHASE_EXIT)
			jline__i64(j, "ret", e->ret);
		break;
	}
	case CP_EV_SK_DATA_READY: {
		const struct cp_ev_sk_data_ready *e = (const void *)rec;

		addr_fields(j, e->family, e->laddr, e->lport, e->raddr, e->rport);
		if (e->protocol == IPPROTO_UDP)
			jline__str(j, "protocol", "udp");
		else if (e->protocol == IPPROTO_TCP)
			jline__str(j, "protocol", "tcp");
		jline__u64(j, "rcv_nxt", e->rcv_nxt);
		break;
	}
	case CP_EV_BLOCK: {
		const struct cp_ev_block *e = (const void *)rec;

		jline__str(j, "phase",
			   e->phase == CP_BLOCK_ISSUE	   ? "issue"
			   : e->phase == CP_BLOCK_COMPLETE ? "complete"
							   : "unknown");
		/* The kernel's dev_t: 12 bits major, 20 bits minor. */
		snprintf(hex, sizeof(hex), "%u:%u", e->dev >> 20, e->dev & 0xfffff);
		jline__str(j, "dev", hex);
		jline__u64(j, "sector", e->sector);
		jline__u64(j, "bytes", e->bytes);
		break;
	}
	case CP_EV_UPROBE: {
		const struct cp_ev_uprobe *e = (const void *)rec;

		jline__u64(j, "probe_id", e->probe_id);
		jline__str(j, "phase", phase_name(e->phase));
		break;
	}
	}
}

static void fields_metadata(struct jline *j, const struct cp_hdr *rec)
{
	switch (rec->type) {
	case CP_MD_PROCESS: {
		const struct cp_md_process *m = (const void *)rec;
		char cmdline[4096];
		size_t n = m->cmdline_len < sizeof(cmdline) ? m->cmdline_len : sizeof(cmdline) - 1;

		/* Arguments are NUL-separated: shown space-separated. */
		memcpy(cmdline, m->data + m->exe_len, n);
		while (n && !cmdline[n - 1])
			n--;
		for (size_t i = 0; i < n; i++)
			if (!cmdline[i])
				cmdline[i] = ' ';
		cmdline[n] = 0;
		jline__strn(j, "comm", m->comm, CP_COMM_LEN);
		jline__u64(j, "ppid", m->ppid);
		jline__strn(j, "exe", m->data, m->exe_len);
		jline__str(j, "cmdline", cmdline);
		break;
	}
	case CP_MD_THREAD: {
		const struct cp_md_thread *m = (const void *)rec;

		jline__strn(j, "comm", m->comm, CP_COMM_LEN);
		break;
	}
	case CP_MD_SOCKET: {
		const struct cp_md_socket *m = (const void *)rec;

		jline__i64(j, "fd", m->fd);
		if (m->sock_type)
			jline__str(j, "sock_type", sock_type_name(m->sock_type));
		jline__bool(j, "listening", m->listening);
		addr_fields(j, m->family, m->laddr, m->lport, m->raddr, m->rport);
		break;
	}
	case CP_MD_LOSS: {
		const struct cp_md_loss *m = (const void *)rec;

		jline__u64(j, "start_ns", m->start_ns);
		jline__u64(j, "end_ns", m->end_ns);
		jline__u64(j, "events", m->events);
		break;
	}
	case CP_MD_HOOK: {
		const struct cp_md_hook *m = (const void *)rec;

		jline__str(j, "name", m->name);
		jline__str(j, "status",
			   m->status == CP_HOOK_ATTACHED      ? "attached"
			   : m->status == CP_HOOK_FALLBACK    ? "fallback"
			   : m->status == CP_HOOK_UNAVAILABLE ? "unavailable"
							      : "unknown");
		if (m->detail[0])
			jline__str(j, "detail", m->detail);
		break;
	}
	case CP_MD_PROBE: {
		const struct cp_md_probe *m = (const void *)rec;

		jline__u64(j, "probe_id", m->probe_id);
		jline__str(j, "binary", m->binary);
		jline__str(j, "symbol", m->symbol);
		break;
	}
	}
}

static bool type_known(uint16_t type)
{
	switch (type) {
#define KNOWN(t, name, size) case t:
		CP_EVENT_TYPES(KNOWN)
		CP_META_TYPES(KNOWN)
#undef KNOWN
		return true;
	default:
		return false;
	}
}

static void fields(struct jline *j, const struct cp_hdr *rec)
{
	if (!type_known(rec->type)) {
		jline__u64(j, "type_id", rec->type);
		jline__u64(j, "size", rec->size);
		return;
	}
	fields_sched(j, rec);
	fields_syscall(j, rec);
	fields_metadata(j, rec);
}

void dump__json(FILE *out, const struct cp_hdr *rec)
{
	struct jline j;

	jline__begin(&j, out);
	jline__str(&j, "type", type_known(rec->type) ? cp_rec_type_name(rec->type) : "unknown");
	jline__u64(&j, "ts_ns", rec->ts);
	jline__u64(&j, "pid", rec->pid);
	jline__u64(&j, "tid", rec->tid);
	jline__u64(&j, "cpu", rec->cpu);
	fields(&j, rec);
	jline__end(&j);
}

void dump__text(FILE *out, const struct recording_info *info, const struct cp_hdr *rec)
{
	struct jline j;
	int64_t rel = (int64_t)(rec->ts - info->start_ns);
	uint64_t arel = rel < 0 ? -(uint64_t)rel : (uint64_t)rel;
	int64_t abs_ns = i64__add_sat((int64_t)rec->ts, info->realtime_offset_ns);
	time_t sec = (time_t)(abs_ns / 1000000000);
	struct tm tm;
	char tod[16] = "?";
	char ids[32];

	if (gmtime_r(&sec, &tm))
		strftime(tod, sizeof(tod), "%H:%M:%S", &tm);
	snprintf(ids, sizeof(ids), "%u/%u", rec->pid, rec->tid);
	fprintf(out, "%c%5" PRIu64 ".%09" PRIu64 " %s.%09" PRId64 " %4u %15s %-16s",
		rel < 0 ? '-' : '+', arel / 1000000000, arel % 1000000000, tod, abs_ns % 1000000000,
		rec->cpu, ids, cp_rec_type_name(rec->type));
	text__begin(&j, out);
	fields(&j, rec);
	jline__end(&j);
}
