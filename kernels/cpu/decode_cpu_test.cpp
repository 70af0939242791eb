// SPDX-License-Identifier: Apache-2.0
// The CPU backend (uniform and planned) against the reference, under the
// comparison standard: the fp8 standard with the P term under fp8 compute,
// the plain one under bf16 compute.
#include "kernels/cpu/decode_cpu.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "kernels/planner.hpp"
#include "reference/compare.hpp"
#include "reference/decode.hpp"
#include "reference/test_call.hpp"

namespace pav::kernels::cpu {
namespace {

using reference::CompareReport;
using reference::ReferenceResult;
using reference::testing::CallSpec;
using reference::testing::make_call;
using reference::testing::OwnedCall;
using reference::testing::Scales;

// Scratch buffers poisoned with NaN.
struct OwnedScratch {
  std::vector<uint8_t> partial;
  std::vector<float> m, l;
  Scratch view;
  OwnedScratch(int64_t slots, int64_t rows, int64_t D, DType partial_dtype) {
    const int64_t n = slots * rows * D, es = dtype_size(partial_dtype);
    partial.resize(n * es);
    if (partial_dtype == DType::f32) {
      float* p = reinterpret_cast<float*>(partial.data());
      for (int64_t i = 0; i < n; ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
    } else {
      uint16_t* p = reinterpret_cast<uint16_t*>(partial.data());
      for (int64_t i = 0; i < n; ++i) p[i] = 0x7fc0;  // NaN in bf16 and f16
    }
    m.assign(slots * rows, std::numeric_limits<float>::quiet_NaN());
    l = m;
    view.partial = TensorView::contiguous_of(partial.data(), partial_dtype, {slots, rows, D});
    view.m = TensorView::contiguous_of(m.data(), DType::f32, {slots, rows});
    view.l = TensorView::contiguous_of(l.data(), DType::f32, {slots, rows});
  }
};

std::string describe(const CallSpec& s, const char* path) {
  std::string lens;
  for (int32_t l : s.lens) lens += std::to_string(l) + " ";
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s: seed %llu lens [%s] Hkv %lld G %lld D %lld bs %lld q_len %lld %s compute %s partial %s",
                path, (unsigned long long)s.seed, lens.c_str(), (long long)s.hkv, (long long)s.group,
                (long long)s.head_dim, (long long)s.block_size, (long long)s.q_len,
                s.layout == VLayout::plain ? "plain" : "trans", std::string(to_string(s.compute)).c_str(),
                std::string(to_string(s.partial)).c_str());
  return buf;
}

void expect_passes(const OwnedCall& c, const ReferenceResult& ref, const std::string& what) {
  const CompareReport rep = reference::compare(c.call.out, ref);
  std::printf("%s\n  %s\n", what.c_str(), rep.verdict.c_str());
  EXPECT_TRUE(rep.passed()) << what << "\n" << rep.verdict;
}

void check_uniform(const CallSpec& s, int splits) {
  auto c = make_call(s);
  c.call.opt.uniform_partitions = splits;
  const int64_t rows = s.q_len * s.group;
  OwnedScratch sc(int64_t(s.lens.size()) * s.hkv * splits, rows, s.head_dim, s.partial);
  uniform_decode(c.call, sc.view);
  const ReferenceResult ref = reference::decode(c.call);
  expect_passes(c, ref, describe(s, ("uniform " + std::to_string(splits) + " splits").c_str()));
}

void check_planned(const CallSpec& s, int64_t cu, int64_t max_partitions) {
  auto c = make_call(s);
  PlanParams pp;
  pp.num_seqs = int64_t(s.lens.size());
  pp.kv_heads = s.hkv;
  pp.cu = cu;
  pp.max_partitions = max_partitions;
  WorkPlan plan(pp);
  plan.refresh(c.lens.data());
  const int64_t rows = s.q_len * s.group;
  OwnedScratch sc(s.hkv * plan.capacity(), rows, s.head_dim, s.partial);
  const DecodeResult res = planned_decode(c.call, plan.view(), sc.view);
  EXPECT_EQ(res.status, DecodeStatus::ok);
  const ReferenceResult ref = reference::decode(c.call);
  expect_passes(c, ref,
                describe(s, ("planned cu " + std::to_string(cu) + " max_partitions " + std::to_string(max_partitions)).c_str()));
}

CallSpec base_spec(uint64_t seed) {
  CallSpec s;
  s.lens = {1, 255, 256, 257, 1100, 0, 3000};
  s.hkv = 2;
  s.group = 4;
  s.head_dim = 128;
  s.block_size = 16;
  s.seed = seed;
  return s;
}

TEST(ReferenceCpuBackend, UniformFp8ComputeBf16Partials) {
  const CallSpec s = base_spec(3000);
  for (int splits : {1, 3, 8}) check_uniform(s, splits);
}

TEST(ReferenceCpuBackend, UniformFp8ComputeFp32PartialsMtpTrans) {
  CallSpec s = base_spec(3001);
  s.partial = DType::f32;
  s.q_len = 3;
  s.layout = VLayout::trans;
  s.block_size = 64;
  s.scales = Scales::token;
  for (int splits : {1, 5}) check_uniform(s, splits);
}

TEST(ReferenceCpuBackend, UniformBf16ComputePlainStandard) {
  CallSpec s = base_spec(3002);
  s.compute = DType::bf16;
  s.q_len = 2;
  for (int splits : {1, 4}) check_uniform(s, splits);
}

TEST(ReferenceCpuBackend, PlannedFp8ComputeBf16Partials) {
  CallSpec s = base_spec(3003);
  check_planned(s, 8, 8);
  check_planned(s, 132, 132);  // ceiling above 64: the unbounded reduce
}

TEST(ReferenceCpuBackend, PlannedFp32PartialsPerTokenScalesMtp) {
  CallSpec s = base_spec(3004);
  s.partial = DType::f32;
  s.scales = Scales::token;
  s.q_len = 4;
  s.group = 5;
  s.block_size = 128;
  check_planned(s, 16, 16);
}

TEST(ReferenceCpuBackend, PlannedFnuzCache) {
  CallSpec s = base_spec(3005);
  s.cache = DType::fp8_e4m3fnuz;
  s.compute = DType::fp8_e4m3fnuz;
  s.q_dtype = DType::f16;
  s.partial = DType::f16;
  check_planned(s, 32, 32);
}

}  // namespace
}  // namespace pav::kernels::cpu
