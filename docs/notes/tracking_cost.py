#!/usr/bin/env python3
"""Server CPU of an uncontended lock/unlock pair (the shapes of lua/lock.lua
and lua/unlock.lua: a read, then writes) on a connection that tracks
(CLIENT TRACKING ON REDIRECT <id> NOLOOP) and on one that does not, in
interleaved rounds on one private server. Each read by the tracking
connection puts the key in the server's tracking table; the write after it
takes it out again (NOLOOP: no message).

    python3 docs/notes/tracking_cost.py /usr/bin/redis-server
"""
import sys

from tracking_probe import start, Conn

LOCK = ("if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
        "redis.call('hincrby', KEYS[1], ARGV[2], 1) "
        "if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[1]) end "
        "return nil end return redis.call('pttl', KEYS[1])")
UNLOCK = ("if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return nil end "
          "if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then return 0 end "
          "redis.call('del', KEYS[1]) return 1")
PAIRS = 5000
ROUNDS = 8


def cpu(conn):
    info = conn.cmd("INFO", "cpu")
    fields = dict(l.split(":", 1) for l in info.splitlines() if ":" in l)
    return float(fields["used_cpu_sys"]) + float(fields["used_cpu_user"])


srv, port = start(sys.argv[1])
try:
    admin = Conn(port)
    plain = Conn(port)
    tracking = Conn(port)
    listen = Conn(port)
    rid = listen.cmd("CLIENT", "ID")
    listen.cmd("SUBSCRIBE", "__redis__:invalidate")
    tracking.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", rid, "NOLOOP")
    lock = plain.cmd("SCRIPT", "LOAD", LOCK)
    unlock = plain.cmd("SCRIPT", "LOAD", UNLOCK)
    per_pair = {"plain": [], "tracking": []}
    for r in range(ROUNDS):
        for name, conn in (("plain", plain), ("tracking", tracking))[:: 1 if r % 2 == 0 else -1]:
            before = cpu(admin)
            for i in range(PAIRS):
                key = f"{name}-{i % 64}"
                conn.cmd("EVALSHA", lock, 1, key, 30000, "c:1")
                conn.cmd("EVALSHA", unlock, 1, key, "c:1")
            per_pair[name].append((cpu(admin) - before) / PAIRS * 1e6)
    for name, values in per_pair.items():
        values.sort()
        print(f"{sys.argv[1]} {name}: server CPU per pair, us: median {values[len(values) // 2]:.2f}, "
              f"min {values[0]:.2f}, max {values[-1]:.2f}")
    info = admin.cmd("INFO", "stats")
    print("tracking_total_keys after:", [l for l in info.splitlines() if l.startswith("tracking_total_keys")])
finally:
    srv.terminate()
    srv.wait()
