#!/usr/bin/env bash
# Starts one pcuda-worker per host over ssh, in the background, pointed at a scheduler.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
  cat <<USAGE
usage: $(basename "$0") [OPTIONS] SCHEDULER_ADDR HOST... [-- WORKER_ARGS...]
       $(basename "$0") [OPTIONS] --scheduler-file PATH HOST... [-- WORKER_ARGS...]

Starts one pcuda-worker on each HOST over ssh (all hosts in parallel), detached (setsid + nohup,
output appended to a log in --log-dir). Each uses all of its host's GPUs (one worker process per
GPU), or the CPU where there is none. SCHEDULER_ADDR is tcp://HOST:PORT, tls://HOST:PORT, HOST:PORT
or HOST (port 8786), as launch-scheduler.sh prints it. WORKER_ARGS go to every pcuda-worker (e.g. --gpus 0,1,
--memory-limit 16GB, --death-timeout 60, --backend cpu --nthreads 8).
Waits until each worker has registered with the scheduler (--wait) and prints one line per host.
Exits non-zero if a worker could not be started or exited while starting.

Options:
  --scheduler-file PATH  read the scheduler's address from this file on each host (shared filesystem)
                         instead of giving SCHEDULER_ADDR
  --wait S               seconds to wait for each worker to register (default 30; 0: don't wait)
$COMMON_OPTIONS_HELP

Example:
  $(basename "$0") tcp://head01:8786 node01 node02 node03
USAGE
}

positional=()
daemon_args=()
while (($#)); do
  launch_option "$@"
  if ((SHIFT_N)); then shift "$SHIFT_N"; continue; fi
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --) shift; daemon_args=("$@"); break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) positional+=("$1"); shift ;;
  esac
done
check_wait
if [[ -n "$SCHEDULER_FILE" ]]; then
  daemon_args=(--scheduler-file "$SCHEDULER_FILE" "${daemon_args[@]}")
  hosts=("${positional[@]}")
else
  ((${#positional[@]} >= 1)) || { usage >&2; exit 2; }
  daemon_args=("${positional[0]}" "${daemon_args[@]}")
  hosts=("${positional[@]:1}")
fi
((${#hosts[@]} >= 1)) || { usage >&2; exit 2; }
[[ -z "$TOKEN_FILE" ]] || daemon_args+=(--token-file "$TOKEN_FILE")

start_worker() {
  local host=$1 out
  tls_args "$host"
  if out=$(run_remote "$host" start-daemon.sh pcuda-worker "$PREFIX" "$LOG_DIR" "" "$WAIT_S" \
    "${daemon_args[@]}" "${TLS_ARGS[@]}"); then
    echo "$host: pcuda-worker pid ${out%% *}, log ${out#* }"
  else
    echo "$host: FAILED to start pcuda-worker"
    return 1
  fi
}
for_each_host start_worker "${hosts[@]}"
