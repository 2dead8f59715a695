// The burn-ins running against this scheduler, as the dashboard shows them: the latest BurnStatus
// each client connection sent (pbench --burn's watcher, about once a second), kept until the
// connection closes or the burn says it ended. The scheduler's loop owns it; no locks. What a
// client may make it hold is bounded (core/burn_status.h: GPUs and text per burn, kMaxBurnsHeld).
#pragma once

#include <map>
#include <string>

#include "core/burn_status.h"
#include "core/status.h"
#include "scheduler/ids.h"

namespace psched {

class BurnBoard {
 public:
  struct Entry {
    std::string client;  // the client's name, as it said at Hello
    BurnStatus status;
  };

  // A client's latest burn status (already validated): kept, replacing its previous one, or
  // forgotten when it says the burn ended. Refused, changing nothing, when kMaxBurnsHeld other
  // clients' burns are held already.
  Status update(ClientId client, const std::string& client_name, BurnStatus status);
  void drop(ClientId client) { burns_.erase(client); }
  const std::map<ClientId, Entry>& burns() const { return burns_; }

 private:
  std::map<ClientId, Entry> burns_;
};

}  // namespace psched
