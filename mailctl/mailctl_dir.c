/* mailctl_dir.c — owns `mailctl auth test` and `mailctl lookup`: runs the requests on a
 * private event base and prints what the library answered (see mailctl_dir.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/crypto.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/str.h"
#include "ldapauth/ldapauth.h"
#include "mailctl/mailctl.h"
#include "mailctl/mailctl_dir.h"


struct cli_run {
	struct event_base *base;
	enum ldapauth_result result;
	int64_t t0_ns;
	const char *mode;
	bool done, json;
};

static void print_user(const struct ldapauth_user *u)
{
	printf(" user=%s address=%s aliases=", u->login, u->address ? u->address : "-");
	for (size_t i = 0; i < u->naliases; i++)
		printf("%s%s", i ? "," : "", u->aliases[i]);
	printf("%s host=%s", u->naliases ? "" : "-", u->mailhost ? u->mailhost : "-");
	if (u->partition >= 0)
		printf(" partition=%d", u->partition);
	else
		printf(" partition=-");
	printf(" quota=%llu dn=%s", (unsigned long long)u->quota, u->dn ? u->dn : "-");
}

/* A JSON string member, null when s is NULL. */
static void json_member(const char *name, const char *s)
{
	printf(", \"%s\": ", name);
	if (s != NULL)
		mc_json_str(stdout, s, strlen(s));
	else
		fputs("null", stdout);
}

/* One attempt as one line of JSON: every member always there, null where the user record
   (only on success) has nothing. */
static void print_json(const struct cli_run *run, const struct ldapauth_reply *rep, double ms)
{
	const struct ldapauth_user *u = rep->user;
	const char *res = ldapauth_strerror(rep->result);

	fputs("{\"result\": ", stdout);
	mc_json_str(stdout, res, strlen(res));
	json_member("mode", run->mode);
	printf(", \"time_ms\": %.3f, \"cached\": %s, \"refused\": %s", ms,
	       rep->cached ? "true" : "false", rep->refused ? "true" : "false");
	json_member("reason", rep->reason ? rep->reason : "");
	json_member("user", u ? u->login : NULL);
	json_member("address", u ? u->address : NULL);
	fputs(", \"aliases\": [", stdout);
	for (size_t i = 0; u != NULL && i < u->naliases; i++) {
		fputs(i ? ", " : "", stdout);
		mc_json_str(stdout, u->aliases[i], strlen(u->aliases[i]));
	}
	fputs("]", stdout);
	json_member("host", u ? u->mailhost : NULL);
	if (u != NULL && u->partition >= 0)
		printf(", \"partition\": %d", u->partition);
	else
		fputs(", \"partition\": null", stdout);
	if (u != NULL)
		printf(", \"quota\": %llu", (unsigned long long)u->quota);
	else
		fputs(", \"quota\": null", stdout);
	json_member("dn", u ? u->dn : NULL);
	puts("}");
}

static void cli_cb(const struct ldapauth_reply *rep, void *arg)
{
	struct cli_run *run = arg;
	double ms = (double)(clock_mono_ns() - run->t0_ns) / 1e6;

	run->result = rep->result;
	run->done = true;
	if (run->json) {
		print_json(run, rep, ms);
		fflush(stdout);
		return;
	}
	printf("result=%s mode=%s time=%.3fms cached=%s", ldapauth_strerror(rep->result),
	       run->mode, ms, rep->cached ? "yes" : "no");
	if (rep->refused)
		printf(" refused=yes");
	printf(" reason=\"%s\"", rep->reason ? rep->reason : "");
	if (rep->user != NULL)
		print_user(rep->user);
	printf("\n");
	fflush(stdout);
}

/* Reads one line (the password) from stdin; without echo on a terminal. */
static int read_password(char *buf, size_t size)
{
	struct termios old, quiet;
	bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &old) == 0;
	size_t len;

	if (tty) {
		fputs("Password: ", stderr);
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
	}
	if (fgets(buf, (int)size, stdin) == NULL)
		buf[0] = '\0';
	if (tty) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fputs("\n", stderr);
	}
	len = strlen(buf);
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len > 0 && buf[len - 1] == '\r')
		buf[--len] = '\0';
	return 0;
}

static int usage(struct mc *mc, const char *why)
{
	mc_refuse(mc, MC_USAGE, "see `mailctl auth --help`", "%s", why);
	fprintf(stderr, "usage: mailctl auth test [-n COUNT] USER   (password on stdin)\n"
			"       mailctl lookup [-n COUNT] ADDRESS\n");
	return MC_USAGE;
}

int mc_dir_main(struct mc *mc, int argc, char **argv)
{
	bool is_auth;
	int i = 1, rc = 0;
	uint64_t count = 1;
	char password[1100] = "", *err = NULL;
	struct cli_run run = { .json = mc->json };
	struct ldapauth *la = NULL;

	is_auth = strcmp(argv[0], "auth") == 0;
	if (argc < 2 || (is_auth && strcmp(argv[i++], "test") != 0))
		return usage(mc, is_auth ? "unknown verb: auth takes test" : "missing argument");
	if (i + 1 < argc && strcmp(argv[i], "-n") == 0) {
		if (str_to_u64(argv[i + 1], strlen(argv[i + 1]), 1000000, &count) < 0 ||
		    count == 0)
			return usage(mc, "-n takes a count of 1 to 1000000");
		i += 2;
	}
	if (i + 1 != argc)
		return usage(mc, i + 1 < argc ? "too many arguments" : "missing argument");
	if (is_auth)
		read_password(password, sizeof(password));
	signal(SIGPIPE, SIG_IGN); /* a command-line program: see ldapauth.h */
	run.base = event_base_new();
	if (run.base == NULL || ldapauth_new(run.base, mc->conf, &la, &err) < 0) {
		rc = mc_refuse(mc, run.base ? MC_CONFIG : MC_ERR,
			       "check [directory] in heron.conf", "directory: %s",
			       err ? err : "no event base");
		free(err);
		if (run.base != NULL)
			event_base_free(run.base);
		return rc;
	}
	run.mode = ldapauth_mode(la);
	for (uint64_t k = 0; k < count; k++) {
		run.done = false;
		run.t0_ns = clock_mono_ns();
		if (is_auth)
			ldapauth_auth(la, argv[i], password, cli_cb, &run);
		else
			ldapauth_lookup(la, argv[i], cli_cb, &run);
		while (!run.done && event_base_loop(run.base, EVLOOP_ONCE) == 0)
			;
		rc = run.result == LDAPAUTH_OK        ? MC_OK
		     : run.result == LDAPAUTH_ETEMP   ? MC_TEMPFAIL
		     : run.result == LDAPAUTH_ENOUSER ? MC_NOUSER
						      : MC_REFUSED;
	}
	OPENSSL_cleanse(password, sizeof(password));
	ldapauth_free(&la);
	event_base_free(run.base);
	return rc;
}

/* mc_dir_user's request: its answer and the directory's name for the user. */
struct user_run {
	enum ldapauth_result result;
	char *login;
	bool done;
};

static void user_cb(const struct ldapauth_reply *r, void *arg)
{
	struct user_run *u = arg;

	u->result = r->result;
	if (r->result == LDAPAUTH_OK && r->user != NULL && r->user->login != NULL)
		u->login = strdup(r->user->login);
	u->done = true;
}

enum ldapauth_result mc_dir_user(struct mc *mc, const char *login, char **login_r)
{
	struct user_run u = { LDAPAUTH_ETEMP, NULL, false };
	struct event_base *base = event_base_new();
	struct ldapauth *la = NULL;
	char *err = NULL;

	*login_r = NULL;
	signal(SIGPIPE, SIG_IGN);
	if (base == NULL || ldapauth_new(base, mc->conf, &la, &err) < 0) {
		free(err);
		if (base != NULL)
			event_base_free(base);
		return LDAPAUTH_ETEMP;
	}
	ldapauth_user(la, login, user_cb, &u);
	while (!u.done && event_base_loop(base, EVLOOP_ONCE) == 0)
		;
	ldapauth_free(&la);
	event_base_free(base);
	if (u.result == LDAPAUTH_OK && u.login == NULL)
		u.result = LDAPAUTH_ETEMP; /* (out of memory) */
	*login_r = u.login;
	return u.result;
}
