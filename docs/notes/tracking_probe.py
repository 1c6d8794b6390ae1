#!/usr/bin/env python3
"""Probe which removals reach a client tracking a key in default mode.

    python3 docs/notes/tracking_probe.py /usr/bin/redis-server

Starts a private server on a free loopback port, and for each operation:
a tracking client (RESP3 push, or RESP2 redirected to a connection subscribed
to __redis__:invalidate) reads a hash only inside an EVALSHA, then another
client (or time) removes or changes it; prints whether an invalidation came
within 300 ms and what it said. Raw sockets, no client library.
"""
import os
import select
import socket
import subprocess
import sys
import tempfile
import time


class Conn:
    def __init__(self, port, resp=2):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""
        self.pending = []  # out-of-band frames (pushes, messages)
        if resp == 3:
            self.cmd("HELLO", "3")

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)

    def _fill(self, timeout):
        r, _, _ = select.select([self.s], [], [], timeout)
        if not r:
            return False
        data = self.s.recv(1 << 20)
        if not data:
            raise EOFError("closed")
        self.buf += data
        return True

    def _line(self, timeout):
        while b"\r\n" not in self.buf:
            if not self._fill(timeout):
                raise TimeoutError
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read(self, timeout=2.0):
        line = self._line(timeout)
        t, rest = line[:1], line[1:]
        if t in (b"+",):
            return rest.decode()
        if t in (b"-", b"!"):
            return ("ERR", rest.decode())
        if t == b":":
            return int(rest)
        if t == b",":
            return float(rest)
        if t == b"#":
            return rest == b"t"
        if t == b"_":
            return None
        if t in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                if not self._fill(timeout):
                    raise TimeoutError
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode(errors="replace")
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return None
            items = [self.read(timeout) for _ in range(n)]
            return ("PUSH", items) if t == b">" else items
        if t == b"%":
            n = int(rest)
            return {self.read(timeout): self.read(timeout) for _ in range(n)}
        raise ValueError(line)

    def cmd(self, *args):
        """Send and return the reply, keeping pushes aside."""
        self.send(*args)
        while True:
            r = self.read()
            if isinstance(r, tuple) and r[0] == "PUSH":
                self.pending.append(r[1])
                continue
            return r

    def wait_oob(self, timeout):
        """The first out-of-band frame within timeout, or None."""
        if self.pending:
            return self.pending.pop(0)
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                return None
            try:
                r = self.read(left)
            except TimeoutError:
                return None
            if isinstance(r, tuple) and r[0] == "PUSH":
                return r[1]
            return r

    def drain(self):
        out = []
        while True:
            r = self.wait_oob(0.05)
            if r is None:
                return out
            out.append(r)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(binary, *extra):
    port = free_port()
    d = tempfile.mkdtemp()
    p = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", d, *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            Conn(port).cmd("PING")
            return p, port
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("no server")


READ = "return redis.call('hget', KEYS[1], 'f')"
WRITE_THEN_READ = "redis.call('pexpire', KEYS[1], 30000); return redis.call('hget', KEYS[1], 'f')"
READ_THEN_WRITE = "local v = redis.call('hget', KEYS[1], 'f'); redis.call('pexpire', KEYS[1], 30000); return v"
WRITE_ONLY = "return redis.call('pexpire', KEYS[1], 30000)"


class Setup:
    def __init__(self, port, mode):
        self.port = port
        self.mode = mode
        self.other = Conn(port)
        if mode == "resp3":
            self.t = Conn(port, 3)
            self.listen = self.t
            assert self.t.cmd("CLIENT", "TRACKING", "ON", "NOLOOP") == "OK"
        else:
            self.t = Conn(port, 2)
            self.listen = Conn(port, 2)
            rid = self.listen.cmd("CLIENT", "ID")
            self.listen.cmd("SUBSCRIBE", "__redis__:invalidate")
            r = self.t.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", rid, "NOLOOP")
            assert r == "OK", r
        self.sha = {name: self.t.cmd("SCRIPT", "LOAD", body)
                    for name, body in [("read", READ), ("wr", WRITE_THEN_READ),
                                       ("rw", READ_THEN_WRITE), ("w", WRITE_ONLY)]}

    def track(self, key, script="read"):
        return self.t.cmd("EVALSHA", self.sha[script], 1, key)

    def heard(self, timeout=0.3):
        """The invalidation heard within timeout: ('keys', [..]) or ('all',) or None."""
        start = time.time()
        r = self.listen.wait_oob(timeout)
        took = (time.time() - start) * 1000
        if r is None:
            return None, took
        if self.mode == "resp3":
            # ['invalidate', [keys] | None]
            return r, took
        # ['message', '__redis__:invalidate', [keys] | None]
        return r, took


def fmt(r):
    if r is None:
        return "none"
    if isinstance(r, list) and r and r[0] == "message":
        r = r[1:]
    return repr(r)


def run(binary):
    results = []
    srv, port = start(binary)
    try:
        ver = Conn(port).cmd("INFO", "server")
        version = [l for l in ver.splitlines() if l.startswith(("redis_version", "valkey_version"))]
        print("#", binary, version)
        for mode in ("resp3", "resp2-redirect"):
            s = Setup(port, mode)
            o = s.other

            def case(name, prep, act, key="k", script="read", settle=0.3):
                o.cmd("SELECT", 0)
                o.cmd("FLUSHALL")
                s.listen.drain()
                o.cmd("DEL", key)
                o.cmd("HSET", key, "f", "1")
                if prep:
                    prep()
                s.track(key, script)
                s.listen.drain()
                act()
                r, took = s.heard(settle)
                results.append((mode, name, fmt(r), took))
                print(f"{mode:15} {name:40} {fmt(r):40} {took:7.1f} ms")
                o.cmd("SELECT", 0)

            case("DEL", None, lambda: o.cmd("DEL", "k"))
            case("UNLINK", None, lambda: o.cmd("UNLINK", "k"))
            case("HDEL field", None, lambda: o.cmd("HDEL", "k", "f"))
            case("HINCRBY other field", None, lambda: o.cmd("HINCRBY", "k", "g", 1))
            case("PEXPIRE by other", None, lambda: o.cmd("PEXPIRE", "k", 60000))
            case("expiry active (PX 100 before read)", lambda: o.cmd("PEXPIRE", "k", 100),
                 lambda: None, settle=1.5)

            def lazy_prep():
                o.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "0")
                o.cmd("PEXPIRE", "k", 100)

            def lazy_act():
                time.sleep(0.2)
                o.cmd("EXISTS", "k")  # lazy expiry on access by another client

            case("expiry lazy (active off, EXISTS by other)", lazy_prep, lazy_act)
            o.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "1")
            case("FLUSHALL", None, lambda: o.cmd("FLUSHALL"))
            case("FLUSHALL ASYNC", None, lambda: o.cmd("FLUSHALL", "ASYNC"))
            case("FLUSHDB", None, lambda: o.cmd("FLUSHDB"))
            case("FLUSHDB of other db (1)", None, lambda: (o.cmd("SELECT", 1), o.cmd("FLUSHDB")))
            case("SWAPDB 0 1", None, lambda: o.cmd("SWAPDB", 0, 1))
            case("RENAME k k2 (source)", None, lambda: o.cmd("RENAME", "k", "k2"))
            case("RENAME x k (dest overwritten)", lambda: o.cmd("SET", "x", "1"),
                 lambda: o.cmd("RENAME", "x", "k"))
            case("MOVE k 1", None, lambda: o.cmd("MOVE", "k", 1))
            case("COPY x k REPLACE", lambda: o.cmd("HSET", "x", "f", "2"),
                 lambda: o.cmd("COPY", "x", "k", "REPLACE"))
            case("own write (NOLOOP): then DEL by other", None,
                 lambda: (s.track("k", "w"), o.cmd("DEL", "k")))
            case("own script read-then-write; DEL by other", None,
                 lambda: (s.track("k", "rw"), o.cmd("DEL", "k")))
            case("own script write-then-read; DEL by other", None,
                 lambda: (s.track("k", "wr"), o.cmd("DEL", "k")))
            case("two reads, one DEL: second DEL", None,
                 lambda: (o.cmd("DEL", "k"), s.listen.wait_oob(0.3), o.cmd("HSET", "k", "f", 1),
                          o.cmd("DEL", "k")))
            # eviction
            o.cmd("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")

            def evict():
                used = int([l for l in o.cmd("INFO", "memory").splitlines()
                            if l.startswith("used_memory:")][0].split(":")[1])
                o.cmd("CONFIG", "SET", "maxmemory", used + 200000)
                for i in range(400):
                    o.send("SET", f"fill{i}", "x" * 2000)
                for i in range(400):
                    o.read()
                print("   k exists after filling:", o.cmd("EXISTS", "k"),
                      "evicted_keys:", [l for l in o.cmd("INFO", "stats").splitlines()
                                         if l.startswith("evicted_keys")])

            case("eviction (maxmemory, allkeys-lru)", None, evict, settle=0.5)
            o.cmd("CONFIG", "SET", "maxmemory", 0)
            o.cmd("FLUSHALL")
    finally:
        srv.terminate()
        srv.wait()
    return results


if __name__ == "__main__":
    for b in sys.argv[1:]:
        run(b)
