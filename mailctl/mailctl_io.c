/* mailctl_io.c — owns `mailctl import` and `mailctl export`: mbox (mboxrd) and Maildir, with
 * flags, keywords and dates, streamed (no message is held whole in memory).
 *
 * Stored messages have CRLF line ends. The conversions are chosen so that import → export →
 * import gives byte-identical messages:
 * - mbox export writes mboxrd: "From MAILER-DAEMON <asctime UTC>", every CRLF as LF, lines
 *   matching ^>*From_ get one more '>', flags as Status/X-Status/X-Keywords at the end of the
 *   header, a blank line after each message. mbox import reads the line ends of the file's
 *   first From_ line: LF files keep every line's bytes and end it with CRLF; CRLF files take
 *   CRLF (or LF) as the line end. A From_ line separates messages at the start of the file
 *   or after a blank line. It removes one '>' from ^>+From_, drops the blank line before
 *   each From_, reads and removes Status, X-Status, X-Keywords, X-UID, X-IMAP and
 *   X-IMAPbase headers, and ends the last line with CRLF.
 * - Maildir export writes the stored bytes as they are (CRLF), flags in the ":2," info
 *   (D F R S T, keywords as a..z listed in dovecot-keywords), the internal date as mtime,
 *   and dovecot-uidlist with UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ and each UID with its
 *   MODSEQ; Maildir import into a mailbox that never held a message restores them
 *   (store_mbox_restore_uids, store_msg_restore_modseq, store_mbox_restore_modseq). The
 *   mailbox's annotations go to heron-metadata, the user's server ones to
 *   heron-server-metadata ("ENTRY HEX" lines), the special-use attributes of a whole user's
 *   mailboxes to heron-special-use ("MASK NAME" lines), and come back on import.
 *   The user's Sieve vacation and duplicate memories that have not expired go to
 *   heron-sieve-memory ("KIND HASH UNTIL" lines: V or D, the key's 64-bit hash in 16 hex
 *   digits, the expiry in Unix seconds); an import checks the whole file before any mail
 *   and restores them, expiry kept, after the mail (those expired by then are dropped).
 *   Maildir import turns a LF not preceded by CR into CRLF (a no-op on CRLF files). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailctl/mailctl.h"
#include "store/store_sieve.h"

#define RD_SIZE 65536
#define BATCH 64             /* messages appended per index transaction */
#define MAX_MSG_KWS 32       /* keywords kept per imported message */
#define HDR_VALUE_MAX 4096   /* bytes kept of a flag header's value */
#define MAILDIR_KWS 26       /* keyword letters a..z */
#define FOLDER_PATH_MAX 8192 /* a Maildir++ folder's path, dir and escaped name */
#define MEM_FILE "heron-sieve-memory"
#define MEM_MAX 1048576 /* Sieve memories carried per user (export and import) */
#define MEM_LINE_MAX 64 /* bytes of a heron-sieve-memory line ("V" 16 hex, until: 39) */
#define MEM_BATCH 4096  /* memories restored per transaction */

/* A line reader with a bounded buffer: a line longer than RD_SIZE comes in pieces. */
struct rd {
	int fd;
	char buf[RD_SIZE];
	size_t start, end;
	bool eof;
};

/* A buffered writer into a blob (or a file when b is NULL). */
struct wr {
	struct store_blob *b;
	int fd;
	char buf[RD_SIZE];
	size_t len;
	int err; /* store error (blob) or errno (file) */
	uint64_t bytes;
};

struct pending {
	struct store_blob *b;
	unsigned flags;
	int64_t date;
	char *kws[MAX_MSG_KWS];
	size_t nkws;
	uint32_t uid;    /* the UID it had in the export, 0: the next one */
	uint64_t modseq; /* its MODSEQ there (kept with the UIDs), 0: a new one */
};

struct imp {
	struct mc *mc;
	const char *user, *mailbox, *path;
	unsigned part;
	struct pending batch[BATCH];
	size_t n;
	uint64_t count, bytes;
	uint32_t first_uid, last_uid;
	char *kwletters[MAILDIR_KWS]; /* Maildir: dovecot-keywords */
	unsigned nboxes;              /* Maildir++ folders imported */
	unsigned nscripts;            /* Sieve scripts imported (heron-sieve) */
	uint64_t nmems;               /* Sieve memories restored (heron-sieve-memory) */
	/* an export's UIDVALIDITY and UIDNEXT (dovecot-uidlist's header), kept when the
	   mailbox imported into never held a message */
	uint32_t uidvalidity, uidnext;
	uint64_t highestmodseq; /* its HIGHESTMODSEQ (the header's M), 0: not given */
	bool keep_uids;
};

/* ------------------------------------------------------------------------------------- */
/* Reading and writing */

/* Next piece of a line: 1 (*complete: the LF was seen and is not in the piece), 0 at EOF,
   -1 on a read error (errno). */
static int rd_piece(struct rd *r, const char **p, size_t *len, bool *complete)
{
	for (;;) {
		char *nl = memchr(r->buf + r->start, '\n', r->end - r->start);
		size_t have = r->end - r->start;
		ssize_t n;

		if (nl != NULL || (r->eof && have > 0) || have == RD_SIZE) {
			*p = r->buf + r->start;
			*complete = nl != NULL;
			*len = nl != NULL ? (size_t)(nl - *p) : have;
			if (nl == NULL && !r->eof && *len > 1 && (*p)[*len - 1] == '\r')
				(*len)--; /* keep a CR with the LF that may follow */
			r->start += *len + (nl != NULL);
			return 1;
		}
		if (r->eof)
			return 0;
		memmove(r->buf, r->buf + r->start, have);
		r->start = 0;
		r->end = have;
		n = read(r->fd, r->buf + r->end, RD_SIZE - r->end);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		r->eof = n == 0;
		r->end += (size_t)n;
	}
}

static void wr_flush(struct wr *w)
{
	size_t off = 0;

	if (w->err == 0 && w->len > 0 && w->b != NULL)
		w->err = store_blob_write(w->b, w->buf, w->len);
	while (w->err == 0 && w->b == NULL && off < w->len) {
		ssize_t n = write(w->fd, w->buf + off, w->len - off);

		if (n < 0 && errno != EINTR)
			w->err = errno;
		off += n > 0 ? (size_t)n : 0;
	}
	w->len = 0;
}

static void wr_put(struct wr *w, const void *p, size_t n)
{
	w->bytes += n;
	while (n > 0 && w->err == 0) {
		size_t k = sizeof(w->buf) - w->len < n ? sizeof(w->buf) - w->len : n;

		memcpy(w->buf + w->len, p, k);
		w->len += k;
		p = (const char *)p + k;
		n -= k;
		if (w->len == sizeof(w->buf))
			wr_flush(w);
	}
}

/* ------------------------------------------------------------------------------------- */
/* Appending imported messages, BATCH per transaction */

static void pending_clear(struct pending *pm)
{
	store_blob_free(&pm->b);
	for (size_t i = 0; i < pm->nkws; i++)
		free(pm->kws[i]);
	memset(pm, 0, sizeof(*pm));
}

/* The mailbox being imported into. */
static int imp_mbox(struct store_txn *t, const struct imp *im, uint64_t *mbox_r)
{
	struct store_user u;
	int rc;

	if ((rc = store_user_get(t, im->user, &u)) != 0)
		return rc;
	return store_mbox_find(t, u.id, im->mailbox, mbox_r);
}

static int w_append(struct store_txn *t, void *arg)
{
	struct imp *im = arg;
	uint64_t mbox;
	int rc;

	if ((rc = imp_mbox(t, im, &mbox)) != 0)
		return rc;
	for (size_t i = 0; i < im->n; i++) {
		struct pending *pm = &im->batch[i];
		uint64_t kws = 0;
		unsigned idx;
		uint32_t uid;

		for (size_t k = 0; k < pm->nkws; k++) {
			if ((rc = store_mbox_keyword(t, mbox, pm->kws[k], true, &idx)) == 0)
				kws |= (uint64_t)1 << idx;
			else if (rc != STORE_EINVAL && rc != STORE_EKEYWORDS)
				return rc; /* a bad or excess keyword is dropped, not fatal */
		}
		/* the export's UID: the next one when above the mailbox's UIDNEXT */
		if (pm->uid != 0 && (rc = store_mbox_restore_uids(t, mbox, 0, pm->uid)) != 0)
			return rc;
		rc = store_msg_append(t, mbox, pm->b, pm->flags, kws, pm->date, &uid);
		if (rc == 0 && pm->modseq != 0)
			rc = store_msg_restore_modseq(t, mbox, uid, pm->modseq);
		if (rc != 0)
			return rc;
		if (i == 0)
			im->first_uid = im->first_uid ? im->first_uid : uid;
		im->last_uid = uid;
	}
	return 0;
}

static int imp_flush(struct imp *im)
{
	int rc = im->n > 0 ? store_write(im->mc->st, im->part, w_append, im) : 0;

	if (rc == 0)
		im->count += im->n;
	for (size_t i = 0; i < im->n; i++)
		pending_clear(&im->batch[i]);
	im->n = 0;
	return rc;
}

/* Starts the next message of the batch: a new blob in the user's partition. */
static int imp_begin(struct imp *im, struct wr *w, struct pending **pm_r)
{
	struct pending *pm;
	int rc;

	if (im->n == BATCH && (rc = imp_flush(im)) != 0)
		return rc;
	pm = &im->batch[im->n];
	memset(pm, 0, sizeof(*pm));
	w->fd = -1;
	w->len = w->bytes = 0;
	w->err = 0;
	if ((rc = store_blob_new(im->mc->st, im->part, &pm->b)) != 0)
		return rc;
	w->b = pm->b;
	*pm_r = pm;
	return 0;
}

static int imp_end(struct imp *im, struct wr *w)
{
	struct pending *pm = &im->batch[im->n];
	int rc;

	wr_flush(w);
	if ((rc = w->err) != 0 || (rc = store_blob_finish(pm->b)) != 0) {
		pending_clear(pm);
		return rc;
	}
	im->bytes += w->bytes;
	im->n++;
	return 0;
}

static void add_kw(struct pending *pm, const char *p, size_t len)
{
	if (len == 0 || pm->nkws == MAX_MSG_KWS || len > STORE_MAX_KEYWORD)
		return;
	for (size_t i = 0; i < pm->nkws; i++)
		if (str_caseeq(pm->kws[i], strlen(pm->kws[i]), p, len))
			return;
	pm->kws[pm->nkws++] = xstrndup(p, len);
}

/* ------------------------------------------------------------------------------------- */
/* mbox import */

struct mbox_state {
	struct imp *im;
	struct wr w;
	struct pending *pm;
	bool in_msg, in_header, pending_blank, skip_hdr, crlf, ended;
	int skip_line; /* skip the rest of a long From_ line */
	enum { H_NONE, H_STATUS, H_XSTATUS, H_XKEYWORDS, H_OTHER } hdr;
	char hval[HDR_VALUE_MAX];
	size_t hlen;
};

static bool is_from_line(const char *p, size_t len)
{
	return len >= 5 && memcmp(p, "From ", 5) == 0;
}

/* Parses text with fmt as UTC, or with its %z offset applied; 0 when it does not parse. */
static int64_t parse_time(const char *text, const char *fmt)
{
	struct tm tm;
	int64_t off;

	memset(&tm, 0, sizeof(tm));
	if (strptime(text, fmt, &tm) == NULL)
		return 0;
	off = (int64_t)tm.tm_gmtoff; /* read before timegm, which resets it */
	return (int64_t)timegm(&tm) - off;
}

/* The date of a From_ line ("From sender Sat Nov 28 21:04:37 2026", also with a numeric
   zone before the year), as UTC. */
static int64_t from_line_date(const char *p, size_t len)
{
	static const char *const days[] = {
		"Mon ", "Tue ", "Wed ", "Thu ", "Fri ", "Sat ", "Sun "
	};
	char line[1024];
	int64_t t;

	len = len < sizeof(line) - 1 ? len : sizeof(line) - 1;
	memcpy(line, p, len);
	line[len] = '\0';
	for (char *q = line + 5; *q != '\0'; q++)
		for (size_t d = 0; d < 7; d++)
			if (strncmp(q, days[d], 4) == 0 &&
			    ((t = parse_time(q, "%a %b %d %H:%M:%S %Y")) != 0 ||
			     (t = parse_time(q, "%a %b %d %H:%M:%S %z %Y")) != 0))
				return t;
	return 0;
}

/* An RFC 5322 Date: value (the fallback when the From_ line has no date). */
static int64_t header_date(const char *p, size_t len)
{
	char v[256];
	const char *s;
	int64_t t;

	len = len < sizeof(v) - 1 ? len : sizeof(v) - 1;
	memcpy(v, p, len);
	v[len] = '\0';
	for (s = v; *s == ' ' || *s == '\t'; s++)
		;
	if ((t = parse_time(s, "%a, %d %b %Y %H:%M:%S %z")) != 0)
		return t;
	return parse_time(s, "%d %b %Y %H:%M:%S %z");
}

/* Applies a collected Status / X-Status / X-Keywords value. */
static void flag_header_done(struct mbox_state *s)
{
	struct str_view rest = { s->hval, s->hlen }, f;

	for (size_t i = 0; i < s->hlen && s->hdr != H_XKEYWORDS; i++) {
		char c = s->hval[i];

		if (s->hdr == H_STATUS && c == 'R')
			s->pm->flags |= STORE_SEEN;
		else if (s->hdr == H_XSTATUS)
			s->pm->flags |= c == 'A'   ? STORE_ANSWERED
					: c == 'F' ? STORE_FLAGGED
					: c == 'T' ? STORE_DRAFT
					: c == 'D' ? STORE_DELETED
						   : 0;
	}
	while (s->hdr == H_XKEYWORDS && str_split_ws(&rest, &f)) {
		struct str_view k2 = f, k;

		while (str_split_next(&k2, ',', &k))
			add_kw(s->pm, k.p, k.len);
	}
	s->hdr = H_NONE;
	s->hlen = 0;
}

static void hval_add(struct mbox_state *s, const char *p, size_t len)
{
	size_t room = sizeof(s->hval) - s->hlen;

	if (len > room)
		len = room;
	memcpy(s->hval + s->hlen, p, len);
	s->hlen += len;
}

/* A header line at the start of a line: strips and reads the flag headers. */
static bool header_line(struct mbox_state *s, const char *p, size_t len)
{
	static const struct {
		const char *name;
		int kind;
	} hidden[] = { { "Status:", H_STATUS },        { "X-Status:", H_XSTATUS },
		       { "X-Keywords:", H_XKEYWORDS }, { "X-UID:", H_OTHER },
		       { "X-IMAP:", H_OTHER },         { "X-IMAPbase:", H_OTHER } };

	if (len > 0 && (p[0] == ' ' || p[0] == '\t')) {
		if (s->skip_hdr)
			hval_add(s, p, len);
		return s->skip_hdr;
	}
	if (s->hdr != H_NONE)
		flag_header_done(s);
	s->skip_hdr = false;
	if (s->pm->date == 0 && len > 5 && str_caseprefix(p, len, "Date:"))
		s->pm->date = header_date(p + 5, len - 5);
	for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++) {
		size_t n = strlen(hidden[i].name);

		if (len >= n && str_caseprefix(p, len, hidden[i].name)) {
			s->skip_hdr = true;
			s->hdr = hidden[i].kind;
			hval_add(s, p + n, len - n);
			return true;
		}
	}
	return false;
}

static void msg_end(struct mbox_state *s, int *rc)
{
	if (!s->in_msg)
		return;
	if (s->hdr != H_NONE)
		flag_header_done(s);
	if (!s->ended && s->w.bytes > 0)
		wr_put(&s->w, "\r\n", 2); /* the last line of the file had no LF */
	s->in_msg = false;
	if (*rc == 0)
		*rc = imp_end(s->im, &s->w);
}

static int from_line(struct mbox_state *s, const char *p, size_t len, bool complete)
{
	int rc = 0;

	msg_end(s, &rc);
	if (rc != 0 || (rc = imp_begin(s->im, &s->w, &s->pm)) != 0)
		return rc;
	if (s->im->count + s->im->n == 0)
		s->crlf = complete && len > 0 && p[len - 1] == '\r';
	s->pm->date = from_line_date(p, len);
	s->in_msg = s->in_header = s->ended = true;
	s->pending_blank = s->skip_hdr = false;
	s->skip_line = !complete;
	return 0;
}

/* One piece of a line of the mbox file. */
static int mbox_piece(struct mbox_state *s, const char *p, size_t len, bool complete, bool start)
{
	/* a From_ line separates only at the start or after a blank line (mboxo files do not
	   quote every "From " in bodies) */
	if (start && is_from_line(p, len) && (!s->in_msg || s->pending_blank))
		return from_line(s, p, len, complete);
	if (!start && s->skip_line) {
		s->skip_line = !complete;
		return 0;
	}
	if (!s->in_msg)
		return len == 0 && complete ? 0 : STORE_EINVAL; /* text before the first From_ */
	if (complete && s->crlf && len > 0 && p[len - 1] == '\r')
		len--;
	if (start && s->in_header) {
		if (len == 0 && complete) {
			if (s->hdr != H_NONE)
				flag_header_done(s);
			s->in_header = false;
		} else if (header_line(s, p, len)) {
			s->skip_line = !complete; /* a long hidden header: drop the rest too */
			return 0;
		}
	}
	if (start && len == 0 && complete) {
		if (s->pending_blank)
			wr_put(&s->w, "\r\n", 2);
		s->pending_blank = true;
		return 0;
	}
	if (s->pending_blank)
		wr_put(&s->w, "\r\n", 2);
	s->pending_blank = false;
	if (start && len > 5 && p[0] == '>') {
		size_t q = 0;

		while (q < len && p[q] == '>')
			q++;
		if (is_from_line(p + q, len - q)) {
			p++; /* mboxrd: one level of quoting less */
			len--;
		}
	}
	wr_put(&s->w, p, len);
	if (complete)
		wr_put(&s->w, "\r\n", 2);
	s->ended = complete;
	return s->w.err;
}

static int import_mbox(struct imp *im, int fd)
{
	struct mbox_state *s = xcalloc(1, sizeof(*s));
	struct rd *r = xcalloc(1, sizeof(*r));
	bool start = true, complete;
	const char *p;
	size_t len;
	int rc = 0, n;

	s->im = im;
	r->fd = fd;
	while (rc == 0 && (n = rd_piece(r, &p, &len, &complete)) == 1) {
		rc = mbox_piece(s, p, len, complete, start);
		start = complete;
	}
	if (rc == 0 && n < 0)
		rc = STORE_EIO;
	if (rc == 0)
		msg_end(s, &rc);
	else if (s->in_msg)
		pending_clear(&im->batch[im->n]);
	if (rc == 0)
		rc = imp_flush(im);
	free(r);
	free(s);
	return rc;
}

/* ------------------------------------------------------------------------------------- */
/* Maildir import */

struct mdfile {
	char *name; /* "cur/..." or "new/..." */
	unsigned long long t;
	uint32_t uid;    /* its line in dovecot-uidlist, 0: not listed */
	uint64_t modseq; /* that line's M extension, 0: none */
};

/* The files dovecot-uidlist lists come first, in UID order; the others after, by the time in
   their name, then by name. */
static int mdfile_cmp(const void *a, const void *b)
{
	const struct mdfile *x = a, *y = b;
	const char *xn = strchr(x->name, '/') + 1, *yn = strchr(y->name, '/') + 1;

	if ((x->uid == 0) != (y->uid == 0))
		return x->uid != 0 ? -1 : 1;
	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return strcmp(xn, yn);
}

struct uidline {
	char *base; /* the file name before ":2," */
	uint32_t uid;
	uint64_t modseq;
};

static int uidline_cmp(const void *a, const void *b)
{
	return strcmp(((const struct uidline *)a)->base, ((const struct uidline *)b)->base);
}

/* dovecot-uidlist (version 3: a header line "3 V<uidvalidity> N<uidnext> ...", then "UID
   [extensions] :NAME"), sorted by name, the header's V and N into im; a missing or unreadable
   file gives none. Heron's export adds M<highestmodseq> to the header and M<modseq> to each
   line (extension letters of Heron's own). */
static struct uidline *md_read_uidlist(struct imp *im, const char *path, size_t *n_r)
{
	struct uidline *v = NULL;
	char p[4200], line[1024];
	FILE *f;

	*n_r = 0;
	snprintf(p, sizeof(p), "%s/dovecot-uidlist", path);
	if ((f = fopen(p, "r")) == NULL)
		return NULL;
	im->uidvalidity = im->uidnext = 0;
	im->highestmodseq = 0;
	if (fgets(line, sizeof(line), f) == NULL || line[0] != '3') {
		fclose(f);
		return NULL;
	}
	for (char *sp, *w = strtok_r(line + 1, " \r\n", &sp); w != NULL;
	     w = strtok_r(NULL, " \r\n", &sp)) {
		uint64_t x;

		if ((w[0] == 'V' || w[0] == 'N') &&
		    str_to_u64(w + 1, strlen(w + 1), UINT32_MAX - 1, &x) == 0 && x > 0)
			*(w[0] == 'V' ? &im->uidvalidity : &im->uidnext) = (uint32_t)x;
		if (w[0] == 'M' && str_to_u64(w + 1, strlen(w + 1), UINT64_MAX - 1, &x) == 0)
			im->highestmodseq = x;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		char *end, *name = strstr(line, " :");
		unsigned long uid = strtoul(line, &end, 10);

		uint64_t modseq = 0, x;

		if (name == NULL || end == line || uid == 0 || uid > UINT32_MAX)
			continue;
		*name = '\0'; /* the extensions end there */
		for (char *sp, *w = strtok_r(end, " ", &sp); w != NULL;
		     w = strtok_r(NULL, " ", &sp))
			if (w[0] == 'M' &&
			    str_to_u64(w + 1, strlen(w + 1), UINT64_MAX - 1, &x) == 0)
				modseq = x;
		name += 2;
		name[strcspn(name, ":\r\n")] = '\0';
		v = xreallocarray(v, *n_r + 1, sizeof(*v));
		v[*n_r].base = xstrdup(name);
		v[*n_r].modseq = modseq;
		v[(*n_r)++].uid = (uint32_t)uid;
	}
	fclose(f);
	if (*n_r > 1)
		qsort(v, *n_r, sizeof(*v), uidline_cmp);
	return v;
}

static void md_apply_uidlist(struct imp *im, const char *path, struct mdfile *v, size_t n)
{
	size_t nu;
	struct uidline *u = md_read_uidlist(im, path, &nu);

	for (size_t i = 0; i < n && nu > 0; i++) {
		char *base = xstrdup(strchr(v[i].name, '/') + 1);
		struct uidline key = { base, 0 }, *hit;

		base[strcspn(base, ":")] = '\0';
		if ((hit = bsearch(&key, u, nu, sizeof(*u), uidline_cmp)) != NULL) {
			v[i].uid = hit->uid;
			v[i].modseq = hit->modseq;
		}
		free(base);
	}
	for (size_t i = 0; i < nu; i++)
		free(u[i].base);
	free(u);
}

static void md_list(const char *path, const char *sub, struct mdfile **v, size_t *n)
{
	char dir[4096];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/%s", path, sub);
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		*v = xreallocarray(*v, *n + 1, sizeof(**v));
		(*v)[*n].name = xasprintf("%s/%s", sub, de->d_name);
		(*v)[*n].uid = 0;
		(*v)[*n].modseq = 0;
		(*v)[(*n)++].t = strtoull(de->d_name, NULL, 10);
	}
	closedir(d);
}

static void md_read_keywords(struct imp *im)
{
	char p[4096], line[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/dovecot-keywords", im->path);
	if ((f = fopen(p, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *end;
		unsigned long i = strtoul(line, &end, 10);
		size_t len;

		if (end == line || *end != ' ' || i >= MAILDIR_KWS)
			continue;
		len = strcspn(end + 1, "\r\n");
		free(im->kwletters[i]);
		im->kwletters[i] = xstrndup(end + 1, len);
	}
	fclose(f);
}

static void md_flags(struct imp *im, struct pending *pm, const char *name)
{
	const char *info = strstr(name, ":2,");

	for (const char *c = info ? info + 3 : ""; *c != '\0'; c++) {
		pm->flags |= *c == 'D'   ? STORE_DRAFT
			     : *c == 'F' ? STORE_FLAGGED
			     : *c == 'R' ? STORE_ANSWERED
			     : *c == 'S' ? STORE_SEEN
			     : *c == 'T' ? STORE_DELETED
					 : 0;
		if (*c == 'P')
			add_kw(pm, "$Forwarded", 10);
		if (*c >= 'a' && *c <= 'z' && im->kwletters[*c - 'a'] != NULL)
			add_kw(pm, im->kwletters[*c - 'a'], strlen(im->kwletters[*c - 'a']));
	}
}

/* One Maildir file: bare LF becomes CRLF; mtime is the internal date. */
static int md_one(struct imp *im, int dirfd, const struct mdfile *f)
{
	struct pending *pm;
	struct wr *w = xmalloc(sizeof(*w));
	char buf[RD_SIZE];
	struct stat sb;
	bool cr = false;
	ssize_t n;
	int fd, rc;
	const char *name = f->name;

	if ((fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC)) == -1 || fstat(fd, &sb) == -1) {
		rc = errno == ENOENT ? 0 : STORE_EIO; /* moved away meanwhile: skip it */
		goto out;
	}
	if ((rc = imp_begin(im, w, &pm)) != 0)
		goto out;
	pm->date = (int64_t)sb.st_mtime;
	pm->uid = im->keep_uids ? f->uid : 0;
	pm->modseq = im->keep_uids && f->uid != 0 ? f->modseq : 0;
	md_flags(im, pm, name);
	while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
		size_t from = 0;

		for (size_t i = 0; i < (size_t)(n > 0 ? n : 0); i++) {
			if (buf[i] == '\n' && !(i > 0 ? buf[i - 1] == '\r' : cr)) {
				wr_put(w, buf + from, i - from);
				wr_put(w, "\r", 1);
				from = i;
			}
		}
		if (n > 0) {
			wr_put(w, buf + from, (size_t)n - from);
			cr = buf[n - 1] == '\r';
		}
	}
	rc = n < 0 ? STORE_EIO : imp_end(im, w);
	if (rc != 0 && n < 0)
		pending_clear(pm);
out:
	if (fd != -1)
		close(fd);
	free(w);
	return rc;
}

/* Annotations (IMAP METADATA) in an export: a file of lines "ENTRY HEX" (the entry's full
   name, its value's bytes in hexadecimal), heron-metadata in each Maildir for the mailbox's
   entries, heron-server-metadata at the top for the user's server entries. */
#define ANNOT_FILE_MAX (64u << 20) /* bytes read of one such file */

struct annots {
	struct imp *im;
	bool server; /* the user's server entries, else those of im->mailbox */
	char *text;  /* the file, parsed in place into: */
	size_t len, n;
	struct annot_row {
		const char *entry, *value;
		size_t vlen;
	} * v;
};

/* The lines of a->text into a->v (entries and values decoded in place, once: a write txn
   may run w_annots again). STORE_EINVAL for a line that does not parse. */
static int annots_parse(struct annots *a)
{
	char *line, *sp;

	for (line = strtok_r(a->text, "\n", &sp); line != NULL; line = strtok_r(NULL, "\n", &sp)) {
		char *hex = strchr(line, ' ');
		size_t hl, vl = 0;

		if (hex == NULL || (hl = strlen(hex + 1)) % 2 != 0)
			return STORE_EINVAL;
		*hex++ = '\0';
		for (size_t i = 0; i < hl; i += 2) {
			int hi = str_hex_digit((unsigned char)hex[i]),
			    lo = str_hex_digit((unsigned char)hex[i + 1]);

			if (hi < 0 || lo < 0)
				return STORE_EINVAL;
			hex[vl++] = (char)(hi << 4 | lo);
		}
		a->v = xreallocarray(a->v, a->n + 1, sizeof(*a->v));
		a->v[a->n++] = (struct annot_row){ line, hex, vl };
	}
	return 0;
}

static int w_annots(struct store_txn *t, void *arg)
{
	struct annots *a = arg;
	struct store_user u;
	uint64_t owner;
	int rc;

	if ((rc = store_user_get(t, a->im->user, &u)) != 0)
		return rc;
	owner = u.id;
	if (!a->server && (rc = imp_mbox(t, a->im, &owner)) != 0)
		return rc;
	for (size_t i = 0; i < a->n && rc == 0; i++)
		rc = store_annot_set(t, owner, u.id, a->v[i].entry, strlen(a->v[i].entry),
				     a->v[i].value, a->v[i].vlen, 0);
	return rc;
}

/* The annotations file name of im->path into the store (none when it is missing). Errors:
   STORE_EINVAL (a line that does not parse, an entry name that is not valid, a file over
   ANNOT_FILE_MAX), STORE_EIO (unreadable), those of the store. */
static int md_annotations(struct imp *im, const char *name, bool server)
{
	struct annots a = { im, server, NULL, 0, 0, NULL };
	char p[4200];
	struct stat sb;
	ssize_t n = 0;
	int fd, rc = 0;

	snprintf(p, sizeof(p), "%s/%s", im->path, name);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) == -1)
		return errno == ENOENT ? 0 : STORE_EIO;
	if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode))
		rc = STORE_EIO;
	else if ((uint64_t)sb.st_size > ANNOT_FILE_MAX)
		rc = STORE_EINVAL;
	a.text = rc == 0 ? xmalloc((size_t)sb.st_size + 1) : NULL;
	while (rc == 0 && a.len < (size_t)sb.st_size &&
	       ((n = read(fd, a.text + a.len, (size_t)sb.st_size - a.len)) > 0 ||
		(n < 0 && errno == EINTR)))
		a.len += n > 0 ? (size_t)n : 0;
	close(fd);
	if (rc == 0 && n < 0)
		rc = STORE_EIO;
	if (rc == 0 && a.len > 0) {
		a.text[a.len] = '\0';
		rc = memchr(a.text, '\0', a.len) != NULL ? STORE_EINVAL : annots_parse(&a);
		if (rc == 0 && a.n > 0)
			rc = store_write(im->mc->st, im->part, w_annots, &a);
	}
	if (rc != 0)
		fprintf(stderr, "mailctl: %s: %s\n", p,
			rc == STORE_EINVAL ? "not a list of annotations (ENTRY HEX a line)"
					   : store_strerror(rc));
	free(a.text);
	free(a.v);
	return rc;
}

/* Keeping an export's UIDs: the mailbox takes its UIDVALIDITY when it never held a
   message (else the import appends with new UIDs), and its UIDNEXT at the end. */
static int w_uids_begin(struct store_txn *t, void *arg)
{
	struct imp *im = arg;
	struct store_status st;
	uint64_t mbox;
	int rc;

	if ((rc = imp_mbox(t, im, &mbox)) != 0 || (rc = store_mbox_status(t, mbox, &st)) != 0)
		return rc;
	if (st.uidnext != 1 || st.messages != 0)
		return 0;
	im->keep_uids = true;
	return store_mbox_restore_uids(t, mbox, im->uidvalidity, 0);
}

static int w_uids_end(struct store_txn *t, void *arg)
{
	struct imp *im = arg;
	uint64_t mbox;
	int rc = imp_mbox(t, im, &mbox);

	if (rc == 0 && im->uidnext != 0)
		rc = store_mbox_restore_uids(t, mbox, 0, im->uidnext);
	if (rc == 0 && im->highestmodseq != 0)
		rc = store_mbox_restore_modseq(t, mbox, im->highestmodseq);
	return rc;
}

/* An export's expunge history (heron-expunged), for a mailbox that kept its UIDs. */
struct history {
	struct imp *im;
	uint64_t floor;
	size_t n;
	struct hist_row {
		uint32_t uid;
		uint64_t modseq;
		int64_t when;
	} * v;
};

static int w_history(struct store_txn *t, void *arg)
{
	struct history *h = arg;
	uint64_t mbox;
	int rc = imp_mbox(t, h->im, &mbox);

	if (rc == 0)
		rc = store_msg_restore_history(t, mbox, h->floor, 0, 0, 0);
	for (size_t i = 0; i < h->n && rc == 0; i++)
		rc = store_msg_restore_history(t, mbox, h->floor, h->v[i].uid, h->v[i].modseq,
					       h->v[i].when);
	return rc;
}

/* Reads heron-expunged of im->path into the store (none when it is missing). Errors:
   STORE_EINVAL (a line that does not parse, an entry the mailbox contradicts), STORE_EIO. */
static int md_history(struct imp *im)
{
	struct history h = { im, 0, 0, NULL };
	char p[4200], line[128], *e1, *e2, *e3;
	FILE *f;
	int rc = 0;

	snprintf(p, sizeof(p), "%s/heron-expunged", im->path);
	if ((f = fopen(p, "r")) == NULL)
		return errno == ENOENT ? 0 : STORE_EIO;
	if (fgets(line, sizeof(line), f) == NULL || strncmp(line, "floor ", 6) != 0 ||
	    (h.floor = strtoull(line + 6, &e1, 10)) == 0 || *e1 != '\n')
		rc = STORE_EINVAL;
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		unsigned long uid = strtoul(line, &e1, 10);
		uint64_t modseq = strtoull(e1, &e2, 10);
		int64_t when = strtoll(e2, &e3, 10);

		if (e1 == line || *e1 != ' ' || e2 == e1 || *e2 != ' ' || e3 == e2 ||
		    *e3 != '\n' || uid == 0 || uid > UINT32_MAX || modseq == 0) {
			rc = STORE_EINVAL;
			break;
		}
		h.v = xreallocarray(h.v, h.n + 1, sizeof(*h.v));
		h.v[h.n++] = (struct hist_row){ (uint32_t)uid, modseq, when };
	}
	if (rc == 0 && ferror(f))
		rc = STORE_EIO;
	fclose(f);
	if (rc == 0)
		rc = store_write(im->mc->st, im->part, w_history, &h);
	if (rc != 0)
		fprintf(stderr, "mailctl: %s: %s\n", p,
			rc == STORE_EINVAL
				? "not an expunge history (floor N, then UID MODSEQ TIME)"
				: store_strerror(rc));
	free(h.v);
	return rc;
}

static int import_maildir(struct imp *im)
{
	struct mdfile *v = NULL;
	size_t n = 0;
	int dirfd = -1, rc = 0;

	md_list(im->path, "cur", &v, &n);
	md_list(im->path, "new", &v, &n);
	md_read_keywords(im);
	md_apply_uidlist(im, im->path, v, n);
	if (n > 1)
		qsort(v, n, sizeof(*v), mdfile_cmp);
	im->keep_uids = false;
	if (im->uidvalidity != 0)
		rc = store_write(im->mc->st, im->part, w_uids_begin, im);
	if (rc == 0 && (dirfd = open(im->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		rc = STORE_EIO;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = md_one(im, dirfd, &v[i]);
	if (rc == 0)
		rc = imp_flush(im);
	if (rc == 0 && im->keep_uids && (im->uidnext != 0 || im->highestmodseq != 0))
		rc = store_write(im->mc->st, im->part, w_uids_end, im);
	if (rc == 0 && im->keep_uids && im->highestmodseq != 0)
		rc = md_history(im);
	if (rc == 0)
		rc = md_annotations(im, "heron-metadata", false);
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	if (dirfd != -1)
		close(dirfd);
	return rc;
}

static int sub_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The Maildir++ folders of root (".Sent", ".Work.Projects"): directories with a cur/. */
static char **md_folders(const char *root, size_t *n_r)
{
	char **v = NULL, p[4400];
	struct dirent *de;
	struct stat sb;
	DIR *d;

	*n_r = 0;
	if ((d = opendir(root)) == NULL)
		return NULL;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] != '.' || de->d_name[1] == '\0' || de->d_name[1] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s/cur", root, de->d_name);
		if (stat(p, &sb) == -1 || !S_ISDIR(sb.st_mode))
			continue;
		v = xreallocarray(v, *n_r + 1, sizeof(*v));
		v[(*n_r)++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (*n_r > 1)
		qsort(v, *n_r, sizeof(*v), sub_cmp); /* parents before children */
	return v;
}

static int w_mbox_ensure(struct store_txn *t, void *arg);

/* A folder name's "%2E" (a '.' inside a level, which Maildir++ uses between levels) and
   "%25" ('%') back to their characters, in place. */
static void md_unescape(char *s)
{
	char *o = s;

	for (; *s != '\0'; s++) {
		if (s[0] == '%' && s[1] == '2' && (s[2] == 'E' || s[2] == 'e' || s[2] == '5')) {
			*o++ = s[2] == '5' ? '%' : '.';
			s += 2;
		} else
			*o++ = *s;
	}
	*o = '\0';
}

struct subs {
	struct imp *im;
	char **names;
	size_t n;
};

static int w_subscribe(struct store_txn *t, void *arg)
{
	struct subs *sb = arg;
	struct store_user u;
	int rc;

	if ((rc = store_user_get(t, sb->im->user, &u)) != 0)
		return rc;
	for (size_t i = 0; i < sb->n && rc == 0; i++)
		rc = store_mbox_subscribe(t, u.id, sb->names[i], true);
	return rc;
}

/* The subscriptions file of an export (one mailbox name a line; below the target mailbox
   unless it is INBOX): each subscribed, in one transaction. A missing file: none. */
static int md_subscribe(struct imp *im, bool at_top)
{
	char p[4200], line[2048];
	struct subs sb = { im, NULL, 0 };
	FILE *f;
	int rc = 0;

	snprintf(p, sizeof(p), "%s/subscriptions", im->path);
	if ((f = fopen(p, "r")) == NULL)
		return errno == ENOENT ? 0 : STORE_EIO;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '\0' || (line[0] == 'V' && line[1] == '\t'))
			continue; /* a version 2 file's version line */
		for (char *c = line; *c != '\0'; c++)
			*c = *c == '\t' ? '/' : *c; /* a version 2 file: levels by tab */
		sb.names = xreallocarray(sb.names, sb.n + 1, sizeof(*sb.names));
		sb.names[sb.n++] = at_top ? xstrdup(line) : xasprintf("%s/%s", im->mailbox, line);
	}
	fclose(f);
	if (sb.n > 0)
		rc = store_write(im->mc->st, im->part, w_subscribe, &sb);
	for (size_t i = 0; i < sb.n; i++)
		free(sb.names[i]);
	free(sb.names);
	return rc;
}

struct uses {
	struct imp *im;
	char **names;
	unsigned *masks;
	size_t n;
};

static int w_special_use(struct store_txn *t, void *arg)
{
	struct uses *us = arg;
	struct store_user u;
	uint64_t mbox;
	int rc;

	if ((rc = store_user_get(t, us->im->user, &u)) != 0)
		return rc;
	for (size_t i = 0; i < us->n && rc == 0; i++)
		if ((rc = store_mbox_find(t, u.id, us->names[i], &mbox)) == 0)
			rc = store_mbox_set_special(t, mbox, us->masks[i]);
	return rc;
}

/* The heron-special-use file of a whole user's export ("MASK NAME" a line, MASK the
   enum store_special bits in hexadecimal): each mailbox given its attributes, in one
   transaction. A missing file: none. Errors: STORE_EINVAL (a line that does not parse, a
   mask with unknown bits), STORE_ENOMBOX (a mailbox the export does not hold), STORE_EIO. */
static int md_special_use(struct imp *im)
{
	const unsigned known = STORE_USE_ALL | STORE_USE_ARCHIVE | STORE_USE_DRAFTS |
			       STORE_USE_FLAGGED | STORE_USE_JUNK | STORE_USE_SENT |
			       STORE_USE_TRASH;
	char p[4200], line[2048], *end;
	struct uses us = { im, NULL, NULL, 0 };
	unsigned long mask;
	FILE *f;
	int rc = 0;

	snprintf(p, sizeof(p), "%s/heron-special-use", im->path);
	if ((f = fopen(p, "r")) == NULL)
		return errno == ENOENT ? 0 : STORE_EIO;
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		if (line[strcspn(line, "\n")] != '\n') {
			rc = STORE_EINVAL; /* longer than any mailbox name */
			break;
		}
		line[strcspn(line, "\n")] = '\0';
		errno = 0;
		mask = strtoul(line, &end, 16);
		if (end == line || *end != ' ' || end[1] == '\0' || errno != 0 ||
		    (mask & ~(unsigned long)known) != 0) {
			rc = STORE_EINVAL;
			break;
		}
		us.names = xreallocarray(us.names, us.n + 1, sizeof(*us.names));
		us.masks = xreallocarray(us.masks, us.n + 1, sizeof(*us.masks));
		us.names[us.n] = xstrdup(end + 1);
		us.masks[us.n++] = (unsigned)mask;
	}
	if (rc == 0 && ferror(f))
		rc = STORE_EIO;
	fclose(f);
	if (rc == 0 && us.n > 0)
		rc = store_write(im->mc->st, im->part, w_special_use, &us);
	if (rc != 0)
		fprintf(stderr, "mailctl: %s: %s\n", p,
			rc == STORE_EINVAL ? "not a list of special uses (MASK NAME a line)"
					   : store_strerror(rc));
	for (size_t i = 0; i < us.n; i++)
		free(us.names[i]);
	free(us.names);
	free(us.masks);
	return rc;
}

/* A Maildir into the target mailbox, then each Maildir++ folder ".A.B" into "A/B" below
   it (at the top level when the target is INBOX), each with its own dovecot-keywords. */
static int import_maildir_tree(struct imp *im)
{
	const char *root = im->path, *top = im->mailbox;
	bool at_top = str_caseeq(top, strlen(top), "INBOX", 5);
	size_t n;
	char **subs = md_folders(root, &n);
	uint32_t first, last;
	int rc = import_maildir(im);

	first = im->first_uid;
	last = im->last_uid;
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *name = xasprintf("%s%s%s", at_top ? "" : top, at_top ? "" : "/",
				       subs[i] + 1);
		char *path = xasprintf("%s/%s", root, subs[i]);

		for (char *c = name + (at_top ? 0 : strlen(top) + 1); *c != '\0'; c++)
			*c = *c == '.' ? '/' : *c;
		md_unescape(name + (at_top ? 0 : strlen(top) + 1));
		for (size_t k = 0; k < MAILDIR_KWS; k++) {
			free(im->kwletters[k]);
			im->kwletters[k] = NULL;
		}
		im->path = path;
		im->mailbox = name;
		if ((rc = store_write(im->mc->st, im->part, w_mbox_ensure, im)) == 0)
			rc = import_maildir(im);
		im->nboxes += rc == 0;
		im->path = root;
		im->mailbox = top;
		free(name);
		free(path);
	}
	for (size_t i = 0; i < n; i++)
		free(subs[i]);
	free(subs);
	if (rc == 0)
		rc = md_subscribe(im, at_top);
	if (rc == 0 && at_top) /* the whole user: its server entries too */
		rc = md_annotations(im, "heron-server-metadata", true);
	if (rc == 0 && at_top)
		rc = md_special_use(im);
	im->first_uid = first;
	im->last_uid = last;
	return rc;
}

/* ------------------------------------------------------------------------------------- */
/* The Sieve vacation and duplicate memories: DIR/heron-sieve-memory */

struct mem {
	char kind; /* enum store_sieve_memory */
	uint64_t hash;
	int64_t until;
};

/* Memories read from an export, restored MEM_BATCH per transaction from `next` on. */
struct mems {
	const char *user;
	struct mem *v;
	size_t n, next;
	int64_t now;
};

struct mem_out {
	FILE *f;
	uint64_t n;
};

static int mem_row(enum store_sieve_memory kind, uint64_t hash, int64_t until, void *arg)
{
	struct mem_out *o = arg;

	if (++o->n > MEM_MAX)
		return 1; /* more than an import takes: refused below */
	fprintf(o->f, "%c %016" PRIx64 " %" PRId64 "\n", (char)kind, hash, until);
	return 0;
}

/* The user's memories not expired now into DIR/heron-sieve-memory. */
static int export_memories(struct mc *mc, const char *user, const char *dir)
{
	struct mem_out o = { 0 };
	struct store_txn *t;
	struct store_user u;
	char p[4200];
	int rc, err = 0;

	snprintf(p, sizeof(p), "%s/" MEM_FILE, dir);
	if ((rc = mc_begin(mc, user, NULL, STORE_TXN_READ, &t, &u, NULL)) != MC_OK)
		return rc;
	if ((o.f = fopen(p, "wx")) == NULL)
		err = errno;
	else
		rc = store_sieve_memories(t, user, (int64_t)time(NULL), mem_row, &o);
	store_txn_abort(&t);
	if (o.f != NULL) {
		bool bad = ferror(o.f) != 0;

		if ((fclose(o.f) != 0 || bad) && err == 0)
			err = errno ? errno : EIO;
	}
	if (rc == 1)
		return mc_refuse(mc, MC_REFUSED,
				 "an import takes at most 1048576; export when some have expired",
				 "'%s' has more than %d Sieve memories", user, MEM_MAX);
	if (rc != 0)
		return mc_fail(mc, rc, "the Sieve memories of '%s'", user);
	if (err != 0)
		return mc_refuse(mc, MC_ERR, "see the free space and permissions there",
				 "writing %s: %s", p, strerror(err));
	return MC_OK;
}

/* One line "KIND HASH UNTIL" (without its LF): 0, or -1 when it does not parse. */
static int mem_parse(const char *line, struct mem *m)
{
	char *end;
	long long until;

	if ((line[0] != STORE_SIEVE_VACATION && line[0] != STORE_SIEVE_DUPLICATE) ||
	    line[1] != ' ' || strspn(line + 2, "0123456789abcdef") != 16 || line[18] != ' ')
		return -1;
	m->kind = line[0];
	m->hash = strtoull(line + 2, NULL, 16);
	if (!(line[19] == '-' || (line[19] >= '0' && line[19] <= '9')))
		return -1;
	errno = 0;
	until = strtoll(line + 19, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	m->until = until;
	return 0;
}

/* Reads DIR/heron-sieve-memory (missing: none) whole into ms, checking every line, so a bad
   file is refused before any mail is imported. An exit code after saying what is wrong. */
static int read_memories(struct mc *mc, const char *dir, struct mems *ms)
{
	char p[4200], line[MEM_LINE_MAX + 2];
	size_t lineno = 0, cap = 0;
	FILE *f;
	int rc = MC_OK;

	ms->n = ms->next = 0;
	snprintf(p, sizeof(p), "%s/" MEM_FILE, dir);
	if ((f = fopen(p, "r")) == NULL)
		return errno == ENOENT ? MC_OK : mc_fail(mc, STORE_EIO, "cannot open %s", p);
	while (rc == MC_OK && fgets(line, sizeof(line), f) != NULL) {
		size_t len = strlen(line);

		lineno++;
		if (len == 0 || line[len - 1] != '\n') {
			rc = mc_refuse(mc, MC_DATAERR,
				       "each line is KIND HASH UNTIL and ends with LF",
				       "%s line %zu: longer than %d bytes or not ended", p, lineno,
				       MEM_LINE_MAX);
			break;
		}
		line[len - 1] = '\0';
		if (ms->n == MEM_MAX) {
			rc = mc_refuse(mc, MC_DATAERR, "split the memories over several imports",
				       "%s: more than %d memories", p, MEM_MAX);
			break;
		}
		if (ms->n == cap) {
			cap = cap ? cap * 2 : 256;
			ms->v = xreallocarray(ms->v, cap, sizeof(*ms->v));
		}
		if (mem_parse(line, &ms->v[ms->n]) != 0)
			rc = mc_refuse(mc, MC_DATAERR,
				       "KIND is V or D, HASH 16 lowercase hex digits, UNTIL Unix "
				       "seconds",
				       "%s line %zu: not a Sieve memory", p, lineno);
		ms->n++;
	}
	if (rc == MC_OK && ferror(f))
		rc = mc_fail(mc, STORE_EIO, "reading %s", p);
	fclose(f);
	return rc;
}

static int w_memories(struct store_txn *t, void *arg)
{
	struct mems *ms = arg;
	size_t end = ms->next + MEM_BATCH < ms->n ? ms->next + MEM_BATCH : ms->n;
	int rc = 0;

	for (size_t i = ms->next; i < end && rc == 0; i++)
		if (ms->v[i].until > ms->now)
			rc = store_sieve_restore(t, ms->user,
						 (enum store_sieve_memory)ms->v[i].kind,
						 ms->v[i].hash, ms->v[i].until);
	return rc;
}

/* Restores what read_memories read into im's user, dropping those expired by now. */
static int restore_memories(struct imp *im, struct mems *ms)
{
	int rc;

	ms->user = im->user;
	ms->now = (int64_t)time(NULL);
	while (ms->next < ms->n) {
		size_t end = ms->next + MEM_BATCH < ms->n ? ms->next + MEM_BATCH : ms->n;

		if ((rc = store_write(im->mc->st, im->part, w_memories, ms)) != 0)
			return mc_fail(im->mc, rc, "the Sieve memories of '%s'", im->user);
		for (size_t i = ms->next; i < end; i++)
			im->nmems += ms->v[i].until > ms->now;
		ms->next = end;
	}
	return MC_OK;
}

/* ------------------------------------------------------------------------------------- */
/* import */

static int w_mbox_ensure(struct store_txn *t, void *arg)
{
	struct imp *im = arg;
	uint64_t id;

	return mc_mbox_ensure(t, im->user, im->mailbox, false, &id);
}

static void import_report(struct mc *mc, const struct imp *im)
{
	if (mc->json) {
		printf("{\"imported\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"mailbox\": ",
		       im->count, im->bytes);
		mc_json_str(stdout, im->mailbox, strlen(im->mailbox));
		printf(", \"first_uid\": %" PRIu32 ", \"last_uid\": %" PRIu32
		       ", \"folders\": %u, \"sieve_scripts\": %u, \"sieve_memories\": %" PRIu64
		       "}\n",
		       im->first_uid, im->last_uid, im->nboxes, im->nscripts, im->nmems);
	} else
		printf("imported %" PRIu64 " message%s (%" PRIu64 " bytes) into %s of %s%s"
		       "%s%s\n",
		       im->count, im->count == 1 ? "" : "s", im->bytes, im->mailbox, im->user,
		       im->nboxes ? " and its Maildir++ folders" : "",
		       im->nscripts ? ", and its Sieve scripts" : "",
		       im->nmems ? ", and its Sieve memories" : "");
}

int mc_import_dir(struct mc *mc, const char *user, const char *dir, uint64_t *count_r)
{
	struct imp *im = xcalloc(1, sizeof(*im));
	struct mems ms = { 0 };
	int err, rc = MC_OK;

	im->mc = mc;
	im->user = user;
	im->path = dir;
	im->mailbox = "INBOX";
	if ((err = store_user_locate(mc->st, user, &im->part)) != 0)
		rc = mc_fail(mc, err, "user '%s'", user);
	else if ((rc = read_memories(mc, dir, &ms)) != MC_OK) {
		/* a bad heron-sieve-memory: said, before any mail is imported */
	} else if ((err = store_write(mc->st, im->part, w_mbox_ensure, im)) != 0)
		rc = mc_fail(mc, err, "INBOX of '%s'", user);
	else if ((err = import_maildir_tree(im)) != 0)
		rc = mc_fail(mc, err, "import from %s stopped after %" PRIu64 " messages", dir,
			     im->count);
	else
		rc = restore_memories(im, &ms);
	*count_r = im->count;
	free(ms.v);
	for (size_t i = 0; i < MAILDIR_KWS; i++)
		free(im->kwletters[i]);
	free(im);
	return rc;
}

/* A mailbox made anew for a copy that keeps its UIDs: the partial one an interrupted
   transfer left deleted first (INBOX is never deleted); it must then never have held a
   message (STORE_EEXIST: a partial INBOX, or a mailbox whose children keep it). */
static int w_mbox_fresh(struct store_txn *t, void *arg)
{
	struct imp *im = arg;
	struct store_status st;
	struct store_user u;
	uint64_t id;
	int rc;

	if ((rc = store_user_get(t, im->user, &u)) != 0)
		return rc;
	rc = store_mbox_find(t, u.id, im->mailbox, &id);
	if (rc == 0 && !str_caseeq(im->mailbox, strlen(im->mailbox), "INBOX", 5))
		rc = store_mbox_delete(t, u.id, im->mailbox);
	else if (rc == STORE_ENOMBOX)
		rc = 0;
	if (rc == 0)
		rc = mc_mbox_ensure(t, im->user, im->mailbox, false, &id);
	if (rc == 0)
		rc = store_mbox_status(t, id, &st);
	return rc != 0 ? rc : st.uidnext != 1 || st.messages != 0 ? STORE_EEXIST : 0;
}

int mc_import_folder(struct mc *mc, const char *user, const char *mailbox, const char *dir,
		     uint64_t *count_r)
{
	struct imp *im = xcalloc(1, sizeof(*im));
	int err, rc = MC_OK;

	im->mc = mc;
	im->user = user;
	im->path = dir;
	im->mailbox = mailbox;
	if ((err = store_user_locate(mc->st, user, &im->part)) != 0)
		rc = mc_fail(mc, err, "user '%s'", user);
	else if ((err = store_write(mc->st, im->part, w_mbox_fresh, im)) != 0)
		rc = err == STORE_EEXIST
			     ? mc_refuse(
				       mc, MC_REFUSED, "--abort the move and start it again",
				       "mailbox '%s' of '%s' holds a partial copy that cannot be "
				       "made anew",
				       mailbox, user)
			     : mc_fail(mc, err, "mailbox '%s' of '%s'", mailbox, user);
	else if ((err = import_maildir(im)) != 0)
		rc = mc_fail(mc, err, "import of '%s' stopped after %" PRIu64 " messages", mailbox,
			     im->count);
	else if (im->uidvalidity != 0 && !im->keep_uids)
		rc = mc_refuse(mc, MC_IOERR, "--abort the move and start it again",
			       "mailbox '%s' of '%s' did not keep its UIDs", mailbox, user);
	*count_r += im->count;
	for (size_t i = 0; i < MAILDIR_KWS; i++)
		free(im->kwletters[i]);
	free(im);
	return rc;
}

int mc_import(struct mc *mc, const struct mc_args *a)
{
	struct mems ms = { 0 };
	struct imp *im;
	struct stat sb;
	bool whole;
	int err, serr, rc = MC_OK, fd = -1;

	if (a->set[1])
		return a->npos == 1 ? mc_import_bulk(mc, a->pos[0])
				    : mc_usage(mc, "--bulk takes one FILE (or - for stdin)");
	if (a->npos != 2)
		return mc_usage(mc, "expected USER PATH");
	im = xcalloc(1, sizeof(*im));
	im->mc = mc;
	im->user = a->pos[0];
	im->path = a->pos[1];
	im->mailbox = a->set[0] ? a->val[0] : "INBOX";
	/* a whole user (a Maildir++ home into INBOX): its Sieve scripts too, checked first */
	serr = stat(im->path, &sb) == -1 ? errno : 0;
	whole = serr == 0 && S_ISDIR(sb.st_mode) &&
		str_caseeq(im->mailbox, strlen(im->mailbox), "INBOX", 5);
	if (serr != 0) {
		rc = mc_refuse(mc, MC_NOINPUT, "give an mbox file or a Maildir directory",
			       "%s: %s", im->path, strerror(serr));
	} else if ((err = store_user_locate(mc->st, im->user, &im->part)) != 0)
		rc = mc_fail(mc, err, "user '%s' (create it with `mailctl user add`)", im->user);
	else if (whole && (rc = mc_sieve_import(mc, im->user, im->path, true, NULL)) != MC_OK) {
		/* a script that does not compile: said, before any mail is imported */
	} else if (whole && (rc = read_memories(mc, im->path, &ms)) != MC_OK) {
		/* so is a bad heron-sieve-memory */
	} else if ((err = store_write(mc->st, im->part, w_mbox_ensure, im)) != 0)
		rc = mc_fail(mc, err, "mailbox '%s' of '%s'", im->mailbox, im->user);
	else {
		if (S_ISDIR(sb.st_mode))
			err = import_maildir_tree(im);
		else if ((fd = open(im->path, O_RDONLY | O_CLOEXEC)) == -1)
			err = STORE_EIO;
		else
			err = import_mbox(im, fd);
		if (err == STORE_EINVAL && !S_ISDIR(sb.st_mode) && im->count == 0) {
			mc_fail(mc, err,
				"%s is not an mbox file (it must start with a From_ line)",
				im->path);
			rc = MC_DATAERR;
		} else if (err != 0)
			rc = mc_fail(mc, err, "import from %s stopped after %" PRIu64 " messages",
				     im->path, im->count);
		else if (!whole || ((rc = mc_sieve_import(mc, im->user, im->path, false,
							  &im->nscripts)) == MC_OK &&
				    (rc = restore_memories(im, &ms)) == MC_OK))
			import_report(mc, im);
	}
	if (fd != -1)
		close(fd);
	free(ms.v);
	for (size_t i = 0; i < MAILDIR_KWS; i++)
		free(im->kwletters[i]);
	free(im);
	return rc;
}

/* ------------------------------------------------------------------------------------- */
/* export */

struct exp {
	struct mc *mc;
	const char *path;
	bool maildir;
	int out_fd, dirfd;
	struct wr *w;
	const char *names[STORE_MAX_KEYWORDS];
	unsigned nkw;
	uint64_t count, bytes;
	int err;
	FILE *uidlist; /* Maildir: dovecot-uidlist, so an import keeps the UID order */
};

static void mbox_flag_headers(struct wr *w, const struct store_msg *m, const struct exp *e)
{
	char xs[8];
	size_t n = 0;

	wr_put(w, m->flags & STORE_SEEN ? "Status: RO\n" : "Status: O\n",
	       m->flags & STORE_SEEN ? 11 : 10);
	if (m->flags & STORE_ANSWERED)
		xs[n++] = 'A';
	if (m->flags & STORE_FLAGGED)
		xs[n++] = 'F';
	if (m->flags & STORE_DRAFT)
		xs[n++] = 'T';
	if (m->flags & STORE_DELETED)
		xs[n++] = 'D';
	if (n > 0) {
		wr_put(w, "X-Status: ", 10);
		wr_put(w, xs, n);
		wr_put(w, "\n", 1);
	}
	if (m->keywords == 0)
		return;
	wr_put(w, "X-Keywords:", 11);
	for (unsigned i = 0; i < e->nkw; i++)
		if (m->keywords & ((uint64_t)1 << i)) {
			wr_put(w, " ", 1);
			wr_put(w, e->names[i], strlen(e->names[i]));
		}
	wr_put(w, "\n", 1);
}

/* One message as mboxrd from its file fd. */
static int export_mbox_msg(struct exp *e, const struct store_msg *m, int fd)
{
	struct rd *r = xcalloc(1, sizeof(*r));
	struct wr *w = e->w;
	bool start = true, complete = true, header = true;
	char line[128], date[64];
	struct tm tm;
	time_t tt = (time_t)m->internaldate;
	const char *p;
	size_t len;
	int n;

	gmtime_r(&tt, &tm);
	strftime(date, sizeof(date), "%a %b %e %H:%M:%S %Y", &tm);
	snprintf(line, sizeof(line), "From MAILER-DAEMON %s\n", date);
	wr_put(w, line, strlen(line));
	r->fd = fd;
	while ((n = rd_piece(r, &p, &len, &complete)) == 1) {
		if (complete && len > 0 && p[len - 1] == '\r')
			len--;
		if (start && header && len == 0 && complete) {
			mbox_flag_headers(w, m, e);
			header = false;
		}
		if (start && len >= 5) {
			size_t q = 0;

			while (q < len && p[q] == '>')
				q++;
			if (is_from_line(p + q, len - q))
				wr_put(w, ">", 1);
		}
		wr_put(w, p, len);
		if (complete)
			wr_put(w, "\n", 1);
		start = complete;
	}
	if (!start)
		wr_put(w, "\n", 1);
	if (header)
		mbox_flag_headers(w, m, e);
	wr_put(w, "\n", 1);
	free(r);
	return n < 0 ? errno : w->err;
}

static void maildir_name(char *buf, size_t size, const struct exp *e, const struct store_msg *m)
{
	char info[64];
	size_t n = 0;

	if (m->flags & STORE_DRAFT)
		info[n++] = 'D';
	if (m->flags & STORE_FLAGGED)
		info[n++] = 'F';
	if (m->flags & STORE_ANSWERED)
		info[n++] = 'R';
	if (m->flags & STORE_SEEN)
		info[n++] = 'S';
	if (m->flags & STORE_DELETED)
		info[n++] = 'T';
	for (unsigned i = 0; i < e->nkw && i < MAILDIR_KWS; i++)
		if (m->keywords & ((uint64_t)1 << i))
			info[n++] = (char)('a' + i);
	info[n] = '\0';
	snprintf(buf, size,
		 "%" PRId64 ".M%010" PRIu32 "P%d.heron,S=%" PRIu64 ",W=%" PRIu64 ":2,%s",
		 m->internaldate, m->uid, (int)getpid(), m->size, m->size, info);
}

/* One message as a Maildir file: tmp/, then cur/ with its flags; mtime = internal date. */
static int export_maildir_msg(struct exp *e, const struct store_msg *m, int fd)
{
	char name[256], tmp[300], cur[300], buf[RD_SIZE];
	struct timespec ts[2] = { { (time_t)m->internaldate, 0 }, { (time_t)m->internaldate, 0 } };
	ssize_t n;
	int out, rc;

	maildir_name(name, sizeof(name), e, m);
	if (e->uidlist != NULL)
		fprintf(e->uidlist, "%" PRIu32 " M%" PRIu64 " :%.*s\n", m->uid, m->modseq,
			(int)strcspn(name, ":"), name);
	snprintf(tmp, sizeof(tmp), "tmp/%s", name);
	snprintf(cur, sizeof(cur), "cur/%s", name);
	if ((out = openat(e->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == -1)
		return errno;
	e->w->fd = out;
	e->w->b = NULL;
	while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			wr_put(e->w, buf, (size_t)n);
	wr_flush(e->w);
	rc = n < 0 ? errno : e->w->err;
	if (rc == 0 && futimens(out, ts) == -1)
		rc = errno;
	if (close(out) == -1 && rc == 0)
		rc = errno;
	if (rc == 0 && renameat(e->dirfd, tmp, e->dirfd, cur) == -1)
		rc = errno;
	return rc;
}

static int export_keywords_file(struct exp *e)
{
	FILE *f;
	int fd;

	if (e->nkw == 0)
		return 0;
	if ((fd = openat(e->dirfd, "dovecot-keywords", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			 0600)) == -1 ||
	    (f = fdopen(fd, "w")) == NULL)
		return errno;
	for (unsigned i = 0; i < e->nkw && i < MAILDIR_KWS; i++)
		fprintf(f, "%u %s\n", i, e->names[i]);
	if (e->nkw > MAILDIR_KWS)
		fprintf(stderr,
			"mailctl: warning: only the first %d keywords fit Maildir "
			"letters; the others are not exported\n",
			MAILDIR_KWS);
	return fclose(f) == 0 ? 0 : errno;
}

static int export_open(struct exp *e)
{
	if (!e->maildir) {
		e->out_fd = open(e->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		return e->out_fd == -1 ? errno : 0;
	}
	if (mkdir(e->path, 0700) == -1)
		return errno;
	if ((e->dirfd = open(e->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return errno;
	if (mkdirat(e->dirfd, "cur", 0700) == -1 || mkdirat(e->dirfd, "new", 0700) == -1 ||
	    mkdirat(e->dirfd, "tmp", 0700) == -1)
		return errno;
	return 0;
}

/* Writing an annotations file (md_annotations reads it): made at the first entry. */
struct annot_out {
	int dirfd;
	const char *name;
	FILE *f;
	int err; /* errno */
};

static int annot_out_row(const struct store_annot *an, void *arg)
{
	struct annot_out *o = arg;
	int fd;

	if (o->f == NULL && ((fd = openat(o->dirfd, o->name,
					  O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == -1 ||
			     (o->f = fdopen(fd, "w")) == NULL))
		return o->err = errno;
	fprintf(o->f, "%.*s ", (int)an->entry_len, an->entry);
	for (size_t i = 0; i < an->value_len; i++)
		fprintf(o->f, "%02x", ((const unsigned char *)an->value)[i]);
	fputc('\n', o->f);
	return 0;
}

/* Every annotation of owner that user sees into the file name of dirfd (none: no file).
   A store error, or e->err set to an errno. */
static int export_annots(struct exp *e, struct store_txn *t, int dirfd, const char *name,
			 uint64_t owner, uint64_t user)
{
	struct annot_out o = { dirfd, name, NULL, 0 };
	int rc = store_annot_all(t, owner, user, annot_out_row, &o);

	if (o.f != NULL && fclose(o.f) != 0 && o.err == 0)
		o.err = errno;
	if (o.err != 0) {
		e->err = e->err ? e->err : o.err;
		return 0;
	}
	return rc;
}

static int history_row(uint32_t uid, uint64_t modseq, int64_t when, void *arg)
{
	fprintf(arg, "%" PRIu32 " %" PRIu64 " %" PRId64 "\n", uid, modseq, when);
	return 0;
}

/* The mailbox's expunge history (QRESYNC) into heron-expunged: "floor N" (exact for MODSEQs
   from N on), then "UID MODSEQ TIME" a line. */
static int export_history(struct exp *e, struct store_txn *t, uint64_t mbox)
{
	struct store_status st;
	FILE *f;
	int fd, rc;

	if ((rc = store_mbox_status(t, mbox, &st)) != 0)
		return rc;
	if ((fd = openat(e->dirfd, "heron-expunged", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			 0600)) == -1 ||
	    (f = fdopen(fd, "w")) == NULL) {
		e->err = errno;
		if (fd != -1)
			close(fd);
		return 0;
	}
	fprintf(f, "floor %" PRIu64 "\n", st.expunge_floor);
	rc = store_msg_history(t, mbox, history_row, f);
	if (fclose(f) != 0 && e->err == 0)
		e->err = errno;
	return rc;
}

/* dovecot-uidlist's header: version 3, UIDVALIDITY and the next UID. */
static int export_uidlist_open(struct exp *e, struct store_txn *t, uint64_t mbox)
{
	struct store_status st;
	int fd, rc;

	if ((rc = store_mbox_status(t, mbox, &st)) != 0)
		return rc;
	if ((fd = openat(e->dirfd, "dovecot-uidlist", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			 0600)) == -1 ||
	    (e->uidlist = fdopen(fd, "w")) == NULL) {
		e->err = errno;
		return 0;
	}
	fprintf(e->uidlist, "3 V%" PRIu32 " N%" PRIu32 " M%" PRIu64 "\n", st.uidvalidity,
		st.uidnext, st.highestmodseq);
	return 0;
}

/* Walks the mailbox in one read snapshot, writing each message. */
static int export_walk(struct exp *e, struct store_txn *t, uint64_t mbox)
{
	struct store_iter *it;
	struct store_msg m;
	int rc, fd;
	uint64_t size;

	if ((rc = store_msg_iter(t, mbox, 1, UINT32_MAX, 0, &it)) != 0)
		return rc;
	while (e->err == 0 && (rc = store_iter_next(it, &m)) == 1) {
		if ((rc = store_blob_open(e->mc->st, STORE_ID_PART(mbox), m.blob, &fd, &size)) !=
		    0) {
			fprintf(stderr,
				"mailctl: message %" PRIu32 ": %s; skipped (run `mailctl "
				"verify`)\n",
				m.uid, store_strerror(rc));
			continue;
		}
		e->err = e->maildir ? export_maildir_msg(e, &m, fd) : export_mbox_msg(e, &m, fd);
		close(fd);
		e->count += e->err == 0;
		e->bytes += e->err == 0 ? m.size : 0;
	}
	store_iter_free(&it);
	return rc;
}

/* One mailbox of user into path (an mbox file or a Maildir that must not exist yet); adds
   to *count and *bytes. Returns an exit code after saying what failed. */
static int export_mailbox(struct mc *mc, const char *user, const char *mailbox, const char *path,
			  bool maildir, uint64_t *count, uint64_t *bytes)
{
	struct exp e = { .mc = mc, .path = path, .maildir = maildir, .out_fd = -1, .dirfd = -1 };
	struct store_txn *t;
	struct store_user u;
	uint64_t mbox;
	int rc;

	if ((rc = mc_begin(mc, user, mailbox, STORE_TXN_READ, &t, &u, &mbox)) != MC_OK)
		return rc;
	if ((e.err = export_open(&e)) != 0) {
		store_txn_abort(&t);
		return mc_refuse(mc, e.err == EEXIST ? MC_REFUSED : MC_CANTCREAT,
				 e.err == ENOENT ? "its parent directory must exist"
						 : "choose a path that does not exist yet",
				 "%s: %s", e.path, strerror(e.err));
	}
	e.w = xcalloc(1, sizeof(*e.w));
	e.w->fd = e.out_fd;
	if ((rc = store_mbox_keywords(t, mbox, e.names, &e.nkw)) == 0 && e.maildir &&
	    (e.err = export_keywords_file(&e)) == 0)
		rc = export_uidlist_open(&e, t, mbox);
	if (rc == 0 && e.err == 0)
		rc = export_walk(&e, t, mbox);
	if (rc == 0 && e.err == 0 && e.maildir)
		rc = export_annots(&e, t, e.dirfd, "heron-metadata", mbox, u.id);
	if (rc == 0 && e.err == 0 && e.maildir)
		rc = export_history(&e, t, mbox);
	store_txn_abort(&t);
	if (e.uidlist != NULL && fclose(e.uidlist) != 0)
		e.err = e.err ? e.err : errno;
	if (!e.maildir) {
		wr_flush(e.w);
		e.err = e.err ? e.err : e.w->err;
		if (fsync(e.out_fd) == -1 || close(e.out_fd) == -1)
			e.err = e.err ? e.err : errno;
	} else if (e.dirfd != -1) {
		if (syncfs(e.dirfd) == -1)
			e.err = e.err ? e.err : errno;
		close(e.dirfd);
	}
	free(e.w);
	if (rc != 0)
		return mc_fail(mc, rc, "export of '%s'", mailbox);
	if (e.err != 0) {
		return mc_refuse(mc, MC_ERR, "see the free space and permissions there",
				 "writing %s: %s", e.path, strerror(e.err));
	}
	*count += e.count;
	*bytes += e.bytes;
	return MC_OK;
}

struct boxes {
	char **names;
	unsigned *special;
	bool *subscribed;
	size_t n;
};

static int box_add(const struct store_mbox_info *mi, void *arg)
{
	struct boxes *b = arg;

	b->names = xreallocarray(b->names, b->n + 1, sizeof(*b->names));
	b->special = xreallocarray(b->special, b->n + 1, sizeof(*b->special));
	b->subscribed = xreallocarray(b->subscribed, b->n + 1, sizeof(*b->subscribed));
	b->names[b->n] = xstrndup(mi->name, mi->name_len);
	b->special[b->n] = mi->attrs & STORE_MBOX_NOSELECT ? UINT32_MAX : mi->special;
	b->subscribed[b->n++] = (mi->attrs & STORE_MBOX_SUBSCRIBED) != 0;
	return 0;
}

static void boxes_clear(struct boxes *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->names[i]);
	free(b->names);
	free(b->special);
	free(b->subscribed);
	memset(b, 0, sizeof(*b));
}

/* The Maildir++ folder of a mailbox below dir: ".A.B" for A/B, a '.' in a level as %2E. */
char *mc_folder_path(const char *dir, const char *name)
{
	struct buf b;
	char *out;

	buf_init(&b, 64, FOLDER_PATH_MAX);
	buf_append(&b, dir, strlen(dir));
	buf_append(&b, "/.", 2);
	for (const char *c = name; *c != '\0'; c++)
		buf_append(&b,
			   *c == '/'   ? "."
			   : *c == '.' ? "%2E"
			   : *c == '%' ? "%25"
				       : c,
			   *c == '.' || *c == '%' ? 3 : 1);
	buf_append(&b, "", 1);
	out = xstrdup((const char *)b.data);
	buf_release(&b);
	return out;
}

/* The user's mailboxes (selectable ones) and subscriptions, in one snapshot. */
static int user_boxes(struct mc *mc, const char *user, struct boxes *all, struct boxes *subs)
{
	struct store_txn *t;
	struct store_user u;
	int rc;

	if ((rc = mc_begin(mc, user, NULL, STORE_TXN_READ, &t, &u, NULL)) != MC_OK)
		return rc;
	if ((rc = store_mbox_list(t, u.id, "*", false, box_add, all)) == 0)
		rc = store_mbox_list(t, u.id, "*", true, box_add, subs);
	store_txn_abort(&t);
	return rc != 0 ? mc_fail(mc, rc, "mailboxes of '%s'", user) : MC_OK;
}

static int write_subscriptions(const char *dir, const struct boxes *subs)
{
	char p[4200];
	FILE *f;

	snprintf(p, sizeof(p), "%s/subscriptions", dir);
	if ((f = fopen(p, "wx")) == NULL)
		return errno;
	for (size_t i = 0; i < subs->n; i++)
		fprintf(f, "%s\n", subs->names[i]);
	return fclose(f) == 0 ? 0 : errno;
}

/* The special-use attributes (RFC 6154) of the user's mailboxes into DIR/heron-special-use,
   a line "MASK NAME" (enum store_special in hexadecimal) for each mailbox that has any. */
static int write_special_use(const char *dir, const struct boxes *all)
{
	char p[4200];
	FILE *f;

	snprintf(p, sizeof(p), "%s/heron-special-use", dir);
	if ((f = fopen(p, "wx")) == NULL)
		return errno;
	for (size_t i = 0; i < all->n; i++)
		if (all->special[i] != 0 && all->special[i] != UINT32_MAX)
			fprintf(f, "%x %s\n", all->special[i], all->names[i]);
	return fclose(f) == 0 ? 0 : errno;
}

/* The user's server annotations (METADATA-SERVER) into DIR/heron-server-metadata. */
static int export_server_annots(struct mc *mc, const char *user, const char *dir)
{
	struct exp e = { .mc = mc };
	struct store_txn *t;
	struct store_user u;
	int rc, fd;

	if ((rc = mc_begin(mc, user, NULL, STORE_TXN_READ, &t, &u, NULL)) != MC_OK)
		return rc;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		e.err = errno;
	else
		rc = export_annots(&e, t, fd, "heron-server-metadata", u.id, u.id);
	store_txn_abort(&t);
	if (fd != -1)
		close(fd);
	if (rc != 0)
		return mc_fail(mc, rc, "server annotations of '%s'", user);
	if (e.err != 0)
		return mc_refuse(mc, MC_ERR, "see the free space and permissions there",
				 "writing %s/heron-server-metadata: %s", dir, strerror(e.err));
	return MC_OK;
}

/* export USER DIR: INBOX as the Maildir DIR, every other mailbox as its Maildir++ folder,
   the subscriptions in DIR/subscriptions, the Sieve memories in DIR/heron-sieve-memory;
   `mailctl import USER DIR` reads it back. */
int mc_export_user(struct mc *mc, const char *user, const char *dir, uint64_t *count,
		   uint64_t *bytes, size_t *nboxes)
{
	struct boxes all = { 0 }, subs = { 0 };
	int rc, err;

	if ((rc = user_boxes(mc, user, &all, &subs)) != MC_OK)
		goto out;
	if ((rc = export_mailbox(mc, user, "INBOX", dir, true, count, bytes)) != MC_OK)
		goto out;
	*nboxes = 1;
	for (size_t i = 0; i < all.n && rc == MC_OK; i++) {
		char *path;

		if (all.special[i] == UINT32_MAX ||
		    str_caseeq(all.names[i], strlen(all.names[i]), "INBOX", 5))
			continue; /* \Noselect (made again as a parent) or INBOX (done) */
		path = mc_folder_path(dir, all.names[i]);
		rc = export_mailbox(mc, user, all.names[i], path, true, count, bytes);
		*nboxes += rc == MC_OK;
		free(path);
	}
	if (rc == MC_OK && (err = write_subscriptions(dir, &subs)) != 0) {
		fprintf(stderr, "mailctl: writing %s/subscriptions: %s\n", dir, strerror(err));
		rc = MC_ERR;
	}
	if (rc == MC_OK && (err = write_special_use(dir, &all)) != 0) {
		fprintf(stderr, "mailctl: writing %s/heron-special-use: %s\n", dir, strerror(err));
		rc = MC_ERR;
	}
	if (rc == MC_OK)
		rc = export_server_annots(mc, user, dir);
	if (rc == MC_OK)
		rc = export_memories(mc, user, dir);
out:
	boxes_clear(&all);
	boxes_clear(&subs);
	return rc;
}

int mc_export(struct mc *mc, const struct mc_args *a)
{
	bool whole = a->npos == 2, maildir = a->set[0] && strcmp(a->val[0], "maildir") == 0;
	const char *path = a->pos[a->npos - 1];
	uint64_t count = 0, bytes = 0;
	size_t nboxes = 0;
	int rc;

	if (a->set[0] && !maildir && strcmp(a->val[0], "mbox") != 0)
		return mc_usage(mc, "--format is mbox or maildir");
	if (whole && a->set[0] && !maildir)
		return mc_usage(mc, "a whole user is exported as Maildir++ (mbox: one MAILBOX)");
	if (whole && (rc = mc_export_user(mc, a->pos[0], path, &count, &bytes, &nboxes)) == MC_OK)
		rc = mc_sieve_export(mc, a->pos[0], path); /* the move copies them itself */
	else if (!whole)
		rc = export_mailbox(mc, a->pos[0], a->pos[1], path, maildir, &count, &bytes);
	if (rc != MC_OK)
		return rc;
	if (mc->json) {
		printf("{\"exported\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"format\": \"%s\", "
		       "\"mailboxes\": %zu, \"path\": ",
		       count, bytes, whole || maildir ? "maildir" : "mbox", whole ? nboxes : 1);
		mc_json_str(stdout, path, strlen(path));
		puts("}");
	} else
		printf("exported %" PRIu64 " message%s (%" PRIu64 " bytes) %sto %s\n", count,
		       count == 1 ? "" : "s", bytes, whole ? "of every mailbox " : "", path);
	return MC_OK;
}
