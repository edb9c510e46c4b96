/* fuzz_spf_parse.c — libFuzzer target: any bytes as an SPF record (spf_record_parse: every
 * mechanism, modifier, CIDR length and macro) and, when it parses, each domain-spec through
 * the macro expander with a fixed request; expansions stay within their buffer and are
 * NUL-terminated. Built only with -Dfuzz=true. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mailauth/spf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void expand(const char *spec, bool exp)
{
	struct spf_request rq = { .sender = "user+tag@example.test",
				  .helo = "mx.example.test",
				  .domain = "example.test",
				  .receiver = "mx.heron.test",
				  .now = 1700000000 };
	char out[300];

	assert(spf_ip_parse("192.0.2.7", &rq.ip) == 0);
	if (spf_expand(spec, &rq, "example.test", "unknown", exp, out, sizeof(out)) == 0)
		assert(strlen(out) < sizeof(out));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct spf_record r;
	const char *err = NULL;
	char spec[1024];

	(void)spf_is_record(p, size);
	memset(&r, 0, sizeof(r));
	if (spf_record_parse(p, size, &r, &err) == 0) {
		for (size_t i = 0; i < r.n; i++) {
			const struct spf_term *t = &r.t[i];

			assert(t->cidr4 >= 0 && t->cidr4 <= 32 && t->cidr6 >= 0 &&
			       t->cidr6 <= 128);
			if (t->domain != NULL)
				expand(t->domain, false);
		}
		if (r.redirect != NULL)
			expand(r.redirect, false);
		if (r.exp != NULL)
			expand(r.exp, false);
	} else {
		assert(err != NULL);
	}
	spf_record_release(&r);
	/* the input itself as a macro-string, as an explanation would be */
	size_t n = size < sizeof(spec) - 1 ? size : sizeof(spec) - 1;
	memcpy(spec, p, n);
	spec[n] = '\0';
	if (strlen(spec) == n)
		expand(spec, true);
	return 0;
}
