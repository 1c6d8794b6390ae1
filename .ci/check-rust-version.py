#!/usr/bin/env python3
"""Check the crate's rust-version against its locked dependencies.

Reads `cargo metadata --format-version 1 --all-features --locked` and walks
the dependency graph of the package named on the command line (default
redisson-lock): its normal, build and dev dependencies, then theirs. Every
package reached that declares a `rust_version` must declare one no higher
than ours. Prints the highest declared and who declares it; exits 1 if any
is higher than ours, 2 if the metadata cannot be read.
"""
import json
import subprocess
import sys


def version(text):
    """'1.85' or '1.85.0' -> (1, 85, 0)."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "redisson-lock"
    try:
        out = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        meta = json.loads(out)
    except (subprocess.CalledProcessError, ValueError) as e:
        print(f"cannot read cargo metadata: {e}", file=sys.stderr)
        return 2
    packages = {p["id"]: p for p in meta["packages"]}
    roots = [p for p in meta["packages"] if p["name"] == name and p["source"] is None]
    if not roots:
        print(f"no workspace package named {name}", file=sys.stderr)
        return 2
    root = roots[0]
    ours = root.get("rust_version")
    if not ours:
        print(f"{name} declares no rust-version", file=sys.stderr)
        return 1
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    seen = set()
    todo = [root["id"]]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for dep in nodes[pid]["deps"]:
            todo.append(dep["pkg"])
    declared = sorted(
        (
            (version(p["rust_version"]), p["rust_version"], p["name"], p["version"])
            for pid in seen - {root["id"]}
            for p in [packages[pid]]
            if p.get("rust_version")
        ),
        reverse=True,
    )
    too_new = [d for d in declared if d[0] > version(ours)]
    print(f"{name}: rust-version {ours}; {len(seen) - 1} dependencies, {len(declared)} declare one")
    if declared:
        top = declared[0][0]
        at_top = ", ".join(f"{n} {v}" for key, _, n, v in declared if key == top)
        print(f"highest declared: {declared[0][1]} ({at_top})")
    if too_new:
        print(f"dependencies that need a newer Rust than {ours}:", file=sys.stderr)
        for _, rv, n, v in too_new:
            print(f"  {n} {v}: rust-version {rv}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
