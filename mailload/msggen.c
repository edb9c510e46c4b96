/* msggen.c — owns the workload distributions (recipients, session mix, sizes, folders) and
 * deterministic message generation: headers per message, bodies as slices of text, HTML and
 * base64 pools built once per process, so a message costs a few hundred bytes of work. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "common/xmalloc.h"
#include "mailload/mailload.h"

#define LINE_W 76 /* every pool line is 74 characters and CRLF */
#define TEXT_POOL (512u * 1024)
#define HTML_POOL (512u * 1024)
#define B64_POOL (2304u * 1024)

static char *text_pool, *html_pool, *b64_pool;

double ml_rng_exp(struct ml_rng *r, double mean)
{
	double u = ml_rng_unit(r);

	return -log(1.0 - u) * mean;
}

uint32_t ml_rng_count(struct ml_rng *r, double mean, double max)
{
	/* exponential, rounded, truncated at max: the mean shifts little for max >> mean */
	double v = floor(ml_rng_exp(r, mean) + 0.5);

	return (uint32_t)(v > max ? max : v);
}

uint32_t ml_pick_rcpt_count(struct ml_rng *r)
{
	double u = ml_rng_unit(r);

	if (u < 0.60)
		return 1;
	if (u < 0.80)
		return 2;
	if (u < 0.90)
		return 3;
	if (u < 0.95)
		return (uint32_t)ml_rng_range(r, 4, 5);
	if (u < 0.99)
		return (uint32_t)ml_rng_range(r, 6, 10);
	return (uint32_t)ml_rng_range(r, 11, 20);
}

enum ml_session ml_pick_session(struct ml_rng *r, const struct ml_cfg *c)
{
	double u = ml_rng_unit(r) * (c->mix_check + c->mix_sync + c->mix_cleanup);

	if (u < c->mix_check)
		return SESS_CHECK;
	if (u < c->mix_check + c->mix_sync)
		return SESS_SYNC;
	return SESS_CLEANUP;
}

uint32_t ml_pick_size(struct ml_rng *r, double scale)
{
	static const struct {
		double share;
		uint32_t lo, hi;
	} cls[] = {
		{ 0.35, 1024, 4096 },    { 0.30, 4096, 16384 },     { 0.20, 16384, 65536 },
		{ 0.12, 65536, 262144 }, { 0.03, 262144, 2097152 },
	};
	double u = ml_rng_unit(r), acc = 0;
	size_t i;

	for (i = 0; i < sizeof(cls) / sizeof(cls[0]) - 1; i++) {
		acc += cls[i].share;
		if (u < acc)
			break;
	}
	double v = (double)ml_rng_range(r, cls[i].lo, cls[i].hi) * scale;
	return v < 256 ? 256 : (uint32_t)v;
}

static const char *const folder_names[] = {
	"Projects",     "Projects/Alpha", "Projects/Beta", "Archive",     "Archive/2025",
	"Customers",    "Travel",         "Finance",       "Newsletters", "Team",
	"Team/Reports", "Personal",       "Receipts",      "Vendors",     "Hiring",
};

void ml_user_folders(const struct ml_cfg *c, uint64_t user, struct ml_folders *f)
{
	static const char *const fixed[] = { "INBOX", "Sent", "Drafts", "Trash" };
	struct ml_rng r;
	uint32_t k;
	bool used[sizeof(folder_names) / sizeof(folder_names[0])] = { false };
	const uint32_t nnames = sizeof(folder_names) / sizeof(folder_names[0]);

	ml_rng_seed(&r, c->seed, user * 7919 + 1);
	memset(f, 0, sizeof(*f));
	for (uint32_t i = 0; i < 4; i++)
		snprintf(f->name[f->n++], ML_FOLDER_NAME_MAX, "%s", fixed[i]);
	k = ml_rng_count(&r, c->folders_mean, c->folders_max);
	if (k > ML_MAX_FOLDERS - 4)
		k = ML_MAX_FOLDERS - 4;
	while (k-- > 0) {
		uint32_t i = (uint32_t)ml_rng_range(&r, 0, nnames - 1);

		while (used[i])
			i = (i + 1) % nnames;
		used[i] = true;
		/* a nested folder needs its parent: take the parent name's slot when unused */
		const char *slash = strchr(folder_names[i], '/');
		if (slash != NULL) {
			for (uint32_t p = 0; p < nnames; p++)
				if (!used[p] &&
				    strlen(folder_names[p]) == (size_t)(slash - folder_names[i]) &&
				    strncmp(folder_names[p], folder_names[i],
					    (size_t)(slash - folder_names[i])) == 0) {
					used[p] = true;
					if (f->n < ML_MAX_FOLDERS)
						snprintf(f->name[f->n++], ML_FOLDER_NAME_MAX, "%s",
							 folder_names[p]);
				}
		}
		if (f->n < ML_MAX_FOLDERS)
			snprintf(f->name[f->n++], ML_FOLDER_NAME_MAX, "%s", folder_names[i]);
	}
	for (uint32_t i = 0; i < f->n; i++) {
		f->subscribed[i] = i < 4 || ml_rng_unit(&r) < c->subscribed;
		f->msgs[i] = i == 0 ? ml_rng_count(&r, c->inbox_mean, c->inbox_max)
				    : ml_rng_count(&r, c->folder_mean, c->folder_max);
	}
}

/* ---- pools ---- */
static const char *const words[] = {
	"the",       "quarterly", "report",   "meeting",  "schedule", "please",   "review",
	"attached",  "draft",     "budget",   "customer", "project",  "timeline", "update",
	"team",      "deadline",  "proposal", "contract", "invoice",  "numbers",  "agenda",
	"follow",    "up",        "thanks",   "regards",  "call",     "tomorrow", "week",
	"office",    "travel",    "plan",     "release",  "feedback", "design",   "server",
	"migration", "approval",  "status",   "notes",    "minutes",
};

static void fill_words(char *pool, size_t size, struct ml_rng *r, const char *pre,
		       const char *post)
{
	const size_t nwords = sizeof(words) / sizeof(words[0]);

	for (size_t off = 0; off + LINE_W <= size; off += LINE_W) {
		char *l = pool + off;
		size_t n = strlen(pre), body = LINE_W - 2 - strlen(post);

		memcpy(l, pre, n);
		while (n < body) {
			const char *w = words[ml_rng_next(r) % nwords];
			size_t wl = strlen(w);

			if (n + wl + 1 > body) {
				memset(l + n, ' ', body - n);
				n = body;
				break;
			}
			memcpy(l + n, w, wl);
			n += wl;
			l[n++] = ' ';
		}
		memcpy(l + body, post, strlen(post));
		l[LINE_W - 2] = '\r';
		l[LINE_W - 1] = '\n';
	}
}

void ml_msggen_init(void)
{
	static const char b64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	struct ml_rng r;

	if (text_pool != NULL)
		return;
	ml_rng_seed(&r, 20090101, 1);
	text_pool = xmalloc(TEXT_POOL);
	html_pool = xmalloc(HTML_POOL);
	b64_pool = xmalloc(B64_POOL);
	fill_words(text_pool, TEXT_POOL, &r, "", "");
	fill_words(html_pool, HTML_POOL, &r, "<p>", "</p>");
	for (size_t off = 0; off + LINE_W <= B64_POOL; off += LINE_W) {
		for (size_t i = 0; i < LINE_W - 2; i++)
			b64_pool[off + i] = b64[ml_rng_next(&r) & 63];
		b64_pool[off + LINE_W - 2] = '\r';
		b64_pool[off + LINE_W - 1] = '\n';
	}
}

void ml_msg_init(struct ml_msg *m)
{
	memset(m, 0, sizeof(*m));
	buf_init(&m->head, 2048, ML_DOC_MAX);
}

void ml_msg_release(struct ml_msg *m)
{
	buf_release(&m->head);
}

static void piece_head(struct ml_msg *m, size_t from)
{
	if (m->head.len == from || m->npieces >= ML_MSG_MAXPARTS * 2)
		return;
	m->piece[m->npieces].p = NULL;
	m->piece[m->npieces].off = from;
	m->piece[m->npieces].len = m->head.len - from;
	m->npieces++;
	m->size += m->head.len - from;
}

/* Adds about `bytes` of whole lines from a pool, as one or more slices. */
static void piece_pool(struct ml_msg *m, struct ml_rng *r, const char *pool, size_t psize,
		       size_t bytes)
{
	size_t lines = (bytes + LINE_W - 1) / LINE_W, plines = psize / LINE_W;

	if (lines == 0)
		lines = 1;
	while (lines > 0 && m->npieces < ML_MSG_MAXPARTS * 2) {
		size_t start = ml_rng_next(r) % plines, take = plines - start;

		if (take > lines)
			take = lines;
		m->piece[m->npieces].p = pool;
		m->piece[m->npieces].off = start * LINE_W;
		m->piece[m->npieces].len = take * LINE_W;
		m->npieces++;
		m->size += take * LINE_W;
		lines -= take;
	}
}

static const char *const subjects[] = {
	"Quarterly report",
	"Meeting tomorrow",
	"Budget review",
	"Project timeline update",
	"Contract draft",
	"Travel plans",
	"Release notes",
	"Customer feedback",
	"Team lunch",
	"Server migration",
	"Invoice question",
	"Agenda for Monday",
	/* RFC 2047 encoded UTF-8: "Café menu", "Überblick Q3", "Réunion équipe" */
	"=?UTF-8?B?Q2Fmw6kgbWVudQ==?=",
	"=?UTF-8?B?w5xiZXJibGljayBRMw==?=",
	"=?UTF-8?Q?R=C3=A9union_=C3=A9quipe?=",
};

static void put_date(struct buf *b, int64_t ms)
{
	char d[64];
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(d, sizeof(d), "%a, %d %b %Y %H:%M:%S +0000", &tm);
	buf_printf(b, "Date: %s\r\n", d);
}

static void put_addrs(struct buf *b, const char *hdr, const char *const *a, uint32_t n)
{
	buf_printf(b, "%s: ", hdr);
	for (uint32_t i = 0; i < n; i++)
		buf_printf(b, "%s<%s>", i ? ",\r\n " : "", a[i]);
	buf_puts(b, "\r\n");
}

static void build_headers(struct ml_msg *m, const struct ml_msg_spec *s, struct ml_rng *r)
{
	struct buf *b = &m->head;
	uint32_t nto = s->nto > 3 ? 3 : s->nto;
	bool reply = ml_rng_unit(r) < 0.3;
	const char *subj = subjects[ml_rng_next(r) % (sizeof(subjects) / sizeof(subjects[0]))];

	buf_printf(b, "Return-Path: <%s>\r\n", s->from);
	put_date(b, s->date_ms);
	buf_printf(b, "From: <%s>\r\n", s->from);
	put_addrs(b, "To", s->to, nto);
	if (s->nto > nto)
		put_addrs(b, "Cc", s->to + nto, s->nto - nto);
	buf_printf(b, "Subject: %s%s\r\n", reply ? "Re: " : "", subj);
	buf_printf(b, "Message-ID: " ML_MSGID_FMT "\r\n", s->run_id, s->seq);
	if (reply) {
		uint64_t ref = ml_rng_next(r) % 1000000;
		buf_printf(b, "In-Reply-To: <%" PRIu64 ".r%" PRIu64 "@mailload>\r\n", s->run_id,
			   ref);
		buf_printf(b, "References: <%" PRIu64 ".r%" PRIu64 "@mailload>\r\n", s->run_id,
			   ref);
	}
	if (s->sent_ms > 0)
		buf_printf(b, "X-Mailload-Sent: %" PRId64 "\r\n", s->sent_ms);
	if (ml_rng_unit(r) < 0.1)
		buf_puts(b, "X-Priority: 1\r\nPriority: urgent\r\n");
	buf_puts(b, "MIME-Version: 1.0\r\n");
}

/* multipart/mixed: a text part and one to three base64 attachments. */
static void build_mixed(struct ml_msg *m, struct ml_rng *r, const char *bnd, uint32_t size)
{
	static const char *const att[][2] = {
		{ "application/pdf", "report.pdf" },
		{ "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		  "notes.docx" },
		{ "image/jpeg", "photo.jpg" },
	};
	uint32_t natt = (uint32_t)ml_rng_range(r, 1, 3), text = size / 8;
	size_t from = 0;

	buf_printf(&m->head,
		   "Content-Type: multipart/mixed; boundary=\"%s\"\r\n\r\n"
		   "--%s\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n",
		   bnd, bnd);
	piece_head(m, from);
	piece_pool(m, r, text_pool, TEXT_POOL, text);
	for (uint32_t i = 0; i < natt; i++) {
		uint32_t a = (uint32_t)(ml_rng_next(r) % 3);

		from = m->head.len;
		buf_printf(&m->head,
			   "--%s\r\nContent-Type: %s; name=\"%s\"\r\n"
			   "Content-Transfer-Encoding: base64\r\n"
			   "Content-Disposition: attachment; filename=\"%s\"\r\n\r\n",
			   bnd, att[a][0], att[a][1], att[a][1]);
		piece_head(m, from);
		piece_pool(m, r, b64_pool, B64_POOL, (size - text) / natt);
	}
}

/* multipart/alternative: a text and an HTML part. */
static void build_alt(struct ml_msg *m, struct ml_rng *r, const char *bnd, uint32_t size)
{
	size_t from = 0;

	buf_printf(&m->head,
		   "Content-Type: multipart/alternative; boundary=\"%s\"\r\n\r\n"
		   "--%s\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n",
		   bnd, bnd);
	piece_head(m, from);
	piece_pool(m, r, text_pool, TEXT_POOL, size / 3);
	from = m->head.len;
	buf_printf(&m->head, "--%s\r\nContent-Type: text/html; charset=us-ascii\r\n\r\n", bnd);
	piece_head(m, from);
	piece_pool(m, r, html_pool, HTML_POOL, size - size / 3);
}

void ml_msg_build(struct ml_msg *m, const struct ml_msg_spec *s)
{
	struct ml_rng r;
	uint32_t size;
	size_t from;
	double u;
	char bnd[48];

	ml_rng_seed(&r, s->seed ^ s->run_id, s->seq);
	buf_reset(&m->head);
	m->npieces = 0;
	m->size = 0;
	size = ml_pick_size(&r, s->size_scale);
	u = ml_rng_unit(&r);
	m->mime = u < 0.5 ? MIME_PLAIN : u < 0.8 ? MIME_ALT : MIME_MIXED;
	build_headers(m, s, &r);
	snprintf(bnd, sizeof(bnd), "=_ml_%016" PRIx64, ml_rng_next(&r));
	switch (m->mime) {
	case MIME_PLAIN:
		buf_puts(&m->head, "Content-Type: text/plain; charset=us-ascii\r\n\r\n");
		piece_head(m, 0);
		piece_pool(m, &r, text_pool, TEXT_POOL, size);
		return;
	case MIME_ALT:
		build_alt(m, &r, bnd, size);
		break;
	case MIME_MIXED:
		build_mixed(m, &r, bnd, size);
		break;
	}
	from = m->head.len;
	buf_printf(&m->head, "--%s--\r\n", bnd);
	piece_head(m, from);
}

static const char *piece_ptr(const struct ml_msg *m, uint32_t i)
{
	return (m->piece[i].p != NULL ? m->piece[i].p : m->head.data) + m->piece[i].off;
}

void ml_msg_render(const struct ml_msg *m, struct buf *out)
{
	for (uint32_t i = 0; i < m->npieces; i++)
		buf_append(out, piece_ptr(m, i), m->piece[i].len);
}

void ml_msg_emit(const struct ml_msg *m, struct evbuffer *out)
{
	for (uint32_t i = 0; i < m->npieces; i++) {
		if (m->piece[i].p != NULL) /* the pools live as long as the process */
			evbuffer_add_reference(out, piece_ptr(m, i), m->piece[i].len, NULL, NULL);
		else
			evbuffer_add(out, piece_ptr(m, i), m->piece[i].len);
	}
}
