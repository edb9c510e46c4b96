"""imapd end to end: APPEND ... CATENATE (RFC 4469) with TEXT parts, raw dialogues: the parts
assembled byte-exact into one message (synchronizing, non-synchronizing and byte-at-a-time),
with MULTIAPPEND, [TOOBIG] over max_append_size, syntax errors; URL parts (absolute, path
and relative to the selected mailbox, whole messages and sections) copied byte-exact, and
NO [BADURL url] for each way a URL cannot resolve.

Usage: test_imapd_catenate.py IMAPD_BINARY DELIVER_BINARY"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite  # noqa: E402
from heronlib import assert_eq, assert_in  # noqa: E402
D = None  # the imapd the running tests talk to

HEAD = b"From: a@example.org\r\nSubject: cat\r\n\r\n"
BODY1 = b"first part\r\n"
BODY2 = b"second part, no final CRLF"


def fetch_whole(r, uid):
    """BODY.PEEK[] of uid in the selected mailbox, as bytes."""
    r.send("f UID FETCH %d BODY.PEEK[]\r\n" % uid)
    line = r.line()
    assert line.endswith("}"), line
    n = int(line[line.rindex("{") + 1:-1])
    data = r.read(n)
    rest = r.until_tag("f")
    assert rest[-1].startswith("f OK"), rest
    return data


def appenduid(line, tag):
    assert line.startswith(tag + " OK [APPENDUID "), line
    return [int(x) for x in line.split()[4].rstrip("]").replace(":", ",").split(",")]


def test_text_parts_sync():
    r = D.raw()
    assert_in(" CATENATE ", r.cmd("c", "CAPABILITY")[0] + " ")
    r.send(b"a APPEND INBOX (\\Seen) CATENATE (TEXT {%d}\r\n" % len(HEAD))
    assert r.line().startswith("+ ")
    r.send(HEAD + b" TEXT {%d}\r\n" % len(BODY1))
    assert r.line().startswith("+ ")
    r.send(BODY1 + b" TEXT {0}\r\n")
    assert r.line().startswith("+ ")
    r.send(b" TEXT {%d}\r\n" % len(BODY2))
    assert r.line().startswith("+ ")
    r.send(BODY2 + b")\r\n")
    uid = appenduid(r.until_tag("a")[-1], "a")[0]
    assert r.cmd("s", "SELECT INBOX")[-1].startswith("s OK")
    assert_eq(fetch_whole(r, uid), HEAD + BODY1 + BODY2)
    assert_eq(r.cmd("g", "UID FETCH %d (FLAGS RFC822.SIZE)" % uid)[0],
              "* 1 FETCH (UID %d FLAGS (\\Seen \\Recent) RFC822.SIZE %d)"
              % (uid, len(HEAD + BODY1 + BODY2)))


def test_text_parts_nonsync_multiappend():
    r = D.raw()
    # two CATENATE messages and a plain one in one MULTIAPPEND, LITERAL+ throughout
    r.send(b"a APPEND INBOX CATENATE (TEXT {%d+}\r\n%s TEXT {%d+}\r\n%s)"
           b" {5+}\r\nplain"
           b" \"07-Feb-1994 21:52:25 -0800\" CATENATE (TEXT {%d+}\r\n%s)\r\n"
           % (len(HEAD), HEAD, len(BODY1), BODY1, len(BODY2), BODY2))
    uids = appenduid(r.until_tag("a")[-1], "a")  # "first:last", consecutive
    first = uids[0]
    assert_eq(uids, [first, first + 2])
    r.cmd("s", "SELECT INBOX")
    assert_eq(fetch_whole(r, first), HEAD + BODY1)
    assert_eq(fetch_whole(r, first + 1), b"plain")
    assert_eq(fetch_whole(r, first + 2), BODY2)


def test_byte_at_a_time():
    r = D.raw()
    cmd = (b"a APPEND INBOX CATENATE (TEXT {%d+}\r\n%s TEXT ~{%d+}\r\n%s)\r\n"
           % (len(HEAD), HEAD, len(BODY1), BODY1))
    for i in range(len(cmd)):
        r.send(cmd[i:i + 1])
    uid = appenduid(r.until_tag("a")[-1], "a")[0]
    r.cmd("s", "SELECT INBOX")
    assert_eq(fetch_whole(r, uid), HEAD + BODY1)


def test_toobig():
    r = D.raw()
    # max_append_size is 2k: each part fits, the two together do not
    r.send(b"a APPEND INBOX CATENATE (TEXT {1200}\r\n")
    assert r.line().startswith("+ ")
    r.send(b"x" * 1200 + b" TEXT {1200}\r\n")
    assert_eq(r.until_tag("a"), ["a NO [TOOBIG] Message too large"])
    # the refused synchronizing literal was not sent: the connection goes on
    assert_eq(r.cmd("n", "NOOP"), ["n OK Completed"])
    out = r.cmd("s", "STATUS INBOX (MESSAGES)")
    assert_eq(out[0], "* STATUS INBOX (MESSAGES 0)")


def test_syntax_and_urls():
    r = D.raw()
    for text, want in [
            ("CATENATE ()", "b BAD Expected: CATENATE (TEXT literal|URL url ...)"),
            ("CATENATE (TEXT)", "b BAD Expected: CATENATE (TEXT literal|URL url ...)"),
            ("CATENATE (URL)", "b BAD Expected: CATENATE (TEXT literal|URL url ...)"),
            ("CATENATE (FOO \"x\")", "b BAD Expected: CATENATE (TEXT literal|URL url ...)"),
            ("CATENATE (URL (x))", "b BAD Expected: CATENATE (TEXT literal|URL url ...)"),
            ("CATENATE", "b BAD Expected: CATENATE (TEXT literal|URL url ...)"),
            ('CATENATE (URL "/INBOX/;UID=1")',
             "b NO [BADURL /INBOX/;UID=1] URL does not resolve"),
            ('CATENATE (URL "x]y\\\\z")', "b NO [BADURL x?y\\z] URL does not resolve"),
    ]:
        assert_eq(r.cmd("b", "APPEND INBOX " + text), [want])
    # a URL next to TEXT parts (relative, and no mailbox is selected): the TEXT data was
    # read, nothing is appended
    r.send(b'c APPEND INBOX CATENATE (TEXT {3+}\r\nabc URL ";UID=1" TEXT {2+}\r\nde)\r\n')
    assert_eq(r.until_tag("c"), ["c NO [BADURL ;UID=1] URL does not resolve"])
    # REPLACE takes no CATENATE
    assert_eq(r.cmd("s", "SELECT INBOX")[-1][:4], "s OK")
    assert_eq(r.cmd("d", 'REPLACE 1 INBOX CATENATE (URL "x")'),
              ["d BAD Expected: REPLACE n mailbox [(flags)] [date-time] literal|UTF8 (literal8)"])
    out = r.cmd("e", "STATUS INBOX (MESSAGES)")
    assert_eq(out[0], "* STATUS INBOX (MESSAGES 0)")


SRC = (b"From: b@example.org\r\nSubject: src\r\nMIME-Version: 1.0\r\n"
       b"Content-Type: multipart/mixed; boundary=XX\r\n\r\n"
       b"--XX\r\nContent-Type: text/plain\r\n\r\npart one\r\n"
       b"--XX\r\nContent-Type: text/html\r\n\r\n<p>part two</p>\r\n--XX--\r\n")
HOSTNAME = "imap.heron.test"


def append_plain(r, mailbox, msg):
    """APPENDs msg (LITERAL+) to mailbox: its UID and the mailbox's UIDVALIDITY."""
    r.send(b"p APPEND %s {%d+}\r\n%s\r\n" % (mailbox.encode(), len(msg), msg))
    line = r.until_tag("p")[-1]
    return appenduid(line, "p")[0], int(line.split()[3])


def catenate(r, tag, parts, mailbox="INBOX"):
    """APPEND mailbox CATENATE (parts): bytes are TEXT literals (LITERAL+), str are URLs.
    The tagged reply."""
    cmd = b"%s APPEND %s CATENATE (" % (tag.encode(), mailbox.encode())
    for i, p in enumerate(parts):
        cmd += b" " if i else b""
        if isinstance(p, bytes):
            cmd += b"TEXT {%d+}\r\n%s" % (len(p), p)
        else:
            cmd += b'URL "%s"' % p.encode()
    r.send(cmd + b")\r\n")
    return r.until_tag(tag)[-1]


def test_url_whole_message():
    r = D.raw()
    uid, uv = append_plain(r, "INBOX", SRC)
    head = b"From: a@example.org\r\nSubject: fwd\r\n\r\n"
    for url in ["imap://alice@%s/INBOX;UIDVALIDITY=%d/;UID=%d" % (HOSTNAME, uv, uid),
                "/INBOX/;UID=%d" % uid, "/inbox;UIDVALIDITY=%d/;uid=%d" % (uv, uid)]:
        new = appenduid(catenate(r, "a", [head, url, b"\r\n-- \r\nsig\r\n"]), "a")[0]
        assert_eq(r.cmd("s", "SELECT INBOX")[-1][:4], "s OK")
        assert_eq(fetch_whole(r, new), head + SRC + b"\r\n-- \r\nsig\r\n")
        assert_eq(r.cmd("u", "UNSELECT")[-1][:4], "u OK")
    # the mailbox name in a URL is UTF-8 (RFC 5092), percent-encoded, the session's not
    assert_eq(r.cmd("c", "CREATE Entw&APw-rfe")[-1][:4], "c OK")
    uid2, _ = append_plain(r, "Entw&APw-rfe", b"Subject: draft\r\n\r\nd\r\n")
    new = appenduid(catenate(r, "a", ["/Entw%%C3%%BCrfe/;UID=%d" % uid2]), "a")[0]
    r.cmd("s", "SELECT INBOX")
    assert_eq(fetch_whole(r, new), b"Subject: draft\r\n\r\nd\r\n")
    assert_eq(catenate(r, "b", ["/Entw&APw-rfe/;UID=%d" % uid2]),
              "b NO [BADURL /Entw&APw-rfe/;UID=%d] URL does not resolve" % uid2)
    # a message of one URL only, into another mailbox: a copy
    assert_eq(r.cmd("c", "CREATE Drafts")[-1][:4], "c OK")
    new = appenduid(catenate(r, "b", ["/INBOX/;UID=%d" % uid], "Drafts"), "b")[0]
    r.cmd("s", "SELECT Drafts")
    assert_eq(fetch_whole(r, new), SRC)


def test_url_sections():
    r = D.raw()
    uid, _ = append_plain(r, "INBOX", SRC)
    r.cmd("s", "SELECT INBOX")
    for sec, part in [("1", b"part one"), ("2", b"<p>part two</p>"),
                      ("2.MIME", b"Content-Type: text/html\r\n\r\n")]:
        new = appenduid(catenate(r, "a", [b"[", "/INBOX/;UID=%d/;SECTION=%s" % (uid, sec),
                                          b"]"]), "a")[0]
        assert_eq(fetch_whole(r, new), b"[" + part + b"]")
    # HEADER.FIELDS[.NOT], made as FETCH makes it
    fields = b"From: b@example.org\r\nSubject: src\r\n\r\n"
    out = r.cmd("f", "UID FETCH %d BODY.PEEK[HEADER.FIELDS (Subject From)]" % uid)
    assert_in("{%d}" % len(fields), out[0])
    for sec, part in [("HEADER.FIELDS%20(Subject%20From)", fields),
                      ("HEADER.FIELDS.NOT%20(MIME-Version%20Content-Type)", fields),
                      ("HEADER.FIELDS%20(Subject)/;PARTIAL=2.5", b"bject")]:
        new = appenduid(catenate(r, "a", ["/INBOX/;UID=%d/;SECTION=%s" % (uid, sec)]), "a")[0]
        assert_eq(fetch_whole(r, new), part)
    # ;PARTIAL=o.l (RFC 5092) of a section and of the message; past the end: nothing
    for url, part in [("/INBOX/;UID=%d/;SECTION=1/;PARTIAL=5.3" % uid, b"one"),
                      ("/INBOX/;UID=%d/;PARTIAL=6" % uid, SRC[6:]),
                      ("/INBOX/;UID=%d/;PARTIAL=0.4" % uid, SRC[:4]),
                      ("/INBOX/;UID=%d/;SECTION=2/;PARTIAL=500.4" % uid, b"")]:
        new = appenduid(catenate(r, "a", [b"<", url, b">"]), "a")[0]
        assert_eq(fetch_whole(r, new), b"<" + part + b">")
    head = SRC[:SRC.index(b"\r\n\r\n") + 4]
    for sec, part in [("HEADER", head), ("TEXT", SRC[len(head):])]:
        new = appenduid(catenate(r, "a", ["/INBOX/;UID=%d/;SECTION=%s" % (uid, sec)]), "a")[0]
        assert_eq(fetch_whole(r, new), part)


def test_url_relative_selected():
    r = D.raw()
    assert_eq(r.cmd("c", "CREATE Other")[-1][:4], "c OK")
    uid, _ = append_plain(r, "Other", SRC)
    # relative to the selected mailbox (RFC 4469 5), appended to another one
    r.cmd("s", "SELECT Other")
    new = appenduid(catenate(r, "a", [b"x:", ";UID=%d/;SECTION=1" % uid], "INBOX"), "a")[0]
    r.cmd("s", "SELECT INBOX")
    assert_eq(fetch_whole(r, new), b"x:part one")
    # now INBOX is selected: Other's UID is not in it
    assert_eq(catenate(r, "b", [";UID=%d" % (uid + 50)]),
              "b NO [BADURL ;UID=%d] URL does not resolve" % (uid + 50))


def test_url_badurl():
    r = D.raw()
    uid, uv = append_plain(r, "INBOX", SRC)
    bob = D.raw("bob")
    assert_eq(bob.cmd("c", "CREATE OnlyBob")[-1][:4], "c OK")
    bob_uid, _ = append_plain(bob, "OnlyBob", b"Subject: bob's\r\n\r\nsecret\r\n")
    before = r.cmd("t", "STATUS INBOX (MESSAGES)")[0]
    for url in [
            "/NoSuchBox/;UID=%d" % uid,                                        # no mailbox
            "/INBOX;UIDVALIDITY=%d/;UID=%d" % (uv + 1, uid),                   # UIDVALIDITY
            "/INBOX/;UID=%d" % (uid + 100),                                    # no UID
            "/OnlyBob/;UID=%d" % bob_uid,                                      # bob's mailbox
            "imap://bob@%s/OnlyBob/;UID=%d" % (HOSTNAME, bob_uid),             # other user
            "imap://alice@other.example/INBOX/;UID=%d" % uid,                  # other server
            "imap://%s/INBOX/;UID=%d" % (HOSTNAME, uid),                       # anonymous
            "imap://alice@%s/INBOX/;UID=%d;EXPIRE=2030-01-01T00:00:00Z"
            ";URLAUTH=anonymous:internal:0123456789abcdef0123456789abcdef" % (HOSTNAME, uid),
            "/INBOX/;UID=%d/;SECTION=9" % uid,                                 # no such part
            "/INBOX/;UID=%d/;SECTION=1.HEADER.FIELDS%%20(From)" % uid,        # not a message
            ";UID=%d" % uid,                                                   # none selected
    ]:
        assert_eq(catenate(r, "a", [b"text", url, b"more"]),
                  "a NO [BADURL %s] URL does not resolve" % url)
    # a later message's bad URL refuses the whole MULTIAPPEND
    r.send(b'b APPEND INBOX {4+}\r\nfine CATENATE (URL "/INBOX/;UID=%d")'
           b' CATENATE (URL "/INBOX/;UID=%d")\r\n' % (uid, uid + 100))
    assert_eq(r.until_tag("b"), ["b NO [BADURL /INBOX/;UID=%d] URL does not resolve"
                                 % (uid + 100)])
    assert_eq(r.cmd("t", "STATUS INBOX (MESSAGES)")[0], before)


def test_url_toobig():
    r = D.raw()
    big = b"Subject: big\r\n\r\n" + b"y" * 1500 + b"\r\n"
    uid, _ = append_plain(r, "INBOX", big)
    before = r.cmd("t", "STATUS INBOX (MESSAGES)")[0]
    # max_append_size 2k: the URL's bytes count with the TEXT parts'
    assert_eq(catenate(r, "a", [b"z" * 600, "/INBOX/;UID=%d" % uid]),
              "a NO [TOOBIG] Message too large")
    assert_eq(catenate(r, "b", ["/INBOX/;UID=%d" % uid, "/INBOX/;UID=%d" % uid]),
              "b NO [TOOBIG] Message too large")
    assert_eq(r.cmd("t", "STATUS INBOX (MESSAGES)")[0], before)
    # just under the limit: fine
    appenduid(catenate(r, "c", [b"z" * 100, "/INBOX/;UID=%d" % uid]), "c")


def main():
    global D
    imapd, deliver = sys.argv[1], sys.argv[2]
    rc = 0
    for tests in ([test_text_parts_sync, test_text_parts_nonsync_multiappend,
                   test_byte_at_a_time, test_url_whole_message, test_url_sections,
                   test_url_relative_selected, test_url_badurl, test_url_toobig],
                  [test_toobig, test_syntax_and_urls]):
        D = Imapd(imapd, deliver=deliver, extra={"max_append_size": "2k", "hostname": HOSTNAME})
        rc |= run_suite(D, tests, D.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
