#!/bin/bash
# Instructions per uncontended pair (scenario 1), by crate, under callgrind:
# load-independent, unlike the bench's timings.
#   bench/profile/pairs.sh LIB...     (e.g. `ours ceiling`; from the repository root)
# Builds the release bench, starts a private redis-server on port 7997 if none
# answers there, runs scenario 1 for 1 s and for 4 s per LIB and subtracts the
# two (start-up and warm-up cancel), dividing by the pairs the server counted.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet -p redisson-lock-bench
bin=target/release/redisson-lock-bench
out=target/profile; mkdir -p "$out"
redis-cli -p 7997 ping >/dev/null 2>&1 || redis-server --port 7997 --save "" --appendonly no --daemonize yes >/dev/null
sleep 0.3
for lib in "$@"; do
  pairs=()
  for s in 1 4; do
    redis-cli -p 7997 config resetstat >/dev/null
    BENCH_S1_SECS=$s REDIS_URL=redis://127.0.0.1:7997 valgrind --tool=callgrind \
      --callgrind-out-file="$out/cg.$lib.$s" "$bin" --only s1 --libs "$lib" --rounds 1 \
      > "$out/cg.$lib.$s.log" 2>&1
    calls=$(redis-cli -p 7997 info commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
    pairs+=($((calls / 2)))
  done
  python3 bench/profile/breakdown.py "$out/cg.$lib.1" "$out/cg.$lib.4" "${pairs[0]}" "${pairs[1]}" "$lib"
done
