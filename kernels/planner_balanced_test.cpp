// SPDX-License-Identifier: Apache-2.0
// The balanced planner policy: hand-computed plans, and properties over
// generated uneven batches (the proportional suite's length mix). The oracle
// below restates the documented algorithm with a plain linear chunk scan, so a
// wrong search bound or comparison in the planner shows up as a different plan.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <climits>
#include <random>
#include <vector>

#include "kernels/planner.hpp"
#include "kernels/planner_balanced.hpp"
#include "kernels/planner_test_support.hpp"

using namespace pav::kernels;

namespace {

PlanParams balanced_params(size_t n, int64_t hkv, int64_t cu, int64_t maxp = 0, int64_t budget = 0,
                           int64_t split_cost = -1, int64_t min_chunk = 0) {
  PlanParams p{int64_t(n), hkv, cu, maxp, budget, PlanPolicy::balanced};
  p.split_cost_tiles = split_cost;
  p.min_chunk_tiles = min_chunk;
  return p;
}

WorkPlan build(const std::vector<int32_t>& lens, const PlanParams& params) {
  WorkPlan p(params);
  p.refresh(lens.data());
  return p;
}

std::vector<int32_t> counts_of(const WorkPlan& p) {
  std::vector<int32_t> c;
  for (int64_t b = 0; b < p.params().num_seqs; ++b) c.push_back(p.reduce_info()[2 * b + 1]);
  return c;
}

using plan_check::row;
using plan_check::tiles_of;
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The documented algorithm, restated: linear scan for the cheapest target.
// Only for batches whose longest request is short enough to scan.
std::vector<int32_t> oracle_counts(const std::vector<int32_t>& lens, int64_t hkv, int64_t maxp, int64_t budget,
                                   int64_t s, int64_t mc) {
  const int64_t B = int64_t(lens.size());
  std::vector<int64_t> t(B);
  int64_t n = 0, longest = 0;
  for (int64_t b = 0; b < B; ++b) {
    t[b] = tiles_of(lens[b]);
    n += t[b] > 0;
    longest = std::max(longest, t[b]);
  }
  std::vector<int32_t> out(B, 0);
  if (n == 0) return out;
  const int64_t wave = cdiv(budget, hkv);
  const int64_t capacity = std::min(B * maxp, B + wave);
  const int64_t limit = std::min(capacity, std::max(n, wave));
  int64_t sum_tiles = 0;
  for (int64_t b = 0; b < B; ++b) sum_tiles += t[b];
  // Fewest partitions with cost <= v, or -1 when the caps forbid it.
  auto fewest = [&](int64_t x, int64_t v) -> int64_t {
    const int64_t most = std::max<int64_t>(1, std::min(maxp, x / mc));
    for (int64_t k = 1; k <= most; ++k)
      if (cdiv(x, k) + (k > 1 ? s : 0) <= v) return k;
    return -1;
  };
  // Smallest target from `from` up whose fewest-partition counts fit `lim`.
  auto scan = [&](int64_t from, int64_t lim) {
    for (int64_t v = from;; ++v) {
      int64_t tasks = 0;
      bool ok = true;
      for (int64_t b = 0; b < B && ok; ++b) {
        if (t[b] == 0) continue;
        const int64_t k = fewest(t[b], v);
        ok = k > 0;
        tasks += k;
      }
      if (ok && tasks <= lim) return v;
    }
  };
  int64_t v = limit <= n ? longest : scan(1, limit);
  // A second wave when the one-wave critical path is over 1.5x the mean work
  // per slot: the scan restarts at that mean with the whole capacity.
  if (capacity > limit && 2 * v > 3 * cdiv(sum_tiles, wave)) v = scan(std::min(longest, cdiv(sum_tiles, wave)), capacity);
  const bool split = v + s < longest;
  for (int64_t b = 0; b < B; ++b)
    if (t[b] > 0) out[b] = split ? int32_t(fewest(t[b], v)) : 1;
  return out;
}

// Modeled critical path: longest task, plus the split cost on split requests.
int64_t modeled_cost(const WorkPlan& p, const std::vector<int32_t>& lens, int64_t s) {
  int64_t cost = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    const int64_t k = p.reduce_info()[2 * b + 1];
    if (k > 0) cost = std::max(cost, cdiv(tiles_of(lens[b]), k) + (k > 1 ? s : 0));
  }
  return cost;
}

rc::Gen<int32_t> gen_len() {
  return rc::gen::weightedOneOf<int32_t>({
      {3, rc::gen::element<int32_t>(0, 1, 255, 256, 257, 511, 512, 513, 1024, 2303, 2304, 2305, 4099, 65537,
                                    200003)},
      {3, rc::gen::inRange<int32_t>(1, 9000)},
      {2, rc::gen::mapcat(rc::gen::inRange(0, 31), [](int b) {
         const int64_t lo = int64_t(1) << b;
         return rc::gen::inRange<int32_t>(int32_t(lo), int32_t(std::min<int64_t>(2 * lo, INT32_MAX)));
       })},
      {1, rc::gen::element<int32_t>(INT32_MAX, -1, -300, INT32_MIN, 0)},
  });
}

struct Shape {
  std::vector<int32_t> lens;
  int64_t hkv, cu, maxp, budget, split_cost, min_chunk;
  PlanParams params() const { return balanced_params(lens.size(), hkv, cu, maxp, budget, split_cost, min_chunk); }
  int64_t resolved_maxp() const { return maxp ? maxp : cu; }
  int64_t resolved_budget() const { return budget ? budget : 2 * cu; }
  int64_t resolved_cost() const { return split_cost == -1 ? kBalancedSplitCostTiles : split_cost; }
  int64_t resolved_chunk() const { return min_chunk ? min_chunk : kBalancedMinChunkTiles; }
};

rc::Gen<Shape> gen_shape(rc::Gen<int32_t> lens = gen_len()) {
  return rc::gen::exec([lens] {
    Shape s;
    const int n = *rc::gen::weightedOneOf<int>({{8, rc::gen::inRange(1, 40)}, {1, rc::gen::inRange(1, 4097)}});
    s.lens = *rc::gen::container<std::vector<int32_t>>(n, lens);
    s.hkv = *rc::gen::element<int64_t>(1, 2, 4, 8, 3);
    s.cu = *rc::gen::element<int64_t>(1, 8, 80, 132, 256, 304);
    s.maxp = *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, s.cu + 1)}});
    s.budget = *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 5000)}});
    s.split_cost = *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(-1)}, {1, rc::gen::inRange<int64_t>(0, 40)}});
    s.min_chunk = *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 9)}});
    return s;
  });
}

// Lengths short enough for the oracle's linear scan (<= 4096 tiles).
rc::Gen<int32_t> gen_scannable_len() {
  return rc::gen::weightedOneOf<int32_t>({
      {2, rc::gen::element<int32_t>(0, 1, 256, 257, 512, 513, 2048, -7)},
      {3, rc::gen::inRange<int32_t>(1, 20000)},
      {2, rc::gen::inRange<int32_t>(20000, 1 << 20)},
  });
}

}  // namespace

// ---- hand-computed plans -------------------------------------------------------------

TEST(PlannerBalanced, EqualBatchFillingTheBudgetIsNeverSplit) {
  // B 33, Hkv 8, CU 132: budget 264 -> 33 tasks per head = B. One partition
  // each. Capacity 33 + 33 = 66, but the one-wave critical path (128 tiles) is
  // the mean work per slot (33 * 128 / 33), so no second wave.
  const std::vector<int32_t> lens(33, 32768);
  const WorkPlan p = build(lens, balanced_params(lens.size(), 8, 132));
  EXPECT_EQ(p.capacity(), 66);
  EXPECT_EQ(counts_of(p), std::vector<int32_t>(33, 1));
  for (int b = 0; b < 33; ++b) EXPECT_EQ(row(p, b), (std::vector<int32_t>{b, 0, 128, 32768}));
  EXPECT_FALSE(plan_needs_reduce(p.reduce_info().data(), 33));
}

TEST(PlannerBalanced, EqualBatchBelowTheBudgetSplitsEvenly) {
  // B 16 x 128 tiles, Hkv 8, CU 132: limit = min(33, max(16, 33)) = 33.
  // Cheapest target with 16 * ceil(128 / (v - 1)) <= 33 is v = 65: two tasks
  // of 64 each; 65 + 1 < 128 so split. (Proportional would hand one request a
  // third partition: 17 spare over 16 equal shares.)
  const std::vector<int32_t> lens(16, 32768);
  const WorkPlan p = build(lens, balanced_params(lens.size(), 8, 132));
  EXPECT_EQ(counts_of(p), std::vector<int32_t>(16, 2));
  for (int b = 0; b < 16; ++b) {
    EXPECT_EQ(row(p, 2 * b), (std::vector<int32_t>{b, 0, 64, 32768}));
    EXPECT_EQ(row(p, 2 * b + 1), (std::vector<int32_t>{b, 64, 128, 32768}));
  }
  EXPECT_EQ(row(p, 32), (std::vector<int32_t>{0, 0, 0, 0}));
}

TEST(PlannerBalanced, PeerBatchOfTwenty) {
  // tiles 2985, 1305, 469, 469 and 2 x (4, 8, ..., 32): sum 5516, 20 nonempty;
  // Hkv 8, CU 132: one wave is 33 tasks per head, capacity 20 + 33 = 53.
  // One wave: search [ceil(5516 / 33) = 168, 2985] with limit 33 gives v = 333
  // (9 + 4 + 2 + 2 + 16 = 33). 2 * 333 > 3 * 168: the 9 tasks of 332 tiles hold
  // the wave while the 16 short requests' slots idle, so a second wave: search
  // [168, 2985] with limit 53. v = 168 (tasks of at most 167 tiles) fits at
  // once: ceil(2985 / 167) = 18, ceil(1305 / 167) = 8, 3, 3, and 16 whole: 48.
  std::vector<int32_t> lens = {764000, 334000, 120000, 120000};
  for (int r = 0; r < 2; ++r)
    for (int k = 1; k <= 8; ++k) lens.push_back(1000 * k);
  const WorkPlan p = build(lens, balanced_params(lens.size(), 8, 132));
  EXPECT_EQ(p.capacity(), 53);
  std::vector<int32_t> want = {18, 8, 3, 3};
  want.resize(20, 1);
  EXPECT_EQ(counts_of(p), want);
  // floor(p * 2985 / 18)
  const int b0[] = {0, 165, 331, 497, 663, 829, 995, 1160, 1326, 1492, 1658, 1824, 1990, 2155, 2321, 2487, 2653, 2819, 2985};
  for (int k = 0; k < 18; ++k) EXPECT_EQ(row(p, k), (std::vector<int32_t>{0, b0[k], b0[k + 1], 764000}));
  EXPECT_EQ(row(p, 18), (std::vector<int32_t>{1, 0, 163, 334000}));  // floor(1305 / 8)
  EXPECT_EQ(row(p, 26), (std::vector<int32_t>{2, 0, 156, 120000}));  // floor(469 / 3)
  EXPECT_EQ(row(p, 32), (std::vector<int32_t>{4, 0, 4, 1000}));
  EXPECT_EQ(row(p, 48), (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(p.active_tasks(), 48);
  EXPECT_TRUE(plan_row_is_direct(p.reduce_info().data(), 4));
  EXPECT_FALSE(plan_row_is_direct(p.reduce_info().data(), 0));
  EXPECT_TRUE(plan_needs_reduce(p.reduce_info().data(), 20));
}

TEST(PlannerBalanced, SecondWaveForALongRequestInAFullBatch) {
  // 64 requests, Hkv 8, CU 132: one wave is 33 tasks per head, fewer than the
  // 64 nonempty rows, so the one-wave plan splits nothing (v = 2985, the 764k
  // request). Mean work per slot: ceil((2985 + 63 * 16) / 33) = ceil(3993 / 33)
  // = 121; 2 * 2985 > 3 * 121, so a second wave with capacity 64 + 33 = 97:
  // v = 121 fits at once (ceil(2985 / 120) = 25, the 63 others whole: 88).
  std::vector<int32_t> lens(64, 4096);
  lens[5] = 764000;
  const WorkPlan p = build(lens, balanced_params(lens.size(), 8, 132));
  EXPECT_EQ(p.capacity(), 97);
  std::vector<int32_t> want(64, 1);
  want[5] = 25;
  EXPECT_EQ(counts_of(p), want);
  EXPECT_EQ(p.active_tasks(), 88);
  // The same batch with equal lengths stays one task per request.
  const std::vector<int32_t> equal(64, 4096);
  EXPECT_EQ(counts_of(build(equal, balanced_params(equal.size(), 8, 132))), std::vector<int32_t>(64, 1));
}

TEST(PlannerBalanced, RequestsOffTheCriticalPathStayWhole) {
  // tiles 1000 and 100, max_partitions 2, CU 8, Hkv 1: capacity min(4, 16) = 4,
  // limit 4. The long request needs 2 tasks of <= v - 1 tiles, so v >= 501;
  // at 501 the short request (100 <= 501) stays whole: counts 2, 1.
  // Proportional gives 2, 2 (remaining 2 over 1100 tiles).
  const std::vector<int32_t> lens = {256000, 25600};
  const WorkPlan p = build(lens, balanced_params(lens.size(), 1, 8, 2));
  EXPECT_EQ(counts_of(p), (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(row(p, 0), (std::vector<int32_t>{0, 0, 500, 256000}));
  EXPECT_EQ(row(p, 1), (std::vector<int32_t>{0, 500, 1000, 256000}));
  EXPECT_EQ(row(p, 2), (std::vector<int32_t>{1, 0, 100, 25600}));
  EXPECT_EQ(row(p, 3), (std::vector<int32_t>{0, 0, 0, 0}));
  WorkPlan prop({2, 1, 8, 2});
  prop.refresh(lens.data());
  EXPECT_EQ(counts_of(prop), (std::vector<int32_t>{2, 2}));
}

TEST(PlannerBalanced, MarginalSplitIsNotWorthAReduce) {
  // tiles 101 and 100 (limit 3 via budget 3): v = 100 fits with counts 2, 1
  // (v = 99 needs 2 + 2); 100 + 1 < 101 fails, so nothing is split.
  const std::vector<int32_t> lens = {25856, 25600};
  const WorkPlan p = build(lens, balanced_params(lens.size(), 1, 132, 0, 3));
  EXPECT_EQ(p.capacity(), 5);  // 2 requests + a wave of 3; the wave's v = 100 is under 1.5 x ceil(201 / 3)
  EXPECT_EQ(counts_of(p), (std::vector<int32_t>{1, 1}));
  // With no split cost the same batch splits the longer request.
  const WorkPlan free = build(lens, balanced_params(lens.size(), 1, 132, 0, 3, 0));
  EXPECT_EQ(counts_of(free), (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(row(free, 0), (std::vector<int32_t>{0, 0, 50, 25856}));
  EXPECT_EQ(row(free, 1), (std::vector<int32_t>{0, 50, 101, 25856}));
}

TEST(PlannerBalanced, MinimumChunkAndParameters) {
  // One request of 8 tiles, Hkv 1, CU 132: min chunk 2 caps it at 4 tasks of 2
  // (v = 3; v = 2 would need 8 tasks of 1).
  const WorkPlan p = build({2048}, balanced_params(1, 1, 132));
  EXPECT_EQ(counts_of(p), (std::vector<int32_t>{4}));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(row(p, k), (std::vector<int32_t>{0, 2 * k, 2 * k + 2, 2048}));
  // 4 tiles: 2 tasks would cost 2 + 1 = 3, and 3 + 1 < 4 fails: whole.
  EXPECT_EQ(counts_of(build({1024}, balanced_params(1, 1, 132))), (std::vector<int32_t>{1}));
  // 3 tiles can never split under min chunk 2.
  EXPECT_EQ(counts_of(build({768}, balanced_params(1, 1, 132, 0, 0, 0))), (std::vector<int32_t>{1}));
  // Split cost 0, min chunk 1: eight one-tile tasks.
  EXPECT_EQ(counts_of(build({2048}, balanced_params(1, 1, 132, 0, 0, 0, 1))), (std::vector<int32_t>{8}));
  // Min chunk 3: floor(8 / 3) = 2 tasks, [0, 4) and [4, 8).
  const WorkPlan m3 = build({2048}, balanced_params(1, 1, 132, 0, 0, -1, 3));
  EXPECT_EQ(counts_of(m3), (std::vector<int32_t>{2}));
  EXPECT_EQ(row(m3, 1), (std::vector<int32_t>{0, 4, 8, 2048}));
}

TEST(PlannerBalanced, EmptyAndNegativeRows) {
  const WorkPlan none = build({0, -5, 0}, balanced_params(3, 1, 132));
  EXPECT_EQ(counts_of(none), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(none.reduce_info(), (std::vector<int32_t>{0, 0, 0, 0, 0, 0}));
  for (int64_t i = 0; i < none.capacity(); ++i) EXPECT_EQ(row(none, i), (std::vector<int32_t>{0, 0, 0, 0}));
  const WorkPlan mixed = build({0, 2048, -1}, balanced_params(3, 1, 132));
  EXPECT_EQ(mixed.reduce_info(), (std::vector<int32_t>{0, 0, 0, 4, 4, 0}));
}

TEST(PlannerBalanced, ResolveRejectsBadCostParams) {
  EXPECT_THROW(WorkPlan(balanced_params(1, 1, 132, 0, 0, -2)), std::invalid_argument);
  EXPECT_THROW(WorkPlan(balanced_params(1, 1, 132, 0, 0, -1, -1)), std::invalid_argument);
  const PlanParams r = resolve(balanced_params(1, 1, 132));
  EXPECT_EQ(r.split_cost_tiles, kBalancedSplitCostTiles);
  EXPECT_EQ(r.min_chunk_tiles, kBalancedMinChunkTiles);
}

TEST(PlannerBalanced, HelpersHandComputed) {
  EXPECT_EQ(balanced_task_limit(33, 20, 33), 33);
  EXPECT_EQ(balanced_task_limit(40, 35, 33), 35);  // nonempty rows fill the budget
  EXPECT_EQ(balanced_task_limit(20, 5, 33), 20);
  EXPECT_EQ(balanced_max_count(9, 132, 2), 4);
  EXPECT_EQ(balanced_max_count(1, 132, 2), 1);
  EXPECT_EQ(balanced_max_count(1000, 7, 2), 7);
  EXPECT_EQ(balanced_cost(2985, 9, 1), 333);
  EXPECT_EQ(balanced_cost(32, 1, 1), 32);
  EXPECT_EQ(balanced_count_for(2985, 333, 1, 132), 9);   // ceil(2985 / 332)
  EXPECT_EQ(balanced_count_for(1305, 333, 1, 132), 4);   // ceil(1305 / 332)
  EXPECT_EQ(balanced_count_for(333, 333, 1, 132), 1);    // fits whole
  EXPECT_EQ(balanced_count_for(0, 333, 1, 132), 0);
  EXPECT_EQ(balanced_count_for(2985, 333, 1, 8), kBalancedUnreachable);  // needs 9 > 8
  EXPECT_EQ(balanced_count_for(10, 3, 3, 10), kBalancedUnreachable);     // no room left for a task
  const BalancedSearch none = balanced_search_init(100, 40, 3, 3);
  EXPECT_TRUE(none.done());
  EXPECT_EQ(none.lo, 40);
  const BalancedSearch s = balanced_search_init(5516, 2985, 20, 33);
  EXPECT_EQ(s.lo, 168);  // ceil(5516 / 33)
  EXPECT_EQ(s.hi, 2985);
  EXPECT_EQ(balanced_capacity(20, 8, 132, 264), 53);  // 20 + ceil(264 / 8)
  EXPECT_EQ(balanced_capacity(2, 1, 2, 16), 4);       // 2 partitions per request at most
  EXPECT_TRUE(balanced_use_second_wave(333, 5516, 33));   // 666 > 3 * 168 = 504
  EXPECT_FALSE(balanced_use_second_wave(252, 5516, 33));  // 504 is not > 504
  const BalancedSearch w2 = balanced_second_wave_search_init(5516, 333, 20, 33);
  EXPECT_EQ(w2.lo, 168);
  EXPECT_EQ(w2.hi, 333);  // the one-wave target
  EXPECT_EQ(balanced_second_wave_search_init(100, 40, 3, 1).lo, 40);  // never above the one-wave target
  EXPECT_EQ(balanced_count_for(int64_t(3) << 31, 1 << 20, 1, int64_t(1) << 40), 6145);  // 64-bit path: ceil(6 Gi / (1 Mi - 1))
  EXPECT_TRUE(balanced_second_wave_search_init(0, 0, 0, 33).done());
}

TEST(PlannerBalancedProps, OptimalUnderTheModelOnSmallBatches) {
  // Every count vector within the caps and the limit, enumerated: when the
  // plan splits, no vector has a cheaper modeled critical path. Seeded: 2024.
  std::mt19937 rng(2024);
  for (int iter = 0; iter < 3000; ++iter) {
    const int B = 1 + int(rng() % 4);
    std::vector<int32_t> lens(B);
    for (auto& l : lens) l = int32_t(1 + rng() % (30 * 256));
    const int64_t hkv = 1 + rng() % 2, cu = 1 + rng() % 8, maxp = 1 + rng() % cu, budget = 1 + rng() % 16;
    const int64_t s = rng() % 5, mc = 1 + rng() % 3;
    const WorkPlan p = build(lens, balanced_params(lens.size(), hkv, cu, maxp, budget, s, mc));
    std::vector<int64_t> t(B), most(B);
    int64_t longest = 0;
    for (int b = 0; b < B; ++b) {
      t[b] = tiles_of(lens[b]);
      most[b] = std::max<int64_t>(1, std::min(maxp, t[b] / mc));
      longest = std::max(longest, t[b]);
    }
    const int64_t limit = std::min(p.capacity(), std::max<int64_t>(B, cdiv(budget, hkv)));
    int64_t best = INT64_MAX;
    std::vector<int64_t> k(B, 1);
    for (;;) {
      int64_t sum = 0, cost = 0;
      for (int b = 0; b < B; ++b) {
        sum += k[b];
        cost = std::max(cost, cdiv(t[b], k[b]) + (k[b] > 1 ? s : 0));
      }
      if (sum <= limit) best = std::min(best, cost);
      int b = 0;
      while (b < B && ++k[b] > most[b]) k[b++] = 1;
      if (b == B) break;
    }
    const int64_t got = modeled_cost(p, lens, s);
    int64_t tasks = 0, sum_tiles = 0;
    for (int b = 0; b < B; ++b) {
      tasks += p.reduce_info()[2 * b + 1];
      sum_tiles += t[b];
    }
    if (tasks > limit) {
      // A second wave: only where the one-wave optimum idles the wave, and
      // never a worse critical path than that optimum.
      EXPECT_GT(2 * best, 3 * cdiv(sum_tiles, cdiv(budget, hkv))) << "iteration " << iter;
      EXPECT_LE(got, best) << "iteration " << iter;
      EXPECT_LE(tasks, p.capacity()) << "iteration " << iter;
    } else if (got == longest) {
      EXPECT_LE(longest, best + s) << "iteration " << iter;  // declined a split worth <= s
    } else {
      EXPECT_EQ(got, best) << "iteration " << iter << " lens[0] " << lens[0];
    }
  }
}

// ---- properties ------------------------------------------------------------------------

RC_GTEST_PROP(PlannerBalancedProps, InvariantsOfTheProportionalPlanHold, ()) {
  const Shape s = *gen_shape();
  const WorkPlan p = build(s.lens, s.params());
  const int64_t B = int64_t(s.lens.size()), maxp = s.resolved_maxp();
  // Capacity (scratch size): one wave plus one task per request.
  const int64_t per_head = s.resolved_budget() / s.hkv + (s.resolved_budget() % s.hkv != 0);
  RC_ASSERT(p.capacity() == std::min(B * maxp, B + per_head));
  plan_check::assert_plan_layout(p, s.lens, maxp, s.resolved_chunk());
  RC_ASSERT(plan_is_fresh(const_cast<WorkPlan&>(p).view(), s.lens.data(), B));
}

RC_GTEST_PROP(PlannerBalancedProps, FullBatchSplitsOnlyForASecondWave, ()) {
  // When the nonempty rows fill a wave, the one-wave plan splits nothing (its
  // critical path is the longest request); any split then comes from the
  // second wave, which needs that request to exceed 1.5x the mean work per slot.
  const Shape s = *gen_shape();
  const WorkPlan p = build(s.lens, s.params());
  int64_t nonempty = 0, sum_tiles = 0, longest = 0;
  for (int32_t l : s.lens) {
    nonempty += l > 0;
    sum_tiles += tiles_of(l);
    longest = std::max(longest, tiles_of(l));
  }
  const int64_t per_head = (s.resolved_budget() + s.hkv - 1) / s.hkv;
  int64_t tasks = 0;
  for (int32_t c : counts_of(p)) tasks += c;
  RC_ASSERT(tasks <= p.capacity());
  if (nonempty >= per_head && tasks > nonempty) RC_ASSERT(2 * longest > 3 * cdiv(sum_tiles, per_head));
  if (nonempty >= per_head && 2 * longest <= 3 * cdiv(sum_tiles, per_head))
    for (size_t b = 0; b < s.lens.size(); ++b) RC_ASSERT(counts_of(p)[b] == (s.lens[b] > 0 ? 1 : 0));
}

RC_GTEST_PROP(PlannerBalancedProps, EqualBatchesGetEqualCounts, ()) {
  const Shape base = *gen_shape();
  Shape s = base;
  const int32_t len = *rc::gen::inRange<int32_t>(1, 1 << 22);
  std::fill(s.lens.begin(), s.lens.end(), len);
  const WorkPlan p = build(s.lens, s.params());
  const auto c = counts_of(p);
  RC_ASSERT(std::all_of(c.begin(), c.end(), [&](int32_t x) { return x == c[0]; }));
  const int64_t per_head = (s.resolved_budget() + s.hkv - 1) / s.hkv;
  if (int64_t(s.lens.size()) >= per_head) RC_ASSERT(c[0] == 1);
}

RC_GTEST_PROP(PlannerBalancedProps, MatchesTheDocumentedAlgorithm, ()) {
  const Shape s = *gen_shape(gen_scannable_len());
  RC_PRE(s.lens.size() <= 64);
  const WorkPlan p = build(s.lens, s.params());
  const auto want =
      oracle_counts(s.lens, s.hkv, s.resolved_maxp(), s.resolved_budget(), s.resolved_cost(), s.resolved_chunk());
  RC_ASSERT(counts_of(p) == want);
}

RC_GTEST_PROP(PlannerBalancedProps, ModeledCostWithinOneSplitOfProportional, ()) {
  // With min chunk 1 and no empty rows every proportional plan fits the
  // balanced search, so balanced's modeled critical path is at most
  // proportional's plus the one split cost it may decline to pay.
  Shape s = *gen_shape();
  s.min_chunk = 1;
  for (auto& l : s.lens) l = std::max(l, 1);
  const WorkPlan bal = build(s.lens, s.params());
  WorkPlan prop({int64_t(s.lens.size()), s.hkv, s.cu, s.maxp, s.budget});
  prop.refresh(s.lens.data());
  const int64_t cost = s.resolved_cost();
  RC_ASSERT(modeled_cost(bal, s.lens, cost) <= modeled_cost(prop, s.lens, cost) + cost);
}

RC_GTEST_PROP(PlannerBalancedProps, RefreshEqualsFreshBuildAndIsDeterministic, ()) {
  const Shape s = *gen_shape();
  const auto other = *rc::gen::container<std::vector<int32_t>>(s.lens.size(), gen_len());
  WorkPlan live(s.params());
  live.refresh(other.data());
  const int32_t* work_ptr = live.work_info().data();
  live.refresh(s.lens.data());  // in place, over a plan built from other lengths
  RC_ASSERT(live.work_info().data() == work_ptr);
  const WorkPlan fresh = build(s.lens, s.params());
  RC_ASSERT(live.work_info() == fresh.work_info());
  RC_ASSERT(live.reduce_info() == fresh.reduce_info());
  const WorkPlan again = build(s.lens, s.params());
  RC_ASSERT(again.work_info() == fresh.work_info());
  RC_ASSERT(again.reduce_info() == fresh.reduce_info());
}

RC_GTEST_PROP(PlannerBalancedProps, DirectRowsAreExactlyTheUnsplitOnes, ()) {
  const Shape s = *gen_shape();
  const WorkPlan p = build(s.lens, s.params());
  const auto c = counts_of(p);
  bool any_split = false;
  for (size_t b = 0; b < c.size(); ++b) {
    RC_ASSERT(plan_row_is_direct(p.reduce_info().data(), int64_t(b)) == (c[b] == 1));
    any_split |= c[b] > 1;
  }
  RC_ASSERT(plan_needs_reduce(p.reduce_info().data(), int64_t(c.size())) == any_split);
}
