// The dashboard of a real psched, read over HTTP: /health, /api/status and /metrics describe
// exactly the cluster the test started and the jobs it ran; other paths and methods are refused.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "dashboard_helpers.h"

using namespace psched::test;
using nlohmann::json;

TEST_CASE("/health answers ok while the scheduler serves") {
  auto cluster = dashboard_cluster({});
  HttpReply r = http_request(port_of(cluster->dashboard()), "GET", "/health");
  CHECK(r.status == 200);
  CHECK(r.body == "ok\n");
}

TEST_CASE("/api/status lists exactly the cluster's workers and the jobs it ran") {
  auto cluster = dashboard_cluster({"dash-a", "dash-b"});
  const uint16_t port = port_of(cluster->dashboard());

  json before = get_status(port);
  CHECK(before["scheduler"]["version"] == PSCHED_VERSION);
  CHECK(before["scheduler"]["dashboard"] == cluster->dashboard());
  CHECK(before["scheduler"]["uptime_seconds"].get<double>() >= 0);
  REQUIRE(before["workers"].size() == 2);
  std::vector<std::string> names;
  for (const json& w : before["workers"]) {
    names.push_back(w["name"]);
    CHECK(w["backend"] == "cpu");
    CHECK(w["memory_total_bytes"].get<uint64_t>() > 0);
    CHECK(w["chunks_done"] == 0);
  }
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"dash-a", "dash-b"});
  CHECK(before["jobs"].empty());
  CHECK(before["recent_jobs"].empty());

  // 200 x 300 in 50 x 100 chunks: 12 chunks, 60000 elements.
  pclient::Result result = cluster->client().run(arange_sum_job(200, 300, 50, 100));
  REQUIRE(result.sum == arange_sum(60000));

  json after = get_status(port);
  REQUIRE(after["recent_jobs"].size() == 1);
  const json& job = after["recent_jobs"][0];
  CHECK(job["id"] == result.job_id);
  CHECK(job["state"] == "done");
  CHECK(job["client"] == "test");
  CHECK(job["chunks"] == 12);
  CHECK(job["chunks_done"] == 12);
  CHECK(job["count"] == 60000);
  CHECK(job["sum"].get<double>() == arange_sum(60000));
  CHECK(job["bytes"] == 200 * 300 * 8);
  CHECK(after["jobs"].empty());
  CHECK(after["counters"]["jobs_submitted"] == 1);
  CHECK(after["counters"]["jobs_completed"] == 1);
  CHECK(after["counters"]["tasks_done"] == 12);
  CHECK(after["counters"]["bytes_reduced"] == 200 * 300 * 8);
  uint64_t chunks_done = 0;
  for (const json& w : after["workers"]) chunks_done += w["chunks_done"].get<uint64_t>();
  CHECK(chunks_done == 12);
  // Each job's devices, a share per worker (the page asks without them: ?devices=0).
  REQUIRE_FALSE(job["devices"].empty());
  uint64_t device_chunks = 0;
  for (const json& d : job["devices"]) device_chunks += d["chunks"].get<uint64_t>();
  CHECK(device_chunks == 12);
  HttpReply page = http_request(port, "GET", "/api/status?devices=0");
  REQUIRE(page.status == 200);
  json without = json::parse(page.body);
  json expected = after;
  expected["recent_jobs"][0].erase("devices");
  for (json* doc : {&without, &expected}) {  // what moves between two reads
    (*doc)["scheduler"].erase("uptime_seconds");
    for (json& w : (*doc)["workers"])
      for (const char* k : {"uptime_seconds", "throughput_bytes_per_second", "chunks_per_second", "utilisation"})
        w.erase(k);
  }
  CHECK(without == expected);
}

TEST_CASE("a var/std job's recent entry carries var and std (ddof 0), a sum-only job's none") {
  auto cluster = dashboard_cluster({"dash-v"});
  const uint16_t port = port_of(cluster->dashboard());
  pclient::Job plain = arange_sum_job(200, 300, 50, 100);
  pclient::Job stats = plain;
  stats.squares = true;
  REQUIRE(cluster->client().run(plain).sum == arange_sum(60000));
  const pclient::Result result = cluster->client().run(stats);
  json status = get_status(port);
  REQUIRE(status["recent_jobs"].size() == 2);
  const json& newest = status["recent_jobs"][0];
  const json& older = status["recent_jobs"][1];
  CHECK(newest["id"] == result.job_id);
  // The client's own var and std of the same exact sums: the same bits.
  CHECK(newest["var"].get<double>() == result.var(0));
  CHECK(newest["std"].get<double>() == result.std(0));
  // arange 0 .. 59999: var = (n^2 - 1) / 12, exactly representable here.
  CHECK(result.var(0) == (60000.0 * 60000.0 - 1.0) / 12.0);
  CHECK_FALSE(older.contains("var"));
  CHECK_FALSE(older.contains("std"));
}

TEST_CASE("/metrics exposes workers, jobs, tasks, bytes and chunk times in Prometheus text") {
  auto cluster = dashboard_cluster({"dash-a", "dash-b"});
  const uint16_t port = port_of(cluster->dashboard());
  pclient::Result result = cluster->client().run(arange_sum_job(200, 300, 50, 100));
  REQUIRE(result.sum == arange_sum(60000));

  HttpReply r = http_request(port, "GET", "/metrics");
  REQUIRE(r.status == 200);
  CHECK(r.head.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  const std::string& m = r.body;
  for (const char* line : {
           "# TYPE psched_workers gauge\n",
           "\npsched_workers 2\n",
           "\npsched_jobs_total{state=\"done\"} 1\n",
           "\npsched_jobs_total{state=\"failed\"} 0\n",
           "\npsched_jobs_submitted_total 1\n",
           "\npsched_tasks_total{state=\"done\"} 12\n",
           "\npsched_tasks{state=\"queued\"} 0\n",
           "\npsched_bytes_reduced_total 480000\n",
           "# TYPE psched_chunk_seconds histogram\n",
           "\npsched_chunk_seconds_bucket{le=\"+Inf\"} 12\n",
           "\npsched_chunk_seconds_count 12\n",
           "\npsched_worker_memory_total_bytes{worker=\"dash-a\",id=\"",
           "\npsched_worker_memory_used_bytes{worker=\"dash-b\",id=\"",
           "\npsched_uptime_seconds ",
           "\npsched_build_info{version=\"" PSCHED_VERSION "\"",
       }) {
    INFO("looking for: " << line);
    CHECK(m.find(line) != std::string::npos);
  }
}

TEST_CASE("the status page is one self-contained document") {
  auto cluster = dashboard_cluster({});
  HttpReply r = http_request(port_of(cluster->dashboard()), "GET", "/");
  REQUIRE(r.status == 200);
  CHECK(r.head.find("Content-Type: text/html; charset=utf-8") != std::string::npos);
  CHECK(r.body.find("<title>psched dashboard</title>") != std::string::npos);
  CHECK(r.body.find("fetch(\"api/status?devices=0\"") != std::string::npos);  // what the page shows
  // Air-gapped clusters: nothing is loaded from elsewhere.
  for (const char* external : {"<script src", "<link", "@import", "url(", "https://", "http://"}) {
    INFO("found: " << external);
    CHECK(r.body.find(external) == std::string::npos);
  }
}

TEST_CASE("unknown paths get 404, other methods 405, and query strings are ignored") {
  auto cluster = dashboard_cluster({});
  const uint16_t port = port_of(cluster->dashboard());
  CHECK(http_request(port, "GET", "/nope").status == 404);
  CHECK(http_request(port, "GET", "/api/status/extra").status == 404);
  HttpReply post = http_request(port, "POST", "/health");
  CHECK(post.status == 405);
  CHECK(post.head.find("Allow: GET") != std::string::npos);
  CHECK(http_request(port, "DELETE", "/api/status").status == 405);
  CHECK(http_request(port, "GET", "/api/status?pretty=1").status == 200);
  CHECK(http_request(port, "GET", "/metrics?x").status == 200);
}

TEST_CASE("a psched started with --dashboard-address none publishes no dashboard") {
  TestCluster cluster;  // SchedulerOptions' default dashboard is "none"
  CHECK(cluster.dashboard().empty());
}

TEST_CASE("a dashboard given only a port listens on the scheduler's --host") {
  TestCluster cluster({.dashboard = ":0"});  // psched --host 127.0.0.1 --dashboard-address :0
  REQUIRE(cluster.dashboard().rfind("http://127.0.0.1:", 0) == 0);
  const uint16_t port = port_of(cluster.dashboard());
  CHECK(http_request(port, "GET", "/health").status == 200);
  // The listening socket is bound to 127.0.0.1 (0100007F in /proc/net/tcp), not to every interface.
  std::ifstream tcp("/proc/net/tcp");
  std::string line, bound;
  const std::string port_hex = fmt::format(":{:04X} ", port);
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.size() > 5 && (local + " ").find(port_hex) != std::string::npos)
      bound = local.substr(0, local.find(':'));
  }
  CHECK(bound == "0100007F");
}

TEST_CASE("a dashboard port already in use stops psched with a clear error") {
  auto cluster = dashboard_cluster({});
  const std::string taken = "127.0.0.1:" + std::to_string(port_of(cluster->dashboard()));
  std::string output;
  const int status = run_command({bin_dir() + "/psched", "--host", "127.0.0.1", "--port", "0",
                                  "--dashboard-address", taken},
                                 &output, 20000);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(output.find("cannot listen for the dashboard on " + taken) != std::string::npos);
}

TEST_CASE("worker names with quotes, backslashes and bad UTF-8 are escaped, not passed through") {
  auto cluster = dashboard_cluster({"odd \"name\" \\ \xff"});
  const uint16_t port = port_of(cluster->dashboard());
  // Whether the 0xff byte reaches the scheduler or is replaced on the way, what the dashboard
  // serves parses as JSON and as Prometheus text.
  json status = get_status(port);
  REQUIRE(status["workers"].size() == 1);
  const std::string name = status["workers"][0]["name"];
  CHECK(name.rfind("odd \"name\" \\ ", 0) == 0);
  HttpReply metrics = http_request(port, "GET", "/metrics");
  REQUIRE(metrics.status == 200);
  CHECK(metrics.body.find("{worker=\"odd \\\"name\\\" \\\\ ?\",id=\"") != std::string::npos);
}
