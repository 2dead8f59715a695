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

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A frame: a Progress of kMaxPartialsPerProgress (4096) one-element chunks' partials, ~330 KB. What
// psched holds for clients is at most the limit, the frame that passed it, and for each client cut
// off in the last 2 s the rest of the frame it was in the middle of.
constexpr long long kOneFrame = 512ll << 10;

// `slow_readers` clients each submit a job that would stream ~30 MB of partials and never read,
// while a client that reads runs a job with partials; psched runs with the two limits. Returns
// the most psched said it held for clients, once every slow reader has left with `left_why`
// in psched's log ("client ... left: WHY") and psched holds nothing for them any more.
long long run_slow_readers(size_t client_limit, size_t total_limit, int slow_readers, const std::string& left_why,
                           std::string& log) {
  TestCluster cluster({.extra_args = {"--max-client-unsent", std::to_string(client_limit), "--max-total-unsent",
                                      std::to_string(total_limit)},
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
      most = std::max(most.load(), client_unsent_bytes(dashboard));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::vector<std::unique_ptr<RawPeer>> slow;
  for (int i = 0; i < slow_readers; ++i) {
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

  const pid_t scheduler = cluster.scheduler_pid();
  CHECK(eventually([&] { return occurrences(cluster.log_of(scheduler), "left: " + left_why) >= size_t(slow_readers); },
                   60000));
  CHECK(eventually([&] { return client_unsent_bytes(dashboard) < 64 * 1024; }));
  sampling = false;
  sampler.join();
  CHECK(process_alive(scheduler));
  log = cluster.log_of(scheduler);
  return most.load();
}

}  // namespace

TEST_CASE("clients that never read their streamed partials are cut off past --max-total-unsent, the one "
          "holding the most first, and a client that reads gets its exact result", "[security]") {
  // Each could hold 64 MiB: the total is what cuts them off, the biggest first, as they grow.
  constexpr size_t kTotalLimit = size_t{8} << 20;
  std::string log;
  const long long most = run_slow_readers(size_t{64} << 20, kTotalLimit, 4, "not reading: psched holds ", log);
  INFO("most held for clients: " << most << " bytes");
  INFO(log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
  CHECK(most > 0);
  CHECK(most <= static_cast<long long>(kTotalLimit) + (1 + 4) * kOneFrame);  // 120 MB without the limit
  CHECK(occurrences(log, "cut off: not reading: psched holds ") >= 4);
}

TEST_CASE("a client that never reads its streamed partials is cut off past --max-client-unsent and a client "
          "that reads gets its exact result", "[security]") {
  constexpr size_t kClientLimit = size_t{4} << 20;
  std::string log;
  const long long most = run_slow_readers(kClientLimit, size_t{1} << 30, 1, "peer is not reading: ", log);
  INFO("most held for clients: " << most << " bytes");
  INFO(log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
  CHECK(most > 0);
  CHECK(most <= 2 * (static_cast<long long>(kClientLimit) + kOneFrame));  // a buffer grows by doubling
  CHECK(log.find("bytes unsent, over the limit of " + std::to_string(kClientLimit)) != std::string::npos);
}

TEST_CASE("a client cut off as a slow reader that reads again is told why in an Error, then the stream ends",
          "[security]") {
  TestCluster cluster({.extra_args = {"--max-client-unsent", std::to_string(4 << 20)}});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  RawPeer slow(port_of(cluster));
  REQUIRE(slow.hello_as_client());
  REQUIRE(slow.send_message([](wire::Message::Builder m) {
    auto submit = m.initSubmit();
    submit.setTag(1);
    submit.setWantPartials(true);
    psched::to_wire(pclient::job_spec_of(one_element_chunks(1000000)), submit.initSpec());
  }));
  const pid_t scheduler = cluster.scheduler_pid();
  REQUIRE(eventually([&] { return cluster.log_of(scheduler).find("left: peer is not reading") != std::string::npos; },
                     60000));

  // Reading again: what was written before the cut, the rest of the frame begun, then the reason.
  const std::string why = slow.read_error(10000);
  INFO(cluster.log_of(scheduler).substr(0, 4000));
  INFO("the Error: " << why);
  CHECK(why.rfind("peer is not reading: ", 0) == 0);
  CHECK(why.find(", over the limit of " + std::to_string(4 << 20)) != std::string::npos);
  CHECK(slow.wait_closed(5000));
  CHECK(process_alive(scheduler));
}

TEST_CASE("a libpclient client cut off as a slow reader fails its job with psched's reason, not a lost "
          "connection", "[security]") {
  TestCluster cluster({.extra_args = {"--max-client-unsent", std::to_string(4 << 20)}});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  const pid_t scheduler = cluster.scheduler_pid();
  pclient::RunOptions options;
  options.want_partials = true;
  // The first Progress stops the client's loop (it reads nothing meanwhile) until psched has cut it off.
  bool stopped = false;
  options.on_progress = [&](const pclient::Progress&) {
    if (stopped) return;
    stopped = true;
    eventually([&] { return cluster.log_of(scheduler).find("left: peer is not reading") != std::string::npos; },
               60000);
  };
  std::string error;
  try {
    cluster.client().run(one_element_chunks(1000000), options);
  } catch (const pclient::Error& e) {
    error = e.what();
  }
  INFO(cluster.log_of(scheduler).substr(0, 4000));
  INFO("the client's error: " << error);
  CHECK(stopped);
  CHECK(error.rfind("psched: peer is not reading: ", 0) == 0);
}
