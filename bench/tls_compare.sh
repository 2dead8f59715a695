#!/usr/bin/env bash
# TLS against plain TCP, same run, same jobs: a running cluster (psched + 2 CPU workers, 1 thread
# each) in the clear and one with mutual TLS on every connection (certificates from
# deploy/make-certs.sh), used in turns so that drift on a shared machine hits both alike.
#   bench/tls_compare.sh BIN_DIR [OUT_DIR]
# Environment: REPEAT (turns, default 3), SIZE (DeepOps array side, default 24000), CHUNKS (tiny
# tasks, default 200000).
#   DeepOps benchmark (SIZE^2 in 4000^2 chunks): GB/s over TLS / plain   target: within noise
#   tiny tasks (one-element chunks): chunks/s over TLS / plain           target >= 0.5
#   10-chunk job latency (median of 30): TLS - plain, in microseconds    target <= 30 us
set -uo pipefail
bin=$(cd "${1:?usage: bench/tls_compare.sh BIN_DIR [OUT_DIR]}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$(mktemp -d)}
mkdir -p "$out"
repeat=${REPEAT:-3}
size=${SIZE:-24000}
tiny_chunks=${CHUNKS:-200000}
status=0
fail() { echo "FAIL: $*"; status=1; }
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"  # json_field, json_len: JSON read with a parser (python3)
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print v[int((NR + 1) / 2)] }'; }

dir=$(mktemp -d)
"$src/deploy/make-certs.sh" "$dir/certs" scheduler worker client >/dev/null || { echo "make-certs.sh failed"; exit 1; }
tls_of() { echo --tls-ca-file "$dir/certs/ca.pem" --tls-cert "$dir/certs/$1.pem" --tls-key "$dir/certs/$1.key"; }
pids=()
# start MODE (plain | tls): psched + 2 workers, scheduler file $dir/MODE.json.
start() {
  local mode=$1 sched_tls=() worker_tls=()
  if [[ $mode == tls ]]; then read -r -a sched_tls <<<"$(tls_of scheduler)"; read -r -a worker_tls <<<"$(tls_of worker)"; fi
  "$bin/psched" --host 127.0.0.1 --port 0 --dashboard-address none --scheduler-file "$dir/$mode.json" \
    --log-level warning "${sched_tls[@]}" 2>"$dir/psched-$mode.log" &
  pids+=($!)
  for _ in $(seq 200); do [[ -s "$dir/$mode.json" ]] && break; sleep 0.05; done
  for i in 0 1; do
    "$bin/pcuda-worker" --scheduler-file "$dir/$mode.json" --backend cpu --nthreads 1 --name "$mode-$i" \
      --log-level warning "${worker_tls[@]}" 2>"$dir/worker-$mode-$i.log" &
    pids+=($!)
  done
}
# job MODE ARGS...: pbench -d on that cluster, JSON on stdout.
job() {
  local mode=$1 client_tls=()
  shift
  [[ $mode == tls ]] && read -r -a client_tls <<<"$(tls_of client)"
  "$bin/pbench" -d --scheduler-file "$dir/$mode.json" "${client_tls[@]}" -q --json "$@"
}
start plain
start tls
for mode in plain tls; do
  job "$mode" -x 1 -y 1000 --chunk-x 1 --chunk-y 100 --generator constant --check >/dev/null ||
    fail "warm-up on $mode"
  [[ $mode == plain && "$(json_file_field "$dir/$mode.json" address)" == tls://* ]] && fail "the plain cluster says tls://"
done
[[ "$(json_file_field "$dir/tls.json" address)" == tls://* ]] || fail "the TLS cluster's scheduler file has no tls:// address"

for _ in $(seq "$repeat"); do
  for mode in plain tls; do
    r=$(job "$mode" -x "$size" -y "$size" --chunk-x 4000 --chunk-y 4000 --check) || fail "DeepOps on $mode"
    [[ "$(json_field "$r" check)" == ok ]] || fail "DeepOps check on $mode"
    awk -v b="$(json_field "$r" bytes)" -v s="$(json_field "$r" seconds)" 'BEGIN { printf "%.4f\n", b / s / 1e9 }' \
      >>"$out/deepops-$mode.gbps"
    r=$(job "$mode" -x 1 -y "$tiny_chunks" --chunk-x 1 --chunk-y 1 --row-step 1 --col-step 1 \
      --generator constant --check) || fail "tiny tasks on $mode"
    awk -v n="$(json_field "$r" chunks)" -v s="$(json_field "$r" seconds)" 'BEGIN { printf "%.0f\n", n / s }' \
      >>"$out/tiny-$mode.rate"
    r=$(job "$mode" -x 1 -y 1000 --chunk-x 1 --chunk-y 100 --row-step 1 --col-step 1 --generator constant \
      --repeat 30 --check) || fail "latency on $mode"
    json_field "$r" runs |
      awk '{ printf "%.1f\n", $1 * 1e6 }' >>"$out/latency-$mode.us"
  done
done
kill -TERM "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null
cp "$dir"/*.log "$out/" 2>/dev/null
rm -rf "$dir"

dp=$(median <"$out/deepops-plain.gbps") dt=$(median <"$out/deepops-tls.gbps")
tp=$(median <"$out/tiny-plain.rate") tt=$(median <"$out/tiny-tls.rate")
lp=$(median <"$out/latency-plain.us") lt=$(median <"$out/latency-tls.us")
echo "== TLS against plain TCP (medians of $repeat turns; latency: of $((30 * repeat)) jobs)"
awk -v dp="$dp" -v dt="$dt" -v tp="$tp" -v tt="$tt" -v lp="$lp" -v lt="$lt" 'BEGIN {
  printf "DeepOps over TLS:       %.2f GB/s, plain %.2f GB/s: ratio %.3f | target: within noise\n", dt, dp, dt / dp
  printf "tiny tasks over TLS:    %.0f chunks/s, plain %.0f chunks/s: ratio %.3f | target >= 0.5\n", tt, tp, tt / tp
  printf "10-chunk job over TLS:  %.0f us, plain %.0f us: +%.0f us | target <= +30 us\n", lt, lp, lt - lp
}' | tee "$out/tls-summary.txt"
exit $status
