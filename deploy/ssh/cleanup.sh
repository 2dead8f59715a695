#!/usr/bin/env bash
# Stops psched and pcuda-worker on hosts over ssh: SIGTERM, then SIGKILL after a grace period.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
  cat <<USAGE
usage: $(basename "$0") [OPTIONS] HOST...

Stops psched and pcuda-worker on every HOST over ssh (all hosts in parallel): SIGTERM first (the
daemons leave cleanly), SIGKILL to whatever is still there after --grace seconds (with the per-GPU
worker processes of a supervising pcuda-worker). By default it picks every process named exactly
psched or pcuda-worker that the ssh login may signal, like \`pkill -x\` / \`killall\`.
Prints what it stopped and what was left; exits 0 when nothing is left, 1 when something survived
(or a host could not be reached).

Options:
  --grace S      seconds between SIGTERM and SIGKILL (default 10)
  --launched     only the processes launch-scheduler.sh / launch-workers.sh started with the same
                 --log-dir (their pid files there), not every psched/pcuda-worker on the host
  --user NAME    only processes owned by NAME (\`pkill -x -u NAME\`)
$COMMON_OPTIONS_HELP

Example:
  $(basename "$0") head01 node01 node02 node03
  $(basename "$0") --launched --log-dir /scratch/\$USER/psched node01
USAGE
}

grace=10
mode=all
user=""
hosts=()
while (($#)); do
  common_option "$@"
  if ((SHIFT_N)); then shift "$SHIFT_N"; continue; fi
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --grace) [[ $# -ge 2 ]] || die "$1 needs a value"; grace=$2; shift 2 ;;
    --grace=*) grace=${1#*=}; shift ;;
    --launched) mode=launched; shift ;;
    --user) [[ $# -ge 2 ]] || die "$1 needs a value"; user=$2; mode=user; shift 2 ;;
    --user=*) user=${1#*=}; mode=user; shift ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) hosts+=("$1"); shift ;;
  esac
done
((${#hosts[@]} >= 1)) || { usage >&2; exit 2; }
[[ "$grace" =~ ^[0-9]+$ ]] || die "--grace needs a number of seconds"
[[ "$mode" != user || -n "$user" ]] || die "--user needs a name"

stop_host() {
  local host=$1 rc=0
  run_remote "$host" stop-daemons.sh "$mode" "$LOG_DIR" "$user" "$grace" || rc=$?
  case "$rc" in
    0) ;;
    255) echo "$host: UNREACHABLE (ssh failed)" ;;
    *) echo "$host: something was left running (exit $rc)" ;;
  esac
  return "$rc"
}
for_each_host stop_host "${hosts[@]}"
