/* store_event.h — the glue between a libevent loop and the group committer, for the daemons
 * (header only: libstore itself does not use libevent). The loop watches store_gc_fd and
 * runs store_gc_dispatch when it is readable. */
#ifndef HERON_STORE_EVENT_H
#define HERON_STORE_EVENT_H

#include <event2/event.h>

#include "store/store.h"

static inline void store_gc_event_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	store_gc_dispatch(arg);
}

/* A persistent, added event on gc's descriptor in base, or NULL (event_free it before
   store_gc_free). */
static inline struct event *store_gc_event_new(struct event_base *base, struct store_gc *gc)
{
	struct event *ev = event_new(base, store_gc_fd(gc), EV_READ | EV_PERSIST,
				     store_gc_event_cb, gc);

	if (ev != NULL && event_add(ev, NULL) == -1) {
		event_free(ev);
		ev = NULL;
	}
	return ev;
}

#endif
