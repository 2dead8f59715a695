#!/usr/bin/env bash
# pbench --burn's HTML report from a CPU burn on a real cluster (one worker flipping chunk 7's last
# bit, the test-only switch), opened in headless Chromium from the file alone: after its script
# ran, the page must show the cluster's FAIL, every worker's verdict, the flipper's lost vote with
# its chunk, the mismatch, and the throughput chart. A screenshot is kept as
# ARTIFACT_DIR/burn_report.png, the report as ARTIFACT_DIR/burn_report.html.
# Usage: burn_report_test.sh BIN_DIR ARTIFACT_DIR
BIN=$1
ARTIFACTS=${2:-.}
# shellcheck source=tests/dashboard/cluster.sh
source "$(dirname "$0")/cluster.sh"
skip_unless_installed chromium curl

start_scheduler
start_worker burn-good-1
start_worker burn-good-2
PSCHED_TEST_FLIP_CHUNK=7 start_worker burn-flipper
wait_for_workers 3
status=0
"$BIN/pbench" --scheduler "$SCHEDULER" -x 400 -y 400 --chunk-x 100 --chunk-y 100 --burn 3s --burn-slow 0.5 -q \
  --burn-report "$WORK_DIR/burn.html" >"$WORK_DIR/pbench.log" 2>&1 || status=$?
[[ $status -eq 1 ]] || fail "pbench --burn exited $status, not 1 (a failure)"
grep -q "^GPU 'burn-flipper' on .*: FAIL" "$WORK_DIR/pbench.log" || fail "pbench's text does not fail burn-flipper"

browser --dump-dom "file://$WORK_DIR/burn.html" >"$WORK_DIR/dom.html" || fail "chromium --dump-dom failed"
for want in 'data-rendered="yes"' '<canvas id="burn-throughput"' '<span class="verdict-fail">FAIL</span>' \
  '>burn-good-1<' '>burn-good-2<' '>burn-flipper<' '<span class="verdict-pass">PASS</span>' \
  'chunk 7: its copy lost the vote' ' (suspect)' 'No NVML figures in this burn.'; do
  grep -qF "$want" "$WORK_DIR/dom.html" || fail "the rendered burn report has no '$want'"
done

screenshot "$ARTIFACTS/burn_report.png" 1300,1200 "file://$WORK_DIR/burn.html"
cp "$WORK_DIR/burn.html" "$ARTIFACTS/burn_report.html"
echo "PASS: the burn report renders the verdicts, the lost vote and the charts; screenshot: $ARTIFACTS/burn_report.png"
