/* daemon.h — what every Heron daemon shares: the command line (-c, -f, -t), loading the config
 * and starting the log, the pidfile, dropping privileges, and the master that forks, watches
 * and signals N workers, and the descriptor limit for a daemon's connections.
 *
 * Shape of a daemon's main():
 *
 *      daemon_args_parse(argc, argv, "mtad", &args);      -c PATH, -f, -t; exits on bad usage
 *      conf = daemon_conf_load(&args);                    -t: prints and exits here
 *      net_listen(conf_values(conf)->mtad.listen, ...)   bind while still root
 *      return daemon_run(&ops);                           the master; workers run ops.worker_main
 *
 * Started as root, the master binds the listeners and makes the pidfile, then gives up root for
 * ops.user before it forks a worker: no process of the daemon keeps root or any capability
 * afterwards, and none may gain one (NoNewPrivs). Without a user it refuses to start unless
 * ops.allow_root (then it warns that the workers keep root). Workers check again right after
 * fork, before they run any of the daemon's code (STYLE 11). Workers
 * inherit the listening descriptors; they build their own event base (and open LMDB, LDAP
 * connections...) in worker_main.
 *
 * Signals. Master: SIGTERM or SIGINT = graceful stop: forwarded to the workers, no restarts,
 * workers still alive after drain_ms + 5 s get SIGKILL; the pidfile is removed and daemon_run
 * returns. SIGHUP = ops.reload, log_reopen, then forwarded to the workers. SIGUSR1 = log_reopen
 * (for logrotate), forwarded to the workers, then ops.usr1. SIGCHLD = a worker
 * died: it is restarted after a backoff that doubles (100 ms up to 10 s) while workers keep
 * dying within 10 s of their start. All of these are libevent signal events in the master's
 * own loop. Worker: see daemon_worker_attach. A worker whose master dies gets SIGTERM.
 *
 * Service manager (notify.h; nothing without $NOTIFY_SOCKET): READY=1 once every worker has
 * called daemon_worker_attach, RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 on
 * SIGTERM. */
#ifndef HERON_DAEMON_H
#define HERON_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>

struct conf;

struct daemon_args {
	const char *ident;           /* program name for logs and messages ("mtad") */
	const char *conf_path;       /* -c; default /etc/heron/heron.conf */
	bool conf_given;             /* -c was on the command line */
	bool foreground;             /* -f: stay attached, log to stderr; also set by -F */
	bool supervised;             /* -F: stay attached (systemd), log as [log] says */
	bool test;                   /* -t: check the config, print it, exit */
	bool changed;                /* -n: print the keys that differ from the defaults, exit */
	const char *const *sections; /* set by the caller: the sections -n prints (NULL: all) */
	bool conf_optional;          /* set by the caller: without -c, a missing default file means
				  the built-in defaults (the command line says the rest) */
};

#ifndef HERON_SYSCONFDIR
#define HERON_SYSCONFDIR "/etc"
#endif
/* The configuration file when -c is not given: SYSCONFDIR/heron/heron.conf (meson's
   sysconfdir: /etc for prefix /usr, PREFIX/etc otherwise). */
#define DAEMON_CONF_DEFAULT HERON_SYSCONFDIR "/heron/heron.conf"

/* Parses -c PATH, -f, -F, -t, -n and -h from argv. Prints usage to stderr and exits 2 on anything
   else (-h: usage to stdout, exit 0). */
void daemon_args_parse(int argc, char **argv, const char *ident, struct daemon_args *a);

/* Loads a->conf_path. On error prints "ident: file:line: reason" to stderr (a file that
   cannot be opened: which one, and that -c names another) and exits 1. With a->test prints
   conf_dump() to stdout and exits 0; with a->changed, conf_dump_changed() of a->sections. Otherwise starts logging from [log] (target, file,
   level, facility; -f forces stderr) and returns the config (the caller owns it). */
struct conf *daemon_conf_load(const struct daemon_args *a);

/* SIGHUP: loads path again; NULL (logged "who: reload of PATH failed, the old config stays:
   REASON") when the file has an error. */
struct conf *daemon_conf_reload(const char *path, const char *who);

/* What a SIGHUP does with a changed key (daemon_conf_report). */
enum daemon_reload {
	DAEMON_RELOAD_APPLIED, /* applies from now on: logged with its new value */
	DAEMON_RELOAD_PARTLY,  /* its owner reloads what it can (the directory): logged */
	DAEMON_RELOAD_RESTART, /* waits for a restart: warned */
	DAEMON_RELOAD_LISTEN,  /* a listener: waits for a restart (bound at start): warned */
};

/* The rule for the sections the daemons share, one copy for their how(): [directory] is
   reloaded in part by its owner (PARTLY), [tls] applies at once (new certificates for new
   connections) but for ca (RESTART). true with *how_r for those sections, else false. */
bool daemon_reload_shared(const char *section, const char *key, enum daemon_reload *how_r);

/* Logs each key of sections (NULL-terminated) whose text differs between old and new, as
   how(section, key) says: "IDENT reload: [s] k = v", "... [s] k changed (the directory
   reloads what it can)" or the warning "... [s] k changed: it takes effect only when IDENT is
   restarted". */
void daemon_conf_report(const char *ident, const struct conf *old, const struct conf *new,
			const char *const *sections,
			enum daemon_reload (*how)(const char *section, const char *key));

/* Privilege drop: when running as root and user is not empty, switches to user (initgroups,
   setgid, setuid) and checks root cannot be regained; otherwise does nothing. -1 with
   *error_r (malloc'd) on an unknown user or a failed call. */
int daemon_drop_privileges(const char *user, char **error_r);

/* For an admin tool run as root on files a daemon's user owns (mailctl on the store): when
   running as root, switches to the owner (and its groups) of path, or of path's nearest
   existing parent, unless that owner is root; otherwise does nothing. Returns the uid now in
   force; -1 with *error_r (malloc'd) when the switch failed. */
long daemon_become_owner(const char *path, char **error_r);

/* Creates path holding our pid, locked (an open-file-description lock) while the returned
   descriptor (close-on-exec) stays open. Refuses (-1, *error_r "pidfile PATH: held by pid N")
   when a live process holds it; a stale file is taken over. A process that forks must close
   the descriptor in the child (daemon_run does). */
int daemon_pidfile_create(const char *path, char **error_r);
/* Unlinks path and closes fd (the master at exit). */
void daemon_pidfile_remove(const char *path, int fd);

/* Descriptors: a connection may hold DAEMON_NOFILE_PER_CONN (its socket, and a message or
   spool file it reads or writes), and a process needs DAEMON_NOFILE_MARGIN more (listeners,
   the store, the log, the directory, the spare descriptor of net.c). */
#define DAEMON_NOFILE_PER_CONN 2
#define DAEMON_NOFILE_MARGIN 64

/* The soft RLIMIT_NOFILE to set so that a process has need descriptors, given its soft and
   hard limits now: soft when it suffices, need when the hard limit allows it, else hard (the
   most there is; not enough). */
uint64_t daemon_nofile_target(uint64_t need, uint64_t soft, uint64_t hard);

/* At start (the master, before daemon_run: workers inherit it): makes RLIMIT_NOFILE's soft
   limit enough for max_conns connections in one process (any one worker may hold them all),
   raising it toward the hard limit; when even the hard limit is too low, log_warnx says so,
   naming ident's [section] max_connections. Returns the soft limit in force. */
uint64_t daemon_nofile_ensure(const char *ident, uint64_t max_conns);

struct daemon_worker;

struct daemon_ops {
	const char *ident;   /* for logs; also the config section the master names when it warns,
			       started as root with user empty, that workers keep root */
	unsigned workers;    /* >= 1 */
	const char *pidfile; /* NULL or "": none */
	const char *user;    /* the master (once started) and workers run as this user when
				started as root; NULL or "": stay root, only with allow_root */
	bool allow_root;     /* may keep root (user empty); else daemon_run refuses to start */
	int drain_ms;        /* how long a draining worker may finish its sessions; 0: 30 s */
	bool detach;         /* fork into the background and setsid first (not with -f) */
	/* Runs in each worker after fork and the privilege drop; builds an event base, calls
	   daemon_worker_attach, runs the loop and returns the worker's exit status (it may free
	   its base first). */
	int (*worker_main)(struct daemon_worker *w, void *arg);
	/* Master, on SIGHUP, before the signal is forwarded; NULL: nothing. Failures are the
	   callback's to log (the old config stays in force). */
	void (*reload)(void *arg);
	/* Master, on SIGUSR1, after every process reopened its log; NULL: nothing. */
	void (*usr1)(void *arg);
	void *arg;
};

/* Runs the master until it is told to stop; returns its exit status (0 after a clean stop, 1
   when it could not start: pidfile held, fork failed...). Never returns in a worker: the
   worker process exits with worker_main's status. */
int daemon_run(const struct daemon_ops *ops);

/* This worker's index, 0..workers-1 (a restarted worker keeps its slot's index). */
unsigned daemon_worker_index(const struct daemon_worker *w);
/* Hooks the worker's signals into its loop: SIGTERM -> the worker is draining: on_drain(arg)
   runs (stop accepting: net_server_stop; finish sessions; call event_base_loopexit when the
   last one ends) and after drain_ms the loop is made to exit anyway; a second SIGTERM exits
   at once. SIGHUP -> log_reopen and on_reload(arg). SIGUSR1 -> log_reopen. Either callback
   may be NULL. Until this is called SIGTERM, SIGHUP and SIGUSR1 stay blocked (pending) in the
   worker; calling it tells the master this worker serves (its listeners must be open). */
void daemon_worker_attach(struct daemon_worker *w, struct event_base *base,
			  void (*on_drain)(void *arg), void (*on_reload)(void *arg), void *arg);
/* Whether SIGTERM has arrived (sessions check it to close after their current command). */
bool daemon_worker_draining(const struct daemon_worker *w);

#endif
