#!/usr/bin/env python3
"""test_ldap.py — mtad against the real slapd of scripts/ldap: recipients and aliases looked
up in the directory, AUTH by bind, and a directory outage: RCPT gets 451 4.3.0 (never 550),
mail accepted before is kept, and mail flows again once slapd is back. The login cache is the
daemon's (#23): with slapd stopped, a login cached by one worker is answered by both.

  test_ldap.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import re
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

    return run_suite(mtad, [test_lookup_and_alias, test_auth_by_bind,
                            test_workers_share_the_login_cache,
                            test_directory_down_then_back], TMP, cleanup=[SLAPD.stop])


if __name__ == "__main__":
    sys.exit(main())
