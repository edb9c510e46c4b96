/* imap_msgfile.c — owns what imapd reads of a message from its file because the store's
 * message cache does not hold it (common/msgcache.h documents the fallback): the cache itself,
 * built from the file when the message has none (stored by an older Heron whose ceiling it
 * passed, or damaged; `mailctl verify --repair` stores it again), and the whole header block
 * when the cached one was cut at MC_HEADER_MAX. FETCH and SEARCH (imapd and mailctl) use it,
 * so a message is answered the same whatever its cache holds. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/msgcache.h"
#include "imapd/imapd.h"
#include "store/store.h"

void imap_msgfile_release(struct imap_msgfile *mf)
{
	buf_release(&mf->cache);
	buf_release(&mf->header);
	mf->cache_blob = mf->header_blob = 0;
}

/* The message file at part read through a msgcache builder into mf->cache. */
static int build_cache(struct store *st, unsigned part, const struct store_msg *m,
		       struct imap_msgfile *mf)
{
	struct msgcache_builder *mb;
	char chunk[65536];
	uint64_t size;
	ssize_t n;
	int fd, rc;

	if (store_blob_open(st, part, m->blob, &fd, &size) != 0)
		return -1;
	buf_release(&mf->cache);
	buf_init(&mf->cache, 0, MSGCACHE_BLOB_MAX);
	mb = msgcache_builder_new();
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		msgcache_builder_push(mb, chunk, (size_t)n);
	close(fd);
	rc = n < 0 ? -1 : msgcache_builder_finish(mb, &mf->cache);
	msgcache_builder_free(&mb);
	if (rc < 0)
		return -1;
	mf->cache_blob = m->blob;
	return 0;
}

int imap_msgfile_cache(struct store *st, unsigned part, struct store_msg *m,
		       struct imap_msgfile *mf, struct msgcache_view *mv)
{
	if (m->cache_len > 0 && msgcache_parse(m->cache, m->cache_len, mv) == 0)
		return 0;
	if (mf->cache_blob != m->blob && build_cache(st, part, m, mf) < 0) {
		buf_release(&mf->cache);
		mf->cache_blob = 0;
	}
	if (mf->cache_blob == m->blob && msgcache_parse(mf->cache.data, mf->cache.len, mv) == 0) {
		m->cache = mf->cache.data;
		m->cache_len = mf->cache.len;
		return 0;
	}
	/* the file is unreadable too: RFC 3501's defaults, the size the index knows */
	memset(mv, 0, sizeof(*mv));
	mv->envelope = str_view_of("(NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL)");
	mv->body = mv->bodystructure = str_view_of(
		"(\"text\" \"plain\" NIL NIL NIL \"7bit\" 0 0)");
	mv->header = str_view_of("\r\n");
	mv->date = INT64_MIN;
	mv->size = mv->body_size = m->size;
	return -1;
}

int imap_msgfile_header(struct store *st, unsigned part, const struct store_msg *m,
			const struct msgcache_view *mv, struct imap_msgfile *mf,
			struct str_view *hdr_r)
{
	uint64_t size;
	ssize_t n;
	char *dst;
	int fd;

	*hdr_r = mv->header;
	if (mv->header.len >= mv->header_size)
		return 0;
	if (mf->header_blob == m->blob) {
		*hdr_r = (struct str_view){ mf->header.data, mf->header.len };
		return 0;
	}
	if (mv->header_size > IMAP_HEADER_FILE_MAX ||
	    store_blob_open(st, part, m->blob, &fd, &size) != 0)
		return -1;
	buf_release(&mf->header);
	buf_init(&mf->header, 0, IMAP_HEADER_FILE_MAX);
	if ((dst = buf_reserve(&mf->header, (size_t)mv->header_size)) == NULL) {
		close(fd);
		return -1;
	}
	n = pread(fd, dst, (size_t)mv->header_size, 0);
	close(fd);
	if (n != (ssize_t)mv->header_size)
		return -1;
	buf_commit(&mf->header, (size_t)n);
	mf->header_blob = m->blob;
	*hdr_r = (struct str_view){ mf->header.data, mf->header.len };
	return 0;
}
