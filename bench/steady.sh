#!/usr/bin/env bash
# Steady state: big jobs on a simulated H100 fleet (psched-loadgen: 6.7 ps an element, constant(1),
# (x + 1)[::2, ::2], window and result batches as the CUDA backend's), sized so that its ideal (GPU
# time / fleet) is about 0.2 s, at several fleet sizes and chunk sizes, one job at a time or 16
# at once (4 clients x 4 jobs, each a sixteenth of the work); one job of 10^6 one-element
# chunks on 64 workers, for psched's CPU per job; and one of 2^32 chunks, for psched's memory. Prints each run's efficiency (ideal /
# wall) and psched's CPU per chunk; given a second BIN_DIR (an older build), runs each case with
# both builds in turn in this one call and prints new / old:
#   bench/steady.sh BIN_DIR [OLD_BIN_DIR] [OUT_DIR]
# Environment: REPEAT (runs of each case per build, best kept; default 3); CASES (names of the cases
# to run, space-separated; default all); VERIFY (a fraction: every job runs with --verify, twice the
# work where it is 1, and the ideal counts it). Every result is checked
# bit for bit against the closed form by the loadgen; any difference fails the script.
set -uo pipefail
new=$(cd "${1:?usage: bench/steady.sh BIN_DIR [OLD_BIN_DIR] [OUT_DIR]}" && pwd)
old=${2:+$(cd "$2" && pwd)}
out=${3:-$(mktemp -d)}
mkdir -p "$out"
repeat=${REPEAT:-3}
status=0
# shellcheck source=bench/lib/loadgen_run.sh
source "$(dirname "$0")/lib/loadgen_run.sh"
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg)"
ulimit -n "$(ulimit -Hn)" 2>/dev/null

# best BUILD NAME ARGS...: REPEAT runs, the fastest one's log kept as $out/NAME.BUILD.log.
best() {
  local build=$1 name=$2 bin best_wall="" i wall
  shift 2
  bin=$new
  [[ $build == old ]] && bin=$old
  for i in $(seq "$repeat"); do
    if ! loadgen_run "$bin" "$out/$name.$build.$i.log" "$@"; then
      echo "FAIL: $name ($build): see $out/$name.$build.$i.log"
      status=1
      continue
    fi
    [[ "$(fig "$out/$name.$build.$i.log" mismatched)" == 0 ]] || { echo "FAIL: $name ($build): a result differs"; status=1; }
    wall=$(fig "$out/$name.$build.$i.log" wall_s)
    if [[ -n "$wall" ]] && { [[ -z "$best_wall" ]] || awk -v a="$wall" -v b="$best_wall" 'BEGIN { exit !(a < b) }'; }; then
      best_wall=$wall
      cp "$out/$name.$build.$i.log" "$out/$name.$build.log"
    fi
  done
}

# CASE NAME WORKERS SIDE CHUNK [CLIENTS JOBS]: a SIDE² array in CHUNK² chunks on WORKERS simulated
# H100s; CLIENTS clients each submitting JOBS of them at once (default 1 x 1).
printf "| run | chunks | build | wall s | ideal s | of ideal | psched CPU s | psched CPU per chunk | psched peak MB | loadgen CPU s |\n|---|---|---|---|---|---|---|---|---|---|\n"
case_row() {
  local name=$1 workers=$2 side=$3 chunk=$4 clients=${5:-1} jobs=${6:-1} build f chunks
  [[ -z "${CASES:-}" || " $CASES " == *" $name "* ]] || return 0
  chunks=$(( (side / chunk) * (side / chunk) * clients * jobs ))
  for build in new ${old:+old}; do
    best "$build" "$name" -w "$workers" -x "$side" -y "$side" --chunk-x "$chunk" --chunk-y "$chunk" \
      --same-jobs -c "$clients" -j "$jobs" --generator constant ${VERIFY:+--verify "$VERIFY"}
    f="$out/$name.$build.log"
    [[ -f $f ]] || continue
    printf "| %s | %s | %s | %s | %s | %s%% | %s | %s ns | %s | %s |\n" "$name" "$chunks" "$build" "$(fig "$f" wall_s)" \
      "$(fig "$f" ideal_s)" "$(fig "$f" efficiency_pct)" "$(fig "$f" psched_cpu_s.clients)" \
      "$(awk -v c="$(fig "$f" psched_cpu_s.clients)" -v n="$chunks" 'BEGIN { printf "%.3g", 1e9 * c / n }')" \
      "$(awk -v k="$(fig "$f" psched_peak_rss_kb)" 'BEGIN { printf "%.1f", k / 1024 }')" "$(fig "$f" loadgen_cpu_s.clients)"
  done
  if [[ -n $old && -f "$out/$name.new.log" && -f "$out/$name.old.log" ]]; then
    awk -v a="$(fig "$out/$name.new.log" efficiency_pct)" -v b="$(fig "$out/$name.old.log" efficiency_pct)" \
      -v c="$(fig "$out/$name.new.log" psched_cpu_s.clients)" -v d="$(fig "$out/$name.old.log" psched_cpu_s.clients)" \
      -v n="$name" 'BEGIN { printf "| %s | | new / old | | | %.2f x | %.3f x | | | |\n", n, a / b, (d > 0 ? c / d : 0) }'
  fi
}
# Sides for an ideal of ~0.2 s: chunks x chunk elements x 6.7 ps / workers = 0.2 s.
case_row h100x64-1000 64 1400000 1000
case_row h100x256-1000 256 2800000 1000
case_row h100x1024-10000 1024 5600000 10000
case_row h100x1024-1000 1024 5600000 1000
case_row h100x1024-100 1024 5600000 100
case_row h100x4096-1000 4096 11200000 1000
# 16 jobs at once, each a sixteenth of the work (a quarter of the side).
case_row h100x1024-10000-16jobs 1024 1400000 10000 4 4
case_row h100x1024-1000-16jobs 1024 1400000 1000 4 4
# psched's CPU for one job of 10^6 one-element chunks, and a job of 2^32 chunks (2 x 2 elements).
case_row onejob-1e6x1-64 64 1000 1
case_row onejob-2e32-1024 1024 131072 2
exit "$status"
