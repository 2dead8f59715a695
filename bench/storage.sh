#!/usr/bin/env bash
# Stored arrays against their floors, in one run on one machine (bench/README.md, "Stored arrays"):
#   bench/storage.sh BIN_DIR [GB] [OUT_DIR]
# BIN_DIR holds pbench, psched, pcuda-worker and io-floor. Writes a GB-gigabyte float64 .npy file
# (pbench --write-npy, normal(10, 1)) and Zarr stores of it, then measures, each as a ratio to a
# floor measured here:
#   - the file in the page cache: plain pread by 1..N threads in 64 MiB and in 1 MiB blocks, the
#     best (io-floor read), against pbench -c 1 --nthreads N --input (read + reduce; target >= 0.8
#     x the floor);
#   - the file from storage, where the page cache can be dropped (/proc/sys/vm/drop_caches, as
#     root): one pread pass by N threads against pbench, the cache dropped before each (target
#     >= 0.9 x);
#   - Zarr with blosc-lz4 and zstd: every chunk read and decompressed by N threads (io-floor zarr)
#     against pbench --input on the store (target >= 0.8 x);
#   - Dask (Debian's, threaded, da.from_zarr / da.from_npy_stack then .sum()) on the same data:
#     blosc-lz4 Zarr in 100 MB and 1 MB chunks, uncompressed Zarr and an npy stack in 1 MB chunks,
#     where python3 has dask (or DASK_PYTHON names an interpreter that has, such as the tree
#     bench/pack-dask.sh packs for a host without Dask): pbench's speed-up and whether each sum
#     is the exact one;
#   - on a GPU host: pinned host-to-device copies (io-floor h2d) and a cluster of psched and
#     pcuda-worker --gpus 0 (then every GPU) summing the .npy against min(read floor, copy floor)
#     (target >= 0.8 x), every GPU against one (target >= 3.5 x on 4): the best of three runs on a
#     fresh worker (its chunks staged), then, after a pause (3 s, or PSCHED_STORAGE_PAUSE seconds)
#     in which the worker registers the file's pages with CUDA (worker/cuda/registered_files.h),
#     the best of three more (copied from the pages); and one GPU on each Zarr store against its
#     decompression floor (>= 0.8 x).
# Every pbench sum of the same data must have the same exact terms (checked). Exits non-zero if a
# check fails; prints key=value lines and a summary table. PSCHED_STORAGE_NPY_ONLY=1 leaves out the
# Zarr stores and Dask (the .npy alone: a 48 GB file on a host whose disk holds no more);
# PSCHED_STORAGE_COLD=0 leaves out the cold-cache runs (four passes over the file from the disk).
set -uo pipefail
bin=$(cd "${1:?usage: bench/storage.sh BIN_DIR [GB] [OUT_DIR]}" && pwd)
gb=${2:-4}
out=${3:-$(mktemp -d)}
mkdir -p "$out"
data=${PSCHED_STORAGE_DIR:-$out/data}
mkdir -p "$data"
status=0
fail() { echo "FAIL: $*"; status=1; }
py=/usr/bin/python3
[[ -x $py ]] || py=python3
dpy=${DASK_PYTHON:-$py}  # the interpreter with Dask
terms() { $py -c 'import json,sys; print(json.load(open(sys.argv[1]))["exact_terms"])' "$1"; }
rate() { $py -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.2f" % (d["bytes"] / d["seconds"] / 1e9))' "$1"; }
best() { $py -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.2f" % max(d["bytes"] / s / 1e9 for s in d["runs"]))' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
cores=$(nproc)
compressors=(blosc-lz4 zstd)
npy_only=${PSCHED_STORAGE_NPY_ONLY:-0}
[[ $npy_only == 1 ]] && compressors=()
cols=10000
rows=$((gb * 1000000000 / 8 / cols))
chunk_rows=1000  # 80 MB chunks of float64

echo "== data: ${rows} x ${cols} float64 (${gb} GB), chunks ${chunk_rows} x ${cols}"
array=(--generator normal --seed 3 -x "$rows" -y "$cols")
job=("${array[@]}" --chunk-x "$chunk_rows" --chunk-y "$cols")
"$bin/pbench" "${job[@]}" --write-npy "$data/x.npy" || fail "write npy"
for c in "${compressors[@]}"; do
  "$bin/pbench" "${job[@]}" --write-zarr "$data/x-$c.zarr" --compressor "$c" || fail "write zarr $c"
done
du -sh "$data"/* 2>/dev/null

echo "== floor: pread of the file in the page cache"
cat "$data/x.npy" >/dev/null
"$bin/io-floor" read "$data/x.npy" | tee "$out/read_floor.txt"
read_floor=$(grep -m1 '^read_floor_gbps=' "$out/read_floor.txt" | cut -d= -f2)

echo "== CPU: pbench -c 1 --nthreads $cores --input x.npy (read + reduce)"
"$bin/pbench" -c 1 --nthreads "$cores" --input "$data/x.npy" --chunk-x "$chunk_rows" --json -q --repeat 2 \
  >"$out/cpu_npy.json" || fail "pbench --input npy"
cpu_npy=$(rate "$out/cpu_npy.json")
echo "cpu_npy_gbps=$cpu_npy ratio_to_read_floor=$(ratio "$cpu_npy" "$read_floor") (target >= 0.8)"
want=$(terms "$out/cpu_npy.json")

cold=""
if [[ ${PSCHED_STORAGE_COLD:-1} == 0 ]]; then
  echo "== cold cache: left out (PSCHED_STORAGE_COLD=0)"
elif [[ -w /proc/sys/vm/drop_caches ]] && sync && echo 1 2>/dev/null >/proc/sys/vm/drop_caches; then
  echo "== cold cache: the page cache dropped before each run; one pread pass by $cores threads against pbench, in turns"
  : >"$out/cold_floor.gbps"; : >"$out/cold_pbench.gbps"
  for _ in 1 2; do
    sync; echo 1 >/proc/sys/vm/drop_caches
    "$bin/io-floor" read "$data/x.npy" "$cores" | grep -m1 '^read_gbps_' | cut -d= -f2 >>"$out/cold_floor.gbps"
    sync; echo 1 >/proc/sys/vm/drop_caches
    "$bin/pbench" -c 1 --nthreads "$cores" --input "$data/x.npy" --chunk-x "$chunk_rows" --json -q >"$out/cpu_cold.json" ||
      fail "pbench --input npy, cold"
    rate "$out/cpu_cold.json" >>"$out/cold_pbench.gbps"
    [[ $(terms "$out/cpu_cold.json") == "$want" ]] || fail "cold: other exact terms than the warm run"
  done
  cat "$data/x.npy" >/dev/null  # back in the page cache for the GPU runs below
  cold_floor=$(sort -g "$out/cold_floor.gbps" | tail -1); cold=$(sort -g "$out/cold_pbench.gbps" | tail -1)
  echo "cold_read_floor_gbps=$cold_floor cpu_cold_gbps=$cold ratio=$(ratio "$cold" "$cold_floor") (target >= 0.9; best of 2 each)"
else
  echo "== cold cache: /proc/sys/vm/drop_caches is not writable here; skipped"
fi

for c in "${compressors[@]}"; do
  echo "== Zarr $c: decompression floor ($cores threads) and pbench"
  # In the page cache, as pbench will find it (the cold runs above dropped it): a floor read from
  # the disk put pbench at 3-5 x its floor.
  find "$data/x-$c.zarr" -type f -exec cat {} + >/dev/null
  "$bin/io-floor" zarr "$data/x-$c.zarr" "$cores" | tee "$out/zarr_floor_$c.txt"
  zfloor=$(grep -m1 '^zarr_decode_gbps=' "$out/zarr_floor_$c.txt" | cut -d= -f2)
  "$bin/pbench" -c 1 --nthreads "$cores" --input "$data/x-$c.zarr" --json -q --repeat 2 >"$out/cpu_zarr_$c.json" ||
    fail "pbench --input zarr $c"
  z=$(rate "$out/cpu_zarr_$c.json")
  echo "cpu_zarr_${c}_gbps=$z ratio_to_decode_floor=$(ratio "$z" "$zfloor") (target >= 0.8)"
  [[ $(terms "$out/cpu_zarr_$c.json") == "$want" ]] || fail "zarr $c: other exact terms than the .npy"
done

if [[ $npy_only == 1 ]]; then
  echo "== Dask: left out (PSCHED_STORAGE_NPY_ONLY=1)"
elif $dpy -c 'import dask.array, zarr' 2>/dev/null; then
  echo "== Dask (threaded) against pbench on the same files: Zarr blosc-lz4 in 100 MB and 1 MB chunks, and in"
  echo "   1 MB chunks an uncompressed Zarr store and an npy stack (da.to_npy_stack's layout), so a chunk's cost is"
  echo "   the tool's own, not a decompressor's"
  stack_rows=12  # 12 x 10000 float64: 0.96 MB a file
  "$dpy" - "$data/x.npy" "$data/x-stack" "$stack_rows" <<'PY' || fail "write npy stack"
import sys
import dask.array as da, numpy as np
x = np.load(sys.argv[1], mmap_mode="r")
da.to_npy_stack(sys.argv[2], da.from_array(x, chunks=(int(sys.argv[3]), x.shape[1])), axis=0)
PY
  for case in zarr-blosc-lz4:1250x10000 zarr-blosc-lz4:125x1000 zarr-none:125x1000 npy-stack:${stack_rows}x10000; do
    kind=${case%%:*}; chunk=${case#*:}
    cr=${chunk%x*}; cc=${chunk#*x}
    if [[ $kind == npy-stack ]]; then
      path="$data/x-stack"
    else
      path="$data/x-$kind-$chunk.zarr"
      "$bin/pbench" "${array[@]}" --chunk-x "$cr" --chunk-y "$cc" --write-zarr "$path" --compressor "${kind#zarr-}" \
        >/dev/null || fail "write $kind $chunk"
    fi
    "$bin/pbench" -c 1 --nthreads "$cores" --input "$path" --chunk-x "$cr" --chunk-y "$cc" --json -q --repeat 2 \
      >"$out/pbench_$kind-$chunk.json" || fail "pbench $kind $chunk"
    echo "-- $kind, chunks $chunk"
    $dpy - "$path" "$out/pbench_$kind-$chunk.json" "$cores" "$kind" <<'PY' || fail "dask $kind $chunk"
import json, math, sys, time
from fractions import Fraction
import dask, dask.array as da, numpy as np, zarr
path, got, cores, kind = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3]), sys.argv[4]
dask.config.set(scheduler="threads", num_workers=cores)
x = da.from_npy_stack(path) if kind == "npy-stack" else da.from_zarr(path)
best = None
for _ in range(2):
    t0 = time.perf_counter(); s = float(x.sum().compute()); t = time.perf_counter() - t0
    best = t if best is None else min(best, t)
exact = float(sum((Fraction(v) for v in got["exact_terms"]), Fraction(0)))
mine = min(got["runs"]) if got.get("runs") else got["seconds"]
print(f"dask_seconds={best:.3f} pbench_seconds={mine:.3f} speedup={best / mine:.1f} chunks={got['chunks']} "
      f"dask_sum={s!r} exact={exact!r} dask_exact={s == exact} pbench_exact={got['sum'] == exact}")
PY
  done
else
  echo "== Dask: $dpy has no dask here; skipped (bench/pack-dask.sh packs one)"
fi

if nvidia-smi -L >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | wc -l)
  echo "== GPU: pinned host-to-device copies, then pbench -g 1 and -g $gpus --input x.npy"
  "$bin/io-floor" h2d 1 | tee "$out/h2d_1.txt"
  "$bin/io-floor" h2d "$gpus" | tee "$out/h2d_all.txt"
  h2d=$(grep -m1 '^h2d_gbps_all=' "$out/h2d_1.txt" | cut -d= -f2)
  floor=$(awk -v a="$read_floor" -v b="$h2d" 'BEGIN { print (a < b ? a : b) }')
  # gpu_npy NAME GPU_LIST: a fresh psched and pcuda-worker --gpus GPU_LIST (one process per GPU,
  # as a user starts them), waited for through --cluster-info; the .npy summed three times, a
  # pause, three times more; both stopped by pid. Writes $out/NAME_staged.json and NAME_registered.json.
  gpu_npy() {
    local name=$1 list=$2 n i
    local want_workers=$(($(tr -cd , <<<"$list" | wc -c) + 1))
    rm -f "$out/sched.json"
    "$bin/psched" --host 127.0.0.1 --port 0 --dashboard-address none --scheduler-file "$out/sched.json" \
      >"$out/${name}_psched.log" 2>&1 &
    local sp=$!
    "$bin/pcuda-worker" --scheduler-file "$out/sched.json" --gpus "$list" >"$out/${name}_worker.log" 2>&1 &
    local wp=$!
    for ((i = 0; i < 300; i++)); do
      n=$("$bin/pbench" -d --scheduler-file "$out/sched.json" --cluster-info 2>/dev/null | grep '^  ' | grep -c cuda)
      ((n >= want_workers)) && break
      sleep 0.1
    done
    local job=(-d --scheduler-file "$out/sched.json" --input "$data/x.npy" --chunk-x "$chunk_rows" --json -q --repeat 3)
    "$bin/pbench" "${job[@]}" >"$out/${name}_staged.json" || fail "$name: pbench --input (fresh worker)"
    sleep "${PSCHED_STORAGE_PAUSE:-3}"  # the worker idle: its registry registers the pages the chunks asked for
    "$bin/pbench" "${job[@]}" >"$out/${name}_registered.json" || fail "$name: pbench --input (after a pause)"
    kill "$wp"; wait "$wp"; kill "$sp"; wait "$sp"
    for f in staged registered; do
      [[ $(terms "$out/${name}_$f.json") == "$want" ]] || fail "$name $f: other exact terms than the CPU"
    done
  }
  gpu_npy gpu1 0
  g1=$(best "$out/gpu1_staged.json"); g1r=$(best "$out/gpu1_registered.json")
  echo "gpu1_gbps=$g1 ratio_to_min_floor=$(ratio "$g1" "$floor") (fresh worker, staged; floor $floor GB/s; target >= 0.8)"
  echo "gpu1_registered_gbps=$g1r ratio_to_min_floor=$(ratio "$g1r" "$floor") (after a pause: copied from the registered pages)"
  if ((gpus > 1)); then
    gpu_npy gpuN "$(seq -s, 0 $((gpus - 1)))"
    gn=$(best "$out/gpuN_staged.json"); gnr=$(best "$out/gpuN_registered.json")
    echo "gpu${gpus}_gbps=$gn scaling=$(ratio "$gn" "$g1") (staged; target >= 3.5 on 4)"
    echo "gpu${gpus}_registered_gbps=$gnr scaling=$(ratio "$gnr" "$g1r") (registered pages)"
  fi
  # Decompressed by the worker's readers (pcuda-worker --readers); the last of three runs, as for the
  # .npy: a fresh worker's first job pins a chunk's staging for each reader, and on a two-H200 host
  # the second run still came 0.05-0.07 x of the floor under the third with 32 readers.
  for c in "${compressors[@]}"; do
    zfloor=$(grep -m1 '^zarr_decode_gbps=' "$out/zarr_floor_$c.txt" | cut -d= -f2)
    "$bin/pbench" -g 1 --input "$data/x-$c.zarr" --json -q --repeat 3 >"$out/gpu_zarr_$c.json" ||
      fail "pbench -g 1 --input zarr $c"
    z=$(rate "$out/gpu_zarr_$c.json")
    echo "gpu1_zarr_${c}_gbps=$z ratio_to_decode_floor=$(ratio "$z" "$zfloor") (target >= 0.8)"
    [[ $(terms "$out/gpu_zarr_$c.json") == "$want" ]] || fail "GPU zarr $c: other exact terms than the CPU"
  done
fi
exit $status
