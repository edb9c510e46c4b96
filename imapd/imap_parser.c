/* imap_parser.c — owns the incremental IMAP command parser: tokens, literals, lists, limits. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imap_parser.h"

#define TAG_MAX 64

enum pstate {
	S_TAG,     /* reading the tag */
	S_BETWEEN, /* before an argument (after SP or '(') */
	S_AFTER,   /* right after an argument or ')' */
	S_ATOM,
	S_QUOTED,
	S_QESC,     /* after '\' in a quoted string */
	S_LITSIZE,  /* inside {...} */
	S_LITCR,    /* after '}' */
	S_LITLF,    /* after '}' CR */
	S_LITWAIT,  /* LITERAL returned, the caller decides */
	S_LITDATA,  /* reading literal bytes */
	S_CR,       /* CR seen at the end of the line */
	S_SKIPLIT,  /* dropping a refused non-synchronizing literal */
	S_SKIPLINE, /* dropping the rest of a bad line */
	S_FRESH,    /* the next feed starts a new command */
	S_LOST,     /* a literal's data could not be told from commands: nothing more */
};

/* While a bad line is dropped: how far its bytes match a literal announcement "{n}" or
   "{n+}" that ends the line (a {n+} literal's data follows its line end and is dropped
   too). */
enum skipstate {
	K_NONE,
	K_SIZE,    /* after '{' and digits */
	K_PLUS,    /* after "{n+" */
	K_SYNC,    /* after "{n}" */
	K_NONSYNC, /* after "{n+}" */
	K_SYNC_CR,
	K_NONSYNC_CR,
};

struct imap_parser {
	struct imap_parser_limits lim;
	enum pstate state;
	char tag[TAG_MAX + 1];
	size_t taglen;
	size_t line_len; /* line bytes so far, literal data excluded */
	struct buf data; /* string bytes, each followed by a NUL */
	struct imap_arg *args;
	size_t nargs, cap;
	uint32_t *stack; /* indexes of open lists */
	unsigned depth;
	unsigned bracket; /* '[' depth inside the current atom */
	uint64_t lit_size, lit_left;
	unsigned lit_digits;
	bool lit_plus;
	bool lit_binary;     /* literal8 ~{n} (RFC 3516) */
	bool lit_overflow;   /* the size had more digits than fit */
	enum skipstate skip; /* S_SKIPLINE: the literal announcement seen so far */
	unsigned skip_digits;
	uint64_t skip_size;
	const char *error;
};

static int step_atom_char(struct imap_parser *p, unsigned char c);
static int step_after(struct imap_parser *p, unsigned char c);

static bool atom_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '(' && c != ')' && c != '{' && c != '"';
}

static bool tag_char(unsigned char c)
{
	return atom_char(c) && c != '+' && c != '%' && c != '*' && c != '\\';
}

struct imap_parser *imap_parser_new(const struct imap_parser_limits *lim)
{
	struct imap_parser *p = xcalloc(1, sizeof(*p));

	p->lim = *lim;
	if (p->lim.skip_max == 0)
		p->lim.skip_max = lim->literal_max;
	/* strings, their NULs and inline literals all fit under one ceiling */
	buf_init(&p->data, 256, lim->line_max + lim->literal_max + lim->items_max);
	p->stack = xcalloc(lim->depth_max + 1, sizeof(*p->stack));
	imap_parser_reset(p);
	return p;
}

void imap_parser_free(struct imap_parser **pp)
{
	struct imap_parser *p = *pp;

	if (p == NULL)
		return;
	buf_release(&p->data);
	free(p->args);
	free(p->stack);
	free(p);
	*pp = NULL;
}

void imap_parser_reset(struct imap_parser *p)
{
	p->state = S_TAG;
	p->taglen = 0;
	p->tag[0] = '\0';
	p->line_len = 0;
	buf_reset(&p->data);
	p->nargs = 0;
	p->depth = 0;
	p->bracket = 0;
	p->error = NULL;
}

static int fail(struct imap_parser *p, const char *why, bool line_ended)
{
	p->error = why;
	p->state = line_ended ? S_FRESH : S_SKIPLINE;
	p->skip = K_NONE;
	return IMAP_PARSE_ERROR;
}

/* A bad literal announcement: after a '+' the client sends the data without waiting, and
   where it ends cannot be known. */
static int literal_fail(struct imap_parser *p, const char *why, bool line_ended)
{
	int rc = fail(p, why, line_ended);

	if (p->lit_plus)
		p->state = S_LOST;
	return rc;
}

/* Adds an argument (member of the innermost open list); NULL when there are too many. */
static struct imap_arg *arg_add(struct imap_parser *p, enum imap_arg_type type)
{
	struct imap_arg *a;

	if (p->nargs >= p->lim.items_max)
		return NULL;
	if (p->nargs == p->cap) {
		p->cap = p->cap == 0 ? 16 : p->cap * 2;
		if (p->cap > p->lim.items_max)
			p->cap = p->lim.items_max;
		p->args = xreallocarray(p->args, p->cap, sizeof(*p->args));
	}
	if (p->depth > 0)
		p->args[p->stack[p->depth - 1]].n++;
	a = &p->args[p->nargs++];
	memset(a, 0, sizeof(*a));
	a->type = type;
	a->off = p->data.len;
	return a;
}

/* Ends the string argument being built: NUL after its bytes. */
static void arg_end_string(struct imap_parser *p)
{
	struct imap_arg *a = &p->args[p->nargs - 1];

	a->len = p->data.len - a->off;
	buf_putc(&p->data, '\0'); /* room is reserved by the ceiling */
}

static int put(struct imap_parser *p, char c)
{
	if (buf_putc(&p->data, c) < 0)
		return fail(p, "Command too long", false);
	return IMAP_PARSE_MORE;
}

static int list_open(struct imap_parser *p)
{
	if (p->depth >= p->lim.depth_max)
		return fail(p, "Lists nested too deeply", false);
	if (arg_add(p, IMAP_ARG_LIST) == NULL)
		return fail(p, "Too many arguments", false);
	p->stack[p->depth++] = (uint32_t)(p->nargs - 1);
	p->state = S_BETWEEN;
	return IMAP_PARSE_MORE;
}

static int list_close(struct imap_parser *p)
{
	uint32_t li;

	if (p->depth == 0)
		return fail(p, "Unbalanced parentheses: unexpected ')'", false);
	li = p->stack[--p->depth];
	p->args[li].span = (uint32_t)(p->nargs - li - 1);
	p->state = S_AFTER;
	return IMAP_PARSE_MORE;
}

static int line_end(struct imap_parser *p)
{
	if (p->depth > 0)
		return fail(p, "Unbalanced parentheses: missing ')'", true);
	if (p->taglen == 0) { /* an empty line: ignored */
		imap_parser_reset(p);
		return IMAP_PARSE_MORE;
	}
	if (p->nargs == 0)
		return fail(p, "Missing command", true);
	p->state = S_FRESH;
	return IMAP_PARSE_DONE;
}

static int step_tag(struct imap_parser *p, unsigned char c)
{
	if (tag_char(c)) {
		if (p->taglen >= TAG_MAX)
			return fail(p, "Tag too long", false);
		p->tag[p->taglen++] = (char)c;
		p->tag[p->taglen] = '\0';
		return IMAP_PARSE_MORE;
	}
	if (c == ' ' && p->taglen > 0) {
		p->state = S_BETWEEN;
		return IMAP_PARSE_MORE;
	}
	if (c == '\r') {
		p->state = S_CR;
		return IMAP_PARSE_MORE;
	}
	if (c == '\n')
		return line_end(p);
	p->taglen = 0;
	p->tag[0] = '\0';
	return fail(p, "Invalid tag", false);
}

static int literal_open(struct imap_parser *p, bool binary)
{
	p->lit_size = 0;
	p->lit_digits = 0;
	p->lit_plus = false;
	p->lit_overflow = false;
	p->lit_binary = binary;
	p->state = S_LITSIZE;
	return IMAP_PARSE_MORE;
}

/* "~{": the atom "~" just started was the prefix of a literal8: it is taken back. */
static int literal8_open(struct imap_parser *p)
{
	struct imap_arg *a = &p->args[--p->nargs];

	if (p->depth > 0)
		p->args[p->stack[p->depth - 1]].n--;
	buf_truncate(&p->data, a->off);
	return literal_open(p, true);
}

static int step_between(struct imap_parser *p, unsigned char c)
{
	switch (c) {
	case ' ':
		return IMAP_PARSE_MORE;
	case '(':
		return list_open(p);
	case ')':
		return list_close(p);
	case '"':
		if (arg_add(p, IMAP_ARG_QUOTED) == NULL)
			return fail(p, "Too many arguments", false);
		p->state = S_QUOTED;
		return IMAP_PARSE_MORE;
	case '{':
		return literal_open(p, false);
	case '\r':
		p->state = S_CR;
		return IMAP_PARSE_MORE;
	case '\n':
		return line_end(p);
	}
	if (!atom_char(c))
		return fail(p, c >= 0x80 ? "8-bit data outside a string" : "Unexpected character",
			    false);
	if (arg_add(p, IMAP_ARG_ATOM) == NULL)
		return fail(p, "Too many arguments", false);
	p->state = S_ATOM;
	p->bracket = 0;
	return step_atom_char(p, c);
}

static int step_after(struct imap_parser *p, unsigned char c)
{
	switch (c) {
	case ' ':
		p->state = S_BETWEEN;
		return IMAP_PARSE_MORE;
	case ')':
		return list_close(p);
	case '\r':
		p->state = S_CR;
		return IMAP_PARSE_MORE;
	case '\n':
		return line_end(p);
	}
	return fail(p, "Missing space between arguments", false);
}

/* Whether the atom so far names a FETCH item whose "[section]" may hold spaces and lists
   (BODY[HEADER.FIELDS (From To)]): only there does '[' open a bracket; elsewhere '[' and ']'
   are atom characters like any other (RFC 3501 ATOM-CHAR, ASTRING-CHAR). */
static bool section_atom(const struct imap_parser *p)
{
	static const char *const names[] = { "BODY", "BODY.PEEK", "BINARY", "BINARY.PEEK",
					     "BINARY.SIZE" };
	size_t off = p->args[p->nargs - 1].off, len = p->data.len - off;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (str_caseeq(p->data.data + off, len, names[i], strlen(names[i])))
			return true;
	return false;
}

static int step_atom_char(struct imap_parser *p, unsigned char c)
{
	if (p->bracket > 0) {
		if (c < 0x20 || c >= 0x7f)
			return fail(p,
				    c == '\r' || c == '\n' ? "Missing ']'"
							   : "Bad character in section",
				    c == '\n');
		if (c == '[')
			p->bracket++;
		else if (c == ']')
			p->bracket--;
		return put(p, (char)c);
	}
	if (c == '[' && section_atom(p)) {
		p->bracket++;
		return put(p, (char)c);
	}
	if (atom_char(c))
		return put(p, (char)c);
	if (c == '{' && p->data.len == p->args[p->nargs - 1].off + 1 &&
	    p->data.data[p->data.len - 1] == '~')
		return literal8_open(p);
	arg_end_string(p);
	if (c >= 0x80)
		return fail(p, "8-bit data outside a string", false);
	return step_after(p, c);
}

static int step_quoted(struct imap_parser *p, unsigned char c)
{
	if (p->state == S_QESC) {
		if (c != '"' && c != '\\')
			return fail(p, "Bad escape in quoted string", c == '\n');
		p->state = S_QUOTED;
		return put(p, (char)c);
	}
	switch (c) {
	case '"':
		arg_end_string(p);
		p->state = S_AFTER;
		return IMAP_PARSE_MORE;
	case '\\':
		p->state = S_QESC;
		return IMAP_PARSE_MORE;
	case '\r':
	case '\n':
	case '\0':
		return fail(p, "Unterminated quoted string", c == '\n');
	}
	return put(p, (char)c);
}

static int step_literal(struct imap_parser *p, unsigned char c)
{
	switch (p->state) {
	case S_LITSIZE:
		if (c >= '0' && c <= '9' && !p->lit_plus) {
			/* more digits than fit are read on: a '+' may follow */
			if (++p->lit_digits > 18)
				p->lit_overflow = true;
			else
				p->lit_size = p->lit_size * 10 + (c - '0');
			return IMAP_PARSE_MORE;
		}
		if (c == '+' && p->lit_digits > 0 && !p->lit_plus) {
			p->lit_plus = true;
			return IMAP_PARSE_MORE;
		}
		if (c == '}' && p->lit_overflow)
			return literal_fail(p, "Literal size too large", false);
		if (c == '}' && p->lit_digits > 0) {
			p->state = S_LITCR;
			return IMAP_PARSE_MORE;
		}
		return literal_fail(p, "Bad literal size", c == '\n');
	case S_LITCR:
		if (c == '\r') {
			p->state = S_LITLF;
			return IMAP_PARSE_MORE;
		}
		__attribute__((fallthrough));
	case S_LITLF:
		if (c != '\n')
			return literal_fail(p, "Literal must end the line", false);
		p->state = S_LITWAIT;
		return IMAP_PARSE_LITERAL;
	default:
		abort();
	}
}

static int step(struct imap_parser *p, unsigned char c)
{
	switch (p->state) {
	case S_TAG:
		return step_tag(p, c);
	case S_BETWEEN:
		return step_between(p, c);
	case S_AFTER:
		return step_after(p, c);
	case S_ATOM:
		return step_atom_char(p, c);
	case S_QUOTED:
	case S_QESC:
		return step_quoted(p, c);
	case S_LITSIZE:
	case S_LITCR:
	case S_LITLF:
		return step_literal(p, c);
	case S_CR:
		if (c != '\n')
			return fail(p, "CR without LF", false);
		return line_end(p);
	default:
		abort();
	}
}

/* One byte of a dropped line, matched against a literal announcement that ends the line. */
static void skip_match(struct imap_parser *p, unsigned char c)
{
	bool digit = c >= '0' && c <= '9';

	switch (p->skip) {
	case K_SIZE:
		if (digit) {
			if (++p->skip_digits <= 18)
				p->skip_size = p->skip_size * 10 + (c - '0');
			return;
		}
		if (p->skip_digits > 0 && (c == '+' || c == '}')) {
			p->skip = c == '+' ? K_PLUS : K_SYNC;
			return;
		}
		break;
	case K_PLUS:
		if (c == '}') {
			p->skip = K_NONSYNC;
			return;
		}
		break;
	case K_SYNC:
	case K_NONSYNC:
		if (c == '\r') {
			p->skip = p->skip == K_SYNC ? K_SYNC_CR : K_NONSYNC_CR;
			return;
		}
		break;
	default:
		break;
	}
	p->skip = K_NONE;
	if (c == '{') {
		p->skip = K_SIZE;
		p->skip_digits = 0;
		p->skip_size = 0;
	}
}

/* The dropped line ended: when it announced a non-synchronizing literal, its data is
   dropped too (or, too large or unreadable, the input is lost). */
static void skip_line_end(struct imap_parser *p)
{
	bool nonsync = p->skip == K_NONSYNC || p->skip == K_NONSYNC_CR;

	p->skip = K_NONE;
	if (!nonsync) {
		imap_parser_reset(p);
		return;
	}
	if (p->skip_digits > 18 || p->skip_size > p->lim.skip_max) {
		p->state = S_LOST;
		return;
	}
	p->lit_left = p->skip_size;
	p->state = p->lit_left > 0 ? S_SKIPLIT : S_SKIPLINE;
}

/* Bytes of a dropped line, up to and including its LF; how many were consumed. */
static size_t skip_line(struct imap_parser *p, const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\n') {
			skip_line_end(p);
			return i + 1;
		}
		skip_match(p, (unsigned char)data[i]);
	}
	return len;
}

/* Bytes of literal data, skipped literal data or a skipped line: no per-byte parsing. */
static size_t feed_bulk(struct imap_parser *p, const char *data, size_t len)
{
	size_t n;

	switch (p->state) {
	case S_LITDATA:
		n = len < p->lit_left ? len : (size_t)p->lit_left;
		buf_append(&p->data, data, n); /* accept checked the room */
		if ((p->lit_left -= n) == 0) {
			arg_end_string(p);
			p->state = S_AFTER;
		}
		return n;
	case S_SKIPLIT:
		n = len < p->lit_left ? len : (size_t)p->lit_left;
		if ((p->lit_left -= n) == 0) {
			p->state = S_SKIPLINE;
			p->skip = K_NONE;
		}
		return n;
	default: /* S_SKIPLINE */
		return skip_line(p, data, len);
	}
}

static void fix_pointers(struct imap_parser *p)
{
	for (size_t i = 0; i < p->nargs; i++) {
		struct imap_arg *a = &p->args[i];

		a->s = (a->type == IMAP_ARG_LIST || a->type == IMAP_ARG_STREAMED)
			       ? NULL
			       : p->data.data + a->off;
	}
}

int imap_parser_feed(struct imap_parser *p, const char *data, size_t len, size_t *used_r)
{
	int rc = IMAP_PARSE_MORE;
	size_t i = 0;

	assert(p->state != S_LITWAIT && p->state != S_LOST);
	if (p->state == S_FRESH)
		imap_parser_reset(p);
	while (i < len && rc == IMAP_PARSE_MORE) {
		if (p->state == S_LITDATA || p->state == S_SKIPLIT || p->state == S_SKIPLINE) {
			i += feed_bulk(p, data + i, len - i);
			if (p->state == S_LOST) {
				/* the line's BAD was sent: this one is for the connection */
				p->taglen = 0;
				p->tag[0] = '\0';
				p->error = "Literal too large to skip";
				rc = IMAP_PARSE_ERROR;
			}
			continue;
		}
		if (++p->line_len > p->lim.line_max) {
			bool at_lf = data[i] == '\n';

			i++;
			rc = fail(p, "Command line too long", at_lf);
			break;
		}
		rc = step(p, (unsigned char)data[i++]);
	}
	*used_r = i;
	if (rc != IMAP_PARSE_MORE)
		fix_pointers(p);
	return rc;
}

const char *imap_parser_tag(const struct imap_parser *p)
{
	return p->taglen > 0 ? p->tag : NULL;
}

const struct imap_arg *imap_parser_args(const struct imap_parser *p, size_t *n_r)
{
	*n_r = p->nargs;
	return p->args;
}

const char *imap_parser_error(const struct imap_parser *p)
{
	return p->error != NULL ? p->error : "Syntax error";
}

bool imap_parser_lost(const struct imap_parser *p)
{
	return p->state == S_LOST;
}

bool imap_parser_literal_binary(const struct imap_parser *p)
{
	return p->lit_binary;
}

void imap_parser_literal(const struct imap_parser *p, uint64_t *size_r, bool *sync_r,
			 unsigned *depth_r)
{
	assert(p->state == S_LITWAIT);
	*size_r = p->lit_size;
	*sync_r = !p->lit_plus;
	*depth_r = p->depth;
}

int imap_parser_literal_accept(struct imap_parser *p)
{
	assert(p->state == S_LITWAIT);
	if (p->lit_size > p->lim.literal_max || p->lit_size + 1 > p->data.max - p->data.len) {
		imap_parser_literal_reject(p, "Literal too large");
		return -1;
	}
	if (arg_add(p, IMAP_ARG_LITERAL) == NULL) {
		imap_parser_literal_reject(p, "Too many arguments");
		return -1;
	}
	p->lit_left = p->lit_size;
	p->state = S_LITDATA;
	if (p->lit_left == 0) {
		arg_end_string(p);
		p->state = S_AFTER;
	}
	return 0;
}

void imap_parser_literal_streamed(struct imap_parser *p)
{
	struct imap_arg *a;

	assert(p->state == S_LITWAIT);
	p->state = S_AFTER;
	if ((a = arg_add(p, IMAP_ARG_STREAMED)) == NULL) {
		/* the data is gone already: the line goes on, the command will be refused */
		p->error = "Too many arguments";
		p->state = S_SKIPLINE;
		return;
	}
	a->len = p->lit_size;
}

void imap_parser_literal_reject(struct imap_parser *p, const char *why)
{
	assert(p->state == S_LITWAIT);
	p->error = why;
	if (!p->lit_plus) {
		p->state = S_FRESH;
	} else if (p->lit_size > p->lim.skip_max) {
		p->state = S_LOST;
	} else {
		p->lit_left = p->lit_size;
		p->state = p->lit_left > 0 ? S_SKIPLIT : S_SKIPLINE;
		p->skip = K_NONE;
	}
}

bool imap_arg_is_nil(const struct imap_arg *a)
{
	return imap_arg_atom_is(a, "NIL");
}

bool imap_arg_atom_is(const struct imap_arg *a, const char *word)
{
	return a->type == IMAP_ARG_ATOM && str_caseeq(a->s, a->len, word, strlen(word));
}
