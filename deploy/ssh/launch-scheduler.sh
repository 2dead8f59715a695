#!/usr/bin/env bash
# Starts psched on a host over ssh, in the background, and prints the scheduler's address.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
  cat <<USAGE
usage: $(basename "$0") [OPTIONS] HOST [-- PSCHED_ARGS...]

Starts the psched scheduler on HOST over ssh, detached (setsid + nohup, output appended to a log in
--log-dir), waits until it has written its scheduler file and prints the scheduler's address
(tcp://HOST:PORT, tls://HOST:PORT with --tls-dir) on stdout. PSCHED_ARGS go to psched (e.g. --port 8786 --dashboard-address :8787,
--host ADDR to listen on and advertise one address only).

Options:
  --scheduler-file PATH  where psched writes its scheduler file on HOST (default LOG_DIR/scheduler.json;
                         put it on a shared filesystem for pcuda-worker/pbench --scheduler-file)
  --wait S               seconds to wait for the scheduler to come up (default 30)
$COMMON_OPTIONS_HELP

Example:
  addr=\$($(basename "$0") -l ops head01)
  $(basename "$0") head01 -- --port 8786 --dashboard-address :8787
USAGE
}

host=""
daemon_args=()
while (($#)); do
  launch_option "$@"
  if ((SHIFT_N)); then shift "$SHIFT_N"; continue; fi
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --) shift; daemon_args=("$@"); break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [[ -z "$host" ]] || die "one HOST only (see --help)"; host=$1; shift ;;
  esac
done
[[ -n "$host" ]] || { usage >&2; exit 2; }
check_wait
[[ -z "$TOKEN_FILE" ]] || daemon_args=(--token-file "$TOKEN_FILE" "${daemon_args[@]}")
tls_args "$host"
daemon_args=("${TLS_ARGS[@]}" "${daemon_args[@]}")

run_remote "$host" start-daemon.sh psched "$PREFIX" "$LOG_DIR" "$SCHEDULER_FILE" "$WAIT_S" \
  "${daemon_args[@]}"
