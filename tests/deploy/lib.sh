# shellcheck shell=bash
# Helpers of the deploy tests (sourced). Every process a test starts is tracked by pid and stopped
# by pid; nothing here kills by name, so tests running beside these are safe.

skip() {
  echo "SKIP: $*"
  exit 0
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
say() { echo "-- $*"; }

# free_port: a TCP port free on 127.0.0.1 right now.
free_port() {
  if command -v python3 >/dev/null; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
  else
    echo $((20000 + RANDOM % 30000))
  fi
}

# start_time PID: field 22 of /proc/PID/stat; with the pid it names one process, pid reuse or not.
start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086  # split the fields on purpose
  set -- $stat
  echo "${20}"
}
# alive PID [START]: running (zombies count as gone), and started at START when given.
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ "${stat:0:1}" != Z ]] || return 1
  [[ -z "${2:-}" ]] || [[ "$(start_time "$1")" == "$2" ]]
}
# descendants PID: every descendant's pid, one per line.
descendants() {
  local child
  for child in $(pgrep -P "$1" || true); do
    echo "$child"
    descendants "$child"
  done
}
# kill_tree PID: SIGKILL to PID and its descendants (test teardown only).
kill_tree() {
  local p
  for p in "$1" $(descendants "$1"); do kill -KILL "$p" 2>/dev/null || true; done
}

# make_ssh_keys DIR: DIR/host_key (sshd) and DIR/id_ed25519 (client) with DIR/authorized_keys.
make_ssh_keys() {
  ssh-keygen -q -t ed25519 -N '' -C psched-test-host -f "$1/host_key"
  ssh-keygen -q -t ed25519 -N '' -C psched-test-user -f "$1/id_ed25519"
  cp "$1/id_ed25519.pub" "$1/authorized_keys"
  chmod 600 "$1/authorized_keys"
}
# write_sshd_config FILE DIR ADDRESS PORT: a throwaway sshd accepting only DIR's key.
write_sshd_config() {
  cat >"$1" <<EOF
ListenAddress $3
Port $4
HostKey $2/host_key
AuthorizedKeysFile $2/authorized_keys
PidFile none
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
LogLevel VERBOSE
EOF
}
# sshd_ready: sshd as root needs its privilege separation directory.
sshd_prerequisites() {
  command -v sshd >/dev/null || command -v /usr/sbin/sshd >/dev/null ||
    skip "sshd not installed (deploy/install-deps.sh --test installs openssh-server)"
  command -v ssh >/dev/null || skip "ssh not installed (openssh-client)"
  command -v ssh-keygen >/dev/null || skip "ssh-keygen not installed (openssh-client)"
  if [[ $(id -u) -eq 0 && ! -d /run/sshd ]]; then mkdir -m 0755 /run/sshd 2>/dev/null || [[ -d /run/sshd ]]; fi
}
sshd_path() { command -v sshd || echo /usr/sbin/sshd; }
