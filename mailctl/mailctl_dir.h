/* mailctl_dir.h — the directory commands of mailctl (mailctl_dir.c), over libldapauth:
 *
 *   auth test [-n COUNT] USER   reads the password from stdin (a prompt without echo on a
 *                               terminal), authenticates COUNT times (default 1)
 *   lookup [-n COUNT] ADDRESS   finds the user receiving mail for ADDRESS
 *
 * Each attempt prints one line: result, mode, time taken, whether the cache answered, then
 * the user record (with --json one object per line, numbers as numbers). Repeating (-n)
 * shows the cache at work within one process. */
#ifndef HERON_MAILCTL_DIR_H
#define HERON_MAILCTL_DIR_H

#include "ldapauth/ldapauth.h"

struct mc;

/* argv[0] is "auth" or "lookup". Each attempt is a result, printed (one line of JSON with
   --json) whatever it says; the return is that of the last: MC_OK, MC_REFUSED (wrong
   credentials), MC_NOUSER, MC_TEMPFAIL (the directory did not answer in time). Usage
   (MC_USAGE) and set-up (MC_CONFIG) failures print the refusal (the error object with
   --json) and no attempt. */
int mc_dir_main(struct mc *mc, int argc, char **argv);

/* Whether the directory of mc's config has a user of login name login (ldapauth_user, on a
   private event base): LDAPAUTH_OK with *login_r the directory's name for it (malloc'd),
   LDAPAUTH_ENOUSER, or LDAPAUTH_ETEMP (also: the directory cannot be set up). */
enum ldapauth_result mc_dir_user(struct mc *mc, const char *login, char **login_r);

#endif
