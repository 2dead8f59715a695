#!/usr/bin/env bash
# The CPU path's benchmarks, each next to the floor it is measured against, in one run:
#   bench/cpu.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds psched, pcuda-worker, pbench and cpu-floor (cmake -DCMAKE_BUILD_TYPE=Release).
# Environment: REPEAT (runs per figure, default 3), SIZE (DeepOps benchmark array side, default 24000),
# CHUNKS (tiny-task chunks, default 200000), MEM_CHUNKS (scheduler-memory job, default 1000000).
#   1. floors (cpu-floor): the DeepOps benchmark's chunks in process on all cores, memory bandwidth, the
#      per-chunk cost in process, loopback round trip (both ends polling, as our daemons do);
#   2. DeepOps benchmark: pbench -c 2, normal(10, 1), (x + 1)[::2, ::2], SIZE^2, 4000^2 chunks, in GB/s of array
#      created and reduced, against the in-process floor and the memory-bandwidth floor;
#   2b. chunk sizes: the DeepOps benchmark's array in 4000^2 down to 500^2 chunks (bench/chunk_sweep.sh), each
#      against the in-process floor for its elements and against 4000^2;
#   3. fused (reported separately, never the default), against its in-process floor;
#   3b. verify and var/std: the DeepOps benchmark with --verify 1.0, --verify 0.05 and with
#      --stats sum,var,std, runs interleaved with plain ones, in seconds against the plain run's;
#   4. tiny tasks: pbench -c 2, one-element chunks, in chunks per second;
#   5. tiny-job latency: a 1000-element, 10-chunk job on a running cluster (psched + 2 workers),
#      --repeat 30, median against two loopback round trips;
#   6. scheduler memory: psched's peak RSS for a MEM_CHUNKS-chunk job, in bytes per chunk;
#   7. TLS against plain TCP (bench/tls_compare.sh): the DeepOps benchmark, tiny tasks and the
#      10-chunk job latency on a running plain cluster and a running mutual-TLS one, in turns.
# Best of REPEAT and the median are printed; on a shared machine read the best.
set -uo pipefail
bin=$(cd "${1:?usage: bench/cpu.sh BIN_DIR [OUT_DIR]}" && pwd)
out=${2:-$(mktemp -d)}
mkdir -p "$out"
repeat=${REPEAT:-3}
size=${SIZE:-24000}
tiny_chunks=${CHUNKS:-200000}
mem_chunks=${MEM_CHUNKS:-1000000}
status=0
fail() { echo "FAIL: $*"; status=1; }
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"  # json_field, json_len: JSON read with a parser (python3)
kv() { grep -m1 "^$2=" "$1" | cut -d= -f2; }
# best and median of the numbers on stdin (one per line); "high" when larger is better
best_median() {
  sort -g | awk -v dir="$1" '{ v[NR] = $1 } END {
    if (NR == 0) { print "nan nan"; exit }
    printf "%s %s\n", (dir == "high" ? v[NR] : v[1]), v[int((NR + 1) / 2)] }'
}

echo "== machine"
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== 1. floors: cpu-floor (no scheduler, no network)"
"$bin/cpu-floor" --size "$size" --repeat "$repeat" | tee "$out/floor.log" || fail "cpu-floor"
floor_gbps=$(kv "$out/floor.log" compute_gbps)
floor_cpu_gbps=$(kv "$out/floor.log" compute_cpu_gbps)
fused_floor_gbps=$(kv "$out/floor.log" fused_compute_gbps)
memory_floor_gbps=$(kv "$out/floor.log" memory_floor_gbps)
tiny_floor=$(kv "$out/floor.log" tiny_chunks_per_second)
rtt_us=$(kv "$out/floor.log" loopback_rtt_us)

deepops_args=(-c 2 -x "$size" -y "$size" --chunk-x 4000 --chunk-y 4000 -q --json --check)
echo "== 2. DeepOps benchmark: pbench ${deepops_args[*]}"
: >"$out/deepops.gbps"
for _ in $(seq "$repeat"); do
  r=$("$bin/pbench" "${deepops_args[@]}") || fail "DeepOps benchmark"
  echo "$r" >>"$out/deepops.json"
  [[ "$(json_field "$r" check)" == "ok" ]] || fail "DeepOps benchmark check: $(json_field "$r" check)"
  awk -v b="$(json_field "$r" bytes)" -v s="$(json_field "$r" seconds)" 'BEGIN { printf "%.4f\n", b / s / 1e9 }' >>"$out/deepops.gbps"
done
read -r deepops_best deepops_median < <(best_median high <"$out/deepops.gbps")

echo "== 2b. chunk sizes: pbench -c 2, ${size}^2, the DeepOps benchmark's job"
floor_ns=$(awk -v g="$floor_gbps" 'BEGIN { printf "%.6f", 8 / g }')  # float64: 8 bytes per element
"$(dirname "$0")/chunk_sweep.sh" "$bin" "-c 2" "$size" "4000 2000 1000 500" "$floor_ns" "$repeat" |
  tee "$out/sweep.txt" || fail "chunk sweep"
sweep_500=$(awk '$2 == "500^2" { print 1 / $8 }' "$out/sweep.txt")

echo "== 3. fused: pbench ${deepops_args[*]} --fused"
: >"$out/fused.gbps"
for _ in $(seq "$repeat"); do
  r=$("$bin/pbench" "${deepops_args[@]}" --fused) || fail "fused benchmark"
  awk -v b="$(json_field "$r" bytes)" -v s="$(json_field "$r" seconds)" 'BEGIN { printf "%.4f\n", b / s / 1e9 }' >>"$out/fused.gbps"
done
read -r fused_best fused_median < <(best_median high <"$out/fused.gbps")

echo "== 3b. verify and var/std: pbench ${deepops_args[*]} [--verify 1.0 | --verify 0.05 | --stats sum,var,std], interleaved"
: >"$out/verify_plain.s"; : >"$out/verify_all.s"; : >"$out/verify_005.s"; : >"$out/verify_var.s"
for _ in $(seq "$repeat"); do
  for v in plain all 005 var; do
    case $v in plain) extra=() ;; all) extra=(--verify 1.0) ;; 005) extra=(--verify 0.05) ;;
      var) extra=(--stats sum,var,std) ;; esac
    r=$("$bin/pbench" "${deepops_args[@]}" "${extra[@]}") || fail "verify ($v) run"
    [[ "$(json_field "$r" check)" == "ok" ]] || fail "verify ($v) check: $(json_field "$r" check)"
    [[ $v == plain || $v == var || "$(json_field "$r" verify.mismatch_count)" == "0" ]] || fail "verify ($v) found mismatches"
    json_field "$r" seconds >>"$out/verify_$v.s"
  done
done
read -r verify_plain_best verify_plain_median < <(best_median low <"$out/verify_plain.s")
read -r verify_all_best verify_all_median < <(best_median low <"$out/verify_all.s")
read -r verify_005_best verify_005_median < <(best_median low <"$out/verify_005.s")
read -r var_best var_median < <(best_median low <"$out/verify_var.s")
# Each verify run against the plain run just before it: on a shared machine the load drifts between
# runs, and a pair a few seconds apart sees the same load.
paired_ratio() { paste "$out/verify_$1.s" "$out/verify_plain.s" | awk '{ printf "%.4f\n", $1 / $2 }' | best_median low | cut -d' ' -f2; }
verify_all_paired=$(paired_ratio all)
verify_005_paired=$(paired_ratio 005)
var_paired=$(paired_ratio var)

tiny_args=(-c 2 -x 1 -y "$tiny_chunks" --chunk-x 1 --chunk-y 1 --row-step 1 --col-step 1 --generator constant -q --json --check)
echo "== 4. tiny tasks: pbench ${tiny_args[*]}"
: >"$out/tiny.rate"
for _ in $(seq "$repeat"); do
  r=$("$bin/pbench" "${tiny_args[@]}") || fail "tiny tasks"
  [[ "$(json_field "$r" check)" == "ok" ]] || fail "tiny tasks check: $(json_field "$r" check)"
  awk -v n="$(json_field "$r" chunks)" -v s="$(json_field "$r" seconds)" 'BEGIN { printf "%.0f\n", n / s }' >>"$out/tiny.rate"
done
read -r tiny_best tiny_median < <(best_median high <"$out/tiny.rate")

echo "== 5 and 6. a running cluster: psched + 2 CPU workers (1 thread each)"
dir=$(mktemp -d)
"$bin/psched" --host 127.0.0.1 --port 0 --dashboard-address none --scheduler-file "$dir/s.json" \
  --log-level warning 2>"$dir/psched.log" &
sched=$!
for _ in $(seq 200); do [[ -s "$dir/s.json" ]] && break; sleep 0.05; done
workers=()
for i in 0 1; do
  "$bin/pcuda-worker" --scheduler-file "$dir/s.json" --backend cpu --nthreads 1 --name "cpu-$i" \
    --log-level warning 2>"$dir/w$i.log" &
  workers+=($!)
done
dist=(-d --scheduler-file "$dir/s.json" -q --json)
"$bin/pbench" "${dist[@]}" -x 1 -y 1000 --chunk-x 1 --chunk-y 100 --generator constant >/dev/null ||
  fail "warm-up job"
rss_before=$(awk '/VmRSS/ { print $2 }' "/proc/$sched/status")
lat=$("$bin/pbench" "${dist[@]}" -x 1 -y 1000 --chunk-x 1 --chunk-y 100 --row-step 1 --col-step 1 \
  --generator constant --repeat 30 --check) || fail "latency job"
echo "$lat" >"$out/latency.json"
json_field "$lat" runs |
  awk '{ printf "%.1f\n", $1 * 1e6 }' >"$out/latency.us"
read -r lat_best lat_median < <(best_median low <"$out/latency.us")
mem=$("$bin/pbench" "${dist[@]}" -x 1 -y "$mem_chunks" --chunk-x 1 --chunk-y 1 --row-step 1 \
  --col-step 1 --generator constant --check) || fail "scheduler memory job"
[[ "$(json_field "$mem" check)" == "ok" ]] || fail "memory job check: $(json_field "$mem" check)"
hwm_after=$(awk '/VmHWM/ { print $2 }' "/proc/$sched/status")
kill -TERM "${workers[@]}"; wait "${workers[@]}"
kill -TERM "$sched"; wait "$sched"
cp "$dir"/*.log "$out/" 2>/dev/null; rm -rf "$dir"
bytes_per_chunk=$(awk -v a="$hwm_after" -v b="$rss_before" -v n="$mem_chunks" 'BEGIN { printf "%.1f", (a - b) * 1024 / n }')

echo
echo "== cpu.sh: results (best of $repeat, median; floors measured above, same run)"
awk -v sb="$deepops_best" -v sm="$deepops_median" -v f="$floor_gbps" -v fc="$floor_cpu_gbps" -v m="$memory_floor_gbps" \
  -v fb="$fused_best" -v fm="$fused_median" -v ff="$fused_floor_gbps" \
  -v tb="$tiny_best" -v tm="$tiny_median" -v tf="$tiny_floor" \
  -v lb="$lat_best" -v lm="$lat_median" -v rtt="$rtt_us" -v bpc="$bytes_per_chunk" -v mc="$mem_chunks" \
  -v s500="$sweep_500" -v vp="$verify_plain_best" -v va="$verify_all_best" -v v5="$verify_005_best" \
  -v vpm="$verify_plain_median" -v vam="$verify_all_median" -v v5m="$verify_005_median" \
  -v vap="$verify_all_paired" -v v5p="$verify_005_paired" \
  -v vb="$var_best" -v vm="$var_median" -v vvp="$var_paired" 'BEGIN {
  printf "DeepOps (create + reduce): %.2f GB/s best, %.2f median | in-process floor %.2f GB/s (%.2f by CPU time): ratio %.2f | memory floor %.2f GB/s: ratio %.2f | target >= 2.5\n", sb, sm, f, fc, sb / f, m, sb / m
  printf "500^2 chunks:           %.2f x the throughput of 4000^2 chunks | target >= 0.8\n", s500
  printf "fused (selected only):  %.2f GB/s best, %.2f median | in-process floor %.2f GB/s: ratio %.2f\n", fb, fm, ff, fb / ff
  printf "verify 1.0:             %.3f s best, %.3f median | plain %.3f, %.3f: ratio %.2f best, %.2f median, %.2f median of pairs | target <= 2.1\n", va, vam, vp, vpm, va / vp, vam / vpm, vap
  printf "verify 0.05:            %.3f s best, %.3f median | plain %.3f, %.3f: ratio %.2f best, %.2f median, %.2f median of pairs | target <= 1.1\n", v5, v5m, vp, vpm, v5 / vp, v5m / vpm, v5p
  printf "var and std:            %.3f s best, %.3f median | plain %.3f, %.3f: ratio %.2f best, %.2f median, %.2f median of pairs | target <= 1.3\n", vb, vm, vp, vpm, vb / vp, vm / vpm, vvp
  printf "tiny tasks:             %.0f chunks/s best, %.0f median | in-process floor %.0f chunks/s: ratio %.3f | target >= 100000 (aim 250000)\n", tb, tm, tf, tb / tf
  printf "tiny-job latency:       %.0f us best, %.0f us median | 2 loopback round trips %.0f us: ratio %.1f | target median <= 300 (aim 100)\n", lb, lm, 2 * rtt, lm / (2 * rtt)
  printf "scheduler memory:       %.1f bytes per chunk (peak RSS over a %d-chunk job) | target <= 100\n", bpc, mc
}' | tee "$out/summary.txt"
awk -v bpc="$bytes_per_chunk" 'BEGIN { exit !(bpc <= 100) }' || fail "scheduler memory above 100 bytes per chunk"

echo "== 7. TLS against plain TCP"
"$(dirname "$0")/tls_compare.sh" "$bin" "$out/tls" || fail "TLS comparison"
echo "cpu.sh: outputs in $out"
[[ $status -eq 0 ]] && echo "cpu.sh: all runs completed" || echo "cpu.sh: some runs FAILED"
exit $status
