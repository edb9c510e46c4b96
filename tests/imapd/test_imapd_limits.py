"""imapd end to end: the administrative limits on mailboxes. [imapd] max_mailboxes_per_user
and max_mailbox_depth hold for CREATE (also of a name whose missing parents it would make),
RENAME (of a mailbox with children, whose new names are deeper) and `mailctl mailbox
create/rename` alike: NO [LIMIT] naming the limit, nothing written (LIST unchanged), and
room again after a DELETE. After ENABLE UTF8=ACCEPT an over-long name is refused as too long,
not as bad UTF-8. A mailbox name the store cannot key (more than 511 - 8 bytes: the user id
and the name are one LMDB key) is NO [LIMIT] naming the limit at CREATE, RENAME (also of a
parent whose child's new name would pass it) and SUBSCRIBE, [TRYCREATE] at APPEND and COPY,
and `mailctl` refuses it (and a user name past 511 bytes) with exit code 64 and the limit,
not "store I/O error".

Usage: test_imapd_limits.py IMAPD_BINARY DELIVER_BINARY"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, assert_eq, assert_in, run_suite  # noqa: E402

IMAPD = DELIVER = None
D = None
MAX_MBOXES, MAX_DEPTH = 8, 4


def mailctl(*args):
    exe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(IMAPD))), "mailctl",
                       "mailctl")
    return subprocess.run([exe, "-c", D.conf] + list(args), capture_output=True, text=True,
                          timeout=60)


def names(r):
    out = r.cmd("l", 'LIST "" "*"')
    assert out[-1].startswith("l OK"), out
    return sorted(re.search(r'"/" (.*)$', l).group(1).strip('"') for l in out
                  if l.startswith("* LIST"))


def test_mailbox_count():
    r = D.raw("alice")
    # INBOX + a, b, c, d/e (d made as a parent) = 6 mailboxes
    for name in ("a", "b", "c", "d/e"):
        assert r.cmd("c", "CREATE " + name)[-1].startswith("c OK"), name
    assert_eq(len(names(r)), 6)
    # f/g/h would make f, f/g and f/g/h: 9 > 8, refused whole
    out = r.cmd("c", "CREATE f/g/h")[-1]
    assert out.startswith("c NO [LIMIT]") and "at most 8 mailboxes" in out, out
    before = names(r)
    assert_eq(len(before), 6)
    assert r.cmd("c", "CREATE f")[-1].startswith("c OK")
    assert r.cmd("c", "CREATE g")[-1].startswith("c OK")
    out = r.cmd("c", "CREATE h")[-1]
    assert out.startswith("c NO [LIMIT]"), out
    assert_eq(len(names(r)), 8)
    # RENAME of INBOX makes a new mailbox (INBOX stays): over the count too
    out = r.cmd("c", "RENAME INBOX old-inbox")[-1]
    assert out.startswith("c NO [LIMIT]"), out
    # mailctl applies the same limit to the same user
    m = mailctl("mailbox", "create", "alice", "viactl")
    assert m.returncode == 1 and "limit" in m.stderr, (m.returncode, m.stdout, m.stderr)
    assert "viactl" not in names(r)
    # a DELETE makes room again
    assert r.cmd("c", "DELETE g")[-1].startswith("c OK")
    assert r.cmd("c", "CREATE h")[-1].startswith("c OK")
    assert_in("h", names(r))


def test_mailbox_depth():
    r = D.raw("bob")
    assert r.cmd("c", "CREATE 1/2/3/4")[-1].startswith("c OK")
    out = r.cmd("c", "CREATE 1/2/3/4/5")[-1]
    assert out.startswith("c NO [LIMIT]") and "at most 4 levels" in out, out
    assert r.cmd("c", "CREATE x/y")[-1].startswith("c OK")
    # renaming 1/2 under x/y would make x/y/2/3/4: 5 levels; nothing moves
    before = names(r)
    out = r.cmd("c", "RENAME 1/2 x/y/2")[-1]
    assert out.startswith("c NO [LIMIT]"), out
    assert_eq(names(r), before)
    assert r.cmd("c", "RENAME 1/2 x/2")[-1].startswith("c OK")
    m = mailctl("mailbox", "create", "bob", "p/q/r/s/t")
    assert m.returncode == 1 and "limit" in m.stderr, (m.returncode, m.stderr)
    m = mailctl("mailbox", "rename", "bob", "x", "deep/er/x")
    assert m.returncode == 1 and "limit" in m.stderr, (m.returncode, m.stderr)
    # 7 mailboxes; this makes z and keeps 4 levels: 8, allowed
    m = mailctl("mailbox", "rename", "bob", "x/2", "z/2")
    assert m.returncode == 0, (m.returncode, m.stderr)
    assert_in("z/2/3/4", names(r))


def test_utf8_name_too_long():
    r = D.raw("carol")
    assert r.cmd("e", "ENABLE UTF8=ACCEPT")[-1].startswith("e OK")
    # the last two take more than 8 x 512 bytes in modified UTF-7: once "not valid UTF-8"
    for name in ("x" * 600, "\u00e9" * 400, "\u20ac" * 1600, "&" * 2100):
        data = name.encode()
        r.send(b"c CREATE {%d+}\r\n" % len(data) + data + b"\r\n")
        out = r.until_tag("c")[-1]
        assert out.startswith("c NO") and "too long" in out, (len(data), out)
    # bad UTF-8 of a short name is still named as such
    r.send(b"c CREATE {3+}\r\n\xff\xfeA\r\n")
    out = r.until_tag("c")[-1]
    assert "not valid UTF-8" in out, out


MBOX_NAME_MAX = 511 - 8  # LMDB's key size less the user id


def test_mailbox_name_length():
    r = D.raw("carol")
    top, over = "m" * MBOX_NAME_MAX, "n" * (MBOX_NAME_MAX + 1)
    assert r.cmd("c", "CREATE " + top)[-1].startswith("c OK"), "the longest name"
    for tag, line in (("c", "CREATE " + over), ("r", "RENAME %s %s" % (top, over)),
                      ("s", "SUBSCRIBE " + over)):
        out = r.cmd(tag, line)[-1]
        assert out.startswith(tag + " NO [LIMIT]"), out
        assert_in("at most %d bytes" % MBOX_NAME_MAX, out)
    msg = b"Subject: x\r\n\r\nbody\r\n"
    r.send(b"a APPEND %s {%d+}\r\n" % (over.encode(), len(msg)) + msg + b"\r\n")
    out = r.until_tag("a")[-1]
    assert out.startswith("a NO [TRYCREATE]"), out
    r.send(b"a APPEND INBOX {%d+}\r\n" % len(msg) + msg + b"\r\n")
    assert r.until_tag("a")[-1].startswith("a OK")
    assert r.cmd("s", "SELECT INBOX")[-1].startswith("s OK")
    out = r.cmd("k", "COPY 1 " + over)[-1]
    assert out.startswith("k NO [TRYCREATE]"), out
    # a child whose new name would pass the limit keeps the whole RENAME from happening
    child = "p/" + "q" * 400
    assert r.cmd("c", "CREATE " + child)[-1].startswith("c OK")
    before = names(r)
    out = r.cmd("r", "RENAME p " + "r" * 110)[-1]
    assert out.startswith("r NO [LIMIT]") and "at most %d bytes" % MBOX_NAME_MAX in out, out
    assert_eq(names(r), before)
    m = mailctl("mailbox", "rename", "carol", "p", "r" * 110)
    assert m.returncode == 1 and "would pass %d bytes" % MBOX_NAME_MAX in m.stderr, m.stderr
    for args in (("create", "carol", over), ("rename", "carol", top, over),
                 ("subscribe", "carol", over)):
        m = mailctl("mailbox", *args)
        assert m.returncode == 64, (args, m.returncode, m.stderr)
        assert_in("at most %d bytes" % MBOX_NAME_MAX, m.stderr)
    assert_eq(names(r), before)
    assert r.cmd("d", "DELETE " + top)[-1].startswith("d OK")
    assert r.cmd("d", "DELETE " + child)[-1].startswith("d OK")
    assert r.cmd("d", "DELETE p")[-1].startswith("d OK")
    # user names: the user's record is keyed by the name alone
    m = mailctl("user", "add", "u" * 512)
    assert m.returncode == 64 and "at most 511 bytes" in m.stderr, (m.returncode, m.stderr)
    assert "I/O" not in m.stderr, m.stderr
    m = mailctl("user", "add", "u" * 511)
    assert m.returncode == 0, m.stderr
    m = mailctl("user", "rename", "u" * 511, "u" * 512)
    assert m.returncode == 64 and "at most 511 bytes" in m.stderr, (m.returncode, m.stderr)


def main():
    global IMAPD, DELIVER, D
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    D = Imapd(IMAPD, deliver=DELIVER, extra={"max_mailboxes_per_user": str(MAX_MBOXES),
                                             "max_mailbox_depth": str(MAX_DEPTH)})
    return run_suite(D, [test_mailbox_count, test_mailbox_depth, test_utf8_name_too_long,
                         test_mailbox_name_length],
                     D.dir)


if __name__ == "__main__":
    sys.exit(main())
