"""mtad end to end: BURL (RFC 4468), the forward without download: alice APPENDs a draft to
imapd, GENURLAUTHs it for submit+alice, then on the submission port smtplib EHLO (BURL imap
advertised), STARTTLS, AUTH, MAIL, RCPT and BURL <url> LAST: bob's INBOX gets the draft's
exact bytes after mtad's Received: line. BDAT then BURL in one message; a URL for another
user (554 5.7.0), a changed token (554 5.6.6), BURL before AUTH (530), imapd down (451).
TLS to imapd ([mtad] burl_tls): a second imapd on the same store that refuses LOGIN without
TLS serves BURL over STARTTLS and over implicit TLS, its certificate verified against [tls]
ca; a certificate that does not verify, or not for burl_tls_name, is 451 4.4.1 with nothing
fetched; without TLS its LOGIN refusal is 554 5.7.8.
mtad and imapd share one store; carol is the submission login ([imapd]
urlauth_submit_users, [mtad] burl_user).

Usage: test_burl.py SOURCE_ROOT MTAD IMAPD"""
import os
import shutil
import smtplib
import ssl
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, Mtad, IMAP_PASSWORD, file_directory, free_port  # noqa: E402
from heronlib import make_cert  # noqa: E402
from heronlib import run_main, run_tests, assert_eq  # noqa: E402

HOSTNAME = "imap.heron.test"
DRAFT = (b"From: alice@heron.test\r\nTo: bob@heron.test\r\nSubject: forwarded draft\r\n"
         b"Message-ID: <draft1@heron.test>\r\n\r\nSi vis pacem, para bellum.\r\n"
         b"A second line.\r\n")
imapd = mtad = None
imapd_tls = None  # on imapd's store, LOGIN only over TLS (STARTTLS or its listen_tls)


def make_url(access="submit+alice", tamper=False):
    r = imapd.raw("alice")
    uid = r.append(DRAFT)
    rump = "imap://alice@%s/INBOX/;UID=%d;URLAUTH=%s" % (HOSTNAME, uid, access)
    out = r.cmd("g", 'GENURLAUTH "%s" INTERNAL' % rump)
    assert out[-1].startswith("g OK"), out
    url = out[0].split('"')[1]
    if tamper:
        url = url[:-1] + ("0" if url[-1] != "0" else "1")
    return url


def session(login=True):
    c = smtplib.SMTP("127.0.0.1", mtad.sub_port, timeout=30)
    c.ehlo()
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    c.starttls(context=ctx)
    c.ehlo()
    if login:
        c.login("alice", IMAP_PASSWORD)
    return c


def bob_last():
    """The last message of bob's INBOX, as bytes."""
    r = imapd.raw("bob")
    r.cmd("s", "SELECT INBOX")
    r.send("f FETCH * BODY.PEEK[]\r\n")
    line = r.line()
    n = int(line.rsplit("{", 1)[1][:-1])
    data = r.read(n)
    r.until_tag("f")
    return data


def envelope(c):
    assert_eq(c.mail("alice@heron.test")[0], 250)
    assert_eq(c.rcpt("bob@heron.test")[0], 250)


def test_forward_without_download():
    url = make_url()
    c = session()
    assert_eq(c.esmtp_features.get("burl"), "imap")
    envelope(c)
    code, msg = c.docmd("BURL", url + " LAST")
    assert_eq(code, 250, msg)
    c.quit()
    got = bob_last()
    assert got.endswith(b"\r\n" + DRAFT), got[:300]
    head = got[:-len(DRAFT)]
    assert head.startswith(b"Received: "), head
    assert b"Subject:" not in head  # only mtad's trace before the draft's own header


def test_bdat_then_burl():
    url = make_url()
    c = session()
    envelope(c)
    extra = b"X-Forwarded-By: alice\r\n"
    c.send(b"BDAT %d\r\n" % len(extra) + extra)
    assert_eq(c.getreply()[0], 250)
    code, msg = c.docmd("BURL", url + " LAST")
    assert_eq(code, 250, msg)
    c.quit()
    got = bob_last()
    assert got.endswith(extra + DRAFT), got[-300:]


def test_refusals():
    c = session(login=False)
    code, _ = c.docmd("BURL", make_url() + " LAST")
    assert_eq(code, 530)
    c.quit()
    c = session()
    envelope(c)
    # refused before any fetch: the transaction stays
    code, msg = c.docmd("BURL", make_url("submit+bob") + " LAST")
    assert_eq((code, msg[:5]), (554, b"5.7.0"))
    code, msg = c.docmd("BURL", make_url("user+alice") + " LAST")
    assert_eq((code, msg[:5]), (554, b"5.7.0"))
    # a fetch that fails ends it
    code, msg = c.docmd("BURL", make_url(tamper=True) + " LAST")
    assert_eq((code, msg[:5]), (554, b"5.6.6"))
    code, _ = c.docmd("BURL", "imap://x")  # no transaction now
    assert_eq(code, 503)
    c.quit()


def restart_mtad(keys, ca):
    mtad.stop()
    mtad.sections["tls"]["ca"] = ca
    mtad.set_keys(keys)
    mtad.start()


def burl_reply(url):
    c = session()
    envelope(c)
    code, msg = c.docmd("BURL", url + " LAST")
    c.quit()
    return code, msg


def test_tls_starttls_and_implicit():
    """STARTTLS on imapd_tls's port, then implicit TLS on its listen_tls port: the draft's
    exact bytes reach bob. imapd_tls takes no LOGIN without TLS, so TLS carried it."""
    for tls, port in (("starttls", imapd_tls.port), ("implicit", imapd_tls.tls_port)):
        restart_mtad({"burl_imap": "127.0.0.1:%d" % port, "burl_tls": tls,
                      "burl_tls_name": ""}, imapd_tls.cert)
        url = make_url()
        code, msg = burl_reply(url)
        assert_eq(code, 250, (tls, msg))
        assert bob_last().endswith(b"\r\n" + DRAFT), tls


def test_tls_not_verified():
    """A certificate that does not verify against [tls] ca, or not for burl_tls_name: 451
    4.4.1 before any login; without TLS imapd_tls refuses the LOGIN: 554 5.7.8."""
    url = make_url()
    other, _ = make_cert(mtad.tmp, "other.heron.test")
    cases = [({"burl_imap": "127.0.0.1:%d" % imapd_tls.port, "burl_tls": "starttls"}, other),
             ({"burl_imap": "127.0.0.1:%d" % imapd_tls.tls_port, "burl_tls": "implicit"},
              other),
             ({"burl_imap": "127.0.0.1:%d" % imapd_tls.tls_port, "burl_tls": "implicit",
               "burl_tls_name": "imap.elsewhere.test"}, imapd_tls.cert)]
    for keys, ca in cases:
        keys.setdefault("burl_tls_name", "")
        restart_mtad(keys, ca)
        code, msg = burl_reply(url)
        assert_eq((code, msg[:5]), (451, b"4.4.1"), keys)
    restart_mtad({"burl_imap": "127.0.0.1:%d" % imapd_tls.port, "burl_tls": "no",
                  "burl_tls_name": ""}, imapd_tls.cert)
    code, msg = burl_reply(url)
    assert_eq((code, msg[:5]), (554, b"5.7.8"))


def test_imapd_down():
    url = make_url()
    mtad.stop()
    mtad.set_keys({"burl_imap": "127.0.0.1:%d" % free_port()})
    mtad.start()
    c = session()
    envelope(c)
    code, msg = c.docmd("BURL", url + " LAST")
    assert_eq((code, msg[:5]), (451, b"4.4.1"))
    c.quit()


def main():
    global imapd, mtad, imapd_tls
    src, mtad_exe, imapd_exe = sys.argv[1], sys.argv[2], sys.argv[3]
    tmp = tempfile.mkdtemp(prefix="heron-burl-")
    imapd = Imapd(imapd_exe, extra={"hostname": HOSTNAME, "urlauth_submit_users": "carol"})
    imapd_tls = Imapd(imapd_exe, plaintext=False, tls=True,
                      extra={"hostname": HOSTNAME, "urlauth_submit_users": "carol"})
    with open(imapd_tls.conf) as f:  # imapd's store, not one of its own
        text = f.read().replace(imapd_tls.store, imapd.store)
    with open(imapd_tls.conf, "w") as f:
        f.write(text)
    pw = os.path.join(tmp, "burl.pw")
    with open(pw, "w") as f:
        f.write(IMAP_PASSWORD + "\n")
    mtad = Mtad(mtad_exe, tmp, file_directory(os.path.join(imapd.dir, "users")),
                {"burl_imap": "127.0.0.1:%d" % imapd.port, "burl_user": "carol",
                 "burl_password_file": pw})
    mtad.sections["store"]["path"] = imapd.store
    mtad.write_conf()

    def body():
        imapd.start()
        imapd_tls.start()
        mtad.start()
        return run_tests([test_forward_without_download, test_bdat_then_burl, test_refusals,
                          test_tls_starttls_and_implicit, test_tls_not_verified,
                          test_imapd_down])
    return run_main(body, tmp, [mtad, imapd_tls, imapd],
                    cleanup=[lambda: shutil.rmtree(imapd.dir, ignore_errors=True),
                             lambda: shutil.rmtree(imapd_tls.dir, ignore_errors=True)])


if __name__ == "__main__":
    sys.exit(main())
