/* store_sieve.c — owns the `sieve` DBI: scripts with their compiled programs, the active
 * script, and the vacation and duplicate memories (layout in store_sieve.h). */
#include <stdlib.h>
#include <string.h>

#include "common/endian.h"
#include "common/xmalloc.h"
#include "store/store_private.h"
#include "store/store_sieve.h"

#define KEY_MAX (9 + STORE_SIEVE_NAME_MAX)

static int user_id(struct store_txn *t, const char *user, uint64_t *id_r)
{
	struct store_user u;
	int rc = store_user_get(t, user, &u);

	if (rc == 0)
		*id_r = u.id;
	return rc;
}

static bool name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > STORE_SIEVE_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f || name[i] == '/')
			return false;
	return true;
}

static size_t key_of(uint8_t *k, uint64_t user, char type, const void *rest, size_t n)
{
	put_be64(k, user);
	k[8] = (uint8_t)type;
	if (n)
		memcpy(k + 9, rest, n);
	return 9 + n;
}

static uint64_t hash64(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

static int decode_script(const MDB_val *k, const MDB_val *v, struct store_sieve_script *s)
{
	const uint8_t *p = v->mv_data;
	uint32_t slen;

	if (v->mv_size < 4 || (slen = get_be32(p)) > v->mv_size - 4)
		return STORE_ECORRUPT;
	s->name = (const char *)k->mv_data + 9;
	s->name_len = k->mv_size - 9;
	s->src = (const char *)p + 4;
	s->src_len = slen;
	s->prog = p + 4 + slen;
	s->prog_len = v->mv_size - 4 - slen;
	s->active = false;
	return 0;
}

static bool is_active(struct store_txn *t, uint64_t id, const char *name, size_t len)
{
	uint8_t k[9];
	MDB_val v;

	key_of(k, id, 'A', NULL, 0);
	return store_get(t, DBI_SIEVE, k, 9, &v) == 0 && v.mv_size == len &&
	       memcmp(v.mv_data, name, len) == 0;
}

int store_sieve_put(struct store_txn *t, const char *user, const char *name, const char *src,
		    size_t src_len, const uint8_t *prog, size_t prog_len)
{
	uint8_t k[KEY_MAX], *v;
	uint64_t id;
	size_t klen;
	int rc;

	if (!name_ok(name) || src_len > UINT32_MAX)
		return STORE_EINVAL;
	if ((rc = user_id(t, user, &id)) != 0)
		return rc;
	klen = key_of(k, id, 'S', name, strlen(name));
	v = xmalloc(4 + src_len + prog_len);
	put_be32(v, (uint32_t)src_len);
	memcpy(v + 4, src, src_len);
	memcpy(v + 4 + src_len, prog, prog_len);
	rc = store_put(t, DBI_SIEVE, k, klen, v, 4 + src_len + prog_len);
	free(v);
	return rc;
}

/* The script name[0..len) of user; s_r->name is name itself, so it lives as long as the
   caller's name (the key read is on this stack). */
static int sieve_get(struct store_txn *t, const char *user, const char *name, size_t len,
		     struct store_sieve_script *s_r)
{
	uint8_t k[KEY_MAX];
	uint64_t id;
	MDB_val key, v;
	int rc;

	if ((rc = user_id(t, user, &id)) != 0)
		return rc;
	key.mv_data = k;
	key.mv_size = key_of(k, id, 'S', name, len);
	if ((rc = store_get(t, DBI_SIEVE, k, key.mv_size, &v)) != 0)
		return rc == STORE_ENOMSG || rc == STORE_ENOUSER ? STORE_ENOMSG : rc;
	if ((rc = decode_script(&key, &v, s_r)) == 0) {
		s_r->name = name;
		s_r->active = is_active(t, id, name, len);
	}
	return rc;
}

int store_sieve_get(struct store_txn *t, const char *user, const char *name,
		    struct store_sieve_script *s_r)
{
	if (!name_ok(name))
		return STORE_ENOMSG;
	return sieve_get(t, user, name, strlen(name), s_r);
}

int store_sieve_active(struct store_txn *t, const char *user, struct store_sieve_script *s_r)
{
	uint8_t k[KEY_MAX];
	uint64_t id;
	MDB_val v;
	int rc;

	if ((rc = user_id(t, user, &id)) != 0)
		return rc;
	key_of(k, id, 'A', NULL, 0);
	if (store_get(t, DBI_SIEVE, k, 9, &v) != 0 || v.mv_size == 0 ||
	    v.mv_size > STORE_SIEVE_NAME_MAX)
		return STORE_ENOMSG;
	/* the name from the active record's value: in the map, valid for the transaction */
	return sieve_get(t, user, v.mv_data, v.mv_size, s_r);
}

int store_sieve_activate(struct store_txn *t, const char *user, const char *name)
{
	struct store_sieve_script s;
	uint8_t k[9];
	uint64_t id;
	int rc;

	if ((rc = user_id(t, user, &id)) != 0)
		return rc;
	key_of(k, id, 'A', NULL, 0);
	if (name == NULL || *name == '\0') {
		rc = store_del(t, DBI_SIEVE, k, 9);
		return rc == STORE_ENOMSG ? 0 : rc;
	}
	if ((rc = store_sieve_get(t, user, name, &s)) != 0)
		return rc;
	return store_put(t, DBI_SIEVE, k, 9, name, strlen(name));
}

int store_sieve_delete(struct store_txn *t, const char *user, const char *name)
{
	uint8_t k[KEY_MAX];
	uint64_t id;
	size_t klen;
	int rc;

	if (!name_ok(name))
		return STORE_ENOMSG;
	if ((rc = user_id(t, user, &id)) != 0)
		return rc;
	if (is_active(t, id, name, strlen(name)))
		return STORE_ENOTSUP;
	klen = key_of(k, id, 'S', name, strlen(name));
	return store_del(t, DBI_SIEVE, k, klen);
}

int store_sieve_rename(struct store_txn *t, const char *user, const char *from, const char *to)
{
	struct store_sieve_script s;
	uint64_t id;
	bool active;
	int rc;

	if (!name_ok(to))
		return STORE_EINVAL;
	if ((rc = user_id(t, user, &id)) != 0 || (rc = store_sieve_get(t, user, from, &s)) != 0)
		return rc;
	struct store_sieve_script dummy;
	if (store_sieve_get(t, user, to, &dummy) == 0)
		return STORE_EEXIST;
	active = s.active;
	/* the values point into the map: copy before writing */
	char *src = xmemdup0(s.src, s.src_len);
	uint8_t *prog = xmalloc(s.prog_len + 1);
	size_t src_len = s.src_len, prog_len = s.prog_len;
	memcpy(prog, s.prog, prog_len);
	uint8_t k[KEY_MAX];
	size_t klen = key_of(k, id, 'S', from, strlen(from));
	if ((rc = store_del(t, DBI_SIEVE, k, klen)) == 0)
		rc = store_sieve_put(t, user, to, src, src_len, prog, prog_len);
	if (rc == 0 && active) {
		key_of(k, id, 'A', NULL, 0);
		rc = store_put(t, DBI_SIEVE, k, 9, to, strlen(to));
	}
	free(src);
	free(prog);
	return rc;
}

/* calls fn for each key of user with the given type byte */
static int walk(struct store_txn *t, uint64_t id, char type,
		int (*fn)(struct store_txn *t, MDB_cursor *c, const MDB_val *k, const MDB_val *v,
			  void *arg),
		void *arg)
{
	uint8_t k[9];
	MDB_cursor *c;
	MDB_val key, v;
	int rc;

	key_of(k, id, type, NULL, 0);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_SIEVE], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	key.mv_data = k;
	key.mv_size = 9;
	int frc = 0;
	rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE);
	while (rc == 0 && key.mv_size >= 9 && memcmp(key.mv_data, k, 9) == 0) {
		if ((frc = fn(t, c, &key, &v, arg)) != 0)
			break;
		rc = mdb_cursor_get(c, &key, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	if (frc != 0)
		return frc;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "sieve walk");
}

struct list_ctx {
	uint64_t id;
	int (*cb)(const struct store_sieve_script *s, void *arg);
	void *arg;
	uint64_t count, bytes;
};

static int list_one(struct store_txn *t, MDB_cursor *c, const MDB_val *k, const MDB_val *v,
		    void *arg)
{
	struct list_ctx *lc = arg;
	struct store_sieve_script s;
	int rc;

	if ((rc = decode_script(k, v, &s)) != 0)
		return rc;
	lc->count++;
	lc->bytes += s.src_len;
	if (lc->cb == NULL)
		return 0;
	s.active = is_active(t, lc->id, s.name, s.name_len);
	return lc->cb(&s, lc->arg);
}

int store_sieve_list(struct store_txn *t, const char *user,
		     int (*cb)(const struct store_sieve_script *s, void *arg), void *arg)
{
	struct list_ctx lc = { .cb = cb, .arg = arg };
	int rc;

	if ((rc = user_id(t, user, &lc.id)) != 0)
		return rc;
	return walk(t, lc.id, 'S', list_one, &lc);
}

int store_sieve_usage(struct store_txn *t, const char *user, uint64_t *count_r, uint64_t *bytes_r)
{
	struct list_ctx lc = { 0 };
	int rc;

	if ((rc = user_id(t, user, &lc.id)) != 0 || (rc = walk(t, lc.id, 'S', list_one, &lc)) != 0)
		return rc;
	*count_r = lc.count;
	*bytes_r = lc.bytes;
	return 0;
}

int store_sieve_seen(struct store_txn *t, const char *user, enum store_sieve_memory kind,
		     const char *key, int64_t now, bool *seen_r)
{
	uint8_t k[17], h[8];
	uint64_t id;
	MDB_val v;
	int rc;

	*seen_r = false;
	if ((rc = user_id(t, user, &id)) != 0)
		return rc;
	put_be64(h, hash64(key));
	key_of(k, id, (char)kind, h, 8);
	if (store_get(t, DBI_SIEVE, k, 17, &v) == 0 && v.mv_size == 8)
		*seen_r = (int64_t)get_be64(v.mv_data) > now;
	return 0;
}

struct prune_ctx {
	int64_t now;
	unsigned left;
};

static int prune_one(struct store_txn *t, MDB_cursor *c, const MDB_val *k, const MDB_val *v,
		     void *arg)
{
	struct prune_ctx *pc = arg;
	int rc;

	if (pc->left == 0)
		return 1; /* stop: enough for one call */
	if (v->mv_size == 8 && (int64_t)get_be64(v->mv_data) <= pc->now) {
		pc->left--;
		if ((rc = mdb_cursor_del(c, 0)) != 0)
			return store_mdb_err(t, rc, "sieve prune");
	}
	return 0;
}

int store_sieve_remember(struct store_txn *t, const char *user, enum store_sieve_memory kind,
			 const char *key, int64_t now, int64_t until)
{
	uint8_t k[17], h[8], v[8];
	struct prune_ctx pc = { now, 16 };
	uint64_t id;
	int rc;

	if ((rc = user_id(t, user, &id)) != 0)
		return rc;
	if ((rc = walk(t, id, (char)kind, prune_one, &pc)) != 0 && rc != 1)
		return rc;
	put_be64(h, hash64(key));
	key_of(k, id, (char)kind, h, 8);
	put_be64(v, (uint64_t)until);
	return store_put(t, DBI_SIEVE, k, 17, v, 8);
}

struct mem_ctx {
	int64_t now;
	int (*cb)(enum store_sieve_memory kind, uint64_t hash, int64_t until, void *arg);
	void *arg;
};

static int mem_one(struct store_txn *t, MDB_cursor *c, const MDB_val *k, const MDB_val *v,
		   void *arg)
{
	struct mem_ctx *mc = arg;
	const uint8_t *kp = k->mv_data;
	int64_t until;

	(void)t;
	(void)c;
	if (k->mv_size != 17 || v->mv_size != 8)
		return STORE_ECORRUPT;
	until = (int64_t)get_be64(v->mv_data);
	if (until <= mc->now)
		return 0;
	return mc->cb((enum store_sieve_memory)kp[8], get_be64(kp + 9), until, mc->arg);
}

int store_sieve_memories(struct store_txn *t, const char *user, int64_t now,
			 int (*cb)(enum store_sieve_memory kind, uint64_t hash, int64_t until,
				   void *arg),
			 void *arg)
{
	struct mem_ctx mc = { now, cb, arg };
	uint64_t id;
	int rc;

	if ((rc = user_id(t, user, &id)) != 0 ||
	    (rc = walk(t, id, STORE_SIEVE_DUPLICATE, mem_one, &mc)) != 0)
		return rc;
	return walk(t, id, STORE_SIEVE_VACATION, mem_one, &mc);
}

int store_sieve_restore(struct store_txn *t, const char *user, enum store_sieve_memory kind,
			uint64_t hash, int64_t until)
{
	uint8_t k[17], h[8], v[8];
	uint64_t id;
	MDB_val old;
	int rc;

	if (kind != STORE_SIEVE_VACATION && kind != STORE_SIEVE_DUPLICATE)
		return STORE_EINVAL;
	if ((rc = user_id(t, user, &id)) != 0)
		return rc;
	put_be64(h, hash);
	key_of(k, id, (char)kind, h, 8);
	if (store_get(t, DBI_SIEVE, k, 17, &old) == 0 && old.mv_size == 8 &&
	    (int64_t)get_be64(old.mv_data) >= until)
		return 0;
	put_be64(v, (uint64_t)until);
	return store_put(t, DBI_SIEVE, k, 17, v, 8);
}
