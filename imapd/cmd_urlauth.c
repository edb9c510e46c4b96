/* cmd_urlauth.c — owns URLAUTH (RFC 4467): RESETKEY, GENURLAUTH and URLFETCH, the mailbox
 * access keys, the verification of a URLAUTH URL (URLFETCH's, and CATENATE's URL parts in
 * cmd_append.c), and the bytes an IMAP URL names (imap_url_bytes, CATENATE's too).
 *
 * Access keys: one random 256-bit key per user and mailbox, made by the first GENURLAUTH that
 * needs it and removed by RESETKEY, kept as the /private annotation URLAUTH_KEY_ENTRY of the
 * mailbox for a user id no account has (ids carry a partition below 1024 in their top 16
 * bits): URLAUTH_KEY_USER for the owner's key, URLAUTH_KEY_USER - id for the key of user id,
 * to whom the owner's ACL gives 'r' (a mailbox of another user or of the shared namespace,
 * imap_ns.c: the URL's user names it as that user sees it, "Other Users/alice/Work"); no
 * GETMETADATA or
 * SETMETADATA can reach it, it goes with the mailbox's delete and follows its rename (the
 * URLs made before a rename name the old mailbox and resolve no more). Keys are written
 * through the group commit as every write of imapd.
 *
 * The INTERNAL mechanism (RFC 4467 7): the token is HMAC-SHA256 over the rump URL (the URL's
 * bytes up to the end of its access identifier, as the client wrote them) keyed with the
 * mailbox's access key, in lower-case hex (64 digits). A URL is honoured when: its
 * mechanism is INTERNAL, its host is [imapd] hostname, its user has that mailbox here and
 * the mailbox has a key whose token matches (constant-time comparison), ;EXPIRE= is in the
 * future, and its access admits the session: "user+NAME" the user NAME, "submit+NAME" a user
 * listed in [imapd] urlauth_submit_users (the submission server's login), "authuser" any
 * user logged in here. "anonymous" is refused by policy: GENURLAUTH answers NO and URLFETCH
 * NIL (the server has no anonymous login, and a URL anyone may use is a leak waiting to
 * happen). Every failure is the same NIL, whether the message exists or not. A URL of a
 * mailbox shared with the URL's user is honoured only while that user holds 'r' on it
 * (checked at each URLFETCH: taking the right away revokes the URLs). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/msgcache.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imap_url.h"
#include "imapd/imapd.h"
#include "store/store.h"

#define URLAUTH_KEY_USER UINT64_MAX /* the annotation user of access keys: no account */
#define URLAUTH_KEY_ENTRY "/private/vendor/heron/urlauth-key"
#define URLAUTH_KEY_LEN 32
#define URLAUTH_TOKEN_LEN 64 /* hex digits of HMAC-SHA256 */
#define URLAUTH_URLS_MAX 64  /* URLs in one GENURLAUTH or URLFETCH */
#define URLAUTH_URL_MAX 8192 /* bytes of one URL */
#define URLAUTH_MECHS "INTERNAL"

/* The token of rump[0..len) under key, as hex into out (URLAUTH_TOKEN_LEN + 1). */
static void urlauth_token(const void *key, size_t klen, const char *rump, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mlen = 0;

	if (HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)rump, len, mac, &mlen) ==
		    NULL ||
	    mlen * 2 != URLAUTH_TOKEN_LEN)
		fatalx("urlauth: HMAC-SHA256 failed");
	for (unsigned i = 0; i < mlen; i++) {
		out[2 * i] = hex[mac[i] >> 4];
		out[2 * i + 1] = hex[mac[i] & 15];
	}
	out[URLAUTH_TOKEN_LEN] = '\0';
	OPENSSL_cleanse(mac, sizeof(mac));
}

/* The annotation user of the key of user (id) on a mailbox: the owner's, or a grantee's. */
static uint64_t urlauth_kuser(bool own, uint64_t user)
{
	return own ? URLAUTH_KEY_USER : URLAUTH_KEY_USER - user;
}

/* The access key of mailbox mbox for annotation user kuser: 0 and *key_r (valid for the
   txn), STORE_ENOMSG when there is none. */
static int urlauth_key(struct store_txn *t, uint64_t mbox, uint64_t kuser, const void **key_r)
{
	size_t len;
	int rc = store_annot_get(t, mbox, kuser, URLAUTH_KEY_ENTRY, strlen(URLAUTH_KEY_ENTRY),
				 key_r, &len);

	if (rc == 0 && len != URLAUTH_KEY_LEN)
		return STORE_ENOMSG; /* not one this code wrote: as none */
	return rc;
}

/* Removes an access key (none: nothing to do). */
static int urlauth_key_drop(struct store_txn *t, uint64_t mbox, uint64_t kuser)
{
	return store_annot_set(t, mbox, kuser, URLAUTH_KEY_ENTRY, strlen(URLAUTH_KEY_ENTRY), NULL,
			       0, 0);
}

/* The mailbox name (stored form) as user (name, id, partition: the URL's user, logged in or
   not) sees it, through the namespaces (imap_ns_find): *b, with b->mbox looked up for the
   user's own too (in a txn of b->part). 0, or STORE_ENOMBOX also when user may not read it
   ('r'). */
static int urlauth_mailbox(struct imap_server *srv, const char *user, uint64_t id, unsigned part,
			   const char *name, struct imap_ns_box *b)
{
	/* imap_ns_find resolves for a client: this one stands for the URL's user, who may not be
	   the session's (URLFETCH by the submission server) */
	struct imap_client as = { 0 };
	struct store_txn *t = NULL;
	int rc;

	as.srv = srv;
	as.user = xstrdup(user);
	as.user_id = id;
	as.part = part;
	rc = imap_ns_find(&as, name, b);
	free(as.user);
	if (rc != 0)
		return rc;
	if (!b->own) {
		rc = b->rights & STORE_ACL_READ ? 0 : STORE_ENOMBOX;
	} else if ((rc = store_txn_begin(srv->store, b->part, STORE_TXN_READ, &t)) == 0) {
		rc = store_mbox_find(t, id, name, &b->mbox);
		store_txn_abort(&t);
	}
	if (rc != 0)
		imap_ns_box_release(b);
	return rc;
}

/* Whether the session may use a URL of access u->access (the owner checked elsewhere). */
static bool urlauth_access_ok(const struct imap_client *c, const struct imap_url *u)
{
	const struct imapd_conf *ic = &conf_values(c->srv->conf)->imapd;

	switch (u->access) {
	case IMAP_URL_ACCESS_USER:
		return strcasecmp(u->access_user, c->user) == 0;
	case IMAP_URL_ACCESS_SUBMIT:
		return conf_list_has(ic->urlauth_submit_users, c->user, strlen(c->user));
	case IMAP_URL_ACCESS_AUTHUSER:
		return true;
	case IMAP_URL_ACCESS_ANONYMOUS: /* refused by policy (see the header) */
	case IMAP_URL_ACCESS_NONE:
		break;
	}
	return false;
}

void imap_urlauth_select(struct imap_client *c)
{
	/* the mechanisms GENURLAUTH takes for the mailbox (RFC 4467: SELECT and EXAMINE say
	   them as RESETKEY's OK does) */
	imap_printf(c, "* OK [URLMECH " URLAUTH_MECHS "] URLAUTH mechanisms\r\n");
}

/* imap_urlauth_verify with the key of annotation user kuser. */
static bool urlauth_verify(const struct imap_client *c, struct store_txn *t, uint64_t mbox,
			   uint64_t kuser, const struct imap_url *u, const char *s)
{
	char want[URLAUTH_TOKEN_LEN + 1], got[URLAUTH_TOKEN_LEN + 1];
	const void *key;

	if (u->access == IMAP_URL_ACCESS_NONE || strcasecmp(u->mech, "INTERNAL") != 0 ||
	    strlen(u->token) != URLAUTH_TOKEN_LEN || !urlauth_access_ok(c, u) ||
	    (u->has_expire && u->expire <= (int64_t)time(NULL)) ||
	    strcasecmp(u->host, c->srv->hostname) != 0 || urlauth_key(t, mbox, kuser, &key) != 0)
		return false;
	for (size_t i = 0; i < URLAUTH_TOKEN_LEN; i++)
		got[i] = u->token[i] >= 'A' && u->token[i] <= 'F' ? (char)(u->token[i] + 32)
								  : u->token[i];
	urlauth_token(key, URLAUTH_KEY_LEN, s, u->rump_len, want);
	return CRYPTO_memcmp(want, got, URLAUTH_TOKEN_LEN) == 0;
}

bool imap_urlauth_verify(const struct imap_client *c, struct store_txn *t, uint64_t mbox,
			 const struct imap_url *u, const char *s)
{
	return urlauth_verify(c, t, mbox, URLAUTH_KEY_USER, u, s);
}

int imap_url_bytes(struct imap_client *c, struct store_txn *t, unsigned part, uint64_t mbox,
		   const struct imap_url *u, int *fd_r, uint64_t *off_r, uint64_t *len_r,
		   struct buf *mem)
{
	struct imap_msgfile mf = { 0 };
	struct msgcache_view mv;
	struct store_status st;
	struct store_msg m;
	uint64_t size;
	int rc;

	if (u->uidvalidity != 0 &&
	    (store_mbox_status(t, mbox, &st) != 0 || st.uidvalidity != u->uidvalidity))
		return -1;
	if (store_msg_get(t, mbox, u->uid, &m) != 0)
		return -1;
	*fd_r = -1;
	*off_r = 0;
	*len_r = m.size;
	rc = 0;
	if (u->section[0] != '\0')
		rc = imap_msgfile_cache(c->srv->store, part, &m, &mf, &mv) < 0
			     ? -1
			     : imap_fetch_section_bytes(c, part, &m, &mv, &mf, u->section, off_r,
							len_r, mem);
	imap_msgfile_release(&mf);
	if (rc == 1) {
		*off_r = 0;
		*len_r = mem->len;
	} else if (rc < 0 || store_blob_open(c->srv->store, part, m.blob, fd_r, &size) != 0) {
		return -1;
	} else if (*off_r > size || *len_r > size - *off_r) {
		close(*fd_r);
		*fd_r = -1;
		return -1;
	}
	if (u->has_partial) {
		/* as FETCH's <o.l>: past the end, nothing */
		uint64_t po = u->partial_off < *len_r ? u->partial_off : *len_r;

		*off_r += po;
		*len_r -= po;
		if (u->partial_len != 0 && *len_r > u->partial_len)
			*len_r = u->partial_len;
	}
	return 0;
}

/* The URL argument a as a NUL-terminated copy (malloc'd) and parsed into u: NULL when it is
   no astring, too long or holds a NUL. */
static char *urlauth_arg(const struct imap_arg *a, struct imap_url *u, bool *parsed_r)
{
	char *s;

	*parsed_r = false;
	if (a == NULL || !imap_arg_is_astring(a) || a->len > URLAUTH_URL_MAX ||
	    (s = imap_arg_dup(a)) == NULL)
		return NULL;
	*parsed_r = imap_url_parse(s, a->len, u) == 0;
	return s;
}

/* ------------------------------------------------------------------------------------- */
/* GENURLAUTH url mechanism [url mechanism ...] */

struct urlauth_gen {
	size_t n;
	struct urlauth_gen_url {
		char *url;          /* the rump URL as the client wrote it */
		size_t rump;        /* its length */
		char *mbox;         /* the stored mailbox name */
		uint64_t id, kuser; /* the mailbox, its key's annotation user */
		char token[URLAUTH_TOKEN_LEN + 1];
	} u[URLAUTH_URLS_MAX];
	uint64_t user;
	unsigned part; /* every URL's mailbox is in this partition */
	bool create;   /* in the group commit: make the keys that are missing */
};

static void urlauth_gen_free(void *arg)
{
	struct urlauth_gen *g = arg;

	for (size_t i = 0; i < g->n; i++) {
		free(g->u[i].url);
		free(g->u[i].mbox);
	}
	free(g);
}

/* Every URL's token in t, making missing keys when g->create (a write txn): 0, STORE_ENOMSG
   (a key is missing, read txn), or the store's error. */
static int urlauth_gen_fn(struct store_txn *t, void *arg)
{
	struct urlauth_gen *g = arg;
	unsigned char fresh[URLAUTH_KEY_LEN];
	const void *key;
	uint64_t mbox;
	int rc;

	for (size_t i = 0; i < g->n; i++) {
		uint64_t kuser = g->u[i].kuser, owner;
		struct store_mbox_info mi;

		/* still there (a shared one may have gone since it was resolved) */
		if ((rc = store_mbox_info(t, mbox = g->u[i].id, &owner, &mi)) != 0)
			return rc;
		if ((rc = urlauth_key(t, mbox, kuser, &key)) == STORE_ENOMSG && g->create) {
			if (RAND_bytes(fresh, sizeof(fresh)) != 1)
				return STORE_EIO;
			rc = store_annot_set(t, mbox, kuser, URLAUTH_KEY_ENTRY,
					     strlen(URLAUTH_KEY_ENTRY), fresh, sizeof(fresh), 0);
			OPENSSL_cleanse(fresh, sizeof(fresh));
			if (rc == 0)
				rc = urlauth_key(t, mbox, kuser, &key);
		}
		if (rc != 0)
			return rc;
		urlauth_token(key, URLAUTH_KEY_LEN, g->u[i].url, g->u[i].rump, g->u[i].token);
	}
	return 0;
}

static bool urlauth_gen_reply(struct imap_cmd *cmd, struct urlauth_gen *g)
{
	struct imap_client *c = cmd->c;

	imap_write(c, "* GENURLAUTH", 12);
	for (size_t i = 0; i < g->n; i++) {
		char *full = xasprintf("%s:internal:%s", g->u[i].url, g->u[i].token);

		imap_write(c, " ", 1);
		imap_write_string(c, full, strlen(full));
		free(full);
	}
	imap_write(c, "\r\n", 2);
	return imap_cmd_ok(cmd, "GENURLAUTH completed");
}

static bool urlauth_gen_resume(struct imap_cmd *cmd)
{
	bool pending;
	int rc;
	struct urlauth_gen *g = imap_commit_result(cmd, &pending, &rc);

	if (pending)
		return false;
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, "GENURLAUTH");
	return urlauth_gen_reply(cmd, g);
}

/* One URL-mechanism pair checked into g->u[g->n]: NULL, or the reply's status ("BAD" or
   "NO") with its text in *why_r. */
static const char *urlauth_gen_one(struct imap_cmd *cmd, const struct imap_arg *a,
				   const struct imap_arg *mech, struct urlauth_gen *g,
				   const char **why_r)
{
	struct imap_client *c = cmd->c;
	struct urlauth_gen_url *gu = &g->u[g->n];
	struct imap_ns_box b;
	struct imap_url u;
	unsigned part;
	bool parsed;

	if ((gu->url = urlauth_arg(a, &u, &parsed)) == NULL || !parsed ||
	    u.access == IMAP_URL_ACCESS_NONE || u.token[0] != '\0') {
		free(gu->url); /* not counted in g->n yet: nothing else frees it */
		gu->url = NULL;
		*why_r = "GENURLAUTH takes rump URLs: imap://user@host/mailbox/;UID=n...;URLAUTH="
			 "access";
		return "BAD";
	}
	g->n++; /* freed with g from now on */
	if (mech == NULL || mech->type != IMAP_ARG_ATOM || !imap_arg_atom_is(mech, "INTERNAL")) {
		*why_r = "GENURLAUTH: the only mechanism is INTERNAL";
		return mech == NULL || mech->type != IMAP_ARG_ATOM ? "BAD" : "NO";
	}
	/* the user as logged in (the name URLFETCH finds in the store) */
	if (strcmp(u.user, c->user) != 0 || strcasecmp(u.host, c->srv->hostname) != 0) {
		*why_r = "GENURLAUTH: a URL of another user or server";
		return "NO";
	}
	if (u.access == IMAP_URL_ACCESS_ANONYMOUS) {
		*why_r = "GENURLAUTH: anonymous URLs are refused here";
		return "NO";
	}
	if ((gu->mbox = imap_mailbox_name_utf8(u.mailbox, strlen(u.mailbox), why_r)) == NULL)
		return "NO";
	if (urlauth_mailbox(c->srv, c->user, c->user_id, c->part, gu->mbox, &b) != 0) {
		*why_r = "[NONEXISTENT] GENURLAUTH: no such mailbox, or no right to read it";
		return "NO";
	}
	gu->id = b.mbox;
	gu->kuser = urlauth_kuser(b.own, c->user_id);
	part = b.part;
	imap_ns_box_release(&b);
	if (g->n > 1 && part != g->part) {
		*why_r = "GENURLAUTH: mailboxes of different partitions, one command each";
		return "NO";
	}
	g->part = part;
	gu->rump = u.rump_len;
	gu->url[u.rump_len] = '\0';
	return NULL;
}

bool cmd_genurlauth(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	size_t argc = imap_cmd_argc(cmd);
	struct urlauth_gen *g;
	struct store_txn *t = NULL;
	const char *status, *why = NULL;
	int rc;

	if (cmd->ctx != NULL)
		return urlauth_gen_resume(cmd);
	if (argc == 0 || argc % 2 != 0)
		return imap_cmd_bad(cmd, "Expected: GENURLAUTH url mechanism [url mechanism ...]");
	if (argc / 2 > URLAUTH_URLS_MAX)
		return imap_cmd_reply(cmd, "BAD", "GENURLAUTH: at most %d URLs", URLAUTH_URLS_MAX);
	g = xcalloc(1, sizeof(*g));
	g->user = c->user_id;
	for (size_t i = 0; i < argc; i += 2)
		if ((status = urlauth_gen_one(cmd, imap_cmd_arg(cmd, i), imap_cmd_arg(cmd, i + 1),
					      g, &why)) != NULL) {
			urlauth_gen_free(g);
			return imap_cmd_reply(cmd, status, "%s", why);
		}
	/* keys that exist are read; the first URL of a mailbox makes its key in a commit */
	if ((rc = store_txn_begin(c->srv->store, g->part, STORE_TXN_READ, &t)) == 0) {
		rc = urlauth_gen_fn(t, g);
		store_txn_abort(&t);
	}
	if (rc == 0) {
		bool done = urlauth_gen_reply(cmd, g);

		urlauth_gen_free(g);
		return done;
	}
	if (rc != STORE_ENOMSG) {
		urlauth_gen_free(g);
		return imap_cmd_store_error(cmd, rc, "GENURLAUTH");
	}
	g->create = true;
	imap_commit_start(cmd, g->part, NULL, urlauth_gen_fn, g, urlauth_gen_free);
	return false;
}

/* ------------------------------------------------------------------------------------- */
/* RESETKEY [mailbox [mechanism ...]] */

struct urlauth_reset {
	uint64_t user;
	char *mbox;         /* NULL: every mailbox of the user */
	uint64_t id, kuser; /* mbox's id and key user, when it is another's (id 0: own) */
	uint64_t *ids;
	size_t nids;
};

static void urlauth_reset_free(void *arg)
{
	struct urlauth_reset *r = arg;

	free(r->mbox);
	free(r->ids);
	free(r);
}

static int urlauth_reset_collect(const struct store_mbox_info *mi, void *arg)
{
	struct urlauth_reset *r = arg;

	r->ids = xreallocarray(r->ids, r->nids + 1, sizeof(*r->ids));
	r->ids[r->nids++] = mi->id;
	return 0;
}

static int urlauth_reset_fn(struct store_txn *t, void *arg)
{
	struct urlauth_reset *r = arg;
	uint64_t mbox;
	int rc;

	r->nids = 0;
	if (r->id != 0)
		return urlauth_key_drop(t, r->id, r->kuser);
	if (r->mbox != NULL) {
		if ((rc = store_mbox_find(t, r->user, r->mbox, &mbox)) != 0)
			return rc;
		return urlauth_key_drop(t, mbox, URLAUTH_KEY_USER);
	}
	if ((rc = store_mbox_list(t, r->user, "*", false, urlauth_reset_collect, r)) != 0)
		return rc;
	for (size_t i = 0; i < r->nids && rc == 0; i++)
		rc = urlauth_key_drop(t, r->ids[i], URLAUTH_KEY_USER);
	return rc;
}

static bool urlauth_reset_resume(struct imap_cmd *cmd)
{
	bool pending;
	int rc;
	struct urlauth_reset *r = imap_commit_result(cmd, &pending, &rc);

	if (pending)
		return false;
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, "RESETKEY");
	if (r->mbox == NULL)
		return imap_cmd_ok(cmd, "All keys removed");
	return imap_cmd_ok(cmd, "[URLMECH " URLAUTH_MECHS "] Key removed");
}

bool cmd_resetkey(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	size_t argc = imap_cmd_argc(cmd);
	const struct imap_arg *a = imap_cmd_arg(cmd, 0);
	struct urlauth_reset *r;
	unsigned part = c->part;
	const char *why;

	if (cmd->ctx != NULL)
		return urlauth_reset_resume(cmd);
	if (argc > 0 && !imap_arg_is_astring(a))
		return imap_cmd_bad(cmd, "Expected: RESETKEY [mailbox [mechanism ...]]");
	for (size_t i = 1; i < argc; i++) {
		const struct imap_arg *m = imap_cmd_arg(cmd, i);

		if (m->type != IMAP_ARG_ATOM)
			return imap_cmd_bad(cmd, "Expected: RESETKEY [mailbox [mechanism ...]]");
		if (!imap_arg_atom_is(m, "INTERNAL"))
			return imap_cmd_no(cmd, "RESETKEY: the only mechanism is INTERNAL");
	}
	r = xcalloc(1, sizeof(*r));
	r->user = c->user_id;
	if (argc > 0 && (r->mbox = imap_mailbox_name(c, a->s, a->len, &why)) == NULL) {
		urlauth_reset_free(r);
		return imap_cmd_no(cmd, why);
	}
	if (r->mbox != NULL) { /* one of another user's, shared with this one: its key here */
		struct imap_ns_box b;
		int rc = imap_ns_find(c, r->mbox, &b);

		if (rc != 0) {
			urlauth_reset_free(r);
			return imap_cmd_store_error(cmd, rc, "RESETKEY");
		}
		if (!b.own) {
			r->id = b.mbox;
			r->kuser = urlauth_kuser(false, c->user_id);
		}
		part = b.part;
		imap_ns_box_release(&b);
	}
	imap_commit_start(cmd, part, NULL, urlauth_reset_fn, r, urlauth_reset_free);
	return false;
}

/* ------------------------------------------------------------------------------------- */
/* URLFETCH url [url ...] */

/* Opens what a URLAUTH URL names for this session: 0 and the bytes as imap_url_bytes gives
   them, or -1 for every reason it may not be fetched (the answer is NIL either way). */
static int urlfetch_open(struct imap_client *c, const char *s, const struct imap_url *u, int *fd_r,
			 uint64_t *off_r, uint64_t *len_r, struct buf *mem)
{
	struct store_txn *t = NULL;
	struct store_user user;
	struct imap_ns_box b;
	const char *why;
	char *name;
	unsigned part;
	int rc = -1;

	*fd_r = -1;
	if (u->access == IMAP_URL_ACCESS_NONE || u->token[0] == '\0' ||
	    store_user_locate(c->srv->store, u->user, &part) != 0)
		return -1;
	if ((name = imap_mailbox_name_utf8(u->mailbox, strlen(u->mailbox), &why)) == NULL)
		return -1;
	/* the URL's user, and the mailbox as that user sees it (with 'r' on it now) */
	if (store_txn_begin(c->srv->store, part, STORE_TXN_READ, &t) == 0 &&
	    store_user_get(t, u->user, &user) == 0) {
		store_txn_abort(&t);
		if (urlauth_mailbox(c->srv, u->user, user.id, part, name, &b) == 0) {
			if (store_txn_begin(c->srv->store, b.part, STORE_TXN_READ, &t) == 0 &&
			    urlauth_verify(c, t, b.mbox, urlauth_kuser(b.own, user.id), u, s))
				rc = imap_url_bytes(c, t, b.part, b.mbox, u, fd_r, off_r, len_r,
						    mem);
			imap_ns_box_release(&b);
		}
	}
	store_txn_abort(&t);
	free(name);
	return rc;
}

/* A URLFETCH in progress: the next URL to answer. */
struct urlfetch {
	size_t next;
};

static void urlfetch_free(struct imap_cmd *cmd)
{
	free(cmd->ctx);
}

bool cmd_urlfetch(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	size_t argc = imap_cmd_argc(cmd);
	struct urlfetch *f = cmd->ctx;

	if (f == NULL) {
		if (argc == 0)
			return imap_cmd_bad(cmd, "Expected: URLFETCH url [url ...]");
		if (argc > URLAUTH_URLS_MAX)
			return imap_cmd_reply(cmd, "BAD", "URLFETCH: at most %d URLs",
					      URLAUTH_URLS_MAX);
		for (size_t i = 0; i < argc; i++) {
			const struct imap_arg *a = imap_cmd_arg(cmd, i);

			if (!imap_arg_is_astring(a) || a->len > URLAUTH_URL_MAX)
				return imap_cmd_reply(cmd, "BAD",
						      "URLFETCH takes URLs of at most %d bytes",
						      URLAUTH_URL_MAX);
		}
		cmd->ctx = f = xcalloc(1, sizeof(*f));
		cmd->ctx_free = urlfetch_free;
		imap_write(c, "* URLFETCH", 10);
	}
	while (f->next < argc) {
		const struct imap_arg *a = imap_cmd_arg(cmd, f->next);
		struct imap_url u;
		struct buf mem;
		uint64_t off, len;
		bool parsed;
		int fd = -1, rc = -1;
		char *s;

		if (imap_out_full(c) || c->stream.fd >= 0)
			return false; /* resumed when the output drained */
		f->next++;
		s = urlauth_arg(a, &u, &parsed); /* NULL (a NUL in it): not parsed, NIL */
		imap_write(c, " ", 1);
		imap_write_string(c, a->s, a->len);
		imap_write(c, " ", 1);
		buf_init(&mem, 1024, IMAP_HEADER_FILE_MAX + 16);
		if (parsed)
			rc = urlfetch_open(c, s, &u, &fd, &off, &len, &mem);
		free(s);
		if (rc < 0) {
			imap_write(c, "NIL", 3);
		} else {
			imap_printf(c, "{%" PRIu64 "}\r\n", len);
			if (fd >= 0)
				imap_client_stream_text(c, fd, off, len); /* closes fd */
			else if (len > 0)
				imap_write_text(c, mem.data + off, (size_t)len);
		}
		buf_release(&mem);
	}
	if (c->stream.fd >= 0)
		return false;
	imap_write(c, "\r\n", 2);
	return imap_cmd_ok(cmd, "URLFETCH completed");
}
