// The CUDA backend's completion thread (cuda_backend_impl.h): waits for each launch in the order
// the dispatchers handed them over, turns its results into ChunkOutcomes for the worker and hands its slot back.
#include <algorithm>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/chunk_grid.h"
#include "core/chunk_runs.h"
#include "worker/cuda/check.h"
#include "worker/cuda/cuda_backend_impl.h"

namespace psched::gpu {

void CudaBackend::complete_loop() {
  const cudaError_t device_status = cudaSetDevice(options_.device);
  if (device_status != cudaSuccess) {
    (void)cudaGetLastError();
    spdlog::error("cuda backend: cudaSetDevice({}) failed on the completion thread: {}",
                  options_.device, cudaGetErrorString(device_status));
  }
  while (true) {
    Launch entry;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      complete_cv_.wait(lock, [&] { return !launches_.empty() || dispatchers_running_ == 0; });
      if (launches_.empty()) break;
      entry = std::move(launches_.front());
      launches_.pop_front();
    }
    finish(entry);
    entry.source.reset();  // its copy is done (or failed): its pages may be unregistered
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --runs_in_flight_;
      if (life_ >= Life::kStopping) continue;  // drain the GPU, deliver nothing more
    }
    try {
      if (!entry.outcomes.empty()) on_done_(entry.outcomes);
    } catch (const std::exception& e) {
      spdlog::error("cuda backend: on_done threw: {}", e.what());
    } catch (...) {
      spdlog::error("cuda backend: on_done threw");
    }
  }
}

// Waits for the entry's GPU work, fills in its outcomes and hands its slot back. A batch's busy
// time is shared evenly by its chunks.
void CudaBackend::finish(Launch& entry) {
  if (entry.slot < 0) return;
  StreamSlot& s = pool_.slot(entry.slot);
  if (entry.launched) {
    const cudaEvent_t stop = s.stop[entry.stop_event];
    const cudaError_t status = cudaEventSynchronize(stop);
    if (status == cudaSuccess) {
      const double busy = take_busy_ms(s, stop) / 1e3 / double(entry.outcomes.size());
      const JobSpec& spec = *entry.spec;
      WideCopies wide;
      for (size_t i = 0; i < entry.outcomes.size(); ++i) {
        ChunkOutcome& o = entry.outcomes[i];
        o.partial.count = selected_elements(spec, o.chunk, 1);  // the geometry alone, no generator keys
        try {
          if (o.partial.count > 0) fill_partial(s, i, entry.outcomes.size(), spec.squares, wide, o.partial);
          if (entry.residual && !entry.residual->finite_is_zero()) add_residual(*entry.residual, o.partial);
        } catch (const CudaError& e) {
          o.ok = false;
          o.error = e.what();
          o.device_lost = cuda_error_is_sticky(e.code());
        }
        o.busy_seconds = busy;
      }
    } else {
      (void)cudaGetLastError();
      const std::string error =
          describe_cuda_error(status, "cudaEventSynchronize(chunk done)", __FILE__, __LINE__);
      for (ChunkOutcome& o : entry.outcomes) {
        o.ok = false;
        o.error = error;
        o.device_lost = cuda_error_is_sticky(status);
      }
      latest_stop_ = nullptr;
    }
  } else {
    // The launch failed part way: let whatever reached the stream finish before reuse.
    if (cudaStreamSynchronize(s.stream) != cudaSuccess) (void)cudaGetLastError();
    latest_stop_ = nullptr;  // this slot's stop events may have been recorded out of turn
  }
  pool_.release(entry.slot);
}

namespace {

// Copies `count` device values back into `into`, once (left empty if the copy fails: the next
// wide result retries).
template <typename T>
void copy_back_once(const T* device, size_t count, cudaStream_t stream, std::vector<T>& into) {
  if (!into.empty()) return;
  std::vector<T> copy(count);
  PSCHED_CUDA_CHECK(cudaMemcpyAsync(copy.data(), device, sizeof(T) * count, cudaMemcpyDeviceToHost, stream));
  PSCHED_CUDA_CHECK(cudaStreamSynchronize(stream));
  into = std::move(copy);
}

}  // namespace

// Result i of the slot's finished launch of `count` chunks: min, max, the exact sum and the sum
// rounded once, and the exact sum of squares for a var/std job. A wide sum is read from the
// chunk's accumulator, which stays in the slot until it is released: the first wide result of a
// launch copies all `count` of them into `wide`, so data whose every sum is wide costs one copy per
// launch, not one per chunk.
void CudaBackend::fill_partial(const StreamSlot& s, size_t i, size_t count, bool squares, WideCopies& wide,
                               CompactPartial& partial) {
  const ChunkResult& r = s.host_results[i];
  partial.min = r.min;
  partial.max = r.max;
  if (r.wide) copy_back_once(s.accumulators, count, s.stream, wide.sums);
  partial.exact = exact_terms_from(r, r.wide ? &wide.sums[i] : nullptr);
  partial.sum = partial.exact.rounded();
  if (squares) {
    const CompactExact& q = s.host_square_results[i];
    if (q.wide) copy_back_once(s.square_accumulators, count, s.stream, wide.squares);
    partial.has_squares = true;
    partial.squares = exact_terms_from(q, q.wide ? &wide.squares[i] : nullptr);
  }
}

// A chunk's exact sum plus what rounding its 64-bit integers to doubles lost (ChunkReader): exact.
void CudaBackend::add_residual(ExactSum residual, CompactPartial& partial) {
  ExactSum total;
  total.add_terms(partial.exact.data(), partial.exact.size());
  total.normalize();
  residual.normalize();
  total.add(residual);
  total.nan = partial.exact.nan;
  total.pos_inf = partial.exact.pos_inf;
  total.neg_inf = partial.exact.neg_inf;
  partial.exact = ExactTerms(total);
  partial.sum = partial.exact.rounded();
}

// GPU time of this chunk not already counted for earlier chunks: from the later of its start and
// the latest stop seen so far, to its stop (0 when it ended before that latest stop: the streams
// overlap, and a chunk may finish before the one dispatched ahead of it). Each chunk adds at most
// what the latest stop advanced, so a worker's busy seconds never exceed the GPU's wall time.
// Moves latest_stop_ on. latest_stop_ is intact when read: its slot's next chunk (same stream) ends
// after it, and is finished (moving latest_stop_ on) before that slot can record this event again.
double CudaBackend::take_busy_ms(const StreamSlot& slot, cudaEvent_t stop) {
  float total = 0;
  if (cudaEventElapsedTime(&total, slot.start, stop) != cudaSuccess) {
    (void)cudaGetLastError();
    latest_stop_ = nullptr;
    return 0;
  }
  if (latest_stop_ != nullptr && latest_stop_ != stop) {
    float since_latest = 0;
    if (cudaEventElapsedTime(&since_latest, latest_stop_, stop) != cudaSuccess) {
      (void)cudaGetLastError();
    } else if (since_latest < 0) {
      return 0;  // all of it lies before the latest stop: counted already
    } else if (since_latest < total) {
      total = since_latest;
    }
  }
  latest_stop_ = stop;
  return std::max(0.0, double(total));
}

}  // namespace psched::gpu
