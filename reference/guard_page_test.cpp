// SPDX-License-Identifier: Apache-2.0
// The reference reads nothing past the end of a cache view. Each cache is
// copied so that its last byte sits just before an inaccessible page: a read
// one token (or one element) too far is a fault, not a silent read of whatever
// follows. The strided copies (padding between tokens, filled with NaN) take
// the reference's element-by-element paths, the packed copies its block
// paths; all must give bit for bit the output of the original call.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/decode.hpp"
#include "reference/test_call.hpp"

namespace pav::reference {
namespace {

using kernels::DType;
using kernels::TensorView;
using kernels::VLayout;
using testing::CallSpec;

// n bytes whose end is the start of a page that may not be touched.
class GuardedBytes {
 public:
  explicit GuardedBytes(size_t n) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    pages_ = (n + page - 1) / page + 1;
    base_ = static_cast<uint8_t*>(mmap(nullptr, pages_ * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) throw std::runtime_error("mmap failed");
    uint8_t* guard = base_ + (pages_ - 1) * page;
    if (mprotect(guard, page, PROT_NONE) != 0) throw std::runtime_error("mprotect failed");
    data_ = guard - n;
    bytes_ = pages_ * page;
  }
  ~GuardedBytes() { munmap(base_, bytes_); }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  uint8_t* data() const { return data_; }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t pages_ = 0, bytes_ = 0;
};

// Row-major strides of t's shape, except that every step of dimension
// `padded` skips `pad` more elements.
TensorView padded_view(const TensorView& t, int padded, int64_t pad) {
  TensorView v = t;
  int64_t s = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    v.stride[i] = s + (i == padded ? pad : 0);
    s = v.stride[i] * t.shape[i];
  }
  return v;
}

// Row-major strides of t's shape with every element `step` bytes apart.
TensorView spaced_view(const TensorView& t, int64_t step) {
  TensorView v = t;
  int64_t s = step;
  for (int i = t.rank - 1; i >= 0; --i) {
    v.stride[i] = s;
    s *= t.shape[i];
  }
  return v;
}

// Copies t's bytes into guarded memory laid out as `layout`; bytes the layout
// skips hold `filler`.
TensorView guarded_copy(const TensorView& t, TensorView layout, uint8_t filler,
                        std::vector<std::unique_ptr<GuardedBytes>>& keep) {
  const int64_t span = layout.span();
  keep.push_back(std::make_unique<GuardedBytes>(size_t(span)));
  uint8_t* dst = keep.back()->data();
  std::memset(dst, filler, size_t(span));
  const uint8_t* src = t.as<const uint8_t>();
  std::array<int64_t, kernels::kMaxRank> idx{};
  const int64_t n = t.numel();
  for (int64_t e = 0; e < n; ++e) {
    int64_t so = 0, d = 0;
    for (int i = 0; i < t.rank; ++i) {
      so += idx[i] * t.stride[i];
      d += idx[i] * layout.stride[i];
    }
    dst[d] = src[so];
    for (int i = t.rank - 1; i >= 0; --i)
      if (++idx[i] < t.shape[i]) break;
      else idx[i] = 0;
  }
  layout.data = dst;
  return layout;
}

void expect_same_output(const kernels::DecodeCall& call, const ReferenceResult& want, const char* what) {
  const ReferenceResult got = decode(call);
  ASSERT_EQ(got.out.size(), want.out.size()) << what;
  EXPECT_EQ(std::memcmp(got.out.data(), want.out.data(), want.out.size() * sizeof(float)), 0) << what;
  EXPECT_EQ(got.lse, want.lse) << what;
}

// Full last blocks (the last physical block is the last one read), no spare
// block after it, blocks in order: the last token of the last block of the
// last head is the view's last byte.
TEST(ReferenceGuardPage, NoReadPastTheEndOfAnyCacheView) {
  for (VLayout layout : {VLayout::plain, VLayout::trans}) {
    for (int64_t hkv : {1, 2}) {
      CallSpec s;
      s.lens = {32, 48};
      s.hkv = hkv;
      s.group = 2;
      s.head_dim = 32;
      s.block_size = 16;
      s.layout = layout;
      s.spare_blocks = 0;
      s.shuffle_blocks = false;
      s.scales = testing::Scales::token;
      s.seed = 4100 + uint64_t(hkv);
      const testing::OwnedCall c = testing::make_call(s);
      const ReferenceResult want = decode(c.call);
      const uint8_t nan8 = testing::fp8_nan(s.cache);
      const char* lname = layout == VLayout::plain ? "plain V" : "trans V";
      SCOPED_TRACE(std::string(lname) + ", hkv " + std::to_string(hkv));
      std::vector<std::unique_ptr<GuardedBytes>> keep;
      // Packed copies, ending at the guard.
      {
        kernels::DecodeCall call = c.call;
        call.k_cache = guarded_copy(c.call.k_cache, padded_view(c.call.k_cache, 0, 0), nan8, keep);
        call.v_cache = guarded_copy(c.call.v_cache, padded_view(c.call.v_cache, 0, 0), nan8, keep);
        ASSERT_TRUE(call.k_cache.contiguous());
        expect_same_output(call, want, "packed K and V");
      }
      // K with 16 padding elements after every token's 16 (the strided K path).
      {
        kernels::DecodeCall call = c.call;
        call.k_cache = guarded_copy(c.call.k_cache, padded_view(c.call.k_cache, 3, 16), nan8, keep);
        ASSERT_EQ(call.k_cache.stride[3], 32);
        expect_same_output(call, want, "strided K");
      }
      // V with 8 padding elements after each row of its innermost-but-one
      // dimension (plain: each d's tokens; trans: each d's 16 tokens).
      {
        kernels::DecodeCall call = c.call;
        call.v_cache = guarded_copy(c.call.v_cache, padded_view(c.call.v_cache, c.call.v_cache.rank - 2, 8), nan8, keep);
        expect_same_output(call, want, "V with padded rows");
      }
      {
        // Every element of K and V two bytes apart: no block path applies.
        kernels::DecodeCall call = c.call;
        call.k_cache = guarded_copy(c.call.k_cache, spaced_view(c.call.k_cache, 2), nan8, keep);
        call.v_cache = guarded_copy(c.call.v_cache, spaced_view(c.call.v_cache, 2), nan8, keep);
        expect_same_output(call, want, "K and V elements two bytes apart");
      }
    }
  }
}

}  // namespace
}  // namespace pav::reference
