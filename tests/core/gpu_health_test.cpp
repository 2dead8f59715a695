// GpuHealth: its one wire conversion, the warnings a person sees, and a run's min/mean/max.
#include <catch2/catch.hpp>

#include <capnp/message.h>

#include "core/gpu_health.h"
#include "net/wire_convert.h"

using namespace psched;

TEST_CASE("a GPU's health crosses the wire unchanged, inside a WorkerInfo too") {
  GpuHealth h;
  h.uuid = "GPU-1";
  h.pci_bus_id = "00000000:3B:00.0";
  h.samples = 5;
  h.sm_utilisation_pct = 99.5;
  h.mem_utilisation_pct = 40;
  h.memory_used_bytes = 123;
  h.memory_total_bytes = 456;
  h.sm_clock_mhz = 1700.5;
  h.sm_clock_min_mhz = 1600;
  h.sm_clock_max_mhz = 1980;
  h.temperature_c = 70;
  h.power_watts = 500.25;
  h.power_limit_watts = 700;
  h.throttle_reasons = throttle::kSwPowerCap | throttle::kGpuIdle;
  h.ecc_corrected = 7;
  h.ecc_uncorrected = 1;
  h.ecc_supported = true;
  h.pcie_generation = 5;
  h.pcie_width = 16;
  h.pcie_max_width = 16;
  h.pcie_max_generation = 5;
  WorkerInfo w;
  w.cpu_affinity = "0-7";
  w.gpu = h;
  capnp::MallocMessageBuilder m;
  auto out = m.initRoot<wire::WorkerInfo>();
  to_wire(w, out);
  const WorkerInfo back = from_wire(out.asReader());
  REQUIRE(back.gpu.has_value());
  const GpuHealth& g = *back.gpu;
  CHECK(back.cpu_affinity == "0-7");
  CHECK(g.uuid == h.uuid);
  CHECK(g.pci_bus_id == h.pci_bus_id);
  CHECK(g.samples == 5);
  CHECK(g.sm_utilisation_pct == 99.5);
  CHECK(g.mem_utilisation_pct == 40);
  CHECK(g.memory_used_bytes == 123);
  CHECK(g.memory_total_bytes == 456);
  CHECK(g.sm_clock_mhz == 1700.5);
  CHECK(g.sm_clock_min_mhz == 1600);
  CHECK(g.sm_clock_max_mhz == 1980);
  CHECK(g.temperature_c == 70);
  CHECK(g.power_watts == 500.25);
  CHECK(g.power_limit_watts == 700);
  CHECK(g.throttle_reasons == h.throttle_reasons);
  CHECK(g.ecc_corrected == 7);
  CHECK(g.ecc_uncorrected == 1);
  CHECK(g.ecc_supported);
  CHECK(g.pcie_generation == 5);
  CHECK(g.pcie_width == 16);
  CHECK(g.pcie_max_width == 16);
  CHECK(g.pcie_max_generation == 5);

  WorkerInfo none;
  capnp::MallocMessageBuilder m2;
  auto out2 = m2.initRoot<wire::WorkerInfo>();
  to_wire(none, out2);
  CHECK_FALSE(from_wire(out2.asReader()).gpu.has_value());
}

TEST_CASE("a GPU is warned about for slowing throttles, uncorrected ECC, a narrow link, heat, full memory") {
  GpuHealth h;
  h.throttle_reasons = throttle::kGpuIdle | throttle::kApplicationsClocksSetting;  // as told: fine
  h.ecc_supported = true;
  h.ecc_corrected = 9;  // corrected errors are the ECC doing its job
  h.pcie_width = h.pcie_max_width = 16;
  h.temperature_c = 84;
  h.memory_total_bytes = 100;
  h.memory_used_bytes = 94;
  CHECK(gpu_warnings(h).empty());
  h.throttle_reasons |= throttle::kHwThermalSlowdown | throttle::kSwPowerCap;
  h.ecc_uncorrected = 2;
  h.pcie_width = 4;
  h.temperature_c = 85;
  h.memory_used_bytes = 95;
  CHECK(gpu_warnings(h) == std::vector<std::string>{"throttled: sw_power_cap,hw_thermal_slowdown",
                                                    "ECC uncorrected 2", "PCIe x4 of x16", "hot 85 C",
                                                    "memory 95% used"});
}

TEST_CASE("a run's GPU figures are the min, mean and max of its heartbeats, idle ones left out") {
  GpuRunStats run;
  GpuHealth h;
  h.samples = 5;
  for (double clock : {1500.0, 1800.0, 2100.0}) {
    h.sm_clock_mhz = clock;
    run.add(h);
  }
  GpuHealth empty;  // no samples yet: nothing to fold
  run.add(empty);
  CHECK(run.sm_clock_mhz.min == 1500);
  CHECK(run.sm_clock_mhz.mean() == 1800);
  CHECK(run.sm_clock_mhz.max == 2100);
  CHECK(run.sm_clock_mhz.n == 3);
}

TEST_CASE("a run's GPU series keeps its whole span at most kMaxPoints long, thinned evenly") {
  std::vector<GpuPoint> series;
  for (int t = 0; t < 2000; ++t) add_point(series, GpuPoint{double(t)});
  CHECK(series.size() <= kMaxGpuPoints);
  CHECK(series.size() > kMaxGpuPoints / 2);
  CHECK(series.front().at_s == 0);
  CHECK(series.back().at_s == 1999);
  for (size_t i = 1; i < series.size(); ++i) CHECK(series[i - 1].at_s < series[i].at_s);
}
