#!/usr/bin/env bash
# deploy/systemd: the units carry what they must (restart, SIGTERM, hardening, the EnvironmentFile;
# GPU access for the worker), and `systemd-analyze verify` accepts them without a warning (run on
# copies whose ExecStart= points at this build's binaries, as the installed copies do).
#   systemd_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
units=$src/deploy/systemd
fail() { echo "FAIL: $*"; exit 1; }

# has FILE DIRECTIVE: the directive is set (uncommented) in the unit.
has() { grep -qx "$2" "$units/$1" || fail "$1: no '$2'"; }
for u in psched.service pcuda-worker.service; do
  for d in 'Restart=on-failure' 'KillSignal=SIGTERM' 'NoNewPrivileges=yes' 'ProtectSystem=strict' \
    'ProtectHome=yes' 'PrivateTmp=yes' 'DynamicUser=yes' 'EnvironmentFile=-/etc/default/psched' \
    'WantedBy=multi-user.target' 'CapabilityBoundingSet='; do
    has "$u" "$d"
  done
done
grep -q '^ExecStart=/usr/local/bin/psched ' "$units/psched.service" || fail "psched.service ExecStart"
# shellcheck disable=SC2016  # a literal ${PSCHED_SCHEDULER}
grep -q '^ExecStart=/usr/local/bin/pcuda-worker ${PSCHED_SCHEDULER}' "$units/pcuda-worker.service" ||
  fail "pcuda-worker.service must take the scheduler from PSCHED_SCHEDULER"
grep -q '^PSCHED_SCHEDULER=' "$units/psched.default" || fail "psched.default: no PSCHED_SCHEDULER"
has psched.service 'PrivateDevices=yes'
# The worker needs /dev/nvidia*: no private /dev, no closed device policy.
if grep -Eq '^(PrivateDevices=yes|DevicePolicy=(closed|strict))' "$units/pcuda-worker.service"; then
  fail "pcuda-worker.service hides the GPUs (PrivateDevices / DevicePolicy)"
fi
echo "directives: ok"

command -v systemd-analyze >/dev/null ||
  { echo "SKIP: systemd-analyze not installed; directives checked, units not verified"; exit 0; }
T=$(mktemp -d "${TMPDIR:-/tmp}/psched-deploy-systemd.XXXXXX")
trap 'rm -rf "$T"' EXIT
for u in psched.service pcuda-worker.service; do
  sed "s|/usr/local/bin/|$bin/|" "$units/$u" >"$T/$u"
done
rc=0
(cd "$T" && systemd-analyze verify ./psched.service ./pcuda-worker.service) >"$T/verify.out" 2>&1 || rc=$?
cat "$T/verify.out"
[[ $rc -eq 0 ]] || fail "systemd-analyze verify exited $rc"
[[ ! -s "$T/verify.out" ]] || fail "systemd-analyze verify printed warnings"
echo "PASS: deploy/systemd units (systemd-analyze verify: clean)"
