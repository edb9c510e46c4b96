/* store_bench.c — libstore figures (no assertions): deliveries per second for 1 and 5
 * recipients, 4 KiB and 100 KiB messages, with and without group commit, from 16 concurrent
 * producers; fsyncs and index commits per delivered message; header-cache reads per second
 * (the FETCH ENVELOPE + HEADER.FIELDS equivalent) over a 10,000-message mailbox.
 *
 *   store_bench [-d DIR] [-n MESSAGES] [-p PRODUCERS] [-s SECONDS]
 *   store_bench -D USERS [-F] [-d DIR] [-p SESSIONS] [-P PARTITIONS]
 * Every scenario is bounded by MESSAGES and by SECONDS, whichever comes first. With -D:
 * the disk layouts side by side instead: USERS users of the tiny profile (32 messages of
 * about 4.7 KB of text each) delivered through the group committer from SESSIONS (20)
 * concurrent sessions, once with every body a file ([store] inline_max = 0) and once with
 * bodies inline (16K); disk bytes per user (blocks allocated, index included) and sync calls
 * per delivered message for each, and where the index's bytes go: per table its pages,
 * entries, bytes per message and how full its leaf pages are. -F: with the full-text index
 * ([store] fts, the daemons' default; off otherwise, as libstore's own default). */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <lmdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/msgcache.h"
#include "common/str.h"
#include "store/store.h"

#define NUSERS 5

static const char *const bench_users[NUSERS] = { "bench1", "bench2", "bench3", "bench4",
						 "bench5" };
static const char *const *users = bench_users; /* the recipients, in turn */
static unsigned nusers = NUSERS;
static bool text_bodies; /* -D: bodies of varied words (mail-like compression), not runs */
static bool disk_fts;    /* -D -F: with the full-text index ([store] fts, the default) */

struct scenario {
	struct store *st;
	struct store_gc *gc; /* NULL: each producer commits alone */
	const char *body;
	size_t size;
	unsigned nrcpt;
	unsigned limit;
	double deadline;
	atomic_uint next, done, failed;
};

static char *make_body(size_t size)
{
	char *b = malloc(size + 1);
	size_t n;

	if (b == NULL)
		exit(2);
	n = (size_t)snprintf(b, size,
			     "From: load@bench.test\r\nTo: bench1@bench.test\r\n"
			     "Subject: store bench message\r\nDate: Sun, 29 Nov 2026 20:00:00 "
			     "+0000\r\nMessage-ID: <bench@heron>\r\n\r\n");
	for (; n + 78 < size; n += 78) {
		memset(b + n, 'a' + (char)(n % 26), 76);
		memcpy(b + n + 76, "\r\n", 2);
	}
	memset(b + n, '.', size - n);
	return b;
}

/* A message of about size bytes: headers, then lines of words drawn from a small vocabulary
   (a fixed sequence), which compresses about as plain-text mail does. */
static char *make_text_body(size_t size)
{
	static const char *const words[] = {
		"the",     "meeting",  "report", "about",  "please", "review", "attached",
		"project", "budget",   "will",   "be",     "next",   "week",   "thanks",
		"regards", "team",     "update", "status", "new",    "client", "draft",
		"call",    "schedule", "notes",  "we",     "should", "send",   "final",
		"version", "today",    "monday", "office",
	};
	char *b = make_body(size);
	size_t n = (size_t)(strstr(b, "\r\n\r\n") - b) + 4, col = 0;
	uint32_t x = 2463534242u;

	while (n + 12 < size) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		const char *w = words[x % (sizeof(words) / sizeof(words[0]))];
		size_t len = strlen(w);

		if (col + len + 1 > 72) {
			memcpy(b + n, "\r\n", 2);
			n += 2;
			col = 0;
		}
		memcpy(b + n, w, len);
		b[n + len] = ' ';
		n += len + 1;
		col += len + 1;
	}
	memset(b + n, '.', size - n - 2);
	memcpy(b + size - 2, "\r\n", 2);
	return b;
}

static void *producer(void *arg)
{
	struct scenario *sc = arg;

	while (clock_mono_seconds() < sc->deadline && atomic_fetch_add(&sc->next, 1) < sc->limit) {
		struct store_rcpt r[NUSERS];
		struct store_blob *b;
		unsigned first = atomic_load(&sc->next) % nusers;
		int rc;

		memset(r, 0, sizeof(r));
		for (unsigned i = 0; i < sc->nrcpt; i++)
			r[i].user = users[(first + i) % nusers];
		/* the message is written once, to the first recipient's partition (the users
		   were created in their hashed partitions; producers do not read the index:
		   only the committer uses LMDB) */
		unsigned part = store_partition_for(sc->st, r[0].user);
		if (store_blob_new(sc->st, part, &b) != 0) {
			atomic_fetch_add(&sc->failed, 1);
			continue;
		}
		/* the fsync of the file is left to the commit (one writeback pass per batch) */
		if (store_blob_write(b, sc->body, sc->size) != 0 ||
		    store_blob_finish_deferred(b) != 0) {
			store_blob_free(&b);
			atomic_fetch_add(&sc->failed, 1);
			continue;
		}
		struct store_batch *bt = store_batch_new(sc->st);

		store_batch_deliver(bt, b, 0, r, sc->nrcpt, NULL, NULL);
		rc = store_batch_commit(&bt) == 0 ? 0 : STORE_EIO;
		store_blob_free(&b);
		atomic_fetch_add(rc == 0 ? &sc->done : &sc->failed, 1);
	}
	return NULL;
}

/* One delivery of the loop's: a session that sends its next message once this one is
   acknowledged. */
struct gc_session {
	struct scenario *sc;
	struct store_rcpt r[NUSERS];
	struct store_blob *b;
	bool active;
};

static void gc_session_next(struct gc_session *gs);

static void gc_session_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			    void *arg)
{
	struct gc_session *gs = arg;

	(void)rcpts;
	(void)n;
	(void)value;
	atomic_fetch_add(result == 0 ? &gs->sc->done : &gs->sc->failed, 1);
	store_blob_free(&gs->b);
	gc_session_next(gs);
}

static void gc_session_next(struct gc_session *gs)
{
	struct scenario *sc = gs->sc;
	unsigned seq;

	gs->active = false;
	if (clock_mono_seconds() >= sc->deadline ||
	    (seq = atomic_fetch_add(&sc->next, 1)) >= sc->limit)
		return;
	memset(gs->r, 0, sizeof(gs->r));
	for (unsigned i = 0; i < sc->nrcpt; i++)
		gs->r[i].user = users[(seq + i) % nusers];
	if (store_blob_new(sc->st, store_partition_for(sc->st, gs->r[0].user), &gs->b) != 0 ||
	    store_blob_write(gs->b, sc->body, sc->size) != 0 ||
	    store_blob_finish_deferred(gs->b) != 0) {
		store_blob_free(&gs->b);
		atomic_fetch_add(&sc->failed, 1);
		return;
	}
	gs->active = true;
	store_gc_deliver(sc->gc, gs->b, 0, gs->r, sc->nrcpt, gc_session_done, gs);
}

/* A daemon's loop with `sessions` deliveries outstanding: poll the committer's descriptor,
   dispatch, each callback starts that session's next message. */
static void run_gc_loop(struct scenario *sc, unsigned sessions)
{
	struct gc_session *gs = calloc(sessions, sizeof(*gs));
	bool any = true;

	for (unsigned i = 0; i < sessions; i++) {
		gs[i].sc = sc;
		gc_session_next(&gs[i]);
	}
	while (any) {
		struct pollfd p = { .fd = store_gc_fd(sc->gc), .events = POLLIN };

		(void)poll(&p, 1, 1000);
		store_gc_dispatch(sc->gc);
		any = false;
		for (unsigned i = 0; i < sessions; i++)
			any |= gs[i].active;
	}
	free(gs);
}

/* Group commit gathers the loop's concurrent sessions (one process); without it every
   producer (thread here, worker process in mtad) commits alone, serialized by LMDB's
   writer lock. */
static void run_deliveries(struct store *st, unsigned nrcpt, size_t size, bool group,
			   unsigned producers, unsigned limit, double seconds)
{
	struct scenario sc = { .st = st, .size = size, .nrcpt = nrcpt, .limit = limit };
	pthread_t th[64];
	uint64_t f0 = store_fsync_count(st), c0 = store_commit_count(st), ops = 0, commits = 0;
	double t0, dt;

	sc.body = text_bodies ? make_text_body(size) : make_body(size);
	if (group)
		store_gc_new(st, &sc.gc);
	t0 = clock_mono_seconds();
	sc.deadline = t0 + seconds;
	if (sc.gc != NULL)
		run_gc_loop(&sc, producers);
	for (unsigned i = 0; sc.gc == NULL && i < producers; i++)
		pthread_create(&th[i], NULL, producer, &sc);
	for (unsigned i = 0; sc.gc == NULL && i < producers; i++)
		pthread_join(th[i], NULL);
	dt = clock_mono_seconds() - t0;
	if (sc.gc != NULL) {
		store_gc_stats(sc.gc, &ops, &commits);
		store_gc_free(&sc.gc);
	}
	unsigned done = atomic_load(&sc.done);
	uint64_t fs = store_fsync_count(st) - f0, cm = store_commit_count(st) - c0;
	double load[1] = { -1 };

	(void)getloadavg(load, 1);
	/* index fsync/msg: index commits per delivered message. A commit is an "fsync
	   pair": one fdatasync syscall (data pages) and one synchronous write of the meta page
	   (LMDB writes it through an O_DSYNC descriptor on Linux: strace -c shows one fdatasync
	   per commit); "disk syncs" counts both. per rcpt: per mailbox delivery. all fsync/msg:
	   libstore's counter (message files, directories, 2 per index commit) per message. */
	printf("deliver rcpt=%u size=%-6zu group_commit=%-3s producers=%-2u %6.0f msg/s %6.0f "
	       "rcpt/s  index fsync/msg=%.3f (disk syncs/msg=%.3f, per rcpt=%.3f)  all "
	       "fsync/msg=%.2f  load=%.1f%s\n",
	       nrcpt, size, group ? "yes" : "no", producers, done / dt, done * nrcpt / dt,
	       done ? (double)cm / done : 0.0, done ? 2.0 * (double)cm / done : 0.0,
	       done ? (double)cm / done / nrcpt : 0.0, done ? (double)fs / done : 0.0, load[0],
	       atomic_load(&sc.failed) ? " (failures!)" : "");
	if (group && commits > 0)
		printf("    group commit: %.1f deliveries per batch, %u partitions/msg at most; "
		       "floor with %u synchronous producers: %.3f index fsync/msg per partition "
		       "touched\n",
		       (double)ops / commits, store_partitions(st), producers, 1.0 / producers);
	free((char *)(uintptr_t)sc.body);
}

static uint64_t fill_mbox_id;

static int fill_fn(struct store_txn *t, void *arg)
{
	return store_msg_append(t, fill_mbox_id, arg, 0, 0, 0, NULL);
}

static void fill_mailbox(struct store *st, uint64_t mbox, unsigned n)
{
	char *body = make_body(4096);
	struct store_batch *bt = store_batch_new(st);
	struct store_blob **blobs = calloc(n, sizeof(*blobs));

	fill_mbox_id = mbox;

	for (unsigned i = 0; i < n; i++) {
		if (store_blob_new(st, STORE_ID_PART(mbox), &blobs[i]) != 0 ||
		    store_blob_write(blobs[i], body, 4096) != 0 ||
		    store_blob_finish(blobs[i]) != 0)
			exit(2);
		store_batch_write(bt, STORE_ID_PART(mbox), blobs[i], fill_fn, blobs[i], NULL,
				  NULL);
		if (store_batch_count(bt) == 500 || i + 1 == n) {
			store_batch_commit(&bt);
			bt = store_batch_new(st);
		}
	}
	store_batch_free(&bt);
	for (unsigned i = 0; i < n; i++)
		store_blob_free(&blobs[i]);
	free(blobs);
	free(body);
}

/* What imapd does for FETCH 1:* (ENVELOPE RFC822.SIZE BODY.PEEK[HEADER.FIELDS (Subject)]):
   one read txn, iterate, parse each cache, find a header in the cached block. */
static void run_cache_reads(struct store *st, unsigned n)
{
	struct store_txn *t;
	uint64_t user, mbox;
	unsigned part;
	double t0, dt;
	unsigned reads = 0, hits = 0, rounds = 0;

	store_user_locate(st, "cache", &part);
	store_txn_begin(st, part, STORE_TXN_READ, &t);
	struct store_user u;
	store_user_get(t, "cache", &u);
	user = u.id;
	store_mbox_find(t, user, "INBOX", &mbox);
	store_txn_abort(&t);
	t0 = clock_mono_seconds();
	do {
		struct store_iter *it;
		struct store_msg m;

		store_txn_begin(st, part, STORE_TXN_READ, &t);
		store_msg_iter(t, mbox, 1, UINT32_MAX, 0, &it);
		while (store_iter_next(it, &m) == 1) {
			struct msgcache_view v;

			reads++;
			if (msgcache_parse(m.cache, m.cache_len, &v) == 0 &&
			    str_casefind(v.header.p, v.header.len, "\nSubject:", 9) != NULL &&
			    v.envelope.len > 0)
				hits++;
		}
		store_iter_free(&it);
		store_txn_abort(&t);
		rounds++;
	} while ((dt = clock_mono_seconds() - t0) < 2.0 && rounds < 50);
	printf("header cache reads (%u-message mailbox): %.0f msg/s (%u of %u with cache)\n", n,
	       reads / dt, hits, reads);
}

static void make_users(struct store *st)
{
	for (unsigned i = 0; i <= NUSERS; i++) {
		const char *name = i < NUSERS ? users[i] : "cache";
		unsigned p = store_partition_for(st, name);
		struct store_txn *t;

		store_txn_begin(st, p, STORE_TXN_WRITE, &t);
		store_user_create(t, name, NULL);
		store_txn_commit(&t);
	}
}

/* The bench's store: group commit as the daemons' defaults, every body a file. */
static struct store_opts bench_opts(const char *dir, unsigned nparts, uint64_t map_size)
{
	return (struct store_opts){ .path = dir,
				    .partitions = nparts,
				    .map_size = map_size,
				    .map_size_max = 64ull << 30,
				    .expunge_history_ms = 30LL * 86400000,
				    .group_commit_ms = 2,
				    .group_commit_max = 256,
				    .create = true };
}

static uint64_t du_bytes, du_index, du_blobdirs;

static int du_one(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
	size_t n = strlen(path);

	(void)f;
	du_bytes += (uint64_t)sb->st_blocks * 512;
	if (n >= 10 && strcmp(path + n - 10, "/index.mdb") == 0)
		du_index += (uint64_t)sb->st_blocks * 512;
	else if (flag == FTW_D && strstr(path, "/blobs") != NULL)
		du_blobdirs += (uint64_t)sb->st_blocks * 512;
	return 0;
}

/* -D: where the bytes of the index go, summed over the partitions by table. LMDB's own
   figures (mdb_stat: depth, branch, leaf and overflow pages, entries) and the bytes the
   entries take in their leaf pages, counted the way LMDB lays a node out (0.9: an 8-byte
   node header, the key, the value or, past the node limit, an 8-byte overflow page number;
   rounded to even; a 2-byte slot), over the leaf pages' room: how full they are. */
#define TABLES_MAX 40

struct table_tally {
	char name[24];
	uint64_t entries, branch, leaf, overflow, used;
	unsigned depth;
};

static struct table_tally tables[TABLES_MAX];
static size_t ntables;
static uint64_t free_pages, file_pages, meta_pages, page_size;

static struct table_tally *tally_of(const char *name, size_t len)
{
	for (size_t i = 0; i < ntables; i++)
		if (strlen(tables[i].name) == len && memcmp(tables[i].name, name, len) == 0)
			return &tables[i];
	if (ntables == TABLES_MAX || len >= sizeof(tables[0].name))
		return NULL;
	memcpy(tables[ntables].name, name, len);
	tables[ntables].name[len] = '\0';
	return &tables[ntables++];
}

static void tally_table(MDB_txn *txn, MDB_dbi d, struct table_tally *tt, size_t nodemax)
{
	MDB_stat s;
	MDB_cursor *c;
	MDB_val k, v;

	if (mdb_stat(txn, d, &s) != 0)
		return;
	tt->entries += s.ms_entries;
	tt->branch += s.ms_branch_pages;
	tt->leaf += s.ms_leaf_pages;
	tt->overflow += s.ms_overflow_pages;
	if (s.ms_depth > tt->depth)
		tt->depth = s.ms_depth;
	if (mdb_cursor_open(txn, d, &c) != 0)
		return;
	for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
		size_t node = 8 + k.mv_size + v.mv_size;

		if (node > nodemax)
			node = 8 + k.mv_size + 8;
		tt->used += (node + 1) / 2 * 2 + 2;
	}
	mdb_cursor_close(c);
}

static void tally_env(const char *path)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi main_dbi;
	MDB_cursor *c;
	MDB_val k, v;
	MDB_envinfo info;
	MDB_stat es;

	if (mdb_env_create(&env) != 0)
		return;
	mdb_env_set_maxdbs(env, TABLES_MAX);
	if (mdb_env_open(env, path, MDB_RDONLY | MDB_NOSUBDIR, 0) != 0 ||
	    mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0) {
		mdb_env_close(env);
		return;
	}
	mdb_env_stat(env, &es);
	mdb_env_info(env, &info);
	page_size = es.ms_psize;
	file_pages += info.me_last_pgno + 1;
	meta_pages += 2;
	/* LMDB's node limit: half a page's room less the slot, even (me_nodemax) */
	size_t nodemax = ((es.ms_psize - 16) / 2 & ~(size_t)1) - 2;
	/* the freelist: each value is a count, then that many page numbers */
	if (mdb_cursor_open(txn, 0, &c) == 0) {
		for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT)
			if (v.mv_size >= sizeof(size_t))
				free_pages += *(const size_t *)v.mv_data;
		mdb_cursor_close(c);
	}
	struct table_tally *ft = tally_of("(freelist)", 10), *mt = tally_of("(names)", 7);
	if (ft != NULL)
		tally_table(txn, 0, ft, nodemax);
	if (mdb_dbi_open(txn, NULL, 0, &main_dbi) == 0 && mt != NULL) {
		tally_table(txn, main_dbi, mt, nodemax);
		if (mdb_cursor_open(txn, main_dbi, &c) == 0) {
			for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0;
			     op = MDB_NEXT) {
				char name[24];
				MDB_dbi d;
				struct table_tally *tt;

				if (k.mv_size >= sizeof(name))
					continue;
				memcpy(name, k.mv_data, k.mv_size);
				name[k.mv_size] = '\0';
				if ((tt = tally_of(name, k.mv_size)) != NULL &&
				    mdb_dbi_open(txn, name, 0, &d) == 0)
					tally_table(txn, d, tt, nodemax);
			}
			mdb_cursor_close(c);
		}
	}
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

static void print_tables(const char *dir, unsigned nparts, unsigned population)
{
	char p[600];
	uint64_t msgs = (uint64_t)population * 32, pages = 0;

	ntables = 0;
	memset(tables, 0, sizeof(tables));
	free_pages = file_pages = meta_pages = 0;
	for (unsigned i = 0; i < nparts; i++) {
		snprintf(p, sizeof(p), "%s/part%u/index.mdb", dir, i);
		tally_env(p);
	}
	if (page_size == 0)
		return;
	printf("    %-12s %9s %5s %7s %7s %8s %9s %8s %6s\n", "table", "entries", "depth",
	       "branch", "leaf", "overflow", "KB", "B/msg", "fill");
	for (size_t i = 0; i < ntables; i++) {
		const struct table_tally *tt = &tables[i];
		uint64_t n = tt->branch + tt->leaf + tt->overflow;

		pages += n;
		if (n == 0)
			continue;
		printf("    %-12s %9" PRIu64 " %5u %7" PRIu64 " %7" PRIu64 " %8" PRIu64
		       " %9.1f %8.1f %5.0f%%\n",
		       tt->name, tt->entries, tt->depth, tt->branch, tt->leaf, tt->overflow,
		       n * page_size / 1024.0, (double)n * page_size / msgs,
		       tt->leaf ? 100.0 * tt->used / (tt->leaf * (page_size - 16)) : 0.0);
	}
	printf("    pages in the tables %" PRIu64 ", on the freelist %" PRIu64 ", meta %" PRIu64
	       ", in the files %" PRIu64 " (%.1f KB per user; %u partitions)\n",
	       pages, free_pages, meta_pages, file_pages,
	       file_pages * page_size / 1024.0 / population, nparts);
}

/* -D: the tiny profile's fill into a fresh store under base for each layout. */
static int run_disk(const char *base, unsigned n, unsigned sessions, unsigned nparts)
{
	static const uint64_t layouts[] = { 0, 16384 };
	char **names = calloc(n, sizeof(*names));

	text_bodies = true;
	for (unsigned i = 0; i < n; i++) {
		names[i] = malloc(16);
		snprintf(names[i], 16, "tiny%u", i);
	}
	users = (const char *const *)names;
	nusers = n;
	for (size_t l = 0; l < 2; l++) {
		char dir[512];
		struct store_opts o = bench_opts(dir, nparts, 64ull << 20);
		struct store *st;

		o.inline_max = layouts[l];
		o.fts = disk_fts;
		snprintf(dir, sizeof(dir), "%s/inline%llu", base, (unsigned long long)layouts[l]);
		if (store_open(&o, &st) != 0)
			return 1;
		for (unsigned i = 0; i < n; i++) {
			struct store_txn *t;

			store_txn_begin(st, store_partition_for(st, names[i]), STORE_TXN_WRITE,
					&t);
			store_user_create(t, names[i], NULL);
			store_txn_commit(&t);
		}
		printf("layout inline_max=%llu (%s):\n", (unsigned long long)layouts[l],
		       layouts[l] ? "bodies up to 16K in the index" : "a file per message");
		run_deliveries(st, 1, 4700, true, sessions, n * 32, 3600);
		store_close(&st);
		du_bytes = du_index = du_blobdirs = 0;
		nftw(dir, du_one, 16, FTW_PHYS);
		printf("    disk: %.1f KB per user (%u users x 32 messages of 4,700 bytes = %.1f KB "
		       "of mail each; blocks allocated under %s, index included): index files "
		       "%.1f, blob directories %.1f, message files and the rest %.1f\n",
		       du_bytes / 1024.0 / n, n, 32 * 4700 / 1024.0, dir, du_index / 1024.0 / n,
		       du_blobdirs / 1024.0 / n, (du_bytes - du_index - du_blobdirs) / 1024.0 / n);
		print_tables(dir, nparts, n);
	}
	return 0;
}

int main(int argc, char **argv)
{
	char tmpl[] = "/tmp/heron-store-bench.XXXXXX";
	const char *dir = NULL;
	unsigned limit = 2000, producers = 16, cache_n = 10000, nparts = 4, disk_users = 0;
	double seconds = 10;
	int c;

	while ((c = getopt(argc, argv, "d:n:p:s:c:P:D:F")) != -1) {
		switch (c) {
		case 'D':
			disk_users = (unsigned)atoi(optarg);
			break;
		case 'F':
			disk_fts = true;
			break;
		case 'd':
			dir = optarg;
			break;
		case 'n':
			limit = (unsigned)atoi(optarg);
			break;
		case 'p':
			producers = (unsigned)atoi(optarg);
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'c':
			cache_n = (unsigned)atoi(optarg);
			break;
		case 'P':
			nparts = (unsigned)atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: store_bench [-d DIR] [-n MESSAGES] [-p PRODUCERS] "
					"[-s SECONDS] [-c CACHE_MESSAGES] [-P PARTITIONS] "
					"[-D USERS [-F]]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* figures appear as they are measured */
	if (producers < 1 || producers > 64)
		producers = 16;
	if (dir == NULL && (dir = mkdtemp(tmpl)) == NULL)
		return 2;
	if (disk_users > 0)
		return run_disk(dir, disk_users, producers == 16 ? 20 : producers, nparts);
	struct store_opts o = bench_opts(dir, nparts, 4ull << 30);
	struct store *st;
	int rc = store_open(&o, &st);

	if (rc != 0) {
		fprintf(stderr, "store_open %s: %s\n", dir, store_strerror(rc));
		return 1;
	}
	make_users(st);
	printf("store bench in %s: %u partitions, up to %u messages or %.0f s per line\n", dir,
	       nparts, limit, seconds);
	const size_t sizes[] = { 4096, 100 * 1024 };
	const unsigned rcpts[] = { 1, 5 };
	for (int g = 0; g < 2; g++)
		for (int s = 0; s < 2; s++)
			for (int r = 0; r < 2; r++)
				run_deliveries(st, rcpts[r], sizes[s], g == 1, producers, limit,
					       seconds);
	run_deliveries(st, 1, 4096, false, 1, limit / 4, seconds);
	run_deliveries(st, 1, 4096, true, 1, limit / 4, seconds);

	unsigned part = store_partition_for(st, "cache");
	struct store_txn *t;
	struct store_user u;
	uint64_t mbox;
	store_txn_begin(st, part, STORE_TXN_READ, &t);
	store_user_get(t, "cache", &u);
	store_mbox_find(t, u.id, "INBOX", &mbox);
	store_txn_abort(&t);
	fill_mailbox(st, mbox, cache_n);
	run_cache_reads(st, cache_n);
	store_close(&st);
	if (strcmp(dir, tmpl) == 0) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return 0;
}
