/* net.h — sockets over libevent: listeners from [section] listen lists, an accept wrapper with
 * a connection cap, a per-client-address counter, address text, async client connect, and a
 * free loopback port for tests.
 *
 * Every socket made here is non-blocking and close-on-exec. Listeners are bound by the master
 * before it forks (workers inherit them and all accept on the same sockets); with
 * reuseport the sockets also carry SO_REUSEPORT so a restarted daemon can bind while the old one
 * drains. Errors are 0/-1 with a malloc'd *error_r naming the address ("bind [::1]:25: Address
 * already in use"); free it. */
#ifndef HERON_NET_H
#define HERON_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "common/conf.h"

/* Long enough for "[v6 address]:65535" and "unix:" + a socket path. */
#define NET_ADDRSTRLEN 128

struct net_listen_opts {
	bool reuseport;   /* set SO_REUSEPORT on TCP sockets */
	int backlog;      /* listen() backlog; 0: 511 */
	mode_t unix_mode; /* mode of unix socket files; 0: 0666 */
};

/* A set of listening descriptors (one conf_addr may give two: "*" binds 0.0.0.0 and ::). */
struct net_fds {
	size_t n;
	int *fd;
	char **name; /* the bound address as text, for logs ("127.0.0.1:2525", "unix:/x") */
};

/* Binds and listens on every address of addrs and appends the descriptors to fds (which starts
   zeroed or from an earlier call). "*" or "" as host means every address: an IPv6 socket
   (IPV6_V6ONLY) and an IPv4 one; "[::1]" style hosts are IPv6; a port may be a number or a
   service name; port "0" picks a free port (see net_fd_port). Unix paths: a stale socket file
   is unlinked first (one that still answers is an error: another daemon owns it), the file gets
   o->unix_mode. o may be NULL (defaults). On error every descriptor this call opened is closed,
   fds holds what it held before, and -1 is returned with *error_r set. */
int net_listen(const struct conf_addrs *addrs, const struct net_listen_opts *o,
	       struct net_fds *fds, char **error_r);
/* Closes every descriptor (unlinks nothing) and frees the arrays; fds is zeroed. */
void net_fds_close(struct net_fds *fds);
/* The local port a TCP socket is bound to; -1 for other sockets. */
int net_fd_port(int fd);

/* The accept side: one evconnlistener per descriptor, a shared connection count and cap.
   By default, when the count reaches max_conns every listener is disabled (new clients wait in
   the kernel backlog, STYLE 7) and net_server_conn_done() re-enables them below the cap. With a
   refusal line (net_server_set_refusal) the listeners stay enabled instead: a client over the
   cap is accepted, sent the line without blocking and closed at once, never counted, never
   handed to the callback. A refusing server keeps one spare descriptor in reserve: when
   accept() runs out of descriptors, the spare is closed, one client is accepted and refused,
   and the spare is taken again. When even that fails (or without a refusal line), and when
   accept() runs out of memory, the listeners pause for a second instead of spinning: the
   fallback. Refusals are logged at most once a second. Accepted sockets are non-blocking and
   close-on-exec. */
struct net_server;
struct shmtable;
/* Called with a new connection, already counted; the callee owns fd and must call
   net_server_conn_done() exactly once when the connection ends (also when it refuses it at
   once). sa/salen: the peer address. */
typedef void net_accept_cb(struct net_server *srv, int fd, const struct sockaddr *sa,
			   socklen_t salen, void *arg);
/* The listeners use fds (not owned: the server never closes them). max_conns >= 1. */
struct net_server *net_server_new(struct event_base *base, const struct net_fds *fds,
				  size_t max_conns, net_accept_cb *cb, void *arg);
/* At the cap, refuse with line (a complete reply ending in CRLF, copied) instead of pausing;
   name says which server in the log ("smtp", "imap"). */
void net_server_set_refusal(struct net_server *srv, const char *name, const char *line);
/* The cap counts the connections of every process sharing t (its total count; several servers
   of one process may share it too), this one as worker. While the total is under the cap, a
   worker holding its share (max_conns / the workers of t, rounded up) disables its listeners
   and looks again every 100 ms, so that the kernel hands new clients to the others (it would
   wake an idle worker for every one); at the cap every worker listens, to refuse. Call after
   net_server_set_refusal and before the first connection. */
void net_server_share(struct net_server *srv, struct shmtable *t, unsigned worker);
/* A counted connection ended. */
void net_server_conn_done(struct net_server *srv);
/* Connections this server counted now (in this process). */
size_t net_server_nconns(const struct net_server *srv);
/* Connections refused over the cap so far (in this process). */
uint64_t net_server_nrefused(const struct net_server *srv);
/* Stops accepting for good (graceful drain): listeners are disabled and stay so; the count
   keeps working. */
void net_server_stop(struct net_server *srv);
/* Frees the listeners (not the descriptors) and sets *srvp = NULL; safe on NULL. */
void net_server_free(struct net_server **srvp);

/* Refuses a fresh connection: writes line (ending in CRLF) without blocking, best effort (a
   new socket's empty send buffer takes a short line whole), and closes fd. */
void net_refuse(int fd, const char *line);

/* Per-client-address connection counts (max_connections_per_ip). IPv4-mapped IPv6 addresses
   count as their IPv4 address; unix-socket peers are never limited or counted. Two kinds:
   net_ipcount_new: this process alone, a fixed-size open-addressing table, O(1) per operation,
   holding at most max_addrs distinct addresses (a new address is refused when it is full);
   net_ipcount_new_shared: the counts of every worker in t (entries of kind, e.g.
   SHM_ADDR_CONNS, keyed by the address text), so the limit holds across workers; an address
   that finds no room in t is admitted uncounted (the total cap still holds). */
struct net_ipcount;
struct net_ipcount *net_ipcount_new(size_t max_addrs);
struct net_ipcount *net_ipcount_new_shared(struct shmtable *t, unsigned worker, int kind);
void net_ipcount_free(struct net_ipcount **tp);
/* Counts one more connection from sa's address and returns true, or returns false (and counts
   nothing) when that address already has limit connections or the table is full. */
bool net_ipcount_inc(struct net_ipcount *t, const struct sockaddr *sa, uint32_t limit);
/* Uncounts a connection admitted by net_ipcount_inc (the same address). */
void net_ipcount_dec(struct net_ipcount *t, const struct sockaddr *sa);
/* The current count for sa's address (0 when absent). */
uint32_t net_ipcount_get(const struct net_ipcount *t, const struct sockaddr *sa);
/* Sizes a shared table for net_ipcount_new_shared: slots for max_conns distinct addresses
   with room to spare, keys of an address's text. */
#define NET_SHM_KEY_MAX 48
size_t net_shm_slots(size_t max_conns);

/* "127.0.0.1:2525", "[::1]:25", "unix:/run/x.sock" (or "unix" when unnamed); returns out.
   size >= NET_ADDRSTRLEN always suffices. */
const char *net_addr_str(const struct sockaddr *sa, socklen_t salen, char *out, size_t size);
/* The address alone, without port or brackets ("127.0.0.1", "::1"; "unix" for unix sockets),
   IPv4-mapped IPv6 shown as IPv4; for Received: headers and per-IP logs. Returns out. */
const char *net_addr_host(const struct sockaddr *sa, char *out, size_t size);

/* Async client connect to host:port. host may be numeric ("127.0.0.1", "::1", without
   brackets) or a name: names are resolved with dns when it is not NULL, and refused with an
   error when dns is NULL (the loop never blocks on a resolver). The whole attempt (resolving
   and connecting) is bounded by timeout_ms (> 0). */
struct net_connect;
/* On success bev is the connected socket bufferevent (BEV_OPT_CLOSE_ON_FREE |
   BEV_OPT_DEFER_CALLBACKS, no callbacks set, not enabled) and error is NULL; the callee owns bev. On failure bev is NULL and error says
   why ("connect 127.0.0.1:25: Connection refused", "... timed out"). Either way the
   net_connect handle is freed before the callback runs. */
typedef void net_connect_cb(struct bufferevent *bev, const char *error, void *arg);
/* Starts connecting; cb runs later from the loop, never from inside this call. */
struct net_connect *net_connect(struct event_base *base, struct evdns_base *dns, const char *host,
				const char *port, int timeout_ms, net_connect_cb *cb, void *arg);
/* Abandons a pending attempt: cb will not run. *cp = NULL; safe on NULL. */
void net_connect_cancel(struct net_connect **cp);

/* A TCP port free on 127.0.0.1 (family AF_INET) or ::1 (AF_INET6) at the time of the call, for
   tests; -1 with errno on failure. */
int net_free_port(int family);

#endif
