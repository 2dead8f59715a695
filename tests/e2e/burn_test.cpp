// pbench --burn (cluster acceptance) against real psched and CPU workers on loopback, each burn a
// few seconds: a healthy cluster passes; a worker that lies (PSCHED_TEST_LIE_FROM_CHUNK) or flips a
// chunk's last bit (PSCHED_TEST_FLIP_CHUNK) fails, named with the chunk; a slowed worker
// (PSCHED_TEST_CHUNK_DELAY_MS) warns; a worker killed mid-run fails with its cause while the others
// pass; NVML figures from the stand-in library (a narrowed PCIe link, a link below its maximum generation, remapped rows or uncorrected ECC errors that
// rise during the run) fail their GPU; Ctrl-C still reports; the exit codes are the README's.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/exit_codes.h"
#include "app/process.h"
#include "support/job_helpers.h"
#include "support/processes.h"
#include "support/test_cluster.h"

using namespace psched::test;
using nlohmann::json;

namespace {

// A burn of `duration` on the cluster: 400 x 400 in 100 x 100 chunks, and in 10 x 10 chunks.
std::vector<std::string> burn_argv(const TestCluster& cluster, const std::string& duration,
                                   std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {bin_dir() + "/pbench", "-d", "--scheduler", cluster.address(), "-x", "400",
                                   "-y", "400", "--chunk-x", "100", "--chunk-y", "100", "--burn", duration, "--json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// The same on CPU workers sharing CI's two cores with psched, pbench and other builds: the
// kernel's scheduling alone moves a worker's rate by 20% there, so only a real slowdown (half the
// median) may warn. The default 0.9 is the unit tests' (tests/client/burn_ledger_test.cpp).
std::vector<std::string> crowded_burn_argv(const TestCluster& cluster, const std::string& duration,
                                           std::vector<std::string> extra = {}) {
  extra.insert(extra.end(), {"--burn-slow", "0.5"});
  return burn_argv(cluster, duration, extra);
}

// The JSON document among pbench's output (its other lines are stderr's).
json report_of(const std::string& out) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("{\"burn\"", 0) == 0) return json::parse(line);
  FAIL("no burn report in pbench's output");
  return {};
}

const json& gpu_named(const json& report, const std::string& name) {
  for (const json& g : report["gpus"])
    if (g["worker"] == name) return g;
  FAIL("no GPU named " << name);
  static const json none;
  return none;
}

std::string failures_of(const json& gpu) {
  std::string all;
  for (const json& f : gpu["failures"]) all += f.get<std::string>() + "\n";
  return all;
}

std::map<std::string, std::string> stand_in_nvml(std::map<std::string, std::string> extra) {
  extra["PSCHED_TEST_NVML_LIBRARY"] = PSCHED_STAND_IN_NVML;
  extra["PSCHED_TEST_NVML_PCI_BUS_ID"] = "00000000:3B:00.0";
  return extra;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A burn running in the background, its stdout and stderr in files, for tests that act meanwhile.
struct BackgroundBurn {
  explicit BackgroundBurn(const std::vector<std::string>& argv) {
    psched::ChildSpec spec;
    spec.path = argv[0];
    spec.args.assign(argv.begin() + 1, argv.end());
    spec.stdout_path = dir.path + "/out.json";
    spec.stderr_path = dir.path + "/err.log";
    auto started = psched::spawn_child(spec);
    REQUIRE(started);
    pid = *started;
  }
  std::string err() const { return read_file(dir.path + "/err.log"); }
  // Its exit code; `out` its stdout.
  int wait(std::string& out) const {
    int status = 0;
    REQUIRE(psched::wait_child(pid, 30000, &status));
    out = read_file(dir.path + "/out.json");
    return WEXITSTATUS(status);
  }
  TempDir dir;
  pid_t pid = -1;
};

// Readiness: the burn's jobs have reached the worker named `name` ("": any).
bool has_computed(TestCluster& cluster, const std::string& name) {
  pclient::Client watch = cluster.client();
  return eventually([&] {
    for (const auto& w : watch.workers())
      if ((name.empty() || w.name == name) && w.chunks_done > 0) return true;
    return false;
  });
}

}  // namespace

TEST_CASE("pbench --burn on a healthy cluster passes every worker, writes its report and exits 0", "[burn]") {
  TestCluster cluster;
  cluster.add_worker({.name = "w0"});
  cluster.add_worker({.name = "w1"});
  cluster.wait_for_workers(2);
  TempDir tmp;
  std::string out;
  const int status = run_command(crowded_burn_argv(cluster, "3s", {"--burn-report", tmp.path + "/burn.json"}), &out);
  INFO(out);
  CHECK(WEXITSTATUS(status) == psched::kExitOk);
  const json r = report_of(out);
  CHECK(r["burn"]["verdict"] == "pass");
  CHECK(r["burn"]["exit_code"] == 0);
  CHECK(r["burn"]["gpus"] == 2);
  CHECK(r["burn"]["jobs"].get<int>() >= 2);  // both shapes ran
  CHECK(r["burn"]["verified_chunks"].get<int>() >= 16 + 1600);
  CHECK(r["burn"]["mismatch_count"] == 0);
  CHECK(r["burn"]["seconds"].get<double>() >= 3);
  for (const char* name : {"w0", "w1"}) {
    const json& g = gpu_named(r, name);
    CHECK(g["verdict"] == "pass");
    CHECK(g["bytes"].get<uint64_t>() > 0);
    CHECK(g["series"].size() >= 2);
  }
  CHECK(json::parse(read_file(tmp.path + "/burn.json")) == r);
}

TEST_CASE("a burn status psched refuses comes back as a refusal and fails no job on its connection", "[burn]") {
  TestCluster cluster;
  cluster.add_worker({.name = "w0"});
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  pclient::BurnStatus too_many;
  too_many.gpus.resize(5000);  // over the wire's 4096
  client.report_burn(too_many);
  // The Error arrives while the next job runs (it once failed that job as if about the connection).
  const pclient::Result r = client.run(arange_job(400, 400, 100, 100, 1, 1));
  CHECK(r.count == 160000);
  std::vector<std::string> refusals = client.take_refusals();
  for (int k = 0; k < 100 && refusals.empty(); ++k) {  // readiness: the Error may still be on its way
    client.workers();
    refusals = client.take_refusals();
  }
  REQUIRE(refusals.size() == 1);
  CHECK(refusals[0] == "burn status: 5000 GPUs, at most 4096");
  CHECK(client.take_refusals().empty());
  pclient::BurnStatus good;
  good.gpus.resize(1);
  good.gpus[0].worker = "w0";
  client.report_burn(good);
  CHECK(client.workers().size() == 1);
  CHECK(client.take_refusals().empty());
}

TEST_CASE("pbench --burn with --input turns through the file and a generated array of its shape in two chunkings", "[burn]") {
  TempDir tmp;
  const std::string npy = tmp.path + "/x.npy";
  std::string out;
  REQUIRE(WEXITSTATUS(run_command({bin_dir() + "/pbench", "-x", "300", "-y", "200", "--chunk-x", "100", "--chunk-y",
                                   "100", "--generator", "arange", "--write-npy", npy},
                                  &out)) == 0);
  TestCluster cluster;
  cluster.add_worker({.name = "w0"});
  cluster.add_worker({.name = "w1"});
  cluster.wait_for_workers(2);
  const int status = run_command({bin_dir() + "/pbench", "-d", "--scheduler", cluster.address(), "--input", npy,
                                  "--burn", "3s", "--burn-slow", "0.5"},
                                 &out);
  INFO(out);
  CHECK(WEXITSTATUS(status) == psched::kExitOk);
  CHECK(out.find("Burn: 3 s of verified jobs (300 x 200 float64 in 300 x 200 chunks, normal seed 0; 300 x 200 "
                 "float64 in 30 x 20 chunks, normal seed 0; " + npy + " (300 x 200 in 300 x 200 chunks)") !=
        std::string::npos);
  CHECK(out.find("Burn: PASS: 2 GPUs, 0 failed, 0 warned;") != std::string::npos);
}

TEST_CASE("pbench --burn fails the worker that lies from chunk 5 and names the chunk, on 2 and 4 workers", "[burn]") {
  const int workers = GENERATE(2, 4);
  TestCluster cluster;
  cluster.add_worker({.name = "liar", .env = {{"PSCHED_TEST_LIE_FROM_CHUNK", "5"}}});
  for (int i = 1; i < workers; ++i) cluster.add_worker({.name = "honest-" + std::to_string(i)});
  cluster.wait_for_workers(size_t(workers));
  std::string out;
  const int status = run_command(crowded_burn_argv(cluster, "3s"), &out);
  INFO(workers << " workers: " << out);
  CHECK(WEXITSTATUS(status) == psched::kExitFailure);
  const json r = report_of(out);
  CHECK(r["burn"]["verdict"] == "fail");
  const json& liar = gpu_named(r, "liar");
  CHECK(liar["verdict"] == "fail");
  // "thrown off: result for chunk 7 of job 1 cannot be true: ...", or for a run of chunks ("chunks 0
  // to 15": a slow worker reports several at once), one of them from chunk 5 on.
  std::smatch m;
  const std::string failures = failures_of(liar);
  REQUIRE(std::regex_search(failures, m,
                            std::regex(R"(thrown off: result for chunks? (\d+)(?: to (\d+))? of job \d+ cannot be true)")));
  CHECK(std::stoi(m[2].matched ? m[2].str() : m[1].str()) >= 5);
  for (int i = 1; i < workers; ++i) CHECK(gpu_named(r, "honest-" + std::to_string(i))["verdict"] == "pass");
}

TEST_CASE("pbench --burn fails the worker whose copy of chunk 7 lost the vote and names the chunk", "[burn]") {
  TestCluster cluster;
  cluster.add_worker({.name = "flipper", .env = {{"PSCHED_TEST_FLIP_CHUNK", "7"}}});
  cluster.add_worker({.name = "good-1"});
  cluster.add_worker({.name = "good-2"});
  cluster.wait_for_workers(3);
  std::string out;
  const int status = run_command(crowded_burn_argv(cluster, "3s"), &out);
  INFO(out);
  CHECK(WEXITSTATUS(status) == psched::kExitFailure);
  const json r = report_of(out);
  CHECK(r["burn"]["mismatch_count"].get<int>() >= 1);
  const json& flipper = gpu_named(r, "flipper");
  CHECK(flipper["verdict"] == "fail");
  CHECK(failures_of(flipper).find("chunk 7: its copy lost the vote") != std::string::npos);
  CHECK(gpu_named(r, "good-1")["verdict"] == "pass");
  CHECK(gpu_named(r, "good-2")["verdict"] == "pass");
  REQUIRE(!r["mismatches"].empty());
  CHECK(r["mismatches"][0]["chunk"] == 7);
}

TEST_CASE("pbench --burn warns of a slowed worker and exits with the warnings-only code", "[burn]") {
  TestCluster cluster;
  cluster.add_worker({.name = "slow", .env = {{"PSCHED_TEST_CHUNK_DELAY_MS", "20"}}});
  cluster.add_worker({.name = "fast-1"});
  cluster.add_worker({.name = "fast-2"});
  cluster.wait_for_workers(3);
  std::string out;
  const int status = run_command(crowded_burn_argv(cluster, "3s"), &out);
  INFO(out);
  CHECK(WEXITSTATUS(status) == psched::kExitBurnWarnings);
  const json r = report_of(out);
  CHECK(r["burn"]["verdict"] == "warn");
  const json& slow = gpu_named(r, "slow");
  CHECK(slow["verdict"] == "warn");
  REQUIRE(slow["warnings"].size() == 1);
  CHECK(slow["warnings"][0].get<std::string>().rfind("slow: ", 0) == 0);
  CHECK(gpu_named(r, "fast-1")["verdict"] == "pass");
  CHECK(gpu_named(r, "fast-2")["verdict"] == "pass");
}

TEST_CASE("pbench --burn fails a worker killed mid-run with its cause, passes the others and burns one that joins", "[burn]") {
  TestCluster cluster;
  const pid_t victim = cluster.add_worker({.name = "victim"});
  cluster.add_worker({.name = "survivor-1"});
  cluster.add_worker({.name = "survivor-2"});
  cluster.wait_for_workers(3);
  BackgroundBurn burn(crowded_burn_argv(cluster, "5s"));
  REQUIRE(has_computed(cluster, "victim"));
  kill(victim, SIGKILL);
  waitpid(victim, nullptr, 0);
  cluster.forget(victim);
  cluster.add_worker({.name = "newcomer"});
  REQUIRE(has_computed(cluster, "newcomer"));
  std::string out;
  const int code = burn.wait(out);
  INFO(out << burn.err());
  CHECK(code == psched::kExitFailure);
  const json r = report_of(out);
  const json& v = gpu_named(r, "victim");
  CHECK(v["verdict"] == "fail");
  CHECK(!v["left_seconds"].is_null());
  CHECK(failures_of(v).find("left the cluster") != std::string::npos);
  CHECK(!v["last_words"].is_null());
  CHECK(gpu_named(r, "survivor-1")["verdict"] == "pass");
  CHECK(gpu_named(r, "survivor-2")["verdict"] == "pass");
  const json& newcomer = gpu_named(r, "newcomer");
  CHECK(newcomer["verdict"] == "pass");
  CHECK(newcomer["joined_seconds"].get<double>() > 0);
  CHECK(newcomer["chunks"].get<uint64_t>() > 0);
}

TEST_CASE("pbench --burn fails GPUs with a narrowed PCIe link, a link below its generation, rising ECC errors, remapped rows or retired pages", "[burn]") {
  TempDir tmp;
  const std::string ecc_file = tmp.path + "/ecc", rows_file = tmp.path + "/rows", pages_file = tmp.path + "/pages";
  TestCluster cluster;
  cluster.add_worker({.name = "gpu-good", .env = stand_in_nvml({{"STAND_IN_NVML_ID", "1"}})});
  cluster.add_worker({.name = "gpu-x8", .env = stand_in_nvml({{"STAND_IN_NVML_ID", "2"}, {"STAND_IN_NVML_PCIE_WIDTH", "8"}})});
  cluster.add_worker({.name = "gpu-ecc", .env = stand_in_nvml({{"STAND_IN_NVML_ID", "3"},
                                                               {"STAND_IN_NVML_ECC_UNCORRECTED_FILE", ecc_file}})});
  cluster.add_worker({.name = "gpu-gen4", .env = stand_in_nvml({{"STAND_IN_NVML_ID", "4"}, {"STAND_IN_NVML_PCIE_GEN", "4"}})});
  cluster.add_worker({.name = "gpu-rows", .env = stand_in_nvml({{"STAND_IN_NVML_ID", "5"},
                                                                {"STAND_IN_NVML_REMAPPED_ROWS_FILE", rows_file}})});
  cluster.add_worker({.name = "gpu-old", .env = stand_in_nvml({{"STAND_IN_NVML_ID", "6"}, {"STAND_IN_NVML_NO_REMAP", "1"}})});
  // A GPU before Ampere whose driver retires a page during the burn.
  cluster.add_worker({.name = "gpu-pages", .env = stand_in_nvml({{"STAND_IN_NVML_ID", "7"}, {"STAND_IN_NVML_NO_REMAP", "1"},
                                                                 {"STAND_IN_NVML_RETIRED_PAGES_FILE", pages_file}})});
  cluster.wait_for_workers(7);
  BackgroundBurn burn(crowded_burn_argv(cluster, "5s"));
  // Once the burn has its baseline of that GPU (it says so), two errors appear.
  REQUIRE(eventually([&] { return burn.err().find("'gpu-ecc' baseline: ECC uncorrected 0") != std::string::npos; }));
  std::ofstream(ecc_file) << "2\n";
  // Likewise one remapped row, once the burn has that GPU's first figures.
  REQUIRE(eventually([&] { return burn.err().find("'gpu-rows' baseline:") != std::string::npos; }));
  std::ofstream(rows_file) << "1\n";
  REQUIRE(eventually([&] { return burn.err().find("'gpu-pages' baseline: ECC uncorrected 0, retired pages 0") != std::string::npos; }));
  std::ofstream(pages_file) << "1\n";
  std::string out;
  const int code = burn.wait(out);
  INFO(out << burn.err());
  CHECK(code == psched::kExitFailure);
  const json r = report_of(out);
  CHECK(gpu_named(r, "gpu-good")["verdict"] == "pass");
  const json& x8 = gpu_named(r, "gpu-x8");
  CHECK(x8["verdict"] == "fail");
  CHECK(failures_of(x8).find("PCIe link x8 of x16") != std::string::npos);
  CHECK(gpu_named(r, "gpu-good")["gpu"]["pcie_max_generation"] == 5);
  const json& gen4 = gpu_named(r, "gpu-gen4");
  CHECK(gen4["verdict"] == "fail");
  CHECK(failures_of(gen4).find("PCIe link gen 4 of gen 5 under load") != std::string::npos);
  const json& rows = gpu_named(r, "gpu-rows");
  CHECK(rows["verdict"] == "fail");
  CHECK(failures_of(rows).find("remapped memory rows rose from 0 to 1") != std::string::npos);
  // NOT_SUPPORTED: unknown in the report, and not a failure.
  const json& old = gpu_named(r, "gpu-old");
  CHECK(failures_of(old).empty());
  CHECK(old["gpu"]["remap_supported"] == false);
  CHECK(gpu_named(r, "gpu-good")["gpu"]["remap_supported"] == true);
  // Before Ampere, retired pages instead: none retired is a pass, one more during the burn a failure.
  CHECK(old["gpu"]["retired_supported"] == true);
  CHECK(gpu_named(r, "gpu-good")["gpu"]["retired_supported"] == false);
  const json& pages = gpu_named(r, "gpu-pages");
  CHECK(pages["verdict"] == "fail");
  CHECK(failures_of(pages).find("retired memory pages rose from 0 to 1") != std::string::npos);
  const json& ecc = gpu_named(r, "gpu-ecc");
  CHECK(ecc["verdict"] == "fail");
  CHECK(failures_of(ecc).find("ECC uncorrected errors rose from 0 to 2") != std::string::npos);
  CHECK(ecc["gpu"]["ecc_uncorrected_end"] == 2);
}

TEST_CASE("Ctrl-C stops pbench --burn early, still writes its report and exits 130", "[burn]") {
  TestCluster cluster;
  cluster.add_worker({.name = "w0"});
  cluster.add_worker({.name = "w1"});
  cluster.wait_for_workers(2);
  TempDir tmp;
  BackgroundBurn burn(crowded_burn_argv(cluster, "10m", {"--burn-report", tmp.path + "/burn.html"}));
  REQUIRE(has_computed(cluster, ""));
  kill(burn.pid, SIGINT);
  std::string out;
  const int code = burn.wait(out);
  INFO(out << burn.err());
  CHECK(code == 130);
  const json r = report_of(out);
  CHECK(r["burn"]["interrupted"] == true);
  CHECK(r["burn"]["verdict"] != "fail");
  CHECK(r["burn"]["seconds"].get<double>() < 60);
  const std::string page = read_file(tmp.path + "/burn.html");
  CHECK(page.find("<title>psched burn-in report</title>") != std::string::npos);
  CHECK(page.find("\"interrupted\":true") != std::string::npos);
}

TEST_CASE("pbench --burn refuses a bad duration or threshold in one line with exit 2", "[burn]") {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--burn", "10x"}, {"--burn", "0s"}, {"--burn", "5s", "--burn-slow", "1.5"},
           {"--burn-report", "x.html"}, {"--burn", "5s", "--repeat", "2"}}) {
    std::vector<std::string> argv = {bin_dir() + "/pbench", "-c", "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string out;
    const int status = run_command(argv, &out, 15000);
    INFO(args[0] << " " << args[1] << " -> " << out);
    CHECK(WEXITSTATUS(status) == psched::kExitUsage);
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  }
}

namespace {

// The child of `parent` whose command line holds `word` (a local worker's --name), or -1.
pid_t child_with(pid_t parent, const std::string& word) {
  for (const ProcessEntry& p : live_processes())
    if (p.parent == parent && (" " + p.cmdline).find(" " + word + " ") != std::string::npos) return p.pid;
  return -1;
}

}  // namespace

TEST_CASE("pbench -c 3 --burn fails a local worker killed mid-run with its signal as the cause", "[burn][local]") {
  TempDir tmp;  // pbench's local cluster writes its scheduler file under TMPDIR: the test reads it
  psched::ChildSpec spec;
  spec.path = bin_dir() + "/pbench";
  spec.args = {"-c", "3", "-x", "400", "-y", "400", "--chunk-x", "100", "--chunk-y", "100", "--burn", "8s",
               "--burn-slow", "0.5", "--json"};
  spec.env = {{"TMPDIR", tmp.path}};
  spec.stdout_path = tmp.path + "/out.json";
  spec.stderr_path = tmp.path + "/err.log";
  auto started = psched::spawn_child(spec);
  REQUIRE(started);
  const pid_t burn = *started;
  std::string scheduler_file;
  REQUIRE(eventually([&] {
    for (const auto& d : std::filesystem::directory_iterator(tmp.path))
      if (std::filesystem::exists(d.path() / "scheduler.json")) scheduler_file = d.path() / "scheduler.json";
    return !scheduler_file.empty();
  }));
  pclient::ConnectOptions connect;
  connect.scheduler_file = scheduler_file;
  pclient::Client watch = pclient::Client::connect(connect);
  REQUIRE(eventually([&] {  // readiness: the burn's jobs reached the victim
    for (const auto& w : watch.workers())
      if (w.name == "local-1" && w.chunks_done > 0) return true;
    return false;
  }));
  watch.close();
  const pid_t victim = child_with(burn, "local-1");
  REQUIRE(victim > 0);

  kill(victim, SIGKILL);

  int status = 0;
  REQUIRE(psched::wait_child(burn, 60000, &status));
  const std::string out = read_file(tmp.path + "/out.json");
  INFO(out << read_file(tmp.path + "/err.log"));
  CHECK(WEXITSTATUS(status) == psched::kExitFailure);
  const json r = report_of(out);
  const json& v = gpu_named(r, "local-1");
  CHECK(v["verdict"] == "fail");
  CHECK(failures_of(v).find(fmt::format("its process {} killed by signal 9 (Killed)", victim)) != std::string::npos);
  CHECK(v["last_words"].get<std::string>().find("killed by signal 9") != std::string::npos);
  CHECK(gpu_named(r, "local-0")["verdict"] != "fail");
  CHECK(gpu_named(r, "local-2")["verdict"] != "fail");
}
