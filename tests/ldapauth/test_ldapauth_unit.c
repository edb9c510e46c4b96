/* test_ldapauth_unit.c — the parts of ldapauth that need no directory: RFC 4515 filter
 * escaping, password schemes, the cache (bounds, TTLs, salted digests) and the users-file
 * backend through the public API (callbacks deferred, refusals, reload). */
#include <crypt.h>
#include <sys/wait.h>
#include <unistd.h>

#include "la_test.h"
#include "ldapauth/ldapauth_private.h"

static void test_filter_escaping(void **state)
{
	const char *t = "(&(objectClass=inetOrgPerson)(uid=%u))";
	char *f;

	f = ldapauth_filter_expand(t, "user7");
	assert_string_equal(f, "(&(objectClass=inetOrgPerson)(uid=user7))");
	free(f);
	f = ldapauth_filter_expand(t, "a)(uid=*");
	assert_string_equal(f, "(&(objectClass=inetOrgPerson)(uid=a\\29\\28uid=\\2A))");
	free(f);
	f = ldapauth_filter_expand(t, "user*");
	assert_string_equal(f, "(&(objectClass=inetOrgPerson)(uid=user\\2A))");
	free(f);
	f = ldapauth_filter_expand(t, "\\00");
	assert_string_equal(f, "(&(objectClass=inetOrgPerson)(uid=\\5C00))");
	free(f);
	f = ldapauth_filter_expand("(|(mail=%s)(uid=%u)(dc=%d)(x=100%%))", "Bob*@ex.com");
	assert_string_equal(f, "(|(mail=Bob\\2A@ex.com)(uid=Bob\\2A)(dc=ex.com)(x=100%))");
	free(f);
	assert_null(ldapauth_filter_expand("(uid=%x)", "a"));
	assert_false(ldapauth_filter_valid("(uid=%"));
}

static void test_passwd_schemes(void **state)
{
	struct crypt_data cd = { 0 };
	char *h;
	const char *c;

	h = make_ssha("{SSHA}", "SHA1", "secret");
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "secret"), 1);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "Secret"), 0);
	free(h);
	h = make_ssha("{ssha256}", "SHA256", "secret"); /* scheme names ignore case */
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "secret"), 1);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "secreT"), 0);
	free(h);
	h = make_ssha("{SSHA512}", "SHA512", "secret");
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "secret"), 1);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), ""), 0);
	free(h);
	c = crypt_rn("secret", "$6$heronsalt$", &cd, (int)sizeof(cd));
	assert_non_null(c);
	h = xasprintf("{CRYPT}%s", c);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "secret"), 1);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "secret2"), 0);
	free(h);
	/* {SCRAM-SHA-256} is of the SASLprep'd password (RFC 5802 Normalize, RFC 4013): "IX",
	   "I<SOFT HYPHEN>X" and <ROMAN NUMERAL NINE> are one password; a password SASLprep
	   refuses makes no secret */
	h = ldapauth_passwd_hash("SCRAM-SHA-256", "I\xc2\xadX", &c);
	assert_non_null(h);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "IX"), 1);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "I\xc2\xadX"), 1);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "\xe2\x85\xa8"), 1);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "ix"), 0);
	free(h);
	h = ldapauth_passwd_hash("SCRAM-SHA-256", "p\xc2\xa0w\xc3\xb6rd", &c);
	assert_non_null(h);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "p w\xc3\xb6rd"), 1);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "p wo\xcc\x88rd"), 1);
	free(h);
	assert_null(ldapauth_passwd_hash("SCRAM-SHA-256", "bell\x07", &c));
	assert_non_null(strstr(c, "SASLprep"));
	assert_null(ldapauth_passwd_hash("SCRAM-SHA-256",
					 "\xd8\xa7"
					 "1",
					 &c));
	assert_null(ldapauth_passwd_hash("SCRAM-SHA-256", "\xc8\xa1", &c)); /* unassigned */
	/* other schemes take the bytes as they are */
	h = ldapauth_passwd_hash("SSHA256", "I\xc2\xadX", &c);
	assert_int_equal(ldapauth_passwd_verify(h, strlen(h), "IX"), 0);
	free(h);
	/* cleartext and garbage are never accepted */
	assert_int_equal(ldapauth_passwd_verify("secret", 6, "secret"), -1);
	assert_int_equal(ldapauth_passwd_verify("{SSHA}!!!!", 10, "secret"), -1);
	assert_int_equal(ldapauth_passwd_verify("{SSHA}", 6, "secret"), -1);
	assert_int_equal(ldapauth_passwd_verify("{CRYPT}*", 8, "secret"), -1);
}

/* The workers' shared cache: a record read back whole, the password's digest, TTLs, negative
   entries, a record too big for a slot, a clear; and an entry put by a forked child (another
   worker) read by the parent. */
static void test_shared_cache(void **state)
{
	struct conf *c = conf_defaults();
	struct ldapauth_shared *sh;
	struct ldapauth_rec *r = ldapauth_rec_new(), *big = ldapauth_rec_new(), *got = NULL;
	char alias[300];
	pid_t pid;
	int status;

	(void)state;
	assert_int_equal(conf_set(c, "directory", "auth_cache_ttl", "1000ms", NULL), 0);
	assert_int_equal(conf_set(c, "directory", "negative_cache_ttl", "100ms", NULL), 0);
	assert_int_equal(conf_set(c, "directory", "auth_cache_size", "64", NULL), 0);
	assert_non_null(sh = ldapauth_shared_new(c));
	r->u.login = xstrdup("u1");
	r->u.address = xstrdup("u1@heron.test");
	r->u.dn = xstrdup("uid=u1,ou=people,dc=heron,dc=test");
	r->u.partition = 3;
	r->u.quota = 12345;
	ldapauth_rec_add_alias(r, "alias@heron.test", 16);
	assert_true(authshm_put(sh, "a:u1", r, "pw1", 0));
	assert_int_equal(authshm_get(sh, "a:u1", "pw1", 10, &got), AC_HIT);
	assert_string_equal(got->u.login, "u1");
	assert_string_equal(got->u.address, "u1@heron.test");
	assert_string_equal(got->u.dn, "uid=u1,ou=people,dc=heron,dc=test");
	assert_null(got->u.mailhost);
	assert_int_equal(got->u.partition, 3);
	assert_int_equal(got->u.quota, 12345);
	assert_int_equal(got->u.naliases, 1);
	assert_string_equal(got->u.aliases[0], "alias@heron.test");
	ldapauth_rec_unref(&got);
	assert_int_equal(authshm_get(sh, "a:u1", "pw2", 10, &got), AC_MISS);
	assert_null(got);
	assert_int_equal(authshm_get(sh, "a:u1", "pw1", 1000, &got), AC_MISS); /* its TTL */
	assert_true(authshm_put(sh, "a:nobody", NULL, NULL, 0));
	assert_int_equal(authshm_get(sh, "a:nobody", "x", 50, &got), AC_NEGATIVE);
	assert_int_equal(authshm_get(sh, "a:nobody", "x", 100, &got), AC_MISS);
	/* a record that does not fit a slot is left to the worker's own cache */
	big->u.login = xstrdup("big");
	memset(alias, 'a', sizeof(alias) - 1);
	alias[sizeof(alias) - 1] = '\0';
	ldapauth_rec_add_alias(big, alias, 299);
	ldapauth_rec_add_alias(big, alias, 298);
	assert_false(authshm_put(sh, "a:big", big, "pw", 0));
	assert_int_equal(authshm_get(sh, "a:big", "pw", 1, &got), AC_MISS);
	/* another worker's entry */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(authshm_put(sh, "l:u1@heron.test", r, NULL, 2000) ? 0 : 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(authshm_get(sh, "l:u1@heron.test", NULL, 2001, &got), AC_HIT);
	assert_string_equal(got->u.login, "u1");
	ldapauth_rec_unref(&got);
	assert_true(authshm_count(sh) >= 1);
	authshm_clear(sh);
	assert_int_equal(authshm_count(sh), 0);
	assert_int_equal(authshm_get(sh, "l:u1@heron.test", NULL, 2002, &got), AC_MISS);
	/* a worker killed while it holds the lock: the others go on, on an emptied table */
	assert_true(authshm_put(sh, "a:u1", r, "pw1", 3000));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		authshm_lock(sh);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(authshm_get(sh, "a:u1", "pw1", 3001, &got), AC_MISS);
	assert_null(got);
	assert_int_equal(authshm_count(sh), 0);
	assert_true(authshm_put(sh, "a:u1", r, "pw1", 3002));
	assert_int_equal(authshm_get(sh, "a:u1", "pw1", 3003, &got), AC_HIT);
	ldapauth_rec_unref(&got);
	assert_int_equal(authshm_count(sh), 1);
	ldapauth_rec_unref(&r);
	ldapauth_rec_unref(&big);
	ldapauth_shared_free(&sh);
	assert_null(sh);
	conf_free(&c);
}

static void test_cache(void **state)
{
	struct authcache *c = authcache_new(3, 1000, 100, 1 << 20);
	struct ldapauth_rec *r = ldapauth_rec_new(), *got = NULL;

	r->u.login = xstrdup("u1");
	authcache_put(c, "a:u1", r, "pw1", 0);
	assert_int_equal(authcache_get(c, "a:u1", "pw1", 10, &got), AC_HIT);
	assert_ptr_equal(got, r);
	ldapauth_rec_unref(&got);
	/* another password is a miss (it may have changed), never a hit or a negative */
	assert_int_equal(authcache_get(c, "a:u1", "pw2", 10, &got), AC_MISS);
	assert_null(got);
	/* negative entries and their shorter TTL */
	authcache_put(c, "a:nobody", NULL, NULL, 0);
	assert_int_equal(authcache_get(c, "a:nobody", "x", 50, &got), AC_NEGATIVE);
	assert_int_equal(authcache_get(c, "a:nobody", "x", 100, &got), AC_MISS);
	/* positive TTL */
	assert_int_equal(authcache_get(c, "a:u1", "pw1", 999, &got), AC_HIT);
	ldapauth_rec_unref(&got);
	assert_int_equal(authcache_get(c, "a:u1", "pw1", 1000, &got), AC_MISS);
	/* bounded: the least recently used goes first */
	authcache_put(c, "l:a", r, NULL, 2000);
	authcache_put(c, "l:b", r, NULL, 2000);
	authcache_put(c, "l:c", r, NULL, 2000);
	assert_int_equal(authcache_get(c, "l:a", NULL, 2001, &got), AC_HIT);
	ldapauth_rec_unref(&got);
	authcache_put(c, "l:d", r, NULL, 2002);
	assert_int_equal(authcache_count(c), 3);
	assert_int_equal(authcache_get(c, "l:b", NULL, 2003, &got), AC_MISS);
	assert_int_equal(authcache_get(c, "l:a", NULL, 2003, &got), AC_HIT);
	ldapauth_rec_unref(&got);
	authcache_clear(c);
	assert_int_equal(authcache_count(c), 0);
	authcache_free(&c);
	assert_null(c);
	ldapauth_rec_unref(&r);
	/* size 0 disables it */
	c = authcache_new(0, 1000, 1000, 1 << 20);
	r = ldapauth_rec_new();
	authcache_put(c, "a:x", r, "p", 0);
	assert_int_equal(authcache_get(c, "a:x", "p", 1, &got), AC_MISS);
	ldapauth_rec_unref(&r);
	authcache_free(&c);
}

static void test_cache_many(void **state)
{
	struct authcache *c = authcache_new(5000, 100000, 100000, 1 << 20);
	struct ldapauth_rec *r = ldapauth_rec_new(), *got = NULL;
	char key[32];

	for (int i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "l:%d", i);
		authcache_put(c, key, r, NULL, i);
	}
	assert_int_equal(authcache_count(c), 5000);
	assert_int_equal(authcache_get(c, "l:19999", NULL, 20000, &got), AC_HIT);
	ldapauth_rec_unref(&got);
	assert_int_equal(authcache_get(c, "l:14999", NULL, 20000, &got), AC_MISS);
	authcache_free(&c);
	ldapauth_rec_unref(&r);
}

/* Beside the shared cache a worker's own is cut to LDAPAUTH_PRIVATE_CACHE_MAX entries
   (ldapauth_use_shared), whatever auth_cache_size says; a smaller bound stays. */
static void test_cache_limit(void **state)
{
	struct authcache *c = authcache_new(500000, 100000, 100000, 1 << 20);
	struct ldapauth_rec *r = ldapauth_rec_new(), *got = NULL;
	char key[32];

	for (int i = 0; i < 3000; i++) {
		snprintf(key, sizeof(key), "l:%d", i);
		authcache_put(c, key, r, NULL, i);
	}
	authcache_limit(c, LDAPAUTH_PRIVATE_CACHE_MAX);
	assert_int_equal(authcache_count(c), LDAPAUTH_PRIVATE_CACHE_MAX);
	assert_int_equal(authcache_get(c, "l:2999", NULL, 3000, &got), AC_HIT);
	ldapauth_rec_unref(&got);
	assert_int_equal(authcache_get(c, "l:1000", NULL, 3000, &got), AC_MISS);
	for (int i = 3000; i < 6000; i++) {
		snprintf(key, sizeof(key), "l:%d", i);
		authcache_put(c, key, r, NULL, i);
	}
	assert_int_equal(authcache_count(c), LDAPAUTH_PRIVATE_CACHE_MAX);
	authcache_free(&c);
	c = authcache_new(3, 100000, 100000, 1 << 20);
	authcache_limit(c, LDAPAUTH_PRIVATE_CACHE_MAX);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "l:%d", i);
		authcache_put(c, key, r, NULL, i);
	}
	assert_int_equal(authcache_count(c), 3);
	authcache_free(&c);
	ldapauth_rec_unref(&r);
}

/* Unique unknown addresses fill the negative entries up to their memory bound, not to the
   entry count, and do not push out the users' entries. */
static void test_cache_negative_memory(void **state)
{
	const size_t bound = 256 * 1024;
	struct authcache *c = authcache_new(1000000, 10000000, 10000000, bound);
	struct ldapauth_rec *r = ldapauth_rec_new(), *got = NULL;
	size_t neg = 0, bytes;
	char key[300];

	authcache_put(c, "l:user1", r, NULL, 0);
	for (int i = 0; i < 200000; i++) {
		snprintf(key, sizeof(key), "l:unknown-%d-%0200d@heron.test", i, 0);
		authcache_put(c, key, NULL, NULL, i);
		bytes = authcache_negative_bytes(c, &neg);
		assert_true(bytes <= bound);
	}
	assert_true(neg > 100 && neg < 2000); /* ~400 bytes each */
	assert_int_equal(authcache_count(c), neg + 1);
	/* the newest unknown addresses are still known as unknown, the oldest are gone */
	assert_int_equal(authcache_get(c, key, NULL, 200000, &got), AC_NEGATIVE);
	snprintf(key, sizeof(key), "l:unknown-%d-%0200d@heron.test", 0, 0);
	assert_int_equal(authcache_get(c, key, NULL, 200000, &got), AC_MISS);
	assert_int_equal(authcache_get(c, "l:user1", NULL, 200000, &got), AC_HIT);
	ldapauth_rec_unref(&got);
	/* an entry replaced or expired gives its bytes back */
	authcache_clear(c);
	assert_int_equal(authcache_negative_bytes(c, &neg), 0);
	assert_int_equal(neg, 0);
	authcache_free(&c);
	ldapauth_rec_unref(&r);
}

static char users_path[] = "/tmp/heron-users-XXXXXX";

static void write_users(const char *extra)
{
	char *h7 = make_ssha("{SSHA}", "SHA1", "pw7");
	FILE *f = fopen(users_path, "w");
	struct crypt_data cd = { 0 };

	assert_non_null(f);
	fprintf(f, "# Heron users\n\n");
	fprintf(f, "user7:%s:user7@heron.test,alias7@heron.test:1G\n", h7);
	fprintf(f, "user8:{CRYPT}%s:user8@heron.test\n",
		crypt_rn("pw8", "$5$salt8$", &cd, (int)sizeof(cd)));
	fputs(extra, f);
	fclose(f);
	free(h7);
}

static struct ldapauth *file_backend(struct event_base *base, struct conf **c_r)
{
	struct conf *c = conf_defaults();
	struct ldapauth *la = NULL;
	char *err = NULL;

	setk(c, "directory", "backend", "file");
	setk(c, "directory", "users_file", users_path);
	setk(c, "directory", "scram", "yes");
	if (ldapauth_new(base, c, &la, &err) != 0)
		fail_msg("ldapauth_new: %s", err);
	*c_r = c;
	return la;
}

static void test_file_backend(void **state)
{
	struct event_base *base = event_base_new();
	struct conf *c;
	struct ldapauth *la;
	struct got g = { 0 };
	struct ldapauth_stats st;
	int fd = mkstemp(users_path);

	close(fd);
	write_users("");
	la = file_backend(base, &c);
	assert_string_equal(ldapauth_mode(la), "file");
	ldapauth_auth(la, "user7", "pw7", got_cb, &g);
	assert_int_equal(g.n, 0); /* never from inside the call */
	run_until(base, &g, 1, 2000);
	assert_int_equal(g.result, LDAPAUTH_OK);
	assert_string_equal(g.address, "user7@heron.test");
	assert_string_equal(g.alias0, "alias7@heron.test");
	assert_int_equal(g.quota, 1 << 30);
	assert_int_equal(g.partition, -1);
	ldapauth_auth(la, "USER8", "pw8", got_cb, &g);
	run_until(base, &g, 2, 2000);
	assert_int_equal(g.result, LDAPAUTH_OK);
	ldapauth_auth(la, "user8", "pw7", got_cb, &g);
	run_until(base, &g, 3, 2000);
	assert_int_equal(g.result, LDAPAUTH_EBADCRED);
	ldapauth_auth(la, "nobody", "pw7", got_cb, &g);
	run_until(base, &g, 4, 2000);
	assert_int_equal(g.result, LDAPAUTH_ENOUSER);
	ldapauth_lookup(la, "Alias7@heron.test", got_cb, &g);
	run_until(base, &g, 5, 2000);
	assert_int_equal(g.result, LDAPAUTH_OK);
	assert_string_equal(g.login, "user7");
	/* a user by login, no password (imapd's SETACL): found or not; counted apart */
	ldapauth_user(la, "USER8", got_cb, &g);
	run_until(base, &g, 6, 2000);
	assert_int_equal(g.result, LDAPAUTH_OK);
	assert_string_equal(g.login, "user8");
	ldapauth_user(la, "nobody", got_cb, &g);
	run_until(base, &g, 7, 2000);
	assert_int_equal(g.result, LDAPAUTH_ENOUSER);
	g.n -= 2; /* the counts below are as before these two */
	/* refused before any lookup: empty password, CR/LF, over-long names */
	ldapauth_auth(la, "user7", "", got_cb, &g);
	run_until(base, &g, 6, 2000);
	assert_int_equal(g.result, LDAPAUTH_EBADCRED);
	assert_true(g.refused);
	ldapauth_auth(la, "user7\r\nx", "pw7", got_cb, &g);
	run_until(base, &g, 7, 2000);
	assert_int_equal(g.result, LDAPAUTH_ENOUSER);
	assert_true(g.refused);
	ldapauth_auth(la, "user7", "pw7\n", got_cb, &g);
	run_until(base, &g, 8, 2000);
	assert_int_equal(g.result, LDAPAUTH_EBADCRED);
	assert_true(g.refused);
	/* a cancelled request's callback never runs */
	struct ldapauth_req *rq = ldapauth_auth(la, "user7", "pw7", got_cb, &g);
	ldapauth_cancel(&rq);
	assert_null(rq);
	run_for(base, 50);
	assert_int_equal(g.n, 8);
	/* reload (SIGHUP): a new user appears; a bad file keeps the old users */
	char *h9 = make_ssha("{SSHA512}", "SHA512", "pw9");
	char *line = xasprintf("user9:%s:user9@heron.test:0\n", h9);
	write_users(line);
	char *err = NULL;
	assert_int_equal(ldapauth_reload(la, &err), 0);
	ldapauth_auth(la, "user9", "pw9", got_cb, &g);
	run_until(base, &g, 9, 2000);
	assert_int_equal(g.result, LDAPAUTH_OK);
	write_users("broken line without fields\n");
	assert_int_equal(ldapauth_reload(la, &err), -1);
	assert_non_null(strstr(err, ":5:"));
	free(err);
	ldapauth_auth(la, "user9", "pw9", got_cb, &g);
	run_until(base, &g, 10, 2000);
	assert_int_equal(g.result, LDAPAUTH_OK);
	ldapauth_get_stats(la, &st);
	assert_int_equal(st.refused, 3);
	assert_int_equal(st.directory_calls, 0);
	free(h9);
	free(line);
	ldapauth_free(&la);
	assert_null(la);
	conf_free(&c);
	event_base_free(base);
	unlink(users_path);
}

/* cache_entries (the metrics' heron_directory_cache_worker_entries) counts the worker's own
   cache only: an answer kept in the shared table is not in it (summed over the workers, the
   table's count would be counted once per worker). */
static void test_stats_own_entries(void **state)
{
	struct event_base *base = event_base_new();
	struct conf *c;
	struct ldapauth *la;
	struct ldapauth_shared *sh;
	struct got g = { 0 };
	struct ldapauth_stats st;
	int fd = mkstemp(users_path);

	(void)state;
	close(fd);
	write_users("");
	la = file_backend(base, &c);
	assert_non_null(sh = ldapauth_shared_new(c));
	ldapauth_use_shared(la, sh);
	ldapauth_lookup(la, "nobody@heron.test", got_cb, &g);
	run_until(base, &g, 1, 2000);
	assert_int_equal(g.result, LDAPAUTH_ENOUSER);
	assert_int_equal(authshm_count(sh), 1);
	ldapauth_get_stats(la, &st);
	assert_int_equal(st.cache_entries, 0);
	ldapauth_free(&la);
	ldapauth_shared_free(&sh);
	conf_free(&c);
	event_base_free(base);
	unlink(users_path);
}

static void test_file_errors(void **state)
{
	struct conf *c = conf_defaults();
	struct ldapauth *la = NULL;
	struct event_base *base = event_base_new();
	char *err = NULL;

	setk(c, "directory", "backend", "file");
	setk(c, "directory", "users_file", "/nonexistent/heron-users");
	assert_int_equal(ldapauth_new(base, c, &la, &err), -1);
	assert_non_null(strstr(err, "/nonexistent/heron-users"));
	free(err);
	setk(c, "directory", "backend", "ldap");
	setk(c, "directory", "uri", "http://example.org/");
	assert_int_equal(ldapauth_new(base, c, &la, &err), -1);
	assert_non_null(strstr(err, "http://example.org/"));
	free(err);
	setk(c, "directory", "uri", "ldap://127.0.0.1:1/");
	setk(c, "directory", "user_filter", "(uid=%q)");
	assert_int_equal(ldapauth_new(base, c, &la, &err), -1);
	free(err);
	conf_free(&c);
	event_base_free(base);
}

/* SCRAM: the secret of a {SCRAM-SHA-256} user comes out without the password; a user with
   another scheme has none; the cache neither answers nor learns; bind mode has none. */
static void test_scram_secret(void **state)
{
	struct event_base *base = event_base_new();
	struct conf *c, *cb;
	struct ldapauth *la, *lb = NULL;
	struct got g = { 0 };
	const char *e = NULL;
	char *err = NULL, *h = ldapauth_passwd_hash("SCRAM-SHA-256", "pw9", &e);
	char *line = xasprintf("user9:%s:user9@heron.test\n", h);
	int fd = mkstemp(users_path);

	close(fd);
	write_users(line);
	la = file_backend(base, &c);
	assert_true(ldapauth_scram_capable(la));
	ldapauth_scram(la, "user9", got_cb, &g);
	assert_int_equal(g.n, 0);
	run_until(base, &g, 1, 2000);
	assert_int_equal(g.result, LDAPAUTH_OK);
	assert_string_equal(g.login, "user9");
	assert_string_equal(g.scram, h + strlen("{SCRAM-SHA-256}"));
	assert_false(g.cached);
	/* the password still logs in; a SCRAM request after it is not answered by the cache */
	ldapauth_auth(la, "user9", "pw9", got_cb, &g);
	run_until(base, &g, 2, 2000);
	assert_int_equal(g.result, LDAPAUTH_OK);
	assert_string_equal(g.scram, "");
	ldapauth_scram(la, "user9", got_cb, &g);
	run_until(base, &g, 3, 2000);
	assert_int_equal(g.result, LDAPAUTH_OK);
	assert_false(g.cached);
	/* a user whose hash is not SCRAM's, no such user, a refused name */
	ldapauth_scram(la, "user7", got_cb, &g);
	run_until(base, &g, 4, 2000);
	assert_int_equal(g.result, LDAPAUTH_EBADCRED);
	assert_string_equal(g.scram, "");
	assert_string_equal(g.login, "");
	ldapauth_scram(la, "nobody", got_cb, &g);
	run_until(base, &g, 5, 2000);
	assert_int_equal(g.result, LDAPAUTH_ENOUSER);
	ldapauth_scram(la, "user9\r\n", got_cb, &g);
	run_until(base, &g, 6, 2000);
	assert_int_equal(g.result, LDAPAUTH_ENOUSER);
	assert_true(g.refused);
	/* bind mode reads no password values: no secret, not capable */
	cb = conf_defaults();
	setk(cb, "directory", "uri", "ldap://127.0.0.1:1");
	setk(cb, "directory", "auth_mode", "bind");
	setk(cb, "directory", "scram", "yes");
	if (ldapauth_new(base, cb, &lb, &err) != 0)
		fail_msg("ldapauth_new: %s", err);
	assert_false(ldapauth_scram_capable(lb));
	ldapauth_scram(lb, "user9", got_cb, &g);
	run_until(base, &g, 7, 2000);
	assert_int_equal(g.result, LDAPAUTH_EBADCRED);
	assert_true(g.refused);
	ldapauth_free(&lb);
	conf_free(&cb);
	free(line);
	free(h);
	ldapauth_free(&la);
	conf_free(&c);
	event_base_free(base);
	unlink(users_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter_escaping),
		cmocka_unit_test(test_passwd_schemes),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_cache_many),
		cmocka_unit_test(test_cache_limit),
		cmocka_unit_test(test_shared_cache),
		cmocka_unit_test(test_cache_negative_memory),
		cmocka_unit_test(test_file_backend),
		cmocka_unit_test(test_stats_own_entries),
		cmocka_unit_test(test_file_errors),
		cmocka_unit_test(test_scram_secret),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
