/* fuzz_peer.c — owns the loopback client and bounded loop of the session fuzz targets. */
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

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "tests/fuzz/fuzz_peer.h"

struct peer {
	const uint8_t *data;
	size_t size, off;
	bool eof;
	int fd;
	struct event *rd, *wr, *quiet;
};

/* Half-close only once the server has been quiet for a moment after the last byte went out:
   a server may rightly drop input that follows the end of input before it answered (the
   message after DATA, say), so closing at once would hide everything behind the first
   asynchronous step from the fuzzer. */
static const struct timeval quiet_tv = { 0, 20000 };

void fuzz_must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz: %s: %s\n", what, strerror(errno));
		abort();
	}
}

void fuzz_set(struct conf *c, const char *sec, const char *key, const char *val)
{
	char *err = NULL;

	if (conf_set(c, sec, key, val, &err) < 0) {
		fprintf(stderr, "fuzz: %s.%s: %s\n", sec, key, err);
		abort();
	}
}

void fuzz_tmpdir(char *dir, size_t size, const char *name)
{
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	snprintf(dir, size, "%s/heron-fuzz-%s.XXXXXX", tmp, name);
	fuzz_must(mkdtemp(dir) != NULL, "mkdtemp");
}

void fuzz_start(char *dir, size_t size, const char *name, char *path_r, size_t path_size)
{
	FILE *f;

	log_init("fuzz", true, 0);
	log_set_level(getenv("FUZZ_LOG") != NULL ? LOG_LVL_DEBUG : LOG_LVL_ERR);
	fuzz_tmpdir(dir, size, name);
	snprintf(path_r, path_size, "%s/users", dir);
	f = fopen(path_r, "w");
	fuzz_must(f != NULL, path_r);
	/* {SHA256} of "pw" */
	fputs("alice:{SHA256}MMlS+rEiw/l1nwKm2Vw3WLJGtP7iOZV7LU/uRuJhcMQ=:alice@heron.test,"
	      "al@heron.test\n"
	      "bob:{SHA256}MMlS+rEiw/l1nwKm2Vw3WLJGtP7iOZV7LU/uRuJhcMQ=:bob@heron.test\n",
	      f);
	fclose(f);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void fuzz_rm_rf(const char *path)
{
	fuzz_must(nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0, "remove a temp dir");
}

static void peer_write(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;
	ssize_t n = write(fd, p->data + p->off, p->size - p->off);

	if (n > 0)
		p->off += (size_t)n;
	else if (n < 0 && errno != EAGAIN && errno != EINTR)
		p->off = p->size; /* the server closed: stop sending */
	if (p->off == p->size) {
		event_del(p->wr);
		evtimer_add(p->quiet, &quiet_tv);
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
	} else if (n > 0 && p->off == p->size && evtimer_pending(p->quiet, NULL)) {
		evtimer_add(p->quiet, &quiet_tv); /* still talking: wait on */
	}
}

static void peer_quiet(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;

	shutdown(p->fd, SHUT_WR);
}

void fuzz_session(struct event_base *base, int port, const uint8_t *data, size_t size,
		  bool (*done)(void *arg), void *arg, int64_t timeout_ms)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in src = { .sin_family = AF_INET };
	static uint32_t serial;
	struct peer p = { .data = data, .size = size };
	struct timeval tick = { 0, 100000 };
	int64_t deadline = clock_mono_ms() + timeout_ms;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	fuzz_must(fd >= 0, "socket");
	/* A new source address in 127/8 for each input, so per-address state in the server (the
	   AUTH failure penalty, connection counts) does not carry from one input to the next and
	   a crash reproduces from its input alone. */
	src.sin_addr.s_addr = htonl(0x7f000002u + (serial++ % 0xfffff0u));
	fuzz_must(bind(fd, (struct sockaddr *)&src, sizeof(src)) == 0, "bind");
	fuzz_must(connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0, "connect");
	fuzz_must(fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "fcntl");
	p.fd = fd;
	p.rd = event_new(base, fd, EV_READ | EV_PERSIST, peer_read, &p);
	p.wr = event_new(base, fd, EV_WRITE | EV_PERSIST, peer_write, &p);
	p.quiet = evtimer_new(base, peer_quiet, &p);
	event_add(p.rd, NULL);
	if (size > 0)
		event_add(p.wr, NULL);
	else
		evtimer_add(p.quiet, &quiet_tv);
	while ((!p.eof || !done(arg)) && clock_mono_ms() < deadline) {
		event_base_loopexit(base, &tick);
		event_base_loop(base, EVLOOP_ONCE);
	}
	if (!p.eof || !done(arg)) {
		fprintf(stderr, "fuzz: the session did not end within %lld ms\n",
			(long long)timeout_ms);
		abort();
	}
	event_free(p.rd);
	event_free(p.wr);
	event_free(p.quiet);
	close(fd);
}
