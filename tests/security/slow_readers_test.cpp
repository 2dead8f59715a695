// Clients that ask for streamed partials and never read their socket (issue 49): psched keeps
// sending them Progress, and what it cannot send waits in its memory. Each client is held to
// --max-client-unsent and all of them together to --max-total-unsent (the one holding the most is
// cut off first), so psched's held bytes stay bounded, the slow readers are cut off with a log line
// saying why, and a client that reads gets its job's exact result meanwhile.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "abuse_helpers.h"
#include "client/job_spec_of.h"
#include "dashboard/http_probe.h"
#include "net/wire_convert.h"

using namespace psched::test;
namespace wire = psched::wire;

namespace {

constexpr size_t kClientLimit = size_t{4} << 20;
constexpr size_t kTotalLimit = size_t{8} << 20;

// psched's own figure for what it holds unsent for clients (/api/status), or -1 if it has none.
long long client_unsent_bytes(uint16_t dashboard_port) {
  const HttpReply r = http_request(dashboard_port, "GET", "/api/status?devices=0");
  const std::string key = "\"client_unsent_bytes\":";
  const size_t at = r.body.find(key);
  if (r.status != 200 || at == std::string::npos) return -1;
  return std::stoll(r.body.substr(at + key.size()));
}

// A job of `chunks` one-element chunks: a partial each, ~100 bytes of Progress per chunk.
pclient::Job one_element_chunks(uint64_t chunks) { return arange_job(1, chunks, 1, 1); }

}  // namespace

TEST_CASE("clients that never read their streamed partials are cut off, psched's held bytes stay bounded "
          "and a client that reads gets its exact result", "[security]") {
  TestCluster cluster({.extra_args = {"--max-client-unsent", std::to_string(kClientLimit), "--max-total-unsent",
                                      std::to_string(kTotalLimit)},
                       .dashboard = "127.0.0.1:0"});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  const uint16_t dashboard = port_of(cluster.dashboard());
  REQUIRE(client_unsent_bytes(dashboard) == 0);

  // What psched holds, sampled while the slow readers pile up.
  std::atomic<bool> sampling{true};
  std::atomic<long long> most{0};
  std::thread sampler([&] {
    while (sampling) {
      const long long held = client_unsent_bytes(dashboard);
      most = std::max(most.load(), held);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });

  // Each slow reader's job would stream ~30 MB of partials: 120 MB in psched without a bound.
  constexpr int kSlowReaders = 4;
  std::vector<std::unique_ptr<RawPeer>> slow;
  for (int i = 0; i < kSlowReaders; ++i) {
    auto peer = std::make_unique<RawPeer>(port_of(cluster));
    REQUIRE(peer->hello_as_client());
    REQUIRE(peer->send_message([](wire::Message::Builder m) {
      auto submit = m.initSubmit();
      submit.setTag(1);
      submit.setWantPartials(true);
      psched::to_wire(pclient::job_spec_of(one_element_chunks(300000)), submit.initSpec());
    }));
    slow.push_back(std::move(peer));
  }
  // A client that reads, streaming partials too: its job goes through exactly.
  const pclient::Job job = arange_job(400, 400, 20, 20);
  pclient::RunOptions options;
  options.want_partials = true;
  uint64_t partials = 0;
  options.on_progress = [&](const pclient::Progress& p) { partials += p.partials.size(); };
  const pclient::Result result = cluster.client().run(job, options);
  CHECK(check(job, result) == "");
  CHECK(partials == 400);

  // Every slow reader is cut off (nothing of theirs is held any more) and the log says why.
  const pid_t scheduler = cluster.scheduler_pid();
  CHECK(eventually([&] {
    const std::string log = cluster.log_of(scheduler);
    size_t cut = 0;  // one "client ... left: <why>" line each, whichever limit cut it off
    for (const std::string why : {"left: peer is not reading: ", "left: not reading: psched holds "})
      for (size_t at = log.find(why); at != std::string::npos; at = log.find(why, at + 1)) ++cut;
    return cut >= size_t(kSlowReaders);
  }, 60000));
  CHECK(eventually([&] { return client_unsent_bytes(dashboard) < 64 * 1024; }));
  sampling = false;
  sampler.join();
  INFO("most held for clients: " << most.load() << " bytes");
  // The total limit, and what one turn of psched's loop may add before it cuts: a Progress of
  // kMaxPartialsPerProgress partials (~3.5 MB) into a buffer that grows by doubling.
  CHECK(most.load() > 0);
  CHECK(most.load() <= static_cast<long long>(kTotalLimit + (size_t{8} << 20)));
  CHECK(process_alive(scheduler));
  const std::string log = cluster.log_of(scheduler);
  INFO(log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
  CHECK(log.find("cut off: not reading: psched holds") != std::string::npos);
}
