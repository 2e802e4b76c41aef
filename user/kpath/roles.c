// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Which end of a connection serves: listening ports, sure or guessed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kpath_internal.h"

static int listen_at(const struct kp_proc *p, uint16_t port)
{
	for (uint32_t i = 0; i < p->nlisten; i++)
		if (p->listen[i] == port)
			return (int)i;
	return -1;
}

static bool proc_listens_sure(const struct kp_proc *p, uint16_t port)
{
	int i = listen_at(p, port);

	return i >= 0 && (uint32_t)i < p->nsure;
}

static int listen_add(struct kp_proc *p, uint16_t port, bool sure)
{
	int i = listen_at(p, port);
	uint16_t t;

	if (!port) /* a Unix-domain socket's: no port to go by */
		return 0;
	if (i < 0) {
		if (kp__grow((void **)&p->listen, &p->caplisten, p->nlisten + 1,
			     sizeof(*p->listen)))
			return -ENOMEM;
		i = (int)p->nlisten++;
		p->listen[i] = port;
	}
	if (!sure || (uint32_t)i < p->nsure)
		return 0;
	t = p->listen[p->nsure]; /* the first guessed one, or port itself */
	p->listen[p->nsure++] = port;
	p->listen[i] = t;
	return 0;
}

static int host_listens(const struct kp *kp, uint32_t host, uint16_t port)
{
	int best = 0;

	if (!port)
		return 0;
	for (uint32_t i = 0; i < kp->npr && best < 2; i++) {
		const struct kp_proc *p = &kp->pr[i];
		int at;

		if (p->host != host || !p->nlisten)
			continue;
		at = listen_at(p, port);
		if (at >= 0)
			best = (uint32_t)at < p->nsure ? 2 : 1;
	}
	return best;
}

static void listen_unguess(struct kp_proc *p, uint16_t port)
{
	int i = listen_at(p, port);

	if (i >= 0 && (uint32_t)i >= p->nsure)
		p->listen[i] = p->listen[--p->nlisten];
}

/* A guessed connection takes its real role. */
static void conn_correct(struct kp *kp, struct kp_conn *c, uint8_t role)
{
	if (role == KP_ROLE_CLIENT && c->role == KP_ROLE_SERVER && c->proc != KP_NONE)
		listen_unguess(&kp->pr[c->proc], c->a.lport);
	c->role = role;
	c->role_guessed = 0;
	c->phase = KP_PH_IDLE;
	c->req.reader = c->req.writer = KP_NONE;
	c->req.nruns = 0;
	c->req.tls_wait = c->req.tls_fin = false;
	c->service[0] = c->last_name[0] = '\0';
	c->iservice = c->iname = NULL;
}

void kp__guessed_compact(struct kp *kp, uint32_t n)
{
	uint32_t keep = 0;

	if (!kp->nguessed)
		return;
	for (uint32_t k = 0; k < n; k++)
		if (kp->cn[kp->guessed[k]].role_guessed)
			kp->guessed[keep++] = kp->guessed[k];
	memmove(kp->guessed + keep, kp->guessed + n, (kp->nguessed - n) * sizeof(*kp->guessed));
	kp->nguessed -= n - keep;
}

/* proc surely listens on port: guessed connections are checked again
 * (listening sockets are written after the first events). */
int kp__proc_listen(struct kp *kp, uint32_t proc, uint16_t port)
{
	struct kp_proc *p = &kp->pr[proc];
	uint32_t host = p->host, n = kp->nguessed;
	int err;

	if (!port || proc_listens_sure(p, port))
		return 0;
	err = listen_add(p, port, true);
	if (err)
		return err;
	for (uint32_t k = 0; k < kp->nguessed; k++) {
		struct kp_conn *c = &kp->cn[kp->guessed[k]];

		if (!c->role_guessed)
			continue;
		if (c->host != host)
			continue;
		if (c->a.lport == port) {
			if (c->role != KP_ROLE_SERVER)
				conn_correct(kp, c, KP_ROLE_SERVER);
			c->role_guessed = 0;
		} else if (c->a.rport == port && c->role == KP_ROLE_SERVER &&
			   host_listens(kp, host, c->a.lport) != 2) {
			conn_correct(kp, c, KP_ROLE_CLIENT);
		}
	}
	kp__guessed_compact(kp, n);
	return 0;
}

static void conn_guessed(struct kp *kp, uint32_t ci)
{
	kp->cn[ci].role_guessed = 1;
	if (!kp__grow((void **)&kp->guessed, &kp->capguessed, kp->nguessed + 1,
		      sizeof(*kp->guessed)))
		kp->guessed[kp->nguessed++] = ci;
}

/* A connection open before the recording: its side from listening ports,
 * else guessed. */
void kp__conn_guess_role_slow(struct kp *kp, uint32_t ci, bool reading, uint8_t flags)
{
	struct kp_conn *c = &kp->cn[ci];
	int l;

	if (c->a.family == AF_UNIX && (flags & CP_SOCK_F_BOUND)) {
		c->role = KP_ROLE_SERVER;
		return;
	}
	/* a port its host listens on, maybe another process's (forked
	 * servers) */
	l = host_listens(kp, c->host, c->a.lport);
	if (l) {
		c->role = KP_ROLE_SERVER;
		if (l == 1)
			conn_guessed(kp, ci);
		return;
	}
	l = host_listens(kp, c->host, c->a.rport);
	if (l) {
		c->role = KP_ROLE_CLIENT;
		if (l == 1)
			conn_guessed(kp, ci);
		return;
	}
	c->role = reading ? KP_ROLE_SERVER : KP_ROLE_CLIENT;
	conn_guessed(kp, ci);
	if (c->role == KP_ROLE_SERVER && c->proc != KP_NONE)
		(void)listen_add(&kp->pr[c->proc], c->a.lport, false);
}

