#!/usr/bin/env bash
# Puts Apache DataFusion Ballista 55.0.0 (a distributed SQL engine: a scheduler
# that serves Arrow Flight SQL, cargo feature `flight-sql`, and executor
# processes) where test/adbc/ballista.ts finds it: a cache outside the
# checkout, ${BALLISTA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/arrow-device/ballista-55.0.0},
# binaries in its bin/. Outside the checkout so that every clone on the
# machine (CI's fresh one included) finds a build made once. In order:
#
#   1. ../shared/ballista/ballista-55.0.0-linux-x64.tar.xz beside the checkout
#      (CI has it; see ../shared/ballista/README.md): the two binaries built
#      once from crates.io by the commands of step 3. The tarball and each
#      binary are checked against the sha256 sums pinned below before use.
#   2. Else the cache, as a previous run left it (unpacked or built).
#   3. Else a build from crates.io with the machine's cargo, about an hour on
#      2 cores (40 min for the scheduler, 19 for the executor, measured
#      2026-11-28), 2 GB of target directory (removed after):
#        CARGO_TARGET_DIR=<dir> cargo install --locked ballista-scheduler@55.0.0 --features flight-sql --root <root>
#        CARGO_TARGET_DIR=<dir> cargo install --locked ballista-executor@55.0.0 --root <root>
#
# Linux x64 only (the prebuilt binaries are; a build elsewhere is untried).
# Where none of the three works it says why and exits 0: the Ballista tests
# then skip with the reason (and fail where BALLISTA_REQUIRED=1 is set, as
# npm run test:adbc and CI set it). BALLISTA_REQUIRED=1 here makes a failure
# of this script fail. --no-build leaves step 3 out (npm run test:adbc and
# bench:adbc: an hour of build is asked for by name, never on the way).
#
#   npm run setup:ballista
#   bash test/adbc/setup-ballista.sh --no-build
#
# Environment: BALLISTA_DIR (the cache), BALLISTA_SHARED (the folder of the
# tarball, default ../shared/ballista beside the checkout), CARGO (default cargo).
set -euo pipefail

VERSION=55.0.0
TARBALL_SHA256=2f75e5e5d8604d5225ce88ce3be111deea20da473863f518a7d2988a5c6b4772
SCHEDULER_SHA256=d3f7486fc856829b3f2b221d15f96531b8c28c83b11b7e78c389d45c758666c7
EXECUTOR_SHA256=2de4fbd7b637b3299b194040fde139902a626c14d6c0df78326a283791e10a34

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${BALLISTA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/arrow-device/ballista-$VERSION}"
shared="${BALLISTA_SHARED:-$(cd "$root/.." && pwd)/shared/ballista}"
tarball="$shared/ballista-$VERSION-linux-x64.tar.xz"
stamp="$cache/SOURCE"
required="${BALLISTA_REQUIRED:-}"
build=1
[ "${1:-}" = --no-build ] && build=0

fail() {
  if [ "$required" = 1 ]; then
    echo "ballista: $* (BALLISTA_REQUIRED=1)" >&2
    exit 1
  fi
  echo "ballista: $*; the Ballista tests will skip" >&2
  exit 0
}

ready() {
  [ -x "$cache/bin/ballista-scheduler" ] && [ -x "$cache/bin/ballista-executor" ] && [ -f "$stamp" ]
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

[ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ] || fail "Linux x64 only (this is $(uname -s) $(uname -m))"

# 1. The prebuilt tarball, when present. The stamp records the tarball it came from, so a second run
# with the same tarball only checks the tarball's sum (about a second) and does not unpack again.
if [ -f "$tarball" ]; then
  got="$(sha "$tarball")"
  [ "$got" = "$TARBALL_SHA256" ] || fail "$tarball has sha256 $got, not $TARBALL_SHA256"
  if ready && [ "$(cat "$stamp")" = "shared $TARBALL_SHA256" ]; then
    exit 0
  fi
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/unpack.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  echo "ballista: unpacking $tarball into $cache/bin"
  tar xJf "$tarball" -C "$tmp" || fail "cannot unpack $tarball"
  for pair in "ballista-scheduler $SCHEDULER_SHA256" "ballista-executor $EXECUTOR_SHA256"; do
    set -- $pair
    f="$(find "$tmp" -type f -name "$1" | head -1)"
    [ -n "$f" ] || fail "$tarball holds no $1"
    got="$(sha "$f")"
    [ "$got" = "$2" ] || fail "$1 in $tarball has sha256 $got, not $2"
  done
  mkdir -p "$cache/bin"
  rm -f "$stamp"
  # mv within one file system: a binary is either the old one or the whole new one, never half written.
  for b in ballista-scheduler ballista-executor; do
    f="$(find "$tmp" -type f -name "$b" | head -1)"
    chmod 755 "$f"
    mv -f "$f" "$cache/bin/$b"
  done
  echo "shared $TARBALL_SHA256" >"$stamp"
  echo "ballista: ready ($cache/bin, Ballista $VERSION from $tarball)"
  exit 0
fi

# 2. The cache, as a previous run left it.
if ready; then
  exit 0
fi

# 3. A build from crates.io.
[ "$build" = 1 ] || fail "not in $cache/bin, and no $tarball (npm run setup:ballista builds it with cargo, about an hour)"
cargo="${CARGO:-cargo}"
command -v "$cargo" >/dev/null || fail "no $tarball and no cargo to build Ballista with (install Rust: https://rustup.rs, then npm run setup:ballista builds it, about an hour)"
target="$cache/target"
mkdir -p "$cache"
rm -f "$stamp"
echo "ballista: no $tarball; building Ballista $VERSION with $("$cargo" --version) into $cache (about an hour on 2 cores; $target holds 2 GB meanwhile)"
start=$(date +%s)
CARGO_TARGET_DIR="$target" "$cargo" install --locked "ballista-scheduler@$VERSION" --features flight-sql --root "$cache" ||
  fail "cargo install ballista-scheduler@$VERSION --features flight-sql failed"
CARGO_TARGET_DIR="$target" "$cargo" install --locked "ballista-executor@$VERSION" --root "$cache" ||
  fail "cargo install ballista-executor@$VERSION failed"
[ -x "$cache/bin/ballista-scheduler" ] && [ -x "$cache/bin/ballista-executor" ] || fail "cargo install did not produce $cache/bin/ballista-scheduler and ballista-executor"
rm -rf "$target"
echo "built $("$cargo" --version)" >"$stamp"
echo "ballista: ready ($cache/bin, Ballista $VERSION built in $(( ($(date +%s) - start) / 60 )) min)"
