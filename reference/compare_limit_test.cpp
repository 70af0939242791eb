// SPDX-License-Identifier: Apache-2.0
// The comparison standard at its limits, on references built by hand: every
// term of the allowed error against values computed here, an element exactly
// at the allowed error accepted and the next float beyond it refused on both
// sides of the reference, empty rows, and the figures of a known error. The
// tolerances and values are powers of two, so each bound is exact in double
// and "at the limit" means exactly at it.
#include "reference/compare.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/codecs.hpp"

namespace pav::reference {
namespace {

using kernels::DType;
using kernels::TensorView;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// One query row with `heads` heads of D = out.size() / heads; heads listed in
// `empty` see no token (their lse is -inf and their reference is 0).
ReferenceResult hand_ref(std::vector<float> out, DType out_dtype, PRound p_round, DType partial, float l1 = 0,
                         float l2 = 0, float sub = 0, int heads = 1, std::vector<int> empty = {}) {
  ReferenceResult r;
  r.num_seqs = 1;
  r.q_len = 1;
  r.hq = heads;
  r.head_dim = int64_t(out.size()) / heads;
  r.out = std::move(out);
  r.lse.assign(size_t(heads), 0.5);
  for (int h : empty) r.lse[size_t(h)] = -std::numeric_limits<double>::infinity();
  r.pq_l1.assign(r.out.size(), l1);
  r.pq_l2.assign(r.out.size(), l2);
  r.pq_sub.assign(r.out.size(), sub);
  r.profile = {QQuant::none, p_round, partial};
  r.out_dtype = out_dtype;
  return r;
}

TensorView view_of(std::vector<float>& out, const ReferenceResult& r) {
  return TensorView::contiguous_of(out.data(), DType::f32, {r.num_seqs * r.q_len, r.hq, r.head_dim});
}

// The allowed error, term by term, against sums written out here.
TEST(CompareLimits, AllowedErrorTermByTerm) {
  struct Row {
    DType out_dtype;
    PRound p;
    DType partial;
    float ref, l1, l2, sub;
    double want;
  };
  const Row rows[] = {
      // 16-bit output, P not rounded, f32 partials: 5e-3 + 5e-3 * 3 (the sign of ref does not matter).
      {DType::bf16, PRound::none, DType::f32, -3, 4, 1, 0.5f, 0.02},
      {DType::f16, PRound::none, DType::none, 3, 4, 1, 0.5f, 0.02},
      // ... with bf16 partials, plus their rounding u * l1 (2^-134 of underflow is below the tolerance).
      {DType::bf16, PRound::none, DType::bf16, -3, 4, 1, 0.5f, 0.02 + 4.0 / 256},
      // f32 output: 1e-5 + 1e-4 * 3 + 1e-4 * 4, plus the partial's rounding u * l1.
      {DType::f32, PRound::none, DType::bf16, -3, 4, 1, 0.5f, 0.00071 + 4.0 / 256},
      // ... and its underflow, half the smallest subnormal (f16: 2^-25; bf16's 2^-134 is below the tolerance).
      {DType::f32, PRound::none, DType::f16, 3, 4, 1, 0.5f, 0.00071 + 4.0 / 2048 + 1.0 / (1 << 25)},
      // fp8 partials: u = 1/16 (e4m3) or 1/8 (e5m2) times l1, plus 2^-10, 2^-11 or 2^-17.
      {DType::f32, PRound::none, DType::fp8_e4m3fn, 3, 4, 1, 0.5f, 0.00071 + 4.0 / 16 + 1.0 / 1024},
      {DType::f32, PRound::none, DType::fp8_e5m2, 3, 4, 1, 0.5f, 0.00071 + 4.0 / 8 + 1.0 / (1 << 17)},
      // With a 16-bit output fp8 partials are a term on top of the floor (16-bit ones are inside it).
      {DType::bf16, PRound::none, DType::fp8_e4m3fnuz, -3, 4, 1, 0.5f, 0.02 + 4.0 / 16 + 1.0 / 2048},
      {DType::f16, PRound::none, DType::fp8_e5m2, 3, 2, 1, 0.5f, 0.02 + 2.0 / 8 + 1.0 / (1 << 17)},
      {DType::f32, PRound::none, DType::f32, 3, 4, 1, 0.5f, 0.00071},
      {DType::f32, PRound::none, DType::none, 3, 4, 1, 0.5f, 0.00071},
      // P rounded to fp8 (u = 1/16): + min(u * l1, 6.55 * u * l2) + sub.
      // l2 = 0.5: the Hoeffding form 6.55 / 32 = 0.2046875 is the smaller.
      {DType::bf16, PRound::fp8_running_max, DType::f32, 3, 4, 0.5f, 0.125f, 0.02 + 0.2046875 + 0.125},
      // l2 = 1: 6.55 / 16 > 4 / 16, so u * l1 = 0.25.
      {DType::bf16, PRound::fp8_running_max, DType::f32, 3, 4, 1, 0.125f, 0.02 + 0.25 + 0.125},
      // bf16 P (u = 1/256) and f16 P (u = 1/2048), l2 = 1: u * l1 wins.
      {DType::f16, PRound::bf16, DType::f32, 3, 4, 1, 0, 0.02 + 4.0 / 256},
      {DType::f16, PRound::f16, DType::f32, 3, 4, 1, 0, 0.02 + 4.0 / 2048},
      // f16 P and f16 partials: both terms, and f16's underflow 2^-25.
      {DType::f16, PRound::f16, DType::f16, 3, 4, 1, 0, 0.02 + 4.0 / 2048 + 4.0 / 2048 + 1.0 / (1 << 25)},
      // l2 = 0.25 under bf16 P: 6.55 * 0.25 / 256 < 4 / 256.
      {DType::bf16, PRound::bf16, DType::f32, 3, 4, 0.25f, 0, 0.02 + 6.55 * 0.25 / 256},
      // Both at once: f32 floor with bf16 partials and fp8 P.
      {DType::f32, PRound::fp8_running_max, DType::bf16, -3, 4, 1, 0.125f, 0.00071 + 4.0 / 256 + 0.25 + 0.125},
  };
  for (const Row& w : rows) {
    const ReferenceResult r = hand_ref({w.ref}, w.out_dtype, w.p, w.partial, w.l1, w.l2, w.sub);
    EXPECT_NEAR(allowed_error(r, 0, {}), w.want, 1e-15)
        << "out " << kernels::to_string(w.out_dtype) << ", P " << to_string(w.p) << ", partial "
        << kernels::to_string(w.partial) << ", ref " << w.ref;
  }
  // Without the P model only the floor is left.
  CompareOptions no_model;
  no_model.p_error_model = false;
  const ReferenceResult r = hand_ref({3}, DType::bf16, PRound::fp8_running_max, DType::f32, 4, 1, 0.125f);
  EXPECT_NEAR(allowed_error(r, 0, no_model), 0.02, 1e-15);
  // Each option moves its own term only.
  CompareOptions o;
  o.atol = 1;
  o.rtol = 2;
  o.f32_atol = 4;
  o.f32_rtol = 8;
  o.f32_l1 = 16;
  o.p_error_model = false;
  EXPECT_EQ(allowed_error(hand_ref({-3}, DType::bf16, PRound::none, DType::f32, 4), 0, o), 1 + 2 * 3);
  // The partial term is no option's: bf16 partials add 4/256 whatever the floor.
  EXPECT_EQ(allowed_error(hand_ref({-3}, DType::bf16, PRound::none, DType::bf16, 4), 0, o), 1 + 2 * 3 + 4.0 / 256);
  EXPECT_EQ(allowed_error(hand_ref({-3}, DType::f32, PRound::none, DType::f32, 4), 0, o), 4 + 8 * 3 + 16 * 4);
}

// Tolerances that are powers of two make the bound exact: an output exactly
// at ref +- allowed passes (with a worst ratio of exactly 1), the next float
// beyond fails, on both sides of a positive and of a negative reference.
TEST(CompareLimits, ExactlyAtTheAllowedErrorPassesAndOneFloatBeyondFails) {
  struct Setup {
    const char* what;
    ReferenceResult ref;
    CompareOptions o;
    double allowed;
  };
  std::vector<Setup> setups;
  for (float ref : {2.0f, -2.0f}) {
    CompareOptions o;
    o.atol = 0.0625;
    o.rtol = 0.03125;
    // 16-bit floor: 1/16 + 2/32 = 1/8.
    setups.push_back({"16-bit floor", hand_ref({ref}, DType::bf16, PRound::none, DType::bf16), o, 0.125});
    o.f32_atol = 0.0625;
    o.f32_rtol = 0.03125;
    o.f32_l1 = 0.0625;
    // f32 floor with l1 = 1 and bf16 partials: 1/16 + 2/32 + 1/16 + 1/256.
    setups.push_back({"f32 floor", hand_ref({ref}, DType::f32, PRound::none, DType::bf16, 1), o,
                      0.125 + 0.0625 + 0.00390625});
    // fp8 P: + min(1/16, 6.55/32) + 1/128 on the 16-bit floor, and bf16 partials' 1/256.
    setups.push_back({"fp8 P term", hand_ref({ref}, DType::f16, PRound::fp8_running_max, DType::bf16, 1, 0.5f,
                                             0.0078125f),
                      o, 0.125 + 0.0625 + 0.0078125 + 0.00390625});
  }
  for (auto& s : setups) {
    const float ref = s.ref.out[0];
    ASSERT_EQ(allowed_error(s.ref, 0, s.o), s.allowed) << s.what;
    for (int side : {1, -1}) {
      const float at = float(ref + side * s.allowed);
      ASSERT_EQ(double(at), ref + side * s.allowed) << s.what << ": the limit is a float";
      std::vector<float> out = {at};
      CompareReport rep = compare(view_of(out, s.ref), s.ref, s.o);
      EXPECT_TRUE(rep.passed()) << s.what << ", ref " << ref << ", side " << side << ": " << rep.verdict;
      EXPECT_EQ(rep.worst_ratio, 1.0) << s.what;
      EXPECT_EQ(rep.max_abs_err, s.allowed) << s.what;
      out[0] = std::nextafter(at, side * kInf);
      rep = compare(view_of(out, s.ref), s.ref, s.o);
      EXPECT_FALSE(rep.passed()) << s.what << ", ref " << ref << ", side " << side << ": " << rep.verdict;
      EXPECT_EQ(rep.mismatches, 1) << s.what;
      EXPECT_EQ(rep.first.kind, "value") << s.what;
      EXPECT_EQ(rep.first.allowed, s.allowed) << s.what;
      EXPECT_GT(rep.worst_ratio, 1.0) << s.what;
    }
  }
}

// The same limit through a bf16 output view (the kernel's own dtype): 1 + 1/64
// is a bf16 value, and so is the next one up, 1 + 3/128.
TEST(CompareLimits, Bf16OutputAtTheLimit) {
  CompareOptions o;
  o.atol = 1.0 / 128;
  o.rtol = 1.0 / 128;
  const ReferenceResult r = hand_ref({1.0f}, DType::bf16, PRound::none, DType::bf16);
  std::vector<uint16_t> out = {kernels::f32_to_bf16(1.0f + 1.0f / 64)};
  const TensorView v = TensorView::contiguous_of(out.data(), DType::bf16, {1, 1, 1});
  ASSERT_EQ(kernels::bf16_to_f32(out[0]), 1.0f + 1.0f / 64);
  EXPECT_TRUE(compare(v, r, o).passed());
  out[0] = uint16_t(out[0] + 1);
  ASSERT_EQ(kernels::bf16_to_f32(out[0]), 1.0f + 3.0f / 128);
  EXPECT_FALSE(compare(v, r, o).passed());
}

// A row that sees no token must be exactly zero, whatever the tolerance:
// +0 and -0 pass, the smallest subnormal fails (counted as nonzero), NaN and
// inf fail (counted as non-finite). A filled row beside it keeps its bound.
TEST(CompareLimits, EmptyRowsAreExactlyZero) {
  CompareOptions loose;
  loose.atol = 1e6;
  const ReferenceResult r = hand_ref({1, 2, 0, 0}, DType::bf16, PRound::none, DType::bf16, 0, 0, 0, 2, {1});
  ASSERT_TRUE(r.row_empty(0, 1));
  ASSERT_FALSE(r.row_empty(0, 0));
  for (float z : {0.0f, -0.0f}) {
    std::vector<float> out = {1e5f, -1e5f, z, z};
    const CompareReport rep = compare(view_of(out, r), r, loose);
    EXPECT_TRUE(rep.passed()) << rep.verdict;
  }
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (float bad : {tiny, -tiny}) {
    std::vector<float> out = {1, 2, 0, bad};
    const CompareReport rep = compare(view_of(out, r), r, loose);
    EXPECT_FALSE(rep.passed());
    EXPECT_EQ(rep.nonzero_in_empty_rows, 1);
    EXPECT_EQ(rep.nonfinite, 0);
    EXPECT_EQ(rep.first.kind, "nonzero in empty row");
    EXPECT_EQ(rep.first.head, 1);
    EXPECT_EQ(rep.first.d, 1);
    EXPECT_EQ(rep.first.allowed, 0.0);
  }
  for (float bad : {kNan, kInf, -kInf}) {
    std::vector<float> out = {1, 2, bad, 0};
    const CompareReport rep = compare(view_of(out, r), r, loose);
    EXPECT_FALSE(rep.passed());
    EXPECT_EQ(rep.nonzero_in_empty_rows, 0);
    EXPECT_EQ(rep.nonfinite, 1);
    EXPECT_EQ(rep.nan, std::isnan(bad) ? 1 : 0);
    EXPECT_EQ(rep.inf, std::isinf(bad) ? 1 : 0);
  }
}

// The figures of a known error, by hand: ref (3, 4) has norm 5; out (3, 4.125)
// is 1/8 away: max abs 1/8, max rel (1/8)/4, rel l2 (1/8)/5.
TEST(CompareLimits, FiguresByHand) {
  CompareOptions o;
  o.atol = 1;
  const ReferenceResult r = hand_ref({3, 4}, DType::bf16, PRound::none, DType::bf16);
  std::vector<float> out = {3, 4.125f};
  CompareReport rep = compare(view_of(out, r), r, o);
  EXPECT_TRUE(rep.passed());
  EXPECT_EQ(rep.elements, 2);
  EXPECT_EQ(rep.max_abs_err, 0.125);
  EXPECT_EQ(rep.max_rel_err, 0.125 / 4);
  EXPECT_DOUBLE_EQ(rep.rel_l2_err, 0.125 / 5);
  EXPECT_DOUBLE_EQ(rep.worst_ratio, 0.125 / (1 + 5e-3 * 4));
  // A zero reference: the relative error is taken against 1e-6, and the
  // relative l2 of a nonzero difference is infinite.
  const ReferenceResult z = hand_ref({0, 0}, DType::bf16, PRound::none, DType::bf16);
  out = {0, 0.25f};
  rep = compare(view_of(out, z), z, o);
  EXPECT_TRUE(rep.passed());
  EXPECT_DOUBLE_EQ(rep.max_rel_err, 0.25 / 1e-6);
  EXPECT_EQ(rep.rel_l2_err, std::numeric_limits<double>::infinity());
  out = {0, 0};
  EXPECT_EQ(compare(view_of(out, z), z, o).rel_l2_err, 0.0);
}

// Kernel vs kernel: the bound is atol + rtol*|b| with b the baseline, met
// exactly at the limit; a non-finite element on either side fails, counted
// by its kind.
TEST(CompareLimits, KernelVsKernelAtTheLimitAndNonfiniteOnEitherSide) {
  auto cmp = [](std::vector<float> a, std::vector<float> b, double atol, double rtol) {
    return compare_outputs(TensorView::contiguous_of(a.data(), DType::f32, {int64_t(a.size())}),
                           TensorView::contiguous_of(b.data(), DType::f32, {int64_t(b.size())}), atol, rtol);
  };
  // atol 0, rtol 1/16: b = 16 allows 1, b = 15 allows 15/16.
  EXPECT_TRUE(cmp({15}, {16}, 0, 0.0625).passed());
  EXPECT_TRUE(cmp({17}, {16}, 0, 0.0625).passed());
  EXPECT_FALSE(cmp({std::nextafter(17.0f, 18.0f)}, {16}, 0, 0.0625).passed());
  EXPECT_FALSE(cmp({std::nextafter(15.0f, 14.0f)}, {16}, 0, 0.0625).passed());
  EXPECT_FALSE(cmp({16}, {15}, 0, 0.0625).passed());
  EXPECT_FALSE(cmp({-16}, {-15}, 0, 0.0625).passed());
  EXPECT_TRUE(cmp({-15}, {-16}, 0, 0.0625).passed());
  // atol alone: exactly 1/4 apart passes, a float more fails.
  EXPECT_TRUE(cmp({0.25f}, {0}, 0.25, 0).passed());
  EXPECT_EQ(cmp({0.25f}, {0}, 0.25, 0).worst_ratio, 1.0);
  EXPECT_FALSE(cmp({std::nextafter(0.25f, 1.0f)}, {0}, 0.25, 0).passed());
  struct Bad {
    float a, b;
    int nan, inf;
  };
  for (const Bad& w : {Bad{kNan, 1, 1, 0}, Bad{1, kNan, 1, 0}, Bad{kInf, 1, 0, 1}, Bad{1, -kInf, 0, 1},
                       Bad{kInf, kInf, 0, 1}, Bad{-kInf, -kInf, 0, 1}}) {
    const CompareReport rep = cmp({0.5f, w.a}, {0.5f, w.b}, 1e6, 0);
    EXPECT_FALSE(rep.passed()) << w.a << " vs " << w.b;
    EXPECT_EQ(rep.mismatches, 1) << w.a << " vs " << w.b;
    EXPECT_EQ(rep.nonfinite, 1) << w.a << " vs " << w.b;
    EXPECT_EQ(rep.nan, w.nan) << w.a << " vs " << w.b;
    EXPECT_EQ(rep.inf, w.inf) << w.a << " vs " << w.b;
    EXPECT_EQ(rep.first.kind, "nonfinite");
    EXPECT_EQ(rep.first.index, 1);
  }
}

}  // namespace
}  // namespace pav::reference
