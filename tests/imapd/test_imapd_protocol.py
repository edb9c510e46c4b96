"""imapd end to end, one scripted session per command and FETCH item with the exact responses
expected (Raw client on the wire), plus imaplib for what a real client library does.

Usage: test_imapd_protocol.py IMAPD_BINARY DELIVER_BINARY"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, ImapRaw as Raw  # noqa: E402
from heronlib import after_test, run_suite, without_objectid  # noqa: E402
from heronlib import assert_eq, assert_gt, assert_in, assert_re  # noqa: E402
from messages import SIMPLE, NESTED  # noqa: E402

IMAPD = None
D = None  # the imapd the running tests talk to
R = BOX = None  # in_new_mailbox: the test's session and mailbox
CAPS = ("IMAP4rev1 IMAP4rev2 LITERAL+ SASL-IR LOGIN-REFERRALS ID ENABLE IDLE NAMESPACE UNSELECT CHILDREN UIDPLUS MOVE "
        "SPECIAL-USE CREATE-SPECIAL-USE STATUS=SIZE ESEARCH CONDSTORE QRESYNC WITHIN LIST-EXTENDED "
        "LIST-STATUS SEARCHRES QUOTA "
        "QUOTA=RES-STORAGE QUOTA=RES-MESSAGE BINARY MULTIAPPEND CATENATE UTF8=ACCEPT SORT SORT=DISPLAY ESORT CONTEXT=SEARCH CONTEXT=SORT "
        "THREAD=ORDEREDSUBJECT THREAD=REFERENCES THREAD=REFS OBJECTID PREVIEW PARTIAL SAVEDATE REPLACE ACL RIGHTS=texk METADATA METADATA-SERVER LIST-METADATA"
        " NOTIFY"
        " URLAUTH")
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


def test_greeting_capability_noop_logout():
    r = D.raw(login=False)
    assert_eq(r.greeting, "* OK [CAPABILITY %s AUTH=PLAIN] Heron IMAP ready"
              % CAPS)
    assert_eq(r.cmd("a", "CAPABILITY"),
              ["* CAPABILITY %s AUTH=PLAIN" % CAPS,
               "a OK Capability completed"])
    assert_eq(r.cmd("b", "NOOP"), ["b OK Completed"])
    # the version is the one imapd -V prints (the build's release)
    v = subprocess.run([IMAPD, "-V"], capture_output=True, text=True, check=True)
    assert_re(v.stdout, r"^imapd \(Heron\) \d+\.\d+\.\d+ \(git \S+\)\n$")
    assert_eq(r.cmd("c", 'ID ("name" "test")'),
              ['* ID ("name" "Heron" "vendor" "Heron" "version" "%s")'
               % v.stdout.split()[2], "c OK ID completed"])
    assert_eq(r.cmd("d", "LOGOUT"), ["* BYE Logging out", "d OK Logout completed"])


def test_login():
    r = D.raw(login=False)
    assert_eq(r.cmd("a", "LOGIN alice wrong"),
              ["a NO [AUTHENTICATIONFAILED] Authentication failed"])
    assert_eq(r.cmd("b", "SELECT INBOX"), ["b NO Log in first"])
    out = r.cmd("c", 'LOGIN alice "%s"' % PASSWORD)
    assert_eq(out, ["c OK [CAPABILITY %s COMPRESS=DEFLATE UNAUTHENTICATE "
                    "APPENDLIMIT=52428800] Logged in" % CAPS])
    assert_eq(r.cmd("d", "LOGIN alice x"), ["d BAD Already logged in"])


def test_login_literals():
    r = D.raw(login=False)
    r.send("a LOGIN {5}\r\n")
    assert_eq(r.line(), "+ Ready for literal data")
    r.send("alice {%d}\r\n" % len(PASSWORD))
    assert_eq(r.line(), "+ Ready for literal data")
    r.send(PASSWORD + "\r\n")
    assert r.until_tag("a")[-1].startswith("a OK")


def test_authenticate_plain():
    import base64
    tok = base64.b64encode(b"\0alice\0" + PASSWORD.encode()).decode()
    r = D.raw(login=False)
    assert r.cmd("a", "AUTHENTICATE PLAIN " + tok)[-1].startswith("a OK [CAP")
    r = D.raw(login=False)
    r.send("b AUTHENTICATE PLAIN\r\n")
    assert_eq(r.line(), "+ ")
    r.send(tok + "\r\n")
    assert r.until_tag("b")[-1].startswith("b OK [CAP")
    r = D.raw(login=False)
    bad = base64.b64encode(b"\0alice\0nope").decode()
    assert_eq(r.cmd("c", "AUTHENTICATE PLAIN " + bad),
              ["c NO [AUTHENTICATIONFAILED] Authentication failed"])
    assert_eq(r.cmd("d", "AUTHENTICATE CRAM-MD5"),
              ["d NO Unsupported authentication mechanism"])
    r.send("e AUTHENTICATE PLAIN\r\n")
    assert_eq(r.line(), "+ ")
    r.send("*\r\n")
    assert_eq(r.until_tag("e"), ["e BAD Authentication cancelled"])


def test_imaplib_login():
    c = D.login("bob")
    assert_eq(c.select("INBOX")[0], "OK")
    c.logout()


def test_create_list_delete_rename():
    r = D.raw("bob")
    assert_eq(without_objectid(r.cmd("a", "CREATE Work/Projects/Heron")),
              ["a OK CREATE completed"])
    assert_eq(without_objectid(r.cmd("b", 'CREATE "Entw&APw-rfe"')),
              ["b OK CREATE completed"])
    assert_eq(r.cmd("c", "CREATE inbox"),
              ["c NO [ALREADYEXISTS] INBOX exists always"])
    assert_eq(r.cmd("d", "CREATE Work"),
              ["d NO [ALREADYEXISTS] CREATE: already exists"])
    assert_eq(r.cmd("e", 'LIST "" *'), [
        '* LIST (\\HasNoChildren) "/" Entw&APw-rfe',
        '* LIST (\\HasNoChildren) "/" INBOX',
        '* LIST (\\HasChildren) "/" Work',
        '* LIST (\\HasChildren) "/" Work/Projects',
        '* LIST (\\HasNoChildren) "/" Work/Projects/Heron',
        "e OK List completed"])
    assert_eq(r.cmd("f", 'LIST "" %'), [
        '* LIST (\\HasNoChildren) "/" Entw&APw-rfe',
        '* LIST (\\HasNoChildren) "/" INBOX',
        '* LIST (\\HasChildren) "/" Work',
        "f OK List completed"])
    assert_eq(r.cmd("g", 'LIST Work/ %'), [
        '* LIST (\\HasChildren) "/" Work/Projects', "g OK List completed"])
    assert_eq(r.cmd("h", 'LIST "" ""'),
              ['* LIST (\\Noselect) "/" ""', "h OK List completed"])
    assert_eq(r.cmd("i", "DELETE Work"), ["i OK DELETE completed"])
    assert_eq(r.cmd("j", 'LIST "" Work'),
              ['* LIST (\\Noselect \\HasChildren) "/" Work', "j OK List completed"])
    assert_eq(r.cmd("k", "SELECT Work")[-1][:4], "k NO")
    assert_eq(r.cmd("l", "RENAME Work/Projects Archive/2024"),
              ["l OK RENAME completed"])
    assert_eq(r.cmd("m", 'LIST "" Archive/*'), [
        '* LIST (\\HasChildren) "/" Archive/2024',
        '* LIST (\\HasNoChildren) "/" Archive/2024/Heron', "m OK List completed"])
    assert_eq(r.cmd("n", "DELETE INBOX"),
              ["n NO [CANNOT] INBOX cannot be deleted"])
    assert_eq(r.cmd("o", "DELETE Nope")[0][:5], "o NO ")


def test_subscribe_lsub():
    r = D.raw("bob")
    r.cmd("a", "CREATE Lists")
    assert_eq(r.cmd("b", "SUBSCRIBE Lists"), ["b OK SUBSCRIBE completed"])
    assert_eq(r.cmd("c", "SUBSCRIBE Gone"), ["c OK SUBSCRIBE completed"])
    assert_eq(r.cmd("d", 'LSUB "" *'), [
        '* LSUB (\\Noselect) "/" Gone', '* LSUB () "/" INBOX', '* LSUB () "/" Lists',
        "d OK Lsub completed"])
    assert_eq(r.cmd("e", "UNSUBSCRIBE Gone"), ["e OK UNSUBSCRIBE completed"])
    assert_eq(r.cmd("f", 'LSUB "" *'), ['* LSUB () "/" INBOX', '* LSUB () "/" Lists',
                                        "f OK Lsub completed"])


def test_list_extended_status():
    r = D.raw("bob")
    r.cmd("a", "CREATE LXa/child")
    r.cmd("b", "CREATE LXb (USE (\\Trash))")
    r.cmd("c", "SUBSCRIBE LXa/child")
    r.cmd("d", "SUBSCRIBE LXgone")
    r.append(SIMPLE, "LXb")
    assert_eq(r.cmd("e", 'LIST (SUBSCRIBED) "" LX*'), [
        '* LIST (\\HasNoChildren \\Subscribed) "/" LXa/child',
        '* LIST (\\NonExistent \\Subscribed) "/" LXgone', "e OK List completed"])
    assert_eq(r.cmd("f", 'LIST "" (LXa LXb) RETURN (SUBSCRIBED STATUS (MESSAGES '
                         'UNSEEN))'), [
        '* LIST (\\HasChildren) "/" LXa', "* STATUS LXa (MESSAGES 0 UNSEEN 0)",
        '* LIST (\\HasNoChildren \\Trash) "/" LXb', "* STATUS LXb (MESSAGES 1 UNSEEN 1)",
        "f OK List completed"])
    assert_eq(r.cmd("g", 'LIST (SPECIAL-USE) "" LX*'),
              ['* LIST (\\HasNoChildren \\Trash) "/" LXb', "g OK List completed"])
    assert_eq(r.cmd("g2", 'LIST (SUBSCRIBED RECURSIVEMATCH) "" LX%'), [
        '* LIST (\\NonExistent \\Subscribed) "/" LXgone',
        '* LIST (\\HasChildren) "/" LXa ("CHILDINFO" ("SUBSCRIBED"))', "g2 OK List completed"])
    assert_eq(r.cmd("g3", 'LIST "" LXa/% RETURN (SUBSCRIBED)'), [
        '* LIST (\\HasNoChildren \\Subscribed) "/" LXa/child', "g3 OK List completed"])
    assert_eq(r.cmd("h", 'LIST (RECURSIVEMATCH) "" *'),
              ["h BAD Invalid LIST selection options"])
    assert_eq(r.cmd("i", 'LIST "" * RETURN (BOGUS)'),
              ["i BAD Invalid LIST return options"])
    r.cmd("j", "UNSUBSCRIBE LXa/child")  # leaves LSUB of other tests as it was
    r.cmd("k", "UNSUBSCRIBE LXgone")


def test_bad_names():
    r = D.raw("bob")
    for name, why in [('""', "Empty mailbox name"),
                      ('"a//b"', "Empty level in mailbox name"),
                      ('"/abs"', "Empty level in mailbox name"),
                      ('"caf\xc3\xa9"'.encode("latin-1").decode("utf-8"),
                       "Mailbox name is not valid modified UTF-7"),
                      ('"&AGE-"', "Mailbox name is not valid modified UTF-7"),
                      ('"a&Jjo"', "Mailbox name is not valid modified UTF-7"),
                      ("a*b", "Wildcards are not allowed in mailbox names"),
                      ('"../etc"', None)]:
        out = without_objectid(r.cmd("x", "CREATE " + name))
        if why is None:
            assert_eq(out, ["x OK CREATE completed"])  # a name, never a path
        else:
            assert_eq(out, ["x NO " + why], name)
    assert_eq(r.cmd("y", "NOOP"), ["y OK Completed"])
    assert_eq(r.cmd("z", 'DELETE "../etc"'), ["z OK DELETE completed"])
    assert_eq(r.cmd("z", 'DELETE ".."'), ["z OK DELETE completed"])


def test_status():
    r = D.raw("bob")
    r.cmd("a", "CREATE Stat")
    r.append(SIMPLE, "Stat", "(\\Seen)")
    r.append(NESTED, "Stat")
    out = r.cmd("b", "STATUS Stat (MESSAGES RECENT UNSEEN UIDNEXT)")
    assert_eq(out, ["* STATUS Stat (MESSAGES 2 RECENT 2 UNSEEN 1 UIDNEXT 3)",
                    "b OK STATUS completed"])
    assert_eq(r.cmd("c", "STATUS Stat (BOGUS)"), ["c BAD Unknown STATUS item"])
    assert_eq(r.cmd("d", "STATUS Nope (MESSAGES)")[0][:5], "d NO ")


def test_quota():
    r = D.raw("bob")
    assert_eq(r.cmd("a", "GETQUOTAROOT INBOX"),
              ['* QUOTAROOT INBOX ""', '* QUOTA "" ()', "a OK GETQUOTAROOT completed"])
    assert_eq(r.cmd("b", 'GETQUOTA ""'),
              ['* QUOTA "" ()', "b OK GETQUOTA completed"])
    assert_eq(r.cmd("c", 'GETQUOTA "other"'),
              ["c NO [NONEXISTENT] No such quota root"])
    assert_eq(r.cmd("d", 'SETQUOTA "" (STORAGE 10)'),
              ["d NO [NOPERM] Quotas are set by the administrator"])
    # carol's directory entry carries a 1 MiB quota: the store enforces it
    c = Raw(D.port)
    after_test(c.close)
    c.cmd("L", 'LOGIN carol "%s"' % PASSWORD)
    c.append(SIMPLE)
    assert_eq(c.cmd("e", "GETQUOTAROOT INBOX"),
              ['* QUOTAROOT INBOX ""', '* QUOTA "" (STORAGE 1 1024)',
               "e OK GETQUOTAROOT completed"])
    big = b"Subject: big\r\n\r\n" + b"x" * (1100 * 1024) + b"\r\n"
    c.send(b"f APPEND INBOX {%d+}\r\n" % len(big) + big + b"\r\n")
    assert_eq(c.until_tag("f"), ["f NO [OVERQUOTA] APPEND: quota exceeded"])


def test_namespace_enable():
    r = D.raw("bob")
    assert_eq(r.cmd("a", "NAMESPACE"),
              ['* NAMESPACE (("" "/")) NIL NIL', "a OK Namespace completed"])
    assert_eq(r.cmd("b", "ENABLE FOO"), ["* ENABLED", "b OK Enabled"])
    assert_eq(r.cmd("c", "ENABLE CONDSTORE FOO"),
              ["* ENABLED CONDSTORE", "c OK Enabled"])
    assert_eq(r.cmd("d", "ENABLE CONDSTORE"), ["* ENABLED", "d OK Enabled"])


def test_special_use():
    r = D.raw("bob")
    assert_eq(without_objectid(r.cmd("a", "CREATE Sent (USE (\\Sent))")),
              ["a OK CREATE completed"])
    assert_eq(r.cmd("b", "CREATE Bin (USE (\\Bogus))"),
              ["b NO [USEATTR] Unknown special-use attribute"])
    assert_eq(r.cmd("c", 'LIST "" Sent'),
              ['* LIST (\\HasNoChildren \\Sent) "/" Sent', "c OK List completed"])
    r.append(SIMPLE, "Sent")
    assert_eq(r.cmd("d", "STATUS Sent (MESSAGES SIZE)"),
              ["* STATUS Sent (MESSAGES 1 SIZE 237)", "d OK STATUS completed"])


"""Mailbox "Sel" of alice: SIMPLE (uid 1) and NESTED (uid 2)."""


def in_new_mailbox(test):
    """test, run with R = alice's session and BOX = a mailbox of its own (Sel<test name>)
    holding SIMPLE (UID 1) and NESTED (UID 2)."""
    def run():
        global R, BOX
        R = D.raw()
        BOX = "Sel" + test.__name__
        R.cmd("c", "CREATE " + BOX)
        R.append(SIMPLE, BOX)
        R.append(NESTED, BOX)
        test()
    run.__name__ = test.__name__
    return run


def select(examine=False):
    return R.cmd("s", ("EXAMINE " if examine else "SELECT ") + BOX)


def test_select_examine():
    out = without_objectid(select())
    uidv = out[5].split()[3].rstrip("]")
    assert_eq(out, [
        "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)",
        "* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)] Flags "
        "permitted",
        "* 2 EXISTS", "* 2 RECENT", "* OK [UNSEEN 1] First unseen",
        "* OK [UIDVALIDITY %s] UIDs valid" % uidv, "* OK [UIDNEXT 3] Predicted next UID",
        "* OK [HIGHESTMODSEQ %s] Highest" % out[7].split()[3].rstrip("]"),
        "* OK [URLMECH INTERNAL] URLAUTH mechanisms",
        "s OK [READ-WRITE] SELECT completed"])
    out = select(examine=True)
    assert_eq(out[1], "* OK [PERMANENTFLAGS ()] Read-only mailbox")
    assert_eq(out[3], "* 0 RECENT")  # this session's SELECT took them
    assert_eq(out[-1], "s OK [READ-ONLY] EXAMINE completed")
    assert_eq(R.cmd("t", "STORE 1 +FLAGS (\\Seen)"),
              ["t NO [READ-ONLY] Mailbox is read-only"])


def test_fetch_items():
    select()
    r = R
    assert_eq(r.cmd("a", "FETCH 1 (FLAGS UID RFC822.SIZE INTERNALDATE)"), [
        '* 1 FETCH (FLAGS (\\Recent) UID 1 RFC822.SIZE 237 INTERNALDATE '
        '"08-Feb-1994 05:52:25 +0000")', "a OK Fetch completed"])
    assert_eq(r.cmd("b", "FETCH 1 ENVELOPE"),
              ["* 1 FETCH (ENVELOPE %s)" % SIMPLE_ENV, "b OK Fetch completed"])
    assert_eq(r.cmd("c", "FETCH 1 BODYSTRUCTURE"),
              ["* 1 FETCH (BODYSTRUCTURE %s)" % SIMPLE_BS, "c OK Fetch completed"])
    assert_eq(r.cmd("d", "FETCH 2 BODYSTRUCTURE"),
              ["* 2 FETCH (BODYSTRUCTURE %s)" % NESTED_BS, "d OK Fetch completed"])
    assert_eq(r.cmd("e", "FETCH 2 BODY"),
              ["* 2 FETCH (BODY %s)" % NESTED_BODY, "e OK Fetch completed"])
    assert_eq(r.cmd("f", "FETCH 1 RFC822.HEADER"), [
        "* 1 FETCH (RFC822.HEADER " + literal(SIMPLE[:188]) + ")", "f OK Fetch completed"])
    assert_eq(r.cmd("g", "FETCH 1 (BODY.PEEK[HEADER.FIELDS (From Subject)] "
                         "BODY.PEEK[HEADER.FIELDS.NOT (From To Cc Subject Date)])"), [
        "* 1 FETCH (BODY[HEADER.FIELDS (From Subject)] {64}\r\nFrom: Alice Example "
        "<alice@heron.test>\r\nSubject: Lunch plans\r\n\r\n BODY[HEADER.FIELDS.NOT (From To "
        "Cc Subject Date)] {46}\r\nMessage-ID: <m1@heron.test>\r\nX-Note: first\r\n\r\n)",
        "g OK Fetch completed"])
    assert_eq(r.cmd("h", "FETCH 1 (BODY.PEEK[TEXT]<5.10> BODY.PEEK[]<230.100>)"), [
        '* 1 FETCH (BODY[TEXT]<5> {10}\r\n we meet a BODY[]<230> {7}\r\nport.\r\n)',
        "h OK Fetch completed"])
    assert_eq(r.cmd("i", "FETCH 1 (BODY.PEEK[HEADER]<500.1>)"),
              ['* 1 FETCH (BODY[HEADER]<500> "")', "i OK Fetch completed"])
    assert_eq(r.cmd("j", "FETCH 1 FLAGS"),
              ["* 1 FETCH (FLAGS (\\Recent))", "j OK Fetch completed"])


def test_fetch_parts():
    select()
    out = R.cmd("a", "FETCH 2 (BODY.PEEK[1.1] BODY.PEEK[1.2.MIME] BODY.PEEK[2] "
                     "BODY.PEEK[2.HEADER] BODY.PEEK[2.TEXT] BODY.PEEK[3] BODY.PEEK[9] "
                     "BODY.PEEK[2.HEADER.FIELDS (Subject)] BODY.PEEK[3.MIME]<0.12>)")
    assert_eq(out, [
        "* 2 FETCH (BODY[1.1] {10}\r\nplain text BODY[1.2.MIME] {42}\r\nContent-Type: "
        "text/html; charset=utf-8\r\n\r\n BODY[2] {60}\r\nFrom: Carol <carol@heron.test>\r\n"
        "Subject: Inner\r\n\r\ninner body BODY[2.HEADER] {50}\r\nFrom: Carol "
        "<carol@heron.test>\r\nSubject: Inner\r\n\r\n BODY[2.TEXT] {10}\r\ninner body "
        "BODY[3] {8}\r\nAAECAw== BODY[9] NIL BODY[2.HEADER.FIELDS (Subject)] {18}\r\n"
        "Subject: Inner\r\n\r\n BODY[3.MIME]<0> {12}\r\nContent-Type)",
        "a OK Fetch completed"])


def test_fetch_sets_seen():
    select()
    r = R
    out = r.cmd("a", "FETCH 1 BODY[TEXT]")
    assert_eq(out, ["* 1 FETCH (BODY[TEXT] " + literal(SIMPLE[188:]) +
                    " FLAGS (\\Seen \\Recent))", "a OK Fetch completed"])
    out = r.cmd("b", "FETCH 2 RFC822")
    assert_eq(out, ["* 2 FETCH (RFC822 " + literal(NESTED) +
                    " FLAGS (\\Seen \\Recent))", "b OK Fetch completed"])
    assert_eq(r.cmd("c", "FETCH 1:* (FLAGS)"), [
        "* 1 FETCH (FLAGS (\\Seen \\Recent))", "* 2 FETCH (FLAGS (\\Seen \\Recent))",
        "c OK Fetch completed"])


def test_fetch_macros_and_uid():
    select()
    r = R
    out = r.cmd("a", "FETCH 1 FAST")
    assert_eq(out, ['* 1 FETCH (FLAGS (\\Recent) INTERNALDATE "08-Feb-1994 05:52:25 '
                    '+0000" RFC822.SIZE 237)', "a OK Fetch completed"])
    out = r.cmd("b", "FETCH 1 ALL")
    assert out[0].endswith("ENVELOPE %s)" % SIMPLE_ENV), out
    out = r.cmd("c", "FETCH 1 FULL")
    assert out[0].endswith("BODY %s)" % SIMPLE_BS[:-17] + ")"), out
    assert_eq(r.cmd("d", "UID FETCH 2:* RFC822.SIZE"),
              ["* 2 FETCH (UID 2 RFC822.SIZE 670)", "d OK Fetch completed"])
    assert_eq(r.cmd("e", "UID FETCH 9:* FLAGS"),
              ["* 2 FETCH (UID 2 FLAGS (\\Recent))", "e OK Fetch completed"])
    assert_eq(r.cmd("f", "UID FETCH 5:7 FLAGS"), ["f OK Fetch completed"])
    assert_eq(r.cmd("g", "FETCH 2:1 UID"), ["* 1 FETCH (UID 1)", "* 2 FETCH (UID 2)",
                                            "g OK Fetch completed"])


def test_fetch_errors():
    select()
    r = R
    assert_eq(r.cmd("a", "FETCH 3 FLAGS"), ["a BAD Invalid sequence number"])
    assert_eq(r.cmd("b", "FETCH 0 FLAGS"), ["b BAD Invalid sequence set"])
    assert_eq(r.cmd("c", "FETCH 1,,2 FLAGS"), ["c BAD Invalid sequence set"])
    assert_eq(r.cmd("d", "FETCH 1 BOGUS"), ["d BAD Invalid FETCH item"])
    assert_eq(r.cmd("e", "FETCH 1 BODY[0]"), ["e BAD Invalid FETCH item"])
    assert_eq(r.cmd("f", "FETCH 1 BODY[]<1.0>"), ["f BAD Invalid FETCH item"])
    assert_eq(r.cmd("g", "FETCH 1"), ["g BAD Expected: FETCH sequence-set items"])
    assert_eq(r.cmd("h", "NOOP"), ["h OK Completed"])


def test_store():
    select()
    r = R
    # a new keyword is announced (FLAGS, PERMANENTFLAGS) before a FETCH shows it
    assert_eq(r.cmd("a", "STORE 1 +FLAGS (\\Flagged $Work)"), [
        "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Work)",
        "* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Work \\*)] "
        "Flags permitted",
        "* 1 FETCH (FLAGS (\\Flagged \\Recent $Work))", "a OK STORE completed"])
    assert_eq(r.cmd("a2", "STORE 1 -FLAGS.SILENT (\\Flagged $Work)"),
              ["a2 OK STORE completed"])
    assert_eq(r.cmd("b", "STORE 1:2 FLAGS.SILENT (\\Seen \\Answered)"),
              ["b OK STORE completed"])
    assert_eq(r.cmd("c", "UID STORE 2 -FLAGS (\\Answered)"),
              ["* 2 FETCH (UID 2 FLAGS (\\Seen \\Recent))", "c OK STORE completed"])
    assert_eq(r.cmd("d", "STORE 1 +FLAGS (kw1 kw2)")[-2:], [
        "* 1 FETCH (FLAGS (\\Answered \\Seen \\Recent kw1 kw2))", "d OK STORE completed"])
    assert_eq(r.cmd("d2", "NOOP"), ["d2 OK Completed"])
    assert_eq(r.cmd("e", "STORE 1 -FLAGS kw1"), [
        "* 1 FETCH (FLAGS (\\Answered \\Seen \\Recent kw2))", "e OK STORE completed"])
    assert_eq(r.cmd("f", "STORE 1 +FLAGS (\\Recent)"),
              ["f BAD \\Recent cannot be changed"])
    assert_eq(r.cmd("g", "STORE 1 +FLAGS (\\Bogus)"), ["g BAD Unknown system flag"])
    assert_eq(r.cmd("h", "STORE 1 FROBS (x)"),
              ["h BAD Expected FLAGS, +FLAGS or -FLAGS"])
    out = r.cmd("i", "FETCH 1 FLAGS")
    assert_eq(out, ["* 1 FETCH (FLAGS (\\Answered \\Seen \\Recent kw2))",
                    "i OK Fetch completed"])


def test_search():
    select()
    r = R
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
        ("1:*", "1 2"), ("UID 2", "2"), ("NOT FLAGGED", "1"),
        ("OR FLAGGED SMALLER 300", "1 2"),
        ("(FLAGGED LARGER 10)", "2"), ("NOT (FLAGGED)", "1"), ("KEYWORD nope", ""),
        ("UNKEYWORD nope", "1 2"), ("CHARSET UTF-8 SUBJECT Report", "2"),
        ("DELETED", ""), ("UNDELETED", "1 2"), ("DRAFT", ""), ("UNDRAFT", "1 2"),
        ("ANSWERED", ""), ("UNANSWERED", "1 2"),
        # WITHIN: the internal dates are 1994
        ("OLDER 86400", "1 2"), ("YOUNGER 86400", ""),
    ]
    for key, want in cases:
        out = r.cmd("s", "SEARCH " + key)
        assert_eq(out, ["* SEARCH" + (" " + want if want else ""),
                        "s OK SEARCH completed"], key)
    assert_eq(r.cmd("u", "UID SEARCH FLAGGED"),
              ["* SEARCH 2", "u OK SEARCH completed"])
    assert_eq(r.cmd("v", "SEARCH CHARSET KOI8-R ALL"),
              ["v NO [BADCHARSET (UTF-8 US-ASCII)] Unsupported charset"])
    assert_eq(r.cmd("w", "SEARCH BOGUS"), ["w BAD Unknown search key"])
    assert_eq(r.cmd("x", "SEARCH SINCE 32-Foo-1"), ["x BAD Invalid search date"])
    assert_eq(r.cmd("y", "SEARCH OR FLAGGED"), ["y BAD Missing search key"])
    r.send("z SEARCH SUBJECT {5}\r\n")
    assert_eq(r.line(), "+ Ready for literal data")
    r.send("plans\r\n")
    assert_eq(r.until_tag("z"), ["* SEARCH 1", "z OK SEARCH completed"])


def test_copy_move_expunge():
    select()
    r = R
    r.cmd("a", "CREATE Dest%s" % BOX)
    dest = "Dest%s" % BOX
    out = r.cmd("b", "COPY 1:2 " + dest)
    assert_re(out[-1], r"^b OK \[COPYUID \d+ 1,2 1,2\] COPY completed$")
    assert_eq(r.cmd("c", "COPY 1 Nowhere"), ["c NO [TRYCREATE] No such mailbox"])
    out = r.cmd("d", "UID MOVE 1 " + dest)
    assert_re(out[0], r"^\* OK \[COPYUID \d+ 1 3\] Moved$")
    assert_eq(out[1:], ["* 1 EXPUNGE", "d OK MOVE completed"])
    assert_eq(r.cmd("e", "FETCH 1 UID"), ["* 1 FETCH (UID 2)", "e OK Fetch completed"])
    r.append(SIMPLE, BOX)  # uid 3
    r.cmd("f", "NOOP")
    assert_eq(r.cmd("g", "STORE 1:2 +FLAGS.SILENT (\\Deleted)"),
              ["g OK STORE completed"])
    assert_eq(r.cmd("h", "UID EXPUNGE 3"), ["* 2 EXPUNGE", "h OK EXPUNGE completed"])
    assert_eq(r.cmd("i", "EXPUNGE"), ["* 1 EXPUNGE", "i OK EXPUNGE completed"])
    assert_eq(r.cmd("j", "STATUS %s (MESSAGES)" % dest),
              ["* STATUS %s (MESSAGES 3)" % dest, "j OK STATUS completed"])
    assert_eq(r.cmd("k", "FETCH 1 UID"), ["k BAD No messages"])


def test_close_unselect():
    select()
    r = R
    r.cmd("a", "STORE 1 +FLAGS.SILENT (\\Deleted)")
    assert_eq(r.cmd("b", "UNSELECT"), ["b OK UNSELECT completed"])
    assert_eq(r.cmd("c", "FETCH 1 UID"), ["c BAD No mailbox selected"])
    select()
    assert_eq(r.cmd("d", "CLOSE"), ["d OK CLOSE completed"])
    out = r.cmd("e", "STATUS %s (MESSAGES)" % BOX)
    assert_eq(out[0], "* STATUS %s (MESSAGES 1)" % BOX)
    assert_eq(r.cmd("f", "CHECK"), ["f BAD No mailbox selected"])


def test_append_variants():
    r = R
    r.send("a APPEND %s {%d}\r\n" % (BOX, len(SIMPLE)))
    assert_eq(r.line(), "+ Ready for literal data")
    r.send(SIMPLE + b"\r\n")
    assert_re(r.until_tag("a")[0], r"^a OK \[APPENDUID \d+ 3\] APPEND completed$")
    assert_eq(r.cmd("b", "APPEND Nowhere {1+}\r\nx"),
              ["b NO [TRYCREATE] No such mailbox"])
    assert_eq(r.cmd("c", 'APPEND %s "31-Foo-2020 00:00:00 +0000" {1+}\r\nx' %
                    BOX), ["c BAD Invalid date-time"])
    r.send("d APPEND %s {999999999999}\r\n" % BOX)
    assert_eq(r.line(), "d NO [TOOBIG] Message too large")
    assert_eq(r.cmd("e", "NOOP"), ["e OK Completed"])
    assert_re(r.cmd("f", "APPEND %s (\\Flagged kw) {1+}\r\nx" % BOX)[0],
              r"^f OK \[APPENDUID \d+ 4\] APPEND completed$")
    select()
    assert_eq(R.cmd("g", "FETCH 4 (FLAGS RFC822)"), [
        "* 4 FETCH (FLAGS (\\Flagged \\Seen \\Recent kw) RFC822 {1}\r\nx)",
        "g OK Fetch completed"])


def test_esearch():
    select()
    r = R
    assert_eq(r.cmd("a", "SEARCH RETURN (MIN MAX COUNT) ALL"),
              ['* ESEARCH (TAG "a") MIN 1 MAX 2 COUNT 2', "a OK SEARCH completed"])
    assert_eq(r.cmd("b", "UID SEARCH RETURN () ALL"),
              ['* ESEARCH (TAG "b") UID ALL 1:2', "b OK SEARCH completed"])
    assert_eq(r.cmd("c", "SEARCH RETURN (COUNT ALL) DELETED"),
              ['* ESEARCH (TAG "c") COUNT 0', "c OK SEARCH completed"])
    # SEARCHRES: SAVE alone answers nothing; "$" is the saved set for any command
    assert_eq(r.cmd("s1", "SEARCH RETURN (SAVE) LARGER 300"),
              ["s1 OK SEARCH completed"])
    assert_eq(r.cmd("s2", "FETCH $ UID"), ["* 2 FETCH (UID 2)", "s2 OK Fetch completed"])
    assert_eq(r.cmd("s3", "UID SEARCH RETURN (SAVE MIN) NOT $"),
              ['* ESEARCH (TAG "s3") UID MIN 1', "s3 OK SEARCH completed"])
    assert_eq(r.cmd("s4", "UID FETCH $ UID"),
              ["* 1 FETCH (UID 1)", "s4 OK Fetch completed"])
    assert_eq(r.cmd("d", "SEARCH RETURN (BOGUS) ALL"),
              ["d BAD Invalid RETURN options"])


def test_condstore():
    out = R.cmd("s", "SELECT %s (CONDSTORE)" % BOX)
    hms = int([x for x in out if "HIGHESTMODSEQ" in x][0].split()[3].rstrip("]"))
    r = R
    out = r.cmd("a", "FETCH 1:* (MODSEQ)")
    m1 = int(out[0].split("MODSEQ (")[1].rstrip("))"))
    m2 = int(out[1].split("MODSEQ (")[1].rstrip("))"))
    assert_eq(out, ["* 1 FETCH (MODSEQ (%d))" % m1, "* 2 FETCH (MODSEQ (%d))" % m2,
                    "a OK Fetch completed"])
    assert_eq(max(m1, m2), hms)
    out = r.cmd("b", "STORE 1 +FLAGS (\\Flagged)")
    m1b = int(out[0].split("MODSEQ (")[1].rstrip("))"))
    assert_gt(m1b, hms)
    assert_eq(out, ["* 1 FETCH (FLAGS (\\Flagged \\Recent) MODSEQ (%d))" % m1b,
                    "b OK STORE completed"])
    assert_eq(r.cmd("c", "FETCH 1:* (FLAGS) (CHANGEDSINCE %d)" % hms),
              ["* 1 FETCH (FLAGS (\\Flagged \\Recent) MODSEQ (%d))" % m1b,
               "c OK Fetch completed"])
    assert_eq(r.cmd("d", "UID STORE 1:2 (UNCHANGEDSINCE %d) +FLAGS (\\Seen)" % hms)[-1],
              "d OK [MODIFIED 1] Conditional STORE failed")
    # message 2 took \\Seen above (modseq m1b + 1); 1 kept m1b
    assert_eq(r.cmd("e", "SEARCH MODSEQ %d" % m1b),
              ["* SEARCH 1 2 (MODSEQ %d)" % (m1b + 1), "e OK SEARCH completed"])
    assert_eq(r.cmd("e2", "SEARCH MODSEQ %d" % (m1b + 1)),
              ["* SEARCH 2 (MODSEQ %d)" % (m1b + 1), "e2 OK SEARCH completed"])
    assert_eq(r.cmd("f", "STATUS %s (HIGHESTMODSEQ)" % BOX),
              ["* STATUS %s (HIGHESTMODSEQ %d)" % (BOX, m1b + 1),
               "f OK STATUS completed"])


def test_qresync():
    r = R
    out = select()
    uv = int(out[5].split()[3].rstrip("]"))
    ms = int(out[7].split()[3].rstrip("]"))
    assert_eq(r.cmd("a", "SELECT %s (QRESYNC (%d %d))" % (BOX, uv, ms)),
              ["a BAD Invalid SELECT parameters"])  # not enabled yet
    # the first CONDSTORE enabling command with a mailbox selected (RFC 7162 3.1)
    assert_eq(r.cmd("b", "ENABLE QRESYNC"), [
        "* ENABLED QRESYNC", "* OK [HIGHESTMODSEQ %d] Highest" % ms, "b OK Enabled"])
    r.append(SIMPLE, BOX)  # uid 3
    other = D.raw()
    other.cmd("s", "SELECT " + BOX)
    other.cmd("d", "STORE 1 +FLAGS.SILENT (\\Deleted)")
    other.cmd("e", "EXPUNGE")
    other.cmd("f", "STORE 2 +FLAGS.SILENT (\\Flagged)")
    out = r.cmd("c", "SELECT %s (QRESYNC (%d %d 1:3))" % (BOX, uv, ms))
    assert_eq(out[0], "* OK [CLOSED] Previous mailbox closed")
    assert_in("* VANISHED (EARLIER) 1", out)
    fetches = [x for x in out if " FETCH " in x]
    # other's "STORE 2" came after its expunge: that is uid 3 (appended after ms too)
    assert_eq([x.split(" MODSEQ")[0] for x in fetches],
              ["* 2 FETCH (UID 3 FLAGS (\\Flagged)"])
    assert_eq(out[-1], "c OK [READ-WRITE] SELECT completed")
    out = r.cmd("g", "UID FETCH 1:* FLAGS (CHANGEDSINCE %d VANISHED)" % ms)
    assert_eq(out[0], "* VANISHED (EARLIER) 1")
    assert_eq([x.split(" MODSEQ")[0] for x in out[1:]],
              ["* 2 FETCH (UID 3 FLAGS (\\Flagged)", "g OK Fetch completed"])
    r.cmd("h", "STORE 1 +FLAGS.SILENT (\\Deleted)")
    assert_eq(r.cmd("i", "EXPUNGE"), ["* VANISHED 2", "i OK EXPUNGE completed"])
    assert_eq(r.cmd("j", "SELECT %s (QRESYNC (1 1))" % BOX)[-1],
              "j OK [READ-WRITE] SELECT completed")  # wrong uidvalidity: plain


def test_pipelining():
    r = R
    r.send("p1 SELECT %s\r\np2 FETCH 1 UID\r\np3 FETCH 2 UID\r\np4 NOOP\r\n" % BOX)
    assert_eq(r.until_tag("p1")[-1], "p1 OK [READ-WRITE] SELECT completed")
    assert_eq(r.until_tag("p2"), ["* 1 FETCH (UID 1)", "p2 OK Fetch completed"])
    assert_eq(r.until_tag("p3"), ["* 2 FETCH (UID 2)", "p3 OK Fetch completed"])
    assert_eq(r.until_tag("p4"), ["p4 OK Completed"])


def main():
    global IMAPD, D
    IMAPD, deliver = sys.argv[1], sys.argv[2]
    groups = [  # each group on a fresh imapd and store
        [test_greeting_capability_noop_logout, test_login, test_login_literals,
         test_authenticate_plain, test_imaplib_login],
        [test_create_list_delete_rename, test_subscribe_lsub, test_list_extended_status,
         test_bad_names, test_status, test_quota, test_namespace_enable, test_special_use],
        [in_new_mailbox(t) for t in [
            test_select_examine, test_fetch_items, test_fetch_parts, test_fetch_sets_seen,
            test_fetch_macros_and_uid, test_fetch_errors, test_store, test_search,
            test_copy_move_expunge, test_close_unselect, test_append_variants, test_esearch,
            test_condstore, test_qresync, test_pipelining]],
    ]
    rc = 0
    for tests in groups:
        D = Imapd(IMAPD, deliver=deliver)
        rc |= run_suite(D, tests, D.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
