"""imapd end to end: METADATA and METADATA-SERVER (RFC 5464), raw dialogues of the RFC's
examples (4.2, 4.2.1 MAXSIZE, 4.2.2 DEPTH, 4.3, 4.4.1) and the limits as NO with their
response codes ([METADATA MAXSIZE n], [METADATA TOOMANY], [METADATA NOPRIVATE], LONGENTRIES
in the OK), entry-name syntax as BAD, literal8 values, commands sent a byte at a time, the
entries' life with their mailbox (delete, rename, INBOX rename) and after kill -9, entries of
a \\Noselect mailbox, LIST RETURN (METADATA (...)) of LIST-METADATA (RFC 9590), and an
imaplib session.

Usage: test_imapd_metadata.py IMAPD_BINARY DELIVER_BINARY"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite  # noqa: E402
from heronlib import assert_eq, assert_in  # noqa: E402
D = None  # the imapd the running tests talk to

EXTRA = {"metadata_max_size": "4k", "metadata_max_entries": "10",
         "metadata_comment": "Shared comment", "metadata_admin": "mailto:postmaster@example.org"}


def ok(out, tag):
    assert out[-1].startswith(tag + " OK"), out
    return out


def meta(r, box, entry):
    """The METADATA line GETMETADATA box entry answers (the command must succeed)."""
    out = ok(r.cmd("g", "GETMETADATA %s %s" % (box, entry)), "g")
    assert_eq(len(out), 2, out)
    return out[0]


def create(r, name):
    ok(r.cmd("c", "CREATE %s" % name), "c")


def test_capability():
    r = D.raw()
    caps = r.cmd("c", "CAPABILITY")[0].split()
    assert_in("METADATA", caps)
    assert_in("METADATA-SERVER", caps)


def test_rfc_4_3_set_examples():
    """RFC 5464 4.3: a synchronizing literal over two lines, NIL removes, two entries at once,
    each then read back as 4.2 and 4.4.1 show."""
    r = D.raw()
    value = b"My new comment across\r\ntwo lines."  # the 33 bytes the RFC announces
    r.send(b"a SETMETADATA INBOX (/private/comment {33}\r\n")
    assert r.line().startswith("+ ")
    r.send(value + b")\r\n")
    assert_eq(r.until_tag("a"), ["a OK SETMETADATA completed"])
    assert_eq(r.cmd("b", 'GETMETADATA "INBOX" /private/comment'),
              ["* METADATA INBOX (/private/comment {33}\r\n%s)" % value.decode(),
               "b OK GETMETADATA completed"])
    assert_eq(r.cmd("c", "SETMETADATA INBOX (/private/comment NIL)"),
              ["c OK SETMETADATA completed"])
    # removed: asked for by name, it has no value
    assert_eq(r.cmd("d", 'GETMETADATA "INBOX" /private/comment'),
              ["* METADATA INBOX (/private/comment NIL)", "d OK GETMETADATA completed"])
    # removing what is not there is no error
    ok(r.cmd("e", "SETMETADATA INBOX (/private/comment NIL)"), "e")
    ok(r.cmd("f", 'SETMETADATA INBOX (/private/comment "My new comment"'
                  ' /shared/comment "This one is for you!")'), "f")
    assert_eq(r.cmd("g", 'GETMETADATA "INBOX" (/shared/comment /private/comment)'),
              ['* METADATA INBOX (/shared/comment "This one is for you!"'
               ' /private/comment "My new comment")', "g OK GETMETADATA completed"])
    # 4.4.1 writes the entries without parentheses; entry names ignore case
    assert_eq(r.cmd("h", 'GETMETADATA "INBOX" /PRIVATE/Comment /shared/comment'),
              ['* METADATA INBOX (/private/comment "My new comment"'
               ' /shared/comment "This one is for you!")', "h OK GETMETADATA completed"])
    # the same entry twice is written once
    assert_eq(r.cmd("i", 'GETMETADATA INBOX (/shared/comment /shared/comment)'),
              ['* METADATA INBOX (/shared/comment "This one is for you!")',
               "i OK GETMETADATA completed"])
    ok(r.cmd("z", "SETMETADATA INBOX (/private/comment NIL /shared/comment NIL)"), "z")


def test_server_entries():
    """RFC 5464 4.2's first example and 3.3: server /shared entries are read-only (set by the
    administrator), /private server entries are each user's own."""
    r = D.raw()
    assert_eq(r.cmd("a", 'GETMETADATA "" /shared/comment'),
              ['* METADATA "" (/shared/comment "Shared comment")', "a OK GETMETADATA completed"])
    assert_eq(r.cmd("b", 'GETMETADATA "" (/shared/admin /shared/vendor/vendor.x/y)'),
              ['* METADATA "" (/shared/admin "mailto:postmaster@example.org"'
               ' /shared/vendor/vendor.x/y NIL)', "b OK GETMETADATA completed"])
    assert_eq(r.cmd("c", 'SETMETADATA "" (/shared/comment "mine")'),
              ["c NO [NOPERM] SETMETADATA: the server's /shared annotations are set by the "
               "administrator"])
    assert_eq(r.cmd("d", 'SETMETADATA "" (/shared/admin NIL)')[0][:12], "d NO [NOPERM")
    ok(r.cmd("e", 'SETMETADATA "" (/private/vendor/vendor.heron/motd "alice\'s")'), "e")
    assert_eq(r.cmd("f", 'GETMETADATA "" /private/vendor/vendor.heron/motd'),
              ['* METADATA "" (/private/vendor/vendor.heron/motd "alice\'s")',
               "f OK GETMETADATA completed"])
    bob = D.raw("bob")
    assert_eq(bob.cmd("g", 'GETMETADATA "" (/private/vendor/vendor.heron/motd /shared/comment)'),
              ['* METADATA "" (/private/vendor/vendor.heron/motd NIL'
               ' /shared/comment "Shared comment")', "g OK GETMETADATA completed"])
    ok(r.cmd("z", 'SETMETADATA "" (/private/vendor/vendor.heron/motd NIL)'), "z")


def test_rfc_4_2_1_maxsize():
    r = D.raw()
    create(r, "MaxBox")
    big = b"x" * 2199
    r.send(b"a SETMETADATA MaxBox (/shared/comment {2199+}\r\n%s"
           b' /private/comment "My own comment")\r\n' % big)
    ok(r.until_tag("a"), "a")
    want = ["* METADATA MaxBox (/private/comment \"My own comment\")",
            "b OK [METADATA LONGENTRIES 2199] GETMETADATA completed"]
    # the RFC's example writes the options after the mailbox, its grammar before it
    assert_eq(r.cmd("b", 'GETMETADATA "MaxBox" (MAXSIZE 1024) (/shared/comment /private/comment)'),
              want)
    assert_eq(r.cmd("b", 'GETMETADATA (MAXSIZE 1024) "MaxBox" (/shared/comment /private/comment)'),
              want)
    # big enough: both, no response code
    out = r.cmd("c", 'GETMETADATA (MAXSIZE 2199) MaxBox /shared/comment')
    assert_eq(out, ['* METADATA MaxBox (/shared/comment "%s")' % big.decode(),
                    "c OK GETMETADATA completed"])
    # only the long one asked for: no METADATA response at all, the size in the OK
    assert_eq(r.cmd("d", 'GETMETADATA (MAXSIZE 0) MaxBox /shared/comment'),
              ["d OK [METADATA LONGENTRIES 2199] GETMETADATA completed"])


def test_rfc_4_2_2_depth():
    r = D.raw()
    create(r, "DepthBox")
    ok(r.cmd("a", 'SETMETADATA DepthBox (/private/filters/values/small "SMALLER 5000"'
                  ' /private/filters/values/boss "FROM \\"boss@example.com\\""'
                  ' /private/filters/values/boss/sub "grandchild"'
                  ' /private/filters/valuesx "a sibling, not a child")'), "a")
    # DEPTH 1: the children of /private/filters/values (which itself has no value), no
    # grandchild; name order
    assert_eq(r.cmd("b", 'GETMETADATA "DepthBox" (DEPTH 1) (/private/filters/values)'),
              ['* METADATA DepthBox (/private/filters/values/boss "FROM \\"boss@example.com\\""'
               ' /private/filters/values/small "SMALLER 5000")', "b OK GETMETADATA completed"])
    assert_eq(r.cmd("c", 'GETMETADATA (DEPTH infinity) DepthBox /private/filters/values'),
              ['* METADATA DepthBox (/private/filters/values/boss "FROM \\"boss@example.com\\""'
               ' /private/filters/values/boss/sub "grandchild"'
               ' /private/filters/values/small "SMALLER 5000")', "c OK GETMETADATA completed"])
    assert_eq(r.cmd("d", 'GETMETADATA (DEPTH 0) DepthBox /private/filters/values'),
              ['* METADATA DepthBox (/private/filters/values NIL)', "d OK GETMETADATA completed"])
    # DEPTH 1 below an entry with a value: the entry and its child
    assert_eq(r.cmd("e", 'GETMETADATA (DEPTH 1 MAXSIZE 100) DepthBox /private/filters/values/boss'),
              ['* METADATA DepthBox (/private/filters/values/boss "FROM \\"boss@example.com\\""'
               ' /private/filters/values/boss/sub "grandchild")', "e OK GETMETADATA completed"])
    # /shared entries are not below /private ones
    assert_eq(r.cmd("f", 'GETMETADATA (DEPTH infinity) DepthBox /shared/filters'),
              ["f OK GETMETADATA completed"])


def test_limits():
    r = D.raw()
    create(r, "Limits")
    # [imapd] metadata_max_size = 4k
    r.send(b"a SETMETADATA Limits (/shared/comment {4097+}\r\n%s)\r\n" % (b"y" * 4097))
    assert_eq(r.until_tag("a"), ["a NO [METADATA MAXSIZE 4096] SETMETADATA: value too large"])
    r.send(b"b SETMETADATA Limits (/shared/comment {4096+}\r\n%s)\r\n" % (b"y" * 4096))
    ok(r.until_tag("b"), "b")
    # metadata_max_entries = 10 per mailbox, /shared and /private together
    pairs = " ".join('/private/n%d "v%d"' % (i, i) for i in range(8))
    ok(r.cmd("c", "SETMETADATA Limits (%s)" % pairs), "c")
    # the 10th and 11th in one command: TOOMANY, and neither is set (RFC 5464 4.3)
    assert_eq(r.cmd("d", 'SETMETADATA Limits (/shared/ten "10" /shared/eleven "11")'),
              ["d NO [METADATA TOOMANY] SETMETADATA: at most 10 annotations here"])
    assert_eq(r.cmd("e", "GETMETADATA Limits (/shared/ten /shared/eleven)"),
              ["* METADATA Limits (/shared/ten NIL /shared/eleven NIL)",
               "e OK GETMETADATA completed"])
    ok(r.cmd("f", 'SETMETADATA Limits (/shared/ten "10")'), "f")
    assert_eq(r.cmd("g", 'SETMETADATA Limits (/private/more "x")'),
              ["g NO [METADATA TOOMANY] SETMETADATA: at most 10 annotations here"])
    # replacing one is not a new one; removing one makes room
    ok(r.cmd("h", 'SETMETADATA Limits (/private/n0 "changed")'), "h")
    ok(r.cmd("i", 'SETMETADATA Limits (/private/n1 NIL /private/more "x")'), "i")
    # another mailbox has its own count
    create(r, "Limits2")
    ok(r.cmd("j", 'SETMETADATA Limits2 (/private/n0 "x")'), "j")
    # a name past what the store keeps
    long = "/shared/" + "n" * 300
    assert_eq(r.cmd("k", 'SETMETADATA Limits2 (%s "x")' % long),
              ["k NO [LIMIT] SETMETADATA: entry names have at most 256 bytes"])
    assert_eq(r.cmd("l", "GETMETADATA Limits2 %s" % long),
              ["* METADATA Limits2 (%s NIL)" % long, "l OK GETMETADATA completed"])
    # a mailbox that does not exist
    assert_eq(r.cmd("m", "GETMETADATA Nope /shared/comment")[0][:19], "m NO [NONEXISTENT] ")
    assert_eq(r.cmd("n", 'SETMETADATA Nope (/shared/comment "x")')[0][:19], "n NO [NONEXISTENT] ")


def test_syntax():
    r = D.raw()
    for entry in ["/foo/bar", "/shared", "/private", "/shared/", "/shared/a//b",
                  "/shared/a/", "/shared/a*", "/shared/a%", "shared/comment", '"/shared/\x01"',
                  '"/shared/caf\xc3\xa9"', "()"]:
        assert_eq(r.cmd("a", "GETMETADATA INBOX %s" % entry)[-1][:6], "a BAD ", entry)
        assert_eq(r.cmd("b", 'SETMETADATA INBOX (%s "x")' % entry)[-1][:6], "b BAD ", entry)
        ok(r.cmd("n", "NOOP"), "n")  # max_bad_commands counts BADs in a row
    for args in ["INBOX", "", "(MAXSIZE 1) INBOX", "(MAXSIZE x) INBOX /shared/c",
                 "(MAXSIZE) INBOX /shared/c", "(DEPTH 2) INBOX /shared/c",
                 "(DEPTH 1 DEPTH 1) INBOX /shared/c", "(FOO 1) INBOX /shared/c",
                 "(MAXSIZE 4294967296) INBOX /shared/c"]:
        assert_eq(r.cmd("c", "GETMETADATA %s" % args)[-1][:6], "c BAD ", args)
        ok(r.cmd("n", "NOOP"), "n")
    for args in ["INBOX", "INBOX ()", "INBOX (/shared/c)", "INBOX (/shared/c atom)",
                 "INBOX (/shared/c (x))", "INBOX /shared/c \"x\"",
                 "INBOX (/shared/c \"x\") extra"]:
        assert_eq(r.cmd("d", "SETMETADATA %s" % args)[-1][:6], "d BAD ", args)
        ok(r.cmd("n", "NOOP"), "n")


def test_literal8_and_byte_at_a_time():
    r = D.raw()
    create(r, "Bin")
    value = b"\x00\x01\x02\xff\xfe"
    cmd = b"a SETMETADATA Bin (/private/vendor/vendor.heron/bin ~{5+}\r\n%s)\r\n" % value
    for i in range(len(cmd)):
        r.send(cmd[i:i + 1])
    assert_eq(r.until_tag("a"), ["a OK SETMETADATA completed"])
    cmd = b"b GETMETADATA (DEPTH 1) Bin (/private/vendor/vendor.heron)\r\n"
    for i in range(len(cmd)):
        r.send(cmd[i:i + 1])
    # a value holding NUL comes back as literal8
    assert_eq(r.line(), "* METADATA Bin (/private/vendor/vendor.heron/bin ~{5}")
    assert_eq(r.read(5), value)
    assert_eq(r.line(), ")")
    assert_eq(r.line(), "b OK GETMETADATA completed")
    # literal8 elsewhere than APPEND and SETMETADATA stays refused
    r.send(b"c GETMETADATA Bin ~{5+}\r\n/shar)\r\n")
    assert_eq(r.until_tag("c")[-1][:6], "c BAD ")


def test_mailbox_life():
    """RFC 5464 4.1: annotations follow a rename, go with a delete; an INBOX rename leaves
    INBOX its own and gives the new mailbox a copy."""
    r = D.raw()
    create(r, "Life")
    create(r, "Life/Child")
    ok(r.cmd("a", 'SETMETADATA Life (/shared/comment "parent")'), "a")
    ok(r.cmd("b", 'SETMETADATA Life/Child (/private/comment "child")'), "b")
    ok(r.cmd("c", "RENAME Life Moved"), "c")
    assert_eq(meta(r, "Moved", "/shared/comment"),
              '* METADATA Moved (/shared/comment "parent")')
    assert_eq(meta(r, "Moved/Child", "/private/comment"),
              '* METADATA Moved/Child (/private/comment "child")')
    # deleted with children it stays as \Noselect, without its annotations
    ok(r.cmd("f", "DELETE Moved"), "f")
    ok(r.cmd("g", "CREATE Moved"), "g")
    assert_eq(meta(r, "Moved", "/shared/comment"),
              "* METADATA Moved (/shared/comment NIL)")
    ok(r.cmd("i", "DELETE Moved/Child"), "i")
    ok(r.cmd("j", "CREATE Moved/Child"), "j")
    assert_eq(meta(r, "Moved/Child", "/private/comment"),
              "* METADATA Moved/Child (/private/comment NIL)")
    # INBOX: bob's, so that alice's other tests keep theirs
    bob = D.raw("bob")
    ok(bob.cmd("l", 'SETMETADATA INBOX (/shared/comment "inbox note")'), "l")
    ok(bob.cmd("m", "RENAME INBOX Old"), "m")
    assert_eq(meta(bob, "Old", "/shared/comment"),
              '* METADATA Old (/shared/comment "inbox note")')
    assert_eq(meta(bob, "INBOX", "/shared/comment"),
              '* METADATA INBOX (/shared/comment "inbox note")')
    ok(bob.cmd("p", "SETMETADATA Old (/shared/comment NIL)"), "p")
    assert_eq(meta(bob, "INBOX", "/shared/comment"),
              '* METADATA INBOX (/shared/comment "inbox note")')
    # another user's mailbox of the same name is another mailbox
    assert_eq(meta(r, "INBOX", "/shared/comment"),
              "* METADATA INBOX (/shared/comment NIL)")


def test_noselect_mailbox():
    """A \\Noselect mailbox (a parent deleted with children) takes annotations, as RFC 5464
    allows: SETMETADATA and GETMETADATA answer OK, the mailbox stays \\Noselect, and the
    entries go when it is pruned with its last child (a CREATE there starts without them)."""
    r = D.raw()
    create(r, "Hollow")
    create(r, "Hollow/Kid")
    ok(r.cmd("a", "DELETE Hollow"), "a")
    out = ok(r.cmd("b", 'LIST "" Hollow'), "b")
    assert_in("\\Noselect", out[0])
    ok(r.cmd("c", 'SETMETADATA Hollow (/private/comment "hollow" /shared/comment "x")'), "c")
    assert_eq(meta(r, "Hollow", "/private/comment"),
              '* METADATA Hollow (/private/comment "hollow")')
    out = ok(r.cmd("d", "GETMETADATA Hollow (/shared/comment /private/comment)"), "d")
    assert_eq(out[0], '* METADATA Hollow (/shared/comment "x" /private/comment "hollow")', out)
    out = ok(r.cmd("e", 'LIST "" Hollow'), "e")
    assert_in("\\Noselect", out[0])
    out = r.cmd("f", "SELECT Hollow")
    assert out[-1].startswith("f NO"), out
    # the last child's delete prunes the \Noselect parent, entries and all
    ok(r.cmd("g", "DELETE Hollow/Kid"), "g")
    out = r.cmd("h", "GETMETADATA Hollow /private/comment")
    assert out[-1].startswith("h NO"), out
    create(r, "Hollow")
    assert_eq(meta(r, "Hollow", "/private/comment"),
              "* METADATA Hollow (/private/comment NIL)")
    # no such mailbox at all: NO, as before
    out = r.cmd("i", 'SETMETADATA Nowhere (/private/comment "x")')
    assert out[-1].startswith("i NO"), out


def test_list_return_metadata():
    """LIST-METADATA (RFC 9590): LIST RETURN (METADATA (entries)) follows each mailbox's LIST
    line with its METADATA, NIL for an entry it has none of, a \\Noselect mailbox too; with
    other RETURN options and LIST-STATUS; a bad entry name or an empty list is BAD."""
    r = D.raw("carol")
    assert_in("LIST-METADATA", r.cmd("c", "CAPABILITY")[0].split())
    create(r, "Lm")
    create(r, "Lm/Kid")
    create(r, "Lm/Hole/Deep")
    ok(r.cmd("a", "DELETE Lm/Hole"), "a")
    ok(r.cmd("b", 'SETMETADATA Lm (/shared/comment "parent" /private/comment "mine")'), "b")
    ok(r.cmd("d", 'SETMETADATA Lm/Hole (/private/comment "hole")'), "d")
    out = ok(r.cmd("l", 'LIST "" Lm* RETURN (METADATA (/shared/comment /private/comment))'),
             "l")
    lines = [line for line in out if line.startswith("* ")]
    by_box = dict(zip([line.split('"/" ')[1] for line in lines[0::2]], lines[1::2]))
    assert_eq(by_box["Lm"], '* METADATA Lm (/shared/comment "parent" /private/comment "mine")')
    assert_in("\\Noselect", [line for line in lines if line.endswith('"/" Lm/Hole')][0])
    assert_eq(by_box["Lm/Hole"], '* METADATA Lm/Hole (/shared/comment NIL /private/comment '
                                 '"hole")')
    assert_eq(by_box["Lm/Kid"], "* METADATA Lm/Kid (/shared/comment NIL /private/comment NIL)")
    assert_eq(len(lines), 8, out)
    out = ok(r.cmd("m", 'LIST "" Lm RETURN (CHILDREN STATUS (MESSAGES) '
                        'METADATA ("/shared/comment"))'), "m")
    assert_eq(out[1:], ["* STATUS Lm (MESSAGES 0)", '* METADATA Lm (/shared/comment "parent")',
                        "m OK List completed"], out)
    for bad in ('LIST "" Lm RETURN (METADATA ())', 'LIST "" Lm RETURN (METADATA (comment))',
                'LIST "" Lm RETURN (METADATA)', 'LIST "" Lm RETURN (METADATA /shared/comment)',
                'LIST "" Lm RETURN'):
        out = r.cmd("x", bad)
        assert out[-1].startswith("x BAD"), (bad, out)
        ok(r.cmd("o", "NOOP"), "o")


def test_kill9_keeps_acknowledged():
    r = D.raw()
    create(r, "Durable")
    ok(r.cmd("a", 'SETMETADATA Durable (/private/comment "kept" /shared/x "y")'), "a")
    r.close()
    D.kill9()
    D.start()
    r = D.raw()
    assert_eq(r.cmd("b", "GETMETADATA Durable (/private/comment /shared/x)"),
              ['* METADATA Durable (/private/comment "kept" /shared/x "y")',
               "b OK GETMETADATA completed"])


def test_imaplib():
    c = D.login("alice")
    c.create("Lib")
    typ, data = c.xatom("SETMETADATA", "Lib", '(/private/comment "from imaplib")')
    assert_eq(typ, "OK")
    typ, data = c.xatom("GETMETADATA", "Lib", "/private/comment")
    assert_eq(typ, "OK")
    assert_eq(c.untagged_responses.pop("METADATA"), [b'Lib (/private/comment "from imaplib")'])
    typ, data = c.xatom("SETMETADATA", "Lib", '(/private/comment "%s")' % ("z" * 5000))
    assert_eq(typ, "NO")
    assert_in(b"[METADATA MAXSIZE 4096]", data[0])
    c.logout()


def test_noprivate():
    """A second imapd with metadata_private = no: /private refused with NOPRIVATE."""
    d = Imapd(sys.argv[1], deliver=sys.argv[2], extra={"metadata_private": "no"})
    with d:
        r = d.raw()
        assert_eq(r.cmd("a", 'SETMETADATA INBOX (/shared/comment "x" /private/comment "y")'),
                  ["a NO [METADATA NOPRIVATE] SETMETADATA: no /private annotations here"])
        assert_eq(r.cmd("b", 'SETMETADATA "" (/private/vendor/vendor.x/y "y")')[0][:25],
                  "b NO [METADATA NOPRIVATE]")
        # nothing of the refused command was kept
        assert_eq(r.cmd("c", "GETMETADATA INBOX /shared/comment")[0],
                  "* METADATA INBOX (/shared/comment NIL)")
        ok(r.cmd("d", 'SETMETADATA INBOX (/shared/comment "x")'), "d")
        r.close()


def main():
    global D
    D = Imapd(sys.argv[1], deliver=sys.argv[2], extra=EXTRA)
    return run_suite(D, [test_capability, test_rfc_4_3_set_examples, test_server_entries,
                         test_rfc_4_2_1_maxsize, test_rfc_4_2_2_depth, test_limits,
                         test_syntax, test_literal8_and_byte_at_a_time, test_mailbox_life,
                         test_noselect_mailbox, test_list_return_metadata, test_imaplib,
                         test_noprivate,
                         test_kill9_keeps_acknowledged], D.dir)


if __name__ == "__main__":
    sys.exit(main())
