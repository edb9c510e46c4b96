/* test_reqserver.c — the one-request server's answers over a real unix socket: at once, and
 * deferred (reqserver_defer) with the answer done in another thread and written by the loop;
 * a deferred answer whose client left, or whose server was freed, or that finds the pipe of
 * answers full, is dropped (ASan checks that nothing leaks and nothing is used after its
 * free). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "common/buf.h"
#include "common/conf.h"
#include "common/net.h"
#include "common/reqserver.h"

struct fixture {
	char dir[64];
	char path[96];
	struct event_base *base;
	struct net_fds fds;
	struct reqserver *rs;
	struct reqserver_later *later; /* the handler's deferral */
	unsigned handled;
};

/* "now\n" is answered at once; anything else is deferred (its out dropped). */
static void handler(const char *req, size_t len, struct buf *out, void *arg)
{
	struct fixture *f = arg;

	f->handled++;
	if (len == 4 && memcmp(req, "now\n", 4) == 0) {
		buf_puts(out, "at once\n");
		return;
	}
	buf_puts(out, "not this\n");
	f->later = reqserver_defer(f->rs);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct conf_addr a = { .unix_path = true };
	struct conf_addrs addrs = { 1, &a };
	struct net_listen_opts lo = { .unix_mode = 0600 };
	struct reqserver_opts o = {
		.max_conns = 4,
		.timeout_ms = 600000, /* never reached: every test ends its connections */
		.request_max = 64,
		.end = REQSERVER_END_LINE,
		.too_long = "ERR too long\n",
		.name = "test",
	};
	char *error = NULL;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_reqserver.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/s", f->dir);
	a.host = f->path;
	assert_int_equal(net_listen(&addrs, &lo, &f->fds, &error), 0);
	f->base = event_base_new();
	f->rs = reqserver_new(f->base, &f->fds, &o, handler, f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	reqserver_free(&f->rs);
	net_fds_close(&f->fds);
	event_base_free(f->base);
	unlink(f->path);
	rmdir(f->dir);
	free(f);
	return 0;
}

static int client(struct fixture *f, const char *req)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", f->path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	return fd;
}

/* Runs the loop until the server has handled n requests. */
static void loop_until_handled(struct fixture *f, unsigned n)
{
	while (f->handled < n)
		assert_int_equal(event_base_loop(f->base, EVLOOP_ONCE), 0);
}

struct reader {
	int fd;
	char got[256];
	size_t len;
	bool eof;
};

static void reader_cb(evutil_socket_t fd, short what, void *arg)
{
	struct reader *r = arg;
	ssize_t n = read(fd, r->got + r->len, sizeof(r->got) - 1 - r->len);

	if (n <= 0)
		r->eof = true;
	else
		r->len += (size_t)n;
	r->got[r->len] = '\0';
}

/* Runs the loop until the server half-closed fd; returns what it wrote. */
static const char *answer_of(struct fixture *f, struct reader *r)
{
	struct event *ev = event_new(f->base, r->fd, EV_READ | EV_PERSIST, reader_cb, r);

	event_add(ev, NULL);
	while (!r->eof)
		assert_int_equal(event_base_loop(f->base, EVLOOP_ONCE), 0);
	event_free(ev);
	close(r->fd);
	return r->got;
}

static void *done_thread(void *arg)
{
	struct reqserver_later *l = arg;
	struct buf ans;

	buf_init(&ans, 16, 1024);
	buf_puts(&ans, "later\n");
	reqserver_later_done(l, &ans);
	assert_int_equal(ans.len, 0); /* taken */
	buf_release(&ans);
	return NULL;
}

static void done_in_thread(struct reqserver_later *l)
{
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, done_thread, l), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
}

static void test_at_once(void **state)
{
	struct fixture *f = *state;
	struct reader r = { .fd = client(f, "now\n") };

	assert_string_equal(answer_of(f, &r), "at once\n");
	assert_null(f->later);
}

/* The handler defers; the answer, done in another thread, is what the client reads (and
   not what the handler had appended to out). */
static void test_deferred(void **state)
{
	struct fixture *f = *state;
	struct reader r = { .fd = client(f, "walk\n") };

	loop_until_handled(f, 1);
	assert_non_null(f->later);
	assert_int_equal(reqserver_nconns(f->rs), 1);
	done_in_thread(f->later);
	assert_string_equal(answer_of(f, &r), "later\n");
	/* a second one on the same server, while the first client is gone */
	r = (struct reader){ .fd = client(f, "walk\n") };
	loop_until_handled(f, 2);
	done_in_thread(f->later);
	assert_string_equal(answer_of(f, &r), "later\n");
}

/* The client leaves before the answer: it is dropped when it comes. */
static void test_deferred_client_gone(void **state)
{
	struct fixture *f = *state;
	int fd = client(f, "walk\n");

	loop_until_handled(f, 1);
	close(fd);
	while (reqserver_nconns(f->rs) > 0)
		assert_int_equal(event_base_loop(f->base, EVLOOP_ONCE), 0);
	done_in_thread(f->later);
	/* the pipe is readable now: one pass drops the answer */
	assert_int_equal(event_base_loop(f->base, EVLOOP_ONCE), 0);
	/* the server still answers */
	struct reader r = { .fd = client(f, "now\n") };

	assert_string_equal(answer_of(f, &r), "at once\n");
}

/* The pipes of this process: each end's descriptor with its access mode, up to max. */
static size_t pipes(int *fd, int *mode, size_t max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	size_t n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL && n < max) {
		char path[300], link[64];
		ssize_t len;
		int x = atoi(e->d_name);

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		if (e->d_name[0] == '.' || x == dirfd(d) ||
		    (len = readlink(path, link, sizeof(link) - 1)) <= 0)
			continue;
		link[len] = '\0';
		if (strncmp(link, "pipe:", 5) == 0) {
			fd[n] = x;
			mode[n++] = fcntl(x, F_GETFL) & O_ACCMODE;
		}
	}
	closedir(d);
	return n;
}

static bool in(const int *v, size_t n, int x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* The answer is done while the pipe of answers is full: it is dropped, and the connection,
   which still points to it, frees it when it ends (it was freed at once, and the connection
   wrote to it then). */
static void test_deferred_pipe_full(void **state)
{
	struct fixture *f = *state;
	int before[16], bmode[16], after[16], amode[16], rd = -1, wr = -1;
	size_t nb = pipes(before, bmode, 16), na;
	int fd = client(f, "walk\n");
	uint64_t zero = 0;
	char sink[4096];

	loop_until_handled(f, 1); /* the first deferral opened the pipe */
	na = pipes(after, amode, 16);
	for (size_t i = 0; i < na; i++)
		if (!in(before, nb, after[i])) {
			if (amode[i] == O_WRONLY)
				wr = after[i];
			else
				rd = after[i];
		}
	assert_true(rd >= 0 && wr >= 0);
	while (write(wr, &zero, sizeof(zero)) == (ssize_t)sizeof(zero))
		;
	assert_int_equal(errno, EAGAIN);
	done_in_thread(f->later);                /* cannot be written: dropped */
	while (read(rd, sink, sizeof(sink)) > 0) /* the zeros out again, before the loop reads */
		;
	close(fd);
	while (reqserver_nconns(f->rs) > 0)
		assert_int_equal(event_base_loop(f->base, EVLOOP_ONCE), 0);
	/* the server still answers, deferred ones too */
	struct reader r = { .fd = client(f, "now\n") };

	assert_string_equal(answer_of(f, &r), "at once\n");
	r = (struct reader){ .fd = client(f, "walk\n") };
	loop_until_handled(f, 3);
	done_in_thread(f->later);
	assert_string_equal(answer_of(f, &r), "later\n");
}

/* The server is freed (the daemon stopping) before the answer is done, and before a done
   answer was read: both are dropped. */
static void test_deferred_server_gone(void **state)
{
	struct fixture *f = *state;
	struct reqserver_later *first;
	int fd1 = client(f, "walk\n"), fd2;

	loop_until_handled(f, 1);
	first = f->later;
	fd2 = client(f, "walk\n");
	loop_until_handled(f, 2);
	done_in_thread(first); /* in the pipe, unread */
	reqserver_free(&f->rs);
	done_in_thread(f->later); /* after the server */
	close(fd1);
	close(fd2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deferred, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deferred_client_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deferred_server_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deferred_pipe_full, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
