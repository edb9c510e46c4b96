/* test_daemon.c — the command line, -t, the pidfile, privilege drop, and a toy master with two
 * workers in a forked process: a killed worker is replaced, SIGHUP reaches master and workers,
 * SIGTERM drains (one worker ignores the drain and is ended by the drain timeout), everything
 * is gone and the pidfile removed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "common/conf.h"
#include "common/daemon.h"
#include "common/log.h"

static char dir[] = "/tmp/heron-test-daemon-XXXXXX";

static char *path_in(const char *name)
{
	static char p[4][256];
	static int k;

	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	return p[k];
}

static void write_file(const char *path, const char *text)
{
	char tmp[300];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (f == NULL)
		abort();
	fputs(text, f);
	fclose(f);
	rename(tmp, path);
}

/* The file's content (up to 4k), or NULL when it does not exist. */
static char *read_file(const char *path)
{
	static char buf[4][4096];
	static int k;
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL)
		return NULL;
	k = (k + 1) % 4;
	n = fread(buf[k], 1, sizeof(buf[k]) - 1, f);
	buf[k][n] = '\0';
	fclose(f);
	return buf[k];
}

static long read_pid(const char *path)
{
	const char *t = read_file(path);

	return t != NULL ? strtol(t, NULL, 10) : 0;
}

/* Polls cond every 10 ms for up to 15 s (a bound, not a timing assertion). */
static bool wait_for(bool (*cond)(void *), void *arg)
{
	for (int i = 0; i < 1500; i++) {
		if (cond(arg))
			return true;
		usleep(10000);
	}
	return cond(arg);
}

/* Runs fn in a child with stdout and stderr captured; returns the exit status. */
static int run_captured(void (*fn)(void *), void *arg, char *out, size_t outsize)
{
	FILE *tmp = tmpfile();
	pid_t pid;
	int st;
	size_t n;

	assert_non_null(tmp);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fileno(tmp), 1);
		dup2(fileno(tmp), 2);
		fn(arg);
		_exit(99); /* fn was expected to exit */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	rewind(tmp);
	n = fread(out, 1, outsize - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* ---- command line and -t ---- */

/* argv strings are not const in C; getopt only reorders the pointers. */
static char *S(const char *s)
{
	return (char *)(uintptr_t)s;
}

static void test_args(void **state)
{
	char *argv[] = { S("mtad"), S("-f"), S("-c"), S("/etc/x.conf"), NULL };
	char *argv2[] = { S("imapd"), NULL };
	struct daemon_args a;

	daemon_args_parse(4, argv, "mtad", &a);
	assert_string_equal(a.conf_path, "/etc/x.conf");
	assert_true(a.foreground);
	assert_false(a.test);
	assert_string_equal(a.ident, "mtad");
	daemon_args_parse(1, argv2, "imapd", &a);
	assert_string_equal(a.conf_path, DAEMON_CONF_DEFAULT);
	assert_false(a.foreground);
}

static void run_args(void *arg)
{
	char **argv = arg;
	int argc = 0;
	struct daemon_args a;

	while (argv[argc] != NULL)
		argc++;
	daemon_args_parse(argc, argv, "mtad", &a);
	daemon_conf_load(&a);
	_exit(42); /* loaded without -t */
}

static void test_check_config(void **state)
{
	char out[65536];
	char *good = path_in("good.conf"), *bad = path_in("bad.conf");
	char *argv_good[] = { S("mtad"), S("-t"), S("-c"), good, NULL };
	char *argv_bad[] = { S("mtad"), S("-t"), S("-c"), bad, NULL };
	char *argv_usage[] = { S("mtad"), S("-x"), NULL };
	char *argv_run[] = { S("mtad"), S("-f"), S("-c"), good, NULL };
	char *argv_changed[] = { S("mtad"), S("-n"), S("-c"), good, NULL };
	char want[300];

	write_file(good, "[mtad]\nworkers = 7\n");
	write_file(bad, "[mtad]\nworkers = 3\nno_such_key = 1\n");
	assert_int_equal(run_captured(run_args, argv_good, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "[mtad]"));
	assert_non_null(strstr(out, "workers = 7"));
	assert_non_null(strstr(out, good)); /* the origin of the value */

	/* -n: only what differs from the defaults, as heron.conf text */
	assert_int_equal(run_captured(run_args, argv_changed, out, sizeof(out)), 0);
	if (strcmp(out, "[mtad]\nworkers = 7\n") != 0)
		fail_msg("-n printed \"%s\"", out);

	assert_int_equal(run_captured(run_args, argv_bad, out, sizeof(out)), 1);
	snprintf(want, sizeof(want), "mtad: %s:3", bad);
	if (strstr(out, want) == NULL)
		fail_msg("no \"%s\" in \"%s\"", want, out);

	assert_int_equal(run_captured(run_args, argv_usage, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "usage: mtad"));

	assert_int_equal(run_captured(run_args, argv_run, out, sizeof(out)), 42);
	unlink(good);
	unlink(bad);
}

/* ---- pidfile and privileges ---- */

static void test_pidfile(void **state)
{
	char *path = path_in("own.pid"), *error = NULL;
	int fd = daemon_pidfile_create(path, &error);
	pid_t pid;
	int st;

	assert_true(fd >= 0);
	assert_int_equal(read_pid(path), getpid());
	/* Another process is refused while we hold it. */
	pid = fork();
	if (pid == 0) {
		int fd2 = daemon_pidfile_create(path, &error);

		if (fd2 == -1)
			fprintf(stderr, "child: %s\n", error);
		_exit(fd2 == -1 && strstr(error, "held by pid") != NULL ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	daemon_pidfile_remove(path, fd);
	assert_int_equal(access(path, F_OK), -1);

	/* A stale file (no live holder) is taken over. */
	write_file(path, "999999\n");
	fd = daemon_pidfile_create(path, &error);
	assert_true(fd >= 0);
	assert_int_equal(read_pid(path), getpid());
	daemon_pidfile_remove(path, fd);
}

static void test_drop_privileges(void **state)
{
	char *error = NULL;
	pid_t pid;
	int st;

	/* Empty user: nothing to do. */
	assert_int_equal(daemon_drop_privileges("", &error), 0);
	if (geteuid() != 0) {
		/* Not root: stays as is, even with a user configured. */
		assert_int_equal(daemon_drop_privileges("nobody", &error), 0);
		skip();
	}
	/* Root (CI): drop to nobody in a child and check root cannot come back. */
	pid = fork();
	if (pid == 0) {
		struct passwd *pw = getpwnam("nobody");

		if (pw == NULL || daemon_drop_privileges("nobody", &error) != 0)
			_exit(1);
		_exit(getuid() == pw->pw_uid && geteuid() == pw->pw_uid &&
				      getgid() == pw->pw_gid && setuid(0) == -1
			      ? 0
			      : 2);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(daemon_drop_privileges("no-such-user-heron", &error), -1);
	assert_non_null(strstr(error, "no-such-user-heron"));
	free(error);
}

/* ---- the toy master ---- */

struct toy_worker {
	struct daemon_worker *w;
	struct event_base *base;
};

static void toy_drain(void *arg)
{
	struct toy_worker *t = arg;

	write_file(path_in(daemon_worker_index(t->w) == 0 ? "drain0" : "drain1"), "1");
	assert_true(daemon_worker_draining(t->w));
	/* Worker 0 has no sessions and leaves; worker 1 "has a session that never ends" and is
	   ended by the drain timeout. */
	if (daemon_worker_index(t->w) == 0)
		event_base_loopexit(t->base, NULL);
}

static void toy_reload(void *arg)
{
	struct toy_worker *t = arg;

	write_file(path_in(daemon_worker_index(t->w) == 0 ? "hup0" : "hup1"), "1");
}

static int toy_worker_main(struct daemon_worker *w, void *arg)
{
	struct toy_worker t = { w, event_base_new() };
	char pid[32];

	daemon_worker_attach(w, t.base, toy_drain, toy_reload, &t);
	snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	write_file(path_in(daemon_worker_index(w) == 0 ? "w0.pid" : "w1.pid"), pid);
	event_base_dispatch(t.base);
	event_base_free(t.base);
	return 0;
}

static void toy_master_reload(void *arg)
{
	write_file(path_in("hup.master"), "1");
}

static bool exists(const char *name)
{
	return access(path_in(name), F_OK) == 0;
}

static bool workers_up(void *arg)
{
	return read_pid(path_in("w0.pid")) > 0 && read_pid(path_in("w1.pid")) > 0 &&
	       exists("master.pid");
}

static bool w0_replaced(void *old)
{
	long now = read_pid(path_in("w0.pid"));

	return now > 0 && now != *(long *)old && kill((pid_t)now, 0) == 0;
}

static bool all_hupped(void *arg)
{
	return exists("hup.master") && exists("hup0") && exists("hup1");
}

static bool master_exited(void *arg)
{
	int *st = arg;
	pid_t pid = (pid_t)st[1];

	return waitpid(pid, st, WNOHANG) == pid;
}

static void test_master_workers(void **state)
{
	char pidfile[300];
	struct daemon_ops ops = {
		.ident = "toy",
		.workers = 2,
		.pidfile = pidfile,
		.drain_ms = 300,
		.worker_main = toy_worker_main,
		.reload = toy_master_reload,
		.allow_root = true, /* tests run as root in CI */
	};
	char *error = NULL;
	long w0, w1;
	int st[2];
	pid_t master;

	snprintf(pidfile, sizeof(pidfile), "%s", path_in("master.pid"));
	fflush(stdout);
	fflush(stderr);
	master = fork();
	assert_true(master >= 0);
	if (master == 0)
		_exit(daemon_run(&ops));
	st[1] = master;
	if (!wait_for(workers_up, NULL)) {
		kill(master, SIGKILL);
		fail_msg("workers did not start");
	}
	assert_int_equal(read_pid(ops.pidfile), master);
	/* A second master is refused while the first holds the pidfile. */
	assert_int_equal(daemon_pidfile_create(ops.pidfile, &error), -1);
	assert_non_null(strstr(error, "held by pid"));
	free(error);

	/* kill -9 a worker: a new one takes its slot. */
	w0 = read_pid(path_in("w0.pid"));
	w1 = read_pid(path_in("w1.pid"));
	assert_int_equal(kill((pid_t)w0, SIGKILL), 0);
	assert_true(wait_for(w0_replaced, &w0));
	w0 = read_pid(path_in("w0.pid"));

	/* SIGHUP: the master's reload callback, then both workers'. */
	assert_int_equal(kill(master, SIGHUP), 0);
	assert_true(wait_for(all_hupped, NULL));

	/* SIGTERM: both drain, all exit, pidfile gone. */
	assert_int_equal(kill(master, SIGTERM), 0);
	if (!wait_for(master_exited, st)) {
		kill(master, SIGKILL);
		fail_msg("master did not exit after SIGTERM");
	}
	assert_true(WIFEXITED(st[0]));
	assert_int_equal(WEXITSTATUS(st[0]), 0);
	assert_int_equal(access(ops.pidfile, F_OK), -1);
	assert_true(exists("drain0"));
	assert_true(exists("drain1"));
	assert_int_equal(kill((pid_t)w0, 0), -1);
	assert_int_equal(errno, ESRCH);
	assert_int_equal(kill((pid_t)w1, 0), -1);
	assert_int_equal(errno, ESRCH);
}

static int setup(void **state)
{
	if (mkdtemp(dir) == NULL)
		return -1;
	log_init("test_daemon", true, 0);
	log_set_level(LOG_LVL_WARN);
	return 0;
}

static int teardown(void **state)
{
	static const char *names[] = { "w0.pid", "w1.pid", "hup0",    "hup1",      "hup.master",
				       "drain0", "drain1", "own.pid", "master.pid" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(path_in(names[i]));
	rmdir(dir);
	return 0;
}

/* ---- descriptor limit ---- */

static void test_nofile_target(void **state)
{
	(void)state;
	/* enough already: left alone (never lowered) */
	assert_int_equal(daemon_nofile_target(1000, 1024, 4096), 1024);
	assert_int_equal(daemon_nofile_target(1024, 1024, 1024), 1024);
	assert_int_equal(daemon_nofile_target(1000, UINT64_MAX, UINT64_MAX), UINT64_MAX);
	/* the hard limit allows it: raised to what is needed, not further */
	assert_int_equal(daemon_nofile_target(2000, 1024, 4096), 2000);
	assert_int_equal(daemon_nofile_target(4096, 1024, 4096), 4096);
	assert_int_equal(daemon_nofile_target(2000, 1024, UINT64_MAX), 2000);
	/* it does not: as far as it goes */
	assert_int_equal(daemon_nofile_target(5000, 1024, 4096), 4096);
}

/* In a child (the limits it sets stay there): 0 when ensure raised a low soft limit to what
   max_conns needs, and stopped at a hard limit too low for more. */
static int nofile_child(void)
{
	uint64_t want = 100 * DAEMON_NOFILE_PER_CONN + DAEMON_NOFILE_MARGIN;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_max < want + 10)
		return 0; /* nothing to show under so low a hard limit */
	rl.rlim_cur = want - 10;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 10;
	if (daemon_nofile_ensure("test", 100) != want)
		return 11;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur != want)
		return 12;
	rl.rlim_cur = rl.rlim_max = want - 5;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 13;
	if (daemon_nofile_ensure("test", 100) != want - 5)
		return 14;
	return getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == want - 5 ? 0 : 15;
}

static void test_nofile_ensure(void **state)
{
	pid_t pid;
	int st;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(nofile_child());
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* The shared sections' reload rule: [directory] in part, [tls] at once but ca; any other
   section is the daemon's own to judge. */
static void test_reload_shared(void **state)
{
	enum daemon_reload how = DAEMON_RELOAD_LISTEN;

	assert_true(daemon_reload_shared("directory", "uri", &how));
	assert_int_equal(how, DAEMON_RELOAD_PARTLY);
	assert_true(daemon_reload_shared("tls", "cert", &how));
	assert_int_equal(how, DAEMON_RELOAD_APPLIED);
	assert_true(daemon_reload_shared("tls", "ca", &how));
	assert_int_equal(how, DAEMON_RELOAD_RESTART);
	how = DAEMON_RELOAD_LISTEN;
	assert_false(daemon_reload_shared("imapd", "ca", &how));
	assert_false(daemon_reload_shared("store", "path", &how));
	assert_int_equal(how, DAEMON_RELOAD_LISTEN); /* untouched */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_args),           cmocka_unit_test(test_check_config),
		cmocka_unit_test(test_pidfile),        cmocka_unit_test(test_drop_privileges),
		cmocka_unit_test(test_master_workers), cmocka_unit_test(test_nofile_target),
		cmocka_unit_test(test_nofile_ensure),  cmocka_unit_test(test_reload_shared),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
