/* sieve_parse.c — owns the Sieve grammar (RFC 5228 8.2): tokens to a syntax tree of
 * commands, arguments, tests and blocks, with a nesting limit so deep scripts get an error,
 * not a deep stack. Also the arena the tree lives in and the program's varint encoding. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xmalloc.h"
#include "sieve/sieve_private.h"

struct sv_chunk {
	struct sv_chunk *next;
	size_t used, size;
	_Alignas(16) unsigned char data[];
};

void *sv_alloc(struct sv_arena *a, size_t n)
{
	struct sv_chunk *c = a->head;

	n = (n + 15) & ~(size_t)15;
	if (c == NULL || c->size - c->used < n) {
		size_t size = n > 16384 ? n : 16384;

		c = xmalloc(sizeof(*c) + size);
		c->size = size;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += n;
	memset(p, 0, n);
	return p;
}

char *sv_strndup(struct sv_arena *a, const char *p, size_t n)
{
	char *s = sv_alloc(a, n + 1);

	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

void sv_arena_free(struct sv_arena *a)
{
	while (a->head != NULL) {
		struct sv_chunk *c = a->head;

		a->head = c->next;
		free(c);
	}
}

uint64_t sv_varint(const uint8_t **p, const uint8_t *end, bool *ok)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*p >= end) {
			*ok = false;
			return 0;
		}
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	*ok = false;
	return 0;
}

void sv_put_varint(struct buf *b, uint64_t v)
{
	do {
		uint8_t c = v & 0x7f;

		v >>= 7;
		if (v)
			c |= 0x80;
		buf_putc(b, (char)c);
	} while (v);
}

/* ---- the grammar ------------------------------------------------------------------------ */

struct ps {
	const struct sv_token *t;
	size_t n, i;
	const char *text;
	unsigned max_nesting, depth, tdepth;
	struct sv_arena *a;
	char *err;
};

static const char *tok_name(enum sv_tok t)
{
	static const char *const names[] = {
		"end of script", "identifier", "tag", "number", "string", "'['", "']'",
		"'('",           "')'",        "'{'", "'}'",    "','",    "';'"
	};
	return names[t];
}

static int ps_fail(struct ps *p, const struct sv_token *t, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int ps_fail(struct ps *p, const struct sv_token *t, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (p->err == NULL) {
		size_t n = strlen(msg) + 64;

		p->err = sv_alloc(p->a, n);
		snprintf(p->err, n, "line %u, column %u: %s", t->line, t->col, msg);
	}
	return -1;
}

static const struct sv_token *peek(struct ps *p)
{
	return &p->t[p->i];
}

static const struct sv_token *next(struct ps *p)
{
	const struct sv_token *t = &p->t[p->i];

	if (t->type != T_EOF)
		p->i++;
	return t;
}

static int parse_strlist(struct ps *p, struct sv_arg *arg)
{
	const struct sv_token *t = next(p);
	size_t cap = 4;

	arg->type = A_STRS;
	arg->line = t->line;
	arg->col = t->col;
	if (t->type == T_STRING) {
		arg->s = sv_alloc(p->a, sizeof(*arg->s));
		arg->s[0] = (struct sv_str){ p->text + t->off, t->len };
		arg->ns = 1;
		return 0;
	}
	arg->list = true;
	arg->s = sv_alloc(p->a, cap * sizeof(*arg->s));
	for (;;) {
		t = next(p);
		if (t->type != T_STRING)
			return ps_fail(p, t, "expected a string in the string list, found %s",
				       tok_name(t->type));
		if (arg->ns == cap) {
			struct sv_str *s = sv_alloc(p->a, 2 * cap * sizeof(*s));

			memcpy(s, arg->s, cap * sizeof(*s));
			arg->s = s;
			cap *= 2;
		}
		arg->s[arg->ns++] = (struct sv_str){ p->text + t->off, t->len };
		t = next(p);
		if (t->type == T_RBRACKET)
			return 0;
		if (t->type != T_COMMA)
			return ps_fail(p, t, "expected ',' or ']' in the string list, found %s",
				       tok_name(t->type));
	}
}

static int parse_test(struct ps *p, struct sv_node **n_r);

/* arguments *[test / test-list]; the node's name is set */
static int parse_arguments(struct ps *p, struct sv_node *n, bool in_test)
{
	size_t cap = 0;

	for (;;) {
		const struct sv_token *t = peek(p);
		struct sv_arg arg = { 0 };

		if (t->type == T_TAG) {
			next(p);
			arg = (struct sv_arg){ .type = A_TAG,
					       .line = t->line,
					       .col = t->col,
					       .tag = p->text + t->off };
		} else if (t->type == T_NUMBER) {
			next(p);
			arg = (struct sv_arg){
				.type = A_NUM, .line = t->line, .col = t->col, .num = t->num
			};
		} else if (t->type == T_STRING || t->type == T_LBRACKET) {
			if (parse_strlist(p, &arg) < 0)
				return -1;
		} else {
			break;
		}
		if (n->nargs == cap) {
			struct sv_arg *v;

			cap = cap ? cap * 2 : 4;
			v = sv_alloc(p->a, cap * sizeof(*v));
			if (n->nargs)
				memcpy(v, n->args, n->nargs * sizeof(*v));
			n->args = v;
		}
		n->args[n->nargs++] = arg;
	}
	const struct sv_token *t = peek(p);
	if (t->type == T_IDENT) {
		n->tests = sv_alloc(p->a, sizeof(*n->tests));
		n->ntests = 1;
		return parse_test(p, &n->tests[0]);
	}
	if (t->type != T_LPAREN)
		return 0;
	next(p);
	n->testlist = true;
	cap = 0;
	for (;;) {
		struct sv_node *sub;

		if (parse_test(p, &sub) < 0)
			return -1;
		if (n->ntests == cap) {
			struct sv_node **v;

			cap = cap ? cap * 2 : 4;
			v = sv_alloc(p->a, cap * sizeof(*v));
			if (n->ntests)
				memcpy(v, n->tests, n->ntests * sizeof(*v));
			n->tests = v;
		}
		n->tests[n->ntests++] = sub;
		t = next(p);
		if (t->type == T_RPAREN)
			return 0;
		if (t->type != T_COMMA)
			return ps_fail(p, t, "expected ',' or ')' in the test list, found %s",
				       tok_name(t->type));
	}
	(void)in_test;
}

static int parse_test(struct ps *p, struct sv_node **n_r)
{
	const struct sv_token *t = next(p);
	struct sv_node *n;
	int rc;

	if (t->type != T_IDENT)
		return ps_fail(p, t, "expected a test, found %s", tok_name(t->type));
	if (++p->tdepth > p->max_nesting)
		return ps_fail(p, t, "tests nested too deeply (at most %u)", p->max_nesting);
	n = sv_alloc(p->a, sizeof(*n));
	n->name = p->text + t->off;
	n->line = t->line;
	n->col = t->col;
	rc = parse_arguments(p, n, true);
	p->tdepth--;
	*n_r = n;
	return rc;
}

static int parse_commands(struct ps *p, struct sv_node ***v_r, size_t *n_r, bool in_block);

static int parse_command(struct ps *p, struct sv_node **n_r)
{
	const struct sv_token *t = next(p);
	struct sv_node *n;

	if (t->type != T_IDENT)
		return ps_fail(p, t, "expected a command, found %s", tok_name(t->type));
	n = sv_alloc(p->a, sizeof(*n));
	n->name = p->text + t->off;
	n->line = t->line;
	n->col = t->col;
	*n_r = n;
	if (parse_arguments(p, n, false) < 0)
		return -1;
	t = next(p);
	if (t->type == T_SEMI)
		return 0;
	if (t->type != T_LBRACE)
		return ps_fail(p, t, "expected ';' or a block after command '%s', found %s",
			       n->name, tok_name(t->type));
	if (++p->depth > p->max_nesting)
		return ps_fail(p, t, "blocks nested too deeply (at most %u)", p->max_nesting);
	n->has_block = true;
	if (parse_commands(p, &n->block, &n->nblock, true) < 0)
		return -1;
	p->depth--;
	return 0;
}

static int parse_commands(struct ps *p, struct sv_node ***v_r, size_t *n_r, bool in_block)
{
	size_t cap = 0, n = 0;
	struct sv_node **v = NULL;

	for (;;) {
		const struct sv_token *t = peek(p);

		if (in_block && t->type == T_RBRACE) {
			next(p);
			break;
		}
		if (t->type == T_EOF) {
			if (in_block)
				return ps_fail(p, t, "missing '}' at the end of the script");
			break;
		}
		if (n == cap) {
			struct sv_node **nv;

			cap = cap ? cap * 2 : 8;
			nv = sv_alloc(p->a, cap * sizeof(*nv));
			if (n)
				memcpy(nv, v, n * sizeof(*nv));
			v = nv;
		}
		if (parse_command(p, &v[n]) < 0)
			return -1;
		n++;
	}
	*v_r = v;
	*n_r = n;
	return 0;
}

int sv_parse(const struct sv_token *t, size_t n, const char *text, unsigned max_nesting,
	     struct sv_arena *a, struct sv_node ***cmds_r, size_t *ncmds_r, char **error_r)
{
	struct ps p = { .t = t, .n = n, .text = text, .max_nesting = max_nesting, .a = a };

	if (parse_commands(&p, cmds_r, ncmds_r, false) < 0) {
		*error_r = p.err;
		return -1;
	}
	return 0;
}
