// pbench --write-npy and --write-zarr: a generated array written to files, each element the
// generator's own (core/generators.h, through the CPU kernels) as the job's dtype stores it, so
// that summing the file (--input) and running the generator job give the same bits.
#pragma once

#include <string>

#include "core/job_spec.h"
#include "core/status.h"

namespace pbench {

// The array of `spec` (a generated one, validated and normalized) as one C-order .npy file. A
// regular file at `path` (new, or one that exists: replaced, keeping its permissions; through a
// symbolic link, the file it names) is written as PATH.partial-PID beside it and renamed to `path`
// once whole, so `path` never holds half an array, even if pbench is killed. On a failure (the disk
// full, a size limit) that partial file is removed and the message names `path` and the OS error;
// a file that was there is as it was. Anything else that exists at `path` (a device: /dev/null,
// /dev/full; a FIFO) is written in place and never removed.
psched::Status write_npy(const psched::JobSpec& spec, const std::string& path);
// The array as a Zarr v2 directory store whose chunks are the job's chunks, compressed with
// `compressor`: none, zstd, blosc-lz4, blosc-zstd or blosc-zlib. The whole store is written into a
// new directory PATH.partial-PID beside `path` and renamed to `path` once whole, so `path` never
// holds half a store, even if pbench is killed. At `path` there may be nothing, an empty directory,
// or a Zarr array store (a directory holding .zarray; through a symbolic link, the one it names),
// which is replaced whole, keeping its permissions: exchanged at once with the new store, then
// removed. Anything else there (a file, a directory of other things) is refused before anything is
// written (a usage error). On a failure (the disk full, a size limit) the partial directory, and
// only it, is removed, a store that was there is as it was, and the message names `path` and the
// OS error.
psched::Status write_zarr(const psched::JobSpec& spec, const std::string& path, const std::string& compressor);

}  // namespace pbench
