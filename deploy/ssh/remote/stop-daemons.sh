#!/usr/bin/env bash
# Runs on a host, sent by cleanup.sh over ssh (`bash -s -- ARGS`): stops psched and pcuda-worker.
#
#   stop-daemons.sh MODE LOG_DIR USER GRACE_S
#
# MODE all:      every process named exactly psched or pcuda-worker (as `pkill -x` picks them)
#                that this login may signal;
#      user:     the same, owned by USER only (`pkill -x -u USER`);
#      launched: only the processes launch-*.sh started with this LOG_DIR (LOG_DIR/pids-HOST; a pid
#                counts only while its name and start time still match, so a reused pid is safe).
# Sends SIGTERM (the daemons leave cleanly: workers hand back their chunks, the scheduler tells its
# clients), waits up to GRACE_S seconds, then SIGKILLs what is left, including the per-GPU worker
# processes a pcuda-worker supervises. Prints what it did; exits 1 when something survived SIGKILL.
set -uo pipefail

mode=$1 log_dir=$2 user=$3 grace=$4
host=$(uname -n)
[[ -n "$log_dir" ]] || log_dir=/tmp/psched-$(id -un)
names=(psched pcuda-worker)

# stat_of PID: the fields of /proc/PID/stat after the command name ("STATE PPID ..."), or fail.
stat_of() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  echo "${stat##*) }"
}
start_time() {
  local fields
  fields=$(stat_of "$1") || return 1
  # shellcheck disable=SC2086  # split the fields on purpose
  set -- $fields
  echo "${20}"
}
# alive PID [START]: running (not a zombie), and started at START when given.
alive() {
  local fields
  fields=$(stat_of "$1") || return 1
  [[ "${fields:0:1}" != Z ]] || return 1
  [[ -z "${2:-}" ]] || [[ "$(start_time "$1")" == "$2" ]]
}
comm_of() { cat "/proc/$1/comm" 2>/dev/null; }

# The daemons to stop: "PID START" lines in `roots`.
roots=()
case "$mode" in
  all | user)
    for n in "${names[@]}"; do
      if [[ "$mode" == user ]]; then
        found=$(pgrep -x -u "$user" "$n" || true)
      else
        found=$(pgrep -x "$n" || true)
      fi
      for pid in $found; do
        st=$(start_time "$pid") && roots+=("$pid $st")
      done
    done
    ;;
  launched)
    pid_file=$log_dir/pids-$host
    if [[ -f "$pid_file" ]]; then
      while read -r n pid st; do
        [[ " ${names[*]} " == *" $n "* && "$pid" =~ ^[0-9]+$ ]] || continue
        if alive "$pid" "$st" && [[ "$(comm_of "$pid")" == "$n" ]]; then roots+=("$pid $st"); fi
      done <"$pid_file"
    fi
    ;;
  *) echo "stop-daemons: unknown mode '$mode'" >&2; exit 2 ;;
esac

if ((${#roots[@]} == 0)); then
  echo "$host: no psched or pcuda-worker to stop ($mode)"
  exit 0
fi

# Their descendants (a supervising pcuda-worker's per-GPU workers), found before anything exits.
targets=("${roots[@]}")
queue=()
for r in "${roots[@]}"; do queue+=("${r%% *}"); done
while ((${#queue[@]})); do
  parent=${queue[0]}
  queue=("${queue[@]:1}")
  for child in $(pgrep -P "$parent" || true); do
    st=$(start_time "$child") || continue
    targets+=("$child $st")
    queue+=("$child")
  done
done

describe() {
  local out=() t pid
  for t in "$@"; do
    pid=${t%% *}
    out+=("$(comm_of "$pid" || echo '?')[$pid]")
  done
  echo "${out[*]}"
}
remaining() {
  left=()
  local t
  for t in "${targets[@]}"; do
    alive "${t%% *}" "${t#* }" && left+=("$t")
  done
  return 0
}

echo "$host: SIGTERM to $(describe "${roots[@]}")"
for r in "${roots[@]}"; do kill -TERM "${r%% *}" 2>/dev/null || true; done

deadline=$((SECONDS + grace))
remaining
while ((${#left[@]})) && ((SECONDS < deadline)); do
  sleep 0.2
  remaining
done
status=0
if ((${#left[@]})); then
  echo "$host: still running after ${grace}s, SIGKILL to $(describe "${left[@]}")"
  for t in "${left[@]}"; do kill -KILL "${t%% *}" 2>/dev/null || true; done
  deadline=$((SECONDS + 5))
  remaining
  while ((${#left[@]})) && ((SECONDS < deadline)); do
    sleep 0.2
    remaining
  done
  if ((${#left[@]})); then
    echo "$host: LEFT RUNNING: $(describe "${left[@]}")"
    status=1
  fi
fi
((status)) || echo "$host: all stopped"

# Forget the launched pids that are gone.
if [[ "$mode" == launched && -f "$pid_file" ]]; then
  tmp=$pid_file.tmp.$$
  while read -r n pid st; do
    if alive "$pid" "$st"; then echo "$n $pid $st"; fi
  done <"$pid_file" >"$tmp"
  if [[ -s "$tmp" ]]; then mv -f "$tmp" "$pid_file"; else rm -f "$tmp" "$pid_file"; fi
fi
exit "$status"
