/* fuzz_imap_sort.c — libFuzzer target: SORT criteria and THREAD (imapd/imap_sort.c). The input's
 * first line is parsed as SORT's criteria list (a command line "x SORT <line>"), the rest is
 * split at NUL bytes into messages whose caches are built as at delivery; the messages are
 * sorted by the criteria (when they parse) and threaded with every algorithm. The sort must
 * be a permutation of the messages and every thread response must name each message once.
 * Built only with -Dfuzz=true (clang). */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/msgcache.h"
#include "imapd/imap_parser.h"
#include "imapd/imapd.h"
#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MSGS_MAX 64

static const struct imap_parser_limits lim = {
	.line_max = 1024, .literal_max = 512, .depth_max = 8, .items_max = 64
};

/* The criteria of line (NULL-terminated text without CR LF): 0 and crit, or -1. */
static int criteria(const char *line, size_t len, struct imap_sort_crit *crit, size_t *n)
{
	struct imap_parser *p = imap_parser_new(&lim);
	struct buf cmd;
	size_t used, nargs;
	unsigned need = 0;
	int rc = -1;

	buf_init(&cmd, 64, 2048);
	buf_printf(&cmd, "x SORT %.*s\r\n", (int)len, line);
	if (imap_parser_feed(p, cmd.data, cmd.len, &used) == IMAP_PARSE_DONE) {
		const struct imap_arg *a = imap_parser_args(p, &nargs);

		if (nargs >= 2)
			rc = imap_sort_parse(&a[1], crit, n, &need);
	}
	buf_release(&cmd);
	imap_parser_free(&p);
	return rc;
}

/* Every message number 1..n appears once in the THREAD text. */
static void check_threads(const char *s, size_t n)
{
	bool seen[MSGS_MAX + 1] = { false };
	size_t count = 0;
	int depth = 0;

	for (const char *p = s; *p != '\0'; p++) {
		if (*p == '(') {
			depth++;
		} else if (*p == ')') {
			assert(--depth >= 0);
		} else if (*p >= '0' && *p <= '9') {
			char *end;
			unsigned long v = strtoul(p, &end, 10);

			assert(v >= 1 && v <= n && !seen[v]);
			seen[v] = true;
			count++;
			p = end - 1;
		} else {
			assert(*p == ' ');
		}
	}
	assert(depth == 0 && count == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data, *end = in + size;
	const char *nl = memchr(in, '\n', size);
	struct imap_sort_crit crit[IMAP_SORT_CRITERIA_MAX];
	struct buf caches[MSGS_MAX];
	struct imap_sort_cache *cache = NULL; /* shared by the runs, as a mailbox's is */
	size_t ncrit = 0, n = 0;
	bool sortable;
	const char *p;

	if (nl == NULL)
		return 0;
	sortable = criteria(in, (size_t)(nl - in), crit, &ncrit) == 0;
	for (p = nl + 1; p < end && n < MSGS_MAX; n++) {
		const char *z = memchr(p, '\0', (size_t)(end - p));
		size_t len = (size_t)((z != NULL ? z : end) - p);

		buf_init(&caches[n], 256, 1024 * 1024);
		if (msgcache_build(p, len, &caches[n]) < 0)
			buf_reset(&caches[n]);
		p += len + 1;
	}
	for (int alg = -1; alg <= THREAD_REFS; alg++) {
		struct imap_sort_set *set = imap_sort_set_new(&cache,
							      IMAP_SORT_NEED_SUBJECT |
								      IMAP_SORT_NEED_ADDR |
								      IMAP_SORT_NEED_THREAD);
		struct buf out;

		for (size_t i = 0; i < n; i++) {
			struct store_msg m = { .uid = (uint32_t)i + 1,
					       .internaldate = (int64_t)i,
					       .size = caches[i].len,
					       .cache = caches[i].data,
					       .cache_len = caches[i].len };

			imap_sort_set_add(set, (uint32_t)i + 1, &m);
		}
		if (alg < 0) {
			if (sortable) {
				bool seen[MSGS_MAX + 1] = { false };

				imap_sort_run(set, crit, ncrit);
				for (size_t i = 0; i < n; i++) {
					uint32_t s = imap_sort_at(set, i, false);

					assert(s >= 1 && s <= n && !seen[s]);
					seen[s] = true;
				}
			}
		} else {
			buf_init(&out, 256, 1024 * 1024);
			imap_thread_run(set, (enum imap_thread_alg)alg, false, &out);
			check_threads(buf_cstr(&out), n);
			buf_release(&out);
		}
		imap_sort_set_free(&set);
	}
	imap_sort_cache_free(&cache);
	for (size_t i = 0; i < n; i++)
		buf_release(&caches[i]);
	return 0;
}
