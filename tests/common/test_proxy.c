/* test_proxy.c — common/proxy.c, the protocol-free parts of the front/store host proxy login
 * that imapd and managesieved share: the proxy_hosts map, the PLAIN response, the login
 * dialogue's line limit, the secret file, the referral host check, the credential check
 * (address, user and secret each refused on its own), the front's dial (connected, a
 * failure said from the loop, the login's deadline), the front's choice of EXTERNAL or PLAIN
 * and the store host's reading of an EXTERNAL response. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/conf.h"
#include "common/proxy.h"

static void target(const char *entry, const char *host, const char *want_addr,
		   const char *want_port)
{
	char copy[256];
	char *v[1] = { copy };
	struct conf_list map = { entry != NULL ? 1 : 0, v, NULL };
	char addr[256], port[16];

	snprintf(copy, sizeof(copy), "%s", entry != NULL ? entry : "");

	proxy_target(&map, 4190, host, addr, sizeof(addr), port, sizeof(port));
	assert_string_equal(addr, want_addr);
	assert_string_equal(port, want_port);
}

static void test_target(void **state)
{
	target(NULL, "store1.example.com", "store1.example.com", "4190");
	target("store1.example.com=10.0.0.11:2000", "STORE1.example.com", "10.0.0.11", "2000");
	target("store1.example.com=[2001:db8::1]:2001", "store1.example.com", "2001:db8::1",
	       "2001");
	target("store1.example.com=10.0.0.11", "store1.example.com", "10.0.0.11", "4190");
	/* another host's entry is not this one's, nor is a prefix of the name */
	target("store2.example.com=10.0.0.12:2000", "store1.example.com", "store1.example.com",
	       "4190");
	target("store1=10.0.0.12:2000", "store1.example.com", "store1.example.com", "4190");
}

static void test_plain(void **state)
{
	char *b = proxy_plain_b64("user@example.com", "heron-proxy", "s3cret");

	/* base64 of "user@example.com\0heron-proxy\0s3cret" */
	assert_string_equal(b, "dXNlckBleGFtcGxlLmNvbQBoZXJvbi1wcm94eQBzM2NyZXQ=");
	free(b);
}

/* The front's choice of the proxy login: EXTERNAL (the user's address alone, base64) with a
   client certificate on a TLS leg, else PLAIN with the secret; neither without a secret. */
static void test_login_sasl(void **state)
{
	struct proxy_dial d;
	const char *why = NULL;
	char *b = NULL;

	memset(&d, 0, sizeof(d));
	d.tls = true;
	assert_string_equal(proxy_login_sasl(&d, true, "user@example.com", "heron-proxy", "s3cret",
					     &b, &why),
			    "EXTERNAL");
	assert_string_equal(b, "dXNlckBleGFtcGxlLmNvbQ==");
	free(b);
	assert_string_equal(proxy_login_sasl(&d, false, "user@example.com", "heron-proxy",
					     "s3cret", &b, &why),
			    "PLAIN");
	assert_string_equal(b, "dXNlckBleGFtcGxlLmNvbQBoZXJvbi1wcm94eQBzM2NyZXQ=");
	free(b);
	d.tls = false; /* proxy_tls = none: the certificate cannot be shown */
	assert_string_equal(proxy_login_sasl(&d, true, "u@x", "p", "s3cret", &b, &why), "PLAIN");
	free(b);
	assert_null(proxy_login_sasl(&d, true, "u@x", "p", NULL, &b, &why));
	assert_non_null(strstr(why, "proxy_tls = starttls"));
	d.tls = true;
	assert_null(proxy_login_sasl(&d, false, "u@x", "p", NULL, &b, &why));
}

/* The store host's reading of an EXTERNAL response: the authorization identity, empty for
   "=" or nothing; not base64, a NUL in it or longer than a name: refused. */
static void test_external_decode(void **state)
{
	char authz[400], longer[600];

	assert_int_equal(proxy_external_decode("dXNlckBleGFtcGxlLmNvbQ==", 24, authz), 0);
	assert_string_equal(authz, "user@example.com");
	assert_int_equal(proxy_external_decode("=", 1, authz), 0);
	assert_string_equal(authz, "");
	assert_int_equal(proxy_external_decode("", 0, authz), 0);
	assert_string_equal(authz, "");
	assert_int_equal(proxy_external_decode("dQB4", 4, authz), -1); /* "u\0x" */
	assert_int_equal(proxy_external_decode("not base64!", 11, authz), -1);
	memset(longer, 'Q', 436); /* 327 bytes: more than SASL_NAME_MAX */
	assert_int_equal(proxy_external_decode(longer, 436, authz), -1);
}

static void test_readln(void **state)
{
	struct evbuffer *in = evbuffer_new();
	const char *why = NULL;
	char *line = NULL;
	char *big = malloc(PROXY_LINE_MAX + 10);

	evbuffer_add_printf(in, "OK \"ready\"\r\nNO");
	assert_int_equal(proxy_readln(in, &line, &why), 1);
	assert_string_equal(line, "OK \"ready\"");
	free(line);
	assert_int_equal(proxy_readln(in, &line, &why), 0); /* "NO" waits for its end */
	evbuffer_drain(in, evbuffer_get_length(in));
	evbuffer_add(in, "a\0b\r\n", 5);
	assert_int_equal(proxy_readln(in, &line, &why), -1);
	assert_string_equal(why, "a line too long or with a NUL");
	memset(big, 'x', PROXY_LINE_MAX + 10);
	evbuffer_add(in, big, PROXY_LINE_MAX + 10); /* no end in sight: refused before it comes */
	assert_int_equal(proxy_readln(in, &line, &why), -1);
	assert_string_equal(why, "a line too long");
	free(big);
	evbuffer_free(in);
}

static void test_secret_file(void **state)
{
	char path[] = "/tmp/heron-test-proxy-XXXXXX";
	char *secret = NULL, *err = NULL;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(proxy_secret_read("", &secret, &err), 0); /* no file: no proxy login */
	assert_null(secret);
	assert_int_equal(write(fd, "the secret\nsecond line\n", 23), 23);
	assert_int_equal(proxy_secret_read(path, &secret, &err), 0);
	assert_string_equal(secret, "the secret");
	proxy_secret_free(&secret);
	assert_null(secret);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(pwrite(fd, "\nafter an empty line\n", 21, 0), 21);
	assert_int_equal(proxy_secret_read(path, &secret, &err), -1);
	assert_non_null(strstr(err, "the first line is empty"));
	free(err);
	close(fd);
	unlink(path);
	assert_int_equal(proxy_secret_read(path, &secret, &err), -1);
	free(err);
}

static void test_host_ok(void **state)
{
	char long_name[300];

	assert_true(proxy_host_ok("store1.example.com"));
	assert_true(proxy_host_ok("store1.example.com:4190"));
	assert_false(proxy_host_ok(""));
	assert_false(proxy_host_ok("a\"b"));
	assert_false(proxy_host_ok("a b"));
	assert_false(proxy_host_ok("a/b"));
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_false(proxy_host_ok(long_name));
}

static void test_credential(void **state)
{
	struct conf_cidr net = { AF_INET, { 127, 0, 0, 0 }, 8 };
	struct conf_cidrs trusted = { 1, &net }, none = { 0, NULL };
	struct sockaddr_in in = { .sin_family = AF_INET }, out = { .sin_family = AF_INET };
	const struct sockaddr *from_in = (const struct sockaddr *)&in;

	inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
	inet_pton(AF_INET, "192.0.2.1", &out.sin_addr);
	assert_true(proxy_credential_ok("s3cret", "heron-proxy", &trusted, from_in, "heron-proxy",
					"s3cret"));
	assert_false(proxy_credential_ok("s3cret", "heron-proxy", &trusted,
					 (const struct sockaddr *)&out, "heron-proxy", "s3cret"));
	assert_false(proxy_credential_ok("s3cret", "heron-proxy", &none, from_in, "heron-proxy",
					 "s3cret"));
	assert_false(proxy_credential_ok("s3cret", "heron-proxy", &trusted, from_in, "alice",
					 "s3cret"));
	assert_false(proxy_credential_ok("s3cret", "heron-proxy", &trusted, from_in, "heron-proxy",
					 "s3cre"));
	assert_false(proxy_credential_ok("s3cret", "heron-proxy", &trusted, from_in, "heron-proxy",
					 "s3cretx"));
	assert_false(proxy_credential_ok(NULL, "heron-proxy", &trusted, from_in, "heron-proxy",
					 "s3cret"));
}

struct dial_seen {
	struct event_base *base;
	int calls;
	char why[400];
	bool connected;
};

static void dial_done(void *arg, const char *why)
{
	struct dial_seen *seen = arg;

	seen->calls++;
	seen->connected = why == NULL;
	snprintf(seen->why, sizeof(seen->why), "%s", why != NULL ? why : "");
	if (why != NULL)
		event_base_loopbreak(seen->base);
}

static void dial_read(struct bufferevent *bev, void *arg)
{
}

static void dial_event(struct bufferevent *bev, short what, void *arg)
{
}

/* A listener on 127.0.0.1 that never accepts (the kernel completes the connections). */
static int listener(char *port, size_t psz)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	snprintf(port, psz, "%u", ntohs(sin.sin_port));
	return fd;
}

static void test_dial(void **state)
{
	struct event_base *base = event_base_new();
	struct evdns_base *dns = NULL;
	struct dial_seen seen = { base, 0, "", false };
	struct proxy_dial d;
	char port[16], entry[64];
	char *v[1] = { entry };
	struct conf_list map = { 1, v, NULL };
	int lfd = listener(port, sizeof(port));

	snprintf(entry, sizeof(entry), "store1=127.0.0.1:%s", port);

	/* connected: done(NULL) with be reading; then the deadline (nobody answers) */
	proxy_dial_init(&d, base, "store1", dial_done, dial_read, dial_event, &seen);
	proxy_dial_start(&d, base, &dns, &map, 4190, 200);
	assert_int_equal(seen.calls, 0);
	event_base_dispatch(base);
	assert_int_equal(seen.calls, 2);
	assert_non_null(d.be);
	assert_string_equal(d.where, entry + strlen("store1="));
	char want[100];

	snprintf(want, sizeof(want), "127.0.0.1:%s did not log in in time", port);
	assert_string_equal(seen.why, want);
	proxy_dial_free(&d);
	assert_null(d.be);
	assert_null(d.timer);

	/* a failure known at the start is said from the loop, not from the caller */
	seen.calls = 0;
	proxy_dial_init(&d, base, "store1", dial_done, dial_read, dial_event, &seen);
	proxy_dial_fail_soon(&d, "no secret");
	assert_int_equal(seen.calls, 0);
	event_base_dispatch(base);
	assert_int_equal(seen.calls, 1);
	assert_false(seen.connected);
	assert_string_equal(seen.why, "no secret");
	assert_null(d.be);
	proxy_dial_free(&d);

	/* stopped: neither the deadline nor the connection says anything */
	seen.calls = 0;
	proxy_dial_init(&d, base, "store1", dial_done, dial_read, dial_event, &seen);
	proxy_dial_start(&d, base, &dns, &map, 4190, 1);
	proxy_dial_stop(&d);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(seen.calls, 0);
	proxy_dial_free(&d);

	close(lfd);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_target),
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_readln),
		cmocka_unit_test(test_secret_file),
		cmocka_unit_test(test_host_ok),
		cmocka_unit_test(test_credential),
		cmocka_unit_test(test_dial),
		cmocka_unit_test(test_login_sasl),
		cmocka_unit_test(test_external_decode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
