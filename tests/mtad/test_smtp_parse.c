/* test_smtp_parse.c — mtad's input parsers one piece at a time (STYLE 17), through the real
 * session code in this process (mtad/ without its main, a worker made by mtad_worker_init on a
 * fresh store, the users file backend): a client thread sends a command line or a message in
 * two writes cut at every byte, and the replies and the stored bytes must be the same for
 * every cut; the end of DATA is CRLF.CRLF and nothing else; dot-stuffing is undone; bare LF is
 * refused; a line past line_max is refused and the session goes on. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <event2/event.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "common/shmtable.h"
#include "common/xmalloc.h"
#include "mtad/mtad.h"
#include "store/store.h"

#define SESSION_MAX_MS 30000 /* a session that does not end by then is a bug */

static char dir[] = "/tmp/heron-smtp-parse-XXXXXX";
static struct conf *conf;
static struct shmtable *shared;
static struct net_fds fds[L_NKINDS];
static int port;
static unsigned serial;

/* One client: its writes, what it read back. */
struct client {
	const char *const *parts; /* NULL-terminated: written one by one */
	char out[65536];
	size_t len;
	atomic_bool done;
};

static void *client_main(void *arg)
{
	struct client *c = arg;
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ssize_t n;

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		for (size_t i = 0; c->parts[i] != NULL; i++) {
			if (write(fd, c->parts[i], strlen(c->parts[i])) < 0)
				break;
			usleep(2000); /* the pieces arrive apart (or not: the result must not care) */
		}
		/* every dialogue ends with QUIT: read until the server closes */
		while (c->len < sizeof(c->out) - 1 &&
		       (n = read(fd, c->out + c->len, sizeof(c->out) - 1 - c->len)) > 0)
			c->len += (size_t)n;
	}
	c->out[c->len] = '\0';
	if (fd >= 0)
		close(fd);
	atomic_store(&c->done, true);
	return NULL;
}

/* Runs one session of parts against a fresh worker; the server's replies into out (the
   greeting removed). m stays open for reading the store; free it with session_end. */
static void session(struct mtad *m, const char *const *parts, char *out, size_t size)
{
	char sdir[128];
	struct client c = { .parts = parts };
	pthread_t th;
	int64_t deadline;
	char *eol;

	snprintf(sdir, sizeof(sdir), "%s/store%u", dir, serial++);
	assert_int_equal(conf_set(conf, "store", "path", sdir, NULL), 0);
	mtad_worker_init(m, conf, 0, "mx.heron.test");
	m->shared = shared;
	assert_int_equal(mtad_servers_start(m, fds, 100), 0);
	assert_int_equal(pthread_create(&th, NULL, client_main, &c), 0);
	deadline = clock_mono_ms() + SESSION_MAX_MS;
	while (!(atomic_load(&c.done) && m->nsessions == 0)) {
		if (clock_mono_ms() > deadline)
			fail_msg("the session did not end");
		event_base_loop(m->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		usleep(500);
	}
	pthread_join(th, NULL);
	eol = strstr(c.out, "\r\n");
	eol = eol != NULL ? eol + 2 : c.out;
	assert_true(strlen(eol) < size);
	memcpy(out, eol, strlen(eol) + 1);
}

static void session_end(struct mtad *m)
{
	mtad_worker_free(m);
}

/* The last message of user's INBOX, without the Received: field mtad put on top. */
static char *last_message(struct mtad *m, const char *user)
{
	struct store_txn *t;
	struct store_user u;
	struct store_iter *it;
	struct store_msg msg, last = { 0 };
	uint64_t mb, size;
	unsigned part;
	char *buf, *body;
	int fd;

	assert_int_equal(store_user_locate(m->store, user, &part), 0);
	assert_int_equal(store_txn_begin(m->store, part, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_user_get(t, user, &u), 0);
	assert_int_equal(store_mbox_find(t, u.id, "INBOX", &mb), 0);
	assert_int_equal(store_msg_iter(t, mb, 1, UINT32_MAX, 0, &it), 0);
	while (store_iter_next(it, &msg) == 1)
		last = msg;
	store_iter_free(&it);
	store_txn_abort(&t);
	assert_true(last.uid != 0);
	assert_int_equal(store_blob_open(m->store, part, last.blob, &fd, &size), 0);
	buf = xcalloc(1, (size_t)size + 1);
	assert_int_equal(read(fd, buf, (size_t)size), (ssize_t)size);
	close(fd);
	body = strstr(buf, "\r\nSubject:"); /* the Received: field ends before it */
	assert_non_null(body);
	body = xstrdup(body + 2);
	free(buf);
	return body;
}

/* A command line cut anywhere gives the same replies. */
static void test_command_split_anywhere(void **state)
{
	const char *line = "MAIL FROM:<someone@example.org> SIZE=100\r\n";
	const char *want = "250 2.1.0 Ok\r\n221 2.0.0 Bye\r\n";

	(void)state;
	for (size_t cut = 1; cut < strlen(line); cut++) {
		char a[128], b[128], out[4096];
		const char *parts[] = { "EHLO c\r\n", a, b, "QUIT\r\n", NULL };
		struct mtad m;
		char *after_ehlo;

		snprintf(a, sizeof(a), "%.*s", (int)cut, line);
		snprintf(b, sizeof(b), "%s", line + cut);
		session(&m, parts, out, sizeof(out));
		session_end(&m);
		after_ehlo = strstr(out, "250 ENHANCEDSTATUSCODES\r\n");
		assert_non_null(after_ehlo);
		assert_string_equal(after_ehlo + strlen("250 ENHANCEDSTATUSCODES\r\n"), want);
	}
}

/* A message cut anywhere is stored byte for byte the same, dot-stuffing undone; only the
   CRLF.CRLF at the end ends it. */
static void test_data_split_anywhere(void **state)
{
	const char *msg = "Subject: dots\r\n\r\n..one\r\n..\r\n...\r\nend\r\n.\r\n";
	const char *want = "Subject: dots\r\n\r\n.one\r\n.\r\n..\r\nend\r\n";

	(void)state;
	for (size_t cut = 1; cut < strlen(msg); cut++) {
		char a[128], b[128], out[4096];
		const char *parts[] = { "EHLO c\r\nMAIL FROM:<x@example.org>\r\n"
					"RCPT TO:<bob@heron.test>\r\nDATA\r\n",
					a, b, "QUIT\r\n", NULL };
		struct mtad m;
		char *stored;

		snprintf(a, sizeof(a), "%.*s", (int)cut, msg);
		snprintf(b, sizeof(b), "%s", msg + cut);
		session(&m, parts, out, sizeof(out));
		if (strstr(out, "250 2.0.0 Ok: queued as ") == NULL)
			fail_msg("cut %zu: %s", cut, out);
		stored = last_message(&m, "bob");
		session_end(&m);
		if (strcmp(stored, want) != 0)
			fail_msg("cut %zu: stored \"%s\"", cut, stored);
		free(stored);
	}
}

/* LF.LF, CR.CR and LF.CRLF end nothing (no smuggling): the commands after them are message
   text, and the message, with its bare line ends, is refused at the real end. */
static void test_data_ends_only_at_crlf_dot_crlf(void **state)
{
	static const char *const fake[] = { "\n.\n", "\r.\r", "\n.\r\n", "\r\n.\n" };

	(void)state;
	for (size_t i = 0; i < sizeof(fake) / sizeof(fake[0]); i++) {
		char body[256], out[4096];
		const char *parts[] = { "EHLO c\r\nMAIL FROM:<x@example.org>\r\n"
					"RCPT TO:<bob@heron.test>\r\nDATA\r\n",
					body, NULL };
		struct mtad m;

		snprintf(body, sizeof(body),
			 "Subject: s%sMAIL FROM:<evil@example.org>\r\n"
			 "RCPT TO:<alice@heron.test>\r\nDATA\r\nx\r\n.\r\nQUIT\r\n",
			 fake[i]);
		session(&m, parts, out, sizeof(out));
		session_end(&m);
		/* one reply to the whole message, then QUIT's: the smuggled commands got none */
		assert_non_null(strstr(out, "354 "));
		if (strstr(out, "\r\n554 5.6.11 Bare CR or LF") == NULL)
			fail_msg("%zu: %s", i, out);
		assert_null(strstr(out, "250 2.0.0 Ok: queued"));
		assert_non_null(strstr(out, "221 2.0.0 Bye\r\n"));
	}
}

/* A command line longer than line_max: refused, the session goes on. */
static void test_long_line(void **state)
{
	char *longl = xcalloc(1, 8192);
	char out[4096];
	const char *parts[] = { "EHLO c\r\n", longl, "NOOP\r\nQUIT\r\n", NULL };
	struct mtad m;

	(void)state;
	memcpy(longl, "NOOP ", 5);
	memset(longl + 5, 'x', 6000);
	memcpy(longl + 6005, "\r\n", 3);
	session(&m, parts, out, sizeof(out));
	session_end(&m);
	assert_non_null(strstr(out, "\r\n500 5.5.2 "));
	assert_non_null(strstr(out, "250 2.0.0 Ok\r\n221 2.0.0 Bye\r\n"));
	free(longl);
}

static int setup(void **state)
{
	char users[160];
	FILE *f;
	char *err = NULL;

	(void)state;
	log_init("test_smtp_parse", true, 0);
	log_set_level(LOG_LVL_ERR);
	assert_non_null(mkdtemp(dir));
	snprintf(users, sizeof(users), "%s/users", dir);
	assert_non_null(f = fopen(users, "w"));
	/* the users file backend: name:{SHA256}hash:address (password "pw", never used here) */
	fputs("alice:{SHA256}MMlS+rEiw/l1nwKm2Vw3WLJGtP7iOZV7LU/uRuJhcMQ=:alice@heron.test\n"
	      "bob:{SHA256}MMlS+rEiw/l1nwKm2Vw3WLJGtP7iOZV7LU/uRuJhcMQ=:bob@heron.test\n",
	      f);
	fclose(f);
	conf = conf_defaults();
	assert_int_equal(conf_set(conf, "directory", "backend", "file", &err), 0);
	assert_int_equal(conf_set(conf, "directory", "users_file", users, &err), 0);
	assert_int_equal(conf_set(conf, "store", "partitions", "1", &err), 0);
	assert_int_equal(conf_set(conf, "store", "map_size", "4M", &err), 0);
	assert_int_equal(conf_set(conf, "mtad", "local_domains", "heron.test", &err), 0);
	assert_int_equal(conf_set(conf, "mtad", "listen", "127.0.0.1:0", &err), 0);
	assert_int_equal(net_listen(conf_values(conf)->mtad.listen, NULL, &fds[L_SMTP], &err), 0);
	port = net_fd_port(fds[L_SMTP].fd[0]);
	shared = shmtable_new(MTAD_SHARED_SLOTS, 1, MTAD_SHARED_KEY_MAX, 60000);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	net_fds_close(&fds[L_SMTP]);
	conf_free(&conf);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* The delivery records' keys, strictly (queue_runner.c's sweep): a maildrop file's record
   (pickup.c: NAME/dev/ino/mtime) named "q", "r" or "v" is not a queue entry's. */
static void test_queue_record_parse(void **state)
{
	char key[QUEUE_RECORD_KEY_MAX], kind;
	uint64_t id;
	size_t idx;

	(void)state;
	queue_record_key('r', 0x1234abcdULL, 7, key, sizeof(key));
	assert_true(queue_record_parse(key, &kind, &id, &idx));
	assert_int_equal(kind, 'r');
	assert_int_equal(id, 0x1234abcdULL);
	assert_int_equal(idx, 7);
	queue_record_key('q', UINT64_MAX, 0, key, sizeof(key));
	assert_true(queue_record_parse(key, &kind, &id, &idx));
	assert_true(id == UINT64_MAX && idx == 0 && kind == 'q');
	assert_false(queue_record_parse("r/2049/1234567/1765000000", &kind, &id, &idx));
	assert_false(queue_record_parse("v/2049/1234567/1765000000", &kind, &id, &idx));
	assert_false(queue_record_parse("q/0000000000000001/2/3", &kind, &id, &idx));
	assert_false(queue_record_parse("q/0000000000000001/", &kind, &id, &idx));
	assert_false(queue_record_parse("q/000000000000001/2", &kind, &id, &idx));
	assert_false(queue_record_parse("q/00000000000000011/2", &kind, &id, &idx));
	assert_false(queue_record_parse("q/0000000000000001/2x", &kind, &id, &idx));
	assert_false(queue_record_parse("x/0000000000000001/2", &kind, &id, &idx));
	assert_false(queue_record_parse("", &kind, &id, &idx));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_command_split_anywhere),
		cmocka_unit_test(test_queue_record_parse),
		cmocka_unit_test(test_data_split_anywhere),
		cmocka_unit_test(test_data_ends_only_at_crlf_dot_crlf),
		cmocka_unit_test(test_long_line),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
