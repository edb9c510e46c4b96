/* fuzz_sieve_parse.c — libFuzzer target: any bytes as a Sieve script, compiled whole and fed
 * in two pieces split at the first byte's value; both must agree, and a compiled program
 * must pass sieve_program_valid. Built only with -Dfuzz=true. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sieve/sieve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sieve_compile_opts o = { .max_script_size = 64 * 1024, .max_nesting = 16 };
	uint8_t *p1 = NULL, *p2 = NULL;
	size_t l1, l2, cut = size ? data[0] % (size + 1) : 0;
	char *e1 = NULL, *e2 = NULL;
	int r1 = sieve_compile((const char *)data, size, &o, &p1, &l1, &e1);
	struct sieve_parser *p = sieve_parser_new(&o);

	sieve_parser_feed(p, data, cut);
	sieve_parser_feed(p, data + cut, size - cut);
	int r2 = sieve_parser_finish(&p, &p2, &l2, &e2);
	assert(r1 == r2);
	if (r1 == 0) {
		assert(l1 == l2 && memcmp(p1, p2, l1) == 0);
		assert(sieve_program_valid(p1, l1));
	} else {
		assert(e1 != NULL && strcmp(e1, e2) == 0 && strncmp(e1, "line ", 5) == 0);
	}
	free(p1);
	free(p2);
	free(e1);
	free(e2);
	return 0;
}
