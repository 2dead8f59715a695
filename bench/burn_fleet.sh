#!/usr/bin/env bash
# What the acceptance run costs psched beyond its jobs (issue 47's target: at most 1 % of one core
# per 64 GPUs), on a simulated fleet (psched-loadgen, constant(1) arrays, 6.7 ps an element):
#   bench/burn_fleet.sh BIN_DIR [WORKERS] [SECONDS] [OUT_DIR]      (defaults: 64 workers, 30 s)
# psched on CPU 0, the loadgen's fleet and pbench on the others. Two phases on the same fleet:
#   A. the burn's jobs without the burn, each of its two shapes on its own: verified jobs
#      (--verify 1.0) of the DeepOps array in 10000² chunks, then in 1000² chunks, one pbench
#      --repeat each for about SECONDS / 2: psched's CPU per job of each shape;
#   B. pbench --burn SECONDS (the same jobs, the shapes in turns, three in flight, plus its watcher
#      polling the cluster every second).
# psched's CPU comes from /proc. The burn's overhead is B's CPU beyond what its jobs cost at A's
# rates (half its finished jobs of each shape; the few it cut at the deadline are counted as
# nothing, which only raises the figure), as a share of one core, per 64 workers.
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

"${pin0[@]}" "$bin/psched" --host 127.0.0.1 --port 0 --dashboard-address none --scheduler-file "$out/s.json" \
  --max-connections 10000 --log-level warning 2>"$out/psched.log" &
psched_pid=$!
loadgen_pid=""
stop() { [[ -n $loadgen_pid ]] && kill "$loadgen_pid" 2>/dev/null; kill "$psched_pid" 2>/dev/null; wait 2>/dev/null; }
trap stop EXIT
for _ in $(seq 200); do [[ -s "$out/s.json" ]] && break; sleep 0.05; done
address=$(json_file_field "$out/s.json" address) || { echo "psched did not start: $(cat "$out/psched.log")"; exit 1; }
# The fleet, held registered for both phases (--idle), answering whatever psched sends it.
"${pin1[@]}" "$bin/psched-loadgen" --scheduler "$address" -w "$workers" --idle $((3 * seconds + 60)) -c 0 \
  >"$out/loadgen.log" 2>&1 &
loadgen_pid=$!
for _ in $(seq 600); do
  n=$(json_len "$("$bin/pbench" --scheduler "$address" -d --cluster-info --json 2>/dev/null)" workers 2>/dev/null)
  [[ "$n" == "$workers" ]] && break
  sleep 0.1
done
[[ "$n" == "$workers" ]] || { echo "the fleet did not register ($n of $workers)"; exit 1; }
pb=("${pin1[@]}" "$bin/pbench" --scheduler "$address" -d -q --generator constant)

# One shape's verified jobs for about SECONDS / 2: prints "jobs cpu_seconds wall_seconds".
phase_a() {
  local one repeat t0 t1 start
  one=$("${pb[@]}" "$@" --verify 1.0 --json) || return 1
  repeat=$(awk -v s="$(json_field "$one" seconds)" -v d="$seconds" 'BEGIN { r = int(d / 2 / s); print r < 1 ? 1 : r }')
  t0=$(cpu_ticks "$psched_pid"); start=$(date +%s.%N)
  "${pb[@]}" "$@" --verify 1.0 --repeat "$repeat" --json >/dev/null || return 1
  t1=$(cpu_ticks "$psched_pid")
  awk -v r="$repeat" -v t="$((t1 - t0))" -v hz="$hz" -v s="$start" -v now="$(date +%s.%N)" \
    'BEGIN { printf "%d %.4f %.3f\n", r, t / hz, now - s }'
}
echo "== A: the burn's two shapes as plain verified jobs, about $((seconds / 2)) s each"
read -r jobs_a1 cpu_a1 wall_a1 < <(phase_a --chunk-x 10000 --chunk-y 10000) || { echo "FAIL: verified 10000² jobs"; exit 1; }
read -r jobs_a2 cpu_a2 wall_a2 < <(phase_a --chunk-x 1000 --chunk-y 1000) || { echo "FAIL: verified 1000² jobs"; exit 1; }
[[ -n ${jobs_a1:-} && -n ${jobs_a2:-} ]] || { echo "FAIL: phase A"; exit 1; }

echo "== B: pbench --burn ${seconds}s on the same fleet"
b0=$(cpu_ticks "$psched_pid"); start=$(date +%s.%N)
"${pb[@]}" --burn "${seconds}s" --json >"$out/burn.json" 2>"$out/burn.stderr" || echo "burn exited $? (see $out/burn.json)"
wall_b=$(awk -v s="$start" -v now="$(date +%s.%N)" 'BEGIN { print now - s }'); b1=$(cpu_ticks "$psched_pid")
jobs_b=$(json_file_field "$out/burn.json" burn.jobs) || { echo "FAIL: no burn report"; exit 1; }
chunks_b=$(json_file_field "$out/burn.json" burn.verified_chunks)

awk -v j1="$jobs_a1" -v c1="$cpu_a1" -v w1="$wall_a1" -v j2="$jobs_a2" -v c2="$cpu_a2" -v w2="$wall_a2" \
    -v b="$((b1 - b0))" -v hz="$hz" -v wb="$wall_b" -v jb="$jobs_b" -v cb="$chunks_b" -v w="$workers" 'BEGIN {
  cpu_b = b / hz
  per1 = c1 / j1; per2 = c2 / j2
  expected = jb / 2 * (per1 + per2)         # its finished jobs at the rates of A
  over = (cpu_b - expected) / wb            # cores beyond its jobs own cost
  printf "A: 10000² chunks: %d verified jobs in %.1f s, psched %.2f CPU s, %.2f ms a job\n", j1, w1, c1, 1e3 * per1
  printf "A: 1000² chunks: %d verified jobs in %.1f s, psched %.2f CPU s, %.2f ms a job\n", j2, w2, c2, 1e3 * per2
  printf "B: the burn: %d jobs (%d chunks verified) in %.1f s, psched %.2f CPU s (%.1f %% of a core); its jobs at the rates of A: %.2f CPU s\n", jb, cb, wb, cpu_b, 100 * cpu_b / wb, expected
  printf "burn overhead on psched: %.2f %% of a core on %d workers = %.2f %% per 64 (target <= 1)\n", 100 * over, w, 100 * over * 64 / w
  exit !(over * 64 / w <= 0.01) }'
