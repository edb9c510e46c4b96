/* fuzz_imap_parser.c — libFuzzer target: the IMAP command parser (imapd/imap_parser) and
 * sequence sets. The input (after one control byte) is a client byte stream, fed once whole and
 * once in small chunks: both must produce the same events (results, tags, arguments). Literals
 * are accepted, streamed by "the caller" or rejected depending on their size, as imapd would;
 * once the parser says the input is lost (a refused non-synchronizing literal it cannot skip),
 * the stream ends there, as imapd closes the connection.
 * Arguments stay inside the limits and within the flat array; every atom is also tried as a
 * sequence set. Built only with -Dfuzz=true (clang). */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "imapd/imap_parser.h"
#include "imapd/imap_seqset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct imap_parser_limits lim = {
	.line_max = 1024, .literal_max = 512, .depth_max = 8, .items_max = 64
};

static void note(struct buf *log, const void *p, size_t n)
{
	(void)buf_append(log, p, n);
}

/* done: a whole command (lists closed); else the arguments so far at a LITERAL. */
static void check_args(struct imap_parser *p, struct buf *log, bool done)
{
	size_t n = 0;
	const struct imap_arg *a = imap_parser_args(p, &n);
	struct imap_seqset set = { 0 };

	assert(n <= lim.items_max);
	for (size_t i = 0; i < n; i++) {
		note(log, &a[i].type, sizeof(a[i].type));
		if (a[i].type == IMAP_ARG_LIST) {
			if (!done)
				continue; /* still open: span not final */
			assert(i + a[i].span < n);
			assert(a[i].n <= a[i].span);
			continue;
		}
		if (a[i].type == IMAP_ARG_STREAMED) {
			note(log, &a[i].len, sizeof(a[i].len));
			continue;
		}
		assert(a[i].s != NULL && a[i].s[a[i].len] == '\0');
		note(log, a[i].s, a[i].len + 1);
		if (a[i].type == IMAP_ARG_ATOM) {
			assert(a[i].len > 0 && memchr(a[i].s, '\0', a[i].len) == NULL);
			(void)imap_arg_is_nil(&a[i]);
			if (imap_seqset_parse(&set, a[i].s, a[i].len, 16) == 0) {
				struct buf out;

				imap_seqset_resolve(&set, 100);
				assert(imap_seqset_max(&set) == 0 ||
				       imap_seqset_has(&set, imap_seqset_max(&set)));
				buf_init(&out, 0, 4096);
				assert(imap_seqset_format(&set, &out) == 0);
				buf_release(&out);
			}
		}
	}
	imap_seqset_release(&set);
}

/* Feeds data in chunks of at most chunk bytes; logs every event into log. */
static void run(const char *data, size_t size, size_t chunk, struct buf *log)
{
	struct imap_parser *p = imap_parser_new(&lim);
	size_t off = 0, skip = 0;
	unsigned events = 0;

	while (off < size && events++ < 10000) {
		size_t want = size - off < chunk ? size - off : chunk, used = 0;
		int r;

		if (skip > 0) {
			/* the caller reads a streamed literal itself */
			size_t k = skip < want ? skip : want;

			off += k;
			skip -= k;
			if (skip == 0)
				imap_parser_literal_streamed(p);
			continue;
		}
		r = imap_parser_feed(p, data + off, want, &used);
		assert(used <= want);
		off += used;
		if (r == IMAP_PARSE_MORE) {
			assert(used == want);
			continue;
		}
		note(log, &r, sizeof(r));
		const char *tag = imap_parser_tag(p);
		if (tag != NULL)
			note(log, tag, strlen(tag) + 1);
		if (r == IMAP_PARSE_ERROR) {
			assert(imap_parser_error(p) != NULL);
			note(log, imap_parser_error(p), strlen(imap_parser_error(p)));
		} else if (r == IMAP_PARSE_DONE) {
			check_args(p, log, true);
		} else {
			uint64_t lsize;
			bool sync;
			unsigned depth;

			assert(r == IMAP_PARSE_LITERAL);
			imap_parser_literal(p, &lsize, &sync, &depth);
			assert(depth <= lim.depth_max);
			check_args(p, log, false);
			note(log, &lsize, sizeof(lsize));
			if (lsize % 3 == 2 && depth == 0) {
				skip = (size_t)lsize;
				if (skip == 0)
					imap_parser_literal_streamed(p);
			} else if (lsize % 3 == 1) {
				imap_parser_literal_reject(p, "no");
			} else if (imap_parser_literal_accept(p) < 0) {
				/* too big, too many arguments, or the line's strings and
				   literals together pass the parser's one ceiling */
				assert(imap_parser_error(p) != NULL);
			} else {
				assert(lsize <= lim.literal_max);
			}
		}
		if (imap_parser_lost(p)) {
			/* the parser cannot tell data from commands: imapd says BYE here */
			assert(imap_parser_error(p) != NULL);
			note(log, "LOST", 4);
			break;
		}
	}
	imap_parser_free(&p);
	assert(p == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf whole, split;
	size_t chunk = size > 0 ? (size_t)(data[0] % 7) + 1 : 1;

	if (size == 0)
		return 0;
	buf_init(&whole, 0, 1 << 22);
	buf_init(&split, 0, 1 << 22);
	run((const char *)data + 1, size - 1, size, &whole);
	run((const char *)data + 1, size - 1, chunk, &split);
	assert(whole.len == split.len &&
	       memcmp(buf_cstr(&whole), buf_cstr(&split), whole.len) == 0);
	buf_release(&whole);
	buf_release(&split);
	return 0;
}
