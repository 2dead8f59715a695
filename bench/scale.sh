#!/usr/bin/env bash
# Scale: a simulated GPU fleet and many clients (psched-loadgen) against one real psched, each run
# printed against its ideal (simulated GPU time / fleet size), with psched's and the loadgen's CPU
# (and the time each waited for a CPU: the two share this machine) and psched's peak memory:
#   bench/scale.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds psched and psched-loadgen (a Release build). Environment: REPEAT (runs of each
# timed figure, best kept; default 3), IDLE_S (seconds the idle fleet is watched; default 10),
# CLIENT_WORKERS (the fleet of run 4; default 1024).
#   1. 1024 simulated H100s (0.67 ms per 10000² chunk; window and result batches as the CUDA
#      backend's: worker/cuda/batching.h), constant(1), (x + 1)[::2, ::2]
#      over 1,000,000² float64 (8 TB; ideal 6.5 ms) in chunks of 10000² (10^4 chunks), 5000²,
#      2500², 1000², 500², 250² and 100² (10^8 chunks);
#   2. 4096 idle worker connections: psched's memory per worker and heartbeat CPU;
#   3. 100 clients each submitting 100 small arange jobs at once (1000², 100² chunks: 10^4 jobs,
#      10^6 chunks) on CLIENT_WORKERS simulated H100s: all exact, p50/p99 job latency.
# Run 1 is also printed against this machine's network floor (net-floor, measured first, pinned as
# psched and the loadgen are): a job cannot end before psched has written its work to the last of
# the 1024 loopback connections, so ideal + that time is the best any scheduler can do here.
# Every result is checked bit for bit against the closed form; any difference fails the script.
set -uo pipefail
bin=$(cd "${1:?usage: bench/scale.sh BIN_DIR [OUT_DIR]}" && pwd)
out=${2:-$(mktemp -d)}
mkdir -p "$out"
repeat=${REPEAT:-3}
idle_s=${IDLE_S:-10}
client_workers=${CLIENT_WORKERS:-1024}
status=0
fail() { echo "FAIL: $*"; status=1; }

echo "== machine"
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg)"
ulimit -n "$(ulimit -Hn)" 2>/dev/null

# shellcheck source=bench/lib/loadgen_run.sh
source "$(dirname "$0")/lib/loadgen_run.sh"
# run NAME LOADGEN_ARGS...: a fresh psched, the loadgen, its log in $out/NAME.log.
run() {
  local name=$1
  shift
  loadgen_run "$bin" "$out/$name.log" "$@" || fail "$name: psched-loadgen failed (see $out/$name.log)"
}

# best NAME REPEAT LOADGEN_ARGS...: runs it REPEAT times, keeps the log of the fastest as NAME.log.
best() {
  local name=$1 n=$2 best_wall="" i
  shift 2
  for i in $(seq "$n"); do
    run "$name.$i" "$@"
    local wall
    wall=$(fig "$out/$name.$i.log" wall_s)
    [[ -z "$wall" ]] && continue
    if [[ -z "$best_wall" ]] || awk -v a="$wall" -v b="$best_wall" 'BEGIN { exit !(a < b) }'; then
      best_wall=$wall
      cp "$out/$name.$i.log" "$out/$name.log"
    fi
  done
  [[ -n "$best_wall" ]] || fail "$name: no run finished"
}

echo "== the network floor: one message to each of 1024 workers and one back, over loopback"
pins=(--scheduler-cpu -1 --workers-cpu -1)
(($(nproc) >= 2)) && pins=(--scheduler-cpu 0 --workers-cpu 1)
"$bin/net-floor" -w 1024 "${pins[@]}" | tee "$out/net-floor.log" || fail "net-floor failed"
floor_sends=$(fig "$out/net-floor.log" net_floor_sends_s)

big=(-x 1000000 -y 1000000 --same-jobs -c 1 -j 1 --generator constant)
echo "== 1. 1024 simulated H100s, 8 TB in chunks of 10000² down to 100²"
sweep=(10000 5000 2500 1000 500 250 100)
for c in "${sweep[@]}"; do
  best "h100x1024-$c" "$repeat" -w 1024 "${big[@]}" --chunk-x "$c" --chunk-y "$c"
done
echo "== 2. 4096 idle workers, watched for $idle_s s"
run idle4096 -w 4096 --idle "$idle_s"
echo "== 3. 100 clients x 100 jobs at once on $client_workers simulated H100s"
best clients100x100 "$repeat" -w "$client_workers" -c 100 -j 100 --generator arange -x 1000 -y 1000 --chunk-x 100 --chunk-y 100

for f in "$out"/*.log; do
  m=$(fig "$f" mismatched)
  [[ -n "$m" && "$m" != 0 ]] && fail "$(basename "$f"): $m results differ from the closed form"
done

row() {  # NAME LABEL TARGET
  local f="$out/$1.log"
  [[ -f "$f" ]] || { printf "| %s | (no run) |\n" "$2"; return; }
  local of_floor
  of_floor=$(awk -v i="$(fig "$f" ideal_s)" -v s="${floor_sends:-}" -v w="$(fig "$f" wall_s)" \
    'BEGIN { if (s == "" || w <= 0) print "-"; else printf "%.1f%%", 100 * (i + s) / w }')
  printf "| %s | %s | %s | %s%% | %s | %s | %s (%s) | %s (%s) | %.1f |\n" "$2" "$(fig "$f" wall_s)" \
    "$(fig "$f" ideal_s)" "$(fig "$f" efficiency_pct)" "$3" "$of_floor" "$(fig "$f" psched_cpu_s.clients)" \
    "$(fig "$f" psched_wait_s.clients)" "$(fig "$f" loadgen_cpu_s.clients)" \
    "$(fig "$f" loadgen_wait_s.clients)" "$(awk -v k="$(fig "$f" psched_peak_rss_kb)" 'BEGIN { print k / 1024 }')"
}
echo
echo "== results (best of $repeat by wall time; every result exact)"
echo "network floor: ${floor_sends:-?} s to write each of 1024 workers its work (net-floor); of floor = (ideal + that) / wall"
echo "| run | wall s | ideal s | of ideal | target | of floor | psched CPU s (waited) | loadgen CPU s (waited) | psched peak MB |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in "${sweep[@]}"; do
  row "h100x1024-$c" "1024 H100s, 8 TB, $c² chunks" ">= 60%"
done
f="$out/clients100x100.log"
[[ -f "$f" ]] && echo "100 clients x 100 jobs on $client_workers workers: $(grep -m1 '^jobs:' "$f"); latency p50 $(fig "$f" p50_ms) ms, p99 $(fig "$f" p99_ms) ms; wall $(fig "$f" wall_s) s; psched CPU $(fig "$f" psched_cpu_s.clients) s (waited $(fig "$f" psched_wait_s.clients)), loadgen CPU $(fig "$f" loadgen_cpu_s.clients) s; psched peak $(fig "$f" psched_peak_rss_kb) kB"
f="$out/idle4096.log"
[[ -f "$f" ]] && echo "4096 idle workers: psched $(fig "$f" psched_bytes_per_worker) bytes per worker; heartbeats $(fig "$f" psched_heartbeat_us_per_worker_s) us of psched CPU per worker per second ($(fig "$f" psched_cpu_s.idle) s over ${idle_s} s; loadgen $(fig "$f" loadgen_cpu_s.idle) s); psched peak $(fig "$f" psched_peak_rss_kb) kB"
echo "logs: $out"
exit $status
