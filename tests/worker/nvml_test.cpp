// NVML in the worker, on machines without a GPU: the absent library's path, and the sampler driven
// by the stand-in library (tests/support/stand_in_nvml.cpp) that answers as one GPU would.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "worker/nvml.h"

using namespace psched;

TEST_CASE("NvmlDevice::open says which library it could not load, and nothing else happens") {
  auto d = NvmlDevice::open("/nonexistent/libnvidia-ml.so.1", "00000000:3B:00.0");
  REQUIRE_FALSE(d.is_ok());
  CHECK(d.message().find("cannot load /nonexistent/libnvidia-ml.so.1") != std::string::npos);
}

TEST_CASE("NvmlDevice::open names the bus id NVML does not know") {
  setenv("STAND_IN_NVML_NO_GPU", "1", 1);
  auto d = NvmlDevice::open(PSCHED_STAND_IN_NVML, "00000000:3B:00.0");
  unsetenv("STAND_IN_NVML_NO_GPU");
  REQUIRE_FALSE(d.is_ok());
  CHECK(d.message() == "NVML finds no GPU at PCI bus id 00000000:3B:00.0: Not Found (6)");
}

TEST_CASE("NvmlSampler folds the GPU's samples into the health a heartbeat carries") {
  setenv("STAND_IN_NVML_THROTTLE", "0x4", 1);  // software power cap
  auto d = NvmlDevice::open(PSCHED_STAND_IN_NVML, "00000000:3B:00.0");
  REQUIRE(d.is_ok());
  NvmlSampler sampler(std::move(*d), std::chrono::milliseconds(1));
  // The sampler thread's first sample is the readiness to wait on (polled: it signals nothing).
  GpuHealth h;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (h.samples == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    h = sampler.take();
  }
  unsetenv("STAND_IN_NVML_THROTTLE");
  REQUIRE(h.samples > 0);
  CHECK(h.uuid == "GPU-5a11d1e0-0000-4000-8000-000000000001");
  CHECK(h.pci_bus_id == "00000000:3B:00.0");
  CHECK(h.sm_utilisation_pct == 97);
  CHECK(h.mem_utilisation_pct == 64);
  CHECK(h.memory_used_bytes == (12ull << 30));
  CHECK(h.memory_total_bytes == (80ull << 30));
  CHECK(h.sm_clock_mhz == 1755);
  CHECK(h.sm_clock_min_mhz == 1755);
  CHECK(h.sm_clock_max_mhz == 1980);
  CHECK(h.temperature_c == 61);
  CHECK(h.power_watts == 412);
  CHECK(h.power_limit_watts == 700);
  CHECK(h.throttle_reasons == 0x4);
  CHECK(h.ecc_supported);
  CHECK(h.ecc_corrected == 3);
  CHECK(h.ecc_uncorrected == 0);
  CHECK(h.pcie_generation == 5);
  CHECK(h.pcie_width == 16);
  CHECK(h.pcie_max_width == 16);
  CHECK(h.pcie_max_generation == 5);
  CHECK(gpu_warnings(h) == std::vector<std::string>{"throttled: sw_power_cap"});
}

TEST_CASE("NvmlSampler's energy is the counter's, carried to now at the recent power, without a driver call") {
  // The stand-in's counter is 412 W x CLOCK_MONOTONIC (steady_clock's clock here), so energy_joules()
  // asked between two clock readings must lie between 412 W x each of them, whether the sampler
  // read the counter just before or kEnergyReadInterval before and carried it forward. The slack is
  // for a reading's stamp, which a preempted sampler thread can place a little off the counter's
  // own instant (CI saw 0.3 ms); a sampler that did not carry forward is off by up to 50 ms x 412 W.
  constexpr double kWatts = 412.0;
  constexpr double kSlackSeconds = 0.010;
  const auto seconds_of = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
  };
  for (const auto interval : {std::chrono::milliseconds(1), std::chrono::milliseconds(10000)}) {
    auto d = NvmlDevice::open(PSCHED_STAND_IN_NVML, "00000000:3B:00.0");
    REQUIRE(d.is_ok());
    NvmlSampler sampler(std::move(*d), interval);
    int outside = 0;
    for (int k = 0; k < 25; ++k) {
      const auto before = std::chrono::steady_clock::now();
      const std::optional<double> e = sampler.energy_joules();
      const auto after = std::chrono::steady_clock::now();
      REQUIRE(e);
      const double low = kWatts * (seconds_of(before) - kSlackSeconds);
      const double high = kWatts * (seconds_of(after) + kSlackSeconds);
      if (*e < low || *e > high) {
        ++outside;
        UNSCOPED_INFO(fmt::format("interval {} ms, ask {}: {:.3f} J, not in [{:.3f}, {:.3f}]",
                                  interval.count(), k, *e, low, high));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(7));
    }
    CHECK(outside == 0);
  }
}

TEST_CASE("NvmlDevice reads the GPU's nearest CPUs as taskset's list") {
  auto d = NvmlDevice::open(PSCHED_STAND_IN_NVML, "00000000:3B:00.0");
  REQUIRE(d.is_ok());
  CHECK((*d)->cpu_affinity() == std::vector<int>{0, 1});
  CHECK(cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(cpu_list({}) == "");
}
