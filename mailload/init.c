/* init.c — owns what the fast paths of mailbox initialization share: the one description of
 * the initial messages (ml_init_spec, as the protocol init sends them: SMTP to INBOX, IMAP
 * APPEND to the other folders) and the runner of forked jobs taking users round robin. The
 * fast paths themselves: init_stream.c (a bulk stream, loaded by `mailctl import --bulk`) and
 * init_maildir.c (Maildir++ trees). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "mailload/init.h"

/* The fixed day the initial messages are dated in (2025-01-01 UTC), as the protocol init. */
#define INIT_EPOCH_MS 1735689600000LL

/* Seq numbers of initial messages: user << 20 | folder << 12 | index (agent.c's
   ag_init_seq, the protocol init's numbering). */
static uint64_t init_seq(uint32_t user, uint32_t fi, uint32_t idx)
{
	return ((uint64_t)user << 20) | ((uint64_t)fi << 12) | idx;
}

void ml_init_spec(const struct ml_cfg *c, uint32_t user, uint32_t fi, uint32_t idx,
		  struct ml_msg_spec *s, char *from, char *to)
{
	memset(s, 0, sizeof(*s));
	s->seed = c->seed;
	s->seq = init_seq(user, fi, idx);
	s->date_ms = INIT_EPOCH_MS + (int64_t)(s->seq % 86400000);
	s->size_scale = c->size_scale;
	if (fi == 0) { /* delivered by a remote server */
		snprintf(from, ML_INIT_ADDR, "sender%u@%s", user, c->ext_domain);
		snprintf(to, ML_INIT_ADDR, "user%u@%s", user, c->domain);
	} else { /* filed by the user */
		snprintf(from, ML_INIT_ADDR, "user%u@%s", user, c->domain);
		snprintf(to, ML_INIT_ADDR, "colleague%" PRIu64 "@%s", s->seq % 997, c->domain);
	}
	s->from = from;
}

bool ml_init_seen(uint32_t fi, uint32_t idx)
{
	return fi != 0 && idx % 10 < 7;
}

int64_t ml_init_render(const struct ml_cfg *c, uint32_t user, uint32_t fi, uint32_t idx,
		       struct ml_msg *m, struct buf *out)
{
	char from[ML_INIT_ADDR], to[ML_INIT_ADDR];
	const char *tov[1] = { to };
	struct ml_msg_spec spec;

	ml_init_spec(c, user, fi, idx, &spec, from, to);
	spec.to = tov;
	spec.nto = 1;
	ml_msg_build(m, &spec);
	buf_reset(out);
	ml_msg_render(m, out);
	return spec.date_ms;
}

static void sum(const struct ml_init_stats *v, unsigned n, struct ml_init_stats *s)
{
	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < n; i++) {
		s->users += v[i].users;
		s->skipped += v[i].skipped;
		s->msgs += v[i].msgs;
		s->bytes += v[i].bytes;
		s->errors += v[i].errors;
	}
}

int ml_init_jobs(const struct ml_cfg *c, unsigned jobs, bool quiet, const char *where,
		 ml_init_job_fn fn, void *arg)
{
	struct ml_init_stats *stats, s;
	pid_t *pids;
	int failed = 0;
	int64_t t0 = clock_wall_ms();

	if (jobs == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		jobs = n > 0 ? (unsigned)n : 1;
	}
	if (jobs > c->users)
		jobs = c->users > 0 ? (unsigned)c->users : 1;
	stats = mmap(NULL, jobs * sizeof(*stats), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stats == MAP_FAILED)
		fatal("mmap");
	memset(stats, 0, jobs * sizeof(*stats));
	pids = xcalloc(jobs, sizeof(*pids));
	fprintf(stderr, "init: %" PRIu64 " users into %s, profile %s, seed %" PRIu64 ", %u jobs\n",
		c->users, where, c->profile, c->seed, jobs);
	fflush(stderr);
	for (unsigned k = 0; k < jobs; k++) {
		if ((pids[k] = fork()) == -1)
			fatal("fork");
		if (pids[k] == 0)
			_exit(fn(c, arg, k, jobs, &stats[k]));
	}
	for (unsigned left = jobs; left > 0;) {
		int status;
		pid_t p = waitpid(-1, &status, WNOHANG);

		if (p > 0) {
			left--;
			failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
			continue;
		}
		if (p == -1 && errno != EINTR)
			break;
		if (!quiet) {
			double el = (double)(clock_wall_ms() - t0) / 1000.0;
			sum(stats, jobs, &s);
			fprintf(stderr,
				"\rinit: %" PRIu64 "/%" PRIu64 " users, %" PRIu64
				" messages, %.0f MB, %.0f s   ",
				s.users + s.skipped, c->users, s.msgs, (double)s.bytes / 1e6, el);
		}
		usleep(p == 0 ? 500000 : 0);
	}
	sum(stats, jobs, &s);
	double el = (double)(clock_wall_ms() - t0) / 1000.0;
	if (!quiet)
		fputc('\n', stderr);
	fprintf(stderr,
		"init: %" PRIu64 " users (%" PRIu64 " already complete), %" PRIu64
		" messages, %.1f MB in %.1f s: %.0f users/s, %.0f messages/s; %s\n",
		s.users + s.skipped, s.skipped, s.msgs, (double)s.bytes / 1e6, el,
		el > 0 ? (double)(s.users + s.skipped) / el : 0.0,
		el > 0 ? (double)s.msgs / el : 0.0,
		failed || s.errors ? "with errors (run it again: it resumes)" : "done");
	munmap(stats, jobs * sizeof(*stats));
	free(pids);
	return failed || s.errors ? -1 : 0;
}
