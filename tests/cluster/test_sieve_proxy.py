#!/usr/bin/env python3
"""test_sieve_proxy.py — managesieved as a front (#25; tests/cluster/heroncluster.py: two
store hosts on 127.0.0.2/.3, each with its own managesieved, and a front managesieved on
127.0.0.4 with [sieve] proxy = yes, one real slapd). Without proxy a store host refers a user
homed on the other host (NO (REFERRAL "sieve://HOST")). Through the front (STARTTLS,
AUTHENTICATE PLAIN; a Python client and sieve-connect) PUTSCRIPT and SETACTIVE land on the
user's store host, whose mtad then files mail with that script; SCRAM-SHA-256 checked on the
front (a secret in the directory, [directory] auth_mode lookup there) logs in the same way;
a 600 KB script goes through the relay and back. A wrong password is refused by the front; a
store host that is down gives its users NO (TRYLATER) while the other host's users are
served; one that answers garbage is cut off the same way; a proxy login from an address not
in [sieve] proxy_trusted, or with a wrong secret, is refused by the store host. mailctl kick
on the front closes a relayed session. A SIGHUP of the front applies a changed [sieve]
proxy_hosts to the logins from then on. A user moved away (mailctl user move --finish: a
tombstone on the old host) whom the directory still homes there (a stale replica) is referred
to the new host by the old one, and gets NO (TRYLATER) through the front; no account is made.
The front's connection to the store host is TLS ([sieve] proxy_tls = starttls, the store
hosts' certificates verified against the cluster's CA file; the front logs the TLS version
of the leg, tls=no with proxy_tls = none), and a CA that did not sign
them gives NO (TRYLATER) with the TLS failure in the front's log.

  test_sieve_proxy.py SOURCE_ROOT MTAD IMAPD STORE_PEEK MANAGESIEVED MAILCTL"""
import base64
import imaplib
import os
import shutil
import signal
import smtplib
import socket
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heroncluster import FRONT_ADDR, PROXY_SECRET, Cluster, listener  # noqa: E402
from heronlib import (DOMAIN, ScramClient, assert_eq, assert_in, free_port,  # noqa: E402
                      gsasl_mkpasswd, run_main, run_tests, tls_client_ctx, wait_for)

ROOT, MTAD, IMAPD, PEEK, MSD, MAILCTL = sys.argv[1:7]
SIEVE_CONNECT = shutil.which("sieve-connect")
TMP = tempfile.mkdtemp(prefix="heron-cluster-sieve-")
GARBAGE_ADDR = "127.0.0.5"


class Sieve:
    """A small ManageSieve client (RFC 5804): responses as (final line, lines before)."""

    def __init__(self, addr, port, source=None):
        self.sock = socket.create_connection((addr, port), timeout=20,
                                             source_address=(source, 0) if source else None)
        self.f = self.sock.makefile("rb")
        self.greeting = self.response()

    def response(self):
        lines = []
        while True:
            line = self.f.readline()
            assert line, f"connection closed after {lines}"
            line = line.rstrip(b"\r\n").decode()
            if line.split(" ", 1)[0] in ("OK", "NO", "BYE"):
                return line, lines
            lines.append(line)

    def cmd(self, text):
        self.sock.sendall(text.encode() + b"\r\n")
        return self.response()

    def starttls(self, cert):
        final, _ = self.cmd("STARTTLS")
        assert final.startswith("OK"), final
        self.sock = tls_client_ctx(cert).wrap_socket(self.sock, server_hostname=FRONT_ADDR)
        self.f = self.sock.makefile("rb")
        return self.response()

    def plain(self, user, password, authz=""):
        b64 = base64.b64encode(f"{authz}\0{user}\0{password}".encode()).decode()
        return self.cmd(f'AUTHENTICATE "PLAIN" "{b64}"')[0]

    def putscript(self, name, src):
        data = src.encode()
        return self.cmd(f'PUTSCRIPT "{name}" {{{len(data)}+}}\r\n{src}')[0]

    def close(self):
        try:
            self.cmd("LOGOUT")
        except (OSError, AssertionError):
            pass
        self.sock.close()


def garbage_server():
    """A server on GARBAGE_ADDR answering garbage to every connection; (port, stop)."""
    srv, port = listener(GARBAGE_ADDR)
    srv.settimeout(0.5)
    stop = threading.Event()

    def run():
        while not stop.is_set():
            try:
                s, _ = srv.accept()
            except OSError:
                continue
            try:
                s.sendall(b"\x00\xffHELLO garbage\r\n" * 3)
                s.recv(4096)
            except OSError:
                pass
            s.close()
        srv.close()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return port, lambda: (stop.set(), t.join(5))


def main():
    gport, gstop = garbage_server()
    # the front checks SCRAM itself (auth_mode lookup: the secret from the directory)
    cl = Cluster(ROOT, MTAD, IMAPD, PEEK, TMP, users=8, front=True, msd=MSD, front_imapd=False,
                 front_directory={"auth_mode": "lookup", "scram": "yes"},
                 front_sieve_extra=[f"bad.heron.test={GARBAGE_ADDR}:{gport}"])
    daemons = []
    hosts = []
    front = None

    def front_login(user, password=None):
        c = Sieve(FRONT_ADDR, front.sieve_port)
        c.starttls(front.cert)
        return c, c.plain(user, password or user)

    def test_store_host_refers_a_user_homed_elsewhere():
        h1 = hosts[0]
        c = Sieve(h1.addr, h1.sieve_port)
        final = c.plain("user2", "user2")
        assert_eq(final, 'NO (REFERRAL "sieve://store2.heron.test") '
                         '"Your scripts are on store2.heron.test"')
        # not logged in: the session goes on, and the host's own user is served
        final, _ = c.cmd("LISTSCRIPTS")
        assert final.startswith("NO"), final
        assert_eq(c.plain("user1", "user1"), 'OK "Logged in"')
        c.close()
        assert_in("managesieve refer user=user2 host=store2.heron.test", h1.msd.logtext())

    def test_putscript_through_front_files_mail_on_home_host():
        h1, h2 = hosts
        im = imaplib.IMAP4(h2.addr, h2.imap_port, timeout=20)
        im.login("user2", "user2")
        im.create("Proxied")
        im.logout()
        c, final = front_login("user2")
        assert_eq(final, 'OK "Logged in"')
        src = ('require "fileinto";\r\n'
               'if header :contains "subject" "via-front" { fileinto "Proxied"; }\r\n')
        assert_eq(c.putscript("front", src), "OK")
        assert_eq(c.cmd('SETACTIVE "front"')[0], "OK")
        final, lines = c.cmd("LISTSCRIPTS")
        assert_eq((final, lines), ("OK", ['"front" ACTIVE']))
        c.close()
        assert_in("user=user2 result=ok via=proxy", h2.msd.logtext())
        assert "user=user2 result=ok via=proxy" not in h1.msd.logtext()
        with smtplib.SMTP(h1.addr, h1.smtp_port, timeout=30) as s:  # LMTP on to store2
            assert_eq(s.sendmail("x@example.org", [f"user2@{DOMAIN}"],
                                 "From: <x@example.org>\r\nSubject: sent via-front\r\n"
                                 "\r\nbody\r\n"), {})

        def filed():
            im = imaplib.IMAP4(h2.addr, h2.imap_port, timeout=20)
            im.login("user2", "user2")
            typ, data = im.select("Proxied", readonly=True)
            im.logout()
            return typ == "OK" and int(data[0]) == 1
        wait_for(filed, 30, "the message filed into Proxied on store2 by the script")

    def test_sieve_connect_through_front():
        if SIEVE_CONNECT is None:
            print("sieve-connect not installed: skipped")
            return
        path = os.path.join(TMP, "sc.sieve")
        with open(path, "w") as f:
            f.write('require "fileinto";\nif header :is "x-a" "b" { fileinto "INBOX"; }\n')

        def sc(*args):
            r = subprocess.run([SIEVE_CONNECT, "-s", FRONT_ADDR, "-p", str(front.sieve_port),
                                "-u", "user3", "--passwordfd", "0", "--notlsverify", *args],
                               input="user3\n", capture_output=True, text=True, timeout=90,
                               cwd=TMP)
            return r.returncode, r.stdout + r.stderr
        rc, text = sc("--localsieve", path, "--remotesieve", "sc", "--upload")
        assert rc == 0, text
        rc, text = sc("--remotesieve", "sc", "--activate")
        assert rc == 0, text
        # user3 is homed on store1: the script is there
        c = Sieve(hosts[0].addr, hosts[0].sieve_port)
        assert_eq(c.plain("user3", "user3"), 'OK "Logged in"')
        assert_eq(c.cmd("LISTSCRIPTS"), ("OK", ['"sc" ACTIVE']))
        c.close()

    def test_scram_through_front():
        # user6 (store2) holds a SCRAM secret: the front checks it, the store host gets PLAIN
        cl.ldapmodify("user6", "userPassword", gsasl_mkpasswd("user6"))
        c = Sieve(FRONT_ADDR, front.sieve_port)
        _, caps = c.starttls(front.cert)
        assert_in('"SASL" "PLAIN SCRAM-SHA-256 SCRAM-SHA-256-PLUS"', caps)
        sc = ScramClient("user6", "user6")
        c.sock.sendall(f'AUTHENTICATE "SCRAM-SHA-256" "{sc.first()}"\r\n'.encode())
        line = c.f.readline().rstrip(b"\r\n").decode()
        assert line.startswith('"'), line
        c.sock.sendall(('"%s"\r\n' % sc.final(line[1:-1])).encode())
        final, _ = c.response()
        assert final.startswith('OK (SASL "'), final
        assert sc.final_ok(final[len('OK (SASL "'):final.index('")')]), final
        assert_eq(c.cmd("LISTSCRIPTS"), ("OK", []))
        c.close()
        assert_in("user=user6 result=ok via=proxy", hosts[1].msd.logtext())

    def test_large_script_relayed():
        # a script of about 600 KB (literal, non-synchronizing) through the relay both ways
        c, final = front_login("user4")
        assert_eq(final, 'OK "Logged in"')
        src = "".join(f"# line {i:06d} {'x' * 40}\r\n" for i in range(12000)) + "keep;\r\n"
        assert_eq(c.putscript("big", src), "OK")
        c.sock.sendall(b'GETSCRIPT "big"\r\n')
        head = c.f.readline()
        assert_eq(head, b"{%d}\r\n" % len(src))
        assert_eq(c.f.read(len(src)).decode(), src)
        assert_eq(c.response()[0], "OK")
        c.close()

    def test_kick_closes_relayed_session():
        c, final = front_login("user4")
        assert_eq(final, 'OK "Logged in"')
        assert_eq(c.cmd("NOOP")[0], 'OK "Done"')
        r = subprocess.run([MAILCTL, "-c", front.conf, "kick", "user4"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r
        assert_eq(c.f.readline(), b"")  # closed, no BYE inside the store host's bytes
        c.sock.close()
        assert_in("managesieve close user=user4 reason=kicked", front.msd.logtext())

    def test_wrong_password_refused_by_front():
        c, final = front_login("user2", "wrong")
        assert_eq(final, 'NO "Authentication failed"')
        c.close()
        c = Sieve(FRONT_ADDR, front.sieve_port)
        final = c.plain("user2", "user2")  # allow_plaintext_auth = no on the front
        assert final.startswith("NO (ENCRYPT-NEEDED)"), final
        c.close()

    def test_store_host_down_others_unaffected():
        h2 = hosts[1]
        h2.msd.stop()
        try:
            c, final = front_login("user2")
            assert final.startswith("NO (TRYLATER)"), final
            c.close()
            c, final = front_login("user1")
            assert_eq(final, 'OK "Logged in"')
            assert_eq(c.cmd("NOOP")[0], 'OK "Done"')
            c.close()
        finally:
            h2.msd.start()
        c, final = front_login("user2")
        assert_eq(final, 'OK "Logged in"')
        c.close()

    def test_garbage_store_host_cut_off():
        cl.ldapmodify("user8", "mailHost", "bad.heron.test")
        c, final = front_login("user8")
        assert final.startswith("NO (TRYLATER)"), final
        # the session is still the front's: another login works
        assert_eq(c.plain("user1", "user1"), 'OK "Logged in"')
        c.close()
        assert_in("user=user8 host=bad.heron.test result=fail", front.msd.logtext())

    def reload_front():
        msd = front.msd
        n = msd.logtext().count("worker 0 config reloaded")
        msd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: msd.logtext().count("worker 0 config reloaded") > n, 10,
                 "the front worker's reload")

    def set_front(key, value):
        """[sieve] key = value in the front's heron.conf, applied by a SIGHUP."""
        front.set_key(key, value)
        reload_front()

    def proxy_oks(user, host):
        """The front's log lines of user's proxy logins at host that went through."""
        return [line for line in front.msd.logtext().splitlines()
                if f"managesieve proxy user={user} host={host} " in line and "result=ok" in line]

    def listscripts(user):
        c, final = front_login(user)
        assert_eq(final, 'OK "Logged in"')
        assert_eq(c.cmd("LISTSCRIPTS")[0].split(" ", 1)[0], "OK")
        c.close()

    def test_leg_is_tls_verified():
        # the front finished a TLS handshake with the store host (the version it logs is
        # the TLS session's) and the session works; with proxy_tls = none it logs tls=no
        listscripts("user1")
        ok = proxy_oks("user1", "store1.heron.test")
        assert ok and all(" tls=TLSv1." in line for line in ok), ok
        try:
            set_front("proxy_tls", "none")
            n = len(proxy_oks("user2", "store2.heron.test"))
            listscripts("user2")
            ok = proxy_oks("user2", "store2.heron.test")[n:]
            assert ok and all(" tls=no " in line for line in ok), ok
        finally:
            set_front("proxy_tls", "starttls")

    def test_wrong_ca_refused():
        # the store hosts' certificates do not chain to the front's own: NO (TRYLATER)
        try:
            set_front("proxy_ca_file", front.cert)
            for user, host in (("user1", "store1"), ("user2", "store2")):
                c, final = front_login(user)
                assert final.startswith("NO (TRYLATER)"), final
                c.close()
                assert_in(f"managesieve proxy user={user} host={host}.heron.test result=fail "
                          f"reason=\"TLS with 127.0.0.", front.msd.logtext())
            assert_in("certificate verify failed", front.msd.logtext())
        finally:
            set_front("proxy_ca_file", cl.ca)
        c, final = front_login("user1")  # the right CA again
        c.close()
        assert_eq(final, 'OK "Logged in"')

    def test_sighup_rereads_proxy_hosts():
        # store2's entry in the front's map moved to a port nobody listens on: after a SIGHUP
        # store2's users get NO (TRYLATER), after the next (the entry back) they log in again
        h2 = hosts[1]
        with open(front.conf) as f:
            good = f.read()
        entry = f"{h2.name}={h2.addr}:{h2.sieve_port}"
        dead = f"{h2.name}={h2.addr}:{free_port()}"
        assert_in(entry, good)
        try:
            with open(front.conf, "w") as f:
                f.write(good.replace(entry, dead))
            reload_front()
            c, final = front_login("user2")
            assert final.startswith("NO (TRYLATER)"), final
            c.close()
            c, final = front_login("user1")  # store1's users: the entry of before
            assert_eq(final, 'OK "Logged in"')
            c.close()
            text = front.msd.logtext()
            assert_in("managesieved reload: [sieve] proxy_hosts = ", text)
            assert "[sieve] proxy_hosts changed: it takes effect only" not in text, text
        finally:
            with open(front.conf, "w") as f:
                f.write(good)
            reload_front()
        c, final = front_login("user2")
        assert_eq(final, 'OK "Logged in"')
        c.close()

    def test_forged_proxy_login_refused():
        h2 = hosts[1]
        # from an address not in proxy_trusted, with the right secret
        c = Sieve(h2.addr, h2.sieve_port, source=GARBAGE_ADDR)
        assert_eq(c.plain("heron-proxy", PROXY_SECRET, authz=f"user2@{DOMAIN}"),
                  'NO "Cannot act as another user"')
        c.close()
        # from the trusted address, with a wrong secret
        c = Sieve(h2.addr, h2.sieve_port)
        assert_eq(c.plain("heron-proxy", "guess", authz=f"user2@{DOMAIN}"),
                  'NO "Cannot act as another user"')
        # and the right one from there works
        assert_eq(c.plain("heron-proxy", PROXY_SECRET, authz=f"user2@{DOMAIN}"),
                  'OK "Logged in"')
        c.close()

    def test_moved_user_referred_by_the_old_host():
        h1, h2 = hosts
        run = [MAILCTL, "-c", h1.conf]
        dn = f"dn: uid=user7,{cl.slapd.env['LDAP_PEOPLE']}\nchangetype: modify\n"
        assert_eq(subprocess.run(run + ["user", "add", "user7"], capture_output=True,
                                 timeout=60).returncode, 0)
        for more in ([], ["--finish"]):  # auth_cache_ttl is 0 s: --finish at once
            r = subprocess.run(run + ["user", "move", "user7", h2.name, "--to", h2.conf,
                                      *more], capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, (more, r.stdout, r.stderr)
        # the directory says store1 again, as a stale replica would
        cl.slapd.change("ldapmodify", dn + f"replace: mailHost\nmailHost: {h1.name}\n")
        try:
            c = Sieve(h1.addr, h1.sieve_port)
            assert_eq(c.plain("user7", "user7"),
                      f'NO (REFERRAL "sieve://{h2.name}") "Your scripts are on {h2.name}"')
            c.close()
            c, final = front_login("user7")  # relayed to store1, which refers it
            c.close()
            assert final.startswith("NO (TRYLATER)"), final
            assert_in(f"managesieve refer user=user7 host={h2.name} reason=moved",
                      h1.msd.logtext())
            r = subprocess.run(run + ["user", "show", "user7"], capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 67 and f"moved to {h2.name}" in r.stderr, r.stderr
        finally:
            cl.slapd.change("ldapmodify", dn + f"replace: mailHost\nmailHost: {h2.name}\n")
        c, final = front_login("user7")  # the directory right again: store2 serves it
        c.close()
        assert_eq(final, 'OK "Logged in"')

    def body():
        nonlocal front
        with cl:
            daemons.extend(cl.daemons())
            hosts.extend(cl.hosts)
            front = cl.front
            return run_tests([test_store_host_refers_a_user_homed_elsewhere,
                              test_putscript_through_front_files_mail_on_home_host,
                              test_sieve_connect_through_front,
                              test_scram_through_front,
                              test_large_script_relayed,
                              test_kick_closes_relayed_session,
                              test_wrong_password_refused_by_front,
                              test_store_host_down_others_unaffected,
                              test_forged_proxy_login_refused,
                              test_sighup_rereads_proxy_hosts,
                              test_leg_is_tls_verified,
                              test_wrong_ca_refused,
                              test_moved_user_referred_by_the_old_host,
                              test_garbage_store_host_cut_off])

    return run_main(body, TMP, daemons, cleanup=(gstop,), tail=20000)


if __name__ == "__main__":
    sys.exit(main())
