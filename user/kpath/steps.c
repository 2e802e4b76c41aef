// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* What the walk's steps are called and who they cost. */
#include <netinet/in.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "walk_int.h"


const char *kw__join_interned(struct kp *kp, const char *a, size_t alen, const char *b,
				 size_t blen)
{
	size_t n = strnlen(a, alen), m = strnlen(b, blen);
	char o[KP_NAME_LEN];

	if (n > KP_NAME_LEN - 1)
		n = KP_NAME_LEN - 1;
	memcpy(o, a, n);
	if (n < KP_NAME_LEN - 1)
		o[n++] = ' ';
	if (m > KP_NAME_LEN - 1 - n)
		m = KP_NAME_LEN - 1 - n;
	memcpy(o + n, b, m);
	o[n + m] = '\0';
	return kp__intern_name(kp, o);
}

const char *kp__thread_comm(struct kp *kp, uint32_t thread)
{
	static const char unknown[CP_COMM_LEN] = "?";
	struct kp_thread *t = &kp->th[thread];
	const char *s = unknown;

	if (t->comm[0])
		s = t->comm;
	else if (t->tid == t->pid && kp->pr[t->proc].comm[0])
		s = kp->pr[t->proc].comm;
	if (!t->icomm || memcmp(s, t->icomm_of, CP_COMM_LEN)) {
		t->icomm = kp__intern_comm(kp, s);
		memcpy(t->icomm_of, s, CP_COMM_LEN);
	}
	return t->icomm;
}

const char *kp__proc_frame_service(struct kp *kp, uint32_t proc)
{
	struct kp_proc *p = &kp->pr[proc];
	const char *comm = p->comm;
	/* one name for a tier, as its own requests have it */
	int32_t port = p->nlisten ? p->listen[0] : p->serves_unix ? KP_PORT_UNIX : 0;

	if (!comm[0]) {
		uint32_t ti = kp__thread_find(kp, p->host, p->pid);

		/* its main thread, not one of a process that took the pid since */
		comm = ti != KP_NONE && kp->th[ti].proc == proc ? kp->th[ti].comm : "";
	}
	/* comm is a CP_COMM_LEN array or "" */
	if (p->svc_ok && p->svc_port == port &&
	    (comm[0] ? !memcmp(p->svc_comm, comm, CP_COMM_LEN) : !p->svc_comm[0]))
		return p->isvc;
	kp__proc_service(kp, proc, port == KP_PORT_UNIX ? KP_PORT_UNIX : 0, p->svc, sizeof(p->svc));
	if (kp->multi_host) {
		/* several hosts: a step's frame names the host it ran on */
		const char *host = kp__host_name(kp, p->host);
		size_t n = strlen(p->svc);

		if (host)
			snprintf(p->svc + n, sizeof(p->svc) - n, "@%s", host);
	}
	p->isvc = kp__intern_name(kp, p->svc);
	memset(p->svc_comm, 0, sizeof(p->svc_comm));
	if (comm[0])
		memcpy(p->svc_comm, comm, CP_COMM_LEN);
	p->svc_port = port;
	p->svc_ok = p->isvc != NULL;
	return p->isvc;
}

void kp__proc_service(const struct kp *kp, uint32_t proc, int32_t port, char *buf, size_t len)
{
	const struct kp_proc *p = &kp->pr[proc];
	const char *comm = p->comm;

	if (!comm[0]) {
		uint32_t ti = kp__thread_find(kp, p->host, p->pid);

		comm = ti != KP_NONE && kp->th[ti].proc == proc && kp->th[ti].comm[0]
			   ? kp->th[ti].comm
			   : NULL;
	}
	if (port == KP_PORT_UNIX) {
		if (comm)
			snprintf(buf, len, "%s:unix", comm);
		else
			snprintf(buf, len, "pid%d:unix", p->pid);
		return;
	}
	if (!port && p->nlisten)
		port = p->listen[0];
	if (comm && port)
		snprintf(buf, len, "%s:%u", comm, port);
	else if (comm)
		snprintf(buf, len, "%s", comm);
	else if (port)
		snprintf(buf, len, "pid%d:%u", p->pid, port);
	else
		snprintf(buf, len, "pid%d", p->pid);
}

const struct kp_write *kw__net_source(struct kp *kp, uint32_t conn, uint64_t ts)
{
	uint32_t peer, rcv = 0;
	bool have;

	if (conn == KP_NONE)
		return NULL;
	peer = kp__conn_peer(kp, conn);
	if (peer == KP_NONE)
		return NULL;
	if (kp->cn[conn].a.proto == IPPROTO_UDP)
		return kp__conn_dgram_for(&kp->cn[peer], ts,
					  kp->cn[peer].host == kp->cn[conn].host);
	have = kp__conn_dready_at(&kp->cn[conn], ts, &rcv);
	return kp__conn_write_for(&kp->cn[peer], ts, rcv, have);
}



int32_t kw__conn_peer_str(struct kp *kp, uint32_t conn)
{
	if (conn == KP_NONE)
		return -1;
	return kw__str_ref(kp, kp__conn_addr(&kp->cn[conn], kp->cn[conn].role == KP_ROLE_SERVER));
}

int kw__call_wait(struct kp *kp, uint32_t conn, uint64_t a, uint64_t t, bool stitched)
{
	const struct kp_conn *c = &kp->cn[conn];
	const struct kp_wseg *s = kp->nws ? &kp->ws[kp->nws - 1] : NULL;
	struct kp_wcall *x;
	uint32_t last, first;

	if (c->role != KP_ROLE_CLIENT || c->a.proto == IPPROTO_UDP ||
	    (c->a.family != AF_INET && c->a.family != AF_INET6))
		return 0;
	/* the call: the writes since the last reply read, up to the last
	 * begun before this reply came (one seen at its end may seem later),
	 * not one after this reply's reads (the next call's) */
	for (last = c->nwr; last > 0 && c->wr[last - 1].enter > t + KP_WRITE_SLACK_NS; last--)
		;
	if (!last--)
		return 0;
	while (last > 0 && c->wr[last].enter > t && c->wr[last - 1].read_after >= t)
		last--;
	for (first = last; first > 0 && !c->wr[first - 1].read_after; first--)
		;
	if (kp__grow((void **)&kp->wcalls, &kp->capwcalls, kp->nwcalls + 1, sizeof(*kp->wcalls)))
		return -ENOMEM;
	x = &kp->wcalls[kp->nwcalls++];
	x->t = t;
	x->conn = conn;
	x->first = first;
	x->last = last;
	/* the segment just added, or the one it extended */
	x->seg = s && a < t && s->cat == CP_CAT_NETWORK && s->start <= a && s->end >= t
		     ? (int32_t)(kp->nws - 1)
		     : -1;
	x->stitched = stitched;
	return 0;
}
