#!/usr/bin/env bash
# promtool check metrics on a scrape of a live psched's /metrics (two workers, one finished job),
# the check Prometheus' own tooling makes of names, types, HELP text and histogram layout.
# Usage: promtool_test.sh BIN_DIR [ARTIFACT_DIR]
BIN=$1
# shellcheck source=tests/dashboard/cluster.sh
source "$(dirname "$0")/cluster.sh"
skip_unless_installed promtool curl

start_scheduler
start_worker prom-a
# prom-b's NVML is the stand-in library (a test-only switch), so psched_gpu_* series are checked too.
PSCHED_TEST_NVML_LIBRARY="$BIN/libstand_in_nvml.so" PSCHED_TEST_NVML_PCI_BUS_ID=00000000:3B:00.0 \
  start_worker prom-b
wait_for_workers 2
gpu_reported() { curl -fsS --max-time 5 "$DASHBOARD/metrics" | grep -q '^psched_gpu_temperature_celsius{'; }
wait_until 30 gpu_reported || fail "no psched_gpu_ series from prom-b's stand-in NVML"
"$BIN/pbench" --scheduler "$SCHEDULER" -x 1000 -y 1000 --chunk-x 100 --chunk-y 100 \
  --generator arange --check -q >"$WORK_DIR/pbench.log" 2>&1 || fail "the job failed"

curl -fsS --max-time 5 "$DASHBOARD/metrics" >"$WORK_DIR/metrics.txt" || fail "GET /metrics"
if ! promtool check metrics <"$WORK_DIR/metrics.txt" >"$WORK_DIR/promtool.log" 2>&1; then
  cat "$WORK_DIR/promtool.log" >&2
  fail "promtool check metrics found problems"
fi
for want in 'psched_workers 2' 'psched_jobs_total{state="done"} 1' \
  'psched_chunk_seconds_count 100' 'psched_bytes_reduced_total 8000000'; do
  grep -qxF "$want" "$WORK_DIR/metrics.txt" || fail "no line '$want' in /metrics"
done
grep -qE '^psched_gpu_temperature_celsius\{worker="prom-b",id="[0-9]+",uuid="GPU-5a11d1e0-0000-4000-8000-000000000001",host="[^"]+"\} 61$' \
  "$WORK_DIR/metrics.txt" || fail "no psched_gpu_temperature_celsius sample for prom-b"
echo "PASS: promtool check metrics accepts $(grep -vc '^#' "$WORK_DIR/metrics.txt") samples"
