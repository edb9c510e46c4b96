/* fuzz_imap_session.c — libFuzzer target: a whole IMAP session. Each input is a client byte
 * stream sent over a loopback TCP connection to the real imapd command code (imapd/, the users
 * file backend, a fresh store in a temp dir per input), then half-closed; the session must
 * answer and close by itself within a few seconds, with nothing left allocated (ASan). User
 * "alice", password "pw". Built only with -Dfuzz=true (clang). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "imapd/imapd.h"
#include "ldapauth/ldapauth.h"
#include "store/store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[80];
static struct conf *conf;
static struct imap_server srv;
static struct net_fds fds;
static int port;
static unsigned serial;

static void must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_imap_session: %s: %s\n", what, strerror(errno));
		abort();
	}
}

static void set(const char *sec, const char *key, const char *val)
{
	char *err = NULL;

	if (conf_set(conf, sec, key, val, &err) < 0) {
		fprintf(stderr, "fuzz_imap_session: %s.%s: %s\n", sec, key, err);
		abort();
	}
}

static void accept_cb(struct net_server *ns, int fd, const struct sockaddr *sa, socklen_t salen,
		      void *arg)
{
	imap_client_new(arg, ns, fd, sa, salen, false);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	char path[160];
	char *err = NULL;
	FILE *f;

	(void)argc;
	(void)argv;
	log_init("fuzz", true, 0);
	log_set_level(getenv("FUZZ_LOG") != NULL ? LOG_LVL_DEBUG : LOG_LVL_ERR);
	snprintf(dir, sizeof(dir), "%s/heron-fuzz-imap.XXXXXX", tmp);
	must(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(path, sizeof(path), "%s/users", dir);
	f = fopen(path, "w");
	must(f != NULL, path);
	/* {SHA256} of "pw" */
	fputs("alice:{SHA256}MMlS+rEiw/l1nwKm2Vw3WLJGtP7iOZV7LU/uRuJhcMQ=:alice@heron.test\n"
	      "bob:{SHA256}MMlS+rEiw/l1nwKm2Vw3WLJGtP7iOZV7LU/uRuJhcMQ=:bob@heron.test\n", f);
	fclose(f);
	conf = conf_defaults();
	set("directory", "backend", "file");
	set("directory", "users_file", path);
	set("store", "partitions", "1");
	set("store", "map_size", "4M");
	set("imapd", "listen", "127.0.0.1:0");
	set("imapd", "allow_plaintext_auth", "yes");

	srv.conf = conf;
	srv.base = event_base_new();
	must(srv.base != NULL, "event_base_new");
	must(ldapauth_new(srv.base, conf, &srv.auth, &err) == 0, "ldapauth_new");
	srv.allow_plaintext = true;
	srv.lim.line_max = (size_t)conf_int(conf, "imapd", "line_max");
	srv.lim.literal_max = (size_t)conf_int(conf, "imapd", "literal_max");
	srv.lim.depth_max = 32;
	srv.lim.items_max = 4096;
	srv.max_append = 1 << 20;
	srv.login_timeout_ms = 5000;
	srv.idle_timeout_ms = 5000;
	srv.max_bad = (unsigned)conf_int(conf, "imapd", "max_bad_commands");
	srv.max_per_ip = 1000;
	srv.max_clients = 1000;
	must(net_listen(conf_addrs(conf, "imapd", "listen"), NULL, &fds, &err) == 0, "listen");
	port = net_fd_port(fds.fd[0]);
	srv.plain = net_server_new(srv.base, &fds, 1000, accept_cb, &srv);
	return 0;
}

struct peer {
	const uint8_t *data;
	size_t size, off;
	bool eof;
	struct event *rd, *wr;
	int fd;
};

static void peer_write(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;
	ssize_t n = write(fd, p->data + p->off, p->size - p->off);

	if (n > 0)
		p->off += (size_t)n;
	else if (n < 0 && errno != EAGAIN && errno != EINTR)
		p->off = p->size; /* the server closed: stop sending */
	if (p->off == p->size) {
		shutdown(fd, SHUT_WR);
		event_del(p->wr);
	}
}

static void peer_read(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;
	char sink[65536];
	ssize_t n = read(fd, sink, sizeof(sink));

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		p->eof = true;
		event_del(p->rd);
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_rf(const char *path)
{
	must(nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0, "remove the store");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct store_opts so;
	struct peer p = { .data = data, .size = size };
	char sdir[160];
	struct timeval tick = { 0, 100000 };
	int64_t deadline;

	snprintf(sdir, sizeof(sdir), "%s/store%u", dir, serial++);
	set("store", "path", sdir);
	store_opts_from_conf(conf, &so);
	so.create = true;
	must(store_open(&so, &srv.store) == 0, "store_open");

	p.fd = socket(AF_INET, SOCK_STREAM, 0);
	must(p.fd >= 0, "socket");
	must(connect(p.fd, (struct sockaddr *)&sin, sizeof(sin)) == 0, "connect");
	must(fcntl(p.fd, F_SETFL, O_NONBLOCK) == 0, "fcntl");
	p.rd = event_new(srv.base, p.fd, EV_READ | EV_PERSIST, peer_read, &p);
	p.wr = event_new(srv.base, p.fd, EV_WRITE | EV_PERSIST, peer_write, &p);
	event_add(p.rd, NULL);
	if (size > 0)
		event_add(p.wr, NULL);
	else
		shutdown(p.fd, SHUT_WR);
	/* The session answers, sees the end of input and closes; bounded in time (a hang is a
	   bug: the fuzzer's -timeout also catches it). */
	deadline = now_ms() + 8000;
	while ((!p.eof || srv.clients != NULL) && now_ms() < deadline) {
		event_base_loopexit(srv.base, &tick);
		event_base_loop(srv.base, EVLOOP_ONCE);
	}
	if (!p.eof || srv.clients != NULL) {
		fprintf(stderr, "fuzz_imap_session: the session did not end\n");
		abort();
	}
	event_free(p.rd);
	event_free(p.wr);
	close(p.fd);
	store_close(&srv.store);
	rm_rf(sdir);
	return 0;
}
