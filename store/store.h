/* store.h — libheron_store: Heron's message store, the one public header.
 *
 * A store is a directory (`[store] path`) holding partitions `part0/ .. partN-1/` and the
 * outbound queue `queue/`. Each holds one LMDB environment (`index.mdb`) and its immutable
 * message files (`blobs/xx/<16 hex>`). A user lives in exactly one partition, chosen at
 * creation (hash of the name, or an explicit number) and never moved; all of a user's
 * mailboxes and messages are in that partition. Writers are serialized per partition (LMDB's
 * writer lock), readers never block. mtad, imapd and mailctl open the same store at once.
 *
 * Ids. A user id and a mailbox id carry their partition in the top 16 bits
 * (STORE_ID_PART(id)), so every call taking an id knows its environment. A blob id is 64
 * random bits; a blob delivered to several partitions is hard-linked under each of them.
 *
 * Transactions. Every index call takes a `struct store_txn` (read or write) on one partition.
 * A read txn is a consistent snapshot; keep it for one command, not longer (LMDB: long readers
 * stop page reuse). A write txn serializes writers of its partition; one process must not hold
 * two write txns on the same partition. Pointers returned by reads (names, caches) point into
 * the map and are valid until the txn ends. A write call that fails may have done part of its
 * work in the txn: abort the txn (or commit only what you mean to keep; single-message calls
 * such as store_msg_append and store_msg_flags check everything before they write, so their
 * refusals - EQUOTA, ENOMSG, ELOCKED - leave the txn clean). Any write call may return
 * STORE_EAGAIN: the map was full, has been grown, and the whole transaction must be redone
 * (store_txn_abort, then begin again and repeat the calls). store_write() does that loop for you; the batch and group
 * commit APIs do it internally.
 *
 * Durability (STYLE 12). A message file is written to a tmp name, fsynced, renamed, and its
 * directory fsynced before the index commit that references it; commits use LMDB's default
 * sync mode. Acknowledge (SMTP 250, IMAP OK) only after store_txn_commit() or a batch callback
 * reported 0. A crash leaves at most an orphan file, which store_verify() removes.
 *
 * Processes. Open the store in each process after fork(): an environment must not cross a
 * fork (LMDB). store_open() runs mdb_reader_check() so readers left by a crashed process are
 * cleared. The handle may be used from several threads only through the group committer
 * (store_gc_*), which is thread-safe; other calls need one thread per handle.
 *
 * Errors. Functions return 0 (STORE_OK) or a `enum store_err`; store_strerror() names it.
 * STORE_ENOSPC, STORE_EIO and STORE_EFULL are temporary (store_err_temporary()): answer
 * 451/NO [SERVERBUG]-style and let the client retry; nothing half-written stays behind.
 * Every function's errors are listed with it; STORE_EIO (an unexpected system or LMDB error,
 * logged with its cause) and STORE_EAGAIN (write calls and store_txn_begin) can come from any
 * call that touches the index and are not repeated in each list. */
#ifndef HERON_STORE_H
#define HERON_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct conf;

/* ------------------------------------------------------------------------------------- */
/* Errors */

enum store_err {
	STORE_OK = 0,
	STORE_EINVAL,    /* bad argument: empty/overlong name, bad pattern, bad range */
	STORE_ENOUSER,   /* no such user */
	STORE_ENOMBOX,   /* no such mailbox (or it is \Noselect where one must be selectable) */
	STORE_ENOMSG,    /* no such message (UID not in the mailbox) */
	STORE_ENOQUEUE,  /* no such queue entry */
	STORE_EEXIST,    /* the user or mailbox already exists */
	STORE_EQUOTA,    /* the user's quota (bytes or messages) would be exceeded */
	STORE_EKEYWORDS, /* the mailbox has STORE_MAX_KEYWORDS keywords already */
	STORE_ENOTSUP,   /* the operation is refused for this object (e.g. delete INBOX) */
	STORE_EFULL,     /* map at [store] map_size_max: temporary, an admin must act */
	STORE_ENOSPC,    /* disk full while writing a file or committing: temporary */
	STORE_EIO,       /* other system/LMDB failure (logged with the cause): temporary */
	STORE_EAGAIN,    /* map grown: abort and redo the write transaction */
	STORE_ECORRUPT,  /* a record did not decode: run `mailctl verify` */
	STORE_ELOCKED,   /* queue entry leased by another runner, or held; store_open: the
			    store is being upgraded, or (upgrade) in use */
	STORE_EFORMAT,   /* store_open: the store's format is newer than this binary's, or
			    older and needs `mailctl upgrade` (the log says which) */
	STORE_ELIMIT,    /* an administrative limit (store_mbox_limit: mailboxes, depth) */
	STORE_EMOVED,    /* store_user_create: the user moved to another store host (a
			    tombstone holds the name: store_tomb_get); temporary, for a sender
			    or client whose next lookup finds the new host */
	STORE_NERR
};

/* A constant text for the code ("no such mailbox"). */
const char *store_strerror(int err);
/* Whether a retry later may succeed (ENOSPC, EIO, EFULL, EAGAIN, EMOVED): SMTP 4xx, not
   5xx. */
bool store_err_temporary(int err);

/* ------------------------------------------------------------------------------------- */
/* Opening */

#define STORE_ID_PART(id) ((unsigned)((id) >> 48))
#define STORE_MAX_PARTITIONS 1024
#define STORE_QUEUE_PART 0xffffu /* the queue's "partition" for blobs and stats */
/* LMDB's longest key (mdb_env_get_maxkeysize; store_open refuses a library with less). A
   user's name is the key of its record, a mailbox's key the user id (8 bytes) and its name. */
#define STORE_KEY_MAX 511
#define STORE_MAX_NAME STORE_KEY_MAX            /* bytes of a user name (and any name) */
#define STORE_MAX_MBOX_NAME (STORE_KEY_MAX - 8) /* bytes of a mailbox name */
#define STORE_MAX_KEYWORDS 64                   /* keywords per mailbox */
#define STORE_MAX_KEYWORD 100                   /* bytes of a keyword */

struct store;

#define STORE_EXPUNGE_HISTORY_MAX 100000 /* the default of store_opts.expunge_history_max */

struct store_opts {
	const char *path;             /* the store directory; created if missing */
	unsigned partitions;          /* 1..1024; must match the store once created */
	uint64_t map_size;            /* initial map size per environment */
	uint64_t map_size_max;        /* growth stops here (STORE_EFULL) */
	int64_t expunge_history_ms;   /* how long expunged UIDs are kept for QRESYNC */
	uint32_t expunge_history_max; /* and how many per mailbox at most (the oldest go
					 first); 0: STORE_EXPUNGE_HISTORY_MAX */
	int64_t group_commit_ms;      /* store_gc default delay */
	unsigned group_commit_max;    /* store_gc flushes at once when this many are pending */
	bool group_commit_syncfs;     /* batches of deferred blobs: one syncfs (see
					store_blob_finish_deferred); for a store on its own
					filesystem */
	bool fsync_flags;             /* store_gc_submit_flags answers after the index sync too
					(else once committed; see there) */
	bool fts;                     /* keep the full-text index (store_fts_candidates) */
	uint64_t inline_max;          /* bodies up to this many bytes live in the index (DBI
					bodies, zstd when smaller), not in files; 0: none */
	int64_t tombstone_age_ms;     /* how long a tombstone holds its user's name
					 (store_tomb_add); 0: STORE_TOMB_AGE_DEFAULT */
	bool create;                  /* create missing partitions (mailctl, daemons: yes) */
	bool upgrade;                 /* `mailctl upgrade`: bring an older store to this
					binary's format in place (needs the store to itself) */
	bool recover_background;      /* remove what crashed processes left (their
					unacknowledged message files) in a thread of its own
					instead of inside store_open (store_opts_from_conf: yes) */
	bool nosync;                  /* bulk loading only (mailctl import --bulk): no fsync
					of message files or directories and no index sync at
					commit (LMDB MDB_NOSYNC, in this process only); store_close
					then syncs it all. A machine crash before store_close may
					lose what was loaded: load again. Never for daemons. */
};

/* Format. Every environment records the format it is in and the Heron that last opened it
   for writing ("heron 0.1.0"). store_open refuses a store of a newer format (STORE_EFORMAT:
   this binary cannot read it safely) and one of an older format unless o->upgrade, which
   runs the upgrade steps in place: each step works in bounded transactions that commit
   their position, so a crash or an error leaves a store that the next upgrade resumes
   (the other openers keep refusing it meanwhile). Every opener holds <path>/store.lock
   shared; an upgrade takes it exclusively (STORE_ELOCKED when a daemon has the store
   open, or, for the others, while an upgrade runs). */
unsigned store_format(void);
const char *store_writer_id(void);

/* Fills o from the [store] section of c (strings point into c: keep c alive). */
void store_opts_from_conf(const struct conf *c, struct store_opts *o);
/* Opens (creating when o->create) the store: every partition environment and the queue.
   Message files that processes killed before their commit left behind (never acknowledged)
   and files whose unlink a crash cut short are removed (store_recover.c).
   Runs mdb_reader_check on each. Errors: STORE_EINVAL (partitions differ from the store's
   recorded count, bad opts), STORE_EFORMAT, STORE_ELOCKED (see Format above), STORE_ENOSPC,
   STORE_EIO (cannot create/open; logged). */
int store_open(const struct store_opts *o, struct store **st_r);
/* Closes every environment; *stp = NULL; safe on NULL. No txn may be open. */
void store_close(struct store **stp);
unsigned store_partitions(const struct store *st);
/* The partition a new user goes to when none is given: a stable hash of the name. */
unsigned store_partition_for(const struct store *st, const char *user);
/* Number of fsync/fdatasync/syncfs calls libstore issued in this process (message files,
   directories, and two per index commit), for benchmarks. */
uint64_t store_fsync_count(const struct store *st);
/* Number of index write commits in this process (each is two fdatasyncs in LMDB's default
   mode: data pages, then the meta page; store_fsync_count counts both). */
uint64_t store_commit_count(const struct store *st);

/* ------------------------------------------------------------------------------------- */
/* Transactions */

struct store_txn;

enum store_txn_mode { STORE_TXN_READ, STORE_TXN_WRITE };

/* Begins a txn on partition part. When another process has grown the partition's map, the
   map is taken again at its new size first (LMDB MDB_MAP_RESIZED), which needs this process
   to hold no other txn on the partition: a calling thread that holds no txn waits for the
   other threads' txns on part to end (up to about 2 s; the group committer's are short).
   Errors: STORE_EINVAL (part out of range), STORE_EAGAIN (the map was grown while the
   calling thread holds a txn, or another thread's stayed open: end yours, begin again),
   STORE_EIO. */
int store_txn_begin(struct store *st, unsigned part, enum store_txn_mode mode,
		    struct store_txn **t_r);
/* Commits (write) or ends (read) the txn and consumes *tp (NULL afterwards, even on failure);
   after a successful write commit the partition's watchers are woken. Errors: STORE_EAGAIN
   (map full: grown, redo), STORE_EFULL, STORE_ENOSPC, STORE_EIO; on error nothing of the txn
   is in the index. */
int store_txn_commit(struct store_txn **tp);
/* Drops the txn; *tp = NULL; safe on NULL. */
void store_txn_abort(struct store_txn **tp);

/* Runs fn in a write txn on part and commits; if fn or the commit return STORE_EAGAIN, the
   txn is aborted and fn runs again (fn must only change the index through t). fn returning
   non-zero aborts and is returned. Errors: fn's, store_txn_begin's, and store_txn_commit's
   except EAGAIN. */
int store_write(struct store *st, unsigned part, int (*fn)(struct store_txn *t, void *arg),
		void *arg);

/* ------------------------------------------------------------------------------------- */
/* Users */

struct store_user {
	uint64_t id;          /* carries the partition */
	const char *name;     /* valid for the txn */
	uint64_t quota_bytes; /* 0 = unlimited */
	uint64_t quota_msgs;  /* 0 = unlimited */
	uint64_t used_bytes;  /* exact: every message in every mailbox */
	uint64_t used_msgs;
	int64_t created; /* Unix time */
};

/* Finds the user's partition (hashed one first, then the others): 0 and *part_r, or
   STORE_ENOUSER. Opens its own read txns. */
int store_user_locate(struct store *st, const char *name, unsigned *part_r);
/* Creates a user with an INBOX in partition part (-1: store_partition_for). Needs a write txn
   on that partition (so callers use store_user_locate/partition_for first). Errors:
   STORE_EINVAL (empty, >STORE_MAX_NAME, contains NUL/CR/LF), STORE_EEXIST, STORE_EMOVED (a
   tombstone in t's partition holds the name: store_tomb_clear first to make it anyway). */
int store_user_create(struct store_txn *t, const char *name, uint64_t *id_r);
/* Looks a user up by name in t's partition. Errors: STORE_ENOUSER. */
int store_user_get(struct store_txn *t, const char *name, struct store_user *u_r);
int store_user_get_id(struct store_txn *t, uint64_t id, struct store_user *u_r);
/* Deletes the user with all mailboxes, messages (blob refs dropped), subscriptions, and the
   ACL rows of t's partition naming the user (store_acl_drop_id; store_acl_forget then does
   the other partitions). Errors: STORE_ENOUSER. */
int store_user_delete(struct store_txn *t, const char *name);
/* Renames within the partition, with the ACL rows of t's partition naming the user
   (store_acl_rename_id; store_acl_carry does the other partitions, first). Errors:
   STORE_ENOUSER, STORE_EEXIST, STORE_EINVAL. */
int store_user_rename(struct store_txn *t, const char *from, const char *to);
/* After a rename, every user's subscriptions to from and below it ("from/...") name to
   instead, in every partition (one store_write each; a STORE_CHANGE_SUBSCRIBE record per
   subscription): mailctl gives the renamed user's level of imapd's other users' namespace
   ("Other Users/old" to "Other Users/new", as stored: modified UTF-7). A subscription whose
   new name would pass STORE_MAX_MBOX_NAME stays as it was. *n_r (may be NULL) counts those
   moved. Errors: STORE_EINVAL (empty or too long), those of store_write. */
int store_user_rename_subs(struct store *st, const char *from, const char *to, uint64_t *n_r);
/* Sets the quota (0 = unlimited). Errors: STORE_ENOUSER. */
int store_user_set_quota(struct store_txn *t, const char *name, uint64_t bytes, uint64_t msgs);

/* Tombstones (DBI `tombs`, store_tomb.c): "USER moved to HOST at TIME", left by `mailctl
   user move --finish` in the txn that deletes the source copy, in the user's partition.
   While one holds (younger than store_opts.tombstone_age_ms) store_user_create refuses the
   name with STORE_EMOVED in that partition, so a host that still routes the user here by a
   stale mailHost makes no empty account on first mail or login: mtad answers 451 4.2.0,
   imapd and managesieved a referral to HOST (or try later). A move back to this store and
   `mailctl user add`/`del` clear it (store_tomb_clear in the create's txn, or
   store_tomb_forget); an expired one is ignored, replaced by a create and dropped by
   `mailctl verify --repair` (store_tomb_expire). */
#define STORE_TOMB_AGE_DEFAULT (7LL * 86400 * 1000)
#define STORE_TOMB_HOST_MAX 253 /* bytes of a host name (mailHost) */
struct store_tomb {
	char user[STORE_MAX_NAME + 1];
	char host[STORE_TOMB_HOST_MAX + 1];
	int64_t when; /* seconds since the epoch */
	bool expired; /* older than the store's tombstone age: holds nothing any more */
};
/* Leaves (or replaces) user's tombstone in t's partition. Needs a write txn. Errors:
   STORE_EINVAL (a name store_user_create would refuse; host empty, longer than
   STORE_TOMB_HOST_MAX or holding other than letters, digits, '.', '-', '_'; read txn). */
int store_tomb_add(struct store_txn *t, const char *user, const char *host, int64_t when);
/* user's tombstone in t's partition, expired or not (r->expired says). Errors:
   STORE_ENOMSG (none), STORE_ECORRUPT. */
int store_tomb_get(struct store_txn *t, const char *user, struct store_tomb *r);
/* user's tombstone that holds (not expired), looked for in every partition (the user's
   first, as store_user_locate does); opens its own read txns. Errors: STORE_ENOMSG. */
int store_tomb_find(struct store *st, const char *user, struct store_tomb *r);
/* Removes user's tombstone from t's partition (0 also when there is none). Needs a write
   txn. Errors: STORE_EINVAL (read txn). */
int store_tomb_clear(struct store_txn *t, const char *user);
/* store_tomb_clear in every partition (one store_write each where there is one); *n_r (may
   be NULL) counts the tombstones removed. Errors: those of store_write. */
int store_tomb_forget(struct store *st, const char *user, unsigned *n_r);
/* Calls cb for each tombstone of t's partition, in name order, expired ones too; cb's
   non-zero stops and is returned. */
int store_tomb_list(struct store_txn *t, int (*cb)(const struct store_tomb *tb, void *arg),
		    void *arg);
/* Deletes the expired tombstones of t's partition (older than the store's tombstone age at
   now, seconds); *n_r (may be NULL) counts them. Needs a write txn. */
int store_tomb_expire(struct store_txn *t, int64_t now, uint64_t *n_r);
/* Calls cb for each user of t's partition in name order; a non-zero return from cb stops the
   walk and is returned. */
int store_user_list(struct store_txn *t, int (*cb)(const struct store_user *u, void *arg),
		    void *arg);

/* ------------------------------------------------------------------------------------- */
/* Mailboxes. Names are bytes as imapd gives them (modified UTF-7), hierarchy delimiter '/',
   "INBOX" matched case-insensitively (stored as "INBOX"); never used as file names. */

#define STORE_DELIM '/'

enum store_special { /* RFC 6154 special-use, a bitmask */
		     STORE_USE_ALL = 1u << 0,
		     STORE_USE_ARCHIVE = 1u << 1,
		     STORE_USE_DRAFTS = 1u << 2,
		     STORE_USE_FLAGGED = 1u << 3,
		     STORE_USE_JUNK = 1u << 4,
		     STORE_USE_SENT = 1u << 5,
		     STORE_USE_TRASH = 1u << 6,
};

enum store_mbox_attr {                                /* in store_mbox_info.attrs */
		       STORE_MBOX_NOSELECT = 1u << 0, /* a deleted parent kept for its children */
		       STORE_MBOX_HASCHILDREN = 1u << 1,
		       STORE_MBOX_SUBSCRIBED = 1u << 2,
		       STORE_MBOX_NONEXISTENT =
			       1u << 3, /* subscribed-only entry (LSUB / LIST SUBSCRIBED) */
};

struct store_status {
	uint32_t messages, recent, unseen, deleted;
	uint32_t uidnext, uidvalidity;
	uint64_t highestmodseq;
	uint64_t size;             /* sum of RFC822.SIZE (STATUS=SIZE) */
	uint32_t first_recent_uid; /* messages with uid >= this are \Recent */
	uint64_t expunge_floor;    /* VANISHED history is exact for modseqs >= this */
};

struct store_mbox_info {
	uint64_t id;
	const char *name; /* valid for the txn */
	size_t name_len;
	unsigned attrs;   /* enum store_mbox_attr */
	unsigned special; /* enum store_special */
};

/* Creates name for user, creating missing parents (as ordinary mailboxes); special may be 0.
   Errors: STORE_ENOUSER, STORE_EEXIST (name exists and is selectable; a \Noselect one becomes
   selectable again), STORE_EINVAL (empty, empty level, leading/trailing '/'), STORE_ELIMIT
   (more than STORE_MAX_MBOX_NAME bytes). */
int store_mbox_create(struct store_txn *t, uint64_t user, const char *name, unsigned special,
		      uint64_t *id_r);
/* Resolves a name. Errors: STORE_ENOMBOX (absent or \Noselect). */
int store_mbox_find(struct store_txn *t, uint64_t user, const char *name, uint64_t *id_r);
/* As store_mbox_find, \Noselect mailboxes too (their annotations, RFC 5464 3). */
int store_mbox_find_any(struct store_txn *t, uint64_t user, const char *name, uint64_t *id_r);
/* Deletes a mailbox and its messages. With children it stays as \Noselect (RFC 3501).
   Errors: STORE_ENOMBOX, STORE_ENOTSUP (INBOX; or \Noselect already and has children). */
int store_mbox_delete(struct store_txn *t, uint64_t user, const char *name);
/* Renames from and its children to to, creating to's parents. Renaming INBOX moves its
   messages into a new mailbox `to` and leaves INBOX empty (RFC 3501). Errors: STORE_ENOMBOX,
   STORE_EEXIST (to exists), STORE_EINVAL (bad name, to inside from), STORE_ELIMIT (to, or a
   child's new name, past STORE_MAX_MBOX_NAME). */
int store_mbox_rename(struct store_txn *t, uint64_t user, const char *from, const char *to);
/* Checks the user's mailboxes as the txn sees them (call it after a create or rename in the
   same write txn, whose error then undoes it): at most max_count mailbox records (\Noselect
   parents included) and names of at most max_depth levels ("a/b/c" has 3); 0 is no limit.
   Reads every name of the user (keys only). Errors: STORE_ELIMIT (*which_r, may be NULL:
   "mailboxes" or "depth"), STORE_EIO. */
int store_mbox_limit(struct store_txn *t, uint64_t user, uint64_t max_count, unsigned max_depth,
		     const char **which_r);
/* Subscriptions are names (they may outlive their mailbox). Errors: STORE_EINVAL,
   STORE_ELIMIT (past STORE_MAX_MBOX_NAME). */
int store_mbox_subscribe(struct store_txn *t, uint64_t user, const char *name, bool on);
/* Sets the special-use mask. Errors: STORE_ENOMBOX. */
int store_mbox_set_special(struct store_txn *t, uint64_t mbox, unsigned special);
/* Restoring an export (mailctl import): sets the UIDVALIDITY (0 keeps it) and raises UIDNEXT
   to uidnext (0, or one not above it, keeps it), so the next append gets that UID. The
   UIDVALIDITY changes only while the mailbox never held a message (UIDNEXT 1); the
   partition's last UIDVALIDITY is raised to it, so a mailbox made later gets a larger one.
   Errors: STORE_ENOMBOX, STORE_EEXIST (a used mailbox's UIDVALIDITY), STORE_EINVAL (read txn,
   uidnext UINT32_MAX). */
int store_mbox_restore_uids(struct store_txn *t, uint64_t mbox, uint32_t uidvalidity,
			    uint32_t uidnext);
/* Restoring an export's MODSEQs (mailctl import, user move; CONDSTORE, RFC 7162): raises the
   mailbox's HIGHESTMODSEQ to highestmodseq (never lowers it), and the expunge history
   before it is no longer taken as exact (VANISHED for an earlier modseq then answers from
   the UIDs a client knows) until store_msg_restore_history brings the export's back. Errors: STORE_ENOMBOX, STORE_EINVAL
   (read txn; highestmodseq 0 or UINT64_MAX). */
int store_mbox_restore_modseq(struct store_txn *t, uint64_t mbox, uint64_t highestmodseq);
/* Lists mailboxes whose names match pattern (IMAP LIST: '*' any, '%' any but '/'), in name
   order; subscribed_only lists subscriptions (NONEXISTENT set for those without a mailbox).
   cb's non-zero return stops and is returned. Errors: STORE_ENOUSER. */
int store_mbox_list(struct store_txn *t, uint64_t user, const char *pattern, bool subscribed_only,
		    int (*cb)(const struct store_mbox_info *mi, void *arg), void *arg);
/* Pattern matcher used by store_mbox_list, exported for imapd's LIST-EXTENDED. */
bool store_mbox_match(const char *pattern, const char *name, size_t name_len);
/* Exact counters, read from the mailbox record (no scan). Errors: STORE_ENOMBOX. */
int store_mbox_status(struct store_txn *t, uint64_t mbox, struct store_status *s_r);
/* The mailbox's name, owner and special use. Errors: STORE_ENOMBOX. */
int store_mbox_info(struct store_txn *t, uint64_t mbox, uint64_t *user_r,
		    struct store_mbox_info *mi_r);
/* SELECT (not EXAMINE): *first_recent_r = the first \Recent UID for this session, and the
   mailbox's \Recent set is emptied for later sessions (no change-log record: nothing
   NOTIFY tells). Needs a write txn. Errors: STORE_ENOMBOX. */
int store_mbox_take_recent(struct store_txn *t, uint64_t mbox, uint32_t *first_recent_r);
/* Cheap change test: highest modseq of the mailbox in a fresh snapshot (own read txn), or 0
   and STORE_ENOMBOX. imapd compares it with the view's modseq. */
int store_mbox_modseq(struct store *st, uint64_t mbox, uint64_t *modseq_r);
/* The mailbox's keyword names by index (bit i of store_msg.keywords = names[i]); *n_r set.
   Names are valid for the txn. Errors: STORE_ENOMBOX. */
int store_mbox_keywords(struct store_txn *t, uint64_t mbox, const char *names[STORE_MAX_KEYWORDS],
			unsigned *n_r);
/* Index of a keyword (ASCII case-insensitive), creating it when create (needs a write txn).
   Errors: STORE_ENOMBOX, STORE_ENOMSG (absent and !create), STORE_EKEYWORDS, STORE_EINVAL. */
int store_mbox_keyword(struct store_txn *t, uint64_t mbox, const char *kw, bool create,
		       unsigned *idx_r);

/* ------------------------------------------------------------------------------------- */
/* Annotations (IMAP METADATA, RFC 5464; store_annot.c). An owner is a mailbox id (mailbox
   entries) or a user id (that user's server entries: the store keeps no server-wide ones).
   An entry is a full name, "/shared/..." or "/private/..." (store_annot_entry_valid), taken
   without regard to ASCII case and kept folded to lower case; a /private entry belongs to
   user, a /shared one to every user of the owner. Values are bytes (NUL allowed). A
   mailbox's entries go with its delete and follow its rename (an INBOX rename copies them:
   INBOX keeps its own, RFC 5464 4.1); a user's go with the user. */

#define STORE_ANNOT_ENTRY_MAX 256 /* bytes of an entry name */

struct store_annot {
	const char *entry; /* folded; not NUL-terminated; valid for the txn */
	size_t entry_len;
	const void *value; /* valid for the txn */
	size_t value_len;
};

/* RFC 5464 3.2: "/shared/x" or "/private/x" (two components or more), ASCII from 0x1a
   without '*' and '%', no "//", no trailing '/'. The calls below also refuse a name longer
   than STORE_ANNOT_ENTRY_MAX (STORE_EINVAL): none can exist. */
bool store_annot_entry_valid(const char *entry, size_t len);
/* One entry's value (valid for the txn). Errors: STORE_ENOMSG (no such entry),
   STORE_EINVAL (not a valid entry name). */
int store_annot_get(struct store_txn *t, uint64_t owner, uint64_t user, const char *entry,
		    size_t len, const void **value_r, size_t *vlen_r);
/* Sets (value NULL: removes) one entry. A new entry is refused when owner has max_entries
   already (0: no limit), counting every user's. Checks before it writes: an error leaves
   the txn as it was. Errors: STORE_ELIMIT (max_entries), STORE_EINVAL (name, read txn). */
int store_annot_set(struct store_txn *t, uint64_t owner, uint64_t user, const char *entry,
		    size_t len, const void *value, size_t vlen, uint32_t max_entries);
/* Calls cb for every entry of owner that user sees (user's /private ones, then the /shared
   ones: name order), as store_annot_list; cb's non-zero stops and is returned. */
int store_annot_all(struct store_txn *t, uint64_t owner, uint64_t user,
		    int (*cb)(const struct store_annot *a, void *arg), void *arg);
/* Calls cb for entry itself and the entries below it up to depth levels (0: the entry only,
   1: its children too, UINT_MAX: all), of the same scope, in name order; cb's non-zero stops
   and is returned. Errors: STORE_EINVAL (name). */
int store_annot_list(struct store_txn *t, uint64_t owner, uint64_t user, const char *entry,
		     size_t len, unsigned depth, int (*cb)(const struct store_annot *a, void *arg),
		     void *arg);

/* ------------------------------------------------------------------------------------- */
/* Access control lists (IMAP ACL, RFC 4314; store_acl.c). A mailbox's list maps identifiers
   (a user name, "anyone", "authenticated", or one of them with a leading '-' for negative
   rights) to rights; the mailbox's owner is never in it and always holds every right. A
   user's rights on another user's mailbox are the union of their own, anyone's and
   authenticated's (every user who reaches a mailbox has logged in: the two groups hold the
   same users), less the union of the negative rows naming them (store_acl_rights). Rows go with their mailbox's delete and follow its rename
   (the id stays; an INBOX rename leaves the new INBOX without any). */

/* bit i: the right STORE_ACL_RIGHTS[i]; the obsolete c and d (RFC 4314 2.1.1) are k+x and
   t+e, read by store_acl_parse and written by store_acl_format */
#define STORE_ACL_RIGHTS "lrswipkxtea"
#define STORE_ACL_LOOKUP (1u << 0)
#define STORE_ACL_READ (1u << 1)
#define STORE_ACL_SEEN (1u << 2)
#define STORE_ACL_WRITE (1u << 3)
#define STORE_ACL_INSERT (1u << 4)
#define STORE_ACL_POST (1u << 5)
#define STORE_ACL_CREATE (1u << 6)      /* k */
#define STORE_ACL_DELETE_MBOX (1u << 7) /* x */
#define STORE_ACL_DELETE_MSG (1u << 8)  /* t */
#define STORE_ACL_EXPUNGE (1u << 9)     /* e */
#define STORE_ACL_ADMIN (1u << 10)      /* a */
#define STORE_ACL_ALL ((1u << 11) - 1)
#define STORE_ACL_TEXT_MAX 16 /* store_acl_format's output with its NUL */
/* bytes of an identifier, '-' included: a row's key is the mailbox id (8) and the identifier,
   and LMDB's keys are at most 511 bytes; a user name longer than this (or than one less, for
   its negative) cannot be named in a list, SETACL refuses it with NO [LIMIT] */
#define STORE_ACL_ID_MAX 503
#define STORE_ACL_MAX 128 /* identifiers in one mailbox's list */

/* A name that can be an identifier: 1..STORE_ACL_ID_MAX bytes, no control character, space
   or DEL; a leading '-' (negative rights) followed by at least one byte. */
bool store_acl_id_valid(const char *id, size_t len);
/* Whether a valid identifier (store_acl_id_valid) may be given rights: "anyone",
   "authenticated", or a user of this store (any partition), each alone or after a '-'.
   0, or STORE_ENOUSER (nobody of that name: SETACL refuses it), or a store error. */
int store_acl_id_known(struct store *st, const char *id, size_t len);
/* The rights the letters of s name (no '+' or '-' modifier): 0, or -1 for a letter that is
   no right (c and d are read as k+x and t+e). */
int store_acl_parse(const char *s, size_t len, uint32_t *rights_r);
/* A SETACL rights argument: an optional '+' (add) or '-' (take away) into *mod_r (else 0:
   replace), then letters as store_acl_parse. 0, or -1 for a letter that is no right. */
int store_acl_parse_change(const char *s, size_t len, char *mod_r, uint32_t *rights_r);
/* What an identifier holding had holds after the change mod (as store_acl_parse_change
   gives it) with rights. */
uint32_t store_acl_apply(uint32_t had, char mod, uint32_t rights);
/* rights as letters into out (NUL-terminated), c when k and x are both there, d when t and e
   are; returns the length. */
size_t store_acl_format(uint32_t rights, char out[STORE_ACL_TEXT_MAX]);
/* The rights stored for id on mbox. Errors: STORE_ENOMSG (no row). */
int store_acl_get(struct store_txn *t, uint64_t mbox, const char *id, size_t len,
		  uint32_t *rights_r);
/* Sets id's rights on mbox (0 removes its row). Checks before it writes: an error leaves
   the txn as it was. Errors: STORE_ENOMBOX (no such mailbox, or \Noselect), STORE_ELIMIT
   (a new identifier past STORE_ACL_MAX), STORE_EINVAL (identifier, rights, read txn). */
int store_acl_set(struct store_txn *t, uint64_t mbox, const char *id, size_t len, uint32_t rights);
/* Sets on mailbox to every row of mailbox from (a new mailbox inheriting its parent's list,
   RFC 4314 4). Errors: those of store_acl_set. */
int store_acl_copy(struct store_txn *t, uint64_t from, uint64_t to);
/* Calls cb for each row of mbox in identifier byte order; cb's non-zero stops and is
   returned. id is not NUL-terminated and is valid for the txn. */
int store_acl_list(struct store_txn *t, uint64_t mbox,
		   int (*cb)(const char *id, size_t len, uint32_t rights, void *arg), void *arg);
/* The rights user (not the owner) holds on mbox by the list: 0 when none. */
int store_acl_rights(struct store_txn *t, uint64_t mbox, const char *user, uint32_t *rights_r);
/* A mailbox shared with a user: its id, its owner's user id and name, its name in the
   owner's namespace (valid during the callback) and the user's rights on it. */
struct store_acl_shared {
	uint64_t mbox, owner;
	const char *owner_name, *name;
	size_t name_len;
	uint32_t rights;
};
/* Calls cb for each selectable mailbox of t's partition, in id order, that is not user's and
   whose list gives user every right of want (store_acl_rights: rows naming user or anyone);
   cb's non-zero stops and is returned. Reads every row naming user or anyone. */
int store_acl_shared(struct store_txn *t, const char *user, uint32_t want,
		     int (*cb)(const struct store_acl_shared *sh, void *arg), void *arg);
/* Deletes every row of t's partition naming user ("user" or "-user"), so that a later user
   of the name inherits nothing; *n_r (may be NULL) counts them. store_user_delete does it
   in the user's partition, in its txn. Needs a write txn. Errors: STORE_EINVAL, STORE_EIO. */
int store_acl_drop_id(struct store_txn *t, const char *user, uint64_t *n_r);
/* After store_user_delete: in every partition where no user has the name, the rows naming
   it go (one store_write each; rows on others' mailboxes live in the owners' partitions).
   *n_r (may be NULL) counts them. Errors: those of store_write. */
int store_acl_forget(struct store *st, const char *user, uint64_t *n_r);
/* A user renamed from → to: every row of t's partition naming from ("from", "-from") names
   to instead (replacing a row naming to on the same mailbox: the grant moves); on the
   mailboxes of owner (the renamed user's id; 0: none in this partition) the rows naming
   from or to go, since the owner is never a row. *n_r (may be NULL) counts the rows moved.
   store_user_rename does it in the user's partition, in its txn. Needs a write txn. Errors:
   STORE_EINVAL (read txn; to too long to be an identifier, STORE_ACL_ID_MAX), STORE_EIO. */
int store_acl_rename_id(struct store_txn *t, const char *from, const char *to, uint64_t owner,
			uint64_t *n_r);
/* Before store_user_rename: in every partition but the user's (where a user from lives),
   store_acl_rename_id (one store_write each: rows on others' mailboxes live in the owners'
   partitions). Run again after a failure, it carries what is left. *n_r (may be NULL)
   counts the rows moved. Errors: those of store_write and store_acl_rename_id. */
int store_acl_carry(struct store *st, const char *from, const char *to, uint64_t *n_r);

/* ------------------------------------------------------------------------------------- */
/* Blobs: immutable message files. A blob writer computes the message cache (msgcache.h) as
   the bytes go by, so a message is read once. */

struct store_blob; /* a message file being written, then durable, until referenced */

/* Starts a message file in partition part's blobs/ (tmp name); part STORE_QUEUE_PART for the
   queue. A blob may be referenced from any partition: it is hard-linked where needed.
   Errors: STORE_EINVAL (part), STORE_ENOSPC, STORE_EIO. */
int store_blob_new(struct store *st, unsigned part, struct store_blob **b_r);
/* Appends bytes (the message as stored: CRLF line ends). Errors: STORE_ENOSPC, STORE_EIO;
   after an error the blob can only be freed. */
int store_blob_write(struct store_blob *b, const void *data, size_t len);
/* Opens the file of a blob still being written (not finished) for reading what was written
   so far (a milter reads the message before it is kept): *fd_r, O_RDONLY, caller closes.
   Errors: STORE_EINVAL (finished or failed), STORE_EIO. */
int store_blob_reader(const struct store_blob *b, int *fd_r);
/* fsync, rename to its final name. After 0 the blob can be referenced by deliveries/appends
   (store_deliver, store_msg_append, store_queue_add, the batch calls); its directory is
   fsynced before the first index commit that references it (once per directory for a whole
   batch), so the rename is durable before any acknowledgement. Errors: STORE_ENOSPC,
   STORE_EIO. */
int store_blob_finish(struct store_blob *b);
/* As store_blob_finish, but without the fsync: the file stays open and the commit that first
   references the blob makes it durable before the index commit (a batch or group commit
   writes back all its deferred blobs together, then fsyncs each and one fsync per directory,
   or, with group_commit_syncfs and 2 or more at once, one syncfs of their filesystem
   covering files and directories),
   so producers do not wait for a fsync of their own and a batch costs about one journal
   flush for all its files. Use it with the batch / group commit calls; an error of
   that later fsync is the operation's result (STORE_EIO, STORE_ENOSPC). At most 256 blobs
   are deferred at once per process (beyond, this fsyncs at once like store_blob_finish). */
int store_blob_finish_deferred(struct store_blob *b);
/* Writes a whole file (fd read from its current offset to EOF) as a durable blob:
   new + write + finish. Errors: as those, and STORE_EIO on a read error. */
int store_blob_from_fd(struct store *st, unsigned part, int fd, struct store_blob **b_r);
/* Replaces the first skip bytes of an unfinished blob by head (hlen bytes): a new file in
   the same partition gets head, then the old file's bytes from offset skip; the old one is
   dropped and *bp becomes the new one (mtad adds header fields above a message that went to
   the file before they were known). On error *bp is left as it was. Errors: STORE_EINVAL
   (finished, or skip past the end), those of store_blob_new and store_blob_write,
   STORE_EIO on a read error. */
int store_blob_replace_head(struct store_blob **bp, const void *head, size_t hlen, uint64_t skip);
uint64_t store_blob_id(const struct store_blob *b);
uint64_t store_blob_size(const struct store_blob *b);
/* Frees the writer; a blob never referenced by a committed txn is unlinked (so an aborted
   delivery leaves nothing); *bp = NULL; safe on NULL. Free only after the commit. */
void store_blob_free(struct store_blob **bp);

/* Opens a message for reading: *fd_r (O_RDONLY|O_CLOEXEC, caller closes) and its size: its
   file, or for a body kept in the index (format 3, store_opts.inline_max) a memfd holding
   it decoded (read, pread and mmap work on both). Errors: STORE_ENOMSG (neither: run
   verify), STORE_ECORRUPT (an inline body that does not decode), STORE_EIO. */
int store_blob_open(struct store *st, unsigned part, uint64_t blob, int *fd_r, uint64_t *size_r);
/* Opens a finished blob (referenced or not yet) for reading, as store_blob_open: a body
   kept in memory for the index (up to store_opts.inline_max bytes) comes as a memfd. */
int store_blob_open_blob(const struct store_blob *b, int *fd_r, uint64_t *size_r);
/* The body of blob is kept in partition part's index (no file): backup does not look for
   its file. */
bool store_blob_inline(struct store *st, unsigned part, uint64_t blob);

/* ------------------------------------------------------------------------------------- */
/* Messages */

enum store_flag { /* system flags, a bitmask */
		  STORE_SEEN = 1u << 0,
		  STORE_ANSWERED = 1u << 1,
		  STORE_FLAGGED = 1u << 2,
		  STORE_DELETED = 1u << 3,
		  STORE_DRAFT = 1u << 4,
		  STORE_FLAGS_ALL = 0x1f,
};

struct store_msg {
	uint32_t uid;
	uint64_t modseq;
	uint64_t blob;
	int64_t internaldate; /* Unix time */
	int64_t savedate;     /* when it came into this mailbox (append, delivery, copy,
				       move: RFC 8514); a row from before save dates were kept
				       gives its internaldate */
	uint64_t size;        /* RFC822.SIZE */
	unsigned flags;       /* enum store_flag */
	uint64_t keywords;    /* bit i = store_mbox_keywords()[i] */
	const void *cache;    /* msgcache blob (msgcache_parse); valid for the txn */
	size_t cache_len;     /* 0 when the message has no cache (verify rebuilds it) */
};

/* Appends a durable blob to mailbox mbox (t's partition; the blob is hard-linked there if it
   was written elsewhere) with flags, keywords and internaldate (0 = now); bumps uidnext,
   counters, highestmodseq and the owner's usage. Errors: STORE_ENOMBOX, STORE_EQUOTA,
   STORE_EINVAL (blob not finished, a keyword bit the mailbox has no name for). */
int store_msg_append(struct store_txn *t, uint64_t mbox, const struct store_blob *b,
		     unsigned flags, uint64_t keywords, int64_t internaldate, uint32_t *uid_r);
/* One message by UID. Errors: STORE_ENOMBOX, STORE_ENOMSG. */
int store_msg_get(struct store_txn *t, uint64_t mbox, uint32_t uid, struct store_msg *m_r);

/* Restoring an export (mailctl import, user move) into a mailbox no session has seen, in
   the txn that appended the message: its MODSEQ becomes modseq (lower or higher than the
   one its append gave), and the mailbox's HIGHESTMODSEQ is raised to it when below. When
   the message holds the mailbox's last change (its MODSEQ is HIGHESTMODSEQ: just
   appended), that change is taken back: HIGHESTMODSEQ goes to what it was before (or to
   modseq when higher), so a whole import ends where the export's counter was. Errors: STORE_ENOMBOX, STORE_ENOMSG,
   STORE_EINVAL (read txn; modseq 0 or UINT64_MAX). */
int store_msg_restore_modseq(struct store_txn *t, uint64_t mbox, uint32_t uid, uint64_t modseq);

struct store_iter;
/* Iterates messages with lo <= uid <= hi in UID order (hi = UINT32_MAX for '*'), skipping
   those with modseq <= changedsince (0 = none skipped). Errors: STORE_ENOMBOX. */
int store_msg_iter(struct store_txn *t, uint64_t mbox, uint32_t lo, uint32_t hi,
		   uint64_t changedsince, struct store_iter **it_r);
/* STORE_ITER_MSG (1) and *m_r, 0 at the end, or an error. Test `== STORE_ITER_MSG` (or
   `== 1`) for a message: the errors it can return (STORE_EIO, STORE_ENOSPC, STORE_EAGAIN,
   STORE_ECORRUPT) are all > 1, never STORE_EINVAL, whose value is also 1. */
#define STORE_ITER_MSG 1
int store_iter_next(struct store_iter *it, struct store_msg *m_r);
void store_iter_free(struct store_iter **itp);

enum store_flag_op { STORE_FLAGS_SET, STORE_FLAGS_ADD, STORE_FLAGS_REMOVE };

/* Changes flags/keywords of one message. Only a real change bumps the message's modseq
   (new highestmodseq) and the counters. With unchangedsince != 0 and the message's modseq >
   unchangedsince, nothing changes and STORE_ELOCKED is returned (CONDSTORE [MODIFIED]).
   *m_r (may be NULL) gets the message after the change. Errors: STORE_ENOMBOX, STORE_ENOMSG,
   STORE_ELOCKED, STORE_EINVAL (a keyword bit without a name: see store_mbox_keyword). */
int store_msg_flags(struct store_txn *t, uint64_t mbox, uint32_t uid, enum store_flag_op op,
		    unsigned flags, uint64_t keywords, uint64_t unchangedsince,
		    struct store_msg *m_r);
/* Expunges the given UIDs (uids == NULL: every \Deleted message; absent UIDs are skipped).
   Sets *out to a new array of the expunged UIDs (xreallocarray'd: free it) unless out is
   NULL, and *n_out (may be NULL) to their number either way; records
   (uid, modseq) in the expunge history, drops blob references (files unlinked after the
   commit when no reference is left). Errors: STORE_ENOMBOX. */
int store_msg_expunge(struct store_txn *t, uint64_t mbox, const uint32_t *uids, size_t n,
		      uint32_t **out, size_t *n_out);
/* Copies messages (uids, in that order) to dst in the same partition, without copying
   bodies; flags and keywords kept (keywords re-indexed for dst), internaldate kept, savedate
   now (RFC 8514). Appends
   the new UIDs to *dst_uids (xreallocarray'd; set in the order of src UIDs copied; absent
   src UIDs are skipped, their src uid not reported in *src_done). move: the source messages
   are then expunged (RFC 6851). The copies are charged to dst's owner. Errors:
   STORE_ENOMBOX, STORE_EQUOTA (a copy, or a move into another user's mailbox; a move
   between one user's mailboxes does not change usage), STORE_EKEYWORDS. */
int store_msg_copy(struct store_txn *t, uint64_t src, uint64_t dst, const uint32_t *uids, size_t n,
		   bool move, uint32_t **src_done, uint32_t **dst_uids, size_t *n_r);
/* store_msg_copy keeping only the flags in keep_flags (enum store_flag) and, when
   keep_keywords is false, no keyword (none is made in dst): a copy into a mailbox whose
   rights let the client set some flags only (RFC 4314 4). */
int store_msg_copy_keep(struct store_txn *t, uint64_t src, uint64_t dst, const uint32_t *uids,
			size_t n, bool move, unsigned keep_flags, bool keep_keywords,
			uint32_t **src_done, uint32_t **dst_uids, size_t *n_r);
/* The expunge history of a mailbox (an export of it): cb for each entry in MODSEQ order,
   with its UID, MODSEQ and the time of the expunge; cb's non-zero return stops and is
   returned. The floor is store_status.expunge_floor. Errors: STORE_ENOMBOX. */
int store_msg_history(struct store_txn *t, uint64_t mbox,
		      int (*cb)(uint32_t uid, uint64_t modseq, int64_t when, void *arg),
		      void *arg);
/* Restoring an export (mailctl import, after store_mbox_restore_modseq): records an expunge of
   uid at modseq and time when, and lowers the history floor to floor (when the mailbox's is
   higher: the export's history is exact from there); uid and modseq 0: the floor alone.
   Errors: STORE_ENOMBOX, STORE_EINVAL (read txn; modseq 0 or above HIGHESTMODSEQ, floor 0,
   uid 0 or not below UIDNEXT, or a message that exists with that UID). */
int store_msg_restore_history(struct store_txn *t, uint64_t mbox, uint64_t floor, uint32_t uid,
			      uint64_t modseq, int64_t when);
/* QRESYNC: UIDs expunged with modseq > since, in UID order (xreallocarray'd into *out).
   *exact_r = false when since < the history floor (then the caller must fall back to a
   UID-set comparison, RFC 7162 3.2.5.2). Errors: STORE_ENOMBOX. */
int store_msg_vanished(struct store_txn *t, uint64_t mbox, uint64_t since, uint32_t **out,
		       size_t *n_r, bool *exact_r);

/* Private \Seen (store_seen.c): a mailbox read by a user other than its owner (a viewer, who
   reaches it through an ACL grant) keeps the viewer's \Seen apart, per (mailbox, uid,
   viewer); the message record's \Seen is the owner's. No row: not seen by the viewer. Any
   user name is a viewer's (1..STORE_SEEN_VIEWER_MAX bytes, store_seen_viewer_ok; one past
   255 bytes is keyed by its SHA-256, store_seen.c). Rows go with their message's expunge,
   their mailbox's delete and their viewer's delete, and follow a renamed viewer. */
#define STORE_SEEN_VIEWER_MAX STORE_MAX_NAME
struct store_seen {
	uint32_t uid;
	bool seen;
	uint64_t modseq; /* of the viewer's last change (0: none) */
};
bool store_seen_viewer_ok(const char *viewer);
/* The viewer's row for uid: 0, or STORE_ENOMSG with *s_r not seen, modseq 0. */
int store_seen_get(struct store_txn *t, uint64_t mbox, const char *viewer, uint32_t uid,
		   struct store_seen *s_r);
/* m as viewer sees it: STORE_SEEN from s, MODSEQ the higher of the message's and s's. */
void store_seen_overlay(struct store_msg *m, const struct store_seen *s);
/* store_seen_get then store_seen_overlay on *m (m->uid's row). */
int store_seen_apply(struct store_txn *t, uint64_t mbox, const char *viewer, struct store_msg *m);
/* Sets viewer's \Seen of uid. A real change takes the mailbox's next MODSEQ (HIGHESTMODSEQ
   moves; the message row does not change). unchangedsince as store_msg_flags, against the
   MODSEQ the viewer sees. *m_r (may be NULL): the message as the viewer sees it after.
   Errors: STORE_ENOMBOX, STORE_ENOMSG, STORE_ELOCKED, STORE_EINVAL (read txn, viewer). */
int store_seen_set(struct store_txn *t, uint64_t mbox, const char *viewer, uint32_t uid, bool seen,
		   uint64_t unchangedsince, struct store_msg *m_r);
/* The MODSEQ of viewer's last change in mbox (0: none). */
int store_seen_highest(struct store_txn *t, uint64_t mbox, const char *viewer, uint64_t *modseq_r);
/* store_msg_flags as viewer: \Seen in viewer's row (store_seen_set), the other flags and
   the keywords in the message (FLAGS_SET replaces them and keeps the owner's \Seen);
   unchangedsince and *m_r as viewer sees the message. Errors: those of store_msg_flags and
   store_seen_set. */
int store_seen_flags(struct store_txn *t, uint64_t mbox, const char *viewer, uint32_t uid,
		     enum store_flag_op op, unsigned flags, uint64_t keywords,
		     uint64_t unchangedsince, struct store_msg *m_r);
/* Calls cb for each of viewer's rows of mbox with uid >= lo and modseq > changedsince, in
   UID order (rows of messages expunged by a binary that knew no such rows may be among
   them); cb's non-zero return stops and is returned. */
int store_seen_list(struct store_txn *t, uint64_t mbox, const char *viewer, uint32_t lo,
		    uint64_t changedsince, int (*cb)(const struct store_seen *s, void *arg),
		    void *arg);
/* store_mbox_status with unseen counted for viewer. Errors: STORE_ENOMBOX. */
int store_seen_status(struct store_txn *t, uint64_t mbox, const char *viewer,
		      struct store_status *st);
/* A user deleted (to NULL) or renamed: their rows of t's partition go or name to.
   store_user_delete/rename do the user's partition, store_acl_forget/carry the others.
   Needs a write txn. */
int store_seen_rename_viewer(struct store_txn *t, const char *from, const char *to);
int store_seen_drop_viewer(struct store_txn *t, const char *viewer);

/* ------------------------------------------------------------------------------------- */
/* Full-text index (store_fts.c). With store_opts.fts every message a mailbox gets (delivery,
   append, copy, move, bulk import) is indexed in the same txn: the byte trigrams of its
   searchable text (common/mimetext.h: header fields, text parts decoded to UTF-8,
   case-folded). A mailbox that had messages before its index began (a store from before the
   index, or a time with fts off) is not complete until store_fts_rebuild. */

/* The messages of mbox that may contain needle (folded with mimetext_fold): *uids_r (sorted,
   malloc'd; may name expunged messages: intersect with the messages searched) and *n_r. Every
   other message surely does not contain it. Errors: STORE_ENOTSUP (the index cannot narrow
   it: needle shorter than 3 bytes, or the mailbox is not completely indexed: read every
   message), STORE_ECORRUPT. */
int store_fts_candidates(struct store_txn *t, uint64_t mbox, const char *needle, size_t len,
			 uint32_t **uids_r, size_t *n_r);

struct store_fts_stats {
	bool indexed;  /* the mailbox has an index */
	bool complete; /* every message of it is indexed (searches use it) */
	bool rebuilding;
	uint64_t messages; /* indexed (expunged ones until their segment is rewritten) */
	uint64_t pending;  /* messages not in a segment yet */
	uint64_t segments, trigrams, dead;
	uint64_t bytes; /* keys and values */
};
int store_fts_stats(struct store_txn *t, uint64_t mbox, struct store_fts_stats *s_r);
/* Indexes mbox again from its message files, in bounded transactions of its own (so the
   daemons' writes go on meanwhile; messages they add are indexed as usual); the mailbox is
   complete afterwards. *messages_r: how many were read. Errors: STORE_ENOTSUP (fts off),
   STORE_ENOMBOX, those of store_write. */
int store_fts_rebuild(struct store *st, uint64_t mbox, uint64_t *messages_r);

/* ------------------------------------------------------------------------------------- */
/* Delivery: one message to many mailboxes of many users, stored once per partition. */

struct store_rcpt {
	const char *user;     /* in: user name */
	const char *mailbox;  /* in: NULL = INBOX; missing mailbox -> INBOX */
	unsigned special;     /* in: 0, or one enum store_special: the user's mailbox of
					that use (the first by name; none: one is made, named
					mailbox, with that use), before mailbox */
	unsigned flags;       /* in: initial flags (usually 0) */
	const char *drop_key; /* in: NULL, or (the batch calls) a record (store_drop.c)
				 written in the txn of this recipient's partition when every
				 recipient of the delivery in it is delivered: mtad's queue
				 runner names the queue entry and recipient it delivers */
	int result;           /* out: 0 or a store_err (ENOUSER, EQUOTA, temporary) */
	uint64_t mbox;        /* out: mailbox id */
	uint32_t uid;         /* out */
};

/* Delivers the spooled message in fd (read from offset 0 to EOF, once) to every recipient:
   the blob is written in the first recipient's partition, hard-linked into the others, and
   each partition commits one txn. Per-recipient results are in rcpts[i].result; the return
   is 0 if at least one recipient was delivered, or the error of the first (all failed).
   A recipient repeated (same user and mailbox; NULL and INBOX are one) is delivered once and
   the repeat gets the same result, mailbox and UID (so do the batch and group commit
   deliveries).
   internaldate 0 = now. Acknowledge recipient i only when rcpts[i].result == 0. Errors (per
   recipient): STORE_ENOUSER, STORE_EQUOTA, STORE_ENOSPC, STORE_EFULL, STORE_EIO. */
int store_deliver(struct store *st, int fd, int64_t internaldate, struct store_rcpt *rcpts,
		  size_t n);

/* ------------------------------------------------------------------------------------- */
/* Group commit. A batch holds writes (a function on a partition), deliveries and queue
   additions; commit runs them all in one write txn per partition touched, so one index
   fsync covers them. */

struct store_batch;
/* Called once per operation after its partition's commit (result 0) or failure. */
typedef void store_done_cb(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			   void *arg);

struct store_batch *store_batch_new(struct store *st);
/* Queues a delivery of a durable blob (store_blob_finish done) to recipients. The batch keeps
   pointers to b and rcpts until its callbacks ran; rcpts[].result/mbox/uid are set. The
   callback gets (0 if any recipient succeeded, rcpts, n, 0, arg). */
void store_batch_deliver(struct store_batch *bt, struct store_blob *b, int64_t internaldate,
			 struct store_rcpt *rcpts, size_t n, store_done_cb *cb, void *arg);
struct store_queue_msg;
/* Queues a queue entry (store_queue_add); value = the queue id. qm, its strings and its
   recipients are copied now (the caller may free them at once); b must live until the
   callback. */
void store_batch_enqueue(struct store_batch *bt, const struct store_queue_msg *qm,
			 struct store_blob *b, store_done_cb *cb, void *arg);
/* Queues fn(t, fn_arg), run in the batch's write txn of partition part (STORE_QUEUE_PART:
   the queue's) inside a nested txn:
   when fn returns non-zero (or a write hits a full map) what it wrote is dropped and the
   others' work stays. fn may run again if the partition's txn is redone (it must set its
   outputs afresh), and in another thread than the caller's (the caller's thread waits in
   the commit meanwhile). b (or NULL) is a durable blob fn references: its directory sync
   and partition link are shared with the batch's. The callback's value is 0. */
void store_batch_write(struct store_batch *bt, unsigned part, struct store_blob *b,
		       int (*fn)(struct store_txn *t, void *arg), void *fn_arg, store_done_cb *cb,
		       void *arg);
size_t store_batch_count(const struct store_batch *bt);
/* Commits everything queued (one write txn per partition + one for the queue), calls every
   callback in queue order, and frees the batch (*btp = NULL). Returns the number of
   operations whose result was non-zero. Blocks on the disk: not for an event loop. */
size_t store_batch_commit(struct store_batch **btp);
/* Drops a batch without running it (callbacks are not called); *btp = NULL. */
void store_batch_free(struct store_batch **btp);

/* The group committer: the one write path of a daemon. Every write of an event loop is a
   store_gc_submit (or one of its two typed forms for mtad, store_gc_deliver and
   store_gc_enqueue, which queue into the same batches). A committer thread per handle takes
   what is pending as one batch and runs it (LMDB and every fsync, with the partitions of a
   batch in parallel on a pool of persistent threads), so a loop never waits for the disk
   or for another process's write lock and never fsyncs; what queues while a commit runs is
   the next batch. An idle committer commits a lone operation at once when the previous
   batch held one, else waits up to group_commit_ms for as many operations as the previous
   batch and those queued during it (at most group_commit_max). Results come back through a
   descriptor, as libldap's do: poll store_gc_fd() for reading and call store_gc_dispatch(),
   which runs the callbacks of the finished operations in the caller's thread, in queue
   order. Operations' functions run in the committer's threads: what they read must stay
   allocated and unchanged until their callback. Producers must submit from one thread (the
   loop's); they may write blobs (store_blob_*) meanwhile, but use no other call of the
   handle that writes. Errors reach each callback (see store_batch_*). */
struct store_gc;
/* Starts the committer thread and its pool. Errors: STORE_EIO (no thread or eventfd). */
int store_gc_new(struct store *st, struct store_gc **gc_r);
/* Readable while finished operations wait for store_gc_dispatch (level-triggered: use
   EV_READ|EV_PERSIST). */
int store_gc_fd(const struct store_gc *gc);
/* Runs the callbacks of every finished operation (never blocks). */
void store_gc_dispatch(struct store_gc *gc);
/* Queues fn(t, fn_arg) on partition part, as store_batch_write; cb(result, NULL, 0, 0, arg)
   from store_gc_dispatch once committed (result 0) or failed. */
void store_gc_submit(struct store_gc *gc, unsigned part, struct store_blob *b,
		     int (*fn)(struct store_txn *t, void *arg), void *fn_arg, store_done_cb *cb,
		     void *arg);
/* store_gc_submit for a flag change (or another write a machine crash may lose: the
   \Recent claim). With store_opts.fsync_flags false (the default),
   cb runs once the change is committed, before the index's final sync (the committer's
   next sync, in milliseconds): a killed process loses nothing; a machine crash can lose
   the changes answered since the last index sync, never a message (every other write is
   answered after the sync) and never the index's consistency (LMDB keeps it with
   MDB_NOMETASYNC). With fsync_flags, as store_gc_submit. */
void store_gc_submit_flags(struct store_gc *gc, unsigned part,
			   int (*fn)(struct store_txn *t, void *arg), void *fn_arg,
			   store_done_cb *cb, void *arg);
/* store_batch_deliver and store_batch_enqueue through the committer. */
void store_gc_deliver(struct store_gc *gc, struct store_blob *b, int64_t internaldate,
		      struct store_rcpt *rcpts, size_t n, store_done_cb *cb, void *arg);
void store_gc_enqueue(struct store_gc *gc, const struct store_queue_msg *qm, struct store_blob *b,
		      store_done_cb *cb, void *arg);
/* Waits until nothing is pending or out and runs the callbacks (of what they queue too):
   shutdown, tests, benchmarks; it blocks. */
void store_gc_flush(struct store_gc *gc);
/* Operations committed and commits done so far (bench: ops per commit). */
void store_gc_stats(const struct store_gc *gc, uint64_t *ops_r, uint64_t *commits_r);
/* Flushes, stops the threads, frees; *gcp = NULL. */
void store_gc_free(struct store_gc **gcp);
/* Fuzzing only: from now on every submit commits and syncs its operation in the caller's
   thread before it returns (no hand-off to the committer or the pool); the callbacks still
   run from store_gc_dispatch. Never in the daemons. */
void store_gc_inline(struct store_gc *gc);

/* ------------------------------------------------------------------------------------- */
/* Change notification. One watcher per process serves every session: its fd (inotify on each
   watched partition's `notify` file, touched by every writer after commit) becomes readable
   within a second of a commit by any process. On readable: store_watch_drain(), then for
   each mailbox the process watches compare store_mbox_modseq() with the session's. */

struct store_watch;
/* Errors: STORE_EIO (inotify unavailable: then poll store_mbox_modseq each second). */
int store_watch_new(struct store *st, struct store_watch **w_r);
/* Watches partition part (idempotent; cheap to call for every IDLE). Errors: STORE_EINVAL. */
int store_watch_partition(struct store_watch *w, unsigned part);
/* The fd to poll for reading (EV_READ|EV_PERSIST). */
int store_watch_fd(const struct store_watch *w);
/* Reads pending events without blocking; returns the number of partitions changed and sets
   changed[p] = true for each (changed has store_partitions() entries; may be NULL). */
int store_watch_drain(struct store_watch *w, bool *changed);
void store_watch_free(struct store_watch **wp);

/* The change log: which mailbox a commit changed, so that a session watching many mailboxes
   (IMAP NOTIFY) looks at those only. Every write of a partition appends, in its own txn,
   one record per mailbox record it writes (messages, flags, expunges, counters), per
   mailbox made, dropped or renamed, per subscription and per annotation set; records are
   numbered from 1 in commit order and the last STORE_CHANGES_KEEP of each partition are
   kept (older ones go as new ones come: bounded). */
#define STORE_CHANGES_KEEP 4096

enum store_change_kind {
	STORE_CHANGE_MSGS = 1,  /* the mailbox record: messages, flags, expunges, counters */
	STORE_CHANGE_CREATE,    /* name made (or a \Noselect one made selectable) */
	STORE_CHANGE_DELETE,    /* name dropped (or left \Noselect for its children) */
	STORE_CHANGE_RENAME,    /* old became name (each child too, in its own record) */
	STORE_CHANGE_SUBSCRIBE, /* name's subscription set or cleared */
	STORE_CHANGE_ANNOT,     /* entry name of mailbox mbox (0: the user's server entries) */
};

/* What a STORE_CHANGE_MSGS write did (bits). A record written before the log said so reads
   as STORE_WHAT_ALL. */
enum store_change_what {
	STORE_WHAT_NEW = 1u << 0,     /* messages added (append, delivery, copy or move in) */
	STORE_WHAT_EXPUNGE = 1u << 1, /* messages expunged (or moved out) */
	STORE_WHAT_FLAGS = 1u << 2,   /* flags or keywords only */
	STORE_WHAT_META = 1u << 3,    /* anything else: counters, modseq, repairs */
	STORE_WHAT_ALL = 0xf,
};

struct store_change {
	uint64_t seq;
	enum store_change_kind kind;
	unsigned what;       /* STORE_CHANGE_MSGS: enum store_change_what bits */
	uint64_t user, mbox; /* mbox 0 where none (subscriptions, server annotations) */
	const char *name;    /* valid for the txn; not NUL-terminated; may be empty */
	size_t name_len;
	const char *old; /* RENAME: the former name */
	size_t old_len;
};

/* The number of t's partition's last change (0: none yet). */
int store_changes_last(struct store_txn *t, uint64_t *seq_r);
/* Calls cb for each change numbered above after, in order, at most max of them; *last_r is
   the number of the last one given (after when none). *gap_r: records after `after` were
   dropped before they were read (the reader fell more than STORE_CHANGES_KEEP behind).
   cb's non-zero return stops and is returned. */
int store_changes_read(struct store_txn *t, uint64_t after, size_t max,
		       int (*cb)(const struct store_change *ch, void *arg), void *arg,
		       uint64_t *last_r, bool *gap_r);

/* ------------------------------------------------------------------------------------- */
/* Outbound queue (mtad relay). Entries live in `queue/` with their message file. */

enum store_rcpt_state {
	STORE_Q_PENDING = 0, /* not tried yet, or deferred (next_attempt) */
	STORE_Q_DELIVERED,
	STORE_Q_FAILED, /* permanent: bounce */
};

enum store_notify { /* RFC 3461 NOTIFY, a bitmask; 0 = not given */
		    STORE_NOTIFY_NEVER = 1u << 0,
		    STORE_NOTIFY_SUCCESS = 1u << 1,
		    STORE_NOTIFY_FAILURE = 1u << 2,
		    STORE_NOTIFY_DELAY = 1u << 3,
};

enum store_ret { STORE_RET_NONE = 0, STORE_RET_FULL, STORE_RET_HDRS };

struct store_queue_rcpt {
	const char *addr;  /* forward-path, without <> */
	const char *orcpt; /* ORCPT (addr-type;xtext as received), or NULL */
	unsigned notify;   /* enum store_notify */
	enum store_rcpt_state state;
	uint32_t attempts;
	int64_t next_attempt;   /* Unix time; for PENDING */
	const char *last_error; /* last reply/reason, or NULL */
};

struct store_queue_msg {
	uint64_t id;        /* out of add / lease / get */
	const char *sender; /* reverse-path without <> ("" = null sender) */
	const char *envid;  /* ENVID or NULL */
	enum store_ret ret;
	int64_t created; /* Unix time (0 on add = now) */
	uint64_t size;
	uint64_t blob; /* queue/blobs id (store_queue_open) */
	bool held;
	bool requiretls;      /* MAIL FROM ... REQUIRETLS (RFC 8689): relay only over
				      verified TLS to a server offering it */
	int64_t lease_until;  /* a runner holds it until then */
	uint32_t lease_owner; /* which runner (store_queue_lease_as), 0: unknown */
	size_t nrcpt;
	struct store_queue_rcpt *rcpt;
};

/* Adds an entry for a durable blob (best written with part STORE_QUEUE_PART; a blob of a
   partition is hard-linked into queue/); all recipients PENDING and due now (never, while
   qm->held: until store_queue_hold releases it). *id_r (may be
   NULL) gets the id. Errors: STORE_EINVAL (no recipients), STORE_EFULL, STORE_ENOSPC. */
int store_queue_add(struct store *st, const struct store_queue_msg *qm, const struct store_blob *b,
		    uint64_t *id_r);
/* Leases up to max entries due at now (not held, not leased): their lease is set to
   now + lease_s and cb gets each after the commit (pointers valid during cb); *n_r = how many.
   An entry whose lease expires (a crashed runner) is due again. Errors: STORE_EIO. */
int store_queue_lease(struct store *st, int64_t now, int64_t lease_s, size_t max,
		      void (*cb)(const struct store_queue_msg *qm, void *arg), void *arg,
		      size_t *n_r);
/* store_queue_lease, the leases recorded as held by owner (a runner's number, 1 and up; 0
   as store_queue_lease): store_queue_release_owners gives them back when it is known dead. */
int store_queue_lease_as(struct store *st, uint32_t owner, int64_t now, int64_t lease_s,
			 size_t max, void (*cb)(const struct store_queue_msg *qm, void *arg),
			 void *arg, size_t *n_r);
/* Ends every lease held by an owner in [lo, hi] (their runner died: its entries are due
   again at once instead of when the lease expires); *n_r (may be NULL) = how many.
   Errors: STORE_EIO. */
int store_queue_release_owners(struct store *st, uint32_t lo, uint32_t hi, size_t *n_r);
/* Records a recipient outcome (state, next attempt for PENDING, error text) and ends the
   lease when release. Errors: STORE_ENOQUEUE, STORE_EINVAL (index out of range). */
int store_queue_rcpt_set(struct store *st, uint64_t id, size_t idx, enum store_rcpt_state state,
			 int64_t next_attempt, const char *error);
/* The same inside a write txn of the queue (part STORE_QUEUE_PART: a store_gc_submit); an
   entry whose every recipient is then DELIVERED is deleted with its file (a crash before its
   runner would have deleted it leaves nothing behind). */
int store_queue_rcpt_set_txn(struct store_txn *t, uint64_t id, size_t idx,
			     enum store_rcpt_state state, int64_t next_attempt, const char *error);
/* Ends the lease; the entry is due again at the earliest next_attempt of its PENDING
   recipients. When no recipient is PENDING the entry stays (for bounces) until deleted.
   Errors: STORE_ENOQUEUE. */
int store_queue_release_lease(struct store *st, uint64_t id);
/* The queue's writes of a daemon, inside a write txn of the queue (part STORE_QUEUE_PART: the
   function of a store_gc_submit, so that no event loop writes the index); each does what the
   call of the same name without _txn does. */
int store_queue_add_txn(struct store_txn *t, const struct store_queue_msg *qm,
			const struct store_blob *b, uint64_t *id_r);
int store_queue_release_owners_txn(struct store_txn *t, uint32_t lo, uint32_t hi, size_t *n_r);
int store_queue_release_lease_txn(struct store_txn *t, uint64_t id);
int store_queue_delete_txn(struct store_txn *t, uint64_t id);
/* A lease through the group committer: store_queue_lease_new(owner, now, lease_s, max), then
   store_gc_submit(gc, STORE_QUEUE_PART, NULL, store_queue_lease_fn, l, ...); once its
   callback has result 0 the leases are durable and store_queue_lease_msg(l, 0 ..
   store_queue_lease_count(l) - 1) are the entries leased (valid until store_queue_lease_free).
   store_queue_lease_fn may run more than once (a redone txn): each run starts afresh. */
struct store_queue_lease;
struct store_queue_lease *store_queue_lease_new(uint32_t owner, int64_t now, int64_t lease_s,
						size_t max);
int store_queue_lease_fn(struct store_txn *t, void *lease);
size_t store_queue_lease_count(const struct store_queue_lease *l);
const struct store_queue_msg *store_queue_lease_msg(const struct store_queue_lease *l, size_t i);
void store_queue_lease_free(struct store_queue_lease **lp);
/* Whether an entry is due at now (a read txn: no write lock, no fsync), so that a runner
   with nothing to do submits no lease. Errors other than the store's are read as "due". */
bool store_queue_any_due(struct store *st, int64_t now);
/* Reads one entry; the struct's strings are malloc'd: store_queue_msg_clear() frees them.
   Errors: STORE_ENOQUEUE. */
int store_queue_get(struct store *st, uint64_t id, struct store_queue_msg *qm_r);
void store_queue_msg_clear(struct store_queue_msg *qm);
/* Every entry in id order (pointers valid during cb); cb's non-zero stops and is returned. */
int store_queue_list(struct store *st, int (*cb)(const struct store_queue_msg *qm, void *arg),
		     void *arg);
/* hold: never leased until released; release: due now. Errors: STORE_ENOQUEUE. */
int store_queue_hold(struct store *st, uint64_t id, bool hold);
/* Deletes the entry and its file. Errors: STORE_ENOQUEUE. */
int store_queue_delete(struct store *st, uint64_t id);
/* Makes every (id == 0) or one not-held entry due now (resetting next_attempt of PENDING
   recipients; a leased one keeps its lease). Errors: STORE_ENOQUEUE. */
int store_queue_flush(struct store *st, uint64_t id);
/* One action on one entry (id) or on every entry match selects (id 0; match NULL: all), in
   one write txn; *n_r (may be NULL) = how many entries it changed. FLUSH: pending recipients
   due now; REQUEUE: the same with their attempts (and so the backoff) restarted and the
   entry released from hold (the lifetime still counts from its arrival); HOLD, RELEASE,
   DELETE as the calls above. A leased entry keeps its lease (its runner records the
   outcome; no second runner takes it). Errors: STORE_ENOQUEUE (id), STORE_EINVAL. */
enum store_queue_action {
	STORE_QA_FLUSH,
	STORE_QA_HOLD,
	STORE_QA_RELEASE,
	STORE_QA_DELETE,
	STORE_QA_REQUEUE,
};
int store_queue_apply(struct store *st, enum store_queue_action act, uint64_t id,
		      int (*match)(const struct store_queue_msg *qm, void *arg), void *arg,
		      size_t *n_r);
/* The entry's most recent tries (up to 32, oldest first): each recipient outcome recorded
   by store_queue_rcpt_set, with its time and reason. Free with store_queue_tries_free.
   Errors: STORE_ENOQUEUE. */
struct store_queue_try {
	size_t rcpt;  /* index into the entry's recipients */
	int64_t when; /* Unix time */
	enum store_rcpt_state state;
	const char *reason; /* the reply or reason, or NULL */
};
int store_queue_tries(struct store *st, uint64_t id, struct store_queue_try **v_r, size_t *n_r);
void store_queue_tries_free(struct store_queue_try **vp, size_t n);
/* Opens the entry's message file. Errors: STORE_ENOQUEUE, STORE_EIO. */
int store_queue_open(struct store *st, uint64_t id, int *fd_r, uint64_t *size_r);

/* ------------------------------------------------------------------------------------- */
/* Maildrop records (store_drop.c): the files of mtad's maildrop whose message is durable,
   each recorded in the write txn that makes it so (so that the pickup never submits a file
   twice), and dropped after the file is removed: in the queue's txn that adds its entries,
   or in the partition's txn of a delivery to local recipients of one partition (the
   store_rcpt's drop_key). A key is the file's identity as the pickup writes it (name,
   device, inode, mtime): 1 to STORE_DROP_KEY_MAX bytes. */

#define STORE_DROP_KEY_MAX 300

enum store_drop_kind {
	STORE_DROP_QUEUED = 0, /* its message is in the queue (qid: its first entry) */
	STORE_DROP_BOUNCE,     /* refused: qid is its DSN's queue entry (same txn) */
	STORE_DROP_DELIVERED,  /* delivered to its (local) recipients */
	STORE_DROP_REPLY_OWED, /* delivered; a Sieve vacation reply its commit decided on is
				  still to be queued (mtad/deliver_sieve.c); qid: what the
				  caller keeps for that (mtad: the duplicate tests' answers) */
	STORE_DROP_SENT,       /* the queue's: a Sieve redirect's copies or vacation reply
				  are in the queue (qid: the first), added in this txn */
};

struct store_drop {
	const char *key; /* store_drop_list only (valid during cb) */
	unsigned part;   /* the environment it is in (a partition, or STORE_QUEUE_PART) */
	uint64_t qid;
	int64_t when; /* Unix time of the record */
	enum store_drop_kind kind;
};

/* In a write txn of the queue or a partition. Errors: STORE_EINVAL. */
int store_drop_put_txn(struct store_txn *t, const char *key, uint64_t qid,
		       enum store_drop_kind kind);
/* Adds the n queue entries qm[] of blob b (as store_queue_add, their ids into ids_r[]) and
   key's record (qid: the first) in write txn t of the queue. Errors: store_queue_add's. */
int store_drop_enqueue_txn(struct store_txn *t, const struct store_queue_msg *qm, size_t n,
			   const struct store_blob *b, const char *key, enum store_drop_kind kind,
			   uint64_t *ids_r);
/* In t's environment; no record is not an error. Errors: STORE_EINVAL. */
int store_drop_del_txn(struct store_txn *t, const char *key);
/* key's record in t's environment (any txn). Errors: STORE_ENOMSG (none), STORE_EINVAL. */
int store_drop_get_txn(struct store_txn *t, const char *key, struct store_drop *d_r);
/* Looks in the queue, then in each partition (a read txn each). Errors: STORE_ENOMSG (no
   record), STORE_EINVAL. */
int store_drop_get(struct store *st, const char *key, struct store_drop *d_r);
/* At most max records, the queue's then each partition's in key order (a read txn each);
   cb's non-zero stops and is returned. */
int store_drop_list(struct store *st, size_t max, int (*cb)(const struct store_drop *d, void *arg),
		    void *arg);

/* ------------------------------------------------------------------------------------- */
/* Verification and statistics */

struct store_verify_report {
	uint64_t users, mailboxes, messages, blobs, queue;
	uint64_t bad_counters;  /* mailbox/user counters differing from a recount */
	uint64_t bad_refcounts; /* blob refcounts differing from the references */
	uint64_t missing_files; /* referenced blob without its file */
	uint64_t orphan_files;  /* files no record references (tmp leftovers included) */
	uint64_t young_files;   /* unreferenced files younger than a minute: a delivery in
				      progress (or just interrupted); not counted as a problem */
	uint64_t bad_records;   /* records that did not decode */
	uint64_t missing_cache; /* blobs without a message cache */
	uint64_t repaired;
	uint64_t bad_cache;        /* cache entries that do not parse (msgcache_parse) */
	uint64_t moved_lost_found; /* orphan files made messages of lost+found (repair) */
	uint64_t bad_acl;          /* ACL rows of no mailbox (a check of every user), or that
				      do not decode */
	uint64_t bad_seen;         /* private \Seen rows of no mailbox or message (a check of
				      every user), or that do not decode */
};

/* Checks one user (user != NULL) or everything: counters against a recount, refcounts,
   files, caches (present and parsing). repair: fixes counters and refcounts, rebuilds
   missing and unparsable caches from the message file, moves orphan files older than a
   minute (younger ones may belong to a delivery in progress) into the mailbox
   STORE_LOST_FOUND of user lost_found (created with the user when missing; as new messages,
   internaldate = the file's mtime) and only then unlinks them, drops message rows whose
   file is gone (logged: nothing can be read of them). Orphans are looked for only when
   user == NULL. Returns 0 when nothing was wrong (or all was repaired), STORE_ECORRUPT when
   problems remain, or a system error. */
int store_verify_lost_found(struct store *st, const char *user, bool repair,
			    const char *lost_found, struct store_verify_report *r);
#define STORE_LOST_FOUND "lost+found"
/* store_verify_lost_found with lost_found = "postmaster". */
int store_verify(struct store *st, const char *user, bool repair, struct store_verify_report *r);

struct store_stats {
	uint64_t users, mailboxes, messages, bytes;
	uint64_t map_used, map_size; /* LMDB pages in use * page size, current map size */
};
/* Per partition (part < store_partitions) or the queue (STORE_QUEUE_PART: messages =
   entries, bytes = their sizes). Errors: STORE_EINVAL. */
int store_stats(struct store *st, unsigned part, struct store_stats *s_r);
/* Metrics (common/metrics_std.h). publish: the group committer's commits and operations
   and this process's fsyncs into the worker's column (its once-a-second tick; last keeps
   what the previous call saw, zeroed at the worker's start; gc may be NULL). live: appends
   the gauges read at scrape time in Prometheus text: per partition heron_store_index_bytes,
   heron_store_map_bytes, heron_store_users, heron_store_messages; heron_store_map_max_bytes,
   heron_store_disk_bytes, heron_store_disk_free_bytes; with queue also heron_queue_messages,
   heron_queue_scheduled_messages, heron_queue_oldest_age_seconds, heron_queue_index_bytes.
   Each costs one read txn per partition, no scan. */
struct buf;
struct store_metrics_last {
	uint64_t commits, ops, fsyncs;
};
void store_metrics_publish(const struct store *st, const struct store_gc *gc,
			   struct store_metrics_last *last);
void store_metrics_live(struct store *st, bool queue, struct buf *out);

/* Writes a compacted copy of partition part's index (STORE_QUEUE_PART: the queue's) to the
   file path, which must not exist (mdb_env_copy2 with MDB_CP_COMPACT: one read snapshot, so
   the copy is consistent while writers go on; `mailctl backup`). Errors: STORE_EINVAL
   (part), STORE_EEXIST (path exists), STORE_ENOSPC, STORE_EIO. */
int store_copy_index(struct store *st, unsigned part, const char *path);

#endif
