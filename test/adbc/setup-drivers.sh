#!/usr/bin/env bash
# Sets up the ADBC drivers of the Apache Arrow ADBC project that the tests,
# examples and benchmarks of arrow-device/adbc run: the SQLite driver
# (libadbc_driver_sqlite.so, SQLite linked in statically), the PostgreSQL
# driver (libadbc_driver_postgresql.so, libpq linked in statically) and the
# Flight SQL driver (libadbc_driver_flightsql.so, Go, needing only libc), each
# from its pinned wheel on PyPI, downloaded with pip and unpacked into
# .build/adbc-sqlite, .build/adbc-postgresql and .build/adbc-flightsql
# (git-ignored). Nothing of them is copied into the repository: the wheels
# are the dependency. (DuckDB's driver is part of libduckdb.so:
# test/peers/duckdb/setup.sh.) Then the Flight SQL server the tests talk to
# (test/adbc/setup-flightsql-server.sh: arrow-go's example server, built with Go).
#
# Where a driver cannot be installed (no python3 with pip or venv, no wheel
# for this platform, no network), it says so and exits 0: the tests that need
# it then skip with a message. ADBC_SQLITE_REQUIRED=1 / ADBC_POSTGRESQL_REQUIRED=1
# / ADBC_FLIGHTSQL_REQUIRED=1 (CI) make a failure fail (the last covers the
# server too). Idempotent and quick when the pinned versions are in place, so
# `npm test` runs it first (pretest).
#
#   npm run setup:adbc
#
# Environment: PYTHON (default python3).
set -euo pipefail

VERSION=1.13.0

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"

# setup <name>: the wheel adbc-driver-<name>, its member adbc_driver_<name>/libadbc_driver_<name>.so.
setup() {
  local name="$1" required="$2"
  local package="adbc-driver-$name" dist="adbc_driver_$name"
  local out="$root/.build/adbc-$name"
  local lib="$out/libadbc_driver_$name.so" stamp="$out/VERSION"
  fail() {
    echo "adbc-$name: $*; the tests that need the $name ADBC driver will skip" >&2
    [ "$required" = 1 ] && exit 1
    return 0
  }
  if [ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VERSION" ]; then
    return 0
  fi
  command -v "$python" >/dev/null || { fail "$python not found"; return 0; }
  mkdir -p "$out/wheels"
  local pip
  # pip: the interpreter's own, else a small venv of ours (python3 -m venv brings pip).
  if "$python" -m pip --version >/dev/null 2>&1; then
    pip=("$python" -m pip)
  else
    [ -x "$out/venv/bin/python" ] || "$python" -m venv "$out/venv" >/dev/null 2>&1 || { fail "$python has neither pip nor venv"; return 0; }
    pip=("$out/venv/bin/python" -m pip)
  fi
  local wheel
  wheel="$(ls "$out/wheels/$dist-$VERSION"-*.whl 2>/dev/null | head -1 || true)"
  if [ -z "$wheel" ]; then
    echo "adbc-$name: downloading $package==$VERSION (wheel) into $out/wheels"
    # --only-binary: the wheel carries the built driver; --no-deps: the driver needs nothing else.
    PIP_CACHE_DIR="$out/pip-cache" "${pip[@]}" download --quiet --disable-pip-version-check \
      --no-deps --only-binary=:all: --dest "$out/wheels" "$package==$VERSION" ||
      { fail "pip download $package==$VERSION failed (no wheel for $(uname -s) $(uname -m), or no network)"; return 0; }
    wheel="$(ls "$out/wheels/$dist-$VERSION"-*.whl 2>/dev/null | head -1 || true)"
    [ -n "$wheel" ] || { fail "no $package $VERSION wheel was downloaded"; return 0; }
  fi
  # A wheel is a zip file: take the one shared library out of it.
  "$python" - "$wheel" "$dist/libadbc_driver_$name.so" "$lib.tmp" <<'PY' || { fail "cannot unpack the driver from $wheel"; return 0; }
import shutil, sys, zipfile
wheel, member, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  mv -f "$lib.tmp" "$lib"
  echo "$VERSION" >"$stamp"
  echo "adbc-$name: ready ($lib, $package $VERSION)"
}

setup sqlite "${ADBC_SQLITE_REQUIRED:-}"
setup postgresql "${ADBC_POSTGRESQL_REQUIRED:-}"
setup flightsql "${ADBC_FLIGHTSQL_REQUIRED:-}"
bash "$here/setup-flightsql-server.sh"
