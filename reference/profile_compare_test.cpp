// SPDX-License-Identifier: Apache-2.0
// The comparison standard follows the declared numerics profile: a kernel
// that rounds as it declares passes, the same kernel declaring less rounding
// than it does fails where the difference is visible, and the output dtype
// sets the floor. The kernels here are test_kernel.hpp's plain loops, not the
// reference with a flag.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "kernels/numerics_profile.hpp"
#include "reference/compare.hpp"
#include "reference/decode.hpp"
#include "reference/test_call.hpp"
#include "reference/test_kernel.hpp"

namespace pav::reference {
namespace {

using kernels::DType;
using testing::CallSpec;
using testing::KernelNumerics;
using testing::KernelOutput;
using testing::KernelP;
using testing::make_call;
using testing::run_kernel;

PRound declared(KernelP p) {
  switch (p) {
    case KernelP::fp8: return PRound::fp8_running_max;
    case KernelP::bf16: return PRound::bf16;
    case KernelP::f16: return PRound::f16;
    case KernelP::none: return PRound::none;
    case KernelP::fp8_unscaled: return PRound::fp8;
  }
  return PRound::none;
}
const char* name(KernelP p) { return std::string_view(to_string(declared(p))).data(); }

// The kernel as it declares itself.
NumericsProfile honest(const KernelNumerics& k) {
  return {k.q_fp8 ? QQuant::fp8_per_row : QQuant::none, declared(k.p),
          k.split_tokens > 0 ? k.partial : DType::none};
}

// Runs the kernel, sets the call's output dtype to the kernel's, runs the
// reference for `profile` and compares.
CompareReport judge(testing::OwnedCall& c, const KernelNumerics& k, const NumericsProfile& profile) {
  KernelOutput out = run_kernel(c, k);
  c.call.out.dtype = k.out;  // the contract: the kernel writes this dtype
  const ReferenceResult ref = decode(c.call, profile);
  EXPECT_EQ(ref.out_dtype, k.out);
  return compare(out.view(), ref);
}
CompareReport judge(const CallSpec& spec, const KernelNumerics& k, const NumericsProfile& profile) {
  auto c = make_call(spec);
  return judge(c, k, profile);
}

std::string describe(const CallSpec& s, const KernelNumerics& k, const NumericsProfile& p) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "seed %llu kernel q_fp8=%d p=%s split=%lld partial=%s out=%s declared %s",
                (unsigned long long)s.seed, int(k.q_fp8), name(k.p), (long long)k.split_tokens,
                std::string(kernels::to_string(k.partial)).c_str(), std::string(kernels::to_string(k.out)).c_str(),
                to_string(p).c_str());
  return buf;
}

// Calls with peaked and flat rows, MTP, GQA, per-token scales and an empty row.
std::vector<CallSpec> specs() {
  std::vector<CallSpec> v;
  CallSpec a;
  a.lens = {300, 17, 1};
  a.q_len = 2;
  a.group = 3;
  a.hkv = 2;
  a.scales = testing::Scales::token;
  a.seed = 7001;
  v.push_back(a);
  CallSpec b;
  b.lens = {1500};
  b.k_amp = 0.5f;  // flat attention over many tokens
  b.layout = kernels::VLayout::trans;
  b.block_size = 64;
  b.seed = 7002;
  v.push_back(b);
  CallSpec c;
  c.lens = {90, 250};
  c.cache = c.compute = DType::fp8_e4m3fnuz;
  c.q_dtype = DType::f16;
  c.k_amp = 4.0f;  // peaked attention
  c.head_dim = 128;
  c.seed = 7003;
  v.push_back(c);
  return v;
}

// The specs whose rows are short or peaked enough for a rounding difference to
// show: over a long flat row independent rounding errors average out.
std::vector<CallSpec> visible_specs() {
  std::vector<CallSpec> v = specs();
  v.erase(v.begin() + 1);
  return v;
}

// The test kernel at its smallest partition, one token: each partial is a V
// value itself (an fp8 value, unscaled here), which bf16 and f16 hold exactly,
// so the partial dtype changes no output bit. At two tokens a partial is an
// average, and its rounding shows.
TEST(ProfileStandard, OneTokenPartialsAreStoredExactly) {
  CallSpec s;
  s.lens = {40, 7};
  s.scales = testing::Scales::none;
  s.seed = 7004;
  auto c = make_call(s);
  auto run = [&](KernelP p, int64_t split, DType partial) {
    return run_kernel(c, {.q_fp8 = false, .p = p, .split_tokens = split, .partial = partial, .out = DType::f32}).f32;
  };
  for (KernelP p : {KernelP::fp8, KernelP::none}) {
    SCOPED_TRACE(name(p));
    const std::vector<float> exact = run(p, 1, DType::f32);
    for (DType partial : {DType::bf16, DType::f16}) {
      const std::vector<float> got = run(p, 1, partial);
      ASSERT_EQ(got.size(), exact.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(kernels::f32_bits(got[i]), kernels::f32_bits(exact[i])) << to_string(partial) << " at " << i;
    }
    EXPECT_NE(run(p, 2, DType::bf16), run(p, 2, DType::f32));
  }
}

TEST(ProfileStandard, HonestKernelsPassUnderTheirProfile) {
  int64_t runs = 0;
  for (const CallSpec& s : specs()) {
    auto c = make_call(s);
    for (KernelP p : {KernelP::fp8, KernelP::bf16, KernelP::f16, KernelP::none, KernelP::fp8_unscaled})
      for (bool q_fp8 : {true, false})
        for (DType out : {DType::bf16, DType::f16, DType::f32})
          for (auto [split, partial] : {std::pair{int64_t(0), DType::bf16}, std::pair{int64_t(64), DType::bf16},
                                        std::pair{int64_t(100), DType::f16}, std::pair{int64_t(64), DType::f32},
                                        std::pair{int64_t(48), DType::fp8_e4m3fn}}) {
            const KernelNumerics k{.q_fp8 = q_fp8, .p = p, .split_tokens = split, .partial = partial, .out = out};
            const NumericsProfile prof = honest(k);
            const CompareReport rep = judge(c, k, prof);
            EXPECT_TRUE(rep.passed()) << describe(s, k, prof) << ": " << rep.verdict;
            ++runs;
          }
  }
  EXPECT_EQ(runs, 3 * 5 * 2 * 3 * 5);
}

// Declaring P unrounded while rounding it to bf16 or f16 fails where the
// rounding is visible: an f32 output, whose floor is the arithmetic slack.
TEST(ProfileStandard, UndeclaredPRoundingFailsWithF32Output) {
  for (const CallSpec& s : visible_specs())
    for (KernelP p : {KernelP::bf16, KernelP::f16}) {
      const KernelNumerics k{.q_fp8 = true, .p = p, .out = DType::f32};
      NumericsProfile prof = honest(k);
      EXPECT_TRUE(judge(s, k, prof).passed()) << describe(s, k, prof);
      prof.p_round = PRound::none;
      const CompareReport rep = judge(s, k, prof);
      EXPECT_FALSE(rep.passed()) << describe(s, k, prof) << ": " << rep.verdict;
      EXPECT_EQ(rep.first.kind, "value");
    }
}

// With a 16-bit output the floor hides bf16 rounding of P unless the output
// cancels: large values of both signs averaged to a small result. (f16's
// rounding, 8 times finer, stays inside the floor even here: 0.9 of it.)
TEST(ProfileStandard, UndeclaredPRoundingFailsWith16BitOutputWhereOutputsCancel) {
  CallSpec s;
  s.lens = {6, 9, 12};
  s.group = 8;
  s.k_amp = 0.3f;  // nearly flat: several tokens share the weight
  s.v_amp = 40.0f;
  s.scales = testing::Scales::none;
  s.seed = 7010;
  for (DType out : {DType::bf16, DType::f16}) {
      const KernelNumerics k{.q_fp8 = true, .p = KernelP::bf16, .out = out};
      NumericsProfile prof = honest(k);
      const CompareReport ok = judge(s, k, prof);
      EXPECT_TRUE(ok.passed()) << describe(s, k, prof) << ": " << ok.verdict;
      prof.p_round = PRound::none;
      const CompareReport bad = judge(s, k, prof);
      EXPECT_FALSE(bad.passed()) << describe(s, k, prof) << ": " << bad.verdict;
    }
}

// P cast to fp8 without the FP8_MAX scale: declared, it passes (above and
// here); declared as unrounded, it fails.
TEST(ProfileStandard, UnscaledFp8PMustBeDeclaredAsSuch) {
  for (const CallSpec& s : visible_specs())
    for (DType out : {DType::bf16, DType::f32}) {
      const KernelNumerics k{.q_fp8 = true, .p = KernelP::fp8_unscaled, .out = out};
      NumericsProfile prof = honest(k);
      EXPECT_TRUE(judge(s, k, prof).passed()) << describe(s, k, prof);
      prof.p_round = PRound::none;
      EXPECT_FALSE(judge(s, k, prof).passed()) << describe(s, k, prof);
    }
}

// fp8 rounding of P is far coarser than bf16's: declaring bf16 fails, with
// either output dtype.
TEST(ProfileStandard, Fp8PDeclaredAsBf16Fails) {
  for (const CallSpec& s : visible_specs())
    for (DType out : {DType::bf16, DType::f32}) {
      const KernelNumerics k{.q_fp8 = true, .p = KernelP::fp8, .out = out};
      NumericsProfile prof = honest(k);
      prof.p_round = PRound::bf16;
      const CompareReport rep = judge(s, k, prof);
      EXPECT_FALSE(rep.passed()) << describe(s, k, prof) << ": " << rep.verdict;
    }
}

// Q quantization is applied to the reference's input: a kernel that quantizes
// Q and declares none fails, and one that does not and declares fp8_per_row
// fails too, with the 16-bit floor.
TEST(ProfileStandard, QQuantMustMatchTheDeclaration) {
  for (const CallSpec& s : visible_specs())
    for (bool q_fp8 : {true, false}) {
      const KernelNumerics k{.q_fp8 = q_fp8, .p = KernelP::none, .out = DType::bf16};
      NumericsProfile prof = honest(k);
      EXPECT_TRUE(judge(s, k, prof).passed()) << describe(s, k, prof);
      prof.q_quant = q_fp8 ? QQuant::none : QQuant::fp8_per_row;
      const CompareReport rep = judge(s, k, prof);
      EXPECT_FALSE(rep.passed()) << describe(s, k, prof) << ": " << rep.verdict;
    }
}

// Partials stored in bf16 or f16 and declared f32 fail with an f32 output:
// the partial term is what lets the honest declaration pass.
TEST(ProfileStandard, UndeclaredPartialRoundingFailsWithF32Output) {
  for (const CallSpec& s : visible_specs())
    for (DType partial : {DType::bf16, DType::f16}) {
      const KernelNumerics k{.q_fp8 = false, .p = KernelP::none, .split_tokens = 32, .partial = partial,
                             .out = DType::f32};
      NumericsProfile prof = honest(k);
      EXPECT_TRUE(judge(s, k, prof).passed()) << describe(s, k, prof);
      for (DType claimed : {DType::f32, DType::none}) {
        prof.partial = claimed;
        const CompareReport rep = judge(s, k, prof);
        EXPECT_FALSE(rep.passed()) << describe(s, k, prof) << ": " << rep.verdict;
      }
    }
}

// Partials stored in an fp8 flavour: declared, they pass with either output
// dtype (the partial term is on top of the 16-bit floor too); declared bf16 or
// f32 they fail, their rounding 16 to 32 times bf16's.
TEST(ProfileStandard, Fp8PartialsPassDeclaredAndFailUndeclared) {
  for (const CallSpec& s : visible_specs())
    for (DType partial : {DType::fp8_e4m3fn, DType::fp8_e4m3fnuz, DType::fp8_e5m2})
      for (DType out : {DType::bf16, DType::f32}) {
        const KernelNumerics k{.q_fp8 = false, .p = KernelP::none, .split_tokens = 32, .partial = partial,
                               .out = out};
        NumericsProfile prof = honest(k);
        const CompareReport ok = judge(s, k, prof);
        EXPECT_TRUE(ok.passed()) << describe(s, k, prof) << ": " << ok.verdict;
        for (DType claimed : {DType::bf16, DType::f32}) {
          prof.partial = claimed;
          const CompareReport rep = judge(s, k, prof);
          EXPECT_FALSE(rep.passed()) << describe(s, k, prof) << ": " << rep.verdict;
        }
      }
}

// e5m2's two mantissa bits are coarser than e4m3's three: partials stored in
// e5m2 while declaring e4m3fn fail.
TEST(ProfileStandard, E5m2PartialsDeclaredAsE4m3Fail) {
  for (const CallSpec& s : visible_specs()) {
    const KernelNumerics k{.q_fp8 = false, .p = KernelP::none, .split_tokens = 16, .partial = DType::fp8_e5m2,
                           .out = DType::f32};
    NumericsProfile prof = honest(k);
    prof.partial = DType::fp8_e4m3fn;
    const CompareReport rep = judge(s, k, prof);
    EXPECT_FALSE(rep.passed()) << describe(s, k, prof) << ": " << rep.verdict;
  }
}

// The f32 floor is what makes a small defect visible: one dropped token of a
// long flat row moves the output by ~1/len, inside 5e-3 but far outside the
// arithmetic slack.
TEST(ProfileStandard, F32OutputCatchesADroppedTokenThe16BitFloorMisses) {
  CallSpec s;
  s.lens = {2000};
  s.k_amp = 0.3f;
  s.seed = 7020;
  KernelNumerics k{.q_fp8 = false, .p = KernelP::none, .out = DType::f32, .drop_last_token = 1};
  const NumericsProfile prof = honest(k);
  const CompareReport f32 = judge(s, k, prof);
  EXPECT_FALSE(f32.passed()) << f32.verdict;
  k.out = DType::bf16;
  const CompareReport bf16 = judge(s, k, prof);
  EXPECT_TRUE(bf16.passed()) << "the 16-bit floor was expected to hide this: " << bf16.verdict;
}

// The units the standard uses, written out by hand: unit roundoff 2^-(mantissa
// bits + 1); half the smallest subnormal for the absolute term.
TEST(ProfileStandard, RoundingUnitsArePinned) {
  EXPECT_EQ(p_unit_roundoff(PRound::fp8_running_max), 0.0625);
  EXPECT_EQ(p_unit_roundoff(PRound::bf16), 1.0 / 256);
  EXPECT_EQ(p_unit_roundoff(PRound::f16), 1.0 / 2048);
  EXPECT_EQ(p_unit_roundoff(PRound::none), 0.0);
  EXPECT_EQ(p_unit_roundoff(PRound::fp8), 0.0625);
  EXPECT_EQ(storage_unit_roundoff(DType::bf16), 1.0 / 256);
  EXPECT_EQ(storage_unit_roundoff(DType::f16), 1.0 / 2048);
  EXPECT_EQ(storage_unit_roundoff(DType::f32), 0.0);
  EXPECT_EQ(storage_unit_roundoff(DType::none), 0.0);
  EXPECT_EQ(storage_unit_roundoff(DType::fp8_e4m3fn), 0.0625);
  EXPECT_EQ(storage_unit_roundoff(DType::fp8_e4m3fnuz), 0.0625);
  EXPECT_EQ(storage_unit_roundoff(DType::fp8_e5m2), 0.125);
  EXPECT_EQ(storage_underflow(DType::fp8_e4m3fn), 1.0 / 1024);
  EXPECT_EQ(storage_underflow(DType::fp8_e4m3fnuz), 1.0 / 2048);
  EXPECT_EQ(storage_underflow(DType::fp8_e5m2), 1.0 / (1 << 17));
  EXPECT_EQ(storage_underflow(DType::f16), 1.0 / (1 << 25));
  EXPECT_EQ(storage_underflow(DType::bf16), std::ldexp(1.0, -134));
  EXPECT_EQ(storage_underflow(DType::f32), 0.0);
  EXPECT_EQ(storage_underflow(DType::none), 0.0);
  EXPECT_EQ(p_subnormal_error(PRound::fp8_running_max, DType::fp8_e4m3fn), 1.0 / 1024 / 448);
  EXPECT_EQ(p_subnormal_error(PRound::fp8_running_max, DType::fp8_e4m3fnuz), 1.0 / 2048 / 240);
  EXPECT_EQ(p_subnormal_error(PRound::f16, DType::fp8_e4m3fn), 1.0 / (1 << 25));
  EXPECT_EQ(p_subnormal_error(PRound::bf16, DType::fp8_e4m3fn), std::ldexp(1.0, -134));
  EXPECT_EQ(p_subnormal_error(PRound::none, DType::fp8_e4m3fn), 0.0);
  EXPECT_EQ(p_subnormal_error(PRound::fp8, DType::fp8_e4m3fn), 1.0 / 1024);
  EXPECT_EQ(p_subnormal_error(PRound::fp8, DType::fp8_e4m3fnuz), 1.0 / 2048);
}

// One spike and a flat sea 15 nats below it: exp(-15) = 3.1e-7 exceeds f16's
// c = 2^-25 = 3.0e-8, so under f16 rounding each token is charged c, and the
// reference's pq_sub is 2000 c / L; under bf16 (c = 2^-134) it is ~0.
TEST(ProfileStandard, SubnormalTermFollowsTheRounding) {
  CallSpec s;
  s.lens = {2000};
  s.group = 1;
  s.head_dim = 16;
  s.scales = testing::Scales::none;
  s.seed = 7030;
  auto c = make_call(s);
  // q = 8 e_0 (exact), k_0 = 15 for token 0, 0 elsewhere, scale 1/8: logits 15 and 0.
  for (auto& x : c.q) x = kernels::f32_to_bf16(0.0f);
  c.q[0] = kernels::f32_to_bf16(8.0f);
  c.call.opt.softmax_scale = 0.125f;
  for (int64_t t = 0; t < s.lens[0]; ++t) {
    const int64_t blk = c.block_of(0, t), off = t % s.block_size;
    for (int64_t d = 0; d < s.head_dim; ++d) {
      c.k[c.k_at(blk, 0, d, off)] = kernels::f32_to_fp8(d == 0 && t == 0 ? 15.0f : 0.0f, s.cache);
      c.v[c.v_at(blk, 0, d, off)] = kernels::f32_to_fp8(1.0f, s.cache);
    }
  }
  const double L = 1.0 + 1999 * std::exp(-15.0);
  const ReferenceResult f16 =
      decode(c.call, NumericsProfile{QQuant::none, PRound::f16, DType::none}, {.precision = Precision::fp64});
  EXPECT_NEAR(f16.pq_sub[0], 2000 * std::ldexp(1.0, -25) / L, 1e-7 * f16.pq_sub[0]);  // stored as float
  const ReferenceResult bf16 =
      decode(c.call, NumericsProfile{QQuant::none, PRound::bf16, DType::none}, {.precision = Precision::fp64});
  EXPECT_LT(bf16.pq_sub[0], 1e-35);
  const ReferenceResult none =
      decode(c.call, NumericsProfile{QQuant::none, PRound::none, DType::none}, {.precision = Precision::fp64});
  EXPECT_EQ(none.pq_sub[0], 0.0f);
}

}  // namespace
}  // namespace pav::reference
