"""imapd against the real slapd of scripts/ldap (bind mode): users log in with their directory
password, a wrong password and an unknown user are refused, the session works after login; a
user whose mailHost names another host gets a login referral (RFC 2221), one homed here logs
in.

Usage: test_imapd_ldap.py IMAPD_BINARY DELIVER_BINARY SOURCE_ROOT"""
import base64
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, ImapRaw as Raw, Slapd, run_main, run_tests  # noqa: E402
from heronlib import after_test, assert_eq, assert_in, assert_re  # noqa: E402
from messages import SIMPLE  # noqa: E402

D = SLAPD = None  # the imapd the tests talk to, the slapd behind it


def test_login_against_slapd():
    r = Raw(D.port)
    after_test(r.close)
    assert_eq(r.cmd("a", "LOGIN user3 wrong"),
              ["a NO [AUTHENTICATIONFAILED] Authentication failed"])
    assert_eq(r.cmd("b", "LOGIN nosuchuser user3"),
              ["b NO [AUTHENTICATIONFAILED] Authentication failed"])
    assert r.cmd("c", "LOGIN user3 user3")[-1].startswith("c OK [CAPABILITY")
    r.send(b"d APPEND INBOX {%d+}\r\n" % len(SIMPLE) + SIMPLE + b"\r\n")
    assert_re(r.until_tag("d")[-1], r"^d OK \[APPENDUID \d+ 1\] APPEND completed$")
    out = r.cmd("e", "SELECT INBOX")
    assert_in("* 1 EXISTS", out)
    assert_eq(r.cmd("f", "UID SEARCH SUBJECT lunch"),
              ["* SEARCH 1", "f OK SEARCH completed"])


def set_mailhost(user, host):
    e = SLAPD.env
    ldif = "dn: uid=%s,%s\nchangetype: modify\nreplace: mailHost\nmailHost: %s\n" % (
        user, e["LDAP_PEOPLE"], host)
    subprocess.run(["ldapmodify", "-x", "-H", e["LDAP_URI"], "-D", e["LDAP_ADMIN_DN"],
                    "-w", e["LDAP_ADMIN_PASSWORD"]], input=ldif.encode(), check=True,
                   stdout=subprocess.DEVNULL)


def test_login_referral():
    set_mailhost("user5", "other.heron.test")
    set_mailhost("user2", "STORE1.heron.test")  # this host, in any case
    r = Raw(D.port)
    after_test(r.close)
    assert_in(" LOGIN-REFERRALS ", r.greeting)
    assert_eq(r.cmd("a", "LOGIN user5 user5"), [
        "a NO [REFERRAL imap://user5;AUTH=*@other.heron.test/] Your mailbox is on "
        "other.heron.test"])
    assert_eq(r.cmd("b", "SELECT INBOX"), ["b NO Log in first"])
    tok = base64.b64encode(b"\0user5\0user5").decode()
    assert_eq(r.cmd("c", "AUTHENTICATE PLAIN " + tok), [
        "c NO [REFERRAL imap://user5;AUTH=*@other.heron.test/] Your mailbox is on "
        "other.heron.test"])
    assert_eq(r.cmd("d", "LOGIN user5 wrong"),
              ["d NO [AUTHENTICATIONFAILED] Authentication failed"])  # no hint
    assert r.cmd("e", "LOGIN user2 user2")[-1].startswith("e OK [CAPABILITY")


def test_imaplib_login():
    c = D.connect()
    assert_eq(c.login("user4", "user4")[0], "OK")
    assert_eq(c.select("INBOX")[0], "OK")
    c.logout()


def main():
    global D, SLAPD
    imapd, deliver, root = sys.argv[1], sys.argv[2], sys.argv[3]
    ldir = tempfile.mkdtemp(prefix="heron-imapd-ldap-")
    SLAPD = Slapd(root, ldir, users=5)

    def body():
        global D
        SLAPD.start()
        directory = {"backend": "ldap", "uri": SLAPD.uri, "base": SLAPD.env["LDAP_PEOPLE"],
                     "auth_mode": "bind"}
        D = Imapd(imapd, deliver=deliver, directory=directory,
                  extra={"hostname": "store1.heron.test"})
        daemons.append(D)
        D.start()
        return run_tests([test_login_against_slapd, test_login_referral, test_imaplib_login])

    def remove_imapd_dir():
        for d in daemons:
            shutil.rmtree(d.dir, ignore_errors=True)

    daemons = []  # run_main stops what is in it, checks its logs, removes ldir on success
    return run_main(body, ldir, daemons, cleanup=[SLAPD.stop, remove_imapd_dir], tail=20000)


if __name__ == "__main__":
    sys.exit(main())
