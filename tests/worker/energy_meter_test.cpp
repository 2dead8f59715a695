// What a worker's reports charge for energy (worker/energy_meter.h): the counter's advance between
// reports, split by busy seconds; idle time between jobs charged to none; the sampled power where
// there is no counter.
#include <catch2/catch.hpp>

#include "worker/energy_meter.h"

using namespace psched;

TEST_CASE("a report is charged what the counter advanced since the last one, per busy second") {
  EnergyMeter m;
  m.start(100.0);                                // 100 J when work starts
  CHECK(m.charge(100.5, 0.002, 400) == 250.0);   // 0.5 J over 2 ms busy: 250 J per busy second
  CHECK(m.charge(101.5, 0.004, 400) == 250.0);   // the next report measures from this one
}

TEST_CASE("idle time between jobs is charged to none") {
  EnergyMeter m;
  m.start(0.0);
  CHECK(m.charge(1.0, 0.01, 0) == 100.0);
  m.start(50.0);  // idle from 1 J to 50 J: a fresh mark when work comes again
  CHECK(m.charge(52.0, 0.01, 0) == 200.0);
}

TEST_CASE("a report without busy time leaves the energy to the next one") {
  EnergyMeter m;
  m.start(0.0);
  CHECK(m.charge(1.0, 0.0, 400) == 0.0);    // failures only: nothing to split it by
  CHECK(m.charge(3.0, 0.01, 400) == 300.0);  // 3 J since the mark
}

TEST_CASE("a reading below the mark charges nothing and keeps the mark") {
  EnergyMeter m;
  m.start(10.0);
  CHECK(m.charge(12.0, 0.01, 400) == 200.0);  // an estimate carried past the last reading
  CHECK(m.charge(11.5, 0.01, 400) == 0.0);    // the next reading came in lower
  CHECK(m.charge(13.0, 0.01, 400) == 100.0);  // measured from 12 J: the charges add up to 3 J
}

TEST_CASE("without a counter, or without a mark, a busy second costs the sampled power") {
  EnergyMeter none;
  none.start(std::nullopt);
  CHECK(none.charge(std::nullopt, 0.5, 412) == 412.0);
  EnergyMeter unmarked;  // a report before any start(): measures from the next one on
  CHECK(unmarked.charge(7.0, 0.5, 412) == 412.0);
  CHECK(unmarked.charge(8.0, 0.5, 412) == 2.0);
}
