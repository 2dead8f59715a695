// ChunkReader: how a worker reads a chunk of a stored array (core/source.h) into memory, as the
// doubles its backend reduces. One reader per thread (it keeps an open file, a staging buffer and
// a decompression context). One function per kind of source in chunk_reader.cpp: a flat file (npy,
// raw), an npy stack (flat files along axis 0), a Zarr store (a decompressed chunk per file).
//
// Every element widens to float64 exactly, except 64-bit integers past 2^53, which are rounded to
// the nearest double; the reader then hands back what rounding took from the selected elements
// (`residual`), so the job's exact sum stays the exact sum of the stored integers when the
// expression is x itself (scale 1, offset 0). A file that cannot be read fails the chunk with one
// line naming the path, the chunk and the reason; it never returns made-up elements.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/chunk_grid.h"
#include "core/exact_sum.h"
#include "core/job_spec.h"
#include "core/status.h"
#include "storage/mapped_file.h"

namespace psched {

class ReadPool;
class ZarrDecoder;

// How read() leaves the elements: widened to doubles (the CPU backend's form, and every dtype's),
// or as stored, element_bytes(dtype) each in the host's byte order, for a GPU that widens them as
// it reduces (stored_on_device): it copies half the bytes of a float32 array and an eighth of an
// int8 one across PCIe, and the host does not widen them first.
enum class ElementForm { kFloat64, kStored };

// The dtypes a GPU widens itself (exactly, as the host would): all but float64, which needs no
// widening, and the 64-bit integers, whose rounding the host measures (`residual`).
constexpr bool stored_on_device(DType d) {
  return d != DType::kFloat64 && d != DType::kInt64 && d != DType::kUInt64;
}

class ChunkReader {
 public:
  ChunkReader();
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;

  // Chunk `chunk` of spec (validated, normalized, spec.stored.stored()): the box's selected rows
  // (rows: the chunk's AxisRun of spec.row_sel, step spec.row_sel.step), every column of each, into
  // out at element (row - box.row0) * box.cols + (col - box.col0), as doubles or as stored (`form`;
  // kStored only where stored_on_device: a caller's bug otherwise); rows not selected are left as they were.
  // residual: when not null and the elements are 64-bit integers, what rounding them to doubles
  // lost, x - double(x), summed exactly over the selected elements (cols: the selected columns).
  // Files are opened afresh for each chunk (piece kFirst): a file replaced since (renamed over, as
  // a careful writer does) must never be read through the old one's descriptor. A caller reading
  // a chunk in pieces of rows passes kLater for the pieces after its first, and the files that
  // piece opened are read again: an open, fstat and close a piece cost 2.7-4 us against a 1 MiB
  // piece's ~100 us of read and reduce (a 2 GB .npy on this VM's two threads: 1.04 x kept). A
  // Zarr chunk's file is read by the first piece that needs it and its later pieces decode those
  // bytes (a blosc chunk only the blocks of their rows: ZarrDecoder::decode_blosc_range).
  enum class Piece { kFirst, kLater };
  Status read(const JobSpec& spec, uint64_t chunk, const ChunkBox& box, AxisRun rows, AxisRun cols,
              void* out, ExactSum* residual, ElementForm form = ElementForm::kFloat64,
              Piece piece = Piece::kFirst);

  // Whether a read() of a piece of a chunk's rows costs that piece alone for this array, so that a
  // caller may read a big chunk in pieces: flat files and stacks, and Zarr stores whose chunks span
  // the job chunk's columns, uncompressed or blosc (ZarrDecoder::decode_blosc_range). Not zstd: its
  // chunk is one stream, and each piece would decode it whole.
  static bool reads_pieces(const JobSpec& spec);

  // A piece of a chunk's rows (`box`, every column of the chunk) where it lies in the file, to be
  // reduced there instead of read (storage/mapped_file.h): float64 elements in the host's byte
  // order, C order, 8-byte aligned, all the rows in one file (views(spec), and a stack's piece not
  // crossing its files; a file the reader's ReadWays::maps(), 64 MiB at least unless told).
  // `at` becomes the element (box.row0, box.col0) in the file's mapping, each
  // next row `ld` elements on; null where the piece cannot be viewed (the caller reads it). Files
  // are opened as read() opens them (`piece`); errors are read()'s. The caller reduces the piece
  // under read_mapped(), and where that reports SIGBUS returns cut_short(chunk).
  Status view(const JobSpec& spec, uint64_t chunk, const ChunkBox& box, Piece piece, const double*& at,
              uint64_t& ld);
  static bool views(const JobSpec& spec);
  // The same for a GPU, which widens what it is copied (ElementForm::kStored): any dtype the device
  // takes as stored, or float64, in the host's byte order, each element aligned in the file; `at`
  // is the element's first byte, rows `ld` elements apart.
  Status view_as_stored(const JobSpec& spec, uint64_t chunk, const ChunkBox& box, Piece piece, const void*& at,
                        uint64_t& ld);
  static bool views_as_stored(const JobSpec& spec);
  // The mapping the last view() gave a piece in, and its file's path (a GPU copies the piece from
  // there where CUDA has registered those pages: worker/cuda/registered_files.h).
  const std::shared_ptr<const MappedFile>& mapping() const;
  const std::string& path() const;
  Status cut_short(uint64_t chunk) const;
  // Lets go of the file (and mapping) the last chunk read, so that an idle reader holds no file:
  // a deleted one's disk space comes back. The next chunk opens its files afresh anyway.
  void release();
  // This reader's choice between pread and its files' mappings (the CPU backend's pieces).
  ReadWays& ways() { return ways_; }

  // Reads of at least kParallelReadBytes are split among this many threads (1: the caller's alone):
  // one thread's pread from the page cache moves 6-7 GB/s, a GPU takes 55 (GPU.md), so a GPU
  // worker, which reads on one dispatcher thread, asks for several.
  void set_read_threads(unsigned n);
  static constexpr uint64_t kParallelReadBytes = uint64_t{16} << 20;

 private:
  struct File;
  Status read_flat(const JobSpec& spec, const std::string& path, uint64_t data_offset, bool fortran,
                   uint64_t file_rows, uint64_t row0, const ChunkBox& box, AxisRun rows, void* out);
  Status read_stack(const JobSpec& spec, const ChunkBox& box, AxisRun rows, void* out);
  Status read_zarr(const JobSpec& spec, const ChunkBox& box, AxisRun rows, void* out, Piece piece);
  // n elements as stored at src (byte order as given) into out from element `at` on, in form_.
  void place(const JobSpec& spec, bool big_endian, const unsigned char* src, uint64_t n, void* out,
             uint64_t at) const;
  Status pread_all(File& f, void* dst, uint64_t bytes, uint64_t offset);
  File& open(const std::string& path, Status& status);
  void residuals(const JobSpec& spec, const ChunkBox& box, AxisRun rows, AxisRun cols, const double* out,
                 ExactSum& residual);

  std::unique_ptr<File> file_;
  ReadWays ways_;
  int open_errno_ = 0;  // why the last open() failed
  unsigned read_threads_ = 1;
  ElementForm form_ = ElementForm::kFloat64;  // of the read under way
  std::unique_ptr<ReadPool> pool_;  // read_threads_ - 1 threads kept for the pieces of big reads
  std::unique_ptr<ZarrDecoder> zarr_;
  std::vector<unsigned char> staging_;
  std::string compressed_;
  std::string compressed_path_;  // the Zarr chunk file compressed_ holds, "" for none
  // 64-bit integers of the selected rows as read (before rounding), for the residual.
  std::vector<uint64_t> raw64_;
};

// n elements of type d (byte order as given) from src widened to doubles in out.
void widen_elements(DType d, bool big_endian, const unsigned char* src, uint64_t n, double* out);

}  // namespace psched
