#!/usr/bin/env bash
# What the acceptance run costs psched beyond its jobs (issue 47's target: at most 1 % of one core
# per 64 GPUs), on a simulated fleet (psched-loadgen, constant(1) arrays, 6.7 ps an element):
#   bench/burn_fleet.sh BIN_DIR [WORKERS] [SECONDS] [OUT_DIR]      (defaults: 64 workers, 30 s)
# psched on CPU 0, the loadgen's fleet and pbench on the others. Two phases on the same fleet:
#   A. the burn's jobs without the burn: verified jobs (--verify 1.0) of the DeepOps array in 1000²
#      chunks, one pbench --repeat for about SECONDS (the burn's 10000² jobs hold 1 % of its chunks);
#   B. pbench --burn SECONDS (the same jobs, plus its watcher polling the cluster every second).
# psched's CPU (from /proc) per verified chunk in each; the burn's overhead is B's CPU beyond what
# its chunks cost at A's rate, as a share of one core, per 64 workers (an upper bound: B's 10000²
# jobs cost more per chunk than A's).
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

echo "== A: verified jobs in 1000² chunks (the burn's jobs hold 99 % of their chunks in that shape), one client, for about $seconds s"
one=$("${pb[@]}" --chunk-x 1000 --chunk-y 1000 --verify 1.0 --json) || { echo "FAIL: a verified job"; exit 1; }
repeat=$(awk -v s="$(json_field "$one" seconds)" -v d="$seconds" 'BEGIN { r = int(d / s); print r < 1 ? 1 : r }')
a0=$(cpu_ticks "$psched_pid"); start=$(date +%s.%N)
j=$("${pb[@]}" --chunk-x 1000 --chunk-y 1000 --verify 1.0 --repeat "$repeat" --json) || { echo "FAIL: verified jobs"; exit 1; }
wall_a=$(awk -v s="$start" -v now="$(date +%s.%N)" 'BEGIN { print now - s }'); a1=$(cpu_ticks "$psched_pid")
chunks_a=$((repeat * $(json_field "$j" verify.verified_chunks)))

echo "== B: pbench --burn ${seconds}s on the same fleet"
b0=$(cpu_ticks "$psched_pid"); start=$(date +%s.%N)
"${pb[@]}" --burn "${seconds}s" --json >"$out/burn.json" 2>"$out/burn.stderr" || echo "burn exited $? (see $out/burn.json)"
wall_b=$(awk -v s="$start" -v now="$(date +%s.%N)" 'BEGIN { print now - s }'); b1=$(cpu_ticks "$psched_pid")
chunks_b=$(json_file_field "$out/burn.json" burn.verified_chunks) || { echo "FAIL: no burn report"; exit 1; }

awk -v a="$((a1 - a0))" -v b="$((b1 - b0))" -v hz="$hz" -v wa="$wall_a" -v wb="$wall_b" -v ca="$chunks_a" \
    -v cb="$chunks_b" -v w="$workers" 'BEGIN {
  cpu_a = a / hz; cpu_b = b / hz
  per_a = cpu_a / ca; per_b = cpu_b / cb
  over = (cpu_b - per_a * cb) / wb           # cores beyond the chunks own cost
  printf "A: %d verified chunks in %.1f s, psched %.2f CPU s (%.1f %% of a core), %.1f ns a chunk\n", ca, wa, cpu_a, 100 * cpu_a / wa, 1e9 * per_a
  printf "B: %d verified chunks in %.1f s, psched %.2f CPU s (%.1f %% of a core), %.1f ns a chunk\n", cb, wb, cpu_b, 100 * cpu_b / wb, 1e9 * per_b
  printf "burn overhead on psched: %.2f %% of a core on %d workers = %.2f %% per 64 (target <= 1)\n", 100 * over, w, 100 * over * 64 / w
  exit !(over * 64 / w <= 0.01) }'
