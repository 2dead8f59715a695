// The task stream's bounded ring and the straggler rule (scheduler/task_stream.h, job_devices.h).
#include <catch2/catch.hpp>

#include "scheduler/job_devices.h"
#include "scheduler/task_stream.h"

using namespace psched;

TEST_CASE("the task stream keeps its memory fixed over 1,000,000 chunks") {
  TaskStream stream;
  const size_t bytes_before = stream.memory_bytes();
  for (uint64_t c = 0; c < 1'000'000; ++c)
    stream.record(TaskSegment{1, WorkerId(1 + c % 4), c, 1, double(c) * 1e-3, double(c + 1) * 1e-3});
  CHECK(stream.recorded() == 1'000'000);
  CHECK(stream.size() == kTaskStreamSegments);
  CHECK(stream.memory_bytes() == bytes_before);
  CHECK(stream.memory_bytes() <= 4u << 20);
  // The newest survive, oldest first.
  const auto last = stream.since(0, 3);
  REQUIRE(last.size() == 3);
  CHECK(last[0].first_chunk == 999'997);
  CHECK(last[2].first_chunk == 999'999);
}

TEST_CASE("the task stream hands back the segments that ended after a time, of one job if asked") {
  TaskStream stream(8);
  stream.record({1, 1, 0, 10, 0.0, 1.0});
  stream.record({2, 2, 0, 5, 0.5, 2.0});
  stream.record({1, 2, 10, 10, 1.0, 3.0});
  const auto after = stream.since(1.5, 100);
  REQUIRE(after.size() == 2);
  CHECK(after[0].job == 2);
  CHECK(after[1].first_chunk == 10);
  const auto job1 = stream.since(0, 100, 1);
  REQUIRE(job1.size() == 2);
  CHECK(job1[0].end_s == 1.0);
  CHECK(job1[1].end_s == 3.0);
}

namespace {

DeviceShare share(WorkerId id, uint64_t bytes, double busy) {
  DeviceShare d;
  d.worker_id = id;
  d.bytes = bytes;
  d.busy_seconds = busy;
  return d;
}

}  // namespace

TEST_CASE("a device 10% or more below its job's median throughput is a straggler") {
  std::vector<DeviceShare> shares = {share(1, 1000, 1.0), share(2, 1000, 1.0),
                                     share(3, 900, 1.0), share(4, 950, 1.0)};
  mark_stragglers(shares);
  // Median of 1000, 1000, 900, 950 is 975: 900 is 7.7% below, not slow; 877.5 would be.
  CHECK_FALSE(shares[2].slow);
  shares[2].bytes = 870;
  mark_stragglers(shares);
  CHECK(shares[2].slow);
  CHECK_FALSE(shares[0].slow);
  CHECK_FALSE(shares[3].slow);
  CHECK(shares[2].cause == "");  // no NVML figures: no cause to name
}

TEST_CASE("a straggler's cause is what NVML shows: throttling, a lower clock, a narrower link") {
  std::vector<DeviceShare> shares = {share(1, 1000, 1.0), share(2, 1000, 1.0), share(3, 500, 1.0)};
  GpuHealth healthy;
  healthy.samples = 5;
  healthy.sm_clock_mhz = 1980;
  healthy.pcie_width = healthy.pcie_max_width = 16;
  GpuHealth sick = healthy;
  sick.sm_clock_mhz = 1400;
  sick.throttle_reasons = throttle::kHwThermalSlowdown;
  sick.pcie_width = 8;
  for (auto* d : {&shares[0], &shares[1]}) d->gpu.emplace().add(healthy);
  shares[2].gpu.emplace().add(sick);
  mark_stragglers(shares);
  CHECK(shares[2].slow);
  CHECK(shares[2].cause ==
        "throttled: hw_thermal_slowdown; SM clock 1400 MHz vs median 1980 MHz; PCIe x8 of x16");
}

TEST_CASE("one device alone is never a straggler") {
  std::vector<DeviceShare> shares = {share(1, 10, 100.0)};
  mark_stragglers(shares);
  CHECK_FALSE(shares[0].slow);
}
