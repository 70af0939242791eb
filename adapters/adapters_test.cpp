// SPDX-License-Identifier: Apache-2.0
// The kernel contract and its adapters: .npy files, descriptions (JSON and the
// C ABI), the contract's admission rule at every edge, the lib adapter against
// pav's CPU plugin and broken plugins, the worker adapter against a worker that
// misbehaves in each way, isolation of a crashing plugin, and the kernel
// properties against kernels whose check or description lies.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <set>
#include <sstream>

#include "adapters/abi.hpp"
#include "adapters/kernel.hpp"
#include "adapters/lib_kernel.hpp"
#include "adapters/npy.hpp"
#include "adapters/pav_kernel.hpp"
#include "adapters/testdata/test_support.hpp"
#include "adapters/worker_protocol.hpp"
#include "adapters/worker_server.hpp"
#include "common/durable_file.hpp"
#include "common/fault_testing.hpp"
#include "common/test_paths.hpp"
#include "common/utf8_text.hpp"
#include "input/json_input.hpp"
#include "kernels/limits.hpp"
#include "properties/case/case_format.hpp"
#include "properties/engine/fuzz_engine.hpp"
#include "properties/checks/kernel_properties.hpp"
#include "properties/gen/shrink_cases.hpp"
#include "properties/gen/gen.hpp"
#include "properties/case/host_case.hpp"
#include "properties/gen/kernel_gen.hpp"
#include "properties/checks/runner_compare.hpp"
#include "properties/checks/runner_kernel.hpp"

// pipe2 fails on demand: this executable's pipe2 takes the C library's place
// for the worker adapter (linked in statically) and forwards every call but
// the one armed, which fails with EMFILE as a process out of descriptors would.
namespace {
std::atomic<int> pipes_until_failure{0};  // 0: never; n: the n-th call from now fails
}  // namespace

extern "C" int pipe2(int fds[2], int flags) {
  static const auto real = reinterpret_cast<int (*)(int*, int)>(::dlsym(RTLD_NEXT, "pipe2"));
  if (pipes_until_failure.load() > 0 && pipes_until_failure.fetch_sub(1) == 1) {
    errno = EMFILE;
    return -1;
  }
  return real(fds, flags);
}

namespace {

using namespace pav;
using adapters::CallResult;
using adapters::KernelDescription;
using adapters::KernelSpecError;
using adapters::Outcome;
using kernels::DType;
using kernels::TensorView;
using kernels::VLayout;

namespace fs = std::filesystem;

}  // namespace

namespace pav::adapters {
// Failures print descriptions as their JSON.
void PrintTo(const KernelDescription& d, std::ostream* os) { *os << to_json(d).dump(); }
}  // namespace pav::adapters

namespace {

fs::path scratch_dir(const std::string& name) { return adapters::fixture::scratch_dir("pav-adapters-test", name); }
using adapters::fixture::slurp;

// ---- .npy ---------------------------------------------------------------------------

TEST(Npy, HeaderBytesAsWorkedOutByHand) {
  // dict is 59 characters; magic, version and length take 10; one newline:
  // 70 bytes, padded with 58 spaces to 128, so HEADER_LEN = 118 = 0x76.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  ASSERT_EQ(dict.size(), 59u);
  const std::string want = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(58, ' ') + "\n";
  EXPECT_EQ(adapters::npy::header("<f4", {2, 3}), want);
  EXPECT_EQ(adapters::npy::header("<f4", {2, 3}).size(), 128u);
  // One dimension keeps Python's trailing comma; zero dimensions are ().
  EXPECT_NE(adapters::npy::header("|u1", {5}).find("'shape': (5,), }"), std::string::npos);
  EXPECT_NE(adapters::npy::header("<i4", {}).find("'shape': (), }"), std::string::npos);
  for (const auto& shape : std::vector<std::vector<int64_t>>{{1}, {7, 8, 9}, {123456789, 2}, {1, 1, 1, 1, 1, 1}})
    EXPECT_EQ(adapters::npy::header("<u2", shape).size() % 64, 0u);
}

TEST(Npy, DescrOfEachDtype) {
  EXPECT_EQ(adapters::npy::descr_of(DType::f32), "<f4");
  EXPECT_EQ(adapters::npy::descr_of(DType::f16), "<f2");
  EXPECT_EQ(adapters::npy::descr_of(DType::bf16), "<u2");
  EXPECT_EQ(adapters::npy::descr_of(DType::fp8_e4m3fn), "|u1");
  EXPECT_EQ(adapters::npy::descr_of(DType::fp8_e4m3fnuz), "|u1");
  EXPECT_EQ(adapters::npy::descr_of(DType::i32), "<i4");
  EXPECT_EQ(adapters::npy::descr_of(DType::i64), "<i8");
}

TEST(Npy, StridedViewRoundTripsCompacted) {
  // A [3, 2, 4] bf16 view whose rows are 10 elements apart (2 of padding).
  std::vector<uint16_t> buf(30);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint16_t(1000 + i);
  TensorView v = TensorView::contiguous_of(buf.data(), DType::bf16, {3, 2, 4});
  v.stride[0] = 10;
  const fs::path f = scratch_dir("npy") / "strided.npy";
  adapters::npy::write(f.string(), v);
  const adapters::npy::Array a = adapters::npy::read(f.string());
  EXPECT_EQ(a.descr, "<u2");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 2, 4}));
  ASSERT_EQ(a.data.size(), 48u);
  std::vector<uint16_t> got(24);
  std::memcpy(got.data(), a.data.data(), 48);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 8; ++i) EXPECT_EQ(got[size_t(r * 8 + i)], 1000 + r * 10 + i);
  // And back into a strided view: the padding is untouched.
  std::vector<uint16_t> back(30, 7);
  TensorView w = v;
  w.data = back.data();
  adapters::npy::copy_into(a, w, "strided");
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 8; ++i) EXPECT_EQ(back[size_t(r * 10 + i)], 1000 + r * 10 + i);
    if (r < 2) {
      EXPECT_EQ(back[size_t(r * 10 + 8)], 7);
    }
  }
}

// A strided decode input crosses the worker protocol as its storage span: the
// descriptor says "storage": "span", the file holds every element from the
// first to the last (padding included), and the worker's load_tensor sees the
// same strides and elements. A C-order view goes as its shape, as before.
TEST(WorkerProtocol, StridedInputsGoAsTheirSpan) {
  namespace protocol = adapters::protocol;
  std::vector<uint16_t> buf(64);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint16_t(2000 + i);
  TensorView v = TensorView::contiguous_of(buf.data(), DType::bf16, {3, 2, 4});
  v.stride = {20, 8, 1};  // padded pages and rows: span 2*20 + 8 + 3 + 1 = 52
  ASSERT_TRUE(protocol::sent_as_span(v));
  const fs::path dir = scratch_dir("span");
  adapters::npy::write((dir / "k.npy").string(), protocol::span_view(v));
  const nlohmann::json d = protocol::descriptor(v, "k.npy", false);
  EXPECT_EQ(d.at("storage"), "span");
  EXPECT_EQ(adapters::npy::read((dir / "k.npy").string()).shape, (std::vector<int64_t>{52}));
  const protocol::OwnedTensor t = protocol::load_tensor(d, dir.string(), "k_cache");
  EXPECT_EQ(t.view.stride, v.stride);
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 4; ++c)
        EXPECT_EQ(t.view.as<uint16_t>()[a * 20 + b * 8 + c], 2000 + a * 20 + b * 8 + c) << a << b << c;
  // A span file whose length is not the view's span, or an unknown storage, is refused by name.
  nlohmann::json bad = d;
  bad["strides"] = {21, 8, 1};
  EXPECT_THROW(protocol::load_tensor(bad, dir.string(), "k_cache"), std::runtime_error);
  bad = d;
  bad["storage"] = "packed";
  try {
    protocol::load_tensor(bad, dir.string(), "k_cache");
    ADD_FAILURE() << "an unknown storage was accepted";
  } catch (const pav::input::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("storage"), std::string::npos) << e.what();
  }
  // Contiguous: no storage field, the file holds the shape.
  const TensorView c = TensorView::contiguous_of(buf.data(), DType::bf16, {3, 2, 4});
  EXPECT_FALSE(protocol::sent_as_span(c));
  EXPECT_FALSE(protocol::descriptor(c, "c.npy", false).contains("storage"));
}

TEST(Npy, MalformedFilesAreRefusedWithTheReason) {
  const std::string good = adapters::npy::header("<f4", {2}) + std::string(8, '\0');
  EXPECT_NO_THROW(adapters::npy::parse(good));
  struct Bad {
    std::string bytes, why;
  };
  std::string v4 = good;
  v4[6] = 4;
  std::string minor = good;
  minor[7] = 1;
  auto with_dict = [](const std::string& dict) {
    std::string h = std::string("\x93NUMPY\x01\x00", 8);
    h += char(dict.size() & 0xff);
    h += char(dict.size() >> 8);
    return h + dict;
  };
  const std::vector<Bad> bad = {
      {"\x92NUMPY" + good.substr(6), "bad magic"},
      {v4, "version 4.0"},
      {minor, "version 1.1"},
      {good.substr(0, 9), "truncated .npy header length"},
      {good.substr(0, 40), "truncated .npy header"},
      {good + std::string(4, '\0'), "12 data bytes"},
      {good.substr(0, good.size() - 1), "7 data bytes"},
      {with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n"), "unknown key 'x'"},
      {with_dict("{'descr': '<f4', 'fortran_order': False}\n"), "all required"},
      {with_dict("{'descr': '>f4', 'fortran_order': False, 'shape': (0,), }\n"), "big-endian"},
      {with_dict("{'descr': '<c8', 'fortran_order': False, 'shape': (0,), }\n"), "unsupported descr"},
      {with_dict("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (0,), }\n"), "True or False"},
      {with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }\n"), "non-negative integer"},
  };
  for (const Bad& b : bad) {
    try {
      adapters::npy::parse(b.bytes);
      ADD_FAILURE() << "accepted: " << b.why;
    } catch (const adapters::npy::Error& e) {
      EXPECT_NE(std::string(e.what()).find(b.why), std::string::npos) << e.what() << " (wanted " << b.why << ")";
    }
  }
}

// Reading and writing .npy files closes every descriptor they open, on each
// refusal too: an oversized file, a file that grows while it is read (a
// /proc file, whose size says 0), a directory, a device, a symlink; a write
// into a device or past a file size limit.
TEST(Npy, EveryReadAndWriteClosesWhatItOpens) {
  const fs::path dir = scratch_dir("npy-fds");
  std::vector<float> data(1024, 1.0f);
  const TensorView v = TensorView::contiguous_of(data.data(), DType::f32, {1024});
  const fs::path f = dir / "a.npy";
  fs::remove(dir / "link");
  fs::create_symlink(f, dir / "link");
  const int before = pav::testing::open_descriptors();
  adapters::npy::write(f.string(), v);
  EXPECT_EQ(adapters::npy::read(f.string()).shape, (std::vector<int64_t>{1024}));
  std::ofstream((dir / "big.npy").string(), std::ios::binary) << std::string(adapters::npy::kMaxHeaderBytes + 64, 'x');
  EXPECT_EQ(pav::testing::open_descriptors(), before);
  struct Refused {
    std::string path, why;
    int64_t max_bytes;
  };
  for (const Refused& r : {Refused{(dir / "big.npy").string(), "more than the", 16}, Refused{"/proc/self/status", "grew while", 1 << 20},
                           Refused{dir.string(), "a directory", 1 << 20}, Refused{"/dev/null", "a character device", 1 << 20},
                           Refused{(dir / "link").string(), "a symbolic link", 1 << 20}}) {
    SCOPED_TRACE(r.path);
    try {
      (void)adapters::npy::read(r.path, r.max_bytes);
      ADD_FAILURE() << "read";
    } catch (const adapters::npy::Error& e) {
      EXPECT_NE(std::string(e.what()).find(r.why), std::string::npos) << e.what();
    }
    EXPECT_EQ(pav::testing::open_descriptors(), before) << "a refused read left its file open";
  }
  EXPECT_THROW(adapters::npy::write("/dev/null", v), adapters::npy::Error);
  {
    pav::testing::FileSizeLimit limit(4096);
    EXPECT_THROW(adapters::npy::write((dir / "b.npy").string(), v), adapters::npy::Error);
  }
  EXPECT_EQ(pav::testing::open_descriptors(), before) << "a failed write left its file open";
  fs::remove_all(dir);
}

// The worker's inputs stay in their files between calls: rewritten where the
// bytes differ, not at all when they repeat; never through a planted link; a
// full file system or a size limit is an error, never a signal.
TEST(Npy, AKeptFileIsRewrittenOnlyWhereItsBytesDiffer) {
  const fs::path dir = scratch_dir("npy-kept");
  std::vector<float> data(1024, 1.0f);
  const int before = pav::testing::open_descriptors();
  auto read_back = [](const fs::path& f) {
    const adapters::npy::Array a = adapters::npy::read(f.string());
    std::vector<float> v(a.data.size() / sizeof(float));
    std::memcpy(v.data(), a.data.data(), a.data.size());
    return std::make_pair(a.shape, v);
  };
  {
    adapters::npy::KeptFile k((dir / "k.npy").string());
    const TensorView v = TensorView::contiguous_of(data.data(), DType::f32, {1024});
    EXPECT_TRUE(k.put(v));
    EXPECT_FALSE(k.put(v)) << "the same bytes again: nothing to write";
    data[1023] = 2.0f;  // the last byte differs: found and written
    EXPECT_TRUE(k.put(v));
    EXPECT_EQ(read_back(dir / "k.npy").second, data);
    data[0] = 3.0f;
    EXPECT_TRUE(k.put(v));
    EXPECT_EQ(read_back(dir / "k.npy").second, data);
    const TensorView half = TensorView::contiguous_of(data.data(), DType::f32, {2, 256});
    EXPECT_TRUE(k.put(half));  // another shape, another size
    const auto [shape, values] = read_back(dir / "k.npy");
    EXPECT_EQ(shape, (std::vector<int64_t>{2, 256}));
    EXPECT_EQ(values, std::vector<float>(data.begin(), data.begin() + 512));
    EXPECT_FALSE(k.put(half));
  }
  fs::create_symlink(dir / "elsewhere.npy", dir / "planted.npy");
  {
    adapters::npy::KeptFile planted((dir / "planted.npy").string());
    EXPECT_THROW(planted.put(TensorView::contiguous_of(data.data(), DType::f32, {4})), adapters::npy::Error);
    EXPECT_FALSE(fs::exists(dir / "elsewhere.npy")) << "written through a link";
  }
  {
    pav::testing::FileSizeLimit limit(4096);
    adapters::npy::KeptFile big((dir / "big.npy").string());
    EXPECT_THROW(big.put(TensorView::contiguous_of(data.data(), DType::f32, {1024})), adapters::npy::Error);
  }
  EXPECT_EQ(pav::testing::open_descriptors(), before) << "a kept file left its descriptor open";
  fs::remove_all(dir);
}

// A kept file of kSparseBytes or more holds its chunks of zeros as holes: a
// large cache's gigabytes of zero low blocks are never written, and its file
// takes the space of the chunks with data. A chunk that held data and is now
// zero reads back zero; one that was a hole and now holds data is written.
TEST(Npy, ALargeKeptFileHoldsItsZeroChunksAsHoles) {
  const fs::path dir = scratch_dir("npy-sparse");
  using adapters::npy::KeptFile;
  const size_t chunk = KeptFile::kChunkBytes, n = KeptFile::kSparseBytes + 3 * chunk + 5;
  std::vector<uint8_t> data(n, 0);
  std::fill(data.end() - std::ptrdiff_t(chunk) - 5, data.end(), uint8_t(7));  // data in the last two chunks
  data[chunk / 2] = 1;                                                        // and one byte of the first
  auto read_back = [&] { return adapters::npy::read((dir / "k.npy").string(), int64_t(n)).data; };
  auto allocated = [&] {
    struct stat st {};
    EXPECT_EQ(::stat((dir / "k.npy").c_str(), &st), 0);
    return int64_t(st.st_blocks) * 512;
  };
  {
    KeptFile k((dir / "k.npy").string());
    const TensorView v = TensorView::contiguous_of(data.data(), DType::fp8_e4m3fn, {int64_t(n)});
    EXPECT_TRUE(k.put(v));
    EXPECT_EQ(read_back(), data);
    EXPECT_LE(allocated(), int64_t(4 * chunk)) << "zero chunks were written";
    EXPECT_FALSE(k.put(v)) << "the same bytes again: nothing to write";
    data[chunk / 2] = 0;       // the first chunk's data gone: zero again
    data[5 * chunk + 1] = 9;   // a hole that now holds data
    EXPECT_TRUE(k.put(v));
    EXPECT_EQ(read_back(), data);
    EXPECT_LE(allocated(), int64_t(4 * chunk));
    const TensorView shorter = TensorView::contiguous_of(data.data(), DType::fp8_e4m3fn, {int64_t(n - chunk)});
    EXPECT_TRUE(k.put(shorter));  // a new size starts afresh
    EXPECT_EQ(adapters::npy::read((dir / "k.npy").string(), int64_t(n)).data,
              std::vector<uint8_t>(data.begin(), data.end() - std::ptrdiff_t(chunk)));
  }
  fs::remove_all(dir);
}

TEST(Npy, CopyIntoNamesTheDifference) {
  std::vector<float> buf(6);
  const TensorView v = TensorView::contiguous_of(buf.data(), DType::f32, {2, 3});
  auto array = [](std::string descr, std::vector<int64_t> shape, bool fortran) {
    adapters::npy::Array a;
    a.descr = std::move(descr);
    a.shape = std::move(shape);
    a.fortran_order = fortran;
    a.data.assign(size_t(a.numel() * adapters::npy::item_size(a.descr)), 0);
    return a;
  };
  EXPECT_NO_THROW(adapters::npy::copy_into(array("<f4", {2, 3}, false), v, "out.npy"));
  for (auto [a, why] : {std::pair{array("<f2", {2, 3}, false), "dtype '<f2', expected '<f4'"},
                        std::pair{array("<f4", {3, 2}, false), "shape (3, 2), expected (2, 3)"},
                        std::pair{array("<f4", {2, 3, 1}, false), "shape (2, 3, 1)"},
                        std::pair{array("<f4", {2, 3}, true), "Fortran order"}}) {
    try {
      adapters::npy::copy_into(a, v, "out.npy");
      ADD_FAILURE() << "accepted: " << why;
    } catch (const adapters::npy::Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("out.npy"), std::string::npos) << e.what();
    }
  }
}

#ifdef PAV_TEST_PYTHON
// NumPy itself reads what pav writes, and writes byte for byte the same file.
TEST(Npy, NumPyReadsAndRewritesTheSameBytes) {
  const fs::path dir = scratch_dir("numpy");
  std::vector<float> f(12);
  for (int i = 0; i < 12; ++i) f[size_t(i)] = 0.5f * float(i) - 2.0f;
  std::vector<uint16_t> b(5);
  for (int i = 0; i < 5; ++i) b[size_t(i)] = uint16_t(0x3f80 + i);  // bf16 bits of 1.0, 1.0078125, ...
  std::vector<int32_t> t(4, -3);
  adapters::npy::write((dir / "f.npy").string(), TensorView::contiguous_of(f.data(), DType::f32, {3, 4}));
  adapters::npy::write((dir / "b.npy").string(), TensorView::contiguous_of(b.data(), DType::bf16, {5}));
  adapters::npy::write((dir / "t.npy").string(), TensorView::contiguous_of(t.data(), DType::i32, {1, 2, 2}));
  const std::string script =
      "import numpy as np, sys, io\n"
      "d = sys.argv[1]\n"
      "f = np.load(d + '/f.npy'); assert f.dtype == np.float32 and f.shape == (3, 4), (f.dtype, f.shape)\n"
      "assert (f == (0.5 * np.arange(12, dtype=np.float32) - 2).reshape(3, 4)).all()\n"
      "b = np.load(d + '/b.npy'); assert b.dtype == np.uint16 and b.shape == (5,)\n"
      "v = (b.astype(np.uint32) << 16).view(np.float32); assert abs(v[0] - 1.0) < 1e-9 and abs(v[1] - 1.0078125) < 1e-9\n"
      "t = np.load(d + '/t.npy'); assert t.dtype == np.int32 and t.shape == (1, 2, 2) and (t == -3).all()\n"
      "for n in ('f', 'b', 't'):\n"
      "    a = np.load(d + '/' + n + '.npy'); np.save(d + '/' + n + '.numpy.npy', a)\n"
      "np.save(d + '/h.npy', np.array([[1.5, -2.25]], dtype=np.float16))\n";
  std::ofstream(dir / "check.py") << script;
  const std::string cmd = std::string(PAV_TEST_PYTHON) + " " + (dir / "check.py").string() + " " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const char* n : {"f", "b", "t"})
    EXPECT_EQ(slurp(dir / (std::string(n) + ".npy")), slurp(dir / (std::string(n) + ".numpy.npy"))) << n;
  const adapters::npy::Array h = adapters::npy::read((dir / "h.npy").string());
  EXPECT_EQ(h.descr, "<f2");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{1, 2}));
  uint16_t bits[2];
  std::memcpy(bits, h.data.data(), 4);
  EXPECT_EQ(bits[0], 0x3e00);  // 1.5 in f16
  EXPECT_EQ(bits[1], 0xc080);  // -2.25 in f16
}
#endif

// ---- descriptions ----------------------------------------------------------------------

KernelDescription small_description() {
  KernelDescription d;
  d.name = "small";
  d.version = "0.1";
  d.q_dtypes = {DType::bf16};
  d.cache_dtypes = {DType::fp8_e4m3fn};
  d.v_layouts = {VLayout::plain};
  d.scale_kinds = {adapters::Scales::none, adapters::Scales::per_token};
  d.block_sizes = {16};
  d.head_dims = {64, 128};
  d.gqa_ratios = {1, 3};
  d.min_q_len = 1;
  d.max_q_len = 2;
  d.max_num_seqs = 3;
  d.max_kv_heads = 2;
  d.max_context_len = 300;
  d.split = adapters::Split::self;
  d.split_ceiling = true;
  d.max_split_ceiling = 8;
  d.has_check = true;
  d.profile = {adapters::QQuant::none, adapters::PRound::none, DType::none};
  return d;
}

// canonicalize sorts every list of a description (two descriptions that list
// the same things in another order then compare equal, across a restart too).
TEST(Description, CanonicalizeSortsEveryList) {
  KernelDescription d = small_description();
  d.q_dtypes = {DType::f16, DType::bf16};
  d.cache_dtypes = {DType::bf16, DType::fp8_e5m2, DType::fp8_e4m3fn};
  d.cache_layouts = {kernels::CacheLayout::hnd, kernels::CacheLayout::packed};
  d.v_layouts = {VLayout::trans, VLayout::plain};
  d.kv_storage = {adapters::KvStorage::latent, adapters::KvStorage::separate};
  d.mla_dims = {{512, 64}, {128, 64}};
  d.page_tables = {kernels::PageTable::csr, kernels::PageTable::block_table};
  d.scale_kinds = {adapters::Scales::per_token, adapters::Scales::none};
  d.block_sizes = {32, 16};
  d.head_dims = {128, 64};
  d.gqa_ratios = {8, 1};
  d.features = {adapters::Feature::alibi, adapters::Feature::window};
  adapters::canonicalize(d);
  auto sorted = [](const auto& v) { return v.size() >= 2 && std::is_sorted(v.begin(), v.end()); };
  EXPECT_TRUE(sorted(d.q_dtypes));
  EXPECT_TRUE(sorted(d.cache_dtypes));
  EXPECT_TRUE(sorted(d.cache_layouts));
  EXPECT_TRUE(sorted(d.v_layouts));
  EXPECT_TRUE(sorted(d.kv_storage));
  EXPECT_TRUE(sorted(d.mla_dims));
  EXPECT_TRUE(sorted(d.page_tables));
  EXPECT_TRUE(sorted(d.scale_kinds));
  EXPECT_TRUE(sorted(d.block_sizes));
  EXPECT_TRUE(sorted(d.head_dims));
  EXPECT_TRUE(sorted(d.gqa_ratios));
  EXPECT_TRUE(sorted(d.features));
}

// A description with any one of its required lists (or its name) empty is
// refused, naming that list first.
TEST(Description, EveryEmptyListIsNamed) {
  using Edit = std::function<void(KernelDescription&)>;
  const std::vector<std::pair<std::string, Edit>> edits = {
      {"name", [](KernelDescription& d) { d.name.clear(); }},
      {"q_dtypes", [](KernelDescription& d) { d.q_dtypes.clear(); }},
      {"cache_dtypes", [](KernelDescription& d) { d.cache_dtypes.clear(); }},
      {"cache_layouts", [](KernelDescription& d) { d.cache_layouts.clear(); }},
      {"kv_storage", [](KernelDescription& d) { d.kv_storage.clear(); }},
      {"page_tables", [](KernelDescription& d) { d.page_tables.clear(); }},
      {"v_layouts", [](KernelDescription& d) { d.v_layouts.clear(); }},
      {"scale_kinds", [](KernelDescription& d) { d.scale_kinds.clear(); }},
      {"block_sizes", [](KernelDescription& d) { d.block_sizes.clear(); }},
      {"head_dims", [](KernelDescription& d) { d.head_dims.clear(); }},
      {"gqa_ratios", [](KernelDescription& d) { d.gqa_ratios.clear(); }},
  };
  ASSERT_EQ(adapters::description_problem(small_description()), "");
  for (const auto& [field, edit] : edits) {
    KernelDescription d = small_description();
    edit(d);
    EXPECT_EQ(adapters::description_problem(d).rfind(field + ": empty", 0), 0u) << adapters::description_problem(d);
  }
}

// The output dtype a kernel declares: the call's own (none, "same"), f32, bf16
// or f16; an fp8 or integer output is refused by name.
TEST(Description, OutDtypeIsSameOrASixteenOrThirtyTwoBitFloat) {
  KernelDescription d = small_description();
  for (DType t : {DType::none, DType::f32, DType::bf16, DType::f16}) {
    d.out_dtype = t;
    EXPECT_EQ(adapters::description_problem(d), "") << kernels::to_string(t);
  }
  for (DType t : {DType::fp8_e4m3fn, DType::fp8_e5m2, DType::i32}) {
    d.out_dtype = t;
    EXPECT_EQ(adapters::description_problem(d).rfind("out_dtype: ", 0), 0u) << kernels::to_string(t);
  }
}

// Every name of every cache-format list goes through the JSON reader as itself:
// a description naming them all reads back equal.
TEST(Description, JsonRoundTripsEveryCacheFormatName) {
  KernelDescription d = small_description();
  d.cache_layouts = {kernels::CacheLayout::packed, kernels::CacheLayout::nhd, kernels::CacheLayout::hnd};
  d.v_layouts = {VLayout::plain, VLayout::trans};
  d.kv_storage = {adapters::KvStorage::separate, adapters::KvStorage::combined, adapters::KvStorage::latent};
  d.mla_dims = {{512, 64}};
  d.head_dims = {64, 128, 576};
  d.page_tables = {kernels::PageTable::block_table, kernels::PageTable::csr};
  adapters::canonicalize(d);
  ASSERT_EQ(adapters::description_problem(d), "");
  EXPECT_EQ(adapters::description_from_json(adapters::to_json(d)), d);
}

TEST(Description, ScratchIsDeclaredAsABooleanAndEveryDecodeRequestThenAsksForThePoison) {
  KernelDescription d = small_description();
  EXPECT_FALSE(adapters::to_json(d).contains("scratch"));  // absent: no scratch, as before the field
  EXPECT_FALSE(adapters::description_from_json(adapters::to_json(d)).scratch);
  d.scratch = true;
  EXPECT_EQ(adapters::to_json(d).at("scratch"), true);
  EXPECT_EQ(adapters::description_from_json(adapters::to_json(d)), d);
  EXPECT_NE(adapters::summary(d).find("scratch poisoned before each call"), std::string::npos);
  for (const nlohmann::json& bad : {nlohmann::json(1), nlohmann::json("true"), nlohmann::json(nullptr)}) {
    nlohmann::json j = adapters::to_json(d);
    j["scratch"] = bad;
    try {
      adapters::description_from_json(j);
      ADD_FAILURE() << "scratch: " << bad.dump() << " was taken";
    } catch (const adapters::KernelSpecError& e) {
      EXPECT_NE(std::string(e.what()).find("scratch"), std::string::npos) << e.what();
    }
  }
}

TEST(Description, JsonRoundTripsPavsOwnAndASmallOne) {
  for (bool planned : {true, false}) {
    adapters::PavKernelOptions o;
    o.planned = planned;
    const KernelDescription d = adapters::pav_kernel_description(o);
    EXPECT_EQ(adapters::description_problem(d), "");
    EXPECT_EQ(adapters::description_from_json(adapters::to_json(d)), d);
  }
  const KernelDescription s = small_description();
  EXPECT_EQ(adapters::description_from_json(adapters::to_json(s)), s);
  EXPECT_EQ(adapters::to_json(s).at("profile").at("partial"), "none");
  EXPECT_EQ(adapters::to_json(s).at("out_dtype"), "same");
}

TEST(Description, MalformedJsonNamesTheField) {
  const nlohmann::json good = adapters::to_json(small_description());
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string why;
  };
  const std::vector<Case> cases = {
      {[](auto& j) { j["head_dimz"] = 1; }, "unknown field 'head_dimz'"},
      {[](auto& j) { j.erase("head_dims"); }, "missing field 'head_dims'"},
      {[](auto& j) { j["head_dims"] = nlohmann::json::array(); }, "head_dims: empty"},
      {[](auto& j) { j["head_dims"] = {64, 72}; }, "head_dims: 72"},
      {[](auto& j) { j["head_dims"] = {64, 64}; }, "listed twice"},
      {[](auto& j) { j["q_dtypes"] = {"f32"}; }, "q_dtypes: f32"},
      {[](auto& j) { j["q_dtypes"] = {"bfloat16"}; }, "q_dtypes: unknown dtype"},
      {[](auto& j) { j["cache_dtypes"] = {"f32"}; }, "cache_dtypes: f32 is not a cache dtype"},
      {[](auto& j) { j["cache_dtypes"] = {"bf16"}; j["profile"]["q_quant"] = "fp8_per_row"; j["profile"]["p_round"] = "fp8_running_max"; },
       "profile: q_quant fp8_per_row / p_round fp8_running_max round to the cache's e4m3 flavour, but cache_dtypes holds bf16"},
      {[](auto& j) { j["v_layouts"] = {"sideways"}; }, "v_layouts: unknown value 'sideways'"},
      {[](auto& j) { j["scale_kinds"] = {"per_row"}; }, "scale_kinds: unknown value 'per_row'"},
      {[](auto& j) { j["q_len"] = {3, 2}; }, "q_len: maximum 2 < minimum 3"},
      {[](auto& j) { j["q_len"] = {0, 2}; }, "q_len: minimum 0"},
      {[](auto& j) { j["q_len"] = 4; }, "q_len: expected a list"},
      {[](auto& j) { j["max_context_len"] = -1; }, "max_context_len: negative"},
      {[](auto& j) { j["block_sizes"] = {0}; }, "block_sizes: 0"},
      {[](auto& j) { j["gqa_ratios"] = {1.5}; }, "gqa_ratios: expected an integer"},
      // Past int64 is refused by its value, never wrapped (to -1, or to the
      // most negative int64).
      {[](auto& j) { j["max_context_len"] = uint64_t(18446744073709551615ull); },
       "max_context_len: must be in -9223372036854775808..9223372036854775807, got 18446744073709551615"},
      {[](auto& j) { j["max_num_seqs"] = uint64_t(9223372036854775808ull); },
       "max_num_seqs: must be in -9223372036854775808..9223372036854775807, got 9223372036854775808"},
      {[](auto& j) { j["memory"] = "gpu"; }, "memory: unknown value 'gpu'"},
      {[](auto& j) { j["split"] = "auto"; }, "split: unknown value 'auto'"},
      {[](auto& j) { j["check"] = "yes"; }, "check: expected true or false"},
      {[](auto& j) { j["profile"]["p_round"] = "fp8_unscaled"; }, "profile.p_round: unknown value 'fp8_unscaled'"},
      {[](auto& j) { j["profile"]["q_quant"] = "int8"; }, "profile.q_quant: unknown value 'int8'"},
      {[](auto& j) { j["profile"]["partial"] = "fp8"; }, "profile.partial: unknown value"},
      {[](auto& j) { j["profile"]["partial"] = "i32"; }, "profile.partial: unknown value"},
      {[](auto& j) { j["profile"].erase("partial"); }, "profile: missing field 'partial'"},
      {[](auto& j) { j["profile"]["extra"] = 1; }, "profile: unknown field 'extra'"},
      {[](auto& j) { j["name"] = ""; }, "name: empty"},
      // Names and versions are bounded (kernels::kMaxKernelNameBytes = 256).
      {[](auto& j) { j["name"] = std::string(257, 'n'); }, "name: 257 bytes, more than 256"},
      {[](auto& j) { j["version"] = std::string(300, 'v'); }, "version: 300 bytes, more than 256"},
      // Every case pav saves must replay: the case format's limits (G 128,
      // q_len 16, kernels/limits.hpp) hold for a description too.
      {[](auto& j) { j["gqa_ratios"] = {1, 256}; }, "gqa_ratios: 256 outside 1..128"},
      {[](auto& j) { j["q_len"] = {20, 24}; }, "q_len: minimum 20 > 16"},
      {[](auto& j) { j = nlohmann::json::array(); }, "expected a JSON object"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.edit(j);
    try {
      adapters::description_from_json(j);
      ADD_FAILURE() << "accepted: " << c.why;
    } catch (const KernelSpecError& e) {
      EXPECT_NE(std::string(e.what()).find(c.why), std::string::npos) << e.what() << " (wanted " << c.why << ")";
    }
  }
}

TEST(Description, AbiRoundTripsAndRefusesWhatItCannotRead) {
  for (bool planned : {true, false}) {
    adapters::PavKernelOptions o;
    o.planned = planned;
    KernelDescription d = adapters::pav_kernel_description(o);
    pav_kernel_desc a{};
    adapters::abi::to_abi(d, &a);
    d.has_check = false;  // the ABI says this by the presence of the check symbol
    EXPECT_EQ(adapters::abi::from_abi(a), d);
  }
  pav_kernel_desc good{};
  adapters::abi::to_abi(small_description(), &good);
  EXPECT_EQ(good.q_quant, PAV_Q_QUANT_NONE);
  EXPECT_EQ(good.p_round, PAV_P_ROUND_NONE);
  EXPECT_EQ(good.partial_dtype, PAV_DTYPE_NONE);
  EXPECT_EQ(good.v_layouts, PAV_BIT(PAV_V_LAYOUT_PLAIN));
  EXPECT_EQ(good.scale_kinds, PAV_BIT(PAV_SCALE_NONE) | PAV_BIT(PAV_SCALE_PER_TOKEN));
  struct Case {
    std::function<void(pav_kernel_desc&)> edit;
    std::string why;
  };
  const std::vector<Case> cases = {
      {[](auto& a) { a.q_dtypes |= 1u << 20; }, "q_dtypes names dtype value 20"},
      {[](auto& a) { a.v_layouts |= 1u << 2; }, "v_layouts has bits set"},
      {[](auto& a) { a.scale_kinds = 1u << 3; }, "scale_kinds has bits set"},
      {[](auto& a) { a.num_head_dims = PAV_MAX_HEAD_DIMS + 1; }, "num_head_dims = 65 outside 0..64"},
      {[](auto& a) { a.num_block_sizes = -1; }, "num_block_sizes = -1"},
      {[](auto& a) { std::memset(a.name, 'x', PAV_NAME_LEN); }, "name is not NUL-terminated"},
      {[](auto& a) { a.q_quant = 3; }, "q_quant = 3"},
      {[](auto& a) { a.p_round = 5; }, "p_round = 5"},
      {[](auto& a) { a.partial_dtype = 99; }, "partial_dtype = 99"},
      {[](auto& a) { a.strided_q = 2; }, "strided_q = 2"},
      {[](auto& a) { a.split = 2; }, "split = 2"},
      {[](auto& a) { a.memory = -1; }, "memory = -1"},
      {[](auto& a) { a.num_gqa_ratios = 0; }, "gqa_ratios: empty"},
  };
  for (const Case& c : cases) {
    pav_kernel_desc a = good;
    c.edit(a);
    try {
      adapters::abi::from_abi(a);
      ADD_FAILURE() << "accepted: " << c.why;
    } catch (const KernelSpecError& e) {
      EXPECT_NE(std::string(e.what()).find(c.why), std::string::npos) << e.what() << " (wanted " << c.why << ")";
    }
  }
}

// ---- the contract's admission rule -------------------------------------------------------

using adapters::fixture::small_spec;

std::string violation(const props::CaseSpec& s, const KernelDescription& d,
                      const std::function<void(props::KernelCall&)>& edit = nullptr) {
  props::HostCase c = props::build_case(s);
  props::KernelCall k;
  props::prepare_kernel_call(k, c, d);
  if (edit) edit(k);
  return adapters::contract_violation(k.request, d);
}

// Each attention variant is admitted only where declared, with its tensors
// one f32 per query head; a description names its variants and lse base in JSON.
TEST(Contract, EachAttentionVariantNeedsItsDeclaration) {
  KernelDescription none = small_description();
  KernelDescription all = none;
  all.features = {adapters::Feature::window, adapters::Feature::soft_cap, adapters::Feature::sinks,
                  adapters::Feature::alibi};
  const int64_t hq = 6;
  struct Case {
    std::function<void(props::CaseSpec&)> set;
    std::string why;
  };
  const std::vector<Case> cases = {
      {[](auto& s) { s.window_left = 0; }, "variant.window_left 0: the kernel declares no sliding window"},
      {[](auto& s) { s.soft_cap = 1.0f; }, "variant.soft_cap 1: the kernel declares no soft cap"},
      {[&](auto& s) { s.sinks = std::vector<float>(size_t(hq), 1.0f); }, "variant.sinks: the kernel declares no sinks"},
      {[&](auto& s) { s.alibi_slopes = std::vector<float>(size_t(hq), 0.5f); },
       "variant.alibi_slopes: the kernel declares no alibi"},
  };
  for (const Case& c : cases) {
    props::CaseSpec s = small_spec();
    c.set(s);
    EXPECT_NE(violation(s, none).find(c.why), std::string::npos) << violation(s, none);
    EXPECT_EQ(violation(s, all), "") << c.why;
  }
  props::CaseSpec s = small_spec();
  EXPECT_EQ(violation(s, none), "");  // no variant: admitted without a declaration
  s.sinks = std::vector<float>(size_t(hq), 1.0f);
  EXPECT_NE(violation(s, all, [](props::KernelCall& k) { k.request.call.variant.sinks.shape[0] = 5; })
                .find("variant.sinks: f32 [5] (expected contiguous f32 [6])"),
            std::string::npos);
  EXPECT_NE(violation(s, all, [](props::KernelCall& k) { k.request.call.variant.soft_cap = -1.0f; })
                .find("variant.soft_cap -1 (expected 0 or a finite positive cap)"),
            std::string::npos);

  all.writes_lse = true;
  all.lse_base = adapters::LseBase::two;
  nlohmann::json j = adapters::to_json(all);
  EXPECT_EQ(j.at("variants"), nlohmann::json({"window", "soft_cap", "sinks", "alibi"}));
  EXPECT_EQ(j.at("lse_base"), "2");
  EXPECT_EQ(adapters::description_from_json(j), all);
  j["variants"] = {"window", "window"};
  EXPECT_THROW(adapters::description_from_json(j), KernelSpecError);
  j["variants"] = {"sliding"};
  try {
    adapters::description_from_json(j);
    ADD_FAILURE() << "an unknown variant was accepted";
  } catch (const KernelSpecError& e) {
    EXPECT_NE(std::string(e.what()).find("variants: unknown value 'sliding'"), std::string::npos) << e.what();
  }
  j["variants"] = nlohmann::json::array();
  j["writes_lse"] = false;
  EXPECT_THROW(adapters::description_from_json(j), KernelSpecError);  // an lse base without an lse
  j.erase("lse_base");
  j.erase("variants");
  EXPECT_TRUE(adapters::description_from_json(j).features.empty());  // a description from before variants
}

TEST(Contract, EachLimitHoldsAtItsEdgeAndFailsPastIt) {
  const KernelDescription d = small_description();
  EXPECT_EQ(violation(small_spec(), d), "");
  struct Edge {
    std::function<void(props::CaseSpec&)> inside, outside;
    std::string why;
  };
  const std::vector<Edge> edges = {
      {[](auto& s) { s.lens[0] = 300; }, [](auto& s) { s.lens[0] = 301; }, "max_context_len 300"},
      {[](auto& s) { s.lens[2] = 0; }, [](auto& s) { s.lens[2] = -1; }, "context_lens[2] = -1 < 0"},
      {[](auto& s) { s.lens = {1, 2, 3}; }, [](auto& s) { s.lens = {1, 2, 3, 4}; }, "num_seqs 4 > max_num_seqs 3"},
      {[](auto& s) { s.hkv = 2; }, [](auto& s) { s.hkv = 3; }, "Hkv 3 > max_kv_heads 2"},
      {[](auto& s) { s.group = 1; }, [](auto& s) { s.group = 2; }, "GQA ratio 2"},
      {[](auto& s) { s.head_dim = 128; }, [](auto& s) { s.head_dim = 80; }, "head_dim 80 not in head_dims"},
      {[](auto& s) { s.q_len = 1; }, [](auto& s) { s.q_len = 3; }, "q_len 3 outside 1..2"},
      {[](auto& s) { s.block_size = 16; }, [](auto& s) { s.block_size = 32; }, "block_size 32"},
      {[](auto& s) { s.v_layout = VLayout::plain; }, [](auto& s) { s.v_layout = VLayout::trans; }, "layout trans"},
      {[](auto& s) { s.q_dtype = DType::bf16; }, [](auto& s) { s.q_dtype = DType::f16; }, "q: dtype f16"},
      {[](auto& s) { s.cache_dtype = DType::fp8_e4m3fn; }, [](auto& s) { s.cache_dtype = DType::fp8_e4m3fnuz; },
       "cache_dtypes"},
      {[](auto& s) { s.scales = props::ScaleKind::none; }, [](auto& s) { s.scales = props::ScaleKind::per_tensor; },
       "scales: per_tensor"},
      {[](auto& s) { s.max_partitions = 8; }, [](auto& s) { s.max_partitions = 9; }, "max_partitions 9 > max_split_ceiling 8"},
      {[](auto& s) { s.q_row_pad = 0; }, [](auto& s) { s.q_row_pad = 16; }, "q: not contiguous"},
  };
  for (const Edge& e : edges) {
    props::CaseSpec in = small_spec(), out = small_spec();
    e.inside(in);
    e.outside(out);
    EXPECT_EQ(violation(in, d), "") << e.why;
    const std::string v = violation(out, d);
    EXPECT_NE(v.find(e.why), std::string::npos) << "'" << v << "' (wanted " << e.why << ")";
  }
}

TEST(Contract, TablesScalesLseAndPlan) {
  const KernelDescription d = small_description();
  const props::CaseSpec s = small_spec();
  // A used block-table entry must name a block of the cache: the last block is fine, one past is not.
  EXPECT_EQ(violation(s, d, [](props::KernelCall& k) {
              auto& c = k.request.call;
              c.block_tables.as<int32_t>()[0] = int32_t(c.k_cache.shape[0] - 1);
            }), "");
  EXPECT_NE(violation(s, d, [](props::KernelCall& k) {
              auto& c = k.request.call;
              c.block_tables.as<int32_t>()[0] = int32_t(c.k_cache.shape[0]);
            }).find("block_tables[0][0]"), std::string::npos);
  // An unused entry (past the context) is never read: anything goes.
  EXPECT_EQ(violation(s, d, [](props::KernelCall& k) {
              auto& c = k.request.call;
              c.block_tables.as<int32_t>()[c.block_tables.shape[1] * 2] = -7;  // sequence 2 has length 0
            }), "");
  EXPECT_NE(violation(s, d, [](props::KernelCall& k) { k.request.call.v_scale = TensorView{}; }).find("scales: k_scale given"),
            std::string::npos);
  EXPECT_NE(violation(s, d, [](props::KernelCall& k) { k.request.call.k_scale.dtype = DType::f16; }).find("k_scale: dtype f16"),
            std::string::npos);
  // One per-tensor scale beside a per-token one: both shapes are fine alone, not together.
  EXPECT_NE(violation(s, d, [](props::KernelCall& k) {
              auto& c = k.request.call;
              c.k_scale = TensorView::contiguous_of(c.k_scale.data, DType::f32, {1});
            }).find("k_scale and v_scale are of different kinds"),
            std::string::npos);
  KernelDescription all_scales = d;
  all_scales.scale_kinds = {adapters::Scales::none, adapters::Scales::per_tensor, adapters::Scales::per_token};
  EXPECT_NE(violation(s, all_scales, [](props::KernelCall& k) {
              auto& c = k.request.call;
              c.v_scale = TensorView::contiguous_of(c.v_scale.data, DType::f32, {1});
            }).find("different kinds"),
            std::string::npos);
  std::vector<float> lse(64);
  EXPECT_NE(violation(s, d, [&](props::KernelCall& k) {
              k.request.lse = TensorView::contiguous_of(lse.data(), DType::f32, {6, 6});
            }).find("lse: given to a kernel that does not write it"),
            std::string::npos);
  KernelDescription with_lse = d;
  with_lse.writes_lse = true;
  EXPECT_EQ(violation(s, with_lse), "");  // prepare_kernel_call adds a [rows, Hq] lse
  EXPECT_NE(violation(s, with_lse, [&](props::KernelCall& k) {
              k.request.lse = TensorView::contiguous_of(lse.data(), DType::f32, {6, 5});
            }).find("lse: f32 [6, 5]"),
            std::string::npos);
  kernels::PlanView plan;
  EXPECT_NE(violation(s, d, [&](props::KernelCall& k) { k.request.plan = &plan; }).find("plan: given to a kernel that splits by itself"),
            std::string::npos);
  KernelDescription no_ceiling = d;
  no_ceiling.split_ceiling = false;
  no_ceiling.max_split_ceiling = 0;
  props::CaseSpec ceil = s;
  ceil.max_partitions = 1;
  EXPECT_NE(violation(ceil, no_ceiling).find("takes no split ceiling"), std::string::npos);
  ceil.max_partitions = 0;
  EXPECT_EQ(violation(ceil, no_ceiling), "");
}

// The block rules of a call's layout have one home (kernels::holds_num_blocks
// and kernels::page_table_problem): V and per-token scales hold exactly
// num_blocks (K's dim 0), a used table entry names a block below it. Each edge
// from the contract check here; the same edges from the kernels' validation
// (ValidateLimits.TablesBlocksAndHeads) and from the plugin refusal
// (LibAdapter.PluginRefusalHoldsTheBlockRulesAtTheirEdges).
TEST(Contract, TheBlockRulesHoldAtNumBlocksAndNowhereElse) {
  const KernelDescription d = small_description();
  const props::CaseSpec s = small_spec();
  for (const int64_t delta : {int64_t(-1), int64_t(0), int64_t(1)}) {
    SCOPED_TRACE(delta);
    const std::string v = violation(s, d, [delta](props::KernelCall& k) {
      auto& c = k.request.call;
      c.v_cache.shape[0] = c.k_cache.shape[0] + delta;
    });
    const std::string scales = violation(s, d, [delta](props::KernelCall& k) {
      auto& c = k.request.call;
      c.k_scale.shape[0] = c.v_scale.shape[0] = c.k_cache.shape[0] + delta;
    });
    if (delta == 0) {
      EXPECT_EQ(v, "");
      EXPECT_EQ(scales, "");
    } else {
      EXPECT_NE(v.find("v_cache: shape"), std::string::npos) << v;
      EXPECT_NE(scales.find("k_scale: "), std::string::npos) << scales;
    }
  }
  for (const int64_t id : {int64_t(-1), int64_t(0)}) {
    const std::string why = violation(s, d, [id](props::KernelCall& k) {
      auto& c = k.request.call;
      c.block_tables.as<int32_t>()[0] = int32_t(id < 0 ? -1 : c.k_cache.shape[0]);
    });
    EXPECT_NE(why.find("block_tables[0][0]"), std::string::npos) << why;
  }
}

TEST(Contract, PlanKernelsGetAFittingPlan) {
  adapters::PavKernelOptions o;
  o.cu = 32;
  const KernelDescription d = adapters::pav_kernel_description(o);
  props::CaseSpec s = small_spec();
  s.head_dim = 128;
  s.path = props::Path::planned;
  s.opt.cu = 32;
  EXPECT_EQ(violation(s, d), "");
  s.opt.cu = 33;  // a plan whose ceiling (cu) passes the kernel's 32
  EXPECT_NE(violation(s, d).find("max_partitions 33 > max_split_ceiling 32"), std::string::npos);
  s.opt.cu = 32;
  EXPECT_NE(violation(s, d, [](props::KernelCall& k) { k.request.plan = nullptr; }).find("plan: missing"),
            std::string::npos);
  EXPECT_NE(violation(s, d, [](props::KernelCall& k) { k.request.max_partitions = 5; }).find("differs from the plan's 32"),
            std::string::npos);
  EXPECT_NE(violation(s, d, [](props::KernelCall& k) { k.plan_view.capacity = k.plan_view.num_seqs * 32 + 1; }).find("capacity"),
            std::string::npos);
}

// ---- the lib adapter -----------------------------------------------------------------------

std::string plugin(const char* path, const std::string& words = "") {
  return "lib:" + adapters::shell_quote(path) + (words.empty() ? "" : " " + words);
}

// Runs one case through a kernel; the output bytes and the call's outcome.
struct Ran {
  CallResult result;
  std::vector<uint16_t> out;
  bool judged_ok = false;
  std::string verdict;
};
Ran run_one(adapters::KernelUnderTest& k, const props::CaseSpec& s) {
  props::HostCase c = props::build_case(s);
  props::KernelCall kc;
  props::prepare_kernel_call(kc, c, k.description());
  Ran r;
  r.result = k.decode(kc.request);
  r.out = c.out;
  if (r.result.ok()) {
    const props::KernelJudgement j = props::judge_kernel_output(kc.request, k.description());
    r.judged_ok = j.passed;
    r.verdict = j.verdict;
  }
  return r;
}

props::CaseSpec planned_spec() {
  props::CaseSpec s = small_spec();
  s.head_dim = 128;
  s.path = props::Path::planned;
  s.opt.cu = 32;
  s.sentinels = props::boundary_sentinels(s.lens);
  return s;
}

TEST(LibAdapter, CpuPluginComputesWhatThePavKernelComputesBitForBit) {
  for (const std::string words : {"--path uniform", "--path planned --cu 32", "--path planned --cu 32 --partial f32"}) {
    auto lib = adapters::open_kernel(plugin(PAV_TEST_CPU_PLUGIN, words));
    auto own = adapters::open_kernel("pav:cpu " + words);
    EXPECT_EQ(lib->adapter(), "lib");
    EXPECT_EQ(lib->description(), own->description()) << words;
    const props::CaseSpec s = words.find("planned") != std::string::npos ? planned_spec() : small_spec();
    const Ran a = run_one(*lib, s), b = run_one(*own, s);
    ASSERT_TRUE(a.result.ok()) << a.result.message;
    ASSERT_TRUE(b.result.ok()) << b.result.message;
    EXPECT_EQ(a.out, b.out) << words;
    EXPECT_TRUE(a.judged_ok) << a.verdict;
    EXPECT_EQ(lib->decode_calls(), 1);
  }
}

TEST(LibAdapter, PluginCheckRefusesWithAReasonAndDecodeRefusesToo) {
  auto lib = adapters::open_kernel(plugin(PAV_TEST_CPU_PLUGIN, "--path planned --cu 32"));
  ASSERT_TRUE(lib->description().has_check);
  props::CaseSpec s = planned_spec();
  props::HostCase c = props::build_case(s);
  props::KernelCall kc;
  props::prepare_kernel_call(kc, c, lib->description());
  EXPECT_TRUE(lib->check(kc.request).ok());
  kc.request.call.q_len = 3;  // q rows no longer num_seqs * q_len
  const CallResult refused = lib->check(kc.request);
  EXPECT_EQ(refused.outcome, Outcome::rejected);
  EXPECT_NE(refused.message.find("q_rows"), std::string::npos) << refused.message;
  const CallResult decoded = lib->decode(kc.request);
  EXPECT_EQ(decoded.outcome, Outcome::rejected);
  EXPECT_NE(decoded.message.find("q_rows"), std::string::npos) << decoded.message;
}

void expect_spec_error(const std::string& spec, const std::string& why) {
  try {
    adapters::open_kernel(spec);
    ADD_FAILURE() << spec << " opened (wanted: " << why << ")";
  } catch (const KernelSpecError& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what() << " (wanted " << why << ")";
  }
}

TEST(LibAdapter, BrokenPluginsAndBadWordsAreSpecErrors) {
  expect_spec_error(plugin(PAV_TEST_FAULT_MISSING_DECODE), "missing required symbol pav_kernel_decode");
  expect_spec_error(plugin(PAV_TEST_FAULT_ABI_VERSION), "kernel ABI version 5, this pav speaks versions 1 to 4");
  expect_spec_error(plugin(PAV_TEST_FAULT_DESCRIBE), "head_dims: empty");
  expect_spec_error(plugin(PAV_TEST_CPU_PLUGIN, "--path sideways"), "--path sideways");
  expect_spec_error(plugin(PAV_TEST_CPU_PLUGIN, "--bogus"), "unknown word '--bogus'");
  expect_spec_error("lib:/nonexistent/libnothing.so", "no such file");
  expect_spec_error("lib:", "no library path");
  expect_spec_error("pav:tpu", "expected pav:cpu or pav:gpu");
  expect_spec_error("cuda:x", "expected pav:cpu, pav:gpu, lib:PATH.so");
  expect_spec_error("pav:cpu '--path", "unterminated");
}

// A truncated copy of a plugin is refused before dlopen maps it (mapping it
// ends the process with SIGBUS when a page past the end is touched).
TEST(LibAdapter, ATruncatedPluginIsRefusedBeforeItIsLoaded) {
  const int descriptors = pav::testing::open_descriptors();
  const std::string whole = slurp(PAV_TEST_CPU_PLUGIN);
  ASSERT_GT(whole.size(), 100000u);
  // Where the last loadable segment ends, read here from the ELF headers.
  Elf64_Ehdr eh;
  std::memcpy(&eh, whole.data(), sizeof eh);
  size_t load_end = 0;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, whole.data() + eh.e_phoff + size_t(i) * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD) load_end = std::max<size_t>(load_end, ph.p_offset + ph.p_filesz);
  }
  ASSERT_GT(load_end, 8192u);
  const fs::path dir = scratch_dir("truncated");
  for (const size_t keep : {load_end - 1, load_end / 2, size_t(4096)}) {
    const fs::path cut = dir / ("libcut-" + std::to_string(keep) + ".so");
    std::ofstream(cut, std::ios::binary).write(whole.data(), std::streamsize(keep));
    expect_spec_error(plugin(cut.c_str()), "not a loadable shared library: truncated");
    expect_spec_error(plugin(cut.c_str()), cut.string());
  }
  const fs::path text = dir / "libtext.so";
  std::ofstream(text) << std::string(200, '#') << " not a library\n";
  expect_spec_error(plugin(text.c_str()), "not an ELF file");
  EXPECT_EQ(pav::testing::open_descriptors(), descriptors) << "a refused library's file was left open";
}

// A library built against version 1 of the header keeps working: it is handed
// the version-1 desc and the version-1 prefix of the arguments (the fixture
// refuses anything else), declares no variant and computes as before.
TEST(LibAdapter, AVersionOneLibraryKeepsWorking) {
  for (const char* lib : {PAV_TEST_ABI_V1, PAV_TEST_ABI_V2, PAV_TEST_ABI_V3}) {
    SCOPED_TRACE(lib);
    auto old = adapters::open_kernel(plugin(lib, "--path uniform"));
    auto own = adapters::open_kernel("pav:cpu --path uniform");
    if (lib == std::string(PAV_TEST_ABI_V1)) {
      EXPECT_TRUE(old->description().features.empty());
      EXPECT_EQ(old->description().lse_base, adapters::LseBase::e);
    }
    // Before version 3 a library reads packed caches, K and V apart, through
    // block tables (pav's own kernels read no other format in version 3 either).
    EXPECT_EQ(old->description().cache_layouts, std::vector{kernels::CacheLayout::packed});
    EXPECT_EQ(old->description().page_tables, std::vector{kernels::PageTable::block_table});
    EXPECT_EQ(old->description().kv_storage, std::vector{adapters::KvStorage::separate});
    EXPECT_FALSE(old->description().strided_cache);
    EXPECT_FALSE(old->description().mixed_scales);
    // Before version 4: no MLA, no cache of 2^31 elements.
    EXPECT_TRUE(old->description().mla_dims.empty());
    EXPECT_FALSE(old->description().large_cache);
    const Ran a = run_one(*old, small_spec()), b = run_one(*own, small_spec());
    ASSERT_TRUE(a.result.ok()) << a.result.message;
    EXPECT_EQ(a.out, b.out);
    EXPECT_TRUE(a.judged_ok) << a.verdict;
    props::HostCase c = props::build_case(small_spec());
    props::KernelCall kc;
    props::prepare_kernel_call(kc, c, old->description());
    EXPECT_TRUE(old->check(kc.request).ok()) << old->check(kc.request).message;
  }
}

// A library exporting pav_kernel_poison_scratch is described as keeping scratch,
// and pav poisons it once before every decode, in process and isolated; a
// poison that fails makes the call a kernel error naming the entry.
TEST(Abi, ScratchIsPoisonedOnceBeforeEveryDecode) {
  for (const bool isolate : {false, true}) {
    adapters::OpenOptions o;
    o.isolate = isolate;
    o.self_exe = PAV_TEST_PAV;
    auto k = adapters::open_kernel(plugin(PAV_TEST_FAULT_SCRATCH, "--path uniform"), o);
    EXPECT_TRUE(k->description().scratch) << isolate;
    for (int call = 0; call < 3; ++call) {
      const Ran r = run_one(*k, small_spec());
      EXPECT_TRUE(r.result.ok()) << "isolate " << isolate << ", call " << call << ": " << r.result.message;
      EXPECT_TRUE(r.judged_ok) << r.verdict;
    }
  }
  auto plain = adapters::open_kernel(plugin(PAV_TEST_CPU_PLUGIN, "--path uniform"));
  EXPECT_FALSE(plain->description().scratch);
  ::setenv("PAV_FAULT_SCRATCH_FAILS", "1", 1);
  auto broken = adapters::open_kernel(plugin(PAV_TEST_FAULT_SCRATCH, "--path uniform"));
  const Ran r = run_one(*broken, small_spec());
  ::unsetenv("PAV_FAULT_SCRATCH_FAILS");
  EXPECT_EQ(r.result.outcome, adapters::Outcome::kernel_error);
  EXPECT_NE(r.result.message.find("pav_kernel_poison_scratch returned"), std::string::npos) << r.result.message;
  EXPECT_NE(r.result.message.find("could not be poisoned"), std::string::npos) << r.result.message;
}

// The version-2 fields cross the ABI both ways; a version-1 struct_size hides them.
TEST(Abi, TheAttentionVariantCrossesTheBoundary) {
  props::CaseSpec s = small_spec();
  s.window_left = 7;
  s.soft_cap = 30.0f;
  const int64_t hq = int64_t(s.hkv) * s.group;
  s.sinks = std::vector<float>(size_t(hq), 2.5f);
  s.alibi_slopes = std::vector<float>(size_t(hq), 0.125f);
  props::HostCase c = props::build_case(s);
  adapters::DecodeRequest r;
  r.call = c.call();
  for (const bool for_check : {false, true}) {
    pav_decode_args a = adapters::abi::make_args(r, for_check);
    EXPECT_EQ(a.struct_size, sizeof(pav_decode_args));
    EXPECT_EQ(a.window_left, 7);
    EXPECT_EQ(a.soft_cap, 30.0f);
    EXPECT_EQ(a.sinks.rank, 1);
    EXPECT_EQ(a.sinks.shape[0], hq);
    EXPECT_EQ(a.alibi_slopes.shape[0], hq);
    EXPECT_EQ(a.sinks.data == nullptr, for_check);  // a check sees shapes only
    kernels::PlanView plan;
    const adapters::DecodeRequest back = adapters::abi::request_from_abi(a, &plan);
    EXPECT_EQ(back.call.variant.window_left, 7);
    EXPECT_EQ(back.call.variant.soft_cap, 30.0f);
    EXPECT_TRUE(back.call.variant.sinks.present());
    EXPECT_TRUE(back.call.variant.alibi_slopes.present());
    a.struct_size = adapters::abi::args_size_for(1);
    EXPECT_EQ(a.struct_size, PAV_DECODE_ARGS_V1_SIZE);
    const adapters::DecodeRequest v1 = adapters::abi::request_from_abi(a, &plan);
    EXPECT_FALSE(v1.call.variant.any());
  }
  EXPECT_EQ(adapters::abi::args_size_for(2), PAV_DECODE_ARGS_V2_SIZE);
  EXPECT_EQ(adapters::abi::args_size_for(3), PAV_DECODE_ARGS_V3_SIZE);
  EXPECT_EQ(adapters::abi::args_size_for(4), sizeof(pav_decode_args));
  // The description's variants and lse base, through the desc and back.
  adapters::KernelDescription d = adapters::open_kernel("pav:cpu --path uniform")->description();
  d.writes_lse = true;
  d.features = {adapters::Feature::window, adapters::Feature::alibi};
  d.lse_base = adapters::LseBase::two;
  pav_kernel_desc desc{};
  desc.struct_size = sizeof desc;
  desc.abi_version = PAV_KERNEL_ABI_VERSION;
  adapters::abi::to_abi(d, &desc);
  EXPECT_EQ(desc.variants, PAV_BIT(PAV_VARIANT_WINDOW) | PAV_BIT(PAV_VARIANT_ALIBI));
  EXPECT_EQ(desc.lse_base, PAV_LSE_BASE_2);
  adapters::KernelDescription back = adapters::abi::from_abi(desc);
  back.has_check = d.has_check;
  EXPECT_EQ(back, d);
  // Both fields arrived in version 2: the first version that has them reads
  // them, and the one before it does not.
  desc.abi_version = 2;
  EXPECT_EQ(adapters::abi::from_abi(desc).features, d.features);
  EXPECT_EQ(adapters::abi::from_abi(desc).lse_base, adapters::LseBase::two);
  desc.abi_version = PAV_KERNEL_ABI_VERSION;
  desc.variants = PAV_BIT(4);
  EXPECT_THROW(adapters::abi::from_abi(desc), KernelSpecError);
  desc.abi_version = 1;  // a version-1 desc: those bytes were reserved
  EXPECT_TRUE(adapters::abi::from_abi(desc).features.empty());
  EXPECT_EQ(adapters::abi::from_abi(desc).lse_base, adapters::LseBase::e);
}

// Text a plugin hands pav (its name, a message filling the buffer without a
// NUL, bytes that are not UTF-8) arrives valid, bounded and never read past
// the buffer.
TEST(LibAdapter, PluginTextIsValidUtf8AndReadWithinItsBuffer) {
  auto lib = adapters::open_kernel(plugin(PAV_TEST_FAULT_BAD_TEXT, "--path uniform"));
  const std::string& name = lib->description().name;
  EXPECT_TRUE(is_valid_utf8(name)) << name;
  EXPECT_EQ(name, "bad\xef\xbf\xbd\xef\xbf\xbdtext\xef\xbf\xbd");
  const Ran r = run_one(*lib, small_spec());  // length 300: the error with a buffer of 0xff
  ASSERT_EQ(r.result.outcome, Outcome::kernel_error);
  EXPECT_EQ(r.result.message.rfind("fault plugin says \xef\xbf\xbd", 0), 0u) << r.result.message;
  EXPECT_TRUE(is_valid_utf8(r.result.message));
  // 1024 bytes of buffer: 18 of text and 1006 bytes 0xff, each one U+FFFD; no
  // byte past the buffer (the buffer has no NUL), cut within the message bound.
  // Cleaned that is 18 + 1006 * 3 = 3036 bytes, cut to the 2048-byte bound:
  // the 18 and 675 replacement characters (2043 bytes), then "...".
  EXPECT_EQ(r.result.message.size(), 2046u);
  EXPECT_EQ(r.result.message.substr(2043), "...");
  EXPECT_NO_THROW((void)adapters::identity_json(*lib).dump());
}

// The ABI arguments a plugin receives are checked before they are read: a
// table with a negative stride is refused, never walked.
// The plugin refusal (pav_kernel_check of pav's own library) and the same
// kernels in process hold the block rules at the edges the contract check and
// the kernels' validation hold them (Contract.TheBlockRulesHoldAtNumBlocksAndNowhereElse).
TEST(LibAdapter, PluginRefusalHoldsTheBlockRulesAtTheirEdges) {
  for (const std::string& spec : {plugin(PAV_TEST_CPU_PLUGIN, "--path uniform"), std::string("pav:cpu --path uniform")}) {
    SCOPED_TRACE(spec);
    auto k = adapters::open_kernel(spec);
    props::HostCase c = props::build_case(small_spec());
    props::KernelCall kc;
    props::prepare_kernel_call(kc, c, k->description());
    kernels::DecodeCall& call = kc.request.call;
    const int64_t nb = call.k_cache.shape[0];
    ASSERT_TRUE(k->check(kc.request).ok()) << k->check(kc.request).message;
    for (const int64_t delta : {int64_t(-1), int64_t(1)}) {
      SCOPED_TRACE(delta);
      call.v_cache.shape[0] = nb + delta;
      const CallResult v = k->check(kc.request);
      EXPECT_EQ(v.outcome, Outcome::rejected);
      EXPECT_NE(v.message.find("v_blocks"), std::string::npos) << v.message;
      call.v_cache.shape[0] = nb;
      call.k_scale.shape[0] = call.v_scale.shape[0] = nb + delta;
      const CallResult sc = k->check(kc.request);
      EXPECT_EQ(sc.outcome, Outcome::rejected);
      EXPECT_NE(sc.message.find("scale_shape"), std::string::npos) << sc.message;
      call.k_scale.shape[0] = call.v_scale.shape[0] = nb;
    }
    EXPECT_TRUE(k->check(kc.request).ok());
    int32_t& first = call.block_tables.as<int32_t>()[0];
    first = int32_t(nb - 1);
    EXPECT_TRUE(k->check(kc.request).ok()) << k->check(kc.request).message;
    for (const int32_t id : {int32_t(nb), int32_t(-1)}) {
      first = id;
      const CallResult r = k->check(kc.request);
      EXPECT_EQ(r.outcome, Outcome::rejected);
      EXPECT_NE(r.message.find(fmt::format("block_tables[0][0] = {} outside 0..{}", id, nb - 1)), std::string::npos)
          << r.message;
    }
  }
}

TEST(LibAdapter, APluginRefusesArgumentsItCannotReadSafely) {
  auto lib = adapters::open_kernel(plugin(PAV_TEST_CPU_PLUGIN, "--path uniform"));
  props::HostCase c = props::build_case(small_spec());
  props::KernelCall kc;
  props::prepare_kernel_call(kc, c, lib->description());
  kc.request.call.block_tables.stride[0] = -kc.request.call.block_tables.stride[0];
  const CallResult refused = lib->check(kc.request);
  EXPECT_EQ(refused.outcome, Outcome::rejected);
  EXPECT_NE(refused.message.find("malformed call: block_tables: strides[0] = -"), std::string::npos)
      << refused.message;
  kc.request.call.block_tables.stride[0] = -kc.request.call.block_tables.stride[0];
  kc.request.call.context_lens.shape[0] = -2;
  const CallResult bad_shape = lib->decode(kc.request);
  EXPECT_EQ(bad_shape.outcome, Outcome::kernel_error);
  EXPECT_NE(bad_shape.message.find("context_lens: shape[0] = -2 < 0"), std::string::npos) << bad_shape.message;
}

// ---- the worker adapter ------------------------------------------------------------------

std::string fault_worker(const std::string& mode, int64_t min_len = 300, const std::string& words = "--path uniform") {
  return "exec:" + adapters::shell_quote(PAV_TEST_FAULT_WORKER) + " --fault " + mode + " --min-len " +
         std::to_string(min_len) + " -- " + words;
}

using adapters::fixture::short_spec;

TEST(WorkerAdapter, AWellBehavedWorkerMatchesTheInProcessKernel) {
  adapters::OpenOptions o;
  o.timeout_seconds = 30;
  auto w = adapters::open_kernel(fault_worker("none"), o);
  auto own = adapters::open_kernel("pav:cpu --path uniform");
  EXPECT_EQ(w->adapter(), "exec");
  EXPECT_EQ(w->description(), own->description());
  for (const props::CaseSpec& s : {small_spec(), short_spec()}) {
    const Ran a = run_one(*w, s), b = run_one(*own, s);
    ASSERT_TRUE(a.result.ok()) << a.result.message;
    EXPECT_EQ(a.out, b.out);
    EXPECT_TRUE(a.judged_ok) << a.verdict;
  }
  // Planned: pav's plan crosses as work_info.npy / reduce_info.npy.
  auto wp = adapters::open_kernel(fault_worker("none", 300, "--path planned --cu 32"), o);
  auto op = adapters::open_kernel("pav:cpu --path planned --cu 32");
  const Ran a = run_one(*wp, planned_spec()), b = run_one(*op, planned_spec());
  ASSERT_TRUE(a.result.ok()) << a.result.message;
  EXPECT_EQ(a.out, b.out);
}

TEST(WorkerAdapter, EveryFaultIsTheCallsResultAndTheWorkerComesBack) {
  struct Fault {
    const char* mode;
    std::string why;
  };
  const std::vector<Fault> faults = {
      {"crash", "signal 11"},
      {"exit", "worker exited with status 7"},
      {"hang", "worker timed out: no reply to request"},
      {"garbage", "a reply line that is not JSON: 'fault_worker says hello'"},
      {"bad-id", "carries id"},
      {"missing", "worker output: out.npy missing"},
      {"wrong-shape", "shape (6, 6, 32), expected (6, 6, 64)"},
      {"wrong-dtype", "dtype '<f4', expected '<u2'"},
      // Outputs are regular files of the call's folder: a FIFO nobody writes
      // never blocks pav, a link to /dev/zero is never followed.
      {"fifo", "out.npy: a FIFO (outputs must be regular files)"},
      {"devzero", "out.npy: a symbolic link (outputs must be regular files)"},
  };
  adapters::OpenOptions o;
  o.timeout_seconds = 1.0;
  for (const Fault& f : faults) {
    auto w = adapters::open_kernel(fault_worker(f.mode), o);
    const Ran before = run_one(*w, short_spec());
    ASSERT_TRUE(before.result.ok()) << f.mode << ": " << before.result.message;
    const Ran bad = run_one(*w, small_spec());  // length 300 arms the fault
    EXPECT_EQ(bad.result.outcome, Outcome::fault) << f.mode;
    EXPECT_NE(bad.result.message.find(f.why), std::string::npos) << f.mode << ": " << bad.result.message;
    EXPECT_NE(bad.result.message.find("fault_worker: injecting " + std::string(f.mode)), std::string::npos)
        << f.mode << ": the worker's stderr is quoted: " << bad.result.message;
    const Ran after = run_one(*w, short_spec());
    EXPECT_TRUE(after.result.ok()) << f.mode << " (restarted): " << after.result.message;
    EXPECT_TRUE(after.judged_ok) << after.verdict;
  }
}

// A worker's stderr quoted in a fault: the excerpt starts at a character
// boundary, invalid bytes become U+FFFD, and the verdict is valid UTF-8.
TEST(WorkerAdapter, StderrExcerptsAreValidUtf8) {
  auto w = adapters::open_kernel(fault_worker("non-utf8"));
  const Ran bad = run_one(*w, small_spec());
  ASSERT_EQ(bad.result.outcome, Outcome::fault);
  EXPECT_TRUE(is_valid_utf8(bad.result.message)) << bad.result.message;
  EXPECT_NE(bad.result.message.find("worker exited with status 9"), std::string::npos) << bad.result.message;
  EXPECT_NE(bad.result.message.find("bad bytes: \xef\xbf\xbd\xef\xbf\xbd"), std::string::npos)
      << bad.result.message;
  // The excerpt began inside a euro sign: its two continuation bytes are
  // dropped, not shown as two replacement characters.
  EXPECT_NE(bad.result.message.find("worker stderr: | xxxx"), std::string::npos) << bad.result.message;
  EXPECT_NO_THROW((void)nlohmann::json(bad.result.message).dump());
}

// A worker in Python that answers describe with the line in a file.
std::string python_worker(const std::string& name, const std::string& describe_line) {
  const fs::path dir = scratch_dir("py");
  const fs::path reply = dir / (name + ".txt"), script = dir / (name + ".py");
  std::ofstream(reply, std::ios::binary) << describe_line << "\n";
  std::ofstream(script) << "import sys\nsys.stdin.readline()\nsys.stdout.write(open(sys.argv[1]).read())\n"
                           "sys.stdout.flush()\nsys.stdin.read()\n";
  return "exec:/usr/bin/python3 " + adapters::shell_quote(script.string()) + " " + adapters::shell_quote(reply.string());
}

// Replies are parsed with pav's bounded reader: a describe reply nested a
// million deep is a spec error naming the nesting, not a crash.
TEST(WorkerAdapter, HostileDescribeRepliesAreSpecErrorsNotCrashes) {
  expect_spec_error(python_worker("deep", "{\"ok\":true,\"kernel\":" + std::string(1000000, '[')),
                    "nested deeper than 64 levels");
  expect_spec_error(python_worker("dupkey", "{\"ok\":true,\"ok\":false,\"kernel\":{}}"), "duplicate");
  expect_spec_error(python_worker("okstring", "{\"ok\":\"yes\",\"kernel\":{}}"), "lacks ok: true");
  // A 30 MB name is refused by its size, and the message stays short.
  nlohmann::json d = adapters::to_json(small_description());
  d["name"] = std::string(30000000, 'n');
  try {
    adapters::open_kernel(python_worker("longname", nlohmann::json({{"ok", true}, {"kernel", d}}).dump()));
    ADD_FAILURE() << "a 30 MB name was accepted";
  } catch (const KernelSpecError& e) {
    EXPECT_NE(std::string(e.what()).find("name: 30000000 bytes, more than 256"), std::string::npos) << e.what();
    EXPECT_LT(std::strlen(e.what()), 8000u);
  }
}

// pav kernel-worker's side: requests are read with the bounded reader, and
// shapes and strides are checked before any table is laid out.
TEST(WorkerServer, HostileRequestsGetErrorRepliesNotCrashes) {
  auto k = adapters::open_kernel("pav:cpu --path uniform");
  const nlohmann::json bt = {{"dtype", "i32"}, {"shape", {1, 2}}, {"strides", {-4096, 1}}, {"values", {0, 0}}};
  const nlohmann::json lens = {{"dtype", "i32"}, {"shape", {1}}, {"strides", {1}}, {"values", {5}}};
  const nlohmann::json check = {{"op", "check"}, {"id", 3}, {"args", {{"q_len", 1}, {"softmax_scale", 0.1}}},
                                {"tensors", {{"block_tables", bt}, {"context_lens", lens}}}};
  nlohmann::json neg_shape = check;
  neg_shape["id"] = 4;
  neg_shape["tensors"]["block_tables"]["shape"] = {-3, 2};
  neg_shape["tensors"]["block_tables"]["strides"] = {2, 1};
  nlohmann::json huge = check;
  huge["id"] = 5;
  huge["tensors"]["block_tables"]["shape"] = {1, int64_t(1) << 40};
  huge["tensors"]["block_tables"]["strides"] = {int64_t(1) << 40, 1};
  // The request's fields go through the shared reader: each of the wrong
  // type, past its range or unknown is refused naming the field.
  nlohmann::json good = check;  // its block table sound: each request below breaks one other field
  good["tensors"]["block_tables"]["strides"] = {2, 1};
  nlohmann::json not_int = good;
  not_int["id"] = 6;
  not_int["tensors"]["context_lens"]["values"] = {"5"};
  nlohmann::json past_i32 = good;
  past_i32["id"] = 7;
  past_i32["tensors"]["block_tables"]["values"] = {0, int64_t(1) << 32};  // would wrap to block 0
  nlohmann::json short_values = good;
  short_values["id"] = 8;
  short_values["tensors"]["context_lens"]["values"] = nlohmann::json::array();
  nlohmann::json q_len = good;
  q_len["id"] = 9;
  q_len["args"]["q_len"] = 1.5;
  nlohmann::json layout = good;
  layout["id"] = 10;
  layout["args"]["cache_layout"] = "nchw";
  nlohmann::json unknown = good;
  unknown["id"] = 11;
  unknown["tensors"]["context_lens"]["stride"] = {1};
  nlohmann::json no_args = good;
  no_args["id"] = 12;
  no_args.erase("args");
  const std::string truncated = check.dump().substr(0, 40);
  const std::string input = std::string(1000000, '[') + "\n" + check.dump() + "\n" + neg_shape.dump() + "\n" +
                            huge.dump() + "\n" + not_int.dump() + "\n" + past_i32.dump() + "\n" +
                            short_values.dump() + "\n" + q_len.dump() + "\n" + layout.dump() + "\n" +
                            unknown.dump() + "\n" + no_args.dump() + "\n" + truncated + "\n" +
                            "{\"op\": 5, \"id\": 13}\n{\"op\": null, \"id\": 14}\n[\"decode\"]\n" +
                            std::string(size_t(kernels::kMaxWorkerLineBytes), ' ') + "\n" +
                            std::string(size_t(kernels::kMaxWorkerLineBytes) + 1, ' ') + "\n{\"op\":\"quit\"}\n";
  const fs::path dir = scratch_dir("server");
  const fs::path in = dir / "in.jsonl", out = dir / "out.jsonl";
  std::ofstream(in, std::ios::binary) << input;
  const int in_fd = ::open(in.c_str(), O_RDONLY), out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(in_fd, 0);
  ASSERT_GE(out_fd, 0);
  EXPECT_EQ(adapters::serve_worker(*k, in_fd, out_fd), 0);
  ::close(in_fd);
  ::close(out_fd);
  std::istringstream replies(slurp(out));
  std::vector<nlohmann::json> got;
  for (std::string line; std::getline(replies, line);) got.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(got.size(), 17u) << slurp(out);
  const std::vector<std::string> why = {"nested deeper than 64 levels",
                                        "block_tables: strides[0] = -4096 < 0",
                                        "block_tables: shape[0] = -3 < 0",
                                        "more than 1073741824 bytes",
                                        "request: tensors.context_lens.values[0]: expected an integer, got a string",
                                        "request: tensors.block_tables.values[1]: must be in -2147483648..2147483647, "
                                        "got 4294967296",
                                        "request: tensors.context_lens.values: expected 1 entries, got 0",
                                        "request: args.q_len: expected an integer, got a number",
                                        "request: args.cache_layout: ",
                                        "request: tensors.context_lens.stride: unknown field",
                                        "request: args: missing",
                                        "request is not JSON: request: ",
                                        "request: op: expected a string, got number",
                                        "request: op: expected a string, got null",
                                        "unknown op ''",
                                        "request is not JSON: request: malformed JSON at byte 67108865",
                                        "request line longer than 67108864 bytes"};
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].at("ok"), false) << got[i].dump();
    EXPECT_NE(got[i].value("error", std::string()).find(why[i]), std::string::npos) << got[i].dump();
  }
}

// pav's own write failing (a full --exchange-dir: here a file size limit, the
// kernel's EFBIG) is thrown as pav::IoError through the adapter and through a
// property's check: never a kernel verdict, never a saved case.
TEST(WorkerAdapter, PavsOwnWriteFailureIsAnIoErrorNotAVerdict) {
  adapters::OpenOptions o;
  o.exchange_dir = scratch_dir("exchange").string();
  auto w = adapters::open_kernel(fault_worker("none"), o);
  ASSERT_TRUE(run_one(*w, short_spec()).result.ok());
  const std::vector<props::fuzz::Property> props = props::fuzz::kernel_properties(w->description());
  props::fuzz::CheckContext ctx;
  ctx.kernel = w.get();
  {
    pav::testing::FileSizeLimit limit(1024);  // the worker runs already: its own limit is unchanged
    try {
      (void)run_one(*w, small_spec());
      ADD_FAILURE() << "the inputs were written past the limit";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("--exchange-dir: cannot write a call's inputs"), std::string::npos)
          << e.what();
    }
    EXPECT_THROW((void)props.front().check_seed(1, 10, ctx), IoError);
  }
  EXPECT_TRUE(run_one(*w, short_spec()).result.ok()) << "the worker runs on once pav can write again";
}

// The calls' folder is made once and kept; a worker that removed it or left
// a link in its place gets a new one: nothing is removed or written through
// the link, and the call runs on inputs written afresh.
TEST(WorkerAdapter, AReplacedCallFolderIsMadeAgainNeverFollowed) {
  adapters::OpenOptions o;
  const fs::path exchange = scratch_dir("exchange-replaced");
  o.exchange_dir = exchange.string();
  auto w = adapters::open_kernel(fault_worker("none"), o);
  ASSERT_TRUE(run_one(*w, short_spec()).result.ok());
  std::vector<fs::path> roots;
  for (const auto& e : fs::directory_iterator(exchange)) roots.push_back(e.path());
  ASSERT_EQ(roots.size(), 1u);
  const fs::path call = roots[0] / "call";
  ASSERT_TRUE(fs::is_directory(call));
  const fs::path other = scratch_dir("exchange-other");
  std::ofstream((other / "out.npy").string()) << "kept";
  fs::remove_all(call);
  fs::create_directory_symlink(other, call);
  const Ran again = run_one(*w, short_spec());
  EXPECT_TRUE(again.result.ok()) << again.result.message;
  EXPECT_TRUE(again.judged_ok) << again.verdict;
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(call))) << "the link is still there";
  EXPECT_TRUE(fs::exists(other / "out.npy")) << "removed through the link";
  EXPECT_EQ(std::distance(fs::directory_iterator(other), fs::directory_iterator{}), 1) << "written through the link";
  w.reset();
  fs::remove_all(exchange);
  fs::remove_all(other);
}

TEST(WorkerAdapter, NanOutputPassesTheAdapterAndFailsTheStandard) {
  auto w = adapters::open_kernel(fault_worker("nan"));
  const Ran bad = run_one(*w, small_spec());
  ASSERT_TRUE(bad.result.ok()) << bad.result.message;
  EXPECT_FALSE(bad.judged_ok);
  EXPECT_NE(bad.verdict.find("(1 NaN, 0 inf"), std::string::npos) << bad.verdict;
}

// A worker whose pipes cannot be made (the first or the second of the two) is a
// kernel that cannot run, named by the failing call, and every descriptor the
// attempt opened is closed.
TEST(WorkerAdapter, APipeThatCannotBeMadeIsUnavailableAndLeaksNothing) {
  for (const int failing : {1, 2}) {
    SCOPED_TRACE("pipe " + std::to_string(failing) + " fails");
    const int before = pav::testing::open_descriptors();
    pipes_until_failure = failing;
    try {
      (void)adapters::open_kernel(fault_worker("none"));
      ADD_FAILURE() << "opened";
    } catch (const adapters::KernelUnavailable& e) {
      EXPECT_NE(std::string(e.what()).find("pipe: Too many open files"), std::string::npos) << e.what();
    }
    pipes_until_failure = 0;
    EXPECT_EQ(pav::testing::open_descriptors(), before) << "a descriptor of the attempt was left open";
  }
}

TEST(WorkerAdapter, AWorkerThatNeverDescribesItselfIsASpecError) {
  expect_spec_error(fault_worker("no-describe"), "worker exited with status 5");
  expect_spec_error(fault_worker("no-describe"), "exiting before describing myself");
  expect_spec_error("exec:/nonexistent/worker --x", "status 127");
  expect_spec_error("exec:", "no command");
  expect_spec_error("exec:echo not-json", "describe reply is not JSON");
  expect_spec_error("exec:echo '{\"ok\":true,\"kernel\":{\"name\":\"x\"}}'", "missing field");
}

// ---- isolation ----------------------------------------------------------------------------

TEST(Isolation, ASegfaultingPluginBecomesAFaultAndTheNextCallRuns) {
  adapters::OpenOptions o;
  o.isolate = true;
  o.self_exe = PAV_TEST_PAV;
  auto k = adapters::open_kernel(plugin(PAV_TEST_FAULT_SEGV, "--path uniform"), o);
  EXPECT_EQ(k->adapter(), "lib (isolated)");
  const Ran ok = run_one(*k, short_spec());
  ASSERT_TRUE(ok.result.ok()) << ok.result.message;
  EXPECT_TRUE(ok.judged_ok) << ok.verdict;
  const Ran crashed = run_one(*k, small_spec());
  EXPECT_EQ(crashed.result.outcome, Outcome::fault);
  EXPECT_NE(crashed.result.message.find("signal 11"), std::string::npos) << crashed.result.message;
  EXPECT_TRUE(run_one(*k, short_spec()).result.ok());
}

// ---- the kernel properties -----------------------------------------------------------------

// Wraps a real kernel and lies in one way (test code around pav's kernel, which
// still does every decode).
class Liar final : public adapters::KernelUnderTest {
 public:
  enum class Lie { none, check_accepts_all, check_refuses_batches, claims_d80, zero_output, decode_after_refusal };
  Liar(std::unique_ptr<KernelUnderTest> k, Lie lie) : k_(std::move(k)), lie_(lie), d_(k_->description()) {
    if (lie == Lie::claims_d80) d_.head_dims.push_back(80);
  }
  const KernelDescription& description() const override { return d_; }
  std::string adapter() const override { return "test"; }
  std::string spec() const override { return "liar"; }
  CallResult check(const adapters::DecodeRequest& r) override {
    if (lie_ == Lie::check_accepts_all) return CallResult::success();
    if (lie_ == Lie::check_refuses_batches && r.call.context_lens.rank == 1 && r.call.context_lens.shape[0] > 1)
      return {Outcome::rejected, "one sequence at a time"};
    return k_->check(r);
  }
  CallResult decode(const adapters::DecodeRequest& r) override {
    const CallResult res = k_->decode(r);
    if (lie_ == Lie::zero_output && res.ok()) std::memset(r.call.out.data, 0, size_t(r.call.out.span() * 2));
    return res;
  }
  int64_t decode_calls() const override { return k_->decode_calls(); }

 private:
  std::unique_ptr<KernelUnderTest> k_;
  Lie lie_;
  KernelDescription d_;
};

// Runs a kernel property over seeds; the first failure's message, or "".
std::string first_failure(adapters::KernelUnderTest& k, const std::string& property, int cases, uint64_t seed) {
  const std::vector<props::fuzz::Property> props = props::fuzz::kernel_properties(k.description());
  const props::fuzz::Property* p = nullptr;
  for (const auto& q : props)
    if (q.name == property) p = &q;
  if (!p) return "no property " + property;
  props::fuzz::CheckContext ctx;
  ctx.kernel = &k;
  for (int i = 0; i < cases; ++i) {
    const uint64_t s = seed + uint64_t(i);
    const props::fuzz::Verdict v = p->check_seed(s, props::fuzz::case_size(s), ctx);
    if (!v.passed) return "seed " + std::to_string(s) + ": " + v.message;
  }
  return "";
}

TEST(KernelProperties, PavsKernelsPassDecodeAndReject) {
  // (pav verify --kernel runs both through the plugin too: KernelCli.*)
  for (const char* spec : {"pav:cpu --path planned", "pav:cpu --path uniform --partial f32"}) {
    auto k = adapters::open_kernel(spec);
    EXPECT_EQ(first_failure(*k, "decode", 3, 1000), "") << spec;
    EXPECT_EQ(first_failure(*k, "reject", 60, 2000), "") << spec;
  }
}

TEST(KernelProperties, EachLieIsFound) {
  using Lie = Liar::Lie;
  struct Case {
    Lie lie;
    const char* property;
    std::string why;
  };
  const std::vector<Case> cases = {
      {Lie::check_accepts_all, "reject", "accepts a call outside its contract"},
      {Lie::check_refuses_batches, "reject", "refuses a call inside its description: one sequence at a time"},
      {Lie::check_refuses_batches, "decode", "refuses a call its description claims: one sequence at a time"},
      {Lie::claims_d80, "decode", "refuses a call its description claims: head_dim"},
      {Lie::zero_output, "decode", "FAIL"},
  };
  for (const Case& c : cases) {
    Liar k(adapters::open_kernel(c.lie == Lie::claims_d80 ? "pav:cpu --path planned" : "pav:cpu --path uniform"), c.lie);
    const std::string f = first_failure(k, c.property, 400, 5000);
    EXPECT_NE(f.find(c.why), std::string::npos) << int(c.lie) << " " << c.property << ": '" << f << "'";
  }
}

// ---- generation, comparison, lse ----------------------------------------------------------------

TEST(KernelGeneration, StaysInsideTheDescriptionAndReachesItsEdges) {
  const KernelDescription d = small_description();
  const rc::Gen<props::CaseSpec> gen = props::gen_kernel_case(d);
  std::set<int64_t> head_dims, groups, q_lens, hkvs, seqs;
  std::set<props::ScaleKind> scales;
  bool len_at_limit = false, ceiling = false, zero_len = false;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const props::CaseSpec s = props::sample(gen, seed, props::fuzz::case_size(seed));
    ASSERT_TRUE(props::spec_within(s, d)) << "seed " << seed;
    ASSERT_EQ(violation(s, d), "") << "seed " << seed;
    head_dims.insert(s.head_dim);
    groups.insert(s.group);
    q_lens.insert(s.q_len);
    hkvs.insert(s.hkv);
    seqs.insert(int64_t(s.lens.size()));
    scales.insert(s.scales);
    for (int32_t l : s.lens) {
      len_at_limit = len_at_limit || l == d.max_context_len;
      zero_len = zero_len || l == 0;
    }
    ceiling = ceiling || s.max_partitions == d.max_split_ceiling;
  }
  EXPECT_EQ(head_dims, (std::set<int64_t>{64, 128}));
  EXPECT_EQ(groups, (std::set<int64_t>{1, 3}));
  EXPECT_EQ(q_lens, (std::set<int64_t>{1, 2}));
  EXPECT_EQ(hkvs, (std::set<int64_t>{1, 2}));
  EXPECT_EQ(seqs, (std::set<int64_t>{1, 2, 3}));
  EXPECT_EQ(scales, (std::set<props::ScaleKind>{props::ScaleKind::none, props::ScaleKind::per_token}));
  EXPECT_TRUE(len_at_limit) << "no case at max_context_len";
  EXPECT_TRUE(zero_len) << "no empty sequence";
  EXPECT_TRUE(ceiling) << "no case at max_split_ceiling";
  // Each move of the reject generator leaves the description, by the contract's own rule.
  for (const std::string& f : props::outside_moves(d)) {
    props::CaseSpec s = small_spec();
    ASSERT_TRUE(props::move_outside(s, f, d)) << f;
    EXPECT_NE(violation(s, d), "") << f;
  }
}

// A description declaring every attention variant gets each at its edges:
// windows of 0, 1, L-1, L, L+1 and past L (L the longest length), caps of 1
// and 50, dominant and negligible sinks, ALiBi slopes; other softmax scales;
// and every case stays inside the description. Declaring some variants makes
// the reject generator move calls into each undeclared one.
TEST(KernelGeneration, ReachesEveryVariantAtItsEdges) {
  KernelDescription d = small_description();
  d.max_context_len = 0;
  d.max_num_seqs = 0;
  d.features = {adapters::Feature::window, adapters::Feature::soft_cap, adapters::Feature::sinks,
                adapters::Feature::alibi};
  const rc::Gen<props::CaseSpec> gen = props::gen_kernel_case(d);
  std::set<std::string> seen;
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    const props::CaseSpec s = props::sample(gen, seed, props::fuzz::case_size(seed));
    ASSERT_TRUE(props::spec_within(s, d)) << "seed " << seed;
    ASSERT_EQ(violation(s, d), "") << "seed " << seed;
    const int32_t L = *std::max_element(s.lens.begin(), s.lens.end());
    if (s.window_left >= 0 && L > 1) {
      if (s.window_left == 0) seen.insert("window 0");
      if (s.window_left == 1) seen.insert("window 1");
      if (s.window_left == L - 1) seen.insert("window L-1");
      if (s.window_left == L) seen.insert("window L");
      if (s.window_left == L + 1) seen.insert("window L+1");
      if (s.window_left > L + 1) seen.insert("window past L");
    }
    if (s.soft_cap == 1.0f) seen.insert("cap 1");
    if (s.soft_cap == 50.0f) seen.insert("cap 50");
    if (s.sinks && s.sinks->front() == 50.0f) seen.insert("dominant sink");
    if (s.sinks && s.sinks->front() == -50.0f) seen.insert("negligible sink");
    if (s.alibi_slopes) seen.insert("alibi");
    if (s.softmax_scale != 0.0f) seen.insert("another softmax scale");
    if (s.window_left >= 0 && s.soft_cap > 0 && s.q_len > 1) seen.insert("window and cap at q_len > 1");
  }
  for (const char* want : {"window 0", "window 1", "window L-1", "window L", "window L+1", "window past L", "cap 1",
                           "cap 50", "dominant sink", "negligible sink", "alibi", "another softmax scale",
                           "window and cap at q_len > 1"})
    EXPECT_TRUE(seen.count(want)) << "never drawn: " << want;
  // Undeclared variants are never drawn; a kernel declaring one must refuse the others.
  d.features = {adapters::Feature::sinks};
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    const props::CaseSpec s = props::sample(props::gen_kernel_case(d), seed, props::fuzz::case_size(seed));
    EXPECT_TRUE(s.window_left < 0 && s.soft_cap == 0.0f && !s.alibi_slopes) << "seed " << seed;
  }
  const std::vector<std::string> moves = props::outside_moves(d);
  for (const char* f : {"variant.window", "variant.soft_cap", "variant.alibi"}) {
    EXPECT_NE(std::find(moves.begin(), moves.end(), f), moves.end()) << f;
    props::CaseSpec s = small_spec();
    ASSERT_TRUE(props::move_outside(s, f, d)) << f;
    EXPECT_NE(violation(s, d).find("the kernel declares no"), std::string::npos) << f << ": " << violation(s, d);
    EXPECT_NO_THROW((void)props::case_from_json(props::case_to_json(s))) << f;
  }
  EXPECT_EQ(std::find(moves.begin(), moves.end(), "variant.sinks"), moves.end());
  d.features.clear();  // a kernel that declares none may predate them: never sent one
  for (const std::string& f : props::outside_moves(d)) EXPECT_NE(f.rfind("variant.", 0), 0u) << f;
}

// Shrinking a case with per-head sink logits and slopes keeps one value per
// query head in every candidate, and offers each part of the variant removed.
TEST(KernelGeneration, ShrinkCandidatesOfAVariantCaseAreBuildable) {
  props::CaseSpec s = small_spec();  // Hkv 2, G 3
  s.window_left = 4;
  s.soft_cap = 5.0f;
  s.sinks = std::vector<float>{1, 2, 3, 4, 5, 6};
  s.alibi_slopes = std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  std::set<std::string> dropped;
  for (const props::CaseSpec& c : props::simpler_decode_specs(s)) {
    EXPECT_NO_THROW((void)props::check_case_spec(c)) << "hkv " << c.hkv << " G " << c.group;
    if (c.window_left < 0) dropped.insert("window");
    if (c.soft_cap == 0.0f) dropped.insert("cap");
    if (!c.sinks) dropped.insert("sinks");
    if (!c.alibi_slopes) dropped.insert("alibi");
  }
  EXPECT_EQ(dropped, (std::set<std::string>{"alibi", "cap", "sinks", "window"}));
}

// Every case pav saves must replay: each move of the reject generator, from
// a description at the case format's q_len limit (pav's own: 1..16) and from
// one past it (1..20), gives a spec the case format reads back.
TEST(KernelGeneration, EveryMoveOutsideIsACaseFileReadsBack) {
  adapters::PavKernelOptions o;
  KernelDescription at_limit = adapters::pav_kernel_description(o);
  ASSERT_EQ(at_limit.max_q_len, 16);
  KernelDescription past = small_description();
  past.max_q_len = 20;
  for (const KernelDescription& d : {at_limit, past}) {
    for (const std::string& f : props::outside_moves(d)) {
      props::CaseSpec s = small_spec();
      if (!props::move_outside(s, f, d)) continue;
      EXPECT_LE(s.q_len, 16) << f;
      EXPECT_NO_THROW((void)props::case_from_json(props::case_to_json(s))) << f << " (q_len " << s.q_len << ")";
    }
  }
}

TEST(KernelComparison, CountsTheDiscordantCasesEachWay) {
  // B gives NaN wherever a context reaches 400 tokens; A is the same kernel without the fault.
  auto a = adapters::open_kernel("pav:cpu --path uniform");
  auto b = adapters::open_kernel(fault_worker("nan", 400));
  props::CompareOptions o;
  o.cases = 10;
  o.seed = 40;
  o.limits.max_total_tokens = 1500;
  o.limits.allow_long = false;
  const props::Comparison c = props::compare_kernels(*a, *b, o);
  ASSERT_EQ(c.cases.size(), 10u);
  int64_t b_wrong = 0;
  for (const props::PairedCase& p : c.cases) {
    EXPECT_TRUE(p.a_correct) << p.id << ": " << p.a_verdict;
    b_wrong += !p.b_correct;
  }
  EXPECT_GT(b_wrong, 0);
  EXPECT_LT(b_wrong, 10);
  EXPECT_EQ(c.a_correct, 10);
  EXPECT_EQ(c.b_correct, 10 - b_wrong);
  EXPECT_EQ(c.test.b, b_wrong);  // A right, B wrong
  EXPECT_EQ(c.test.c, 0);
  const std::string jsonl = props::correctness_jsonl(c, false);
  EXPECT_EQ(std::count(jsonl.begin(), jsonl.end(), '\n'), 10);
  EXPECT_NE(jsonl.find("{\"id\":\"seed-40\",\"correct\":"), std::string::npos) << jsonl.substr(0, 200);
  // Swapped sides swap b and c.
  const props::Comparison swapped = props::compare_kernels(*b, *a, o);
  EXPECT_EQ(swapped.test.b, 0);
  EXPECT_EQ(swapped.test.c, b_wrong);
}

TEST(KernelJudgement, LseIsHeldToTheReferenceAndMinusInfinityInEmptyRows) {
  KernelDescription d = adapters::pav_kernel_description({});
  d.writes_lse = true;
  props::CaseSpec s = planned_spec();
  s.lens = {300, 0};  // the second sequence's rows see no token
  props::HostCase c = props::build_case(s);
  props::KernelCall kc;
  props::prepare_kernel_call(kc, c, d);
  auto k = adapters::open_kernel("pav:cpu --path planned --cu 32");
  adapters::DecodeRequest without_lse = kc.request;
  without_lse.lse = TensorView{};
  ASSERT_TRUE(k->decode(without_lse).ok());
  const reference::ReferenceResult ref = props::reference_for(kc.request.call, d.profile);
  float* lse = kc.request.lse.as<float>();
  const int64_t rows = ref.rows();
  for (int64_t i = 0; i < rows; ++i) lse[i] = float(ref.lse[size_t(i)]);
  EXPECT_TRUE(props::judge_kernel_output(kc.request, d).passed) << props::judge_kernel_output(kc.request, d).verdict;
  int64_t empty = -1, seen = -1;
  for (int64_t i = 0; i < rows; ++i) (std::isinf(ref.lse[size_t(i)]) ? empty : seen) = i;
  ASSERT_GE(empty, 0);
  ASSERT_GE(seen, 0);
  const float keep_seen = lse[seen];
  const double tol = reference::kDefaultAtol + reference::kDefaultRtol * std::fabs(ref.lse[size_t(seen)]);
  lse[seen] = float(ref.lse[size_t(seen)] + 0.9 * tol);
  EXPECT_TRUE(props::judge_kernel_output(kc.request, d).passed) << "within the bound";
  lse[seen] = float(ref.lse[size_t(seen)] + 1.5 * tol);
  EXPECT_FALSE(props::judge_kernel_output(kc.request, d).passed) << "past the bound above";
  lse[seen] = float(ref.lse[size_t(seen)] - 1.5 * tol);
  EXPECT_FALSE(props::judge_kernel_output(kc.request, d).passed) << "past the bound below";
  lse[seen] = keep_seen;
  lse[empty] = 0.0f;
  const props::KernelJudgement j = props::judge_kernel_output(kc.request, d);
  EXPECT_FALSE(j.passed);
  // The failure leads the verdict; the output's passing figures follow it.
  EXPECT_EQ(j.verdict.rfind("FAIL lse: 1 of ", 0), 0u) << j.verdict;
  EXPECT_NE(j.verdict.find("; out PASS: "), std::string::npos) << j.verdict;
  lse[empty] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(props::judge_kernel_output(kc.request, d).passed) << "+inf in an empty row";
}

}  // namespace
