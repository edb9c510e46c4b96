/* test_milter_proto.c — the milter codec without I/O: packets as the protocol lays them out,
 * every reply kind parsed (whole, and cut at every byte: "need more" until the last one),
 * garbage refused (lengths of 0 and past the cap, unknown commands, strings without their
 * NUL, trailing bytes, bad reply codes), SETSYMLIST lists, and the [milter] list syntax. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mtad/milter_proto.h"

/* A reply packet: cmd and len bytes of data, into out; its size. */
static size_t mk(unsigned char *out, char cmd, const void *data, size_t len)
{
	uint32_t n = (uint32_t)len + 1;

	out[0] = (unsigned char)(n >> 24);
	out[1] = (unsigned char)(n >> 16);
	out[2] = (unsigned char)(n >> 8);
	out[3] = (unsigned char)n;
	out[4] = (unsigned char)cmd;
	if (len > 0) /* data may be NULL for an empty packet */
		memcpy(out + 5, data, len);
	return len + 5;
}

static int parse(const unsigned char *p, size_t n, struct milter_reply *r)
{
	const char *err = NULL;
	size_t used = 0;
	int rc = milter_reply_parse(p, n, r, &used, &err);

	if (rc == 1)
		assert_int_equal(used, n);
	if (rc < 0)
		assert_non_null(err);
	return rc;
}

static void test_put_layout(void **state)
{
	struct buf b;
	const char *helo = "client.test";

	buf_init(&b, 0, 1 << 20);
	assert_int_equal(milter_put_optneg(&b, 6, 0x1ff, 0x1ff7ff), 0);
	assert_int_equal(b.len, 17);
	assert_memory_equal(b.data, "\0\0\0\015O\0\0\0\6\0\0\1\377\0\037\367\377", 17);
	buf_reset(&b);
	assert_int_equal(milter_put_strs(&b, SMFIC_HELO, &helo, 1), 0);
	assert_memory_equal(b.data, "\0\0\0\015Hclient.test\0", 17);
	buf_reset(&b);
	const char *n[] = { "j", "{client_addr}" }, *v[] = { "mx", "127.0.0.1" };
	assert_int_equal(milter_put_macros(&b, SMFIC_CONNECT, n, v, 2), 0);
	assert_memory_equal(b.data, "\0\0\0\037DCj\0mx\0{client_addr}\000127.0.0.1\0", 35);
	buf_reset(&b);
	assert_int_equal(milter_put_connect(&b, "unknown", '4', 25, "10.0.0.1"), 0);
	assert_memory_equal(b.data, "\0\0\0\025Cunknown\0004\0\03110.0.0.1\0", 25);
	buf_reset(&b);
	assert_int_equal(milter_put_connect(&b, "unknown", 'U', 0, ""), 0);
	assert_int_equal(b.len, 5 + 8 + 1);
	buf_release(&b);
}

static void test_put_respects_ceiling(void **state)
{
	struct buf b;
	char big[100] = { 0 };

	buf_init(&b, 0, 50);
	assert_int_equal(milter_put(&b, SMFIC_BODY, big, sizeof(big)), -1);
	assert_int_equal(b.len, 0);
	buf_release(&b);
}

static void test_simple_replies(void **state)
{
	const char cmds[] = "acdrtsp";
	unsigned char p[16];
	struct milter_reply r;

	for (const char *c = cmds; *c != '\0'; c++) {
		size_t n = mk(p, *c, NULL, 0);

		assert_int_equal(parse(p, n, &r), 1);
		assert_int_equal(r.cmd, *c);
	}
}

static void test_header_replies(void **state)
{
	unsigned char p[128];
	struct milter_reply r;
	size_t n = mk(p, SMFIR_ADDHEADER, "X-Spam\0yes\0", 11);

	assert_int_equal(parse(p, n, &r), 1);
	assert_string_equal(r.name, "X-Spam");
	assert_string_equal(r.value, "yes");
	n = mk(p, SMFIR_CHGHEADER, "\0\0\0\2Subject\0\0", 13);
	assert_int_equal(parse(p, n, &r), 1);
	assert_int_equal(r.index, 2);
	assert_string_equal(r.name, "Subject");
	assert_string_equal(r.value, "");
	n = mk(p, SMFIR_INSHEADER, "\0\0\0\0A\0b\0", 8);
	assert_int_equal(parse(p, n, &r), 1);
	assert_int_equal(r.index, 0);
	n = mk(p, SMFIR_ADDRCPT_PAR, "<a@b>\0", 6);
	assert_int_equal(parse(p, n, &r), 1);
	assert_string_equal(r.name, "<a@b>");
	assert_null(r.value);
	n = mk(p, SMFIR_CHGFROM, "<a@b>\0SIZE=10\0", 14);
	assert_int_equal(parse(p, n, &r), 1);
	assert_string_equal(r.value, "SIZE=10");
	n = mk(p, SMFIR_QUARANTINE, "why\0", 4);
	assert_int_equal(parse(p, n, &r), 1);
	assert_string_equal(r.value, "why");
	n = mk(p, SMFIR_REPLBODY, "any\0bytes", 9);
	assert_int_equal(parse(p, n, &r), 1);
	assert_int_equal(r.len, 9);
}

static void test_bad_strings(void **state)
{
	unsigned char p[128];
	struct milter_reply r;

	assert_int_equal(parse(p, mk(p, SMFIR_ADDHEADER, "X-Spam\0yes", 10), &r), -1);
	assert_int_equal(parse(p, mk(p, SMFIR_ADDHEADER, "X-Spam\0", 7), &r), -1);
	assert_int_equal(parse(p, mk(p, SMFIR_ADDRCPT, "<a>\0junk\0", 9), &r), -1);
	assert_int_equal(parse(p, mk(p, SMFIR_CHGHEADER, "\0\0\0", 3), &r), -1);
	assert_int_equal(parse(p, mk(p, SMFIR_DELRCPT, "", 0), &r), -1);
	assert_int_equal(parse(p, mk(p, 'x', "", 0), &r), -1);
}

static void test_replycode(void **state)
{
	unsigned char p[128];
	struct milter_reply r;

	assert_int_equal(parse(p, mk(p, SMFIR_REPLYCODE, "554 5.7.1 Gtube pattern\0", 24), &r), 1);
	assert_int_equal(r.code, 554);
	assert_string_equal(r.text, "554 5.7.1 Gtube pattern");
	assert_int_equal(parse(p, mk(p, SMFIR_REPLYCODE, "250 ok\0", 7), &r), -1);
	assert_int_equal(parse(p, mk(p, SMFIR_REPLYCODE, "55x no\0", 7), &r), -1);
	assert_int_equal(parse(p, mk(p, SMFIR_REPLYCODE, "550 a\0b\0", 8), &r), -1);
	assert_int_equal(parse(p, mk(p, SMFIR_REPLYCODE, "550 a\001b\0", 8), &r), -1);
	assert_int_equal(parse(p, mk(p, SMFIR_REPLYCODE, "550-a\r\n550 b\0", 13), &r), 1);
}

static void test_optneg(void **state)
{
	unsigned char p[128];
	struct milter_reply r;
	const char d[] = "\0\0\0\6\0\0\1\377\0\0\0\0"
			 "\0\0\0\2{mail_addr} i\0";
	size_t n = mk(p, SMFIC_OPTNEG, d, sizeof(d) - 1);

	assert_int_equal(parse(p, n, &r), 1);
	assert_int_equal(r.version, 6);
	assert_int_equal(r.actions, 0x1ff);
	assert_string_equal(r.symlist[MILTER_ST_MAIL], "{mail_addr} i");
	assert_null(r.symlist[MILTER_ST_CONNECT]);
	assert_true(milter_symlist_has(r.symlist[MILTER_ST_MAIL], "{mail_addr}"));
	assert_true(milter_symlist_has(r.symlist[MILTER_ST_MAIL], "i"));
	assert_true(milter_symlist_has("{i} j", "i"));
	assert_false(milter_symlist_has(r.symlist[MILTER_ST_MAIL], "{auth_authen}"));
	/* stage out of range, list without NUL, too short */
	const char bad1[] = "\0\0\0\6\0\0\0\0\0\0\0\0"
			    "\0\0\0\11x\0";
	assert_int_equal(parse(p, mk(p, SMFIC_OPTNEG, bad1, sizeof(bad1) - 1), &r), -1);
	const char bad2[] = "\0\0\0\6\0\0\0\0\0\0\0\0"
			    "\0\0\0\1x";
	assert_int_equal(parse(p, mk(p, SMFIC_OPTNEG, bad2, sizeof(bad2) - 1), &r), -1);
	assert_int_equal(parse(p, mk(p, SMFIC_OPTNEG, "\0\0\0\6", 4), &r), -1);
}

static void test_lengths(void **state)
{
	unsigned char zero[5] = { 0, 0, 0, 0, 'c' };
	unsigned char huge[5] = { 0x7f, 0xff, 0xff, 0xff, 'b' };
	unsigned char cap[5] = { 0, 0x10, 0, 0x0d, 'b' }; /* MILTER_REPLY_MAX - 3 */
	struct milter_reply r;

	assert_int_equal(parse(zero, 5, &r), -1);
	assert_int_equal(parse(huge, 4, &r), -1); /* refused from the length alone */
	assert_int_equal(parse(cap, 5, &r), -1);
	cap[3] = 0x0c; /* exactly the cap: wait for it */
	assert_int_equal(parse(cap, 5, &r), 0);
}

static void test_split_anywhere(void **state)
{
	unsigned char p[64];
	struct milter_reply r;
	size_t n = mk(p, SMFIR_CHGHEADER, "\0\0\0\1Subject\0new\0", 16);

	for (size_t cut = 0; cut < n; cut++)
		assert_int_equal(parse(p, cut, &r), 0);
	assert_int_equal(parse(p, n, &r), 1);
	/* two packets back to back: the first one is taken alone */
	size_t m = mk(p + n, SMFIR_CONTINUE, NULL, 0);
	const char *err;
	size_t used;
	assert_int_equal(milter_reply_parse(p, n + m, &r, &used, &err), 1);
	assert_int_equal(used, n);
}

static void test_specs(void **state)
{
	struct milter_defaults d = { 1000, 2000, 3000, MILTER_TEMPFAIL };
	struct milter_spec *v = NULL;
	size_t n = 0;
	char *err = NULL;

	assert_int_equal(milter_specs_parse("inet:127.0.0.1:11332 unix:/run/m.sock,"
					    "{ inet:[::1]:8891, content_timeout=10s, "
					    "default_action=accept } inet6:[::1]:1",
					    &d, &v, &n, &err),
			 0);
	assert_int_equal(n, 4);
	assert_string_equal(v[0].host, "127.0.0.1");
	assert_int_equal(v[0].port, 11332);
	assert_int_equal(v[0].content_ms, 3000);
	assert_true(v[1].unix_path);
	assert_string_equal(v[1].host, "/run/m.sock");
	assert_string_equal(v[2].host, "::1");
	assert_int_equal(v[2].content_ms, 10000);
	assert_int_equal(v[2].command_ms, 2000);
	assert_int_equal(v[2].default_action, MILTER_ACCEPT);
	assert_int_equal(v[3].default_action, MILTER_TEMPFAIL);
	milter_specs_free(&v, n);
	assert_null(v);
	assert_int_equal(milter_specs_parse("", &d, &v, &n, &err), 0);
	assert_int_equal(n, 0);

	const char *bad[] = { "tcp:1.2.3.4:5",
			      "inet:1.2.3.4",
			      "inet:1.2.3.4:0",
			      "inet:1.2.3.4:70000",
			      "{ inet:1.2.3.4:5",
			      "{ }",
			      "}",
			      "{ inet:1.2.3.4:5, colour=red }",
			      "{ inet:1.2.3.4:5, "
			      "command_timeout=1ms }",
			      "{ inet:1.2.3.4:5, default_action=maybe }",
			      "{ { inet:1.2.3.4:5 } }",
			      "unix:" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = NULL;
		assert_int_equal(milter_specs_parse(bad[i], &d, &v, &n, &err), -1);
		assert_non_null(err);
		free(err);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_layout),     cmocka_unit_test(test_put_respects_ceiling),
		cmocka_unit_test(test_simple_replies), cmocka_unit_test(test_header_replies),
		cmocka_unit_test(test_bad_strings),    cmocka_unit_test(test_replycode),
		cmocka_unit_test(test_optneg),         cmocka_unit_test(test_lengths),
		cmocka_unit_test(test_split_anywhere), cmocka_unit_test(test_specs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
