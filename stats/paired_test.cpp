// SPDX-License-Identifier: Apache-2.0
#include "stats/inputs.hpp"
#include "stats/paired.hpp"

#include <gtest/gtest.h>

#include <sstream>

namespace pav::stats {
namespace {

CorrectnessRun make_run(const std::string& source, const std::string& verdicts) {
  CorrectnessRun run;
  run.source = source;
  for (std::size_t i = 0; i < verdicts.size(); ++i) {
    run.add({"q" + std::to_string(i + 1), verdicts[i] == '1', static_cast<long>(i + 1)});
  }
  return run;
}

CorrectnessRun parse(const std::string& text, const std::string& source = "t.jsonl") {
  std::istringstream in(text);
  return parse_correctness(in, source);
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// The four fixture runs of fixtures/stats/gsm8k-*.jsonl, item by item (A1, B1, B2, A2):
//   items 1-29 1111, 30 1110, 31-35 1001, 36 1011, 37 0111, 38 0100, 39-40 0000.
std::string column(int col) {
  std::string s;
  const auto add = [&](int count, const char* pattern) { s.append(count, pattern[col]); };
  add(29, "1111");
  add(1, "1110");
  add(5, "1001");
  add(1, "1011");
  add(1, "0111");
  add(1, "0100");
  add(2, "0000");
  return s;
}

TEST(StatsPaired, CountsTheTwoByTwoTable) {
  // first 1100, second 1010: both = 1, b = 1, c = 1, neither = 1.
  const auto t = count_pairs(make_run("x", "1100"), make_run("y", "1010"));
  EXPECT_EQ(t.both, 1);
  EXPECT_EQ(t.b, 1);
  EXPECT_EQ(t.c, 1);
  EXPECT_EQ(t.neither, 1);
  EXPECT_DOUBLE_EQ(t.agree(), 0.5);
}

TEST(StatsPaired, MatchesItemsByIdNotByPosition) {
  const auto a = parse("{\"id\":\"x\",\"correct\":true}\n{\"id\":\"y\",\"correct\":false}\n", "a");
  const auto b = parse("{\"id\":\"y\",\"correct\":false}\n{\"id\":\"x\",\"correct\":true}\n", "b");
  const auto t = count_pairs(a, b);
  EXPECT_EQ(t.both, 1);
  EXPECT_EQ(t.neither, 1);
  EXPECT_EQ(t.b + t.c, 0);
}

TEST(StatsPaired, FourRunsPairAndPoolByHand) {
  const std::vector<CorrectnessRun> runs{make_run("a1", column(0)), make_run("b1", column(1)),
                                         make_run("b2", column(2)), make_run("a2", column(3))};
  const auto r = compare_runs(runs, {"32", "128", "128", "32"});
  EXPECT_EQ(r.variant_a, "32");
  EXPECT_EQ(r.variant_b, "128");
  EXPECT_EQ(r.items, 40);
  ASSERT_EQ(r.pairs.size(), 2u);
  // Pair 1 = runs 1 and 2: b = items 31-36 (6), c = 37, 38 (2).
  EXPECT_EQ(r.pairs[0].run_a, 0u);
  EXPECT_EQ(r.pairs[0].run_b, 1u);
  EXPECT_EQ(r.pairs[0].counts.b, 6);
  EXPECT_EQ(r.pairs[0].counts.c, 2);
  // Pair 2 = runs 4 and 3: b = items 31-35 (5), c = item 30 (1).
  EXPECT_EQ(r.pairs[1].run_a, 3u);
  EXPECT_EQ(r.pairs[1].run_b, 2u);
  EXPECT_EQ(r.pairs[1].counts.b, 5);
  EXPECT_EQ(r.pairs[1].counts.c, 1);
  EXPECT_EQ(r.test.b, 11);
  EXPECT_EQ(r.test.c, 3);
  // 2 * (1 + 14 + 91 + 364) / 2^14.
  EXPECT_DOUBLE_EQ(r.test.exact_p, 940.0 / 16384.0);
  EXPECT_DOUBLE_EQ(r.acc_a, 72.0 / 80.0);
  EXPECT_DOUBLE_EQ(r.acc_b, 64.0 / 80.0);
  EXPECT_DOUBLE_EQ(r.agree, 66.0 / 80.0);
  ASSERT_EQ(r.runs.size(), 4u);
  EXPECT_EQ(r.runs[0].correct, 36);
  EXPECT_EQ(r.runs[1].correct, 32);
  EXPECT_EQ(r.runs[1].variant, "128");
  // Same-variant pairs: runs 1/4 differ on items 30, 37; runs 2/3 on 36, 38.
  ASSERT_EQ(r.same_variant.size(), 2u);
  EXPECT_EQ(r.same_variant[0].variant, "32");
  EXPECT_DOUBLE_EQ(r.same_variant[0].counts.agree(), 38.0 / 40.0);
  EXPECT_DOUBLE_EQ(r.same_variant[1].counts.agree(), 38.0 / 40.0);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(StatsPaired, WarnsWhenRunsOfOneVariantDisagreeMoreThanTheVariants) {
  // Labels X = {A1, B1}, Y = {B2, A2}: X's runs differ on 8 of 40 items (20%),
  // the matched pairs A1/B2 and B1/A2 on 6 + 8 of 80 (17.5%); Y's runs on 6 (15%).
  const std::vector<CorrectnessRun> runs{make_run("a1", column(0)), make_run("b1", column(1)),
                                         make_run("b2", column(2)), make_run("a2", column(3))};
  const auto r = compare_runs(runs, {"X", "X", "Y", "Y"});
  EXPECT_DOUBLE_EQ(r.agree, 66.0 / 80.0);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("runs 1 and 2 of variant 'X'"), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("20.0%"), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("17.5%"), std::string::npos) << r.warnings[0];
}

TEST(StatsPaired, RejectsBadLabels) {
  const std::vector<CorrectnessRun> runs{make_run("a", "10"), make_run("b", "01"), make_run("c", "11")};
  EXPECT_THROW(compare_runs(runs, {"A", "B", "C"}), InputError);
  EXPECT_THROW(compare_runs(runs, {"A", "B", "B"}), InputError);
  EXPECT_THROW(compare_runs(runs, {"A", "A", "A"}), InputError);
  EXPECT_THROW(compare_runs(runs, {"A", "B"}), InputError);
  EXPECT_THROW(compare_runs(runs, {"A", "", "B"}), InputError);
}

TEST(StatsPaired, DifferingIdSetsNameFileLineAndId) {
  const auto a = parse("{\"id\":1,\"correct\":true}\n{\"id\":2,\"correct\":true}\n", "a.jsonl");
  const auto b = parse("{\"id\":1,\"correct\":true}\n\n{\"id\":3,\"correct\":true}\n", "b.jsonl");
  try {
    count_pairs(a, b);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "b.jsonl:3: id: \"3\" is not in a.jsonl (every file must hold the same ids)");
  }
  const auto c = parse("{\"id\":1,\"correct\":true}\n", "c.jsonl");
  try {
    count_pairs(a, c);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "a.jsonl:2: id: \"2\" is missing from c.jsonl (every file must hold the same ids)");
  }
}

TEST(StatsInputs, CorrectnessLinesSkipBlanksAndIgnoreOtherFields) {
  const auto run = parse("\n{\"id\": \"a\", \"correct\": true, \"pred\": 3}\r\n   \n{\"id\": 7, \"correct\": false}\n");
  ASSERT_EQ(run.items.size(), 2u);
  EXPECT_EQ(run.items[0].id, "a");
  EXPECT_EQ(run.items[0].line, 2);
  EXPECT_TRUE(run.items[0].correct);
  EXPECT_EQ(run.items[1].id, "7");
  EXPECT_EQ(run.items[1].line, 4);
  EXPECT_EQ(run.correct_count(), 1);
}

TEST(StatsInputs, CorrectnessErrorsNameLineAndId) {
  EXPECT_EQ(error_of("{\"id\":\"a\",\"correct\":true}\n{\"id\":\"b\",\"correct\":true}\n{\"id\":\"a\",\"correct\":false}\n"),
            "t.jsonl:3: id: duplicate id \"a\" (first on line 1)");
  EXPECT_EQ(error_of("{\"id\":7,\"correct\":true}\n{\"id\":\"7\",\"correct\":true}\n"),
            "t.jsonl:2: id: duplicate id \"7\" (first on line 1)");
  EXPECT_EQ(error_of("{\"id\":\"a\",\"correct\":1}\n"), "t.jsonl:1: correct: expected true or false, got an integer 1");
  EXPECT_EQ(error_of("{\"id\":\"a\",\"correct\":\"yes\"}\n"),
            "t.jsonl:1: correct: expected true or false, got a string \"yes\"");
  EXPECT_EQ(error_of("\n{\"id\":\"a\"}\n"), "t.jsonl:2: correct: missing (required)");
  EXPECT_EQ(error_of("{\"correct\":true}\n"), "t.jsonl:1: id: missing (required)");
  EXPECT_EQ(error_of("{\"id\":1.5,\"correct\":true}\n"), "t.jsonl:1: id: expected a string or an integer, got 1.5");
  EXPECT_EQ(error_of("[1,2]\n"), "t.jsonl:1: expected an object, got an array [1,2]");
  EXPECT_EQ(error_of("\n   \n"), "t.jsonl: empty file: no items");
  EXPECT_EQ(error_of(""), "t.jsonl: empty file: no items");
  EXPECT_EQ(error_of("{\"id\":\"a\",\"correct\":true}\n{\"id\": \"b\", \"correct\": tru}\n").rfind("t.jsonl:2: correct: malformed JSON", 0),
            0u);
}

}  // namespace
}  // namespace pav::stats
