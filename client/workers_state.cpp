// What a client says while its job has no worker (workers_state.h).
#include "client/workers_state.h"

#include <fmt/format.h>

#include "core/plural.h"

namespace pclient {

std::string workers_state_line(const Progress& p, WorkersShown& shown) {
  const auto now = std::chrono::steady_clock::now();
  const uint64_t left = p.chunks_total - p.chunks_done;
  if (!p.no_workers) {
    const bool was_none = shown.none;
    shown.none = false;
    return was_none ? fmt::format("a worker joined: the job goes on ({} left)", psched::counted(left, "chunk")) : "";
  }
  if (!shown.none) {
    shown = {true, now, now};
    return fmt::format("no workers: waiting for one to join, {} left", psched::counted(left, "chunk"));
  }
  if (now - shown.last_said < std::chrono::seconds(10)) return "";
  shown.last_said = now;
  return fmt::format("still no workers after {:.0f} s: waiting for one to join, {} left",
                     std::chrono::duration<double>(now - shown.since).count(), psched::counted(left, "chunk"));
}

}  // namespace pclient
