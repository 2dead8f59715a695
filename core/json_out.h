// Writing JSON through one interface into either of two outputs: JsonText appends the text as it
// goes, JsonDoc builds a nlohmann::json document. A writer of a document (core/worker_info_json.h's
// keys, scheduler/dashboard/status_json.cpp's /api/status) is written once, as a template over the output:
// text where the document is large and only sent (/api/status of thousands of workers and their
// jobs is megabytes, and building it as a document first stalled psched's loop: bench/README.md),
// a document where it is handed on (pbench's --json, the Python client's dicts).
//   out.begin_object(); out.key("id").value(7); out.key("gpu").null(); out.end_object();
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace psched {

// JSON text, compact (no spaces), as nlohmann's dump() writes it: a double that is whole keeps
// ".0", and one that is not finite is null; bytes that are not UTF-8 become U+FFFD, as dump()'s
// error_handler_t::replace does (names come from peers).
class JsonText {
 public:
  JsonText() = default;
  explicit JsonText(size_t expected_bytes) { out_.reserve(expected_bytes); }
  JsonText& begin_object() { return open('{'); }
  JsonText& end_object() { return close('}'); }
  JsonText& begin_array() { return open('['); }
  JsonText& end_array() { return close(']'); }
  JsonText& key(std::string_view k) {
    separate();
    quoted(k);
    out_ += ':';
    after_key_ = true;
    return *this;
  }
  JsonText& null() {
    separate();
    out_ += "null";
    return *this;
  }
  JsonText& value(std::nullptr_t) { return null(); }
  JsonText& value(bool b) {
    separate();
    out_ += b ? "true" : "false";
    return *this;
  }
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  JsonText& value(T n) {
    separate();
    fmt::format_to(std::back_inserter(out_), "{}", n);
    return *this;
  }
  JsonText& value(double d) {
    separate();
    if (!std::isfinite(d)) {
      out_ += "null";
      return *this;
    }
    const size_t at = out_.size();
    fmt::format_to(std::back_inserter(out_), "{}", d);  // the shortest digits that read back as d
    if (out_.find_first_of(".eE", at) == std::string::npos) out_ += ".0";
    return *this;
  }
  JsonText& value(float f) { return value(double(f)); }
  JsonText& value(std::string_view s) {
    separate();
    quoted(s);
    return *this;
  }
  JsonText& value(const std::string& s) { return value(std::string_view(s)); }
  JsonText& value(const char* s) { return value(std::string_view(s)); }
  JsonText& value(const std::vector<std::string>& list) {
    begin_array();
    for (const std::string& s : list) value(s);
    return end_array();
  }

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  JsonText& open(char c) {
    separate();
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  JsonText& close(char c) {
    out_ += c;
    first_.pop_back();
    return *this;
  }
  // A comma before every member or element but the first of its container.
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (first_.empty()) return;
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
  void quoted(std::string_view s);

  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

// The same calls, building a nlohmann::json document (take() it when the outermost value ends).
class JsonDoc {
 public:
  JsonDoc& begin_object() { return open(nlohmann::json::object()); }
  JsonDoc& end_object() { return close(); }
  JsonDoc& begin_array() { return open(nlohmann::json::array()); }
  JsonDoc& end_array() { return close(); }
  JsonDoc& key(std::string_view k) {
    key_ = std::string(k);
    return *this;
  }
  JsonDoc& null() { return value(nullptr); }
  template <typename T>
  JsonDoc& value(const T& v) {
    place(nlohmann::json(v));
    return *this;
  }
  JsonDoc& value(double d) {
    place(std::isfinite(d) ? nlohmann::json(d) : nlohmann::json(nullptr));
    return *this;
  }
  nlohmann::json take() { return std::move(root_); }

 private:
  JsonDoc& open(nlohmann::json container) {
    open_.push_back(&place(std::move(container)));
    return *this;
  }
  JsonDoc& close() {
    open_.pop_back();
    return *this;
  }
  nlohmann::json& place(nlohmann::json v) {
    if (open_.empty()) return root_ = std::move(v);
    nlohmann::json& at = *open_.back();
    if (at.is_array()) {
      at.push_back(std::move(v));
      return at.back();
    }
    return at[key_] = std::move(v);
  }

  nlohmann::json root_;
  std::vector<nlohmann::json*> open_;  // the containers being written, innermost last
  std::string key_;
};

}  // namespace psched
