#!/usr/bin/env python3
"""tracking-table-max-keys 100, 300 keys read by one tracking client (RESP2
redirect): how many invalidations the table limit sends, and how many of the
300 keys are still heard when all are deleted.

    python3 docs/notes/tracking_probe3.py /usr/bin/redis-server
"""
import sys
import time

from tracking_probe import start, Conn, READ


def count(listen):
    n = 0
    while True:
        r = listen.wait_oob(0.3)
        if r is None:
            return n
        n += len(r[2] or [])


srv, port = start(sys.argv[1])
try:
    o = Conn(port)
    o.cmd("CONFIG", "SET", "tracking-table-max-keys", 100)
    t = Conn(port)
    listen = Conn(port)
    rid = listen.cmd("CLIENT", "ID")
    listen.cmd("SUBSCRIBE", "__redis__:invalidate")
    t.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", rid, "NOLOOP")
    sha = t.cmd("SCRIPT", "LOAD", READ)
    for i in range(300):
        o.cmd("HSET", f"m{i}", "f", 1)
    for i in range(300):
        t.cmd("EVALSHA", sha, 1, f"m{i}")
    time.sleep(1)
    print(sys.argv[1], "invalidated by the table limit:", count(listen), end="; ")
    for i in range(300):
        o.cmd("DEL", f"m{i}")
    print("heard when all 300 are deleted:", count(listen))
finally:
    srv.terminate()
    srv.wait()
