"""imapd end to end: protocol corners a strict compliance run checks, one raw dialogue each with
the exact responses: '[' and ']' inside atoms, sequence numbers past EXISTS in SEARCH, ESEARCH
MIN/MAX with MODSEQ and SAVE, the first CONDSTORE enabling command, BINARY literal8 and
quoted-printable soft line breaks with transport padding, LIST (SUBSCRIBED RECURSIVEMATCH),
LSUB's \\Noselect parents, SEARCH FROM/TO on parsed addresses, and a keyword another session
made announced in FLAGS before a FETCH names it.

Usage: test_imapd_corners.py IMAPD_BINARY DELIVER_BINARY"""
import base64
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite, without_objectid  # noqa: E402
from heronlib import assert_eq  # noqa: E402

D = None  # the imapd the running tests talk to

PLAIN = b"From: a@heron.test\r\nSubject: %d\r\n\r\nbody %d\r\n"
ODD_FROM = (b"From: <user-from (comment)@ (comment) domain.org>\r\n"
            b"To: \"Bob B\" <bob@x.example>, =?utf-8?q?J=C3=BCrgen?= <j@y.example>\r\n"
            b"Subject: addresses\r\n\r\nhello\r\n")
QP_PADDED = (
    b"From: a@heron.test\r\nSubject: qp\r\nMIME-Version: 1.0\r\n"
    b"Content-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
    b"zeb=  \r\nra= \t\r\nfoo= x=3D\r\n")
NULS = (
    b"From: a@heron.test\r\nSubject: nul\r\nMIME-Version: 1.0\r\n"
    b"Content-Type: multipart/mixed; boundary=b\r\n\r\n"
    b"--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
    base64.b64encode(b"ab\0cd") + b"\r\n"
    b"--b\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
    b"x=00y\r\n"
    b"--b\r\nContent-Type: text/plain\r\n\r\nno nul\r\n--b--\r\n")
ATOM = "!#$&'+,-.0123456789:;<=>?@^_`|[}"


def make_user():
    D.raw()  # the first login makes the user's store record


def fill(n, msg=None):
    for i in range(n):
        D.deliver("alice", msg if msg is not None else PLAIN % (i, i))


def selected():
    r = D.raw()
    assert r.cmd("s", "SELECT INBOX")[-1].startswith("s OK")
    return r


def test_brackets_in_atoms():
    r = D.raw()
    out = r.cmd("a", "SELECT " + ATOM)
    assert_eq(len(out), 1)
    assert out[0].startswith("a NO "), out
    assert_eq(r.cmd("b", 'LIST "" %s%%*' % ATOM), ["b OK List completed"])
    assert_eq(without_objectid(r.cmd("c", "CREATE x[y")), ["c OK CREATE completed"])
    assert_eq(without_objectid(r.cmd("d", "CREATE q]r")), ["d OK CREATE completed"])
    assert_eq(r.cmd("e", 'LIST "" x[*'),
              ['* LIST (\\HasNoChildren) "/" x[y', "e OK List completed"])
    assert_eq(r.cmd("f", "EXAMINE q]r")[-1], "f OK [READ-ONLY] EXAMINE completed")
    assert_eq(r.cmd("g", 'STATUS x[y (MESSAGES)'),
              ['* STATUS x[y (MESSAGES 0)', "g OK STATUS completed"])


def test_search_past_exists():
    fill(3)
    r = selected()
    for key, want in [("1000", "* SEARCH"), ("3:1000", "* SEARCH 3"),
                      ("2:*", "* SEARCH 2 3"), ("OR 1000 1", "* SEARCH 1"),
                      ("NOT 5:9", "* SEARCH 1 2 3")]:
        assert_eq(r.cmd("a", "SEARCH " + key), [want, "a OK SEARCH completed"], key)
    assert_eq(r.cmd("b", "SEARCH RETURN (MIN) 1000"),
              ['* ESEARCH (TAG "b")', "b OK SEARCH completed"])
    assert_eq(r.cmd("c", "UID SEARCH 1000"), ["* SEARCH", "c OK SEARCH completed"])
    assert_eq(r.cmd("d", "SEARCH 1:x"), ["d BAD Invalid sequence set"])


def test_first_condstore_command_sends_highestmodseq():
    fill(2)
    r = selected()
    r.cmd("a", "STORE 2 +FLAGS.SILENT (\\Flagged)")  # not CONDSTORE enabling
    out = r.cmd("b", "FETCH 1 MODSEQ")
    assert_eq(out[0], "* OK [HIGHESTMODSEQ 4] Highest")
    assert_eq(out[1:], ["* 1 FETCH (MODSEQ (2))", "b OK Fetch completed"])
    assert_eq(r.cmd("c", "FETCH 1 MODSEQ"),
              ["* 1 FETCH (MODSEQ (2))", "c OK Fetch completed"])
    r = selected()
    assert_eq(r.cmd("d", "SEARCH MODSEQ 3"), [
        "* OK [HIGHESTMODSEQ 4] Highest", "* SEARCH 2 (MODSEQ 4)", "d OK SEARCH completed"])
    r = selected()
    assert_eq(r.cmd("e", "ENABLE CONDSTORE"), [
        "* ENABLED CONDSTORE", "* OK [HIGHESTMODSEQ 4] Highest", "e OK Enabled"])
    r = D.raw()  # nothing selected: nothing to say
    assert_eq(r.cmd("f", "ENABLE CONDSTORE"), ["* ENABLED CONDSTORE", "f OK Enabled"])


def test_esearch_min_max_modseq():
    fill(3)  # modseqs 2 3 4
    r = selected()
    r.cmd("a", "STORE 2 +FLAGS.SILENT (\\Flagged)")  # message 2 now has modseq 5
    r.cmd("b", "ENABLE CONDSTORE")
    for ret, want in [("MIN", "MIN 1 MODSEQ 2"), ("MAX", "MAX 3 MODSEQ 4"),
                      ("MIN MAX", "MIN 1 MAX 3 MODSEQ 4"),
                      ("MIN COUNT", "MIN 1 COUNT 3 MODSEQ 5"), ("ALL", "ALL 1:3 MODSEQ 5")]:
        assert_eq(r.cmd("c", "SEARCH RETURN (%s) MODSEQ 1" % ret),
                  ['* ESEARCH (TAG "c") ' + want, "c OK SEARCH completed"], ret)
    assert_eq(r.cmd("d", "UID SEARCH RETURN (MAX) MODSEQ 1"),
              ['* ESEARCH (TAG "d") UID MAX 3 MODSEQ 4', "d OK SEARCH completed"])
    # SAVE with MIN/MAX alone keeps only what they return (RFC 5182 2.4)
    assert_eq(r.cmd("e", "SEARCH RETURN (MIN MAX SAVE) ALL"),
              ['* ESEARCH (TAG "e") MIN 1 MAX 3', "e OK SEARCH completed"])
    assert_eq(r.cmd("f", "SEARCH $"), ["* SEARCH 1 3", "f OK SEARCH completed"])
    assert_eq(r.cmd("g", "SEARCH RETURN (SAVE MIN COUNT) ALL"),
              ['* ESEARCH (TAG "g") MIN 1 COUNT 3', "g OK SEARCH completed"])
    assert_eq(r.cmd("h", "SEARCH $"), ["* SEARCH 1 2 3", "h OK SEARCH completed"])


def fetch_raw(r, tag, items):
    r.send("%s FETCH 1 %s\r\n" % (tag, items))
    data = b""
    while not data.endswith(("%s OK Fetch completed\r\n" % tag).encode()):
        data += r.s.recv(65536) if not r.buf else r.buf
        r.buf = b""
    return data


def test_binary_nul_is_literal8():
    fill(1, NULS)
    r = selected()
    assert_eq(fetch_raw(r, "a", "(BINARY.SIZE[1] BINARY.PEEK[1])"),
              b"* 1 FETCH (BINARY.SIZE[1] 5 BINARY[1] ~{5}\r\nab\0cd)\r\n"
              b"a OK Fetch completed\r\n")
    assert_eq(fetch_raw(r, "b", "(BINARY.SIZE[2] BINARY.PEEK[2])"),
              b"* 1 FETCH (BINARY.SIZE[2] 3 BINARY[2] ~{3}\r\nx\0y)\r\n"
              b"b OK Fetch completed\r\n")
    assert_eq(fetch_raw(r, "c", "BINARY.PEEK[2]<0.1>"),
              b"* 1 FETCH (BINARY[2]<0> ~{1}\r\nx)\r\nc OK Fetch completed\r\n")
    assert_eq(fetch_raw(r, "d", "BINARY.PEEK[3]"),
              b"* 1 FETCH (BINARY[3] {6}\r\nno nul)\r\nd OK Fetch completed\r\n")


def test_qp_soft_break_with_padding():
    fill(1, QP_PADDED)
    r = selected()
    assert_eq(fetch_raw(r, "a", "(BINARY.SIZE[1] BINARY.PEEK[1])"),
              b"* 1 FETCH (BINARY.SIZE[1] 14 BINARY[1] {14}\r\nzebrafoo= x=\r\n)\r\n"
              b"a OK Fetch completed\r\n")
    assert_eq(fetch_raw(r, "b", "BINARY.PEEK[1]<2.4>"),
              b"* 1 FETCH (BINARY[1]<2> {4}\r\nbraf)\r\nb OK Fetch completed\r\n")
    assert_eq(r.cmd("c", "SEARCH BODY zebra"), ["* SEARCH 1", "c OK SEARCH completed"])


def subscriptions(r):
    for n in ["a", "a/b", "c/d/e", "t", "t/u"]:
        r.cmd("m", "CREATE " + n)
    for n in ["a/b", "c/d/e", "x/y", "t", "t/u/v"]:
        r.cmd("m", "SUBSCRIBE " + n)
    r.cmd("m", "DELETE c/d/e")


def test_list_recursivematch():
    r = D.raw()
    subscriptions(r)
    assert_eq(r.cmd("a", 'LIST (SUBSCRIBED RECURSIVEMATCH) "" % RETURN (CHILDREN)'), [
        '* LIST (\\HasNoChildren \\Subscribed) "/" INBOX',
        '* LIST (\\HasChildren \\Subscribed) "/" t ("CHILDINFO" ("SUBSCRIBED"))',
        '* LIST (\\HasChildren) "/" a ("CHILDINFO" ("SUBSCRIBED"))',
        '* LIST (\\HasChildren) "/" c ("CHILDINFO" ("SUBSCRIBED"))',
        '* LIST (\\NonExistent) "/" x ("CHILDINFO" ("SUBSCRIBED"))',
        "a OK List completed"])
    # every subscription matches "*" itself: no parent speaks for one
    assert_eq(r.cmd("b", 'LIST (SUBSCRIBED RECURSIVEMATCH) "" * RETURN (CHILDREN)'), [
        '* LIST (\\HasNoChildren \\Subscribed) "/" INBOX',
        '* LIST (\\HasNoChildren \\Subscribed) "/" a/b',
        '* LIST (\\NonExistent \\Subscribed) "/" c/d/e',
        '* LIST (\\HasChildren \\Subscribed) "/" t',
        '* LIST (\\NonExistent \\Subscribed) "/" t/u/v',
        '* LIST (\\NonExistent \\Subscribed) "/" x/y',
        "b OK List completed"])
    assert_eq(r.cmd("c", 'LIST (SUBSCRIBED RECURSIVEMATCH) "" c/%'), [
        '* LIST (\\HasNoChildren) "/" c/d ("CHILDINFO" ("SUBSCRIBED"))',
        "c OK List completed"])
    assert_eq(r.cmd("d", 'LIST (SUBSCRIBED RECURSIVEMATCH) "" a/b'), [
        '* LIST (\\HasNoChildren \\Subscribed) "/" a/b', "d OK List completed"])


def test_lsub_noselect_parents():
    r = D.raw()
    subscriptions(r)
    assert_eq(r.cmd("a", 'LSUB "" %'), [
        '* LSUB () "/" INBOX', '* LSUB () "/" t', '* LSUB (\\Noselect) "/" a',
        '* LSUB (\\Noselect) "/" c', '* LSUB (\\Noselect) "/" x', "a OK Lsub completed"])
    assert_eq(r.cmd("b", 'LSUB "" c/%'),
              ['* LSUB (\\Noselect) "/" c/d', "b OK Lsub completed"])
    assert_eq(r.cmd("c", 'LSUB "" x/%'),
              ['* LSUB (\\Noselect) "/" x/y', "c OK Lsub completed"])
    assert_eq(r.cmd("d", 'LSUB "" t/%'),
              ['* LSUB (\\Noselect) "/" t/u', "d OK Lsub completed"])
    assert_eq(r.cmd("e", 'LSUB "" a/%'), ['* LSUB () "/" a/b', "e OK Lsub completed"])


def test_search_parsed_addresses():
    fill(1, ODD_FROM)
    fill(1)
    r = selected()
    for key, want in [("FROM user-from@domain.org", "1"), ("FROM comment", "1"),
                      ('TO "Bob B <bob@x.example>"', "1"), ('TO "<j@y.example>"', "1"),
                      ("TO jurgen", ""), ("FROM heron.test", "2"), ("CC bob", ""),
                      ("HEADER From user-from@domain.org", "")]:
        assert_eq(r.cmd("a", "SEARCH " + key),
                  ["* SEARCH" + (" " + want if want else ""), "a OK SEARCH completed"],
                  key)
    r.send(b"b SEARCH CHARSET UTF-8 TO {7+}\r\nJ\xc3\x9cRGEN\r\n")
    assert_eq(r.until_tag("b"), ["* SEARCH 1", "b OK SEARCH completed"])


def test_keyword_announced_before_fetch():
    fill(1)
    a = selected()
    b = selected()
    assert_eq(a.cmd("a", "STORE 1 +FLAGS.SILENT (newkw)")[-1], "a OK STORE completed")
    assert_eq(b.cmd("b", "FETCH 1 FLAGS"), [
        "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft newkw)",
        "* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft newkw \\*)] "
        "Flags permitted",
        "* 1 FETCH (FLAGS (newkw))", "b OK Fetch completed"])
    assert_eq(b.cmd("c", "NOOP"), ["c OK Completed"])


def main():
    global D
    imapd, deliver = sys.argv[1], sys.argv[2]
    rc = 0
    for test in [test_brackets_in_atoms, test_search_past_exists,
                 test_first_condstore_command_sends_highestmodseq, test_esearch_min_max_modseq,
                 test_binary_nul_is_literal8, test_qp_soft_break_with_padding,
                 test_list_recursivematch, test_lsub_noselect_parents,
                 test_search_parsed_addresses, test_keyword_announced_before_fetch]:
        # a daemon of its own for each test: mailboxes, subscriptions and modseqs start fresh
        D = Imapd(imapd, deliver=deliver)
        rc |= run_suite(D, [make_user, test], D.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
