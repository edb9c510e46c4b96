"""imapd end to end: APPEND ... CATENATE (RFC 4469) with TEXT parts, raw dialogues: the parts
assembled byte-exact into one message (synchronizing, non-synchronizing and byte-at-a-time),
with MULTIAPPEND, [TOOBIG] over max_append_size, syntax errors, and [BADURL] for URL parts
(not served yet, so CATENATE is not advertised).

Usage: test_imapd_catenate.py IMAPD_BINARY DELIVER_BINARY"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite  # noqa: E402
from heronlib import assert_eq, assert_not_in  # noqa: E402
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
    assert_not_in(" CATENATE", r.cmd("c", "CAPABILITY")[0])
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
             "b NO [BADURL /INBOX/;UID=1] URL parts are not served"),
            ('CATENATE (URL "x]y\\\\z")', "b NO [BADURL x?y\\z] URL parts are not served"),
    ]:
        assert_eq(r.cmd("b", "APPEND INBOX " + text), [want])
    # a URL next to TEXT parts: the TEXT data was read, nothing is appended
    r.send(b'c APPEND INBOX CATENATE (TEXT {3+}\r\nabc URL ";UID=1" TEXT {2+}\r\nde)\r\n')
    assert_eq(r.until_tag("c"), ["c NO [BADURL ;UID=1] URL parts are not served"])
    # REPLACE takes no CATENATE
    assert_eq(r.cmd("s", "SELECT INBOX")[-1][:4], "s OK")
    assert_eq(r.cmd("d", 'REPLACE 1 INBOX CATENATE (URL "x")'),
              ["d BAD Expected: REPLACE n mailbox [(flags)] [date-time] literal|UTF8 (literal8)"])
    out = r.cmd("e", "STATUS INBOX (MESSAGES)")
    assert_eq(out[0], "* STATUS INBOX (MESSAGES 0)")


def main():
    global D
    imapd, deliver = sys.argv[1], sys.argv[2]
    rc = 0
    for tests in ([test_text_parts_sync, test_text_parts_nonsync_multiappend,
                   test_byte_at_a_time], [test_toobig, test_syntax_and_urls]):
        D = Imapd(imapd, deliver=deliver, extra={"max_append_size": "2k"})
        rc |= run_suite(D, tests, D.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
