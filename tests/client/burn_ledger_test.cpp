// pbench --burn's verdicts from what the burn saw (client/pbench/burn_ledger.h), without a cluster:
// worker lists over time, verify findings and scheduler notices in, verdicts and exit codes out.
#include <catch2/catch.hpp>

#include "app/exit_codes.h"
#include "client/pbench/burn_ledger.h"

using pbench::BurnLedger;

namespace {

pclient::WorkerInfo worker(uint32_t id, const std::string& name, uint64_t bytes, double busy) {
  pclient::WorkerInfo w;
  w.id = id;
  w.name = name;
  w.host = "node";
  w.device_name = "H100";
  w.bytes_reduced = bytes;
  w.chunks_done = bytes / 10;
  w.busy_seconds = busy;
  return w;
}

pclient::GpuHealth health(uint64_t ecc_uncorrected, uint32_t width) {
  pclient::GpuHealth h;
  h.uuid = "GPU-1";
  h.ecc_supported = true;
  h.ecc_uncorrected = ecc_uncorrected;
  h.pcie_generation = 5;
  h.pcie_width = width;
  h.pcie_max_width = 16;
  h.temperature_c = 60;
  return h;
}

// Job 4's verify: of three copies of chunk 12 (workers a, b, c), b's lost the vote.
pclient::Result b_lost_the_vote_on_chunk_12() {
  pclient::Result r;
  r.job_id = 4;
  r.mismatch_count = 1;
  pclient::VerifyMismatch m;
  m.chunk = 12;
  m.copies = {{.worker_id = 1, .worker_name = "a", .sum = 1.5}, {.worker_id = 2, .worker_name = "b", .sum = 2.5, .suspect = true},
              {.worker_id = 3, .worker_name = "c", .sum = 1.5}};
  r.mismatches = {m};
  return r;
}

}  // namespace

TEST_CASE("burn ledger: GPUs of one model at equal throughput all pass and the exit code is 0", "[burn]") {
  BurnLedger ledger;
  ledger.observe({worker(1, "a", 0, 0), worker(2, "b", 0, 0)}, 0);
  ledger.observe({worker(1, "a", 1000, 1), worker(2, "b", 1000, 1)}, 3);
  ledger.finish(3);
  CHECK(ledger.cluster_verdict() == pclient::BurnVerdict::kPass);
  CHECK(pbench::burn_exit_code(ledger.cluster_verdict()) == psched::kExitOk);
}

TEST_CASE("burn ledger: a GPU below 90 percent of its model's median warns, one at 95 percent passes", "[burn]") {
  BurnLedger ledger;
  ledger.observe({worker(1, "a", 0, 0), worker(2, "b", 0, 0), worker(3, "c", 0, 0)}, 0);
  ledger.observe({worker(1, "a", 1000, 1), worker(2, "b", 950, 1), worker(3, "c", 850, 1)}, 3);
  ledger.finish(3);
  const auto& g = ledger.gpus();
  CHECK(ledger.verdict_of(g.at("a")).verdict == pclient::BurnVerdict::kPass);
  CHECK(ledger.verdict_of(g.at("b")).verdict == pclient::BurnVerdict::kPass);
  const auto c = ledger.verdict_of(g.at("c"));
  CHECK(c.verdict == pclient::BurnVerdict::kWarn);
  CHECK(c.median_bytes_per_second == 950);
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0] == "slow: 89% of the median of its model (0.00085 of 0.00095 MB/s; limit 90%)");
  CHECK(pbench::burn_exit_code(ledger.cluster_verdict()) == psched::kExitBurnWarnings);
}

TEST_CASE("burn ledger: a rise in uncorrected ECC errors and a narrowed PCIe link fail their GPUs", "[burn]") {
  BurnLedger ledger;
  auto a = worker(1, "a", 0, 0), b = worker(2, "b", 0, 0);
  a.gpu = health(1, 16);  // one error from before the burn: not the burn's
  b.gpu = health(0, 8);
  ledger.observe({a, b}, 0);
  a.gpu = health(3, 16);
  ledger.observe({a, b}, 1);
  const auto va = ledger.verdict_of(ledger.gpus().at("a"));
  CHECK(va.verdict == pclient::BurnVerdict::kFail);
  CHECK(va.failures == std::vector<std::string>{"ECC uncorrected errors rose from 1 to 3 during the burn"});
  const auto vb = ledger.verdict_of(ledger.gpus().at("b"));
  CHECK(vb.failures == std::vector<std::string>{"PCIe link x8 of x16 (gen 5)"});
  CHECK(pbench::burn_exit_code(ledger.cluster_verdict()) == psched::kExitFailure);
}

TEST_CASE("burn ledger: a PCIe link that never reaches its maximum generation under load fails, one that idles low passes", "[burn]") {
  BurnLedger ledger;
  auto a = worker(1, "a", 0, 0), b = worker(2, "b", 0, 0), c = worker(3, "c", 0, 0);
  a.gpu = b.gpu = c.gpu = health(0, 16);
  a.gpu->pcie_max_generation = b.gpu->pcie_max_generation = 5;
  a.gpu->pcie_generation = b.gpu->pcie_generation = 1;  // idle at the start: power saving
  // c's driver does not know its maximum generation (0): unknown, never judged.
  c.gpu->pcie_generation = 3;
  ledger.observe({a, b, c}, 0);
  a = worker(1, "a", 1000, 1), b = worker(2, "b", 1000, 1), c = worker(3, "c", 1000, 1);
  a.gpu = b.gpu = c.gpu = health(0, 16);
  a.gpu->pcie_max_generation = b.gpu->pcie_max_generation = 5;
  a.gpu->pcie_generation = 5;  // trained up once busy
  b.gpu->pcie_generation = 4;  // never reached gen 5 although busy
  c.gpu->pcie_generation = 3;
  ledger.observe({a, b, c}, 3);
  a.gpu->pcie_generation = 1;  // idle again at the end: the best seen counts
  ledger.observe({a, b, c}, 3.5);
  ledger.finish(3.5);
  CHECK(ledger.verdict_of(ledger.gpus().at("a")).verdict == pclient::BurnVerdict::kPass);
  CHECK(ledger.gpus().at("a").pcie_generation == 5);
  const auto vb = ledger.verdict_of(ledger.gpus().at("b"));
  CHECK(vb.verdict == pclient::BurnVerdict::kFail);
  CHECK(vb.failures == std::vector<std::string>{"PCIe link gen 4 of gen 5 under load (the best seen during the burn)"});
  CHECK(ledger.verdict_of(ledger.gpus().at("c")).verdict == pclient::BurnVerdict::kPass);
}

TEST_CASE("burn ledger: rising remapped rows and a pending remap fail, remapping NVML does not report is unknown", "[burn]") {
  BurnLedger ledger;
  auto a = worker(1, "a", 0, 0), b = worker(2, "b", 0, 0), c = worker(3, "c", 0, 0), d = worker(4, "d", 0, 0);
  a.gpu = b.gpu = c.gpu = d.gpu = health(0, 16);
  a.gpu->remap_supported = b.gpu->remap_supported = c.gpu->remap_supported = true;
  a.gpu->remapped_rows_corrected = 2;  // from before the burn: not the burn's
  b.gpu->remapped_rows_uncorrected = 1;
  ledger.observe({a, b, c, d}, 0);
  b.gpu->remapped_rows_uncorrected = 3;
  c.gpu->remap_pending = true;
  ledger.observe({a, b, c, d}, 1);
  const auto& g = ledger.gpus();
  CHECK(ledger.verdict_of(g.at("a")).verdict == pclient::BurnVerdict::kPass);
  CHECK(ledger.verdict_of(g.at("b")).failures ==
        std::vector<std::string>{"remapped memory rows rose from 1 to 3 during the burn"});
  CHECK(ledger.verdict_of(g.at("c")).failures ==
        std::vector<std::string>{"a memory row remap is pending (the GPU needs a reset)"});
  // d: NOT_SUPPORTED, so neither healthy nor failed: unknown, and nothing is judged of it.
  CHECK_FALSE(g.at("d").remapped_rows.seen);
  CHECK(ledger.verdict_of(g.at("d")).verdict == pclient::BurnVerdict::kPass);
}

TEST_CASE("burn ledger: retired pages that rise and a pending retirement fail (GPUs before Ampere)", "[burn]") {
  BurnLedger ledger;
  auto a = worker(1, "a", 0, 0), b = worker(2, "b", 0, 0), c = worker(3, "c", 0, 0);
  a.gpu = b.gpu = c.gpu = health(0, 16);
  a.gpu->retired_supported = b.gpu->retired_supported = c.gpu->retired_supported = true;
  a.gpu->retired_pages_sbe = 4;  // from before the burn: not the burn's
  b.gpu->retired_pages_dbe = 1;
  ledger.observe({a, b, c}, 0);
  b.gpu->retired_pages_sbe = 2;
  c.gpu->retired_pending = true;
  ledger.observe({a, b, c}, 1);
  const auto& g = ledger.gpus();
  CHECK(ledger.verdict_of(g.at("a")).verdict == pclient::BurnVerdict::kPass);
  CHECK(ledger.verdict_of(g.at("b")).failures ==
        std::vector<std::string>{"retired memory pages rose from 1 to 3 during the burn"});
  CHECK(ledger.verdict_of(g.at("c")).failures ==
        std::vector<std::string>{"a memory page retirement is pending (the driver must reload)"});
  CHECK_FALSE(g.at("a").remapped_rows.seen);
  CHECK(g.at("a").retired_pages.seen);
}

TEST_CASE("burn ledger: throttling other than the power cap and heat over the limit warn", "[burn]") {
  BurnLedger ledger({.slow_fraction = 0.9, .temperature_limit_c = 80});
  auto capped = worker(1, "capped", 0, 0), hot = worker(2, "hot", 0, 0);
  capped.gpu = health(0, 16);
  capped.gpu->throttle_reasons = 0x4 | 0x1;  // power cap, idle: expected
  hot.gpu = health(0, 16);
  hot.gpu->throttle_reasons = 0x40;  // hardware thermal slowdown
  hot.gpu->temperature_c = 88;
  ledger.observe({capped, hot}, 0);
  CHECK(ledger.verdict_of(ledger.gpus().at("capped")).verdict == pclient::BurnVerdict::kPass);
  const auto v = ledger.verdict_of(ledger.gpus().at("hot"));
  CHECK(v.warnings == std::vector<std::string>{"throttled: hw_thermal_slowdown", "hot: 88 C (limit 80 C)"});
}

TEST_CASE("burn ledger: the copy that lost the vote fails its GPU naming the chunk, the others pass", "[burn]") {
  BurnLedger ledger;
  ledger.observe({worker(1, "a", 0, 0), worker(2, "b", 0, 0), worker(3, "c", 0, 0)}, 0);
  ledger.note_result(b_lost_the_vote_on_chunk_12(), "the job");
  const auto b = ledger.verdict_of(ledger.gpus().at("b"));
  REQUIRE(b.failures.size() == 1);
  CHECK(b.failures[0] == "job 4 (the job), chunk 12: its copy lost the vote (sum 2.5; 'a' 1.5, 'c' 1.5)");
  CHECK(ledger.verdict_of(ledger.gpus().at("a")).verdict == pclient::BurnVerdict::kPass);
  CHECK(ledger.mismatches().size() == 1);
}

TEST_CASE("burn ledger: a worker that leaves fails with the scheduler's word for it and its last heartbeat", "[burn]") {
  BurnLedger ledger;
  auto a = worker(1, "a", 0, 0);
  a.gpu = health(0, 16);
  ledger.observe({a, worker(2, "b", 0, 0)}, 0);
  ledger.note_notice("worker 1 'a' left: leaving: device lost: an illegal memory access", 1.5);
  ledger.observe({worker(2, "b", 10, 1)}, 2);
  const auto& g = ledger.gpus().at("a");
  CHECK(g.left_seconds == 2);
  const auto v = ledger.verdict_of(g);
  REQUIRE(v.failures.size() == 2);
  CHECK(v.failures[0] == "left: leaving: device lost: an illegal memory access");
  CHECK(v.failures[1].rfind("left the cluster 2.0 s into the burn: left: leaving: device lost", 0) == 0);
  CHECK(v.failures[1].find("its last heartbeat: 0 MHz, 60 C, 0 W") != std::string::npos);
  CHECK(ledger.verdict_of(ledger.gpus().at("b")).verdict == pclient::BurnVerdict::kPass);
}

TEST_CASE("burn ledger: a stall notice is an event, not a failure", "[burn]") {
  BurnLedger ledger;
  ledger.observe({worker(1, "a", 0, 0)}, 0);
  ledger.note_notice("worker 1 'a' stalled: no progress for 3.0 s while holding 4 chunks", 1);
  CHECK(ledger.verdict_of(ledger.gpus().at("a")).verdict == pclient::BurnVerdict::kPass);
  CHECK(ledger.events().size() == 1);
}

TEST_CASE("burn ledger: throughput is not judged in a burn under 2 s, and a GPU that did no work in 3 s warns", "[burn]") {
  BurnLedger ledger;
  ledger.observe({worker(1, "a", 0, 0), worker(2, "b", 0, 0), worker(3, "idle", 0, 0)}, 0);
  ledger.observe({worker(1, "a", 1000, 1), worker(2, "b", 100, 1), worker(3, "idle", 0, 0)}, 1.5);
  CHECK(ledger.cluster_verdict() == pclient::BurnVerdict::kPass);  // b at 10%: too short to tell
  ledger.observe({worker(1, "a", 2000, 2), worker(2, "b", 2000, 2), worker(3, "idle", 0, 0)}, 3);
  CHECK(ledger.verdict_of(ledger.gpus().at("b")).verdict == pclient::BurnVerdict::kPass);
  CHECK(ledger.verdict_of(ledger.gpus().at("idle")).warnings == std::vector<std::string>{"did no work in 3.0 s"});
}

TEST_CASE("burn ledger: the dashboard's status names each GPU's verdict, first reason, chunks and lost votes", "[burn]") {
  BurnLedger ledger;
  ledger.observe({worker(1, "a", 0, 0), worker(2, "b", 0, 0), worker(3, "c", 0, 0)}, 0);
  ledger.observe({worker(1, "a", 1000, 1), worker(2, "b", 1000, 1), worker(3, "c", 1000, 1)}, 1);
  ledger.note_result(b_lost_the_vote_on_chunk_12(), "the job");

  const pclient::BurnStatus s = ledger.status(1.5, 60);

  CHECK(s.verdict == pclient::BurnVerdict::kFail);
  CHECK(s.elapsed_seconds == 1.5);
  CHECK(s.total_seconds == 60);
  REQUIRE(s.gpus.size() == 3);
  CHECK(s.gpus[1].worker == "b");
  CHECK(s.gpus[1].verdict == pclient::BurnVerdict::kFail);
  CHECK(s.gpus[1].reason == "job 4 (the job), chunk 12: its copy lost the vote (sum 2.5; 'a' 1.5, 'c' 1.5)");
  CHECK(s.gpus[1].mismatches == 1);
  CHECK(s.gpus[1].chunks == 100);
  CHECK(s.gpus[1].bytes_per_second == 1000);
  CHECK(s.gpus[0].verdict == pclient::BurnVerdict::kPass);
  CHECK(s.gpus[0].reason.empty());
  CHECK(s.gpus[0].mismatches == 0);
}

TEST_CASE("burn ledger: a local worker's process that was killed fails its GPU with the signal, and its leaving says so", "[burn]") {
  BurnLedger ledger;
  ledger.observe({worker(1, "local-0", 0, 0), worker(2, "local-1", 0, 0)}, 0);
  ledger.note_notice("worker 2 'local-1' lost: connection lost", 1.2);

  ledger.note_process_exit("local-1", "its process 4242 killed by signal 9 (Killed)", 1.5);
  ledger.observe({worker(1, "local-0", 1000, 1)}, 2);

  const auto v = ledger.verdict_of(ledger.gpus().at("local-1"));
  CHECK(v.verdict == pclient::BurnVerdict::kFail);
  REQUIRE(v.failures.size() == 3);
  CHECK(v.failures[1] == "its process 4242 killed by signal 9 (Killed)");
  CHECK(v.failures[2] == "left the cluster 2.0 s into the burn: its process 4242 killed by signal 9 (Killed); "
                         "psched: lost: connection lost");
  CHECK(ledger.verdict_of(ledger.gpus().at("local-0")).verdict == pclient::BurnVerdict::kPass);
}
