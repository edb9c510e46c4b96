/* test_conf.c — heron.conf parsing: types, bounds, includes, errors naming file:line, CIDR
 * matching, -t output, and that etc/heron.conf documents every key with its default. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "common/conf.h"
#include "common/str.h"
#include "common/xmalloc.h"

static char tmpdir[] = "/tmp/heron-conf-XXXXXX";

static char *write_file(const char *name, const char *text)
{
	char *path = xasprintf("%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Loads text as a file; returns the error (malloc'd) or NULL and the conf in *c_r. */
static char *load_text(const char *text, struct conf **c_r)
{
	char *path = write_file("t.conf", text), *err = NULL;
	struct conf *c = NULL;

	if (conf_load(path, &c, &err) == 0) {
		if (c_r != NULL)
			*c_r = c;
		else
			conf_free(&c);
	}
	free(path);
	return err;
}

static void test_defaults(void **state)
{
	struct conf *c = conf_defaults();

	assert_string_equal(conf_values(c)->store.path, "/var/lib/heron/store");
	assert_int_equal(conf_values(c)->mtad.max_recipients_per_transaction, 1500);
	assert_int_equal(conf_values(c)->mtad.reject_recipients_per_transaction, 2500);
	assert_int_equal(conf_values(c)->directory.auth_cache_size, 500000);
	assert_int_equal(conf_values(c)->directory.auth_cache_ttl_ms, 2 * 3600 * 1000);
	assert_int_equal(conf_values(c)->mtad.max_message_size, 50 << 20);
	assert_false(conf_values(c)->imapd.allow_plaintext_auth);
	assert_string_equal(conf_origin(c, "store", "path"), "default");
	const struct conf_list *rs = conf_values(c)->mtad.retry_schedule;
	assert_int_equal(rs->n, 5);
	assert_int_equal(rs->ms[0], 60000);
	assert_int_equal(rs->ms[4], 7200000);
	conf_free(&c);
	assert_null(c);
}

static void test_values(void **state)
{
	struct conf *c = NULL;
	char *err = load_text("# a comment\n"
			      "[store]\n"
			      "path = /srv/mail   # inline comment\n"
			      "partitions=8\n"
			      "map_size = 2G\n"
			      "\n"
			      "[mtad]\n"
			      "listen = 127.0.0.1:2525, [::1]:2525, *:25\n"
			      "lmtp = /run/heron/lmtp.sock\n"
			      "trusted_networks = 10.0.0.0/8, ::1, 192.168.1.7\n"
			      "local_domains = heron.test, Example.ORG\n"
			      "command_timeout = 90s\n"
			      "auth_require_tls = off\n"
			      "bare_lf = normalize\n",
			      &c);
	assert_null(err);
	assert_string_equal(conf_values(c)->store.path, "/srv/mail");
	assert_int_equal(conf_values(c)->store.partitions, 8);
	assert_true(conf_values(c)->store.map_size == (2LL << 30));
	assert_true(strstr(conf_origin(c, "store", "partitions"), "t.conf:4") != NULL);
	assert_string_equal(conf_text(c, "mtad", "command_timeout"), "90s");
	assert_string_equal(conf_text(c, "mtad", "relay_host"), "");
	const struct conf_addrs *a = conf_values(c)->mtad.listen;
	assert_int_equal(a->n, 3);
	assert_string_equal(a->v[0].host, "127.0.0.1");
	assert_string_equal(a->v[0].port, "2525");
	assert_string_equal(a->v[1].host, "::1");
	assert_string_equal(a->v[2].host, "*");
	const struct conf_addrs *l = conf_values(c)->mtad.lmtp;
	assert_int_equal(l->n, 1);
	assert_true(l->v[0].unix_path);
	assert_null(l->v[0].port);
	assert_int_equal(conf_values(c)->mtad.command_timeout_ms, 90000);
	assert_false(conf_values(c)->mtad.auth_require_tls);
	assert_int_equal(conf_values(c)->mtad.bare_lf, MTAD_BARE_LF_NORMALIZE);
	const struct conf_list *d = conf_values(c)->mtad.local_domains;
	assert_true(conf_list_has(d, "example.org", 11));
	assert_false(conf_list_has(d, "example.com", 11));

	const struct conf_cidrs *t = conf_values(c)->mtad.trusted_networks;
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	inet_pton(AF_INET, "10.200.3.4", &s4.sin_addr);
	assert_true(conf_cidrs_match(t, (struct sockaddr *)&s4));
	inet_pton(AF_INET, "11.0.0.1", &s4.sin_addr);
	assert_false(conf_cidrs_match(t, (struct sockaddr *)&s4));
	inet_pton(AF_INET, "127.0.0.1", &s4.sin_addr);
	assert_false(conf_cidrs_match(t, (struct sockaddr *)&s4)); /* loopback not implied */
	inet_pton(AF_INET6, "::1", &s6.sin6_addr);
	assert_true(conf_cidrs_match(t, (struct sockaddr *)&s6));
	inet_pton(AF_INET6, "::ffff:192.168.1.7", &s6.sin6_addr); /* v4-mapped */
	assert_true(conf_cidrs_match(t, (struct sockaddr *)&s6));
	inet_pton(AF_INET6, "::ffff:192.168.1.8", &s6.sin6_addr);
	assert_false(conf_cidrs_match(t, (struct sockaddr *)&s6));
	conf_free(&c);
}

static void expect_error(const char *text, const char *where, const char *what)
{
	char *err = load_text(text, NULL);

	assert_non_null(err);
	if (strstr(err, where) == NULL || strstr(err, what) == NULL)
		fail_msg("error \"%s\" lacks \"%s\" or \"%s\"", err, where, what);
	free(err);
}

static void test_errors(void **state)
{
	expect_error("[nosuch]\n", "t.conf:1", "unknown section [nosuch]");
	expect_error("[store]\n\nbogus = 1\n", "t.conf:3", "unknown key \"bogus\"");
	expect_error("path = /x\n", "t.conf:1", "outside any [section]");
	expect_error("[store]\npartitions = 0\n", "t.conf:2", "from 1 to 1024");
	expect_error("[store]\npartitions = lots\n", "t.conf:2", "whole number");
	expect_error("[store]\nmap_size = 12Q\n", "t.conf:2", "size");
	expect_error("[mtad]\ncommand_timeout = soon\n", "t.conf:2", "duration");
	expect_error("[mtad]\nauth_require_tls = perhaps\n", "t.conf:2", "yes or no");
	expect_error("[mtad]\nbare_lf = ignore\n", "t.conf:2", "one of reject|normalize");
	expect_error("[mtad]\nlisten = localhost\n", "t.conf:2", "host:port");
	expect_error("[mtad]\nlisten = 1.2.3.4:99999\n", "t.conf:2", "host:port");
	expect_error("[mtad]\ntrusted_networks = 10.0.0.0/33\n", "t.conf:2", "network");
	expect_error("[mtad]\nretry_schedule = 1m,,5m\n", "t.conf:2", "empty item");
	expect_error("[mtad]\njust some words\n", "t.conf:2", "key = value");
	expect_error("[store\n", "t.conf:1", "bad section header");
	expect_error("include nosuchfile.conf\n", "nosuchfile.conf", "cannot open");
	/* an overlong line is refused, not truncated */
	char *longl = xmalloc(10000);
	memset(longl, 'a', 9998);
	longl[9998] = '\n';
	longl[9999] = '\0';
	expect_error(longl, "t.conf:1", "longer than");
	free(longl);
}

static void test_include_and_set(void **state)
{
	char *inc = write_file("inc.conf", "[imapd]\nworkers = 3\n[store]\nbad = 1\n");
	char *err = NULL;
	struct conf *c = NULL;

	/* the error names the included file's line */
	expect_error("include inc.conf\n", "inc.conf:4", "unknown key \"bad\"");
	free(write_file("inc.conf", "[imapd]\nworkers = 3\n"));
	err = load_text("[store]\npath=/a\ninclude inc.conf\n[store]\npartitions = 2\n", &c);
	assert_null(err);
	assert_int_equal(conf_values(c)->imapd.workers, 3);
	assert_int_equal(conf_values(c)->store.partitions, 2);
	/* includes that loop are stopped */
	free(write_file("loop.conf", "include loop.conf\n"));
	expect_error("include loop.conf\n", "loop.conf", "nested deeper");
	assert_int_equal(conf_set(c, "sink", "listen", "127.0.0.1:2000", &err), 0);
	assert_string_equal(conf_values(c)->sink.listen->v[0].port, "2000");
	assert_int_equal(conf_set(c, "sink", "nope", "1", &err), -1);
	assert_non_null(strstr(err, "unknown key"));
	free(err);
	assert_int_equal(conf_set(c, "sink", "workers", "x", &err), -1);
	free(err);
	assert_int_equal(conf_values(c)->sink.workers, 1); /* default kept */
	conf_free(&c);
	free(inc);
}

/* The typed values: filled from the defaults, updated by conf_set, the default kept after a
   refused value; every enum field numbers its choices in the table's order. */
static void test_typed(void **state)
{
	static const struct {
		const char *section, *key, *choice;
		size_t off;
		int want;
	} enums[] = {
#define E(s, k, ch, want) { #s, #k, ch, offsetof(struct heron_conf, s.k), want }
		E(directory, backend, "ldap", DIRECTORY_BACKEND_LDAP),
		E(directory, backend, "file", DIRECTORY_BACKEND_FILE),
		E(directory, scope, "sub", DIRECTORY_SCOPE_SUB),
		E(directory, scope, "one", DIRECTORY_SCOPE_ONE),
		E(directory, scope, "base", DIRECTORY_SCOPE_BASE),
		E(directory, auth_mode, "bind", DIRECTORY_AUTH_BIND),
		E(directory, auth_mode, "lookup", DIRECTORY_AUTH_LOOKUP),
		E(tls, min_version, "TLSv1.2", TLS_MIN_V1_2),
		E(tls, min_version, "TLSv1.3", TLS_MIN_V1_3),
		E(mtad, bare_lf, "reject", MTAD_BARE_LF_REJECT),
		E(mtad, bare_lf, "normalize", MTAD_BARE_LF_NORMALIZE),
		E(log, target, "syslog", LOG_TARGET_SYSLOG),
		E(log, target, "stderr", LOG_TARGET_STDERR),
		E(log, target, "file", LOG_TARGET_FILE),
		E(log, level, "err", LOG_LVL_ERR),
		E(log, level, "warn", LOG_LVL_WARN),
		E(log, level, "info", LOG_LVL_INFO),
		E(log, level, "debug", LOG_LVL_DEBUG),
		E(log, facility, "mail", LOG_FACILITY_MAIL),
		E(log, facility, "user", LOG_FACILITY_USER),
		E(log, facility, "local0", LOG_FACILITY_LOCAL0),
		E(log, facility, "local7", LOG_FACILITY_LOCAL7),
		E(sink, records, "stamped", SINK_RECORDS_STAMPED),
		E(sink, records, "all", SINK_RECORDS_ALL),
		E(dns, dnssec, "validate", DNS_DNSSEC_VALIDATE),
		E(dns, dnssec, "trust-ad", DNS_DNSSEC_TRUST_AD),
		E(dns, dnssec, "off", DNS_DNSSEC_OFF),
#undef E
	};
	struct conf *c = conf_defaults();
	const struct heron_conf *v = conf_values(c);
	char *err = NULL;

	assert_string_equal(v->directory.uri, "ldap://127.0.0.1/");
	assert_int_equal(v->directory.timeout_ms, 5000);
	assert_int_equal(v->directory.auth_cache_ttl_ms, 2 * 3600 * 1000);
	assert_int_equal(v->directory.auth_cache_size, 500000);
	assert_int_equal(v->directory.alias_attributes->n, 2);
	assert_string_equal(v->directory.alias_attributes->v[1], "mailAlternateAddress");
	assert_false(v->directory.starttls);
	assert_string_equal(v->tls.cert, "");
	assert_string_equal(v->store.path, "/var/lib/heron/store");
	assert_int_equal(v->store.map_size, 1 << 30);
	assert_int_equal(v->store.group_commit_delay_ms, 2);
	assert_false(v->store.group_commit_syncfs);
	for (size_t i = 0; i < sizeof(enums) / sizeof(enums[0]); i++) {
		assert_int_equal(conf_set(c, enums[i].section, enums[i].key, enums[i].choice,
					  &err),
				 0);
		assert_int_equal(*(const int *)(const void *)((const char *)v + enums[i].off),
				 enums[i].want);
	}
	assert_int_equal(conf_set(c, "directory", "timeout", "2m", &err), 0);
	assert_int_equal(v->directory.timeout_ms, 120000);
	assert_int_equal(conf_set(c, "directory", "timeout", "forever", &err), -1);
	free(err);
	assert_int_equal(v->directory.timeout_ms, 5000);
	assert_int_equal(conf_set(c, "directory", "alias_attributes", "a, b, c", &err), 0);
	assert_int_equal(v->directory.alias_attributes->n, 3);
	assert_int_equal(conf_set(c, "directory", "starttls", "yes", &err), 0);
	assert_true(v->directory.starttls);
	conf_free(&c);
}

/* Every row of the table names its own field of struct heron_conf (conf_defaults checks
   that the field has the key's type). */
static void test_fields(void **state)
{
	for (size_t i = 0; i < conf_nkeys; i++) {
		const struct conf_key *k = &conf_keys[i];

		if (k->field == CONF_F_NONE)
			fail_msg("%s.%s names no field (CONF_AT in conf_keys.c)", k->section,
				 k->name);
		for (size_t j = 0; j < i; j++) {
			const struct conf_key *o = &conf_keys[j];

			if (k->off < o->off + o->field_size && o->off < k->off + k->field_size)
				fail_msg("%s.%s and %s.%s share a field", k->section, k->name,
					 o->section, o->name);
		}
	}
	conf_free(&(struct conf *){ conf_defaults() });
}

static void test_dump(void **state)
{
	struct conf *c = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	assert_null(load_text("[imapd]\nworkers = 5\n", &c));
	f = open_memstream(&buf, &len);
	conf_dump(c, f);
	fclose(f);
	assert_non_null(strstr(buf, "[imapd]\n"));
	assert_non_null(strstr(buf, "workers = 5    # "));
	assert_non_null(strstr(buf, "max_recipients_per_transaction = 1500\n"));
	free(buf);
	conf_free(&c);
}

/* -n: only what differs from the defaults, by value (an explicit default, spelled otherwise,
   is not a change), in the sections asked for. */
static void test_dump_changed(void **state)
{
	static const char *const sections[] = { "imapd", "log", NULL };
	struct conf *c = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	assert_null(load_text("[imapd]\nworkers = 5\nallow_plaintext_auth = off\n"
			      "idle_timeout = 1800s\n[log]\nlevel = debug\n[mtad]\nworkers = 3\n",
			      &c));
	f = open_memstream(&buf, &len);
	conf_dump_changed(c, sections, f);
	fclose(f);
	assert_string_equal(buf, "[imapd]\nworkers = 5\n\n[log]\nlevel = debug\n");
	free(buf);
	f = open_memstream(&buf, &len);
	conf_dump_changed(c, NULL, f);
	fclose(f);
	assert_non_null(strstr(buf, "[mtad]\nworkers = 3\n"));
	free(buf);
	conf_free(&c);
}

/* Every key of the table appears in etc/heron.conf, in its section, as "#key = default" or
   "key = default", and the shipped file itself loads. */
static void test_documented(void **state)
{
	const char *path = HERON_SOURCE_ROOT "/etc/heron.conf";
	FILE *f = fopen(path, "r");
	char line[4096], section[64] = "";
	bool *seen = xcalloc(conf_nkeys, sizeof(bool));
	struct conf *c = NULL;
	char *err = NULL;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		struct str_view v = str_trim(str_view_of(line));

		if (v.len > 2 && v.p[0] == '[') {
			snprintf(section, sizeof(section), "%.*s", (int)v.len - 2, v.p + 1);
			continue;
		}
		if (v.len > 0 && v.p[0] == '#') {
			v.p++;
			v.len--;
		}
		const char *eq = memchr(v.p, '=', v.len);
		if (eq == NULL)
			continue;
		struct str_view k = str_trim((struct str_view){ v.p, (size_t)(eq - v.p) });
		struct str_view d = str_trim(
			(struct str_view){ eq + 1, (size_t)(v.p + v.len - eq - 1) });
		for (size_t i = 0; i < conf_nkeys; i++)
			if (strcmp(conf_keys[i].section, section) == 0 &&
			    strlen(conf_keys[i].name) == k.len &&
			    memcmp(conf_keys[i].name, k.p, k.len) == 0 &&
			    strlen(conf_keys[i].def) == d.len &&
			    memcmp(conf_keys[i].def, d.p, d.len) == 0)
				seen[i] = true;
	}
	fclose(f);
	for (size_t i = 0; i < conf_nkeys; i++)
		if (!seen[i])
			fail_msg("etc/heron.conf does not document [%s] %s = %s",
				 conf_keys[i].section, conf_keys[i].name, conf_keys[i].def);
	free(seen);
	if (conf_load(path, &c, &err) < 0)
		fail_msg("etc/heron.conf does not load: %s", err);
	conf_free(&c);
}

static int setup(void **state)
{
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
	char *cmd = xasprintf("rm -rf %s", tmpdir);
	int r = system(cmd);

	free(cmd);
	return r == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),   cmocka_unit_test(test_values),
		cmocka_unit_test(test_errors),     cmocka_unit_test(test_include_and_set),
		cmocka_unit_test(test_typed),      cmocka_unit_test(test_fields),
		cmocka_unit_test(test_dump),       cmocka_unit_test(test_dump_changed),
		cmocka_unit_test(test_documented),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
