/* bounce.c — owns delivery status notifications (RFC 3464): a multipart/report with a text
 * part, the message/delivery-status part (per failed recipient: Final-Recipient, Original-
 * Recipient, Action, Status, Remote-MTA, Diagnostic-Code) and the returned headers or message
 * (RET=HDRS/FULL), queued from the null sender to the original sender. Never to the null
 * sender; never for recipients that asked NOTIFY=NEVER or left FAILURE out. Also the delay
 * notice (Action: delayed, headers returned) for recipients still being retried. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "mtad/relay.h"

#define BOUNCE_BOUNDARY_FMT "%016" PRIx64 "/%s"
#define RETURN_MAX (64 * 1024)        /* headers returned at most */
#define REPORT_HEAD_MAX (1024 * 1024) /* the report up to the returned headers */

static bool wants_bounce(const struct store_queue_rcpt *r)
{
	return r->notify == 0 ||
	       ((r->notify & STORE_NOTIFY_FAILURE) && !(r->notify & STORE_NOTIFY_NEVER));
}

/* Whether recipient i is in this DSN. */
static bool in_dsn(const struct qjob *job, size_t i, enum dsn_kind kind)
{
	if (kind == DSN_DELAYED)
		return job->delayed[i];
	return job->result[i] == STORE_Q_FAILED && wants_bounce(&job->qm.rcpt[i]);
}

static void rfc5322_date(int64_t t, char *out, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	localtime_r(&tt, &tm);
	strftime(out, size, "%a, %d %b %Y %H:%M:%S %z", &tm);
}

static void report_head(struct buf *b, const struct mtad *m, const struct qjob *job,
			const char *boundary, enum dsn_kind kind)
{
	bool delayed = kind == DSN_DELAYED;
	const char *host = m->hostname;
	char date[64], arrival[64];

	rfc5322_date(time(NULL), date, sizeof(date));
	rfc5322_date(job->qm.created, arrival, sizeof(arrival));
	buf_printf(
		b,
		"From: Mail Delivery System <MAILER-DAEMON@%s>\r\n"
		"To: <%s>\r\nSubject: %s\r\n"
		"Date: %s\r\nMessage-ID: <%016" PRIx64 ".%s@%s>\r\n"
		"Auto-Submitted: auto-replied\r\nMIME-Version: 1.0\r\n"
		"Content-Type: multipart/report; report-type=delivery-status;\r\n"
		"\tboundary=\"%s\"\r\n\r\n"
		"This is a MIME-encapsulated message.\r\n\r\n--%s\r\n"
		"Content-Type: text/plain; charset=us-ascii\r\n\r\n"
		"This is the mail system at host %s.\r\n\r\n%s\r\n\r\n",
		host, job->qm.sender,
		delayed ? "Delayed Mail (still being retried)"
			: "Undelivered Mail Returned to Sender",
		date, job->qm.id, delayed ? "delay" : "bounce", host, boundary, boundary, host,
		delayed ? "Your message could not be delivered yet to one or more recipients;\r\n"
			  "delivery is still being tried. You need not send it again."
			: "Your message could not be delivered to one or more recipients.");
	for (size_t i = 0; i < job->qm.nrcpt; i++)
		if (in_dsn(job, i, kind))
			buf_printf(b, "<%s>: %s\r\n", job->qm.rcpt[i].addr,
				   job->error[i] ? job->error[i] : "failed");
	buf_printf(b,
		   "\r\n--%s\r\nContent-Type: message/delivery-status\r\n\r\n"
		   "Reporting-MTA: dns; %s\r\n",
		   boundary, host);
	if (job->qm.envid != NULL)
		buf_printf(b, "Original-Envelope-Id: %s\r\n", job->qm.envid);
	buf_printf(b, "Arrival-Date: %s\r\n", arrival);
}

static void report_rcpt(struct buf *b, const struct mtad *m, const struct qjob *job, size_t i,
			enum dsn_kind kind)
{
	const struct store_queue_rcpt *r = &job->qm.rcpt[i];
	char dsn[16];

	buf_printf(b, "\r\nFinal-Recipient: rfc822; %s\r\n", r->addr);
	const char *semi = r->orcpt ? strchr(r->orcpt, ';') : NULL;
	char orig[RCPT_ORCPT_MAX + 1];
	if (semi != NULL &&
	    mailaddr_xtext_decode(semi + 1, strlen(semi + 1), orig, sizeof(orig)) == 0)
		buf_printf(b, "Original-Recipient: %.*s; %s\r\n", (int)(semi - r->orcpt), r->orcpt,
			   orig);
	buf_printf(b, "Action: %s\r\nStatus: %s\r\n", kind == DSN_DELAYED ? "delayed" : "failed",
		   queue_dsn_of(job->error[i], kind == DSN_DELAYED ? 400 : 500, dsn, sizeof(dsn)));
	if (job->remote[i] != NULL && strcmp(job->remote[i], "none") != 0)
		buf_printf(b, "Remote-MTA: dns; %s\r\n", job->remote[i]);
	buf_printf(b, "Diagnostic-Code: smtp; %s\r\n", job->error[i] ? job->error[i] : "failed");
	if (kind == DSN_DELAYED) {
		char until[64];

		rfc5322_date(job->qm.created +
				     conf_values(m->conf)->mtad.max_queue_lifetime_ms / 1000,
			     until, sizeof(until));
		buf_printf(b, "Will-Retry-Until: %s\r\n", until);
	}
}

size_t bounce_header_len(const char *msg, size_t len)
{
	size_t n = len < RETURN_MAX ? len : RETURN_MAX;
	const char *end = memmem(msg, n, "\r\n\r\n", 4);

	return end != NULL ? (size_t)(end - msg) + 2 : n;
}

int bounce_read_header(int fd, struct buf *hdr)
{
	char chunk[16 * 1024];
	ssize_t n;

	buf_reset(hdr);
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		size_t from = hdr->len > 3 ? hdr->len - 3 : 0, keep = (size_t)n;
		char *end;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return STORE_EIO;
		if (hdr->len + keep > RETURN_MAX)
			keep = RETURN_MAX - hdr->len;
		if (buf_append(hdr, chunk, keep) < 0)
			return STORE_EIO; /* not reached: hdr's max is RETURN_MAX or more */
		/* the empty line may begin in an earlier chunk: looked for from 3 bytes back */
		end = memmem(hdr->data + from, hdr->len - from, "\r\n\r\n", 4);
		if (end != NULL) {
			buf_truncate(hdr, (size_t)(end - hdr->data) + 2);
			return 0;
		}
		if (hdr->len >= RETURN_MAX)
			return 0;
	}
	return 0;
}

/* Appends the original from fd (its offset on): headers only unless full. */
static int return_original(struct store_blob *blob, int fd, bool full)
{
	char chunk[16 * 1024];
	struct buf hdr;
	ssize_t n;
	int rc;

	if (!full) {
		buf_init(&hdr, 4096, RETURN_MAX);
		if ((rc = bounce_read_header(fd, &hdr)) == 0)
			rc = store_blob_write(blob, hdr.data, hdr.len);
		buf_release(&hdr);
		return rc;
	}
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return STORE_EIO;
		if ((rc = store_blob_write(blob, chunk, (size_t)n)) != 0)
			return rc;
	}
	return 0;
}

/* The DSN's text into b, the original read from fd (-1: the queue file of job->qm.id), or
   when hdr is not NULL its header, hlen bytes in memory (the headers-only kinds). */
static int bounce_write(struct mtad *m, const struct qjob *job, struct store_blob *b,
			enum dsn_kind kind, int fd, const char *hdr, size_t hlen)
{
	/* a delay notice returns the headers only: the message is still on its way */
	/* a REQUIRETLS message's body goes nowhere its sender did not allow (RFC 8689 5) */
	bool full = job->qm.ret == STORE_RET_FULL && kind == DSN_FAILED && !job->qm.requiretls;
	char boundary[64];
	struct buf head;
	uint64_t size;
	int rc, qfd = -1;

	snprintf(boundary, sizeof(boundary), BOUNCE_BOUNDARY_FMT, job->qm.id, m->hostname);
	buf_init(&head, 4096, REPORT_HEAD_MAX);
	report_head(&head, m, job, boundary, kind);
	for (size_t i = 0; i < job->qm.nrcpt; i++)
		if (in_dsn(job, i, kind))
			report_rcpt(&head, m, job, i, kind);
	buf_printf(&head, "\r\n--%s\r\nContent-Type: %s\r\n\r\n", boundary,
		   full ? "message/rfc822" : "text/rfc822-headers");
	rc = store_blob_write(b, head.data, head.len);
	buf_reset(&head);
	if (hdr != NULL) {
		if (rc == 0)
			rc = store_blob_write(b, hdr, hlen);
	} else {
		if (rc == 0 && fd < 0 &&
		    (rc = store_queue_open(m->store, job->qm.id, &qfd, &size)) == 0)
			fd = qfd;
		if (rc == 0)
			rc = return_original(b, fd, full);
	}
	if (qfd != -1)
		close(qfd);
	buf_printf(&head, "\r\n--%s--\r\n", boundary);
	if (rc == 0)
		rc = store_blob_write(b, head.data, head.len);
	buf_release(&head);
	return rc;
}

/* The DSN in d (see bounce_prepare), its blob finished by finish. */
static int dsn_build(struct mtad *m, const struct qjob *job, enum dsn_kind kind, int fd,
		     const char *hdr, size_t hlen, struct bounce_dsn *d,
		     int (*finish)(struct store_blob *b))
{
	size_t n = 0;
	int rc;

	memset(d, 0, sizeof(*d));
	d->kind = kind;
	for (size_t i = 0; i < job->qm.nrcpt; i++)
		n += in_dsn(job, i, kind);
	if (n == 0)
		return 0;
	if (job->qm.sender[0] == '\0') {
		log_info("%016" PRIx64 ": no bounce: null sender", job->qm.id);
		return 0;
	}
	if ((rc = store_blob_new(m->store, STORE_QUEUE_PART, &d->blob)) == 0 &&
	    (rc = bounce_write(m, job, d->blob, kind, fd, hdr, hlen)) == 0 &&
	    (rc = finish(d->blob)) == 0) {
		d->to.addr = job->qm.sender;
		d->qm.sender = "";
		d->qm.size = store_blob_size(d->blob);
		d->qm.nrcpt = 1;
		d->qm.rcpt = &d->to;
		/* the DSN itself goes as usual (it must reach the sender), with the headers only */
		return 0;
	}
	store_blob_free(&d->blob);
	log_warnx("%016" PRIx64 ": bounce failed: %s", job->qm.id, store_strerror(rc));
	return rc;
}

int bounce_prepare(struct queue_runner *qr, const struct qjob *job, enum dsn_kind kind,
		   struct bounce_dsn *d)
{
	return dsn_build(qr->m, job, kind, -1, NULL, 0, d, store_blob_finish_deferred);
}

int bounce_prepare_refused(struct mtad *m, const struct bounce_refused *f, int fd,
			   struct bounce_dsn *d)
{
	struct qjob job = { 0 };
	int rc;

	job.qm.id = f->id;
	job.qm.sender = f->sender;
	job.qm.created = f->created;
	job.qm.ret = STORE_RET_HDRS;
	job.qm.nrcpt = f->n;
	job.qm.rcpt = xcalloc(f->n, sizeof(*job.qm.rcpt));
	job.result = xcalloc(f->n, sizeof(*job.result));
	job.error = xcalloc(f->n, sizeof(*job.error));
	job.remote = xcalloc(f->n, sizeof(*job.remote));
	for (size_t i = 0; i < f->n; i++) {
		char *error = f->error != NULL ? f->error[i * f->stride] : NULL;

		job.qm.rcpt[i].addr = f->addr[i * f->stride];
		job.result[i] = STORE_Q_FAILED;
		job.error[i] = error != NULL ? error : f->why;
	}
	rc = dsn_build(m, &job, DSN_FAILED, fd, f->header, f->header_len, d,
		       store_blob_finish_deferred);
	free(job.qm.rcpt);
	free(job.result);
	free(job.error);
	free(job.remote);
	return rc;
}

void bounce_queued(struct queue_runner *qr, const struct qjob *job, struct bounce_dsn *d, int rc)
{
	if (d->blob == NULL)
		return;
	store_blob_free(&d->blob);
	if (rc != 0) {
		log_warnx("%016" PRIx64 ": bounce failed: %s", job->qm.id, store_strerror(rc));
		return;
	}
	log_info("%016" PRIx64 ": sender %s notification: %016" PRIx64, job->qm.id,
		 d->kind == DSN_DELAYED ? "delay" : "non-delivery", d->id);
	queue_runner_kick(qr->m);
}

int bounce_send(struct queue_runner *qr, const struct qjob *job, enum dsn_kind kind)
{
	struct bounce_dsn d;
	int rc = dsn_build(qr->m, job, kind, -1, NULL, 0, &d, store_blob_finish);

	if (rc != 0 || d.blob == NULL)
		return rc;
	rc = store_queue_add(qr->m->store, &d.qm, d.blob, &d.id);
	bounce_queued(qr, job, &d, rc);
	return rc;
}
