// The smallest settings psched allows still run jobs exactly: a worker timeout of 1 s (workers
// heartbeat at the pace Welcome gives them) and a frame limit of 64 KiB (workers cut their
// ResultBatches to fit). And a dashboard port that is taken is reported with the real reason.
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

TEST_CASE("with --worker-timeout 1 an idle worker stays registered and jobs run exactly", "[limits]") {
  TestCluster cluster({.extra_args = {"--worker-timeout", "1"}});
  const pid_t worker = cluster.add_worker();
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  const uint32_t id = client.workers().at(0).id;
  // Idle for three timeouts: with a 1 s heartbeat the worker was declared dead after each one.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  bool lost = false;
  while (!lost && std::chrono::steady_clock::now() < until) {
    lost = cluster.log_of(cluster.scheduler_pid()).find("lost") != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO(cluster.log_of(cluster.scheduler_pid()) << cluster.log_of(worker));
  CHECK_FALSE(lost);
  const pclient::Job job = arange_job(300, 300, 30, 30);
  const pclient::Result r = client.run(job);
  CHECK(check(job, r) == "");
  CHECK(r.retries == 0);
  CHECK(client.workers().at(0).id == id);
}

TEST_CASE("with --max-frame 65536 a 10,000-chunk job runs exactly, its results cut to fit",
          "[limits]") {
  TestCluster cluster({.extra_args = {"--max-frame", "65536"}});
  const pid_t worker = cluster.add_worker();
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  const pclient::Job job = arange_job(100, 100, 1, 1);  // one-element chunks: large batches
  pclient::Result r;
  REQUIRE_NOTHROW(r = client.run(job));
  INFO(cluster.log_of(cluster.scheduler_pid()) << cluster.log_of(worker));
  CHECK(check(job, r) == "");
  CHECK(r.chunks == 10000);
  CHECK(r.retries == 0);
  CHECK(cluster.log_of(cluster.scheduler_pid()).find("exceeds the limit") == std::string::npos);
}

TEST_CASE("a dashboard port that is taken is reported with the real reason, not 'Success'",
          "[limits]") {
  const int taken = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(taken >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(taken, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(listen(taken, 1) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(getsockname(taken, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const std::string dashboard = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  std::string out;
  const int status = run_command({bin_dir() + "/psched", "--host", "127.0.0.1", "--port", "0",
                                  "--dashboard-address", dashboard},
                                 &out, 15000);
  close(taken);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(out.find("cannot listen for the dashboard on " + dashboard + ": Address already in use") !=
        std::string::npos);
  CHECK(out.find("Success") == std::string::npos);
}
