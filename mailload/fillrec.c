/* fillrec.c — owns the fill record: what `mailload init` filled (seed, profile, the digest of
 * the keys that shape mailboxes, users, domain), written into the target (a message in user1's
 * MailloadFill folder over IMAP; a file next to a fast path's store) and checked by `run`,
 * which refuses a mismatch with the command that fixes it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/str.h"
#include "mailload/mailload.h"

/* The keys whose values decide which folders and messages a user gets. */
static const char *const shape_keys[] = { "folders_mean", "folders_max", "subscribed",
					  "inbox_mean",   "inbox_max",   "folder_mean",
					  "folder_max",   "size_scale" };

static uint64_t shape_digest(const struct ml_cfg *c)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over "key=value;" */
	char tmp[96];

	for (size_t i = 0; i < sizeof(shape_keys) / sizeof(shape_keys[0]); i++)
		for (size_t k = 0; k < ml_cfg_nkeys; k++) {
			if (strcmp(ml_cfg_keys[k].name, shape_keys[i]) != 0)
				continue;
			int n = snprintf(tmp, sizeof(tmp), "%s=%.17g;", shape_keys[i],
					 *(const double *)(const void *)((const char *)c +
									 ml_cfg_keys[k].off));
			for (int j = 0; j < n; j++) {
				h ^= (unsigned char)tmp[j];
				h *= 0x100000001b3ULL;
			}
		}
	return h;
}

void ml_fill_of(const struct ml_cfg *c, struct ml_fill *f)
{
	memset(f, 0, sizeof(*f));
	f->seed = c->seed;
	f->users = c->users;
	f->digest = shape_digest(c);
	str_lcpy(f->profile, c->profile, sizeof(f->profile));
	str_lcpy(f->domain, c->domain, sizeof(f->domain));
}

void ml_fill_format(const struct ml_fill *f, char *out, size_t n)
{
	snprintf(out, n,
		 "seed=%" PRIu64 "; profile=%s; digest=%016" PRIx64 "; users=%" PRIu64
		 "; domain=%s; when=%" PRId64,
		 f->seed, f->profile, f->digest, f->users, f->domain, f->when_ms);
}

int ml_fill_parse(const char *s, struct ml_fill *f)
{
	const char *p;
	int got = 0;

	memset(f, 0, sizeof(*f));
	if ((p = strstr(s, "seed=")) != NULL && sscanf(p, "seed=%" SCNu64, &f->seed) == 1)
		got++;
	if ((p = strstr(s, "profile=")) != NULL &&
	    sscanf(p, "profile=%95[^;\r\n]", f->profile) == 1)
		got++;
	if ((p = strstr(s, "digest=")) != NULL && sscanf(p, "digest=%" SCNx64, &f->digest) == 1)
		got++;
	if ((p = strstr(s, "users=")) != NULL && sscanf(p, "users=%" SCNu64, &f->users) == 1)
		got++;
	if ((p = strstr(s, "domain=")) != NULL && sscanf(p, "domain=%95[^;\r\n]", f->domain) == 1)
		got++;
	if ((p = strstr(s, "when=")) != NULL)
		(void)sscanf(p, "when=%" SCNd64, &f->when_ms);
	return got == 5 ? 0 : -1;
}

void ml_fill_message(const struct ml_fill *f, struct buf *out)
{
	char rec[400], date[64];
	time_t t = (time_t)(f->when_ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S +0000", &tm);
	ml_fill_format(f, rec, sizeof(rec));
	buf_printf(out,
		   "Date: %s\r\nFrom: mailload <mailload@%s>\r\nTo: user1@%s\r\n"
		   "Subject: mailload fill record\r\nMessage-ID: <fill.%" PRId64 "@mailload>\r\n"
		   "X-Mailload-Fill: %s\r\n\r\nThese mailboxes were filled by mailload init:\r\n"
		   "%s\r\n`mailload run` checks this record; do not delete this folder.\r\n",
		   date, f->domain, f->domain, f->when_ms, rec, rec);
}

bool ml_fill_matches(const struct ml_fill *fill, const struct ml_cfg *run, char *why, size_t n)
{
	struct ml_fill r;

	ml_fill_of(run, &r);
	if (fill->seed != r.seed)
		snprintf(why, n, "the seed (filled %" PRIu64 ", this run %" PRIu64 ")", fill->seed,
			 r.seed);
	else if (fill->digest != r.digest)
		snprintf(why, n,
			 "the profile's mailboxes (filled with profile %s, this run has %s%s)",
			 fill->profile, r.profile,
			 strcmp(fill->profile, r.profile) == 0 ? " with other values" : "");
	else if (fill->users < r.users)
		snprintf(why, n, "the users (%" PRIu64 " filled, this run has %" PRIu64 ")",
			 fill->users, r.users);
	else if (strcasecmp(fill->domain, r.domain) != 0)
		snprintf(why, n, "the domain (filled %s, this run %s)", fill->domain, r.domain);
	else
		return true;
	return false;
}
