// The NumPy .npy format (numpy.lib.format): a magic string, a version (1.0, 2.0 or 3.0), a header
// length and a Python dict literal {'descr': '<f8', 'fortran_order': False, 'shape': (r, c), }
// padded to a multiple of 64 bytes, then the elements. Read by the client (storage/open.h) to
// describe a job, and written by pbench --write-npy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "storage/typestr.h"

namespace psched {

struct NpyHeader {
  ElementType type;
  bool fortran_order = false;
  std::vector<uint64_t> shape;  // () for a scalar
  uint64_t data_offset = 0;     // bytes before element 0

  uint64_t elements() const;
};

// The header of the file at `path`; the message names the path and what is wrong.
StatusOr<NpyHeader> read_npy_header(const std::string& path);
// The header in the first bytes of a file (`prefix`: at least what the header needs).
StatusOr<NpyHeader> parse_npy_header(const std::string& prefix);
// A version 1.0 header (2.0 when the dict does not fit 65535 bytes) for these elements, padded so
// the data starts at a multiple of 64 bytes.
std::string npy_header(ElementType type, bool fortran_order, const std::vector<uint64_t>& shape);

}  // namespace psched
