/* imap_textmatch.c — owns SEARCH's text comparison and PREVIEW's text: both read a message's
 * searchable text (common/mimetext.h: decoded, UTF-8, case-folded for SEARCH). A needle is
 * matched within one run, with a window of its length across a body's pieces. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/mimetext.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"

#define TM_WINDOW_MAX (4 * 64 * 1024 + 64 * 1024)

struct imap_textmatch {
	struct mimetext *mt;
	const char *needle;
	size_t nlen;
	bool top;       /* TEXT: the message's own header fields count too */
	struct buf win; /* the last nlen - 1 bytes of a body run, then new text */
};

/* Feeds one piece of a run to the window; true when the needle is found. */
static bool tm_run(void *arg, enum mimetext_kind kind, bool start, const char *p, size_t len,
		   const struct mimetext_leaf *leaf)
{
	struct imap_textmatch *tm = arg;
	struct buf *w = &tm->win;
	size_t keep;

	(void)leaf;
	if (kind == MIMETEXT_FIELD && !tm->top)
		return false;
	if (kind != MIMETEXT_BODY)
		return len >= tm->nlen && memmem(p, len, tm->needle, tm->nlen) != NULL;
	if (start)
		buf_reset(w);
	if (w->len == 0) {
		if (len >= tm->nlen && memmem(p, len, tm->needle, tm->nlen) != NULL)
			return true;
	} else {
		buf_append(w, p, len);
		if (w->len >= tm->nlen && memmem(w->data, w->len, tm->needle, tm->nlen) != NULL)
			return true;
		p = w->data;
		len = w->len;
	}
	/* the tail that may begin a match the next piece completes */
	keep = len < tm->nlen - 1 ? len : tm->nlen - 1;
	if (w->len > 0) {
		buf_consume(w, w->len - keep);
	} else {
		buf_append(w, p + len - keep, keep);
	}
	return false;
}

struct imap_textmatch *imap_textmatch_new(void)
{
	struct imap_textmatch *tm = xcalloc(1, sizeof(*tm));
	struct mimetext_opts o = { .fold = true, .fields = true };

	tm->mt = mimetext_new(&o, tm_run, tm);
	buf_init(&tm->win, 1024, TM_WINDOW_MAX);
	return tm;
}

void imap_textmatch_free(struct imap_textmatch **tmp)
{
	struct imap_textmatch *tm = *tmp;

	if (tm == NULL)
		return;
	mimetext_free(&tm->mt);
	buf_release(&tm->win);
	free(tm);
	*tmp = NULL;
}

bool imap_textmatch_file(struct imap_textmatch *tm, int fd, uint64_t size, const char *needle,
			 size_t nlen, bool top)
{
	if (nlen == 0)
		return true;
	tm->needle = needle;
	tm->nlen = nlen;
	tm->top = top;
	buf_reset(&tm->win);
	(void)mimetext_file(tm->mt, fd, size);
	return mimetext_stopped(tm->mt);
}

bool imap_text_field_contains(const char *raw, size_t len, const char *needle, size_t nlen)
{
	struct buf out;
	bool r;

	if (nlen == 0)
		return true;
	buf_init(&out, 256, IMAP_HEADER_READ_MAX);
	mimetext_field_text(raw, len, true, &out);
	r = out.len >= nlen && memmem(out.data, out.len, needle, nlen) != NULL;
	buf_release(&out);
	return r;
}

/* ---- PREVIEW ---- */

struct preview {
	struct buf *out;
	uint32_t leaf; /* the preview's part, once chosen (UINT32_MAX: none yet) */
	bool html, in_tag, space;
	size_t chars;
};

/* Adds decoded UTF-8 text of the preview's leaf: white space runs as one space, HTML tags
   skipped, up to IMAP_PREVIEW_CHARS characters (RFC 8970 3: at most 256 octets). True when
   it is complete. */
static bool preview_run(void *arg, enum mimetext_kind kind, bool start, const char *p, size_t len,
			const struct mimetext_leaf *leaf)
{
	struct preview *pv = arg;
	struct buf *out = pv->out;

	(void)kind;
	(void)start;
	if (pv->leaf == UINT32_MAX) {
		if (leaf->attachment || !(leaf->plain || leaf->html))
			return false;
		pv->leaf = leaf->index;
		pv->html = leaf->html;
	} else if (leaf->index != pv->leaf) {
		return true; /* the preview's leaf ended */
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (pv->html && (ch == '<' || pv->in_tag)) {
			pv->in_tag = ch != '>';
			continue;
		}
		if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch < 0x20) {
			pv->space = out->len > 0;
			continue;
		}
		if ((ch & 0xc0) != 0x80) { /* a character starts */
			if (pv->chars + pv->space >= IMAP_PREVIEW_CHARS ||
			    out->len + 4 + pv->space > 256)
				return true;
			if (pv->space)
				buf_putc(out, ' ');
			pv->chars += 1u + pv->space;
			pv->space = false;
		}
		buf_putc(out, (char)ch);
	}
	return false;
}

bool imap_text_preview(int fd, uint64_t size, struct buf *out)
{
	struct preview pv = { .out = out, .leaf = UINT32_MAX };
	struct mimetext_opts o = { .fold = false, .fields = false };
	struct mimetext *mt = mimetext_new(&o, preview_run, &pv);

	(void)mimetext_file(mt, fd, size);
	mimetext_free(&mt);
	return pv.leaf != UINT32_MAX;
}
