#!/usr/bin/env bash
# Multi-GPU scaling of the DeepOps benchmark (issue "Multi-GPU scaling"), in one run on one host:
#   bench/scaling.sh BIN_DIR "1 2 4" [OUT_DIR]
# For each GPU count: pbench -g N on the 2 TB DeepOps benchmark (500000^2) and the 8 TB weak-scaling variant
# (1000000^2), then distributed mode (psched + one pcuda-worker --gpus all + pbench -d) with every
# GPU. Timing starts once the cluster is ready (workers registered, devices initialised), as the
# seed times it. Each job runs twice in one session: the first run (the headline: it also pays for
# allocating the job's chunk buffers) and a second, warm one. Prints each GPU's busy share of the
# wall time (the workers' own event timings), a table with speed-up and efficiency against one GPU,
# the floor per GPU (cuda-floor, kernels alone), and the backend alone on one GPU (cuda-floor
# --chunks: no scheduler, no network); checks every mean 11 within 1e-4 and sums identical across
# GPU counts.
set -uo pipefail
bin=$(cd "${1:?usage: bench/scaling.sh BIN_DIR \"1 2 4\" [OUT_DIR]}" && pwd)
counts=${2:-"1 2"}
out=${3:-$(mktemp -d)}
mkdir -p "$out"
status=0
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"  # json_field, json_len: JSON read with a parser (python3)

nvidia-smi -L
# SM clock, power and temperature of every GPU, every 200 ms, for the whole run (throttling shows).
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 200 \
  >"$out/clocks.csv" 2>/dev/null &
sampler=$!
"$bin/cuda-floor" --chunks 1000 >"$out/floor.log" 2>&1
floor_ms=$(grep -m1 '^floor_ms_per_chunk=' "$out/floor.log" | cut -d= -f2)
tail -1 "$out/floor.log"
echo "floor per GPU (kernels alone): ${floor_ms} ms per 10000^2 chunk"

declare -A secs warm sums
run() {  # label size args...
  local label=$1 size=$2; shift 2
  local j
  j=$("$@" -x "$size" -y "$size" --json --check -q --repeat 2) || { echo "FAIL: $label"; status=1; return; }
  echo "$j" >>"$out/runs.jsonl"
  local runs
  runs=$(json_field "$j" runs)
  secs[$label]=$(head -1 <<<"$runs")
  warm[$label]=$(tail -1 <<<"$runs")
  sums[$label]=$(json_field "$j" sum)
  [[ "$(json_field "$j" check)" == "ok" ]] || { echo "FAIL: $label check: $(json_field "$j" check)"; status=1; }
  local busy
  busy=$(json_field "$j" 'devices.*.run_busy_fraction' | awk '{ printf "%s%.0f%%", (NR > 1 ? " " : ""), 100 * $1 }')
  printf '%-14s %8.3f s first, %8.3f s warm  mean %s  sum %s  GPU busy (warm run) %s\n' "$label" "${secs[$label]}" \
    "${warm[$label]}" "$(json_field "$j" mean)" "${sums[$label]}" "$busy"
}

for size in 500000 1000000; do
  for n in $counts; do run "g$n-$size" "$size" "$bin/pbench" -g "$n"; done
  # Distributed: the DeepOps workflow with every GPU.
  dir=$(mktemp -d)
  "$bin/psched" --host 127.0.0.1 --port 0 --dashboard-address none --scheduler-file "$dir/s.json" 2>"$dir/psched.log" &
  sched=$!
  "$bin/pcuda-worker" --scheduler-file "$dir/s.json" --gpus all 2>"$dir/worker.log" &
  worker=$!
  max=${counts##* }
  "$bin/pbench" -d --scheduler-file "$dir/s.json" --cluster-info >/dev/null  # waits for the file
  for _ in $(seq 600); do
    [[ $(json_len "$("$bin/pbench" -d --scheduler-file "$dir/s.json" --cluster-info --json)" workers || echo 0) -ge $max ]] && break
    sleep 0.1
  done
  run "d$max-$size" "$size" "$bin/pbench" -d --scheduler-file "$dir/s.json"
  kill -TERM "$worker"; wait "$worker"
  kill -TERM "$sched"; wait "$sched"
  rm -rf "$dir"
done

kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
# Samples taken while a GPU drew more than 200 W (computing): its SM clock, min and median.
sort -t, -k1,1n -k2,2n "$out/clocks.csv" | awk -F', *' '$3 > 200 { c[$1] = c[$1] " " $2 }
  END { for (g in c) { n = split(c[g], a, " ")
    printf "GPU %s while busy: SM clock min %s MHz, median %s MHz (%d samples)\n", g, a[1], a[int((n + 1) / 2)], n } }'

echo
echo "| array | GPUs | mode | seconds | speed-up | efficiency | warm run | floor x chunks / GPUs |"
echo "|---|---|---|---|---|---|---|---|"
for size in 500000 1000000; do
  chunks=$(( (size / 10000) * (size / 10000) ))
  base=${secs[g1-$size]:-}
  for label in $(for n in $counts; do echo "g$n-$size"; done) "d${counts##* }-$size"; do
    [[ -n "${secs[$label]:-}" ]] || continue
    n=${label%%-*}; mode=local; [[ $n == d* ]] && mode=distributed; n=${n:1}
    awk -v s="${secs[$label]}" -v w="${warm[$label]}" -v b="${base:-0}" -v n="$n" -v f="$floor_ms" -v c="$chunks" -v size="$size" -v mode="$mode" 'BEGIN {
      tb = size * size * 8 / 1e12; su = (b > 0) ? b / s : 0; fl = f * c / 1000 / n;
      printf "| %gx%g (%.0f TB) | %d | %s | %.3f | %.2fx | %.0f%% | %.3f | %.3f s |\n", size, size, tb, n, mode, s, su, 100 * su / n, w, fl }'
  done
  # Determinism: the same bits on every GPU count.
  first=""
  for label in "${!sums[@]}"; do
    [[ $label == *-$size ]] || continue
    if [[ -z $first ]]; then first=${sums[$label]}; elif [[ ${sums[$label]} != "$first" ]]; then
      echo "FAIL: sums differ across GPU counts for $size: ${sums[$label]} vs $first"; status=1
    fi
  done
done
exit $status
