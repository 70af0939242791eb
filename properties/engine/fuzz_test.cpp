// SPDX-License-Identifier: Apache-2.0
// The fuzz engine: disjoint seeds across jobs and shards, greedy shrinking to a
// local minimum, a planted defect found, shrunk to its known minimal case,
// saved and replayed through the same property, and replay dispatch by the
// property a case file names.
#include <gtest/gtest.h>

#include <chrono>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "properties/case/case_format.hpp"
#include "properties/engine/fuzz_engine.hpp"
#include "properties/checks/builtin_properties.hpp"
#include "properties/checks/replay.hpp"
#include "properties/gen/gate_gen.hpp"

using namespace pav::props;
using namespace pav::props::fuzz;
using nlohmann::json;

namespace {

std::filesystem::path scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("pav-fuzz-test-" + name + "-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                    "-" + std::to_string(uint64_t(std::chrono::steady_clock::now().time_since_epoch().count())));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<std::filesystem::path> json_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") out.push_back(e.path());
  return out;
}

// The first seed from `from` whose generated value fails `check`.
template <class T>
uint64_t first_failing_seed(const rc::Gen<T>& gen, const std::function<Verdict(const T&)>& check, uint64_t from) {
  for (uint64_t s = from; s < from + 10000; ++s)
    if (!check(gen(rc::Random(s), case_size(s)).value()).passed) return s;
  ADD_FAILURE() << "no failing seed in 10000 from " << from;
  return from;
}

// A planner-shaped property with a planted defect: any length above 4096 "fails".
// Its minimal counterexample under greedy shrinking is exactly {4097}.
Property planted_planner_property() {
  PropertyParts<std::vector<int32_t>> parts{
      "planted-long-length",
      "test only: lengths above 4096 fail",
      true,
      rc::gen::container<std::vector<int32_t>>(rc::gen::inRange<int32_t>(0, 100000)),
      [](const std::vector<int32_t>& lens, const CheckContext&) {
        for (int32_t l : lens)
          if (l > 4096) return Verdict::fail("planted: length " + std::to_string(l) + " > 4096");
        return Verdict::pass();
      },
      [](const std::vector<int32_t>& lens, json& meta) {
        CaseSpec s;
        s.lens = lens.empty() ? std::vector<int32_t>{0} : lens;
        meta["planted"] = true;
        return s;
      },
      [](const CaseSpec& s, const json&) { return s.lens; },
      nullptr,
  };
  return make_property(std::move(parts));
}

}  // namespace

TEST(FuzzSeeds, ShardsAndJobsRunDisjointSeedsCoveringTheStream) {
  const uint64_t base = 1000;
  const uint64_t cases = 97;
  for (int shards : {1, 2, 3, 7})
    for (int jobs : {1, 2, 4}) {
      std::set<uint64_t> seen;
      for (int shard = 0; shard < shards; ++shard)
        for (int job = 0; job < jobs; ++job)
          for (uint64_t m = 0;; ++m) {
            const uint64_t k = job_case_index(job, jobs, m);
            if (k >= cases) break;
            const uint64_t seed = case_seed(base, k, shard, shards);
            EXPECT_TRUE(seen.insert(seed).second)
                << "seed " << seed << " run twice (shard " << shard << "/" << shards << ", job " << job << ")";
            EXPECT_EQ((seed - base) % uint64_t(shards), uint64_t(shard));
          }
      // Together the shards run exactly the seeds base .. base + shards*cases - 1.
      EXPECT_EQ(seen.size(), size_t(shards) * cases);
      EXPECT_EQ(*seen.begin(), base);
      EXPECT_EQ(*seen.rbegin(), base + uint64_t(shards) * cases - 1);
    }
}

TEST(FuzzSeeds, SizeCyclesThroughEveryGeneratorSize) {
  std::set<int> sizes;
  for (uint64_t s = 5; s < 5 + kMaxSize + 1; ++s) sizes.insert(case_size(s));
  EXPECT_EQ(sizes.size(), size_t(kMaxSize + 1));
  EXPECT_EQ(*sizes.begin(), 0);
  EXPECT_EQ(*sizes.rbegin(), kMaxSize);
}

TEST(FuzzShrink, WalksToTheMinimalCounterexample) {
  // Fails when any element is >= 100: the only local minimum is {100}.
  const auto gen = rc::gen::container<std::vector<int>>(rc::gen::inRange(0, 1000));
  const std::function<Verdict(const std::vector<int>&)> check = [](const std::vector<int>& v) {
    for (int x : v)
      if (x >= 100) return Verdict::fail("element >= 100");
    return Verdict::pass();
  };
  for (uint64_t from : {1ull, 500ull, 9000ull}) {
    const uint64_t seed = first_failing_seed(gen, check, from);
    const auto root = gen(rc::Random(seed), case_size(seed));
    const Shrunk<std::vector<int>> s = shrink_failing(root, check(root.value()), check);
    EXPECT_EQ(s.value, std::vector<int>{100}) << "seed " << seed << ", original size " << root.value().size();
    EXPECT_FALSE(s.verdict.passed);
    EXPECT_FALSE(s.hit_limit);
    EXPECT_GT(s.steps, 0) << "seed " << seed;
  }
}

TEST(FuzzShrink, SimplifiesPastWhatTheShrinkTreeReaches) {
  // gen::element values do not shrink in RapidCheck; the property's own
  // simplifications (halve, minus one) take the value down to the boundary.
  PropertyParts<int> parts{
      "planted-threshold",
      "test only: values >= 300 fail",
      true,
      rc::gen::element(1000, 5000, 7777),
      [](const int& x, const CheckContext&) { return x >= 300 ? Verdict::fail("planted") : Verdict::pass(); },
      [](const int& x, json& meta) {
        meta["x"] = x;
        return CaseSpec{};
      },
      [](const CaseSpec&, const json& meta) { return meta.at("x").get<int>(); },
      nullptr,
      [](const int& x) { return std::vector<int>{x / 2, x - 1}; },
  };
  const Property p = make_property(std::move(parts));
  for (uint64_t seed = 1; seed < 4; ++seed) {
    const std::optional<Found> f = p.shrink_seed(seed, 50, {}, {});
    ASSERT_TRUE(f.has_value()) << "seed " << seed;
    EXPECT_EQ(f->meta.at("x").get<int>(), 300) << "seed " << seed;
    EXPECT_EQ(f->shrink_steps, 0);
    EXPECT_GT(f->simplify_steps, 0);
  }
}

TEST(FuzzShrink, StopsAtTheTryLimit) {
  const auto gen = rc::gen::container<std::vector<int>>(rc::gen::inRange(0, 1000));
  const std::function<Verdict(const std::vector<int>&)> check = [](const std::vector<int>& v) {
    for (int x : v)
      if (x >= 100) return Verdict::fail("element >= 100");
    return Verdict::pass();
  };
  const uint64_t seed = first_failing_seed(gen, check, 77);
  const auto root = gen(rc::Random(seed), case_size(seed));
  ShrinkLimits limits;
  limits.max_tries = 1;
  const auto s = shrink_failing(root, check(root.value()), check, limits);
  EXPECT_LE(s.tries, 1);
  EXPECT_FALSE(s.verdict.passed);
}

TEST(FuzzEngine, FindsShrinksSavesAndReplaysAPlantedDefect) {
  const Property planted = planted_planner_property();
  const auto dir = scratch_dir("planted");
  FuzzOptions o;
  o.cases = 500;
  o.seed = 4242;
  o.jobs = 2;
  o.save_dir = dir.string();
  o.progress = false;
  std::FILE* log = std::tmpfile();
  const FuzzReport r = run_fuzz(o, {&planted}, log, nullptr);
  std::fclose(log);
  ASSERT_FALSE(r.passed()) << "the planted defect was not found in 500 cases from seed 4242";
  const PropertyRun& run = *r.first_failure();
  ASSERT_FALSE(run.saved_path.empty()) << run.save_error;
  const auto files = json_files(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].string(), run.saved_path);

  json meta;
  const CaseSpec saved = load_case_spec(run.saved_path, &meta);
  // The saved case is the shrunk one, not the first failing draw.
  EXPECT_EQ(saved.lens, std::vector<int32_t>{4097}) << "saved " << run.saved_path;
  EXPECT_EQ(meta.value("property", ""), "planted-long-length");
  EXPECT_EQ(meta.value("seed", uint64_t(0)), run.failure->seed);
  EXPECT_EQ(meta.value("size", -1), case_size(run.failure->seed));
  EXPECT_EQ(meta.value("planted", false), true);
  EXPECT_EQ(meta.value("message", ""), "planted: length 4097 > 4096");
  EXPECT_EQ((run.failure->seed - o.seed) % uint64_t(o.shard_count), uint64_t(o.shard_index));

  // The seed alone reproduces the first failure.
  EXPECT_FALSE(planted.check_seed(run.failure->seed, case_size(run.failure->seed), {}).passed);
  // Replaying the file runs the same property and fails again.
  const Verdict again = planted.replay(saved, meta, {});
  EXPECT_FALSE(again.passed);
  EXPECT_EQ(again.message, "planted: length 4097 > 4096");
  std::filesystem::remove_all(dir);
}

TEST(FuzzEngine, AFailureOnPavsKernelsIsSavedWithTheKernelItRanOnAndHowToRerunIt) {
  // pav's kernels on the GPU backend, which this test binary never registers:
  // every decode case fails (the launch throws) wherever the test runs, so a
  // failure is found, shrunk and saved without a planted defect in the kernels.
  if (pav::kernels::gpu_backend_available()) GTEST_SKIP() << "a GPU backend is registered here";
  const Property* p = find_property("decode");
  ASSERT_NE(p, nullptr);
  CheckContext gpu;
  gpu.backend = pav::kernels::Backend::gpu;
  ShrinkLimits limits;
  limits.max_tries = 3;
  const uint64_t seed = 91;
  const std::optional<Found> f = p->shrink_seed(seed, case_size(seed), gpu, limits);
  ASSERT_TRUE(f.has_value()) << "the decode property passed on an unregistered GPU backend";
  // The case records the kernel it ran on, with the settings it drew, so a
  // replay runs that kernel, not pav's kernel with other settings.
  ASSERT_TRUE(f->meta.contains("kernel")) << f->meta.dump();
  const std::string spec = f->meta["kernel"].value("spec", "");
  EXPECT_EQ(spec.rfind("pav:gpu --path ", 0), 0u) << spec;
  EXPECT_NE(spec.find(" --partial "), std::string::npos) << spec;
  EXPECT_NE(spec.find(" --arch "), std::string::npos) << spec;
  EXPECT_NE(spec.find(" --cu "), std::string::npos) << spec;
  EXPECT_EQ(f->meta["kernel"].value("adapter", ""), "pav");
  EXPECT_NE(f->description.find(" on pav's kernel " + spec.substr(std::string("pav:gpu ").size())), std::string::npos)
      << f->description;

  const auto dir = scratch_dir("pav-kernel-record");
  FuzzOptions o;
  o.ctx = gpu;
  o.seed = seed;
  const std::string path = save_found(dir.string(), *f, o);
  json meta;
  load_case_spec(path, &meta);
  EXPECT_EQ(meta["kernel"].value("spec", ""), spec);
  // The seed draws the same settings again: the command names the backend.
  EXPECT_EQ(meta.value("reproduce", ""), "pav fuzz --property decode --seed 91 --cases 1 --backend gpu");
  o.ctx.backend = pav::kernels::Backend::cpu;
  EXPECT_EQ(reproduce_command("planner", 5, o), "pav fuzz --property planner --seed 5 --cases 1 --backend cpu");
  std::filesystem::remove_all(dir);
}

TEST(FuzzEngine, RunsExactlyTheCaseBudgetWhenNothingFails) {
  const auto dir = scratch_dir("budget");
  FuzzOptions o;
  o.cases = 60;
  o.seed = 99;
  o.jobs = 3;
  o.shard_index = 1;
  o.shard_count = 2;
  o.save_dir = dir.string();
  o.progress = false;
  std::FILE* log = std::tmpfile();
  const FuzzReport r = run_fuzz(o, {find_property("planner")}, log, nullptr);
  std::fclose(log);
  EXPECT_TRUE(r.passed()) << (r.first_failure() ? r.first_failure()->failure->message : "");
  ASSERT_EQ(r.runs.size(), 1u);
  EXPECT_EQ(r.runs[0].cases, 60);
  EXPECT_EQ(r.runs[0].cases_per_job, (std::vector<int64_t>{20, 20, 20}));
  EXPECT_TRUE(json_files(dir).empty());
  std::filesystem::remove_all(dir);
}

// A time budget over several properties is shared: each property gets its
// part (the budget over the number of properties), runs cases in it, and the
// run ends near the whole budget, neither the first property taking it all
// nor a later one starved. The bounds are generous: a planner case takes
// milliseconds, so each part ends within a case of its deadline.
TEST(FuzzEngine, ATimeBudgetIsSharedByEveryProperty) {
  const auto dir = scratch_dir("timed");
  FuzzOptions o;
  o.minutes = 0.04;  // 2.4 s: 1.2 s for each of the two
  o.seed = 7;
  o.jobs = 1;
  o.save_dir = dir.string();
  o.progress = false;
  std::FILE* log = std::tmpfile();
  const auto t0 = std::chrono::steady_clock::now();
  const FuzzReport r = run_fuzz(o, {find_property("planner"), find_property("gate-mirror")}, log, nullptr);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fclose(log);
  EXPECT_TRUE(r.passed());
  ASSERT_EQ(r.runs.size(), 2u);
  for (const PropertyRun& run : r.runs) {
    SCOPED_TRACE(run.property);
    EXPECT_GT(run.cases, 0);
    EXPECT_GE(run.seconds, 1.15) << "the property stopped before its part of the budget";
    EXPECT_LT(run.seconds, 2.0) << "the property took more than its part of the budget";
  }
  EXPECT_LT(total, 4.5);
  std::filesystem::remove_all(dir);
}

TEST(FuzzEngine, RejectsBadOptions) {
  FuzzOptions o;
  o.progress = false;
  const std::vector<const Property*> p{find_property("planner")};
  EXPECT_THROW(run_fuzz(o, p, nullptr, nullptr), std::invalid_argument);  // no budget
  o.cases = 1;
  o.shard_index = 2;
  o.shard_count = 2;
  EXPECT_THROW(run_fuzz(o, p, nullptr, nullptr), std::invalid_argument);
  o.shard_index = 0;
  o.jobs = 0;
  EXPECT_THROW(run_fuzz(o, p, nullptr, nullptr), std::invalid_argument);
}

TEST(FuzzProperties, TheFourPropertiesExist) {
  for (const char* name : {"planner", "decode", "gate-mirror", "batch-invariance"}) {
    const Property* p = find_property(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_FALSE(p->summary.empty());
  }
  EXPECT_EQ(find_property("no-such-property"), nullptr);
}

TEST(FuzzProperties, EachPassesItsFirstCasesOnTheCurrentCode) {
  // Few cases each: a smoke check that the properties hold on the code as it
  // is (the long runs are `pav fuzz`'s job).
  const std::pair<const char*, int> runs[] = {{"planner", 200}, {"gate-mirror", 100}, {"decode", 3},
                                              {"batch-invariance", 3}, {"reject", 3}, {"stale", 3}};
  for (const auto& [name, n] : runs) {
    const Property* p = find_property(name);
    ASSERT_NE(p, nullptr);
    for (uint64_t seed = 31337; seed < 31337 + uint64_t(n); ++seed) {
      const Verdict v = p->check_seed(seed, case_size(seed), {});
      ASSERT_TRUE(v.passed) << name << " seed " << seed << ": " << v.message;
    }
  }
}

TEST(FuzzReplay, CaseFilesReplayThroughThePropertyTheyName) {
  const auto dir = scratch_dir("replay");
  // A planner case: lengths a decode replay could not even allocate.
  {
    CaseSpec s;
    s.lens = {2147483647, -1, 0, 257, 65537};
    s.hkv = 3;
    s.opt.cu = 80;
    s.max_partitions = 7;
    s.workgroup_budget = 1000;
    const auto path = (dir / "planner.json").string();
    save_case(path, s, {{"property", "planner"}, {"prior_lens", {5, 4, 3, 2, 1}}});
    std::string property;
    const Verdict v = replay_case_file(path, {}, &property);
    EXPECT_EQ(property, "planner");
    EXPECT_TRUE(v.passed) << v.message;
  }
  // A planner case whose params the planner must refuse: the planner property
  // (not decode) reports it.
  {
    CaseSpec s;
    s.lens = {10};
    s.opt.cu = 8;
    s.max_partitions = 9;  // > cu
    const auto path = (dir / "planner-bad.json").string();
    save_case(path, s, {{"property", "planner"}});
    std::string property;
    const Verdict v = replay_case_file(path, {}, &property);
    EXPECT_EQ(property, "planner");
    EXPECT_FALSE(v.passed);
    EXPECT_NE(v.message.find("max_partitions"), std::string::npos) << v.message;
  }
  // A gate-mirror case: the meta's clause and variant are applied again.
  {
    const GateSpec g = fixed_violation_spec(pav::kernels::Clause::block_size, 0, true);
    const auto path = (dir / "gate.json").string();
    save_case(path, g.base,
              {{"property", "gate-mirror"}, {"with_plan", true}, {"violate", "block_size"}, {"variant", 0}});
    std::string property;
    const Verdict v = replay_case_file(path, {}, &property);
    EXPECT_EQ(property, "gate-mirror");
    EXPECT_TRUE(v.passed) << v.message;
    save_case(path, g.base, {{"property", "gate-mirror"}, {"violate", "no_such_clause"}});
    // A meta the property cannot rebuild is bad input naming the file, not a verdict.
    try {
      replay_case_file(path, {});
      ADD_FAILURE() << "a gate-mirror case with an unknown clause replayed";
    } catch (const CaseError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("no_such_clause"), std::string::npos) << e.what();
    }
    save_case(path, g.base, {{"property", "gate-mirror"}, {"violate", "block_size"}, {"variant", 99}});
    try {
      replay_case_file(path, {});
      ADD_FAILURE() << "variant 99 of block_size replayed";
    } catch (const CaseError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": cannot rebuild the gate-mirror case: meta.variant"),
                std::string::npos)
          << e.what();
    }
  }
  // No property in meta (pav replay's files, other suites' saved cases): decode.
  {
    CaseSpec s;
    s.lens = {300, 0, 5};
    s.group = 2;
    const auto path = (dir / "plain.json").string();
    save_case(path, s, json::object());
    std::string property;
    const Verdict v = replay_case_file(path, {}, &property);
    EXPECT_EQ(property, "decode");
    EXPECT_TRUE(v.passed) << v.message;
  }
  std::filesystem::remove_all(dir);
}
