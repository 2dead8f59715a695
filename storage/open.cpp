#include "storage/open.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "storage/npy.h"
#include "storage/regular_file.h"
#include "storage/typestr.h"
#include "storage/zarr.h"

namespace psched {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// rows x cols of an array of this shape: 1-D is one row; N-D in C order flattens its leading axes.
Status as_matrix(const std::string& path, const std::vector<uint64_t>& shape, bool fortran, uint64_t& rows,
                 uint64_t& cols) {
  if (shape.empty()) return Status::invalid(fmt::format("{}: holds a scalar, not an array", path));
  if (shape.size() > 2 && fortran)
    return Status::invalid(fmt::format("{}: a Fortran-ordered array of {} dimensions is not supported (1-D or 2-D)",
                                       path, shape.size()));
  cols = shape.back();
  rows = 1;
  for (size_t k = 0; k + 1 < shape.size(); ++k) {
    if (shape[k] != 0 && rows > UINT64_MAX / shape[k]) return Status::invalid(fmt::format("{}: shape too large", path));
    rows *= shape[k];
  }
  if (rows == 0 || cols == 0) return Status::invalid(fmt::format("{}: the array is empty", path));
  if (rows > (UINT64_MAX >> 4) / cols) return Status::invalid(fmt::format("{}: shape too large", path));
  return Status::ok();
}

// The file is readable and holds `bytes` of elements from `offset` on.
Status check_file(const std::string& path, uint64_t offset, uint64_t bytes) {
  struct stat st {};
  Status opened;
  int error = 0;
  const int fd = open_regular(path, st, opened, error);
  if (fd < 0) return Status::invalid(opened.message());
  ::close(fd);
  if (uint64_t(st.st_size) < offset + bytes)
    return Status::invalid(fmt::format("{}: truncated: holds {} bytes, the array needs {} ({} of header or offset "
                                       "+ {} of elements)",
                                       path, st.st_size, offset + bytes, offset, bytes));
  return Status::ok();
}

StatusOr<OpenedArray> open_npy(const std::string& path) {
  auto h = read_npy_header(path);
  if (!h) return h.status();
  OpenedArray a;
  a.stored.kind = SourceKind::kNpy;
  a.stored.path = path;
  a.stored.big_endian = h->type.big_endian;
  a.stored.data_offset = h->data_offset;
  a.dtype = h->type.dtype;
  a.shape = h->shape;
  if (Status st = as_matrix(path, h->shape, h->fortran_order, a.rows, a.cols); !st) return st;
  a.stored.fortran_order = h->fortran_order && h->shape.size() == 2;
  if (Status st = check_file(path, h->data_offset, a.rows * a.cols * element_bytes(a.dtype)); !st) return st;
  return a;
}

StatusOr<OpenedArray> open_npy_stack(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (ends_with(e.path().filename().string(), ".npy")) names.push_back(e.path().filename().string());
  if (ec) return Status::invalid(fmt::format("{}: {}", dir, ec.message()));
  if (names.empty()) return Status::invalid(fmt::format("{}: holds no .npy files", dir));
  if (names.size() > kMaxStackFiles)
    return Status::invalid(fmt::format("{}: holds {} .npy files (at most {})", dir, names.size(), kMaxStackFiles));
  // da.to_npy_stack names them 0.npy, 1.npy, ...: in numeric order; any other names in name order.
  auto number = [](const std::string& n) {
    const std::string stem = n.substr(0, n.size() - 4);
    return !stem.empty() && stem.size() < 19 && stem.find_first_not_of("0123456789") == std::string::npos
               ? std::stoull(stem)
               : UINT64_MAX;
  };
  const bool numbered = std::all_of(names.begin(), names.end(), [&](auto& n) { return number(n) != UINT64_MAX; });
  std::sort(names.begin(), names.end(), [&](const std::string& x, const std::string& y) {
    return numbered ? number(x) < number(y) : x < y;
  });
  OpenedArray a;
  a.stored.kind = SourceKind::kNpyStack;
  a.stored.path = dir;
  std::vector<uint64_t> tail;
  uint64_t axis0 = 0;  // the stack's length along axis 0
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string path = dir + "/" + names[i];
    auto h = read_npy_header(path);
    if (!h) return h.status();
    if (h->shape.size() < 2)
      return Status::invalid(fmt::format("{}: a stack's files must be 2-D or more (stacked along axis 0); this one "
                                         "has {} dimensions",
                                         path, h->shape.size()));
    const std::vector<uint64_t> rest(h->shape.begin() + 1, h->shape.end());
    if (i == 0) {
      tail = rest;
      a.dtype = h->type.dtype;
      a.stored.big_endian = h->type.big_endian;
    } else if (rest != tail || h->type.dtype != a.dtype || h->type.big_endian != a.stored.big_endian) {
      return Status::invalid(fmt::format("{}: its element type or shape past axis 0 differs from {}'s", path,
                                         names[0]));
    }
    uint64_t rows = 0, cols = 0;
    if (Status st = as_matrix(path, h->shape, h->fortran_order, rows, cols); !st) return st;
    if (Status st = check_file(path, h->data_offset, rows * cols * element_bytes(a.dtype)); !st) return st;
    a.cols = cols;
    a.rows += rows;
    axis0 += h->shape[0];
    a.stored.files.push_back(StackFile{names[i], rows, h->data_offset, h->fortran_order && h->shape.size() == 2});
  }
  a.shape = tail;
  a.shape.insert(a.shape.begin(), axis0);
  return a;
}

StatusOr<OpenedArray> open_raw(const ArrayInput& in) {
  if (in.dtype.empty()) return Status::invalid(fmt::format("{}: a raw file needs its dtype (--dtype)", in.path));
  if (in.shape.empty()) return Status::invalid(fmt::format("{}: a raw file needs its shape (--shape ROWS,COLS)", in.path));
  auto d = parse_dtype(in.dtype);
  if (!d) return d.status();
  OpenedArray a;
  a.stored.kind = SourceKind::kRaw;
  a.stored.path = in.path;
  a.stored.data_offset = in.offset;
  if (in.byte_order == "big") a.stored.big_endian = true;
  else if (!in.byte_order.empty() && in.byte_order != "little")
    return Status::invalid(fmt::format("byte order '{}' is unknown (expected little or big)", in.byte_order));
  a.stored.big_endian = a.stored.big_endian && element_bytes(*d) > 1;
  a.dtype = *d;
  a.shape = in.shape;
  if (Status st = as_matrix(in.path, in.shape, false, a.rows, a.cols); !st) return st;
  if (Status st = check_file(in.path, in.offset, a.rows * a.cols * element_bytes(a.dtype)); !st) return st;
  return a;
}

StatusOr<OpenedArray> open_zarr(const std::string& dir) {
  auto m = read_zarray(dir);
  if (!m) return m.status();
  OpenedArray a;
  a.stored.kind = SourceKind::kZarr;
  a.stored.path = dir;
  a.stored.big_endian = m->type.big_endian;
  a.stored.compressor = m->compressor;
  a.stored.fill_bits = m->fill_bits;
  a.stored.has_fill_value = m->has_fill_value;
  a.stored.dimension_separator = m->dimension_separator;
  a.stored.one_dimensional = m->shape.size() == 1;
  a.stored.store_chunk_rows = a.stored.one_dimensional ? 1 : m->chunks[0];
  a.stored.store_chunk_cols = m->chunks.back();
  a.dtype = m->type.dtype;
  a.shape = m->shape;
  if (Status st = as_matrix(dir, m->shape, false, a.rows, a.cols); !st) return st;
  if (a.stored.store_chunk_rows > kMaxChunkElements / a.stored.store_chunk_cols)
    return Status::invalid(fmt::format("{}: chunks of {} x {} are too large (at most {} elements)", dir,
                                       a.stored.store_chunk_rows, a.stored.store_chunk_cols, kMaxChunkElements));
  a.chunk_rows = std::min(a.stored.store_chunk_rows, a.rows);
  a.chunk_cols = std::min(a.stored.store_chunk_cols, a.cols);
  return a;
}

}  // namespace

StatusOr<OpenedArray> open_array(const ArrayInput& in) {
  if (in.path.empty()) return Status::invalid("the input path is empty");
  std::string format = in.format;
  std::error_code ec;
  const bool dir = fs::is_directory(in.path, ec);
  if (format.empty()) {
    if (!dir && !fs::exists(in.path, ec))
      return Status::invalid(fmt::format("{}: {}", in.path, std::strerror(ENOENT)));
    if (dir && fs::exists(in.path + "/.zarray", ec)) format = "zarr";
    else if (dir) format = "npy-stack";
    else if (ends_with(in.path, ".npy")) format = "npy";
    else if (!in.dtype.empty()) format = "raw";
    else
      return Status::invalid(fmt::format("{}: cannot tell its format from the path (give --format npy, npy-stack, "
                                         "raw or zarr)",
                                         in.path));
  }
  if (format != "raw" && (!in.dtype.empty() || !in.shape.empty() || in.offset != 0 || !in.byte_order.empty()))
    return Status::invalid(fmt::format("--dtype, --shape, --data-offset and --byte-order describe a raw file; a {} "
                                       "file says them itself",
                                       format));
  OpenedArray a;
  if (format == "npy") {
    auto r = open_npy(in.path);
    if (!r) return r;
    a = *r;
  } else if (format == "npy-stack") {
    auto r = open_npy_stack(in.path);
    if (!r) return r;
    a = *r;
  } else if (format == "raw") {
    auto r = open_raw(in);
    if (!r) return r;
    a = *r;
  } else if (format == "zarr") {
    auto r = open_zarr(in.path);
    if (!r) return r;
    a = *r;
  } else {
    return Status::invalid(fmt::format("format '{}' is unknown (expected npy, npy-stack, raw or zarr)", format));
  }
  if (a.chunk_rows == 0) {
    a.chunk_cols = std::min(a.cols, kDefaultChunkElements);
    a.chunk_rows = std::max<uint64_t>(1, std::min(a.rows, kDefaultChunkElements / a.chunk_cols));
  }
  return a;
}

JobSpec whole_array_job(const OpenedArray& a) {
  JobSpec s;
  s.stored = a.stored;
  s.dtype = a.dtype;
  s.rows = a.rows;
  s.cols = a.cols;
  s.chunk_rows = a.chunk_rows;
  s.chunk_cols = a.chunk_cols;
  s.scale = 1.0;
  s.offset = 0.0;
  s.row_sel = Slice{0, kToEnd, 1};
  s.col_sel = Slice{0, kToEnd, 1};
  return s;
}

}  // namespace psched
