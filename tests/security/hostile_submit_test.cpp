// A hostile client that skips libpclient and sends crafted Submits as raw Cap'n Proto: every absurd
// job is answered with JobFailed naming the bad field, no worker ever hears of it, and the
// scheduler goes on running real jobs.
#include <catch2/catch.hpp>

#include <limits>

#include "abuse_helpers.h"
#include "net/wire_convert.h"
#include "raw_peer.h"

using namespace psched::test;
namespace wire = psched::wire;

namespace {

constexpr uint64_t kMax = UINT64_MAX;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Crafted {
  const char* what;
  std::function<void(wire::JobSpec::Builder)> spoil;
  std::string says;  // in the JobFailed message
};

}  // namespace

TEST_CASE("crafted Submits with absurd values get JobFailed naming the field and never reach a worker",
          "[security]") {
  TestCluster cluster;
  const pid_t worker = cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);

  psched::JobSpec valid;
  valid.rows = valid.cols = 100;
  valid.chunk_rows = valid.chunk_cols = 10;
  valid.generator = psched::Generator::kArange;
  valid.row_sel = valid.col_sel = {0, psched::kToEnd, 1};
  const std::vector<Crafted> cases = {
      {"zero rows", [](auto s) { s.setRows(0); }, "invalid job: rows (-x) must be > 0 (got 0)"},
      {"zero chunk cols", [](auto s) { s.setChunkCols(0); }, "invalid job: chunk-y must be > 0 (got 0)"},
      {"zero row step", [](auto s) { s.getRowSel().setStep(0); }, "invalid job: row-step must be > 0 (got 0)"},
      {"zero col step", [](auto s) { s.getColSel().setStep(0); }, "invalid job: col-step must be > 0 (got 0)"},
      {"rows x cols overflows", [](auto s) { s.setRows(uint64_t(1) << 40); s.setCols(uint64_t(1) << 40); },
       "invalid job: rows x cols overflows 64 bits (1099511627776 x 1099511627776)"},
      {"rows x cols at 2^64 - 1", [](auto s) { s.setRows(kMax); s.setCols(1); }, "is too large"},
      {"a chunk too large", [](auto s) { s.setRows(1 << 20); s.setCols(1 << 20); s.setChunkRows(1 << 20);
                                          s.setChunkCols(1 << 20); }, "elements is too large"},
      {"too many chunks", [](auto s) { s.setRows(1 << 21); s.setCols(1 << 20); s.setChunkRows(1);
                                        s.setChunkCols(1); }, "chunks is too many (at most 1099511627776)"},
      {"NaN param", [](auto s) { s.setParam0(kNan); }, "invalid job: arange start and step must be finite"},
      {"NaN std", [](auto s) { s.setGenerator(wire::Generator::NORMAL); s.setParam1(kNan); },
       "invalid job: normal std must be finite and >= 0 (got nan)"},
      {"negative std", [](auto s) { s.setGenerator(wire::Generator::NORMAL); s.setParam1(-1); },
       "invalid job: normal std must be finite and >= 0 (got -1)"},
      {"uniform high < low", [](auto s) { s.setGenerator(wire::Generator::UNIFORM); s.setParam0(2);
                                           s.setParam1(1); }, "invalid job: uniform high must be >= low 2 (got 1)"},
      {"infinite scale", [](auto s) { s.setScale(kInf); }, "invalid job: scale must be finite"},
      {"NaN offset", [](auto s) { s.setOffset(kNan); }, "invalid job: offset must be finite"},
      {"unknown generator", [](auto s) { s.setGenerator(static_cast<wire::Generator>(7)); },
       "invalid job: generator code 7 is unknown"},
      {"generator 65535", [](auto s) { s.setGenerator(static_cast<wire::Generator>(65535)); },
       "invalid job: generator code 255 is unknown"},
      {"unknown dtype", [](auto s) { s.setDtype(static_cast<wire::DType>(99)); },
       "invalid job: dtype code 99 is unknown"},
      {"an integer dtype for a generated array", [](auto s) { s.setDtype(wire::DType::INT32); },
       "invalid job: a generated array is float64 or float32 (got int32)"},
      {"a stored array with no path", [](auto s) { s.initSource().setKind(wire::SourceKind::NPY); },
       "invalid job: a stored array needs a path (got '')"},
      {"stop < start", [](auto s) { s.getRowSel().setStart(50); s.getRowSel().setStop(10); },
       "invalid job: row-stop must be >= row-start 50 (got 10)"},
      {"start past the end", [](auto s) { s.getColSel().setStart(101); },
       "invalid job: col-start must be from 0 to 100 (got 101)"},
      {"stop past the end", [](auto s) { s.getColSel().setStop(kMax - 1); }, "col-stop must be from 0 to 100"},
  };

  RawPeer hostile(port_of(cluster));
  REQUIRE(hostile.hello_as_client());
  REQUIRE(hostile.read_until(wire::Message::WELCOME));
  for (const auto& c : cases) {
    INFO(c.what);
    REQUIRE(hostile.send_message([&](wire::Message::Builder m) {
      auto submit = m.initSubmit();
      submit.setTag(42);
      auto spec = submit.initSpec();
      psched::to_wire(valid, spec);
      c.spoil(spec);
    }));
    auto failed = hostile.read_until(wire::Message::JOB_FAILED);
    REQUIRE(failed);
    const std::string message = failed->message().getJobFailed().getMessage().cStr();
    CHECK(failed->message().getJobFailed().getJobId() == 0);
    CHECK(message.find(c.says) != std::string::npos);
    CHECK(std::count(message.begin(), message.end(), '\n') == 0);
  }
  // The same connection is still served: a valid job is accepted and runs.
  REQUIRE(hostile.send_message([&](wire::Message::Builder m) {
    auto submit = m.initSubmit();
    submit.setTag(43);
    psched::to_wire(valid, submit.initSpec());
  }));
  auto accepted = hostile.read_until(wire::Message::JOB_ACCEPTED);
  REQUIRE(accepted);
  CHECK(accepted->message().getJobAccepted().getTag() == 43);
  auto result = hostile.read_until(wire::Message::JOB_RESULT, 20000);
  REQUIRE(result);
  CHECK(result->message().getJobResult().getCount() == 10000);

  // Only that one job ever reached the scheduler's job table, and so the worker.
  const std::string log = cluster.log_of(cluster.scheduler_pid());
  CHECK(log.find("job 1 from client 'raw-client'") != std::string::npos);
  CHECK(log.find("job 2 from") == std::string::npos);
  CHECK(cluster.log_of(worker).find("invalid spec") == std::string::npos);
  const auto workers = cluster.client().workers();
  REQUIRE(workers.size() == 1);
  CHECK(workers[0].chunks_done == 100);
}

TEST_CASE("chunk sizes near 2^64 are clamped to the array, not a crash", "[security]") {
  // validate() once computed rows + chunk_rows - 1, which wraps: a zero grid then divided by zero
  // and killed the scheduler.
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  RawPeer hostile(port_of(cluster));
  REQUIRE(hostile.hello_as_client());
  REQUIRE(hostile.read_until(wire::Message::WELCOME));
  psched::JobSpec spec;
  spec.rows = spec.cols = 2;
  spec.chunk_rows = spec.chunk_cols = kMax;
  spec.generator = psched::Generator::kArange;
  spec.param0 = 0;
  spec.param1 = 1;
  spec.offset = 0;
  spec.row_sel = spec.col_sel = {0, psched::kToEnd, 1};
  REQUIRE(hostile.send_message(
      [&](wire::Message::Builder m) { psched::to_wire(spec, m.initSubmit().initSpec()); }));
  auto accepted = hostile.read_until(wire::Message::JOB_ACCEPTED);
  REQUIRE(accepted);
  CHECK(accepted->message().getJobAccepted().getChunks() == 1);
  auto result = hostile.read_until(wire::Message::JOB_RESULT, 20000);
  REQUIRE(result);
  CHECK(result->message().getJobResult().getSum() == 0 + 1 + 2 + 3);
  CHECK(process_alive(cluster.scheduler_pid()));
}

TEST_CASE("a selection step near 2^64 selects only its start, in every chunk", "[security]") {
  // select_axis once rounded up with + step - 1, which wrapped and put chunks' selections outside
  // the chunk: the CPU backend read before its buffer.
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  pclient::Job job = arange_job(100, 100, 10, 10);
  job.row_stop = 5;
  job.row_step = kMax - 4;
  job.col_step = kMax;
  const pclient::Result r = cluster.client().run(job);
  CHECK(r.count == 1);  // element (0, 0) only
  CHECK(check(job, r) == "");
  for (pid_t pid : cluster.worker_pids()) CHECK(process_alive(pid));
}
