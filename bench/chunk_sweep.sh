#!/usr/bin/env bash
# One array at several chunk sizes through pbench, each size against the floor for its element
# count (the kernels alone, measured by the caller in the same run), and against the first size:
#   bench/chunk_sweep.sh BIN_DIR "PBENCH_MODE" SIDE "CHUNK_SIDES" FLOOR_NS_PER_ELEMENT [REPEAT]
# e.g. bench/chunk_sweep.sh build/bin "-g 1" 500000 "10000 5000 2000 1000 500" 0.00712 2
# PBENCH_MODE is pbench's cluster flags ("-g 1", "-c 2"); the job is the DeepOps one (normal(10,1),
# (x + 1)[::2, ::2]) on a SIDE x SIDE array. Each size runs REPEAT times in one pbench session
# (default 2) and the best run counts. Exits non-zero when a run fails or its --check does.
set -uo pipefail
bin=$(cd "${1:?usage: bench/chunk_sweep.sh BIN_DIR MODE SIDE CHUNK_SIDES FLOOR_NS [REPEAT]}" && pwd)
read -r -a mode <<<"${2:?pbench mode, e.g. \"-g 1\"}"
side=${3:?array side}
read -r -a chunk_sides <<<"${4:?chunk sides}"
floor_ns=${5:?floor in ns per element}
repeat=${6:-2}
status=0
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"  # json_field, json_len: JSON read with a parser (python3)

printf "%-9s %-7s %9s %10s %10s %10s %8s %9s\n" array chunk chunks seconds "us/chunk" floor_s "x floor" "x first"
first_s=""
for c in "${chunk_sides[@]}"; do
  r=$("$bin/pbench" "${mode[@]}" -x "$side" -y "$side" --chunk-x "$c" --chunk-y "$c" -q --json --check \
    --repeat "$repeat") || { echo "FAIL: pbench ${mode[*]} at chunks ${c}^2"; status=1; continue; }
  [[ "$(json_field "$r" check)" == "ok" ]] || { echo "FAIL: check at ${c}^2: $(json_field "$r" check)"; status=1; }
  best=$(json_field "$r" runs | sort -g | head -1)
  [[ -n "$best" ]] || best=$(json_field "$r" seconds)
  chunks=$(json_field "$r" chunks)
  [[ -n "$first_s" ]] || first_s=$best
  awk -v side="$side" -v c="$c" -v n="$chunks" -v s="$best" -v f="$floor_ns" -v first="$first_s" 'BEGIN {
    floor = side * side * f * 1e-9
    printf "%-9s %-7s %9d %10.4f %10.2f %10.4f %8.3f %9.3f\n", side "^2", c "^2", n, s, s / n * 1e6, floor, s / floor, s / first }'
done
exit $status
