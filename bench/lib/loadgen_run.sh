# shellcheck shell=bash
# Sourced by the loadgen benchmarks (scale.sh, steady.sh): one home for starting a fresh psched
# beside psched-loadgen and reading the loadgen's "figure NAME VALUE" lines.
#   loadgen_run BIN_DIR LOG LOADGEN_ARGS...  a fresh psched from BIN_DIR (so its peak memory is this
#       run's), psched-loadgen against it with its pid, the loadgen's output in LOG; psched is
#       stopped by its pid. Returns non-zero (with the reason in LOG) when either fails. With two
#       CPUs or more, psched is pinned to the first and the loadgen to the others (taskset), so the
#       load generator never takes psched's CPU.
#   fig LOG NAME  the value of the loadgen's figure NAME in LOG ("" when absent).
# shellcheck source=bench/lib/json.sh
source "$(dirname "${BASH_SOURCE[0]}")/json.sh"  # json_file_field: the scheduler file read with a parser
fig() { awk -v k="$2" '$1 == "figure" && $2 == k { print $3 }' "$1"; }

loadgen_run() {
  local bin=$1 log=$2 dir pid port="" rc=0
  shift 2
  dir=$(mktemp -d)
  local pin_psched=() pin_loadgen=()
  if command -v taskset >/dev/null && (($(nproc) >= 2)); then
    pin_psched=(taskset -c 0)
    pin_loadgen=(taskset -c "1-$(($(nproc) - 1))")
  fi
  "${pin_psched[@]}" "$bin/psched" --host 127.0.0.1 --port 0 --dashboard-address none --scheduler-file "$dir/s.json" \
    --max-connections 10000 --log-level warning 2>"$dir/psched.log" &
  pid=$!
  for _ in $(seq 200); do
    [[ -s "$dir/s.json" ]] && port=$(json_file_field "$dir/s.json" address | grep -o '[0-9]*$')
    [[ -n "$port" ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if [[ -z "$port" ]]; then
    echo "psched did not start: $(cat "$dir/psched.log")" >"$log"
    rc=1
  else
    "${pin_loadgen[@]}" "$bin/psched-loadgen" --scheduler "tcp://127.0.0.1:$port" --scheduler-pid "$pid" "$@" >"$log" 2>&1 || rc=1
  fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rm -rf "$dir"
  return "$rc"
}
