#!/usr/bin/env bash
# deploy/ssh across two "hosts": two network namespaces made by this test (joined by a veth pair,
# addresses 198.18.0.1 and 198.18.0.2 from the benchmarking range, which exist only inside them),
# each with its own PID and UTS namespace (hostnames psched-host-a/b) and its own sshd on port 22.
# The cluster runs with mutual TLS and a token, certificates from deploy/make-certs.sh (--tls-dir):
# the scheduler on host A (default ports 8786/8787, the dashboard HTTPS and 401 without the token),
# one worker on each host; pbench runs an exact job from host A over TLS; then cleanup.sh in its default killall-like mode (every process named
# psched or pcuda-worker on the host, which here means in that host's PID namespace only) stops them,
# and the test checks that nothing but sshd is left in either namespace.
# Skips with a message where the machine cannot make namespaces.
#
#   ssh_netns_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$src/tests/deploy/lib.sh"
kit=$src/deploy/ssh
prefix=$(cd "$bin/.." && pwd)
[[ -x "$prefix/bin/psched" ]] || fail "no $prefix/bin/psched"
sshd_prerequisites
[[ $(id -u) -eq 0 ]] || skip "network namespaces need root"
command -v ip >/dev/null || skip "ip not installed (iproute2)"
command -v unshare >/dev/null || skip "unshare not installed (util-linux)"

T=$(mktemp -d "${TMPDIR:-/tmp}/psched-deploy-netns.XXXXXX")
A=psched-a-$$
B=psched-b-$$
host_pids=()
teardown() {
  local p
  # Killing a host's unshare (SIGKILL: it ignores SIGTERM) kills its namespace's init (sshd,
  # --kill-child), and the kernel then kills every process left in that PID namespace.
  for p in "${host_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${host_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$T"
}
trap teardown EXIT

if ! ip netns add "$A" 2>"$T/netns.err"; then
  skip "cannot create a network namespace here: $(cat "$T/netns.err")"
fi
ip netns add "$B"
if ! unshare --pid --uts --fork --mount-proc true 2>"$T/unshare.err"; then
  skip "cannot create PID/UTS namespaces here: $(cat "$T/unshare.err")"
fi
ip -n "$A" link set lo up
ip -n "$B" link set lo up
ip -n "$A" link add psa type veth peer name psb netns "$B"
ip -n "$A" addr add 198.18.0.1/24 dev psa
ip -n "$B" addr add 198.18.0.2/24 dev psb
ip -n "$A" link set psa up
ip -n "$B" link set psb up

make_ssh_keys "$T"
sshd=$(sshd_path)
# start_host NS ADDRESS HOSTNAME: sshd as PID 1 of new PID + UTS namespaces inside NS.
start_host() {
  write_sshd_config "$T/sshd-$3.conf" "$T" "$2" 22
  # shellcheck disable=SC2016  # expanded by the inner bash
  ip netns exec "$1" unshare --uts --pid --fork --mount-proc --kill-child \
    bash -c 'hostname "$0" && exec "$1" -D -e -f "$2"' "$3" "$sshd" "$T/sshd-$3.conf" \
    >>"$T/sshd-$3.log" 2>&1 &
  host_pids+=($!)
}
start_host "$A" 198.18.0.1 psched-host-a
start_host "$B" 198.18.0.2 psched-host-b

in_a() { ip netns exec "$A" "$@"; }
ssh_opts=(-i "$T/id_ed25519" --ssh-opts "-F /dev/null -o IdentitiesOnly=yes"
  -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)
for addr in 198.18.0.1 198.18.0.2; do
  ok=""
  for _ in $(seq 50); do
    if in_a ssh -F /dev/null -i "$T/id_ed25519" -o BatchMode=yes -o IdentitiesOnly=yes \
      -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
      "$addr" true </dev/null 2>>"$T/ssh-probe.log"; then
      ok=1
      break
    fi
    sleep 0.2
  done
  if [[ -z "$ok" ]]; then
    cat "$T/ssh-probe.log" "$T"/sshd-*.log >&2
    skip "cannot log in to the test sshd at $addr in a namespace (see the log above)"
  fi
done
# The PID namespace of each host, to look at its processes from outside.
ns_of_host() {
  local inner=""
  for _ in $(seq 50); do
    inner=$(pgrep -P "$1" || true)
    [[ -z "$inner" ]] || break
    sleep 0.1
  done
  readlink "/proc/$inner/ns/pid"
}
ns_a=$(ns_of_host "${host_pids[0]}")
ns_b=$(ns_of_host "${host_pids[1]}")
[[ -n "$ns_a" && -n "$ns_b" && "$ns_a" != "$ns_b" ]] || fail "no PID namespaces ($ns_a, $ns_b)"
# in_ns NS: "PID COMM" of every process in that PID namespace.
in_ns() {
  local p
  for p in /proc/[0-9]*; do
    if [[ "$(readlink "$p/ns/pid" 2>/dev/null)" == "$1" ]]; then
      echo "${p#/proc/} $(cat "$p/comm" 2>/dev/null)"
    fi
  done
}
say "hosts up: A = 198.18.0.1 ($ns_a), B = 198.18.0.2 ($ns_b)"

say "make-certs.sh: a CA and a certificate per host (and one for pbench); a cluster token"
"$src/deploy/make-certs.sh" "$T/certs" 198.18.0.1 198.18.0.2 client
(umask 077 && echo "netns-token-$RANDOM$RANDOM" >"$T/token")
tls=(--tls-dir "$T/certs" --token-file "$T/token")

say "launch-scheduler.sh on host A (ports 8786/8787), mutual TLS"
addr=$(in_a "$kit/launch-scheduler.sh" "${ssh_opts[@]}" "${tls[@]}" --prefix "$prefix" --log-dir "$T/run" \
  198.18.0.1 -- --host 198.18.0.1)
echo "$addr"
[[ "$addr" == tls://198.18.0.1:8786 ]] || fail "launch-scheduler.sh printed '$addr'"
if command -v curl >/dev/null; then
  health=$(in_a curl -fsS --max-time 5 --cacert "$T/certs/ca.pem" https://198.18.0.1:8787/health) ||
    fail "no HTTPS dashboard on 8787"
  [[ "$health" == ok ]] || fail "/health said '$health'"
  echo "dashboard https://198.18.0.1:8787/health: $health"
  code=$(in_a curl -sS -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$T/certs/ca.pem" \
    https://198.18.0.1:8787/metrics)
  [[ "$code" == 401 ]] || fail "/metrics without the token answered $code, not 401"
fi

say "launch-workers.sh on hosts A and B (each supervising 2 CPU worker processes)"
in_a "$kit/launch-workers.sh" "${ssh_opts[@]}" "${tls[@]}" --prefix "$prefix" --log-dir "$T/run" "$addr" \
  198.18.0.1 198.18.0.2 -- --backend cpu --nworkers 2 --nthreads 1
[[ -f "$T/run/pids-psched-host-a" && -f "$T/run/pids-psched-host-b" ]] || fail "no pid files per host"
procs_a=$(in_ns "$ns_a")
procs_b=$(in_ns "$ns_b")
[[ "$procs_a" == *" psched"* && "$procs_a" == *" pcuda-worker"* ]] || fail "host A runs: $procs_a"
[[ "$procs_b" == *" pcuda-worker"* && "$procs_b" != *" psched"* ]] || fail "host B runs: $procs_b"

say "pbench -d from host A over TLS (exact arange, --check)"
in_a "$bin/pbench" -d --scheduler "$addr" --token-file "$T/token" --tls-ca-file "$T/certs/ca.pem" \
  --tls-cert "$T/certs/client.pem" --tls-key "$T/certs/client.key" -x 2000 -y 3000 --chunk-x 500 --chunk-y 700 \
  --generator arange --row-step 1 --col-step 1 --check --json | tee "$T/pbench.json"
grep -q '"check":"ok"' "$T/pbench.json" || fail "pbench check"
grep -q '"cluster_workers":4' "$T/pbench.json" || fail "pbench did not see 4 workers"
grep -q 'joined from 198.18.0.2' "$T"/run/psched-psched-host-a-*.log ||
  fail "no worker joined from host B (scheduler log)"

say "cleanup.sh (default: every psched / pcuda-worker on each host)"
in_a "$kit/cleanup.sh" "${ssh_opts[@]}" --grace 30 198.18.0.1 198.18.0.2 | tee "$T/cleanup.out" ||
  fail "cleanup.sh exited non-zero"
[[ $(grep -c 'all stopped' "$T/cleanup.out") -eq 2 ]] || fail "cleanup.sh did not stop both hosts"
if grep -q SIGKILL "$T/cleanup.out"; then fail "the daemons needed SIGKILL"; fi
# Nothing but sshd (the listener, sessions finishing) may be left in either host.
for ns in "$ns_a" "$ns_b"; do
  left=""
  for _ in $(seq 25); do
    left=$(in_ns "$ns" | grep -v ' sshd$' || true)
    [[ -n "$left" ]] || break
    sleep 0.2
  done
  [[ -z "$left" ]] || fail "left in $ns after cleanup.sh: $left"
done
out=$(in_a "$kit/cleanup.sh" "${ssh_opts[@]}" 198.18.0.2)
[[ "$out" == *"no psched or pcuda-worker to stop"* ]] || fail "second cleanup.sh: $out"

echo "PASS: deploy/ssh across two network namespaces"
