// SPDX-License-Identifier: Apache-2.0
#include "stats/bench.hpp"
#include "stats/bootstrap.hpp"
#include "stats/inputs.hpp"

#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

namespace pav::stats {
namespace {

BenchRun make(std::vector<double> lat, std::optional<std::int64_t> completed = std::nullopt,
              std::optional<double> duration = std::nullopt) {
  return {"run", std::move(lat), completed, duration};
}

std::string error_of(const std::string& text) {
  std::istringstream in(text);
  try {
    parse_bench(in, "b.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

const BenchDelta& delta(const BenchComparison& r, const std::string& metric) {
  for (const auto& d : r.deltas)
    if (d.metric == metric) return d;
  throw std::runtime_error("no delta " + metric);
}

TEST(StatsBench, SummaryByHand) {
  // Type 7 on 10..50: p50 30, p90 46, p99 49.6; mean 30.
  const auto s = summarize_bench(make({30, 10, 50, 20, 40}));
  EXPECT_DOUBLE_EQ(s.p50_ms, 30.0);
  EXPECT_DOUBLE_EQ(s.p90_ms, 46.0);
  EXPECT_DOUBLE_EQ(s.p99_ms, 49.6);
  EXPECT_DOUBLE_EQ(s.interactivity_tok_s, 1000.0 / 46.0);
  EXPECT_DOUBLE_EQ(s.throughput_tok_s, 1000.0 / 30.0);
  EXPECT_EQ(s.throughput_source, "mean_latency");
  EXPECT_FALSE(s.requests_per_s);
  const auto d = summarize_bench(make({30, 10, 50, 20, 40}, 4, 2.0));
  EXPECT_DOUBLE_EQ(d.throughput_tok_s, 2.5);  // 5 samples / 2 s
  EXPECT_EQ(d.throughput_source, "duration_s");
  EXPECT_DOUBLE_EQ(*d.requests_per_s, 2.0);
}

TEST(StatsBench, ConstantSamplesGiveExactDeltasAndPointIntervals) {
  // Every resample of a constant sample is the same constant, so each interval
  // collapses onto the point delta: 12/10 - 1 = 0.2 for latencies and
  // (1000/12)/(1000/10) - 1 = -1/6 for the rates.
  const BootstrapOptions opt{.seed = 5, .resamples = 200, .confidence = 0.95};
  std::cout << "bootstrap seed " << opt.seed << "\n";
  const auto r = compare_bench(make(std::vector<double>(50, 10.0)), make(std::vector<double>(40, 12.0)), opt);
  for (const char* m : {"p50_ms", "p90_ms", "p99_ms"}) {
    const auto& d = delta(r, m);
    EXPECT_NEAR(d.delta, 0.2, 1e-12) << m;
    ASSERT_TRUE(d.ci) << m;
    EXPECT_NEAR(d.ci->lo, 0.2, 1e-12) << m;
    EXPECT_NEAR(d.ci->hi, 0.2, 1e-12) << m;
  }
  for (const char* m : {"interactivity_tok_s", "throughput_tok_s"}) {
    const auto& d = delta(r, m);
    EXPECT_NEAR(d.delta, -1.0 / 6.0, 1e-12) << m;
    ASSERT_TRUE(d.ci) << m;
    EXPECT_NEAR(d.ci->lo, -1.0 / 6.0, 1e-12) << m;
    EXPECT_NEAR(d.ci->hi, -1.0 / 6.0, 1e-12) << m;
  }
  EXPECT_TRUE(r.warnings.empty());
}

std::vector<double> noisy_sample(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<double> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(10.0 + static_cast<double>(rng() % 10000) / 1000.0);
  return v;
}

TEST(StatsBootstrap, SameSeedSameIntervalsOtherSeedOtherIntervals) {
  const std::uint64_t data_seed = 99;
  std::cout << "data seed " << data_seed << ", bootstrap seeds 1 and 2\n";
  const auto a = noisy_sample(data_seed, 300);
  const auto b = noisy_sample(data_seed + 1, 300);
  const auto run = [&](std::uint64_t seed) {
    return compare_bench(make(a), make(b), {.seed = seed, .resamples = 300, .confidence = 0.95});
  };
  const auto x = run(1);
  const auto y = run(1);
  const auto z = run(2);
  const auto& dx = delta(x, "p90_ms");
  EXPECT_EQ(dx.ci->lo, delta(y, "p90_ms").ci->lo);
  EXPECT_EQ(dx.ci->hi, delta(y, "p90_ms").ci->hi);
  EXPECT_NE(dx.ci->lo, delta(z, "p90_ms").ci->lo);
  EXPECT_LT(dx.ci->lo, dx.ci->hi);
}

TEST(StatsBootstrap, IntervalCoversAKnownScaling) {
  // B is A scaled by 1.1, so the true relative delta of every percentile is 0.1.
  const std::uint64_t data_seed = 1234;
  const BootstrapOptions opt{.seed = 77, .resamples = 1000, .confidence = 0.95};
  std::cout << "data seed " << data_seed << ", bootstrap seed " << opt.seed << "\n";
  const auto a = noisy_sample(data_seed, 400);
  auto b = a;
  for (auto& x : b) x *= 1.1;
  const auto r = compare_bench(make(a), make(b), opt);
  for (const char* m : {"p50_ms", "p90_ms"}) {
    const auto& d = delta(r, m);
    EXPECT_NEAR(d.delta, 0.1, 1e-12) << m;
    EXPECT_LT(d.ci->lo, 0.1) << m;
    EXPECT_GT(d.ci->hi, 0.1) << m;
  }
}

TEST(StatsBootstrap, DrawIndexStaysInRangeAndSpreadsEvenly) {
  const std::uint64_t seed = 42;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  EXPECT_EQ(draw_index(rng, 1), 0u);
  std::vector<int> bins(10, 0);
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) {
    const auto k = draw_index(rng, 10);
    ASSERT_LT(k, 10u);
    ++bins[k];
  }
  // Expected 10000 per bin, sd ~95: 5% slack is over 5 sd.
  for (int count : bins) EXPECT_NEAR(count, kDraws / 10, kDraws / 200);
}

TEST(StatsBench, WarnsOnDifferentCompletedCounts) {
  const BootstrapOptions opt{.seed = 3, .resamples = 20, .confidence = 0.95};
  const std::vector<double> lat{10, 11, 12};
  // |100 - 97| / 100 = 3% > 2%.
  auto r = compare_bench(make(lat, 100, 10.0), make(lat, 97, 10.0), opt);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("completed requests differ by 3.0% (100 vs 97)"), std::string::npos) << r.warnings[0];
  EXPECT_TRUE(compare_bench(make(lat, 100, 10.0), make(lat, 97, 10.0), opt, 0.05).warnings.empty());
  EXPECT_TRUE(compare_bench(make(lat, 100, 10.0), make(lat, 99, 10.0), opt).warnings.empty());
  EXPECT_TRUE(compare_bench(make(lat, 50, 10.0), make(lat, 49, 10.0), opt).warnings.empty());  // exactly 2%
  r = compare_bench(make(lat, 100), make(lat), opt);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("request mix is not checked"), std::string::npos);
  EXPECT_DOUBLE_EQ(count_difference(0, 0), 0.0);
  EXPECT_DOUBLE_EQ(count_difference(40, 50), 0.2);
}

TEST(StatsBench, ThroughputFromDurationHasNoIntervalAndMixedSourcesNoDelta) {
  const BootstrapOptions opt{.seed = 3, .resamples = 20, .confidence = 0.95};
  // 4 samples / 2 s = 2 tok/s against 4 / 1 s = 4 tok/s: +100%.
  auto r = compare_bench(make({10, 20, 30, 40}, std::nullopt, 2.0), make({10, 20, 30, 40}, std::nullopt, 1.0), opt);
  const auto& t = delta(r, "throughput_tok_s");
  EXPECT_DOUBLE_EQ(t.delta, 1.0);
  EXPECT_FALSE(t.ci);
  r = compare_bench(make({10, 20}, std::nullopt, 2.0), make({10, 20}), opt);
  EXPECT_THROW(delta(r, "throughput_tok_s"), std::runtime_error);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("duration_s is given for"), std::string::npos);
}

TEST(StatsInputs, BenchFileErrorsNameTheField) {
  EXPECT_EQ(error_of("{\"latency_ms\": [1, 2], \"completed\": 3, \"duration_s\": 1.5, \"x\": 0}"), "(no error)");
  EXPECT_EQ(error_of("{\"latency_ms\": [1], \"completed\": null, \"duration_s\": null}"), "(no error)");
  EXPECT_EQ(error_of("{\"latency\": [1]}"), "b.json: latency_ms: missing (required)");
  EXPECT_EQ(error_of("{\"latency_ms\": 5}"), "b.json: latency_ms: expected an array, got an integer 5");
  EXPECT_EQ(error_of("{\"latency_ms\": []}"), "b.json: latency_ms: expected at least 1 entries, got 0");
  EXPECT_EQ(error_of("{\"latency_ms\": [1, \"2\"]}"), "b.json: latency_ms[1]: expected a positive finite number, got a string \"2\"");
  EXPECT_EQ(error_of("{\"latency_ms\": [1, 2, -3]}"), "b.json: latency_ms[2]: expected a positive finite number, got -3");
  EXPECT_EQ(error_of("{\"latency_ms\": [0]}"), "b.json: latency_ms[0]: expected a positive finite number, got 0");
  EXPECT_EQ(error_of("{\"latency_ms\": [1], \"completed\": -1}"), "b.json: completed: must be in 0..9223372036854775807, got -1");
  EXPECT_EQ(error_of("{\"latency_ms\": [1], \"completed\": 2.5}"), "b.json: completed: expected an integer, got a number 2.5");
  EXPECT_EQ(error_of("{\"latency_ms\": [1], \"duration_s\": 0}"), "b.json: duration_s: expected a positive finite number, got 0");
  EXPECT_EQ(error_of("{\"latency_ms\": [1], \"duration_s\": \"5\"}"), "b.json: duration_s: expected a positive finite number, got a string \"5\"");
  EXPECT_EQ(error_of("[1]"), "b.json: expected an object, got an array [1]");
  EXPECT_EQ(error_of("{\"latency_ms\": [1,}").rfind("b.json: latency_ms[1]: malformed JSON", 0), 0u);
  EXPECT_EQ(error_of("").rfind("b.json: malformed JSON", 0), 0u);
}

// Resamples x samples is the bootstrap's work: two runs of 2,000,000 samples
// at the default 2000 resamples took 6 minutes. Past kMaxBootstrapDraws the
// comparison is refused before the first draw, naming both files and the
// resamples that would fit.
TEST(StatsBench, BootstrapPastTheDrawLimitIsRefusedBeforeAnyDraw) {
  BenchRun a = make(std::vector<double>(600, 10.0)), b = make(std::vector<double>(600, 12.0));
  a.source = "a.json";
  b.source = "b.json";
  const BootstrapOptions opt{.seed = 1, .resamples = 1000000, .confidence = 0.95};
  EXPECT_EQ(bootstrap_draws(600, 600, 1000000), 1200000000);
  std::string what = "(no error)";
  try {
    (void)compare_bench(a, b, opt);
  } catch (const InputError& e) {
    what = e.what();
  }
  EXPECT_EQ(what, "a.json, b.json: latency_ms: 600 + 600 samples x 1000000 resamples is 1200000000 bootstrap draws, "
                  "more than the limit of 1073741824: pass --resamples 894784 or fewer, or compare fewer samples");
  EXPECT_THROW(bootstrap_relative_delta(a.latency_ms, b.latency_ms,
                                        [](std::vector<double>& s) { return std::vector<double>{s[0]}; }, opt),
               std::invalid_argument);
  EXPECT_NO_THROW((void)compare_bench(a, b, {.seed = 1, .resamples = 20, .confidence = 0.95}));
}

}  // namespace
}  // namespace pav::stats
