/* sieve_private.h — libheron_sieve internals: tokens, the syntax tree, opcodes and the
 * instruction layout shared by the parser, checker, compiler and interpreter.
 *
 * Program format (all integers are unsigned LEB128 varints unless said otherwise):
 *   "SIEVE" u8 version | varint nbytes of code | code
 *   instruction: u8 opcode, then fields (u8 field id, value) up to field id 0.
 *   field values: F_* small numbers are one varint; string lists are varint count then per
 *   string: u8 flags (SV_STR_VARS: contains "${"), varint length, bytes.
 * Jumps are absolute offsets into the code. Tests leave their truth in the interpreter's
 * one result register; allof/anyof/not are compiled to jumps (short-circuit). */
#ifndef HERON_SIEVE_PRIVATE_H
#define HERON_SIEVE_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "sieve/sieve.h"

#define SV_MAGIC "SIEVE"
#define SV_VERSION 1

/* ---- arena ---------------------------------------------------------------------------- */
struct sv_arena {
	struct sv_chunk *head;
};
void *sv_alloc(struct sv_arena *a, size_t n);
char *sv_strndup(struct sv_arena *a, const char *p, size_t n);
void sv_arena_free(struct sv_arena *a);

/* ---- lexer ---------------------------------------------------------------------------- */
enum sv_tok {
	T_EOF = 0,
	T_IDENT,
	T_TAG,
	T_NUMBER,
	T_STRING,
	T_LBRACKET,
	T_RBRACKET,
	T_LPAREN,
	T_RPAREN,
	T_LBRACE,
	T_RBRACE,
	T_COMMA,
	T_SEMI,
};

struct sv_token {
	enum sv_tok type;
	uint32_t line, col;
	uint64_t num;
	size_t off, len; /* text (identifier, tag without ':', string value) in lexer text */
};

struct sv_lexer;
struct sv_lexer *sv_lexer_new(size_t max_bytes);
/* 0, or -1 with the error in sv_lexer_error (sticky). */
int sv_lexer_feed(struct sv_lexer *lx, const uint8_t *p, size_t n);
int sv_lexer_end(struct sv_lexer *lx);
const char *sv_lexer_error(const struct sv_lexer *lx);
const struct sv_token *sv_lexer_tokens(const struct sv_lexer *lx, size_t *n_r);
const char *sv_lexer_text(const struct sv_lexer *lx);
void sv_lexer_free(struct sv_lexer **lxp);

/* ---- syntax tree ---------------------------------------------------------------------- */
struct sv_str {
	const char *p;
	size_t len;
};

enum sv_arg_type { A_TAG, A_NUM, A_STRS };

struct sv_arg {
	enum sv_arg_type type;
	bool list; /* written as [ ... ] */
	uint32_t line, col;
	uint64_t num;
	const char *tag; /* without ':' */
	struct sv_str *s;
	size_t ns;
};

struct sv_node {
	const char *name;
	uint32_t line, col;
	struct sv_arg *args;
	size_t nargs;
	struct sv_node **tests; /* the test, or the test-list */
	size_t ntests;
	bool testlist;
	struct sv_node **block;
	size_t nblock;
	bool has_block;
};

/* Parses the tokens into a tree; -1 with *error_r (arena string) on a syntax error. */
int sv_parse(const struct sv_token *t, size_t n, const char *text, unsigned max_nesting,
	     struct sv_arena *a, struct sv_node ***cmds_r, size_t *ncmds_r, char **error_r);

/* ---- instructions --------------------------------------------------------------------- */
enum sv_op {
	OP_END = 0,
	/* control */
	OP_JMP,
	OP_JMPF,
	OP_JMPT,
	OP_NOT,
	OP_STOP,
	OP_REQUIRE_NOP,
	/* tests */
	OP_TRUE,
	OP_FALSE,
	OP_ADDRESS,
	OP_ENVELOPE,
	OP_HEADER,
	OP_EXISTS,
	OP_SIZE,
	OP_BODY,
	OP_STRING,
	OP_DATE,
	OP_CURRENTDATE,
	OP_MAILBOXEXISTS,
	OP_DUPLICATE,
	OP_SPAMTEST,
	OP_VIRUSTEST,
	OP_HASFLAG,
	OP_VALIDNOTIFY_NOP,
	/* actions */
	OP_KEEP,
	OP_DISCARD,
	OP_FILEINTO,
	OP_REDIRECT,
	OP_REJECT,
	OP_EREJECT,
	OP_VACATION,
	OP_SETFLAG,
	OP_ADDFLAG,
	OP_REMOVEFLAG,
	OP_SET,
	OP_INCLUDE,
	OP_RETURN,
	OP_GLOBAL,
	OP_ADDHEADER,
	OP_DELETEHEADER,
	OP_COUNT
};

enum sv_field {
	F_END = 0,
	F_CMP,
	F_MATCH,
	F_RELOP,
	F_PART,
	F_BODYT,
	F_ZONEKIND,
	F_FLAGS,
	F_INDEX,
	F_NUM,
	F_JUMP,
	F_MODS,
	/* from here on: string lists */
	F_SL0,
	F_SL1,
	F_SL2, /* positional */
	F_ZONE,
	F_CONTENT,
	F_FLAGLIST,
	F_SUBJECT,
	F_FROM,
	F_HANDLE,
	F_ADDRESSES,
	F_HEADER,
	F_UNIQUEID,
	F_COUNT
};

enum sv_cmp { CMP_CASEMAP = 0, CMP_OCTET, CMP_NUMERIC, CMP_UNICODE_CASEMAP };
enum sv_match { M_IS = 0, M_CONTAINS, M_MATCHES, M_REGEX, M_VALUE, M_COUNT };
enum sv_relop { R_GT = 0, R_GE, R_LT, R_LE, R_EQ, R_NE };
enum sv_part { P_ALL = 0, P_LOCAL, P_DOMAIN, P_USER, P_DETAIL };
enum sv_bodyt { B_TEXT = 0, B_RAW, B_CONTENT };
enum sv_zonekind { Z_LOCAL = 0, Z_ZONE, Z_ORIGINAL };
enum sv_iflag {
	I_COPY = 1 << 0,
	I_CREATE = 1 << 1,
	I_LAST = 1 << 2,
	I_MIME = 1 << 3,
	I_OVER = 1 << 4,
	I_UNDER = 1 << 5,
	I_PERCENT = 1 << 6,
	I_GLOBAL = 1 << 7,
	I_ONCE = 1 << 8,
	I_OPTIONAL = 1 << 9,
	I_SECONDS = 1 << 10,
	I_HAS_INDEX = 1 << 11,
	I_HAS_FLAGS = 1 << 12,
	I_HAS_NUM = 1 << 13,
	I_VARS = 1 << 14,
};
/* set modifiers (F_MODS bits), applied in RFC 5229 precedence order */
enum sv_mod {
	MOD_LOWER = 1 << 0,
	MOD_UPPER = 1 << 1,
	MOD_LOWERFIRST = 1 << 2,
	MOD_UPPERFIRST = 1 << 3,
	MOD_QUOTEWILDCARD = 1 << 4,
	MOD_QUOTEREGEX = 1 << 5,
	MOD_ENCODEURL = 1 << 6,
	MOD_LENGTH = 1 << 7,
};

#define SV_STR_VARS 1

/* a string list inside the program */
struct sv_sl {
	const uint8_t *p; /* first string, or NULL when absent */
	uint64_t n;
};

struct sv_ins {
	uint8_t op;
	uint8_t cmp, match, relop, part, bodyt, zonekind;
	uint32_t flags;
	int64_t index, num;
	uint64_t mods;
	size_t jump;
	struct sv_sl f[F_COUNT]; /* string-list fields by id (F_SL0.. and the tags) */
};

/* decoding: 0 and *pos advanced, -1 on a malformed program */
int sv_decode(const uint8_t *code, size_t len, size_t *pos, struct sv_ins *ins);
/* iterating a string list: 1 and the string, 0 at the end */
struct sv_sl_iter {
	const uint8_t *p;
	uint64_t left;
};
void sv_sl_begin(const struct sv_sl *sl, struct sv_sl_iter *it);
int sv_sl_next(struct sv_sl_iter *it, const char **s_r, size_t *len_r, unsigned *flags_r);
uint64_t sv_varint(const uint8_t **p, const uint8_t *end, bool *ok);
void sv_put_varint(struct buf *b, uint64_t v);

/* ---- checker and compiler -------------------------------------------------------------- */
/* Checks the tree and writes the program into out. -1 with *error_r (arena string). */
int sv_generate(struct sv_node **cmds, size_t n, struct sv_arena *a, struct buf *out,
		size_t max_program, char **error_r);

/* ---- matching (sieve_match.c) ------------------------------------------------------------ */
struct sv_regex;
/* compiles an extended regular expression for a Pike VM (no backtracking: time linear in
   the subject times the program); NULL and *error_r on error or when too large */
struct sv_regex *sv_regex_new(const char *pat, size_t len, bool icase, const char **error_r);
/* 1 match, 0 none; caps[2*i], caps[2*i+1] offsets of group i (0..9), -1 when unset */
int sv_regex_exec(const struct sv_regex *re, const char *s, size_t len, long caps[20]);
void sv_regex_free(struct sv_regex **rep);

/* :matches glob with '*' and '?' ('\\' escapes); caps get what each wildcard matched */
bool sv_glob(const char *pat, size_t plen, const char *s, size_t slen, bool icase,
	     struct sv_str *caps, size_t ncaps, size_t *nset_r);
int sv_cmp_values(enum sv_cmp cmp, const char *a, size_t alen, const char *b, size_t blen);
/* i;unicode-casemap (RFC 5051, sieve_unicode.c): s's canonical form into out (buf_init'd
   here; release it); map_r (may be NULL) gets, per output byte and one more, the offset in
   s of the character it comes from (free it) */
void sv_ucasemap(const char *s, size_t len, struct buf *out, size_t **map_r);
int sv_ucmp(const char *a, size_t alen, const char *b, size_t blen);
bool sv_ucontains(const char *hay, size_t hlen, const char *n, size_t nlen);
bool sv_uglob(const char *pat, size_t plen, const char *s, size_t slen, struct sv_str *caps,
	      size_t ncaps, size_t *nset_r);
bool sv_contains(enum sv_cmp cmp, const char *hay, size_t hlen, const char *n, size_t nlen);
bool sv_relop_ok(enum sv_relop r, int c);

/* ---- decoding (sieve_mime.c) ------------------------------------------------------------- */
void sv_rfc2047_decode(const char *in, size_t len, struct buf *out);
void sv_qp_decode(const char *in, size_t len, bool header, struct buf *out);
void sv_b64_decode(const char *in, size_t len, struct buf *out);

#endif
