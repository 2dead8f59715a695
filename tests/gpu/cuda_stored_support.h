// What the GPU tests of stored arrays share (cuda_stored_test.cpp, cuda_registered_test.cpp):
// every chunk of a job checked against the CPU reference, and normal(11, 1) .npy files and stacks.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "storage/chunk_reader.h"
#include "storage/npy.h"
#include "tests/support/stored_files.h"

namespace psched::gpu_test {

using namespace psched::stored_test;


// Every chunk of the job through the CUDA backend and through the CPU reference: the same bits, as
// a sum-only job and as a var/std job (its squares too).
inline void require_gpu_equals_cpu(Backend& backend, Outcomes& outcomes, JobSpec spec, uint64_t job_id) {
  for (const bool squares : {false, true}) {
    spec.squares = squares;
    auto prepared_spec = prepared(spec);
    const auto gpu = run_job(backend, outcomes, prepared_spec, job_id * 2 + squares);
    ChunkReader reader;
    std::vector<double> scratch;
    for (const ChunkOutcome& o : gpu) {
      PartialSum cpu;
      const Status st = reduce_stored_chunk_cpu(*prepared_spec, o.chunk, reader, scratch, cpu);
      INFO("chunk " << o.chunk << (squares ? " (var/std)" : "") << ": " << st.message());
      REQUIRE(st.is_ok());
      CHECK(same_bits(expand(o.partial), cpu));
    }
  }
}

// A C-order float64 .npy of rows x cols normal(11, 1) elements.
inline void write_normal_npy(const fs::path& path, uint64_t rows, uint64_t cols, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(11, 1);
  std::vector<double> x(rows * cols);
  for (double& v : x) v = normal(rng);
  write_bytes(path, npy_header({DType::kFloat64, false}, false, {rows, cols}) + bytes_of(x));
}

// An npy stack in `dir`: file k ("k.npy") holds rows[k] rows of `cols` (write_normal_npy).
inline void write_normal_stack(const fs::path& dir, const std::vector<uint64_t>& rows, uint64_t cols,
                        std::mt19937_64& rng) {
  fs::create_directories(dir);
  for (size_t k = 0; k < rows.size(); ++k) write_normal_npy(dir / (std::to_string(k) + ".npy"), rows[k], cols, rng);
}

}  // namespace psched::gpu_test
