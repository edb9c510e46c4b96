/* mailctl_out.c — owns mailctl's output: tables of typed cells printed as aligned columns
 * for people or as JSON for scripts, JSON string escaping, and date text both ways. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailctl/mailctl.h"

enum cell_kind { CELL_STR, CELL_NUM, CELL_BOOL, CELL_NULL };

struct cell {
	enum cell_kind kind;
	char *text; /* CELL_STR: the string; CELL_NUM/BOOL: its JSON text */
	size_t len;
};

struct mc_table {
	const char *const *cols;
	size_t ncols;
	struct cell *cells; /* nrows * ncols */
	size_t nrows, ncur; /* cells filled in the current row */
};

struct mc_table *mc_table_new(const char *const *cols)
{
	struct mc_table *t = xcalloc(1, sizeof(*t));

	t->cols = cols;
	while (cols[t->ncols] != NULL)
		t->ncols++;
	return t;
}

void mc_table_row(struct mc_table *t)
{
	t->cells = xreallocarray(t->cells, (t->nrows + 1) * t->ncols, sizeof(*t->cells));
	memset(&t->cells[t->nrows * t->ncols], 0, t->ncols * sizeof(*t->cells));
	for (size_t i = 0; i < t->ncols; i++)
		t->cells[t->nrows * t->ncols + i].kind = CELL_NULL;
	t->nrows++;
	t->ncur = 0;
}

static void put(struct mc_table *t, enum cell_kind k, char *text, size_t len)
{
	struct cell *c;

	if (t->nrows == 0 || t->ncur >= t->ncols) /* a bug in a command: too many cells */
		abort();
	c = &t->cells[(t->nrows - 1) * t->ncols + t->ncur++];
	c->kind = k;
	c->text = text;
	c->len = len;
}

void mc_cell_strn(struct mc_table *t, const char *s, size_t len)
{
	put(t, CELL_STR, xmemdup0(s, len), len);
}

void mc_cell_str(struct mc_table *t, const char *s)
{
	if (s == NULL)
		mc_cell_null(t);
	else
		mc_cell_strn(t, s, strlen(s));
}

void mc_cell_u64(struct mc_table *t, uint64_t v)
{
	char *s = xasprintf("%" PRIu64, v);

	put(t, CELL_NUM, s, strlen(s));
}

void mc_cell_bool(struct mc_table *t, bool v)
{
	put(t, CELL_BOOL, xstrdup(v ? "true" : "false"), v ? 4 : 5);
}

void mc_cell_null(struct mc_table *t)
{
	put(t, CELL_NULL, NULL, 0);
}

void mc_cell_hex(struct mc_table *t, uint64_t v)
{
	char s[17];

	snprintf(s, sizeof(s), "%016" PRIx64, v);
	mc_cell_strn(t, s, 16);
}

void mc_fmt_time(char *buf, size_t size, int64_t t)
{
	struct tm tm;
	time_t tt = (time_t)t;

	if (gmtime_r(&tt, &tm) == NULL || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, size, "%" PRId64, t);
}

void mc_cell_time(struct mc_table *t, int64_t v)
{
	char s[64];

	if (v == 0) {
		mc_cell_null(t);
		return;
	}
	mc_fmt_time(s, sizeof(s), v);
	mc_cell_str(t, s);
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	size_t need = p[0] < 0x80             ? 1
		      : (p[0] & 0xe0) == 0xc0 ? 2
		      : (p[0] & 0xf0) == 0xe0 ? 3
		      : (p[0] & 0xf8) == 0xf0 ? 4
					      : 0;

	if (need == 0 || need > n || (need == 2 && p[0] < 0xc2))
		return 0;
	for (size_t i = 1; i < need; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return need;
}

size_t mc_json_chars(FILE *f, const char *s, size_t len, bool final)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		size_t n = utf8_len(p + i, len - i);

		if (n == 0 && !final && len - i < 4 && p[i] >= 0xc2 && p[i] < 0xf5)
			break; /* maybe the start of a sequence the next call completes */
		if (n > 1) {
			fwrite(p + i, 1, n, f);
			i += n;
			continue;
		}
		if (p[i] == '"' || p[i] == '\\')
			fprintf(f, "\\%c", p[i]);
		else if (p[i] == '\n')
			fputs("\\n", f);
		else if (p[i] == '\r')
			fputs("\\r", f);
		else if (p[i] == '\t')
			fputs("\\t", f);
		else if (p[i] < 0x20 || p[i] >= 0x7f)
			fprintf(f, "\\u%04x", p[i]);
		else
			putc(p[i], f);
		i++;
	}
	return i;
}

void mc_json_str(FILE *f, const char *s, size_t len)
{
	putc('"', f);
	mc_json_chars(f, s, len, true);
	putc('"', f);
}

static void json_cell(const struct cell *c)
{
	if (c->kind == CELL_NULL)
		fputs("null", stdout);
	else if (c->kind == CELL_STR)
		mc_json_str(stdout, c->text, c->len);
	else
		fputs(c->text, stdout);
}

static void json_row(const struct mc_table *t, size_t r)
{
	putchar('{');
	for (size_t i = 0; i < t->ncols; i++) {
		printf("%s\"%s\": ", i ? ", " : "", t->cols[i]);
		json_cell(&t->cells[r * t->ncols + i]);
	}
	putchar('}');
}

/* Human text of a cell: "-" for null, control bytes shown as '?'. */
static void human_cell(const struct cell *c, int width)
{
	size_t n = c->kind == CELL_NULL ? 1 : c->len;

	if (c->kind == CELL_NULL)
		putchar('-');
	else
		for (size_t i = 0; i < c->len; i++)
			putchar(iscntrl((unsigned char)c->text[i]) ? '?' : c->text[i]);
	for (size_t i = n; width > 0 && i < (size_t)width; i++)
		putchar(' ');
}

void mc_table_free(struct mc_table **tp)
{
	struct mc_table *t = *tp;

	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i].text);
	free(t->cells);
	free(t);
	*tp = NULL;
}

void mc_table_print(struct mc *mc, struct mc_table **tp)
{
	struct mc_table *t = *tp;
	size_t *w = xcalloc(t->ncols, sizeof(*w));

	if (mc->json) {
		putchar('[');
		for (size_t r = 0; r < t->nrows; r++) {
			fputs(r ? ",\n " : "", stdout);
			json_row(t, r);
		}
		puts("]");
	} else {
		for (size_t i = 0; i < t->ncols; i++)
			w[i] = strlen(t->cols[i]);
		for (size_t r = 0; r < t->nrows; r++)
			for (size_t i = 0; i < t->ncols; i++) {
				const struct cell *c = &t->cells[r * t->ncols + i];
				size_t n = c->kind == CELL_NULL ? 1 : c->len;

				w[i] = n > w[i] ? n : w[i];
			}
		for (size_t i = 0; i < t->ncols; i++)
			printf("%-*s%s", i + 1 < t->ncols ? (int)w[i] : 0, t->cols[i],
			       i + 1 < t->ncols ? "  " : "\n");
		for (size_t r = 0; r < t->nrows; r++)
			for (size_t i = 0; i < t->ncols; i++) {
				human_cell(&t->cells[r * t->ncols + i],
					   i + 1 < t->ncols ? (int)w[i] : 0);
				fputs(i + 1 < t->ncols ? "  " : "\n", stdout);
			}
	}
	free(w);
	mc_table_free(tp);
}

void mc_table_print_record(struct mc *mc, struct mc_table **tp)
{
	struct mc_table *t = *tp;
	size_t w = 0;

	if (t->nrows == 0) {
		mc_table_free(tp);
		return;
	}
	if (mc->json) {
		json_row(t, 0);
		putchar('\n');
	} else {
		for (size_t i = 0; i < t->ncols; i++)
			w = strlen(t->cols[i]) > w ? strlen(t->cols[i]) : w;
		for (size_t i = 0; i < t->ncols; i++) {
			printf("%-*s  ", (int)w + 1, t->cols[i]);
			human_cell(&t->cells[i], 0);
			putchar('\n');
		}
	}
	mc_table_free(tp);
}

int mc_parse_date(const char *s, int64_t *t_r)
{
	struct tm tm;
	const char *end;
	int64_t ms;

	memset(&tm, 0, sizeof(tm));
	if ((end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) != NULL ||
	    (end = strptime(s, "%Y-%m-%d %H:%M:%S", &tm)) != NULL) {
		if (*end == 'Z')
			end++;
	} else {
		memset(&tm, 0, sizeof(tm));
		end = strptime(s, "%Y-%m-%d", &tm);
	}
	if (end != NULL && *end == '\0') {
		*t_r = (int64_t)timegm(&tm);
		return 0;
	}
	if (str_to_duration_ms(s, strlen(s), &ms) == 0 && ms >= 0) {
		*t_r = (int64_t)time(NULL) - ms / 1000;
		return 0;
	}
	return -1;
}
