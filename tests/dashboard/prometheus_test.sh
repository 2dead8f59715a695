#!/usr/bin/env bash
# A real Prometheus server scrapes a live psched's /metrics once a second; its query API must then
# return psched_workers = 1 and the worker's memory gauge with its name, and report the target up.
# Usage: prometheus_test.sh BIN_DIR [ARTIFACT_DIR]
BIN=$1
# shellcheck source=tests/dashboard/cluster.sh
source "$(dirname "$0")/cluster.sh"
skip_unless_installed prometheus curl

start_scheduler
start_worker prom-worker
wait_for_workers 1

cat >"$WORK_DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: psched
    static_configs:
      - targets: ['127.0.0.1:$DASHBOARD_PORT']
EOF

start_prometheus "$WORK_DIR/prometheus.yml"

wait_until 30 has_sample 'psched_workers' '"value":\[[0-9.e+]*,"1"\]' ||
  fail "prometheus never stored psched_workers = 1: $(query psched_workers)"
wait_until 10 has_sample 'psched_worker_memory_total_bytes' '"worker":"prom-worker"' ||
  fail "no memory gauge for prom-worker: $(query psched_worker_memory_total_bytes)"
wait_until 10 has_sample 'up{job="psched"}' '"value":\[[0-9.e+]*,"1"\]' ||
  fail "the psched target is not up: $(curl -fsS "$PROM/api/v1/targets")"
targets=$(curl -fsS --max-time 5 "$PROM/api/v1/targets")
grep -q '"lastError":""' <<<"$targets" || fail "scrape errors: $targets"
echo "PASS: prometheus scraped psched: $(query psched_workers)"
