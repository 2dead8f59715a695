// Window depth (scheduler/window_depth.h): how many chunks of a job a worker's window holds, from
// what it announced and the pace measured of it.
#include <catch2/catch.hpp>

#include <chrono>

#include "scheduler/top_up.h"
#include "scheduler/window_depth.h"

using namespace psched;

namespace {

Job job_with_chunks_of(uint64_t chunk_rows, uint64_t chunk_cols, SourceKind source = SourceKind::kGenerator) {
  JobSpec s;
  s.stored.kind = source;
  s.rows = 2 * chunk_rows;  // four chunks: the window depends on their size, not their number
  s.cols = 2 * chunk_cols;
  s.chunk_rows = chunk_rows;
  s.chunk_cols = chunk_cols;
  return Job(1, 1, std::make_shared<const JobSpec>(normalized(s)), false);
}

// A GPU of four slots that asks for no element window.
WorkerRecord gpu() {
  WorkerRecord w;
  w.slots = 4;
  w.backend = "cuda";
  return w;
}

}  // namespace

TEST_CASE("a worker's window widens to its element budget for small chunks, within bounds",
          "[window]") {
  WorkerRecord w;
  WorkerPace pace;
  w.slots = 4;
  w.window_elements = 1 << 20;
  CHECK(window_for(w, pace, job_with_chunks_of(4000, 4000)) == 4);      // large chunks: slots
  CHECK(window_for(w, pace, job_with_chunks_of(100, 100)) == 104);      // 2^20 / 10^4
  CHECK(window_for(w, pace, job_with_chunks_of(1, 1)) == kMaxWindowChunks);
  w.window_elements = 0;  // a worker that asks for none (the CUDA backend today)
  CHECK(window_for(w, pace, job_with_chunks_of(1, 1)) == 4);
}

TEST_CASE("a GPU's window deepens while its share of the queued work is more than the plain window: until its "
          "speed is measured, four plain windows, or in a fleet big enough to stretch the report interval the whole "
          "share, and four report intervals after",
          "[window]") {
  WorkerRecord w = gpu();
  WorkerPace pace;
  const Job job = job_with_chunks_of(100, 100);  // 10^4 elements a chunk
  const auto interval = std::chrono::milliseconds(10);
  CHECK(window_for(w, pace, job, interval, 4e4) == 4);   // a share of 4 chunks: the plain window holds it
  CHECK(window_for(w, pace, job, interval, 5e4) == kMaxTimedWindowChunks);  // a big fleet: the share limits the top-up
  CHECK(window_for(w, pace, job, kReportInterval, 5e4) == 16);  // a small fleet: four plain windows
  // A GPU of its kind is measured at 1 ms a chunk: timed as that one, four intervals of 10 ms.
  CHECK(window_for(w, pace, job, interval, 5e4, 1e-7) == 40);
  pace.observe_speed(w, 1e-3, 10000);                   // 0.1 us an element: 1 ms a chunk
  CHECK(window_for(w, pace, job, interval, 0) == 4);     // nothing queued: slots
  CHECK(window_for(w, pace, job, interval, 4e4) == 4);
  CHECK(window_for(w, pace, job, interval, 5e4) == 40);  // four intervals of 1 ms chunks
  CHECK(window_for(w, pace, job, interval, 1e9) == 40);
  w.backend = "cpu";  // a CPU worker keeps its plain window
  CHECK(window_for(w, pace, job, interval, 1e9) == 4);
}

TEST_CASE("a GPU's window is four report intervals of what it delivers: the host's time per chunk beside the "
          "device's, measured over bursts of reports it held work throughout, makes it shallower",
          "[window]") {
  using std::chrono::microseconds;
  WorkerRecord w = gpu();
  WorkerPace pace;
  const Job job = job_with_chunks_of(100, 100);  // 10^4 elements a chunk
  const auto interval = std::chrono::milliseconds(10);
  pace.observe_speed(w, 1e-3, 10000000);  // 0.1 ns an element: 1 us of device time a chunk
  CHECK(window_for(w, pace, job, interval, 1e12) == 40000);
  const auto t0 = std::chrono::steady_clock::now();

  // Work held from one burst to the next: 1000 chunks reported, 1 ms of device time, in 3 ms of
  // wall time. 2 us a chunk of host time: 3 us a chunk, a third of the window.
  w.in_flight.add(1, 100);
  pace.delivery_from(w, t0);
  pace.reported(1e-3, 1000);
  pace.observe_delivery(w, t0 + microseconds(3000));
  CHECK(pace.seconds_per_chunk == Approx(2e-6));
  CHECK(window_for(w, pace, job, interval, 1e12) == 13333);

  // A worker that ran dry between bursts waited: no sample, whatever the wall time.
  w.in_flight.remove(1, 100);
  pace.delivery_from(w, t0 + microseconds(3000));
  w.in_flight.add(1, 100);
  pace.reported(1e-3, 1000);
  pace.observe_delivery(w, t0 + microseconds(100000));
  CHECK(pace.seconds_per_chunk == Approx(2e-6));
  // Nor one that holds nothing at the end of the burst.
  pace.delivery_from(w, t0 + microseconds(100000));
  w.in_flight.remove(1, 100);
  pace.reported(1e-3, 1000);
  pace.observe_delivery(w, t0 + microseconds(200000));
  CHECK(pace.seconds_per_chunk == Approx(2e-6));

  // Busy as long as its wall time: the average comes back down, and noise below zero counts as 0.
  for (int i = 0; i < 40; ++i) {
    w.in_flight.add(1, 100);
    pace.delivery_from(w, t0);
    pace.reported(2e-3, 1000);
    pace.observe_delivery(w, t0 + microseconds(1000));
  }
  CHECK(pace.seconds_per_chunk < 0);
  CHECK(window_for(w, pace, job, interval, 1e12) == 40000);
  w.backend = "cpu";  // a CPU worker's window is not timed
  CHECK(window_for(w, pace, job, interval, 1e12) == 4);
}

TEST_CASE("the dispatcher's window depth keeps each joined worker's pace, times an unmeasured GPU by the last "
          "measured one of its kind, and judges a CPU worker by its average",
          "[window]") {
  WindowDepth depth;
  WorkerRecord measured = gpu(), fresh = gpu(), cpu;
  measured.id = 1;
  measured.device_name = fresh.device_name = "H200";
  fresh.id = 2;
  cpu.id = 3;
  cpu.backend = "cpu";
  for (WorkerId id : {1, 2, 3}) depth.joined(id);
  CHECK(depth.kind_seconds_per_element("H200") == 0);
  depth.reported(measured, 1e-3, 1, 10000);  // 0.1 us an element
  CHECK(depth.pace(1).seconds_per_element == 1e-3 / 10000);
  CHECK(depth.pace(1).delivery.chunks == 1);
  CHECK(depth.kind_seconds_per_element("H200") == 1e-3 / 10000);
  CHECK(depth.pace(2).seconds_per_element == 0);
  // A CPU worker's busy time is its threads': not a device's pace, but its average is its measure.
  depth.reported(cpu, 2.0, 4, 1000);
  CHECK(depth.pace(3).seconds_per_element == 0);
  CHECK(depth.measured_seconds_per_element(cpu) == 0);  // nothing finished yet
  cpu.busy_seconds = 2.0;
  cpu.elements_done = 1000;
  CHECK(depth.measured_seconds_per_element(cpu) == 2.0 / 1000);
  // A worker that left is forgotten: unmeasured, and its reports change nothing.
  depth.left(1);
  CHECK(depth.pace(1).seconds_per_element == 0);
  depth.reported(measured, 1.0, 1, 1);
  CHECK(depth.pace(1).seconds_per_element == 0);
  CHECK(depth.kind_seconds_per_element("H200") == 1e-3 / 10000);
}

TEST_CASE("a stored job's window holds a chunk for each of the worker's readers beside its slots whatever its "
          "timed depth and a generated job's window ignores them",
          "[window]") {
  WorkerRecord w = gpu();
  w.readers = 32;
  WorkerPace pace;
  const Job stored = job_with_chunks_of(1000, 10000, SourceKind::kZarr);  // 10^7 elements a chunk
  const Job generated = job_with_chunks_of(1000, 10000);
  const auto interval = std::chrono::milliseconds(5);
  CHECK(window_for(w, pace, stored, interval, 0) == 36);  // nothing queued: still every reader's chunk
  CHECK(window_for(w, pace, generated, interval, 0) == 4);
  CHECK(window_for(w, pace, stored, interval, 1e9) == 36);    // unmeasured: four plain windows are fewer
  CHECK(window_for(w, pace, generated, interval, 1e9) == 16);
  // Measured: 2 ms of device time a chunk and 3 ms of the host's, as 32 readers of 80 MB Zarr chunks
  // deliver them: four intervals are 4 chunks, the plain window 4, the readers' 36.
  pace.observe_speed(w, 2e-3, 10000000);
  pace.seconds_per_chunk = 3e-3;
  CHECK(window_for(w, pace, generated, interval, 1e9) == 4);
  CHECK(window_for(w, pace, stored, interval, 1e9) == 36);
  WorkerPace fast;  // 0.1 us a chunk: four intervals are more than the readers' part
  fast.observe_speed(w, 1e-7, 10000000);
  CHECK(window_for(w, fast, stored, interval, 1e12) == 200000);
  w.backend = "cpu";  // a CPU's slots (2 x its threads) already hold its readers' chunks: it announces none
  w.readers = 0;
  CHECK(window_for(w, pace, stored, interval, 1e9) == 4);
}

TEST_CASE("a CPU's window for a stored job's small chunks is four times its element budget, and how much of a "
          "job is worth splitting off is not",
          "[window]") {
  WorkerRecord w;
  WorkerPace pace;
  w.backend = "cpu";
  w.slots = 4;
  w.window_elements = 1 << 20;
  CHECK(window_for(w, pace, job_with_chunks_of(100, 100, SourceKind::kNpy)) == 4 * 104);
  CHECK(window_for(w, pace, job_with_chunks_of(100, 100, SourceKind::kZarr)) == 4 * 104);
  CHECK(window_for(w, pace, job_with_chunks_of(100, 100)) == 104);  // generated
  CHECK(window_for(w, pace, job_with_chunks_of(4000, 4000, SourceKind::kNpy)) == 4);  // large chunks: slots
  CHECK(window_for(w, pace, job_with_chunks_of(1, 1, SourceKind::kNpy)) == kMaxWindowChunks);
  CHECK(least_worth_splitting(w, job_with_chunks_of(100, 100, SourceKind::kNpy)) ==
        least_worth_splitting(w, job_with_chunks_of(100, 100)));
  w.backend = "cuda";  // a GPU's stored windows are timed and held for its readers instead
  CHECK(window_for(w, pace, job_with_chunks_of(100, 100, SourceKind::kNpy)) == 104);
}
