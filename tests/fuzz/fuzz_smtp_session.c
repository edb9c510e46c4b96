/* fuzz_smtp_session.c — libFuzzer target: a whole SMTP (or submission, or LMTP) session. Each
 * input is a client byte stream sent over loopback TCP to the real mtad session code (mtad/
 * without its main, the users file backend, a fresh store with its group committer in a temp
 * dir per input), then half-closed; the session must answer and end by itself within a few
 * seconds with nothing leaked (ASan); a failed AUTH is answered after mtad's penalty (up to
 * 8 s each), hence the longer bound. The first byte picks the listener: SMTP (MX), submission
 * or LMTP. Local domain heron.test, users alice and bob (password "pw"); no relay host, the
 * queue runner is not started (relayed mail is only queued). Built only with -Dfuzz=true. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "common/shmtable.h"
#include "ldapauth/ldapauth.h"
#include "mtad/mtad.h"
#include "store/store.h"
#include "tests/fuzz/fuzz_peer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const kinds[] = { "listen", "submission", "lmtp" };
static const enum mtad_listener kind_ids[] = { L_SMTP, L_SUBMISSION, L_LMTP };
static char dir[80];
static struct conf *conf;
static struct mtad m;
static struct net_fds fds[L_NKINDS];
static int ports[3];
static unsigned serial;

static bool session_done(void *arg)
{
	(void)arg;
	return m.nsessions == 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[160];
	char *err = NULL;

	(void)argc;
	(void)argv;
	fuzz_start(dir, sizeof(dir), "smtp", path, sizeof(path));
	conf = conf_defaults();
	fuzz_set(conf, "directory", "backend", "file");
	fuzz_set(conf, "directory", "users_file", path);
	fuzz_set(conf, "store", "partitions", "1");
	fuzz_set(conf, "store", "map_size", "4M");
	fuzz_set(conf, "mtad", "local_domains", "heron.test");
	fuzz_set(conf, "mtad", "auth_require_tls", "no");
	fuzz_set(conf, "mtad", "max_message_size", "64k");
	fuzz_set(conf, "mtad", "max_recipients_per_transaction", "20");
	fuzz_set(conf, "mtad", "command_timeout", "5s");
	fuzz_set(conf, "mtad", "data_timeout", "5s");
	m.conf = conf;
	TAILQ_INIT(&m.sessions);
	m.hostname = "mx.heron.test";
	m.lim.max_message_size = (uint64_t)conf_int(conf, "mtad", "max_message_size");
	m.lim.line_max = (size_t)conf_int(conf, "mtad", "line_max");
	m.lim.max_rcpt = (size_t)conf_int(conf, "mtad", "max_recipients_per_transaction");
	m.lim.reject_rcpt = (size_t)conf_int(conf, "mtad", "reject_recipients_per_transaction");
	m.lim.max_tx = (size_t)conf_int(conf, "mtad", "max_transactions_per_session");
	m.lim.max_errors = (size_t)conf_int(conf, "mtad", "max_errors");
	m.lim.command_timeout_ms = conf_int(conf, "mtad", "command_timeout");
	m.lim.data_timeout_ms = conf_int(conf, "mtad", "data_timeout");
	m.lim.max_conns_per_ip = 1000;
	m.base = event_base_new();
	fuzz_must(m.base != NULL, "event_base_new");
	m.fin = finisher_new(m.base);
	m.shared = shmtable_new(MTAD_SHARED_SLOTS, 1, MTAD_SHARED_KEY_MAX, 60000); /* as mtad.c */
	fuzz_must(ldapauth_new(m.base, conf, &m.la, &err) == 0, "ldapauth_new");
	m.ipcount = net_ipcount_new(1024);
	for (int i = 0; i < 3; i++) {
		fuzz_set(conf, "mtad", kinds[i], "127.0.0.1:0");
		fuzz_must(net_listen(conf_addrs(conf, "mtad", kinds[i]), NULL, &fds[kind_ids[i]],
				     &err) == 0, "listen");
		ports[i] = net_fd_port(fds[kind_ids[i]].fd[0]);
	}
	fuzz_must(mtad_servers_start(&m, fds, 1000) == 0, "mtad_servers_start");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_opts so;
	char sdir[160];
	int port = ports[size > 0 ? data[0] % 3 : 0];

	snprintf(sdir, sizeof(sdir), "%s/store%u", dir, serial++);
	fuzz_set(conf, "store", "path", sdir);
	store_opts_from_conf(conf, &so);
	so.create = true;
	fuzz_must(store_open(&so, &m.store) == 0, "store_open");
	fuzz_must(store_gc_new(m.store, &m.gc) == 0, "store_gc_new");
	store_gc_attach(m.gc, m.base);
	fuzz_session(m.base, port, size > 0 ? data + 1 : data, size > 0 ? size - 1 : 0,
		     session_done, NULL, 60000);
	store_gc_free(&m.gc);
	store_close(&m.store);
	fuzz_rm_rf(sdir);
	return 0;
}
