// SPDX-License-Identifier: Apache-2.0
// The reference's attention variants (sliding window, logit soft cap, ALiBi,
// attention sinks) against a plain long-double model written from the
// convention in kernels/call.hpp: one row at a time, one token at a time, no
// chunks and no online softmax. Plus the identities that tie each variant to
// plain attention, and the comparison standard's ALiBi term.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "reference/compare.hpp"
#include "reference/decode.hpp"
#include "reference/test_call.hpp"

namespace {

using namespace pav;
using namespace pav::reference;
using namespace pav::reference::testing;
using kernels::DType;
using kernels::TensorView;

struct Variant {
  int32_t window = -1;
  float cap = 0.0f;
  std::vector<float> sinks, slopes;  // empty: none
  std::string name() const {
    return "window " + std::to_string(window) + " cap " + std::to_string(cap) + (sinks.empty() ? "" : " sinks") +
           (slopes.empty() ? "" : " alibi");
  }
};

// Views of the variant's per-head tensors into v (which must outlive the call).
void apply(OwnedCall& c, Variant& v) {
  c.call.variant = {};
  c.call.variant.window_left = v.window;
  c.call.variant.soft_cap = v.cap;
  if (!v.sinks.empty())
    c.call.variant.sinks = TensorView::contiguous_of(v.sinks.data(), DType::f32, {int64_t(v.sinks.size())});
  if (!v.slopes.empty())
    c.call.variant.alibi_slopes = TensorView::contiguous_of(v.slopes.data(), DType::f32, {int64_t(v.slopes.size())});
}

struct Model {
  std::vector<long double> out, lse;
  std::vector<bool> seen;
};

// The convention, as plainly as it can be written: row (b, p, head) at
// position pos = L - q_len + p sees keys lo..pos (lo = pos - window or 0);
// x = cap*tanh(scale*q.k/cap) - slope*(pos - t); the sink joins the denominator.
Model model(const OwnedCall& c, const Variant& v) {
  const CallSpec& s = c.spec;
  const int64_t B = int64_t(s.lens.size()), D = s.head_dim, G = s.group, hq = c.hq(), bs = s.block_size;
  const long double scale = s.softmax_scale != 0.0f ? s.softmax_scale : 1.0L / std::sqrt((long double)D);
  auto kval = [&](int64_t blk, int64_t h, int64_t d, int64_t off) -> long double {
    long double x = kernels::fp8_to_f32(c.k[c.k_at(blk, h, d, off)], s.cache);
    if (s.scales == Scales::tensor) x *= c.ks[0];
    if (s.scales == Scales::token) x *= c.ks[c.scale_at(blk, h, off)];
    return x;
  };
  auto vval = [&](int64_t blk, int64_t h, int64_t d, int64_t off) -> long double {
    long double x = kernels::fp8_to_f32(c.v[c.v_at(blk, h, d, off)], s.cache);
    if (s.scales == Scales::tensor) x *= c.vs[0];
    if (s.scales == Scales::token) x *= c.vs[c.scale_at(blk, h, off)];
    return x;
  };
  Model m;
  m.out.assign(size_t(B * s.q_len * hq * D), 0.0L);
  m.lse.assign(size_t(B * s.q_len * hq), -std::numeric_limits<long double>::infinity());
  m.seen.assign(m.lse.size(), false);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < s.q_len; ++p)
      for (int64_t head = 0; head < hq; ++head) {
        const int64_t h = head / G, qrow = b * s.q_len + p, row = qrow * hq + head;
        const int64_t pos = s.lens[size_t(b)] - s.q_len + p;
        const int64_t lo = v.window >= 0 ? std::max<int64_t>(0, pos - v.window) : 0;
        std::vector<long double> x;
        for (int64_t t = lo; t <= pos; ++t) {
          const int64_t blk = c.block_of(b, t), off = t % bs;
          long double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += (long double)c.q_value(qrow, head, d) * kval(blk, h, d, off);
          long double xt = dot * scale;
          if (v.cap > 0) xt = (long double)v.cap * std::tanh(xt / (long double)v.cap);
          if (!v.slopes.empty()) xt -= (long double)v.slopes[size_t(head)] * (long double)(pos - t);
          x.push_back(xt);
        }
        long double M = -std::numeric_limits<long double>::infinity();
        for (long double xt : x) M = std::max(M, xt);
        if (!v.sinks.empty()) M = std::max(M, (long double)v.sinks[size_t(head)]);
        if (std::isinf(M)) continue;
        long double den = 0;
        for (long double xt : x) den += std::exp(xt - M);
        if (!v.sinks.empty()) den += std::exp((long double)v.sinks[size_t(head)] - M);
        m.lse[size_t(row)] = M + std::log(den);
        m.seen[size_t(row)] = !x.empty();
        for (size_t i = 0; i < x.size(); ++i) {
          const int64_t t = lo + int64_t(i), blk = c.block_of(b, t), off = t % bs;
          const long double w = std::exp(x[i] - M) / den;
          for (int64_t d = 0; d < D; ++d) m.out[size_t(row * D + d)] += w * vval(blk, h, d, off);
        }
      }
  return m;
}

ReferenceResult run(const OwnedCall& c, Precision p) {
  ReferenceOptions o;
  o.precision = p;
  o.chunk_tokens = 48;     // several chunks per sequence: the window and
  o.segment_tokens = 160;  // the sinks must survive the online merge
  return decode(c.call, NumericsProfile{QQuant::none, PRound::none, DType::f32}, o);
}

void expect_matches(const OwnedCall& c, const Variant& v, Precision p) {
  const Model m = model(c, v);
  const ReferenceResult r = run(c, p);
  // fp64 computes in double but stores out in float: two float roundings.
  const double tol = p == Precision::fp64 ? 1.2e-7 : 2e-5, lse_tol = p == Precision::fp64 ? 1e-9 : 2e-5;
  int64_t bad = 0;
  for (size_t i = 0; i < m.out.size(); ++i) {
    const double want = double(m.out[i]);
    if (!(std::fabs(double(r.out[i]) - want) <= tol * (1 + std::fabs(want))) && bad++ < 3)
      ADD_FAILURE() << v.name() << ": out[" << i << "] = " << r.out[i] << ", model " << want;
  }
  for (size_t i = 0; i < m.lse.size(); ++i) {
    const double want = double(m.lse[i]);
    const bool ok = std::isinf(want) ? (std::isinf(r.lse[i]) && r.lse[i] < 0)
                                     : std::fabs(r.lse[i] - want) <= lse_tol * (1 + std::fabs(want));
    if (!ok && bad++ < 6) ADD_FAILURE() << v.name() << ": lse[" << i << "] = " << r.lse[i] << ", model " << want;
    EXPECT_EQ(r.row_empty(int64_t(i) / c.hq(), int64_t(i) % c.hq()), !m.seen[i]) << v.name() << " row " << i;
  }
  EXPECT_EQ(bad, 0) << v.name();
}

OwnedCall small_call(std::vector<int32_t> lens, int64_t q_len, uint64_t seed) {
  OwnedCall c;
  c.spec.lens = std::move(lens);
  c.spec.q_len = q_len;
  c.spec.hkv = 2;
  c.spec.group = 2;
  c.spec.head_dim = 32;
  c.spec.scales = Scales::token;
  c.spec.compute = DType::bf16;
  c.spec.seed = seed;
  build(c);
  return c;
}

// Every variant alone and together, the window at each of its edges (0, 1,
// L-1, L, L+1 and far past L), q_len 1 and 3, sinks dominant, negligible and
// mixed, caps from 1 to 50, at fp32 and fp64.
TEST(ReferenceVariant, MatchesAPlainModelAtEveryEdge) {
  const int64_t hq = 4;
  for (const int64_t q_len : {1, 3}) {
    const int32_t L = 200;
    OwnedCall c = small_call({L, 1, 0, 37}, q_len, 7 + uint64_t(q_len));
    std::vector<Variant> vs;
    for (int32_t w : {0, 1, L - 1, L, L + 1, 100000, 17}) vs.push_back({w, 0.0f, {}, {}});
    for (float cap : {1.0f, 5.0f, 50.0f}) vs.push_back({-1, cap, {}, {}});
    vs.push_back({-1, 0.0f, std::vector<float>(hq, 50.0f), {}});
    vs.push_back({-1, 0.0f, std::vector<float>(hq, -50.0f), {}});
    vs.push_back({-1, 0.0f, {0.5f, -1.0f, 3.0f, 0.0f}, {}});
    vs.push_back({-1, 0.0f, {}, {0.5f, 0.25f, 0.125f, 0.0625f}});
    vs.push_back({-1, 0.0f, {}, {1.0f, 0.001f, 0.3f, 0.7f}});
    vs.push_back({3, 2.0f, {1.0f, 2.0f, -3.0f, 0.0f}, {0.5f, 0.25f, 0.125f, 0.0625f}});
    vs.push_back({60, 30.0f, std::vector<float>(hq, 4.0f), {0.01f, 0.02f, 0.03f, 0.04f}});
    for (Variant& v : vs) {
      apply(c, v);
      for (const Precision p : {Precision::fp32, Precision::fp64}) expect_matches(c, v, p);
    }
  }
}

// A larger softmax scale makes the cap bite: logits well past the cap.
TEST(ReferenceVariant, CapsLogitsFarPastTheCap) {
  OwnedCall c = small_call({90, 33}, 2, 3);
  c.spec.softmax_scale = 4.0f;
  c.call.opt.softmax_scale = 4.0f;
  Variant v{-1, 3.0f, {}, {}};
  apply(c, v);
  expect_matches(c, v, Precision::fp64);
  expect_matches(c, v, Precision::fp32);
}

// Identities: a window that covers the context and zero slopes change nothing,
// bit for bit; a sink scales a row by exp(lse - lse_sink) and adds
// log(1 + exp(sink - lse)) to its lse; rows that see no token stay 0 and take
// the sink as their lse.
TEST(ReferenceVariant, IdentitiesThatTieEachVariantToPlainAttention) {
  OwnedCall c = small_call({150, 0, 64}, 2, 21);
  const ReferenceResult plain = run(c, Precision::fp64);
  for (int32_t w : {149, 150, 5000}) {
    Variant v{w, 0.0f, {}, {}};
    apply(c, v);
    EXPECT_EQ(run(c, Precision::fp64).out, plain.out) << "window " << w;
  }
  Variant zero{-1, 0.0f, {}, {0.0f, 0.0f, 0.0f, 0.0f}};
  apply(c, zero);
  EXPECT_EQ(run(c, Precision::fp64).out, plain.out);
  Variant sink{-1, 0.0f, {2.0f, -1.0f, 0.0f, 6.0f}, {}};
  apply(c, sink);
  const ReferenceResult with = run(c, Precision::fp64);
  for (int64_t row = 0; row < plain.rows(); ++row) {
    const double s = sink.sinks[size_t(row % c.hq())];
    const double l0 = plain.lse[size_t(row)], l1 = with.lse[size_t(row)];
    if (std::isinf(l0)) {
      EXPECT_EQ(l1, s) << "row " << row << " sees no token: its lse is the sink";
      EXPECT_TRUE(with.row_empty(row / c.hq(), row % c.hq()));
      for (int64_t d = 0; d < plain.head_dim; ++d) EXPECT_EQ(with.out[size_t(row * plain.head_dim + d)], 0.0f);
      continue;
    }
    EXPECT_NEAR(l1, std::max(l0, s) + std::log1p(std::exp(-std::fabs(l0 - s))), 1e-12);
    for (int64_t d = 0; d < plain.head_dim; ++d) {
      const double want = plain.out[size_t(row * plain.head_dim + d)] * std::exp(l0 - l1);
      EXPECT_NEAR(with.out[size_t(row * plain.head_dim + d)], want, 1e-6 * (1 + std::fabs(want)));
    }
  }
}

// Bad variant values are refused by name, never computed.
TEST(ReferenceVariant, RefusesWhatItCannotCompute) {
  OwnedCall c = small_call({40}, 1, 5);
  auto refused = [&](Variant v, const std::string& why) {
    apply(c, v);
    try {
      run(c, Precision::fp32);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({-2, 0.0f, {}, {}}, "variant.window_left = -2");
  refused({-1, -1.0f, {}, {}}, "variant.soft_cap");
  refused({-1, std::numeric_limits<float>::infinity(), {}, {}}, "variant.soft_cap");
  refused({-1, 0.0f, {1.0f, 2.0f}, {}}, "variant.sinks must be [Hq] f32");
  refused({-1, 0.0f, {}, {1.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f, 0.0f}}, "variant.alibi_slopes[1] is not finite");
}

// The standard's ALiBi term: 4u * B * l1, B = |slope| times the farthest visible
// distance; absent without slopes (the standard is unchanged for every other call).
TEST(ReferenceVariant, TheAlibiTermFollowsTheFarthestVisibleKey) {
  OwnedCall c = small_call({300, 5}, 1, 9);
  ReferenceOptions o;
  const ReferenceResult plain = decode(c.call, NumericsProfile{QQuant::none, PRound::none, DType::f32}, o);
  EXPECT_TRUE(plain.bias_max.empty());
  Variant v{99, 0.0f, {}, {0.5f, 0.25f, 2.0f, 1.0f}};
  apply(c, v);
  const ReferenceResult r = decode(c.call, NumericsProfile{QQuant::none, PRound::none, DType::f32}, o);
  ASSERT_EQ(int64_t(r.bias_max.size()), r.rows());
  EXPECT_EQ(r.bias_max[2], 2.0f * 99);  // sequence 0, head 2: the window's far edge
  EXPECT_EQ(r.bias_max[4 + 3], 1.0f * 4);  // sequence 1 (length 5), head 3
  CompareOptions co;
  for (const int64_t i : {int64_t(2 * r.head_dim + 5), int64_t(7 * r.head_dim)}) {
    ReferenceResult no_term = r;
    no_term.bias_max.clear();
    EXPECT_NEAR(allowed_error(r, i, co) - allowed_error(no_term, i, co),
                kAlibiTerm * double(r.bias_max[size_t(i / r.head_dim)]) * r.pq_l1[size_t(i)], 1e-15);
  }
}

}  // namespace
