/* test_ldapauth_slapd.c — ldapauth against a real slapd started by scripts/ldap (run through
 * with_slapd.py, which exports the fixture's ldap.env): bind and lookup modes, ldaps:// and
 * StartTLS with CA checks, aliases and mail attributes, a password changed while cached,
 * injection attempts, slapd stopped, paused and restarted while an event-loop timer keeps
 * firing, cache hits and TTL expiry, and 1,000 concurrent authentications within the pool. */
#include <arpa/inet.h>
#include <dirent.h>
#include <glob.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "la_test.h"

static struct event_base *base;

/* What a test holds (configs, handles, events whose arguments live on its stack): a failed
   assertion leaves the test early, so teardown frees what is still held and no leftover
   connection or timer leaks into the next test. */
enum held_kind { HELD_CONF, HELD_LA, HELD_EVENT };
static struct {
	enum held_kind kind;
	void *p;
} held[8];

static void *hold(enum held_kind kind, void *p)
{
	for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++)
		if (held[i].p == NULL) {
			held[i].kind = kind;
			held[i].p = p;
			return p;
		}
	fail_msg("a test holds too many things");
	return p;
}

static void held_free(enum held_kind kind, void *p)
{
	struct conf *c = p;
	struct ldapauth *la = p;

	if (kind == HELD_CONF)
		conf_free(&c);
	else if (kind == HELD_LA)
		ldapauth_free(&la);
	else
		event_free(p);
}

/* Frees p, which the test holds, and forgets it. */
static void release(void *p)
{
	for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++)
		if (held[i].p != NULL && held[i].p == p) {
			held_free(held[i].kind, held[i].p);
			held[i].p = NULL;
		}
}

static int teardown(void **state)
{
	/* handles first, then events, then the configs the handles were made from */
	for (int pass = 0; pass < 3; pass++) {
		enum held_kind k = pass == 0 ? HELD_LA : pass == 1 ? HELD_EVENT : HELD_CONF;

		for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++)
			if (held[i].p != NULL && held[i].kind == k) {
				held_free(k, held[i].p);
				held[i].p = NULL;
			}
	}
	return 0;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	if (v == NULL)
		fail_msg("%s not set: run me through tests/ldapauth/with_slapd.py", name);
	return v;
}

static struct conf *ldap_conf(const char *mode)
{
	struct conf *c = hold(HELD_CONF, conf_defaults());

	setk(c, "directory", "uri", env("LDAP_URI"));
	setk(c, "directory", "base", env("LDAP_PEOPLE"));
	setk(c, "directory", "auth_mode", mode);
	setk(c, "directory", "timeout", "2s");
	setk(c, "directory", "scram", "yes");
	if (strcmp(mode, "lookup") == 0) {
		setk(c, "directory", "bind_dn", env("LDAP_ADMIN_DN"));
		setk(c, "directory", "bind_password_file", env("LDAP_ADMIN_PASSWORD_FILE"));
	}
	return c;
}

static struct ldapauth *open_la(const struct conf *c)
{
	struct ldapauth *la = NULL;
	char *err = NULL;

	if (ldapauth_new(base, c, &la, &err) != 0)
		fail_msg("ldapauth_new: %s", err);
	return hold(HELD_LA, la);
}

static enum ldapauth_result auth1(struct ldapauth *la, const char *u, const char *p, struct got *g)
{
	int want = g->n + 1;

	ldapauth_auth(la, u, p, got_cb, g);
	run_until(base, g, want, 10000);
	assert_int_equal(g->n, want);
	return g->result;
}

static enum ldapauth_result lookup1(struct ldapauth *la, const char *a, struct got *g)
{
	int want = g->n + 1;

	ldapauth_lookup(la, a, got_cb, g);
	run_until(base, g, want, 10000);
	assert_int_equal(g->n, want);
	return g->result;
}

static enum ldapauth_result user1(struct ldapauth *la, const char *login, struct got *g)
{
	int want = g->n + 1;

	ldapauth_user(la, login, got_cb, g);
	run_until(base, g, want, 10000);
	assert_int_equal(g->n, want);
	return g->result;
}

static uint64_t dir_calls(struct ldapauth *la)
{
	struct ldapauth_stats st;

	ldapauth_get_stats(la, &st);
	return st.directory_calls;
}

static void ldap_admin(const char *tool, const char *args, const char *input)
{
	char *cmd = xasprintf("%s -x -H '%s' -D '%s' -w '%s' %s >/dev/null", tool, env("LDAP_URI"),
			      env("LDAP_ADMIN_DN"), env("LDAP_ADMIN_PASSWORD"), args);
	FILE *p = popen(cmd, "w");

	assert_non_null(p);
	if (input != NULL)
		fputs(input, p);
	assert_int_equal(pclose(p), 0);
	free(cmd);
}

static void fixture(const char *verb)
{
	char *cmd = xasprintf("'%s/scripts/ldap' %s '%s'", HERON_SOURCE_ROOT, verb,
			      env("HERON_LDAP_DIR"));

	assert_int_equal(system(cmd), 0);
	free(cmd);
}

static pid_t slapd_pid(void)
{
	char *path = xasprintf("%s/slapd.pid", env("HERON_LDAP_DIR"));
	FILE *f = fopen(path, "r");
	int pid = 0;

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%d", &pid), 1);
	fclose(f);
	free(path);
	return (pid_t)pid;
}

/* Pauses slapd and waits until every one of its threads is stopped. kill() only queues
   SIGSTOP: the thread picked to take it may wait for a CPU while the others keep answering,
   so on a loaded machine slapd still replies for a while after kill() has returned. */
static void pause_slapd(pid_t pid)
{
	char *pattern = xasprintf("/proc/%d/task/*/stat", (int)pid);
	struct timespec ms = { 0, 1000000 };

	assert_int_equal(kill(pid, SIGSTOP), 0);
	for (int i = 0; i < 10000; i++) {
		glob_t gl;
		size_t stopped = 0;

		assert_int_equal(glob(pattern, 0, NULL, &gl), 0);
		for (size_t t = 0; t < gl.gl_pathc; t++) {
			FILE *f = fopen(gl.gl_pathv[t], "r");
			char buf[512], *paren;
			size_t len = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

			if (f != NULL)
				fclose(f);
			buf[len] = '\0';
			/* "pid (comm) S ...": the state follows the last ')' */
			paren = strrchr(buf, ')');
			if (paren != NULL && paren[1] == ' ' && strchr("Tt", paren[2]) != NULL &&
			    paren[2] != '\0')
				stopped++;
		}
		if (stopped == gl.gl_pathc) {
			globfree(&gl);
			free(pattern);
			return;
		}
		globfree(&gl);
		nanosleep(&ms, NULL);
	}
	fail_msg("slapd %d did not stop within 10 s of SIGSTOP", (int)pid);
}

static void check_modes(const char *mode, struct conf *c)
{
	struct ldapauth *la = open_la(c);
	struct got g = { 0 };

	assert_string_equal(ldapauth_mode(la), mode);
	assert_int_equal(auth1(la, "user7", "user7", &g), LDAPAUTH_OK);
	assert_false(g.cached);
	assert_string_equal(g.login, "user7");
	assert_string_equal(g.address, "user7@heron.test");
	assert_string_equal(g.dn, "uid=user7,ou=people,dc=heron,dc=test");
	assert_string_equal(g.alias0, "alias.user7@heron.test");
	assert_int_equal(auth1(la, "user7", "user8", &g), LDAPAUTH_EBADCRED);
	assert_int_equal(auth1(la, "user8", "user8", &g), LDAPAUTH_OK);
	assert_int_equal(auth1(la, "nosuchuser", "x", &g), LDAPAUTH_ENOUSER);
	assert_int_equal(lookup1(la, "alias.user9@heron.test", &g), LDAPAUTH_OK);
	assert_string_equal(g.login, "user9");
	assert_string_equal(g.address, "user9@heron.test");
	assert_int_equal(lookup1(la, "USER9@heron.test", &g), LDAPAUTH_OK);
	assert_string_equal(g.login, "user9");
	assert_int_equal(lookup1(la, "nobody@heron.test", &g), LDAPAUTH_ENOUSER);
	/* a user by login without a password (imapd's SETACL), in either mode */
	assert_int_equal(user1(la, "User10", &g), LDAPAUTH_OK);
	assert_string_equal(g.login, "user10");
	assert_int_equal(user1(la, "nosuchuser", &g), LDAPAUTH_ENOUSER);
	release(la);
}

static void test_bind_mode(void **state)
{
	struct conf *c = ldap_conf("bind");

	check_modes("bind", c);
	release(c);
}

static void test_lookup_mode(void **state)
{
	struct conf *c = ldap_conf("lookup");

	check_modes("lookup", c);
	release(c);
}

static void test_ldaps_and_starttls(void **state)
{
	struct conf *c = ldap_conf("lookup");
	struct ldapauth *la;
	struct got g = { 0 };

	/* ldaps:// with the fixture's CA */
	setk(c, "directory", "uri", env("LDAPS_URI"));
	setk(c, "tls", "ca", env("LDAP_CA"));
	check_modes("lookup", c);
	/* StartTLS on ldap://, bind mode */
	setk(c, "directory", "uri", env("LDAP_URI"));
	setk(c, "directory", "starttls", "yes");
	setk(c, "directory", "auth_mode", "bind");
	check_modes("bind", c);
	/* a CA that did not sign the server's certificate: temporary, never wrong credentials */
	setk(c, "tls", "ca", "/etc/ssl/certs/ca-certificates.crt");
	la = open_la(c);
	assert_int_equal(auth1(la, "user7", "user7", &g), LDAPAUTH_ETEMP);
	setk(c, "directory", "starttls", "no");
	setk(c, "directory", "uri", env("LDAPS_URI"));
	release(la);
	la = open_la(c);
	assert_int_equal(auth1(la, "user7", "user7", &g), LDAPAUTH_ETEMP);
	release(la);
	release(c);
}

static void test_mail_attributes(void **state)
{
	struct conf *c = ldap_conf("bind");
	struct ldapauth *la = open_la(c);
	struct got g = { 0 };

	ldap_admin("ldapmodify", "",
		   "dn: uid=user5,ou=people,dc=heron,dc=test\nchangetype: modify\n"
		   "add: mailHost\nmailHost: store2.heron.test\n-\n"
		   "add: heronMailPartition\nheronMailPartition: 3\n-\n"
		   "add: mailQuota\nmailQuota: 1048576\n-\n"
		   "add: mailAlternateAddress\nmailAlternateAddress: postmaster@heron.test\n");
	assert_int_equal(lookup1(la, "postmaster@heron.test", &g), LDAPAUTH_OK);
	assert_string_equal(g.login, "user5");
	assert_string_equal(g.host, "store2.heron.test");
	assert_int_equal(g.partition, 3);
	assert_int_equal(g.quota, 1048576);
	assert_int_equal(g.naliases, 2);
	release(la);
	release(c);
}

static void check_password_change(const char *mode, const char *user)
{
	struct conf *c = ldap_conf(mode);
	struct ldapauth *la = open_la(c);
	struct got g = { 0 };
	uint64_t calls;
	char *args;

	assert_int_equal(auth1(la, user, user, &g), LDAPAUTH_OK);
	assert_false(g.cached);
	calls = dir_calls(la);
	assert_int_equal(auth1(la, user, user, &g), LDAPAUTH_OK);
	assert_true(g.cached);
	assert_int_equal(dir_calls(la), calls);
	args = xasprintf("-s new-%s 'uid=%s,ou=people,dc=heron,dc=test'", user, user);
	ldap_admin("ldappasswd", args, NULL);
	free(args);
	args = xasprintf("new-%s", user);
	/* the new password is not the cached one: the directory is asked and says yes */
	assert_int_equal(auth1(la, user, args, &g), LDAPAUTH_OK);
	assert_false(g.cached);
	assert_true(dir_calls(la) > calls);
	/* now the cache holds the new one; the old password goes to the directory: refused */
	calls = dir_calls(la);
	assert_int_equal(auth1(la, user, user, &g), LDAPAUTH_EBADCRED);
	assert_true(dir_calls(la) > calls);
	assert_int_equal(auth1(la, user, args, &g), LDAPAUTH_OK);
	assert_true(g.cached);
	free(args);
	release(la);
	release(c);
}

/* Lookup mode reads the user's {SCRAM-SHA-256} value beside the others, never through the
   cache; bind mode has none to give. */
static void test_scram_secret(void **state)
{
	struct conf *c = ldap_conf("lookup"), *cb = ldap_conf("bind");
	struct ldapauth *la = open_la(c), *lb = open_la(cb);
	struct got g = { 0 };
	const char *e = NULL;
	char *h = ldapauth_passwd_hash("SCRAM-SHA-256", "user13", &e);
	char *ldif = xasprintf("dn: uid=user13,ou=people,dc=heron,dc=test\nchangetype: modify\n"
			       "add: userPassword\nuserPassword: %s\n",
			       h);
	uint64_t calls;
	int want;

	ldap_admin("ldapmodify", "", ldif);
	assert_true(ldapauth_scram_capable(la));
	/* the password still logs in (and is cached); SCRAM goes to the directory each time */
	assert_int_equal(auth1(la, "user13", "user13", &g), LDAPAUTH_OK);
	for (int i = 0; i < 2; i++) {
		calls = dir_calls(la);
		want = g.n + 1;
		ldapauth_scram(la, "user13", got_cb, &g);
		run_until(base, &g, want, 10000);
		assert_int_equal(g.result, LDAPAUTH_OK);
		assert_false(g.cached);
		assert_string_equal(g.scram, h + strlen("{SCRAM-SHA-256}"));
		assert_string_equal(g.login, "user13");
		assert_true(dir_calls(la) > calls);
	}
	/* a user with only a salted SHA: no secret */
	want = g.n + 1;
	ldapauth_scram(la, "user14", got_cb, &g);
	run_until(base, &g, want, 10000);
	assert_int_equal(g.result, LDAPAUTH_EBADCRED);
	assert_string_equal(g.scram, "");
	want = g.n + 1;
	ldapauth_scram(la, "nobody", got_cb, &g);
	run_until(base, &g, want, 10000);
	assert_int_equal(g.result, LDAPAUTH_ENOUSER);
	assert_false(ldapauth_scram_capable(lb));
	want = g.n + 1;
	ldapauth_scram(lb, "user13", got_cb, &g);
	run_until(base, &g, want, 10000);
	assert_int_equal(g.result, LDAPAUTH_EBADCRED);
	assert_true(g.refused);
	free(ldif);
	free(h);
	release(la);
	release(lb);
	release(c);
	release(cb);
}

static void test_password_changed_while_cached(void **state)
{
	check_password_change("bind", "user11");
	check_password_change("lookup", "user12");
}

static void test_injection(void **state)
{
	static const char *const names[] = {
		"*",           "user*",  "a)(uid=*",  "user7)(uid=*",
		"*)(|(uid=*",  "\\00",   "user7\\00", "user7)(|(objectClass=*)",
		"(uid=user7)", "user7*",
	};
	struct conf *c = ldap_conf("bind");
	struct ldapauth *la = open_la(c);
	struct got g = { 0 };
	char longname[LDAPAUTH_NAME_MAX + 50];
	uint64_t calls;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_int_not_equal(auth1(la, names[i], "user7", &g), LDAPAUTH_OK);
		assert_int_not_equal(lookup1(la, names[i], &g), LDAPAUTH_OK);
		char *addr = xasprintf("%s@heron.test", names[i]);
		assert_int_not_equal(lookup1(la, addr, &g), LDAPAUTH_OK);
		free(addr);
	}
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	calls = dir_calls(la);
	assert_int_equal(auth1(la, longname, "user7", &g), LDAPAUTH_ENOUSER);
	assert_true(g.refused);
	longname[LDAPAUTH_NAME_MAX] = '\0'; /* the longest allowed still asks, and finds none */
	assert_int_equal(auth1(la, longname, "user7", &g), LDAPAUTH_ENOUSER);
	assert_false(g.refused);
	/* refused without asking the directory */
	calls = dir_calls(la);
	assert_int_equal(auth1(la, "user7", "", &g), LDAPAUTH_EBADCRED);
	assert_true(g.refused);
	assert_int_equal(auth1(la, "user7\r\n", "user7", &g), LDAPAUTH_ENOUSER);
	assert_int_equal(auth1(la, "user7", "user7\n", &g), LDAPAUTH_EBADCRED);
	assert_int_equal(auth1(la, "", "user7", &g), LDAPAUTH_ENOUSER);
	assert_int_equal(lookup1(la, "a\rb@heron.test", &g), LDAPAUTH_ENOUSER);
	assert_int_equal(dir_calls(la), calls);
	/* an empty password for a real DN never binds anonymously as a success */
	assert_int_equal(auth1(la, "user7", "", &g), LDAPAUTH_EBADCRED);
	release(la);
	release(c);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(*(int *)arg)++;
}

/* Tries auth until it succeeds (the pool reconnects with backoff), bounded. */
static void wait_ok(struct ldapauth *la, const char *user)
{
	struct got g = { 0 };

	for (int i = 0; i < 100; i++) {
		if (auth1(la, user, user, &g) == LDAPAUTH_OK)
			return;
		assert_int_equal(g.result, LDAPAUTH_ETEMP);
		run_for(base, 200);
	}
	fail_msg("%s never authenticated after the directory came back", user);
}

static void test_outage(void **state)
{
	struct conf *c = ldap_conf("bind");
	struct ldapauth *la;
	struct got g = { 0 };
	int ticks = 0, before, want;
	struct timeval ten_ms = { 0, 10000 };
	struct event *tick = hold(HELD_EVENT, event_new(base, -1, EV_PERSIST, tick_cb, &ticks));

	setk(c, "directory", "timeout", "1s");
	la = open_la(c);
	event_add(tick, &ten_ms);
	assert_int_equal(auth1(la, "user20", "user20", &g), LDAPAUTH_OK);
	/* stopped: temporary failure within the timeout, the loop keeps running */
	fixture("stop");
	before = ticks;
	ldapauth_auth(la, "user21", "user21", got_cb, &g);
	run_until(base, &g, 2, 1000 + 1500);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.result, LDAPAUTH_ETEMP);
	ldapauth_lookup(la, "user22@heron.test", got_cb, &g);
	run_until(base, &g, 3, 1000 + 1500);
	assert_int_equal(g.n, 3);
	assert_int_equal(g.result, LDAPAUTH_ETEMP);
	run_for(base, 300);
	assert_true(ticks > before);
	/* a cached user still gets in */
	assert_int_equal(auth1(la, "user20", "user20", &g), LDAPAUTH_OK);
	assert_true(g.cached);
	/* restarted: the next calls succeed */
	fixture("restart");
	wait_ok(la, "user21");
	/* paused (accepts connections, never answers): the per-operation timeout fires */
	pause_slapd(slapd_pid());
	before = ticks;
	want = g.n + 1;
	ldapauth_auth(la, "user23", "user23", got_cb, &g);
	run_until(base, &g, want, 1000 + 3000);
	assert_int_equal(g.n, want);
	assert_int_equal(g.result, LDAPAUTH_ETEMP);
	assert_true(ticks > before + 10);
	assert_int_equal(kill(slapd_pid(), SIGCONT), 0);
	wait_ok(la, "user23");
	release(la);
	release(tick);
	release(c);
}

/* A relay between ldapauth and slapd that hands every reply over in two parts: its first byte,
   then, after a pause, the rest. Runs in its own thread for one connection. */
struct relay {
	int lfd, cfd, sfd;
	pthread_t th;
};

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	struct pollfd pf[2];
	char buf[65536];
	struct timespec pause = { 0, 300 * 1000000 };

	r->cfd = accept(r->lfd, NULL, NULL);
	if (r->cfd == -1)
		return NULL;
	pf[0] = (struct pollfd){ .fd = r->cfd, .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = r->sfd, .events = POLLIN };
	while (poll(pf, 2, 10000) > 0) {
		ssize_t n;

		if (pf[0].revents != 0) {
			if ((n = read(r->cfd, buf, sizeof(buf))) <= 0 ||
			    write(r->sfd, buf, n) != n)
				break;
		}
		if (pf[1].revents != 0) {
			if ((n = read(r->sfd, buf, sizeof(buf))) <= 0 ||
			    write(r->cfd, buf, 1) != 1)
				break;
			nanosleep(&pause, NULL);
			if (n > 1 && write(r->cfd, buf + 1, n - 1) != n - 1)
				break;
		}
	}
	return NULL;
}

static void relay_start(struct relay *r, int *port_r)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	socklen_t sl = sizeof(sin);

	r->cfd = -1;
	r->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(r->lfd >= 0);
	assert_int_equal(bind(r->lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(r->lfd, 1), 0);
	assert_int_equal(getsockname(r->lfd, (struct sockaddr *)&sin, &sl), 0);
	*port_r = ntohs(sin.sin_port);
	sin.sin_port = htons((uint16_t)atoi(env("LDAPS_PORT")));
	r->sfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(r->sfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(pthread_create(&r->th, NULL, relay_main, r), 0);
}

static void relay_stop(struct relay *r)
{
	shutdown(r->sfd, SHUT_RDWR); /* the relay sees the end and returns */
	pthread_join(r->th, NULL);
	close(r->sfd);
	close(r->lfd);
	if (r->cfd != -1)
		close(r->cfd);
}

/* Replies that arrive in parts never hold the event loop: a timer keeps firing while the
   rest of each reply is on its way (over ldaps://, so a TLS record arrives in part too; this
   fails if the socket is left blocking after the handshake). */
static void test_partial_replies(void **state)
{
	struct conf *c = ldap_conf("lookup");
	struct ldapauth *la;
	struct got g = { 0 };
	struct relay r;
	int port, ticks = 0, before;
	struct timeval ten_ms = { 0, 10000 };
	struct event *tick = hold(HELD_EVENT, event_new(base, -1, EV_PERSIST, tick_cb, &ticks));
	char *uri;

	relay_start(&r, &port);
	uri = xasprintf("ldaps://127.0.0.1:%d/", port);
	setk(c, "directory", "uri", uri);
	setk(c, "tls", "ca", env("LDAP_CA"));
	setk(c, "directory", "pool_size", "1");
	setk(c, "directory", "timeout", "10s");
	free(uri);
	la = open_la(c);
	event_add(tick, &ten_ms);
	/* the first call connects; the TLS handshake (synchronous, a known limit) is not counted */
	assert_int_equal(auth1(la, "user40", "user40", &g), LDAPAUTH_OK);
	before = ticks;
	/* the search's reply pauses 300 ms after its first byte, twice: two calls */
	assert_int_equal(auth1(la, "user41", "user41", &g), LDAPAUTH_OK);
	assert_int_equal(lookup1(la, "user42@heron.test", &g), LDAPAUTH_OK);
	assert_string_equal(g.login, "user42");
	print_message("%d ticks of 10 ms while two replies came in parts\n", ticks - before);
	assert_true(ticks - before >= 20);
	release(la);
	release(tick);
	release(c);
	relay_stop(&r);
}

/* A server that accepts the connection (the kernel does, from the listen backlog) and never
   says a word: the TLS handshake, synchronous in libldap, gives up after the timeout and the
   caller gets a temporary failure. */
static void test_silent_tls_server(void **state)
{
	struct conf *c = ldap_conf("bind");
	struct ldapauth *la;
	struct got g = { 0 };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	socklen_t sl = sizeof(sin);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	char *uri;

	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &sl), 0);
	uri = xasprintf("ldaps://127.0.0.1:%d/", ntohs(sin.sin_port));
	setk(c, "directory", "uri", uri);
	setk(c, "tls", "ca", env("LDAP_CA"));
	setk(c, "directory", "timeout", "1s");
	free(uri);
	la = open_la(c);
	assert_int_equal(auth1(la, "user43", "user43", &g), LDAPAUTH_ETEMP);
	release(la);
	release(c);
	close(lfd);
}

static void test_cache_counters_and_ttl(void **state)
{
	struct conf *c = ldap_conf("bind");
	struct ldapauth *la;
	struct got g = { 0 };
	struct ldapauth_stats st;
	uint64_t calls;

	setk(c, "directory", "auth_cache_ttl", "1s");
	setk(c, "directory", "negative_cache_ttl", "1s");
	la = open_la(c);
	assert_int_equal(auth1(la, "user30", "user30", &g), LDAPAUTH_OK);
	calls = dir_calls(la);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(auth1(la, "user30", "user30", &g), LDAPAUTH_OK);
		assert_true(g.cached);
	}
	assert_int_equal(dir_calls(la), calls);
	assert_int_equal(auth1(la, "nosuch30", "x", &g), LDAPAUTH_ENOUSER);
	calls = dir_calls(la);
	assert_int_equal(auth1(la, "nosuch30", "x", &g), LDAPAUTH_ENOUSER);
	assert_true(g.cached);
	assert_int_equal(lookup1(la, "user30@heron.test", &g), LDAPAUTH_OK);
	assert_int_equal(lookup1(la, "user30@heron.test", &g), LDAPAUTH_OK);
	assert_true(g.cached);
	ldapauth_get_stats(la, &st);
	assert_int_equal(st.cache_hits, 12);
	assert_int_equal(st.cache_entries, 3);
	/* after the TTL the directory is asked again */
	run_for(base, 1200);
	calls = dir_calls(la);
	assert_int_equal(auth1(la, "user30", "user30", &g), LDAPAUTH_OK);
	assert_false(g.cached);
	assert_int_equal(auth1(la, "nosuch30", "x", &g), LDAPAUTH_ENOUSER);
	assert_false(g.cached);
	assert_true(dir_calls(la) >= calls + 3);
	/* reload empties the cache */
	char *err = NULL;
	assert_int_equal(ldapauth_reload(la, &err), 0);
	ldapauth_get_stats(la, &st);
	assert_int_equal(st.cache_entries, 0);
	release(la);
	release(c);
}

/* Our own established TCP connections to the fixture's LDAP port: a check of the pool size
   that does not trust the library's counters. Every descriptor of the process is asked
   directly (peer address, TCP state); reading /proc/net/tcp instead costs tens of
   milliseconds per sample on a machine with thousands of sockets, which starved the loop
   under test, and it lists a socket twice when the table changes between two reads. */
static int count_ldap_sockets(void)
{
	int port = atoi(env("LDAP_PORT")), n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		int fd = atoi(de->d_name);
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct tcp_info ti;
		socklen_t tl = sizeof(ti);
		struct stat sb;

		if (de->d_name[0] == '.' || fd == dirfd(d) || fstat(fd, &sb) != 0 ||
		    !S_ISSOCK(sb.st_mode) || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 ||
		    getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0 ||
		    ti.tcpi_state != TCP_ESTABLISHED)
			continue;
		if ((ss.ss_family == AF_INET &&
		     ntohs(((struct sockaddr_in *)&ss)->sin_port) == port) ||
		    (ss.ss_family == AF_INET6 &&
		     ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) == port))
			n++;
	}
	closedir(d);
	return n;
}

static void sample_cb(evutil_socket_t fd, short what, void *arg)
{
	int *max = arg, n = count_ldap_sockets();

	if (n > *max)
		*max = n;
}

static void test_concurrent(void **state)
{
	enum { N = 1000 };
	struct conf *c = ldap_conf("bind");
	struct ldapauth *la;
	struct got g = { 0 };
	struct ldapauth_stats st;
	static char names[N][16];

	setk(c, "directory", "pool_size", "4");
	setk(c, "directory", "bind_pool_size", "4");
	setk(c, "directory", "auth_cache_size", "0");
	struct timeval two_ms = { 0, 2000 };
	int socks_max = 0;
	struct event *sample = hold(HELD_EVENT,
				    event_new(base, -1, EV_PERSIST, sample_cb, &socks_max));

	setk(c, "directory", "timeout", "30s");
	la = open_la(c);
	event_add(sample, &two_ms);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "user%d", 100 + i % 400);
		ldapauth_auth(la, names[i], names[i], got_cb, &g);
	}
	run_until(base, &g, N, 60000);
	release(sample);
	assert_int_equal(g.n, N);
	assert_true(socks_max >= 1);
	assert_true(socks_max <= 2 * 4);
	assert_int_equal(g.counts[LDAPAUTH_OK], N);
	ldapauth_get_stats(la, &st);
	print_message("pool_size 4: at most %d sockets to slapd seen, %u by the counters\n",
		      socks_max, st.conns_open_max);
	assert_int_equal(st.ok, N);
	assert_int_equal(st.directory_calls, 2 * N); /* a search and a bind each */
	assert_true(st.conns_open_max <= 2 * 4);     /* search pool + bind pool */
	assert_true(st.conns_open_max >= 2);
	assert_true(st.inflight_max <= 4 * 64);
	release(la);
	release(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_bind_mode, teardown),
		cmocka_unit_test_teardown(test_lookup_mode, teardown),
		cmocka_unit_test_teardown(test_scram_secret, teardown),
		cmocka_unit_test_teardown(test_ldaps_and_starttls, teardown),
		cmocka_unit_test_teardown(test_mail_attributes, teardown),
		cmocka_unit_test_teardown(test_password_changed_while_cached, teardown),
		cmocka_unit_test_teardown(test_injection, teardown),
		cmocka_unit_test_teardown(test_cache_counters_and_ttl, teardown),
		cmocka_unit_test_teardown(test_concurrent, teardown),
		cmocka_unit_test_teardown(test_outage, teardown),
		cmocka_unit_test_teardown(test_partial_replies, teardown),
		cmocka_unit_test_teardown(test_silent_tls_server, teardown),
	};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	event_base_free(base);
	return rc;
}
