// NVML in the GPU worker: libnvidia-ml.so.1 opened at run time (nvml_api.h declares what is used),
// one GPU found by its PCI bus id, and a sampler thread that reads it every kNvmlSampleInterval and
// folds the samples into the GpuHealth a heartbeat carries (core/gpu_health.h). Where the library
// or the device is missing, open() says why and the worker goes on without GPU health.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/gpu_health.h"
#include "core/status.h"

namespace psched {

// NVML refreshes most counters a few times a second; sampling at 5 Hz catches short throttling
// without costing the worker anything measurable (a handful of driver calls per sample).
constexpr std::chrono::milliseconds kNvmlSampleInterval{200};
// The energy counter alone is read more often, for the energy of runs under a second (EnergyMeter).
constexpr std::chrono::milliseconds kEnergyReadInterval{50};

// One NVML sample of one GPU.
struct NvmlSample {
  unsigned sm_util = 0, mem_util = 0;
  uint64_t memory_used = 0, memory_total = 0;
  unsigned sm_clock = 0, temperature = 0;
  double power_watts = 0;
  uint64_t throttle = 0;
  uint64_t energy_mj = 0;  // NVML's energy counter (mJ since the driver loaded), when has_energy
  bool has_energy = false;
  std::chrono::steady_clock::time_point at;  // when it was taken
};

// The GPU's mean power between two samples: from the energy counter where both have it (NVML's
// power reading is itself an average over about a second on recent GPUs), else the later reading.
double power_between(const NvmlSample& earlier, const NvmlSample& later);

class NvmlDevice {
 public:
  // Opens `library` (normally "libnvidia-ml.so.1"), initialises NVML and finds the GPU with this
  // PCI bus id ("0000:3B:00.0"), or says why it cannot.
  static StatusOr<std::unique_ptr<NvmlDevice>> open(const std::string& library,
                                                    const std::string& pci_bus_id);
  ~NvmlDevice();
  NvmlDevice(const NvmlDevice&) = delete;
  NvmlDevice& operator=(const NvmlDevice&) = delete;

  // The figures that change; queries the device does not support leave their field 0.
  NvmlSample sample() const;
  // The figures that do not change between samples and the slow ones (ECC, PCIe link), into h.
  void fill_static(GpuHealth& h) const;
  // The CPUs nearest the GPU (NVML's ideal affinity), empty when NVML cannot say.
  std::vector<int> cpu_affinity() const;
  // NVML's energy counter now (mJ since the driver loaded); nullopt where the library or the GPU
  // has none.
  std::optional<uint64_t> energy_mj() const;

  struct Api;  // the looked-up entry points (nvml.cpp)

 private:
  NvmlDevice() = default;
  void* library_ = nullptr;
  std::unique_ptr<Api> api_;
  void* device_ = nullptr;
  std::string pci_bus_id_;
};

// Samples one NvmlDevice on its own thread; take() hands the aggregate since the last take() to
// the heartbeat and starts a new one.
class NvmlSampler {
 public:
  explicit NvmlSampler(std::unique_ptr<NvmlDevice> device,
                       std::chrono::milliseconds interval = kNvmlSampleInterval);
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  // The health over the samples since the previous take() (the latest figures again when none
  // were taken since). Thread-safe.
  GpuHealth take();
  // The GPU's mean power over the last sample interval (power_between), for the energy a batch of
  // chunks used: its device seconds times this. Thread-safe, lock-free.
  double recent_watts() const { return recent_watts_.load(std::memory_order_relaxed); }
  // The GPU's energy counter now, in joules: its latest reading (at most kEnergyReadInterval old,
  // taken on the sampler's thread) plus recent_watts for the time since. A worker asks at each
  // report (EnergyMeter), on its loop thread, which must never wait on the driver: an NVML call
  // there made every report wait milliseconds and halved an H200's DeepOps throughput. Nullopt
  // without a counter. Thread-safe.
  std::optional<double> energy_joules() const;

 private:
  void run();
  void note_energy(std::optional<uint64_t> mj, std::chrono::steady_clock::time_point at);

  std::unique_ptr<NvmlDevice> device_;
  std::chrono::milliseconds interval_;
  GpuHealth static_;  // refreshed once a second by the sampler thread

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  // Running sums of the samples since the last take().
  uint32_t n_ = 0;
  double sm_util_ = 0, mem_util_ = 0, clock_ = 0, power_ = 0;
  unsigned clock_min_ = 0, temperature_max_ = 0;
  uint64_t throttle_ = 0;
  NvmlSample last_;
  std::atomic<double> recent_watts_{0};
  mutable std::mutex energy_mutex_;  // guards the two below, written by the sampler's thread
  std::optional<uint64_t> energy_mj_;
  std::chrono::steady_clock::time_point energy_at_;
  GpuHealth last_taken_;
  std::thread thread_;
};

// Formats CPUs as a list ("0-15,32-47"), the form taskset and /proc use.
std::string cpu_list(const std::vector<int>& cpus);

}  // namespace psched
