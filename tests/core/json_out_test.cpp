// core/json_out.h: JsonText writes what nlohmann's dump() writes for the same document (escapes,
// bytes that are not UTF-8, whole and odd doubles), and JsonDoc builds that document; so a writer
// templated over the output gives one document either way.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "core/json_out.h"
#include "core/worker_info_json.h"
#include "core/worker_info.h"

using namespace psched;
using nlohmann::json;

namespace {

// Every kind of value, in objects and arrays nested two deep, including empty ones.
template <typename Out>
void write_sample(Out& out) {
  out.begin_object();
  out.key("text").value("plain, \"quoted\", back\\slash, tab\t, newline\n, bell\x07, é, 日本");
  out.key("not utf-8").value(std::string("a\xff" "b\xc3" "c\xed\xa0\x80" "d\xf0\x82\x82\xac" "e"));
  out.key("\"odd\" key\n").value(true);
  out.key("false").value(false);
  out.key("null").null();
  out.key("unsigned").value(uint64_t{18446744073709551615u});
  out.key("signed").value(int64_t{-9223372036854775807 - 1});
  out.key("small").value(uint32_t{7});
  out.key("whole double").value(100.0);
  out.key("doubles").begin_array();
  for (double d : {0.1, -2.5e-300, 1e20, 123456789.125, 0.0, -0.0, 1.0 / 3.0, 5e-324,
                   std::numeric_limits<double>::max()})
    out.value(d);
  out.end_array();
  out.key("not finite").begin_array();
  out.value(std::nan("")).value(std::numeric_limits<double>::infinity());
  out.end_array();
  out.key("empty object").begin_object().end_object();
  out.key("empty array").begin_array().end_array();
  out.key("names").value(std::vector<std::string>{"a", "b"});
  out.key("rows").begin_array();
  for (int i = 0; i < 3; ++i) {
    out.begin_object();
    out.key("i").value(i);
    out.key("nested").begin_array().value(i).begin_object().key("deep").value("yes").end_object().end_array();
    out.end_object();
  }
  out.end_array();
  out.end_object();
}

}  // namespace

TEST_CASE("JsonText writes what dump() writes of the document JsonDoc builds from the same calls", "[json]") {
  JsonText text;
  write_sample(text);
  JsonDoc doc;
  write_sample(doc);
  const json built = doc.take();
  const std::string dumped = built.dump(-1, ' ', false, json::error_handler_t::replace);
  const json parsed = json::parse(text.text());
  // JsonText keeps the order written where a document sorts its keys: the same document, and the
  // same text once parsed and dumped, U+FFFD where dump() puts it included.
  CHECK(parsed == json::parse(dumped));
  CHECK(parsed.dump() == dumped);
  CHECK(text.text().find("\"whole double\":100.0") != std::string::npos);
  CHECK(text.text().find("\"not finite\":[null,null]") != std::string::npos);
  CHECK(text.text().find("bell\\u0007") != std::string::npos);
  for (size_t i = 0; i < built["doubles"].size(); ++i) {
    const double d = parsed["doubles"][i].get<double>();
    CHECK(std::signbit(d) == std::signbit(built["doubles"][i].get<double>()));
    CHECK(d == built["doubles"][i].get<double>());  // the shortest digits read back as the same double
  }
}

TEST_CASE("a worker written as text is the document worker_info_json builds", "[json]") {
  WorkerInfo w;
  w.id = 12;
  w.name = "gpu \"7\"";
  w.host = "node-3";
  w.backend = "cuda";
  w.device_name = "NVIDIA H100 80GB HBM3";
  w.compute_major = 9;
  w.busy_seconds = 2.5;
  GpuHealth g;
  g.uuid = "GPU-1";
  g.sm_clock_mhz = 1980;
  g.throttle_reasons = 0x4;
  g.pcie_width = 8;
  g.pcie_max_width = 16;
  w.gpu = g;
  JsonText text;
  text.begin_object();
  write_worker_info_members(text, w);
  text.end_object();
  const json doc = worker_info_json(w);
  CHECK(json::parse(text.text()) == doc);
  CHECK(doc["compute_capability"] == "9.0");
  CHECK(doc["gpu"]["warnings"].size() == 2);  // throttled, and the narrow link
}
