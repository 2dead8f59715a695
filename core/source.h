// Source: where a job's elements come from (docs/design.md, "The job"). A job is a source x an
// expression x a selection x reductions; this header says what a source may be. Either a generator
// (core/generators.h: the element is a function of its global index) or an array stored in files that
// every worker can read at the same path (a shared filesystem, or the same copy on every node). What
// is stored is described here in full, so a worker needs nothing but the JobSpec: the client reads
// the header or metadata once (storage/open.h), the scheduler never touches the data, and each
// worker reads the chunks it is given (storage/chunk_reader.h, one file per kind of source).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace psched {

enum class SourceKind : uint8_t {
  kGenerator = 0,  // JobSpec::generator and its parameters
  kNpy = 1,        // a NumPy .npy file (header versions 1-3, C or Fortran order)
  kRaw = 2,        // a raw binary file: shape, dtype, byte order and offset given by the user
  kNpyStack = 3,   // a directory of .npy files stacked along axis 0 (da.to_npy_stack's layout)
  kZarr = 4,       // a Zarr v2 directory store
};

// Zarr chunk compressors read through their own libraries (libzstd, libblosc).
enum class Compressor : uint8_t { kNone = 0, kZstd = 1, kBlosc = 2 };

// One file of an .npy stack: rows [first_row, first_row + rows) of the array.
struct StackFile {
  std::string name;  // inside StoredArray::path
  uint64_t rows = 0;
  uint64_t data_offset = 0;  // bytes of header before element 0
  bool fortran_order = false;
};

// An array in files. Elements are JobSpec::dtype (any of core/job_spec.h's DTypes) in the byte
// order below; 2-D rows x cols as the JobSpec says (a 1-D array is one row; an N-D C-order array
// is read as 2-D, its leading axes flattened into rows).
struct StoredArray {
  SourceKind kind = SourceKind::kGenerator;
  std::string path;            // the file (npy, raw) or directory (npy stack, zarr)
  bool big_endian = false;     // the elements' byte order
  bool fortran_order = false;  // npy, raw: column-major
  uint64_t data_offset = 0;    // npy, raw: bytes before element 0
  std::vector<StackFile> files;  // npy stack: along axis 0, in order (their rows add up to rows)
  // Zarr: the store's chunk shape (the job's chunks are whole multiples of it), its compressor,
  // the fill value of chunks with no file (the element's bytes, little-endian, in its low bytes),
  // how chunk keys are joined ('.' or '/') and whether the store is 1-D (keys "j", not "i.j").
  uint64_t store_chunk_rows = 0, store_chunk_cols = 0;
  Compressor compressor = Compressor::kNone;
  uint64_t fill_bits = 0;
  bool has_fill_value = true;  // false (fill_value null): a missing chunk file is an error
  char dimension_separator = '.';
  bool one_dimensional = false;

  bool stored() const { return kind != SourceKind::kGenerator; }
};

const char* source_kind_name(SourceKind k);  // "generator", "npy", "raw", "npy-stack", "zarr"
const char* compressor_name(Compressor c);   // "none", "zstd", "blosc"

}  // namespace psched
