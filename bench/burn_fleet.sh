#!/usr/bin/env bash
# What the acceptance run costs psched beyond its jobs (issue 47's target: at most 1 % of one core
# per 64 GPUs), on a simulated fleet (psched-loadgen, constant(1) arrays, 6.7 ps an element):
#   bench/burn_fleet.sh BIN_DIR [WORKERS] [SECONDS] [OUT_DIR]      (defaults: 64 workers, 30 s)
# psched on CPU 0 (with --spin-us 0, SPIN_US to change it: its polling is not work), the loadgen's
# fleet and pbench on the others. Two phases on the same fleet, each about SECONDS:
#   A. the burn's jobs without the burn: three clients at once, each running verified jobs
#      (--verify 1.0) of the DeepOps array in 10000² and in 1000² chunks in turns, one pbench a job;
#   B. pbench --burn SECONDS: the same jobs, the same turns, three in flight, plus its watcher
#      polling the cluster every second and its ledger.
# psched's CPU comes from /proc. The burn's overhead is B's CPU beyond what its finished jobs cost at
# A's rate per job (the few it cut at the deadline are counted as nothing, which only raises the
# figure), as a share of one core, per 64 workers. (Three mixed jobs at once cost psched more a
# job than the same jobs one at a time, about 1.8 x on this VM: more loop wake-ups, not burn
# bookkeeping; that is why A runs them as the burn does.)
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

# One of A's clients: verified jobs, the shapes in turns from `first`, until `end` (ns since the
# epoch); one line in $out/a_jobs per finished job.
a_client() {
  local k=$1 end=$2
  while (($(date +%s%N) < end)); do
    if ((k % 2 == 0)); then "${pb[@]}" --verify 1.0 >/dev/null || return 1
    else "${pb[@]}" --chunk-x 1000 --chunk-y 1000 --verify 1.0 >/dev/null || return 1; fi
    echo "$k" >>"$out/a_jobs"
    k=$((k + 1))
  done
}
echo "== A: the burn's jobs without the burn, three clients at once, for about $seconds s"
: >"$out/a_jobs"
a0=$(cpu_ticks "$psched_pid"); start=$(date +%s.%N)
end=$(($(date +%s%N) + seconds * 1000000000))
a_client 0 "$end" & c0=$!
a_client 1 "$end" & c1=$!
a_client 2 "$end" & c2=$!
wait "$c0" && wait "$c1" && wait "$c2" || { echo "FAIL: a verified job"; exit 1; }
wall_a=$(awk -v s="$start" -v now="$(date +%s.%N)" 'BEGIN { print now - s }'); a1=$(cpu_ticks "$psched_pid")
jobs_a=$(wc -l <"$out/a_jobs")

echo "== B: pbench --burn ${seconds}s on the same fleet"
b0=$(cpu_ticks "$psched_pid"); start=$(date +%s.%N)
"${pb[@]}" --burn "${seconds}s" --json >"$out/burn.json" 2>"$out/burn.stderr" || echo "burn exited $? (see $out/burn.json)"
wall_b=$(awk -v s="$start" -v now="$(date +%s.%N)" 'BEGIN { print now - s }'); b1=$(cpu_ticks "$psched_pid")
jobs_b=$(json_file_field "$out/burn.json" burn.jobs) || { echo "FAIL: no burn report"; exit 1; }
chunks_b=$(json_file_field "$out/burn.json" burn.verified_chunks)

awk -v ja="$jobs_a" -v a="$((a1 - a0))" -v wa="$wall_a" -v b="$((b1 - b0))" -v hz="$hz" -v wb="$wall_b" \
    -v jb="$jobs_b" -v cb="$chunks_b" -v w="$workers" 'BEGIN {
  cpu_a = a / hz; cpu_b = b / hz
  per_a = cpu_a / ja
  expected = jb * per_a                     # its finished jobs at the rate of A
  over = (cpu_b - expected) / wb            # cores beyond its jobs own cost
  printf "A: %d verified jobs in %.1f s, psched %.2f CPU s (%.1f %% of a core), %.2f ms a job\n", ja, wa, cpu_a, 100 * cpu_a / wa, 1e3 * per_a
  printf "B: the burn: %d jobs (%d chunks verified) in %.1f s, psched %.2f CPU s (%.1f %% of a core), %.2f ms a job; its jobs at the rate of A: %.2f CPU s\n", jb, cb, wb, cpu_b, 100 * cpu_b / wb, 1e3 * cpu_b / jb, expected
  printf "burn overhead on psched: %.2f %% of a core on %d workers = %.2f %% per 64 (target <= 1)\n", 100 * over, w, 100 * over * 64 / w
  exit !(over * 64 / w <= 0.01) }'
