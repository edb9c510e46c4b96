/* test_imap_parser.c — the IMAP command parser fed whole, split at every byte and one byte at a
 * time (STYLE 17); literals, lists, brackets, limits and error recovery. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/buf.h"
#include "imapd/imap_parser.h"

static const struct imap_parser_limits lim = { 200, 100, 4, 40 };

/* Renders the parsed command as text: tag, then args (strings quoted, literals as {n}). */
static void render(const struct imap_parser *p, struct buf *out)
{
	size_t n;
	const struct imap_arg *a = imap_parser_args(p, &n);
	uint32_t close_at[16];
	unsigned depth = 0;

	buf_puts(out, imap_parser_tag(p));
	for (size_t i = 0; i < n; i++) {
		buf_putc(out, ' ');
		switch (a[i].type) {
		case IMAP_ARG_ATOM:
			buf_append(out, a[i].s, a[i].len);
			break;
		case IMAP_ARG_QUOTED:
			buf_printf(out, "\"%s\"", a[i].s);
			break;
		case IMAP_ARG_LITERAL:
			buf_printf(out, "{%zu}%.*s", a[i].len, (int)a[i].len, a[i].s);
			break;
		case IMAP_ARG_STREAMED:
			buf_printf(out, "<%zu>", a[i].len);
			break;
		case IMAP_ARG_LIST:
			buf_printf(out, "(%u:", a[i].n);
			close_at[depth++] = (uint32_t)(i + a[i].span);
			break;
		}
		while (depth > 0 && close_at[depth - 1] == i) {
			buf_putc(out, ')');
			depth--;
		}
	}
}

#define CUT ((size_t)1 << 40)

/* Feeds in in pieces of `step` bytes (0: whole; cut|CUT: two pieces split at cut); accepts every literal (or streams the ones of
   size >= 50 by skipping their bytes). Returns the first non-MORE result with out rendered
   (DONE) or holding the error ("tag|message"). */
static int feed_steps(const char *in, size_t len, size_t step, struct buf *out)
{
	struct imap_parser *p = imap_parser_new(&lim);
	size_t off = 0, used;
	int rc = IMAP_PARSE_MORE;

	buf_reset(out);
	while (off < len) {
		size_t n = step == 0 || len - off < step ? len - off : step;

		if (step & CUT)
			n = off < (step & ~CUT) ? (step & ~CUT) - off : len - off;

		rc = imap_parser_feed(p, in + off, n, &used);
		off += used;
		if (rc == IMAP_PARSE_LITERAL) {
			uint64_t size;
			bool sync;
			unsigned depth;

			imap_parser_literal(p, &size, &sync, &depth);
			if (size >= 50 && size <= len - off) {
				off += size;
				imap_parser_literal_streamed(p);
			} else if (imap_parser_literal_accept(p) < 0) {
				rc = IMAP_PARSE_ERROR;
				break;
			}
			rc = IMAP_PARSE_MORE;
			continue;
		}
		if (rc != IMAP_PARSE_MORE)
			break;
	}
	if (rc == IMAP_PARSE_DONE)
		render(p, out);
	else if (rc == IMAP_PARSE_ERROR)
		buf_printf(out, "%s|%s", imap_parser_tag(p) ? imap_parser_tag(p) : "*",
			   imap_parser_error(p));
	imap_parser_free(&p);
	return rc;
}

/* The same result whole, in every two-piece split and byte by byte. */
static void check(const char *in, int want_rc, const char *want)
{
	struct buf out;
	size_t len = strlen(in);

	buf_init(&out, 0, 4096);
	for (size_t step = 0; step <= len; step++) {
		int rc = feed_steps(in, len, step, &out);

		if (rc != want_rc || strcmp(buf_cstr(&out), want) != 0)
			fail_msg("input %s step %zu: rc %d '%s', want %d '%s'", in, step, rc,
				 buf_cstr(&out), want_rc, want);
	}
	for (size_t cut = 1; cut < len; cut++) {
		int rc = feed_steps(in, len, cut | CUT, &out);

		if (rc != want_rc || strcmp(buf_cstr(&out), want) != 0)
			fail_msg("input %s cut %zu: rc %d '%s'", in, cut, rc, buf_cstr(&out));
	}
	buf_release(&out);
}

static void test_simple(void **state)
{
	check("a1 NOOP\r\n", IMAP_PARSE_DONE, "a1 NOOP");
	check("a1 NOOP\n", IMAP_PARSE_DONE, "a1 NOOP");
	check("A.2 LOGIN joe \"se cr\\\"et\\\\\"\r\n", IMAP_PARSE_DONE,
	      "A.2 LOGIN joe \"se cr\"et\\\"");
	check("t SELECT \"\"\r\n", IMAP_PARSE_DONE, "t SELECT \"\"");
	check("\r\n\r\nx CAPABILITY\r\n", IMAP_PARSE_DONE, "x CAPABILITY");
	check("x LIST \"\" %/*\r\n", IMAP_PARSE_DONE, "x LIST \"\" %/*");
	check("x STORE 1:* +FLAGS.SILENT (\\Seen \\Deleted $Junk)\r\n", IMAP_PARSE_DONE,
	      "x STORE 1:* +FLAGS.SILENT (3: \\Seen \\Deleted $Junk)");
}

static void test_brackets(void **state)
{
	check("f FETCH 1 (UID BODY.PEEK[HEADER.FIELDS (From To)]<0.100> FLAGS)\r\n",
	      IMAP_PARSE_DONE,
	      "f FETCH 1 (3: UID BODY.PEEK[HEADER.FIELDS (From To)]<0.100> FLAGS)");
	check("f FETCH 1 BODY[]\r\n", IMAP_PARSE_DONE, "f FETCH 1 BODY[]");
	check("f FETCH 1 (BODY[1.2.MIME])\r\n", IMAP_PARSE_DONE, "f FETCH 1 (1: BODY[1.2.MIME])");
	check("f FETCH 1 BODY[HEADER\r\n", IMAP_PARSE_ERROR, "f|Missing ']'");
	check("f FETCH 1 binary.peek[1 2]\r\n", IMAP_PARSE_DONE, "f FETCH 1 binary.peek[1 2]");
}

/* '[' and ']' are atom characters outside a FETCH section (RFC 3501 ATOM-CHAR and
   ASTRING-CHAR): an unbalanced '[' is not a section. */
static void test_bracket_atoms(void **state)
{
	check("a SELECT !#$&'+,-.0123456789:;<=>?@^_`|[}\r\n", IMAP_PARSE_DONE,
	      "a SELECT !#$&'+,-.0123456789:;<=>?@^_`|[}");
	check("b LIST \"\" !#$&'+,-.0123456789:;<=>?@^_`|[}%*\r\n", IMAP_PARSE_DONE,
	      "b LIST \"\" !#$&'+,-.0123456789:;<=>?@^_`|[}%*");
	check("c SELECT a]b[c [x y]\r\n", IMAP_PARSE_DONE, "c SELECT a]b[c [x y]");
	check("d FETCH 1 BODYX[a b]\r\n", IMAP_PARSE_DONE, "d FETCH 1 BODYX[a b]");
}

static void test_nested_lists(void **state)
{
	check("s SEARCH OR (FROM a (TO b)) NOT ()\r\n", IMAP_PARSE_DONE,
	      "s SEARCH OR (3: FROM a (2: TO b)) NOT (0:)");
	check("s X ((((a))))\r\n", IMAP_PARSE_DONE, "s X (1: (1: (1: (1: a))))");
	check("s X (((((a)))))\r\n", IMAP_PARSE_ERROR, "s|Lists nested too deeply");
	check("s X (a\r\n", IMAP_PARSE_ERROR, "s|Unbalanced parentheses: missing ')'");
	check("s X a)\r\n", IMAP_PARSE_ERROR, "s|Unbalanced parentheses: unexpected ')'");
	check("s X (a)b\r\n", IMAP_PARSE_ERROR, "s|Missing space between arguments");
}

static void test_literals(void **state)
{
	check("l LOGIN {3}\r\njoe {4}\r\np\r\nw\r\n", IMAP_PARSE_DONE, "l LOGIN {3}joe {4}p\r\nw");
	check("l LOGIN {3+}\r\njoe {0}\r\n\r\n", IMAP_PARSE_DONE, "l LOGIN {3}joe {0}");
	check("l X ({2}\r\nab c)\r\n", IMAP_PARSE_DONE, "l X (2: {2}ab c)");
	/* size >= 50: the test streams it, as APPEND does */
	check("a APPEND INBOX (\\Seen) {60}\r\n"
	      "123456789012345678901234567890123456789012345678901234567890\r\n",
	      IMAP_PARSE_DONE, "a APPEND INBOX (1: \\Seen) <60>");
	check("l X {3}x\r\n", IMAP_PARSE_ERROR, "l|Literal must end the line");
	check("l X {}\r\n", IMAP_PARSE_ERROR, "l|Bad literal size");
	check("l X {1a}\r\n", IMAP_PARSE_ERROR, "l|Bad literal size");
	check("l X {9999999999999999999}\r\n", IMAP_PARSE_ERROR, "l|Literal size too large");
	check("l X {3}\r\nabcd\r\n", IMAP_PARSE_ERROR, "l|Missing space between arguments");
}

/* literal8 "~{n}" (RFC 3516): read like a literal, reported as binary; "~" alone is an atom
   character. */
static void test_literal8(void **state)
{
	struct imap_parser *p = imap_parser_new(&lim);
	const char *in = "a APPEND x ~{3+}\r\n";
	size_t used;
	uint64_t size;
	bool sync;
	unsigned depth;

	check("a APPEND x ~{3}\r\nabc\r\n", IMAP_PARSE_DONE, "a APPEND x {3}abc");
	check("a X (~ ~{1}\r\nz ~y)\r\n", IMAP_PARSE_DONE, "a X (3: ~ {1}z ~y)");
	check("a LIST \"\" ~x\r\n", IMAP_PARSE_DONE, "a LIST \"\" ~x");
	check("a X a~{1}\r\nz\r\n", IMAP_PARSE_ERROR, "a|Missing space between arguments");
	check("a X ~{x}\r\n", IMAP_PARSE_ERROR, "a|Bad literal size");
	assert_int_equal(imap_parser_feed(p, in, strlen(in), &used), IMAP_PARSE_LITERAL);
	imap_parser_literal(p, &size, &sync, &depth);
	assert_true(imap_parser_literal_binary(p));
	assert_int_equal(size, 3);
	assert_false(sync);
	imap_parser_literal_reject(p, "test");
	assert_int_equal(imap_parser_feed(p, "abc\r\n", 5, &used), IMAP_PARSE_MORE);
	in = "b APPEND x {2}\r\n";
	assert_int_equal(imap_parser_feed(p, in, strlen(in), &used), IMAP_PARSE_LITERAL);
	assert_false(imap_parser_literal_binary(p));
	imap_parser_free(&p);
}

/* GETMETADATA and SETMETADATA (RFC 5464): options, entry lists, and the values SETMETADATA
   takes (quoted, literal, literal8, NIL), whole, in every split and byte by byte. */
static void test_metadata(void **state)
{
	check("m GETMETADATA (MAXSIZE 1024 DEPTH infinity) \"INBOX\" (/shared/comment "
	      "/private/comment)\r\n",
	      IMAP_PARSE_DONE,
	      "m GETMETADATA (4: MAXSIZE 1024 DEPTH infinity) \"INBOX\" (2: /shared/comment "
	      "/private/comment)");
	check("m GETMETADATA \"INBOX\" (DEPTH 1) (/private/filters/values)\r\n", IMAP_PARSE_DONE,
	      "m GETMETADATA \"INBOX\" (2: DEPTH 1) (1: /private/filters/values)");
	check("m GETMETADATA \"\" /shared/comment\r\n", IMAP_PARSE_DONE,
	      "m GETMETADATA \"\" /shared/comment");
	check("m SETMETADATA INBOX (/private/comment {33}\r\nMy new comment across\r\ntwo lines.)"
	      "\r\n",
	      IMAP_PARSE_DONE,
	      "m SETMETADATA INBOX (2: /private/comment {33}My new comment across\r\ntwo lines.)");
	check("m SETMETADATA INBOX (/private/vendor/vendor.heron/bin ~{3+}\r\nabc /shared/comment "
	      "NIL)\r\n",
	      IMAP_PARSE_DONE,
	      "m SETMETADATA INBOX (4: /private/vendor/vendor.heron/bin {3}abc /shared/comment NIL)");
	check("m SETMETADATA \"\" (/shared/comment \"say \\\"hi\\\"\")\r\n", IMAP_PARSE_DONE,
	      "m SETMETADATA \"\" (2: /shared/comment \"say \"hi\"\")");
	check("m GETMETADATA INBOX (/shared/comment\r\n", IMAP_PARSE_ERROR,
	      "m|Unbalanced parentheses: missing ')'");
	/* the literal takes its 3 bytes, ')' among them */
	check("m SETMETADATA INBOX (/shared/comment ~{3}\r\nab)\r\n", IMAP_PARSE_ERROR,
	      "m|Unbalanced parentheses: missing ')'");
}

static void test_errors(void **state)
{
	check("a1\r\n", IMAP_PARSE_ERROR, "a1|Missing command");
	check("+a NOOP\r\n", IMAP_PARSE_ERROR, "*|Invalid tag");
	check("(a NOOP\r\n", IMAP_PARSE_ERROR, "*|Invalid tag");
	check("\xff\xfe NOOP\r\n", IMAP_PARSE_ERROR, "*|Invalid tag");
	check("a NO\xe9OP\r\n", IMAP_PARSE_ERROR, "a|8-bit data outside a string");
	check("a X \"ab\r\n", IMAP_PARSE_ERROR, "a|Unterminated quoted string");
	check("a X \"a\\b\"\r\n", IMAP_PARSE_ERROR, "a|Bad escape in quoted string");
	check("a X \"ab\"c\r\n", IMAP_PARSE_ERROR, "a|Missing space between arguments");
	check("a X a\rb\r\n", IMAP_PARSE_ERROR, "a|CR without LF");
	check("a X \x01\r\n", IMAP_PARSE_ERROR, "a|Unexpected character");
	check("a X \"caf\xc3\xa9\"\r\n", IMAP_PARSE_DONE, "a X \"caf\xc3\xa9\"");
}

static void test_limits(void **state)
{
	char line[512];
	struct buf out;

	memset(line, 'x', sizeof(line));
	memcpy(line, "a X ", 4);
	memcpy(line + 300, "\r\n", 3);
	check(line, IMAP_PARSE_ERROR, "a|Command line too long");
	strcpy(line, "a X");
	for (int i = 0; i < 40; i++)
		strcat(line, " b");
	strcat(line, "\r\n");
	check(line, IMAP_PARSE_ERROR, "a|Too many arguments");
	buf_init(&out, 0, 4096);
	/* the inline literal limit: 100 bytes here; 49 is taken inline */
	assert_int_equal(feed_steps("a X {49}\r\n", 10, 0, &out), IMAP_PARSE_MORE);
	buf_release(&out);
}

/* After an error the rest of the line is dropped and the next command parses. */
static void test_recovery(void **state)
{
	const char *in = "a X (((((((x\r\nb NOOP\r\nc X {500}\r\nd NOOP\r\n"
			 "e X {5+}\r\nab\r\nd\r\nf NOOP\r\n";
	struct imap_parser *p = imap_parser_new(&lim);
	size_t len = strlen(in), off = 0, used;
	const char *want[] = { "E a", "D b", "E c", "D d", "E e", "D f" };
	size_t nw = 0;

	while (off < len) {
		int rc = imap_parser_feed(p, in + off, len - off, &used);

		off += used;
		if (rc == IMAP_PARSE_LITERAL) {
			uint64_t size;
			bool sync;
			unsigned depth;

			imap_parser_literal(p, &size, &sync, &depth);
			if (sync) { /* {500}: past the limit */
				assert_int_equal(imap_parser_literal_accept(p), -1);
				assert_string_equal(imap_parser_error(p), "Literal too large");
			} else { /* {5+}: the caller refuses it; its bytes are skipped */
				imap_parser_literal_reject(p, "No");
			}
			rc = IMAP_PARSE_ERROR;
		}
		if (rc == IMAP_PARSE_MORE)
			continue;
		assert_true(nw < 6);
		assert_int_equal(want[nw][0], rc == IMAP_PARSE_DONE ? 'D' : 'E');
		assert_string_equal(imap_parser_tag(p), want[nw] + 2);
		nw++;
		if (rc == IMAP_PARSE_DONE)
			imap_parser_reset(p);
	}
	assert_int_equal(nw, 6);
	imap_parser_free(&p);
}

/* A refused synchronizing literal: the client never sent it; the next line is a command. */
static void test_literal_reject(void **state)
{
	struct imap_parser *p = imap_parser_new(&lim);
	const char *in = "a APPEND INBOX {99999}\r\nb NOOP\r\n";
	size_t used, n;
	uint64_t size;
	bool sync;
	unsigned depth;
	const struct imap_arg *args;

	assert_int_equal(imap_parser_feed(p, in, strlen(in), &used), IMAP_PARSE_LITERAL);
	imap_parser_literal(p, &size, &sync, &depth);
	assert_int_equal(size, 99999);
	assert_true(sync);
	assert_int_equal(depth, 0);
	args = imap_parser_args(p, &n);
	assert_int_equal(n, 2);
	assert_string_equal(args[0].s, "APPEND");
	assert_string_equal(args[1].s, "INBOX");
	imap_parser_literal_reject(p, "Too big");
	in += used;
	assert_int_equal(imap_parser_feed(p, in, strlen(in), &used), IMAP_PARSE_DONE);
	assert_string_equal(imap_parser_tag(p), "b");
	args = imap_parser_args(p, &n);
	assert_true(imap_arg_atom_is(&args[0], "noop"));
	imap_parser_free(&p);
}

/* Feeds in whole, answering every literal by refusing it (as a refused APPEND is); returns
   the tags of the commands parsed (D) and refused (E) as "Da Eb ...", and "L" at the end
   when the parser lost track of the input. */
static void feed_refusing(const char *in, size_t len, size_t step, struct buf *out)
{
	struct imap_parser *p = imap_parser_new(&lim);
	size_t off = 0, used;

	buf_reset(out);
	while (off < len) {
		size_t n = step == 0 || len - off < step ? len - off : step;
		int rc = imap_parser_feed(p, in + off, n, &used);
		const char *tag;

		off += used;
		if (rc == IMAP_PARSE_LITERAL) {
			imap_parser_literal_reject(p, "No");
			rc = IMAP_PARSE_ERROR;
		}
		if (rc == IMAP_PARSE_MORE)
			continue;
		tag = imap_parser_tag(p);
		buf_printf(out, "%s%c%s", out->len ? " " : "", rc == IMAP_PARSE_DONE ? 'D' : 'E',
			   tag != NULL ? tag : "*");
		if (imap_parser_lost(p)) {
			buf_puts(out, " L");
			break;
		}
		if (rc == IMAP_PARSE_DONE)
			imap_parser_reset(p);
	}
	imap_parser_free(&p);
}

static void check_refusing(const char *in, const char *want)
{
	struct buf out;
	size_t len = strlen(in);

	buf_init(&out, 0, 4096);
	for (size_t step = 0; step <= len; step++) {
		feed_refusing(in, len, step, &out);
		if (strcmp(buf_cstr(&out), want) != 0)
			fail_msg("input %s step %zu: '%s', want '%s'", in, step, buf_cstr(&out),
				 want);
	}
	buf_release(&out);
}

/* No byte of a refused non-synchronizing literal is ever parsed as a command (RFC 7888 4):
   its data is dropped when its size is known and small enough to skip, else the parser says
   the input is lost (the caller closes). */
static void test_nonsync_never_commands(void **state)
{
	char big[600];

	/* a size that does not fit: lost, whatever follows */
	check_refusing("a APPEND INBOX {99999999999999999999+}\r\nb DELETE x\r\n", "Ea L");
	check_refusing("a X {5+\nb DELETE x\r\n", "Ea L");
	check_refusing("a X {5+}x\r\nb DELETE x\r\n", "Ea L");
	/* a known size over skip_max (literal_max here: 100): lost */
	check_refusing("a APPEND INBOX {101+}\r\nb DELETE x\r\n", "Ea L");
	/* refused and skipped: the next line is a command again */
	check_refusing("a APPEND INBOX {12+}\r\nb DELETE x\r\n\r\nc NOOP\r\n", "Ea Dc");
	/* synchronizing: the client waits for "+", so what follows is a command */
	check_refusing("a X {99999999999999999999}\r\nb NOOP\r\n", "Ea Db");
	/* a bad line is dropped with the data of the {n+} literals it announces */
	check_refusing("a X \x01 {12+}\r\nb DELETE x\r\n {3+}\r\nc D\r\nd NOOP\r\n", "Ea Dd");
	check_refusing("a X \x01 {12}\r\nb NOOP\r\n", "Ea Db");
	check_refusing("a X \x01 {12+}\r\n", "Ea");
	check_refusing("a X \x01 {99999999999999999999+}\r\nb DELETE x\r\n", "Ea E* L");
	check_refusing("a X \x01 {101+}\r\nb DELETE x\r\n", "Ea E* L");
	check_refusing("a X \x01 {1+} {12+}\r\nb DELETE x\r\n\r\nc NOOP\r\n", "Ea Dc");
	check_refusing("a X \x01 {1+}x\r\nb NOOP\r\n", "Ea Db");
	/* an overlong line ending in {n+}: its data is dropped too */
	memset(big, 'x', sizeof(big));
	memcpy(big, "a X ", 4);
	strcpy(big + 300, "{13+}\r\nb DELETE x\r\n\r\nc NOOP\r\n");
	check_refusing(big, "Ea Dc");
	strcpy(big + 300, "{99999999999999999999+}\r\nb DELETE x\r\n");
	check_refusing(big, "Ea E* L");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simple),
		cmocka_unit_test(test_brackets),
		cmocka_unit_test(test_bracket_atoms),
		cmocka_unit_test(test_nested_lists),
		cmocka_unit_test(test_literals),
		cmocka_unit_test(test_literal8),
		cmocka_unit_test(test_metadata),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_recovery),
		cmocka_unit_test(test_literal_reject),
		cmocka_unit_test(test_nonsync_never_commands),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
