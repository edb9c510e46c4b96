/* test_sink_stats.c — the shared statistics segment: per-worker counters summed exactly,
 * histograms merged, records read in order from any `since`, a full ring evicting the oldest
 * (records_dropped counting only records no reader had), reset, and sums seen from another
 * process (the segment really is shared across fork). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "sink/sink.h"

static struct histo snap_h;

static void add_msg(struct sink_shared *sh, unsigned w, int i, bool stamped)
{
	char id[32];
	static const char rcpts[] = "a@x\0b@y";
	struct sink_record r = { 0 };

	snprintf(id, sizeof(id), "<m.%d@t>", i);
	r.id = id;
	r.id_len = strlen(id);
	r.rcpts = rcpts;
	r.rcpts_len = sizeof(rcpts);
	r.nrcpts = 2;
	r.sent_ms = stamped ? 1000 : 0;
	r.arrival_ms = 1000 + i;
	sink_stats_message(sh, w, 100, stamped, &r);
}

struct seen {
	uint64_t seq[4096];
	size_t n;
};

static void on_record(void *ctx, const struct sink_record *r)
{
	struct seen *s = ctx;
	char want[32];

	snprintf(want, sizeof(want), "<m.%d@t>", (int)(r->arrival_ms - 1000));
	assert_int_equal(r->id_len, strlen(want));
	assert_memory_equal(r->id, want, r->id_len);
	assert_int_equal(r->nrcpts, 2);
	assert_string_equal(r->rcpts, "a@x");
	assert_string_equal(r->rcpts + 4, "b@y");
	s->seq[s->n++] = r->seq;
}

static size_t read_all(struct sink_shared *sh, uint64_t since, struct seen *s)
{
	size_t got;

	s->n = 0;
	while ((got = sink_records_read(sh, since, UINT64_MAX, 100, on_record, s)) > 0)
		since = s->seq[s->n - 1];
	return s->n;
}

static void test_counters_and_records(void **state)
{
	struct sink_shared *sh = sink_shared_create(3, 1 << 20, false);
	struct sink_counters c;
	uint64_t dropped;
	static struct seen s;

	for (int i = 0; i < 30; i++)
		add_msg(sh, (unsigned)i % 3, i, i % 2 == 0);
	sink_stats_connection(sh, 0);
	sink_stats_connection(sh, 2);
	sink_stats_event(sh, 1, SINK_COUNTER(rejected));
	sink_stats_snapshot(sh, &c, &snap_h, &dropped);
	assert_int_equal(c.messages, 30);
	assert_int_equal(c.recipients, 60);
	assert_int_equal(c.bytes, 3000);
	assert_int_equal(c.stamped, 15);
	assert_int_equal(c.connections, 2);
	assert_int_equal(c.rejected, 1);
	assert_int_equal(snap_h.count, 15);
	assert_int_equal(snap_h.max, 28000); /* message 28 arrived 28 ms after it was sent */
	assert_int_equal(dropped, 0);
	/* only stamped messages are recorded (records = stamped) */
	assert_int_equal(read_all(sh, 0, &s), 15);
	for (size_t i = 0; i < s.n; i++)
		assert_int_equal(s.seq[i], i + 1);
	assert_int_equal(read_all(sh, 10, &s), 5);
	assert_int_equal(s.seq[0], 11);
	assert_int_equal(read_all(sh, 15, &s), 0);
	/* until bounds the range */
	s.n = 0;
	assert_int_equal(sink_records_read(sh, 3, 5, 100, on_record, &s), 2);
	assert_int_equal(sink_records_last_seq(sh), 15);
	sink_stats_reset(sh);
	sink_stats_snapshot(sh, &c, &snap_h, &dropped);
	assert_int_equal(c.messages, 0);
	assert_int_equal(snap_h.count, 0);
	assert_int_equal(read_all(sh, 0, &s), 0);
	/* sequence numbers keep growing after a reset */
	add_msg(sh, 0, 1, true);
	assert_int_equal(read_all(sh, 0, &s), 1);
	assert_int_equal(s.seq[0], 16);
	sink_shared_destroy(&sh);
	assert_null(sh);
}

static void test_ring_eviction(void **state)
{
	/* room for a few dozen records: the ring wraps many times */
	struct sink_shared *sh = sink_shared_create(1, 2048, true);
	struct sink_counters c;
	uint64_t dropped, since = 0;
	static struct seen s;

	for (int i = 0; i < 500; i++) {
		add_msg(sh, 0, i, i % 3 != 0);
		if (i % 10 == 9) { /* a reader that keeps up loses nothing */
			read_all(sh, since, &s);
			assert_int_equal(s.n, 10);
			since = s.seq[s.n - 1];
		}
	}
	sink_stats_snapshot(sh, &c, &snap_h, &dropped);
	assert_int_equal(dropped, 0);
	/* a reader that falls behind: the oldest unread go and are counted */
	for (int i = 500; i < 1000; i++)
		add_msg(sh, 0, i, true);
	sink_stats_snapshot(sh, &c, &snap_h, &dropped);
	assert_true(dropped > 0);
	read_all(sh, since, &s);
	assert_int_equal(s.n + dropped, 500);
	for (size_t i = 1; i < s.n; i++)
		assert_int_equal(s.seq[i], s.seq[i - 1] + 1);
	assert_int_equal(s.seq[s.n - 1], 1000);
	sink_shared_destroy(&sh);
}

static void test_shared_across_fork(void **state)
{
	struct sink_shared *sh = sink_shared_create(2, 1 << 16, false);
	struct sink_counters c;
	uint64_t dropped;
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < 100; i++)
			add_msg(sh, 1, i, true);
		_exit(0);
	}
	for (int i = 0; i < 100; i++)
		add_msg(sh, 0, i, true);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(WEXITSTATUS(status), 0);
	sink_stats_snapshot(sh, &c, &snap_h, &dropped);
	assert_int_equal(c.messages, 200);
	assert_int_equal(c.stamped, 200);
	assert_int_equal(snap_h.count, 200);
	assert_int_equal(sink_records_last_seq(sh), 200);
	sink_shared_destroy(&sh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters_and_records),
		cmocka_unit_test(test_ring_eviction),
		cmocka_unit_test(test_shared_across_fork),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
