"""Per-pair instruction breakdown by crate from two callgrind runs (bench/profile/callgrind.sh pairs).

usage: breakdown.py SHORT LONG PAIRS_SHORT PAIRS_LONG LABEL
PAIRS_*: the pairs of each run (the server's EVALSHA calls / 2, counted from a
CONFIG RESETSTAT before the run); the short run is subtracted from the long
one to cancel start-up and warm-up.
"""
import re, subprocess, sys, collections
f1, f4, p1, p4, lib = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def annotate(f, tree):
    args = ['callgrind_annotate', '--threshold=100'] + (['--tree=caller'] if tree else []) + [f]
    return subprocess.run(args, capture_output=True, text=True).stdout.splitlines()

def selfcost(f):
    d = collections.Counter()
    for l in annotate(f, False):
        m = re.match(r'\s*([\d,]+) \([ \d.]+%\)\s+(\S.*?)\s*(\[.*\])?$', l)
        if m and 'PROGRAM TOTALS' not in l:
            d[re.sub(r'^(\?\?\?|\./[^:]*):', '', m.group(2))] += int(m.group(1).replace(',', ''))
    return d

def group(k):
    for p, g in [('redisson_lock_bench', 'bench loop'), ('redisson_lock::', 'redisson-lock'),
                 ('fred::', 'fred'), ('redis_protocol', 'fred'), ('tokio', 'tokio'),
                 ('tracing', 'tracing'), ('futures', 'futures'), ('bytes', 'fred'),
                 ('core::hash', 'std'), ('<core::hash', 'std')]:
        if k.startswith(p) or k.startswith('<' + p):
            return g
    if re.search(r'malloc|free|realloc|unlink_chunk|consolidate|__rust_alloc|__rust_dealloc|finish_grow|do_reserve', k):
        return 'allocator'
    if re.search(r'memcpy|memmove|memset', k):
        return 'memcpy'
    return 'std, core, libc'

a, b = selfcost(f1), selfcost(f4)
pairs = p4 - p1
g = collections.Counter()
for k in set(a) | set(b):
    g[group(k)] += (b[k] - a[k]) / pairs
total = sum(g.values())
print(f'{lib}: {pairs} pairs between the runs, {total:.0f} instructions/pair')
for k, v in g.most_common():
    print(f'  {k:18s} {v/1000:6.1f}k  {100*v/total:5.1f} %')
