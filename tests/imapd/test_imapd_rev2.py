"""imapd end to end: IMAP4rev2 (RFC 9051) after ENABLE IMAP4rev2, checked on the wire with the
exact responses expected, beside an IMAP4rev1 session on the same mailboxes.

Usage: test_imapd_rev2.py IMAPD_BINARY DELIVER_BINARY"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite, without_objectid  # noqa: E402
from heronlib import assert_eq, assert_in, assert_re  # noqa: E402
from messages import SIMPLE, NESTED  # noqa: E402

D = None  # the imapd the running tests talk to


def rev2():
    r = D.raw("bob")
    assert_eq(r.cmd("e", "ENABLE IMAP4rev2"), ["* ENABLED IMAP4rev2", "e OK Enabled"])
    assert_eq(r.cmd("e2", "ENABLE IMAP4rev2"), ["* ENABLED", "e2 OK Enabled"])
    return r


def test_capability():
    r = D.raw(login=False)
    caps = r.cmd("a", "CAPABILITY")[0].split()
    assert_eq(caps[2:4], ["IMAP4rev1", "IMAP4rev2"])


def test_utf8_names():
    r = rev2()
    old = D.raw("bob")
    assert_eq(without_objectid(r.cmd("a", 'CREATE "Entwürfe"')),
              ["a OK CREATE completed"])
    assert_eq(without_objectid(r.cmd("b", 'CREATE "R&D/日本"')),
              ["b OK CREATE completed"])
    assert_eq(r.cmd("c", 'LIST "" "Entw*"'), [
        '* LIST (\\HasNoChildren) "/" "Entwürfe"', "c OK List completed"])
    assert_eq(r.cmd("d", 'LIST "" "R&D/*"'), [
        '* LIST (\\HasNoChildren) "/" "R&D/日本"', "d OK List completed"])
    # the rev1 session sees the same mailboxes in modified UTF-7
    assert_eq(old.cmd("e", 'LIST "" Entw*'), [
        '* LIST (\\HasNoChildren) "/" Entw&APw-rfe', "e OK List completed"])
    assert_eq(old.cmd("f", 'LIST "" R&-D/*'), [
        '* LIST (\\HasNoChildren) "/" R&-D/&ZeVnLA-', "f OK List completed"])
    # after ENABLE IMAP4rev2 "&" is an ampersand, not a shift into modified UTF-7
    assert_eq(r.cmd("g", 'STATUS "Entw&APw-rfe" (MESSAGES)')[0][:5], "g NO ")
    assert_eq(r.cmd("h", 'STATUS "Entwürfe" (MESSAGES DELETED)'), [
        '* STATUS "Entwürfe" (MESSAGES 0 DELETED 0)', "h OK STATUS completed"])
    r.send(b'i CREATE "bad\xff"\r\n')
    assert_eq(r.until_tag("i"), ["i NO Mailbox name is not valid UTF-8"])
    assert_eq(r.cmd("j", 'RENAME "Entwürfe" "Brouillons/été"'),
              ["j OK RENAME completed"])
    assert_eq(old.cmd("k", 'LIST "" Brouillons/*'), [
        '* LIST (\\HasNoChildren) "/" Brouillons/&AOk-t&AOk-', "k OK List completed"])


def test_select_search_status():
    r = rev2()
    r.cmd("a", "CREATE Rv")
    r.append(SIMPLE, "Rv")
    r.append(NESTED, "Rv", "(\\Deleted)")
    assert_eq(r.cmd("b", "STATUS Rv (MESSAGES DELETED SIZE)"), [
        "* STATUS Rv (MESSAGES 2 DELETED 1 SIZE %d)" % (len(SIMPLE) + len(NESTED)),
        "b OK STATUS completed"])
    assert_eq(r.cmd("c", "STATUS Rv (RECENT)"), ["c BAD Unknown STATUS item"])
    out = without_objectid(r.cmd("s", "SELECT Rv"))
    uidv = out[4].split()[3].rstrip("]")
    assert_eq(out, [
        "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)",
        "* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)] Flags "
        "permitted",
        '* LIST (\\HasNoChildren) "/" Rv',
        "* 2 EXISTS",
        "* OK [UIDVALIDITY %s] UIDs valid" % uidv, "* OK [UIDNEXT 3] Predicted next UID",
        "* OK [HIGHESTMODSEQ %s] Highest" % out[6].split()[3].rstrip("]"),
        "* OK [URLMECH INTERNAL] URLAUTH mechanisms",
        "s OK [READ-WRITE] SELECT completed"])
    # the messages are \Recent for this session, and a rev2 session never says so
    assert_eq(r.cmd("d", "FETCH 1:2 FLAGS"), [
        "* 1 FETCH (FLAGS ())", "* 2 FETCH (FLAGS (\\Deleted))", "d OK Fetch completed"])
    assert_eq(r.cmd("f", "SEARCH ALL"),
              ['* ESEARCH (TAG "f") ALL 1:2', "f OK SEARCH completed"])
    assert_eq(r.cmd("g", "UID SEARCH SUBJECT lunch"),
              ['* ESEARCH (TAG "g") UID ALL 1', "g OK SEARCH completed"])
    assert_eq(r.cmd("h", "SEARCH SUBJECT nowhere"),
              ['* ESEARCH (TAG "h")', "h OK SEARCH completed"])
    assert_eq(r.cmd("i", "SEARCH RETURN (COUNT) DELETED"),
              ['* ESEARCH (TAG "i") COUNT 1', "i OK SEARCH completed"])
    assert_eq(r.cmd("j", "SEARCH RECENT"), ["j BAD IMAP4rev2 has no \\Recent"])
    # new mail: EXISTS and no RECENT
    D.raw("bob").append(SIMPLE, "Rv")
    assert_eq(r.cmd("k", "NOOP"), ["* 3 EXISTS", "k OK Completed"])


def test_check_removed():
    # RFC 9051 removed CHECK (clients use NOOP): unknown once IMAP4rev2 is enabled, in any
    # state, while a rev1 session keeps it
    r = rev2()
    assert_eq(r.cmd("a", "CHECK"), ["a BAD Unknown command in IMAP4rev2 (use NOOP)"])
    assert_eq(r.cmd("b", "SELECT INBOX")[-1], "b OK [READ-WRITE] SELECT completed")
    assert_eq(r.cmd("c", "CHECK"), ["c BAD Unknown command in IMAP4rev2 (use NOOP)"])
    assert_eq(r.cmd("d", "NOOP"), ["d OK Completed"])
    old = D.raw("bob")
    old.cmd("e", "SELECT INBOX")
    assert_eq(old.cmd("f", "CHECK"), ["f OK Completed"])


def test_lsub_as_list():
    r = rev2()
    r.cmd("a", "CREATE Ls2")
    r.cmd("b", "SUBSCRIBE Ls2")
    r.cmd("c", "SUBSCRIBE Ls2gone")
    assert_eq(r.cmd("d", 'LSUB "" Ls2*'), [
        '* LIST (\\HasNoChildren \\Subscribed) "/" Ls2',
        '* LIST (\\NonExistent \\Subscribed) "/" Ls2gone', "d OK Lsub completed"])
    r.cmd("e", "UNSUBSCRIBE Ls2gone")


"""RFC 6855: UTF-8 mailbox names and strings without the rest of IMAP4rev2."""


def utf8():
    r = D.raw("carol")
    assert_eq(r.cmd("e", "ENABLE UTF8=ACCEPT"),
              ["* ENABLED UTF8=ACCEPT", "e OK Enabled"])
    return r


def test_names_and_search():
    r = utf8()
    old = D.raw("carol")
    assert_eq(without_objectid(r.cmd("a", 'CREATE "Réseau"')),
              ["a OK CREATE completed"])
    assert_eq(r.cmd("b", 'LIST "" "R*"'), [
        '* LIST (\\HasNoChildren) "/" "Réseau"', "b OK List completed"])
    assert_eq(old.cmd("c", 'LIST "" "R*"'), [
        '* LIST (\\HasNoChildren) "/" R&AOk-seau', "c OK List completed"])
    msg = ("Subject: café noir\r\nFrom: Zoë <zoe@heron.test>\r\n\r\nbody\r\n").encode()
    r.send(b'd APPEND "R\xc3\xa9seau" UTF8 (~{%d}\r\n' % len(msg))
    assert_eq(r.line(), "+ Ready for literal data")
    r.send(msg + b")\r\n")
    assert_re(r.until_tag("d")[-1], r"^d OK \[APPENDUID \d+ 1\] APPEND completed$")
    # not a rev2 session: \Recent stays
    out = r.cmd("s", 'SELECT "Réseau"')
    assert_in("* 1 RECENT", out)
    assert_eq(r.cmd("f", 'SEARCH SUBJECT "café"'), ["* SEARCH 1", "f OK SEARCH completed"])
    assert_eq(r.cmd("g", 'SEARCH CHARSET UTF-8 SUBJECT "café"'),
              ["g BAD No CHARSET after ENABLE UTF8=ACCEPT"])
    assert_eq(r.cmd("h", "FETCH 1 BODY.PEEK[HEADER.FIELDS (SUBJECT)]"), [
        "* 1 FETCH (BODY[HEADER.FIELDS (SUBJECT)] {23}\r\nSubject: café noir\r\n\r\n)",
        "h OK Fetch completed"])
    # without ENABLE: no UTF8 data item, and CHARSET is fine
    old.send(b"i APPEND INBOX UTF8 (~{%d+}\r\n%s)\r\n" % (len(msg), msg))
    assert_eq(old.until_tag("i"), ["i BAD UTF8 needs ENABLE UTF8=ACCEPT first"])
    old.cmd("j", "SELECT R&AOk-seau")
    assert_eq(old.cmd("k", 'SEARCH CHARSET UTF-8 SUBJECT "café"'),
              ["* SEARCH 1", "k OK SEARCH completed"])


def main():
    global D
    imapd, deliver = sys.argv[1], sys.argv[2]
    groups = [  # each group on a fresh imapd and store
        [test_capability, test_utf8_names, test_select_search_status, test_check_removed,
         test_lsub_as_list],
        [test_names_and_search],
    ]
    rc = 0
    for tests in groups:
        D = Imapd(imapd, deliver=deliver)
        rc |= run_suite(D, tests, D.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
