#!/bin/bash
# Instructions under callgrind, independent of the machine's load:
#   bench/profile/callgrind.sh pairs LIB...   per uncontended pair (scenario 1), by crate,
#                                             for each LIB (e.g. `ours ceiling`)
#   bench/profile/callgrind.sh contended      per contended acquisition of ours (scenario 3)
# Builds the release bench and starts a private redis-server on port 7997 if
# none answers there. Each measure is two runs of different length, the short
# one subtracted from the long one (start-up and warm-up cancel), divided by
# what the server counted between them: pairs (EVALSHA calls / 2) or
# acquisitions (one PUBLISH per release). Callgrind files: target/profile/.
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:?usage: bench/profile/callgrind.sh pairs LIB... | contended}
shift
cargo build --release --quiet -p redisson-lock-bench
bin=target/release/redisson-lock-bench
out=target/profile; mkdir -p "$out"
redis-cli -p 7997 ping >/dev/null 2>&1 || redis-server --port 7997 --save "" --appendonly no --daemonize yes >/dev/null
sleep 0.3
calls() { redis-cli -p 7997 info commandstats | sed -n "s/^cmdstat_$1:calls=\([0-9]*\),.*/\1/p"; }
# run FILE ENV... -- ARGS...: the bench under callgrind, counters reset first.
run() {
  local file=$1; shift
  redis-cli -p 7997 config resetstat >/dev/null
  env "$@" REDIS_URL=redis://127.0.0.1:7997 valgrind --tool=callgrind \
    --callgrind-out-file="$out/$file" "$bin" "${BENCH_ARGS[@]}" > "$out/$file.log" 2>&1
}
case $what in
  pairs)
    for lib in "$@"; do
      pairs=()
      for s in 1 4; do
        BENCH_ARGS=(--only s1 --libs "$lib" --rounds 1)
        run "cg.$lib.$s" BENCH_S1_SECS=$s
        pairs+=($(($(calls evalsha) / 2)))
      done
      python3 bench/profile/breakdown.py "$out/cg.$lib.1" "$out/cg.$lib.4" "${pairs[0]}" "${pairs[1]}" "$lib"
    done
    ;;
  contended)
    declare -A I P E
    for r in 2 6; do
      BENCH_ARGS=(--only s3 --libs ours --rounds $r)
      run "cg.s3.$r"
      P[$r]=$(calls publish); E[$r]=$(calls evalsha)
      I[$r]=$(callgrind_annotate "$out/cg.s3.$r" | sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
    done
    python3 -c "
i, p, e = ${I[6]} - ${I[2]}, ${P[6]} - ${P[2]}, ${E[6]} - ${E[2]}
print('ours, scenario 3: %d acquisitions, %.2f scripts and %.1fk instructions per acquisition' % (p, e / p, i / p / 1000))"
    ;;
  *) echo "usage: bench/profile/callgrind.sh pairs LIB... | contended" >&2; exit 2 ;;
esac
