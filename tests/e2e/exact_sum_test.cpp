// The exact sum end to end (issue 16): a job's result is the correctly rounded sum of its selected
// elements, so a normal job (non-integer data, where a float64 sum's bits depend on the order)
// gives the same sum, min, max, count and exact terms for every chunking, worker count, CPU kernel
// build and a worker killed mid-job; arange matches its integer closed form bit for bit past 2^53;
// and a reference value checks bit for bit.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/closed_form.h"
#include "core/reference_sums.h"
#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

pclient::Job normal_job(uint64_t chunk_rows, uint64_t chunk_cols) { return ragged_normal_job(chunk_rows, chunk_cols, 1616); }

const std::vector<std::pair<uint64_t, uint64_t>>& kChunkings = kRaggedChunkings;

uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Every figure of the result that must not move, bit for bit.
struct Bits {
  uint64_t sum, min, max, count;
  std::vector<uint64_t> terms;
  bool operator==(const Bits&) const = default;
};

Bits bits_of(const pclient::Result& r) {
  Bits b{bits(r.sum), bits(r.min), bits(r.max), r.count, {}};
  for (double t : r.exact_terms) b.terms.push_back(bits(t));
  return b;
}

}  // namespace

TEST_CASE("a normal job gives the same bits for every chunking, worker count and kernel build",
          "[exact]") {
  // The reference: one worker, one chunk.
  Bits want;
  {
    TestCluster cluster;
    cluster.add_worker({.threads = 1});
    cluster.wait_for_workers(1);
    const pclient::Result r = cluster.client().run(normal_job(300, 500));
    want = bits_of(r);
    REQUIRE(r.count == 100 * 250);
    REQUIRE(r.exact_terms.size() >= 1);
    CHECK(r.exact_terms[0] == r.sum);
    CHECK(check(normal_job(300, 500), r) == "");  // within the statistical bound, too
  }
  SECTION("1 and 3 workers, every chunking") {
    for (int workers : {1, 3}) {
      TestCluster cluster;
      for (int i = 0; i < workers; ++i) cluster.add_worker({.threads = 1});
      cluster.wait_for_workers(size_t(workers));
      pclient::Client client = cluster.client();
      for (const auto& [cr, cc] : kChunkings) {
        INFO(workers << " workers, chunks " << cr << "x" << cc);
        CHECK(bits_of(client.run(normal_job(cr, cc))) == want);
      }
    }
  }
  SECTION("the baseline, AVX2 and AVX-512 kernels") {
    for (const char* isa : {"baseline", "avx2", "avx512"}) {
      TestCluster cluster;
      cluster.add_worker({.threads = 2, .env = {{"PSCHED_CPU_KERNELS", isa}}});
      cluster.wait_for_workers(1);
      INFO(isa);
      CHECK(bits_of(cluster.client().run(normal_job(37, 53))) == want);
    }
  }
  SECTION("a worker killed mid-job") {
    bool killed = false;
    const pclient::Result r = run_with_a_worker_killed(normal_job(30, 50), killed);  // 100 chunks
    REQUIRE(killed);
    CHECK(r.retries >= 1);
    CHECK(bits_of(r) == want);
  }
}

TEST_CASE("a streamed chunk partial carries its exact sum, and they merge into the result's",
          "[exact]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 2});
  cluster.wait_for_workers(1);
  const pclient::Job job = normal_job(37, 53);
  psched::ExactSum merged;
  uint64_t partials = 0;
  pclient::RunOptions options;
  options.want_partials = true;
  options.on_progress = [&](const pclient::Progress& p) {
    for (const auto& c : p.partials) {
      merged.add_terms(c.exact_terms.data(), c.exact_terms.size());
      merged.normalize();
      ++partials;
    }
  };
  const pclient::Result r = cluster.client().run(job, options);
  CHECK(partials == job.chunks());
  CHECK(bits(merged.rounded()) == bits(r.sum));
  psched::ExactSum result;
  result.add_terms(r.exact_terms.data(), r.exact_terms.size());
  CHECK(psched::same_value(merged, result));
}

TEST_CASE("arange sums past 2^53 match the integer closed form bit for bit", "[exact]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 2});
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  // Elements 2^40 + 3 i: integers below 2^53, their sum near 2^60, where a float64 sum rounds.
  for (const auto& [cr, cc] : std::vector<std::pair<uint64_t, uint64_t>>{{400, 300}, {33, 29}, {1, 300}}) {
    pclient::Job j = arange_job(400, 300, cr, cc, 1, 1);
    j.param0 = 1099511627776.0;
    j.param1 = 3;
    const psched::Expectation e = psched::expected_result(pclient::job_spec_of(j));
    REQUIRE(e.sum_exact);
    REQUIRE(e.sum > 9007199254740992.0);
    const pclient::Result r = client.run(j);
    INFO(cr << "x" << cc);
    CHECK(bits(r.sum) == bits(e.sum));
    CHECK(check(j, r) == "");
  }
}

TEST_CASE("a job in the reference table checks bit for bit across chunkings, and one bit off fails",
          "[exact]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 2});
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  // The table's entry is what one worker computes in one chunk, whatever the element definition.
  const pclient::Result first = client.run(normal_job(300, 500));
  const psched::JobSpec spec = pclient::job_spec_of(normal_job(300, 500));
  const std::vector<psched::ReferenceSum> table = {{psched::reference_key(spec), first.sum}};
  for (const auto& [cr, cc] : kChunkings) {
    const pclient::Job j = normal_job(cr, cc);
    INFO(cr << "x" << cc);
    REQUIRE(psched::reference_sum(pclient::job_spec_of(j), table));  // chunking is not in the key
    const pclient::Result r = client.run(j);
    CHECK(psched::check_result(pclient::job_spec_of(j), pclient::partial_of(r), table) == "");
    psched::PartialSum off = pclient::partial_of(r);
    off.sum = std::nextafter(off.sum, 0.0);
    CHECK(psched::check_result(pclient::job_spec_of(j), off, table).find("reference value") !=
          std::string::npos);
  }
  // Another seed is another job: not in the table.
  pclient::Job other = normal_job(300, 500);
  other.seed = 1;
  CHECK_FALSE(psched::reference_sum(pclient::job_spec_of(other), table));
}
