/* test_net.c — listeners (IPv4, IPv6, unix, stale sockets, errors), the capped accept wrapper,
 * per-address counts, address text and async connect, over real loopback sockets. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "common/conf.h"
#include "common/net.h"
#include "common/shmtable.h"

/* A conf_addrs of one entry (host, port) or a unix path (port NULL). */
static struct conf_addrs one_addr(struct conf_addr *a, const char *host, const char *port)
{
	a->host = (char *)(uintptr_t)host;
	a->port = (char *)(uintptr_t)port;
	a->unix_path = port == NULL;
	return (struct conf_addrs){ 1, a };
}

static void assert_nonblock_cloexec(int fd)
{
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

/* A blocking client connected to 127.0.0.1:port. */
static int dial(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static void test_listen_inet(void **state)
{
	struct conf_addr a;
	struct conf_addrs l = one_addr(&a, "127.0.0.1", "0");
	struct net_fds fds = { 0 };
	char *error = NULL, want[64];
	int port;

	assert_int_equal(net_listen(&l, NULL, &fds, &error), 0);
	assert_int_equal(fds.n, 1);
	assert_nonblock_cloexec(fds.fd[0]);
	port = net_fd_port(fds.fd[0]);
	assert_true(port > 0);
	snprintf(want, sizeof(want), "127.0.0.1:%d", port);
	assert_string_equal(fds.name[0], want);

	/* The same port again, without SO_REUSEPORT: an error naming the address, and fds left
	   as it was. */
	char portstr[16];
	snprintf(portstr, sizeof(portstr), "%d", port);
	l = one_addr(&a, "127.0.0.1", portstr);
	assert_int_equal(net_listen(&l, NULL, &fds, &error), -1);
	assert_non_null(strstr(error, want));
	assert_int_equal(fds.n, 1);
	free(error);

	/* IPv6 loopback (brackets already removed by conf), with SO_REUSEPORT. */
	struct net_listen_opts o = { .reuseport = true };
	int one = 0;
	socklen_t ol = sizeof(one);
	l = one_addr(&a, "::1", "0");
	assert_int_equal(net_listen(&l, &o, &fds, &error), 0);
	assert_int_equal(fds.n, 2);
	assert_true(strncmp(fds.name[1], "[::1]:", 6) == 0);
	assert_int_equal(getsockopt(fds.fd[1], SOL_SOCKET, SO_REUSEPORT, &one, &ol), 0);
	assert_int_equal(one, 1);
	net_fds_close(&fds);
	assert_int_equal(fds.n, 0);
}

static void test_listen_any(void **state)
{
	struct conf_addr a;
	struct conf_addrs l = one_addr(&a, "*", "0");
	struct net_fds fds = { 0 };
	char *error = NULL;

	assert_int_equal(net_listen(&l, NULL, &fds, &error), 0);
	assert_true(fds.n >= 1 && fds.n <= 2);
	for (size_t i = 0; i < fds.n; i++) {
		assert_nonblock_cloexec(fds.fd[i]);
		assert_true(strncmp(fds.name[i], "0.0.0.0:", 8) == 0 ||
			    strncmp(fds.name[i], "[::]:", 5) == 0);
	}
	net_fds_close(&fds);
}

static void test_listen_unix(void **state)
{
	char dir[] = "/tmp/heron-test-net-XXXXXX", path[128];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct conf_addr a;
	struct conf_addrs l;
	struct net_fds fds = { 0 }, again = { 0 };
	struct net_listen_opts o = { .unix_mode = 0660 };
	char *error = NULL;
	struct stat st;
	int stale;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/lmtp.sock", dir);
	/* A stale socket file: bound once, nobody listening any more. */
	memcpy(sun.sun_path, path, strlen(path) + 1);
	stale = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(stale, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(stale);

	l = one_addr(&a, path, NULL);
	assert_int_equal(net_listen(&l, &o, &fds, &error), 0);
	assert_int_equal(fds.n, 1);
	assert_nonblock_cloexec(fds.fd[0]);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	assert_int_equal(net_fd_port(fds.fd[0]), -1);

	/* A live one is not stolen. */
	assert_int_equal(net_listen(&l, &o, &again, &error), -1);
	assert_non_null(strstr(error, "in use"));
	free(error);
	net_fds_close(&fds);
	unlink(path);
	rmdir(dir);
}

/* ---- the capped accept wrapper ---- */

struct cap_state {
	struct event_base *base;
	struct net_server *srv;
	int accepted[8];
	size_t naccepted;
	size_t want;
};

static void cap_accept(struct net_server *srv, int fd, const struct sockaddr *sa, socklen_t salen,
		       void *arg)
{
	struct cap_state *cs = arg;
	char text[NET_ADDRSTRLEN];

	assert_string_equal(net_addr_host(sa, text, sizeof(text)), "127.0.0.1");
	assert_nonblock_cloexec(fd);
	cs->accepted[cs->naccepted++] = fd;
	if (cs->naccepted == cs->want)
		event_base_loopexit(cs->base, NULL);
}

/* Runs the loop until cs->want connections were accepted or (a failure) 5 s passed. */
static void run_until(struct cap_state *cs, size_t want)
{
	struct timeval limit = { 5, 0 };

	cs->want = want;
	event_base_loopexit(cs->base, &limit);
	event_base_dispatch(cs->base);
}

/* A loopback listener with a server on it capped at max (refusing with refusal when it is not
   NULL); returns the port. */
static int cap_open(struct cap_state *cs, struct net_fds *fds, size_t max, const char *refusal)
{
	struct conf_addr a;
	struct conf_addrs l = one_addr(&a, "127.0.0.1", "0");
	char *error;

	assert_int_equal(net_listen(&l, NULL, fds, &error), 0);
	cs->base = event_base_new();
	cs->srv = net_server_new(cs->base, fds, max, cap_accept, cs);
	if (refusal != NULL)
		net_server_set_refusal(cs->srv, "test", refusal);
	return net_fd_port(fds->fd[0]);
}

/* Frees what cap_open made. */
static void cap_close(struct cap_state *cs, struct net_fds *fds)
{
	net_server_free(&cs->srv);
	assert_null(cs->srv);
	net_fds_close(fds);
	event_base_free(cs->base);
}

static void test_server_cap(void **state)
{
	struct net_fds fds = { 0 };
	struct cap_state cs = { 0 };
	int c[3], port = cap_open(&cs, &fds, 2, NULL);

	for (int i = 0; i < 3; i++)
		c[i] = dial(port); /* the kernel completes all three handshakes */
	run_until(&cs, 2);
	assert_int_equal(cs.naccepted, 2);
	assert_int_equal(net_server_nconns(cs.srv), 2);

	/* At the cap the listener is disabled: the third client waits in the backlog even
	   while the loop runs (a pass of the loop with a pending connection). */
	struct timeval brief = { 0, 100000 };
	event_base_loopexit(cs.base, &brief);
	event_base_dispatch(cs.base);
	assert_int_equal(cs.naccepted, 2);

	/* One ends: the third is accepted. */
	close(cs.accepted[0]);
	net_server_conn_done(cs.srv);
	run_until(&cs, 3);
	assert_int_equal(cs.naccepted, 3);
	assert_int_equal(net_server_nconns(cs.srv), 2);

	/* Stopped: nothing more is accepted even below the cap. */
	net_server_stop(cs.srv);
	close(cs.accepted[1]);
	net_server_conn_done(cs.srv);
	int c4 = dial(port);
	event_base_loopexit(cs.base, &brief);
	event_base_dispatch(cs.base);
	assert_int_equal(cs.naccepted, 3);
	assert_int_equal(net_server_nconns(cs.srv), 1);

	close(cs.accepted[2]);
	net_server_conn_done(cs.srv);
	for (int i = 0; i < 3; i++)
		close(c[i]);
	close(c4);
	net_server_free(&cs.srv);
	cap_close(&cs, &fds); /* a second free is harmless */
}

/* Runs the loop in short passes until srv has refused want clients, at most 5 s. */
static void run_until_refused(struct cap_state *cs, uint64_t want)
{
	for (int i = 0; i < 100 && net_server_nrefused(cs->srv) < want; i++) {
		struct timeval step = { 0, 50000 };

		event_base_loopexit(cs->base, &step);
		event_base_dispatch(cs->base);
	}
	assert_int_equal(net_server_nrefused(cs->srv), want);
}

/* What a client reads until the server closes (the server has written and closed already). */
static void assert_refused(int fd, const char *want)
{
	char buf[256];
	size_t n = 0;
	ssize_t r;

	while (n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	assert_string_equal(buf, want);
}

#define REFUSAL "421 4.7.0 mx.heron.test Too many connections, try again later\r\n"

/* With a refusal line the listener never pauses: over the cap a client is answered and
   closed, never counted; below the cap again, clients are served. */
static void test_server_refusal(void **state)
{
	struct net_fds fds = { 0 };
	struct cap_state cs = { 0 };
	int c[4], port = cap_open(&cs, &fds, 2, REFUSAL);

	c[0] = dial(port);
	c[1] = dial(port);
	run_until(&cs, 2);
	c[2] = dial(port);
	run_until_refused(&cs, 1);
	assert_refused(c[2], REFUSAL);
	assert_int_equal(net_server_nconns(cs.srv), 2);
	assert_int_equal(cs.naccepted, 2);
	close(cs.accepted[0]);
	net_server_conn_done(cs.srv);
	c[3] = dial(port);
	run_until(&cs, 3);
	assert_int_equal(cs.naccepted, 3);
	assert_int_equal(net_server_nrefused(cs.srv), 1);
	for (size_t i = 1; i < cs.naccepted; i++) {
		close(cs.accepted[i]);
		net_server_conn_done(cs.srv);
	}
	for (int i = 0; i < 4; i++)
		close(c[i]);
	cap_close(&cs, &fds);
}

/* Two servers counting into one shared total (as two workers do, each its own column): the
   cap holds for both together. */
static void test_server_shared_total(void **state)
{
	struct conf_addr a;
	struct conf_addrs l = one_addr(&a, "127.0.0.1", "0");
	struct net_fds f1 = { 0 }, f2 = { 0 };
	struct cap_state s1 = { 0 }, s2 = { 0 };
	struct shmtable *t = shmtable_new(64, 2, NET_SHM_KEY_MAX, 0);
	char *error;
	int c[4];

	assert_int_equal(net_listen(&l, NULL, &f1, &error), 0);
	assert_int_equal(net_listen(&l, NULL, &f2, &error), 0);
	s1.base = s2.base = event_base_new();
	s1.srv = net_server_new(s1.base, &f1, 3, cap_accept, &s1);
	s2.srv = net_server_new(s2.base, &f2, 3, cap_accept, &s2);
	net_server_set_refusal(s1.srv, "one", REFUSAL);
	net_server_set_refusal(s2.srv, "two", REFUSAL);
	net_server_share(s1.srv, t, 0);
	net_server_share(s2.srv, t, 1);
	c[0] = dial(net_fd_port(f1.fd[0]));
	c[1] = dial(net_fd_port(f1.fd[0]));
	run_until(&s1, 2);
	c[2] = dial(net_fd_port(f2.fd[0]));
	run_until(&s2, 1);
	assert_int_equal(shmtable_total(t), 3);
	c[3] = dial(net_fd_port(f2.fd[0]));
	run_until_refused(&s2, 1);
	assert_refused(c[3], REFUSAL);
	assert_int_equal(net_server_nconns(s2.srv), 1);
	close(s1.accepted[0]);
	net_server_conn_done(s1.srv);
	assert_int_equal(shmtable_total(t), 2);
	close(c[3]);
	c[3] = dial(net_fd_port(f2.fd[0]));
	run_until(&s2, 2);
	assert_int_equal(net_server_nconns(s2.srv), 2);
	close(s1.accepted[1]);
	net_server_conn_done(s1.srv);
	for (size_t i = 0; i < s2.naccepted; i++) {
		close(s2.accepted[i]);
		net_server_conn_done(s2.srv);
	}
	assert_int_equal(shmtable_total(t), 0);
	for (int i = 0; i < 4; i++)
		close(c[i]);
	net_server_free(&s1.srv);
	net_server_free(&s2.srv);
	net_fds_close(&f1);
	net_fds_close(&f2);
	event_base_free(s1.base);
	shmtable_free(&t);
}

/* Out of descriptors, accept fails: the listener pauses and accepts once descriptors free. */
/* Restored by a teardown, so a failed assertion cannot leave later tests short of fds. */
static struct rlimit emfile_saved;

static int restore_nofile(void **state)
{
	return setrlimit(RLIMIT_NOFILE, &emfile_saved) == 0 ? 0 : -1;
}

/* Lowers the descriptor limit to the lowest free descriptor: accept gets none. */
static void nofile_exhaust(struct rlimit *saved)
{
	struct rlimit low;
	int top = dup(0);

	close(top);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, saved), 0);
	emfile_saved = *saved;
	low = *saved;
	low.rlim_cur = (rlim_t)top;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
}

static void test_server_emfile_pause(void **state)
{
	struct net_fds fds = { 0 };
	struct cap_state cs = { 0 };
	struct rlimit saved;
	int c = dial(cap_open(&cs, &fds, 10, NULL));

	nofile_exhaust(&saved);
	struct timeval brief = { 0, 200000 };
	event_base_loopexit(cs.base, &brief);
	event_base_dispatch(cs.base);
	assert_int_equal(cs.naccepted, 0);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	run_until(&cs, 1);
	assert_int_equal(cs.naccepted, 1);
	close(cs.accepted[0]);
	net_server_conn_done(cs.srv);
	close(c);
	cap_close(&cs, &fds);
}

/* Out of descriptors, a refusing server answers the client with its spare descriptor instead
   of pausing, and takes the spare back. */
static void test_server_emfile_refusal(void **state)
{
	struct net_fds fds = { 0 };
	struct cap_state cs = { 0 };
	struct rlimit saved;
	int port = cap_open(&cs, &fds, 10, REFUSAL);
	int c[2] = { dial(port), dial(port) };

	nofile_exhaust(&saved);
	run_until_refused(&cs, 2);
	assert_int_equal(cs.naccepted, 0);
	assert_refused(c[0], REFUSAL);
	assert_refused(c[1], REFUSAL);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	/* the spare is back: with descriptors again, clients are served */
	close(c[0]);
	c[0] = dial(port);
	run_until(&cs, 1);
	assert_int_equal(cs.naccepted, 1);
	close(cs.accepted[0]);
	net_server_conn_done(cs.srv);
	close(c[0]);
	close(c[1]);
	cap_close(&cs, &fds);
}

/* ---- per-address counts ---- */

static struct sockaddr_in6 sa6(const char *text)
{
	struct sockaddr_in6 s = { .sin6_family = AF_INET6 };

	assert_int_equal(inet_pton(AF_INET6, text, &s.sin6_addr), 1);
	return s;
}

static struct sockaddr_in sa4(uint32_t host_order, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

	s.sin_addr.s_addr = htonl(host_order);
	return s;
}

static void test_ipcount_limits(void **state)
{
	struct net_ipcount *t = net_ipcount_new(2);
	struct sockaddr_in a = sa4(0x0a000001, 1000), a2 = sa4(0x0a000001, 2000);
	struct sockaddr_in b = sa4(0x0a000002, 1), c = sa4(0x0a000003, 1);
	struct sockaddr_in6 mapped = sa6("::ffff:10.0.0.1"), v6 = sa6("2001:db8::1");
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	const struct sockaddr *A = (const struct sockaddr *)&a;

	assert_true(net_ipcount_inc(t, A, 3));
	assert_true(net_ipcount_inc(t, (const struct sockaddr *)&a2, 3));     /* port ignored */
	assert_true(net_ipcount_inc(t, (const struct sockaddr *)&mapped, 3)); /* same address */
	assert_false(net_ipcount_inc(t, A, 3));
	assert_int_equal(net_ipcount_get(t, A), 3);
	/* Table of two addresses: b fits, c does not, v6 does not. */
	assert_true(net_ipcount_inc(t, (const struct sockaddr *)&b, 3));
	assert_false(net_ipcount_inc(t, (const struct sockaddr *)&c, 3));
	assert_false(net_ipcount_inc(t, (const struct sockaddr *)&v6, 3));
	assert_int_equal(net_ipcount_get(t, (const struct sockaddr *)&c), 0);
	/* Unix peers are not counted. */
	assert_true(net_ipcount_inc(t, (const struct sockaddr *)&un, 1));
	net_ipcount_dec(t, (const struct sockaddr *)&un);
	/* b leaves: c now fits. */
	net_ipcount_dec(t, (const struct sockaddr *)&b);
	assert_true(net_ipcount_inc(t, (const struct sockaddr *)&c, 3));
	net_ipcount_dec(t, A);
	assert_int_equal(net_ipcount_get(t, (const struct sockaddr *)&mapped), 2);
	assert_true(net_ipcount_inc(t, A, 3));
	net_ipcount_free(&t);
	assert_null(t);
}

/* Random inc/dec against a plain array: the table (with its backward-shift deletion) must
   agree on every count. */
static void test_ipcount_model(void **state)
{
	enum { NADDR = 300, STEPS = 200000 };
	static uint32_t model[NADDR];
	struct net_ipcount *t = net_ipcount_new(NADDR);
	uint64_t x = 88172645463325252ULL;

	for (int step = 0; step < STEPS; step++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		unsigned i = (unsigned)(x % NADDR);
		struct sockaddr_in s = sa4(0xc0a80000 + i * 7919, 0);

		if ((x >> 32) % 3 != 0) {
			bool ok = net_ipcount_inc(t, (const struct sockaddr *)&s, 4);

			assert_int_equal(ok, model[i] < 4);
			model[i] += ok;
		} else if (model[i] > 0) {
			net_ipcount_dec(t, (const struct sockaddr *)&s);
			model[i]--;
		}
		if (step % 1000 == 0)
			for (unsigned k = 0; k < NADDR; k++) {
				struct sockaddr_in q = sa4(0xc0a80000 + k * 7919, 0);

				assert_int_equal(net_ipcount_get(t, (const struct sockaddr *)&q),
						 model[k]);
			}
	}
	net_ipcount_free(&t);
}

/* The shared kind: the same answers, the counts in a shmtable another worker sees. */
static void test_ipcount_shared(void **state)
{
	struct shmtable *sh = shmtable_new(64, 2, NET_SHM_KEY_MAX, 0);
	struct net_ipcount *w0 = net_ipcount_new_shared(sh, 0, SHM_ADDR_CONNS);
	struct net_ipcount *w1 = net_ipcount_new_shared(sh, 1, SHM_ADDR_CONNS);
	struct sockaddr_in a = sa4(0xc0000201, 25);
	struct sockaddr_in6 mapped = sa6("::ffff:192.0.2.1");
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	const struct sockaddr *A = (const struct sockaddr *)&a;

	assert_true(net_ipcount_inc(w0, A, 3));
	assert_true(net_ipcount_inc(w1, (const struct sockaddr *)&mapped, 3));
	assert_true(net_ipcount_inc(w1, A, 3));
	assert_false(net_ipcount_inc(w0, A, 3));
	assert_int_equal(net_ipcount_get(w0, A), 3);
	assert_int_equal(shmtable_count(sh, SHM_ADDR_CONNS, "192.0.2.1"), 3);
	assert_true(net_ipcount_inc(w0, (const struct sockaddr *)&un, 1));
	net_ipcount_dec(w0, (const struct sockaddr *)&un);
	net_ipcount_dec(w1, A);
	assert_true(net_ipcount_inc(w0, A, 3));
	shmtable_worker_reset(sh, 1); /* worker 1 died: its one left is gone */
	assert_int_equal(net_ipcount_get(w0, (const struct sockaddr *)&mapped), 2);
	net_ipcount_free(&w0);
	net_ipcount_free(&w1);
	shmtable_free(&sh);
}

static void test_addr_text(void **state)
{
	char out[NET_ADDRSTRLEN];
	struct sockaddr_in a = sa4(0x7f000001, 2525);
	struct sockaddr_in6 b = sa6("::1"), m = sa6("::ffff:192.0.2.7");
	struct sockaddr_un u = { .sun_family = AF_UNIX, .sun_path = "/run/heron/lmtp" };

	b.sin6_port = htons(25);
	m.sin6_port = htons(143);
	assert_string_equal(net_addr_str((struct sockaddr *)&a, sizeof(a), out, sizeof(out)),
			    "127.0.0.1:2525");
	assert_string_equal(net_addr_str((struct sockaddr *)&b, sizeof(b), out, sizeof(out)),
			    "[::1]:25");
	assert_string_equal(net_addr_str((struct sockaddr *)&m, sizeof(m), out, sizeof(out)),
			    "192.0.2.7:143");
	assert_string_equal(net_addr_str((struct sockaddr *)&u, sizeof(u), out, sizeof(out)),
			    "unix:/run/heron/lmtp");
	assert_string_equal(net_addr_str((struct sockaddr *)&u,
					 offsetof(struct sockaddr_un, sun_path), out, sizeof(out)),
			    "unix");
	assert_string_equal(net_addr_host((struct sockaddr *)&b, out, sizeof(out)), "::1");
	assert_string_equal(net_addr_host((struct sockaddr *)&m, out, sizeof(out)), "192.0.2.7");
	/* Too small an output truncates, never overflows. */
	assert_string_equal(net_addr_str((struct sockaddr *)&a, sizeof(a), out, 6), "127.0");
}

/* ---- async connect ---- */

struct conn_result {
	struct event_base *base;
	struct bufferevent *bev;
	char error[256];
	bool done;
};

static void conn_cb(struct bufferevent *bev, const char *error, void *arg)
{
	struct conn_result *r = arg;

	r->done = true;
	r->bev = bev;
	snprintf(r->error, sizeof(r->error), "%s", error != NULL ? error : "");
	event_base_loopexit(r->base, NULL);
}

/* The output buffer drained: the byte is in the kernel. */
static void written_cb(struct bufferevent *bev, void *arg)
{
	event_base_loopexit(arg, NULL);
}

static void connect_and_wait(struct event_base *base, const char *host, int port, int timeout_ms,
			     struct conn_result *r)
{
	struct timeval limit = { 10, 0 };
	char portstr[16];

	memset(r, 0, sizeof(*r));
	r->base = base;
	snprintf(portstr, sizeof(portstr), "%d", port);
	assert_non_null(net_connect(base, NULL, host, portstr, timeout_ms, conn_cb, r));
	assert_false(r->done); /* never from inside net_connect */
	event_base_loopexit(base, &limit);
	event_base_dispatch(base);
	assert_true(r->done);
}

static void test_connect(void **state)
{
	struct event_base *base = event_base_new();
	struct conf_addr a;
	struct conf_addrs l = one_addr(&a, "::1", "0");
	struct net_fds fds = { 0 };
	struct conn_result r;
	char *error;
	int port, fd;

	assert_int_equal(net_listen(&l, NULL, &fds, &error), 0);
	port = net_fd_port(fds.fd[0]);
	connect_and_wait(base, "::1", port, 5000, &r);
	assert_string_equal(r.error, "");
	assert_non_null(r.bev);
	/* The connection is real: the server accepts it and a byte goes through. */
	while ((fd = accept(fds.fd[0], NULL, NULL)) == -1 && errno == EAGAIN)
		usleep(1000);
	assert_true(fd >= 0);
	bufferevent_setcb(r.bev, NULL, written_cb, NULL, base);
	assert_int_equal(bufferevent_write(r.bev, "x", 1), 0);
	bufferevent_enable(r.bev, EV_WRITE);
	struct timeval limit = { 10, 0 };
	event_base_loopexit(base, &limit);
	event_base_dispatch(base);
	assert_int_equal(evbuffer_get_length(bufferevent_get_output(r.bev)), 0);
	char c = 0;
	struct timeval rcv = { 5, 0 };
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
	assert_int_equal(read(fd, &c, 1), 1);
	assert_int_equal(c, 'x');
	close(fd);
	bufferevent_free(r.bev);

	/* Nobody listening. */
	int closed = net_free_port(AF_INET);
	assert_true(closed > 0);
	connect_and_wait(base, "127.0.0.1", closed, 5000, &r);
	assert_null(r.bev);
	assert_non_null(strstr(r.error, "Connection refused"));
	assert_non_null(strstr(r.error, "127.0.0.1:"));

	/* A name with no resolver is refused (the loop never blocks on DNS). */
	connect_and_wait(base, "localhost", port, 5000, &r);
	assert_null(r.bev);
	assert_non_null(strstr(r.error, "no resolver"));

	/* Cancelled: the callback never runs. */
	memset(&r, 0, sizeof(r));
	r.base = base;
	struct net_connect *nc = net_connect(base, NULL, "::1", "1", 5000, conn_cb, &r);
	net_connect_cancel(&nc);
	assert_null(nc);
	struct timeval brief = { 0, 100000 };
	event_base_loopexit(base, &brief);
	event_base_dispatch(base);
	assert_false(r.done);

	net_fds_close(&fds);
	event_base_free(base);
}

/* A port free for the wildcard on both families: a dual-stack [::]:0 socket's (a loopback
   port can still be held on 0.0.0.0 by another socket); an IPv4 one without IPv6. */
static int dual_free_port(void)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), off = 0, port = -1;

	if (fd == -1)
		return net_free_port(AF_INET);
	if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) == 0 &&
	    bind(fd, (struct sockaddr *)&sa, len) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin6_port);
	close(fd);
	return port > 0 ? port : net_free_port(AF_INET);
}

/* A name through evdns, answered from /etc/hosts (no DNS server is asked). */
static void test_connect_name(void **state)
{
	struct event_base *base = event_base_new();
	struct evdns_base *dns = evdns_base_new(base, 0);
	int port = dual_free_port();
	char portstr[16], *error;
	struct conf_addr a;
	struct conf_addrs l;
	struct net_fds fds = { 0 };
	struct conn_result r = { .base = base };
	struct timeval limit = { 10, 0 };

	assert_non_null(dns);
	assert_int_equal(evdns_base_load_hosts(dns, NULL), 0);
	/* The port may be taken by another test in between: retry. */
	for (int tries = 0;; tries++) {
		snprintf(portstr, sizeof(portstr), "%d", port);
		l = one_addr(&a, "*", portstr); /* localhost may be 127.0.0.1 or ::1: serve both */
		if (net_listen(&l, NULL, &fds, &error) == 0)
			break;
		if (tries == 20)
			fail_msg("no port free on both families: %s", error);
		free(error);
		port = dual_free_port();
	}
	assert_non_null(net_connect(base, dns, "localhost", portstr, 5000, conn_cb, &r));
	event_base_loopexit(base, &limit);
	event_base_dispatch(base);
	assert_true(r.done);
	if (r.bev == NULL)
		fail_msg("%s", r.error);
	bufferevent_free(r.bev);
	net_fds_close(&fds);
	evdns_base_free(dns, 0);
	event_base_free(base);
}

/* A listener whose accept queue is full drops new SYNs: the attempt must time out. */
static void test_connect_timeout(void **state)
{
	struct event_base *base = event_base_new();
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	struct conn_result r;
	int lfd = socket(AF_INET, SOCK_STREAM, 0), fill[4], port;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(lfd, 0), 0);
	getsockname(lfd, (struct sockaddr *)&sin, &len);
	port = ntohs(sin.sin_port);
	for (int i = 0; i < 4; i++) { /* fill the queue; the later ones stay in SYN_SENT */
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		(void)connect(fill[i], (struct sockaddr *)&sin, sizeof(sin));
	}
	usleep(100000);
	connect_and_wait(base, "127.0.0.1", port, 300, &r);
	assert_null(r.bev);
	assert_non_null(strstr(r.error, "timed out"));
	for (int i = 0; i < 4; i++)
		close(fill[i]);
	close(lfd);
	event_base_free(base);
}

static void test_free_port(void **state)
{
	int p4 = net_free_port(AF_INET), p6 = net_free_port(AF_INET6);
	struct conf_addr a;
	struct conf_addrs l;
	struct net_fds fds = { 0 };
	char portstr[16], *error;

	assert_true(p4 > 0 && p4 < 65536);
	assert_true(p6 > 0 && p6 < 65536);
	assert_int_equal(net_free_port(AF_UNIX), -1);
	snprintf(portstr, sizeof(portstr), "%d", p4);
	l = one_addr(&a, "127.0.0.1", portstr);
	assert_int_equal(net_listen(&l, NULL, &fds, &error), 0);
	assert_int_equal(net_fd_port(fds.fd[0]), p4);
	net_fds_close(&fds);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_listen_inet),
		cmocka_unit_test(test_listen_any),
		cmocka_unit_test(test_listen_unix),
		cmocka_unit_test(test_server_cap),
		cmocka_unit_test_teardown(test_server_emfile_pause, restore_nofile),
		cmocka_unit_test(test_server_refusal),
		cmocka_unit_test(test_server_shared_total),
		cmocka_unit_test_teardown(test_server_emfile_refusal, restore_nofile),
		cmocka_unit_test(test_ipcount_limits),
		cmocka_unit_test(test_ipcount_model),
		cmocka_unit_test(test_ipcount_shared),
		cmocka_unit_test(test_addr_text),
		cmocka_unit_test(test_connect),
		cmocka_unit_test(test_connect_name),
		cmocka_unit_test(test_connect_timeout),
		cmocka_unit_test(test_free_port),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
