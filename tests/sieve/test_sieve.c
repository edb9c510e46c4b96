/* test_sieve.c — libheron_sieve: a table of scripts x messages with the expected actions
 * (the RFCs' examples among them), every syntax error class of RFC 5228's grammar with its
 * position, the front end fed one byte at a time, and the per-run limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/xmalloc.h"
#include "sieve/sieve.h"
#include "sieve/sieve_private.h"

static const char MSG1[] =
	"Received: from mx.example.net by heron; Tue, 1 Dec 2026 10:00:00 +0000\r\n"
	"Date: Tue, 1 Dec 2026 09:59:00 -0500\r\n"
	"From: Coyote <coyote@desert.example.org>\r\n"
	"To: roadrunner+fast@acme.example.com, bob@example.com\r\n"
	"Cc: boss@example.com\r\n"
	"Subject: $$$ Make money fast\r\n"
	"Message-ID: <m1@desert.example.org>\r\n"
	"X-Spam-Score: 9.5\r\n"
	"X-Virus-Scan: clean\r\n"
	"X-Priority: 1\r\n"
	"\r\n"
	"I've got some great birdseed over here at my place.\r\n"
	"Want to buy it?\r\n";

static const char MSG_LIST[] = "From: list@lists.example.org\r\n"
			       "To: bob@example.com\r\n"
			       "List-Id: <devel.lists.example.org>\r\n"
			       "Subject: [devel] build broken\r\n"
			       "\r\n"
			       "body\r\n";

static const char MSG_MIME[] = "From: alice@example.org\r\n"
			       "To: bob@example.com\r\n"
			       "Subject: report\r\n"
			       "MIME-Version: 1.0\r\n"
			       "Content-Type: multipart/mixed; boundary=\"b1\"\r\n"
			       "\r\n"
			       "--b1\r\n"
			       "Content-Type: text/plain\r\n"
			       "\r\n"
			       "the quarterly numbers are attached\r\n"
			       "--b1\r\n"
			       "Content-Type: application/pdf\r\n"
			       "\r\n"
			       "%PDF-1.4 secret-bytes\r\n"
			       "--b1--\r\n";

static const char MSG_RSPAMD[] =
	"From: x@spam.example\r\nTo: bob@example.com\r\nSubject: win\r\n"
	"X-Spamd-Result: default: False [12.00 / 15.00]; R_SPF_FAIL(1.00)[-all]\r\n"
	"\r\nbody\r\n";

/* i;unicode-casemap: Greek with a final sigma, a titlecase digraph, Hangul, fullwidth
   letters, combining marks in two orders, a literal '*' */
static const char MSG_UNI[] =
	"From: x@example.org\r\nTo: bob@example.com\r\n"
	"Subject: \xcf\x83\xce\xaf\xcf\x83\xcf\x85\xcf\x86\xce\xbf\xcf\x82 und "
	"\xc7\x86"
	"emal\r\n"
	"X-Hangul: \xed\x95\x9c\xea\xb5\xad\r\n"
	"X-Wide: \xef\xbd\x81\xef\xbd\x82\xef\xbd\x83\r\n"
	"X-Marks: a\xcc\xa3\xcc\x87\r\n"
	"X-Star: a*b\r\n"
	"\r\nbody\r\n";

/* a sender's forged score above rspamd's verdict */
static const char MSG_RSPAMD_FORGED[] =
	"From: x@spam.example\r\nTo: bob@example.com\r\nSubject: win\r\nX-Spam-Score: 0\r\n"
	"X-Spamd-Result: default: False [12.00 / 15.00]; R_SPF_FAIL(1.00)[-all]\r\n"
	"\r\nbody\r\n";

static const char MSG_ENC[] =
	"From: =?ISO-8859-1?Q?Andr=E9?= <andre@example.org>\r\n"
	"To: bob@example.com\r\n"
	"Subject: =?UTF-8?B?UmVjaG51bmc=?= =?UTF-8?Q?_f=C3=BCr_Dezember?=\r\n"
	"MIME-Version: 1.0\r\n"
	"Content-Type: multipart/alternative; boundary=\"b2\"\r\n"
	"\r\n"
	"--b2\r\n"
	"Content-Type: text/plain; charset=utf-8\r\n"
	"Content-Transfer-Encoding: quoted-printable\r\n"
	"\r\n"
	"Die Rechnung =C3=BCber 100 Euro ist f=\r\n"
	"=C3=A4llig.\r\n"
	"--b2\r\n"
	"Content-Type: text/html; charset=utf-8\r\n"
	"Content-Transfer-Encoding: base64\r\n"
	"\r\n"
	"PHA+cGF5bWVudCBkdWU8L3A+\r\n"
	"--b2--\r\n";

static bool seen_dup(void *ctx, const char *key)
{
	return ctx != NULL && strstr(key, "m1@desert") != NULL;
}

static bool mbox_exists(void *ctx, const char *name)
{
	return strcmp(name, "INBOX") == 0 || strcmp(name, "Junk") == 0;
}

static uint8_t *inc_prog;
static size_t inc_len;

static const uint8_t *include_cb(void *ctx, bool global, const char *name, size_t *len_r)
{
	if (strcmp(name, "spam") != 0)
		return NULL;
	*len_r = inc_len;
	return inc_prog;
}

/* the actions as text: keep[flags] fileinto:Box[flags] redirect:a reject:why vacation:to */
static void render(const struct sieve_result *r, struct buf *b)
{
	for (size_t i = 0; i < r->nact; i++) {
		const struct sieve_action *a = &r->act[i];

		if (b->len)
			buf_putc(b, ' ');
		switch (a->type) {
		case SIEVE_KEEP:
			buf_puts(b, "keep");
			break;
		case SIEVE_FILEINTO:
			buf_printf(b, "fileinto:%s%s", a->mailbox, a->create ? "+create" : "");
			break;
		case SIEVE_REDIRECT:
			buf_printf(b, "redirect:%s", a->addr);
			break;
		case SIEVE_REJECT:
			buf_printf(b, "reject:%s", a->reason);
			break;
		case SIEVE_EREJECT:
			buf_printf(b, "ereject:%s", a->reason);
			break;
		case SIEVE_VACATION:
			buf_printf(b, "vacation:%s", a->vac.to);
			break;
		}
		if (a->nflags) {
			buf_putc(b, '[');
			for (size_t k = 0; k < a->nflags; k++)
				buf_printf(b, "%s%s", k ? " " : "", a->flags[k]);
			buf_putc(b, ']');
		}
	}
	if (r->error)
		buf_printf(b, " error:%s", r->error);
}

static char *run_script(const char *script, const char *msg, const char *from, const char *to,
			bool dup)
{
	uint8_t *prog;
	size_t len;
	char *err;
	struct sieve_result r;
	struct sieve_env env = {
		.msg = msg,
		.msg_len = strlen(msg),
		.env_from = from,
		.env_to = to,
		.user = "bob",
		.domain = "example.com",
		.now = 1796119200 /* 2026-12-01 10:00 */,
		.zone_min = 0,
		.mailbox_exists = mbox_exists,
		.duplicate_seen = seen_dup,
		.include = include_cb,
		.ctx = dup ? (void *)1 : NULL,
		.spam_max = 10,
	};
	struct buf b;

	if (sieve_compile(script, strlen(script), NULL, &prog, &len, &err) < 0) {
		char *e = xasprintf("COMPILE %s", err);

		free(err);
		return e;
	}
	if (!sieve_program_valid(prog, len))
		fail_msg("program not valid: %s", script);
	assert_int_equal(sieve_run(prog, len, &env, NULL, &r), 0);
	buf_init(&b, 64, 1 << 20);
	render(&r, &b);
	sieve_result_clear(&r);
	free(prog);
	return buf_steal(&b, &len);
}

struct tcase {
	const char *script;
	const char *msg;
	const char *expect;
};

#define FROM "coyote@desert.example.org"
#define TO "bob@example.com"

static const struct tcase cases[] = {
	/* RFC 5228 base */
	{ "", MSG1, "keep" },
	{ "discard;", MSG1, "" },
	{ "keep;", MSG1, "keep" },
	{ "if size :over 100K { discard; }", MSG1, "keep" },
	{ "if size :under 1K { discard; }", MSG1, "" },
	{ "if header :contains \"subject\" \"money\" { discard; }", MSG1, "" },
	{ "if header :is \"Subject\" \"$$$ make MONEY fast\" { discard; }", MSG1, "" },
	{ "if header :comparator \"i;octet\" :is \"Subject\" \"$$$ make MONEY fast\" "
	  "{ discard; }",
	  MSG1, "keep" },
	{ "if header :matches \"Subject\" \"$$$*\" { discard; }", MSG1, "" },
	{ "if header :matches \"Subject\" \"?$$*FAST\" { discard; }", MSG1, "" },
	{ "if header :matches \"Subject\" \"\\\\$*\" { discard; }", MSG1, "" },
	{ "if address :domain :is \"from\" \"desert.example.org\" { discard; }", MSG1, "" },
	{ "if address :localpart :is [\"to\", \"cc\"] \"boss\" { discard; }", MSG1, "" },
	{ "if address :all :is \"from\" \"Coyote\" { discard; }", MSG1, "keep" },
	{ "if exists [\"From\", \"Date\"] { discard; }", MSG1, "" },
	{ "if exists [\"From\", \"X-Nope\"] { discard; }", MSG1, "keep" },
	{ "if not exists \"X-Nope\" { discard; }", MSG1, "" },
	{ "if allof (true, false) { discard; }", MSG1, "keep" },
	{ "if anyof (false, true) { discard; }", MSG1, "" },
	{ "if anyof (false, false) { discard; } elsif true { stop; } else { discard; }", MSG1,
	  "keep" },
	{ "if false { discard; } elsif false { discard; } else { redirect \"a@b.example\"; }",
	  MSG1, "redirect:a@b.example" },
	{ "require \"copy\"; redirect :copy \"a@b.example\";", MSG1, "redirect:a@b.example keep" },
	{ "redirect \"a@b.example\"; redirect \"a@b.example\";", MSG1, "redirect:a@b.example" },
	{ "stop; discard;", MSG1, "keep" },
	/* RFC 5228 section 9 example */
	{ "require \"fileinto\";\n"
	  "if header :is \"Sender\" \"owner-ietf-mta-filters@imc.org\" {\n"
	  "  fileinto \"filter\";\n"
	  "} elsif address :DOMAIN :is [\"From\", \"To\"] \"example.com\" {\n"
	  "  keep;\n"
	  "} elsif anyof (NOT address :all :contains [\"To\", \"Cc\", \"Bcc\"] \"me@example.com\",\n"
	  "               header :matches \"subject\" [\"*make*money*fast*\", \"*university*dipl*mas*\"]) {\n"
	  "  fileinto \"spam\";\n"
	  "} else {\n"
	  "  fileinto \"personal\";\n"
	  "}\n",
	  MSG1, "keep" },
	{ "require \"fileinto\"; if header :contains \"X-Priority\" \"1\" "
	  "{ fileinto \"Urgent\"; }",
	  MSG1, "fileinto:Urgent" },
	{ "require [\"fileinto\", \"copy\"]; fileinto \"A\"; fileinto \"A\"; fileinto :copy \"B\";",
	  MSG1, "fileinto:A fileinto:B" },
	{ "require \"fileinto\"; fileinto \"INBOX\";", MSG1, "keep" },
	/* envelope, subaddress */
	{ "require \"envelope\"; if envelope :is \"from\" \"coyote@desert.example.org\" "
	  "{ discard; }",
	  MSG1, "" },
	{ "require [\"envelope\", \"subaddress\"]; if envelope :detail \"to\" \"fast\" "
	  "{ discard; }",
	  MSG1, "keep" },
	{ "require [\"subaddress\"]; if address :detail \"to\" \"fast\" { discard; }", MSG1, "" },
	{ "require [\"subaddress\"]; if address :user \"to\" \"roadrunner\" { discard; }", MSG1,
	  "" },
	{ "require \"envelope\"; if envelope :all :is \"from\" \"\" { discard; }", MSG1, "keep" },
	/* reject / ereject */
	{ "require \"reject\"; reject \"go away\";", MSG1, "reject:go away" },
	{ "require \"ereject\"; ereject \"no\";", MSG1, "ereject:no" },
	{ "require [\"reject\", \"fileinto\"]; fileinto \"x\"; reject \"no\";", MSG1,
	  "keep error:reject cannot be combined with keep, fileinto, redirect or vacation" },
	/* imap4flags (RFC 5232 examples) */
	{ "require \"imap4flags\"; setflag \"\\\\Seen\"; addflag [\"\\\\Flagged\", \"$Work\"];",
	  MSG1, "keep[\\Seen \\Flagged $Work]" },
	{ "require \"imap4flags\"; addflag \"a b\"; removeflag \"a\";", MSG1, "keep[b]" },
	{ "require [\"imap4flags\", \"fileinto\"]; fileinto :flags \"\\\\Deleted\" \"Trash\";",
	  MSG1, "fileinto:Trash[\\Deleted]" },
	{ "require [\"imap4flags\"]; addflag \"\\\\Seen\"; if hasflag :contains \"Seen\" "
	  "{ discard; }",
	  MSG1, "" },
	{ "require [\"imap4flags\", \"variables\"]; addflag \"f\" [\"x\", \"y\"]; "
	  "if hasflag :is \"f\" \"y\" { discard; }",
	  MSG1, "" },
	/* variables (RFC 5229) */
	{ "require [\"variables\", \"fileinto\"]; if header :matches \"Subject\" \"$$$ * *\" "
	  "{ fileinto \"x-${1}-${2}\"; }",
	  MSG1, "fileinto:x-Make-money fast" },
	{ "require [\"variables\", \"fileinto\"]; set \"a\" \"Hello\"; set :upper \"b\" \"${a}\";"
	  " set :length \"c\" \"${b}\"; fileinto \"${b}${c}\";",
	  MSG1, "fileinto:HELLO5" },
	{ "require \"variables\"; set \"x\" \"a*b\"; set :quotewildcard \"y\" \"${x}\"; "
	  "if string :is \"${y}\" \"a\\\\*b\" { discard; }",
	  MSG1, "" },
	{ "require \"variables\"; if string :count \"eq\" [\"a\", \"\", \"b\"] \"2\" "
	  "{ discard; }",
	  MSG1,
	  "COMPILE line 1, column 32: tag :count needs a require of its "
	  "extension" },
	{ "require [\"variables\", \"relational\"]; if string :count \"eq\" [\"a\", \"\", \"b\"] "
	  "\"2\" { discard; }",
	  MSG1, "" },
	{ "require \"variables\"; set \"n\" \"${unknown}x\"; if string \"${n}\" \"x\" "
	  "{ discard; }",
	  MSG1, "" },
	/* relational (RFC 5231) */
	{ "require [\"relational\", \"comparator-i;ascii-numeric\"]; if header :value \"ge\" "
	  ":comparator \"i;ascii-numeric\" \"X-Spam-Score\" \"9\" { discard; }",
	  MSG1, "" },
	{ "require [\"relational\", \"comparator-i;ascii-numeric\"]; if address :count \"ge\" "
	  ":comparator \"i;ascii-numeric\" [\"to\", \"cc\"] \"3\" { discard; }",
	  MSG1, "" },
	{ "require \"relational\"; if header :value \"lt\" \"Subject\" \"A\" { discard; }", MSG1,
	  "" },
	/* regex */
	{ "require [\"regex\", \"variables\", \"fileinto\"]; if header :regex \"Subject\" "
	  "\"(make|earn) (money|cash)\" { fileinto \"${2}\"; }",
	  MSG1, "fileinto:money" },
	{ "require \"regex\"; if header :regex \"Subject\" \"^\\\\$+ m[a-z]{3} \" "
	  "{ discard; }",
	  MSG1, "" },
	{ "require \"regex\"; if header :regex \"Subject\" \"(a\" { discard; }", MSG1,
	  "COMPILE line 1, column 45: bad regular expression \"(a\": missing ')'" },
	/* body (RFC 5173) */
	{ "require \"body\"; if body :contains \"birdseed\" { discard; }", MSG1, "" },
	{ "require \"body\"; if body :raw :contains \"secret-bytes\" { discard; }", MSG_MIME, "" },
	{ "require \"body\"; if body :text :contains \"secret-bytes\" { discard; }", MSG_MIME,
	  "keep" },
	{ "require \"body\"; if body :content \"application/pdf\" :contains \"secret\" "
	  "{ discard; }",
	  MSG_MIME, "" },
	{ "require \"body\"; if body :text :contains \"quarterly\" { discard; }", MSG_MIME, "" },
	/* date / index (RFC 5260) */
	{ "require \"date\"; if date :is \"date\" \"year\" \"2026\" { discard; }", MSG1, "" },
	{ "require \"date\"; if date :originalzone :is \"date\" \"zone\" \"-0500\" "
	  "{ discard; }",
	  MSG1, "" },
	{ "require \"date\"; if date :zone \"+0100\" :is \"date\" \"hour\" \"15\" { discard; }",
	  MSG1, "" },
	{ "require [\"date\", \"relational\"]; if currentdate :value \"ge\" \"date\" "
	  "\"2026-01-01\" { discard; }",
	  MSG1, "" },
	{ "require \"date\"; if currentdate :is \"weekday\" \"2\" { discard; }", MSG1, "" },
	{ "require [\"date\", \"index\"]; if date :index 1 :is \"received\" \"hour\" \"10\" "
	  "{ discard; }",
	  MSG1, "" },
	{ "require \"index\"; if header :index 2 :is \"To\" \"x\" { discard; }", MSG1, "keep" },
	{ "require \"index\"; if header :last :is \"To\" \"x\" { discard; }", MSG1,
	  "COMPILE line 1, column 21: :last needs :index" },
	/* vacation (RFC 5230) */
	{ "require \"vacation\"; vacation \"I am away\";", MSG1, "vacation:" FROM " keep" },
	{ "require \"vacation\"; vacation \"I am away\";", MSG_LIST, "keep" },
	{ "require \"vacation\"; vacation :days 3 :addresses [\"x@y\"] :subject \"Out\" "
	  ":from \"b@example.com\" :handle \"h\" \"away\";",
	  MSG1, "vacation:" FROM " keep" },
	{ "require \"vacation-seconds\"; vacation :seconds 60 \"away\";", MSG1,
	  "vacation:" FROM " keep" },
	{ "require \"vacation\"; vacation :seconds 60 \"away\";", MSG1,
	  "COMPILE line 1, column 30: tag :seconds needs a require of its extension" },
	/* copy, mailbox */
	{ "require [\"fileinto\", \"copy\", \"mailbox\"]; fileinto :copy :create \"New/Box\";",
	  MSG1, "fileinto:New/Box+create keep" },
	{ "require [\"fileinto\", \"mailbox\"]; if mailboxexists \"Junk\" "
	  "{ fileinto \"Junk\"; }",
	  MSG1, "fileinto:Junk" },
	{ "require [\"fileinto\", \"mailbox\"]; if mailboxexists \"Nope\" "
	  "{ fileinto \"Junk\"; }",
	  MSG1, "keep" },
	/* duplicate (RFC 7352) */
	{ "require \"duplicate\"; if duplicate { discard; }", MSG1, "keep" },
	/* spamtest / virustest (RFC 5235) */
	{ "require [\"spamtest\", \"relational\", \"comparator-i;ascii-numeric\"]; "
	  "if spamtest :value \"ge\" :comparator \"i;ascii-numeric\" \"8\" { discard; }",
	  MSG1, "" },
	{ "require [\"spamtestplus\", \"relational\", \"comparator-i;ascii-numeric\"]; "
	  "if spamtest :percent :value \"eq\" :comparator \"i;ascii-numeric\" \"95\" "
	  "{ discard; }",
	  MSG1, "" },
	{ "require [\"virustest\", \"relational\", \"comparator-i;ascii-numeric\"]; "
	  "if virustest :value \"eq\" :comparator \"i;ascii-numeric\" \"1\" { discard; }",
	  MSG1, "" },
	{ "require [\"spamtest\", \"relational\", \"comparator-i;ascii-numeric\"]; "
	  "if spamtest :value \"eq\" :comparator \"i;ascii-numeric\" \"8\" { discard; }",
	  MSG_RSPAMD, "" },
	{ "require [\"spamtest\", \"relational\", \"comparator-i;ascii-numeric\"]; "
	  "if spamtest :value \"eq\" :comparator \"i;ascii-numeric\" \"8\" { discard; }",
	  MSG_RSPAMD_FORGED, "" },
/* i;unicode-casemap (RFC 5051): titlecase, then NFKD, then octets */
#define UCM "require \"comparator-i;unicode-casemap\"; "
	{ UCM "if header :is :comparator \"i;unicode-casemap\" \"subject\" "
	      "\"rechnung f\xc3\xbcr dezember\" { discard; }",
	  MSG_ENC, "" },
	{ UCM "if header :is :comparator \"i;unicode-casemap\" \"subject\" "
	      "\"RECHNUNG FU\xcc\x88R DEZEMBER\" { discard; }",
	  MSG_ENC, "" },
	{ "if header :is :comparator \"i;ascii-casemap\" \"subject\" "
	  "\"RECHNUNG F\xc3\x9cR DEZEMBER\" { discard; }",
	  MSG_ENC, "keep" },
	{ UCM "if header :contains :comparator \"i;unicode-casemap\" \"subject\" "
	      "\"F\xc3\x9cR DEZ\" { discard; }",
	  MSG_ENC, "" },
	{ "require [\"comparator-i;unicode-casemap\", \"variables\", \"fileinto\"]; "
	  "if header :matches :comparator \"i;unicode-casemap\" \"subject\" "
	  "\"RECHNUNG * dezember\" { fileinto \"${1}\"; }",
	  MSG_ENC, "fileinto:f\xc3\xbcr" },
	{ UCM "if header :is :comparator \"i;unicode-casemap\" \"subject\" "
	      "\"\xce\xa3\xce\x8a\xce\xa3\xce\xa5\xce\xa6\xce\x9f\xce\xa3 UND \xc7\x84"
	      "EMAL\" "
	      "{ discard; }",
	  MSG_UNI, "" },
	{ UCM "if header :is :comparator \"i;unicode-casemap\" \"x-hangul\" "
	      "\"\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab\xe1\x84\x80\xe1\x85\xae\xe1\x86\xa8\" "
	      "{ discard; }",
	  MSG_UNI, "" },
	{ UCM "if header :is :comparator \"i;unicode-casemap\" \"x-wide\" \"abc\" { discard; }",
	  MSG_UNI, "" },
	{ UCM "if header :is :comparator \"i;unicode-casemap\" \"x-marks\" "
	      "\"A\xcc\x87\xcc\xa3\" { discard; }",
	  MSG_UNI, "" },
	{ "if header :is :comparator \"i;octet\" \"x-marks\" \"a\xcc\x87\xcc\xa3\" "
	  "{ discard; }",
	  MSG_UNI, "keep" },
	/* a fullwidth asterisk folds to '*' and stays a literal, not a wildcard */
	{ UCM "if header :matches :comparator \"i;unicode-casemap\" \"x-star\" "
	      "\"A\xef\xbc\x8a"
	      "B\" { discard; }",
	  MSG_UNI, "" },
	{ UCM "if header :matches :comparator \"i;unicode-casemap\" \"x-wide\" "
	      "\"A\xef\xbc\x8a"
	      "C\" { discard; }",
	  MSG_UNI, "keep" },
	{ UCM "if header :matches :comparator \"i;unicode-casemap\" \"x-wide\" \"A?C\" "
	      "{ discard; }",
	  MSG_UNI, "" },
	{ "require [\"comparator-i;unicode-casemap\", \"relational\"]; "
	  "if header :value \"lt\" :comparator \"i;unicode-casemap\" \"x-star\" \"B\" "
	  "{ discard; }",
	  MSG_UNI, "" },
	{ "if header :is :comparator \"i;unicode-casemap\" \"subject\" \"x\" { discard; }",
	  MSG_UNI,
	  "COMPILE line 1, column 27: comparator \"i;unicode-casemap\" needs require "
	  "\"comparator-i;unicode-casemap\"" },
#undef UCM
	/* include (RFC 6609) */
	{ "require [\"include\"]; include :personal \"spam\";", MSG1, "fileinto:Junk" },
	{ "require [\"include\"]; include \"missing\";", MSG1,
	  "keep error:include: script \"missing\" not found" },
	{ "require [\"include\"]; include :optional \"missing\";", MSG1, "keep" },
	/* encoded-character (RFC 5228 2.4.2.4) */
	{ "require [\"encoded-character\", \"fileinto\"]; fileinto \"${hex:41 42}${unicode:263a}\";",
	  MSG1, "fileinto:AB\xe2\x98\xba" },
	/* editheader (RFC 5293) */
	{ "require [\"editheader\"]; addheader \"X-Sieve\" \"yes\"; if exists \"X-Sieve\" "
	  "{ discard; }",
	  MSG1, "" },
	{ "require [\"editheader\"]; deleteheader \"X-Priority\"; if exists \"X-Priority\" "
	  "{ discard; }",
	  MSG1, "keep" },
	{ "require [\"editheader\"]; deleteheader \"Received\"; if exists \"Received\" "
	  "{ discard; }",
	  MSG1, "" },
	/* RFC 2047 words in header tests; transfer encodings in body tests */
	{ "if header :is \"subject\" \"Rechnung f\xc3\xbcr Dezember\" { discard; }", MSG_ENC, "" },
	{ "if header :contains \"from\" \"Andr\xc3\xa9\" { discard; }", MSG_ENC, "" },
	{ "if address :is \"from\" \"andre@example.org\" { discard; }", MSG_ENC, "" },
	{ "require \"body\"; if body :text :contains \"f\xc3\xa4llig\" { discard; }", MSG_ENC,
	  "" },
	{ "require \"body\"; if body :content \"text/html\" :contains \"payment due\" "
	  "{ discard; }",
	  MSG_ENC, "" },
	{ "require \"body\"; if body :raw :contains \"payment due\" { discard; }", MSG_ENC,
	  "keep" },
	/* multi-line strings and comments */
	{ "require \"reject\"; # hash comment\n/* bracket\n comment */ reject text:\n"
	  "line one\n..dot\n.\n;",
	  MSG1, "reject:line one\r\n.dot\r\n" },
};

static void test_table(void **state)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = run_script(cases[i].script, cases[i].msg, FROM, TO, false);

		if (strcmp(got, cases[i].expect) != 0)
			fail_msg("case %zu: %s\n  got:    \"%s\"\n  wanted: \"%s\"", i,
				 cases[i].script, got, cases[i].expect);
		free(got);
	}
}

static void test_duplicate_seen(void **state)
{
	char *got = run_script("require \"duplicate\"; if duplicate { discard; }", MSG1, FROM, TO,
			       true);

	assert_string_equal(got, "");
	free(got);
}

static void test_vacation_fields(void **state)
{
	const char *s = "require \"vacation\"; vacation :days 0 \"away\";";
	uint8_t *prog;
	size_t len;
	char *err;
	struct sieve_result r;
	struct sieve_env env = {
		.msg = MSG1, .msg_len = strlen(MSG1), .env_from = FROM, .env_to = "bob@example.com"
	};

	assert_int_equal(sieve_compile(s, strlen(s), NULL, &prog, &len, &err), 0);
	sieve_run(prog, len, &env, NULL, &r);
	assert_int_equal(r.nact, 2);
	assert_int_equal(r.act[0].type, SIEVE_VACATION);
	assert_string_equal(r.act[0].vac.subject, "Auto: $$$ Make money fast");
	assert_string_equal(r.act[0].vac.in_reply_to, "<m1@desert.example.org>");
	assert_int_equal(r.act[0].vac.seconds, 86400); /* :days 0 is 1 */
	assert_non_null(r.act[0].vac.handle);
	sieve_result_clear(&r);
	/* the null sender never gets one */
	env.env_from = "";
	sieve_run(prog, len, &env, NULL, &r);
	assert_int_equal(r.nact, 1);
	assert_int_equal(r.act[0].type, SIEVE_KEEP);
	sieve_result_clear(&r);
	/* nor a recipient not named in To/Cc */
	env.env_from = FROM;
	env.env_to = "other@example.com";
	sieve_run(prog, len, &env, NULL, &r);
	assert_int_equal(r.nact, 1);
	sieve_result_clear(&r);
	free(prog);
}

static void test_editheader_output(void **state)
{
	const char *s = "require \"editheader\"; addheader \"X-Tag\" \"one\"; "
			"deleteheader :matches \"Subject\" \"*money*\";";
	uint8_t *prog;
	size_t len;
	char *err;
	struct sieve_result r;
	struct sieve_env env = { .msg = MSG1, .msg_len = strlen(MSG1), .env_from = FROM };

	assert_int_equal(sieve_compile(s, strlen(s), NULL, &prog, &len, &err), 0);
	sieve_run(prog, len, &env, NULL, &r);
	assert_non_null(r.header);
	assert_memory_equal(r.header, "X-Tag: one\r\n", 12);
	assert_null(strstr(r.header, "Subject:"));
	assert_non_null(strstr(r.header, "From: Coyote"));
	assert_string_equal(r.header + r.header_len - 4, "\r\n\r\n");
	sieve_result_clear(&r);
	free(prog);
}

/* each syntax error class of the grammar, with its position */
static const struct {
	const char *script, *error;
} errors[] = {
	{ "keep",
	  "line 1, column 5: expected ';' or a block after command 'keep', found end of script" },
	{ "keep;\n}", "line 2, column 1: expected a command, found '}'" },
	{ "if true { keep;", "line 1, column 16: missing '}' at the end of the script" },
	{ "if true keep;", "line 1, column 1: if needs one test and a block" },
	{ "if header :is [\"a\" \"b\"] \"c\" {}",
	  "line 1, column 20: expected ',' or ']' in the string list, found string" },
	{ "if header :is [\"a\",] \"c\" {}",
	  "line 1, column 20: expected a string in the string list, found ']'" },
	{ "if anyof (true; false) {}",
	  "line 1, column 15: expected ',' or ')' in the test list, found ';'" },
	{ "if anyof (true, ) {}", "line 1, column 17: expected a test, found ')'" },
	{ "if () {}", "line 1, column 5: expected a test, found ')'" },
	{ "\"str\";", "line 1, column 1: expected a command, found string" },
	{ "keep \"unterminated;", "line 1, column 6: unterminated string" },
	{ "/* open comment", "line 1, column 16: unterminated comment" },
	{ "reject text:\nno end\n",
	  "line 1, column 8: unterminated text: string (missing a line with a single '.')" },
	{ "reject text: x\n.\n;", "line 1, column 14: text: must be followed by a line end" },
	{ "keep : x;", "line 1, column 6: a tag needs a name after ':'" },
	{ "if size :over 10X {}", "line 1, column 17: bad number quantifier (K, M or G)" },
	{ "if size :over 99999999999999999999 {}", "line 1, column 15: number too large" },
	{ "keep @;", "line 1, column 6: unexpected character" },
	{ "keep / x;", "line 1, column 6: unexpected '/' (a comment starts with /*)" },
	{ "frobnicate;", "line 1, column 1: unknown command 'frobnicate'" },
	{ "if frob {}", "line 1, column 4: unknown test 'frob'" },
	{ "fileinto \"x\";",
	  "line 1, column 1: command 'fileinto' needs require of its extension" },
	{ "require \"nope\";", "line 1, column 9: unsupported extension \"nope\"" },
	{ "keep; require \"fileinto\";",
	  "line 1, column 7: require must come before any other command" },
	{ "elsif true {}", "line 1, column 1: elsif without a preceding if" },
	{ "if true {} keep; else {}", "line 1, column 18: else without a preceding if" },
	{ "if header \"a\" {}", "line 1, column 4: 'header' takes 2 arguments, not 1" },
	{ "if header :is 1 \"a\" {}", "line 1, column 15: 'header' expects a string list here" },
	{ "if header :frob \"a\" \"b\" {}", "line 1, column 11: unknown tag :frob for 'header'" },
	{ "if header :is :contains \"a\" \"b\" {}",
	  "line 1, column 15: tag :contains conflicts with an earlier tag" },
	{ "if header :comparator \"i;frob\" \"a\" \"b\" {}",
	  "line 1, column 23: unknown comparator \"i;frob\"" },
	{ "if header :comparator \"i;ascii-numeric\" \"a\" \"b\" {}",
	  "line 1, column 23: comparator \"i;ascii-numeric\" needs require \"comparator-i;ascii-numeric\"" },
	{ "if size 10 {}", "line 1, column 4: size needs :over or :under" },
	{ "keep true;", "line 1, column 1: command 'keep' takes no test" },
	{ "if keep {}", "line 1, column 4: 'keep' is a command, not a test" },
	{ "if not (true) {}", "line 1, column 4: not needs exactly one test" },
	{ "if allof true {}", "line 1, column 4: allof needs a list of tests in parentheses" },
	{ "redirect;", "line 1, column 1: 'redirect' takes 1 argument, not 0" },
	{ "keep {}", "line 1, column 1: command 'keep' takes no block" },
	{ "keep \x01;",
	  "line 1, column 6: unexpected byte (not allowed outside strings and comments)" },
};

static void test_syntax_errors(void **state)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		char *got = run_script(errors[i].script, MSG1, FROM, TO, false);
		char *want = xasprintf("COMPILE %s", errors[i].error);

		if (strcmp(got, want) != 0)
			fail_msg("error %zu: %s\n  got:    \"%s\"\n  wanted: \"%s\"", i,
				 errors[i].script, got, want);
		free(got);
		free(want);
	}
}

/* the front end gives the same program (or error) fed one byte at a time */
static void test_byte_at_a_time(void **state)
{
	for (size_t i = 0;
	     i < sizeof(cases) / sizeof(cases[0]) + sizeof(errors) / sizeof(errors[0]); i++) {
		const char *s = i < sizeof(cases) / sizeof(cases[0])
					? cases[i].script
					: errors[i - sizeof(cases) / sizeof(cases[0])].script;
		uint8_t *p1, *p2;
		size_t l1, l2;
		char *e1, *e2;
		int r1 = sieve_compile(s, strlen(s), NULL, &p1, &l1, &e1);
		struct sieve_parser *p = sieve_parser_new(NULL);

		for (size_t k = 0; s[k]; k++)
			sieve_parser_feed(p, s + k, 1);
		int r2 = sieve_parser_finish(&p, &p2, &l2, &e2);
		assert_int_equal(r1, r2);
		if (r1 == 0) {
			assert_int_equal(l1, l2);
			assert_memory_equal(p1, p2, l1);
		} else {
			assert_string_equal(e1, e2);
		}
		free(p1);
		free(p2);
		free(e1);
		free(e2);
	}
}

static void test_limits(void **state)
{
	struct buf b;
	char *got;
	uint8_t *prog;
	size_t len;
	char *err;

	/* 10,000 nested ifs: a clear error, no deep recursion */
	buf_init(&b, 1 << 16, 4 << 20);
	for (int i = 0; i < 10000; i++)
		buf_puts(&b, "if true {");
	buf_puts(&b, "keep;");
	for (int i = 0; i < 10000; i++)
		buf_puts(&b, "}");
	got = run_script(b.data, MSG1, FROM, TO, false);
	assert_string_equal(got,
			    "COMPILE line 1, column 297: blocks nested too deeply (at most 32)");
	free(got);
	buf_reset(&b);
	/* deep test nesting too */
	buf_puts(&b, "if ");
	for (int i = 0; i < 10000; i++)
		buf_puts(&b, "not ");
	buf_puts(&b, "true {}");
	got = run_script(b.data, MSG1, FROM, TO, false);
	assert_non_null(strstr(got, "tests nested too deeply"));
	free(got);
	/* a script over the size limit */
	buf_reset(&b);
	while (b.len < (1u << 20) + 10)
		buf_puts(&b, "# filler comment line to pass one mebibyte of script text\n");
	assert_int_equal(sieve_compile(b.data, b.len, NULL, &prog, &len, &err), -1);
	assert_non_null(strstr(err, "script too large"));
	free(err);
	/* many instructions: stops at the limit, keeps the message */
	buf_reset(&b);
	for (int i = 0; i < 3000; i++)
		buf_puts(&b, "if header :contains \"subject\" \"nothing\" { discard; }\n");
	assert_int_equal(sieve_compile(b.data, b.len, NULL, &prog, &len, &err), 0);
	struct sieve_limits lim = { .max_instructions = 1000 };
	struct sieve_env env = { .msg = MSG1, .msg_len = strlen(MSG1), .env_from = FROM };
	struct sieve_result r;
	sieve_run(prog, len, &env, &lim, &r);
	assert_non_null(r.error);
	assert_int_equal(r.nact, 1);
	assert_int_equal(r.act[0].type, SIEVE_KEEP);
	sieve_result_clear(&r);
	lim = (struct sieve_limits){ .max_header_bytes = 10000 };
	sieve_run(prog, len, &env, &lim, &r);
	assert_non_null(strstr(r.error, "header bytes"));
	sieve_result_clear(&r);
	free(prog);
	/* redirects */
	const char *s =
		"redirect \"a@x.example\"; redirect \"b@x.example\"; redirect \"c@x.example\";";
	assert_int_equal(sieve_compile(s, strlen(s), NULL, &prog, &len, &err), 0);
	lim = (struct sieve_limits){ .max_redirects = 2 };
	sieve_run(prog, len, &env, &lim, &r);
	assert_non_null(strstr(r.error, "redirects"));
	sieve_result_clear(&r);
	free(prog);
	buf_release(&b);
}

/* catastrophic patterns are linear: (a*)*b on a long run of a's, nested counted repeats */
static void test_regex_bounded(void **state)
{
	struct buf msg;
	char *got;

	buf_init(&msg, 1 << 16, 1 << 20);
	buf_puts(&msg, "Subject: ");
	for (int i = 0; i < 30000; i++)
		buf_putc(&msg, 'a');
	buf_puts(&msg, "\r\n\r\nbody\r\n");
	got = run_script("require \"regex\"; if header :regex \"Subject\" \"^(a*)*b$\" "
			 "{ discard; }",
			 msg.data, FROM, TO, false);
	assert_string_equal(got, "keep");
	free(got);
	got = run_script("require \"regex\"; if header :regex \"Subject\" \"(a|aa)+$\" "
			 "{ discard; }",
			 msg.data, FROM, TO, false);
	assert_string_equal(got, "");
	free(got);
	got = run_script("require \"regex\"; if header :regex \"Subject\" "
			 "\"((a{1,100}){1,100}){1,100}\" { discard; }",
			 msg.data, FROM, TO, false);
	assert_non_null(strstr(got, "COMPILE"));
	assert_non_null(strstr(got, "expression too large"));
	free(got);
	got = run_script("if header :matches \"Subject\" \"*a*a*a*a*a*a*a*a*a*b\" { discard; }",
			 msg.data, FROM, TO, false);
	assert_string_equal(got, "keep");
	free(got);
	buf_release(&msg);
}

static void test_corrupt_program(void **state)
{
	const char *s = "if header :contains \"subject\" \"x\" { discard; }";
	uint8_t *prog;
	size_t len;
	char *err;
	struct sieve_env env = { .msg = MSG1, .msg_len = strlen(MSG1), .env_from = FROM };
	struct sieve_result r;

	assert_int_equal(sieve_compile(s, strlen(s), NULL, &prog, &len, &err), 0);
	for (size_t i = 10; i < len; i++) {
		uint8_t save = prog[i];

		prog[i] ^= 0x5a;
		sieve_run(prog, len, &env, NULL, &r);
		assert_true(r.nact >= 1);
		sieve_result_clear(&r);
		prog[i] = save;
	}
	assert_false(sieve_program_valid(prog, len - 1));
	free(prog);
}

/* RFC 3834 2 / RFC 5230 4.5: the senders and header fields vacation never answers */
static void test_vacation_refusals(void **state)
{
	static const char script[] = "require \"vacation\"; vacation \"away\";";
	static const struct {
		const char *from, *field;
		bool answered;
	} vc[] = {
		{ "person@example.org", "", true },
		{ "MAILER-DAEMON@example.org", "", false },
		{ "mailer-daemon@example.org", "", false },
		{ "owner-devel@lists.example.org", "", false },
		{ "devel-request@lists.example.org", "", false },
		{ "request@example.org", "", true }, /* "-request" is a suffix */
		{ "owner@example.org", "", true },   /* "owner-" a prefix */
		{ "person@example.org", "Precedence: bulk\r\n", false },
		{ "person@example.org", "Precedence: list\r\n", false },
		{ "person@example.org", "Precedence: Junk \r\n", false },
		{ "person@example.org", "Precedence: first-class\r\n", true },
		/* RFC 5322 CFWS around the word: comments (nested, quoted-pair), folds */
		{ "person@example.org", "Precedence: bulk (comment)\r\n", false },
		{ "person@example.org", "Precedence: (a (nested) one) LIST\r\n", false },
		{ "person@example.org", "Precedence:(x)junk(y)\r\n", false },
		{ "person@example.org", "Precedence: bUlK (with \\) inside)\r\n", false },
		{ "person@example.org", "Precedence:\r\n\tbulk\r\n (folded comment)\r\n", false },
		{ "person@example.org", "Precedence: (list) first-class\r\n", true },
		{ "person@example.org", "Precedence: (bulk)\r\n", true },
		{ "person@example.org", "Precedence: bulky (x)\r\n", true },
		{ "person@example.org", "Auto-Submitted: no\r\n", true },
		{ "person@example.org", "Auto-Submitted: auto-generated\r\n", false },
		{ "person@example.org", "List-Unsubscribe: <mailto:u@example.org>\r\n", false },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(vc) / sizeof(vc[0]); i++) {
		char *msg = xasprintf("From: %s\r\nTo: " TO "\r\nSubject: hi\r\n%s\r\nbody\r\n",
				      vc[i].from, vc[i].field);
		char *got = run_script(script, msg, vc[i].from, TO, false);
		char *want = vc[i].answered ? xasprintf("vacation:%s keep", vc[i].from)
					    : xstrdup("keep");

		if (strcmp(got, want) != 0)
			fail_msg("vacation from %s with \"%s\": \"%s\", wanted \"%s\"", vc[i].from,
				 vc[i].field, got, want);
		free(want);
		free(got);
		free(msg);
	}
}

static void assert_canonical(const char *in, size_t len, const char *want)
{
	struct buf out;

	sv_ucasemap(in, len, &out, NULL);
	if (out.len != strlen(want) || memcmp(buf_cstr(&out), want, out.len) != 0)
		fail_msg("canonical form of \"%.*s\": \"%s\", wanted \"%s\"", (int)len, in,
			 buf_cstr(&out), want);
	buf_release(&out);
}

/* RFC 5051's canonical form: titlecase (simple mapping), then NFKD */
static void test_unicode_casemap(void **state)
{
	(void)state;
	assert_canonical("abc XYZ 09", 10, "ABC XYZ 09");
	assert_canonical("\xc7\x86", 2, "Dz\xcc\x8c");    /* dz with caron: its titlecase Dz */
	assert_canonical("\xc3\x9f", 2, "\xc3\x9f");      /* sharp s: no simple titlecase */
	assert_canonical("\xef\xac\x81", 3, "fi");        /* the fi ligature: NFKD only */
	assert_canonical("\xcf\x82", 2, "\xce\xa3");      /* final sigma: capital sigma */
	assert_canonical("\xc3\xa9", 2, "E\xcc\x81");     /* e acute: E + combining acute */
	assert_canonical("\xe2\x84\xab", 3, "A\xcc\x8a"); /* the Angstrom sign */
	assert_canonical("\xed\x95\x9c", 3, "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab"); /* Hangul */
	assert_canonical("\xe3\x8d\xbf", 3, "\xe6\xa0\xaa\xe5\xbc\x8f\xe4\xbc\x9a\xe7\xa4\xbe");
	/* combining marks in canonical order (dot below 220 before dot above 230) */
	assert_canonical("a\xcc\x87\xcc\xa3", 5, "A\xcc\xa3\xcc\x87");
	/* bytes that are not UTF-8 stay as they are: a lone continuation byte, an overlong
	   NUL, a surrogate, a cut sequence */
	assert_canonical("\x80x", 2, "\x80X");
	assert_canonical("\xc0\x80", 2, "\xc0\x80");
	assert_canonical("\xed\xa0\x80", 3, "\xed\xa0\x80");
	assert_canonical("a\xe2\x84", 3, "A\xe2\x84");
	assert_int_equal(sv_ucmp("\xff", 1, "\xfe", 1), 1);
	assert_int_equal(sv_ucmp("stra\xc3\x9f"
				 "e",
				 7,
				 "STRA\xc3\x9f"
				 "E",
				 7),
			 0);
	assert_int_equal(sv_ucmp("a", 1, "B", 1), -1);
	assert_true(sv_ucontains("Gr\xc3\xbc\xc3\x9f"
				 "e",
				 7, "U\xcc\x88", 3));
	assert_false(sv_ucontains("Gruss", 5, "\xc3\xbc", 2));
	/* a long run of combining marks is reordered in linear time (a counting sort) */
	size_t n = 200000;
	char *big = xmalloc(1 + 2 * n);
	big[0] = 'a';
	for (size_t i = 0; i < n; i++)
		memcpy(big + 1 + 2 * i, i % 2 ? "\xcc\x87" : "\xcc\xa3", 2);
	struct buf out;
	sv_ucasemap(big, 1 + 2 * n, &out, NULL);
	assert_int_equal(out.len, 1 + 2 * n);
	assert_memory_equal(out.data + 1, "\xcc\xa3", 2);
	assert_memory_equal(out.data + 1 + n - 2, "\xcc\xa3", 2); /* the last dot below */
	assert_memory_equal(out.data + 1 + n, "\xcc\x87", 2);     /* then the dots above */
	assert_memory_equal(out.data + 1 + 2 * n - 2, "\xcc\x87", 2);
	buf_release(&out);
	free(big);
}

int main(void)
{
	const char *inc = "require \"fileinto\"; if header :contains \"subject\" \"money\" "
			  "{ fileinto \"Junk\"; }";
	char *err;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_duplicate_seen),
		cmocka_unit_test(test_vacation_fields),
		cmocka_unit_test(test_editheader_output),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_byte_at_a_time),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_regex_bounded),
		cmocka_unit_test(test_corrupt_program),
		cmocka_unit_test(test_unicode_casemap),
		cmocka_unit_test(test_vacation_refusals),
	};
	int rc;

	if (sieve_compile(inc, strlen(inc), NULL, &inc_prog, &inc_len, &err) < 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(inc_prog);
	return rc;
}
