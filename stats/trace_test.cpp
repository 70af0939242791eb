// SPDX-License-Identifier: Apache-2.0
#include "stats/inputs.hpp"
#include "stats/trace.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "common/test_paths.hpp"

namespace pav::stats {
namespace {

std::string error_of(const std::string& text) {
  std::istringstream in(text);
  try {
    parse_trace(in, "t.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// fixtures/stats/trace-small.jsonl, by hand with W = 512, P = 256:
// step lens                  B  ratio          sum   u = min(P, W/B)  c = min(P, floor(W*max/sum))    c/u
//  1   100 x4                4  1              400   128              floor(512*100/400) = 128         1
//  2   1000, 250             2  4              1250  256              floor(409.6) = 409 -> 256        1
//  3   4000, 100 x7          8  40             4700  64               floor(435.7) = 435 -> 256        4
//  4   0, 50, 300            3  300/50 = 6     350   floor(170.7)=170 floor(438.9) = 438 -> 256        256/170
//  5   600, 200 x15          16 3              3600  32               floor(85.3) = 85                 85/32
//  6   0, 0                  2  none           0     256              none                             none
//  7   7                     1  1              7     256              min(256, 512) = 256              1
// ratios sorted 1 1 3 4 6 40: p50 h = 2.5 -> 3.5, p90 h = 4.5 -> 6 + .5 * 34 = 23, max 40;
//   above 4: 40 and 6 (4 itself is not) -> 2 of 6.
// headroom sorted 1 1 1 256/170 85/32 4: p50 h = 2.5 -> (1 + 256/170) / 2,
//   p90 h = 4.5 -> (85/32 + 4) / 2 = 3.328125, max 4; above 1: 3 of 6.
// batch sizes: 1:1, 2:2, 3:1, 4:1, 8:1, 16:1.
TEST(StatsTrace, SmallFixtureByHand) {
  const auto steps = read_trace(std::string(PAV_STATS_FIXTURES) + "/trace-small.jsonl");
  ASSERT_EQ(steps.size(), 7u);
  EXPECT_EQ(steps[3].line, 4);
  const auto t = summarize_trace(steps, PlannerModel{});
  EXPECT_EQ(t.steps, 7u);
  EXPECT_EQ(t.ratio.steps, 6u);
  EXPECT_DOUBLE_EQ(t.ratio.p50, 3.5);
  EXPECT_DOUBLE_EQ(t.ratio.p90, 23.0);
  EXPECT_DOUBLE_EQ(t.ratio.max, 40.0);
  EXPECT_EQ(t.ratio_above_4, 2u);
  EXPECT_DOUBLE_EQ(t.frac_ratio_above_4, 2.0 / 6.0);
  EXPECT_EQ(t.headroom.steps, 6u);
  EXPECT_DOUBLE_EQ(t.headroom.p50, (1.0 + 256.0 / 170.0) / 2.0);
  EXPECT_DOUBLE_EQ(t.headroom.p90, 3.328125);
  EXPECT_DOUBLE_EQ(t.headroom.max, 4.0);
  EXPECT_EQ(t.headroom_above_1, 3u);
  const std::map<std::size_t, std::size_t> hist{{1, 1}, {2, 2}, {3, 1}, {4, 1}, {8, 1}, {16, 1}};
  EXPECT_EQ(t.batch_histogram, hist);
}

TEST(StatsTrace, StepByHand) {
  const PlannerModel m;
  // Step 4 of the fixture: the zero is in the batch but not in the minimum.
  const std::vector<std::int64_t> lens{0, 50, 300};
  const auto s = step_stats(lens, m);
  EXPECT_EQ(s.batch, 3u);
  EXPECT_EQ(*s.min_positive, 50);
  EXPECT_DOUBLE_EQ(*s.ratio, 6.0);
  EXPECT_EQ(s.uniform_parts, 170);
  EXPECT_EQ(s.planned_parts, 256);
  // A negative length counts as an empty request.
  const std::vector<std::int64_t> neg{-5, 10, 20};
  const auto n = step_stats(neg, m);
  EXPECT_EQ(n.kv_sum, 30);
  EXPECT_DOUBLE_EQ(*n.ratio, 2.0);
  EXPECT_DOUBLE_EQ(*n.headroom, 256.0 / 170.0);  // floor(512*20/30) = 341 -> 256
}

// The model's limits on both sides: 1 is a budget and a ceiling, 0 is neither.
TEST(StatsTrace, ModelLimitsOnBothSides) {
  const std::vector<std::int64_t> lens{10, 20};
  EXPECT_NO_THROW(step_stats(lens, PlannerModel{1, 1}));
  EXPECT_EQ(step_stats(lens, PlannerModel{1, 1}).planned_parts, 1);  // a ceiling of 1: one partition
  EXPECT_THROW(step_stats(lens, PlannerModel{0, 1}), std::invalid_argument);
  EXPECT_THROW(step_stats(lens, PlannerModel{1, 0}), std::invalid_argument);
}

TEST(StatsTrace, BatchBeyondBudgetKeepsOnePartitionEach) {
  const PlannerModel m;
  // 1000 equal requests: W/B = 0 -> u = 1; c = max(1, floor(512/1000)) = 1.
  const std::vector<std::int64_t> equal(1000, 64);
  EXPECT_DOUBLE_EQ(*step_stats(equal, m).headroom, 1.0);
  // 999 x 1 token and one of 1000: sum 1999, floor(512000/1999) = 256 -> c = 256, u = 1.
  std::vector<std::int64_t> skewed(999, 1);
  skewed.push_back(1000);
  const auto s = step_stats(skewed, m);
  EXPECT_EQ(s.uniform_parts, 1);
  EXPECT_EQ(s.planned_parts, 256);
  EXPECT_DOUBLE_EQ(*s.headroom, 256.0);
  EXPECT_DOUBLE_EQ(*s.ratio, 1000.0);
}

TEST(StatsTrace, BudgetAndPartitionCapChangeTheModel) {
  const std::vector<std::int64_t> lens{300, 100};
  // W = 64, P = 8: u = min(8, 32) = 8, c = min(8, floor(64*300/400) = 48) = 8.
  EXPECT_DOUBLE_EQ(*step_stats(lens, {64, 8}).headroom, 1.0);
  // W = 64, P = 64: u = 32, c = 48.
  EXPECT_DOUBLE_EQ(*step_stats(lens, {64, 64}).headroom, 1.5);
  EXPECT_THROW(step_stats(lens, {0, 8}), std::invalid_argument);
  EXPECT_THROW(step_stats(lens, {64, 0}), std::invalid_argument);
  EXPECT_THROW(step_stats(std::vector<std::int64_t>{}, {64, 8}), std::invalid_argument);
}

TEST(StatsTrace, HugeBudgetTimesLongContextDoesNotOverflow) {
  // W = P = 2^40, lens {2^31 - 1, 1}: sum 2^31, u = 2^39,
  // c = floor(2^40 * (2^31 - 1) / 2^31) = 2^40 - 2^9, so c/u = 2 - 2^-30.
  const std::int64_t w = std::int64_t{1} << 40;
  const std::vector<std::int64_t> lens{(std::int64_t{1} << 31) - 1, 1};
  const auto s = step_stats(lens, {w, w});
  EXPECT_EQ(s.uniform_parts, std::int64_t{1} << 39);
  EXPECT_EQ(s.planned_parts, w - 512);
  EXPECT_DOUBLE_EQ(*s.headroom, 2.0 - std::ldexp(1.0, -30));
}

TEST(StatsTrace, StepWithoutPositiveLengthsHasNoRatioOrHeadroom) {
  const std::vector<std::int64_t> lens{0, -3};
  const auto s = step_stats(lens, {});
  EXPECT_FALSE(s.ratio);
  EXPECT_FALSE(s.headroom);
  const auto t = summarize_trace({{lens, 1}}, {});
  EXPECT_EQ(t.ratio.steps, 0u);
  EXPECT_EQ(t.headroom.steps, 0u);
  EXPECT_DOUBLE_EQ(t.frac_ratio_above_4, 0.0);
}

TEST(StatsInputs, TraceErrorsNameLineAndField) {
  EXPECT_EQ(error_of("{\"context_lens\": [1, 2]}\n\n{\"context_lens\": [3], \"t\": 1}\n"), "(no error)");
  EXPECT_EQ(error_of("{\"context_lens\": [1]}\n{\"context_lens\": [1,]}\n").rfind("t.jsonl:2: context_lens[1]: malformed JSON", 0), 0u);
  EXPECT_EQ(error_of("{\"lens\": [1]}\n"), "t.jsonl:1: context_lens: missing (required)");
  EXPECT_EQ(error_of("{\"context_lens\": 4}\n"), "t.jsonl:1: context_lens: expected an array, got an integer 4");
  EXPECT_EQ(error_of("\n{\"context_lens\": []}\n"), "t.jsonl:2: context_lens: expected at least 1 entries, got 0");
  EXPECT_EQ(error_of("{\"context_lens\": [1, 1.5]}\n"), "t.jsonl:1: context_lens[1]: expected an integer, got a number 1.5");
  EXPECT_EQ(error_of("{\"context_lens\": [\"9\"]}\n"), "t.jsonl:1: context_lens[0]: expected an integer, got a string \"9\"");
  EXPECT_EQ(error_of("{\"context_lens\": [2147483648]}\n"),
            "t.jsonl:1: context_lens[0]: must be in -2147483648..2147483647, got 2147483648");
  EXPECT_EQ(error_of("{\"context_lens\": [-2147483649]}\n"),
            "t.jsonl:1: context_lens[0]: must be in -2147483648..2147483647, got -2147483649");
  EXPECT_EQ(error_of("{\"context_lens\": [2147483647, -2147483648]}\n"), "(no error)");
  EXPECT_EQ(error_of("  \n"), "t.jsonl: empty file: no steps");
  EXPECT_EQ(error_of("7\n"), "t.jsonl:1: expected an object, got an integer 7");
}

}  // namespace
}  // namespace pav::stats
