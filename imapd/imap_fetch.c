/* imap_fetch.c — owns FETCH items: a table of every item (its name, its parser, and its
 * per-message writer), the items of one FETCH, and one message's "* n FETCH (...)" line:
 * rendering from the store's message cache (ENVELOPE, BODY[STRUCTURE], headers; where the
 * cache is missing or its header cut, from the message file: imap_msgfile.c), body
 * sections from the part table with pread, BINARY[part]<partial> and BINARY.SIZE decoded
 * while streamed, large literals streamed with back-pressure. The command (sequence set,
 * CHANGEDSINCE/VANISHED, the implicit \Seen) is cmd_fetch.c. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/msgcache.h"
#include "common/rfc5322.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

#define FETCH_ITEMS_MAX 64
#define FETCH_FIELDS_MAX 64
#define PREVIEW_MAX 1024 /* PREVIEW text read (RFC 8970: at most 256 characters sent) */

enum fetch_sec { SEC_ALL, SEC_HEADER, SEC_FIELDS, SEC_FIELDS_NOT, SEC_TEXT, SEC_MIME };

/* A BINARY section of the message being written (RFC 3516), found before its FETCH line. */
struct fetch_binary {
	bool exists; /* false: NIL */
	enum cte cte;
	uint64_t off, len; /* the encoded body in the file */
	uint64_t size;     /* decoded */
	bool nul;          /* decodes to a NUL: literal8 */
};

struct fetch_def;

/* One item asked for; the section fields only for BODY[...] and BINARY[...] items. */
struct fetch_item {
	const struct fetch_def *def;
	enum fetch_sec sec;
	char part[64];           /* "1.2", "" for the message */
	struct str_view *fields; /* HEADER.FIELDS names, only for those items */
	size_t nfields;
	bool partial;
	uint64_t p_off, p_len;
	char *label;             /* "BODY[1.HEADER]" as it is answered */
	char *fields_text;       /* storage behind fields[] */
	struct fetch_binary bin; /* BINARY: the part in the current message */
};

struct imap_fetch {
	struct fetch_item items[FETCH_ITEMS_MAX];
	size_t n;
	size_t item;            /* next item of the message being written (0: none) */
	bool sets_seen;         /* a non-PEEK body item */
	char *scratch;          /* BINARY size pass: chunk + CTE_DECODE_LEAD, once */
	struct imap_msgfile mf; /* the message's cache or header read from its file */
};

/* What an item's writer sees of the message being written. */
struct fetch_msg {
	struct imap_client *c;
	struct imap_fetch *f;
	struct store_txn *t;
	const struct store_msg *m;
	const struct msgcache_view *mv;
	bool recent;
	const char *why; /* a writer's or prepare's -1 */
};

/* Item flags. */
enum {
	FD_SECTION = 1u << 0, /* name ends in '[': a section (and partial) follows */
	FD_SEEN = 1u << 1,    /* sets \Seen (RFC 3501 6.4.5) */
	FD_MODSEQ = 1u << 2,  /* enables CONDSTORE (RFC 7162 3.1) */
};

/* An item: parse reads the text after the name (from '[' on; NULL for plain atoms);
   prepare runs before the message's FETCH line (0, -1 fails the FETCH); write answers the
   item for one message: 1 written, 0 written with its body left streaming (the message
   resumes at the next item once the stream is out), -1 cannot be written (*why). */
struct fetch_def {
	const char *name;
	const char *label; /* section items: the name they are answered with */
	unsigned flags;
	int (*parse)(struct fetch_item *it, const char *s, size_t len);
	int (*prepare)(struct fetch_msg *fm, struct fetch_item *it);
	int (*write)(struct fetch_msg *fm, const struct fetch_item *it);
};

static void item_free(struct fetch_item *it)
{
	free(it->label);
	free(it->fields_text);
	free(it->fields);
}

struct imap_fetch *imap_fetch_new(void)
{
	return xcalloc(1, sizeof(struct imap_fetch));
}

void imap_fetch_free(struct imap_fetch **fp)
{
	struct imap_fetch *f = *fp;

	if (f == NULL)
		return;
	for (size_t i = 0; i < f->n; i++)
		item_free(&f->items[i]);
	free(f->scratch);
	imap_msgfile_release(&f->mf);
	free(f);
	*fp = NULL;
}

/* A new item of def; an item without a section asked twice (UID in UID FETCH, FLAGS in a
   macro) is answered once. NULL when there are too many. */
static struct fetch_item *item_add(struct imap_fetch *f, const struct fetch_def *def)
{
	struct fetch_item *it;

	for (size_t i = 0; i < f->n && !(def->flags & FD_SECTION); i++)
		if (f->items[i].def == def)
			return &f->items[i];
	if (f->n >= FETCH_ITEMS_MAX)
		return NULL;
	it = &f->items[f->n++];
	memset(it, 0, sizeof(*it));
	it->def = def;
	if (def->flags & FD_SEEN)
		f->sets_seen = true;
	return it;
}

static bool part_number_ok(const char *p, size_t len)
{
	bool digit = false;

	for (size_t i = 0; i < len; i++) {
		if (p[i] >= '0' && p[i] <= '9') {
			if (!digit && p[i] == '0')
				return false;
			digit = true;
		} else if (p[i] == '.' && digit) {
			digit = false;
		} else {
			return false;
		}
	}
	return digit;
}

/* Parses "(From To)" (names as atoms or quoted strings) into it->fields. */
static int parse_fields(struct fetch_item *it, const char *s, size_t len)
{
	size_t i = 0;
	char *dst;

	if (len < 2 || s[0] != '(' || s[len - 1] != ')')
		return -1;
	it->fields_text = dst = xmalloc(len + 1);
	it->fields = xcalloc(FETCH_FIELDS_MAX, sizeof(*it->fields));
	s++;
	len -= 2;
	while (i < len) {
		size_t start;
		char *name = dst;

		if (s[i] == ' ') {
			i++;
			continue;
		}
		if (it->nfields >= FETCH_FIELDS_MAX)
			return -1;
		if (s[i] == '"') {
			for (i++; i < len && s[i] != '"'; i++) {
				if (s[i] == '\\' && i + 1 < len)
					i++;
				*dst++ = s[i];
			}
			if (i++ >= len)
				return -1;
		} else {
			for (start = i; i < len && s[i] != ' '; i++)
				if ((unsigned char)s[i] <= 0x20 || s[i] == ':' || s[i] == '(')
					return -1;
			memcpy(dst, s + start, i - start);
			dst += i - start;
		}
		if (dst == name)
			return -1;
		it->fields[it->nfields].p = name;
		it->fields[it->nfields++].len = (size_t)(dst - name);
	}
	return it->nfields > 0 ? 0 : -1;
}

/* "1.2.HEADER.FIELDS (a b)" etc. inside the brackets. */
static int parse_section(struct fetch_item *it, const char *s, size_t len)
{
	size_t i = 0;
	const char *spec;
	size_t slen;

	/* the part number: digits and dots up to the first letter */
	while (i < len && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.'))
		i++;
	if (i > 0) {
		size_t plen = i;

		if (i < len) {
			if (s[i - 1] != '.')
				return -1;
			plen = i - 1;
		}
		if (plen >= sizeof(it->part) || !part_number_ok(s, plen))
			return -1;
		memcpy(it->part, s, plen);
		it->part[plen] = '\0';
	}
	spec = s + i;
	slen = len - i;
	if (slen == 0)
		it->sec = SEC_ALL;
	else if (str_caseeq(spec, slen, "HEADER", 6))
		it->sec = SEC_HEADER;
	else if (str_caseeq(spec, slen, "TEXT", 4))
		it->sec = SEC_TEXT;
	else if (str_caseeq(spec, slen, "MIME", 4) && it->part[0] != '\0')
		it->sec = SEC_MIME;
	else if (str_caseprefix(spec, slen, "HEADER.FIELDS.NOT ")) {
		it->sec = SEC_FIELDS_NOT;
		return parse_fields(it, spec + 18, slen - 18);
	} else if (str_caseprefix(spec, slen, "HEADER.FIELDS ")) {
		it->sec = SEC_FIELDS;
		return parse_fields(it, spec + 14, slen - 14);
	} else
		return -1;
	return 0;
}

/* Parses "<a.b>" after a section into it; 0, or -1 when malformed. */
static int parse_partial(struct fetch_item *it, const char *s, size_t len)
{
	const char *dot = memchr(s, '.', len);
	uint64_t a, b;

	if (s[0] != '<' || s[len - 1] != '>' || dot == NULL ||
	    str_to_u64(s + 1, (size_t)(dot - s) - 1, UINT32_MAX, &a) < 0 ||
	    str_to_u64(dot + 1, (size_t)(s + len - 1 - dot) - 1, UINT32_MAX, &b) < 0 || b == 0)
		return -1;
	it->partial = true;
	it->p_off = a;
	it->p_len = b;
	return 0;
}

/* The "[section]<partial>" after BODY or BODY.PEEK. */
static int parse_body(struct fetch_item *it, const char *s, size_t len)
{
	const char *close = memchr(s, ']', len);
	size_t seclen;

	if (len == 0 || s[0] != '[' || close == NULL)
		return -1;
	seclen = (size_t)(close - s) - 1;
	if (parse_section(it, s + 1, seclen) < 0)
		return -1;
	if (len > seclen + 2 && parse_partial(it, close + 1, len - seclen - 2) < 0)
		return -1;
	it->label = xasprintf("%s[%.*s]", it->def->label, (int)seclen, s + 1);
	return 0;
}

/* The "[part]<partial>" after BINARY or BINARY.PEEK: section-binary is part numbers only. */
static int parse_binary(struct fetch_item *it, const char *s, size_t len)
{
	if (parse_body(it, s, len) < 0 || it->sec != SEC_ALL)
		return -1;
	return 0;
}

/* The "[part]" after BINARY.SIZE: no partial. */
static int parse_binary_size(struct fetch_item *it, const char *s, size_t len)
{
	if (parse_binary(it, s, len) < 0 || it->partial)
		return -1;
	return 0;
}

/* Writes bytes [off, off+len) of the message file as a literal, cut to the item's partial
   range (it NULL: whole), streamed: a writer's 1/0/-1. */
static int write_file_literal(struct fetch_msg *fm, uint64_t off, uint64_t len,
			      const struct fetch_item *it)
{
	struct imap_client *c = fm->c;
	int fd;
	uint64_t size;

	if (it != NULL && it->partial) {
		if (it->p_off >= len) {
			imap_write(c, "\"\"", 2);
			return 1;
		}
		off += it->p_off;
		len -= it->p_off;
		if (len > it->p_len)
			len = it->p_len;
	}
	imap_printf(c, "{%" PRIu64 "}\r\n", len);
	if (len == 0)
		return 1;
	if (store_blob_open(c->srv->store, c->view->part, fm->m->blob, &fd, &size) != 0) {
		/* the size is promised: the connection cannot stay in sync */
		imap_client_close(c, "message file missing");
		fm->why = "[SERVERBUG] Message file missing";
		return -1;
	}
	imap_client_stream_text(c, fd, off, len);
	return c->stream.fd < 0 ? 1 : 0;
}

/* Writes a string produced in memory (header subsets) as a literal, with partial. */
static void write_mem_literal(struct imap_client *c, const char *p, size_t len,
			      const struct fetch_item *it)
{
	if (it != NULL && it->partial) {
		if (it->p_off >= len) {
			imap_write(c, "\"\"", 2);
			return;
		}
		p += it->p_off;
		len -= (size_t)it->p_off;
		if (len > it->p_len)
			len = (size_t)it->p_len;
	}
	imap_printf(c, "{%zu}\r\n", len);
	imap_write_text(c, p, len);
}

/* Reads a header block from the file (a part's header: small). */
static int read_header(struct imap_client *c, unsigned part, const struct store_msg *m,
		       uint64_t off, uint64_t len, struct buf *out)
{
	int fd;
	uint64_t size;
	char *dst;
	ssize_t n;

	if (len > IMAP_HEADER_FILE_MAX ||
	    store_blob_open(c->srv->store, part, m->blob, &fd, &size) != 0)
		return -1;
	if ((dst = buf_reserve(out, (size_t)len)) == NULL) {
		close(fd);
		return -1;
	}
	n = pread(fd, dst, (size_t)len, (off_t)off);
	close(fd);
	if (n != (ssize_t)len)
		return -1;
	buf_commit(out, (size_t)len);
	return 0;
}

/* Whether the cache's copy of the message header was cut (MC_HEADER_MAX): then the header
   items read the file. */
static bool header_cut(const struct fetch_msg *fm)
{
	return fm->mv->header.len < fm->mv->header_size;
}

/* HEADER.FIELDS[.NOT] of the message m of partition part (from the cache mv, or the file
   where the cache's header is cut) or of an embedded message (its header at hoff, hsize in the
   file), into hdr. */
static void header_fields(struct imap_client *c, unsigned part, const struct store_msg *m,
			  const struct msgcache_view *mv, struct imap_msgfile *mf,
			  const struct fetch_item *it, uint64_t hoff, uint64_t hsize,
			  struct buf *hdr)
{
	if (it->part[0] == '\0') {
		struct str_view h;

		if (imap_msgfile_header(c->srv->store, part, m, mv, mf, &h) < 0)
			log_warnx("%016" PRIx64 " imap fetch uid=%u header of %" PRIu64 " bytes "
				  "not read from the file: fields past %zu bytes left out",
				  c->id, m->uid, mv->header_size, h.len);
		rfc5322_header_fields(h.p, h.len, it->fields, it->nfields,
				      it->sec == SEC_FIELDS_NOT, hdr);
	} else {
		struct buf raw;

		buf_init(&raw, 1024, IMAP_HEADER_FILE_MAX);
		if (read_header(c, part, m, hoff, hsize, &raw) == 0)
			rfc5322_header_fields(raw.data, raw.len, it->fields, it->nfields,
					      it->sec == SEC_FIELDS_NOT, hdr);
		else
			buf_puts(hdr, "\r\n");
		buf_release(&raw);
	}
}

/* The fields as a literal (header_fields); never more than the header. */
static void write_header_fields(struct fetch_msg *fm, const struct fetch_item *it, uint64_t hoff,
				uint64_t hsize)
{
	struct buf hdr;

	buf_init(&hdr, 1024, (it->part[0] == '\0' ? fm->mv->header_size : hsize) + 16);
	header_fields(fm->c, fm->c->view->part, fm->m, fm->mv, &fm->f->mf, it, hoff, hsize, &hdr);
	write_mem_literal(fm->c, hdr.data != NULL ? hdr.data : "", hdr.len, it);
	buf_release(&hdr);
}

static int write_uid(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_printf(fm->c, "UID %u", fm->m->uid);
	return 1;
}

static int write_flags(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_write(fm->c, "FLAGS ", 6);
	imap_flags_write(fm->c, fm->m->flags, fm->m->keywords, fm->recent, fm->t);
	/* the session now knows these flags: no second FETCH for them at the next sync */
	imap_view_set_flags(fm->c->view, fm->m->uid, fm->m->flags, fm->m->keywords);
	return 1;
}

/* name "date-time" (RFC 3501), in UTC */
static void write_date_time(struct imap_client *c, const char *name, int64_t when)
{
	static const char mon[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	time_t tt = (time_t)when;
	struct tm tm;

	gmtime_r(&tt, &tm);
	imap_printf(c, "%s \"%02d-%s-%04d %02d:%02d:%02d +0000\"", name, tm.tm_mday,
		    mon[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static int write_internaldate(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	write_date_time(fm->c, "INTERNALDATE", fm->m->internaldate);
	return 1;
}

/* SAVEDATE (RFC 8514): every mailbox keeps it, so never NIL */
static int write_savedate(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	write_date_time(fm->c, "SAVEDATE", fm->m->savedate);
	return 1;
}

static int write_size(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_printf(fm->c, "RFC822.SIZE %" PRIu64, fm->m->size);
	return 1;
}

static int write_modseq(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_printf(fm->c, "MODSEQ (%" PRIu64 ")", fm->m->modseq);
	return 1;
}

static int write_emailid(struct fetch_msg *fm, const struct fetch_item *it)
{
	char id[IMAP_OBJECTID_MAX];

	(void)it;
	imap_emailid(fm->m->blob, id);
	imap_printf(fm->c, "EMAILID (%s)", id);
	return 1;
}

/* THREADID NIL: threads have no object id here (RFC 8474 5.2 allows NIL) */
static int write_threadid(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_write(fm->c, "THREADID NIL", 12);
	return 1;
}

/* PREVIEW (RFC 8970): computed from the message file each time (LAZY changes nothing). */
static int write_preview(struct fetch_msg *fm, const struct fetch_item *it)
{
	struct imap_client *c = fm->c;
	struct buf pv;
	int fd;
	uint64_t size;
	bool any = false;

	(void)it;
	buf_init(&pv, 256, PREVIEW_MAX);
	if (store_blob_open(c->srv->store, c->view->part, fm->m->blob, &fd, &size) == 0) {
		any = imap_text_preview(fd, size, &pv);
		close(fd);
	}
	imap_write(c, "PREVIEW ", 8);
	if (!any)
		imap_write(c, "NIL", 3);
	else if (c->utf8)
		imap_write_utf8(c, pv.data != NULL ? pv.data : "", pv.len);
	else
		imap_write_string(c, pv.data != NULL ? pv.data : "", pv.len);
	buf_release(&pv);
	return 1;
}

static int write_envelope(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_printf(fm->c, "ENVELOPE %.*s", (int)fm->mv->envelope.len, fm->mv->envelope.p);
	return 1;
}

static int write_body(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_printf(fm->c, "BODY %.*s", (int)fm->mv->body.len, fm->mv->body.p);
	return 1;
}

static int write_bodystructure(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_printf(fm->c, "BODYSTRUCTURE %.*s", (int)fm->mv->bodystructure.len,
		    fm->mv->bodystructure.p);
	return 1;
}

static int write_rfc822_header(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_write(fm->c, "RFC822.HEADER ", 14);
	if (header_cut(fm))
		return write_file_literal(fm, 0, fm->mv->header_size, NULL);
	write_mem_literal(fm->c, fm->mv->header.p, fm->mv->header.len, NULL);
	return 1;
}

static int write_rfc822(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_write(fm->c, "RFC822 ", 7);
	return write_file_literal(fm, 0, fm->m->size, NULL);
}

static int write_rfc822_text(struct fetch_msg *fm, const struct fetch_item *it)
{
	(void)it;
	imap_write(fm->c, "RFC822.TEXT ", 12);
	return write_file_literal(fm, fm->mv->header_size, fm->mv->body_size, NULL);
}

/* BODY[section]<partial>. */
static int write_section(struct fetch_msg *fm, const struct fetch_item *it)
{
	struct imap_client *c = fm->c;
	const struct msgcache_view *mv = fm->mv;
	struct msgcache_part mp;
	uint64_t hoff, hsize, boff, bsize;

	imap_printf(c, "%s", it->label);
	if (it->partial)
		imap_printf(c, "<%" PRIu64 ">", it->p_off);
	imap_write(c, " ", 1);
	if (it->part[0] == '\0') {
		hoff = 0, hsize = mv->header_size, boff = mv->header_size, bsize = mv->body_size;
	} else if (msgcache_part(fm->m->cache, fm->m->cache_len, it->part, &mp) < 0) {
		imap_write(c, "NIL", 3);
		return 1;
	} else if (it->sec == SEC_MIME) {
		return write_file_literal(fm, mp.header_off, mp.header_size, it);
	} else if (it->sec == SEC_ALL) {
		return write_file_literal(fm, mp.body_off, mp.body_size, it);
	} else if (!mp.is_message) {
		imap_write(c, "NIL", 3);
		return 1;
	} else {
		hoff = mp.sub_header_off, hsize = mp.sub_header_size;
		boff = mp.sub_body_off, bsize = mp.sub_body_size;
	}
	switch (it->sec) {
	case SEC_ALL:
		return write_file_literal(fm, 0, mv->size, it);
	case SEC_TEXT:
		return write_file_literal(fm, boff, bsize, it);
	case SEC_HEADER:
		if (it->part[0] == '\0' && !header_cut(fm)) {
			write_mem_literal(c, mv->header.p, mv->header.len, it);
			return 1;
		}
		return write_file_literal(fm, hoff, hsize, it);
	default:
		write_header_fields(fm, it, hoff, hsize);
		return 1;
	}
}

/* The CTE of a part from its MIME header (read from the file at hoff, hsize). */
static enum cte part_cte(struct imap_client *c, const struct store_msg *m, uint64_t hoff,
			 uint64_t hsize)
{
	struct buf raw, val;
	enum cte cte = CTE_IDENTITY;

	buf_init(&raw, 1024, IMAP_HEADER_FILE_MAX);
	buf_init(&val, 64, IMAP_FIELD_MAX);
	if (read_header(c, c->view->part, m, hoff, hsize, &raw) < 0)
		cte = CTE_UNKNOWN; /* cannot tell: refused rather than guessed */
	else if (rfc5322_header_value(raw.data, raw.len, "Content-Transfer-Encoding", &val) > 0)
		cte = cte_parse(val.data, val.len);
	buf_release(&val);
	buf_release(&raw);
	return cte;
}

/* Finds a BINARY item's part in the message and measures its decoded size: 0, or -1 when
   its CTE is unknown (the FETCH then fails with [UNKNOWN-CTE], RFC 3516). BINARY[] is the
   whole message and multipart or message/rfc822 parts are sent as they are. */
static int prepare_binary(struct fetch_msg *fm, struct fetch_item *it)
{
	struct imap_client *c = fm->c;
	const struct store_msg *m = fm->m;
	struct fetch_binary *b = &it->bin;
	struct msgcache_part mp;
	int fd;
	uint64_t fsize;
	int rc;

	memset(b, 0, sizeof(*b));
	if (it->part[0] == '\0') {
		b->off = 0, b->len = m->size;
	} else if (msgcache_part(m->cache, m->cache_len, it->part, &mp) < 0) {
		return 0; /* no such part: NIL */
	} else {
		b->off = mp.body_off, b->len = mp.body_size;
		if (!mp.is_multipart && !mp.is_message)
			b->cte = part_cte(c, m, mp.header_off, mp.header_size);
	}
	if (b->cte == CTE_UNKNOWN)
		goto unknown;
	b->exists = true;
	b->size = b->len;
	if (b->cte == CTE_IDENTITY && it->def->parse == parse_binary_size)
		return 0; /* no NUL scan needed for a size */
	if (store_blob_open(c->srv->store, c->view->part, m->blob, &fd, &fsize) != 0)
		goto unknown;
	if (fm->f->scratch == NULL)
		fm->f->scratch = xmalloc(CTE_CHUNK + CTE_DECODE_LEAD);
	rc = cte_decode_measure(fd, b->off, b->len, b->cte, fm->f->scratch, &b->size, &b->nul);
	close(fd);
	if (rc == 0)
		return 0;
unknown:
	fm->why = "[UNKNOWN-CTE] Cannot decode a part's Content-Transfer-Encoding";
	return -1;
}

/* BINARY.SIZE[part] of the prepared part. */
static int write_binary_size(struct fetch_msg *fm, const struct fetch_item *it)
{
	imap_printf(fm->c, "%s %" PRIu64, it->label, it->bin.exists ? it->bin.size : 0);
	return 1;
}

/* BINARY[part]<partial> of the prepared part. */
static int write_binary(struct fetch_msg *fm, const struct fetch_item *it)
{
	struct imap_client *c = fm->c;
	const struct fetch_binary *b = &it->bin;
	uint64_t skip = 0, emit = b->size;
	int fd;
	uint64_t fsize;

	imap_printf(c, "%s", it->label);
	if (it->partial) {
		imap_printf(c, "<%" PRIu64 ">", it->p_off);
		skip = it->p_off < b->size ? it->p_off : b->size;
		emit = b->size - skip < it->p_len ? b->size - skip : it->p_len;
	}
	if (!b->exists) {
		imap_write(c, " NIL", 4);
		return 1;
	}
	imap_printf(c, " %s{%" PRIu64 "}\r\n", b->nul ? "~" : "", emit);
	if (emit == 0)
		return 1;
	if (store_blob_open(c->srv->store, c->view->part, fm->m->blob, &fd, &fsize) != 0) {
		imap_client_close(c, "message file missing"); /* the size is promised */
		fm->why = "[SERVERBUG] Message file missing";
		return -1;
	}
	if (b->cte == CTE_IDENTITY)
		imap_client_stream(c, fd, b->off + skip, emit);
	else
		imap_client_stream_decoded(c, fd, b->off, b->len, b->cte, skip, emit);
	return c->stream.fd < 0 ? 1 : 0;
}

/* Every item, in the order a name is looked up (a section item matches by its prefix). */
static const struct fetch_def fetch_defs[] = {
	/* name            label          flags                  parse              prepare         write */
	{ "UID", NULL, 0, NULL, NULL, write_uid },
	{ "FLAGS", NULL, 0, NULL, NULL, write_flags },
	{ "INTERNALDATE", NULL, 0, NULL, NULL, write_internaldate },
	{ "SAVEDATE", NULL, 0, NULL, NULL, write_savedate },
	{ "RFC822.SIZE", NULL, 0, NULL, NULL, write_size },
	{ "MODSEQ", NULL, FD_MODSEQ, NULL, NULL, write_modseq },
	{ "ENVELOPE", NULL, 0, NULL, NULL, write_envelope },
	{ "PREVIEW", NULL, 0, NULL, NULL, write_preview },
	{ "EMAILID", NULL, 0, NULL, NULL, write_emailid },
	{ "THREADID", NULL, 0, NULL, NULL, write_threadid },
	{ "BODY", NULL, 0, NULL, NULL, write_body },
	{ "BODYSTRUCTURE", NULL, 0, NULL, NULL, write_bodystructure },
	{ "RFC822.HEADER", NULL, 0, NULL, NULL, write_rfc822_header },
	{ "RFC822.TEXT", NULL, FD_SEEN, NULL, NULL, write_rfc822_text },
	{ "RFC822", NULL, FD_SEEN, NULL, NULL, write_rfc822 },
	{ "BODY[", "BODY", FD_SECTION | FD_SEEN, parse_body, NULL, write_section },
	{ "BODY.PEEK[", "BODY", FD_SECTION, parse_body, NULL, write_section },
	{ "BINARY[", "BINARY", FD_SECTION | FD_SEEN, parse_binary, prepare_binary, write_binary },
	{ "BINARY.PEEK[", "BINARY", FD_SECTION, parse_binary, prepare_binary, write_binary },
	{ "BINARY.SIZE[", "BINARY.SIZE", FD_SECTION, parse_binary_size, prepare_binary,
	  write_binary_size },
};

/* The item named at the start of s (a whole atom, or a section item's prefix through '['):
   *name_len_r is where its parse starts (at the '['). */
static const struct fetch_def *fetch_def_find(const char *s, size_t len, size_t *name_len_r)
{
	for (size_t i = 0; i < sizeof(fetch_defs) / sizeof(fetch_defs[0]); i++) {
		const struct fetch_def *d = &fetch_defs[i];
		size_t nl = strlen(d->name);

		if (d->flags & FD_SECTION) {
			if (!str_caseprefix(s, len, d->name))
				continue;
			*name_len_r = nl - 1;
			return d;
		}
		if (str_caseeq(s, len, d->name, nl)) {
			*name_len_r = nl;
			return d;
		}
	}
	return NULL;
}

/* One item atom. */
static int parse_item(struct imap_fetch *f, const char *s, size_t len)
{
	size_t nl;
	const struct fetch_def *d = fetch_def_find(s, len, &nl);
	struct fetch_item *it;

	if (d == NULL || (it = item_add(f, d)) == NULL)
		return -1;
	return d->parse == NULL ? 0 : d->parse(it, s + nl, len - nl);
}

int imap_fetch_add(struct imap_fetch *f, const char *name)
{
	return parse_item(f, name, strlen(name));
}

bool imap_fetch_in_memory(const struct imap_fetch *f)
{
	for (size_t i = 0; i < f->n; i++) {
		const struct fetch_item *it = &f->items[i];

		if (it->def->flags & FD_SEEN)
			return false;
		if (it->def->write == write_rfc822_header)
			return false;
		if ((it->def->flags & FD_SECTION) &&
		    (it->def->write != write_section ||
		     (it->sec != SEC_FIELDS && it->sec != SEC_FIELDS_NOT)))
			return false;
	}
	return true;
}

int imap_fetch_parse(struct imap_fetch *f, const struct imap_arg *a)
{
	static const char *const macros[][6] = {
		{ "ALL", "FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE", NULL },
		{ "FAST", "FLAGS", "INTERNALDATE", "RFC822.SIZE", NULL, NULL },
		{ "FULL", "FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE", "BODY" },
	};

	if (a->type == IMAP_ARG_ATOM) {
		for (size_t m = 0; m < sizeof(macros) / sizeof(macros[0]); m++) {
			if (!imap_arg_atom_is(a, macros[m][0]))
				continue;
			for (size_t i = 1; i < 6 && macros[m][i] != NULL; i++)
				if (imap_fetch_add(f, macros[m][i]) < 0)
					return -1;
			return 0;
		}
		return parse_item(f, a->s, a->len);
	}
	if (a->type != IMAP_ARG_LIST || a->n == 0)
		return -1;
	for (const struct imap_arg *m = a + 1; m <= a + a->span; m = imap_arg_next(m)) {
		if (m->type != IMAP_ARG_ATOM || parse_item(f, m->s, m->len) < 0)
			return -1;
		/* PREVIEW (LAZY) (RFC 8970 3.1): the modifier list follows the item */
		if (imap_arg_atom_is(m, "PREVIEW") && imap_arg_next(m) <= a + a->span &&
		    imap_arg_next(m)->type == IMAP_ARG_LIST) {
			const struct imap_arg *mods = imap_arg_next(m);

			for (const struct imap_arg *x = mods + 1; x <= mods + mods->span; x++)
				if (!imap_arg_atom_is(x, "LAZY"))
					return -1;
			m = mods;
		}
	}
	return 0;
}

bool imap_fetch_sets_seen(const struct imap_fetch *f)
{
	return f->sets_seen;
}

bool imap_fetch_in_message(const struct imap_fetch *f)
{
	return f->item != 0;
}

bool imap_fetch_condstore(const struct imap_fetch *f)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->items[i].def->flags & FD_MODSEQ)
			return true;
	return false;
}

int imap_fetch_message(struct imap_client *c, struct imap_fetch *f, struct store_txn *t, size_t vi,
		       uint64_t changedsince, const char **why_r)
{
	struct imap_view_msg *vm = &c->view->msgs[vi];
	struct store_msg m;
	struct msgcache_view mv;
	struct fetch_msg fm = { .c = c,
				.f = f,
				.t = t,
				.m = &m,
				.mv = &mv,
				.recent = (vm->flags & IMAP_VF_RECENT) != 0 };

	if (store_msg_get(t, c->view->mbox, vm->uid, &m) != 0 ||
	    imap_view_overlay(c->view, t, &m) != 0 ||
	    (f->item == 0 && changedsince != 0 && m.modseq <= changedsince)) {
		f->item = 0; /* expunged meanwhile (or unchanged): nothing to say about it */
		return 1;
	}
	/* no cache (an older store's "too big to cache"), or a damaged one: built from the file */
	(void)imap_msgfile_cache(c->srv->store, c->view->part, &m, &f->mf, &mv);
	if (f->item == 0) {
		imap_view_keywords_announce(c, t, m.keywords); /* before a FLAGS naming one */
		for (size_t i = 0; i < f->n; i++)
			if (f->items[i].def->prepare != NULL &&
			    f->items[i].def->prepare(&fm, &f->items[i]) < 0) {
				*why_r = fm.why;
				return -1;
			}
		imap_printf(c, "* %zu FETCH (", vi + 1);
	}
	while (f->item < f->n) {
		const struct fetch_item *it = &f->items[f->item++];
		int rc;

		if (f->item > 1)
			imap_write(c, " ", 1);
		if ((rc = it->def->write(&fm, it)) <= 0) {
			if (rc < 0) {
				f->item = 0;
				*why_r = fm.why;
			}
			return rc;
		}
	}
	imap_write(c, ")\r\n", 3);
	f->item = 0;
	return 1;
}

int imap_fetch_section_bytes(struct imap_client *c, unsigned part, const struct store_msg *m,
			     const struct msgcache_view *mv, struct imap_msgfile *mf,
			     const char *section, uint64_t *off_r, uint64_t *len_r,
			     struct buf *out)
{
	struct fetch_item it = { 0 };
	struct msgcache_part mp;
	uint64_t hoff = 0, hsize = mv->header_size, boff = mv->header_size, bsize = mv->body_size;
	int rc = parse_section(&it, section, strlen(section));

	/* as write_section: the part table's ranges */
	if (rc == 0 && it.part[0] != '\0') {
		if (msgcache_part(m->cache, m->cache_len, it.part, &mp) < 0) {
			rc = -1;
		} else if (it.sec == SEC_MIME || it.sec == SEC_ALL) {
			*off_r = it.sec == SEC_MIME ? mp.header_off : mp.body_off;
			*len_r = it.sec == SEC_MIME ? mp.header_size : mp.body_size;
			item_free(&it);
			return 0;
		} else if (!mp.is_message) {
			rc = -1;
		} else {
			hoff = mp.sub_header_off, hsize = mp.sub_header_size;
			boff = mp.sub_body_off, bsize = mp.sub_body_size;
		}
	}
	if (rc == 0) {
		switch (it.sec) {
		case SEC_ALL:
			*off_r = 0, *len_r = mv->size;
			break;
		case SEC_TEXT:
			*off_r = boff, *len_r = bsize;
			break;
		case SEC_HEADER:
			*off_r = hoff, *len_r = hsize;
			break;
		default: /* HEADER.FIELDS[.NOT]: made in memory */
			header_fields(c, part, m, mv, mf, &it, hoff, hsize, out);
			rc = 1;
			break;
		}
	}
	item_free(&it);
	return rc;
}
