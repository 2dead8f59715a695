#include "worker/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "worker/nvml_api.h"

namespace psched {

namespace api = nvml_api;

struct NvmlDevice::Api {
  api::InitFn init = nullptr;
  api::ShutdownFn shutdown = nullptr;
  api::ErrorStringFn error_string = nullptr;
  api::HandleByPciBusIdFn by_pci_bus_id = nullptr;
  api::UuidFn uuid = nullptr;
  api::UtilizationFn utilization = nullptr;
  api::MemoryFn memory = nullptr;
  api::ClockFn clock = nullptr, max_clock = nullptr;
  api::TemperatureFn temperature = nullptr;
  api::UintFn power = nullptr, power_limit = nullptr;
  api::UintFn pcie_generation = nullptr, pcie_width = nullptr, pcie_max_width = nullptr,
                pcie_max_generation = nullptr;
  api::ThrottleFn throttle = nullptr;
  api::EccFn ecc = nullptr;
  api::CpuAffinityFn cpu_affinity = nullptr;
  api::EnergyFn energy = nullptr;  // optional: null where the library has none
  api::RemappedRowsFn remapped_rows = nullptr;  // optional: drivers before R460 have none
  api::RetiredPagesFn retired_pages = nullptr;  // optional, as is the next
  api::RetiredPendingFn retired_pending = nullptr;

  std::string why(api::Return r) const {
    const char* s = error_string ? error_string(r) : nullptr;
    return s ? fmt::format("{} ({})", s, r) : fmt::format("NVML error {}", r);
  }
};

namespace {

// Looks up every entry point; the first one missing is named in the error.
Status look_up(void* lib, NvmlDevice::Api& a) {
  std::string missing;
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn && missing.empty()) missing = name;
  };
  get(a.init, "nvmlInit_v2");
  get(a.shutdown, "nvmlShutdown");
  get(a.error_string, "nvmlErrorString");
  get(a.by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  get(a.uuid, "nvmlDeviceGetUUID");
  get(a.utilization, "nvmlDeviceGetUtilizationRates");
  get(a.memory, "nvmlDeviceGetMemoryInfo");
  get(a.clock, "nvmlDeviceGetClockInfo");
  get(a.max_clock, "nvmlDeviceGetMaxClockInfo");
  get(a.temperature, "nvmlDeviceGetTemperature");
  get(a.power, "nvmlDeviceGetPowerUsage");
  get(a.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  get(a.pcie_generation, "nvmlDeviceGetCurrPcieLinkGeneration");
  get(a.pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
  get(a.pcie_max_width, "nvmlDeviceGetMaxPcieLinkWidth");
  get(a.pcie_max_generation, "nvmlDeviceGetMaxPcieLinkGeneration");
  get(a.throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
  get(a.ecc, "nvmlDeviceGetTotalEccErrors");
  get(a.cpu_affinity, "nvmlDeviceGetCpuAffinity");
  if (!missing.empty()) return Status::error(fmt::format("NVML has no {}", missing));
  // Optional, null where the library lacks them: the energy counter (without it a batch's energy
  // comes from the power reading) and remapped rows (unknown without them, never judged).
  a.energy = reinterpret_cast<api::EnergyFn>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
  a.remapped_rows = reinterpret_cast<api::RemappedRowsFn>(dlsym(lib, "nvmlDeviceGetRemappedRows"));
  a.retired_pages = reinterpret_cast<api::RetiredPagesFn>(dlsym(lib, "nvmlDeviceGetRetiredPages"));
  a.retired_pending = reinterpret_cast<api::RetiredPendingFn>(dlsym(lib, "nvmlDeviceGetRetiredPagesPendingStatus"));
  return Status::ok();
}

api::Device handle(void* d) { return static_cast<api::Device>(d); }

}  // namespace

StatusOr<std::unique_ptr<NvmlDevice>> NvmlDevice::open(const std::string& library,
                                                       const std::string& pci_bus_id) {
  // RTLD_LOCAL: NVML's symbols stay out of the global namespace; nothing else may bind to them.
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    return Status::error(fmt::format("cannot load {}: {}", library, e ? e : "unknown error"));
  }
  std::unique_ptr<NvmlDevice> d(new NvmlDevice);
  d->library_ = lib;
  d->api_ = std::make_unique<Api>();
  d->pci_bus_id_ = pci_bus_id;
  if (Status s = look_up(lib, *d->api_); !s) return s;  // ~NvmlDevice closes the library
  if (const api::Return r = d->api_->init(); r != api::kSuccess) {
    d->api_->shutdown = nullptr;  // not initialised: nothing to shut down
    return Status::error("nvmlInit failed: " + d->api_->why(r));
  }
  api::Device dev = nullptr;
  if (const api::Return r = d->api_->by_pci_bus_id(pci_bus_id.c_str(), &dev); r != api::kSuccess)
    return Status::error(
        fmt::format("NVML finds no GPU at PCI bus id {}: {}", pci_bus_id, d->api_->why(r)));
  d->device_ = dev;
  return d;
}

NvmlDevice::~NvmlDevice() {
  if (api_ && api_->shutdown) (void)api_->shutdown();  // nothing to do about a failure on the way out
  if (library_) dlclose(library_);
}

NvmlSample NvmlDevice::sample() const {
  // Each query is checked; one the device does not support (NVML_ERROR_NOT_SUPPORTED, common on
  // consumer cards and in MIG mode) leaves its field 0 rather than failing the sample.
  const Api& a = *api_;
  const api::Device dev = handle(device_);
  NvmlSample s;
  if (api::Utilization u{}; a.utilization(dev, &u) == api::kSuccess) {
    s.sm_util = u.gpu;
    s.mem_util = u.memory;
  }
  if (api::Memory m{}; a.memory(dev, &m) == api::kSuccess) {
    s.memory_used = m.used;
    s.memory_total = m.total;
  }
  if (unsigned v = 0; a.clock(dev, api::kClockSm, &v) == api::kSuccess) s.sm_clock = v;
  if (unsigned v = 0; a.temperature(dev, api::kTemperatureGpu, &v) == api::kSuccess)
    s.temperature = v;
  if (unsigned mw = 0; a.power(dev, &mw) == api::kSuccess) s.power_watts = mw / 1000.0;
  if (unsigned long long t = 0; a.throttle(dev, &t) == api::kSuccess) s.throttle = t;
  if (unsigned long long mj = 0; a.energy && a.energy(dev, &mj) == api::kSuccess) {
    s.energy_mj = mj;
    s.has_energy = true;
  }
  s.at = std::chrono::steady_clock::now();
  return s;
}

void NvmlDevice::fill_static(GpuHealth& h) const {
  const Api& a = *api_;
  const api::Device dev = handle(device_);
  h.pci_bus_id = pci_bus_id_;
  if (char uuid[api::kUuidBufferSize] = {}; a.uuid(dev, uuid, sizeof uuid) == api::kSuccess)
    h.uuid = std::string(uuid, strnlen(uuid, sizeof uuid));
  if (unsigned v = 0; a.max_clock(dev, api::kClockSm, &v) == api::kSuccess) h.sm_clock_max_mhz = v;
  if (unsigned mw = 0; a.power_limit(dev, &mw) == api::kSuccess) h.power_limit_watts = mw / 1000.0;
  if (unsigned v = 0; a.pcie_generation(dev, &v) == api::kSuccess) h.pcie_generation = v;
  if (unsigned v = 0; a.pcie_width(dev, &v) == api::kSuccess) h.pcie_width = v;
  if (unsigned v = 0; a.pcie_max_width(dev, &v) == api::kSuccess) h.pcie_max_width = v;
  if (unsigned v = 0; a.pcie_max_generation(dev, &v) == api::kSuccess) h.pcie_max_generation = v;
  unsigned long long corrected = 0, uncorrected = 0;
  h.ecc_supported =
      a.ecc(dev, api::kMemoryErrorCorrected, api::kVolatileEcc, &corrected) == api::kSuccess &&
      a.ecc(dev, api::kMemoryErrorUncorrected, api::kVolatileEcc, &uncorrected) == api::kSuccess;
  h.ecc_corrected = h.ecc_supported ? corrected : 0;
  h.ecc_uncorrected = h.ecc_supported ? uncorrected : 0;
  // Row remapping: NOT_SUPPORTED (before Ampere) or any other answer leaves it unknown.
  unsigned rows_corrected = 0, rows_uncorrected = 0, pending = 0, failed = 0;
  h.remap_supported = a.remapped_rows &&
      a.remapped_rows(dev, &rows_corrected, &rows_uncorrected, &pending, &failed) == api::kSuccess;
  if (h.remap_supported) {
    h.remapped_rows_corrected = rows_corrected;
    h.remapped_rows_uncorrected = rows_uncorrected;
    h.remap_pending = pending != 0;
    h.remap_failed = failed != 0;
  }
  // Page retirement (before Ampere): the count of each cause's pages, asked with a buffer of none
  // (INSUFFICIENT_SIZE then says how many); NOT_SUPPORTED (Ampere on) leaves it unknown.
  auto retired = [&](int cause, uint32_t& count) {
    unsigned n = 0;
    unsigned long long none = 0;
    const api::Return r = a.retired_pages(dev, cause, &n, &none);
    count = n;
    return r == api::kSuccess || r == api::kInsufficientSize;
  };
  h.retired_supported = a.retired_pages && retired(api::kRetiredForSingleBitErrors, h.retired_pages_sbe) &&
                        retired(api::kRetiredForDoubleBitError, h.retired_pages_dbe);
  if (!h.retired_supported) h.retired_pages_sbe = h.retired_pages_dbe = 0;
  if (int pending = 0; h.retired_supported && a.retired_pending && a.retired_pending(dev, &pending) == api::kSuccess)
    h.retired_pending = pending != 0;
}

std::vector<int> NvmlDevice::cpu_affinity() const {
  // NVML fills a bitmask of unsigned longs; 1024 CPUs cover any machine we expect.
  constexpr unsigned kWords = 1024 / (8 * sizeof(unsigned long));
  unsigned long mask[kWords] = {};
  std::vector<int> cpus;
  if (api_->cpu_affinity(handle(device_), kWords, mask) != api::kSuccess) return cpus;
  for (unsigned w = 0; w < kWords; ++w)
    for (unsigned b = 0; b < 8 * sizeof(unsigned long); ++b)
      if (mask[w] & (1UL << b)) cpus.push_back(int(w * 8 * sizeof(unsigned long) + b));
  return cpus;
}

std::optional<uint64_t> NvmlDevice::energy_mj() const {
  unsigned long long mj = 0;
  if (api_->energy && api_->energy(handle(device_), &mj) == api::kSuccess) return uint64_t(mj);
  return std::nullopt;
}

double power_between(const NvmlSample& earlier, const NvmlSample& later) {
  const double seconds = std::chrono::duration<double>(later.at - earlier.at).count();
  if (earlier.has_energy && later.has_energy && later.energy_mj >= earlier.energy_mj && seconds > 0)
    return double(later.energy_mj - earlier.energy_mj) / 1e3 / seconds;
  return later.power_watts;
}

NvmlSampler::NvmlSampler(std::unique_ptr<NvmlDevice> device, std::chrono::milliseconds interval)
    : device_(std::move(device)), interval_(interval) {
  device_->fill_static(static_);
  last_ = device_->sample();
  recent_watts_ = last_.power_watts;
  if (last_.has_energy) note_energy(last_.energy_mj, last_.at);
  last_taken_ = static_;
  thread_ = std::thread([this] { run(); });
}

NvmlSampler::~NvmlSampler() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void NvmlSampler::run() {
  // The slow figures (ECC counters walk the driver's tables) once a second, the rest each interval,
  // and the energy counter every kEnergyReadInterval between.
  const auto kStaticEvery = std::chrono::seconds(1);
  const auto tick = std::min<std::chrono::milliseconds>(interval_, kEnergyReadInterval);
  auto static_at = std::chrono::steady_clock::now();
  auto sample_at = static_at;
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    if (now < sample_at) {  // between samples: the energy counter alone, stamped mid-read
      const std::optional<uint64_t> mj = device_->energy_mj();
      note_energy(mj, now + (std::chrono::steady_clock::now() - now) / 2);
      lock.lock();
      wake_.wait_for(lock, tick, [this] { return stop_; });
      continue;
    }
    sample_at = now + interval_;
    const NvmlSample s = device_->sample();
    if (s.has_energy) note_energy(s.energy_mj, s.at);
    GpuHealth fresh;
    const bool refresh = std::chrono::steady_clock::now() - static_at >= kStaticEvery;
    if (refresh) {
      device_->fill_static(fresh);
      static_at = std::chrono::steady_clock::now();
    }
    lock.lock();
    if (refresh) static_ = fresh;
    clock_min_ = n_ ? std::min(clock_min_, s.sm_clock) : s.sm_clock;
    temperature_max_ = n_ ? std::max(temperature_max_, s.temperature) : s.temperature;
    ++n_;
    sm_util_ += s.sm_util;
    mem_util_ += s.mem_util;
    clock_ += s.sm_clock;
    power_ += s.power_watts;
    throttle_ |= s.throttle;
    recent_watts_ = power_between(last_, s);
    last_ = s;
    wake_.wait_for(lock, tick, [this] { return stop_; });
  }
}

void NvmlSampler::note_energy(std::optional<uint64_t> mj, std::chrono::steady_clock::time_point at) {
  if (!mj) return;
  std::lock_guard lock(energy_mutex_);
  energy_mj_ = mj;
  energy_at_ = at;
}

std::optional<double> NvmlSampler::energy_joules() const {
  std::lock_guard lock(energy_mutex_);
  if (!energy_mj_) return std::nullopt;
  const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - energy_at_).count();
  return double(*energy_mj_) / 1e3 + recent_watts() * std::max(since, 0.0);
}

GpuHealth NvmlSampler::take() {
  std::lock_guard lock(mutex_);
  if (n_ == 0) return last_taken_;
  GpuHealth h = static_;
  h.samples = n_;
  h.sm_utilisation_pct = sm_util_ / n_;
  h.mem_utilisation_pct = mem_util_ / n_;
  h.memory_used_bytes = last_.memory_used;
  h.memory_total_bytes = last_.memory_total;
  h.sm_clock_mhz = clock_ / n_;
  h.sm_clock_min_mhz = clock_min_;
  h.temperature_c = temperature_max_;
  h.power_watts = power_ / n_;
  h.throttle_reasons = throttle_;
  n_ = 0;
  sm_util_ = mem_util_ = clock_ = power_ = 0;
  throttle_ = 0;
  last_taken_ = h;
  return h;
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace psched
