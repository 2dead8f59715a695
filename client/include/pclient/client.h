// libpclient: the C++ client of a psched cluster. Connect to a scheduler, look at its workers,
// run array-sum jobs with progress callbacks. Nothing here exposes the wire (Asio, Cap'n Proto):
// the protocol can change without breaking code built against this header.
//
//   pclient::Client client = pclient::Client::connect({.address = "tcp://head:8786"});
//   pclient::Job job;                       // the DeepOps benchmark by default
//   pclient::Result r = client.run(job);    // throws pclient::Error on failure
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace pclient {

// Every failure: a one-line message saying what went wrong.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// run() was stopped by RunOptions::should_cancel; the job was cancelled on the scheduler.
class Cancelled : public Error {
 public:
  using Error::Error;
};

constexpr uint64_t kToEnd = UINT64_MAX;

// An array in files, summed in place of a generated one (docs/design.md, "Stored arrays"). The path
// must be readable by every worker at the same place (a shared filesystem, or the same copy on
// every node); the client reads only its header or metadata, the workers read the data.
struct Input {
  std::string path;                // empty: the job's generator makes the array
  std::string format;              // "" (from the path), "npy", "npy-stack", "raw" or "zarr"
  std::string dtype;               // raw only: float64, float32, int8..int64, uint8..uint64, bool
  std::vector<uint64_t> shape;     // raw only: 1-D, 2-D or N-D (read as 2-D: leading axes flattened)
  uint64_t offset = 0;             // raw only: bytes before element 0
  std::string byte_order;          // raw only: "little" (default) or "big"
};

// An array-sum job: sum (and count, min, max) of scale * x + offset over x[rows][cols] selected
// by [row_start:row_stop:row_step, col_start:col_stop:col_step]. Defaults: the DeepOps benchmark.
// The source is the generator, or `input` when its path is set.
struct Job {
  uint64_t rows = 500000, cols = 500000;
  uint64_t chunk_rows = 10000, chunk_cols = 10000;
  std::string dtype = "float64";      // float64 or float32
  std::string generator = "normal";   // normal(mean=param0, std=param1), uniform(low, high),
                                      // arange(start, step), constant(value=param0)
  double param0 = 10.0, param1 = 1.0;
  uint64_t seed = 0;
  double scale = 1.0, offset = 1.0;
  uint64_t row_start = 0, row_stop = kToEnd, row_step = 2;
  uint64_t col_start = 0, col_stop = kToEnd, col_step = 2;
  bool fused = false;                 // generate only the selected elements (benchmark variant)
  // Workers also sum the elements' squares exactly, so the Result has var() and std(); off, the
  // job costs what a sum-only job always has.
  bool squares = false;
  Input input;                        // an array in files instead of the generator

  uint64_t bytes() const;             // rows * cols * element size: the DeepOps benchmark's x.nbytes
  uint64_t chunks() const;
};

// Throws Error naming the first bad field.
void validate(const Job& job);

// The job that sums the whole array in `input`: its shape, dtype and chunks (a Zarr store's own,
// else whole rows of about 2^24 elements) from its header or metadata, the expression x itself,
// every element selected. Throws Error naming the path and what is wrong (missing, unreadable,
// truncated, an unknown type or format).
Job open_array(const Input& input);

struct ChunkPartial {
  uint64_t chunk = 0;
  double sum = 0;                       // the chunk's exact sum, correctly rounded
  uint64_t count = 0;
  double min = 0, max = 0;
  std::vector<double> exact_terms;      // its exact sum: non-overlapping doubles, largest first
};

struct Progress {
  uint64_t job_id = 0;
  uint64_t chunks_done = 0, chunks_total = 0;
  double running_sum = 0;               // display only
  std::vector<ChunkPartial> partials;   // new partials, when asked for
  // No worker is connected: the job waits for one to join (said at once when the last one
  // leaves, again about every second while none is there, and false once one joins).
  bool no_workers = false;
  // What the scheduler says about the job, each once: a worker holding its chunks stalled.
  std::vector<std::string> notices;
};

// Verify (RunOptions::verify): one copy of a chunk whose copies disagreed.
struct VerifyCopy {
  uint32_t worker_id = 0;
  std::string worker_name, device_name;
  double sum = 0;
  uint64_t count = 0;
  double min = 0, max = 0;
  bool suspect = false;  // the odd one out (or, with no majority, one of those that disagree)
  std::vector<double> exact_terms;  // its exact sum (non-overlapping doubles, largest first)
  // A job that computes squares (Job::squares) only: its exact sum of squares, the same way. Two
  // copies may agree in every other figure and differ here alone.
  bool has_squares = false;
  std::vector<double> squares_terms;
};

// Chunks chunk .. chunk + chunks - 1 whose copies differ: one chunk once the scheduler narrowed
// a block's mismatch down (its copies: the odd worker's and another's), else the block (its two
// copies, or three when a third worker broke the tie).
struct VerifyMismatch {
  uint64_t chunk = 0;
  uint64_t chunks = 1;
  std::vector<VerifyCopy> copies;
  std::string note;  // when not found down to one chunk: why the search stopped
};

// One GPU figure over a job: lowest, mean and highest of the worker's heartbeats while it ran.
struct Figure {
  double min = 0, mean = 0, max = 0;
};

// How one worker did in a job, as the scheduler saw it.
struct DeviceReport {
  uint32_t worker_id = 0;
  std::string name, host, device, uuid;
  uint64_t chunks = 0, bytes = 0;
  double busy_seconds = 0;      // device time the worker reported
  double energy_joules = 0;     // its GPU's energy on the job's chunks (0: no NVML)
  double bytes_per_second = 0;  // bytes / device seconds
  bool slow = false;            // a straggler: 10% or more below the job's median
  std::string cause;            // what NVML shows that explains it ("": nothing seen)
  bool has_gpu = false;         // the figures below are NVML's
  Figure sm_clock_mhz, temperature_c, power_watts, sm_utilisation_pct;
  uint32_t sm_clock_max_mhz = 0;
  uint64_t throttle_reasons = 0;  // NVML clock throttle reason bits seen during the job
  struct Point {
    double seconds = 0;  // since the job was accepted
    float sm_clock_mhz = 0, temperature_c = 0, power_watts = 0, sm_utilisation_pct = 0;
  };
  std::vector<Point> series;  // the worker's heartbeats during the job (at most 512)
};

// One result batch in the job's task stream, on the scheduler's clock from the job's start: it
// ended when the batch reached the scheduler and began its device time earlier.
struct TaskSegment {
  uint32_t worker_id = 0;
  uint64_t first_chunk = 0;
  uint32_t chunks = 0;
  double start_seconds = 0, end_seconds = 0;
};

struct Result {
  uint64_t job_id = 0;
  // The correctly rounded sum of the selected elements: the same bits whatever the chunking,
  // workers, order, failures or backend. NaN if any element was NaN (or both infinities occurred),
  // +-inf if an infinity occurred or the exact sum passes DBL_MAX.
  double sum = 0;
  // The exact sum as non-overlapping doubles, largest first, whose unrounded sum it is (empty for
  // zero; the first is `sum` when finite). NaN/infinite elements are not in it.
  std::vector<double> exact_terms;
  uint32_t nan_count = 0, pos_inf_count = 0, neg_inf_count = 0;  // NaN, +inf, -inf elements
  uint64_t count = 0;
  double min = 0, max = 0;
  double mean() const { return count ? sum / double(count) : 0.0; }
  // Job::squares only: the exact sum of the elements' squares as terms, and its special counts
  // (+inf: a square that overflowed).
  bool has_squares = false;
  std::vector<double> squares_terms;
  uint32_t squares_nan_count = 0, squares_pos_inf_count = 0, squares_neg_inf_count = 0;
  // The variance (correctly rounded) and standard deviation (the correctly rounded square root of
  // the exact variance) with numpy's ddof: the same bits whatever the chunking, workers or backend.
  // NaN when count <= ddof or an element is NaN or infinite; +inf when a square overflowed.
  // Requires has_squares (throws Error otherwise).
  double var(uint32_t ddof = 0) const;
  double std(uint32_t ddof = 0) const;
  uint64_t chunks = 0;
  uint32_t workers = 0;                 // workers that computed at least one chunk
  uint64_t retries = 0;                 // chunks run again after a worker was lost or failed
  double scheduler_seconds = 0;         // accept -> last chunk, measured by the scheduler
  double wall_seconds = 0;              // submit -> result, measured by this client
  uint32_t resubmissions = 0;           // times the job was submitted again after the scheduler
                                        // connection was lost (ConnectOptions::reconnect_ms)
  // Verify: chunks computed twice (or three times) and compared bit for bit; of those, the ones
  // whose copies all ran on one worker (no other to compare against); and the mismatches (counted
  // all, listed up to the first 1000). The result uses each mismatched chunk's majority copy.
  uint64_t verified_chunks = 0, same_worker_chunks = 0, mismatch_count = 0;
  std::vector<VerifyMismatch> mismatches;
  std::vector<DeviceReport> devices;    // per worker that took part
  // The energy the GPUs used on the job's chunks: for each result batch, its device seconds times
  // its GPU's mean power over the last NVML sample interval (from NVML's energy counter), summed
  // over the devices. 0 when no worker that took part has NVML (CPU workers).
  double energy_joules() const;
  std::vector<TaskSegment> timeline;    // when RunOptions::want_timeline
};

// A GPU's health as NVML reports it, aggregated over the worker's last heartbeat interval.
struct GpuHealth {
  std::string uuid, pci_bus_id;
  uint32_t samples = 0;
  double sm_utilisation_pct = 0, mem_utilisation_pct = 0;  // means
  uint64_t memory_used_bytes = 0, memory_total_bytes = 0;
  double sm_clock_mhz = 0;                                 // mean
  uint32_t sm_clock_min_mhz = 0, sm_clock_max_mhz = 0;     // lowest sampled; the device's maximum
  uint32_t temperature_c = 0;                              // highest sampled
  double power_watts = 0, power_limit_watts = 0;
  uint64_t throttle_reasons = 0;                           // NVML clock throttle reason bits
  uint64_t ecc_corrected = 0, ecc_uncorrected = 0;
  bool ecc_supported = false;
  uint32_t pcie_generation = 0, pcie_width = 0, pcie_max_width = 0;
  uint32_t pcie_max_generation = 0;  // the highest generation the link can train to (0: unknown)
  // Row remapping (Ampere on, nvmlDeviceGetRemappedRows): rows remapped for corrected and
  // uncorrected errors since manufacture, a remap waiting for a GPU reset, a remap that failed.
  // remap_supported false: NVML does not say (an older GPU, or no answer), so unknown, not healthy.
  bool remap_supported = false;
  uint32_t remapped_rows_corrected = 0, remapped_rows_uncorrected = 0;
  bool remap_pending = false, remap_failed = false;
  // Page retirement (before Ampere, nvmlDeviceGetRetiredPages): pages retired for repeated
  // single-bit and for double-bit ECC errors, a retirement waiting for the driver to reload.
  // retired_supported false: NVML does not say (Ampere on remaps rows instead), so unknown.
  bool retired_supported = false;
  uint32_t retired_pages_sbe = 0, retired_pages_dbe = 0;
  bool retired_pending = false;
};

struct WorkerInfo {
  uint32_t id = 0;
  std::string name, host, backend, device_name;
  uint32_t pid = 0;
  uint64_t memory_total_bytes = 0, memory_limit_bytes = 0;
  uint32_t compute_major = 0, compute_minor = 0, threads = 0;
  uint32_t slots = 0;            // chunks the worker wants in flight
  uint64_t window_elements = 0;  // ... and elements, when chunks are small (0: slots only)
  uint32_t readers = 0;          // stored-array chunks it reads at once, beside its slots
  uint64_t chunks_done = 0, bytes_reduced = 0;
  double busy_seconds = 0;  // compute time the worker reported so far (its own timings)
  std::string cpu_affinity;  // CPUs the worker is pinned to ("": not pinned)
  std::optional<GpuHealth> gpu;  // none without NVML (CPU workers, no driver library)
};

struct ConnectOptions {
  std::string address;            // tcp://host:port, tls://host:port, host:port or host; or:
  std::string scheduler_file;     // read the address from this file (waiting for it)
  std::string token;              // empty: $PSCHED_TOKEN
  // Mutual TLS (PEM files): the cluster CA, this client's certificate and key. Needed for a tls://
  // address; an address without a scheme uses TLS when they are given; tcp:// with them is refused.
  std::string tls_ca_file, tls_cert_file, tls_key_file;
  std::string name = "pclient";
  int connect_timeout_ms = 5000;
  int scheduler_file_timeout_ms = 30000;
  // While waiting for the scheduler, keep polling this long after each message before sleeping:
  // on a VM, waking an idle CPU costs tens of microseconds per message. 0 = sleep at once;
  // negative: the default of psched's daemons (their --spin-us).
  int spin_us = -1;
  // When the connection to the scheduler is lost while run() waits for a job (psched killed,
  // restarted, or shutting down), keep trying to connect again for this long (re-reading
  // scheduler_file when one is given) and submit the job again; jobs are deterministic, so the
  // result is the same bits. 0: run() throws at once, naming the lost connection.
  int reconnect_ms = 0;
};

struct RunOptions {
  std::function<void(const Progress&)> on_progress;
  bool want_partials = false;
  // Share of chunks (0 to 1) the scheduler computes again on another worker and compares bit for
  // bit; which ones is a draw seeded by the job's seed, the same every run. 0: off.
  double verify = 0;
  bool want_timeline = false;  // Result::timeline: the job's task stream (for reports)
  // Asked every cancel_poll_ms while run() waits (on run()'s thread); once it returns true, run()
  // sends Cancel for the job and throws Cancelled. How a caller that blocks in run() stops it:
  // another thread's flag, or an interpreter's pending Ctrl-C.
  std::function<bool()> should_cancel;
  int cancel_poll_ms = 50;
  // How long the job may wait with no worker connected (the last one left or died, or none had
  // joined) before run() cancels it and throws Error saying so; 0 or less: wait for ever.
  int no_workers_timeout_ms = kDefaultNoWorkersTimeoutMs;
  static constexpr int kDefaultNoWorkersTimeoutMs = 60000;
};

// A running burn-in's state, for the scheduler's dashboard (Client::report_burn; pbench --burn
// sends it about once a second). Bounded: at most 4096 GPUs, names of 128 bytes, reasons of 512;
// the scheduler refuses more.
enum class BurnVerdict { kPass, kWarn, kFail };  // in this order (the wire's)
struct BurnGpuStatus {
  std::string worker;  // the worker's name
  BurnVerdict verdict = BurnVerdict::kPass;
  std::string reason;  // the first failure or warning, one line ("" when passing)
  double bytes_per_second = 0;
  uint64_t chunks = 0;      // computed during the burn
  uint64_t mismatches = 0;  // verify votes its copy lost
  bool gone = false;        // left or lost during the burn
};
struct BurnStatus {
  BurnVerdict verdict = BurnVerdict::kPass;  // the cluster's so far
  double elapsed_seconds = 0, total_seconds = 0;
  bool ended = false;  // the scheduler forgets the burn (as it does when this connection closes)
  std::vector<BurnGpuStatus> gpus;
};

class Client {
 public:
  static Client connect(const ConnectOptions& options);
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();

  std::vector<WorkerInfo> workers();
  // Blocks until at least n workers are registered (or throws after timeout_ms).
  std::vector<WorkerInfo> wait_for_workers(size_t n, int timeout_ms);
  Result run(const Job& job, const RunOptions& options = {});
  // Shows a burn's state on the scheduler's dashboard until the next one, the end, or close().
  // Sent without an answer; one the scheduler refuses is not shown, and its Error (why, one line)
  // comes back to take_refusals(), never failing a job on this connection.
  void report_burn(const BurnStatus& burn);
  // What the scheduler said of unanswered messages it refused (report_burn's), oldest first, since
  // the last call (at most 64 kept).
  std::vector<std::string> take_refusals();
  void close();

  struct Impl;  // the session with the scheduler (client.cpp)

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  Result run_once(const Job& job, const RunOptions& options);
  void reconnect(const std::string& lost, const RunOptions& options);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pclient
