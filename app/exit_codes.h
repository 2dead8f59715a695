// The exit codes every psched binary uses (psched, pcuda-worker, pbench, psched-loadgen), listed
// in the README's "Exit codes".
#pragma once

namespace psched {

enum ExitCode : int {
  kExitOk = 0,
  // The work failed: a job failed or its check found a difference, a daemon could not start
  // serving (a port taken) or a client lost its scheduler.
  kExitFailure = 1,
  // Nothing was started: a bad option or value, a configuration or input file that cannot be used.
  kExitUsage = 2,
  // pcuda-worker: its GPU hit a sticky error (a kernel fault, an uncorrectable ECC error); a fresh
  // process gets a fresh device context, so supervisors restart it.
  kExitDeviceLost = 3,
};

// A process ended by a signal it handles (SIGINT, SIGTERM, SIGHUP in pbench) exits as the shell
// reports a process killed by it: 128 + the signal's number (130 for SIGINT).
constexpr int exit_code_for_signal(int signal) { return 128 + signal; }

}  // namespace psched
