/* store_admin.c — owns store_admin_copy_index (store_admin.h) for `mailctl backup`. Kept
 * apart from the store team's files: the only mailctl code that reads store_private.h. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <unistd.h>

#include "common/log.h"
#include "store/store_admin.h"
#include "store/store_private.h"

int store_admin_copy_index(struct store *st, unsigned part, const char *path)
{
	struct store_env *e = store_env_of(st, part);
	int rc;

	if (e == NULL || e->env == NULL)
		return STORE_EINVAL;
	if (access(path, F_OK) == 0)
		return STORE_EEXIST;
	/* the env is MDB_NOSUBDIR: path names the copy's data file itself */
	if ((rc = mdb_env_copy2(e->env, path, MDB_CP_COMPACT)) != 0) {
		log_warnx("store: copy of %s/index.mdb to %s: %s", e->dir, path, mdb_strerror(rc));
		(void)unlink(path);
		return rc == ENOSPC ? STORE_ENOSPC : STORE_EIO;
	}
	return 0;
}
