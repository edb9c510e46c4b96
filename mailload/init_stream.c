/* init_stream.c — owns `mailload init --stream`: the initial mailboxes as a bulk stream on
 * standard output (the format is described in docs/mailctl.8, `import --bulk`), the same
 * folders, subscriptions, messages and \Seen flags as the protocol init (ml_init_render,
 * ml_user_folders). A store loads it with its own bulk import, for Heron
 * `mailload init --stream ... | mailctl import --bulk -`: mailload knows no server's
 * internals. --slice K/N writes users 1 + K, 1 + K + N, ... so N pipelines fill one
 * population in parallel; the fill record (fillrec.c) goes into user1's MailloadFill folder
 * with --record, once every slice is loaded. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "mailload/init.h"

#define STREAM_BUF (1u << 20)

struct st_job {
	const struct ml_init_stream *o;
	FILE *out;
	struct ml_msg msg;
	struct buf text;
	struct ml_init_stats *stats;
};

static void st_message(struct st_job *j, const char *p, size_t len, int64_t date_s, bool seen)
{
	fprintf(j->out, "message %zu %" PRId64 "%s\n", len, date_s, seen ? " \\Seen" : "");
	fwrite(p, 1, len, j->out);
	fputc('\n', j->out);
	j->stats->msgs++;
	j->stats->bytes += len;
}

static void st_user(struct st_job *j, const struct ml_cfg *c, uint32_t user)
{
	struct ml_folders f;

	ml_user_folders(c, user, &f);
	fprintf(j->out, "user user%u\n", user);
	for (uint32_t fi = 0; fi < f.n; fi++) {
		fprintf(j->out, "mailbox %s %s\n",
			f.subscribed[fi] ? "subscribed" : "unsubscribed", f.name[fi]);
		for (uint32_t idx = 0; idx < f.msgs[fi]; idx++) {
			int64_t date_ms = ml_init_render(c, user, fi, idx, &j->msg, &j->text);

			st_message(j, j->text.data, j->text.len, date_ms / 1000,
				   ml_init_seen(fi, idx));
		}
	}
	j->stats->users++;
}

/* The fill record, as the protocol init leaves it: one \Seen message in user1's
   MailloadFill folder, not subscribed. */
static void st_record(struct st_job *j, const struct ml_cfg *c)
{
	struct ml_fill fill;
	char rec[400];
	int64_t now = clock_wall_ms();

	ml_fill_of(c, &fill);
	fill.when_ms = now;
	ml_fill_format(&fill, rec, sizeof(rec));
	ml_fill_message(&fill, &j->text);
	fprintf(j->out, "user user1\nmailbox unsubscribed " ML_FILL_FOLDER "\n");
	st_message(j, j->text.data, j->text.len, now / 1000, true);
}

static int st_job_main(const struct ml_cfg *c, void *arg, unsigned k, unsigned jobs,
		       struct ml_init_stats *stats)
{
	struct st_job j = { .o = arg, .out = stdout, .stats = stats };
	static char obuf[STREAM_BUF];

	(void)k;
	(void)jobs;
	setvbuf(j.out, obuf, _IOFBF, sizeof(obuf));
	ml_msggen_init();
	ml_msg_init(&j.msg);
	buf_init(&j.text, 1 << 16, ML_INIT_MSG_MAX);
	fputs("heron-bulk 1\n", j.out);
	if (j.o->record) {
		st_record(&j, c);
	} else {
		for (uint64_t user = 1 + j.o->slice; user <= c->users && !ferror(j.out);
		     user += j.o->nslices)
			st_user(&j, c, (uint32_t)user);
	}
	if (fflush(j.out) == EOF || ferror(j.out)) {
		log_warnx("init: writing the stream: %s", strerror(errno));
		stats->errors++;
	}
	ml_msg_release(&j.msg);
	buf_release(&j.text);
	return stats->errors ? 1 : 0;
}

int init_stream_run(const struct ml_cfg *c, const struct ml_init_stream *o, bool quiet)
{
	struct ml_init_stream copy = *o;
	char where[96];

	if (o->record)
		snprintf(where, sizeof(where), "a bulk stream on stdout (the fill record)");
	else
		snprintf(where, sizeof(where), "a bulk stream on stdout (slice %u/%u)", o->slice,
			 o->nslices);
	return ml_init_jobs(c, 1, quiet, where, st_job_main, &copy);
}
