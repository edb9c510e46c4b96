/* milter_apply.c — owns the message as milters see and change it: the header section read
 * back from the message file and split into fields, the changes milters ask for at the end of
 * the message (kept in order), and their application: a new message file with the header and
 * body changes (the old one is dropped unreferenced), recipients added (they go through the
 * queue, whose runner delivers local ones too) or removed, the sender changed, a quarantine
 * (the message is held in the queue). */
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mtad/milter_private.h"
#include "mtad/mtad.h"
#include "store/store.h"

#define READ_CHUNK (64 * 1024)

/* The header section of fd into hdr (up to the empty line): its length, or -1. */
static ssize_t read_header(int fd, uint64_t size, struct buf *hdr, uint64_t *body_off_r)
{
	char chunk[READ_CHUNK];
	uint64_t off = 0;

	while (off < size) {
		ssize_t n = pread(fd, chunk, sizeof(chunk), (off_t)off);

		if (n <= 0)
			return -1;
		size_t keep = hdr->len;
		if (buf_append(hdr, chunk, (size_t)n) < 0)
			return -1;
		/* the empty line: CRLF CRLF, or a message that starts with CRLF */
		size_t from = keep >= 3 ? keep - 3 : 0;
		if (hdr->len >= 2 && memcmp(hdr->data, "\r\n", 2) == 0) {
			*body_off_r = 2;
			return 0;
		}
		const char *e = memmem(hdr->data + from, hdr->len - from, "\r\n\r\n", 4);
		if (e != NULL) {
			size_t hl = (size_t)(e - hdr->data) + 2;

			*body_off_r = hl + 2;
			return (ssize_t)hl;
		}
		off += (uint64_t)n;
	}
	*body_off_r = size; /* no body */
	return (ssize_t)hdr->len;
}

static void add_field(struct milter_msg *mm, const char *p, size_t len)
{
	struct milter_field *f = &mm->f[mm->nf++];
	const char *colon = memchr(p, ':', len);
	size_t nl = colon != NULL ? (size_t)(colon - p) : len;
	struct buf v;

	f->raw = xmemdup0(p, len);
	f->rawlen = len;
	while (nl > 0 && (p[nl - 1] == ' ' || p[nl - 1] == '\t'))
		nl--;
	f->name = xmemdup0(p, nl);
	/* the value: after the colon and one space, without the final CRLF, folds as LF */
	size_t i = colon != NULL ? (size_t)(colon - p) + 1 : len;
	size_t end = len >= 2 && p[len - 2] == '\r' ? len - 2 : len;
	if (i < end && p[i] == ' ')
		i++;
	buf_init(&v, end - i + 1, BUF_INPUT_BOUNDED);
	for (; i < end; i++)
		if (!(p[i] == '\r' && i + 1 < end && p[i + 1] == '\n'))
			buf_putc(&v, p[i]);
	f->value = buf_steal(&v, NULL);
}

int milter_msg_read(struct milter_msg *mm, int fd, uint64_t size, const char **error_r)
{
	struct buf hdr;
	ssize_t hl;

	memset(mm, 0, sizeof(*mm));
	mm->fd = fd;
	mm->size = size;
	buf_init(&hdr, 0, MILTER_HEADER_MAX + READ_CHUNK);
	if ((hl = read_header(fd, size, &hdr, &mm->body_off)) < 0 || hl > MILTER_HEADER_MAX) {
		*error_r = hl < 0 && hdr.len < MILTER_HEADER_MAX ? "cannot read the message"
								 : "header section too big";
		buf_release(&hdr);
		return -1;
	}
	mm->f = xcalloc(MILTER_FIELDS_MAX, sizeof(*mm->f));
	size_t start = 0;
	for (size_t i = 0; i < (size_t)hl; i++) {
		if (hdr.data[i] != '\n')
			continue;
		bool fold = i + 1 < (size_t)hl &&
			    (hdr.data[i + 1] == ' ' || hdr.data[i + 1] == '\t');
		if (fold)
			continue;
		if (mm->nf == MILTER_FIELDS_MAX) {
			buf_release(&hdr);
			milter_msg_release(mm);
			*error_r = "too many header fields";
			return -1;
		}
		add_field(mm, hdr.data + start, i + 1 - start);
		start = i + 1;
	}
	buf_release(&hdr);
	return 0;
}

void milter_msg_release(struct milter_msg *mm)
{
	for (size_t i = 0; i < mm->nf; i++) {
		free(mm->f[i].raw);
		free(mm->f[i].name);
		free(mm->f[i].value);
	}
	free(mm->f);
	mm->f = NULL;
	mm->nf = 0;
}

int milter_mods_add(struct milter_mods *mods, const struct milter_reply *r, bool leadspc,
		    uint64_t max_body)
{
	struct milter_mod *m;

	if (r->cmd == SMFIR_REPLBODY) {
		if (!mods->body_replaced)
			buf_init(&mods->body, 0, (size_t)max_body);
		mods->body_replaced = true;
		return buf_append(&mods->body, r->data, r->len);
	}
	if (r->cmd == SMFIR_QUARANTINE) {
		free(mods->quarantine);
		mods->quarantine = xstrdup(r->value);
		return 0;
	}
	mods->v = xreallocarray(mods->v, mods->n + 1, sizeof(*mods->v));
	m = &mods->v[mods->n++];
	m->cmd = r->cmd;
	m->index = r->index;
	m->name = xstrdup(r->name);
	bool hdr = r->cmd == SMFIR_ADDHEADER || r->cmd == SMFIR_INSHEADER ||
		   r->cmd == SMFIR_CHGHEADER;
	if (r->value == NULL)
		m->value = NULL;
	else if (hdr && !leadspc && r->value[0] != '\0')
		m->value = xasprintf(" %s", r->value);
	else
		m->value = xstrdup(r->value);
	return 0;
}

void milter_mods_release(struct milter_mods *mods)
{
	for (size_t i = 0; i < mods->n; i++) {
		free(mods->v[i].name);
		free(mods->v[i].value);
	}
	free(mods->v);
	mods->v = NULL;
	mods->n = 0;
	if (mods->body_replaced)
		buf_release(&mods->body);
	mods->body_replaced = false;
	free(mods->quarantine);
	mods->quarantine = NULL;
}

/* ---- the new header section ---- */

/* A header field "name:value" as stored: LF not after CR becomes CRLF; CRLF at the end. */
static char *field_text(const char *name, const char *value, size_t *len_r)
{
	struct buf b;

	buf_init(&b, strlen(name) + strlen(value) + 8, BUF_INPUT_BOUNDED);
	buf_printf(&b, "%s:", name);
	for (const char *p = value; *p != '\0'; p++) {
		if (*p == '\n' && (p == value || p[-1] != '\r'))
			buf_putc(&b, '\r');
		if (*p != '\r' || p[1] == '\n')
			buf_putc(&b, *p);
	}
	buf_puts(&b, "\r\n");
	return buf_steal(&b, len_r);
}

struct hdr_list {
	char **raw; /* NULL: deleted */
	size_t *len;
	char **name; /* borrowed */
	size_t n;
};

static void list_insert(struct hdr_list *l, size_t at, char *raw, size_t len, char *name)
{
	l->raw = xreallocarray(l->raw, l->n + 1, sizeof(*l->raw));
	l->len = xreallocarray(l->len, l->n + 1, sizeof(*l->len));
	l->name = xreallocarray(l->name, l->n + 1, sizeof(*l->name));
	at = at > l->n ? l->n : at;
	memmove(l->raw + at + 1, l->raw + at, (l->n - at) * sizeof(*l->raw));
	memmove(l->len + at + 1, l->len + at, (l->n - at) * sizeof(*l->len));
	memmove(l->name + at + 1, l->name + at, (l->n - at) * sizeof(*l->name));
	l->raw[at] = raw;
	l->len[at] = len;
	l->name[at] = name;
	l->n++;
}

/* CHGHEADER: the index-th (from 1) field called name changes (an empty value deletes it);
   when there is none, a non-empty value is added (as Sendmail does). */
static void list_change(struct hdr_list *l, const struct milter_mod *m)
{
	uint32_t seen = 0;
	size_t len;

	for (size_t i = 0; i < l->n; i++) {
		if (l->raw[i] == NULL || strcasecmp(l->name[i], m->name) != 0)
			continue;
		if (++seen != (m->index == 0 ? 1 : m->index))
			continue;
		free(l->raw[i]);
		l->raw[i] = NULL;
		if (m->value[0] != '\0')
			l->raw[i] = field_text(m->name, m->value, &l->len[i]);
		return;
	}
	if (m->value[0] != '\0') {
		char *raw = field_text(m->name, m->value, &len);

		list_insert(l, l->n, raw, len, m->name);
	}
}

static void list_build(struct hdr_list *l, const struct milter_msg *mm,
		       const struct milter_mods *mods)
{
	size_t len;

	memset(l, 0, sizeof(*l));
	for (size_t i = 0; i < mm->nf; i++)
		list_insert(l, l->n, xmemdup0(mm->f[i].raw, mm->f[i].rawlen), mm->f[i].rawlen,
			    mm->f[i].name);
	for (size_t i = 0; i < mods->n; i++) {
		const struct milter_mod *m = &mods->v[i];

		if (m->cmd == SMFIR_ADDHEADER || m->cmd == SMFIR_INSHEADER) {
			char *raw = field_text(m->name, m->value, &len);

			list_insert(l, m->cmd == SMFIR_ADDHEADER ? l->n : m->index, raw, len,
				    m->name);
		} else if (m->cmd == SMFIR_CHGHEADER) {
			list_change(l, m);
		}
	}
}

static void list_free(struct hdr_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->raw[i]);
	free(l->raw);
	free(l->len);
	free(l->name);
}

/* The replacement body with every line ending in CRLF. */
static int write_body(struct store_blob *b, const struct buf *body)
{
	struct buf out;
	int rc = 0;

	buf_init(&out, READ_CHUNK, BUF_INPUT_BOUNDED);
	for (size_t i = 0; i < body->len && rc == 0; i++) {
		char c = body->data[i];

		if (c == '\n' && (i == 0 || body->data[i - 1] != '\r'))
			buf_putc(&out, '\r');
		if (c != '\r' || (i + 1 < body->len && body->data[i + 1] == '\n'))
			buf_putc(&out, c);
		else
			buf_puts(&out, "\r\n");
		if (out.len >= READ_CHUNK) {
			rc = store_blob_write(b, out.data, out.len);
			buf_reset(&out);
		}
	}
	if (rc == 0 && out.len > 0)
		rc = store_blob_write(b, out.data, out.len);
	buf_release(&out);
	return rc;
}

static int copy_body(struct store_blob *b, const struct milter_msg *mm)
{
	char chunk[READ_CHUNK];

	for (uint64_t off = mm->body_off; off < mm->size;) {
		ssize_t n = pread(mm->fd, chunk, sizeof(chunk), (off_t)off);

		if (n <= 0)
			return STORE_EIO;
		int rc = store_blob_write(b, chunk, (size_t)n);
		if (rc != 0)
			return rc;
		off += (uint64_t)n;
	}
	return 0;
}

/* The message again, changed, in a new file of the same partition: 0 and *b_r. */
static int rewrite(struct smtp_session *s, const struct milter_msg *mm,
		   const struct milter_mods *mods, struct store_blob **b_r)
{
	struct smtp_tx *tx = s->tx;
	struct hdr_list l;
	int rc = store_blob_new(s->m->store, tx->blob_part, b_r);

	if (rc != 0)
		return rc;
	list_build(&l, mm, mods);
	for (size_t i = 0; i < l.n && rc == 0; i++)
		if (l.raw[i] != NULL)
			rc = store_blob_write(*b_r, l.raw[i], l.len[i]);
	list_free(&l);
	if (rc == 0 && (mods->body_replaced || mm->body_off < mm->size))
		rc = store_blob_write(*b_r, "\r\n", 2);
	if (rc == 0)
		rc = mods->body_replaced ? write_body(*b_r, &mods->body) : copy_body(*b_r, mm);
	if (rc != 0)
		store_blob_free(b_r);
	return rc;
}

/* An address as a milter gives it: without <> and surrounding space. */
static void bare_addr(const char *a, char *out, size_t size)
{
	struct str_view v = str_trim(str_view_of(a));

	if (v.len >= 2 && v.p[0] == '<' && v.p[v.len - 1] == '>') {
		v.p++;
		v.len -= 2;
	}
	snprintf(out, size, "%.*s", (int)v.len, v.p);
}

static void rcpt_add(struct smtp_tx *tx, const char *addr)
{
	struct smtp_rcpt *r;

	if (tx->nrcpt == tx->rcpt_cap) {
		tx->rcpt_cap = tx->rcpt_cap ? tx->rcpt_cap * 2 : 4;
		tx->rcpt = xreallocarray(tx->rcpt, tx->rcpt_cap, sizeof(*tx->rcpt));
	}
	r = &tx->rcpt[tx->nrcpt++];
	memset(r, 0, sizeof(*r));
	bare_addr(addr, r->addr, sizeof(r->addr));
}

static void rcpt_del(struct smtp_tx *tx, const char *addr)
{
	char a[MAILADDR_TEXT_MAX + 1];
	size_t k = 0;

	bare_addr(addr, a, sizeof(a));
	for (size_t i = 0; i < tx->nrcpt; i++)
		if (strcasecmp(tx->rcpt[i].addr, a) != 0)
			tx->rcpt[k++] = tx->rcpt[i];
	tx->nrcpt = k;
}

/* Recipient and sender changes, in the order they were asked for. */
static void envelope(struct smtp_session *s, const struct milter_mods *mods)
{
	struct smtp_tx *tx = s->tx;

	for (size_t i = 0; i < mods->n; i++) {
		const struct milter_mod *m = &mods->v[i];

		if (m->cmd == SMFIR_ADDRCPT || m->cmd == SMFIR_ADDRCPT_PAR)
			rcpt_add(tx, m->name);
		else if (m->cmd == SMFIR_DELRCPT)
			rcpt_del(tx, m->name);
		else if (m->cmd == SMFIR_CHGFROM)
			bare_addr(m->name, tx->from, sizeof(tx->from));
		else
			continue;
		log_info("%016" PRIx64 ": milter %s <%s>", tx->qid,
			 m->cmd == SMFIR_DELRCPT   ? "delrcpt"
			 : m->cmd == SMFIR_CHGFROM ? "chgfrom"
						   : "addrcpt",
			 m->name);
	}
	tx->nlocal = 0;
	for (size_t i = 0; i < tx->nrcpt; i++)
		tx->nlocal += tx->rcpt[i].local;
}

int milter_mods_apply(struct smtp_session *s, const struct milter_msg *mm,
		      const struct milter_mods *mods)
{
	struct smtp_tx *tx = s->tx;
	bool content = mods->body_replaced;

	for (size_t i = 0; i < mods->n; i++)
		content |= mods->v[i].cmd == SMFIR_ADDHEADER ||
			   mods->v[i].cmd == SMFIR_INSHEADER || mods->v[i].cmd == SMFIR_CHGHEADER;
	if (content) {
		struct store_blob *nb = NULL;
		int rc = rewrite(s, mm, mods, &nb);

		if (rc != 0) {
			log_warnx("%016" PRIx64 " milter qid=%016" PRIx64 " result=fail "
				  "reason=\"message file: %s\"",
				  s->id, tx->qid, store_strerror(rc));
			return -1;
		}
		store_blob_free(&tx->blob);
		tx->blob = nb;
		tx->size = store_blob_size(nb);
	}
	envelope(s, mods);
	if (mods->quarantine != NULL) {
		char why[200];

		str_log_name(why, sizeof(why), mods->quarantine);
		log_info("%016" PRIx64 ": milter quarantine reason=\"%s\" (held in the queue)",
			 tx->qid, why);
		tx->held = true;
	}
	return 0;
}
