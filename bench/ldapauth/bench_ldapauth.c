/* bench_ldapauth.c — throughput of ldapauth against the slapd of bench/ldapauth/run:
 * authentications per second cold (every one goes to the directory) and warm (the cache
 * answers), in bind and lookup modes, and recipient lookups per second. Prints figures; asserts
 * nothing. Environment: LDAP_URI, LDAP_PEOPLE, LDAP_ADMIN_DN, LDAP_ADMIN_PASSWORD_FILE (from
 * the fixture's ldap.env). Arguments: USERS COUNT WINDOW POOL. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "ldapauth/ldapauth.h"

struct bench {
	struct event_base *base;
	struct ldapauth *la;
	bool lookup;
	unsigned users, count, window;
	unsigned sent, done, ok, temp;
	char names[64][64]; /* one buffer per window slot is enough: copied by the library */
};

static void send_one(struct bench *b);

static void bench_cb(const struct ldapauth_reply *rep, void *arg)
{
	struct bench *b = arg;

	b->done++;
	b->ok += rep->result == LDAPAUTH_OK;
	b->temp += rep->result == LDAPAUTH_ETEMP;
	if (b->sent < b->count)
		send_one(b);
}

static void send_one(struct bench *b)
{
	char *name = b->names[b->sent % 64];
	/* users spread over the whole directory, in the same order on every pass */
	unsigned k = 1 + (unsigned)(((uint64_t)b->sent * 7919) % b->users);

	b->sent++;
	if (b->lookup) {
		snprintf(name, sizeof(b->names[0]), "user%u@heron.test", k);
		ldapauth_lookup(b->la, name, bench_cb, b);
	} else {
		snprintf(name, sizeof(b->names[0]), "user%u", k);
		ldapauth_auth(b->la, name, name, bench_cb, b);
	}
}

static void run_pass(struct bench *b, const char *label)
{
	struct ldapauth_stats st0, st1;
	double t0 = clock_mono_seconds(), t;

	ldapauth_get_stats(b->la, &st0);
	b->sent = b->done = b->ok = b->temp = 0;
	for (unsigned i = 0; i < b->window && b->sent < b->count; i++)
		send_one(b);
	while (b->done < b->count && clock_mono_seconds() - t0 < 300)
		event_base_loop(b->base, EVLOOP_ONCE);
	t = clock_mono_seconds() - t0;
	ldapauth_get_stats(b->la, &st1);
	printf("%-28s %7u ops %8.3f s %10.0f /s  ok=%u temp=%u cache_hits=%llu "
	       "directory_calls=%llu\n",
	       label, b->done, t, b->done / t, b->ok, b->temp,
	       (unsigned long long)(st1.cache_hits - st0.cache_hits),
	       (unsigned long long)(st1.directory_calls - st0.directory_calls));
	fflush(stdout);
}

static struct ldapauth *open_la(struct event_base *base, const char *mode, const char *pool,
				const char *cache)
{
	struct conf *c = conf_defaults();
	struct ldapauth *la = NULL;
	char *err = NULL;
	const char *kv[][2] = {
		{ "uri", getenv("LDAP_URI") },
		{ "base", getenv("LDAP_PEOPLE") },
		{ "auth_mode", mode },
		{ "pool_size", pool },
		{ "auth_cache_size", cache },
		{ "bind_dn", getenv("LDAP_ADMIN_DN") },
		{ "bind_password_file", getenv("LDAP_ADMIN_PASSWORD_FILE") },
	};

	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		if (kv[i][1] == NULL || conf_set(c, "directory", kv[i][0], kv[i][1], &err) != 0)
			fatalx("config %s: %s", kv[i][0], err ? err : "not in the environment");
	if (ldapauth_new(base, c, &la, &err) != 0)
		fatalx("ldapauth: %s", err);
	conf_free(&c);
	return la;
}

int main(int argc, char **argv)
{
	struct bench b = { 0 };
	const char *pool = argc > 4 ? argv[4] : "4";
	const char *modes[] = { "bind", "lookup" };

	log_init("bench-ldapauth", true, 0);
	signal(SIGPIPE, SIG_IGN); /* see ldapauth.h */
	b.users = argc > 1 ? (unsigned)atoi(argv[1]) : 100000;
	b.count = argc > 2 ? (unsigned)atoi(argv[2]) : 20000;
	b.window = argc > 3 ? (unsigned)atoi(argv[3]) : 64;
	if (b.users == 0 || b.count == 0 || b.window == 0 || b.window > 64)
		fatalx("usage: bench_ldapauth USERS COUNT WINDOW(1-64) POOL");
	b.base = event_base_new();
	printf("ldapauth: users=%u ops/pass=%u in-flight=%u pool_size=%s\n", b.users, b.count,
	       b.window, pool);
	for (int m = 0; m < 2; m++) {
		char label[64];

		b.la = open_la(b.base, modes[m], pool, "500000");
		b.lookup = false;
		snprintf(label, sizeof(label), "auth %s cold (directory)", modes[m]);
		run_pass(&b, label);
		snprintf(label, sizeof(label), "auth %s warm (cache)", modes[m]);
		run_pass(&b, label);
		ldapauth_free(&b.la);
	}
	b.la = open_la(b.base, "bind", pool, "0");
	b.lookup = true;
	run_pass(&b, "lookup (directory)");
	ldapauth_free(&b.la);
	b.la = open_la(b.base, "bind", pool, "500000");
	run_pass(&b, "lookup cold (directory)");
	run_pass(&b, "lookup warm (cache)");
	ldapauth_free(&b.la);
	event_base_free(b.base);
	return 0;
}
