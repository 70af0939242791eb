// SPDX-License-Identifier: Apache-2.0
// route() cost per call (Google Benchmark): with the planned kernel off (the
// goal is under 50 ns: one flag test and a counter), and on (under 200 ns:
// plan_matches over the batch's lengths plus the gate's clause walk). Figures
// go to docs/lifecycle.md, "Figures".
#include <benchmark/benchmark.h>

#include <vector>

#include "kernels/dispatch/route.hpp"
#include "kernels/dispatch/tiny_call.hpp"

namespace {

using namespace pav::kernels;
using namespace pav::kernels::dispatch;

// A captured forward over `batch` sequences of uneven lengths.
struct Setup {
  explicit Setup(int batch, Settings s) : call(spec(batch)), cache(config(), nullptr), builder(cache, s) {
    BatchSpec b;
    b.num_seqs = batch;
    b.context_lens = call.lens.data();
    (void)builder.build_for_graph_capture(b);
    md.emplace(builder.build(Phase::replay, b));
  }
  static testing::TinySpec spec(int batch) {
    testing::TinySpec t;
    t.lens.clear();
    for (int i = 0; i < batch; ++i) t.lens.push_back(int32_t(37 + (i * 7919) % 3000));
    t.hkv = 1;
    t.group = 8;
    t.head_dim = 128;
    t.block_size = 16;
    t.cu = 132;
    t.partial = DType::bf16;
    return t;
  }
  static PlanCacheConfig config() {
    PlanCacheConfig c;
    c.cu = 132;
    c.kv_heads = 1;
    c.head_dim = 128;
    c.group = 8;
    c.partial = DType::bf16;
    return c;
  }
  testing::TinyCall call;
  PlanCache cache;
  MetadataBuilder builder;
  std::optional<ForwardMetadata> md;
};

void BM_RouteFeatureOff(benchmark::State& state) {
  Setup s(int(state.range(0)), Settings{false, true});
  Router router(Settings{false, true}, nullptr);
  for (auto _ : state) {
    Route r = router.route(s.call.call, Site::dense, &*s.md);
    benchmark::DoNotOptimize(r);
  }
}

void BM_RouteFeatureOnPlanned(benchmark::State& state) {
  Setup s(int(state.range(0)), Settings{true, true});
  Router router(Settings{true, true}, nullptr);
  if (router.route(s.call.call, Site::dense, &*s.md).kind != RouteKind::planned) {
    state.SkipWithError("setup does not route planned");
    return;
  }
  for (auto _ : state) {
    Route r = router.route(s.call.call, Site::dense, &*s.md);
    benchmark::DoNotOptimize(r);
  }
}

void BM_RouteFeatureOnSparse(benchmark::State& state) {
  Setup s(int(state.range(0)), Settings{true, true});
  Router router(Settings{true, true}, nullptr);
  for (auto _ : state) {
    Route r = router.route(s.call.call, Site::sparse, &*s.md);
    benchmark::DoNotOptimize(r);
  }
}

void BM_GateOnly(benchmark::State& state) {
  Setup s(int(state.range(0)), Settings{true, true});
  const Scratch scratch = s.md->plan_scratch(8, 128);
  for (auto _ : state) {
    GateVerdict v = gate(s.call.call, s.md->plan(), &scratch);
    benchmark::DoNotOptimize(v);
  }
}

}  // namespace

BENCHMARK(BM_RouteFeatureOff)->Arg(1)->Arg(8)->Arg(64)->Arg(256);
BENCHMARK(BM_RouteFeatureOnPlanned)->Arg(1)->Arg(8)->Arg(32)->Arg(64)->Arg(256);
BENCHMARK(BM_RouteFeatureOnSparse)->Arg(1)->Arg(8)->Arg(64);
BENCHMARK(BM_GateOnly)->Arg(8);
BENCHMARK_MAIN();
