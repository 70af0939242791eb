// SPDX-License-Identifier: Apache-2.0
// Planner: hand-computed plans, and properties over generated uneven batches
// (heavy-tailed, zero, negative and near-INT32_MAX lengths).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <climits>
#include <numeric>

#include "kernels/planner.hpp"
#include "kernels/planner_test_support.hpp"
#include "kernels/split_rules.hpp"

using namespace pav::kernels;

namespace {

WorkPlan build(const std::vector<int32_t>& lens, int64_t hkv, int64_t cu, int64_t maxp = 0, int64_t budget = 0) {
  WorkPlan p({int64_t(lens.size()), hkv, cu, maxp, budget});
  p.refresh(lens.data());
  return p;
}

using plan_check::row;
using plan_check::tiles_of;

// Lengths for the properties: small batches mostly, heavy-tailed values.
rc::Gen<int32_t> gen_len() {
  return rc::gen::weightedOneOf<int32_t>({
      {3, rc::gen::element<int32_t>(0, 1, 255, 256, 257, 511, 512, 513, 2303, 2304, 2305, 4099, 65537, 200003)},
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
  int64_t hkv, cu, maxp, budget;
};

rc::Gen<Shape> gen_shape() {
  return rc::gen::exec([] {
    Shape s;
    const int n = *rc::gen::weightedOneOf<int>({{8, rc::gen::inRange(1, 40)}, {1, rc::gen::inRange(1, 4097)}});
    s.lens = *rc::gen::container<std::vector<int32_t>>(n, gen_len());
    s.hkv = *rc::gen::element<int64_t>(1, 2, 4, 8, 3);
    s.cu = *rc::gen::element<int64_t>(1, 8, 80, 132, 256, 304);
    s.maxp = *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, s.cu + 1)}});
    s.budget = *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 5000)}});
    return s;
  });
}

}  // namespace

TEST(Planner, HandComputedExampleFromTheCli) {
  // lens 5, 0, 9000; Hkv 1; CU 256: capacity min(3*256, max(3, 512)) = 512.
  // tiles 1, 0, 36; remaining 512 - 2 = 510; total 37.
  // count0 = min(1 + floor(1*510/37) - 0, 1) = 1; count1 = 0;
  // count2 = min(1 + 510 - 13, 36) = 36.
  const WorkPlan p = build({5, 0, 9000}, 1, 256);
  EXPECT_EQ(p.capacity(), 512);
  EXPECT_EQ(p.reduce_info(), (std::vector<int32_t>{0, 1, 1, 0, 1, 36}));
  EXPECT_EQ(row(p, 0), (std::vector<int32_t>{0, 0, 1, 5}));
  for (int k = 0; k < 36; ++k) EXPECT_EQ(row(p, 1 + k), (std::vector<int32_t>{2, k, k + 1, 9000}));
  for (int i = 37; i < 512; ++i) EXPECT_EQ(row(p, i), (std::vector<int32_t>{0, 0, 0, 0}));
}

TEST(Planner, HandComputedProportionalSplit) {
  // tiles 10, 30; CU 8 -> max_partitions 8, budget 16; capacity min(16, max(2, 16)) = 16.
  // remaining 14, total 40: count0 = min(1 + floor(140/40), 10, 8) = 4;
  // count1 = min(1 + 14 - 3, 30, 8) = 8.
  const WorkPlan p = build({2560, 7680}, 1, 8);
  EXPECT_EQ(p.capacity(), 16);
  EXPECT_EQ(p.reduce_info(), (std::vector<int32_t>{0, 4, 4, 8}));
  const int b0[] = {0, 2, 5, 7, 10};  // floor(p*10/4)
  for (int k = 0; k < 4; ++k) EXPECT_EQ(row(p, k), (std::vector<int32_t>{0, b0[k], b0[k + 1], 2560}));
  const int b1[] = {0, 3, 7, 11, 15, 18, 22, 26, 30};  // floor(p*30/8)
  for (int k = 0; k < 8; ++k) EXPECT_EQ(row(p, 4 + k), (std::vector<int32_t>{1, b1[k], b1[k + 1], 7680}));
  for (int i = 12; i < 16; ++i) EXPECT_EQ(row(p, i), (std::vector<int32_t>{0, 0, 0, 0}));
}

TEST(Planner, HandComputedKvHeadsShrinkCapacity) {
  // Hkv 8, CU 132: budget 264 -> ceil(264/8) = 33; B = 2 -> capacity min(264, max(2, 33)) = 33.
  const WorkPlan p = build({100000, 100}, 8, 132);
  EXPECT_EQ(p.capacity(), 33);
  // tiles 391, 1; remaining 31; total 392: count0 = min(1 + floor(391*31/392), 391, 132) = 1 + 30 = 31;
  // count1 = min(1 + 31 - 30, 1) = 1.
  EXPECT_EQ(p.reduce_info(), (std::vector<int32_t>{0, 31, 31, 1}));
}

TEST(Planner, DenseDecodeSplitsHandComputed) {
  EXPECT_EQ(dense_decode_splits(1, 1, 132), 32);   // base 8, boost 32
  EXPECT_EQ(dense_decode_splits(8, 8, 132), 5);    // base ceil(264/64)=5, boost 2
  EXPECT_EQ(dense_decode_splits(3, 1, 80), 32);    // base 8, boost 43 -> 32
  EXPECT_EQ(dense_decode_splits(5, 2, 16), 8);     // base 4, boost 13 -> 8
  EXPECT_EQ(dense_decode_splits(100, 4, 132), 1);  // base 1, boost 1
  EXPECT_EQ(dense_decode_splits(20, 1, 132), 8);   // base 8 (14 capped), boost ceil(6.4)=7 -> 4
}

// The general reduce's row chunks, by hand: want = ceil(2 cu / pairs) blocks per pair, at
// most one per row, then as few chunks as that chunk size needs.
TEST(SplitRules, ReduceRowChunksHandComputed) {
  EXPECT_EQ(reduce_row_chunks(7, 88, 132), 3);    // want 3: chunks of 3, 3 and 1 rows
  EXPECT_EQ(reduce_chunk_rows(7, 3), 3);
  EXPECT_EQ(reduce_row_chunks(10, 66, 132), 4);   // want 4: 3, 3, 3, 1
  EXPECT_EQ(reduce_row_chunks(9, 66, 132), 3);    // want 4, chunks of 3: three suffice
  EXPECT_EQ(reduce_row_chunks(4, 24, 132), 4);    // want 11, one per row
  EXPECT_EQ(reduce_row_chunks(16, 32, 132), 8);   // want 9: chunks of 2
  EXPECT_EQ(reduce_row_chunks(4, 320, 132), 1);   // many pairs: whole rows per block
  EXPECT_EQ(reduce_row_chunks(32, 1, 0), 2);      // cu 0 counts as 1
  EXPECT_EQ(reduce_row_chunks(0, 5, 132), 1);
  EXPECT_EQ(reduce_row_chunks(5, 0, 132), 1);
}

// Chunk c takes rows [c n, min(rows, (c + 1) n)), n = reduce_chunk_rows(rows, chunks), as the
// kernel does: every row in exactly one chunk for any count up to the rows, and the count the
// launcher picks leaves no chunk empty and never exceeds max(1, ceil(2 cu / pairs)).
TEST(SplitRules, ReduceRowChunksCoverEveryRowOnce) {
  const auto check = [](int64_t rows, int64_t chunks, bool no_empty) {
    const int64_t n = reduce_chunk_rows(rows, chunks);
    std::vector<int> seen(size_t(rows), 0);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t r0 = c * n, r1 = std::min(rows, r0 + n);
      if (no_empty) {
        EXPECT_LT(r0, r1) << "rows " << rows << ", chunks " << chunks << ": chunk " << c << " empty";
      }
      for (int64_t r = r0; r < r1; ++r) ++seen[size_t(r)];
    }
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_EQ(seen[size_t(r)], 1) << "rows " << rows << ", chunks " << chunks << ": row " << r;
  };
  for (int64_t rows = 1; rows <= 160; ++rows)
    for (int64_t chunks = 1; chunks <= rows; ++chunks) check(rows, chunks, false);
  for (int64_t rows : {1, 2, 3, 5, 7, 8, 10, 16, 17, 24, 31, 40, 64, 80, 128, 1024})
    for (int64_t pairs : {1, 2, 3, 7, 24, 32, 66, 88, 131, 132, 133, 264, 265, 1000})
      for (int64_t cu : {0, 1, 66, 132, 264}) {
        const int64_t chunks = reduce_row_chunks(rows, pairs, cu);
        const int64_t want = std::max<int64_t>(1, (2 * std::max<int64_t>(cu, 1) + pairs - 1) / pairs);
        ASSERT_GE(chunks, 1);
        ASSERT_LE(chunks, std::min(rows, want)) << "rows " << rows << ", pairs " << pairs << ", cu " << cu;
        check(rows, chunks, true);
      }
}

TEST(Planner, ResolveRejectsOutOfRangeParams) {
  EXPECT_THROW(WorkPlan({0, 1, 132}), std::invalid_argument);
  EXPECT_THROW(WorkPlan({4097, 1, 132}), std::invalid_argument);
  EXPECT_THROW(WorkPlan({1, 0, 132}), std::invalid_argument);
  EXPECT_THROW(WorkPlan({1, 1, 132, 133}), std::invalid_argument);
  try {
    WorkPlan({1, 1, 132, 133});
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_partitions = 133"), std::string::npos) << e.what();
  }
}

RC_GTEST_PROP(PlannerProps, CoversEveryTileOnceInOrder, ()) {
  const Shape s = *gen_shape();
  const WorkPlan p = build(s.lens, s.hkv, s.cu, s.maxp, s.budget);
  const int64_t maxp = s.maxp ? s.maxp : s.cu;
  const int64_t budget = s.budget ? s.budget : 2 * s.cu;
  const int64_t B = int64_t(s.lens.size());
  // Capacity formula, computed here without the planner's helpers.
  const int64_t per_head = budget / s.hkv + (budget % s.hkv != 0);
  RC_ASSERT(p.capacity() == std::min(B * maxp, std::max(B, per_head)));
  plan_check::assert_plan_layout(p, s.lens, maxp);
}

RC_GTEST_PROP(PlannerProps, RefreshEqualsFreshBuildAndIsDeterministic, ()) {
  const Shape s = *gen_shape();
  const auto other = *rc::gen::container<std::vector<int32_t>>(s.lens.size(), gen_len());
  WorkPlan live({int64_t(s.lens.size()), s.hkv, s.cu, s.maxp, s.budget});
  live.refresh(other.data());
  const int32_t* work_ptr = live.work_info().data();
  live.refresh(s.lens.data());  // in place, over a plan built from other lengths
  RC_ASSERT(live.work_info().data() == work_ptr);
  const WorkPlan fresh = build(s.lens, s.hkv, s.cu, s.maxp, s.budget);
  RC_ASSERT(live.work_info() == fresh.work_info());
  RC_ASSERT(live.reduce_info() == fresh.reduce_info());
  const WorkPlan again = build(s.lens, s.hkv, s.cu, s.maxp, s.budget);
  RC_ASSERT(again.work_info() == fresh.work_info());
}

RC_GTEST_PROP(PlannerProps, FreshnessDetectsAnyLengthChange, ()) {
  const Shape s = *gen_shape();
  WorkPlan p = build(s.lens, s.hkv, s.cu, s.maxp, s.budget);
  RC_ASSERT(plan_is_fresh(p.view(), s.lens.data(), int64_t(s.lens.size())));
  auto live = s.lens;
  const size_t i = *rc::gen::inRange<size_t>(0, live.size());
  const int32_t delta = *rc::gen::element<int32_t>(1, 2, 3, -1, 256);
  const int64_t changed = int64_t(live[i]) + delta;
  RC_PRE(changed <= INT32_MAX && changed >= INT32_MIN);
  live[i] = int32_t(changed);
  const bool both_empty = s.lens[i] <= 0 && live[i] <= 0;
  RC_ASSERT(plan_is_fresh(p.view(), live.data(), int64_t(live.size())) == both_empty);
}

// A plan made for another number of sequences is never fresh: one sequence
// fewer (the lengths it holds still match the live ones it is shown) or one
// more (an empty sequence appended, which would need no task).
RC_GTEST_PROP(PlannerProps, FreshnessNeedsTheSameBatch, ()) {
  const Shape s = *gen_shape();
  WorkPlan p = build(s.lens, s.hkv, s.cu, s.maxp, s.budget);
  const int64_t B = int64_t(s.lens.size());
  RC_ASSERT(plan_is_fresh(p.view(), s.lens.data(), B));
  if (B > 1) RC_ASSERT_FALSE(plan_is_fresh(p.view(), s.lens.data(), B - 1));
  auto more = s.lens;
  more.push_back(0);
  RC_ASSERT_FALSE(plan_is_fresh(p.view(), more.data(), B + 1));
}

// The plan check names each defect where it is: every padding row and every
// task row of a valid plan, broken one field at a time, is named by its own
// index with the values it holds.
TEST(PlanStructure, EachBrokenRowIsNamedByItsIndex) {
  WorkPlan plan({3, 1, 8});
  const std::vector<int32_t> lens = {3000, 20, 0};
  plan.refresh(lens.data());
  PlanView v = plan.view();
  ASSERT_EQ(check_plan_structure(v), "");
  const int64_t active = plan.active_tasks();
  ASSERT_GE(active, 3);
  ASSERT_GT(v.capacity, active + 1) << "the plan must have padding rows";
  for (int64_t row = 0; row < v.capacity; ++row) {
    const bool padding = row >= active;
    int32_t* w = v.work_info + 4 * row;
    const std::string name = "work_info[" + std::to_string(row) + "]";
    const bool first_of_seq = !padding && v.reduce_info[2 * w[0]] == row;
    for (int field = 0; field < 4; ++field) {
      SCOPED_TRACE(name + " field " + std::to_string(field));
      const int32_t saved = w[field];
      std::string expected;
      if (padding) {
        w[field] = 1;
        expected = "padding " + name + " is not zero";
      } else if (field == 0) {
        w[0] = saved + 7;  // a task of another sequence
        expected = name + ".seq = " + std::to_string(saved + 7) + ", expected " + std::to_string(saved);
      } else if (field == 1) {
        w[1] = saved + 7;  // starts past its predecessor's end
        expected = name + " tiles [" + std::to_string(saved + 7) + ", " + std::to_string(w[2]) + ") not contiguous";
      } else if (field == 2) {
        w[2] = w[1];  // empty
        expected = name + " tiles [" + std::to_string(w[1]) + ", " + std::to_string(w[1]) + ") not contiguous";
      } else if (!first_of_seq) {
        w[3] = saved + 7;
        expected = name + ".len differs within sequence " + std::to_string(w[0]);
      } else {
        continue;  // the first task's length is the one the others are held to
      }
      const std::string why = check_plan_structure(v);
      w[field] = saved;
      EXPECT_EQ(why, expected);
    }
  }
  EXPECT_EQ(check_plan_structure(v), "");
}
