"""imapd end to end: SEARCH BODY/TEXT through the full-text index. A mailbox of generated
messages (more than one index segment) answers exactly what a scan of the same texts finds,
also in OR/NOT, UID SEARCH, ESEARCH, SORT and THREAD, after EXPUNGE and in a COPY's target;
a mailbox filled with [store] fts = no is searched by reading every message, then `mailctl
fts rebuild` indexes it and the answers stay the same.

Usage: test_imapd_fts.py IMAPD_BINARY DELIVER_BINARY"""
import json
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, ImapRaw as Raw  # noqa: E402
from heronlib import (after_test, assert_eq, assert_ge, assert_in, run_suite,  # noqa: E402
                      run_tests)

IMAPD = DELIVER = None
D = None  # the imapd of test_index_answers_as_a_scan

WORDS = None


def words():
    global WORDS
    if WORDS is None:
        rnd = random.Random(19)
        cons, vow = "bcdfghjklmnpqrstvwxz", "aeiouy"
        WORDS = ["".join(rnd.choice(cons) + rnd.choice(vow) for _ in range(rnd.randint(2, 4)))
                 for _ in range(300)]
    return WORDS


def corpus(n, seed):
    """n (subject, body) pairs of random words; a few in base64 or quoted-printable."""
    rnd = random.Random(seed)
    w = words()
    out = []
    for i in range(n):
        body = " ".join(w[min(int(rnd.paretovariate(1.2)) - 1, len(w) - 1)]
                        if rnd.random() < 0.5 else rnd.choice(w) for _ in range(40))
        out.append(("msg %d %s" % (i, rnd.choice(w)), body))
    return out


def render(i, subject, body):
    head = "From: u%d@heron.test\r\nSubject: %s\r\nMessage-ID: <%d@fts>\r\n" % (i, subject, i)
    if i % 7 == 3:
        import base64
        enc = base64.encodebytes(body.encode()).decode().replace("\n", "\r\n")
        return (head + "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
                "Content-Transfer-Encoding: base64\r\n\r\n" + enc).encode()
    return (head + "\r\n" + body + "\r\n").encode()


def truth(msgs, needle, text=False):
    """1-based positions of msgs whose body (TEXT: or subject) holds needle."""
    n = needle.lower()
    return [i + 1 for i, (s, b) in enumerate(msgs) if n in b or (text and n in s.lower())]


def mailctl_bin():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(IMAPD))),
                        "mailctl", "mailctl")


def fill(r, mailbox, msgs):
    r.cmd("c", "CREATE " + mailbox)
    for i, (s, b) in enumerate(msgs):
        r.append(render(i, s, b), mailbox)


def needles(msgs, count, seed):
    rnd = random.Random(seed)
    out = ["zzzqqq", "msg 1"]
    while len(out) < count:
        w = rnd.choice(words())
        k = rnd.randint(0, max(0, len(w) - 3))
        out.append(w[k:k + rnd.randint(3, 6)])
    return out


def search(r, key):
    out = r.cmd("s", "SEARCH " + key)
    assert_eq(out[-1], "s OK SEARCH completed", key)
    line = [x for x in out if x.startswith("* SEARCH")]
    return [int(x) for x in line[0].split()[2:]] if line else []


def check(r, msgs, nums=None):
    nums = nums or list(range(1, len(msgs) + 1))
    for needle in needles(msgs, 40, 5):
        want = [nums[i - 1] for i in truth(msgs, needle)]
        assert_eq(search(r, 'BODY "%s"' % needle), want, needle)
        want_t = [nums[i - 1] for i in truth(msgs, needle, text=True)]
        assert_eq(search(r, 'TEXT "%s"' % needle.upper()), want_t, needle)


def test_index_answers_as_a_scan():
    msgs = corpus(150, 1)
    r = D.raw()
    fill(r, "Big", msgs)
    r.cmd("x", "SELECT Big")
    check(r, msgs)
    a, b = needles(msgs, 4, 9)[2:4]
    ta, tb = set(truth(msgs, a)), set(truth(msgs, b))
    assert_eq(search(r, 'OR BODY "%s" BODY "%s"' % (a, b)), sorted(ta | tb))
    assert_eq(search(r, 'NOT BODY "%s"' % a),
              [i for i in range(1, 151) if i not in ta])
    assert_eq(search(r, 'BODY "%s" BODY "%s"' % (a, b)), sorted(ta & tb))
    assert_eq(search(r, '1:50 BODY "%s"' % a), sorted(i for i in ta if i <= 50))
    out = r.cmd("e", 'SEARCH RETURN (COUNT) BODY "%s"' % a)
    assert_in("* ESEARCH (TAG \"e\") COUNT %d" % len(ta), out)
    out = r.cmd("o", 'SORT (ARRIVAL) UTF-8 BODY "%s"' % a)  # ties: mailbox order
    assert_eq(out[0], "* SORT" + "".join(" %d" % i for i in sorted(ta)))
    out = r.cmd("t", 'THREAD ORDEREDSUBJECT UTF-8 BODY "%s"' % a)
    assert out[-1].startswith("t OK"), out
    assert_eq(sorted(int(x) for x in re.findall(r"\d+", out[0])), sorted(ta))

    # expunge every third message: the answers follow
    r.cmd("f", "STORE 1:* +FLAGS.SILENT (\\Deleted)")
    keep = ",".join(str(i + 1) for i in range(0, 150, 3))
    r.cmd("g", "STORE %s -FLAGS.SILENT (\\Deleted)" % keep)
    assert_eq(r.cmd("h", "EXPUNGE")[-1], "h OK EXPUNGE completed")
    kept = [m for i, m in enumerate(msgs) if i % 3 == 0]
    out = r.cmd("n", "SEARCH ALL")
    assert_eq(len(out[0].split()) - 2, len(kept))
    check(r, kept)

    # a COPY's messages are indexed in the target
    assert r.cmd("k", "COPY 1:10 Copied")[-1].startswith("k NO [TRYCREATE]")
    r.cmd("l", "CREATE Copied")
    assert r.cmd("k", "COPY 1:10 Copied")[-1].startswith("k OK")
    r.cmd("m", "SELECT Copied")
    check(r, kept[:10])


def test_mailbox_from_before_the_index():
    msgs = corpus(90, 2)
    mc = mailctl_bin()
    d = Imapd(IMAPD, deliver=DELIVER)
    after_test(d.__exit__, None, None, None)
    with open(d.conf) as f:
        text = f.read()
    with open(d.conf, "w") as f:
        f.write(text.replace("[store]\n", "[store]\nfts = no\n", 1))
    d.__enter__()
    r = Raw(d.port)
    after_test(r.close)
    assert r.cmd("L", 'LOGIN alice "%s"' % PASSWORD)[-1].startswith("L OK")
    fill(r, "Old", msgs)
    r.cmd("x", "SELECT Old")
    check(r, msgs)  # read message by message
    r.cmd("z", "LOGOUT")
    d.stop(timeout=10)
    with open(d.conf, "w") as f:
        f.write(text)

    def stats():
        out = subprocess.run([mc, "-c", d.conf, "--json", "fts", "stats", "alice",
                              "--mailbox", "Old"], capture_output=True, text=True)
        assert_eq(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)[0]

    assert not stats()["complete"]
    out = subprocess.run([mc, "-c", d.conf, "--json", "fts", "rebuild", "alice"],
                         capture_output=True, text=True)
    assert_eq(out.returncode, 0, out.stderr)
    rows = {x["mailbox"]: x["messages"] for x in json.loads(out.stdout)}
    assert_eq(rows["Old"], 90)
    s = stats()
    assert s["complete"]
    assert_eq(s["messages"], 90)
    assert_ge(s["segments"], 1)
    out = subprocess.run([mc, "-c", d.conf, "fts", "rebuild"], capture_output=True,
                         text=True)
    assert_eq(out.returncode, 64)  # usage: neither a user nor --all
    d.start(timeout=15)
    r2 = Raw(d.port)
    after_test(r2.close)
    assert r2.cmd("L", 'LOGIN alice "%s"' % PASSWORD)[-1].startswith("L OK")
    r2.cmd("x", "SELECT Old")
    check(r2, msgs)


def main():
    global IMAPD, DELIVER, D
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    D = Imapd(IMAPD, deliver=DELIVER)
    rc = run_suite(D, [test_index_answers_as_a_scan], D.dir)
    return rc | run_tests([test_mailbox_from_before_the_index])  # an imapd of its own


if __name__ == "__main__":
    sys.exit(main())
