/* test_srs.c — SRS addresses (mtad/srs.c): the forward forms SRS0 and SRS1 byte for byte as
 * Debian's python3-srs (an independent implementation of the same scheme) writes them for the
 * same secret and day, reversal of both, a forged or damaged hash refused, the timestamp's
 * expiry and the wrap of its 1024-day cycle, senders that are left alone, secret rotation and
 * the secret file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "mtad/srs.h"

#define T 1796169600 /* a day of the test vectors */
#define DAY 86400

static struct srs *mk(const char *const *sec, size_t n)
{
	struct srs *srs = NULL;
	const char *err = NULL;

	if (srs_new("srs.heron.test", sec, n, 21, &srs, &err) < 0)
		fail_msg("srs_new: %s", err);
	return srs;
}

static struct srs *mk1(void)
{
	static const char *const sec[] = { "test-secret" };

	return mk(sec, 1);
}

static void fwd_is(struct srs *srs, const char *in, const char *want)
{
	char out[400];

	assert_int_equal(srs_forward(srs, in, T, out, sizeof(out)), 1);
	assert_string_equal(out, want);
}

static void rev_is(struct srs *srs, const char *in, int64_t now, const char *want)
{
	char out[400];
	const char *why = NULL;

	if (srs_reverse(srs, in, now, out, sizeof(out), &why) < 0)
		fail_msg("reverse %s: %s", in, why);
	assert_string_equal(out, want);
}

static void rev_fails(struct srs *srs, const char *in, int64_t now, const char *want_why)
{
	char out[400];
	const char *why = NULL;

	assert_int_equal(srs_reverse(srs, in, now, out, sizeof(out), &why), -1);
	assert_string_equal(why, want_why);
}

/* the vectors python3-srs gives: SRS.new(secret='test-secret', hashlength=4) at T */
static void test_forward_vectors(void **state)
{
	struct srs *srs = mk1();

	(void)state;
	fwd_is(srs, "alice@example.org", "SRS0=8R+D=JV=example.org=alice@srs.heron.test");
	fwd_is(srs, "SRS0=AbCd=XY=orig.test=bob@hop.test",
	       "SRS1=nEfx=hop.test==AbCd=XY=orig.test=bob@srs.heron.test");
	fwd_is(srs, "SRS1=ZZZZ=first.test==AbCd=XY=orig.test=bob@hop.test",
	       "SRS1=G7sB=first.test==AbCd=XY=orig.test=bob@srs.heron.test");
	/* the hash is over the lower-cased fields: case in the sender changes no hash */
	fwd_is(srs, "ALICE@Example.ORG", "SRS0=8R+D=JV=Example.ORG=ALICE@srs.heron.test");
	srs_free(&srs);
	assert_null(srs);
}

static void test_round_trip(void **state)
{
	struct srs *srs = mk1();
	char a[400];

	(void)state;
	assert_int_equal(srs_forward(srs, "alice@example.org", T, a, sizeof(a)), 1);
	rev_is(srs, a, T, "alice@example.org");
	rev_is(srs, a, T + 21 * DAY, "alice@example.org"); /* the last valid day */
	/* a relay that smashed the case of the local part still gets it back */
	rev_is(srs, "srs0=8r+d=jv=example.org=alice@srs.heron.test", T, "alice@example.org");
	/* SRS1 goes back to the first hop's SRS0, which that hop checks */
	rev_is(srs, "SRS1=nEfx=hop.test==AbCd=XY=orig.test=bob@srs.heron.test", T,
	       "SRS0=AbCd=XY=orig.test=bob@hop.test");
	srs_free(&srs);
}

static void test_forgery(void **state)
{
	struct srs *srs = mk1();

	(void)state;
	/* another original sender under a valid hash: refused */
	rev_fails(srs, "SRS0=8R+D=JV=example.org=mallory@srs.heron.test", T, "bad hash");
	rev_fails(srs, "SRS0=8R+D=JV=evil.test=alice@srs.heron.test", T, "bad hash");
	rev_fails(srs, "SRS0=8R+E=JV=example.org=alice@srs.heron.test", T, "bad hash");
	rev_fails(srs, "SRS0=8R+=JV=example.org=alice@srs.heron.test", T, "bad hash");
	rev_fails(srs, "SRS0=8R+DD=JV=example.org=alice@srs.heron.test", T, "bad hash");
	/* another timestamp under the hash: the hash covers it */
	rev_fails(srs, "SRS0=8R+D=JW=example.org=alice@srs.heron.test", T, "bad hash");
	rev_fails(srs, "SRS1=nEfx=hop.test==AbCd=XY=orig.test=eve@srs.heron.test", T, "bad hash");
	/* another secret made it */
	static const char *const other[] = { "other-secret" };
	struct srs *o = mk(other, 1);

	rev_fails(o, "SRS0=8R+D=JV=example.org=alice@srs.heron.test", T, "bad hash");
	srs_free(&o);
	/* malformed ones */
	rev_fails(srs, "SRS0=8R+D=JV=example.org@srs.heron.test", T, "malformed SRS address");
	rev_fails(srs, "SRS0=8R+D=JV==alice@srs.heron.test", T, "malformed SRS address");
	rev_fails(srs, "SRS0=@srs.heron.test", T, "malformed SRS address");
	rev_fails(srs, "SRS1=nEfx@srs.heron.test", T, "malformed SRS address");
	rev_fails(srs, "SRS1=nEfx=hop.test=@srs.heron.test", T, "malformed SRS address");
	rev_fails(srs, "SRS1=nEfx==x@srs.heron.test", T, "malformed SRS address");
	rev_fails(srs, "alice@srs.heron.test", T, "not an SRS address");
	rev_fails(srs, "SRS2=8R+D=JV=example.org=alice@srs.heron.test", T, "not an SRS address");
	rev_fails(srs, "SRS0", T, "not an SRS address");
	srs_free(&srs);
}

static void test_expiry(void **state)
{
	struct srs *srs = mk1();
	char a[400];

	(void)state;
	assert_int_equal(srs_forward(srs, "alice@example.org", T, a, sizeof(a)), 1);
	rev_fails(srs, a, T + 22 * DAY, "expired");
	rev_fails(srs, a, T - DAY, "expired"); /* from the future */
	/* made on day 1020 of the cycle, checked on day 3 of the next: 7 days old */
	int64_t t0 = (int64_t)1020 * DAY, t1 = (int64_t)(1024 + 3) * DAY;

	assert_int_equal(srs_forward(srs, "alice@example.org", t0, a, sizeof(a)), 1);
	rev_is(srs, a, t1, "alice@example.org");
	rev_fails(srs, a, t0 + 30 * DAY, "expired");
	/* a timestamp that is no base32 */
	rev_fails(srs, "SRS0=8R+D=J1=example.org=alice@srs.heron.test", T, "bad hash");
	srs_free(&srs);
}

static void test_left_alone(void **state)
{
	struct srs *srs = mk1();
	char out[400], big[200];

	(void)state;
	assert_int_equal(srs_forward(srs, "", T, out, sizeof(out)), 0);
	assert_int_equal(srs_forward(srs, "postmaster", T, out, sizeof(out)), 0);
	assert_int_equal(srs_forward(srs, "a@srs.heron.test", T, out, sizeof(out)), 0);
	assert_int_equal(srs_forward(srs, "a@SRS.Heron.Test", T, out, sizeof(out)), 0);
	assert_int_equal(srs_forward(srs, "\"a b\"@example.org", T, out, sizeof(out)), 0);
	/* the SRS0 local part would pass RFC 5321's 64 octets */
	snprintf(big, sizeof(big), "%s@example.org",
		 "a-rather-long-local-part-of-forty-eight-bytes-xx");
	assert_int_equal(srs_forward(srs, big, T, out, sizeof(out)), 0);
	/* too small an output buffer */
	assert_int_equal(srs_forward(srs, "alice@example.org", T, out, 20), 0);
	srs_free(&srs);
}

static void test_rotation_and_file(void **state)
{
	static const char *const sec[] = { "new-secret", "test-secret" };
	struct srs *srs = mk(sec, 2), *f = NULL;
	char path[] = "/tmp/heron-srs-XXXXXX", out[400], *err = NULL;
	const char *e = NULL;
	int fd;

	(void)state;
	/* an address made with the old secret is still reversed */
	rev_is(srs, "SRS0=8R+D=JV=example.org=alice@srs.heron.test", T, "alice@example.org");
	assert_int_equal(srs_forward(srs, "alice@example.org", T, out, sizeof(out)), 1);
	assert_string_not_equal(out, "SRS0=8R+D=JV=example.org=alice@srs.heron.test");
	srs_free(&srs);

	assert_true((fd = mkstemp(path)) >= 0);
	assert_int_equal(write(fd, "# key\n\ntest-secret\n", 19), 19);
	close(fd);
	assert_int_equal(srs_load(path, "srs.heron.test", 21, &f, &err), 0);
	fwd_is(f, "alice@example.org", "SRS0=8R+D=JV=example.org=alice@srs.heron.test");
	srs_free(&f);
	assert_true((fd = open(path, O_WRONLY | O_TRUNC)) >= 0);
	assert_int_equal(write(fd, "# nothing\n", 10), 10);
	close(fd);
	assert_int_equal(srs_load(path, "srs.heron.test", 21, &f, &err), -1);
	assert_non_null(strstr(err, "no secret"));
	assert_null(f);
	free(err);
	unlink(path);
	assert_int_equal(srs_load(path, "srs.heron.test", 21, &f, &err), -1);
	free(err);
	assert_int_equal(srs_new("", sec, 1, 21, &f, &e), -1);
	assert_int_equal(srs_new("d.test", sec, 0, 21, &f, &e), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forward_vectors), cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_forgery),         cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_left_alone),      cmocka_unit_test(test_rotation_and_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
