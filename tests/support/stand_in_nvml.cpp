// A stand-in for the driver's libnvidia-ml.so.1, for machines without a GPU (CI): the entry points
// worker/nvml.cpp looks up, with the C ABI of nvml.h, answering fixed plausible figures for one
// GPU. Environment variables change what it reports, so tests can make a GPU throttle or lose
// PCIe lanes: STAND_IN_NVML_THROTTLE (reason bits), STAND_IN_NVML_SM_CLOCK (MHz),
// STAND_IN_NVML_PCIE_WIDTH, STAND_IN_NVML_PCIE_GEN (the current generation; the maximum is 5),
// STAND_IN_NVML_ECC_UNCORRECTED_FILE (below), STAND_IN_NVML_NO_GPU (no
// device found). Only tests load it, through
// pcuda-worker's test switch PSCHED_TEST_NVML_LIBRARY.
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace {

struct Utilization {
  unsigned int gpu, memory;
};
struct Memory {
  unsigned long long total, free, used;
};
int g_device = 0;  // the handle's target: never dereferenced by the caller
unsigned env_or(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  return v ? unsigned(std::strtoul(v, nullptr, 0)) : fallback;
}
// Uncorrected ECC errors: the number in the file STAND_IN_NVML_ECC_UNCORRECTED_FILE names (none
// while it is absent), so that a test can make them rise while a worker runs.
unsigned long long uncorrected_errors() {
  const char* path = std::getenv("STAND_IN_NVML_ECC_UNCORRECTED_FILE");
  FILE* f = path ? std::fopen(path, "r") : nullptr;
  if (!f) return 0;
  unsigned long long n = 0;
  if (std::fscanf(f, "%llu", &n) != 1) n = 0;
  std::fclose(f);
  return n;
}
constexpr int kSuccess = 0, kNotFound = 6, kUninitialized = 1;
bool g_initialised = false;

}  // namespace

extern "C" {

int nvmlInit_v2() {
  g_initialised = true;
  return kSuccess;
}
int nvmlShutdown() {
  g_initialised = false;
  return kSuccess;
}
const char* nvmlErrorString(int r) { return r == kNotFound ? "Not Found" : "Stand-in error"; }
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  if (!g_initialised) return kUninitialized;
  if (std::getenv("STAND_IN_NVML_NO_GPU") || !bus_id || !*bus_id) return kNotFound;
  *device = &g_device;
  return kSuccess;
}
int nvmlDeviceGetUUID(void*, char* uuid, unsigned length) {
  std::snprintf(uuid, length, "GPU-5a11d1e0-0000-4000-8000-%012u", env_or("STAND_IN_NVML_ID", 1));
  return kSuccess;
}
int nvmlDeviceGetUtilizationRates(void*, Utilization* u) {
  u->gpu = 97;
  u->memory = 64;
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void*, Memory* m) {
  m->total = 80ull << 30;
  m->used = 12ull << 30;
  m->free = m->total - m->used;
  return kSuccess;
}
int nvmlDeviceGetClockInfo(void*, int, unsigned* mhz) {
  *mhz = env_or("STAND_IN_NVML_SM_CLOCK", 1755);
  return kSuccess;
}
int nvmlDeviceGetMaxClockInfo(void*, int, unsigned* mhz) {
  *mhz = 1980;
  return kSuccess;
}
int nvmlDeviceGetTemperature(void*, int, unsigned* c) {
  *c = 61;
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void*, unsigned* mw) {
  *mw = 412000;
  return kSuccess;
}
int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned* mw) {
  *mw = 700000;
  return kSuccess;
}
int nvmlDeviceGetCurrPcieLinkGeneration(void*, unsigned* g) {
  *g = env_or("STAND_IN_NVML_PCIE_GEN", 5);
  return kSuccess;
}
int nvmlDeviceGetCurrPcieLinkWidth(void*, unsigned* w) {
  *w = env_or("STAND_IN_NVML_PCIE_WIDTH", 16);
  return kSuccess;
}
int nvmlDeviceGetMaxPcieLinkWidth(void*, unsigned* w) {
  *w = 16;
  return kSuccess;
}
int nvmlDeviceGetMaxPcieLinkGeneration(void*, unsigned* g) {
  *g = 5;
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(void*, unsigned long long* r) {
  *r = env_or("STAND_IN_NVML_THROTTLE", 0);
  return kSuccess;
}
int nvmlDeviceGetTotalEccErrors(void*, int type, int, unsigned long long* n) {
  *n = type == 0 ? 3 : uncorrected_errors();  // three corrected
  return kSuccess;
}
// Remapped rows: uncorrected ones the number in STAND_IN_NVML_REMAPPED_ROWS_FILE (none while it
// is absent, so a test can make them rise), a pending remap with STAND_IN_NVML_REMAP_PENDING=1,
// NOT_SUPPORTED (a GPU before Ampere) with STAND_IN_NVML_NO_REMAP=1.
int nvmlDeviceGetRemappedRows(void*, unsigned* corrected, unsigned* uncorrected, unsigned* pending,
                              unsigned* failed) {
  if (env_or("STAND_IN_NVML_NO_REMAP", 0)) return 3;  // NVML_ERROR_NOT_SUPPORTED
  unsigned rows = 0;
  if (const char* path = std::getenv("STAND_IN_NVML_REMAPPED_ROWS_FILE"))
    if (FILE* f = std::fopen(path, "r")) {
      if (std::fscanf(f, "%u", &rows) != 1) rows = 0;
      std::fclose(f);
    }
  *corrected = 0;
  *uncorrected = rows;
  *pending = env_or("STAND_IN_NVML_REMAP_PENDING", 0);
  *failed = 0;
  return kSuccess;
}
// The energy counter (mJ) of a GPU drawing the 412 W that nvmlDeviceGetPowerUsage reports since
// the machine booted: so power x time is exactly 412 W x the time between two readings.
// Retired pages (GPUs before Ampere): NOT_SUPPORTED unless STAND_IN_NVML_NO_REMAP=1 (an older GPU);
// then double-bit pages the number in STAND_IN_NVML_RETIRED_PAGES_FILE (none while it is absent),
// none for single-bit errors, a pending retirement with STAND_IN_NVML_RETIRED_PENDING=1.
int nvmlDeviceGetRetiredPages(void*, int cause, unsigned* count, unsigned long long* addresses) {
  if (!env_or("STAND_IN_NVML_NO_REMAP", 0)) return 3;  // NVML_ERROR_NOT_SUPPORTED
  unsigned pages = 0;
  if (const char* path = std::getenv("STAND_IN_NVML_RETIRED_PAGES_FILE"); path && cause == 1)
    if (FILE* f = std::fopen(path, "r")) {
      if (std::fscanf(f, "%u", &pages) != 1) pages = 0;
      std::fclose(f);
    }
  const unsigned room = *count;
  *count = pages;
  for (unsigned k = 0; k < pages && k < room; ++k) addresses[k] = 0x1000ull * (k + 1);
  return pages > room ? 7 : kSuccess;  // NVML_ERROR_INSUFFICIENT_SIZE
}
int nvmlDeviceGetRetiredPagesPendingStatus(void*, int* pending) {
  if (!env_or("STAND_IN_NVML_NO_REMAP", 0)) return 3;
  *pending = env_or("STAND_IN_NVML_RETIRED_PENDING", 0);
  return kSuccess;
}
int nvmlDeviceGetTotalEnergyConsumption(void*, unsigned long long* mj) {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  *mj = (unsigned long long)(t.tv_sec) * 412000ull + (unsigned long long)(t.tv_nsec) * 412ull / 1000000ull;
  return kSuccess;
}
int nvmlDeviceGetCpuAffinity(void*, unsigned words, unsigned long* mask) {
  std::memset(mask, 0, words * sizeof(unsigned long));
  mask[0] = 0x3;  // CPUs 0 and 1
  return kSuccess;
}

}  // extern "C"
