/* fuzz_conf.c — libFuzzer target: any bytes as heron.conf (written to a private temp dir and read
 * with conf_load, relative includes allowed within that dir), then the typed getters and -t
 * output over every key, conf_set with the first line split into section/key/value, and the
 * CIDR parser. Built only with -Dfuzz=true (clang). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/conf.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static char path[96];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char other[128];
	FILE *f;

	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "%s/heron-fuzz-conf.XXXXXX",
		 getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(dir) == NULL)
		abort();
	snprintf(path, sizeof(path), "%s/heron.conf", dir);
	/* A fragment an input can include by name ("include other.conf"). */
	snprintf(other, sizeof(other), "%s/other.conf", dir);
	f = fopen(other, "w");
	if (f == NULL)
		abort();
	fputs("[log]\nlevel = debug\n", f);
	fclose(f);
	return 0;
}

/* Includes may only name files in our dir (no '/'): an absolute include of /dev/stdin or a
   FIFO would only test the fuzzer's patience. */
static bool include_escapes(const uint8_t *data, size_t size)
{
	for (size_t i = 0; i + 7 <= size; i++) {
		if (strncasecmp((const char *)data + i, "include", 7) != 0)
			continue;
		for (size_t j = i + 7; j < size && data[j] != '\n'; j++)
			if (data[j] == '/')
				return true;
	}
	return false;
}

static void walk(const struct conf *c)
{
	FILE *null = fopen("/dev/null", "w");

	for (size_t i = 0; i < conf_nkeys; i++) {
		const struct conf_key *k = &conf_keys[i];
		const void *f = (const char *)conf_values(c) + k->off;

		assert(conf_origin(c, k->section, k->name) != NULL);
		switch (k->field) {
		case CONF_F_NONE:
			assert(!"every key names a field");
			break;
		case CONF_F_STR:
			assert(*(const char *const *)f != NULL);
			break;
		case CONF_F_I64: {
			int64_t v = *(const int64_t *)f;

			assert(v >= k->min && v <= k->max);
			break;
		}
		case CONF_F_U64: {
			uint64_t v = *(const uint64_t *)f;

			assert(v >= (uint64_t)k->min && v <= (uint64_t)k->max);
			break;
		}
		case CONF_F_BOOL:
			break;
		case CONF_F_ENUM:
			assert(*(const int *)f >= 0);
			break;
		case CONF_F_ADDRS:
			assert(*(const struct conf_addrs *const *)f != NULL);
			break;
		case CONF_F_CIDRS:
			assert(*(const struct conf_cidrs *const *)f != NULL);
			break;
		case CONF_F_LIST: {
			const struct conf_list *l = *(const struct conf_list *const *)f;

			if (l->n > 0)
				(void)conf_list_has(l, l->v[0], strlen(l->v[0]));
			break;
		}
		}
	}
	if (null != NULL) {
		conf_dump(c, null);
		fclose(null);
	}
}

/* The first line as "section key value" (space separated) through conf_set. */
static void set_first_line(const uint8_t *data, size_t size)
{
	char *line = strndup((const char *)data, size), *save = NULL, *err = NULL;
	char *nl = strchr(line, '\n');
	struct conf *c = conf_defaults();
	const char *sec, *key, *val;

	if (nl != NULL)
		*nl = '\0';
	sec = strtok_r(line, " ", &save);
	key = strtok_r(NULL, " ", &save);
	val = strtok_r(NULL, "", &save);
	if (sec != NULL && key != NULL && val != NULL) {
		bool known = false;

		/* A name outside the table is a caller's bug (abort), not input. */
		for (size_t i = 0; i < conf_nkeys && !known; i++)
			known = strcmp(conf_keys[i].section, sec) == 0 &&
				strcmp(conf_keys[i].name, key) == 0;
		if (known && conf_set(c, sec, key, val, &err) < 0)
			assert(err != NULL);
		free(err);
		walk(c);
	}
	conf_free(&c);
	assert(c == NULL);
	free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf *c = NULL;
	struct conf_cidr cidr;
	char *err = NULL, *text;
	FILE *f;

	text = strndup((const char *)data, size);
	(void)conf_cidr_parse(text, &cidr);
	free(text);
	set_first_line(data, size);
	if (include_escapes(data, size))
		return 0;
	f = fopen(path, "w");
	if (f == NULL)
		abort();
	if (size > 0 && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	if (conf_load(path, &c, &err) == 0) {
		assert(err == NULL && c != NULL);
		walk(c);
		conf_free(&c);
	} else {
		/* Every refusal names where. */
		assert(err != NULL && c == NULL);
		free(err);
	}
	return 0;
}
