/* sieve.h — libheron_sieve: Sieve (RFC 5228 and extensions) for Heron's local delivery.
 *
 * A script is compiled once (sieve_compile: lexer, parser, checker, code generator) into a
 * compact, position-independent byte program that is stored with the user's record and run
 * at every delivery (sieve_run) without being parsed again. Compile errors carry the line
 * and column of the fault ("line 3, column 7: ..."), as ManageSieve (RFC 5804) reports them.
 *
 * Execution never performs I/O itself: the message is a read-only buffer, and everything
 * that needs the outside world (mailbox existence, duplicate and vacation memory, included
 * scripts) goes through the callbacks of struct sieve_env. The result is a list of actions
 * (struct sieve_result) that the caller carries out: fileinto/keep through the store,
 * redirect and vacation through the relay queue, reject as the SMTP/LMTP reply. Every run is
 * bounded by struct sieve_limits; a script past a limit stops with a runtime error and the
 * message is kept (RFC 5228 2.10.6). */
#ifndef HERON_SIEVE_H
#define HERON_SIEVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The extensions this implementation offers, space-separated (ManageSieve SIEVE capability). */
const char *sieve_extensions(void);

/* ------------------------------------------------------------------------------------- */
/* Compiling */

struct sieve_compile_opts {
	size_t max_script_size; /* bytes of source (0: 1 MiB) */
	unsigned max_nesting;   /* blocks and tests inside each other (0: 32) */
	size_t max_program;     /* bytes of compiled program (0: 4 MiB) */
};

struct sieve_parser;
/* Incremental front end (STYLE 8): feed the source in pieces of any size, then finish.
   sieve_parser_feed: 0 more wanted, -1 error (the error stays; finish reports it). */
struct sieve_parser *sieve_parser_new(const struct sieve_compile_opts *o);
int sieve_parser_feed(struct sieve_parser *p, const void *data, size_t len);
/* Checks and compiles what was fed: 0 and *prog_r / *len_r (malloc'd: free it), or -1 and
   *error_r (malloc'd: "line L, column C: text"). Frees the parser (*pp = NULL). */
int sieve_parser_finish(struct sieve_parser **pp, uint8_t **prog_r, size_t *len_r, char **error_r);
void sieve_parser_free(struct sieve_parser **pp);
/* One call: feed all + finish. */
int sieve_compile(const char *src, size_t len, const struct sieve_compile_opts *o,
		  uint8_t **prog_r, size_t *len_r, char **error_r);
/* Whether a stored program is one this library can run (version and structure checked
   again before each run anyway). */
bool sieve_program_valid(const uint8_t *prog, size_t len);

/* ------------------------------------------------------------------------------------- */
/* Running */

struct sieve_limits {
	uint64_t max_instructions; /* per run, includes included scripts (0: 100000) */
	unsigned max_redirects;    /* (0: 4) */
	unsigned max_actions;      /* fileinto/keep/redirect/vacation/addflag... (0: 32) */
	uint64_t max_header_bytes; /* header bytes compared in all tests (0: 16 MiB) */
	uint64_t max_body_bytes;   /* body bytes searched by body tests (0: 16 MiB) */
	unsigned max_includes;     /* include depth (0: 8) */
};

enum sieve_action_type {
	SIEVE_KEEP,     /* deliver to INBOX (mailbox NULL) with flags */
	SIEVE_FILEINTO, /* deliver to mailbox with flags (create: make it if missing) */
	SIEVE_REDIRECT, /* send to addr */
	SIEVE_REJECT,   /* refuse with reason (RFC 5429: MDN/DSN-style or SMTP reply) */
	SIEVE_EREJECT,  /* refuse at the protocol level (SMTP/LMTP reply) when possible */
	SIEVE_VACATION, /* send an auto-reply */
};

struct sieve_vacation {
	char *to;            /* the sender answered (the envelope sender) */
	char *from;          /* :from or NULL (the recipient) */
	char *subject;       /* the reply's subject (:subject or "Auto: " + the original's) */
	char *subject_given; /* :subject as given, or NULL */
	char *reason;        /* body text, or a MIME entity when mime */
	bool mime;
	char *handle;      /* :handle, or a digest of the reason/subject/from/mime */
	int64_t seconds;   /* remember for (days * 86400 or :seconds) */
	char *in_reply_to; /* the original's Message-ID or NULL */
	char *references;  /* the original's References + Message-ID or NULL */
};

struct sieve_action {
	enum sieve_action_type type;
	char *mailbox; /* FILEINTO */
	bool create;   /* FILEINTO :create */
	char **flags;  /* KEEP/FILEINTO: IMAP flags ("\\Seen", keywords), nflags */
	size_t nflags;
	char *addr;   /* REDIRECT */
	char *reason; /* REJECT/EREJECT */
	struct sieve_vacation vac;
};

/* A duplicate (RFC 7352) id to remember once the message was delivered. */
struct sieve_dupmark {
	char *key; /* handle NUL-free digest input */
	int64_t seconds;
};

struct sieve_result {
	struct sieve_action *act;
	size_t nact;
	struct sieve_dupmark *dup;
	size_t ndup;
	char *header; /* editheader changed the header: the new header block (CRLF,
			       ending with the empty line), else NULL */
	size_t header_len;
	char *error; /* a runtime error: the message is kept; act is one KEEP */
	uint64_t instructions, header_bytes, body_bytes; /* work done */
};
void sieve_result_clear(struct sieve_result *r);

struct sieve_env {
	/* the message: header and body, CRLF or LF line ends, read only */
	const char *msg;
	size_t msg_len;
	const char *env_from;     /* envelope sender without <> ("" = null sender) */
	const char *env_to;       /* the recipient address as given in RCPT TO */
	const char *orig_to;      /* ORCPT or NULL */
	const char *auth;         /* the authenticated submitter or NULL */
	const char *user;         /* the recipient's store user */
	const char *domain;       /* our host name (envelope "to" domain default) */
	char subaddress_sep;      /* '+' */
	int64_t now;              /* Unix time (date tests, currentdate) */
	int zone_min;             /* local zone, minutes east of UTC */
	const char *spam_header;  /* spamtest: the header holding the score; NULL: X-Spam-Score,
				     else X-Spamd-Result (rspamd: "[score / threshold]") */
	double spam_max;          /* the score mapped to 10 */
	const char *virus_header; /* virustest: the header (X-Virus-Scan: clean|infected) */
	/* callbacks (each may be NULL: then mailboxexists is false, duplicate is false, include
	   fails) */
	void *ctx;
	bool (*mailbox_exists)(void *ctx, const char *mailbox);
	bool (*duplicate_seen)(void *ctx, const char *key);
	/* an included script's program (personal or global), or NULL; *len_r set. The
	   pointer stays valid for the run. */
	const uint8_t *(*include)(void *ctx, bool global, const char *name, size_t *len_r);
};

/* Runs prog against env: 0 and r filled (actions in order; implicit keep added as KEEP),
   or 0 with r->error set after a runtime error or a limit (then the only action is KEEP). */
int sieve_run(const uint8_t *prog, size_t len, const struct sieve_env *env,
	      const struct sieve_limits *lim, struct sieve_result *r);
/* The same over several programs in order (admin "before" scripts, the user's, "after"):
   they share the actions and the implicit keep; a stop ends all. NULL entries skipped. */
int sieve_run_chain(const uint8_t *const *progs, const size_t *lens, size_t n,
		    const struct sieve_env *env, const struct sieve_limits *lim,
		    struct sieve_result *r);

#endif
