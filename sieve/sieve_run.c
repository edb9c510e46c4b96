/* sieve_run.c — owns the interpreter: program decoding, the execution loop with its limits,
 * variables (RFC 5229) and their expansion, the actions and their interactions (implicit
 * keep, RFC 5228 4; reject conflicts, RFC 5429; vacation's response rules, RFC 5230 4.5-4.6;
 * editheader, RFC 5293; include/return/global, RFC 6609), and the result. */
#include <ctype.h>
#include <inttypes.h>
#include <sys/types.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rfc5322.h"
#include "common/xmalloc.h"
#include "sieve/sieve_run.h"

/* ---- decoding ----------------------------------------------------------------------------- */

static int skip_strlist(const uint8_t **p, const uint8_t *end, uint64_t *n_r)
{
	bool ok = true;
	uint64_t n = sv_varint(p, end, &ok);

	for (uint64_t i = 0; ok && i < n; i++) {
		if (*p >= end)
			return -1;
		(*p)++; /* flags */
		uint64_t len = sv_varint(p, end, &ok);
		if (!ok || len > (uint64_t)(end - *p))
			return -1;
		*p += len;
	}
	*n_r = n;
	return ok ? 0 : -1;
}

int sv_decode(const uint8_t *code, size_t len, size_t *pos, struct sv_ins *in)
{
	const uint8_t *p = code + *pos, *end = code + len;
	bool ok = true;

	if (*pos >= len)
		return -1;
	memset(in, 0, sizeof(*in));
	in->op = *p++;
	if (in->op >= OP_COUNT)
		return -1;
	for (;;) {
		if (p >= end)
			return -1;
		unsigned f = *p++;
		uint64_t v = 0;

		if (f == F_END)
			break;
		if (f >= F_COUNT)
			return -1;
		if (f == F_JUMP) {
			if (end - p < 4)
				return -1;
			in->jump = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 |
				   p[3];
			p += 4;
			continue;
		}
		if (f >= F_SL0) {
			in->f[f].p = p;
			if (skip_strlist(&p, end, &in->f[f].n) < 0)
				return -1;
			continue;
		}
		v = sv_varint(&p, end, &ok);
		if (!ok)
			return -1;
		switch (f) {
		case F_CMP:
			in->cmp = (uint8_t)v;
			break;
		case F_MATCH:
			in->match = (uint8_t)v;
			break;
		case F_RELOP:
			in->relop = (uint8_t)v;
			break;
		case F_PART:
			in->part = (uint8_t)v;
			break;
		case F_BODYT:
			in->bodyt = (uint8_t)v;
			break;
		case F_ZONEKIND:
			in->zonekind = (uint8_t)v;
			break;
		case F_FLAGS:
			in->flags = (uint32_t)v;
			break;
		case F_INDEX:
			in->index = (int64_t)v;
			break;
		case F_NUM:
			in->num = (int64_t)v;
			break;
		case F_MODS:
			in->mods = v;
			break;
		}
	}
	if (in->cmp > CMP_UNICODE_CASEMAP || in->match > M_COUNT || in->relop > R_NE ||
	    in->part > P_DETAIL)
		return -1;
	*pos = (size_t)(p - code);
	return 0;
}

void sv_sl_begin(const struct sv_sl *sl, struct sv_sl_iter *it)
{
	it->p = sl->p;
	it->left = sl->p ? sl->n : 0;
	if (it->p != NULL) { /* skip the count */
		while (*it->p & 0x80)
			it->p++;
		it->p++;
	}
}

int sv_sl_next(struct sv_sl_iter *it, const char **s_r, size_t *len_r, unsigned *flags_r)
{
	bool ok = true;

	if (it->left == 0)
		return 0;
	it->left--;
	*flags_r = *it->p++;
	*len_r = (size_t)sv_varint(&it->p, it->p + 10, &ok);
	*s_r = (const char *)it->p;
	it->p += *len_r;
	return 1;
}

static bool prog_header(const uint8_t *prog, size_t len, size_t *code_len_r)
{
	size_t n;

	if (len < 10 || memcmp(prog, SV_MAGIC, 5) != 0 || prog[5] != SV_VERSION)
		return false;
	n = (size_t)prog[6] << 24 | (size_t)prog[7] << 16 | (size_t)prog[8] << 8 | prog[9];
	if (n != len - 10)
		return false;
	*code_len_r = n;
	return true;
}

bool sieve_program_valid(const uint8_t *prog, size_t len)
{
	size_t code_len, pos = 0;
	struct sv_ins in;

	if (!prog_header(prog, len, &code_len))
		return false;
	while (pos < code_len) {
		if (sv_decode(prog + 10, code_len, &pos, &in) < 0)
			return false;
		if ((in.op == OP_JMP || in.op == OP_JMPF || in.op == OP_JMPT) &&
		    (in.jump <= pos - 1 || in.jump > code_len))
			return false;
	}
	return true;
}

/* ---- failures and limits --------------------------------------------------------------------- */

int sv_run_fail(struct sv_run *rn, const char *fmt, ...)
{
	char msg[300];
	va_list ap;

	if (rn->error == NULL) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		rn->error = xstrdup(msg);
	}
	return -1;
}

int sv_charge(struct sv_run *rn, bool body, uint64_t n)
{
	uint64_t *used = body ? &rn->r->body_bytes : &rn->r->header_bytes;
	uint64_t max = body ? rn->lim.max_body_bytes : rn->lim.max_header_bytes;

	*used += n;
	if (*used > max)
		return sv_run_fail(rn, "limit: more than %" PRIu64 " %s bytes compared", max,
				   body ? "body" : "header");
	return 0;
}

/* ---- variables ----------------------------------------------------------------------------- */

static bool is_global(const struct sv_frame *f, const char *name, size_t len)
{
	for (size_t i = 0; i < f->nglobals; i++)
		if (strlen(f->globals[i]) == len && strncasecmp(f->globals[i], name, len) == 0)
			return true;
	return false;
}

static struct sv_var *var_find(struct sv_run *rn, const char *name, size_t len, bool create)
{
	bool g = is_global(rn->frame, name, len);
	struct sv_var *v = g ? rn->gvars : rn->frame->vars;
	size_t *n = g ? &rn->ngvars : &rn->frame->nvars;

	for (size_t i = 0; i < *n; i++)
		if (strlen(v[i].name) == len && strncasecmp(v[i].name, name, len) == 0)
			return &v[i];
	if (!create)
		return NULL;
	if (*n == SV_MAX_VARS) {
		sv_run_fail(rn, "limit: more than %d variables", SV_MAX_VARS);
		return NULL;
	}
	v[*n].name = xstrndup(name, len);
	v[*n].val = NULL;
	v[*n].len = 0;
	return &v[(*n)++];
}

static void var_set(struct sv_var *v, const char *val, size_t len)
{
	if (len > SV_VAR_MAX)
		len = SV_VAR_MAX;
	free(v->val);
	v->val = xmemdup0(val, len);
	v->len = len;
}

static bool ident_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (!first && c >= '0' && c <= '9');
}

struct sv_str sv_expand(struct sv_run *rn, const char *s, size_t len, unsigned flags)
{
	if (!(flags & SV_STR_VARS))
		return (struct sv_str){ s, len };
	struct buf b;

	buf_init(&b, len + 16, SV_EXPAND_MAX);
	for (size_t i = 0; i < len;) {
		if (s[i] == '$' && i + 2 < len && s[i + 1] == '{') {
			size_t j = i + 2, k;
			bool num = isdigit((unsigned char)s[j]);

			for (k = j;
			     k < len && (num ? isdigit((unsigned char)s[k])
					     : ident_char(s[k], k == j) || (s[k] == '.' && k > j));
			     k++)
				;
			if (k < len && s[k] == '}' && k > j) {
				if (num) {
					unsigned long n = strtoul(s + j, NULL, 10);

					if (n < rn->nmatch && k - j < 4)
						buf_append(&b, rn->match[n].p, rn->match[n].len);
				} else if (memchr(s + j, '.', k - j) == NULL) {
					struct sv_var *v = var_find(rn, s + j, k - j, false);

					if (v != NULL)
						buf_append(&b, v->val, v->len);
				}
				i = k + 1;
				continue;
			}
		}
		buf_putc(&b, s[i++]);
	}
	struct sv_str out = { sv_strndup(&rn->tmp, b.data ? b.data : "", b.len), b.len };
	buf_release(&b);
	return out;
}

int sv_sl_next_exp(struct sv_run *rn, struct sv_sl_iter *it, struct sv_str *out)
{
	const char *s;
	size_t len;
	unsigned fl;

	if (!sv_sl_next(it, &s, &len, &fl))
		return 0;
	*out = sv_expand(rn, s, len, fl);
	return 1;
}

static void set_matches(struct sv_run *rn, const struct sv_str *caps, size_t n)
{
	for (size_t i = 0; i < SV_NMATCH; i++) {
		if (i < n && caps[i].p != NULL)
			rn->match[i] = (struct sv_str){
				sv_strndup(&rn->arena, caps[i].p, caps[i].len), caps[i].len
			};
		else
			rn->match[i] = (struct sv_str){ "", 0 };
	}
	rn->nmatch = SV_NMATCH;
}

/* ---- matching --------------------------------------------------------------------------- */

static int match_one(struct sv_run *rn, const struct sv_ins *in, const char *v, size_t vlen,
		     const char *key, size_t klen)
{
	struct sv_str caps[SV_NMATCH];
	size_t ncaps = 0;

	if (sv_charge(rn, false, vlen + klen) < 0)
		return -1;
	switch (in->match) {
	case M_IS:
		return sv_cmp_values(in->cmp, v, vlen, key, klen) == 0;
	case M_CONTAINS:
		if (in->cmp == CMP_NUMERIC)
			return 0;
		return sv_contains(in->cmp, v, vlen, key, klen);
	case M_MATCHES:
		if (in->cmp == CMP_NUMERIC)
			return 0;
		memset(caps, 0, sizeof(caps));
		if (in->cmp == CMP_UNICODE_CASEMAP
			    ? !sv_uglob(key, klen, v, vlen, caps, SV_NMATCH, &ncaps)
			    : !sv_glob(key, klen, v, vlen, in->cmp != CMP_OCTET, caps, SV_NMATCH,
				       &ncaps))
			return 0;
		set_matches(rn, caps, ncaps);
		return 1;
	case M_REGEX: {
		const char *err;
		struct sv_regex *re = sv_regex_new(key, klen, in->cmp != CMP_OCTET, &err);
		long off[20];
		int m;

		if (re == NULL)
			return sv_run_fail(rn, "bad regular expression: %s", err);
		/* the VM's work is subject x program: charge it */
		if (sv_charge(rn, false, vlen * 4) < 0) {
			sv_regex_free(&re);
			return -1;
		}
		m = sv_regex_exec(re, v, vlen, off);
		sv_regex_free(&re);
		if (m == 1) {
			for (size_t i = 0; i < SV_NMATCH; i++)
				caps[i] = off[2 * i] >= 0 && off[2 * i + 1] >= off[2 * i]
						  ? (struct sv_str){ v + off[2 * i],
								     (size_t)(off[2 * i + 1] -
									      off[2 * i]) }
						  : (struct sv_str){ NULL, 0 };
			set_matches(rn, caps, SV_NMATCH);
		}
		return m;
	}
	case M_VALUE:
		return sv_relop_ok(in->relop, sv_cmp_values(in->cmp, v, vlen, key, klen));
	}
	return 0;
}

int sv_match_keys(struct sv_run *rn, const struct sv_ins *in, unsigned kf, const char *v,
		  size_t vlen)
{
	struct sv_sl_iter it;
	const char *k;
	size_t klen;
	unsigned fl;

	sv_sl_begin(&in->f[kf], &it);
	while (sv_sl_next(&it, &k, &klen, &fl)) {
		struct sv_str key = sv_expand(rn, k, klen, fl);
		int m = match_one(rn, in, v, vlen, key.p, key.len);

		if (m != 0)
			return m;
	}
	return 0;
}

int sv_match_values(struct sv_run *rn, const struct sv_ins *in, unsigned kf,
		    const struct sv_str *vals, size_t n)
{
	if (in->match == M_COUNT) {
		char num[24];
		struct sv_ins v = *in;

		snprintf(num, sizeof(num), "%zu", n);
		v.match = M_VALUE;
		v.cmp = CMP_NUMERIC; /* RFC 5231: counts compare with the given comparator,
					 which is to be i;ascii-numeric */
		v.cmp = in->cmp == CMP_NUMERIC ? CMP_NUMERIC : in->cmp;
		return sv_match_keys(rn, &v, kf, num, strlen(num));
	}
	for (size_t i = 0; i < n; i++) {
		int m = sv_match_keys(rn, in, kf, vals[i].p, vals[i].len);

		if (m != 0)
			return m;
	}
	return 0;
}

struct sv_str sv_hdr_value(struct sv_run *rn, size_t i)
{
	struct sv_hdr *h = &rn->h[i];

	if (h->value == NULL) {
		const char *colon = memchr(h->raw, ':', h->rawlen);
		size_t off = colon ? (size_t)(colon - h->raw) + 1 : h->rawlen;
		struct buf b;

		buf_init(&b, 64, SV_EXPAND_MAX);
		(void)rfc5322_unfold(h->raw + off, h->rawlen - off, &b);
		h->value = sv_strndup(&rn->arena, b.data ? b.data : "", b.len);
		h->vlen = b.len;
		buf_release(&b);
	}
	return (struct sv_str){ h->value, h->vlen };
}

struct sv_str sv_hdr_decoded(struct sv_run *rn, size_t i)
{
	struct sv_hdr *h = &rn->h[i];
	struct sv_str v = sv_hdr_value(rn, i);

	if (h->dvalue == NULL) {
		struct buf b;

		if (memmem(v.p, v.len, "=?", 2) == NULL)
			return v;
		buf_init(&b, v.len + 1, SV_EXPAND_MAX);
		sv_rfc2047_decode(v.p, v.len, &b);
		h->dvalue = sv_strndup(&rn->arena, b.data ? b.data : "", b.len);
		h->dlen = b.len;
		buf_release(&b);
	}
	return (struct sv_str){ h->dvalue, h->dlen };
}

/* ---- the message ------------------------------------------------------------------------------ */

static void hdr_add(struct sv_run *rn, const char *name, size_t nlen, const char *raw,
		    size_t rawlen, bool front)
{
	if (rn->nh == rn->caph) {
		rn->caph = rn->caph ? rn->caph * 2 : 32;
		rn->h = xreallocarray(rn->h, rn->caph, sizeof(*rn->h));
	}
	if (front) {
		memmove(rn->h + 1, rn->h, rn->nh * sizeof(*rn->h));
		rn->nh++;
		rn->h[0] = (struct sv_hdr){ name, nlen, raw, rawlen, NULL, 0, NULL, 0, false };
	} else {
		rn->h[rn->nh++] = (struct sv_hdr){
			name, nlen, raw, rawlen, NULL, 0, NULL, 0, false
		};
	}
}

static void load_message(struct sv_run *rn)
{
	const char *m = rn->env->msg ? rn->env->msg : "";
	size_t len = rn->env->msg_len, hlen = len, pos = 0;
	struct str_view name, raw;

	for (size_t i = 0; i < len; i++) { /* the header ends at the first empty line */
		if (m[i] != '\n')
			continue;
		if (i + 1 < len && m[i + 1] == '\n') {
			hlen = i + 1;
			rn->body = m + i + 2;
			break;
		}
		if (i + 2 < len && m[i + 1] == '\r' && m[i + 2] == '\n') {
			hlen = i + 1;
			rn->body = m + i + 3;
			break;
		}
	}
	if (len > 0 && (m[0] == '\n' || (len > 1 && m[0] == '\r' && m[1] == '\n'))) {
		hlen = 0;
		rn->body = m + (m[0] == '\n' ? 1 : 2);
	}
	rn->body_len = rn->body ? len - (size_t)(rn->body - m) : 0;
	while (rfc5322_header_next(m, hlen, &pos, &name, &raw) == 1)
		hdr_add(rn, name.p, name.len, raw.p, raw.len, false);
}

static char *header_block(struct sv_run *rn, size_t *len_r)
{
	struct buf b;

	buf_init(&b, 1024, BUF_INPUT_BOUNDED); /* the message's header block */
	for (size_t i = 0; i < rn->nh; i++) {
		const struct sv_hdr *h = &rn->h[i];

		if (h->deleted)
			continue;
		buf_append(&b, h->raw, h->rawlen);
		if (h->rawlen == 0 || h->raw[h->rawlen - 1] != '\n')
			buf_puts(&b, "\r\n");
	}
	buf_puts(&b, "\r\n");
	return buf_steal(&b, len_r);
}

/* ---- flags (imap4flags) -------------------------------------------------------------------- */

void sv_flag_words(struct sv_run *rn, const char *s, size_t len, struct sv_str **v, size_t *n,
		   size_t *cap)
{
	for (size_t i = 0; i < len;) {
		while (i < len && s[i] == ' ')
			i++;
		size_t j = i;
		while (j < len && s[j] != ' ')
			j++;
		if (j > i) {
			bool dup = false;

			for (size_t k = 0; k < *n; k++)
				dup |= (*v)[k].len == j - i &&
				       strncasecmp((*v)[k].p, s + i, j - i) == 0;
			if (!dup) {
				if (*n == *cap) {
					struct sv_str *nv;

					*cap = *cap ? *cap * 2 : 8;
					nv = sv_alloc(&rn->tmp, *cap * sizeof(*nv));
					if (*n)
						memcpy(nv, *v, *n * sizeof(*nv));
					*v = nv;
				}
				(*v)[(*n)++] = (struct sv_str){ s + i, j - i };
			}
		}
		i = j;
	}
}

/* the flags of a string list, joined by spaces */
static char *flags_of_list(struct sv_run *rn, const struct sv_sl *sl, size_t *len_r)
{
	struct sv_sl_iter it;
	struct buf b;

	buf_init(&b, 64, SV_VAR_MAX);
	sv_sl_begin(sl, &it);
	for (struct sv_str e; sv_sl_next_exp(rn, &it, &e);) {
		if (b.len)
			buf_putc(&b, ' ');
		buf_append(&b, e.p, e.len);
	}
	char *out = sv_strndup(&rn->tmp, b.data ? b.data : "", b.len);
	*len_r = b.len;
	buf_release(&b);
	return out;
}

/* setflag/addflag/removeflag on cur: a new value in *out */
static void flags_change(struct sv_run *rn, unsigned op, const char *cur, size_t curlen,
			 const char *arg, size_t arglen, struct buf *out)
{
	struct sv_str *have = NULL, *chg = NULL;
	size_t nh = 0, caph = 0, nc = 0, capc = 0;

	if (op != OP_SETFLAG)
		sv_flag_words(rn, cur, curlen, &have, &nh, &caph);
	sv_flag_words(rn, arg, arglen, &chg, &nc, &capc);
	for (size_t i = 0; i < nh; i++) {
		bool drop = false;

		for (size_t k = 0; op == OP_REMOVEFLAG && k < nc; k++)
			drop |= chg[k].len == have[i].len &&
				strncasecmp(chg[k].p, have[i].p, chg[k].len) == 0;
		if (!drop) {
			if (out->len)
				buf_putc(out, ' ');
			buf_append(out, have[i].p, have[i].len);
		}
	}
	for (size_t k = 0; op != OP_REMOVEFLAG && k < nc; k++) {
		bool dup = false;

		for (size_t i = 0; i < nh; i++)
			dup |= chg[k].len == have[i].len &&
			       strncasecmp(chg[k].p, have[i].p, chg[k].len) == 0;
		if (!dup) {
			if (out->len)
				buf_putc(out, ' ');
			buf_append(out, chg[k].p, chg[k].len);
		}
	}
}

static int do_flags(struct sv_run *rn, const struct sv_ins *in)
{
	size_t arglen, curlen = 0;
	char *arg = flags_of_list(rn, &in->f[F_SL1], &arglen);
	struct sv_var *var = NULL;
	const char *cur = rn->flags ? rn->flags : "";
	struct buf out;

	if (in->f[F_SL0].p != NULL) {
		struct sv_sl_iter it;
		const char *s;
		size_t len;
		unsigned fl;

		sv_sl_begin(&in->f[F_SL0], &it);
		sv_sl_next(&it, &s, &len, &fl);
		struct sv_str name = sv_expand(rn, s, len, fl);
		if ((var = var_find(rn, name.p, name.len, true)) == NULL)
			return -1;
		cur = var->val ? var->val : "";
	}
	curlen = strlen(cur);
	buf_init(&out, 64, SV_VAR_MAX);
	flags_change(rn, in->op, cur, curlen, arg, arglen, &out);
	if (var != NULL) {
		var_set(var, out.data ? out.data : "", out.len);
	} else {
		free(rn->flags);
		rn->flags = xmemdup0(out.data ? out.data : "", out.len);
	}
	buf_release(&out);
	return 0;
}

/* ---- actions ------------------------------------------------------------------------------- */

static struct sieve_action *act_new(struct sv_run *rn, enum sieve_action_type type)
{
	struct sieve_result *r = rn->r;

	if (++rn->actions > rn->lim.max_actions) {
		sv_run_fail(rn, "limit: more than %u actions", rn->lim.max_actions);
		return NULL;
	}
	r->act = xreallocarray(r->act, r->nact + 1, sizeof(*r->act));
	memset(&r->act[r->nact], 0, sizeof(r->act[0]));
	r->act[r->nact].type = type;
	return &r->act[r->nact++];
}

static void act_set_flags(struct sv_run *rn, struct sieve_action *a, const char *s, size_t len)
{
	struct sv_str *v = NULL;
	size_t n = 0, cap = 0;

	sv_flag_words(rn, s, len, &v, &n, &cap);
	a->flags = n ? xcalloc(n, sizeof(char *)) : NULL;
	for (size_t i = 0; i < n; i++)
		a->flags[i] = xmemdup0(v[i].p, v[i].len);
	a->nflags = n;
}

static struct sv_str first_str(struct sv_run *rn, const struct sv_sl *sl)
{
	struct sv_sl_iter it;
	const char *s;
	size_t len;
	unsigned fl;

	sv_sl_begin(sl, &it);
	if (!sv_sl_next(&it, &s, &len, &fl))
		return (struct sv_str){ NULL, 0 };
	return sv_expand(rn, s, len, fl);
}

static int do_store(struct sv_run *rn, const struct sv_ins *in)
{
	bool keep = in->op == OP_KEEP;
	struct sv_str mb = keep ? (struct sv_str){ NULL, 0 } : first_str(rn, &in->f[F_SL0]);
	const char *fl;
	size_t fllen;

	if (!keep && (mb.len == 0 || memchr(mb.p, '\0', mb.len) != NULL))
		return sv_run_fail(rn, "fileinto: invalid mailbox name");
	if (!keep && mb.len == 5 && strncasecmp(mb.p, "INBOX", 5) == 0)
		keep = true, mb.p = NULL;
	if (in->flags & I_HAS_FLAGS) {
		fl = flags_of_list(rn, &in->f[F_FLAGLIST], &fllen);
	} else {
		fl = rn->flags ? rn->flags : "";
		fllen = strlen(fl);
	}
	/* the same mailbox twice is one delivery (RFC 5228 4.1): the flags of the last one */
	for (size_t i = 0; i < rn->r->nact; i++) {
		struct sieve_action *a = &rn->r->act[i];

		if ((keep && a->type == SIEVE_KEEP) ||
		    (!keep && a->type == SIEVE_FILEINTO && strlen(a->mailbox) == mb.len &&
		     memcmp(a->mailbox, mb.p, mb.len) == 0)) {
			for (size_t k = 0; k < a->nflags; k++)
				free(a->flags[k]);
			free(a->flags);
			act_set_flags(rn, a, fl, fllen);
			a->create |= (in->flags & I_CREATE) != 0;
			goto done;
		}
	}
	struct sieve_action *a = act_new(rn, keep ? SIEVE_KEEP : SIEVE_FILEINTO);
	if (a == NULL)
		return -1;
	if (!keep)
		a->mailbox = xmemdup0(mb.p, mb.len);
	a->create = (in->flags & I_CREATE) != 0;
	act_set_flags(rn, a, fl, fllen);
done:
	if (in->op == OP_KEEP)
		rn->any_keep = true;
	if (!(in->flags & I_COPY))
		rn->implicit_keep = false;
	return 0;
}

static bool addr_ok(const char *p, size_t len)
{
	const char *at = memchr(p, '@', len);

	if (at == NULL || at == p || at == p + len - 1 || len > 320)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)p[i] <= ' ' || p[i] == '<' || p[i] == '>' || p[i] == ',' ||
		    p[i] == 0x7f)
			return false;
	return memchr(at + 1, '@', (size_t)(p + len - at - 1)) == NULL;
}

static int do_redirect(struct sv_run *rn, const struct sv_ins *in)
{
	struct sv_str to = first_str(rn, &in->f[F_SL0]);
	char addr[321];

	/* a bare address or "Name <addr>" */
	const char *lt = memchr(to.p, '<', to.len),
		   *gt = lt ? memchr(lt, '>', (size_t)(to.p + to.len - lt)) : NULL;
	if (lt != NULL && gt != NULL)
		to = (struct sv_str){ lt + 1, (size_t)(gt - lt - 1) };
	while (to.len > 0 && (*to.p == ' ' || *to.p == '\t'))
		to.p++, to.len--;
	while (to.len > 0 && (to.p[to.len - 1] == ' ' || to.p[to.len - 1] == '\t'))
		to.len--;
	if (!addr_ok(to.p, to.len))
		return sv_run_fail(rn, "redirect: invalid address \"%.*s\"",
				   (int)(to.len > 80 ? 80 : to.len), to.p);
	memcpy(addr, to.p, to.len);
	addr[to.len] = '\0';
	for (size_t i = 0; i < rn->r->nact; i++)
		if (rn->r->act[i].type == SIEVE_REDIRECT &&
		    strcasecmp(rn->r->act[i].addr, addr) == 0)
			goto done;
	if (++rn->redirects > rn->lim.max_redirects)
		return sv_run_fail(rn, "limit: more than %u redirects", rn->lim.max_redirects);
	struct sieve_action *a = act_new(rn, SIEVE_REDIRECT);
	if (a == NULL)
		return -1;
	a->addr = xstrdup(addr);
done:
	if (!(in->flags & I_COPY))
		rn->implicit_keep = false;
	return 0;
}

static int do_reject(struct sv_run *rn, const struct sv_ins *in)
{
	struct sv_str why = first_str(rn, &in->f[F_SL0]);
	struct sieve_action *a;

	if (rn->rejecting)
		return sv_run_fail(rn, "reject: only one reject per message");
	if ((a = act_new(rn, in->op == OP_REJECT ? SIEVE_REJECT : SIEVE_EREJECT)) == NULL)
		return -1;
	a->reason = xmemdup0(why.p, why.len);
	rn->rejecting = true;
	rn->implicit_keep = false;
	return 0;
}

/* ---- vacation (RFC 5230, RFC 3834) -------------------------------------------------------- */

static ssize_t hdr_find(struct sv_run *rn, const char *name, size_t from)
{
	size_t nlen = strlen(name);

	for (size_t i = from; i < rn->nh; i++)
		if (!rn->h[i].deleted && rn->h[i].nlen == nlen &&
		    strncasecmp(rn->h[i].name, name, nlen) == 0)
			return (ssize_t)i;
	return -1;
}

struct addr_scan {
	const char *const *mine;
	size_t nmine;
	bool found;
};

static void addr_scan_cb(void *ctx, const struct rfc5322_addr *a)
{
	struct addr_scan *s = ctx;
	char buf[640];

	if (a->is_group_start || a->is_group_end || a->mailbox.len == 0)
		return;
	snprintf(buf, sizeof(buf), "%.*s@%.*s", (int)a->mailbox.len, a->mailbox.p,
		 (int)a->domain.len, a->domain.p);
	for (size_t i = 0; i < s->nmine; i++)
		if (s->mine[i] != NULL && strcasecmp(buf, s->mine[i]) == 0)
			s->found = true;
}

/* The one word of a field value outside blanks and RFC 5322 comments (CFWS, 3.2.2): "bulk"
   of "(list mail) Bulk (x)"; empty when the value has no word or more than one. v is
   unfolded already (sv_hdr_value); a comment left open runs to the end. */
static struct sv_str cfws_word(struct sv_str v)
{
	struct sv_str w = { "", 0 };
	size_t i = 0, words = 0;

	while (i < v.len) {
		if (v.p[i] == '(') {
			i = rfc5322_skip_comment(v.p, v.len, i);
		} else if (v.p[i] == ' ' || v.p[i] == '\t') {
			i++;
		} else {
			w.p = v.p + i;
			while (i < v.len && v.p[i] != '(' && v.p[i] != ' ' && v.p[i] != '\t')
				i++;
			w.len = (size_t)(v.p + i - w.p);
			words++;
		}
	}
	return words == 1 ? w : (struct sv_str){ "", 0 };
}

/* why no reply may be sent (RFC 3834 2, RFC 5230 4.5/4.6), or NULL */
static const char *vacation_refusal(struct sv_run *rn, const char *const *mine, size_t nmine)
{
	static const char *const lists[] = { "List-Id",          "List-Help", "List-Subscribe",
					     "List-Unsubscribe", "List-Post", "List-Owner",
					     "List-Archive",     NULL };
	static const char *const recips[] = { "To",        "Cc",         "Bcc", "Resent-To",
					      "Resent-Cc", "Resent-Bcc", NULL };
	const char *from = rn->env->env_from ? rn->env->env_from : "";
	ssize_t i;

	if (*from == '\0')
		return "null sender";
	const char *at = strchr(from, '@');
	size_t local = at ? (size_t)(at - from) : strlen(from);
	if ((local == 13 && strncasecmp(from, "MAILER-DAEMON", 13) == 0) ||
	    (local >= 6 && strncasecmp(from, "owner-", 6) == 0) ||
	    (local >= 8 && strncasecmp(from + local - 8, "-request", 8) == 0) ||
	    (local == 10 && strncasecmp(from, "postmaster", 10) == 0) ||
	    (local == 8 && strncasecmp(from, "LISTSERV", 8) == 0) ||
	    (local == 8 && strncasecmp(from, "majordom", 8) == 0))
		return "sender is a list or daemon address";
	for (size_t k = 0; k < nmine; k++)
		if (mine[k] != NULL && strcasecmp(from, mine[k]) == 0)
			return "sender is the recipient";
	if ((i = hdr_find(rn, "Auto-Submitted", 0)) >= 0) {
		struct sv_str v = sv_hdr_value(rn, (size_t)i);

		if (!(v.len >= 2 && strncasecmp(v.p, "no", 2) == 0 &&
		      (v.len == 2 || v.p[2] == ' ' || v.p[2] == ';' || v.p[2] == '(')))
			return "Auto-Submitted message";
	}
	for (size_t k = 0; lists[k] != NULL; k++)
		if (hdr_find(rn, lists[k], 0) >= 0)
			return "mailing list message";
	if ((i = hdr_find(rn, "Precedence", 0)) >= 0) {
		struct sv_str v = cfws_word(sv_hdr_value(rn, (size_t)i));

		if ((v.len == 4 && strncasecmp(v.p, "bulk", 4) == 0) ||
		    (v.len == 4 && strncasecmp(v.p, "list", 4) == 0) ||
		    (v.len == 4 && strncasecmp(v.p, "junk", 4) == 0))
			return "Precedence: bulk, list or junk";
	}
	if (hdr_find(rn, "X-Heron-Vacation", 0) >= 0)
		return "our own auto-reply";
	struct addr_scan as = { mine, nmine, false };
	for (size_t k = 0; recips[k] != NULL; k++)
		for (i = hdr_find(rn, recips[k], 0); i >= 0;
		     i = hdr_find(rn, recips[k], (size_t)i + 1)) {
			struct sv_str v = sv_hdr_value(rn, (size_t)i);

			rfc5322_addr_parse(v.p, v.len, addr_scan_cb, &as);
		}
	if (!as.found)
		return "recipient not in To/Cc/Bcc";
	return NULL;
}

static char *opt_str(struct sv_run *rn, const struct sv_sl *sl)
{
	if (sl->p == NULL)
		return NULL;
	struct sv_str s = first_str(rn, sl);
	return xmemdup0(s.p, s.len);
}

/* a stable handle from the parameters that change the reply (RFC 5230 4.2) */
static char *vacation_handle(const struct sieve_vacation *v)
{
	uint64_t h = 1469598103934665603ull;
	const char *parts[] = { v->reason, v->subject_given, v->from, v->mime ? "m" : "" };

	for (size_t k = 0; k < 4; k++) {
		for (const char *p = parts[k] ? parts[k] : ""; *p; p++) {
			h ^= (unsigned char)*p;
			h *= 1099511628211ull;
		}
		h ^= 0xff;
		h *= 1099511628211ull;
	}
	return xasprintf("auto-%016" PRIx64, h);
}

static int do_vacation(struct sv_run *rn, const struct sv_ins *in)
{
	const char *mine[66];
	size_t nmine = 0;
	struct sv_sl_iter it;
	const char *why;
	ssize_t i;

	if (rn->vacationed)
		return sv_run_fail(rn, "vacation: only one vacation per message");
	rn->vacationed = true;
	mine[nmine++] = rn->env->env_to;
	mine[nmine++] = rn->env->orig_to;
	char *from = opt_str(rn, &in->f[F_FROM]);
	sv_sl_begin(&in->f[F_ADDRESSES], &it);
	for (struct sv_str e; nmine < 66 && sv_sl_next_exp(rn, &it, &e);) {
		mine[nmine++] = sv_strndup(&rn->tmp, e.p, e.len);
	}
	if ((why = vacation_refusal(rn, mine, nmine)) != NULL) {
		free(from);
		return 0; /* no reply: not an error */
	}
	struct sieve_action *a = act_new(rn, SIEVE_VACATION);
	if (a == NULL) {
		free(from);
		return -1;
	}
	struct sieve_vacation *v = &a->vac;
	v->to = xstrdup(rn->env->env_from);
	v->from = from;
	v->subject_given = opt_str(rn, &in->f[F_SUBJECT]);
	v->reason = opt_str(rn, &in->f[F_SL0]);
	v->mime = (in->flags & I_MIME) != 0;
	v->handle = opt_str(rn, &in->f[F_HANDLE]);
	if (v->handle == NULL)
		v->handle = vacation_handle(v);
	if (in->flags & I_SECONDS)
		v->seconds = in->num;
	else
		v->seconds = (in->flags & I_HAS_NUM ? in->num : 7) * 86400;
	if (v->subject_given != NULL) {
		v->subject = xstrdup(v->subject_given);
	} else if ((i = hdr_find(rn, "Subject", 0)) >= 0) {
		struct sv_str sub = sv_hdr_value(rn, (size_t)i);

		v->subject = xasprintf("Auto: %.*s", (int)(sub.len > 900 ? 900 : sub.len), sub.p);
	} else {
		v->subject = xstrdup("Automated reply");
	}
	if ((i = hdr_find(rn, "Message-ID", 0)) >= 0) {
		struct sv_str id = sv_hdr_value(rn, (size_t)i);
		ssize_t r = hdr_find(rn, "References", 0);

		if (id.len < 1000) {
			v->in_reply_to = xmemdup0(id.p, id.len);
			if (r >= 0) {
				struct sv_str refs = sv_hdr_value(rn, (size_t)r);

				v->references = xasprintf("%.*s %.*s",
							  (int)(refs.len > 4000 ? 4000 : refs.len),
							  refs.p, (int)id.len, id.p);
			} else {
				v->references = xmemdup0(id.p, id.len);
			}
		}
	}
	return 0;
}

/* ---- set (RFC 5229 4) ----------------------------------------------------------------------- */

static int do_set(struct sv_run *rn, const struct sv_ins *in)
{
	struct sv_str name = first_str(rn, &in->f[F_SL0]);
	struct sv_var *var = var_find(rn, name.p, name.len, true);
	struct sv_str val;
	char *v;

	if (var == NULL)
		return -1;
	name = first_str(rn, &in->f[F_SL1]);
	val = name;
	v = sv_strndup(&rn->tmp, val.p, val.len);
	size_t len = val.len;
	if (in->mods & (MOD_LOWER | MOD_UPPER))
		for (size_t i = 0; i < len; i++)
			v[i] = (char)((in->mods & MOD_LOWER) ? tolower((unsigned char)v[i])
							     : toupper((unsigned char)v[i]));
	if (len > 0 && (in->mods & MOD_LOWERFIRST))
		v[0] = (char)tolower((unsigned char)v[0]);
	if (len > 0 && (in->mods & MOD_UPPERFIRST))
		v[0] = (char)toupper((unsigned char)v[0]);
	if (in->mods & MOD_QUOTEWILDCARD) {
		char *q = sv_alloc(&rn->tmp, 2 * len + 1);
		size_t k = 0;

		for (size_t i = 0; i < len; i++) {
			if (v[i] == '*' || v[i] == '?' || v[i] == '\\')
				q[k++] = '\\';
			q[k++] = v[i];
		}
		v = q;
		len = k;
	}
	if (in->mods & MOD_LENGTH) {
		size_t chars = 0;

		for (size_t i = 0; i < len; i++)
			chars += ((unsigned char)v[i] & 0xc0) != 0x80;
		v = sv_alloc(&rn->tmp, 24);
		len = (size_t)snprintf(v, 24, "%zu", chars);
	}
	var_set(var, v, len);
	return 0;
}

/* ---- editheader (RFC 5293) ------------------------------------------------------------------ */

static bool protected_header(const char *n, size_t len)
{
	return (len == 8 && strncasecmp(n, "Received", 8) == 0) ||
	       (len == 14 && strncasecmp(n, "Auto-Submitted", 14) == 0);
}

static bool field_name_ok(const char *n, size_t len)
{
	if (len == 0 || len > 200)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)n[i] <= ' ' || (unsigned char)n[i] >= 0x7f || n[i] == ':')
			return false;
	return true;
}

static int do_addheader(struct sv_run *rn, const struct sv_ins *in)
{
	struct sv_str name = first_str(rn, &in->f[F_SL0]);
	char *n = sv_strndup(&rn->arena, name.p, name.len);
	struct sv_str val = first_str(rn, &in->f[F_SL1]);
	struct buf b;

	if (!field_name_ok(n, name.len))
		return sv_run_fail(rn, "addheader: invalid field name");
	if (protected_header(n, name.len))
		return 0;
	if (rn->nh >= 1000)
		return sv_run_fail(rn, "limit: too many header fields");
	buf_init(&b, 128, SV_EXPAND_MAX + 300);
	buf_printf(&b, "%s: ", n);
	/* fold long values at blanks; CR/LF in the value become folds */
	size_t col = name.len + 2;
	for (size_t i = 0; i < val.len; i++) {
		char c = val.p[i];

		if (c == '\r' || c == '\n')
			c = ' ';
		if (c == ' ' && col > 72) {
			buf_puts(&b, "\r\n");
			col = 0;
		}
		buf_putc(&b, c);
		col++;
	}
	buf_puts(&b, "\r\n");
	char *raw = sv_strndup(&rn->arena, b.data, b.len);
	hdr_add(rn, n, name.len, raw, b.len, !(in->flags & I_LAST));
	buf_release(&b);
	rn->edited = true;
	return 0;
}

static int do_deleteheader(struct sv_run *rn, const struct sv_ins *in)
{
	struct sv_str name = first_str(rn, &in->f[F_SL0]);
	size_t occ[1000], n = 0;

	if (protected_header(name.p, name.len))
		return 0;
	for (size_t i = 0; i < rn->nh && n < 1000; i++)
		if (!rn->h[i].deleted && rn->h[i].nlen == name.len &&
		    strncasecmp(rn->h[i].name, name.p, name.len) == 0)
			occ[n++] = i;
	for (size_t k = 0; k < n; k++) {
		if (in->flags & I_HAS_INDEX) {
			size_t want = (size_t)in->index;

			if (want > n || ((in->flags & I_LAST) ? n - want : want - 1) != k)
				continue;
		}
		if (in->f[F_SL1].p != NULL) {
			struct sv_str v = sv_hdr_value(rn, occ[k]);
			int m = sv_match_keys(rn, in, F_SL1, v.p, v.len);

			if (m < 0)
				return -1;
			if (m == 0)
				continue;
		}
		rn->h[occ[k]].deleted = true;
		rn->edited = true;
	}
	return 0;
}

/* ---- the machine --------------------------------------------------------------------------- */

static int exec_prog(struct sv_run *rn, const uint8_t *prog, size_t len);

static int do_include(struct sv_run *rn, const struct sv_ins *in)
{
	struct sv_str name = first_str(rn, &in->f[F_SL0]);
	bool global = (in->flags & I_GLOBAL) != 0;
	char *key = xasprintf("%c%.*s", global ? 'g' : 'p', (int)name.len, name.p);
	const uint8_t *prog = NULL;
	size_t plen = 0;
	int rc;

	if (name.len == 0 || memchr(name.p, '/', name.len) != NULL) {
		free(key);
		return sv_run_fail(rn, "include: invalid script name");
	}
	for (size_t i = 0; i < rn->nincluded; i++)
		if (strcmp(rn->included[i], key) == 0 && (in->flags & I_ONCE)) {
			free(key);
			return 0;
		}
	if (rn->depth >= rn->lim.max_includes) {
		free(key);
		return sv_run_fail(rn, "limit: include nested more than %u deep",
				   rn->lim.max_includes);
	}
	if (rn->env->include != NULL)
		prog = rn->env->include(rn->env->ctx, global, key + 1, &plen);
	if (prog == NULL) {
		rc = (in->flags & I_OPTIONAL) ? 0
					      : sv_run_fail(rn,
							    "include: script \"%s\" not "
							    "found",
							    key + 1);
		free(key);
		return rc;
	}
	rn->included = xreallocarray(rn->included, rn->nincluded + 1, sizeof(char *));
	rn->included[rn->nincluded++] = key;
	struct sv_frame *saved = rn->frame, *f = xcalloc(1, sizeof(*f));
	rn->frame = f;
	rn->depth++;
	rc = exec_prog(rn, prog, plen);
	rn->depth--;
	rn->frame = saved;
	for (size_t i = 0; i < f->nvars; i++) {
		free(f->vars[i].name);
		free(f->vars[i].val);
	}
	for (size_t i = 0; i < f->nglobals; i++)
		free(f->globals[i]);
	free(f->globals);
	free(f);
	return rc;
}

static int do_global(struct sv_run *rn, const struct sv_ins *in)
{
	struct sv_sl_iter it;
	const char *s;
	size_t len;
	unsigned fl;
	struct sv_frame *f = rn->frame;

	sv_sl_begin(&in->f[F_SL0], &it);
	while (sv_sl_next(&it, &s, &len, &fl)) {
		if (f->nglobals >= SV_MAX_VARS)
			return sv_run_fail(rn, "limit: too many global variables");
		f->globals = xreallocarray(f->globals, f->nglobals + 1, sizeof(char *));
		f->globals[f->nglobals++] = xmemdup0(s, len);
	}
	return 0;
}

/* one action or control instruction; 1 = leave this script (return/stop) */
static int exec_cmd(struct sv_run *rn, const struct sv_ins *in)
{
	switch (in->op) {
	case OP_STOP:
		rn->stop = true;
		return 1;
	case OP_RETURN:
		return 1;
	case OP_KEEP:
	case OP_FILEINTO:
		return do_store(rn, in);
	case OP_DISCARD:
		rn->implicit_keep = false;
		return 0;
	case OP_REDIRECT:
		return do_redirect(rn, in);
	case OP_REJECT:
	case OP_EREJECT:
		return do_reject(rn, in);
	case OP_VACATION:
		return do_vacation(rn, in);
	case OP_SETFLAG:
	case OP_ADDFLAG:
	case OP_REMOVEFLAG:
		return do_flags(rn, in);
	case OP_SET:
		return do_set(rn, in);
	case OP_INCLUDE:
		return do_include(rn, in) < 0 ? -1 : rn->stop ? 1 : 0;
	case OP_GLOBAL:
		return do_global(rn, in);
	case OP_ADDHEADER:
		return do_addheader(rn, in);
	case OP_DELETEHEADER:
		return do_deleteheader(rn, in);
	case OP_REQUIRE_NOP:
	case OP_END:
		return 0;
	}
	return sv_run_fail(rn, "corrupt program (opcode %u)", in->op);
}

static int exec_prog(struct sv_run *rn, const uint8_t *prog, size_t len)
{
	size_t code_len, pos = 0;
	const uint8_t *code;
	struct sv_ins in;
	bool res = false;

	if (!prog_header(prog, len, &code_len))
		return sv_run_fail(rn, "the compiled script is not valid: store it again");
	code = prog + 10;
	while (pos < code_len) {
		int rc;

		if (++rn->r->instructions > rn->lim.max_instructions)
			return sv_run_fail(rn, "limit: more than %" PRIu64 " instructions",
					   rn->lim.max_instructions);
		if (sv_decode(code, code_len, &pos, &in) < 0)
			return sv_run_fail(rn, "the compiled script is not valid: store it again");
		switch (in.op) {
		case OP_END:
			return 0;
		case OP_JMP:
		case OP_JMPF:
		case OP_JMPT:
			if (in.op == OP_JMP || (in.op == OP_JMPF) != res) {
				if (in.jump > code_len)
					return sv_run_fail(rn, "corrupt program (jump)");
				pos = in.jump;
			}
			continue;
		case OP_NOT:
			res = !res;
			continue;
		}
		bool test = in.op >= OP_TRUE && in.op <= OP_VALIDNOTIFY_NOP;

		rc = test ? sv_test(rn, &in) : exec_cmd(rn, &in);
		if (test)
			res = rc == 1;
		sv_arena_free(&rn->tmp);
		if (rc < 0)
			return -1;
		if (rc == 1 && !test)
			return 0;
	}
	return 0;
}

void sieve_result_clear(struct sieve_result *r)
{
	for (size_t i = 0; i < r->nact; i++) {
		struct sieve_action *a = &r->act[i];

		free(a->mailbox);
		for (size_t k = 0; k < a->nflags; k++)
			free(a->flags[k]);
		free(a->flags);
		free(a->addr);
		free(a->reason);
		free(a->vac.to);
		free(a->vac.from);
		free(a->vac.subject);
		free(a->vac.subject_given);
		free(a->vac.reason);
		free(a->vac.handle);
		free(a->vac.in_reply_to);
		free(a->vac.references);
	}
	free(r->act);
	for (size_t i = 0; i < r->ndup; i++)
		free(r->dup[i].key);
	free(r->dup);
	free(r->header);
	free(r->error);
	memset(r, 0, sizeof(*r));
}

static void limits_default(struct sieve_limits *l, const struct sieve_limits *in)
{
	if (in != NULL)
		*l = *in;
	else
		memset(l, 0, sizeof(*l));
	if (l->max_instructions == 0)
		l->max_instructions = 100000;
	if (l->max_redirects == 0)
		l->max_redirects = 4;
	if (l->max_actions == 0)
		l->max_actions = 32;
	if (l->max_header_bytes == 0)
		l->max_header_bytes = 16u << 20;
	if (l->max_body_bytes == 0)
		l->max_body_bytes = 16u << 20;
	if (l->max_includes == 0)
		l->max_includes = 8;
}

/* conflicts and the implicit keep once every script ran */
static void finish(struct sv_run *rn)
{
	struct sieve_result *r = rn->r;

	if (rn->error == NULL && rn->rejecting) {
		for (size_t i = 0; i < r->nact; i++)
			if (r->act[i].type != SIEVE_REJECT && r->act[i].type != SIEVE_EREJECT)
				sv_run_fail(rn, "reject cannot be combined with keep, fileinto, "
						"redirect or vacation");
	}
	if (rn->error != NULL) {
		uint64_t ins = r->instructions, hb = r->header_bytes, bb = r->body_bytes;

		sieve_result_clear(r);
		r->instructions = ins;
		r->header_bytes = hb;
		r->body_bytes = bb;
		r->error = rn->error;
		rn->error = NULL;
		r->act = xcalloc(1, sizeof(*r->act));
		r->act[0].type = SIEVE_KEEP;
		r->nact = 1;
		return;
	}
	if (rn->implicit_keep) {
		bool have = false;

		for (size_t i = 0; i < r->nact; i++)
			have |= r->act[i].type == SIEVE_KEEP;
		if (!have) {
			struct sieve_action *a;

			r->act = xreallocarray(r->act, r->nact + 1, sizeof(*r->act));
			a = &r->act[r->nact++];
			memset(a, 0, sizeof(*a));
			a->type = SIEVE_KEEP;
			act_set_flags(rn, a, rn->flags ? rn->flags : "",
				      rn->flags ? strlen(rn->flags) : 0);
		}
	}
	if (rn->edited)
		r->header = header_block(rn, &r->header_len);
}

int sieve_run_chain(const uint8_t *const *progs, const size_t *lens, size_t n,
		    const struct sieve_env *env, const struct sieve_limits *lim,
		    struct sieve_result *r)
{
	struct sv_run rn = { .env = env, .r = r, .implicit_keep = true };
	struct sv_frame *f = xcalloc(1, sizeof(*f));

	memset(r, 0, sizeof(*r));
	limits_default(&rn.lim, lim);
	load_message(&rn);
	for (size_t i = 0; i < n && !rn.stop && rn.error == NULL; i++) {
		if (progs[i] == NULL)
			continue;
		memset(f, 0, sizeof(*f));
		rn.frame = f;
		(void)exec_prog(&rn, progs[i], lens[i]);
		for (size_t k = 0; k < f->nvars; k++) {
			free(f->vars[k].name);
			free(f->vars[k].val);
		}
		for (size_t k = 0; k < f->nglobals; k++)
			free(f->globals[k]);
		free(f->globals);
	}
	finish(&rn);
	free(f);
	for (size_t k = 0; k < rn.ngvars; k++) {
		free(rn.gvars[k].name);
		free(rn.gvars[k].val);
	}
	for (size_t k = 0; k < rn.nincluded; k++)
		free(rn.included[k]);
	free(rn.included);
	free(rn.flags);
	free(rn.h);
	free(rn.error);
	sv_arena_free(&rn.tmp);
	sv_arena_free(&rn.arena);
	return 0;
}

int sieve_run(const uint8_t *prog, size_t len, const struct sieve_env *env,
	      const struct sieve_limits *lim, struct sieve_result *r)
{
	return sieve_run_chain(&prog, &len, 1, env, lim, r);
}

/* duplicate marks are added by the duplicate test (sieve_tests.c) */
void sv_dup_mark(struct sv_run *rn, const char *key, int64_t seconds);
void sv_dup_mark(struct sv_run *rn, const char *key, int64_t seconds)
{
	struct sieve_result *r = rn->r;

	for (size_t i = 0; i < r->ndup; i++)
		if (strcmp(r->dup[i].key, key) == 0)
			return;
	if (r->ndup >= 16)
		return;
	r->dup = xreallocarray(r->dup, r->ndup + 1, sizeof(*r->dup));
	r->dup[r->ndup].key = xstrdup(key);
	r->dup[r->ndup++].seconds = seconds;
}
