/* fuzz_imap_notify.c — libFuzzer target: NOTIFY's syntax and rules (imapd/imap_notify.c) over
 * what the IMAP parser makes of the input. Each input is one or more command lines; every one
 * that parses is given to imap_notify_parse as NOTIFY's arguments (after its tag and first
 * word). A spec taken holds its groups and names within the bounds, pointers into the
 * arguments only, a valid selected index, fetch attributes only on the selected group, and
 * the same input parses to the same spec again. Built only with -Dfuzz=true (clang). */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "imapd/imap_notify.h"
#include "imapd/imap_parser.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct imap_parser_limits lim = {
	.line_max = 2048, .literal_max = 512, .depth_max = 8, .items_max = 256
};

static bool inside(const struct imap_arg *p, const struct imap_arg *a, const struct imap_arg *end)
{
	return p >= a && p < end;
}

static void check_spec(const struct imap_notify_spec *s, const struct imap_arg *a,
		       const struct imap_arg *end)
{
	assert(s->ngroups <= IMAP_NOTIFY_GROUPS_MAX);
	if (s->none) {
		assert(s->ngroups == 0 && !s->status);
		return;
	}
	assert(s->ngroups >= 1);
	assert(s->selected >= -1 && s->selected < (int)s->ngroups);
	for (size_t i = 0; i < s->ngroups; i++) {
		const struct imap_notify_group_spec *g = &s->groups[i];
		bool sel = g->filter == IMAP_NF_SELECTED || g->filter == IMAP_NF_SELECTED_DELAYED;

		assert(g->filter <= IMAP_NF_MAILBOXES);
		assert(sel == (s->selected == (int)i));
		assert(g->nnames <= IMAP_NOTIFY_NAMES_MAX);
		assert((g->nnames > 0) ==
		       (g->filter == IMAP_NF_SUBTREE || g->filter == IMAP_NF_MAILBOXES));
		for (size_t j = 0; j < g->nnames; j++) {
			assert(inside(g->names[j], a, end) && imap_arg_is_astring(g->names[j]));
			assert(memchr(g->names[j]->s, '\0', g->names[j]->len) == NULL);
		}
		assert(!(g->events & IMAP_NE_ANNOTATION)); /* never granted */
		if (g->events & IMAP_NE_FLAG)
			assert((g->events & (IMAP_NE_NEW | IMAP_NE_EXPUNGE)) ==
			       (IMAP_NE_NEW | IMAP_NE_EXPUNGE));
		if (g->fetch != NULL)
			assert(sel && inside(g->fetch, a, end) &&
			       g->fetch->type == IMAP_ARG_LIST && g->fetch->n > 0);
	}
}

static void one(struct imap_parser *p)
{
	static struct imap_notify_spec s, again;
	size_t n;
	const struct imap_arg *a = imap_parser_args(p, &n);
	const char *why = NULL, *why2 = NULL;
	int rc, rc2;

	if (n < 1)
		return;
	rc = imap_notify_parse(a + 1, a + n, &s, &why);
	assert(rc == IMAP_NOTIFY_OK || rc == IMAP_NOTIFY_BAD || rc == IMAP_NOTIFY_BADEVENT);
	assert(rc == IMAP_NOTIFY_OK ? why == NULL : why != NULL);
	if (rc == IMAP_NOTIFY_OK)
		check_spec(&s, a + 1, a + n);
	rc2 = imap_notify_parse(a + 1, a + n, &again, &why2);
	assert(rc2 == rc && (why == NULL) == (why2 == NULL));
	if (rc == IMAP_NOTIFY_OK)
		assert(memcmp(&s, &again, sizeof(s)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct imap_parser *p = imap_parser_new(&lim);
	size_t off = 0;
	unsigned events = 0;

	while (off < size && events++ < 1000) {
		size_t used = 0;
		int r = imap_parser_feed(p, (const char *)data + off, size - off, &used);

		off += used;
		if (r == IMAP_PARSE_LITERAL) {
			if (imap_parser_literal_accept(p) < 0 && imap_parser_lost(p))
				break;
			continue;
		}
		if (r == IMAP_PARSE_DONE)
			one(p);
		else if (r == IMAP_PARSE_ERROR && imap_parser_lost(p))
			break;
		else if (r == IMAP_PARSE_MORE)
			break;
	}
	imap_parser_free(&p);
	return 0;
}
