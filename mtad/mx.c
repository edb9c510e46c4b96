/* mx.c — owns the order of a domain's mail exchangers and of a host's addresses (mx.h). */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mtad/mx.h"

bool mx_is_literal(const char *name)
{
	char buf[64];
	struct in6_addr a;
	size_t len = strlen(name);

	if (len >= 2 && name[0] == '[' && name[len - 1] == ']') {
		snprintf(buf, sizeof(buf), "%.*s", (int)(len - 2), name + 1);
		name = buf;
		if (strncasecmp(name, "ipv6:", 5) == 0)
			name += 5;
	}
	return inet_pton(AF_INET, name, &a) == 1 || inet_pton(AF_INET6, name, &a) == 1;
}

static int by_pref(const void *a, const void *b)
{
	const struct mx_host *x = a, *y = b;

	return (int)x->pref - (int)y->pref;
}

enum mx_verdict mx_order(const struct dns_mx *in, size_t n, struct mx_host *out, size_t max,
			 size_t *n_r, uint32_t (*rnd)(void))
{
	struct mx_host *all = calloc(n ? n : 1, sizeof(*all));
	size_t k = 0;

	*n_r = 0;
	if (all == NULL)
		abort();
	/* RFC 7505: one MX with the root as exchange */
	if (n == 1 && in[0].host[0] == '\0') {
		free(all);
		return MX_NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (in[i].host[0] == '\0' || mx_is_literal(in[i].host))
			continue;
		all[k].pref = in[i].pref;
		snprintf(all[k].name, sizeof(all[k].name), "%s", in[i].host);
		k++;
	}
	if (k == 0) {
		free(all);
		return MX_INVALID;
	}
	/* shuffle first (Fisher-Yates), then a stable sort keeps the shuffle among equals */
	for (size_t i = k - 1; i > 0; i--) {
		size_t j = rnd() % (i + 1);
		struct mx_host t = all[i];

		all[i] = all[j];
		all[j] = t;
	}
	/* insertion sort: stable, and n is small (the records of one answer) */
	for (size_t i = 1; i < k; i++) {
		struct mx_host t = all[i];
		size_t j = i;

		while (j > 0 && by_pref(&all[j - 1], &t) > 0) {
			all[j] = all[j - 1];
			j--;
		}
		all[j] = t;
	}
	/* the same host twice (two preferences): keep its best */
	for (size_t i = 0; i < k && *n_r < max; i++) {
		bool dup = false;

		for (size_t j = 0; j < *n_r && !dup; j++)
			dup = strcmp(out[j].name, all[i].name) == 0;
		if (!dup)
			out[(*n_r)++] = all[i];
	}
	free(all);
	return MX_HOSTS;
}

size_t mx_interleave(char (*v6)[46], size_t n6, char (*v4)[46], size_t n4, char (*out)[46],
		     size_t max)
{
	size_t n = 0, i6 = 0, i4 = 0;

	while (n < max && (i6 < n6 || i4 < n4)) {
		if (i6 < n6)
			memcpy(out[n++], v6[i6++], 46);
		if (n < max && i4 < n4)
			memcpy(out[n++], v4[i4++], 46);
	}
	return n;
}
