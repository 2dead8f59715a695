#include "scheduler/burn_board.h"

#include <fmt/format.h>

namespace psched {

Status BurnBoard::update(ClientId client, const std::string& client_name, BurnStatus status) {
  if (status.ended) {
    burns_.erase(client);
    return Status::ok();
  }
  auto it = burns_.find(client);
  if (it == burns_.end()) {
    if (burns_.size() >= kMaxBurnsHeld)
      return Status::invalid(fmt::format("burn status refused: {} burns are shown already, at most {}",
                                         burns_.size(), kMaxBurnsHeld));
    it = burns_.emplace(client, Entry{client_name, {}}).first;
  }
  it->second.status = std::move(status);
  return Status::ok();
}

}  // namespace psched
