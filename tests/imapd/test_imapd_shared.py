"""imapd end to end: access control lists (RFC 4314) kept in the store, and the namespaces
(RFC 2342) that let other users reach what is shared with them. The owner's SETACL,
DELETEACL, GETACL, LISTRIGHTS and MYRIGHTS as raw dialogues after RFC 4314's examples
(3.1's refused rights, 3.3's GETACL, 3.7's LISTRIGHTS, the obsolete c and d of 2.1.1), "+"
and "-" changes, "anyone" and negative rights, the list's life with its mailbox (RENAME keeps
it, DELETE drops it), a kill -9 after the OK, an imaplib session, and `mailctl acl` against
the same store (get, set, delete, its refusals) with `mailctl verify` clean after. Then, with
[imapd] namespace_other and namespace_shared set, three users: NAMESPACE's answer, a grantee
listing, selecting (read-only), reading and seeing the owner's new mail, a user without
rights seeing nothing (NONEXISTENT), rights taken away ('l' without 'r': NOPERM), anyone and
a negative right, 'a' letting a grantee read and change the list, 'i' letting a grantee
APPEND, COPY and MOVE into the owner's mailbox (flags per s w t, the owner's UIDs and quota,
COPY across partitions NO [CANNOT]), the shared namespace of the
store user "shared" (lists set by mailctl), the namespaces' names refused to CREATE/RENAME/
DELETE, an imaplib session, `mailctl user rename` carrying the rights given to the user
and those of its own mailboxes to the new name, and LSUB, LIST (SUBSCRIBED) and LIST RETURN
(SUBSCRIBED) of subscriptions to shared mailboxes.

Usage: test_imapd_shared.py IMAPD_BINARY DELIVER_BINARY"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite  # noqa: E402
from heronlib import assert_eq  # noqa: E402
from heronlib import DOMAIN, IMAP_PASSWORD, ImapRaw, after_test, sha256_hash  # noqa: E402
D = None  # the imapd the running tests talk to
ALL = "lrswipkxtecda"


def ok(out, tag):
    assert out[-1].startswith(tag + " OK"), out
    return out


def dialogue(r, lines):
    """Each (command, expected reply lines) in turn on session r; None: any OK."""
    for i, (cmd, want) in enumerate(lines):
        tag = "t%d" % i
        got = r.cmd(tag, cmd)
        if want is None:
            ok(got, tag)
            continue
        want = [w.replace("TAG", tag) for w in want]
        assert_eq(got, want, (cmd, got, want))


def mailctl(*args, rc=0):
    """mailctl --json ARGS: its JSON when rc is 0, else the process (rc None: any code)."""
    mc = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(D.binary))),
                      "mailctl", "mailctl")
    p = subprocess.run([mc, "-c", D.conf, "--json", *args], capture_output=True, timeout=120)
    if rc is None:
        return p
    assert p.returncode == rc, (args, p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout) if rc == 0 and p.stdout.strip() else p


def store_users(*names):
    """Users of the store (an identifier SETACL gives rights to must be one), made by
    mailctl when they have not logged in yet."""
    for u in names:
        if mailctl("user", "show", u, rc=None).returncode != 0:
            mailctl("user", "add", u)


def test_rfc_examples():
    """RFC 4314 3.1, 3.3, 3.7 and 3.8, with alice as the owner and John, smith and anyone as
    the identifiers (Heron writes rights in the order lrswipkxte c d a)."""
    store_users("John")
    r = D.raw("alice")
    ok(r.cmd("c", 'CREATE "INBOX/Drafts"'), "c")
    dialogue(r, [
        # 3.1: an upper-case or unknown right is BAD, nothing is changed
        ("SETACL INBOX/Drafts John lrQswicda", ["TAG BAD Invalid rights"]),
        ("SETACL INBOX/Drafts John lrqswicda", ["TAG BAD Invalid rights"]),
        ("SETACL INBOX/Drafts John lrswicda", ["TAG OK SETACL completed"]),
        # c is k and x, d is t and e (2.1.1): both are written back
        ("GETACL INBOX/Drafts", ["* ACL INBOX/Drafts alice " + ALL + " John lrswikxtecda",
                                 "TAG OK GETACL completed"]),
        # 3.1: a "-" takes rights away, a "+" adds them
        ("SETACL INBOX/Drafts John -ckx", ["TAG OK SETACL completed"]),
        ("SETACL INBOX/Drafts John +p", ["TAG OK SETACL completed"]),
        ("GETACL INBOX/Drafts", ["* ACL INBOX/Drafts alice " + ALL + " John lrswipteda",
                                 "TAG OK GETACL completed"]),
        # 3.2
        ("DELETEACL INBOX/Drafts John", ["TAG OK DELETEACL completed"]),
        ("GETACL INBOX/Drafts", ["* ACL INBOX/Drafts alice " + ALL,
                                 "TAG OK GETACL completed"]),
        # 3.7: what can be granted to smith, each right alone (RIGHTS=texk)
        ("LISTRIGHTS INBOX/Drafts smith",
         ['* LISTRIGHTS INBOX/Drafts smith "" l r s w i p k x t e c d a',
          "TAG OK LISTRIGHTS completed"]),
        ("LISTRIGHTS INBOX/Drafts alice",
         ["* LISTRIGHTS INBOX/Drafts alice " + ALL, "TAG OK LISTRIGHTS completed"]),
        # 3.8: the owner's own rights
        ("MYRIGHTS INBOX/Drafts", ["* MYRIGHTS INBOX/Drafts " + ALL,
                                   "TAG OK MYRIGHTS completed"]),
    ])


def test_anyone_and_negative():
    store_users("bob", "carol")
    r = D.raw("alice")
    ok(r.cmd("c", "CREATE Team"), "c")
    dialogue(r, [
        ("SETACL Team anyone lr", ["TAG OK SETACL completed"]),
        ("SETACL Team -bob r", ["TAG OK SETACL completed"]),
        ("SETACL Team carol lrswi", ["TAG OK SETACL completed"]),
        # identifiers in byte order after the owner
        ("GETACL Team", ["* ACL Team alice " + ALL + " -bob r anyone lr carol lrswi",
                         "TAG OK GETACL completed"]),
        # no rights left: the identifier leaves the list; an empty set is no error
        ("SETACL Team carol -lrswi", ["TAG OK SETACL completed"]),
        ('SETACL Team nobody ""', ["TAG OK SETACL completed"]),
        ("SETACL Team nobody -lr", ["TAG OK SETACL completed"]),
        ("DELETEACL Team nobody", ["TAG OK DELETEACL completed"]),
        ("GETACL Team", ["* ACL Team alice " + ALL + " -bob r anyone lr",
                         "TAG OK GETACL completed"]),
        # the owner keeps every right, "-owner" cannot take any away
        ("SETACL Team alice -a", ["TAG NO [CANNOT] The owner always holds every right"]),
        ("SETACL Team -alice r", ["TAG NO [CANNOT] The owner always holds every right"]),
        ("SETACL Team alice +r", ["TAG OK SETACL completed"]),
        ("DELETEACL Team -alice", ["TAG OK DELETEACL completed"]),
        # what cannot be an identifier
        ('SETACL Team "a b" r', ["TAG NO [CANNOT] Invalid identifier"]),
        ("SETACL Team - r", ["TAG NO [CANNOT] Invalid identifier"]),
    ])
    for cmd in ("SETACL Nope bob r", "GETACL Nope", "DELETEACL Nope bob"):
        out = r.cmd("n", cmd)
        assert_eq(len(out), 1, out)
        assert out[0].startswith("n NO [NONEXISTENT] "), (cmd, out)
    # another user's list of a mailbox with the same name is another list
    b = D.raw("bob")
    ok(b.cmd("c", "CREATE Team"), "c")
    assert_eq(b.cmd("g", "GETACL Team"), ["* ACL Team bob " + ALL, "g OK GETACL completed"])


UNKNOWN = "TAG NO [CANNOT] Unknown identifier: not a user of this server, nor anyone or " \
    "authenticated"


def test_identifiers():
    """RFC 4314 3.1 lets a server refuse an identifier: rights go only to users of the store
    and to the groups anyone and authenticated (each also negative), so a typing error
    does not wait in the list for whoever takes the name; taking rights away from any name
    is allowed (a stale row can go). mailctl acl set refuses the same (exit 67)."""
    store_users("bob")
    r = D.raw("alice")
    ok(r.cmd("c", "CREATE Ids"), "c")
    dialogue(r, [
        ("SETACL Ids nosuch lr", [UNKNOWN]),
        ("SETACL Ids -nosuch r", [UNKNOWN]),
        ("SETACL Ids nosuch +l", [UNKNOWN]),
        ("SETACL Ids $team lr", [UNKNOWN]),  # no groups but the two
        ("SETACL Ids nosuch -lr", ["TAG OK SETACL completed"]),
        ('SETACL Ids nosuch ""', ["TAG OK SETACL completed"]),
        ("DELETEACL Ids nosuch", ["TAG OK DELETEACL completed"]),
        ("SETACL Ids authenticated lr", ["TAG OK SETACL completed"]),
        ("SETACL Ids -authenticated w", ["TAG OK SETACL completed"]),
        ("SETACL Ids -anyone p", ["TAG OK SETACL completed"]),
        ("SETACL Ids -bob s", ["TAG OK SETACL completed"]),
        ("GETACL Ids", ["* ACL Ids alice " + ALL +
                        " -anyone p -authenticated w -bob s authenticated lr",
                        "TAG OK GETACL completed"]),
    ])
    # a user of the directory who never logged in nor got mail (no store user yet): the
    # directory is asked, and the row names the user as the directory does
    add_logins("gina", "hank")
    assert_eq(mailctl("user", "show", "hank", rc=None).returncode, 67)
    dialogue(r, [("SETACL Ids hank lr", ["TAG OK SETACL completed"]),
                 ("SETACL Ids -HANK w", ["TAG OK SETACL completed"]),
                 ("GETACL Ids", ["* ACL Ids alice " + ALL + " -anyone p -authenticated w"
                                 " -bob s -hank w authenticated lr hank lr",
                                 "TAG OK GETACL completed"]),
                 ("DELETEACL Ids hank", None), ("DELETEACL Ids -hank", None)])
    # mailctl asks the directory too
    assert_eq(mailctl("acl", "set", "alice", "Ids", "HANK", "+l")["identifier"], "hank")
    assert_eq(mailctl("acl", "set", "alice", "Ids", "-Hank", "i")["identifier"], "-hank")
    assert_eq(mailctl("user", "show", "hank", rc=None).returncode, 67)
    mailctl("acl", "delete", "alice", "Ids", "hank")
    mailctl("acl", "delete", "alice", "Ids", "-hank")
    p = mailctl("acl", "set", "alice", "Ids", "nosuch", "lr", rc=67)
    assert b"nosuch" in p.stderr, p.stderr
    mailctl("acl", "set", "alice", "Ids", "-nosuch", "l", rc=67)
    assert_eq(mailctl("acl", "set", "alice", "Ids", "nosuch", "-l")["rights"], "")
    assert_eq(mailctl("acl", "set", "alice", "Ids", "authenticated", "+i")["rights"], "lri")
    assert_eq(r.cmd("g", "GETACL Ids")[0],
              "* ACL Ids alice " + ALL + " -anyone p -authenticated w -bob s authenticated lri")


def test_list_follows_the_mailbox():
    r = D.raw("carol")
    ok(r.cmd("c", "CREATE Proj/Sub"), "c")
    dialogue(r, [
        ("SETACL Proj bob lr", ["TAG OK SETACL completed"]),
        ("SETACL Proj/Sub bob lri", ["TAG OK SETACL completed"]),
        ("RENAME Proj Plans", ["TAG OK RENAME completed"]),
        ("GETACL Plans", ["* ACL Plans carol " + ALL + " bob lr", "TAG OK GETACL completed"]),
        ("GETACL Plans/Sub", ["* ACL Plans/Sub carol " + ALL + " bob lri",
                              "TAG OK GETACL completed"]),
        # deleted (kept \\Noselect for its child): made again, it starts with no list
        ("DELETE Plans", ["TAG OK DELETE completed"]),
        ("CREATE Plans", None),
        ("GETACL Plans", ["* ACL Plans carol " + ALL, "TAG OK GETACL completed"]),
        ("DELETE Plans/Sub", ["TAG OK DELETE completed"]),
        ("CREATE Plans/Sub", None),
        ("GETACL Plans/Sub", ["* ACL Plans/Sub carol " + ALL, "TAG OK GETACL completed"]),
    ])


def test_kill9_keeps_acknowledged():
    r = D.raw("alice")
    ok(r.cmd("c", "CREATE Durable"), "c")
    ok(r.cmd("a", "SETACL Durable bob lrs"), "a")
    r.close()
    D.kill9()
    D.start()
    r = D.raw("alice")
    assert_eq(r.cmd("g", "GETACL Durable"), ["* ACL Durable alice " + ALL + " bob lrs",
                                            "g OK GETACL completed"])


def test_imaplib():
    c = D.login("bob")
    c.create("Lib")
    assert_eq(c.setacl("Lib", "alice", "lr")[0], "OK")
    typ, data = c.getacl("Lib")
    assert_eq((typ, data), ("OK", [b"Lib bob " + ALL.encode() + b" alice lr"]))
    typ, data = c.myrights("Lib")
    assert_eq((typ, data), ("OK", [b"Lib " + ALL.encode()]))
    assert_eq(c.deleteacl("Lib", "alice")[0], "OK")
    assert_eq(c.getacl("Lib")[1], [b"Lib bob " + ALL.encode()])
    c.logout()


def test_mailctl_acl():
    """mailctl acl and imapd on one store: each sees what the other wrote."""
    r = D.raw("alice")
    ok(r.cmd("c", "CREATE Shared"), "c")
    ok(r.cmd("a", "SETACL Shared bob lr"), "a")
    assert_eq(mailctl("acl", "get", "alice", "Shared"),
              [{"identifier": "alice", "rights": ALL}, {"identifier": "bob", "rights": "lr"}])
    assert_eq(mailctl("acl", "set", "alice", "Shared", "bob", "+wd"),
              {"user": "alice", "mailbox": "Shared", "identifier": "bob",
               "rights": "lrwted"})
    assert_eq(mailctl("acl", "set", "alice", "Shared", "-anyone", "c")["rights"], "kxc")
    assert_eq(r.cmd("g", "GETACL Shared"),
              ["* ACL Shared alice " + ALL + " -anyone kxc bob lrwted",
               "g OK GETACL completed"])
    assert_eq(mailctl("acl", "delete", "alice", "Shared", "-anyone"),
              {"user": "alice", "mailbox": "Shared", "identifier": "-anyone",
               "done": "deleted"})
    # refusals: the owner, a mailbox or user that is not there, rights or ids that are none
    mailctl("acl", "set", "alice", "Shared", "alice", "l", rc=1)
    mailctl("acl", "set", "alice", "Nope", "bob", "l", rc=1)
    mailctl("acl", "get", "alice", "Nope", rc=1)
    mailctl("acl", "get", "nosuchuser", "INBOX", rc=67)
    mailctl("acl", "set", "alice", "Shared", "bob", "lZ", rc=64)
    mailctl("acl", "set", "alice", "Shared", "a b", "l", rc=64)
    assert_eq(r.cmd("h", "GETACL Shared"), ["* ACL Shared alice " + ALL + " bob lrwted",
                                           "h OK GETACL completed"])
    # a deleted mailbox leaves no row behind: verify finds nothing to say
    ok(r.cmd("d", "DELETE Shared"), "d")
    v = mailctl("verify")
    assert_eq((v["status"], v["bad_acl"]), ("clean", 0))


NS = {"namespace_other": "Other Users/", "namespace_shared": "Shared/"}
MSG = b"From: a@example.org\r\nSubject: team\r\n\r\nplans\r\n"


def lists(r, pattern):
    """The names LIST "" pattern answers, with their attributes."""
    out = ok(r.cmd("l", 'LIST "" "%s"' % pattern), "l")
    return [line for line in out[:-1]]


def test_namespace_answer():
    """RFC 2342 5: the personal namespace, the other users' and the shared one."""
    r = D.raw("alice")
    assert_eq(r.cmd("n", "NAMESPACE"),
              ['* NAMESPACE (("" "/")) (("Other Users/" "/")) (("Shared/" "/"))',
               "n OK Namespace completed"])


def test_grantee_lists_selects_reads():
    a, b, c = D.raw("alice"), D.raw("bob"), D.raw("carol")
    # two partitions, three users: the grants below cross partitions or not, and are said
    parts = {u: mailctl("user", "show", u)["partition"] for u in ("alice", "bob", "carol")}
    print("partitions:", parts)
    ok(a.cmd("c", "CREATE Team"), "c")
    a.append(MSG, mailbox="Team")
    ok(a.cmd("s", "SETACL Team bob lr"), "s")
    got = lists(b, "*")
    for want in ['* LIST (\\Noselect \\HasChildren) "/" "Other Users"',
                 '* LIST (\\Noselect \\HasChildren) "/" "Other Users/alice"',
                 '* LIST (\\HasNoChildren) "/" "Other Users/alice/Team"']:
        assert want in got, (want, got)
    assert_eq([x for x in lists(b, "%") if "Other" in x],
              ['* LIST (\\Noselect \\HasChildren) "/" "Other Users"'])
    # carol was given nothing: nothing listed, and the name does not exist for her
    assert_eq([x for x in lists(c, "*") if "Other" in x], [])
    out = c.cmd("x", 'SELECT "Other Users/alice/Team"')
    assert out[-1].startswith("x NO [NONEXISTENT]"), out
    # bob reads: his rights, STATUS, a read-only SELECT, FETCH
    assert_eq(b.cmd("m", 'MYRIGHTS "Other Users/alice/Team"'),
              ['* MYRIGHTS "Other Users/alice/Team" lr', "m OK MYRIGHTS completed"])
    out = ok(b.cmd("t", 'STATUS "Other Users/alice/Team" (MESSAGES)'), "t")
    assert_eq(out[0], '* STATUS "Other Users/alice/Team" (MESSAGES 1)')
    out = b.cmd("e", 'SELECT "Other Users/alice/Team"')
    assert_eq(out[-1], "e OK [READ-ONLY] SELECT completed")
    out = ok(b.cmd("f", "FETCH 1 (FLAGS BODY[HEADER.FIELDS (SUBJECT)])"), "f")
    assert "Subject: team" in "\n".join(out), out
    # the session sees the owner's changes as for its own mail
    a.append(MSG, mailbox="Team")
    out = ok(b.cmd("o", "NOOP"), "o")
    assert "* 2 EXISTS" in out, out
    # without 'a' the list is not bob's to read or change
    assert b.cmd("g", 'GETACL "Other Users/alice/Team"')[-1].startswith("g NO [NOPERM]")
    assert b.cmd("h", 'SETACL "Other Users/alice/Team" carol l')[-1].startswith(
        "h NO [NOPERM]")
    # one's own mailboxes have their own names; users nobody knows do not exist
    for name in ("Other Users/bob/INBOX", "Other Users/nosuch/INBOX", "Other Users/alice",
                 "Other Users"):
        out = b.cmd("y", 'EXAMINE "%s"' % name)
        assert out[-1].startswith("y NO [NONEXISTENT]"), (name, out)


def test_rights_taken_away():
    a, b = D.raw("alice"), D.raw("bob")
    ok(a.cmd("c", "CREATE Gone"), "c")
    ok(a.cmd("s", "SETACL Gone bob l"), "s")
    # 'l' without 'r': listed, not readable
    assert '* LIST (\\HasNoChildren) "/" "Other Users/alice/Gone"' in lists(b, "*")
    out = b.cmd("e", 'EXAMINE "Other Users/alice/Gone"')
    assert out[-1].startswith("e NO [NOPERM]"), out
    out = b.cmd("t", 'STATUS "Other Users/alice/Gone" (MESSAGES)')
    assert out[-1].startswith("t NO [NOPERM]"), out
    ok(a.cmd("d", "DELETEACL Gone bob"), "d")
    assert_eq([x for x in lists(b, "*") if "Gone" in x], [])
    out = b.cmd("m", 'MYRIGHTS "Other Users/alice/Gone"')
    assert out[-1].startswith("m NO [NONEXISTENT]"), out


def test_anyone_negative_and_admin():
    a, b, c = D.raw("alice"), D.raw("bob"), D.raw("carol")
    ok(a.cmd("c", "CREATE Open"), "c")
    ok(a.cmd("s", "SETACL Open anyone lr"), "s")
    for r in (b, c):
        assert '* LIST (\\HasNoChildren) "/" "Other Users/alice/Open"' in lists(r, "*")
    # a negative right takes 'l' from carol alone
    ok(a.cmd("n", "SETACL Open -carol l"), "n")
    assert_eq([x for x in lists(c, "*") if "Open" in x], [])
    assert '* LIST (\\HasNoChildren) "/" "Other Users/alice/Open"' in lists(b, "*")
    # 'a' lets bob read and change the list, in alice's partition
    ok(a.cmd("g", "SETACL Open bob +a"), "g")
    assert_eq(b.cmd("h", 'GETACL "Other Users/alice/Open"'),
              ['* ACL "Other Users/alice/Open" alice ' + ALL + " -carol l anyone lr bob a",
               "h OK GETACL completed"])
    ok(b.cmd("i", 'SETACL "Other Users/alice/Open" carol lr'), "i")
    assert b.cmd("j", 'SETACL "Other Users/alice/Open" alice -l')[-1].startswith(
        "j NO [CANNOT]")
    assert_eq(a.cmd("k", "GETACL Open"),
              ["* ACL Open alice " + ALL + " -carol l anyone lr bob a carol lr",
               "k OK GETACL completed"])


def flags_of(r, seq):
    out = ok(r.cmd("q", "FETCH %d FLAGS" % seq), "q")
    return out[0]


def test_grantee_writes():
    """RFC 4314 4: s for \\Seen (the grantee's own: test_imapd_seen), w for the other
    flags, t for \\Deleted, e for EXPUNGE; SELECT is read-write with any of s w t e."""
    a, b = D.raw("alice"), D.raw("bob")
    ok(a.cmd("c", "CREATE Work"), "c")
    for _ in range(3):
        a.append(MSG, mailbox="Work")
    ok(a.cmd("s", "SETACL Work bob lrw"), "s")
    assert_eq(b.cmd("e", 'SELECT "Other Users/alice/Work"')[-1],
              "e OK [READ-WRITE] SELECT completed")
    # no 's': reading the body leaves \Seen alone, and STORE of it is refused
    ok(b.cmd("f", "FETCH 1 BODY[]"), "f")
    assert_eq(flags_of(b, 1), "* 1 FETCH (FLAGS ())")
    assert b.cmd("g", "STORE 1 +FLAGS (\\Seen)")[-1].startswith("g NO [NOPERM]")
    ok(b.cmd("h", "STORE 1 +FLAGS (\\Flagged)"), "h")
    assert b.cmd("i", "STORE 1 +FLAGS (\\Deleted)")[-1].startswith("i NO [NOPERM]")
    assert b.cmd("j", "STORE 1 FLAGS (\\Answered)")[-1].startswith("j NO [NOPERM]")
    assert b.cmd("k", "EXPUNGE")[-1].startswith("k NO [NOPERM]")
    assert b.cmd("m", "MOVE 1 INBOX")[-1].startswith("m NO [NOPERM]")
    # with 's', reading sets \Seen: bob's, which the owner does not see (private \Seen)
    ok(a.cmd("t", "SETACL Work bob +ste"), "t")
    assert_eq(b.cmd("e", 'SELECT "Other Users/alice/Work"')[-1],
              "e OK [READ-WRITE] SELECT completed")
    ok(b.cmd("f", "FETCH 2 BODY[]"), "f")
    ok(a.cmd("x", "SELECT Work"), "x")
    # (alice's session has them \\Recent: it is her mailbox)
    f1, f2 = flags_of(a, 1), flags_of(a, 2)
    assert "\\Flagged" in f1 and "\\Seen" not in f1, f1
    assert "\\Seen" not in f2, f2
    assert "\\Seen" in flags_of(b, 2), flags_of(b, 2)
    # t and e: bob deletes and expunges, alice's session is told
    ok(b.cmd("d", "STORE 3 +FLAGS.SILENT (\\Deleted)"), "d")
    out = ok(b.cmd("y", "EXPUNGE"), "y")
    assert "* 3 EXPUNGE" in out, out
    out = ok(a.cmd("n", "NOOP"), "n")
    assert "* 3 EXPUNGE" in out, out


def test_rights_read_at_each_command():
    """RFC 4314 5.1.1: a server that checks the rights at each command. bob has alice's
    mailbox selected while she takes rights away: STORE and EXPUNGE are refused from the next
    command on, a session left with nothing it may change is told FLAGS and PERMANENTFLAGS
    () again, and when 'r' goes the session ends with * BYE [NOPERM]. CLOSE still runs."""
    a, b = D.raw("alice"), D.raw("bob")
    box = "Other Users/alice/Live"
    ok(a.cmd("c", "CREATE Live"), "c")
    for _ in range(2):
        a.append(MSG, mailbox="Live")
    ok(a.cmd("s", "SETACL Live bob lrwte"), "s")
    assert_eq(b.cmd("e", 'SELECT "%s"' % box)[-1], "e OK [READ-WRITE] SELECT completed")
    ok(b.cmd("f", "STORE 1 +FLAGS (\\Flagged)"), "f")
    ok(a.cmd("s", "SETACL Live bob -w"), "s")
    assert b.cmd("f", "STORE 2 +FLAGS (\\Flagged)")[-1].startswith("f NO [NOPERM]")
    assert_eq(b.cmd("m", 'MYRIGHTS "%s"' % box),
              ['* MYRIGHTS "%s" lrted' % box, "m OK MYRIGHTS completed"])
    ok(b.cmd("d", "STORE 2 +FLAGS.SILENT (\\Deleted)"), "d")
    ok(a.cmd("s", "SETACL Live bob -e"), "s")
    assert b.cmd("x", "EXPUNGE")[-1].startswith("x NO [NOPERM]")
    # given back: the next command may use it again
    ok(a.cmd("s", "SETACL Live bob +e"), "s")
    out = ok(b.cmd("x", "EXPUNGE"), "x")
    assert "* 2 EXPUNGE" in out, out
    # nothing left to change: read-only from now, FLAGS and PERMANENTFLAGS said again
    ok(a.cmd("s", "SETACL Live bob lr"), "s")
    out = ok(b.cmd("n", "NOOP"), "n")
    assert "* OK [PERMANENTFLAGS ()] Read-only mailbox" in out, out
    assert any(x.startswith("* FLAGS (") for x in out), out
    out = ok(b.cmd("f", "FETCH 1 FLAGS"), "f")
    assert "\\Flagged" in out[0], out
    # CLOSE with 'r' gone runs (it expunges nothing without 'e')
    ok(a.cmd("s", "SETACL Live bob l"), "s")
    ok(b.cmd("c", "CLOSE"), "c")
    out = b.cmd("e", 'EXAMINE "%s"' % box)
    assert out[-1].startswith("e NO [NOPERM]"), out
    # 'r' taken away while selected: BYE, and the connection closes
    ok(a.cmd("s", "SETACL Live bob lr"), "s")
    assert_eq(b.cmd("e", 'EXAMINE "%s"' % box)[-1], "e OK [READ-ONLY] EXAMINE completed")
    ok(a.cmd("d", "DELETEACL Live bob"), "d")
    b.send("f FETCH 1 BODY[]\r\n")
    assert_eq(b.line(), '* BYE [NOPERM] Your right to read "%s" was taken away' % box)
    try:
        extra = b.line()
    except (EOFError, OSError):
        extra = None
    assert_eq(extra, None)
    # alice's own sessions are never checked so: her mailbox, every right
    ok(a.cmd("e", "SELECT Live"), "e")
    ok(a.cmd("f", "STORE 1 +FLAGS (\\Seen)"), "f")


def idle_until(r, pred, what):
    """Lines r is sent while idling, up to the first pred accepts (bounded by the session's
    read timeout and a line count)."""
    got = []
    for _ in range(50):
        got.append(r.line())
        if pred(got[-1]):
            return got
    raise AssertionError("%s: not among %r" % (what, got))


def bye_unasked(r, box):
    """r is told, without a command, that its read right on box went; then the connection
    ends."""
    assert_eq(idle_until(r, lambda x: x.startswith("* BYE"), "BYE")[-1],
              '* BYE [NOPERM] Your right to read "%s" was taken away' % box)
    try:
        extra = r.line()
    except (EOFError, OSError):
        extra = None
    assert_eq(extra, None)


def test_rights_taken_while_idle():
    """RFC 2177 with RFC 4314 5.1.1: bob IDLEs on alice's mailbox while she changes his
    rights. Without a command of his, he is told what the next command would tell him: left
    with nothing to change, FLAGS and PERMANENTFLAGS () (read-only); with 'r' gone,
    * BYE [NOPERM] and the connection closes. New mail still reaches him in between. (Before
    the change he heard nothing until he left IDLE.)"""
    a, b = D.raw("alice"), D.raw("bob")
    box = "Other Users/alice/Idle"
    ok(a.cmd("c", "CREATE Idle"), "c")
    a.append(MSG, mailbox="Idle")
    ok(a.cmd("s", "SETACL Idle bob lrwte"), "s")
    assert_eq(b.cmd("e", 'SELECT "%s"' % box)[-1], "e OK [READ-WRITE] SELECT completed")
    b.send("i IDLE\r\n")
    assert b.line().startswith("+ "), "no continuation"
    a.append(MSG, mailbox="Idle")
    idle_until(b, lambda x: x == "* 2 EXISTS", "EXISTS while idling")
    ok(a.cmd("s", "SETACL Idle bob lr"), "s")
    got = idle_until(b, lambda x: x.startswith("* OK [PERMANENTFLAGS ()]"), "read-only")
    assert any(x.startswith("* FLAGS (") for x in got), got
    a.append(MSG, mailbox="Idle")
    idle_until(b, lambda x: x == "* 3 EXISTS", "EXISTS after the change")
    b.send("DONE\r\n")
    assert_eq(b.until_tag("i")[-1], "i OK IDLE terminated")
    assert b.cmd("f", "STORE 1 +FLAGS (\\Flagged)")[-1].startswith("f NO"), "read-only"
    # 'r' taken away while idling: the BYE comes unasked, then the end of the connection
    b.send("i IDLE\r\n")
    assert b.line().startswith("+ "), "no continuation"
    ok(a.cmd("s", "SETACL Idle bob l"), "s")
    bye_unasked(b, box)
    # the owner's own idle is never checked so
    ok(a.cmd("e", "SELECT Idle"), "e")
    a.send("i IDLE\r\n")
    assert a.line().startswith("+ "), "no continuation"
    ok(D.raw("alice").cmd("s", "SETACL Idle anyone lr"), "s")
    a.send("DONE\r\n")
    assert_eq(a.until_tag("i"), ["i OK IDLE terminated"])


def test_rights_taken_under_notify():
    """RFC 5465 lets the server speak between commands once NOTIFY is set: bob, with alice's
    mailbox selected and NOTIFY SET, sends nothing more while she takes his rights away. He
    is told FLAGS and PERMANENTFLAGS () when nothing is left to change, and * BYE [NOPERM]
    when 'r' goes, unasked (before: at his next command only)."""
    a, b = D.raw("alice"), D.raw("bob")
    box = "Other Users/alice/Watched"
    ok(a.cmd("c", "CREATE Watched"), "c")
    a.append(MSG, mailbox="Watched")
    ok(a.cmd("s", "SETACL Watched bob lrw"), "s")
    ok(b.cmd("e", 'SELECT "%s"' % box), "e")
    ok(b.cmd("n", "NOTIFY SET (SELECTED (MessageNew MessageExpunge))"), "n")
    ok(a.cmd("s", "SETACL Watched bob lr"), "s")
    got = idle_until(b, lambda x: x.startswith("* OK [PERMANENTFLAGS ()]"), "read-only")
    assert any(x.startswith("* FLAGS (") for x in got), got
    ok(a.cmd("s", "SETACL Watched bob l"), "s")
    bye_unasked(b, box)


def test_notify_watches_shared():
    """RFC 5465's MAILBOXES filter naming alice's mailbox: bob (lr) gets its STATUS at NOTIFY
    SET STATUS and again, unasked, when she adds a message; with 'r' taken away he hears
    nothing more of it (the rights are read at each change), given back he does again.
    carol, who may not see it, never hears of it. (Before: NOTIFY told nothing of other
    users' mailboxes, not even at SET STATUS.) A mailbox named twice is told once."""
    a, b, c = D.raw("alice"), D.raw("bob"), D.raw("carol")
    box = "Other Users/alice/Feed"
    ok(a.cmd("c", "CREATE Feed"), "c")
    ok(a.cmd("s", "SETACL Feed bob lr"), "s")
    # named twice: told once
    watch = 'NOTIFY SET STATUS (MAILBOXES ("%s" "%s") (MessageNew MessageExpunge))' % (box, box)
    out = ok(b.cmd("n", watch), "n")
    assert_eq(len([x for x in out if x.startswith('* STATUS "%s" (MESSAGES 0 ' % box)]), 1)
    assert_eq(ok(c.cmd("n", watch), "n"), ["n OK NOTIFY completed"])
    a.append(MSG, mailbox="Feed")
    idle_until(b, lambda x: x.startswith('* STATUS "%s" (MESSAGES 1 ' % box), "STATUS")
    ok(a.cmd("s", "SETACL Feed bob l"), "s")
    a.append(MSG, mailbox="Feed")
    assert_eq(b.cmd("o", "NOOP"), ["o OK Completed"])
    assert_eq(c.cmd("o", "NOOP"), ["o OK Completed"])
    ok(a.cmd("s", "SETACL Feed bob lr"), "s")
    a.append(MSG, mailbox="Feed")
    out = ok(b.cmd("o", "NOOP"), "o")
    assert any(x.startswith('* STATUS "%s" (MESSAGES 3 ' % box) for x in out), out


def put(r, mailbox, flags, msg=MSG):
    """APPEND msg with flags (raw): the reply lines."""
    r.send(("P APPEND \"%s\" (%s) {%d+}\r\n" % (mailbox, flags, len(msg))).encode() + msg +
           b"\r\n")
    return r.until_tag("P")


def test_grantee_inserts():
    """RFC 4314 4: 'i' on carol's mailbox lets bob APPEND, COPY and MOVE into it; the
    messages get her UIDs (APPENDUID, COPYUID of her mailbox) and count in her usage; s, w
    and t decide which of the flags given (or the copied message's) they keep; without 'i'
    NO [NOPERM]. COPY from a mailbox of another store partition is NO [CANNOT]; APPEND
    crosses partitions."""
    parts = {u: mailctl("user", "show", u)["partition"] for u in ("carol", "bob", "alice")}
    print("partitions:", parts)
    # the store's hash puts carol and bob together, alice apart: both cases are met
    assert parts["carol"] == parts["bob"] != parts["alice"], parts
    a, b, c = D.raw("carol"), D.raw("bob"), D.raw("alice")
    box = "Other Users/carol/Drop"
    ok(a.cmd("c", "CREATE Drop"), "c")
    ok(a.cmd("s", "SETACL Drop bob lr"), "s")
    out = put(b, box, "\\Seen")
    assert out[-1].startswith("P NO [NOPERM]"), out
    ok(b.cmd("i", "SELECT INBOX"), "i")
    uid = b.append(MSG, mailbox="INBOX", flags="(\\Seen \\Flagged $Bob)")
    out = b.cmd("y", 'UID COPY %d "%s"' % (uid, box))
    assert out[-1].startswith("y NO [NOPERM]"), out
    out = b.cmd("m", 'UID MOVE %d "%s"' % (uid, box))
    assert out[-1].startswith("m NO [NOPERM]"), out
    # a name nobody shares: not to be created, so not TRYCREATE
    out = put(b, "Other Users/carol/Nope", "")
    assert out[-1].startswith("P NO [NONEXISTENT]"), out
    before = mailctl("user", "show", "carol")["messages"]
    # 'i' alone: no flag survives, no keyword is made
    ok(a.cmd("s", "SETACL Drop bob lri"), "s")
    out = ok(put(b, box, "\\Seen \\Flagged \\Deleted $Bob"), "P")
    assert out[-1].startswith("P OK [APPENDUID "), out
    u1 = int(out[-1].split()[4].rstrip("]"))
    out = ok(b.cmd("y", 'UID COPY %d "%s"' % (uid, box)), "y")
    assert "[COPYUID " in out[-1], out
    # 's' then: \Seen alone; 'w' and 't': the others, keywords too
    ok(a.cmd("s", "SETACL Drop bob lris"), "s")
    ok(put(b, box, "\\Seen \\Flagged \\Deleted $Bob"), "P")
    ok(a.cmd("s", "SETACL Drop bob lriwt"), "s")
    ok(put(b, box, "\\Seen \\Flagged \\Deleted $Bob"), "P")
    # MOVE with every flag right: bob's message leaves his INBOX with its flags
    ok(a.cmd("s", "SETACL Drop bob lriswt"), "s")
    out = ok(b.cmd("m", 'UID MOVE %d "%s"' % (uid, box)), "m")
    assert any(x.startswith("* OK [COPYUID ") for x in out), out
    assert "* 1 EXPUNGE" in out, out
    # carol sees them in her mailbox, in her UIDs, counted in her usage
    out = ok(a.cmd("e", "EXAMINE Drop"), "e")
    got = ok(a.cmd("f", "FETCH 1:* (UID FLAGS)"), "f")[:-1]
    assert_eq(len(got), 5, got)
    assert "UID %d " % u1 in got[0], (u1, got)
    # (\\Seen given with 's' is bob's own, not carol's: test_imapd_seen)
    want = [(), (), (), ("\\Flagged", "\\Deleted", "$Bob"), ("\\Flagged", "$Bob")]
    for line, w in zip(got, want):
        flags = line[line.index("FLAGS (") + 7:line.index(")", line.index("FLAGS ("))].split()
        # (\\Recent: the owner's first session to see them)
        assert_eq(sorted(set(flags) - {"\\Recent"}), sorted(w), (line, w))
    ok(b.cmd("e", 'EXAMINE "%s"' % box), "e")
    got = ok(b.cmd("f", "FETCH 1:* FLAGS"), "f")[:-1]
    assert_eq(["\\Seen" in line for line in got], [False, False, True, False, True])
    assert_eq(mailctl("user", "show", "carol")["messages"], before + 5)
    # alice, in the other partition: APPEND lands, COPY and MOVE cannot
    ok(a.cmd("s", "SETACL Drop alice lri"), "s")
    ok(put(c, box, ""), "P")
    ok(c.cmd("i", "SELECT INBOX"), "i")
    cu = c.append(MSG, mailbox="INBOX")
    for verb in ("COPY", "MOVE"):
        out = c.cmd("y", 'UID %s %d "%s"' % (verb, cu, box))
        assert_eq(out, ["y NO [CANNOT] %s: the two mailboxes are in different store "
                        "partitions; APPEND the messages instead" % verb])
    assert_eq(mailctl("user", "show", "carol")["messages"], before + 6)
    v = mailctl("verify")
    assert_eq(v["status"], "clean")


def test_insert_within_owner_quota():
    """What a grantee puts into carol's mailbox is charged to carol: her quota refuses it
    (a MOVE too, which within one user's mailboxes changes no usage)."""
    a, b = D.raw("carol"), D.raw("bob")
    box = "Other Users/carol/Full"
    ok(a.cmd("c", "CREATE Full"), "c")
    ok(a.cmd("s", "SETACL Full bob lri"), "s")
    n = mailctl("user", "show", "carol")["messages"]
    mailctl("quota", "set", "carol", "--messages", str(n))
    try:
        out = put(b, box, "")
        assert out[-1].startswith("P NO [OVERQUOTA]"), out
        ok(b.cmd("i", "SELECT INBOX"), "i")
        uid = b.append(MSG, mailbox="INBOX")
        for verb in ("COPY", "MOVE"):
            out = b.cmd("y", 'UID %s %d "%s"' % (verb, uid, box))
            assert out[-1].startswith("y NO [OVERQUOTA]"), (verb, out)
        out = ok(b.cmd("f", "UID FETCH %d FLAGS" % uid), "f")
        assert len(out) == 2, out  # still in bob's INBOX
    finally:
        mailctl("quota", "set", "carol", "--messages", "0")
    ok(put(b, box, ""), "P")


def test_grantee_replace():
    """REPLACE (RFC 8508) in another user's selected mailbox expunges the message replaced:
    it needs t and e there (as MOVE out of it), and i on the mailbox appended to."""
    a, b = D.raw("alice"), D.raw("bob")
    ok(a.cmd("c", "CREATE Redo"), "c")
    a.append(MSG, mailbox="Redo")
    ok(a.cmd("s", "SETACL Redo bob lrwi"), "s")
    box = "Other Users/alice/Redo"
    assert_eq(b.cmd("e", 'SELECT "%s"' % box)[-1], "e OK [READ-WRITE] SELECT completed")

    def replace():
        b.send(('R REPLACE 1 "%s" {%d+}\r\n' % (box, len(MSG))).encode() + MSG + b"\r\n")
        return b.until_tag("R")
    out = replace()
    assert_eq(out, ["R NO [NOPERM] REPLACE: no right to remove messages here (t, e)"])
    assert_eq(ok(a.cmd("t", 'STATUS Redo (MESSAGES)'), "t")[0], "* STATUS Redo (MESSAGES 1)")
    ok(a.cmd("s", "SETACL Redo bob +te"), "s")
    assert_eq(b.cmd("e", 'SELECT "%s"' % box)[-1], "e OK [READ-WRITE] SELECT completed")
    out = ok(replace(), "R")
    assert "* 1 EXPUNGE" in out, out
    assert_eq(ok(a.cmd("t", 'STATUS Redo (MESSAGES)'), "t")[0], "* STATUS Redo (MESSAGES 1)")


def test_create_delete_rename_rights():
    """RFC 4314 4 on another user's mailboxes: CREATE needs 'k' on the nearest existing
    parent, and the new mailbox (and a level made for it) inherits that parent's list;
    DELETE needs 'x' on the mailbox; RENAME 'x' on it and, to another parent, 'k' on the
    new one; a mailbox never changes owners. The writes land in the owner's partition,
    under the owner's name; MYRIGHTS and LISTRIGHTS answer k and x."""
    a, b, c = D.raw("alice"), D.raw("bob"), D.raw("carol")
    top = "Other Users/alice/Proj"
    dialogue(a, [("CREATE Proj", None), ("SETACL Proj bob lr", None),
                 ("SETACL Proj carol lr", None)])
    for cmd, code in (('CREATE "%s/Sub"' % top, "NOPERM"),
                      ('CREATE "Other Users/alice/Top"', "NOPERM"),
                      ('DELETE "%s"' % top, "NOPERM"),
                      ('RENAME "%s" "%s2"' % (top, top), "NOPERM"),
                      ('DELETE "Other Users/alice/Hidden"', "NONEXISTENT")):
        out = b.cmd("x", cmd)
        assert out[-1].startswith("x NO [%s]" % code), (cmd, out)
    ok(a.cmd("k", "SETACL Proj bob +k"), "k")
    assert_eq(b.cmd("m", 'MYRIGHTS "%s"' % top),
              ['* MYRIGHTS "%s" lrk' % top, "m OK MYRIGHTS completed"])
    out = ok(b.cmd("c", 'CREATE "%s/Sub/Deep"' % top), "c")
    assert "[MAILBOXID (" in out[-1], out
    # alice owns them; each has Proj's list, so bob and carol see them
    assert_eq(a.cmd("g", "GETACL Proj/Sub/Deep"),
              ["* ACL Proj/Sub/Deep alice " + ALL + " bob lrk carol lr",
               "g OK GETACL completed"])
    assert_eq(a.cmd("g", "GETACL Proj/Sub")[0],
              "* ACL Proj/Sub alice " + ALL + " bob lrk carol lr")
    assert '* LIST (\\HasNoChildren) "/" "%s/Sub/Deep"' % top in lists(c, "*")
    # k alone deletes nothing and renames only below a k
    for cmd in ('DELETE "%s/Sub/Deep"' % top, 'RENAME "%s/Sub/Deep" "%s/Deep"' % (top, top)):
        out = b.cmd("x", cmd)
        assert out[-1].startswith("x NO [NOPERM]"), (cmd, out)
    ok(a.cmd("x", "SETACL Proj/Sub/Deep bob +x"), "x")
    # within one parent x is enough; to another parent k there too
    ok(b.cmd("r", 'RENAME "%s/Sub/Deep" "%s/Sub/Down"' % (top, top)), "r")
    ok(a.cmd("x", "SETACL Proj/Sub bob -k"), "x")
    out = b.cmd("r", 'RENAME "%s/Sub/Down" "%s/Sub/Down/Under"' % (top, top))
    assert out[-1].startswith("r NO"), out
    out = b.cmd("r", 'RENAME "%s/Sub/Down" "%s/Down"' % (top, top))
    assert out[-1].startswith("r OK"), out
    out = b.cmd("r", 'RENAME "%s/Down" Mine' % top)
    assert_eq(out, ["r NO [CANNOT] RENAME: a mailbox cannot change owners"])
    out = b.cmd("r", 'RENAME "%s/Down" "Other Users/carol/Down"' % top)
    assert out[-1].startswith("r NO [NONEXISTENT]") or \
        out[-1].startswith("r NO [CANNOT]"), out
    # alice sees the renamed mailbox with its list (x given above, k from Proj)
    assert_eq(a.cmd("g", "GETACL Proj/Down")[0],
              "* ACL Proj/Down alice " + ALL + " bob lrkxc carol lr")
    ok(b.cmd("d", 'DELETE "%s/Down"' % top), "d")
    out = ok(a.cmd("l", 'LIST "" "Proj/*"'), "l")
    assert not any("Down" in x for x in out), out
    # LISTRIGHTS shows k and x as rights of their own (RIGHTS=texk), c and d too
    assert_eq(a.cmd("r", "LISTRIGHTS Proj bob"),
              ['* LISTRIGHTS Proj bob "" l r s w i p k x t e c d a',
               "r OK LISTRIGHTS completed"])
    # c is k and x (2.1.1): with it bob deletes what he made
    ok(a.cmd("s", "SETACL Proj/Sub bob lrc"), "s")
    assert_eq(b.cmd("m", 'MYRIGHTS "%s/Sub"' % top),
              ['* MYRIGHTS "%s/Sub" lrkxc' % top, "m OK MYRIGHTS completed"])
    ok(b.cmd("d", 'DELETE "%s/Sub"' % top), "d")
    v = mailctl("verify")
    assert_eq((v["status"], v["bad_acl"]), ("clean", 0))


def test_list_options_and_rev2_select():
    """The other namespaces' mailboxes in LIST (SPECIAL-USE) with the owner's special use,
    in RETURN (STATUS (...)) and RETURN (METADATA (...)) for the ones the client may read
    ('r'), and in the LIST response of an IMAP4rev2 SELECT (RFC 9051 6.3.2)."""
    a, b = D.raw("alice"), D.raw("bob")
    box = "Other Users/alice/Outbox"
    dialogue(a, [("CREATE Outbox (USE (\\Sent))", None), ("SETACL Outbox bob lr", None),
                 ("CREATE Peek", None), ("SETACL Peek bob l", None),
                 ('SETMETADATA Outbox (/shared/comment "sent mail")', None)])
    a.append(MSG, mailbox="Outbox")
    got = ok(b.cmd("l", 'LIST (SPECIAL-USE) "" "Other Users/*"'), "l")[:-1]
    assert_eq(got, ['* LIST (\\HasNoChildren \\Sent) "/" "%s"' % box])
    got = lists(b, "Other Users/alice/Outbox")
    assert_eq(got, ['* LIST (\\HasNoChildren \\Sent) "/" "%s"' % box])
    got = ok(b.cmd("s", 'LIST "" "Other Users/alice/%" RETURN (STATUS (MESSAGES))'), "s")
    assert '* STATUS "%s" (MESSAGES 1)' % box in got, got
    assert '* LIST (\\HasNoChildren) "/" "Other Users/alice/Peek"' in got, got
    assert not any(x.startswith("* STATUS") and "Peek" in x for x in got), got
    got = ok(b.cmd("m", 'LIST "" "%s" RETURN (METADATA (/shared/comment /shared/x))' % box),
             "m")
    assert_eq(got[1], '* METADATA "%s" (/shared/comment "sent mail" /shared/x NIL)' % box)
    dialogue(b, [("ENABLE IMAP4rev2", None)])
    out = ok(b.cmd("e", 'EXAMINE "%s"' % box), "e")
    assert '* LIST (\\HasNoChildren \\Sent) "/" "%s"' % box in out, out


def test_owner_on_another_host():
    """An owner who moved to another store host (the tombstone mailctl user move --finish
    leaves, made here by the test helper): the names of its mailboxes answer NO [CANNOT]
    saying so, not NONEXISTENT; a name nobody ever had stays NONEXISTENT."""
    p = subprocess.run([D.deliver_bin, D.store, "2", "--tombstone", "gone", "far.example"],
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    b = D.raw("bob")
    moved = ("[CANNOT] %s: the mailbox's owner has moved to another host; mailboxes are "
             "shared on their owner's host only")
    for cmd, verb in (('SELECT "Other Users/gone/INBOX"', "SELECT"),
                      ('EXAMINE "Other Users/gone/Team"', "EXAMINE"),
                      ('STATUS "Other Users/gone/INBOX" (MESSAGES)', "STATUS"),
                      ('MYRIGHTS "Other Users/gone/INBOX"', "ACL"),
                      ('CREATE "Other Users/gone/INBOX/New"', "CREATE"),
                      ('DELETE "Other Users/gone/Team"', "DELETE")):
        assert_eq(b.cmd("x", cmd), ["x NO " + moved % verb], cmd)
    assert_eq(put(b, "Other Users/gone/INBOX", ""), ["P NO " + moved % "APPEND"])
    out = b.cmd("y", 'SELECT "Other Users/nosuch/INBOX"')
    assert out[-1].startswith("y NO [NONEXISTENT]"), out


def test_shared_namespace():
    """Shared/NAME: the mailboxes of the store user "shared", their lists set by mailctl."""
    mailctl("user", "add", "shared")
    mailctl("mailbox", "create", "shared", "News")
    mailctl("acl", "set", "shared", "News", "anyone", "lr")
    mailctl("mailbox", "create", "shared", "Board")
    r = D.raw("carol")
    got = lists(r, "Shared/*")
    assert_eq(got, ['* LIST (\\HasNoChildren) "/" Shared/News'])
    assert_eq(r.cmd("e", "EXAMINE Shared/News")[-1], "e OK [READ-ONLY] EXAMINE completed")
    assert r.cmd("b", "EXAMINE Shared/Board")[-1].startswith("b NO [NONEXISTENT]")


def test_reserved_names():
    r = D.raw("alice")
    for cmd, code in (('CREATE "Other Users/x"', "NOPERM"), ("CREATE Shared/x", "NOPERM"),
                      ('CREATE "Other Users/bob/x"', "NOPERM"),
                      ('RENAME INBOX "Shared/In"', "CANNOT"),
                      ('DELETE "Other Users/bob/INBOX"', "NONEXISTENT")):
        out = r.cmd("c", cmd)
        assert out[-1].startswith("c NO [%s]" % code), (cmd, out)
    # subscribing to a shared name is allowed
    ok(r.cmd("s", "SUBSCRIBE Shared/News"), "s")


def test_ns_imaplib():
    a = D.login("alice")
    a.create("Lib")
    a.setacl("Lib", "bob", "lr")
    a.logout()
    b = D.login("bob")
    typ, names = b.list()
    assert any(b'"Other Users/alice/Lib"' in n for n in names), names
    typ, data = b.select('"Other Users/alice/Lib"', readonly=True)
    assert_eq(typ, "OK")
    b.logout()


def test_deleted_user_inherits_nothing():
    """A user deleted (mailctl user del) takes the rights given to them along: the next
    user of the name (here made again at its first login) inherits none, in either
    partition, and verify finds no row naming nobody."""
    parts = {u: mailctl("user", "show", u)["partition"] for u in ("alice", "bob", "carol")}
    print("partitions:", parts)
    for owner in ("alice", "bob"):
        r = D.raw(owner)
        ok(r.cmd("c", "CREATE Heir"), "c")
        ok(r.cmd("s", "SETACL Heir carol lrswi"), "s")
        ok(r.cmd("n", "SETACL Heir -carol w"), "n")
    c = D.login("carol")
    typ, names = c.list()
    assert sum(b'/Heir"' in n for n in names) == 2, names
    c.logout()
    mailctl("user", "del", "carol")
    assert_eq(mailctl("verify")["bad_acl"], 0)
    c = D.login("carol")  # a new store user of the name
    typ, names = c.list()
    assert not any(b"Heir" in n for n in names), names
    for owner in ("alice", "bob"):
        typ, data = c.select('"Other Users/%s/Heir"' % owner, readonly=True)
        assert typ == "NO" and b"NONEXISTENT" in data[0], (owner, typ, data)
    c.logout()
    for owner in ("alice", "bob"):
        got = D.raw(owner).cmd("g", "GETACL Heir")
        assert_eq(got[0], '* ACL Heir %s lrswipkxtecda' % owner)
    v = mailctl("verify")
    assert_eq((v["status"], v["bad_acl"]), ("clean", 0))


def add_logins(*names):
    """More logins in the users file (the daemon loads it again within a second), and a
    session of the first once imapd knows it."""
    users = os.path.join(D.dir, "users")
    with open(users) as f:
        text = f.read()
    for u in names:
        text += "%s:%s:%s@%s\n" % (u, sha256_hash(IMAP_PASSWORD), u, DOMAIN)
    with open(users + ".new", "w") as f:
        f.write(text)
    os.rename(users + ".new", users)
    for _ in range(300):  # not a timing assertion: waits for the reload, however slow
        r = ImapRaw(D.port, timeout=20)
        out = r.cmd("L", 'LOGIN %s "%s"' % (names[0], IMAP_PASSWORD))
        if out[-1].startswith("L OK"):
            after_test(r.close)
            return r
        r.close()
        time.sleep(0.1)
    raise AssertionError("imapd never took the new logins")


def test_user_rename_carries_acl():
    """mailctl user rename dave erin: the rows naming dave (and "-dave") on alice's and
    carol's mailboxes (one of them in dave's partition, the other not) name erin; erin owns
    dave's mailboxes with their lists, a row that named erin on them goes (the owner is never
    a row); nothing is left naming dave. Other users' subscriptions to "Other Users/dave/..."
    name erin."""
    d = add_logins("dave", "erin")
    parts = {u: mailctl("user", "show", u)["partition"] for u in ("alice", "carol", "dave")}
    print("partitions:", parts)
    a, c = D.raw("alice"), D.raw("carol")
    ok(a.cmd("c", "CREATE Mates"), "c")
    ok(a.cmd("s", "SETACL Mates dave lri"), "s")
    ok(c.cmd("c", "CREATE Crew"), "c")
    ok(c.cmd("s", "SETACL Crew dave lr"), "s")
    ok(c.cmd("n", "SETACL Crew -dave r"), "n")
    ok(d.cmd("c", "CREATE Own"), "c")
    ok(d.cmd("s", "SETACL Own bob lr"), "s")
    # erin is no store user yet, but the directory knows her
    ok(d.cmd("e", "SETACL Own erin lrs"), "e")
    d.close()
    # bob's subscriptions to dave's mailboxes follow the name; davey is another user
    b = D.raw("bob")
    dialogue(b, [('SUBSCRIBE "Other Users/%s"' % n, None)
                 for n in ("dave/Own", "dave/Gone/Deep", "davey/Own")])
    mailctl("user", "rename", "dave", "erin")
    e = D.login("erin")
    typ, data = e.myrights('"Other Users/alice/Mates"')
    assert_eq((typ, data), ("OK", [b'"Other Users/alice/Mates" lri']))
    typ, data = e.myrights('"Other Users/carol/Crew"')
    assert_eq((typ, data), ("OK", [b'"Other Users/carol/Crew" l']))
    typ, data = e.getacl("Own")
    assert_eq((typ, data), ("OK", [b"Own erin " + ALL.encode() + b" bob lr"]))
    e.logout()
    assert_eq(a.cmd("g", "GETACL Mates"),
              ["* ACL Mates alice " + ALL + " erin lri", "g OK GETACL completed"])
    assert_eq(c.cmd("g", "GETACL Crew"),
              ["* ACL Crew carol " + ALL + " -erin r erin lr", "g OK GETACL completed"])
    got = ok(b.cmd("l", 'LSUB "" "Other Users/*"'), "l")[:-1]
    assert_eq(sorted(x for x in got if "dave" in x or "erin" in x),
              ['* LSUB () "/" "Other Users/erin/Own"',
               '* LSUB (\\Noselect) "/" "Other Users/davey/Own"',
               '* LSUB (\\Noselect) "/" "Other Users/erin/Gone/Deep"'])
    dialogue(b, [('UNSUBSCRIBE "Other Users/%s"' % n, None)
                 for n in ("erin/Own", "erin/Gone/Deep", "davey/Own")])
    assert_eq(b.cmd("m", 'MYRIGHTS "Other Users/erin/Own"'),
              ['* MYRIGHTS "Other Users/erin/Own" lr', "m OK MYRIGHTS completed"])
    out = b.cmd("m", 'MYRIGHTS "Other Users/dave/Own"')
    assert out[-1].startswith("m NO [NONEXISTENT]"), out
    v = mailctl("verify")
    assert_eq((v["status"], v["bad_acl"]), ("clean", 0))


def test_subscribed_shared():
    """Subscriptions to other users' mailboxes (RFC 2342's namespaces): LSUB, LIST
    (SUBSCRIBED) and LIST RETURN (SUBSCRIBED) show a subscribed mailbox the user may see as
    the mailbox it is, and one it may not see as a subscription without a mailbox."""
    a, b = D.raw("alice"), D.raw("bob")
    dialogue(a, [("CREATE Subs", None), ("SETACL Subs bob lr", None), ("CREATE Hidden", None)])
    dialogue(b, [('SUBSCRIBE "Other Users/alice/%s"' % n, None) for n in ("Subs", "Hidden")])
    got = ok(b.cmd("l", 'LSUB "" "Other Users/*"'), "l")[:-1]
    assert_eq(sorted(got), ['* LSUB () "/" "Other Users/alice/Subs"',
                            '* LSUB (\\Noselect) "/" "Other Users/alice/Hidden"'])
    got = ok(b.cmd("l", 'LIST (SUBSCRIBED) "" "Other Users/*"'), "l")[:-1]
    assert_eq(sorted(got), ['* LIST (\\HasNoChildren \\Subscribed) "/" "Other Users/alice/Subs"',
                            '* LIST (\\NonExistent \\Subscribed) "/" '
                            '"Other Users/alice/Hidden"'])
    got = ok(b.cmd("l", 'LIST "" "Other Users/*" RETURN (SUBSCRIBED)'), "l")[:-1]
    assert '* LIST (\\HasNoChildren \\Subscribed) "/" "Other Users/alice/Subs"' in got, got
    assert '* LIST (\\HasNoChildren) "/" "Other Users/alice/Team"' in got, got
    assert not any("Hidden" in x for x in got), got
    # the shared namespace's too, through imaplib
    ok(b.cmd("w", "SUBSCRIBE Shared/News"), "w")
    m = D.login("bob")
    typ, data = m.lsub()
    assert_eq(typ, "OK")
    assert b'() "/" Shared/News' in data, data
    assert b'() "/" "Other Users/alice/Subs"' in data, data
    m.unsubscribe('"Other Users/alice/Subs"')
    typ, data = m.lsub()
    assert not any(b"Subs" in x for x in data), data
    m.logout()


def main():
    global D
    imapd, deliver = sys.argv[1], sys.argv[2]
    D = Imapd(imapd, deliver=deliver)
    rc = run_suite(D, [test_rfc_examples, test_anyone_and_negative, test_identifiers,
                       test_list_follows_the_mailbox, test_kill9_keeps_acknowledged,
                       test_imaplib, test_mailctl_acl], D.dir)
    D = Imapd(imapd, deliver=deliver, extra=NS)
    rc |= run_suite(D, [test_namespace_answer, test_grantee_lists_selects_reads,
                        test_rights_taken_away, test_anyone_negative_and_admin,
                        test_grantee_writes, test_rights_read_at_each_command,
                        test_rights_taken_while_idle, test_rights_taken_under_notify,
                        test_notify_watches_shared,
                        test_grantee_inserts,
                        test_insert_within_owner_quota, test_grantee_replace,
                        test_create_delete_rename_rights, test_list_options_and_rev2_select,
                        test_owner_on_another_host,
                        test_shared_namespace, test_reserved_names, test_ns_imaplib,
                        test_deleted_user_inherits_nothing,
                        test_user_rename_carries_acl, test_subscribed_shared], D.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
