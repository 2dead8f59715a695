#!/usr/bin/env bash
# pbench --report from a CPU job on a real cluster (one worker slowed by the test-only switch), opened
# in headless Chromium from the file alone: after its script ran, the page must show the job, both
# workers' lanes, the throughput chart and the slowed worker named as the straggler. A screenshot is
# kept as ARTIFACT_DIR/report.png, the report as ARTIFACT_DIR/report.html.
# Usage: report_test.sh BIN_DIR ARTIFACT_DIR
BIN=$1
ARTIFACTS=${2:-.}
# shellcheck source=tests/dashboard/cluster.sh
source "$(dirname "$0")/cluster.sh"
skip_unless_installed chromium curl

start_scheduler
start_worker report-fast
PSCHED_TEST_CHUNK_DELAY_MS=10 start_worker report-slow
wait_for_workers 2
"$BIN/pbench" --scheduler "$SCHEDULER" -x 2000 -y 2000 --chunk-x 100 --chunk-y 100 --generator arange \
  --check -q --report "$WORK_DIR/report.html" --report-json "$WORK_DIR/report.json" \
  >"$WORK_DIR/pbench.log" 2>&1 || fail "the job failed"
grep -q '^Stragglers (10% or more below the median device): report-slow' "$WORK_DIR/pbench.log" ||
  fail "pbench's text does not name report-slow as the straggler"

browser --dump-dom "file://$WORK_DIR/report.html" >"$WORK_DIR/dom.html" || fail "chromium --dump-dom failed"
for want in 'data-rendered="yes"' '<canvas id="timeline"' '<canvas id="throughput"' \
  '>report-fast<' '>report-slow<' 'class="slow">report-slow on ' '>#1 arange<' \
  'No NVML figures in this run.'; do
  grep -qF "$want" "$WORK_DIR/dom.html" || fail "the rendered report has no '$want'"
done

screenshot "$ARTIFACTS/report.png" 1300,1000 "file://$WORK_DIR/report.html"
cp "$WORK_DIR/report.html" "$ARTIFACTS/report.html"
echo "PASS: the report renders the job, both lanes and the straggler; screenshot: $ARTIFACTS/report.png"
