// A worker that lies about the chunks it was given (issue 49): a real psched, a real worker running
// a real job, and a fake worker (raw_peer.h) that answers its chunk with a partial that cannot be
// true: a NaN exact term, a count of 2^64 - 1, a count off by one. Each time the liar is
// disconnected with an Error saying what was wrong, psched's log names it, its chunk runs on the
// real worker and the job's result is exactly the closed form. And a real worker whose every partial
// is untrue, alone, fails its job in one line instead of holding it forever.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <cmath>
#include <csignal>
#include <functional>
#include <limits>
#include <regex>

#include "abuse_helpers.h"
#include "app/exit_codes.h"
#include "client/job_spec_of.h"
#include "core/closed_form.h"
#include "net/wire_convert.h"

using namespace psched::test;
namespace wire = psched::wire;

namespace {

// The fake worker answers its chunk with the true partial, changed by `lie`; it must be refused
// with "result for chunk N of job J cannot be true: " + `why`.
void lie_about_a_chunk(const std::function<void(wire::ChunkPartial::Builder)>& lie, const std::string& why) {
  while_a_job_runs([&](TestCluster& cluster) {
    const FakeWorker fake = fake_worker_with_work(cluster);
    const auto truth = psched::expected_chunk_partial(pclient::job_spec_of(BackgroundJob::job()), fake.assigned);
    REQUIRE(truth);
    REQUIRE(truth->exact.terms().size() >= 1);
    fake.peer->send_message([&](wire::Message::Builder m) {
      auto batch = m.initResultBatch();
      batch.setJobId(fake.job_id);
      auto result = batch.initResults(1)[0];
      psched::to_wire(fake.assigned, *truth, result);
      lie(result);
    });
    const std::string refusal = "result for chunk " + std::to_string(fake.assigned) + " of job " +
                                std::to_string(fake.job_id) + " cannot be true: " + why;
    CHECK(fake.peer->read_error() == refusal);
    CHECK(fake.peer->wait_closed());
    // The log line names the worker (id, name, address) and what was wrong.
    const pid_t scheduler = cluster.scheduler_pid();
    CHECK(eventually([&] {
      const std::string log = cluster.log_of(scheduler);
      return log.find("'raw-worker' (127.0.0.1:") != std::string::npos &&
             log.find(") disconnected: " + refusal) != std::string::npos;
    }));
  });  // and the job, its chunk run again on the real worker, is exact
}

}  // namespace

TEST_CASE("a worker whose partial has a NaN exact term is disconnected and the job stays exact", "[security]") {
  lie_about_a_chunk([](wire::ChunkPartial::Builder r) { r.getExact().getTerms().set(0, std::nan("")); },
                    "exact sum term 1 of 1 is nan (NaN and infinite elements are counted, never added)");
}

TEST_CASE("a worker that counts 2^64 - 1 elements in a chunk is disconnected and the job stays exact",
          "[security]") {
  lie_about_a_chunk([](wire::ChunkPartial::Builder r) { r.setCount(std::numeric_limits<uint64_t>::max()); },
                    "count 18446744073709551615, but the selection has 10000 elements there");
}

TEST_CASE("a worker whose count is off by one is disconnected and the job stays exact", "[security]") {
  lie_about_a_chunk([](wire::ChunkPartial::Builder r) { r.setCount(r.getCount() + 1); },
                    "count 10001, but the selection has 10000 elements there");
}

// A worker whose every partial is untrue (PSCHED_TEST_LIE_FROM_CHUNK=0: one element too many), as a
// broken device or a bad build would be. Thrown off unblamed, it reconnected, took the same chunks
// back and held the job forever (about 13 refusals a second, pbench never ended). An untrue partial
// now counts as its range's failure: alone, the liar fails a chunk --allowed-failures (3) times and
// the job fails naming it and the lie; beside an honest worker, the retry rule leaves the liar's
// chunks to that one and the job is exact.
TEST_CASE("a job whose only worker sends untrue partials fails naming the chunk and the lie, where it ran forever",
          "[security]") {
  TestCluster cluster;
  cluster.add_worker({.name = "liar", .env = {{"PSCHED_TEST_LIE_FROM_CHUNK", "0"}}});
  cluster.wait_for_workers(1);
  const std::vector<std::string> job = {bin_dir() + "/pbench", "-d",          "--scheduler", cluster.address(),
                                        "--generator",         "arange",      "-x",          "600",
                                        "-y",                  "600",         "--chunk-x",   "100",
                                        "--chunk-y",           "100",         "--check"};
  std::string out;
  const int status = run_command(job, &out, 30000);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == psched::kExitFailure);
  CHECK(std::regex_search(out, std::regex(R"(pbench: chunk \d+ failed 3 times \(on liar x3\); last error: result for )"
                                          R"(chunks? \d+(?: to \d+)? of job 1 cannot be true: count \d+, but the )"
                                          R"(selection has \d+ elements there)")));
  // psched goes on, and a job beside the liar runs on the honest worker, exact (--check).
  cluster.add_worker({.name = "honest"});
  cluster.wait_for_workers(2);
  std::string second;
  const int second_status = run_command(job, &second, 30000);
  INFO(second);
  REQUIRE(WIFEXITED(second_status));
  CHECK(WEXITSTATUS(second_status) == 0);
  CHECK(kill(cluster.scheduler_pid(), 0) == 0);
}
