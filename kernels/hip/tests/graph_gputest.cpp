// SPDX-License-Identifier: Apache-2.0
// Graph capture and replay with changed lengths, and two streams with
// separate metadata running at once.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "kernels/hip/gpu_backend.hpp"
#include "kernels/hip/tests/gpu_test_support.hpp"
#include "properties/gen/gen.hpp"

namespace pav::kernels::gpu::testing {
namespace {

using props::CaseSpec;
using props::Path;

CaseSpec graph_spec(uint64_t seed, props::ScaleKind scales = props::ScaleKind::per_token) {
  CaseSpec s;
  // Built at the longest lengths any replay uses, so every block exists.
  s.lens = {2307, 700, 513, 4099, 1};
  s.group = 4;
  s.hkv = 2;
  s.q_len = 2;
  s.seed = seed;
  s.scales = scales;  // per-token: the scalar fast body; per-tensor: the matrix body
  s.sentinels = props::boundary_sentinels(s.lens);
  return s;
}

// Captures refresh + planned decode (attention, reduce, freshness) or the
// uniform decode once, then replays it over new lengths: shorter, zero,
// longer. Before each replay the output, scratch and status are poisoned and
// the cache bytes past the new lengths set to NaN.
void replay_over_lengths(Path path, props::ScaleKind scales = props::ScaleKind::per_token) {
  const uint64_t seed = (path == Path::planned ? 8101 : 8102) + (scales == props::ScaleKind::per_token ? 0 : 10);
  const CaseSpec spec = graph_spec(seed, scales);
  std::printf("case: %s\n", describe(spec).c_str());
  props::HostCase base = props::build_case(spec);
  DeviceCase dc(base);
  DecodeCall dcall = dc.call();
  PlanParams pp = props::plan_params(spec);
  DevicePlan dp(pp);
  const Layout ul = uniform_layout(base.call());
  DeviceScratch ds(dcall, path == Path::planned ? pp.kv_heads * dp.capacity : ul.slots);
  DeviceBuffer status(kStatusWords * 4);
  Stream stream;

  begin_capture(stream.get());
  if (path == Path::planned) {
    dp.refresh(dc.lens.as<int32_t>(), stream.get());
    planned_decode(dcall, dp.view(), ds.view, status.as<uint32_t>(), stream.get());
  } else {
    uniform_decode(dcall, ds.view, stream.get());
  }
  Graph graph = end_capture(stream.get());

  const std::vector<std::vector<int32_t>> steps = {
      {2307, 700, 513, 4099, 1},  // as built
      {1000, 255, 2, 300, 1},     // shorter
      {0, 0, 0, 0, 0},            // zero
      {0, 700, 0, 17, 0},         // some zero, some back up
      {2307, 700, 513, 4099, 1},  // longer again
  };
  for (size_t k = 0; k < steps.size(); ++k) {
    props::HostCase hc = base;
    poison_past(hc, steps[k]);
    hc.lens = steps[k];
    dc.upload_caches(hc, stream.get());
    dc.upload_lens(steps[k], stream.get());
    dc.poison_output(stream.get());
    ds.poison(stream.get());
    fill_bytes(status.data(), 0xff, status.bytes(), stream.get());
    graph.launch(stream.get());
    stream.synchronize();

    GpuResults g(dcall);
    g.out = dc.download_output(stream.get());
    g.scratch = HostScratch(dcall, ds.slots);
    g.scratch.download(ds, stream.get());
    if (path == Path::planned) {
      g.status = read_status(status.as<uint32_t>(), stream.get());
      dp.download(g.plan_work, g.plan_reduce, stream.get());
    }
    const Outcome o = check_results(hc, path, g, nullptr, true);
    EXPECT_TRUE(o.ok) << "replay " << k << ": " << o.message;
    std::printf("  replay %zu: %s\n", k, o.summary.c_str());
  }
}

TEST(GpuGraph, PlannedReplayAfterLengthsChange) { replay_over_lengths(Path::planned); }
TEST(GpuGraph, UniformReplayAfterLengthsChange) { replay_over_lengths(Path::uniform); }
TEST(GpuGraph, PlannedReplayMatrixBody) { replay_over_lengths(Path::planned, props::ScaleKind::per_tensor); }
TEST(GpuGraph, UniformReplayMatrixBody) { replay_over_lengths(Path::uniform, props::ScaleKind::per_tensor); }

// Two streams, equal shapes, separate cases, plans, scratch and status: both
// in flight at once, several rounds, each checked on its own.
TEST(GpuStreams, TwoStreamsWithSeparateMetadata) {
  struct Lane {
    CaseSpec spec;
    props::HostCase hc;
    DeviceCase dc;
    DevicePlan dp;
    DeviceScratch ds;
    DeviceBuffer status;
    Stream stream;
    explicit Lane(const CaseSpec& s)
        : spec(s), hc(props::build_case(s)), dc(hc), dp(props::plan_params(s)),
          ds(dc.call(), dp.params.kv_heads * dp.capacity), status(kStatusWords * 4) {}
  };
  CaseSpec a = graph_spec(8201), b = graph_spec(8202);
  b.lens = {5, 4099, 2306, 256, 1000};
  b.sentinels = props::boundary_sentinels(b.lens);
  Lane la(a), lb(b);
  for (int round = 0; round < 3; ++round) {
    for (Lane* l : {&la, &lb}) {
      l->dc.poison_output(l->stream.get());
      l->ds.poison(l->stream.get());
      l->dp.refresh(l->dc.lens.as<int32_t>(), l->stream.get());
      planned_decode(l->dc.call(), l->dp.view(), l->ds.view, l->status.as<uint32_t>(), l->stream.get());
    }
    for (Lane* l : {&la, &lb}) {
      DecodeCall dcall = l->dc.call();
      GpuResults g(dcall);
      g.status = read_status(l->status.as<uint32_t>(), l->stream.get());
      g.out = l->dc.download_output(l->stream.get());
      g.scratch = HostScratch(dcall, l->ds.slots);
      g.scratch.download(l->ds, l->stream.get());
      l->dp.download(g.plan_work, g.plan_reduce, l->stream.get());
      const Outcome o = check_results(l->hc, Path::planned, g, nullptr, round == 0);
      EXPECT_TRUE(o.ok) << "round " << round << " lane " << (l == &la ? "a" : "b") << ": " << o.message;
    }
  }
}

}  // namespace
}  // namespace pav::kernels::gpu::testing
