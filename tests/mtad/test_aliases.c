/* test_aliases.c — the aliases map (mtad/aliases.c): the file format (comments, continuation
 * lines, lists, full-address names, CRLF), every refusal naming its line, and the expansion
 * (nested aliases, a name in its own list, duplicates once in any case, loops and the depth
 * and fan-out bounds), including input fed one byte shorter at a time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mtad/aliases.h"

static char d1[] = "heron.test", d2[] = "other.test";
static char *domains[] = { d1, d2 };
static const struct aliases_ctx ctx = { domains, 2, 100 };

static struct aliases *parse_ok(const char *text)
{
	struct aliases *al = NULL;
	char *err = NULL;

	if (aliases_parse(text, strlen(text), "aliases", &al, &err) < 0)
		fail_msg("parse: %s", err);
	return al;
}

static void parse_err(const char *text, const char *want)
{
	struct aliases *al = NULL;
	char *err = NULL;

	assert_int_equal(aliases_parse(text, strlen(text), "aliases", &al, &err), -1);
	assert_null(al);
	assert_non_null(err);
	if (strstr(err, want) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", err, want);
	free(err);
}

/* The expansion of addr as one string "a b c", or "-" (no alias), or "!why". */
static void expect(const struct aliases *al, const char *addr, const char *want)
{
	char **v = NULL, got[2048] = "";
	size_t n = 0;
	const char *err = NULL;
	int rc = aliases_expand(al, &ctx, addr, &v, &n, &err);

	if (rc == 0)
		snprintf(got, sizeof(got), "-");
	else if (rc < 0)
		snprintf(got, sizeof(got), "!%s", err);
	for (size_t i = 0; rc == 1 && i < n; i++) {
		if (i > 0)
			strcat(got, " ");
		strcat(got, v[i]);
	}
	aliases_strv_free(&v, n);
	assert_string_equal(got, want);
}

static void test_format(void **state)
{
	struct aliases *al = parse_ok("# comment\r\n"
				      "\n"
				      "Team: alice, bob@heron.test,\r\n"
				      "\tpartner@example.org\r\n"
				      "  # a comment inside the entry\n"
				      "      carol\n"
				      "sales@heron.test:dave\n"
				      "spaces :  erin   frank,,grace\n");

	assert_int_equal(aliases_count(al), 3);
	expect(al, "team@heron.test",
	       "alice@heron.test bob@heron.test partner@example.org "
	       "carol@heron.test");
	expect(al, "TEAM@other.test",
	       "alice@heron.test bob@heron.test partner@example.org "
	       "carol@heron.test");
	expect(al, "team@example.org", "-"); /* a local part: local domains only */
	expect(al, "sales@heron.test", "dave@heron.test");
	expect(al, "sales@other.test", "-"); /* a full address: only that one */
	expect(al, "spaces@heron.test", "erin@heron.test frank@heron.test grace@heron.test");
	expect(al, "nobody@heron.test", "-");
	aliases_free(&al);
	assert_null(al);
	aliases_free(&al);
}

static void test_empty(void **state)
{
	struct aliases *al = parse_ok("");

	assert_int_equal(aliases_count(al), 0);
	expect(al, "x@heron.test", "-");
	expect(NULL, "x@heron.test", "-");
	aliases_free(&al);
	al = parse_ok("# only comments\n\n   \n");
	assert_int_equal(aliases_count(al), 0);
	aliases_free(&al);
}

static void test_refusals(void **state)
{
	parse_err("a: b\nno colon here\n", "aliases:2: expected name: target");
	parse_err("a:\n", "aliases:1: alias without targets");
	parse_err("a: |/bin/sh\n", "aliases:1: command targets are not supported");
	parse_err("a: /var/mail/x\n", "aliases:1: file targets are not supported");
	parse_err("a: :include:/etc/list\n", ":include: targets are not supported");
	parse_err("  b\n", "aliases:1: continuation line without an entry");
	parse_err("a: b\nx: y\nA: c\n", "aliases:3: a already defined on line 1");
	parse_err("a: b@@c\n", "more than one @");
	parse_err("a: @c\n", "incomplete address");
	parse_err("a: b@\n", "incomplete address");
	parse_err("a b: c\n", "invalid character");
	parse_err("a: \"b c\"\n", "invalid character");
	{
		struct aliases *al = NULL;
		char *err = NULL;
		const char t[] = "a: b\nc: d\0e\n";

		assert_int_equal(aliases_parse(t, sizeof(t) - 1, "f", &al, &err), -1);
		assert_string_equal(err, "f:2: NUL byte");
		free(err);
	}
	{
		char name[ALIASES_ADDR_MAX + 10];

		memset(name, 'x', sizeof(name) - 1);
		name[sizeof(name) - 1] = '\0';
		char *t = NULL;
		assert_true(asprintf(&t, "%s: y\n", name) > 0);
		parse_err(t, "address too long");
		free(t);
	}
}

static void test_expansion(void **state)
{
	struct aliases *al = parse_ok("team: alice, bob\n"
				      "all: team, alice, ALICE@heron.test, carol\n"
				      "john: john, john@example.org\n"
				      "outer: john, team\n"
				      "a: b\n"
				      "b: c\n"
				      "c: a\n"
				      "ext: x@example.org, team\n");

	expect(al, "all@heron.test", "alice@heron.test bob@heron.test carol@heron.test");
	expect(al, "john@heron.test", "john@heron.test john@example.org");
	expect(al, "outer@heron.test",
	       "john@heron.test john@example.org alice@heron.test bob@heron.test");
	expect(al, "a@heron.test", "!alias loop");
	expect(al, "b@other.test", "!alias loop");
	expect(al, "ext@heron.test", "x@example.org alice@heron.test bob@heron.test");
	aliases_free(&al);
}

static void test_bounds(void **state)
{
	char text[4096] = "";
	struct aliases *al;

	/* a chain deeper than the bound */
	for (int i = 0; i <= ALIASES_DEPTH_MAX; i++) {
		char l[64];

		snprintf(l, sizeof(l), "n%d: n%d\n", i, i + 1);
		strcat(text, l);
	}
	al = parse_ok(text);
	expect(al, "n0@heron.test", "!aliases nested too deep");
	expect(al, "n2@heron.test", "n9@heron.test"); /* 7 levels: fine */
	aliases_free(&al);
	/* a fan-out past ctx.max_targets */
	strcpy(text, "big:");
	for (int i = 0; i < 101; i++) {
		char l[32];

		snprintf(l, sizeof(l), " u%d,", i);
		strcat(text, l);
	}
	strcat(text, "\n");
	al = parse_ok(text);
	expect(al, "big@heron.test", "!alias expands to too many recipients");
	aliases_free(&al);
}

/* Every prefix of a file parses or fails cleanly (the file may be cut anywhere). */
static void test_prefixes(void **state)
{
	const char *t = "# c\nteam: alice,\n  bob@heron.test\nx@heron.test: y\n";

	for (size_t cut = 0; cut <= strlen(t); cut++) {
		struct aliases *al = NULL;
		char *err = NULL;

		if (aliases_parse(t, cut, "f", &al, &err) == 0)
			aliases_free(&al);
		else
			free(err);
	}
}

static void test_load(void **state)
{
	char path[] = "/tmp/heron-aliases-XXXXXX";
	int fd = mkstemp(path);
	struct aliases *al = NULL;
	char *err = NULL;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x: y\n", 5), 5);
	close(fd);
	assert_int_equal(aliases_load(path, &al, &err), 0);
	assert_int_equal(aliases_count(al), 1);
	aliases_free(&al);
	unlink(path);
	assert_int_equal(aliases_load(path, &al, &err), -1);
	assert_non_null(strstr(err, "No such file"));
	free(err);
	assert_int_equal(aliases_load("/tmp", &al, &err), -1);
	assert_non_null(strstr(err, "not a regular file"));
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format),   cmocka_unit_test(test_empty),
		cmocka_unit_test(test_refusals), cmocka_unit_test(test_expansion),
		cmocka_unit_test(test_bounds),   cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
