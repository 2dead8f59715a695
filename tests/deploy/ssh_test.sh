#!/usr/bin/env bash
# deploy/ssh against a real sshd on loopback: launch-scheduler.sh + launch-workers.sh on 127.0.0.1,
# an exact pbench job, cleanup.sh --launched; then every daemon the test started is gone (checked
# by pid + start time, never by name: other tests run their own psched beside this one). Also the
# SIGKILL path of cleanup.sh, with a fake psched that ignores SIGTERM.
#
#   ssh_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$src/tests/deploy/lib.sh"
kit=$src/deploy/ssh
prefix=$(cd "$bin/.." && pwd)
[[ -x "$prefix/bin/psched" ]] || fail "no $prefix/bin/psched"
sshd_prerequisites

T=$(mktemp -d "${TMPDIR:-/tmp}/psched-deploy-ssh.XXXXXX")
sshd_pid=""
teardown() {
  local name pid st
  for f in "$T"/run/pids-* "$T"/run2/pids-*; do
    [[ -f "$f" ]] || continue
    while read -r name pid st; do
      if alive "$pid" "$st"; then
        echo "teardown: ${name}[$pid] still running, killing it" >&2
        kill_tree "$pid"
      fi
    done <"$f"
  done
  if [[ -n "$sshd_pid" ]]; then
    kill -TERM "$sshd_pid" 2>/dev/null || true
    wait "$sshd_pid" 2>/dev/null || true
  fi
  rm -rf "$T"
}
trap teardown EXIT

# A throwaway sshd on a free loopback port, accepting only our new key.
make_ssh_keys "$T"
port=""
for _ in 1 2 3 4 5; do
  port=$(free_port)
  write_sshd_config "$T/sshd_config" "$T" 127.0.0.1 "$port"
  "$(sshd_path)" -D -e -f "$T/sshd_config" >>"$T/sshd.log" 2>&1 &
  sshd_pid=$!
  sleep 0.3
  if alive "$sshd_pid"; then break; fi
  sshd_pid=""
done
[[ -n "$sshd_pid" ]] || { cat "$T/sshd.log" >&2; fail "sshd did not start"; }
ssh_opts=(-p "$port" -i "$T/id_ed25519" --ssh-opts "-F /dev/null -o IdentitiesOnly=yes"
  -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)
ok=""
for _ in $(seq 50); do
  if ssh -F /dev/null -p "$port" -i "$T/id_ed25519" -o BatchMode=yes -o IdentitiesOnly=yes \
    -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
    127.0.0.1 true </dev/null 2>>"$T/ssh-probe.log"; then
    ok=1
    break
  fi
  sleep 0.2
done
if [[ -z "$ok" ]]; then
  cat "$T/ssh-probe.log" "$T/sshd.log" >&2
  # sshd runs, but will not let this user in (e.g. a locked account): not the kit's fault.
  skip "cannot log in to a test sshd as $(id -un) on 127.0.0.1 (see the log above)"
fi
say "sshd pid $sshd_pid on 127.0.0.1:$port"

for s in launch-scheduler.sh launch-workers.sh cleanup.sh; do
  help=$("$kit/$s" --help) || fail "$s --help exited non-zero"
  [[ "$help" == "usage: $s "* ]] || fail "$s --help: $help"
done

say "launch-scheduler.sh"
addr=$("$kit/launch-scheduler.sh" "${ssh_opts[@]}" --prefix "$prefix" --log-dir "$T/run" 127.0.0.1 \
  -- --host 127.0.0.1 --port 0 --dashboard-address none)
echo "$addr"
[[ "$addr" =~ ^tcp://127\.0\.0\.1:[0-9]+$ ]] || fail "launch-scheduler.sh printed '$addr'"

say "launch-workers.sh (two workers on the same host, each supervising 2 CPU worker processes)"
"$kit/launch-workers.sh" "${ssh_opts[@]}" --prefix "$prefix" --log-dir "$T/run" "$addr" \
  127.0.0.1 127.0.0.1 -- --backend cpu --nworkers 2 --nthreads 1 | tee "$T/workers.out"
[[ $(grep -c 'pcuda-worker pid' "$T/workers.out") -eq 2 ]] || fail "expected two workers started"

host=$(uname -n)
pidfile=$T/run/pids-$host
[[ -f "$pidfile" ]] || fail "no pid file $pidfile"
[[ $(grep -c '^psched ' "$pidfile") -eq 1 && $(grep -c '^pcuda-worker ' "$pidfile") -eq 2 ]] ||
  fail "pid file: $(cat "$pidfile")"
# Everything started: the daemons and their worker processes, each as "PID START".
started=()
while read -r name pid st; do
  [[ "$(cat "/proc/$pid/comm")" == "$name" ]] || fail "pid $pid is not $name"
  started+=("$pid $st")
  for child in $(descendants "$pid"); do started+=("$child $(start_time "$child")"); done
done <"$pidfile"
[[ ${#started[@]} -eq 7 ]] || fail "expected 1 scheduler + 2 supervisors + 4 workers, got ${#started[@]}"
ls "$T"/run/psched-*.log "$T"/run/pcuda-worker-*.log >/dev/null || fail "no logs in $T/run"

say "pbench -d (exact arange, --check)"
"$bin/pbench" -d --scheduler "$addr" -x 2000 -y 3000 --chunk-x 500 --chunk-y 700 --generator arange \
  --row-step 1 --col-step 1 --check --json | tee "$T/pbench.json"
grep -q '"check":"ok"' "$T/pbench.json" || fail "pbench check"
grep -q '"cluster_workers":4' "$T/pbench.json" || fail "pbench did not see 4 workers"

say "cleanup.sh --launched"
"$kit/cleanup.sh" "${ssh_opts[@]}" --log-dir "$T/run" --launched --grace 30 127.0.0.1 |
  tee "$T/cleanup.out" || fail "cleanup.sh exited non-zero"
grep -q 'all stopped' "$T/cleanup.out" || fail "cleanup.sh did not say all stopped"
if grep -q SIGKILL "$T/cleanup.out"; then fail "the daemons needed SIGKILL: SIGTERM did not stop them"; fi
for t in "${started[@]}"; do
  if alive "${t%% *}" "${t#* }"; then fail "pid ${t%% *} is still running after cleanup.sh"; fi
done
[[ ! -e "$pidfile" ]] || fail "cleanup.sh left $pidfile: $(cat "$pidfile")"
grep -q 'leaving: SIGTERM' "$T"/run/pcuda-worker-*.log || fail "workers did not leave on SIGTERM"
"$kit/cleanup.sh" "${ssh_opts[@]}" --log-dir "$T/run" --launched 127.0.0.1 | tee "$T/cleanup2.out"
grep -q 'no psched or pcuda-worker to stop' "$T/cleanup2.out" || fail "second cleanup.sh"

say "cleanup.sh --launched: SIGKILL after the grace period (a fake psched that ignores SIGTERM)"
mkdir -p "$T/fake/bin"
cat >"$T/fake/bin/psched" <<'EOF'
#!/bin/bash
# Ignores SIGTERM; writes the scheduler file it is given, then sleeps (a child, killed too).
trap '' TERM
while (($#)); do
  if [[ "$1" == --scheduler-file ]]; then echo '{"address": "tcp://127.0.0.1:1"}' >"$2"; fi
  shift
done
sleep 600 &
wait
EOF
chmod +x "$T/fake/bin/psched"
"$kit/launch-scheduler.sh" "${ssh_opts[@]}" --prefix "$T/fake" --log-dir "$T/run2" 127.0.0.1 >/dev/null
read -r _ fake_pid fake_st <"$T/run2/pids-$host"
sleep_pid=""
for _ in $(seq 50); do
  sleep_pid=$(pgrep -P "$fake_pid" || true)
  [[ -z "$sleep_pid" ]] || break
  sleep 0.1
done
[[ -n "$sleep_pid" ]] || fail "the fake psched has no child"
sleep_st=$(start_time "$sleep_pid")
rc=0
"$kit/cleanup.sh" "${ssh_opts[@]}" --log-dir "$T/run2" --launched --grace 1 127.0.0.1 |
  tee "$T/cleanup3.out" || rc=$?
[[ $rc -eq 0 ]] || fail "cleanup.sh exited $rc although SIGKILL worked"
grep -q "SIGKILL to .*psched\[$fake_pid\]" "$T/cleanup3.out" || fail "cleanup.sh did not SIGKILL the fake psched"
grep -q 'all stopped' "$T/cleanup3.out" || fail "cleanup.sh did not say all stopped"
if alive "$fake_pid" "$fake_st"; then fail "the fake psched survived"; fi
if alive "$sleep_pid" "$sleep_st"; then fail "the fake psched's child survived"; fi

say "unreachable host: cleanup.sh fails"
rc=0
"$kit/cleanup.sh" -p "$(free_port)" -i "$T/id_ed25519" --ssh-opts "-F /dev/null" \
  -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR --launched \
  --log-dir "$T/run" 127.0.0.1 >"$T/cleanup4.out" 2>&1 || rc=$?
cat "$T/cleanup4.out"
[[ $rc -ne 0 ]] || fail "cleanup.sh of an unreachable host exited 0"
grep -q UNREACHABLE "$T/cleanup4.out" || fail "cleanup.sh did not say UNREACHABLE"

echo "PASS: deploy/ssh on loopback"
