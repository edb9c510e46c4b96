/* msgcache.c — owns the per-message cache (msgcache.h): the builder that streams a message
 * through the RFC 5322/MIME parser and renders ENVELOPE, BODY and BODYSTRUCTURE (RFC 3501), the
 * serialized blob and its readers (view, part table lookup). IMAP string rendering and the
 * envelope: msgcache_imap.c.
 *
 * Limits (fixed here): MC_PARTS_MAX entities (the message, parts and embedded messages; past it
 * containers are not split further), nesting depth MC_DEPTH_MAX, MC_HEADER_MAX bytes of the raw
 * header block kept (header.len < header_size in the view means it was cut: read the file),
 * MC_FIELD_MAX bytes of any one field value, MC_ARENA_MAX bytes of rendered strings (past it,
 * parts render with RFC 3501 defaults).
 *
 * Blob layout (version 1, big-endian): u8 version; u64 size, header_size, body_lines; i64 date; i32 date_tz;
 * four (u32 length, bytes): envelope, body, bodystructure, header; u32 nparts; nparts records
 * of MC_REC bytes: u32 parent, u8 kind (0 leaf, 1 multipart, 2 message), u64 header_off,
 * header_size, body_off, body_size. Records are in preorder; record 0 is the message. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/endian.h"
#include "common/msgcache.h"
#include "common/msgcache_private.h"
#include "common/rfc5322.h"
#include "common/xmalloc.h"

#define MC_VERSION 1
#define MC_REC 37
#define MC_FIXED (1 + 4 * 8 + 4 + 4 * 4 + 4)
/* envelope (in the arena), BODY and BODYSTRUCTURE (MC_ARENA_MAX each), the header kept, the
   part table: what serialize writes at most */
_Static_assert(MC_FIXED + 3 * (size_t)MC_ARENA_MAX + MC_HEADER_MAX +
			       (size_t)MC_PARTS_MAX * MC_REC <=
		       MSGCACHE_BLOB_MAX,
	       "MSGCACHE_BLOB_MAX below what a cache can take");

static void cb_part_begin(void *ctx, const struct rfc5322_part *p);
static void cb_field(void *ctx, const struct rfc5322_part *p, const struct rfc5322_field *f);
static void cb_header_end(void *ctx, const struct rfc5322_part *p);
static void cb_part_end(void *ctx, const struct rfc5322_part *p);

static const struct rfc5322_callbacks mc_callbacks = {
	.part_begin = cb_part_begin,
	.field = cb_field,
	.header_end = cb_header_end,
	.part_end = cb_part_end,
};

static const char *const env_names[MC_ENV_N] = {
	"Date", "Subject", "From", "Sender",      "Reply-To",
	"To",   "Cc",      "Bcc",  "In-Reply-To", "Message-ID",
};

static const char *const mime_names[MC_MIME_N] = {
	"Content-ID",          "Content-Description", "Content-Transfer-Encoding", "Content-MD5",
	"Content-Disposition", "Content-Language",    "Content-Location",
};

struct msgcache_builder *msgcache_builder_new(void)
{
	struct msgcache_builder *b = xcalloc(1, sizeof(*b));
	struct rfc5322_limits lim = { MC_FIELD_MAX, MC_DEPTH_MAX, MC_PARTS_MAX };

	/* most messages have a few parts: grow on demand rather than clear MC_PARTS_MAX entries
	   for every message */
	b->parts_cap = 8;
	b->parts = xcalloc(b->parts_cap, sizeof(*b->parts));
	buf_init(&b->arena, 0, MC_ARENA_MAX);
	buf_init(&b->header, 0, MC_HEADER_MAX);
	buf_init(&b->scratch, 0, 4 * MC_FIELD_MAX + 1024);
	buf_init(&b->body, 0, MC_ARENA_MAX);
	buf_init(&b->bodystructure, 0, MC_ARENA_MAX);
	for (int i = 0; i < MC_ENV_N; i++)
		buf_init(&b->env[i], 0, MC_FIELD_MAX);
	for (int i = 0; i < MC_MIME_N; i++)
		buf_init(&b->mime[i], 0, MC_FIELD_MAX);
	b->ps = rfc5322_parser_new(&lim, &mc_callbacks, b);
	msgcache_builder_reset(b);
	return b;
}

void msgcache_builder_free(struct msgcache_builder **bp)
{
	struct msgcache_builder *b = *bp;

	if (b == NULL)
		return;
	rfc5322_parser_free(&b->ps);
	free(b->parts);
	buf_release(&b->arena);
	buf_release(&b->header);
	buf_release(&b->scratch);
	buf_release(&b->body);
	buf_release(&b->bodystructure);
	for (int i = 0; i < MC_ENV_N; i++)
		buf_release(&b->env[i]);
	for (int i = 0; i < MC_MIME_N; i++)
		buf_release(&b->mime[i]);
	free(b);
	*bp = NULL;
}

static void reset_fields(struct msgcache_builder *b)
{
	for (int i = 0; i < MC_ENV_N; i++) {
		buf_reset(&b->env[i]);
		b->env_seen[i] = false;
	}
	for (int i = 0; i < MC_MIME_N; i++) {
		buf_reset(&b->mime[i]);
		b->mime_seen[i] = false;
	}
}

void msgcache_builder_reset(struct msgcache_builder *b)
{
	rfc5322_parser_reset(b->ps);
	b->nparts = 0;
	b->size = 0;
	b->date = INT64_MIN;
	b->date_tz = 0;
	b->header_done = false;
	b->finished = false;
	buf_reset(&b->arena);
	buf_reset(&b->header);
	reset_fields(b);
}

void msgcache_builder_push(struct msgcache_builder *b, const void *data, size_t len)
{
	assert(!b->finished); /* push after finish: reset first */
	if (!b->header_done) {
		size_t room = b->header.max - b->header.len;

		(void)buf_append(&b->header, data, len < room ? len : room);
	}
	b->size += len;
	rfc5322_parser_push(b->ps, data, len);
}

static void cb_part_begin(void *ctx, const struct rfc5322_part *p)
{
	struct msgcache_builder *b = ctx;
	struct mc_part *mp;

	reset_fields(b);
	if (p->index >= MC_PARTS_MAX)
		return;
	if (p->index >= b->parts_cap) {
		uint32_t cap = b->parts_cap * 2 > p->index ? b->parts_cap * 2 : p->index + 1;

		cap = cap < MC_PARTS_MAX ? cap : MC_PARTS_MAX;
		b->parts = xreallocarray(b->parts, cap, sizeof(*b->parts));
		b->parts_cap = cap;
	}
	mp = &b->parts[p->index];
	memset(mp, 0, sizeof(*mp));
	mp->parent = p->parent;
	mp->first_child = mp->last_child = mp->next_sibling = MC_NONE;
	mp->header_off = p->header_off;
	b->nparts = p->index + 1;
	if (p->parent != UINT32_MAX && p->parent < MC_PARTS_MAX) {
		struct mc_part *par = &b->parts[p->parent];

		if (par->last_child == MC_NONE)
			par->first_child = p->index;
		else
			b->parts[par->last_child].next_sibling = p->index;
		par->last_child = p->index;
	}
}

static int field_index(const char *const *names, int n, struct str_view name)
{
	for (int i = 0; i < n; i++)
		if (str_caseeq(name.p, name.len, names[i], strlen(names[i])))
			return i;
	return -1;
}

static void cb_field(void *ctx, const struct rfc5322_part *p, const struct rfc5322_field *f)
{
	struct msgcache_builder *b = ctx;
	int i;

	if (p->is_root && (i = field_index(env_names, MC_ENV_N, f->name)) >= 0) {
		if (!b->env_seen[i]) {
			b->env_seen[i] = true;
			(void)buf_append(&b->env[i], f->value.p, f->value.len);
		}
		return;
	}
	if ((i = field_index(mime_names, MC_MIME_N, f->name)) >= 0 && !b->mime_seen[i]) {
		b->mime_seen[i] = true;
		(void)buf_append(&b->mime[i], f->value.p, f->value.len);
	}
}

static struct mc_span arena_mark(struct msgcache_builder *b)
{
	struct mc_span s = { (uint32_t)b->arena.len, 0 };

	return s;
}

static void arena_close(struct msgcache_builder *b, struct mc_span *s, int rc)
{
	if (rc < 0) { /* arena full: this string renders as its default */
		buf_truncate(&b->arena, s->off);
		s->len = 0;
		return;
	}
	s->len = (uint32_t)(b->arena.len - s->off);
}

static void cb_header_end(void *ctx, const struct rfc5322_part *p)
{
	struct msgcache_builder *b = ctx;
	struct mc_part *mp;
	int rc;

	if (p->index == 0) {
		b->header_done = true;
		b->header_size = p->header_size;
		if (b->env_seen[MC_ENV_DATE] &&
		    rfc5322_date_parse_tz(b->env[MC_ENV_DATE].data, b->env[MC_ENV_DATE].len,
					  &b->date, &b->date_tz) < 0) {
			b->date = INT64_MIN;
			b->date_tz = 0;
		}
	}
	if (p->index >= MC_PARTS_MAX)
		return;
	mp = &b->parts[p->index];
	mp->header_size = p->header_size;
	mp->body_off = p->body_off;
	mp->kind = (uint8_t)p->kind;
	mp->is_text = p->is_text;
	mp->is_multitype = str_caseeq(p->ctype->type.p, p->ctype->type.len, "multipart", 9);
	mp->is_msgtype = !mp->is_multitype &&
			 str_caseeq(p->ctype->type.p, p->ctype->type.len, "message", 7) &&
			 str_caseeq(p->ctype->subtype.p, p->ctype->subtype.len, "rfc822", 6);
	mp->fields = arena_mark(b);
	rc = mc_render_fields(b, p, mp->is_multitype);
	arena_close(b, &mp->fields, rc);
	mp->ext = arena_mark(b);
	rc = mc_render_ext(b, p, mp->is_multitype);
	arena_close(b, &mp->ext, rc);
	if (p->is_root) {
		mp->env = arena_mark(b);
		rc = mc_render_envelope(b, &b->arena);
		arena_close(b, &mp->env, rc);
	}
	reset_fields(b);
}

static void cb_part_end(void *ctx, const struct rfc5322_part *p)
{
	struct msgcache_builder *b = ctx;
	struct mc_part *mp;

	if (p->index >= MC_PARTS_MAX)
		return;
	mp = &b->parts[p->index];
	mp->body_off = p->body_off;
	mp->body_size = p->body_size;
	mp->lines = p->body_lines;
}

/* ---- BODY / BODYSTRUCTURE ---- */

#define EMPTY_FIELDS "\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\""
#define EMPTY_ENVELOPE "(NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL)"

static int put_span(struct msgcache_builder *b, struct mc_span s, const char *def, struct buf *o)
{
	if (s.len == 0)
		return buf_puts(o, def);
	return buf_append(o, b->arena.data + s.off, s.len);
}

static int render_empty(bool ext, struct buf *o)
{
	return buf_puts(o,
			ext ? "(" EMPTY_FIELDS " 0 0 NIL NIL NIL NIL)" : "(" EMPTY_FIELDS " 0 0)");
}

static int render_part(struct msgcache_builder *b, uint32_t i, bool ext, struct buf *o);

static int render_multipart(struct msgcache_builder *b, const struct mc_part *mp, bool ext,
			    struct buf *o)
{
	int rc = buf_putc(o, '(');

	if (mp->first_child == MC_NONE)
		rc |= render_empty(ext, o);
	for (uint32_t c = mp->first_child; c != MC_NONE && rc == 0; c = b->parts[c].next_sibling)
		rc |= render_part(b, c, ext, o);
	rc |= buf_putc(o, ' ');
	rc |= put_span(b, mp->fields, "\"mixed\"", o);
	if (ext) {
		rc |= buf_putc(o, ' ');
		rc |= put_span(b, mp->ext, "NIL NIL NIL NIL", o);
	}
	return rc | buf_putc(o, ')');
}

static int render_part(struct msgcache_builder *b, uint32_t i, bool ext, struct buf *o)
{
	const struct mc_part *mp = &b->parts[i];
	int rc;

	if (mp->is_multitype)
		return render_multipart(b, mp, ext, o);
	rc = buf_putc(o, '(');
	rc |= put_span(b, mp->fields, EMPTY_FIELDS, o);
	rc |= buf_printf(o, " %llu", (unsigned long long)mp->body_size);
	if (mp->is_msgtype) {
		uint32_t c = mp->kind == RFC5322_MESSAGE ? mp->first_child : MC_NONE;

		rc |= buf_putc(o, ' ');
		if (c != MC_NONE) {
			rc |= put_span(b, b->parts[c].env, EMPTY_ENVELOPE, o);
			rc |= buf_putc(o, ' ');
			rc |= render_part(b, c, ext, o);
		} else {
			rc |= buf_puts(o, EMPTY_ENVELOPE " ");
			rc |= render_empty(ext, o);
		}
	}
	if (mp->is_text || mp->is_msgtype)
		rc |= buf_printf(o, " %llu", (unsigned long long)mp->lines);
	if (ext) {
		rc |= buf_putc(o, ' ');
		rc |= put_span(b, mp->ext, "NIL NIL NIL NIL", o);
	}
	return rc | buf_putc(o, ')');
}

/* ---- serialization ---- */

static void put_u32(struct buf *o, uint32_t v)
{
	uint8_t t[4];

	put_be32(t, v);
	(void)buf_append(o, t, 4);
}

static void put_u64(struct buf *o, uint64_t v)
{
	uint8_t t[8];

	put_be64(t, v);
	(void)buf_append(o, t, 8);
}

static void put_blob_str(struct buf *o, const char *p, size_t n)
{
	put_u32(o, (uint32_t)n);
	(void)buf_append(o, p, n);
}

static int serialize(struct msgcache_builder *b, struct buf *out)
{
	const struct mc_part *root = &b->parts[0];
	struct mc_span env = root->env;
	size_t start = out->len;
	size_t hlen = b->header.len < b->header_size ? b->header.len : (size_t)b->header_size;

	(void)buf_putc(out, MC_VERSION);
	put_u64(out, b->size);
	put_u64(out, b->header_size);
	put_u64(out, root->lines);
	put_u64(out, (uint64_t)b->date);
	put_u32(out, (uint32_t)b->date_tz);
	if (env.len == 0)
		put_blob_str(out, EMPTY_ENVELOPE, strlen(EMPTY_ENVELOPE));
	else
		put_blob_str(out, b->arena.data + env.off, env.len);
	put_blob_str(out, b->body.data, b->body.len);
	put_blob_str(out, b->bodystructure.data, b->bodystructure.len);
	put_blob_str(out, b->header.data, hlen);
	put_u32(out, b->nparts);
	for (uint32_t i = 0; i < b->nparts; i++) {
		const struct mc_part *mp = &b->parts[i];

		put_u32(out, mp->parent);
		(void)buf_putc(out, (char)mp->kind);
		put_u64(out, mp->header_off);
		put_u64(out, mp->header_size);
		put_u64(out, mp->body_off);
		put_u64(out, mp->body_size);
	}
	if (out->len != start + MC_FIXED + env.len + (env.len == 0 ? strlen(EMPTY_ENVELOPE) : 0) +
				b->body.len + b->bodystructure.len + hlen +
				(size_t)b->nparts * MC_REC) {
		buf_truncate(out, start); /* the ceiling was reached somewhere */
		return -1;
	}
	return 0;
}

int msgcache_builder_finish(struct msgcache_builder *b, struct buf *out)
{
	if (!b->finished) {
		rfc5322_parser_finish(b->ps);
		b->finished = true;
		if (!b->header_done)
			b->header_size = b->size;
		buf_reset(&b->body);
		buf_reset(&b->bodystructure);
		if (render_part(b, 0, false, &b->body) < 0) {
			buf_reset(&b->body);
			(void)render_empty(false, &b->body);
		}
		if (render_part(b, 0, true, &b->bodystructure) < 0) {
			buf_reset(&b->bodystructure);
			(void)render_empty(true, &b->bodystructure);
		}
	}
	return serialize(b, out);
}

int msgcache_build(const void *msg, size_t len, struct buf *out)
{
	struct msgcache_builder *b = msgcache_builder_new();
	int rc;

	msgcache_builder_push(b, msg, len);
	rc = msgcache_builder_finish(b, out);
	msgcache_builder_free(&b);
	return rc;
}

/* ---- readers ---- */

struct rd {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
};

static const uint8_t *rd_take(struct rd *r, size_t n)
{
	const uint8_t *p = r->p + r->pos;

	if (r->bad || n > r->len - r->pos) {
		r->bad = true;
		return NULL;
	}
	r->pos += n;
	return p;
}

static uint64_t rd_u64(struct rd *r)
{
	const uint8_t *p = rd_take(r, 8);

	return p != NULL ? get_be64(p) : 0;
}

static uint32_t rd_u32(struct rd *r)
{
	const uint8_t *p = rd_take(r, 4);

	return p != NULL ? get_be32(p) : 0;
}

static struct str_view rd_str(struct rd *r)
{
	struct str_view v = { "", 0 };
	uint32_t n = rd_u32(r);
	const uint8_t *p = rd_take(r, n);

	if (p != NULL) {
		v.p = (const char *)p;
		v.len = n;
	}
	return v;
}

/* Parses the fixed part; *parts_r = the part table. */
static int parse_blob(const void *blob, size_t len, struct msgcache_view *v,
		      const uint8_t **parts_r)
{
	struct rd r = { blob, len, 0, false };
	const uint8_t *ver = rd_take(&r, 1);

	if (ver == NULL || *ver != MC_VERSION)
		return -1;
	v->size = rd_u64(&r);
	v->header_size = rd_u64(&r);
	v->body_size = v->size >= v->header_size ? v->size - v->header_size : 0;
	v->body_lines = rd_u64(&r);
	v->date = (int64_t)rd_u64(&r);
	v->date_tz = (int32_t)rd_u32(&r);
	v->envelope = rd_str(&r);
	v->body = rd_str(&r);
	v->bodystructure = rd_str(&r);
	v->header = rd_str(&r);
	v->nparts = rd_u32(&r);
	if (r.bad || v->nparts == 0 || v->nparts > MC_PARTS_MAX)
		return -1;
	*parts_r = rd_take(&r, (size_t)v->nparts * MC_REC);
	if (*parts_r == NULL || r.pos != len)
		return -1;
	return 0;
}

int msgcache_parse(const void *blob, size_t len, struct msgcache_view *v)
{
	const uint8_t *parts;

	return parse_blob(blob, len, v, &parts);
}

struct rec {
	uint32_t parent;
	uint8_t kind;
	uint64_t header_off, header_size, body_off, body_size;
};

static void get_rec(const uint8_t *parts, uint32_t i, struct rec *r)
{
	const uint8_t *p = parts + (size_t)i * MC_REC;

	r->parent = get_be32(p);
	r->kind = p[4];
	r->header_off = get_be64(p + 5);
	r->header_size = get_be64(p + 13);
	r->body_off = get_be64(p + 21);
	r->body_size = get_be64(p + 29);
}

/* The nth (1-based) child of node, or MC_NONE. */
static uint32_t nth_child(const uint8_t *parts, uint32_t nparts, uint32_t node, uint64_t n)
{
	struct rec r;

	for (uint32_t i = node + 1; i < nparts; i++) {
		get_rec(parts, i, &r);
		if (r.parent == node && --n == 0)
			return i;
	}
	return MC_NONE;
}

static bool is_root(const uint8_t *parts, uint32_t node)
{
	struct rec r;

	if (node == 0)
		return true;
	get_rec(parts, node, &r);
	if (r.parent >= node)
		return false; /* not ours: parents precede their children */
	get_rec(parts, r.parent, &r);
	return r.kind == RFC5322_MESSAGE;
}

/* Walks a section number: a multipart's n selects its nth child; a message (or embedded
   message) that is not multipart has one part, 1, its body; a message/rfc822 part followed by
   more numbers continues in the embedded message. */
static uint32_t resolve(const uint8_t *parts, uint32_t nparts, const char *section)
{
	uint32_t node = 0;
	const char *s = section;
	bool in_body = false; /* "1" of a non-multipart message was taken */
	struct rec r;

	while (*s != '\0') {
		uint64_t n = 0;

		if (*s < '1' || *s > '9')
			return MC_NONE;
		while (*s >= '0' && *s <= '9' && n < 1000000)
			n = n * 10 + (uint64_t)(*s++ - '0');
		if (*s != '\0' && (*s++ != '.' || *s == '\0'))
			return MC_NONE;
		get_rec(parts, node, &r);
		if (r.kind == RFC5322_MULTIPART)
			node = nth_child(parts, nparts, node, n);
		else if (n == 1 && !in_body && is_root(parts, node))
			in_body = true;
		else
			return MC_NONE;
		if (node == MC_NONE)
			return MC_NONE;
		get_rec(parts, node, &r);
		if (*s != '\0' && r.kind == RFC5322_MESSAGE) {
			node = nth_child(parts, nparts, node, 1);
			in_body = false;
			if (node == MC_NONE)
				return MC_NONE;
		}
	}
	return node;
}

int msgcache_part(const void *blob, size_t len, const char *section, struct msgcache_part *p)
{
	struct msgcache_view v;
	const uint8_t *parts;
	uint32_t node, sub;
	struct rec r, sr;

	if (parse_blob(blob, len, &v, &parts) < 0 ||
	    (node = resolve(parts, v.nparts, section)) == MC_NONE)
		return -1;
	get_rec(parts, node, &r);
	memset(p, 0, sizeof(*p));
	p->header_off = r.header_off;
	p->header_size = r.header_size;
	p->body_off = r.body_off;
	p->body_size = r.body_size;
	p->is_multipart = r.kind == RFC5322_MULTIPART;
	if (r.kind == RFC5322_MESSAGE && (sub = nth_child(parts, v.nparts, node, 1)) != MC_NONE) {
		get_rec(parts, sub, &sr);
		p->is_message = true;
		p->sub_header_off = sr.header_off;
		p->sub_header_size = sr.header_size;
		p->sub_body_off = sr.body_off;
		p->sub_body_size = sr.body_size;
	}
	return 0;
}
