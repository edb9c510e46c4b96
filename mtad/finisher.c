/* finisher.c — owns the worker's small fixed pool of threads that make message files durable
 * (store_blob_finish: fsync, rename, directory fsync) off the event loop, so the fsyncs of
 * many sessions run at once instead of one after another, and the loop keeps serving. Results
 * come back to the loop through an eventfd and the callbacks run there, in completion order.
 * The pool is bounded (MTAD_FINISH_THREADS); nothing else runs on those threads. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/log.h"
#include "common/xmalloc.h"
#include "mtad/mtad.h"
#include "store/store.h"

#define MTAD_FINISH_THREADS 8

struct finish_job {
	struct store_blob *blob;
	finisher_cb *cb;
	void *arg;
	int rc;
	struct finish_job *next;
};

struct finisher {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct finish_job *todo, **todo_tail;
	struct finish_job *done, **done_tail;
	bool stop;
	int efd;
	struct event *ev;
	pthread_t threads[MTAD_FINISH_THREADS];
	unsigned nthreads;
};

static void *finisher_thread(void *arg)
{
	struct finisher *f = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		struct finish_job *j;

		while (f->todo == NULL && !f->stop)
			pthread_cond_wait(&f->cond, &f->lock);
		if ((j = f->todo) == NULL)
			break;
		if ((f->todo = j->next) == NULL)
			f->todo_tail = &f->todo;
		pthread_mutex_unlock(&f->lock);
		j->rc = store_blob_finish(j->blob);
		pthread_mutex_lock(&f->lock);
		j->next = NULL;
		*f->done_tail = j;
		f->done_tail = &j->next;
		if (write(f->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			fatal("finisher eventfd");
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static void finisher_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct finisher *f = arg;
	struct finish_job *list;
	uint64_t n;

	if (read(f->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		fatal("finisher eventfd");
	pthread_mutex_lock(&f->lock);
	list = f->done;
	f->done = NULL;
	f->done_tail = &f->done;
	pthread_mutex_unlock(&f->lock);
	while (list != NULL) {
		struct finish_job *j = list;

		list = j->next;
		j->cb(j->rc, j->arg);
		free(j);
	}
}

struct finisher *finisher_new(struct event_base *base)
{
	struct finisher *f = xcalloc(1, sizeof(*f));

	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->todo_tail = &f->todo;
	f->done_tail = &f->done;
	if ((f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1)
		fatal("eventfd");
	f->ev = event_new(base, f->efd, EV_READ | EV_PERSIST, finisher_done_cb, f);
	event_add(f->ev, NULL);
	for (; f->nthreads < MTAD_FINISH_THREADS; f->nthreads++)
		if (pthread_create(&f->threads[f->nthreads], NULL, finisher_thread, f) != 0)
			fatalx("cannot start finisher threads");
	return f;
}

void finisher_run(struct finisher *f, struct store_blob *b, finisher_cb *cb, void *arg)
{
	struct finish_job *j = xcalloc(1, sizeof(*j));

	j->blob = b;
	j->cb = cb;
	j->arg = arg;
	pthread_mutex_lock(&f->lock);
	*f->todo_tail = j;
	f->todo_tail = &j->next;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

void finisher_free(struct finisher **fp)
{
	struct finisher *f = *fp;

	if (f == NULL)
		return;
	/* threads finish what was queued (those files become durable orphans at worst), then
	   stop; callbacks of jobs not yet reported are dropped with the loop */
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	for (unsigned i = 0; i < f->nthreads; i++)
		pthread_join(f->threads[i], NULL);
	for (struct finish_job *j = f->done, *next; j != NULL; j = next) {
		next = j->next;
		free(j);
	}
	event_free(f->ev);
	close(f->efd);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f);
	*fp = NULL;
}
