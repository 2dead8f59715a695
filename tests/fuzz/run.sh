#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (their own build dir) and runs each for a bounded time on
# the seed corpus in tests/fuzz/corpus/<target>/. Any crash, leak, sanitizer report or broken
# invariant fails (non-zero exit); the input that did it is kept in $build/fuzz-artifacts/.
#   tests/fuzz/run.sh                  each target for PSCHED_FUZZ_SECONDS (default 60)
#   PSCHED_FUZZ_BUILD_DIR=...          build directory (default: build-fuzz)
# New inputs the fuzzer finds go to a scratch corpus in the build dir, never into the repo.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${PSCHED_FUZZ_BUILD_DIR:-build-fuzz}
seconds=${PSCHED_FUZZ_SECONDS:-60}
targets=(fuzz_scheduler fuzz_tls fuzz_job_spec fuzz_storage)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (deploy/install-deps.sh --test installs it)" >&2
  exit 1
fi
echo "== fuzz: configure + build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DPSCHED_CUDA=OFF -DPSCHED_SANITIZE=ON -DPSCHED_FUZZ=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

mkdir -p "$build/fuzz-artifacts"
status=0
for t in "${targets[@]}"; do
  scratch="$build/fuzz-corpus/$t"
  mkdir -p "$scratch"
  echo "== fuzz: $t for ${seconds}s"
  # -rss_limit_mb: the scheduler target allocates per job; 2 GB is far above what its inputs need.
  if ! "$build/bin/$t" "$scratch" "tests/fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-artifacts/$t-" >"$build/fuzz-artifacts/$t.log" 2>&1; then
    echo "fuzz: $t FAILED; last lines of $build/fuzz-artifacts/$t.log:" >&2
    tail -n 40 "$build/fuzz-artifacts/$t.log" >&2
    status=1
  else
    # The coverage reached (DONE cov/ft), and what a target says it reached (fuzz_tls: past the handshake).
    grep -E "stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb|DONE |^reached: " \
      "$build/fuzz-artifacts/$t.log" |
      sed "s/^/  $t: /"
  fi
done
exit $status
