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
  in.readers = 32;
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
  CHECK(out.readers == 32);
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

namespace {

BurnStatus two_gpu_burn() {
  BurnStatus b;
  b.verdict = BurnVerdict::kFail;
  b.elapsed_seconds = 12.5;
  b.total_seconds = 600;
  b.gpus.push_back({"node1-gpu0", BurnVerdict::kPass, "", 2.5e10, 400, 0, false});
  b.gpus.push_back({"node1-gpu1", BurnVerdict::kFail, "job 3, chunk 7: its copy lost the vote", 2.4e10, 390, 1, true});
  return b;
}

// The wire form of `b` after `spoil` changed it, read back.
template <typename Spoil>
StatusOr<BurnStatus> read_spoiled(const BurnStatus& b, Spoil spoil) {
  capnp::MallocMessageBuilder m;
  auto out = m.initRoot<wire::BurnStatus>();
  write_burn_status(b, out);
  spoil(out);
  return burn_status_from_wire(out.asReader());
}

}  // namespace

TEST_CASE("a burn status survives write_burn_status and burn_status_from_wire field for field", "[wire_convert][burn]") {
  const StatusOr<BurnStatus> out = read_spoiled(two_gpu_burn(), [](wire::BurnStatus::Builder) {});

  REQUIRE(out);
  const BurnStatus& b = out.value();
  CHECK(b.verdict == BurnVerdict::kFail);
  CHECK(b.elapsed_seconds == 12.5);
  CHECK(b.total_seconds == 600);
  CHECK_FALSE(b.ended);
  REQUIRE(b.gpus.size() == 2);
  CHECK(b.gpus[1].worker == "node1-gpu1");
  CHECK(b.gpus[1].verdict == BurnVerdict::kFail);
  CHECK(b.gpus[1].reason == "job 3, chunk 7: its copy lost the vote");
  CHECK(b.gpus[1].bytes_per_second == 2.4e10);
  CHECK(b.gpus[1].chunks == 390);
  CHECK(b.gpus[1].mismatches == 1);
  CHECK(b.gpus[1].gone);
  CHECK(b.gpus[0].verdict == BurnVerdict::kPass);
}

TEST_CASE("a malformed burn status is refused, saying what is wrong", "[wire_convert][burn]") {
  const BurnStatus b = two_gpu_burn();
  auto refusal = [&](auto spoil) {
    const StatusOr<BurnStatus> r = read_spoiled(b, spoil);
    REQUIRE_FALSE(r);
    return r.status().message();
  };
  CHECK(refusal([](wire::BurnStatus::Builder o) { o.setVerdict(static_cast<wire::BurnVerdict>(9)); }) ==
        "burn status: verdict 9 unknown (expected pass, warn or fail)");
  CHECK(refusal([](wire::BurnStatus::Builder o) { o.getGpus()[0].setVerdict(static_cast<wire::BurnVerdict>(3)); }) ==
        "burn status: verdict 3 unknown (expected pass, warn or fail)");
  CHECK(refusal([](wire::BurnStatus::Builder o) { o.initGpus(kMaxBurnGpus + 1); }) ==
        "burn status: 4097 GPUs, at most 4096");
  CHECK(refusal([](wire::BurnStatus::Builder o) { o.getGpus()[0].setWorker(std::string(129, 'w')); }) ==
        "burn status: a worker name of 129 bytes or a reason of 0, at most 128 and 512");
  CHECK(refusal([](wire::BurnStatus::Builder o) { o.getGpus()[1].setReason(std::string(513, 'r')); }) ==
        "burn status: a worker name of 10 bytes or a reason of 513, at most 128 and 512");
  CHECK(refusal([](wire::BurnStatus::Builder o) { o.getGpus()[0].setWorker(""); }) ==
        "burn status: a worker name of 0 bytes, expected 1 to 128 printable");
  CHECK(refusal([](wire::BurnStatus::Builder o) { o.getGpus()[0].setWorker("a\nb"); }) ==
        "burn status: a worker name of 3 bytes, expected 1 to 128 printable");
  CHECK(refusal([](wire::BurnStatus::Builder o) { o.getGpus()[1].setReason("line\x1b[2J"); }) ==
        "burn status: 'node1-gpu1''s reason of 8 bytes, expected at most 512 printable");
  CHECK(refusal([](wire::BurnStatus::Builder o) { o.getGpus()[0].setBytesPerSecond(std::nan("")); }) ==
        "burn status: 'node1-gpu0' at nan B/s, expected 0 to 1e18");
  CHECK(refusal([](wire::BurnStatus::Builder o) { o.setElapsedSeconds(-1); }) ==
        "burn status: elapsed -1 s of 600 s, expected 0 to 2678400 s");
}
