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
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_imapd_protocol as proto  # noqa: E402
from heronlib import Imapd  # noqa: E402

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
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(proto.IMAPD))),
                        "mailctl", "mailctl")


class Fts(proto.Base):
    user = "alice"

    def fill(self, r, mailbox, msgs):
        r.cmd("c", "CREATE " + mailbox)
        for i, (s, b) in enumerate(msgs):
            self.append(r, render(i, s, b), mailbox)

    def needles(self, msgs, count, seed):
        rnd = random.Random(seed)
        out = ["zzzqqq", "msg 1"]
        while len(out) < count:
            w = rnd.choice(words())
            k = rnd.randint(0, max(0, len(w) - 3))
            out.append(w[k:k + rnd.randint(3, 6)])
        return out

    def search(self, r, key):
        out = r.cmd("s", "SEARCH " + key)
        self.assertEqual(out[-1], "s OK SEARCH completed", key)
        line = [x for x in out if x.startswith("* SEARCH")]
        return [int(x) for x in line[0].split()[2:]] if line else []

    def check(self, r, msgs, nums=None):
        nums = nums or list(range(1, len(msgs) + 1))
        for needle in self.needles(msgs, 40, 5):
            want = [nums[i - 1] for i in truth(msgs, needle)]
            self.assertEqual(self.search(r, 'BODY "%s"' % needle), want, needle)
            want_t = [nums[i - 1] for i in truth(msgs, needle, text=True)]
            self.assertEqual(self.search(r, 'TEXT "%s"' % needle.upper()), want_t, needle)

    def test_index_answers_as_a_scan(self):
        msgs = corpus(150, 1)
        r = self.raw()
        self.fill(r, "Big", msgs)
        r.cmd("x", "SELECT Big")
        self.check(r, msgs)
        a, b = self.needles(msgs, 4, 9)[2:4]
        ta, tb = set(truth(msgs, a)), set(truth(msgs, b))
        self.assertEqual(self.search(r, 'OR BODY "%s" BODY "%s"' % (a, b)), sorted(ta | tb))
        self.assertEqual(self.search(r, 'NOT BODY "%s"' % a),
                         [i for i in range(1, 151) if i not in ta])
        self.assertEqual(self.search(r, 'BODY "%s" BODY "%s"' % (a, b)), sorted(ta & tb))
        self.assertEqual(self.search(r, '1:50 BODY "%s"' % a), sorted(i for i in ta if i <= 50))
        out = r.cmd("e", 'SEARCH RETURN (COUNT) BODY "%s"' % a)
        self.assertIn("* ESEARCH (TAG \"e\") COUNT %d" % len(ta), out)
        out = r.cmd("o", 'SORT (ARRIVAL) UTF-8 BODY "%s"' % a)  # ties: mailbox order
        self.assertEqual(out[0], "* SORT" + "".join(" %d" % i for i in sorted(ta)))
        out = r.cmd("t", 'THREAD ORDEREDSUBJECT UTF-8 BODY "%s"' % a)
        self.assertTrue(out[-1].startswith("t OK"), out)
        self.assertEqual(sorted(int(x) for x in re.findall(r"\d+", out[0])), sorted(ta))

        # expunge every third message: the answers follow
        r.cmd("f", "STORE 1:* +FLAGS.SILENT (\\Deleted)")
        keep = ",".join(str(i + 1) for i in range(0, 150, 3))
        r.cmd("g", "STORE %s -FLAGS.SILENT (\\Deleted)" % keep)
        self.assertEqual(r.cmd("h", "EXPUNGE")[-1], "h OK EXPUNGE completed")
        kept = [m for i, m in enumerate(msgs) if i % 3 == 0]
        out = r.cmd("n", "SEARCH ALL")
        self.assertEqual(len(out[0].split()) - 2, len(kept))
        self.check(r, kept)

        # a COPY's messages are indexed in the target
        self.assertTrue(r.cmd("k", "COPY 1:10 Copied")[-1].startswith("k NO [TRYCREATE]"))
        r.cmd("l", "CREATE Copied")
        self.assertTrue(r.cmd("k", "COPY 1:10 Copied")[-1].startswith("k OK"))
        r.cmd("m", "SELECT Copied")
        self.check(r, kept[:10])

    def test_mailbox_from_before_the_index(self):
        msgs = corpus(90, 2)
        mc = mailctl_bin()
        d = Imapd(proto.IMAPD, deliver=proto.DELIVER)
        self.addCleanup(d.__exit__, None, None, None)
        with open(d.conf) as f:
            text = f.read()
        with open(d.conf, "w") as f:
            f.write(text.replace("[store]\n", "[store]\nfts = no\n", 1))
        d.__enter__()
        r = proto.Raw(d.port)
        self.addCleanup(r.close)
        self.assertTrue(r.cmd("L", 'LOGIN alice "%s"' % proto.PASSWORD)[-1].startswith("L OK"))
        self.fill(r, "Old", msgs)
        r.cmd("x", "SELECT Old")
        self.check(r, msgs)  # read message by message
        r.cmd("z", "LOGOUT")
        d.stop(timeout=10)
        with open(d.conf, "w") as f:
            f.write(text)

        def stats():
            out = subprocess.run([mc, "-c", d.conf, "--json", "fts", "stats", "alice",
                                  "--mailbox", "Old"], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            return json.loads(out.stdout)[0]

        self.assertFalse(stats()["complete"])
        out = subprocess.run([mc, "-c", d.conf, "--json", "fts", "rebuild", "alice"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = {x["mailbox"]: x["messages"] for x in json.loads(out.stdout)}
        self.assertEqual(rows["Old"], 90)
        s = stats()
        self.assertTrue(s["complete"])
        self.assertEqual(s["messages"], 90)
        self.assertGreaterEqual(s["segments"], 1)
        out = subprocess.run([mc, "-c", d.conf, "fts", "rebuild"], capture_output=True,
                             text=True)
        self.assertEqual(out.returncode, 2)  # neither a user nor --all
        d.start(timeout=15)
        r2 = proto.Raw(d.port)
        self.addCleanup(r2.close)
        self.assertTrue(r2.cmd("L", 'LOGIN alice "%s"' % proto.PASSWORD)[-1].startswith("L OK"))
        r2.cmd("x", "SELECT Old")
        self.check(r2, msgs)


def main():
    proto.IMAPD, proto.DELIVER = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])


if __name__ == "__main__":
    main()
