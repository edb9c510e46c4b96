/* sut.c — owns what the report discloses about the server under test beyond what it says on
 * the wire: --sut-config FILE (a heron.conf: the keys that differ from their defaults and the
 * workers; any other file: its text), the --sut-pid process trees (executables, CPU pinning,
 * and their CPU seconds over each load point), and --notes FILE. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/str.h"
#include "mailload/json.h"
#include "mailload/resp.h"
#include "mailload/manager.h"

#define SUT_TEXT_MAX (64 * 1024)

static int read_text(const char *path, struct buf *b)
{
	FILE *fp = fopen(path, "r");
	char tmp[4096];
	size_t n;

	if (fp == NULL)
		return -1;
	while ((n = fread(tmp, 1, sizeof(tmp), fp)) > 0 && b->len < SUT_TEXT_MAX)
		buf_append(b, tmp, n < SUT_TEXT_MAX - b->len ? n : SUT_TEXT_MAX - b->len);
	fclose(fp);
	return 0;
}

/* The default of section.key in Heron's key table, or NULL when it is not a Heron key. */
static const char *heron_default(const char *section, const char *key)
{
	for (size_t i = 0; i < conf_nkeys; i++)
		if (strcmp(conf_keys[i].section, section) == 0 &&
		    strcmp(conf_keys[i].name, key) == 0)
			return conf_keys[i].def != NULL ? conf_keys[i].def : "";
	return NULL;
}

struct heron_conf_scan {
	struct buf nd; /* "section.key":"value" members that differ from the defaults */
	char workers[2][32];
	int known, unknown;
};

/* Reads a heron.conf as text: [section] and key = value lines; every key compared with the
   default in conf_keys[]. */
static void scan_heron_conf(const char *text, struct heron_conf_scan *h)
{
	char section[64] = "", line[1024];
	const char *p = text;

	snprintf(h->workers[0], sizeof(h->workers[0]), "%s", heron_default("mtad", "workers"));
	snprintf(h->workers[1], sizeof(h->workers[1]), "%s", heron_default("imapd", "workers"));
	while (*p != '\0') {
		size_t n = strcspn(p, "\n");
		snprintf(line, sizeof(line), "%.*s",
			 (int)(n < sizeof(line) - 1 ? n : sizeof(line) - 1), p);
		p += n + (p[n] == '\n');
		struct str_view v = str_trim(str_view_of(line));
		if (v.len == 0 || v.p[0] == '#' || v.p[0] == ';')
			continue;
		if (v.p[0] == '[' && v.p[v.len - 1] == ']') {
			snprintf(section, sizeof(section), "%.*s", (int)(v.len - 2), v.p + 1);
			continue;
		}
		const char *eq = memchr(v.p, '=', v.len);
		if (eq == NULL)
			continue;
		struct str_view k = str_trim((struct str_view){ v.p, (size_t)(eq - v.p) });
		struct str_view val = str_trim(
			(struct str_view){ eq + 1, v.len - (size_t)(eq - v.p) - 1 });
		char key[96], value[512], name[160];
		snprintf(key, sizeof(key), "%.*s", (int)k.len, k.p);
		snprintf(value, sizeof(value), "%.*s", (int)val.len, val.p);
		const char *d = heron_default(section, key);
		d != NULL ? h->known++ : h->unknown++;
		if (strcmp(section, "mtad") == 0 && strcmp(key, "workers") == 0)
			str_lcpy(h->workers[0], value, sizeof(h->workers[0]));
		if (strcmp(section, "imapd") == 0 && strcmp(key, "workers") == 0)
			str_lcpy(h->workers[1], value, sizeof(h->workers[1]));
		if (d != NULL && strcmp(d, value) == 0)
			continue;
		bool secret = strstr(key, "password") != NULL || strstr(key, "secret") != NULL;
		snprintf(name, sizeof(name), "%s.%s%s", section, key,
			 d == NULL ? " (not a Heron key)" : "");
		buf_printf(&h->nd, "%s", h->nd.len ? "," : "");
		json_put_str(&h->nd, name);
		buf_putc(&h->nd, ':');
		json_put_str(&h->nd, secret ? "(not disclosed)" : value);
	}
}

/* Cpus_allowed_list of a process, or "" */
static void cpus_of(pid_t pid, char *out, size_t n)
{
	char path[64], line[256];
	FILE *fp;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
			struct str_view v = str_trim(str_view_of(line + 18));
			snprintf(out, n, "%.*s", (int)v.len, v.p);
		}
	fclose(fp);
}

/* The executables and CPU pinning of the --sut-pid trees: "exe (pid P): CPUs L; ...". */
static void pids_text(const struct mgr_opts *o, struct buf *b)
{
	for (size_t i = 0; i < o->nsut_pids; i++) {
		char path[64], exe[512] = "?", cpus[128];
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)o->sut_pids[i]);
		ssize_t n = readlink(path, exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 1] = '\0';
		cpus_of(o->sut_pids[i], cpus, sizeof(cpus));
		buf_printf(b, "%s%s (pid %d): CPUs %s", i ? "; " : "", exe, (int)o->sut_pids[i],
			   cpus[0] ? cpus : "?");
	}
}

/* "Name Version" from an ID response's parameter list ("name" "X" "version" "Y" ...), into
   out; false when it names neither. */
static bool id_version(const char *id, char *out, size_t n)
{
	struct itok t;
	char name[64] = "", version[64] = "";

	itok_init(&t, id, strlen(id));
	if (itok_next(&t) != IT_LPAREN)
		return false;
	while (itok_next(&t) == IT_STRING) {
		char key[16], *dst = NULL;
		snprintf(key, sizeof(key), "%.*s", (int)(t.len < 15 ? t.len : 15), t.s);
		if (strcasecmp(key, "name") == 0)
			dst = name;
		else if (strcasecmp(key, "version") == 0)
			dst = version;
		if (itok_next(&t) == IT_STRING && dst != NULL)
			snprintf(dst, 64, "%.*s", (int)(t.len < 63 ? t.len : 63), t.s);
		else if (t.type != IT_STRING && t.type != IT_NIL)
			break;
	}
	if (name[0] == '\0' && version[0] == '\0')
		return false;
	snprintf(out, n, "%s%s%s", name, name[0] && version[0] ? " " : "", version);
	return true;
}

int sut_disclose(const struct mgr_opts *o, struct buf *out)
{
	struct buf text, pins;
	int rc = 0;
	char seen[160];
	const char *version = "not given (--sut-version, or a server answering IMAP ID)";
	const char *from = "none";

	if (o->sut_version != NULL) {
		version = o->sut_version;
		from = "--sut-version";
	} else if (id_version(o->server_id, seen, sizeof(seen))) {
		version = seen;
		from = "IMAP ID";
	}
	buf_init(&text, 4096, SUT_TEXT_MAX + 16);
	buf_init(&pins, 256, ML_TEXT_MAX);
	pids_text(o, &pins);
	buf_puts(out, "\"sut\":{\"version\":");
	json_put_str(out, version);
	buf_puts(out, ",\"version_from\":");
	json_put_str(out, from);
	if (o->sut_config != NULL || pins.len)
		buf_putc(out, ',');
	if (o->sut_config != NULL) {
		struct heron_conf_scan h = { 0 };

		if (read_text(o->sut_config, &text) < 0) {
			fprintf(stderr, "mailload run: --sut-config %s: %s\n", o->sut_config,
				strerror(errno));
			rc = -1;
		}
		buf_init(&h.nd, 1024, ML_DOC_MAX);
		scan_heron_conf(buf_cstr(&text), &h);
		bool heron = h.known > 0;
		buf_printf(out,
			   "\"config\":{\"kind\":\"%s\",\"path\":", heron ? "heron.conf" : "text");
		json_put_str(out, o->sut_config);
		buf_puts(out, ",\"version\":");
		json_put_str(out, version);
		buf_printf(out, ",\"mtad_workers\":%s,\"imapd_workers\":%s,\"cpu_pinning\":",
			   heron ? h.workers[0] : "0", heron ? h.workers[1] : "0");
		json_put_str(out, pins.len ? buf_cstr(&pins) : "not known (--sut-pid)");
		if (heron)
			buf_printf(out, ",\"non_default\":{%s}", buf_cstr(&h.nd));
		else {
			buf_puts(out, ",\"text\":");
			json_put_str(out, buf_cstr(&text));
		}
		buf_putc(out, '}');
		buf_release(&h.nd);
	} else if (pins.len) {
		buf_puts(out, "\"processes\":");
		json_put_str(out, buf_cstr(&pins));
	}
	buf_puts(out, "}");
	if (o->notes != NULL) {
		buf_reset(&text);
		if (read_text(o->notes, &text) < 0) {
			fprintf(stderr, "mailload run: --notes %s: %s\n", o->notes,
				strerror(errno));
			rc = -1;
		}
		buf_puts(out, ",\"notes\":");
		json_put_str(out, buf_cstr(&text));
	}
	buf_release(&text);
	buf_release(&pins);
	return rc;
}

/* utime + stime of pid (and, for a root, cutime + cstime: its reaped children), in ticks,
   and its parent; -1 when it is gone. */
static int stat_of(pid_t pid, bool root, uint64_t *ticks, pid_t *ppid)
{
	char path[64], buf[1024];
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* the command name may hold spaces */
	unsigned long long ut, st;
	long long cut, cst;
	int pp;
	if (p == NULL ||
	    sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &pp,
		   &ut, &st, &cut, &cst) != 5)
		return -1;
	*ppid = pp;
	*ticks = ut + st + (root ? (uint64_t)(cut + cst) : 0);
	return 0;
}

double sut_cpu_seconds(const pid_t *roots, size_t n)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	uint64_t total = 0;
	long hz = sysconf(_SC_CLK_TCK);

	if (d == NULL || n == 0) {
		if (d != NULL)
			closedir(d);
		return 0;
	}
	while ((e = readdir(d)) != NULL) { /* every process whose ancestry reaches a root */
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid_t pid = (pid_t)atoi(e->d_name), p = pid, pp;
		uint64_t ticks, t2;
		bool root = false, in = false;
		for (size_t i = 0; i < n; i++)
			root |= roots[i] == pid;
		if (stat_of(pid, root, &ticks, &pp) < 0)
			continue;
		for (int depth = 0; depth < 64 && p > 1 && !in; depth++) {
			for (size_t i = 0; i < n; i++)
				in |= roots[i] == p;
			if (!in && stat_of(p, false, &t2, &pp) < 0)
				break;
			p = pp;
		}
		if (in)
			total += ticks;
	}
	closedir(d);
	return hz > 0 ? (double)total / (double)hz : 0;
}
