// SPDX-License-Identifier: Apache-2.0
// Runs the stats commands as a user would: through the pav main() with the
// three stats commands linked in (PAV_STATS_CLI), checking exit codes, messages
// and JSON output.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

class StatsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("pav-stats-") + info->name() + "-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const auto path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  Result run(const std::string& args) {
    const auto out = dir_ / "stdout";
    const auto err = dir_ / "stderr";
    const std::string cmd = std::string("'") + PAV_STATS_CLI + "' " + args + " >'" + out.string() + "' 2>'" +
                            err.string() + "'";
    const int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // Exit code 2 with every fragment in stderr.
  void expect_bad_input(const std::string& args, std::initializer_list<std::string> fragments) {
    const auto r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\nstderr: " << r.err;
    for (const auto& f : fragments) EXPECT_NE(r.err.find(f), std::string::npos) << "want '" << f << "' in: " << r.err;
  }

  static std::string fixture(const std::string& name) { return std::string(PAV_STATS_FIXTURES) + "/" + name; }

  fs::path dir_;
};

// ----- mcnemar -----------------------------------------------------------------

TEST_F(StatsCli, McnemarCountsJsonMatchesReference) {
  const auto r = run("mcnemar --counts 121,59 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["b"], 121);
  EXPECT_EQ(j["c"], 59);
  EXPECT_EQ(j["n"], 180);
  EXPECT_NEAR(j["exact_p"].get<double>(), 4.434449e-06, 1e-6 * 4.434449e-06);
  EXPECT_NEAR(j["mid_p"].get<double>(), 3.266647e-06, 1e-6 * 3.266647e-06);
  EXPECT_NEAR(j["chi2_cc_p"].get<double>(), 5.450095e-06, 1e-6 * 5.450095e-06);
  EXPECT_NEAR(j["chi2_p"].get<double>(), 3.815136e-06, 1e-6 * 3.815136e-06);
  EXPECT_NEAR(j["chi2_cc"].get<double>(), 3721.0 / 180.0, 1e-12);
  EXPECT_NEAR(j["chi2"].get<double>(), 3844.0 / 180.0, 1e-12);
}

TEST_F(StatsCli, McnemarCountsTable) {
  const auto r = run("mcnemar --counts 5,5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("b = 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("correction dropped"), std::string::npos) << r.out;
}

TEST_F(StatsCli, McnemarBadCounts) {
  for (const char* bad : {"5", "a,b", "-1,3", "1,2,3", "1.5,2", ",4"}) {
    expect_bad_input(std::string("mcnemar --counts '") + bad + "'", {"--counts", bad});
  }
  expect_bad_input("mcnemar --counts 1,2 " + fixture("gsm8k-a.jsonl"), {"--counts takes no files"});
}

TEST_F(StatsCli, McnemarTwoFixtureFiles) {
  // gsm8k-a/b: b = 6 (items 31-36), c = 2 (items 37, 38); see paired_test.cpp.
  const auto r = run("mcnemar " + fixture("gsm8k-a.jsonl") + " " + fixture("gsm8k-b.jsonl") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["b"], 6);
  EXPECT_EQ(j["c"], 2);
  EXPECT_EQ(j["n"], 8);
  EXPECT_EQ(j["n_items"], 40);
  EXPECT_DOUBLE_EQ(j["exact_p"].get<double>(), 74.0 / 256.0);
  EXPECT_DOUBLE_EQ(j["mid_p"].get<double>(), 46.0 / 256.0);
  EXPECT_DOUBLE_EQ(j["chi2_cc"].get<double>(), 9.0 / 8.0);
  EXPECT_DOUBLE_EQ(j["chi2"].get<double>(), 2.0);
  EXPECT_NEAR(j["chi2_p"].get<double>(), std::erfc(1.0), 1e-12);      // sqrt(2 / 2)
  EXPECT_NEAR(j["chi2_cc_p"].get<double>(), std::erfc(0.75), 1e-12);  // sqrt(1.125 / 2)
  EXPECT_DOUBLE_EQ(j["acc_a"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(j["acc_b"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(j["agree"].get<double>(), 0.8);
  EXPECT_EQ(j["variant_a"], "A");
  EXPECT_EQ(j["variant_b"], "B");
  EXPECT_TRUE(j["warnings"].empty());
}

TEST_F(StatsCli, McnemarFourRunsPooled) {
  const auto r = run("mcnemar " + fixture("gsm8k-a.jsonl") + " " + fixture("gsm8k-b.jsonl") + " " +
                     fixture("gsm8k-b2.jsonl") + " " + fixture("gsm8k-a2.jsonl") + " --variant 32,128,128,32 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["b"], 11);
  EXPECT_EQ(j["c"], 3);
  EXPECT_DOUBLE_EQ(j["exact_p"].get<double>(), 940.0 / 16384.0);
  EXPECT_DOUBLE_EQ(j["acc_a"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(j["agree"].get<double>(), 66.0 / 80.0);
  ASSERT_EQ(j["pairs"].size(), 2u);
  EXPECT_EQ(j["pairs"][1]["run_a"], 4);
  EXPECT_EQ(j["pairs"][1]["run_b"], 3);
  EXPECT_EQ(j["pairs"][1]["b"], 5);
  EXPECT_EQ(j["pairs"][1]["c"], 1);
  ASSERT_EQ(j["same_variant"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["same_variant"][0]["agree"].get<double>(), 0.95);
  // Runs are numbered from 1 as given: variant 32 is runs 1 and 4, 128 runs 2 and 3.
  EXPECT_EQ(j["same_variant"][0]["variant"], "32");
  EXPECT_EQ(j["same_variant"][0]["run_1"], 1);
  EXPECT_EQ(j["same_variant"][0]["run_2"], 4);
  EXPECT_EQ(j["same_variant"][1]["variant"], "128");
  EXPECT_EQ(j["same_variant"][1]["run_1"], 2);
  EXPECT_EQ(j["same_variant"][1]["run_2"], 3);
  EXPECT_EQ(j["pairs"][0]["run_a"], 1);
  EXPECT_EQ(j["pairs"][0]["run_b"], 2);
  EXPECT_EQ(j["runs"][2]["variant"], "128");
  EXPECT_EQ(j["runs"][2]["correct"], 32);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST_F(StatsCli, McnemarWarnsOnNoisyRuns) {
  const auto r = run("mcnemar " + fixture("gsm8k-a.jsonl") + " " + fixture("gsm8k-b.jsonl") + " " +
                     fixture("gsm8k-b2.jsonl") + " " + fixture("gsm8k-a2.jsonl") + " --variant X,X,Y,Y");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: runs 1 and 2 of variant 'X' disagree on 20.0% of items"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("pooled over 2 pairs: b = "), std::string::npos) << r.out;
}

TEST_F(StatsCli, McnemarFileErrors) {
  const auto a = write("a.jsonl", "{\"id\":\"q1\",\"correct\":true}\n{\"id\":\"q2\",\"correct\":false}\n");
  expect_bad_input("mcnemar " + a + " " + (dir_ / "missing.jsonl").string(), {"missing.jsonl: no such file"});
  const auto empty = write("empty.jsonl", "\n  \n");
  expect_bad_input("mcnemar " + a + " " + empty, {"empty.jsonl: empty file"});
  const auto bad = write("bad.jsonl", "{\"id\":\"q1\",\"correct\":true}\n{\"id\":\"q2\" \"correct\":false}\n");
  expect_bad_input("mcnemar " + a + " " + bad, {"bad.jsonl:2: malformed JSON"});
  const auto nonbool = write("nonbool.jsonl", "{\"id\":\"q1\",\"correct\":true}\n{\"id\":\"q2\",\"correct\":\"no\"}\n");
  expect_bad_input("mcnemar " + a + " " + nonbool,
                   {"nonbool.jsonl:2: correct: expected true or false, got a string \"no\""});
  const auto dup = write("dup.jsonl",
                         "{\"id\":\"q1\",\"correct\":true}\n{\"id\":\"q2\",\"correct\":true}\n\n{\"id\":\"q2\",\"correct\":false}\n");
  expect_bad_input("mcnemar " + a + " " + dup, {"dup.jsonl:4: id: duplicate id \"q2\" (first on line 2)"});
  const auto extra = write("extra.jsonl", "{\"id\":\"q1\",\"correct\":true}\n{\"id\":\"q2\",\"correct\":true}\n"
                                          "{\"id\":\"q3\",\"correct\":true}\n");
  expect_bad_input("mcnemar " + a + " " + extra, {"extra.jsonl:3: id: \"q3\" is not in", "a.jsonl"});
  const auto fewer = write("fewer.jsonl", "{\"id\":\"q2\",\"correct\":true}\n");
  expect_bad_input("mcnemar " + a + " " + fewer, {"a.jsonl:1: id: \"q1\" is missing from", "fewer.jsonl"});
  const auto noid = write("noid.jsonl", "{\"correct\":true}\n");
  expect_bad_input("mcnemar " + a + " " + noid, {"noid.jsonl:1: id: missing (required)"});
}

TEST_F(StatsCli, McnemarArgumentErrors) {
  const auto a = fixture("gsm8k-a.jsonl");
  const auto b = fixture("gsm8k-b.jsonl");
  expect_bad_input("mcnemar", {"two files"});
  expect_bad_input("mcnemar " + a, {"two files"});
  expect_bad_input("mcnemar " + a + " " + b + " " + a, {"--variant"});
  expect_bad_input("mcnemar " + a + " " + b + " --variant A,B,A", {"3 labels for 2 files"});
  expect_bad_input("mcnemar " + a + " " + b + " " + a + " --variant A,B,C", {"third label 'C'"});
  expect_bad_input("mcnemar " + a + " " + b + " " + a + " --variant A,B,B", {"paired one to one"});
  expect_bad_input("mcnemar " + a + " " + b + " --confidence 1.5", {"--confidence"});
  expect_bad_input("mcnemar " + a + " " + b + " --no-such-flag", {"no-such-flag"});
}

// ----- bench-compare -----------------------------------------------------------

TEST_F(StatsCli, BenchCompareHandValuesAndSeed) {
  // B doubles every latency: every percentile +100%, interactivity -50%.
  const auto a = write("a.json", "{\"latency_ms\": [10, 20, 30, 40, 50]}");
  const auto b = write("b.json", "{\"latency_ms\": [20, 40, 60, 80, 100]}");
  const auto r = run("bench-compare " + a + " " + b + " --json --seed 17 --resamples 50");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["seed"], 17);
  EXPECT_EQ(j["resamples"], 50);
  EXPECT_DOUBLE_EQ(j["a"]["p90_ms"].get<double>(), 46.0);
  EXPECT_DOUBLE_EQ(j["b"]["p99_ms"].get<double>(), 99.2);
  EXPECT_DOUBLE_EQ(j["a"]["interactivity_tok_s"].get<double>(), 1000.0 / 46.0);
  EXPECT_EQ(j["a"]["throughput_source"], "mean_latency");
  EXPECT_NEAR(j["deltas"]["p50_ms"]["delta"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(j["deltas"]["interactivity_tok_s"]["delta"].get<double>(), -0.5, 1e-12);
  EXPECT_EQ(j["deltas"]["p90_ms"]["ci"].size(), 2u);
  // Same seed, same output.
  EXPECT_EQ(run("bench-compare " + a + " " + b + " --json --seed 17 --resamples 50").out, r.out);
  // The table prints the seed it used.
  const auto t = run("bench-compare " + a + " " + b + " --resamples 50");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("seed 20240229"), std::string::npos) << t.out;
}

TEST_F(StatsCli, BenchCompareFixturesAndCountWarning) {
  const auto r = run("bench-compare " + fixture("bench-a.json") + " " + fixture("bench-b.json") + " --resamples 100");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("p90 latency (ms)"), std::string::npos) << r.out;
  const auto a = write("a.json", "{\"latency_ms\": [10, 20], \"completed\": 100, \"duration_s\": 3}");
  const auto b = write("b.json", "{\"latency_ms\": [10, 20], \"completed\": 97, \"duration_s\": 3}");
  const auto w = run("bench-compare " + a + " " + b + " --resamples 10");
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_NE(w.err.find("warning: completed requests differ by 3.0% (100 vs 97)"), std::string::npos) << w.err;
  EXPECT_EQ(run("bench-compare " + a + " " + b + " --resamples 10 --max-count-diff 0.05").err, "");
}

TEST_F(StatsCli, BenchCompareErrors) {
  const auto good = write("good.json", "{\"latency_ms\": [1, 2, 3]}");
  expect_bad_input("bench-compare " + good + " " + (dir_ / "nope.json").string(), {"nope.json: no such file"});
  expect_bad_input("bench-compare " + good + " " + write("m.json", "{\"latency_ms\": [1, 2"), {"m.json: latency_ms[2]: malformed JSON"});
  expect_bad_input("bench-compare " + write("o.json", "[1]") + " " + good, {"o.json: expected an object"});
  expect_bad_input("bench-compare " + good + " " + write("n.json", "{\"latency\": [1]}"),
                   {"n.json: latency_ms: missing (required)"});
  expect_bad_input("bench-compare " + good + " " + write("e.json", "{\"latency_ms\": []}"), {"e.json: latency_ms: expected at least 1 entries, got 0"});
  expect_bad_input("bench-compare " + good + " " + write("s.json", "{\"latency_ms\": [1, \"x\"]}"),
                   {"s.json: latency_ms[1]: expected a positive finite number"});
  expect_bad_input("bench-compare " + good + " " + write("c.json", "{\"latency_ms\": [1], \"completed\": -4}"),
                   {"c.json: completed: must be in 0..9223372036854775807, got -4"});
  expect_bad_input("bench-compare " + good + " " + write("d.json", "{\"latency_ms\": [1], \"duration_s\": -1}"),
                   {"d.json: duration_s: expected a positive finite number, got -1"});
  expect_bad_input("bench-compare " + good + " " + good + " --resamples 0", {"resamples"});
  expect_bad_input("bench-compare " + good + " " + good + " --max-count-diff 2", {"max-count-diff"});
  expect_bad_input("bench-compare " + good, {"B"});
}

// ----- trace-stats -------------------------------------------------------------

TEST_F(StatsCli, TraceStatsFixtureJson) {
  // Expected values worked by hand in trace_test.cpp.
  const auto r = run("trace-stats " + fixture("trace-small.jsonl") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["steps"], 7);
  EXPECT_DOUBLE_EQ(j["ratio"]["p50"].get<double>(), 3.5);
  EXPECT_DOUBLE_EQ(j["ratio"]["p90"].get<double>(), 23.0);
  EXPECT_DOUBLE_EQ(j["ratio"]["max"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(j["frac_ratio_above_4"].get<double>(), 2.0 / 6.0);
  EXPECT_EQ(j["ratio_above_4"], 2);
  EXPECT_DOUBLE_EQ(j["headroom"]["p90"].get<double>(), 3.328125);
  EXPECT_DOUBLE_EQ(j["headroom"]["max"].get<double>(), 4.0);
  ASSERT_EQ(j["batch_histogram"].size(), 6u);
  EXPECT_EQ(j["batch_histogram"][1]["batch"], 2);
  EXPECT_EQ(j["batch_histogram"][1]["steps"], 2);
}

TEST_F(StatsCli, TraceStatsBudgetOptions) {
  // W = 64, P = 8 on the fixture: u = min(8, floor(64/B)) and c = min(8, ...):
  // step 3: u = 8, c = min(8, floor(64*4000/4700) = 54) = 8 -> 1; every step has
  // u = 8 except step 5 (B = 16, u = 4, c = min(8, floor(64*600/3600) = 10) = 8 -> 2).
  // Headroom sorted 1 1 1 1 1 2: p90 h = 4.5 -> 1.5, max 2.
  const auto r = run("trace-stats " + fixture("trace-small.jsonl") + " --json --budget 64 --max-partitions 8");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["headroom"]["p50"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["headroom"]["p90"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["headroom"]["max"].get<double>(), 2.0);
}

TEST_F(StatsCli, TraceStatsErrors) {
  expect_bad_input("trace-stats " + (dir_ / "none.jsonl").string(), {"none.jsonl: no such file"});
  expect_bad_input("trace-stats " + write("m.jsonl", "{\"context_lens\": [1]}\n{\"context_lens\": [1 2]}\n"),
                   {"m.jsonl:2: context_lens[1]: malformed JSON"});
  expect_bad_input("trace-stats " + write("f.jsonl", "{\"lens\": [1]}\n"), {"f.jsonl:1: context_lens: missing (required)"});
  expect_bad_input("trace-stats " + write("i.jsonl", "{\"context_lens\": [1, 2.5]}\n"),
                   {"i.jsonl:1: context_lens[1]: expected an integer, got a number 2.5"});
  expect_bad_input("trace-stats " + write("z.jsonl", "\n{\"context_lens\": []}\n"), {"z.jsonl:2: context_lens: expected at least 1 entries, got 0"});
  expect_bad_input("trace-stats " + write("e.jsonl", ""), {"e.jsonl: empty file"});
  const auto ok = write("ok.jsonl", "{\"context_lens\": [1]}\n");
  expect_bad_input("trace-stats " + ok + " --budget 0", {"budget"});
  expect_bad_input("trace-stats " + ok + " --max-partitions 0", {"max-partitions"});
  expect_bad_input("trace-stats", {"TRACE"});
}

// The text report shows the figures the JSON report holds: every p value (6
// significant digits) and both chi-square statistics (4 decimals), for counts
// and for run files, pooled or not.
TEST_F(StatsCli, McnemarTextShowsTheJsonFigures) {
  const std::string files2 = fixture("gsm8k-a.jsonl") + " " + fixture("gsm8k-b.jsonl");
  const std::string files4 = files2 + " " + fixture("gsm8k-b2.jsonl") + " " + fixture("gsm8k-a2.jsonl") +
                             " --variant 32,128,128,32";
  for (const std::string& args : {std::string("mcnemar --counts 121,59"), std::string("mcnemar --counts 6,2"),
                                   "mcnemar " + files2, "mcnemar " + files4}) {
    SCOPED_TRACE(args);
    const auto text = run(args);
    const auto js = run(args + " --json");
    ASSERT_EQ(text.code, 0) << text.err;
    ASSERT_EQ(js.code, 0) << js.err;
    const auto j = json::parse(js.out);
    char buf[64];
    for (const char* key : {"exact_p", "mid_p", "chi2_cc_p", "chi2_p"}) {
      std::snprintf(buf, sizeof buf, "%.6g", j[key].get<double>());
      EXPECT_NE(text.out.find(std::string("  ") + buf), std::string::npos) << key << " " << buf << "\n" << text.out;
    }
    for (const char* key : {"chi2_cc", "chi2"}) {
      std::snprintf(buf, sizeof buf, "%.4f", j[key].get<double>());
      EXPECT_NE(text.out.find(buf), std::string::npos) << key << " " << buf << "\n" << text.out;
    }
    EXPECT_NE(text.out.find("b = " + std::to_string(j["b"].get<int64_t>())), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("c = " + std::to_string(j["c"].get<int64_t>())), std::string::npos) << text.out;
  }
}

}  // namespace
