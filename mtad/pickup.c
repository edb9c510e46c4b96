/* pickup.c — owns the maildrop pickup ([mtad] maildrop): worker 0 takes the files
 * heron-sendmail left there while mtad was down (sendmail/sendmail_smtp.c writes them) and
 * submits each over the local submission socket, like a heron-sendmail run, then removes it.
 *
 * When: at start, at once when a file is renamed in (inotify IN_MOVED_TO), and every 10 s
 * (files a failed try kept, or an inotify queue overflow). One file at a time, in name
 * order, at most PICKUP_BATCH a scan. The loop opens and checks a file; its bytes (at most
 * max_message_size and its envelope) are read on a thread of the file's own, which holds no
 * store txn (read_thread), and the dialogue starts once they are in memory.
 *
 * Once: a file is removed only after mtad's 250 to the end of its data, that is once the
 * message is durable in the store or the queue; a 4xx or a lost connection keeps it for the
 * next scan. Its identity (file_key) goes with XUID, and mtad records it in the commit
 * behind that 250 (deliver.c, store_drop.c): before each file the pickup looks it up, and a
 * file recorded (mtad was killed between the 250 and the unlink) is only removed, then its
 * record dropped; at start the records of files that are gone are dropped.
 *
 * Trust: the directory is mode 1733 (anyone may create, only mtad's user may list or read
 * names, the sticky bit keeps others' files from being removed). A file is taken only when
 * it is a regular file (opened O_NOFOLLOW: a symbolic link to a store file is refused), has
 * one link (a hard link to another's file is refused) and fits [mtad] max_message_size; its
 * owner's uid, not anything the file says, is the submitter: XUID tells the session (which
 * accepts it from mtad's own uid only) so that the log and the Received: header name the
 * user as a socket submission would. A file that is malformed (or a link, or too large) is
 * renamed bad.NAME (kept for the admin, logged) and never tried again.
 *
 * Refused: a file mtad refuses with a 5xx (at MAIL, every RCPT, DATA or the final dot) is
 * the sender's to hear about, as heron-sendmail would have told them had mtad been up: a
 * delivery status notification (bounce.c, returning the headers) to the envelope sender
 * (to the file owner's login at the first local domain when MAIL refused the sender; none
 * for the null sender) goes into the queue in one commit with the file's record (kind
 * STORE_DROP_BOUNCE), then the file becomes bad.NAME and its record goes. A file found
 * recorded so (a kill between that commit and the rename) is only renamed: one DSN, never
 * none, never two. Recipients refused in a message accepted for others: the session is told
 * each (XREFUSED) and queues one DSN naming them to the envelope sender in the commit of the
 * message and the file's record (deliver.c): a file found recorded was notified too. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mtad/mtad.h"
#include "mtad/relay.h"
#include "store/store.h"

#define PICKUP_SCAN_S 10
#define PICKUP_BATCH 1000
#define PICKUP_TIMEOUT_S 120           /* per reply of the dialogue */
#define PICKUP_REPLY_MAX 65536         /* bytes of a reply read before giving up */
#define PICKUP_ENVELOPE_MAX (1u << 24) /* bytes of a file's envelope lines */
#define PICKUP_TMP_AGE_S 86400         /* an unfinished tmp.* file of a crashed writer */

enum step { P_GREET, P_EHLO, P_XUID, P_MAIL, P_RCPT, P_XREF, P_DATA, P_DOT };

struct refusal;

struct pickup {
	struct mtad *m;
	char dir[4096];
	char sock[108];
	struct event *timer, *inot;
	int ifd;
	bool dir_warned; /* its opendir failure was logged */
	char **names;    /* this scan's files, in order */
	size_t nnames, next;
	/* the file in flight */
	struct bufferevent *bev;
	char name[256];
	char key[STORE_DROP_KEY_MAX + 1]; /* its identity (file_key), its record's in the store */
	bool recorded;                    /* a record of key is in environment rec_part */
	unsigned rec_part;
	int64_t mtime;
	char *data; /* the whole file, NUL-terminated */
	size_t len, body_off;
	char *sender;
	char **rcpt;
	char **rerr; /* per recipient: its refusal's text, code left out (NULL: not refused) */
	size_t nrcpt, ri, accepted;
	long uid;
	enum step step;
	unsigned gen;              /* file_clear's count: a callback of an ended file stops */
	struct refusal *refusal;   /* its DSN's commit in flight (the scan waits for it) */
	struct file_read *reading; /* its read in flight (the scan waits for it) */
	int code;                  /* the reply being read */
	char text[512];            /* its first line */
};

static void next_file(struct pickup *p);

static void names_free(struct pickup *p)
{
	for (size_t i = 0; i < p->nnames; i++)
		free(p->names[i]);
	free(p->names);
	p->names = NULL;
	p->nnames = p->next = 0;
}

static void file_clear(struct pickup *p)
{
	if (p->bev != NULL)
		bufferevent_free(p->bev);
	p->bev = NULL;
	for (size_t i = 0; p->rerr != NULL && i < p->nrcpt; i++)
		free(p->rerr[i]);
	free(p->rerr);
	free(p->data);
	free(p->rcpt);
	p->rerr = NULL;
	p->data = NULL;
	p->rcpt = NULL;
	p->recorded = false;
	p->sender = NULL;
	p->nrcpt = p->ri = p->accepted = 0;
	p->name[0] = '\0';
	p->key[0] = '\0';
	p->gen++;
}

/* A file's identity, the key of its record (store_drop.c): its name, device, inode and
   modification time, so that a record is never taken for another file of the same name. */
static void file_key(const char *name, const struct stat *st, char *out, size_t size)
{
	snprintf(out, size, "%s/%ju/%ju/%lld.%09ld", name, (uintmax_t)st->st_dev,
		 (uintmax_t)st->st_ino, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

static int forget_fn(struct store_txn *t, void *arg)
{
	return store_drop_del_txn(t, arg);
}

static void forget_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			void *arg)
{
	if (result != 0)
		log_warnx("maildrop: the record of %s not dropped: %s (again at the next start)",
			  (char *)arg, store_strerror(result));
	free(arg);
}

/* Drops key's record in environment part (its file is gone), through the group commit. */
static void forget(struct pickup *p, const char *key, unsigned part)
{
	char *k = xstrdup(key);

	store_gc_submit(p->m->gc, part, NULL, forget_fn, k, forget_done, k);
}

/* The file is done with: removed (durable elsewhere), renamed bad.NAME, or kept. */
enum outcome { O_DONE, O_BAD, O_KEEP };

static void file_end(struct pickup *p, enum outcome o, const char *why)
{
	char path[sizeof(p->dir) + 300], bad[sizeof(path)];
	struct store_drop d;

	snprintf(path, sizeof(path), "%s/%s", p->dir, p->name);
	if (o == O_DONE) {
		/* its record stays until the file is gone: a record without a file is only
		   dropped, a file with one only removed (load) */
		if (unlink(path) < 0 && errno != ENOENT)
			log_warn("maildrop: removing %s (a later scan removes it)", path);
		else if (p->key[0] != '\0' && store_drop_get(p->m->store, p->key, &d) == 0)
			forget(p, p->key, d.part);
	}
	if (o == O_BAD) {
		snprintf(bad, sizeof(bad), "%s/bad.%s", p->dir, p->name + strlen("drop."));
		if (rename(path, bad) < 0)
			log_warn("maildrop: renaming %s", path);
		else if (p->recorded)
			forget(p, p->key, p->rec_part); /* its DSN is queued: the record's done */
		log_warnx("maildrop: %s uid=%ld not submitted: %s (kept as %s)", p->name, p->uid,
			  why, bad);
	} else if (o == O_KEEP) {
		log_info("maildrop: %s uid=%ld kept for a later try: %s", p->name, p->uid, why);
	}
	file_clear(p);
	if (o == O_KEEP)
		names_free(p); /* mtad is not taking mail now: the next scan */
}

/* The dialogue's end: the file's outcome, then the scan's next file. */
static void done(struct pickup *p, enum outcome o, const char *why)
{
	file_end(p, o, why);
	next_file(p);
}

static void say(struct pickup *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct pickup *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	evbuffer_add_vprintf(bufferevent_get_output(p->bev), fmt, ap);
	va_end(ap);
	evbuffer_add(bufferevent_get_output(p->bev), "\r\n", 2);
}

static void send_ehlo(struct pickup *p, int code)
{
	say(p, "EHLO %s", p->m->hostname);
}

static void send_xuid(struct pickup *p, int code)
{
	say(p, "XUID %ld %s", p->uid, p->key);
}

static void send_mail(struct pickup *p, int code)
{
	say(p, "MAIL FROM:<%s>", p->sender);
}

static void send_rcpt(struct pickup *p, int code)
{
	say(p, "RCPT TO:<%s>", p->rcpt[0]);
}

static void refuse(struct pickup *p, enum step st);
static void next_xref(struct pickup *p, int code);

/* A reply's text without its code ("5.1.1 ..."), as a queue entry keeps a last error. */
static char *reply_text(char *text)
{
	return strlen(text) > 4 ? text + 4 : text;
}

/* A recipient's reply (4xx ended the file before): the next RCPT, else DATA. */
static void next_rcpt(struct pickup *p, int code)
{
	if (code == 250 || code == 251) {
		p->accepted++;
	} else {
		log_warnx("maildrop: %s uid=%ld recipient <%s> refused: %s", p->name, p->uid,
			  p->rcpt[p->ri], p->text);
		if (p->rerr == NULL)
			p->rerr = xcalloc(p->nrcpt, sizeof(*p->rerr));
		p->rerr[p->ri] = xstrdup(reply_text(p->text));
	}
	if (++p->ri < p->nrcpt) {
		say(p, "RCPT TO:<%s>", p->rcpt[p->ri]);
		p->step = P_RCPT; /* again */
		return;
	}
	if (p->accepted == 0) {
		str_lcpy(p->text, "every recipient refused", sizeof(p->text));
		refuse(p, P_RCPT);
		return;
	}
	p->ri = 0;
	next_xref(p, 250);
}

/* Some recipients refused, others accepted: the session is told each refusal (XREFUSED,
   ours only: cmd_xuid's session) and queues their DSN in the commit of the message and the
   file's record (deliver.c), so a kill leaves both or neither; then DATA. */
static void next_xref(struct pickup *p, int code)
{
	while (p->rerr != NULL && p->ri < p->nrcpt && p->rerr[p->ri] == NULL)
		p->ri++;
	if (p->rerr != NULL && p->ri < p->nrcpt) {
		say(p, "XREFUSED %s %s", p->rcpt[p->ri], p->rerr[p->ri]);
		p->ri++;
		p->step = P_XREF;
		return;
	}
	say(p, "DATA");
	p->step = P_DATA;
}

static void send_body(struct pickup *p, int code)
{
	evbuffer_add(bufferevent_get_output(p->bev), p->data + p->body_off, p->len - p->body_off);
	if (p->len > p->body_off && p->data[p->len - 1] != '\n')
		evbuffer_add(bufferevent_get_output(p->bev), "\r\n", 2);
	evbuffer_add(bufferevent_get_output(p->bev), ".\r\n", 3);
}

/* The 250 to the data: the message and the file's record are in the queue (one commit):
   the file goes, then its record; the connection closes with it (the session ends at the
   EOF, after its transaction). */
static void submitted(struct pickup *p, int code)
{
	log_info("maildrop: %s uid=%ld submitted: %s", p->name, p->uid, p->text);
	done(p, O_DONE, NULL);
}

/* The dialogue, one row per reply awaited: the code that goes on (0: any 2xx or 5xx, the
   row's function decides), what a 5xx does to the file (a 4xx, or another code, keeps it
   for a later try: mtad is not taking mail now), and the function that sends the next
   line (the step is the next row's before it runs; it may set another). */
static const struct {
	int want;
	enum outcome on5xx;
	void (*next)(struct pickup *p, int code);
} dialogue[] = {
	[P_GREET] = { 220, O_KEEP, send_ehlo }, [P_EHLO] = { 250, O_KEEP, send_xuid },
	[P_XUID] = { 250, O_KEEP, send_mail },  [P_MAIL] = { 250, O_BAD, send_rcpt },
	[P_RCPT] = { 0, O_BAD, next_rcpt },     [P_XREF] = { 250, O_KEEP, next_xref },
	[P_DATA] = { 354, O_BAD, send_body },   [P_DOT] = { 250, O_BAD, submitted },
};

/* A refused file's DSN on its way into the queue with the file's record (one commit). What
   the DSN says is the refusal's own (the file and the pickup may be gone by the commit): its
   recipients, their refusals, the header it returns (from the bytes in memory). */
struct refusal {
	struct pickup *p; /* NULL once the pickup stopped */
	struct mtad *m;
	char *key, *to, *why;
	struct bounce_refused f;
	char **addr, **error; /* f's, n each */
	char *hdr;            /* f.header */
	struct bounce_dsn dsn;
};

/* In the committer's thread: the DSN's queue entry (its file written before the submission:
   refuse) and the file's record. */
static int refuse_fn(struct store_txn *t, void *arg)
{
	struct refusal *r = arg;
	int rc;

	if ((rc = store_queue_add_txn(t, &r->dsn.qm, r->dsn.blob, &r->dsn.id)) != 0)
		return rc;
	return store_drop_put_txn(t, r->key, r->dsn.id, STORE_DROP_BOUNCE);
}

static void refusal_free(struct refusal *r)
{
	store_blob_free(&r->dsn.blob);
	for (size_t i = 0; i < r->f.n; i++) {
		free(r->addr[i]);
		free(r->error[i]);
	}
	free(r->addr);
	free(r->error);
	free(r->f.why);
	free(r->hdr);
	free(r->key);
	free(r->to);
	free(r->why);
	free(r);
}

/* The DSN and the record are durable (result 0): the file becomes bad.NAME, then its record
   goes; else the file waits for a later try (refused again then, notified then). */
static void refuse_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			void *arg)
{
	struct refusal *r = arg;
	struct pickup *p = r->p;

	if (p == NULL) {
		refusal_free(r);
		return;
	}
	p->refusal = NULL;
	if (result == 0) {
		log_info("maildrop: %s uid=%ld refused: delivery status notification %016" PRIx64
			 " to <%s> queued",
			 p->name, p->uid, r->dsn.id, r->to);
		queue_runner_kick(p->m);
		p->recorded = true;
		p->rec_part = STORE_QUEUE_PART;
		done(p, O_BAD, r->why);
	} else {
		log_warnx("maildrop: %s uid=%ld: the notification of its refusal not queued: %s",
			  p->name, p->uid, store_strerror(result));
		done(p, O_KEEP, "its refusal's notification could not be queued");
	}
	refusal_free(r);
}

/* Whom a refused file's DSN goes to: its envelope sender, or when MAIL refused that, the
   file owner's login at the first local domain (else the host name). */
static char *refusal_to(const struct pickup *p, enum step st)
{
	const struct conf_list *dom = conf_values(p->m->conf)->mtad.local_domains;
	const char *domain = dom->n > 0 ? dom->v[0] : p->m->hostname;
	struct passwd pw, *pwr = NULL;
	char pwbuf[4096];

	if (st != P_MAIL)
		return xstrdup(p->sender);
	if (getpwuid_r((uid_t)p->uid, &pw, pwbuf, sizeof(pwbuf), &pwr) == 0 && pwr != NULL)
		return xasprintf("%s@%s", pw.pw_name, domain);
	return xasprintf("uid%ld@%s", p->uid, domain);
}

/* What the DSN of a file mtad refused with a 5xx at step st (p->text) says, into r (its
   file is written by refuse): every recipient failed, with its own refusal (RCPT) or the
   message's; the header returned is the file's, in memory since its read. */
static void refusal_dsn(struct pickup *p, struct refusal *r)
{
	const char *msg = p->data + p->body_off;
	size_t hlen = bounce_header_len(msg, p->len - p->body_off);

	r->addr = xcalloc(p->nrcpt, sizeof(*r->addr));
	r->error = xcalloc(p->nrcpt, sizeof(*r->error));
	for (size_t i = 0; i < p->nrcpt; i++) {
		r->addr[i] = xstrdup(p->rcpt[i]);
		r->error[i] = p->rerr != NULL && p->rerr[i] != NULL ? xstrdup(p->rerr[i]) : NULL;
	}
	r->hdr = xmalloc(hlen + 1);
	memcpy(r->hdr, msg, hlen);
	r->f.id = (uint64_t)clock_wall_us(); /* names the DSN only (Message-ID, boundary) */
	r->f.sender = r->to;
	r->f.created = p->mtime;
	r->f.n = p->nrcpt;
	r->f.stride = 1;
	r->f.addr = r->addr;
	r->f.error = r->error;
	r->f.why = xstrdup(reply_text(p->text));
	r->f.header = r->hdr;
	r->f.header_len = hlen;
}

static void refuse(struct pickup *p, enum step st)
{
	struct refusal *r = xcalloc(1, sizeof(*r));
	int rc;

	r->p = p;
	r->m = p->m;
	r->key = xstrdup(p->key);
	r->to = refusal_to(p, st);
	r->why = xstrdup(p->text);
	if (r->to[0] == '\0') {
		free(r->why);
		r->why = xasprintf("%s (the null sender: nobody notified)", p->text);
		free(r->to);
		r->to = NULL;
		done(p, O_BAD, r->why);
		refusal_free(r);
		return;
	}
	refusal_dsn(p, r);
	/* the DSN's file, written here as a message's is during DATA (the header is in memory),
	   so that the queue's write txn only references it, which makes it durable */
	if ((rc = bounce_prepare_refused(r->m, &r->f, -1, &r->dsn)) == 0 && r->dsn.blob == NULL)
		rc = STORE_EIO; /* not reached: a sender and recipients */
	if (rc != 0) {
		log_warnx("maildrop: %s uid=%ld: the notification of its refusal not written: %s",
			  p->name, p->uid, store_strerror(rc));
		done(p, O_KEEP, "its refusal's notification could not be written");
		refusal_free(r);
		return;
	}
	/* the session is done with (its callbacks stop: gen); the scan waits for the commit */
	bufferevent_free(p->bev);
	p->bev = NULL;
	p->gen++;
	p->refusal = r;
	store_gc_submit(p->m->gc, STORE_QUEUE_PART, NULL, refuse_fn, r, refuse_done, r);
}

/* The next step after a complete reply (p->code, p->text). */
static void advance(struct pickup *p)
{
	int c = p->code, cls = c / 100;
	enum step st = p->step;

	if (dialogue[st].want != 0 ? c != dialogue[st].want : cls != 2 && cls != 5) {
		if (cls == 5 && dialogue[st].on5xx == O_BAD)
			refuse(p, st);
		else
			done(p, cls == 5 ? dialogue[st].on5xx : O_KEEP, p->text);
		return;
	}
	p->step = st + 1;
	dialogue[st].next(p, c);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct pickup *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	unsigned gen = p->gen;
	char *line;
	size_t n;

	while (p->gen == gen && (line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF)) != NULL) {
		bool last = n == 3 || (n > 3 && line[3] == ' ');

		if (n < 3 || line[0] < '2' || line[0] > '5' || line[1] < '0' || line[1] > '9' ||
		    line[2] < '0' || line[2] > '9' ||
		    (n > 3 && line[3] != ' ' && line[3] != '-')) {
			free(line);
			done(p, O_KEEP, "a reply that is not SMTP");
			return;
		}
		if (p->text[0] == '\0')
			str_lcpy(p->text, line, sizeof(p->text));
		p->code = atoi(line);
		free(line);
		if (last) {
			advance(p);
			p->text[0] = '\0';
		}
	}
	if (p->gen == gen && evbuffer_get_length(in) > PICKUP_REPLY_MAX)
		done(p, O_KEEP, "a reply too long");
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct pickup *p = arg;

	if (what & BEV_EVENT_CONNECTED)
		return;
	done(p, O_KEEP,
	     (what & BEV_EVENT_TIMEOUT) ? "no reply in time"
	     : (what & BEV_EVENT_EOF)   ? "the connection closed"
					: "the connection failed");
}

/* The file's envelope: "HERON-MAILDROP 1", "S sender", "R rcpt"..., "". -1: malformed. */
static int parse(struct pickup *p)
{
	char *s = p->data, *end = p->data + p->len, *nl;
	size_t cap = 0;

	if (p->len < 18 || memcmp(s, "HERON-MAILDROP 1\n", 17) != 0)
		return -1;
	for (s += 17; s < end && *s != '\n'; s = nl + 1) {
		if ((nl = memchr(s, '\n', (size_t)(end - s))) == NULL ||
		    (size_t)(nl - p->data) > PICKUP_ENVELOPE_MAX || nl - s < 2 || s[1] != ' ')
			return -1;
		*nl = '\0';
		if (memchr(s, '\r', (size_t)(nl - s)) != NULL || strchr(s + 2, '<') != NULL ||
		    strchr(s + 2, '>') != NULL)
			return -1;
		if (s[0] == 'S' && p->sender == NULL) {
			p->sender = s + 2;
		} else if (s[0] == 'R' && nl - s > 2) {
			if (p->nrcpt == cap) {
				cap = cap ? cap * 2 : 8;
				p->rcpt = xreallocarray(p->rcpt, cap, sizeof(*p->rcpt));
			}
			p->rcpt[p->nrcpt++] = s + 2;
		} else {
			return -1;
		}
	}
	if (s >= end || p->sender == NULL || p->nrcpt == 0)
		return -1;
	p->body_off = (size_t)(s + 1 - p->data);
	return 0;
}

/* Whether p->key's message is in the queue already (its 250 came, its file was not removed
   before mtad stopped): 1, then the file is only removed; 2: it was refused and its DSN is
   queued (the file was not renamed bad before mtad stopped): it is only renamed; 0: not;
   -1: the record cannot be read now (logged): the file waits for a later try rather than
   risk a second copy. */
static int recorded(struct pickup *p)
{
	struct store_drop d;
	int rc = store_drop_get(p->m->store, p->key, &d);

	if (rc == STORE_ENOMSG)
		return 0;
	if (rc != 0) {
		log_warnx("maildrop: %s: its record cannot be read: %s", p->name,
			  store_strerror(rc));
		return -1;
	}
	p->recorded = true;
	p->rec_part = d.part;
	if (d.kind == STORE_DROP_BOUNCE) {
		log_info("maildrop: %s uid=%ld refused before (delivery status notification "
			 "%016" PRIx64 " queued)",
			 p->name, p->uid, d.qid);
		return 2;
	}
	if (d.kind == STORE_DROP_QUEUED)
		log_info("maildrop: %s uid=%ld submitted before (queue id %016" PRIx64
			 "): removed",
			 p->name, p->uid, d.qid);
	else
		log_info(
			"maildrop: %s uid=%ld submitted before (delivered, partition %u): removed",
			p->name, p->uid, d.part);
	return 1;
}

/* A file's bytes, read on a thread of its own that holds no store txn (not on worker 0's
   loop, which must not wait for a disk, nor in the group committer, whose partition's write
   txn would wait for it); the thread says it is done on an eventfd the loop watches. */
struct file_read {
	struct pickup *p;
	int fd, efd;
	struct event *ev;
	pthread_t th;
	char *data;
	size_t size, len;
};

static void start_dialogue(struct pickup *p);

/* the reader thread: at most r->size bytes (the file's size at load, within the limit) */
static void *read_thread(void *arg)
{
	struct file_read *r = arg;
	uint64_t one = 1;

	while (r->len < r->size) {
		ssize_t n = pread(r->fd, r->data + r->len, r->size - r->len, (off_t)r->len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		r->len += (size_t)n;
	}
	while (write(r->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	return NULL;
}

/* The thread is ended (joined: its bytes are ours) and its eventfd gone; r->fd stays. */
static void read_join(struct file_read *r)
{
	pthread_join(r->th, NULL);
	event_free(r->ev);
	close(r->efd);
}

/* On the loop: the bytes are in. */
static void read_done(evutil_socket_t fd, short what, void *arg)
{
	struct file_read *r = arg;
	struct pickup *p = r->p;
	bool whole = r->len == r->size;

	read_join(r);
	p->reading = NULL;
	close(r->fd); /* a refusal's DSN returns the headers from data */
	p->data = r->data;
	p->len = r->len;
	p->data[p->len] = '\0';
	free(r);
	if (!whole || parse(p) < 0) {
		done(p, O_BAD, "not a maildrop file of heron-sendmail");
		return;
	}
	start_dialogue(p);
}

/* A read the pickup's stop ends: waited for (one file, at most its limit, at mtad's exit). */
static void read_abandon(struct file_read **rp)
{
	struct file_read *r = *rp;

	read_join(r);
	close(r->fd);
	free(r->data);
	free(r);
	*rp = NULL;
}

/* Starts fd's read (read_done goes on); 0, or -1: no thread or eventfd now (logged). */
static int read_start(struct pickup *p, int fd, size_t size)
{
	struct file_read *r = xcalloc(1, sizeof(*r));
	int err;

	r->p = p;
	r->fd = fd;
	r->size = size;
	if ((r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		log_warn("maildrop: %s: eventfd", p->name);
		free(r);
		return -1;
	}
	r->data = xmalloc(size + 1);
	r->ev = event_new(p->m->base, r->efd, EV_READ, read_done, r);
	event_add(r->ev, NULL);
	if ((err = pthread_create(&r->th, NULL, read_thread, r)) != 0) {
		log_warnx("maildrop: %s: no reader thread: %s", p->name, strerror(err));
		event_free(r->ev);
		close(r->efd);
		free(r->data);
		free(r);
		return -1;
	}
	p->reading = r;
	return 0;
}

/* Opens and checks p->name, then has it read (read_done goes on); 0, or -1 (the file was
   renamed bad, or is gone, or cannot be read now: logged). */
static int load(struct pickup *p)
{
	uint64_t max = conf_values(p->m->conf)->mtad.max_message_size + PICKUP_ENVELOPE_MAX;
	char path[sizeof(p->dir) + 300];
	struct stat st;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%s", p->dir, p->name);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd == -1) {
		if (errno == ELOOP) {
			p->uid = -1;
			file_end(p, O_BAD, "a symbolic link");
			return -1;
		}
		if (errno != ENOENT)
			log_warn("maildrop: %s", path);
		file_clear(p);
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		log_warn("maildrop: %s", path);
		close(fd);
		file_clear(p);
		return -1;
	}
	p->uid = (long)st.st_uid;
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || (uint64_t)st.st_size > max) {
		close(fd);
		file_end(p, O_BAD,
			 !S_ISREG(st.st_mode) ? "not a regular file"
			 : st.st_nlink != 1   ? "a file with more than one link"
					      : "larger than max_message_size");
		return -1;
	}
	file_key(p->name, &st, p->key, sizeof(p->key));
	if ((rc = recorded(p)) != 0) {
		close(fd);
		file_end(p,
			 rc == 1   ? O_DONE
			 : rc == 2 ? O_BAD
				   : O_KEEP,
			 rc == 2 ? "refused (its sender was notified)"
				 : "its record cannot be read");
		return -1;
	}
	p->mtime = (int64_t)st.st_mtime;
	if (read_start(p, fd, (size_t)st.st_size) < 0) { /* at most max: checked above */
		close(fd);
		file_end(p, O_KEEP, "it cannot be read now");
		return -1;
	}
	return 0;
}

/* The file is read and parsed: its dialogue over the local submission socket. */
static void start_dialogue(struct pickup *p)
{
	struct timeval tv = { PICKUP_TIMEOUT_S, 0 };
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	str_lcpy(sun.sun_path, p->sock, sizeof(sun.sun_path));
	p->bev = bufferevent_socket_new(p->m->base, -1, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(p->bev, read_cb, NULL, event_cb, p);
	bufferevent_set_timeouts(p->bev, &tv, &tv);
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
	p->step = P_GREET;
	p->text[0] = '\0';
	if (bufferevent_socket_connect(p->bev, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		file_end(p, O_KEEP, "cannot connect to local_submission");
}

/* Starts on the next file of the scan, if any (its read first). */
static void next_file(struct pickup *p)
{
	while (p->next < p->nnames && !p->m->draining) {
		str_lcpy(p->name, p->names[p->next++], sizeof(p->name));
		if (load(p) < 0)
			continue; /* load ended it: renamed bad, or gone */
		return;
	}
	if (p->next >= p->nnames)
		names_free(p);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists the complete files (drop.*) and starts on them; removes a writer's tmp.* left
   over a day. Nothing while a scan is in progress. */
static void scan(struct pickup *p)
{
	DIR *d;
	struct dirent *de;
	size_t cap = 0;
	time_t now = time(NULL);

	if (p->nnames > 0 || p->bev != NULL || p->refusal != NULL || p->reading != NULL ||
	    p->m->draining)
		return;
	if ((d = opendir(p->dir)) == NULL) {
		if (!p->dir_warned)
			log_warn("maildrop: %s (tried again every %d s)", p->dir, PICKUP_SCAN_S);
		p->dir_warned = true;
		return;
	}
	p->dir_warned = false;
	while ((de = readdir(d)) != NULL && p->nnames < PICKUP_BATCH) {
		struct stat st;

		if (strncmp(de->d_name, "tmp.", 4) == 0 &&
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now - st.st_mtime > PICKUP_TMP_AGE_S) {
			if (unlinkat(dirfd(d), de->d_name, 0) == 0)
				log_info("maildrop: removed %s, unfinished for a day", de->d_name);
			continue;
		}
		if (strncmp(de->d_name, "drop.", 5) != 0 || strlen(de->d_name) >= sizeof(p->name))
			continue;
		if (p->nnames == cap) {
			cap = cap ? cap * 2 : 16;
			p->names = xreallocarray(p->names, cap, sizeof(*p->names));
		}
		p->names[p->nnames++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (p->nnames == 0)
		return;
	qsort(p->names, p->nnames, sizeof(*p->names), name_cmp);
	next_file(p);
}

/* A record whose file is gone (removed after its 250; mtad stopped before the record was
   dropped) is dropped; one whose file is there stays for load to see. */
struct sweep {
	struct pickup *p;
	size_t seen, dropped;
};

static int sweep_one(const struct store_drop *d, void *arg)
{
	struct sweep *sw = arg;
	struct pickup *p = sw->p;
	const char *slash = strchr(d->key, '/');
	char path[sizeof(p->dir) + 300], key[STORE_DROP_KEY_MAX + 1] = "";
	struct stat st;

	if (strncmp(d->key, "drop.", 5) != 0)
		return 0; /* not a file's: the queue runner's delivery records (queue_runner.c) */
	if (slash != NULL && (size_t)(slash - d->key) < sizeof(p->name)) {
		snprintf(path, sizeof(path), "%s/%.*s", p->dir, (int)(slash - d->key), d->key);
		if (lstat(path, &st) == 0)
			file_key(strrchr(path, '/') + 1, &st, key, sizeof(key));
	}
	sw->seen++;
	if (strcmp(key, d->key) != 0) {
		forget(p, d->key, d->part);
		sw->dropped++;
	}
	return 0;
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	scan(arg);
}

static void inotify_cb(evutil_socket_t fd, short what, void *arg)
{
	char b[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	while (read(fd, b, sizeof(b)) > 0)
		; /* which file does not matter: the scan lists them */
	scan(arg);
}

void pickup_start(struct mtad *m)
{
	const struct mtad_conf *mc = &conf_values(m->conf)->mtad;
	struct timeval tv = { PICKUP_SCAN_S, 0 };
	struct pickup *p;
	int rc;

	if (mc->maildrop[0] == '\0' || m->worker != 0)
		return;
	p = xcalloc(1, sizeof(*p));
	p->m = m;
	p->ifd = -1;
	str_lcpy(p->dir, mc->maildrop, sizeof(p->dir));
	for (size_t i = 0; i < mc->local_submission->n && p->sock[0] == '\0'; i++)
		if (mc->local_submission->v[i].unix_path)
			str_lcpy(p->sock, mc->local_submission->v[i].host, sizeof(p->sock));
	if (p->sock[0] == '\0') {
		log_warnx("maildrop: %s is not picked up: [mtad] local_submission names no unix "
			  "socket",
			  p->dir);
		free(p);
		return;
	}
	p->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (p->ifd == -1 || inotify_add_watch(p->ifd, p->dir, IN_MOVED_TO) == -1) {
		log_warn("maildrop: inotify on %s (scanned every %d s only)", p->dir,
			 PICKUP_SCAN_S);
		if (p->ifd != -1)
			close(p->ifd);
		p->ifd = -1;
	} else {
		p->inot = event_new(m->base, p->ifd, EV_READ | EV_PERSIST, inotify_cb, p);
		event_add(p->inot, NULL);
	}
	p->timer = event_new(m->base, -1, EV_PERSIST, timer_cb, p);
	event_add(p->timer, &tv);
	m->pickup = p;
	/* the records of files that are gone, before any file is taken (PICKUP_BATCH a start:
	   a few at most, one per kill between a 250 and its record's removal) */
	struct sweep sw = { p, 0, 0 };

	if ((rc = store_drop_list(m->store, PICKUP_BATCH, sweep_one, &sw)) != 0)
		log_warnx("maildrop: the records of submitted files: %s", store_strerror(rc));
	else
		log_info("maildrop: %s: %zu records of submitted files, %zu of files gone dropped",
			 p->dir, sw.seen, sw.dropped);
	scan(p);
}

void pickup_stop(struct mtad *m)
{
	struct pickup *p = m->pickup;

	if (p == NULL)
		return;
	/* a dialogue in flight ends here; its file stays for the next start (a refusal's
	   commit in flight ends without it) */
	if (p->refusal != NULL)
		p->refusal->p = NULL;
	if (p->reading != NULL)
		read_abandon(&p->reading);
	file_clear(p);
	names_free(p);
	if (p->inot != NULL)
		event_free(p->inot);
	if (p->ifd != -1)
		close(p->ifd);
	event_free(p->timer);
	free(p);
	m->pickup = NULL;
}
