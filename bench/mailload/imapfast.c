/* imapfast.c — owns bench/mailload's fast IMAP responder: one thread, epoll, an in-memory
 * store of users, folders and messages (UID, flags, size; the text of a message is made from
 * its UID and size when it is fetched), so that one mailload agent's IMAP sessions can be
 * driven at the full profile's session rate of 1,000,000 users without a real server on the
 * same two cores being what saturates. Not a mail server: any login is accepted, a user and a
 * folder exist from their first use (a new folder holds a few messages, every SELECT of INBOX
 * delivers one more), and it speaks only the RFC 3501 subset mailload uses, consistently
 * (UIDVALIDITY fixed, UIDs ascending, EXPUNGE and flags kept), so mailload's model of each
 * mailbox finds no contradiction. Bad input gets BAD; a line is at most 64 KiB and a literal
 * at most 8 MiB (then the connection is closed).
 *
 *   imapfast HOST:PORT      prints "ready" when listening; on SIGTERM/SIGINT its counts
 *
 * Built by bench/mailload/bench.py (cc -O2); not part of the Heron build. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define LINE_MAX_BYTES 65536
#define LITERAL_MAX (8u << 20)
#define NAME_MAX_BYTES 64
#define FOLDERS_MAX 64
#define NEW_FOLDER_MSGS 10
#define NEW_INBOX_MSGS 20
#define USERS_HASH (1u << 21)

struct msg {
	uint32_t uid, size;
	uint8_t flags;
};

enum { F_SEEN = 1, F_DELETED = 2, F_ANSWERED = 4, F_FLAGGED = 8, F_DRAFT = 16 };
static const char *const flag_names[] = { "\\Seen", "\\Deleted", "\\Answered", "\\Flagged",
					  "\\Draft" };

struct folder {
	char name[NAME_MAX_BYTES];
	uint32_t uidnext, n, cap;
	bool sub;
	struct msg *m;
};

struct user {
	char *login;
	uint32_t id, nf;
	struct folder *f;
};

struct conn {
	int fd;
	struct user *u;
	struct folder *sel;
	bool idle, closing;
	char in[LINE_MAX_BYTES + 2];
	size_t inlen;
	char *out;
	size_t outlen, outcap, outoff;
	/* APPEND: literal bytes still to take, then the end of its line */
	uint64_t lit_left;
	bool lit_after;
	uint32_t lit_size;
	uint8_t lit_flags;
	struct folder *lit_folder;
	char lit_tag[64];
};

static struct user **users;
static uint32_t nusers;
static uint64_t n_conns, n_cmds, n_bad;
static volatile sig_atomic_t stop;
static int epfd;

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL) {
		fprintf(stderr, "imapfast: out of memory\n");
		exit(1);
	}
	return p;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (p == NULL) {
		fprintf(stderr, "imapfast: out of memory\n");
		exit(1);
	}
	return p;
}

/* ---- output ---- */

static void out_add(struct conn *c, const void *p, size_t n)
{
	if (c->outlen + n > c->outcap) {
		c->outcap = (c->outlen + n) * 2 + 4096;
		c->out = xrealloc(c->out, c->outcap);
	}
	memcpy(c->out + c->outlen, p, n);
	c->outlen += n;
}

static void out_str(struct conn *c, const char *s)
{
	out_add(c, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void out_fmt(struct conn *c, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		out_add(c, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* ---- the store ---- */

static uint32_t hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static uint32_t msg_size(uint32_t uid)
{
	return 2500 + (uid * 7919u) % 3000;
}

static void folder_add(struct folder *f, uint32_t size, uint8_t flags)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 16;
		f->m = xrealloc(f->m, f->cap * sizeof(*f->m));
	}
	f->m[f->n++] = (struct msg){ .uid = f->uidnext++, .size = size, .flags = flags };
}

static struct folder *folder_get(struct user *u, const char *name, bool create)
{
	bool inbox = strcasecmp(name, "INBOX") == 0;

	for (uint32_t i = 0; i < u->nf; i++)
		if (inbox ? strcasecmp(u->f[i].name, "INBOX") == 0
			  : strcmp(u->f[i].name, name) == 0)
			return &u->f[i];
	if (!create || u->nf >= FOLDERS_MAX || strlen(name) >= NAME_MAX_BYTES)
		return NULL;
	u->f = xrealloc(u->f, (u->nf + 1) * sizeof(*u->f));
	struct folder *f = &u->f[u->nf++];
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", inbox ? "INBOX" : name);
	f->uidnext = 1;
	for (uint32_t i = 0, k = inbox ? NEW_INBOX_MSGS : NEW_FOLDER_MSGS; i < k; i++)
		folder_add(f, msg_size(f->uidnext), i % 10 < 7 ? F_SEEN : 0);
	return f;
}

static struct user *user_get(const char *login)
{
	uint32_t h = hash(login) & (USERS_HASH - 1);

	while (users[h] != NULL) {
		if (strcmp(users[h]->login, login) == 0)
			return users[h];
		h = (h + 1) & (USERS_HASH - 1);
	}
	if (nusers >= USERS_HASH / 2)
		return NULL;
	struct user *u = xmalloc(sizeof(*u));
	u->login = strdup(login);
	if (u->login == NULL)
		exit(1);
	u->id = ++nusers;
	u->nf = 0;
	u->f = NULL;
	users[h] = u;
	folder_get(u, "INBOX", true);
	return u;
}

/* ---- parsing ---- */

/* An astring (atom or quoted string without escapes beyond \\ and \") at *p into out;
   advances *p past it and one space. false when malformed or too long. */
static bool astring(const char **p, char *out, size_t n)
{
	const char *s = *p;
	size_t k = 0;

	if (*s == '"') {
		for (s++; *s != '"'; s++) {
			if (*s == '\0')
				return false;
			if (*s == '\\' && (s[1] == '"' || s[1] == '\\'))
				s++;
			if (k + 1 >= n)
				return false;
			out[k++] = *s;
		}
		s++;
	} else {
		while (*s != '\0' && *s != ' ' && *s != '(' && *s != ')' && *s != '{') {
			if (k + 1 >= n)
				return false;
			out[k++] = *s++;
		}
		if (k == 0)
			return false;
	}
	out[k] = '\0';
	if (*s == ' ')
		s++;
	*p = s;
	return true;
}

static uint8_t flags_parse(const char *s)
{
	uint8_t f = 0;

	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++) {
		size_t l = strlen(flag_names[i]);
		for (const char *q = s; (q = strcasestr(q, flag_names[i])) != NULL; q += l)
			if (q[l] == ' ' || q[l] == ')' || q[l] == '\0')
				f |= (uint8_t)(1u << i);
	}
	return f;
}

static void flags_out(struct conn *c, uint8_t f)
{
	bool first = true;

	out_add(c, "FLAGS (", 7);
	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (f & (1u << i)) {
			if (!first)
				out_add(c, " ", 1);
			out_add(c, flag_names[i], strlen(flag_names[i]));
			first = false;
		}
	out_add(c, ")", 1);
}

/* One seq-number of a set at *p ("*" = star) into *v, *p moved past it. -1: malformed. */
static int set_number(const char **p, uint32_t star, uint32_t *v)
{
	unsigned long x;
	char *e;

	if (**p == '*') {
		*v = star;
		(*p)++;
		return 0;
	}
	x = strtoul(*p, &e, 10);
	if (e == *p || x == 0 || x > UINT32_MAX)
		return -1;
	*v = (uint32_t)x;
	*p = e;
	return 0;
}

/* Whether v is in the sequence set (ranges a:b, "*" = star). -1: malformed. */
static int in_set(const char *set, uint32_t v, uint32_t star)
{
	const char *p = set;

	while (*p != '\0') {
		uint32_t a, b;

		if (set_number(&p, star, &a) < 0)
			return -1;
		b = a;
		if (*p == ':') {
			p++;
			if (set_number(&p, star, &b) < 0)
				return -1;
		}
		if (a > b) {
			uint32_t t = a;
			a = b;
			b = t;
		}
		if (v >= a && v <= b)
			return 1;
		if (*p == ',')
			p++;
		else if (*p != '\0')
			return -1;
	}
	return 0;
}

/* ---- a message's text ---- */

static size_t msg_header(const struct conn *c, const struct msg *m, char *out, size_t n)
{
	int k = snprintf(out, n,
			 "From: <sender%u@ext.heron.test>\r\nTo: <%s@heron.test>\r\n"
			 "Subject: message %u\r\nDate: Thu, 01 Jan 2026 00:00:00 +0000\r\n"
			 "Message-ID: <%u.%u@imapfast>\r\n\r\n",
			 m->uid % 97, c->u->login, m->uid, c->u->id, m->uid);
	return k > 0 && (size_t)k < n ? (size_t)k : 0;
}

static void msg_body_out(struct conn *c, const struct msg *m)
{
	char hdr[512], line[80];
	size_t hl = msg_header(c, m, hdr, sizeof(hdr)), left = m->size;

	out_fmt(c, "{%u}\r\n", m->size);
	if (hl > left)
		hl = left;
	out_add(c, hdr, hl);
	left -= hl;
	memset(line, 'x', sizeof(line));
	line[78] = '\r';
	line[79] = '\n';
	while (left > 0) {
		size_t k = left < sizeof(line) ? left : sizeof(line);
		out_add(c, line, k);
		left -= k;
	}
}

/* ---- commands ---- */

static void fetch_one(struct conn *c, uint32_t seq, struct msg *m, const char *items,
		      const char *section, bool uid_cmd)
{
	bool body = strstr(items, "BODY[]") != NULL, peek = strstr(items, "BODY.PEEK[]") != NULL;
	bool sp = false;

	if (body && !(m->flags & F_SEEN))
		m->flags |= F_SEEN;
	out_fmt(c, "* %u FETCH (", seq);
#define SEP()                               \
	do {                                \
		if (sp)                     \
			out_add(c, " ", 1); \
		sp = true;                  \
	} while (0)
	if (uid_cmd || strstr(items, "UID") != NULL) {
		SEP();
		out_fmt(c, "UID %u", m->uid);
	}
	if (strstr(items, "FLAGS") != NULL) {
		SEP();
		flags_out(c, m->flags);
	}
	if (strstr(items, "RFC822.SIZE") != NULL) {
		SEP();
		out_fmt(c, "RFC822.SIZE %u", m->size);
	}
	if (strstr(items, "INTERNALDATE") != NULL) {
		SEP();
		out_str(c, "INTERNALDATE \"01-Jan-2026 00:00:00 +0000\"");
	}
	if (strstr(items, "ENVELOPE") != NULL) {
		SEP();
		out_fmt(c,
			"ENVELOPE (\"Thu, 01 Jan 2026 00:00:00 +0000\" \"message %u\" NIL NIL "
			"NIL NIL NIL NIL NIL \"<%u.%u@imapfast>\")",
			m->uid, c->u->id, m->uid);
	}
	if (section[0] != '\0') {
		char hdr[512];
		size_t hl = msg_header(c, m, hdr, sizeof(hdr));
		SEP();
		out_fmt(c, "BODY[%s] {%zu}\r\n", section, hl);
		out_add(c, hdr, hl);
	}
	if (body || peek) {
		SEP();
		out_add(c, "BODY[] ", 7);
		msg_body_out(c, m);
	}
#undef SEP
	out_add(c, ")\r\n", 3);
}

/* FETCH/STORE over seqs or UIDs: calls fn on each message of the set. -1: malformed set. */
static int each(struct conn *c, const char *set, bool uid_cmd,
		void (*fn)(struct conn *, uint32_t, struct msg *, void *), void *arg)
{
	struct folder *f = c->sel;
	uint32_t star = f->n == 0 ? 0 : uid_cmd ? f->m[f->n - 1].uid : f->n;

	if (in_set(set, 1, star > 0 ? star : 1) < 0)
		return -1;
	for (uint32_t i = 0; i < f->n; i++)
		if (in_set(set, uid_cmd ? f->m[i].uid : i + 1, star) == 1)
			fn(c, i + 1, &f->m[i], arg);
	return 0;
}

struct fetch_arg {
	const char *items, *section;
	bool uid_cmd;
};

static void fetch_cb(struct conn *c, uint32_t seq, struct msg *m, void *arg)
{
	struct fetch_arg *a = arg;
	fetch_one(c, seq, m, a->items, a->section, a->uid_cmd);
}

struct store_arg {
	uint8_t flags;
	int mode; /* +1 add, -1 remove, 0 replace */
	bool silent, uid_cmd;
};

static void store_cb(struct conn *c, uint32_t seq, struct msg *m, void *arg)
{
	struct store_arg *a = arg;

	m->flags = a->mode > 0   ? m->flags | a->flags
		   : a->mode < 0 ? m->flags & (uint8_t)~a->flags
				 : a->flags;
	if (a->silent)
		return;
	out_fmt(c, "* %u FETCH (", seq);
	flags_out(c, m->flags);
	if (a->uid_cmd)
		out_fmt(c, " UID %u", m->uid);
	out_add(c, ")\r\n", 3);
}

static void cmd_fetch(struct conn *c, const char *tag, const char *args, bool uid_cmd)
{
	char set[256], items[1024], section[512] = "";
	const char *p = args;

	if (!astring(&p, set, sizeof(set)) || strlen(p) >= sizeof(items))
		return out_fmt(c, "%s BAD FETCH: sequence set and items expected\r\n", tag);
	/* items in upper case, the bracketed section kept apart so its header names are not
	   taken for items */
	size_t k = 0;
	for (const char *q = p; *q != '\0'; q++) {
		if (*q == '[' && q[1] != ']') {
			const char *e = strchr(q, ']');
			if (e == NULL || (size_t)(e - q - 1) >= sizeof(section))
				return out_fmt(c, "%s BAD FETCH: bad section\r\n", tag);
			memcpy(section, q + 1, (size_t)(e - q - 1));
			section[e - q - 1] = '\0';
			items[k++] = '[';
			q = e;
			continue;
		}
		items[k++] = (char)(*q >= 'a' && *q <= 'z' ? *q - 32 : *q);
	}
	items[k] = '\0';
	struct fetch_arg a = { items, section, uid_cmd };
	if (each(c, set, uid_cmd, fetch_cb, &a) < 0)
		return out_fmt(c, "%s BAD FETCH: bad sequence set\r\n", tag);
	out_fmt(c, "%s OK FETCH completed\r\n", tag);
}

static void cmd_store(struct conn *c, const char *tag, const char *args, bool uid_cmd)
{
	char set[256], what[32];
	const char *p = args;
	struct store_arg a = { 0 };

	if (!astring(&p, set, sizeof(set)) || !astring(&p, what, sizeof(what)))
		return out_fmt(c, "%s BAD STORE: sequence set and item expected\r\n", tag);
	a.mode = what[0] == '+' ? 1 : what[0] == '-' ? -1 : 0;
	const char *w = what + (a.mode != 0);
	if (strncasecmp(w, "FLAGS", 5) != 0 || (w[5] != '\0' && strcasecmp(w + 5, ".SILENT") != 0))
		return out_fmt(c, "%s BAD STORE: FLAGS expected\r\n", tag);
	a.silent = w[5] != '\0';
	a.flags = flags_parse(p);
	a.uid_cmd = uid_cmd;
	if (each(c, set, uid_cmd, store_cb, &a) < 0)
		return out_fmt(c, "%s BAD STORE: bad sequence set\r\n", tag);
	out_fmt(c, "%s OK STORE completed\r\n", tag);
}

static void cmd_expunge(struct conn *c, const char *tag)
{
	struct folder *f = c->sel;
	uint32_t j = 0;

	for (uint32_t i = 0; i < f->n; i++) {
		if (f->m[i].flags & F_DELETED)
			out_fmt(c, "* %u EXPUNGE\r\n", j + 1); /* the seq as it is now */
		else
			f->m[j++] = f->m[i];
	}
	f->n = j;
	out_fmt(c, "%s OK EXPUNGE completed\r\n", tag);
}

/* The mailbox named next at *p, made if new; NULL after the BAD or NO it answered tag with. */
static struct folder *folder_arg(struct conn *c, const char *tag, const char **p)
{
	char name[NAME_MAX_BYTES];
	struct folder *f;

	if (!astring(p, name, sizeof(name))) {
		out_fmt(c, "%s BAD mailbox name expected\r\n", tag);
		return NULL;
	}
	if ((f = folder_get(c->u, name, true)) == NULL)
		out_fmt(c, "%s NO [LIMIT] too many folders\r\n", tag);
	return f;
}

static void cmd_select(struct conn *c, const char *tag, const char *args, bool examine)
{
	const char *p = args;
	struct folder *f;

	c->sel = NULL;
	if ((f = folder_arg(c, tag, &p)) == NULL)
		return;
	if (!examine && strcmp(f->name, "INBOX") == 0)
		folder_add(f, msg_size(f->uidnext), 0); /* a delivery since the last look */
	c->sel = f;
	out_fmt(c,
		"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)\r\n"
		"* %u EXISTS\r\n* 0 RECENT\r\n* OK [UIDVALIDITY %u] UIDs valid\r\n"
		"* OK [UIDNEXT %u] next UID\r\n%s OK [%s] %s completed\r\n",
		f->n, 1000 + (uint32_t)(f - c->u->f), f->uidnext, tag,
		examine ? "READ-ONLY" : "READ-WRITE", examine ? "EXAMINE" : "SELECT");
}

static void cmd_list(struct conn *c, const char *tag, bool lsub)
{
	for (uint32_t i = 0; i < c->u->nf; i++)
		if (!lsub || c->u->f[i].sub || i == 0)
			out_fmt(c, "* %s () \"/\" \"%s\"\r\n", lsub ? "LSUB" : "LIST",
				c->u->f[i].name);
	out_fmt(c, "%s OK %s completed\r\n", tag, lsub ? "LSUB" : "LIST");
}

static void cmd_append(struct conn *c, const char *tag, const char *args)
{
	char name[NAME_MAX_BYTES];
	const char *p = args, *lb;
	char *e;

	if (!astring(&p, name, sizeof(name)) || (lb = strrchr(p, '{')) == NULL)
		return out_fmt(c, "%s BAD APPEND: mailbox and literal expected\r\n", tag);
	unsigned long n = strtoul(lb + 1, &e, 10);
	bool sync = *e == '}';
	if (e == lb + 1 || (!sync && !(e[0] == '+' && e[1] == '}')) || e[sync ? 1 : 2] != '\0')
		return out_fmt(c, "%s BAD APPEND: literal expected\r\n", tag);
	if (n > LITERAL_MAX) {
		out_fmt(c, "%s NO [TOOBIG] message too large\r\n", tag);
		c->closing = !sync; /* its bytes follow anyway: no way to skip them here */
		return;
	}
	struct folder *f = folder_get(c->u, name, true);
	if (f == NULL)
		return out_fmt(c, "%s NO [LIMIT] too many folders\r\n", tag);
	c->lit_folder = f;
	c->lit_flags = flags_parse(p);
	c->lit_left = n;
	c->lit_size = (uint32_t)n;
	c->lit_after = true;
	snprintf(c->lit_tag, sizeof(c->lit_tag), "%s", tag);
	if (sync)
		out_str(c, "+ Ready for literal data\r\n");
}

static void command(struct conn *c, char *line)
{
	char tag[64], cmd[32];
	const char *p = line;
	bool uid_cmd = false;

	n_cmds++;
	if (c->lit_after) { /* the rest of an APPEND's line after its literal */
		c->lit_after = false;
		if (line[0] != '\0')
			return out_fmt(c, "%s BAD APPEND: unexpected data after the literal\r\n",
				       c->lit_tag);
		struct folder *f = c->lit_folder;
		folder_add(f, c->lit_size, c->lit_flags);
		return out_fmt(c, "%s OK [APPENDUID %u %u] APPEND completed\r\n", c->lit_tag,
			       1000 + (uint32_t)(f - c->u->f), f->uidnext - 1);
	}
	if (c->idle) {
		c->idle = false;
		if (strcasecmp(line, "DONE") != 0)
			return out_str(c, "* BAD DONE expected\r\n");
		return out_fmt(c, "%s OK IDLE terminated\r\n", c->lit_tag);
	}
	if (!astring(&p, tag, sizeof(tag)) || !astring(&p, cmd, sizeof(cmd))) {
		n_bad++;
		return out_str(c, "* BAD tag and command expected\r\n");
	}
	if (strcasecmp(cmd, "UID") == 0) {
		uid_cmd = true;
		if (!astring(&p, cmd, sizeof(cmd)))
			return out_fmt(c, "%s BAD UID: command expected\r\n", tag);
	}
	if (strcasecmp(cmd, "CAPABILITY") == 0)
		return out_fmt(c,
			       "* CAPABILITY IMAP4rev1 IDLE ID LITERAL+ UIDPLUS\r\n"
			       "%s OK CAPABILITY completed\r\n",
			       tag);
	if (strcasecmp(cmd, "NOOP") == 0)
		return out_fmt(c, "%s OK NOOP completed\r\n", tag);
	if (strcasecmp(cmd, "LOGOUT") == 0) {
		c->closing = true;
		return out_fmt(c, "* BYE logging out\r\n%s OK LOGOUT completed\r\n", tag);
	}
	if (strcasecmp(cmd, "ID") == 0)
		return out_fmt(c, "* ID (\"name\" \"imapfast\")\r\n%s OK ID completed\r\n", tag);
	if (c->u == NULL) {
		char login[128], pw[128];
		if (strcasecmp(cmd, "LOGIN") != 0)
			return out_fmt(c, "%s BAD LOGIN first\r\n", tag);
		if (!astring(&p, login, sizeof(login)) || !astring(&p, pw, sizeof(pw)))
			return out_fmt(c, "%s BAD LOGIN: user and password expected\r\n", tag);
		if ((c->u = user_get(login)) == NULL)
			return out_fmt(c, "%s NO [LIMIT] too many users\r\n", tag);
		return out_fmt(c, "%s OK LOGIN completed\r\n", tag);
	}
	if (strcasecmp(cmd, "SELECT") == 0 || strcasecmp(cmd, "EXAMINE") == 0)
		return cmd_select(c, tag, p, strcasecmp(cmd, "EXAMINE") == 0);
	if (strcasecmp(cmd, "LIST") == 0 || strcasecmp(cmd, "LSUB") == 0)
		return cmd_list(c, tag, strcasecmp(cmd, "LSUB") == 0);
	if (strcasecmp(cmd, "CREATE") == 0 || strcasecmp(cmd, "SUBSCRIBE") == 0) {
		struct folder *f = folder_arg(c, tag, &p);
		if (f == NULL)
			return;
		f->sub |= strcasecmp(cmd, "SUBSCRIBE") == 0;
		return out_fmt(c, "%s OK %s completed\r\n", tag, cmd);
	}
	if (strcasecmp(cmd, "STATUS") == 0) {
		struct folder *f = folder_arg(c, tag, &p);
		if (f == NULL)
			return;
		return out_fmt(c, "* STATUS \"%s\" (MESSAGES %u)\r\n%s OK STATUS completed\r\n",
			       f->name, f->n, tag);
	}
	if (strcasecmp(cmd, "APPEND") == 0)
		return cmd_append(c, tag, p);
	if (strcasecmp(cmd, "IDLE") == 0) {
		c->idle = true;
		snprintf(c->lit_tag, sizeof(c->lit_tag), "%s", tag);
		return out_str(c, "+ idling\r\n");
	}
	if (c->sel == NULL)
		return out_fmt(c, "%s BAD %s: no mailbox selected\r\n", tag, cmd);
	if (strcasecmp(cmd, "FETCH") == 0)
		return cmd_fetch(c, tag, p, uid_cmd);
	if (strcasecmp(cmd, "STORE") == 0)
		return cmd_store(c, tag, p, uid_cmd);
	if (strcasecmp(cmd, "EXPUNGE") == 0 && !uid_cmd)
		return cmd_expunge(c, tag);
	if (strcasecmp(cmd, "CLOSE") == 0) {
		c->sel = NULL;
		return out_fmt(c, "%s OK CLOSE completed\r\n", tag);
	}
	n_bad++;
	out_fmt(c, "%s BAD unknown command\r\n", tag);
}

/* ---- the connections ---- */

static void conn_close(struct conn *c)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->out);
	free(c);
}

/* Writes what it can; false when the connection is gone. */
static bool conn_flush(struct conn *c)
{
	while (c->outoff < c->outlen) {
		ssize_t n = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0)
			return false;
		c->outoff += (size_t)n;
	}
	if (c->outoff == c->outlen)
		c->outoff = c->outlen = 0;
	struct epoll_event ev = { .events = EPOLLIN | (c->outlen ? EPOLLOUT : 0), .data.ptr = c };
	epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
	return !(c->closing && c->outlen == 0);
}

/* Takes the commands in c->in; false when the connection must close. */
static bool conn_input(struct conn *c)
{
	size_t off = 0;

	while (off < c->inlen && !c->closing) {
		if (c->lit_left > 0) {
			size_t k = c->inlen - off < c->lit_left ? c->inlen - off : c->lit_left;
			off += k;
			c->lit_left -= k;
			continue;
		}
		char *s = c->in + off, *nl = memchr(s, '\n', c->inlen - off);
		if (nl == NULL)
			break;
		*nl = '\0';
		if (nl > s && nl[-1] == '\r')
			nl[-1] = '\0';
		off = (size_t)(nl - c->in) + 1;
		command(c, s);
	}
	memmove(c->in, c->in + off, c->inlen - off);
	c->inlen -= off;
	if (c->inlen >= LINE_MAX_BYTES && c->lit_left == 0) {
		out_str(c, "* BYE line too long\r\n");
		c->closing = true;
	}
	return true;
}

static void conn_read(struct conn *c)
{
	for (;;) {
		ssize_t n = read(c->fd, c->in + c->inlen, LINE_MAX_BYTES - c->inlen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0)
			return conn_close(c);
		c->inlen += (size_t)n;
		conn_input(c);
		if (c->closing || c->inlen >= LINE_MAX_BYTES)
			break;
	}
	if (!conn_flush(c))
		conn_close(c);
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char host[64];
	unsigned port;
	struct rlimit rl;

	if (argc != 2 || sscanf(argv[1], "%63[^:]:%u", host, &port) != 2 || port > 65535 ||
	    inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "usage: imapfast HOST:PORT\n");
		return 2;
	}
	sa.sin_port = htons((uint16_t)port);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	struct sigaction act = { .sa_handler = on_signal };
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	users = calloc(USERS_HASH, sizeof(*users));
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (users == NULL || ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(ls, 4096) != 0) {
		perror("imapfast: listen");
		return 1;
	}
	epfd = epoll_create1(0);
	struct epoll_event lev = { .events = EPOLLIN, .data.ptr = NULL };
	epoll_ctl(epfd, EPOLL_CTL_ADD, ls, &lev);
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		struct epoll_event evs[256];
		int n = epoll_wait(epfd, evs, 256, 1000);
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (c == NULL) {
				int fd;
				while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
						   sizeof(one));
					c = calloc(1, sizeof(*c));
					if (c == NULL) {
						close(fd);
						continue;
					}
					c->fd = fd;
					n_conns++;
					struct epoll_event ev = { .events = EPOLLIN,
								  .data.ptr = c };
					epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
					out_str(c, "* OK [CAPABILITY IMAP4rev1 IDLE ID LITERAL+ "
						   "UIDPLUS] imapfast ready\r\n");
					if (!conn_flush(c))
						conn_close(c);
				}
				continue;
			}
			if (evs[i].events & (EPOLLERR | EPOLLHUP) && !(evs[i].events & EPOLLIN)) {
				conn_close(c);
				continue;
			}
			if (evs[i].events & EPOLLIN)
				conn_read(c);
			else if (!conn_flush(c))
				conn_close(c);
		}
	}
	fprintf(stderr,
		"imapfast: %" PRIu64 " connections, %" PRIu64 " commands (%" PRIu64
		" bad), %u users\n",
		n_conns, n_cmds, n_bad, nusers);
	return 0;
}
