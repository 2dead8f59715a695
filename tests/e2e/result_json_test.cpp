// The job result written once (client/result_json.h): pbench's --json and its report's "job" are
// one document, var and std included when the job computed them, on a real cluster.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_cluster.h"

using namespace psched::test;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("pbench --json and the report's job are the same document, var and std included", "[json][report]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  TempDir tmp;
  const std::string html = tmp.path + "/report.html", report = tmp.path + "/report.json";
  std::string out;
  const int status = run_command({bin_dir() + "/pbench", "-d", "--scheduler", cluster.address(), "-x", "400", "-y",
                                  "300", "--chunk-x", "100", "--chunk-y", "100", "--generator", "arange",
                                  "--row-step", "1", "--col-step", "1", "--stats", "sum,var,std", "--ddof", "1",
                                  "--json", "-q", "--report", html, "--report-json", report},
                                 &out);
  INFO(out);
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));  // after the report's line (stderr)
  const auto rep = nlohmann::json::parse(slurp(report));
  // arange 0..119999 (+1) with ddof 1: var = n (n + 1) / 12.
  const double n = 120000;
  CHECK(j["var"].get<double>() == n * (n + 1) / 12);
  CHECK(j["std"].get<double>() > 0);
  CHECK(j["ddof"] == 1);
  CHECK(j["chunks"] == 12);
  CHECK(j["devices"].size() == 2);
  CHECK(j["stragglers"].is_array());
  // CPU workers: no GPU series to leave out of the --json line, so the two are equal, key for key.
  CHECK(rep["job"] == j);
  // The page draws var and std from that document when it has them.
  const std::string page = slurp(html);
  CHECK(page.find("\"var\":" + j["var"].dump()) != std::string::npos);
  CHECK(page.find("\"var\" in j") != std::string::npos);
}
