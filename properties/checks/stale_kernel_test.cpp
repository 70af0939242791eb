// SPDX-License-Identifier: Apache-2.0
// The stale property of a kernel that runs pav's plan (kernel_properties'
// "stale"): its generator hands over only plans that no longer describe the
// live lengths (whole ones refreshed from other lengths, torn ones with one
// row left from an earlier refresh), and its verdict passes a kernel that
// answers stale_plan or computes the live call right all the same, and fails
// one that attends the stale plan silently or answers with another status.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"
#include "kernels/planner.hpp"
#include "properties/case/case_format.hpp"
#include "properties/engine/fuzz_engine.hpp"
#include "properties/checks/kernel_properties.hpp"
#include "properties/gen/kernel_gen.hpp"

namespace {

using namespace pav;
using adapters::CallResult;
using adapters::DecodeRequest;
using adapters::Outcome;

// pav's own planned CPU kernel, with one way of answering a stale plan changed.
class Answering : public adapters::KernelUnderTest {
 public:
  enum class Mode { honest, stale_as_ok, stale_as_error, ignores_plan };
  explicit Answering(Mode m)
      : mode_(m), planned_(adapters::open_kernel("pav:cpu --path planned --cu 32")),
        uniform_(adapters::open_kernel("pav:cpu --path uniform")) {}
  const adapters::KernelDescription& description() const override { return planned_->description(); }
  std::string adapter() const override { return "test"; }
  std::string spec() const override { return "pav:cpu planned, answering a stale plan another way"; }
  CallResult check(const DecodeRequest& r) override { return planned_->check(r); }
  CallResult decode(const DecodeRequest& r) override {
    ++calls_;
    if (mode_ == Mode::ignores_plan) {  // splits by itself: the plan is never read
      DecodeRequest own = r;
      own.plan = nullptr;
      own.max_partitions = 0;
      return uniform_->decode(own);
    }
    CallResult res = planned_->decode(r);
    if (res.outcome == Outcome::stale_plan && mode_ == Mode::stale_as_ok) return CallResult::success();
    if (res.outcome == Outcome::stale_plan && mode_ == Mode::stale_as_error) return {Outcome::kernel_error, "plan mismatch"};
    return res;
  }
  int64_t decode_calls() const override { return calls_; }

 private:
  Mode mode_;
  std::unique_ptr<adapters::KernelUnderTest> planned_, uniform_;
  int64_t calls_ = 0;
};

const props::fuzz::Property& stale_property(const adapters::KernelDescription& d,
                                            std::vector<props::fuzz::Property>& keep) {
  keep = props::fuzz::kernel_properties(d);
  for (const auto& p : keep)
    if (p.name == "stale") return p;
  throw std::logic_error("no stale property for a split = plan kernel");
}

struct Tally {
  int passed = 0, failed = 0;
  std::string first_failure;
};

Tally run_seeds(Answering::Mode mode, uint64_t seeds) {
  Answering k(mode);
  std::vector<props::fuzz::Property> keep;
  const props::fuzz::Property& p = stale_property(k.description(), keep);
  props::fuzz::CheckContext ctx;
  ctx.kernel = &k;
  Tally t;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const props::fuzz::Verdict v = p.check_seed(seed, props::fuzz::case_size(seed), ctx);
    if (v.passed) {
      ++t.passed;
    } else {
      if (t.failed++ == 0) t.first_failure = "seed " + std::to_string(seed) + ": " + v.message;
    }
  }
  return t;
}

TEST(StaleKernelProperty, OnlyKernelsThatRunPavsPlanHaveIt) {
  for (const char* spec : {"pav:cpu --path planned", "pav:cpu --path uniform"}) {
    const auto k = adapters::open_kernel(spec);
    bool has = false;
    for (const auto& p : props::fuzz::kernel_properties(k->description())) has = has || p.name == "stale";
    EXPECT_EQ(has, k->description().split == adapters::Split::plan) << spec;
  }
}

// Every value hands over a stale plan; half are torn, and some torn rows are
// another sequence's row recording that sequence's live length (what a check
// of recorded lengths alone lets through).
TEST(StaleKernelProperty, EveryGeneratedPlanIsStaleAndSomeAreTornAcrossSequences) {
  const auto k = adapters::open_kernel("pav:cpu --path planned --cu 32");
  const rc::Gen<props::StaleKernelCase> gen = props::gen_stale_kernel_case(k->description());
  int torn = 0, foreign_live = 0;
  constexpr int kDraws = 200;
  for (uint64_t seed = 1; seed <= kDraws; ++seed) {
    const props::StaleKernelCase v = props::sample(gen, seed, props::fuzz::case_size(seed));
    kernels::WorkPlan plan(props::plan_params(v.spec));
    props::make_stale_plan(v, plan);
    ASSERT_FALSE(kernels::plan_is_fresh(plan.view(), v.spec.lens.data(), int64_t(v.spec.lens.size())))
        << "seed " << seed << ": " << props::to_string(v);
    if (v.torn_row < 0) continue;
    ++torn;
    const int32_t* row = plan.work_info().data() + 4 * v.torn_row;
    kernels::WorkPlan fresh(props::plan_params(v.spec));
    fresh.refresh(v.spec.lens.data());
    const int32_t owner = fresh.work_info()[size_t(4 * v.torn_row)];
    if (row[0] != owner && row[0] >= 0 && row[0] < int32_t(v.spec.lens.size()) && row[3] == v.spec.lens[size_t(row[0])])
      ++foreign_live;
  }
  EXPECT_GE(torn, kDraws / 4);
  EXPECT_LE(torn, kDraws * 3 / 4);
  EXPECT_GT(foreign_live, 0) << "no torn row was another sequence's, recording its live length";
}

TEST(StaleKernelProperty, AKernelThatAnswersStalePlanPasses) {
  const Tally t = run_seeds(Answering::Mode::honest, 40);
  EXPECT_EQ(t.failed, 0) << t.first_failure;
}

TEST(StaleKernelProperty, AKernelThatNeverReadsThePlanPassesWhenItsOutputIsRight) {
  const Tally t = run_seeds(Answering::Mode::ignores_plan, 30);
  EXPECT_EQ(t.failed, 0) << t.first_failure;
}

TEST(StaleKernelProperty, AKernelThatAttendsAStalePlanSilentlyFails) {
  const Tally t = run_seeds(Answering::Mode::stale_as_ok, 40);
  EXPECT_GT(t.failed, 30) << t.passed << " passed";
  EXPECT_NE(t.first_failure.find("status ok on a stale plan"), std::string::npos) << t.first_failure;
}

TEST(StaleKernelProperty, AnotherStatusForAStalePlanFails) {
  const Tally t = run_seeds(Answering::Mode::stale_as_error, 20);
  EXPECT_EQ(t.passed, 0);
  EXPECT_NE(t.first_failure.find("a stale plan answered with kernel error: plan mismatch"), std::string::npos)
      << t.first_failure;
}

// A saved stale case carries its plan lengths and torn row; malformed ones are
// refused by name.
TEST(StaleKernelProperty, ACaseFileCarriesThePlanAndRefusesMalformedOnes) {
  Answering k(Answering::Mode::stale_as_ok);
  std::vector<props::fuzz::Property> keep;
  const props::fuzz::Property& p = stale_property(k.description(), keep);
  props::fuzz::CheckContext ctx;
  ctx.kernel = &k;
  const std::optional<props::fuzz::Found> f = p.shrink_seed(3, props::fuzz::case_size(3), ctx, props::fuzz::ShrinkLimits{300, 120, nullptr});
  ASSERT_TRUE(f.has_value());
  ASSERT_TRUE(f->meta.contains("stale")) << f->meta.dump();
  EXPECT_EQ(f->meta["stale"]["plan_lens"].size(), f->spec.lens.size());
  EXPECT_FALSE(p.replay(f->spec, f->meta, ctx).passed);  // the saved case fails again
  Answering honest(Answering::Mode::honest);
  ctx.kernel = &honest;
  EXPECT_TRUE(p.replay(f->spec, f->meta, ctx).passed);  // and passes an honest kernel
  const int64_t capacity = kernels::WorkPlan(plan_params(f->spec)).capacity();
  for (const int64_t last : {int64_t(-1), capacity - 1}) {  // inside the bound on both ends: a case that replays
    nlohmann::json meta = f->meta;
    meta["stale"]["torn_row"] = last;
    EXPECT_NO_THROW((void)p.replay(f->spec, meta, ctx)) << last;
  }
  const std::vector<std::pair<nlohmann::json, std::string>> bad{
      {nlohmann::json::object(), "meta.stale.plan_lens"},
      {{{"stale", {{"plan_lens", std::vector<int32_t>(f->spec.lens.size() + 1, 1)}}}},
       "meta.stale.plan_lens: " + std::to_string(f->spec.lens.size() + 1) + " lengths for"},
      {{{"stale", {{"plan_lens", {-1}}}}}, "lengths are integers"},
      {{{"stale", {{"plan_lens", f->meta["stale"]["plan_lens"]}, {"torn_row", -2}}}}, "meta.stale.torn_row"},
      {{{"stale", {{"plan_lens", f->meta["stale"]["plan_lens"]}, {"torn_row", capacity}}}},
       "meta.stale.torn_row: " + std::to_string(capacity) + " past the plan's"},
  };
  for (const auto& [meta, want] : bad) {
    try {
      (void)p.replay(f->spec, meta, ctx);
      ADD_FAILURE() << "accepted " << meta.dump();
    } catch (const props::CaseError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

}  // namespace
