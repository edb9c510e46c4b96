/* shmtable.c — owns the workers' shared table: its mapping, the lock, the entry layout
 * (variable stride: key, then one count per worker), lookup in a seeded window, eviction and
 * expiry. The contract is in shmtable.h. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/shmtable.h"
#include "common/str.h"

/* One slot; the key (key_max bytes) and the worker counts follow at fixed offsets. */
struct shm_entry {
	uint8_t kind;    /* 0: free */
	uint32_t fails;
	int64_t last_ms; /* the last failure, monotonic */
	char key[];
};

struct shmtable {
	pthread_mutex_t lock;
	uint64_t seed;
	size_t nslots, map_size, stride, counts_off, key_max;
	unsigned workers;
	int64_t forget_ms;
	uint32_t total[SHMTABLE_WORKERS_MAX];
	_Alignas(8) unsigned char slots[];
};

static int64_t shm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t align_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

struct shmtable *shmtable_new(size_t nslots, unsigned workers, size_t key_max,
			      int64_t forget_ms)
{
	pthread_mutexattr_t ma;
	struct shmtable *t;
	size_t n = SHMTABLE_PROBE, counts_off, stride, size;

	assert(workers >= 1 && workers <= SHMTABLE_WORKERS_MAX && key_max >= 2);
	while (n < nslots)
		n *= 2;
	counts_off = align_up(offsetof(struct shm_entry, key) + key_max, sizeof(uint32_t));
	stride = align_up(counts_off + workers * sizeof(uint32_t), 8);
	size = sizeof(*t) + n * stride;
	t = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		fatal("mmap shared table (%zu bytes)", size);
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	if (pthread_mutex_init(&t->lock, &ma) != 0)
		fatalx("shared table mutex");
	pthread_mutexattr_destroy(&ma);
	if (getrandom(&t->seed, sizeof(t->seed), 0) != sizeof(t->seed))
		t->seed = (uint64_t)(uintptr_t)t ^ (uint64_t)getpid() ^ (uint64_t)shm_now_ms();
	t->nslots = n;
	t->map_size = size;
	t->stride = stride;
	t->counts_off = counts_off;
	t->key_max = key_max;
	t->workers = workers;
	t->forget_ms = forget_ms;
	return t;
}

void shmtable_free(struct shmtable **tp)
{
	if (*tp == NULL)
		return;
	munmap(*tp, (*tp)->map_size);
	*tp = NULL;
}

static void shm_lock(struct shmtable *t)
{
	/* A worker killed while holding the lock: the table stays usable (each update is a few
	   stores; at worst one count is off until that worker's column is cleared). */
	if (pthread_mutex_lock(&t->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&t->lock);
}

static void shm_unlock(struct shmtable *t)
{
	pthread_mutex_unlock(&t->lock);
}

static struct shm_entry *shm_slot(struct shmtable *t, size_t i)
{
	return (struct shm_entry *)(void *)(t->slots + i * t->stride);
}

static uint32_t *shm_counts(struct shmtable *t, struct shm_entry *e)
{
	return (uint32_t *)(void *)((unsigned char *)e + t->counts_off);
}

static uint32_t shm_sum(struct shmtable *t, struct shm_entry *e)
{
	const uint32_t *c = shm_counts(t, e);
	uint32_t sum = 0;

	for (unsigned w = 0; w < t->workers; w++)
		sum += c[w];
	return sum;
}

/* FNV-1a, seeded, over the kind and the (cut) key. */
static uint64_t shm_hash(const struct shmtable *t, uint8_t kind, const char *key, size_t klen)
{
	uint64_t h = 14695981039346656037ULL ^ t->seed;

	h = (h ^ kind) * 1099511628211ULL;
	for (size_t i = 0; i < klen; i++)
		h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
	return h ^ (h >> 31);
}

static bool shm_forgotten(const struct shmtable *t, const struct shm_entry *e, int64_t now)
{
	return e->fails == 0 || now - e->last_ms >= t->forget_ms;
}

static bool shm_reusable(struct shmtable *t, struct shm_entry *e, int64_t now)
{
	return e->kind == 0 || (shm_sum(t, e) == 0 && shm_forgotten(t, e, now));
}

/* The entry of (kind, key); create: make one in a reusable slot of the window, else over its
   oldest failure record without counts. NULL: none. */
static struct shm_entry *shm_find(struct shmtable *t, uint8_t kind, const char *key,
				  bool create)
{
	size_t klen = strnlen(key, t->key_max - 1);
	uint64_t h = shm_hash(t, kind, key, klen);
	int64_t now = shm_now_ms();
	struct shm_entry *spare = NULL, *oldest = NULL;

	for (size_t i = 0; i < SHMTABLE_PROBE; i++) {
		struct shm_entry *e = shm_slot(t, (size_t)(h + i) & (t->nslots - 1));

		if (e->kind == kind && strncmp(e->key, key, klen) == 0 && e->key[klen] == '\0')
			return e;
		if (spare == NULL && shm_reusable(t, e, now))
			spare = e;
		if (e->kind != 0 && shm_sum(t, e) == 0 &&
		    (oldest == NULL || e->last_ms < oldest->last_ms))
			oldest = e;
	}
	if (!create)
		return NULL;
	if (spare == NULL)
		spare = oldest;
	if (spare == NULL)
		return NULL;
	memset(spare, 0, t->stride);
	spare->kind = kind;
	memcpy(spare->key, key, klen);
	return spare;
}

void shmtable_worker_reset(struct shmtable *t, unsigned worker)
{
	assert(worker < t->workers);
	shm_lock(t);
	t->total[worker] = 0;
	for (size_t i = 0; i < t->nslots; i++) {
		struct shm_entry *e = shm_slot(t, i);

		if (e->kind != 0)
			shm_counts(t, e)[worker] = 0;
	}
	shm_unlock(t);
}

bool shmtable_take(struct shmtable *t, enum shmtable_kind kind, const char *key,
		   unsigned worker, uint32_t limit)
{
	static time_t logged_at; /* this process's last "no room" line: one a second */
	struct shm_entry *e;
	bool ok = true;

	assert(worker < t->workers && kind != 0);
	shm_lock(t);
	if ((e = shm_find(t, (uint8_t)kind, key, true)) == NULL) {
		shm_unlock(t);
		if (time(NULL) != logged_at) {
			logged_at = time(NULL);
			log_warnx("shared table: no room for %s, not limited", key);
		}
		return true;
	}
	if (shm_sum(t, e) >= limit)
		ok = false;
	else
		shm_counts(t, e)[worker]++;
	shm_unlock(t);
	return ok;
}

void shmtable_put(struct shmtable *t, enum shmtable_kind kind, const char *key,
		  unsigned worker)
{
	struct shm_entry *e;

	assert(worker < t->workers);
	shm_lock(t);
	if ((e = shm_find(t, (uint8_t)kind, key, false)) != NULL && shm_counts(t, e)[worker] > 0)
		shm_counts(t, e)[worker]--;
	shm_unlock(t);
}

uint32_t shmtable_count(struct shmtable *t, enum shmtable_kind kind, const char *key)
{
	struct shm_entry *e;
	uint32_t n = 0;

	shm_lock(t);
	if ((e = shm_find(t, (uint8_t)kind, key, false)) != NULL)
		n = shm_sum(t, e);
	shm_unlock(t);
	return n;
}

uint32_t shmtable_fail(struct shmtable *t, enum shmtable_kind kind, const char *key)
{
	struct shm_entry *e;
	uint32_t before = 0;
	int64_t now = shm_now_ms();

	shm_lock(t);
	if ((e = shm_find(t, (uint8_t)kind, key, true)) != NULL) {
		if (shm_forgotten(t, e, now))
			e->fails = 0;
		before = e->fails++;
		e->last_ms = now;
	}
	shm_unlock(t);
	return before;
}

void shmtable_fail_clear(struct shmtable *t, enum shmtable_kind kind, const char *key)
{
	struct shm_entry *e;

	shm_lock(t);
	if ((e = shm_find(t, (uint8_t)kind, key, false)) != NULL)
		e->fails = 0;
	shm_unlock(t);
}

bool shmtable_total_take(struct shmtable *t, unsigned worker, uint32_t limit)
{
	uint32_t sum = 0;
	bool ok;

	assert(worker < t->workers);
	shm_lock(t);
	for (unsigned w = 0; w < t->workers; w++)
		sum += t->total[w];
	if ((ok = sum < limit))
		t->total[worker]++;
	shm_unlock(t);
	return ok;
}

void shmtable_total_put(struct shmtable *t, unsigned worker)
{
	assert(worker < t->workers);
	shm_lock(t);
	if (t->total[worker] > 0)
		t->total[worker]--;
	shm_unlock(t);
}

uint32_t shmtable_total(struct shmtable *t)
{
	uint32_t sum = 0;

	shm_lock(t);
	for (unsigned w = 0; w < t->workers; w++)
		sum += t->total[w];
	shm_unlock(t);
	return sum;
}

uint32_t shmtable_total_mine(struct shmtable *t, unsigned worker)
{
	uint32_t n;

	assert(worker < t->workers);
	shm_lock(t);
	n = t->total[worker];
	shm_unlock(t);
	return n;
}

unsigned shmtable_workers(const struct shmtable *t)
{
	return t->workers;
}
