/* smtp_server.c — owns the accept side of a worker: one net_server per listener kind, the
 * total and per-address connection caps (counted over all workers in m->conns, refused with
 * 421), and the drain on SIGTERM (stop accepting, let the sessions finish, leave the loop when
 * the last one ends). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/metrics_std.h"
#include "common/net.h"
#include "common/shmtable.h"
#include "common/xmalloc.h"
#include "mtad/mtad.h"

struct listener_ctx {
	struct mtad *m;
	enum mtad_listener kind;
};

static struct listener_ctx ctxs[L_NKINDS];

static void accept_cb(struct net_server *srv, int fd, const struct sockaddr *sa, socklen_t salen,
		      void *arg)
{
	struct listener_ctx *lc = arg;
	struct mtad *m = lc->m;
	struct smtp_session *s;

	if (!net_ipcount_inc(m->ipcount, sa, m->lim.max_conns_per_ip)) {
		char addr[NET_ADDRSTRLEN], line[320];

		log_info("smtp refuse addr=%s reason=\"too many connections from address\"",
			 net_addr_str(sa, salen, addr, sizeof(addr)));
		/* RFC 5321 4.2: a 421 starts with the server's domain, as the total cap's does */
		snprintf(line, sizeof(line),
			 "421 4.7.0 %s Too many connections from your address\r\n", m->hostname);
		net_refuse(fd, line);
		metrics_inc(MS_CONN_REFUSED, lc->kind, MS_REFUSE_PER_IP);
		net_server_conn_done(srv);
		return;
	}
	if ((lc->kind == L_SUBMISSION || lc->kind == L_SUBMISSIONS) &&
	    !net_ipcount_inc(m->unauth, sa, m->lim.max_unauth_per_ip)) {
		char addr[NET_ADDRSTRLEN], line[320];

		log_info("smtp refuse addr=%s reason=\"too many unauthenticated connections from "
			 "address\"",
			 net_addr_str(sa, salen, addr, sizeof(addr)));
		snprintf(line, sizeof(line),
			 "421 4.7.0 %s Too many unauthenticated connections "
			 "from your address\r\n",
			 m->hostname);
		net_ipcount_dec(m->ipcount, sa);
		net_refuse(fd, line);
		metrics_inc(MS_CONN_REFUSED, lc->kind, MS_REFUSE_UNAUTH);
		net_server_conn_done(srv);
		return;
	}
	s = smtp_session_new(m, lc->kind, fd, sa, salen);
	if (lc->kind == L_SUBMISSION || lc->kind == L_SUBMISSIONS) {
		if (s != NULL)
			s->flags |= SF_UNAUTH_COUNTED;
		else
			net_ipcount_dec(m->unauth, sa);
	}
}

int mtad_servers_start(struct mtad *m, const struct net_fds *fds, size_t max_conns)
{
	char *refusal = xasprintf("421 4.7.0 %s Too many connections, try again later\r\n",
				  m->hostname);

	if (m->conns != NULL) {
		/* a daemon: the per-address counts are those of all workers */
		net_ipcount_free(&m->ipcount);
		m->ipcount = net_ipcount_new_shared(m->conns, m->worker, SHM_ADDR_CONNS);
		net_ipcount_free(&m->unauth);
		m->unauth = net_ipcount_new_shared(m->conns, m->worker, SHM_ADDR_UNAUTH);
	}
	for (int k = 0; k < L_NKINDS; k++) {
		if (fds[k].n == 0)
			continue;
		ctxs[k].m = m;
		ctxs[k].kind = (enum mtad_listener)k;
		m->srv[k] = net_server_new(m->base, &fds[k], max_conns, accept_cb, &ctxs[k]);
		if (m->srv[k] == NULL) {
			free(refusal);
			return -1;
		}
		net_server_set_refusal(m->srv[k], "smtp", refusal);
		if (m->conns != NULL)
			net_server_share(m->srv[k], m->conns, m->worker);
	}
	free(refusal);
	return 0;
}

void mtad_servers_stop(struct mtad *m)
{
	struct smtp_session *s, *next;

	m->draining = true;
	for (int k = 0; k < L_NKINDS; k++)
		if (m->srv[k] != NULL)
			net_server_stop(m->srv[k]);
	for (s = TAILQ_FIRST(&m->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		smtp_session_drain(s);
	}
	if (m->nsessions == 0)
		event_base_loopexit(m->base, NULL);
}

void mtad_session_ended(struct mtad *m, struct smtp_session *s)
{
	if (s->flags & SF_IPCOUNTED)
		net_ipcount_dec(m->ipcount, (const struct sockaddr *)&s->ss);
	smtp_unauth_put(s);
	if (m->srv[s->kind] != NULL)
		net_server_conn_done(m->srv[s->kind]);
	m->nsessions--;
	if (m->draining && m->nsessions == 0)
		event_base_loopexit(m->base, NULL);
}
