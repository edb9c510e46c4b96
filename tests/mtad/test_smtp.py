#!/usr/bin/env python3
"""test_smtp.py — mtad end to end with Python smtplib and raw sockets, users-file directory:
local delivery stored once, pipelining, SIZE, BDAT, SMTPUTF8, 8-bit bodies, open-relay
attempts, AUTH on submission (with TLS made at test time), smuggling, STARTTLS injection, LMTP,
remote delivery to a relay target with a 451 retry and a 550 bounce (DSN).

  test_smtp.py SOURCE_ROOT MTAD STORE_PEEK"""
import email
import os
import smtplib
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, RelayTarget, Store, root_warning_count,  # noqa: E402
                      run_suite, wait_for, write_users)
from heronlib import SmtpRaw as Raw, tls_client_ctx as tls_ctx  # noqa: E402

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-")
USERS = [f"user{i}" for i in range(1, 6)] + ["tiny"]
relay = RelayTarget()
write_users(os.path.join(TMP, "users"), USERS, {"tiny": "1k"})
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")})
tls_relay = RelayTarget(tls=(os.path.join(TMP, "cert.pem"), os.path.join(TMP, "key.pem")))
mtad.set_keys({"transport_map": f"remote.test=127.0.0.1:{relay.port},"
                                f"tls.test=127.0.0.1:{tls_relay.port}"})
store = Store(PEEK, mtad.conf)


def msg(subject, body="Hello.\r\n", extra=""):
    return (f"From: <sender@{DOMAIN}>\r\nTo: <someone@{DOMAIN}>\r\nSubject: {subject}\r\n"
            f"Message-ID: <{subject}@test>\r\n{extra}\r\n{body}")


def inbox_count(user):
    return len(store.inbox(user))


def find_subject(user, subject):
    for uid, _blob, _size in store.inbox(user):
        if f"Subject: {subject}\r\n".encode() in store.body(user, uid):
            return uid
    return None


def test_local_three_recipients_stored_once():
    with smtplib.SMTP("127.0.0.1", mtad.port) as c:
        c.ehlo("client.test")
        refused = c.sendmail("sender@example.org", [f"user1@{DOMAIN}", f"user2@{DOMAIN}",
                                                  f"alias.user3@{DOMAIN}"], msg("three"))
        assert refused == {}, refused
    blobs = set()
    for u in ("user1", "user2", "user3"):
        uid = find_subject(u, "three")
        assert uid is not None, f"{u} did not get the message"
        body = store.body(u, uid)
        assert body.startswith(b"Received: from client.test"), body[:200]
        assert b"by mx.heron.test (Heron) with ESMTP id " in body
        blobs.update(b for (i, b, _s) in store.inbox(u) if i == uid)
    assert len(blobs) == 1, f"stored more than once: {blobs}"


def test_pipelining():
    r = Raw(mtad.port)
    r.send("EHLO client.test\r\n")
    code, text = r.reply()
    assert code == 250 and "PIPELINING" in text and "CHUNKING" in text and "SIZE" in text
    r.send(f"MAIL FROM:<p@example.org>\r\nRCPT TO:<user4@{DOMAIN}>\r\nRCPT TO:<nobody@{DOMAIN}>"
           f"\r\nRCPT TO:<user5@{DOMAIN}>\r\nDATA\r\n")
    codes = [c for c, _t in r.replies(5)]
    assert codes == [250, 250, 550, 250, 354], codes
    r.send(msg("pipelined") + "\r\n.\r\nMAIL FROM:<>\r\nRCPT TO:<user4@heron.test>\r\nRSET\r\n"
           "NOOP\r\nQUIT\r\n")
    codes = [c for c, _t in r.replies(6)]
    assert codes == [250, 250, 250, 250, 250, 221], codes
    r.close()
    assert find_subject("user4", "pipelined") and find_subject("user5", "pipelined")


def test_size_limits():
    r = Raw(mtad.port)
    r.send("EHLO client.test\r\nMAIL FROM:<a@example.org> SIZE=1000000\r\n")
    r.reply()
    code, text = r.reply()
    assert code == 552 and "5.3.4" in text, text
    # no SIZE given: the limit holds during DATA; the session goes on afterwards
    r.send(f"MAIL FROM:<a@example.org>\r\nRCPT TO:<user1@{DOMAIN}>\r\nDATA\r\n")
    assert [c for c, _ in r.replies(3)] == [250, 250, 354]
    big = "x" * 998 + "\r\n"
    r.send(msg("toobig", big * 80) + ".\r\n")
    code, text = r.reply()
    assert code == 552 and "5.3.4" in text, text
    r.send("NOOP\r\n")
    assert r.reply()[0] == 250
    r.close()
    assert find_subject("user1", "toobig") is None


def test_bdat():
    r = Raw(mtad.port)
    r.send(f"EHLO c\r\nMAIL FROM:<b@example.org>\r\nRCPT TO:<user2@{DOMAIN}>\r\n")
    assert [c for c, _ in r.replies(3)] == [250, 250, 250]
    m = msg("bdat", "line one\r\n.starts with a dot\r\n").encode()
    half = len(m) // 2
    r.send(b"BDAT %d\r\n" % half + m[:half])
    assert r.reply()[0] == 250
    r.send(b"BDAT %d LAST\r\n" % (len(m) - half) + m[half:])
    code, text = r.reply()
    assert code == 250 and "queued as" in text, text
    # BDAT outside a transaction: refused, and its chunk is read and dropped
    r.send(b"BDAT 12\r\nRSET\r\nRSET\r\nNOOP\r\n")
    assert [c for c, _ in r.replies(2)] == [503, 250]
    r.close()
    uid = find_subject("user2", "bdat")
    assert uid is not None
    assert b"\r\n.starts with a dot\r\n" in store.body("user2", uid)  # BDAT: no unstuffing


def test_smtputf8_and_8bit():
    with smtplib.SMTP("127.0.0.1", mtad.port) as c:
        c.ehlo("c")
        assert c.has_extn("smtputf8") and c.has_extn("8bitmime")
        body = msg("utf8", "caf\u00e9 \u2603\r\n").encode()
        c.sendmail("j\u00f6rg@example.org", [f"user3@{DOMAIN}"], body,
                   mail_options=["SMTPUTF8", "BODY=8BITMIME"])
        # a UTF-8 address without SMTPUTF8 is refused
        code, text = c.docmd("MAIL FROM:<j\u00f6rg@example.org>")
        assert code == 553 and "5.6.7" in text.decode(), (code, text)
    uid = find_subject("user3", "utf8")
    assert uid is not None
    assert "caf\u00e9 \u2603".encode() in store.body("user3", uid)


def test_open_relay_refused():
    tricks = ["victim@example.com", "victim%example.com@" + DOMAIN,
              "example.com!victim@" + DOMAIN, '"victim@example.com"@' + DOMAIN,
              "@" + DOMAIN + ":victim@example.com", "victim@example.com.",
              "victim@[192.0.2.1]", "user1@" + DOMAIN + ".example.com"]
    with smtplib.SMTP("127.0.0.1", mtad.port) as c:
        c.ehlo("c")
        for t in tricks:
            c.rset()
            assert c.docmd("MAIL FROM:<x@example.org>")[0] == 250
            code, text = c.docmd(f"RCPT TO:<{t}>")
            assert code in (550, 554) and b"5.7.1" in text, (t, code, text)
        c.rset()
        c.docmd("MAIL FROM:<x@example.org>")
        code, text = c.docmd(f"RCPT TO:<nobody@{DOMAIN}>")
        assert code == 550 and b"5.1.1" in text, (code, text)
        code, _ = c.docmd(f"RCPT TO:<user1@{DOMAIN}>")
        assert code == 250
    assert not relay.messages


def auth_session(port, user, password):
    c = smtplib.SMTP("127.0.0.1", port, timeout=30)
    c.ehlo("c")
    assert not c.has_extn("auth"), "AUTH offered before TLS"
    c.starttls(context=tls_ctx())
    c.ehlo("c")
    assert "PLAIN" in c.esmtp_features.get("auth", "")
    c.login(user, password)
    return c


def test_submission_auth_relay():
    with smtplib.SMTP("127.0.0.1", mtad.sub_port) as c:
        c.ehlo("c")
        code, text = c.docmd(f"MAIL FROM:<user1@{DOMAIN}>")
        assert code == 530, (code, text)
    c = smtplib.SMTP("127.0.0.1", mtad.sub_port)
    c.ehlo("c")
    c.starttls(context=tls_ctx())
    c.ehlo("c")
    try:
        c.login("user1", "wrong")
        raise AssertionError("bad password accepted")
    except smtplib.SMTPAuthenticationError as e:
        assert e.smtp_code == 535
    c.quit()
    with auth_session(mtad.sub_port, "user1", "user1") as c:
        c.sendmail(f"user1@{DOMAIN}", ["friend@remote.test"], msg("relayed"))
    wait_for(lambda: any(b"Subject: relayed" in m[2] for m in relay.messages), 30,
             "relayed message at the relay target")


def test_relay_uses_starttls():
    with auth_session(mtad.sub_port, "user2", "user2") as c:
        c.sendmail(f"user2@{DOMAIN}", ["a@tls.test", "b@tls.test"], msg("over-tls"))
    wait_for(lambda: tls_relay.messages, 30, "the message at the TLS relay target")
    mail, rcpts, data = tls_relay.messages[0]
    assert sorted(rcpts) == ["a@tls.test", "b@tls.test"], rcpts  # one transaction
    assert b"Subject: over-tls" in data
    assert tls_relay.tls_messages == 1, "relayed without TLS although STARTTLS was offered"


def test_submissions_implicit_tls():
    with smtplib.SMTP_SSL("127.0.0.1", mtad.subs_port, context=tls_ctx()) as c:
        c.ehlo("c")
        c.login("user2", "user2")
        c.sendmail(f"user2@{DOMAIN}", [f"user1@{DOMAIN}"], msg("implicit-tls"))
    uid = find_subject("user1", "implicit-tls")
    assert uid is not None
    assert b"with ESMTPSA" in store.body("user1", uid)


def test_smuggling():
    """Bare-LF and bare-CR 'ends' followed by SMTP commands: never a second message."""
    before5 = inbox_count("user5")
    for variant in (b"\n.\n", b"\r.\r", b"\r\n.\n", b"\n.\r\n", b"\r.\r\n"):
        r = Raw(mtad.port)
        r.send(f"EHLO c\r\nMAIL FROM:<s@example.org>\r\nRCPT TO:<user4@{DOMAIN}>\r\nDATA\r\n")
        assert [c for c, _ in r.replies(4)] == [250, 250, 250, 354]
        smuggled = (f"MAIL FROM:<evil@example.org>\r\nRCPT TO:<user5@{DOMAIN}>\r\nDATA\r\n"
                    + msg("smuggled")).encode()
        r.send(msg("carrier").encode() + variant + smuggled + b"\r\n.\r\n")
        code, text = r.reply()
        # bare_lf = reject: refused as a whole; either way one reply for one message
        assert code == 554 and "5.6.11" in text, (variant, code, text)
        r.send("QUIT\r\n")
        assert r.reply()[0] == 221
        r.close()
    assert inbox_count("user5") == before5
    assert find_subject("user5", "smuggled") is None


def test_starttls_injection():
    r = Raw(mtad.port)
    r.send("EHLO c\r\n")
    r.reply()
    # the MAIL pipelined in plaintext after STARTTLS must be dropped
    r.send("STARTTLS\r\nMAIL FROM:<inject@example.org>\r\n")
    code, _ = r.reply()
    assert code == 220
    t = tls_ctx().wrap_socket(r.s)
    f = t.makefile("rb")
    # state was reset: MAIL without a new EHLO is out of sequence
    t.sendall(b"MAIL FROM:<after@heron.test>\r\n")
    line = f.readline()
    assert line.startswith(b"503"), line
    t.sendall(b"EHLO c\r\n")
    lines = []
    while True:
        line = f.readline()
        lines.append(line)
        if line[3:4] != b"-":
            break
    assert lines[0].startswith(b"250") and not any(b"STARTTLS" in x for x in lines)
    t.sendall(b"QUIT\r\n")
    assert f.readline().startswith(b"221")
    t.close()


def test_lmtp():
    r = Raw(mtad.lmtp_port)
    assert r.greeting[0] == 220 and "LMTP" in r.greeting[1]
    r.send("EHLO c\r\n")
    assert r.reply()[0] == 500  # LMTP speaks LHLO
    r.send(f"LHLO c\r\nMAIL FROM:<s@{DOMAIN}>\r\nRCPT TO:<user1@{DOMAIN}>\r\n"
           f"RCPT TO:<user2@{DOMAIN}>\r\nRCPT TO:<x@remote.test>\r\nDATA\r\n")
    codes = [c for c, _ in r.replies(6)]
    assert codes == [250, 250, 250, 250, 554, 354], codes  # LMTP never relays
    r.send(msg("lmtp") + ".\r\n")
    replies = r.replies(2)  # one per accepted recipient (RFC 2033)
    assert [c for c, _ in replies] == [250, 250], replies
    assert "user1@" in replies[0][1] and "user2@" in replies[1][1]
    r.send("QUIT\r\n")
    assert r.reply()[0] == 221
    r.close()
    assert find_subject("user1", "lmtp") and find_subject("user2", "lmtp")
    # the same over the unix socket
    r = Raw(mtad.lmtp_path)
    r.send(f"LHLO c\r\nMAIL FROM:<s@{DOMAIN}>\r\nRCPT TO:<user3@{DOMAIN}>\r\nDATA\r\n")
    assert [c for c, _ in r.replies(4)] == [250, 250, 250, 354]
    r.send(msg("lmtp-unix") + ".\r\nQUIT\r\n")
    assert [c for c, _ in r.replies(2)] == [250, 221]
    r.close()
    assert find_subject("user3", "lmtp-unix")


def test_retry_and_bounce():
    with auth_session(mtad.sub_port, "user3", "user3") as c:
        c.sendmail(f"user3@{DOMAIN}", ["temp1@remote.test", "reject1@remote.test"],
                   msg("retry-bounce"), mail_options=["ENVID=env+2B42", "RET=HDRS"],
                   rcpt_options=["NOTIFY=FAILURE", "ORCPT=rfc822;orig+2Bone@remote.test"])
    wait_for(lambda: any(b"Subject: retry-bounce" in m[2] and "temp1@remote.test" in m[1]
                         for m in relay.messages), 60, "delivery after a 451")
    assert relay.attempts["temp1@remote.test"] >= 2

    def dsn_uid():
        for uid, _b, _s in store.inbox("user3"):
            if b"multipart/report" in store.body("user3", uid):
                return uid
        return None
    uid = wait_for(dsn_uid, 60, "a DSN in the sender's INBOX")
    dsn = email.message_from_bytes(store.body("user3", uid))
    assert dsn.get_content_type() == "multipart/report"
    assert dsn.get_param("report-type") == "delivery-status"
    status = [p for p in dsn.walk() if p.get_content_type() == "message/delivery-status"]
    assert status, "no message/delivery-status part"
    text = status[0].as_string()
    assert "Final-Recipient: rfc822; reject1@remote.test" in text, text
    assert "Action: failed" in text and "Status: 5.1.1" in text, text
    assert "Original-Envelope-Id: env+42" in text, text
    assert "Original-Recipient: rfc822; orig+one@remote.test" in text, text
    assert not any("temp1" in p.as_string() for p in status)
    returned = [p for p in dsn.walk() if p.get_content_type() == "text/rfc822-headers"]
    assert returned and "Subject: retry-bounce" in returned[0].as_string()
    # NOTIFY=NEVER: no second DSN
    with auth_session(mtad.sub_port, "user3", "user3") as c:
        c.sendmail(f"user3@{DOMAIN}", ["reject3@remote.test"], msg("never"),
                   rcpt_options=["NOTIFY=NEVER"])
    wait_for(lambda: relay.attempts.get("reject3@remote.test"), 30, "the 550 for reject3")
    # the null sender never gets a bounce
    with auth_session(mtad.sub_port, "user3", "user3") as c:
        c.sendmail("", ["reject2@remote.test"], msg("null-sender"))
    wait_for(lambda: relay.attempts.get("reject2@remote.test"), 30, "the 550 for reject2")
    wait_for(lambda: not store.queue(), 30, "an empty queue")
    assert sum(1 for m in relay.messages if m[0] == "") == 0
    dsns = [u for u, _b, _s in store.inbox("user3")
            if b"multipart/report" in store.body("user3", u)]
    assert len(dsns) == 1, dsns


def test_utf8_not_downgraded():
    """The relay target lacks SMTPUTF8: the sender gets a 5.6.7 DSN, nothing is sent."""
    with auth_session(mtad.sub_port, "user4", "user4") as c:
        c.sendmail(f"user4@{DOMAIN}", ["\u00fcnicode@remote.test"], msg("no-downgrade"),
                   mail_options=["SMTPUTF8"])

    def dsn():
        for uid, _b, _s in store.inbox("user4"):
            body = store.body("user4", uid)
            if b"multipart/report" in body and b"Status: 5.6.7" in body:
                return True
        return False
    wait_for(dsn, 30, "a 5.6.7 DSN")
    assert not any(b"Subject: no-downgrade" in m[2] for m in relay.messages)


def test_partial_failure_requeued():
    """One recipient over quota, one fine: one 250, the full one waits in the queue."""
    with smtplib.SMTP("127.0.0.1", mtad.port) as c:
        refused = c.sendmail("x@example.org", [f"user5@{DOMAIN}", f"tiny@{DOMAIN}"],
                             msg("partial", "y" * 4000 + "\r\n"))
        assert refused == {}, refused
    assert find_subject("user5", "partial") is not None
    wait_for(lambda: any("tiny@heron.test" in q for q in store.queue()), 10,
             "the over-quota recipient in the queue")


def test_mail_loop_refused():
    received = "".join(f"Received: from hop{i}.test by x.test; Sun, 29 Nov 2026 12:00:00 +0000\r\n"
                       for i in range(101))
    with smtplib.SMTP("127.0.0.1", mtad.port) as c:
        try:
            c.sendmail("a@example.org", [f"user1@{DOMAIN}"], received + msg("loop"))
            raise AssertionError("a message with 101 Received: headers was accepted")
        except smtplib.SMTPDataError as e:
            assert e.smtp_code == 554 and b"5.4.6" in e.smtp_error, e


def test_root_warning_once():
    # started as root with [mtad] user empty: the master warns, once (not per worker)
    n = root_warning_count(mtad, "mtad")
    assert n == (1 if os.geteuid() == 0 else 0), mtad.logtext()[:2000]


def main():
    return run_suite(mtad, [test_root_warning_once, test_local_three_recipients_stored_once, test_pipelining,
                            test_size_limits, test_bdat, test_smtputf8_and_8bit,
                            test_open_relay_refused, test_submission_auth_relay,
                            test_relay_uses_starttls, test_submissions_implicit_tls,
                            test_smuggling,
                            test_starttls_injection, test_lmtp, test_retry_and_bounce,
                            test_utf8_not_downgraded, test_mail_loop_refused,
                            test_partial_failure_requeued], TMP,
                     cleanup=[relay.close, tls_relay.close])


if __name__ == "__main__":
    sys.exit(main())
