/* shmtable.c — owns the workers' shared table: its mapping (anonymous, or a file several
 * daemons share), the lock, the entry layout (variable stride: key, then one count per
 * worker), lookup in a seeded window, eviction and expiry. The contract is in shmtable.h. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/shmtable.h"
#include "common/str.h"
#include "common/xmalloc.h"

#define SHM_MAGIC 0x4865726f6e536854ULL /* "HeronShT" */
#define SHM_VERSION 2

/* One slot; the key (key_max bytes) and the worker counts follow at fixed offsets. */
struct shm_entry {
	uint8_t kind;    /* 0: free */
	int64_t made_ms; /* when the key took the slot: a new entry is not the oldest */
	struct shmtable_rec rec;
	char key[];
};

struct shmtable {
	uint64_t magic; /* set last when a file-backed table is made */
	uint32_t version;
	char boot_id[40]; /* the boot it was made in (a file outlives a reboot) */
	pthread_mutex_t lock;
	uint64_t seed;
	size_t nslots, map_size, stride, counts_off, key_max;
	unsigned workers;
	int64_t forget_ms;
	uint32_t total[SHMTABLE_WORKERS_MAX];
	_Alignas(8) unsigned char slots[];
};

/* Bytes of a table of n (a power of two) slots, and the entry layout. */
static size_t shm_geometry(size_t n, unsigned workers, size_t key_max, size_t *counts_off_r,
			   size_t *stride_r);

static size_t align_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

static size_t shm_geometry(size_t n, unsigned workers, size_t key_max, size_t *counts_off_r,
			   size_t *stride_r)
{
	*counts_off_r = align_up(offsetof(struct shm_entry, key) + key_max, sizeof(uint32_t));
	*stride_r = align_up(*counts_off_r + workers * sizeof(uint32_t), 8);
	return sizeof(struct shmtable) + n * *stride_r;
}

static size_t shm_slots_for(size_t nslots)
{
	size_t n = SHMTABLE_PROBE;

	while (n < nslots)
		n *= 2;
	return n;
}

/* This boot's id ("" when the kernel does not say). */
static void shm_boot_id(char out[40])
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	out[0] = '\0';
	if (f != NULL) {
		if (fgets(out, 40, f) == NULL)
			out[0] = '\0';
		fclose(f);
	}
	out[strcspn(out, "\n")] = '\0';
}

void shm_mutex_init(pthread_mutex_t *m, const char *what)
{
	pthread_mutexattr_t ma;

	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	if (pthread_mutex_init(m, &ma) != 0)
		fatalx("%s mutex", what);
	pthread_mutexattr_destroy(&ma);
}

/* Fills a mapped, zeroed region of size bytes as a table. */
static void shm_init(struct shmtable *t, size_t n, unsigned workers, size_t key_max,
		     int64_t forget_ms, size_t size)
{
	shm_mutex_init(&t->lock, "shared table");
	if (getrandom(&t->seed, sizeof(t->seed), 0) != sizeof(t->seed))
		t->seed = (uint64_t)(uintptr_t)t ^ (uint64_t)getpid() ^ (uint64_t)clock_mono_ms();
	t->nslots = n;
	t->map_size = size;
	(void)shm_geometry(n, workers, key_max, &t->counts_off, &t->stride);
	t->key_max = key_max;
	t->workers = workers;
	t->forget_ms = forget_ms;
	t->version = SHM_VERSION;
	shm_boot_id(t->boot_id);
}

struct shmtable *shmtable_new(size_t nslots, unsigned workers, size_t key_max, int64_t forget_ms)
{
	struct shmtable *t;
	size_t n = shm_slots_for(nslots), counts_off, stride, size;

	assert(workers >= 1 && workers <= SHMTABLE_WORKERS_MAX && key_max >= 2);
	size = shm_geometry(n, workers, key_max, &counts_off, &stride);
	t = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		fatal("mmap shared table (%zu bytes)", size);
	shm_init(t, n, workers, key_max, forget_ms, size);
	t->magic = SHM_MAGIC;
	return t;
}

/* Whether the file's first bytes are a table made in this boot with a geometry that matches
   its size; the table's size in *size_r. */
static bool shm_file_valid(int fd, size_t *size_r)
{
	struct shmtable h;
	struct stat sb;
	char boot[40];
	size_t co, st;

	if (fstat(fd, &sb) == -1 || (size_t)sb.st_size < sizeof(h) ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return false;
	shm_boot_id(boot);
	if (h.magic != SHM_MAGIC || h.version != SHM_VERSION || strcmp(h.boot_id, boot) != 0 ||
	    h.workers < 1 || h.workers > SHMTABLE_WORKERS_MAX || h.key_max < 2 ||
	    h.nslots < SHMTABLE_PROBE || (h.nslots & (h.nslots - 1)) != 0 ||
	    h.map_size != shm_geometry(h.nslots, h.workers, h.key_max, &co, &st) ||
	    h.stride != st || h.counts_off != co || h.map_size != (size_t)sb.st_size)
		return false;
	*size_r = h.map_size;
	return true;
}

int shmtable_open(const char *path, size_t nslots, unsigned workers, size_t key_max,
		  int64_t forget_ms, struct shmtable **t_r, char **error_r)
{
	size_t n = shm_slots_for(nslots), counts_off, stride, size;
	bool valid;
	struct shmtable *t;
	int fd;

	assert(workers >= 1 && workers <= SHMTABLE_WORKERS_MAX && key_max >= 2);
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) == -1) {
		*error_r = xasprintf("%s: %s", path, strerror(errno));
		return -1;
	}
	/* one process at a time looks at (and maybe makes) the table */
	if (flock(fd, LOCK_EX) == -1)
		goto fail;
	if (!(valid = shm_file_valid(fd, &size))) {
		size = shm_geometry(n, workers, key_max, &counts_off, &stride);
		if (ftruncate(fd, 0) == -1 || ftruncate(fd, (off_t)size) == -1)
			goto fail;
	}
	t = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (t == MAP_FAILED)
		goto fail;
	if (!valid) {
		shm_init(t, n, workers, key_max, forget_ms, size);
		__atomic_store_n(&t->magic, SHM_MAGIC, __ATOMIC_RELEASE);
	} else if (t->nslots != n || t->workers != workers || t->key_max != key_max) {
		log_warnx("shared table %s: has %zu slots, %u columns, %zu-byte keys; kept (asked "
			  "for %zu, %u, %zu)",
			  path, t->nslots, t->workers, t->key_max, n, workers, key_max);
	}
	/* the mapping holds the open file, and so the flock: it must be let go by name */
	flock(fd, LOCK_UN);
	close(fd);
	*t_r = t;
	return 0;
fail:
	*error_r = xasprintf("%s: %s", path, strerror(errno));
	flock(fd, LOCK_UN);
	close(fd);
	return -1;
}

const char *shmtable_key(const char *text, char *out, size_t key_max)
{
	size_t len = strlen(text), head = key_max - 18;
	uint64_t h = 14695981039346656037ULL;

	assert(key_max > 18);
	if (len < key_max)
		return text;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)text[i]) * 1099511628211ULL;
	memcpy(out, text, head);
	snprintf(out + head, key_max - head, "#%016" PRIx64, h);
	return out;
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
	return e->rec.fails == 0 || now - e->rec.last_ms >= t->forget_ms;
}

/* The entry's latest time: its last failure (when counted), success or next event. */
static int64_t shm_latest(const struct shm_entry *e)
{
	int64_t l = e->rec.fails > 0 && e->rec.last_ms > e->made_ms ? e->rec.last_ms : e->made_ms;

	l = e->rec.ok_ms > l ? e->rec.ok_ms : l;
	return e->rec.next_ms > l ? e->rec.next_ms : l;
}

static bool shm_reusable(struct shmtable *t, struct shm_entry *e, int64_t now)
{
	return e->kind == 0 || (shm_sum(t, e) == 0 && now - shm_latest(e) >= t->forget_ms);
}

/* The entry of (kind, key); create: make one in a reusable slot of the window, else over its
   oldest failure record without counts. NULL: none. */
static struct shm_entry *shm_find(struct shmtable *t, uint8_t kind, const char *key, bool create)
{
	size_t klen = strnlen(key, t->key_max - 1);
	uint64_t h = shm_hash(t, kind, key, klen);
	int64_t now = clock_mono_ms();
	struct shm_entry *spare = NULL, *oldest = NULL;

	for (size_t i = 0; i < SHMTABLE_PROBE; i++) {
		struct shm_entry *e = shm_slot(t, (size_t)(h + i) & (t->nslots - 1));

		if (e->kind == kind && strncmp(e->key, key, klen) == 0 && e->key[klen] == '\0')
			return e;
		if (spare == NULL && shm_reusable(t, e, now))
			spare = e;
		if (e->kind != 0 && shm_sum(t, e) == 0 &&
		    (oldest == NULL || shm_latest(e) < shm_latest(oldest)))
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
	spare->made_ms = now;
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

bool shmtable_take(struct shmtable *t, enum shmtable_kind kind, const char *key, unsigned worker,
		   uint32_t limit)
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

void shmtable_put(struct shmtable *t, enum shmtable_kind kind, const char *key, unsigned worker)
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
	int64_t now = clock_mono_ms();

	shm_lock(t);
	if ((e = shm_find(t, (uint8_t)kind, key, true)) != NULL) {
		if (shm_forgotten(t, e, now))
			e->rec.fails = 0;
		before = e->rec.fails++;
		e->rec.last_ms = now;
	}
	shm_unlock(t);
	return before;
}

void shmtable_fail_clear(struct shmtable *t, enum shmtable_kind kind, const char *key)
{
	struct shm_entry *e;

	shm_lock(t);
	if ((e = shm_find(t, (uint8_t)kind, key, false)) != NULL)
		e->rec.fails = 0;
	shm_unlock(t);
}

void shmtable_with(struct shmtable *t, size_t n, const enum shmtable_kind *kinds,
		   const char *const *keys,
		   void (*fn)(struct shmtable_rec **recs, size_t n, int64_t now_ms, void *arg),
		   void *arg)
{
	struct shmtable_rec *recs[8];

	assert(n <= 8);
	shm_lock(t);
	for (size_t i = 0; i < n; i++) {
		struct shm_entry *e = shm_find(t, (uint8_t)kinds[i], keys[i], true);

		recs[i] = e != NULL ? &e->rec : NULL;
		for (size_t j = 0; j < i && recs[i] != NULL; j++)
			if (recs[j] == recs[i]) /* taken over by key i: key j has no room */
				recs[j] = NULL;
	}
	fn(recs, n, clock_mono_ms(), arg);
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
