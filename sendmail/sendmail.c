/* sendmail.c — heron-sendmail, the sendmail(1) command line of scripts, cron and monitoring:
 * reads a message on stdin (recipients from the arguments and/or, with -t, its To/Cc/Bcc
 * headers), adds the From:, Date: and Message-ID: it lacks, drops Bcc:, and submits it over
 * mtad's local submission socket ([mtad] local_submission: a unix socket, no password; mtad
 * learns the uid from the kernel); when mtad is not running, into [mtad] maildrop for mtad
 * to submit when it starts. -bs speaks SMTP on stdin/stdout instead. Exit codes are
 * sysexits.h's. The SMTP dialogue is sendmail_smtp.c; -bp (mailq) is sendmail_mailq.c. */
#include <errno.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/rfc5322.h"
#include "common/str.h"
#include "common/version.h"
#include "common/xmalloc.h"
#include "mtad/aliases.h"
#include "sendmail/sendmail.h"

#define HEADER_MAX (1u << 20)  /* bytes of the header block read before submitting */
#define ADDED_HEADERS_MAX 8192 /* the From:, Date: ... fields a message was missing */

static void usage(void)
{
	fprintf(stderr, "usage: heron-sendmail [-t] [-i|-oi] [-v] [-f sender] [-F name] [-C conf] "
			"[-bm|-bs|-bi|-bp] [--] [recipient ...]\n");
	exit(EX_USAGE);
}

static void add_rcpt(struct sm *sm, const char *addr)
{
	sm->rcpt = xreallocarray(sm->rcpt, sm->nrcpt + 1, sizeof(*sm->rcpt));
	sm->rcpt[sm->nrcpt++] = xstrdup(addr);
}

/* Empty (qualified with ours), a host name, or an address literal. */
static bool domain_ok(struct str_view d)
{
	if (d.len > 2 && d.p[0] == '[' && d.p[d.len - 1] == ']')
		return true;
	for (size_t i = 0; i < d.len; i++) {
		unsigned char c = (unsigned char)d.p[i];

		if (!(c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-' ||
		      (c == '.' && i > 0 && i + 1 < d.len && d.p[i + 1] != '.')))
			return false;
	}
	return true;
}

/* An address as a user writes it ("root", "a@b", "Name <a@b>"): qualified and quoted as a
   path needs it. */
static void addr_cb(void *ctx, const struct rfc5322_addr *a)
{
	struct sm *sm = ctx;
	char out[SM_ADDR_MAX + 3];
	bool quote = false;

	if (a->is_group_start || a->is_group_end || a->mailbox.len == 0)
		return;
	if (memchr(a->mailbox.p, '@', a->mailbox.len) != NULL || !domain_ok(a->domain)) {
		fprintf(stderr, "heron-sendmail: bad address: %.*s@%.*s\n", (int)a->mailbox.len,
			a->mailbox.p, (int)a->domain.len, a->domain.p);
		sm->bad_addr = true;
		return;
	}
	for (size_t i = 0; i < a->mailbox.len; i++) {
		unsigned char c = (unsigned char)a->mailbox.p[i];

		if (c <= ' ' || strchr("\"(),:;<>@[\\]", c) != NULL)
			quote = true;
	}
	if (a->mailbox.len + a->domain.len + strlen(sm->domain) + 4 > SM_ADDR_MAX) {
		fprintf(stderr, "heron-sendmail: address too long: %.*s\n", (int)a->mailbox.len,
			a->mailbox.p);
		sm->bad_addr = true;
		return;
	}
	snprintf(out, sizeof(out), "%s%.*s%s@%.*s", quote ? "\"" : "", (int)a->mailbox.len,
		 a->mailbox.p, quote ? "\"" : "",
		 a->domain.len ? (int)a->domain.len : (int)strlen(sm->domain),
		 a->domain.len ? a->domain.p : sm->domain);
	add_rcpt(sm, out);
}

static void take_addrs(struct sm *sm, const char *p, size_t len)
{
	if (rfc5322_addr_parse(p, len, addr_cb, sm) == 0) {
		fprintf(stderr, "heron-sendmail: no address in \"%.*s\"\n", (int)len, p);
		sm->bad_addr = true;
	}
}

/* "-fVALUE" or "-f VALUE". */
static const char *opt_value(int argc, char **argv, int *i, const char *arg)
{
	if (arg[2] != '\0')
		return arg + 2;
	if (*i + 1 >= argc)
		usage();
	return argv[++*i];
}

static int parse_args(struct sm *sm, int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break;
		switch (a[1]) {
		case 't':
			sm->extract = true;
			break;
		case 'i':
			sm->dot_ok = true;
			break;
		case 'v':
			sm->verbose = true;
			break;
		case 'f':
			sm->from = opt_value(argc, argv, &i, a);
			break;
		case 'r':
			sm->from = opt_value(argc, argv, &i, a);
			break; /* old name of -f */
		case 'F':
			sm->fullname = opt_value(argc, argv, &i, a);
			break;
		case 'C':
			sm->conf = opt_value(argc, argv, &i, a);
			break;
		case 'o':
			if (a[2] == 'i' && a[3] == '\0')
				sm->dot_ok = true;
			else if (a[2] == '\0')
				usage();
			/* -oem, -odb, -odi, -oQ...: delivery modes of another MTA, no meaning here */
			break;
		case 'b':
			if (strcmp(a, "-bs") == 0) {
				sm->smtp_stdio = true;
			} else if (strcmp(a, "-bi") == 0) {
				sm->newaliases = true;
			} else if (strcmp(a, "-bp") == 0) {
				sm->mailq = true;
			} else if (strcmp(a, "-bm") != 0) {
				fprintf(stderr, "heron-sendmail: %s is not supported\n", a);
				exit(EX_USAGE);
			}
			break;
		case 'B':
		case 'h':
		case 'L':
		case 'N':
		case 'O':
		case 'R':
		case 'V':
			(void)opt_value(argc, argv, &i, a); /* known to sendmail; ignored */
			break;
		case 'm':
		case 'n':
		case 'U':
		case 'G':
		case 'e':
			break;
		case 'q':
			fprintf(stderr, "heron-sendmail: -q: mtad runs its queue itself "
					"(mailctl queue flush)\n");
			exit(EX_USAGE);
		default:
			fprintf(stderr, "heron-sendmail: unknown option %s\n", a);
			usage();
		}
	}
	return i;
}

/* The socket and the default domain from heron.conf ([mtad] local_submission, first of
   local_domains, else hostname, else the host's name). */
static void read_conf(struct sm *sm)
{
	struct conf *c = NULL;
	char *err = NULL;
	const struct mtad_conf *mc;
	char host[256];

	if (conf_load(sm->conf, &c, &err) < 0) {
		fprintf(stderr, "heron-sendmail: %s\n", err);
		exit(EX_CONFIG);
	}
	mc = &conf_values(c)->mtad;
	for (size_t i = 0; i < mc->local_submission->n && sm->socket[0] == '\0'; i++)
		if (mc->local_submission->v[i].unix_path)
			str_lcpy(sm->socket, mc->local_submission->v[i].host, sizeof(sm->socket));
	for (size_t i = 0; i < mc->submission->n && sm->socket[0] == '\0'; i++)
		if (mc->submission->v[i].unix_path)
			str_lcpy(sm->socket, mc->submission->v[i].host, sizeof(sm->socket));
	str_lcpy(sm->maildrop, mc->maildrop, sizeof(sm->maildrop));
	if (mc->local_domains->n > 0)
		str_lcpy(sm->domain, mc->local_domains->v[0], sizeof(sm->domain));
	else if (mc->hostname[0] != '\0')
		str_lcpy(sm->domain, mc->hostname, sizeof(sm->domain));
	else if (gethostname(host, sizeof(host) - 1) == 0)
		str_lcpy(sm->domain, host, sizeof(sm->domain));
	else
		str_lcpy(sm->domain, "localhost", sizeof(sm->domain));
	conf_free(&c);
	if (sm->socket[0] == '\0') {
		fprintf(stderr, "heron-sendmail: %s sets no [mtad] local_submission socket\n",
			sm->conf);
		exit(EX_CONFIG);
	}
}

/* -bi (newaliases): mtad reads [mtad] aliases again by itself within a second of a change,
   so there is nothing to rebuild; the file is checked as mtad would read it. Exit 0 when it
   is good, EX_DATAERR with the line at fault, EX_CONFIG when none is configured. */
static int check_aliases(const char *conf)
{
	struct conf *c = NULL;
	struct aliases *al = NULL;
	char *err = NULL, *path;

	if (conf_load(conf, &c, &err) < 0) {
		fprintf(stderr, "heron-sendmail: %s\n", err);
		return EX_CONFIG;
	}
	path = xstrdup(conf_values(c)->mtad.aliases);
	conf_free(&c);
	if (path[0] == '\0') {
		fprintf(stderr, "heron-sendmail: %s sets no [mtad] aliases file\n", conf);
		free(path);
		return EX_CONFIG;
	}
	if (aliases_load(path, &al, &err) < 0) {
		fprintf(stderr, "heron-sendmail: %s\n", err);
		free(err);
		free(path);
		return EX_DATAERR;
	}
	printf("%s: %zu aliases (mtad reads the file again within a second of a change)\n", path,
	       aliases_count(al));
	aliases_free(&al);
	free(path);
	return EX_OK;
}

/* The envelope sender: -f, else the login of the uid at the default domain. */
static void set_sender(struct sm *sm)
{
	struct passwd *pw = getpwuid(getuid());
	const char *f = sm->from;

	if (pw != NULL) {
		str_lcpy(sm->login, pw->pw_name, sizeof(sm->login));
		if (sm->fullname == NULL && pw->pw_gecos != NULL && pw->pw_gecos[0] != '\0') {
			size_t n = strcspn(pw->pw_gecos, ",");

			sm->gecos = xstrndup(pw->pw_gecos, n);
		}
	} else {
		snprintf(sm->login, sizeof(sm->login), "uid%ld", (long)getuid());
	}
	if (f == NULL) {
		(void)str_fmt(sm->sender, sizeof(sm->sender), "%s@%s", sm->login, sm->domain);
		return;
	}
	if (f[0] == '\0' || strcmp(f, "<>") == 0) {
		sm->sender[0] = '\0';
		return;
	}
	size_t l = strlen(f);
	if (f[0] == '<' && l >= 2 && f[l - 1] == '>') {
		f++;
		l -= 2;
	}
	if (l > SM_ADDR_MAX || memchr(f, '\n', l) != NULL || memchr(f, '\r', l) != NULL ||
	    memchr(f, '<', l) != NULL || memchr(f, '>', l) != NULL || memchr(f, ' ', l) != NULL) {
		fprintf(stderr, "heron-sendmail: bad sender address: %s\n", sm->from);
		exit(EX_DATAERR);
	}
	if (memchr(f, '@', l) == NULL)
		(void)str_fmt(sm->sender, sizeof(sm->sender), "%.*s@%s", (int)l, f, sm->domain);
	else
		snprintf(sm->sender, sizeof(sm->sender), "%.*s", (int)l, f);
}

static bool is_header_start(const char *l, size_t len)
{
	size_t i = 0;

	while (i < len && l[i] > ' ' && l[i] < 0x7f && l[i] != ':')
		i++;
	return i > 0 && i < len && l[i] == ':';
}

/* Reads the header block (up to the empty line, or the first line that is no header: then
   it is the body's) into sm->hdr, with -t taking To/Cc/Bcc recipients; Bcc: is dropped. */
static void read_header(struct sm *sm)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	bool drop = false, rcpt_field = false;
	struct buf field;

	buf_init(&sm->hdr, 1024, HEADER_MAX);
	buf_init(&field, 256, HEADER_MAX);
	while ((n = getline(&line, &cap, stdin)) > 0) {
		size_t len = (size_t)n;

		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		bool cont = len > 0 && (line[0] == ' ' || line[0] == '\t') && sm->hdr.len > 0;

		if (!cont && rcpt_field) {
			take_addrs(sm, (const char *)field.data, field.len);
			rcpt_field = false;
		}
		if (!cont && !is_header_start(line, len)) {
			/* the empty line, or a body line: the message goes on from here */
			sm->first_body = xmemdup0(line, (size_t)n);
			sm->first_body_len = (size_t)n;
			sm->blank_sep = len == 0;
			break;
		}
		if (!cont) {
			drop = str_caseprefix(line, len, "Bcc:");
			sm->has_from |= str_caseprefix(line, len, "From:");
			sm->has_date |= str_caseprefix(line, len, "Date:");
			sm->has_msgid |= str_caseprefix(line, len, "Message-ID:");
			rcpt_field = sm->extract && (str_caseprefix(line, len, "To:") ||
						     str_caseprefix(line, len, "Cc:") ||
						     str_caseprefix(line, len, "Bcc:"));
			buf_reset(&field);
			if (rcpt_field &&
			    buf_append(&field, strchr(line, ':') + 1,
				       len - (size_t)(strchr(line, ':') + 1 - line)) < 0)
				goto toobig;
		} else if (rcpt_field &&
			   (buf_append(&field, " ", 1) < 0 || buf_append(&field, line, len) < 0)) {
			goto toobig;
		}
		if (!drop &&
		    (buf_append(&sm->hdr, line, len) < 0 || buf_append(&sm->hdr, "\r\n", 2) < 0))
			goto toobig;
	}
	if (rcpt_field)
		take_addrs(sm, (const char *)field.data, field.len);
	if (ferror(stdin)) {
		fprintf(stderr, "heron-sendmail: reading the message: %s\n", strerror(errno));
		exit(EX_IOERR);
	}
	free(line);
	buf_release(&field);
	return;
toobig:
	fprintf(stderr, "heron-sendmail: header longer than %u bytes\n", HEADER_MAX);
	exit(EX_DATAERR);
}

/* The header fields a message must have and a script did not write. */
static void missing_headers(struct sm *sm, struct buf *out)
{
	char line[1200], date[64];
	time_t now = time(NULL);
	struct tm tm;

	buf_init(out, 512, ADDED_HEADERS_MAX);
	localtime_r(&now, &tm);
	if (!sm->has_from) {
		const char *name = sm->fullname ? sm->fullname : sm->gecos;
		bool plain = name != NULL && strpbrk(name, "\"\\()<>,;:@[].\r\n") == NULL;

		if (name != NULL && name[0] != '\0' && strpbrk(name, "\r\n") == NULL)
			snprintf(line, sizeof(line), "From: %s%s%s <%s>\r\n", plain ? "" : "\"",
				 name, plain ? "" : "\"", sm->sender[0] ? sm->sender : sm->login);
		else
			snprintf(line, sizeof(line), "From: <%s>\r\n",
				 sm->sender[0] ? sm->sender : sm->login);
		(void)buf_append(out, line, strlen(line));
	}
	if (!sm->has_date) {
		strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S %z", &tm);
		snprintf(line, sizeof(line), "Date: %s\r\n", date);
		(void)buf_append(out, line, strlen(line));
	}
	if (!sm->has_msgid) {
		unsigned char r[6];
		FILE *u = fopen("/dev/urandom", "r");

		if (u == NULL || fread(r, 1, sizeof(r), u) != sizeof(r))
			memset(r, 0, sizeof(r));
		if (u != NULL)
			fclose(u);
		strftime(date, sizeof(date), "%Y%m%d%H%M%S", &tm);
		snprintf(line, sizeof(line),
			 "Message-ID: <%s.%ld.%02x%02x%02x%02x%02x%02x@%s>\r\n", date,
			 (long)getpid(), r[0], r[1], r[2], r[3], r[4], r[5], sm->domain);
		(void)buf_append(out, line, strlen(line));
	}
}

static void sm_free(struct sm *sm)
{
	for (size_t i = 0; i < sm->nrcpt; i++)
		free(sm->rcpt[i]);
	free(sm->rcpt);
	free(sm->gecos);
	free(sm->first_body);
	buf_release(&sm->hdr);
}

int main(int argc, char **argv)
{
	struct sm sm = { .conf = HERON_SYSCONFDIR "/heron/heron.conf" };
	int first, rc;
	struct buf added;

	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("heron-sendmail %s\n", heron_version);
		return 0;
	}
	const char *base = strrchr(argv[0], '/') != NULL ? strrchr(argv[0], '/') + 1 : argv[0];

	first = parse_args(&sm, argc, argv);
	if (sm.newaliases || strcmp(base, "newaliases") == 0)
		return check_aliases(sm.conf);
	if (sm.mailq || strcmp(base, "mailq") == 0)
		return sm_mailq(sm.conf);
	read_conf(&sm);
	if (sm.smtp_stdio)
		return sm_smtp_stdio(&sm);
	set_sender(&sm);
	for (int i = first; i < argc; i++)
		take_addrs(&sm, argv[i], strlen(argv[i]));
	read_header(&sm);
	if (sm.bad_addr || sm.nrcpt == 0) {
		if (!sm.bad_addr)
			fprintf(stderr, "heron-sendmail: no recipients (give them as arguments, "
					"or -t)\n");
		rc = sm.bad_addr ? EX_DATAERR : EX_USAGE;
		sm_free(&sm);
		return rc;
	}
	missing_headers(&sm, &added);
	rc = sm_submit(&sm, &added);
	buf_release(&added);
	sm_free(&sm);
	return rc;
}
