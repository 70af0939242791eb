// SPDX-License-Identifier: Apache-2.0
// Exact plans and metamorphic properties of the planner. Structural checks pass
// for any plan that covers every tile; these pin the counts themselves:
// - hand-computed plans where the shares are not capped by tile counts or by
//   max_partitions, with empty and negative rows beside long requests;
// - the proportional counts against an independent method (the remaining
//   slots dealt out at evenly spaced points along the concatenated tiles);
// - what one more row or one longer row may change, and that any single row
//   grown past a fresh plan (empty rows included) makes the plan stale.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "kernels/dispatch/route.hpp"
#include "kernels/dispatch/tiny_call.hpp"
#include "kernels/planner.hpp"
#include "kernels/planner_balanced.hpp"
#include "kernels/planner_test_support.hpp"

using namespace pav::kernels;
using plan_check::row;
using plan_check::tiles_of;

namespace {

WorkPlan plan_of(const std::vector<int32_t>& lens, PlanParams p) {
  p.num_seqs = int64_t(lens.size());
  WorkPlan w(p);
  w.refresh(lens.data());
  return w;
}

std::vector<int32_t> bounds_row(int32_t seq, int32_t lo, int32_t hi, int32_t len) { return {seq, lo, hi, len}; }

// Independent statement of the proportional counts: slot j (1..remaining) is
// dealt to the request whose tiles hold the point j * total / remaining of the
// concatenated tiles (a point on a boundary belongs to the request ending
// there); each nonempty request also gets its own first slot; then the caps.
// Exact integer comparison: point j lies in request b when
// cum_before * remaining < j * total <= cum_after * remaining.
std::vector<int64_t> dealt_counts(const std::vector<int32_t>& lens, int64_t capacity, int64_t maxp) {
  const size_t B = lens.size();
  std::vector<int64_t> tiles(B), counts(B, 0);
  int64_t total = 0, nonempty = 0;
  for (size_t b = 0; b < B; ++b) {
    tiles[b] = tiles_of(lens[b]);
    total += tiles[b];
    nonempty += tiles[b] > 0;
  }
  const int64_t remaining = capacity - nonempty;
  const int64_t denom = std::max<int64_t>(total, 1);
  size_t b = 0;
  int64_t before = 0;  // tiles of requests before b
  for (int64_t j = 1; j <= remaining; ++j) {
    while (b < B && (before + tiles[b]) * remaining < j * denom) before += tiles[b++];
    if (b < B) ++counts[b];
  }
  for (size_t i = 0; i < B; ++i)
    counts[i] = std::min({counts[i] + (tiles[i] > 0 ? 1 : 0), tiles[i], maxp});
  return counts;
}

// Task p of a request with `count` tasks over `tiles` tiles, computed tile by
// tile: tile t belongs to task ceil((t + 1) * count / tiles) - 1.
std::vector<std::pair<int64_t, int64_t>> dealt_tiles(int64_t tiles, int64_t count) {
  std::vector<std::pair<int64_t, int64_t>> spans(size_t(count), {-1, -1});
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t p = ((t + 1) * count + tiles - 1) / tiles - 1;
    if (spans[size_t(p)].first < 0) spans[size_t(p)].first = t;
    spans[size_t(p)].second = t + 1;
  }
  return spans;
}

}  // namespace

// lens 0, 25500, -7, 5001, 0 (tiles 0, 100, 0, 20, 0); Hkv 3, CU 64, budget 70:
// per head ceil(70/3) = 24 (a floor would give 23); capacity min(5*64, max(5, 24)) = 24.
// nonempty 2, remaining 22, total 120.
// count1 = 1 + floor(100*22/120) - 0 = 1 + 18 = 19 (< 100 tiles, < 64: not capped);
// count3 = 1 + floor(120*22/120) - floor(100*22/120) = 1 + 22 - 18 = 5 (< 20 tiles).
// Tiles of request 1: floor(p*100/19); of request 3: floor(p*20/5) = 4p.
TEST(PlannerExact, ProportionalSharesUncappedBesideEmptyRows) {
  const std::vector<int32_t> lens{0, 25500, -7, 5001, 0};
  const WorkPlan p = plan_of(lens, {0, 3, 64, 0, 70});
  ASSERT_EQ(p.capacity(), 24);
  EXPECT_EQ(p.reduce_info(), (std::vector<int32_t>{0, 0, 0, 19, 19, 0, 19, 5, 24, 0}));
  const int32_t b1[] = {0, 5, 10, 15, 21, 26, 31, 36, 42, 47, 52, 57, 63, 68, 73, 78, 84, 89, 94, 100};
  for (int k = 0; k < 19; ++k) EXPECT_EQ(row(p, k), bounds_row(1, b1[k], b1[k + 1], 25500)) << "task " << k;
  for (int k = 0; k < 5; ++k) EXPECT_EQ(row(p, 19 + k), bounds_row(3, 4 * k, 4 * k + 4, 5001)) << "task " << k;
  EXPECT_EQ(p.active_tasks(), 24);
}

// A long request between two short ones and an empty one; Hkv 1, CU 16, budget 12:
// capacity min(4*16, max(4, 12)) = 12; tiles 1, 40, 0, 3; nonempty 3, remaining 9, total 44.
// cum 1, 41, 41, 44: floor(cum*9/44) = 0, 8, 8, 9.
// counts: min(1+0, 1) = 1; 1 + 8 = 9 (< 40, < 16); 0; min(1 + 1, 3) = 2.
TEST(PlannerExact, ProportionalLongRequestBetweenShortOnes) {
  const std::vector<int32_t> lens{100, 10240, 0, 700};
  const WorkPlan p = plan_of(lens, {0, 1, 16, 0, 12});
  ASSERT_EQ(p.capacity(), 12);
  EXPECT_EQ(p.reduce_info(), (std::vector<int32_t>{0, 1, 1, 9, 10, 0, 10, 2}));
  EXPECT_EQ(row(p, 0), bounds_row(0, 0, 1, 100));
  const int32_t b1[] = {0, 4, 8, 13, 17, 22, 26, 31, 35, 40};  // floor(p*40/9)
  for (int k = 0; k < 9; ++k) EXPECT_EQ(row(p, 1 + k), bounds_row(1, b1[k], b1[k + 1], 10240)) << "task " << k;
  EXPECT_EQ(row(p, 10), bounds_row(3, 0, 1, 700));  // floor(p*3/2): 0, 1, 3
  EXPECT_EQ(row(p, 11), bounds_row(3, 1, 3, 700));
}

// The first batch under the balanced policy (split cost 1, min chunk 2):
// task budget ceil(70/3) = 24; capacity min(5*64, 5 + 24) = 29; limit min(29, max(2, 24)) = 24.
// Target search from max(1, ceil(120/24)) = 5: at v = 5 each task may hold 4 tiles
// (v - split cost): ceil(100/4) + ceil(20/4) = 25 + 5 = 30 > 24; at v = 6, 5 tiles:
// 20 + 4 = 24 fits. Second wave? 2*6 = 12 > 3*ceil(120/24) = 15 is false: no.
// Split, since 6 + 1 < 100. Counts 20 (5 tiles each) and 4 (5 tiles each).
TEST(PlannerExact, BalancedTargetBesideEmptyRows) {
  const std::vector<int32_t> lens{0, 25500, -7, 5001, 0};
  PlanParams params{0, 3, 64, 0, 70, PlanPolicy::balanced};
  const WorkPlan p = plan_of(lens, params);
  ASSERT_EQ(p.capacity(), 29);
  EXPECT_EQ(p.reduce_info(), (std::vector<int32_t>{0, 0, 0, 20, 20, 0, 20, 4, 24, 0}));
  for (int k = 0; k < 20; ++k) EXPECT_EQ(row(p, k), bounds_row(1, 5 * k, 5 * k + 5, 25500)) << "task " << k;
  for (int k = 0; k < 4; ++k) EXPECT_EQ(row(p, 20 + k), bounds_row(3, 5 * k, 5 * k + 5, 5001)) << "task " << k;
  for (int i = 24; i < 29; ++i) EXPECT_EQ(row(p, i), bounds_row(0, 0, 0, 0)) << "padding " << i;
}

namespace {

struct Batch {
  std::vector<int32_t> lens;
  int64_t hkv, cu, maxp, budget;
};

// Batches whose tile counts stay scannable, with empty and negative rows often
// beside long requests, and budgets small enough that shares are not all capped.
rc::Gen<Batch> gen_batch() {
  return rc::gen::exec([] {
    Batch s;
    const int n = *rc::gen::inRange(1, 24);
    s.lens = *rc::gen::container<std::vector<int32_t>>(
        size_t(n), rc::gen::weightedOneOf<int32_t>({
                       {3, rc::gen::just<int32_t>(0)},
                       {1, rc::gen::element<int32_t>(-1, -256, INT32_MIN)},
                       {3, rc::gen::inRange<int32_t>(1, 2048)},
                       {3, rc::gen::inRange<int32_t>(2048, 120000)},
                   }));
    s.hkv = *rc::gen::element<int64_t>(1, 2, 3, 8);
    s.cu = *rc::gen::element<int64_t>(4, 16, 80, 132);
    s.maxp = *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(0)}, {2, rc::gen::inRange<int64_t>(1, s.cu + 1)}});
    s.budget = *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(0)}, {3, rc::gen::inRange<int64_t>(1, 400)}});
    return s;
  });
}

PlanParams params_of(const Batch& s, PlanPolicy policy = PlanPolicy::proportional) {
  return {int64_t(s.lens.size()), s.hkv, s.cu, s.maxp, s.budget, policy};
}

}  // namespace

RC_GTEST_PROP(PlannerExactProps, ProportionalCountsAndTilesMatchTheDealtSlots, ()) {
  const Batch s = *gen_batch();
  const WorkPlan p = plan_of(s.lens, params_of(s));
  const int64_t B = int64_t(s.lens.size());
  const int64_t maxp = s.maxp ? s.maxp : s.cu;
  const int64_t budget = s.budget ? s.budget : 2 * s.cu;
  const int64_t per_head = (budget + s.hkv - 1) / s.hkv;
  const int64_t capacity = std::min(B * maxp, std::max(B, per_head));
  RC_ASSERT(p.capacity() == capacity);
  const std::vector<int64_t> counts = dealt_counts(s.lens, capacity, maxp);
  int64_t first = 0;
  for (int64_t b = 0; b < B; ++b) {
    RC_ASSERT(p.reduce_info()[2 * b] == first);
    RC_ASSERT(p.reduce_info()[2 * b + 1] == counts[size_t(b)]);
    const auto spans = dealt_tiles(tiles_of(s.lens[size_t(b)]), counts[size_t(b)]);
    for (int64_t k = 0; k < counts[size_t(b)]; ++k)
      RC_ASSERT(row(p, first + k) == bounds_row(int32_t(b), int32_t(spans[size_t(k)].first),
                                                int32_t(spans[size_t(k)].second), s.lens[size_t(b)]));
    first += counts[size_t(b)];
  }
  for (int64_t i = first; i < capacity; ++i) RC_ASSERT(row(p, i) == bounds_row(0, 0, 0, 0));
}

// Counts depend on tile counts only: a longer row within the same tiles changes
// that row's recorded length and nothing else, under either policy.
RC_GTEST_PROP(PlannerExactProps, GrowingARowWithinItsTilesChangesOnlyItsLength, ()) {
  const Batch s = *gen_batch();
  const PlanPolicy policy = *rc::gen::element(PlanPolicy::proportional, PlanPolicy::balanced);
  const size_t i = *rc::gen::inRange<size_t>(0, s.lens.size());
  RC_PRE(s.lens[i] > 0 && s.lens[i] % 256 != 0);
  auto grown = s.lens;
  grown[i] += *rc::gen::inRange<int32_t>(1, 256 - s.lens[i] % 256 + 1);
  RC_PRE(tiles_of(grown[i]) == tiles_of(s.lens[i]));
  const WorkPlan a = plan_of(s.lens, params_of(s, policy));
  const WorkPlan b = plan_of(grown, params_of(s, policy));
  RC_ASSERT(a.reduce_info() == b.reduce_info());
  const int64_t first = a.reduce_info()[2 * i], count = a.reduce_info()[2 * i + 1];
  for (int64_t slot = 0; slot < a.capacity(); ++slot) {
    auto expect = row(a, slot);
    if (slot >= first && slot < first + count) expect[3] = grown[i];
    RC_ASSERT(row(b, slot) == expect);
  }
}

// One more empty row at the end, when the capacity stays the same, leaves every
// earlier row's tasks as they were and gets no task (under either policy).
RC_GTEST_PROP(PlannerExactProps, AppendingAnEmptyRowChangesNothingElse, ()) {
  const Batch s = *gen_batch();
  const PlanPolicy policy = *rc::gen::element(PlanPolicy::proportional, PlanPolicy::balanced);
  auto more = s.lens;
  more.push_back(*rc::gen::element<int32_t>(0, -1, INT32_MIN));
  RC_PRE(more.size() <= size_t(kMaxPlanBatch));
  const WorkPlan a = plan_of(s.lens, params_of(s, policy));
  Batch t = s;
  t.lens = more;
  const WorkPlan b = plan_of(more, params_of(t, policy));
  RC_PRE(a.capacity() == b.capacity());
  const int64_t B = int64_t(s.lens.size());
  for (int64_t k = 0; k < 2 * B; ++k) RC_ASSERT(a.reduce_info()[size_t(k)] == b.reduce_info()[size_t(k)]);
  RC_ASSERT(b.reduce_info()[size_t(2 * B)] == int32_t(a.active_tasks()));
  RC_ASSERT(b.reduce_info()[size_t(2 * B + 1)] == 0);
  RC_ASSERT(a.work_info() == b.work_info());
}

// Any single row grown by any amount makes a fresh plan stale: plan_is_fresh
// refuses it, whether the row had tasks or none (an empty or negative row that
// now has tokens), under either policy; the unchanged lengths stay fresh.
RC_GTEST_PROP(PlannerExactProps, GrowingAnySingleRowMakesTheFreshPlanStale, ()) {
  const Batch s = *gen_batch();
  const PlanPolicy policy = *rc::gen::element(PlanPolicy::proportional, PlanPolicy::balanced);
  WorkPlan p = plan_of(s.lens, params_of(s, policy));
  const int64_t B = int64_t(s.lens.size());
  RC_ASSERT(plan_is_fresh(p.view(), s.lens.data(), B));
  const int32_t by = *rc::gen::element<int32_t>(1, 2, 255, 256, 257, 4096);
  for (int64_t b = 0; b < B; ++b) {
    auto live = s.lens;
    const int64_t grown = std::max<int64_t>(live[size_t(b)], 0) + by;
    if (grown > INT32_MAX) continue;
    live[size_t(b)] = int32_t(grown);
    RC_ASSERT_FALSE(plan_is_fresh(p.view(), live.data(), B));
  }
}

// The router's freshness check (plan_matches) agrees: a plan refreshed from the
// live lengths matches; any single row grown, whether it had tasks or none,
// is refused; a row of length <= 0 shrinking further changes nothing.
RC_GTEST_PROP(PlannerExactProps, RouterRefusesAPlanOnceAnySingleRowGrew, ()) {
  pav::kernels::testing::TinySpec spec;
  spec.lens = *rc::gen::container<std::vector<int32_t>>(
      *rc::gen::inRange<size_t>(1, 9),
      rc::gen::weightedOneOf<int32_t>({{2, rc::gen::just<int32_t>(0)},
                                       {1, rc::gen::element<int32_t>(-1, -300)},
                                       {3, rc::gen::inRange<int32_t>(1, 3000)}}));
  spec.cu = *rc::gen::element(4, 8, 16);
  spec.hkv = *rc::gen::element<int64_t>(1, 2);
  pav::kernels::testing::TinyCall t(spec);
  const PlanView plan = t.make_plan();
  RC_ASSERT(pav::kernels::dispatch::plan_matches(plan, t.call));
  const int32_t by = *rc::gen::element<int32_t>(1, 255, 256, 257);
  for (size_t b = 0; b < t.lens.size(); ++b) {
    const int32_t was = t.lens[b];
    t.lens[b] = std::max<int32_t>(was, 0) + by;
    RC_ASSERT_FALSE(pav::kernels::dispatch::plan_matches(plan, t.call));
    if (was <= 0) {
      t.lens[b] = was - 1;  // still empty: nothing to refresh
      RC_ASSERT(pav::kernels::dispatch::plan_matches(plan, t.call));
    }
    t.lens[b] = was;
  }
}
