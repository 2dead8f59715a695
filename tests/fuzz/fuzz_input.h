// The input format of fuzz_scheduler (see its header comment), shared with make_corpus, which
// writes the seed inputs kept in tests/fuzz/corpus/. Header-only: the fuzz targets are single files.
#pragma once

#include <capnp/message.h>

#include <cstdint>
#include <string>
#include <vector>

#include "net/framing.h"
#include "proto/psched.capnp.h"

namespace psched::fuzz {

constexpr const char* kToken = "fuzz-token";  // the scheduler under test requires it

enum class Role : uint8_t { kNone = 0, kClient = 1, kWorker = 2 };

struct Record {
  bool to_b = false;
  std::string body;  // one flat message, or anything
};

struct Input {
  bool raw = false;
  std::string raw_bytes;  // raw: written as is to connection A
  Role role_a = Role::kNone, role_b = Role::kNone;
  std::vector<Record> records;
};

inline Input parse_input(const uint8_t* data, size_t size) {
  Input in;
  if (size == 0) return in;
  const uint8_t mode = data[0];
  if (mode & 0x80) {
    in.raw = true;
    in.raw_bytes.assign(reinterpret_cast<const char*>(data + 1), size - 1);
    return in;
  }
  in.role_a = Role(mode % 3);
  in.role_b = Role(mode / 3 % 3);
  size_t at = 1;
  while (at + 3 <= size) {
    Record r;
    r.to_b = data[at] & 1;
    const size_t n = size_t(data[at + 1]) | size_t(data[at + 2]) << 8;
    at += 3;
    const size_t take = n < size - at ? n : size - at;
    r.body.assign(reinterpret_cast<const char*>(data + at), take);
    at += take;
    in.records.push_back(std::move(r));
  }
  return in;
}

inline std::string encode_input(const Input& in) {
  std::string out;
  if (in.raw) {
    out.push_back(char(0x80));
    return out + in.raw_bytes;
  }
  out.push_back(char(uint8_t(in.role_a) + 3 * uint8_t(in.role_b)));
  for (const auto& r : in.records) {
    out.push_back(char(r.to_b ? 1 : 0));
    out.push_back(char(r.body.size() & 0xff));
    out.push_back(char((r.body.size() >> 8) & 0xff));
    out += r.body;
  }
  return out;
}

// One frame carrying `body`, zero-padded to whole words (an empty body: a zero-length frame).
inline std::string frame_of_body(const std::string& body) {
  std::string padded = body;
  padded.resize((body.size() + 7) / 8 * 8, '\0');
  const uint32_t n = uint32_t(padded.size());
  std::string out = {char(n & 0xff), char((n >> 8) & 0xff), char((n >> 16) & 0xff), char((n >> 24) & 0xff)};
  return out + padded;
}

// The flat message (no length prefix) that `fill` builds.
template <typename Fill>
std::string flat_message(Fill&& fill) {
  capnp::MallocMessageBuilder m;
  fill(m.initRoot<wire::Message>());
  std::string frame;
  append_frame(m, frame);
  return frame.substr(kFrameHeaderBytes);
}

inline std::string hello_frame(Role role) {
  return frame_of_body(flat_message([&](wire::Message::Builder m) {
    auto h = m.initHello();
    h.setRole(role == Role::kWorker ? wire::Role::WORKER : wire::Role::CLIENT);
    h.setProtocolVersion(wire::PROTOCOL_VERSION);
    h.setName(role == Role::kWorker ? "fuzz-worker" : "fuzz-client");
    h.setToken(kToken);
    if (role == Role::kWorker) {
      auto w = h.initWorker();
      w.setBackend("cpu");
      w.setSlots(4);
    }
  }));
}

}  // namespace psched::fuzz
