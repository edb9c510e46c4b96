/* daemon.c — owns process life: command line, config load and -t, logging start, pidfile,
 * privilege drop, the descriptor limit (RLIMIT_NOFILE), the master that forks, restarts,
 * signals and reaps workers, and what the service manager is told (READY when every worker
 * is serving, RELOADING, STOPPING). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdnoreturn.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/notify.h"
#include "common/version.h"
#include "common/xmalloc.h"

#define DRAIN_MS_DEFAULT 30000
#define KILL_GRACE_MS 5000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000
#define HEALTHY_MS 10000 /* a worker that lived this long resets its slot's backoff */

struct conf *daemon_conf_reload(const char *path, const char *who)
{
	struct conf *c = NULL;
	char *err = NULL;

	if (conf_load(path, &c, &err) < 0) {
		log_warnx("%s: reload of %s failed, the old config stays: %s", who, path, err);
		free(err);
		return NULL;
	}
	return c;
}

static bool in_sections(const char *section, const char *const *sections)
{
	for (; *sections != NULL; sections++)
		if (strcmp(section, *sections) == 0)
			return true;
	return false;
}

bool daemon_reload_shared(const char *section, const char *key, enum daemon_reload *how_r)
{
	if (strcmp(section, "directory") == 0)
		*how_r = DAEMON_RELOAD_PARTLY;
	else if (strcmp(section, "tls") == 0)
		*how_r = strcmp(key, "ca") == 0 ? DAEMON_RELOAD_RESTART : DAEMON_RELOAD_APPLIED;
	else
		return false;
	return true;
}

void daemon_conf_report(const char *ident, const struct conf *old, const struct conf *new,
			const char *const *sections,
			enum daemon_reload (*how)(const char *section, const char *key))
{
	for (size_t i = 0; i < conf_nkeys; i++) {
		const struct conf_key *k = &conf_keys[i];
		const char *now = conf_text(new, k->section, k->name);

		if (!in_sections(k->section, sections) ||
		    strcmp(conf_text(old, k->section, k->name), now) == 0)
			continue;
		switch (how(k->section, k->name)) {
		case DAEMON_RELOAD_APPLIED:
			log_info("%s reload: [%s] %s = %s", ident, k->section, k->name, now);
			break;
		case DAEMON_RELOAD_PARTLY:
			log_info("%s reload: [%s] %s changed (the directory reloads what it can)",
				 ident, k->section, k->name);
			break;
		case DAEMON_RELOAD_RESTART:
		case DAEMON_RELOAD_LISTEN:
			log_warnx("%s reload: [%s] %s changed: it takes effect only when %s is "
				  "restarted%s",
				  ident, k->section, k->name, ident,
				  how(k->section, k->name) == DAEMON_RELOAD_LISTEN
					  ? " (listeners are bound at start)"
					  : "");
			break;
		}
	}
}

uint64_t daemon_nofile_target(uint64_t need, uint64_t soft, uint64_t hard)
{
	if (soft >= need)
		return soft;
	return hard >= need ? need : hard;
}

uint64_t daemon_nofile_ensure(const char *ident, uint64_t max_conns)
{
	uint64_t need = max_conns * DAEMON_NOFILE_PER_CONN + DAEMON_NOFILE_MARGIN;
	uint64_t soft, hard, target;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		log_warn("%s: getrlimit nofile", ident);
		return 0;
	}
	soft = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
	hard = rl.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_max;
	target = daemon_nofile_target(need, soft, hard);
	if (target != soft) {
		rl.rlim_cur = (rlim_t)target;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			log_warn("%s: setrlimit nofile %" PRIu64, ident, target);
			target = soft;
		} else {
			log_info("%s: descriptor limit raised from %" PRIu64 " to %" PRIu64, ident,
				 soft, target);
		}
	}
	if (target < need)
		log_warnx("%s: descriptor limit %" PRIu64 " (hard %" PRIu64
			  ") is below the %" PRIu64 " that [%s] max_connections = %" PRIu64
			  " needs; raise the hard limit "
			  "(ulimit -Hn, LimitNOFILE=) or lower max_connections",
			  ident, target, hard, need, ident, max_conns);
	return target;
}

static void master_spawn(unsigned i);
static void master_sigchld_cb(evutil_socket_t sig, short what, void *arg);
static void master_sigterm_cb(evutil_socket_t sig, short what, void *arg);
static void master_sighup_cb(evutil_socket_t sig, short what, void *arg);
static void master_sigusr1_cb(evutil_socket_t sig, short what, void *arg);
static void master_ready_cb(evutil_socket_t fd, short what, void *arg);
static void master_restart_cb(evutil_socket_t fd, short what, void *arg);
static void master_kill_cb(evutil_socket_t fd, short what, void *arg);

/* ---- command line and config ---- */

static void usage(FILE *f, const char *ident)
{
	fprintf(f,
		"usage: %s [-f | -F] [-t | -n] [-c config] | -V\n"
		"  -c PATH  configuration file (default " DAEMON_CONF_DEFAULT ")\n"
		"  -f       stay in the foreground and log to stderr\n"
		"  -F       stay in the foreground (under systemd), log as [log] says\n"
		"  -t       check the configuration, print the effective values and exit\n"
		"  -n       print only the keys that differ from the defaults and exit\n"
		"  -V       print the version and exit\n",
		ident);
}

void daemon_args_parse(int argc, char **argv, const char *ident, struct daemon_args *a)
{
	int ch;

	memset(a, 0, sizeof(*a));
	a->ident = ident;
	a->conf_path = DAEMON_CONF_DEFAULT;
	optind = 1;
	while ((ch = getopt(argc, argv, "c:fFtnhV")) != -1) {
		switch (ch) {
		case 'c':
			a->conf_path = optarg;
			a->conf_given = true;
			break;
		case 'f':
			a->foreground = true;
			break;
		case 'F':
			a->supervised = true;
			break;
		case 't':
			a->test = true;
			break;
		case 'n':
			a->changed = true;
			break;
		case 'h':
			usage(stdout, ident);
			exit(0);
		case 'V':
			printf("%s (Heron) %s (git %s)\n", ident, heron_version,
			       heron_git_revision);
			exit(0);
		default:
			usage(stderr, ident);
			exit(2);
		}
	}
	if (optind != argc) {
		usage(stderr, ident);
		exit(2);
	}
}

/* Prints why the config did not load; a file that cannot be opened is named, with -c. */
static noreturn void conf_load_fail(const struct daemon_args *a, char *error)
{
	fprintf(stderr, "%s: %s\n", a->ident, error);
	if (access(a->conf_path, R_OK) == -1 && !a->conf_given)
		fprintf(stderr,
			"%s: %s is the default configuration file; give another with "
			"-c PATH\n",
			a->ident, a->conf_path);
	else if (access(a->conf_path, R_OK) == -1)
		fprintf(stderr, "%s: %s was given with -c: check the path and its permissions\n",
			a->ident, a->conf_path);
	free(error);
	exit(1);
}

/* Starts the log from [log]: -f forces stderr; target = file needs the file now. */
static void log_start(const struct daemon_args *a, const struct conf *c)
{
	static const int facility[] = {
		[LOG_FACILITY_MAIL] = LOG_MAIL,     [LOG_FACILITY_DAEMON] = LOG_DAEMON,
		[LOG_FACILITY_USER] = LOG_USER,     [LOG_FACILITY_LOCAL0] = LOG_LOCAL0,
		[LOG_FACILITY_LOCAL1] = LOG_LOCAL1, [LOG_FACILITY_LOCAL2] = LOG_LOCAL2,
		[LOG_FACILITY_LOCAL3] = LOG_LOCAL3, [LOG_FACILITY_LOCAL4] = LOG_LOCAL4,
		[LOG_FACILITY_LOCAL5] = LOG_LOCAL5, [LOG_FACILITY_LOCAL6] = LOG_LOCAL6,
		[LOG_FACILITY_LOCAL7] = LOG_LOCAL7,
	};
	const struct log_conf *lc = &conf_values(c)->log;
	char *error = NULL;

	log_init(a->ident, a->foreground || lc->target == LOG_TARGET_STDERR,
		 facility[lc->facility]);
	if (!a->foreground && lc->target == LOG_TARGET_FILE &&
	    log_init_file(a->ident, lc->file, &error) == -1) {
		fprintf(stderr, "%s: %s ([log] file)\n", a->ident, error);
		exit(1);
	}
	log_set_level(lc->level);
}

struct conf *daemon_conf_load(const struct daemon_args *a)
{
	struct conf *c;
	char *error;

	signal(SIGUSR1, SIG_IGN); /* until the master's loop hooks it: never fatal */
	if (a->conf_optional && !a->conf_given && access(a->conf_path, F_OK) == -1 &&
	    errno == ENOENT)
		c = conf_defaults();
	else if (conf_load(a->conf_path, &c, &error) == -1)
		conf_load_fail(a, error);
	if (a->test || a->changed) {
		if (a->changed)
			conf_dump_changed(c, a->sections, stdout);
		else
			conf_dump(c, stdout);
		fflush(stdout);
		conf_free(&c);
		exit(0);
	}
	log_start(a, c);
	return c;
}

/* ---- privileges and pidfile ---- */

int daemon_drop_privileges(const char *user, char **error_r)
{
	struct passwd *pw;

	*error_r = NULL;
	if (user == NULL || user[0] == '\0' || geteuid() != 0)
		return 0;
	errno = 0;
	if ((pw = getpwnam(user)) == NULL) {
		*error_r = xasprintf("user %s: %s", user,
				     errno != 0 ? strerror(errno) : "unknown");
		return -1;
	}
	if (initgroups(pw->pw_name, pw->pw_gid) == -1 || setgid(pw->pw_gid) == -1 ||
	    setuid(pw->pw_uid) == -1) {
		*error_r = xasprintf("drop privileges to %s: %s", user, strerror(errno));
		return -1;
	}
	if (pw->pw_uid != 0 && (setuid(0) != -1 || seteuid(0) != -1)) {
		*error_r = xasprintf("regained root after dropping privileges to %s", user);
		return -1;
	}
	return 0;
}

/* The status of path or of its nearest existing parent ("/", or "." for a relative path). */
static int stat_nearest(const char *path, struct stat *st)
{
	char *dir = xstrdup(path), *slash;
	int rc;

	while ((rc = stat(dir, st)) == -1 && (slash = strrchr(dir, '/')) != NULL)
		slash[slash == dir] = '\0'; /* "/a" -> "/", "a/b" -> "a" */
	if (rc == -1 && strchr(path, '/') != path)
		rc = stat(".", st);
	free(dir);
	return rc;
}

long daemon_become_owner(const char *path, char **error_r)
{
	struct passwd *pw;
	struct stat st;

	*error_r = NULL;
	if (geteuid() != 0)
		return (long)geteuid();
	if (stat_nearest(path, &st) == -1 || st.st_uid == 0)
		return 0;
	pw = getpwuid(st.st_uid);
	if ((pw != NULL ? initgroups(pw->pw_name, pw->pw_gid) : setgroups(0, NULL)) == -1 ||
	    setgid(pw != NULL ? pw->pw_gid : st.st_gid) == -1 || setuid(st.st_uid) == -1 ||
	    setuid(0) != -1) {
		*error_r = xasprintf("switching to uid %ld, the owner of %s: %s", (long)st.st_uid,
				     path, strerror(errno));
		return -1;
	}
	return (long)st.st_uid;
}

/* Open-file-description locks: unlike process locks, closing some other descriptor of the
   file (a library reading it, say) does not release them. The holder's pid is the file's
   content, or 0 when the file is not locked. */
static pid_t pidfile_holder(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char text[32];
	ssize_t n;

	if (fcntl(fd, F_OFD_GETLK, &fl) == -1 || fl.l_type == F_UNLCK)
		return 0;
	n = pread(fd, text, sizeof(text) - 1, 0);
	text[n > 0 ? n : 0] = '\0';
	return atol(text) > 0 ? (pid_t)atol(text) : -1;
}

int daemon_pidfile_create(const char *path, char **error_r)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	char text[32];
	int n;

	*error_r = NULL;
	if (fd == -1) {
		*error_r = xasprintf("pidfile %s: %s", path, strerror(errno));
		return -1;
	}
	if (fcntl(fd, F_OFD_SETLK, &fl) == -1) {
		pid_t holder = pidfile_holder(fd);

		*error_r = holder != 0
				   ? xasprintf("pidfile %s: held by pid %ld", path, (long)holder)
				   : xasprintf("pidfile %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	n = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) == -1 || pwrite(fd, text, (size_t)n, 0) != n) {
		*error_r = xasprintf("pidfile %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

void daemon_pidfile_remove(const char *path, int fd)
{
	if (path != NULL && path[0] != '\0')
		(void)unlink(path);
	if (fd != -1)
		close(fd);
}

/* Refuses early, while stderr still shows it, when another process holds the pidfile. */
static int pidfile_precheck(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	pid_t holder;

	if (fd == -1)
		return 0;
	holder = pidfile_holder(fd);
	close(fd);
	if (holder != 0) {
		log_warnx("pidfile %s: held by pid %ld", path, (long)holder);
		return -1;
	}
	return 0;
}

static void detach(void)
{
	pid_t pid = fork();
	int fd;

	if (pid == -1)
		fatal("fork");
	if (pid > 0)
		_exit(0);
	if (setsid() == -1)
		fatal("setsid");
	if (chdir("/") == -1)
		fatal("chdir /");
	if ((fd = open("/dev/null", O_RDWR)) != -1) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
}

/* ---- worker side ---- */

struct daemon_worker {
	unsigned index;
	int ready_fd; /* the master's readiness pipe (write end), or -1 */
	int drain_ms;
	bool draining;
	struct event_base *base;
	struct event *ev_term, *ev_hup, *ev_usr1, *ev_drain;
	void (*on_drain)(void *arg);
	void (*on_reload)(void *arg);
	void *arg;
};

unsigned daemon_worker_index(const struct daemon_worker *w)
{
	return w->index;
}

bool daemon_worker_draining(const struct daemon_worker *w)
{
	return w->draining;
}

static void worker_drain_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon_worker *w = arg;

	log_info("worker %u drain timeout: closing remaining sessions", w->index);
	event_base_loopexit(w->base, NULL);
}

static void worker_sigterm_cb(evutil_socket_t sig, short what, void *arg)
{
	struct daemon_worker *w = arg;
	struct timeval tv = { w->drain_ms / 1000, (w->drain_ms % 1000) * 1000 };

	if (w->draining) {
		event_base_loopbreak(w->base);
		return;
	}
	w->draining = true;
	evtimer_add(w->ev_drain, &tv);
	if (w->on_drain != NULL)
		w->on_drain(w->arg);
}

static void worker_sighup_cb(evutil_socket_t sig, short what, void *arg)
{
	struct daemon_worker *w = arg;

	log_reopen();
	if (w->on_reload != NULL)
		w->on_reload(w->arg);
}

static void worker_sigusr1_cb(evutil_socket_t sig, short what, void *arg)
{
	log_reopen();
}

/* Tells the master this worker serves: the master counts them for READY. */
static void worker_tell_ready(const struct daemon_worker *w)
{
	uint32_t idx = w->index;

	if (w->ready_fd != -1 && write(w->ready_fd, &idx, sizeof(idx)) != sizeof(idx))
		log_warn("worker %u: telling the master it is ready", w->index);
}

void daemon_worker_attach(struct daemon_worker *w, struct event_base *base,
			  void (*on_drain)(void *arg), void (*on_reload)(void *arg), void *arg)
{
	sigset_t set;

	assert(w->base == NULL);
	w->base = base;
	w->on_drain = on_drain;
	w->on_reload = on_reload;
	w->arg = arg;
	w->ev_term = evsignal_new(base, SIGTERM, worker_sigterm_cb, w);
	w->ev_hup = evsignal_new(base, SIGHUP, worker_sighup_cb, w);
	w->ev_usr1 = evsignal_new(base, SIGUSR1, worker_sigusr1_cb, w);
	w->ev_drain = evtimer_new(base, worker_drain_timeout_cb, w);
	if (w->ev_term == NULL || w->ev_hup == NULL || w->ev_usr1 == NULL || w->ev_drain == NULL ||
	    evsignal_add(w->ev_term, NULL) == -1 || evsignal_add(w->ev_hup, NULL) == -1 ||
	    evsignal_add(w->ev_usr1, NULL) == -1)
		fatalx("worker %u: cannot install signal events", w->index);
	/* Signals that arrived since fork were held pending: they are delivered now. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	worker_tell_ready(w);
}

/* ---- master side ---- */

struct slot {
	pid_t pid;       /* 0: no worker */
	int64_t started; /* monotonic ms */
	int backoff_ms;
	struct event *restart;
};

#define MASTER_NSIGS 5

static struct master {
	const struct daemon_ops *ops;
	struct event_base *base;
	struct slot *slot;
	bool stopping;
	int pidfd;
	pid_t pid;
	int ready_pipe[2]; /* workers write their index once they serve */
	unsigned nready;   /* slots that have served at least once */
	bool *ready;       /* per slot */
	struct event *ev_sig[MASTER_NSIGS], *ev_kill, *ev_ready;
} m;

static void master_signal_block(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, old);
}

/* In the new worker: forget the master's loop, drop privileges, run worker_main, exit. */
static noreturn void worker_start(unsigned i)
{
	struct daemon_worker w = { .index = i, .ready_fd = m.ready_pipe[1] };
	const struct daemon_ops *ops = m.ops;
	sigset_t set;
	char *error;
	int rc;

	if (prctl(PR_SET_PDEATHSIG, SIGTERM) == -1 || getppid() != m.pid)
		_exit(1);
	/* The master's base is poll-based (no kernel state shared with the master), so freeing
	   it here only restores the default signal handlers and closes our copies. */
	event_base_free(m.base);
	m.base = NULL;
	if (m.pidfd != -1)
		close(m.pidfd);
	close(m.ready_pipe[0]);
	signal(SIGINT, SIG_IGN); /* ^C in the foreground goes to the master, which drains */
	if (daemon_drop_privileges(ops->user, &error) == -1)
		fatalx("worker %u: %s", i, error);
	/* TERM, HUP and USR1 stay blocked until daemon_worker_attach hooks them into the loop. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	w.drain_ms = ops->drain_ms > 0 ? ops->drain_ms : DRAIN_MS_DEFAULT;
	/* worker_main may have freed its base: the events attach made die with the process. */
	rc = ops->worker_main(&w, ops->arg);
	exit(rc);
}

static void master_spawn(unsigned i)
{
	struct slot *s = &m.slot[i];
	sigset_t old;
	pid_t pid;

	master_signal_block(&old);
	pid = fork();
	if (pid == 0)
		worker_start(i);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid == -1) {
		log_warn("%s: fork worker %u", m.ops->ident, i);
		s->backoff_ms = BACKOFF_MAX_MS;
		struct timeval tv = { BACKOFF_MAX_MS / 1000, 0 };
		evtimer_add(s->restart, &tv);
		return;
	}
	s->pid = pid;
	s->started = clock_mono_ms();
	log_info("%s: worker %u started pid=%ld", m.ops->ident, i, (long)pid);
}

static unsigned master_alive(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < m.ops->workers; i++)
		n += m.slot[i].pid != 0;
	return n;
}

static void master_signal_workers(int sig)
{
	for (unsigned i = 0; i < m.ops->workers; i++)
		if (m.slot[i].pid != 0)
			kill(m.slot[i].pid, sig);
}

/* Schedules a restart of slot i, later the faster it died. */
static void master_schedule_restart(unsigned i)
{
	struct slot *s = &m.slot[i];
	struct timeval tv;

	if (clock_mono_ms() - s->started >= HEALTHY_MS)
		s->backoff_ms = 0;
	else if (s->backoff_ms == 0)
		s->backoff_ms = BACKOFF_MIN_MS;
	else
		s->backoff_ms = s->backoff_ms * 2 < BACKOFF_MAX_MS ? s->backoff_ms * 2
								   : BACKOFF_MAX_MS;
	tv.tv_sec = s->backoff_ms / 1000;
	tv.tv_usec = (s->backoff_ms % 1000) * 1000;
	evtimer_add(s->restart, &tv);
}

static void master_restart_cb(evutil_socket_t fd, short what, void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;

	if (!m.stopping && m.slot[i].pid == 0)
		master_spawn(i);
}

static void master_sigchld_cb(evutil_socket_t sig, short what, void *arg)
{
	pid_t pid;
	int st;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		unsigned i;

		for (i = 0; i < m.ops->workers && m.slot[i].pid != pid; i++)
			;
		if (i == m.ops->workers)
			continue;
		m.slot[i].pid = 0;
		if (WIFSIGNALED(st))
			log_warnx("%s: worker %u pid=%ld killed by signal %d", m.ops->ident, i,
				  (long)pid, WTERMSIG(st));
		else if (!m.stopping || WEXITSTATUS(st) != 0)
			log_warnx("%s: worker %u pid=%ld exited status=%d", m.ops->ident, i,
				  (long)pid, WEXITSTATUS(st));
		if (!m.stopping)
			master_schedule_restart(i);
	}
	if (m.stopping && master_alive() == 0)
		event_base_loopexit(m.base, NULL);
}

static void master_sigterm_cb(evutil_socket_t sig, short what, void *arg)
{
	int kill_ms = (m.ops->drain_ms > 0 ? m.ops->drain_ms : DRAIN_MS_DEFAULT) + KILL_GRACE_MS;
	struct timeval tv = { kill_ms / 1000, (kill_ms % 1000) * 1000 };

	if (m.stopping)
		return;
	log_info("%s: signal %d: draining %u workers", m.ops->ident, (int)sig, master_alive());
	notify_send("STOPPING=1", "draining %u workers", master_alive());
	m.stopping = true;
	for (unsigned i = 0; i < m.ops->workers; i++)
		evtimer_del(m.slot[i].restart);
	master_signal_workers(SIGTERM);
	if (master_alive() == 0)
		event_base_loopexit(m.base, NULL);
	else
		evtimer_add(m.ev_kill, &tv);
}

static void master_kill_cb(evutil_socket_t fd, short what, void *arg)
{
	log_warnx("%s: %u workers still running after the drain: killing them", m.ops->ident,
		  master_alive());
	master_signal_workers(SIGKILL);
}

static void master_sighup_cb(evutil_socket_t sig, short what, void *arg)
{
	log_info("%s: SIGHUP: reloading", m.ops->ident);
	notify_send("RELOADING=1", "reloading the configuration");
	if (m.ops->reload != NULL)
		m.ops->reload(m.ops->arg);
	log_reopen();
	master_signal_workers(SIGHUP);
	notify_send("READY=1", "%u workers serving; configuration reloaded", master_alive());
}

/* SIGUSR1: every process reopens its log (logrotate moved the file); then ops.usr1. */
static void master_sigusr1_cb(evutil_socket_t sig, short what, void *arg)
{
	log_reopen();
	master_signal_workers(SIGUSR1);
	log_info("%s: SIGUSR1: log reopened", m.ops->ident);
	if (m.ops->usr1 != NULL)
		m.ops->usr1(m.ops->arg);
}

/* A worker serves: once each slot did, the daemon is ready (READY=1 for systemd). */
static void master_ready_cb(evutil_socket_t fd, short what, void *arg)
{
	uint32_t idx[64];
	ssize_t n = read(fd, idx, sizeof(idx));

	for (ssize_t k = 0; k < n / (ssize_t)sizeof(idx[0]); k++) {
		if (idx[k] >= m.ops->workers || m.ready[idx[k]])
			continue;
		m.ready[idx[k]] = true;
		if (++m.nready == m.ops->workers && !m.stopping) {
			log_info("%s: all %u workers ready", m.ops->ident, m.ops->workers);
			notify_send("READY=1", "%u workers serving", m.ops->workers);
		}
	}
}

/* The master's loop: poll-based, so a forked worker can free its copy safely. */
static struct event_base *master_base_new(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base;

	if (cfg == NULL)
		fatalx("event_config_new failed");
	event_config_avoid_method(cfg, "epoll");
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (base == NULL)
		fatalx("event_base_new failed");
	return base;
}

static void master_events(void)
{
	static const struct {
		int sig;
		event_callback_fn fn;
	} sigs[MASTER_NSIGS] = {
		{ SIGTERM, master_sigterm_cb }, { SIGINT, master_sigterm_cb },
		{ SIGHUP, master_sighup_cb },   { SIGUSR1, master_sigusr1_cb },
		{ SIGCHLD, master_sigchld_cb },
	};

	for (unsigned k = 0; k < MASTER_NSIGS; k++) {
		m.ev_sig[k] = evsignal_new(m.base, sigs[k].sig, sigs[k].fn, NULL);
		if (m.ev_sig[k] == NULL || evsignal_add(m.ev_sig[k], NULL) == -1)
			fatalx("cannot install the master's signal events");
	}
	if (pipe2(m.ready_pipe, O_CLOEXEC | O_NONBLOCK) == -1)
		fatal("pipe");
	m.ev_ready = event_new(m.base, m.ready_pipe[0], EV_READ | EV_PERSIST, master_ready_cb,
			       NULL);
	if (m.ev_ready == NULL || event_add(m.ev_ready, NULL) == -1)
		fatalx("cannot watch the workers' readiness");
	m.ready = xcalloc(m.ops->workers, sizeof(*m.ready));
	m.ev_kill = evtimer_new(m.base, master_kill_cb, NULL);
	for (unsigned i = 0; i < m.ops->workers; i++)
		m.slot[i].restart = evtimer_new(m.base, master_restart_cb, (void *)(uintptr_t)i);
}

/* Started as root: the listeners are bound and the pidfile made; the master gives up root
   now (its workers are forked unprivileged), or keeps it only when allowed. No process of
   the daemon can gain privileges from here on (setuid binaries, file capabilities). */
static int master_privileges(const struct daemon_ops *ops)
{
	char *error = NULL;

	if (geteuid() == 0) {
		if (ops->user == NULL || ops->user[0] == '\0') {
			if (!ops->allow_root) {
				log_warnx(
					"%s: refusing to run as root: set [%s] user (the package's "
					"is heron) or [%s] allow_root = yes",
					ops->ident, ops->ident, ops->ident);
				return -1;
			}
			log_warnx("%s: workers keep root: set [%s] user", ops->ident, ops->ident);
		} else if (daemon_drop_privileges(ops->user, &error) == -1) {
			log_warnx("%s: %s (set [%s] user to an existing user)", ops->ident, error,
				  ops->ident);
			free(error);
			return -1;
		} else {
			log_info("%s: running as %s", ops->ident, ops->user);
		}
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		log_warn("%s: PR_SET_NO_NEW_PRIVS", ops->ident);
	return 0;
}

int daemon_run(const struct daemon_ops *ops)
{
	bool pidfile = ops->pidfile != NULL && ops->pidfile[0] != '\0';
	char *error;

	assert(ops->workers >= 1 && ops->worker_main != NULL);
	memset(&m, 0, sizeof(m));
	m.ops = ops;
	m.pidfd = -1;
	if (pidfile && pidfile_precheck(ops->pidfile) == -1)
		return 1;
	if (ops->detach)
		detach();
	if (pidfile && (m.pidfd = daemon_pidfile_create(ops->pidfile, &error)) == -1) {
		log_warnx("%s", error);
		free(error);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	m.pid = getpid();
	m.base = master_base_new();
	m.slot = xcalloc(ops->workers, sizeof(*m.slot));
	master_events();
	log_info("%s: master pid=%ld starting %u workers", ops->ident, (long)m.pid, ops->workers);
	if (master_privileges(ops) == -1) {
		if (pidfile)
			daemon_pidfile_remove(ops->pidfile, m.pidfd);
		return 1;
	}
	for (unsigned i = 0; i < ops->workers; i++)
		master_spawn(i);
	event_base_dispatch(m.base);

	for (unsigned k = 0; k < MASTER_NSIGS; k++)
		event_free(m.ev_sig[k]);
	event_free(m.ev_kill);
	event_free(m.ev_ready);
	close(m.ready_pipe[0]);
	close(m.ready_pipe[1]);
	free(m.ready);
	for (unsigned i = 0; i < ops->workers; i++)
		event_free(m.slot[i].restart);
	free(m.slot);
	event_base_free(m.base);
	if (pidfile)
		daemon_pidfile_remove(ops->pidfile, m.pidfd);
	log_info("%s: master stopped", ops->ident);
	memset(&m, 0, sizeof(m));
	return 0;
}
