/* fuzz_sieve_run.c — libFuzzer target: the input is a script and a message separated by the
 * first NUL byte; a script that compiles is run on the message with small limits, and the
 * result must hold at least one action (the implicit keep after any error) and respect the
 * limits. Built only with -Dfuzz=true. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sieve/sieve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool exists(void *ctx, const char *m)
{
	return m[0] == 'J';
}

static bool dup(void *ctx, const char *k)
{
	return strlen(k) % 2 == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t slen = nul ? (size_t)(nul - data) : size;
	const char *msg = nul ? (const char *)nul + 1 : "";
	size_t mlen = nul ? size - slen - 1 : 0;
	uint8_t *prog;
	size_t plen;
	char *err;
	struct sieve_limits lim = { .max_instructions = 2000,
				    .max_redirects = 2,
				    .max_actions = 8,
				    .max_header_bytes = 1 << 16,
				    .max_body_bytes = 1 << 16 };
	struct sieve_env env = { .msg = msg,
				 .msg_len = mlen,
				 .env_from = "a@b.example",
				 .env_to = "c+d@e.example",
				 .now = 1700000000,
				 .mailbox_exists = exists,
				 .duplicate_seen = dup };
	struct sieve_result r;

	if (sieve_compile((const char *)data, slen, NULL, &prog, &plen, &err) < 0) {
		free(err);
		return 0;
	}
	sieve_run(prog, plen, &env, &lim, &r);
	assert(r.nact >= 1 || r.error == NULL);
	assert(r.instructions <= lim.max_instructions + 1);
	size_t redirects = 0;
	for (size_t i = 0; i < r.nact; i++)
		redirects += r.act[i].type == SIEVE_REDIRECT;
	assert(redirects <= lim.max_redirects);
	assert(r.nact <= lim.max_actions + 1);
	sieve_result_clear(&r);
	free(prog);
	return 0;
}
