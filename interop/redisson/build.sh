#!/usr/bin/env bash
# Builds one version of the real Java Redisson client from source, offline, against Debian's jars,
# using the shared builder in $SHARED/redisson-java (read-only) and the Debian patches kept here.
#
#   bash interop/redisson/build.sh VERSION OUT_DIR     # VERSION: 4.7.0, 3.45.0, 3.23.0 or 3.17.0
#
# Result (same as the shared build.sh): OUT_DIR/lib/redisson-VERSION.jar plus its runtime jars, and
# OUT_DIR/classpath (one ':'-separated line, for `java -cp "$(cat OUT_DIR/classpath)"`).
# A finished OUT_DIR (OUT_DIR/classpath and OUT_DIR/lib/redisson-VERSION.jar exist) is reused.
#
# Environment:
#   REDISSON_SHARED  folder holding redisson-java/ (default: the `shared` folder beside this checkout)
#   SKIP_APT=1       passed through: do not apt-get install the Debian packages the build needs
#
# 4.7.0 is built by the shared build.sh with its own patch. For the 3.x versions, the shared
# build.sh is run from a temporary mirror of the shared folder (it locates its sources relative to
# itself), whose src/ holds a re-packed tarball without the parts that need libraries Debian does not
# package (see EXTRA_REMOVALS below), with REDISSON_PATCH pointing at redisson-VERSION-debian.patch here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SHARED=${REDISSON_SHARED:-$(dirname "$REPO")/shared}
SUPPORTED="4.7.0 3.45.0 3.23.0 3.17.0"

log() { echo "[interop/redisson] $*" >&2; }
die() { echo "[interop/redisson] ERROR: $*" >&2; exit 1; }

[[ $# -eq 2 ]] || die "usage: $0 VERSION OUT_DIR   (VERSION: $SUPPORTED)"
VERSION=$1
OUT_ARG=$2
[[ -n $OUT_ARG ]] || die "OUT_DIR must not be empty"

# Files and folders (relative to org/redisson/ in the sources) removed before compiling, on top of
# what the shared build.sh removes. They need libraries Debian does not package (Spring Data/Session/
# Cache, FST, JBoss Marshalling, Apache Fury); nothing that locks, semaphores, latches or pub/sub use.
case $VERSION in
  4.7.0)  EXTRA_REMOVALS=() ;;
  3.45.0) EXTRA_REMOVALS=(spring codec/FstCodec.java codec/MarshallingCodec.java codec/FuryCodec.java) ;;
  3.23.0) EXTRA_REMOVALS=(spring codec/FstCodec.java codec/MarshallingCodec.java) ;;
  3.17.0) EXTRA_REMOVALS=(spring codec/FstCodec.java codec/MarshallingCodec.java) ;;
  *) die "unsupported Redisson version '$VERSION' (supported: $SUPPORTED)" ;;
esac

SHARED_JAVA=$SHARED/redisson-java
[[ -d $SHARED_JAVA ]] || die "shared Redisson builder not found: $SHARED_JAVA (set REDISSON_SHARED to the folder holding redisson-java/)"
[[ -f $SHARED_JAVA/build.sh ]] || die "missing $SHARED_JAVA/build.sh"
TARBALL=$SHARED_JAVA/src/redisson-$VERSION.tar.gz
[[ -f $TARBALL ]] || die "missing Redisson $VERSION sources: $TARBALL"

# absolute OUT_DIR, so the result does not depend on the directory the shared build.sh runs in
mkdir -p "$(dirname "$OUT_ARG")" || die "cannot create the parent folder of $OUT_ARG"
OUT=$(cd "$(dirname "$OUT_ARG")" && pwd)/$(basename "$OUT_ARG")

if [[ -f $OUT/classpath && -f $OUT/lib/redisson-$VERSION.jar ]]; then
  log "Redisson $VERSION already built in $OUT: reusing it (delete the folder to rebuild)"
  exit 0
fi

export SKIP_APT=${SKIP_APT:-0}
START=$SECONDS

check_result() {
  [[ -f $OUT/classpath && -f $OUT/lib/redisson-$VERSION.jar ]] \
    || die "Redisson $VERSION build did not produce $OUT/classpath and $OUT/lib/redisson-$VERSION.jar"
  log "Redisson $VERSION built in $((SECONDS - START)) s: $OUT (java -cp \"\$(cat $OUT/classpath)\")"
}

if [[ $VERSION == 4.7.0 ]]; then
  log "building Redisson 4.7.0 with the shared builder and its patch: $SHARED_JAVA/build.sh (SKIP_APT=$SKIP_APT)"
  env -u REDISSON_PATCH bash "$SHARED_JAVA/build.sh" "$OUT" 4.7.0 \
    || die "shared build.sh failed for Redisson 4.7.0"
  check_result
  exit 0
fi

PATCH=$HERE/redisson-$VERSION-debian.patch
[[ -f $PATCH ]] || die "missing Debian build patch for $VERSION: $PATCH"
command -v tar >/dev/null || die "tar is required"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redisson-$VERSION-build.XXXXXX") || die "mktemp failed"
trap 'rm -rf "$TMP"' EXIT

# mirror of the shared folder: a copy of build.sh (it derives its sources from its own location),
# the shared stubs, and a re-packed source tarball without EXTRA_REMOVALS
MIRROR=$TMP/redisson-java
mkdir -p "$MIRROR/src" "$TMP/unpack"
cp "$SHARED_JAVA/build.sh" "$MIRROR/build.sh" || die "cannot copy $SHARED_JAVA/build.sh"
if [[ -d $SHARED_JAVA/stubs ]]; then
  ln -s "$SHARED_JAVA/stubs" "$MIRROR/stubs"
else
  die "missing $SHARED_JAVA/stubs"
fi

log "unpacking $TARBALL"
tar -xzf "$TARBALL" -C "$TMP/unpack" || die "cannot unpack $TARBALL"
ORG=$TMP/unpack/redisson-$VERSION/redisson/src/main/java/org/redisson
[[ -d $ORG ]] || die "unexpected layout in $TARBALL: no redisson/src/main/java/org/redisson"
for rel in "${EXTRA_REMOVALS[@]}"; do
  [[ -e $ORG/$rel ]] || die "expected org/redisson/$rel in Redisson $VERSION sources, not found (tarball changed?)"
  log "removing org/redisson/$rel (needs a library Debian does not package)"
  rm -rf "${ORG:?}/$rel"
done
log "re-packing the sources into $MIRROR/src/redisson-$VERSION.tar.gz"
tar -czf "$MIRROR/src/redisson-$VERSION.tar.gz" -C "$TMP/unpack" "redisson-$VERSION" \
  || die "cannot re-pack the Redisson $VERSION sources"
rm -rf "$TMP/unpack"

log "building Redisson $VERSION with a copy of $SHARED_JAVA/build.sh, REDISSON_PATCH=$PATCH (SKIP_APT=$SKIP_APT)"
REDISSON_PATCH=$PATCH bash "$MIRROR/build.sh" "$OUT" "$VERSION" \
  || die "shared build.sh failed for Redisson $VERSION (patch $PATCH)"
check_result
