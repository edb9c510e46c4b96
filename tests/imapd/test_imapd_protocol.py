"""imapd end to end, one scripted session per command and FETCH item with the exact responses
expected (Raw client on the wire), plus imaplib for what a real client library does.

Usage: test_imapd_protocol.py IMAPD_BINARY DELIVER_BINARY"""
import imaplib
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imapd_harness import Imapd, Raw, PASSWORD  # noqa: E402
from messages import SIMPLE, NESTED  # noqa: E402

IMAPD = DELIVER = None
CAPS = "IMAP4rev1 LITERAL+ SASL-IR ID ENABLE IDLE NAMESPACE UNSELECT CHILDREN UIDPLUS MOVE"
SIMPLE_BS = ('("text" "plain" ("charset" "us-ascii") NIL NIL "7bit" 49 2 NIL NIL NIL NIL)')
NESTED_BS = (
    '((("text" "plain" ("charset" "utf-8") NIL NIL "7bit" 10 0 NIL NIL NIL NIL)'
    '("text" "html" ("charset" "utf-8") NIL NIL "7bit" 16 0 NIL NIL NIL NIL) "alternative" '
    '("boundary" "inner") NIL NIL NIL)("message" "rfc822" NIL NIL NIL "7bit" 60 '
    '(NIL "Inner" (("Carol" NIL "carol" "heron.test")) (("Carol" NIL "carol" "heron.test")) '
    '(("Carol" NIL "carol" "heron.test")) NIL NIL NIL NIL NIL) ("text" "plain" ("charset" '
    '"us-ascii") NIL NIL "7bit" 10 0 NIL NIL NIL NIL) 3 NIL NIL NIL NIL)("application" '
    '"octet-stream" ("name" "a.bin") NIL NIL "base64" 8 NIL ("attachment" ("filename" '
    '"a.bin")) NIL NIL) "mixed" ("boundary" "outer") NIL NIL NIL)')
NESTED_BODY = (
    '((("text" "plain" ("charset" "utf-8") NIL NIL "7bit" 10 0)("text" "html" ("charset" '
    '"utf-8") NIL NIL "7bit" 16 0) "alternative")("message" "rfc822" NIL NIL NIL "7bit" 60 '
    '(NIL "Inner" (("Carol" NIL "carol" "heron.test")) (("Carol" NIL "carol" "heron.test")) '
    '(("Carol" NIL "carol" "heron.test")) NIL NIL NIL NIL NIL) ("text" "plain" ("charset" '
    '"us-ascii") NIL NIL "7bit" 10 0) 3)("application" "octet-stream" ("name" "a.bin") NIL NIL '
    '"base64" 8) "mixed")')
SIMPLE_ENV = ('("Mon, 7 Feb 1994 21:52:25 -0800" "Lunch plans" (("Alice Example" NIL "alice" '
              '"heron.test")) (("Alice Example" NIL "alice" "heron.test")) (("Alice Example" NIL '
              '"alice" "heron.test")) ((NIL NIL "bob" "heron.test")) ((NIL NIL "carol" '
              '"heron.test")) NIL NIL "<m1@heron.test>")')


def literal(data):
    return "{%d}\r\n%s" % (len(data), data.decode())


class Base(unittest.TestCase):
    user = "alice"

    @classmethod
    def setUpClass(cls):
        cls.d = Imapd(IMAPD, deliver=DELIVER)
        cls.d.__enter__()
        cls.addClassCleanup(cls.d.__exit__, None, None, None)

    def raw(self, login=True):
        r = Raw(self.d.port)
        self.addCleanup(r.close)
        if login:
            out = r.cmd("L", 'LOGIN %s "%s"' % (self.user, PASSWORD))
            self.assertTrue(out[-1].startswith("L OK"), out)
        return r

    def append(self, r, msg, mailbox="INBOX", flags="", date='"07-Feb-1994 21:52:25 -0800"'):
        r.send(("A APPEND %s %s %s {%d+}\r\n" % (mailbox, flags, date, len(msg))).encode() +
               msg + b"\r\n")
        out = r.until_tag("A")
        self.assertTrue(out[-1].startswith("A OK [APPENDUID "), out)
        return int(out[-1].split()[4].rstrip("]"))


class TestAnyState(Base):
    def test_greeting_capability_noop_logout(self):
        r = self.raw(login=False)
        self.assertEqual(r.greeting, "* OK [CAPABILITY %s AUTH=PLAIN] Heron IMAP ready" % CAPS)
        self.assertEqual(r.cmd("a", "CAPABILITY"),
                         ["* CAPABILITY %s AUTH=PLAIN" % CAPS, "a OK Capability completed"])
        self.assertEqual(r.cmd("b", "NOOP"), ["b OK Completed"])
        self.assertEqual(r.cmd("c", 'ID ("name" "test")'),
                         ['* ID ("name" "Heron" "vendor" "Heron")', "c OK ID completed"])
        self.assertEqual(r.cmd("d", "LOGOUT"), ["* BYE Logging out", "d OK Logout completed"])

    def test_login(self):
        r = self.raw(login=False)
        self.assertEqual(r.cmd("a", "LOGIN alice wrong"),
                         ["a NO [AUTHENTICATIONFAILED] Authentication failed"])
        self.assertEqual(r.cmd("b", "SELECT INBOX"), ["b NO Log in first"])
        out = r.cmd("c", 'LOGIN alice "%s"' % PASSWORD)
        self.assertEqual(out, ["c OK [CAPABILITY %s APPENDLIMIT=52428800] Logged in" % CAPS])
        self.assertEqual(r.cmd("d", "LOGIN alice x"), ["d BAD Already logged in"])

    def test_login_literals(self):
        r = self.raw(login=False)
        r.send("a LOGIN {5}\r\n")
        self.assertEqual(r.line(), "+ Ready for literal data")
        r.send("alice {%d}\r\n" % len(PASSWORD))
        self.assertEqual(r.line(), "+ Ready for literal data")
        r.send(PASSWORD + "\r\n")
        self.assertTrue(r.until_tag("a")[-1].startswith("a OK"))

    def test_authenticate_plain(self):
        import base64
        tok = base64.b64encode(b"\0alice\0" + PASSWORD.encode()).decode()
        r = self.raw(login=False)
        self.assertTrue(r.cmd("a", "AUTHENTICATE PLAIN " + tok)[-1].startswith("a OK [CAP"))
        r = self.raw(login=False)
        r.send("b AUTHENTICATE PLAIN\r\n")
        self.assertEqual(r.line(), "+ ")
        r.send(tok + "\r\n")
        self.assertTrue(r.until_tag("b")[-1].startswith("b OK [CAP"))
        r = self.raw(login=False)
        bad = base64.b64encode(b"\0alice\0nope").decode()
        self.assertEqual(r.cmd("c", "AUTHENTICATE PLAIN " + bad),
                         ["c NO [AUTHENTICATIONFAILED] Authentication failed"])
        self.assertEqual(r.cmd("d", "AUTHENTICATE CRAM-MD5"),
                         ["d NO Unsupported authentication mechanism"])
        r.send("e AUTHENTICATE PLAIN\r\n")
        self.assertEqual(r.line(), "+ ")
        r.send("*\r\n")
        self.assertEqual(r.until_tag("e"), ["e BAD Authentication cancelled"])

    def test_imaplib_login(self):
        c = self.d.login("bob")
        self.assertEqual(c.select("INBOX")[0], "OK")
        c.logout()


class TestMailboxes(Base):
    user = "bob"

    def test_create_list_delete_rename(self):
        r = self.raw()
        self.assertEqual(r.cmd("a", "CREATE Work/Projects/Heron"), ["a OK CREATE completed"])
        self.assertEqual(r.cmd("b", 'CREATE "Entw&APw-rfe"'), ["b OK CREATE completed"])
        self.assertEqual(r.cmd("c", "CREATE inbox"),
                         ["c NO [ALREADYEXISTS] INBOX exists always"])
        self.assertEqual(r.cmd("d", "CREATE Work"),
                         ["d NO [ALREADYEXISTS] CREATE: already exists"])
        self.assertEqual(r.cmd("e", 'LIST "" *'), [
            '* LIST (\\HasNoChildren) "/" Entw&APw-rfe',
            '* LIST (\\HasNoChildren) "/" INBOX',
            '* LIST (\\HasChildren) "/" Work',
            '* LIST (\\HasChildren) "/" Work/Projects',
            '* LIST (\\HasNoChildren) "/" Work/Projects/Heron',
            "e OK List completed"])
        self.assertEqual(r.cmd("f", 'LIST "" %'), [
            '* LIST (\\HasNoChildren) "/" Entw&APw-rfe',
            '* LIST (\\HasNoChildren) "/" INBOX',
            '* LIST (\\HasChildren) "/" Work',
            "f OK List completed"])
        self.assertEqual(r.cmd("g", 'LIST Work/ %'), [
            '* LIST (\\HasChildren) "/" Work/Projects', "g OK List completed"])
        self.assertEqual(r.cmd("h", 'LIST "" ""'),
                         ['* LIST (\\Noselect) "/" ""', "h OK List completed"])
        self.assertEqual(r.cmd("i", "DELETE Work"), ["i OK DELETE completed"])
        self.assertEqual(r.cmd("j", 'LIST "" Work'),
                         ['* LIST (\\Noselect \\HasChildren) "/" Work', "j OK List completed"])
        self.assertEqual(r.cmd("k", "SELECT Work")[-1][:4], "k NO")
        self.assertEqual(r.cmd("l", "RENAME Work/Projects Archive/2024"),
                         ["l OK RENAME completed"])
        self.assertEqual(r.cmd("m", 'LIST "" Archive/*'), [
            '* LIST (\\HasChildren) "/" Archive/2024',
            '* LIST (\\HasNoChildren) "/" Archive/2024/Heron', "m OK List completed"])
        self.assertEqual(r.cmd("n", "DELETE INBOX"),
                         ["n NO [CANNOT] INBOX cannot be deleted"])
        self.assertEqual(r.cmd("o", "DELETE Nope")[0][:5], "o NO ")

    def test_subscribe_lsub(self):
        r = self.raw()
        r.cmd("a", "CREATE Lists")
        self.assertEqual(r.cmd("b", "SUBSCRIBE Lists"), ["b OK SUBSCRIBE completed"])
        self.assertEqual(r.cmd("c", "SUBSCRIBE Gone"), ["c OK SUBSCRIBE completed"])
        self.assertEqual(r.cmd("d", 'LSUB "" *'), [
            '* LSUB (\\Noselect) "/" Gone', '* LSUB () "/" INBOX', '* LSUB () "/" Lists',
            "d OK Lsub completed"])
        self.assertEqual(r.cmd("e", "UNSUBSCRIBE Gone"), ["e OK UNSUBSCRIBE completed"])
        self.assertEqual(r.cmd("f", 'LSUB "" *'), ['* LSUB () "/" INBOX', '* LSUB () "/" Lists',
                                                   "f OK Lsub completed"])

    def test_bad_names(self):
        r = self.raw()
        for name, why in [('""', "Empty mailbox name"),
                          ('"a//b"', "Empty level in mailbox name"),
                          ('"/abs"', "Empty level in mailbox name"),
                          ('"caf\xc3\xa9"'.encode("latin-1").decode("utf-8"),
                           "Mailbox name is not valid modified UTF-7"),
                          ('"&AGE-"', "Mailbox name is not valid modified UTF-7"),
                          ('"a&Jjo"', "Mailbox name is not valid modified UTF-7"),
                          ("a*b", "Wildcards are not allowed in mailbox names"),
                          ('"../etc"', None)]:
            out = r.cmd("x", "CREATE " + name)
            if why is None:
                self.assertEqual(out, ["x OK CREATE completed"])  # a name, never a path
            else:
                self.assertEqual(out, ["x NO " + why], name)
        self.assertEqual(r.cmd("y", "NOOP"), ["y OK Completed"])
        self.assertEqual(r.cmd("z", 'DELETE "../etc"'), ["z OK DELETE completed"])
        self.assertEqual(r.cmd("z", 'DELETE ".."'), ["z OK DELETE completed"])

    def test_status(self):
        r = self.raw()
        r.cmd("a", "CREATE Stat")
        self.append(r, SIMPLE, "Stat", "(\\Seen)")
        self.append(r, NESTED, "Stat")
        out = r.cmd("b", "STATUS Stat (MESSAGES RECENT UNSEEN UIDNEXT)")
        self.assertEqual(out, ["* STATUS Stat (MESSAGES 2 RECENT 2 UNSEEN 1 UIDNEXT 3)",
                               "b OK STATUS completed"])
        self.assertEqual(r.cmd("c", "STATUS Stat (BOGUS)"), ["c BAD Unknown STATUS item"])
        self.assertEqual(r.cmd("d", "STATUS Nope (MESSAGES)")[0][:5], "d NO ")

    def test_namespace_enable(self):
        r = self.raw()
        self.assertEqual(r.cmd("a", "NAMESPACE"),
                         ['* NAMESPACE (("" "/")) NIL NIL', "a OK Namespace completed"])
        self.assertEqual(r.cmd("b", "ENABLE FOO"), ["* ENABLED", "b OK Enabled"])


class TestSelected(Base):
    """Mailbox "Sel" of alice: SIMPLE (uid 1) and NESTED (uid 2)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()

    def setUp(self):
        self.r = self.raw()
        name = "Sel%s" % self._testMethodName
        self.box = name
        self.r.cmd("c", "CREATE " + name)
        self.append(self.r, SIMPLE, name)
        self.append(self.r, NESTED, name)

    def select(self, examine=False):
        return self.r.cmd("s", ("EXAMINE " if examine else "SELECT ") + self.box)

    def test_select_examine(self):
        out = self.select()
        uidv = out[5].split()[3].rstrip("]")
        self.assertEqual(out, [
            "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)",
            "* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)] Flags "
            "permitted",
            "* 2 EXISTS", "* 2 RECENT", "* OK [UNSEEN 1] First unseen",
            "* OK [UIDVALIDITY %s] UIDs valid" % uidv, "* OK [UIDNEXT 3] Predicted next UID",
            "s OK [READ-WRITE] SELECT completed"])
        out = self.select(examine=True)
        self.assertEqual(out[1], "* OK [PERMANENTFLAGS ()] Read-only mailbox")
        self.assertEqual(out[3], "* 0 RECENT")  # this session's SELECT took them
        self.assertEqual(out[-1], "s OK [READ-ONLY] EXAMINE completed")
        self.assertEqual(self.r.cmd("t", "STORE 1 +FLAGS (\\Seen)"),
                         ["t NO [READ-ONLY] Mailbox is read-only"])

    def test_fetch_items(self):
        self.select()
        r = self.r
        self.assertEqual(r.cmd("a", "FETCH 1 (FLAGS UID RFC822.SIZE INTERNALDATE)"), [
            '* 1 FETCH (FLAGS (\\Recent) UID 1 RFC822.SIZE 237 INTERNALDATE '
            '"08-Feb-1994 05:52:25 +0000")', "a OK Fetch completed"])
        self.assertEqual(r.cmd("b", "FETCH 1 ENVELOPE"),
                         ["* 1 FETCH (ENVELOPE %s)" % SIMPLE_ENV, "b OK Fetch completed"])
        self.assertEqual(r.cmd("c", "FETCH 1 BODYSTRUCTURE"),
                         ["* 1 FETCH (BODYSTRUCTURE %s)" % SIMPLE_BS, "c OK Fetch completed"])
        self.assertEqual(r.cmd("d", "FETCH 2 BODYSTRUCTURE"),
                         ["* 2 FETCH (BODYSTRUCTURE %s)" % NESTED_BS, "d OK Fetch completed"])
        self.assertEqual(r.cmd("e", "FETCH 2 BODY"),
                         ["* 2 FETCH (BODY %s)" % NESTED_BODY, "e OK Fetch completed"])
        self.assertEqual(r.cmd("f", "FETCH 1 RFC822.HEADER"), [
            "* 1 FETCH (RFC822.HEADER " + literal(SIMPLE[:188]) + ")", "f OK Fetch completed"])
        self.assertEqual(r.cmd("g", "FETCH 1 (BODY.PEEK[HEADER.FIELDS (From Subject)] "
                                    "BODY.PEEK[HEADER.FIELDS.NOT (From To Cc Subject Date)])"), [
            "* 1 FETCH (BODY[HEADER.FIELDS (From Subject)] {64}\r\nFrom: Alice Example "
            "<alice@heron.test>\r\nSubject: Lunch plans\r\n\r\n BODY[HEADER.FIELDS.NOT (From To "
            "Cc Subject Date)] {46}\r\nMessage-ID: <m1@heron.test>\r\nX-Note: first\r\n\r\n)",
            "g OK Fetch completed"])
        self.assertEqual(r.cmd("h", "FETCH 1 (BODY.PEEK[TEXT]<5.10> BODY.PEEK[]<230.100>)"), [
            '* 1 FETCH (BODY[TEXT]<5> {10}\r\n we meet a BODY[]<230> {7}\r\nport.\r\n)',
            "h OK Fetch completed"])
        self.assertEqual(r.cmd("i", "FETCH 1 (BODY.PEEK[HEADER]<500.1>)"),
                         ['* 1 FETCH (BODY[HEADER]<500> "")', "i OK Fetch completed"])
        self.assertEqual(r.cmd("j", "FETCH 1 FLAGS"),
                         ["* 1 FETCH (FLAGS (\\Recent))", "j OK Fetch completed"])

    def test_fetch_parts(self):
        self.select()
        out = self.r.cmd("a", "FETCH 2 (BODY.PEEK[1.1] BODY.PEEK[1.2.MIME] BODY.PEEK[2] "
                              "BODY.PEEK[2.HEADER] BODY.PEEK[2.TEXT] BODY.PEEK[3] BODY.PEEK[9] "
                              "BODY.PEEK[2.HEADER.FIELDS (Subject)] BODY.PEEK[3.MIME]<0.12>)")
        self.assertEqual(out, [
            "* 2 FETCH (BODY[1.1] {10}\r\nplain text BODY[1.2.MIME] {42}\r\nContent-Type: "
            "text/html; charset=utf-8\r\n\r\n BODY[2] {60}\r\nFrom: Carol <carol@heron.test>\r\n"
            "Subject: Inner\r\n\r\ninner body BODY[2.HEADER] {50}\r\nFrom: Carol "
            "<carol@heron.test>\r\nSubject: Inner\r\n\r\n BODY[2.TEXT] {10}\r\ninner body "
            "BODY[3] {8}\r\nAAECAw== BODY[9] NIL BODY[2.HEADER.FIELDS (Subject)] {18}\r\n"
            "Subject: Inner\r\n\r\n BODY[3.MIME]<0> {12}\r\nContent-Type)",
            "a OK Fetch completed"])

    def test_fetch_sets_seen(self):
        self.select()
        r = self.r
        out = r.cmd("a", "FETCH 1 BODY[TEXT]")
        self.assertEqual(out, ["* 1 FETCH (BODY[TEXT] " + literal(SIMPLE[188:]) +
                               " FLAGS (\\Seen \\Recent))", "a OK Fetch completed"])
        out = r.cmd("b", "FETCH 2 RFC822")
        self.assertEqual(out, ["* 2 FETCH (RFC822 " + literal(NESTED) +
                               " FLAGS (\\Seen \\Recent))", "b OK Fetch completed"])
        self.assertEqual(r.cmd("c", "FETCH 1:* (FLAGS)"), [
            "* 1 FETCH (FLAGS (\\Seen \\Recent))", "* 2 FETCH (FLAGS (\\Seen \\Recent))",
            "c OK Fetch completed"])

    def test_fetch_macros_and_uid(self):
        self.select()
        r = self.r
        out = r.cmd("a", "FETCH 1 FAST")
        self.assertEqual(out, ['* 1 FETCH (FLAGS (\\Recent) INTERNALDATE "08-Feb-1994 05:52:25 '
                               '+0000" RFC822.SIZE 237)', "a OK Fetch completed"])
        out = r.cmd("b", "FETCH 1 ALL")
        self.assertTrue(out[0].endswith("ENVELOPE %s)" % SIMPLE_ENV), out)
        out = r.cmd("c", "FETCH 1 FULL")
        self.assertTrue(out[0].endswith("BODY %s)" % SIMPLE_BS[:-17] + ")"), out)
        self.assertEqual(r.cmd("d", "UID FETCH 2:* RFC822.SIZE"),
                         ["* 2 FETCH (UID 2 RFC822.SIZE 670)", "d OK Fetch completed"])
        self.assertEqual(r.cmd("e", "UID FETCH 9:* FLAGS"),
                         ["* 2 FETCH (UID 2 FLAGS (\\Recent))", "e OK Fetch completed"])
        self.assertEqual(r.cmd("f", "UID FETCH 5:7 FLAGS"), ["f OK Fetch completed"])
        self.assertEqual(r.cmd("g", "FETCH 2:1 UID"), ["* 1 FETCH (UID 1)", "* 2 FETCH (UID 2)",
                                                       "g OK Fetch completed"])

    def test_fetch_errors(self):
        self.select()
        r = self.r
        self.assertEqual(r.cmd("a", "FETCH 3 FLAGS"), ["a BAD Invalid sequence number"])
        self.assertEqual(r.cmd("b", "FETCH 0 FLAGS"), ["b BAD Invalid sequence set"])
        self.assertEqual(r.cmd("c", "FETCH 1,,2 FLAGS"), ["c BAD Invalid sequence set"])
        self.assertEqual(r.cmd("d", "FETCH 1 BOGUS"), ["d BAD Invalid FETCH item"])
        self.assertEqual(r.cmd("e", "FETCH 1 BODY[0]"), ["e BAD Invalid FETCH item"])
        self.assertEqual(r.cmd("f", "FETCH 1 BODY[]<1.0>"), ["f BAD Invalid FETCH item"])
        self.assertEqual(r.cmd("g", "FETCH 1"), ["g BAD Expected: FETCH sequence-set items"])
        self.assertEqual(r.cmd("h", "NOOP"), ["h OK Completed"])

    def test_store(self):
        self.select()
        r = self.r
        # a new keyword is announced (FLAGS, PERMANENTFLAGS) before a FETCH shows it
        self.assertEqual(r.cmd("a", "STORE 1 +FLAGS (\\Flagged $Work)"), [
            "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Work)",
            "* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Work \\*)] "
            "Flags permitted",
            "* 1 FETCH (FLAGS (\\Flagged \\Recent $Work))", "a OK STORE completed"])
        self.assertEqual(r.cmd("a2", "STORE 1 -FLAGS.SILENT (\\Flagged $Work)"),
                         ["a2 OK STORE completed"])
        self.assertEqual(r.cmd("b", "STORE 1:2 FLAGS.SILENT (\\Seen \\Answered)"),
                         ["b OK STORE completed"])
        self.assertEqual(r.cmd("c", "UID STORE 2 -FLAGS (\\Answered)"),
                         ["* 2 FETCH (UID 2 FLAGS (\\Seen \\Recent))", "c OK STORE completed"])
        self.assertEqual(r.cmd("d", "STORE 1 +FLAGS (kw1 kw2)")[-2:], [
            "* 1 FETCH (FLAGS (\\Answered \\Seen \\Recent kw1 kw2))", "d OK STORE completed"])
        self.assertEqual(r.cmd("d2", "NOOP"), ["d2 OK Completed"])
        self.assertEqual(r.cmd("e", "STORE 1 -FLAGS kw1"), [
            "* 1 FETCH (FLAGS (\\Answered \\Seen \\Recent kw2))", "e OK STORE completed"])
        self.assertEqual(r.cmd("f", "STORE 1 +FLAGS (\\Recent)"),
                         ["f BAD \\Recent cannot be changed"])
        self.assertEqual(r.cmd("g", "STORE 1 +FLAGS (\\Bogus)"), ["g BAD Unknown system flag"])
        self.assertEqual(r.cmd("h", "STORE 1 FROBS (x)"),
                         ["h BAD Expected FLAGS, +FLAGS or -FLAGS"])
        out = r.cmd("i", "FETCH 1 FLAGS")
        self.assertEqual(out, ["* 1 FETCH (FLAGS (\\Answered \\Seen \\Recent kw2))",
                               "i OK Fetch completed"])

    def test_search(self):
        self.select()
        r = self.r
        r.cmd("a", "STORE 2 +FLAGS.SILENT (\\Flagged)")
        cases = [
            ("ALL", "1 2"), ("FLAGGED", "2"), ("UNFLAGGED", "1"), ("SUBJECT lunch", "1"),
            ("FROM bob", "2"), ("TO bob@heron", "1"), ("CC carol", "1"), ("BCC x", ""),
            ("HEADER X-Note first", "1"), ("HEADER Message-ID \"\"", "1"),
            ("BODY zebra", "1"), ("BODY \"html text\"", "2"), ("TEXT lunch", "1"),
            ("TEXT \"inner body\"", "2"), ("LARGER 300", "2"), ("SMALLER 300", "1"),
            ("SENTON 7-Feb-1994", "1"), ("SENTBEFORE 8-Feb-1994", "1"),
            ("SENTSINCE 8-Feb-1994", "2"), ("ON 8-Feb-1994", "1 2"),
            ("BEFORE 8-Feb-1994", ""), ("SINCE 1-Jan-2000", ""), ("RECENT", "1 2"),
            ("NEW", "1 2"), ("OLD", ""), ("SEEN", ""), ("UNSEEN", "1 2"), ("2", "2"),
            ("1:*", "1 2"), ("UID 2", "2"), ("NOT FLAGGED", "1"), ("OR FLAGGED SMALLER 300",
                                                                 "1 2"),
            ("(FLAGGED LARGER 10)", "2"), ("NOT (FLAGGED)", "1"), ("KEYWORD nope", ""),
            ("UNKEYWORD nope", "1 2"), ("CHARSET UTF-8 SUBJECT Report", "2"),
            ("DELETED", ""), ("UNDELETED", "1 2"), ("DRAFT", ""), ("UNDRAFT", "1 2"),
            ("ANSWERED", ""), ("UNANSWERED", "1 2"),
        ]
        for key, want in cases:
            out = r.cmd("s", "SEARCH " + key)
            self.assertEqual(out, ["* SEARCH" + (" " + want if want else ""),
                                   "s OK SEARCH completed"], key)
        self.assertEqual(r.cmd("u", "UID SEARCH FLAGGED"),
                         ["* SEARCH 2", "u OK SEARCH completed"])
        self.assertEqual(r.cmd("v", "SEARCH CHARSET KOI8-R ALL"),
                         ["v NO [BADCHARSET (UTF-8 US-ASCII)] Unsupported charset"])
        self.assertEqual(r.cmd("w", "SEARCH BOGUS"), ["w BAD Unknown search key"])
        self.assertEqual(r.cmd("x", "SEARCH SINCE 32-Foo-1"), ["x BAD Invalid search date"])
        self.assertEqual(r.cmd("y", "SEARCH OR FLAGGED"), ["y BAD Missing search key"])
        r.send("z SEARCH SUBJECT {5}\r\n")
        self.assertEqual(r.line(), "+ Ready for literal data")
        r.send("plans\r\n")
        self.assertEqual(r.until_tag("z"), ["* SEARCH 1", "z OK SEARCH completed"])

    def test_copy_move_expunge(self):
        self.select()
        r = self.r
        r.cmd("a", "CREATE Dest%s" % self.box)
        dest = "Dest%s" % self.box
        out = r.cmd("b", "COPY 1:2 " + dest)
        self.assertRegex(out[-1], r"^b OK \[COPYUID \d+ 1,2 1,2\] COPY completed$")
        self.assertEqual(r.cmd("c", "COPY 1 Nowhere"), ["c NO [TRYCREATE] No such mailbox"])
        out = r.cmd("d", "UID MOVE 1 " + dest)
        self.assertRegex(out[0], r"^\* OK \[COPYUID \d+ 1 3\] Moved$")
        self.assertEqual(out[1:], ["* 1 EXPUNGE", "d OK MOVE completed"])
        self.assertEqual(r.cmd("e", "FETCH 1 UID"), ["* 1 FETCH (UID 2)", "e OK Fetch completed"])
        self.append(r, SIMPLE, self.box)  # uid 3
        r.cmd("f", "NOOP")
        self.assertEqual(r.cmd("g", "STORE 1:2 +FLAGS.SILENT (\\Deleted)"),
                         ["g OK STORE completed"])
        self.assertEqual(r.cmd("h", "UID EXPUNGE 3"), ["* 2 EXPUNGE", "h OK EXPUNGE completed"])
        self.assertEqual(r.cmd("i", "EXPUNGE"), ["* 1 EXPUNGE", "i OK EXPUNGE completed"])
        self.assertEqual(r.cmd("j", "STATUS %s (MESSAGES)" % dest),
                         ["* STATUS %s (MESSAGES 3)" % dest, "j OK STATUS completed"])
        self.assertEqual(r.cmd("k", "FETCH 1 UID"), ["k BAD No messages"])

    def test_close_unselect(self):
        self.select()
        r = self.r
        r.cmd("a", "STORE 1 +FLAGS.SILENT (\\Deleted)")
        self.assertEqual(r.cmd("b", "UNSELECT"), ["b OK UNSELECT completed"])
        self.assertEqual(r.cmd("c", "FETCH 1 UID"), ["c BAD No mailbox selected"])
        self.select()
        self.assertEqual(r.cmd("d", "CLOSE"), ["d OK CLOSE completed"])
        out = r.cmd("e", "STATUS %s (MESSAGES)" % self.box)
        self.assertEqual(out[0], "* STATUS %s (MESSAGES 1)" % self.box)
        self.assertEqual(r.cmd("f", "CHECK"), ["f BAD No mailbox selected"])

    def test_append_variants(self):
        r = self.r
        r.send("a APPEND %s {%d}\r\n" % (self.box, len(SIMPLE)))
        self.assertEqual(r.line(), "+ Ready for literal data")
        r.send(SIMPLE + b"\r\n")
        self.assertRegex(r.until_tag("a")[0], r"^a OK \[APPENDUID \d+ 3\] APPEND completed$")
        self.assertEqual(r.cmd("b", "APPEND Nowhere {1+}\r\nx"),
                         ["b NO [TRYCREATE] No such mailbox"])
        self.assertEqual(r.cmd("c", 'APPEND %s "31-Foo-2020 00:00:00 +0000" {1+}\r\nx' %
                               self.box), ["c BAD Invalid date-time"])
        r.send("d APPEND %s {999999999999}\r\n" % self.box)
        self.assertEqual(r.line(), "d NO [TOOBIG] Message too large")
        self.assertEqual(r.cmd("e", "NOOP"), ["e OK Completed"])
        self.assertRegex(r.cmd("f", "APPEND %s (\\Flagged kw) {1+}\r\nx" % self.box)[0],
                         r"^f OK \[APPENDUID \d+ 4\] APPEND completed$")
        self.select()
        self.assertEqual(self.r.cmd("g", "FETCH 4 (FLAGS RFC822)"), [
            "* 4 FETCH (FLAGS (\\Flagged \\Seen \\Recent kw) RFC822 {1}\r\nx)",
            "g OK Fetch completed"])

    def test_pipelining(self):
        r = self.r
        r.send("p1 SELECT %s\r\np2 FETCH 1 UID\r\np3 FETCH 2 UID\r\np4 NOOP\r\n" % self.box)
        self.assertEqual(r.until_tag("p1")[-1], "p1 OK [READ-WRITE] SELECT completed")
        self.assertEqual(r.until_tag("p2"), ["* 1 FETCH (UID 1)", "p2 OK Fetch completed"])
        self.assertEqual(r.until_tag("p3"), ["* 2 FETCH (UID 2)", "p3 OK Fetch completed"])
        self.assertEqual(r.until_tag("p4"), ["p4 OK Completed"])


def main():
    global IMAPD, DELIVER
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])


if __name__ == "__main__":
    main()
