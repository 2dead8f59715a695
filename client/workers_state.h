// What a client tells a person while its job has no worker to run it (Progress::no_workers): at
// once, again every 10 s while it lasts, and once more when a worker joins. pbench prints the
// lines, the Python client writes them to sys.stderr: the same words from one place.
#pragma once

#include <chrono>
#include <string>

#include "pclient/client.h"

namespace pclient {

// What the client last said about its job having no worker.
struct WorkersShown {
  bool none = false;
  std::chrono::steady_clock::time_point since, last_said;
};
// The line to show for this progress ("" when nothing is new).
std::string workers_state_line(const Progress& p, WorkersShown& shown);

}  // namespace pclient
