#!/usr/bin/env bash
# promtool check metrics on a scrape of a live psched's /metrics (two workers, one finished job and
# one --verify job that finds prom-b's flipped chunk; prom-b's psched_gpu_* series from a stand-in
# NVML), the check Prometheus' own tooling makes of names, types, HELP text and histogram layout.
# Usage: promtool_test.sh BIN_DIR [ARTIFACT_DIR]
BIN=$1
# shellcheck source=tests/dashboard/cluster.sh
source "$(dirname "$0")/cluster.sh"
skip_unless_installed promtool curl

start_scheduler
start_worker prom-a
# Test-only switches on prom-b: it flips the last bit of chunk 100's partial (the first job has no
# chunk 100), and its NVML is the stand-in library, so psched_gpu_* series are checked too.
PSCHED_TEST_FLIP_CHUNK=100 PSCHED_TEST_NVML_LIBRARY="$BIN/libstand_in_nvml.so" \
  PSCHED_TEST_NVML_PCI_BUS_ID=00000000:3B:00.0 start_worker prom-b
wait_for_workers 2
gpu_reported() { curl -fsS --max-time 5 "${CURL_ARGS[@]}" "$DASHBOARD/metrics" | grep -q '^psched_gpu_temperature_celsius{'; }
wait_until 30 gpu_reported || fail "no psched_gpu_ series from prom-b's stand-in NVML"
"$BIN/pbench" --scheduler "$SCHEDULER" -x 1000 -y 1000 --chunk-x 100 --chunk-y 100 \
  --generator arange --check -q >"$WORK_DIR/pbench.log" 2>&1 || fail "the job failed"

# 101 one-element chunks, each computed on both workers; the copies of chunk 100 differ, and with
# no third worker both are suspects. pbench exits 1 on the mismatch.
if "$BIN/pbench" --scheduler "$SCHEDULER" -x 1 -y 101 --chunk-x 1 --chunk-y 1 --row-step 1 \
  --col-step 1 --generator arange --verify -q >"$WORK_DIR/verify.log" 2>&1; then
  fail "pbench --verify exited 0 with prom-b flipping chunk 100"
fi

curl -fsS --max-time 5 "$DASHBOARD/metrics" >"$WORK_DIR/metrics.txt" || fail "GET /metrics"
if ! promtool check metrics <"$WORK_DIR/metrics.txt" >"$WORK_DIR/promtool.log" 2>&1; then
  cat "$WORK_DIR/promtool.log" >&2
  fail "promtool check metrics found problems"
fi
for want in 'psched_workers 2' 'psched_jobs_total{state="done"} 2' \
  'psched_chunk_seconds_count 302' 'psched_bytes_reduced_total 8001616' \
  'psched_verify_chunks_total 101' 'psched_verify_mismatches_total{worker="prom-a"} 1' \
  'psched_verify_mismatches_total{worker="prom-b"} 1'; do
  grep -qxF "$want" "$WORK_DIR/metrics.txt" || fail "no line '$want' in /metrics"
done
grep -qE '^psched_gpu_temperature_celsius\{worker="prom-b",id="[0-9]+",uuid="GPU-5a11d1e0-0000-4000-8000-000000000001",host="[^"]+"\} 61$' \
  "$WORK_DIR/metrics.txt" || fail "no psched_gpu_temperature_celsius sample for prom-b"
echo "PASS: promtool check metrics accepts $(grep -vc '^#' "$WORK_DIR/metrics.txt") samples"
