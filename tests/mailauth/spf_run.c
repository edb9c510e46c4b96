/* spf_run.c — runs SPF checks read from stdin, for the test suites: with a table resolver
 * (lines "Z<TAB>name<TAB>type<TAB>data", "RESET" between scenarios) or, with
 * --dns ADDR@PORT, through libheron_dns against a real resolver. Each
 * "C<TAB>id<TAB>ip<TAB>mailfrom<TAB>helo" line prints "id<TAB>result<TAB>explanation". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mailauth/spf.h"
#include "tests/mailauth/fake_dns.h"

static struct event_base *base;

struct one {
	struct spf_verdict v;
	bool done;
};

static void done_cb(const struct spf_verdict *v, void *arg)
{
	struct one *o = arg;

	o->v = *v;
	o->done = true;
	event_base_loopbreak(base);
}

/* Undoes the driver's escapes in place: \\ \0 \t \r \n. The length. */
static size_t unescape(char *p)
{
	size_t k = 0;

	for (size_t i = 0; p[i]; i++) {
		if (p[i] == '\\' && p[i + 1]) {
			char c = p[++i];
			p[k++] = c == '0'   ? '\0'
				 : c == 't' ? '\t'
				 : c == 'r' ? '\r'
				 : c == 'n' ? '\n'
					    : c;
		} else {
			p[k++] = p[i];
		}
	}
	p[k] = '\0';
	return k;
}

static void run_case(const struct ma_resolver *r, char *id, char *ip, char *from, char *helo)
{
	struct spf_request rq = {
		.sender = from, .helo = helo, .receiver = "receiver.test", .now = 1700000000
	};
	struct one o = { 0 };
	struct spf *s = NULL;
	const char *at = strrchr(from, '@');

	if (spf_ip_parse(ip, &rq.ip) < 0) {
		printf("%s\tbadip\t\n", id);
		return;
	}
	rq.domain = from[0] ? (at ? at + 1 : from) : helo;
	if (spf_check(r, &rq, done_cb, &o, &s, &o.v) == 0) {
		while (!o.done)
			event_base_dispatch(base);
		spf_free(&s);
	}
	printf("%s\t%s\t%s\t%s\n", id, ma_result_str(o.v.result), o.v.explanation,
	       o.v.problem ? o.v.problem : "");
	fflush(stdout);
}

static char empty[1];

static char *field(char **p)
{
	char *s = *p, *t = s ? strchr(s, '\t') : NULL;

	if (t != NULL) {
		*t = '\0';
		*p = t + 1;
	} else {
		*p = NULL;
	}
	return s ? s : empty;
}

int main(int argc, char **argv)
{
	struct fake_dns *f;
	struct dns *d = NULL;
	struct ma_resolver r;
	char line[70000];

	base = event_base_new();
	f = fake_dns_new(base);
	if (argc == 3 && strcmp(argv[1], "--dns") == 0) {
		const char *ns[] = { argv[2] };
		struct dns_opts o = { .nameservers = ns,
				      .nnameservers = 1,
				      .timeout_ms = 2000,
				      .attempts = 2,
				      .dnssec = DNS_DNSSEC_OFF,
				      .cache_size = 1000 };
		char *err;

		if (dns_new(base, &o, &d, &err) < 0) {
			fprintf(stderr, "spf_run: %s\n", err);
			return 1;
		}
		ma_resolver_dns(&r, d);
	} else {
		fake_dns_resolver(f, &r);
	}
	while (fgets(line, sizeof(line), stdin) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		char *p = line, *kind = field(&p);

		if (strcmp(kind, "RESET") == 0) {
			fake_dns_clear(f);
		} else if (strcmp(kind, "Z") == 0) {
			char *name = field(&p), *type = field(&p);
			char *data = p ? p : empty;
			size_t len = unescape(data);
			fake_dns_add_len(f, name, type, data, len);
		} else if (strcmp(kind, "C") == 0) {
			char *id = field(&p), *ip = field(&p), *from = field(&p),
			     *helo = field(&p);
			run_case(&r, id, ip, from, helo);
		}
	}
	dns_free(&d);
	fake_dns_free(&f);
	event_base_free(base);
	return 0;
}
