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
	bool done;
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

static void cli_cb(const struct ldapauth_reply *rep, void *arg)
{
	struct cli_run *run = arg;
	double ms = (double)(clock_mono_ns() - run->t0_ns) / 1e6;

	run->result = rep->result;
	run->done = true;
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

static int usage(void)
{
	fprintf(stderr, "usage: auth test [-n COUNT] USER   (password on stdin)\n"
			"       lookup [-n COUNT] ADDRESS\n");
	return MC_USAGE;
}

int mc_dir_main(const struct conf *c, int argc, char **argv)
{
	bool is_auth;
	int i = 1, rc = 0;
	uint64_t count = 1;
	char password[1100] = "", *err = NULL;
	struct cli_run run = { 0 };
	struct ldapauth *la = NULL;

	if (argc < 2)
		return usage();
	is_auth = strcmp(argv[0], "auth") == 0;
	if (is_auth && strcmp(argv[i++], "test") != 0)
		return usage();
	else if (!is_auth && strcmp(argv[0], "lookup") != 0)
		return usage();
	if (i + 1 < argc && strcmp(argv[i], "-n") == 0) {
		if (str_to_u64(argv[i + 1], strlen(argv[i + 1]), 1000000, &count) < 0 ||
		    count == 0)
			return usage();
		i += 2;
	}
	if (i + 1 != argc)
		return usage();
	if (is_auth)
		read_password(password, sizeof(password));
	signal(SIGPIPE, SIG_IGN); /* a command-line program: see ldapauth.h */
	run.base = event_base_new();
	if (run.base == NULL || ldapauth_new(run.base, c, &la, &err) < 0) {
		fprintf(stderr, "directory: %s\n", err ? err : "no event base");
		free(err);
		if (run.base != NULL)
			event_base_free(run.base);
		return MC_CONFIG;
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
