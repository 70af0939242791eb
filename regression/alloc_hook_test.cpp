// SPDX-License-Identifier: Apache-2.0
// Defect 9: with the feature off the per-call cost is nil: no gate check, no
// environment read, nothing allocated. This binary replaces the global
// operator new to count allocations, so it holds only these tests.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "kernels/dispatch/route.hpp"
#include "kernels/dispatch/tiny_call.hpp"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};

// Counts allocations made while `fn` runs.
template <class Fn>
uint64_t allocations_during(Fn&& fn) {
  const uint64_t before = g_allocations.load();
  g_counting = true;
  fn();
  g_counting = false;
  return g_allocations.load() - before;
}
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace pav::kernels;
using namespace pav::kernels::dispatch;
using pav::kernels::testing::TinyCall;

TEST(Defect09_FeatureOffIsFree, HookCountsAllocations) {
  // The counter itself must see an allocation, or the zeros below mean nothing.
  // A direct call: a new-expression paired with delete may be elided.
  EXPECT_GE(allocations_during([] { ::operator delete(::operator new(16)); }), 1u);
}

TEST(Defect09_FeatureOffIsFree, RouteRunsNoGateAndAllocatesNothing) {
  TinyCall t;
  PlanCacheConfig cfg;
  cfg.cu = 8;
  cfg.head_dim = 64;
  cfg.group = 2;
  PlanCache cache(cfg, nullptr);
  MetadataBuilder builder(cache, Settings{false, true});
  BatchSpec b;
  b.num_seqs = int64_t(t.lens.size());
  b.context_lens = t.lens.data();
  Router router(Settings{false, true}, nullptr);
  (void)router.route(t.call, Site::dense, nullptr);  // the one-time route log line
  uint64_t routed = 0;
  const uint64_t n = allocations_during([&] {
    const ForwardMetadata md = builder.build_for_graph_capture(b);
    for (int i = 0; i < 1000; ++i) {
      routed += router.route(t.call, Site::dense, &md).kind == RouteKind::uniform;
      routed += router.route(t.call, Site::sparse, &md).kind == RouteKind::uniform;
    }
  });
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(routed, 2000u);
  EXPECT_EQ(router.counts().gate_checks, 0u);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(builder.planner_launches(), 0u);
}

// Settings are read once: changing the variable later changes nothing.
TEST(Defect09_FeatureOffIsFree, SettingsAreReadOnceAtStartUp) {
  unsetenv("PAV_PLANNED_DECODE");
  const Settings& s = startup_settings();
  ASSERT_FALSE(s.planned_decode);
  Router router;  // startup settings
  setenv("PAV_PLANNED_DECODE", "1", 1);
  TinyCall t;
  EXPECT_EQ(router.route(t.call, Site::sparse, nullptr).kind, RouteKind::uniform);
  EXPECT_FALSE(startup_settings().planned_decode);
  EXPECT_EQ(router.counts().gate_checks, 0u);
  unsetenv("PAV_PLANNED_DECODE");
}

// With the feature on, a planned route allocates nothing either.
TEST(Defect09_FeatureOffIsFree, PlannedRouteAllocatesNothing) {
  TinyCall t;
  PlanCacheConfig cfg;
  cfg.cu = 8;
  cfg.head_dim = 64;
  cfg.group = 2;
  cfg.partial = DType::f32;
  PlanCache cache(cfg, nullptr);
  MetadataBuilder builder(cache, Settings{true, true});
  BatchSpec b;
  b.num_seqs = int64_t(t.lens.size());
  b.context_lens = t.lens.data();
  (void)builder.build_for_graph_capture(b);
  const ForwardMetadata md = builder.build(Phase::replay, b);
  Router router(Settings{true, true}, nullptr);
  (void)router.route(t.call, Site::dense, &md);
  uint64_t planned = 0;
  const uint64_t n = allocations_during([&] {
    for (int i = 0; i < 1000; ++i) planned += router.route(t.call, Site::dense, &md).kind == RouteKind::planned;
  });
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(planned, 1000u);
}
