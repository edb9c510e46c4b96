#!/usr/bin/env python3
"""test_mailauth.py — mtad's sender authentication end to end, against a private DNS world
(scripts/dns: nsd + unbound) holding the test domains' SPF, DKIM and DMARC records, with
independent implementations as judges: python3-dkim (dkimpy) verifies every signature mtad
makes (RSA and Ed25519 keys made by `mailctl dkim keygen`, mail from a trusted network and
from an authenticated submission), mtad verifies what dkimpy signs, and python3-spf (pyspf,
asking the same resolver) agrees with every SPF verdict mtad writes into its
Authentication-Results header. DMARC p=reject fails get 550 5.7.1 at the end of data,
p=quarantine fails land in the recipient's Junk mailbox (made with \\Junk), an
Authentication-Results header claiming our authserv-id is removed, [spf] reject_fail refuses
MAIL FROM (after SIGHUP). Hostile input: a 60 KB DMARC record, SPF include loops and lookup
bombs, a header folded 1,000 times, a broken signature: clear verdicts, no crash.

  test_mailauth.py SOURCE_ROOT MTAD STORE_PEEK MAILCTL"""
import email
import json
import os
import re
import signal
import smtplib
import subprocess
import sys
import tempfile
import time

import dkim
import dns.resolver
import spf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, HOST, DnsWorld, Mtad, run_main, run_tests, wait_for,  # noqa: E402
                      write_users)

ROOT, MTAD, PEEK, MAILCTL = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-mailauth-")
AUTHSERV = "mx.heron.test"
TRUSTED = "127.0.0.2"      # in trusted_networks: its mail is signed, not verified
OTHER = "127.0.0.3"        # another outside client address

world = None
keys = {}                  # (domain, selector) -> TXT record text
write_users(os.path.join(TMP, "users"), ["user1", "user2"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"trusted_networks": TRUSTED + "/32", "max_message_size": "1M",
             "auth_require_tls": "no"}, tls=False)


def txt(name, text):
    """A zone-file TXT line with text split into strings of at most 255 bytes."""
    parts = " ".join('"%s"' % text[i:i + 255] for i in range(0, len(text), 255))
    return "%s TXT %s" % (name, parts)


def keygen(domain, selector, kind):
    path = os.path.join(TMP, "%s.%s.key" % (domain, selector))
    r = subprocess.run([MAILCTL, "-c", os.path.join(TMP, "heron.conf"), "--json", "dkim",
                        "keygen", domain, selector, "--type", kind, "--out", path],
                       capture_output=True, text=True, check=True)
    out = json.loads(r.stdout)
    assert out["name"] == "%s._domainkey.%s" % (selector, domain), out
    st = os.stat(path)
    assert st.st_mode & 0o777 == 0o600, oct(st.st_mode)
    keys[(domain, selector)] = out["txt"]
    return path


def dkimpy_key():
    """dkimpy's own RSA key (from openssl, as any signer would make one), for ext.test."""
    pem = subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                          "rsa_keygen_bits:2048"], capture_output=True, check=True).stdout
    pub = subprocess.run(["openssl", "pkey", "-pubout", "-outform", "DER"], input=pem,
                         capture_output=True, check=True).stdout
    import base64
    return pem, "v=DKIM1; k=rsa; p=" + base64.b64encode(pub).decode()


PY_PEM, PY_TXT = None, None

# pyspf and Heron must agree on these (sender domain, client address); the zones below
SPF_CASES = [
    ("pass.test", HOST), ("pass.test", OTHER), ("soft.test", HOST), ("neutral.test", HOST),
    ("nospf.test", HOST), ("loop.test", HOST), ("bomb.test", HOST), ("syntax.test", HOST),
    ("incl.test", HOST), ("incl.test", OTHER), ("macro.test", HOST), ("macro.test", OTHER),
    ("mx.test", HOST), ("mx.test", OTHER), ("void.test", HOST), ("redir.test", OTHER),
    ("exists.test", HOST),
]


def spec():
    zones = {
        # our own domains: the signing keys
        "sign.test": {"records": [txt("rsa1._domainkey", keys[("sign.test", "rsa1")]),
                                  txt("ed1._domainkey", keys[("sign.test", "ed1")]),
                                  txt("@", "v=spf1 ip4:127.0.0.2 -all"),
                                  txt("_dmarc", "v=DMARC1; p=reject")]},
        DOMAIN: {"records": [txt("sub1._domainkey", keys[(DOMAIN, "sub1")]),
                             txt("@", "v=spf1 ip4:127.0.0.2 -all"),
                             txt("_dmarc", "v=DMARC1; p=reject")]},
        # an outside domain whose mail dkimpy signs
        "ext.test": {"records": [txt("py._domainkey", PY_TXT),
                                 txt("@", "v=spf1 ip4:127.0.0.1 -all"),
                                 txt("mail", "v=spf1 a -all"), "mail A 127.0.0.1",
                                 txt("_dmarc", "v=DMARC1; p=reject; adkim=s")]},
        "fail.test": {"records": [txt("@", "v=spf1 -all"),
                                  txt("_dmarc", "v=DMARC1; p=reject")]},
        "quar.test": {"records": [txt("@", "v=spf1 -all"),
                                  txt("_dmarc", "v=DMARC1; p=quarantine")]},
        "big.test": {"records": [txt("@", "v=spf1 ip4:127.0.0.1 -all"),
                                 txt("_dmarc", "v=DMARC1; p=reject; " + "x" * 60000)]},
        # SPF verdicts pyspf must agree with
        "pass.test": {"records": [txt("@", "v=spf1 ip4:127.0.0.1 -all")]},
        "soft.test": {"records": [txt("@", "v=spf1 ~all")]},
        "neutral.test": {"records": [txt("@", "v=spf1 ?all")]},
        "nospf.test": {"records": [txt("@", "hello world")]},
        "loop.test": {"records": [txt("@", "v=spf1 include:loop.test -all")]},
        "bomb.test": {"records": [txt("@", "v=spf1 " + " ".join(
            "a:n%d.bomb.test" % i for i in range(12)) + " -all")]
            + ["n%d A 192.0.2.%d" % (i, i + 1) for i in range(12)]},
        "syntax.test": {"records": [txt("@", "v=spf1 ip4:300.1.1.1 -all")]},
        "incl.test": {"records": [txt("@", "v=spf1 include:_s.pass.test -all")]},
        "macro.test": {"records": [txt("@", "v=spf1 exists:%{i}._ok.macro.test -all"),
                                   "127.0.0.1._ok A 127.0.0.2"]},
        "mx.test": {"records": [txt("@", "v=spf1 mx -all"), "@ MX 10 m1", "m1 A 127.0.0.3"]},
        "void.test": {"records": [txt("@", "v=spf1 a:x1.void.test a:x2.void.test "
                                      "a:x3.void.test ?all")]},
        "redir.test": {"records": [txt("@", "v=spf1 redirect=mx.test")]},
        "exists.test": {"records": [txt("@", "v=spf1 exists:nothere.exists.test ~all")]},
    }
    zones["pass.test"]["records"].append(txt("_s", "v=spf1 ip4:127.0.0.3 -all"))
    return zones


def message(frm, subject, extra="", body="Hello.\r\n"):
    return ("From: %s\r\nTo: user1@%s\r\nSubject: %s\r\nDate: Wed, 02 Dec 2026 06:00:00 "
            "+0000\r\nMessage-ID: <%s.%d@test>\r\n%s\r\n%s" % (
                frm, DOMAIN, subject, re.sub(r"\W", "", subject), time.time_ns(), extra,
                body))


def send(msg, sender, rcpt="user1@" + DOMAIN, source=HOST, helo="client.test", port=None):
    with smtplib.SMTP(HOST, port or mtad.port, local_hostname=helo,
                      source_address=(source, 0), timeout=30) as c:
        return c.sendmail(sender, [rcpt], msg.encode())


def mailctl(*args):
    return subprocess.run([MAILCTL, "-c", mtad.conf] + list(args), capture_output=True,
                          check=True).stdout


def stored(subject, user="user1", mailbox="INBOX", timeout=20):
    """The bytes of the message with this subject in user's mailbox (waits for it)."""
    found = {}

    def look():
        try:
            rows = json.loads(mailctl("--json", "message", "list", user, mailbox))
        except subprocess.CalledProcessError:
            return False
        for row in rows:
            raw = mailctl("message", "show", user, mailbox, str(row["uid"]), "--raw")
            if ("Subject: " + subject + "\r\n").encode() in raw:
                found["raw"] = raw
                return True
        return False
    wait_for(look, timeout, "message %r in %s/%s" % (subject, user, mailbox))
    return found["raw"]


def authres(raw):
    """Our Authentication-Results headers (unfolded) of a stored message."""
    msg = email.message_from_bytes(raw)
    return [re.sub(r"\s+", " ", v) for v in msg.get_all("Authentication-Results", [])]


def keyfunc(name, timeout=5):
    """dkimpy's DNS: the records published in the DNS world."""
    n = name.decode() if isinstance(name, bytes) else name
    n = n.rstrip(".")
    for (d, s), t in list(keys.items()) + [(("ext.test", "py"), PY_TXT)]:
        if n == "%s._domainkey.%s" % (s, d):
            return t.encode()
    return None


def setup():
    global world, PY_PEM, PY_TXT
    paths = [("sign.test", "rsa1", keygen("sign.test", "rsa1", "rsa")),
             ("sign.test", "ed1", keygen("sign.test", "ed1", "ed25519")),
             (DOMAIN, "sub1", keygen(DOMAIN, "sub1", "rsa"))]
    PY_PEM, PY_TXT = dkimpy_key()
    world = DnsWorld(ROOT, TMP, spec())
    mtad.sections["dns"] = world.conf()
    mtad.sections["dkim"] = {"sign": " ".join("%s:%s:%s" % p for p in paths)}
    mtad.sections["spf"] = {"verify": "yes"}
    mtad.sections["dmarc"] = {"verify": "yes"}
    mtad.write_conf()
    mtad.start()
    # pyspf asks the same resolver
    host, port = world.env["DNS_RESOLVER"].split("@")
    r = dns.resolver.Resolver(configure=False)
    r.nameservers, r.port, r.lifetime = [host], int(port), 10
    dns.resolver.default_resolver = r


def cleanup():
    if world is not None:
        world.stop()


def verify_all(raw):
    """dkimpy verifies every DKIM-Signature of raw; their (d, s, a) are returned."""
    msg = email.message_from_bytes(raw)
    sigs = msg.get_all("DKIM-Signature", [])
    assert sigs, raw[:600]
    seen = []
    d = dkim.DKIM(raw)
    for i, sig in enumerate(sigs):
        ok = d.verify(idx=i, dnsfunc=keyfunc)
        tags = dict(t.strip().split("=", 1) for t in re.sub(r"\s+", "", sig).split(";")
                    if "=" in t)
        assert ok, ("dkimpy refuses signature", i, sig)
        seen.append((tags["d"], tags["s"], tags["a"]))
    return seen


def test_signed_from_trusted_network_verifies_with_dkimpy():
    body = "Line one.  with  spaces \r\n\r\n\r\n" + "x" * 3000 + "\r\n"
    send(message("Someone <a@sign.test>", "trusted signed", body=body), "a@sign.test",
         source=TRUSTED)
    raw = stored("trusted signed")
    seen = verify_all(raw)
    assert sorted(seen) == [("sign.test", "ed1", "ed25519-sha256"),
                            ("sign.test", "rsa1", "rsa-sha256")], seen
    assert b"h=from:" in raw.replace(b"\r\n\t", b"").replace(b" ", b"")
    assert not authres(raw), "trusted mail is not verified"


def test_big_message_signed_through_the_file():
    # past the 64 KB kept in memory: the signatures go above a rewritten file
    body = "".join("line %06d of a long message\r\n" % i for i in range(6000))
    send(message("a@sign.test", "big signed", body=body), "a@sign.test", source=TRUSTED)
    raw = stored("big signed")
    assert len(raw) > 150000
    assert len(verify_all(raw)) == 2


def test_submission_signed_for_the_users_domain():
    with smtplib.SMTP(HOST, mtad.sub_port, timeout=30) as c:
        c.login("user1", "user1")
        c.sendmail("user1@" + DOMAIN, ["user2@" + DOMAIN],
                   message("user1@" + DOMAIN, "submitted signed").encode())
    raw = stored("submitted signed", user="user2")
    assert verify_all(raw) == [(DOMAIN, "sub1", "rsa-sha256")]


def test_unsigned_when_no_key_for_the_domain():
    send(message("a@other.test", "no key"), "a@other.test", source=TRUSTED)
    raw = stored("no key")
    assert b"DKIM-Signature" not in raw


def dkimpy_signed(subject, extra=""):
    msg = message("x@ext.test", subject, extra=extra).encode()
    sig = dkim.sign(msg, b"py", b"ext.test", PY_PEM,
                    include_headers=[b"from", b"to", b"subject", b"date", b"message-id"])
    return sig + msg


def test_dkimpy_signed_mail_passes():
    forged = ("Authentication-Results: %s; dkim=pass header.d=paypal.test\r\n"
              "Authentication-Results: other.example; spf=pass\r\n" % AUTHSERV.upper())
    msg = dkimpy_signed("dkimpy signed", extra=forged)
    send(msg.decode(), "x@ext.test", helo="mail.ext.test")
    raw = stored("dkimpy signed")
    ar = authres(raw)
    ours = [a for a in ar if a.lower().startswith(AUTHSERV)]
    assert len(ours) == 1, ar
    a = ours[0]
    assert "spf=pass smtp.mailfrom=x@ext.test" in a, a
    assert "spf=pass smtp.helo=mail.ext.test" in a, a
    assert re.search(r"dkim=pass header.d=ext.test header.s=py header.b=\S{8}", a), a
    assert "dmarc=pass" in a and "header.from=ext.test" in a, a
    assert "paypal" not in raw.decode(), "the forged header is gone"
    assert any(x.startswith("other.example") for x in ar), "others' headers are kept"
    # the signature still verifies after our changes (dkimpy, on the stored bytes)
    assert dkim.verify(raw, dnsfunc=keyfunc)


def test_tampered_signature_fails_dkim():
    msg = dkimpy_signed("tampered").replace(b"Hello.", b"Hellp.")
    send(msg.decode(), "x@ext.test", helo="mail.ext.test")
    a = authres(stored("tampered"))[0]
    assert "dkim=fail" in a and "header.d=ext.test" in a, a
    assert "dmarc=pass" in a, a  # SPF passes, aligned (relaxed aspf)


def test_dmarc_reject_refused_at_end_of_data():
    try:
        send(message("x@fail.test", "dmarc reject"), "x@fail.test")
    except smtplib.SMTPDataError as e:
        assert e.smtp_code == 550 and e.smtp_error.startswith(b"5.7.1"), e
    else:
        raise AssertionError("accepted")
    # SPF fails (wrong address) but the DKIM signature aligns: DMARC passes
    send(dkimpy_signed("wrong ip").decode(), "x@ext.test", source=OTHER)
    a = authres(stored("wrong ip"))[0]
    assert "spf=fail" in a and "dkim=pass" in a and "dmarc=pass" in a, a


def copies(subject, user="user1"):
    """The stored messages with this subject in user's INBOX and Junk."""
    found = []
    for mailbox in ("INBOX", "Junk"):
        try:
            rows = json.loads(mailctl("--json", "message", "list", user, mailbox))
        except subprocess.CalledProcessError:
            continue
        for row in rows:
            raw = mailctl("message", "show", user, mailbox, str(row["uid"]), "--raw")
            if ("Subject: " + subject + "\r\n").encode() in raw:
                found.append(raw)
    return found


def test_own_domain_dmarc_reject_on_port_25():
    # From: our own local domain (p=reject), MAIL FROM outside, no AUTH, an outside client:
    # neither SPF nor DKIM aligns with heron.test, so DMARC fails and the mail is refused
    msg = message("The CEO <ceo@%s>" % DOMAIN, "own domain forged")
    try:
        send(msg, "someone@ext.test", source=OTHER)
    except smtplib.SMTPDataError as e:
        assert e.smtp_code == 550 and e.smtp_error.startswith(b"5.7.1"), e
    else:
        raise AssertionError("mail forging our own domain accepted on port 25")
    # the same message signed with mtad's own heron.test key: DKIM aligns, accepted
    with open(os.path.join(TMP, "%s.sub1.key" % DOMAIN), "rb") as f:
        pem = f.read()
    sig = dkim.sign(msg.encode(), b"sub1", DOMAIN.encode(), pem,
                    include_headers=[b"from", b"to", b"subject", b"date", b"message-id"])
    send((sig + msg.encode()).decode(), "someone@ext.test", source=OTHER)
    a = authres(stored("own domain forged"))[0]
    assert "dkim=pass header.d=%s" % DOMAIN in a and "dmarc=pass" in a, a
    # the refused copy was never stored: only the signed one is there
    found = copies("own domain forged")
    assert len(found) == 1 and b"DKIM-Signature" in found[0], len(found)


def test_dmarc_quarantine_goes_to_junk():
    send(message("x@quar.test", "dmarc quarantine"), "x@quar.test")
    raw = stored("dmarc quarantine", mailbox="Junk")
    assert "dmarc=fail" in authres(raw)[0]
    out = mailctl("--json", "mailbox", "list", "user1").decode()
    assert "Junk" in out and "junk" in out.lower(), out


def test_spf_agrees_with_pyspf():
    verdicts = set()
    for dom, ip in SPF_CASES:
        subject = "spf %s %s" % (dom, ip)
        send(message("x@" + dom, subject), "x@" + dom, source=ip, helo="client.test")
        a = authres(stored(subject))[0]
        m = re.search(r"spf=(\w+)(?: \([^)]*\))? smtp.mailfrom=", a)
        assert m, a
        theirs, _ = spf.check2(i=ip, s="x@" + dom, h="client.test")
        assert m.group(1) == theirs, (dom, ip, "heron", m.group(1), "pyspf", theirs, a)
        verdicts.add(theirs)
    assert verdicts >= {"pass", "fail", "softfail", "neutral", "none", "permerror"}, verdicts


def test_hostile_inputs():
    # a 60 KB DMARC record: a verdict, no crash
    send(message("x@big.test", "big dmarc"), "x@big.test")
    a = authres(stored("big dmarc"))[0]
    assert re.search(r"dmarc=(permerror|none|pass)", a), a
    # a header folded 1,000 times
    folded = "X-Folded: start\r\n" + "".join("\tfold %d\r\n" % i for i in range(1000))
    send(message("x@pass.test", "folded", extra=folded), "x@pass.test")
    raw = stored("folded")
    assert raw.count(b"\tfold ") == 1000
    # a DKIM-Signature that is garbage
    junk = "DKIM-Signature: v=1; a=rsa-sha256; d=ext.test; b=!!!; bh=;;;\r\n"
    send(message("x@pass.test", "garbage sig", extra=junk), "x@pass.test")
    a = authres(stored("garbage sig"))[0]
    assert "dkim=permerror" in a, a
    assert not mtad.sanitizer_reports()


def test_spf_reject_fail_at_mail_from_after_reload():
    mtad.sections["spf"]["reject_fail"] = "yes"
    mtad.write_conf()
    os.kill(mtad.proc.pid, signal.SIGHUP)
    wait_for(lambda: mtad.logtext().count("config reloaded") >= 2, 20, "reload")
    try:
        with smtplib.SMTP(HOST, mtad.port, timeout=30) as c:
            c.ehlo("client.test")
            code, text = c.mail("x@fail.test")
            assert code == 550 and text.startswith(b"5.7.23"), (code, text)
            code, text = c.mail("x@pass.test")
            assert code == 250, (code, text)
    finally:
        mtad.sections["spf"]["reject_fail"] = "no"
        mtad.write_conf()
        os.kill(mtad.proc.pid, signal.SIGHUP)


TESTS = [test_signed_from_trusted_network_verifies_with_dkimpy,
         test_big_message_signed_through_the_file,
         test_submission_signed_for_the_users_domain, test_unsigned_when_no_key_for_the_domain,
         test_dkimpy_signed_mail_passes, test_tampered_signature_fails_dkim,
         test_dmarc_reject_refused_at_end_of_data, test_own_domain_dmarc_reject_on_port_25,
         test_dmarc_quarantine_goes_to_junk,
         test_spf_agrees_with_pyspf, test_hostile_inputs,
         test_spf_reject_fail_at_mail_from_after_reload]

def body():
    setup()
    return run_tests(TESTS)


if __name__ == "__main__":
    sys.exit(run_main(body, TMP, [mtad], cleanup=[cleanup]))
