/* sieve_lex.c — owns the incremental Sieve lexer (RFC 5228 2.2-2.4, 8.1): bytes in, tokens
 * out, in pieces of any size (a state machine: no byte is looked at twice). Handles hash and
 * bracket comments, quoted strings with escapes, "text:" multi-line strings with dot-
 * stuffing, numbers with K/M/G and identifiers/tags. Line and column of every token are
 * kept for error messages. Line ends may be CRLF or LF. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xmalloc.h"
#include "sieve/sieve_private.h"

enum lx_state {
	LS_START,
	LS_IDENT,
	LS_TAG0,
	LS_TAG,
	LS_NUM,
	LS_NUMQ,
	LS_QSTR,
	LS_QESC,
	LS_HASH,
	LS_SLASH,
	LS_BCOM,
	LS_BCOMSTAR,
	LS_MLHEAD,
	LS_MLHASH,
	LS_MLBOL,
	LS_MLLINE,
	LS_MLDOT,
	LS_MLDOTCR,
	LS_MLCR,
};

struct sv_lexer {
	enum lx_state st;
	size_t max, total;
	uint32_t line, col;  /* of the next byte */
	struct sv_token cur; /* being built */
	struct sv_token *tok;
	size_t ntok, captok;
	struct buf text; /* token texts, NUL after each */
	char err[160];
	bool failed;
};

struct sv_lexer *sv_lexer_new(size_t max_bytes)
{
	struct sv_lexer *lx = xcalloc(1, sizeof(*lx));

	lx->max = max_bytes;
	lx->line = 1;
	lx->col = 1;
	buf_init(&lx->text, 256, max_bytes + 64);
	return lx;
}

void sv_lexer_free(struct sv_lexer **lxp)
{
	if (*lxp == NULL)
		return;
	buf_release(&(*lxp)->text);
	free((*lxp)->tok);
	free(*lxp);
	*lxp = NULL;
}

const char *sv_lexer_error(const struct sv_lexer *lx)
{
	return lx->failed ? lx->err : NULL;
}

const struct sv_token *sv_lexer_tokens(const struct sv_lexer *lx, size_t *n_r)
{
	*n_r = lx->ntok;
	return lx->tok;
}

const char *sv_lexer_text(const struct sv_lexer *lx)
{
	return lx->text.data;
}

static int lx_fail(struct sv_lexer *lx, uint32_t line, uint32_t col, const char *msg)
{
	if (!lx->failed)
		snprintf(lx->err, sizeof(lx->err), "line %u, column %u: %s", line, col, msg);
	lx->failed = true;
	return -1;
}

static void tok_begin(struct sv_lexer *lx, enum sv_tok type)
{
	memset(&lx->cur, 0, sizeof(lx->cur));
	lx->cur.type = type;
	lx->cur.line = lx->line;
	lx->cur.col = lx->col;
	lx->cur.off = lx->text.len;
}

static int text_add(struct sv_lexer *lx, char c)
{
	if (buf_putc(&lx->text, c) < 0)
		return lx_fail(lx, lx->line, lx->col, "script too large");
	return 0;
}

static int tok_end(struct sv_lexer *lx)
{
	if (lx->cur.type == T_IDENT || lx->cur.type == T_TAG || lx->cur.type == T_STRING) {
		lx->cur.len = lx->text.len - lx->cur.off;
		if (text_add(lx, '\0') < 0)
			return -1;
	}
	if (lx->ntok == lx->captok) {
		lx->captok = lx->captok ? lx->captok * 2 : 64;
		lx->tok = xreallocarray(lx->tok, lx->captok, sizeof(*lx->tok));
	}
	lx->tok[lx->ntok++] = lx->cur;
	lx->st = LS_START;
	return 0;
}

static int is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int punct(struct sv_lexer *lx, int c)
{
	static const char chars[] = "[](){},;";
	static const enum sv_tok types[] = { T_LBRACKET, T_RBRACKET, T_LPAREN, T_RPAREN,
					     T_LBRACE,   T_RBRACE,   T_COMMA,  T_SEMI };
	const char *p = strchr(chars, c);

	if (p == NULL || c == 0)
		return 0;
	tok_begin(lx, types[p - chars]);
	return tok_end(lx) < 0 ? -1 : 1;
}

/* LS_START: one byte that may begin a token */
static int lx_start(struct sv_lexer *lx, int c)
{
	int r;

	if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
		return 0;
	if ((r = punct(lx, c)) != 0)
		return r < 0 ? -1 : 0;
	if (is_alpha(c)) {
		tok_begin(lx, T_IDENT);
		lx->st = LS_IDENT;
		return text_add(lx, (char)c);
	}
	if (is_digit(c)) {
		tok_begin(lx, T_NUMBER);
		lx->cur.num = (uint64_t)(c - '0');
		lx->st = LS_NUM;
		return 0;
	}
	switch (c) {
	case ':':
		tok_begin(lx, T_TAG);
		lx->st = LS_TAG0;
		return 0;
	case '"':
		tok_begin(lx, T_STRING);
		lx->st = LS_QSTR;
		return 0;
	case '#':
		lx->st = LS_HASH;
		return 0;
	case '/':
		lx->cur.line = lx->line;
		lx->cur.col = lx->col;
		lx->st = LS_SLASH;
		return 0;
	}
	return lx_fail(lx, lx->line, lx->col,
		       c >= 0x20 && c < 0x7f
			       ? "unexpected character"
			       : "unexpected byte (not allowed outside strings and comments)");
}

static int lx_number(struct sv_lexer *lx, int c)
{
	if (is_digit(c)) {
		if (lx->cur.num > (UINT64_MAX - 9) / 10)
			return lx_fail(lx, lx->cur.line, lx->cur.col, "number too large");
		lx->cur.num = lx->cur.num * 10 + (uint64_t)(c - '0');
		return 0;
	}
	unsigned shift = c == 'K' || c == 'k'   ? 10
			 : c == 'M' || c == 'm' ? 20
			 : c == 'G' || c == 'g' ? 30
						: 0;
	if (shift) {
		if (lx->cur.num > (UINT64_MAX >> shift))
			return lx_fail(lx, lx->cur.line, lx->cur.col, "number too large");
		lx->cur.num <<= shift;
		lx->st = LS_NUMQ;
		return 0;
	}
	if (is_alpha(c))
		return lx_fail(lx, lx->line, lx->col, "bad number quantifier (K, M or G)");
	if (tok_end(lx) < 0)
		return -1;
	return 1; /* re-examine c */
}

/* the byte after an identifier or tag character */
static int lx_word(struct sv_lexer *lx, int c)
{
	if (is_alpha(c) || is_digit(c))
		return text_add(lx, (char)c);
	if (lx->st == LS_IDENT && c == ':' && lx->text.len - lx->cur.off == 4 &&
	    memcmp(lx->text.data + lx->cur.off, "text", 4) == 0) {
		lx->cur.type = T_STRING;
		lx->text.len = lx->cur.off;
		lx->st = LS_MLHEAD;
		return 0;
	}
	if (tok_end(lx) < 0)
		return -1;
	return 1;
}

static int lx_multiline(struct sv_lexer *lx, int c)
{
	switch (lx->st) {
	case LS_MLHEAD: /* after "text:": blanks, then a hash comment or the line end */
		if (c == ' ' || c == '\t' || c == '\r')
			return 0;
		if (c == '#') {
			lx->st = LS_MLHASH;
			return 0;
		}
		if (c == '\n') {
			lx->st = LS_MLBOL;
			return 0;
		}
		return lx_fail(lx, lx->line, lx->col, "text: must be followed by a line end");
	case LS_MLHASH:
		if (c == '\n')
			lx->st = LS_MLBOL;
		return 0;
	case LS_MLBOL:
		if (c == '.') {
			lx->st = LS_MLDOT;
			return 0;
		}
		lx->st = LS_MLLINE;
		__attribute__((fallthrough));
	case LS_MLLINE:
		if (c == '\r') {
			lx->st = LS_MLCR;
			return 0;
		}
		if (c == '\n') {
			lx->st = LS_MLBOL;
			if (text_add(lx, '\r') < 0)
				return -1;
		}
		return text_add(lx, (char)c);
	case LS_MLCR: /* CR inside a line: kept as CRLF when LF follows */
		if (c == '\n') {
			lx->st = LS_MLBOL;
			return text_add(lx, '\r') < 0 ? -1 : text_add(lx, '\n');
		}
		lx->st = LS_MLLINE;
		if (text_add(lx, '\r') < 0)
			return -1;
		return lx_multiline(lx, c);
	case LS_MLDOT: /* a line starting with '.': the end, or dot-stuffed */
		if (c == '\r') {
			lx->st = LS_MLDOTCR;
			return 0;
		}
		if (c == '\n')
			return tok_end(lx);
		lx->st = LS_MLLINE;
		if (c == '.')
			return text_add(lx, '.');
		if (text_add(lx, '.') < 0)
			return -1;
		return lx_multiline(lx, c);
	case LS_MLDOTCR:
		if (c == '\n')
			return tok_end(lx);
		lx->st = LS_MLLINE;
		if (text_add(lx, '.') < 0 || text_add(lx, '\r') < 0)
			return -1;
		return lx_multiline(lx, c);
	default:
		return -1;
	}
}

static int lx_byte(struct sv_lexer *lx, int c)
{
	int r;

	for (;;) {
		switch (lx->st) {
		case LS_START:
			return lx_start(lx, c);
		case LS_IDENT:
		case LS_TAG:
			if ((r = lx_word(lx, c)) != 1)
				return r;
			continue;
		case LS_TAG0:
			if (!is_alpha(c))
				return lx_fail(lx, lx->cur.line, lx->cur.col,
					       "a tag needs a name after ':'");
			lx->st = LS_TAG;
			return text_add(lx, (char)c);
		case LS_NUM:
			if ((r = lx_number(lx, c)) != 1)
				return r;
			continue;
		case LS_NUMQ:
			if (is_alpha(c) || is_digit(c))
				return lx_fail(lx, lx->line, lx->col,
					       "bad character after number");
			if (tok_end(lx) < 0)
				return -1;
			continue;
		case LS_QSTR:
			if (c == '"')
				return tok_end(lx);
			if (c == '\\') {
				lx->st = LS_QESC;
				return 0;
			}
			return text_add(lx, (char)c);
		case LS_QESC: /* RFC 5228 2.4.2: "\x" is x for every x */
			lx->st = LS_QSTR;
			return text_add(lx, (char)c);
		case LS_HASH:
			if (c == '\n')
				lx->st = LS_START;
			return 0;
		case LS_SLASH:
			if (c != '*')
				return lx_fail(lx, lx->cur.line, lx->cur.col,
					       "unexpected '/' (a comment starts with /*)");
			lx->st = LS_BCOM;
			return 0;
		case LS_BCOM:
			if (c == '*')
				lx->st = LS_BCOMSTAR;
			return 0;
		case LS_BCOMSTAR:
			lx->st = c == '/' ? LS_START : c == '*' ? LS_BCOMSTAR : LS_BCOM;
			return 0;
		default:
			return lx_multiline(lx, c);
		}
	}
}

int sv_lexer_feed(struct sv_lexer *lx, const uint8_t *p, size_t n)
{
	if (lx->failed)
		return -1;
	if (n > lx->max - lx->total || lx->total + n > lx->max)
		return lx_fail(lx, lx->line, lx->col, "script too large");
	lx->total += n;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == 0 && lx->st != LS_HASH && lx->st != LS_BCOM && lx->st != LS_BCOMSTAR)
			return lx_fail(lx, lx->line, lx->col, "NUL byte in script");
		if (lx_byte(lx, p[i]) < 0)
			return -1;
		if (p[i] == '\n') {
			lx->line++;
			lx->col = 1;
		} else if ((p[i] & 0xc0) != 0x80) {
			lx->col++;
		}
	}
	return 0;
}

int sv_lexer_end(struct sv_lexer *lx)
{
	if (lx->failed)
		return -1;
	switch (lx->st) {
	case LS_START:
	case LS_HASH:
		break;
	case LS_IDENT:
	case LS_TAG:
	case LS_NUM:
	case LS_NUMQ:
		if (tok_end(lx) < 0)
			return -1;
		break;
	case LS_QSTR:
	case LS_QESC:
		return lx_fail(lx, lx->cur.line, lx->cur.col, "unterminated string");
	case LS_BCOM:
	case LS_BCOMSTAR:
	case LS_SLASH:
		return lx_fail(lx, lx->line, lx->col, "unterminated comment");
	case LS_TAG0:
		return lx_fail(lx, lx->cur.line, lx->cur.col, "a tag needs a name after ':'");
	default:
		return lx_fail(lx, lx->cur.line, lx->cur.col,
			       "unterminated text: string (missing a line with a single '.')");
	}
	tok_begin(lx, T_EOF);
	return tok_end(lx);
}
