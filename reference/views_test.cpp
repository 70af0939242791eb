// SPDX-License-Identifier: Apache-2.0
// The reference refuses what it cannot compute (options the call cannot carry,
// negative strides, a bad profile), naming the field; and it computes strided
// views exactly as their contiguous copies: a K or V half sliced from a
// combined [blocks, 2, ...] KV tensor, padded Q rows and blocks, interleaved
// bytes. Every byte a view does not cover is NaN, so a wrong offset shows.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "reference/decode.hpp"
#include "reference/test_call.hpp"
#include "reference/test_naive.hpp"

namespace pav::reference {
namespace {

using kernels::DType;
using kernels::TensorView;
using testing::CallSpec;
using testing::make_call;

void expect_refused(const kernels::DecodeCall& call, const std::string& needle,
                    const NumericsProfile* profile = nullptr) {
  try {
    if (profile) decode(call, *profile);
    else decode(call);
    ADD_FAILURE() << "accepted; expected a refusal naming " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ReferenceRefuses, OptionsItCannotCompute) {
  CallSpec s;
  s.lens = {40, 3};
  const auto c = make_call(s);
  EXPECT_NO_THROW(decode(c.call));
  auto bad = c.call;
  bad.opt.alibi = true;
  expect_refused(bad, "opt.alibi");
  bad = c.call;
  bad.opt.sinks = true;
  expect_refused(bad, "opt.sinks");
  for (int w : {1, 4096, -1}) {
    bad = c.call;
    bad.opt.sliding_window = w;
    expect_refused(bad, "opt.sliding_window = " + std::to_string(w));
  }
  bad = c.call;
  bad.opt.q_prequantized = true;
  expect_refused(bad, "opt.q_prequantized");
  for (float x : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    bad = c.call;
    bad.opt.softmax_scale = x;
    expect_refused(bad, "opt.softmax_scale");
  }
  // Under any profile, too.
  const NumericsProfile none{QQuant::none, PRound::none, DType::none};
  bad = c.call;
  bad.opt.sinks = true;
  expect_refused(bad, "opt.sinks", &none);
}

TEST(ReferenceRefuses, NegativeStridesAndMissingData) {
  CallSpec s;
  s.lens = {40};
  s.scales = testing::Scales::token;
  const auto c = make_call(s);
  using Member = TensorView kernels::DecodeCall::*;
  const std::array<std::pair<Member, const char*>, 7> views = {{
      {&kernels::DecodeCall::q, "q"},
      {&kernels::DecodeCall::k_cache, "k_cache"},
      {&kernels::DecodeCall::v_cache, "v_cache"},
      {&kernels::DecodeCall::block_tables, "block_tables"},
      {&kernels::DecodeCall::context_lens, "context_lens"},
      {&kernels::DecodeCall::k_scale, "k_scale"},
      {&kernels::DecodeCall::v_scale, "v_scale"},
  }};
  for (auto [m, name] : views) {
    auto bad = c.call;
    const int last = (bad.*m).rank - 1;
    (bad.*m).stride[last] = -1;
    expect_refused(bad, std::string(name) + ".stride[" + std::to_string(last) + "] = -1 is negative");
  }
  for (auto [m, name] : views) {
    if (m == &kernels::DecodeCall::k_scale || m == &kernels::DecodeCall::v_scale) continue;
    auto bad = c.call;
    (bad.*m).data = nullptr;
    expect_refused(bad, std::string(name) + " has no data");
  }
}

TEST(ReferenceRefuses, AnInvalidProfileOrOutput) {
  const auto c = make_call(CallSpec{});
  NumericsProfile p;
  p.partial = DType::i32;
  expect_refused(c.call, "partial", &p);
  auto bad = c.call;
  bad.out.dtype = DType::i32;
  expect_refused(bad, "out must be bf16, f16 or f32");
}

// An owned strided copy of a view: `strides` in elements, every element the
// view does not cover set to `poison`.
struct Restrided {
  std::vector<uint8_t> bytes;
  TensorView view;
};
Restrided restride(const TensorView& src, const std::vector<int64_t>& strides, uint8_t poison_byte,
                   int64_t offset = 0) {
  const int es = kernels::dtype_size(src.dtype);
  Restrided r;
  r.view = src;
  int64_t span = 1;
  for (int i = 0; i < src.rank; ++i) {
    r.view.stride[i] = strides[i];
    span += (src.shape[i] - 1) * strides[i];
  }
  r.bytes.assign(size_t((span + offset) * es), poison_byte);
  std::array<int64_t, kernels::kMaxRank> idx{};
  const int64_t n = src.numel();
  for (int64_t e = 0; e < n; ++e) {
    int64_t so = 0, dofs = offset;
    for (int i = 0; i < src.rank; ++i) {
      so += idx[i] * src.stride[i];
      dofs += idx[i] * strides[i];
    }
    std::memcpy(&r.bytes[size_t(dofs * es)], static_cast<const uint8_t*>(src.data) + so * es, size_t(es));
    for (int i = src.rank - 1; i >= 0; --i) {
      if (++idx[i] < src.shape[i]) break;
      idx[i] = 0;
    }
  }
  r.view.data = r.bytes.data() + offset * es;
  return r;
}

void expect_same(const ReferenceResult& a, const ReferenceResult& b, const char* what) {
  ASSERT_EQ(a.out.size(), b.out.size()) << what;
  int64_t differ = 0;
  for (size_t i = 0; i < a.out.size(); ++i)
    differ += std::memcmp(&a.out[i], &b.out[i], sizeof(float)) != 0 || a.pq_l1[i] != b.pq_l1[i] ||
              a.pq_l2[i] != b.pq_l2[i] || a.pq_sub[i] != b.pq_sub[i];
  for (size_t i = 0; i < a.lse.size(); ++i)
    differ += std::memcmp(&a.lse[i], &b.lse[i], sizeof(double)) != 0;
  EXPECT_EQ(differ, 0) << what << ": the strided call differs from its contiguous copy";
}

// Contiguous strides of a shape.
std::vector<int64_t> packed(const TensorView& t) {
  std::vector<int64_t> s(t.rank);
  int64_t st = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    s[i] = st;
    st *= t.shape[i];
  }
  return s;
}

// K and V halves of one combined [num_blocks, 2, Hkv, ...] tensor, as a
// serving engine allocates them: each half's block stride is twice its size.
TEST(ReferenceStrided, KvHalvesOfACombinedTensor) {
  for (kernels::VLayout layout : {kernels::VLayout::plain, kernels::VLayout::trans}) {
    CallSpec s;
    s.lens = {130, 17, 0, 64};
    s.hkv = 2;
    s.group = 3;
    s.q_len = 2;
    s.layout = layout;
    s.scales = testing::Scales::token;
    s.seed = 3100;
    const auto c = make_call(s);
    const ReferenceResult want = decode(c.call, {.precision = Precision::fp64});
    const int64_t per_block = c.call.k_cache.numel() / c.num_blocks;  // Hkv*D*bs, the same for V
    ASSERT_EQ(per_block, c.call.v_cache.numel() / c.num_blocks);
    // combined[blk][0] = K block, combined[blk][1] = V block; everything else NaN.
    std::vector<uint8_t> combined(size_t(c.num_blocks * 2 * per_block), testing::fp8_nan(s.cache));
    for (int64_t b = 0; b < c.num_blocks; ++b) {
      std::memcpy(&combined[size_t((2 * b) * per_block)], &c.k[size_t(b * per_block)], size_t(per_block));
      std::memcpy(&combined[size_t((2 * b + 1) * per_block)], &c.v[size_t(b * per_block)], size_t(per_block));
    }
    auto call = c.call;
    call.k_cache.data = combined.data();
    call.k_cache.stride[0] = 2 * per_block;
    call.v_cache.data = combined.data() + per_block;
    call.v_cache.stride[0] = 2 * per_block;
    ASSERT_FALSE(call.k_cache.contiguous());
    const ReferenceResult got = decode(call, {.precision = Precision::fp64});
    expect_same(got, want, layout == kernels::VLayout::plain ? "combined KV, plain V" : "combined KV, trans V");
    // And against the independent naive loop, which reads the contiguous copy.
    const testing::Naive n = testing::naive_decode(c, true);
    for (size_t i = 0; i < got.out.size(); ++i)
      ASSERT_NEAR(got.out[i], n.out[i], 1e-9 + 1.2e-7 * std::fabs(n.out[i])) << "element " << i;
  }
}

// Other strides take the gathering path: interleaved bytes (innermost stride
// 2), padded blocks and tokens, padded Q rows with a head_dim stride of 3,
// strided index tensors and scales.
TEST(ReferenceStrided, EveryViewAnyStrides) {
  for (kernels::VLayout layout : {kernels::VLayout::plain, kernels::VLayout::trans}) {
    CallSpec s;
    s.lens = {70, 33, 1};
    s.hkv = 2;
    s.group = 2;
    s.q_len = 3;
    s.block_size = 32;
    s.layout = layout;
    s.scales = testing::Scales::token;
    s.seed = 3200;
    const auto c = make_call(s);
    const ReferenceResult want = decode(c.call, {.precision = Precision::fp64});
    const uint8_t nan8 = testing::fp8_nan(s.cache);
    auto call = c.call;
    // K: every stride doubled (bytes interleaved with poison), plus padding per block.
    std::vector<int64_t> ks = packed(c.call.k_cache);
    for (auto& x : ks) x *= 2;
    ks[0] += 48;
    const Restrided k = restride(c.call.k_cache, ks, nan8, 5);
    // V: tokens (plain) or 16-groups (trans) padded, innermost stride 1 or 3.
    std::vector<int64_t> vs = packed(c.call.v_cache);
    if (layout == kernels::VLayout::plain) {
      // [nb, Hkv, D, bs]: each row of bs tokens padded by 9, each head by 3, each block by 11.
      const auto& sh = c.call.v_cache.shape;
      vs[3] = 1;
      vs[2] = sh[3] + 9;
      vs[1] = vs[2] * sh[2] + 3;
      vs[0] = vs[1] * sh[1] + 11;
    } else {
      for (auto& x : vs) x *= 3;
    }
    const Restrided v = restride(c.call.v_cache, vs, nan8, 3);
    // Q: rows padded, head_dim stride 3 (halves: bf16 NaN 0x7fc0 -> bytes c0 7f; 0xff fills are NaN too).
    const TensorView& q = c.call.q;
    const Restrided qv = restride(q, {q.shape[1] * q.shape[2] * 3 + 5, q.shape[2] * 3, 3}, 0xff);
    // Index tensors and scales with gaps.
    const Restrided bt = restride(c.call.block_tables, {c.call.block_tables.shape[1] * 2 + 1, 2}, 0x7f);
    const Restrided cl = restride(c.call.context_lens, {3}, 0x00);  // a misread length is 0: wrong, not wild
    const TensorView& ksc = c.call.k_scale;
    const Restrided kss = restride(ksc, {ksc.shape[1] * ksc.shape[2] * 2, ksc.shape[2] * 2, 2}, 0xff);
    const Restrided vss = restride(c.call.v_scale, {1, ksc.shape[0], ksc.shape[0] * ksc.shape[1]}, 0xff);
    call.k_cache = k.view;
    call.v_cache = v.view;
    call.q = qv.view;
    call.block_tables = bt.view;
    call.context_lens = cl.view;
    call.k_scale = kss.view;
    call.v_scale = vss.view;
    const ReferenceResult got = decode(call, {.precision = Precision::fp64});
    expect_same(got, want, layout == kernels::VLayout::plain ? "strided, plain V" : "strided, trans V");
  }
}

}  // namespace
}  // namespace pav::reference
