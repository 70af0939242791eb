// SPDX-License-Identifier: Apache-2.0
// The reference (fp32) and the CPU backend on one 131072-token context:
// Hkv 1, G 16, D 128, q_len 1, block size 16, fp8 e4m3fn cache, per-tensor
// scales. GFLOP/s counts 4*D*G*q_len flops per token per KV head (QK and PV,
// a multiply and an add each); the reference's error terms are extra work not
// counted. "1T" runs under tbb::global_control(max_allowed_parallelism 1).
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>
#include <tbb/info.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/cpu/decode_cpu.hpp"
#include "kernels/planner.hpp"
#include "reference/decode.hpp"
#include "reference/test_call.hpp"

namespace {

using namespace pav;
using kernels::DType;

constexpr int32_t kTokens = 131072;
constexpr int64_t kGroup = 16, kHeadDim = 128, kHkv = 1, kQLen = 1;

reference::testing::OwnedCall& shared_call() {
  static reference::testing::OwnedCall c = [] {
    reference::testing::CallSpec s;
    s.lens = {kTokens};
    s.hkv = kHkv;
    s.group = kGroup;
    s.head_dim = kHeadDim;
    s.block_size = 16;
    s.q_len = kQLen;
    s.spare_blocks = 0;
    s.seed = 7;
    s.shuffle_blocks = std::getenv("PAV_BENCH_SEQUENTIAL_BLOCKS") == nullptr;
    return reference::testing::make_call(s);
  }();
  return c;
}

// threads == 0: every core TBB may use.
std::unique_ptr<tbb::global_control> limit(int64_t threads) {
  if (threads <= 0) return nullptr;
  return std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, size_t(threads));
}

void set_counters(benchmark::State& st, int64_t threads) {
  const double flops = 4.0 * kHeadDim * kGroup * kQLen * double(kTokens) * kHkv;
  const double used = threads > 0 ? double(threads) : double(tbb::info::default_concurrency());
  st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["GFLOP/s/core"] = benchmark::Counter(flops / 1e9 / used, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["cores"] = used;
}

// Single-thread runs report rates per CPU second of the calling thread (TBB runs
// the work there under max_allowed_parallelism 1), which a busy machine
// disturbs less than wall time; all-core runs report per wall second.
// Args: error terms (0/1), chunk tokens.
void reference_loop(benchmark::State& st, int64_t threads) {
  auto& c = shared_call();
  const auto guard = limit(threads);
  reference::ReferenceOptions o;
  o.precision = reference::Precision::fp32;
  o.error_terms = st.range(0) != 0;
  o.chunk_tokens = st.range(1);
  for (auto _ : st) {
    auto r = reference::decode(c.call, o);
    benchmark::DoNotOptimize(r.out.data());
  }
  set_counters(st, threads);
}
// Weights below float's smallest normal, on a 16384-token context of the same
// shape: P rounded as bf16 (its subnormal bound c = 2^-134 is one) or not at
// all, and logits of the usual spread or spread over hundreds (q 8x, k 32x the
// usual amplitude: most weights far below 2^-126). Args: p_round (0 none,
// 1 bf16), extreme logits (0/1). The four should take about the same time.
reference::testing::OwnedCall& weights_call(bool extreme) {
  static auto make = [](bool x) {
    return reference::testing::make_call({.lens = {16384}, .hkv = kHkv, .group = kGroup, .head_dim = kHeadDim,
                                          .q_amp = x ? 8.0f : 1.0f, .k_amp = x ? 64.0f : 2.0f,
                                          .spare_blocks = 0, .seed = 8});
  };
  static reference::testing::OwnedCall usual = make(false), far = make(true);
  return extreme ? far : usual;
}
void BM_ReferenceWeights1T(benchmark::State& st) {
  auto& c = weights_call(st.range(1) != 0);
  const auto guard = limit(1);
  const kernels::NumericsProfile profile{kernels::QQuant::none,
                                         st.range(0) ? kernels::PRound::bf16 : kernels::PRound::none,
                                         kernels::DType::f32};
  reference::ReferenceOptions o;
  o.precision = reference::Precision::fp32;
  for (auto _ : st) {
    auto r = reference::decode(c.call, profile, o);
    benchmark::DoNotOptimize(r.out.data());
  }
}
BENCHMARK(BM_ReferenceWeights1T)->ArgNames({"p_bf16", "extreme"})->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

void BM_Reference1T(benchmark::State& st) { reference_loop(st, 1); }
void BM_ReferenceAllCores(benchmark::State& st) { reference_loop(st, 0); }
BENCHMARK(BM_Reference1T)->ArgNames({"terms", "chunk"})->ArgsProduct({{1, 0}, {512, 4096}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReferenceAllCores)->ArgNames({"terms", "chunk"})->ArgsProduct({{1, 0}, {512}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// One split: a single task writes the output directly.
void BM_CpuUniformOneSplit1T(benchmark::State& st) {
  auto& c = shared_call();
  const auto guard = limit(1);
  c.call.opt.uniform_partitions = 1;
  kernels::Scratch none;
  for (auto _ : st) {
    kernels::cpu::uniform_decode(c.call, none);
    benchmark::DoNotOptimize(c.out.data());
  }
  c.call.opt.uniform_partitions = 0;
  set_counters(st, 1);
}
BENCHMARK(BM_CpuUniformOneSplit1T)->Unit(benchmark::kMillisecond);

// Planned over a plan for cu 132 (the H200's SM count): 132 partitions of the
// 512 tiles.
void planned_loop(benchmark::State& st, int64_t threads) {
  auto& c = shared_call();
  const auto guard = limit(threads);
  kernels::PlanParams pp;
  pp.num_seqs = 1;
  pp.kv_heads = kHkv;
  pp.cu = 132;
  kernels::WorkPlan plan(pp);
  plan.refresh(c.lens.data());
  const int64_t slots = kHkv * plan.capacity(), rows = kQLen * kGroup;
  std::vector<uint16_t> partial(slots * rows * kHeadDim);
  std::vector<float> m(slots * rows), l(slots * rows);
  kernels::Scratch sc;
  sc.partial = kernels::TensorView::contiguous_of(partial.data(), DType::bf16, {slots, rows, kHeadDim});
  sc.m = kernels::TensorView::contiguous_of(m.data(), DType::f32, {slots, rows});
  sc.l = kernels::TensorView::contiguous_of(l.data(), DType::f32, {slots, rows});
  for (auto _ : st) {
    auto res = kernels::cpu::planned_decode(c.call, plan.view(), sc);
    benchmark::DoNotOptimize(res);
    benchmark::DoNotOptimize(c.out.data());
  }
  set_counters(st, threads);
}
void BM_CpuPlanned1T(benchmark::State& st) { planned_loop(st, 1); }
void BM_CpuPlannedAllCores(benchmark::State& st) { planned_loop(st, 0); }
BENCHMARK(BM_CpuPlanned1T)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CpuPlannedAllCores)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
