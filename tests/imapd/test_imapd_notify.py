"""imapd end to end: NOTIFY (RFC 5465). One session sets NOTIFY and reads the wire (ImapRaw);
another (imaplib), or a delivery from another process as mtad makes it, changes the
mailboxes: new mail in a mailbox that is not selected gives STATUS, in the selected one
EXISTS and the FETCH of the attributes asked for; flag changes (FETCH with UID, or STATUS
with HIGHESTMODSEQ for another mailbox) and expunges by the other session come unsolicited; CREATE/RENAME/DELETE and SUBSCRIBE give LIST; SETMETADATA gives
METADATA; NOTIFY SET STATUS sends STATUS at once; NOTIFY NONE stops; a flood of changes
gives [NOTIFICATIONOVERFLOW] and the session goes on; the RFC's examples of 3.1; syntax
errors are BAD and events not supported NO [BADEVENT].

Usage: test_imapd_notify.py IMAPD_BINARY DELIVER_BINARY"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite  # noqa: E402
from heronlib import assert_eq, assert_in  # noqa: E402
D = None  # the imapd the running tests talk to

MSG = (b"From: a@example.org\r\nTo: bob@example.org\r\nSubject: hello %d\r\n"
       b"Message-ID: <n%d@example.org>\r\n\r\nbody\r\n")


def ok(out, tag):
    assert out[-1].startswith(tag + " OK"), out
    return out


def msg(i):
    return MSG % (i, i)


def other(user):
    """The second session, imaplib, logged in as user."""
    c = D.login(user)
    return c


def until(r, pred, what):
    """Unsolicited lines read until one satisfies pred (the socket's timeout ends a wait
    for one that never comes); the lines read, the matching one last."""
    seen = []
    while True:
        try:
            line = r.line()
        except OSError as e:
            raise AssertionError("%s not seen; got %r (%s)" % (what, seen, e))
        seen.append(line)
        if pred(line):
            return seen


def status_line(name, line):
    return line.startswith("* STATUS %s (" % name)


def fields(line):
    """The numbers of a STATUS line as a dict."""
    inner = line[line.index("(") + 1:line.rindex(")")].split()
    return dict(zip(inner[0::2], [int(v) for v in inner[1::2]]))


def test_capability():
    r = D.raw()
    caps = r.cmd("c", "CAPABILITY")[0].split()
    assert_in("NOTIFY", caps)


def test_status_for_other_mailbox():
    """New mail in a mailbox that is not selected: one STATUS with its counts, from an
    APPEND of another session and from a delivery by another process."""
    r = D.raw("bob")
    c = other("bob")
    assert_eq(c.create("Other")[0], "OK")
    ok(r.cmd("s", "SELECT INBOX"), "s")
    ok(r.cmd("n", "NOTIFY SET (selected (MessageNew MessageExpunge)) "
                  "(personal (MessageNew MessageExpunge))"), "n")
    assert_eq(c.append("Other", None, None, msg(1))[0], "OK")
    st = until(r, lambda line: status_line("Other", line), "STATUS Other")[-1]
    f = fields(st)
    assert_eq((f["MESSAGES"], f["UIDNEXT"], f["UNSEEN"]), (1, 2, 1), st)
    D.deliver("bob", msg(2), "Other")  # as mtad delivers: another process
    st = until(r, lambda line: status_line("Other", line), "STATUS Other")[-1]
    assert_eq(fields(st)["MESSAGES"], 2, st)
    # the session goes on as before
    ok(r.cmd("z", "NOOP"), "z")
    c.logout()


def test_flag_only_change_not_asked():
    """A group without FlagChange hears nothing of a flag-only change in another mailbox,
    a keyword new to the mailbox included (the change log says what kind of write it was);
    new mail there still gives a STATUS."""
    r = D.raw("carol")
    c = other("carol")
    for name in ("Other", "Marker"):
        assert_eq(c.create(name)[0], "OK")
    assert_eq(c.append("Other", None, None, msg(1))[0], "OK")
    assert_eq(c.select("Other")[0], "OK")
    ok(r.cmd("s", "SELECT INBOX"), "s")
    ok(r.cmd("n", "NOTIFY SET (selected (MessageNew MessageExpunge)) "
                  "(personal (MessageNew MessageExpunge))"), "n")
    assert_eq(c.store("1", "+FLAGS", "(\\Flagged)")[0], "OK")
    assert_eq(c.store("1", "+FLAGS", "(NewKeyword)")[0], "OK")  # a new keyword too
    # a later change in another mailbox marks where the flag change's STATUS would be
    assert_eq(c.append("Marker", None, None, msg(2))[0], "OK")
    seen = until(r, lambda line: status_line("Marker", line), "STATUS Marker")
    assert_eq([x for x in seen if status_line("Other", x)], [], seen)
    assert_eq(c.append("Other", None, None, msg(3))[0], "OK")
    st = until(r, lambda line: status_line("Other", line), "STATUS Other")[-1]
    assert_eq(fields(st)["MESSAGES"], 2, st)
    ok(r.cmd("z", "NOOP"), "z")
    c.logout()


def statuses_until(c, name, tries=300):
    """imaplib session c, NOTIFY set: NOOPs until an unsolicited STATUS of name came (each
    NOOP a round trip, 0.1 s apart, at most tries of them); the STATUS lines seen."""
    seen = []
    for _ in range(tries):
        typ, _ = c.noop()
        assert_eq(typ, "OK")
        _, data = c.response("STATUS")
        seen += [x.decode() for x in data if x is not None]
        if any(x.startswith(name + " (") for x in seen):
            return seen
        time.sleep(0.1)
    raise AssertionError("STATUS %s not seen; got %r" % (name, seen))


def test_recent_claim_not_told():
    """Two imaplib sessions: another session's SELECT claims the mailbox's \\Recent (a write
    of its record) and a group without FlagChange hears nothing of it; an APPEND to another
    mailbox after it, and new mail in the selected one later, still give their STATUS."""
    a = other("bob")
    b = other("bob")
    for name in ("Claimed", "Mark"):
        assert_eq(b.create(name)[0], "OK")
    assert_eq(b.append("Claimed", None, None, msg(1))[0], "OK")  # \Recent until selected
    typ, data = a.xatom("NOTIFY", "SET (personal (MessageNew MessageExpunge))")
    assert_eq(typ, "OK", data)
    a.response("STATUS")  # nothing before this point counts
    typ, data = b.select("Claimed")
    assert_eq(typ, "OK")
    assert_eq(b.response("RECENT")[1], [b"1"])  # b's SELECT did claim it
    assert_eq(b.append("Mark", None, None, msg(2))[0], "OK")
    seen = statuses_until(a, "Mark")
    assert_eq([x for x in seen if x.startswith("Claimed (")], [], seen)
    assert_eq(b.append("Claimed", None, None, msg(3))[0], "OK")
    seen = statuses_until(a, "Claimed")
    assert_in("MESSAGES 2", seen[-1])
    b.logout()
    a.logout()


def test_expunge_status_counts():
    """MessageExpunge for a mailbox that is not selected (RFC 5465 5.3): after another
    session's EXPUNGE the STATUS has the counts after it (MESSAGES, UIDNEXT unchanged,
    UNSEEN), as a STATUS command then answers; its \\Deleted STORE, a flag change the group
    did not ask for, gave none. A MOVE out of it is an expunge there too."""
    a = other("alice")
    b = other("alice")
    assert_eq(b.create("Shrink")[0], "OK")
    assert_eq(b.create("Dest")[0], "OK")
    for i in range(1, 5):
        assert_eq(b.append("Shrink", "(\\Seen)" if i == 1 else None, None, msg(40 + i))[0],
                  "OK")
    typ, data = a.xatom("NOTIFY", "SET (personal (MessageNew MessageExpunge))")
    assert_eq(typ, "OK", data)
    a.response("STATUS")  # nothing before this point counts
    assert_eq(b.select("Shrink")[0], "OK")
    assert_eq(b.store("1:2", "+FLAGS", "(\\Deleted)")[0], "OK")  # one seen, one not
    assert_eq(b.expunge()[0], "OK")
    seen = statuses_until(a, "Shrink")
    assert_eq([x for x in seen if x.startswith("Shrink (")][1:], [], seen)
    got = fields("x (" + seen[-1].split("(", 1)[1])
    assert_eq((got["MESSAGES"], got["UIDNEXT"], got["UNSEEN"]), (2, 5, 2), seen)
    typ, data = a.status("Shrink", "(MESSAGES UIDNEXT UIDVALIDITY UNSEEN)")
    want = fields("x (" + data[0].decode().split("(", 1)[1])
    assert_eq(dict((k, got[k]) for k in want), want, (seen, data))
    typ, data = b.uid("MOVE", "4", "Dest")
    assert_eq(typ, "OK", data)
    seen = statuses_until(a, "Shrink")
    got = fields("x (" + [x for x in seen if x.startswith("Shrink (")][-1].split("(", 1)[1])
    assert_eq((got["MESSAGES"], got["UIDNEXT"], got["UNSEEN"]), (1, 5, 1), seen)
    b.logout()
    a.logout()


def test_selected_new_flags_expunge():
    """The selected mailbox: EXISTS and the FETCH of MessageNew's attributes for mail
    delivered to it, FETCH FLAGS for another session's STORE, EXPUNGE for its EXPUNGE."""
    r = D.raw("carol")
    c = other("carol")
    ok(r.cmd("s", "SELECT INBOX"), "s")
    ok(r.cmd("n", "NOTIFY SET (selected (MessageNew (UID BODY.PEEK[HEADER.FIELDS (Subject)]) "
                  "MessageExpunge FlagChange))"), "n")
    uid = D.deliver("carol", msg(7))
    lines = until(r, lambda line: line.startswith("* 1 FETCH"), "FETCH of the new message")
    assert_in("* 1 EXISTS", lines)
    assert_in("UID %d BODY[HEADER.FIELDS (SUBJECT)] {" % uid, lines[-1].upper())
    assert_in("Subject: hello 7", r.line())
    c.select("INBOX")
    assert_eq(c.store("1", "+FLAGS", "(\\Flagged)")[0], "OK")
    line = until(r, lambda line: "FETCH" in line and "FLAGS" in line, "FETCH FLAGS")[-1]
    assert_in("\\Flagged", line)
    assert_eq(c.store("1", "+FLAGS", "(\\Deleted)")[0], "OK")
    assert_eq(c.expunge()[0], "OK")
    until(r, lambda line: line == "* 1 EXPUNGE", "EXPUNGE")
    ok(r.cmd("z", "NOOP"), "z")
    c.logout()


def test_flag_change_selected_and_other():
    """FlagChange (RFC 5465 5.1): another session's STORE in the selected mailbox gives an
    unsolicited FETCH with UID and FLAGS; in another mailbox whose group asks for FlagChange a
    STATUS with UIDVALIDITY and the mailbox's HIGHESTMODSEQ, CONDSTORE not enabled; a group
    without FlagChange gets no STATUS with HIGHESTMODSEQ (none at all: see
    test_flag_only_change_not_asked)."""
    r = D.raw("alice")
    c = other("alice")
    for name in ("FlagSel", "FlagOther", "FlagQuiet"):
        assert_eq(c.create(name)[0], "OK")
        assert_eq(c.append(name, None, None, msg(20))[0], "OK")
    ok(r.cmd("s", "SELECT FlagSel"), "s")
    ok(r.cmd("n", "NOTIFY SET (selected (MessageNew MessageExpunge FlagChange)) "
                  "(mailboxes FlagOther (MessageNew MessageExpunge FlagChange)) "
                  "(mailboxes FlagQuiet (MessageNew MessageExpunge))"), "n")
    c.select("FlagSel")
    assert_eq(c.store("1", "+FLAGS", "(\\Flagged)")[0], "OK")
    line = until(r, lambda line: " FETCH " in line, "FETCH of the flag change")[-1]
    assert line.startswith("* 1 FETCH (UID 1 FLAGS (\\Flagged"), line  # and \Recent
    c.select("FlagOther")
    assert_eq(c.store("1", "+FLAGS", "(\\Seen)")[0], "OK")
    st = until(r, lambda line: status_line("FlagOther", line) and "UNSEEN 0" in line,
               "STATUS FlagOther after the STORE")[-1]
    f = fields(st)
    typ, data = c.status("FlagOther", "(UIDVALIDITY HIGHESTMODSEQ)")
    want = fields("x (" + data[0].decode().split("(", 1)[1])
    assert_eq((f["UIDVALIDITY"], f["HIGHESTMODSEQ"], f["UNSEEN"]),
              (want["UIDVALIDITY"], want["HIGHESTMODSEQ"], 0), st)
    c.select("FlagQuiet")
    assert_eq(c.store("1", "+FLAGS", "(\\Seen)")[0], "OK")
    out = ok(r.cmd("z", "NOOP"), "z")
    quiet = [line for line in out if status_line("FlagQuiet", line)]
    assert all("HIGHESTMODSEQ" not in line for line in quiet), out
    c.logout()


def test_selected_delayed_keeps_expunge():
    """selected-delayed: EXISTS unsolicited, the EXPUNGE only in a command that allows it
    (here NOOP, after the FETCH that had to keep the sequence numbers)."""
    r = D.raw("carol")
    c = other("carol")
    c.create("Delayed")
    ok(r.cmd("s", "SELECT Delayed"), "s")
    ok(r.cmd("n", "NOTIFY SET (selected-delayed (MessageNew MessageExpunge))"), "n")
    D.deliver("carol", msg(8), "Delayed")
    until(r, lambda line: line == "* 1 EXISTS", "EXISTS")
    c.select("Delayed")
    c.store("1", "+FLAGS", "(\\Deleted)")
    c.expunge()
    out = r.cmd("f", "FETCH 1 UID")  # no EXPUNGE during FETCH (RFC 3501 7.4.1)
    assert not any("EXPUNGE" in line for line in out), out
    out = ok(r.cmd("z", "NOOP"), "z")
    assert_in("* 1 EXPUNGE", out)
    c.logout()


def test_selected_without_expunge():
    """selected with MessageNew alone: another session's expunge is not told unsolicited
    (the next delivery's EXISTS still counts the expunged message), the NOOP tells it."""
    r = D.raw("bob")
    c = other("bob")
    c.create("NoExp")
    ok(r.cmd("s", "SELECT NoExp"), "s")
    ok(r.cmd("n", "NOTIFY SET (selected (MessageNew))"), "n")
    D.deliver("bob", msg(14), "NoExp")
    until(r, lambda line: line == "* 1 EXISTS", "first EXISTS")
    c.select("NoExp")
    c.store("1", "+FLAGS", "(\\Deleted)")
    c.expunge()
    D.deliver("bob", msg(15), "NoExp")
    lines = until(r, lambda line: line.endswith(" EXISTS"), "second EXISTS")
    assert_eq(lines[-1], "* 2 EXISTS", lines)
    assert not any("EXPUNGE" in line for line in lines), lines
    out = ok(r.cmd("z", "NOOP"), "z")
    assert_in("* 1 EXPUNGE", out)
    c.logout()


def test_mailbox_names_give_list():
    """MailboxName: CREATE, RENAME (with OLDNAME) and DELETE by the other session give LIST;
    SubscriptionChange: SUBSCRIBE and UNSUBSCRIBE give LIST with and without \\Subscribed."""
    r = D.raw("alice")
    c = other("alice")
    ok(r.cmd("n", "NOTIFY SET (personal (MailboxName SubscriptionChange))"), "n")
    c.create("Fresh")
    until(r, lambda line: line == '* LIST (\\HasNoChildren) "/" Fresh', "LIST of CREATE")
    c.rename("Fresh", "Renamed")
    until(r, lambda line: line == '* LIST (\\HasNoChildren) "/" Renamed ("OLDNAME" (Fresh))',
          "LIST of RENAME")
    c.subscribe("Renamed")
    until(r, lambda line: line == '* LIST (\\HasNoChildren \\Subscribed) "/" Renamed',
          "LIST of SUBSCRIBE")
    c.unsubscribe("Renamed")
    until(r, lambda line: line == '* LIST (\\HasNoChildren) "/" Renamed', "LIST of UNSUBSCRIBE")
    c.delete("Renamed")
    until(r, lambda line: line == '* LIST (\\NonExistent) "/" Renamed', "LIST of DELETE")
    ok(r.cmd("z", "NOOP"), "z")
    c.logout()


def test_metadata_change():
    """MailboxMetadataChange and ServerMetadataChange: METADATA naming the entry."""
    r = D.raw("alice")
    c = other("alice")
    c.create("Meta")
    ok(r.cmd("n", "NOTIFY SET (personal (MailboxMetadataChange ServerMetadataChange))"), "n")
    assert_eq(c.xatom("SETMETADATA", "Meta", '(/private/comment "x")')[0], "OK")
    until(r, lambda line: line == "* METADATA Meta /private/comment", "METADATA of a mailbox")
    assert_eq(c.xatom("SETMETADATA", '""', '(/private/vendor/x "y")')[0], "OK")
    until(r, lambda line: line == '* METADATA "" /private/vendor/x', "METADATA of the server")
    c.logout()


def test_set_status_and_none():
    """NOTIFY SET STATUS: a STATUS for each mailbox of the groups before the OK (not the
    selected one); NOTIFY NONE: nothing more, the NOOP after a change says nothing."""
    r = D.raw("bob")
    c = other("bob")
    c.create("S1")
    c.create("S2")
    c.create("T/U")
    ok(r.cmd("s", "SELECT INBOX"), "s")
    out = ok(r.cmd("n", "NOTIFY SET STATUS (selected (MessageNew MessageExpunge)) "
                        "(mailboxes (S1 S2) (MessageNew MessageExpunge)) "
                        "(subtree T (MessageNew MessageExpunge))"), "n")
    names = sorted(line.split()[2] for line in out if line.startswith("* STATUS"))
    assert_eq(names, ["S1", "S2", "T", "T/U"], out)
    ok(r.cmd("x", "NOTIFY NONE"), "x")
    c.append("S1", None, None, msg(3))
    c.create("AfterNone")
    out = ok(r.cmd("z", "NOOP"), "z")
    assert_eq(len(out), 1, out)
    c.logout()


def test_idle_and_noop():
    """In IDLE the notifications come as they happen; a change made while a command runs
    comes before that command's tagged reply."""
    r = D.raw("carol")
    c = other("carol")
    c.create("Idle")
    ok(r.cmd("n", "NOTIFY SET (mailboxes Idle (MessageNew MessageExpunge))"), "n")
    r.send("i IDLE\r\n")
    assert r.line().startswith("+ ")
    c.append("Idle", None, None, msg(4))
    st = until(r, lambda line: status_line("Idle", line), "STATUS in IDLE")[-1]
    assert_eq(fields(st)["MESSAGES"], 1, st)
    r.send("DONE\r\n")
    ok(r.until_tag("i"), "i")
    c.logout()


def test_noop_and_filters():
    """A NOOP tells everything committed before it (whether the watcher woke the session yet
    or not); subscribed and inboxes match what they name, the first group naming a mailbox
    decides (NONE keeps it quiet), and the selected mailbox gets no STATUS (its EXISTS comes
    as without NOTIFY)."""
    r = D.raw("carol")
    c = other("carol")
    for name in ("Sub", "Unsub", "Quiet"):
        assert_eq(c.create(name)[0], "OK")
    c.subscribe("Sub")
    c.subscribe("Quiet")
    ok(r.cmd("n", "NOTIFY SET (mailboxes Quiet NONE) (subscribed (MessageNew MessageExpunge)) "
                  "(inboxes (MessageNew MessageExpunge))"), "n")
    for name in ("Unsub", "Quiet", "Sub"):
        c.append(name, None, None, msg(10))
    D.deliver("carol", msg(11))
    out = ok(r.cmd("z", "NOOP"), "z")
    boxes = sorted(line.split()[2] for line in out if line.startswith("* STATUS"))
    assert_eq(boxes, ["INBOX", "Sub"], out)
    ok(r.cmd("s", "SELECT INBOX"), "s")
    ok(r.cmd("m", "NOTIFY SET (personal (MessageNew MessageExpunge))"), "m")
    D.deliver("carol", msg(12))
    c.append("Unsub", None, None, msg(13))
    out = ok(r.cmd("y", "NOOP"), "y")
    assert any(line.endswith(" EXISTS") for line in out), out
    boxes = sorted(line.split()[2] for line in out if line.startswith("* STATUS"))
    assert_eq(boxes, ["Unsub"], out)
    c.logout()


def test_rfc_examples():
    """RFC 5465 3.1 (with errata 1804 and 2318): the client's NOTIFY SET STATUS with a
    selected group fetching header fields and a subtree, then an explicit STATUS and a
    NOTIFY SET adding one more mailbox."""
    r = D.raw("alice")
    c = other("alice")
    c.create("Lists/Lemonade")
    c.create("Lists/Im2000")
    c.create("misc")
    c.append("Lists/Lemonade", None, None, msg(5))
    ok(r.cmd("a", "SELECT INBOX"), "a")
    out = ok(r.cmd("b", "notify set status (selected (MessageNew (uid "
                        "body.peek[header.fields (from to subject)]) MessageExpunge)) "
                        "(subtree Lists (MessageNew))"), "b")
    names = sorted(line.split()[2] for line in out if line.startswith("* STATUS"))
    assert_eq(names, ["Lists", "Lists/Im2000", "Lists/Lemonade"], out)
    lem = [line for line in out if line.startswith("* STATUS Lists/Lemonade ")][0]
    assert_eq(fields(lem)["MESSAGES"], 1, lem)
    out = ok(r.cmd("d", "STATUS misc (UIDVALIDITY UIDNEXT MESSAGES)"), "d")
    assert out[0].startswith("* STATUS misc (UIDVALIDITY "), out
    ok(r.cmd("e", "notify set (selected (MessageNew (uid body.peek[header.fields "
                  "(from to subject)]) MessageExpunge)) (subtree Lists (MessageNew)) "
                  "(mailboxes misc (MessageNew))"), "e")
    c.append("misc", None, None, msg(6))
    until(r, lambda line: status_line("misc", line), "STATUS misc")
    uid = D.deliver("alice", msg(9))
    line = until(r, lambda line: "FETCH (UID %d BODY[HEADER.FIELDS (FROM TO SUBJECT)]" % uid
                 in line.upper(), "FETCH of the new INBOX message")[-1]
    assert line.endswith("}"), line
    c.logout()


def test_overflow():
    """More changes at once than a session's queue holds (a RENAME moving 300 mailboxes,
    one LIST each): [NOTIFICATIONOVERFLOW], notifications end, the session goes on and may
    NOTIFY SET again."""
    r = D.raw("bob")
    c = other("bob")
    c.create("Flood")
    for i in range(300):
        typ, data = c.create("Flood/m%03d" % i)
        assert_eq(typ, "OK", data)
    ok(r.cmd("n", "NOTIFY SET (personal (MailboxName))"), "n")
    assert_eq(c.rename("Flood", "Flooded")[0], "OK")
    until(r, lambda line: line.startswith("* OK [NOTIFICATIONOVERFLOW]"), "NOTIFICATIONOVERFLOW")
    out = ok(r.cmd("z", "NOOP"), "z")
    c.create("Quiet")
    out = ok(r.cmd("y", "NOOP"), "y")
    assert not any(line.startswith("* LIST") for line in out), out
    ok(r.cmd("m", "NOTIFY SET (personal (MailboxName))"), "m")
    c.create("Heard")
    until(r, lambda line: line == '* LIST (\\HasNoChildren) "/" Heard', "LIST after SET again")
    c.logout()


def test_syntax_and_badevent():
    """Syntax errors and the RFC's rules: BAD; events not built: NO [BADEVENT (...)] listing
    those that are."""
    r = D.raw("carol")
    for text in ["NOTIFY", "NOTIFY SET", "NOTIFY SET STATUS", "NOTIFY FOO",
                 "NOTIFY NONE extra", "NOTIFY SET selected", "NOTIFY SET (selected)",
                 "NOTIFY SET (bogus (MessageNew))", "NOTIFY SET (subtree (MessageNew))",
                 "NOTIFY SET (mailboxes () (MessageNew))",
                 "NOTIFY SET (selected (MessageNew) extra)",
                 "NOTIFY SET (selected ())",
                 "NOTIFY SET (selected (\"MessageNew\"))",
                 "NOTIFY SET (selected (FlagChange))",
                 "NOTIFY SET (selected (MessageNew FlagChange))",
                 "NOTIFY SET (selected (MessageNew MessageExpunge)) "
                 "(selected-delayed (MessageNew MessageExpunge))",
                 "NOTIFY SET (personal (MessageNew (UID) MessageExpunge))",
                 "NOTIFY SET (selected (MessageNew (BODY[]) MessageExpunge))",
                 "NOTIFY SET (selected (MessageNew (NOSUCHITEM) MessageExpunge))"]:
        out = r.cmd("b", text)
        assert out[-1].startswith("b BAD"), (text, out)
        ok(r.cmd("o", "NOOP"), "o")  # BADs in a row would end the session
    out = r.cmd("e", "NOTIFY SET (personal (MessageNew MessageExpunge AnnotationChange))")
    assert_eq(out, ["e NO [BADEVENT (MessageNew MessageExpunge FlagChange MailboxName "
                    "SubscriptionChange MailboxMetadataChange ServerMetadataChange)] "
                    "Event not supported"], out)
    out = r.cmd("f", "NOTIFY SET (inboxes (SomeFutureEvent))")
    assert out[-1].startswith("f NO [BADEVENT ("), out
    # NONE is always fine, and a group without events is allowed
    ok(r.cmd("g", "NOTIFY NONE"), "g")
    ok(r.cmd("h", "NOTIFY SET (inboxes NONE) (personal (MailboxName))"), "h")


def test_byte_at_a_time():
    """A NOTIFY command sent a byte at a time is the same command."""
    r = D.raw("alice")
    line = b"t NOTIFY SET (mailboxes (INBOX \"a b\") (MessageNew MessageExpunge))\r\n"
    for i in range(len(line)):
        r.send(line[i:i + 1])
    ok(r.until_tag("t"), "t")


def main():
    global D
    D = Imapd(sys.argv[1], deliver=sys.argv[2])
    return run_suite(D, [test_capability, test_status_for_other_mailbox,
                         test_flag_only_change_not_asked, test_recent_claim_not_told,
                         test_expunge_status_counts,
                         test_selected_new_flags_expunge, test_flag_change_selected_and_other,
                         test_selected_delayed_keeps_expunge,
                         test_selected_without_expunge,
                         test_mailbox_names_give_list, test_metadata_change,
                         test_set_status_and_none, test_idle_and_noop, test_noop_and_filters,
                         test_rfc_examples,
                         test_overflow, test_syntax_and_badevent, test_byte_at_a_time], D.dir)


if __name__ == "__main__":
    sys.exit(main())
