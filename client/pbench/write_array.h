// pbench --write-npy and --write-zarr: a generated array written to files, each element the
// generator's own (core/generators.h, through the CPU kernels) as the job's dtype stores it, so
// that summing the file (--input) and running the generator job give the same bits.
#pragma once

#include <string>

#include "core/job_spec.h"
#include "core/status.h"

namespace pbench {

// The array of `spec` (a generated one, validated and normalized) as one C-order .npy file.
psched::Status write_npy(const psched::JobSpec& spec, const std::string& path);
// The array as a Zarr v2 directory store whose chunks are the job's chunks, compressed with
// `compressor`: none, zstd, blosc-lz4, blosc-zstd or blosc-zlib.
psched::Status write_zarr(const psched::JobSpec& spec, const std::string& path, const std::string& compressor);

}  // namespace pbench
