// What pbench prints after its runs: the text report worded as DeepOps' sum.py prints it, or one
// JSON object (--json).
#pragma once

#include <string>
#include <vector>

#include "client/result_json.h"
#include "flags.h"
#include "pclient/client.h"

namespace pbench {

// The job run --repeat times, and what the report needs.
struct Runs {
  std::vector<double> seconds;  // wall time of each run
  pclient::Result last;
  std::vector<pclient::WorkerInfo> before, after;  // the workers around the last run
  std::string problem;                             // --check: what is wrong (empty: ok)
  std::string verify_problem;                      // --verify: copies that differed (empty: none)
};

// What the job result document (client/result_json.h) is written from: the last run and the
// workers around it, with the flags' ddof and verify. --json prints it, the report embeds it.
pclient::ResultJsonInput result_input(const Flags& f, const Runs& runs);
void print_json(const Flags& f, const Runs& runs);
// The text report, worded as DeepOps' sum.py prints it, then what it does not say.
void print_text(const Flags& f, const Runs& runs);

}  // namespace pbench
