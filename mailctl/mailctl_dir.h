/* mailctl_dir.h — the directory commands of mailctl (mailctl_dir.c), over libldapauth:
 *
 *   auth test [-n COUNT] USER   reads the password from stdin (a prompt without echo on a
 *                               terminal), authenticates COUNT times (default 1)
 *   lookup [-n COUNT] ADDRESS   finds the user receiving mail for ADDRESS
 *
 * Each attempt prints one line: result, mode, time taken, whether the cache answered, then
 * the user record. Repeating (-n) shows the cache at work within one process. */
#ifndef HERON_MAILCTL_DIR_H
#define HERON_MAILCTL_DIR_H

struct conf;

/* argv[0] is "auth" or "lookup". Returns MC_OK, MC_REFUSED (wrong credentials or no such
   user), MC_TEMPFAIL (the directory did not answer in time: try again) or MC_ERR (bad
   arguments, set-up). */
int mc_dir_main(const struct conf *c, int argc, char **argv);

#endif
