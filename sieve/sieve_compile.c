/* sieve_compile.c — owns the code generator and the compile API: require handling, control
 * flow (if/elsif/else, allof/anyof/not as jumps), encoded-character decoding, marking the
 * strings that need variable expansion, checking constant regular expressions, and writing
 * the program (format in sieve_private.h). */
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "sieve/sieve_check.h"

struct gen {
	struct sv_arena *a;
	struct buf *out;
	uint32_t exts;
	bool had_other; /* a command other than require was seen */
	size_t max_program;
	size_t code_start; /* jumps are offsets from here */
	char *err;
};

static void put_u8(struct gen *g, unsigned v)
{
	buf_putc(g->out, (char)v);
}

static size_t put_jump(struct gen *g, size_t target)
{
	size_t at;

	put_u8(g, F_JUMP);
	at = g->out->len;
	for (int i = 3; i >= 0; i--)
		put_u8(g, (unsigned)(target >> (8 * i)) & 0xff);
	return at;
}

static void patch_jump(struct gen *g, size_t at, size_t target)
{
	for (int i = 0; i < 4; i++)
		g->out->data[at + (size_t)i] = (char)((target >> (8 * (3 - i))) & 0xff);
}

/* an instruction with one jump field and nothing else; returns where to patch */
static size_t emit_jump(struct gen *g, unsigned op, size_t target)
{
	size_t at;

	put_u8(g, op);
	at = put_jump(g, target);
	put_u8(g, F_END);
	return at;
}

static void emit_simple(struct gen *g, unsigned op)
{
	put_u8(g, op);
	put_u8(g, F_END);
}

/* "${hex: 41 42}" / "${unicode: 263a}" at p (inside a string): bytes consumed or 0 when it
   is not a valid encoding (then it stays literal); -1 for an invalid code point */
static long enc_one(const char *p, size_t len, struct buf *out)
{
	bool uni;
	size_t i;

	if (len >= 6 && strncasecmp(p, "${hex:", 6) == 0) {
		uni = false;
		i = 6;
	} else if (len >= 10 && strncasecmp(p, "${unicode:", 10) == 0) {
		uni = true;
		i = 10;
	} else {
		return 0;
	}
	size_t mark = out->len;
	bool any = false;

	for (;;) {
		while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
			i++;
		if (i < len && p[i] == '}') {
			if (!any)
				break;
			return (long)i + 1;
		}
		uint32_t v = 0;
		size_t nd = 0;

		while (i < len && str_hex_digit((unsigned char)p[i]) >= 0 && nd < 9) {
			v = v * 16 + (uint32_t)str_hex_digit((unsigned char)p[i]);
			i++;
			nd++;
		}
		if (nd == 0 || (!uni && nd > 2 && nd % 2) || nd > 8)
			break;
		if (uni) {
			if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
				return -1;
			buf_put_utf8(out, v);
		} else {
			/* a run of hex pairs without blanks */
			if (nd == 1)
				buf_putc(out, (char)v);
			else
				for (size_t k = nd; k >= 2; k -= 2)
					buf_putc(out, (char)((v >> (4 * (k - 2))) & 0xff));
		}
		any = true;
	}
	out->len = mark;
	return 0;
}

static int decode_encoded(struct gen *g, struct sv_str *s, uint32_t line, uint32_t col)
{
	struct buf b;
	bool changed = false;

	if (memmem(s->p, s->len, "${", 2) == NULL)
		return 0;
	buf_init(&b, s->len + 1, s->len * 4 + 16);
	for (size_t i = 0; i < s->len;) {
		long used = s->p[i] == '$' ? enc_one(s->p + i, s->len - i, &b) : 0;

		if (used < 0) {
			g->err = sv_errf(g->a, line, col, "invalid code point in ${unicode:...}");
			buf_release(&b);
			return -1;
		}
		if (used > 0) {
			i += (size_t)used;
			changed = true;
		} else {
			buf_putc(&b, s->p[i++]);
		}
	}
	if (changed) {
		s->p = sv_strndup(g->a, b.data, b.len);
		s->len = b.len;
	}
	buf_release(&b);
	return 0;
}

static int put_strlist(struct gen *g, unsigned fid, const struct sv_arg *v, bool regex, bool icase)
{
	put_u8(g, fid);
	sv_put_varint(g->out, v->ns);
	for (size_t i = 0; i < v->ns; i++) {
		struct sv_str *s = &v->s[i];
		unsigned fl = 0;

		if ((g->exts & E_ENCCHAR) && decode_encoded(g, s, v->line, v->col) < 0)
			return -1;
		if ((g->exts & E_VARIABLES) && memmem(s->p, s->len, "${", 2) != NULL)
			fl |= SV_STR_VARS;
		if (regex && !(fl & SV_STR_VARS)) {
			const char *err = NULL;
			struct sv_regex *re = sv_regex_new(s->p, s->len, icase, &err);

			if (re == NULL) {
				g->err = sv_errf(g->a, v->line, v->col,
						 "bad regular expression "
						 "\"%.60s\": %s",
						 s->p, err);
				return -1;
			}
			sv_regex_free(&re);
		}
		put_u8(g, fl);
		sv_put_varint(g->out, s->len);
		buf_append(g->out, s->p, s->len);
	}
	return 0;
}

static int emit_ins(struct gen *g, const struct sv_cins *ci)
{
	const struct sv_ins *in = &ci->v;
	const uint64_t small[][2] = {
		{ F_CMP, in->cmp },           { F_MATCH, in->match },
		{ F_RELOP, in->relop },       { F_PART, in->part },
		{ F_BODYT, in->bodyt },       { F_ZONEKIND, in->zonekind },
		{ F_FLAGS, in->flags },       { F_INDEX, (uint64_t)in->index },
		{ F_NUM, (uint64_t)in->num }, { F_MODS, in->mods },
	};

	put_u8(g, in->op);
	for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++) {
		if (small[i][1] == 0)
			continue;
		put_u8(g, (unsigned)small[i][0]);
		sv_put_varint(g->out, small[i][1]);
	}
	for (unsigned f = F_SL0; f < F_COUNT; f++) {
		bool regex = in->match == M_REGEX &&
			     (f == F_SL1 ||
			      (f == F_SL0 && (in->op == OP_BODY || in->op == OP_SPAMTEST ||
					      in->op == OP_VIRUSTEST)) ||
			      (f == F_SL2 && in->op == OP_DATE));

		if (in->op == OP_CURRENTDATE || in->op == OP_DELETEHEADER)
			regex = in->match == M_REGEX && f == F_SL1;
		if (in->op == OP_HASFLAG)
			regex = in->match == M_REGEX && f == F_SL1;
		if (ci->sl[f] != NULL &&
		    put_strlist(g, f, ci->sl[f], regex, in->cmp == CMP_CASEMAP) < 0)
			return -1;
	}
	put_u8(g, F_END);
	return 0;
}

static int gen_block(struct gen *g, struct sv_node **v, size_t n);
static int gen_test(struct gen *g, const struct sv_node *t, unsigned depth);

static int gen_test(struct gen *g, const struct sv_node *t, unsigned depth)
{
	const struct sv_cmdspec *cs = sv_cmd_find(t->name);
	struct sv_cins ci;

	if (cs == NULL || cs->kind != K_TEST) {
		g->err = sv_errf(g->a, t->line, t->col,
				 cs == NULL ? "unknown test '%s'"
					    : "'%s' is a command, not a test",
				 t->name);
		return -1;
	}
	if (cs->ext && !(g->exts & cs->ext)) {
		g->err = sv_errf(g->a, t->line, t->col, "test '%s' needs require \"%s\"", t->name,
				 t->name);
		return -1;
	}
	if (cs->op == OP_JMPF || cs->op == OP_JMPT) { /* allof, anyof */
		size_t *patches = sv_alloc(g->a, (t->ntests + 1) * sizeof(size_t)), np = 0;

		if (!t->testlist || t->nargs > 0 || t->ntests == 0) {
			g->err = sv_errf(g->a, t->line, t->col,
					 "%s needs a list of tests in "
					 "parentheses",
					 t->name);
			return -1;
		}
		for (size_t i = 0; i < t->ntests; i++) {
			if (gen_test(g, t->tests[i], depth + 1) < 0)
				return -1;
			if (i + 1 < t->ntests)
				patches[np++] = emit_jump(g, cs->op, 0);
		}
		for (size_t i = 0; i < np; i++)
			patch_jump(g, patches[i], g->out->len - g->code_start);
		return 0;
	}
	if (cs->op == OP_NOT) {
		if (t->testlist || t->ntests != 1 || t->nargs > 0) {
			g->err = sv_errf(g->a, t->line, t->col, "not needs exactly one test");
			return -1;
		}
		if (gen_test(g, t->tests[0], depth + 1) < 0)
			return -1;
		emit_simple(g, OP_NOT);
		return 0;
	}
	if (t->ntests > 0 || t->testlist) {
		g->err = sv_errf(g->a, t->line, t->col, "test '%s' takes no tests", t->name);
		return -1;
	}
	if (sv_check_args(t, cs, g->exts, g->a, &ci, &g->err) < 0)
		return -1;
	return emit_ins(g, &ci);
}

static int gen_require(struct gen *g, const struct sv_node *c)
{
	if (g->had_other) {
		g->err = sv_errf(g->a, c->line, c->col,
				 "require must come before any other "
				 "command");
		return -1;
	}
	if (c->nargs != 1 || c->args[0].type != A_STRS || c->ntests || c->has_block) {
		g->err = sv_errf(g->a, c->line, c->col, "require takes one string list");
		return -1;
	}
	for (size_t i = 0; i < c->args[0].ns; i++) {
		uint32_t bit = sv_ext_find(c->args[0].s[i].p);

		if (bit == 0) {
			g->err = sv_errf(g->a, c->args[0].line, c->args[0].col,
					 "unsupported "
					 "extension \"%s\"",
					 c->args[0].s[i].p);
			return -1;
		}
		g->exts |= bit;
	}
	return 0;
}

/* if/elsif/else chain starting at v[*i] */
static int gen_if(struct gen *g, struct sv_node **v, size_t n, size_t *i)
{
	size_t *ends = sv_alloc(g->a, (n + 1) * sizeof(size_t)), nends = 0;

	for (;;) {
		const struct sv_node *c = v[*i];
		bool is_else = strcasecmp(c->name, "else") == 0;

		if (!c->has_block || c->nargs > 0 ||
		    (is_else ? c->ntests != 0 : (c->ntests != 1 || c->testlist))) {
			g->err = sv_errf(g->a, c->line, c->col,
					 is_else ? "else takes a block and "
						   "nothing else"
						 : "%s needs one test and a block",
					 c->name);
			return -1;
		}
		size_t skip = 0;

		if (!is_else) {
			if (gen_test(g, c->tests[0], 0) < 0)
				return -1;
			skip = emit_jump(g, OP_JMPF, 0);
		}
		if (gen_block(g, c->block, c->nblock) < 0)
			return -1;
		if (is_else)
			break;
		bool more = *i + 1 < n && (strcasecmp(v[*i + 1]->name, "elsif") == 0 ||
					   strcasecmp(v[*i + 1]->name, "else") == 0);
		if (more)
			ends[nends++] = emit_jump(g, OP_JMP, 0);
		patch_jump(g, skip, g->out->len - g->code_start);
		if (!more)
			break;
		(*i)++;
	}
	for (size_t k = 0; k < nends; k++)
		patch_jump(g, ends[k], g->out->len - g->code_start);
	return 0;
}

static int gen_command(struct gen *g, struct sv_node **v, size_t n, size_t *i)
{
	const struct sv_node *c = v[*i];
	const struct sv_cmdspec *cs = sv_cmd_find(c->name);
	struct sv_cins ci;

	if (cs == NULL || cs->kind == K_TEST) {
		g->err = sv_errf(g->a, c->line, c->col,
				 cs == NULL ? "unknown command '%s'"
					    : "'%s' is a test, not a command",
				 c->name);
		return -1;
	}
	if (strcasecmp(c->name, "require") == 0)
		return gen_require(g, c);
	g->had_other = true;
	if (strcasecmp(c->name, "if") == 0)
		return gen_if(g, v, n, i);
	if (cs->kind == K_CTRL) {
		g->err = sv_errf(g->a, c->line, c->col, "%s without a preceding if", c->name);
		return -1;
	}
	if (cs->ext && !(g->exts & cs->ext)) {
		g->err = sv_errf(g->a, c->line, c->col,
				 "command '%s' needs require of its "
				 "extension",
				 c->name);
		return -1;
	}
	if (c->has_block || c->ntests || c->testlist) {
		g->err = sv_errf(g->a, c->line, c->col, "command '%s' takes no %s", c->name,
				 c->has_block ? "block" : "test");
		return -1;
	}
	if (cs->op == OP_GLOBAL && !(g->exts & E_VARIABLES)) {
		g->err = sv_errf(g->a, c->line, c->col, "global needs require \"variables\"");
		return -1;
	}
	if (sv_check_args(c, cs, g->exts, g->a, &ci, &g->err) < 0)
		return -1;
	if ((ci.v.op == OP_FILEINTO || ci.v.op == OP_KEEP) && (ci.v.flags & I_HAS_FLAGS) == 0 &&
	    (g->exts & E_IMAP4FLAGS))
		ci.v.flags |= I_VARS; /* use the internal flags variable */
	return emit_ins(g, &ci);
}

static int gen_block(struct gen *g, struct sv_node **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (gen_command(g, v, n, &i) < 0)
			return -1;
	return 0;
}

int sv_generate(struct sv_node **cmds, size_t n, struct sv_arena *a, struct buf *out,
		size_t max_program, char **error_r)
{
	struct gen g = { .a = a, .out = out, .max_program = max_program };
	size_t lenpos;

	buf_append(out, SV_MAGIC, strlen(SV_MAGIC));
	put_u8(&g, SV_VERSION);
	lenpos = out->len;
	buf_append(out, "\0\0\0\0", 4); /* code length, patched */
	size_t start = out->len;
	g.code_start = start;
	if (gen_block(&g, cmds, n) < 0) {
		*error_r = g.err;
		return -1;
	}
	emit_simple(&g, OP_END);
	size_t len = out->len - start;
	for (int i = 0; i < 4; i++)
		out->data[lenpos + (size_t)i] = (char)((len >> (8 * (3 - i))) & 0xff);
	if (out->len > g.max_program) {
		*error_r = sv_errf(a, 1, 1, "compiled script too large");
		return -1;
	}
	return 0;
}

/* ---- the compile API ---------------------------------------------------------------------- */

struct sieve_parser {
	struct sieve_compile_opts o;
	struct sv_lexer *lx;
};

struct sieve_parser *sieve_parser_new(const struct sieve_compile_opts *o)
{
	struct sieve_parser *p = xcalloc(1, sizeof(*p));

	if (o != NULL)
		p->o = *o;
	if (p->o.max_script_size == 0)
		p->o.max_script_size = 1u << 20;
	if (p->o.max_nesting == 0)
		p->o.max_nesting = 32;
	if (p->o.max_program == 0)
		p->o.max_program = 4u << 20;
	p->lx = sv_lexer_new(p->o.max_script_size);
	return p;
}

int sieve_parser_feed(struct sieve_parser *p, const void *data, size_t len)
{
	return sv_lexer_feed(p->lx, data, len);
}

void sieve_parser_free(struct sieve_parser **pp)
{
	if (*pp == NULL)
		return;
	sv_lexer_free(&(*pp)->lx);
	free(*pp);
	*pp = NULL;
}

int sieve_parser_finish(struct sieve_parser **pp, uint8_t **prog_r, size_t *len_r, char **error_r)
{
	struct sieve_parser *p = *pp;
	struct sv_arena a = { 0 };
	struct sv_node **cmds;
	size_t ncmds, ntok;
	const struct sv_token *tok;
	char *err = NULL;
	struct buf out;
	int rc = -1;

	*prog_r = NULL;
	*len_r = 0;
	*error_r = NULL;
	buf_init(&out, 256, BUF_INPUT_BOUNDED); /* by the source; checked at the end */
	if (sv_lexer_end(p->lx) < 0) {
		*error_r = xstrdup(sv_lexer_error(p->lx));
		goto done;
	}
	tok = sv_lexer_tokens(p->lx, &ntok);
	if (sv_parse(tok, ntok, sv_lexer_text(p->lx), p->o.max_nesting, &a, &cmds, &ncmds, &err) <
		    0 ||
	    sv_generate(cmds, ncmds, &a, &out, p->o.max_program, &err) < 0) {
		*error_r = xstrdup(err);
		goto done;
	}
	*prog_r = (uint8_t *)buf_steal(&out, len_r);
	rc = 0;
done:
	buf_release(&out);
	sv_arena_free(&a);
	sieve_parser_free(pp);
	return rc;
}

int sieve_compile(const char *src, size_t len, const struct sieve_compile_opts *o,
		  uint8_t **prog_r, size_t *len_r, char **error_r)
{
	struct sieve_parser *p = sieve_parser_new(o);

	(void)sieve_parser_feed(p, src, len);
	return sieve_parser_finish(&p, prog_r, len_r, error_r);
}
