// WorkerWindow (scheduler/peers.h): the chunks a worker's window holds, counted per job and by the part
// of the window they fill.
#include <catch2/catch.hpp>

#include "scheduler/peers.h"

using namespace psched;

TEST_CASE("in-flight chunks are counted per job, and a forgotten job leaves the window", "[window]") {
  WorkerWindow f;
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
  WorkerWindow f;
  const uint64_t tiny = WorkerWindow::unit_for(65536), small = WorkerWindow::unit_for(2621);
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
