/* milter_proto.c — owns the milter protocol's bytes: packet writing, reply parsing and
 * checking, SETSYMLIST lists, and the [milter] list syntax. No I/O (see milter_proto.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/endian.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mtad/milter_proto.h"

static int put_header(struct buf *b, char cmd, size_t len)
{
	uint8_t h[5];

	if (len > MILTER_REPLY_MAX)
		return -1;
	put_be32(h, (uint32_t)len + 1);
	h[4] = (uint8_t)cmd;
	return buf_append(b, h, sizeof(h));
}

int milter_put(struct buf *b, char cmd, const void *data, size_t len)
{
	size_t mark = b->len;

	if (put_header(b, cmd, len) < 0 || buf_append(b, data, len) < 0) {
		buf_truncate(b, mark);
		return -1;
	}
	return 0;
}

int milter_put_optneg(struct buf *b, uint32_t version, uint32_t actions, uint32_t protocol)
{
	uint8_t d[12];

	put_be32(d, version);
	put_be32(d + 4, actions);
	put_be32(d + 8, protocol);
	return milter_put(b, SMFIC_OPTNEG, d, sizeof(d));
}

int milter_put_strs(struct buf *b, char cmd, const char *const *strs, size_t n)
{
	size_t mark = b->len, len = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		len += strlen(strs[i]) + 1;
	rc |= put_header(b, cmd, len);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc |= buf_append(b, strs[i], strlen(strs[i]) + 1);
	if (rc != 0)
		buf_truncate(b, mark);
	return rc;
}

int milter_put_macros(struct buf *b, char stage_cmd, const char *const *names,
		      const char *const *values, size_t n)
{
	size_t mark = b->len, len = 1;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		len += strlen(names[i]) + strlen(values[i]) + 2;
	rc |= put_header(b, SMFIC_MACRO, len);
	rc |= buf_putc(b, stage_cmd);
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc |= buf_append(b, names[i], strlen(names[i]) + 1);
		rc |= buf_append(b, values[i], strlen(values[i]) + 1);
	}
	if (rc != 0)
		buf_truncate(b, mark);
	return rc;
}

int milter_put_connect(struct buf *b, const char *hostname, char family, uint16_t port,
		       const char *addr)
{
	size_t mark = b->len, hl = strlen(hostname) + 1;
	bool inet = family == '4' || family == '6' || family == 'L';
	size_t len = hl + 1 + (inet ? 2 + strlen(addr) + 1 : 0);
	uint8_t pb[2] = { (uint8_t)(port >> 8), (uint8_t)port };
	int rc = put_header(b, SMFIC_CONNECT, len);

	rc |= buf_append(b, hostname, hl);
	rc |= buf_putc(b, family);
	if (inet && rc == 0) {
		rc |= buf_append(b, pb, 2);
		rc |= buf_append(b, addr, strlen(addr) + 1);
	}
	if (rc != 0)
		buf_truncate(b, mark);
	return rc;
}

/* The NUL-terminated string at d[*off..len): it, with *off moved past its NUL; NULL when
   no NUL ends it inside the packet. */
static const char *take_str(const char *d, size_t len, size_t *off)
{
	const char *s = d + *off, *nul;

	if (*off >= len || (nul = memchr(s, '\0', len - *off)) == NULL)
		return NULL;
	*off = (size_t)(nul - d) + 1;
	return s;
}

static int parse_optneg(struct milter_reply *r, const char **error_r)
{
	const unsigned char *u = (const unsigned char *)r->data;
	size_t off = 12;

	if (r->len < 12) {
		*error_r = "option negotiation too short";
		return -1;
	}
	r->version = get_be32(u);
	r->actions = get_be32(u + 4);
	r->protocol = get_be32(u + 8);
	/* SETSYMLIST lists: stage (4 bytes), then a string, repeated */
	while (off < r->len) {
		if (r->len - off < 5) {
			*error_r = "truncated macro list";
			return -1;
		}
		uint32_t st = get_be32(u + off);
		off += 4;
		const char *list = take_str(r->data, r->len, &off);
		if (st >= MILTER_NSTAGES || list == NULL) {
			*error_r = "bad macro list";
			return -1;
		}
		r->symlist[st] = list;
	}
	return 0;
}

/* REPLYCODE: "4xy text" or "5xy text" (a 3-digit code, then space or a dash of a
   multi-line reply, or nothing), NUL-terminated. */
static int parse_replycode(struct milter_reply *r, const char **error_r)
{
	const char *t = r->data;

	if (r->len < 4 || t[r->len - 1] != '\0' || strlen(t) != r->len - 1 ||
	    (t[0] != '4' && t[0] != '5') || t[1] < '0' || t[1] > '9' || t[2] < '0' || t[2] > '9' ||
	    (t[3] != ' ' && t[3] != '-' && t[3] != '\0')) {
		*error_r = "bad reply code";
		return -1;
	}
	for (const char *p = t; *p != '\0'; p++) {
		/* CR LF only between the lines of a multi-line reply; other controls never */
		if ((unsigned char)*p < 0x20 && *p != '\r' && *p != '\n' && *p != '\t') {
			*error_r = "control character in reply text";
			return -1;
		}
	}
	r->code = (t[0] - '0') * 100 + (t[1] - '0') * 10 + (t[2] - '0');
	r->text = t;
	return 0;
}

/* The strings a command carries: [index] first, then nreq strings and up to nopt more; the
   packet must end right after them. */
static int parse_strs(struct milter_reply *r, bool index, int nreq, int nopt, const char **error_r)
{
	const char *s[3] = { NULL, NULL, NULL };
	size_t off = 0;
	int k = 0;

	if (index) {
		if (r->len < 4) {
			*error_r = "missing index";
			return -1;
		}
		r->index = get_be32((const unsigned char *)r->data);
		off = 4;
	}
	while (off < r->len && k < nreq + nopt) {
		if ((s[k++] = take_str(r->data, r->len, &off)) == NULL) {
			*error_r = "unterminated string";
			return -1;
		}
	}
	if (k < nreq || off != r->len) {
		*error_r = k < nreq ? "missing argument" : "trailing bytes";
		return -1;
	}
	r->name = s[0];
	r->value = s[1];
	return 0;
}

static int parse_data(struct milter_reply *r, const char **error_r)
{
	switch (r->cmd) {
	case SMFIR_ACCEPT:
	case SMFIR_CONTINUE:
	case SMFIR_DISCARD:
	case SMFIR_REJECT:
	case SMFIR_TEMPFAIL:
	case SMFIR_SKIP:
	case SMFIR_PROGRESS:
	case SMFIR_CONN_FAIL:
	case SMFIR_SHUTDOWN:
		return 0; /* libmilter sends no data; any is ignored */
	case SMFIC_OPTNEG:
		return parse_optneg(r, error_r);
	case SMFIR_REPLYCODE:
		return parse_replycode(r, error_r);
	case SMFIR_ADDHEADER:
		return parse_strs(r, false, 2, 0, error_r);
	case SMFIR_INSHEADER:
	case SMFIR_CHGHEADER:
		return parse_strs(r, true, 2, 0, error_r);
	case SMFIR_ADDRCPT:
	case SMFIR_DELRCPT:
		return parse_strs(r, false, 1, 0, error_r);
	case SMFIR_ADDRCPT_PAR:
	case SMFIR_CHGFROM:
		return parse_strs(r, false, 1, 1, error_r);
	case SMFIR_QUARANTINE:
		if (parse_strs(r, false, 1, 0, error_r) < 0)
			return -1;
		r->value = r->name;
		r->name = NULL;
		return 0;
	case SMFIR_REPLBODY:
		return 0;
	default:
		*error_r = "unknown reply";
		return -1;
	}
}

int milter_reply_parse(const unsigned char *p, size_t n, struct milter_reply *r, size_t *used_r,
		       const char **error_r)
{
	uint32_t len;

	memset(r, 0, sizeof(*r));
	if (n < 4)
		return 0;
	len = get_be32(p);
	if (len == 0 || len > MILTER_REPLY_MAX - 4) {
		*error_r = len == 0 ? "empty packet" : "packet too long";
		return -1;
	}
	if (n - 4 < len)
		return 0;
	r->cmd = (char)p[4];
	r->data = (const char *)p + 5;
	r->len = len - 1;
	if (parse_data(r, error_r) < 0)
		return -1;
	*used_r = (size_t)len + 4;
	return 1;
}

void milter_reply_lines(int code, const char *text, char *out, size_t size)
{
	const char *t = text + 3;
	size_t off = 0;

	out[0] = '\0';
	if (size < 8)
		return;
	for (;;) {
		t += strspn(t, " -");
		size_t n = strcspn(t, "\r\n");
		const char *next = t + n + strspn(t + n, "\r\n");
		bool esc = n >= 5 && t[0] == text[0] && t[1] == '.';
		bool last = *next == '\0';
		int w = snprintf(out + off, size - off, "%d%c%s%.*s%s", code, last ? ' ' : '-',
				 esc           ? ""
				 : code >= 500 ? "5.7.1 "
					       : "4.7.1 ",
				 (int)n, t, last ? "" : "\n");

		if (w < 0 || (size_t)w >= size - off) {
			/* too long: the lines that fit, the last of them made final */
			out[off > 0 ? off - 1 : 0] = '\0';
			char *l = strrchr(out, '\n');
			l = l != NULL ? l + 1 : out;
			if (strlen(l) > 3)
				l[3] = ' ';
			return;
		}
		if (last)
			return;
		off += (size_t)w;
		t = next;
		if (strncmp(t, text, 3) == 0) /* the next line repeats the code */
			t += 3;
	}
}

bool milter_symlist_has(const char *list, const char *name)
{
	struct str_view rest = str_view_of(list), f, want = str_view_of(name);

	if (want.len >= 2 && want.p[0] == '{' && want.p[want.len - 1] == '}') {
		want.p++;
		want.len -= 2;
	}
	while (str_split_ws(&rest, &f)) {
		if (f.len >= 2 && f.p[0] == '{' && f.p[f.len - 1] == '}') {
			f.p++;
			f.len -= 2;
		}
		if (f.len == want.len && memcmp(f.p, want.p, f.len) == 0)
			return true;
	}
	return false;
}

/* ---- [milter] lists ---- */

static int spec_address(struct milter_spec *m, struct str_view a, char **error_r)
{
	const char *colon;
	uint64_t port;

	m->text = xmemdup0(a.p, a.len);
	if (str_caseprefix(a.p, a.len, "unix:") && a.len > 5) {
		m->unix_path = true;
		m->host = xmemdup0(a.p + 5, a.len - 5);
		return 0;
	}
	size_t skip = str_caseprefix(a.p, a.len, "inet:")    ? 5
		      : str_caseprefix(a.p, a.len, "inet6:") ? 6
							     : 0;
	if (skip == 0)
		goto bad;
	a.p += skip;
	a.len -= skip;
	colon = a.len > 0 ? memrchr(a.p, ':', a.len) : NULL;
	if (colon == NULL || colon == a.p ||
	    str_to_u64(colon + 1, (size_t)(a.p + a.len - colon - 1), 65535, &port) < 0 ||
	    port == 0)
		goto bad;
	size_t hl = (size_t)(colon - a.p);
	if (a.p[0] == '[' && hl >= 2 && a.p[hl - 1] == ']')
		m->host = xmemdup0(a.p + 1, hl - 2);
	else
		m->host = xmemdup0(a.p, hl);
	m->port = (uint16_t)port;
	return 0;
bad:
	*error_r = xasprintf("bad milter \"%s\" (expected inet:HOST:PORT or unix:PATH)", m->text);
	return -1;
}

static int spec_option(struct milter_spec *m, struct str_view o, char **error_r)
{
	static const char *const names[] = { "connect_timeout", "command_timeout",
					     "content_timeout" };
	int64_t *fields[] = { &m->connect_ms, &m->command_ms, &m->content_ms };
	const char *eq = memchr(o.p, '=', o.len);
	size_t nl = eq != NULL ? (size_t)(eq - o.p) : o.len;
	struct str_view v = { eq != NULL ? eq + 1 : "", eq != NULL ? o.len - nl - 1 : 0 };

	for (size_t i = 0; i < 3; i++) {
		if (strlen(names[i]) == nl && memcmp(names[i], o.p, nl) == 0) {
			int64_t ms;

			if (str_to_duration_ms(v.p, v.len, &ms) < 0 || ms < 100 ||
			    ms > 3600 * 1000)
				break;
			*fields[i] = ms;
			return 0;
		}
	}
	if (nl == 14 && memcmp(o.p, "default_action", 14) == 0) {
		static const char *const acts[] = { "tempfail", "accept", "reject" };

		for (int i = 0; i < 3; i++) {
			if (v.len == strlen(acts[i]) && memcmp(v.p, acts[i], v.len) == 0) {
				m->default_action = (enum milter_action)i;
				return 0;
			}
		}
	}
	*error_r = xasprintf("milter %s: bad setting \"%.*s\" (connect_timeout, command_timeout, "
			     "content_timeout from 100ms to 1h; default_action = "
			     "tempfail|accept|reject)",
			     m->text, (int)o.len, o.p);
	return -1;
}

/* The next token of *rest: "{", "}", or a word ended by white space, a comma or a brace. */
static bool next_token(struct str_view *rest, struct str_view *tok)
{
	while (rest->len > 0 && strchr(" \t\r\n,", rest->p[0]) != NULL) {
		rest->p++;
		rest->len--;
	}
	if (rest->len == 0)
		return false;
	size_t n = 1;
	if (rest->p[0] != '{' && rest->p[0] != '}')
		while (n < rest->len && strchr(" \t\r\n,{}", rest->p[n]) == NULL)
			n++;
	tok->p = rest->p;
	tok->len = n;
	rest->p += n;
	rest->len -= n;
	return true;
}

int milter_specs_parse(const char *text, const struct milter_defaults *d,
		       struct milter_spec **specs_r, size_t *n_r, char **error_r)
{
	struct str_view rest = str_view_of(text), tok;
	struct milter_spec *v = NULL, *m;
	size_t n = 0;
	int group = 0; /* 1: inside braces, before the address; 2: after it */

	while (next_token(&rest, &tok)) {
		if (tok.p[0] == '{' || tok.p[0] == '}') {
			if ((tok.p[0] == '{') != (group == 0) || group == 1) {
				*error_r = xasprintf("milter list: misplaced \"%c\"", tok.p[0]);
				goto fail;
			}
			group = tok.p[0] == '{' ? 1 : 0;
			continue;
		}
		if (group == 2) {
			if (spec_option(&v[n - 1], tok, error_r) < 0)
				goto fail;
			continue;
		}
		v = xreallocarray(v, n + 1, sizeof(*v));
		m = &v[n++];
		memset(m, 0, sizeof(*m));
		m->connect_ms = d->connect_ms;
		m->command_ms = d->command_ms;
		m->content_ms = d->content_ms;
		m->default_action = d->default_action;
		if (spec_address(m, tok, error_r) < 0)
			goto fail;
		group = group == 1 ? 2 : 0;
	}
	if (group != 0) {
		*error_r = xstrdup("milter list: \"{\" without \"}\" or address");
		goto fail;
	}
	*specs_r = v;
	*n_r = n;
	return 0;
fail:
	milter_specs_free(&v, n);
	return -1;
}

void milter_specs_free(struct milter_spec **specs, size_t n)
{
	if (*specs == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		free((*specs)[i].text);
		free((*specs)[i].host);
	}
	free(*specs);
	*specs = NULL;
}
