// SPDX-License-Identifier: Apache-2.0
#pragma once
// NumPy .npy files: the tensor format of the worker protocol. A file is the
// magic "\x93NUMPY", a format version (1.0, 2.0 or 3.0), the header length
// (2 bytes little-endian in 1.0, 4 bytes after), a Python dict literal with
// 'descr', 'fortran_order' and 'shape', padded with spaces and ended by a
// newline so the data starts on a 64-byte boundary, then the raw data.
//
// Types with no NumPy equivalent cross as raw bits: bf16 as '<u2', fp8 (either
// flavour) as '|u1'; the protocol names the real dtype beside the file.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/limits.hpp"
#include "kernels/types.hpp"

namespace pav::adapters::npy {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The descr pav writes and accepts for a dtype ("" for none).
std::string_view descr_of(kernels::DType t);

struct Array {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // raw, in file order
  int64_t numel() const;
};

// The header bytes (magic to newline) for a C-order array.
std::string header(std::string_view descr, const std::vector<int64_t>& shape);

// Whether a view's elements lie in C order at unit spacing (strides of
// extent-1 dims do not matter): written as they are, without compacting.
bool c_order(const kernels::TensorView& view);

// Writes a view, compacted to C order, with descr_of(view.dtype). Throws Error
// naming the path on an I/O error or a dtype with no descr.
void write(const std::string& path, const kernels::TensorView& view);

// A .npy file kept between calls: its writer maps it and rewrites it in
// place, and only when a view's bytes differ from what it holds, so a call
// that repeats the inputs of the call before writes nothing, and a new call
// copies into pages already there (no new file, no page allocation). The
// path is pav's own: the file is made once (never through a link a worker
// planted) and written through the writer's mapping, never by name again.
class KeptFile {
 public:
  explicit KeptFile(std::string path) : path_(std::move(path)) {}
  ~KeptFile();
  KeptFile(const KeptFile&) = delete;
  KeptFile& operator=(const KeptFile&) = delete;
  // Makes the file hold the view (which must be in C order, see c_order) with
  // descr_of(view.dtype). True when it wrote, false when the file held these
  // bytes already. Throws Error naming the path (a full file system, a file
  // size limit: the space is reserved before any byte is written through the
  // mapping, so it fails here and never as a signal).
  // Data of kSparseBytes or more is kept sparse, chunk by chunk: a chunk of
  // zeros is a hole in the file (no page of the file system behind it, read
  // back as zeros), so a large cache's gigabytes of zero low blocks cost
  // nothing to write; only the chunks that hold data are reserved and written.
  bool put(const kernels::TensorView& view);
  const std::string& path() const { return path_; }
  static constexpr size_t kSparseBytes = size_t(64) << 20;
  static constexpr size_t kChunkBytes = size_t(2) << 20;

 private:
  std::string path_;
  int fd_ = -1;
  uint8_t* map_ = nullptr;
  size_t size_ = 0;
  size_t head_bytes_ = 0;
  bool sparse_ = false;
  std::vector<bool> chunk_held_;  // sparse data: which chunks the file holds (the rest are holes)
};

// Parses a whole file's bytes / reads a file. Throws Error saying what is wrong
// (bad magic, unknown version, malformed header, data size not matching the
// shape); the descr is not interpreted beyond its item size.
Array parse(std::string_view bytes);
// The largest header parse() accepts.
inline constexpr uint64_t kMaxHeaderBytes = uint64_t(1) << 20;
// Reads a regular file only: a symlink, a FIFO (opened without waiting for a
// writer), a device or a folder is refused by name, and so is a file longer
// than max_data_bytes plus the largest header, before anything is read.
Array read(const std::string& path, int64_t max_data_bytes = kernels::kMaxCaseHostBytes);

// Item size in bytes of a descr such as '<f4', '|u1', '<u2'; 0 when unknown.
int item_size(std::string_view descr);

// Copies an array into a view of the same element count (any strides); the
// array must be C order with descr_of(view.dtype) and the view's shape, else
// Error names the difference.
void copy_into(const Array& a, const kernels::TensorView& view, std::string_view what);

}  // namespace pav::adapters::npy
