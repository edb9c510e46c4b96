/* test_sasl.c — the strict base64 decoder and the PLAIN message split that mtad and imapd
 * share: what is accepted, and every way a response is refused; the SCRAM-SHA-256 server
 * against RFC 7677's example exchange, channel binding, and the ways a message is refused;
 * the daemons' driver of the exchange (sasl_drive.h): its steps and what each failure means. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/sasl.h"
#include "common/sasl_drive.h"

/* base64 of n bytes of raw (RFC 4648, with padding) into out. */
static void b64(const void *raw, size_t n, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = raw;
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);

		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? a[v & 63] : '=';
	}
	out[o] = '\0';
}

static enum sasl_result plain(const void *raw, size_t n, struct sasl_plain *p)
{
	char enc[4096];

	b64(raw, n, enc);
	return sasl_plain_decode(enc, strlen(enc), p);
}

static void test_b64_strict(void **state)
{
	unsigned char out[16];
	size_t n;

	assert_int_equal(sasl_b64_decode("aGk=", 4, out, sizeof(out), &n), SASL_OK);
	assert_int_equal(n, 2);
	assert_memory_equal(out, "hi", 3);
	assert_int_equal(sasl_b64_decode("aGV5", 4, out, sizeof(out), &n), SASL_OK);
	assert_int_equal(n, 3);
	assert_int_equal(sasl_b64_decode("aA==", 4, out, sizeof(out), &n), SASL_OK);
	assert_int_equal(n, 1);
	assert_int_equal(sasl_b64_decode("", 0, out, sizeof(out), &n), SASL_OK);
	assert_int_equal(n, 0);
	/* not a multiple of 4, padding inside, white space, other alphabets, stray bits */
	const char *bad[] = { "aGk",  "aG=k", "a===", "====", "aGk=aGk=", " aGk=", "aGk=\n",
			      "aG k", "aGk-", "aGk_", "aGl=", "aB==",     "aGk*" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (sasl_b64_decode(bad[i], strlen(bad[i]), out, sizeof(out), &n) != SASL_EBASE64)
			fail_msg("accepted '%s'", bad[i]);
	/* room for the data and a NUL */
	assert_int_equal(sasl_b64_decode("aGV5", 4, out, 3, &n), SASL_EBASE64);
	assert_int_equal(sasl_b64_decode("aGV5", 4, out, 4, &n), SASL_OK);
}

static void test_plain_accepted(void **state)
{
	struct sasl_plain p;

	assert_int_equal(plain("\0user1\0pw", 9, &p), SASL_OK);
	assert_string_equal(p.authcid, "user1");
	assert_string_equal(p.passwd, "pw");
	assert_int_equal(plain("user1\0user1\0pw", 14, &p), SASL_OK);
	assert_string_equal(p.authcid, "user1");
	/* the password may hold any byte but NUL */
	assert_int_equal(plain("\0u\0p w\xff\x01", 8, &p), SASL_OK);
	assert_string_equal(p.passwd, "p w\xff\x01");
	sasl_plain_wipe(&p);
	assert_string_equal(p.passwd, "");
}

static void test_plain_refused(void **state)
{
	struct sasl_plain p;
	char big[2 * SASL_PASSWORD_MAX];

	/* a fourth field (mtad took it once), too few fields, empty ones */
	assert_int_equal(plain("\0user1\0user1\0x", 15, &p), SASL_EFORMAT);
	assert_string_equal(p.passwd, "");
	assert_int_equal(plain("\0user1\0pw\0", 10, &p), SASL_EFORMAT);
	assert_int_equal(plain("user1\0pw", 8, &p), SASL_EFORMAT);
	assert_int_equal(plain("user1", 5, &p), SASL_EFORMAT);
	assert_int_equal(plain("\0\0pw", 4, &p), SASL_EFORMAT);
	assert_int_equal(plain("\0user1\0", 7, &p), SASL_EFORMAT);
	assert_int_equal(plain("", 0, &p), SASL_EFORMAT);
	assert_int_equal(sasl_plain_decode("", 0, &p), SASL_EFORMAT);
	/* another identity */
	assert_int_equal(plain("admin\0user1\0pw", 14, &p), SASL_EAUTHZ);
	assert_string_equal(p.authcid, "");
	assert_int_equal(plain("user\0user1\0pw", 13, &p), SASL_EAUTHZ);
	assert_int_equal(plain("user12\0user1\0pw", 15, &p), SASL_EAUTHZ);
	/* limits: a name of SASL_NAME_MAX bytes is taken, one more is not */
	memset(big, 'n', sizeof(big));
	big[0] = '\0';
	big[SASL_NAME_MAX + 1] = '\0';
	big[SASL_NAME_MAX + 2] = 'p';
	assert_int_equal(plain(big, SASL_NAME_MAX + 3, &p), SASL_OK);
	assert_int_equal(strlen(p.authcid), SASL_NAME_MAX);
	big[SASL_NAME_MAX + 1] = 'n';
	big[SASL_NAME_MAX + 2] = '\0';
	big[SASL_NAME_MAX + 3] = 'p';
	assert_int_equal(plain(big, SASL_NAME_MAX + 4, &p), SASL_EFORMAT);
	/* a password of SASL_PASSWORD_MAX bytes, and one more */
	memset(big, 'p', sizeof(big));
	memcpy(big, "\0u\0", 3);
	assert_int_equal(plain(big, 3 + SASL_PASSWORD_MAX, &p), SASL_OK);
	assert_int_equal(strlen(p.passwd), SASL_PASSWORD_MAX);
	assert_int_not_equal(plain(big, 4 + SASL_PASSWORD_MAX, &p), SASL_OK);
	/* base64 errors come first */
	assert_int_equal(sasl_plain_decode("AHVzZXIxAHB3", 11, &p), SASL_EBASE64);
	assert_true(SASL_PLAIN_B64_MAX >= 4 * ((2 * SASL_NAME_MAX + SASL_PASSWORD_MAX + 2) / 3));
}

/* ---- SCRAM-SHA-256 ---- */

/* RFC 7677 section 3: user "user", password "pencil". */
#define EX_CFIRST "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
#define EX_SNONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
#define EX_SFIRST                                                                          \
	"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==," \
	"i=4096"
#define EX_CFINAL                                                                        \
	"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+" \
	"Ute9ytag9zjfMHgsqmmiz7AndVQ="
#define EX_SFINAL "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

/* The salted password of password with the example's salt (W22ZaJ0SNY7soEsUEjb6gQ==). */
static void salted(const char *password, unsigned char sp[32])
{
	static const unsigned char salt[] = { 0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e,
					      0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81 };

	assert_int_equal(PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, sizeof(salt),
					   4096, EVP_sha256(), 32, sp),
			 1);
}

static void hmac(const unsigned char key[32], const char *m, size_t n, unsigned char out[32])
{
	unsigned int len = 0;

	assert_non_null(HMAC(EVP_sha256(), key, 32, (const unsigned char *)m, n, out, &len));
}

/* The secret "4096,SALT,STOREDKEY,SERVERKEY" of password, made here (not by ldapauth). */
static void secret_of(const char *password, char *out)
{
	unsigned char sp[32], ck[32], stored[32], server[32];
	unsigned int n = 0;
	char st64[48], sv64[48];

	salted(password, sp);
	hmac(sp, "Client Key", 10, ck);
	EVP_Digest(ck, 32, stored, &n, EVP_sha256(), NULL);
	hmac(sp, "Server Key", 10, server);
	b64(stored, 32, st64);
	b64(server, 32, sv64);
	sprintf(out, "4096,W22ZaJ0SNY7soEsUEjb6gQ==,%s,%s", st64, sv64);
}

/* A client-final message for password over the exchange so far: c= of cbind (gs2 header and
   channel data, n bytes), the nonce, then the proof. */
static void client_final(const char *password, const char *bare, const char *sfirst,
			 const void *cbind, size_t n, const char *nonce, char *out)
{
	unsigned char sp[32], ck[32], stored[32], sig[32], proof[32];
	unsigned int len = 0;
	char c64[512], p64[48], am[4096], wp[2048];

	salted(password, sp);
	hmac(sp, "Client Key", 10, ck);
	EVP_Digest(ck, 32, stored, &len, EVP_sha256(), NULL);
	b64(cbind, n, c64);
	snprintf(wp, sizeof(wp), "c=%s,r=%s", c64, nonce);
	snprintf(am, sizeof(am), "%s,%s,%s", bare, sfirst, wp);
	hmac(stored, am, strlen(am), sig);
	for (int i = 0; i < 32; i++)
		proof[i] = ck[i] ^ sig[i];
	b64(proof, 32, p64);
	sprintf(out, "%s,p=%s", wp, p64);
}

/* Decodes a server message (base64) into out. */
static void unb64s(const char *b, char *out)
{
	size_t n;

	assert_int_equal(sasl_b64_decode(b, strlen(b), (unsigned char *)out, 4096, &n), SASL_OK);
}

static enum sasl_result first(struct sasl_scram *s, const char *msg)
{
	char enc[4096];

	b64(msg, strlen(msg), enc);
	return sasl_scram_client_first(s, enc, strlen(enc));
}

static enum sasl_result final(struct sasl_scram *s, const unsigned char *cb, size_t cblen,
			      const char *msg, char *reply)
{
	char enc[4096], out[SASL_SCRAM_OUT_MAX];
	enum sasl_result rc;

	b64(msg, strlen(msg), enc);
	rc = sasl_scram_client_final(s, cb, cblen, enc, strlen(enc), out, sizeof(out));
	unb64s(out, reply);
	return rc;
}

/* The salt a forked process makes for a user without a secret, written to fd. */
static void child_salt(int fd)
{
	struct sasl_scram *f = sasl_scram_new(false, false);
	char o[SASL_SCRAM_OUT_MAX], d[4096];
	size_t n;

	if (first(f, "n,,n=nobody,r=abc") == SASL_OK &&
	    sasl_scram_server_first(f, NULL, "xyz", o, sizeof(o)) == SASL_OK &&
	    sasl_b64_decode(o, strlen(o), (unsigned char *)d, sizeof(d), &n) == SASL_OK &&
	    write(fd, strstr(d, ",s="), strlen(strstr(d, ",s="))) > 0)
		_exit(0);
	_exit(1);
}

/* Run first, before this process made any salt: two forked processes (a daemon's workers,
   forked before their first login) make the same salt for the same unknown user. */
static void test_scram_fake_salt_workers(void **state)
{
	char got[2][SASL_SCRAM_OUT_MAX];

	for (int i = 0; i < 2; i++) {
		int pfd[2], st = 0;
		pid_t pid;
		ssize_t n;

		assert_int_equal(pipe(pfd), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			child_salt(pfd[1]);
		close(pfd[1]);
		n = read(pfd[0], got[i], sizeof(got[i]) - 1);
		close(pfd[0]);
		assert_true(n > 0);
		got[i][n] = '\0';
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	assert_string_equal(got[0], got[1]);
}

static void test_scram_rfc7677(void **state)
{
	struct sasl_scram *s = sasl_scram_new(false, false);
	char secret[256], out[SASL_SCRAM_OUT_MAX], dec[4096];

	secret_of("pencil", secret);
	assert_int_equal(first(s, EX_CFIRST), SASL_OK);
	assert_string_equal(sasl_scram_user(s), "user");
	assert_string_equal(sasl_scram_authzid(s), "");
	assert_int_equal(sasl_scram_cb_type(s), SASL_CB_NONE);
	assert_int_equal(sasl_scram_server_first(s, secret, EX_SNONCE, out, sizeof(out)), SASL_OK);
	unb64s(out, dec);
	assert_string_equal(dec, EX_SFIRST);
	assert_int_equal(final(s, NULL, 0, EX_CFINAL, dec), SASL_OK);
	assert_string_equal(dec, EX_SFINAL);
	/* one exchange, one answer */
	assert_int_equal(final(s, NULL, 0, EX_CFINAL, dec), SASL_ESTATE);
	sasl_scram_free(&s);
	assert_null(s);
}

/* The example's exchange with the proof of another password, or without a secret. */
static void test_scram_wrong(void **state)
{
	struct sasl_scram *s = sasl_scram_new(false, false);
	char secret[256], out[SASL_SCRAM_OUT_MAX], dec[4096], cf[1024];

	secret_of("pencil", secret);
	assert_int_equal(first(s, EX_CFIRST), SASL_OK);
	assert_int_equal(sasl_scram_server_first(s, secret, EX_SNONCE, out, sizeof(out)), SASL_OK);
	client_final("pencil2", "n=user,r=rOprNGfwEbeRWgbNEkqO", EX_SFIRST, "n,,", 3,
		     "rOprNGfwEbeRWgbNEkqO" EX_SNONCE, cf);
	assert_int_equal(final(s, NULL, 0, cf, dec), SASL_EPROOF);
	assert_string_equal(dec, "e=invalid-proof");
	sasl_scram_free(&s);

	/* no secret: a salt all the same, the right password fails */
	s = sasl_scram_new(false, false);
	assert_int_equal(first(s, EX_CFIRST), SASL_OK);
	assert_int_equal(sasl_scram_server_first(s, NULL, EX_SNONCE, out, sizeof(out)), SASL_OK);
	unb64s(out, dec);
	assert_non_null(strstr(dec, ",s="));
	assert_non_null(strstr(dec, ",i=4096"));
	char *sf = strdup(dec);
	client_final("pencil", "n=user,r=rOprNGfwEbeRWgbNEkqO", sf, "n,,", 3,
		     "rOprNGfwEbeRWgbNEkqO" EX_SNONCE, cf);
	assert_int_equal(final(s, NULL, 0, cf, dec), SASL_EPROOF);
	free(sf);
	sasl_scram_free(&s);
	/* asked again for the same user, the made-up salt is the same (no tell); another user's
	   differs */
	char salts[3][SASL_SCRAM_OUT_MAX];
	const char *who[3] = { "n,,n=nobody,r=abc", "n,,n=nobody,r=def", "n,,n=other,r=abc" };
	for (int i = 0; i < 3; i++) {
		struct sasl_scram *f = sasl_scram_new(false, false);

		assert_int_equal(first(f, who[i]), SASL_OK);
		assert_int_equal(sasl_scram_server_first(f, NULL, "xyz", out, sizeof(out)),
				 SASL_OK);
		unb64s(out, dec);
		snprintf(salts[i], sizeof(salts[i]), "%s", strstr(dec, ",s="));
		sasl_scram_free(&f);
	}
	assert_string_equal(salts[0], salts[1]);
	assert_string_not_equal(salts[0], salts[2]);
	/* a malformed secret is no secret */
	s = sasl_scram_new(false, false);
	assert_int_equal(first(s, EX_CFIRST), SASL_OK);
	assert_int_equal(sasl_scram_server_first(s, "4096,abc,def", EX_SNONCE, out, sizeof(out)),
			 SASL_OK);
	assert_int_equal(final(s, NULL, 0, EX_CFINAL, dec), SASL_EPROOF);
	sasl_scram_free(&s);
}

/* -PLUS with data for the channel: the right data passes, other data or a changed header
   does not. */
static void test_scram_plus(void **state)
{
	static const unsigned char cb[32] = "0123456789abcdef0123456789abcde";
	static const char *types[] = { "tls-exporter", "tls-server-end-point" };
	char secret[256], out[SASL_SCRAM_OUT_MAX], dec[4096], cf[1024], msg[256];
	unsigned char cbind[256];

	secret_of("pencil", secret);
	for (int t = 0; t < 2; t++)
		for (int tamper = 0; tamper < 3; tamper++) {
			struct sasl_scram *s = sasl_scram_new(true, true);
			size_t gl;

			snprintf(msg, sizeof(msg), "p=%s,,n=user,r=abc", types[t]);
			assert_int_equal(first(s, msg), SASL_OK);
			assert_int_equal(sasl_scram_cb_type(s),
					 t == 0 ? SASL_CB_TLS_EXPORTER
						: SASL_CB_TLS_SERVER_END_POINT);
			assert_int_equal(sasl_scram_server_first(s, secret, "xyz", out,
								 sizeof(out)),
					 SASL_OK);
			gl = (size_t)snprintf((char *)cbind, sizeof(cbind), "p=%s,,", types[t]);
			memcpy(cbind + gl, cb, sizeof(cb));
			if (tamper == 1)
				cbind[gl + 5] ^= 1; /* the client's channel is another */
			if (tamper == 2)
				cbind[0] = 'y'; /* the header changed */
			client_final("pencil", "n=user,r=abc",
				     "r=abcxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", cbind,
				     gl + sizeof(cb), "abcxyz", cf);
			assert_int_equal(final(s, cb, sizeof(cb), cf, dec),
					 tamper == 0 ? SASL_OK : SASL_ECBIND);
			if (tamper != 0)
				assert_string_equal(dec, "e=channel-bindings-dont-match");
			sasl_scram_free(&s);
		}
	/* the channel's data missing on the server side */
	struct sasl_scram *s = sasl_scram_new(true, true);
	assert_int_equal(first(s, "p=tls-exporter,,n=user,r=abc"), SASL_OK);
	assert_int_equal(sasl_scram_server_first(s, secret, "xyz", out, sizeof(out)), SASL_OK);
	client_final("pencil", "n=user,r=abc", "r=abcxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
		     "p=tls-exporter,,", 16, "abcxyz", cf);
	assert_int_equal(final(s, NULL, 0, cf, dec), SASL_ECBIND);
	sasl_scram_free(&s);
}

/* The gs2 flag against the mechanism chosen and what was advertised. */
static void test_scram_gs2(void **state)
{
	static const struct {
		bool plus, offered;
		const char *msg;
		enum sasl_result want;
	} cases[] = {
		{ false, false, "y,,n=user,r=abc", SASL_OK },
		{ false, true, "y,,n=user,r=abc", SASL_ECBIND }, /* the downgrade */
		{ false, true, "n,,n=user,r=abc", SASL_OK },
		{ true, true, "n,,n=user,r=abc", SASL_ECBIND },
		{ true, true, "y,,n=user,r=abc", SASL_ECBIND },
		{ false, true, "p=tls-exporter,,n=user,r=abc", SASL_ECBIND },
		{ true, true, "p=tls-unique,,n=user,r=abc", SASL_ECBIND },
		{ true, true, "p=,,n=user,r=abc", SASL_ECBIND },
		{ false, false, "x,,n=user,r=abc", SASL_ESCRAM },
		{ false, false, "n,n=user,r=abc", SASL_ESCRAM },
		{ false, false, "n,b=admin,n=user,r=abc", SASL_ESCRAM },
		{ false, false, "n,a=,n=user,r=abc", SASL_ESCRAM },
		{ false, false, "n,a=admin,n=user,r=abc", SASL_OK },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sasl_scram *s = sasl_scram_new(cases[i].plus, cases[i].offered);
		enum sasl_result rc = first(s, cases[i].msg);

		if (rc != cases[i].want)
			fail_msg("case %zu '%s': %d", i, cases[i].msg, (int)rc);
		sasl_scram_free(&s);
	}
}

static void test_scram_client_first_refused(void **state)
{
	const char *bad[] = {
		"n,,r=abc,n=user",      /* order */
		"n,,n=,r=abc",          /* empty name */
		"n,,n=us=2Der,r=abc",   /* an escape other than =2C =3D */
		"n,,n=us=er,r=abc",     /* a bare '=' */
		"n,,n=us\ter,r=abc",    /* a control character */
		"n,,n=us\xc3(r,r=abc",  /* not UTF-8 */
		"n,,n=\xc0\xafx,r=abc", /* overlong */
		"n,,n=user,r=",         /* empty nonce */
		"n,,n=user,r=a b",      /* not printable */
		"n,,n=user",            /* no nonce */
		"n,,n=user,r=abc,",     /* an empty extension */
		"n,,n=user,r=abc,1=x",  /* an extension not ALPHA=value */
		"n,,n=user,r=abc,x=",   /* an extension without a value */
		"n,,",                  /* nothing after the header */
		"",                     /* nothing */
	};
	struct sasl_scram *s;
	char big[SASL_SCRAM_MSG_MAX + 64], enc[4096];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s = sasl_scram_new(false, false);
		if (first(s, bad[i]) != SASL_ESCRAM)
			fail_msg("accepted '%s'", bad[i]);
		sasl_scram_free(&s);
	}
	/* a mandatory extension */
	s = sasl_scram_new(false, false);
	assert_int_equal(first(s, "n,,m=ext,n=user,r=abc"), SASL_EEXT);
	sasl_scram_free(&s);
	/* an optional extension is ignored; escapes decoded; an authzid kept */
	s = sasl_scram_new(false, false);
	assert_int_equal(first(s, "n,a=us=3Der,n=us=2Cer,r=abc,x=1"), SASL_OK);
	assert_string_equal(sasl_scram_user(s), "us,er");
	assert_string_equal(sasl_scram_authzid(s), "us=er");
	sasl_scram_free(&s);
	/* UTF-8 names as given */
	s = sasl_scram_new(false, false);
	assert_int_equal(first(s, "n,,n=j\xc3\xb6rg,r=abc"), SASL_OK);
	assert_string_equal(sasl_scram_user(s), "j\xc3\xb6rg");
	sasl_scram_free(&s);
	/* base64 errors, a NUL inside, the size limit */
	s = sasl_scram_new(false, false);
	assert_int_equal(sasl_scram_client_first(s, "biws=", 5), SASL_EBASE64);
	sasl_scram_free(&s);
	s = sasl_scram_new(false, false);
	b64("n,,n=us\0er,r=abc", 16, enc);
	assert_int_equal(sasl_scram_client_first(s, enc, strlen(enc)), SASL_ESCRAM);
	sasl_scram_free(&s);
	memset(big, 'a', sizeof(big));
	memcpy(big, "n,,n=user,r=", 12);
	big[SASL_SCRAM_MSG_MAX + 1] = '\0';
	s = sasl_scram_new(false, false);
	assert_int_not_equal(first(s, big), SASL_OK);
	sasl_scram_free(&s);
	/* a name longer than SASL_NAME_MAX */
	memset(big, 'u', sizeof(big));
	memcpy(big, "n,,n=", 5);
	strcpy(big + 5 + SASL_NAME_MAX + 1, ",r=abc");
	s = sasl_scram_new(false, false);
	assert_int_equal(first(s, big), SASL_ESCRAM);
	sasl_scram_free(&s);
}

static void test_scram_client_final_refused(void **state)
{
	static const struct {
		const char *msg;
		enum sasl_result want;
	} cases[] = {
		{ "r=abcxyz,c=biws,p=AAAA", SASL_ESCRAM },       /* order */
		{ "c=biws,r=abcxyz", SASL_ESCRAM },              /* no proof */
		{ "c=biws,r=abcxyz,p=AAAA", SASL_ESCRAM },       /* short proof */
		{ "c=biws,r=abcxyz,p=" EX_SFINAL, SASL_ESCRAM }, /* not base64 */
		{ "c=biws,r=abcxyz,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=,x=1",
		  SASL_ESCRAM }, /* after the proof */
		{ "c=bixx,r=abcxyz,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		  SASL_ECBIND }, /* another header */
		{ "c=biws,r=abcxyw,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		  SASL_ENONCE }, /* another nonce */
		{ "c=biws,r=abc,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		  SASL_ENONCE }, /* the client's only */
		{ "c=biws,r=abcxyz,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		  SASL_EPROOF }, /* a proof of nothing */
	};
	char secret[256], out[SASL_SCRAM_OUT_MAX], dec[4096];

	secret_of("pencil", secret);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sasl_scram *s = sasl_scram_new(false, false);
		enum sasl_result rc;

		assert_int_equal(first(s, "n,,n=user,r=abc"), SASL_OK);
		assert_int_equal(sasl_scram_server_first(s, secret, "xyz", out, sizeof(out)),
				 SASL_OK);
		rc = final(s, NULL, 0, cases[i].msg, dec);
		if (rc != cases[i].want)
			fail_msg("case %zu '%s': %d", i, cases[i].msg, (int)rc);
		assert_true(strncmp(dec, "e=", 2) == 0);
		sasl_scram_free(&s);
	}
	/* steps out of order */
	struct sasl_scram *s = sasl_scram_new(false, false);
	assert_int_equal(sasl_scram_server_first(s, secret, NULL, out, sizeof(out)), SASL_ESTATE);
	sasl_scram_free(&s);
	s = sasl_scram_new(false, false);
	assert_int_equal(final(s, NULL, 0, EX_CFINAL, dec), SASL_ESTATE);
	sasl_scram_free(&s);
	/* a failed client-first ends the exchange */
	s = sasl_scram_new(false, false);
	assert_int_equal(first(s, "n,,n=,r=abc"), SASL_ESCRAM);
	assert_int_equal(first(s, EX_CFIRST), SASL_ESTATE);
	sasl_scram_free(&s);
	/* random server nonces differ */
	char o2[SASL_SCRAM_OUT_MAX];
	s = sasl_scram_new(false, false);
	struct sasl_scram *s2 = sasl_scram_new(false, false);
	assert_int_equal(first(s, EX_CFIRST), SASL_OK);
	assert_int_equal(first(s2, EX_CFIRST), SASL_OK);
	assert_int_equal(sasl_scram_server_first(s, secret, NULL, out, sizeof(out)), SASL_OK);
	assert_int_equal(sasl_scram_server_first(s2, secret, NULL, o2, sizeof(o2)), SASL_OK);
	assert_string_not_equal(out, o2);
	sasl_scram_free(&s);
	sasl_scram_free(&s2);
}

/* ---- the daemons' driver (sasl_drive.h) ---- */

/* A response to the driver: msg in base64. */
static void drive_send(struct sasl_drive *d, const char *msg, struct sasl_step *st)
{
	char enc[4096];

	b64(msg, strlen(msg), enc);
	sasl_drive_response(d, NULL, enc, strlen(enc), st);
}

/* Drives an exchange as user "user" to client-final, sent with the proof of password;
   found/secret/why: the directory's answer. */
static void drive_to_final(struct sasl_drive *d, const char *password, bool found, const char *why,
			   struct sasl_step *st)
{
	char secret[256], sfirst[4096], cf[1024], nonce[256];
	const char *r;

	secret_of("pencil", secret);
	sasl_drive_start(d, NULL, 0, st);
	assert_int_equal(st->act, SASL_DO_SEND);
	assert_string_equal(st->out, "");
	drive_send(d, EX_CFIRST, st);
	assert_int_equal(st->act, SASL_DO_SECRET);
	assert_string_equal(sasl_drive_user(d), "user");
	sasl_drive_secret(d, found, found ? secret : NULL, why, st);
	assert_int_equal(st->act, SASL_DO_SEND);
	unb64s(st->out, sfirst);
	r = strstr(sfirst, "r=") + 2;
	assert_non_null(strchr(r, ','));
	memcpy(nonce, r, (size_t)(strchr(r, ',') - r));
	nonce[strchr(r, ',') - r] = '\0';
	assert_int_equal(strncmp(nonce, "rOprNGfwEbeRWgbNEkqO", 20), 0);
	client_final(password, "n=user,r=rOprNGfwEbeRWgbNEkqO", sfirst, "n,,", 3, nonce, cf);
	drive_send(d, cf, st);
}

/* IMAP and SMTP: server-first and server-final are challenges, the client's empty answer
   ends it. */
static void test_drive_challenge_final(void **state)
{
	struct sasl_drive *d = sasl_drive_new(false, false, false);
	struct sasl_step st;
	char dec[4096];

	drive_to_final(d, "pencil", true, NULL, &st);
	assert_int_equal(st.act, SASL_DO_SEND);
	unb64s(st.out, dec);
	assert_true(strncmp(dec, "v=", 2) == 0);
	sasl_drive_response(d, NULL, "", 0, &st);
	assert_int_equal(st.act, SASL_DO_OK);
	assert_string_equal(st.reason, "scram");
	/* nothing more is due */
	sasl_drive_response(d, NULL, "", 0, &st);
	assert_int_equal(st.act, SASL_DO_FAIL);
	assert_int_equal(st.fail, SASL_FAIL_SYNTAX);
	assert_int_equal(st.rc, SASL_ESTATE);
	sasl_drive_free(&d);
	assert_null(d);
	sasl_drive_free(&d);

	/* data after server-final fails the check */
	d = sasl_drive_new(false, false, false);
	drive_to_final(d, "pencil", true, NULL, &st);
	sasl_drive_response(d, NULL, "eA==", 4, &st);
	assert_int_equal(st.act, SASL_DO_FAIL);
	assert_int_equal(st.fail, SASL_FAIL_CRED);
	assert_string_equal(st.reason, "scram: data after server-final");
	sasl_drive_free(&d);

	/* "*" after server-final gives up */
	d = sasl_drive_new(false, false, false);
	drive_to_final(d, "pencil", true, NULL, &st);
	sasl_drive_response(d, NULL, "*", 1, &st);
	assert_int_equal(st.act, SASL_DO_CANCEL);
	sasl_drive_free(&d);
}

/* ManageSieve: server-final comes with the success. */
static void test_drive_final_with_ok(void **state)
{
	struct sasl_drive *d = sasl_drive_new(false, false, true);
	struct sasl_step st;
	char dec[4096];

	drive_to_final(d, "pencil", true, NULL, &st);
	assert_int_equal(st.act, SASL_DO_OK);
	unb64s(st.out, dec);
	assert_true(strncmp(dec, "v=", 2) == 0);
	sasl_drive_free(&d);
}

/* A wrong proof, and a user the directory has no secret for (its reason is logged). */
static void test_drive_refused_proof(void **state)
{
	struct sasl_drive *d = sasl_drive_new(false, false, false);
	struct sasl_step st;

	drive_to_final(d, "pencil2", true, NULL, &st);
	assert_int_equal(st.act, SASL_DO_FAIL);
	assert_int_equal(st.fail, SASL_FAIL_CRED);
	assert_int_equal(st.rc, SASL_EPROOF);
	sasl_drive_free(&d);

	d = sasl_drive_new(false, false, true);
	drive_to_final(d, "pencil", false, "no SCRAM secret", &st);
	assert_int_equal(st.act, SASL_DO_FAIL);
	assert_int_equal(st.fail, SASL_FAIL_CRED);
	assert_string_equal(st.reason, "no SCRAM secret");
	sasl_drive_free(&d);
}

/* The initial response and client-first: each refusal and what it means. */
static void test_drive_first_refused(void **state)
{
	static const struct {
		const char *ir; /* NULL: client-first as a response, msg encoded */
		const char *msg;
		enum sasl_do act;
		enum sasl_fail fail;
		enum sasl_result rc;
	} cases[] = {
		{ "*", NULL, SASL_DO_CANCEL, 0, SASL_OK },
		{ "=", NULL, SASL_DO_FAIL, SASL_FAIL_FIRST, SASL_ESCRAM },
		{ "bi==x", NULL, SASL_DO_FAIL, SASL_FAIL_SYNTAX, SASL_EBASE64 },
		{ NULL, "n,a=other,n=user,r=abc", SASL_DO_FAIL, SASL_FAIL_AUTHZ, SASL_EAUTHZ },
		{ NULL, "n,a=user,n=user,r=abc", SASL_DO_SECRET, 0, SASL_OK },
		{ NULL, "p=tls-exporter,,n=user,r=abc", SASL_DO_FAIL, SASL_FAIL_FIRST,
		  SASL_ECBIND },
		{ NULL, "n,,m=x,n=user,r=abc", SASL_DO_FAIL, SASL_FAIL_FIRST, SASL_EEXT },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sasl_drive *d = sasl_drive_new(false, false, false);
		struct sasl_step st;
		char enc[4096];

		if (cases[i].ir != NULL) {
			sasl_drive_start(d, cases[i].ir, strlen(cases[i].ir), &st);
		} else {
			b64(cases[i].msg, strlen(cases[i].msg), enc);
			sasl_drive_start(d, enc, strlen(enc), &st);
		}
		assert_int_equal(st.act, cases[i].act);
		if (st.act == SASL_DO_FAIL) {
			assert_int_equal(st.fail, cases[i].fail);
			assert_int_equal(st.rc, cases[i].rc);
			assert_non_null(st.reason);
		}
		if (st.act == SASL_DO_SECRET) { /* a response now is out of turn */
			sasl_drive_response(d, NULL, "", 0, &st);
			assert_int_equal(st.act, SASL_DO_FAIL);
			assert_int_equal(st.fail, SASL_FAIL_SYNTAX);
			assert_int_equal(st.rc, SASL_ESTATE);
		}
		sasl_drive_free(&d);
	}
}

/* ---- SASLprep (sasl_prep.c) ---- */

/* RFC 4013 section 3's examples, as query strings and as stored ones. */
static void test_saslprep_rfc4013(void **state)
{
	static const struct {
		const char *in, *out; /* out NULL: refused */
	} ex[] = {
		{ "I\xc2\xadX", "IX" },   /* 1: SOFT HYPHEN mapped to nothing */
		{ "user", "user" },       /* 2: no transformation */
		{ "USER", "USER" },       /* 3: case preserved */
		{ "\xc2\xaa", "a" },      /* 4: output is NFKC */
		{ "\xe2\x85\xa8", "IX" }, /* 5: NFKC, matches #1 */
		{ "\x07", NULL },         /* 6: prohibited character */
		{ "\xd8\xa7"
		  "1",
		  NULL }, /* 7: bidirectional check */
	};
	char out[64];

	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++)
		for (int stored = 0; stored < 2; stored++) {
			int rc = sasl_saslprep(ex[i].in, stored, out, sizeof(out));

			if (ex[i].out == NULL) {
				assert_int_equal(rc, -1);
				assert_false(sasl_saslprep_ok(ex[i].in, stored));
				continue;
			}
			assert_int_equal(rc, 0);
			assert_string_equal(out, ex[i].out);
			assert_true(sasl_saslprep_ok(ex[i].in, stored));
		}
}

/* Non-ASCII spaces map to a space; unassigned code points pass only in a query; not UTF-8,
   an empty result and no room are refused. */
static void test_saslprep_edges(void **state)
{
	char out[64];

	assert_int_equal(sasl_saslprep("p\xc2\xa0w\xc3\xb6rd", true, out, sizeof(out)), 0);
	assert_string_equal(out, "p w\xc3\xb6rd");
	assert_int_equal(sasl_saslprep("o\xcc\x88", true, out, sizeof(out)), 0); /* NFKC */
	assert_string_equal(out, "\xc3\xb6");
	assert_int_equal(sasl_saslprep("\xc8\xa1", false, out, sizeof(out)), 0); /* U+0221 */
	assert_int_equal(sasl_saslprep("\xc8\xa1", true, out, sizeof(out)), -1);
	assert_int_equal(sasl_saslprep("\xff", false, out, sizeof(out)), -1);
	assert_int_equal(sasl_saslprep("\xc2\xad", false, out, sizeof(out)), -1);
	assert_int_equal(sasl_saslprep("", false, out, sizeof(out)), -1);
	assert_int_equal(sasl_saslprep("a\x7f", false, out, sizeof(out)), -1);
	assert_int_equal(sasl_saslprep("abcd", false, out, 4), -1);
	assert_int_equal(sasl_saslprep("abc", false, out, 4), 0);
	assert_int_equal(sasl_saslprep("\xc3\xb6\xc3\xb6", false, out, 4), -1);
}

/* SCRAM's user name is prepared: an unprepared client's name is the prepared one's. */
static void test_scram_user_saslprep(void **state)
{
	struct sasl_scram *s = sasl_scram_new(false, false);

	assert_int_equal(first(s, "n,a=\xe2\x85\xa8,n=I\xc2\xadX,r=abc"), SASL_OK);
	assert_string_equal(sasl_scram_user(s), "IX");
	assert_string_equal(sasl_scram_authzid(s), "IX");
	sasl_scram_free(&s);
	s = sasl_scram_new(false, false);
	assert_int_equal(first(s, "n,,n=\xd8\xa7"
				  "1,r=abc"),
			 SASL_ESCRAM);
	sasl_scram_free(&s);
	s = sasl_scram_new(false, false);
	assert_int_equal(first(s, "n,,n=\xc2\xad,r=abc"), SASL_ESCRAM);
	sasl_scram_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scram_fake_salt_workers), /* first: no salt made yet */
		cmocka_unit_test(test_b64_strict),
		cmocka_unit_test(test_plain_accepted),
		cmocka_unit_test(test_plain_refused),
		cmocka_unit_test(test_scram_rfc7677),
		cmocka_unit_test(test_scram_wrong),
		cmocka_unit_test(test_scram_plus),
		cmocka_unit_test(test_scram_gs2),
		cmocka_unit_test(test_scram_client_first_refused),
		cmocka_unit_test(test_scram_client_final_refused),
		cmocka_unit_test(test_saslprep_rfc4013),
		cmocka_unit_test(test_saslprep_edges),
		cmocka_unit_test(test_scram_user_saslprep),
		cmocka_unit_test(test_drive_challenge_final),
		cmocka_unit_test(test_drive_final_with_ok),
		cmocka_unit_test(test_drive_refused_proof),
		cmocka_unit_test(test_drive_first_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
