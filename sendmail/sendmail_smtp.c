/* sendmail_smtp.c — heron-sendmail's SMTP side: the unix-socket connection to mtad's local
 * submission listener, reading replies (bounded), the envelope, the message stream (LF to
 * CRLF, dot-stuffed, ended by EOF or, without -i, a lone "."), the mapping of replies to
 * sysexits.h codes, -bs's relay between stdio and the socket, and the maildrop file written
 * instead when mtad is not running. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sysexits.h>
#include <unistd.h>

#include "common/str.h"
#include "sendmail/sendmail.h"

#define REPLY_LINE_MAX 1024
#define REPLY_LINES_MAX 100

struct conn {
	int fd;
	FILE *in; /* replies */
	bool verbose;
	char text[2048]; /* the last reply, lines joined by " / " */
};

/* down_r (may be NULL): set when mtad is not running (no socket, or no one listening); the
   caller may drop the message then, so nothing is printed for it. */
static int sm_connect(const struct sm *sm, struct conn *c, bool *down_r)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	memset(c, 0, sizeof(*c));
	c->verbose = sm->verbose;
	str_lcpy(sun.sun_path, sm->socket, sizeof(sun.sun_path));
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd == -1 || connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		int e = errno;

		if (c->fd != -1)
			close(c->fd);
		if (down_r != NULL && (e == ENOENT || e == ECONNREFUSED)) {
			*down_r = true;
			return EX_TEMPFAIL;
		}
		fprintf(stderr,
			"heron-sendmail: cannot reach mtad at %s: %s (is mtad running "
			"with [mtad] local_submission?)\n",
			sm->socket, strerror(e));
		return e == EACCES || e == EPERM ? EX_NOPERM : EX_TEMPFAIL;
	}
	c->in = fdopen(dup(c->fd), "r");
	return c->in == NULL ? EX_OSERR : 0;
}

static void sm_close(struct conn *c)
{
	if (c->in != NULL)
		fclose(c->in);
	close(c->fd);
}

static int send_all(struct conn *c, const void *p, size_t n)
{
	const char *s = p;

	while (n > 0) {
		ssize_t w = write(c->fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			fprintf(stderr, "heron-sendmail: writing the message: %s\n",
				strerror(errno));
			return -1;
		}
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

static int cmd(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cmd(struct conn *c, const char *fmt, ...)
{
	char line[SM_ADDR_MAX + 600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (c->verbose)
		fprintf(stderr, ">>> %s\n", line);
	str_lcat(line, "\r\n", sizeof(line));
	return send_all(c, line, strlen(line));
}

/* One reply: its code (the text in c->text), or -1 when mtad closed or spoke garbage. */
static int reply(struct conn *c)
{
	char line[REPLY_LINE_MAX + 2];
	int code = -1;

	c->text[0] = '\0';
	for (int n = 0; n < REPLY_LINES_MAX; n++) {
		if (fgets(line, sizeof(line), c->in) == NULL)
			break;
		size_t len = strcspn(line, "\r\n");

		line[len] = '\0';
		if (c->verbose)
			fprintf(stderr, "<<< %s\n", line);
		if (len < 3 || line[0] < '2' || line[0] > '5' || line[1] < '0' || line[1] > '9' ||
		    line[2] < '0' || line[2] > '9' ||
		    (len > 3 && line[3] != ' ' && line[3] != '-'))
			break;
		int this = (line[0] - '0') * 100 + (line[1] - '0') * 10 + (line[2] - '0');

		if (code != -1 && this != code)
			break;
		code = this;
		if (c->text[0] != '\0')
			str_lcat(c->text, " / ", sizeof(c->text));
		str_lcat(c->text, line, sizeof(c->text));
		if (len == 3 || line[3] == ' ')
			return code;
	}
	if (c->text[0] == '\0')
		str_lcpy(c->text, "(connection closed)", sizeof(c->text));
	return -1;
}

/* A failed step: the reply's code as sysexits.h's. */
static int exit_of(int code)
{
	if (code < 0)
		return EX_PROTOCOL;
	if (code >= 400 && code < 500)
		return EX_TEMPFAIL;
	if (code == 553 || code == 501)
		return EX_DATAERR; /* the address's syntax */
	return code == 550 || code == 551 ? EX_NOUSER : EX_UNAVAILABLE;
}

static int fail(struct conn *c, const char *what, int code)
{
	fprintf(stderr, "heron-sendmail: %s: %s\n", what, c->text);
	sm_close(c);
	return exit_of(code);
}

/* One line of the message (as read, with or without its LF) to the socket: CRLF, a leading
   dot doubled. */
static int send_line(struct conn *c, const char *l, size_t n)
{
	bool lf = n > 0 && l[n - 1] == '\n';
	size_t len = lf ? n - 1 : n;

	if (len > 0 && l[len - 1] == '\r')
		len--;
	if (len > 0 && l[0] == '.' && send_all(c, ".", 1) < 0)
		return -1;
	return send_all(c, l, len) < 0 || send_all(c, "\r\n", 2) < 0 ? -1 : 0;
}

static bool lone_dot(const char *l, size_t n)
{
	return (n == 1 && l[0] == '.') || (n == 2 && l[0] == '.' && l[1] == '\n') ||
	       (n == 3 && l[0] == '.' && l[1] == '\r' && l[2] == '\n');
}

/* The message after the header block: the line that ended it, then the rest of stdin. */
static int send_body(const struct sm *sm, struct conn *c)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	if (sm->first_body == NULL || sm->blank_sep) {
		if (send_all(c, "\r\n", 2) < 0)
			return -1;
	} else if (!sm->dot_ok && lone_dot(sm->first_body, sm->first_body_len)) {
		return 0;
	} else if (send_all(c, "\r\n", 2) < 0 || /* the header's end, then that line */
		   send_line(c, sm->first_body, sm->first_body_len) < 0) {
		return -1;
	}
	if (sm->first_body == NULL)
		return 0;
	while (rc == 0 && (n = getline(&line, &cap, stdin)) > 0) {
		if (!sm->dot_ok && lone_dot(line, (size_t)n))
			break;
		rc = send_line(c, line, (size_t)n);
	}
	if (rc == 0 && ferror(stdin)) {
		fprintf(stderr, "heron-sendmail: reading the message: %s\n", strerror(errno));
		rc = -2;
	}
	free(line);
	return rc;
}

static int envelope(const struct sm *sm, struct conn *c)
{
	int code, bad = 0;
	char ehlo[300];

	if ((code = reply(c)) != 220)
		return fail(c, "mtad's greeting", code);
	snprintf(ehlo, sizeof(ehlo), "%s", sm->domain);
	if (cmd(c, "EHLO %s", ehlo) < 0)
		return EX_IOERR;
	if ((code = reply(c)) != 250)
		return fail(c, "EHLO", code);
	if (cmd(c, "MAIL FROM:<%s>", sm->sender) < 0)
		return EX_IOERR;
	if ((code = reply(c)) != 250) {
		char what[SM_ADDR_MAX + 20];

		snprintf(what, sizeof(what), "sender <%s>", sm->sender);
		return fail(c, what, code);
	}
	for (size_t i = 0; i < sm->nrcpt; i++) {
		if (cmd(c, "RCPT TO:<%s>", sm->rcpt[i]) < 0)
			return EX_IOERR;
		if ((code = reply(c)) != 250 && code != 251) {
			fprintf(stderr, "heron-sendmail: <%s>: %s\n", sm->rcpt[i], c->text);
			if (bad == 0 || exit_of(code) == EX_TEMPFAIL)
				bad = exit_of(code);
		}
	}
	if (bad != 0) {
		/* all or nothing: the caller can fix the list and send again, no one twice */
		fprintf(stderr, "heron-sendmail: message not sent\n");
		(void)cmd(c, "QUIT");
		(void)reply(c);
		sm_close(c);
		return bad;
	}
	return 0;
}

/* mtad is down: the message as a file of [mtad] maildrop for mtad to submit when it runs
   (mtad/pickup.c reads it): "HERON-MAILDROP 1", "S sender", one "R rcpt" each, an empty
   line, then the DATA as it would go on the wire (CRLF, dot-stuffed, without the final
   dot). Written as tmp.RANDOM (0600), synced, made 0644 and renamed drop.RANDOM: mtad only
   takes complete files. The directory (1733) lets no one but mtad list it, so the random
   name is known to its writer and mtad only. */
static int sm_drop(const struct sm *sm, const struct buf *added)
{
	char tmp[sizeof(sm->maildrop) + 48], fin[sizeof(tmp)], hex[33];
	unsigned char r[16];
	struct conn c = { .fd = -1 };
	struct buf env;
	int rc = EX_TEMPFAIL;

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		fprintf(stderr, "heron-sendmail: getrandom: %s\n", strerror(errno));
		return EX_OSERR;
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(hex + 2 * i, 3, "%02x", r[i]);
	snprintf(tmp, sizeof(tmp), "%s/tmp.%s", sm->maildrop, hex);
	snprintf(fin, sizeof(fin), "%s/drop.%s", sm->maildrop, hex);
	buf_init(&env, 256, (size_t)1 << 24);
	buf_printf(&env, "HERON-MAILDROP 1\nS %s\n", sm->sender);
	for (size_t i = 0; i < sm->nrcpt; i++)
		buf_printf(&env, "R %s\n", sm->rcpt[i]);
	buf_puts(&env, "\n");
	if (strpbrk(sm->sender, "\r\n") != NULL || env.len >= ((size_t)1 << 24) - 1) {
		fprintf(stderr, "heron-sendmail: the envelope cannot be dropped\n");
		buf_release(&env);
		return EX_DATAERR;
	}
	c.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (c.fd == -1) {
		fprintf(stderr,
			"heron-sendmail: mtad is not running (%s) and the message cannot wait in "
			"%s: %s\n",
			sm->socket, sm->maildrop, strerror(errno));
		buf_release(&env);
		return errno == EACCES || errno == EPERM ? EX_NOPERM : EX_TEMPFAIL;
	}
	if (send_all(&c, env.data, env.len) < 0 || send_all(&c, added->data, added->len) < 0 ||
	    send_all(&c, sm->hdr.data, sm->hdr.len) < 0)
		rc = EX_IOERR;
	else if ((rc = send_body(sm, &c)) < 0)
		rc = EX_IOERR;
	else if (fsync(c.fd) < 0 || fchmod(c.fd, 0644) < 0) {
		fprintf(stderr, "heron-sendmail: %s: %s\n", tmp, strerror(errno));
		rc = EX_IOERR;
	}
	buf_release(&env);
	if (close(c.fd) < 0 && rc == 0)
		rc = EX_IOERR;
	if (rc == 0 && rename(tmp, fin) < 0) {
		fprintf(stderr, "heron-sendmail: %s: %s\n", fin, strerror(errno));
		rc = EX_IOERR;
	}
	if (rc != 0) {
		unlink(tmp);
		return rc;
	}
	if (sm->verbose)
		fprintf(stderr, "heron-sendmail: mtad is not running: the message waits in %s\n",
			sm->maildrop);
	return EX_OK;
}

int sm_submit(struct sm *sm, const struct buf *added)
{
	struct conn c;
	bool down = false;
	int rc, code;

	signal(SIGPIPE, SIG_IGN);
	if ((rc = sm_connect(sm, &c, &down)) != 0) {
		if (down && sm->maildrop[0] != '\0')
			return sm_drop(sm, added);
		if (down)
			fprintf(stderr,
				"heron-sendmail: cannot reach mtad at %s: not running (and no "
				"[mtad] maildrop to leave the message in)\n",
				sm->socket);
		return rc;
	}
	if ((rc = envelope(sm, &c)) != 0)
		return rc;
	if (cmd(&c, "DATA") < 0)
		return EX_IOERR;
	if ((code = reply(&c)) != 354)
		return fail(&c, "DATA", code);
	if (send_all(&c, added->data, added->len) < 0 ||
	    send_all(&c, sm->hdr.data, sm->hdr.len) < 0)
		return EX_IOERR;
	if ((rc = send_body(sm, &c)) < 0) {
		sm_close(&c); /* no final dot: mtad drops the message */
		return rc == -2 ? EX_IOERR : EX_IOERR;
	}
	if (sm->verbose)
		fprintf(stderr, ">>> .\n");
	if (send_all(&c, ".\r\n", 3) < 0)
		return EX_IOERR;
	if ((code = reply(&c)) != 250)
		return fail(&c, "message refused", code);
	if (sm->verbose)
		fprintf(stderr, "heron-sendmail: %s\n", c.text);
	(void)cmd(&c, "QUIT");
	(void)reply(&c);
	sm_close(&c);
	return EX_OK;
}

/* Copies what one side has; false when it ended. */
static bool pump(int from, int to)
{
	char b[16384];
	ssize_t n = read(from, b, sizeof(b));
	size_t off = 0;

	if (n < 0 && errno == EINTR)
		return true;
	if (n <= 0)
		return false;
	while (off < (size_t)n) {
		ssize_t w = write(to, b + off, (size_t)n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		off += (size_t)w;
	}
	return true;
}

int sm_smtp_stdio(struct sm *sm)
{
	struct conn c;
	struct pollfd p[2];
	bool in_open = true;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	sm->verbose = false;
	if ((rc = sm_connect(sm, &c, NULL)) != 0)
		return rc;
	p[0].fd = STDIN_FILENO;
	p[1].fd = c.fd;
	for (;;) {
		p[0].events = in_open ? POLLIN : 0;
		p[1].events = POLLIN;
		/* after the client's end, mtad's last replies (a commit, 221) within 30 s of
		   silence; a half-close would read as a client gone before its reply */
		int ready = poll(p, 2, in_open ? -1 : 30000);

		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0)
			break;
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (!pump(c.fd, STDOUT_FILENO))
				break; /* mtad closed (after QUIT): done */
		}
		if (in_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			if (!pump(STDIN_FILENO, c.fd))
				in_open = false;
		}
	}
	sm_close(&c);
	return EX_OK;
}
