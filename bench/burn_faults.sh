#!/usr/bin/env bash
# pbench --burn's faults on real GPU workers (issue 47's tests on the GPU machine), with the worker's
# test switches: a worker whose chunk 7 is flipped (PSCHED_TEST_FLIP_CHUNK) among 2 and among 4
# workers, and a worker killed (SIGKILL) 8 s into the burn; each case a 20 s burn of a 40000² array
# in 2000² chunks, printing the verdicts:
#   bench/burn_faults.sh BIN_DIR
# The workers all use GPU 0 (--gpus 0), so one GPU is enough. Every process started here is stopped
# by its pid.
set -u
b=$(cd "${1:?usage: bench/burn_faults.sh BIN_DIR}" && pwd)
burn_case() {  # $1 workers, $2 flipped worker index or -1, $3 worker to kill after 8 s or -1
  local d; d=$(mktemp -d)
  $b/psched --host 127.0.0.1 --port 0 --dashboard-address none --scheduler-file $d/s.json --log-level warning 2>$d/psched.log &
  local sp=$!
  for _ in $(seq 100); do [[ -s $d/s.json ]] && break; sleep 0.1; done
  local pids=()
  for i in $(seq 0 $(($1 - 1))); do
    if ((i == $2)); then PSCHED_TEST_FLIP_CHUNK=7 $b/pcuda-worker --scheduler-file $d/s.json --backend cuda --gpus 0 --no-pin --name gpu-$i --log-level warning 2>$d/w$i.log &
    else $b/pcuda-worker --scheduler-file $d/s.json --backend cuda --gpus 0 --no-pin --name gpu-$i --log-level warning 2>$d/w$i.log & fi
    pids+=($!)
  done
  $b/pbench -d --scheduler-file $d/s.json -q --cluster-info >/dev/null 2>&1
  for _ in $(seq 100); do n=$($b/pbench -d --scheduler-file $d/s.json --cluster-info --json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["workers"]))' 2>/dev/null); [[ "$n" == "$1" ]] && break; sleep 0.2; done
  $b/pbench -d --scheduler-file $d/s.json -x 40000 -y 40000 --chunk-x 2000 --chunk-y 2000 --burn 20s --json >$d/burn.json 2>$d/burn.err &
  local bp=$!
  if (($3 >= 0)); then sleep 8; kill -9 ${pids[$3]}; fi
  wait $bp; local rc=$?
  echo "-- $1 workers, flipped ${2}, killed ${3}: pbench exit $rc"
  python3 - $d/burn.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); d = r["burn"]
print("cluster", d["verdict"], "jobs", d["jobs"], "verified chunks", d["verified_chunks"], "mismatches", d["mismatch_count"])
for g in r["gpus"]:
    print(" ", g["worker"], g["verdict"], "busy %.1f s" % g["busy_seconds"], (g["failures"] or g["warnings"] or [""])[0][:170])
for m in r["mismatches"][:2]: print("  mismatch:", json.dumps(m)[:220])
PY
  for p in "${pids[@]}"; do kill $p 2>/dev/null; done; wait "${pids[@]}" 2>/dev/null
  kill $sp; wait $sp
}
burn_case 2 1 -1
burn_case 4 2 -1
burn_case 4 -1 3
