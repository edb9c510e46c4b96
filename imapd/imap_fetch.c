/* imap_fetch.c — owns FETCH and UID FETCH: item parsing (macros, BODY[section]<partial>,
 * BODY.PEEK, RFC822.*, BINARY[part]<partial>, BINARY.PEEK, BINARY.SIZE), rendering from the store's message cache (ENVELOPE, BODY[STRUCTURE],
 * headers), body sections from the part table with pread, large literals streamed with
 * back-pressure, and the implicit \Seen of non-PEEK body fetches. */
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
#define INLINE_MAX (16 * 1024) /* bodies up to this size are read at once, larger streamed */

enum fetch_type {
	FI_ENVELOPE, FI_FLAGS, FI_INTERNALDATE, FI_RFC822, FI_RFC822_HEADER, FI_RFC822_SIZE,
	FI_RFC822_TEXT, FI_BODY, FI_BODYSTRUCTURE, FI_UID, FI_MODSEQ, FI_SECTION,
};

enum fetch_sec { SEC_ALL, SEC_HEADER, SEC_FIELDS, SEC_FIELDS_NOT, SEC_TEXT, SEC_MIME };

enum fetch_kind { FK_BODY, FK_BINARY, FK_BINARY_SIZE };

/* A BINARY section of the message being written (RFC 3516), found before its FETCH line. */
struct fetch_binary {
	bool exists;                   /* false: NIL */
	enum imap_cte cte;
	uint64_t off, len;             /* the encoded body in the file */
	uint64_t size;                 /* decoded */
	bool nul;                      /* decodes to a NUL: literal8 */
};

struct fetch_item {
	enum fetch_type type;
	enum fetch_sec sec;
	bool peek;
	char part[64];                 /* "1.2", "" for the message */
	struct str_view *fields;       /* HEADER.FIELDS names, only for those items */
	size_t nfields;
	bool partial;
	uint64_t p_off, p_len;
	char *label;                   /* "BODY[1.HEADER]" as it is answered */
	char *fields_text;             /* storage behind fields[] */
	enum fetch_kind kind;          /* BODY[], BINARY[] or BINARY.SIZE[] */
	struct fetch_binary bin;       /* BINARY: the part in the current message */
};

struct fetch_ctx {
	struct fetch_item items[FETCH_ITEMS_MAX];
	size_t n;
	struct imap_seqset uids;
	size_t next;                   /* next view index */
	size_t item;                   /* next item of the message being written (0: none) */
	bool set_seen;
	bool seen_pending;             /* the implicit \Seen is in the group commit */
	uint64_t changedsince;         /* CONDSTORE: only messages with a higher modseq */
	bool vanished;                 /* QRESYNC: UID FETCH (CHANGEDSINCE n VANISHED) */
	char *scratch;                 /* BINARY size pass: chunk + IMAP_DECODE_LEAD, once */
};

static void fetch_ctx_free(struct imap_cmd *cmd)
{
	struct fetch_ctx *f = cmd->ctx;

	if (f == NULL)
		return;
	for (size_t i = 0; i < f->n; i++) {
		free(f->items[i].label);
		free(f->items[i].fields_text);
		free(f->items[i].fields);
	}
	imap_seqset_release(&f->uids);
	free(f->scratch);
	free(f);
	cmd->ctx = NULL;
}

static struct fetch_item *item_add(struct fetch_ctx *f, enum fetch_type type)
{
	struct fetch_item *it;

	/* an item asked twice (UID in UID FETCH, FLAGS in a macro) is answered once */
	for (size_t i = 0; i < f->n && type != FI_SECTION; i++)
		if (f->items[i].type == type)
			return &f->items[i];
	if (f->n >= FETCH_ITEMS_MAX)
		return NULL;
	it = &f->items[f->n++];
	memset(it, 0, sizeof(*it));
	it->type = type;
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

/* BODY[...]<a.b>, BODY.PEEK[...], BINARY[part]<a.b>, BINARY.PEEK[part], BINARY.SIZE[part]:
   the atom from '[' on. */
static int parse_body_section(struct fetch_ctx *f, const char *s, size_t len, bool peek,
			      enum fetch_kind kind)
{
	static const char *const names[] = { "BODY", "BINARY", "BINARY.SIZE" };
	const char *close = memchr(s, ']', len);
	struct fetch_item *it = item_add(f, FI_SECTION);
	size_t seclen;

	if (it == NULL || close == NULL)
		return -1;
	it->peek = peek;
	it->kind = kind;
	seclen = (size_t)(close - s) - 1;
	if (parse_section(it, s + 1, seclen) < 0)
		return -1;
	if (kind != FK_BODY && it->sec != SEC_ALL)
		return -1; /* section-binary: part numbers only */
	s = close + 1;
	len -= seclen + 2;
	if (len > 0 && (kind == FK_BINARY_SIZE || parse_partial(it, s, len) < 0))
		return -1;
	it->label = xasprintf("%s[%.*s]", names[kind], (int)seclen, close - seclen);
	if (!peek && kind != FK_BINARY_SIZE)
		f->set_seen = true;
	return 0;
}

static int parse_item(struct fetch_ctx *f, const struct imap_arg *a)
{
	static const struct {
		const char *name;
		enum fetch_type type;
	} simple[] = {
		{ "ENVELOPE", FI_ENVELOPE },     { "FLAGS", FI_FLAGS },
		{ "INTERNALDATE", FI_INTERNALDATE }, { "RFC822", FI_RFC822 },
		{ "RFC822.HEADER", FI_RFC822_HEADER }, { "RFC822.SIZE", FI_RFC822_SIZE },
		{ "RFC822.TEXT", FI_RFC822_TEXT }, { "BODY", FI_BODY },
		{ "BODYSTRUCTURE", FI_BODYSTRUCTURE }, { "UID", FI_UID },
		{ "MODSEQ", FI_MODSEQ },
	};

	if (a->type != IMAP_ARG_ATOM)
		return -1;
	for (size_t i = 0; i < sizeof(simple) / sizeof(simple[0]); i++)
		if (str_caseeq(a->s, a->len, simple[i].name, strlen(simple[i].name))) {
			if (item_add(f, simple[i].type) == NULL)
				return -1;
			if (simple[i].type == FI_RFC822 || simple[i].type == FI_RFC822_TEXT)
				f->set_seen = true;
			return 0;
		}
	if (str_caseprefix(a->s, a->len, "BODY.PEEK["))
		return parse_body_section(f, a->s + 9, a->len - 9, true, FK_BODY);
	if (str_caseprefix(a->s, a->len, "BODY["))
		return parse_body_section(f, a->s + 4, a->len - 4, false, FK_BODY);
	if (str_caseprefix(a->s, a->len, "BINARY.PEEK["))
		return parse_body_section(f, a->s + 11, a->len - 11, true, FK_BINARY);
	if (str_caseprefix(a->s, a->len, "BINARY.SIZE["))
		return parse_body_section(f, a->s + 11, a->len - 11, true, FK_BINARY_SIZE);
	if (str_caseprefix(a->s, a->len, "BINARY["))
		return parse_body_section(f, a->s + 6, a->len - 6, false, FK_BINARY);
	return -1;
}

static int parse_items(struct fetch_ctx *f, const struct imap_arg *a)
{
	static const char *const macros[][5] = {
		{ "ALL", "FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE" },
		{ "FAST", "FLAGS", "INTERNALDATE", "RFC822.SIZE", NULL },
		{ "FULL", "FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE" },
	};

	if (a->type == IMAP_ARG_ATOM) {
		for (size_t m = 0; m < 3; m++) {
			if (!imap_arg_atom_is(a, macros[m][0]))
				continue;
			for (size_t i = 1; i < 5 && macros[m][i] != NULL; i++) {
				struct imap_arg tmp = { .type = IMAP_ARG_ATOM, .s = macros[m][i],
							.len = strlen(macros[m][i]) };

				parse_item(f, &tmp);
			}
			if (m == 2)
				item_add(f, FI_BODY);
			return 0;
		}
		return parse_item(f, a);
	}
	if (a->type != IMAP_ARG_LIST || a->n == 0)
		return -1;
	for (const struct imap_arg *m = a + 1; m <= a + a->span; m = imap_arg_next(m))
		if (parse_item(f, m) < 0)
			return -1;
	return 0;
}

static void write_internaldate(struct imap_client *c, int64_t t)
{
	static const char mon[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	imap_printf(c, "INTERNALDATE \"%02d-%s-%04d %02d:%02d:%02d +0000\"", tm.tm_mday,
		    mon[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* Writes bytes [off, off+len) of the message file as a literal (streamed when large).
   Returns false when a stream was started (the command resumes after it). */
static bool write_file_literal(struct imap_client *c, const struct store_msg *m, uint64_t off,
			       uint64_t len, uint64_t p_off, uint64_t p_len, bool partial)
{
	int fd;
	uint64_t size;

	if (partial) {
		if (p_off >= len) {
			imap_write(c, "\"\"", 2);
			return true;
		}
		off += p_off;
		len -= p_off;
		if (len > p_len)
			len = p_len;
	}
	imap_printf(c, "{%" PRIu64 "}\r\n", len);
	if (len == 0)
		return true;
	if (store_blob_open(c->srv->store, c->view->part, m->blob, &fd, &size) != 0) {
		/* the size is promised: the connection cannot stay in sync */
		imap_client_close(c, "message file missing");
		return true;
	}
	imap_client_stream(c, fd, off, len);
	return c->stream.fd < 0;
}

/* Writes a string produced in memory (header subsets) as a literal, with partial. */
static void write_mem_literal(struct imap_client *c, const char *p, size_t len,
			      const struct fetch_item *it)
{
	if (it->partial) {
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
	imap_write(c, p, len);
}

/* Reads a header block from the file (a part's header: small). */
static int read_header(struct imap_client *c, const struct store_msg *m, uint64_t off,
		       uint64_t len, struct buf *out)
{
	int fd;
	uint64_t size;
	char *dst;
	ssize_t n;

	if (len > 1024 * 1024 || store_blob_open(c->srv->store, c->view->part, m->blob, &fd,
						   &size) != 0)
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

/* HEADER.FIELDS[.NOT] of the message (from the cache) or of an embedded message (its
   header at hoff, hsize in the file). */
static void write_header_fields(struct imap_client *c, const struct store_msg *m,
				const struct msgcache_view *mv, const struct fetch_item *it,
				uint64_t hoff, uint64_t hsize)
{
	struct buf hdr;

	buf_init(&hdr, 1024, 4 * 1024 * 1024);
	if (it->part[0] == '\0') {
		rfc5322_header_fields(mv->header.p, mv->header.len, it->fields, it->nfields,
				      it->sec == SEC_FIELDS_NOT, &hdr);
	} else {
		struct buf raw;

		buf_init(&raw, 1024, 1024 * 1024);
		if (read_header(c, m, hoff, hsize, &raw) == 0)
			rfc5322_header_fields(raw.data, raw.len, it->fields, it->nfields,
					      it->sec == SEC_FIELDS_NOT, &hdr);
		else
			buf_puts(&hdr, "\r\n");
		buf_release(&raw);
	}
	write_mem_literal(c, hdr.data != NULL ? hdr.data : "", hdr.len, it);
	buf_release(&hdr);
}

/* BODY[section]: returns false when a stream was started. */
static bool write_section(struct imap_client *c, const struct store_msg *m,
			  const struct msgcache_view *mv, const struct fetch_item *it)
{
	struct msgcache_part mp;
	uint64_t hoff, hsize, boff, bsize;

	imap_printf(c, "%s", it->label);
	if (it->partial)
		imap_printf(c, "<%" PRIu64 ">", it->p_off);
	imap_write(c, " ", 1);
	if (it->part[0] == '\0') {
		hoff = 0, hsize = mv->header_size, boff = mv->header_size, bsize = mv->body_size;
	} else if (msgcache_part(m->cache, m->cache_len, it->part, &mp) < 0) {
		imap_write(c, "NIL", 3);
		return true;
	} else if (it->sec == SEC_MIME) {
		return write_file_literal(c, m, mp.header_off, mp.header_size, it->p_off,
					  it->p_len, it->partial);
	} else if (it->sec == SEC_ALL) {
		return write_file_literal(c, m, mp.body_off, mp.body_size, it->p_off, it->p_len,
					  it->partial);
	} else if (!mp.is_message) {
		imap_write(c, "NIL", 3);
		return true;
	} else {
		hoff = mp.sub_header_off, hsize = mp.sub_header_size;
		boff = mp.sub_body_off, bsize = mp.sub_body_size;
	}
	switch (it->sec) {
	case SEC_ALL:
		return write_file_literal(c, m, 0, mv->size, it->p_off, it->p_len, it->partial);
	case SEC_TEXT:
		return write_file_literal(c, m, boff, bsize, it->p_off, it->p_len, it->partial);
	case SEC_HEADER:
		if (it->part[0] == '\0') {
			write_mem_literal(c, mv->header.p, mv->header.len, it);
			return true;
		}
		return write_file_literal(c, m, hoff, hsize, it->p_off, it->p_len, it->partial);
	default:
		write_header_fields(c, m, mv, it, hoff, hsize);
		return true;
	}
}

/* The CTE of a part from its MIME header (read from the file at hoff, hsize). */
static enum imap_cte part_cte(struct imap_client *c, const struct store_msg *m, uint64_t hoff,
			      uint64_t hsize)
{
	struct buf raw, val;
	enum imap_cte cte = IMAP_CTE_IDENTITY;

	buf_init(&raw, 1024, 1024 * 1024);
	buf_init(&val, 64, 4096);
	if (read_header(c, m, hoff, hsize, &raw) < 0)
		cte = IMAP_CTE_UNKNOWN; /* cannot tell: refused rather than guessed */
	else if (rfc5322_header_value(raw.data, raw.len, "Content-Transfer-Encoding", &val) > 0)
		cte = imap_cte_parse(val.data, val.len);
	buf_release(&val);
	buf_release(&raw);
	return cte;
}

/* Finds a BINARY item's part in message m and measures its decoded size: 0, or -1 when its
   CTE is unknown (the FETCH then fails with [UNKNOWN-CTE], RFC 3516). BINARY[] is the whole
   message and multipart or message/rfc822 parts are sent as they are. */
static int binary_prepare(struct imap_client *c, struct fetch_ctx *f, struct fetch_item *it,
			  const struct store_msg *m)
{
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
	if (b->cte == IMAP_CTE_UNKNOWN)
		return -1;
	b->exists = true;
	b->size = b->len;
	if (b->cte == IMAP_CTE_IDENTITY && it->kind == FK_BINARY_SIZE)
		return 0; /* no NUL scan needed for a size */
	if (store_blob_open(c->srv->store, c->view->part, m->blob, &fd, &fsize) != 0)
		return -1;
	if (f->scratch == NULL)
		f->scratch = xmalloc(IMAP_STREAM_CHUNK + IMAP_DECODE_LEAD);
	rc = imap_decode_measure(fd, b->off, b->len, b->cte, f->scratch, &b->size, &b->nul);
	close(fd);
	return rc;
}

/* BINARY[part]<partial> or BINARY.SIZE[part] of the prepared part; false when a stream was
   started. */
static bool write_binary(struct imap_client *c, const struct store_msg *m,
			 const struct fetch_item *it)
{
	const struct fetch_binary *b = &it->bin;
	uint64_t skip = 0, emit = b->size;
	int fd;
	uint64_t fsize;

	imap_printf(c, "%s", it->label);
	if (it->kind == FK_BINARY_SIZE) {
		imap_printf(c, " %" PRIu64, b->exists ? b->size : 0);
		return true;
	}
	if (it->partial) {
		imap_printf(c, "<%" PRIu64 ">", it->p_off);
		skip = it->p_off < b->size ? it->p_off : b->size;
		emit = b->size - skip < it->p_len ? b->size - skip : it->p_len;
	}
	if (!b->exists) {
		imap_write(c, " NIL", 4);
		return true;
	}
	imap_printf(c, " %s{%" PRIu64 "}\r\n", b->nul ? "~" : "", emit);
	if (emit == 0)
		return true;
	if (store_blob_open(c->srv->store, c->view->part, m->blob, &fd, &fsize) != 0) {
		imap_client_close(c, "message file missing"); /* the size is promised */
		return true;
	}
	if (b->cte == IMAP_CTE_IDENTITY)
		imap_client_stream(c, fd, b->off + skip, emit);
	else
		imap_client_stream_decoded(c, fd, b->off, b->len, b->cte, skip, emit);
	return c->stream.fd < 0;
}

/* Writes item i of message m; false when a body stream was started. */
static bool write_item(struct imap_client *c, struct store_txn *t, const struct store_msg *m,
		       const struct msgcache_view *mv, const struct fetch_item *it, bool recent)
{
	switch (it->type) {
	case FI_UID:
		imap_printf(c, "UID %u", m->uid);
		break;
	case FI_FLAGS:
		imap_write(c, "FLAGS ", 6);
		imap_flags_write(c, m->flags, m->keywords, recent, t);
		break;
	case FI_INTERNALDATE:
		write_internaldate(c, m->internaldate);
		break;
	case FI_RFC822_SIZE:
		imap_printf(c, "RFC822.SIZE %" PRIu64, m->size);
		break;
	case FI_MODSEQ:
		imap_printf(c, "MODSEQ (%" PRIu64 ")", m->modseq);
		break;
	case FI_ENVELOPE:
		imap_printf(c, "ENVELOPE %.*s", (int)mv->envelope.len, mv->envelope.p);
		break;
	case FI_BODY:
		imap_printf(c, "BODY %.*s", (int)mv->body.len, mv->body.p);
		break;
	case FI_BODYSTRUCTURE:
		imap_printf(c, "BODYSTRUCTURE %.*s", (int)mv->bodystructure.len,
			    mv->bodystructure.p);
		break;
	case FI_RFC822_HEADER:
		imap_printf(c, "RFC822.HEADER {%zu}\r\n", mv->header.len);
		imap_write(c, mv->header.p, mv->header.len);
		break;
	case FI_RFC822:
		imap_write(c, "RFC822 ", 7);
		return write_file_literal(c, m, 0, m->size, 0, 0, false);
	case FI_RFC822_TEXT:
		imap_write(c, "RFC822.TEXT ", 12);
		return write_file_literal(c, m, mv->header_size, mv->body_size, 0, 0, false);
	case FI_SECTION:
		return it->kind == FK_BODY ? write_section(c, m, mv, it) : write_binary(c, m, it);
	}
	return true;
}

/* Before a message's FETCH line: its BINARY parts found and measured; -1 on an unknown CTE. */
static int fetch_prepare(struct imap_client *c, struct fetch_ctx *f, const struct store_msg *m)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->items[i].type == FI_SECTION && f->items[i].kind != FK_BODY &&
		    binary_prepare(c, f, &f->items[i], m) < 0)
			return -1;
	return 0;
}

/* Writes (the rest of) one message: 1 done, 0 suspended inside it, -1 a BINARY part has an
   unknown CTE (nothing of the message was written). */
static int fetch_message(struct imap_cmd *cmd, struct fetch_ctx *f, struct store_txn *t,
			 size_t vi)
{
	struct imap_client *c = cmd->c;
	struct imap_view_msg *vm = &c->view->msgs[vi];
	struct store_msg m;
	struct msgcache_view mv;

	if (store_msg_get(t, c->view->mbox, vm->uid, &m) != 0 ||
	    (f->item == 0 && f->changedsince != 0 && m.modseq <= f->changedsince)) {
		f->item = 0; /* expunged meanwhile (or unchanged): nothing to say about it */
		return 1;
	}
	if (m.cache_len == 0 || msgcache_parse(m.cache, m.cache_len, &mv) < 0) {
		memset(&mv, 0, sizeof(mv));
		mv.envelope = str_view_of("(NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL)");
		mv.body = mv.bodystructure =
			str_view_of("(\"text\" \"plain\" NIL NIL NIL \"7bit\" 0 0)");
		mv.header = str_view_of("\r\n");
		mv.header_size = 0;
		mv.size = mv.body_size = m.size;
	}
	if (f->item == 0) {
		if (fetch_prepare(c, f, &m) < 0)
			return -1;
		imap_printf(c, "* %zu FETCH (", vi + 1);
	}
	while (f->item < f->n) {
		const struct fetch_item *it = &f->items[f->item++];

		if (f->item > 1)
			imap_write(c, " ", 1);
		if (!write_item(c, t, &m, &mv, it, vm->flags & IMAP_VF_RECENT))
			return 0;
	}
	imap_write(c, ")\r\n", 3);
	f->item = 0;
	return 1;
}

struct seen_ctx {
	struct imap_client *c;
	struct fetch_ctx *f;
};

static int set_seen_fn(struct store_txn *t, void *arg)
{
	struct seen_ctx *s = arg;
	struct imap_view *v = s->c->view;

	for (size_t i = 0; i < v->n; i++) {
		struct store_msg m;
		int rc;

		if (!imap_seqset_has(&s->f->uids, v->msgs[i].uid) || (v->msgs[i].flags & STORE_SEEN))
			continue;
		rc = store_msg_flags(t, v->mbox, v->msgs[i].uid, STORE_FLAGS_ADD, STORE_SEEN, 0, 0,
				     &m);
		if (rc == STORE_ENOMSG)
			continue;
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* The implicit \Seen is durable: the view says so and the FETCH reports FLAGS. */
static void seen_apply(struct imap_client *c, struct fetch_ctx *f)
{
	struct imap_view *v = c->view;
	bool has_flags = false;

	for (size_t i = 0; i < v->n; i++)
		if (imap_seqset_has(&f->uids, v->msgs[i].uid))
			v->msgs[i].flags |= STORE_SEEN;
	for (size_t i = 0; i < f->n; i++)
		has_flags |= f->items[i].type == FI_FLAGS;
	if (!has_flags)
		item_add(f, FI_FLAGS);
}

static void seen_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		      void *arg)
{
	struct seen_ctx *s = arg;
	struct imap_client *c = s->c;

	(void)rcpts;
	(void)n;
	(void)value;
	s->f->seen_pending = false;
	if (result == 0 && !(c->flags & IMAP_CF_DEFUNCT))
		seen_apply(c, s->f);
	free(s);
	imap_client_commit_back(c);
}

/* FETCH of a body sets \Seen (RFC 3501 6.4.5) through the group commit; the FETCH waits
   for it (f->seen_pending), the loop does not. */
static void mark_seen(struct imap_client *c, struct fetch_ctx *f)
{
	struct imap_view *v = c->view;
	struct seen_ctx *s;
	bool unseen = false;

	for (size_t i = 0; i < v->n && !unseen; i++)
		unseen = !(v->msgs[i].flags & STORE_SEEN) && imap_seqset_has(&f->uids,
									     v->msgs[i].uid);
	if (!unseen) {
		seen_apply(c, f);
		return;
	}
	s = xmalloc(sizeof(*s));
	s->c = c;
	s->f = f;
	f->seen_pending = true;
	c->ncommits++;
	store_gc_write(c->srv->gc, v->part, NULL, set_seen_fn, s, seen_done, s);
}

/* Starts a FETCH: parses the set and the items. False when a reply was sent. */
static bool fetch_start(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct fetch_ctx *f;
	const struct imap_arg *set = imap_cmd_arg(cmd, 0), *items = imap_cmd_arg(cmd, 1);
	const char *why;

	const struct imap_arg *mods = imap_cmd_arg(cmd, 2);

	if (set == NULL || items == NULL || imap_cmd_arg(cmd, 3) != NULL ||
	    set->type != IMAP_ARG_ATOM)
		return !imap_cmd_bad(cmd, "Expected: FETCH sequence-set items");
	f = xcalloc(1, sizeof(*f));
	cmd->ctx = f;
	cmd->ctx_free = fetch_ctx_free;
	if (cmd->uid)
		item_add(f, FI_UID);
	if (parse_items(f, items) < 0)
		return !imap_cmd_bad(cmd, "Invalid FETCH item");
	if (mods != NULL) {
		/* (CHANGEDSINCE n) — RFC 7162 */
		const struct imap_arg *v = mods + 2;

		if (mods->type != IMAP_ARG_LIST || (mods->n != 2 && mods->n != 3) ||
		    !imap_arg_atom_is(mods + 1, "CHANGEDSINCE") || v->type != IMAP_ARG_ATOM ||
		    str_to_u64(v->s, v->len, INT64_MAX, &f->changedsince) < 0 ||
		    (mods->n == 3 && (!imap_arg_atom_is(v + 1, "VANISHED") || !cmd->uid ||
				      !c->enabled_qresync)))
			return !imap_cmd_bad(cmd, "Invalid FETCH modifier");
		c->enabled_condstore = true;
		f->vanished = mods->n == 3;
	}
	for (size_t i = 0; i < f->n; i++)
		if (f->items[i].type == FI_MODSEQ)
			c->enabled_condstore = true;
	if (f->changedsince != 0) {
		bool has = false;

		for (size_t i = 0; i < f->n; i++)
			has |= f->items[i].type == FI_MODSEQ;
		if (!has)
			item_add(f, FI_MODSEQ);
	}
	if (imap_view_resolve(c, set->s, set->len, cmd->uid, &f->uids, &why) < 0)
		return !imap_cmd_bad(cmd, why);
	if (f->set_seen && !c->view->readonly)
		mark_seen(c, f);
	if (f->vanished) {
		struct store_txn *t = NULL;

		if (store_txn_begin(c->srv->store, c->view->part, STORE_TXN_READ, &t) == 0)
			imap_view_vanished(c, t, f->changedsince, &f->uids);
		store_txn_abort(&t);
	}
	return true;
}

bool cmd_fetch(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct fetch_ctx *f = cmd->ctx;
	struct store_txn *t = NULL;
	int rc;

	if (f == NULL) {
		if (!fetch_start(cmd))
			return true;
		f = cmd->ctx;
	}
	if (f->seen_pending)
		return false; /* resumed by seen_done */
	if ((rc = store_txn_begin(c->srv->store, c->view->part, STORE_TXN_READ, &t)) != 0)
		return imap_cmd_store_error(cmd, rc, "fetch");
	while (f->next < c->view->n) {
		if (f->item == 0 && !imap_seqset_has(&f->uids, c->view->msgs[f->next].uid)) {
			f->next++;
			continue;
		}
		if (imap_out_full(c) || c->stream.fd >= 0) {
			store_txn_abort(&t);
			return false;
		}
		if ((rc = fetch_message(cmd, f, t, f->next)) <= 0) {
			store_txn_abort(&t);
			if (rc < 0)
				return imap_cmd_no(cmd, "[UNKNOWN-CTE] Cannot decode a part's "
							"Content-Transfer-Encoding");
			return false;
		}
		f->next++;
	}
	store_txn_abort(&t);
	if (c->stream.fd >= 0)
		return false;
	return imap_cmd_ok(cmd, "Fetch completed");
}
