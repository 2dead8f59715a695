#!/usr/bin/env bash
# The reference values of core/reference_sums.cpp: computes each job's exact sum with pbench on
# the CPU backend and prints the table's lines, ready to paste:
#   bench/reference_sums.sh BIN_DIR [--deepops]
# The small jobs take seconds on two cores. --deepops adds the DeepOps benchmark (2 TB: run it where
# that is practical, e.g. PBENCH_CLUSTER="-g 8" on a GPU node; the sum is the same on any backend
# once the elements are). PBENCH_CLUSTER (default "-c 2") says how pbench starts its local cluster.
# Every job runs twice, in two chunkings; a job whose two sums differ is reported and the script
# fails (the exact sum must not depend on the chunking).
set -uo pipefail
bin=$(cd "${1:?usage: bench/reference_sums.sh BIN_DIR [--deepops]}" && pwd)
cluster=${PBENCH_CLUSTER:--c 2}
status=0
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"  # json_field, json_len: JSON read with a parser (python3)

# name | job flags | a chunking | another chunking
jobs=(
  "normal 2000^2|-x 2000 -y 2000|--chunk-x 500 --chunk-y 500|--chunk-x 333 --chunk-y 777"
  "normal 2000^2 float32|-x 2000 -y 2000 --dtype float32|--chunk-x 500 --chunk-y 500|--chunk-x 2000 --chunk-y 7"
  "uniform(-1, 1) 2000^2|-x 2000 -y 2000 --generator uniform --low -1 --high 1|--chunk-x 500 --chunk-y 500|--chunk-x 1 --chunk-y 2000"
  "normal 1x1000000 all selected|-x 1 -y 1000000 --row-step 1 --col-step 1|--chunk-x 1 --chunk-y 100000|--chunk-x 1 --chunk-y 99991"
)
if [[ "${2:-}" == "--deepops" ]]; then
  jobs+=("the DeepOps benchmark (2 TB)||--chunk-x 10000 --chunk-y 10000|--chunk-x 20000 --chunk-y 20000")
fi

for entry in "${jobs[@]}"; do
  IFS='|' read -r name flags one other <<<"$entry"
  # shellcheck disable=SC2086  # flags are word lists
  a=$("$bin/pbench" $cluster $flags $one -q --json) || { echo "# FAIL: $name: pbench failed" >&2; status=1; continue; }
  # shellcheck disable=SC2086
  b=$("$bin/pbench" $cluster $flags $other -q --json) || { echo "# FAIL: $name: pbench failed" >&2; status=1; continue; }
  sum_a=$(json_field "$a" sum) sum_b=$(json_field "$b" sum)
  hex=$(/usr/bin/python3 -c "import sys; print(float(sys.argv[1]).hex())" "$sum_a")
  if [[ "$(/usr/bin/python3 -c "import sys; print(float(sys.argv[1]).hex())" "$sum_b")" != "$hex" ]]; then
    echo "# FAIL: $name: $sum_a in one chunking, $sum_b in another" >&2
    status=1
    continue
  fi
  key=$(json_field "$a" reference_key)
  echo "      // $name: sum $sum_a"
  echo "      {\"$key\", $hex},"
done
exit $status
