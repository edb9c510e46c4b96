/* shmtable.h — a bounded table every worker of one daemon sees: a region mapped MAP_SHARED by
 * the master before it forks (or a file that several daemons map: shmtable_open), guarded by
 * one robust process-shared mutex held for a few stores. Entries are (kind, key) pairs, a key being a short string (a client address, a
 * relay destination). Each entry holds
 *   - a count per worker (connections open: take/put), so a limit holds for the whole daemon
 *     and a worker that died (kill -9) cannot leave counts behind: its restart clears its
 *     column (shmtable_worker_reset);
 *   - a failure count with the time of the last failure (fail/fail_clear), forgotten
 *     forget_ms after that failure;
 *   - a record (struct shmtable_rec) its user reads and changes under the lock
 *     (shmtable_with): a failure count and three times. An entry whose latest time is
 *     forget_ms old and that holds no count is free again.
 * Besides the entries, one total count per worker (total_take/put): every connection of the
 * daemon, for its max_connections.
 *
 * Bounded: nslots entries; a key lives in a window of SHMTABLE_PROBE slots from its hash (the
 * hash is seeded at creation, so a client cannot aim at one window). An entry with counts is
 * never evicted; a failure record may be, oldest first, when its window is full. When no slot
 * of the window can be taken, take admits (true) and logs: the total cap still holds.
 *
 * Functions never fail after shmtable_new; a bad worker index or kind is a bug (assert). */
#ifndef HERON_SHMTABLE_H
#define HERON_SHMTABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHMTABLE_WORKERS_MAX 256 /* the most workers a daemon runs ([*] workers) */
#define SHMTABLE_PROBE 32

/* The kinds of entry, one list for every user so that two never collide in one table. */
enum shmtable_kind {
	SHM_ADDR_CONNS = 1, /* connections open per client address (net.c) */
	SHM_AUTH_FAILS,     /* unused (failed logins are authguard.c's SHM_LOGIN_*) */
	SHM_RELAY_DEST,     /* relay connections per destination "host:port" (mtad) */
	SHM_USER_SESSIONS,  /* authenticated sessions per user (imapd) */
	SHM_ADDR_UNAUTH,    /* sessions not authenticated yet per client address (net.c) */
	SHM_LOGIN_PAIR,     /* login attempts per (client address, user) (authguard.c) */
	SHM_LOGIN_USER,     /* login attempts per user, from any address (authguard.c) */
	SHM_LOGIN_ADDR,     /* login attempts per client address, for any user (authguard.c) */
};

/* What shmtable_with lets its callback see and change of one entry. Times are the table's
   clock, CLOCK_MONOTONIC ms (a file-backed table made before the last boot is made anew);
   0: never. */
struct shmtable_rec {
	uint32_t fails;
	int64_t last_ms; /* the last failure */
	int64_t next_ms; /* the user's: the earliest time of something to come */
	int64_t ok_ms;   /* the user's: the last success */
};

struct shmtable;

/* Maps a table of nslots entries (rounded up to a power of two, at least SHMTABLE_PROBE) for
   workers (1..SHMTABLE_WORKERS_MAX) worker columns, keys of up to key_max - 1 bytes (longer
   keys are cut), failures forgotten forget_ms after the last one. Dies when mmap fails (it
   runs at start). */
/* Initializes *m, in memory shared between processes, as a robust process-shared mutex
   (a holder that dies makes the next pthread_mutex_lock return EOWNERDEAD); what names it in
   the fatal error. For any shared region's lock (the table's, ldapauth's login cache). */
void shm_mutex_init(pthread_mutex_t *m, const char *what);
struct shmtable *shmtable_new(size_t nslots, unsigned workers, size_t key_max, int64_t forget_ms);
/* Maps the table in the file path, which every process (of any daemon) opening the same path
   shares: created (mode 0600) when missing, made anew when it is not a table of this format
   or was made before the last boot; an existing table keeps its own geometry (a warning
   names what was asked for instead). Table and process are as for shmtable_new. -1 with
   *error_r (malloc'd) when the file cannot be opened, sized or mapped. */
int shmtable_open(const char *path, size_t nslots, unsigned workers, size_t key_max,
		  int64_t forget_ms, struct shmtable **t_r, char **error_r);
/* The key of text in a table of key_max-byte keys: text itself when it fits, else (written
   to out, key_max bytes) its head, '#' and a 64-bit hash of the whole, so that two long texts
   do not share one entry. */
const char *shmtable_key(const char *text, char *out, size_t key_max);
/* Unmaps; *tp = NULL; safe on NULL. */
void shmtable_free(struct shmtable **tp);

/* A (re)started worker: the counts (entries and total) of its column are gone. */
void shmtable_worker_reset(struct shmtable *t, unsigned worker);

/* One more of (kind, key) for worker if fewer than limit are counted in all workers: true,
   else false (nothing counted). No room for the key: true, nothing counted, logged (at most
   once a second); its put finds nothing to uncount, or, if the key found room since, one
   count of this worker's: a table that full is off by a few, never stuck. */
bool shmtable_take(struct shmtable *t, enum shmtable_kind kind, const char *key, unsigned worker,
		   uint32_t limit);
/* Uncounts one taken by this worker; a count already at 0 stays 0. */
void shmtable_put(struct shmtable *t, enum shmtable_kind kind, const char *key, unsigned worker);
/* The count of (kind, key) in all workers. */
uint32_t shmtable_count(struct shmtable *t, enum shmtable_kind kind, const char *key);

/* Counts a failure of (kind, key) now; returns the count before it (0 when the last one was
   forgotten or there was none). */
uint32_t shmtable_fail(struct shmtable *t, enum shmtable_kind kind, const char *key);
/* A success: the failures of (kind, key) are forgotten. */
void shmtable_fail_clear(struct shmtable *t, enum shmtable_kind kind, const char *key);

/* Calls fn(recs, n, now_ms, arg) with the lock held, recs[i] the record of (kinds[i],
   keys[i]) (made when missing; NULL when its window has no room), now_ms the table's clock;
   what fn changes is kept. fn must be short and must not call the table. n <= 8. */
void shmtable_with(struct shmtable *t, size_t n, const enum shmtable_kind *kinds,
		   const char *const *keys,
		   void (*fn)(struct shmtable_rec **recs, size_t n, int64_t now_ms, void *arg),
		   void *arg);

/* The daemon-wide total: one more for worker if fewer than limit are counted in all workers
   (true), else false. */
bool shmtable_total_take(struct shmtable *t, unsigned worker, uint32_t limit);
void shmtable_total_put(struct shmtable *t, unsigned worker);
/* The total of all workers. */
uint32_t shmtable_total(struct shmtable *t);
/* The total counted for worker alone. */
uint32_t shmtable_total_mine(struct shmtable *t, unsigned worker);
/* The workers the table was made for. */
unsigned shmtable_workers(const struct shmtable *t);

#endif
