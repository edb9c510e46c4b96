/* sieve_regex.c — owns the :regex engine: POSIX extended regular expressions (alternation,
 * groups, * + ? {n,m}, bracket expressions with ranges and [:class:], ., ^, $, escapes)
 * compiled to a Pike VM program and run without backtracking: every subject byte is looked
 * at once per live thread, and a thread per program instruction at most, so the work is
 * bounded by (subject length x program size) whatever the pattern. Counted repetitions are
 * expanded, and a pattern whose program passes RE_MAX_INSNS is refused at compile time.
 * Submatches (groups 1..9) feed the variables extension's ${1}..${9}. Matching prefers the
 * leftmost match with Perl-style priorities (greedy quantifiers), not POSIX leftmost-longest:
 * a difference only in which submatch is reported, never in whether a subject matches. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/xmalloc.h"
#include "sieve/sieve_private.h"

#define RE_MAX_INSNS 8192
#define RE_MAX_REPEAT 255
#define RE_NCAP 20

enum re_op { R_CHAR, R_ANY, R_CLASS, R_SPLIT, R_JMP, R_SAVE, R_MATCH, R_BOL, R_EOL };

struct re_insn {
	uint8_t op;
	uint8_t c;
	int x, y; /* SPLIT: x preferred; JMP: x; CLASS: x = class index; SAVE: x slot */
};

struct sv_regex {
	struct re_insn *prog;
	int n, cap;
	uint8_t (*cls)[32];
	int ncls;
	bool icase;
};

struct rp { /* parser */
	const char *p, *end;
	struct sv_regex *re;
	const char *err;
	int ngroup;
	int depth;
};

static int emit(struct rp *r, uint8_t op, uint8_t c, int x, int y)
{
	struct sv_regex *re = r->re;

	if (re->n >= RE_MAX_INSNS) {
		r->err = "expression too large";
		return -1;
	}
	if (re->n == re->cap) {
		re->cap = re->cap ? re->cap * 2 : 32;
		re->prog = xreallocarray(re->prog, (size_t)re->cap, sizeof(*re->prog));
	}
	re->prog[re->n] = (struct re_insn){ op, c, x, y };
	return re->n++;
}

static int parse_alt(struct rp *r);

static void cls_set(uint8_t *set, int c, bool icase)
{
	set[c >> 3] |= (uint8_t)(1u << (c & 7));
	if (icase && isalpha(c)) {
		int o = islower(c) ? toupper(c) : tolower(c);

		set[o >> 3] |= (uint8_t)(1u << (o & 7));
	}
}

static int parse_class(struct rp *r)
{
	uint8_t set[32] = { 0 };
	bool neg = false, first = true;

	if (r->p < r->end && *r->p == '^') {
		neg = true;
		r->p++;
	}
	for (;;) {
		if (r->p >= r->end) {
			r->err = "missing ']'";
			return -1;
		}
		int c = (unsigned char)*r->p;

		if (c == ']' && !first) {
			r->p++;
			break;
		}
		first = false;
		if (c == '[' && r->p + 1 < r->end && r->p[1] == ':') {
			const char *e = memmem(r->p + 2, (size_t)(r->end - r->p - 2), ":]", 2);
			static const char *const names[] = { "alpha", "digit", "alnum", "upper",
							     "lower", "space", "punct", "xdigit",
							     "print", "graph", "cntrl", "blank",
							     NULL };
			int (*const fns[])(int) = { isalpha, isdigit, isalnum, isupper,
						    islower, isspace, ispunct, isxdigit,
						    isprint, isgraph, iscntrl, isblank };
			size_t k;

			if (e == NULL) {
				r->err = "bad character class";
				return -1;
			}
			for (k = 0; names[k] != NULL; k++)
				if ((size_t)(e - r->p - 2) == strlen(names[k]) &&
				    memcmp(r->p + 2, names[k], strlen(names[k])) == 0)
					break;
			if (names[k] == NULL) {
				r->err = "unknown character class";
				return -1;
			}
			for (int ch = 0; ch < 128; ch++)
				if (fns[k](ch))
					cls_set(set, ch, r->re->icase);
			r->p = e + 2;
			continue;
		}
		r->p++;
		int hi = c;
		if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
			hi = (unsigned char)r->p[1];
			r->p += 2;
			if (hi < c) {
				r->err = "bad range in brackets";
				return -1;
			}
		}
		for (int ch = c; ch <= hi; ch++)
			cls_set(set, ch, r->re->icase);
	}
	if (neg)
		for (int i = 0; i < 32; i++)
			set[i] = (uint8_t)~set[i];
	if (r->re->ncls >= RE_MAX_INSNS / 4) {
		r->err = "too many bracket expressions";
		return -1;
	}
	r->re->cls = xreallocarray(r->re->cls, (size_t)r->re->ncls + 1, sizeof(*r->re->cls));
	memcpy(r->re->cls[r->re->ncls], set, 32);
	return emit(r, R_CLASS, 0, r->re->ncls++, 0);
}

/* one atom at r->p: emits its code; returns its first instruction or -1 */
static int parse_atom(struct rp *r)
{
	int c = (unsigned char)*r->p++;
	int start = r->re->n;

	switch (c) {
	case '(': {
		int g = ++r->ngroup;

		if (++r->depth > 64) {
			r->err = "groups nested too deeply";
			return -1;
		}
		if (g < 10 && emit(r, R_SAVE, 0, 2 * g, 0) < 0)
			return -1;
		if (parse_alt(r) < 0)
			return -1;
		if (r->p >= r->end || *r->p != ')') {
			r->err = "missing ')'";
			return -1;
		}
		r->p++;
		r->depth--;
		if (g < 10 && emit(r, R_SAVE, 0, 2 * g + 1, 0) < 0)
			return -1;
		return start;
	}
	case '.':
		return emit(r, R_ANY, 0, 0, 0);
	case '[':
		return parse_class(r);
	case '^':
		return emit(r, R_BOL, 0, 0, 0);
	case '$':
		return emit(r, R_EOL, 0, 0, 0);
	case '\\':
		if (r->p >= r->end) {
			r->err = "trailing backslash";
			return -1;
		}
		c = (unsigned char)*r->p++;
		if (c >= '1' && c <= '9') {
			r->err = "back-references are not supported";
			return -1;
		}
		break;
	case '*':
	case '+':
	case '?':
	case '{':
		r->err = "quantifier without an atom";
		return -1;
	}
	if (r->re->icase && isalpha(c)) {
		uint8_t set[32] = { 0 };

		cls_set(set, c, true);
		r->re->cls = xreallocarray(r->re->cls, (size_t)r->re->ncls + 1,
					   sizeof(*r->re->cls));
		memcpy(r->re->cls[r->re->ncls], set, 32);
		return emit(r, R_CLASS, 0, r->re->ncls++, 0);
	}
	return emit(r, R_CHAR, (uint8_t)c, 0, 0);
}

/* copies instructions [from, to) to the end, relocating jumps */
static int copy_code(struct rp *r, int from, int to)
{
	int delta = r->re->n - from;

	for (int i = from; i < to; i++) {
		struct re_insn in = r->re->prog[i];

		if (in.op == R_SPLIT || in.op == R_JMP) {
			in.x += delta;
			in.y += in.op == R_SPLIT ? delta : 0;
		}
		if (emit(r, in.op, in.c, in.x, in.y) < 0)
			return -1;
	}
	return 0;
}

/* moves the code from start to the end k slots down (jumps into it follow), leaving k free
   slots at start */
static int open_slot(struct rp *r, int start, int k)
{
	int len = r->re->n - start;

	for (int i = 0; i < k; i++)
		if (emit(r, R_JMP, 0, 0, 0) < 0)
			return -1;
	memmove(&r->re->prog[start + k], &r->re->prog[start],
		(size_t)len * sizeof(struct re_insn));
	for (int i = start + k; i < start + k + len; i++)
		if (r->re->prog[i].op == R_SPLIT || r->re->prog[i].op == R_JMP) {
			r->re->prog[i].x += k;
			r->re->prog[i].y += r->re->prog[i].op == R_SPLIT ? k : 0;
		}
	return 0;
}

/* x* on code [start, end): SPLIT L1 L2; L1: x; JMP SPLIT; L2: */
static int star(struct rp *r, int start, bool plus)
{
	int len = r->re->n - start;

	if (plus) { /* x+ : x; SPLIT start, next */
		return emit(r, R_SPLIT, 0, start, r->re->n + 1) < 0 ? -1 : 0;
	}
	if (open_slot(r, start, 1) < 0 || emit(r, R_JMP, 0, 0, 0) < 0)
		return -1;
	r->re->prog[start] = (struct re_insn){ R_SPLIT, 0, start + 1, r->re->n };
	r->re->prog[start + len + 1] = (struct re_insn){ R_JMP, 0, start, 0 };
	return 0;
}

static int quest(struct rp *r, int start)
{
	if (open_slot(r, start, 1) < 0)
		return -1;
	r->re->prog[start] = (struct re_insn){ R_SPLIT, 0, start + 1, r->re->n };
	return 0;
}

static int parse_count(struct rp *r, int *lo, int *hi)
{
	int v = 0, nd = 0;

	*hi = -1;
	while (r->p < r->end && isdigit((unsigned char)*r->p) && nd < 4) {
		v = v * 10 + (*r->p++ - '0');
		nd++;
	}
	if (nd == 0)
		goto bad;
	*lo = v;
	if (r->p < r->end && *r->p == ',') {
		r->p++;
		v = 0;
		nd = 0;
		while (r->p < r->end && isdigit((unsigned char)*r->p) && nd < 4) {
			v = v * 10 + (*r->p++ - '0');
			nd++;
		}
		*hi = nd ? v : -2; /* -2: unbounded */
	} else {
		*hi = *lo;
	}
	if (r->p >= r->end || *r->p != '}')
		goto bad;
	r->p++;
	if (*lo > RE_MAX_REPEAT || *hi > RE_MAX_REPEAT || (*hi >= 0 && *hi < *lo)) {
		r->err = "bad repetition count (at most 255)";
		return -1;
	}
	return 0;
bad:
	r->err = "bad {m,n} repetition";
	return -1;
}

/* {lo,hi} on code [start, end) by copies */
static int repeat(struct rp *r, int start, int lo, int hi)
{
	int end = r->re->n;

	if (lo == 0 && hi == 0) {
		r->re->n = start;
		return 0;
	}
	for (int i = 1; i < lo; i++)
		if (copy_code(r, start, end) < 0)
			return -1;
	if (hi == -2) {
		int s = r->re->n;

		if (lo == 0)
			return star(r, start, false);
		if (copy_code(r, start, end) < 0)
			return -1;
		return star(r, s, false);
	}
	for (int i = lo; i < hi; i++) {
		int s = r->re->n;

		if (i == 0) {
			if (quest(r, start) < 0)
				return -1;
			continue;
		}
		if (copy_code(r, start, end) < 0 || quest(r, s) < 0)
			return -1;
	}
	return 0;
}

static int parse_concat(struct rp *r)
{
	while (r->p < r->end && *r->p != '|' && *r->p != ')') {
		int start = parse_atom(r);

		if (start < 0)
			return -1;
		while (r->p < r->end &&
		       (*r->p == '*' || *r->p == '+' || *r->p == '?' || *r->p == '{')) {
			char q = *r->p++;
			int lo, hi;

			if (q == '*' && star(r, start, false) < 0)
				return -1;
			if (q == '+' && star(r, start, true) < 0)
				return -1;
			if (q == '?' && quest(r, start) < 0)
				return -1;
			if (q == '{' &&
			    (parse_count(r, &lo, &hi) < 0 || repeat(r, start, lo, hi) < 0))
				return -1;
		}
	}
	return 0;
}

static int parse_alt(struct rp *r)
{
	int start = r->re->n;

	if (parse_concat(r) < 0)
		return -1;
	while (r->p < r->end && *r->p == '|') {
		r->p++;
		/* SPLIT start+1, L2 ; left ; JMP end ; L2: right */
		if (open_slot(r, start, 1) < 0 || emit(r, R_JMP, 0, 0, 0) < 0)
			return -1;
		int jmp = r->re->n - 1;
		r->re->prog[start] = (struct re_insn){ R_SPLIT, 0, start + 1, jmp + 1 };
		if (parse_concat(r) < 0)
			return -1;
		r->re->prog[jmp] = (struct re_insn){ R_JMP, 0, r->re->n, 0 };
	}
	return 0;
}

struct sv_regex *sv_regex_new(const char *pat, size_t len, bool icase, const char **error_r)
{
	struct sv_regex *re = xcalloc(1, sizeof(*re));
	struct rp r = { .p = pat, .end = pat + len, .re = re };

	re->icase = icase;
	if (emit(&r, R_SAVE, 0, 0, 0) < 0 || parse_alt(&r) < 0)
		goto fail;
	if (r.p < r.end) {
		r.err = "unmatched ')'";
		goto fail;
	}
	if (emit(&r, R_SAVE, 0, 1, 0) < 0 || emit(&r, R_MATCH, 0, 0, 0) < 0)
		goto fail;
	return re;
fail:
	*error_r = r.err;
	sv_regex_free(&re);
	return NULL;
}

void sv_regex_free(struct sv_regex **rep)
{
	if (*rep == NULL)
		return;
	free((*rep)->prog);
	free((*rep)->cls);
	free(*rep);
	*rep = NULL;
}

/* ---- the Pike VM ------------------------------------------------------------------------ */

struct thread {
	int pc;
	long caps[RE_NCAP];
};

struct tlist {
	struct thread *t;
	int n;
};

struct vm {
	const struct sv_regex *re;
	unsigned *mark; /* generation per pc */
	unsigned gen;
	int *stack; /* explicit stack for addthread */
	long (*stcaps)[RE_NCAP];
};

/* adds the thread at pc and everything reachable without consuming a byte */
static void addthread(struct vm *vm, struct tlist *l, int pc0, const long *caps0, size_t pos,
		      size_t len)
{
	int sp = 0;

	vm->stack[sp] = pc0;
	memcpy(vm->stcaps[sp], caps0, sizeof(vm->stcaps[0]));
	sp++;
	while (sp > 0) {
		sp--;
		int pc = vm->stack[sp];
		long caps[RE_NCAP];

		memcpy(caps, vm->stcaps[sp], sizeof(caps));
		for (;;) {
			if (vm->mark[pc] == vm->gen)
				break;
			vm->mark[pc] = vm->gen;
			const struct re_insn *in = &vm->re->prog[pc];

			if (in->op == R_JMP) {
				pc = in->x;
				continue;
			}
			if (in->op == R_SPLIT) {
				vm->stack[sp] = in->y;
				memcpy(vm->stcaps[sp], caps, sizeof(caps));
				sp++;
				pc = in->x;
				continue;
			}
			if (in->op == R_SAVE) {
				caps[in->x] = (long)pos;
				pc++;
				continue;
			}
			if (in->op == R_BOL) {
				if (pos != 0)
					break;
				pc++;
				continue;
			}
			if (in->op == R_EOL) {
				if (pos != len)
					break;
				pc++;
				continue;
			}
			l->t[l->n].pc = pc;
			memcpy(l->t[l->n].caps, caps, sizeof(caps));
			l->n++;
			break;
		}
	}
}

int sv_regex_exec(const struct sv_regex *re, const char *s, size_t len, long caps[20])
{
	struct vm vm = { .re = re };
	struct tlist cl, nl;
	long init[RE_NCAP];
	bool matched = false;

	vm.mark = xcalloc((size_t)re->n, sizeof(*vm.mark));
	vm.stack = xcalloc((size_t)re->n + 1, sizeof(*vm.stack));
	vm.stcaps = xcalloc((size_t)re->n + 1, sizeof(*vm.stcaps));
	cl.t = xcalloc((size_t)re->n, sizeof(struct thread));
	nl.t = xcalloc((size_t)re->n, sizeof(struct thread));
	cl.n = nl.n = 0;
	for (int i = 0; i < RE_NCAP; i++)
		init[i] = -1;
	for (size_t pos = 0;; pos++) {
		if (!matched) { /* unanchored: a new thread at every position until a match */
			vm.gen++;
			/* threads already in cl carry this generation's marks from the previous
			   step's additions: re-mark them so the new one does not duplicate */
			for (int i = 0; i < cl.n; i++)
				vm.mark[cl.t[i].pc] = vm.gen;
			addthread(&vm, &cl, 0, init, pos, len);
		}
		if (cl.n == 0)
			break;
		vm.gen++;
		nl.n = 0;
		for (int i = 0; i < cl.n; i++) {
			const struct thread *t = &cl.t[i];
			const struct re_insn *in = &re->prog[t->pc];
			int c = pos < len ? (unsigned char)s[pos] : -1;

			if (in->op == R_MATCH) {
				memcpy(caps, t->caps, sizeof(t->caps));
				matched = true;
				break; /* lower-priority threads are cut */
			}
			if (c < 0)
				continue;
			bool ok = in->op == R_ANY || (in->op == R_CHAR && in->c == c) ||
				  (in->op == R_CLASS &&
				   (re->cls[in->x][c >> 3] & (1u << (c & 7))));
			if (ok)
				addthread(&vm, &nl, t->pc + 1, t->caps, pos + 1, len);
		}
		struct tlist tmp = cl;
		cl = nl;
		nl = tmp;
		if (pos == len)
			break;
	}
	free(vm.mark);
	free(vm.stack);
	free(vm.stcaps);
	free(cl.t);
	free(nl.t);
	return matched ? 1 : 0;
}
