/* shared.c — owns the table every worker of one mtad sees: a fixed-size region mapped
 * MAP_SHARED by the master before it forks, guarded by one robust process-shared mutex. It
 * holds the relay connections open per destination (so relay_concurrency holds for the whole
 * daemon, not per worker) and the AUTH failures per client address (so the penalty grows
 * whichever worker the client reaches). Connection counts are kept per worker index: a worker
 * that died (kill -9) cannot leave slots taken, its restart clears its column. Bounded:
 * SH_SLOTS entries, open addressing over SH_PROBE slots; when a window is full the oldest
 * AUTH entry is evicted, and a destination that finds no room is not limited (logged). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "common/str.h"
#include "mtad/mtad.h"

#define SH_SLOTS 2048
#define SH_PROBE 32
#define SH_KEY_MAX MTAD_SHARED_KEY_MAX

enum sh_kind { SH_FREE = 0, SH_DEST, SH_AUTH };

struct sh_entry {
	uint8_t kind;
	char key[SH_KEY_MAX];
	uint32_t fails;                     /* SH_AUTH */
	int64_t last_ms;                    /* SH_AUTH: last failure */
	uint16_t active[MTAD_SHARED_WORKERS]; /* SH_DEST: connections per worker */
};

struct mtad_shared {
	pthread_mutex_t lock;
	int64_t auth_forget_ms;
	struct sh_entry e[SH_SLOTS];
};

struct mtad_shared *mtad_shared_new(int64_t auth_forget_ms)
{
	pthread_mutexattr_t ma;
	struct mtad_shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (sh == MAP_FAILED)
		fatal("mmap shared table");
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	if (pthread_mutex_init(&sh->lock, &ma) != 0)
		fatalx("shared table mutex");
	pthread_mutexattr_destroy(&ma);
	sh->auth_forget_ms = auth_forget_ms;
	return sh;
}

void mtad_shared_free(struct mtad_shared **shp)
{
	if (*shp == NULL)
		return;
	munmap(*shp, sizeof(**shp));
	*shp = NULL;
}

static void sh_lock(struct mtad_shared *sh)
{
	/* a worker killed while holding the lock: the counters stay usable (each update is a
	   few stores; at worst one count is off until that worker's column is cleared) */
	if (pthread_mutex_lock(&sh->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&sh->lock);
}

static void sh_unlock(struct mtad_shared *sh)
{
	pthread_mutex_unlock(&sh->lock);
}

static uint32_t sh_hash(const char *key)
{
	uint32_t h = 2166136261u;

	for (const char *p = key; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

static bool dest_idle(const struct sh_entry *e)
{
	for (size_t w = 0; w < MTAD_SHARED_WORKERS; w++)
		if (e->active[w] != 0)
			return false;
	return true;
}

/* An entry is reusable when free, a destination with no connection, or a forgotten AUTH
   record. */
static bool sh_reusable(const struct mtad_shared *sh, const struct sh_entry *e, int64_t now)
{
	return e->kind == SH_FREE || (e->kind == SH_DEST && dest_idle(e)) ||
	       (e->kind == SH_AUTH && now - e->last_ms > sh->auth_forget_ms);
}

/* The entry of (kind, key); create: make one (in a reusable slot, else over the oldest AUTH
   entry of the window). NULL: none. */
static struct sh_entry *sh_find(struct mtad_shared *sh, enum sh_kind kind, const char *key,
				bool create)
{
	uint32_t h = sh_hash(key);
	int64_t now = mtad_now_ms();
	struct sh_entry *spare = NULL, *oldest = NULL;

	for (uint32_t i = 0; i < SH_PROBE; i++) {
		struct sh_entry *e = &sh->e[(h + i) % SH_SLOTS];

		if (e->kind == kind && strcmp(e->key, key) == 0)
			return e;
		if (spare == NULL && sh_reusable(sh, e, now))
			spare = e;
		if (e->kind == SH_AUTH && (oldest == NULL || e->last_ms < oldest->last_ms))
			oldest = e;
	}
	if (!create)
		return NULL;
	if (spare == NULL)
		spare = oldest;
	if (spare == NULL)
		return NULL;
	memset(spare, 0, sizeof(*spare));
	spare->kind = (uint8_t)kind;
	str_lcpy(spare->key, key, sizeof(spare->key));
	return spare;
}

void mtad_shared_worker_reset(struct mtad_shared *sh, unsigned worker)
{
	sh_lock(sh);
	for (size_t i = 0; i < SH_SLOTS; i++)
		if (sh->e[i].kind == SH_DEST)
			sh->e[i].active[worker % MTAD_SHARED_WORKERS] = 0;
	sh_unlock(sh);
}

bool mtad_shared_dest_take(struct mtad_shared *sh, unsigned worker, const char *dest,
			   unsigned limit)
{
	struct sh_entry *e;
	unsigned total = 0;
	bool ok = true;

	sh_lock(sh);
	if ((e = sh_find(sh, SH_DEST, dest, true)) == NULL) {
		sh_unlock(sh);
		log_warnx("relay: shared table full, %s not limited", dest);
		return true;
	}
	for (size_t w = 0; w < MTAD_SHARED_WORKERS; w++)
		total += e->active[w];
	if (total >= limit)
		ok = false;
	else
		e->active[worker % MTAD_SHARED_WORKERS]++;
	sh_unlock(sh);
	return ok;
}

void mtad_shared_dest_put(struct mtad_shared *sh, unsigned worker, const char *dest)
{
	struct sh_entry *e;

	sh_lock(sh);
	if ((e = sh_find(sh, SH_DEST, dest, false)) != NULL &&
	    e->active[worker % MTAD_SHARED_WORKERS] > 0)
		e->active[worker % MTAD_SHARED_WORKERS]--;
	sh_unlock(sh);
}

unsigned mtad_shared_dest_active(struct mtad_shared *sh, const char *dest)
{
	struct sh_entry *e;
	unsigned total = 0;

	sh_lock(sh);
	if ((e = sh_find(sh, SH_DEST, dest, false)) != NULL)
		for (size_t w = 0; w < MTAD_SHARED_WORKERS; w++)
			total += e->active[w];
	sh_unlock(sh);
	return total;
}

uint32_t mtad_shared_auth_failure(struct mtad_shared *sh, const char *addr)
{
	struct sh_entry *e;
	uint32_t before = 0;
	int64_t now = mtad_now_ms();

	sh_lock(sh);
	if ((e = sh_find(sh, SH_AUTH, addr, true)) != NULL) {
		if (now - e->last_ms > sh->auth_forget_ms)
			e->fails = 0;
		before = e->fails++;
		e->last_ms = now;
	}
	sh_unlock(sh);
	return before;
}

void mtad_shared_auth_clear(struct mtad_shared *sh, const char *addr)
{
	struct sh_entry *e;

	sh_lock(sh);
	if ((e = sh_find(sh, SH_AUTH, addr, false)) != NULL)
		e->kind = SH_FREE;
	sh_unlock(sh);
}
