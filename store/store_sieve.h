/* store_sieve.h — the Sieve part of libheron_store: each user's scripts (source and compiled
 * program, one of them active), the vacation "already answered" memory and the duplicate
 * (RFC 7352) memory, all in the `sieve` DBI of the user's partition, next to the user's
 * record, so a delivery reads the active program in the same read txn as the user.
 *
 * Keys (store_private.h style, fixed-width big-endian first):
 *   be64 user 'S' name      -> u32 source length, source, program     a script
 *   be64 user 'A'           -> name                                   the active script
 *   be64 user 'V' be64 hash -> be64 until (Unix time)                 vacation sent
 *   be64 user 'D' be64 hash -> be64 until                             duplicate seen
 * Deleting the user deletes them all. Errors as in store.h; "no such script" is
 * STORE_ENOMSG, a script that exists already STORE_EEXIST, deleting the active script
 * STORE_ENOTSUP. */
#ifndef HERON_STORE_SIEVE_H
#define HERON_STORE_SIEVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

#define STORE_SIEVE_NAME_MAX 128 /* bytes of a script name */

struct store_sieve_script {
	/* store_sieve_get: the name it was given; store_sieve_active: in the map, valid for the
	   txn up to its next write (not NUL-terminated: name_len) */
	const char *name;
	size_t name_len;
	const char *src; /* the source as stored */
	size_t src_len;
	const uint8_t *prog; /* the compiled program (sieve.h) */
	size_t prog_len;
	bool active;
};

/* Stores (or replaces) a script. Errors: STORE_ENOUSER, STORE_EINVAL (name empty, too long,
   with control characters or '/'). */
int store_sieve_put(struct store_txn *t, const char *user, const char *name, const char *src,
		    size_t src_len, const uint8_t *prog, size_t prog_len);
/* Errors: STORE_ENOUSER, STORE_ENOMSG. */
int store_sieve_get(struct store_txn *t, const char *user, const char *name,
		    struct store_sieve_script *s_r);
/* The active script. Errors: STORE_ENOUSER, STORE_ENOMSG (none active). */
int store_sieve_active(struct store_txn *t, const char *user, struct store_sieve_script *s_r);
/* Makes name active (NULL: none). Errors: STORE_ENOUSER, STORE_ENOMSG. */
int store_sieve_activate(struct store_txn *t, const char *user, const char *name);
/* Errors: STORE_ENOUSER, STORE_ENOMSG, STORE_ENOTSUP (it is the active script). */
int store_sieve_delete(struct store_txn *t, const char *user, const char *name);
/* Errors: STORE_ENOUSER, STORE_ENOMSG, STORE_EEXIST, STORE_EINVAL. The active script stays
   active under its new name. */
int store_sieve_rename(struct store_txn *t, const char *user, const char *from, const char *to);
/* Every script in name order; cb's non-zero return stops and is returned. */
int store_sieve_list(struct store_txn *t, const char *user,
		     int (*cb)(const struct store_sieve_script *s, void *arg), void *arg);
/* Scripts and bytes of source the user holds (the ManageSieve quota). */
int store_sieve_usage(struct store_txn *t, const char *user, uint64_t *count_r, uint64_t *bytes_r);

enum store_sieve_memory { STORE_SIEVE_VACATION = 'V', STORE_SIEVE_DUPLICATE = 'D' };
/* Whether key (a vacation handle + sender, or a duplicate id) is remembered and not expired
   at now. Errors: STORE_ENOUSER. */
int store_sieve_seen(struct store_txn *t, const char *user, enum store_sieve_memory kind,
		     const char *key, int64_t now, bool *seen_r);
/* Remembers key until `until`; drops a few expired entries of the user on the way. Needs a
   write txn. Errors: STORE_ENOUSER. */
int store_sieve_remember(struct store_txn *t, const char *user, enum store_sieve_memory kind,
			 const char *key, int64_t now, int64_t until);
/* Every memory of the user that has not expired at now (INT64_MIN: all), as stored: the
   kind, the hash of the key (the key itself is not kept) and the expiry; duplicate ones
   first, then vacation ones, each in hash order. What an export writes. cb's non-zero return
   stops and is returned. Errors: STORE_ENOUSER. */
int store_sieve_memories(struct store_txn *t, const char *user, int64_t now,
			 int (*cb)(enum store_sieve_memory kind, uint64_t hash, int64_t until,
				   void *arg),
			 void *arg);
/* Remembers the key whose hash store_sieve_memories gave until `until`, unless it is
   remembered longer already: what an import does. Needs a write txn. Errors: STORE_ENOUSER,
   STORE_EINVAL (kind). */
int store_sieve_restore(struct store_txn *t, const char *user, enum store_sieve_memory kind,
			uint64_t hash, int64_t until);

#endif
