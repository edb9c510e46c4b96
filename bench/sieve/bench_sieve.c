/* bench_sieve.c — Sieve cost per delivery: compiles a script once (bench/sieve/corporate.sieve
 * by default: 50 rules of header, address, size tests, fileinto and flags) and runs it against
 * a mix of messages, printing the compile time and the µs per run (median of 5 rounds), with
 * the program size and the work counters. Figures, never assertions.
 *
 *   bench_sieve [SCRIPT] [RUNS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "sieve/sieve.h"

static char *slurp(const char *path, size_t *len_r)
{
	FILE *f = fopen(path, "r");
	char *p;
	long n;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0)
		return NULL;
	rewind(f);
	p = malloc((size_t)n + 1);
	if (p == NULL || fread(p, 1, (size_t)n, f) != (size_t)n)
		return NULL;
	fclose(f);
	*len_r = (size_t)n;
	return p;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "bench/sieve/corporate.sieve";
	long runs = argc > 2 ? atol(argv[2]) : 20000;
	static const char *const msgs[] = {
		"Received: from mx.example by corp; Tue, 1 Dec 2026 10:00:00 +0000\r\n"
		"From: Alice <alice@partner7.example>\r\nTo: bob@corp.example\r\n"
		"Cc: eng-list@corp.example\r\nSubject: Re: [project-3] status\r\n"
		"Date: Tue, 1 Dec 2026 09:59:00 +0000\r\nMessage-ID: <a1@partner7.example>\r\n"
		"X-Mailer: Mutt\r\n\r\nAll good.\r\n",
		"From: billing@vendor.example\r\nTo: finance@corp.example\r\n"
		"Subject: Your invoice 2026-11-09\r\nMessage-ID: <b2@vendor.example>\r\n"
		"X-Priority: 1\r\n\r\nPlease pay.\r\n",
		"From: news@shop.example\r\nTo: bob@corp.example\r\nSubject: Deals of the week\r\n"
		"X-Mailer: bulkmailer-4\r\nList-Id: <deals.shop.example>\r\n\r\nBuy.\r\n",
		"From: friend@home.example\r\nTo: bob@corp.example\r\nSubject: lunch?\r\n"
		"Message-ID: <c3@home.example>\r\n\r\nNoon?\r\n",
	};
	size_t nmsg = sizeof(msgs) / sizeof(msgs[0]), slen, plen;
	char *src = slurp(path, &slen), *err;
	uint8_t *prog;
	double t0, rounds[5];
	uint64_t ins = 0, hb = 0, acts = 0;
	struct sieve_result r;

	if (src == NULL) {
		fprintf(stderr, "bench_sieve: cannot read %s\n", path);
		return 2;
	}
	t0 = ((double)clock_mono_ns() / 1e3);
	if (sieve_compile(src, slen, NULL, &prog, &plen, &err) < 0) {
		fprintf(stderr, "bench_sieve: %s: %s\n", path, err);
		return 2;
	}
	double compile_us = ((double)clock_mono_ns() / 1e3) - t0;
	for (int k = 0; k < 5; k++) {
		t0 = ((double)clock_mono_ns() / 1e3);
		for (long i = 0; i < runs; i++) {
			const char *m = msgs[(size_t)i % nmsg];
			struct sieve_env env = { .msg = m,
						 .msg_len = strlen(m),
						 .env_from = "x@y.example",
						 .env_to = "bob@corp.example",
						 .now = 1796119200 };

			sieve_run(prog, plen, &env, NULL, &r);
			if (k == 0 && (size_t)i < nmsg) {
				ins += r.instructions;
				hb += r.header_bytes;
				acts += r.nact;
			}
			sieve_result_clear(&r);
		}
		rounds[k] = (((double)clock_mono_ns() / 1e3) - t0) / (double)runs;
	}
	qsort(rounds, 5, sizeof(rounds[0]), cmp_double);
	printf("script            %s (%zu bytes source, %zu bytes compiled)\n", path, slen, plen);
	printf("compile           %.1f us\n", compile_us);
	printf("run per delivery  %.2f us (median of 5 rounds of %ld; min %.2f, max %.2f)\n",
	       rounds[2], runs, rounds[0], rounds[4]);
	printf("per message mix   %.1f instructions, %.0f header bytes compared, %.1f actions\n",
	       (double)ins / (double)nmsg, (double)hb / (double)nmsg, (double)acts / (double)nmsg);
	free(prog);
	free(src);
	return 0;
}
