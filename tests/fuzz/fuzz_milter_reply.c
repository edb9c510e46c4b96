/* fuzz_milter_reply.c — libFuzzer target: any bytes as what a milter sends back
 * (mtad/milter_proto.c): replies are taken one after another until one is garbage or more
 * bytes are needed. Checks that an accepted reply lies inside the input, that its strings end
 * inside it, a reply code is 4xx or 5xx with its text NUL-terminated, and that a cut of the
 * same bytes never yields a different verdict than "need more". A reply code's text is made
 * into SMTP reply lines (milter_reply_lines, what mtad answers a client with at any step) in
 * buffers of several sizes: NUL-terminated inside the buffer, every line the code then '-' or
 * ' ' (the last one ' ', the others '-'), no CR, no empty line. Also the first bytes as a
 * [milter] list. Built only with -Dfuzz=true. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mtad/milter_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str(const char *s, const uint8_t *data, size_t size)
{
	if (s == NULL)
		return;
	assert((const uint8_t *)s >= data && (const uint8_t *)s < data + size);
	assert(memchr(s, '\0', (size_t)(data + size - (const uint8_t *)s)) != NULL);
}

static void check_lines(const struct milter_reply *r)
{
	static const size_t sizes[] = { 8, 40, 1024 };
	char out[1024 + 1];

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t size = sizes[k];

		out[size] = 'X'; /* must stay untouched */
		milter_reply_lines(r->code, r->text, out, size);
		assert(out[size] == 'X');
		assert(memchr(out, '\0', size) != NULL);
		assert(strchr(out, '\r') == NULL);
		if (out[0] == '\0')
			continue;
		for (const char *line = out;;) {
			const char *nl = strchr(line, '\n');
			size_t n = nl != NULL ? (size_t)(nl - line) : strlen(line);

			assert(n >= 4 && memcmp(line, r->text, 3) == 0);
			assert(line[3] == (nl != NULL ? '-' : ' '));
			if (nl == NULL)
				break;
			line = nl + 1;
		}
	}
}

static void check(const struct milter_reply *r, const uint8_t *p, size_t used)
{
	assert(used >= 5 && (const uint8_t *)r->data == p + 5 && r->len == used - 5);
	check_str(r->name, p, used);
	check_str(r->value, p, used);
	for (int i = 0; i < MILTER_NSTAGES; i++)
		check_str(r->symlist[i], p, used);
	if (r->cmd == SMFIR_REPLYCODE) {
		assert(r->code >= 400 && r->code <= 599);
		check_str(r->text, p, used);
		check_lines(r);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (off < size) {
		struct milter_reply r;
		const char *err = NULL;
		size_t used = 0;
		int rc = milter_reply_parse(data + off, size - off, &r, &used, &err);

		if (rc <= 0) {
			assert(rc == 0 || err != NULL);
			break;
		}
		check(&r, data + off, used);
		/* the same packet cut short only ever needs more */
		if (used > 1) {
			struct milter_reply r2;
			size_t used2 = 0;

			assert(milter_reply_parse(data + off, used - 1, &r2, &used2, &err) != 1);
		}
		off += used;
	}
	if (size > 0 && size < 4096) {
		char *text = malloc(size + 1);
		struct milter_defaults d = { 1000, 1000, 1000, MILTER_TEMPFAIL };
		struct milter_spec *v = NULL;
		size_t n = 0;
		char *err = NULL;

		memcpy(text, data, size);
		text[size] = '\0';
		if (milter_specs_parse(text, &d, &v, &n, &err) == 0) {
			for (size_t i = 0; i < n; i++)
				assert(v[i].host != NULL && (v[i].unix_path || v[i].port > 0));
			milter_specs_free(&v, n);
		} else {
			assert(err != NULL);
			free(err);
		}
		free(text);
	}
	return 0;
}
