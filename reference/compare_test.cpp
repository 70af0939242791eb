// SPDX-License-Identifier: Apache-2.0
// The comparison standard: each rule fails when broken and only then.
#include "reference/compare.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "reference/test_call.hpp"

namespace pav::reference {
namespace {

using kernels::DType;
using kernels::TensorView;
using testing::CallSpec;
using testing::make_call;

// A reference over a small call with empty rows (seq 1 is shorter than q_len).
struct Fixture {
  testing::OwnedCall c;
  ReferenceResult ref;
  std::vector<float> out;  // f32 output, starts as the reference's
  TensorView view() { return TensorView::contiguous_of(out.data(), DType::f32, {ref.num_seqs * ref.q_len, ref.hq, ref.head_dim}); }
};

Fixture fixture(DType compute = DType::fp8_e4m3fn) {
  CallSpec s;
  s.lens = {300, 1};
  s.q_len = 2;
  s.group = 3;
  s.hkv = 2;
  s.compute = compute;
  s.seed = 2000;
  Fixture f{make_call(s), {}, {}};
  f.ref = decode(f.c.call, {.precision = Precision::fp64});
  f.out = f.ref.out;
  return f;
}

// First element of a row that sees tokens, and one of a row that sees none.
int64_t nonempty_index(const ReferenceResult& r, int64_t qrow, int64_t head, int64_t d) { return r.index(qrow, head, d); }

TEST(ReferenceCompare, ReferenceItselfPasses) {
  Fixture f = fixture();
  const CompareReport rep = compare(f.view(), f.ref);
  EXPECT_TRUE(rep.passed()) << rep.verdict;
  EXPECT_EQ(rep.elements, int64_t(f.out.size()));
  EXPECT_EQ(rep.max_abs_err, 0.0);
  EXPECT_EQ(rep.rel_l2_err, 0.0);
  EXPECT_EQ(rep.verdict.rfind("PASS", 0), 0u) << rep.verdict;
}

TEST(ReferenceCompare, Bf16RoundedReferencePasses) {
  Fixture f = fixture();
  std::vector<uint16_t> bf(f.out.size());
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = kernels::f32_to_bf16(f.out[i]);
  const CompareReport rep = compare(
      TensorView::contiguous_of(bf.data(), DType::bf16, {f.ref.num_seqs * f.ref.q_len, f.ref.hq, f.ref.head_dim}),
      f.ref);
  EXPECT_TRUE(rep.passed()) << rep.verdict;
  EXPECT_GT(rep.max_abs_err, 0.0);
  EXPECT_LT(rep.worst_ratio, 0.5);
}

TEST(ReferenceCompare, NonfiniteIsCountedAndFails) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Fixture f = fixture();
    const int64_t i = nonempty_index(f.ref, 0, 4, 7);
    f.out[i] = bad;
    const CompareReport rep = compare(f.view(), f.ref);
    EXPECT_FALSE(rep.passed());
    EXPECT_EQ(rep.nonfinite, 1);
    EXPECT_EQ(rep.mismatches, 1);
    EXPECT_EQ(rep.first.kind, "nonfinite");
    EXPECT_EQ(rep.first.index, i);
    EXPECT_EQ(rep.verdict.rfind("FAIL", 0), 0u) << rep.verdict;
  }
}

// A NaN must fail even where the allowed error is infinite (a degenerate pq term).
TEST(ReferenceCompare, NonfiniteFailsWhateverTheTolerance) {
  Fixture f = fixture();
  f.out[5] = std::numeric_limits<float>::infinity();
  CompareOptions loose;
  loose.atol = std::numeric_limits<double>::infinity();
  const CompareReport rep = compare(f.view(), f.ref, loose);
  EXPECT_FALSE(rep.passed()) << rep.verdict;
  EXPECT_EQ(rep.nonfinite, 1);
}

TEST(ReferenceCompare, NonzeroInEmptyRowFails) {
  Fixture f = fixture();
  // seq 1 has len 1 and q_len 2: row p = 0 sees nothing.
  ASSERT_TRUE(f.ref.row_empty(2, 0));
  ASSERT_FALSE(f.ref.row_empty(3, 0));
  const int64_t i = f.ref.index(2, 5, 9);
  f.out[i] = 1e-30f;  // far inside atol, still not zero
  const CompareReport rep = compare(f.view(), f.ref);
  EXPECT_FALSE(rep.passed());
  EXPECT_EQ(rep.nonzero_in_empty_rows, 1);
  EXPECT_EQ(rep.first.kind, "nonzero in empty row");
  EXPECT_EQ(rep.first.seq, 1);
  EXPECT_EQ(rep.first.pos, 0);
  EXPECT_EQ(rep.first.head, 5);
  EXPECT_EQ(rep.first.d, 9);
  // Negative zero is zero.
  f.out[i] = -0.0f;
  EXPECT_TRUE(compare(f.view(), f.ref).passed());
}

// The score term of a row: 16u times its largest |logit| times pq_l1.
double score_term(const ReferenceResult& r, int64_t i) {
  return kScoreTerm * double(r.score_max[size_t(i / r.head_dim)]) * r.pq_l1[size_t(i)];
}

// Under bf16 compute the bound is atol + rtol*|ref|, the bf16 partials' 2^-8 l1
// and the (here tiny) score term, exactly.
TEST(ReferenceCompare, PlainStandardEdge) {
  Fixture f = fixture(DType::bf16);
  ASSERT_EQ(f.ref.profile.p_round, PRound::none);
  ASSERT_EQ(f.ref.profile.partial, DType::bf16);
  const int64_t i = f.ref.index(1, 2, 3);
  const double ref = f.ref.out[i];
  EXPECT_LT(score_term(f.ref, i), 1e-4);
  const double allowed = 5e-3 + 5e-3 * std::fabs(ref) + f.ref.pq_l1[i] / 256 + score_term(f.ref, i);
  EXPECT_DOUBLE_EQ(allowed_error(f.ref, i, {}), allowed);
  f.out[i] = float(ref + 0.98 * allowed);
  EXPECT_TRUE(compare(f.view(), f.ref).passed());
  f.out[i] = float(ref - 1.02 * allowed);
  const CompareReport rep = compare(f.view(), f.ref);
  EXPECT_FALSE(rep.passed());
  EXPECT_EQ(rep.first.kind, "value");
  EXPECT_EQ(rep.first.index, i);
  EXPECT_EQ(rep.first.seq, 0);
  EXPECT_EQ(rep.first.pos, 1);
  EXPECT_EQ(rep.first.head, 2);
  EXPECT_EQ(rep.first.d, 3);
  EXPECT_NEAR(rep.first.allowed, allowed, 1e-15);
  EXPECT_NEAR(rep.worst_ratio, 1.02, 1e-4);
}

// Under fp8 compute the P-quantization term widens the bound by
// min(u*l1, 6.55*u*l2) + sub, u = 2^-4; and only when p_error_model is on.
TEST(ReferenceCompare, Fp8StandardAddsPqTerm) {
  Fixture f = fixture(DType::fp8_e4m3fn);
  ASSERT_EQ(f.ref.profile.p_round, PRound::fp8_running_max);
  const int64_t i = f.ref.index(1, 2, 3);
  const double ref = f.ref.out[i];
  const double l1 = f.ref.pq_l1[i], l2 = f.ref.pq_l2[i], sub = f.ref.pq_sub[i];
  ASSERT_GT(l1, 0.0);
  const double pq = std::min(0.0625 * l1, 6.55 * 0.0625 * l2) + sub;
  const double allowed = 5e-3 + 5e-3 * std::fabs(ref) + pq + l1 / 256 + score_term(f.ref, i);  // bf16 partials
  EXPECT_NEAR(allowed_error(f.ref, i, {}), allowed, 1e-12);
  EXPECT_GT(pq, 1e-3);  // large enough here to matter
  f.out[i] = float(ref + 0.98 * allowed);
  EXPECT_TRUE(compare(f.view(), f.ref).passed());
  f.out[i] = float(ref + 1.02 * allowed);
  EXPECT_FALSE(compare(f.view(), f.ref).passed());
  // Without the model, the plain bound applies.
  f.out[i] = float(ref + 1.02 * (allowed - pq));
  CompareOptions plain;
  plain.p_error_model = false;
  EXPECT_FALSE(compare(f.view(), f.ref, plain).passed());
  EXPECT_TRUE(compare(f.view(), f.ref).passed());
}

// Long contexts make the Hoeffding form the smaller of the two.
TEST(ReferenceCompare, HoeffdingFormWinsOnSpreadWeights) {
  CallSpec s;
  s.lens = {3000};
  s.k_amp = 0.2f;  // nearly flat attention
  s.seed = 2100;
  const auto c = make_call(s);
  const ReferenceResult r = decode(c.call, {.precision = Precision::fp64});
  int64_t hoeffding_smaller = 0;
  for (size_t i = 0; i < r.out.size(); ++i) hoeffding_smaller += kHoeffding * r.pq_l2[i] < r.pq_l1[i];
  EXPECT_EQ(hoeffding_smaller, int64_t(r.out.size()));
}

TEST(ReferenceCompare, StridedOutputView) {
  Fixture f = fixture();
  const int64_t rows = f.ref.num_seqs * f.ref.q_len, hq = f.ref.hq, D = f.ref.head_dim, pad = 8;
  std::vector<uint16_t> buf(rows * hq * (D + pad), kernels::f32_to_bf16(std::numeric_limits<float>::quiet_NaN()));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t d = 0; d < D; ++d)
        buf[(r * hq + h) * (D + pad) + d] = kernels::f32_to_bf16(f.ref.out[f.ref.index(r, h, d)]);
  TensorView v = TensorView::contiguous_of(buf.data(), DType::bf16, {rows, hq, D});
  v.stride = {hq * (D + pad), D + pad, 1};
  const CompareReport rep = compare(v, f.ref);
  EXPECT_TRUE(rep.passed()) << rep.verdict;  // the NaN padding is never read
}

TEST(ReferenceCompare, ShapeMismatchThrows) {
  Fixture f = fixture();
  TensorView v = f.view();
  v.shape[1] -= 1;
  EXPECT_THROW(compare(v, f.ref), std::invalid_argument);
  ReferenceResult no_terms = decode(f.c.call, {.error_terms = false});
  EXPECT_THROW(compare(f.view(), no_terms), std::invalid_argument);  // P rounded
  CompareOptions plain;
  plain.p_error_model = false;
  EXPECT_THROW(compare(f.view(), no_terms, plain), std::invalid_argument);  // bf16 partials
  no_terms.profile.partial = DType::f32;
  EXPECT_NO_THROW(compare(f.view(), no_terms, plain));
}

TEST(ReferenceCompare, FiguresOfAKnownError) {
  Fixture f = fixture();
  // Add 0.01 to one element: max abs 0.01, relative l2 = 0.01 / ||ref||.
  const int64_t i = f.ref.index(0, 0, 0);
  f.out[i] += 0.01f;
  const double delta = double(f.out[i]) - double(f.ref.out[i]);
  double n2 = 0;
  for (float x : f.ref.out) n2 += double(x) * x;
  const CompareReport rep = compare(f.view(), f.ref);
  EXPECT_NEAR(rep.max_abs_err, std::fabs(delta), 1e-12);
  EXPECT_NEAR(rep.rel_l2_err, std::fabs(delta) / std::sqrt(n2), 1e-9);
  EXPECT_NEAR(rep.max_rel_err, std::fabs(delta) / std::max(std::fabs(double(f.ref.out[i])), 1e-6), 1e-6);
}

// NaN and inf are both failures and are counted apart, in filled and in
// empty rows, and +inf and -inf alike.
TEST(ReferenceCompare, NanAndInfAreCountedApart) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Fixture f = fixture();
  ASSERT_TRUE(f.ref.row_empty(2, 0));
  f.out[f.ref.index(0, 1, 2)] = nan;
  f.out[f.ref.index(1, 0, 0)] = inf;
  f.out[f.ref.index(3, 2, 5)] = -inf;
  f.out[f.ref.index(2, 0, 4)] = nan;  // in a row that sees no token
  const CompareReport rep = compare(f.view(), f.ref);
  EXPECT_FALSE(rep.passed());
  EXPECT_EQ(rep.nan, 2);
  EXPECT_EQ(rep.inf, 2);
  EXPECT_EQ(rep.nonfinite, 4);
  EXPECT_EQ(rep.nonzero_in_empty_rows, 0);  // a NaN there is a non-finite element, not a nonzero one
  EXPECT_EQ(rep.mismatches, 4);
  EXPECT_EQ(rep.first.index, f.ref.index(0, 1, 2));
  EXPECT_NE(rep.verdict.find("2 NaN, 2 inf"), std::string::npos) << rep.verdict;
  // The same through the kernel-vs-kernel check, on either side.
  std::vector<float> a = {1, 2, 3, 4}, b = a;
  a[1] = nan;
  b[2] = -inf;
  const CompareReport ab = compare_outputs(TensorView::contiguous_of(a.data(), DType::f32, {4}),
                                           TensorView::contiguous_of(b.data(), DType::f32, {4}));
  EXPECT_EQ(ab.nan, 1);
  EXPECT_EQ(ab.inf, 1);
  EXPECT_EQ(ab.mismatches, 2);
}

// A reference that is NaN or inf where the row sees tokens cannot judge
// anything: compare refuses, says which and where, and never passes or
// silently fails the kernel.
TEST(ReferenceCompare, NonfiniteReferenceIsRefused) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    Fixture f = fixture();
    const int64_t i = f.ref.index(3, 1, 6);  // seq 1, pos 1: sees one token
    f.ref.out[i] = bad;
    f.out[i] = bad;  // even a kernel agreeing with it does not pass
    try {
      compare(f.view(), f.ref);
      ADD_FAILURE() << "a non-finite reference was judged";
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::isnan(bad) ? "is NaN" : "is inf"), std::string::npos) << m;
      EXPECT_NE(m.find("[seq 1, pos 1, head 1, d 6]"), std::string::npos) << m;
    }
  }
  // Empty rows are 0 with lse -inf: that -inf is the contract, not a fault.
  Fixture f = fixture();
  ASSERT_TRUE(std::isinf(f.ref.lse[2 * f.ref.hq]));
  EXPECT_TRUE(compare(f.view(), f.ref).passed());
}

// A NaN byte inside the context (the caller's fault, not the kernel's) makes
// the reference NaN there, and compare says so instead of blaming the kernel.
TEST(ReferenceCompare, NanInsideTheContextIsRefused) {
  CallSpec s;
  s.lens = {40};
  s.seed = 2200;
  auto c = testing::make_call(s);
  c.v[c.v_at(c.block_of(0, 5), 0, 3, 5)] = testing::fp8_nan(s.cache);
  const ReferenceResult ref = decode(c.call);
  std::vector<float> out(ref.out.size(), 0.0f);
  EXPECT_THROW(compare(TensorView::contiguous_of(out.data(), DType::f32, {1, ref.hq, ref.head_dim}), ref),
               std::invalid_argument);
}

// compare refuses a reference it cannot judge by, naming what is wrong.
TEST(ReferenceCompare, RefusesWhatItCannotJudge) {
  auto expect_refused = [](const TensorView& v, const ReferenceResult& r, const char* needle,
                           const CompareOptions& o = {}) {
    try {
      compare(v, r, o);
      ADD_FAILURE() << "accepted; expected a refusal naming " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  {
    Fixture f = fixture();
    f.ref.profile.partial = DType::i32;
    expect_refused(f.view(), f.ref, "partial");
  }
  {
    Fixture f = fixture();
    f.ref.out_dtype = DType::fp8_e4m3fn;
    expect_refused(f.view(), f.ref, "output dtype fp8_e4m3fn");
  }
  {
    Fixture f = fixture();
    f.ref.lse.pop_back();
    expect_refused(f.view(), f.ref, "arrays");
  }
  {
    Fixture f = fixture();
    TensorView v = f.view();
    v.dtype = DType::i32;
    expect_refused(v, f.ref, "output dtype i32");
  }
  {
    Fixture f = fixture();
    TensorView v = f.view();
    v.stride[1] = -v.stride[1];
    expect_refused(v, f.ref, "negative stride");
  }
  {
    Fixture f = fixture();
    TensorView v = f.view();
    v.data = nullptr;  // no buffer behind the view
    expect_refused(v, f.ref, "missing output view");
  }
  // An f32 output's floor needs the error scales even when P is not rounded,
  // and so do partials narrower than f32 with any output.
  {
    Fixture f = fixture(DType::bf16);
    ReferenceResult no_terms = decode(f.c.call, {.error_terms = false});
    expect_refused(f.view(), no_terms, "partials stored as bf16 needs a reference run with error_terms");
    no_terms.profile.partial = DType::f32;
    EXPECT_NO_THROW(compare(f.view(), no_terms));
    no_terms.out_dtype = DType::f32;
    expect_refused(f.view(), no_terms, "an f32 output needs a reference run with error_terms");
  }
  {
    Fixture f = fixture();
    ReferenceResult no_terms = decode(f.c.call, {.error_terms = false});
    expect_refused(f.view(), no_terms, "P rounded as fp8_running_max needs a reference run with error_terms");
  }
}

// Each of the reference's dims below its range is refused on its own, even with
// its arrays sized to the product of the dims (so no size check can stand in).
// The per-row arrays a reference carries (which rows see a token, the ALiBi
// bias) must match its rows, or compare cannot say what it judged.
TEST(ReferenceCompare, RefusesPerRowArraysOfAnotherSize) {
  for (const bool bias : {false, true}) {
    Fixture f = fixture();
    ASSERT_NO_THROW(compare(f.view(), f.ref));
    ASSERT_FALSE(f.ref.seen.empty());
    if (bias) f.ref.bias_max.assign(f.ref.lse.size() + 1, 0.0f);
    else f.ref.seen.pop_back();
    EXPECT_THROW(compare(f.view(), f.ref), std::invalid_argument) << (bias ? "bias_max" : "seen");
  }
}

TEST(ReferenceCompare, RefusesEachDimOutOfRangeAlone) {
  struct Bad {
    const char* what;
    std::function<void(ReferenceResult&)> set;
  };
  const std::vector<Bad> bad = {
      {"num_seqs -1", [](ReferenceResult& r) { r.num_seqs = -1; }},
      {"q_len 0", [](ReferenceResult& r) { r.q_len = 0; }},
      {"q_len -1", [](ReferenceResult& r) { r.q_len = -1; }},
      {"hq 0", [](ReferenceResult& r) { r.hq = 0; }},
      {"hq -1", [](ReferenceResult& r) { r.hq = -1; }},
      {"head_dim 0", [](ReferenceResult& r) { r.head_dim = 0; }},
      {"head_dim -1", [](ReferenceResult& r) { r.head_dim = -1; }},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.what);
    Fixture f = fixture();
    ASSERT_NO_THROW(compare(f.view(), f.ref));
    b.set(f.ref);
    const int64_t rows = std::max<int64_t>(0, f.ref.num_seqs * f.ref.q_len * f.ref.hq);
    const size_t elems = size_t(std::max<int64_t>(0, rows * f.ref.head_dim));
    for (auto* a : {&f.ref.out, &f.ref.pq_l1, &f.ref.pq_l2, &f.ref.pq_sub}) a->resize(elems);
    // Every per-row array follows the dims, so the dim alone is wrong.
    f.ref.lse.resize(size_t(rows));
    f.ref.seen.resize(size_t(rows));
    if (!f.ref.score_max.empty()) f.ref.score_max.resize(size_t(rows));
    if (!f.ref.bias_max.empty()) f.ref.bias_max.resize(size_t(rows));
    try {
      compare(f.view(), f.ref);
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("do not match its [num_seqs*q_len, Hq, D] dims"), std::string::npos)
          << e.what();
    }
  }
}

// An output view of any other shape than the reference's [num_seqs*q_len, Hq, D]
// is refused: each dim one short and one over, alone, and another rank.
TEST(ReferenceCompare, RefusesAnOutputOfAnyOtherShape) {
  Fixture f = fixture();
  ASSERT_NO_THROW(compare(f.view(), f.ref));
  std::vector<TensorView> others;
  for (int d = 0; d < 3; ++d)
    for (int64_t delta : {-1, 1}) {
      TensorView v = f.view();
      v.shape[d] += delta;
      others.push_back(v);
    }
  TensorView rank4 = f.view();  // the same elements as [rows, Hq, D, 1]
  rank4.rank = 4;
  rank4.shape[3] = 1;
  rank4.stride[3] = 1;
  others.push_back(rank4);
  for (const TensorView& v : others) {
    SCOPED_TRACE(v.shape_string());
    try {
      (void)compare(v, f.ref);
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("output shape " + v.shape_string() + " differs"), std::string::npos)
          << e.what();
    }
  }
}

TEST(ReferenceCompareOutputs, KernelVsKernel) {
  std::vector<float> a = {1.0f, -2.0f, 0.5f, 0.0f, 3.0f, 4.0f};
  std::vector<float> b = a;
  auto va = TensorView::contiguous_of(a.data(), DType::f32, {1, 2, 3});
  auto vb = TensorView::contiguous_of(b.data(), DType::f32, {1, 2, 3});
  EXPECT_TRUE(compare_outputs(va, vb).passed());
  a[4] = 3.0f + 0.0201f;  // allowed 5e-3 + 5e-3*3 = 0.02
  CompareReport rep = compare_outputs(va, vb);
  EXPECT_FALSE(rep.passed());
  EXPECT_EQ(rep.first.index, 4);
  EXPECT_EQ(rep.first.head, 1);
  EXPECT_EQ(rep.first.d, 1);
  a[4] = 3.0f + 0.0199f;
  EXPECT_TRUE(compare_outputs(va, vb).passed());
  b[0] = std::numeric_limits<float>::quiet_NaN();
  rep = compare_outputs(va, vb);
  EXPECT_FALSE(rep.passed());
  EXPECT_EQ(rep.nonfinite, 1);
  EXPECT_EQ(rep.first.kind, "nonfinite");
  auto vc = TensorView::contiguous_of(b.data(), DType::f32, {2, 3});
  EXPECT_THROW(compare_outputs(va, vc), std::invalid_argument);
}

// A comparison passes only when it compared something and nothing failed: no
// element compared (an empty output, a kernel that wrote nothing) is not a pass.
TEST(ReferenceCompare, PassesOnlyWithElementsAndNoMismatch) {
  CompareReport r;
  EXPECT_FALSE(r.passed()) << "nothing compared";
  r.elements = 1;
  EXPECT_TRUE(r.passed());
  r.mismatches = 1;
  EXPECT_FALSE(r.passed());
  r.elements = 0;
  r.mismatches = 0;
  EXPECT_FALSE(r.passed());
}

}  // namespace
}  // namespace pav::reference
