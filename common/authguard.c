/* authguard.c — owns the login throttle's policy over the shared table: the three keys of a
 * check, the delays, the charge at the start and what each outcome gives back, the log of
 * every delay and refusal. The contract is in authguard.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/authguard.h"
#include "common/conf.h"
#include "common/conf_keys.h"
#include "common/log.h"
#include "common/shmtable.h"
#include "common/str.h"
#include "common/xmalloc.h"

#define KEY_MAX 128
#define NKEYS 3 /* pair, user, address: the order of recs[] */
/* The keys charged when a check starts: the pair and the user. An address's failures count
   when they happen: many clients share an address (NAT, a benchmark's agents), and their
   checks in flight are no sign of guessing. */
#define NCHARGED 2

struct authguard {
	struct shmtable *t;
	bool owned;
	bool no_wait; /* authguard_no_wait: counts kept, no check held or refused */
};

struct key_rule {
	enum shmtable_kind kind;
	uint32_t free;   /* failures without delay */
	int64_t base_ms; /* the delay after free + 1 failures; doubled per failure after */
	int64_t max_ms;
};

static const struct key_rule rules[NKEYS] = {
	{ SHM_LOGIN_PAIR, 0, 500, 8000 },
	{ SHM_LOGIN_USER, 9, 500, 30000 },
	{ SHM_LOGIN_ADDR, 19, 250, 8000 },
};

struct authguard *authguard_over(struct shmtable *t)
{
	struct authguard *g = xcalloc(1, sizeof(*g));

	g->t = t;
	return g;
}

struct authguard *authguard_open(const struct conf *c)
{
	const struct heron_conf *v = conf_values(c);
	const char *path = v->directory.login_throttle_file;
	size_t slots = (size_t)v->directory.login_throttle_slots;
	char *file = path[0] != '\0' ? xstrdup(path)
				     : xasprintf("%s/login-throttle", v->store.path);
	struct authguard *g;
	struct shmtable *t;
	char *err = NULL;

	if (shmtable_open(file, slots, 1, KEY_MAX, AUTHGUARD_KNOWN_MS, &t, &err) < 0) {
		log_warnx("login throttle: %s: counting in this daemon only", err);
		free(err);
		t = shmtable_new(slots, 1, KEY_MAX, AUTHGUARD_KNOWN_MS);
	}
	free(file);
	g = authguard_over(t);
	g->owned = true;
	return g;
}

void authguard_close(struct authguard **gp)
{
	struct authguard *g = *gp;

	if (g == NULL)
		return;
	if (g->owned)
		shmtable_free(&g->t);
	free(g);
	*gp = NULL;
}

/* The delay a key sets after its fails-th failure. */
static int64_t rule_delay(const struct key_rule *r, uint32_t fails)
{
	uint32_t past;

	if (fails <= r->free)
		return 0;
	past = fails - r->free - 1;
	if (past > 20)
		return r->max_ms;
	return r->base_ms << past < r->max_ms ? r->base_ms << past : r->max_ms;
}

/* The user as the directory would match it: lower case, without an @domain part. */
static void user_norm(const char *user, char *out, size_t size)
{
	const char *at = strrchr(user, '@');
	size_t n = at != NULL && at != user ? (size_t)(at - user) : strlen(user);

	n = n < size - 1 ? n : size - 1;
	memcpy(out, user, n);
	out[n] = '\0';
	str_lower(out, n);
}

/* The three keys of (addr, user), in the order of rules[] (v[i] may point into norm, text
   or addr). */
struct keys {
	char norm[512], text[1024];
	char pair[KEY_MAX], user[KEY_MAX], addr[KEY_MAX];
	const char *v[NKEYS];
	enum shmtable_kind kind[NKEYS];
};

static void keys_make(struct keys *k, const char *addr, const char *user)
{
	user_norm(user, k->norm, sizeof(k->norm));
	snprintf(k->text, sizeof(k->text), "%s|%s", addr, k->norm);
	k->v[0] = shmtable_key(k->text, k->pair, sizeof(k->pair));
	k->v[1] = shmtable_key(k->norm, k->user, sizeof(k->user));
	k->v[2] = shmtable_key(addr, k->addr, sizeof(k->addr));
	for (int i = 0; i < NKEYS; i++)
		k->kind[i] = rules[i].kind;
}

/* Failures older than the window are forgotten. */
static void rec_expire(struct shmtable_rec *r, int64_t now)
{
	if (r != NULL && r->fails > 0 && now - r->last_ms >= AUTHGUARD_WINDOW_MS)
		r->fails = 0;
}

struct begin_arg {
	struct authguard_check *chk;
	bool no_wait;
};

static void begin_fn(struct shmtable_rec **recs, size_t n, int64_t now, void *arg)
{
	struct begin_arg *ba = arg;
	struct authguard_check *chk = ba->chk;
	int64_t start = now;

	for (size_t i = 0; i < n; i++)
		rec_expire(recs[i], now);
	chk->known = recs[0] != NULL && recs[0]->ok_ms != 0 &&
		     now - recs[0]->ok_ms < AUTHGUARD_KNOWN_MS;
	chk->pair = recs[0] != NULL ? recs[0]->fails : 0;
	chk->user = recs[1] != NULL ? recs[1]->fails : 0;
	chk->addr = recs[2] != NULL ? recs[2]->fails : 0;
	/* a known pair waits for its own slot only */
	for (size_t i = 0; i < (chk->known ? 1 : n); i++)
		if (recs[i] != NULL && recs[i]->next_ms > start)
			start = recs[i]->next_ms;
	if (ba->no_wait)
		start = now; /* starts at once, and is counted as any other */
	chk->wait_ms = start - now;
	chk->slot_ms = start;
	if ((chk->refused = chk->wait_ms > AUTHGUARD_HOLD_MAX_MS))
		return;
	/* counted as failed until it is known not to be */
	for (size_t i = 0; i < NCHARGED; i++) {
		struct shmtable_rec *r = recs[i];
		int64_t next;

		if (r == NULL)
			continue;
		r->fails++;
		r->last_ms = start;
		next = start + rule_delay(&rules[i], r->fails);
		r->next_ms = next > r->next_ms ? next : r->next_ms;
	}
}

void authguard_begin(struct authguard *g, uint64_t id, const char *proto, const char *addr,
		     const char *user, struct authguard_check *chk)
{
	struct keys k;
	char name[65];

	memset(chk, 0, sizeof(*chk));
	keys_make(&k, addr, user);
	shmtable_with(g->t, NKEYS, k.kind, k.v, begin_fn, &(struct begin_arg){ chk, g->no_wait });
	if (chk->wait_ms <= 0 && !chk->refused)
		return;
	str_log_name(name, sizeof(name), user);
	log_info("%016" PRIx64 " %s throttle addr=%s user=%s decision=%s wait_ms=%" PRId64
		 " failures=%" PRIu32 " user_failures=%" PRIu32 " addr_failures=%" PRIu32
		 " known=%s",
		 id, proto, addr, name, chk->refused ? "refuse" : "wait", chk->wait_ms, chk->pair,
		 chk->user, chk->addr, chk->known ? "yes" : "no");
}

static void ok_fn(struct shmtable_rec **recs, size_t n, int64_t now, void *arg)
{
	(void)arg;
	if (recs[0] != NULL) {
		recs[0]->fails = 0;
		recs[0]->next_ms = 0;
		recs[0]->ok_ms = now;
	}
	for (size_t i = 1; i < NCHARGED; i++)
		if (recs[i] != NULL && recs[i]->fails > 0)
			recs[i]->fails--;
}

static void temp_fn(struct shmtable_rec **recs, size_t n, int64_t now, void *arg)
{
	(void)now;
	(void)arg;
	for (size_t i = 0; i < NCHARGED; i++) {
		if (recs[i] == NULL || recs[i]->fails == 0)
			continue;
		if (--recs[i]->fails == 0)
			recs[i]->next_ms = 0;
	}
}

struct failed_arg {
	int64_t hold_ms;
};

static void failed_fn(struct shmtable_rec **recs, size_t n, int64_t now, void *arg)
{
	struct failed_arg *fa = arg;
	struct shmtable_rec *a = recs[NCHARGED];

	if (a != NULL) { /* the address's failure is counted now (not charged at the start) */
		int64_t next;

		rec_expire(a, now);
		a->fails++;
		a->last_ms = now;
		next = now + rule_delay(&rules[NCHARGED], a->fails);
		a->next_ms = next > a->next_ms ? next : a->next_ms;
	}
	/* the answer waits the pair's delay, and at least until the next check may start */
	fa->hold_ms = recs[0] != NULL ? rule_delay(&rules[0], recs[0]->fails) : 0;
	for (size_t i = 0; i < n; i++)
		if (recs[i] != NULL && recs[i]->next_ms - now > fa->hold_ms)
			fa->hold_ms = recs[i]->next_ms - now;
	if (fa->hold_ms > AUTHGUARD_HOLD_MAX_MS)
		fa->hold_ms = AUTHGUARD_HOLD_MAX_MS;
}

static void outcome(struct authguard *g, const char *addr, const char *user,
		    void (*fn)(struct shmtable_rec **, size_t, int64_t, void *), void *arg)
{
	struct keys k;

	keys_make(&k, addr, user);
	shmtable_with(g->t, NKEYS, k.kind, k.v, fn, arg);
}

void authguard_ok(struct authguard *g, const char *addr, const char *user)
{
	outcome(g, addr, user, ok_fn, NULL);
}

void authguard_temp(struct authguard *g, const char *addr, const char *user)
{
	outcome(g, addr, user, temp_fn, NULL);
}

int64_t authguard_failed(struct authguard *g, const char *addr, const char *user)
{
	struct failed_arg fa = { 0 };

	outcome(g, addr, user, failed_fn, &fa);
	return g->no_wait ? 0 : fa.hold_ms;
}

void authguard_no_wait(struct authguard *g)
{
	g->no_wait = true;
}
