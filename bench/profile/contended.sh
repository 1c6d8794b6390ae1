#!/bin/bash
# Instructions per contended acquisition (scenario 3, 8 tasks on one name) of
# ours, under callgrind: 2 rounds and 6 rounds, subtracted, divided by the
# acquisitions between them (one PUBLISH per release, counted by the server).
#   bench/profile/contended.sh        (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet -p redisson-lock-bench
bin=target/release/redisson-lock-bench
out=target/profile; mkdir -p "$out"
redis-cli -p 7997 ping >/dev/null 2>&1 || redis-server --port 7997 --save "" --appendonly no --daemonize yes >/dev/null
sleep 0.3
stat() { redis-cli -p 7997 info commandstats | sed -n "s/^cmdstat_$1:calls=\([0-9]*\),.*/\1/p"; }
declare -A I P E
for r in 2 6; do
  redis-cli -p 7997 config resetstat >/dev/null
  REDIS_URL=redis://127.0.0.1:7997 valgrind --tool=callgrind --callgrind-out-file="$out/cg.s3.$r" \
    "$bin" --only s3 --libs ours --rounds $r > "$out/cg.s3.$r.log" 2>&1
  P[$r]=$(stat publish); E[$r]=$(stat evalsha)
  I[$r]=$(callgrind_annotate "$out/cg.s3.$r" | sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
done
python3 -c "
i, p, e = ${I[6]} - ${I[2]}, ${P[6]} - ${P[2]}, ${E[6]} - ${E[2]}
print('ours, scenario 3: %d acquisitions, %.2f scripts and %.1fk instructions per acquisition' % (p, e / p, i / p / 1000))"
