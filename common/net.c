/* net.c — owns sockets: listeners, the capped accept wrapper and its refusals (spare
 * descriptor, the shared total), per-address connection counts (local or in a shmtable),
 * address text, async client connect and free test ports. TLS on top: tls.c. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "common/log.h"
#include "common/net.h"
#include "common/shmtable.h"
#include "common/str.h"
#include "common/xmalloc.h"

static int sock_open(int family, int type, char **error_r, const char *name);
static int listen_unix(const struct conf_addr *a, const struct net_listen_opts *o,
		       struct net_fds *fds, char **error_r);
static int listen_inet(const char *host, const char *port, const struct net_listen_opts *o,
		       struct net_fds *fds, char **error_r);
static void fds_push(struct net_fds *fds, int fd, const char *name);
static void server_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
			     int salen, void *arg);
static void server_enable(struct net_server *srv, bool on);

#define NET_BACKLOG_DEFAULT 511

/* ---- listeners ---- */

static int sock_open(int family, int type, char **error_r, const char *name)
{
	int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd == -1)
		*error_r = xasprintf("socket %s: %s", name, strerror(errno));
	return fd;
}

static void fds_push(struct net_fds *fds, int fd, const char *name)
{
	fds->fd = xreallocarray(fds->fd, fds->n + 1, sizeof(*fds->fd));
	fds->name = xreallocarray(fds->name, fds->n + 1, sizeof(*fds->name));
	fds->fd[fds->n] = fd;
	fds->name[fds->n] = xstrdup(name);
	fds->n++;
}

/* Whether something still accepts on the unix socket at path (then it is not stale). */
static bool unix_alive(const struct sockaddr_un *sun)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd == -1)
		return false;
	alive = connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) == 0;
	close(fd);
	return alive;
}

static int listen_unix(const struct conf_addr *a, const struct net_listen_opts *o,
		       struct net_fds *fds, char **error_r)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char name[NET_ADDRSTRLEN];
	struct stat st;
	int fd;

	snprintf(name, sizeof(name), "unix:%s", a->host);
	if (strlen(a->host) >= sizeof(sun.sun_path)) {
		*error_r = xasprintf("listen %s: path too long", name);
		return -1;
	}
	memcpy(sun.sun_path, a->host, strlen(a->host) + 1);
	if (lstat(a->host, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			*error_r = xasprintf("listen %s: exists and is not a socket", name);
			return -1;
		}
		if (unix_alive(&sun)) {
			*error_r = xasprintf("listen %s: in use by another process", name);
			return -1;
		}
		(void)unlink(a->host);
	}
	if ((fd = sock_open(AF_UNIX, SOCK_STREAM, error_r, name)) == -1)
		return -1;
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    chmod(a->host, o->unix_mode != 0 ? o->unix_mode : 0666) == -1 ||
	    listen(fd, o->backlog > 0 ? o->backlog : NET_BACKLOG_DEFAULT) == -1) {
		*error_r = xasprintf("listen %s: %s", name, strerror(errno));
		close(fd);
		return -1;
	}
	fds_push(fds, fd, name);
	return 0;
}

static int listen_ai(const struct addrinfo *ai, const struct net_listen_opts *o,
		     struct net_fds *fds, char **error_r)
{
	char name[NET_ADDRSTRLEN];
	int one = 1, fd;

	net_addr_str(ai->ai_addr, ai->ai_addrlen, name, sizeof(name));
	if ((fd = sock_open(ai->ai_family, SOCK_STREAM, error_r, name)) == -1)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    (o->reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == -1) ||
	    (ai->ai_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) == -1)) {
		*error_r = xasprintf("setsockopt %s: %s", name, strerror(errno));
		close(fd);
		return -1;
	}
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) == -1 ||
	    listen(fd, o->backlog > 0 ? o->backlog : NET_BACKLOG_DEFAULT) == -1) {
		*error_r = xasprintf("bind %s: %s", name, strerror(errno));
		close(fd);
		return -1;
	}
	if (ai->ai_addrlen <= sizeof(struct sockaddr_storage)) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);

		if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
			net_addr_str((struct sockaddr *)&ss, len, name, sizeof(name));
	}
	fds_push(fds, fd, name);
	return 0;
}

static int listen_inet(const char *host, const char *port, const struct net_listen_opts *o,
		       struct net_fds *fds, char **error_r)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_ADDRCONFIG };
	struct addrinfo *res, *ai;
	bool any = host[0] == '\0' || strcmp(host, "*") == 0;
	int rc;

	if (any)
		hints.ai_flags &= ~AI_ADDRCONFIG;
	rc = getaddrinfo(any ? NULL : host, port, &hints, &res);
	if (rc != 0) {
		*error_r = xasprintf("listen %s:%s: %s", host, port, gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		if (listen_ai(ai, o, fds, error_r) == -1) {
			/* "*" on a host without IPv6: serve IPv4 alone. */
			if (any && ai->ai_family == AF_INET6 &&
			    strstr(*error_r, strerror(EAFNOSUPPORT)) != NULL) {
				free(*error_r);
				*error_r = NULL;
				continue;
			}
			freeaddrinfo(res);
			return -1;
		}
	}
	freeaddrinfo(res);
	return 0;
}

int net_listen(const struct conf_addrs *addrs, const struct net_listen_opts *o,
	       struct net_fds *fds, char **error_r)
{
	static const struct net_listen_opts defaults;
	size_t before = fds->n;

	if (o == NULL)
		o = &defaults;
	*error_r = NULL;
	for (size_t i = 0; i < addrs->n; i++) {
		const struct conf_addr *a = &addrs->v[i];
		int rc = a->unix_path ? listen_unix(a, o, fds, error_r)
				      : listen_inet(a->host, a->port, o, fds, error_r);
		if (rc == -1) {
			while (fds->n > before) {
				fds->n--;
				close(fds->fd[fds->n]);
				free(fds->name[fds->n]);
			}
			return -1;
		}
	}
	return 0;
}

void net_fds_close(struct net_fds *fds)
{
	for (size_t i = 0; i < fds->n; i++) {
		close(fds->fd[i]);
		free(fds->name[i]);
	}
	free(fds->fd);
	free(fds->name);
	memset(fds, 0, sizeof(*fds));
}

int net_fd_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1)
		return -1;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -1;
}

/* ---- accept with a cap ---- */

struct net_server {
	struct evconnlistener **lev;
	size_t nlev;
	size_t nconns, max_conns;
	bool enabled, stopped;
	struct event *pause; /* accept ran out of descriptors or memory: retry later */
	net_accept_cb *cb;
	void *arg;
	char *refusal; /* the line over the cap; NULL: pause at the cap */
	char *name;    /* for the refusal log */
	int spare;     /* a descriptor held in reserve for refusals; -1: none */
	struct shmtable *shared;
	unsigned worker;
	size_t share;          /* shared: this worker's share of max_conns */
	struct event *balance; /* shared: re-checks a server paused at its share */
	uint64_t nrefused;
	uint64_t logged_refused; /* nrefused at the last refusal log line */
	time_t logged_at;
};

#define NET_ACCEPT_PAUSE_MS 1000

static void server_enable(struct net_server *srv, bool on)
{
	if (srv->enabled == on)
		return;
	for (size_t i = 0; i < srv->nlev; i++)
		on ? evconnlistener_enable(srv->lev[i]) : evconnlistener_disable(srv->lev[i]);
	srv->enabled = on;
}

void net_refuse(int fd, const char *line)
{
	char early[512];

	if (send(fd, line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the client is gone already: it is refused either way */
	}
	/* A close with unread input resets the connection, and a reset can destroy the line in
	   flight: drop what a too-eager client already sent (one read, never waiting). */
	if (recv(fd, early, sizeof(early), MSG_DONTWAIT) < 0) {
		/* nothing sent: the usual case */
	}
	close(fd);
}

/* Refuses fd (one over the cap); a log line at most once a second, with the count since the
   last one. why: over the cap, or out of descriptors. */
static void server_refuse(struct net_server *srv, int fd, const struct sockaddr *sa,
			  socklen_t salen, const char *why)
{
	time_t now = time(NULL);
	char addr[NET_ADDRSTRLEN] = "unknown";

	net_refuse(fd, srv->refusal);
	srv->nrefused++;
	if (now == srv->logged_at)
		return;
	if (sa != NULL)
		net_addr_str(sa, salen, addr, sizeof(addr));
	log_info("%s refuse addr=%s reason=\"%s\" conns=%zu refused=%" PRIu64, srv->name, addr,
		 why, srv->shared != NULL ? (size_t)shmtable_total(srv->shared) : srv->nconns,
		 srv->nrefused - srv->logged_refused);
	srv->logged_at = now;
	srv->logged_refused = srv->nrefused;
}

/* Whether one more connection fits under the cap; if so it is counted. */
static bool server_admit(struct net_server *srv)
{
	if (srv->shared != NULL) {
		if (!shmtable_total_take(srv->shared, srv->worker, (uint32_t)srv->max_conns))
			return false;
	} else if (srv->refusal != NULL && srv->nconns >= srv->max_conns) {
		return false;
	}
	srv->nconns++;
	return true;
}

#define NET_BALANCE_MS 100

/* Shared cap: a worker holding its share leaves new clients to the others (the kernel wakes
   every worker, and an idle one would take them all) while the total is under the cap; at
   the cap every worker listens again, to refuse. A paused server looks again every
   NET_BALANCE_MS (its siblings' connections and the other workers' are not its events). */
static void server_balance(struct net_server *srv)
{
	struct timeval tv = { 0, NET_BALANCE_MS * 1000 };
	bool over;

	if (srv->shared == NULL || srv->stopped)
		return;
	over = shmtable_total_mine(srv->shared, srv->worker) >= srv->share &&
	       shmtable_total(srv->shared) < srv->max_conns;
	server_enable(srv, !over && !evtimer_pending(srv->pause, NULL));
	if (over && !evtimer_pending(srv->balance, NULL))
		evtimer_add(srv->balance, &tv);
}

static void server_balance_cb(evutil_socket_t fd, short what, void *arg)
{
	server_balance(arg);
}

static void server_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
			     int salen, void *arg)
{
	struct net_server *srv = arg;

	if (!server_admit(srv)) {
		server_refuse(srv, fd, sa, (socklen_t)salen, "too many connections");
		return;
	}
	if (srv->refusal == NULL && srv->nconns >= srv->max_conns)
		server_enable(srv, false);
	server_balance(srv);
	srv->cb(srv, fd, sa, (socklen_t)salen, srv->arg);
}

static void server_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct net_server *srv = arg;

	if (!srv->stopped && (srv->refusal != NULL || srv->nconns < srv->max_conns))
		server_enable(srv, true);
	server_balance(srv);
}

/* Out of descriptors: frees the spare, refuses one client with it and takes the spare again.
   False when there is no spare or it cannot be taken back (then the listeners pause). */
static bool server_refuse_spare(struct net_server *srv, struct evconnlistener *l)
{
	int lfd = evconnlistener_get_fd(l), fd;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	int e;

	if (srv->spare < 0 || srv->refusal == NULL)
		return false;
	close(srv->spare);
	fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
	e = errno;
	if (fd >= 0)
		server_refuse(srv, fd, (struct sockaddr *)&ss, len, "out of descriptors");
	srv->spare = fcntl(lfd, F_DUPFD_CLOEXEC, 0);
	return srv->spare >= 0 && (fd >= 0 || e == EAGAIN || e == EWOULDBLOCK);
}

/* accept() failed for another reason than a vanished client. Out of descriptors, a refusing
   server answers one client with its spare descriptor; otherwise (or out of memory) a
   level-triggered listener would spin: pause the listeners for a moment instead. */
static void server_error_cb(struct evconnlistener *l, void *arg)
{
	struct net_server *srv = arg;
	int e = errno;
	struct timeval tv = { NET_ACCEPT_PAUSE_MS / 1000, (NET_ACCEPT_PAUSE_MS % 1000) * 1000 };

	if ((e == EMFILE || e == ENFILE) && server_refuse_spare(srv, l))
		return;
	errno = e;
	log_warn("accept");
	if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
		server_enable(srv, false);
		evtimer_add(srv->pause, &tv);
	}
}

struct net_server *net_server_new(struct event_base *base, const struct net_fds *fds,
				  size_t max_conns, net_accept_cb *cb, void *arg)
{
	struct net_server *srv = xcalloc(1, sizeof(*srv));

	assert(max_conns >= 1);
	srv->lev = xcalloc(fds->n > 0 ? fds->n : 1, sizeof(*srv->lev));
	srv->max_conns = max_conns;
	srv->cb = cb;
	srv->arg = arg;
	srv->enabled = true;
	srv->spare = -1;
	for (size_t i = 0; i < fds->n; i++) {
		/* backlog 0: the socket already listens; accepted fds come non-blocking. */
		srv->lev[i] = evconnlistener_new(base, server_accept_cb, srv,
						 LEV_OPT_CLOSE_ON_EXEC, 0, fds->fd[i]);
		if (srv->lev[i] == NULL)
			fatalx("evconnlistener_new %s failed", fds->name[i]);
		evconnlistener_set_error_cb(srv->lev[i], server_error_cb);
		srv->nlev++;
	}
	if ((srv->pause = evtimer_new(base, server_resume_cb, srv)) == NULL)
		fatalx("evtimer_new failed");
	return srv;
}

void net_server_set_refusal(struct net_server *srv, const char *name, const char *line)
{
	free(srv->refusal);
	free(srv->name);
	srv->refusal = xstrdup(line);
	srv->name = xstrdup(name);
	if (srv->spare < 0 && srv->nlev > 0 &&
	    (srv->spare = fcntl(evconnlistener_get_fd(srv->lev[0]), F_DUPFD_CLOEXEC, 0)) < 0)
		log_warn("%s: no spare descriptor for refusals", name);
	if (!srv->stopped)
		server_enable(srv, true);
}

void net_server_share(struct net_server *srv, struct shmtable *t, unsigned worker)
{
	unsigned nw = shmtable_workers(t);

	assert(srv->nconns == 0 && srv->refusal != NULL && srv->shared == NULL);
	srv->shared = t;
	srv->worker = worker;
	srv->share = (srv->max_conns + nw - 1) / nw;
	if ((srv->balance = evtimer_new(event_get_base(srv->pause), server_balance_cb, srv)) ==
	    NULL)
		fatalx("evtimer_new failed");
}

void net_server_conn_done(struct net_server *srv)
{
	assert(srv->nconns > 0);
	srv->nconns--;
	if (srv->shared != NULL)
		shmtable_total_put(srv->shared, srv->worker);
	if (!srv->stopped && srv->nconns < srv->max_conns)
		server_enable(srv, true);
	server_balance(srv);
}

size_t net_server_nconns(const struct net_server *srv)
{
	return srv->nconns;
}

uint64_t net_server_nrefused(const struct net_server *srv)
{
	return srv->nrefused;
}

void net_server_stop(struct net_server *srv)
{
	srv->stopped = true;
	server_enable(srv, false);
}

void net_server_free(struct net_server **srvp)
{
	struct net_server *srv = *srvp;

	if (srv == NULL)
		return;
	for (size_t i = 0; i < srv->nlev; i++)
		evconnlistener_free(srv->lev[i]);
	event_free(srv->pause);
	if (srv->balance != NULL)
		event_free(srv->balance);
	if (srv->spare >= 0)
		close(srv->spare);
	free(srv->refusal);
	free(srv->name);
	free(srv->lev);
	free(srv);
	*srvp = NULL;
}

/* ---- connections per client address ---- */

struct ipslot {
	uint8_t addr[16]; /* IPv4 as ::ffff:a.b.c.d */
	uint32_t count;   /* 0: empty slot */
};

struct net_ipcount {
	struct shmtable *shared; /* the shared kind: counts live there; the rest is unused */
	unsigned worker;
	enum shmtable_kind kind;
	struct ipslot *slot;
	size_t mask; /* capacity - 1, capacity a power of two >= 2 * max */
	size_t n, max;
	uint64_t seed;
};

/* The 16-byte key for sa; false for addresses that are not counted (unix sockets). */
static bool ip_key(const struct sockaddr *sa, uint8_t key[16])
{
	if (sa->sa_family == AF_INET) {
		memset(key, 0, 10);
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(key, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
		return true;
	}
	return false;
}

static size_t ip_hash(const struct net_ipcount *t, const uint8_t key[16])
{
	uint64_t a, b, h;

	memcpy(&a, key, 8);
	memcpy(&b, key + 8, 8);
	h = (a ^ t->seed) * 0x9e3779b97f4a7c15ULL;
	h ^= h >> 29;
	h = (h ^ b) * 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	return (size_t)h & t->mask;
}

/* The slot holding key, or the empty slot where it would go. */
static size_t ip_find(const struct net_ipcount *t, const uint8_t key[16])
{
	size_t i = ip_hash(t, key);

	while (t->slot[i].count != 0 && memcmp(t->slot[i].addr, key, 16) != 0)
		i = (i + 1) & t->mask;
	return i;
}

struct net_ipcount *net_ipcount_new(size_t max_addrs)
{
	struct net_ipcount *t = xcalloc(1, sizeof(*t));
	size_t cap = 8;

	assert(max_addrs >= 1 && max_addrs <= SIZE_MAX / 4);
	while (cap < max_addrs * 2)
		cap *= 2;
	t->slot = xcalloc(cap, sizeof(*t->slot));
	t->mask = cap - 1;
	t->max = max_addrs;
	if (getrandom(&t->seed, sizeof(t->seed), 0) != sizeof(t->seed))
		t->seed = (uint64_t)(uintptr_t)t ^ (uint64_t)getpid();
	return t;
}

struct net_ipcount *net_ipcount_new_shared(struct shmtable *t, unsigned worker, int kind)
{
	struct net_ipcount *c = xcalloc(1, sizeof(*c));

	c->shared = t;
	c->worker = worker;
	c->kind = (enum shmtable_kind)kind;
	return c;
}

size_t net_shm_slots(size_t max_conns)
{
	return max_conns < SIZE_MAX / 4 ? 2 * max_conns : max_conns;
}

/* The text key of sa in a shared table; false for addresses that are not counted. */
static bool ip_text(const struct sockaddr *sa, char *out, size_t size)
{
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return false;
	net_addr_host(sa, out, size);
	return true;
}

void net_ipcount_free(struct net_ipcount **tp)
{
	if (*tp == NULL)
		return;
	free((*tp)->slot);
	free(*tp);
	*tp = NULL;
}

bool net_ipcount_inc(struct net_ipcount *t, const struct sockaddr *sa, uint32_t limit)
{
	uint8_t key[16];
	char text[NET_SHM_KEY_MAX];
	size_t i;

	if (t->shared != NULL)
		return !ip_text(sa, text, sizeof(text)) ||
		       shmtable_take(t->shared, t->kind, text, t->worker, limit);
	if (!ip_key(sa, key))
		return true;
	i = ip_find(t, key);
	if (t->slot[i].count == 0) {
		if (t->n >= t->max || limit == 0)
			return false;
		memcpy(t->slot[i].addr, key, 16);
		t->n++;
	} else if (t->slot[i].count >= limit) {
		return false;
	}
	t->slot[i].count++;
	return true;
}

void net_ipcount_dec(struct net_ipcount *t, const struct sockaddr *sa)
{
	uint8_t key[16];
	char text[NET_SHM_KEY_MAX];
	size_t i, j;

	if (t->shared != NULL) {
		if (ip_text(sa, text, sizeof(text)))
			shmtable_put(t->shared, t->kind, text, t->worker);
		return;
	}
	if (!ip_key(sa, key))
		return;
	i = ip_find(t, key);
	assert(t->slot[i].count > 0);
	if (--t->slot[i].count > 0)
		return;
	t->n--;
	/* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
	for (j = (i + 1) & t->mask; t->slot[j].count != 0; j = (j + 1) & t->mask) {
		size_t home = ip_hash(t, t->slot[j].addr);

		/* Move j into the hole i unless its home lies cyclically in (i, j]. */
		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			t->slot[i] = t->slot[j];
			t->slot[j].count = 0;
			i = j;
		}
	}
}

uint32_t net_ipcount_get(const struct net_ipcount *t, const struct sockaddr *sa)
{
	uint8_t key[16];
	char text[NET_SHM_KEY_MAX];

	if (t->shared != NULL)
		return ip_text(sa, text, sizeof(text)) ? shmtable_count(t->shared, t->kind, text)
						       : 0;
	if (!ip_key(sa, key))
		return 0;
	return t->slot[ip_find(t, key)].count;
}

/* ---- address text ---- */

/* Writes the bare address of an inet sa into out; IPv4-mapped IPv6 as IPv4. v6_r: whether
   the text is IPv6 (needs brackets before a port). */
static void addr_text(const struct sockaddr *sa, char *out, size_t size, bool *v6_r, int *port_r)
{
	*v6_r = false;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)sa;

		inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)size);
		*port_r = ntohs(sin->sin_port);
	} else {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;

		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			inet_ntop(AF_INET, s6->sin6_addr.s6_addr + 12, out, (socklen_t)size);
		} else {
			inet_ntop(AF_INET6, &s6->sin6_addr, out, (socklen_t)size);
			*v6_r = true;
		}
		*port_r = ntohs(s6->sin6_port);
	}
}

const char *net_addr_str(const struct sockaddr *sa, socklen_t salen, char *out, size_t size)
{
	char host[INET6_ADDRSTRLEN];
	bool v6;
	int port;

	if (sa->sa_family == AF_UNIX) {
		const struct sockaddr_un *sun = (const struct sockaddr_un *)(const void *)sa;
		size_t off = offsetof(struct sockaddr_un, sun_path);
		size_t plen = salen > off ? strnlen(sun->sun_path, salen - off) : 0;

		if (plen == 0)
			snprintf(out, size, "unix");
		else
			snprintf(out, size, "unix:%.*s", (int)plen, sun->sun_path);
		return out;
	}
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) {
		snprintf(out, size, "family%d", sa->sa_family);
		return out;
	}
	addr_text(sa, host, sizeof(host), &v6, &port);
	snprintf(out, size, v6 ? "[%s]:%d" : "%s:%d", host, port);
	return out;
}

const char *net_addr_host(const struct sockaddr *sa, char *out, size_t size)
{
	bool v6;
	int port;

	if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6) {
		char host[INET6_ADDRSTRLEN];

		addr_text(sa, host, sizeof(host), &v6, &port);
		snprintf(out, size, "%s", host);
	} else {
		snprintf(out, size, "%s", sa->sa_family == AF_UNIX ? "unix" : "unknown");
	}
	return out;
}

/* ---- async connect ---- */

struct net_connect {
	struct bufferevent *bev;
	struct event *timer;
	net_connect_cb *cb;
	void *arg;
	char name[NET_ADDRSTRLEN];
	char why[128]; /* a failure found before the loop ran */
};

static void connect_free(struct net_connect *c)
{
	event_free(c->timer);
	free(c);
}

/* Ends the attempt: hands bev (or NULL and an error) to the callback. */
static void connect_finish(struct net_connect *c, bool ok, const char *why)
{
	struct bufferevent *bev = c->bev;
	net_connect_cb *cb = c->cb;
	void *arg = c->arg;
	char *error = NULL;

	if (ok) {
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		bufferevent_disable(bev, EV_READ | EV_WRITE);
		bufferevent_set_timeouts(bev, NULL, NULL);
	} else {
		error = xasprintf("connect %s: %s", c->name, why);
		bufferevent_free(bev);
		bev = NULL;
	}
	connect_free(c);
	cb(bev, error, arg);
	free(error);
}

static void connect_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct net_connect *c = arg;
	int dnserr = bufferevent_socket_get_dns_error(bev);

	if (what & BEV_EVENT_CONNECTED)
		connect_finish(c, true, NULL);
	else if (dnserr != 0)
		connect_finish(c, false, evutil_gai_strerror(dnserr));
	else
		connect_finish(c, false, evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
}

static void connect_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	connect_finish(arg, false, "timed out");
}

/* Reports a failure found in net_connect() from the loop, as promised. */
static void connect_fail_cb(evutil_socket_t fd, short what, void *arg)
{
	struct net_connect *c = arg;

	connect_finish(c, false, c->why);
}

struct net_connect *net_connect(struct event_base *base, struct evdns_base *dns, const char *host,
				const char *port, int timeout_ms, net_connect_cb *cb, void *arg)
{
	struct net_connect *c = xcalloc(1, sizeof(*c));
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	struct in6_addr a6;
	bool numeric = inet_pton(AF_INET6, host, &a6) == 1 || inet_pton(AF_INET, host, &a6) == 1;
	uint64_t portnum = 0;

	assert(timeout_ms > 0);
	c->cb = cb;
	c->arg = arg;
	snprintf(c->name, sizeof(c->name), strchr(host, ':') != NULL ? "[%s]:%s" : "%s:%s", host,
		 port);
	/* Deferred callbacks: nothing may call back into us from inside this function. */
	c->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (c->bev == NULL)
		fatalx("bufferevent_socket_new failed");
	bufferevent_setcb(c->bev, NULL, NULL, connect_event_cb, c);
	if (str_to_u64(port, strlen(port), 65535, &portnum) < 0 || portnum == 0)
		snprintf(c->why, sizeof(c->why), "bad port");
	else if (!numeric && dns == NULL)
		snprintf(c->why, sizeof(c->why), "not a numeric address and no resolver");
	else if (bufferevent_socket_connect_hostname(c->bev, numeric ? NULL : dns, AF_UNSPEC, host,
						     (int)portnum) == -1)
		snprintf(c->why, sizeof(c->why), "%s",
			 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	if (c->why[0] != '\0') {
		bufferevent_setcb(c->bev, NULL, NULL, NULL, NULL);
		tv.tv_sec = tv.tv_usec = 0;
	}
	c->timer = evtimer_new(base, c->why[0] != '\0' ? connect_fail_cb : connect_timeout_cb, c);
	evtimer_add(c->timer, &tv);
	return c;
}

void net_connect_cancel(struct net_connect **cp)
{
	struct net_connect *c = *cp;

	if (c == NULL)
		return;
	bufferevent_free(c->bev);
	connect_free(c);
	*cp = NULL;
}

/* ---- test ports ---- */

int net_free_port(int family)
{
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };
	socklen_t len;
	int fd, port;

	if (family == AF_INET) {
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(struct sockaddr_in);
	} else if (family == AF_INET6) {
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
		len = sizeof(struct sockaddr_in6);
	} else {
		errno = EAFNOSUPPORT;
		return -1;
	}
	if ((fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (bind(fd, (struct sockaddr *)&ss, len) == -1) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	port = net_fd_port(fd);
	close(fd);
	return port;
}
