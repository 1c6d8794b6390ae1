#!/usr/bin/env python3
"""Probe a broken redirect, tracking-table-max-keys, and the server cost of
tracking 10 000 keys.

    python3 docs/notes/tracking_probe2.py /usr/bin/redis-server
"""
import sys
import time

from tracking_probe import Conn, start, READ, WRITE_THEN_READ


def info(c, section, *fields):
    lines = dict(l.split(":", 1) for l in c.cmd("INFO", section).splitlines() if ":" in l)
    return {f: lines.get(f) for f in fields}


def redirect_broken(port):
    o = Conn(port)
    print("## redirect connection dropped")
    for resp in (2, 3):
        t = Conn(port, resp)
        listen = Conn(port)
        rid = listen.cmd("CLIENT", "ID")
        listen.cmd("SUBSCRIBE", "__redis__:invalidate")
        print(f"RESP{resp} tracker, REDIRECT {rid}:", t.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", rid, "NOLOOP"))
        sha = t.cmd("SCRIPT", "LOAD", READ)
        o.cmd("HSET", "k", "f", 1)
        t.cmd("EVALSHA", sha, 1, "k")
        print("  trackinginfo before:", t.cmd("CLIENT", "TRACKINGINFO"))
        print("  CLIENT KILL ID redirect:", o.cmd("CLIENT", "KILL", "ID", rid))
        o.cmd("DEL", "k")
        print("  after DEL by other, tracker got:", t.wait_oob(0.3))
        print("  trackinginfo after:", t.cmd("CLIENT", "TRACKINGINFO"))
        print("  CLIENT GETREDIR:", t.cmd("CLIENT", "GETREDIR"))
        o.cmd("HSET", "k", "f", 1)
        t.cmd("EVALSHA", sha, 1, "k")
        o.cmd("FLUSHALL")
        print("  after FLUSHALL, tracker got:", t.wait_oob(0.3))
        print("  re-enable with a gone id:", t.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", rid, "NOLOOP"))
        l2 = Conn(port)
        rid2 = l2.cmd("CLIENT", "ID")
        l2.cmd("SUBSCRIBE", "__redis__:invalidate")
        print("  re-enable with a new id while on:", t.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", rid2, "NOLOOP"))
        print("  trackinginfo:", t.cmd("CLIENT", "TRACKINGINFO"))
        o.cmd("HSET", "k", "f", 1)
        t.cmd("EVALSHA", sha, 1, "k")
        o.cmd("DEL", "k")
        print("  new redirect hears DEL:", l2.wait_oob(0.3))
        print("  subscriber only to a different channel gets nothing:")
        l3 = Conn(port)
        rid3 = l3.cmd("CLIENT", "ID")
        print("   switch to unsubscribed", rid3, t.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", rid3, "NOLOOP"))
        o.cmd("HSET", "k", "f", 1)
        t.cmd("EVALSHA", sha, 1, "k")
        o.cmd("DEL", "k")
        print("   unsubscribed redirect target got:", l3.wait_oob(0.3))
        o.cmd("FLUSHALL")
    print("## tracking client itself killed: a new connection does not track")
    t = Conn(port, 3)
    t.cmd("CLIENT", "TRACKING", "ON", "NOLOOP")
    tid = t.cmd("CLIENT", "ID")
    o.cmd("HSET", "k", "f", 1)
    sha = t.cmd("SCRIPT", "LOAD", READ)
    t.cmd("EVALSHA", sha, 1, "k")
    print("  tracking_total_items before kill:", info(o, "stats", "tracking_total_items"))
    o.cmd("CLIENT", "KILL", "ID", tid)
    time.sleep(0.1)
    print("  tracking_total_items after kill:", info(o, "stats", "tracking_total_items"),
          "(the table forgets clients lazily: the key stays until invalidated)")
    o.cmd("DEL", "k")
    print("  after DEL:", info(o, "stats", "tracking_total_items", "tracking_total_keys"))


def max_keys(port):
    print("## tracking-table-max-keys 100, 300 keys read")
    o = Conn(port)
    o.cmd("FLUSHALL")
    o.cmd("CONFIG", "SET", "tracking-table-max-keys", 100)
    t = Conn(port, 3)
    t.cmd("CLIENT", "TRACKING", "ON", "NOLOOP")
    sha = t.cmd("SCRIPT", "LOAD", READ)
    for i in range(300):
        o.cmd("HSET", f"m{i}", "f", 1)
    for i in range(300):
        t.cmd("EVALSHA", sha, 1, f"m{i}")
    pushes = list(t.pending)
    t.pending.clear()
    end = time.time() + 2
    while time.time() < end:
        r = t.wait_oob(0.2)
        if r is not None:
            pushes.append(r)
    keys = sum(len(p[1] or []) for p in pushes if isinstance(p, list) and len(p) > 1 and isinstance(p[1], list))
    print("  first pushes:", pushes[:3], "count", len(pushes))
    print(f"  invalidations received for keys nobody changed: {keys} (in {len(pushes)} pushes)",
          info(o, "stats", "tracking_total_keys", "tracking_total_items"))
    o.cmd("CONFIG", "SET", "tracking-table-max-keys", 0)
    o.cmd("FLUSHALL")


def cost(port, n=10000):
    print(f"## cost of tracking {n} keys (one client, default mode)")
    o = Conn(port)
    o.cmd("FLUSHALL")
    # the holds
    for i in range(n):
        o.send("HSET", f"{{lock}}:hold:{i:05}", "7c2a8a3e-2b6f-4a6e-9a3b-0f1e2d3c4b5a:1", 1)
    for i in range(n):
        o.read()
    time.sleep(0.2)
    base = info(o, "memory", "used_memory")
    t = Conn(port, 3)
    t.cmd("CLIENT", "TRACKING", "ON", "NOLOOP")
    sha = t.cmd("SCRIPT", "LOAD", WRITE_THEN_READ)
    plain = Conn(port, 3)

    def cycle(c):
        cpu0 = info(o, "stats", "total_commands_processed")
        s = info(o, "server", "uptime_in_seconds")
        c0 = info(o, "cpu", "used_cpu_sys", "used_cpu_user")
        t0 = time.time()
        for i in range(n):
            c.send("EVALSHA", sha, 1, f"{{lock}}:hold:{i:05}")
        for i in range(n):
            c.read()
        took = time.time() - t0
        c1 = info(o, "cpu", "used_cpu_sys", "used_cpu_user")
        cpu = sum(float(c1[k]) - float(c0[k]) for k in c0)
        return took, cpu

    # warm both
    cycle(plain)
    rounds = 5
    p = [cycle(plain) for _ in range(rounds)]
    tr = [cycle(t) for _ in range(rounds)]
    time.sleep(0.2)
    after = info(o, "memory", "used_memory")
    st = info(o, "stats", "tracking_total_keys", "tracking_total_items", "tracking_total_prefixes")
    print("  used_memory before tracking:", base["used_memory"], "after:", after["used_memory"],
          "delta bytes:", int(after["used_memory"]) - int(base["used_memory"]), st)
    mp = sum(x[1] for x in p) / rounds
    mt = sum(x[1] for x in tr) / rounds
    print(f"  server CPU per {n} renew-like EVALSHA (write then read): untracked {mp*1000:.1f} ms, "
          f"tracked {mt*1000:.1f} ms (mean of {rounds}); wall {sum(x[0] for x in p)/rounds*1000:.0f} / "
          f"{sum(x[0] for x in tr)/rounds*1000:.0f} ms")
    c0 = info(o, "cpu", "used_cpu_sys", "used_cpu_user")
    t0 = time.time()
    o.cmd("FLUSHALL")
    c1 = info(o, "cpu", "used_cpu_sys", "used_cpu_user")
    print(f"  FLUSHALL of {n} tracked keys: {(time.time()-t0)*1000:.1f} ms wall,",
          info(o, "stats", "tracking_total_keys"))
    got = t.drain() + t.pending
    print("  tracker received:", got[:2])


if __name__ == "__main__":
    srv, port = start(sys.argv[1])
    try:
        print("#", sys.argv[1], [l for l in Conn(port).cmd("INFO", "server").splitlines()
                                 if l.startswith(("redis_version", "valkey_version"))])
        redirect_broken(port)
        max_keys(port)
        cost(port)
    finally:
        srv.terminate()
        srv.wait()
