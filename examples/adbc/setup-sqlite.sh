#!/usr/bin/env bash
# Sets up the SQLite ADBC driver for examples/adbc and its tests:
# libadbc_driver_sqlite.so (the Apache Arrow ADBC SQLite driver, SQLite linked
# in statically) from the pinned adbc-driver-sqlite wheel on PyPI, downloaded
# with pip and unpacked into .build/adbc-sqlite (git-ignored). Nothing of it is
# copied into the repository: the wheel is the dependency. Its entry point is
# AdbcDriverSqliteInit (AdbcDriverInit too).
#
# Where it cannot be installed (no python3 with pip or venv, no wheel for this
# platform, no network), it says so and exits 0: the SQLite ADBC tests then
# skip with a message. ADBC_SQLITE_REQUIRED=1 (CI) makes a failure fail.
# Idempotent and quick when the pinned version is in place, so `npm test`
# runs it first (pretest).
#
#   npm run setup:adbc        # then: npm run example:adbc
#
# Environment: PYTHON (default python3).
set -euo pipefail

VERSION=1.13.0
PACKAGE=adbc-driver-sqlite
MEMBER=adbc_driver_sqlite/libadbc_driver_sqlite.so

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/.build/adbc-sqlite"
lib="$out/libadbc_driver_sqlite.so"
stamp="$out/VERSION"
python="${PYTHON:-python3}"

fail() {
  echo "adbc-sqlite: $*; the SQLite ADBC tests will skip" >&2
  [ "${ADBC_SQLITE_REQUIRED:-}" = 1 ] && exit 1
  exit 0
}

if [ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi

command -v "$python" >/dev/null || fail "$python not found"
mkdir -p "$out/wheels"

# pip: the interpreter's own, else a small venv of ours (python3 -m venv brings pip).
if "$python" -m pip --version >/dev/null 2>&1; then
  pip=("$python" -m pip)
else
  [ -x "$out/venv/bin/python" ] || "$python" -m venv "$out/venv" >/dev/null 2>&1 || fail "$python has neither pip nor venv"
  pip=("$out/venv/bin/python" -m pip)
fi

wheel="$(ls "$out/wheels/"adbc_driver_sqlite-"$VERSION"-*.whl 2>/dev/null | head -1 || true)"
if [ -z "$wheel" ]; then
  echo "adbc-sqlite: downloading $PACKAGE==$VERSION (wheel) into $out/wheels"
  # --only-binary: the wheel carries the built driver; --no-deps: the driver needs nothing else.
  PIP_CACHE_DIR="$out/pip-cache" "${pip[@]}" download --quiet --disable-pip-version-check \
    --no-deps --only-binary=:all: --dest "$out/wheels" "$PACKAGE==$VERSION" ||
    fail "pip download $PACKAGE==$VERSION failed (no wheel for $(uname -s) $(uname -m), or no network)"
  wheel="$(ls "$out/wheels/"adbc_driver_sqlite-"$VERSION"-*.whl 2>/dev/null | head -1 || true)"
  [ -n "$wheel" ] || fail "no $PACKAGE $VERSION wheel was downloaded"
fi

# A wheel is a zip file: take the one shared library out of it.
"$python" - "$wheel" "$MEMBER" "$lib.tmp" <<'PY' || fail "cannot unpack $MEMBER from $wheel"
import shutil, sys, zipfile
wheel, member, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
mv -f "$lib.tmp" "$lib"
echo "$VERSION" >"$stamp"
echo "adbc-sqlite: ready ($lib, $PACKAGE $VERSION)"
