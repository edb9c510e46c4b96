/* test_tls.c — real TLS over loopback with certificates generated at test time: implicit TLS,
 * STARTTLS with pipelined plaintext discarded, verification (refusing an unknown CA and a wrong
 * name, accepting anything in opportunistic mode), and context errors. */
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/tls.h"

static char dir[] = "/tmp/heron-test-tls-XXXXXX";
static char cert[128], key[128], other_cert[128], other_key[128];

/* One side of a test connection: what it read and which events it saw. */
struct peer {
	struct bufferevent *bev;
	char in[256];
	size_t inlen;
	bool connected, failed, eof;
	char error[256];
};

struct pair {
	struct event_base *base;
	struct peer srv, cli;
	bool (*done)(struct pair *p);
	/* STARTTLS test: the server upgrades after reading this line. */
	SSL_CTX *upgrade_ctx;
	size_t dropped;
};

static void pair_check(struct pair *p)
{
	if (p->done != NULL && p->done(p))
		event_base_loopexit(p->base, NULL);
}

static struct pair *g_pair; /* the pair the callbacks belong to (one at a time) */

static void peer_read_cb(struct bufferevent *bev, void *arg)
{
	struct peer *pe = arg;
	size_t n = bufferevent_read(bev, pe->in + pe->inlen, sizeof(pe->in) - 1 - pe->inlen);

	pe->inlen += n;
	pe->in[pe->inlen] = '\0';
	pair_check(g_pair);
}

static void peer_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct peer *pe = arg;

	if (what & BEV_EVENT_CONNECTED)
		pe->connected = true;
	if (what & BEV_EVENT_EOF)
		pe->eof = true;
	if (what & BEV_EVENT_ERROR) {
		pe->failed = true;
		tls_error(bev, pe->error, sizeof(pe->error));
	}
	pair_check(g_pair);
}

static void peer_set(struct peer *pe, struct bufferevent *bev)
{
	pe->bev = bev;
	bufferevent_setcb(bev, peer_read_cb, NULL, peer_event_cb, pe);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

/* A connected TCP pair over 127.0.0.1 (server side accepted), both non-blocking. */
static void tcp_pair(int *sfd, int *cfd)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &len), 0);
	*cfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(*cfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	*sfd = accept(l, NULL, NULL);
	assert_true(*sfd >= 0);
	close(l);
	evutil_make_socket_nonblocking(*sfd);
	evutil_make_socket_nonblocking(*cfd);
}

static void run(struct pair *p, bool (*done)(struct pair *p))
{
	struct timeval limit = { 10, 0 };

	p->done = done;
	event_base_loopexit(p->base, &limit);
	event_base_dispatch(p->base);
	assert_true(done(p));
}

static struct tls_conf conf_with(const char *c, const char *k, const char *ca)
{
	return (struct tls_conf){ .cert = c, .key = k, .ca = ca, .min_version = TLS_MIN_V1_2 };
}

static SSL_CTX *server_ctx(void)
{
	struct tls_conf t = conf_with(cert, key, NULL);
	char *error = NULL;
	SSL_CTX *ctx = tls_server_ctx_new(&t, &error);

	if (ctx == NULL)
		fail_msg("server ctx: %s", error);
	return ctx;
}

static SSL_CTX *client_ctx(const char *ca, enum tls_verify v)
{
	struct tls_conf t = conf_with(NULL, NULL, ca);
	char *error = NULL;
	SSL_CTX *ctx = tls_client_ctx_new(&t, v, &error);

	if (ctx == NULL)
		fail_msg("client ctx: %s", error);
	return ctx;
}

static void pair_free(struct pair *p)
{
	if (p->srv.bev != NULL)
		bufferevent_free(p->srv.bev);
	if (p->cli.bev != NULL)
		bufferevent_free(p->cli.bev);
	event_base_free(p->base);
	g_pair = NULL;
}

/* Implicit TLS on the server, a TLS client wrapping a connected socket (as after net_connect),
   checked with host as the expected name. */
static void tls_connect(struct pair *p, SSL_CTX *sctx, SSL_CTX *cctx, const char *host)
{
	int sfd, cfd;
	struct bufferevent *plain;

	memset(p, 0, sizeof(*p));
	g_pair = p;
	p->base = event_base_new();
	tcp_pair(&sfd, &cfd);
	peer_set(&p->srv, tls_server_accept(p->base, sctx, sfd));
	plain = bufferevent_socket_new(p->base, cfd, BEV_OPT_CLOSE_ON_FREE);
	peer_set(&p->cli, tls_starttls_client(plain, cctx, host, NULL));
}

static bool both_connected_or_failed(struct pair *p)
{
	return (p->srv.connected || p->srv.failed) && (p->cli.connected || p->cli.failed);
}

static bool got_pong(struct pair *p)
{
	return strstr(p->cli.in, "pong\r\n") != NULL;
}

static bool got_ping(struct pair *p)
{
	if (strstr(p->srv.in, "ping\r\n") != NULL && strstr(p->cli.in, "pong") == NULL)
		bufferevent_write(p->srv.bev, "pong\r\n", 6);
	return got_pong(p);
}

static void test_selfsigned_files(void **state)
{
	struct stat st;

	assert_int_equal(stat(key, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(stat(cert, &st), 0);
	assert_true(st.st_size > 100);
}

static void test_implicit_tls(void **state)
{
	SSL_CTX *sctx = server_ctx(), *cctx = client_ctx(cert, TLS_VERIFY_PEER);
	struct pair p;
	const char *proto, *cipher;
	int bits;

	tls_connect(&p, sctx, cctx, "localhost");
	run(&p, both_connected_or_failed);
	assert_false(p.srv.failed);
	assert_false(p.cli.failed);
	assert_true(tls_is_tls(p.cli.bev));
	assert_true(tls_peer_verified(p.cli.bev));
	tls_peer_info(p.srv.bev, &proto, &cipher, &bits);
	assert_non_null(proto);
	assert_true(strcmp(proto, "TLSv1.3") == 0 || strcmp(proto, "TLSv1.2") == 0);
	assert_non_null(cipher);
	assert_true(bits >= 128);

	/* Data flows both ways. */
	bufferevent_write(p.cli.bev, "ping\r\n", 6);
	run(&p, got_ping);
	pair_free(&p);

	/* An IP address as the expected name: matched against the IP subjectAltName. */
	tls_connect(&p, sctx, cctx, "127.0.0.1");
	run(&p, both_connected_or_failed);
	assert_false(p.cli.failed);
	assert_true(tls_peer_verified(p.cli.bev));
	pair_free(&p);
	tls_ctx_free(&sctx);
	tls_ctx_free(&cctx);
	assert_null(sctx);
}

static void test_verify_refuses(void **state)
{
	SSL_CTX *sctx = server_ctx();
	SSL_CTX *wrong_ca = client_ctx(other_cert, TLS_VERIFY_PEER);
	SSL_CTX *right_ca = client_ctx(cert, TLS_VERIFY_PEER);
	SSL_CTX *none = client_ctx(other_cert, TLS_VERIFY_NONE);
	struct pair p;
	char text[256];

	/* A certificate from a CA we do not trust. */
	tls_connect(&p, sctx, wrong_ca, "localhost");
	run(&p, both_connected_or_failed);
	assert_true(p.cli.failed);
	assert_false(p.cli.connected);
	assert_non_null(strstr(p.cli.error, "certificate verify failed"));
	assert_false(tls_peer_verified(p.cli.bev));
	pair_free(&p);

	/* Trusted CA, wrong name. */
	tls_connect(&p, sctx, right_ca, "mx.other.example");
	run(&p, both_connected_or_failed);
	assert_true(p.cli.failed);
	assert_non_null(strstr(p.cli.error, "certificate verify failed"));
	pair_free(&p);

	/* Opportunistic: encrypted, not verified. */
	tls_connect(&p, sctx, none, "localhost");
	run(&p, both_connected_or_failed);
	assert_false(p.cli.failed);
	assert_true(p.cli.connected);
	assert_false(tls_peer_verified(p.cli.bev));
	assert_string_equal(tls_error(p.cli.bev, text, sizeof(text)),
			    "certificate verify failed: self-signed certificate");
	pair_free(&p);

	tls_ctx_free(&sctx);
	tls_ctx_free(&wrong_ca);
	tls_ctx_free(&right_ca);
	tls_ctx_free(&none);
}

/* ---- STARTTLS ---- */

/* Server: reads plaintext until "STARTTLS\r\n", answers in plaintext, upgrades. */
static void starttls_srv_read_cb(struct bufferevent *bev, void *arg)
{
	struct pair *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n;
	char *line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF_STRICT);

	if (line == NULL)
		return;
	assert_string_equal(line, "STARTTLS");
	free(line);
	bufferevent_write(bev, "220 2.0.0 Ready to start TLS\r\n", 30);
	struct bufferevent *tls = tls_starttls_server(bev, p->upgrade_ctx, &p->dropped);
	assert_non_null(tls);
	peer_set(&p->srv, tls);
}

static void starttls_cli_read_cb(struct bufferevent *bev, void *arg)
{
	struct pair *p = arg;
	size_t n;
	char *line = evbuffer_readln(bufferevent_get_input(bev), &n, EVBUFFER_EOL_CRLF_STRICT);

	if (line == NULL)
		return;
	assert_string_equal(line, "220 2.0.0 Ready to start TLS");
	free(line);
	p->cli.connected = true; /* the plaintext part is over */
	event_base_loopexit(p->base, NULL);
}

static bool srv_got_noop(struct pair *p)
{
	return p->srv.inlen >= 6;
}

static bool cli_tls_up(struct pair *p)
{
	return p->cli.connected || p->cli.failed;
}

static void test_starttls_drops_pipelined(void **state)
{
	SSL_CTX *sctx = server_ctx(), *cctx = client_ctx(cert, TLS_VERIFY_PEER);
	const char *evil = "STARTTLS\r\nMAIL FROM:<injected@example>\r\n";
	struct bufferevent *splain, *cplain;
	struct timeval limit = { 10, 0 };
	struct pair p = { 0 };
	int sfd, cfd;

	g_pair = &p;
	p.base = event_base_new();
	p.upgrade_ctx = sctx;
	tcp_pair(&sfd, &cfd);
	/* The client pipelines a command after STARTTLS, in one write. */
	assert_int_equal(write(cfd, evil, strlen(evil)), (ssize_t)strlen(evil));
	splain = bufferevent_socket_new(p.base, sfd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(splain, starttls_srv_read_cb, NULL, NULL, &p);
	bufferevent_enable(splain, EV_READ | EV_WRITE);
	cplain = bufferevent_socket_new(p.base, cfd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(cplain, starttls_cli_read_cb, NULL, NULL, &p);
	bufferevent_enable(cplain, EV_READ | EV_WRITE);
	event_base_loopexit(p.base, &limit);
	event_base_dispatch(p.base);
	assert_true(p.cli.connected);
	assert_int_equal(p.dropped, strlen("MAIL FROM:<injected@example>\r\n"));

	/* The client upgrades after the 220 and speaks TLS; the server's first TLS bytes are the
	   client's, never the injected command. */
	p.cli.connected = false;
	peer_set(&p.cli, tls_starttls_client(cplain, cctx, "localhost", NULL));
	run(&p, cli_tls_up);
	assert_false(p.cli.failed);
	assert_true(tls_peer_verified(p.cli.bev));
	bufferevent_write(p.cli.bev, "NOOP\r\n", 6);
	run(&p, srv_got_noop);
	assert_string_equal(p.srv.in, "NOOP\r\n");
	assert_true(tls_is_tls(p.srv.bev));
	pair_free(&p);
	tls_ctx_free(&sctx);
	tls_ctx_free(&cctx);
}

static void test_ctx_errors(void **state)
{
	struct tls_conf t = conf_with("/nonexistent/cert.pem", key, NULL);
	char *error = NULL;

	assert_null(tls_server_ctx_new(&t, &error));
	assert_non_null(strstr(error, "/nonexistent/cert.pem"));
	free(error);

	t = conf_with(cert, other_key, NULL); /* a key that does not match */
	assert_null(tls_server_ctx_new(&t, &error));
	assert_non_null(strstr(error, other_key));
	free(error);

	t = conf_with(NULL, NULL, NULL);
	assert_null(tls_server_ctx_new(&t, &error));
	assert_non_null(error);
	free(error);

	t = conf_with(NULL, NULL, NULL);
	t.ciphers = "NO-SUCH-CIPHER";
	assert_null(tls_client_ctx_new(&t, TLS_VERIFY_PEER, &error));
	assert_non_null(strstr(error, "NO-SUCH-CIPHER"));
	free(error);

	t = conf_with(NULL, NULL, "/nonexistent/ca.pem");
	assert_null(tls_client_ctx_new(&t, TLS_VERIFY_PEER, &error));
	assert_non_null(strstr(error, "/nonexistent/ca.pem"));
	free(error);
}

static int setup(void **state)
{
	char *error = NULL;

	assert_non_null(mkdtemp(dir));
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(other_cert, sizeof(other_cert), "%s/other.pem", dir);
	snprintf(other_key, sizeof(other_key), "%s/other.key", dir);
	if (tls_selfsigned_write(cert, key, "localhost", 2, &error) != 0 ||
	    tls_selfsigned_write(other_cert, other_key, "localhost", 2, &error) != 0) {
		fprintf(stderr, "selfsigned: %s\n", error);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	unlink(cert);
	unlink(key);
	unlink(other_cert);
	unlink(other_key);
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_selfsigned_files),
		cmocka_unit_test(test_implicit_tls),
		cmocka_unit_test(test_verify_refuses),
		cmocka_unit_test(test_starttls_drops_pipelined),
		cmocka_unit_test(test_ctx_errors),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
