// GPU health, the task stream and stragglers end to end, on machines without a GPU: real psched
// and pcuda-worker processes; NVML is either absent (the CI machine has no driver) or the stand-in
// library (tests/support/stand_in_nvml.cpp) that a test-only switch points a CPU worker at.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "dashboard_helpers.h"

using namespace psched::test;
using nlohmann::json;

namespace {

std::string metrics(uint16_t port) {
  HttpReply r = http_request(port, "GET", "/metrics");
  if (r.status != 200) throw std::runtime_error("GET /metrics: " + r.head);
  return r.body;
}

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l == line) return true;
  return false;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, std::string> stand_in_nvml(const std::map<std::string, std::string>& more = {}) {
  std::map<std::string, std::string> env = {{"PSCHED_TEST_NVML_LIBRARY", PSCHED_STAND_IN_NVML},
                                            {"PSCHED_TEST_NVML_PCI_BUS_ID", "00000000:3B:00.0"}};
  env.insert(more.begin(), more.end());
  return env;
}

std::unique_ptr<TestCluster> fast_heartbeat_cluster() {
  SchedulerOptions options;
  options.dashboard = "127.0.0.1:0";
  options.extra_args = {"--worker-timeout", "2"};  // heartbeats every 400 ms
  return std::make_unique<TestCluster>(options);
}

}  // namespace

TEST_CASE("a worker without NVML reports no GPU anywhere, says so once, and computes") {
  auto cluster = fast_heartbeat_cluster();
  // One plain CPU worker (no GPU: nothing to say), one told of a GPU whose NVML cannot load.
  cluster->add_worker({.name = "plain"});
  const pid_t told = cluster->add_worker(
      {.name = "no-nvml",
       .env = {{"PSCHED_TEST_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"},
               {"PSCHED_TEST_NVML_PCI_BUS_ID", "00000000:3B:00.0"}}});
  cluster->wait_for_workers(2);
  const uint16_t port = port_of(cluster->dashboard());
  pclient::Result r = cluster->client().run(arange_sum_job(100, 100, 10, 10));
  CHECK(r.sum == arange_sum(10000));

  json status = get_status(port);
  for (const json& w : status["workers"]) CHECK(w["gpu"].is_null());
  const std::string m = metrics(port);
  std::istringstream in(m);
  for (std::string l; std::getline(in, l);) CHECK_FALSE(l.rfind("psched_gpu_", 0) == 0);
  const std::string log = cluster->log_of(told);
  CHECK(log.find("no GPU health from NVML (cannot load /nonexistent/libnvidia-ml.so.1") !=
        std::string::npos);
  for (const pclient::DeviceReport& d : r.devices) CHECK_FALSE(d.has_gpu);
}

TEST_CASE("a GPU's NVML health reaches /api/status and /metrics, labelled by worker, uuid and host") {
  auto cluster = fast_heartbeat_cluster();
  cluster->add_worker({.name = "gpu-a", .env = stand_in_nvml({{"STAND_IN_NVML_PCIE_WIDTH", "8"}})});
  cluster->wait_for_workers(1);
  const uint16_t port = port_of(cluster->dashboard());
  json gpu;
  REQUIRE(eventually([&] {
    gpu = get_status(port)["workers"][0]["gpu"];
    return !gpu.is_null() && gpu["samples"].get<int>() >= 1;
  }));
  CHECK(gpu["uuid"] == "GPU-5a11d1e0-0000-4000-8000-000000000001");
  CHECK(gpu["pci_bus_id"] == "00000000:3B:00.0");
  CHECK(gpu["sm_utilisation_pct"] == 97.0);
  CHECK(gpu["sm_clock_mhz"] == 1755.0);
  CHECK(gpu["sm_clock_max_mhz"] == 1980);
  CHECK(gpu["temperature_c"] == 61);
  CHECK(gpu["power_watts"] == 412.0);
  CHECK(gpu["ecc_corrected"] == 3);
  CHECK(gpu["pcie_width"] == 8);
  CHECK(gpu["warnings"] == json::array({"PCIe x8 of x16"}));

  const json w = get_status(port)["workers"][0];
  const std::string labels =
      fmt::format("worker=\"gpu-a\",id=\"{}\",uuid=\"GPU-5a11d1e0-0000-4000-8000-000000000001\",host=\"{}\"",
                  w["id"].get<int>(), w["host"].get<std::string>());
  const std::string m = metrics(port);
  CHECK(has_line(m, "psched_gpu_temperature_celsius{" + labels + "} 61"));
  CHECK(has_line(m, "psched_gpu_power_watts{" + labels + "} 412"));
  CHECK(has_line(m, "psched_gpu_sm_clock_max_hertz{" + labels + "} 1980000000"));
  CHECK(has_line(m, "psched_gpu_pcie_link_width{" + labels + "} 8"));
  CHECK(has_line(m, "psched_gpu_ecc_corrected_errors{" + labels + "} 3"));

  // One set of keys (core/worker_info_json.h): pbench --cluster-info --json shows the worker and
  // its GPU with /api/status's names, and the GPU with all of them.
  std::string out;
  REQUIRE(run_command({bin_dir() + "/pbench", "--scheduler", cluster->address(), "--cluster-info", "--json"},
                      &out) == 0);
  const json shown = json::parse(out.substr(out.find('{')))["workers"][0];
  for (const auto& [key, value] : shown.items()) CHECK(w.contains(key));
  CHECK(shown["name"] == "gpu-a");
  CHECK(shown["gpu"]["warnings"] == json::array({"PCIe x8 of x16"}));
  std::set<std::string> status_gpu_keys, pbench_gpu_keys;
  for (const auto& [key, value] : w["gpu"].items()) status_gpu_keys.insert(key);
  for (const auto& [key, value] : shown["gpu"].items()) pbench_gpu_keys.insert(key);
  CHECK(status_gpu_keys == pbench_gpu_keys);
}

TEST_CASE("a slowed worker is named the straggler with its cause, and the task stream and report show its job") {
  auto cluster = fast_heartbeat_cluster();
  // Both workers sleep per chunk (the test-only switch), the slow one four times as long, and the
  // slow one's stand-in GPU reports thermal slowdown.
  cluster->add_worker({.name = "fast", .env = stand_in_nvml({{"PSCHED_TEST_CHUNK_DELAY_MS", "5"}})});
  cluster->add_worker({.name = "slow",
                       .env = stand_in_nvml({{"PSCHED_TEST_CHUNK_DELAY_MS", "20"},
                                             {"STAND_IN_NVML_THROTTLE", "0x40"},
                                             {"STAND_IN_NVML_ID", "2"}})});
  cluster->wait_for_workers(2);
  const uint16_t port = port_of(cluster->dashboard());
  const std::string html = cluster->dir() + "/report.html", report = cluster->dir() + "/report.json";
  std::string out;
  // 400 chunks: about 1.6 s, several heartbeats of NVML figures while the job runs.
  const int status = run_command({bin_dir() + "/pbench", "--scheduler", cluster->address(), "-x", "2000", "-y",
                                  "2000", "--chunk-x", "100", "--chunk-y", "100", "--generator", "arange",
                                  "--json", "-q", "--report", html, "--report-json", report},
                                 &out);
  REQUIRE(status == 0);
  const json result = json::parse(out.substr(out.find('{')));
  REQUIRE(result["stragglers"].size() == 1);
  CHECK(result["stragglers"][0]["worker"] == "slow");
  CHECK(result["stragglers"][0]["cause"] == "throttled: hw_thermal_slowdown");
  for (const json& d : result["devices"]) {
    REQUIRE(d.contains("run"));
    CHECK(d["run"]["slow"] == (d["name"] == "slow"));
    REQUIRE(d["run"]["gpu"].is_object());
    CHECK(d["run"]["gpu"]["temperature_c"]["max"] == 61.0);
    CHECK(d["run"]["gpu"]["sm_clock_mhz"]["mean"] == 1755.0);
  }

  // The dashboard's view: the slow worker flagged, and psched_worker_slow says the same.
  const json st = get_status(port);
  for (const json& w : st["workers"]) {
    CHECK(w["slow"] == (w["name"] == "slow"));
    CHECK(has_line(metrics(port), fmt::format("psched_worker_slow{{worker=\"{}\",id=\"{}\"}} {}",
                                              w["name"].get<std::string>(), w["id"].get<int>(),
                                              w["name"] == "slow" ? 1 : 0)));
  }
  REQUIRE(st["recent_jobs"].size() == 1);
  CHECK(st["recent_jobs"][0]["devices"].size() == 2);

  // The task stream: every chunk of the job in exactly the segments of the two workers.
  HttpReply r = http_request(port, "GET", "/api/task-stream?since=0");
  REQUIRE(r.status == 200);
  const json stream = json::parse(r.body);
  uint64_t chunks = 0;
  std::set<int> workers;
  for (const json& s : stream["segments"]) {
    chunks += s[3].get<uint64_t>();
    workers.insert(s[1].get<int>());
    CHECK(s[4].get<double>() <= s[5].get<double>());
    CHECK(s[5].get<double>() <= stream["now"].get<double>());
  }
  CHECK(chunks == 400);
  CHECK(workers.size() == 2);

  // The report: the same job, kept.
  // The report: the same job, kept; its "job" is the --json document (client/result_json.h) with
  // each GPU's heartbeats.
  const json rep = json::parse(read_file(report));
  CHECK(rep["job"]["chunks"] == 400);
  REQUIRE(rep["job"]["devices"].size() == 2);
  for (const json& d : rep["job"]["devices"]) REQUIRE(d.contains("run"));
  // One writer (write_device_share_members): every key psched shows for a worker's part in the
  // job, the report has too.
  for (const auto& [key, value] : st["recent_jobs"][0]["devices"][0].items()) {
    INFO(key);
    REQUIRE(rep["job"]["devices"][0]["run"].contains(key));
  }
  CHECK(st["recent_jobs"][0]["devices"][0]["chunks"].get<uint64_t>() +
            st["recent_jobs"][0]["devices"][1]["chunks"].get<uint64_t>() == 400);
  CHECK(rep["job"]["stragglers"] == result["stragglers"]);
  CHECK(rep["job"]["stragglers"].size() == 1);
  CHECK(rep["job"]["stragglers"][0]["worker"] == "slow");
  uint64_t timeline_chunks = 0;
  for (const json& s : rep["timeline"]["segments"]) timeline_chunks += s[3].get<uint64_t>();
  CHECK(timeline_chunks == 400);
  CHECK(rep["throughput"].size() == 100);
  for (const json& d : rep["job"]["devices"]) {  // each GPU's heartbeats over the job, on the job's clock
    CHECK_FALSE(result["devices"][0]["run"]["gpu"].contains("series"));  // --json's line stays short
    REQUIRE(d["run"]["gpu"]["series"].size() >= 1);
    for (const json& p : d["run"]["gpu"]["series"]) {
      CHECK(p[0].get<double>() >= 0);
      CHECK(p[1] == 1755.0);  // SM clock
      CHECK(p[2] == 61.0);    // temperature
      CHECK(p[3] == 412.0);   // power
    }
  }
  const std::string page = read_file(html);
  CHECK(page.find("<title>psched performance report</title>") != std::string::npos);
  CHECK(page.find("\"stragglers\":[{\"cause\":\"throttled: hw_thermal_slowdown\"") != std::string::npos);
  CHECK(page.find("<script src") == std::string::npos);  // nothing fetched from elsewhere
}
