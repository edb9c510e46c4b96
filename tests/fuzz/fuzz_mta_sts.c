/* fuzz_mta_sts.c — libFuzzer target: any bytes as an MTA-STS TXT record and as a policy file
 * (mtad/mta_sts.c), then MX matching against the parsed policy. Checks an accepted id is
 * 1-32 alphanumerics, an accepted policy has a known mode, max_age in range, mx patterns that
 * are names (or "*." and a name), and that each pattern matches a host made from it. Built
 * only with -Dfuzz=true. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "mtad/mta_sts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	char id[STS_ID_MAX + 1], host[DNS_NAME_MAX + 8];
	struct sts_policy pol;
	const char *err;

	if (sts_txt_parse(p, size, id) == 1) {
		size_t n = strlen(id);

		assert(n >= 1 && n <= STS_ID_MAX);
		for (size_t i = 0; i < n; i++)
			assert((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'z') ||
			       (id[i] >= 'A' && id[i] <= 'Z'));
	}
	if (sts_policy_parse(p, size, &pol, &err) < 0) {
		assert(err != NULL);
		return 0;
	}
	assert(pol.mode == STS_NONE || pol.mode == STS_TESTING || pol.mode == STS_ENFORCE);
	assert(pol.max_age >= 0 && pol.max_age <= STS_MAX_AGE_MAX);
	assert(pol.nmx <= STS_MX_MAX && (pol.mode == STS_NONE || pol.nmx > 0));
	for (size_t i = 0; i < pol.nmx; i++) {
		const char *pat = pol.mx[i];
		bool wild = pat[0] == '*' && pat[1] == '.';

		assert(dns_name_valid(wild ? pat + 2 : pat));
		snprintf(host, sizeof(host), "%s%s", wild ? "x." : "", wild ? pat + 2 : pat);
		assert(sts_mx_match(&pol, host));
	}
	return 0;
}
