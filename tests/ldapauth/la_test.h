/* la_test.h — helpers shared by the ldapauth tests: collect replies and run the loop until
 * they arrive (bounded in time), build configs, make password hashes. */
#ifndef HERON_LA_TEST_H
#define HERON_LA_TEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/event.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "common/conf.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"

struct got {
	int n;                       /* replies received */
	enum ldapauth_result result; /* the last one */
	bool cached, refused;
	char login[128], address[256], dn[256], host[128], alias0[256];
	int partition;
	uint64_t quota;
	size_t naliases;
	int counts[4];   /* replies per result */
	char scram[256]; /* ldapauth_scram's secret ("" when none) */
};

static inline void got_cb(const struct ldapauth_reply *rep, void *arg)
{
	struct got *g = arg;

	g->n++;
	g->counts[rep->result]++;
	g->result = rep->result;
	g->cached = rep->cached;
	g->refused = rep->refused;
	g->login[0] = g->address[0] = g->dn[0] = g->host[0] = g->alias0[0] = '\0';
	snprintf(g->scram, sizeof(g->scram), "%s", rep->scram != NULL ? rep->scram : "");
	if (rep->user != NULL) {
		snprintf(g->login, sizeof(g->login), "%s", rep->user->login);
		snprintf(g->address, sizeof(g->address), "%s",
			 rep->user->address ? rep->user->address : "");
		snprintf(g->dn, sizeof(g->dn), "%s", rep->user->dn ? rep->user->dn : "");
		snprintf(g->host, sizeof(g->host), "%s",
			 rep->user->mailhost ? rep->user->mailhost : "");
		if (rep->user->naliases > 0)
			snprintf(g->alias0, sizeof(g->alias0), "%s", rep->user->aliases[0]);
		g->naliases = rep->user->naliases;
		g->partition = rep->user->partition;
		g->quota = rep->user->quota;
	}
}

static inline void stop_cb(evutil_socket_t fd, short what, void *arg)
{
	*(bool *)arg = true;
}

/* Runs base until g->n reaches want or max_ms passes. */
static inline void run_until(struct event_base *base, struct got *g, int want, int max_ms)
{
	bool expired = false;
	struct timeval tv = { max_ms / 1000, (max_ms % 1000) * 1000 };
	struct event *t = evtimer_new(base, stop_cb, &expired);

	evtimer_add(t, &tv);
	while (g->n < want && !expired)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(t);
}

/* Runs the loop for ms milliseconds (lets timers and TTLs pass). */
static inline void run_for(struct event_base *base, int ms)
{
	struct got none = { 0 };

	run_until(base, &none, 1, ms);
}

static inline void setk(struct conf *c, const char *sec, const char *key, const char *val)
{
	char *err = NULL;

	if (conf_set(c, sec, key, val, &err) != 0)
		fail_msg("conf_set %s.%s=%s: %s", sec, key, val, err);
}

/* "{SSHA}" + base64(SHA1(pw || salt) || salt), as slapd stores it. */
static inline char *make_ssha(const char *scheme, const char *md_name, const char *pw)
{
	unsigned char raw[EVP_MAX_MD_SIZE + 8], out[256];
	unsigned int dlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int n;

	assert_int_equal(RAND_bytes(raw + 64, 8), 1);
	assert_int_equal(EVP_DigestInit_ex(ctx, EVP_get_digestbyname(md_name), NULL), 1);
	EVP_DigestUpdate(ctx, pw, strlen(pw));
	EVP_DigestUpdate(ctx, raw + 64, 8);
	EVP_DigestFinal_ex(ctx, raw, &dlen);
	EVP_MD_CTX_free(ctx);
	memmove(raw + dlen, raw + 64, 8);
	n = EVP_EncodeBlock(out, raw, (int)dlen + 8);
	return xasprintf("%s%.*s", scheme, n, (const char *)out);
}

#endif
