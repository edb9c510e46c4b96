/* authcache.c — owns the positive/negative authentication and lookup cache: a hash table
 * with an LRU list, bounded in entries (the least recently used goes first) and in time
 * (separate TTLs for positive and negative entries). Negative entries are also bounded in
 * memory (their own list, oldest first out): anyone can make them, one per unknown address
 * tried, and they must not push out the users' entries nor grow the process. A password is
 * never stored: a positive auth entry keeps SHA-256(per-entry salt || password) of the
 * password that worked. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "common/log.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth_private.h"


struct ac_entry {
	char *key;
	uint64_t hash;
	struct ac_entry *hnext;           /* bucket chain */
	struct ac_entry *older, *newer;   /* LRU list */
	struct ac_entry *nolder, *nnewer; /* negative entries, in the order they came */
	size_t cost;                      /* bytes held (negative entries' memory bound) */
	int64_t expires_ms;
	struct ldapauth_rec *rec; /* NULL: negative */
	bool has_pw;
	unsigned char salt[AC_SALT];
	unsigned char digest[AC_DIGEST];
};

struct authcache {
	size_t max, count, nbuckets;
	size_t neg_max_bytes, neg_bytes, neg_count;
	struct ac_entry *noldest, *nnewest;
	int64_t ttl_ms, neg_ttl_ms;
	uint64_t seed;
	struct ac_entry **buckets;
	struct ac_entry *oldest, *newest;
};

static uint64_t ac_hash(const struct authcache *c, const char *key);
static struct ac_entry **ac_slot(struct authcache *c, const char *key, uint64_t h);
static void ac_unlink_lru(struct authcache *c, struct ac_entry *e);
static void ac_push_lru(struct authcache *c, struct ac_entry *e);
static void ac_remove(struct authcache *c, struct ac_entry **slot);
static void ac_grow(struct authcache *c);

struct authcache *authcache_new(size_t max_entries, int64_t ttl_ms, int64_t neg_ttl_ms,
				size_t neg_max_bytes)
{
	struct authcache *c = xcalloc(1, sizeof(*c));

	c->max = max_entries;
	c->neg_max_bytes = neg_max_bytes;
	c->ttl_ms = ttl_ms;
	c->neg_ttl_ms = neg_ttl_ms;
	c->nbuckets = 1024;
	c->buckets = xcalloc(c->nbuckets, sizeof(*c->buckets));
	if (RAND_bytes((unsigned char *)&c->seed, sizeof(c->seed)) != 1)
		fatalx("authcache: no random bytes");
	return c;
}

void authcache_clear(struct authcache *c)
{
	for (size_t i = 0; i < c->nbuckets; i++)
		while (c->buckets[i] != NULL)
			ac_remove(c, &c->buckets[i]);
}

void authcache_free(struct authcache **cp)
{
	if (*cp == NULL)
		return;
	authcache_clear(*cp);
	free((*cp)->buckets);
	free(*cp);
	*cp = NULL;
}

size_t authcache_count(const struct authcache *c)
{
	return c->count;
}

size_t authcache_negative_bytes(const struct authcache *c, size_t *count_r)
{
	if (count_r != NULL)
		*count_r = c->neg_count;
	return c->neg_bytes;
}

/* What a negative entry holds: the entry, its key and their allocator headers, its bucket
   slot. */
static size_t ac_cost(const char *key)
{
	return sizeof(struct ac_entry) + strlen(key) + 1 + 2 * 16 + sizeof(struct ac_entry *);
}

static void ac_unlink_neg(struct authcache *c, struct ac_entry *e)
{
	if (e->nolder != NULL)
		e->nolder->nnewer = e->nnewer;
	else
		c->noldest = e->nnewer;
	if (e->nnewer != NULL)
		e->nnewer->nolder = e->nolder;
	else
		c->nnewest = e->nolder;
	e->nolder = e->nnewer = NULL;
	c->neg_bytes -= e->cost;
	c->neg_count--;
}

static void ac_push_neg(struct authcache *c, struct ac_entry *e)
{
	e->nolder = c->nnewest;
	if (c->nnewest != NULL)
		c->nnewest->nnewer = e;
	else
		c->noldest = e;
	c->nnewest = e;
	c->neg_bytes += e->cost;
	c->neg_count++;
}

static uint64_t ac_hash(const struct authcache *c, const char *key)
{
	uint64_t h = 14695981039346656037ULL ^ c->seed; /* FNV-1a, seeded per process */

	for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h ^ (h >> 29);
}

static struct ac_entry **ac_slot(struct authcache *c, const char *key, uint64_t h)
{
	struct ac_entry **s = &c->buckets[h & (c->nbuckets - 1)];

	while (*s != NULL && ((*s)->hash != h || strcmp((*s)->key, key) != 0))
		s = &(*s)->hnext;
	return s;
}

static void ac_unlink_lru(struct authcache *c, struct ac_entry *e)
{
	if (e->older != NULL)
		e->older->newer = e->newer;
	else
		c->oldest = e->newer;
	if (e->newer != NULL)
		e->newer->older = e->older;
	else
		c->newest = e->older;
	e->older = e->newer = NULL;
}

static void ac_push_lru(struct authcache *c, struct ac_entry *e)
{
	e->older = c->newest;
	e->newer = NULL;
	if (c->newest != NULL)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
}

static void ac_remove(struct authcache *c, struct ac_entry **slot)
{
	struct ac_entry *e = *slot;

	*slot = e->hnext;
	ac_unlink_lru(c, e);
	if (e->rec == NULL)
		ac_unlink_neg(c, e);
	ldapauth_rec_unref(&e->rec);
	OPENSSL_cleanse(e->digest, sizeof(e->digest));
	free(e->key);
	free(e);
	c->count--;
}

static void ac_grow(struct authcache *c)
{
	size_t n = c->nbuckets * 2;
	struct ac_entry **b = xcalloc(n, sizeof(*b));

	for (size_t i = 0; i < c->nbuckets; i++) {
		struct ac_entry *e = c->buckets[i], *next;

		for (; e != NULL; e = next) {
			next = e->hnext;
			e->hnext = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(c->buckets);
	c->buckets = b;
	c->nbuckets = n;
}

void authcache_digest(const unsigned char *salt, const char *password, unsigned char *out)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned int len = 0;

	if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(ctx, salt, AC_SALT) != 1 ||
	    EVP_DigestUpdate(ctx, password, strlen(password)) != 1 ||
	    EVP_DigestFinal_ex(ctx, out, &len) != 1 || len != AC_DIGEST)
		fatalx("authcache: SHA-256 failed");
	EVP_MD_CTX_free(ctx);
}

enum ac_res authcache_get(struct authcache *c, const char *key, const char *password,
			  int64_t now_ms, struct ldapauth_rec **rec_r)
{
	struct ac_entry **slot, *e;
	unsigned char d[AC_DIGEST];

	*rec_r = NULL;
	if (c->max == 0)
		return AC_MISS;
	slot = ac_slot(c, key, ac_hash(c, key));
	if ((e = *slot) == NULL)
		return AC_MISS;
	if (e->expires_ms <= now_ms) {
		ac_remove(c, slot);
		return AC_MISS;
	}
	if (e->rec == NULL)
		return AC_NEGATIVE;
	if (password != NULL) {
		if (!e->has_pw)
			return AC_MISS;
		authcache_digest(e->salt, password, d);
		if (CRYPTO_memcmp(d, e->digest, AC_DIGEST) != 0)
			return AC_MISS; /* the password may have changed: ask again */
	}
	ac_unlink_lru(c, e);
	ac_push_lru(c, e);
	*rec_r = ldapauth_rec_ref(e->rec);
	return AC_HIT;
}

void authcache_put(struct authcache *c, const char *key, struct ldapauth_rec *rec,
		   const char *password, int64_t now_ms)
{
	uint64_t h;
	struct ac_entry **slot, *e;
	int64_t ttl = rec != NULL ? c->ttl_ms : c->neg_ttl_ms;

	if (c->max == 0 || ttl == 0 || (rec == NULL && ac_cost(key) > c->neg_max_bytes))
		return;
	h = ac_hash(c, key);
	slot = ac_slot(c, key, h);
	if (*slot != NULL)
		ac_remove(c, slot);
	while (c->count >= c->max && c->oldest != NULL)
		ac_remove(c, ac_slot(c, c->oldest->key, c->oldest->hash));
	while (rec == NULL && c->neg_bytes + ac_cost(key) > c->neg_max_bytes && c->noldest != NULL)
		ac_remove(c, ac_slot(c, c->noldest->key, c->noldest->hash));
	if (c->count >= c->nbuckets && c->nbuckets < ((size_t)1 << 30))
		ac_grow(c);
	e = xcalloc(1, sizeof(*e));
	e->key = xstrdup(key);
	e->hash = h;
	e->expires_ms = now_ms + ttl;
	e->rec = rec != NULL ? ldapauth_rec_ref(rec) : NULL;
	if (rec != NULL && password != NULL) {
		if (RAND_bytes(e->salt, sizeof(e->salt)) != 1)
			fatalx("authcache: no random bytes");
		authcache_digest(e->salt, password, e->digest);
		e->has_pw = true;
	}
	slot = &c->buckets[h & (c->nbuckets - 1)];
	e->hnext = *slot;
	*slot = e;
	ac_push_lru(c, e);
	if (rec == NULL) {
		e->cost = ac_cost(key);
		ac_push_neg(c, e);
	}
	c->count++;
}

void authcache_set_ttls(struct authcache *c, int64_t ttl_ms, int64_t neg_ttl_ms)
{
	c->ttl_ms = ttl_ms;
	c->neg_ttl_ms = neg_ttl_ms;
}

void authcache_limit(struct authcache *c, size_t max_entries)
{
	if (max_entries < c->max)
		c->max = max_entries;
	while (c->count > c->max && c->oldest != NULL)
		ac_remove(c, ac_slot(c, c->oldest->key, c->oldest->hash));
}

void authcache_remove(struct authcache *c, const char *key)
{
	struct ac_entry **slot;

	if (c->max == 0)
		return;
	slot = ac_slot(c, key, ac_hash(c, key));
	if (*slot != NULL)
		ac_remove(c, slot);
}
