/* sendmail_mailq.c — owns heron-sendmail -bp (and the name mailq): asks mtad's control socket
 * ([control] dir/mtad.N.sock, the first worker that answers) for its `queue` (control.h) and
 * prints the undelivered entries in the mailq layout: id (then "*" being delivered, "!" held),
 * size, arrival time, sender, and under it each undelivered recipient with its last deferral
 * reason in parentheses; a total line at the end, "Mail queue is empty" for none.
 *
 * Who may list: whoever may open the control socket (mode 0660, the daemon's user and group),
 * that is root, the heron user and the members of the heron group; others get EX_NOPERM. The
 * queue holds every user's senders and recipients, so it is not shown to every local user. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>

#include "common/buf.h"
#include "common/conf.h"
#include "common/control.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "sendmail/sendmail.h"

#define MAILQ_TIMEOUT_MS 30000
#define FIELDS_MAX 6
/* the width of "id* size arrival  ": where senders and recipients begin */
#define ADDR_COLUMN 48

/* Splits line at its TABs into f (at most FIELDS_MAX); how many. */
static size_t split(char *line, char **f)
{
	size_t n = 0;

	f[n++] = line;
	for (char *p = line; *p != '\0' && n < FIELDS_MAX; p++)
		if (*p == '\t') {
			*p = '\0';
			f[n++] = p + 1;
		}
	return n;
}

static bool is_qid(const char *s)
{
	size_t n = strlen(s);

	return n == 16 && strspn(s, "0123456789abcdef") == n;
}

static int garbage(const char *line)
{
	fprintf(stderr, "heron-sendmail: mailq: mtad answered something else: %.80s\n", line);
	return EX_PROTOCOL;
}

/* The answer printed; a sysexits.h code. */
static int print_queue(char *ans)
{
	uint64_t entries = 0, bytes = 0, unlisted = 0;
	bool ended = false, in_entry = false;
	char *save = NULL;

	for (char *line = strtok_r(ans, "\n", &save); line != NULL && !ended;
	     line = strtok_r(NULL, "\n", &save)) {
		char *f[FIELDS_MAX];
		size_t n = split(line, f);

		if (strcmp(f[0], ".") == 0 && n == 1) {
			ended = true;
		} else if (strcmp(f[0], "Q") == 0 && n == 6 && is_qid(f[1])) {
			uint64_t size;
			int64_t when;
			char date[64] = "?";
			struct tm tm;

			if (str_to_u64(f[2], strlen(f[2]), UINT64_MAX, &size) < 0 ||
			    str_to_i64(f[3], strlen(f[3]), 0, INT64_MAX, &when) < 0 ||
			    strlen(f[4]) != 1)
				return garbage(f[0]);
			time_t t = (time_t)when;

			if (localtime_r(&t, &tm) != NULL)
				strftime(date, sizeof(date), "%a %b %e %H:%M:%S", &tm);
			if (entries == 0)
				printf("-Queue ID-------- --Size-- ----Arrival Time--- "
				       "-Sender/Recipient-------\n");
			else
				putchar('\n');
			printf("%s%c %8" PRIu64 " %-19s  %s\n", f[1],
			       f[4][0] == '-' ? ' ' : f[4][0], size, date, f[5]);
			entries++;
			bytes += size;
			in_entry = true;
		} else if (strcmp(f[0], "R") == 0 && n == 3 && in_entry) {
			if (strcmp(f[2], "-") != 0)
				printf("%*s(%s)\n", ADDR_COLUMN, "", f[2]);
			printf("%*s%s\n", ADDR_COLUMN, "", f[1]);
		} else if (strcmp(f[0], "T") == 0 && n == 2) {
			if (str_to_u64(f[1], strlen(f[1]), UINT64_MAX, &unlisted) < 0)
				return garbage(f[0]);
		} else if (strncmp(f[0], "ERR", 3) == 0) {
			fprintf(stderr, "heron-sendmail: mailq: mtad: %s\n", f[0]);
			return EX_TEMPFAIL;
		} else {
			return garbage(f[0]);
		}
	}
	if (!ended) {
		fprintf(stderr, "heron-sendmail: mailq: mtad's answer ended early\n");
		return EX_PROTOCOL;
	}
	if (entries == 0 && unlisted == 0) {
		printf("Mail queue is empty\n");
		return EX_OK;
	}
	if (entries > 0)
		printf("\n-- %" PRIu64 " Kbytes in %" PRIu64 " Request%s.\n",
		       (bytes + 1023) / 1024, entries, entries == 1 ? "" : "s");
	if (unlisted > 0)
		printf("-- %" PRIu64 " more entr%s not listed (the answer's size limit; "
		       "mailctl queue list shows all)\n",
		       unlisted, unlisted == 1 ? "y" : "ies");
	return EX_OK;
}

int sm_mailq(const char *conf_path)
{
	struct conf *c = NULL;
	char *err = NULL, *dir, why[512];
	struct buf ans;
	int rc;

	if (conf_load(conf_path, &c, &err) < 0) {
		fprintf(stderr, "heron-sendmail: %s\n", err);
		return EX_CONFIG;
	}
	dir = xstrdup(conf_values(c)->control.dir);
	conf_free(&c);
	if (dir[0] == '\0') {
		fprintf(stderr,
			"heron-sendmail: mailq: %s sets no [control] dir (mtad's control "
			"socket answers the queue)\n",
			conf_path);
		free(dir);
		return EX_CONFIG;
	}
	buf_init(&ans, 4096, CONTROL_ANSWER_MAX);
	rc = control_request_first(dir, "mtad", "queue", MAILQ_TIMEOUT_MS, &ans, why, sizeof(why));
	if (rc < 0) {
		bool denied = errno == EACCES || errno == EPERM;

		fprintf(stderr, "heron-sendmail: mailq: mtad: %s%s\n", why,
			denied ? " (the queue is shown to root, the heron user and the heron "
				 "group's members)"
			       : "");
		rc = denied ? EX_NOPERM : EX_UNAVAILABLE;
	} else {
		char *text = buf_steal(&ans, NULL);

		rc = print_queue(text);
		free(text);
	}
	buf_release(&ans);
	free(dir);
	return rc;
}
