/* fuzz_mimetext.c — libFuzzer target: any bytes as a message through the searchable-text
 * walk (common/mimetext.h: MIME parse, CTE decoding, charsets, folding, RFC 2047), whole and
 * cut at one byte: the runs must come out the same, since the full-text index and SEARCH
 * read the text in different chunks. Then SEARCH's matcher over the same bytes for a needle
 * taken from the text. Built only with -Dfuzz=true (clang). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "common/mimetext.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Each run as kind, a start mark and its bytes. */
static bool collect(void *arg, enum mimetext_kind kind, bool start, const char *p, size_t len,
		    const struct mimetext_leaf *leaf)
{
	struct buf *out = arg;

	(void)leaf;
	if (start) {
		buf_putc(out, '\0');
		buf_putc(out, (char)('0' + kind));
	}
	buf_append(out, p, len);
	return false;
}

static void walk(const uint8_t *data, size_t size, size_t cut, bool fold, struct buf *out)
{
	struct mimetext_opts o = { .fold = fold, .fields = true };
	struct mimetext *mt = mimetext_new(&o, collect, out);

	mimetext_begin(mt);
	mimetext_push(mt, data, cut);
	mimetext_push(mt, data + cut, size - cut);
	mimetext_end(mt);
	mimetext_free(&mt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cut = size > 0 ? data[0] % (size + 1) : 0;
	struct buf whole, split, words;

	buf_init(&whole, 256, 64u << 20);
	buf_init(&split, 256, 64u << 20);
	buf_init(&words, 256, 1u << 20);
	for (int fold = 0; fold < 2; fold++) {
		buf_reset(&whole);
		buf_reset(&split);
		walk(data, size, size, fold, &whole);
		walk(data, size, cut, fold, &split);
		assert(whole.len == split.len);
		assert(whole.len == 0 || memcmp(whole.data, split.data, whole.len) == 0);
	}
	mimetext_decode_words((const char *)data, size, &words);
	buf_reset(&words);
	mimetext_field_text((const char *)data, size, true, &words);
	buf_release(&whole);
	buf_release(&split);
	buf_release(&words);
	return 0;
}
