/* fake_dns.c — the table resolver of fake_dns.h. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/xmalloc.h"
#include "tests/mailauth/fake_dns.h"

struct entry {
	char *name;
	int type; /* 0: TIMEOUT */
	char *data;
	size_t len;
};

struct fake_dns {
	struct event_base *base;
	struct entry *e;
	size_t n, cap;
	unsigned queries;
};

struct fq {
	struct fake_dns *f;
	char name[300];
	enum dns_type type;
	dns_cb *cb;
	void *arg;
	struct event *ev;
};

struct fake_dns *fake_dns_new(struct event_base *base)
{
	struct fake_dns *f = xcalloc(1, sizeof(*f));

	f->base = base;
	return f;
}

void fake_dns_clear(struct fake_dns *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->e[i].name);
		free(f->e[i].data);
	}
	f->n = 0;
	f->queries = 0;
}

void fake_dns_free(struct fake_dns **fp)
{
	if (*fp == NULL)
		return;
	fake_dns_clear(*fp);
	free((*fp)->e);
	free(*fp);
	*fp = NULL;
}

static int type_of(const char *t)
{
	static const struct {
		const char *n;
		int t;
	} types[] = {
		{ "A", DNS_T_A },     { "AAAA", DNS_T_AAAA }, { "MX", DNS_T_MX },
		{ "TXT", DNS_T_TXT }, { "PTR", DNS_T_PTR },   { "CNAME", DNS_T_CNAME },
		{ "TIMEOUT", 0 },
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcasecmp(t, types[i].n) == 0)
			return types[i].t;
	return -1;
}

void fake_dns_add(struct fake_dns *f, const char *name, const char *type, const char *data)
{
	fake_dns_add_len(f, name, type, data ? data : "", data ? strlen(data) : 0);
}

void fake_dns_add_len(struct fake_dns *f, const char *name, const char *type, const char *data,
		      size_t len)
{
	int t = type_of(type);

	if (t < 0)
		return;
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 16;
		f->e = xreallocarray(f->e, f->cap, sizeof(*f->e));
	}
	size_t nl = strlen(name);
	while (nl > 0 && name[nl - 1] == '.')
		nl--;
	f->e[f->n].name = xstrndup(name, nl);
	f->e[f->n].type = t;
	f->e[f->n].data = xmemdup0(data, len);
	f->e[f->n].len = len;
	f->n++;
}

unsigned fake_dns_queries(const struct fake_dns *f)
{
	return f->queries;
}

static bool rr_of(const struct entry *e, struct dns_rr *rr)
{
	memset(rr, 0, sizeof(*rr));
	rr->type = (enum dns_type)e->type;
	switch (e->type) {
	case DNS_T_A:
		return inet_pton(AF_INET, e->data, &rr->u.a) == 1;
	case DNS_T_AAAA:
		return inet_pton(AF_INET6, e->data, &rr->u.aaaa) == 1;
	case DNS_T_MX: {
		unsigned pref = 0;
		char host[DNS_NAME_MAX + 2] = "";

		if (sscanf(e->data, "%u %254s", &pref, host) < 1)
			return false;
		size_t hl = strlen(host);
		while (hl > 0 && host[hl - 1] == '.')
			host[--hl] = '\0';
		rr->u.mx.pref = (uint16_t)pref;
		snprintf(rr->u.mx.host, sizeof(rr->u.mx.host), "%s", host);
		for (char *p = rr->u.mx.host; *p; p++)
			*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
		return true;
	}
	case DNS_T_TXT:
		rr->u.txt.text = e->data;
		rr->u.txt.len = e->len;
		return true;
	case DNS_T_PTR:
	case DNS_T_CNAME: {
		char *dst = e->type == DNS_T_PTR ? rr->u.ptr : rr->u.cname;
		snprintf(dst, DNS_NAME_MAX + 1, "%s", e->data);
		size_t l = strlen(dst);
		while (l > 0 && dst[l - 1] == '.')
			dst[--l] = '\0';
		return true;
	}
	}
	return false;
}

/* The records of type for name: 1 found (maybe none: *n 0 with the name present), 0 the name
   is absent, -1 a timeout. */
static int collect(struct fake_dns *f, const char *name, enum dns_type type, struct dns_rr *rr,
		   size_t *n, size_t max, int level)
{
	bool present = false, seen = false;

	for (size_t i = 0; i < f->n; i++) {
		struct entry *e = &f->e[i];

		if (strcasecmp(e->name, name) != 0)
			continue;
		present = true;
		if (e->type == 0) {
			if (!seen)
				return -1;
			return 1;
		}
		if ((int)type == e->type) {
			seen = true;
			if (*n < max && rr_of(e, &rr[*n]))
				(*n)++;
		} else if (e->type == DNS_T_CNAME && level == 0) {
			char target[DNS_NAME_MAX + 1];

			snprintf(target, sizeof(target), "%s", e->data);
			size_t l = strlen(target);
			while (l > 0 && target[l - 1] == '.')
				target[--l] = '\0';
			int rc = collect(f, target, type, rr, n, max, 1);
			if (rc < 0)
				return -1;
			seen |= *n > 0;
		}
	}
	if (!present && strncasecmp(name, "error.", 6) == 0)
		return -1;
	return present ? 1 : 0;
}

static void answer(evutil_socket_t fd, short what, void *arg)
{
	struct fq *q = arg;
	struct dns_rr rr[64];
	size_t n = 0;
	struct dns_answer a = { .type = q->type, .name = q->name, .canon = q->name, .rr = rr };
	char lname[300];

	snprintf(lname, sizeof(lname), "%s", q->name);
	size_t l = strlen(lname);
	while (l > 0 && lname[l - 1] == '.')
		lname[--l] = '\0';
	if (!dns_name_valid(q->name)) {
		a.status = DNS_EINVAL;
	} else {
		int rc = collect(q->f, lname, q->type, rr, &n, 64, 0);

		a.status = rc < 0    ? DNS_ETEMP
			   : rc == 0 ? DNS_NXDOMAIN
			   : n == 0  ? DNS_NODATA
				     : DNS_OK;
	}
	a.n = a.status == DNS_OK ? n : 0;
	a.why = "";
	event_free(q->ev);
	dns_cb *cb = q->cb;
	void *cbarg = q->arg;
	free(q);
	cb(&a, cbarg);
}

static void *lookup(void *ctx, const char *name, enum dns_type type, dns_cb *cb, void *arg)
{
	struct fake_dns *f = ctx;
	struct fq *q = xcalloc(1, sizeof(*q));
	struct timeval zero = { 0, 0 };

	f->queries++;
	q->f = f;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->type = type;
	q->cb = cb;
	q->arg = arg;
	q->ev = evtimer_new(f->base, answer, q);
	evtimer_add(q->ev, &zero);
	return q;
}

static void cancel(void *ctx, void *query)
{
	struct fq *q = query;

	event_free(q->ev);
	free(q);
}

void fake_dns_resolver(struct fake_dns *f, struct ma_resolver *r)
{
	r->lookup = lookup;
	r->cancel = cancel;
	r->ctx = f;
}
