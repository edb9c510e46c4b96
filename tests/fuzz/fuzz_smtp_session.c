/* fuzz_smtp_session.c — libFuzzer target: a whole SMTP (or submission, or LMTP) session. Each
 * input is a client byte stream sent over an in-process connection (fuzz_peer.c) to the real mtad session code (mtad/
 * without its main, the users file backend; one worker set up by mtad_worker_init as mtad's
 * are, on a store in a temp dir, made once in LLVMFuzzerInitialize and reused), then
 * half-closed; the session must answer and end by itself within a few seconds with nothing
 * leaked (ASan). Each input starts from the same state: the store (mailboxes, queue) is
 * emptied after it (fuzz_store_reset), each connection comes from an address of its own, and
 * the login throttle counts but never holds an answer (authguard_no_wait), so a crash
 * reproduces from its input alone and no input waits on a timer. The first byte picks the
 * listener: SMTP (MX), submission or LMTP. Local domain heron.test, users alice and bob
 * (password "pw"); no relay host, the queue runner is not started (relayed mail is only
 * queued). Built only with -Dfuzz=true. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/authguard.h"
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
const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
	return FUZZ_SESSION_ASAN_OPTIONS;
}

static const char *const kinds[] = { "listen", "submission", "lmtp" };
static const enum mtad_listener kind_ids[] = { L_SMTP, L_SUBMISSION, L_LMTP };
static char dir[80], sdir[96];
static struct conf *conf;
static struct mtad m;
static struct shmtable *shared;
static struct net_fds fds[L_NKINDS];
static struct sockaddr_un to[3];

static bool session_done(void *arg)
{
	(void)arg;
	return m.nsessions == 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[160];

	(void)argc;
	(void)argv;
	fuzz_start(dir, sizeof(dir), "smtp", path, sizeof(path));
	fuzz_leak_init(); /* before the worker makes its threads */
	conf = conf_defaults();
	fuzz_set(conf, "directory", "backend", "file");
	fuzz_set(conf, "directory", "users_file", path);
	fuzz_set(conf, "store", "partitions", "1");
	fuzz_set(conf, "store", "map_size", "4M");
	snprintf(sdir, sizeof(sdir), "%s/store", dir);
	fuzz_set(conf, "store", "path", sdir);
	fuzz_set(conf, "store", "group_commit_delay", "0s"); /* commits answer at once */
	fuzz_set(conf, "mtad", "local_domains", "heron.test");
	fuzz_set(conf, "mtad", "auth_require_tls", "no");
	fuzz_set(conf, "mtad", "max_message_size", "64k");
	fuzz_set(conf, "mtad", "max_recipients_per_transaction", "20");
	fuzz_set(conf, "mtad", "max_connections_per_ip", "1000");
	fuzz_set(conf, "mtad", "command_timeout", "5s");
	fuzz_set(conf, "mtad", "data_timeout", "5s");
	shared = shmtable_new(MTAD_SHARED_SLOTS, 1, MTAD_SHARED_KEY_MAX, 60000); /* as mtad.c */
	for (int i = 0; i < 3; i++) {
		fuzz_set(conf, "mtad", kinds[i],
			 "127.0.0.1:0"); /* the listeners are fuzz_listen's */
		fuzz_listen(kinds[i], &fds[kind_ids[i]], &to[i]);
	}
	mtad_worker_init(&m, conf, 0, "mx.heron.test");
	m.shared = shared;
	authguard_no_wait(m.guard);
	store_gc_inline(m.gc); /* commits in this thread: no hand-off to wait for */
	fuzz_must(mtad_servers_start(&m, fds, 1000) == 0, "mtad_servers_start");
	return 0;
}

/* One session on the worker made once; afterwards the store is emptied again. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct sockaddr_un *l = &to[size > 0 ? data[0] % 3 : 0];

	fuzz_leak_begin();
	fuzz_session(m.base, l, size > 0 ? data + 1 : data, size > 0 ? size - 1 : 0, session_done,
		     NULL, m.gc, 60000);
	fuzz_store_reset(m.store);
	fuzz_leak_end(m.gc);
	return 0;
}
