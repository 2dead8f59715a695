#!/usr/bin/env bash
# Fair turns (issue 49): how long a small job (200 x 200 in 10 x 10 chunks: 400 chunks, --check)
# takes behind huge jobs of other clients (constant(1), 2^20 x 2^20, in CHUNK² chunks, each
# cancelled when the case ends), beside the same small job on the idle cluster in the same run:
#   bench/fairness.sh BIN_DIR [OLD_BIN_DIR]
# With OLD_BIN_DIR (an older build), every case runs with both builds in turn in this one call.
# Prints, per build and case, the small job's median and worst of REPEAT runs and the median as a
# ratio to the idle median. Environment: BACKEND (cuda, cpu, or sim; default cuda where nvidia-smi
# sees a GPU), WORKERS (pcuda-workers, default 1 on cuda, 2 on cpu; on cuda each takes GPU i mod the
# GPUs; sim: that many GPUs simulated by psched-loadgen, whose every chunk costs CHUNK_NS of host
# time, default 270, beside its device time and not reported as busy, as a one-element chunk on
# an H200 did; the new build's loadgen with either psched), HUGE (how many huge jobs,
# space-separated cases; default "1 3"), CHUNKS (the huge jobs' chunk sides; default
# "1 100 1000"), REPEAT (default 7). A small job that is not exact, or a huge
# job that ended before its case did, fails the script.
set -uo pipefail
new=$(cd "${1:?usage: bench/fairness.sh BIN_DIR [OLD_BIN_DIR]}" && pwd)
old=${2:+$(cd "$2" && pwd)}
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
backend=${BACKEND:-$( ((gpus > 0)) && echo cuda || echo cpu)}
workers=${WORKERS:-$([[ $backend == cpu ]] && echo 2 || echo 1)}
repeat=${REPEAT:-7}
status=0
T=$(mktemp -d)
pids=()
stop_all() {
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null
  wait 2>/dev/null
  pids=()
}
trap 'stop_all; rm -rf "$T"' EXIT
echo "== machine: $(nproc) cores, backend $backend, $workers worker(s), load $(cut -d' ' -f1-3 /proc/loadavg)"

# cluster BIN: a fresh psched and WORKERS workers from BIN, registered.
cluster() {
  local bin=$1 i
  rm -f "$T/s.json"
  "$bin/psched" --host 127.0.0.1 --port 0 --dashboard-address none --scheduler-file "$T/s.json" 2>"$T/psched.log" &
  pids+=($!)
  if [[ $backend == sim ]]; then
    local port=""
    for _ in $(seq 200); do
      [[ -s "$T/s.json" ]] && port=$(json_file_field "$T/s.json" address | grep -o '[0-9]*$')
      [[ -n "$port" ]] && break
      sleep 0.05  # psched writes the scheduler file once it listens
    done
    "$new/psched-loadgen" --scheduler "tcp://127.0.0.1:$port" -w "$workers" --chunk-ns "${CHUNK_NS:-270}" -c 0 \
      --idle 1000000 >"$T/loadgen.log" 2>&1 &
    pids+=($!)
  fi
  for i in $(seq "$workers"); do
    [[ $backend == sim ]] && break
    local device=()
    [[ $backend == cuda ]] && device=(env CUDA_VISIBLE_DEVICES=$(((i - 1) % gpus)))
    "${device[@]}" "$bin/pcuda-worker" --scheduler-file "$T/s.json" --backend "$backend" --name "w$i" \
      2>>"$T/workers.log" &
    pids+=($!)
  done
  for _ in $(seq 600); do
    (($(grep -c "' joined from" "$T/psched.log" 2>/dev/null) >= workers)) && return 0
    sleep 0.05  # polling psched's log for the registrations: no other signal reaches a script
  done
  echo "FAIL: the workers did not register (see $T)"
  return 1
}

# small BIN: REPEAT small jobs; prints "median worst" in milliseconds.
small() {
  local bin=$1 i out times=()
  for i in $(seq "$repeat"); do
    out=$("$bin/pbench" -d --scheduler-file "$T/s.json" --generator arange -x 200 -y 200 --chunk-x 10 --chunk-y 10 \
      --check --json -q 2>>"$T/small.err")
    if [[ "$(json_field "$out" check)" != ok ]]; then
      echo "FAIL: a small job was not exact: $out" >&2
      status=1
      continue
    fi
    times+=("$(json_field "$out" seconds)")
  done
  printf '%s\n' "${times[@]}" | sort -g | awk '{ t[NR] = $1 * 1000 } END { printf "%.1f %.1f\n", t[int((NR + 1) / 2)], t[NR] }'
}

printf "| build | backend | behind | huge chunks | small job median ms | worst ms | median / idle |\n|---|---|---|---|---|---|---|\n"
for build in new ${old:+old}; do
  bin=$new
  [[ $build == old ]] && bin=$old
  stop_all
  cluster "$bin" || { status=1; continue; }
  read -r idle idle_worst < <(small "$bin")
  printf "| %s | %s | idle | - | %s | %s | 1 |\n" "$build" "$backend" "$idle" "$idle_worst"
  for chunk in ${CHUNKS:-1 100 1000}; do
    for huge in ${HUGE:-1 3}; do
      hp=()
      before=$(grep -c "from client 'pbench'" "$T/psched.log")
      for _ in $(seq "$huge"); do
        "$bin/pbench" -d --scheduler-file "$T/s.json" --generator constant -x 1048576 -y 1048576 --chunk-x "$chunk" \
          --chunk-y "$chunk" -q >/dev/null 2>>"$T/huge.err" &
        hp+=($!)
      done
      # psched's log says when it has accepted the huge jobs; then a second of their work, so that
      # every window is full of them (the state measured, not a synchronisation).
      for _ in $(seq 600); do
        (($(grep -c "from client 'pbench'" "$T/psched.log") >= before + huge)) && break
        sleep 0.05
      done
      sleep 1
      read -r med worst < <(small "$bin")
      for p in "${hp[@]}"; do
        kill -0 "$p" 2>/dev/null || { echo "FAIL: a huge job ended early (see $T/huge.err)"; status=1; }
      done
      kill -INT "${hp[@]}" 2>/dev/null
      wait "${hp[@]}" 2>/dev/null
      printf "| %s | %s | %s | %s² | %s | %s | %s |\n" "$build" "$backend" "$huge" "$chunk" "$med" "$worst" \
        "$(awk -v a="$med" -v b="$idle" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')"
    done
  done
done
exit $status
