#!/usr/bin/env bash
# Where the 2 TB DeepOps job's time and energy go on one GPU, and whether the GPU's power cap sets
# its pace (issue 46):
#   bench/power.sh BIN_DIR [OLD_BIN_DIR]
# BIN_DIR (and OLD_BIN_DIR) hold psched, pcuda-worker and pbench of a portable build; BIN_DIR also
# cuda-floor. Prints, from BIN_DIR:
#   - the backend's rate over 400 chunks and over 2500 (the 2 TB job's count): a kernel change that
#     speeds the first but not the second is held back by the power cap, not by its instructions;
#   - the 2 TB job with each generator, fused and in float32 (pbench -g 1 --repeat 2): seconds, the
#     energy counter's joules per TB, the mean SM clock and power over the job, the throttle reasons
#     (constant and arange: writing and reading the chunks alone; uniform: with Philox; normal: the
#     DeepOps job; fused: generation without the memory);
# and with OLD_BIN_DIR, the DeepOps job of both builds in turns, three rounds of three runs, with
# nvidia-smi's power and SM clock sampled every 50 ms beside each (an old build's pbench may not
# report NVML figures itself), and the ratio of the medians and of the best runs.
set -uo pipefail
bin=$(cd "${1:?usage: bench/power.sh BIN_DIR [OLD_BIN_DIR]}" && pwd)
old=${2:+$(cd "$2" && pwd)}
python=/usr/bin/python3

summary() {  # pbench's JSON on stdin: one line
  "$python" -c '
import json, sys
d = json.loads(sys.stdin.read())
runs = d.get("runs") or [d["seconds"]]
gpu = ((d.get("devices") or [{}])[0].get("run") or {}).get("gpu") or {}
clock = (gpu.get("sm_clock_mhz") or {}).get("mean")
power = (gpu.get("power_watts") or {}).get("mean")
joules = d.get("joules_per_tb") or 0
throttle = gpu.get("throttle", "")
print("best %.3f s of %d, %.0f J/TB, SM clock %s MHz, power %s W, throttle [%s]" %
      (min(runs), len(runs), joules, clock, power, throttle))'
}

echo "== device"
nvidia-smi -L || true

echo "== the backend alone (cuda-floor), ms a 10000^2 chunk"
for chunks in 400 2500; do
  "$bin/cuda-floor" --chunks "$chunks" | grep -E '^(generate_ms|backend_ms_per_chunk)=' | tr '\n' ' '
  echo "($chunks chunks)"
done

echo "== the 2 TB job (500000^2 float64, 10000^2 chunks) by generator, pbench -g 1 --repeat 2"
for args in "--generator constant" "--generator arange" "--generator uniform" "--generator normal" \
  "--generator normal --fused" "--generator normal --dtype float32"; do
  # shellcheck disable=SC2086  # the arguments split on purpose
  line=$("$bin/pbench" -g 1 --json --repeat 2 $args | summary) || line="FAILED"
  printf '%-36s %s\n' "$args" "$line"
done

[[ -n "$old" ]] || exit 0
echo "== the DeepOps job against $old, in turns: pbench -g 1 --repeat 3, nvidia-smi sampled every 50 ms"
samples=$(mktemp -d)
trap 'rm -rf "$samples"' EXIT
for round in 1 2 3; do
  for build in old new; do
    dir=$bin
    [[ $build == old ]] && dir=$old
    nvidia-smi --query-gpu=power.draw,clocks.sm --format=csv,noheader,nounits -lms 50 >"$samples/smi" 2>/dev/null &
    smi=$!
    runs=$("$dir/pbench" -g 1 --json --repeat 3 | "$python" -c 'import json,sys; print(*json.load(sys.stdin)["runs"])')
    kill "$smi" 2>/dev/null
    wait "$smi" 2>/dev/null
    echo "$runs" | tr ' ' '\n' >>"$samples/$build.s"
    "$python" - "$samples/smi" "$build" "$round" "$runs" <<'PY'
import sys
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") == 1]
busy = [(float(p), float(c)) for p, c in rows if p.replace(".", "", 1).isdigit() and float(p) > 300]
n = max(len(busy), 1)
print(f"{sys.argv[2]} round {sys.argv[3]}: runs {sys.argv[4]} s; over {len(busy)} busy samples: "
      f"power {sum(p for p, _ in busy) / n:.0f} W, SM clock {sum(c for _, c in busy) / n:.0f} MHz")
PY
  done
done
"$python" - "$samples/new.s" "$samples/old.s" <<'PY'
import statistics, sys
new = [float(x) for x in open(sys.argv[1])]
old = [float(x) for x in open(sys.argv[2])]
print(f"new / old: medians {statistics.median(new):.3f} / {statistics.median(old):.3f} s = "
      f"{statistics.median(new) / statistics.median(old):.3f} x; best {min(new):.3f} / {min(old):.3f} s = "
      f"{min(new) / min(old):.3f} x")
PY
