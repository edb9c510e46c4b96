"""imapd end to end: \\Seen is private on another user's mailbox (store_seen.c). The owner
alice shares "Team" with bob (lrs); bob's \\Seen, set by FETCH BODY[] or STORE, is his own:
alice's \\Seen is unchanged, and the other way round. Checked as raw dialogues and with
imaplib: FETCH FLAGS, SEARCH SEEN/UNSEEN, STATUS UNSEEN, SELECT's [UNSEEN n], each per user;
CONDSTORE (bob's change has a MODSEQ bob sees and alice does not: CHANGEDSINCE), bob's other
session told of his change by NOOP and alice's told nothing, the other flags still shared,
an EXPUNGE, a mailbox deleted and a user deleted taking bob's state with them, and the
grantee's \\Seen carried by COPY and MOVE out of the shared mailbox and given by APPEND and
COPY into it.

Usage: test_imapd_seen.py IMAPD_BINARY DELIVER_BINARY"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite  # noqa: E402
from heronlib import assert_eq  # noqa: E402
from heronlib import DOMAIN, IMAP_PASSWORD, sha256_hash  # noqa: E402

D = None  # the imapd the running tests talk to
NS = {"namespace_other": "Other Users/"}
# users whose names pass 255 bytes: the directory takes login names up to 320 bytes
# (LDAPAUTH_NAME_MAX, the users file and LDAP alike); one named in the list, one reaching the
# mailbox through "anyone"
LONG = "l" * 320
LONGER = "m" * 300
MSG = b"From: a@example.org\r\nSubject: team\r\n\r\nplans\r\n"


def ok(out, tag):
    assert out[-1].startswith(tag + " OK"), out
    return out


def mailctl(*args, rc=0):
    mc = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(D.binary))),
                      "mailctl", "mailctl")
    p = subprocess.run([mc, "-c", D.conf, "--json", *args], capture_output=True, timeout=120)
    assert p.returncode == rc, (args, p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout) if rc == 0 and p.stdout.strip() else p


def status(r, name, items="UNSEEN"):
    out = ok(r.cmd("st", 'STATUS "%s" (%s)' % (name, items)), "st")
    return out[0]


def search(r, what):
    out = ok(r.cmd("se", "SEARCH " + what), "se")
    return [x for x in out if x.startswith("* SEARCH")]


def fetches(out):
    return [x for x in out if " FETCH " in x]


def modseq(out):
    line = fetches(out)[0]
    m = re.search(r"MODSEQ \((\d+)\)", line)
    assert m is not None, out
    return int(m.group(1))


def team(owner, grantee, rights="lrs", n=3, box="Team"):
    """owner's box with n messages (the first \\Seen by the owner), shared with grantee."""
    ok(owner.cmd("c", "CREATE " + box), "c")
    owner.append(MSG, mailbox=box, flags="(\\Seen)")
    for _ in range(n - 1):
        owner.append(MSG, mailbox=box)
    ok(owner.cmd("s", "SETACL %s %s %s" % (box, grantee, rights)), "s")
    return "Other Users/alice/" + box


def test_dialogue():
    a, b, b2 = D.raw("alice"), D.raw("bob"), D.raw("bob")
    name = team(a, "bob")
    # a new reader has seen nothing, whatever the owner read
    assert_eq(status(a, "Team"), '* STATUS Team (UNSEEN 2)')
    assert_eq(status(b, name), '* STATUS "%s" (UNSEEN 3)' % name)
    line = status(a, "Team", "HIGHESTMODSEQ")
    h0 = int(re.search(r"HIGHESTMODSEQ (\d+)", line).group(1))
    out = ok(b2.cmd("x", 'SELECT "%s"' % name), "x")
    assert "* OK [UNSEEN 1] First unseen" in out, out
    out = ok(b.cmd("e", 'SELECT "%s"' % name), "e")
    assert_eq(out[-1], "e OK [READ-WRITE] SELECT completed")
    assert "* OK [UNSEEN 1] First unseen" in out, out
    ok(a.cmd("y", "SELECT Team"), "y")
    # bob reads 2 and marks 3: his own \Seen
    out = ok(b.cmd("f", "FETCH 2 BODY[]"), "f")
    assert "\\Seen" in "\n".join(out), out
    out = ok(b.cmd("g", "STORE 3 +FLAGS (\\Seen)"), "g")
    assert_eq(fetches(out), ["* 3 FETCH (FLAGS (\\Seen))"])
    assert_eq(search(b, "UNSEEN"), ["* SEARCH 1"])
    assert_eq(search(b, "SEEN"), ["* SEARCH 2 3"])
    assert_eq(status(b, name), '* STATUS "%s" (UNSEEN 1)' % name)
    # alice: her \Seen as it was, and her session is told of no change
    assert_eq(fetches(ok(a.cmd("n", "NOOP"), "n")), [])
    assert_eq(search(a, "UNSEEN"), ["* SEARCH 2 3"])
    assert_eq(search(a, "SEEN"), ["* SEARCH 1"])
    assert_eq(status(a, "Team"), '* STATUS Team (UNSEEN 2)')
    out = ok(a.cmd("h", "FETCH 1:3 FLAGS"), "h")
    assert_eq(fetches(out), ["* 1 FETCH (FLAGS (\\Seen \\Recent))",
                             "* 2 FETCH (FLAGS (\\Recent))", "* 3 FETCH (FLAGS (\\Recent))"])
    # bob's other session hears of his change; alice's change is not bob's \Seen
    out = ok(b2.cmd("n", "NOOP"), "n")
    assert_eq(sorted(fetches(out)), ["* 2 FETCH (FLAGS (\\Seen))",
                                     "* 3 FETCH (FLAGS (\\Seen))"])
    ok(a.cmd("i", "STORE 2 -FLAGS (\\Seen)"), "i")
    ok(a.cmd("j", "STORE 3 +FLAGS (\\Seen)"), "j")
    assert_eq(fetches(ok(b2.cmd("n", "NOOP"), "n")), [])
    assert_eq(search(b, "SEEN"), ["* SEARCH 2 3"])
    # bob takes his \Seen back: alice's (now set on 3) stays
    ok(b.cmd("k", "STORE 3 -FLAGS (\\Seen)"), "k")
    assert_eq(search(b, "UNSEEN"), ["* SEARCH 1 3"])
    assert_eq(search(a, "SEEN"), ["* SEARCH 1 3"])
    # CONDSTORE: bob's change has a MODSEQ above alice's view of the message
    mb = modseq(ok(b.cmd("m", "FETCH 3 (MODSEQ)"), "m"))
    ma = modseq(ok(a.cmd("m", "FETCH 3 (MODSEQ)"), "m"))
    assert mb > ma, (mb, ma)
    out = ok(b.cmd("c", "FETCH 1:* (FLAGS) (CHANGEDSINCE %d)" % h0), "c")
    assert_eq([x.split(" FETCH")[0] for x in fetches(out)], ["* 2", "* 3"])
    out = ok(b.cmd("c", "FETCH 1:* (FLAGS) (CHANGEDSINCE %d)" % ma), "c")
    assert_eq([x.split(" FETCH")[0] for x in fetches(out)], ["* 3"])
    out = ok(a.cmd("c", "FETCH 1:* (FLAGS) (CHANGEDSINCE %d)" % ma), "c")
    assert_eq(fetches(out), [])
    # UNCHANGEDSINCE against bob's MODSEQ
    out = b.cmd("u", "STORE 3 (UNCHANGEDSINCE %d) +FLAGS (\\Seen)" % (mb - 1))
    assert out[-1].startswith("u OK [MODIFIED 3]"), out
    # mailctl export of the owner: her flags (1 and 3 \Seen), none of bob's (2)
    exp = os.path.join(D.dir, "export-team")
    mailctl("export", "alice", "Team", exp, "--format", "maildir")
    names = []
    for root, _, files in os.walk(exp):
        names += [f for f in files if ".M" in f and ":2," in f]
    seen = sorted(int(f.split(".M")[1][:10]) for f in names if "S" in f.split(":2,")[1])
    assert_eq((len(names), seen), (3, [1, 3]), names)
    # EXPUNGE by the owner: bob's counts follow
    ok(a.cmd("d", "STORE 2 +FLAGS.SILENT (\\Deleted)"), "d")
    ok(a.cmd("x", "EXPUNGE"), "x")
    assert_eq(status(b, name, "MESSAGES UNSEEN"),
              '* STATUS "%s" (MESSAGES 2 UNSEEN 2)' % name)
    assert_eq(status(a, "Team", "MESSAGES UNSEEN"), '* STATUS Team (MESSAGES 2 UNSEEN 0)')


def test_other_flags_shared():
    """Only \\Seen is private: \\Flagged set by a grantee with w is everyone's, and a
    replacement of the flags (s w t) keeps the owner's \\Seen."""
    a, b = D.raw("alice"), D.raw("bob")
    name = team(a, "bob", "lrswt", 2, "Both")
    ok(b.cmd("e", 'SELECT "%s"' % name), "e")
    out = ok(b.cmd("f", "STORE 1 FLAGS (\\Flagged)"), "f")
    assert_eq(fetches(out), ["* 1 FETCH (FLAGS (\\Flagged))"])
    out = ok(b.cmd("g", "STORE 2 +FLAGS (\\Seen \\Answered)"), "g")
    assert_eq(fetches(out), ["* 2 FETCH (FLAGS (\\Answered \\Seen))"])
    ok(a.cmd("x", "EXAMINE Both"), "x")
    out = ok(a.cmd("h", "FETCH 1:2 FLAGS"), "h")
    assert_eq([x.replace(" \\Recent", "") for x in fetches(out)],
              ["* 1 FETCH (FLAGS (\\Flagged \\Seen))", "* 2 FETCH (FLAGS (\\Answered))"])


def test_imaplib():
    """Two users with imaplib: the grantee marks a message seen, the owner still has it
    unseen; STATUS UNSEEN and SEARCH UNSEEN differ per user; after the owner's EXPUNGE the
    grantee's counts are right."""
    a, b = D.login("alice"), D.login("carol")
    a.create("Lib")
    for _ in range(2):
        a.append("Lib", None, None, MSG)
    assert_eq(a.setacl("Lib", "carol", "lrs")[0], "OK")
    name = '"Other Users/alice/Lib"'
    assert_eq(b.status(name, "(UNSEEN)"), ("OK", [b'"Other Users/alice/Lib" (UNSEEN 2)']))
    assert_eq(b.select(name)[0], "OK")
    typ, data = b.store("1", "+FLAGS", "(\\Seen)")
    assert_eq((typ, data), ("OK", [b"1 (FLAGS (\\Seen))"]))
    assert_eq(b.search(None, "UNSEEN"), ("OK", [b"2"]))
    assert_eq(b.status(name, "(UNSEEN)"), ("OK", [b'"Other Users/alice/Lib" (UNSEEN 1)']))
    assert_eq(a.select("Lib")[0], "OK")
    assert_eq(a.search(None, "UNSEEN"), ("OK", [b"1 2"]))
    assert_eq(a.status("Lib", "(UNSEEN)"), ("OK", [b"Lib (UNSEEN 2)"]))
    a.store("1", "+FLAGS", "(\\Deleted)")
    a.expunge()
    assert_eq(b.status(name, "(MESSAGES UNSEEN)"),
              ("OK", [b'"Other Users/alice/Lib" (MESSAGES 1 UNSEEN 1)']))
    b.logout()
    a.logout()


def test_state_goes_with_mailbox_and_user():
    """A mailbox deleted and made again, and a grantee deleted and made again: no \\Seen of
    the old one is left."""
    a, b = D.raw("alice"), D.raw("carol")
    name = team(a, "carol", "lrs", 2, "Again")
    ok(b.cmd("e", 'SELECT "%s"' % name), "e")
    ok(b.cmd("f", "STORE 1:2 +FLAGS (\\Seen)"), "f")
    assert_eq(status(b, name), '* STATUS "%s" (UNSEEN 0)' % name)
    b.close()
    ok(a.cmd("d", "DELETE Again"), "d")
    name = team(a, "carol", "lrs", 2, "Again")
    b = D.raw("carol")
    assert_eq(status(b, name), '* STATUS "%s" (UNSEEN 2)' % name)
    ok(b.cmd("e", 'SELECT "%s"' % name), "e")
    ok(b.cmd("f", "STORE 1:2 +FLAGS (\\Seen)"), "f")
    b.close()
    mailctl("user", "del", "carol")
    b = D.raw("carol")  # the directory's user: back in the store at login
    ok(a.cmd("s", "SETACL Again carol lrs"), "s")
    assert_eq(status(b, name), '* STATUS "%s" (UNSEEN 2)' % name)


def same_partition():
    """Two users of one partition (three users, two partitions: there are), owner first:
    COPY and MOVE stay within a partition."""
    parts = {u: mailctl("user", "show", u)["partition"] for u in ("alice", "bob", "carol")}
    for x, y in (("alice", "bob"), ("alice", "carol"), ("bob", "carol")):
        if parts[x] == parts[y]:
            return x, y
    raise AssertionError(parts)


def flags(r, box, seqs="1:*"):
    ok(r.cmd("x", 'EXAMINE "%s"' % box), "x")
    out = ok(r.cmd("f", "FETCH %s FLAGS" % seqs), "f")
    return [x.replace(" \\Recent", "").replace("(\\Recent)", "()") for x in fetches(out)]


def test_copy_and_append():
    """The \\Seen a grantee's COPY or MOVE takes out of a shared mailbox is the grantee's;
    the \\Seen its APPEND or COPY gives a message of the shared mailbox is the grantee's too,
    not the owner's."""
    owner, grantee = same_partition()
    a, b, b2 = D.raw(owner), D.raw(grantee), D.raw(grantee)
    ok(a.cmd("c", "CREATE Carry"), "c")
    a.append(MSG, mailbox="Carry", flags="(\\Seen)")
    a.append(MSG, mailbox="Carry")
    a.append(MSG, mailbox="Carry")
    ok(a.cmd("s", "SETACL Carry %s lrsite" % grantee), "s")
    name = "Other Users/%s/Carry" % owner
    ok(b.cmd("c", "CREATE Mine"), "c")
    ok(b.cmd("e", 'SELECT "%s"' % name), "e")
    ok(b.cmd("f", "FETCH 2 BODY[]"), "f")
    ok(b.cmd("g", "COPY 1:2 Mine"), "g")
    assert_eq(flags(b2, "Mine"), ["* 1 FETCH (FLAGS ())", "* 2 FETCH (FLAGS (\\Seen))"])
    ok(b.cmd("h", "STORE 3 +FLAGS (\\Seen)"), "h")
    ok(b.cmd("m", "MOVE 3 Mine"), "m")
    assert_eq(flags(b2, "Mine", "3"), ["* 3 FETCH (FLAGS (\\Seen))"])
    # into the shared mailbox: the grantee's \\Seen, the owner's unseen
    b2.append(MSG, mailbox='"%s"' % name, flags="(\\Seen)")
    ok(b2.cmd("k", 'EXAMINE Mine'), "k")
    ok(b2.cmd("l", 'COPY 2 "%s"' % name), "l")
    assert_eq(status(a, "Carry", "MESSAGES UNSEEN"), "* STATUS Carry (MESSAGES 4 UNSEEN 3)")
    assert_eq(status(b, name, "MESSAGES UNSEEN"),
              '* STATUS "%s" (MESSAGES 4 UNSEEN 1)' % name)


def test_long_user_names():
    """Private \\Seen for user names past 255 bytes (the store keys such a name by its
    SHA-256): a 320-byte user (the directory's longest) named in the list and a 300-byte one
    reaching the mailbox through "anyone" each keep their own \\Seen, alice's untouched.
    SETACL names the first (identifiers go up to 503 bytes now, LMDB's key less the mailbox
    id) and refuses a longer identifier with NO [LIMIT], saying the limit. (Before: SETACL
    answered "Invalid identifier" to the first, and a STORE \\Seen of the second changed
    alice's own \\Seen.)"""
    a = D.raw("alice")
    box = team(a, LONG, n=2, box="Long")
    out = a.cmd("s", "SETACL Long %s lr" % ("x" * 504))
    assert_eq(out, ["s NO [LIMIT] An identifier is at most 503 bytes"])
    ok(a.cmd("d", "DELETEACL Long %s" % ("y" * 503)), "d")  # 503 bytes: an identifier
    ok(a.cmd("s", "SETACL Long anyone lrs"), "s")
    for user in (LONG, LONGER):
        r = D.raw(user)
        ok(r.cmd("e", 'SELECT "%s"' % box), "e")
        out = ok(r.cmd("f", "FETCH 1:2 FLAGS"), "f")
        assert not any("\\Seen" in x for x in fetches(out)), (user[:1], out)
        ok(r.cmd("s", "STORE 2 +FLAGS (\\Seen)"), "s")
        assert_eq(search(r, "SEEN"), ["* SEARCH 2"])
    ok(a.cmd("e", "SELECT Long"), "e")
    assert_eq(search(a, "SEEN"), ["* SEARCH 1"])
    r = D.raw(LONG)
    assert_eq(status(r, box), '* STATUS "%s" (UNSEEN 1)' % box)
    r = D.raw(LONGER)
    ok(r.cmd("e", 'EXAMINE "%s"' % box), "e")
    assert_eq(search(r, "SEEN"), ["* SEARCH 2"])


def main():
    global D
    imapd, deliver = sys.argv[1], sys.argv[2]
    D = Imapd(imapd, deliver=deliver, extra=NS)
    with open(os.path.join(D.dir, "users"), "a") as f:
        for i, u in enumerate((LONG, LONGER)):
            f.write("%s:%s:long%d@%s\n" % (u, sha256_hash(IMAP_PASSWORD), i, DOMAIN))
    return run_suite(D, [test_dialogue, test_other_flags_shared, test_imaplib,
                         test_state_goes_with_mailbox_and_user, test_copy_and_append,
                         test_long_user_names], D.dir)


if __name__ == "__main__":
    sys.exit(main())
