#!/usr/bin/env bash
# Builds the Flight SQL server that the tests of arrow-device/adbc run the
# Flight SQL ADBC driver against: arrow-go's example `sqlite_flightsql_server`
# (a Flight SQL server over an in-memory SQLite database, pure Go), at a
# pinned version, with the machine's Go. Everything Go downloads and builds
# stays under .build/flightsql (git-ignored): the module cache, the build
# cache and the binary, .build/flightsql/bin/sqlite_flightsql_server. A second
# run finds the binary of the pinned version and does nothing; the first
# takes about 3 CPU-minutes. test/adbc/flightsql.ts starts and stops it.
#
# Where Go is missing, or the build fails (no network to the Go module
# proxy), it says so and exits 0: the Flight SQL tests then skip with the
# reason. ADBC_FLIGHTSQL_REQUIRED=1 (CI) makes that a failure.
#
# Environment: GO (default: `go` on the PATH, else /usr/local/go/bin/go).
set -euo pipefail

VERSION=v18.8.0
MODULE=github.com/apache/arrow-go/v18/arrow/flight/flightsql/example/cmd/sqlite_flightsql_server

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/.build/flightsql"
bin="$out/bin/sqlite_flightsql_server"
stamp="$out/VERSION"
required="${ADBC_FLIGHTSQL_REQUIRED:-}"

fail() {
  echo "flightsql-server: $*; the tests that need a Flight SQL server will skip" >&2
  [ "$required" = 1 ] && exit 1
  exit 0
}

if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi
go="${GO:-}"
if [ -z "$go" ]; then
  if command -v go >/dev/null; then go="$(command -v go)"; elif [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go; fi
fi
[ -n "$go" ] && [ -x "$go" ] || fail "Go not found (set GO, or install Go: https://go.dev/dl/)"

echo "flightsql-server: building $MODULE@$VERSION with $("$go" version) into $out/bin (a few CPU-minutes the first time)"
mkdir -p "$out"
# Every Go path under .build/flightsql: nothing is written to the user's Go
# directories, and a second run reuses the caches. -modcacherw: Go makes its
# module cache read-only, which would keep `rm -rf .build` from removing it.
GOPATH="$out/gopath" GOMODCACHE="$out/gopath/pkg/mod" GOCACHE="$out/gocache" GOBIN="$out/bin" \
  GOFLAGS=-modcacherw GOTOOLCHAIN=local \
  "$go" install "$MODULE@$VERSION" || fail "go install $MODULE@$VERSION failed"
[ -x "$bin" ] || fail "go install did not produce $bin"
echo "$VERSION" >"$stamp"
echo "flightsql-server: ready ($bin, arrow-go $VERSION)"
