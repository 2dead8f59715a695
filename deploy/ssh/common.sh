# shellcheck shell=bash disable=SC2034  # variables for the scripts that source this file
# Common code of the deploy/ssh scripts (sourced, not run): option parsing, ssh, remote scripts.
#
# Every script runs one of the helpers in deploy/ssh/remote/ on each host by piping it to
# `ssh HOST bash -s -- ARGS...` (the arguments quoted for any POSIX login shell), so nothing needs to
# be installed on the hosts but bash, procps and the psched binaries.

PSCHED_SSH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PSCHED_REMOTE_DIR=$PSCHED_SSH_DIR/remote

# Settings shared by every script (flags below; environment defaults in parentheses).
SSH_PORT=${PSCHED_SSH_PORT:-}
SSH_USER=${PSCHED_SSH_USER:-}
SSH_IDENTITY=${PSCHED_SSH_IDENTITY:-}
SSH_EXTRA=()                         # -o OPTION..., --ssh-opts "..." and $PSCHED_SSH_OPTS
if [[ -n "${PSCHED_SSH_OPTS:-}" ]]; then read -r -a SSH_EXTRA <<<"$PSCHED_SSH_OPTS"; fi
PREFIX=${PSCHED_PREFIX:-}            # remote install prefix: PREFIX/bin/psched
LOG_DIR=${PSCHED_LOG_DIR:-}          # remote log + pid directory (default /tmp/psched-$USER there)
TOKEN_FILE=${PSCHED_TOKEN_FILE:-}    # remote path of the cluster token file
TLS_DIR=${PSCHED_TLS_DIR:-}          # remote directory of make-certs.sh output (mutual TLS)

# The default prefix: this kit's own install (PREFIX/share/psched/deploy/ssh) when PREFIX/bin/psched
# exists there; otherwise the daemons are looked up on the remote PATH.
if [[ -z "$PREFIX" ]]; then
  _own_prefix=$(cd "$PSCHED_SSH_DIR/../../../.." 2>/dev/null && pwd) || _own_prefix=""
  if [[ -n "$_own_prefix" && -x "$_own_prefix/bin/psched" ]]; then PREFIX=$_own_prefix; fi
  unset _own_prefix
fi

COMMON_OPTIONS_HELP="Common options:
  -p PORT             ssh port (\$PSCHED_SSH_PORT)
  -l USER             ssh login name (\$PSCHED_SSH_USER)
  -i FILE             ssh identity file (\$PSCHED_SSH_IDENTITY)
  -o OPTION           extra ssh -o option, repeatable (e.g. -o StrictHostKeyChecking=no)
  --ssh-opts 'ARGS'   extra ssh arguments, split on spaces (\$PSCHED_SSH_OPTS)
  --prefix DIR        install prefix on the hosts: DIR/bin/psched (\$PSCHED_PREFIX; default: this
                      kit's own install prefix if it has bin/psched, else the hosts' PATH)
  --log-dir DIR       directory on the hosts for logs, pid files and the scheduler file
                      (\$PSCHED_LOG_DIR; default /tmp/psched-\$USER)
  --token-file FILE   cluster token file, path on the hosts (\$PSCHED_TOKEN_FILE)
  --tls-dir DIR       mutual TLS: directory on the hosts with deploy/make-certs.sh's output; each
                      HOST uses DIR/ca.pem, DIR/HOST.pem and DIR/HOST.key (\$PSCHED_TLS_DIR)
  -h, --help          this help"

die() {
  echo "$(basename "$0"): $*" >&2
  exit 2
}

# common_option "$@": parses one common option at the front of "$@". Sets SHIFT_N to the number of
# words it used, 0 when "$1" is not a common option.
common_option() {
  SHIFT_N=0
  local need=""
  case "$1" in
    -p | -l | -i | -o | --ssh-opts | --prefix | --log-dir | --token-file | --tls-dir)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      need=$2
      SHIFT_N=2
      ;;
    --*=*)
      local key=${1%%=*}
      case "$key" in
        --ssh-opts | --prefix | --log-dir | --token-file | --tls-dir) ;;
        *) return 0 ;;
      esac
      common_option "$key" "${1#*=}"
      SHIFT_N=1
      return 0
      ;;
    *) return 0 ;;
  esac
  case "$1" in
    -p) SSH_PORT=$need ;;
    -l) SSH_USER=$need ;;
    -i) SSH_IDENTITY=$need ;;
    -o) SSH_EXTRA+=(-o "$need") ;;
    --ssh-opts)
      local words
      read -r -a words <<<"$need"
      SSH_EXTRA+=("${words[@]}")
      ;;
    --prefix) PREFIX=$need ;;
    --log-dir) LOG_DIR=$need ;;
    --token-file) TOKEN_FILE=$need ;;
    --tls-dir) TLS_DIR=$need ;;
  esac
}

# tls_args HOST: sets TLS_ARGS to HOST's --tls-* options under --tls-dir (empty without it).
TLS_ARGS=()
tls_args() {
  TLS_ARGS=()
  [[ -n "$TLS_DIR" ]] || return 0
  TLS_ARGS=(--tls-ca-file "$TLS_DIR/ca.pem" --tls-cert "$TLS_DIR/$1.pem" --tls-key "$TLS_DIR/$1.key")
}

# launch_option "$@": common_option, plus the options both launch scripts take: --scheduler-file
# PATH (SCHEDULER_FILE) and --wait S (WAIT_S, checked by check_wait). Sets SHIFT_N like
# common_option.
SCHEDULER_FILE=""
WAIT_S=30
launch_option() {
  common_option "$@"
  ((SHIFT_N)) && return 0
  local key=$1 value
  case "$1" in
    --scheduler-file | --wait)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      value=$2
      SHIFT_N=2
      ;;
    --scheduler-file=* | --wait=*)
      key=${1%%=*}
      value=${1#*=}
      SHIFT_N=1
      ;;
    *) return 0 ;;
  esac
  case "$key" in
    --scheduler-file) SCHEDULER_FILE=$value ;;
    --wait) WAIT_S=$value ;;
  esac
}
check_wait() { [[ "$WAIT_S" =~ ^[0-9]+$ ]] || die "--wait needs a number of seconds"; }

# ssh_command: fills SSH_CMD with the ssh command line (the host and command go after it). The
# user's options come first: for ssh, the first value given for an option wins.
ssh_command() {
  SSH_CMD=(ssh "${SSH_EXTRA[@]}")
  [[ -n "$SSH_PORT" ]] && SSH_CMD+=(-p "$SSH_PORT")
  [[ -n "$SSH_USER" ]] && SSH_CMD+=(-l "$SSH_USER")
  [[ -n "$SSH_IDENTITY" ]] && SSH_CMD+=(-i "$SSH_IDENTITY")
  SSH_CMD+=(-o BatchMode=yes -o ConnectTimeout=15)
  return 0
}

# shquote WORD: WORD quoted for a POSIX shell ('...' with embedded quotes escaped).
shquote() {
  local s=${1//\'/\'\\\'\'}
  printf "'%s'" "$s"
}

# run_remote HOST SCRIPT [ARGS...]: runs deploy/ssh/remote/SCRIPT with bash on HOST.
run_remote() {
  local host=$1 script=$2
  shift 2
  local cmd="bash -s --" arg
  for arg in "$@"; do cmd+=" $(shquote "$arg")"; done
  ssh_command
  "${SSH_CMD[@]}" "$host" "$cmd" <"$PSCHED_REMOTE_DIR/$script"
}

# for_each_host SCRIPT_FUNCTION HOST...: runs "SCRIPT_FUNCTION HOST" for every host in parallel,
# prints each host's output in the order given, and returns non-zero if any of them failed.
for_each_host() {
  local fn=$1
  shift
  local tmp rc=0 i=0 host
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/psched-ssh.XXXXXX")
  local pids=()
  for host in "$@"; do
    "$fn" "$host" >"$tmp/$i.out" 2>&1 &
    pids+=($!)
    i=$((i + 1))
  done
  i=0
  for host in "$@"; do
    if ! wait "${pids[$i]}"; then rc=1; fi
    cat "$tmp/$i.out"
    i=$((i + 1))
  done
  rm -rf "$tmp"
  return "$rc"
}
