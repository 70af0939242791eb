// SPDX-License-Identifier: Apache-2.0
// GPU decode vs the CPU backend (inside the enclosure model of
// gpu_test_support.cpp) and vs the reference standard, over boundary lengths,
// long contexts, generated cases, stale plans and both reduce variants. Every
// case poisons outputs, scratch and out-of-context cache bytes with NaN.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/codecs.hpp"
#include "kernels/hip/gpu_backend.hpp"
#include "kernels/launch.hpp"
#include "kernels/split_rules.hpp"
#include "kernels/hip/tests/gpu_test_support.hpp"
#include "properties/gen/gen.hpp"

namespace pav::kernels::gpu::testing {
namespace {

using props::CaseSpec;
using props::Path;
using props::ScaleKind;

std::vector<int32_t> short_boundaries() {
  std::vector<int32_t> v;
  for (int32_t x : props::boundary_lengths())
    if (x <= 4099) v.push_back(x);
  return v;
}

CaseSpec base_spec(std::vector<int32_t> lens, uint64_t seed) {
  CaseSpec s;
  s.lens = std::move(lens);
  s.seed = seed;
  s.sentinels = props::boundary_sentinels(s.lens);
  return s;
}

void run_both(const CaseSpec& s, bool planned = true) {
  std::printf("case: %s\n", describe(s).c_str());
  const Outcome u = run_case(s, Path::uniform);
  EXPECT_TRUE(u.ok) << u.message;
  std::printf("  uniform: %s\n", u.summary.c_str());
  if (planned && is_fp8(s.opt.compute)) {
    const Outcome p = run_case(s, Path::planned);
    EXPECT_TRUE(p.ok) << p.message;
    std::printf("  planned: %s\n", p.summary.c_str());
  }
}

// Every boundary length below 65537 in one batch, over a spread of shapes.
TEST(GpuDecode, BoundaryLengthsAcrossShapes) {
  uint64_t seed = 7001;
  {  // D 128, G 4, two KV heads, bf16 partials, per-tensor scales
    CaseSpec s = base_spec(short_boundaries(), seed++);
    s.hkv = 2;
    s.group = 4;
    run_both(s);
  }
  {  // D 64, G 17 (odd), MTP q_len 3, trans V, f16 q, f32 partials, per-token scales
    CaseSpec s = base_spec(short_boundaries(), seed++);
    s.head_dim = 64;
    s.group = 17;
    s.q_len = 3;
    s.block_size = 64;
    s.v_layout = kernels::VLayout::trans;
    s.q_dtype = DType::f16;
    s.opt.partial = DType::f32;
    s.scales = ScaleKind::per_token;
    run_both(s);
  }
  {  // D 256, G 5, q_len 2, block 128, no scales, f16 partials, strided q
    CaseSpec s = base_spec(short_boundaries(), seed++);
    s.head_dim = 256;
    s.group = 5;
    s.q_len = 2;
    s.hkv = 2;
    s.block_size = 128;
    s.scales = ScaleKind::none;
    s.q_dtype = DType::f16;
    s.opt.partial = DType::f16;
    s.q_row_pad = 64;
    run_both(s);
  }
  {  // e4m3fnuz flavour (gfx942 contract), ceiling 16: bounded vectorized reduce
    CaseSpec s = base_spec(short_boundaries(), seed++);
    s.opt.arch = Arch::gfx942;
    s.cache_dtype = DType::fp8_e4m3fnuz;
    s.opt.compute = DType::fp8_e4m3fnuz;
    s.group = 8;
    s.max_partitions = 16;
    s.v_layout = kernels::VLayout::trans;
    run_both(s);
  }
  {  // D 96: the general attention body (the fast one takes D 64 / 128 / 256), trans V, per-token scales
    CaseSpec s = base_spec(short_boundaries(), seed++);
    s.head_dim = 96;
    s.group = 8;
    s.v_layout = kernels::VLayout::trans;
    s.scales = ScaleKind::per_token;
    run_both(s);
  }
  {  // G 17 with q_len 2: 34 rows, three row chunks at D 128
    CaseSpec s = base_spec({0, 1, 2, 3, 4, 255, 256, 257, 513, 2307}, seed++);
    s.group = 17;
    s.q_len = 2;
    run_both(s);
  }
}

// The attention body a uniform decode of the spec launches (its launch record).
AttentionBody body_of(const CaseSpec& s) {
  props::HostCase hc = props::build_case(s);
  DeviceCase dc(hc);
  const DecodeCall c = dc.call();
  DeviceScratch ds(c, uniform_layout(hc.call()).slots);
  const LaunchRecord r = uniform_decode(c, ds.view, nullptr);
  synchronize(nullptr);
  return r.body;
}

// The matrix-unit body over its shapes: head_dim 64/128/256; 1, 8, 15, 16,
// 17, 20, 24 (three n tiles: G 8 x q_len 3), 25 (four), 32 (one pass of four
// n tiles: G 8 x q_len 4) and 64 (two passes) query rows;
// both V layouts; pages of 16/64/128 tokens; tails of every length class
// around 16-token chunks, 64-token stages and 256-token tiles; per-tensor and
// no scales; all partial dtypes. The launch record must name the body.
TEST(GpuDecode, MatrixBodyAcrossShapes) {
  struct Shape {
    int head_dim, group, q_len, block_size, hkv;
    VLayout v;
    ScaleKind scales;
    DType partial;
  };
  const Shape shapes[] = {
      {128, 8, 1, 16, 2, VLayout::plain, ScaleKind::per_tensor, DType::bf16},
      {128, 8, 4, 16, 1, VLayout::plain, ScaleKind::per_tensor, DType::bf16},
      {128, 16, 1, 64, 1, VLayout::trans, ScaleKind::none, DType::f32},
      {128, 16, 4, 128, 1, VLayout::plain, ScaleKind::per_tensor, DType::f16},
      {64, 6, 2, 16, 2, VLayout::trans, ScaleKind::per_tensor, DType::f32},
      {64, 1, 1, 64, 1, VLayout::plain, ScaleKind::none, DType::bf16},
      {256, 5, 3, 16, 1, VLayout::plain, ScaleKind::per_tensor, DType::bf16},
      {256, 3, 1, 128, 2, VLayout::trans, ScaleKind::per_tensor, DType::f32},
      {128, 8, 3, 16, 2, VLayout::plain, ScaleKind::per_tensor, DType::bf16},
      {64, 5, 4, 64, 1, VLayout::trans, ScaleKind::none, DType::f16},
      {256, 17, 1, 16, 1, VLayout::plain, ScaleKind::per_tensor, DType::f32},
      {128, 5, 5, 16, 1, VLayout::plain, ScaleKind::per_tensor, DType::bf16},
  };
  const std::vector<int32_t> lens = {0, 1, 2, 15, 16, 17, 63, 64, 65, 255, 256, 257, 511, 513, 2305, 4099};
  uint64_t seed = 7701;
  for (const Shape& sh : shapes) {
    CaseSpec s = base_spec(lens, seed++);
    s.head_dim = sh.head_dim;
    s.group = sh.group;
    s.q_len = sh.q_len;
    s.block_size = sh.block_size;
    s.hkv = sh.hkv;
    s.v_layout = sh.v;
    s.scales = sh.scales;
    s.opt.partial = sh.partial;
    EXPECT_EQ(body_of(s), AttentionBody::matrix) << describe(s);
    run_both(s);
  }
}

// Which body runs: the matrix body where it applies, the scalar bodies for
// the calls it does not take (per-token V scale, the fnuz flavour, other
// head_dims, bf16 compute).
TEST(GpuDecode, BodySelection) {
  CaseSpec s = base_spec({300, 5}, 7801);
  s.group = 4;
  EXPECT_EQ(body_of(s), AttentionBody::matrix);
  CaseSpec tok = s;
  tok.scales = ScaleKind::per_token;
  EXPECT_EQ(body_of(tok), AttentionBody::fast_scalar);
  CaseSpec fnuz = s;
  fnuz.opt.arch = Arch::gfx942;
  fnuz.cache_dtype = DType::fp8_e4m3fnuz;
  fnuz.opt.compute = DType::fp8_e4m3fnuz;
  EXPECT_EQ(body_of(fnuz), AttentionBody::fast_scalar);
  CaseSpec d96 = s;
  d96.head_dim = 96;
  EXPECT_EQ(body_of(d96), AttentionBody::general);
  CaseSpec bf = s;
  bf.opt.compute = DType::bf16;
  EXPECT_EQ(body_of(bf), AttentionBody::general);
}

TEST(GpuDecode, LargeHeadDims) {
  uint64_t seed = 7101;
  for (int D : {512, 1024}) {
    CaseSpec s = base_spec({1, 255, 257, 515, 2305, 0}, seed++);
    s.head_dim = D;
    s.group = 3;
    s.q_len = D == 1024 ? 4 : 1;  // 12 rows at D 1024: row chunks of 4
    s.scales = ScaleKind::per_token;
    run_both(s);
  }
}

TEST(GpuDecode, UniformSplitCountsAndDirectWrite) {
  uint64_t seed = 7201;
  for (int splits : {1, 2, 7, 64, 65, 200}) {
    CaseSpec s = base_spec({4099, 2306, 0, 1, 514}, seed++);
    s.opt.uniform_partitions = splits;
    s.group = 6;
    s.opt.partial = splits % 2 ? DType::f32 : DType::bf16;
    std::printf("splits %d\n", splits);
    run_both(s, false);
  }
}

TEST(GpuDecode, Bf16ComputeUniform) {
  CaseSpec s = base_spec(short_boundaries(), 7301);
  s.opt.compute = DType::bf16;
  s.group = 4;
  s.hkv = 2;
  run_both(s, false);
}

// Both reduce variants at ceilings around 64, 16-bit partials at D 128 (the
// vectorized bounded reduce) and the others.
TEST(GpuDecode, ReduceVariantsAcrossCeilings) {
  uint64_t seed = 7401;
  for (int64_t maxp : {1, 2, 7, 63, 64, 65, 132})
    for (DType partial : {DType::bf16, DType::f16, DType::f32}) {
      CaseSpec s = base_spec({4099, 2305, 1, 0, 700, 65}, seed++);
      s.max_partitions = maxp;
      s.opt.partial = partial;
      s.group = 4;
      s.hkv = 2;
      const Outcome o = run_case(s, Path::planned);
      EXPECT_TRUE(o.ok) << o.message;
    }
}

// The general reduce's two forms: a batch of many (sequence, KV head) pairs
// takes whole rows per block (f32 partials at D 128: 512 outputs, one walk
// each), a batch of few takes one row per block with each walk shared. At
// 132 compute units, 11 sequences of G 7 at Hkv 8 (88 pairs) take 3 chunks of
// 3, 3 and 1 rows, and 11 of G 5 x q_len 2 at Hkv 6 (66 pairs) 4 chunks of 3,
// 3, 3 and 1: rows that no whole number of chunks divides.
TEST(GpuDecode, GeneralReduceRowChunks) {
  std::vector<int32_t> many, eleven;
  for (int i = 0; i < 40; ++i) many.push_back(65 + 97 * i);
  for (int i = 0; i < 11; ++i) eleven.push_back(i == 3 ? 1 : 4099 - 301 * i);
  struct Shape {
    std::vector<int32_t> lens;
    int group, q_len, hkv;
  };
  uint64_t seed = 7451;
  for (const Shape& sh : {Shape{many, 4, 1, 8}, Shape{{4099, 2305, 1}, 4, 1, 8}, Shape{eleven, 7, 1, 8},
                          Shape{eleven, 5, 2, 6}})
    for (DType partial : {DType::f32, DType::bf16}) {
      CaseSpec s = base_spec(sh.lens, seed++);
      s.max_partitions = 132;
      s.opt.cu = 132;
      s.opt.partial = partial;
      s.group = sh.group;
      s.q_len = sh.q_len;
      s.hkv = sh.hkv;
      std::printf("%zu sequences, G %d, q_len %d, Hkv %d: %lld row chunks\n", sh.lens.size(), sh.group, sh.q_len,
                  sh.hkv,
                  static_cast<long long>(reduce_row_chunks(int64_t(sh.group) * sh.q_len,
                                                           int64_t(sh.lens.size()) * sh.hkv, s.opt.cu)));
      const Outcome o = run_case(s, Path::planned);
      EXPECT_TRUE(o.ok) << o.message;
    }
}

TEST(GpuDecode, LongContexts) {
  {
    CaseSpec s = base_spec({65537, 200003, 3}, 7501);
    s.group = 4;
    s.scales = ScaleKind::per_token;
    run_both(s);
  }
  {
    CaseSpec s = base_spec({65537}, 7502);
    s.head_dim = 64;
    s.group = 8;
    s.q_len = 2;
    s.opt.partial = DType::f32;
    s.max_partitions = 256 > s.opt.cu ? s.opt.cu : 256;
    run_both(s);
  }
}

// Lengths changed after the plan was refreshed: stale tasks and rows are
// counted exactly as the CPU backend counts them, stale sequences come out NaN
// and are not attended, the others are still right.
TEST(GpuDecode, StalePlanStatusAndNaNOutput) {
  const std::vector<int32_t> planned = {700, 0, 300, 2305}, live = {700, 5, 260, 2305};
  CaseSpec s = base_spec({700, 5, 300, 2305}, 7601);
  s.group = 4;
  s.hkv = 2;
  props::HostCase hc = props::build_case(s);
  poison_past(hc, live);
  hc.lens = live;
  PlanParams pp = props::plan_params(s);
  WorkPlan plan(pp);
  plan.refresh(planned.data());

  DeviceCase dc(hc);
  DevicePlan dp(pp);
  DeviceBuffer plan_lens(planned.size() * 4);
  copy_to_device(plan_lens.data(), planned.data(), planned.size() * 4);
  dp.refresh(plan_lens.as<int32_t>());
  DecodeCall dcall = dc.call();
  DeviceScratch ds(dcall, pp.kv_heads * dp.capacity);
  DeviceBuffer status(kStatusWords * 4);
  fill_bytes(status.data(), 0xff, status.bytes());
  planned_decode(dcall, dp.view(), ds.view, status.as<uint32_t>(), nullptr);

  GpuResults g(dcall);
  g.status = read_status(status.as<uint32_t>(), nullptr);
  g.out = dc.download_output();
  g.scratch = HostScratch(dcall, pp.kv_heads * dp.capacity);
  g.scratch.download(ds);
  dp.download(g.plan_work, g.plan_reduce);

  // Counted independently of both backends: seq 2's tasks are stale, seq 1 has
  // no task but a live length.
  const int64_t seq2_tasks = plan.reduce_info()[2 * 2 + 1];
  EXPECT_EQ(g.status.status, DecodeStatus::stale_plan);
  EXPECT_EQ(g.status.stale_tasks, seq2_tasks);
  EXPECT_EQ(g.status.stale_rows, 1);
  uint32_t words[kStatusWords];
  copy_to_host(words, status.data(), sizeof(words));
  EXPECT_EQ(words[3], 2u) << "stale sequences";
  const Outcome o = check_results(hc, Path::planned, g, &plan, false);
  EXPECT_TRUE(o.ok) << o.message;

  // Refreshed from the live lengths the status clears.
  dp.refresh(dc.lens.as<int32_t>());
  planned_decode(dcall, dp.view(), ds.view, status.as<uint32_t>(), nullptr);
  const DecodeResult fresh = read_status(status.as<uint32_t>(), nullptr);
  EXPECT_EQ(fresh.status, DecodeStatus::ok);
  EXPECT_EQ(fresh.stale_tasks, 0);
  EXPECT_EQ(fresh.stale_rows, 0);
}

// A torn plan: refreshed from the live lengths but for one row left from an
// earlier refresh that records a live length (sequence 1's row inside sequence
// 0's range, or an earlier split's row of sequence 0). The device check, the
// attention and the reduce follow the CPU backend's rule (task_row_stale):
// sequence 0 is stale and NaN, sequence 1 is computed, and the counts are the
// CPU backend's on the same plan.
TEST(GpuDecode, TornRowRecordingALiveLengthIsStale) {
  CaseSpec s = base_spec({3000, 20}, 7602);
  s.opt.cu = 8;
  props::HostCase hc = props::build_case(s);
  const PlanParams pp = props::plan_params(s);
  WorkPlan plan(pp);
  plan.refresh(hc.lens.data());
  const int32_t first = plan.reduce_info()[0], count = plan.reduce_info()[1], other = plan.reduce_info()[2];
  ASSERT_GE(count, 3) << "sequence 0 must be split";
  const int64_t row_elems = int64_t(s.q_len) * s.hkv * s.group * s.head_dim;  // sequence 0's output
  for (int tear = 0; tear < 2; ++tear) {
    SCOPED_TRACE(tear == 0 ? "sequence 1's row in sequence 0's range" : "an earlier split's row of sequence 0");
    WorkPlan torn(pp);
    torn.refresh(hc.lens.data());
    int32_t* row = torn.view().work_info + 4 * (first + 1);
    if (tear == 0) {
      std::copy_n(plan.work_info().data() + 4 * other, 4, row);
    } else {
      row[2] += 1;  // ends a tile late: the next row starts where this one does not end
    }
    DeviceCase dc(hc);
    DevicePlan dp(pp);
    copy_to_device(dp.work.data(), torn.work_info().data(), torn.work_info().size() * 4);
    copy_to_device(dp.reduce.data(), torn.reduce_info().data(), torn.reduce_info().size() * 4);
    DecodeCall dcall = dc.call();
    DeviceScratch ds(dcall, pp.kv_heads * dp.capacity);
    DeviceBuffer status(kStatusWords * 4);
    fill_bytes(status.data(), 0xff, status.bytes());
    planned_decode(dcall, dp.view(), ds.view, status.as<uint32_t>(), nullptr);
    const DecodeResult gpu = read_status(status.as<uint32_t>(), nullptr);
    const std::vector<uint16_t> out = dc.download_output();

    props::HostCase cpu_case = props::build_case(s);
    const DecodeCall ccall = cpu_case.call();
    const auto cpu_scratch = props::make_scratch(ccall, pp.kv_heads * torn.capacity(), pp.kv_heads);
    const PlanView tv = torn.view();
    const DecodeResult cpu = launch_planned(ccall, &tv, cpu_scratch.view, Backend::cpu);

    EXPECT_EQ(gpu.status, DecodeStatus::stale_plan);
    EXPECT_EQ(cpu.status, DecodeStatus::stale_plan);
    EXPECT_GE(gpu.stale_tasks, 1);
    EXPECT_EQ(gpu.stale_tasks, cpu.stale_tasks);
    EXPECT_EQ(gpu.stale_rows, 0);
    for (int64_t i = 0; i < row_elems; ++i) ASSERT_TRUE(std::isnan(bf16_to_f32(out[size_t(i)]))) << i;
    for (int64_t i = row_elems; i < 2 * row_elems; ++i) ASSERT_TRUE(std::isfinite(bf16_to_f32(out[size_t(i)]))) << i;
  }
}

// Generated cases (RapidCheck prints the seed and the shrunk case).
RC_GTEST_PROP(GpuDecodeProps, GpuMatchesCpuAndReference, ()) {
  props::DecodeGenLimits lim;
  lim.max_batch = 5;
  lim.max_total_tokens = 12000;
  lim.allow_long = false;
  const CaseSpec s = *props::gen_decode_case(lim);
  RC_LOG() << describe(s) << "\n";
  const Outcome o = run_case(s, s.path);
  RC_LOG() << o.message;
  RC_ASSERT(o.ok);
}

TEST(GpuAvailability, ReportsTheDevice) {
  EXPECT_TRUE(available());
  EXPECT_GE(device_count(), 1);
  EXPECT_GE(multiprocessor_count(), 1);
}

}  // namespace
}  // namespace pav::kernels::gpu::testing
