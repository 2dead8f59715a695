#!/usr/bin/env bash
# deploy/slurm/psched.sbatch on a real single-node Slurm started by this test: munged with a fresh
# key, slurmctld and slurmd with a minimal configuration (no cgroups, everything under a temp dir,
# free ports, the node named after `hostname -s`). Job 1 runs an exact arange --check job on the CPU
# backend and must print "Check: ok" and stop its cluster; job 2 is cancelled (scancel) while pbench
# runs and must stop its cluster from the TERM trap. Every process the test starts carries
# PSCHED_DEPLOY_TEST=<its temp dir> in its environment; none may be left when it ends.
#
#   slurm_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$src/tests/deploy/lib.sh"
prefix=$(cd "$bin/.." && pwd)
[[ -x "$prefix/bin/psched" ]] || fail "no $prefix/bin/psched"

for tool in slurmctld slurmd sbatch scancel scontrol sinfo srun munged; do
  command -v "$tool" >/dev/null ||
    skip "$tool not installed (deploy/install-deps.sh --test installs slurm-wlm and munge)"
done
[[ $(id -u) -eq 0 ]] || skip "a test Slurm needs root (slurmd runs jobs as their users; SlurmUser=root)"
node=$(hostname -s)

T=$(mktemp -d "${TMPDIR:-/tmp}/psched-deploy-slurm.XXXXXX")
chmod 755 "$T"
export PSCHED_DEPLOY_TEST=$T
export SLURM_CONF=$T/slurm.conf
daemons=()   # "PID NAME"

# ours: "PID COMM" of every process carrying this test's marker (except this shell's own pipeline):
# PSCHED_DEPLOY_TEST=$T, or SLURM_CONF=$T/slurm.conf (what slurmd leaves in a slurmstepd's
# environment).
ours() {
  local p
  for p in /proc/[0-9]*; do
    [[ "${p#/proc/}" != "$$" && "${p#/proc/}" != "$BASHPID" ]] || continue
    if tr '\0' '\n' 2>/dev/null <"$p/environ" |
      grep -qxF -e "PSCHED_DEPLOY_TEST=$T" -e "SLURM_CONF=$T/slurm.conf"; then
      echo "${p#/proc/} $(cat "$p/comm" 2>/dev/null)"
    fi
  done
}
# job_processes: ours() without the Slurm and munge daemons (and their helpers, e.g. slurmctld's
# slurmscriptd) and this test's own subshells.
job_processes() {
  local d pid comm skip_it ppid
  while read -r pid comm; do
    skip_it=""
    ppid=$(awk '/^PPid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
    for d in "${daemons[@]}"; do [[ "${d%% *}" == "$pid" || "${d%% *}" == "$ppid" ]] && skip_it=1; done
    [[ -z "$skip_it" ]] || continue
    # This test's own subshells.
    if [[ "$comm" == bash && "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" == *slurm_test.sh* ]]; then
      continue
    fi
    echo "$pid $comm"
  done < <(ours)
}
teardown() {
  local d left
  for d in "${daemons[@]}"; do kill -TERM "${d%% *}" 2>/dev/null || true; done
  for d in "${daemons[@]}"; do wait "${d%% *}" 2>/dev/null || true; done
  # Anything else still carrying our marker (a stray slurmstepd or job process): ours, kill it.
  left=$(job_processes)
  if [[ -n "$left" ]]; then
    echo "teardown: killing what is left: $left" >&2
    while read -r pid _; do kill -KILL "$pid" 2>/dev/null || true; done <<<"$left"
  fi
  if [[ -n "${KEEP_T:-}" ]]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap teardown EXIT

show_logs() {
  local f
  for f in "$T"/*.log "$T"/shared/*/*.log "$T"/job-*.out; do
    [[ -f "$f" ]] || continue
    echo "==== $f" >&2
    tail -n 30 "$f" >&2
  done
}
die_with_logs() {
  show_logs
  fail "$*"
}

# munge with a key of our own, on a socket of our own.
mkdir -p "$T/state" "$T/spool" "$T/shared"
dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 status=none
chmod 600 "$T/munge.key"
munged -F -f --socket="$T/munge.sock" --key-file="$T/munge.key" --pid-file="$T/munged.pid" \
  --log-file="$T/munged.log" --seed-file="$T/munged.seed" >>"$T/munged.out" 2>&1 &
daemons+=("$! munged")
for _ in $(seq 50); do
  [[ -S "$T/munge.sock" ]] && break
  sleep 0.1
done
[[ -S "$T/munge.sock" ]] || { cat "$T/munged.out" "$T/munged.log" >&2; skip "munged did not start here"; }

ctld_port=$(free_port)
slurmd_port=$(free_port)
while [[ "$slurmd_port" == "$ctld_port" ]]; do slurmd_port=$(free_port); done
cat >"$SLURM_CONF" <<EOF
ClusterName=pschedtest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$T/munge.sock
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ReturnToService=2
KillWait=30
MinJobAge=600
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i -f "$SLURM_CONF" >>"$T/slurmctld.out" 2>&1 &
daemons+=("$! slurmctld")
slurmd -D -f "$SLURM_CONF" -N "$node" >>"$T/slurmd.out" 2>&1 &
daemons+=("$! slurmd")

state=""
for _ in $(seq 150); do
  state=$(sinfo -h -N -n "$node" -o %T 2>/dev/null || true)
  [[ "$state" == idle ]] && break
  for d in "${daemons[@]}"; do
    alive "${d%% *}" || { cat "$T"/*.out >&2; skip "${d#* } exited at start here (output above)"; }
  done
  sleep 0.2
done
[[ "$state" == idle ]] || { cat "$T"/*.out >&2; skip "the test Slurm node did not become idle (state '$state')"; }
say "Slurm up: node $node, slurmctld :$ctld_port, slurmd :$slurmd_port"

# job_state ID: JobState and ExitCode of a job, e.g. "COMPLETED 0:0".
job_state() {
  local line
  line=$(scontrol -o show job "$1" 2>/dev/null) || return 0
  local st=${line#*JobState=} ec=${line#*ExitCode=}
  echo "${st%% *} ${ec%% *}"
}
# wait_job ID SECONDS: waits for the job to end; prints "STATE EXITCODE".
wait_job() {
  local s deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    s=$(job_state "$1")
    case "$s" in
      PENDING* | RUNNING* | CONFIGURING* | COMPLETING* | "") sleep 0.5 ;;
      *) echo "$s"; return 0 ;;
    esac
  done
  echo "TIMEOUT $(job_state "$1")"
}
# no_job_processes: nothing of a job may be left (its slurmstepd gets a while to report and end).
no_job_processes() {
  local left=""
  for _ in $(seq 150); do
    left=$(job_processes)
    [[ -n "$left" ]] || return 0
    sleep 0.2
  done
  die_with_logs "left after $1: $(echo "$left" | tr '\n' ' ')"
}

export PSCHED_PREFIX=$prefix
export PSCHED_SHARED_DIR=$T/shared
export PSCHED_WORKER_ARGS="--backend cpu --nthreads 1"
export PSCHED_WAIT=60
sbatch_script=$src/deploy/slurm/psched.sbatch

say "job 1: exact arange --check, mutual TLS with a CA made for the job"
export PBENCH_ARGS="-x 2000 -y 3000 --chunk-x 500 --chunk-y 700 --generator arange --row-step 1 --col-step 1 --check"
job1=$(PSCHED_TLS=job PSCHED_MAKE_CERTS=$src/deploy/make-certs.sh \
  sbatch --parsable -N1 --time=5 --chdir="$T" --output="$T/job-%j.out" "$sbatch_script") ||
  die_with_logs "sbatch failed"
job1=${job1%%;*}
result=$(wait_job "$job1" 120)
cat "$T/job-$job1.out"
[[ "$result" == "COMPLETED 0:0" ]] || die_with_logs "job 1 ended as '$result'"
out=$(cat "$T/job-$job1.out")
[[ "$out" == *"Check: ok"* ]] || die_with_logs "job 1 has no 'Check: ok'"
[[ "$out" == *"1 worker process(es) registered"* ]] || die_with_logs "job 1: worker not registered"
[[ "$out" == *"mutual TLS with the certificates in"* ]] || die_with_logs "job 1 did not turn TLS on"
[[ "$out" == *"psched.sbatch: scheduler tls://"* ]] || die_with_logs "job 1's scheduler is not on tls://"
[[ ! -e "$T/shared/psched-$job1/tls" ]] || die_with_logs "job 1 left its certificates"
[[ "$out" == *"psched.sbatch: cluster stopped"* ]] || die_with_logs "job 1 did not stop its cluster"
[[ ! -e "$T/shared/psched-$job1/scheduler.json" ]] || die_with_logs "job 1 left its scheduler file"
grep -q 'leaving' "$T/shared/psched-$job1/pcuda-worker-$node.log" || die_with_logs "job 1: the worker did not leave cleanly"
no_job_processes "job 1"

say "job 2: cancelled while pbench runs"
# 80 GB on one CPU thread: a minute or more, time enough to cancel it.
export PBENCH_ARGS="-x 100000 -y 100000 --chunk-x 2000 --chunk-y 2000 --generator arange --check"
job2=$(sbatch --parsable -N1 --time=5 --chdir="$T" --output="$T/job-%j.out" "$sbatch_script") ||
  die_with_logs "sbatch failed"
job2=${job2%%;*}
for _ in $(seq 300); do
  grep -q 'psched.sbatch: pbench -d' "$T/job-$job2.out" 2>/dev/null && break
  # Stop waiting once the job has ended; a job being set up (CONFIGURING) or not yet known to
  # scontrol (an empty state, seen on a loaded machine) has not.
  state=$(job_state "$job2")
  [[ -z "${state// /}" || "$state" == RUNNING* || "$state" == PENDING* || "$state" == CONFIGURING* ]] || break
  sleep 0.2
done
grep -q 'psched.sbatch: pbench -d' "$T/job-$job2.out" || die_with_logs "job 2 never started pbench"
sleep 1
scancel "$job2"
result=$(wait_job "$job2" 90)
# Slurm marks the job CANCELLED when it signals it; the batch script's TERM trap may still be
# stopping the cluster. Its output is whole once none of its processes is left.
no_job_processes "job 2"
cat "$T/job-$job2.out"
[[ "$result" == CANCELLED* ]] || die_with_logs "job 2 ended as '$result'"
out=$(cat "$T/job-$job2.out")
[[ "$out" == *"SIGTERM received"* ]] || die_with_logs "job 2: the TERM trap did not run"
[[ "$out" == *"psched.sbatch: cluster stopped"* ]] || die_with_logs "job 2 did not stop its cluster"
[[ "$out" != *"Check: ok"* ]] || die_with_logs "job 2 finished before it was cancelled"

say "stopping Slurm and munge"
for d in "${daemons[@]}"; do kill -TERM "${d%% *}" 2>/dev/null || true; done
for d in "${daemons[@]}"; do wait "${d%% *}" 2>/dev/null || true; done
daemons=()
left=$(job_processes)
[[ -z "$left" ]] || fail "left after stopping Slurm: $left"
echo "PASS: deploy/slurm/psched.sbatch on a single-node Slurm"
