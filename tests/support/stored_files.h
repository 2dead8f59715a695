// Shared by the tests that write stored arrays and read them back (tests/worker/
// chunk_reader_form_test.cpp, tests/gpu/cuda_stored_test.cpp): a temporary directory, a file of
// bytes, and a job over the whole of a file as the client opens it (storage/open.h).
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "storage/open.h"

namespace psched::stored_test {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& prefix)
      : path(fs::temp_directory_path() / (prefix + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

inline void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// A job over the whole array at `path` (its own chunks unless given).
inline JobSpec opened(const fs::path& path, uint64_t chunk_rows = 0, uint64_t chunk_cols = 0) {
  ArrayInput input;
  input.path = path.string();
  auto a = open_array(input);
  INFO(a.message());
  REQUIRE(a.is_ok());
  JobSpec s = whole_array_job(*a);
  if (chunk_rows) s.chunk_rows = chunk_rows;
  if (chunk_cols) s.chunk_cols = chunk_cols;
  return s;
}

// A raw file as a user names it (pbench --input PATH --format raw --dtype D --shape R,C --data-offset N).
inline ArrayInput raw_input(const fs::path& path, const std::string& dtype, std::vector<uint64_t> shape,
                            uint64_t offset) {
  ArrayInput input;
  input.path = path.string();
  input.format = "raw";
  input.dtype = dtype;
  input.shape = std::move(shape);
  input.offset = offset;
  return input;
}

}  // namespace psched::stored_test
