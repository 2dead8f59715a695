// Shared set-up of the dashboard end-to-end tests: a real psched with its dashboard on a free
// loopback port, named CPU workers, and an arange job whose sum is known in closed form.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "../support/job_helpers.h"
#include "../support/test_cluster.h"
#include "http_probe.h"

namespace psched::test {

inline std::unique_ptr<TestCluster> dashboard_cluster(const std::vector<std::string>& workers) {
  SchedulerOptions options;
  options.dashboard = "127.0.0.1:0";
  auto cluster = std::make_unique<TestCluster>(options);
  for (const std::string& name : workers) {
    WorkerOptions w;
    w.name = name;
    cluster->add_worker(w);
  }
  cluster->wait_for_workers(workers.size());
  return cluster;
}

// arange(0, 1) over rows x cols, every element: the sum is n(n-1)/2 with n = rows * cols, exact.
inline pclient::Job arange_sum_job(uint64_t rows, uint64_t cols, uint64_t chunk_rows,
                                   uint64_t chunk_cols) {
  pclient::Job job = arange_job(rows, cols, chunk_rows, chunk_cols);
  job.offset = 0;
  return job;
}

inline double arange_sum(uint64_t n) { return double(n * (n - 1) / 2); }

inline nlohmann::json get_status(uint16_t port) {
  HttpReply r = http_request(port, "GET", "/api/status");
  if (r.status != 200) throw std::runtime_error("GET /api/status: " + r.head);
  return nlohmann::json::parse(r.body);
}

}  // namespace psched::test
