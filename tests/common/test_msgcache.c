/* test_msgcache.c — the message cache: ENVELOPE/BODY/BODYSTRUCTURE of real-world shapes against
 * exact strings and golden files (tests/common/msgcache/NAME.exp, cross-checked with Dovecot 2.3:
 * identical except where noted in gen.py),
 * the part table, identical blobs however the input is split, and mutated input never crashing.
 *
 * HERON_MSGCACHE_REGEN=1 rewrites the .exp files from the current output (review the diff). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/buf.h"
#include "common/msgcache.h"

#define FIXTURES HERON_SOURCE_ROOT "/tests/common/msgcache/"

static const char *const fixtures[] = {
	"simple",       "alternative",   "mixed_base64", "nested",     "rfc822",      "no_close",
	"no_body",      "header_only",   "bare_lf",      "eightbit",   "huge_header", "groups",
	"quoted_names", "rfc2231",       "digest",       "garbled",    "garbled2",    "flowed",
	"b64msg",       "noboundary",    "toprfc822",    "emptysubj",  "groupfrom",   "emptypart",
	"mixedcase",    "preamble_only", "nested_rfc",   "dispparams",
};
#define NFIXTURES (sizeof(fixtures) / sizeof(fixtures[0]))

static char *read_file(const char *path, size_t *len_r)
{
	FILE *f = fopen(path, "rb");
	struct buf b;
	char tmp[65536];
	size_t n;

	if (f == NULL)
		return NULL;
	buf_init(&b, 0, 1 << 26);
	while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
		assert_int_equal(buf_append(&b, tmp, n), 0);
	fclose(f);
	return buf_steal(&b, len_r);
}

static char *fixture(const char *name, size_t *len_r)
{
	char path[512];
	char *m;

	snprintf(path, sizeof(path), FIXTURES "%s.eml", name);
	m = read_file(path, len_r);
	assert_non_null(m);
	return m;
}

static void build(const void *msg, size_t len, struct buf *out)
{
	buf_init(out, 0, 1 << 26);
	assert_int_equal(msgcache_build(msg, len, out), 0);
}

static void view_of(const struct buf *blob, struct msgcache_view *v)
{
	assert_int_equal(msgcache_parse(blob->data, blob->len, v), 0);
}

static void assert_view_eq(struct str_view v, const char *s)
{
	if (v.len != strlen(s) || memcmp(v.p, s, v.len) != 0) {
		print_error("got      %.*s\nexpected %s\n", (int)v.len, v.p, s);
		fail();
	}
}

/* The text the golden files hold: the three strings, the sizes and the part table. */
static void render_summary(const struct buf *blob, struct buf *o)
{
	static const char *const sections[] = { "",      "1",     "2",   "3",     "1.1",
						"1.2",   "2.1",   "2.2", "2.1.1", "2.1.2",
						"1.2.1", "1.2.2", "4" };
	struct msgcache_view v;
	struct msgcache_part p;

	view_of(blob, &v);
	buf_printf(o, "ENVELOPE %.*s\nBODY %.*s\nBODYSTRUCTURE %.*s\n", (int)v.envelope.len,
		   v.envelope.p, (int)v.body.len, v.body.p, (int)v.bodystructure.len,
		   v.bodystructure.p);
	buf_printf(o, "SIZE %llu HEADER %llu/%zu LINES %llu DATE %lld TZ %d PARTS %u\n",
		   (unsigned long long)v.size, (unsigned long long)v.header_size, v.header.len,
		   (unsigned long long)v.body_lines, (long long)v.date, (int)v.date_tz, v.nparts);
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		if (msgcache_part(blob->data, blob->len, sections[i], &p) < 0)
			continue;
		buf_printf(o, "PART [%s] header %llu+%llu body %llu+%llu%s%s", sections[i],
			   (unsigned long long)p.header_off, (unsigned long long)p.header_size,
			   (unsigned long long)p.body_off, (unsigned long long)p.body_size,
			   p.is_multipart ? " multipart" : "", p.is_message ? " message" : "");
		if (p.is_message)
			buf_printf(o, " sub %llu+%llu %llu+%llu",
				   (unsigned long long)p.sub_header_off,
				   (unsigned long long)p.sub_header_size,
				   (unsigned long long)p.sub_body_off,
				   (unsigned long long)p.sub_body_size);
		buf_putc(o, '\n');
	}
}

static void test_golden(void **state)
{
	bool regen = getenv("HERON_MSGCACHE_REGEN") != NULL;

	for (size_t i = 0; i < NFIXTURES; i++) {
		size_t len, elen;
		char *msg = fixture(fixtures[i], &len);
		char path[512];
		struct buf blob, sum;

		build(msg, len, &blob);
		buf_init(&sum, 0, 1 << 24);
		render_summary(&blob, &sum);
		snprintf(path, sizeof(path), FIXTURES "%s.exp", fixtures[i]);
		if (regen) {
			FILE *f = fopen(path, "wb");

			assert_non_null(f);
			fwrite(sum.data, 1, sum.len, f);
			fclose(f);
		}
		char *exp = read_file(path, &elen);

		assert_non_null(exp);
		if (elen != sum.len || memcmp(exp, sum.data, elen) != 0) {
			print_error("%s: got\n%s\nexpected\n%s\n", fixtures[i], sum.data, exp);
			fail();
		}
		free(exp);
		free(msg);
		buf_release(&blob);
		buf_release(&sum);
	}
}

static void test_simple_exact(void **state)
{
	size_t len;
	char *msg = fixture("simple", &len);
	struct buf blob;
	struct msgcache_view v;

	build(msg, len, &blob);
	view_of(&blob, &v);
	assert_view_eq(v.envelope, "(\"Mon, 2 Nov 2026 09:59:58 +0100\" \"Lunch?\" "
				   "((\"Alice Example\" NIL \"alice\" \"example.com\")) "
				   "((\"Alice Example\" NIL \"alice\" \"example.com\")) "
				   "((\"Alice Example\" NIL \"alice\" \"example.com\")) "
				   "((\"Bob\" NIL \"bob\" \"example.org\")) NIL NIL NIL "
				   "\"<lunch-1@example.com>\")");
	assert_view_eq(v.body, "(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" "
			       "48 4)");
	assert_view_eq(v.bodystructure, "(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL "
					"\"7bit\" 48 4 NIL NIL NIL NIL)");
	assert_int_equal(v.size, len);
	assert_int_equal(v.header_size + v.body_size, len);
	assert_int_equal(v.body_size, 48);
	assert_int_equal(v.body_lines, 4);
	assert_int_equal(v.date, 1793609998); /* 2026-11-02 08:59:58 UTC */
	assert_int_equal(v.date_tz, 60);
	assert_int_equal(v.header.len, v.header_size);
	assert_memory_equal(v.header.p, msg, v.header.len);
	assert_memory_equal(v.header.p + v.header.len - 4, "\r\n\r\n", 4);
	free(msg);
	buf_release(&blob);
}

static void test_alternative_exact(void **state)
{
	size_t len;
	char *msg = fixture("alternative", &len);
	struct buf blob;
	struct msgcache_view v;

	build(msg, len, &blob);
	view_of(&blob, &v);
	assert_view_eq(
		v.bodystructure,
		"((\"text\" \"plain\" (\"charset\" \"utf-8\") NIL NIL \"quoted-printable\" 37 "
		"1 NIL NIL NIL NIL)(\"text\" \"html\" (\"charset\" \"utf-8\") NIL NIL "
		"\"quoted-printable\" 75 0 NIL NIL NIL NIL) \"alternative\" (\"boundary\" "
		"\"alt-b0undary\") NIL NIL NIL)");
	assert_view_eq(v.body,
		       "((\"text\" \"plain\" (\"charset\" \"utf-8\") NIL NIL "
		       "\"quoted-printable\" 37 1)(\"text\" \"html\" (\"charset\" \"utf-8\") "
		       "NIL NIL \"quoted-printable\" 75 0) \"alternative\")");
	free(msg);
	buf_release(&blob);
}

static void test_groups_exact(void **state)
{
	size_t len;
	char *msg = fixture("groups", &len);
	struct buf blob;
	struct msgcache_view v;

	build(msg, len, &blob);
	view_of(&blob, &v);
	assert_view_eq(v.envelope,
		       "(\"8 Nov 26 10:00 EST\" \"groups\" ((NIL NIL \"uma\" \"example.com\")) "
		       "((NIL NIL \"uma\" \"example.com\")) ((NIL NIL \"uma\" \"example.com\")) "
		       "((NIL NIL \"undisclosed-recipients\" NIL)(NIL NIL NIL NIL)) "
		       "((NIL NIL \"Friends\" NIL)(NIL NIL \"vic\" \"example.com\")"
		       "(\"Walt W.\" NIL \"walt\" \"example.com\")(NIL NIL NIL NIL)"
		       "(NIL NIL \"xena\" \"example.com\")) "
		       "((NIL NIL \"Empty Group\" NIL)(NIL NIL NIL NIL)) NIL NIL)");
	assert_int_equal(v.date, 1794150000); /* 2026-11-08 15:00 UTC, obsolete year and zone */
	assert_int_equal(v.date_tz, -300);
	free(msg);
	buf_release(&blob);
}

/* Section lookups address the right bytes at any depth. */
static void test_parts_rfc822(void **state)
{
	size_t len;
	char *msg = fixture("rfc822", &len);
	struct buf blob;
	struct msgcache_part p;

	build(msg, len, &blob);
	assert_int_equal(msgcache_part(blob.data, blob.len, "1", &p), 0);
	assert_memory_equal(msg + p.body_off, "Forwarding this.", p.body_size);
	assert_int_equal(p.body_size, 16);
	assert_int_equal(msgcache_part(blob.data, blob.len, "2", &p), 0);
	assert_true(p.is_message);
	assert_memory_equal(msg + p.header_off, "Content-Type: message/rfc822\r\n", 30);
	assert_memory_equal(msg + p.sub_header_off, "From: \"Mallory", 14);
	assert_int_equal(p.sub_header_off, p.body_off);
	assert_int_equal(p.sub_header_size + p.sub_body_size, p.body_size);
	assert_memory_equal(msg + p.sub_header_off + p.sub_header_size - 4, "\r\n\r\n", 4);
	assert_int_equal(msgcache_part(blob.data, blob.len, "2.1", &p), 0);
	assert_memory_equal(msg + p.body_off, "original text", 13);
	assert_int_equal(p.body_size, 13);
	assert_memory_equal(msg + p.header_off, "Content-Type: text/plain; charset=utf-8\r\n\r\n",
			    p.header_size);
	assert_int_equal(msgcache_part(blob.data, blob.len, "2.2", &p), 0);
	assert_memory_equal(msg + p.body_off, "<p>original text</p>", 20);
	assert_int_equal(msgcache_part(blob.data, blob.len, "2.3", &p), -1);
	assert_int_equal(msgcache_part(blob.data, blob.len, "3", &p), -1);
	assert_int_equal(msgcache_part(blob.data, blob.len, "1.1", &p), -1);
	assert_int_equal(msgcache_part(blob.data, blob.len, "0", &p), -1);
	assert_int_equal(msgcache_part(blob.data, blob.len, "1.", &p), -1);
	assert_int_equal(msgcache_part(blob.data, blob.len, "x", &p), -1);
	assert_int_equal(msgcache_part(blob.data, blob.len, "", &p), 0);
	assert_int_equal(p.header_off, 0);
	assert_true(p.is_multipart);
	assert_int_equal(p.header_size + p.body_size, len);
	free(msg);
	buf_release(&blob);
}

static void test_parts_nested(void **state)
{
	size_t len;
	char *msg = fixture("nested", &len);
	struct buf blob;
	struct msgcache_part p;

	build(msg, len, &blob);
	assert_int_equal(msgcache_part(blob.data, blob.len, "1", &p), 0);
	assert_true(p.is_multipart);
	assert_int_equal(msgcache_part(blob.data, blob.len, "1.2.2", &p), 0);
	assert_memory_equal(msg + p.body_off, "R0lGODlhAQABAAAAACw=", p.body_size);
	assert_int_equal(p.body_size, 20);
	assert_memory_equal(msg + p.header_off, "Content-Type: image/gif\r\n", 25);
	assert_int_equal(msgcache_part(blob.data, blob.len, "2", &p), 0);
	assert_memory_equal(msg + p.body_off, "line one\r\nline two", p.body_size);
	assert_int_equal(msgcache_part(blob.data, blob.len, "1.2.3", &p), -1);
	free(msg);
	buf_release(&blob);
}

static void test_non_multipart_part1(void **state)
{
	size_t len;
	char *msg = fixture("simple", &len);
	struct buf blob;
	struct msgcache_part p;
	struct msgcache_view v;

	build(msg, len, &blob);
	view_of(&blob, &v);
	assert_int_equal(msgcache_part(blob.data, blob.len, "1", &p), 0);
	assert_int_equal(p.body_off, v.header_size);
	assert_int_equal(p.body_size, v.body_size);
	assert_int_equal(msgcache_part(blob.data, blob.len, "2", &p), -1);
	free(msg);
	buf_release(&blob);
}

static void build_split(const char *msg, size_t len, const size_t *cuts, size_t ncuts,
			struct buf *out)
{
	struct msgcache_builder *b = msgcache_builder_new();
	size_t at = 0;

	for (size_t i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : len;

		msgcache_builder_push(b, msg + at, end - at);
		at = end;
	}
	buf_init(out, 0, 1 << 26);
	assert_int_equal(msgcache_builder_finish(b, out), 0);
	msgcache_builder_free(&b);
}

/* Every message gives the same blob whatever the chunks: split at every position (sampled for
   the large one), in three pieces, and one byte at a time. */
static void test_split_anywhere(void **state)
{
	for (size_t i = 0; i < NFIXTURES; i++) {
		size_t len;
		char *msg = fixture(fixtures[i], &len);
		struct buf whole, part;
		size_t step = len > 4096 ? len / 97 : 1;

		build(msg, len, &whole);
		for (size_t cut = 0; cut <= len; cut += step) {
			size_t cuts[2] = { cut, cut + (len - cut) / 2 };

			build_split(msg, len, cuts, 1, &part);
			assert_int_equal(part.len, whole.len);
			assert_memory_equal(part.data, whole.data, whole.len);
			buf_release(&part);
			build_split(msg, len, cuts, 2, &part);
			assert_memory_equal(part.data, whole.data, whole.len);
			buf_release(&part);
		}
		if (len <= 4096) {
			struct msgcache_builder *b = msgcache_builder_new();

			for (size_t k = 0; k < len; k++)
				msgcache_builder_push(b, msg + k, 1);
			buf_init(&part, 0, 1 << 26);
			assert_int_equal(msgcache_builder_finish(b, &part), 0);
			assert_int_equal(part.len, whole.len);
			assert_memory_equal(part.data, whole.data, whole.len);
			/* the builder is reusable after reset */
			msgcache_builder_reset(b);
			msgcache_builder_push(b, msg, len);
			buf_reset(&part);
			assert_int_equal(msgcache_builder_finish(b, &part), 0);
			assert_memory_equal(part.data, whole.data, whole.len);
			buf_release(&part);
			msgcache_builder_free(&b);
		}
		buf_release(&whole);
		free(msg);
	}
}

static void test_huge_header_capped(void **state)
{
	size_t len;
	char *msg = fixture("huge_header", &len);
	struct buf blob;
	struct msgcache_view v;

	build(msg, len, &blob);
	view_of(&blob, &v);
	/* offsets stay exact past the kept limits; To: after the huge fields is still seen */
	assert_int_equal(v.header_size, len - 6);
	assert_int_equal(v.body_size, 6);
	assert_int_equal(v.body_lines, 1);
	assert_int_equal(v.header.len, v.header_size); /* under the 256 KiB cap: kept whole */
	assert_non_null(memmem(v.envelope.p, v.envelope.len, "\"tom\" \"example.com\"", 19));
	free(msg);
	buf_release(&blob);
}

static void test_empty_and_tiny(void **state)
{
	static const char *const msgs[] = { "",
					    "\r\n",
					    "\n",
					    "x",
					    "From: a@b\r\n",
					    "\r\n\r\n",
					    ("Content-Type: multipart/mixed; boundary=b\r\n"
					     "\r\n--b--\r\n") };

	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		struct buf blob;
		struct msgcache_view v;
		struct msgcache_part p;

		build(msgs[i], strlen(msgs[i]), &blob);
		view_of(&blob, &v);
		assert_int_equal(v.size, strlen(msgs[i]));
		assert_int_equal(v.header_size + v.body_size, v.size);
		assert_true(v.bodystructure.len > 0 && v.bodystructure.p[0] == '(');
		assert_int_equal(msgcache_part(blob.data, blob.len, "", &p), 0);
		buf_release(&blob);
	}
}

static void test_blob_rejects_garbage(void **state)
{
	size_t len;
	char *msg = fixture("nested", &len);
	struct buf blob;
	struct msgcache_view v;
	struct msgcache_part p;

	build(msg, len, &blob);
	for (size_t cut = 0; cut < blob.len; cut++)
		assert_int_equal(msgcache_parse(blob.data, cut, &v), -1);
	blob.data[0] = 99; /* unknown version */
	assert_int_equal(msgcache_parse(blob.data, blob.len, &v), -1);
	assert_int_equal(msgcache_part(blob.data, blob.len, "1", &p), -1);
	free(msg);
	buf_release(&blob);
}

static void test_out_ceiling(void **state)
{
	size_t len;
	char *msg = fixture("mixed_base64", &len);
	struct buf out;

	buf_init(&out, 0, 100);
	assert_int_equal(buf_append(&out, "keep", 4), 0);
	assert_int_equal(msgcache_build(msg, len, &out), -1);
	assert_int_equal(out.len, 4); /* unchanged */
	assert_memory_equal(out.data, "keep", 4);
	buf_release(&out);
	free(msg);
}

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void mutate(char *m, size_t *len, size_t cap)
{
	static const char *const inserts[] = { "\r\n", "\n",           "--", "\r",      "\"",
					       "(",    "\\",           ":",  "--b\r\n", "\r\n\r\n",
					       "=?",   "; boundary=b", "<" };
	int n = 1 + (int)(rnd() % 8);

	for (int k = 0; k<n && * len> 0; k++) {
		size_t at = rnd() % *len;

		switch (rnd() % 4) {
		case 0:
			m[at] = (char)rnd();
			break;
		case 1: {
			const char *s = inserts[rnd() % (sizeof(inserts) / sizeof(inserts[0]))];
			size_t sl = strlen(s);

			if (*len + sl > cap)
				break;
			memmove(m + at + sl, m + at, *len - at);
			memcpy(m + at, s, sl);
			*len += sl;
			break;
		}
		case 2:
			*len = at + (*len - at) / 2; /* truncate */
			break;
		default: {
			size_t dl = rnd() % 16;

			if (at + dl > *len)
				dl = *len - at;
			memmove(m + at, m + at + dl, *len - at - dl);
			*len -= dl;
		}
		}
	}
}

/* Malformed input never crashes and always yields a parsable blob that covers every byte. */
static void test_mutations(void **state)
{
	static const char *const sections[] = { "", "1", "2", "1.1", "2.1", "1.2.1", "3" };
	struct buf blob;

	buf_init(&blob, 0, 1 << 26);
	for (size_t i = 0; i < NFIXTURES; i++) {
		size_t len;
		char *orig = fixture(fixtures[i], &len);

		if (len > 8192) {
			free(orig);
			continue;
		}
		size_t cap = len + 512;
		char *m = malloc(cap);

		for (int round = 0; round < 300; round++) {
			size_t mlen = len;
			struct msgcache_view v;
			struct msgcache_part p;

			memcpy(m, orig, len);
			mutate(m, &mlen, cap);
			buf_reset(&blob);
			assert_int_equal(msgcache_build(m, mlen, &blob), 0);
			view_of(&blob, &v);
			assert_int_equal(v.size, mlen);
			assert_true(v.header_size <= mlen);
			for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++)
				if (msgcache_part(blob.data, blob.len, sections[s], &p) == 0)
					assert_true(p.body_off + p.body_size <= mlen &&
						    p.header_off + p.header_size <= p.body_off);
		}
		free(m);
		free(orig);
	}
	buf_release(&blob);
}

/* Deep nesting stops at the depth limit; many parts stop at the part limit; both stay valid. */
static void test_limits(void **state)
{
	struct buf msg, blob;
	struct msgcache_view v;
	struct msgcache_part p;

	buf_init(&msg, 0, 1 << 24);
	for (int d = 0; d < 100; d++)
		buf_printf(&msg,
			   "Content-Type: multipart/mixed; boundary=\"d%03d\"\r\n\r\n--d%03d\r\n",
			   d, d);
	buf_puts(&msg, "\r\ninnermost\r\n");
	build(msg.data, msg.len, &blob);
	view_of(&blob, &v);
	assert_true(v.nparts <= 40);
	assert_int_equal(msgcache_part(blob.data, blob.len, "1.1.1.1.1.1.1.1", &p), 0);
	buf_release(&blob);

	buf_reset(&msg);
	buf_puts(&msg, "Content-Type: multipart/mixed; boundary=m\r\n\r\n");
	for (int i = 0; i < 5000; i++)
		buf_puts(&msg, "--m\r\n\r\nx\r\n");
	buf_puts(&msg, "--m--\r\n");
	build(msg.data, msg.len, &blob);
	view_of(&blob, &v);
	assert_int_equal(v.nparts, 1000);
	assert_int_equal(v.size, msg.len);
	assert_int_equal(msgcache_part(blob.data, blob.len, "999", &p), 0);
	assert_int_equal(msgcache_part(blob.data, blob.len, "1000", &p), -1);
	buf_release(&blob);
	buf_release(&msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden),
		cmocka_unit_test(test_simple_exact),
		cmocka_unit_test(test_alternative_exact),
		cmocka_unit_test(test_groups_exact),
		cmocka_unit_test(test_parts_rfc822),
		cmocka_unit_test(test_parts_nested),
		cmocka_unit_test(test_non_multipart_part1),
		cmocka_unit_test(test_split_anywhere),
		cmocka_unit_test(test_huge_header_capped),
		cmocka_unit_test(test_empty_and_tiny),
		cmocka_unit_test(test_blob_rejects_garbage),
		cmocka_unit_test(test_out_ceiling),
		cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
