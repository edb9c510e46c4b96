/* test_rfc5322.c — the streaming parser's events (same events however the input is split; raw
 * offsets that point at the right bytes; body bytes that are exactly each leaf's body) and the
 * helpers: Content-Type parameters with RFC 2231, HEADER.FIELDS[.NOT], one field's value, dates,
 * address lists. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/buf.h"
#include "common/rfc5322.h"

struct rec {
	const char *msg;
	struct buf log;
	struct buf bodies[16]; /* body bytes per leaf index */
};

static void ev_begin(void *ctx, const struct rfc5322_part *p)
{
	struct rec *r = ctx;

	buf_printf(&r->log, "begin %u parent %d depth %u at %llu\n", p->index, (int)p->parent,
		   p->depth, (unsigned long long)p->header_off);
}

static void ev_field(void *ctx, const struct rfc5322_part *p, const struct rfc5322_field *f)
{
	struct rec *r = ctx;

	buf_printf(&r->log, "field %u [%.*s] [%.*s] %llu+%llu%s\n", p->index, (int)f->name.len,
		   f->name.p, (int)f->value.len, f->value.p, (unsigned long long)f->off,
		   (unsigned long long)f->size, f->truncated ? " truncated" : "");
	/* the raw offsets point at the field as written */
	assert_memory_equal(r->msg + f->off, f->name.p, f->name.len);
}

static void ev_header_end(void *ctx, const struct rfc5322_part *p)
{
	struct rec *r = ctx;
	const struct rfc5322_ctype *ct = p->ctype;

	buf_printf(&r->log, "header_end %u %llu+%llu kind %d %.*s/%.*s", p->index,
		   (unsigned long long)p->header_off, (unsigned long long)p->header_size, p->kind,
		   (int)ct->type.len, ct->type.p, (int)ct->subtype.len, ct->subtype.p);
	for (unsigned i = 0; i < ct->nparams; i++)
		buf_printf(&r->log, " %.*s=%.*s", (int)ct->params[i].name.len,
			   ct->params[i].name.p, (int)ct->params[i].value.len,
			   ct->params[i].value.p);
	buf_putc(&r->log, '\n');
}

static void ev_body(void *ctx, const struct rfc5322_part *p, const char *d, size_t n, uint64_t off)
{
	struct rec *r = ctx;

	assert_memory_equal(r->msg + off, d, n);
	if (p->index < 16)
		buf_append(&r->bodies[p->index], d, n);
}

static void ev_end(void *ctx, const struct rfc5322_part *p)
{
	struct rec *r = ctx;

	buf_printf(&r->log, "end %u body %llu+%llu lines %llu\n", p->index,
		   (unsigned long long)p->body_off, (unsigned long long)p->body_size,
		   (unsigned long long)p->body_lines);
	if (p->kind == RFC5322_LEAF && p->index < 16) {
		assert_int_equal(r->bodies[p->index].len, p->body_size);
		assert_memory_equal(r->bodies[p->index].data != NULL ? r->bodies[p->index].data
								     : "",
				    r->msg + p->body_off, p->body_size);
	}
}

static void ev_boundary(void *ctx, const struct rfc5322_part *mp, uint64_t off, uint64_t size,
			bool close)
{
	struct rec *r = ctx;

	buf_printf(&r->log, "boundary %u %llu+%llu%s\n", mp->index, (unsigned long long)off,
		   (unsigned long long)size, close ? " close" : "");
	assert_memory_equal(r->msg + off, "--", 2);
}

static const struct rfc5322_callbacks cbs = { ev_begin, ev_field, ev_header_end,
					      ev_body,  ev_end,   ev_boundary };

static void run(const char *msg, size_t len, size_t cut, struct rec *r)
{
	struct rfc5322_parser *p;

	r->msg = msg;
	buf_init(&r->log, 0, 1 << 20);
	for (int i = 0; i < 16; i++)
		buf_init(&r->bodies[i], 0, 1 << 20);
	p = rfc5322_parser_new(NULL, &cbs, r);
	rfc5322_parser_push(p, msg, cut);
	rfc5322_parser_push(p, msg + cut, len - cut);
	rfc5322_parser_finish(p);
	rfc5322_parser_free(&p);
	assert_null(p);
	if (getenv("RFC5322_TEST_DUMP") != NULL)
		fprintf(stderr, "%s", buf_cstr(&r->log));
}

static void rec_free(struct rec *r)
{
	buf_release(&r->log);
	for (int i = 0; i < 16; i++)
		buf_release(&r->bodies[i]);
}

static const char mime_msg[] = "From: a@example.com\r\n"
			       "Subject: folded\r\n"
			       "  subject\r\n"
			       "Content-Type: multipart/mixed;\r\n"
			       "\tboundary=\"b1\"\r\n"
			       "\r\n"
			       "preamble\r\n"
			       "--b1\r\n"
			       "Content-Type: text/plain; charset=\"us-ascii\" (comment)\r\n"
			       "\r\n"
			       "one\r\n"
			       "\r\n"
			       "--b1 \r\n"
			       "Content-Type: message/rfc822\r\n"
			       "\r\n"
			       "Subject: inner\r\n"
			       "Content-Type: multipart/alternative; boundary=b2\r\n"
			       "\r\n"
			       "--b2\r\n"
			       "\r\n"
			       "alt one\r\n"
			       "--b2\r\n"
			       "Content-Type: text/html\r\n"
			       "\r\n"
			       "<p>alt two</p>\r\n"
			       "--b2--\r\n"
			       "--b1\r\n"
			       "Content-Type: text/plain\r\n"
			       "--b1--\r\n"
			       "epilogue\r\n";

static void test_events(void **state)
{
	struct rec r;

	run(mime_msg, sizeof(mime_msg) - 1, 0, &r);
	assert_string_equal(
		buf_cstr(&r.log),
		"begin 0 parent -1 depth 0 at 0\n"
		"field 0 [From] [a@example.com] 0+21\n"
		"field 0 [Subject] [folded  subject] 21+28\n"
		"field 0 [Content-Type] [multipart/mixed;\tboundary=\"b1\"] 49+48\n"
		"header_end 0 0+99 kind 1 multipart/mixed boundary=b1\n"
		"boundary 0 109+6\n"
		"begin 1 parent 0 depth 1 at 115\n"
		"field 1 [Content-Type] [text/plain; charset=\"us-ascii\" (comment)] 115+56\n"
		"header_end 1 115+58 kind 0 text/plain charset=us-ascii\n"
		"end 1 body 173+5 lines 1\n"
		"boundary 0 180+7\n"
		"begin 2 parent 0 depth 1 at 187\n"
		"field 2 [Content-Type] [message/rfc822] 187+30\n"
		"header_end 2 187+32 kind 2 message/rfc822\n"
		"begin 3 parent 2 depth 2 at 219\n"
		"field 3 [Subject] [inner] 219+16\n"
		"field 3 [Content-Type] [multipart/alternative; boundary=b2] 235+50\n"
		"header_end 3 219+68 kind 1 multipart/alternative boundary=b2\n"
		"boundary 3 287+6\n"
		"begin 4 parent 3 depth 3 at 293\n"
		"header_end 4 293+2 kind 0 text/plain charset=us-ascii\n"
		"end 4 body 295+7 lines 0\n"
		"boundary 3 304+6\n"
		"begin 5 parent 3 depth 3 at 310\n"
		"field 5 [Content-Type] [text/html] 310+25\n"
		"header_end 5 310+27 kind 0 text/html\n"
		"end 5 body 337+14 lines 0\n"
		"boundary 3 353+8 close\n"
		"end 3 body 287+74 lines 8\n"
		"end 2 body 219+142 lines 11\n"
		"boundary 0 361+6\n"
		"begin 6 parent 0 depth 1 at 367\n"
		"field 6 [Content-Type] [text/plain] 367+24\n"
		"header_end 6 367+24 kind 0 text/plain\n"
		"end 6 body 391+0 lines 0\n"
		"boundary 0 393+8 close\n"
		"end 0 body 99+312 lines 24\n");
	rec_free(&r);
}

static void test_events_split_anywhere(void **state)
{
	size_t len = sizeof(mime_msg) - 1;
	struct rec whole;

	run(mime_msg, len, 0, &whole);
	for (size_t cut = 1; cut <= len; cut++) {
		struct rec r;

		run(mime_msg, len, cut, &r);
		assert_string_equal(buf_cstr(&r.log), buf_cstr(&whole.log));
		rec_free(&r);
	}
	rec_free(&whole);
}

/* Body lines too long to be boundaries are streamed; CR LF split across chunks stays a line end. */
static void test_long_lines_split(void **state)
{
	struct buf m;
	struct rec whole;

	buf_init(&m, 0, 1 << 20);
	buf_puts(&m, "Content-Type: multipart/mixed; boundary=bb\r\n\r\n--bb\r\n\r\n");
	for (int i = 0; i < 700; i++)
		buf_putc(&m, i % 50 == 49 ? '\r' : 'a' + i % 26); /* bare CRs inside */
	buf_puts(&m, "\r\n");
	for (int i = 0; i < 300; i++)
		buf_putc(&m, 'z');
	buf_puts(&m, "\r\r\n--bb\r\n\r\nshort\r\n--bb--\r\n");
	run(m.data, m.len, 0, &whole);
	for (size_t cut = 1; cut < m.len; cut++) {
		struct rec r;

		run(m.data, m.len, cut, &r); /* ev_body/ev_end check the bytes */
		assert_string_equal(buf_cstr(&r.log), buf_cstr(&whole.log));
		rec_free(&r);
	}
	assert_non_null(strstr(buf_cstr(&whole.log), "end 1 body 54+1003 lines 1\n"));
	rec_free(&whole);
	buf_release(&m);
}

/* A line only has to start with the delimiter; the longest open boundary that matches wins. */
static void test_boundary_prefixes(void **state)
{
	static const char m[] = "Content-Type: multipart/mixed; boundary=abcdef\r\n\r\n"
				"--abcdef\r\n"
				"Content-Type: multipart/alternative; boundary=abc\r\n\r\n"
				"--abc trailing garbage\r\n\r\ninner\r\n"
				"--abcdef\r\n\r\nsecond outer\r\n"
				"--abcdef--junk\r\n";
	struct rec r;

	run(m, sizeof(m) - 1, 0, &r);
	assert_non_null(strstr(buf_cstr(&r.log), "boundary 1 113+24\n"));
	assert_non_null(strstr(buf_cstr(&r.log), "end 2 body 139+5 lines 0\nend 1 body"));
	assert_non_null(strstr(buf_cstr(&r.log), "boundary 0 146+10\nbegin 3"));
	assert_non_null(strstr(buf_cstr(&r.log), "boundary 0 172+16 close\n"));
	rec_free(&r);
}

static void test_bare_lf_and_missing_close(void **state)
{
	static const char m[] = "Content-Type: multipart/mixed; boundary=x\n\n--x\n\nbody\nmore\n"
				"--x\nContent-Type: text/plain\n\nlast\nno close";
	struct rec r;

	run(m, sizeof(m) - 1, 0, &r);
	assert_non_null(strstr(buf_cstr(&r.log), "end 1 body 48+9 lines 1\n"));
	assert_non_null(strstr(buf_cstr(&r.log), "end 2 body 88+13 lines 1\n"));
	assert_non_null(strstr(buf_cstr(&r.log), "end 0 body 43+58 lines 8\n"));
	rec_free(&r);
}

static void test_huge_field_truncated(void **state)
{
	struct buf m;
	struct rec r;

	buf_init(&m, 0, 1 << 22);
	buf_puts(&m, "X-Big: ");
	for (int i = 0; i < 100000; i++)
		buf_putc(&m, 'a' + i % 26);
	buf_puts(&m, "\r\nSubject: after\r\n\r\nbody");
	run(m.data, m.len, 50000, &r);
	assert_non_null(strstr(buf_cstr(&r.log), " 0+100009 truncated\n"));
	assert_non_null(strstr(buf_cstr(&r.log), "field 0 [Subject] [after] 100009+16\n"));
	rec_free(&r);
	buf_release(&m);
}

static void ctype(const char *v, struct rfc5322_ctype *ct, struct buf *sc)
{
	buf_reset(sc);
	rfc5322_ctype_parse(v, strlen(v), true, sc, ct);
}

static void assert_param(const struct rfc5322_ctype *ct, unsigned i, const char *n, const char *v)
{
	assert_true(i < ct->nparams);
	assert_int_equal(ct->params[i].name.len, strlen(n));
	assert_memory_equal(ct->params[i].name.p, n, strlen(n));
	assert_int_equal(ct->params[i].value.len, strlen(v));
	assert_memory_equal(ct->params[i].value.p, v, strlen(v));
}

static void test_ctype(void **state)
{
	struct rfc5322_ctype ct;
	struct buf sc;

	buf_init(&sc, 0, 1 << 20);
	ctype("Text/HTML ; (c) CharSet = \"utf-8\" ; name=\"a \\\"b\\\" c\"", &ct, &sc);
	assert_true(ct.valid);
	assert_memory_equal(ct.type.p, "Text", 4);
	assert_memory_equal(ct.subtype.p, "HTML", 4);
	assert_int_equal(ct.nparams, 2);
	assert_param(&ct, 0, "CharSet", "utf-8");
	assert_param(&ct, 1, "name", "a \"b\" c");
	/* RFC 2231: plain continuations merge to name; encoded ones to name* */
	ctype("application/x; name*1=\"two\"; name*0=one; title*0*=us-ascii'en'This%20is;"
	      " title*1*=%20fun; x*=utf-8''%41",
	      &ct, &sc);
	assert_int_equal(ct.nparams, 3);
	assert_param(&ct, 0, "name", "onetwo");
	assert_param(&ct, 1, "title*", "us-ascii'en'This%20is%20fun");
	assert_param(&ct, 2, "x*", "utf-8''%41");
	ctype("text", &ct, &sc);
	assert_false(ct.valid);
	ctype("/plain", &ct, &sc);
	assert_false(ct.valid);
	ctype("text/plain; =x; ;; charset", &ct, &sc);
	assert_true(ct.valid);
	assert_int_equal(ct.nparams, 0);
	buf_reset(&sc);
	rfc5322_ctype_parse("attachment; filename=a.txt", 26, false, &sc, &ct);
	assert_true(ct.valid);
	assert_param(&ct, 0, "filename", "a.txt");
	buf_release(&sc);
}

static const char hdr[] = "From: a@example.com\r\n"
			  "Subject: one\r\n"
			  "\ttwo\r\n"
			  "To: b@example.com,\r\n"
			  " c@example.com\r\n"
			  "subject: second\r\n"
			  "\r\n";

static void test_header_fields(void **state)
{
	struct str_view names[] = { str_view_of("SUBJECT"), str_view_of("to") };
	struct buf out;

	buf_init(&out, 0, 4096);
	assert_int_equal(rfc5322_header_fields(hdr, sizeof(hdr) - 1, names, 2, false, &out), 0);
	assert_string_equal(buf_cstr(&out), "Subject: one\r\n\ttwo\r\n"
					    "To: b@example.com,\r\n c@example.com\r\n"
					    "subject: second\r\n\r\n");
	buf_reset(&out);
	assert_int_equal(rfc5322_header_fields(hdr, sizeof(hdr) - 1, names, 2, true, &out), 0);
	assert_string_equal(buf_cstr(&out), "From: a@example.com\r\n\r\n");
	buf_reset(&out);
	assert_int_equal(rfc5322_header_fields(hdr, sizeof(hdr) - 1, names, 0, false, &out), 0);
	assert_string_equal(buf_cstr(&out), "\r\n");
	/* a header cut without its last line end still yields lines ending in CRLF */
	buf_reset(&out);
	assert_int_equal(rfc5322_header_fields("To: x", 5, names, 2, false, &out), 0);
	assert_string_equal(buf_cstr(&out), "To: x\r\n\r\n");
	buf_release(&out);
	buf_init(&out, 0, 10);
	assert_int_equal(rfc5322_header_fields(hdr, sizeof(hdr) - 1, names, 2, false, &out), -1);
	assert_int_equal(out.len, 0);
	buf_release(&out);
}

static void test_header_value(void **state)
{
	struct buf out;

	buf_init(&out, 0, 4096);
	assert_int_equal(rfc5322_header_value(hdr, sizeof(hdr) - 1, "subject", &out), 1);
	assert_string_equal(buf_cstr(&out), "one\ttwo");
	buf_reset(&out);
	assert_int_equal(rfc5322_header_value(hdr, sizeof(hdr) - 1, "To", &out), 1);
	assert_string_equal(buf_cstr(&out), "b@example.com, c@example.com");
	buf_reset(&out);
	assert_int_equal(rfc5322_header_value(hdr, sizeof(hdr) - 1, "Cc", &out), 0);
	buf_release(&out);
}

static int64_t date(const char *s)
{
	int64_t t;

	return rfc5322_date_parse(s, strlen(s), &t) == 0 ? t : -1;
}

/* The one comment skipper (dates, Content-Type parameters): nesting, quoted-pairs, open. */
static void test_skip_comment(void **state)
{
	const char *a = "(a (b) c) x", *b = "(a \\) b) x", *c = "(open (never";

	assert_int_equal(rfc5322_skip_comment(a, strlen(a), 0), 9);
	assert_int_equal(rfc5322_skip_comment(b, strlen(b), 0), 8);
	assert_int_equal(rfc5322_skip_comment(c, strlen(c), 0), strlen(c));
	assert_int_equal(rfc5322_skip_comment("x (y)", 5, 2), 5);
}

static void test_dates(void **state)
{
	assert_int_equal(date("Fri, 21 Nov 1997 09:55:06 -0600"), 880127706);
	assert_int_equal(date("21 Nov 1997 09:55:06 -0600"), 880127706);
	assert_int_equal(date("Fri, 21 Nov 97 09:55:06 CST"), 880127706);
	assert_int_equal(date("Fri, 21 Nov 1997 15:55 GMT"), 880127700);
	assert_int_equal(date("Fri, 21 Nov 1997 09:55:06 -0600 (Central Standard Time)"),
			 880127706);
	assert_int_equal(date("  Fri,21 Nov 1997 15:55:06 +0000"), 880127706);
	assert_int_equal(date("Thu, 1 Jan 1970 00:00:00 +0000"), 0);
	assert_int_equal(date("Sun, 29 Feb 2032 23:59:59 +0100"), 1961708399);
	assert_int_equal(date("Fri Nov 21 15:55:06 1997"), 880127706); /* asctime */
	assert_int_equal(date("1 Jan 49 00:00:00 Z"), 2493072000);     /* 2049 */
	assert_int_equal(date(""), -1);
	assert_int_equal(date("yesterday"), -1);
	assert_int_equal(date("32 Nov 1997 10:00:00"), -1);
	assert_int_equal(date("21 Nov 1997"), -1);
	assert_int_equal(date("21 Nov 1997 25:00:00 +0000"), -1);

	int64_t t;
	int tz;

	assert_int_equal(rfc5322_date_parse_tz("Fri, 21 Nov 1997 09:55:06 -0630", 31, &t, &tz), 0);
	assert_int_equal(tz, -390);
	assert_int_equal(rfc5322_date_parse_tz("21 Nov 97 09:55 PDT", 19, &t, &tz), 0);
	assert_int_equal(tz, -420);
	assert_int_equal(rfc5322_date_parse_tz("21 Nov 1997 09:55:06", 20, &t, &tz), 0);
	assert_int_equal(tz, 0);
}

struct addrs {
	struct buf out;
};

static void addr_cb(void *ctx, const struct rfc5322_addr *a)
{
	struct addrs *as = ctx;

	if (a->is_group_start)
		buf_printf(&as->out, "[group %.*s]", (int)a->name.len, a->name.p);
	else if (a->is_group_end)
		buf_puts(&as->out, "[end]");
	else
		buf_printf(&as->out, "[%.*s|%.*s|%.*s|%.*s]", (int)a->name.len, a->name.p,
			   (int)a->route.len, a->route.p, (int)a->mailbox.len, a->mailbox.p,
			   (int)a->domain.len, a->domain.p);
}

static const char *addrs(const char *s, struct addrs *as)
{
	buf_reset(&as->out);
	rfc5322_addr_parse(s, strlen(s), addr_cb, as);
	return buf_cstr(&as->out);
}

static void test_addresses(void **state)
{
	struct addrs as;

	buf_init(&as.out, 0, 1 << 16);
	assert_string_equal(addrs("\"Doe, John\" <john@example.com>, jane@example.com (Jane D)",
				  &as),
			    "[Doe, John||john|example.com][Jane D||jane|example.com]");
	assert_string_equal(addrs("Team: a@x.org, B <b@y.org>;, c@z.org", &as),
			    "[group Team][||a|x.org][B||b|y.org][end][||c|z.org]");
	assert_string_equal(addrs("undisclosed-recipients:;", &as),
			    "[group undisclosed-recipients][end]");
	assert_string_equal(addrs("<@r1.example,@r2.example:u@d.example>", &as),
			    "[|@r1.example,@r2.example|u|d.example]");
	assert_string_equal(addrs("\"a\\\"b\"@example.com", &as), "[||a\"b|example.com]");
	assert_string_equal(addrs("John Q. Public <jqp@[192.0.2.1]>", &as),
			    "[John Q. Public||jqp|[192.0.2.1]]");
	assert_string_equal(addrs("=?utf-8?q?R=C3=A9?= <r@x>", &as), "[=?utf-8?q?R=C3=A9?=||r|x]");
	assert_string_equal(addrs("user", &as), "[||user|]");
	assert_string_equal(addrs("", &as), "");
	assert_string_equal(addrs(" , ,", &as), "");
	assert_string_equal(addrs("a@b.c (one) (two)", &as), "[one two||a|b.c]");
	/* garbage is survived */
	addrs("<<<>>>,;;:::\"\\", &as);
	addrs("(((((", &as);
	buf_release(&as.out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_events),
		cmocka_unit_test(test_events_split_anywhere),
		cmocka_unit_test(test_long_lines_split),
		cmocka_unit_test(test_boundary_prefixes),
		cmocka_unit_test(test_bare_lf_and_missing_close),
		cmocka_unit_test(test_huge_field_truncated),
		cmocka_unit_test(test_ctype),
		cmocka_unit_test(test_header_fields),
		cmocka_unit_test(test_header_value),
		cmocka_unit_test(test_skip_comment),
		cmocka_unit_test(test_dates),
		cmocka_unit_test(test_addresses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
