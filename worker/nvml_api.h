// The few NVML declarations psched uses, copied in meaning from the driver's nvml.h (NVML API
// version 11+, CUDA 11-13 drivers): types, enum values and the prototypes of the functions that
// worker/nvml.cpp looks up with dlsym in libnvidia-ml.so.1. No build dependency on the driver or
// on nvml.h; the library is found at run time or not at all.
#pragma once

#include <cstdint>

namespace psched::nvml_api {

using Return = int;  // nvmlReturn_t
constexpr Return kSuccess = 0;              // NVML_SUCCESS
constexpr Return kErrorNotSupported = 3;    // NVML_ERROR_NOT_SUPPORTED

using Device = struct nvmlDevice_st*;       // nvmlDevice_t: an opaque handle

struct Utilization {                        // nvmlUtilization_t
  unsigned int gpu;                         // % of time a kernel ran over the last sample period
  unsigned int memory;                      // % of time device memory was read or written
};

struct Memory {                             // nvmlMemory_t (v1)
  unsigned long long total, free, used;     // bytes
};

constexpr int kClockSm = 1;                 // NVML_CLOCK_SM (nvmlClockType_t)
constexpr int kTemperatureGpu = 0;          // NVML_TEMPERATURE_GPU (nvmlTemperatureSensors_t)
constexpr int kMemoryErrorCorrected = 0;    // NVML_MEMORY_ERROR_TYPE_CORRECTED
constexpr int kMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;             // NVML_VOLATILE_ECC (nvmlEccCounterType_t)
constexpr unsigned kUuidBufferSize = 96;    // NVML_DEVICE_UUID_V2_BUFFER_SIZE

// Prototypes (all return nvmlReturn_t; enums are passed as int, their C ABI).
using InitFn = Return (*)();                                          // nvmlInit_v2
using ShutdownFn = Return (*)();                                      // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                        // nvmlErrorString
using HandleByPciBusIdFn = Return (*)(const char*, Device*);         // nvmlDeviceGetHandleByPciBusId_v2
using HandleByIndexFn = Return (*)(unsigned int, Device*);           // nvmlDeviceGetHandleByIndex_v2
using UuidFn = Return (*)(Device, char*, unsigned int);              // nvmlDeviceGetUUID
using UtilizationFn = Return (*)(Device, Utilization*);              // nvmlDeviceGetUtilizationRates
using MemoryFn = Return (*)(Device, Memory*);                        // nvmlDeviceGetMemoryInfo
using ClockFn = Return (*)(Device, int, unsigned int*);              // nvmlDeviceGetClockInfo,
                                                                      // nvmlDeviceGetMaxClockInfo
using TemperatureFn = Return (*)(Device, int, unsigned int*);        // nvmlDeviceGetTemperature
using UintFn = Return (*)(Device, unsigned int*);                    // nvmlDeviceGetPowerUsage (mW),
                                                                      // nvmlDeviceGetEnforcedPowerLimit
                                                                      // (mW), nvmlDeviceGetCurrPcieLink
                                                                      // Generation/Width,
                                                                      // nvmlDeviceGetMaxPcieLinkWidth,
                                                                      // nvmlDeviceGetMaxPcieLinkGeneration
using ThrottleFn = Return (*)(Device, unsigned long long*);          // nvmlDeviceGetCurrentClocks
                                                                      // ThrottleReasons
using EccFn = Return (*)(Device, int, int, unsigned long long*);     // nvmlDeviceGetTotalEccErrors
using CpuAffinityFn = Return (*)(Device, unsigned int, unsigned long*);  // nvmlDeviceGetCpuAffinity
using RemappedRowsFn = Return (*)(Device, unsigned int*, unsigned int*, unsigned int*,
                                  unsigned int*);                    // nvmlDeviceGetRemappedRows
                                                                      // (Ampere on)
using RetiredPagesFn = Return (*)(Device, int, unsigned int*,
                                  unsigned long long*);              // nvmlDeviceGetRetiredPages
using RetiredPendingFn = Return (*)(Device, int*);                   // ..RetiredPagesPendingStatus
constexpr Return kInsufficientSize = 7;       // NVML_ERROR_INSUFFICIENT_SIZE
constexpr int kRetiredForSingleBitErrors = 0;  // NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
constexpr int kRetiredForDoubleBitError = 1;   // NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
using EnergyFn = Return (*)(Device, unsigned long long*);            // nvmlDeviceGetTotalEnergyConsumption
                                                                      // (mJ since the driver loaded; Volta on)

}  // namespace psched::nvml_api
