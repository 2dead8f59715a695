#!/usr/bin/env bash
# Instructions psched executes per small job (its own code and libraries, not the kernel's), counted
# by valgrind's callgrind: a figure this machine's noise does not move (wall and CPU times on a
# shared VM swing by 2 x within minutes; this count by about 2%). 100 clients submit 10 small jobs
# each, then 40 each, to a fresh psched under callgrind on 64 simulated GPUs; the difference over
# the 3000 extra jobs is the cost of one (arange 1000² in 100² chunks, as scale.sh's clients run).
# The same for psched-loadgen (under callgrind, one loop, psched beside it): what its simulated
# workers and clients cost per job, so that it is never what bounds scale.sh's 100 x 100 run.
#   bench/instructions.sh BIN_DIR [OLD_BIN_DIR]
# BIN_DIR holds psched and psched-loadgen. With OLD_BIN_DIR (an older build, with its own
# loadgen), both are counted and new / old printed. Needs valgrind (Debian: apt install valgrind).
set -uo pipefail
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"  # json_file_field: the scheduler file read with a parser
command -v valgrind >/dev/null || { echo "bench/instructions.sh: valgrind is not installed (apt install valgrind)"; exit 1; }
job=(-w 64 -c 100 --generator arange -x 1000 -y 1000 --chunk-x 100 --chunk-y 100)

# count BIN_DIR JOBS_PER_CLIENT WHO: the instructions of WHO (psched or loadgen) for one loadgen run
# (prints the number).
count() {
  local bin=$1 jobs=$2 who=$3 dir pid port=""
  dir=$(mktemp -d)
  local psched_under=() loadgen_under=()
  if [[ $who == psched ]]; then
    psched_under=(valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out")
  else
    loadgen_under=(valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out")
  fi
  # --spin-us 0: the wait between events is not counted as work.
  "${psched_under[@]}" "$bin/psched" --host 127.0.0.1 --port 0 \
    --dashboard-address none --scheduler-file "$dir/s.json" --log-level warning --spin-us 0 2>"$dir/valgrind.log" &
  pid=$!
  for _ in $(seq 600); do
    [[ -s "$dir/s.json" ]] && port=$(json_file_field "$dir/s.json" address | grep -o '[0-9]*$')
    [[ -n "$port" ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z "$port" ]] || ! "${loadgen_under[@]}" "$bin/psched-loadgen" --scheduler "tcp://127.0.0.1:$port" \
    --ready-timeout 300 --threads 1 "${job[@]}" -j "$jobs" >"$dir/loadgen.log" 2>&1; then
    echo "bench/instructions.sh: the run failed; logs in $dir" >&2
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 1
  fi
  kill -INT "$pid"
  wait "$pid"
  awk '$1 == "summary:" { print $2 }' "$dir/cg.out"
  rm -rf "$dir"
}

# per_job BIN_DIR WHO: WHO's instructions per job (prints the number).
per_job() {
  local few many
  few=$(count "$1" 10 "$2") && many=$(count "$1" 40 "$2") || return 1
  echo $(((many - few) / 3000))
}

bin=${1:?usage: bench/instructions.sh BIN_DIR [OLD_BIN_DIR]}
for who in psched loadgen; do
  new=$(per_job "$bin" "$who") || exit 1
  echo "figure ${who}_instructions_per_small_job $new"
  if [[ -n "${2:-}" ]]; then
    old=$(per_job "$2" "$who") || exit 1
    echo "figure old_${who}_instructions_per_small_job $old"
    awk -v w="$who" -v n="$new" -v o="$old" 'BEGIN { printf "%s new / old: %.3f x\n", w, n / o }'
  fi
done
