// Status and StatusOr<T> (a value or the Status saying why not; named apart from pclient::Result, a
// job's figures): how a failure travels at the edges (flags, network input, files) with a
// message that names the bad value and a code that says what kind of failure it is, after leveldb's
// Status. Inside, invariants are asserted instead (core/check.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace psched {

// What kind of failure: the code is set where the failure is found, and a binary's exit code
// follows from it (app/exit_codes.h), so no caller decides that again.
enum class StatusCode : uint8_t {
  kOk,
  kFailed,      // the work could not be done: a port taken, a peer or a file system that failed
  kInvalid,     // what the user gave is wrong: an option, a value, a file's contents or mode
};

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(StatusCode::kFailed, std::move(message)); }
  static Status invalid(std::string message) { return Status(StatusCode::kInvalid, std::move(message)); }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(StatusCode code, std::string m) : code_(code), message_(std::move(m)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: must carry an error

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  const std::string& message() const { return status_.message(); }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

// Text a peer sent or a user's file holds (names, reasons, error messages, a .npy header's key, a
// .zarray's values), made safe to log, show or quote in a message: bytes outside printable ASCII
// (newlines, terminal escapes, invalid UTF-8) become '?' so that it cannot forge log lines, break a
// JSON encoder or a one-line message, and it is cut to max_bytes.
inline std::string printable(std::string_view text, size_t max_bytes = 256) {
  std::string out(text.substr(0, max_bytes));
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) c = '?';
  }
  return out;
}

}  // namespace psched
