#!/usr/bin/env bash
# Sets up the Arrow C++ test peer: a local venv (.venv/, git-ignored) with a
# pinned pyarrow wheel, and test/peers/arrow-cpp/shim.cc compiled with the
# system g++ against the wheel's headers and libarrow into
# .build/arrow-cpp/libarrow_shim.so (git-ignored), with an rpath to the wheel.
# Nothing of Arrow is copied into the repository: the wheel is the dependency.
#
# Idempotent: does nothing when the wheel is installed and the shim is newer
# than shim.cc and this script. Needs python3 (with venv) and g++ (C++20).
#
#   test/peers/arrow-cpp/setup.sh            # then: npm run test:arrow-cpp
#
# Environment: PYTHON (default python3), CXX (default g++).
set -euo pipefail

PYARROW_VERSION=26.0.1

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
venv="$root/.venv"
out_dir="$root/.build/arrow-cpp"
shim="$out_dir/libarrow_shim.so"
py="$venv/bin/python"
cxx="${CXX:-g++}"

installed() {
  [ -x "$py" ] && [ "$("$py" -c 'import pyarrow; print(pyarrow.__version__)' 2>/dev/null)" = "$PYARROW_VERSION" ]
}

if ! installed; then
  echo "arrow-cpp: installing pyarrow==$PYARROW_VERSION into $venv"
  [ -x "$py" ] || "${PYTHON:-python3}" -m venv "$venv"
  # The download cache lives inside the venv, so a re-run (or a rebuild of the
  # venv's packages) does not download the wheel again.
  PIP_CACHE_DIR="$venv/pip-cache" "$py" -m pip install --quiet --disable-pip-version-check \
    "pyarrow==$PYARROW_VERSION"
fi

if [ -f "$shim" ] && [ "$shim" -nt "$here/shim.cc" ] && [ "$shim" -nt "$here/setup.sh" ]; then
  echo "arrow-cpp: $shim is up to date (pyarrow $PYARROW_VERSION)"
  exit 0
fi

# The wheel ships libarrow.so.<ABI> only; create_library_symlinks() adds the
# libarrow.so link that -larrow needs (it writes into the venv, nothing else).
read -r include libdir < <("$py" -c '
import pyarrow as pa
pa.create_library_symlinks()
print(pa.get_include(), pa.get_library_dirs()[0])
')

mkdir -p "$out_dir"
echo "arrow-cpp: compiling $shim"
"$cxx" -std=c++20 -O1 -g -fPIC -shared -Wall -Wextra -Wno-unused-parameter \
  -I"$include" "$here/shim.cc" -o "$shim.tmp" \
  -L"$libdir" -larrow -Wl,-rpath,"$libdir" -lpthread
mv -f "$shim.tmp" "$shim"
echo "arrow-cpp: ready (pyarrow $PYARROW_VERSION, $shim)"
