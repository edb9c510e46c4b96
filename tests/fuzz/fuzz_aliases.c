/* fuzz_aliases.c — libFuzzer target: any bytes as an aliases file (mtad/aliases.c). A parsed
 * map expands every name it holds (and a few addresses it may not) within the bounds: no more
 * than max_targets addresses, each once, none empty; a refusal always says why. Built only
 * with -Dfuzz=true. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mtad/aliases.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char d1[] = "heron.test", d2[] = "b.test";
static char *domains[] = { d1, d2 };

static void expand(const struct aliases *al, const char *addr)
{
	const struct aliases_ctx ctx = { domains, 2, 50 };
	char **v = NULL;
	size_t n = 0;
	const char *err = NULL;
	int rc = aliases_expand(al, &ctx, addr, &v, &n, &err);

	if (rc < 0) {
		assert(err != NULL && v == NULL && n == 0);
		return;
	}
	assert(rc == 1 ? n >= 1 && n <= ctx.max_targets : n == 0 && v == NULL);
	for (size_t i = 0; i < n; i++) {
		assert(v[i][0] != '\0');
		for (size_t j = 0; j < i; j++)
			assert(strcasecmp(v[i], v[j]) != 0);
	}
	aliases_strv_free(&v, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aliases *al = NULL;
	char *err = NULL;
	static const char *const probes[] = { "a@heron.test", "b@b.test", "postmaster",
					      "x@example.org", "A@HERON.TEST" };

	if (aliases_parse((const char *)data, size, "f", &al, &err) < 0) {
		assert(err != NULL && al == NULL);
		free(err);
		return 0;
	}
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		expand(al, probes[i]);
	/* every name of the file: take the text before each ':' at a line start */
	for (size_t i = 0, start = 0; i < size; i++) {
		if (data[i] == '\n') {
			start = i + 1;
		} else if (data[i] == ':' && i > start && i - start < 300) {
			char name[320];

			memcpy(name, data + start, i - start);
			name[i - start] = '\0';
			if (strlen(name) == i - start) {
				expand(al, name);
				strcat(name, "@heron.test");
				expand(al, name);
			}
			start = size; /* one per line */
		}
	}
	aliases_free(&al);
	return 0;
}
