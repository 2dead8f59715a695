# shellcheck shell=bash
# Sourced by the dashboard shell tests: start a real psched (dashboard on a free loopback port) and
# CPU workers from the build's bin directory, wait on the scheduler file and on /api/status rather
# than sleeping, and stop everything this test started by pid when it exits.
#
#   BIN=<build>/bin; source cluster.sh; start_scheduler; start_worker NAME; wait_for_workers 1

set -euo pipefail

WORK_DIR=$(mktemp -d /tmp/psched-dashboard-test.XXXXXX)
PIDS=()

cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -z "${PSCHED_TEST_KEEP:-}" ]]; then rm -rf "$WORK_DIR"; fi
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  local log
  for log in "$WORK_DIR"/*.log; do
    [[ -f "$log" ]] || continue
    echo "--- $(basename "$log") (last 20 lines)" >&2
    tail -n 20 "$log" >&2
  done
  exit 1
}

skip_unless_installed() {
  local tool
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "SKIP: $tool is not installed (deploy/install-deps.sh --test installs it)"
      exit 0
    fi
  done
}

# Repeats "$@" every 0.1 s until it succeeds; fails after $1 seconds.
wait_until() {
  local seconds=$1
  shift
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# curl's options for the dashboard (a TLS cluster's CA, its token): set by the caller.
CURL_ARGS=()

# start_scheduler [PSCHED_ARGS...]: sets SCHEDULER (tcp:// or tls://...) and DASHBOARD
# (http(s)://127.0.0.1:PORT).
# shellcheck disable=SC2120  # arguments are optional
start_scheduler() {
  local file="$WORK_DIR/scheduler.json"
  "$BIN/psched" --host 127.0.0.1 --port 0 --dashboard-address 127.0.0.1:0 \
    --scheduler-file "$file" "$@" >"$WORK_DIR/psched.log" 2>&1 &
  PIDS+=("$!")
  wait_until 20 test -s "$file" || fail "psched wrote no scheduler file"
  SCHEDULER=$(sed -n 's/.*"address": *"\([^"]*\)".*/\1/p' "$file")
  DASHBOARD=$(sed -n 's/.*"dashboard": *"\([^"]*\)".*/\1/p' "$file")
  [[ "$DASHBOARD" == http://127.0.0.1:* || "$DASHBOARD" == https://127.0.0.1:* ]] ||
    fail "no dashboard URL in $file"
  DASHBOARD_PORT=${DASHBOARD##*:}
  export SCHEDULER DASHBOARD DASHBOARD_PORT
}

# start_worker NAME [WORKER_ARGS...]
start_worker() {
  "$BIN/pcuda-worker" "$SCHEDULER" --backend cpu --nthreads 1 --name "$1" "${@:2}" \
    >"$WORK_DIR/worker-$1.log" 2>&1 &
  PIDS+=("$!")
}

worker_count_is() {
  local body
  body=$(curl -fsS --max-time 5 "${CURL_ARGS[@]}" "$DASHBOARD/metrics") || return 1
  grep -qx "psched_workers $1" <<<"$body"
}

wait_for_workers() {
  wait_until 30 worker_count_is "$1" || fail "the dashboard never showed $1 workers"
}

# A port nobody listens on now (another process may still take it: callers retry).
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
}

# start_prometheus CONFIG: a Prometheus server on a free loopback port; sets PROM (its URL).
start_prometheus() {
  local port prom_pid
  PROM=
  # The free port may be taken between choosing and binding: try a few.
  for _ in 1 2 3; do
    port=$(free_port)
    prometheus --config.file="$1" --storage.tsdb.path="$WORK_DIR/tsdb" \
      --web.listen-address="127.0.0.1:$port" >"$WORK_DIR/prometheus.log" 2>&1 &
    prom_pid=$!
    PIDS+=("$prom_pid")
    PROM="http://127.0.0.1:$port"
    if wait_until 30 prometheus_ready; then return 0; fi
    kill "$prom_pid" 2>/dev/null || true
    PROM=
  done
  fail "prometheus did not start"
}
prometheus_ready() { curl -fsS --max-time 2 "$PROM/-/ready" >/dev/null 2>&1; }
# query EXPR: prints the Prometheus API's JSON answer.
query() { curl -fsS --max-time 5 -G "$PROM/api/v1/query" --data-urlencode "query=$1"; }
# has_sample EXPR PATTERN: the answer to EXPR matches PATTERN.
has_sample() {
  local answer
  answer=$(query "$1") || return 1
  grep -q "$2" <<<"$answer"
}

# browser ARGS...: headless Chromium with a fresh profile, 5 s of virtual time.
browser() {
  local profile
  profile=$(mktemp -d "$WORK_DIR/chromium.XXXXXX")
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --virtual-time-budget=5000 "$@" 2>>"$WORK_DIR/chromium.log"
}

# screenshot PNG WIDTH,HEIGHT URL: Chromium's picture of URL kept at PNG for a human to look at.
screenshot() {
  mkdir -p "$(dirname "$1")"
  rm -f "$1"
  browser --screenshot="$1" --window-size="$2" "$3" >/dev/null || fail "chromium --screenshot failed"
  [[ -s "$1" ]] || fail "no screenshot at $1"
}
