/* authshm.c — owns the authentication/lookup cache shared by the workers of one daemon: a
 * region mapped MAP_SHARED by the master before it forks (ldapauth_shared_new), fixed slots of
 * AS_SLOT bytes found in a seeded window of AS_PROBE from their key's hash, one robust
 * process-shared mutex held for a slot copy. The rules are authcache.c's: the positive and
 * negative TTLs, entries bounded in number (auth_cache_size, for the whole daemon now) with
 * the least recently used of a window going first, negative entries bounded by
 * negative_cache_memory and never taking a user's slot, and never a password: a positive auth
 * entry keeps SHA-256(per-entry salt || password), compared outside the lock. A login on one
 * worker is thus a hit on every other. A record that does not fit a slot stays in the
 * worker's own cache. Emptying it (a reload) is one generation more: no page is touched. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "common/conf.h"
#include "common/endian.h"
#include "common/log.h"
#include "common/shmtable.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth_private.h"

#define AS_SLOT 512
#define AS_PROBE 16
#define AS_HEAD 88 /* the slot's fields before data */

enum { AS_FREE, AS_POS, AS_NEG };

struct as_slot {
	uint64_t hash;
	uint64_t gen;       /* the table's generation it was written in (older: free) */
	int64_t expires_ms; /* CLOCK_MONOTONIC, the same in every process */
	int64_t used_ms;    /* the last hit or write */
	uint8_t kind;
	uint8_t has_pw;
	uint16_t keylen, datalen;
	uint8_t pad[2];
	unsigned char salt[AC_SALT];
	unsigned char digest[AC_DIGEST];
	unsigned char data[AS_SLOT - AS_HEAD]; /* key, then the encoded record */
};
_Static_assert(sizeof(struct as_slot) == AS_SLOT, "slot layout");

struct ldapauth_shared {
	pthread_mutex_t lock;
	uint64_t seed, gen;
	size_t nslots, map_size;
	size_t count, neg_count, neg_max;
	int64_t ttl_ms, neg_ttl_ms;
	_Alignas(64) struct as_slot slots[];
};

struct ldapauth_shared *ldapauth_shared_new(const struct conf *c)
{
	const struct directory_conf *d = &conf_values(c)->directory;
	size_t n = AS_PROBE, size;
	struct ldapauth_shared *s;

	if (d->auth_cache_size == 0)
		return NULL;
	while (n < (size_t)d->auth_cache_size)
		n *= 2;
	size = sizeof(*s) + n * sizeof(struct as_slot);
	/* pages are given as slots are first written: a daemon with few users uses little */
	s = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s == MAP_FAILED)
		fatal("mmap shared auth cache (%zu bytes)", size);
	shm_mutex_init(&s->lock, "shared auth cache");
	if (RAND_bytes((unsigned char *)&s->seed, sizeof(s->seed)) != 1)
		fatalx("authshm: no random bytes");
	s->gen = 1;
	s->nslots = n;
	s->map_size = size;
	s->ttl_ms = d->auth_cache_ttl_ms;
	s->neg_ttl_ms = d->negative_cache_ttl_ms;
	s->neg_max = (size_t)d->negative_cache_memory / AS_SLOT;
	return s;
}

void ldapauth_shared_free(struct ldapauth_shared **sp)
{
	if (*sp == NULL)
		return;
	munmap(*sp, (*sp)->map_size);
	*sp = NULL;
}

/* A worker killed holding the lock may have left a slot half copied (a new key's header over
   an old record of the same key reads as that key with the wrong record) and the counts one
   off: which slot is not known, so the table is emptied, a new generation, before anyone
   reads it again. The cost is a miss for every user once; never a wrong answer. */
static void as_lock(struct ldapauth_shared *s)
{
	if (pthread_mutex_lock(&s->lock) == EOWNERDEAD) {
		s->gen++;
		s->count = s->neg_count = 0;
		pthread_mutex_consistent(&s->lock);
		log_warnx("authshm: a worker died holding the shared login cache: emptied");
	}
}

void authshm_lock(struct ldapauth_shared *s)
{
	as_lock(s);
}

static uint64_t as_hash(const struct ldapauth_shared *s, const char *key, size_t len)
{
	uint64_t h = 14695981039346656037ULL ^ s->seed; /* FNV-1a, seeded per daemon */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
	return (h ^ (h >> 29)) | 1; /* never 0 */
}

static struct as_slot *as_at(struct ldapauth_shared *s, uint64_t h, size_t i)
{
	return &s->slots[(h + i) & (s->nslots - 1)];
}

static bool as_live(const struct ldapauth_shared *s, const struct as_slot *e)
{
	return e->kind != AS_FREE && e->gen == s->gen;
}

static void as_drop(struct ldapauth_shared *s, struct as_slot *e)
{
	if (!as_live(s, e))
		return;
	s->count--;
	if (e->kind == AS_NEG)
		s->neg_count--;
	e->kind = AS_FREE;
}

static struct as_slot *as_find(struct ldapauth_shared *s, const char *key, size_t len, uint64_t h)
{
	for (size_t i = 0; i < AS_PROBE; i++) {
		struct as_slot *e = as_at(s, h, i);

		if (as_live(s, e) && e->hash == h && e->keylen == len &&
		    memcmp(e->data, key, len) == 0)
			return e;
	}
	return NULL;
}

/* ---- records: partition be32, quota be64, naliases be16, then login, address, mailhost, dn
   and the aliases, each a be16 (0: NULL, else length + 1) and its bytes ---- */

static bool put_str(unsigned char *out, size_t cap, size_t *off, const char *v)
{
	size_t n = v != NULL ? strlen(v) : 0;

	if (n > 0xfffe || *off + 2 + n > cap)
		return false;
	put_be16(out + *off, v != NULL ? (uint16_t)(n + 1) : 0);
	memcpy(out + *off + 2, v != NULL ? v : "", n);
	*off += 2 + n;
	return true;
}

static size_t rec_encode(const struct ldapauth_rec *r, unsigned char *out, size_t cap)
{
	const struct ldapauth_user *u = &r->u;
	size_t off = 14;

	if (cap < off || u->naliases > 0xffff)
		return 0;
	put_be32(out, (uint32_t)u->partition);
	put_be64(out + 4, u->quota);
	put_be16(out + 12, (uint16_t)u->naliases);
	if (!put_str(out, cap, &off, u->login) || !put_str(out, cap, &off, u->address) ||
	    !put_str(out, cap, &off, u->mailhost) || !put_str(out, cap, &off, u->dn))
		return 0;
	for (size_t i = 0; i < u->naliases; i++)
		if (!put_str(out, cap, &off, u->aliases[i]))
			return 0;
	return off;
}

static bool get_str(const unsigned char *in, size_t len, size_t *off, char **v_r)
{
	size_t n;

	if (*off + 2 > len)
		return false;
	n = get_be16(in + *off);
	*off += 2;
	*v_r = NULL;
	if (n == 0)
		return true;
	if (*off + n - 1 > len)
		return false;
	*v_r = xmemdup0(in + *off, n - 1);
	*off += n - 1;
	return true;
}

static struct ldapauth_rec *rec_decode(const unsigned char *in, size_t len)
{
	struct ldapauth_rec *r;
	struct ldapauth_user *u;
	size_t off = 14, n;

	if (len < off)
		return NULL;
	r = ldapauth_rec_new();
	u = &r->u;
	u->partition = (int)get_be32(in);
	u->quota = get_be64(in + 4);
	n = get_be16(in + 12);
	if (!get_str(in, len, &off, &u->login) || !get_str(in, len, &off, &u->address) ||
	    !get_str(in, len, &off, &u->mailhost) || !get_str(in, len, &off, &u->dn) ||
	    u->login == NULL)
		goto bad;
	u->aliases = xcalloc(n + 1, sizeof(*u->aliases));
	for (; u->naliases < n; u->naliases++)
		if (!get_str(in, len, &off, &u->aliases[u->naliases]) ||
		    u->aliases[u->naliases] == NULL)
			goto bad;
	return r;
bad:
	ldapauth_rec_unref(&r);
	return NULL;
}

/* ---- the cache ---- */

enum ac_res authshm_get(struct ldapauth_shared *s, const char *key, const char *password,
			int64_t now_ms, struct ldapauth_rec **rec_r)
{
	size_t len = strlen(key);
	uint64_t h = as_hash(s, key, len);
	struct as_slot *e, copy;
	unsigned char d[AC_DIGEST];

	*rec_r = NULL;
	if (len > sizeof(copy.data))
		return AC_MISS; /* authshm_put keeps no such key */
	as_lock(s);
	if ((e = as_find(s, key, len, h)) == NULL) {
		pthread_mutex_unlock(&s->lock);
		return AC_MISS;
	}
	if (e->expires_ms <= now_ms) {
		as_drop(s, e);
		pthread_mutex_unlock(&s->lock);
		return AC_MISS;
	}
	memcpy(&copy, e, sizeof(copy));
	e->used_ms = now_ms;
	pthread_mutex_unlock(&s->lock);
	if (copy.kind == AS_NEG)
		return AC_NEGATIVE;
	if (password != NULL) {
		if (!copy.has_pw)
			return AC_MISS;
		authcache_digest(copy.salt, password, d);
		if (CRYPTO_memcmp(d, copy.digest, AC_DIGEST) != 0) {
			OPENSSL_cleanse(&copy, sizeof(copy));
			return AC_MISS; /* the password may have changed: ask again */
		}
	}
	if ((size_t)copy.keylen + copy.datalen > sizeof(copy.data)) {
		OPENSSL_cleanse(&copy, sizeof(copy));
		return AC_MISS;
	}
	*rec_r = rec_decode(copy.data + copy.keylen, copy.datalen);
	OPENSSL_cleanse(&copy, sizeof(copy));
	return *rec_r != NULL ? AC_HIT : AC_MISS;
}

/* The slot for a new entry in key's window: a free or expired one, else (a user's entry) the
   least recently used, else NULL. A negative entry takes only free, expired or negative
   slots, and only a negative one once neg_max are kept. */
static struct as_slot *as_room(struct ldapauth_shared *s, uint64_t h, bool negative,
			       int64_t now_ms)
{
	struct as_slot *lru = NULL, *lru_neg = NULL;
	bool neg_full = s->neg_count >= s->neg_max;

	for (size_t i = 0; i < AS_PROBE; i++) {
		struct as_slot *e = as_at(s, h, i);

		if (!as_live(s, e) || e->expires_ms <= now_ms) {
			if (!negative || !neg_full || (as_live(s, e) && e->kind == AS_NEG))
				return e;
			continue;
		}
		if (e->kind == AS_NEG && (lru_neg == NULL || e->used_ms < lru_neg->used_ms))
			lru_neg = e;
		if (lru == NULL || e->used_ms < lru->used_ms)
			lru = e;
	}
	return negative ? lru_neg : lru;
}

bool authshm_put(struct ldapauth_shared *s, const char *key, struct ldapauth_rec *rec,
		 const char *password, int64_t now_ms)
{
	size_t len = strlen(key), dlen = 0;
	int64_t ttl = __atomic_load_n(rec != NULL ? &s->ttl_ms : &s->neg_ttl_ms, __ATOMIC_RELAXED);
	uint64_t h = as_hash(s, key, len);
	struct as_slot n, *e;

	if (ttl == 0)
		return true; /* not cached, as authcache does */
	if (len > sizeof(n.data))
		return false;
	memset(&n, 0, sizeof(n));
	if (rec != NULL && (dlen = rec_encode(rec, n.data + len, sizeof(n.data) - len)) == 0)
		return false;
	memcpy(n.data, key, len);
	n.hash = h;
	n.kind = rec != NULL ? AS_POS : AS_NEG;
	n.keylen = (uint16_t)len;
	n.datalen = (uint16_t)dlen;
	n.expires_ms = now_ms + ttl;
	n.used_ms = now_ms;
	if (rec != NULL && password != NULL) {
		if (RAND_bytes(n.salt, sizeof(n.salt)) != 1)
			fatalx("authshm: no random bytes");
		authcache_digest(n.salt, password, n.digest);
		n.has_pw = 1;
	}
	as_lock(s);
	if ((e = as_find(s, key, len, h)) != NULL)
		as_drop(s, e);
	else if ((e = as_room(s, h, rec == NULL, now_ms)) != NULL)
		as_drop(s, e);
	if (e != NULL) {
		n.gen = s->gen;
		memcpy(e, &n, sizeof(n));
		s->count++;
		if (rec == NULL)
			s->neg_count++;
	}
	pthread_mutex_unlock(&s->lock);
	OPENSSL_cleanse(&n, sizeof(n));
	return e != NULL;
}

void authshm_remove(struct ldapauth_shared *s, const char *key)
{
	size_t len = strlen(key);
	uint64_t h = as_hash(s, key, len);
	struct as_slot *e;

	as_lock(s);
	if ((e = as_find(s, key, len, h)) != NULL)
		as_drop(s, e);
	pthread_mutex_unlock(&s->lock);
}

void authshm_clear(struct ldapauth_shared *s)
{
	as_lock(s);
	s->gen++;
	s->count = s->neg_count = 0;
	pthread_mutex_unlock(&s->lock);
}

void authshm_set_ttls(struct ldapauth_shared *s, int64_t ttl_ms, int64_t neg_ttl_ms)
{
	__atomic_store_n(&s->ttl_ms, ttl_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&s->neg_ttl_ms, neg_ttl_ms, __ATOMIC_RELAXED);
}

size_t authshm_count(struct ldapauth_shared *s)
{
	size_t n;

	as_lock(s);
	n = s->count;
	pthread_mutex_unlock(&s->lock);
	return n;
}
