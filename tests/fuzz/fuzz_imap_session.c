/* fuzz_imap_session.c — libFuzzer target: a whole IMAP session. Each input is a client byte
 * stream sent over an in-process connection (fuzz_peer.c) to the real imapd command code (imapd/, the users
 * file backend; one worker set up by imapd_worker_init as imapd's are, on a store in a temp
 * dir, made once in LLVMFuzzerInitialize and reused), then half-closed; the session must
 * answer and close by itself within a few seconds, with nothing left allocated (ASan). Each
 * input starts from the same state: the store is emptied after it (fuzz_store_reset), each
 * connection comes from an address of its own, and the login throttle counts but never holds
 * an answer (authguard_no_wait), so a crash reproduces from its input alone and no input
 * waits on a timer. User "alice", password "pw". Built only with -Dfuzz=true (clang). */
#include <assert.h>
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
#include "imapd/imapd.h"
#include "ldapauth/ldapauth.h"
#include "store/store.h"
#include "tests/fuzz/fuzz_peer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
	return FUZZ_SESSION_ASAN_OPTIONS;
}

static char dir[80], sdir[96];
static struct conf *conf;
static struct imap_server srv;
static struct shmtable *shared;
static struct net_fds fds;
static struct sockaddr_un to;

static void set(const char *sec, const char *key, const char *val)
{
	fuzz_set(conf, sec, key, val);
}

static bool session_done(void *arg)
{
	(void)arg;
	return srv.clients == NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[160];

	(void)argc;
	(void)argv;
	fuzz_start(dir, sizeof(dir), "imap", path, sizeof(path));
	fuzz_leak_init(); /* before the worker makes its threads */
	conf = conf_defaults();
	set("directory", "backend", "file");
	set("directory", "users_file", path);
	set("store", "partitions", "1");
	set("store", "map_size", "4M");
	snprintf(sdir, sizeof(sdir), "%s/store", dir);
	set("store", "path", sdir);
	set("store", "group_commit_delay", "0s"); /* commits answer at once: no waiting */
	set("imapd", "listen", "127.0.0.1:0");    /* the listener is fuzz_listen's */
	set("imapd", "allow_plaintext_auth", "yes");
	set("imapd", "max_append_size", "1M");
	set("imapd", "login_timeout", "5s");
	set("imapd", "max_connections_per_ip", "1000");
	set("imapd", "namespace_other", "Other Users/"); /* the namespaces' names parsed too */
	set("imapd", "namespace_shared", "Shared/");
	shared = shmtable_new(64, 1, NET_SHM_KEY_MAX, 60000); /* the master makes it in imapd.c */
	fuzz_listen("imap", &fds, &to);
	imapd_worker_init(&srv, conf, NULL);
	srv.idle_timeout_ms = 5000; /* below the key's minimum: an IDLE ends within the bound */
	srv.plain = net_server_new(srv.base, &fds, 1000, imap_server_accept_plain, &srv);
	srv.shared = shared;
	authguard_no_wait(srv.guard);
	store_gc_inline(srv.gc); /* commits in this thread: no hand-off to wait for */
	return 0;
}

/* One session on the worker made once; afterwards the store is emptied again. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_leak_begin();
	/* The session answers, sees the end of input and closes, within the time bound (a hang
	   is a bug; the fuzzer's -timeout also catches it). */
	fuzz_session(srv.base, &to, data, size, session_done, NULL, srv.gc, 60000);
	fuzz_store_reset(srv.store);
	fuzz_leak_end(srv.gc);
	return 0;
}
