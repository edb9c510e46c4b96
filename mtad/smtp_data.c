/* smtp_data.c — owns the message stream: the Received: header, DATA with dot-unstuffing and
 * the strict end <CRLF>.<CRLF>, BDAT chunks, the line-end check (a bare LF or bare CR is refused
 * or turned into CRLF by `bare_lf`; neither ever ends a message), the size limit and the hop
 * count, all while the bytes stream into the store — never held whole in memory; the bytes
 * of a BURL (smtp_burl.c) go the way of a BDAT chunk's. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/conf_keys.h"
#include "common/log.h"
#include "common/str.h"
#include "mtad/milter.h"
#include "mtad/mtad.h"

/* Bytes of a line taken at once when no line end is in sight. */
#define DATA_CHUNK (64 * 1024)
/* Received: headers a message may carry before it is taken for a loop (RFC 5321 6.3). */
#define MAX_HOPS 100

static const char *protocol(const struct smtp_session *s)
{
	/* RFC 3848 / 6531 names */
	if (s->flags & SF_LMTP)
		return (s->flags & SF_TLS) ? "LMTPS" : "LMTP";
	if (!(s->flags & SF_ESMTP))
		return "SMTP";
	if (s->tx->mp.smtputf8)
		return (s->flags & SF_TLS) ? ((s->flags & SF_AUTH) ? "UTF8SMTPSA" : "UTF8SMTPS")
					   : ((s->flags & SF_AUTH) ? "UTF8SMTPA" : "UTF8SMTP");
	return (s->flags & SF_TLS) ? ((s->flags & SF_AUTH) ? "ESMTPSA" : "ESMTPS")
				   : ((s->flags & SF_AUTH) ? "ESMTPA" : "ESMTP");
}

int smtp_data_start(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	char date[64], hdr[1400], login[80], auth[120];
	time_t now = time(NULL);
	struct tm tm;

	if (deliver_open(s) < 0) {
		smtp_reply(s, "451 4.3.0 Local error, try again later");
		return -1;
	}
	tx->data_deadline = clock_mono_ms() + s->m->lim.max_data_ms;
	localtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S %z", &tm);
	auth[0] = '\0';
	if ((s->flags & SF_AUTH) && conf_values(s->m->conf)->mtad.received_auth) {
		/* who sent it, for abuse reports: the login, as a comment (RFC 5322 3.2.2) */
		str_log_name(login, sizeof(login), s->user);
		for (char *p = login; *p != '\0'; p++)
			*p = *p == '(' || *p == ')' ? '?' : *p;
		snprintf(auth, sizeof(auth), "\r\n\t(authenticated as %s)", login);
	} else if (s->flags & SF_LOCAL) {
		/* local submission: the process's uid, as the kernel told it */
		snprintf(auth, sizeof(auth), "\r\n\t(local submission from uid %ld)", s->peer_uid);
	}
	/* the client's HELO is its claim; the address is what we saw */
	snprintf(hdr, sizeof(hdr),
		 "Received: from %s (%s)%s\r\n\tby %s (Heron) with %s id %016" PRIx64 "%s%s%s;\r\n"
		 "\t%s\r\n",
		 s->helo[0] ? s->helo : "unknown", s->addr, auth, s->m->hostname, protocol(s),
		 tx->qid, tx->nrcpt == 1 ? "\r\n\tfor <" : "",
		 tx->nrcpt == 1 ? tx->rcpt[0].addr : "", tx->nrcpt == 1 ? ">" : "", date);
	tx->at_bol = tx->prev_crlf = tx->in_headers = true;
	if (deliver_write(s, hdr, strlen(hdr)) < 0)
		tx->err = TX_EIO;
	mtad_auth_data_start(s, hdr, strlen(hdr));
	return 0;
}

static void pass(struct smtp_session *s, const char *p, size_t n)
{
	struct smtp_tx *tx = s->tx;

	if (n == 0 || tx->err != TX_OK)
		return;
	if (tx->size + n > s->m->lim.max_message_size) {
		tx->err = TX_ETOOBIG;
		return;
	}
	if (memchr(p, '\0', n) != NULL) {
		/* neither text nor 8BITMIME (RFC 6152) allows NUL, and IMAP would have to serve
		   it in a literal: refused, as imapd refuses it in an APPEND */
		tx->err = TX_ENUL;
		return;
	}
	tx->size += n;
	if (deliver_write(s, p, n) < 0)
		tx->err = TX_EIO;
	else
		mtad_auth_data(s, p, n);
}

/* The index of the next CR or LF in p[i..n), or n. */
static size_t next_cr_or_lf(const char *p, size_t i, size_t n)
{
	const char *lf = memchr(p + i, '\n', n - i);
	size_t end = lf != NULL ? (size_t)(lf - p) : n;
	const char *cr = memchr(p + i, '\r', end - i);

	return cr != NULL ? (size_t)(cr - p) : end;
}

/* Passes message bytes on, checking line ends across calls: a CR not followed by LF, or an LF
   not preceded by CR, is bare; it makes the message refused, or becomes CRLF (normalize).
   Only CR and LF bytes are looked at one by one; the runs between them are skipped with
   memchr. */
static void emit(struct smtp_session *s, const char *p, size_t n)
{
	struct smtp_tx *tx = s->tx;
	bool fix = s->m->lim.bare_lf_normalize;
	size_t start = 0, i = 0;

	while (i < n) {
		if (tx->cr && p[i] != '\n') {
			if (!fix)
				tx->err = tx->err ? tx->err : TX_EBARELF;
			pass(s, p + start, i - start);
			pass(s, "\n", fix ? 1 : 0);
			start = i;
		}
		if (p[i] == '\n' && !tx->cr) {
			if (!fix)
				tx->err = tx->err ? tx->err : TX_EBARELF;
			pass(s, p + start, i - start);
			pass(s, "\r\n", 2);
			start = i + 1;
		}
		tx->cr = p[i] == '\r';
		if (p[i] != '\r' && p[i] != '\n')
			i = next_cr_or_lf(p, i + 1, n); /* plain bytes: nothing to check */
		else
			i++;
	}
	pass(s, p + start, n - start);
}

/* The Message-ID for the log line: printable bytes, at most sizeof(tx->msgid) - 1. */
static void msgid_take(struct smtp_tx *tx, const char *v, size_t len)
{
	struct str_view t = str_trim((struct str_view){ v, len });
	size_t n = t.len < sizeof(tx->msgid) - 1 ? t.len : sizeof(tx->msgid) - 1;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)t.p[i];

		tx->msgid[i] = c > ' ' && c < 0x7f && c != '"' && c != '\\' ? (char)c : '?';
	}
	tx->msgid[n] = '\0';
	tx->msgid_next = n == 0;
}

/* Header lines seen at the start of a line while still in the header. */
static void header_line(struct smtp_session *s, const char *l, size_t len)
{
	struct smtp_tx *tx = s->tx;
	bool next = tx->msgid_next;

	tx->msgid_next = false;
	if (next && (l[0] == ' ' || l[0] == '\t'))
		msgid_take(tx, l, len);
	else if (tx->msgid[0] == '\0' && str_caseprefix(l, len, "Message-ID:"))
		msgid_take(tx, l + 11, len - 11);
	if (len <= 2 && (l[0] == '\r' || l[0] == '\n')) {
		tx->in_headers = false;
	} else if (str_caseprefix(l, len, "Received:") && ++tx->hops > MAX_HOPS &&
		   tx->err == TX_OK) {
		tx->err = TX_EHOPS;
	}
}

/* One whole line (with its LF, at most DATA_CHUNK bytes) of DATA; 1 at the final dot. */
static int data_line(struct smtp_session *s, const char *l, size_t len)
{
	struct smtp_tx *tx = s->tx;
	bool crlf = len >= 2 && l[len - 2] == '\r';

	if (tx->at_bol && tx->prev_crlf && crlf && len == 3 && l[0] == '.')
		return 1;
	size_t skip = tx->at_bol && tx->prev_crlf && l[0] == '.';
	if (tx->in_headers && tx->at_bol)
		header_line(s, l + skip, len - skip);
	emit(s, l + skip, len - skip);
	tx->at_bol = true;
	tx->prev_crlf = crlf;
	return 0;
}

/* The lines wholly inside the first chain of in, read in place (no search, no copy);
   *used_r bytes were consumed (drained by the caller). 1 at the final dot. */
static int data_chain(struct smtp_session *s, struct evbuffer *in, size_t *used_r)
{
	struct evbuffer_iovec v;
	size_t off = 0;
	int end = 0;

	if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
		return 0;
	const char *p = v.iov_base;
	while (off < v.iov_len && !end) {
		size_t room = v.iov_len - off;
		const char *nl = memchr(p + off, '\n', room < DATA_CHUNK ? room : DATA_CHUNK);

		if (nl == NULL)
			break;
		size_t len = (size_t)(nl - (p + off)) + 1;
		end = data_line(s, p + off, len);
		off += len;
	}
	*used_r = off;
	return end;
}

int smtp_data_feed(struct smtp_session *s, struct evbuffer *in)
{
	struct smtp_tx *tx = s->tx;

	for (;;) {
		size_t used = 0;
		int end = data_chain(s, in, &used);

		evbuffer_drain(in, used);
		if (end)
			return 1;
		if (used > 0)
			continue;
		/* the next line goes past the first chain, or is long */
		size_t avail = evbuffer_get_length(in);
		struct evbuffer_ptr eol = evbuffer_search(in, "\n", 1, NULL);
		size_t len = eol.pos < 0 ? 0 : (size_t)eol.pos + 1;

		if (avail == 0 || (eol.pos < 0 && avail < DATA_CHUNK))
			return 0;
		if (eol.pos < 0 || len > DATA_CHUNK) {
			/* a long line: pass a piece on; it cannot be the final dot */
			const char *p = (const char *)evbuffer_pullup(in, DATA_CHUNK);
			size_t skip = tx->at_bol && tx->prev_crlf && p[0] == '.';

			emit(s, p + skip, DATA_CHUNK - skip);
			evbuffer_drain(in, DATA_CHUNK);
			tx->at_bol = tx->prev_crlf = false;
			continue;
		}
		end = data_line(s, (const char *)evbuffer_pullup(in, (ssize_t)len), len);
		evbuffer_drain(in, len);
		if (end)
			return 1;
	}
}

void smtp_data_append(struct smtp_session *s, const char *p, size_t n)
{
	emit(s, p, n);
}

void smtp_chunk_done(struct smtp_session *s, bool last)
{
	struct smtp_tx *tx = s->tx;

	if (last) {
		if (tx->cr) {
			/* the message ended with a bare CR */
			if (s->m->lim.bare_lf_normalize)
				pass(s, "\n", 1);
			else if (tx->err == TX_OK)
				tx->err = TX_EBARELF;
		}
		smtp_data_done(s);
	} else if (tx->err != TX_OK) {
		smtp_data_done(s);
	} else {
		smtp_reply(s, "250 2.0.0 %" PRIu64 " octets received", tx->size);
	}
}

int smtp_bdat_feed(struct smtp_session *s, struct evbuffer *in)
{
	struct smtp_tx *tx = s->tx;

	while (tx->chunk_left > 0) {
		size_t avail = evbuffer_get_length(in);

		if (avail == 0)
			return 0;
		size_t n = avail < DATA_CHUNK ? avail : DATA_CHUNK;
		if (n > tx->chunk_left)
			n = (size_t)tx->chunk_left;
		const char *p = (const char *)evbuffer_pullup(in, (ssize_t)n);
		emit(s, p, n);
		evbuffer_drain(in, n);
		tx->chunk_left -= n;
	}
	smtp_chunk_done(s, tx->chunk_last);
	return 1;
}

void smtp_data_done(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	const char *reply = NULL;

	switch (tx->err) {
	case TX_OK:
		/* the message's trace: session, queue id and Message-ID on one line */
		log_info("%016" PRIx64 " smtp data qid=%016" PRIx64 " from=<%s> size=%" PRIu64
			 " nrcpt=%zu message-id=%s",
			 s->id, tx->qid, tx->from, tx->size, tx->nrcpt,
			 tx->msgid[0] ? tx->msgid : "none");
		smtp_set_state(s, ST_WAIT);
		if (mtad_auth_end(s)) /* it goes on to the milters, or refuses */
			return;
		milter_then_commit(s);
		return;
	case TX_ETOOBIG:
		reply = "552 5.3.4 Message size exceeds fixed limit";
		break;
	case TX_EBARELF:
		reply = "554 5.6.11 Bare CR or LF in message not allowed";
		break;
	case TX_EHOPS:
		reply = "554 5.4.6 Too many hops (mail loop?)";
		break;
	case TX_ENUL:
		reply = "554 5.6.0 NUL characters in message not allowed";
		break;
	case TX_EIO:
		reply = "451 4.3.0 Local error, try again later";
		break;
	}
	log_info("%016" PRIx64 " smtp data qid=%016" PRIx64 " from=<%s> message-id=%s "
		 "result=fail reason=\"%s\"",
		 s->id, tx->qid, tx->from, tx->msgid[0] ? tx->msgid : "none", reply + 10);
	/* LMTP answers once per recipient (RFC 2033 4.2) */
	size_t n = (s->flags & SF_LMTP) ? tx->nrcpt : 1;
	smtp_tx_free(&s->tx);
	smtp_set_state(s, ST_READY);
	for (size_t i = 0; i < n; i++)
		smtp_reply(s, "%s", reply);
}
