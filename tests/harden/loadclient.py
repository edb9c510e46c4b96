#!/usr/bin/env python3
"""loadclient.py — the client side of test_load.py, run as its own process: holds N
connections to a loopback IMAP or SMTP server and reports counts as JSON on stdout.

  loadclient.py imap PORT N USER PASSWORD DEADLINE_S
      N connections: greeting, LOGIN, then all idle together; then one NOOP on every one.
      Prints {"greeted", "logged_in", "noop_ok"}.
  loadclient.py smtp PORT N RCPT DEADLINE_S
      N sessions: greeting, EHLO, MAIL, RCPT, all held open together; then DATA on every one.
      Prints {"greeted", "ready", "accepted"}.
Every step is bounded by DEADLINE_S overall; connection attempts run at most 256 at a time
(the server's listen backlog)."""
import asyncio
import json
import resource
import sys


async def read_line(r, prefix, deadline):
    """Reads lines until one starts with prefix (bytes); returns it."""
    loop = asyncio.get_running_loop()
    while True:
        line = await asyncio.wait_for(r.readline(), max(0.1, deadline - loop.time()))
        if not line:
            raise EOFError
        if line.startswith(prefix):
            return line


async def open_many(port, n, deadline):
    sem = asyncio.Semaphore(256)
    loop = asyncio.get_running_loop()

    async def one(i):
        async with sem:
            src = ("127.0.%d.%d" % (1 + i // 250 % 250, 1 + i % 250), 0)
            return await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, local_addr=src),
                max(0.1, deadline - loop.time()))
    res = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
    return [c for c in res if not isinstance(c, BaseException)]


async def imap(port, n, user, password, deadline_s):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    conns = await open_many(port, n, deadline)
    counts = {"greeted": 0, "logged_in": 0, "noop_ok": 0}

    async def step(c, send, prefix, key):
        r, w = c
        try:
            if send:
                w.write(send)
                await w.drain()
            await read_line(r, prefix, deadline)
            counts[key] += 1
            return True
        except (OSError, EOFError, asyncio.TimeoutError):
            return False

    ok = await asyncio.gather(*(step(c, None, b"* OK", "greeted") for c in conns))
    conns = [c for c, k in zip(conns, ok) if k]
    login = f"a LOGIN {user} {password}\r\n".encode()
    ok = await asyncio.gather(*(step(c, login, b"a ", "logged_in") for c in conns))
    conns = [c for c, k in zip(conns, ok) if k]
    await asyncio.sleep(1)  # all idle together
    await asyncio.gather(*(step(c, b"b NOOP\r\n", b"b OK", "noop_ok") for c in conns))
    for _, w in conns:
        w.close()
    return counts


async def smtp(port, n, rcpt, deadline_s):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    conns = await open_many(port, n, deadline)
    counts = {"greeted": 0, "ready": 0, "accepted": 0}

    async def reply(r):
        while True:
            line = await asyncio.wait_for(r.readline(), max(0.1, deadline - loop.time()))
            if not line:
                raise EOFError
            if line[3:4] != b"-":
                return int(line[:3])

    async def begin(c, i):
        r, w = c
        try:
            if await reply(r) != 220:
                return False
            counts["greeted"] += 1
            for cmd, want in ((b"EHLO load.test\r\n", 250),
                              (b"MAIL FROM:<load@example.org>\r\n", 250),
                              (f"RCPT TO:<{rcpt}>\r\n".encode(), 250)):
                w.write(cmd)
                await w.drain()
                if await reply(r) != want:
                    return False
            counts["ready"] += 1
            return True
        except (OSError, EOFError, asyncio.TimeoutError):
            return False

    async def finish(c, i):
        r, w = c
        try:
            w.write(b"DATA\r\n")
            await w.drain()
            if await reply(r) != 354:
                return
            w.write(f"Subject: load-{i}\r\n\r\nheld open\r\n.\r\n".encode())
            await w.drain()
            if await reply(r) == 250:
                counts["accepted"] += 1
            w.write(b"QUIT\r\n")
            await w.drain()
        except (OSError, EOFError, asyncio.TimeoutError):
            pass

    ok = await asyncio.gather(*(begin(c, i) for i, c in enumerate(conns)))
    held = [(i, c) for i, (c, k) in enumerate(zip(conns, ok)) if k]
    await asyncio.sleep(1)  # all open together
    await asyncio.gather(*(finish(c, i) for i, c in held))
    for _, w in conns:
        w.close()
    return counts


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    kind, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if kind == "imap":
        counts = asyncio.run(imap(port, n, sys.argv[4], sys.argv[5], float(sys.argv[6])))
    else:
        counts = asyncio.run(smtp(port, n, sys.argv[4], float(sys.argv[5])))
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
