"""imapd end to end: APPEND, STORE and EXPUNGE of many sessions go through the worker's group
commit. Each session gets its exact reply after the commit; the worker's log at exit counts
the writes and the commits they shared: with the store's write locks held by another process
while the sessions write, their writes wait together and must share commits.

Usage: test_imapd_commit.py IMAPD_BINARY DELIVER_BINARY"""
import contextlib
import glob
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, ImapRaw as Raw, without_objectid  # noqa: E402,E501
from heronlib import (assert_eq, assert_ge, assert_in, assert_lt, assert_not_in,  # noqa: E402
                      assert_re, run_tests)
from messages import SIMPLE  # noqa: E402

IMAPD = DELIVER = None
SESSIONS = 8


def test_sessions_share_commits():
    # a long delay, so the sessions' writes surely meet in one batch
    d = Imapd(IMAPD, deliver=DELIVER, extra="\n[store]\ngroup_commit_delay = 300ms\n")
    with d:
        rs = []
        for i in range(SESSIONS):
            r = Raw(d.port)
            rs.append(r)
            assert_eq(r.cmd("L", 'LOGIN alice "%s"' % PASSWORD)[-1][:4], "L OK")
        assert_eq(without_objectid(rs[0].cmd("c", "CREATE Shared")),
                  ["c OK CREATE completed"])
        probes = [Raw(d.port) for _ in range(4)]  # sessions on each worker, not writing
        # every session appends at once, while the writes cannot commit
        with hold_write_locks(d.store):
            for r in rs:
                r.send(("A APPEND Shared (\\Flagged) {%d+}\r\n" % len(SIMPLE)).encode() +
                       SIMPLE + b"\r\n")
            wait_read(probes)
        uids = []
        for r in rs:
            out = r.until_tag("A")
            assert_eq(len(out), 1, out)
            m = re.fullmatch(r"A OK \[APPENDUID (\d+) (\d+)\] APPEND completed", out[0])
            assert m is not None, out
            uids.append(int(m.group(2)))
        assert_eq(sorted(uids), list(range(1, SESSIONS + 1)))
        # every session selects, then stores a flag on its own message at once
        for r in rs:
            assert_eq(r.cmd("s", "SELECT Shared")[-1],
                      "s OK [READ-WRITE] SELECT completed")
        with hold_write_locks(d.store):
            for r, uid in zip(rs, uids):
                r.send("T UID STORE %d +FLAGS.SILENT (\\Deleted)\r\n" % uid)
            wait_read(probes)
        for r in rs:
            assert_eq(r.until_tag("T")[-1], "T OK STORE completed")
        # a STORE refused inside the batch (a bad flag) changes nothing
        assert_eq(rs[0].cmd("b", "STORE 1 +FLAGS (\\Bogus)"), ["b BAD Unknown system flag"])
        # two sessions expunge at once: one removes every message, and the other hears
        # of the same expunges before its reply
        rs[0].send("E EXPUNGE\r\n")
        rs[1].send("E EXPUNGE\r\n")
        for r in rs[:2]:
            assert_eq(r.until_tag("E"),
                      ["* 1 EXPUNGE"] * SESSIONS + ["E OK EXPUNGE completed"])
        assert_eq(rs[2].cmd("n", "NOOP")[-1], "n OK Completed")
        assert_eq(rs[2].cmd("st", "STATUS Shared (MESSAGES)")[0],
                  "* STATUS Shared (MESSAGES 0)")
        for r in rs + probes:
            r.close()
        d.stop()
        m = re.search(r"group commit writes=(\d+) commits=(\d+)", d.logtext())
        assert m is not None
        writes, commits = int(m.group(1)), int(m.group(2))
        print("group commit: %d writes in %d commits" % (writes, commits))
        # alice's account made at her first LOGIN, the CREATE, appends, stores, the bad
        # STORE, two expunges, and the \Recent claim of the first SELECT (the others
        # find nothing \Recent left: no write): every write goes through the group commit
        assert_eq(writes, 2 * SESSIONS + 6)
        # the appends and the stores each waited together behind the locks: the writes
        # of each worker shared commits
        assert_lt(commits, writes)
        assert_ge(commits, 1)


def test_client_leaves_during_commit():
    # The commit runs in the committer's thread and reads the session: a session that
    # leaves while its write is out stays allocated until the write is back (the log
    # says so; the sanitizer build checks the memory), and meanwhile the loop serves
    # the others. A second process holding LMDB's write lock keeps the writes out for as
    # long as the test needs, whatever the machine's speed.
    d = Imapd(IMAPD, deliver=DELIVER)
    with d:
        first = Raw(d.port)
        assert_eq(first.cmd("L", 'LOGIN alice "%s"' % PASSWORD)[-1][:4], "L OK")
        assert_eq(without_objectid(first.cmd("c", "CREATE Gone")),
                  ["c OK CREATE completed"])
        first.send(("A APPEND Gone {%d+}\r\n" % len(SIMPLE)).encode() + SIMPLE + b"\r\n")
        assert_eq(first.until_tag("A")[-1][:4], "A OK")
        leavers = []
        for i in range(SESSIONS):
            r = Raw(d.port)
            assert_eq(r.cmd("L", 'LOGIN alice "%s"' % PASSWORD)[-1][:4], "L OK")
            assert_eq(r.cmd("s", "SELECT Gone")[-1][:4], "s OK")
            leavers.append(r)
        with hold_write_locks(d.store):
            for i, r in enumerate(leavers):
                if i % 2:
                    r.send("T STORE 1 +FLAGS (\\Flagged)\r\n")
                else:
                    r.send(("A APPEND Gone {%d+}\r\n" % len(SIMPLE)).encode() + SIMPLE +
                           b"\r\n")
            # the writes wait for the lock; the loop does not
            assert_eq(first.cmd("n", "NOOP")[-1], "n OK Completed")
            for r in leavers:
                r.close()
            time.sleep(0.5)  # the worker sees them leave while their writes are out
        # the lock released: the writes commit, the sessions that left are freed
        assert_eq(first.cmd("n", "NOOP")[-1], "n OK Completed")
        st = first.cmd("st", "STATUS Gone (MESSAGES)")
        assert_re(st[0], r"^\* STATUS Gone \(MESSAGES \d+\)$")
        assert_ge(int(re.search(r"MESSAGES (\d+)", st[0]).group(1)), 1)
        assert_eq(first.cmd("x", "LOGOUT")[-1], "x OK Logout completed")
        first.close()
        d.stop()
        log = d.logtext()
        assert_not_in("fatal", log.lower())
        # the case under test happened: sessions left with a write out
        assert_in("left with a write in the group commit", log)


def wait_read(probes):
    """Returns once the workers have read what the sessions sent before: each probe's NOOP
    is answered by its worker's loop, which reads every readable session as it goes; then a
    generous pause for the reads still in the loop's hands."""
    for p in probes:
        assert p.cmd("n", "NOOP")[-1] == "n OK Completed"
    time.sleep(1.0)


HOLDER = r"""
import ctypes, sys
lm = ctypes.CDLL("liblmdb.so.0")
txns = []
for path in sys.argv[1:]:
    env = ctypes.c_void_p()
    txn = ctypes.c_void_p()
    assert lm.mdb_env_create(ctypes.byref(env)) == 0
    lm.mdb_env_set_maxdbs(env, 32)
    assert lm.mdb_env_open(env, path.encode(), 0x4000, 0o640) == 0  # MDB_NOSUBDIR
    assert lm.mdb_txn_begin(env, None, 0, ctypes.byref(txn)) == 0   # the write lock
    txns.append((env, txn))
print("held", flush=True)
sys.stdin.read()
for env, txn in txns:
    lm.mdb_txn_abort(txn)
    lm.mdb_env_close(env)
"""


@contextlib.contextmanager
def hold_write_locks(store):
    """Another process holds the write lock of every partition of store."""
    paths = sorted(glob.glob(os.path.join(store, "part*", "index.mdb")))
    p = subprocess.Popen([sys.executable, "-c", HOLDER] + paths, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        if p.stdout.readline().strip() != "held":
            raise AssertionError("could not take the store's write locks")
        yield
    finally:
        p.stdin.close()
        p.wait(timeout=30)


def main():
    global IMAPD, DELIVER
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    return run_tests([test_sessions_share_commits, test_client_leaves_during_commit])


if __name__ == "__main__":
    sys.exit(main())
