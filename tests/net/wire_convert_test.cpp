#include <catch2/catch.hpp>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cmath>
#include <limits>
#include <vector>

#include "net/wire_convert.h"

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

TEST_CASE("a chunk partial survives the wire with its exact sum, in 88 bytes plus 8 per term",
          "[wire_convert]") {
  // A chunk like the DeepOps benchmark's: 10^5 values near 11 (ulp 2^-49), sum ~1.1e6.
  PartialSum in;
  for (int i = 0; i < 100000; ++i) in.exact.add(11.0 + std::ldexp(double(i % 977), -40));
  in.exact.add(std::numeric_limits<double>::quiet_NaN());
  in.exact.add(-std::numeric_limits<double>::infinity());
  in.exact.normalize();
  in.sum = in.exact.rounded();
  in.count = 100002;
  in.min = -std::numeric_limits<double>::infinity();
  in.max = 11.5;
  const std::vector<double> terms = in.exact.terms();
  REQUIRE(terms.size() == 2);

  // One partial in a ResultBatch's list, against an empty list: its cost on the wire.
  auto batch_bytes = [&](uint32_t n) {
    capnp::MallocMessageBuilder m(1 << 16);  // one segment: no far pointers between segments
    auto list = m.initRoot<wire::ResultBatch>().initResults(n);
    for (uint32_t i = 0; i < n; ++i) to_wire(7, in, list[i]);
    return capnp::computeSerializedSizeInWords(m) * 8;
  };
  // 80 until ChunkPartial.squares: a null pointer costs its word.
  CHECK(batch_bytes(101) - batch_bytes(1) == 100 * (88 + 8 * terms.size()));

  capnp::MallocMessageBuilder m;
  to_wire(7, in, m.initRoot<wire::ChunkPartial>());
  const PartialSum out = from_wire(m.getRoot<wire::ChunkPartial>().asReader());
  CHECK(same_bits(out, in));
  CHECK(out.exact.nan == 1);
  CHECK(out.exact.neg_inf == 1);
}

TEST_CASE("a stored array's description survives the wire field for field", "[wire_convert][stored]") {
  JobSpec in;
  in.dtype = DType::kUInt16;
  in.stored.kind = SourceKind::kNpyStack;
  in.stored.path = "/shared/stack";
  in.stored.big_endian = true;
  in.stored.files = {StackFile{"0.npy", 10, 128, false}, StackFile{"1.npy", 7, 192, true}};
  in.stored.store_chunk_rows = 5;
  in.stored.store_chunk_cols = 9;
  in.stored.compressor = Compressor::kBlosc;
  in.stored.fill_bits = 0xfffe;
  in.stored.has_fill_value = false;
  in.stored.dimension_separator = '/';
  in.stored.one_dimensional = true;
  capnp::MallocMessageBuilder m;
  to_wire(in, m.initRoot<wire::JobSpec>());

  const JobSpec out = from_wire(m.getRoot<wire::JobSpec>().asReader());

  CHECK(out.dtype == DType::kUInt16);
  CHECK(out.stored.kind == SourceKind::kNpyStack);
  CHECK(out.stored.path == "/shared/stack");
  CHECK(out.stored.big_endian);
  REQUIRE(out.stored.files.size() == 2);
  CHECK((out.stored.files[1].name == "1.npy" && out.stored.files[1].rows == 7 && out.stored.files[1].data_offset == 192 &&
         out.stored.files[1].fortran_order));
  CHECK((out.stored.store_chunk_rows == 5 && out.stored.store_chunk_cols == 9));
  CHECK(out.stored.compressor == Compressor::kBlosc);
  CHECK(out.stored.fill_bits == 0xfffe);
  CHECK_FALSE(out.stored.has_fill_value);
  CHECK(out.stored.dimension_separator == '/');
  CHECK(out.stored.one_dimensional);
  // A generated job carries no source at all.
  capnp::MallocMessageBuilder g;
  to_wire(JobSpec{}, g.initRoot<wire::JobSpec>());
  CHECK_FALSE(g.getRoot<wire::JobSpec>().asReader().hasSource());
  CHECK_FALSE(from_wire(g.getRoot<wire::JobSpec>().asReader()).stored.stored());
}
