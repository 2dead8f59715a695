#!/usr/bin/env bash
# What the acceptance run costs psched beyond its jobs (issue 47's target: at most 1 % of one core
# per 64 GPUs), on a simulated fleet (psched-loadgen, constant(1) arrays, 6.7 ps an element):
#   bench/burn_fleet.sh BIN_DIR [WORKERS] [SECONDS] [OUT_DIR]      (defaults: 64 workers, 30 s)
# psched on CPU 0 (with --spin-us 0, SPIN_US to change it: its polling is not work), the loadgen's
# fleet and pbench on the others. ROUNDS (default 3) of two phases on the same fleet, each about
# SECONDS, summed (one phase's psched CPU varies by tens of percent on a small VM):
#   A. the burn's jobs alone: pbench --burn with PSCHED_BENCH_BURN_JOBS_ONLY=1, the same verified
#      jobs (--verify 1.0; the DeepOps array in 10000² and 1000² chunks in turns, three in flight on
#      three connections) without its watcher;
#   B. the burn with its watcher looking every WATCH_MS (default 5 ms) instead of every second
#      (PSCHED_BENCH_BURN_WATCH_MS): a look is a workers() request and a BurnStatus for the
#      dashboard, all the burn sends psched beyond its jobs, and 200 of them a second lift its cost
#      above this VM's noise.
# psched's CPU comes from /proc. B's CPU beyond what its jobs cost at A's rate per job, divided by
# the looks pbench counted, is psched's cost per look; the burn's overhead is one look a second, as
# a share of one core, per 64 workers. What the jobs themselves cost psched is printed too: they are
# the verified work the burn exists to run, costing psched what the same jobs cost outside a burn.
# (An earlier baseline, three separate pbench processes one job each, ran fewer jobs at once with
# gaps between them, and put the jobs' own concurrency on the burn's account: bench/README.md.)
set -uo pipefail
bin=$(cd "${1:?usage: bench/burn_fleet.sh BIN_DIR [WORKERS] [SECONDS] [OUT_DIR]}" && pwd)
workers=${2:-64}
seconds=${3:-30}
out=${4:-$(mktemp -d)}
mkdir -p "$out"
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"
pin0=() pin1=()
if command -v taskset >/dev/null && (($(nproc) >= 2)); then pin0=(taskset -c 0); pin1=(taskset -c "1-$(($(nproc) - 1))"); fi
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }  # utime + stime, clock ticks
hz=$(getconf CLK_TCK)

"${pin0[@]}" "$bin/psched" --host 127.0.0.1 --port 0 --dashboard-address none --scheduler-file "$out/s.json" --spin-us "${SPIN_US:-0}" \
  --max-connections 10000 --log-level warning 2>"$out/psched.log" &
psched_pid=$!
loadgen_pid=""
stop() { [[ -n $loadgen_pid ]] && kill "$loadgen_pid" 2>/dev/null; kill "$psched_pid" 2>/dev/null; wait 2>/dev/null; }
trap stop EXIT
for _ in $(seq 200); do [[ -s "$out/s.json" ]] && break; sleep 0.05; done
address=$(json_file_field "$out/s.json" address) || { echo "psched did not start: $(cat "$out/psched.log")"; exit 1; }
# The fleet, held registered for both phases (--idle), answering whatever psched sends it.
"${pin1[@]}" "$bin/psched-loadgen" --scheduler "$address" -w "$workers" --idle $((2 * ${ROUNDS:-3} * (seconds + 5) + 60)) -c 0 \
  >"$out/loadgen.log" 2>&1 &
loadgen_pid=$!
for _ in $(seq 600); do
  n=$(json_len "$("$bin/pbench" --scheduler "$address" -d --cluster-info --json 2>/dev/null)" workers 2>/dev/null)
  [[ "$n" == "$workers" ]] && break
  sleep 0.1
done
[[ "$n" == "$workers" ]] || { echo "the fleet did not register ($n of $workers)"; exit 1; }
pb=("${pin1[@]}" "$bin/pbench" --scheduler "$address" -d -q --generator constant)

# One phase: a burn of SECONDS; prints its psched CPU ticks, wall seconds, jobs, chunks verified
# and the watcher's looks.
burn_phase() {
  local json=$1; shift
  local c0 c1 start wall jobs chunks looks
  c0=$(cpu_ticks "$psched_pid"); start=$(date +%s.%N)
  env "$@" "${pb[@]}" --burn "${seconds}s" --json >"$json" 2>"$json.stderr" || echo "burn exited $? (see $json)" >&2
  wall=$(awk -v s="$start" -v now="$(date +%s.%N)" 'BEGIN { print now - s }'); c1=$(cpu_ticks "$psched_pid")
  jobs=$(json_file_field "$json" burn.jobs) || { echo "FAIL: no burn report in $json" >&2; return 1; }
  chunks=$(json_file_field "$json" burn.verified_chunks)
  looks=$(sed -n 's/^pbench: burn: the watcher looked \([0-9]*\) times$/\1/p' "$json.stderr")
  echo "$((c1 - c0)) $wall $jobs $chunks ${looks:-0}"
}
watch_ms=${WATCH_MS:-5}
a=0 wall_a=0 jobs_a=0 chunks_a=0 b=0 wall_b=0 jobs_b=0 chunks_b=0 looks_b=0
for round in $(seq "${ROUNDS:-3}"); do
  echo "== round $round, A: the burn's jobs alone (no watcher), for about $seconds s"
  read -r t w j c l < <(burn_phase "$out/jobs_only$round.json" PSCHED_BENCH_BURN_JOBS_ONLY=1) || exit 1
  echo "   psched $t ticks, $j jobs in $w s"
  a=$((a + t)) jobs_a=$((jobs_a + j)) chunks_a=$((chunks_a + c)) wall_a=$(awk -v x="$wall_a" -v y="$w" 'BEGIN { print x + y }')
  echo "== round $round, B: pbench --burn ${seconds}s, its watcher looking every $watch_ms ms"
  read -r t w j c l < <(burn_phase "$out/burn$round.json" PSCHED_BENCH_BURN_WATCH_MS="$watch_ms") || exit 1
  echo "   psched $t ticks, $j jobs in $w s, $l looks"
  ((l > 0)) || { echo "FAIL: pbench did not say how often its watcher looked (see $out/burn$round.json.stderr)"; exit 1; }
  b=$((b + t)) jobs_b=$((jobs_b + j)) chunks_b=$((chunks_b + c)) looks_b=$((looks_b + l))
  wall_b=$(awk -v x="$wall_b" -v y="$w" 'BEGIN { print x + y }')
done

awk -v ja="$jobs_a" -v a="$a" -v wa="$wall_a" -v ca="$chunks_a" -v b="$b" -v hz="$hz" -v wb="$wall_b" \
    -v jb="$jobs_b" -v cb="$chunks_b" -v lb="$looks_b" -v w="$workers" 'BEGIN {
  cpu_a = a / hz; cpu_b = b / hz
  per_a = cpu_a / ja
  expected = jb * per_a                     # B finished jobs at the rate of A
  per_look = (cpu_b - expected) / lb        # psched CPU seconds a look
  over = per_look * 1.0                     # a look a second, the burn kWatchPeriod
  printf "A: the jobs alone: %d verified jobs (%d chunks verified) in %.1f s, psched %.2f CPU s (%.1f %% of a core = %.1f %% per 64 workers), %.2f ms a job\n", ja, ca, wa, cpu_a, 100 * cpu_a / wa, 100 * cpu_a / wa * 64 / w, 1e3 * per_a
  printf "B: %d jobs (%d chunks verified) and %d looks in %.1f s, psched %.2f CPU s (%.1f %% of a core); its jobs at the rate of A: %.2f CPU s\n", jb, cb, lb, wb, cpu_b, 100 * cpu_b / wb, expected
  printf "psched per look: %.1f us on %d workers\n", 1e6 * per_look, w
  printf "burn overhead on psched (a look a second): %.3f %% of a core on %d workers = %.3f %% per 64 (target <= 1)\n", 100 * over, w, 100 * over * 64 / w
  exit !(over * 64 / w <= 0.01) }'
