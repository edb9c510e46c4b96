/* fuzz_msgcache.c — libFuzzer target: any bytes through the message cache builder, fed whole and
 * in two chunks (the blobs must be identical), then every reader over the blob. Also the header
 * helpers over the same bytes as a header block. Built only with -Dfuzz=true (clang). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "common/msgcache.h"
#include "common/rfc5322.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void no_addr(void *ctx, const struct rfc5322_addr *a)
{
	(void)ctx;
	(void)a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const sections[] = { "",    "1",     "2",     "1.1",  "1.2",
						"2.1", "1.1.1", "2.1.1", "3.2.1" };
	static const struct str_view names[] = { { "From", 4 }, { "subject", 7 } };
	struct buf whole, split, hf;
	struct msgcache_builder *b;
	struct msgcache_view v;
	struct msgcache_part p;
	size_t cut = size > 0 ? data[0] % (size + 1) : 0;
	int64_t t;

	buf_init(&whole, 0, 1 << 26);
	buf_init(&split, 0, 1 << 26);
	assert(msgcache_build(data, size, &whole) == 0);
	b = msgcache_builder_new();
	msgcache_builder_push(b, data, cut);
	msgcache_builder_push(b, data + cut, size - cut);
	assert(msgcache_builder_finish(b, &split) == 0);
	msgcache_builder_free(&b);
	assert(whole.len == split.len && memcmp(whole.data, split.data, whole.len) == 0);
	assert(msgcache_parse(whole.data, whole.len, &v) == 0);
	assert(v.size == size && v.header_size <= size);
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
		if (msgcache_part(whole.data, whole.len, sections[i], &p) == 0)
			assert(p.body_off + p.body_size <= size);
	/* truncated blobs are refused, never read past */
	(void)msgcache_parse(whole.data, whole.len / 2, &v);
	(void)msgcache_part(whole.data, whole.len / 2, "1", &p);

	buf_init(&hf, 0, 1 << 20);
	(void)rfc5322_header_fields((const char *)data, size, names, 2, false, &hf);
	buf_reset(&hf);
	(void)rfc5322_header_fields((const char *)data, size, names, 2, true, &hf);
	buf_reset(&hf);
	(void)rfc5322_header_value((const char *)data, size, "subject", &hf);
	(void)rfc5322_date_parse((const char *)data, size, &t);
	(void)rfc5322_addr_parse((const char *)data, size, no_addr, NULL);
	buf_release(&hf);
	buf_release(&whole);
	buf_release(&split);
	return 0;
}
