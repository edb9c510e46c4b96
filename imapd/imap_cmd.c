/* imap_cmd.c — owns the command table (name, states, flags, handler: STYLE 5), dispatching a
 * parsed line to its handler, and the tagged reply that ends every command. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/proxy.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

struct imap_cmd_def {
	const char *name;
	unsigned states;
	bool (*fn)(struct imap_cmd *cmd);
	unsigned flags;
};

static const struct imap_cmd_def imap_cmds[] = {
	/* name          allowed in        handler          flags */
	{ "CAPABILITY", IMAP_ST_ANY, cmd_capability, 0 },
	{ "NOOP", IMAP_ST_ANY, cmd_noop, 0 },
	{ "LOGOUT", IMAP_ST_ANY, cmd_logout, 0 },
	{ "ID", IMAP_ST_ANY, cmd_id, 0 },
	{ "STARTTLS", IMAP_ST_NOTAUTH, cmd_starttls, 0 },
	{ "LOGIN", IMAP_ST_NOTAUTH, cmd_login, 0 },
	{ "AUTHENTICATE", IMAP_ST_NOTAUTH, cmd_authenticate, 0 },
	{ "ENABLE", IMAP_ST_LOGGED, cmd_enable, 0 },
	{ "COMPRESS", IMAP_ST_LOGGED, cmd_compress, 0 },
	{ "UNAUTHENTICATE", IMAP_ST_LOGGED, cmd_unauthenticate, 0 },
	{ "SELECT", IMAP_ST_LOGGED, cmd_select, 0 },
	{ "EXAMINE", IMAP_ST_LOGGED, cmd_select, CMD_READONLY },
	{ "CREATE", IMAP_ST_LOGGED, cmd_create, 0 },
	{ "DELETE", IMAP_ST_LOGGED, cmd_delete, 0 },
	{ "RENAME", IMAP_ST_LOGGED, cmd_rename, 0 },
	{ "SUBSCRIBE", IMAP_ST_LOGGED, cmd_subscribe, 0 },
	{ "UNSUBSCRIBE", IMAP_ST_LOGGED, cmd_subscribe, CMD_ALT },
	{ "LIST", IMAP_ST_LOGGED, cmd_list, 0 },
	{ "LSUB", IMAP_ST_LOGGED, cmd_list, CMD_ALT },
	{ "NAMESPACE", IMAP_ST_LOGGED, cmd_namespace, 0 },
	{ "STATUS", IMAP_ST_LOGGED, cmd_status, 0 },
	{ "APPEND", IMAP_ST_LOGGED, cmd_append, 0 },
	{ "IDLE", IMAP_ST_LOGGED, cmd_idle, 0 },
	{ "NOTIFY", IMAP_ST_LOGGED, cmd_notify, 0 },
	{ "GETQUOTA", IMAP_ST_LOGGED, cmd_quota, 0 },
	{ "GETQUOTAROOT", IMAP_ST_LOGGED, cmd_quota, CMD_ALT },
	{ "SETQUOTA", IMAP_ST_LOGGED, cmd_setquota, 0 },
	{ "MYRIGHTS", IMAP_ST_LOGGED, cmd_myrights, 0 },
	{ "GETACL", IMAP_ST_LOGGED, cmd_getacl, 0 },
	{ "LISTRIGHTS", IMAP_ST_LOGGED, cmd_getacl, CMD_ALT },
	{ "SETACL", IMAP_ST_LOGGED, cmd_setacl, 0 },
	{ "DELETEACL", IMAP_ST_LOGGED, cmd_setacl, CMD_ALT },
	{ "GETMETADATA", IMAP_ST_LOGGED, cmd_getmetadata, 0 },
	{ "SETMETADATA", IMAP_ST_LOGGED, cmd_setmetadata, 0 },
	{ "RESETKEY", IMAP_ST_LOGGED, cmd_resetkey, 0 }, /* URLAUTH: cmd_urlauth.c */
	{ "GENURLAUTH", IMAP_ST_LOGGED, cmd_genurlauth, 0 },
	{ "URLFETCH", IMAP_ST_LOGGED, cmd_urlfetch, 0 },
	{ "CHECK", IMAP_ST_SELECTED, cmd_noop, CMD_REV1 },
	{ "CLOSE", IMAP_ST_SELECTED, cmd_close, 0 },
	{ "UNSELECT", IMAP_ST_SELECTED, cmd_close, CMD_ALT },
	{ "EXPUNGE", IMAP_ST_SELECTED, cmd_expunge, CMD_UID },
	{ "SEARCH", IMAP_ST_SELECTED, cmd_search, CMD_UID | CMD_NO_EXPUNGE },
	{ "FETCH", IMAP_ST_SELECTED, cmd_fetch, CMD_UID | CMD_NO_EXPUNGE },
	{ "SORT", IMAP_ST_SELECTED, cmd_sort, CMD_UID | CMD_NO_EXPUNGE },
	{ "CANCELUPDATE", IMAP_ST_SELECTED, cmd_cancelupdate, 0 },
	{ "THREAD", IMAP_ST_SELECTED, cmd_thread, CMD_UID | CMD_NO_EXPUNGE },
	{ "STORE", IMAP_ST_SELECTED, cmd_store, CMD_UID | CMD_NO_EXPUNGE },
	{ "COPY", IMAP_ST_SELECTED, cmd_copy, CMD_UID },
	{ "MOVE", IMAP_ST_SELECTED, cmd_copy, CMD_UID | CMD_MOVE },
	{ "REPLACE", IMAP_ST_SELECTED, cmd_append, CMD_UID | CMD_ALT },
};

const struct imap_cmd_def *imap_cmd_find(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(imap_cmds) / sizeof(imap_cmds[0]); i++)
		if (str_caseeq(name, len, imap_cmds[i].name, strlen(imap_cmds[i].name)))
			return &imap_cmds[i];
	return NULL;
}

#define NCMDS (sizeof(imap_cmds) / sizeof(imap_cmds[0]))

/* Table names, then "UID X" for each X with a UID form, then "unknown". */
static const char *metric_names[2 * NCMDS + 2];
static unsigned metric_uid_index[NCMDS];

const char *const *imap_cmd_metric_names(void)
{
	size_t n = NCMDS;

	if (metric_names[0] != NULL)
		return metric_names;
	for (size_t i = 0; i < NCMDS; i++) {
		metric_names[i] = imap_cmds[i].name;
		if (imap_cmds[i].flags & CMD_UID) {
			metric_uid_index[i] = (unsigned)n;
			metric_names[n++] = xasprintf("UID %s", imap_cmds[i].name);
		}
	}
	metric_names[n] = "unknown";
	return metric_names;
}

unsigned imap_cmd_metric_index(const struct imap_cmd *cmd)
{
	size_t i;

	imap_cmd_metric_names();
	if (cmd->def == NULL)
		for (i = 0; metric_names[i] != NULL; i++)
			if (strcmp(metric_names[i], "unknown") == 0)
				return (unsigned)i;
	i = (size_t)(cmd->def - imap_cmds);
	return cmd->uid ? metric_uid_index[i] : (unsigned)i;
}

/* Fills c->cmd from the parsed line; true when the tagged reply was sent (the command cannot
   run), as a handler's true. */
static bool cmd_prepare(struct imap_client *c)
{
	struct imap_cmd *cmd = &c->cmd;
	size_t n;
	const struct imap_arg *a = imap_parser_args(c->parser, &n);

	memset(cmd, 0, sizeof(*cmd));
	cmd->c = c;
	cmd->tag = imap_parser_tag(c->parser);
	cmd->start_us = clock_mono_us();
	if (a[0].type != IMAP_ARG_ATOM)
		return imap_cmd_bad(cmd, "Command name expected");
	if (imap_arg_atom_is(&a[0], "UID")) {
		if (n < 2 || a[1].type != IMAP_ARG_ATOM)
			return imap_cmd_bad(cmd, "UID needs a command");
		cmd->uid = true;
		cmd->def = imap_cmd_find(a[1].s, a[1].len);
		if (cmd->def == NULL || !(cmd->def->flags & CMD_UID))
			return imap_cmd_bad(cmd, "Unknown UID command");
		cmd->args = a + 2;
		cmd->nargs = n - 2;
	} else {
		cmd->def = imap_cmd_find(a[0].s, a[0].len);
		if (cmd->def == NULL)
			return imap_cmd_bad(cmd, "Unknown command");
		cmd->args = a + 1;
		cmd->nargs = n - 1;
	}
	cmd->def_flags = cmd->def->flags;
	if (c->rev2 && (cmd->def->flags & CMD_REV1)) /* RFC 9051 removed it (CHECK) */
		return imap_cmd_bad(cmd, "Unknown command in IMAP4rev2 (use NOOP)");
	if (!(cmd->def->states & c->state)) {
		if (c->state == IMAP_ST_NOTAUTH)
			return imap_cmd_no(cmd, "Log in first");
		if (cmd->def->states == IMAP_ST_SELECTED)
			return imap_cmd_bad(cmd, "No mailbox selected");
		return imap_cmd_bad(cmd, "Already logged in");
	}
	/* another user's selected mailbox: its rights as they are now */
	return c->view != NULL && cmd->def->fn != cmd_logout &&
	       imap_ns_recheck(c, cmd->def->fn == cmd_close);
}

void imap_cmd_run(struct imap_client *c)
{
	if (!c->cmd_active) {
		c->cmd_active = true;
		if (cmd_prepare(c))
			return;
	}
	c->cmd.def->fn(&c->cmd);
}

bool imap_cmd_reply(struct imap_cmd *cmd, const char *status, const char *fmt, ...)
{
	struct imap_client *c = cmd->c;
	va_list ap;
	bool bad = strcmp(status, "BAD") == 0;
	bool allow_expunge = cmd->def == NULL || !(cmd->def->flags & CMD_NO_EXPUNGE) || cmd->uid;

	if (c->notify != NULL && !bad && c->state != IMAP_ST_LOGOUT)
		imap_notify_flush(c, allow_expunge); /* NOTIFY's before the tagged reply */
	if (c->view != NULL && !bad && c->state == IMAP_ST_SELECTED)
		imap_view_sync(c, allow_expunge);
	imap_printf(c, "%s %s ", cmd->tag != NULL ? cmd->tag : "*", status);
	va_start(ap, fmt);
	evbuffer_add_vprintf(imap_out(c), fmt, ap);
	va_end(ap);
	imap_write(c, "\r\n", 2);
	imap_metrics_command(cmd, status);
	log_debug("%016" PRIx64 " imap cmd=%s user=%s result=%s us=%" PRIu64, c->id,
		  cmd->def != NULL ? cmd->def->name : "?", c->user != NULL ? c->user : "-", status,
		  clock_mono_us() - cmd->start_us);
	if (!bad)
		c->nbad = 0;
	else
		imap_client_count_bad(c);
	if (cmd->ctx_free != NULL)
		cmd->ctx_free(cmd);
	if (c->nappend > 0) /* APPEND blobs of a command that did not take them */
		imap_client_append_reset(c);
	cmd->ctx = NULL;
	cmd->ctx_free = NULL;
	c->cmd_active = false;
	if (c->srv->draining && !(c->flags & IMAP_CF_CLOSING)) {
		/* SIGTERM: the command in progress was finished; now say goodbye */
		imap_printf(c, "* BYE Server shutting down\r\n");
		imap_client_close(c, "shutdown");
	} else if ((c->flags & (IMAP_CF_KICKED | IMAP_CF_CLOSING)) == IMAP_CF_KICKED) {
		imap_printf(c, "* BYE Disconnected by the administrator\r\n");
		imap_client_close(c, "kicked");
	}
	return true;
}

bool imap_cmd_ok(struct imap_cmd *cmd, const char *text)
{
	return imap_cmd_reply(cmd, "OK", "%s", text);
}

bool imap_cmd_bad(struct imap_cmd *cmd, const char *text)
{
	return imap_cmd_reply(cmd, "BAD", "%s", text);
}

bool imap_cmd_no(struct imap_cmd *cmd, const char *text)
{
	return imap_cmd_reply(cmd, "NO", "%s", text);
}

bool imap_cmd_store_error(struct imap_cmd *cmd, int err, const char *what)
{
	const char *code = "";

	if (err == STORE_EMOVED) /* another user's mailbox, its owner moved away (imap_ns.c) */
		return imap_cmd_reply(
			cmd, "NO",
			"[CANNOT] %s: the mailbox's owner has moved to another host; "
			"mailboxes are shared on their owner's host only",
			what);
	switch (err) {
	case STORE_ENOMBOX:
		code = "[NONEXISTENT] ";
		break;
	case STORE_EEXIST:
		code = "[ALREADYEXISTS] ";
		break;
	case STORE_EQUOTA:
		code = "[OVERQUOTA] ";
		break;
	case STORE_ENOTSUP:
		code = "[CANNOT] ";
		break;
	case STORE_EINVAL:
		code = "[CANNOT] ";
		break;
	case STORE_ELIMIT:
		code = "[LIMIT] ";
		break;
	default:
		if (store_err_temporary(err))
			code = "[UNAVAILABLE] ";
		else
			code = "[SERVERBUG] ";
	}
	if (store_err_temporary(err) || err == STORE_ECORRUPT)
		log_warnx("%016" PRIx64 " imap %s user=%s error=\"%s\"", cmd->c->id, what,
			  cmd->c->user ? cmd->c->user : "-", store_strerror(err));
	return imap_cmd_reply(cmd, "NO", "%s%s: %s", code, what, store_strerror(err));
}

const struct imap_arg *imap_cmd_arg(const struct imap_cmd *cmd, size_t i)
{
	const struct imap_arg *a = cmd->args, *end = cmd->args + cmd->nargs;

	while (a < end && i > 0) {
		a = imap_arg_next(a);
		i--;
	}
	return a < end ? a : NULL;
}

size_t imap_cmd_argc(const struct imap_cmd *cmd)
{
	const struct imap_arg *a = cmd->args, *end = cmd->args + cmd->nargs;
	size_t n = 0;

	for (; a < end; a = imap_arg_next(a))
		n++;
	return n;
}

char *imap_arg_dup(const struct imap_arg *a)
{
	if (a == NULL || !imap_arg_is_astring(a) || memchr(a->s, '\0', a->len) != NULL)
		return NULL;
	return xmemdup0(a->s, a->len);
}

void imap_capability(struct imap_client *c, struct buf *out)
{
	struct imap_server *srv = c->srv;
	bool tls = c->flags & IMAP_CF_TLS;

	buf_puts(
		out,
		"IMAP4rev1 IMAP4rev2 LITERAL+ SASL-IR LOGIN-REFERRALS ID ENABLE IDLE NAMESPACE "
		"UNSELECT CHILDREN "
		"UIDPLUS MOVE SPECIAL-USE CREATE-SPECIAL-USE STATUS=SIZE ESEARCH CONDSTORE QRESYNC WITHIN LIST-EXTENDED LIST-STATUS SEARCHRES "
		"QUOTA QUOTA=RES-STORAGE "
		"QUOTA=RES-MESSAGE BINARY MULTIAPPEND CATENATE UTF8=ACCEPT SORT SORT=DISPLAY ESORT "
		"CONTEXT=SEARCH CONTEXT=SORT "
		"THREAD=ORDEREDSUBJECT THREAD=REFERENCES THREAD=REFS OBJECTID PREVIEW PARTIAL SAVEDATE REPLACE ACL RIGHTS=texk "
		"METADATA METADATA-SERVER LIST-METADATA"
		" NOTIFY"
		" URLAUTH");
	if (c->state == IMAP_ST_NOTAUTH) {
		if (srv->tls_ctx != NULL && !tls)
			buf_puts(out, " STARTTLS");
		if (tls || srv->allow_plaintext)
			buf_puts(out, " AUTH=PLAIN");
		else
			buf_puts(out, " LOGINDISABLED");
		if (tls && proxy_fronts_enabled() && imap_proxy_from_front(c))
			buf_puts(out, " AUTH=EXTERNAL"); /* a front's certificate (cmd_auth.c) */
		imap_scram_caps(c, out);
	} else {
		/* COMPRESS after login only: the login exchange stays readable */
		if (!(c->flags & IMAP_CF_COMPRESS))
			buf_puts(out, " COMPRESS=DEFLATE");
		buf_puts(out, " UNAUTHENTICATE");
		buf_printf(out, " APPENDLIMIT=%" PRIu64, srv->max_append);
	}
}
