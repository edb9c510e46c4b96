"""imapd end to end: URLAUTH (RFC 4467) with RFC 4467's examples (joe and fred as alice and
bob; carol is the submission server, [imapd] urlauth_submit_users), raw dialogues and
imaplib: GENURLAUTH of rump URLs, URLFETCH as the owner, as the user a URL names, as the
submission server and as others (NIL, never an error), a changed token, host or UID, ;EXPIRE=
in the past and the future, RESETKEY of one mailbox and of all, URLAUTH URLs in CATENATE
(RFC 4469 3), the key hidden from METADATA, the limits on URLs per command and URL length,
and a body bigger than the output buffer streamed byte-exact; SELECT and EXAMINE say
[URLMECH INTERNAL]; a mailbox another user shared ([imapd] namespace_other, SETACL).

Usage: test_imapd_urlauth.py IMAPD_BINARY DELIVER_BINARY"""
import imaplib
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite, IMAP_PASSWORD  # noqa: E402
from heronlib import assert_eq, assert_in  # noqa: E402
D = None  # the imapd the running tests talk to

HOSTNAME = "imap.heron.test"
PART = b"Si vis pacem, para bellum.\r\n"  # RFC 4467's section 1.2, {28}
DRAFT = (b"From: alice@heron.test\r\nTo: bob@heron.test\r\nSubject: draft\r\n"
         b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"outer\"\r\n\r\n"
         b"--outer\r\nContent-Type: multipart/alternative; boundary=\"inner\"\r\n\r\n"
         b"--inner\r\nContent-Type: text/plain\r\n\r\nDulce et decorum est.\r\n"
         b"--inner\r\nContent-Type: text/plain\r\n\r\n" + PART + b"\r\n--inner--\r\n"
         b"--outer--\r\n")
TOKEN = re.compile(r":internal:[0-9a-f]{64}$")


def rump(user, rest, mailbox="INBOX"):
    return "imap://%s@%s/%s/%s" % (user, HOSTNAME, mailbox, rest)


def parse_strings(r, rest):
    """The strings and NILs after '* URLFETCH' (quoted, literals read from r): a list."""
    out = []
    while rest:
        rest = rest.lstrip(" ")
        if rest.startswith('"'):
            m = re.match(r'"((?:[^"\\]|\\.)*)"', rest)
            out.append(re.sub(r"\\(.)", r"\1", m.group(1)))
            rest = rest[m.end():]
        elif rest.startswith("NIL"):
            out.append(None)
            rest = rest[3:]
        elif rest.startswith("{"):
            n = int(rest[1:rest.index("}")])
            assert rest.endswith("}"), rest
            out.append(r.read(n))
            rest = r.line()
        else:
            raise AssertionError("unexpected %r" % rest)
    return out


def command(r, tag, name, args):
    """tag NAME args: the strings of the one untagged NAME response; the tagged OK."""
    r.send("%s %s %s\r\n" % (tag, name, args))
    line = r.line()
    assert line.startswith("* %s " % name), line
    items = parse_strings(r, line[len(name) + 3:])
    assert_eq(r.line(), "%s OK %s completed" % (tag, name))
    return items


def urlfetch(r, tag, urls):
    """URLFETCH urls: [(url, bytes or None)] in the response's order."""
    items = command(r, tag, "URLFETCH", " ".join('"%s"' % u for u in urls))
    return list(zip(items[0::2], items[1::2]))


def fetch_one(user, url):
    r = D.raw(user)
    [(u, data)] = urlfetch(r, "f", [url])
    assert_eq(u, url)
    return data


def genurlauth(r, tag, urls):
    """GENURLAUTH url INTERNAL ...: the URLs of the response."""
    return command(r, tag, "GENURLAUTH", " ".join('"%s" INTERNAL' % u for u in urls))


def draft(r, mailbox="INBOX"):
    return r.append(DRAFT, mailbox=mailbox)


def test_capability_and_rfc_examples():
    r = D.raw("alice")
    assert_in(" URLAUTH", r.cmd("c", "CAPABILITY")[0])
    uid = draft(r)
    # RFC 4467 section 9: two rump URLs for the submission server acting for fred (bob)
    urls = genurlauth(r, "a001", [
        rump("alice", ";uid=%d/;section=1.2;urlauth=submit+bob" % uid),
        rump("alice", ";uid=%d/;section=1.1;urlauth=submit+bob" % uid)])
    assert_eq(len(urls), 2)
    for u, rest in zip(urls, ["1.2", "1.1"]):
        assert u.startswith(rump("alice", ";uid=%d/;section=%s;urlauth=submit+bob:internal:"
                                 % (uid, rest))), u
        assert TOKEN.search(u), u
    assert urls[0] != urls[1]
    # the submission server (carol) fetches both in one command
    s = D.raw("carol")
    got = urlfetch(s, "a002", urls)
    assert_eq(got, [(urls[0], PART), (urls[1], b"Dulce et decorum est.")])
    # submit+bob is for the submission server only: not bob, not the owner
    assert_eq(fetch_one("bob", urls[0]), None)
    assert_eq(fetch_one("alice", urls[0]), None)


def test_urlmech_on_select():
    """SELECT and EXAMINE name the mechanisms in an untagged OK [URLMECH INTERNAL] before the
    tagged OK (RFC 4467), as RESETKEY's OK does; imaplib sees it as a response code."""
    r = D.raw("alice")
    for tag, verb in (("s", "SELECT"), ("e", "EXAMINE")):
        out = r.cmd(tag, "%s INBOX" % verb)
        assert out[-1].startswith(tag + " OK"), out
        assert_in("* OK [URLMECH INTERNAL] URLAUTH mechanisms", out[:-1])
    c = D.login("bob")
    assert_eq(c.select("INBOX")[0], "OK")
    assert_eq(c.response("URLMECH"), ("URLMECH", [b"INTERNAL"]))
    c.logout()


def test_imaplib_owner_and_user():
    """imaplib's raw commands: the owner makes user+bob and authuser URLs; bob fetches."""
    imaplib.Commands.setdefault("GENURLAUTH", ("AUTH", "SELECTED"))
    imaplib.Commands.setdefault("URLFETCH", ("AUTH", "SELECTED"))
    uid = draft(D.raw("alice"))
    a = D.login("alice")
    try:
        typ, data = a._simple_command(
            "GENURLAUTH", '"%s"' % rump("alice", ";UID=%d;URLAUTH=user+bob" % uid), "INTERNAL",
            '"%s"' % rump("alice", ";UID=%d/;SECTION=1.2;URLAUTH=authuser" % uid), "INTERNAL")
        assert_eq(typ, "OK")
        typ, data = a._untagged_response(typ, data, "GENURLAUTH")
        line = data[0].decode()
        user_url, auth_url = re.findall(r'"([^"]+)"', line)
        assert TOKEN.search(user_url) and TOKEN.search(auth_url), line
    finally:
        a.logout()
    b = D.login("bob")
    try:
        typ, data = b._simple_command("URLFETCH", '"%s"' % user_url)
        assert_eq(typ, "OK")
        typ, data = b._untagged_response(typ, data, "URLFETCH")
        assert_eq(data[0][1], DRAFT)  # imaplib: (text before the literal, the literal)
    finally:
        b.logout()
    assert_eq(fetch_one("carol", user_url), None)  # user+bob: bob only
    assert_eq(fetch_one("alice", user_url), None)
    for who in ["alice", "bob", "carol"]:  # authuser: anyone logged in
        assert_eq(fetch_one(who, auth_url), PART)


def test_nil_never_an_error():
    r = D.raw("alice")
    uid = draft(r)
    [good, gone] = genurlauth(r, "g", [rump("alice", ";UID=%d;URLAUTH=authuser" % uid),
                                       rump("alice", ";UID=%d;URLAUTH=authuser" % (uid + 500))])
    flipped = good[:-1] + ("0" if good[-1] != "0" else "1")
    upper = good[:-64] + good[-64:].upper()  # hex digits in either case
    other_host = good.replace(HOSTNAME, "other.heron.test")
    other_uid = good.replace(";UID=%d;" % uid, ";UID=%d;" % (uid + 1))
    bobs = rump("bob", ";UID=1;URLAUTH=authuser") + good[good.index(":internal:"):]
    plain = rump("alice", ";UID=%d" % uid)
    rump_only = rump("alice", ";UID=%d;URLAUTH=authuser" % uid)
    other_mech = good.replace(":internal:", ":xsample:")
    got = urlfetch(D.raw("bob"), "f", [good, flipped, upper, other_host, other_uid, gone, bobs,
                                       plain, rump_only, other_mech, "not a url"])
    assert_eq([d for _, d in got],
              [DRAFT, None, DRAFT, None, None, None, None, None, None, None, None])
    # the message gone: NIL, as for one that never was
    r.cmd("s", "SELECT INBOX")
    assert r.cmd("x", "UID STORE %d +FLAGS.SILENT (\\Deleted)" % uid)[-1].startswith("x OK")
    assert r.cmd("e", "EXPUNGE")[-1].startswith("e OK")
    assert_eq(fetch_one("bob", good), None)


def test_genurlauth_refusals():
    r = D.raw("alice")
    uid = draft(r)
    base = ";UID=%d;URLAUTH=" % uid
    cases = [
        ('"%s" INTERNAL' % rump("bob", base + "authuser"), "g NO "),            # not hers
        ('"%s" INTERNAL' % rump("alice", base + "authuser").replace(HOSTNAME, "x.test"),
         "g NO "),                                                                 # other host
        ('"%s" INTERNAL' % rump("alice", base + "anonymous"), "g NO "),           # policy
        ('"%s" XSAMPLE' % rump("alice", base + "authuser"), "g NO "),             # mechanism
        ('"%s" INTERNAL' % rump("alice", base + "authuser", "Nowhere"), "g NO [NONEXISTENT]"),
        ('"%s" INTERNAL' % rump("alice", ";UID=%d" % uid), "g BAD "),             # no URLAUTH
        ('"%s:internal:%s" INTERNAL' % (rump("alice", base + "authuser"), "ab" * 32),
         "g BAD "),                                                                # not a rump
        ('"%s"' % rump("alice", base + "authuser"), "g BAD "),                    # no mechanism
        ("", "g BAD "),
    ]
    for args, want in cases:
        out = r.cmd("g", "GENURLAUTH " + args)
        assert_eq(len(out), 1)
        assert out[0].startswith(want), (args, out)
    assert_in("anonymous", r.cmd("g", "GENURLAUTH " + cases[2][0])[0])


def test_expire():
    r = D.raw("alice")
    uid = draft(r)
    past, future = genurlauth(r, "g", [
        rump("alice", ";UID=%d;EXPIRE=2006-05-10T12:00:00Z;URLAUTH=authuser" % uid),
        rump("alice", ";UID=%d;EXPIRE=2099-12-31T23:59:59+01:00;URLAUTH=authuser" % uid)])
    assert_eq(urlfetch(D.raw("bob"), "f", [past, future]), [(past, None), (future, DRAFT)])
    # the date is signed: moving it later breaks the token
    moved = past.replace("2006-05-10", "2099-05-10")
    assert_eq(fetch_one("bob", moved), None)


def test_resetkey():
    r = D.raw("alice")
    assert r.cmd("c", "CREATE Drafts")[-1].startswith("c OK")
    uid = draft(r, "Drafts")
    inbox_uid = draft(r)
    [d1, i1] = genurlauth(r, "g", [rump("alice", ";UID=%d;URLAUTH=authuser" % uid, "Drafts"),
                                   rump("alice", ";UID=%d;URLAUTH=authuser" % inbox_uid)])
    # the same rump gives the same URL while the key stays
    assert_eq(genurlauth(r, "h", [d1[:d1.index(":internal:")]]), [d1])
    assert_eq(fetch_one("bob", d1), DRAFT)
    assert_eq(r.cmd("k", "RESETKEY Drafts"), ["k OK [URLMECH INTERNAL] Key removed"])
    assert_eq(fetch_one("bob", d1), None)
    assert_eq(fetch_one("bob", i1), DRAFT)  # another mailbox's key stays
    [d2] = genurlauth(r, "g", [d1[:d1.index(":internal:")]])
    assert d2 != d1
    assert_eq(fetch_one("bob", d2), DRAFT)
    assert_eq(r.cmd("k", "RESETKEY Drafts INTERNAL"), ["k OK [URLMECH INTERNAL] Key removed"])
    assert_eq(fetch_one("bob", d2), None)
    [d3] = genurlauth(r, "g", [d1[:d1.index(":internal:")]])
    assert_eq(r.cmd("k", "RESETKEY"), ["k OK All keys removed"])
    assert_eq(urlfetch(D.raw("bob"), "f", [d3, i1]), [(d3, None), (i1, None)])
    out = r.cmd("k", "RESETKEY Drafts XSAMPLE")
    assert out[0].startswith("k NO "), out
    out = r.cmd("k", "RESETKEY Nowhere")
    assert out[0].startswith("k NO [NONEXISTENT]"), out
    # another user's RESETKEY touches only their own mailboxes
    [i4] = genurlauth(r, "g", [i1[:i1.index(":internal:")]])
    assert_eq(D.raw("bob").cmd("k", "RESETKEY"), ["k OK All keys removed"])
    assert_eq(fetch_one("carol", i4), DRAFT)


def test_shared_mailbox():
    """A mailbox of alice's shared with bob ([imapd] namespace_other, SETACL): bob's URL names
    it as bob sees it, Other Users/alice/Team, and the submission server fetches it; the key
    is bob's (alice's RESETKEY of it leaves bob's URLs, bob's leaves hers); with 'l' only, or
    once alice takes 'r' away, GENURLAUTH is NO and the URLs give NIL."""
    a = D.raw("alice")
    assert a.cmd("c", "CREATE Team")[-1].startswith("c OK")
    uid = draft(a, "Team")
    assert a.cmd("s", "SETACL Team bob lr")[-1].startswith("s OK")
    b = D.raw("bob")
    shared = "Other%20Users/alice/Team"
    [u] = genurlauth(b, "g", [rump("bob", ";UID=%d;URLAUTH=submit+bob" % uid, shared)])
    assert u.startswith(rump("bob", ";UID=%d;URLAUTH=submit+bob:internal:" % uid, shared)), u
    assert_eq(fetch_one("carol", u), DRAFT)
    assert_eq(fetch_one("alice", u), None)  # for the submission server only
    [own] = genurlauth(a, "h", [rump("alice", ";UID=%d;URLAUTH=authuser" % uid, "Team")])
    assert_eq(a.cmd("k", "RESETKEY Team"), ["k OK [URLMECH INTERNAL] Key removed"])
    assert_eq(fetch_one("carol", u), DRAFT)  # bob's key, not alice's
    assert_eq(fetch_one("bob", own), None)
    [own] = genurlauth(a, "h", [rump("alice", ";UID=%d;URLAUTH=authuser" % uid, "Team")])
    assert_eq(b.cmd("k", 'RESETKEY "Other Users/alice/Team"'),
              ["k OK [URLMECH INTERNAL] Key removed"])
    assert_eq(fetch_one("carol", u), None)
    assert_eq(fetch_one("bob", own), DRAFT)
    [u] = genurlauth(b, "g", [rump("bob", ";UID=%d;URLAUTH=submit+bob" % uid, shared)])
    assert_eq(fetch_one("carol", u), DRAFT)
    # 'r' taken away: the URL made before gives NIL, no new one is made
    assert a.cmd("s", "SETACL Team bob l")[-1].startswith("s OK")
    assert_eq(fetch_one("carol", u), None)
    out = b.cmd("g", 'GENURLAUTH "%s" INTERNAL' % rump("bob", ";UID=%d;URLAUTH=submit+bob"
                                                         % uid, shared))
    assert out[-1].startswith("g NO "), out
    # given back: the same key again (the key stays while the mailbox does)
    assert a.cmd("s", "SETACL Team bob lr")[-1].startswith("s OK")
    assert_eq(fetch_one("carol", u), DRAFT)
    # a mailbox bob has no right on at all is no such mailbox
    assert a.cmd("c", "CREATE Private")[-1].startswith("c OK")
    out = b.cmd("g", 'GENURLAUTH "%s" INTERNAL' % rump(
        "bob", ";UID=1;URLAUTH=submit+bob", "Other%20Users/alice/Private"))
    assert out[-1].startswith("g NO "), out


def catenate(r, tag, parts):
    cmd = b"%s APPEND INBOX CATENATE (" % tag.encode()
    for i, p in enumerate(parts):
        cmd += b" " if i else b""
        cmd += b"TEXT {%d+}\r\n%s" % (len(p), p) if isinstance(p, bytes) else \
            b'URL "%s"' % p.encode()
    r.send(cmd + b")\r\n")
    return r.until_tag(tag)[-1]


def test_catenate_urlauth():
    r = D.raw("alice")
    uid = draft(r)
    [own, for_bob] = genurlauth(r, "g", [
        rump("alice", ";UID=%d/;SECTION=1.2;URLAUTH=user+alice" % uid),
        rump("alice", ";UID=%d/;SECTION=1.2;URLAUTH=user+bob" % uid)])
    head = b"Subject: forward\r\n\r\n"
    line = catenate(r, "a", [head, own])
    assert line.startswith("a OK [APPENDUID "), line
    new = int(line.split()[4].rstrip("]"))
    r.cmd("s", "SELECT INBOX")
    r.send("f UID FETCH %d BODY.PEEK[]\r\n" % new)
    n = int(r.line().rsplit("{", 1)[1][:-1])
    assert_eq(r.read(n), head + PART)
    r.until_tag("f")
    # a URL of hers the session may not use (user+bob), a changed token, and bob with her URL
    assert catenate(r, "b", [head, for_bob]).startswith("b NO [BADURL "), for_bob
    bad = own[:-1] + ("0" if own[-1] != "0" else "1")
    assert catenate(r, "c", [head, bad]).startswith("c NO [BADURL ")
    assert catenate(D.raw("bob"), "d", [head, for_bob]).startswith("d NO [BADURL ")


def test_key_hidden_from_metadata():
    r = D.raw("alice")
    uid = draft(r)
    genurlauth(r, "g", [rump("alice", ";UID=%d;URLAUTH=authuser" % uid)])
    for entry in ["/private/vendor", "/shared/vendor", "/private/vendor/heron"]:
        out = r.cmd("m", "GETMETADATA (DEPTH infinity) INBOX %s" % entry)
        assert "urlauth" not in " ".join(out).lower(), out
        assert out[-1].startswith("m OK"), out
    out = r.cmd("m", "GETMETADATA INBOX /private/vendor/heron/urlauth-key")
    assert_eq(out[0], '* METADATA INBOX (/private/vendor/heron/urlauth-key NIL)')


def test_limits():
    r = D.raw("alice")
    uid = draft(r)
    [url] = genurlauth(r, "g", [rump("alice", ";UID=%d;URLAUTH=authuser" % uid)])
    # 64 URLs in one URLFETCH are answered, 65 refused
    got = urlfetch(r, "f", [url] * 64)
    assert_eq(len(got), 64)
    assert all(d == DRAFT for _, d in got)
    out = r.cmd("f", "URLFETCH " + " ".join(['"%s"' % url] * 65))
    assert out[0].startswith("f BAD "), out[0][:80]
    out = r.cmd("g", "GENURLAUTH " + " ".join(['"%s" INTERNAL' % url[:url.index(":int")]] * 65))
    assert out[0].startswith("g BAD "), out[0][:80]
    long = rump("alice", ";UID=%d;URLAUTH=user+%s" % (uid, "x" * 8200))
    r.send(b'f URLFETCH {%d}\r\n' % len(long))
    assert r.line().startswith("+ ")
    r.send(long.encode() + b"\r\n")
    out = r.until_tag("f")
    assert out[0].startswith("f BAD "), out[0][:80]
    assert r.cmd("f", "URLFETCH")[0].startswith("f BAD ")


def test_big_body_streamed():
    r = D.raw("alice")
    big = b"Subject: big\r\n\r\n" + b"".join(b"line %06d of a big draft\r\n" % i
                                               for i in range(30000))
    uid = r.append(big)
    [url] = genurlauth(r, "g", [rump("alice", ";UID=%d;URLAUTH=submit+alice" % uid)])
    s = D.raw("carol")
    got = urlfetch(s, "f", [url, url])
    assert_eq([d == big for _, d in got], [True, True])
    assert_eq(len(big) > 512 * 1024, True)
    assert s.cmd("n", "NOOP")[-1].startswith("n OK")


def main():
    global D
    imapd, deliver = sys.argv[1], sys.argv[2]
    assert IMAP_PASSWORD
    D = Imapd(imapd, deliver=deliver,
              extra={"hostname": HOSTNAME, "urlauth_submit_users": "carol",
                     "namespace_other": "Other Users/"})
    return run_suite(D, [test_capability_and_rfc_examples, test_urlmech_on_select,
                         test_imaplib_owner_and_user,
                         test_nil_never_an_error, test_genurlauth_refusals, test_expire,
                         test_resetkey, test_shared_mailbox, test_catenate_urlauth, test_key_hidden_from_metadata,
                         test_limits, test_big_body_streamed], D.dir)


if __name__ == "__main__":
    sys.exit(main())
