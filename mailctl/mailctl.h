/* mailctl.h — what the files of mailctl share (not a library interface): the invocation
 * state, the command table entry, argument parsing, output (human tables or JSON) and error
 * reporting with the exit codes of docs/mailctl.8 (sysexits.h where one fits). */
#ifndef HERON_MAILCTL_H
#define HERON_MAILCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "store/store.h"

#define MC_OK 0
#define MC_REFUSED 1    /* not found (but a user), exists, quota, verify found problems */
#define MC_USAGE 64     /* EX_USAGE: the command line, a bad argument or query */
#define MC_DATAERR 65   /* EX_DATAERR: an input file or stream that does not parse */
#define MC_NOINPUT 66   /* EX_NOINPUT: a file or directory named cannot be read */
#define MC_NOUSER 67    /* EX_NOUSER: no such user (store or directory) */
#define MC_CANTCREAT 73 /* EX_CANTCREAT: an output file or directory cannot be made */
#define MC_IOERR 74     /* EX_IOERR: a system error while working */
#define MC_TEMPFAIL \
	75           /* EX_TEMPFAIL: try again later (the directory or store is
			  unavailable, busy or full; a daemon's control socket does not answer) */
#define MC_NOPERM 77 /* EX_NOPERM: cannot act as the store's owner */
#define MC_CONFIG 78 /* EX_CONFIG: heron.conf does not load, or points at no store */
#define MC_ERR MC_IOERR

#define MC_MAX_POS 40 /* search queries are words */
#define MC_MAX_OPTS 8

struct conf;
struct mc;

struct mc_opt {
	const char *name; /* without the leading "--" */
	bool has_arg;
};

struct mc_args {
	const char *pos[MC_MAX_POS];
	int npos;
	const char *val[MC_MAX_OPTS]; /* indexed like the command's opts */
	bool set[MC_MAX_OPTS];
};

enum mc_open {
	MC_NOSTORE,       /* the command does not touch the store */
	MC_STORE,         /* the store must exist */
	MC_STORE_NEW,     /* created when missing (user add, import, restore target) */
	MC_STORE_UPGRADE, /* upgrade: the store to itself, brought to this binary's format */
};

struct mc_cmd {
	const char *noun, *verb; /* verb NULL: the noun is the whole command (stats, import) */
	int min_pos, max_pos;    /* positional arguments after the verb */
	enum mc_open open;
	const char *usage; /* after "mailctl NOUN VERB " */
	const char *help;  /* one line */
	int (*run)(struct mc *mc, const struct mc_args *a);
	struct mc_opt opts[MC_MAX_OPTS];
};

struct mc {
	struct conf *conf;
	const char *conf_path;
	struct store *st;
	bool json;
	bool bulk; /* import --bulk: the store opened with store_opts.nosync */
	const struct mc_cmd *cmd;
	bool error_out; /* --json: an error object is on stdout already */
};

/* mailctl.c: errors. Prints "mailctl: WHAT: reason; hint" (and a JSON error object on
   stdout with --json) and returns the exit code for the store error rc. */
int mc_fail(struct mc *mc, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A refusal in mailctl's own words: prints "mailctl: WHAT; hint" (and the JSON error object
   with --json) and returns code, an MC_ exit code. */
int mc_refuse(struct mc *mc, int code, const char *hint, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A usage error for the running command (prints its usage line); returns MC_ERR. */
int mc_usage(struct mc *mc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mc_exit_code(int store_rc);

/* mailctl_out.c: a table of rows with typed cells, printed as aligned columns or JSON. */
struct mc_table;
struct mc_table *mc_table_new(const char *const *cols);
void mc_table_row(struct mc_table *t);
void mc_cell_str(struct mc_table *t, const char *s);
void mc_cell_strn(struct mc_table *t, const char *s, size_t len);
void mc_cell_u64(struct mc_table *t, uint64_t v);
void mc_cell_bool(struct mc_table *t, bool v);
void mc_cell_time(struct mc_table *t, int64_t unix_time); /* ISO 8601 UTC; 0 = null */
void mc_cell_hex(struct mc_table *t, uint64_t v);         /* 16 hex digits, a string */
void mc_cell_null(struct mc_table *t);
/* As columns with a header (or a JSON array of objects); frees the table. */
void mc_table_print(struct mc *mc, struct mc_table **tp);
void mc_table_free(struct mc_table **tp);
/* The first row as "key: value" lines (or one JSON object); frees the table. */
void mc_table_print_record(struct mc *mc, struct mc_table **tp);
/* A JSON string (UTF-8 kept, other bytes as \u00XX) on f. */
void mc_json_str(FILE *f, const char *s, size_t len);
/* The characters of a JSON string without quotes, for streaming: returns the bytes used
   (an incomplete UTF-8 sequence at the end is left for the next call unless final). */
size_t mc_json_chars(FILE *f, const char *s, size_t len, bool final);
/* Copies the file fd to stdout (json: as the characters of a JSON string); -1 on a read
   error (errno). */
int mc_stream_body(int fd, bool json);
/* ISO 8601 UTC text of a Unix time into buf (at least 24 bytes). */
void mc_fmt_time(char *buf, size_t size, int64_t t);
/* Parses "YYYY-MM-DD", "YYYY-MM-DDTHH:MM:SS[Z]" (UTC) or an age like "30d" (now - age). */
int mc_parse_date(const char *s, int64_t *t_r);

/* mailctl_msg.c: helpers shared by the message commands, import and export. */
/* Opens the user's partition in mode and resolves the user (and mailbox when mbox_r). On
   failure prints the error and returns the exit code (the txn is then closed). */
int mc_begin(struct mc *mc, const char *user, const char *mailbox, enum store_txn_mode mode,
	     struct store_txn **t_r, struct store_user *u_r, uint64_t *mbox_r);
/* Resolves mailbox of user in t, creating it (and the user when create_user) if missing.
   Needs a write txn. Errors: those of store_user_get/create and store_mbox_create. */
int mc_mbox_ensure(struct store_txn *t, const char *user, const char *mailbox, bool create_user,
		   uint64_t *mbox_r);
/* Flag names: "\Seen" .. "\Draft" (ASCII case-insensitive). 0 and the bit, or -1. */
int mc_flag_parse(const char *s, unsigned *flag_r);
/* Flags as IMAP text ("\Seen \Flagged kw1") into buf. */
void mc_flags_text(char *buf, size_t size, unsigned flags, uint64_t kws,
		   const char *const *kwnames, unsigned nkw);

/* mailctl_pw.c: a password read (prompted twice on a terminal, else a line of stdin) and
   hashed in scheme (NULL: [directory] password_scheme), *hash_r malloc'd; and the users
   file of backend = file edited in two steps: add prepares it with line added (locked, not
   yet in place; MC_REFUSED when user has a line already), commit puts it in place, abort
   drops it. Each returns an exit code after saying why it failed. */
int mc_pw_read_hash(struct mc *mc, const char *scheme, char **hash_r);
struct users_edit;
int mc_users_edit_add(struct mc *mc, const char *user, const char *line, struct users_edit **e_r);
int mc_users_edit_commit(struct mc *mc, struct users_edit **ep);
void mc_users_edit_abort(struct users_edit **ep);

/* The command handlers, one per noun/verb (table in mailctl.c). */
int mc_user_add(struct mc *, const struct mc_args *);
int mc_pw(struct mc *, const struct mc_args *);
/* mailctl_dkim.c */
int mc_dkim_keygen(struct mc *, const struct mc_args *);
int mc_user_del(struct mc *, const struct mc_args *);
int mc_user_rename(struct mc *, const struct mc_args *);
int mc_user_list(struct mc *, const struct mc_args *);
int mc_user_show(struct mc *, const struct mc_args *);
int mc_quota_get(struct mc *, const struct mc_args *);
int mc_quota_set(struct mc *, const struct mc_args *);
int mc_mbox_list(struct mc *, const struct mc_args *);
int mc_mbox_create(struct mc *, const struct mc_args *);
int mc_mbox_delete(struct mc *, const struct mc_args *);
int mc_mbox_rename(struct mc *, const struct mc_args *);
int mc_mbox_subscribe(struct mc *, const struct mc_args *);
int mc_mbox_unsubscribe(struct mc *, const struct mc_args *);
int mc_mbox_status(struct mc *, const struct mc_args *);
int mc_msg_list(struct mc *, const struct mc_args *);
int mc_msg_show(struct mc *, const struct mc_args *);
int mc_msg_flags(struct mc *, const struct mc_args *);
int mc_msg_delete(struct mc *, const struct mc_args *);
int mc_expunge(struct mc *, const struct mc_args *);
/* mailctl_search.c: IMAP SEARCH queries (imapd's key compiler). */
int mc_search(struct mc *, const struct mc_args *);
int mc_fetch(struct mc *, const struct mc_args *);
int mc_copy(struct mc *, const struct mc_args *);
int mc_move(struct mc *, const struct mc_args *);
int mc_expunge_query(struct mc *, const struct mc_args *);
int mc_import(struct mc *, const struct mc_args *);
/* mailctl_io.c, for user move: a whole user as `export USER DIR` writes it (Maildir++,
   UIDs kept, the Sieve vacation and duplicate memories), and such a DIR imported into user
   (who must exist). Exit codes, after saying what failed. */
int mc_export_user(struct mc *mc, const char *user, const char *dir, uint64_t *count,
		   uint64_t *bytes, size_t *nboxes);
int mc_import_dir(struct mc *mc, const char *user, const char *dir, uint64_t *count_r);
/* mailctl_io.c, for a move's stream: the Maildir DIR into mailbox of user, which is made
   anew (a partial copy deleted first; INBOX must be empty and never used), keeping UIDs,
   MODSEQs, expunge history and annotations; adds to *count_r. The Maildir++ folder of a
   mailbox below dir (malloc'd). */
int mc_import_folder(struct mc *mc, const char *user, const char *mailbox, const char *dir,
		     uint64_t *count_r);
char *mc_folder_path(const char *dir, const char *name);
/* mailctl_sieve.c, for `export USER DIR` / `import USER DIR`: the user's scripts as
   DIR/heron-sieve/NAME.sieve (the source) and the active one's name in
   DIR/heron-sieve-active; the import compiles and stores each (quota and size limits as
   `sieve put`), *n_r of them (n_r may be NULL); check: compiles them only. A missing
   heron-sieve: none. Exit codes. */
int mc_sieve_export(struct mc *mc, const char *user, const char *dir);
int mc_sieve_import(struct mc *mc, const char *user, const char *dir, bool check, unsigned *n_r);
/* mailctl.c: opens mc->st from mc->conf (how: MC_STORE or MC_STORE_NEW); an exit code. */
int mc_open_store(struct mc *mc, enum mc_open how);
/* mailctl_move.c */
int mc_user_move(struct mc *, const struct mc_args *);
/* What a move keeps of user as text (*text_r, malloc'd; see mailctl_move.c), with the
   SHA-256 of each mailbox's part (name: the mailbox) and, last, of the rest (name NULL:
   the server annotations and Sieve scripts). A store error code. */
struct mc_digest {
	char *name;
	char hex[65];
	bool subscribed; /* the source's mailbox (mc_fingerprint) */
	unsigned special;
};
int mc_fingerprint(struct mc *mc, const char *user, char **text_r, struct mc_digest **v_r,
		   size_t *n_r, uint64_t *boxes_r, uint64_t *msgs_r);
void mc_digests_free(struct mc_digest *v, size_t n);
/* The SHA-256 of len bytes at p in lower-case hex; 0 or -1. */
int mc_sha256_hex(const void *p, size_t len, char hex[65]);
/* The user's Sieve vacation and duplicate memories not expired at now, as text (*text_r
   malloc'd). A store error code. */
int mc_memories_text(struct mc *mc, const char *user, int64_t now, char **text_r);
/* Sieve scripts as stored (source and compiled program; both hosts run the same Heron):
   put into user's in t, the active one active; freed with their strings. */
struct mc_script {
	char *name, *src;
	uint8_t *prog;
	size_t src_len, prog_len;
	bool active;
};
int mc_scripts_put(struct store_txn *t, const char *user, const struct mc_script *v, size_t n);
void mc_scripts_free(struct mc_script *v, size_t n);
/* mailctl_stream.c: the heron-move stream between the hosts of a move (user digest, user
   receive on the target; the sender on the source). */
/* The target's digest read from f (CMD's stdout), *t filled (free t->v with
   mc_digests_free); a parse error is MC_DATAERR, said. */
struct mc_target {
	bool present;
	struct mc_digest *v;
	size_t n;
	uint64_t boxes, messages;
	char memories[65]; /* the SHA-256 of its Sieve memories not expired at at */
	int64_t at;
};
int mc_digest_read(struct mc *mc, FILE *f, struct mc_target *t);
/* What the source sends: the mailboxes (their exports in dir, as mc_export_user wrote it),
   the mailboxes to delete there, and the userdata (the export's own files, the Sieve
   scripts from the store, the quota); drop: only that the target's copy is dropped.
   MC_TEMPFAIL (said) when the pipe broke. */
struct mc_stream_box {
	const char *name;
	bool subscribed;
	unsigned special;
};
struct mc_stream_plan {
	bool reset, drop, kept; /* kept: the move is done (--finish), only done follows */
	const char *const *deletes;
	size_t ndeletes;
	const struct mc_stream_box *boxes;
	size_t nboxes;
	uint64_t quota_bytes, quota_msgs;
};
int mc_stream_send(struct mc *mc, FILE *f, const char *user, const char *dir,
		   const struct mc_stream_plan *p);
/* Removes path and everything below it (no error when missing); 0 or errno (nftw). */
int mc_rm_tree(const char *path);
int mc_user_digest(struct mc *, const struct mc_args *);
int mc_user_receive(struct mc *, const struct mc_args *);

/* mailctl_bulk.c: `import --bulk PATH` (the stream format is described there). */
int mc_import_bulk(struct mc *mc, const char *path);
int mc_export(struct mc *, const struct mc_args *);
int mc_queue_list(struct mc *, const struct mc_args *);
int mc_queue_show(struct mc *, const struct mc_args *);
int mc_queue_flush(struct mc *, const struct mc_args *);
int mc_queue_hold(struct mc *, const struct mc_args *);
int mc_queue_release(struct mc *, const struct mc_args *);
int mc_queue_delete(struct mc *, const struct mc_args *);
int mc_queue_requeue(struct mc *, const struct mc_args *);
int mc_verify(struct mc *, const struct mc_args *);
int mc_backup(struct mc *, const struct mc_args *);
int mc_restore(struct mc *, const struct mc_args *);
int mc_stats(struct mc *, const struct mc_args *);
/* mailctl_live.c: through the daemons' control sockets ([control] dir). */
int mc_who(struct mc *, const struct mc_args *);
int mc_kick(struct mc *, const struct mc_args *);
int mc_top(struct mc *, const struct mc_args *);
/* stats --live / top: the option indexes of --interval, --count, --daemon in a. */
int mc_live(struct mc *mc, const struct mc_args *a, int k_interval, int k_count, int k_daemon);
int mc_upgrade(struct mc *, const struct mc_args *);
/* mailctl_acl.c */
int mc_acl_get(struct mc *, const struct mc_args *);
int mc_acl_set(struct mc *, const struct mc_args *);
int mc_acl_delete(struct mc *, const struct mc_args *);

/* mailctl_sieve.c */
int mc_fts_rebuild(struct mc *mc, const struct mc_args *a);
int mc_fts_stats(struct mc *mc, const struct mc_args *a);
int mc_sieve_list(struct mc *mc, const struct mc_args *a);
int mc_sieve_get(struct mc *mc, const struct mc_args *a);
int mc_sieve_put(struct mc *mc, const struct mc_args *a);
int mc_sieve_check(struct mc *mc, const struct mc_args *a);
int mc_sieve_put_all(struct mc *mc, const struct mc_args *a);
int mc_sieve_activate(struct mc *mc, const struct mc_args *a);
int mc_sieve_deactivate(struct mc *mc, const struct mc_args *a);
int mc_sieve_delete(struct mc *mc, const struct mc_args *a);
int mc_sieve_rename(struct mc *mc, const struct mc_args *a);

#endif
