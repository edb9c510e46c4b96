/* fuzz_imap_session.c — libFuzzer target: a whole IMAP session. Each input is a client byte
 * stream sent over a loopback TCP connection to the real imapd command code (imapd/, the users
 * file backend; a worker set up by imapd_worker_init as imapd's are, on a fresh store in a temp
 * dir, per input), then half-closed; the session must answer and close by itself within a
 * few seconds, with nothing left allocated (ASan); a failed LOGIN/AUTHENTICATE is answered
 * after imapd's penalty (up to 8 s each, counted afresh for each input), hence the longer
 * bound. User "alice", password "pw". Built only with -Dfuzz=true
 * (clang). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

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

static char dir[80];
static struct conf *conf;
static struct imap_server srv;
static struct shmtable *shared;
static struct net_fds fds;
static int port;
static unsigned serial;

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
	char *err = NULL;

	(void)argc;
	(void)argv;
	fuzz_start(dir, sizeof(dir), "imap", path, sizeof(path));
	conf = conf_defaults();
	set("directory", "backend", "file");
	set("directory", "users_file", path);
	set("store", "partitions", "1");
	set("store", "map_size", "4M");
	set("imapd", "listen", "127.0.0.1:0");
	set("imapd", "allow_plaintext_auth", "yes");
	set("imapd", "max_append_size", "1M");
	set("imapd", "login_timeout", "5s");
	set("imapd", "max_connections_per_ip", "1000");
	shared = shmtable_new(64, 1, NET_SHM_KEY_MAX, 60000); /* the master makes it in imapd.c */
	fuzz_must(net_listen(conf_values(conf)->imapd.listen, NULL, &fds, &err) == 0, "listen");
	port = net_fd_port(fds.fd[0]);
	return 0;
}

/* Each input gets a worker of its own, set up as imapd's (imapd_worker_init) on a fresh
   store, so one input's state (failed logins, sessions) is not the next one's; the listening
   socket is bound once. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char sdir[160];

	snprintf(sdir, sizeof(sdir), "%s/store%u", dir, serial++);
	set("store", "path", sdir);
	imapd_worker_init(&srv, conf, NULL);
	srv.idle_timeout_ms = 5000; /* below the key's minimum: an IDLE ends within the bound */
	srv.plain = net_server_new(srv.base, &fds, 1000, imap_server_accept_plain, &srv);
	/* The session answers, sees the end of input and closes, within the time bound (a hang
	   is a bug; the fuzzer's -timeout also catches it). */
	srv.shared = shared;
	/* one input's failures are its own */
	shmtable_fail_clear(srv.shared, SHM_AUTH_FAILS, "127.0.0.1");
	fuzz_session(srv.base, port, data, size, session_done, NULL, 60000);
	imapd_worker_free(&srv);
	fuzz_rm_rf(sdir);
	return 0;
}
