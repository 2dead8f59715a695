// .zarray metadata as users' files hold it: every value of the wrong kind is refused with a message
// naming the key, never an exception (nlohmann's value() threw type_error out of pbench and the
// Python module for "zarr_format": "2").
#include <catch2/catch.hpp>

#include "storage/npy.h"
#include "storage/zarr.h"

namespace psched {
namespace {

std::string with(const std::string& extra) {
  return R"({"zarr_format": 2, "shape": [10, 4], "chunks": [5, 4], "dtype": "<f8")" + extra + "}";
}

TEST_CASE("a .zarray as zarr writes it is read", "[storage]") {
  auto m = parse_zarray(with(R"(, "order": "C", "filters": null, "fill_value": "NaN", "dimension_separator": "/",
                                "compressor": {"id": "blosc", "cname": "zstd", "clevel": 5, "shuffle": 1})"));
  REQUIRE(m);
  CHECK(m->shape == std::vector<uint64_t>{10, 4});
  CHECK(m->chunks == std::vector<uint64_t>{5, 4});
  CHECK(m->compressor == Compressor::kBlosc);
  CHECK(m->blosc_cname == "zstd");
  CHECK(m->dimension_separator == '/');
  CHECK(m->has_fill_value);
  // What zarray_json writes reads back the same.
  auto again = parse_zarray(zarray_json(*m));
  REQUIRE(again);
  CHECK(again->shape == m->shape);
  CHECK(again->chunks == m->chunks);
  CHECK(again->compressor == m->compressor);
  CHECK(again->dimension_separator == m->dimension_separator);
}

TEST_CASE("a .zarray value of the wrong kind gets a message naming it", "[storage]") {
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {R"({"zarr_format": "2", "shape": [10], "chunks": [5], "dtype": "<f8"})", "zarr_format must be 2"},
      {R"({"zarr_format": 2.0, "shape": [10], "chunks": [5], "dtype": "<f8"})", "zarr_format must be 2"},
      {R"({"shape": [10], "chunks": [5], "dtype": "<f8"})", "zarr_format must be 2"},
      {with(R"(, "order": 67)"), "order is 67, not a string"},
      {with(R"(, "order": "F")"), "order must be \"C\""},
      {with(R"(, "dimension_separator": 1)"), "dimension_separator is 1, not a string"},
      {with(R"(, "dimension_separator": "")"), "dimension_separator must be"},
      {with(R"(, "compressor": {"id": 5})"), "compressor {\"id\":5} is not supported"},
      {with(R"(, "compressor": {"id": "blosc", "cname": ["lz4"]})"), "compressor's cname is [\"lz4\"], not a string"},
      {with(R"(, "compressor": "zstd")"), "compressor \"zstd\" is not supported"},
      {with(R"(, "fill_value": [1])"), "fill_value [1] is not a number"},
      {with(R"(, "filters": [{"id": "delta"}])"), "filters"},
      {R"({"zarr_format": 2, "shape": [10, "4"], "chunks": [5, 4], "dtype": "<f8"})", "shape holds \"4\""},
      {R"({"zarr_format": 2, "shape": [10], "chunks": [0], "dtype": "<f8"})", "chunks must be > 0"},
      {R"({"zarr_format": 2, "shape": [10], "chunks": [5], "dtype": 8})", "structured dtypes"},
      {R"({"zarr_format": 2, "shape": [10], "chunks": [5], "dtype": "<f8\n\u001b[2J"})", "'<f8??[2J' is not"},
      {with(R"(, "fill_value": ")" + std::string(5000, 'x') + "\""), "is not a number"},
      {R"([2])", "not valid JSON"},
      {R"({"zarr_format": 2,)", "not valid JSON"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto m = parse_zarray(c.text);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.message(), Catch::Contains(c.message));
    CHECK(m.message().find('\n') == std::string::npos);
    CHECK(m.message().size() < 400);
  }
}

TEST_CASE("a .npy header's unknown key is quoted on one short line", "[storage]") {
  const std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), '\x1b]0;" +
                           std::string(3000, 'k') + "': 1, }";
  std::string npy = std::string("\x93NUMPY\x02", 7) + '\0';
  for (int k = 0; k < 4; ++k) npy.push_back(char((dict.size() >> (8 * k)) & 0xff));
  auto h = parse_npy_header(npy + dict);
  REQUIRE_FALSE(h);
  CHECK_THAT(h.message(), Catch::StartsWith(".npy header: unknown key '?]0;kkk"));
  CHECK(h.message().size() < 100);
}

}  // namespace
}  // namespace psched
