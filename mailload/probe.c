/* probe.c — owns an agent's delivery probes: the set of local copies awaited (by message and
 * recipient, with a FIFO in order of their 250s that ends each copy's window), one probe
 * connection per recipient with mail in flight (queued only when the pool is at its cap; the
 * cap comes down when the server refuses probes and grows back), the probes' own queueing
 * delay, and the reconciliation pass after the drain that reads the INBOX of every recipient
 * with a copy no one saw. The probe sessions themselves are in load_imap.c. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/clock.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailload/agent.h"
#include "mailload/json.h"

#define PROBE_CAP_MIN 8
#define RECON_CONCURRENCY 32
#define RECON_TRIES 3

/* ---- rings ---- */
static void ring_init(struct ag_ring *r, size_t esz)
{
	memset(r, 0, sizeof(*r));
	r->esz = esz;
}

static void ring_push(struct ag_ring *r, const void *e)
{
	if (r->len == r->cap) {
		size_t ncap = r->cap ? r->cap * 2 : 256;
		char *a = xreallocarray(NULL, ncap, r->esz);

		for (size_t i = 0; i < r->len; i++) /* unwrap into the new array */
			memcpy(a + i * r->esz, r->a + ((r->head + i) % r->cap) * r->esz, r->esz);
		free(r->a);
		r->a = a;
		r->cap = ncap;
		r->head = 0;
	}
	memcpy(r->a + ((r->head + r->len) % r->cap) * r->esz, e, r->esz);
	r->len++;
}

static const void *ring_front(const struct ag_ring *r)
{
	return r->len ? r->a + r->head * r->esz : NULL;
}

static void ring_pop(struct ag_ring *r, void *e)
{
	if (e != NULL)
		memcpy(e, r->a + r->head * r->esz, r->esz);
	r->head = (r->head + 1) % r->cap;
	r->len--;
}

/* ---- sets of copies: linear probing, backward-shift deletion ---- */
static size_t wkey_slot(uint64_t seq, uint32_t user, size_t cap)
{
	uint64_t h = seq * 0x9e3779b97f4a7c15ULL ^ (uint64_t)user * 0xc2b2ae3d27d4eb4fULL;

	h ^= h >> 31;
	return (size_t)h & (cap - 1);
}

static bool set_insert(struct ag_wset *st, uint64_t seq, uint32_t user);

static void set_grow(struct ag_wset *st)
{
	struct ag_wkey *old = st->a;
	size_t ocap = st->cap;

	st->cap = ocap ? ocap * 2 : 1024;
	st->a = xcalloc(st->cap, sizeof(*st->a));
	st->n = 0;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].seq != 0)
			set_insert(st, old[i].seq, old[i].user);
	free(old);
}

/* false when the copy was in the set already */
static bool set_insert(struct ag_wset *st, uint64_t seq, uint32_t user)
{
	if ((st->n + 1) * 2 > st->cap)
		set_grow(st);
	size_t mask = st->cap - 1, i = wkey_slot(seq, user, st->cap);

	for (; st->a[i].seq != 0; i = (i + 1) & mask)
		if (st->a[i].seq == seq && st->a[i].user == user)
			return false;
	st->a[i] = (struct ag_wkey){ seq, user };
	st->n++;
	return true;
}

/* false when the copy was not in the set */
static bool set_remove(struct ag_wset *st, uint64_t seq, uint32_t user)
{
	if (st->cap == 0)
		return false;
	size_t mask = st->cap - 1, i = wkey_slot(seq, user, st->cap);

	while (st->a[i].seq != seq || st->a[i].user != user) {
		if (st->a[i].seq == 0)
			return false;
		i = (i + 1) & mask;
	}
	for (size_t j = i;;) { /* move back the entries whose probe run passed through i */
		j = (j + 1) & mask;
		if (st->a[j].seq == 0)
			break;
		size_t k = wkey_slot(st->a[j].seq, st->a[j].user, st->cap);
		bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (stays)
			continue;
		st->a[i] = st->a[j];
		i = j;
	}
	st->a[i].seq = 0;
	st->n--;
	return true;
}

/* ---- set-up ---- */
void probe_setup(struct agent *ag)
{
	struct ag_probes *pr = &ag->pr;
	uint64_t n = ag->cfg.users;

	pr->lastuid = xcalloc(n, sizeof(uint32_t));
	pr->uidv = xcalloc(n, sizeof(uint32_t));
	pr->nwait = xcalloc(n, sizeof(uint32_t));
	pr->need = xcalloc(n, sizeof(uint32_t));
	pr->state = xcalloc(n, 1);
	pr->base_ms = clock_wall_ms();
	ring_init(&pr->fifo, sizeof(struct ag_wait));
	ring_init(&pr->queue, sizeof(uint32_t));
	ring_init(&pr->retry, sizeof(uint32_t));
	/* as many as needed (one per recipient with mail in flight), within the descriptors
	   agent_setup left after the workload's own sessions */
	uint64_t fds = ag->fd_limit;
	uint64_t room = fds > ag->cfg.max_sessions + 64 ? fds - ag->cfg.max_sessions - 64 : 64;
	uint64_t cap = ag->cfg.probe_max ? ag->cfg.probe_max : room;
	if (cap > room)
		cap = room;
	pr->cap = pr->cap_max = (uint32_t)(cap < PROBE_CAP_MIN ? PROBE_CAP_MIN : cap);
}

void probe_free(struct agent *ag)
{
	struct ag_probes *pr = &ag->pr;

	free(pr->lastuid);
	free(pr->uidv);
	free(pr->nwait);
	free(pr->need);
	free(pr->state);
	free(pr->awaited.a);
	free(pr->expired.a);
	free(pr->fifo.a);
	free(pr->queue.a);
	free(pr->retry.a);
	free(pr->recon_users);
	free(pr->recon_ok);
	free(pr->recon_why);
	free(pr->recon_tries);
	free(pr->rseen);
	memset(pr, 0, sizeof(*pr));
}

/* ms after base_ms, never 0 (0 means none) */
static uint32_t rel_ms(const struct ag_probes *pr, int64_t ms)
{
	int64_t r = ms - pr->base_ms + 1;

	return r < 1 ? 1 : r > UINT32_MAX ? UINT32_MAX : (uint32_t)r;
}

static int64_t abs_ms(const struct ag_probes *pr, uint32_t rel)
{
	return pr->base_ms + (int64_t)rel - 1;
}

/* ---- the pool ---- */
static void probe_kick(struct agent *ag, int64_t now)
{
	struct ag_probes *pr = &ag->pr;

	if (ag->phase == PH_DONE || now > ag->drain_end || !ag->cfg.delivery_check)
		return;
	while (pr->queue.len > 0 && pr->open < pr->cap) {
		uint32_t u;

		ring_pop(&pr->queue, &u);
		if (pr->nwait[u - 1] == 0) { /* seen meanwhile, or its windows ended */
			pr->state[u - 1] = PS_IDLE;
			pr->need[u - 1] = 0;
			continue;
		}
		pr->state[u - 1] = PS_OPEN;
		pr->open++;
		pr->started++;
		if (pr->need[u - 1] != 0) {
			int64_t since = abs_ms(pr, pr->need[u - 1]);
			ag_sample(ag, FN_PROBE_QUEUE,
				  now > since ? (uint64_t)(now - since) * 1000 : 0);
		}
		imap_start_probe(ag, u);
	}
}

static void probe_enqueue(struct agent *ag, uint32_t u, struct ag_ring *q)
{
	ag->pr.state[u - 1] = PS_QUEUED;
	ring_push(q, &u);
}

void probe_wait_add(struct agent *ag, uint64_t seq, uint32_t user, int64_t ack_ms)
{
	struct ag_probes *pr = &ag->pr;
	struct ag_wait w = { seq, user, ack_ms };

	if (user == 0 || user > ag->cfg.users || !ag->cfg.delivery_check ||
	    !set_insert(&pr->awaited, seq, user))
		return;
	ring_push(&pr->fifo, &w);
	pr->nwait[user - 1]++;
	if (pr->state[user - 1] != PS_WATCHING && pr->need[user - 1] == 0)
		pr->need[user - 1] = rel_ms(pr, ack_ms);
	if (pr->state[user - 1] == PS_IDLE)
		probe_enqueue(ag, user, &pr->queue);
	probe_kick(ag, ack_ms);
}

bool probe_wait_seen(struct agent *ag, uint64_t seq, uint32_t user)
{
	struct ag_probes *pr = &ag->pr;

	if (user == 0 || user > ag->cfg.users)
		return false;
	if (!set_remove(&pr->awaited, seq, user))
		return set_remove(&pr->expired, seq, user);
	pr->nwait[user - 1]--;
	return true;
}

bool ag_wants(const struct agent *ag, uint32_t user)
{
	return user > 0 && user <= ag->cfg.users && ag->pr.nwait[user - 1] > 0;
}

size_t probe_waiting(const struct agent *ag)
{
	return ag->pr.awaited.n + ag->pr.expired.n;
}

void probe_tick(struct agent *ag, int64_t now)
{
	struct ag_probes *pr = &ag->pr;
	int64_t window = (int64_t)ag->cfg.probe_window_s * 1000;
	const struct ag_wait *w;

	while ((w = ring_front(&pr->fifo)) != NULL && w->ack_ms + window <= now) {
		struct ag_wait e;

		ring_pop(&pr->fifo, &e);
		if (!set_remove(&pr->awaited, e.seq, e.user))
			continue; /* seen in time */
		set_insert(&pr->expired, e.seq, e.user);
		pr->nwait[e.user - 1]--;
		uint32_t need = pr->need[e.user - 1];
		if (need != 0 && abs_ms(pr, need) <= e.ack_ms)
			pr->expired_unprobed++; /* no probe ever watched while it was awaited */
	}
	if (now - pr->last_retry_ms >= 1000) { /* refused ones try again a second later */
		pr->last_retry_ms = now;
		while (pr->retry.len > 0) {
			uint32_t u;
			ring_pop(&pr->retry, &u);
			ring_push(&pr->queue, &u);
		}
	}
	/* the cap grows back a little every 10 s without a refusal */
	if (pr->limited && pr->cap < pr->cap_max && now - pr->last_refusal_ms > 10000) {
		pr->cap += pr->cap / 8 + 1;
		if (pr->cap > pr->cap_max)
			pr->cap = pr->cap_max;
		pr->last_refusal_ms = now;
	}
	probe_kick(ag, now);
}

void probe_watching(struct agent *ag, uint32_t user)
{
	struct ag_probes *pr = &ag->pr;
	int64_t now = clock_wall_ms();

	if (pr->need[user - 1] != 0) {
		int64_t since = abs_ms(pr, pr->need[user - 1]);
		ag_sample(ag, FN_PROBE_READY, now > since ? (uint64_t)(now - since) * 1000 : 0);
		pr->need[user - 1] = 0;
	}
	pr->state[user - 1] = PS_WATCHING;
}

void probe_done(struct agent *ag, uint32_t user, bool refused)
{
	struct ag_probes *pr = &ag->pr;
	int64_t now = clock_wall_ms();

	pr->state[user - 1] = PS_IDLE;
	pr->open--;
	if (refused) { /* the server allows fewer connections than we had open */
		pr->refused++;
		pr->limited = true;
		pr->last_refusal_ms = now;
		uint32_t cap = pr->open * 3 / 4 + 1;
		if (cap < pr->cap)
			pr->cap = cap < PROBE_CAP_MIN ? PROBE_CAP_MIN : cap;
	}
	if (pr->nwait[user - 1] > 0) {
		if (pr->need[user - 1] == 0)
			pr->need[user - 1] = rel_ms(pr, now);
		probe_enqueue(ag, user, refused ? &pr->retry : &pr->queue);
	} else {
		pr->need[user - 1] = 0;
	}
	probe_kick(ag, now);
}

void probe_put_stats(const struct agent *ag, struct buf *o)
{
	const struct ag_probes *pr = &ag->pr;

	buf_printf(o,
		   "\"probes\":{\"started\":%" PRIu64 ",\"refused\":%" PRIu64
		   ",\"cap\":%u,\"cap_max\":%u,\"limited\":%s,\"expired_unprobed\":%" PRIu64
		   ",\"idle_missed\":%" PRIu64 ",\"window_s\":%" PRIu64 "}",
		   pr->started, pr->refused, pr->cap, pr->cap_max, pr->limited ? "true" : "false",
		   pr->expired_unprobed, pr->idle_missed, ag->cfg.probe_window_s);
}

/* ---- the reconciliation pass ---- */
struct recon_retry {
	struct agent *ag;
	size_t idx;
};

static void recon_pump(struct agent *ag)
{
	struct ag_probes *pr = &ag->pr;

	while (pr->recon_active < RECON_CONCURRENCY && pr->recon_next < pr->recon_n) {
		size_t i = pr->recon_next++;

		pr->recon_active++;
		imap_start_recon(ag, pr->recon_users[i], i);
	}
}

void recon_start(struct agent *ag, const uint32_t *users, size_t n)
{
	struct ag_probes *pr = &ag->pr;

	free(pr->recon_users);
	free(pr->recon_ok);
	free(pr->recon_why);
	free(pr->recon_tries);
	pr->recon_users = xcalloc(n ? n : 1, sizeof(uint32_t));
	memcpy(pr->recon_users, users, n * sizeof(uint32_t));
	pr->recon_ok = xcalloc(n ? n : 1, sizeof(uint32_t));
	pr->recon_why = xcalloc(n ? n : 1, sizeof(*pr->recon_why));
	pr->recon_tries = xcalloc(n ? n : 1, 1);
	pr->recon_n = n;
	pr->recon_next = pr->recon_done = 0;
	pr->recon_active = 0;
	pr->nrseen = 0;
	recon_pump(ag);
}

bool recon_running(const struct agent *ag)
{
	return ag->pr.recon_done < ag->pr.recon_n;
}

static void recon_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct recon_retry *r = arg;

	imap_start_recon(r->ag, r->ag->pr.recon_users[r->idx], r->idx);
	free(r);
}

void recon_done(struct agent *ag, size_t i, bool ok, const char *why)
{
	struct ag_probes *pr = &ag->pr;

	if (!ok && ++pr->recon_tries[i] < RECON_TRIES) { /* try again a second later */
		struct recon_retry *r = xcalloc(1, sizeof(*r));
		static const struct timeval sec = { 1, 0 };

		r->ag = ag;
		r->idx = i;
		event_base_once(ag->base, -1, EV_TIMEOUT, recon_retry_cb, r, &sec);
		return;
	}
	pr->recon_ok[i] = ok ? 1 : 2;
	if (!ok)
		str_lcpy(pr->recon_why[i], why != NULL ? why : "failed", sizeof(pr->recon_why[i]));
	pr->recon_done++;
	pr->recon_active--;
	recon_pump(ag);
}

void recon_seen(struct agent *ag, uint32_t user, uint64_t seq, uint32_t uidvalidity, uint32_t uid)
{
	struct ag_probes *pr = &ag->pr;
	const struct ag_user *u = ag_user(ag, user);
	bool below = false;

	if (pr->uidv[user - 1] == uidvalidity && uid <= pr->lastuid[user - 1])
		below = true;
	if (u != NULL && u->m.f[0].uidvalidity == uidvalidity && uid <= u->inbox_lastuid)
		below = true;
	if (pr->nrseen == pr->caprseen) {
		pr->caprseen = pr->caprseen ? pr->caprseen * 2 : 64;
		pr->rseen = xreallocarray(pr->rseen, pr->caprseen, sizeof(*pr->rseen));
	}
	pr->rseen[pr->nrseen++] = (struct ag_rseen){ seq,  user, uidvalidity, uid, clock_wall_ms(),
						     below };
}

void recon_put(const struct agent *ag, struct buf *o)
{
	const struct ag_probes *pr = &ag->pr;
	bool first = true;

	buf_puts(o, "\"users_ok\":[");
	for (size_t i = 0; i < pr->recon_n; i++)
		if (pr->recon_ok[i] == 1) {
			buf_printf(o, "%s%u", first ? "" : ",", pr->recon_users[i]);
			first = false;
		}
	buf_puts(o, "],\"users_failed\":[");
	first = true;
	for (size_t i = 0; i < pr->recon_n; i++)
		if (pr->recon_ok[i] != 1) {
			buf_printf(o, "%s[%u,", first ? "" : ",", pr->recon_users[i]);
			json_put_str(o, pr->recon_ok[i] == 0 ? "not reached in time"
							     : pr->recon_why[i]);
			buf_putc(o, ']');
			first = false;
		}
	buf_puts(o, "],\"seen\":[");
	for (size_t i = 0; i < pr->nrseen; i++) {
		const struct ag_rseen *r = &pr->rseen[i];
		buf_printf(o, "%s[%" PRIu64 ",%u,%u,%u,%" PRId64 ",%d]", i ? "," : "", r->seq,
			   r->user, r->uidvalidity, r->uid, r->ms, r->below ? 1 : 0);
	}
	buf_putc(o, ']');
}
