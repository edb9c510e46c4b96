/* ldapauth_cli.h — the directory commands of mailctl (and heron-authtest):
 *
 *   auth test [-n COUNT] USER   reads the password from stdin (a prompt without echo on a
 *                               terminal), authenticates COUNT times (default 1)
 *   lookup [-n COUNT] ADDRESS   finds the user receiving mail for ADDRESS
 *
 * Each attempt prints one line: result, mode, time taken, whether the cache answered, then
 * the user record. Repeating (-n) shows the cache at work within one process. */
#ifndef HERON_LDAPAUTH_CLI_H
#define HERON_LDAPAUTH_CLI_H

struct conf;

/* argv[0] is "auth" or "lookup". Exit status: 0 ok, 1 wrong credentials or no such user,
   75 (EX_TEMPFAIL) temporary failure, 64 (EX_USAGE) bad arguments, 78 (EX_CONFIG) set-up. */
int ldapauth_cli_main(const struct conf *c, int argc, char **argv);

#endif
