#!/usr/bin/env bash
# One command from a fresh checkout to a benchmark result: installs what is missing, builds, and runs
# the DeepOps benchmark (sum.py: sum of (x + 1)[::2, ::2] over normal(10, 1) float64) on a
# local cluster that pbench starts and stops itself.
#   - with GPUs: all of them, the full 500000 x 500000 (2 TB) array in 10000 x 10000 chunks;
#   - without:   CPU workers on a 10000 x 10000 (800 MB) array, so it finishes in seconds.
# Extra arguments go to pbench (e.g. deploy/demo.sh --json).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PSCHED_BUILD_DIR:-build}

deploy/install-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target psched pcuda-worker pbench

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [[ "$gpus" -gt 0 ]] && "$build/bin/pcuda-worker" --version | grep -q cuda; then
  echo "demo: $gpus GPU(s) found: the DeepOps benchmark, 500000 x 500000 float64 (2 TB), on all of them"
  exec "$build/bin/pbench" -g "$gpus" --check "$@"
fi
cores=$(nproc)
echo "demo: no usable GPU here; running on $cores CPU cores at 10000 x 10000 (800 MB) instead of 2 TB"
exec "$build/bin/pbench" -c 1 --nthreads "$cores" -x 10000 -y 10000 --chunk-x 1000 --chunk-y 1000 --check "$@"
