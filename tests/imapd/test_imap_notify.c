/* test_imap_notify.c — NOTIFY's syntax and rules (imapd/imap_notify.c): each command line is
 * fed to the IMAP parser whole, in every two-piece split and one byte at a time (STYLE 17),
 * and its arguments to imap_notify_parse; the spec is compared rendered as text. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/buf.h"
#include "imapd/imap_notify.h"
#include "imapd/imap_parser.h"

static const struct imap_parser_limits lim = { 4096, 1024, 8, 400 };

static const char *const filter_names[] = { "selected",   "delayed", "inboxes",  "personal",
					    "subscribed", "subtree", "mailboxes" };

/* The spec as text: "SET[ STATUS]" or "NONE", then per group " filter:events[names]{n}" (events
   in hex, names joined by ',', {n}: MessageNew has n fetch attributes); or "BAD" / "BADEVENT". */
static void render(int rc, const struct imap_notify_spec *s, struct buf *out)
{
	if (rc == IMAP_NOTIFY_BAD) {
		buf_puts(out, "BAD");
		return;
	}
	if (rc == IMAP_NOTIFY_BADEVENT) {
		buf_puts(out, "BADEVENT");
		return;
	}
	if (s->none) {
		buf_puts(out, "NONE");
		return;
	}
	buf_puts(out, s->status ? "SET STATUS" : "SET");
	for (size_t i = 0; i < s->ngroups; i++) {
		const struct imap_notify_group_spec *g = &s->groups[i];

		buf_printf(out, " %s:%x", filter_names[g->filter], g->events);
		if (g->nnames > 0) {
			buf_putc(out, '[');
			for (size_t j = 0; j < g->nnames; j++)
				buf_printf(out, "%s%s", j > 0 ? "," : "", g->names[j]->s);
			buf_putc(out, ']');
		}
		if (g->fetch != NULL)
			buf_printf(out, "{%u}", g->fetch->n);
	}
}

#define CUT ((size_t)1 << 40)

/* Feeds the line in pieces of step bytes (0: whole; cut|CUT: split at cut), every literal
   taken inline; the parse's result rendered into out ("PARSE" when the line did not parse). */
static void feed(const char *in, size_t len, size_t step, struct buf *out)
{
	struct imap_parser *p = imap_parser_new(&lim);
	struct imap_notify_spec s;
	size_t off = 0, used, n;
	int rc = IMAP_PARSE_MORE;

	buf_reset(out);
	while (off < len) {
		n = step == 0 || len - off < step ? len - off : step;
		if (step & CUT)
			n = off < (step & ~CUT) ? (step & ~CUT) - off : len - off;
		rc = imap_parser_feed(p, in + off, n, &used);
		off += used;
		if (rc == IMAP_PARSE_LITERAL) {
			assert_int_equal(imap_parser_literal_accept(p), 0);
			rc = IMAP_PARSE_MORE;
			continue;
		}
		if (rc != IMAP_PARSE_MORE)
			break;
	}
	if (rc != IMAP_PARSE_DONE) {
		buf_puts(out, "PARSE");
	} else {
		const struct imap_arg *a = imap_parser_args(p, &n);
		const char *why = NULL;

		assert_true(n >= 1 && imap_arg_atom_is(&a[0], "NOTIFY"));
		rc = imap_notify_parse(a + 1, a + n, &s, &why);
		assert_true(rc == IMAP_NOTIFY_OK ? why == NULL : why != NULL);
		render(rc, &s, out);
	}
	imap_parser_free(&p);
}

/* The same result whole, in every two-piece split and byte by byte. */
static void check(const char *args, const char *want)
{
	char in[2048];
	struct buf out;
	size_t len;

	len = (size_t)snprintf(in, sizeof(in), "t NOTIFY%s%s\r\n", *args ? " " : "", args);
	buf_init(&out, 0, 4096);
	for (size_t step = 0; step <= len; step++) {
		feed(in, len, step, &out);
		if (strcmp(buf_cstr(&out), want) != 0)
			fail_msg("%s step %zu: '%s', want '%s'", args, step, buf_cstr(&out), want);
	}
	for (size_t cut = 1; cut < len; cut++) {
		feed(in, len, cut | CUT, &out);
		if (strcmp(buf_cstr(&out), want) != 0)
			fail_msg("%s cut %zu: '%s', want '%s'", args, cut, buf_cstr(&out), want);
	}
	buf_release(&out);
}

static void test_none_and_set(void **state)
{
	check("NONE", "NONE");
	check("none", "NONE");
	check("SET (selected (MessageNew MessageExpunge))", "SET selected:3");
	check("SET STATUS (personal (MailboxName SubscriptionChange))", "SET STATUS personal:30");
	check("SET (inboxes NONE) (personal (MessageNew))", "SET inboxes:0 personal:1");
	check("SET (selected-delayed (MessageNew MessageExpunge FlagChange))", "SET delayed:7");
	check("SET (subscribed (MailboxMetadataChange ServerMetadataChange))",
	      "SET subscribed:c0");
}

static void test_rfc_examples(void **state)
{
	/* RFC 5465 3.1 with errata 1804 and 2318 */
	check("set status (selected (MessageNew (uid body.peek[header.fields (from to subject)]) "
	      "MessageExpunge)) (subtree Lists (MessageNew))",
	      "SET STATUS selected:3{2} subtree:1[Lists]");
	check("set (selected (MessageNew (uid body.peek[header.fields (from to subject)]) "
	      "MessageExpunge)) (subtree Lists (MessageNew)) (mailboxes misc (MessageNew))",
	      "SET selected:3{2} subtree:1[Lists] mailboxes:1[misc]");
}

static void test_mailboxes(void **state)
{
	check("SET (mailboxes (INBOX \"a b\" {3}\r\nx/y) (MessageNew MessageExpunge))",
	      "SET mailboxes:3[INBOX,a b,x/y]");
	check("SET (subtree \"\" (MailboxName))", "SET subtree:10[]");
	check("SET (subtree (A B) (MailboxName)) (mailboxes C NONE)",
	      "SET subtree:10[A,B] mailboxes:0[C]");
}

static void test_bad(void **state)
{
	static const char *const bad[] = {
		"",
		"SET",
		"SET STATUS",
		"FOO",
		"NONE extra",
		"SET selected",
		"SET (selected)",
		"SET ()",
		"SET (bogus (MessageNew))",
		"SET (subtree (MessageNew))",
		"SET (mailboxes () (MessageNew))",
		"SET (personal INBOX (MessageNew))",
		"SET (selected (MessageNew) extra)",
		"SET (selected ())",
		"SET (selected (\"MessageNew\"))",
		"SET (selected ((MessageNew)))",
		"SET (selected (FlagChange))",
		"SET (selected (MessageNew FlagChange))",
		"SET (selected (MessageNew MessageExpunge)) (selected-delayed NONE)",
		"SET (selected NONE) (selected NONE)",
		"SET (personal (MessageNew (UID) MessageExpunge))",
		"SET (selected (MessageNew () MessageExpunge))",
		"SET (selected (MessageExpunge (UID)))",
		"SET (selected (MessageNew MessageExpunge)) extra",
		/* a BAD wins over a BADEVENT */
		"SET (personal (AnnotationChange)) (bogus NONE)",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check(bad[i], "BAD");
}

static void test_badevent(void **state)
{
	check("SET (personal (MessageNew MessageExpunge AnnotationChange))", "BADEVENT");
	check("SET (inboxes (SomeFutureEvent))", "BADEVENT");
	check("SET (inboxes (MessageNew)) (personal (x-event))", "BADEVENT");
}

static void test_limits(void **state)
{
	char line[2048];
	size_t n = 0;

	n += (size_t)snprintf(line + n, sizeof(line) - n, "SET (mailboxes (");
	for (int i = 0; i < IMAP_NOTIFY_NAMES_MAX + 1; i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%sm%d", i ? " " : "", i);
	snprintf(line + n, sizeof(line) - n, ") (MessageNew))");
	check(line, "BAD");
	n = (size_t)snprintf(line, sizeof(line), "SET");
	for (int i = 0; i < IMAP_NOTIFY_GROUPS_MAX + 1; i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, " (inboxes NONE)");
	check(line, "BAD");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_none_and_set), cmocka_unit_test(test_rfc_examples),
		cmocka_unit_test(test_mailboxes),    cmocka_unit_test(test_bad),
		cmocka_unit_test(test_badevent),     cmocka_unit_test(test_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
