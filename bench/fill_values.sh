#!/usr/bin/env bash
# Fill values among ordinary elements (a stored array's marker for missing data, such as netCDF's
# 9.96921e36), in one run:
#   bench/fill_values.sh BIN_DIR [GB] [OUT_DIR]        (OLD_BIN_DIR=DIR: an older build beside it)
# Writes two GB-gigabyte float64 .npy files with numpy: normal(10, 1), and the same distribution
# with FILL_PPM (default 100) elements a million set to 9.96921e36. Sums each with pbench -c 1
# (every core) and, on a GPU host, pbench -g 1, --repeat 3, the builds in turns: the fill-value
# file's best run against the clean file's (target: about 1 x; an exact sum must not make a marker
# cost an order of magnitude). Every build's sum of a file must have the same exact terms
# (checked). Exits non-zero if a check fails; prints key=value lines.
set -uo pipefail
bin=$(cd "${1:?usage: bench/fill_values.sh BIN_DIR [GB] [OUT_DIR]}" && pwd)
gb=${2:-2}
out=${3:-$(mktemp -d)}
old=${OLD_BIN_DIR:-}
ppm=${FILL_PPM:-100}
data=$out/data
mkdir -p "$data"
status=0
fail() { echo "FAIL: $*"; status=1; }
# Debian's, with numpy (deploy/install-deps.sh): another python3 may come first on PATH. Where
# Debian's has no numpy (a GPU host set up otherwise), the python3 on PATH, if it has.
py=/usr/bin/python3
{ [[ -x $py ]] && $py -c 'import numpy' 2>/dev/null; } || py=python3
# shellcheck source=bench/lib/json.sh
source "$(dirname "$0")/lib/json.sh"
best() { $py -c 'import json,sys; print("%.4f" % min(json.load(open(sys.argv[1]))["runs"]))' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
rows=$((gb * 1000000000 / 8 / 10000))

echo "== data: ${rows} x 10000 float64 (${gb} GB), clean and with ${ppm} fill values a million"
$py - "$data" "$rows" "$ppm" <<'PY' || { echo "FAIL: python3 with numpy writes the files"; exit 1; }
import sys
import numpy as np
data, rows, ppm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(5)
for name, fills in (("clean", 0), ("fill", ppm)):
    a = rng.normal(10, 1, size=(rows, 10000))
    a.flat[rng.integers(0, a.size, a.size * fills // 1000000)] = 9.96921e36
    np.save(f"{data}/{name}.npy", a)
PY
cat "$data/clean.npy" "$data/fill.npy" >/dev/null

modes=("-c 1")
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && modes+=("-g 1")
builds=("new:$bin")
[[ -n $old ]] && builds+=("old:$(cd "$old" && pwd)")
for mode in "${modes[@]}"; do
  tag=${mode// /}
  for f in clean fill; do
    for b in "${builds[@]}"; do
      name=${b%%:*} dir=${b#*:}
      # shellcheck disable=SC2086
      "$dir/pbench" $mode --input "$data/$f.npy" --chunk-x 1000 --repeat 3 --json -q >"$out/$name$tag-$f.json" ||
        fail "$name pbench $mode $f.npy"
    done
  done
  for b in "${builds[@]}"; do
    name=${b%%:*}
    c=$(best "$out/$name$tag-clean.json") s=$(best "$out/$name$tag-fill.json")
    echo "${name}${tag}_clean_s=$c ${name}${tag}_fill_s=$s ${name}${tag}_fill_over_clean=$(ratio "$s" "$c")"
    for f in clean fill; do
      [[ $(json_file_field "$out/$name$tag-$f.json" exact_terms) == $(json_file_field "$out/new-c1-$f.json" exact_terms) ]] ||
        fail "$name pbench $mode $f.npy: other exact terms than the CPU's"
    done
  done
done
rm -rf "$data"
exit $status
