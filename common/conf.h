/* conf.h — heron.conf: INI-style sections, `key = value`, `#` comments, `include PATH`.
 *
 * Every key of every program lives in one typed table (conf_keys.c) with its bounds, default
 * and documentation; the parser, the defaults, `-t` and the test that etc/heron.conf documents
 * every key all read that table (STYLE 15). Unknown sections, unknown keys and bad values are
 * errors naming file:line. Programs read the values through conf_values(): one typed struct
 * per section (conf_keys.h), filled once as the file is read. Durations are in
 * milliseconds, sizes in bytes. */
#ifndef HERON_CONF_H
#define HERON_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "common/conf_keys.h"

enum conf_type {
	CONF_STR,      /* any text (may be empty) */
	CONF_INT,      /* decimal integer in [min, max] */
	CONF_SIZE,     /* bytes, with k/M/G units, in [min, max] */
	CONF_DURATION, /* ms/s/m/h/d, stored in ms, in [min, max] */
	CONF_BOOL,     /* yes/no/true/false/on/off/1/0 */
	CONF_ENUM,     /* one of the '|'-separated choices */
	CONF_ADDRS,    /* comma list of host:port, [v6]:port, *:port or /unix/path */
	CONF_CIDRS,    /* comma list of addresses or networks, v4 or v6 */
	CONF_LIST,     /* comma list of words */
	CONF_DURLIST,  /* comma list of durations (a retry schedule) */
};

/* How a struct heron_conf field holds a value (checked against the key's type at start). */
enum conf_field {
	CONF_F_NONE, /* the row names no field */
	CONF_F_STR,
	CONF_F_I64,
	CONF_F_U64,
	CONF_F_BOOL,
	CONF_F_ENUM,
	CONF_F_ADDRS,
	CONF_F_CIDRS,
	CONF_F_LIST,
};

struct conf_key {
	const char *section;
	const char *name;
	enum conf_type type;
	int64_t min, max;    /* CONF_INT, CONF_SIZE, CONF_DURATION (ms) */
	const char *def;     /* the default, written as in the file */
	const char *choices; /* CONF_ENUM: "a|b|c" */
	const char *doc;     /* one line for -t and the docs test */
	size_t off;          /* CONF_AT: the field in struct heron_conf */
	enum conf_field field;
	size_t field_size;
};

/* The field of a conf_keys[] row: CONF_AT(mtad.line_max). Its C type gives its kind. */
#define CONF_AT(f) \
	.off = offsetof(struct heron_conf, f),                                             \
	.field_size = sizeof(((struct heron_conf *)0)->f),                                 \
	.field = _Generic(((struct heron_conf *)0)->f,                                     \
			 const char *: CONF_F_STR,                                          \
			 int64_t: CONF_F_I64,                                               \
			 uint64_t: CONF_F_U64,                                              \
			 bool: CONF_F_BOOL,                                                 \
			 const struct conf_addrs *: CONF_F_ADDRS,                           \
			 const struct conf_cidrs *: CONF_F_CIDRS,                           \
			 const struct conf_list *: CONF_F_LIST,                             \
			 default: CONF_F_ENUM)

extern const struct conf_key conf_keys[];
extern const size_t conf_nkeys;

struct conf_addr {
	char *host; /* "" or "*" = every address; the socket path for unix sockets */
	char *port; /* NULL for a unix socket */
	bool unix_path;
};
struct conf_addrs {
	size_t n;
	struct conf_addr *v;
};
struct conf_cidr {
	int family; /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	unsigned prefix;
};
struct conf_cidrs {
	size_t n;
	struct conf_cidr *v;
};
struct conf_list {
	size_t n;
	char **v;
	int64_t *ms; /* CONF_DURLIST: the values in ms */
};

struct conf;

/* Reads path (and its includes) over the defaults. On error returns -1 and sets *error_r to a
   malloc'd "file:line: what is wrong" (free it). */
int conf_load(const char *path, struct conf **conf_r, char **error_r);
/* A config holding only the defaults. */
struct conf *conf_defaults(void);
/* Sets one key from text, as a file line would (command-line overrides, tests). */
int conf_set(struct conf *c, const char *section, const char *key, const char *value,
	     char **error_r);
void conf_free(struct conf **cp);

/* Every key's value, typed (conf_keys.h); valid while c is. */
const struct heron_conf *conf_values(const struct conf *c);

/* The value as written (or the default's text), whatever the key's type: to compare two
   configs, e.g. on reload. */
const char *conf_text(const struct conf *c, const char *section, const char *key);
/* Where the key's value came from ("default" or "file:line"). */
const char *conf_origin(const struct conf *c, const char *section, const char *key);

/* Parses one CIDR ("10.0.0.0/8", "::1", "127.0.0.1"). */
int conf_cidr_parse(const char *text, struct conf_cidr *out);
bool conf_cidrs_match(const struct conf_cidrs *l, const struct sockaddr *sa);
/* Whether the list contains word, ignoring ASCII case. */
bool conf_list_has(const struct conf_list *l, const char *word, size_t len);

/* Prints the effective configuration (every key, in table order, with its origin) for -t. */
void conf_dump(const struct conf *c, FILE *out);
/* -n: only the keys of sections (NULL-terminated; NULL: every section)
   whose value differs from the default, as heron.conf text ("[s]" lines, "key = value"). */
void conf_dump_changed(const struct conf *c, const char *const *sections, FILE *out);

#endif
