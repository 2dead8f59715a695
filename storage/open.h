// Opening an array in files for a job: what the client does before it submits (pbench --input,
// Python's psched.array.from_npy & co., pclient::Job::input). It reads the header or metadata (never
// the data), checks that the path exists and is readable, that the type is one we sum and that the
// files hold what the header says, and describes the array in full for the workers
// (core/source.h). Every refusal is one line naming the path and what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/job_spec.h"
#include "core/source.h"
#include "core/status.h"

namespace psched {

// What the user says of the array.
struct ArrayInput {
  std::string path;
  std::string format;           // "" (from the path), "npy", "npy-stack", "raw" or "zarr"
  std::string dtype;            // raw: the element type (float64, int32, ...)
  std::vector<uint64_t> shape;  // raw: 1-D, 2-D, or N-D read as 2-D (leading axes flattened)
  uint64_t offset = 0;          // raw: bytes before element 0
  std::string byte_order;       // raw: "little" (the default) or "big"
};

struct OpenedArray {
  StoredArray stored;
  DType dtype = DType::kFloat64;
  uint64_t rows = 0, cols = 0;
  // The array's own shape, as its header, .zarray or the user (raw) says: rows x cols is its 2-D
  // view. Clients show it (a 1-D array and a 1 x n one are both one row).
  std::vector<uint64_t> shape;
  // The chunking a job gets unless it asks for another: a Zarr store's own chunks, else whole
  // rows of about kDefaultChunkElements elements.
  uint64_t chunk_rows = 0, chunk_cols = 0;
};

inline constexpr uint64_t kDefaultChunkElements = uint64_t{1} << 24;  // 128 MB of float64

StatusOr<OpenedArray> open_array(const ArrayInput& input);

// The job that sums the whole opened array: the source, its shape and default chunks, the
// expression x itself (scale 1, offset 0), every element selected.
JobSpec whole_array_job(const OpenedArray& array);

}  // namespace psched
