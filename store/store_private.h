/* store_private.h — libstore internals: struct layouts, DBI names, key and record formats.
 * Only the store sources include it. Every key is fixed-width big-endian (STYLE 13) so cursor
 * order is numeric order; records are packed big-endian byte strings built with put_be*.
 *
 * DBIs of a partition environment:
 *   meta     "next_id" be64, "parts" be32, "uidvalidity" be32       counters of the partition
 *            "format" be32, "writer" text, "upgrade_pos" be32 step + be64  (store_format.c)
 *            "body_fill" be64 piece + be16 bytes: the bodies' last piece, what its page
 *            holds (format 4: where the next body's first piece is cut, store_blob.c)
 *   users    name bytes                -> user record
 *   userid   be64 user id              -> name bytes
 *   mboxes   be64 user + name bytes    -> be64 mailbox id
 *   mbox     be64 mailbox id           -> mailbox record
 *   kw       be64 mailbox + u8 index   -> keyword name
 *   msgs     be64 mailbox + be32 uid   -> message record
 *   expunged be64 mailbox + be64 modseq + be32 uid -> be64 time
 *   subs     be64 user + name bytes    -> ""
 *   blobs    be64 blob id              -> be32 refcount + be64 size
 *   cache    be64 blob id              -> msgcache bytes (msgcache.h)
 *   sieve    be64 user + type + ...    -> Sieve scripts and memories (store_sieve.h)
 *   fts      be64 mailbox + type + ... -> the full-text index (store_fts.c)
 *   dead     be64 blob id              -> ""   (last reference gone, file to unlink)
 *   bodies   be64 piece number         -> a piece of an inline body (format 3): the blob row
 *            then holds be32 refcount + be64 size + be64 first piece + be32 encoded length
 *            (+ be16 first piece's length: format 4); pieces of BODY_PIECE bytes but the
 *            last (and since format 4 the first: the room left on the last page), numbered
 *            in order of writing (MDB_APPEND)
 *   annot    be64 owner (mailbox or user) + be64 user (0: /shared) + entry name -> value
 *            (store_annot.c)
 *   acl      be64 mailbox + identifier bytes -> be32 rights (store_acl.c)
 *   seen     be64 mailbox + be32 uid + viewer name -> be64 modseq + u8 seen (store_seen.c;
 *            uid 0: the modseq of the viewer's last change in the mailbox)
 *   tombs    user name bytes           -> be64 time (seconds) + host bytes: the user moved
 *            away (store_tomb.c); a new, optional table: no format change
 * The queue environment (queue/) has meta, blobs (one reference per entry) and:
 *   queue    be64 id                   -> queue record
 *   due      be64 time + be64 id       -> ""   (one row per not-held, not-final entry)
 *   drops    maildrop file identity    -> be64 queue id + be64 time + u8 kind (store_drop.c;
 *            also in a partition: the record of a file delivered there) */
#ifndef HERON_STORE_PRIVATE_H
#define HERON_STORE_PRIVATE_H

#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/buf.h"
#include "common/msgcache.h"
#include "store/store.h"

/* The format this code writes (store_format.c lists them all). */
#define STORE_FORMAT 4

enum store_dbi {
	DBI_META,
	DBI_USERS,
	DBI_USERID,
	DBI_MBOXES,
	DBI_MBOX,
	DBI_KW,
	DBI_MSGS,
	DBI_EXPUNGED,
	DBI_SUBS,
	DBI_BLOBS,
	DBI_QUEUE,
	DBI_DUE,
	DBI_CACHE,
	DBI_SIEVE, /* store_sieve.c / store_sieve.h */
	DBI_FTS,   /* store_fts.c */
	DBI_DEAD,
	DBI_BODIES,  /* store_blob.c: bodies kept in the index */
	DBI_ANNOT,   /* store_annot.c: METADATA annotations */
	DBI_CHANGES, /* store_watch.c: the partition's change log (IMAP NOTIFY) */
	DBI_DROPS,   /* store_drop.c: maildrop files submitted (queue and partitions) */
	DBI_ACL,     /* store_acl.c: mailboxes' access control lists */
	DBI_SEEN,    /* store_seen.c: viewers' private \Seen */
	DBI_TOMBS,   /* store_tomb.c: users moved to another store host */
	DBI_COUNT
};

struct store_env {
	MDB_env *env;
	MDB_dbi dbi[DBI_COUNT];
	unsigned part;  /* STORE_QUEUE_PART for the queue */
	char *dir;      /* <path>/partN or <path>/queue */
	int blobdir_fd; /* <dir>/blobs */
	int notify_fd;  /* <dir>/notify, written after each commit */
	uint64_t map_size;
	/* transactions of this process on env (being begun or open), and the lock a remap
	   takes so that none is: store.c env_txn_begin */
	atomic_uint txns;
	pthread_rwlock_t remap_lock;
	/* message files this process unlinked after a commit: their `dead` rows go with the
	   next write txn of the environment (store_txn_commit) */
	pthread_mutex_t gone_mu;
	uint64_t *gone;
	size_t ngone, capgone;
	/* a group committer runs in this process: the env is MDB_NOMETASYNC (store_batch.c).
	   The committer's commits leave their meta page unsynced (gc_seq counts them; the
	   next commit's data sync, or an explicit sync, makes them durable: gc_durable); every
	   other commit of the process syncs it at once (store_txn_commit) */
	bool nometasync;
	atomic_uint_fast64_t gc_seq, gc_durable;
};

/* The process tag in a message file id (store_recover.c): bits 40..55; the top byte is the
   hour the file was made in (its directory), the low 40 bits are random. */
#define STORE_BLOB_TAG(id) ((uint16_t)((id) >> 40))

struct store {
	char *path;
	int lock_fd;   /* <path>/store.lock, held shared (exclusive: upgrading) */
	uint16_t tag;  /* this process's tag in the ids of the files it makes */
	int marker_fd; /* <path>/run/<tag>, locked while the store is open */
	char marker_path[PATH_MAX + 16];
	struct store_recovery *recovery;
	struct store_pool *pool; /* the group committer's threads (store_batch.c), or NULL */
	unsigned nparts;
	struct store_env *parts;
	struct store_env queue;
	uint64_t map_size_max;
	int64_t expunge_history_ms;
	uint32_t expunge_history_max;
	int64_t gc_ms;
	unsigned gc_max;
	bool nosync;       /* store_opts.nosync: bulk loading, synced at store_close */
	bool gc_syncfs;    /* store_opts.group_commit_syncfs */
	bool fsync_flags;  /* store_opts.fsync_flags */
	bool fts;          /* store_opts.fts */
	size_t inline_max; /* store_opts.inline_max */
	int64_t tomb_age;  /* store_opts.tombstone_age_ms (ms; its default filled in) */
	atomic_uint_fast64_t fsyncs;
	atomic_uint_fast64_t commits;
	/* the last inline body id's time and count (store_blob.c inline_id): ms * 64 + n */
	atomic_uint_fast64_t inline_seq;
};

struct store_txn {
	struct store *st;
	struct store_env *e;
	MDB_txn *txn;
	bool write;
	bool defer_meta; /* the group committer's: the meta page synced later */
	bool failed;     /* a write call hit MAP_FULL: the txn must be redone */
	int err;
	struct store_blob **refd; /* blobs this txn references: kept once it commits */
	size_t nrefd, caprefd;
	/* blob files to unlink after this txn commits (refcount reached 0); the txn's own, so
	   readers and writers in other threads never touch it */
	uint64_t *dead;
	size_t ndead, capdead;
};

struct store_blob {
	struct store *st;
	unsigned part;
	uint64_t id;
	uint64_t size;
	int fd;
	bool finished;
	bool deferred;    /* finished without fsync: the committer fsyncs fd (data_fd) */
	bool reopen;      /* deferred with fd closed (past DEFERRED_MAX open ones): the
			     committer opens the file again by name to fsync it */
	bool data_synced; /* the bytes are durable (fsync done) */
	bool dir_synced;  /* its directory was fsynced after the rename */
	bool inl;         /* the body is in memory (body), no file: up to inline_max bytes */
	struct buf body;  /* inl: the bytes so far */
	struct buf enc;   /* inl and finished: what the index keeps (a tag byte, then the
			     bytes raw or zstd-compressed) */
	char tmp[64];     /* name under blobs/ while writing */
	struct msgcache_builder *mb;
	struct buf cache;
	struct store_fts_doc *fts; /* its trigrams, computed before the txn (store_fts_prepare) */
	int err;
	struct blob_link {
		unsigned part;
		bool referenced; /* a committed txn of part references it: keep the file */
		bool dir_synced; /* the link's directory was fsynced after it was made */
	} * links;               /* partitions holding the file (the first is part) */
	size_t nlinks;
};

/* Record layouts (offsets in bytes). */
/* user: id 8, quota_bytes 8, quota_msgs 8, used_bytes 8, used_msgs 8, created 8 */
#define USER_REC_LEN 48
/* mailbox: user 8, uidvalidity 4, uidnext 4, highestmodseq 8, messages 4, recent 4,
   unseen 4, deleted 4, size 8, first_recent 4, attrs 4, special 4, expunge_floor 8,
   nkw 4, name with its NUL, history entries 4. A record written before the history count
   ends at the name's NUL: its count is unknown until the next write of the mailbox counts
   the entries once (store_msg_prune_history). */
#define MBOX_REC_FIXED 72
#define MBOX_REC_MAX (MBOX_REC_FIXED + STORE_MAX_NAME + 1 + 4)
#define MBOX_HIST_UNKNOWN UINT32_MAX
/* message: blob 8, modseq 8, internaldate 8, size 8, flags 4, keywords 8, savedate 8. A row
   written before save dates were kept ends at the keywords (MSG_REC_LEN): its save date reads
   as its internal date. */
#define MSG_REC_LEN 44
#define MSG_REC_SAVED_LEN 52
/* the serialized header cache of one message: any the builder writes (MSGCACHE_BLOB_MAX), so
   none is "too big to cache" */
#define STORE_CACHE_MAX MSGCACHE_BLOB_MAX

struct mbox_rec {
	char namebuf[STORE_MAX_NAME + 1];
	uint64_t user;
	uint32_t uidvalidity, uidnext;
	uint64_t highestmodseq;
	uint32_t messages, recent, unseen, deleted;
	uint64_t size;
	uint32_t first_recent;
	uint32_t attrs, special;
	uint64_t expunge_floor;
	uint32_t nkw;
	size_t name_len; /* the name is in namebuf, NUL-terminated */
	uint32_t hist_n; /* entries in the expunge history, or MBOX_HIST_UNKNOWN */
};

struct user_rec {
	uint64_t id, quota_bytes, quota_msgs, used_bytes, used_msgs;
	int64_t created;
};

/* store_watch.c: appends a change to the partition's log (t's txn, so an aborted or failed
   write leaves none); name/old may be NULL. */
int store_change_note(struct store_txn *t, enum store_change_kind kind, uint64_t user,
		      uint64_t mbox, const char *name, size_t len, const char *old, size_t olen);
/* store_change_note of a STORE_CHANGE_MSGS write that did what (enum store_change_what). */
int store_change_note_what(struct store_txn *t, enum store_change_kind kind, unsigned what,
			   uint64_t user, uint64_t mbox, const char *name, size_t len,
			   const char *old, size_t olen);

/* store.c */
int store_mdb_err(struct store_txn *t, int rc, const char *what);
/* store_write for the group committer: its commits leave the meta page to store_env_sync. */
int store_write_deferred(struct store *st, unsigned part,
			 int (*fn)(struct store_txn *t, void *arg), void *arg);
/* Makes every commit of env part so far durable (its meta page): 0 or STORE_EIO. */
int store_env_sync(struct store *st, unsigned part);
/* The env's flag for the group committer of this process (on: MDB_NOMETASYNC). */
void store_env_nometasync(struct store *st, unsigned part, bool on);
int store_get(struct store_txn *t, enum store_dbi d, const void *k, size_t klen, MDB_val *v);
int store_put(struct store_txn *t, enum store_dbi d, const void *k, size_t klen, const void *v,
	      size_t vlen);
/* store_put of a key that is usually past the table's last one (an id that grows with
   time): then with MDB_APPEND, whose split leaves the full page as it is (a plain put's
   moves its last row to the new page), else as store_put. */
int store_put_append(struct store_txn *t, enum store_dbi d, const void *k, size_t klen,
		     const void *v, size_t vlen);
int store_del(struct store_txn *t, enum store_dbi d, const void *k, size_t klen);
int store_next_id(struct store_txn *t, uint64_t *id_r);
int store_del_prefix(struct store_txn *t, enum store_dbi d, uint64_t id);
/* Deletes every row whose key starts with the len (at most 32) bytes of prefix. */
int store_del_range(struct store_txn *t, enum store_dbi d, const void *prefix, size_t len);
struct store_env *store_env_of(struct store *st, unsigned part);
void store_fsync_note(struct store *st);
int store_errno(int e);

int store_queue_bytes(struct store_txn *t, uint64_t *bytes_r);
int store_user_bytes(struct store_txn *t, uint64_t *bytes_r);

/* store_user.c */
void user_rec_decode(const MDB_val *v, struct user_rec *u);
int user_rec_load_id(struct store_txn *t, uint64_t id, struct user_rec *u);
int user_rec_store_id(struct store_txn *t, const struct user_rec *u);
int store_user_charge(struct store_txn *t, uint64_t user, int64_t bytes, int64_t msgs, bool check);

/* store_mbox.c */
int mbox_rec_load(struct store_txn *t, uint64_t mbox, struct mbox_rec *r);
int mbox_rec_store(struct store_txn *t, uint64_t mbox, const struct mbox_rec *r);
/* mbox_rec_store whose change record says what the write did (enum store_change_what) */
int mbox_rec_store_what(struct store_txn *t, uint64_t mbox, const struct mbox_rec *r,
			unsigned what);
int store_mbox_remove_all(struct store_txn *t, uint64_t user);
int mbox_kw_remap(struct store_txn *t, uint64_t src, uint64_t dst, uint64_t kws, uint64_t *out);

/* store_annot.c: a mailbox's (or a user's server) rows dropped, copied to another owner */
int store_annot_drop(struct store_txn *t, uint64_t owner);
int store_annot_copy(struct store_txn *t, uint64_t from, uint64_t to);

/* store_acl.c: a mailbox's rows dropped; every row checked (verify): rows of a mailbox
   mbox_known says is gone, naming a user user_known (when not NULL) says is no user, or
   that do not decode, counted in *bad_r and, with repair, deleted (*fixed_r) */
int store_acl_drop(struct store_txn *t, uint64_t mbox);
int store_acl_check(struct store_txn *t, bool (*mbox_known)(uint64_t mbox, void *arg),
		    bool (*user_known)(const char *user, size_t len, void *arg), void *arg,
		    bool repair, uint64_t *bad_r, uint64_t *fixed_r);

/* store_seen.c: the rows of one message (expunge) or of a whole mailbox (delete) */
int store_seen_expunged(struct store_txn *t, uint64_t mbox, uint32_t uid);
int store_seen_drop(struct store_txn *t, uint64_t mbox);
/* verify: rows of a mailbox mbox_known says is gone, of a message that is not there, or
   that do not decode, counted in *bad_r and, with repair, deleted (*fixed_r) */
int store_seen_check(struct store_txn *t, bool (*mbox_known)(uint64_t mbox, void *arg), void *arg,
		     bool repair, uint64_t *bad_r, uint64_t *fixed_r);

/* store_msg.c */
int msg_put(struct store_txn *t, uint64_t mbox, uint32_t uid, const struct store_msg *m);
void msg_decode(const MDB_val *v, uint32_t uid, struct store_msg *m);
int store_msg_add_ref(struct store_txn *t, struct mbox_rec *r, uint64_t mbox, uint64_t blob,
		      uint64_t size, unsigned flags, uint64_t kws, int64_t internaldate,
		      bool check_quota, uint32_t *uid_r);
int store_msg_prune_history(struct store_txn *t, uint64_t mbox, struct mbox_rec *r);
int store_msg_purge_mbox(struct store_txn *t, uint64_t mbox, struct mbox_rec *r);
int store_msg_count_history(struct store_txn *t, uint64_t mbox, uint32_t *n_r);

/* store_blob.c */
int store_blob_ref(struct store_txn *t, const struct store_blob *b);
int store_blob_ref_id(struct store_txn *t, uint64_t blob, int delta);
void store_blob_path(char *out, size_t size, uint64_t id);
/* Message files are renamed to their final names by a hard link and an unlink (set when
   renameat2's RENAME_NOREPLACE is not supported; a test sets it to take that path). */
extern atomic_bool store_blob_rename_by_link;
void store_blob_unlink_dead(struct store_txn *t);
void store_blob_txn_committed(struct store_txn *t);
int store_blob_sync_batch(struct store_blob **v, const unsigned *parts, size_t n);
/* store_blob_open inside t (sees t's own writes). */
int store_blob_open_txn(struct store_txn *t, uint64_t blob, int *fd_r, uint64_t *size_r);
/* The body of blob is in t's index and reads back whole (verify). */
bool store_blob_inline_ok(struct store_txn *t, uint64_t blob);
/* Sets the refcount of blob's row, keeping its inline body; 0 removes the row, its cache and
   its inline body (verify --repair). file_size: the size of a row that is not inline. */
int store_blob_set_refs(struct store_txn *t, uint64_t blob, uint32_t refs, uint64_t file_size);

/* store_format.c */
int store_format_check(struct store *st, struct store_env *e, MDB_txn *txn, bool fresh,
		       bool upgrade);
int store_format_read(struct store_txn *t, unsigned *format_r);
int store_format_upgrade(struct store *st);
int store_lock(struct store *st, bool exclusive);

/* store_batch.c: runs fn(arg, 0..n-1) on the pool's threads and this one, returns when all
   are done; p NULL: one after the other here. Only one thread at a time may use a pool. */
struct store_pool;
void store_pool_run(struct store_pool *p, void (*fn)(void *arg, size_t i), void *arg, size_t n);

/* store_recover.c */
int store_recover_start(struct store *st, bool background);
void store_recover_stop(struct store *st);
void store_recover_wait(struct store *st);

/* store_fts.c: the index's part of a message's arrival and departure (in the txn that
   adds or removes it); first: the mailbox had no other message. The blob's trigrams are
   computed here unless store_fts_prepare did it (the group committer, before the txn). */
struct store_fts_doc;
int store_fts_add(struct store_txn *t, uint64_t mbox, uint32_t uid, const struct store_blob *b,
		  bool first);
int store_fts_add_id(struct store_txn *t, uint64_t mbox, uint32_t uid, uint64_t blob, bool first);
int store_fts_remove(struct store_txn *t, uint64_t mbox, uint32_t uid);
int store_fts_purge(struct store_txn *t, uint64_t mbox);
void store_fts_prepare(struct store_blob *b);
void store_fts_doc_free(struct store_fts_doc **dp);

#endif
