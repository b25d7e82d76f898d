#!/usr/bin/env bash
# Sets up the DuckDB test peer: libduckdb.so from the npm package
# @duckdb/node-bindings-linux-x64, installed into .build/duckdb (git-ignored)
# rather than listed in package.json. That package exists for Linux x64 (glibc)
# only; as a devDependency it made `npm ci` fail with EBADPLATFORM on macOS and
# ARM, and as an optionalDependency every consumer of arrow-device would
# download it. test/peers/duckdb/duckdb.ts finds it here.
#
# Where the package does not exist, or the install fails, it says so and exits
# 0: the DuckDB tests then skip with a message. DUCKDB_REQUIRED=1 (CI) makes a
# failure fail. Idempotent and quick when the pinned version is in place, so
# `npm test` runs it first (pretest).
#
#   npm run setup:duckdb
set -euo pipefail

VERSION=1.5.6-r.1
PACKAGE=@duckdb/node-bindings-linux-x64

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
prefix="$root/.build/duckdb"
pkg_json="$prefix/node_modules/$PACKAGE/package.json"

fail() {
  echo "duckdb: $*; the DuckDB tests will skip" >&2
  [ "${DUCKDB_REQUIRED:-}" = 1 ] && exit 1
  exit 0
}

if [ "$(uname -s)" != Linux ] || [ "$(uname -m)" != x86_64 ]; then
  fail "$PACKAGE is built for Linux x86_64 only (this is $(uname -s) $(uname -m))"
fi

if [ -f "$pkg_json" ] && grep -q "\"version\": \"$VERSION\"" "$pkg_json"; then
  exit 0
fi

echo "duckdb: installing $PACKAGE@$VERSION into $prefix"
mkdir -p "$prefix"
# --prefer-offline: a machine that installed it once (npm's cache) needs no network.
npm install --no-save --no-package-lock --no-audit --no-fund --prefer-offline \
  --prefix "$prefix" "$PACKAGE@$VERSION" >/dev/null ||
  fail "npm install $PACKAGE@$VERSION failed"
echo "duckdb: ready ($prefix/node_modules/$PACKAGE/libduckdb.so)"
