/* fuzz_peer.c — owns the in-process client, the listeners and the bounded loop of the session
 * fuzz targets. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <sanitizer/allocator_interface.h>
#include <sanitizer/lsan_interface.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "common/xmalloc.h"
#include "store/store.h"
#include "tests/fuzz/fuzz_peer.h"

struct peer {
	const uint8_t *data;
	size_t size, off;
	uint64_t got; /* bytes read from the server */
	bool eof, shut;
	int fd;
	struct event *rd, *wr;
};

/* Half-close only once the server is idle after the last byte went out: a server may rightly
   drop input that follows the end of input before it answered (the message after DATA, say),
   so closing at once would hide everything behind the first asynchronous step from the
   fuzzer. The server runs in this process on the same event base, so idle can be seen
   without waiting on a clock: IDLE_PASSES passes of the loop in a row that ran no event and
   brought no byte, with the group committer flushed (store_gc_flush) half-way, so that no
   commit is in flight. A step of the server that waits on a timer of its own (none does in
   the fuzz configuration but IDLE's end) is cut by the half-close, as a client's close
   would. */
#define IDLE_PASSES 8

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

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static char start_dir[128];

static void start_dir_remove(void)
{
	if (start_dir[0] != '\0')
		(void)nftw(start_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void fuzz_start(char *dir, size_t size, const char *name, char *path_r, size_t path_size)
{
	FILE *f;

	log_init("fuzz", true, 0);
	log_set_level(getenv("FUZZ_LOG") != NULL ? LOG_LVL_DEBUG : LOG_LVL_ERR);
	fuzz_tmpdir(dir, size, name);
	/* the fixture's store lives until the process ends, on /dev/shm (memory): removed then */
	snprintf(start_dir, sizeof(start_dir), "%s", dir);
	atexit(start_dir_remove);
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
	if (p->off == p->size)
		event_del(p->wr);
}

static void peer_read(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;
	char sink[65536];
	ssize_t n = read(fd, sink, sizeof(sink));

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		p->eof = true;
		event_del(p->rd);
	} else if (n > 0) {
		p->got += (uint64_t)n;
	}
}

/* Once every byte is out: one pass of the loop that waits for nothing; true when the server
   has been idle for IDLE_PASSES passes. */
static bool idle_pass(struct event_base *base, struct peer *p, struct store_gc *gc, unsigned *idle)
{
	uint64_t got = p->got;

	event_base_loop(base, EVLOOP_NONBLOCK);
	if (p->got != got || event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE) > 0) {
		*idle = 0;
		return false;
	}
	if (++*idle == IDLE_PASSES / 2 && gc != NULL)
		store_gc_flush(gc); /* runs the callbacks of what was in flight */
	return *idle >= IDLE_PASSES;
}

/* The listeners are AF_UNIX stream sockets in the abstract namespace, not TCP on loopback:
   TCP's handshake, segments, softirqs and teardown were about a fifth of an input's time. The
   server must still see an IPv4 peer of its own per input (per-address counts and the login
   penalty are keyed by it, and the SMTP session checks SPF and trusted networks on it), so
   accept4, which libevent's listener calls, is replaced in these programs: it accepts with the
   system call and, for an AF_UNIX peer while fuzz_session connects, writes the address
   fuzz_session chose. (ASan's interceptor of accept4 is a weak symbol; this one wins.) */
static struct sockaddr_in next_peer;
static bool next_peer_armed;

int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *restrict len, int flags)
{
	struct sockaddr *sa = addr.__sockaddr__;
	socklen_t cap = len != NULL ? *len : 0;
	int c = (int)syscall(SYS_accept4, fd, sa, len, flags);

	if (c >= 0 && sa != NULL && sa->sa_family == AF_UNIX && next_peer_armed &&
	    cap >= sizeof(next_peer)) {
		memcpy(sa, &next_peer, sizeof(next_peer));
		*len = sizeof(next_peer);
		next_peer_armed = false;
	}
	return c;
}

void fuzz_listen(const char *name, struct net_fds *fds, struct sockaddr_un *addr_r)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	socklen_t len;
	char text[96];

	fuzz_must(fd >= 0, "socket");
	memset(addr_r, 0, sizeof(*addr_r));
	addr_r->sun_family = AF_UNIX;
	/* sun_path[0] NUL: the abstract namespace, nothing on disk to remove */
	snprintf(addr_r->sun_path + 1, sizeof(addr_r->sun_path) - 1, "heron-fuzz-%ld-%s",
		 (long)getpid(), name);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			  strlen(addr_r->sun_path + 1));
	fuzz_must(bind(fd, (struct sockaddr *)addr_r, len) == 0, "bind");
	fuzz_must(listen(fd, 16) == 0, "listen");
	snprintf(text, sizeof(text), "unix:@%s", addr_r->sun_path + 1);
	fds->fd = xreallocarray(fds->fd, fds->n + 1, sizeof(*fds->fd));
	fds->name = xreallocarray(fds->name, fds->n + 1, sizeof(*fds->name));
	fds->fd[fds->n] = fd;
	fds->name[fds->n++] = xstrdup(text);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

void fuzz_session(struct event_base *base, const struct sockaddr_un *to, const uint8_t *data,
		  size_t size, bool (*done)(void *arg), void *arg, struct store_gc *gc,
		  int64_t timeout_ms)
{
	static uint32_t serial;
	struct peer p = { .data = data, .size = size };
	/* the loop wakes at least every 100 ms to look at the deadline: one timer of the
	   session's, re-armed (event_base_loopexit would leave a timer behind each pass that
	   an event ended first, and end a later pass with it) */
	struct timeval tick = { 0, 100000 };
	struct event *tick_ev = evtimer_new(base, tick_cb, NULL);
	int64_t deadline = clock_mono_ms() + timeout_ms;
	unsigned idle = 0;
	socklen_t tolen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				      strlen(to->sun_path + 1));
	/* non-blocking from the start: libFuzzer's timeout timer (SIGALRM) must not find the
	   peer in a blocking call */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	fuzz_must(fd >= 0, "socket");
	/* A new source address in 127/8 for each input, so per-address state in the server (the
	   AUTH failure penalty, connection counts) does not carry from one input to the next and
	   a crash reproduces from its input alone. */
	next_peer.sin_family = AF_INET;
	next_peer.sin_port = htons((uint16_t)(1024 + serial % 60000));
	next_peer.sin_addr.s_addr = htonl(0x7f000002u + (serial++ % 0xfffff0u));
	next_peer_armed = true;
	/* a listener with room in its backlog takes the connection at once */
	fuzz_must(connect(fd, (const struct sockaddr *)to, tolen) == 0, "connect");
	p.fd = fd;
	p.rd = event_new(base, fd, EV_READ | EV_PERSIST, peer_read, &p);
	p.wr = event_new(base, fd, EV_WRITE | EV_PERSIST, peer_write, &p);
	event_add(p.rd, NULL);
	if (size > 0)
		event_add(p.wr, NULL);
	while ((!p.eof || !done(arg)) && clock_mono_ms() < deadline) {
		if (!p.shut && p.off == p.size) {
			if (idle_pass(base, &p, gc, &idle)) {
				shutdown(p.fd, SHUT_WR);
				p.shut = true;
			}
			continue;
		}
		evtimer_add(tick_ev, &tick);
		event_base_loop(base, EVLOOP_ONCE);
	}
	if (!p.eof || !done(arg)) {
		fprintf(stderr, "fuzz: the session did not end within %lld ms\n",
			(long long)timeout_ms);
		abort();
	}
	fuzz_must(!next_peer_armed, "the server accepted the connection");
	event_free(tick_ev);
	event_free(p.rd);
	event_free(p.wr);
	close(fd);
}

/* The per-input leak check. Hooks count the blocks allocated and freed by every thread of
   the process; once an input is over (the session closed, the store reset, the group
   committer flushed so that its thread holds nothing of the input's), the count of live
   blocks is back where it started unless the input left something allocated. Most inputs
   leave it so, at the cost of an atomic addition per allocation and per free; when the count grew, either a
   cache of the server kept something (reachable: not a leak) or something was lost, and
   LeakSanitizer's scan of the heap tells which: a leak is reported there with the stacks
   of its allocations, and the input aborts, so libFuzzer keeps it as a crash. */
static atomic_long leak_live;
static atomic_ulong leak_bytes; /* allocated so far, for the figures of leak_stats */
static long leak_start, leak_scans, leak_inputs;
static unsigned long leak_bytes_start, leak_bytes_sum, leak_bytes_max;
static int64_t leak_ms;
static bool leak_on;

static void leak_malloc_hook(const volatile void *p, size_t size)
{
	(void)p;
	atomic_fetch_add_explicit(&leak_live, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&leak_bytes, size, memory_order_relaxed);
}

static void leak_free_hook(const volatile void *p)
{
	if (p != NULL)
		atomic_fetch_sub_explicit(&leak_live, 1, memory_order_relaxed);
}

static void leak_stats(void)
{
	if (getenv("FUZZ_LEAK_STATS") != NULL) /* scripts/fuzz sets it */
		fprintf(stderr,
			"fuzz: leak check: %ld inputs grew the heap: %lld ms of scans; %ld inputs "
			"allocated %lu bytes each on average, at most %lu\n",
			leak_scans, (long long)leak_ms, leak_inputs,
			leak_inputs > 0 ? leak_bytes_sum / (unsigned long)leak_inputs : 0,
			leak_bytes_max);
}

void fuzz_leak_init(void)
{
	/* FUZZ_LEAK_CHECK=0 turns it off (ASan's detect_leaks=0 does too: no LeakSanitizer) */
	const char *v = getenv("FUZZ_LEAK_CHECK");

	if (v != NULL && strcmp(v, "0") == 0)
		return;
	fuzz_must(__sanitizer_install_malloc_and_free_hooks(leak_malloc_hook, leak_free_hook) > 0,
		  "install the malloc hooks");
	leak_on = true;
	atexit(leak_stats);
}

void fuzz_leak_begin(void)
{
	leak_start = atomic_load(&leak_live);
	leak_bytes_start = atomic_load(&leak_bytes);
}

/* Zeroes the stack below the caller's frame, where the frames of the session ran: the scan's
   own frames are made there, and a stale copy of a lost pointer in one of their unwritten
   slots would count as a reference. */
__attribute__((noinline)) static void stack_clear(void)
{
	volatile char pad[128 * 1024];

	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] = 0;
}

void fuzz_leak_end(struct store_gc *gc)
{
	int64_t t0;
	int leaked;
	unsigned long bytes;

	if (!leak_on)
		return;
	if (gc != NULL)
		store_gc_flush(gc);
	bytes = atomic_load(&leak_bytes) - leak_bytes_start;
	leak_inputs++;
	leak_bytes_sum += bytes;
	if (bytes > leak_bytes_max)
		leak_bytes_max = bytes;
	if (atomic_load(&leak_live) <= leak_start)
		return;
	leak_scans++;
	stack_clear();
	t0 = clock_mono_ms();
	leaked = __lsan_do_recoverable_leak_check();
	leak_ms += clock_mono_ms() - t0;
	if (leaked != 0) {
		fprintf(stderr, "fuzz: this input leaked (the LeakSanitizer report above)\n");
		abort();
	}
}

struct names {
	char **v;
	size_t n;
};

static int user_name_cb(const struct store_user *u, void *arg)
{
	struct names *nm = arg;

	nm->v = xreallocarray(nm->v, nm->n + 1, sizeof(*nm->v));
	nm->v[nm->n++] = xstrdup(u->name);
	return 0;
}

static int users_delete_fn(struct store_txn *t, void *arg)
{
	struct names nm = { 0 };
	int rc = store_user_list(t, user_name_cb, &nm);

	for (size_t i = 0; i < nm.n; i++) {
		if (rc == 0)
			rc = store_user_delete(t, nm.v[i]);
		free(nm.v[i]);
	}
	free(nm.v);
	return rc;
}

struct ids {
	uint64_t *v;
	size_t n;
};

static int queue_id_cb(const struct store_queue_msg *qm, void *arg)
{
	struct ids *ids = arg;

	ids->v = xreallocarray(ids->v, ids->n + 1, sizeof(*ids->v));
	ids->v[ids->n++] = qm->id;
	return 0;
}

void fuzz_store_reset(struct store *st)
{
	struct ids ids = { 0 };

	for (unsigned p = 0; p < store_partitions(st); p++)
		fuzz_must(store_write(st, p, users_delete_fn, NULL) == 0, "store reset: users");
	fuzz_must(store_queue_list(st, queue_id_cb, &ids) == 0, "store reset: queue");
	for (size_t i = 0; i < ids.n; i++)
		fuzz_must(store_queue_delete(st, ids.v[i]) == 0, "store reset: queue entry");
	free(ids.v);
}
