// SPDX-License-Identifier: Apache-2.0
// The reference's own error on tied and nearly tied logits, measured against an
// independent long-double model of the same call.
//
// Tied logits are where a reference in the kernel's precision goes wrong: two
// tokens with the same key bytes must get the same weight, and at large logits
// (a sentinel key against a long query row scores thousands) an fp32 score
// carries an error of a few ulps of its magnitude that depends on the GEMM's
// summation order for that column. exp() turns that into a relative weight
// error of 1e-3, which once moved the mean of two exactly tied tokens from 8 to
// 8.05 and failed a correct kernel. The property plants exact ties (copies of
// one token's key), near ties (a copy one fp8 code step away) and large logits
// (keys that follow the sign of the query) on purpose, and requires the
// reference, in fp32 and fp64, to stay within a tenth of the tightest bound the
// comparison standard ever grants a kernel (an f32 output, f32 partials, no
// rounding declared): the reference's error must never be what a verdict
// measures.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/test_paths.hpp"
#include "kernels/codecs.hpp"
#include "properties/case/case_format.hpp"
#include "properties/gen/gen.hpp"
#include "properties/case/host_case.hpp"
#include "reference/compare.hpp"
#include "reference/decode.hpp"

namespace pav::props {
namespace {

using kernels::DType;
using kernels::VLayout;
using Real = long double;

// out and l1 = sum_t w_t |v_t| of every [row, head, d], from the case's bytes
// by the layout formulas, scores and softmax in long double: no Eigen, no
// chunking, no online softmax.
struct Exact {
  std::vector<Real> out, l1;
};

Exact exact_decode(const HostCase& c) {
  const CaseSpec& s = c.spec;
  const int64_t B = int64_t(s.lens.size()), D = s.head_dim, G = s.group, H = s.hkv, hq = H * G;
  const int64_t bs = s.block_size, qstride = hq * D + s.q_row_pad;
  const Real scale = s.softmax_scale != 0.0f ? Real(s.softmax_scale) : 1.0L / std::sqrt(Real(D));
  auto q_at = [&](int64_t row, int64_t head, int64_t d) -> Real {
    const uint16_t bits = c.q[row * qstride + head * D + d];
    return s.q_dtype == DType::bf16 ? kernels::bf16_to_f32(bits) : kernels::f16_to_f32(bits);
  };
  auto scale_at = [&](const std::vector<float>& v, int64_t blk, int64_t h, int64_t off) -> Real {
    if (s.scales == ScaleKind::none) return 1;
    if (s.scales == ScaleKind::per_tensor) return v[0];
    return v[(blk * H + h) * bs + off];
  };
  Exact e;
  e.out.assign(B * s.q_len * hq * D, 0);
  e.l1 = e.out;
  std::vector<Real> sc;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < s.q_len; ++p)
      for (int64_t head = 0; head < hq; ++head) {
        const int64_t h = head / G, row = b * s.q_len + p;
        const int64_t visible = std::max<int64_t>(0, int64_t(s.lens[b]) - s.q_len + 1 + p);
        if (visible == 0) continue;
        sc.assign(visible, 0);
        Real M = -INFINITY;
        for (int64_t t = 0; t < visible; ++t) {
          const int64_t blk = c.block_tables[b * c.max_blocks + t / bs], off = t % bs;
          Real dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q_at(row, head, d) *
                   Real(kernels::fp8_to_f32(c.k[kernels::k_offset(blk, h, d, off, H, D, bs)], s.cache_dtype));
          sc[t] = dot * scale_at(c.k_scale, blk, h, off) * scale;
          M = std::max(M, sc[t]);
        }
        Real L = 0;
        for (Real x : sc) L += std::exp(x - M);
        const int64_t base = (row * hq + head) * D;
        for (int64_t t = 0; t < visible; ++t) {
          const int64_t blk = c.block_tables[b * c.max_blocks + t / bs], off = t % bs;
          const Real w = std::exp(sc[t] - M) / L, vs = scale_at(c.v_scale, blk, h, off);
          for (int64_t d = 0; d < D; ++d) {
            const Real v =
                Real(kernels::fp8_to_f32(c.v[kernels::v_offset(s.v_layout, blk, h, d, off, H, D, bs)], s.cache_dtype)) *
                vs;
            e.out[base + d] += w * v;
            e.l1[base + d] += w * std::fabs(v);
          }
        }
      }
  return e;
}

// The tightest allowance of the standard (f32 output, f32 partials, P not
// rounded), of which the reference may use a tenth.
constexpr double kReferenceShare = 0.1;
double tightest_allowed(Real exact, Real l1) {
  return reference::kF32Atol + reference::kF32Rtol * double(std::fabs(exact)) + reference::kF32L1 * double(l1);
}

// The first element where the reference strays past its share, as a message ("" when none).
std::string reference_error(HostCase& c, const Exact& e, reference::Precision precision) {
  const reference::NumericsProfile exact_profile{reference::QQuant::none, reference::PRound::none, DType::f32};
  reference::ReferenceOptions o;
  o.precision = precision;
  const reference::ReferenceResult r = reference::decode(c.call(), exact_profile, o);
  for (size_t i = 0; i < e.out.size(); ++i) {
    const double err = std::fabs(double(r.out[i]) - double(e.out[i]));
    const double budget = kReferenceShare * tightest_allowed(e.out[i], e.l1[i]);
    if (!(err <= budget))
      return std::string(precision == reference::Precision::fp32 ? "fp32" : "fp64") + " reference at element " +
             std::to_string(i) + ": " + std::to_string(r.out[i]) + ", exact " + std::to_string(double(e.out[i])) +
             ", error " + std::to_string(err) + " > " + std::to_string(budget) + " (a tenth of the tightest bound)";
  }
  return "";
}

// Copies the key (codes and per-token scale) of token `from` of sequence b
// onto token `to` for every KV head; near = true then moves one code of the
// copy to its neighbour, a logit difference of one fp8 step of one product.
void plant_tie(HostCase& c, int64_t b, int64_t from, int64_t to, bool near, int64_t near_d) {
  const CaseSpec& s = c.spec;
  const int64_t H = s.hkv, D = s.head_dim, bs = s.block_size;
  const int64_t fb = c.block_tables[b * c.max_blocks + from / bs], fo = from % bs;
  const int64_t tb = c.block_tables[b * c.max_blocks + to / bs], to_off = to % bs;
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t d = 0; d < D; ++d)
      c.k[kernels::k_offset(tb, h, d, to_off, H, D, bs)] = c.k[kernels::k_offset(fb, h, d, fo, H, D, bs)];
    if (s.scales == ScaleKind::per_token) c.k_scale[(tb * H + h) * bs + to_off] = c.k_scale[(fb * H + h) * bs + fo];
    if (near) {
      uint8_t& code = c.k[kernels::k_offset(tb, h, near_d, to_off, H, D, bs)];
      // One step in magnitude (0x7e and below stay finite in both flavours' positive halves).
      if ((code & 0x7f) < 0x7e && code != 0x80) code = uint8_t(code + 1);
      else code = uint8_t(code - 1);
    }
  }
}

RC_GTEST_PROP(ReferenceTies, TiedAndNearlyTiedLogitsStayExact, ()) {
  CaseSpec spec = *gen_decode_case({.max_batch = 3, .max_total_tokens = 900, .allow_long = false});
  spec.head_dim = *rc::gen::element(64, 128, 512);
  spec.group = *rc::gen::inRange(1, 8);
  spec.lens[0] = *rc::gen::inRange(2, 600);
  HostCase c = build_case(spec);
  const int64_t L = spec.lens[0];
  // Ties among up to 4 tokens, some near, some at large logits; sources and
  // copies anywhere in the context (tile and block boundaries included by chance).
  const int ties = *rc::gen::inRange(1, 4);
  const int64_t src = *rc::gen::inRange<int64_t>(0, L);
  if (*rc::gen::arbitrary<bool>()) plant_query_aligned_key(c, 0, src, *rc::gen::element(32.0f, 224.0f, 448.0f));
  for (int i = 0; i < ties; ++i) {
    const int64_t to = *rc::gen::inRange<int64_t>(0, L);
    if (to == src) continue;
    plant_tie(c, 0, src, to, *rc::gen::arbitrary<bool>(), *rc::gen::inRange<int64_t>(0, spec.head_dim));
  }
  RC_TAG(spec.head_dim, ties);
  const Exact e = exact_decode(c);
  for (const auto precision : {reference::Precision::fp32, reference::Precision::fp64}) {
    const std::string problem = reference_error(c, e, precision);
    if (!problem.empty()) RC_FAIL(problem);
  }
}

// The case that failed a correct kernel: lengths [0, 257], G 7, D 512, two
// sentinels with the same key bytes at logits near 4000 and values whose mean
// is 8 exactly. The tied rows must come out as that mean within the
// reference's share, at both precisions.
TEST(ReferenceTies, SentinelTieOfTheSplitDecodeCase) {
  HostCase c = load_case(std::string(PAV_SOURCE_DIR) + "/fixtures/reference/tied-sentinels-d512.json");
  ASSERT_EQ(c.spec.head_dim, 512);
  const Exact e = exact_decode(c);
  // d 0 of every head of sequence 1 is the mean of -96 and 112.
  const int64_t hq = c.spec.hkv * c.spec.group, D = c.spec.head_dim;
  for (int64_t head = 0; head < hq; ++head) EXPECT_NEAR(double(e.out[(1 * hq + head) * D]), 8.0, 1e-9);
  for (const auto precision : {reference::Precision::fp32, reference::Precision::fp64})
    EXPECT_EQ(reference_error(c, e, precision), "");
}

}  // namespace
}  // namespace pav::props
