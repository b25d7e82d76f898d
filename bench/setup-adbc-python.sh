#!/usr/bin/env bash
# Sets up the second driver floor of `npm run bench:service`: Python's
# adbc_driver_manager (the Apache Arrow ADBC project's driver manager, PyPI
# package adbc-driver-manager) beside the pinned pyarrow of the repository's
# venv (.venv/, git-ignored, made by test/peers/arrow-cpp/setup.sh, which
# bench:overhead's PyArrow side uses too). The version is the drivers' own
# (VERSION in test/adbc/setup-drivers.sh), so that both sides load one
# release of the project; the drivers themselves are the .so files that
# setup-drivers.sh unpacked, loaded by path from both sides.
#
# Where it cannot be installed (no venv and no way to make one, no network),
# it says so and exits 0: bench:service then prints its Python floor lines as
# skipped, with the reason. BENCH_SERVICE_PYTHON_REQUIRED=1 makes a failure
# fail. Idempotent and quick when the version is in place.
#
#   bash bench/setup-adbc-python.sh
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
py="${ARROW_CPP_PYTHON:-$root/.venv/bin/python}"
version="$(sed -n 's/^VERSION=//p' "$root/test/adbc/setup-drivers.sh")"

fail() {
  echo "adbc-python: $*; bench:service skips its Python floor" >&2
  [ "${BENCH_SERVICE_PYTHON_REQUIRED:-}" = 1 ] && exit 1
  exit 0
}

[ -n "$version" ] || fail "no VERSION in test/adbc/setup-drivers.sh"
if [ ! -x "$py" ] || ! "$py" -c 'import pyarrow' 2>/dev/null; then
  # The venv with pyarrow is test/peers/arrow-cpp/setup.sh's (it also compiles the Arrow C++ shim, with g++).
  bash "$root/test/peers/arrow-cpp/setup.sh" >&2 || fail "test/peers/arrow-cpp/setup.sh failed (the venv with pyarrow)"
fi
installed="$("$py" -c 'import importlib.metadata as m; print(m.version("adbc-driver-manager"))' 2>/dev/null || true)"
if [ "$installed" = "$version" ]; then
  exit 0
fi
echo "adbc-python: installing adbc-driver-manager==$version into $(dirname "$(dirname "$py")")"
# The download cache lives inside the venv, as test/peers/arrow-cpp/setup.sh's does.
PIP_CACHE_DIR="$(dirname "$(dirname "$py")")/pip-cache" "$py" -m pip install --quiet --disable-pip-version-check \
  "adbc-driver-manager==$version" || fail "pip install adbc-driver-manager==$version failed (no network, or no wheel for $(uname -s) $(uname -m))"
echo "adbc-python: ready (adbc-driver-manager $version, pyarrow $("$py" -c 'import pyarrow; print(pyarrow.__version__)'))"
