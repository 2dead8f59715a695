#!/usr/bin/env bash
# Chaos: real pcuda-worker processes (CPU backend) and psched-loadgen's simulated GPUs mixed, while
# 20 clients keep submitting exact jobs: every second a random real worker is killed (-9) and a new
# one started; simulated workers are killed every 250 ms and replaced; one real worker is stopped
# (SIGSTOP) past --worker-timeout and continued; one real worker's network is cut mid-batch (its
# own network namespace, the veth link taken down) and restored; psched itself is killed (-9)
# halfway and restarted on the same address. Prints the jobs run, each failure with its message,
# and the results that differ from the closed form (must be 0), and checks nothing is left running.
#   bench/chaos.sh BIN_DIR [SECONDS]        (root for the network namespaces, else that part skips;
#                                           CHAOS_NETNS=0 skips it too)
set -uo pipefail
bin=$(cd "${1:?usage: bench/chaos.sh BIN_DIR [SECONDS]}" && pwd)
seconds=${2:-40}
T=$(mktemp -d "${TMPDIR:-/tmp}/psched-chaos.XXXXXX")
A=psched-chaos-a-$$
B=psched-chaos-b-$$
pids=()
netns=""
in_a=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [[ -n "$netns" ]]; then ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; fi
}
trap cleanup EXIT

# Network: psched, the loadgen and most workers in namespace A (198.18.7.1), one worker in B
# (198.18.7.2) joined by a veth pair whose link can be cut. Without namespaces: all on loopback.
host=127.0.0.1
if [[ "${CHAOS_NETNS:-1}" != 0 && $(id -u) -eq 0 ]] && command -v ip >/dev/null && ip netns add "$A" 2>"$T/netns.err"; then
  netns=1
  ip netns add "$B"
  ip -n "$A" link set lo up
  ip -n "$B" link set lo up
  ip -n "$A" link add cha type veth peer name chb netns "$B"
  ip -n "$A" addr add 198.18.7.1/24 dev cha
  ip -n "$B" addr add 198.18.7.2/24 dev chb
  ip -n "$A" link set cha up
  ip -n "$B" link set chb up
  host=198.18.7.1
  in_a=(ip netns exec "$A")
else
  echo "network namespaces not used ($(cat "$T/netns.err" 2>/dev/null || echo 'not root, or CHAOS_NETNS=0')): skipping the network cut"
fi
# In our own namespace the default port is ours; on the shared loopback pick one nobody else uses
# by default (psched restarts on the same address, so it cannot be 0).
port=8786
[[ -n "$netns" ]] || port=$((20000 + $$ % 20000))
address="tcp://$host:$port"
sched_log=$T/psched.log

start_psched() {
  rm -f "$T/s.json"
  "${in_a[@]}" "$bin/psched" --host "$host" --port "$port" --dashboard-address none --scheduler-file "$T/s.json" \
    --worker-timeout 2 --max-connections 4096 --log-level info 2>>"$sched_log" &
  psched_pid=$!
  pids+=("$psched_pid")
  for _ in $(seq 200); do [[ -s "$T/s.json" ]] && return 0; sleep 0.05; done
  echo "psched did not start"; exit 1
}
real=()
start_worker() {  # [netns-command...]
  PSCHED_TEST_CHUNK_DELAY_MS=3 "$@" "$bin/pcuda-worker" "$address" --backend cpu --nthreads 1 \
    --log-level warning 2>>"$T/workers.log" &
  pids+=($!)
  real+=($!)
}
start_psched
for _ in 1 2 3; do start_worker "${in_a[@]}"; done
cut_worker=""
if [[ -n "$netns" ]]; then
  start_worker ip netns exec "$B"
  cut_worker=${real[-1]}
  real=("${real[@]:0:${#real[@]}-1}")  # never killed by the loop: its network is cut instead
fi

"${in_a[@]}" "$bin/psched-loadgen" --scheduler "$address" -w 256 -c 20 --duration "$seconds" --outstanding 2 \
  --churn-ms 250 --element-ps 100000 --allow-failures --generator arange -x 1000 -y 1000 \
  --chunk-x 100 --chunk-y 100 >"$T/loadgen.out" 2>&1 &
loadgen=$!
pids+=("$loadgen")
for _ in $(seq 600); do grep -q '^ready:' "$T/loadgen.out" && break; sleep 0.05; done

# When each fault strikes: seconds after the clients start, by the clock (waiting for psched to
# notice a fault takes seconds of its own), each once.
stop_at=3 cut_at=5 restart_at=$((seconds / 2 > 8 ? seconds / 2 : 8))
start=$SECONDS second=0 kills=0 stopped="" cut="" restarted=""
while kill -0 "$loadgen" 2>/dev/null && ((second < seconds + 60)); do
  sleep 1
  second=$((SECONDS - start))
  # kill -9 a random real worker, start a new one
  if ((${#real[@]} > 0)); then
    i=$((RANDOM % ${#real[@]}))
    kill -KILL "${real[$i]}" 2>/dev/null && kills=$((kills + 1))
    wait "${real[$i]}" 2>/dev/null
    real=("${real[@]:0:$i}" "${real[@]:$((i + 1))}")
  fi
  start_worker "${in_a[@]}"
  if ((second >= stop_at)) && [[ -z "$stopped" ]] && ((${#real[@]} > 0)); then
    stopped=1
    frozen=${real[0]}
    kill -STOP "$frozen"
    echo "t=${second}s: SIGSTOP worker $frozen past --worker-timeout 2"
    for _ in $(seq 100); do grep -q "nothing received for 2000 ms" "$sched_log" && break; sleep 0.1; done
    kill -CONT "$frozen"
  fi
  if ((second >= cut_at)) && [[ -z "$cut" && -n "$cut_worker" ]]; then
    cut=1
    echo "t=${second}s: network of worker $cut_worker (namespace B) cut"
    before=$(grep -c "nothing received for 2000 ms" "$sched_log")
    ip -n "$B" link set chb down
    for _ in $(seq 100); do
      (($(grep -c "nothing received for 2000 ms" "$sched_log") > before)) && break
      sleep 0.1
    done
    ip -n "$B" link set chb up
    echo "t=$((SECONDS - start))s: network restored"
  fi
  if ((second >= restart_at)) && [[ -z "$restarted" ]]; then
    restarted=1
    echo "t=${second}s: kill -9 psched, restart on $address"
    kill -KILL "$psched_pid"
    wait "$psched_pid" 2>/dev/null
    start_psched
  fi
done
wait "$loadgen"
rc=$?
echo "== loadgen (rc $rc)"
grep -v '^figure' "$T/loadgen.out"
echo "== chaos: $kills real workers killed (-9), 1 stopped past the timeout, ${cut_worker:+1 cut off the network, }psched killed and restarted once"
echo "scheduler log: $(grep -c ' lost: ' "$sched_log") workers lost, $(grep -c 'nothing received' "$sched_log") of them by timeout; $(grep -cE '\([1-9][0-9]* chunks in flight re-queued' "$sched_log") of them held chunks, re-queued"
status=0
mismatched=$(awk '$1 == "figure" && $2 == "mismatched" { print $3 }' "$T/loadgen.out")
[[ "$mismatched" == 0 ]] || { echo "FAIL: $mismatched results differ from the closed form"; status=1; }
((rc == 0)) || { echo "FAIL: loadgen exit status $rc"; status=1; }
if grep '^failure:' "$T/loadgen.out" | grep -v 'connection to the scheduler lost' >/dev/null; then
  echo "FAIL: a job failed for another reason than the scheduler's restart"; status=1
fi
cleanup
pids=()
sleep 0.2
for p in $(pgrep -x psched) $(pgrep -x pcuda-worker) $(pgrep -x psched-loadgen); do
  # Only our own: processes whose binary is under BIN_DIR and that were started by this script.
  [[ "$(readlink "/proc/$p/exe" 2>/dev/null)" == "$bin/"* ]] && grep -q "$address" "/proc/$p/cmdline" 2>/dev/null &&
    { echo "FAIL: left running: $p $(tr '\0' ' ' <"/proc/$p/cmdline")"; status=1; }
done
((status == 0)) && echo "chaos: ok (logs in $T)"
exit $status
