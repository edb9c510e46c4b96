"""imapd end to end: the smaller extensions, one raw dialogue each with exact responses:
UNAUTHENTICATE (RFC 8437), OBJECTID (RFC 8474), PREVIEW (RFC 8970), PARTIAL (RFC 9394),
SAVEDATE (RFC 8514), REPLACE (RFC 8508), NAMESPACE (RFC 2342) and ACL (RFC 4314) on the
owner's mailboxes.

Usage: test_imapd_ext.py IMAPD_BINARY DELIVER_BINARY"""
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, after_test, run_suite  # noqa: E402
from heronlib import assert_eq, assert_in, assert_ne, assert_not_in  # noqa: E402
from messages import SIMPLE  # noqa: E402
D = None  # the imapd the running tests talk to


def test_back_to_not_authenticated():
    r = D.raw()
    assert r.cmd("a", "SELECT INBOX")[-1].startswith("a OK")
    assert_eq(r.cmd("b", "ENABLE CONDSTORE"),
              ["* ENABLED CONDSTORE", "* OK [HIGHESTMODSEQ 1] Highest", "b OK Enabled"])
    assert_eq(r.cmd("c", "UNAUTHENTICATE x"),
              ["c BAD UNAUTHENTICATE takes no arguments"])
    assert_eq(r.cmd("d", "UNAUTHENTICATE"), ["d OK Unauthenticated"])
    assert_eq(r.cmd("e", "SELECT INBOX"), ["e NO Log in first"])
    assert_eq(r.cmd("f", "UNAUTHENTICATE"), ["f NO Log in first"])
    caps = r.cmd("g", "CAPABILITY")[0]
    assert_in(" AUTH=PLAIN", caps)
    assert_not_in("UNAUTHENTICATE", caps)
    out = r.cmd("h", 'LOGIN bob "%s"' % PASSWORD)
    assert out[-1].startswith("h OK [CAPABILITY "), out
    assert_in(" UNAUTHENTICATE ", out[-1])
    # a new user, nothing carried over: CONDSTORE is off again
    out = r.cmd("i", "SELECT INBOX")
    assert out[-1].startswith("i OK")
    assert_eq(r.cmd("j", "ENABLE CONDSTORE")[:2],
              ["* ENABLED CONDSTORE", "* OK [HIGHESTMODSEQ 1] Highest"])
    assert_eq(r.cmd("k", "LOGOUT"), ["* BYE Logging out", "k OK Logout completed"])


def test_ids():
    r = D.raw("carol")
    out = r.cmd("a", "CREATE Box1")
    m = re.fullmatch(r"a OK \[MAILBOXID \((F[0-9a-f]{16})\)\] CREATE completed", out[0])
    assert m is not None, out
    box = m.group(1)
    assert_eq(r.cmd("b", "STATUS Box1 (MAILBOXID MESSAGES)"),
              ["* STATUS Box1 (MAILBOXID (%s) MESSAGES 0)" % box,
               "b OK STATUS completed"])
    assert_in("* OK [MAILBOXID (%s)] Ok" % box, r.cmd("c", "SELECT Box1"))
    # the id stays across RENAME (RFC 8474 4.2)
    r.cmd("d", "UNSELECT")
    assert_eq(r.cmd("e", "RENAME Box1 Box2"), ["e OK RENAME completed"])
    assert_eq(r.cmd("f", "STATUS Box2 (MAILBOXID)")[0],
              "* STATUS Box2 (MAILBOXID (%s))" % box)
    r.append(SIMPLE, "Box2")
    r.cmd("g", "SELECT Box2")
    out = r.cmd("h", "FETCH 1 (EMAILID THREADID)")
    m = re.fullmatch(r"\* 1 FETCH \(EMAILID \((M[0-9a-f]{16})\) THREADID NIL\)", out[0])
    assert m is not None, out
    mail = m.group(1)
    # COPY keeps the EMAILID (the same message), a new APPEND gets another
    assert r.cmd("i", "COPY 1 Box2")[-1].startswith("i OK")
    r.append(SIMPLE, "Box2")
    r.cmd("n", "NOOP")
    out = r.cmd("j", "FETCH 1:3 EMAILID")
    ids = [re.search(r"EMAILID \(([A-Za-z0-9_-]+)\)", line).group(1) for line in out[:-1]]
    assert_eq(ids[:2], [mail, mail])
    assert_ne(ids[2], mail)
    assert_eq(r.cmd("k", "SEARCH EMAILID " + mail),
              ["* SEARCH 1 2", "k OK SEARCH completed"])
    assert_eq(r.cmd("l", "SEARCH THREADID T1"), ["* SEARCH", "l OK SEARCH completed"])
    assert_eq(r.cmd("m", "SEARCH EMAILID a+b"), ["m BAD Invalid object id"])


def test_preview():
    D.raw("bob")
    for m in [
        b"From: a@b\r\nSubject: plain\r\n\r\nHello   there,\r\n\r\nthis is\tthe body.\r\n",
        b"From: a@b\r\nSubject: mixed\r\nMIME-Version: 1.0\r\n"
        b"Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\n"
        b"Content-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nAAAA\r\n"
        b"--x\r\nContent-Type: text/html; charset=iso-8859-1\r\n"
        b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
        b"<p>Caf=E9 <b>cr=E8me</b></p>\r\n--x--\r\n",
        b"From: a@b\r\nSubject: attach\r\nMIME-Version: 1.0\r\n"
        b"Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/plain\r\n"
        b"Content-Disposition: attachment; filename=a.txt\r\n\r\nsecret\r\n--x--\r\n",
        b"From: a@b\r\nSubject: long\r\n\r\n" + b"word " * 100 + b"\r\n",
    ]:
        D.deliver("bob", m)
    r = D.raw("bob")
    r.cmd("s", "SELECT INBOX")
    assert_eq(r.cmd("f", "FETCH 1:4 PREVIEW"), [
        '* 1 FETCH (PREVIEW "Hello there, this is the body.")',
        "* 2 FETCH (PREVIEW {12}\r\nCafé crème)",  # 8-bit: a literal for IMAP4rev1
        "* 3 FETCH (PREVIEW NIL)",                    # only an attachment
        '* 4 FETCH (PREVIEW "%s")' % " ".join(["word"] * 40),  # 199 characters
        "f OK Fetch completed"])
    assert_eq(r.cmd("g", "FETCH 1 (PREVIEW (LAZY) UID)"), [
        '* 1 FETCH (PREVIEW "Hello there, this is the body." UID 1)', "g OK Fetch completed"])
    assert_eq(r.cmd("h", "FETCH 1 (PREVIEW (FOO))"), ["h BAD Invalid FETCH item"])
    assert_eq(r.cmd("i", "FETCH 1 FLAGS"), ["* 1 FETCH (FLAGS (\\Recent))",
                                            "i OK Fetch completed"])  # no \Seen


def test_partial():
    D.raw("carol")
    for i in range(10):
        D.deliver("carol", b"From: a@b\r\nSubject: %d\r\n\r\nx\r\n" % (9 - i))
    r = D.raw("carol")
    r.cmd("s", "SELECT INBOX")
    for cmd, want in [
        ("SEARCH RETURN (PARTIAL 1:3) ALL", '* ESEARCH (TAG "p") PARTIAL (1:3 1:3)'),
        ("SEARCH RETURN (PARTIAL -1:-3) ALL", '* ESEARCH (TAG "p") PARTIAL (-1:-3 8:10)'),
        ("UID SEARCH RETURN (PARTIAL 3:1 COUNT) 2:9",
         '* ESEARCH (TAG "p") UID COUNT 8 PARTIAL (3:1 2:4)'),
        ("SEARCH RETURN (PARTIAL 20:30) ALL", '* ESEARCH (TAG "p") PARTIAL (20:30 NIL)'),
        ("SORT RETURN (PARTIAL 1:3) (SUBJECT) UTF-8 ALL",
         '* ESEARCH (TAG "p") PARTIAL (1:3 10,9,8)'),
        ("SORT RETURN (PARTIAL -1:-2 COUNT) (SUBJECT) UTF-8 ALL",
         '* ESEARCH (TAG "p") COUNT 10 PARTIAL (-1:-2 2,1)'),
    ]:
        out = r.cmd("p", cmd)
        assert_eq(out[:-1], [want], cmd)
        assert out[-1].startswith("p OK "), (cmd, out)
    for bad in ["SEARCH RETURN (PARTIAL 1:3 ALL) ALL", "SEARCH RETURN (PARTIAL 1:-3) ALL",
                "SEARCH RETURN (PARTIAL 0:3) ALL", "SEARCH RETURN (PARTIAL) ALL",
                "SORT RETURN (ALL PARTIAL 1:2) (DATE) UTF-8 ALL"]:
        assert_eq(r.cmd("b", bad), ["b BAD Invalid RETURN options"], bad)


def savedate_of(r, tag, seq):
    out = r.cmd(tag, "FETCH %s (SAVEDATE INTERNALDATE)" % seq)
    m = re.fullmatch(r'\* %s FETCH \(SAVEDATE "([^"]+)" INTERNALDATE "([^"]+)"\)' % seq,
                     out[0])
    assert m is not None and out[-1] == tag + " OK Fetch completed", out
    return m.group(1), m.group(2)


def test_savedate():
    r = D.raw("carol")
    assert_in(" SAVEDATE", r.cmd("c", "CAPABILITY")[0])
    r.cmd("a", "CREATE Saved")
    r.append(SIMPLE)  # internal date 07-Feb-1994 21:52:25 -0800
    r.cmd("s", "SELECT INBOX")
    saved, internal = savedate_of(r, "f", 1)
    assert_eq(internal, "08-Feb-1994 05:52:25 +0000")
    t = time.strptime(saved, "%d-%b-%Y %H:%M:%S +0000")
    assert abs(time.mktime(t) - time.mktime(time.gmtime())) < 60, saved  # saved just now
    day = saved.split()[0]
    for key, want in [("SAVEDON " + day, "* SEARCH 1"), ("SAVEDSINCE " + day, "* SEARCH 1"),
                      ("SAVEDBEFORE " + day, "* SEARCH"), ("SAVEDATESUPPORTED", "* SEARCH 1"),
                      ("SAVEDON 8-Feb-1994", "* SEARCH"), ("ON 8-Feb-1994", "* SEARCH 1"),
                      ("SAVEDBEFORE 1-Jan-2200", "* SEARCH 1"),
                      ("NOT SAVEDATESUPPORTED", "* SEARCH")]:
        assert_eq(r.cmd("k", "SEARCH " + key), [want, "k OK SEARCH completed"], key)
    assert_eq(r.cmd("b", "SEARCH SAVEDON 32-Jan-2020"), ["b BAD Invalid search date"])
    assert_eq(r.cmd("b", "SEARCH SAVEDSINCE"), ["b BAD Invalid search date"])
    # COPY and MOVE save the message anew (RFC 8514 3): a later save date, the same
    # internal date
    time.sleep(2)
    assert r.cmd("c", "COPY 1 Saved")[-1].startswith("c OK [COPYUID ")
    r.append(SIMPLE)
    r.cmd("n", "NOOP")
    assert r.cmd("m", "MOVE 2 Saved")[-1].startswith("m OK")
    r.cmd("s", "SELECT Saved")
    copied = {}
    for seq in (1, 2):
        copied[seq], cinternal = savedate_of(r, "g", seq)
        assert_eq(cinternal, internal)
        assert copied[seq] > saved or copied[seq].split()[0] != day, (copied[seq], saved)
    # the save date stays through a flag change (the row is rewritten); the copy's own date:
    # the COPY and the MOVE can fall in two different seconds
    r.cmd("t", "STORE 1 +FLAGS (\\Seen)")
    assert_eq(savedate_of(r, "h", 1)[0], copied[1])
    assert_eq(r.cmd("u", "UID SEARCH SAVEDSINCE " + copied[1].split()[0]),
              ["* SEARCH 1 2", "u OK SEARCH completed"])


def replace(r, tag, text, msg, sync=False):
    """REPLACE/UID REPLACE text with msg as its literal (synchronizing when sync)."""
    if sync:
        r.send("%s %s {%d}\r\n" % (tag, text, len(msg)))
        assert_eq(r.line(), "+ Ready for literal data")
        r.send(msg + b"\r\n")
    else:
        r.send(("%s %s {%d+}\r\n" % (tag, text, len(msg))).encode() + msg + b"\r\n")
    return r.until_tag(tag)


def test_replace():
    r = D.raw("carol")
    assert_in(" REPLACE", r.cmd("c", "CAPABILITY")[0])
    v1 = b"From: a@b\r\nSubject: draft 1\r\n\r\nfirst\r\n"
    v2 = b"From: a@b\r\nSubject: draft 2\r\n\r\nsecond, longer\r\n"
    v3 = b"From: a@b\r\nSubject: sent\r\n\r\nthird\r\n"
    assert_eq(replace(r, "n", "REPLACE 1 INBOX", v1), ["n BAD No mailbox selected"])
    r.cmd("a", "CREATE Drafts")
    r.append(v1, "Drafts")
    r.append(v1, "Drafts")
    out = r.cmd("s", "SELECT Drafts")
    uidvalidity = re.search(r"UIDVALIDITY (\d+)", "\n".join(out)).group(1)
    # a new message appended, the one it replaces expunged, in one commit (RFC 8508 3.4)
    assert_eq(replace(r, "b", 'REPLACE 1 Drafts (\\Draft) "01-Dec-2026 10:00:00 +0000"', v2,
                      sync=True),
              ["* OK [APPENDUID %s 3] Replacement message ready" % uidvalidity,
               "* 1 EXPUNGE", "* 2 EXISTS", "* 2 RECENT", "b OK REPLACE completed"])
    assert_eq(r.cmd("f", "UID FETCH 3 (FLAGS INTERNALDATE BODY.PEEK[])"),
              ['* 2 FETCH (UID 3 FLAGS (\\Draft \\Recent) INTERNALDATE "01-Dec-2026 10:00:00 +0000" '
               "BODY[] {%d}\r\n%s)" % (len(v2), v2.decode()), "f OK Fetch completed"])
    # into another mailbox (a draft that was sent), by UID
    out = r.cmd("t", "STATUS INBOX (UIDVALIDITY)")
    inbox_v = re.search(r"UIDVALIDITY (\d+)", out[0]).group(1)
    assert_eq(replace(r, "c", "UID REPLACE 3 INBOX", v3),
              ["* OK [APPENDUID %s 1] Replacement message ready" % inbox_v,
               "* 2 EXPUNGE", "c OK REPLACE completed"])
    assert_eq(r.cmd("t", "STATUS INBOX (MESSAGES)")[0], "* STATUS INBOX (MESSAGES 1)")
    # refused: nothing appended, nothing expunged
    for cmd, want in [
        ("REPLACE 2 Drafts", "d BAD Invalid message sequence number"),
        ("REPLACE 0 Drafts", "d BAD Invalid message sequence number"),
        ("UID REPLACE 3 Drafts", "d NO [NONEXISTENT] No message with that UID"),
        ("REPLACE 1 Nope", "d NO [TRYCREATE] No such mailbox"),
        ("REPLACE 1:2 Drafts",
         "d BAD Expected: REPLACE n mailbox [(flags)] [date-time] literal"),
        ("REPLACE 1 Drafts (\\Bogus)", None),
    ]:
        out = replace(r, "d", cmd, v3)
        if want is None:
            assert out[-1].startswith("d BAD "), (cmd, out)
        else:
            assert_eq(out, [want], cmd)
    r.send(b"d REPLACE 1 Drafts {3+}\r\nabc {3+}\r\nabc\r\n")
    assert_eq(r.until_tag("d"), [
        "d BAD Expected: REPLACE n mailbox [(flags)] [date-time] literal|UTF8 (literal8)"])
    assert_eq(r.cmd("e", "UID SEARCH ALL"), ["* SEARCH 2", "e OK SEARCH completed"])
    r.cmd("x", "EXAMINE Drafts")
    assert_eq(replace(r, "g", "REPLACE 1 Drafts", v3),
              ["g NO [READ-ONLY] Mailbox is read-only"])
    # QRESYNC: the replaced message is VANISHED (RFC 8508 3.2, RFC 7162)
    r.cmd("q", "ENABLE QRESYNC")
    r.cmd("s", "SELECT Drafts")
    assert_eq(replace(r, "h", "UID REPLACE * Drafts", v3),
              ["* OK [APPENDUID %s 4] Replacement message ready" % uidvalidity,
               "* VANISHED 2", "* 1 EXISTS", "* 1 RECENT", "h OK REPLACE completed"])


def test_acl():
    # bob is a user of the store once he has logged in: SETACL gives rights to store users
    b = D.raw("bob")
    r = D.raw("carol")
    caps = r.cmd("c", "CAPABILITY")[0]
    assert_in(" ACL RIGHTS=texk ", caps)
    # one personal namespace, "/" as LIST shows it; no other users' or shared ones
    assert_eq(r.cmd("n", "NAMESPACE"), ['* NAMESPACE (("" "/")) NIL NIL',
                                        "n OK Namespace completed"])
    assert_eq(r.cmd("l", 'LIST "" INBOX'), ['* LIST (\\HasNoChildren) "/" INBOX',
                                           "l OK List completed"])
    r.cmd("a", 'CREATE "Team/Plans"')
    all_rights = "lrswipkxtecda"
    for cmd, want in [
        ("MYRIGHTS INBOX", ["* MYRIGHTS INBOX " + all_rights, "t OK MYRIGHTS completed"]),
        ("MYRIGHTS inbox", ["* MYRIGHTS INBOX " + all_rights, "t OK MYRIGHTS completed"]),
        ('MYRIGHTS "Team/Plans"',
         ["* MYRIGHTS Team/Plans " + all_rights, "t OK MYRIGHTS completed"]),
        ("GETACL Team/Plans", ["* ACL Team/Plans carol " + all_rights,
                               "t OK GETACL completed"]),
        ("LISTRIGHTS INBOX carol", ["* LISTRIGHTS INBOX carol " + all_rights,
                                    "t OK LISTRIGHTS completed"]),
        ("LISTRIGHTS INBOX bob", ['* LISTRIGHTS INBOX bob "" l r s w i p k x t e c d a',
                                  "t OK LISTRIGHTS completed"]),
        ("LISTRIGHTS INBOX anyone",
         ['* LISTRIGHTS INBOX anyone "" l r s w i p k x t e c d a',
          "t OK LISTRIGHTS completed"]),
        # what leaves the owner's rights as they are is accepted, the rest refused; other
        # identifiers are kept (test_imapd_shared.py has the rest)
        ("SETACL INBOX carol +lr", ["t OK SETACL completed"]),
        ("SETACL INBOX carol " + all_rights, ["t OK SETACL completed"]),
        ("SETACL INBOX bob \"\"", ["t OK SETACL completed"]),
        ("SETACL INBOX bob -r", ["t OK SETACL completed"]),
        ("DELETEACL INBOX bob", ["t OK DELETEACL completed"]),
        ("SETACL INBOX carol -a", ["t NO [CANNOT] The owner always holds every right"]),
        ("DELETEACL INBOX carol", ["t NO [CANNOT] The owner always holds every right"]),
        ("SETACL INBOX bob lr", ["t OK SETACL completed"]),
        ("SETACL INBOX anyone +r", ["t OK SETACL completed"]),
        ("GETACL INBOX", ["* ACL INBOX carol " + all_rights + " anyone r bob lr",
                          "t OK GETACL completed"]),
        ("DELETEACL INBOX bob", ["t OK DELETEACL completed"]),
        ("DELETEACL INBOX anyone", ["t OK DELETEACL completed"]),
        ("SETACL INBOX bob lrZ", ["t BAD Invalid rights"]),
        ("SETACL INBOX bob", ["t BAD Expected: SETACL mailbox identifier rights"]),
        ("GETACL", ["t BAD Expected: GETACL mailbox"]),
        ("GETACL INBOX x", ["t BAD Expected: GETACL mailbox"]),
        ("LISTRIGHTS INBOX (a)", ["t BAD Expected: LISTRIGHTS mailbox identifier"]),
        ("MYRIGHTS Nope", None),
        ("GETACL Nope", None),
    ]:
        out = r.cmd("t", cmd)
        if want is None:
            assert_eq(len(out), 1, cmd)
            assert out[0].startswith("t NO [NONEXISTENT] "), (cmd, out)
        else:
            assert_eq(out, want, cmd)
    # bob's own mailbox is his: carol's INBOX is not in his view
    assert_eq(b.cmd("t", "MYRIGHTS INBOX"), ["* MYRIGHTS INBOX " + all_rights,
                                             "t OK MYRIGHTS completed"])
    assert b.cmd("u", "GETACL Team/Plans")[0].startswith("u NO [NONEXISTENT] ")
    assert_eq(D.raw("bob", login=False).cmd("v", "MYRIGHTS INBOX"), ["v NO Log in first"])


def test_qresync_uid():
    """RFC 7162 3.2.4: with QRESYNC enabled, every untagged FETCH carries UID (imaplib)."""
    q = D.login("alice")
    after_test(q.logout)
    for _ in range(3):
        assert_eq(q.append("INBOX", None, None, SIMPLE)[0], "OK")
    assert_eq(q.enable("QRESYNC")[0], "OK")
    assert_eq(q.select("INBOX")[0], "OK")
    other = D.login("alice")
    after_test(other.logout)
    assert_eq(other.select("INBOX")[0], "OK")
    assert_eq(other.store("2", "+FLAGS.SILENT", "(\\Flagged)")[0], "OK")
    # the unsolicited FETCH for the other session's change (imap_view.c)
    typ, _ = q.noop()
    assert_eq(typ, "OK")
    # which session holds \\Recent is not the point here
    def norecent(x):
        return (x.decode() if isinstance(x, bytes) else x).replace(" \\Recent", "").replace(
            "\\Recent", "")

    fetches = [norecent(x) for x in q.untagged_responses.pop("FETCH", [])]
    assert_eq(len(fetches), 1, fetches)
    assert re.match(r"2 \(UID 2 FLAGS \(\\Flagged\) MODSEQ \(\d+\)\)$", fetches[0]), fetches
    # STORE and FETCH by message number
    typ, data = q.store("3", "+FLAGS", "(\\Seen)")
    assert_eq(typ, "OK")
    assert re.match(r"3 \(UID 3 FLAGS \(\\Seen\) MODSEQ \(\d+\)\)$", norecent(data[0])), data
    typ, data = q.fetch("1", "(FLAGS)")
    assert_eq(typ, "OK")
    lines = [norecent(x) for x in data]
    assert lines and all(re.match(r"\d+ \(.*\bUID \d+\b", x) for x in lines), data
    assert [x for x in lines if x in ("1 (FLAGS () UID 1)", "1 (UID 1 FLAGS ())")], data
    # a session without QRESYNC is unchanged
    assert_eq(other.store("1", "+FLAGS.SILENT", "(\\Seen)")[0], "OK")
    typ, data = other.fetch("1", "(FLAGS)")
    assert_eq([norecent(x) for x in data], ["1 (FLAGS (\\Seen))"])


def main():
    global D
    imapd, deliver = sys.argv[1], sys.argv[2]
    rc = 0
    for tests in ([test_back_to_not_authenticated], [test_ids], [test_preview], [test_partial],
                  [test_savedate], [test_replace], [test_acl],
                  [test_qresync_uid]):
        D = Imapd(imapd, deliver=deliver)  # each on a fresh imapd and store
        rc |= run_suite(D, tests, D.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
