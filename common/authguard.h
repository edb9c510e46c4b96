/* authguard.h — the login throttle that mtad (AUTH) and imapd (LOGIN, AUTHENTICATE) share:
 * every password check, in any worker of either daemon, is counted in one table (a file both
 * map, common/shmtable.h) under three keys:
 *   - the pair (client address, user): the guesses of one client at one account;
 *   - the user, from any address: a guess spread over many addresses;
 *   - the client address, for any user: one client trying many accounts.
 * A check is counted as a failure of its pair and its user when it starts (so parallel
 * guesses see each other) and given back when it succeeds or fails for a temporary reason;
 * the address counts failures when they happen (many clients may share one address, and
 * their checks in flight are no sign of guessing). After failures a key spaces
 * the checks that follow: the next one may start only when the key's delay has passed since
 * the last one started, whichever session, worker or daemon it comes from, so that parallel
 * connections do not multiply the rate. A check that would have to wait longer than
 * AUTHGUARD_HOLD_MAX_MS is refused at once (a temporary failure, no check made). A success
 * forgets the failures of its pair only (never of the address or the user) and marks the
 * pair as known: a pair that logged in before is spaced by its own failures alone, so that
 * guesses against a user from elsewhere do not lock the user out of the usual client.
 *
 * Delays, after f failures of a key within AUTHGUARD_WINDOW_MS of its last one:
 *   pair     f >= 1:  500 ms doubled per failure, at most 8 s
 *   user     f >= 10: 500 ms doubled per failure past 9, at most 30 s
 *   address  f >= 20: 250 ms doubled per failure past 19, at most 8 s
 * User names are compared as the directory would match them, ignoring ASCII case and an
 * @domain part. Every delay and refusal is logged (one line, the session id first). */
#ifndef HERON_AUTHGUARD_H
#define HERON_AUTHGUARD_H

#include <stdbool.h>
#include <stdint.h>

struct conf;
struct shmtable;

#define AUTHGUARD_WINDOW_MS (15 * 60 * 1000)     /* failures forgotten this long after */
#define AUTHGUARD_KNOWN_MS (24 * 60 * 60 * 1000) /* a pair stays known this long */
#define AUTHGUARD_HOLD_MAX_MS (15 * 1000)

struct authguard;

/* A check in progress, between authguard_begin and its outcome. */
struct authguard_check {
	int64_t wait_ms;           /* hold the check this long before asking the directory */
	uint32_t pair, user, addr; /* failures counted before this check */
	bool known;                /* the pair logged in before */
	bool refused;              /* no check: answer a temporary failure */
	int64_t slot_ms;           /* when the check may start (the table's clock) */
};

/* Opens the table of c: [directory] login_throttle_file (empty: "login-throttle" in the
   [store] path) with login_throttle_slots entries. When the file cannot be used (another
   daemon made it as another user, say) the throttle is this process's alone, said in a
   warning. Never fails. */
struct authguard *authguard_open(const struct conf *c);
/* A throttle over a table the caller owns (tests, fuzzing): not freed by authguard_close. */
struct authguard *authguard_over(struct shmtable *t);
void authguard_close(struct authguard **gp);
/* Fuzzing only: checks are still counted, but none is held, refused or answered late, so
   that a session fuzzer runs without waiting on timers. Never in the daemons. */
void authguard_no_wait(struct authguard *g);

/* A password check of user from addr (the address without port) is about to start: fills
   *chk (wait, or refused). id and proto ("imap", "smtp") are for the log. */
void authguard_begin(struct authguard *g, uint64_t id, const char *proto, const char *addr,
		     const char *user, struct authguard_check *chk);
/* The outcome of a check that was not refused. authguard_failed returns how long to hold
   the failure's answer (until the next check of the pair could start). */
void authguard_ok(struct authguard *g, const char *addr, const char *user);
void authguard_temp(struct authguard *g, const char *addr, const char *user);
int64_t authguard_failed(struct authguard *g, const char *addr, const char *user);

#endif
