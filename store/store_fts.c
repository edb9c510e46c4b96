/* store_fts.c — owns the full-text index (DBI `fts` of each partition): which messages of a
 * mailbox may contain a string, so SEARCH BODY/TEXT reads only those (and verifies them).
 *
 * What is indexed is the searchable text of common/mimetext.h (case-folded): every byte
 * trigram of every run. A needle of 3 or more bytes matches only messages holding all of
 * its trigrams, so the candidates are a superset of the matches; shorter needles and
 * mailboxes not (completely) indexed narrow nothing (STORE_ENOTSUP: read every message).
 *
 * Per mailbox, an LSM of two tiers:
 *   mbox 'M'              -> state: complete, pending count, rebuild bound
 *   mbox 'P' be32 uid     -> one message's trigrams (sorted, delta varints), written by the
 *                            append's own txn; or FTS_WILD (a message too big to index:
 *                            always a candidate)
 *   mbox 'S' be32 first   -> a segment: an inverted index of messages first..last (their
 *                            UIDs, a trigram dictionary, postings as delta varints or
 *                            bitmaps); FTS_L0 pending records become one class-0 segment,
 *                            FTS_FANOUT segments of one class one of the next, up to
 *                            FTS_CLASS_MAX. Segments cover disjoint, increasing UID ranges.
 *   mbox 'D' be32 first   -> be32 messages expunged from that segment since it was written;
 *                            past half of it the segment is written again without them
 * A message's trigrams are computed from its file before the txn when the group committer
 * can (store_fts_prepare, on its pool's threads), else in the txn. Expunged messages leave
 * their postings until the segment is rewritten or merged; candidates are only ever
 * intersected with the messages that exist. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/log.h"
#include "common/mimetext.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

#define FTS_L0 64                /* pending records per class-0 segment */
#define FTS_FANOUT 4             /* segments of a class merged into one of the next */
#define FTS_CLASS_MAX 3          /* 64 * 4^3 = 4096 messages per segment at most */
#define FTS_TEXT_MAX (16u << 20) /* text indexed per message; beyond: FTS_WILD */
#define FTS_WILD 0xffu           /* a pending record's first byte: always a candidate */
#define FTS_SEG_VERSION 1
#define FTS_SEG_HDR 32
#define FTS_DICT_ENT 8         /* code be24, type u8, offset be32 */
#define FTS_NEEDLE_TRIGRAMS 64 /* a longer needle is checked by its first 64 */

enum { POST_VARINT = 0, POST_BITMAP = 1 };

static int merge_tail(struct store_txn *t, uint64_t mbox);

/* ------------------------------------------------------------------------------------- */
/* Varints */

static void put_varint(struct buf *b, uint32_t v)
{
	char t[5];
	size_t n = 0;

	while (v >= 0x80) {
		t[n++] = (char)(v | 0x80);
		v >>= 7;
	}
	t[n++] = (char)v;
	buf_append(b, t, n);
}

/* Reads one varint at *p (< end); false at the end or on a malformed one. */
static bool get_varint(const uint8_t **p, const uint8_t *end, uint32_t *v_r)
{
	uint32_t v = 0;

	for (unsigned shift = 0; shift < 35 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;

		v |= (uint32_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v_r = v;
			return true;
		}
	}
	return false;
}

/* ------------------------------------------------------------------------------------- */
/* A message's trigrams */

struct store_fts_doc {
	uint32_t *codes; /* sorted, distinct */
	size_t n;
	bool wild;
};

/* A thread's scratch for reading trigrams (kept for its next message): one bit per possible
   trigram, so a repeated one costs a bit test; the codes found, to clear the bits after. */
struct fts_set {
	uint64_t *bits; /* 2^24 bits */
	uint32_t *codes;
	size_t n, cap;
	uint64_t text; /* bytes of text seen */
	bool wild;
	uint32_t roll; /* the last bytes of the current run */
	unsigned have;
	struct mimetext *mt;
};

static pthread_key_t set_key;
static pthread_once_t set_once = PTHREAD_ONCE_INIT;

static void set_destroy(void *arg)
{
	struct fts_set *s = arg;

	mimetext_free(&s->mt);
	free(s->bits);
	free(s->codes);
	free(s);
}

static void set_key_make(void)
{
	if (pthread_key_create(&set_key, set_destroy) != 0)
		fatalx("store: pthread_key_create");
}

static bool doc_run(void *arg, enum mimetext_kind kind, bool start, const char *p, size_t len,
		    const struct mimetext_leaf *leaf);

static struct fts_set *set_get(void)
{
	struct fts_set *s;

	pthread_once(&set_once, set_key_make);
	if ((s = pthread_getspecific(set_key)) == NULL) {
		struct mimetext_opts o = { .fold = true, .fields = true };

		s = xcalloc(1, sizeof(*s));
		s->bits = xcalloc((1u << 24) / 64, sizeof(*s->bits));
		s->mt = mimetext_new(&o, doc_run, s);
		if (pthread_setspecific(set_key, s) != 0)
			fatalx("store: pthread_setspecific");
	}
	s->n = 0;
	s->text = 0;
	s->wild = false;
	return s;
}

static bool doc_run(void *arg, enum mimetext_kind kind, bool start, const char *p, size_t len,
		    const struct mimetext_leaf *leaf)
{
	struct fts_set *s = arg;
	const unsigned char *u = (const unsigned char *)p;
	uint64_t *bits = s->bits;
	uint32_t roll = s->roll;
	unsigned have = s->have;

	(void)kind;
	(void)leaf;
	if (start) {
		roll = 0;
		have = 0;
	}
	s->text += len;
	if (s->text > FTS_TEXT_MAX) {
		s->wild = true;
		return true;
	}
	for (size_t i = 0; i < len; i++) {
		uint64_t bit;

		roll = (roll << 8 | u[i]) & 0xffffffu;
		if (++have < 3)
			continue;
		bit = (uint64_t)1 << (roll & 63);
		if (bits[roll >> 6] & bit)
			continue;
		bits[roll >> 6] |= bit;
		if (s->n == s->cap)
			s->codes = xreallocarray(s->codes, s->cap = s->cap * 2 + 4096,
						 sizeof(*s->codes));
		s->codes[s->n++] = roll;
	}
	s->roll = roll;
	s->have = have;
	return false;
}

/* Sorts 24-bit codes: three 8-bit passes. */
static void sort_codes(uint32_t *v, size_t n)
{
	uint32_t *tmp = xreallocarray(NULL, n + 1, sizeof(*tmp));
	size_t cnt[256];

	for (unsigned shift = 0; shift < 24; shift += 8) {
		size_t sum = 0;

		memset(cnt, 0, sizeof(cnt));
		for (size_t i = 0; i < n; i++)
			cnt[(v[i] >> shift) & 0xff]++;
		for (unsigned b = 0; b < 256; b++) {
			size_t c = cnt[b];

			cnt[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[cnt[(v[i] >> shift) & 0xff]++] = v[i];
		memcpy(v, tmp, n * sizeof(*v));
	}
	free(tmp);
}

/* The trigrams of message file fd (size bytes). Errors: STORE_EIO (a read failed). */
static int doc_from_fd(int fd, uint64_t size, struct store_fts_doc **doc_r)
{
	struct fts_set *s = set_get();
	struct store_fts_doc *d;
	int rc = mimetext_file(s->mt, fd, size);

	for (size_t i = 0; i < s->n; i++) /* the bitmap clean for the next message */
		s->bits[s->codes[i] >> 6] &= ~((uint64_t)1 << (s->codes[i] & 63));
	*doc_r = NULL;
	if (rc != 0)
		return STORE_EIO;
	d = xcalloc(1, sizeof(*d));
	d->wild = s->wild;
	if (!s->wild) {
		d->codes = xreallocarray(NULL, s->n + 1, sizeof(*d->codes));
		if (s->n > 0) /* no text at all: s->codes may not exist yet */
			memcpy(d->codes, s->codes, s->n * sizeof(*d->codes));
		d->n = s->n;
		sort_codes(d->codes, d->n);
	}
	*doc_r = d;
	return 0;
}

/* The trigrams of blob (of t's partition, seen by t), or of b when it is not NULL. */
static int doc_from_blob(struct store_txn *t, const struct store_blob *b, uint64_t blob,
			 struct store_fts_doc **doc_r)
{
	uint64_t size;
	int fd, rc;

	*doc_r = NULL;
	if (b != NULL)
		rc = store_blob_open_blob(b, &fd, &size);
	else
		rc = store_blob_open_txn(t, blob, &fd, &size);
	if (rc != 0)
		return rc;
	rc = doc_from_fd(fd, size, doc_r);
	close(fd);
	return rc;
}

void store_fts_doc_free(struct store_fts_doc **dp)
{
	if (*dp == NULL)
		return;
	free((*dp)->codes);
	free(*dp);
	*dp = NULL;
}

void store_fts_prepare(struct store_blob *b)
{
	if (!b->st->fts || b->fts != NULL || !b->finished)
		return;
	if (doc_from_blob(NULL, b, b->id, &b->fts) != 0)
		b->fts = NULL; /* computed in the txn then (and its error met there) */
}

/* ------------------------------------------------------------------------------------- */
/* Keys and the mailbox state */

struct fts_state {
	bool complete;         /* every message of the mailbox is indexed */
	uint32_t pending;      /* 'P' records */
	uint32_t rebuild_end;  /* a rebuild indexes UIDs up to this (0: none running) */
	uint32_t rebuild_next; /* and is at this one */
};
#define FTS_STATE_LEN 16

static size_t key_of(uint8_t k[13], uint64_t mbox, char type, uint32_t uid)
{
	put_be64(k, mbox);
	k[8] = (uint8_t)type;
	if (type == 'M')
		return 9;
	put_be32(k + 9, uid);
	return 13;
}

/* 0 and *s (absent: found false), or an error. */
static int state_load(struct store_txn *t, uint64_t mbox, struct fts_state *s, bool *found_r)
{
	uint8_t k[13];
	MDB_val v;
	int rc = store_get(t, DBI_FTS, k, key_of(k, mbox, 'M', 0), &v);

	memset(s, 0, sizeof(*s));
	*found_r = false;
	if (rc == STORE_ENOMSG)
		return 0;
	if (rc != 0)
		return rc;
	if (v.mv_size < FTS_STATE_LEN)
		return STORE_ECORRUPT;
	const uint8_t *b = v.mv_data;
	s->complete = b[0] != 0;
	s->pending = get_be32(b + 4);
	s->rebuild_end = get_be32(b + 8);
	s->rebuild_next = get_be32(b + 12);
	*found_r = true;
	return 0;
}

static int state_store(struct store_txn *t, uint64_t mbox, const struct fts_state *s)
{
	uint8_t k[13], b[FTS_STATE_LEN] = { 0 };

	b[0] = s->complete;
	put_be32(b + 4, s->pending);
	put_be32(b + 8, s->rebuild_end);
	put_be32(b + 12, s->rebuild_next);
	return store_put(t, DBI_FTS, k, key_of(k, mbox, 'M', 0), b, sizeof(b));
}

/* ------------------------------------------------------------------------------------- */
/* Segments */

struct seg { /* a decoded view of a segment (pointers into the map) */
	const uint8_t *base;
	size_t size;
	uint32_t first, last, nmsgs, ntri;
	unsigned cls;
	const uint8_t *uids, *wild, *dict, *post;
	size_t uids_len, wild_len, post_len;
};

/* Header: version u8, class u8, 2 reserved, first be32, last be32, nmsgs be32, ntri be32,
   uids_len be32, post_len be32, wild_len be32; then the UIDs (delta varints), the local ids
   of wild messages (delta varints), the dictionary (ntri entries), the postings. */
static int seg_decode(const MDB_val *v, struct seg *s)
{
	const uint8_t *b = v->mv_data;

	if (v->mv_size < FTS_SEG_HDR || b[0] != FTS_SEG_VERSION)
		return STORE_ECORRUPT;
	s->base = b;
	s->size = v->mv_size;
	s->cls = b[1];
	s->first = get_be32(b + 4);
	s->last = get_be32(b + 8);
	s->nmsgs = get_be32(b + 12);
	s->ntri = get_be32(b + 16);
	s->uids_len = get_be32(b + 20);
	s->post_len = get_be32(b + 24);
	s->wild_len = get_be32(b + 28);
	if ((uint64_t)FTS_SEG_HDR + s->uids_len + s->wild_len + (uint64_t)s->ntri * FTS_DICT_ENT +
		    s->post_len !=
	    v->mv_size)
		return STORE_ECORRUPT;
	s->uids = b + FTS_SEG_HDR;
	s->wild = s->uids + s->uids_len;
	s->dict = s->wild + s->wild_len;
	s->post = s->dict + (size_t)s->ntri * FTS_DICT_ENT;
	return 0;
}

static uint32_t dict_code(const struct seg *s, uint32_t i)
{
	const uint8_t *e = s->dict + (size_t)i * FTS_DICT_ENT;

	return (uint32_t)e[0] << 16 | (uint32_t)e[1] << 8 | e[2];
}

/* The dictionary entry of code, or -1. */
static int64_t dict_find(const struct seg *s, uint32_t code)
{
	uint32_t lo = 0, hi = s->ntri;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2, c = dict_code(s, mid);

		if (c == code)
			return mid;
		if (c < code)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Posting i: type and bytes. */
static bool dict_posting(const struct seg *s, uint32_t i, unsigned *type_r, const uint8_t **p_r,
			 size_t *len_r)
{
	const uint8_t *e = s->dict + (size_t)i * FTS_DICT_ENT;
	uint32_t off = get_be32(e + 4);
	uint32_t end = i + 1 < s->ntri ? get_be32(e + FTS_DICT_ENT + 4) : (uint32_t)s->post_len;

	if (off > end || end > s->post_len)
		return false;
	*type_r = e[3];
	*p_r = s->post + off;
	*len_r = end - off;
	return true;
}

/* The segment's UIDs (local id i -> uid) into a new array of s->nmsgs. */
static int seg_uids(const struct seg *s, uint32_t **uids_r)
{
	uint32_t *u = xreallocarray(NULL, s->nmsgs + 1, sizeof(*u));
	const uint8_t *p = s->uids, *end = s->uids + s->uids_len;
	uint32_t prev = 0;

	for (uint32_t i = 0; i < s->nmsgs; i++) {
		uint32_t d;

		if (!get_varint(&p, end, &d)) {
			free(u);
			return STORE_ECORRUPT;
		}
		u[i] = prev += d;
	}
	*uids_r = u;
	return 0;
}

/* Calls each local id of a posting; false when it does not decode. */
static bool posting_each(const struct seg *s, unsigned type, const uint8_t *p, size_t len,
			 void (*fn)(void *arg, uint32_t id), void *arg)
{
	if (type == POST_BITMAP) {
		if (len != (s->nmsgs + 7) / 8)
			return false;
		for (uint32_t i = 0; i < len; i++)
			for (uint8_t b = p[i]; b != 0; b &= (uint8_t)(b - 1))
				fn(arg, i * 8 + (uint32_t)__builtin_ctz(b));
		return true;
	}
	const uint8_t *end = p + len;
	uint32_t id = 0;

	for (bool first = true; p < end; first = false) {
		uint32_t d;

		if (!get_varint(&p, end, &d))
			return false;
		id = first ? d : id + d;
		if (id >= s->nmsgs)
			return false;
		fn(arg, id);
	}
	return true;
}

/* A segment being written: postings added in code order. */
struct seg_out {
	struct buf uids, wild, dict, post;
	uint32_t last_wild;
	uint32_t nmsgs, ntri, first, last;
	unsigned cls;
	struct buf tmp;
};

static void out_init(struct seg_out *o, const uint32_t *uids, uint32_t n, unsigned cls)
{
	uint32_t prev = 0;

	memset(o, 0, sizeof(*o));
	buf_init(&o->uids, 256, BUF_INPUT_BOUNDED);  /* bounded by nmsgs <= 4096 * 5 bytes */
	buf_init(&o->wild, 16, BUF_INPUT_BOUNDED);   /* the same */
	buf_init(&o->dict, 4096, BUF_INPUT_BOUNDED); /* by the distinct codes (< 2^24) */
	buf_init(&o->post, 4096, BUF_INPUT_BOUNDED); /* by the messages' texts */
	buf_init(&o->tmp, 256, BUF_INPUT_BOUNDED);
	for (uint32_t i = 0; i < n; i++) {
		put_varint(&o->uids, uids[i] - prev);
		prev = uids[i];
	}
	o->nmsgs = n;
	o->first = n > 0 ? uids[0] : 0;
	o->last = n > 0 ? uids[n - 1] : 0;
	o->cls = cls;
}

/* Adds code's posting: ids sorted, distinct, < nmsgs. */
static void out_add(struct seg_out *o, uint32_t code, const uint32_t *ids, size_t n)
{
	uint8_t e[FTS_DICT_ENT];
	size_t bm = (o->nmsgs + 7) / 8;

	if (n == 0)
		return;
	buf_reset(&o->tmp);
	for (size_t i = 0; i < n && o->tmp.len <= bm; i++)
		put_varint(&o->tmp, i == 0 ? ids[0] : ids[i] - ids[i - 1]);
	e[0] = (uint8_t)(code >> 16);
	e[1] = (uint8_t)(code >> 8);
	e[2] = (uint8_t)code;
	put_be32(e + 4, (uint32_t)o->post.len);
	if (o->tmp.len <= bm) {
		e[3] = POST_VARINT;
		buf_append(&o->post, o->tmp.data, o->tmp.len);
	} else {
		char *m = buf_reserve(&o->post, bm);

		e[3] = POST_BITMAP;
		if (m != NULL) {
			memset(m, 0, bm);
			for (size_t i = 0; i < n; i++)
				m[ids[i] / 8] = (char)(m[ids[i] / 8] | 1 << (ids[i] % 8));
			buf_commit(&o->post, bm);
		}
	}
	buf_append(&o->dict, e, sizeof(e));
	o->ntri++;
}

/* Adds a wild message (ids in increasing order). */
static void out_wild(struct seg_out *o, uint32_t id)
{
	put_varint(&o->wild, o->wild.len == 0 ? id : id - o->last_wild);
	o->last_wild = id;
}

static void out_release(struct seg_out *o)
{
	buf_release(&o->uids);
	buf_release(&o->wild);
	buf_release(&o->dict);
	buf_release(&o->post);
	buf_release(&o->tmp);
}

/* Writes the segment (none when it holds no message) and its dead counter reset. */
static int out_store(struct store_txn *t, uint64_t mbox, struct seg_out *o)
{
	uint8_t k[13], hdr[FTS_SEG_HDR] = { FTS_SEG_VERSION };
	struct buf v;
	int rc;

	if (o->nmsgs == 0)
		return 0;
	hdr[1] = (uint8_t)o->cls;
	put_be32(hdr + 4, o->first);
	put_be32(hdr + 8, o->last);
	put_be32(hdr + 12, o->nmsgs);
	put_be32(hdr + 16, o->ntri);
	put_be32(hdr + 20, (uint32_t)o->uids.len);
	put_be32(hdr + 24, (uint32_t)o->post.len);
	put_be32(hdr + 28, (uint32_t)o->wild.len);
	buf_init(&v, FTS_SEG_HDR + o->uids.len + o->wild.len + o->dict.len + o->post.len + 1,
		 BUF_INPUT_BOUNDED); /* the parts' sum */
	buf_append(&v, hdr, sizeof(hdr));
	buf_append(&v, o->uids.data, o->uids.len);
	buf_append(&v, o->wild.data, o->wild.len);
	buf_append(&v, o->dict.data, o->dict.len);
	buf_append(&v, o->post.data, o->post.len);
	rc = store_put(t, DBI_FTS, k, key_of(k, mbox, 'S', o->first), v.data, v.len);
	buf_release(&v);
	if (rc == 0) {
		rc = store_del(t, DBI_FTS, k, key_of(k, mbox, 'D', o->first));
		rc = rc == STORE_ENOMSG ? 0 : rc;
	}
	return rc;
}

/* ---- building a class-0 segment from pending records ---- */

struct pair {
	uint32_t code, id;
};

/* Stable sort of pairs by code (ids stay in order within a code). */
static void sort_pairs(struct pair *v, size_t n)
{
	struct pair *tmp = xreallocarray(NULL, n + 1, sizeof(*tmp));
	size_t cnt[256];

	for (unsigned shift = 0; shift < 24; shift += 8) {
		size_t sum = 0;

		memset(cnt, 0, sizeof(cnt));
		for (size_t i = 0; i < n; i++)
			cnt[(v[i].code >> shift) & 0xff]++;
		for (unsigned b = 0; b < 256; b++) {
			size_t c = cnt[b];

			cnt[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[cnt[(v[i].code >> shift) & 0xff]++] = v[i];
		memcpy(v, tmp, n * sizeof(*v));
	}
	free(tmp);
}

/* Appends a pending record's codes as pairs for local id id; *wild_r for a wild record.
   False when it does not decode. */
static bool pending_pairs(const MDB_val *v, uint32_t id, struct pair **pv, size_t *n, size_t *cap,
			  bool *wild_r)
{
	const uint8_t *p = v->mv_data, *end = p + v->mv_size;
	uint32_t cnt, code = 0;

	*wild_r = v->mv_size >= 1 && p[0] == FTS_WILD;
	if (*wild_r)
		return true;
	if (!get_varint(&p, end, &cnt))
		return false;
	for (uint32_t i = 0; i < cnt; i++) {
		uint32_t d;

		if (!get_varint(&p, end, &d))
			return false;
		code = i == 0 ? d : code + d;
		if (*n == *cap)
			*pv = xreallocarray(*pv, *cap = *cap * 2 + 1024, sizeof(**pv));
		(*pv)[(*n)++] = (struct pair){ code & 0xffffffu, id };
	}
	return true;
}

static void out_add_pairs(struct seg_out *o, const struct pair *pv, size_t n)
{
	uint32_t *ids = xreallocarray(NULL, o->nmsgs + 1, sizeof(*ids));
	size_t i = 0;

	while (i < n) {
		uint32_t code = pv[i].code;
		size_t k = 0;

		while (i < n && pv[i].code == code) {
			if (k == 0 || ids[k - 1] != pv[i].id)
				ids[k++] = pv[i].id;
			i++;
		}
		out_add(o, code, ids, k);
	}
	free(ids);
}

/* Builds a class-0 segment from the FTS_L0 first pending records (in a rebuild, of those
   up to its bound only); *built_r false when there were not enough. */
static int build_from_pending(struct store_txn *t, uint64_t mbox, struct fts_state *st,
			      bool *built_r)
{
	uint8_t k[13];
	MDB_cursor *c;
	MDB_val key, v;
	uint32_t uids[FTS_L0];
	bool wild[FTS_L0];
	struct pair *pv = NULL;
	size_t n = 0, cap = 0, got = 0;
	struct seg_out o;
	int rc = 0, mrc;

	*built_r = false;
	if ((mrc = mdb_cursor_open(t->txn, t->e->dbi[DBI_FTS], &c)) != 0)
		return store_mdb_err(t, mrc, "cursor");
	key.mv_data = k;
	key.mv_size = key_of(k, mbox, 'P', 0);
	for (mrc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); mrc == 0 && got < FTS_L0;
	     mrc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		const uint8_t *kb = key.mv_data;

		if (key.mv_size != 13 || get_be64(kb) != mbox || kb[8] != 'P')
			break;
		if (st->rebuild_end != 0 && get_be32(kb + 9) > st->rebuild_end)
			break; /* after the rebuild's: they wait until it is done */
		uids[got] = get_be32(kb + 9);
		if (!pending_pairs(&v, (uint32_t)got, &pv, &n, &cap, &wild[got])) {
			rc = STORE_ECORRUPT;
			break;
		}
		got++;
	}
	mdb_cursor_close(c);
	if (rc == 0 && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = store_mdb_err(t, mrc, "cursor");
	if (rc != 0 || got < FTS_L0) {
		free(pv);
		return rc;
	}
	sort_pairs(pv, n);
	out_init(&o, uids, (uint32_t)got, 0);
	for (size_t i = 0; i < got; i++)
		if (wild[i])
			out_wild(&o, (uint32_t)i);
	out_add_pairs(&o, pv, n);
	free(pv);
	rc = out_store(t, mbox, &o);
	out_release(&o);
	for (size_t i = 0; i < got && rc == 0; i++)
		rc = store_del(t, DBI_FTS, k, key_of(k, mbox, 'P', uids[i]));
	if (rc == 0) {
		st->pending = got > st->pending ? 0 : st->pending - (uint32_t)got;
		*built_r = true;
	}
	return rc;
}

/* Builds segments (and merges them) while enough records are pending. */
static int build_pending(struct store_txn *t, uint64_t mbox, struct fts_state *st)
{
	bool built = true;
	int rc = 0;

	while (rc == 0 && built && st->pending >= FTS_L0)
		if ((rc = build_from_pending(t, mbox, st, &built)) == 0 && built)
			rc = merge_tail(t, mbox);
	return rc;
}

/* ---- merging and rewriting segments ---- */

struct remap_ctx {
	const uint32_t *map; /* local id -> new id, UINT32_MAX: dropped */
	uint32_t *ids;
	size_t n;
};

static void remap_one(void *arg, uint32_t id)
{
	struct remap_ctx *r = arg;

	if (r->map[id] != UINT32_MAX)
		r->ids[r->n++] = r->map[id];
}

static int msg_exists(struct store_txn *t, uint64_t mbox, uint32_t uid, bool *yes_r)
{
	uint8_t k[12];
	MDB_val v;
	int rc;

	put_be64(k, mbox);
	put_be32(k + 8, uid);
	rc = store_get(t, DBI_MSGS, k, 12, &v);
	*yes_r = rc == 0;
	return rc == STORE_ENOMSG ? 0 : rc;
}

struct wild_ctx {
	const uint32_t *map;
	struct seg_out *out;
};

static void wild_one(void *arg, uint32_t id)
{
	struct wild_ctx *w = arg;

	if (w->map[id] != UINT32_MAX)
		out_wild(w->out, w->map[id]);
}

/* The local ids of a segment's wild messages, remapped, onto out. */
static bool wild_remap(const struct seg *s, const uint32_t *map, struct seg_out *out)
{
	struct wild_ctx w = { map, out };

	return posting_each(s, POST_VARINT, s->wild, s->wild_len, wild_one, &w);
}

/* The next code of the inputs' dictionaries (a merge: each is sorted); UINT32_MAX at the
   end. */
static uint32_t next_code(const struct seg *segs, const uint32_t *pos, size_t n)
{
	uint32_t best = UINT32_MAX;

	for (size_t i = 0; i < n; i++)
		if (pos[i] < segs[i].ntri && dict_code(&segs[i], pos[i]) < best)
			best = dict_code(&segs[i], pos[i]);
	return best;
}

/* Writes one segment of class cls from segs[0..n) (in UID order, disjoint), without the
   messages that are gone; the old segments' rows are deleted first. */
static int merge_segs(struct store_txn *t, uint64_t mbox, struct seg *segs, size_t n, unsigned cls)
{
	uint32_t **maps = xcalloc(n + 1, sizeof(*maps)), *uids, *ids, code;
	uint32_t total = 0, kept = 0, *pos = xcalloc(n + 1, sizeof(*pos));
	struct seg_out o;
	uint8_t k[13];
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		total += segs[i].nmsgs;
	uids = xreallocarray(NULL, total + 1, sizeof(*uids));
	ids = xreallocarray(NULL, total + 1, sizeof(*ids));
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint32_t *su;

		if ((rc = seg_uids(&segs[i], &su)) != 0)
			break;
		maps[i] = xreallocarray(NULL, segs[i].nmsgs + 1, sizeof(**maps));
		for (uint32_t j = 0; j < segs[i].nmsgs && rc == 0; j++) {
			bool yes;

			maps[i][j] = UINT32_MAX;
			if ((rc = msg_exists(t, mbox, su[j], &yes)) == 0 && yes) {
				maps[i][j] = kept;
				uids[kept++] = su[j];
			}
		}
		free(su);
	}
	if (rc != 0)
		goto done;
	out_init(&o, uids, kept, cls);
	for (size_t i = 0; i < n && rc == 0; i++)
		if (!wild_remap(&segs[i], maps[i], &o))
			rc = STORE_ECORRUPT;
	while (rc == 0 && (code = next_code(segs, pos, n)) != UINT32_MAX) {
		struct remap_ctx r = { .ids = ids };

		for (size_t i = 0; i < n && rc == 0; i++) {
			unsigned type;
			const uint8_t *p;
			size_t len;

			if (pos[i] >= segs[i].ntri || dict_code(&segs[i], pos[i]) != code)
				continue;
			r.map = maps[i];
			if (!dict_posting(&segs[i], pos[i], &type, &p, &len) ||
			    !posting_each(&segs[i], type, p, len, remap_one, &r))
				rc = STORE_ECORRUPT;
			pos[i]++;
		}
		/* the inputs are in UID order: the ids come out sorted */
		out_add(&o, code, ids, r.n);
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = store_del(t, DBI_FTS, k, key_of(k, mbox, 'S', segs[i].first));
		if (rc == 0) {
			rc = store_del(t, DBI_FTS, k, key_of(k, mbox, 'D', segs[i].first));
			rc = rc == STORE_ENOMSG ? 0 : rc;
		}
	}
	if (rc == 0)
		rc = out_store(t, mbox, &o);
	out_release(&o);
done:
	for (size_t i = 0; i < n; i++)
		free(maps[i]);
	free(maps);
	free(pos);
	free(uids);
	free(ids);
	return rc;
}

/* Copies of segments' bytes: a merge deletes the rows it reads. */
static int seg_copy(const MDB_val *v, struct seg *s, void **mem_r)
{
	MDB_val c;

	*mem_r = xmalloc(v->mv_size + 1);
	memcpy(*mem_r, v->mv_data, v->mv_size);
	c.mv_data = *mem_r;
	c.mv_size = v->mv_size;
	return seg_decode(&c, s);
}

/* While the last FTS_FANOUT segments share a class below the top one, merges them. */
static int merge_tail(struct store_txn *t, uint64_t mbox)
{
	for (;;) {
		struct seg segs[FTS_FANOUT];
		void *mem[FTS_FANOUT] = { 0 };
		uint8_t k[13];
		MDB_cursor *c;
		MDB_val key, v;
		size_t n = 0;
		int rc = 0, mrc;

		if ((mrc = mdb_cursor_open(t->txn, t->e->dbi[DBI_FTS], &c)) != 0)
			return store_mdb_err(t, mrc, "cursor");
		key.mv_data = k;
		key.mv_size = key_of(k, mbox, 'S', UINT32_MAX);
		mrc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE);
		mrc = mrc == 0 ? mdb_cursor_get(c, &key, &v, MDB_PREV)
			       : mdb_cursor_get(c, &key, &v, MDB_LAST);
		for (; mrc == 0 && n < FTS_FANOUT; mrc = mdb_cursor_get(c, &key, &v, MDB_PREV)) {
			const uint8_t *kb = key.mv_data;

			if (key.mv_size != 13 || get_be64(kb) != mbox || kb[8] != 'S')
				break;
			if ((rc = seg_copy(&v, &segs[FTS_FANOUT - 1 - n],
					   &mem[FTS_FANOUT - 1 - n])) != 0)
				break;
			n++;
		}
		mdb_cursor_close(c);
		if (rc == 0 && n == FTS_FANOUT) {
			unsigned cls = segs[0].cls;
			bool same = cls < FTS_CLASS_MAX;

			for (size_t i = 1; i < n; i++)
				same = same && segs[i].cls == cls;
			if (same)
				rc = merge_segs(t, mbox, segs, n, cls + 1);
			else
				n = 0;
		} else if (rc == 0) {
			n = 0;
		}
		for (size_t i = 0; i < FTS_FANOUT; i++)
			free(mem[i]);
		if (rc != 0 || n == 0)
			return rc;
	}
}

/* ------------------------------------------------------------------------------------- */
/* Maintenance */

static int pending_put(struct store_txn *t, uint64_t mbox, uint32_t uid,
		       const struct store_fts_doc *d)
{
	uint8_t k[13];
	struct buf v;
	int rc;

	buf_init(&v, d->wild ? 4 : 5 * d->n + 8, BUF_INPUT_BOUNDED); /* by d->n < 2^24 */
	if (d->wild) {
		buf_putc(&v, (char)FTS_WILD);
	} else {
		put_varint(&v, (uint32_t)d->n);
		for (size_t i = 0; i < d->n; i++)
			put_varint(&v, i == 0 ? d->codes[0] : d->codes[i] - d->codes[i - 1]);
	}
	rc = store_put(t, DBI_FTS, k, key_of(k, mbox, 'P', uid), v.data, v.len);
	buf_release(&v);
	return rc;
}

/* Indexes message uid of mbox with doc d; first: the mailbox had no other message. */
static int fts_add_doc(struct store_txn *t, uint64_t mbox, uint32_t uid,
		       const struct store_fts_doc *d, bool first)
{
	struct fts_state s;
	bool found;
	int rc;

	if ((rc = state_load(t, mbox, &s, &found)) != 0)
		return rc;
	if (!found)
		s.complete = first; /* messages from before the index: `mailctl fts rebuild` */
	if ((rc = pending_put(t, mbox, uid, d)) != 0)
		return rc;
	s.pending++;
	if ((rc = build_pending(t, mbox, &s)) != 0)
		return rc;
	return state_store(t, mbox, &s);
}

/* The index is off: a mailbox that was indexed is not complete any more. */
static int fts_forget(struct store_txn *t, uint64_t mbox)
{
	struct fts_state s;
	bool found;
	int rc;

	if ((rc = state_load(t, mbox, &s, &found)) != 0 || !found || !s.complete)
		return rc;
	s.complete = false;
	return state_store(t, mbox, &s);
}

int store_fts_add(struct store_txn *t, uint64_t mbox, uint32_t uid, const struct store_blob *b,
		  bool first)
{
	struct store_fts_doc *own = NULL;
	int rc;

	if (!t->st->fts)
		return fts_forget(t, mbox);
	if (b->fts == NULL && (rc = doc_from_blob(t, b, b->id, &own)) != 0)
		return rc == STORE_ENOMSG ? STORE_EIO : rc;
	rc = fts_add_doc(t, mbox, uid, b->fts != NULL ? b->fts : own, first);
	store_fts_doc_free(&own);
	return rc;
}

int store_fts_add_id(struct store_txn *t, uint64_t mbox, uint32_t uid, uint64_t blob, bool first)
{
	struct store_fts_doc *d;
	int rc;

	if (!t->st->fts)
		return fts_forget(t, mbox);
	if ((rc = doc_from_blob(t, NULL, blob, &d)) != 0)
		return rc == STORE_ENOMSG ? STORE_EIO : rc;
	rc = fts_add_doc(t, mbox, uid, d, first);
	store_fts_doc_free(&d);
	return rc;
}

/* The segment holding uid (its first UID), or 0. */
static int seg_of(struct store_txn *t, uint64_t mbox, uint32_t uid, struct seg *s_r, bool *found_r)
{
	uint8_t k[13];
	MDB_cursor *c;
	MDB_val key, v;
	int mrc, rc = 0;

	*found_r = false;
	if ((mrc = mdb_cursor_open(t->txn, t->e->dbi[DBI_FTS], &c)) != 0)
		return store_mdb_err(t, mrc, "cursor");
	key.mv_data = k;
	key.mv_size = key_of(k, mbox, 'S', uid);
	mrc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE);
	if (mrc == 0) {
		const uint8_t *kb = key.mv_data;

		if (!(key.mv_size == 13 && get_be64(kb) == mbox && kb[8] == 'S' &&
		      get_be32(kb + 9) == uid))
			mrc = mdb_cursor_get(c, &key, &v, MDB_PREV);
	} else if (mrc == MDB_NOTFOUND) {
		mrc = mdb_cursor_get(c, &key, &v, MDB_LAST);
	}
	if (mrc == 0) {
		const uint8_t *kb = key.mv_data;

		if (key.mv_size == 13 && get_be64(kb) == mbox && kb[8] == 'S' &&
		    (rc = seg_decode(&v, s_r)) == 0)
			*found_r = s_r->first <= uid && uid <= s_r->last;
	} else if (mrc != MDB_NOTFOUND) {
		rc = store_mdb_err(t, mrc, "cursor");
	}
	mdb_cursor_close(c);
	return rc;
}

int store_fts_remove(struct store_txn *t, uint64_t mbox, uint32_t uid)
{
	struct fts_state s;
	struct seg seg;
	uint8_t k[13], b[4];
	MDB_val v;
	bool found;
	uint32_t dead = 0;
	int rc;

	if ((rc = state_load(t, mbox, &s, &found)) != 0 || !found)
		return rc;
	rc = store_del(t, DBI_FTS, k, key_of(k, mbox, 'P', uid));
	if (rc == 0) {
		s.pending = s.pending > 0 ? s.pending - 1 : 0;
		return state_store(t, mbox, &s);
	}
	if (rc != STORE_ENOMSG)
		return rc;
	if ((rc = seg_of(t, mbox, uid, &seg, &found)) != 0 || !found)
		return rc;
	key_of(k, mbox, 'D', seg.first);
	if ((rc = store_get(t, DBI_FTS, k, 13, &v)) == 0 && v.mv_size == 4)
		dead = get_be32(v.mv_data);
	else if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	if (++dead * 2 > seg.nmsgs) {
		void *mem;

		/* most of it is gone: written again without them */
		if ((rc = seg_copy(&(MDB_val){ seg.size, (void *)(uintptr_t)seg.base }, &seg,
				   &mem)) != 0)
			return rc;
		rc = merge_segs(t, mbox, &seg, 1, seg.cls);
		free(mem);
		return rc;
	}
	put_be32(b, dead);
	return store_put(t, DBI_FTS, k, 13, b, 4);
}

int store_fts_purge(struct store_txn *t, uint64_t mbox)
{
	return store_del_prefix(t, DBI_FTS, mbox);
}

/* ------------------------------------------------------------------------------------- */
/* Queries */

struct cand {
	uint32_t *v;
	size_t n, cap;
};

static void cand_push(struct cand *c, uint32_t uid)
{
	if (c->n == c->cap)
		c->v = xreallocarray(c->v, c->cap = c->cap * 2 + 256, sizeof(*c->v));
	c->v[c->n++] = uid;
}

struct and_ctx {
	uint8_t *bits; /* this posting's ids */
};

static void bit_set(void *arg, uint32_t id)
{
	struct and_ctx *a = arg;

	a->bits[id / 8] = (uint8_t)(a->bits[id / 8] | 1u << (id % 8));
}

/* The candidates of one segment: every id holding all of the needle's codes, and its wild
   messages. */
static int seg_query(const struct seg *s, const uint32_t *codes, size_t ncodes, struct cand *out)
{
	size_t bm = (s->nmsgs + 7) / 8;
	uint8_t *acc = xmalloc(bm + 1), *one = xmalloc(bm + 1);
	struct and_ctx a = { one };
	uint32_t *uids = NULL;
	bool any = true;
	int rc = 0;

	memset(acc, 0xff, bm);
	for (size_t i = 0; i < ncodes && any && rc == 0; i++) {
		int64_t e = dict_find(s, codes[i]);
		unsigned type;
		const uint8_t *p;
		size_t len;

		if (e < 0) {
			any = false;
			break;
		}
		memset(one, 0, bm);
		if (!dict_posting(s, (uint32_t)e, &type, &p, &len) ||
		    !posting_each(s, type, p, len, bit_set, &a))
			rc = STORE_ECORRUPT;
		for (size_t j = 0; j < bm; j++)
			acc[j] &= one[j];
	}
	if (!any)
		memset(acc, 0, bm);
	a.bits = acc; /* and the wild messages */
	if (rc == 0 && !posting_each(s, POST_VARINT, s->wild, s->wild_len, bit_set, &a))
		rc = STORE_ECORRUPT;
	if (rc == 0 && (rc = seg_uids(s, &uids)) == 0) {
		for (uint32_t i = 0; i < bm; i++)
			for (uint8_t b = acc[i]; b != 0; b &= (uint8_t)(b - 1)) {
				uint32_t lid = i * 8 + (uint32_t)__builtin_ctz(b);

				if (lid < s->nmsgs)
					cand_push(out, uids[lid]);
			}
	}
	free(uids);
	free(acc);
	free(one);
	return rc;
}

/* Whether a pending record holds all codes (sorted); wild ones hold everything. */
static bool pending_has(const MDB_val *v, const uint32_t *codes, size_t ncodes)
{
	const uint8_t *p = v->mv_data, *end = p + v->mv_size;
	uint32_t cnt, code = 0, i = 0;
	size_t j = 0;

	if (v->mv_size >= 1 && p[0] == FTS_WILD)
		return true;
	if (!get_varint(&p, end, &cnt))
		return true; /* unreadable: a candidate, verified */
	while (j < ncodes) {
		uint32_t d;

		if (i >= cnt)
			return false;
		if (!get_varint(&p, end, &d))
			return true;
		code = i++ == 0 ? d : code + d;
		if (code == codes[j])
			j++;
		else if (code > codes[j])
			return false;
	}
	return true;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The needle's distinct trigram codes, sorted (at most FTS_NEEDLE_TRIGRAMS). */
static size_t needle_codes(const char *needle, size_t len, uint32_t *codes)
{
	const unsigned char *u = (const unsigned char *)needle;
	size_t n = 0, k = 0;

	for (size_t i = 0; i + 3 <= len && n < FTS_NEEDLE_TRIGRAMS; i++)
		codes[n++] = (uint32_t)u[i] << 16 | (uint32_t)u[i + 1] << 8 | u[i + 2];
	qsort(codes, n, sizeof(*codes), cmp_u32);
	for (size_t i = 0; i < n; i++)
		if (k == 0 || codes[k - 1] != codes[i])
			codes[k++] = codes[i];
	return k;
}

int store_fts_candidates(struct store_txn *t, uint64_t mbox, const char *needle, size_t len,
			 uint32_t **uids_r, size_t *n_r)
{
	uint32_t codes[FTS_NEEDLE_TRIGRAMS];
	size_t ncodes;
	struct fts_state s;
	struct cand c = { 0 };
	uint8_t k[13];
	MDB_cursor *cur;
	MDB_val key, v;
	bool found;
	int rc, mrc;

	*uids_r = NULL;
	*n_r = 0;
	if (len < 3 || (rc = state_load(t, mbox, &s, &found)) != 0 || !found || !s.complete)
		return len < 3 ? STORE_ENOTSUP : (rc != 0 ? rc : STORE_ENOTSUP);
	ncodes = needle_codes(needle, len, codes);
	if ((mrc = mdb_cursor_open(t->txn, t->e->dbi[DBI_FTS], &cur)) != 0)
		return store_mdb_err(t, mrc, "cursor");
	key.mv_data = k;
	key.mv_size = key_of(k, mbox, 'P', 0);
	rc = 0;
	for (mrc = mdb_cursor_get(cur, &key, &v, MDB_SET_RANGE); mrc == 0 && rc == 0;
	     mrc = mdb_cursor_get(cur, &key, &v, MDB_NEXT)) {
		const uint8_t *kb = key.mv_data;

		if (key.mv_size != 13 || get_be64(kb) != mbox)
			break;
		if (kb[8] == 'P') {
			if (pending_has(&v, codes, ncodes))
				cand_push(&c, get_be32(kb + 9));
		} else if (kb[8] == 'S') {
			struct seg sg;

			if ((rc = seg_decode(&v, &sg)) == 0)
				rc = seg_query(&sg, codes, ncodes, &c);
		}
	}
	mdb_cursor_close(cur);
	if (rc == 0 && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = store_mdb_err(t, mrc, "cursor");
	if (rc != 0) {
		free(c.v);
		return rc;
	}
	if (c.n > 1)
		qsort(c.v, c.n, sizeof(*c.v), cmp_u32);
	*uids_r = c.v;
	*n_r = c.n;
	return 0;
}

/* ------------------------------------------------------------------------------------- */
/* Statistics and rebuild */

int store_fts_stats(struct store_txn *t, uint64_t mbox, struct store_fts_stats *s_r)
{
	struct fts_state s;
	uint8_t k[8];
	MDB_cursor *c;
	MDB_val key = { 8, k }, v;
	bool found;
	int rc, mrc;

	memset(s_r, 0, sizeof(*s_r));
	if ((rc = state_load(t, mbox, &s, &found)) != 0)
		return rc;
	s_r->indexed = found;
	s_r->complete = found && s.complete;
	s_r->rebuilding = s.rebuild_end != 0;
	if ((mrc = mdb_cursor_open(t->txn, t->e->dbi[DBI_FTS], &c)) != 0)
		return store_mdb_err(t, mrc, "cursor");
	put_be64(k, mbox);
	for (mrc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); mrc == 0;
	     mrc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		const uint8_t *kb = key.mv_data;
		struct seg sg;

		if (key.mv_size < 9 || get_be64(kb) != mbox)
			break;
		s_r->bytes += key.mv_size + v.mv_size;
		if (kb[8] == 'P') {
			s_r->pending++;
		} else if (kb[8] == 'S' && seg_decode(&v, &sg) == 0) {
			s_r->segments++;
			s_r->messages += sg.nmsgs;
			s_r->trigrams += sg.ntri;
		} else if (kb[8] == 'D' && v.mv_size == 4) {
			s_r->dead += get_be32(v.mv_data);
		}
	}
	mdb_cursor_close(c);
	s_r->messages += s_r->pending;
	return mrc == 0 || mrc == MDB_NOTFOUND ? 0 : store_mdb_err(t, mrc, "cursor");
}

struct rebuild_step {
	uint64_t mbox;
	uint32_t done, end; /* out: messages indexed in this step; the bound */
	bool finished;
};

#define FTS_REBUILD_MSGS 256
#define FTS_REBUILD_BYTES (32u << 20)

/* Indexes the next messages of a rebuild (up to FTS_REBUILD_MSGS or FTS_REBUILD_BYTES of
   files) in one txn; the last step marks the mailbox complete. */
static int rebuild_step_fn(struct store_txn *t, void *arg)
{
	struct rebuild_step *rs = arg;
	struct fts_state s;
	struct store_iter *it;
	struct store_msg m;
	uint64_t bytes = 0;
	bool found, more = false;
	int rc, irc = 0;

	rs->done = 0;
	rs->finished = false;
	if ((rc = state_load(t, rs->mbox, &s, &found)) != 0)
		return rc;
	if (!found || s.rebuild_end == 0) {
		rs->finished = true; /* another rebuild finished it, or the mailbox went */
		return 0;
	}
	if ((rc = store_msg_iter(t, rs->mbox, s.rebuild_next, s.rebuild_end, 0, &it)) != 0)
		return rc;
	while (rc == 0 && (irc = store_iter_next(it, &m)) == STORE_ITER_MSG) {
		struct store_fts_doc *d;

		if (rs->done >= FTS_REBUILD_MSGS || bytes >= FTS_REBUILD_BYTES) {
			more = true;
			break;
		}
		s.rebuild_next = m.uid + 1;
		if ((rc = doc_from_blob(t, NULL, m.blob, &d)) == STORE_ENOMSG) {
			rc = 0; /* its file is gone: nothing can match (verify reports it) */
			continue;
		}
		if (rc != 0)
			break;
		rc = pending_put(t, rs->mbox, m.uid, d);
		store_fts_doc_free(&d);
		if (rc != 0)
			break;
		s.pending++;
		rs->done++;
		bytes += m.size;
		rc = build_pending(t, rs->mbox, &s);
	}
	store_iter_free(&it);
	if (rc == 0 && irc != 0 && irc != STORE_ITER_MSG)
		rc = irc;
	if (rc != 0)
		return rc;
	if (!more) {
		/* done: what came meanwhile may form segments now */
		s.rebuild_end = 0;
		s.complete = true;
		rs->finished = true;
		if ((rc = build_pending(t, rs->mbox, &s)) != 0)
			return rc;
	}
	return state_store(t, rs->mbox, &s);
}

/* Starts a rebuild: the mailbox's index emptied, every UID up to uidnext - 1 to do. */
static int rebuild_start_fn(struct store_txn *t, void *arg)
{
	struct rebuild_step *rs = arg;
	struct fts_state s = { 0 };
	struct mbox_rec r;
	int rc;

	if ((rc = mbox_rec_load(t, rs->mbox, &r)) != 0)
		return rc;
	if ((rc = store_fts_purge(t, rs->mbox)) != 0)
		return rc;
	s.rebuild_end = r.uidnext > 1 ? r.uidnext - 1 : 0;
	s.rebuild_next = 1;
	s.complete = s.rebuild_end == 0;
	rs->end = s.rebuild_end;
	return state_store(t, rs->mbox, &s);
}

int store_fts_rebuild(struct store *st, uint64_t mbox, uint64_t *messages_r)
{
	struct rebuild_step rs = { .mbox = mbox };
	unsigned part = STORE_ID_PART(mbox);
	int rc;

	*messages_r = 0;
	if (!st->fts)
		return STORE_ENOTSUP;
	if ((rc = store_write(st, part, rebuild_start_fn, &rs)) != 0)
		return rc;
	while (!rs.finished) {
		if ((rc = store_write(st, part, rebuild_step_fn, &rs)) != 0)
			return rc;
		*messages_r += rs.done;
	}
	return 0;
}
