/* store_metrics.c — owns what the store tells a daemon's metrics: the group committer's and
 * the process's counts (published into the worker's column each second) and the gauges read
 * at scrape time (per partition: index pages in use, map size, users, messages; the disk;
 * the queue's size and the age of its oldest entry), each O(1) per partition: an LMDB stat
 * and, for the queue, its first record (ids grow with time). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <time.h>

#include "common/metrics_std.h"
#include "store/store_private.h"

void store_metrics_publish(const struct store *st, const struct store_gc *gc,
			   struct store_metrics_last *last)
{
	uint64_t ops = 0, commits = 0;

	if (st == NULL || !metrics_enabled())
		return;
	if (gc != NULL)
		store_gc_stats(gc, &ops, &commits);
	metrics_add_since(MS_STORE_COMMITS, 0, 0, commits, &last->commits);
	metrics_add_since(MS_STORE_OPS, 0, 0, ops, &last->ops);
	metrics_add_since(MS_STORE_FSYNCS, 0, 0, store_fsync_count(st), &last->fsyncs);
}

/* Index pages in use, map size and the entries of two DBIs of partition part. */
static void env_usage(struct store *st, unsigned part, enum store_dbi d1, enum store_dbi d2,
		      uint64_t *used_r, uint64_t *size_r, uint64_t *n1_r, uint64_t *n2_r)
{
	struct store_txn *t;
	MDB_envinfo info;
	MDB_stat ms;

	*used_r = *size_r = *n1_r = *n2_r = 0;
	if (store_txn_begin(st, part, STORE_TXN_READ, &t) != 0)
		return;
	if (mdb_env_info(t->e->env, &info) == 0 && mdb_env_stat(t->e->env, &ms) == 0) {
		*size_r = info.me_mapsize;
		*used_r = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
	}
	if (mdb_stat(t->txn, t->e->dbi[d1], &ms) == 0)
		*n1_r = ms.ms_entries;
	if (mdb_stat(t->txn, t->e->dbi[d2], &ms) == 0)
		*n2_r = ms.ms_entries;
	store_txn_abort(&t);
}

static int first_entry_cb(const struct store_queue_msg *qm, void *arg)
{
	*(int64_t *)arg = qm->created;
	return 1; /* the first is enough: ids grow with time */
}

/* One family of a value per partition. */
static void per_partition(struct buf *out, const char *name, const char *type, const char *help,
			  const uint64_t *v, unsigned n)
{
	char labels[32];

	metrics_out_header(out, name, type, help);
	for (unsigned p = 0; p < n; p++) {
		snprintf(labels, sizeof(labels), "partition=\"%u\"", p);
		metrics_out_sample(out, name, labels, (double)v[p]);
	}
}

void store_metrics_live(struct store *st, bool queue, struct buf *out)
{
	unsigned n = st->nparts;
	uint64_t *v = calloc((size_t)n * 4, sizeof(*v)), qused, qsize, qn, qdue;
	int64_t oldest = 0;
	struct statvfs vfs;

	if (v == NULL)
		return;
	for (unsigned p = 0; p < n; p++)
		env_usage(st, p, DBI_USERS, DBI_MSGS, &v[p], &v[n + p], &v[2 * n + p],
			  &v[3 * n + p]);
	per_partition(out, "heron_store_index_bytes", "gauge",
		      "index pages in use (LMDB), per partition", v, n);
	per_partition(out, "heron_store_map_bytes", "gauge",
		      "the index map's current size (it grows up to heron_store_map_max_bytes)",
		      v + n, n);
	metrics_out_header(
		out, "heron_store_map_max_bytes", "gauge",
		"[store] map_size_max: free map space = this - heron_store_index_bytes");
	metrics_out_sample(out, "heron_store_map_max_bytes", NULL, (double)st->map_size_max);
	per_partition(out, "heron_store_users", "gauge", "users, per partition", v + 2 * n, n);
	per_partition(out, "heron_store_messages", "gauge",
		      "messages in mailboxes (a message in two mailboxes counts twice), per "
		      "partition",
		      v + 3 * n, n);
	free(v);
	if (statvfs(st->path, &vfs) == 0) {
		metrics_out_header(out, "heron_store_disk_bytes", "gauge",
				   "size of the filesystem holding [store] path");
		metrics_out_sample(out, "heron_store_disk_bytes", NULL,
				   (double)vfs.f_blocks * (double)vfs.f_frsize);
		metrics_out_header(out, "heron_store_disk_free_bytes", "gauge",
				   "space left there for the store's user");
		metrics_out_sample(out, "heron_store_disk_free_bytes", NULL,
				   (double)vfs.f_bavail * (double)vfs.f_frsize);
	}
	if (!queue)
		return;
	env_usage(st, STORE_QUEUE_PART, DBI_QUEUE, DBI_DUE, &qused, &qsize, &qn, &qdue);
	if (qn > 0)
		store_queue_list(st, first_entry_cb, &oldest);
	metrics_out_header(out, "heron_queue_messages", "gauge",
			   "messages in the relay queue (any state, held ones included)");
	metrics_out_sample(out, "heron_queue_messages", NULL, (double)qn);
	metrics_out_header(out, "heron_queue_scheduled_messages", "gauge",
			   "queue entries waiting for a delivery attempt (not held, not done)");
	metrics_out_sample(out, "heron_queue_scheduled_messages", NULL, (double)qdue);
	metrics_out_header(out, "heron_queue_oldest_age_seconds", "gauge",
			   "age of the oldest message in the queue (0 when empty)");
	metrics_out_sample(out, "heron_queue_oldest_age_seconds", NULL,
			   oldest > 0 && (int64_t)time(NULL) > oldest
				   ? (double)((int64_t)time(NULL) - oldest)
				   : 0);
	metrics_out_header(out, "heron_queue_index_bytes", "gauge",
			   "the queue's index pages in use");
	metrics_out_sample(out, "heron_queue_index_bytes", NULL, (double)qused);
}
