/* fuzz_bounce.c — libFuzzer target: the DSN (bounce) generator of mtad (bounce.c). The input
 * describes a queued message that failed: a control byte (recipient count, RET, NOTIFY), then
 * NUL-separated sender, ENVID, per recipient address, ORCPT xtext and the remote's reply text,
 * then the original message. Fields pass the same checks as in a real session (mailaddr) and
 * reply texts are what the relay client keeps (control characters replaced). The bounce is
 * queued in a real store; read back it must be one MIME message whose generated parts hold
 * only CRLF line ends, one Final-Recipient per bounced recipient, and nothing when the sender
 * is null or no recipient asked for one. Built only with -Dfuzz=true (clang). */
#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/mailaddr.h"
#include "common/msgcache.h"
#include "mtad/relay.h"
#include "store/store.h"
#include "tests/fuzz/fuzz_peer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NRCPT_MAX 4

static char dir[80];
static struct conf *conf;
static struct mtad m;
static struct queue_runner qr;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char users[160], spath[160];
	struct store_opts so;

	(void)argc;
	(void)argv;
	fuzz_start(dir, sizeof(dir), "bounce", users, sizeof(users));
	conf = conf_defaults();
	snprintf(spath, sizeof(spath), "%s/store", dir);
	fuzz_set(conf, "store", "path", spath);
	fuzz_set(conf, "store", "partitions", "1");
	fuzz_set(conf, "store", "map_size", "8M");
	store_opts_from_conf(conf, &so);
	so.create = true;
	fuzz_must(store_open(&so, &m.store) == 0, "store_open");
	m.conf = conf;
	m.hostname = "mx.heron.test";
	qr.m = &m; /* m.qr stays NULL: queue_runner_kick does nothing */
	return 0;
}

/* The next NUL-terminated field of the input, or "" past its end. */
static const char *field(const char **p, const char *end)
{
	const char *f = *p, *nul;

	if (f >= end)
		return "";
	nul = memchr(f, '\0', (size_t)(end - f));
	if (nul == NULL)
		return ""; /* an unterminated field is the original message */
	*p = nul + 1;
	return f;
}

static int drop(const struct store_queue_msg *qm, void *arg)
{
	uint64_t *ids = arg;

	for (int i = 0; i < 8; i++)
		if (ids[i] == 0) {
			ids[i] = qm->id;
			break;
		}
	return 0;
}

/* arg: { the original's id, the bounce's id out } */
static int find_bounce(const struct store_queue_msg *qm, void *arg)
{
	uint64_t *ids = arg;

	if (qm->id != ids[0] && qm->sender[0] == '\0') {
		ids[1] = qm->id;
		return 1;
	}
	return 0;
}

/* Reads queue entry id whole into out. */
static void read_entry(uint64_t id, struct buf *out)
{
	uint64_t size;
	char chunk[8192];
	ssize_t n;
	int fd;

	fuzz_must(store_queue_open(m.store, id, &fd, &size) == 0, "store_queue_open");
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		assert(buf_append(out, chunk, (size_t)n) == 0);
	close(fd);
}

static void check_bounce(const struct buf *b, size_t nbounced, bool full)
{
	const char *s = buf_cstr(b), *ret;
	struct msgcache_part part;
	struct buf cache;
	size_t finals = 0;

	/* the generated parts end where the returned message starts (its first mention: the
	   returned text may hold the same line) */
	ret = strstr(s, full ? "\r\nContent-Type: message/rfc822\r\n\r\n"
			     : "\r\nContent-Type: text/rfc822-headers\r\n\r\n");
	assert(ret != NULL);
	for (const char *q = s; q < ret; q++) {
		if (*q == '\n')
			assert(q > s && q[-1] == '\r');
		if (*q == '\r')
			assert(q[1] == '\n');
		assert(*q != '\0');
	}
	for (const char *q = s;
	     q < ret && (q = strstr(q, "\r\nFinal-Recipient: ")) != NULL && q < ret; q++)
		finals++;
	assert(finals == nbounced);
	buf_init(&cache, 0, 1 << 24);
	assert(msgcache_build(b->data, b->len, &cache) == 0);
	assert(msgcache_part(cache.data, cache.len, "2", &part) == 0);
	buf_release(&cache);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data + (size > 0), *end = (const char *)data + size;
	unsigned ctl = size > 0 ? data[0] : 0;
	size_t nrcpt = 1 + (ctl & 3), nbounced = 0;
	struct store_queue_rcpt rcpt[NRCPT_MAX] = { 0 };
	char addr[NRCPT_MAX][MAILADDR_TEXT_MAX + 1], orcpt[NRCPT_MAX][RCPT_ORCPT_MAX + 40];
	char *error[NRCPT_MAX], *remote[NRCPT_MAX], sender[MAILADDR_TEXT_MAX + 1];
	int result[NRCPT_MAX];
	struct store_queue_msg qm = { 0 };
	struct qjob job;
	struct mail_params mp;
	struct rcpt_params rp;
	struct mailaddr a;
	struct store_blob *blob = NULL;
	const char *err, *f;
	char param[1200];
	uint64_t ids[8] = { 0 }, found[2] = { 0, 0 }, bounce;
	struct buf out;

	/* sender: as MAIL FROM would leave it ("" is the null sender) */
	f = field(&p, end);
	if (f[0] == '\0')
		sender[0] = '\0';
	else if (mailaddr_parse(f, strlen(f), MAILADDR_ALLOW_UTF8, &a, &err) != 0 ||
		 mailaddr_format(&a, sender, sizeof(sender)) != 0)
		snprintf(sender, sizeof(sender), "sender@example.org");
	f = field(&p, end);
	snprintf(param, sizeof(param), "ENVID=%.1100s", f);
	/* stored decoded, as deliver.c does */
	qm.envid = f[0] != '\0' && mailaddr_mail_params(param, strlen(param), &mp, &err) == 0 &&
				   mp.envid[0] != '\0'
			   ? mp.envid
			   : NULL;
	for (size_t i = 0; i < nrcpt; i++) {
		f = field(&p, end);
		if (mailaddr_parse(f, strlen(f), MAILADDR_ALLOW_UTF8, &a, &err) != 0 ||
		    mailaddr_format(&a, addr[i], sizeof(addr[i])) != 0)
			snprintf(addr[i], sizeof(addr[i]), "rcpt%zu@remote.example", i);
		rcpt[i].addr = addr[i];
		f = field(&p, end);
		snprintf(param, sizeof(param), "ORCPT=rfc822;%.1100s", f);
		if (f[0] != '\0' &&
		    mailaddr_rcpt_params(param, strlen(param), true, &rp, &err) == 0) {
			snprintf(orcpt[i], sizeof(orcpt[i]), "rfc822;%s", f);
			rcpt[i].orcpt = orcpt[i];
		}
		rcpt[i].notify = (ctl >> (3 + i)) & 1 ? STORE_NOTIFY_NEVER : 0;
		f = field(&p, end);
		error[i] = strndup(f, 512);
		for (char *q = error[i]; *q != '\0'; q++) /* as smtp_client.c keeps it */
			if ((unsigned char)*q < 0x20 || *q == 0x7f)
				*q = '?';
		remote[i] = strdup(i % 2 ? "none" : "relay.example:25");
		result[i] = STORE_Q_FAILED;
		nbounced += rcpt[i].notify == 0;
	}
	qm.sender = sender;
	qm.ret = ctl & 4 ? STORE_RET_FULL : STORE_RET_HDRS;
	qm.nrcpt = nrcpt;
	qm.rcpt = rcpt;
	fuzz_must(store_blob_new(m.store, STORE_QUEUE_PART, &blob) == 0, "store_blob_new");
	fuzz_must(store_blob_write(blob, p, (size_t)(end - p)) == 0 &&
			  store_blob_finish(blob) == 0,
		  "write the original");
	fuzz_must(store_queue_add(m.store, &qm, blob, &qm.id) == 0, "store_queue_add");
	store_blob_free(&blob);
	qm.created = time(NULL);

	memset(&job, 0, sizeof(job));
	job.qr = &qr;
	job.qm = qm;
	job.result = result;
	job.error = error;
	job.remote = remote;
	assert(bounce_send(&qr, &job, DSN_FAILED) == 0);
	found[0] = qm.id;
	store_queue_list(m.store, find_bounce, found);
	bounce = found[1];
	if (sender[0] == '\0' || nbounced == 0) {
		assert(bounce == 0);
	} else {
		assert(bounce != 0);
		buf_init(&out, 0, 1 << 24);
		read_entry(bounce, &out);
		check_bounce(&out, nbounced, qm.ret == STORE_RET_FULL);
		buf_release(&out);
	}
	store_queue_list(m.store, drop, ids);
	for (int i = 0; i < 8 && ids[i] != 0; i++)
		fuzz_must(store_queue_delete(m.store, ids[i]) == 0, "store_queue_delete");
	for (size_t i = 0; i < nrcpt; i++) {
		free(error[i]);
		free(remote[i]);
	}
	return 0;
}
