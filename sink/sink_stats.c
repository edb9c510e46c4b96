/* sink_stats.c — owns the shared-memory segment every worker writes its counters, delivery
 * histogram and arrival records into, and the control port reads from.
 *
 * The segment is mapped before the workers fork. Each worker has its own slot (counters and
 * histogram); the arrival records of all workers share one byte ring, so sequence numbers are
 * global. One process-shared robust mutex guards all of it: it is held for a few hundred
 * nanoseconds per message, and a reader takes it to get an exact snapshot. A message is counted
 * before its 250 is written, so whoever saw the 250 sees it counted. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "common/buf.h"
#include "common/log.h"
#include "sink/sink.h"

#define REC_RECORD 1u
#define REC_PAD 2u
#define REC_ALIGN 8u
#define READ_COPY_MAX (256u * 1024u) /* bytes copied out per sink_records_read */
#define READ_COPY_SLACK (2u << 20)   /* room for the record that crosses READ_COPY_MAX */

struct rec_hdr {
	uint32_t len;  /* the whole entry, aligned */
	uint32_t type; /* REC_RECORD or REC_PAD */
	uint64_t seq;
	int64_t sent_ms;
	int64_t arrival_ms;
	uint32_t id_len;
	uint32_t nrcpts;
	uint32_t rcpts_len;
	uint32_t unused;
};

struct sink_slot {
	struct sink_counters c;
	struct histo delivery;
};

struct sink_shared {
	pthread_mutex_t lock;
	struct sink_faults faults;
	unsigned nworkers;
	bool record_all;
	size_t map_len;
	uint64_t last_seq;           /* the last sequence number handed out */
	uint64_t streamed;           /* the highest seq a `records` reply has carried */
	uint64_t records_dropped;    /* evicted (or too big) before any reader saw them */
	uint64_t ring_size;          /* bytes, a multiple of REC_ALIGN */
	uint64_t head, tail;         /* virtual offsets: head <= tail <= head + ring_size */
	uint64_t hint_seq, hint_off; /* where the last read stopped, to skip the scan */
	struct sink_slot *slots;     /* nworkers, inside the segment */
	unsigned char *ring;         /* ring_size bytes, inside the segment */
};

static struct buf read_copy; /* this process's copy of the records being streamed */

static void sh_lock(struct sink_shared *sh)
{
	int rc = pthread_mutex_lock(&sh->lock);

	if (rc == EOWNERDEAD) {
		/* a worker died holding it; its half-done update is at most one message */
		log_warnx("sink stats lock recovered from a dead worker");
		pthread_mutex_consistent(&sh->lock);
	} else if (rc != 0) {
		errno = rc;
		fatal("sink stats lock");
	}
}

static void sh_unlock(struct sink_shared *sh)
{
	pthread_mutex_unlock(&sh->lock);
}

static size_t align_up(size_t n)
{
	return (n + REC_ALIGN - 1) & ~(size_t)(REC_ALIGN - 1);
}

struct sink_shared *sink_shared_create(unsigned nworkers, size_t record_mem, bool record_all)
{
	size_t head_len = align_up(sizeof(struct sink_shared));
	size_t slots_len = align_up(nworkers * sizeof(struct sink_slot));
	size_t ring_len = record_mem & ~(size_t)(REC_ALIGN - 1);
	size_t len = head_len + slots_len + ring_len;
	pthread_mutexattr_t attr;
	struct sink_shared *sh;

	sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		fatal("mmap %zu bytes for the sink's statistics", len);
	/* anonymous pages are zero: counters, histograms and faults start empty */
	sh->map_len = len;
	sh->nworkers = nworkers;
	sh->record_all = record_all;
	sh->slots = (struct sink_slot *)((char *)sh + head_len);
	sh->ring = (unsigned char *)sh + head_len + slots_len;
	sh->ring_size = ring_len;
	if (pthread_mutexattr_init(&attr) != 0 ||
	    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) != 0 ||
	    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) != 0 ||
	    pthread_mutex_init(&sh->lock, &attr) != 0)
		fatalx("cannot make a process-shared mutex");
	pthread_mutexattr_destroy(&attr);
	return sh;
}

void sink_shared_destroy(struct sink_shared **shp)
{
	struct sink_shared *sh = *shp;

	if (sh == NULL)
		return;
	*shp = NULL;
	buf_release(&read_copy);
	munmap(sh, sh->map_len);
}

struct sink_faults *sink_shared_faults(struct sink_shared *sh)
{
	return &sh->faults;
}

void sink_stats_connection(struct sink_shared *sh, unsigned w)
{
	sink_stats_event(sh, w, SINK_COUNTER(connections));
}

void sink_stats_event(struct sink_shared *sh, unsigned w, size_t counter_offset)
{
	uint64_t *c = (uint64_t *)((char *)&sh->slots[w].c + counter_offset);

	sh_lock(sh);
	(*c)++;
	sh_unlock(sh);
}

/* Drops the oldest entry; counts it when no reader has had it. */
static void ring_evict(struct sink_shared *sh)
{
	struct rec_hdr *h = (struct rec_hdr *)(sh->ring + sh->head % sh->ring_size);

	if (h->type == REC_RECORD && h->seq > sh->streamed)
		sh->records_dropped++;
	sh->head += h->len;
}

static void ring_make_room(struct sink_shared *sh, uint64_t need)
{
	while (sh->tail + need - sh->head > sh->ring_size)
		ring_evict(sh);
}

static void ring_append(struct sink_shared *sh, const struct sink_record *r)
{
	size_t need = align_up(sizeof(struct rec_hdr) + r->id_len + r->rcpts_len);
	uint64_t room_to_end = sh->ring_size - sh->tail % sh->ring_size;
	struct rec_hdr *h;

	if (need > sh->ring_size / 2) {
		sh->records_dropped++;
		return;
	}
	if (room_to_end < need) {
		ring_make_room(sh, room_to_end + need);
		h = (struct rec_hdr *)(sh->ring + sh->tail % sh->ring_size);
		h->len = (uint32_t)room_to_end;
		h->type = REC_PAD;
		sh->tail += room_to_end;
	} else {
		ring_make_room(sh, need);
	}
	h = (struct rec_hdr *)(sh->ring + sh->tail % sh->ring_size);
	*h = (struct rec_hdr){ .len = (uint32_t)need,
			       .type = REC_RECORD,
			       .seq = r->seq,
			       .sent_ms = r->sent_ms,
			       .arrival_ms = r->arrival_ms,
			       .id_len = (uint32_t)r->id_len,
			       .nrcpts = r->nrcpts,
			       .rcpts_len = (uint32_t)r->rcpts_len };
	memcpy(h + 1, r->id, r->id_len);
	memcpy((char *)(h + 1) + r->id_len, r->rcpts, r->rcpts_len);
	sh->tail += need;
}

void sink_stats_message(struct sink_shared *sh, unsigned w, uint64_t bytes, bool stamped,
			struct sink_record *r)
{
	struct sink_slot *s = &sh->slots[w];

	sh_lock(sh);
	s->c.messages++;
	s->c.recipients += r->nrcpts;
	s->c.bytes += bytes;
	if (stamped) {
		int64_t d = r->arrival_ms - r->sent_ms;

		s->c.stamped++;
		histo_add(&s->delivery, d > 0 ? (uint64_t)d * 1000u : 0);
	}
	if ((stamped || sh->record_all) && sh->ring_size > 0) {
		r->seq = ++sh->last_seq;
		ring_append(sh, r);
	}
	sh_unlock(sh);
}

void sink_stats_snapshot(struct sink_shared *sh, struct sink_counters *sum, struct histo *h,
			 uint64_t *records_dropped_r)
{
	memset(sum, 0, sizeof(*sum));
	histo_init(h);
	sh_lock(sh);
	for (unsigned w = 0; w < sh->nworkers; w++) {
		const struct sink_counters *c = &sh->slots[w].c;

		sum->connections += c->connections;
		sum->messages += c->messages;
		sum->recipients += c->recipients;
		sum->bytes += c->bytes;
		sum->stamped += c->stamped;
		sum->rejected += c->rejected;
		sum->dropped += c->dropped;
		sum->tls += c->tls;
		histo_merge(h, &sh->slots[w].delivery);
	}
	*records_dropped_r = sh->records_dropped;
	sh_unlock(sh);
}

void sink_stats_reset(struct sink_shared *sh)
{
	sh_lock(sh);
	memset(sh->slots, 0, sh->nworkers * sizeof(*sh->slots));
	sh->records_dropped = 0;
	sh->head = sh->tail;
	sh->hint_seq = sh->hint_off = 0;
	sh_unlock(sh);
}

/* Copies entries with seq > since into read_copy, at most max of them and about
   READ_COPY_MAX bytes; returns how many. Called with the lock held. */
static size_t ring_copy_since(struct sink_shared *sh, uint64_t since, uint64_t until, size_t max)
{
	uint64_t off = sh->head;
	size_t n = 0;

	if (sh->hint_off >= sh->head && sh->hint_off <= sh->tail && since >= sh->hint_seq)
		off = sh->hint_off; /* everything before it has seq <= hint_seq */
	buf_reset(&read_copy);
	while (off < sh->tail && n < max && read_copy.len < READ_COPY_MAX) {
		const struct rec_hdr *h = (const void *)(sh->ring + off % sh->ring_size);

		if (h->type == REC_RECORD && h->seq > until)
			break;
		if (h->type == REC_RECORD && h->seq > since) {
			if (buf_append(&read_copy, h, h->len) < 0)
				break;
			if (h->seq > sh->streamed)
				sh->streamed = h->seq;
			n++;
			sh->hint_seq = h->seq;
			sh->hint_off = off + h->len;
		}
		off += h->len;
	}
	return n;
}

uint64_t sink_records_last_seq(struct sink_shared *sh)
{
	uint64_t seq;

	sh_lock(sh);
	seq = sh->last_seq;
	sh_unlock(sh);
	return seq;
}

size_t sink_records_read(struct sink_shared *sh, uint64_t since, uint64_t until, size_t max,
			 void (*fn)(void *ctx, const struct sink_record *r), void *ctx)
{
	size_t n, off = 0;

	if (read_copy.max == 0)
		buf_init(&read_copy, 64 * 1024, READ_COPY_MAX + READ_COPY_SLACK);
	sh_lock(sh);
	n = sh->ring_size > 0 ? ring_copy_since(sh, since, until, max) : 0;
	sh_unlock(sh);
	for (size_t i = 0; i < n; i++) {
		const struct rec_hdr *h = (const void *)(read_copy.data + off);
		struct sink_record r = {
			.seq = h->seq,
			.sent_ms = h->sent_ms,
			.arrival_ms = h->arrival_ms,
			.id = (const char *)(h + 1),
			.id_len = h->id_len,
			.rcpts = (const char *)(h + 1) + h->id_len,
			.rcpts_len = h->rcpts_len,
			.nrcpts = h->nrcpts,
		};

		fn(ctx, &r);
		off += h->len;
	}
	return n;
}

void sink_stats_log_summary(struct sink_shared *sh, const char *why)
{
	struct sink_counters c;
	static struct histo h; /* 40 KiB: not on a signal-time stack */
	uint64_t dropped;

	sink_stats_snapshot(sh, &c, &h, &dropped);
	log_info("sink summary why=%s connections=%" PRIu64 " messages=%" PRIu64
		 " recipients=%" PRIu64 " bytes=%" PRIu64 " stamped=%" PRIu64 " rejected=%" PRIu64
		 " dropped=%" PRIu64 " records_dropped=%" PRIu64 " delivery_p50_ms=%" PRIu64
		 " delivery_p99_ms=%" PRIu64 " delivery_max_ms=%" PRIu64,
		 why, c.connections, c.messages, c.recipients, c.bytes, c.stamped, c.rejected,
		 c.dropped, dropped, histo_percentile(&h, 50) / 1000,
		 histo_percentile(&h, 99) / 1000, h.max / 1000);
}
