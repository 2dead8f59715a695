// Verify (docs/design.md, "Verify") with workers leaving mid-job, as issue 49 found psched abort:
// two workers, one flipping a chunk's last bit; 50 ms into a --verify job the flipping one is
// stopped (SIGSTOP) and the other killed, a third joins, and the stopped one resumes 0.5 s later,
// so the search for the odd chunk loses workers at whatever step it is. psched must survive every
// run, and each job must end with every chunk compared and the odd chunk (or its block) named.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

TEST_CASE("verify survives the flipping worker stopped and the other killed 50 ms into the job, run after "
          "run, and names the odd chunk or its block", "[verify]") {
  const std::map<std::string, std::string> slow = {{"PSCHED_TEST_CHUNK_DELAY_MS", "2"}};
  std::map<std::string, std::string> flipping = slow;
  flipping.emplace("PSCHED_TEST_FLIP_CHUNK", "5");
  const pclient::Job job = arange_job(640, 100, 10, 10);  // 640 chunks, verify blocks of 8
  for (int run = 0; run < 6; ++run) {
    INFO("run " << run);
    TestCluster cluster;
    const pid_t flipper = cluster.add_worker({.threads = 1, .name = "flipper", .env = flipping});
    const pid_t other = cluster.add_worker({.threads = 1, .name = "other", .env = slow});
    cluster.wait_for_workers(2);
    pclient::RunOptions options;
    options.verify = 1.0;
    std::thread resume;
    const auto t0 = std::chrono::steady_clock::now();
    options.on_progress = [&](const pclient::Progress&) {
      if (resume.joinable() || std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(50)) return;
      // The fault injection itself, not a wait for anything: these times are the scenario's.
      ::kill(flipper, SIGSTOP);
      ::kill(other, SIGKILL);
      waitpid(other, nullptr, 0);
      cluster.forget(other);
      cluster.add_worker({.threads = 1, .name = "third", .env = slow});
      resume = std::thread([flipper] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        ::kill(flipper, SIGCONT);
      });
    };
    const pclient::Result r = cluster.client().run(job, options);
    CHECK(resume.joinable());  // the faults came mid-job
    if (resume.joinable()) resume.join();
    ::kill(flipper, SIGCONT);  // if the job ended before the fault
    CHECK(process_alive(cluster.scheduler_pid()));
    const std::string log = cluster.log_of(cluster.scheduler_pid());
    CHECK(log.find("assertion failed") == std::string::npos);
    CHECK(log.find("precondition failed") == std::string::npos);
    CHECK(r.verified_chunks == 640);
    for (const pclient::VerifyMismatch& m : r.mismatches) {
      CHECK(m.chunk <= 5);
      CHECK(m.chunk + m.chunks > 5);
    }
  }
}
