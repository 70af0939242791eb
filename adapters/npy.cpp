// SPDX-License-Identifier: Apache-2.0
#include "adapters/npy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "common/utf8_text.hpp"

namespace pav::adapters::npy {

using kernels::DType;
using kernels::TensorView;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;

// A tiny reader for the header's Python literal: a dict of string keys whose
// values are strings, True/False or tuples of integers.
struct Literal {
  std::string_view s;
  size_t i = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("npy header: {} at offset {} of '{}'", utf8_clean(what, 200), i, utf8_clean(s, 200)));
  }
  void skip() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool eat(char c) {
    skip();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(fmt::format("expected '{}'", c));
  }
  std::string string() {
    skip();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail("expected a string");
    const char q = s[i++];
    const size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) fail("unterminated string");
    return std::string(s.substr(start, i++ - start));
  }
  bool boolean() {
    skip();
    if (s.substr(i, 4) == "True") {
      i += 4;
      return true;
    }
    if (s.substr(i, 5) == "False") {
      i += 5;
      return false;
    }
    fail("expected True or False");
  }
  int64_t integer() {
    skip();
    const size_t start = i;
    int64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (v > (int64_t(1) << 50)) fail("dimension too large");
      v = v * 10 + (s[i++] - '0');
    }
    if (i == start) fail("expected a non-negative integer");
    if (i < s.size() && (s[i] == 'L' || s[i] == 'l')) ++i;  // Python 2 longs
    return v;
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    if (eat(')')) return out;
    for (;;) {
      out.push_back(integer());
      if (eat(')')) return out;
      expect(',');
      if (eat(')')) return out;
    }
  }
};

void write_all(int fd, const std::string& path, const struct iovec* iov, int n) {
  std::vector<struct iovec> v(iov, iov + n);
  size_t k = 0;
  while (k < v.size()) {
    const ssize_t w = ::writev(fd, &v[k], int(v.size() - k));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
    }
    size_t left = size_t(w);
    while (k < v.size() && left >= v[k].iov_len) left -= v[k++].iov_len;
    if (k < v.size()) {
      v[k].iov_base = static_cast<char*>(v[k].iov_base) + left;
      v[k].iov_len -= left;
    }
  }
}

}  // namespace

bool c_order(const TensorView& v) {
  int64_t expect = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    if (v.shape[i] != 1 && v.stride[i] != expect) return false;
    expect *= v.shape[i];
  }
  return true;
}

namespace {

// Calls f(element offset) for every element of v in C order.
template <class F>
void for_each_offset(const TensorView& v, F f) {
  if (v.numel() <= 0) return;
  std::array<int64_t, kernels::kMaxRank> idx{};
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < v.rank; ++d) off += idx[d] * v.stride[d];
    f(off);
    int d = v.rank - 1;
    while (d >= 0 && ++idx[d] == v.shape[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

}  // namespace

std::string_view descr_of(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::bf16: return "<u2";
    case DType::fp8_e4m3fn: case DType::fp8_e4m3fnuz: case DType::fp8_e5m2: return "|u1";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    case DType::none: return "";
  }
  return "";
}

int item_size(std::string_view d) {
  if (d.size() < 3 || (d[0] != '<' && d[0] != '|' && d[0] != '>' && d[0] != '=')) return 0;
  const std::string_view kind = d.substr(1, 1), size = d.substr(2);
  if (kind != "f" && kind != "u" && kind != "i" && kind != "b") return 0;
  if (size == "1") return 1;
  if (size == "2") return 2;
  if (size == "4") return 4;
  if (size == "8") return 8;
  return 0;
}

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t x : shape) n *= x;
  return n;
}

std::string header(std::string_view descr, const std::vector<int64_t>& shape) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (", descr);
  for (size_t i = 0; i < shape.size(); ++i) dict += fmt::format("{}{}", i ? ", " : "", shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";
  // Version 1.0 holds a header up to 65535 bytes; beyond that 2.0.
  size_t prefix = kMagicLen + 2 + 2;
  const size_t padded1 = (prefix + dict.size() + 1 + kAlign - 1) / kAlign * kAlign;
  const bool v2 = padded1 - prefix > 65535;
  if (v2) prefix = kMagicLen + 2 + 4;
  const size_t total = (prefix + dict.size() + 1 + kAlign - 1) / kAlign * kAlign;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicLen);
  out += char(v2 ? 2 : 1);
  out += char(0);
  const uint32_t len = uint32_t(dict.size());
  out += char(len & 0xff);
  out += char((len >> 8) & 0xff);
  if (v2) {
    out += char((len >> 16) & 0xff);
    out += char((len >> 24) & 0xff);
  }
  return out + dict;
}

KeptFile::~KeptFile() {
  if (map_) ::munmap(map_, size_);
  if (fd_ >= 0) ::close(fd_);
}

bool KeptFile::put(const TensorView& v) {
  const std::string_view descr = descr_of(v.dtype);
  if (descr.empty()) throw Error(path_ + ": no .npy type for dtype " + std::string(kernels::to_string(v.dtype)));
  if (v.numel() > 0 && !c_order(v)) throw Error(path_ + ": a kept file takes views in C order");
  std::vector<int64_t> shape(v.shape.begin(), v.shape.begin() + v.rank);
  const std::string head = header(descr, shape);
  const size_t bytes = size_t(std::max<int64_t>(v.numel(), 0)) * size_t(kernels::dtype_size(v.dtype));
  const size_t total = head.size() + bytes;
  const bool sparse = bytes >= kSparseBytes;
  if (!sparse && !sparse_ && map_ && size_ == total && std::memcmp(map_, head.data(), head.size()) == 0 &&
      (bytes == 0 || std::memcmp(map_ + head.size(), v.data, bytes) == 0))
    return false;
  if (fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) throw Error(fmt::format("{}: cannot create: {}", path_, std::strerror(errno)));
  }
  // Reserved before any byte is written through the mapping: a full tmpfs
  // fails here, not as SIGBUS on a mapped write.
  auto reserve = [&](size_t from, size_t n) {
    if (const int rc = ::posix_fallocate(fd_, off_t(from), off_t(n)); rc != 0)
      throw Error(fmt::format("{}: cannot reserve {} bytes: {}", path_, n, std::strerror(rc)));
  };
  // A range of the mapped file made zeros again: a hole where the file system
  // punches them, else zeros written.
  auto clear = [&](size_t from, size_t n) {
    if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(from), off_t(n)) == 0) return;
    if (errno != EOPNOTSUPP && errno != ENOSYS)
      throw Error(fmt::format("{}: cannot clear {} bytes: {}", path_, n, std::strerror(errno)));
    std::memset(map_ + from, 0, n);
  };
  bool wrote = false;
  // A new layout (size, header length, sparse or not) starts the file afresh:
  // which chunks hold data is known only for the layout it was written in.
  if (size_ != total || head_bytes_ != head.size() || sparse_ != sparse) {
    if (map_) ::munmap(map_, size_);
    map_ = nullptr;
    size_ = 0;
    // Sparse: emptied first, so every chunk is zeros (a hole) and the loop
    // below writes those with data.
    if ((sparse && ::ftruncate(fd_, 0) != 0) || ::ftruncate(fd_, off_t(total)) != 0)
      throw Error(fmt::format("{}: cannot size to {} bytes: {}", path_, total, std::strerror(errno)));
    reserve(0, sparse ? head.size() : total);
    void* m = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (m == MAP_FAILED) throw Error(fmt::format("{}: cannot map: {}", path_, std::strerror(errno)));
    map_ = static_cast<uint8_t*>(m);
    size_ = total;
    head_bytes_ = head.size();
    sparse_ = sparse;
    chunk_held_.assign(sparse ? (bytes + kChunkBytes - 1) / kChunkBytes : 0, false);
    wrote = true;
  }
  if (!sparse) {
    std::memcpy(map_, head.data(), head.size());
    if (bytes > 0) std::memcpy(map_ + head.size(), v.data, bytes);
    return true;
  }
  if (std::memcmp(map_, head.data(), head.size()) != 0) {
    std::memcpy(map_, head.data(), head.size());
    wrote = true;
  }
  const auto* src = static_cast<const uint8_t*>(v.data);
  for (size_t i = 0; i < chunk_held_.size(); ++i) {
    const size_t off = i * kChunkBytes, n = std::min(kChunkBytes, bytes - off);
    const uint8_t* from = src + off;
    uint8_t* to = map_ + head.size() + off;
    if (from[0] == 0 && std::memcmp(from, from + 1, n - 1) == 0) {  // all zero: a hole
      if (chunk_held_[i]) {
        clear(head.size() + off, n);
        chunk_held_[i] = false;
        wrote = true;
      }
      continue;
    }
    if (chunk_held_[i] && std::memcmp(to, from, n) == 0) continue;
    if (!chunk_held_[i]) reserve(head.size() + off, n);
    chunk_held_[i] = true;
    std::memcpy(to, from, n);
    wrote = true;
  }
  return wrote;
}

void write(const std::string& path, const TensorView& v) {
  const std::string_view descr = descr_of(v.dtype);
  if (descr.empty()) throw Error(path + ": no .npy type for dtype " + std::string(kernels::to_string(v.dtype)));
  std::vector<int64_t> shape(v.shape.begin(), v.shape.begin() + v.rank);
  const std::string head = header(descr, shape);
  const int es = kernels::dtype_size(v.dtype);
  const int64_t n = v.numel();
  std::vector<uint8_t> packed;
  const void* data = v.data;
  if (!c_order(v) && n > 0) {
    packed.resize(size_t(n * es));
    uint8_t* dst = packed.data();
    const auto* src = static_cast<const uint8_t*>(v.data);
    for_each_offset(v, [&](int64_t off) {
      std::memcpy(dst, src + off * es, size_t(es));
      dst += es;
    });
    data = packed.data();
  }
  // Never through a symlink, never blocking on a FIFO someone left in place
  // (no reader: ENXIO), never into anything but a regular file.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) throw Error(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: exists and is not a regular file", path));
  }
  struct iovec iov[2] = {{const_cast<char*>(head.data()), head.size()},
                         {const_cast<void*>(data), size_t(std::max<int64_t>(n, 0) * es)}};
  try {
    write_all(fd, path, iov, n > 0 ? 2 : 1);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw Error(fmt::format("{}: close failed: {}", path, std::strerror(errno)));
}

Array parse(std::string_view b) {
  if (b.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen)) throw Error("not a .npy file (bad magic)");
  if (b.size() < kMagicLen + 2) throw Error("truncated .npy header (no version)");
  const int major = uint8_t(b[kMagicLen]), minor = uint8_t(b[kMagicLen + 1]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw Error(fmt::format("unsupported .npy format version {}.{}", major, minor));
  size_t pos = kMagicLen + 2;
  uint64_t hlen = 0;
  const int len_bytes = major == 1 ? 2 : 4;
  if (b.size() < pos + size_t(len_bytes)) throw Error("truncated .npy header length");
  for (int i = 0; i < len_bytes; ++i) hlen |= uint64_t(uint8_t(b[pos + size_t(i)])) << (8 * i);
  pos += size_t(len_bytes);
  if (hlen > kMaxHeaderBytes) throw Error(fmt::format("npy header of {} bytes (at most {})", hlen, kMaxHeaderBytes));
  if (b.size() < pos + hlen) throw Error(fmt::format("truncated .npy header ({} bytes announced)", hlen));
  Literal lit{b.substr(pos, hlen)};
  Array a;
  bool has_descr = false, has_order = false, has_shape = false;
  lit.expect('{');
  while (!lit.eat('}')) {
    const std::string key = lit.string();
    lit.expect(':');
    if (key == "descr") {
      a.descr = lit.string();
      has_descr = true;
    } else if (key == "fortran_order") {
      a.fortran_order = lit.boolean();
      has_order = true;
    } else if (key == "shape") {
      a.shape = lit.tuple();
      has_shape = true;
    } else {
      lit.fail("unknown key '" + key + "'");
    }
    if (!lit.eat(',')) {
      lit.expect('}');
      break;
    }
  }
  if (!has_descr || !has_order || !has_shape) throw Error("npy header: descr, fortran_order and shape are all required");
  const int es = item_size(a.descr);
  if (es == 0) throw Error("npy header: unsupported descr '" + utf8_clean(a.descr, 64) + "'");
  if (a.descr[0] == '>' && es > 1) throw Error("npy: big-endian data ('" + a.descr + "') is not supported");
  const std::string_view body = b.substr(pos + hlen);
  const int64_t n = a.numel();
  if (int64_t(body.size()) != n * es)
    throw Error(fmt::format("npy: {} data bytes for shape ({}) of '{}', expected {}", body.size(),
                            fmt::format("{}", fmt::join(a.shape, ", ")), a.descr, n * es));
  a.data.assign(body.begin(), body.end());
  return a;
}

namespace {

// Closes a descriptor read from when it goes out of scope.
struct ClosedOnExit {
  explicit ClosedOnExit(int f) : fd(f) {}
  ~ClosedOnExit() { ::close(fd); }
  ClosedOnExit(const ClosedOnExit&) = delete;
  ClosedOnExit& operator=(const ClosedOnExit&) = delete;
  int fd;
};

}  // namespace

Array read(const std::string& path, int64_t max_data_bytes) {
  // O_NOFOLLOW: a symlink (to /dev/zero, out of the folder) is refused;
  // O_NONBLOCK: opening a FIFO does not wait for a writer. Then only a regular
  // file of at most the data bound plus a header is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    throw Error(e == ELOOP ? fmt::format("{}: a symbolic link (outputs must be regular files)", path)
                           : fmt::format("{}: {}", path, std::strerror(e)));
  }
  // Closed on every way out, the refusals included (a worker writing oversized
  // outputs case after case must not run pav out of descriptors).
  const ClosedOnExit closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(fmt::format("{}: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISFIFO(st.st_mode)  ? "a FIFO"
                       : S_ISCHR(st.st_mode) ? "a character device"
                       : S_ISBLK(st.st_mode) ? "a block device"
                       : S_ISDIR(st.st_mode) ? "a directory"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw Error(fmt::format("{}: {} (outputs must be regular files)", path, kind));
  }
  const int64_t limit = max_data_bytes + int64_t(kMaxHeaderBytes) + 16;
  if (st.st_size > limit)
    throw Error(fmt::format("{}: {} bytes, more than the {} its shape allows", path, st.st_size, limit));
  std::string bytes(size_t(st.st_size) + 1, '\0');  // one byte more: a file that grows is seen
  size_t got = 0;
  for (;;) {
    if (got == bytes.size()) throw Error(fmt::format("{}: grew while it was read", path));
    const ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    }
    if (r == 0) break;
    got += size_t(r);
  }
  bytes.resize(got);
  try {
    return parse(bytes);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

void copy_into(const Array& a, const TensorView& v, std::string_view what) {
  const std::string_view want = descr_of(v.dtype);
  std::vector<int64_t> shape(v.shape.begin(), v.shape.begin() + v.rank);
  if (a.descr != want)
    throw Error(fmt::format("{}: dtype '{}', expected '{}' ({})", what, a.descr, want, kernels::to_string(v.dtype)));
  if (a.shape != shape)
    throw Error(fmt::format("{}: shape ({}), expected ({})", what, fmt::join(a.shape, ", "), fmt::join(shape, ", ")));
  if (a.fortran_order && v.rank > 1) throw Error(fmt::format("{}: Fortran order, expected C order", what));
  const int es = kernels::dtype_size(v.dtype);
  if (c_order(v)) {
    if (!a.data.empty()) std::memcpy(v.data, a.data.data(), a.data.size());
    return;
  }
  const uint8_t* src = a.data.data();
  auto* dst = static_cast<uint8_t*>(v.data);
  for_each_offset(v, [&](int64_t off) {
    std::memcpy(dst + off * es, src, size_t(es));
    src += es;
  });
}

}  // namespace pav::adapters::npy
