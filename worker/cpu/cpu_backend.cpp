#include "worker/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <algorithm>
#include <deque>
#include <fstream>
#include <unistd.h>
#include <mutex>
#include <thread>
#include <vector>

#include "net/event_loop.h"
#include "storage/chunk_reader.h"
#include "worker/cpu/reduce.h"
#include "worker/run_queue.h"

namespace psched {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "cpu";
}

uint64_t total_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options) : options_(options) {
    if (options_.threads <= 0) options_.threads = int(std::max(1u, std::thread::hardware_concurrency()));
    info_.backend = "cpu";
    info_.device_name = cpu_model();
    info_.memory_total_bytes = total_memory_bytes();
    info_.memory_limit_bytes = options_.memory_limit_bytes;
    info_.threads = options_.threads;
  }
  ~CpuBackend() override { stop(); }

  DeviceInfo info() const override { return info_; }
  int slots() const override { return 2 * options_.threads; }
  // A quarter of a million elements per thread: ~1 ms of normal() per thread, enough to hide a
  // round trip; chunks of that size or more get slots() alone. A stored array's elements cost a
  // quarter of that or less: the scheduler deepens its windows (kStoredWindowScale, window_depth.h).
  uint64_t window_elements() const override { return uint64_t(options_.threads) << 18; }

  void start(OnDone on_done) override {
    on_done_ = std::move(on_done);
    for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { run(); });
  }

  void enqueue(ChunkTask task) override { enqueue_run(task.job_id, task.chunk, 1, task.spec); }

  void enqueue_run(uint64_t job_id, uint64_t first, uint64_t count,
                   const std::shared_ptr<const JobSpec>& spec) override {
    if (count == 0) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = std::find_if(queue_.begin(), queue_.end(), [&](const JobRuns& j) { return j.job_id == job_id; });
      if (it == queue_.end()) it = queue_.insert(queue_.end(), JobRuns{job_id, {}});
      it->runs.push_back(Run{first, first + count, spec});
      has_work_.store(true, std::memory_order_release);
    }
    if (count == 1) {
      wake_.notify_one();
    } else {
      wake_.notify_all();
    }
  }

  void drop_job(uint64_t job_id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(queue_, [&](const JobRuns& j) { return j.job_id == job_id; });
    has_work_.store(!queue_.empty(), std::memory_order_release);
  }

  std::vector<ChunkRange> give_back(uint64_t job_id, uint64_t first, uint64_t count) override {
    std::vector<ChunkRange> out;
    std::lock_guard<std::mutex> lock(mutex_);
    auto job = std::find_if(queue_.begin(), queue_.end(), [&](const JobRuns& j) { return j.job_id == job_id; });
    if (job == queue_.end()) return out;
    const uint64_t end = first + count;
    if (const Run& head = job->runs.front(); head.shared) {
      // The head chunk's first bands are taken: it is started, and stays (the cuts around it).
      const uint64_t started = head.next;
      cut_runs(job->runs, [](const Run&) { return true; }, first, std::min(end, started), out);
      cut_runs(job->runs, [](const Run&) { return true; }, std::max(first, started + 1), end, out);
      for (size_t i = 1; i < job->runs.size(); ++i) job->runs[i].shared.reset();  // a cut's copy of the head
    } else {
      cut_runs(job->runs, [](const Run&) { return true; }, first, end, out);
    }
    if (job->runs.empty()) queue_.erase(job);
    has_work_.store(!queue_.empty(), std::memory_order_release);
    return out;
  }

  // Resident memory less its file pages: a stored array's mapped pages (storage/mapped_file.h) are
  // the page cache's, not the worker's.
  uint64_t memory_used_bytes() const override {
    std::ifstream statm("/proc/self/statm");
    uint64_t size_pages = 0, resident_pages = 0, shared_pages = 0;
    statm >> size_pages >> resident_pages >> shared_pages;
    return (resident_pages - std::min(resident_pages, shared_pages)) * uint64_t(sysconf(_SC_PAGESIZE));
  }

  void stop() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      queue_.clear();
      has_work_.store(true, std::memory_order_release);  // spinning threads look, and stop
    }
    wake_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

 private:
  void run() {
    ChunkBuffer scratch;
    ChunkReader reader;  // stored arrays: this thread's open file and staging buffer
    ChunkTask task;  // its spec is kept from chunk to chunk: copied only when the job changes
    std::shared_ptr<Shared> shared;  // the chunk's bands, when the chunk is taken a band at a time
    uint32_t band = 0;
    std::vector<ChunkOutcome> done;  // one chunk's outcome as on_done takes it, reused
    for (;;) {
      // Poll a moment before sleeping: the next run usually arrives within a round trip, and
      // waking a sleeping thread (on a VM especially) costs more than that.
      spin_until([&] { return has_work_.load(std::memory_order_acquire); }, options_.spin);
      // Going to sleep: hold no file (a stored array deleted meanwhile gets its disk space back).
      if (!has_work_.load(std::memory_order_acquire)) reader.release();
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        JobRuns& job = queue_.front();
        Run& front = job.runs.front();
        task.job_id = job.job_id;
        task.chunk = front.next;
        if (task.spec != front.spec) task.spec = front.spec;
        // A big stored chunk is taken a band at a time (Shared): the threads free at a job's end
        // share its last chunks instead of waiting for the few threads that hold them.
        if (!front.shared) {
          const uint32_t bands = options_.band_bytes == 0 ? 1 : stored_bands(*task.spec, task.chunk, options_.band_bytes);
          if (bands > 1) front.shared = std::make_shared<Shared>(bands);
        }
        shared = front.shared;
        band = shared ? shared->taken++ : 0;
        if (!shared || shared->taken == shared->bands) {
          front.shared.reset();
          ++front.next;
        }
        if (front.next == front.end) job.runs.pop_front();
        if (job.runs.empty()) {
          queue_.pop_front();
          has_work_.store(!queue_.empty(), std::memory_order_release);
        } else {
          // Jobs take turns a chunk at a time (one JobRuns each): a small job queued behind 65536
          // chunks of another starts at once instead of after them.
          next_job_takes_its_turn(queue_, task.job_id);
        }
      }
      ChunkOutcome out;
      PartialSum band_partial;
      out.job_id = task.job_id;
      out.chunk = task.chunk;
      const auto t0 = std::chrono::steady_clock::now();
      const uint64_t buffer_bytes = task.spec->chunk_rows * task.spec->chunk_cols * sizeof(double);
      if (!task.spec->fused && options_.memory_limit_bytes != 0 &&
          buffer_bytes * uint64_t(options_.threads) > options_.memory_limit_bytes) {
        out.ok = false;
        out.error = fmt::format("chunk of {} MiB x {} threads does not fit in memory limit {} MiB",
                                buffer_bytes >> 20, options_.threads,
                                options_.memory_limit_bytes >> 20);
      } else if (options_.test_fault_on_chunk >= 0 &&
                 task.chunk == uint64_t(options_.test_fault_on_chunk)) {
        out.ok = false;
        out.error = "simulated device fault (PSCHED_TEST_DEVICE_FAULT_ON_CHUNK)";
        out.device_lost = true;
      } else {
        try {
          if (shared) {
            const ChunkBox box = stored_band(*task.spec, task.chunk, band, shared->bands);
            if (Status st = reduce_stored_band_cpu(*task.spec, task.chunk, box, reader, scratch, band_partial); !st) {
              out.ok = false;
              out.error = st.message();
            }
          } else if (task.spec->stored.stored()) {
            if (Status st = reduce_stored_chunk_cpu(*task.spec, task.chunk, reader, scratch, out.partial); !st) {
              out.ok = false;
              out.error = st.message();
            }
          } else {
            out.partial = reduce_chunk_cpu(*task.spec, task.chunk, scratch);
          }
        } catch (const std::exception& e) {
          out.ok = false;
          out.error = fmt::format("cpu backend: {}", e.what());
        }
      }
      if (options_.test_delay_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(options_.test_delay_ms));
      out.busy_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (shared && !shared->done(band, out, band_partial)) continue;  // another thread's band ends it
      shared.reset();
      done.clear();
      done.push_back(std::move(out));
      on_done_(done);
    }
  }

  // A chunk taken a band at a time: the bands' partials merged as they end (exactly, so the
  // order does not matter), and the thread whose band ends last reports the chunk.
  struct Shared {
    explicit Shared(uint32_t n) : bands(n) {}
    const uint32_t bands;
    uint32_t taken = 0;  // under the backend's mutex_
    // Band `band` ended as `out` says (its partial in `partial` when ok): true for the last, whose
    // `out` becomes the chunk's outcome (busy time the bands' sum, the failed band first in order's
    // error where any failed).
    bool done(uint32_t band, ChunkOutcome& out, const PartialSum& partial) {
      std::lock_guard<std::mutex> lock(mutex);
      if (out.ok) merge(sum, partial);
      else if (band < failed_band) failed_band = band, error = out.error, device_lost = out.device_lost;
      busy += out.busy_seconds;
      if (++ended < bands) return false;
      out.ok = failed_band == kNone;
      out.error = error;
      out.device_lost = device_lost;
      out.busy_seconds = busy;
      if (out.ok) out.partial = compact(sum);
      return true;
    }
    std::mutex mutex;
    static constexpr uint32_t kNone = ~uint32_t{0};
    uint32_t ended = 0, failed_band = kNone;
    PartialSum sum;
    std::string error;
    bool device_lost = false;
    double busy = 0;
  };

  CpuBackendOptions options_;
  DeviceInfo info_;
  OnDone on_done_;
  std::mutex mutex_;
  std::condition_variable wake_;
  // Queued chunks as runs of one job (a TaskBatch's range is one run, taken a chunk at a time),
  // kept per job; the jobs take turns. Not the CUDA backend's flat RunQueue (worker/run_queue.h):
  // a turn after every chunk moves the job's entries at the front to the back, here one entry, there
  // every run of the job, so a turn would cost as many moves as the job has runs apart.
  struct Run {
    uint64_t next, end;
    std::shared_ptr<const JobSpec> spec;
    std::shared_ptr<Shared> shared = nullptr;  // chunk `next`, when its first bands are taken
  };
  struct JobRuns {
    uint64_t job_id;
    std::deque<Run> runs;
  };
  std::deque<JobRuns> queue_;
  std::atomic<bool> has_work_{false};  // !queue_.empty() || stopping_, for polling without the lock
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace psched
