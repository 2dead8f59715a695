// The exit codes every psched binary uses (psched, pcuda-worker, pbench, psched-loadgen), listed
// in the README's "Exit codes".
#pragma once

#include <cstdio>
#include <string_view>

#include "core/status.h"

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
  // pcuda-worker: asked to stop, it could not within a few seconds because a device call does not
  // return (a hung kernel); the device likely needs a reset before a worker can use it again.
  kExitDeviceHung = 4,
  // pbench --burn: no GPU failed, but at least one warned (slow against its model's median,
  // throttled other than by its power cap, or hotter than the limit).
  kExitBurnWarnings = 5,
};

// The exit code a failure calls for: a bad input is a usage error, anything else a failure. (A lost
// GPU is no Status: pcuda-worker learns it from a chunk's outcome and exits kExitDeviceLost itself.)
constexpr int exit_code(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalid: return kExitUsage;
    case StatusCode::kFailed: break;
  }
  return kExitFailure;
}

// How a binary ends on a failure it cannot go on from: "program: message" on stderr, and the exit
// code the failure's code calls for.
inline int exit_on(std::string_view program, const Status& failure) {
  std::fprintf(stderr, "%.*s: %s\n", int(program.size()), program.data(), failure.message().c_str());
  return exit_code(failure.code());
}

// A process ended by a signal it handles (SIGINT, SIGTERM, SIGHUP in pbench) exits as the shell
// reports a process killed by it: 128 + the signal's number (130 for SIGINT).
constexpr int exit_code_for_signal(int signal) { return 128 + signal; }

}  // namespace psched
