#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (the README's test command; .ci/run calls it).
#   tests/run.sh            everything
#   PSCHED_BUILD_DIR=...    build directory (default: build)
#   PSCHED_SANITIZE_TESTS=0 skip the ASan/UBSan build and its tests; PSCHED_FUZZ_SECONDS=0 the fuzzers
# The CUDA backend is compiled when nvcc is present; its tests skip with a message without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${PSCHED_BUILD_DIR:-build}
jobs=$(nproc)

deploy/install-deps.sh --test

# Release, the build users run (deploy/demo.sh, the GPU binaries), and any compiler warning fails the
# build (PSCHED_WERROR): GCC's -O3 finds warnings that -O2 does not, so CI builds what users build.
echo "== configure + build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPSCHED_TESTS=ON -DPSCHED_WERROR=ON >/dev/null
cmake --build "$build" -j "$jobs"

echo "== tests"
cd "$build"
ctest --output-on-failure -j "$jobs" --timeout 600
cd "$root"

# The same unit, end-to-end, security and dashboard tests on an AddressSanitizer + UBSan build (CPU
# backend). Daemons the tests start are sanitized too; every report (ASan, UBSan, LSan) from any
# process lands in $asan/sanitizer-reports, and any report fails the run. Left out, with reasons:
# the deploy tests (they test shell scripts and ssh/Slurm/systemd, run once above) and the
# dashboard tests driving third-party tools (promtool, Prometheus, Chromium: not our memory).
# PSCHED_SANITIZE_TESTS=0 skips this stage, PSCHED_FUZZ_SECONDS=0 the fuzzers.
asan=${PSCHED_ASAN_BUILD_DIR:-build-asan}
if [[ "${PSCHED_SANITIZE_TESTS:-1}" != 0 ]]; then
  echo "== ASan + UBSan: configure + build ($asan)"
  cmake -S . -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPSCHED_CUDA=OFF -DPSCHED_SANITIZE=ON -DPSCHED_WERROR=ON >/dev/null
  cmake --build "$asan" -j "$jobs"
  echo "== ASan + UBSan: tests"
  reports="$root/$asan/sanitizer-reports"
  rm -rf "$reports" && mkdir -p "$reports"
  cd "$asan"
  asan_ok=1
  ASAN_OPTIONS="detect_leaks=1:log_path=$reports/asan" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan" \
    ctest --output-on-failure -j "$jobs" --timeout 900 -E '^deploy|\(shell\)' || asan_ok=0
  cd "$root"
  # A file holding only LeakSanitizer's "Running thread N was not suspended. False leaks are
  # possible." reports nothing: its exit-time stop-the-world saw a thread vanish or appear meanwhile
  # (a process killed while it checked; google/sanitizers#1479). A leak that this could make up
  # would be an "ERROR: LeakSanitizer" report in the same file, which still fails the run.
  for f in "$reports"/*; do
    [[ -s $f ]] || continue
    if ! grep -qv 'Running thread [0-9]* was not suspended. False leaks are possible.$' "$f"; then
      echo "note: $(basename "$f"): $(head -n 1 "$f") (a notice, not a report)" >&2
      rm -f "$f"
    fi
  done
  if compgen -G "$reports/*" >/dev/null; then
    echo "sanitizer reports from the processes the tests ran:" >&2
    head -n 60 "$reports"/* >&2
    asan_ok=0
  fi
  [[ $asan_ok == 1 ]] || exit 1
fi

# libFuzzer targets (clang, their own build dir), each for a bounded time on tests/fuzz/corpus/.
if [[ "${PSCHED_FUZZ_SECONDS:-60}" != 0 ]]; then
  PSCHED_FUZZ_SECONDS=${PSCHED_FUZZ_SECONDS:-60} tests/fuzz/run.sh
fi
