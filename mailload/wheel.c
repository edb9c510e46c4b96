/* wheel.c — owns the hashed timer wheel behind per-user Poisson arrivals: O(1) add and delete,
 * one slot visited per 10 ms tick, timers beyond one turn wait in their slot for their round. */
#include <string.h>

#include "mailload/agent.h"

void wheel_init(struct wheel *w, int64_t now_ms)
{
	memset(w, 0, sizeof(*w));
	w->now = (uint64_t)now_ms / WHEEL_TICK_MS;
}

void wheel_add(struct wheel *w, struct wtimer *t, int64_t due_ms)
{
	uint64_t due = due_ms < 0 ? 0 : (uint64_t)due_ms / WHEEL_TICK_MS;
	struct wtimer **head;

	if (t->pprev != NULL)
		wheel_del(t);
	if (due <= w->now)
		due = w->now + 1;
	t->due = due;
	head = &w->slot[due % WHEEL_SLOTS];
	t->next = *head;
	if (*head != NULL)
		(*head)->pprev = &t->next;
	*head = t;
	t->pprev = head;
	w->count++;
}

void wheel_del(struct wtimer *t)
{
	if (t->pprev == NULL)
		return;
	*t->pprev = t->next;
	if (t->next != NULL)
		t->next->pprev = t->pprev;
	t->next = NULL;
	t->pprev = NULL;
}

void wheel_run(struct wheel *w, struct agent *ag, int64_t now_ms)
{
	uint64_t target = (uint64_t)now_ms / WHEEL_TICK_MS;

	while (w->now < target) {
		struct wtimer **pp;

		w->now++;
		pp = &w->slot[w->now % WHEEL_SLOTS];
		while (*pp != NULL) {
			struct wtimer *t = *pp;

			if (t->due > w->now) {
				pp = &t->next;
				continue;
			}
			wheel_del(t);
			w->count--;
			t->cb(ag, t); /* may re-add t, never into this slot at this tick */
		}
	}
}
