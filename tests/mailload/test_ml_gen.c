/* test_ml_gen.c — the workload distributions over a fixed seed (recipient counts, session mix,
 * sizes, folders, MIME mix) within tolerance, deterministic message generation, and the timer
 * wheel that drives arrivals. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "mailload/agent.h"
#include "mailload/mailload.h"

#define N 200000

static void near(double got, double want, double tol)
{
	if (got < want - tol || got > want + tol)
		fail_msg("got %f, want %f +- %f", got, want, tol);
}

static void test_rcpt_counts(void **state)
{
	struct ml_rng r;
	uint32_t hist[21] = { 0 };

	ml_rng_seed(&r, 42, 1);
	for (int i = 0; i < N; i++) {
		uint32_t n = ml_pick_rcpt_count(&r);
		assert_true(n >= 1 && n <= 20);
		hist[n]++;
	}
	near((double)hist[1] / N, 0.60, 0.01);
	near((double)hist[2] / N, 0.20, 0.01);
	near((double)hist[3] / N, 0.10, 0.01);
	near((double)(hist[4] + hist[5]) / N, 0.05, 0.005);
	uint32_t s610 = 0, s1120 = 0;
	for (int k = 6; k <= 10; k++)
		s610 += hist[k];
	for (int k = 11; k <= 20; k++)
		s1120 += hist[k];
	near((double)s610 / N, 0.04, 0.004);
	near((double)s1120 / N, 0.01, 0.002);
}

static void test_session_mix(void **state)
{
	struct ml_rng r;
	struct ml_cfg c;
	uint32_t k[3] = { 0 };

	ml_cfg_defaults(&c, "small");
	ml_rng_seed(&r, 42, 2);
	for (int i = 0; i < N; i++)
		k[ml_pick_session(&r, &c)]++;
	near((double)k[SESS_CHECK] / N, 0.70, 0.01);
	near((double)k[SESS_SYNC] / N, 0.20, 0.01);
	near((double)k[SESS_CLEANUP] / N, 0.10, 0.01);
}

static void test_sizes(void **state)
{
	struct ml_rng r;
	uint32_t cls[5] = { 0 };
	double sum = 0, sum_small = 0;

	ml_rng_seed(&r, 42, 3);
	for (int i = 0; i < N; i++) {
		uint32_t s = ml_pick_size(&r, 1.0);
		sum += s;
		cls[s <= 4096 ? 0 : s <= 16384 ? 1 : s <= 65536 ? 2 : s <= 262144 ? 3 : 4]++;
		assert_true(s >= 1024 && s <= 2097152);
	}
	near((double)cls[0] / N, 0.35, 0.01);
	near((double)cls[1] / N, 0.30, 0.01);
	near((double)cls[2] / N, 0.20, 0.01);
	near((double)cls[3] / N, 0.12, 0.01);
	near((double)cls[4] / N, 0.03, 0.005);
	near(sum / N / 1024, 64.0, 4.0); /* corporate mean */
	for (int i = 0; i < N; i++)
		sum_small += ml_pick_size(&r, 0.122);
	near(sum_small / N / 1024, 8.0, 0.6); /* small profile: a mean near 8 KB */
}

static void test_folders(void **state)
{
	struct ml_cfg c;
	struct ml_folders a, b;
	double inbox = 0, other = 0, nother = 0, k = 0;
	const int users = 20000;

	ml_cfg_defaults(&c, "corporate");
	for (int u = 1; u <= users; u++) {
		ml_user_folders(&c, (uint64_t)u, &a);
		ml_user_folders(&c, (uint64_t)u, &b);
		assert_memory_equal(&a, &b, sizeof(a)); /* deterministic */
		assert_string_equal(a.name[0], "INBOX");
		assert_string_equal(a.name[1], "Sent");
		assert_true(a.n >= 4 && a.n <= ML_MAX_FOLDERS);
		for (uint32_t i = 0; i < a.n; i++) {
			const char *sl = strchr(a.name[i], '/');
			if (sl != NULL) { /* a nested folder's parent comes before it */
				bool parent = false;
				for (uint32_t j = 0; j < i; j++)
					parent |= strncmp(a.name[j], a.name[i],
							  (size_t)(sl - a.name[i])) == 0 &&
						  strlen(a.name[j]) == (size_t)(sl - a.name[i]);
				assert_true(parent);
			}
			for (uint32_t j = 0; j < i; j++)
				assert_string_not_equal(a.name[i], a.name[j]);
		}
		inbox += a.msgs[0];
		for (uint32_t i = 1; i < a.n; i++) {
			other += a.msgs[i];
			nother++;
		}
		k += a.n - 4;
	}
	near(inbox / users, 40, 2);
	near(other / nother, 15, 1);
	near(k / users, 4, 0.8); /* nested folders bring their parents along */
}

static void test_messages(void **state)
{
	struct ml_msg m;
	struct buf a, b;
	const char *to[] = { "user2@heron.test", "r7@ext.heron.test" };
	struct ml_msg_spec s = { .seed = 7,
				 .run_id = 99,
				 .seq = 1,
				 .date_ms = 1735689600000LL,
				 .sent_ms = 1735689600123LL,
				 .from = "user1@heron.test",
				 .to = to,
				 .nto = 2,
				 .size_scale = 0.122 };
	uint32_t mime[3] = { 0 };

	ml_msggen_init();
	ml_msg_init(&m);
	buf_init(&a, 1 << 16, 1 << 24);
	buf_init(&b, 1 << 16, 1 << 24);
	for (uint64_t seq = 1; seq <= 3000; seq++) {
		s.seq = seq;
		ml_msg_build(&m, &s);
		buf_reset(&a);
		ml_msg_render(&m, &a);
		assert_int_equal(a.len, m.size);
		mime[m.mime]++;
		/* the same spec gives the same bytes */
		ml_msg_build(&m, &s);
		buf_reset(&b);
		ml_msg_render(&m, &b);
		assert_int_equal(a.len, b.len);
		assert_memory_equal(a.data, b.data, a.len);
		/* headers a delivery check needs, CRLF lines, no line starting with a dot */
		char id[64];
		snprintf(id, sizeof(id), "Message-ID: <99.%llu@mailload>\r\n",
			 (unsigned long long)seq);
		assert_non_null(strstr(a.data, id));
		assert_non_null(strstr(a.data, "X-Mailload-Sent: 1735689600123\r\n"));
		assert_null(strstr(a.data, "\r\n."));
		for (size_t i = 0; i < a.len; i++)
			if (a.data[i] == '\n')
				assert_true(i > 0 && a.data[i - 1] == '\r');
		/* the evbuffer form is the same bytes */
		if (seq % 500 == 0) {
			struct evbuffer *eb = evbuffer_new();
			ml_msg_emit(&m, eb);
			assert_int_equal(evbuffer_get_length(eb), a.len);
			assert_memory_equal(evbuffer_pullup(eb, -1), a.data, a.len);
			evbuffer_free(eb);
		}
	}
	near(mime[MIME_PLAIN] / 3000.0, 0.5, 0.04);
	near(mime[MIME_ALT] / 3000.0, 0.3, 0.04);
	near(mime[MIME_MIXED] / 3000.0, 0.2, 0.04);
	/* another seed gives another message */
	s.seq = 5;
	ml_msg_build(&m, &s);
	buf_reset(&a);
	ml_msg_render(&m, &a);
	s.seed = 8;
	ml_msg_build(&m, &s);
	buf_reset(&b);
	ml_msg_render(&m, &b);
	assert_true(a.len != b.len || memcmp(a.data, b.data, a.len) != 0);
	buf_release(&a);
	buf_release(&b);
	ml_msg_release(&m);
}

static int fired;
static void wt_cb(struct agent *ag, struct wtimer *t)
{
	fired++;
}

static void test_wheel(void **state)
{
	struct wheel w;
	struct wtimer t[100];
	int64_t now = 1000000;

	wheel_init(&w, now);
	memset(t, 0, sizeof(t));
	for (int i = 0; i < 100; i++) {
		t[i].cb = wt_cb;
		/* some beyond one turn of the wheel (40.96 s) */
		wheel_add(&w, &t[i], now + 20 + i * 1000);
	}
	wheel_del(&t[50]);
	fired = 0;
	wheel_run(&w, NULL, now + 10);
	assert_int_equal(fired, 0);
	wheel_run(&w, NULL, now + 20 + 49 * 1000);
	assert_int_equal(fired, 50);
	wheel_run(&w, NULL, now + 200000);
	assert_int_equal(fired, 99);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rcpt_counts), cmocka_unit_test(test_session_mix),
		cmocka_unit_test(test_sizes),       cmocka_unit_test(test_folders),
		cmocka_unit_test(test_messages),    cmocka_unit_test(test_wheel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
