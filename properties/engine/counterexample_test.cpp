// SPDX-License-Identifier: Apache-2.0
// The engine front shared by pav verify and pav fuzz: where cases are saved,
// how they are named, that two different failures give two files with the first
// one reported, that the failure reported is the first in case order whatever
// the number of jobs, that a failed save is reported without losing the run,
// and that a stop request ends a run cleanly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <thread>

#include "common/fault_testing.hpp"
#include "common/test_paths.hpp"
#include "properties/case/case_format.hpp"
#include "properties/engine/counterexample.hpp"
#include "properties/engine/fuzz_engine.hpp"
#include "properties/checks/replay.hpp"

using namespace pav::props;
using namespace pav::props::fuzz;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("pav-ce-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string name_of_failure(int v) { return "value " + std::to_string(v) + " fails"; }

int value_of_seed(uint64_t seed) { return rc::gen::inRange(0, 1000)(rc::Random(seed), case_size(seed)).value(); }

// A property over one integer in 0..999 that fails when `fails(v)`; its case
// file stores v as the single length. `slow_value` (if >= 0) makes the check of
// that value take 300 ms.
Property int_property(const std::string& name, std::function<bool(int)> fails, int slow_value = -1) {
  PropertyParts<int> parts{
      name,
      "test only",
      true,
      rc::gen::inRange(0, 1000),
      [fails, slow_value](const int& v, const CheckContext&) {
        if (v == slow_value) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return fails(v) ? Verdict::fail(name_of_failure(v)) : Verdict::pass();
      },
      [](const int& v, json& meta) {
        CaseSpec s;
        s.lens = {v};
        meta["value"] = v;
        return s;
      },
      [](const CaseSpec& s, const json&) { return s.lens.at(0); },
      [](const int& v) { return "value " + std::to_string(v); },
  };
  return make_property(std::move(parts));
}

FuzzOptions quiet_options(const fs::path& save_dir, uint64_t seed, int64_t cases) {
  FuzzOptions o;
  o.cases = cases;
  o.seed = seed;
  o.save_dir = save_dir.string();
  o.progress = false;
  return o;
}

FuzzReport run_quietly(const FuzzOptions& o, const std::vector<const Property*>& props) {
  std::FILE* log = std::tmpfile();
  FuzzReport r = run_fuzz(o, props, log, nullptr);
  std::fclose(log);
  return r;
}

// The first case index from `base` whose value fails, found by regenerating
// each seed's value directly (not through run_fuzz).
uint64_t first_failing_index(uint64_t base, const std::function<bool(int)>& fails) {
  for (uint64_t k = 0; k < 100000; ++k)
    if (fails(value_of_seed(case_seed(base, k, 0, 1)))) return k;
  ADD_FAILURE() << "no failing case";
  return 0;
}

}  // namespace

TEST(CounterexampleName, IsPropertySeedAndAStableHashOfTheCase) {
  CaseSpec a;
  a.lens = {300, 0, 5};
  const std::string n = counterexample_name("decode", 42, a);
  EXPECT_TRUE(std::regex_match(n, std::regex(R"(decode-seed42-[0-9a-f]{8}\.json)"))) << n;
  EXPECT_EQ(counterexample_name("decode", 42, a), n) << "the same case must get the same name";
  CaseSpec b = a;
  b.lens[2] = 6;
  EXPECT_NE(counterexample_name("decode", 42, b), n) << "a different case must get a different name";
  EXPECT_NE(counterexample_name("decode", 43, a), n);
  EXPECT_NE(counterexample_name("planner", 42, a), n);
  const std::string no_seed = counterexample_name("Suite.Test name/x", std::nullopt, a);
  EXPECT_TRUE(std::regex_match(no_seed, std::regex(R"(Suite\.Test_name_x-[0-9a-f]{8}\.json)"))) << no_seed;
  // The hash part is the same case's, seed or not.
  EXPECT_EQ(n.substr(n.size() - 13), no_seed.substr(no_seed.size() - 13));
}

TEST(CounterexampleDir, DefaultsToTheEnvironmentOrCounterexamplesNeverTheFixtures) {
  const char* old = std::getenv("PAV_COUNTEREXAMPLE_DIR");
  const std::string saved = old ? old : "";
  ::unsetenv("PAV_COUNTEREXAMPLE_DIR");
  EXPECT_EQ(default_counterexample_dir(), "counterexamples");
  EXPECT_EQ(FuzzOptions{}.save_dir, "counterexamples");
  ::setenv("PAV_COUNTEREXAMPLE_DIR", "", 1);
  EXPECT_EQ(default_counterexample_dir(), "counterexamples");
  ::setenv("PAV_COUNTEREXAMPLE_DIR", "/tmp/elsewhere", 1);
  EXPECT_EQ(default_counterexample_dir(), "/tmp/elsewhere");
  EXPECT_EQ(FuzzOptions{}.save_dir, "/tmp/elsewhere");
  if (old) ::setenv("PAV_COUNTEREXAMPLE_DIR", saved.c_str(), 1);
  else ::unsetenv("PAV_COUNTEREXAMPLE_DIR");
}

TEST(CounterexampleSave, RecordsPropertySeedVersionAndCommit) {
  const fs::path dir = scratch_dir("meta");
  CaseSpec s;
  s.lens = {7};
  const std::string path = save_counterexample((dir / "new" / "sub").string(), "planner", 9, s, {{"extra", 1}});
  EXPECT_EQ(fs::path(path).parent_path(), dir / "new" / "sub") << "the folder is created on save";
  json meta;
  const CaseSpec back = load_case_spec(path, &meta);
  EXPECT_EQ(back.lens, s.lens);
  EXPECT_EQ(meta.value("property", ""), "planner");
  EXPECT_EQ(meta.value("seed", 0), 9);
  EXPECT_EQ(meta.value("extra", 0), 1);
  EXPECT_FALSE(meta.value("pav_version", "").empty());
  EXPECT_FALSE(meta.value("source_commit", "").empty());
  fs::remove_all(dir);
}

TEST(FuzzEngine, TwoDifferentFailuresGiveTwoFilesWithTheFirstReported) {
  const fs::path dir = scratch_dir("two");
  const Property big = int_property("test-big-value", [](int v) { return v >= 500; });
  const Property small = int_property("test-small-value", [](int v) { return v < 300; });
  FuzzOptions o = quiet_options(dir, 777, 200);
  o.keep_going = true;
  const FuzzReport r = run_quietly(o, {&big, &small});
  ASSERT_EQ(r.runs.size(), 2u);
  ASSERT_TRUE(r.runs[0].failure && r.runs[1].failure);
  ASSERT_NE(r.first_failure(), nullptr);
  EXPECT_EQ(r.first_failure()->property, "test-big-value") << "the first failure in run order is the one reported";
  EXPECT_NE(r.runs[0].saved_path, r.runs[1].saved_path);
  const auto files = files_in(dir);
  ASSERT_EQ(files.size(), 2u) << "one file per failure, none overwritten";
  for (const PropertyRun& run : r.runs) {
    json meta;
    const CaseSpec spec = load_case_spec(run.saved_path, &meta);
    EXPECT_EQ(meta.value("property", ""), run.property);
    EXPECT_EQ(meta.value("seed", uint64_t(0)), run.failure->seed);
    EXPECT_EQ(meta.value("message", ""), run.failure->message);
    EXPECT_EQ(fs::path(run.saved_path).filename().string(), counterexample_name(run.property, run.failure->seed, spec));
  }
  // Shrunk to each property's own minimum: 500 and 0.
  EXPECT_EQ(r.runs[0].failure->message, name_of_failure(500));
  EXPECT_EQ(r.runs[1].failure->message, name_of_failure(0));

  // Without keep_going the run stops at the first failure. A run from other
  // seeds adds its own file: nothing is overwritten.
  o.keep_going = false;
  o.seed = 900000;
  const FuzzReport once = run_quietly(o, {&big, &small});
  EXPECT_EQ(once.runs.size(), 1u);
  EXPECT_EQ(files_in(dir).size(), 3u);
  // The same seeds again find the same case under the same name: still three.
  run_quietly(o, {&big, &small});
  EXPECT_EQ(files_in(dir).size(), 3u);
  fs::remove_all(dir);
}

TEST(FuzzEngine, ReportsTheFirstFailureInCaseOrderWhateverTheJobs) {
  const fs::path dir = scratch_dir("order");
  const auto fails = [](int v) { return v % 7 == 3; };
  // A base whose first failing case k0 is at least 3: with 3 jobs, case k0 - 3
  // runs on the same job just before it. That case is made slow, so the other
  // jobs find later failures first; the engine must still run k0 and report it.
  uint64_t base = 4100, k0 = 0;
  for (;; ++base) {
    k0 = first_failing_index(base, fails);
    if (k0 >= 3) break;
  }
  const int first_value = value_of_seed(case_seed(base, k0, 0, 1));
  const Property p = int_property("test-mod7", fails, value_of_seed(case_seed(base, k0 - 3, 0, 1)));
  for (int jobs : {1, 3}) {
    FuzzOptions o = quiet_options(dir / std::to_string(jobs), base, 2000);
    o.jobs = jobs;
    o.shrink.max_tries = 0;  // keep the case as found, to compare values
    const FuzzReport r = run_quietly(o, {&p});
    ASSERT_FALSE(r.passed());
    EXPECT_EQ(r.first_failure()->failure->seed, case_seed(base, k0, 0, 1)) << "jobs " << jobs;
    EXPECT_EQ(r.first_failure()->failure->first_message, name_of_failure(first_value)) << "jobs " << jobs;
    EXPECT_TRUE(r.first_failure()->failure->shrink_hit_limit) << "jobs " << jobs;
    EXPECT_FALSE(r.first_failure()->failure->shrink_stopped) << "a tries limit is not a stop; jobs " << jobs;
  }
  fs::remove_all(dir);
}

TEST(FuzzEngine, AFailedSaveIsReportedAndTheRunGoesOn) {
  const fs::path dir = scratch_dir("nosave");
  const Property big = int_property("test-big-value", [](int v) { return v >= 500; });
  const Property small = int_property("test-small-value", [](int v) { return v < 300; });
  // A save folder under a plain file cannot be made.
  std::FILE* f = std::fopen((dir / "plain").c_str(), "w");
  std::fclose(f);
  FuzzOptions o = quiet_options(dir / "plain" / "sub", 777, 200);
  o.keep_going = true;
  const FuzzReport r = run_quietly(o, {&big, &small});
  ASSERT_EQ(r.runs.size(), 2u) << "the run goes on after a failed save";
  for (const PropertyRun& run : r.runs) {
    ASSERT_TRUE(run.failure.has_value());
    EXPECT_TRUE(run.saved_path.empty());
    EXPECT_NE(run.save_error.find("counterexample folder"), std::string::npos) << run.save_error;
  }
  EXPECT_EQ(files_in(dir).size(), 1u);
  fs::remove_all(dir);
}

TEST(FuzzEngine, AFullDiskLeavesNoPartialCaseFile) {
  const fs::path dir = scratch_dir("full");
  const Property big = int_property("test-big-value", [](int v) { return v >= 500; });
  pav::testing::FullTmpfs full(dir / "mnt");
  FuzzOptions o = quiet_options(full.dir(), 777, 200);
  FuzzReport r;
  if (full.mounted()) {
    r = run_quietly(o, {&big});
  } else {
    // No mount here: a file size limit is the same fault to the writer (EFBIG).
    pav::testing::FileSizeLimit limit(64);
    r = run_quietly(o, {&big});
  }
  ASSERT_FALSE(r.passed());
  const PropertyRun& run = *r.first_failure();
  EXPECT_TRUE(run.saved_path.empty());
  EXPECT_FALSE(run.save_error.empty());
  EXPECT_NE(run.save_error.find(full.mounted() ? "No space left" : "File too large"), std::string::npos)
      << run.save_error;
  for (const auto& p : files_in(full.dir()))
    EXPECT_EQ(p.filename().string().rfind("filler", 0), 0u) << "left behind: " << p;
  full.unmount();
  fs::remove_all(dir);
}

TEST(FuzzEngine, AStopRequestEndsTheRunCleanly) {
  const fs::path dir = scratch_dir("stop");
  const Property never = int_property("test-never", [](int) { return false; });
  const Property also = int_property("test-never-2", [](int) { return false; });
  std::atomic<int> polls{0};
  FuzzOptions o = quiet_options(dir, 5, 1000000);
  o.should_stop = [&] { return ++polls > 50; };
  const FuzzReport r = run_quietly(o, {&never, &also});
  EXPECT_TRUE(r.passed());
  EXPECT_TRUE(r.interrupted);
  ASSERT_EQ(r.runs.size(), 1u) << "the next property does not start after a stop";
  EXPECT_TRUE(r.runs[0].interrupted);
  EXPECT_GT(r.runs[0].cases, 0);
  EXPECT_LT(r.runs[0].cases, 1000);
  EXPECT_TRUE(files_in(dir).empty());
  fs::remove_all(dir);
}

TEST(FuzzEngine, AStopDuringAFailureSavesTheCaseAsFound) {
  const fs::path dir = scratch_dir("stop-fail");
  std::atomic<bool> seen_failure{false};
  const Property big = int_property("test-big-value", [&](int v) {
    if (v >= 500) seen_failure = true;
    return v >= 500;
  });
  FuzzOptions o = quiet_options(dir, 777, 1000);
  o.should_stop = [&] { return seen_failure.load(); };
  const FuzzReport r = run_quietly(o, {&big});
  ASSERT_FALSE(r.passed());
  EXPECT_TRUE(r.interrupted);
  const PropertyRun& run = *r.first_failure();
  EXPECT_TRUE(run.failure->shrink_hit_limit) << "no shrinking after the stop";
  EXPECT_TRUE(run.failure->shrink_stopped) << "the limit was the stop, and the run says so";
  EXPECT_EQ(run.failure->shrink_tries, 0);
  ASSERT_FALSE(run.saved_path.empty()) << run.save_error;
  json meta;
  load_case_spec(run.saved_path, &meta);
  EXPECT_EQ(meta.value("message", ""), run.failure->first_message) << "the case saved is the one found";
  fs::remove_all(dir);
}

// A case found through a kernel under test (meta.kernel) is evidence about that
// kernel: replayed without one it is refused by name (bad input), never run on
// pav's own kernels, where it would pass for the wrong reason. The same file
// without meta.kernel replays on pav's own kernels as before.
TEST(CaseReplay, ACaseOfAKernelUnderTestIsNotRunOnPavsOwnKernels) {
  const fs::path dir = scratch_dir("foreign");
  const fs::path fixture = fs::path(PAV_SOURCE_DIR) / "fixtures/counterexamples/decode-causality-row-sees-next-token.json";
  json meta;
  const CaseSpec spec = load_case_spec(fixture.string(), &meta);
  const std::string plain = (dir / "plain.json").string();
  save_case(plain, spec, meta);
  EXPECT_TRUE(replay_case_file(plain, {}).passed);
  for (const json& kernel : {json{{"adapter", "exec"}, {"spec", "exec:python3 w.py"}},
                             json{{"adapter", "lib (isolated)"}, {"spec", "lib:k.so"}}, json("not an object")}) {
    SCOPED_TRACE(kernel.dump());
    json m = meta;
    m["kernel"] = kernel;
    const std::string path = (dir / "foreign.json").string();
    save_case(path, spec, m);
    try {
      replay_case_file(path, {});
      ADD_FAILURE() << "a case of a kernel under test replayed on pav's own kernels";
    } catch (const CaseError& e) {
      if (!kernel.is_object()) {
        // A meta.kernel that names no kernel is bad input, refused by name as the file is read.
        EXPECT_NE(std::string(e.what()).find("meta.kernel: expected an object"), std::string::npos) << e.what();
        continue;
      }
      EXPECT_NE(std::string(e.what()).find("meta.kernel.spec"), std::string::npos) << e.what();
      // Refused by name, not opened: a case file never runs a command or loads a library here.
      EXPECT_NE(std::string(e.what()).find("it replays only on that kernel"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(kernel["spec"].get<std::string>()), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
}
