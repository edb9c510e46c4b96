/* store_admin.h — the one store call mailctl needs beyond store.h (store_admin.c, owned by
 * mailctl): a compacted, consistent copy of a partition's index for `mailctl backup`. */
#ifndef HERON_STORE_ADMIN_H
#define HERON_STORE_ADMIN_H

#include "store/store.h"

/* Writes a compacted copy of partition part's index (STORE_QUEUE_PART: the queue's) to the
   file path, which must not exist (mdb_env_copy2 with MDB_CP_COMPACT: one read snapshot, so
   the copy is consistent while writers go on). Errors: STORE_EINVAL (part), STORE_EEXIST
   (path exists), STORE_ENOSPC, STORE_EIO. */
int store_admin_copy_index(struct store *st, unsigned part, const char *path);

#endif
