// Honest partials that look odd are taken (issue 49: psched checks each partial against its range
// before it trusts it, scheduler/partial_check.h): a stored float64 array whose chunks hold a sum
// past DBL_MAX (one infinite exact term), NaN alone (no min, no max), and both infinities, summed
// by a real worker through a real psched: nothing refused, no retry, every figure as numpy's.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <vector>

#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

TEST_CASE("a stored array's chunks of NaN alone, infinities and a sum past DBL_MAX are taken as sent",
          "[e2e]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  const double big = std::numeric_limits<double>::max(), inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // 4 x 4 in 2 x 2 chunks: chunk 0 four DBL_MAX, chunk 1 four NaN, chunk 2 +inf, -inf, 1, 2,
  // chunk 3 1, 2, 3, 4.
  const std::vector<double> data = {big, big, nan, nan,  big, big, nan, nan,
                                    inf, -inf, 1, 2,     1, 2, 3, 4};
  const std::string path = cluster.dir() + "/specials.f64";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()),
                                              std::streamsize(data.size() * sizeof(double)));
  pclient::Input input;
  input.path = path;
  input.format = "raw";
  input.dtype = "float64";
  input.shape = {4, 4};
  pclient::Job job = pclient::open_array(input);
  job.chunk_rows = 2;
  job.chunk_cols = 2;
  auto client = cluster.client();

  const pclient::Result all = client.run(job);
  CHECK(std::isnan(all.sum));
  CHECK(all.count == 16);
  CHECK(all.nan_count == 4);
  CHECK(all.pos_inf_count == 2);  // the +inf element, and chunk 0's sum past DBL_MAX
  CHECK(all.neg_inf_count == 1);
  CHECK(all.min == -inf);
  CHECK(all.max == inf);
  CHECK(all.retries == 0);

  job.row_stop = 2;  // chunk 0 and chunk 1's NaN
  job.col_stop = 2;
  const pclient::Result overflow = client.run(job);
  CHECK(overflow.sum == inf);
  CHECK(overflow.count == 4);
  CHECK(overflow.max == big);
  CHECK(overflow.retries == 0);

  job.col_start = 2;  // chunk 1 alone: NaN only
  job.col_stop = 4;
  const pclient::Result nans = client.run(job);
  CHECK(std::isnan(nans.sum));
  CHECK(nans.count == 4);
  CHECK(nans.nan_count == 4);
  CHECK(nans.retries == 0);
  CHECK(cluster.log_of(cluster.scheduler_pid()).find("cannot be true") == std::string::npos);
}
