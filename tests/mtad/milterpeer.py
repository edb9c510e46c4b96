"""milterpeer.py — a small milter (the Sendmail/Postfix milter protocol, version 6, milter
side) for mtad's tests, written from the protocol description: it negotiates the actions and
steps a test asks for, records every command and macro it is sent, answers each command
(connect, HELO, MAIL, RCPT, DATA, ...) with the test's reply for it (continue unless told:
reject, tempfail, a reply code, accept, discard; a function of the command's data picks one
per recipient), answers the end of the message with the packets of the test's plan
(changes, then a final reply), or misbehaves as told (garbage, a close after a given command
or in the middle of a reply, silence, a packet length past any limit).

    peer = MilterPeer(); peer.plan = Plan(eob=[ADDHEADER("X-A", "1"), CONTINUE])"""
import socket
import socketserver
import struct
import threading
import time

from heronlib import HOST, free_port

SMFIF_ALL = 0x1ff


def pkt(cmd, data=b""):
    return struct.pack(">I", len(data) + 1) + cmd + data


def strs(*items):
    return b"".join(i.encode() + b"\0" for i in items)


CONTINUE = pkt(b"c")
ACCEPT = pkt(b"a")
REJECT = pkt(b"r")
TEMPFAIL = pkt(b"t")
DISCARD = pkt(b"d")
SKIP = pkt(b"s")
SHUTDOWN = pkt(b"4")


def REPLYCODE(text):
    return pkt(b"y", strs(text))


def ADDHEADER(name, value):
    return pkt(b"h", strs(name, value))


def INSHEADER(index, name, value):
    return pkt(b"i", struct.pack(">I", index) + strs(name, value))


def CHGHEADER(index, name, value):
    return pkt(b"m", struct.pack(">I", index) + strs(name, value))


def REPLBODY(data):
    return pkt(b"b", data)


def ADDRCPT(addr):
    return pkt(b"+", strs(addr))


def DELRCPT(addr):
    return pkt(b"-", strs(addr))


def CHGFROM(addr):
    return pkt(b"e", strs(addr))


def QUARANTINE(reason):
    return pkt(b"q", strs(reason))


class Plan:
    """What the milter does: actions and protocol flags it asks for, symlists (stage ->
    macro names), replies to given commands (cmd byte -> packet bytes in place of CONTINUE,
    or a function of the command's data giving them), the end-of-message packets, a delay
    before them, garbage to send at negotiation instead of the answer, and a command after
    whose answer it closes the connection (die_after)."""

    def __init__(self, eob=(CONTINUE,), actions=SMFIF_ALL, protocol=0, replies=None,
                 symlists=None, eob_delay=0.0, optneg_raw=None, close_after=None,
                 die_after=None):
        self.eob, self.actions, self.protocol = list(eob), actions, protocol
        self.replies = replies or {}
        self.symlists = symlists or {}
        self.eob_delay, self.optneg_raw = eob_delay, optneg_raw
        self.close_after = close_after  # bytes of the eob packets sent before closing
        self.die_after = die_after  # cmd byte: closes once it answered that command


class Conversation:
    def __init__(self):
        self.commands = []   # (cmd byte, data)
        self.macros = {}     # name -> value, all stages
        self.headers = []    # (name, value)
        self.body = b""
        self.offered = None  # (version, actions, protocol) the MTA offered
        self.done = threading.Event()


class _Handler(socketserver.BaseRequestHandler):
    def read(self, n):
        out = b""
        while len(out) < n:
            chunk = self.request.recv(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out

    def handle(self):
        srv = self.server
        conv = Conversation()
        with srv.lock:
            srv.conversations.append(conv)
            plan = srv.plan
        try:
            self.talk(plan, conv)
        except (EOFError, OSError):
            pass
        finally:
            conv.done.set()

    def talk(self, plan, conv):
        while True:
            (length,) = struct.unpack(">I", self.read(4))
            data = self.read(length)
            cmd, data = data[:1], data[1:]
            conv.commands.append((cmd, data))
            if cmd == b"O":
                conv.offered = struct.unpack(">III", data[:12])
                if plan.optneg_raw is not None:
                    self.request.sendall(plan.optneg_raw)
                    continue
                lists = b"".join(struct.pack(">I", st) + names.encode() + b"\0"
                                 for st, names in plan.symlists.items())
                self.request.sendall(pkt(b"O", struct.pack(">III", 6, plan.actions,
                                                           plan.protocol) + lists))
            elif cmd == b"D":
                parts = data[1:].split(b"\0")
                for i in range(0, len(parts) - 1, 2):
                    conv.macros[parts[i].decode()] = parts[i + 1].decode()
            elif cmd in (b"Q", b"A"):
                if cmd == b"Q":
                    return
            elif cmd == b"E":
                time.sleep(plan.eob_delay)
                out = b"".join(plan.eob)
                if plan.close_after is not None:
                    self.request.sendall(out[:plan.close_after])
                    return
                self.request.sendall(out)
            else:
                if cmd == b"L":
                    name, value, _ = data.split(b"\0")
                    conv.headers.append((name.decode(), value.decode()))
                elif cmd == b"B":
                    conv.body += data
                if not self.no_reply(plan, cmd):
                    reply = plan.replies.get(cmd, CONTINUE)
                    self.request.sendall(reply(data) if callable(reply) else reply)
            if cmd == plan.die_after:
                return

    @staticmethod
    def no_reply(plan, cmd):
        nr = {b"C": 0x1000, b"H": 0x2000, b"M": 0x4000, b"R": 0x8000, b"T": 0x10000,
              b"L": 0x80, b"N": 0x40000, b"B": 0x80000}
        return bool(plan.protocol & nr.get(cmd, 0))


class MilterPeer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, port=None):
        self.port = port or free_port()
        self.plan = Plan()
        self.conversations = []
        self.lock = threading.Lock()
        super().__init__((HOST, self.port), _Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self):
        return f"inet:{HOST}:{self.port}"

    def last(self, timeout=20.0):
        """The latest conversation, once it ended."""
        deadline = time.monotonic() + timeout
        while not self.conversations and time.monotonic() < deadline:
            time.sleep(0.05)
        conv = self.conversations[-1]
        conv.done.wait(max(0.0, deadline - time.monotonic()))
        return conv

    def reset(self, plan):
        with self.lock:
            self.plan = plan
            self.conversations = []

    def close(self):
        self.shutdown()
        self.server_close()


def closed_port():
    """A loopback port nobody listens on."""
    port = free_port()
    with socket.socket() as s:
        assert s.connect_ex((HOST, port)) != 0
    return port
