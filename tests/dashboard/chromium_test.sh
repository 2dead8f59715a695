#!/usr/bin/env bash
# Headless Chromium loads the status page while a long job and a burn-in run: after its JavaScript
# ran, the DOM must list both workers by name, the running job with a progress bar, the finished
# job, and the burn's verdict per worker.
# A screenshot is kept as ARTIFACT_DIR/dashboard.png for a human to look at.
# Usage: chromium_test.sh BIN_DIR ARTIFACT_DIR
BIN=$1
ARTIFACTS=${2:-.}
# shellcheck source=tests/dashboard/cluster.sh
source "$(dirname "$0")/cluster.sh"
skip_unless_installed chromium curl

start_scheduler
start_worker chrome-worker-a
start_worker chrome-worker-b
wait_for_workers 2

# Job 1, short and exact, shows under "Recent jobs".
"$BIN/pbench" --scheduler "$SCHEDULER" -x 1000 -y 1000 --chunk-x 100 --chunk-y 100 \
  --generator arange --check -q >"$WORK_DIR/pbench-arange.log" 2>&1 || fail "the arange job failed"

# Job 2: 100000 x 100000 normal in 2000 x 2000 chunks: 2500 chunks, minutes on two CPU threads;
# it is stopped by pid once the page has been looked at.
"$BIN/pbench" --scheduler "$SCHEDULER" -d -x 100000 -y 100000 --chunk-x 2000 --chunk-y 2000 \
  -q >"$WORK_DIR/pbench.log" 2>&1 &
PIDS+=("$!")
job_has_progress() {
  curl -fsS --max-time 5 "$DASHBOARD/api/status" |
    /usr/bin/python3 -c 'import json, sys; sys.exit(0 if any(j["chunks_done"] > 0 for j in json.load(sys.stdin)["jobs"]) else 1)'
}
wait_until 30 job_has_progress || fail "the job never showed progress on /api/status"

# A burn-in beside it, stopped with the rest: its watcher reports both workers within a second.
"$BIN/pbench" --scheduler "$SCHEDULER" -d -x 400 -y 400 --chunk-x 100 --chunk-y 100 --burn 10m \
  --burn-slow 0.5 -q >"$WORK_DIR/pbench-burn.log" 2>&1 &
PIDS+=("$!")
burn_shows_both() {
  curl -fsS --max-time 5 "$DASHBOARD/api/status" |
    /usr/bin/python3 -c 'import json, sys; b = json.load(sys.stdin)["burns"]; sys.exit(0 if b and len(b[0]["gpus"]) == 2 else 1)'
}
wait_until 30 burn_shows_both || fail "the burn never showed both workers on /api/status"

browser --dump-dom "$DASHBOARD/" >"$WORK_DIR/dom.html" || fail "chromium --dump-dom failed"
for want in '>chrome-worker-a<' '>chrome-worker-b<' 'class="progress"' 'role="progressbar"' \
  '>#2<' 'class="state done"' '>live<' '<canvas id="stream"' 'id="gpus-empty"' \
  '<td class="verdict ' '>chrome-worker-b</td>'; do
  grep -qF "$want" "$WORK_DIR/dom.html" || fail "the rendered page has no '$want'"
done
grep -qF 'id="jobs" style="display: none' "$WORK_DIR/dom.html" &&
  fail "the running job is not listed"
grep -qF 'id="burns" style="display: none' "$WORK_DIR/dom.html" &&
  fail "the running burn is not listed"

screenshot "$ARTIFACTS/dashboard.png" 1200,900 "$DASHBOARD/"
cp "$WORK_DIR/dom.html" "$ARTIFACTS/dashboard-dom.html"
echo "PASS: the page lists both workers, the running job and the burn; screenshot: $ARTIFACTS/dashboard.png"
