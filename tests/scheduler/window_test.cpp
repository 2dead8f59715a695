#include <catch2/catch.hpp>

#include <chrono>

#include "scheduler/peers.h"

using namespace psched;

namespace {

Job job_with_chunks_of(uint64_t chunk_rows, uint64_t chunk_cols) {
  JobSpec s;
  s.rows = 2 * chunk_rows;  // four chunks: the window depends on their size, not their number
  s.cols = 2 * chunk_cols;
  s.chunk_rows = chunk_rows;
  s.chunk_cols = chunk_cols;
  return Job(1, 1, std::make_shared<const JobSpec>(normalized(s)), false);
}

}  // namespace

TEST_CASE("a worker's window widens to its element budget for small chunks, within bounds",
          "[window]") {
  WorkerRecord w;
  w.slots = 4;
  w.window_elements = 1 << 20;
  CHECK(w.window_for(job_with_chunks_of(4000, 4000)) == 4);      // large chunks: slots
  CHECK(w.window_for(job_with_chunks_of(100, 100)) == 104);      // 2^20 / 10^4
  CHECK(w.window_for(job_with_chunks_of(1, 1)) == kMaxWindowChunks);
  w.window_elements = 0;  // a worker that asks for none (the CUDA backend today)
  CHECK(w.window_for(job_with_chunks_of(1, 1)) == 4);
}

TEST_CASE("a GPU's window deepens while its share of the queued work is more than the plain window: until its "
          "speed is measured, four plain windows, or in a fleet big enough to stretch the report interval the whole "
          "share, and four report intervals after",
          "[window]") {
  WorkerRecord w;
  w.slots = 4;
  w.backend = "cuda";
  const Job job = job_with_chunks_of(100, 100);  // 10^4 elements a chunk
  const auto interval = std::chrono::milliseconds(10);
  CHECK(w.window_for(job, interval, 4e4) == 4);   // a share of 4 chunks: the plain window holds it
  CHECK(w.window_for(job, interval, 5e4) == kMaxTimedWindowChunks);  // a big fleet: the share limits the top-up
  CHECK(w.window_for(job, kReportInterval, 5e4) == 16);  // a small fleet: four plain windows
  // A GPU of its kind is measured at 1 ms a chunk: timed as that one, four intervals of 10 ms.
  CHECK(w.window_for(job, interval, 5e4, 1e-7) == 40);
  w.observe_speed(1e-3, 10000);                   // 0.1 us an element: 1 ms a chunk
  CHECK(w.window_for(job, interval, 0) == 4);     // nothing queued: slots
  CHECK(w.window_for(job, interval, 4e4) == 4);
  CHECK(w.window_for(job, interval, 5e4) == 40);  // four intervals of 1 ms chunks
  CHECK(w.window_for(job, interval, 1e9) == 40);
  w.backend = "cpu";  // a CPU worker keeps its plain window
  CHECK(w.window_for(job, interval, 1e9) == 4);
}

TEST_CASE("a GPU's window is four report intervals of what it delivers: the host's time per chunk beside the "
          "device's, measured over bursts of reports it held work throughout, makes it shallower",
          "[window]") {
  using std::chrono::microseconds;
  WorkerRecord w;
  w.slots = 4;
  w.backend = "cuda";
  const Job job = job_with_chunks_of(100, 100);  // 10^4 elements a chunk
  const auto interval = std::chrono::milliseconds(10);
  w.observe_speed(1e-3, 10000000);  // 0.1 ns an element: 1 us of device time a chunk
  CHECK(w.window_for(job, interval, 1e12) == 40000);
  const auto t0 = std::chrono::steady_clock::now();

  // Work held from one burst to the next: 1000 chunks reported, 1 ms of device time, in 3 ms of
  // wall time. 2 us a chunk of host time: 3 us a chunk, a third of the window.
  w.in_flight.add(1, 100);
  w.delivery_from(t0);
  w.reported(1e-3, 1000);
  w.observe_delivery(t0 + microseconds(3000));
  CHECK(w.seconds_per_chunk == Approx(2e-6));
  CHECK(w.window_for(job, interval, 1e12) == 13333);

  // A worker that ran dry between bursts waited: no sample, whatever the wall time.
  w.in_flight.remove(1, 100);
  w.delivery_from(t0 + microseconds(3000));
  w.in_flight.add(1, 100);
  w.reported(1e-3, 1000);
  w.observe_delivery(t0 + microseconds(100000));
  CHECK(w.seconds_per_chunk == Approx(2e-6));
  // Nor one that holds nothing at the end of the burst.
  w.delivery_from(t0 + microseconds(100000));
  w.in_flight.remove(1, 100);
  w.reported(1e-3, 1000);
  w.observe_delivery(t0 + microseconds(200000));
  CHECK(w.seconds_per_chunk == Approx(2e-6));

  // Busy as long as its wall time: the average comes back down, and noise below zero counts as 0.
  for (int i = 0; i < 40; ++i) {
    w.in_flight.add(1, 100);
    w.delivery_from(t0);
    w.reported(2e-3, 1000);
    w.observe_delivery(t0 + microseconds(1000));
  }
  CHECK(w.seconds_per_chunk < 0);
  CHECK(w.window_for(job, interval, 1e12) == 40000);
  w.backend = "cpu";  // a CPU worker's window is not timed
  CHECK(w.window_for(job, interval, 1e12) == 4);
}

TEST_CASE("in-flight chunks are counted per job, and a forgotten job leaves the window", "[window]") {
  InFlight f;
  f.add(7, 100);
  f.add(9, 5);
  f.remove(7, 40);
  CHECK(f.size() == 65);
  CHECK(f.of_job(7) == 60);
  f.forget_job(7);
  CHECK(f.size() == 5);
  CHECK(f.of_job(7) == 0);
  f.remove(9, 10);  // more than it holds: never below zero
  CHECK(f.size() == 0);
  CHECK(f.by_job().empty());
}

TEST_CASE("jobs share a window by the part they fill: one-element chunks filling it leave no room, and "
          "freeing some makes room for a job of larger chunks",
          "[window]") {
  InFlight f;
  const uint64_t tiny = InFlight::unit_for(65536), small = InFlight::unit_for(2621);
  CHECK(f.room(tiny) == 65536);
  CHECK(f.room(small) == 2621);
  f.add(1, 65536, tiny);
  CHECK(f.full());
  CHECK(f.room(small) == 0);
  f.remove(1, 6554);  // a tenth of the window comes back
  CHECK(f.room(small) == 262);
  f.add(2, 262, small);
  CHECK(f.room(tiny) < 30);
  f.forget_job(1);
  f.forget_job(2);
  CHECK(f.size() == 0);
  CHECK(f.room(tiny) == 65536);
}
