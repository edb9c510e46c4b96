/* worker.c — owns one mtad worker's set-up and tear-down (mtad_worker_init / mtad_worker_free):
 * the [mtad] limits, the event base, TLS context, store and group committer, directory,
 * per-address connection counts and the login throttle. The daemon's workers (mtad.c) and the fuzz harness
 * (tests/fuzz/fuzz_smtp_session.c) both use it, so they run the same world. */
#include <string.h>

#include <event2/event.h>

#include "common/authguard.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "common/tls.h"
#include "ldapauth/ldapauth.h"
#include "mtad/milter.h"
#include "mtad/mtad.h"
#include "mtad/srs.h"
#include "store/store.h"
#include "store/store_event.h"

void mtad_limits_from_conf(const struct conf *c, struct mtad_limits *l)
{
	const struct mtad_conf *mc = &conf_values(c)->mtad;

	l->max_message_size = mc->max_message_size;
	l->line_max = (size_t)mc->line_max;
	l->max_rcpt = (size_t)mc->max_recipients_per_transaction;
	l->reject_rcpt = (size_t)mc->reject_recipients_per_transaction;
	l->max_tx = (size_t)mc->max_transactions_per_session;
	l->max_errors = (size_t)mc->max_errors;
	l->greeting_delay_ms = mc->greeting_delay_ms;
	l->command_timeout_ms = mc->command_timeout_ms;
	l->data_timeout_ms = mc->data_timeout_ms;
	l->login_timeout_ms = mc->login_timeout_ms;
	l->max_tx_ms = mc->max_transaction_time_ms;
	l->max_data_ms = mc->max_data_time_ms;
	l->auth_require_tls = mc->auth_require_tls;
	l->bare_lf_normalize = mc->bare_lf == MTAD_BARE_LF_NORMALIZE;
	l->max_conns_per_ip = (uint32_t)mc->max_connections_per_ip;
	l->max_unauth_per_ip = (uint32_t)mc->max_unauth_connections_per_ip;
}

void mtad_worker_init(struct mtad *m, const struct conf *c, unsigned worker, const char *hostname)
{
	struct store_opts so;
	const struct tls_conf *tc = &conf_values(c)->tls;
	char *err = NULL;
	int rc;

	memset(m, 0, sizeof(*m));
	m->conf = c;
	m->worker = worker;
	m->hostname = hostname;
	TAILQ_INIT(&m->sessions);
	mtad_limits_from_conf(c, &m->lim);
	if ((m->base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if (tc->cert[0] != '\0' && (m->tls = tls_server_ctx_new(tc, &err)) == NULL)
		fatalx("tls: %s", err);
	store_opts_from_conf(c, &so);
	so.create = true;
	if ((rc = store_open(&so, &m->store)) != 0)
		fatalx("store %s: %s", so.path, store_strerror(rc));
	if ((rc = store_gc_new(m->store, &m->gc)) != 0)
		fatalx("store group commit: %s", store_strerror(rc));
	/* results of the group commit come back through its descriptor */
	if ((m->gc_ev = store_gc_event_new(m->base, m->gc)) == NULL)
		fatalx("store group commit: event");
	if (ldapauth_new(m->base, c, &m->la, &err) < 0)
		fatalx("directory: %s", err);
	m->ipcount = net_ipcount_new(65536);
	if (deliver_sieve_init(c, &err) < 0)
		fatalx("sieve: %s", err);
	m->unauth = net_ipcount_new(65536);
	m->guard = authguard_open(c);
	if (sender_map_load(conf_values(c)->mtad.sender_login_map, &m->senders, &err) < 0)
		fatalx("%s", err);
	if (milter_set_load(c, &m->milters, &err) < 0)
		fatalx("%s", err);
	rcpt_aliases_load(m, c, true);
	rcpt_srs_load(m, c, true);
}

void mtad_worker_free(struct mtad *m)
{
	for (int k = 0; k < L_NKINDS; k++)
		net_server_free(&m->srv[k]);
	milter_set_free(&m->milters);
	store_gc_free(&m->gc);
	if (m->gc_ev != NULL)
		event_free(m->gc_ev);
	m->gc_ev = NULL;
	ldapauth_free(&m->la);
	store_close(&m->store);
	net_ipcount_free(&m->ipcount);
	net_ipcount_free(&m->unauth);
	authguard_close(&m->guard);
	sender_map_free(&m->senders);
	rcpt_aliases_free(m);
	srs_free(&m->srs);
	tls_ctx_free(&m->tls);
	event_base_free(m->base);
	m->base = NULL;
	conf_free(&m->reloaded);
}
