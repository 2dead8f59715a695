#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (the README's test command; .ci/run calls it).
#   tests/run.sh            everything
#   PSCHED_BUILD_DIR=...    build directory (default: build)
# The CUDA backend is compiled when nvcc is present; its tests skip with a message without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${PSCHED_BUILD_DIR:-build}
jobs=$(nproc)

deploy/install-deps.sh --test

echo "== configure + build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs"

echo "== tests"
cd "$build"
ctest --output-on-failure -j "$jobs" --timeout 600
cd "$root"
