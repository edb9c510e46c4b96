/* test_ml_merge.c — the manager merges agents' histograms exactly (per bucket, as if one agent
 * had seen every sample) and accounts every recipient copy as delivered, lost or duplicated,
 * from IMAP sightings and sink records. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mailload/agent.h"
#include "mailload/json.h"
#include "mailload/manager.h"

/* One agent's "results" line, as agent.c writes it, with the given samples for fn 0. */
static char *agent_results(const uint64_t *us, size_t n, const char *sent, const char *seen)
{
	struct histo *h = calloc(1, sizeof(*h));
	struct buf o, hs;

	buf_init(&o, 4096, 1 << 24);
	buf_init(&hs, 256, 1 << 20);
	histo_init(h);
	for (size_t i = 0; i < n; i++)
		histo_add(h, us[i]);
	histo_serialize(h, &hs);
	buf_puts(&o, "{\"ok\":true,\"agent\":0,\"functions\":{");
	for (int f = 0; f < FN_COUNT; f++) {
		buf_printf(&o, "%s\"%s\":{\"errors\":%d,\"histo\":", f ? "," : "", ml_fns[f].key,
			   f == 1 ? 2 : 0);
		json_put_str(&o, f == 0 ? buf_cstr(&hs) : "0 0 0 0 ");
		buf_putc(&o, '}');
	}
	buf_printf(&o, "},\"errtop\":[[\"smtp_data\",\"451 try later\",2]],\"ts_step_s\":1,"
		       "\"ts\":[[1,0,2,0,[");
	for (int i = 0; i < 2 * TS_LB; i++)
		buf_printf(&o, "%s%d", i ? "," : "", i == 3);
	buf_printf(&o, "]]],\"sent\":%s,\"seen\":%s,\"server\":{},\"sessions_refused\":0}", sent,
		   seen);
	buf_release(&hs);
	free(h);
	return buf_steal(&o, NULL);
}

static void test_exact_merge(void **state)
{
	uint64_t a[500], b[700];
	struct histo *all = calloc(1, sizeof(*all));
	struct mgr_point *p = mgr_point_new();
	struct jv *ja, *jb;
	const char *err;

	histo_init(all);
	for (int i = 0; i < 500; i++) {
		a[i] = 100 + (uint64_t)i * 37;
		histo_add(all, a[i]);
	}
	for (int i = 0; i < 700; i++) {
		b[i] = 5000 + (uint64_t)i * i * 3;
		histo_add(all, b[i]);
	}
	char *sa = agent_results(a, 500, "[]", "[]"), *sb = agent_results(b, 700, "[]", "[]");
	assert_int_equal(jv_parse(sa, strlen(sa), &ja, &err), 0);
	assert_int_equal(jv_parse(sb, strlen(sb), &jb, &err), 0);
	assert_int_equal(mgr_point_merge(p, ja), 0);
	assert_int_equal(mgr_point_merge(p, jb), 0);
	const struct histo *m = mgr_point_histo(p, 0);
	assert_int_equal(m->count, all->count);
	assert_int_equal(m->sum, all->sum);
	assert_int_equal(m->min, all->min);
	assert_int_equal(m->max, all->max);
	assert_memory_equal(m->b, all->b, sizeof(all->b));
	assert_int_equal(histo_percentile(m, 99), histo_percentile(all, 99));
	/* a malformed histogram is refused, not merged */
	char *bad = strdup(sa);
	char *h = strstr(bad, "\"histo\":\"");
	h[9] = 'x';
	struct jv *jbad;
	assert_int_equal(jv_parse(bad, strlen(bad), &jbad, &err), 0);
	assert_int_equal(mgr_point_merge(p, jbad), -1);
	jv_free(&jbad);
	free(bad);
	jv_free(&ja);
	jv_free(&jb);
	free(sa);
	free(sb);
	free(all);
	mgr_point_free(&p);
}

static void test_delivery_accounting(void **state)
{
	struct ml_cfg c;
	struct mgr_point *p = mgr_point_new();
	struct jv *r0, *r1, *sink, *out;
	const char *err;
	struct buf o;
	uint64_t none[1] = { 0 };

	ml_cfg_defaults(&c, "small");
	c.run_id = 77;
	c.t0_ms = 1000000;
	c.ramp_s = 10;
	c.steady_s = 100;
	/* message 1: users 5 and 6 and remote r9; message 2: user 7 (never seen: lost);
	   message 3: user 8 seen under two UIDs (duplicated); remote r4 arrives twice */
	char *a0 = agent_results(none, 0,
				 "[[1,1020000,1020100,1,[5,6,-9]],[2,1030000,1030050,1,[7]],"
				 "[3,1040000,1040010,0,[8,-4]]]",
				 "[[1,5,1,10,1020600],[1,5,1,10,1020900],[3,8,1,4,1040500]]");
	char *a1 = agent_results(none, 0, "[]", "[[1,6,2,33,1021100],[3,8,1,5,1041000]]");
	const char *recs = "[{\"seq\":1,\"id\":\"<77.1@mailload>\",\"sent_ms\":1020000,"
			   "\"arrival_ms\":1020300,\"rcpts\":[\"r9@ext.heron.test\"]},"
			   "{\"seq\":2,\"id\":\"<77.3@mailload>\",\"sent_ms\":1,\"arrival_ms\":1040200,"
			   "\"rcpts\":[\"r4@ext.heron.test\"]},"
			   "{\"seq\":3,\"id\":\"<77.3@mailload>\",\"sent_ms\":1,\"arrival_ms\":1040300,"
			   "\"rcpts\":[\"r4@ext.heron.test\"]},"
			   "{\"seq\":4,\"id\":\"<76.1@mailload>\",\"sent_ms\":1,\"arrival_ms\":1,"
			   "\"rcpts\":[\"r9@ext.heron.test\"]}]";
	assert_int_equal(jv_parse(a0, strlen(a0), &r0, &err), 0);
	assert_int_equal(jv_parse(a1, strlen(a1), &r1, &err), 0);
	assert_int_equal(jv_parse(recs, strlen(recs), &sink, &err), 0);
	assert_int_equal(mgr_point_merge(p, r0), 0);
	assert_int_equal(mgr_point_merge(p, r1), 0);
	buf_init(&o, 4096, 1 << 24);
	bool pass = mgr_point_finish(p, &c, 100, sink, "test sink", &o);
	assert_false(pass);
	assert_int_equal(jv_parse(o.data, o.len, &out, &err), 0);
	const struct jv *d = jv_get(out, "delivery");
	assert_int_equal(jv_int(d, "checked", -1), 6);
	assert_int_equal(jv_int(d, "local", -1), 4);
	assert_int_equal(jv_int(d, "remote", -1), 2);
	assert_int_equal(jv_int(d, "lost", -1), 1);
	assert_int_equal(jv_int(d, "duplicated", -1), 2);
	assert_int_equal(jv_int(d, "delivered", -1), 5);
	/* delivery time: first sighting minus the 250 (user 5: 500 ms; remote r9: 200 ms) */
	assert_int_equal(jv_int(d, "count", -1), 5);
	assert_true(jv_num(d, "max_ms", 0) >= 990 && jv_num(d, "max_ms", 0) <= 1001);
	const struct jv *m = jv_get(out, "messages");
	assert_int_equal(jv_int(m, "submitted", -1), 2);
	assert_int_equal(jv_int(m, "incoming", -1), 1);
	/* errors: the 2+2 SMTP Data errors and the lost and duplicated copies */
	assert_int_equal(jv_int(jv_get(out, "errors"), "failed", -1), 4 + 1 + 2);
	const struct jv *fns = jv_get(out, "functions");
	assert_string_equal(jv_str(&fns->kid[0], "key", ""), "smtp_connect");
	assert_string_equal(jv_str(&fns->kid[14], "key", ""), "imap_uid_store_seen");
	jv_free(&out);
	buf_release(&o);
	/* without a sink the remote copies are unchecked, not counted lost */
	mgr_point_free(&p);
	p = mgr_point_new();
	assert_int_equal(mgr_point_merge(p, r0), 0);
	assert_int_equal(mgr_point_merge(p, r1), 0);
	buf_init(&o, 4096, 1 << 24);
	mgr_point_finish(p, &c, 100, NULL, "unavailable", &o);
	assert_int_equal(jv_parse(o.data, o.len, &out, &err), 0);
	d = jv_get(out, "delivery");
	assert_int_equal(jv_int(d, "remote_unchecked", -1), 2);
	assert_int_equal(jv_int(d, "lost", -1), 1);
	assert_string_equal(jv_str(d, "remote_note", ""), "unavailable");
	jv_free(&out);
	buf_release(&o);
	jv_free(&r0);
	jv_free(&r1);
	jv_free(&sink);
	free(a0);
	free(a1);
	mgr_point_free(&p);
}

/* The "server" and "tls" members: an agent writes them, the manager adds two agents' up and
   writes the same shape into the report. */
static void test_server_info(void **state)
{
	struct ml_server_info a = { "mx ESMTP", "", "CAPABILITY IMAP4rev1", { 3, 1 }, { 0, 2 },
				    "TLSv1.3", "TLS_AES_128_GCM_SHA256" };
	struct ml_server_info b = { "other", "OK \"imap\"", "X", { 4, 5 }, { 1, 0 }, "TLSv1.2",
				    "x" };
	struct ml_server_info m = { 0 };
	const struct ml_server_info *agents[2] = { &a, &b };
	struct buf o;
	struct jv *r;
	const char *err;

	buf_init(&o, 1024, 1 << 16);
	for (int i = 0; i < 2; i++) {
		buf_reset(&o);
		buf_putc(&o, '{');
		ml_server_info_json(agents[i], &o);
		buf_putc(&o, '}');
		assert_int_equal(jv_parse(o.data, o.len, &r, &err), 0);
		ml_server_info_merge(&m, r);
		jv_free(&r);
	}
	buf_reset(&o);
	ml_server_info_json(&m, &o);
	assert_string_equal(buf_cstr(&o),
			    "\"server\":{\"smtp_greeting\":\"mx ESMTP\",\"imap_greeting\":"
			    "\"OK \\\"imap\\\"\",\"imap_capability\":\"CAPABILITY IMAP4rev1\"},"
			    "\"tls\":{\"smtp\":7,\"imap\":6,\"smtp_failed\":1,\"imap_failed\":2,"
			    "\"protocol\":\"TLSv1.3\",\"cipher\":\"TLS_AES_128_GCM_SHA256\"}");
	buf_release(&o);
}

static void test_json(void **state)
{
	static const char *const bad[] = { "{", "[1,]", "{\"a\" 1}", "\"\\q\"", "tru", "[1] x",
					   "{\"a\":\"\x01\"}" };
	struct jv *v;
	const char *err;
	char deep[200];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(jv_parse(bad[i], strlen(bad[i]), &v, &err), -1);
	memset(deep, '[', sizeof(deep));
	assert_int_equal(jv_parse(deep, sizeof(deep), &v, &err), -1);
	const char *ok = "{\"s\":\"a\\u00e9\\\"b\",\"n\":-12,\"f\":1.5,\"t\":true,\"z\":null}";
	assert_int_equal(jv_parse(ok, strlen(ok), &v, &err), 0);
	assert_string_equal(jv_str(v, "s", ""), "a\xc3\xa9\"b");
	assert_int_equal(jv_int(v, "n", 0), -12);
	assert_true(jv_num(v, "f", 0) == 1.5);
	jv_free(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_merge),
		cmocka_unit_test(test_delivery_accounting),
		cmocka_unit_test(test_server_info),
		cmocka_unit_test(test_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
