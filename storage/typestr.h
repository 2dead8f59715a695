// NumPy's array-protocol type strings ("<f8", "|b1", ">i4"), as .npy headers and Zarr's .zarray
// write an element's type and byte order: the one translation between them and our DType.
#pragma once

#include <string>

#include "core/job_spec.h"
#include "core/status.h"

namespace psched {

struct ElementType {
  DType dtype = DType::kFloat64;
  bool big_endian = false;
};

// "<f8" -> float64 little-endian; '|' and '=' (native: this is little-endian x86-64 or Arm) are
// little-endian. Anything we cannot sum (complex, strings, datetimes, structured, float16) is
// refused naming it.
StatusOr<ElementType> parse_typestr(const std::string& typestr);
std::string typestr(ElementType t);  // "<f8", "|b1", ">i4"

}  // namespace psched
