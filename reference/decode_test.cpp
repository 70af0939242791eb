// SPDX-License-Identifier: Apache-2.0
// The reference decode against an independent double-precision loop, and its
// own promises: layouts, scales, causality, empty rows, chunking, poison.
#include "reference/decode.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "reference/test_call.hpp"
#include "reference/test_naive.hpp"

namespace pav::reference {
namespace {

using kernels::DType;
using kernels::VLayout;
using testing::CallSpec;
using testing::make_call;
using testing::naive_decode;
using testing::Scales;

std::string describe(const CallSpec& s) {
  std::string lens;
  for (size_t i = 0; i < s.lens.size() && i < 6; ++i) lens += std::to_string(s.lens[i]) + " ";
  char buf[256];
  std::snprintf(buf, sizeof buf, "seed %llu lens [%s] Hkv %lld G %lld D %lld bs %lld q_len %lld layout %s",
                (unsigned long long)s.seed, lens.c_str(), (long long)s.hkv, (long long)s.group,
                (long long)s.head_dim, (long long)s.block_size, (long long)s.q_len,
                s.layout == VLayout::plain ? "plain" : "trans");
  return buf;
}

// |a - b| <= atol + rtol*|b| for every element; reports the worst one.
template <class A, class B>
void expect_close(const std::vector<A>& a, const std::vector<B>& b, double atol, double rtol, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double worst = 0;
  size_t at = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = double(a[i]), y = double(b[i]);
    if (std::isinf(y) && x == y) continue;
    const double ratio = std::fabs(x - y) / (atol + rtol * std::fabs(y));
    if (!(ratio <= 1.0)) ++bad;
    if (!(ratio <= worst)) {
      worst = ratio;
      at = i;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": worst at " << at << ": " << double(a[at]) << " vs " << double(b[at])
                    << " (" << worst << " of allowed)";
}

// The reference at both precisions against the naive loop.
void check_against_naive(const CallSpec& spec, const ReferenceOptions& base = {}) {
  SCOPED_TRACE(describe(spec));
  std::printf("[ seed ] %s\n", describe(spec).c_str());
  const auto c = make_call(spec);
  const bool q_fp8 = kernels::is_fp8(spec.compute);
  const auto n = naive_decode(c, q_fp8);
  for (Precision prec : {Precision::fp64, Precision::fp32}) {
    ReferenceOptions o = base;
    o.precision = prec;
    const ReferenceResult r = decode(c.call, o);
    // fp64: summation order, Eigen's exp and the final rounding to float
    // (2^-24 relative; lse stays double); fp32: ~1e-6 relative per step.
    const bool f64 = prec == Precision::fp64;
    const double tol = f64 ? 1.2e-7 : 2e-5, atol = f64 ? 1e-9 : 2e-5, lse_tol = f64 ? 1e-10 : 2e-5;
    SCOPED_TRACE(f64 ? "fp64" : "fp32");
    expect_close(r.out, n.out, atol, tol, "out");
    expect_close(r.lse, n.lse, lse_tol, lse_tol, "lse");
    expect_close(r.pq_l1, n.l1, atol, tol, "pq_l1");
    expect_close(r.pq_l2, n.l2, atol, tol, "pq_l2");
    for (size_t i = 0; i < r.out.size(); ++i) ASSERT_TRUE(std::isfinite(r.out[i])) << "element " << i;
    // pq_sub is an upper bound of the exact sum, and exact while the max never rises.
    for (size_t i = 0; i < r.pq_sub.size(); ++i) {
      ASSERT_GE(double(r.pq_sub[i]), n.sub[i] * (1 - tol) - 1e-30) << "pq_sub element " << i;
      ASSERT_LE(double(r.pq_sub[i]), double(r.pq_l1[i]) * (1 + tol)) << "pq_sub element " << i;
    }
  }
}

TEST(ReferenceDecode, MatchesNaivePlainLayout) {
  for (int64_t bs : {16, 64, 128}) {
    CallSpec s;
    s.lens = {1, 37, 300, 129};
    s.block_size = bs;
    s.hkv = 2;
    s.group = 3;
    s.seed = 100 + bs;
    check_against_naive(s);
  }
}

TEST(ReferenceDecode, MatchesNaiveTransLayout) {
  for (int64_t bs : {16, 64, 128}) {
    CallSpec s;
    s.lens = {2, 255, 513};
    s.block_size = bs;
    s.layout = VLayout::trans;
    s.hkv = 2;
    s.group = 5;
    s.head_dim = 128;
    s.seed = 200 + bs;
    check_against_naive(s);
  }
}

TEST(ReferenceDecode, PerTokenScalesPerHead) {
  for (VLayout l : {VLayout::plain, VLayout::trans}) {
    CallSpec s;
    s.lens = {70, 300};
    s.hkv = 3;
    s.group = 2;
    s.scales = Scales::token;
    s.layout = l;
    s.block_size = 64;
    s.seed = 301;
    check_against_naive(s);
  }
}

TEST(ReferenceDecode, NoScalesAndFnuzCache) {
  CallSpec s;
  s.lens = {90, 17};
  s.scales = Scales::none;
  s.cache = DType::fp8_e4m3fnuz;
  s.compute = DType::fp8_e4m3fnuz;
  s.q_dtype = DType::f16;
  s.seed = 302;
  check_against_naive(s);
}

TEST(ReferenceDecode, MtpCausalityMatchesNaive) {
  for (int64_t q_len : {2, 3, 4}) {
    CallSpec s;
    s.lens = {1, 2, 5, 260, 33};
    s.q_len = q_len;
    s.group = 3;
    s.hkv = 2;
    s.seed = 400 + q_len;
    check_against_naive(s);
  }
}

// Row p of a q_len call sees exactly what a q_len 1 call over the first
// len - q_len + 1 + p tokens sees: the same bytes, so equal to rounding.
TEST(ReferenceDecode, MtpRowEqualsShorterContext) {
  CallSpec s;
  s.lens = {77};
  s.q_len = 3;
  s.group = 2;
  s.compute = DType::bf16;  // exact Q: the rows are independent inputs
  s.seed = 410;
  const auto c = make_call(s);
  const ReferenceResult full = decode(c.call, {.precision = Precision::fp64});
  for (int64_t p = 0; p < s.q_len; ++p) {
    auto shorter = make_call(s);  // same seed: same bytes
    shorter.lens[0] = int32_t(s.lens[0] - s.q_len + 1 + p);
    shorter.call.q_len = 1;
    shorter.call.context_lens.shape[0] = 1;
    shorter.call.q = kernels::TensorView::contiguous_of(shorter.q.data() + p * c.hq() * s.head_dim, s.q_dtype,
                                                        {1, c.hq(), s.head_dim});
    shorter.call.out = shorter.call.q;
    const ReferenceResult one = decode(shorter.call, {.precision = Precision::fp64});
    for (int64_t head = 0; head < c.hq(); ++head) {
      EXPECT_NEAR(full.lse[p * c.hq() + head], one.lse[head], 1e-12) << "p " << p << " head " << head;
      for (int64_t d = 0; d < s.head_dim; ++d)
        ASSERT_NEAR(full.out[full.index(p, head, d)], one.out[one.index(0, head, d)], 1e-6)
            << "p " << p << " head " << head << " d " << d;
    }
  }
}

TEST(ReferenceDecode, EmptyRowsAreExactlyZeroWithNegInfLse) {
  CallSpec s;
  s.lens = {0, 1, 2, -5, 40};
  s.q_len = 3;
  s.group = 2;
  s.seed = 500;
  const auto c = make_call(s);
  for (Precision prec : {Precision::fp32, Precision::fp64}) {
    const ReferenceResult r = decode(c.call, {.precision = prec});
    for (int64_t b = 0; b < int64_t(s.lens.size()); ++b)
      for (int64_t p = 0; p < s.q_len; ++p) {
        const bool empty = s.lens[b] - s.q_len + 1 + p <= 0;
        const int64_t qrow = b * s.q_len + p;
        for (int64_t head = 0; head < c.hq(); ++head) {
          EXPECT_EQ(r.row_empty(qrow, head), empty) << "seq " << b << " p " << p;
          if (empty) {
            EXPECT_EQ(r.lse[qrow * c.hq() + head], -INFINITY);
          } else {
            EXPECT_TRUE(std::isfinite(r.lse[qrow * c.hq() + head]));
          }
          for (int64_t d = 0; d < s.head_dim; ++d) {
            const float x = r.out[r.index(qrow, head, d)];
            if (empty) {
              ASSERT_EQ(x, 0.0f) << "seq " << b << " p " << p << " head " << head << " d " << d;
              ASSERT_EQ(r.pq_l1[r.index(qrow, head, d)], 0.0f);
            } else {
              ASSERT_TRUE(std::isfinite(x));
            }
          }
        }
      }
  }
}

TEST(ReferenceDecode, Fp32AgreesWithFp64) {
  CallSpec s;
  s.lens = {5000, 700, 3};
  s.hkv = 2;
  s.group = 4;
  s.head_dim = 128;
  s.q_len = 2;
  s.scales = Scales::token;
  s.seed = 600;
  const auto c = make_call(s);
  const ReferenceResult a = decode(c.call, {.precision = Precision::fp32});
  const ReferenceResult b = decode(c.call, {.precision = Precision::fp64});
  expect_close(a.out, b.out, 1e-5, 1e-5, "out");
  expect_close(a.lse, b.lse, 1e-5, 1e-5, "lse");
  expect_close(a.pq_l2, b.pq_l2, 1e-5, 1e-5, "pq_l2");
}

// Weights below float's smallest normal: logits spread over hundreds (P down
// to e^-300 and under) with a bf16 P, whose subnormal bound c = 2^-134 is
// itself below it. The fp32 reference takes its products over P scaled by a
// power of two and scales the sums back (over unscaled subnormal operands
// x86's float GEMM ran about a hundred times slower): it agrees with fp64 to
// float's precision in out, lse and the l1 and l2 terms, and its sum of
// min(p, c)|v| stays above fp64's. It is larger there, not equal: float's exp
// gives a weight at least about 2^-128 to every visible token, which min(p, c)
// counts as c.
TEST(ReferenceDecode, Fp32AgreesWithFp64UnderSubnormalWeights) {
  const auto c = make_call({.lens = {3000, 900, 40}, .q_amp = 8.0f, .k_amp = 64.0f, .seed = 604});
  const NumericsProfile bf16p{QQuant::none, PRound::bf16, DType::f32};
  const ReferenceResult a = decode(c.call, bf16p, {.precision = Precision::fp32});
  const ReferenceResult b = decode(c.call, bf16p, {.precision = Precision::fp64});
  // The case reaches the range it is about: some row's logits span more than
  // float's exponent range (2^-149 is e^-103).
  double span = 0;
  for (size_t i = 0; i < b.score_max.size(); ++i)
    if (b.seen[i]) span = std::max(span, double(b.score_max[i]) * 2.0);
  EXPECT_GT(span, 300.0);
  expect_close(a.out, b.out, 1e-6, 1e-5, "out");
  expect_close(a.lse, b.lse, 1e-5, 1e-5, "lse");
  expect_close(a.pq_l1, b.pq_l1, 1e-6, 1e-5, "pq_l1");
  expect_close(a.pq_l2, b.pq_l2, 1e-6, 1e-5, "pq_l2");
  ASSERT_EQ(a.pq_sub.size(), b.pq_sub.size());
  int64_t below = 0;
  double most = 0;
  for (size_t i = 0; i < a.pq_sub.size(); ++i) {
    below += double(a.pq_sub[i]) < double(b.pq_sub[i]) * (1 - 1e-5) - 0x1p-148;
    most = std::max(most, double(a.pq_sub[i]));
  }
  EXPECT_EQ(below, 0) << "pq_sub below fp64's";
  EXPECT_GT(most, 0x1p-140);  // the bound is in play
}

// Values near float's top: a V scale of 1e30 (|v| up to about 4.5e32, a
// 3000-token sum of p|v| near 1e36). The products' scale of P leaves those
// sums room below float's largest, so fp32 still agrees with fp64 in out
// (to float's precision of sum p|v|), lse and the l1 term (p^2 v^2 itself
// passes float's range here; both precisions keep it as they can).
TEST(ReferenceDecode, Fp32AgreesWithFp64AtLargeValues) {
  auto c = make_call({.lens = {3000, 20}, .seed = 605});
  c.vs[0] = 1e30f;  // the per-tensor V scale the call's view reads
  const ReferenceResult a = decode(c.call, {.precision = Precision::fp32});
  const ReferenceResult b = decode(c.call, {.precision = Precision::fp64});
  double most = 0;
  int64_t bad = 0;
  ASSERT_EQ(a.out.size(), b.pq_l1.size());
  for (size_t i = 0; i < a.out.size(); ++i) {
    most = std::max(most, double(std::fabs(b.out[i])));
    // out is a sum of signed terms: its error is float's precision of the
    // sum of their magnitudes, sum p|v| / l.
    bad += !(std::fabs(double(a.out[i]) - double(b.out[i])) <= 1e-5 * double(b.pq_l1[i]));
  }
  EXPECT_GT(most, 1e29);
  EXPECT_EQ(bad, 0) << "out";
  expect_close(a.lse, b.lse, 1e-5, 1e-5, "lse");
  expect_close(a.pq_l1, b.pq_l1, 0, 1e-5, "pq_l1");
}

TEST(ReferenceDecode, ChunkBoundaryLengths) {
  CallSpec s;
  s.lens = {4095, 4096, 4097};
  s.group = 2;
  s.q_len = 2;
  s.head_dim = 64;
  s.block_size = 128;
  s.seed = 700;
  check_against_naive(s, {.chunk_tokens = 4096});
  // The defaults: chunk 1024 inside segments of 8192.
  CallSpec d = s;
  d.lens = {1023, 1024, 1025, 8191, 8192, 8193};
  d.seed = 702;
  check_against_naive(d);
  // Small chunks and two-chunk segments exercise the segment merge too.
  CallSpec t;
  t.lens = {63, 64, 65, 127, 128, 129, 300, 1000};
  t.q_len = 4;
  t.group = 3;
  t.seed = 701;
  check_against_naive(t, {.chunk_tokens = 64, .segment_tokens = 128});
  check_against_naive(t, {.chunk_tokens = 7, .segment_tokens = 21});
  check_against_naive(t, {.chunk_tokens = 64, .segment_tokens = 100});  // segments cut chunks short
}

TEST(ReferenceDecode, ChunkSizeInvariance) {
  CallSpec s;
  s.lens = {3000, 129};
  s.q_len = 2;
  s.group = 4;
  s.seed = 710;
  const auto c = make_call(s);
  const ReferenceResult a = decode(c.call, {.precision = Precision::fp64});
  const ReferenceResult b = decode(c.call, {.precision = Precision::fp64, .chunk_tokens = 100, .segment_tokens = 400});
  // Doubles that differ in the last bits may round to neighbouring floats.
  expect_close(a.out, b.out, 1e-9, 1.2e-7, "out");
  expect_close(a.lse, b.lse, 1e-12, 1e-12, "lse");
  expect_close(a.pq_l1, b.pq_l1, 1e-9, 1.2e-7, "pq_l1");
  expect_close(a.pq_l2, b.pq_l2, 1e-9, 1.2e-7, "pq_l2");
}

// Every cache byte, scale and table entry outside the contexts is poison (the
// builder does that); nothing of it may reach any output.
TEST(ReferenceDecode, PoisonOutsideContextNeverReachesResult) {
  for (Scales sc : {Scales::tensor, Scales::token})
    for (VLayout l : {VLayout::plain, VLayout::trans}) {
      CallSpec s;
      s.lens = {1, 15, 17, 127, 129, 0};
      s.block_size = l == VLayout::trans ? 64 : 16;
      s.layout = l;
      s.scales = sc;
      s.q_len = 2;
      s.seed = 800;
      const auto c = make_call(s);
      // The builder really poisoned the bytes past each context.
      const int64_t tail_blk = c.block_of(1, 14);
      ASSERT_TRUE(std::isnan(kernels::fp8_to_f32(c.k[c.k_at(tail_blk, 0, 0, 15)], s.cache)));
      ASSERT_TRUE(std::isnan(kernels::fp8_to_f32(c.v[c.v_at(tail_blk, 0, 3, 15)], s.cache)));
      for (Precision prec : {Precision::fp32, Precision::fp64}) {
        const ReferenceResult r = decode(c.call, {.precision = prec});
        for (size_t i = 0; i < r.out.size(); ++i) {
          ASSERT_TRUE(std::isfinite(r.out[i])) << "out " << i;
          ASSERT_TRUE(std::isfinite(r.pq_l1[i]) && std::isfinite(r.pq_l2[i]) && std::isfinite(r.pq_sub[i]));
        }
      }
      check_against_naive(s);
    }
}

TEST(ReferenceDecode, QQuantFollowsTheProfile) {
  CallSpec s;
  s.lens = {200};
  s.group = 4;
  s.seed = 900;
  const auto c = make_call(s);
  const auto quantized = naive_decode(c, true);
  const auto exact = naive_decode(c, false);
  const ReferenceOptions f64{.precision = Precision::fp64};
  const ReferenceResult pav = decode(c.call, f64);
  const ReferenceResult k8 = decode(c.call, NumericsProfile{QQuant::fp8_per_row, PRound::none, DType::f32}, f64);
  const ReferenceResult ex = decode(c.call, NumericsProfile{QQuant::none, PRound::fp8_running_max, DType::bf16}, f64);
  // fp64 results rounded to float: 2^-24 relative.
  expect_close(pav.out, quantized.out, 1e-9, 1.2e-7, "pav's profile under fp8 compute");
  expect_close(k8.out, quantized.out, 1e-9, 1.2e-7, "fp8_per_row");
  expect_close(ex.out, exact.out, 1e-9, 1.2e-7, "none");
  // The two inputs really differ (else the checks above could not tell them apart).
  double diff = 0;
  for (size_t i = 0; i < ex.out.size(); ++i) diff = std::max(diff, std::fabs(double(ex.out[i]) - k8.out[i]));
  EXPECT_GT(diff, 1e-4);
  // pav's profile under bf16 compute quantizes nothing.
  auto b = make_call(s);
  b.call.opt.compute = DType::bf16;
  const ReferenceResult bf = decode(b.call, f64);
  expect_close(bf.out, exact.out, 1e-9, 1.2e-7, "pav's profile under bf16 compute");
  EXPECT_EQ(bf.profile, (NumericsProfile{QQuant::none, PRound::none, DType::bf16}));
  EXPECT_EQ(pav.profile, (NumericsProfile{QQuant::fp8_per_row, PRound::fp8_running_max, DType::bf16}));
  EXPECT_EQ(k8.profile.p_round, PRound::none);
  EXPECT_EQ(pav.out_dtype, DType::bf16);
}

TEST(ReferenceDecode, ExplicitSoftmaxScale) {
  CallSpec s;
  s.lens = {150, 60};
  s.softmax_scale = 0.37f;
  s.seed = 950;
  check_against_naive(s);
}

// A sea of tokens ~11 nats below one spike: P's subnormal rounding matters
// there, and pq_sub must see it (about c * sum|v| / L, far above zero).
TEST(ReferenceDecode, SubnormalTermSeesTheFlatSea) {
  CallSpec s;
  s.lens = {2000};
  s.group = 1;
  s.head_dim = 64;
  s.scales = Scales::none;
  s.seed = 960;
  auto c = make_call(s);
  // q = 8 e_0 (exact in bf16), k_0 = 11 for token 0 and 0 elsewhere, softmax
  // scale 1/8: token 0 has logit 11, the other 1999 have 0; every v is 1.
  for (auto& x : c.q) x = kernels::f32_to_bf16(0.0f);
  c.q[0] = kernels::f32_to_bf16(8.0f);
  for (int64_t t = 0; t < s.lens[0]; ++t) {
    const int64_t blk = c.block_of(0, t), off = t % s.block_size;
    for (int64_t d = 0; d < s.head_dim; ++d) {
      c.k[c.k_at(blk, 0, d, off)] = kernels::f32_to_fp8(d == 0 && t == 0 ? 11.0f : 0.0f, s.cache);
      c.v[c.v_at(blk, 0, d, off)] = kernels::f32_to_fp8(1.0f, s.cache);
    }
  }
  const ReferenceResult r = decode(c.call, NumericsProfile{QQuant::none, PRound::fp8_running_max, DType::bf16},
                                   {.precision = Precision::fp64});
  const auto n = naive_decode(c, false);
  // 448 exp(-11) = 0.0075 is an e4m3fn subnormal (< 2^-6); exp(-11) = 1.67e-5
  // exceeds c = 2^-10/448, so each of the 2000 tokens (spike included) is charged c.
  const double csub = p_subnormal_error(DType::fp8_e4m3fn);
  EXPECT_DOUBLE_EQ(csub, std::ldexp(1.0, -10) / 448.0);
  const double L = 1.0 + 1999 * std::exp(-11.0);
  EXPECT_NEAR(n.sub[0], 2000 * csub / L, 1e-12);
  EXPECT_NEAR(r.pq_sub[0], n.sub[0], 1e-8);
  EXPECT_GT(r.pq_sub[0], 3e-3);
}

TEST(ReferenceDecode, RejectsMalformedCalls) {
  CallSpec s;
  s.hkv = 2;
  s.group = 2;
  const auto c = make_call(s);
  EXPECT_NO_THROW(decode(c.call));
  auto bad = c.call;
  bad.q.dtype = DType::f32;
  EXPECT_THROW(decode(bad), std::invalid_argument);
  bad = c.call;
  bad.q.shape[1] = 3;  // Hq not a multiple of Hkv
  EXPECT_THROW(decode(bad), std::invalid_argument);
  bad = c.call;
  bad.v_cache.dtype = DType::fp8_e4m3fnuz;
  EXPECT_THROW(decode(bad), std::invalid_argument);
  bad = c.call;
  bad.q_len = 2;  // q rows no longer num_seqs * q_len
  EXPECT_THROW(decode(bad), std::invalid_argument);
}

// A block id past the cache inside a context is refused, not read.
TEST(ReferenceDecode, RejectsOutOfRangeBlockInsideContext) {
  CallSpec s;
  s.lens = {40};
  auto c = make_call(s);
  c.tables[1] = int32_t(c.num_blocks);
  EXPECT_THROW(decode(c.call), std::invalid_argument);
}

}  // namespace
}  // namespace pav::reference
