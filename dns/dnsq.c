/* dnsq.c — looks names up through libheron_dns with the [dns] settings of heron.conf and
 * prints each answer on one line: for tests of the resolver and for an admin checking [dns].
 *
 *   dnsq [-c heron.conf] [-o dns.key=value]... [-r rounds] TYPE NAME...
 *
 * Every NAME of a round is asked at once; a round starts when the previous one has answered,
 * so later rounds show the cache. The last line gives the counters. Exit 0 when every lookup
 * answered (whatever the status), 2 on a usage or config error. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/conf.h"
#include "common/log.h"
#include "dns/dns.h"

static const struct {
	const char *name;
	enum dns_type type;
} types[] = {
	{ "A", DNS_T_A },     { "AAAA", DNS_T_AAAA }, { "MX", DNS_T_MX },
	{ "TXT", DNS_T_TXT }, { "TLSA", DNS_T_TLSA }, { "CNAME", DNS_T_CNAME },
	{ "PTR", DNS_T_PTR },
};

static size_t outstanding;
static char tname_buf[16];

static void print_rr(const struct dns_rr *rr)
{
	char text[INET6_ADDRSTRLEN];

	switch (rr->type) {
	case DNS_T_A:
		printf(" %s", inet_ntop(AF_INET, &rr->u.a, text, sizeof(text)));
		break;
	case DNS_T_AAAA:
		printf(" %s", inet_ntop(AF_INET6, &rr->u.aaaa, text, sizeof(text)));
		break;
	case DNS_T_MX:
		printf(" %u:%s", rr->u.mx.pref, rr->u.mx.host[0] ? rr->u.mx.host : ".");
		break;
	case DNS_T_TXT:
		printf(" txt(%zu)=\"%.*s\"", rr->u.txt.len,
		       rr->u.txt.len > 200 ? 200 : (int)rr->u.txt.len, rr->u.txt.text);
		break;
	case DNS_T_TLSA:
		printf(" %u.%u.%u:", rr->u.tlsa.usage, rr->u.tlsa.selector, rr->u.tlsa.mtype);
		for (size_t i = 0; i < rr->u.tlsa.len && i < 64; i++)
			printf("%02x", rr->u.tlsa.data[i]);
		break;
	case DNS_T_CNAME:
		printf(" %s", rr->u.cname);
		break;
	case DNS_T_PTR:
		printf(" %s", rr->u.ptr);
		break;
	}
}

static void answer_cb(const struct dns_answer *a, void *arg)
{
	printf("%s %s status=%s secure=%s cached=%s ttl=%u canon=%s n=%zu", a->name,
	       (const char *)arg, dns_status_str(a->status), a->secure ? "yes" : "no",
	       a->cached ? "yes" : "no", a->ttl, a->canon, a->n);
	for (size_t i = 0; i < a->n && i < 20; i++)
		print_rr(&a->rr[i]);
	if (a->why != NULL && a->why[0] != '\0')
		printf(" why=\"%s\"", a->why);
	printf("\n");
	fflush(stdout);
	outstanding--;
}

static int usage(void)
{
	fprintf(stderr, "usage: dnsq [-c heron.conf] [-o dns.key=value]... [-r rounds] TYPE "
			"NAME...\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct conf *c = NULL;
	const char *overrides[32];
	size_t noverrides = 0;
	long rounds = 1;
	char *err = NULL;
	int ch;

	log_init("dnsq", true, 0);
	while ((ch = getopt(argc, argv, "c:o:r:")) != -1) {
		if (ch == 'c' && conf_load(optarg, &c, &err) < 0) {
			fprintf(stderr, "dnsq: %s\n", err);
			return 2;
		} else if (ch == 'o' && noverrides < 32) {
			overrides[noverrides++] = optarg;
		} else if (ch == 'r') {
			rounds = strtol(optarg, NULL, 10);
		} else if (ch != 'c') {
			return usage();
		}
	}
	if (argc - optind < 2 || rounds < 1)
		return usage();
	if (c == NULL)
		c = conf_defaults();
	for (size_t i = 0; i < noverrides; i++) {
		char sec[64], key[64];
		const char *dot = strchr(overrides[i], '.'), *eq = strchr(overrides[i], '=');

		if (dot == NULL || eq == NULL || eq < dot ||
		    snprintf(sec, sizeof(sec), "%.*s", (int)(dot - overrides[i]), overrides[i]) >=
			    64 ||
		    snprintf(key, sizeof(key), "%.*s", (int)(eq - dot - 1), dot + 1) >= 64)
			return usage();
		if (conf_set(c, sec, key, eq + 1, &err) < 0) {
			fprintf(stderr, "dnsq: %s\n", err);
			return 2;
		}
	}
	const char *tname = argv[optind];
	enum dns_type type = 0;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcasecmp(tname, types[i].name) == 0)
			type = types[i].type;
	if (type == 0)
		return usage();
	snprintf(tname_buf, sizeof(tname_buf), "%s", tname);

	struct event_base *base = event_base_new();
	struct dns_opts o;
	struct dns *d;
	struct dns_stats st;

	dns_opts_from_conf(&o, c);
	if (dns_new(base, &o, &d, &err) < 0) {
		fprintf(stderr, "dnsq: %s\n", err);
		return 2;
	}
	for (long r = 0; r < rounds; r++) {
		for (int i = optind + 1; i < argc; i++) {
			outstanding++;
			dns_lookup(d, argv[i], type, answer_cb, tname_buf);
		}
		while (outstanding > 0)
			event_base_loop(base, EVLOOP_ONCE);
	}
	dns_stats(d, &st);
	printf("stats lookups=%llu hits=%llu queries=%llu\n", (unsigned long long)st.lookups,
	       (unsigned long long)st.hits, (unsigned long long)st.queries);
	dns_free(&d);
	event_base_free(base);
	conf_free(&c);
	return 0;
}
