// SPDX-License-Identifier: Apache-2.0
// A --json report says what ran: the options a run was given come back in its
// report (seed, shard, jobs, backend, save folder, per-property case counts),
// each checked against the value passed on the command line, for two runs
// with different options so no field can be a constant.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "common/test_paths.hpp"

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  json report;
};

Outcome pav(const std::string& args) {
  const std::string cmd = std::string(PAV_BINARY) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  Outcome r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.report = json::parse(out, nullptr, /*allow_exceptions=*/false);
  return r;
}

class ReportJson : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pav-report-json-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ReportJson, FuzzEchoesItsOptions) {
  struct Case {
    int seed, shard, shards, jobs, cases;
    const char* properties;
  };
  for (const Case& c : {Case{3, 0, 1, 1, 20, "planner"}, Case{17, 1, 3, 2, 9, "planner,gate-mirror"}}) {
    const std::string save = (dir_ / ("ce" + std::to_string(c.seed))).string();
    const std::string args = "fuzz --property " + std::string(c.properties) + " --cases " + std::to_string(c.cases) +
                             " --seed " + std::to_string(c.seed) + " --shard " + std::to_string(c.shard) + "/" +
                             std::to_string(c.shards) + " --jobs " + std::to_string(c.jobs) +
                             " --backend cpu --quiet --save " + save + " --json";
    SCOPED_TRACE(args);
    const Outcome r = pav(args);
    ASSERT_EQ(r.code, 0);
    ASSERT_TRUE(r.report.is_object());
    const json& j = r.report;
    EXPECT_EQ(j.value("command", ""), "fuzz");
    EXPECT_EQ(j.value("base_seed", -1), c.seed);
    EXPECT_EQ(j.value("shard", ""), std::to_string(c.shard) + "/" + std::to_string(c.shards));
    EXPECT_EQ(j.value("jobs", -1), c.jobs);
    EXPECT_EQ(j.value("backend", ""), "cpu");
    EXPECT_EQ(j.value("save_dir", ""), save);
    EXPECT_EQ(j.value("passed", false), true);
    EXPECT_EQ(j.value("interrupted", true), false);
    EXPECT_FALSE(j.contains("signal"));
    const std::string props = c.properties;
    const size_t want_runs = props.find(',') == std::string::npos ? 1 : 2;
    ASSERT_EQ(j["runs"].size(), want_runs);
    EXPECT_EQ(j["runs"][0].value("property", ""), props.substr(0, props.find(',')));
    for (const json& run : j["runs"]) {
      EXPECT_EQ(run.value("cases", -1), c.cases) << run.dump();
      EXPECT_EQ(run.value("passed", false), true) << run.dump();
      EXPECT_EQ(run.value("interrupted", true), false) << run.dump();
      int64_t per_job = 0;
      for (const json& n : run["cases_per_job"]) per_job += n.get<int64_t>();
      EXPECT_EQ(run["cases_per_job"].size(), size_t(c.jobs)) << run.dump();
      EXPECT_EQ(per_job, c.cases) << run.dump();
    }
  }
}

TEST_F(ReportJson, VerifyEchoesItsOptions) {
  for (int seed : {5, 20261129}) {
    for (int cases : {12, 20}) {
      const std::string save = (dir_ / "ce").string();
      const std::string args = "verify --backend cpu --checks planner --plan-cases " + std::to_string(cases) +
                               " --seed " + std::to_string(seed) + " --quiet --save " + save + " --json";
      SCOPED_TRACE(args);
      const Outcome r = pav(args);
      ASSERT_EQ(r.code, 0);
      ASSERT_TRUE(r.report.is_object());
      const json& j = r.report;
      EXPECT_EQ(j.value("command", ""), "verify");
      EXPECT_EQ(j.value("backend", ""), "cpu");
      EXPECT_EQ(j.value("seed", -1), seed);
      EXPECT_EQ(j.value("save_dir", ""), save);
      EXPECT_EQ(j.value("passed", false), true);
      EXPECT_EQ(j.value("verdict", ""), "PASS");
      EXPECT_EQ(j.value("interrupted", true), false);
      ASSERT_EQ(j["checks"].size(), 1u);
      EXPECT_EQ(j["checks"][0].value("name", ""), "planner");
      EXPECT_EQ(j["checks"][0].value("cases", -1), cases);
      EXPECT_EQ(j["checks"][0].value("passed", false), true);
    }
  }
}

}  // namespace
