#include "storage/chunk_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/check.h"
#include "storage/read_pool.h"
#include "storage/regular_file.h"
#include "storage/zarr.h"

namespace psched {
namespace {

template <typename T>
T load(const unsigned char* p, bool big_endian) {
  T v;
  std::memcpy(&v, p, sizeof v);
  if (big_endian) {
    unsigned char b[sizeof v];
    std::memcpy(b, p, sizeof v);
    for (size_t k = 0; k < sizeof v / 2; ++k) std::swap(b[k], b[sizeof v - 1 - k]);
    std::memcpy(&v, b, sizeof v);
  }
  return v;
}

template <typename T>
void widen(const unsigned char* src, uint64_t n, bool big_endian, double* out) {
  for (uint64_t i = 0; i < n; ++i) out[i] = double(load<T>(src + i * sizeof(T), big_endian));
}

bool is_int64(DType d) { return d == DType::kInt64 || d == DType::kUInt64; }

// Elements are read straight into `out` when they are already in its form: doubles in the host's
// byte order, or any dtype as stored when its bytes need no swapping.
bool read_straight(const JobSpec& s, ElementForm form) {
  const bool host_order = !s.stored.big_endian || element_bytes(s.dtype) == 1;
  return host_order && (s.dtype == DType::kFloat64 || form == ElementForm::kStored);
}

}  // namespace

void ChunkReader::place(const JobSpec& s, bool big_endian, const unsigned char* src, uint64_t n, void* out,
                        uint64_t at) const {
  if (form_ == ElementForm::kFloat64) {
    widen_elements(s.dtype, big_endian, src, n, static_cast<double*>(out) + at);
    return;
  }
  const uint64_t eb = element_bytes(s.dtype);
  unsigned char* dst = static_cast<unsigned char*>(out) + at * eb;
  std::memcpy(dst, src, n * eb);
  if (big_endian && eb > 1)
    for (uint64_t i = 0; i < n; ++i) std::reverse(dst + i * eb, dst + (i + 1) * eb);
}

void widen_elements(DType d, bool big_endian, const unsigned char* src, uint64_t n, double* out) {
  switch (d) {
    case DType::kFloat64: widen<double>(src, n, big_endian, out); break;
    case DType::kFloat32: widen<float>(src, n, big_endian, out); break;
    case DType::kInt8: widen<int8_t>(src, n, false, out); break;
    case DType::kInt16: widen<int16_t>(src, n, big_endian, out); break;
    case DType::kInt32: widen<int32_t>(src, n, big_endian, out); break;
    case DType::kInt64: widen<int64_t>(src, n, big_endian, out); break;
    case DType::kUInt8: widen<uint8_t>(src, n, false, out); break;
    case DType::kUInt16: widen<uint16_t>(src, n, big_endian, out); break;
    case DType::kUInt32: widen<uint32_t>(src, n, big_endian, out); break;
    case DType::kUInt64: widen<uint64_t>(src, n, big_endian, out); break;
    case DType::kBool:
      for (uint64_t i = 0; i < n; ++i) out[i] = src[i] != 0 ? 1.0 : 0.0;
      break;
  }
}

void ChunkReader::set_read_threads(unsigned n) {
  read_threads_ = n == 0 ? 1 : n;
  pool_ = read_threads_ > 1 ? std::make_unique<ReadPool>(read_threads_ - 1) : nullptr;
}

struct ChunkReader::File {
  std::string path;
  int fd = -1;
  uint64_t size = 0;
  struct stat st {};
  std::shared_ptr<const MappedFile> map;  // view()'s, once asked for
  bool map_tried = false;
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

ChunkReader::ChunkReader() : file_(std::make_unique<File>()), zarr_(std::make_unique<ZarrDecoder>()) {}
ChunkReader::~ChunkReader() = default;

ChunkReader::File& ChunkReader::open(const std::string& path, Status& status) {
  if (file_->fd >= 0 && file_->path == path) return *file_;
  file_ = std::make_unique<File>();
  struct stat st {};
  file_->fd = open_regular(path, st, status, open_errno_);
  if (file_->fd < 0) return *file_;
  file_->path = path;
  file_->size = uint64_t(st.st_size);
  file_->st = st;
  return *file_;
}

Status ChunkReader::pread_all(File& f, void* dst, uint64_t bytes, uint64_t offset) {
  if (read_threads_ > 1 && bytes >= kParallelReadBytes) {
    // Pieces of whole MiB; piece 0 on this thread, the others on their own.
    const uint64_t piece = ((bytes + read_threads_ - 1) / read_threads_ + (uint64_t{1} << 20) - 1) >> 20 << 20;
    const unsigned pieces = unsigned((bytes + piece - 1) / piece);
    std::vector<Status> status(pieces);
    const unsigned saved = read_threads_;
    read_threads_ = 1;  // each piece is read plainly
    pool_->run(pieces, [&](unsigned k) {
      status[k] = pread_all(f, static_cast<unsigned char*>(dst) + k * piece, std::min(piece, bytes - k * piece),
                            offset + k * piece);
    });
    read_threads_ = saved;
    for (const Status& st : status)
      if (!st) return st;
    return Status::ok();
  }
  auto* p = static_cast<unsigned char*>(dst);
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(f.fd, p + done, bytes - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::error(fmt::format("{}: {}", f.path, std::strerror(errno)));
    if (n == 0)
      return Status::error(fmt::format("{}: truncated: needs bytes up to {}, the file has {}", f.path,
                                       offset + bytes, offset + done));
    done += uint64_t(n);
  }
  return Status::ok();
}

// A file of rows x cols elements (C order: row after row; Fortran: column after column) holding
// the array's rows row0 .. row0 + file_rows - 1; the box's selected rows inside it into out.
Status ChunkReader::read_flat(const JobSpec& s, const std::string& path, uint64_t data_offset, bool fortran,
                              uint64_t file_rows, uint64_t row0, const ChunkBox& box, AxisRun rows,
                              void* out) {
  Status st;
  File& f = open(path, st);
  if (!st) return st;
  const uint64_t eb = element_bytes(s.dtype);
  const uint64_t step = s.row_sel.step;
  const bool keep64 = !raw64_.empty();
  auto widen_into = [&](const unsigned char* src, uint64_t n, uint64_t at) {
    place(s, s.stored.big_endian, src, n, out, at);
    if (keep64)
      for (uint64_t k = 0; k < n; ++k) raw64_[at + k] = load<uint64_t>(src + k * 8, s.stored.big_endian);
  };
  if (!fortran) {
    // Consecutive selected rows spanning whole rows of the file are one read.
    const bool whole_rows = box.cols == s.cols && step == 1;
    const uint64_t row_bytes = box.cols * eb;
    for (uint64_t i = 0; i < rows.count;) {
      const uint64_t r = rows.first + i * step;  // global row
      const uint64_t n = whole_rows ? rows.count - i : 1;
      const uint64_t at = (r - box.row0) * box.cols;
      const uint64_t offset = data_offset + ((r - row0) * s.cols + box.col0) * eb;
      if (read_straight(s, form_) && !keep64) {
        if (Status e = pread_all(f, static_cast<unsigned char*>(out) + at * eb, n * row_bytes, offset); !e) return e;
      } else {
        staging_.resize(n * row_bytes);
        if (Status e = pread_all(f, staging_.data(), n * row_bytes, offset); !e) return e;
        widen_into(staging_.data(), n * box.cols, at);
      }
      i += n;
    }
    return Status::ok();
  }
  // Fortran order: each of the box's columns is a run of the file; the selected rows' span of it
  // is read and scattered into the rows.
  if (rows.count == 0) return Status::ok();
  const uint64_t span = (rows.count - 1) * step + 1;
  staging_.resize(span * eb);
  std::vector<double> column(form_ == ElementForm::kFloat64 ? span : 0);
  for (uint64_t c = 0; c < box.cols; ++c) {
    const uint64_t offset = data_offset + ((box.col0 + c) * file_rows + (rows.first - row0)) * eb;
    if (Status e = pread_all(f, staging_.data(), span * eb, offset); !e) return e;
    if (!column.empty()) widen_elements(s.dtype, s.stored.big_endian, staging_.data(), span, column.data());
    for (uint64_t i = 0; i < rows.count; ++i) {
      const uint64_t at = (rows.first + i * step - box.row0) * box.cols + c;
      if (!column.empty()) static_cast<double*>(out)[at] = column[i * step];
      else place(s, s.stored.big_endian, staging_.data() + i * step * eb, 1, out, at);
      if (keep64) raw64_[at] = load<uint64_t>(staging_.data() + i * step * 8, s.stored.big_endian);
    }
  }
  return Status::ok();
}

Status ChunkReader::read_stack(const JobSpec& s, const ChunkBox& box, AxisRun rows, void* out) {
  uint64_t first_row = 0;
  for (const StackFile& file : s.stored.files) {
    const uint64_t lo = std::max(first_row, rows.first), end = first_row + file.rows;
    first_row = end;
    if (rows.count == 0 || lo >= end) continue;
    const uint64_t last = rows.first + (rows.count - 1) * s.row_sel.step;
    if (lo > last) break;
    // The selected rows inside this file.
    const AxisRun here = select_axis(lo, end, rows.first, last + 1, s.row_sel.step);
    if (here.count == 0) continue;
    if (Status st = read_flat(s, s.stored.path + "/" + file.name, file.data_offset, file.fortran_order, file.rows,
                              end - file.rows, box, here, out);
        !st)
      return st;
  }
  return Status::ok();
}

bool ChunkReader::reads_pieces(const JobSpec& s) {
  if (s.stored.kind != SourceKind::kZarr) return true;
  return s.chunk_cols <= s.stored.store_chunk_cols &&
         (s.stored.compressor == Compressor::kBlosc || s.stored.compressor == Compressor::kNone);
}

Status ChunkReader::read_zarr(const JobSpec& s, const ChunkBox& box, AxisRun rows, void* out, Piece piece) {
  const StoredArray& a = s.stored;
  const uint64_t eb = element_bytes(s.dtype);
  const uint64_t cr = a.store_chunk_rows, cc = a.store_chunk_cols;
  const uint64_t chunk_bytes = cr * cc * eb;
  const bool keep64 = !raw64_.empty();
  if (piece == Piece::kFirst) compressed_path_.clear();  // afresh for each chunk (read's comment)
  for (uint64_t si = box.row0 / cr; si * cr < box.row0 + box.rows; ++si) {
    const AxisRun here = select_axis(std::max(si * cr, box.row0), std::min((si + 1) * cr, box.row0 + box.rows),
                                     rows.first, rows.count == 0 ? rows.first : rows.first + (rows.count - 1) * s.row_sel.step + 1,
                                     s.row_sel.step);
    if (rows.count == 0 || here.count == 0) continue;
    // The store chunk's rows this read needs, [r0, r1) of its cr, as bytes [begin, end) of the
    // chunk decoded: all of them where the box holds the store chunk's rows (a chunk read whole),
    // else from the first selected row to the last (a piece of rows: decode_blosc_range decodes a
    // blosc chunk's blocks of those rows alone).
    const bool whole = si * cr >= box.row0 && (si + 1) * cr <= box.row0 + box.rows;
    const uint64_t r0 = whole ? 0 : here.first - si * cr;
    const uint64_t r1 = whole ? cr : r0 + (here.count - 1) * s.row_sel.step + 1;
    const uint64_t begin = r0 * cc * eb, end = r1 * cc * eb;
    for (uint64_t sj = box.col0 / cc; sj * cc < box.col0 + box.cols; ++sj) {
      const std::string path = a.path + "/" + zarr_chunk_key(a, si, sj);
      // Rows of a store chunk that are all selected whole rows of the box, in the output's own form
      // (float64 in the host's byte order), are read or decoded straight into their place: no
      // staging copy. Any other go to the staging first, which holds the chunk's decoded bytes
      // from `base` on.
      bool in_place = form_ == ElementForm::kFloat64 && s.dtype == DType::kFloat64 && !a.big_endian && !keep64 &&
                      s.row_sel.step == 1 && here.first == si * cr + r0 && here.count == r1 - r0 &&
                      cc == box.cols && sj * cc == box.col0;
      uint64_t base = begin;
      auto target = [&]() -> unsigned char* {
        if (in_place) return static_cast<unsigned char*>(out) + (here.first - box.row0) * box.cols * eb;
        staging_.resize(std::max<size_t>(staging_.size(), end - begin));
        return staging_.data();
      };
      Status st;
      File& f = open(path, st);
      if (!st) {
        if (open_errno_ != ENOENT || !a.has_fill_value)
          return Status::error(open_errno_ == ENOENT ? fmt::format("{}: missing, and the store has no fill_value", path)
                                               : st.message());
        in_place = false;
        unsigned char* const to = target();
        for (uint64_t k = 0; k < (end - begin) / eb; ++k) std::memcpy(to + k * eb, &a.fill_bits, eb);
      } else if (a.compressor == Compressor::kNone) {  // the file is the chunk: no decoder copy
        if (f.size != chunk_bytes)
          return Status::error(fmt::format("{}: holds {} bytes, a chunk {}", path, f.size, chunk_bytes));
        if (Status e = pread_all(f, target(), end - begin, begin); !e) return e;
        if (in_place) continue;
      } else {
        if (compressed_path_ != path) {  // a chunk's later pieces decode the bytes its first read
          // No codec we read stores a chunk in more than this (zstd's bound is n + n/256 + 64 KiB,
          // blosc's n + 16): a larger file is not this chunk, and reading it whole could take the
          // worker's memory.
          const uint64_t most = chunk_bytes + chunk_bytes / 128 + (uint64_t{1} << 20);
          if (f.size > most)
            return Status::error(fmt::format("{}: holds {} bytes, more than a {}-byte chunk compressed can", path,
                                             f.size, chunk_bytes));
          compressed_path_.clear();
          compressed_.resize(f.size);
          if (Status e = pread_all(f, compressed_.data(), f.size, 0); !e) return e;
          compressed_path_ = path;
          zarr_->new_chunk();
        }
        Status e;
        if (whole) {
          e = zarr_->decode(a.compressor, compressed_, target(), chunk_bytes);
        } else if (a.compressor == Compressor::kBlosc) {
          e = zarr_->decode_blosc_range(compressed_, chunk_bytes, begin, end, target());
        } else {  // decoded whole into the staging, the rows placed from there
          in_place = false;
          base = 0;
          staging_.resize(std::max<size_t>(staging_.size(), chunk_bytes));
          e = zarr_->decode(a.compressor, compressed_, staging_.data(), chunk_bytes);
        }
        if (!e) return Status::error(fmt::format("{}: {}", path, e.message()));
        if (in_place) continue;
      }
      // The store chunk's part of the box, row by row (its elements are little-endian unless the
      // dtype says otherwise; missing chunks' fill bits are little-endian).
      const uint64_t c0 = std::max(sj * cc, box.col0), c1 = std::min((sj + 1) * cc, box.col0 + box.cols);
      for (uint64_t i = 0; i < here.count; ++i) {
        const uint64_t r = here.first + i * s.row_sel.step;
        const unsigned char* src = staging_.data() + (((r - si * cr) * cc + (c0 - sj * cc)) * eb - base);
        const uint64_t at = (r - box.row0) * box.cols + (c0 - box.col0);
        const bool big = f.fd >= 0 && a.big_endian;
        place(s, big, src, c1 - c0, out, at);
        if (keep64)
          for (uint64_t k = 0; k < c1 - c0; ++k) raw64_[at + k] = load<uint64_t>(src + k * 8, big);
      }
    }
  }
  return Status::ok();
}

void ChunkReader::residuals(const JobSpec& s, const ChunkBox& box, AxisRun rows, AxisRun cols, const double* out,
                            ExactSum& residual) {
  const bool is_signed = s.dtype == DType::kInt64;
  for (uint64_t i = 0; i < rows.count; ++i) {
    const uint64_t base = (rows.first + i * s.row_sel.step - box.row0) * box.cols - box.col0;
    for (uint64_t j = 0; j < cols.count; ++j) {
      const uint64_t at = base + cols.first + j * s.col_sel.step;
      const __int128 x = is_signed ? __int128(int64_t(raw64_[at])) : __int128(raw64_[at]);
      const __int128 lost = x - __int128(out[at]);  // |lost| <= 2^10: exact as a double
      if (lost != 0) residual.add(double(lost));
    }
  }
}

bool ChunkReader::views(const JobSpec& s) { return s.dtype == DType::kFloat64 && views_as_stored(s); }

bool ChunkReader::views_as_stored(const JobSpec& s) {
  const StoredArray& a = s.stored;
  const bool flat = a.kind == SourceKind::kNpy || a.kind == SourceKind::kRaw || a.kind == SourceKind::kNpyStack;
  const uint64_t eb = element_bytes(s.dtype);
  return flat && (s.dtype == DType::kFloat64 || stored_on_device(s.dtype)) && (!a.big_endian || eb == 1) &&
         (a.kind == SourceKind::kNpyStack || (!a.fortran_order && a.data_offset % eb == 0));
}

Status ChunkReader::view(const JobSpec& s, uint64_t chunk, const ChunkBox& box, Piece piece, const double*& at,
                         uint64_t& ld) {
  const void* bytes = nullptr;
  const Status st = view_as_stored(s, chunk, box, piece, bytes, ld);
  at = static_cast<const double*>(bytes);
  return st;
}

Status ChunkReader::view_as_stored(const JobSpec& s, uint64_t chunk, const ChunkBox& box, Piece piece,
                                   const void*& at, uint64_t& ld) {
  const uint64_t eb = element_bytes(s.dtype);
  at = nullptr;
  ld = s.cols;
  if (piece == Piece::kFirst) file_ = std::make_unique<File>();  // afresh for each chunk (read's comment)
  if (box.rows == 0 || box.cols == 0) return Status::ok();
  std::string path = s.stored.path;
  uint64_t data_offset = s.stored.data_offset, row0 = 0;
  if (s.stored.kind == SourceKind::kNpyStack) {
    const StackFile* in = nullptr;
    for (const StackFile& file : s.stored.files) {
      if (box.row0 < row0 + file.rows) {
        in = &file;
        break;
      }
      row0 += file.rows;
    }
    if (in == nullptr || box.row0 + box.rows > row0 + in->rows || in->fortran_order || in->data_offset % eb != 0)
      return Status::ok();
    path += "/" + in->name;
    data_offset = in->data_offset;
  }
  Status st;
  File& f = open(path, st);
  if (!st) return Status::error(fmt::format("chunk {}: {}", chunk, st.message()));
  if (!f.map_tried) {
    f.map_tried = true;
    if (!ways_.maps(f.size)) return Status::ok();
    Status why;  // a file the system will not map is read
    f.map = map_file(path, f.fd, f.st, why);
  }
  if (!f.map) return Status::ok();
  const uint64_t first = data_offset + ((box.row0 - row0) * s.cols + box.col0) * eb;
  const uint64_t end = first + ((box.rows - 1) * s.cols + box.cols) * eb;
  if (end > f.map->size)
    return Status::error(fmt::format("chunk {}: {}: truncated: needs bytes up to {}, the file has {}", chunk, path,
                                     end, f.map->size));
  at = f.map->data + first;
  return Status::ok();
}

const std::shared_ptr<const MappedFile>& ChunkReader::mapping() const { return file_->map; }
const std::string& ChunkReader::path() const { return file_->path; }

void ChunkReader::release() {
  file_ = std::make_unique<File>();
  compressed_path_.clear();
}

Status ChunkReader::cut_short(uint64_t chunk) const {
  return Status::error(fmt::format("chunk {}: {}: cut short while being read (SIGBUS on its mapping)", chunk,
                                   file_->path));
}

Status ChunkReader::read(const JobSpec& s, uint64_t chunk, const ChunkBox& box, AxisRun rows, AxisRun cols,
                         void* out, ExactSum* residual, ElementForm form, Piece piece) {
  PSCHED_REQUIRE(form == ElementForm::kFloat64 || stored_on_device(s.dtype), int(s.dtype));
  form_ = form;
  if (piece == Piece::kFirst) file_ = std::make_unique<File>();  // afresh for each chunk (read's comment)
  const bool want64 = residual != nullptr && is_int64(s.dtype);
  if (want64) raw64_.assign(box.rows * box.cols, 0);
  else raw64_.clear();
  Status st;
  switch (s.stored.kind) {
    case SourceKind::kNpy:
    case SourceKind::kRaw:
      st = read_flat(s, s.stored.path, s.stored.data_offset, s.stored.fortran_order, s.rows, 0, box, rows, out);
      break;
    case SourceKind::kNpyStack: st = read_stack(s, box, rows, out); break;
    case SourceKind::kZarr: st = read_zarr(s, box, rows, out, piece); break;
    case SourceKind::kGenerator: st = Status::error("not a stored array"); break;
  }
  if (!st) return Status::error(fmt::format("chunk {}: {}", chunk, st.message()));
  if (want64) residuals(s, box, rows, cols, static_cast<const double*>(out), *residual);
  return Status::ok();
}

}  // namespace psched
