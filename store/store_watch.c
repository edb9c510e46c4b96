/* store_watch.c — owns change notification: one inotify descriptor per process watching the
 * `notify` file of each partition a session cares about; every writer touches that file after
 * its commit (store.c), so the descriptor becomes readable within a second (at once, in
 * practice) of a change made by any process. Thousands of IDLE sessions share one fd. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common/log.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

struct store_watch {
	struct store *st;
	int fd;
	int *wd; /* per partition: the watch descriptor, -1 when not watched */
};

int store_watch_new(struct store *st, struct store_watch **w_r)
{
	struct store_watch *w;
	int fd;

	*w_r = NULL;
	if ((fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) == -1) {
		log_warn("store: inotify_init1");
		return STORE_EIO;
	}
	w = xcalloc(1, sizeof(*w));
	w->st = st;
	w->fd = fd;
	w->wd = xcalloc(st->nparts, sizeof(*w->wd));
	for (unsigned i = 0; i < st->nparts; i++)
		w->wd[i] = -1;
	*w_r = w;
	return 0;
}

int store_watch_partition(struct store_watch *w, unsigned part)
{
	char path[PATH_MAX];

	if (part >= w->st->nparts)
		return STORE_EINVAL;
	if (w->wd[part] != -1)
		return 0;
	snprintf(path, sizeof(path), "%s/notify", w->st->parts[part].dir);
	if ((w->wd[part] = inotify_add_watch(w->fd, path, IN_MODIFY)) == -1) {
		log_warn("store: inotify_add_watch %s", path);
		return STORE_EIO;
	}
	return 0;
}

int store_watch_fd(const struct store_watch *w)
{
	return w->fd;
}

int store_watch_drain(struct store_watch *w, bool *changed)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int n = 0;

	if (changed != NULL)
		memset(changed, 0, w->st->nparts * sizeof(*changed));
	for (;;) {
		ssize_t r = read(w->fd, buf, sizeof(buf));

		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (char *p = buf; p < buf + r;) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)p;

			for (unsigned i = 0; i < w->st->nparts; i++) {
				if (w->wd[i] != ev->wd)
					continue;
				if (changed == NULL || !changed[i])
					n++;
				if (changed != NULL)
					changed[i] = true;
			}
			p += sizeof(*ev) + ev->len;
		}
		/* a read that left room for one more event of any size emptied the queue: what
		   arrives later wakes the caller's poll again (one read a wake-up, not two) */
		if ((size_t)r + sizeof(struct inotify_event) + NAME_MAX + 1 <= sizeof(buf))
			break;
	}
	return n;
}

void store_watch_free(struct store_watch **wp)
{
	struct store_watch *w = *wp;

	if (w == NULL)
		return;
	close(w->fd);
	free(w->wd);
	free(w);
	*wp = NULL;
}
