#!/usr/bin/env bash
# Runs on a host, sent by launch-scheduler.sh / launch-workers.sh over ssh (`bash -s -- ARGS`):
# starts one psched or pcuda-worker detached from the ssh session (setsid + nohup, stdin from
# /dev/null, output appended to a log file), records it in LOG_DIR/pids-HOST, waits until it is up.
#
#   start-daemon.sh NAME PREFIX LOG_DIR SCHEDULER_FILE WAIT_S [DAEMON ARGS...]
#
# NAME psched: waits for the scheduler file and prints the scheduler's address on stdout.
# NAME pcuda-worker: waits (up to WAIT_S; 0: not at all) until its log says it registered with the
# scheduler; prints "PID LOG".
# Fails (non-zero, with the log's tail on stderr) when the daemon exits while starting.
set -euo pipefail

name=$1 prefix=$2 log_dir=$3 scheduler_file=$4 wait_s=$5
shift 5
case "$name" in
  psched | pcuda-worker) ;;
  *) echo "start-daemon: unknown daemon '$name'" >&2; exit 2 ;;
esac
host=$(uname -n)
[[ -n "$log_dir" ]] || log_dir=/tmp/psched-$(id -un)

if [[ -n "$prefix" ]]; then
  bin=$prefix/bin/$name
  [[ -x "$bin" ]] || { echo "$host: $bin not found or not executable" >&2; exit 1; }
else
  bin=$(command -v "$name") || { echo "$host: $name is not on PATH (give --prefix)" >&2; exit 1; }
fi

mkdir -p "$log_dir"
log=$log_dir/$name-$host-$(date +%Y%m%d-%H%M%S)-$$.log
if [[ "$name" == psched ]]; then
  [[ -n "$scheduler_file" ]] || scheduler_file=$log_dir/scheduler.json
  rm -f "$scheduler_file"
  set -- --scheduler-file "$scheduler_file" "$@"
fi

# Not a process-group leader here (no job control), so setsid execs in place: $! is the daemon.
setsid nohup "$bin" "$@" </dev/null >>"$log" 2>&1 &
pid=$!

# Field 22 of /proc/PID/stat (start time): with the pid, names the process even after pid reuse.
start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086  # split the fields on purpose
  set -- $stat
  echo "${20}"
}
alive() {
  local state
  state=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  state=${state##*) }
  [[ "${state:0:1}" != Z ]]
}
started=$(start_time "$pid") || started=0
echo "$name $pid $started" >>"$log_dir/pids-$host"

failed() {
  echo "$host: $name exited while starting ($1); the end of $log:" >&2
  tail -n 20 "$log" >&2 || true
  exit 1
}

deadline=$((SECONDS + wait_s))
if [[ "$name" == psched ]]; then
  until [[ -s "$scheduler_file" ]]; do
    alive || failed "no scheduler file"
    ((SECONDS < deadline)) || { echo "$host: no scheduler file $scheduler_file after ${wait_s}s (log: $log)" >&2; exit 1; }
    sleep 0.1
  done
  address=$(sed -n 's/.*"address" *: *"\([^"]*\)".*/\1/p' "$scheduler_file")
  dashboard=$(sed -n 's/.*"dashboard" *: *"\([^"]*\)".*/\1/p' "$scheduler_file")
  echo "$host: psched pid $pid, scheduler file $scheduler_file, dashboard ${dashboard:-none}, log $log" >&2
  echo "$address"
else
  # "registered with the scheduler" is what pcuda-worker logs when the scheduler welcomed it.
  while ((wait_s > 0)) && ! grep -q "registered with the scheduler" "$log" 2>/dev/null; do
    alive || failed "see the log"
    if ((SECONDS >= deadline)); then
      echo "$host: pcuda-worker pid $pid has not registered after ${wait_s}s; still trying (log: $log)" >&2
      break
    fi
    sleep 0.2
  done
  alive || failed "see the log"
  echo "$pid $log"
fi
