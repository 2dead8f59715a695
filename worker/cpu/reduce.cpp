#include "worker/cpu/reduce.h"

#include <algorithm>
#include <chrono>

#include "core/chunk_grid.h"
#include "core/generators.h"
#include "storage/chunk_reader.h"
#include "storage/mapped_file.h"
#include "worker/cpu/kernels.h"

namespace psched {
namespace {

// The selected run of a row into the lanes, and its squares when the job asks for them.
struct RunReducer {
  const JobSpec& spec;
  const CpuKernels& kernels;
  ReduceLanes lanes;
  SquareLanes squares;

  explicit RunReducer(const JobSpec& s) : spec(s), kernels(cpu_kernels()) {
    lanes_init(lanes);
    if (spec.squares) {
      lanes_init(squares.high);
      lanes_init(squares.low);
    }
  }
  void operator()(const double* x, uint64_t step, uint64_t n) {
    if (spec.squares) kernels.reduce_squares(x, step, n, spec.scale, spec.offset, lanes, squares);
    else kernels.reduce(x, step, n, spec.scale, spec.offset, lanes);
  }
  // The selected columns `csel` of rows `rows` (every row step-th) from rows of `box` (its columns
  // from box.col0 on) `ld` elements apart (box.cols in a buffer, the array's width in a mapped
  // file), row `row0` at `data`. Every element of consecutive rows is one run where the rows are
  // contiguous: the kernels' runs pay a check each, and runs below reduce_impl.h's kOptimisticLeast
  // go the slower exact way (narrow rows did).
  void selected_rows(const double* data, uint64_t row0, const ChunkBox& box, AxisRun rows, AxisRun csel,
                     uint64_t ld) {
    const uint64_t step = spec.row_sel.step;
    if (step == 1 && csel.first == box.col0 && csel.count == box.cols && ld == box.cols)
      return (*this)(data + (rows.first - row0) * box.cols, 1, rows.count * box.cols);
    for (uint64_t i = 0; i < rows.count; ++i) {
      const double* row = data + (rows.first + i * step - row0) * ld;
      (*this)(row + (csel.first - box.col0), spec.col_sel.step, csel.count);
    }
  }
  template <typename Partial>
  void total(Partial& out) {
    lanes_total(lanes, out);
    if (spec.squares) lanes_squares_total(squares, out);
  }
};

// Fused path: selected elements are generated this many at a time into a stack buffer (a
// multiple of 8, so every block starts at lane 0 exactly as a materialised row does).
constexpr uint64_t kFusedBlock = 512;
// Chunks at least this large are created with non-temporal stores: far larger than a core's
// caches, they are read back from memory anyway, and skipping the read-for-ownership of every line
// written is worth 3-7% on the DeepOps benchmark's 128 MB chunks (4000^2; 2000^2: +3%). Smaller chunks keep
// normal stores, so their read-back hits the cache (1000^2, 8 MB: streaming cost 3%).
constexpr uint64_t kStreamingBytes = uint64_t{32} << 20;

// `buffer(n)` gives room for n doubles (called only when the chunk is materialised).
template <typename Partial, typename Buffer>
Partial reduce_chunk(const JobSpec& s, uint64_t chunk, Buffer&& buffer) {
  const ChunkGrid grid{s.rows, s.cols, s.chunk_rows, s.chunk_cols};
  const ChunkBox box = grid.box(chunk);
  const GeneratorParams gen{s.generator, s.param0, s.param1, s.seed};
  const bool to_float = s.dtype == DType::kFloat32;  // elements as stored, widened back
  const AxisRun rsel =
      select_axis(box.row0, box.row0 + box.rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step);
  const AxisRun csel =
      select_axis(box.col0, box.col0 + box.cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step);
  const CpuKernels& kernels = cpu_kernels();
  RunReducer reduce(s);

  if (s.fused) {
    double block[kFusedBlock];
    for (uint64_t i = 0; i < rsel.count; ++i) {
      const uint64_t row_index = (rsel.first + i * s.row_sel.step) * s.cols;
      for (uint64_t j = 0; j < csel.count; j += kFusedBlock) {
        const uint64_t n = csel.count - j < kFusedBlock ? csel.count - j : kFusedBlock;
        kernels.generate(gen, to_float, row_index + csel.first + j * s.col_sel.step,
                         s.col_sel.step, n, block, /*streaming=*/false);
        reduce(block, 1, n);
      }
    }
  } else {
    // Create: every element of the chunk, row-major in the chunk, stored in the chunk buffer.
    double* const data = buffer(box.rows * box.cols);
    const bool streaming = box.rows * box.cols * sizeof(double) >= kStreamingBytes;
    for (uint64_t r = 0; r < box.rows; ++r)
      kernels.generate(gen, to_float, (box.row0 + r) * s.cols + box.col0, 1, box.cols,
                       data + r * box.cols, streaming);
    if (streaming) streaming_fence();
    // Reduce the selection, read back from the buffer.
    reduce.selected_rows(data, box.row0, box, rsel, csel, box.cols);
  }

  Partial p;
  reduce.total(p);
  p.count = rsel.count * csel.count;
  return p;
}

// A stored chunk bigger than two of these is read and reduced in pieces of whole selected rows,
// each reduced while it is still in the core's cache, where reads_in_pieces() says it can be. Read
// whole, an 80 MB chunk went out to memory in the pread's copy and came back for the reduce: a
// 16 GB .npy on a 16-core H200 host read at 27.5-29.5 GB/s whole against 64-72 in pieces
// (bench/README.md).
constexpr uint64_t kReducePieceBytes = uint64_t{1} << 20;

// Whether a stored chunk is read a piece of rows at a time: where a piece's read costs the piece
// alone (ChunkReader::reads_pieces: flat files, stacks, blosc and uncompressed Zarr chunks as wide
// as the job's), but not a Fortran-order file (a read per column of each piece).
bool reads_in_pieces(const JobSpec& s) { return !s.stored.fortran_order && ChunkReader::reads_pieces(s); }

// A piece reduced where it lies in a file's mapping, through read_mapped() (a plain function of a
// context: the reduce a SIGBUS abandons holds nothing).
struct MappedPiece {
  RunReducer* reduce;
  const double* at;
  uint64_t row0;
  const ChunkBox* box;
  AxisRun rows, csel;
  uint64_t ld;
  static void reduce_it(void* context) {
    const auto& m = *static_cast<const MappedPiece*>(context);
    m.reduce->selected_rows(m.at, m.row0, *m.box, m.rows, m.csel, m.ld);
  }
};

// Rows of a band of about band_bytes (of doubles in the buffer), one at least.
uint64_t band_rows(const ChunkBox& box, uint64_t band_bytes) {
  return std::max<uint64_t>(1, band_bytes / std::max<uint64_t>(1, box.cols * sizeof(double)));
}
constexpr uint64_t kMaxBands = 1024;

// A stored array's chunk: its selected rows read into the buffer (storage/chunk_reader.h), then
// reduced as a created chunk is. With the expression x itself, what rounding 64-bit integers to
// doubles lost is added back exactly, so their sum is the integers' exact sum.
// `box`: the chunk's box, or a band of its rows (stored_band()).
template <typename Partial, typename Buffer>
Status reduce_stored(const JobSpec& s, uint64_t chunk, const ChunkBox& box, ChunkReader& reader, Buffer&& buffer,
                     Partial& out) {
  const AxisRun rsel =
      select_axis(box.row0, box.row0 + box.rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step);
  const AxisRun csel =
      select_axis(box.col0, box.col0 + box.cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step);
  RunReducer reduce(s);
  if (rsel.count > 0 && csel.count > 0) {
    const bool exact_integers = s.scale == 1.0 && s.offset == 0.0;
    ExactSum residual;
    const uint64_t step = s.row_sel.step;
    const uint64_t row_bytes = box.cols * sizeof(double);
    const bool in_pieces = reads_in_pieces(s) && box.rows * row_bytes > 2 * kReducePieceBytes;
    const bool mapped = ChunkReader::views(s);  // its pieces may be reduced where they lie in the file
    // Selected rows a piece holds: its span of rows, (n - 1) step + 1, within kReducePieceBytes
    // where one row fits.
    const uint64_t rows_fit = std::max<uint64_t>(1, kReducePieceBytes / row_bytes);
    const uint64_t per_piece = in_pieces ? (rows_fit - 1) / step + 1 : rsel.count;
    double* const data = buffer(in_pieces ? ((per_piece - 1) * step + 1) * box.cols : box.rows * box.cols);
    for (uint64_t done = 0; done < rsel.count;) {
      const AxisRun rows{rsel.first + done * step, std::min(per_piece, rsel.count - done)};
      const ChunkBox piece = in_pieces ? ChunkBox{rows.first, (rows.count - 1) * step + 1, box.col0, box.cols} : box;
      const auto which = done == 0 ? ChunkReader::Piece::kFirst : ChunkReader::Piece::kLater;
      // A piece is read into the buffer, or reduced where it lies in the file's mapping, whichever
      // this thread's reader has found cheaper (storage/mapped_file.h, ReadWays).
      const ReadWays::Way way = mapped ? reader.ways().next() : ReadWays::Way::kPread;
      const auto t0 = mapped ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      const double* at = nullptr;
      uint64_t ld = 0;
      if (way == ReadWays::Way::kMap)
        if (Status st = reader.view(s, chunk, piece, which, at, ld); !st) return st;
      if (at != nullptr) {
        MappedPiece m{&reduce, at, piece.row0, &box, rows, csel, ld};
        if (!read_mapped(&MappedPiece::reduce_it, &m)) return reader.cut_short(chunk);
      } else {
        // A piece view() could not give (a small file, rows across a stack's files) is read through
        // the files view() opened for it: this chunk's, afresh where it was the first piece.
        const auto read_which = way == ReadWays::Way::kMap ? ChunkReader::Piece::kLater : which;
        if (Status st = reader.read(s, chunk, piece, rows, csel, data, exact_integers ? &residual : nullptr,
                                    ElementForm::kFloat64, read_which);
            !st)
          return st;
        reduce.selected_rows(data, piece.row0, box, rows, csel, box.cols);
      }
      if (mapped)
        reader.ways().took(at != nullptr ? ReadWays::Way::kMap : ReadWays::Way::kPread, piece.rows * row_bytes,
                           std::chrono::steady_clock::now() - t0);
      done += rows.count;
    }
    if (!residual.finite_is_zero()) {
      residual.normalize();
      reduce.lanes.exact.normalize();
      reduce.lanes.exact.add(residual);
    }
  }
  reduce.total(out);
  out.count = rsel.count * csel.count;
  return Status::ok();
}

}  // namespace

Status reduce_stored_chunk_cpu(const JobSpec& s, uint64_t chunk, ChunkReader& reader, std::vector<double>& scratch,
                               PartialSum& out) {
  return reduce_stored(s, chunk, s.grid().box(chunk), reader, [&](uint64_t n) {
    scratch.resize(n);
    return scratch.data();
  }, out);
}

Status reduce_stored_chunk_cpu(const JobSpec& s, uint64_t chunk, ChunkReader& reader, ChunkBuffer& buffer,
                               CompactPartial& out) {
  return reduce_stored(s, chunk, s.grid().box(chunk), reader, [&](uint64_t n) { return buffer.reserve(n); }, out);
}

uint32_t stored_bands(const JobSpec& s, uint64_t chunk, uint64_t band_bytes) {
  // Flat files and stacks in C order only: a Zarr chunk is one file, compressed whole (a band would
  // read all of it for its rows), and a Fortran-order file's band would be a read per column.
  if (!s.stored.stored() || s.stored.kind == SourceKind::kZarr || s.stored.fortran_order) return 1;
  const ChunkBox box = s.grid().box(chunk);
  const uint64_t rows = band_rows(box, band_bytes);
  return uint32_t(std::min<uint64_t>((box.rows + rows - 1) / rows, kMaxBands));
}

ChunkBox stored_band(const JobSpec& s, uint64_t chunk, uint32_t band, uint32_t bands) {
  ChunkBox box = s.grid().box(chunk);
  if (bands <= 1) return box;
  // Rows as evenly as whole rows go: band b has rows [b R / n, (b + 1) R / n) of the box's R.
  const uint64_t lo = box.rows * band / bands, hi = box.rows * (band + 1) / bands;
  box.row0 += lo;
  box.rows = hi - lo;
  return box;
}

Status reduce_stored_band_cpu(const JobSpec& s, uint64_t chunk, const ChunkBox& band, ChunkReader& reader,
                              ChunkBuffer& buffer, PartialSum& out) {
  return reduce_stored(s, chunk, band, reader, [&](uint64_t n) { return buffer.reserve(n); }, out);
}

PartialSum reduce_chunk_cpu(const JobSpec& s, uint64_t chunk, std::vector<double>& scratch) {
  return reduce_chunk<PartialSum>(s, chunk, [&](uint64_t n) {
    scratch.resize(n);
    return scratch.data();
  });
}

CompactPartial reduce_chunk_cpu(const JobSpec& s, uint64_t chunk, ChunkBuffer& buffer) {
  return reduce_chunk<CompactPartial>(s, chunk, [&](uint64_t n) { return buffer.reserve(n); });
}

}  // namespace psched
