/* fuzz_utf7imap.c — libFuzzer target: modified UTF-7 (common/utf7imap). Any bytes are decoded;
 * valid() agrees with decode(); what decodes re-encodes to the same bytes; any UTF-8 the encoder
 * takes decodes back to itself. A full output ceiling leaves the buffer unchanged. Built only
 * with -Dfuzz=true (clang). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "common/utf7imap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	struct buf dec, enc, small;
	int rc;

	buf_init(&dec, 0, 1 << 20);
	buf_init(&enc, 0, 1 << 20);
	rc = utf7imap_decode(in, size, &dec);
	assert((rc == 0) == utf7imap_valid(in, size));
	if (rc == 0) {
		assert(utf7imap_encode(dec.data != NULL ? dec.data : "", dec.len, &enc) == 0);
		assert(enc.len == size && memcmp(enc.data != NULL ? enc.data : "", in, size) == 0);
	} else {
		assert(dec.len == 0);
	}
	buf_reset(&dec);
	buf_reset(&enc);
	/* The input as UTF-8 text: encode, then decode must give it back. */
	if (utf7imap_encode(in, size, &enc) == 0) {
		assert(utf7imap_valid(enc.data != NULL ? enc.data : "", enc.len));
		assert(utf7imap_decode(enc.data != NULL ? enc.data : "", enc.len, &dec) == 0);
		assert(dec.len == size && memcmp(dec.data != NULL ? dec.data : "", in, size) == 0);
	} else {
		assert(enc.len == 0);
	}
	/* A ceiling reached halfway leaves the buffer as it was. */
	buf_init(&small, 0, size / 2);
	(void)buf_append(&small, "x", size > 1 ? 1 : 0);
	size_t before = small.len;
	if (utf7imap_encode(in, size, &small) != 0)
		assert(small.len == before);
	if (utf7imap_decode(in, size, &small) != 0)
		assert(small.len <= size / 2);
	buf_release(&small);
	buf_release(&dec);
	buf_release(&enc);
	return 0;
}
