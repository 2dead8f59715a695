#include <catch2/catch.hpp>
#include <capnp/message.h>

#include "common/wire_convert.h"

using namespace psched;

TEST_CASE("a WorkerInfo survives to_wire and from_wire field for field", "[wire_convert]") {
  WorkerInfo in;
  in.backend = "cuda";
  in.device_name = "NVIDIA H200";
  in.memory_total_bytes = 150000000000;
  in.memory_limit_bytes = 60000000000;
  in.compute_major = 9;
  in.compute_minor = 0;
  in.threads = 1;
  in.id = 12;
  in.name = "node1-gpu0";
  in.host = "node1";
  in.pid = 4242;
  in.slots = 8;
  in.window_elements = 1 << 20;
  in.chunks_done = 2500;
  in.bytes_reduced = 2000000000000;
  in.busy_seconds = 1.625;
  capnp::MallocMessageBuilder m;
  to_wire(in, m.initRoot<wire::WorkerInfo>());

  const WorkerInfo out = from_wire(m.getRoot<wire::WorkerInfo>().asReader());

  CHECK(out.backend == "cuda");
  CHECK(out.device_name == "NVIDIA H200");
  CHECK(out.memory_total_bytes == 150000000000);
  CHECK(out.memory_limit_bytes == 60000000000);
  CHECK(out.compute_major == 9);
  CHECK(out.compute_minor == 0);
  CHECK(out.threads == 1);
  CHECK(out.id == 12);
  CHECK(out.name == "node1-gpu0");
  CHECK(out.host == "node1");
  CHECK(out.pid == 4242);
  CHECK(out.slots == 8);
  CHECK(out.window_elements == 1 << 20);
  CHECK(out.chunks_done == 2500);
  CHECK(out.bytes_reduced == 2000000000000);
  CHECK(out.busy_seconds == 1.625);
}
