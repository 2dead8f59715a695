// Lifecycle and faults with real processes: workers killed, stopped, leaving and joining mid-job,
// the scheduler stopped and restarted, a chunk that crashes every worker, the GPU supervisor.
// "Mid-job" is made to last by a test-only delay per chunk (PSCHED_TEST_CHUNK_DELAY_MS), and is
// detected from the job's own progress, never guessed with a sleep.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/process.h"
#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

const std::map<std::string, std::string> kSlowChunks = {{"PSCHED_TEST_CHUNK_DELAY_MS", "15"}};

pclient::Job slow_job() { return arange_job(2000, 2000, 100, 100, 1, 1); }  // 400 chunks


pclient::Result clean_run(const pclient::Job& job) {
  TestCluster cluster;
  cluster.add_worker({.threads = 2});
  cluster.wait_for_workers(1);
  return cluster.client().run(job);
}

// Runs `job`, calling `act` once when at least `after` chunks are done.
pclient::Result run_and_act_midway(pclient::Client& client, const pclient::Job& job, uint64_t after,
                                   const std::function<void()>& act) {
  bool acted = false;
  pclient::RunOptions options;
  options.on_progress = [&](const pclient::Progress& p) {
    if (!acted && p.chunks_done >= after) {
      acted = true;
      act();
    }
  };
  pclient::Result r = client.run(job, options);
  REQUIRE(acted);
  return r;
}

}  // namespace

TEST_CASE("kill -9 of one of three workers mid-job: the job completes with the same bits", "[lifecycle]") {
  const pclient::Job job = slow_job();
  const pclient::Result clean = clean_run(job);
  TestCluster cluster;
  std::vector<pid_t> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(cluster.add_worker({.threads = 1, .env = kSlowChunks}));
  cluster.wait_for_workers(3);
  pclient::Client client = cluster.client();
  const pclient::Result r = run_and_act_midway(client, job, 20, [&] {
    kill(workers[1], SIGKILL);
    waitpid(workers[1], nullptr, 0);
    cluster.forget(workers[1]);
  });
  CHECK(r.sum == clean.sum);
  CHECK(r.count == clean.count);
  CHECK(r.retries >= 1);  // the dead worker's chunks ran again elsewhere
  CHECK(check(job, r) == "");
}

TEST_CASE("SIGTERM to a worker mid-job: it exits 0 and the job is exact", "[lifecycle]") {
  const pclient::Job job = slow_job();
  TestCluster cluster;
  const pid_t leaving = cluster.add_worker({.threads = 1, .env = kSlowChunks});
  cluster.add_worker({.threads = 1, .env = kSlowChunks});
  cluster.wait_for_workers(2);
  pclient::Client client = cluster.client();
  int status = -1;
  const pclient::Result r = run_and_act_midway(client, job, 20, [&] { status = cluster.stop(leaving, 3000); });
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(check(job, r) == "");
  CHECK(cluster.log_of(cluster.scheduler_pid()).find("left: leaving: SIGTERM") != std::string::npos);
}

TEST_CASE("a worker silent past --worker-timeout is declared dead and its chunks re-queued", "[lifecycle]") {
  const pclient::Job job = slow_job();
  TestCluster cluster({.extra_args = {"--worker-timeout", "1"}});
  const pid_t frozen = cluster.add_worker({.threads = 1, .env = kSlowChunks});
  cluster.add_worker({.threads = 1, .env = kSlowChunks});
  cluster.wait_for_workers(2);
  pclient::Client client = cluster.client();
  const pclient::Result r = run_and_act_midway(client, job, 10, [&] { kill(frozen, SIGSTOP); });
  kill(frozen, SIGCONT);
  CHECK(check(job, r) == "");
  CHECK(r.retries >= 1);
  CHECK(cluster.log_of(cluster.scheduler_pid()).find("nothing received for 1000 ms") != std::string::npos);
}

TEST_CASE("a worker that joins mid-job gets chunks of the running job", "[lifecycle]") {
  const pclient::Job job = slow_job();
  TestCluster cluster;
  cluster.add_worker({.threads = 1, .env = kSlowChunks});
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  const pclient::Result r =
      run_and_act_midway(client, job, 5, [&] { cluster.add_worker({.threads = 1, .env = kSlowChunks}); });
  CHECK(check(job, r) == "");
  CHECK(r.workers == 2);
}

TEST_CASE("SIGTERM to psched: the running job fails clearly, workers with --death-timeout exit, nothing remains",
          "[lifecycle]") {
  TestCluster cluster;
  const pid_t w1 = cluster.add_worker({.threads = 1, .extra_args = {"--death-timeout", "1"}, .env = kSlowChunks});
  const pid_t w2 = cluster.add_worker({.threads = 1, .extra_args = {"--death-timeout", "1"}, .env = kSlowChunks});
  cluster.wait_for_workers(2);
  // The client is pbench, as a user runs it.
  const std::string out_path = cluster.dir() + "/pbench.out";
  psched::ChildSpec spec;
  spec.path = bin_dir() + "/pbench";
  spec.args = {"-d", "--scheduler", cluster.address(), "-x", "2000", "-y", "2000", "--chunk-x", "100",
               "--chunk-y", "100", "--generator", "arange", "-q"};
  spec.stdout_path = spec.stderr_path = out_path;
  auto pbench = psched::spawn_child(spec);
  REQUIRE(pbench);
  const pid_t scheduler = cluster.scheduler_pid();
  REQUIRE(eventually([&] { return cluster.log_of(scheduler).find("job 1 from client") != std::string::npos; }));
  int status = cluster.stop(scheduler, 5000);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  int pbench_status = 0;
  REQUIRE(psched::wait_child(*pbench, 10000, &pbench_status));
  CHECK(WEXITSTATUS(pbench_status) != 0);
  std::ifstream in(out_path);
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(out.find("scheduler shutting down") != std::string::npos);
  for (pid_t w : {w1, w2}) {
    int ws = 0;
    CHECK(psched::wait_child(w, 10000, &ws));
    CHECK(WIFEXITED(ws));
    cluster.forget(w);
  }
  CHECK_FALSE(process_alive(w1));
  CHECK_FALSE(process_alive(w2));
  CHECK_FALSE(process_alive(scheduler));
}

TEST_CASE("psched restarted on the same port: workers without --death-timeout rejoin and a new job runs",
          "[lifecycle]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  REQUIRE(WEXITSTATUS(cluster.stop(cluster.scheduler_pid())) == 0);
  cluster.restart_scheduler();
  cluster.wait_for_workers(2);
  const pclient::Job job = arange_job(300, 300, 50, 50);
  CHECK(check(job, cluster.client().run(job)) == "");
}

TEST_CASE("a chunk that crashes every worker fails its job after --allowed-failures, and the cluster keeps serving",
          "[lifecycle]") {
  TestCluster cluster;
  // One supervisor running 3 worker processes, each crashing on chunk 7; crashed ones are restarted.
  cluster.add_worker({.threads = 1,
                      .extra_args = {"--nworkers", "3"},
                      .env = {{"PSCHED_TEST_CRASH_ON_CHUNK", "7"}}});
  cluster.wait_for_workers(3);
  pclient::Client client = cluster.client();
  const pclient::Job doomed = arange_job(100, 100, 10, 10);  // 100 chunks, chunk 7 crashes workers
  // The crash takes the worker's other in-flight chunks along: they become a suspect range, run
  // alone and halved until chunk 7 runs alone, so the chunk named is the one that crashed workers,
  // with the workers it took down running alone and what happened to each (only those count).
  CHECK_THROWS_WITH(client.run(doomed), Catch::Matches("chunk 7 took down 3 workers running it alone: "
                                                       ".+ \\(.+\\), .+ \\(.+\\), .+ \\(.+\\)"));
  const pclient::Job fine = arange_job(70, 10, 10, 10);  // chunks 0..6 only
  cluster.wait_for_workers(1);
  CHECK(check(fine, client.run(fine)) == "");
}

TEST_CASE("a worker whose device is lost reports the chunk and exits 3 while its job completes elsewhere",
          "[lifecycle]") {
  TestCluster cluster;
  // A sticky device error on chunk 3 (simulated on the CPU backend; bench/gpu.sh makes a real GPU
  // trap). The faulty worker is alone when the job starts, so chunk 3 is its.
  const pid_t faulty = cluster.add_worker({.threads = 1, .env = {{"PSCHED_TEST_DEVICE_FAULT_ON_CHUNK", "3"}}});
  cluster.wait_for_workers(1);
  const pclient::Job job = arange_job(100, 100, 10, 10);
  pclient::Result result;
  std::string error;
  std::thread run([&] {
    try {
      result = cluster.client().run(job);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  int status = 0;
  const bool exited = eventually([&] { return waitpid(faulty, &status, WNOHANG) == faulty; });
  if (exited) cluster.forget(faulty);
  CHECK(exited);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  CHECK(cluster.log_of(faulty).find("device lost: simulated device fault") != std::string::npos);
  cluster.add_worker({.threads = 1});  // the job waited for a worker; this one finishes it
  run.join();
  CHECK(error == "");
  CHECK(check(job, result) == "");
  CHECK(result.retries >= 1);
}

TEST_CASE("a client that disconnects mid-job has its job cancelled, and others are served", "[lifecycle]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1, .env = kSlowChunks});
  cluster.wait_for_workers(1);
  psched::ChildSpec spec;
  spec.path = bin_dir() + "/pbench";
  spec.args = {"-d", "--scheduler", cluster.address(), "-x", "2000", "-y", "2000", "--chunk-x", "100",
               "--chunk-y", "100", "--generator", "arange", "-q"};
  spec.stdout_path = spec.stderr_path = cluster.dir() + "/pbench.out";
  auto pbench = psched::spawn_child(spec);
  REQUIRE(pbench);
  const pid_t scheduler = cluster.scheduler_pid();
  REQUIRE(eventually([&] { return cluster.log_of(scheduler).find("job 1 from client") != std::string::npos; }));
  kill(*pbench, SIGKILL);
  waitpid(*pbench, nullptr, 0);
  REQUIRE(eventually([&] { return cluster.log_of(scheduler).find("job 1 cancelled") != std::string::npos; }));
  const pclient::Job job = arange_job(100, 100, 50, 50);  // 4 chunks: quick only if job 1 was dropped
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(check(job, cluster.client().run(job)) == "");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
}

TEST_CASE("a worker started before the scheduler file exists waits for it and joins", "[lifecycle]") {
  char tmpl[] = "/tmp/psched-sf.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string file = dir + "/scheduler.json";
  psched::ChildSpec w;
  w.path = bin_dir() + "/pcuda-worker";
  w.args = {"--scheduler-file", file, "--backend", "cpu", "--nthreads", "1"};
  w.stderr_path = dir + "/worker.log";
  w.death_signal = SIGKILL;
  auto worker = psched::spawn_child(w);
  REQUIRE(worker);
  psched::ChildSpec s;
  s.path = bin_dir() + "/psched";
  s.args = {"--host", "127.0.0.1", "--port", "0", "--dashboard-address", "none", "--scheduler-file", file};
  s.stderr_path = dir + "/psched.log";
  s.death_signal = SIGKILL;
  auto sched = psched::spawn_child(s);
  REQUIRE(sched);
  pclient::ConnectOptions o;
  o.scheduler_file = file;
  pclient::Client client = pclient::Client::connect(o);
  client.wait_for_workers(1, 20000);
  const pclient::Job job = arange_job(64, 64, 16, 16);
  CHECK(check(job, client.run(job)) == "");
  client.close();
  psched::stop_child(*worker, 5000);
  psched::stop_child(*sched, 5000);
  std::filesystem::remove_all(dir);
}

TEST_CASE("supervisor: a worker process killed with -9 is restarted, and killing the supervisor takes them all",
          "[lifecycle]") {
  TestCluster cluster;
  const pid_t supervisor = cluster.add_worker({.threads = 1, .extra_args = {"--nworkers", "2"}});
  cluster.wait_for_workers(2);
  auto before = cluster.client().workers();
  REQUIRE(before.size() == 2);
  const pid_t victim = pid_t(before[0].pid);
  kill(victim, SIGKILL);
  // Restarted: two workers again, one of them a new process.
  REQUIRE(eventually([&] {
    auto now = cluster.client().workers();
    return now.size() == 2 && now[0].pid != uint32_t(victim) && now[1].pid != uint32_t(victim);
  }));
  auto after = cluster.client().workers();
  kill(supervisor, SIGKILL);
  waitpid(supervisor, nullptr, 0);
  cluster.forget(supervisor);
  for (const auto& w : after) CHECK(eventually([&] { return !process_alive(pid_t(w.pid)); }, 10000));
}
