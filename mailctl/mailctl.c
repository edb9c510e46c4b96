/* mailctl.c — owns mailctl's entry point: global options, the noun/verb command table,
 * argument parsing and arity checks, help, error reporting and exit codes. The directory
 * commands (`auth test`, `lookup`) are in mailctl_dir.c; the others in mailctl_user.c,
 * mailctl_msg.c, mailctl_io.c, mailctl_admin.c and the files named in mailctl.h. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "mailctl/mailctl_dir.h"
#include "mailctl/mailctl.h"

#define DEFAULT_CONF DAEMON_CONF_DEFAULT

static int usage_all(FILE *f, int rc);
static int help_noun(const char *noun);
static void print_cmd(FILE *f, const struct mc_cmd *c);

/* One row per command (STYLE 5): arity and options are checked before the handler runs. */
static const struct mc_cmd mc_cmds[] = {
	{ "user",
	  "add",
	  1,
	  1,
	  MC_STORE_NEW,
	  "USER [--partition N] [--quota-bytes SIZE] "
	  "[--quota-messages N] [--password [--address A] [--scheme S]]",
	  "create a user with an INBOX; --password (prompted, or a line of stdin) also writes "
	  "its login into the users file (backend = file)",
	  mc_user_add,
	  { { "partition", true },
	    { "quota-bytes", true },
	    { "quota-messages", true },
	    { "password", false },
	    { "address", true },
	    { "scheme", true } } },
	{ "pw",
	  NULL,
	  0,
	  0,
	  MC_NOSTORE,
	  "[--scheme SSHA|SSHA256|SSHA512|CRYPT|ARGON2|SCRAM-SHA-256]",
	  "print the hash of a password (prompted, or a line of stdin) for userPassword or the "
	  "users file (default: [directory] password_scheme)",
	  mc_pw,
	  { { "scheme", true } } },
	{ "dkim",
	  "keygen",
	  2,
	  2,
	  MC_NOSTORE,
	  "DOMAIN SELECTOR [--type rsa|ed25519] [--bits N] "
	  "[--out FILE]",
	  "make a DKIM signing key (RSA 2048 bits by default; mode 0600, owned by "
	  "[mtad] user; default FILE: dkim/DOMAIN.SELECTOR.key beside heron.conf) and print "
	  "the TXT record to publish",
	  mc_dkim_keygen,
	  { { "type", true }, { "bits", true }, { "out", true } } },
	{ "user",
	  "del",
	  1,
	  1,
	  MC_STORE,
	  "USER",
	  "delete a user with all mailboxes and mail",
	  mc_user_del,
	  { { NULL, false } } },
	{ "user",
	  "rename",
	  2,
	  2,
	  MC_STORE,
	  "OLD NEW",
	  "rename a user (mail stays; the rights given to it follow the name)",
	  mc_user_rename,
	  { { NULL, false } } },
	{ "user",
	  "list",
	  0,
	  1,
	  MC_STORE,
	  "[PATTERN] [--source store|directory|both|all]",
	  "list the users of the store and of the directory, merged (source: store, directory "
	  "or both; PATTERN: * and %)",
	  mc_user_list,
	  { { "source", true } } },
	{ "user",
	  "move",
	  2,
	  2,
	  MC_STORE,
	  "USER HOST --to TARGET.conf|--via CMD [--dir DIR] [--provider URI] "
	  "[--finish|--abort]",
	  "move a user to store host HOST (its store named by TARGET.conf, or reached by CMD "
	  "running mailctl there: a resumable stream): freeze, copy with UIDs, verify, flip the "
	  "directory's mailHost; --finish deletes the source copy once [directory] "
	  "auth_cache_ttl has passed",
	  mc_user_move,
	  { { "to", true },
	    { "dir", true },
	    { "provider", true },
	    { "finish", false },
	    { "abort", false },
	    { "via", true } } },
	{ "user",
	  "digest",
	  1,
	  1,
	  MC_STORE_NEW,
	  "USER [--at UNIXTIME]",
	  "the target's side of `user move --via`: the SHA-256 of each mailbox of USER as the "
	  "move compares them, and of its Sieve memories not expired at --at (the heron-digest "
	  "1 lines of mailctl(8))",
	  mc_user_digest,
	  { { "at", true } } },
	{ "user",
	  "receive",
	  1,
	  1,
	  MC_STORE_NEW,
	  "USER",
	  "the target's side of `user move --via`: a heron-move 1 stream on stdin into USER, "
	  "mailbox by mailbox",
	  mc_user_receive,
	  { { NULL, false } } },
	{ "user",
	  "show",
	  1,
	  1,
	  MC_STORE,
	  "USER",
	  "show a user: usage, quota, mailboxes",
	  mc_user_show,
	  { { NULL, false } } },
	{ "quota",
	  "get",
	  1,
	  1,
	  MC_STORE,
	  "USER",
	  "show usage and limits",
	  mc_quota_get,
	  { { NULL, false } } },
	{ "quota",
	  "set",
	  1,
	  1,
	  MC_STORE,
	  "USER [--bytes SIZE] [--messages N]",
	  "set limits (0 = unlimited; an omitted limit is kept)",
	  mc_quota_set,
	  { { "bytes", true }, { "messages", true } } },
	{ "mailbox",
	  "list",
	  1,
	  2,
	  MC_STORE,
	  "USER [PATTERN] [--subscribed]",
	  "list mailboxes (PATTERN: * and %, default *)",
	  mc_mbox_list,
	  { { "subscribed", false } } },
	{ "mailbox",
	  "create",
	  2,
	  2,
	  MC_STORE,
	  "USER MAILBOX [--special USE]",
	  "create a mailbox and its parents (USE: sent, drafts, trash, junk, archive, all, "
	  "flagged)",
	  mc_mbox_create,
	  { { "special", true } } },
	{ "mailbox",
	  "delete",
	  2,
	  2,
	  MC_STORE,
	  "USER MAILBOX",
	  "delete a mailbox and its mail (kept as \\Noselect while it has children)",
	  mc_mbox_delete,
	  { { NULL, false } } },
	{ "mailbox",
	  "rename",
	  3,
	  3,
	  MC_STORE,
	  "USER OLD NEW",
	  "rename a mailbox with its children (INBOX: moves its mail)",
	  mc_mbox_rename,
	  { { NULL, false } } },
	{ "mailbox",
	  "subscribe",
	  2,
	  2,
	  MC_STORE,
	  "USER MAILBOX",
	  "subscribe",
	  mc_mbox_subscribe,
	  { { NULL, false } } },
	{ "mailbox",
	  "unsubscribe",
	  2,
	  2,
	  MC_STORE,
	  "USER MAILBOX",
	  "unsubscribe",
	  mc_mbox_unsubscribe,
	  { { NULL, false } } },
	{ "mailbox",
	  "status",
	  1,
	  2,
	  MC_STORE,
	  "USER [MAILBOX]",
	  "STATUS counters of one or every mailbox",
	  mc_mbox_status,
	  { { NULL, false } } },
	{ "message",
	  "list",
	  2,
	  3,
	  MC_STORE,
	  "USER MAILBOX [UIDS]",
	  "list messages (UIDS: 1:5,7,9:*; default all)",
	  mc_msg_list,
	  { { NULL, false } } },
	{ "message",
	  "show",
	  3,
	  3,
	  MC_STORE,
	  "USER MAILBOX UID [--raw]",
	  "show a message (--raw: only its bytes)",
	  mc_msg_show,
	  { { "raw", false } } },
	{ "message",
	  "flags",
	  3,
	  8,
	  MC_STORE,
	  "USER MAILBOX UIDS [add|remove|set FLAG...]",
	  "show or change flags (\\Seen \\Answered \\Flagged \\Deleted \\Draft, keywords)",
	  mc_msg_flags,
	  { { NULL, false } } },
	{ "message",
	  "delete",
	  3,
	  3,
	  MC_STORE,
	  "USER MAILBOX UIDS",
	  "expunge the given messages now",
	  mc_msg_delete,
	  { { NULL, false } } },
	{ "import",
	  NULL,
	  1,
	  2,
	  MC_STORE_NEW,
	  "USER PATH [--mailbox M] | --bulk FILE",
	  "import an mbox file or a Maildir, keeping flags and dates; --bulk: many users' "
	  "mailboxes from a bulk stream (FILE or - for stdin)",
	  mc_import,
	  { { "mailbox", true }, { "bulk", false } } },
	{ "export",
	  NULL,
	  2,
	  3,
	  MC_STORE,
	  "USER [MAILBOX] PATH [--format mbox|maildir]",
	  "export a mailbox (mboxrd file or Maildir directory); without MAILBOX every mailbox "
	  "(Maildir++ with subscriptions; `import USER PATH` restores it)",
	  mc_export,
	  { { "format", true } } },
	{ "expunge",
	  NULL,
	  2,
	  MC_MAX_POS,
	  MC_STORE,
	  "USER MAILBOX [QUERY...] [--deleted] "
	  "[--before DATE] [--all]",
	  "expunge the messages an IMAP SEARCH query selects, or \\Deleted ones, older ones "
	  "(DATE: YYYY-MM-DD or 30d), or all",
	  mc_expunge,
	  { { "deleted", false }, { "before", true }, { "all", false } } },
	{ "search",
	  NULL,
	  3,
	  MC_MAX_POS,
	  MC_STORE,
	  "USER MAILBOX QUERY...",
	  "the UIDs of the messages an IMAP SEARCH query selects (SEEN, FROM x, SINCE 1-Jan-2026, "
	  "OR/NOT, ...)",
	  mc_search,
	  { { NULL, false } } },
	{ "fetch",
	  NULL,
	  4,
	  MC_MAX_POS,
	  MC_STORE,
	  "USER MAILBOX QUERY... FIELDS",
	  "fields of the messages a query selects (uid flags hdr.subject "
	  "date.received size.physical imap.envelope body text ...; FIELDS is one word, the "
	  "last)",
	  mc_fetch,
	  { { NULL, false } } },
	{ "copy",
	  NULL,
	  4,
	  MC_MAX_POS,
	  MC_STORE,
	  "USER SRC DST QUERY... [--create]",
	  "copy the messages a query selects in mailbox SRC to DST (--create: make DST)",
	  mc_copy,
	  { { "create", false } } },
	{ "move",
	  NULL,
	  4,
	  MC_MAX_POS,
	  MC_STORE,
	  "USER SRC DST QUERY... [--create]",
	  "move the messages a query selects in mailbox SRC to DST",
	  mc_move,
	  { { "create", false } } },
	{ "acl",
	  "get",
	  2,
	  2,
	  MC_STORE,
	  "USER MAILBOX",
	  "a mailbox's access control list (the owner first, with every right)",
	  mc_acl_get,
	  { { NULL, false } } },
	{ "acl",
	  "set",
	  4,
	  4,
	  MC_STORE,
	  "USER MAILBOX ID RIGHTS",
	  "give ID (a user of the store or directory, anyone, authenticated; -ID: negative "
	  "rights) RIGHTS, +RIGHTS or -RIGHTS",
	  mc_acl_set,
	  { { NULL, false } } },
	{ "acl",
	  "delete",
	  3,
	  3,
	  MC_STORE,
	  "USER MAILBOX ID",
	  "remove ID from a mailbox's access control list",
	  mc_acl_delete,
	  { { NULL, false } } },
	{ "sieve",
	  "list",
	  1,
	  1,
	  MC_STORE,
	  "USER",
	  "list a user's Sieve scripts (* active)",
	  mc_sieve_list,
	  { { NULL, false } } },
	{ "sieve",
	  "get",
	  1,
	  2,
	  MC_STORE,
	  "USER [NAME]",
	  "print a script (default: the active one)",
	  mc_sieve_get,
	  { { NULL, false } } },
	{ "sieve",
	  "put",
	  3,
	  3,
	  MC_STORE,
	  "USER NAME FILE [--activate]",
	  "compile and store a script (FILE - reads stdin); a refused one is explained",
	  mc_sieve_put,
	  { { "activate", false } } },
	{ "sieve",
	  "put-all",
	  2,
	  2,
	  MC_STORE,
	  "NAME FILE [--activate]",
	  "store one script for every user of the store (a site default, benchmarks)",
	  mc_sieve_put_all,
	  { { "activate", false } } },
	{ "sieve",
	  "check",
	  2,
	  2,
	  MC_STORE,
	  "USER FILE",
	  "compile a script without storing it",
	  mc_sieve_check,
	  { { NULL, false } } },
	{ "sieve",
	  "activate",
	  2,
	  2,
	  MC_STORE,
	  "USER NAME",
	  "make a script the active one",
	  mc_sieve_activate,
	  { { NULL, false } } },
	{ "sieve",
	  "deactivate",
	  1,
	  1,
	  MC_STORE,
	  "USER",
	  "make no script active",
	  mc_sieve_deactivate,
	  { { NULL, false } } },
	{ "sieve",
	  "delete",
	  2,
	  2,
	  MC_STORE,
	  "USER NAME",
	  "delete a script (not the active one)",
	  mc_sieve_delete,
	  { { NULL, false } } },
	{ "sieve",
	  "rename",
	  3,
	  3,
	  MC_STORE,
	  "USER OLD NEW",
	  "rename a script",
	  mc_sieve_rename,
	  { { NULL, false } } },
	{ "fts",
	  "rebuild",
	  0,
	  1,
	  MC_STORE,
	  "USER|--all [--mailbox M]",
	  "index mailboxes again from their messages (the daemons may run)",
	  mc_fts_rebuild,
	  { { "all", false }, { "mailbox", true } } },
	{ "fts",
	  "stats",
	  0,
	  1,
	  MC_STORE,
	  "USER|--all [--mailbox M]",
	  "the full-text index of each mailbox: complete, messages, segments, bytes",
	  mc_fts_stats,
	  { { "all", false }, { "mailbox", true } } },
	{ "queue",
	  "list",
	  0,
	  0,
	  MC_STORE,
	  "[--from A] [--to A] [--before DATE]",
	  "list the outbound queue (or the entries the filters select)",
	  mc_queue_list,
	  { { "from", true }, { "to", true }, { "before", true } } },
	{ "queue",
	  "show",
	  1,
	  1,
	  MC_STORE,
	  "ID [--message]",
	  "an entry: its envelope, recipients, every try with its reason (--message: and the "
	  "message, as postcat -q)",
	  mc_queue_show,
	  { { "message", false } } },
	{ "queue",
	  "flush",
	  0,
	  1,
	  MC_STORE,
	  "[ID|ALL] [--domain D] [--from A] [--to A] "
	  "[--before DATE]",
	  "make the selected (default every) entry due now; --domain: "
	  "those with mail for D (postqueue -s)",
	  mc_queue_flush,
	  { { "from", true }, { "to", true }, { "before", true }, { "domain", true } } },
	{ "queue",
	  "hold",
	  0,
	  1,
	  MC_STORE,
	  "ID|ALL|--from A|--to A|--before DATE",
	  "hold entries (never tried until released)",
	  mc_queue_hold,
	  { { "from", true }, { "to", true }, { "before", true } } },
	{ "queue",
	  "release",
	  0,
	  1,
	  MC_STORE,
	  "ID|ALL|--from A|--to A|--before DATE",
	  "release held entries (due now)",
	  mc_queue_release,
	  { { "from", true }, { "to", true }, { "before", true } } },
	{ "queue",
	  "delete",
	  0,
	  1,
	  MC_STORE,
	  "ID|ALL|--from A|--to A|--before DATE",
	  "delete entries without a bounce (A: an address, @domain, or <>; filters combine)",
	  mc_queue_delete,
	  { { "from", true }, { "to", true }, { "before", true } } },
	{ "queue",
	  "requeue",
	  0,
	  1,
	  MC_STORE,
	  "ID|ALL|--from A|--to A|--before DATE",
	  "try the pending recipients again now as if new (attempts and backoff restart, "
	  "released from hold; the lifetime still counts from arrival)",
	  mc_queue_requeue,
	  { { "from", true }, { "to", true }, { "before", true } } },
	{ "verify",
	  NULL,
	  0,
	  1,
	  MC_STORE,
	  "[USER] [--repair] [--lost-found USER]",
	  "check counters, refcounts, files and caches; --repair fixes them and moves orphan "
	  "message files to the lost+found mailbox of a user (default postmaster)",
	  mc_verify,
	  { { "repair", false }, { "lost-found", true } } },
	{ "backup",
	  NULL,
	  1,
	  1,
	  MC_STORE,
	  "DIR",
	  "consistent hot copy of the store (compacted indexes and message files) into DIR",
	  mc_backup,
	  { { NULL, false } } },
	{ "restore",
	  NULL,
	  1,
	  1,
	  MC_NOSTORE,
	  "DIR [--force]",
	  "restore a backup into [store] path (daemons stopped; --force replaces a store)",
	  mc_restore,
	  { { "force", false } } },
	{ "stats",
	  NULL,
	  0,
	  0,
	  MC_STORE,
	  "[--live [--interval S] [--count N] [--daemon D]]",
	  "users, mailboxes, messages, bytes per partition; --live: the running daemons' "
	  "counters, refreshing (as top)",
	  mc_stats,
	  { { "live", false }, { "interval", true }, { "count", true }, { "daemon", true } } },
	{ "top",
	  NULL,
	  0,
	  0,
	  MC_NOSTORE,
	  "[--interval S] [--count N] [--daemon D]",
	  "the running daemons' connections, commands, latencies, logins, deliveries, queue and "
	  "store, refreshing every S seconds (default 2; --count: N times)",
	  mc_top,
	  { { "interval", true }, { "count", true }, { "daemon", true } } },
	{ "who",
	  NULL,
	  0,
	  1,
	  MC_NOSTORE,
	  "[USER] [--daemon D]",
	  "the sessions of the running daemons (user, client address, state, idle time)",
	  mc_who,
	  { { "daemon", true } } },
	{ "kick",
	  NULL,
	  1,
	  1,
	  MC_NOSTORE,
	  "USER [--daemon D]",
	  "close USER's sessions in the running daemons (IMAP BYE, SMTP 421 between "
	  "transactions, ManageSieve BYE)",
	  mc_kick,
	  { { "daemon", true } } },
	{ "upgrade",
	  NULL,
	  0,
	  0,
	  MC_STORE_UPGRADE,
	  "",
	  "bring a store of an older format to this Heron's, in place (daemons stopped; "
	  "may be interrupted and run again)",
	  mc_upgrade,
	  { { NULL, false } } },
};
#define NCMDS (sizeof(mc_cmds) / sizeof(mc_cmds[0]))

int mc_exit_code(int rc)
{
	switch (rc) {
	case STORE_OK:
		return MC_OK;
	case STORE_ENOUSER:
		return MC_NOUSER;
	case STORE_EINVAL:
		return MC_USAGE;
	case STORE_ENOMBOX:
	case STORE_ENOMSG:
	case STORE_ENOQUEUE:
	case STORE_EEXIST:
	case STORE_EQUOTA:
	case STORE_EKEYWORDS:
	case STORE_ENOTSUP:
	case STORE_ECORRUPT:
	case STORE_EFORMAT:
	case STORE_ELIMIT:
	case STORE_EMOVED:
		return MC_REFUSED;
	case STORE_ELOCKED:
	case STORE_EFULL:
	case STORE_ENOSPC:
	case STORE_EIO:
	case STORE_EAGAIN:
		return MC_TEMPFAIL;
	default:
		return MC_IOERR;
	}
}

static const char *hint(int rc)
{
	switch (rc) {
	case STORE_ENOUSER:
		return "see `mailctl user list`";
	case STORE_ENOMBOX:
		return "see `mailctl mailbox list USER`";
	case STORE_ENOMSG:
		return "see `mailctl message list USER MAILBOX`";
	case STORE_ENOQUEUE:
		return "see `mailctl queue list`";
	case STORE_EEXIST:
		return "choose another name or remove the existing one first";
	case STORE_EQUOTA:
		return "see `mailctl quota get USER`; raise it with `mailctl quota set`";
	case STORE_EKEYWORDS:
		return "the mailbox has too many keywords";
	case STORE_ENOTSUP:
		return "this object cannot be changed that way";
	case STORE_ELOCKED:
		return "a queue runner holds it; retry in a minute";
	case STORE_ECORRUPT:
		return "run `mailctl verify --repair`";
	case STORE_EFORMAT:
		return "the log line above says what is needed (`mailctl upgrade` "
		       "for an older store)";
	case STORE_EFULL:
		return "raise [store] map_size_max in heron.conf";
	case STORE_EMOVED:
		return "its tombstone holds the name here (`mailctl user show USER` says where "
		       "it went); `mailctl user add` or `user del` removes it";
	case STORE_ELIMIT:
		return "see [imapd] max_mailboxes_per_user and max_mailbox_depth in "
		       "heron.conf";
	case STORE_ENOSPC:
		return "free disk space under [store] path, then retry";
	case STORE_EINVAL:
		return "check the arguments (see --help)";
	default:
		return "see the log lines above; retry";
	}
}

static void vfail(struct mc *mc, const char *reason, const char *hint_text, const char *fmt,
		  va_list ap) __attribute__((format(printf, 4, 0)));
static void vfail(struct mc *mc, const char *reason, const char *hint_text, const char *fmt,
		  va_list ap)
{
	char what[1024];

	vsnprintf(what, sizeof(what), fmt, ap);
	for (char *p = what; *p != '\0'; p++)
		if (iscntrl((unsigned char)*p))
			*p = '?'; /* a name with a newline must not forge a second line */
	fprintf(stderr, "mailctl: %s%s%s%s%s\n", what, reason ? ": " : "", reason ? reason : "",
		hint_text ? "; " : "", hint_text ? hint_text : "");
	if (mc != NULL && mc->json && !mc->error_out) {
		char line[1600];

		mc->error_out = true;
		snprintf(line, sizeof(line), "%s%s%s", what, reason ? ": " : "",
			 reason ? reason : "");
		fputs("{\"error\": ", stdout);
		mc_json_str(stdout, line, strlen(line));
		fputs(", \"hint\": ", stdout);
		mc_json_str(stdout, hint_text ? hint_text : "", hint_text ? strlen(hint_text) : 0);
		fputs("}\n", stdout);
	}
}

int mc_fail(struct mc *mc, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(mc, store_strerror(rc), hint(rc), fmt, ap);
	va_end(ap);
	return mc_exit_code(rc);
}

int mc_refuse(struct mc *mc, int code, const char *hint_text, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(mc, NULL, hint_text, fmt, ap);
	va_end(ap);
	return code;
}

int mc_usage(struct mc *mc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(mc, NULL, "see --help", fmt, ap);
	va_end(ap);
	if (mc->cmd != NULL) {
		fputs("usage: ", stderr);
		print_cmd(stderr, mc->cmd);
	}
	return MC_USAGE;
}

static void print_cmd(FILE *f, const struct mc_cmd *c)
{
	fprintf(f, "mailctl %s%s%s %s\n", c->noun, c->verb ? " " : "", c->verb ? c->verb : "",
		c->usage);
}

static int usage_all(FILE *f, int rc)
{
	fputs("usage: mailctl [-c heron.conf] [--json] NOUN VERB [ARGS...]\n"
	      "       mailctl [-c heron.conf] -t    (print the effective configuration)\n"
	      "Administers the Heron message store, queue and running daemons; exit 0 ok,\n"
	      "1 refused or not found, 64 usage, 67 no such user, 75 try again later, 78\n"
	      "configuration (mailctl(8) lists them all). `mailctl NOUN --help` for one noun.\n\n",
	      f);
	for (size_t i = 0; i < NCMDS; i++) {
		fputs("  ", f);
		print_cmd(f, &mc_cmds[i]);
	}
	fputs("  mailctl auth test [-n COUNT] USER   (password on stdin)\n"
	      "  mailctl lookup [-n COUNT] ADDRESS\n",
	      f);
	return rc;
}

static int help_noun(const char *noun)
{
	int n = 0;

	for (size_t i = 0; i < NCMDS; i++) {
		if (strcmp(mc_cmds[i].noun, noun) != 0)
			continue;
		print_cmd(stdout, &mc_cmds[i]);
		printf("    %s\n", mc_cmds[i].help);
		n++;
	}
	return n > 0 ? MC_OK : usage_all(stderr, MC_USAGE);
}

static const struct mc_cmd *find_cmd(const char *noun, const char *verb, bool *noun_ok)
{
	*noun_ok = false;
	for (size_t i = 0; i < NCMDS; i++) {
		if (strcmp(mc_cmds[i].noun, noun) != 0)
			continue;
		*noun_ok = true;
		if (mc_cmds[i].verb == NULL ||
		    (verb != NULL && strcmp(mc_cmds[i].verb, verb) == 0))
			return &mc_cmds[i];
	}
	return NULL;
}

/* Options anywhere after the verb ("--name value", "--name=value"), "--" ends them. */
static int parse_args(struct mc *mc, const struct mc_cmd *c, int argc, char **argv,
		      struct mc_args *a)
{
	bool dashdash = false;

	memset(a, 0, sizeof(*a));
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i], *eq;
		size_t k, nlen;

		if (dashdash || strncmp(s, "--", 2) != 0 || s[2] == '\0') {
			if (!dashdash && strcmp(s, "--") == 0) {
				dashdash = true;
				continue;
			}
			if (a->npos == MC_MAX_POS || a->npos >= c->max_pos)
				return mc_usage(mc, "too many arguments (at '%s')", s);
			a->pos[a->npos++] = s;
			continue;
		}
		s += 2;
		eq = strchr(s, '=');
		nlen = eq ? (size_t)(eq - s) : strlen(s);
		if (nlen == 4 && strncmp(s, "json", 4) == 0 && eq == NULL) {
			mc->json = true;
			continue;
		}
		for (k = 0; k < MC_MAX_OPTS && c->opts[k].name != NULL; k++)
			if (strlen(c->opts[k].name) == nlen &&
			    strncmp(c->opts[k].name, s, nlen) == 0)
				break;
		if (k == MC_MAX_OPTS || c->opts[k].name == NULL)
			return mc_usage(mc, "unknown option '--%.*s'", (int)nlen, s);
		if (c->opts[k].has_arg && eq == NULL && i + 1 >= argc)
			return mc_usage(mc, "option '--%s' needs a value", c->opts[k].name);
		if (!c->opts[k].has_arg && eq != NULL)
			return mc_usage(mc, "option '--%s' takes no value", c->opts[k].name);
		a->set[k] = true;
		a->val[k] = c->opts[k].has_arg ? (eq ? eq + 1 : argv[++i]) : NULL;
	}
	if (a->npos < c->min_pos)
		return mc_usage(mc, "missing arguments");
	return MC_OK;
}

int mc_open_store(struct mc *mc, enum mc_open how)
{
	struct store_opts o;
	char *err = NULL;
	int rc;

	store_opts_from_conf(mc->conf, &o);
	o.create = how == MC_STORE_NEW;
	o.nosync = mc->bulk;
	o.upgrade = how == MC_STORE_UPGRADE;
	o.recover_background = false; /* a verify right after sees what recovery left */
	if (o.upgrade)
		log_set_level(LOG_LVL_INFO); /* each step says what it does */
	/* As root, work as the store's owner (the daemons' user): what mailctl writes stays
	   theirs to read and write. */
	if (daemon_become_owner(o.path, &err) == -1) {
		rc = mc_refuse(mc, MC_NOPERM, "run mailctl as root or as the store's owner", "%s",
			       err);
		free(err);
		return rc;
	}
	if (!o.create && access(o.path, F_OK) == -1)
		return mc_refuse(mc, MC_CONFIG,
				 "check [store] path in the configuration, or create the store "
				 "with `mailctl user add USER`",
				 "no store at %s (from %s)", o.path, mc->conf_path);
	if ((rc = store_open(&o, &mc->st)) != 0)
		return mc_fail(mc, rc, "cannot open the store at %s (from %s)", o.path,
			       mc->conf_path);
	return MC_OK;
}

static bool wants_help(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

/* "auth test" and "lookup": the directory commands (mailctl_dir.c). */
static int run_directory(struct mc *mc, int argc, char **argv);

static int run(struct mc *mc, int argc, char **argv)
{
	const struct mc_cmd *c;
	struct mc_args a;
	bool noun_ok;
	int rc;

	if (strcmp(argv[0], "auth") == 0 || strcmp(argv[0], "lookup") == 0)
		return run_directory(mc, argc, argv);
	c = find_cmd(argv[0], argc > 1 ? argv[1] : NULL, &noun_ok);
	if (c == NULL && noun_ok && (argc < 2 || wants_help(argc - 1, argv + 1)))
		return help_noun(argv[0]);
	if (c == NULL) {
		for (int i = 1; i < argc; i++) /* --json after an unknown command still counts */
			mc->json |= strcmp(argv[i], "--json") == 0;
		if (noun_ok)
			mc_refuse(mc, MC_USAGE, "see `mailctl --help`", "unknown verb '%s %s'",
				  argv[0], argc > 1 ? argv[1] : "");
		else
			mc_refuse(mc, MC_USAGE, "see `mailctl --help`", "unknown command '%s'",
				  argv[0]);
		return usage_all(stderr, MC_USAGE);
	}
	mc->cmd = c;
	argc -= c->verb ? 2 : 1;
	argv += c->verb ? 2 : 1;
	if (wants_help(argc, argv)) {
		fputs("usage: ", stdout);
		print_cmd(stdout, c);
		printf("%s\n", c->help);
		return MC_OK;
	}
	if ((rc = parse_args(mc, c, argc, argv, &a)) != MC_OK)
		return rc;
	/* a bulk import writes without fsync and syncs the store once when it closes */
	if (c->run == mc_import && a.set[1])
		mc->bulk = true;
	/* stats --live asks the daemons, not the store */
	if (c->open != MC_NOSTORE && !(c->run == mc_stats && a.set[0]) &&
	    (rc = mc_open_store(mc, c->open)) != MC_OK)
		return rc;
	rc = c->run(mc, &a);
	store_close(&mc->st);
	return rc;
}

int main(int argc, char **argv)
{
	struct mc mc = { .conf_path = DEFAULT_CONF };
	bool check = false;
	char *err = NULL;
	int i, rc;

	log_init("mailctl", true, 0);
	log_set_level(LOG_LVL_WARN);
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			mc.conf_path = argv[++i];
		else if (strcmp(argv[i], "--json") == 0)
			mc.json = true;
		else if (strcmp(argv[i], "-t") == 0)
			check = true;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return usage_all(stdout, MC_OK);
		else
			return usage_all(stderr, MC_USAGE);
	}
	if (i == argc && !check)
		return usage_all(stderr, MC_USAGE);
	if (conf_load(mc.conf_path, &mc.conf, &err) < 0) {
		rc = mc_refuse(&mc, MC_CONFIG, "fix the file or give another with -c", "%s", err);
		free(err);
		return rc;
	}
	if (check) { /* -t: the effective configuration, as every Heron program prints it */
		conf_dump(mc.conf, stdout);
		conf_free(&mc.conf);
		return MC_OK;
	}
	rc = run(&mc, argc - i, argv + i);
	conf_free(&mc.conf);
	if (fflush(stdout) == EOF && rc == MC_OK) {
		fprintf(stderr, "mailctl: writing the output: %s\n", strerror(errno));
		rc = MC_ERR;
	}
	return rc;
}

/* ------------------------------------------------------------------------------------- */
/* Directory commands (mailctl_dir.c): --json may stand anywhere after the noun. */

static int run_directory(struct mc *mc, int argc, char **argv)
{
	if (wants_help(argc, argv)) {
		puts("usage: mailctl auth test [-n COUNT] USER   (password on stdin)\n"
		     "       mailctl lookup [-n COUNT] ADDRESS\n"
		     "Asks the directory ([directory] in heron.conf); prints the result, the mode,\n"
		     "the time taken, whether the cache answered, and the user record.");
		return MC_OK;
	}
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--json") == 0) {
			mc->json = true;
			memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(*argv));
			argc--;
			i--;
		}
	return mc_dir_main(mc, argc, argv);
}
