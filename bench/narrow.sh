#!/usr/bin/env bash
# Narrow dtypes from storage to the GPU (issue 44), each against its floors, in one run:
#   bench/narrow.sh BIN_DIR [GB] [OUT_DIR]        (OLD_BIN_DIR=DIR: an older build beside it)
# Writes a GB-gigabyte float32 .npy (pbench --write-npy) and reads the same bytes three ways: as
# float32 (the .npy), as int16 and as uint8 (--input raw past the .npy header: any bytes are valid
# integers). Every form's chunks are 80 MB of file (PSCHED_NARROW_CHUNK_MB=N: N MB).
# For each, in the page cache:
#   - pbench -g 1 --input: GB/s of file against min(read floor, host-to-device floor), both measured
#     here (io-floor read, io-floor h2d 1); target >= 0.8 x. The GPU widens these dtypes itself
#     (chunk_reader.h, stored_on_device), so the copy is the file's bytes, not 8 per element;
#   - the same on every GPU (-g N), and with OLD_BIN_DIR the old build's -g 1 beside the new;
#   - pbench -c 1 on every core: the CPU backend's GB/s and the exact terms every GPU run must match.
# Exits non-zero if a run fails or a sum differs; prints key=value lines.
set -uo pipefail
bin=$(cd "${1:?usage: bench/narrow.sh BIN_DIR [GB] [OUT_DIR]}" && pwd)
gb=${2:-8}
out=${3:-$(mktemp -d)}
old=${OLD_BIN_DIR:-}
mkdir -p "$out"
data=${PSCHED_STORAGE_DIR:-$out/data}
mkdir -p "$data"
status=0
fail() { echo "FAIL: $*"; status=1; }
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"
terms() { json_file_field "$1" exact_terms; }
rate() { awk -v b="$(json_file_field "$1" bytes)" -v s="$(json_file_field "$1" seconds)" 'BEGIN { printf "%.2f", b / s / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
cores=$(nproc)
cols=10000
rows=$((gb * 1000000000 / 4 / cols))
chunk_rows=$(( ${PSCHED_NARROW_CHUNK_MB:-80} * 25 ))  # 40 kB of file a row: 80 MB of file a chunk by default

file="$data/x32.npy"
echo "== data: ${rows} x ${cols} float32 (${gb} GB)"
"$bin/pbench" --generator normal --seed 5 -x "$rows" -y "$cols" --chunk-x "$chunk_rows" --chunk-y "$cols" \
  --dtype float32 --write-npy "$file" || fail "write npy"
header=$(python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read(12); print(10 + struct.unpack("<H", b[8:10])[0] if b[6] == 1 else 12 + struct.unpack("<I", b[8:12])[0])' "$file")
cat "$file" >/dev/null

echo "== floors: pread of the file in the page cache, pinned host-to-device copies"
"$bin/io-floor" read "$file" | tee "$out/read_floor.txt"
read_floor=$(grep -m1 '^read_floor_gbps=' "$out/read_floor.txt" | cut -d= -f2)
gpus=0
if nvidia-smi -L >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | wc -l)
  "$bin/io-floor" h2d 1 | tee "$out/h2d_1.txt"
  h2d=$(grep -m1 '^h2d_gbps_all=' "$out/h2d_1.txt" | cut -d= -f2)
  floor=$(awk -v a="$read_floor" -v b="$h2d" 'BEGIN { print (a < b ? a : b) }')
fi

# name, then pbench's --input flags for the same bytes read as that dtype
forms=(
  "float32|--input $file --chunk-x $chunk_rows"
  "int16|--input $file --format raw --dtype int16 --shape $rows,$((cols * 2)) --data-offset $header --chunk-x $chunk_rows"
  "uint8|--input $file --format raw --dtype uint8 --shape $rows,$((cols * 4)) --data-offset $header --chunk-x $chunk_rows"
)
for form in "${forms[@]}"; do
  name=${form%%|*}
  read -r -a input <<<"${form#*|}"
  echo "== $name"
  "$bin/pbench" -c 1 --nthreads "$cores" "${input[@]}" --json -q --repeat 2 >"$out/cpu_$name.json" ||
    fail "$name: pbench -c 1"
  want=$(terms "$out/cpu_$name.json")
  echo "cpu_${name}_gbps=$(rate "$out/cpu_$name.json") ratio_to_read_floor=$(ratio "$(rate "$out/cpu_$name.json")" "$read_floor")"
  ((gpus > 0)) || continue
  runs=("new|$bin|1")
  [[ -n $old ]] && runs+=("old|$old|1")
  ((gpus > 1)) && runs+=("new|$bin|$gpus")
  for run in "${runs[@]}"; do
    IFS='|' read -r which dir n <<<"$run"
    json="$out/gpu${n}_${which}_$name.json"
    "$dir/pbench" -g "$n" "${input[@]}" --json -q --repeat 3 >"$json" || { fail "$name: $which pbench -g $n"; continue; }
    g=$(rate "$json")
    echo "gpu${n}_${which}_${name}_gbps=$g ratio_to_min_floor=$(ratio "$g" "$floor") (floor $floor GB/s; target >= 0.8 on one)" \
      "runs_s=$(json_file_field "$json" runs | paste -sd,)"
    [[ $(terms "$json") == "$want" ]] || fail "$name: $which -g $n: other exact terms than the CPU"
  done
  if [[ -n $old ]]; then
    echo "gpu1_${name}_new_over_old=$(ratio "$(rate "$out/gpu1_new_$name.json")" "$(rate "$out/gpu1_old_$name.json")")"
  fi
done
exit $status
