#include <catch2/catch.hpp>

#include "core/closed_form.h"
#include "core/job_spec.h"
#include "core/partial.h"

using namespace psched;

TEST_CASE("the default job is the DeepOps benchmark and is valid", "[job_spec]") {
  JobSpec s;
  CHECK(validate(s));
  CHECK(s.bytes() == 2000000000000ull);
  CHECK(expected_result(s).count == 250000ull * 250000ull);
  CHECK(expected_result(s).mean == 11.0);
}

TEST_CASE("every bad field is refused with a message naming it", "[job_spec]") {
  auto refused = [](JobSpec s, const char* word) {
    const Status st = validate(s);
    INFO(st.message());
    CHECK_FALSE(st);
    CHECK(st.message().find(word) != std::string::npos);
  };
  JobSpec s;
  s.rows = 0; refused(s, "rows");
  s = {}; s.chunk_rows = 0; refused(s, "chunk-x");
  s = {}; s.chunk_cols = 0; refused(s, "chunk-y");
  s = {}; s.row_sel.step = 0; refused(s, "row-step");
  s = {}; s.col_sel.stop = s.cols + 1; refused(s, "col-stop");
  s = {}; s.param1 = -1; refused(s, "std");
  s = {}; s.param0 = std::numeric_limits<double>::quiet_NaN(); refused(s, "mean");
  s = {}; s.rows = s.cols = uint64_t(1) << 40; refused(s, "overflows");
  s = {}; s.chunk_rows = s.chunk_cols = 100000; refused(s, "chunk");
  s = {}; s.rows = s.cols = uint64_t{1} << 21; s.chunk_rows = s.chunk_cols = 1; refused(s, "chunks");
  s = {}; s.generator = Generator(9); refused(s, "generator");
  s = {}; s.scale = std::numeric_limits<double>::infinity(); refused(s, "scale");
}

TEST_CASE("arange closed form is exact for the sum of integers", "[closed_form]") {
  JobSpec s;
  s.generator = Generator::kArange;
  s.param0 = 0;
  s.param1 = 1;
  s.rows = 3;
  s.cols = 4;
  s.offset = 0;
  s.row_sel = {0, kToEnd, 1};
  s.col_sel = {0, kToEnd, 1};
  auto e = expected_result(s);
  CHECK(e.count == 12);
  CHECK(e.sum == 66.0);
  CHECK(e.sum_exact);
  s.row_sel = {1, 3, 2};  // row 1 only
  s.col_sel = {1, kToEnd, 2};  // cols 1, 3
  s.offset = 1;
  e = expected_result(s);
  CHECK(e.count == 2);
  CHECK(e.sum == (5 + 1) + (7 + 1));
  CHECK(e.min == 6);
  CHECK(e.max == 8);
}

TEST_CASE("a selection index that is a wrapped negative number is refused as one", "[job_spec]") {
  JobSpec s;
  s.rows = 1000;
  s.row_sel.stop = uint64_t(-7);  // what `job.row_stop = -7` stores in pclient::Job
  const Status st = validate(s);
  INFO(st.message());
  CHECK_FALSE(st);
  CHECK(st.message().find("row-stop must be from 0 to 1000") != std::string::npos);
  CHECK(st.message().find("= -7 wrapped to unsigned?") != std::string::npos);
}

TEST_CASE("a stored array's job is refused naming what it gets wrong", "[job_spec][stored]") {
  JobSpec s;
  s.rows = 100;
  s.cols = 50;
  s.chunk_rows = 20;
  s.chunk_cols = 50;
  s.dtype = DType::kInt32;
  s.scale = 1;
  s.offset = 0;
  s.stored.kind = SourceKind::kNpy;
  s.stored.path = "/data/x.npy";
  CHECK(validate(s).is_ok());
  auto refused = [&](JobSpec bad, const std::string& words) {
    const Status st = validate(bad);
    INFO(st.message());
    CHECK((!st.is_ok() && st.message().find(words) != std::string::npos));
  };
  JobSpec generated = s;
  generated.stored = StoredArray{};
  refused(generated, "a generated array is float64 or float32 (got int32)");
  JobSpec no_path = s;
  no_path.stored.path.clear();
  refused(no_path, "needs a path");
  JobSpec fused = s;
  fused.fused = true;
  refused(fused, "--fused");
  JobSpec stack = s;
  stack.stored.kind = SourceKind::kNpyStack;
  stack.stored.files = {StackFile{"0.npy", 60, 128, false}, StackFile{"1.npy", 30, 128, false}};
  refused(stack, "hold 90 rows, the array 100");
  stack.stored.files[1].name = "../1.npy";
  refused(stack, "plain name");
  JobSpec zarr = s;
  zarr.stored.kind = SourceKind::kZarr;
  zarr.stored.store_chunk_rows = 8;
  zarr.stored.store_chunk_cols = 50;
  refused(zarr, "whole multiples of the zarr store's chunks 8 x 50");
  zarr.stored.store_chunk_rows = 10;
  CHECK(validate(zarr).is_ok());
  JobSpec kind = s;
  kind.stored.kind = SourceKind(200);
  refused(kind, "source kind code 200");
}
