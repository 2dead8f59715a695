// The CUDA backend's dispatcher threads (cuda_backend_impl.h): each takes the next big chunk or
// batch of small chunks from the queue, the queued jobs in turn, and launches it on a free stream
// slot; a stored array's chunk is read first, by the dispatcher's own reader.
#include <algorithm>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/chunk_grid.h"
#include "core/plural.h"
#include "worker/cuda/check.h"
#include "worker/cuda/cuda_backend_impl.h"

namespace psched::gpu {
namespace {

// A stored chunk bigger than two of these goes through pinned memory in pieces of rows, each copied
// to the device while the next is read: pinning is paid once per worker and runs at about 2.5
// GB/s whatever the thread (an H200 host, bench/README.md), so whole-chunk staging for 16 readers
// of 160 MB chunks cost a fresh worker's first job a second. A piece is one thread's read (under
// ChunkReader::kParallelReadBytes, it is never split), and a small one stays in the host's caches
// between its read and its copy: a 24 GB .npy in the page cache on the four-H200 host, in turns,
// one GPU 44.6-45.4 GB/s with 2 MiB pieces against 40.6-41.7 with 8 MiB, two GPUs 73-78.5 against
// 63-64; 1 MiB pieces were slower on one GPU (31-39: a copy and an event a MiB). A Zarr chunk is
// decompressed whole into its staging: blosc pieces (ChunkReader::reads_pieces) made a fresh
// worker's first job 1.6 x faster (less to pin) but warm jobs 0.93 x, each piece's blocks going
// through blosc_getitem's own buffer (one H200, 16 cores, bench/README.md).
constexpr uint64_t kStagingPieceBytes = uint64_t{2} << 20;

// The pinned staging a slot needs for a job's chunks (buffer_bytes: its full chunk as copied).
uint64_t staging_bytes(const JobSpec& spec, uint64_t row_bytes, uint64_t buffer_bytes) {
  if (spec.stored.kind == SourceKind::kZarr || buffer_bytes <= 2 * kStagingPieceBytes) return buffer_bytes;
  return std::min(buffer_bytes, 2 * std::max(kStagingPieceBytes, row_bytes));
}

// A chunk narrower than this (its rows, as bytes) is staged even where its pages are registered:
// rows of 20 KB copied from registered pages 80 KB apart ran at 41 GB/s against the staging's 46
// (one H200), where rows of 80 KB ran at 52 (whole rows, one copy) and 50 (every other row).
constexpr uint64_t kMinRegisteredRowBytes = uint64_t{64} << 10;

// cudaMemcpy2DAsync's pitches stay under this (the device's limit is 2^31 or more); rows further
// apart are copied one by one.
constexpr uint64_t kMaxCopyPitch = uint64_t{1} << 30;

// The chunk's selected rows from a file's registered pages (`src0`: the byte of the element at the
// first selected row and the box's first column, rows `ld` elements apart) to `buffer`, laid out as
// ChunkReader::read lays them (row r at (r - box.row0) * box.cols). A copy from host memory must
// lie in one registration, so each run of rows inside one block is one 2D copy, and a row across
// a block's end is copied in two.
void copy_registered(const RegisteredFile& file, uint64_t src0, uint64_t ld, const ChunkWork& w, uint64_t step,
                     void* buffer, cudaStream_t stream) {
  const uint64_t block = file.block_bytes();
  const uint64_t eb = w.element_bytes();  // as the device takes them: float64, or as stored
  const uint64_t width = w.box.cols * eb;
  const uint64_t spitch = step * ld * eb, dpitch = step * width;
  const bool pitched = spitch <= kMaxCopyPitch && dpitch <= kMaxCopyPitch;
  const unsigned char* base = file.data();
  unsigned char* dst0 = static_cast<unsigned char*>(buffer) + (w.rows.first - w.box.row0) * width;
  const uint64_t n = w.rows.count;
  for (uint64_t i = 0; i < n;) {
    const uint64_t from = src0 + i * spitch;
    const uint64_t block_end = (from / block + 1) * block;
    if (from + width <= block_end) {  // rows i .. j - 1 end inside this block
      const uint64_t j = pitched ? std::min(n, (block_end - width - src0) / spitch + 1) : i + 1;
      if (j - i == 1)
        PSCHED_CUDA_CHECK(cudaMemcpyAsync(dst0 + i * dpitch, base + from, width, cudaMemcpyHostToDevice, stream));
      else
        PSCHED_CUDA_CHECK(cudaMemcpy2DAsync(dst0 + i * dpitch, dpitch, base + from, spitch, width, j - i,
                                            cudaMemcpyHostToDevice, stream));
      i = j;
      continue;
    }
    for (uint64_t done = 0; done < width;) {  // a row across blocks, a block's part at a time
      const uint64_t p = from + done;
      const uint64_t bytes = std::min(width - done, (p / block + 1) * block - p);
      PSCHED_CUDA_CHECK(cudaMemcpyAsync(dst0 + i * dpitch + done, base + p, bytes, cudaMemcpyHostToDevice, stream));
      done += bytes;
    }
    ++i;
  }
}

}  // namespace

// Dispatcher thread: the first takes every run in the queue's turn order; the others
// (stored_only) wait for a run of a stored array at the front, so several of its chunks are read
// at once while a generated job's launches keep one thread and their order.
void CudaBackend::dispatch_loop(bool stored_only) {
  const cudaError_t device_status = cudaSetDevice(options_.device);
  ChunkReader reader;
  reader.set_read_threads(reader_threads_);
  const auto stored_front = [&] { return !queue_.empty() && queue_.front().spec->stored.stored(); };
  while (true) {
    uint64_t job_id = 0, first = 0;
    uint32_t count = 0;
    std::shared_ptr<const JobSpec> spec;
    bool wake_readers = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const auto ready = [&] { return life_ >= Life::kStopping || (stored_only ? stored_front() : !queue_.empty()); };
      if (!ready()) {  // going idle: hold no file (a deleted one's space comes back), not under the lock
        lock.unlock();
        reader.release();
        lock.lock();
      }
      (stored_only ? readers_cv_ : dispatch_cv_).wait(lock, ready);
      if (life_ >= Life::kStopping) break;
      Run taken = queue_.take(batch_chunks(*queue_.front().spec), Turns::kNextJob);
      job_id = taken.job_id;
      first = taken.next;
      count = uint32_t(taken.end - taken.next);
      spec = std::move(taken.spec);
      ++runs_in_flight_;  // until the completer has finished its launch
      wake_readers = dispatchers_ > 1 && stored_front();
    }
    if (wake_readers) readers_cv_.notify_all();
    Launch entry;
    if (device_status == cudaSuccess) {
      entry = launch(job_id, first, count, spec, reader);
    } else {
      entry.outcomes.resize(count);
      for (uint32_t i = 0; i < count; ++i) {
        ChunkOutcome& o = entry.outcomes[i];
        o.job_id = job_id;
        o.chunk = first + i;
        o.ok = false;
        o.error = describe_cuda_error(device_status, "cudaSetDevice", __FILE__, __LINE__);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      launches_.push_back(std::move(entry));
    }
    complete_cv_.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --dispatchers_running_;
  }
  complete_cv_.notify_all();
}

// Launches chunks first .. first + count - 1 of one job (count > 1 only for batched jobs): their
// generate (unless fused) and exact reduce, then the copy of their compact results.
Launch CudaBackend::launch(uint64_t job_id, uint64_t first, uint32_t count,
                           const std::shared_ptr<const JobSpec>& spec_ptr, ChunkReader& reader) {
  Launch entry;
  entry.spec = spec_ptr;
  entry.outcomes.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    entry.outcomes[i].job_id = job_id;
    entry.outcomes[i].chunk = first + i;
  }
  // Every chunk of the launch fails alike (the entry keeps its slot: the completer drains it).
  auto fail = [&](const std::string& error, bool device_lost = false) {
    for (ChunkOutcome& o : entry.outcomes) {
      o.ok = false;
      o.error = error;
      o.device_lost = device_lost;
    }
  };
  try {
    const JobSpec& spec = *spec_ptr;
    for (ChunkOutcome& o : entry.outcomes) o.partial.has_squares = spec.squares;  // (zero until filled)
    const uint64_t chunks = spec.chunks();
    if (first >= chunks || count > chunks - first) {
      fail(count == 1 ? fmt::format("chunk {} is out of range (the job has {})", first, counted(chunks, "chunk"))
                      : fmt::format("chunks {}..{} are out of range (the job has {})", first, first + count - 1,
                                    counted(chunks, "chunk")));
      return entry;
    }
    const bool batch = batched(spec);
    const bool stored = spec.stored.stored();
    BatchWork work{chunk_work(spec, first), count, spec.chunk_rows * spec.chunk_cols};
    if (!batch && work.first.selected() == 0) return entry;  // the empty partial
    // A stored array's elements go to the device as stored where it widens them itself (half the
    // copy for float32, an eighth for int8), the others widened on the host (chunk_reader.h).
    const ElementForm form =
        stored && stored_on_device(spec.dtype) ? ElementForm::kStored : ElementForm::kFloat64;
    if (stored && form == ElementForm::kFloat64) work.first.dtype = DType::kFloat64;

    // Buffers are sized for the job's full chunks, so edge chunks reuse them.
    const uint64_t buffer_bytes =
        spec.fused ? 0 : stored ? spec.chunk_elements() * work.first.element_bytes() : spec.chunk_bytes() * count;
    if (buffer_bytes > pool_.budget_bytes()) {
      fail(fmt::format("chunk of {} MiB does not fit in {} {} MiB", format_mib(buffer_bytes),
                       options_.memory_limit_bytes > 0 ? "memory limit" : "free device memory",
                       format_mib(pool_.budget_bytes())));
      return entry;
    }

    // A flat file's chunk whose pages CUDA has registered is copied from them, as the device takes
    // its elements (float64, or as stored): no staging.
    const void* at = nullptr;  // its first selected row's first element there
    uint64_t ld = 0, begin = 0;  // begin: that element's byte in the file
    bool viewed = false;  // the reader has opened the chunk's file
    const ChunkWork& w = work.first;
    const bool contiguous = w.box.cols == spec.cols && spec.row_sel.step == 1;
    if (stored && registry_.enabled() && ChunkReader::views_as_stored(spec) &&
        (form == ElementForm::kStored || spec.dtype == DType::kFloat64) &&
        (contiguous || w.box.cols * w.element_bytes() >= kMinRegisteredRowBytes)) {
      const ChunkBox span{w.rows.first, (w.rows.count - 1) * spec.row_sel.step + 1, w.box.col0, w.box.cols};
      if (Status st = reader.view_as_stored(spec, first, span, ChunkReader::Piece::kFirst, at, ld); !st) {
        fail(st.message());
        return entry;
      }
      viewed = true;
      if (at != nullptr) {
        begin = uint64_t(static_cast<const unsigned char*>(at) - reader.mapping()->data);
        const uint64_t end = begin + ((span.rows - 1) * ld + span.cols) * w.element_bytes();
        entry.source = registry_.lease(reader.path(), reader.mapping(), begin, end);
      }
    }
    const bool registered = entry.source != nullptr;

    const uint64_t row_bytes = spec.chunk_cols * work.first.element_bytes();
    const uint64_t staging = stored && !registered ? staging_bytes(spec, row_bytes, buffer_bytes) : 0;
    int slot = -1;
    void* host = nullptr;  // a stored chunk's pinned staging
    {
      std::lock_guard<std::mutex> claiming(claim_mutex_);
      // A generated job's launches keep to `streams` slots; the readers of a stored one may use
      // every slot whose staging fits the pinned limit (every slot, copying from registered pages).
      slot = pool_.claim(buffer_bytes, registered ? pool_.size()
                                       : stored   ? pool_.staging_slots(staging)
                                                  : size_t(options_.streams));
      if (slot < 0) {
        fail("cuda backend stopped");
        return entry;
      }
      entry.slot = slot;  // from here on the completion thread releases it, whatever happens
      pool_.prepare(slot, buffer_bytes);
      if (stored && !registered) host = pool_.staging(slot, staging);
    }

    StreamSlot& s = pool_.slot(slot);
    const SquareOutput squares = spec.squares ? pool_.squares(slot) : SquareOutput{};
    // A stored chunk's last copy to the device (the whole chunk, or its last piece), made after the
    // start event, so that the chunk's device time is its last copy and its reduce.
    const void* copy_from = host;
    uint64_t copy_to = 0, copy_bytes = work.first.box_bytes();
    // The reader's first read of a chunk whose file view() opened reads through it (kLater).
    const ChunkReader::Piece first_piece = viewed ? ChunkReader::Piece::kLater : ChunkReader::Piece::kFirst;
    if (stored && !registered) {  // read the chunk into the slot's pinned memory while the other slots compute
      const bool exact_integers = spec.scale == 1.0 && spec.offset == 0.0;
      if (exact_integers) entry.residual = std::make_unique<ExactSum>();
      Status st;
      if (staging >= buffer_bytes) {
        st = reader.read(spec, first, w.box, w.rows, w.cols, host, entry.residual.get(), form, first_piece);
      } else {
        // Pieces of whole selected rows (at least one), from the chunk's first selected row to its
        // last, each laid out in its half of the staging as the chunk is in `buffer` (rows of the
        // chunk's box, narrower than a full chunk's at the array's edge).
        const uint64_t step = spec.row_sel.step;
        const uint64_t piece_bytes = staging / 2;
        const uint64_t box_row_bytes = w.box.cols * w.element_bytes();
        const uint64_t per_piece = std::max<uint64_t>(1, (piece_bytes / box_row_bytes - 1) / step + 1);
        uint64_t done = 0;
        for (int k = 0; st && done < w.rows.count; ++k) {
          const AxisRun rows{w.rows.first + done * step, std::min(per_piece, w.rows.count - done)};
          const ChunkBox box{rows.first, (rows.count - 1) * step + 1, w.box.col0, w.box.cols};
          unsigned char* half = static_cast<unsigned char*>(host) + (k % 2) * piece_bytes;
          if (k >= 2) PSCHED_CUDA_CHECK(cudaEventSynchronize(s.piece_copied[k % 2]));
          st = reader.read(spec, first, box, rows, w.cols, half, entry.residual.get(), form,
                           k == 0 ? first_piece : ChunkReader::Piece::kLater);
          if (!st) break;
          done += rows.count;
          copy_from = half;
          copy_to = (box.row0 - w.box.row0) * box_row_bytes;
          copy_bytes = box.rows * box_row_bytes;
          if (done < w.rows.count) {
            PSCHED_CUDA_CHECK(cudaMemcpyAsync(static_cast<unsigned char*>(s.buffer) + copy_to, half, copy_bytes,
                                              cudaMemcpyHostToDevice, s.stream));
            PSCHED_CUDA_CHECK(cudaEventRecord(s.piece_copied[k % 2], s.stream));
          }
        }
        // Pieces already copied read from the staging the slot's next chunk fills.
        if (!st) PSCHED_CUDA_CHECK(cudaStreamSynchronize(s.stream));
      }
      if (!st) {
        fail(st.message());  // not launched: the completion thread hands the slot back
        return entry;
      }
    }
    entry.stop_event = s.next_stop;
    s.next_stop ^= 1;
    PSCHED_CUDA_CHECK(cudaEventRecord(s.start, s.stream));
    const int64_t trap = options_.test_trap_on_chunk;
    if (trap >= 0 && uint64_t(trap) >= first && uint64_t(trap) - first < count)
      launch_trap(s.stream);
    if (stored) {
      if (registered)
        copy_registered(*entry.source, begin, ld, work.first, spec.row_sel.step, s.buffer, s.stream);
      else
        PSCHED_CUDA_CHECK(cudaMemcpyAsync(static_cast<unsigned char*>(s.buffer) + copy_to, copy_from, copy_bytes,
                                          cudaMemcpyHostToDevice, s.stream));
      launch_reduce(work, s.buffer, s.accumulators, s.device_results, sm_count_, s.stream, squares);
    } else {
      if (!spec.fused) {
        if (batch) launch_generate_batch(work, s.buffer, sm_count_, s.stream);
        else launch_generate(work.first, s.buffer, sm_count_, s.stream);
      }
      launch_reduce(work, s.buffer, s.accumulators, s.device_results, sm_count_, s.stream, squares);
    }
    PSCHED_CUDA_CHECK(cudaMemcpyAsync(s.host_results, s.device_results,
                                      sizeof(ChunkResult) * count, cudaMemcpyDeviceToHost,
                                      s.stream));
    if (squares.wanted())
      PSCHED_CUDA_CHECK(cudaMemcpyAsync(s.host_square_results, squares.results, sizeof(CompactExact) * count,
                                        cudaMemcpyDeviceToHost, s.stream));
    PSCHED_CUDA_CHECK(cudaEventRecord(s.stop[entry.stop_event], s.stream));
    entry.launched = true;
  } catch (const CudaError& e) {
    fail(e.what(), cuda_error_is_sticky(e.code()));
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return entry;
}

}  // namespace psched::gpu
