"""imapd end to end: CONTEXT=SEARCH and CONTEXT=SORT (RFC 5267 4): RETURN (CONTEXT) as a
hint, RETURN (UPDATE) contexts whose ADDTO and REMOVEFROM follow another session's flag
changes, deliveries and expunges and the session's own (REMOVEFROM before the EXPUNGE, ADDTO
after the EXISTS), applied to a model of the result that must then equal a fresh search or
sort; tag reuse as BAD, NOUPDATE past the limit, CANCELUPDATE, PARTIAL with UPDATE, and the
contexts' end with the selected mailbox. The RFC's examples 4.2, 4.3, 4.3.3 and 4.3.5.

Usage: test_imapd_context.py IMAPD_BINARY DELIVER_BINARY"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite  # noqa: E402
from heronlib import assert_eq, assert_in  # noqa: E402
D = None  # the imapd the running tests talk to


def ok(out, tag):
    assert out[-1].startswith(tag + " OK"), out
    return out


def numbers(text):
    """A sequence-set in its written order: "3:5,1" -> [3, 4, 5, 1]."""
    out = []
    for part in text.split(","):
        if ":" in part:
            a, b = (int(x) for x in part.split(":"))
            out.extend(range(min(a, b), max(a, b) + 1))
        else:
            out.append(int(part))
    return out


class Model:
    """A client's copy of one context's result, kept up to date as RFC 5267 4.3 says."""

    def __init__(self, tag, initial, uid):
        self.tag, self.res, self.uid = tag, list(initial), uid

    def feed(self, lines):
        for line in lines:
            m = re.match(r'\* ESEARCH \(TAG "([^"]+)"\)( UID)? (.*)$', line)
            if m and m.group(1) == self.tag and ("ADDTO" in line or "REMOVEFROM" in line):
                assert_eq(bool(m.group(2)), self.uid, line)
                for name, body in re.findall(r"(ADDTO|REMOVEFROM) \(([^)]*)\)", m.group(3)):
                    words = body.split()
                    for pos, items in zip(words[0::2], words[1::2]):
                        self.apply(name, int(pos), numbers(items))
            m = re.match(r"\* (\d+) EXPUNGE$", line)
            if m and not self.uid:  # sequence numbers above it move down
                n = int(m.group(1))
                assert n not in self.res, (n, self.res, "REMOVEFROM must come first")
                self.res = [x - 1 if x > n else x for x in self.res]

    def apply(self, name, pos, items):
        if name == "REMOVEFROM":
            for x in items:
                if pos == 0:
                    self.res.remove(x)
                else:
                    assert_eq(self.res[pos - 1], x)
                    del self.res[pos - 1]
        elif pos == 0:
            self.res = sorted(self.res + items)
        else:
            self.res[pos - 1:pos - 1] = items


def esearch_all(line):
    m = re.search(r" ALL (\S+)", line)
    return numbers(m.group(1)) if m else []


def fill(user, box, subjects):
    r = D.raw(user)
    ok(r.cmd("c", "CREATE %s" % box), "c")
    uids = [r.append(("Subject: %s\r\nFrom: a@b\r\n\r\nbody %s\r\n" % (s, s)).encode(), box)
            for s in subjects]
    return r, uids


def test_capability_and_hint():
    r = D.raw()
    caps = r.cmd("c", "CAPABILITY")[0].split()
    assert_in("CONTEXT=SEARCH", caps)
    assert_in("CONTEXT=SORT", caps)
    fill("alice", "Hint", ["a", "b", "c"])
    ok(r.cmd("s", "SELECT Hint"), "s")
    ok(r.cmd("t", "STORE 2 +FLAGS ($Junk)"), "t")
    # RFC 5267 4.2
    assert_eq(r.cmd("A01", "SEARCH RETURN (CONTEXT COUNT) UNDELETED UNKEYWORD $Junk"),
              ['* ESEARCH (TAG "A01") COUNT 2', "A01 OK SEARCH completed"])


def test_search_update_rfc_4_3():
    other, uids = fill("alice", "Upd", ["m%d" % i for i in range(6)])
    r = D.raw()
    ok(r.cmd("s", "SELECT Upd"), "s")
    # $Junk is not a keyword of the mailbox yet: the context still sees it once it is
    out = r.cmd("B01", "UID SEARCH RETURN (UPDATE COUNT) DELETED KEYWORD $Junk")
    assert_eq(out, ['* ESEARCH (TAG "B01") UID COUNT 0', "B01 OK SEARCH completed, will notify"])
    model = Model("B01", [], True)
    # the tag of a live context cannot start another (RFC 5267 4.3)
    assert_eq(r.cmd("B01", "SORT RETURN (UPDATE) (DATE) UTF-8 FLAGGED")[0][:8], "B01 BAD ")
    assert_eq(r.cmd("B01", "SEARCH RETURN (UPDATE) FLAGGED")[0][:8], "B01 BAD ")
    ok(other.cmd("o", "SELECT Upd"), "o")
    ok(other.cmd("p", "UID STORE %d,%d +FLAGS (\\Deleted $Junk)" % (uids[2], uids[3])), "p")
    out = ok(r.cmd("n", "NOOP"), "n")
    # 4.3.3: ADDTO after the FETCH of the change, position 0 for a SEARCH
    assert_in('* ESEARCH (TAG "B01") UID ADDTO (0 %d:%d)' % (uids[2], uids[3]), out)
    assert out.index('* ESEARCH (TAG "B01") UID ADDTO (0 %d:%d)' % (uids[2], uids[3])) > \
        max(i for i, x in enumerate(out) if "FETCH" in x), out
    model.feed(out)
    # 4.3.4: an expunge of a result: REMOVEFROM first
    ok(other.cmd("q", "UID EXPUNGE %d" % uids[2]), "q")
    out = ok(r.cmd("n", "NOOP"), "n")
    assert_eq(out[:2], ['* ESEARCH (TAG "B01") UID REMOVEFROM (0 %d)' % uids[2], "* 3 EXPUNGE"])
    model.feed(out)
    # a flag taken away: REMOVEFROM
    ok(other.cmd("r", "UID STORE %d -FLAGS ($Junk)" % uids[3]), "r")
    model.feed(ok(r.cmd("n", "NOOP"), "n"))
    fresh = r.cmd("f", "UID SEARCH RETURN (ALL) DELETED KEYWORD $Junk")
    assert_eq(model.res, esearch_all(fresh[0]))
    assert_eq(model.res, [])
    # 4.3.5
    assert_eq(r.cmd("B04", 'CANCELUPDATE "B01"'), ["B04 OK No further updates"])
    ok(other.cmd("t", "UID STORE %d +FLAGS ($Junk)" % uids[3]), "t")
    out = ok(r.cmd("n", "NOOP"), "n")
    assert not [x for x in out if "ESEARCH" in x], out
    assert_eq(r.cmd("B05", 'CANCELUPDATE "B01"')[0][:8], "B05 NO N")
    assert_eq(r.cmd("B06", "CANCELUPDATE B01")[0][:8], "B06 BAD ")


def test_sequence_numbers_and_own_changes():
    """A SEARCH context in sequence numbers: each number valid when it is sent, the own
    session's STORE and EXPUNGE reported too, a delivery after its EXISTS."""
    other, uids = fill("alice", "Seq", ["s%d" % i for i in range(6)])
    r = D.raw()
    ok(r.cmd("s", "SELECT Seq"), "s")
    ok(r.cmd("a", "STORE 2,4,6 +FLAGS (\\Flagged)"), "a")
    out = r.cmd("C1", "SEARCH RETURN (UPDATE ALL) FLAGGED")
    assert_eq(out, ['* ESEARCH (TAG "C1") ALL 2,4,6', "C1 OK SEARCH completed, will notify"])
    model = Model("C1", [2, 4, 6], False)
    # own STORE: the FETCH, then the ADDTO, in the STORE's own output
    out = ok(r.cmd("b", "STORE 1 +FLAGS (\\Flagged)"), "b")
    assert_in('* ESEARCH (TAG "C1") ADDTO (0 1)', out)
    model.feed(out)
    # own EXPUNGE of 1 and 4 (1, 2 ... renumbered as they go)
    ok(r.cmd("c", "STORE 1,4 +FLAGS (\\Deleted)"), "c")
    out = ok(r.cmd("d", "EXPUNGE"), "d")
    assert_eq(out[:4], ['* ESEARCH (TAG "C1") REMOVEFROM (0 1)', "* 1 EXPUNGE",
                        '* ESEARCH (TAG "C1") REMOVEFROM (0 3)', "* 3 EXPUNGE"])
    model.feed(out)
    # another session delivers a flagged message and unflags one
    other.append(b"Subject: new\r\n\r\nnew\r\n", "Seq", flags="(\\Flagged)")
    ok(other.cmd("o", "SELECT Seq"), "o")
    ok(other.cmd("p", "STORE 1 -FLAGS (\\Flagged)"), "p")
    out = ok(r.cmd("n", "NOOP"), "n")
    exists = [i for i, x in enumerate(out) if x.endswith(" EXISTS")]
    add = [i for i, x in enumerate(out) if "ADDTO" in x]
    assert exists and add and add[0] > exists[0], out
    model.feed(out)
    fresh = r.cmd("f", "SEARCH RETURN (ALL) FLAGGED")
    assert_eq(model.res, esearch_all(fresh[0]))
    assert_eq(model.res, [4, 5])  # old 6 and the new one; old 2 unflagged by the other


def test_sort_update():
    other, uids = fill("alice", "Srt", ["delta", "alpha", "echo", "charlie", "bravo"])
    r = D.raw()
    ok(r.cmd("s", "SELECT Srt"), "s")
    out = r.cmd("D1", "UID SORT RETURN (UPDATE ALL) (SUBJECT) UTF-8 UNSEEN")
    want = [uids[1], uids[4], uids[3], uids[0], uids[2]]
    assert_eq(out[0], '* ESEARCH (TAG "D1") UID ALL %s' % ",".join(map(str, want)))
    assert_eq(out[1], "D1 OK SORT completed, will notify")
    model = Model("D1", want, True)
    ok(other.cmd("o", "SELECT Srt"), "o")
    # bravo and delta read: removed at their positions (2, then 3 once bravo is gone)
    ok(other.cmd("p", "UID STORE %d,%d +FLAGS (\\Seen)" % (uids[4], uids[0])), "p")
    out = ok(r.cmd("n", "NOOP"), "n")
    assert_in('* ESEARCH (TAG "D1") UID REMOVEFROM (2 %d 3 %d)' % (uids[4], uids[0]), out)
    model.feed(out)
    # two new ones sort in the middle and at the end; one back at the start
    new1 = other.append(b"Subject: beta\r\n\r\nx\r\n", "Srt")
    new2 = other.append(b"Subject: zulu\r\n\r\nx\r\n", "Srt")
    ok(other.cmd("q", "UID STORE %d -FLAGS (\\Seen)" % uids[4]), "q")
    out = ok(r.cmd("n", "NOOP"), "n")
    model.feed(out)
    fresh = r.cmd("f", "UID SORT RETURN (ALL) (SUBJECT) UTF-8 UNSEEN")
    assert_eq(model.res, esearch_all(fresh[0]))
    assert_eq(model.res, [uids[1], new1, uids[4], uids[3], uids[2], new2])
    # an expunge: REMOVEFROM at its position, before the EXPUNGE
    ok(other.cmd("t", "UID STORE %d +FLAGS (\\Deleted)" % uids[3]), "t")
    ok(other.cmd("t", "UID EXPUNGE %d" % uids[3]), "t")
    out = ok(r.cmd("n", "NOOP"), "n")
    assert_eq(out[0], '* ESEARCH (TAG "D1") UID REMOVEFROM (4 %d)' % uids[3])
    model.feed(out)
    assert_eq(model.res, esearch_all(r.cmd("f", "UID SORT RETURN (ALL) (SUBJECT) UTF-8 UNSEEN")[0]))


def test_partial_noupdate_and_close():
    other, uids = fill("alice", "Lim", ["l%d" % i for i in range(5)])
    r = D.raw()
    ok(r.cmd("s", "SELECT Lim"), "s")
    # PARTIAL with UPDATE: the slice now, updates for every match (RFC 5267 4.4)
    out = r.cmd("P1", "UID SEARCH RETURN (PARTIAL 1:2 UPDATE) ALL")
    assert_eq(out[0], '* ESEARCH (TAG "P1") UID PARTIAL (1:2 %d:%d)' % (uids[0], uids[1]))
    for i in range(2, 9):  # 8 contexts in all
        ok(r.cmd("P%d" % i, "SEARCH RETURN (UPDATE) SEEN"), "P%d" % i)
    # 4.3.1: the ninth is refused, its other options honoured
    assert_eq(r.cmd("P9", "UID SORT RETURN (UPDATE COUNT) (ARRIVAL) UTF-8 ALL"),
              ['* ESEARCH (TAG "P9") UID COUNT 5', '* NO [NOUPDATE "P9"] Too many update contexts',
               "P9 OK SORT completed, will not notify"])
    new = other.append(b"Subject: n\r\n\r\nx\r\n", "Lim")
    out = ok(r.cmd("n", "NOOP"), "n")
    assert_in('* ESEARCH (TAG "P1") UID ADDTO (0 %d)' % new, out)
    assert not [x for x in out if 'TAG "P9"' in x], out
    # contexts end with the selected mailbox
    ok(r.cmd("u", "UNSELECT"), "u")
    ok(r.cmd("s", "SELECT Lim"), "s")
    other.append(b"Subject: m\r\n\r\nx\r\n", "Lim")
    out = ok(r.cmd("n", "NOOP"), "n")
    assert not [x for x in out if "ESEARCH" in x], out
    assert_eq(r.cmd("c", 'CANCELUPDATE "P1"')[0][:4], "c NO")
    ok(r.cmd("P1", "SEARCH RETURN (UPDATE) ALL"), "P1")  # the tag is free again


def test_updates_in_idle():
    """RFC 5267 4.3.2: updates may come at any time; in IDLE they come with the EXISTS."""
    other, uids = fill("alice", "Idle", ["i0", "i1"])
    r = D.raw()
    ok(r.cmd("s", "SELECT Idle"), "s")
    ok(r.cmd("I1", "UID SEARCH RETURN (UPDATE) FLAGGED"), "I1")
    r.send("i IDLE\r\n")
    assert r.line().startswith("+ ")
    new = other.append(b"Subject: i2\r\n\r\nx\r\n", "Idle", flags="(\\Flagged)")
    lines = [r.line(), r.line(), r.line()]
    r.send("DONE\r\n")
    assert_eq(lines[0], "* 3 EXISTS")
    assert_in('* ESEARCH (TAG "I1") UID ADDTO (0 %d)' % new, lines)
    ok(r.until_tag("i"), "i")


def main():
    global D
    D = Imapd(sys.argv[1], deliver=sys.argv[2])
    return run_suite(D, [test_capability_and_hint, test_search_update_rfc_4_3,
                         test_sequence_numbers_and_own_changes, test_sort_update,
                         test_partial_noupdate_and_close, test_updates_in_idle], D.dir)


if __name__ == "__main__":
    sys.exit(main())
