/* conf.c — owns reading heron.conf: the line parser, includes, typed values (struct
 * heron_conf, filled as each key is set) and -t output. The keys themselves are in
 * conf_keys.c, their fields in conf_keys.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/str.h"
#include "common/xmalloc.h"

#define CONF_LINE_MAX 8192
#define CONF_INCLUDE_DEPTH 8

struct conf_value {
	char *text;   /* the value as written */
	char *origin; /* "default" or "file:line" */
	int64_t i;
	bool b;
	int choice; /* CONF_ENUM: the index in the key's choices */
	struct conf_addrs addrs;
	struct conf_cidrs cidrs;
	struct conf_list list;
};

struct conf {
	struct conf_value *v; /* one per conf_keys[] row */
	struct heron_conf vals;
};

static int key_index(const char *section, const char *name)
{
	for (size_t i = 0; i < conf_nkeys; i++)
		if (strcmp(conf_keys[i].section, section) == 0 &&
		    strcmp(conf_keys[i].name, name) == 0)
			return (int)i;
	return -1;
}

static bool section_known(const char *section)
{
	for (size_t i = 0; i < conf_nkeys; i++)
		if (strcmp(conf_keys[i].section, section) == 0)
			return true;
	return false;
}

static void value_clear(struct conf_value *v)
{
	free(v->text);
	free(v->origin);
	for (size_t i = 0; i < v->addrs.n; i++) {
		free(v->addrs.v[i].host);
		free(v->addrs.v[i].port);
	}
	free(v->addrs.v);
	free(v->cidrs.v);
	for (size_t i = 0; i < v->list.n; i++)
		free(v->list.v[i]);
	free(v->list.v);
	free(v->list.ms);
	memset(v, 0, sizeof(*v));
}

int conf_cidr_parse(const char *text, struct conf_cidr *out)
{
	char addr[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(text, '/');
	size_t alen = slash != NULL ? (size_t)(slash - text) : strlen(text);
	uint64_t prefix;

	if (alen == 0 || alen >= sizeof(addr))
		return -1;
	memcpy(addr, text, alen);
	addr[alen] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, addr, out->addr) == 1) {
		out->family = AF_INET;
		out->prefix = 32;
	} else if (inet_pton(AF_INET6, addr, out->addr) == 1) {
		out->family = AF_INET6;
		out->prefix = 128;
	} else {
		return -1;
	}
	if (slash != NULL) {
		if (str_to_u64(slash + 1, strlen(slash + 1), out->prefix, &prefix) < 0)
			return -1;
		out->prefix = (unsigned)prefix;
	}
	return 0;
}

static bool cidr_match_bytes(const struct conf_cidr *c, const uint8_t *a)
{
	unsigned full = c->prefix / 8, rest = c->prefix % 8;

	if (memcmp(c->addr, a, full) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (c->addr[full] & mask) == (a[full] & mask);
}

bool conf_cidrs_match(const struct conf_cidrs *l, const struct sockaddr *sa)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	uint8_t a4[4], a6[16];
	bool has4 = false, has6 = false;

	if (sa->sa_family == AF_INET) {
		memcpy(a4, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		has4 = true;
	} else if (sa->sa_family == AF_INET6) {
		memcpy(a6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
		has6 = true;
		if (memcmp(a6, v4mapped, 12) == 0) {
			memcpy(a4, a6 + 12, 4);
			has4 = true;
		}
	}
	for (size_t i = 0; i < l->n; i++) {
		const struct conf_cidr *c = &l->v[i];

		if ((c->family == AF_INET && has4 && cidr_match_bytes(c, a4)) ||
		    (c->family == AF_INET6 && has6 && cidr_match_bytes(c, a6)))
			return true;
	}
	return false;
}

bool conf_list_has(const struct conf_list *l, const char *word, size_t len)
{
	for (size_t i = 0; i < l->n; i++)
		if (str_caseeq(l->v[i], strlen(l->v[i]), word, len))
			return true;
	return false;
}

static char *errorf(const char *origin, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static char *errorf(const char *origin, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return xasprintf("%s: %s", origin, msg);
}

static int parse_addr(struct str_view f, struct conf_addr *a)
{
	const char *colon;

	memset(a, 0, sizeof(*a));
	if (f.len > 0 && f.p[0] == '/') {
		a->host = xmemdup0(f.p, f.len);
		a->unix_path = true;
		return 0;
	}
	if (f.len > 0 && f.p[0] == '[') {
		const char *rb = memchr(f.p, ']', f.len);

		if (rb == NULL || rb + 1 >= f.p + f.len || rb[1] != ':')
			return -1;
		a->host = xmemdup0(f.p + 1, (size_t)(rb - f.p - 1));
		colon = rb + 1;
	} else {
		colon = memrchr(f.p, ':', f.len);
		if (colon == NULL || memchr(f.p, ':', (size_t)(colon - f.p)) != NULL)
			return -1;
		a->host = xmemdup0(f.p, (size_t)(colon - f.p));
	}
	size_t plen = (size_t)(f.p + f.len - colon - 1);
	uint64_t port;
	if (str_to_u64(colon + 1, plen, 65535, &port) < 0) {
		free(a->host);
		a->host = NULL;
		return -1;
	}
	a->port = xmemdup0(colon + 1, plen);
	return 0;
}

static void list_push(struct conf_list *l, struct str_view f)
{
	l->v = xreallocarray(l->v, l->n + 1, sizeof(*l->v));
	l->v[l->n++] = xmemdup0(f.p, f.len);
}

/* Parses text as key k's type into v; returns NULL or an error message (malloc'd). */
static char *parse_value(const struct conf_key *k, const char *text, const char *origin,
			 struct conf_value *v)
{
	struct str_view all = str_trim(str_view_of(text)), rest = all, f;
	uint64_t u;

	value_clear(v);
	v->text = xmemdup0(all.p, all.len);
	v->origin = xstrdup(origin);
	switch (k->type) {
	case CONF_STR:
		return NULL;
	case CONF_INT:
		if (str_to_i64(all.p, all.len, k->min, k->max, &v->i) < 0)
			return errorf(origin,
				      "%s: expected a whole number from %lld to %lld, "
				      "got \"%s\"",
				      k->name, (long long)k->min, (long long)k->max, v->text);
		return NULL;
	case CONF_SIZE:
		if (str_to_size(all.p, all.len, &u) < 0 || u > (uint64_t)k->max ||
		    (int64_t)u < k->min)
			return errorf(origin,
				      "%s: expected a size from %lld to %lld bytes "
				      "(units k, M, G), got \"%s\"",
				      k->name, (long long)k->min, (long long)k->max, v->text);
		v->i = (int64_t)u;
		return NULL;
	case CONF_DURATION:
		if (str_to_duration_ms(all.p, all.len, &v->i) < 0 || v->i < k->min ||
		    v->i > k->max)
			return errorf(origin,
				      "%s: expected a duration from %lldms to %lldms "
				      "(units ms, s, m, h, d), got \"%s\"",
				      k->name, (long long)k->min, (long long)k->max, v->text);
		return NULL;
	case CONF_BOOL:
		if (str_to_bool(all.p, all.len, &v->b) < 0)
			return errorf(origin, "%s: expected yes or no, got \"%s\"", k->name,
				      v->text);
		return NULL;
	case CONF_ENUM: {
		struct str_view ch = str_view_of(k->choices), c;

		for (v->choice = 0; str_split_next(&ch, '|', &c); v->choice++)
			if (c.len == all.len && memcmp(c.p, all.p, c.len) == 0)
				return NULL;
		return errorf(origin, "%s: expected one of %s, got \"%s\"", k->name, k->choices,
			      v->text);
	}
	case CONF_ADDRS:
	case CONF_CIDRS:
	case CONF_LIST:
	case CONF_DURLIST:
		break;
	}
	while (all.len > 0 && str_split_next(&rest, ',', &f)) {
		f = str_trim(f);
		if (f.len == 0)
			return errorf(origin, "%s: empty item in list \"%s\"", k->name, v->text);
		char *item = xmemdup0(f.p, f.len);
		char *err = NULL;
		if (k->type == CONF_ADDRS) {
			struct conf_addrs *a = &v->addrs;

			a->v = xreallocarray(a->v, a->n + 1, sizeof(*a->v));
			if (parse_addr(f, &a->v[a->n]) < 0)
				err = errorf(origin,
					     "%s: \"%s\" is not host:port, [v6]:port or "
					     "/socket/path",
					     k->name, item);
			else
				a->n++;
		} else if (k->type == CONF_CIDRS) {
			struct conf_cidrs *cl = &v->cidrs;

			cl->v = xreallocarray(cl->v, cl->n + 1, sizeof(*cl->v));
			if (conf_cidr_parse(item, &cl->v[cl->n]) < 0)
				err = errorf(origin, "%s: \"%s\" is not an address or network",
					     k->name, item);
			else
				cl->n++;
		} else {
			int64_t ms = 0;

			if (k->type == CONF_DURLIST && (str_to_duration_ms(f.p, f.len, &ms) < 0 ||
							ms < k->min || ms > k->max))
				err = errorf(origin,
					     "%s: \"%s\" is not a duration (ms, s, m, h, d)",
					     k->name, item);
			else {
				v->list.ms = xreallocarray(v->list.ms, v->list.n + 1,
							   sizeof(int64_t));
				v->list.ms[v->list.n] = ms;
				list_push(&v->list, f);
			}
		}
		free(item);
		if (err != NULL)
			return err;
	}
	return NULL;
}

/* The kind of field each key type fills. */
static enum conf_field field_of(enum conf_type t)
{
	switch (t) {
	case CONF_STR:
		return CONF_F_STR;
	case CONF_INT:
	case CONF_DURATION:
		return CONF_F_I64;
	case CONF_SIZE:
		return CONF_F_U64;
	case CONF_BOOL:
		return CONF_F_BOOL;
	case CONF_ENUM:
		return CONF_F_ENUM;
	case CONF_ADDRS:
		return CONF_F_ADDRS;
	case CONF_CIDRS:
		return CONF_F_CIDRS;
	case CONF_LIST:
	case CONF_DURLIST:
		break;
	}
	return CONF_F_LIST;
}

static size_t field_size_of(enum conf_field f)
{
	switch (f) {
	case CONF_F_BOOL:
		return sizeof(bool);
	case CONF_F_ENUM:
		return sizeof(int);
	default:
		return 8; /* int64_t, uint64_t, pointers */
	}
}

/* Copies key i's value into its field of c->vals. */
static void bind_value(struct conf *c, size_t i)
{
	const struct conf_key *k = &conf_keys[i];
	const struct conf_value *v = &c->v[i];
	void *f = (char *)&c->vals + k->off;

	switch (k->field) {
	case CONF_F_NONE:
		break;
	case CONF_F_STR:
		*(const char **)f = v->text;
		break;
	case CONF_F_I64:
		*(int64_t *)f = v->i;
		break;
	case CONF_F_U64:
		*(uint64_t *)f = (uint64_t)v->i;
		break;
	case CONF_F_BOOL:
		*(bool *)f = v->b;
		break;
	case CONF_F_ENUM:
		*(int *)f = v->choice;
		break;
	case CONF_F_ADDRS:
		*(const struct conf_addrs **)f = &v->addrs;
		break;
	case CONF_F_CIDRS:
		*(const struct conf_cidrs **)f = &v->cidrs;
		break;
	case CONF_F_LIST:
		*(const struct conf_list **)f = &v->list;
		break;
	}
}

/* A row whose field has another kind or size than its type fills: a bug in the table. */
static void check_field(const struct conf_key *k)
{
	enum conf_field want = field_of(k->type);

	if (k->field == CONF_F_NONE)
		return;
	if (k->field != want || k->field_size != field_size_of(want) ||
	    k->off + k->field_size > sizeof(struct heron_conf)) {
		fprintf(stderr,
			"heron: bug: config key %s.%s: its field in struct heron_conf "
			"is not of its type\n",
			k->section, k->name);
		abort();
	}
}

struct conf *conf_defaults(void)
{
	struct conf *c = xcalloc(1, sizeof(*c));

	c->v = xcalloc(conf_nkeys, sizeof(*c->v));
	for (size_t i = 0; i < conf_nkeys; i++) {
		char *err = parse_value(&conf_keys[i], conf_keys[i].def, "default", &c->v[i]);

		if (err != NULL) {
			fprintf(stderr, "heron: bad built-in default: %s\n", err);
			abort();
		}
		check_field(&conf_keys[i]);
		bind_value(c, i);
	}
	return c;
}

const struct heron_conf *conf_values(const struct conf *c)
{
	return &c->vals;
}

void conf_free(struct conf **cp)
{
	struct conf *c = *cp;

	if (c == NULL)
		return;
	for (size_t i = 0; i < conf_nkeys; i++)
		value_clear(&c->v[i]);
	free(c->v);
	free(c);
	*cp = NULL;
}

static int conf_set_at(struct conf *c, const char *section, const char *key, const char *value,
		       const char *origin, char **error_r)
{
	int i = key_index(section, key);
	char *err;

	if (i < 0) {
		*error_r = section_known(section)
				   ? errorf(origin, "unknown key \"%s\" in section [%s]", key,
					    section)
				   : errorf(origin, "unknown section [%s]", section);
		return -1;
	}
	err = parse_value(&conf_keys[i], value, origin, &c->v[i]);
	if (err != NULL) {
		/* Keep the default: the caller refuses the whole file anyway. */
		*error_r = err;
		parse_value(&conf_keys[i], conf_keys[i].def, "default", &c->v[i]);
	}
	bind_value(c, (size_t)i);
	return err != NULL ? -1 : 0;
}

int conf_set(struct conf *c, const char *section, const char *key, const char *value,
	     char **error_r)
{
	return conf_set_at(c, section, key, value, "command line", error_r);
}

static int conf_read(struct conf *c, const char *path, int depth, char **error_r);

/* One line of a file; section is the current [section] (updated here). */
static int conf_line(struct conf *c, const char *path, int lineno, char *line, char *section,
		     size_t section_size, int depth, char **error_r)
{
	char origin[PATH_MAX + 32];
	struct str_view v = str_trim(str_view_of(line));
	const char *eq;

	snprintf(origin, sizeof(origin), "%s:%d", path, lineno);
	if (v.len == 0 || v.p[0] == '#' || v.p[0] == ';')
		return 0;
	/* An inline comment starts at a '#' that follows white space. */
	for (size_t i = 1; i < v.len; i++)
		if (v.p[i] == '#' && (v.p[i - 1] == ' ' || v.p[i - 1] == '\t')) {
			v.len = i;
			v = str_trim(v);
			break;
		}
	if (v.p[0] == '[') {
		if (v.p[v.len - 1] != ']' || v.len < 3 || v.len - 2 >= section_size) {
			*error_r = errorf(origin, "bad section header \"%.*s\"", (int)v.len, v.p);
			return -1;
		}
		memcpy(section, v.p + 1, v.len - 2);
		section[v.len - 2] = '\0';
		if (!section_known(section)) {
			*error_r = errorf(origin, "unknown section [%s]", section);
			return -1;
		}
		return 0;
	}
	if (str_caseprefix(v.p, v.len, "include") && v.len > 7 &&
	    (v.p[7] == ' ' || v.p[7] == '\t')) {
		struct str_view f = str_trim((struct str_view){ v.p + 7, v.len - 7 });
		char *inc = xmemdup0(f.p, f.len), *full;
		const char *slash = strrchr(path, '/');
		int r;

		if (inc[0] != '/' && slash != NULL)
			full = xasprintf("%.*s/%s", (int)(slash - path), path, inc);
		else
			full = xstrdup(inc);
		free(inc);
		if (depth >= CONF_INCLUDE_DEPTH) {
			*error_r = errorf(origin, "includes nested deeper than %d",
					  CONF_INCLUDE_DEPTH);
			free(full);
			return -1;
		}
		r = conf_read(c, full, depth + 1, error_r);
		if (r < 0 && *error_r == NULL)
			*error_r = errorf(origin, "cannot include %s", full);
		free(full);
		return r;
	}
	eq = memchr(v.p, '=', v.len);
	if (eq == NULL) {
		*error_r = errorf(origin, "expected key = value, [section] or include PATH");
		return -1;
	}
	if (section[0] == '\0') {
		*error_r = errorf(origin, "key outside any [section]");
		return -1;
	}
	struct str_view k = str_trim((struct str_view){ v.p, (size_t)(eq - v.p) });
	char *key = xmemdup0(k.p, k.len);
	char *val = xmemdup0(eq + 1, (size_t)(v.p + v.len - eq - 1));
	int r = conf_set_at(c, section, key, val, origin, error_r);
	free(key);
	free(val);
	return r;
}

static int conf_read(struct conf *c, const char *path, int depth, char **error_r)
{
	char section[64] = "", *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0, r = 0;
	FILE *f = fopen(path, "r");

	if (f == NULL) {
		*error_r = xasprintf("%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	while (r == 0 && (n = getline(&line, &cap, f)) != -1) {
		lineno++;
		if (n > CONF_LINE_MAX) {
			char origin[PATH_MAX + 32];

			snprintf(origin, sizeof(origin), "%s:%d", path, lineno);
			*error_r = errorf(origin, "line longer than %d bytes", CONF_LINE_MAX);
			r = -1;
			break;
		}
		if (memchr(line, '\0', (size_t)n) != NULL) {
			char origin[PATH_MAX + 32];

			snprintf(origin, sizeof(origin), "%s:%d", path, lineno);
			*error_r = errorf(origin, "NUL byte in line");
			r = -1;
			break;
		}
		r = conf_line(c, path, lineno, line, section, sizeof(section), depth, error_r);
	}
	free(line);
	fclose(f);
	return r;
}

int conf_load(const char *path, struct conf **conf_r, char **error_r)
{
	struct conf *c = conf_defaults();

	*error_r = NULL;
	if (conf_read(c, path, 0, error_r) < 0) {
		conf_free(&c);
		return -1;
	}
	*conf_r = c;
	return 0;
}

const char *conf_origin(const struct conf *c, const char *section, const char *key)
{
	int i = key_index(section, key);

	if (i < 0)
		abort();
	return c->v[i].origin;
}

const char *conf_text(const struct conf *c, const char *section, const char *key)
{
	int i = key_index(section, key);

	if (i < 0)
		abort();
	return c->v[i].text;
}

/* Whether key i holds its default's value in c (d: the defaults). Numbers, booleans and
   choices compare as values ("off" is "no"), texts and lists as written. */
static bool is_default(const struct conf *c, const struct conf *d, size_t i)
{
	const struct conf_key *k = &conf_keys[i];
	const char *a = (const char *)&c->vals + k->off, *b = (const char *)&d->vals + k->off;

	switch (k->field) {
	case CONF_F_I64:
	case CONF_F_U64:
	case CONF_F_BOOL:
	case CONF_F_ENUM:
		return memcmp(a, b, k->field_size) == 0;
	case CONF_F_STR:
		return strcmp(*(const char *const *)(const void *)a,
			      *(const char *const *)(const void *)b) == 0;
	default:
		return strcmp(c->v[i].text, d->v[i].text) == 0;
	}
}

static bool section_in(const char *section, const char *const *sections)
{
	if (sections == NULL)
		return true;
	for (; *sections != NULL; sections++)
		if (strcmp(*sections, section) == 0)
			return true;
	return false;
}

void conf_dump_changed(const struct conf *c, const char *const *sections, FILE *out)
{
	struct conf *d = conf_defaults();
	const char *cur = "";
	bool any = false;

	for (size_t i = 0; i < conf_nkeys; i++) {
		const struct conf_key *k = &conf_keys[i];

		if (!section_in(k->section, sections) || is_default(c, d, i))
			continue;
		if (strcmp(cur, k->section) != 0) {
			fprintf(out, "%s[%s]\n", any ? "\n" : "", k->section);
			cur = k->section;
		}
		fprintf(out, "%s = %s\n", k->name, c->v[i].text);
		any = true;
	}
	conf_free(&d);
}

void conf_dump(const struct conf *c, FILE *out)
{
	const char *cur = "";

	for (size_t i = 0; i < conf_nkeys; i++) {
		const struct conf_key *k = &conf_keys[i];

		if (strcmp(cur, k->section) != 0) {
			fprintf(out, "%s[%s]\n", i == 0 ? "" : "\n", k->section);
			cur = k->section;
		}
		fprintf(out, "%s = %s", k->name, c->v[i].text);
		if (strcmp(c->v[i].origin, "default") != 0)
			fprintf(out, "    # %s", c->v[i].origin);
		fputc('\n', out);
	}
}
