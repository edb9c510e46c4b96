#!/usr/bin/env python3
"""test_ldap.py — mtad against the real slapd of scripts/ldap: recipients and aliases looked
up in the directory, AUTH by bind, and a directory outage: RCPT gets 451 4.3.0 (never 550),
mail accepted before is kept, and mail flows again once slapd is back. The login cache is the
daemon's (#23): with slapd stopped, a login cached by one worker is answered by both. A
SIGHUP's auth_cache_ttl and negative_cache_ttl reach it (#23): with 2h at start a password
changed with ldapmodify and a user added with ldapadd are answered from the cache as before;
after a SIGHUP to 1s the cache is emptied (the new password logs in, the new user gets mail)
and a second change wins without a restart once the short TTL has passed (polled, bounded:
with 2h it never would).

  test_ldap.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import re
import signal
import smtplib
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, Slapd, Store, run_suite, tls_client_ctx,  # noqa: E402
                      wait_for)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-ldap-")
SLAPD = Slapd(ROOT, os.path.join(TMP, "slapd"), users=20)


def msg(subject):
    return f"From: <a@{DOMAIN}>\r\nSubject: {subject}\r\n\r\nbody\r\n"


def has_subject(store, user, subject):
    return any(f"Subject: {subject}\r\n".encode() in store.body(user, uid)
               for uid, _b, _s in store.inbox(user))


def add_user(user):
    SLAPD.change("ldapadd", f"dn: uid={user},{SLAPD.env['LDAP_PEOPLE']}\n"
                 "objectClass: inetOrgPerson\nobjectClass: inetLocalMailRecipient\n"
                 f"objectClass: heronMailUser\nuid: {user}\ncn: {user}\nsn: {user}\n"
                 f"mail: {user}@{DOMAIN}\nmailLocalAddress: {user}@{DOMAIN}\n"
                 f"userPassword: {user}\n")


def auth_ok(port, user, password):
    """True when AUTH (after STARTTLS) of user with password succeeds, False when refused."""
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as c:
        c.starttls(context=tls_client_ctx())
        try:
            c.login(user, password)
            return True
        except smtplib.SMTPAuthenticationError:
            return False


def rcpt_code(port, user):
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as c:
        c.ehlo("c")
        c.docmd("MAIL FROM:<x@example.org>")
        return c.docmd(f"RCPT TO:<{user}@{DOMAIN}>")[0]


def main():
    with SLAPD:
        return suite()


def suite():
    directory = SLAPD.directory(timeout="2s", negative_cache_ttl="0s", auth_cache_ttl="0s")
    mtad = Mtad(MTAD, TMP, directory)
    store = Store(PEEK, mtad.conf)

    def test_lookup_and_alias():
        with smtplib.SMTP("127.0.0.1", mtad.port) as c:
            c.ehlo("c")
            refused = c.sendmail("x@example.org", [f"user1@{DOMAIN}", f"alias.user2@{DOMAIN}"],
                                 msg("ldap-one"))
            assert refused == {}, refused
            c.docmd("MAIL FROM:<x@example.org>")
            code, text = c.docmd(f"RCPT TO:<nosuchuser@{DOMAIN}>")
            assert code == 550 and b"5.1.1" in text, (code, text)
        assert has_subject(store, "user1", "ldap-one")
        assert has_subject(store, "user2", "ldap-one")

    def test_auth_by_bind():
        with smtplib.SMTP("127.0.0.1", mtad.sub_port) as c:
            c.starttls(context=tls_client_ctx())
            c.login("user3", "user3")
            c.sendmail(f"user3@{DOMAIN}", [f"user4@{DOMAIN}"], msg("ldap-auth"))
        assert has_subject(store, "user4", "ldap-auth")

    def test_workers_share_the_login_cache():
        user = "user6"
        tmp2 = os.path.join(TMP, "shared")
        os.makedirs(tmp2)
        m2 = Mtad(MTAD, tmp2, SLAPD.directory(timeout="2s", auth_cache_ttl="1h"))
        m2.start()
        stopped = [False]
        line = re.compile(r"\[(\d+)\].* smtp auth addr=\S+ user=" + user + r" result=(\S+)")

        def auths():
            with open(m2.log, errors="replace") as f:
                return [m.groups() for m in map(line.search, f) if m is not None]
        try:
            with smtplib.SMTP("127.0.0.1", m2.sub_port, timeout=30) as c:
                c.starttls(context=tls_client_ctx())
                c.login(user, user)  # asks slapd, cached
            assert wait_for(lambda: len(auths()) == 1, 10, "the first AUTH logged")
            first = auths()[0]
            assert first[1] == "ok", first
            SLAPD.stop(check=True)
            stopped[0] = True
            # with the directory down, only a cache answers; until both workers have
            for _ in range(10):
                conns = [smtplib.SMTP("127.0.0.1", m2.sub_port, timeout=30) for _ in range(6)]
                for c in conns:
                    c.starttls(context=tls_client_ctx())
                    c.login(user, user)
                for c in conns:
                    c.quit()
                if len({pid for pid, _ in auths()}) >= 2:
                    break
            seen = auths()
            assert all(res == "ok" for _, res in seen), seen
            assert len({pid for pid, _ in seen}) == 2, f"every AUTH went to one worker: {seen}"
        finally:
            m2.stop()
            if stopped[0]:
                SLAPD.restart()

    def test_directory_down_then_back():
        SLAPD.stop(check=True)
        with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
            c.ehlo("c")
            c.docmd("MAIL FROM:<x@example.org>")
            code, text = c.docmd(f"RCPT TO:<user5@{DOMAIN}>")
            assert code == 451 and b"4.3.0" in text, (code, text)
        # what was accepted before the outage is still there
        assert has_subject(store, "user1", "ldap-one")
        SLAPD.restart()

        def flows():
            try:
                with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
                    c.sendmail("x@example.org", [f"user5@{DOMAIN}"], msg("ldap-back"))
                return True
            except smtplib.SMTPRecipientsRefused:
                time.sleep(0.5)
                return False
        wait_for(flows, 60, "mail to flow after slapd restarted")
        assert has_subject(store, "user5", "ldap-back")

    def test_sighup_ttls():
        user, fresh, later = "user7", "late1", "late2"
        tmp3 = os.path.join(TMP, "sighup")
        os.makedirs(tmp3)
        m3 = Mtad(MTAD, tmp3, SLAPD.directory(timeout="2s", auth_cache_ttl="2h",
                                              negative_cache_ttl="2h"))
        m3.start()
        try:
            # 2h: the directory's changes are not seen while the entries are cached
            assert auth_ok(m3.sub_port, user, user)
            assert rcpt_code(m3.port, fresh) == 550
            SLAPD.set_password(user, "second7")
            add_user(fresh)
            for _ in range(4):  # either worker: the cache is the daemon's
                assert auth_ok(m3.sub_port, user, user), "the cached login was not kept"
                assert rcpt_code(m3.port, fresh) == 550, "the cached no-such-user was not kept"

            m3.sections["directory"].update(auth_cache_ttl="1s", negative_cache_ttl="1s")
            m3.write_conf()
            before = len(m3.logtext())
            m3.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: m3.logtext()[before:].count("config reloaded") >= 2, 30,
                     "every worker reloaded")
            # the reload emptied the cache: the directory answers
            assert auth_ok(m3.sub_port, user, "second7")
            assert rcpt_code(m3.port, fresh) == 250
            # what is cached from now on is kept 1s: a change wins without another SIGHUP
            assert rcpt_code(m3.port, later) == 550
            SLAPD.set_password(user, "third7")
            add_user(later)

            def old_refused():
                if auth_ok(m3.sub_port, user, "second7"):
                    time.sleep(0.3)
                    return False
                return True

            def later_known():
                if rcpt_code(m3.port, later) == 550:
                    time.sleep(0.3)
                    return False
                return True
            wait_for(old_refused, 60, "the old password refused (the 2h TTL kept?)")
            assert auth_ok(m3.sub_port, user, "third7")
            wait_for(later_known, 60, "the added user known (the 2h negative TTL kept?)")
        finally:
            m3.stop()

    return run_suite(mtad, [test_lookup_and_alias, test_auth_by_bind,
                            test_workers_share_the_login_cache, test_sighup_ttls,
                            test_directory_down_then_back], TMP, cleanup=[SLAPD.stop])


if __name__ == "__main__":
    sys.exit(main())
